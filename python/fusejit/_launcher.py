"""The launcher below Python (FUSEJIT_LAUNCHER; docs/python.md, "Host overhead").

csrc/launcher.cpp, built once by torch.utils.cpp_extension (cached in torch's extensions folder), takes the eager
training path's forward kernel and backward program: one call each from Python, the outputs allocated with ATen
and the kernels launched through fj_kernel_launch. csrc/launcher_autograd.cpp runs the models' training forward and
backward under a C++ autograd Function (no Python in the backward). Modes: "auto" (the default) uses both where
they build and the Python path quietly where they do not (no compiler, ninja or torch headers; a failed build is
remembered, so later processes do not try again); "cpp-autograd" and "cpp" ask for them (a failed build warns
once); "python" never builds them. set_mode() chooses for the objects set up next (tests, benches).
"""
import ctypes
import hashlib
import logging
import os
import threading
import warnings

from ._lib import lib

_lock = threading.Lock()
_built = {}  # extension name -> the module, or None where it did not build (tried once a process)
_override = []  # set_mode's choice, over FUSEJIT_LAUNCHER
_MODES = ("auto", "python", "cpp", "cpp-autograd")
_log = logging.getLogger("fusejit")


def set_mode(mode):
    """The launcher for the kernels and programs set up from now on (each keeps the one it was set up with):
    "python", "cpp" (launcher.cpp under Python's autograd Function), "cpp-autograd" (launcher_autograd.cpp: the
    models' training forward and backward under a C++ autograd Function, launcher.cpp for the rest), "auto"
    (cpp-autograd where it builds, else python, quietly); None: as FUSEJIT_LAUNCHER says (unset: "auto"). For
    tests and benches."""
    if mode is not None and mode not in _MODES:
        raise ValueError(f"fusejit launcher: expected one of {_MODES} or None, got {mode!r}")
    _override[:] = [] if mode is None else [mode]


def mode():
    if _override:
        return _override[0]
    env = os.environ.get("FUSEJIT_LAUNCHER", "")
    return env if env in _MODES else "auto"


def module():
    """launcher.cpp's module where the mode asks for it (every mode but "python") and it builds, else None."""
    m = mode()
    return None if m == "python" else _module("fusejit_launcher", "launcher.cpp", False, m == "auto")


def autograd_module():
    """launcher_autograd.cpp's module in modes "cpp-autograd" and "auto" where it builds (it needs torch's CUDA
    headers), else None."""
    m = mode()
    if m not in ("cpp-autograd", "auto"):
        return None
    return _module("fusejit_launcher_autograd", "launcher_autograd.cpp", True, m == "auto")


def _module(name, source, cuda, quiet):
    """The module, built (or loaded from torch's cache) on the first call of the process; `quiet` (mode "auto"):
    a failure is logged, not warned, and remembered (_failed_marker)."""
    if name not in _built:
        with _lock:
            if name not in _built:
                _built[name] = _build(name, source, cuda, quiet)
    return _built[name]


def _failed_marker(source):
    """The file that says this source did not build with this torch (mode "auto" then skips it): under
    $FUSEJIT_CACHE_DIR or ~/.cache/fusejit, named after a hash of the sources and torch's version."""
    import torch
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "csrc")
    h = hashlib.sha256(torch.__version__.encode())
    for f in sorted(os.listdir(here)):
        with open(os.path.join(here, f), "rb") as fh:
            h.update(fh.read())
    root = os.environ.get("FUSEJIT_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "fusejit")
    return os.path.join(root, f"launcher-failed-{source}-{h.hexdigest()[:16]}")


def _cached(cpp_extension, name):
    """Whether torch's extensions folder holds a build of `name` (a guess: a stale one is rebuilt by load)."""
    try:
        folder = cpp_extension._get_build_directory(name, verbose=False)
        return os.path.exists(os.path.join(folder, name + ".so"))
    except Exception:  # a private function of torch's: when it moves, say nothing
        return True


def _build(name, source, cuda, quiet):
    marker = None
    if quiet:
        try:
            marker = _failed_marker(source)
            if os.path.exists(marker):
                _log.info("fusejit: the C++ launcher %s did not build before (%s); the Python launcher runs",
                          source, marker)
                return None
        except Exception:  # no torch, an unreadable folder: try the build
            marker = None
    try:
        from torch.utils import cpp_extension
        here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "csrc")
        if quiet and not _cached(cpp_extension, name):
            _log.warning("fusejit: building its C++ launcher %s once (about a minute; cached in torch's extensions "
                         "folder; FUSEJIT_LAUNCHER=python skips it)", source)
        built = cpp_extension.load(name=name, sources=[os.path.join(here, source)], extra_include_paths=[here],
                                   extra_cflags=["-O2"], with_cuda=cuda or None,
                                   verbose=os.environ.get("FUSEJIT_LAUNCHER_VERBOSE") == "1")
        # the library's own symbols (lib()["..."] bypasses any Python wrapper set as an attribute)
        built.set_launch(ctypes.cast(lib()["fj_kernel_launch"], ctypes.c_void_p).value)
        if hasattr(built, "set_last_error"):
            built.set_last_error(ctypes.cast(lib()["fj_last_error"], ctypes.c_void_p).value)
        return built
    except Exception as e:  # no compiler, no headers, ...: the Python path
        if not quiet:
            warnings.warn(f"fusejit: the C++ launcher {source} (FUSEJIT_LAUNCHER={mode()}) did not build ({e}); "
                          "the Python launcher runs", stacklevel=4)
            return None
        _log.info("fusejit: the C++ launcher %s did not build (%s); the Python launcher runs", source, e)
        if marker is not None:
            try:
                os.makedirs(os.path.dirname(marker), exist_ok=True)
                with open(marker, "w") as fh:
                    fh.write(f"{e}\n")
            except OSError:
                pass
        return None


def dtype_name(dtype):
    """A torch dtype as launcher.cpp names it (torch.float32 -> 'float32')."""
    return str(dtype).rpartition(".")[2]
