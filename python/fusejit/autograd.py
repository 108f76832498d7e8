"""A spec as a differentiable PyTorch function (docs/python.md, "Training").

    f = fusejit.autograd.function("chain.yaml")
    y = f(x, w, b)            # forward kernel; y.backward() runs the generated backward stages

The forward runs the spec with its saved values (the anchor's output) as extra
outputs; backward allocates the program's buffers with torch.empty and runs
each stage (fusejit.Backward) on the gradients' device: CUDA tensors on the
GPU, CPU tensors on the LLVM CPU backend. Inputs whose requires_grad is False
get no gradient work (a program is built per set of such inputs, then cached).
"""
import threading

import torch

from ._kernel import DeviceKernels, _as_spec
from .backward import Backward

_DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}


class DifferentiableSpec:
    """The forward and backward kernels of one spec, per device and no_grad set."""

    def __init__(self, spec, *, arch="auto", config=None):
        self.spec = _as_spec(spec)
        self._arch, self._config = arch, config
        self._programs = {}  # frozenset(no_grad) -> (Backward, forward kernels, [stage kernels])
        self._lock = threading.Lock()

    def program(self, no_grad):
        key = frozenset(no_grad)
        with self._lock:
            entry = self._programs.get(key)
            if entry is None:
                bw = Backward(self.spec, no_grad=sorted(key))
                label = f"fusejit backward of '{self.spec.name}'"
                entry = (bw, DeviceKernels(bw.forward, self._arch, self._config, label),
                         [DeviceKernels(s, self._arch, self._config, label) for s in bw.stages])
                self._programs[key] = entry
        return entry

    def __call__(self, *inputs):
        names = [a.name for a in self.spec.inputs]
        if len(inputs) != len(names):
            raise TypeError(f"fusejit '{self.spec.name}' takes {len(names)} inputs ({', '.join(names)}), "
                            f"got {len(inputs)}")
        for name, t in zip(names, inputs):
            if not isinstance(t, torch.Tensor):
                raise TypeError(f"fusejit '{self.spec.name}': input '{name}': expected a torch.Tensor, "
                                f"got {type(t).__name__}")
        out = _FusedFunction.apply(self, *inputs)
        return out[0] if len(out) == 1 else out


def function(spec, *, arch="auto", config=None):
    """A callable running `spec` (path, YAML text or fusejit.Spec) forward
    with autograd support; inputs in spec order."""
    return DifferentiableSpec(spec, arch=arch, config=config)


class _FusedFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, fn, *inputs):
        names = [a.name for a in fn.spec.inputs]
        no_grad = [n for n, t in zip(names, inputs) if not t.requires_grad]
        bw, forward, stages = fn.program(no_grad)
        outs = forward.for_device(inputs[0].device)(*[t.detach() for t in inputs])
        outs = outs if isinstance(outs, tuple) else (outs,)
        n_out = len(fn.spec.outputs)
        ctx.fn, ctx.bw, ctx.stages, ctx.names = fn, bw, stages, names
        ctx.saved_names = [a.name for a in bw.forward.outputs]
        ctx.save_for_backward(*inputs, *outs)
        ctx.n_inputs = len(inputs)
        return tuple(outs[:n_out])

    @staticmethod
    def backward(ctx, *grads):
        saved = ctx.saved_tensors
        inputs, outs = saved[:ctx.n_inputs], saved[ctx.n_inputs:]
        bw = ctx.bw
        env = dict(zip(ctx.names, inputs))
        env.update(zip(ctx.saved_names, outs))
        for buf, g, out in zip(bw.output_grads, grads, outs):
            env[buf.name] = torch.zeros_like(out) if g is None else g.to(out.dtype).contiguous()
        device = inputs[0].device
        for spec, kernels in zip(bw.stages, ctx.stages):
            args = [env[a.name].reshape(a.shape) for a in spec.inputs]  # a view of the buffer
            result = kernels.for_device(device)(*args)
            result = result if isinstance(result, tuple) else (result,)
            for a, t in zip(spec.outputs, result):
                env[a.name] = t
        out = [None]
        for name, t, needs in zip(ctx.names, inputs, ctx.needs_input_grad[1:]):
            if not needs:
                out.append(None)
            elif name in bw.input_grads:
                out.append(env[bw.input_grads[name]].reshape(t.shape).to(t.dtype))
            else:  # nothing differentiable depends on it
                out.append(torch.zeros_like(t))
        return tuple(out)
