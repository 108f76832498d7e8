"""A spec as a differentiable PyTorch function (docs/python.md, "Training").

    f = fusejit.autograd.function("chain.yaml")
    y = f(x, w, b)            # forward kernel; y.backward() runs the generated backward stages

The forward runs the spec with its saved values (the anchor's output) as extra
outputs; backward allocates the program's buffers with torch.empty and runs
each stage (fusejit.Backward) on the gradients' device: CUDA tensors on the
GPU, CPU tensors on the LLVM CPU backend. Inputs whose requires_grad is False
get no gradient work (a program is built per set of such inputs, then cached);
a gradient fusejit cannot compute yet (one through a gather op) is an error only
when it is asked for.

On torch >= 2.4 the forward and every stage are torch.library operators
(fusejit.torch.op_for) and the backward is the forward operator's registered
autograd formula, so torch.compile traces forward and backward without a graph
break. Called eagerly on plain tensors (no torch.compile tracing, no tensor
subclass), and on older torch, a torch.autograd.Function launches the same
kernels directly: the operator dispatch and its autograd wrapper cost more host
time than the kernels of a small step (docs/python.md, "Host overhead").
"""
import threading

import torch

from . import _launcher
from . import torch as _fj_torch
from ._kernel import DeviceKernels, _as_spec, _current_stream
from ._lib import SpecError, check
from .backward import Backward

_registered = set()  # forward operators with an autograd formula
_registered_lock = threading.Lock()

_DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}


