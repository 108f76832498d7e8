"""Drop-in nn.Modules for the seed chains, run by fusejit.

Each takes the constructor arguments of the PyTorch model it replaces, holds
the same parameters under the same names (so load_state_dict works both ways),
initialized as PyTorch does, and compiles one kernel per input shape, dtype
and device at first use (cached on the module).

Gradients: when they are wanted, the chain's generated backward runs
(fusejit.autograd): all three train. A chain fusejit cannot differentiate
(none of these) would run forward only, with a warning once.
Precision: precision=None picks it from the input's dtype (float32 -> "fp32",
float16 -> "f16", bfloat16 -> "bf16"); pass "tf32" to opt into TF32.
"""
import warnings

import torch
from torch import nn

from . import specs
from ._kernel import compile as _compile

_DTYPES = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}
_AUTO_PRECISION = {"f32": "fp32", "f16": "f16", "bf16": "bf16"}
_PRECISIONS = ("fp32", "tf32", "bf16", "f16")
_MISSING = object()


def _desc(t, name, module=None):
    kind = _DTYPES.get(t.dtype)
    if kind is None:
        what = f"{type(module).__name__}.{name}" if module is not None else name
        raise TypeError(f"{what}: fusejit supports float32, float16 and bfloat16, got {t.dtype}")
    return tuple(t.shape), kind


def _conv_attrs(conv):
    if isinstance(conv.padding, str):
        raise NotImplementedError(f"conv padding={conv.padding!r} (use explicit ints)")
    if conv.padding_mode != "zeros":
        raise NotImplementedError(f"conv padding_mode={conv.padding_mode!r}")
    return dict(stride=conv.stride, padding=conv.padding, dilation=conv.dilation,
                groups=conv.groups)


class _FusedModule(nn.Module):
    def __init__(self, precision=None, arch="auto", config=None):
        super().__init__()
        if precision is not None and precision not in _PRECISIONS:
            raise ValueError(f"precision: expected None or one of {_PRECISIONS}, got {precision!r}")
        self.precision = precision
        self.arch = arch
        self.config = config
        self._kernels = {}
        self._differentiable = {}  # key -> fusejit.autograd.DifferentiableSpec, or None: no backward
        self._warned_autograd = False

    def _run(self, tensors, names, make_spec):
        """Compiles (once per shapes/dtypes/device) and runs the chain: with autograd when gradients are wanted
        (fusejit.autograd's forward and backward kernels), else the forward kernel alone."""
        x = tensors[0]
        device = x.device
        if device.type not in ("cuda", "cpu"):
            raise ValueError(f"{type(self).__name__}: input must be a CUDA or CPU tensor, "
                             f"got {device}")
        descs = tuple([_desc(t, n, self) for t, n in zip(tensors, names)])
        precision = self.precision or _AUTO_PRECISION[descs[0][1]]
        key = (descs, device.type, device.index, precision)
        if torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
            differentiable = self._autograd(key, lambda: make_spec(descs, precision))
            if differentiable is not None:  # its spec is these tensors' shapes and dtypes: no Kernel call checks
                return differentiable._call([t.contiguous() for t in tensors], True)
            if not self._warned_autograd:
                warnings.warn(f"{type(self).__name__}: fusejit has no backward for this chain yet; the output "
                              "is not connected to autograd", stacklevel=3)
                self._warned_autograd = True
        kernel = self._kernels.get(key)  # the forward alone: compiled at its first use, not for training
        if kernel is None:  # CPU tensors: the LLVM CPU backend (docs/cpu.md)
            kernel = _compile(make_spec(descs, precision), arch=self.arch, config=self.config,
                              device="cpu" if x.device.type == "cpu" else x.device)
            self._kernels[key] = kernel
        return kernel(*[t.detach().contiguous() for t in tensors])

    def _autograd(self, key, make_spec):
        """The chain's DifferentiableSpec for `key` (make_spec() builds its spec, the first time only), or None."""
        found = self._differentiable.get(key, _MISSING)
        if found is not _MISSING:
            return found
        spec = make_spec()
        from . import autograd
        from ._lib import SpecError
        try:
            found = autograd.function(spec, arch=self.arch, config=self.config)
        except SpecError:
            found = None
        self._differentiable[key] = found
        return found

    def spec_for(self, x):
        """The YAML spec this module would compile for input `x` (for inspection)."""
        tensors, names = self._tensors(x)
        descs = [_desc(t, n) for t, n in zip(tensors, names)]
        return self._make_spec(descs, self.precision or _AUTO_PRECISION[descs[0][1]])

    def forward(self, x):
        tensors, names = self._tensors(x)
        return self._run(tensors, names, self._make_spec)


class ConvReluBias(_FusedModule):
    """relu(Conv2d(x)) + bias, as nn.Conv2d(in, out, k) + nn.Parameter(torch.randn(bias_shape))."""

    def __init__(self, in_channels, out_channels, kernel_size, bias_shape, *, precision=None,
                 arch="auto", config=None):
        super().__init__(precision, arch, config)
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def _tensors(self, x):
        tensors = [x, self.conv.weight] + ([self.conv.bias] if self.conv.bias is not None else [])
        names = ["x", "conv.weight"] + (["conv.bias"] if self.conv.bias is not None else [])
        return tensors + [self.bias], names + ["bias"]

    def _make_spec(self, descs, precision):
        conv_b = descs[2] if self.conv.bias is not None else None
        return specs.conv_relu_bias(descs[0], descs[1], conv_b, descs[-1], precision=precision,
                                    **_conv_attrs(self.conv))


class GemmBiasRelu(_FusedModule):
    """relu(Linear(x, bias=False) + bias), as nn.Linear(in, out, bias=False) +
    nn.Parameter(torch.randn(bias_shape))."""

    def __init__(self, in_features, out_features, bias_shape, *, precision=None, arch="auto",
                 config=None):
        super().__init__(precision, arch, config)
        self.gemm = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def _tensors(self, x):
        return [x, self.gemm.weight, self.bias], ["x", "gemm.weight", "bias"]

    def _make_spec(self, descs, precision):
        return specs.gemm_bias_relu(descs[0], descs[1], descs[2], precision=precision)


class ConvTanhScaleBiasMaxPool(_FusedModule):
    """MaxPool2d(tanh(Conv2d(x)) * scaling_factor + bias), as nn.Conv2d(in, out, k), a float
    scaling_factor, nn.Parameter(torch.randn(bias_shape)) and nn.MaxPool2d(pool_kernel_size)."""

    def __init__(self, in_channels, out_channels, kernel_size, scaling_factor, bias_shape,
                 pool_kernel_size, *, precision=None, arch="auto", config=None):
        super().__init__(precision, arch, config)
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.scaling_factor = scaling_factor
        self.bias = nn.Parameter(torch.randn(bias_shape))
        self.max_pool = nn.MaxPool2d(pool_kernel_size)

    _tensors = ConvReluBias._tensors

    def _make_spec(self, descs, precision):
        pool = self.max_pool
        if pool.return_indices:
            raise NotImplementedError("MaxPool2d(return_indices=True)")
        conv_b = descs[2] if self.conv.bias is not None else None
        return specs.conv_tanh_scale_bias_maxpool(
            descs[0], descs[1], conv_b, descs[-1], self.scaling_factor, pool.kernel_size,
            pool_stride=pool.stride, pool_padding=pool.padding, pool_dilation=pool.dilation,
            pool_ceil_mode=pool.ceil_mode, precision=precision, **_conv_attrs(self.conv))
