"""The launcher below Python (opt-in: FUSEJIT_LAUNCHER=cpp or cpp-autograd; docs/python.md, "Host overhead").

csrc/launcher.cpp, built once by torch.utils.cpp_extension (cached in torch's extensions folder), takes the eager
training path's forward kernel and backward program: one call each from Python, the outputs allocated with ATen
and the kernels launched through fj_kernel_launch. Where it cannot be built, module() warns once and returns None:
the Python path runs as before. FUSEJIT_LAUNCHER=cpp-autograd also builds csrc/launcher_autograd.cpp: the models'
training forward and backward under a C++ autograd Function (no Python in the backward). set_mode() chooses for
the objects set up next (tests, benches).
"""
import ctypes
import os
import threading
import warnings

from ._lib import lib

_lock = threading.Lock()
_built = {}  # extension name -> the module, or None where it did not build (tried once a process)
_override = []  # set_mode's choice, over FUSEJIT_LAUNCHER
_MODES = ("python", "cpp", "cpp-autograd")


def set_mode(mode):
    """The launcher for the kernels and programs set up from now on (each keeps the one it was set up with):
    "python", "cpp" (launcher.cpp under Python's autograd Function), "cpp-autograd" (launcher_autograd.cpp: the
    models' training forward and backward under a C++ autograd Function, launcher.cpp for the rest); None: as
    FUSEJIT_LAUNCHER says (unset: "python"). For tests and benches."""
    if mode is not None and mode not in _MODES:
        raise ValueError(f"fusejit launcher: expected one of {_MODES} or None, got {mode!r}")
    _override[:] = [] if mode is None else [mode]


def mode():
    if _override:
        return _override[0]
    env = os.environ.get("FUSEJIT_LAUNCHER", "")
    return env if env in _MODES else "python"


def module():
    """launcher.cpp's module where the mode asks for it ("cpp", "cpp-autograd") and it builds, else None."""
    return _module("fusejit_launcher", "launcher.cpp", False) if mode() != "python" else None


def autograd_module():
    """launcher_autograd.cpp's module in mode "cpp-autograd" where it builds (it needs torch's CUDA headers), else
    None."""
    return _module("fusejit_launcher_autograd", "launcher_autograd.cpp", True) if mode() == "cpp-autograd" else None


def _module(name, source, cuda):
    if name not in _built:
        with _lock:
            if name not in _built:
                _built[name] = _build(name, source, cuda)
    return _built[name]


def _build(name, source, cuda):
    try:
        from torch.utils import cpp_extension
        here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "csrc")
        built = cpp_extension.load(name=name, sources=[os.path.join(here, source)], extra_include_paths=[here],
                                   extra_cflags=["-O2"], with_cuda=cuda or None,
                                   verbose=os.environ.get("FUSEJIT_LAUNCHER_VERBOSE") == "1")
        # the library's own symbols (lib()["..."] bypasses any Python wrapper set as an attribute)
        built.set_launch(ctypes.cast(lib()["fj_kernel_launch"], ctypes.c_void_p).value)
        if hasattr(built, "set_last_error"):
            built.set_last_error(ctypes.cast(lib()["fj_last_error"], ctypes.c_void_p).value)
        return built
    except Exception as e:  # no compiler, no headers, ...: the Python path
        warnings.warn(f"fusejit: the C++ launcher {source} (FUSEJIT_LAUNCHER={mode()}) did not build ({e}); "
                      "the Python launcher runs", stacklevel=4)
        return None


def dtype_name(dtype):
    """A torch dtype as launcher.cpp names it (torch.float32 -> 'float32')."""
    return str(dtype).rpartition(".")[2]