class DifferentiableSpec:
    """The forward and backward kernels of one spec, per device and no_grad set."""

    def __init__(self, spec, *, arch="auto", config=None):
        self.spec = _as_spec(spec)
        self._input_names = [a.name for a in self.spec.inputs]
        self._arch, self._config = arch, config
        self._programs = {}  # (frozenset(no_grad), backend, use_ops) -> _Program
        self._by_needs = {}  # (needs_input_grad, device type, direct) -> _Program: a step's one lookup
        self._launchers = {}  # (device type, index) -> the forward kernel as a raw launch (_forward_launcher)
        self._read_outputs = {}  # (needs_input_grad, device type) -> read_outputs
        self._native_ag = {}  # (requires_grad flags, device) -> _native_autograd's entry
        self._ag_module = _UNSET  # launcher_autograd's module or None, looked up at the first call
        self._n_outputs = len(self.spec.outputs)
        self._lock = threading.Lock()
        try:
            self.forward_spec = Backward(self.spec).forward  # the same for every no_grad set
        except SpecError as e:
            # a gradient fusejit cannot compute yet (e.g. through im2col_backward): the forward is the same without
            # it; backward raises the error again only if that gradient is asked for (requires_grad)
            try:
                self.forward_spec = Backward(self.spec, no_grad=self.input_names).forward
            except SpecError:
                raise e from None
        self._forward_kernels = DeviceKernels(self.forward_spec, arch, config, f"fusejit '{self.spec.name}'")
        self._op = None
        if _fj_torch.available():
            self._op = _fj_torch.op_for(self.forward_spec, config=config, arch=arch)
            name = _fj_torch.op_name(self.forward_spec, config, arch)
            with _registered_lock:
                if name not in _registered:
                    torch.library.register_autograd(f"fusejit::{name}", self._op_backward,
                                                    setup_context=_op_setup_context)
                    _registered.add(name)

    @property
    def input_names(self):
        return list(self._input_names)

    def program(self, no_grad, device_type="cuda", direct=False):
        """The _Program for inputs `no_grad` without gradients, its stages built for `device_type`'s backend
        ("cuda" or "cpu"); `direct`: the stages' kernels called without their torch.library operators (eager only:
        torch.compile cannot trace them)."""
        backend = "cpu" if device_type == "cpu" else "cuda"
        use_ops = self._op is not None and not direct
        key = (frozenset(no_grad), backend, use_ops)
        entry = self._programs.get(key)
        if entry is not None:
            return entry
        with self._lock:
            entry = self._programs.get(key)
            if entry is None:
                bw = Backward(self.spec, no_grad=sorted(key[0]), backend=backend)
                if use_ops:  # operators: traceable by torch.compile
                    ops = [_fj_torch.op_for(s, config=self._config, arch=self._arch) for s in bw.stages]
                    runners = [lambda device, args, op=op: op(*args) for op in ops]
                    kernels = None
                else:
                    label = f"fusejit backward of '{self.spec.name}'"
                    kernels = [DeviceKernels(s, self._arch, self._config, label) for s in bw.stages]
                    runners = [lambda device, args, k=k: k.for_device(device)(*args) for k in kernels]
                entry = _Program(bw, runners, kernels)
                self._programs[key] = entry
        return entry

    def _op_backward(self, ctx, *grads):
        saved = ctx.saved_tensors  # (each access unpacks every saved tensor)
        inputs, outs = saved[:ctx.n_inputs], saved[ctx.n_inputs:]
        needs = ctx.needs_input_grad
        direct = _eager(inputs)
        grads = self._backward(inputs, outs, grads, needs, direct=direct)
        if direct:  # (not while torch.compile traces the backward: it decides what is differentiated)
            grads = _first_derivatives_only(grads, inputs)
        return tuple(g if need else None for g, need in zip(grads, needs))

    def program_for(self, needs, device_type, direct):
        """program() for the inputs whose `needs` (ctx.needs_input_grad) entry is False, looked up once."""
        key = (needs, device_type, direct)
        prog = self._by_needs.get(key)
        if prog is None:
            prog = self.program([n for n, need in zip(self._input_names, needs) if not need], device_type, direct)
            self._by_needs[key] = prog
        return prog

    def _backward(self, inputs, outs, grads, needs, direct):
        """Runs the stages; each input's gradient (zeros where nothing differentiable depends on it). `outs`: the
        forward's outputs, None for one no stage reads (not saved)."""
        names = self._input_names
        device = inputs[0].device
        prog = self.program_for(tuple(needs), device.type, direct)
        native = prog.native_for(device) if direct else None
        if native is not None:  # the C++ launcher (FUSEJIT_LAUNCHER=cpp): the whole program in one call
            stream = 0 if device.type == "cpu" else _current_stream(torch, device.index)
            status, result = native.run(list(inputs), list(outs), list(grads[:len(prog.output_grad_names)]), stream)
            check(status)
            return result
        env = dict(zip(names, inputs))
        env.update((name, out) for name, out in zip(prog.saved_names, outs) if out is not None)
        for name, g, (shape, dtype) in zip(prog.output_grad_names, grads, prog.output_meta):
            if g is None:
                g = torch.zeros(shape, dtype=dtype, device=device)
            elif g.dtype is not dtype or not g.is_contiguous():
                g = g.to(dtype).contiguous()
            env[name] = g
        launches = prog.launches_for(device) if direct else None
        if launches is not None:
            # the direct path: every buffer in env is contiguous and of its stage's dtype and size (the forward's
            # kernel checked the inputs; the gradients were made so above; the rest were allocated here)
            stream = None if device.type == "cpu" else _current_stream(torch, device.index)
            for launch, handle, in_names, out_specs, out_names, array_type, count in launches:
                outs = [like.new_empty(shape) for shape, like in out_specs]
                check(launch(handle, array_type(*[env[n].data_ptr() for n in in_names],
                                                *[t.data_ptr() for t in outs]), count, stream))
                env.update(zip(out_names, outs))
        for run, ins, out_names in (() if launches is not None else prog.stages):
            args = []
            for name, shape in ins:  # views of the buffers, in the stage's shapes
                t = env[name]
                args.append(t if t.shape == shape else t.reshape(shape))
            result = run(device, args)
            env.update(zip(out_names, result if isinstance(result, tuple) else (result,)))
        grads = []
        for name, t in zip(names, inputs):
            buf = prog.input_grads.get(name)
            if buf is None:
                grads.append(torch.zeros_like(t))
                continue
            g = env[buf]
            g = g if g.shape == t.shape else g.reshape(t.shape)
            grads.append(g if g.dtype == t.dtype else g.to(t.dtype))
        return grads

    def __call__(self, *inputs):
        names = self._input_names
        if len(inputs) != len(names):
            raise TypeError(f"fusejit '{self.spec.name}' takes {len(names)} inputs ({', '.join(names)}), "
                            f"got {len(inputs)}")
        for name, t in zip(names, inputs):
            if not isinstance(t, torch.Tensor):
                raise TypeError(f"fusejit '{self.spec.name}': input '{name}': expected a torch.Tensor, "
                                f"got {type(t).__name__}")
        return self._call(inputs, False)

    def _call(self, inputs, checked):
        """The forward on `inputs`; `checked`: the caller made them contiguous tensors of the spec's shapes and
        dtypes (fusejit.models builds the spec from them), so the eager forward launches its kernel without a
        Kernel call's argument checks (the device is still checked)."""
        if self._op is not None and not _eager(inputs):
            out = self._op(*inputs)
            out = (out if isinstance(out, tuple) else (out,))[:self._n_outputs]
        else:
            ag = self._ag_module
            if ag is _UNSET:  # set up once: the mode when this spec first runs
                ag = self._ag_module = _launcher.autograd_module()
            native = self._native_autograd(inputs, ag) if checked and ag is not None else None
            if native is not None:  # FUSEJIT_LAUNCHER=cpp-autograd: forward and backward node in C++
                ext, fwd, prog = native
                out = ext.apply(fwd, prog, self._n_outputs, inputs)
            else:
                out = _FusedFunction.apply(self, checked, *inputs)
        return out[0] if len(out) == 1 else tuple(out)

    def _native_autograd(self, inputs, ext):
        """(launcher_autograd's module, forward id, program id) for `inputs` (checked, eager) in mode
        cpp-autograd, or None: another mode, a program fusejit cannot build (the Python path raises its error if
        a gradient is asked for), or inputs on another device than the first's (the Python path names it)."""
        device = inputs[0].device
        key = (tuple(t.requires_grad for t in inputs), device.type, device.index)
        native = self._native_ag.get(key, _UNSET)
        if native is _UNSET:
            native = None
            if ext is not None:
                launcher = self._forward_launcher(device)
                k, kernel_device = launcher[7], launcher[5]
                try:
                    args = self.program_for(key[0], device.type, True).native_args(device)
                except SpecError:
                    args = None
                if args is not None:
                    fwd = ext.register_forward(k._handle.value, *_native_outputs(k._torch_args[1]))
                    native = (ext, fwd, ext.register_program(*args), kernel_device)
            self._native_ag[key] = native
        if native is None:
            return None
        ext, fwd, prog, kernel_device = native
        for t in inputs:
            if t.device != kernel_device:
                return None
        return ext, fwd, prog

    def _forward_launcher(self, device):
        """The forward kernel on `device` as a raw launch: fj_kernel_launch, the kernel's handle, the pointer
        array's type and length, its outputs' (shape, an empty tensor of the dtype), its device, and whether it
        runs on the CPU backend (synchronous, no stream)."""
        key = (device.type, device.index)
        launcher = self._launchers.get(key)
        if launcher is None:
            k = self._forward_kernels.for_device(device)
            k._torch_setup()
            _, out_specs, kernel_device = k._torch_args
            ext = _launcher.module()
            native = None if ext is None else ext.Forward(k._handle.value, *_native_outputs(out_specs))
            launcher = (k._lib.fj_kernel_launch, k._handle, k._pointer_array, len(k.args), out_specs, kernel_device,
                        k.backend == "cpu", k, native)
            self._launchers[key] = launcher
        return launcher

    def _run_forward(self, inputs, checked):
        """The forward kernel's outputs (a tuple). Checked inputs (see _call) on one device skip the Kernel
        call's checks; anything else goes through it, whose errors name the argument."""
        device = inputs[0].device
        launch, handle, array_type, count, out_specs, kernel_device, cpu, kernel, native = self._forward_launcher(device)
        if checked:
            for t in inputs:
                if t.device != kernel_device:
                    break
            else:
                stream = 0 if cpu else _current_stream(torch, kernel_device.index)
                if native is not None:  # the C++ launcher (FUSEJIT_LAUNCHER=cpp)
                    status, outs = native.run(inputs, stream)
                    check(status)
                    return tuple(outs)
                outs = [like.new_empty(shape) for shape, like in out_specs]
                check(launch(handle, array_type(*[t.data_ptr() for t in inputs], *[t.data_ptr() for t in outs]),
                             count, stream or None))
                return tuple(outs)
        outs = kernel(*inputs)
        return outs if isinstance(outs, tuple) else (outs,)

    def read_outputs(self, needs, device_type):
        """The forward outputs the backward program for `needs` (needs_input_grad) reads, looked up once; all of
        them where that program cannot be built (its backward raises the error, if a gradient is asked for)."""
        key = (needs, device_type)
        reads = self._read_outputs.get(key, _UNSET)
        if reads is _UNSET:
            try:
                reads = self.program_for(needs, device_type, True).read_outputs
            except SpecError:
                reads = None  # every output
            self._read_outputs[key] = reads
        return reads


