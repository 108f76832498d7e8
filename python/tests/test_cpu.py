"""The Python bridge on the CPU backend (LLVM, docs/cpu.md): ctypes buffers,
numpy arrays and torch CPU tensors against hand or float64 computations,
argument errors. Skips cleanly when the library has no CPU backend; the
numpy and torch parts skip when those are not installed."""
import ctypes
import math

import pytest

import fusejit
from fusejit import specs

if not fusejit.backend_available("cpu"):
    pytest.skip("this libfusejit_c.so has no CPU backend (built without LLVM)",
                allow_module_level=True)

LINEAR = """\
name: py_cpu_linear
inputs:
  - {name: x, shape: [2, 3]}
  - {name: w, shape: [2, 3]}
  - {name: b, shape: [2]}
ops:
  - {name: lin, op: linear, args: [x, w, b]}
  - {name: y, op: relu, args: [lin]}
outputs: [y]
"""
X = [1.0, 2.0, 3.0, -1.0, 0.5, 2.0]
W = [0.5, -1.0, 2.0, 1.0, 1.0, -3.0]
B = [0.25, 1.0]
EXPECTED = [4.75, 0.0, 3.25, 0.0]  # relu(x @ w.T + b), by hand


def test_ctypes_buffers_by_hand():
    k = fusejit.compile(LINEAR, device="cpu")
    assert k.backend == "cpu" and k.device == "cpu" and k.arch == "cpu"
    assert "on cpu" in repr(k)
    arrays = [(ctypes.c_float * len(v))(*v) for v in (X, W, B)] + [(ctypes.c_float * 4)(*[-7.0] * 4)]
    k.launch([ctypes.addressof(a) for a in arrays])
    assert list(arrays[3]) == pytest.approx(EXPECTED, abs=1e-6)
    with pytest.raises(fusejit.InvalidArgumentError, match="4 host pointers"):
        k.launch([ctypes.addressof(arrays[0])])
    with pytest.raises(fusejit.InvalidArgumentError, match="null host pointer"):
        k.launch([ctypes.addressof(a) for a in arrays[:3]] + [0])


def test_emit_llvm_ir_and_lazy():
    ir = fusejit.emit(LINEAR, "source", device="cpu")
    assert "define " in ir and "__global__" not in ir
    assert fusejit.emit(LINEAR, "plan", device="cpu").strip()
    k = fusejit.compile(LINEAR, device="cpu", lazy=True)
    assert not k.loaded
    k.load()
    assert k.loaded and k.name


def test_auto_device():
    k = fusejit.compile(LINEAR, device="auto")
    assert k.backend == ("cuda" if fusejit.device_count() > 0 else "cpu")
    assert fusejit.backend_available("auto")
    with pytest.raises(ValueError, match="backend"):
        fusejit.backend_available("tpu")
    with pytest.raises(ValueError, match="device"):
        fusejit.compile(LINEAR, device="tpu")


def test_numpy_arrays():
    np = pytest.importorskip("numpy")
    k = fusejit.compile(LINEAR, device="cpu")
    x, w, b = (np.array(v, dtype=np.float32) for v in (X, W, B))
    x, w = x.reshape(2, 3), w.reshape(2, 3)
    y = k(x, w, b)
    assert isinstance(y, np.ndarray) and y.shape == (2, 2) and y.dtype == np.float32
    np.testing.assert_allclose(y.ravel(), EXPECTED, atol=1e-6)
    out = np.full((2, 2), np.nan, dtype=np.float32)
    assert k(x, w, b, out=out) is out
    np.testing.assert_allclose(out.ravel(), EXPECTED, atol=1e-6)
    with pytest.raises(TypeError, match="float32"):
        k(x.astype(np.float64), w, b)
    with pytest.raises(ValueError, match="contiguous"):
        k(np.asfortranarray(np.ones((2, 3), np.float32)), w, b)
    with pytest.raises(ValueError, match="shape"):
        k(x.reshape(3, 2), w, b)
    with pytest.raises(TypeError, match="3 inputs"):
        k(x, w)
    with pytest.raises(TypeError, match="numpy array"):
        k(x, [0.0] * 6, b)


