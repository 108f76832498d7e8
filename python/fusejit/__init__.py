"""fusejit from Python: compile a fusion spec into one CUDA kernel and call it
on torch tensors (ctypes over libfusejit_c.so; docs/python.md).

    import fusejit
    k = fusejit.compile("spec.yaml")        # or YAML text, or a fusejit.Spec
    y = k(x, w, b, bias)                    # torch CUDA tensors, torch's current stream
    k = fusejit.compile("spec.yaml", device="cpu")   # the LLVM CPU backend (docs/cpu.md)
    y = k(x, w, b, bias)                    # torch CPU tensors or numpy arrays

fusejit.models holds drop-in nn.Modules for the seed chains, fusejit.nn.Fused any spec as an
nn.Module, fusejit.torch any spec as a torch.library operator, fusejit.autograd any spec as a
differentiable function (all need torch); fusejit.Backward is a spec's gradient program.
"""
from . import specs
from .backward import Backward, Buffer
from ._kernel import (Arg, Kernel, Spec, backend_available, compile, compile_cubin, device_count,
                      emit, version)
from ._lib import (CompileError, CudaError, FusejitError, InvalidArgumentError, NoDeviceError,
                   SpecError, SpecFileError, library_candidates)

__all__ = [
    "Arg", "Backward", "Buffer", "Kernel", "Spec", "backend_available", "compile", "compile_cubin", "device_count",
    "emit", "version",
    "specs", "models", "FusejitError", "InvalidArgumentError", "SpecError", "SpecFileError",
    "CompileError", "NoDeviceError", "CudaError", "library_candidates",
]


# fusejit.nn and fusejit.torch stay out of __all__: `from fusejit import *` would
# shadow torch's own `nn` and `torch` in the caller's namespace.
def __getattr__(name):
    if name in ("autograd", "models", "nn", "torch"):  # import torch, so only on demand
        import importlib
        return importlib.import_module("." + name, __name__)
    raise AttributeError(f"module 'fusejit' has no attribute {name!r}")
