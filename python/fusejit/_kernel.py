"""Specs, compilation and kernels: the Python face of the C API."""
import ctypes
import os
import threading
from collections import namedtuple
from ctypes import byref, c_char_p, c_int, c_size_t, c_uint64, c_void_p

from . import _lib
from ._lib import check, encode_path, encode_text, lib

Arg = namedtuple("Arg", "name dtype shape is_output")
Arg.__doc__ = "A kernel argument: dtype is 'f32', 'f16' or 'bf16'; shape a tuple."

_TORCH_DTYPES = {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}
_NUMPY_DTYPES = {"f32": "float32", "f16": "float16"}  # numpy has no bfloat16


def version():
    """The library's version string, e.g. '0.1.0'."""
    return lib().fj_version().decode()


def device_count():
    """Number of CUDA devices; 0 when there is no driver or device."""
    count = c_int(0)
    return count.value if lib().fj_device_count(byref(count)) == _lib.OK else 0


def backend_available(backend="cpu"):
    """Whether kernels can run on `backend` here: "cuda" (a device is present),
    "cpu" (the library was built with LLVM, docs/cpu.md) or "auto" (either)."""
    if backend not in _lib.BACKENDS:
        raise ValueError(f"backend: expected one of {sorted(_lib.BACKENDS)}, got {backend!r}")
    return bool(lib().fj_backend_available(_lib.BACKENDS[backend]))


def _read_args(get, handle):
    ni, no = c_size_t(), c_size_t()
    check(get[0](handle, byref(ni), byref(no)))
    args = []
    for i in range(ni.value + no.value):
        info = _lib.ArgInfoC()
        check(get[1](handle, i, byref(info)))
        shape = tuple(info.shape[d] for d in range(info.rank))
        args.append(Arg(info.name.decode(), _lib.DTYPE_NAMES[info.dtype], shape,
                        bool(info.is_output)))
    return args


class Spec:
    """A parsed, validated fusion spec (docs/spec.md); no GPU needed.

    `source` is a path (str or os.PathLike) or YAML text: a str containing a
    newline is text, else an existing file or a name ending in .yaml/.yml is a
    path, else text.
    """

    def __init__(self, source, filename=None, *, _handle=None):
        L = lib()
        handle = c_void_p()
        if _handle is not None:  # a spec the library made (fusejit.Backward's stages)
            handle = _handle
        elif _is_path(source):
            check(L.fj_spec_load(encode_path(source), byref(handle)))
        else:
            name = filename if filename is not None else "<spec>"
            check(L.fj_spec_parse(encode_text(source), encode_text(name), byref(handle)))
        self._handle = handle
        self._lib = L
        name = c_char_p()
        check(L.fj_spec_name(handle, byref(name)))
        self.name = name.value.decode()
        self.args = _read_args((L.fj_spec_num_args, L.fj_spec_arg), handle)

    def __del__(self):
        handle = getattr(self, "_handle", None)
        if handle:
            self._lib.fj_spec_destroy(handle)
            self._handle = None

    @property
    def inputs(self):
        return [a for a in self.args if not a.is_output]

    @property
    def outputs(self):
        return [a for a in self.args if a.is_output]

    def ir(self):
        """The canonical IR text."""
        text = c_void_p()
        check(self._lib.fj_spec_print_ir(self._handle, byref(text)))
        return _lib.take_string(text)

    def __repr__(self):
        return f"<fusejit.Spec {self.name or '(unnamed)'}: {len(self.inputs)} inputs, " \
               f"{len(self.outputs)} outputs>"


def _is_path(source):
    if isinstance(source, os.PathLike):
        return True
    if not isinstance(source, str):
        raise TypeError(f"spec: expected a path or YAML text, got {type(source).__name__}")
    if "\n" in source:
        return False
    return os.path.isfile(source) or source.endswith((".yaml", ".yml"))


def _as_spec(spec):
    return spec if isinstance(spec, Spec) else Spec(spec)


