"""The Python bridge on a GPU: the seed models against PyTorch in float64 on
the same weights, direct kernel calls, streams, argument errors. Skips
cleanly without torch or a CUDA device."""
import warnings

import pytest
from gpu_util import cuda_torch

torch, DEV = cuda_torch()

from torch import nn  # noqa: E402

import fusejit  # noqa: E402
import fusejit.models as fm  # noqa: E402


@pytest.fixture(autouse=True)
def exact_fp32():
    """PyTorch's own fp32 math must not use TF32 where it is only the check."""
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


# ---- the PyTorch models the seeds come from (same parameter names) -----------------


class RefConvReluBias(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        return torch.relu(self.conv(x)) + self.bias


class RefGemmBiasRelu(nn.Module):
    def __init__(self, in_features, out_features, bias_shape):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        return torch.relu(self.gemm(x) + self.bias)


class RefConvTanhScaleBiasMaxPool(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, scaling_factor, bias_shape,
                 pool_kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.scaling_factor = scaling_factor
        self.bias = nn.Parameter(torch.randn(bias_shape))
        self.max_pool = nn.MaxPool2d(pool_kernel_size)

    def forward(self, x):
        return self.max_pool(torch.tanh(self.conv(x)) * self.scaling_factor + self.bias)


SEEDS = {
    "conv_relu_bias": (fm.ConvReluBias, RefConvReluBias, (4, 8, 3, (8, 1, 1)), (2, 4, 10, 12)),
    "gemm_bias_relu": (fm.GemmBiasRelu, RefGemmBiasRelu, (32, 48, (48,)), (8, 32)),
    "conv_tanh_scale_bias_maxpool": (fm.ConvTanhScaleBiasMaxPool, RefConvTanhScaleBiasMaxPool,
                                     (3, 8, 3, 2.0, (8, 1, 1), 2), (2, 3, 17, 18)),
}


def make_pair(name):
    fused_cls, ref_cls, ctor_args, x_shape = SEEDS[name]
    torch.manual_seed(0)
    fused = fused_cls(*ctor_args).to(DEV)
    ref = ref_cls(*ctor_args).to(DEV)
    ref.load_state_dict(fused.state_dict())  # same names, same weights
    return fused, ref, x_shape


def reference64(ref, x):
    return ref.double()(x.double())


@pytest.mark.parametrize("name", sorted(SEEDS))
def test_seed_model_matches_pytorch_float64(name):
    fused, ref, x_shape = make_pair(name)
    x = torch.rand(x_shape, device=DEV)
    with torch.no_grad():
        y = fused(x)
        torch.cuda.synchronize()
        expected = reference64(ref, x)
    assert y.dtype == torch.float32 and y.device == x.device
    assert y.shape == expected.shape
    torch.testing.assert_close(y.double(), expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", sorted(SEEDS))
def test_seed_model_initializes_like_pytorch(name):
    fused_cls, ref_cls, ctor_args, _ = SEEDS[name]
    torch.manual_seed(123)
    fused = fused_cls(*ctor_args)
    torch.manual_seed(123)
    ref = ref_cls(*ctor_args)
    fused_state, ref_state = fused.state_dict(), ref.state_dict()
    assert fused_state.keys() == ref_state.keys()
    for key in ref_state:
        assert torch.equal(fused_state[key], ref_state[key]), key


def test_model_compiles_once_per_shape():
    fused, ref, x_shape = make_pair("gemm_bias_relu")
    with torch.no_grad():
        for batch in (8, 3, 8):
            x = torch.rand((batch,) + x_shape[1:], device=DEV)
            torch.testing.assert_close(fused(x).double(), reference64(ref, x), rtol=1e-4, atol=1e-4)
    assert len(fused._kernels) == 2


def test_model_connects_to_autograd():
    fused, _, x_shape = make_pair("conv_relu_bias")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the conv chain has a backward: no "no backward" warning
        y = fused(torch.rand(x_shape, device=DEV))
    assert y.grad_fn is not None


def test_model_warns_once_when_a_chain_has_no_backward(monkeypatch):
    import fusejit.autograd

    def no_backward(*args, **kwargs):
        raise fusejit.SpecError(2, "FJ_ERR_SPEC", "no derivative for this op")
    monkeypatch.setattr(fusejit.autograd, "function", no_backward)
    fused, _, x_shape = make_pair("conv_relu_bias")
    with pytest.warns(UserWarning, match="no backward"):
        y = fused(torch.rand(x_shape, device=DEV))
    assert y.grad_fn is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per module
        fused(torch.rand(x_shape, device=DEV))


def test_model_training_forward_checks_devices():
    """The models' training forward launches without a Kernel call's checks (the spec is the tensors' own shapes
    and dtypes); a parameter left on the CPU still gets the Kernel call's error, naming the argument."""
    fused, _, x_shape = make_pair("gemm_bias_relu")
    x = torch.rand(x_shape, device=DEV, requires_grad=True)
    y = fused(x)  # the fast path, then the same call with the bias moved off the device
    assert y.grad_fn is not None
    fused.bias.data = fused.bias.data.cpu()
    with pytest.raises(ValueError, match="bias.*expected a tensor on cuda"):
        fused(x)


def test_gemm_bias_relu_bf16():
    fused, ref, x_shape = make_pair("gemm_bias_relu")
    fused = fused.to(torch.bfloat16)
    ref.load_state_dict(fused.state_dict())  # the bf16-rounded weights, held in fp32
    x = torch.rand(x_shape, device=DEV, dtype=torch.bfloat16)
    with torch.no_grad():
        y = fused(x)
        expected = reference64(ref, x)
    assert y.dtype == torch.bfloat16
    torch.testing.assert_close(y.double(), expected, rtol=1e-2, atol=1e-2)


def test_gemm_bias_relu_tf32():
    fused_cls, ref_cls, ctor_args, x_shape = SEEDS["gemm_bias_relu"]
    torch.manual_seed(0)
    fused = fused_cls(*ctor_args, precision="tf32").to(DEV)
    ref = ref_cls(*ctor_args).to(DEV)
    ref.load_state_dict(fused.state_dict())
    x = torch.rand(x_shape, device=DEV)
    with torch.no_grad():
        y = fused(x)
        expected = reference64(ref, x)
    torch.testing.assert_close(y.double(), expected, rtol=5e-3, atol=5e-3)


# ---- direct kernels -------------------------------------------------------------------

SPEC = """\
name: py_gpu_small
inputs:
  - {name: x, shape: [2, 3, 8, 9]}
  - {name: w, shape: [4, 3, 3, 3]}
  - {name: b, shape: [4]}
  - {name: bias, shape: [4, 1, 1], init: normal}
ops:
  - {name: conv, op: conv2d, args: [x, w, b]}
  - {name: act, op: relu, args: [conv]}
  - {name: y, op: add, args: [act, bias]}
outputs: [y]
"""


@pytest.fixture(scope="module")
def kernel():
    return fusejit.compile(SPEC)


def small_inputs():
    torch.manual_seed(1)
    return (torch.rand(2, 3, 8, 9, device=DEV), torch.randn(4, 3, 3, 3, device=DEV),
            torch.randn(4, device=DEV), torch.randn(4, 1, 1, device=DEV))


def expected_small(x, w, b, bias):
    return torch.relu(nn.functional.conv2d(x.double(), w.double(), b.double())) + bias.double()


def test_kernel_call_and_out(kernel):
    assert kernel.loaded and kernel.name and kernel.arch.startswith("sm_")
    inputs = small_inputs()
    y = kernel(*inputs)
    torch.testing.assert_close(y.double(), expected_small(*inputs), rtol=1e-4, atol=1e-4)
    out = torch.full_like(y, float("nan"))
    assert kernel(*inputs, out=out) is out
    torch.testing.assert_close(out, y)


def test_kernel_runs_on_current_stream(kernel):
    inputs = small_inputs()
    side = torch.cuda.Stream(device=DEV)
    side.wait_stream(torch.cuda.current_stream(DEV))
    with torch.cuda.stream(side):
        y = kernel(*inputs)
    side.synchronize()
    torch.testing.assert_close(y.double(), expected_small(*inputs), rtol=1e-4, atol=1e-4)


def test_kernel_argument_errors(kernel):
    x, w, b, bias = small_inputs()
    with pytest.raises(TypeError, match="takes 4 inputs"):
        kernel(x, w, b)
    with pytest.raises(TypeError, match="'w'.*torch.Tensor"):
        kernel(x, [1.0], b, bias)
    with pytest.raises(TypeError, match="'x'.*dtype"):
        kernel(x.half(), w, b, bias)
    with pytest.raises(ValueError, match="'b'.*cuda"):
        kernel(x, w, b.cpu(), bias)
    with pytest.raises(ValueError, match="'bias'.*shape"):
        kernel(x, w, b, bias.reshape(4, 1))
    x_nc = torch.rand(2, 3, 9, 8, device=DEV).transpose(2, 3)
    with pytest.raises(ValueError, match="'x'.*contiguous"):
        kernel(x_nc, w, b, bias)
    with pytest.raises(ValueError, match="'y'.*shape"):
        kernel(x, w, b, bias, out=torch.empty(3, device=DEV))


# ---- fusejit.nn.Fused -----------------------------------------------------------------

def test_fused_module_on_cuda():
    _, w, b, bias = small_inputs()
    m = fusejit.nn.Fused(SPEC, w=w, b=b, bias=bias)
    assert m.input_names == ["x"]
    x = torch.rand(2, 3, 8, 9, device=DEV)
    with torch.no_grad():
        y = m(x)
    assert y.device == x.device
    torch.testing.assert_close(y.double(), expected_small(x, w, b, bias), rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="'w' is on cuda:0, 'x' on cpu"):
        with torch.no_grad():
            m(x.cpu())


needs_ops = pytest.mark.skipif(not fusejit.torch.available(), reason="torch < 2.4: no torch.library fake kernels")


@needs_ops
def test_op_for_is_one_torch_op_per_spec():
    inputs = small_inputs()
    op = fusejit.torch.op_for(SPEC)
    assert op is fusejit.torch.op_for(SPEC)
    assert str(op).startswith("fusejit.py_gpu_small_")
    with torch.no_grad():
        y = op(*inputs)
    torch.testing.assert_close(y.double(), expected_small(*inputs), rtol=1e-4, atol=1e-4)


class OpModule(nn.Module):
    """A plain module around the spec's operator."""

    def __init__(self, w, b, bias):
        super().__init__()
        self.w, self.b, self.bias = nn.Parameter(w), nn.Parameter(b), nn.Parameter(bias)
        self.op = fusejit.torch.op_for(SPEC)

    def forward(self, x):
        return self.op(x, self.w, self.b, self.bias)


@pytest.fixture
def op_module():
    """(module around the spec's operator, its parameters, a fresh input)."""
    _, w, b, bias = small_inputs()
    return OpModule(w, b, bias), (w, b, bias), torch.rand(2, 3, 8, 9, device=DEV)


@needs_ops
def test_op_compiles_without_graph_breaks(op_module):
    m, (w, b, bias), x = op_module
    with torch.no_grad():
        eager = m(x)
        explained = torch._dynamo.explain(m)(x)
        compiled = torch.compile(m, fullgraph=True)(x)
    assert explained.graph_break_count == 0, explained
    torch.testing.assert_close(compiled, eager)
    torch.testing.assert_close(eager.double(), expected_small(x, w, b, bias), rtol=1e-4, atol=1e-4)


@needs_ops
def test_fused_module_compiles_without_graph_breaks():
    _, w, b, bias = small_inputs()
    m = fusejit.nn.Fused(SPEC, w=w, b=b, bias=bias)
    x = torch.rand(2, 3, 8, 9, device=DEV)
    with torch.no_grad():
        eager = m(x)
        explained = torch._dynamo.explain(m)(x)
        compiled = torch.compile(m, fullgraph=True)(x)
    assert explained.graph_break_count == 0, explained
    torch.testing.assert_close(compiled, eager)
    torch.testing.assert_close(eager.double(), expected_small(x, w, b, bias), rtol=1e-4, atol=1e-4)


@needs_ops
def test_op_is_captured_by_a_cuda_graph(op_module):
    m, (w, b, bias), x = op_module
    with torch.no_grad():
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # the first call compiles: outside the capture
            m(x)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            y = m(x)
        x.copy_(torch.rand_like(x))
        graph.replay()
        torch.cuda.synchronize()
    torch.testing.assert_close(y.double(), expected_small(x, w, b, bias), rtol=1e-4, atol=1e-4)


def rel_l2(got, want):
    """Relative L2 error of `got` against `want`, in float64."""
    got, want = got.double(), want.double()
    return ((got - want).norm() / want.norm()).item()


SCRATCH_SPEC = """\
name: py_gpu_scratch_linear
precision: fp32
inputs:
  - {name: x, shape: [256, 512]}
  - {name: w, shape: [384, 512]}
  - {name: b, shape: [384]}
ops:
  - {name: h, op: linear, args: [x, w, b]}
  - {name: y, op: gelu, args: [h]}
outputs: [y]
"""


def test_program_with_scratch_is_captured_by_a_cuda_graph():
    """A program with scratch buffers (sm_90a: 3xTF32's residuals, written by a staging kernel before the GEMM)
    orders its scratch with an event between launches; inside a stream capture that event must be left alone
    (a wait on an event recorded outside the capture ends it with an error), and after the capture eager calls
    must still work."""
    if "0 scratch buffer(s)" in fusejit.emit(SCRATCH_SPEC, "plan"):
        pytest.skip("this device's plan has no scratch buffer")
    g = torch.Generator(device="cpu").manual_seed(5)
    x = torch.rand(256, 512, generator=g).to(DEV)
    w = (torch.randn(384, 512, generator=g) / 512 ** 0.5).to(DEV)
    b = torch.randn(384, generator=g).to(DEV)
    kernel = fusejit.compile(SCRATCH_SPEC)

    def expected():
        return torch.nn.functional.gelu(torch.nn.functional.linear(x.double(), w.double(), b.double()))

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        kernel(x, w, b)  # loaded, and its scratch event recorded, outside the capture
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = kernel(x, w, b)
    for _ in range(2):
        x.copy_(torch.rand(256, 512, generator=g).to(DEV))
        y.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert rel_l2(y, expected()) <= 1e-5
    eager = kernel(x, w, b)  # the same program eagerly again, its event in use again
    torch.cuda.synchronize()
    assert rel_l2(eager, expected()) <= 1e-5


MISALIGNED_CONV = """\
name: py_gpu_misaligned_conv
precision: bf16
inputs:
  - {name: x, shape: [2, 64, 12, 12]}
  - {name: w, shape: [64, 64, 3, 3]}
  - {name: b, shape: [64]}
ops:
  - {name: c, op: conv2d, args: [x, w, b], padding: 1}
  - {name: y, op: relu, args: [c]}
outputs: [y]
"""


@pytest.mark.parametrize("offset", [0, 1, 3])
def test_bf16_conv_input_at_any_element_offset(offset):
    """x as a view that starts `offset` elements into its buffer: the NHWC staging kernel (sm_90a wgmma convs)
    reads 16 bytes at a time only from an aligned x, element by element otherwise (fj::transpose16_wide<1, VS>);
    both must give the same result."""
    g = torch.Generator(device="cpu").manual_seed(7)
    flat = torch.rand(2 * 64 * 12 * 12 + offset, generator=g).to(DEV, torch.bfloat16)
    x = flat[offset:].view(2, 64, 12, 12)
    assert x.is_contiguous() and (x.data_ptr() % 16 == 0) == (offset == 0)
    w = (torch.randn(64, 64, 3, 3, generator=g) / 24).to(DEV, torch.bfloat16)
    b = torch.randn(64, generator=g).to(DEV, torch.bfloat16)
    y = fusejit.compile(MISALIGNED_CONV)(x, w, b)
    ref = torch.relu(nn.functional.conv2d(x.double(), w.double(), b.double(), padding=1))
    assert rel_l2(y, ref) <= 2e-2


LANES_SPEC = """\
name: py_gpu_pointwise_lanes
precision: bf16
inputs:
  - {name: grad_y, shape: [96, 256]}
  - {name: saved, shape: [96, 256]}
  - {name: bias, shape: [256]}
ops:
  - {name: a, op: add, args: [saved, bias]}
  - {name: m, op: gt, args: [a, 0.0]}
  - {name: dz, op: mul, args: [grad_y, m]}
  - {name: gb, op: sum, args: [dz], dims: [0]}
outputs: [gb, dz]
"""


@pytest.mark.parametrize("offset", [0, 1])
def test_pointwise_kernel_on_lanes_and_on_unaligned_views(offset):
    """A pointwise kernel takes 8 consecutive bf16 elements a thread (16-byte accesses) where its buffers are
    aligned, one element a thread otherwise (grad_y `offset` elements into its buffer); both against float64."""
    assert "kLanes" in fusejit.emit(LANES_SPEC)
    g = torch.Generator(device="cpu").manual_seed(9)
    flat = torch.randn(96 * 256 + offset, generator=g).to(DEV, torch.bfloat16)
    grad_y = flat[offset:].view(96, 256)
    saved = torch.randn(96, 256, generator=g).to(DEV, torch.bfloat16)
    bias = torch.randn(256, generator=g).to(DEV, torch.bfloat16)
    gb, dz = fusejit.compile(LANES_SPEC)(grad_y, saved, bias)
    want_dz = grad_y.double() * ((saved.double() + bias.double()) > 0)
    assert torch.equal(dz.double(), want_dz.to(torch.bfloat16).double())  # one rounding of an exact product
    assert rel_l2(gb, want_dz.sum(0)) <= 2e-2
