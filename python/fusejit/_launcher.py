"""The launcher below Python (opt-in: FUSEJIT_LAUNCHER=cpp; docs/python.md, "Host overhead").

csrc/launcher.cpp, built once by torch.utils.cpp_extension (cached in torch's extensions folder), takes the eager
training path's forward kernel and backward program: one call each from Python, the outputs allocated with ATen
and the kernels launched through fj_kernel_launch. Where it cannot be built, module() warns once and returns None:
the Python path runs as before. set_enabled() chooses for the objects set up next (tests, benches).
"""
import ctypes
import os
import threading
import warnings

from ._lib import lib

_lock = threading.Lock()
_state = {"tried": False, "module": None}  # the build, tried once a process
_override = []  # set_enabled's choice, over FUSEJIT_LAUNCHER


def set_enabled(on):
    """The C++ launcher (True) or the Python one (False) for the kernels and programs set up from now on (each
    keeps the launcher it was set up with); None: as FUSEJIT_LAUNCHER says. For tests and benches."""
    _override[:] = [] if on is None else [bool(on)]


def enabled():
    return _override[0] if _override else os.environ.get("FUSEJIT_LAUNCHER", "") == "cpp"


def module():
    """The built extension where the C++ launcher is enabled and builds, else None."""
    if not enabled():
        return None
    if not _state["tried"]:
        with _lock:
            if not _state["tried"]:
                _state["module"] = _build()
                _state["tried"] = True
    return _state["module"]


def _build():
    try:
        from torch.utils import cpp_extension
        source = os.path.join(os.path.dirname(os.path.abspath(__file__)), "csrc", "launcher.cpp")
        built = cpp_extension.load(name="fusejit_launcher", sources=[source], extra_cflags=["-O2"],
                                   verbose=os.environ.get("FUSEJIT_LAUNCHER_VERBOSE") == "1")
        # the library's own symbol (lib()["..."] bypasses any Python wrapper set as an attribute)
        built.set_launch(ctypes.cast(lib()["fj_kernel_launch"], ctypes.c_void_p).value)
        return built
    except Exception as e:  # no compiler, no headers, ...: the Python path
        warnings.warn(f"fusejit: the C++ launcher (FUSEJIT_LAUNCHER=cpp) did not build ({e}); the Python launcher "
                      "runs", stacklevel=4)
        return None


def dtype_name(dtype):
    """A torch dtype as launcher.cpp names it (torch.float32 -> 'float32')."""
    return str(dtype).rpartition(".")[2]
