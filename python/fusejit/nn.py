"""Any fusion spec as an nn.Module (docs/python.md; needs torch).

    block = fusejit.nn.Fused("linear_gelu.yaml", w=w, b=b)   # spec inputs held as parameters
    y = block(x)                                              # the other inputs, in spec order or by name

The spec inputs given to the constructor become nn.Parameters under their spec
names (state_dict, .to(), optimizers see them); the others are the forward's
inputs. Shapes and dtypes are the spec's. One kernel per device, compiled at
the first call there. On torch >= 2.4, under torch.compile the module calls
the spec's torch.library operator (fusejit.torch.op_for), so torch.compile
traces it without a graph break; called eagerly (and on older torch) it
launches the kernel directly, which costs less host time. CUDA graphs capture
either.

When gradients are wanted (grad mode on and an input or parameter requiring
grad), the module runs fusejit.autograd: the forward saves what the generated
backward needs, and loss.backward() runs the backward stages. A chain with an
op that has no derivative (the adjoints of the backward's gather ops, e.g.
im2col_backward) runs forward only,
with a warning, once, that its outputs are not connected to autograd.
"""
import warnings

import torch

from . import torch as _fj_torch
from ._kernel import DeviceKernels, _as_spec
from .autograd import _eager

_DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}


class Fused(torch.nn.Module):
    """`spec`: a path, YAML text or fusejit.Spec. `parameters`: spec input name
    -> tensor (its shape and dtype must be the spec's). `config`, `arch`: as for
    fusejit.compile."""

    def __init__(self, spec, *, config=None, arch="auto", **parameters):
        super().__init__()
        self._spec = _as_spec(spec)
        self._label = f"Fused({self._spec.name or 'spec'})"
        args = {a.name: a for a in self._spec.inputs}
        for name, value in parameters.items():
            arg = args.get(name)
            if arg is None:
                raise TypeError(f"{self._label}: '{name}' is not an input of the spec "
                                f"(inputs: {', '.join(args)})")
            if not isinstance(value, torch.Tensor):
                raise TypeError(f"{self._label}: parameter '{name}': expected a torch.Tensor, "
                                f"got {type(value).__name__}")
            if tuple(value.shape) != arg.shape:
                raise ValueError(f"{self._label}: parameter '{name}': expected shape {arg.shape}, "
                                 f"got {tuple(value.shape)}")
            if value.dtype != _DTYPES[arg.dtype]:
                raise TypeError(f"{self._label}: parameter '{name}': expected dtype "
                                f"{_DTYPES[arg.dtype]} ({arg.dtype}), got {value.dtype}")
            param = value if isinstance(value, torch.nn.Parameter) else torch.nn.Parameter(value)
            try:
                self.register_parameter(name, param)
            except (KeyError, TypeError) as e:  # a name torch refuses (".", or an attribute of the module)
                raise ValueError(f"{self._label}: parameter '{name}': {e}") from None
        self._names = list(args)  # every spec input, in order
        self._inputs = [n for n in args if n not in parameters]
        # The spec's operator where this torch has torch.library fake kernels, else its kernels, called directly.
        self._op = _fj_torch.op_for(self._spec, config=config, arch=arch) if _fj_torch.available() else None
        self._kernels = DeviceKernels(self._spec, arch, config, self._label)
        self._warned_autograd = False
        self._differentiable = None  # fusejit.autograd.DifferentiableSpec, built when first needed
        self._compile_args = dict(config=config, arch=arch)

    @property
    def spec(self):
        return self._spec

    @property
    def input_names(self):
        """The forward's inputs, in order (the spec inputs that are not parameters)."""
        return list(self._inputs)

    def forward(self, *inputs, **named):
        if len(inputs) > len(self._inputs):
            raise TypeError(f"{self._label} takes {len(self._inputs)} inputs "
                            f"({', '.join(self._inputs)}), got {len(inputs)}")
        given = dict(zip(self._inputs, inputs))
        for name, value in named.items():
            if name not in self._inputs:
                what = "a parameter of the module" if name in self._parameters else "not an input"
                raise TypeError(f"{self._label}: '{name}' is {what} (inputs: {', '.join(self._inputs)})")
            if name in given:
                raise TypeError(f"{self._label}: input '{name}' given twice")
            given[name] = value
        missing = [n for n in self._inputs if n not in given]
        if missing:
            raise TypeError(f"{self._label}: missing input(s) {', '.join(missing)}")
        names = self._names
        params = self._parameters
        tensors = [given[n] if n in given else params[n] for n in names]
        for name, t in zip(names, tensors):
            if not isinstance(t, torch.Tensor):
                raise TypeError(f"{self._label}: input '{name}': expected a torch.Tensor, got {type(t).__name__}")
        lead = names.index(self._inputs[0]) if self._inputs else 0
        device = tensors[lead].device
        for name, t in zip(names, tensors):
            if t.device != device:
                raise ValueError(f"{self._label}: '{name}' is on {t.device}, '{names[lead]}' on {device} "
                                 f"(move the module with .to(device))")
        if torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
            differentiable = self._autograd()
            if differentiable is not None:
                return differentiable(*tensors)
        if self._op is not None and not _eager(tensors):
            return self._op(*[t.detach() for t in tensors])
        return self._kernels.for_device(device)(*tensors)  # eager: the kernel without the operator's dispatch

    def _autograd(self):
        """The spec with its generated backward, or None (with a warning, once) when it has none."""
        if self._differentiable is None and not self._warned_autograd:
            from . import autograd
            from ._lib import SpecError
            try:
                self._differentiable = autograd.function(self._spec, **self._compile_args)
            except SpecError as e:
                self._warned_autograd = True
                warnings.warn(f"{self._label}: no backward ({e}); the output is not connected to autograd "
                              f"(run under torch.no_grad() to silence this)", stacklevel=4)
        return self._differentiable

    def extra_repr(self):
        return f"spec={self._spec.name!r}, inputs={self._inputs}, parameters={list(self._parameters)}"