class _Program:
    """A backward program with what each step looks up: the stages' runners with their arguments' names and
    shapes, the buffer names of the saved values, of the output gradients and of the input gradients."""

    def __init__(self, bw, runners, kernels=None):
        self.backward = bw
        self._kernels = kernels  # the stages' DeviceKernels on the direct path (no operators)
        self._launches = {}  # device -> launches_for's list
        self._native = {}  # device -> the C++ launcher's Program, or None (native_for)
        self.saved_names = [a.name for a in bw.forward.outputs]
        self.output_grad_names = [b.name for b in bw.output_grads]
        # the spec outputs' shapes and dtypes: a gradient that is None becomes zeros of them
        self.output_meta = [(torch.Size(a.shape), _DTYPES[a.dtype]) for a in bw.forward.outputs]
        self.input_grads = dict(bw.input_grads)
        self.stages = [(run, [(a.name, torch.Size(a.shape)) for a in s.inputs], [a.name for a in s.outputs])
                       for run, s in zip(runners, bw.stages)]
        # the forward's outputs a stage reads: only these need saving (an output nothing reads, e.g. the chain's
        # result where the backward recomputes from the anchor's output, would be kept alive for nothing)
        reads = {name for _, ins, _ in self.stages for name, _ in ins}
        self.read_outputs = [j for j, name in enumerate(self.saved_names) if name in reads]

    def native_for(self, device):
        """The program as launcher.cpp's Program on `device` (FUSEJIT_LAUNCHER=cpp), or None."""
        key = (device.type, device.index)
        if key not in self._native:
            ext = _launcher.module()
            args = self.native_args(device) if ext is not None else None
            self._native[key] = None if args is None else ext.Program(*args)
        return self._native[key]

    def native_args(self, device):
        """The C++ launcher's Program arguments for `device`, or None without direct kernels: buffers as slots (the
        forward's inputs first, then its outputs, the output gradients and the stages' outputs), the saved
        outputs' slots, the output gradients' (slot, shape, dtype), the stages' (handle, input slots, output
        slots, shapes, dtypes) and each input's gradient slot (-1: zeros)."""
        launches = self.launches_for(device)
        if launches is None:
            return None
        slots = {}
        inputs = [a.name for a in self.backward.spec.inputs]
        for name in inputs + self.saved_names + self.output_grad_names:  # the inputs: slots 0..n-1, in order
            slots.setdefault(name, len(slots))
        stages = []
        for _, handle, in_names, out_specs, out_names, _, _ in launches:
            for name in out_names:
                slots.setdefault(name, len(slots))
            stages.append((handle.value, [slots[n] for n in in_names], [slots[n] for n in out_names],
                           *_native_outputs(out_specs)))
        grads = [(slots[name], list(shape), _launcher.dtype_name(dtype))
                 for name, (shape, dtype) in zip(self.output_grad_names, self.output_meta)]
        reads = set(self.read_outputs)  # (an output no stage reads is not saved)
        return (len(slots), [slots[n] if j in reads else -1 for j, n in enumerate(self.saved_names)], grads, stages,
                [slots[self.input_grads[n]] if n in self.input_grads else -1 for n in inputs])

    def launches_for(self, device):
        """The stages as raw launches on `device` (None without direct kernels): per stage fj_kernel_launch, the
        kernel's handle, its inputs' buffer names, its outputs' (shape, an empty tensor of the dtype) and buffer
        names, the pointer array's type and length. Compiles the stages the first time; a Kernel call's checks
        are left out, so a step costs one allocation per output and one ctypes call per stage."""
        if self._kernels is None:
            return None
        key = (device.type, device.index)
        launches = self._launches.get(key)
        if launches is None:
            launches = []
            for kernels, (_, ins, out_names) in zip(self._kernels, self.stages):
                k = kernels.for_device(device)
                k._torch_setup()
                _, out_specs, _ = k._torch_args
                launches.append((k._lib.fj_kernel_launch, k._handle, [name for name, _ in ins], out_specs,
                                 out_names, k._pointer_array, len(k.args)))
            self._launches[key] = launches
        return launches


