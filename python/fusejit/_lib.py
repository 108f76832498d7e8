"""ctypes bindings to libfusejit_c.so (include/fusejit/fusejit.h).

The library is found, on first use, at $FUSEJIT_LIB (only there when set),
else next to this file (where `pip install ./python` puts it), else at
../../build/capi/libfusejit_c.so relative to this package (a source checkout),
else through the system loader ("libfusejit_c.so").
"""
import ctypes
import os
import threading
from ctypes import POINTER, c_char_p, c_int, c_int64, c_size_t, c_uint64, c_void_p
from pathlib import Path

LIB_NAME = "libfusejit_c.so"

# fj_status
OK = 0
ERR_INVALID_ARGUMENT = 1
ERR_SPEC = 2
ERR_IO = 3
ERR_COMPILE = 4
ERR_NO_DEVICE = 5
ERR_CUDA = 6
ERR_INTERNAL = 7

DTYPE_NAMES = {0: "f32", 1: "f16", 2: "bf16"}
AUTOTUNE_MODES = {"off": 0, "use_db": 1, "force": 2}
EMIT_KINDS = {"source": 0, "plan": 1}
BACKENDS = {"cuda": 0, "cpu": 1, "auto": 2}  # fj_backend
BACKEND_NAMES = {v: k for k, v in BACKENDS.items()}


class FusejitError(RuntimeError):
    """A failed fusejit call: `status` is the fj_status code, `status_name` its name."""

    def __init__(self, status, status_name, message):
        super().__init__(message)
        self.status = status
        self.status_name = status_name
        self.message = message


class InvalidArgumentError(FusejitError, ValueError):
    pass


class SpecError(FusejitError, ValueError):
    """An invalid spec; the message starts with file:line:col when known."""


class SpecFileError(FusejitError):
    """A spec file that cannot be read, or an output file that cannot be written."""


class CompileError(FusejitError):
    """Code generation or NVRTC failed, or the chain is not supported."""


class NoDeviceError(FusejitError):
    """No CUDA driver, no such device, or a build without the CPU backend."""


class CudaError(FusejitError):
    """A CUDA driver call failed (module load, launch)."""


_ERRORS = {
    ERR_INVALID_ARGUMENT: InvalidArgumentError,
    ERR_SPEC: SpecError,
    ERR_IO: SpecFileError,
    ERR_COMPILE: CompileError,
    ERR_NO_DEVICE: NoDeviceError,
    ERR_CUDA: CudaError,
}


class ArgInfoC(ctypes.Structure):  # fj_arg_info
    _fields_ = [
        ("name", c_char_p),
        ("dtype", c_int),
        ("is_output", c_int),
        ("rank", c_int),
        ("shape", POINTER(c_int64)),
        ("numel", c_int64),
    ]