class _Options:
    def __init__(self, arch="auto", config=None, autotune="off", device=0, line_info=True,
                 lazy=False, backend="cuda"):
        if autotune not in _lib.AUTOTUNE_MODES:
            raise ValueError(f"autotune: expected one of {sorted(_lib.AUTOTUNE_MODES)}, "
                             f"got {autotune!r}")
        L = lib()
        self._lib = L
        self._handle = c_void_p()
        check(L.fj_options_create(byref(self._handle)))
        check(L.fj_options_set_arch(self._handle, encode_text(arch)))
        check(L.fj_options_set_config(self._handle, encode_text(config)))
        check(L.fj_options_set_autotune(self._handle, _lib.AUTOTUNE_MODES[autotune]))
        check(L.fj_options_set_device(self._handle, int(device)))
        check(L.fj_options_set_line_info(self._handle, int(bool(line_info))))
        check(L.fj_options_set_lazy(self._handle, int(bool(lazy))))
        check(L.fj_options_set_backend(self._handle, _lib.BACKENDS[backend]))

    def __del__(self):
        handle = getattr(self, "_handle", None)
        if handle:
            self._lib.fj_options_destroy(handle)


_engine_lock = threading.Lock()
_engine = None


def _engine_handle():
    """The process-wide engine (its kernel cache is shared by every compile)."""
    global _engine
    with _engine_lock:
        if _engine is None:
            handle = c_void_p()
            check(lib().fj_engine_create(byref(handle)))
            _engine = handle
    return _engine


def _device_index(device):
    if device is None:
        try:
            import torch
            if torch.cuda.is_available():
                return torch.cuda.current_device()
        except ImportError:
            pass
        return 0
    if isinstance(device, int):
        return device
    index = getattr(device, "index", None)  # torch.device
    if getattr(device, "type", None) == "cuda":
        if index is None:
            import torch
            return torch.cuda.current_device()
        return index
    if isinstance(device, str) and device.startswith("cuda"):
        return int(device.split(":")[1]) if ":" in device else _device_index(None)
    raise ValueError(f"device: expected 'cpu', 'auto' or a CUDA device (int, 'cuda', 'cuda:N' "
                     f"or torch.device), got {device!r}")


def _backend_and_index(device):
    """device -> (backend name, CUDA index): 'cpu' / torch.device('cpu') -> the
    CPU backend, 'auto' -> CUDA when a device is present else CPU, else CUDA."""
    if isinstance(device, str) and device in ("cpu", "auto"):
        return device, _device_index(None) if device == "auto" else 0
    if getattr(device, "type", None) == "cpu":
        return "cpu", 0
    return "cuda", _device_index(device)


def compile(spec, *, arch="auto", config=None, autotune="off", device=None, line_info=True,
            lazy=False):
    """Compiles a spec (path, YAML text or Spec) into a Kernel for one device.

    device: "cpu" (the LLVM CPU backend, docs/cpu.md: calls take CPU tensors
    or numpy arrays), "auto" (CUDA when a device is present, else CPU), or a
    CUDA device: index, "cuda", "cuda:N" or torch.device (None: torch's
    current device, or 0). arch: "auto" (the device's) or e.g. "sm_90a";
    config: a scheduler config string (None: heuristics); autotune: "off",
    "use_db" (the tuning database's winner, when present) or "force" (tune
    now, store the winner); lazy: defer codegen and loading to the first
    call (no GPU needed until then).
    """
    spec = _as_spec(spec)
    backend, index = _backend_and_index(device)
    options = _Options(arch, config, autotune, index, line_info, lazy, backend)
    L = lib()
    handle = c_void_p()
    check(L.fj_engine_compile(_engine_handle(), spec._handle, options._handle, byref(handle)))
    chosen = c_int()
    status = L.fj_kernel_backend(handle, byref(chosen))
    if status != _lib.OK:
        L.fj_kernel_destroy(handle)
        check(status)
    backend = _lib.BACKEND_NAMES[chosen.value]
    return Kernel(handle, "cpu" if backend == "cpu" else index, spec.name, backend)


