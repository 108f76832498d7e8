"""The gradient program of a spec (docs/backward.md); no torch or GPU needed.

    bw = fusejit.Backward("chain.yaml", no_grad=("x",))
    print(bw)                 # buffers, the forward with saved values, each stage's IR
    bw.forward                # fusejit.Spec: the forward, its saved values as extra outputs
    bw.stages                 # [fusejit.Spec]: run in order; arguments named after buffers
    bw.buffers                # [Buffer(name, dtype, shape, role)]
    bw.input_grads            # forward input name -> buffer holding its gradient

fusejit.autograd runs it under torch autograd.
"""
from collections import namedtuple
from ctypes import byref, c_char_p, c_int, c_size_t, c_void_p

from . import _lib
from ._kernel import Spec, _as_spec
from ._lib import check, encode_text, lib

Buffer = namedtuple("Buffer", "name dtype shape role")
_ROLES = ("input", "saved", "output_grad", "temporary", "input_grad")


class Backward:
    """`spec`: a path, YAML text or fusejit.Spec. `no_grad`: input names whose
    gradients are not wanted. `backend`: the stages' backend, "cuda" or "cpu"
    (both take conv2d's dW as one conv2d_weight_grad kernel today: the same
    program). SpecError when an op has no derivative yet."""

    def __init__(self, spec, no_grad=(), backend="cuda"):
        L = lib()
        if backend not in _lib.BACKENDS:
            raise ValueError(f"backend: expected one of {sorted(_lib.BACKENDS)}, got {backend!r}")
        self.spec = _as_spec(spec)
        self.backend = backend
        names = [encode_text(n) for n in no_grad] + [None]
        array = (c_char_p * len(names))(*names)
        handle = c_void_p()
        check(L.fj_backward_build_for(self.spec._handle, array, _lib.BACKENDS[backend], byref(handle)))
        self._handle, self._lib = handle, L
        self.no_grad = tuple(no_grad)
        self.forward = self._spec_from(L.fj_backward_forward)
        count = c_size_t()
        check(L.fj_backward_num_stages(handle, byref(count)))
        self.stages = [self._spec_from(L.fj_backward_stage, i) for i in range(count.value)]
        check(L.fj_backward_num_buffers(handle, byref(count)))
        self.buffers = []
        for i in range(count.value):
            info, role = _lib.ArgInfoC(), c_int()
            check(L.fj_backward_buffer(handle, i, byref(info), byref(role)))
            self.buffers.append(Buffer(info.name.decode(), _lib.DTYPE_NAMES[info.dtype],
                                       tuple(info.shape[d] for d in range(info.rank)), _ROLES[role.value]))
        self.input_grads = {}
        for arg in self.spec.inputs:
            name = c_char_p()
            check(L.fj_backward_input_grad(handle, encode_text(arg.name), byref(name)))
            if name.value is not None:
                self.input_grads[arg.name] = name.value.decode()

    def _spec_from(self, get, *index):
        handle = c_void_p()
        check(get(self._handle, *index, byref(handle)))
        return Spec(None, _handle=handle)

    @property
    def output_grads(self):
        """The buffers the caller fills with the forward outputs' gradients, in output order."""
        return [b for b in self.buffers if b.role == "output_grad"]

    @property
    def saved(self):
        """The forward's extra outputs (after the spec's own outputs)."""
        return self.forward.outputs[len(self.spec.outputs):]

    def __del__(self):
        handle = getattr(self, "_handle", None)
        if handle:
            self._lib.fj_backward_destroy(handle)
            self._handle = None

    def __str__(self):
        text = c_void_p()
        check(self._lib.fj_backward_print(self._handle, byref(text)))
        return _lib.take_string(text)

    def __repr__(self):
        return f"<fusejit.Backward of {self.spec.name or '(unnamed)'}: {len(self.stages)} stages>"