_PLAIN = (torch.Tensor, torch.nn.Parameter)
_UNSET = object()


def _native_outputs(out_specs):
    """A kernel's outputs as the C++ launchers take them: their shapes and dtype names."""
    return [list(shape) for shape, _ in out_specs], [_launcher.dtype_name(like.dtype) for _, like in out_specs]
_is_compiling = getattr(getattr(torch, "compiler", None), "is_compiling", None)
_functorch_active = getattr(torch._C, "_are_functorch_transforms_active", None)


def _eager(tensors):
    """Whether kernels may be launched directly on `tensors`: no torch.compile tracing, no torch.func transform
    (its wrapped tensors are of type Tensor but have no storage), and plain tensors (not the fake or functional
    tensors of a tracer, which only the operators accept)."""
    if _is_compiling is not None and _is_compiling():
        return False
    if _functorch_active is not None and _functorch_active():
        return False
    return all(type(t) in _PLAIN for t in tensors)


def _first_derivatives_only(grads, inputs):
    """The stages' kernels record no autograd graph. Under create_graph (grad mode on in the backward), the
    gradients raise when differentiated again, instead of a second derivative that would silently be missing."""
    if not torch.is_grad_enabled():
        return grads
    wanted = [t for t in inputs if t.requires_grad]
    if not wanted:
        return grads
    return [_NoSecondDerivative.apply(g, *wanted) for g in grads]