class DeviceKernels:
    """One spec's kernels, compiled per torch device ("cpu" or "cuda:N") at its
    first use; thread-safe. Shared by fusejit.nn.Fused and fusejit.torch."""

    def __init__(self, spec, arch="auto", config=None, label=""):
        self._spec, self._arch, self._config = _as_spec(spec), arch, config
        self._label = label or f"fusejit kernel '{self._spec.name}'"
        self._kernels = {}
        self._lock = threading.Lock()

    def __len__(self):
        return len(self._kernels)

    def for_device(self, device):
        if device.type not in ("cpu", "cuda"):
            raise ValueError(f"{self._label}: expected CPU or CUDA tensors, got {device}")
        key = (device.type, device.index)
        with self._lock:
            kernel = self._kernels.get(key)
            if kernel is None:
                kernel = compile(self._spec, arch=self._arch, config=self._config,
                                 device="cpu" if device.type == "cpu" else device)
                self._kernels[key] = kernel
        return kernel


def compile_cubin(spec, arch="sm_90a", *, config=None, path=None):
    """CUBIN bytes for `arch` (no GPU needed unless arch is "auto"); written to
    `path` instead (returning None) when given."""
    spec = _as_spec(spec)
    options = _Options(arch, config)
    L = lib()
    if path is not None:
        check(L.fj_engine_compile_cubin_file(_engine_handle(), spec._handle, options._handle,
                                             encode_path(path)))
        return None
    data, size = c_void_p(), c_size_t()
    check(L.fj_engine_compile_cubin(_engine_handle(), spec._handle, options._handle,
                                    byref(data), byref(size)))
    try:
        return ctypes.string_at(data.value, size.value)
    finally:
        L.fj_free(data)


def emit(spec, what="source", *, arch="auto", config=None, device=None):
    """Code generation only: the CUDA source (what="source") or the fusion plan
    (what="plan"). No GPU needed ("auto" means sm_90a without one).
    device="cpu": the CPU backend's LLVM IR and plan ("auto": as compile)."""
    if what not in _lib.EMIT_KINDS:
        raise ValueError(f"what: expected 'source' or 'plan', got {what!r}")
    spec = _as_spec(spec)
    backend = device if device in ("cpu", "auto") else "cuda"
    options = _Options(arch, config, backend=backend)
    text = c_void_p()
    check(lib().fj_engine_emit(_engine_handle(), spec._handle, options._handle,
                               _lib.EMIT_KINDS[what], byref(text)))
    return _lib.take_string(text)