def test_numpy_larger_linear_against_float64():
    np = pytest.importorskip("numpy")
    rng = np.random.default_rng(0)
    m, n, kk = 37, 45, 70  # not multiples of any tile
    text = specs.gemm_bias_relu(((m, kk), "f32"), ((n, kk), "f32"), ((n,), "f32"))
    k = fusejit.compile(text, device="cpu")
    x = rng.standard_normal((m, kk), dtype=np.float32)
    w = rng.standard_normal((n, kk), dtype=np.float32)
    b = rng.standard_normal((n,), dtype=np.float32)
    y = k(x, w, b)
    ref = np.maximum(x.astype(np.float64) @ w.astype(np.float64).T + b, 0)
    assert np.linalg.norm(y - ref) / np.linalg.norm(ref) < 1e-5


# ---- torch CPU tensors ---------------------------------------------------------------


def rel_l2(a, b):
    return ((a.double() - b.double()).norm() / b.double().norm()).item()


def test_torch_conv_relu_bias():
    torch = pytest.importorskip("torch")
    g = torch.Generator().manual_seed(1)
    x = torch.rand(2, 5, 13, 11, generator=g)
    w = torch.randn(7, 5, 3, 3, generator=g) * 0.2
    cb = torch.randn(7, generator=g)
    bias = torch.randn(7, 1, 1, generator=g)
    f32 = "f32"
    k = fusejit.compile(specs.conv_relu_bias(((2, 5, 13, 11), f32), ((7, 5, 3, 3), f32),
                                             ((7,), f32), ((7, 1, 1), f32)), device="cpu")
    y = k(x, w, cb, bias)
    assert y.device.type == "cpu" and y.shape == (2, 7, 11, 9)
    ref = torch.relu(torch.nn.functional.conv2d(x.double(), w.double(), cb.double())) + bias.double()
    assert rel_l2(y, ref) < 1e-5
    out = torch.full_like(y, math.nan)
    k(x, w, cb, bias, out=out)
    assert rel_l2(out, ref) < 1e-5
    with pytest.raises(TypeError, match="float32"):
        k(x.double(), w, cb, bias)
    with pytest.raises(ValueError, match="contiguous"):
        k(x.transpose(2, 3).contiguous().transpose(2, 3), w, cb, bias)


def test_torch_conv_tanh_scale_bias_maxpool():
    torch = pytest.importorskip("torch")
    g = torch.Generator().manual_seed(3)
    shapes = ((2, 4, 18, 19), (6, 4, 3, 3), (6,), (6, 1, 1))
    x, w, cb, bias = (torch.rand(s, generator=g) - 0.5 for s in shapes)
    f32 = "f32"
    text = specs.conv_tanh_scale_bias_maxpool(*((s, f32) for s in shapes), 2.0, 4)
    y = fusejit.compile(text, device="cpu")(x, w, cb, bias)
    conv = torch.nn.functional.conv2d(x.double(), w.double(), cb.double())
    ref = torch.nn.functional.max_pool2d(torch.tanh(conv) * 2.0 + bias.double(), 4)
    assert y.shape == ref.shape
    assert rel_l2(y, ref) < 1e-5


def test_torch_linear_logsumexp():
    torch = pytest.importorskip("torch")
    text = """\
name: py_cpu_lse
inputs:
  - {name: x, shape: [9, 33]}
  - {name: w, shape: [50, 33]}
  - {name: b, shape: [50]}
ops:
  - {name: lin, op: linear, args: [x, w, b]}
  - {name: y, op: logsumexp, args: [lin], dims: [1]}
outputs: [y]
"""
    g = torch.Generator().manual_seed(4)
    x, w, b = torch.randn(9, 33, generator=g), torch.randn(50, 33, generator=g), torch.randn(50, generator=g)
    y = fusejit.compile(text, device="cpu")(x, w, b)
    ref = torch.logsumexp(torch.nn.functional.linear(x.double(), w.double(), b.double()), 1)
    assert y.shape == ref.shape
    assert rel_l2(y, ref) < 1e-5


def test_torch_model_on_cpu():
    torch = pytest.importorskip("torch")
    import fusejit.models as fm
    torch.manual_seed(0)
    m = fm.ConvReluBias(3, 5, 3, (5, 1, 1))
    x = torch.rand(2, 3, 10, 12)
    with torch.no_grad():
        y = m(x)
        ref = torch.relu(torch.nn.functional.conv2d(x.double(), m.conv.weight.double(),
                                                    m.conv.bias.double())) + m.bias.double()
    assert y.device.type == "cpu"
    assert rel_l2(y, ref) < 1e-5