# name: (restype, argtypes); status-returning calls have restype c_int.
_SIGNATURES = {
    "fj_status_name": (c_char_p, [c_int]),
    "fj_last_error": (c_char_p, []),
    "fj_version": (c_char_p, []),
    "fj_version_number": (c_int, []),
    "fj_free": (None, [c_void_p]),
    "fj_device_count": (c_int, [POINTER(c_int)]),
    "fj_device_arch": (c_int, [c_int, POINTER(c_void_p)]),
    "fj_backend_name": (c_char_p, [c_int]),
    "fj_backend_available": (c_int, [c_int]),
    "fj_dtype_name": (c_char_p, [c_int]),
    "fj_dtype_size": (c_int, [c_int]),
    "fj_spec_parse": (c_int, [c_char_p, c_char_p, POINTER(c_void_p)]),
    "fj_spec_load": (c_int, [c_char_p, POINTER(c_void_p)]),
    "fj_spec_destroy": (None, [c_void_p]),
    "fj_spec_name": (c_int, [c_void_p, POINTER(c_char_p)]),
    "fj_spec_num_args": (c_int, [c_void_p, POINTER(c_size_t), POINTER(c_size_t)]),
    "fj_spec_arg": (c_int, [c_void_p, c_size_t, POINTER(ArgInfoC)]),
    "fj_spec_print_ir": (c_int, [c_void_p, POINTER(c_void_p)]),
    "fj_options_create": (c_int, [POINTER(c_void_p)]),
    "fj_options_destroy": (None, [c_void_p]),
    "fj_options_set_arch": (c_int, [c_void_p, c_char_p]),
    "fj_options_set_config": (c_int, [c_void_p, c_char_p]),
    "fj_options_set_autotune": (c_int, [c_void_p, c_int]),
    "fj_options_get_autotune": (c_int, [c_void_p, POINTER(c_int)]),
    "fj_options_set_device": (c_int, [c_void_p, c_int]),
    "fj_options_set_line_info": (c_int, [c_void_p, c_int]),
    "fj_options_set_lazy": (c_int, [c_void_p, c_int]),
    "fj_options_set_backend": (c_int, [c_void_p, c_int]),
    "fj_options_get_backend": (c_int, [c_void_p, POINTER(c_int)]),
    "fj_engine_create": (c_int, [POINTER(c_void_p)]),
    "fj_engine_destroy": (None, [c_void_p]),
    "fj_engine_compile": (c_int, [c_void_p, c_void_p, c_void_p, POINTER(c_void_p)]),
    "fj_engine_compile_cubin": (
        c_int, [c_void_p, c_void_p, c_void_p, POINTER(c_void_p), POINTER(c_size_t)]),
    "fj_engine_compile_cubin_file": (c_int, [c_void_p, c_void_p, c_void_p, c_char_p]),
    "fj_engine_emit": (c_int, [c_void_p, c_void_p, c_void_p, c_int, POINTER(c_void_p)]),
    "fj_kernel_destroy": (None, [c_void_p]),
    "fj_kernel_load": (c_int, [c_void_p]),
    "fj_kernel_is_loaded": (c_int, [c_void_p]),
    "fj_kernel_num_args": (c_int, [c_void_p, POINTER(c_size_t), POINTER(c_size_t)]),
    "fj_kernel_arg": (c_int, [c_void_p, c_size_t, POINTER(ArgInfoC)]),
    "fj_kernel_name": (c_int, [c_void_p, POINTER(c_char_p)]),
    "fj_kernel_arch": (c_int, [c_void_p, POINTER(c_char_p)]),
    "fj_kernel_autotune": (c_int, [c_void_p, POINTER(c_int)]),
    "fj_kernel_backend": (c_int, [c_void_p, POINTER(c_int)]),
    "fj_kernel_launch": (c_int, [c_void_p, POINTER(c_uint64), c_size_t, c_void_p]),
    "fj_backward_build": (c_int, [c_void_p, POINTER(c_char_p), POINTER(c_void_p)]),
    "fj_backward_build_for": (c_int, [c_void_p, POINTER(c_char_p), c_int, POINTER(c_void_p)]),
    "fj_backward_destroy": (None, [c_void_p]),
    "fj_backward_forward": (c_int, [c_void_p, POINTER(c_void_p)]),
    "fj_backward_num_stages": (c_int, [c_void_p, POINTER(c_size_t)]),
    "fj_backward_stage": (c_int, [c_void_p, c_size_t, POINTER(c_void_p)]),
    "fj_backward_num_buffers": (c_int, [c_void_p, POINTER(c_size_t)]),
    "fj_backward_buffer": (c_int, [c_void_p, c_size_t, POINTER(ArgInfoC), POINTER(c_int)]),
    "fj_backward_input_grad": (c_int, [c_void_p, c_char_p, POINTER(c_char_p)]),
    "fj_backward_print": (c_int, [c_void_p, POINTER(c_void_p)]),
}

_lock = threading.Lock()
_lib = None


def library_candidates():
    """Where the library is looked for, in order."""
    env = os.environ.get("FUSEJIT_LIB")
    if env:
        return [env]
    here = Path(__file__).resolve().parent
    packaged = here / LIB_NAME
    local = here.parent.parent / "build" / "capi" / LIB_NAME
    return [str(packaged), str(local), LIB_NAME]


def _load():
    tried = []
    for candidate in library_candidates():
        is_path = os.sep in candidate
        if is_path and not os.path.exists(candidate):
            tried.append(f"{candidate}: no such file")
            continue
        try:
            lib = ctypes.CDLL(candidate)
        except OSError as e:
            tried.append(f"{candidate}: {e}")
            continue
        for name, (restype, argtypes) in _SIGNATURES.items():
            fn = getattr(lib, name)  # AttributeError names a missing symbol
            fn.restype = restype
            fn.argtypes = argtypes
        return lib
    raise OSError(
        f"cannot load {LIB_NAME} (build the fusejit_c target, or set FUSEJIT_LIB "
        "to its path); tried: " + "; ".join(tried))


def lib():
    """The loaded library (loaded once, on first use)."""
    global _lib
    if _lib is None:
        with _lock:
            if _lib is None:
                _lib = _load()
    return _lib


def check(status):
    """Raises the FusejitError subclass for a failed status (with fj_last_error())."""
    if status == OK:
        return
    L = lib()
    message = L.fj_last_error().decode("utf-8", "replace")
    name = L.fj_status_name(status).decode()
    raise _ERRORS.get(status, FusejitError)(status, name, message)


def take_string(ptr):
    """Copies and frees a char* the library handed over."""
    try:
        return ctypes.string_at(ptr.value).decode("utf-8", "replace")
    finally:
        lib().fj_free(ptr)


def encode_path(path):
    return os.fsencode(path)


def encode_text(text):
    return None if text is None else text.encode("utf-8")