class Kernel:
    """A compiled kernel. Call it with torch CUDA tensors (the inputs, in spec
    order); it allocates and returns the outputs (one tensor, or a tuple), or
    writes into `out=` (a tensor or a tuple). Runs on torch's current stream
    and does not synchronize.

    On the CPU backend (backend == "cpu", device == "cpu") it takes torch CPU
    tensors or numpy arrays (contiguous, the argument's dtype; outputs are
    made of the same kind) and returns when the kernel has run."""

    def __init__(self, handle, device, spec_name="", backend="cuda"):
        L = lib()
        self._lib = L
        self._handle = handle
        self.backend = backend
        self.device = device
        self._label = f"fusejit kernel '{spec_name}'" if spec_name else "fusejit kernel"
        self.args = _read_args((L.fj_kernel_num_args, L.fj_kernel_arg), handle)
        self.inputs = [a for a in self.args if not a.is_output]
        self.outputs = [a for a in self.args if a.is_output]
        self._torch_dtypes = None
        self._torch = None
        self._torch_args = None  # inputs' (dtype, shape), outputs' (shape, an empty tensor of its dtype), device
        self._pointer_array = c_uint64 * len(self.args)

    def __del__(self):
        handle = getattr(self, "_handle", None)
        if handle:
            self._lib.fj_kernel_destroy(handle)
            self._handle = None

    def load(self):
        """Compiles and loads a lazy kernel now (a no-op once loaded)."""
        check(self._lib.fj_kernel_load(self._handle))

    @property
    def loaded(self):
        return bool(self._lib.fj_kernel_is_loaded(self._handle))

    @property
    def name(self):
        """The generated program's name (loads a lazy kernel)."""
        self.load()
        out = c_char_p()
        check(self._lib.fj_kernel_name(self._handle, byref(out)))
        return out.value.decode()

    @property
    def arch(self):
        self.load()
        out = c_char_p()
        check(self._lib.fj_kernel_arch(self._handle, byref(out)))
        return out.value.decode()

    def launch(self, pointers, stream=0):
        """Raw launch: device pointers (ints), inputs then outputs, on a CUstream
        handle (int; 0 is the legacy default stream). No tensor checks. On the
        CPU backend: host addresses (e.g. ctypes.addressof of a ctypes array),
        no stream, synchronous."""
        array = (self._pointer_array if len(pointers) == len(self.args) else c_uint64 * len(pointers))(*pointers)
        check(self._lib.fj_kernel_launch(self._handle, array, len(pointers), stream or None))

    def __call__(self, *inputs, out=None):
        if len(inputs) != len(self.inputs):
            names = ", ".join(a.name for a in self.inputs)
            raise TypeError(f"{self._label} takes {len(self.inputs)} inputs ({names}), "
                            f"got {len(inputs)}")
        if self.backend == "cpu" and any(_is_ndarray(t) for t in inputs):
            return self._call_numpy(inputs, out)
        torch = self._torch if self._torch_args is not None else self._torch_setup()
        in_specs, out_specs, device = self._torch_args
        for i, ((dtype, shape), t) in enumerate(zip(in_specs, inputs)):
            # the common case in one expression; _check_tensor names what is wrong
            if not (isinstance(t, torch.Tensor) and t.dtype is dtype and t.shape == shape and t.device == device
                    and t.is_contiguous()):
                self._check_tensor(torch, self.inputs[i], t, f"input {i}")
        if out is None:  # new_empty of an empty tensor of the dtype: less argument parsing than torch.empty
            outs = [like.new_empty(shape) for shape, like in out_specs]
        else:
            outs = (out,) if isinstance(out, torch.Tensor) else tuple(out)
            if len(outs) != len(self.outputs):
                raise TypeError(f"{self._label}: out= needs {len(self.outputs)} tensors "
                                f"({', '.join(a.name for a in self.outputs)}), got {len(outs)}")
            for i, (arg, t) in enumerate(zip(self.outputs, outs)):
                self._check_tensor(torch, arg, t, f"output {i}")
        array = self._pointer_array(*[t.data_ptr() for t in inputs], *[t.data_ptr() for t in outs])
        if self.backend == "cpu":
            check(self._lib.fj_kernel_launch(self._handle, array, len(self.args), None))  # synchronous
        else:
            check(self._lib.fj_kernel_launch(self._handle, array, len(self.args), _current_stream(torch, self.device)))
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _torch_setup(self):
        """torch, once imported; the arguments' torch dtypes, shapes and device, computed once."""
        try:
            import torch
        except ImportError:
            kinds = "torch CPU tensors or numpy arrays" if self.backend == "cpu" else "torch tensors"
            raise TypeError(f"{self._label}: expected {kinds}, and torch is not installed") from None
        if self._torch_args is None:
            self._torch_dtypes = {k: getattr(torch, v) for k, v in _TORCH_DTYPES.items()}
            device = torch.device("cpu") if self.backend == "cpu" else torch.device("cuda", self.device)
            likes = {a.dtype: torch.empty(0, dtype=self._torch_dtypes[a.dtype], device=device) for a in self.outputs}
            self._torch_args = ([(self._torch_dtypes[a.dtype], torch.Size(a.shape)) for a in self.inputs],
                                [(a.shape, likes[a.dtype]) for a in self.outputs], device)
            self._torch = torch
        return torch

    def _check_tensor(self, torch, arg, t, role):
        where = f"{self._label}: argument '{arg.name}' ({role})"
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{where}: expected a torch.Tensor, got {type(t).__name__}")
        if self.backend == "cpu":
            if t.device.type != "cpu":
                raise ValueError(f"{where}: expected a CPU tensor (this kernel runs on the CPU "
                                 f"backend), got {t.device}")
        elif t.device.type != "cuda" or t.device.index != self.device:
            raise ValueError(f"{where}: expected a tensor on cuda:{self.device}, got {t.device}")
        if t.dtype != self._torch_dtypes[arg.dtype]:
            raise TypeError(f"{where}: expected dtype {self._torch_dtypes[arg.dtype]} "
                            f"({arg.dtype}), got {t.dtype}")
        if tuple(t.shape) != arg.shape:
            raise ValueError(f"{where}: expected shape {arg.shape}, got {tuple(t.shape)}")
        if not t.is_contiguous():
            raise ValueError(f"{where}: must be contiguous (call .contiguous())")

    def _call_numpy(self, inputs, out):
        """The CPU backend on numpy arrays (f32 / f16 arguments only)."""
        import numpy as np
        for i, (arg, a) in enumerate(zip(self.inputs, inputs)):
            self._check_array(np, arg, a, f"input {i}")
        if out is None:
            outs = tuple(np.empty(a.shape, dtype=self._numpy_dtype(a)) for a in self.outputs)
        else:
            outs = (out,) if isinstance(out, np.ndarray) else tuple(out)
            if len(outs) != len(self.outputs):
                raise TypeError(f"{self._label}: out= needs {len(self.outputs)} arrays "
                                f"({', '.join(a.name for a in self.outputs)}), got {len(outs)}")
            for i, (arg, a) in enumerate(zip(self.outputs, outs)):
                self._check_array(np, arg, a, f"output {i}")
                if not a.flags.writeable:
                    raise ValueError(f"{self._label}: argument '{arg.name}' (output {i}) is read-only")
        self.launch([a.ctypes.data for a in inputs] + [a.ctypes.data for a in outs])
        return outs[0] if len(outs) == 1 else outs

    def _numpy_dtype(self, arg):
        if arg.dtype not in _NUMPY_DTYPES:
            raise TypeError(f"{self._label}: argument '{arg.name}' is {arg.dtype}, which numpy "
                            "cannot hold: pass torch CPU tensors")
        return _NUMPY_DTYPES[arg.dtype]

    def _check_array(self, np, arg, a, role):
        where = f"{self._label}: argument '{arg.name}' ({role})"
        if not isinstance(a, np.ndarray):
            raise TypeError(f"{where}: expected a numpy array like the other arguments, "
                            f"got {type(a).__name__}")
        expected = np.dtype(self._numpy_dtype(arg))
        if a.dtype != expected:
            raise TypeError(f"{where}: expected dtype {expected} ({arg.dtype}), got {a.dtype}")
        if tuple(a.shape) != arg.shape:
            raise ValueError(f"{where}: expected shape {arg.shape}, got {tuple(a.shape)}")
        if not a.flags.c_contiguous:
            raise ValueError(f"{where}: must be C-contiguous (np.ascontiguousarray)")

    def __repr__(self):
        ins = ", ".join(f"{a.name}: {a.dtype}{list(a.shape)}" for a in self.inputs)
        outs = ", ".join(f"{a.name}: {a.dtype}{list(a.shape)}" for a in self.outputs)
        where = "cpu" if self.backend == "cpu" else f"cuda:{self.device}"
        return f"<{self._label} on {where} ({ins}) -> ({outs})>"


def _current_stream(torch, device):
    """torch's current CUstream on CUDA device `device` (an int handle; 0 for the legacy default stream)."""
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)  # no Stream object: about 1 us instead of 4
    return raw(device) if raw is not None else torch.cuda.current_stream(device).cuda_stream


def _is_ndarray(x):
    """A numpy array, without importing numpy."""
    t = type(x)
    return t.__name__ == "ndarray" and t.__module__ == "numpy"