class _NoSecondDerivative(torch.autograd.Function):
    """g, tied to the inputs it is a gradient for; differentiating it raises."""

    @staticmethod
    def forward(ctx, g, *inputs):
        return g.view_as(g)

    @staticmethod
    def backward(ctx, *grads):
        raise RuntimeError("fusejit: the generated backward is not differentiable (no second derivatives through "
                           "a fusejit chain)")


def _op_setup_context(ctx, inputs, output):
    ctx.save_for_backward(*inputs, *output)
    ctx.n_inputs = len(inputs)


def function(spec, *, arch="auto", config=None):
    """A callable running `spec` (path, YAML text or fusejit.Spec) forward
    with autograd support; inputs in spec order."""
    return DifferentiableSpec(spec, arch=arch, config=config)


class _FusedFunction(torch.autograd.Function):  # eager calls, and torch < 2.4
    @staticmethod
    def forward(ctx, fn, checked, *inputs):
        outs = fn._run_forward(inputs, checked)
        ctx.fn, ctx.n_inputs, ctx.n_outs = fn, len(inputs), len(outs)
        # the outputs the backward reads (the program for this set of inputs wanting gradients)
        reads = fn.read_outputs(ctx.needs_input_grad[2:], inputs[0].device.type)
        ctx.read_outputs = range(len(outs)) if reads is None else reads
        ctx.save_for_backward(*inputs, *[outs[j] for j in ctx.read_outputs])
        return outs[:fn._n_outputs]

    @staticmethod
    def backward(ctx, *grads):
        saved = ctx.saved_tensors  # (each access unpacks every saved tensor)
        inputs, kept = saved[:ctx.n_inputs], saved[ctx.n_inputs:]
        outs = [None] * ctx.n_outs
        for j, out in zip(ctx.read_outputs, kept):
            outs[j] = out
        needs = ctx.needs_input_grad[2:]
        grads = _first_derivatives_only(ctx.fn._backward(inputs, outs, grads, needs, direct=True), inputs)
        return (None, None) + tuple(g if need else None for g, need in zip(grads, needs))
