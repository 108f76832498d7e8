"""The launcher below Python (opt-in: FUSEJIT_LAUNCHER=cpp; docs/python.md, "Host overhead").

csrc/launcher.cpp, built once by torch.utils.cpp_extension (cached in torch's extensions folder), takes the eager
training path's forward kernel and backward program: one call each from Python, the outputs allocated with ATen
and the kernels launched through fj_kernel_launch. Where it cannot be built, module() warns once and returns None:
the Python path runs as before.
"""
import ctypes
import os
import threading
import warnings

from ._lib import lib

_lock = threading.Lock()
_state = {"tried": False, "module": None}


def enabled():
    return os.environ.get("FUSEJIT_LAUNCHER", "") == "cpp"


def module():
    """The built extension, or None (not asked for, or it did not build)."""
    if _state["tried"]:
        return _state["module"]
    with _lock:
        if _state["tried"]:
            return _state["module"]
        built = None
        if enabled():
            try:
                from torch.utils import cpp_extension
                source = os.path.join(os.path.dirname(os.path.abspath(__file__)), "csrc", "launcher.cpp")
                built = cpp_extension.load(name="fusejit_launcher", sources=[source], extra_cflags=["-O2"],
                                           verbose=os.environ.get("FUSEJIT_LAUNCHER_VERBOSE") == "1")
                # the library's own symbol (lib()["..."] bypasses any Python wrapper set as an attribute)
                built.set_launch(ctypes.cast(lib()["fj_kernel_launch"], ctypes.c_void_p).value)
            except Exception as e:  # no compiler, no headers, ...: the Python path
                warnings.warn(f"fusejit: FUSEJIT_LAUNCHER=cpp, but the C++ launcher did not build ({e}); "
                              "the Python launcher runs", stacklevel=3)
                built = None
        _state["module"] = built
        _state["tried"] = True
        return built


def dtype_name(dtype):
    """A torch dtype as launcher.cpp names it (torch.float32 -> 'float32')."""
    return str(dtype).rpartition(".")[2]
