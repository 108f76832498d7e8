"""Fusion specs as PyTorch operators (torch.library; needs torch >= 2.4).

    op = fusejit.torch.op_for("chain.yaml")      # torch.ops.fusejit.<name>_<hash>.default
    y = op(x, w, b)                               # the spec's inputs, in order

Each spec (with its config and arch) is defined once as `fusejit::<name>_<hash>`
with a CPU and a CUDA kernel (compiled per device at its first call) and a fake
implementation (the spec's output shapes and dtypes on the input's device), so
torch.compile traces through it without a graph break. Outputs are allocated
by PyTorch's allocator and the kernel runs on the current stream without a
host sync, so a call can be captured in a CUDA graph once it has run on that
device (its first call compiles). Forward only: no autograd formula yet.

Checked on torch 2.11 (H100, python/tests/test_gpu.py: one operator per spec,
no graph break under torch._dynamo.explain, torch.compile(fullgraph=True) equal to
eager, CUDA graph capture and replay). fusejit.nn.Fused calls it where available().
"""
import hashlib
import re
import threading

import torch

from ._kernel import DeviceKernels, _as_spec

_DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
_lock = threading.Lock()
_library = None
_ops = {}


def available():
    """Whether this torch can hold fusejit operators (torch.library.register_fake: torch >= 2.4)."""
    return hasattr(torch.library, "register_fake") and hasattr(torch.library, "Library")


def op_name(spec, config=None, arch="auto"):
    """The operator's name in torch.ops.fusejit for a spec, config and arch."""
    spec = _as_spec(spec)
    digest = hashlib.sha256("\0".join((spec.ir(), config or "", arch)).encode()).hexdigest()[:12]
    return f"{re.sub(r'[^0-9A-Za-z_]', '_', spec.name or 'chain')}_{digest}"


def op_for(spec, *, config=None, arch="auto"):
    """The torch.ops.fusejit operator (an OpOverload) running `spec`: a path,
    YAML text or fusejit.Spec. Defined on first use, then shared."""
    if not available():
        raise RuntimeError(f"fusejit.torch needs torch >= 2.4 (torch.library.register_fake); "
                           f"this is torch {torch.__version__}")
    spec = _as_spec(spec)
    name = op_name(spec, config, arch)
    with _lock:
        if name not in _ops:
            _ops[name] = _define(name, spec, config, arch)
        return _ops[name]


def _define(name, spec, config, arch):
    global _library
    if _library is None:
        _library = torch.library.Library("fusejit", "FRAGMENT")
    outputs = spec.outputs
    params = ", ".join(f"Tensor {a.name if re.fullmatch(r'[A-Za-z_][0-9A-Za-z_]*', a.name) else f'arg{i}'}"
                       for i, a in enumerate(spec.inputs))
    returns = "Tensor" if len(outputs) == 1 else "(" + ", ".join("Tensor" for _ in outputs) + ")"
    _library.define(f"{name}({params}) -> {returns}")
    kernels = DeviceKernels(spec, arch, config)

    def run(*tensors):
        return kernels.for_device(tensors[0].device)(*tensors)

    def fake(*tensors):
        device = tensors[0].device
        out = tuple(torch.empty(a.shape, dtype=_DTYPES[a.dtype], device=device) for a in outputs)
        return out[0] if len(out) == 1 else out

    _library.impl(name, run, "CPU")
    _library.impl(name, run, "CUDA")
    torch.library.register_fake(f"fusejit::{name}", fake, lib=_library)
    return getattr(torch.ops.fusejit, name).default
