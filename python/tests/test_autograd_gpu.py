"""fusejit.autograd on a GPU: gradients against PyTorch's float64 autograd,
100 SGD steps of each seed model (seeds 1 and 3 at a reduced batch and size)
tracking PyTorch's fp32 loss curve,
torch.compile(fullgraph=True) of a model with two fusejit modules (forward and
backward) against eager. Skips cleanly without torch or a CUDA device."""
import pytest
from gpu_util import cuda_torch

torch, DEV = cuda_torch()

import fusejit  # noqa: E402

F = torch.nn.functional
needs_ops = pytest.mark.skipif(not fusejit.torch.available(), reason="torch < 2.4: no torch.library")


@pytest.fixture(autouse=True)
def exact_fp32():
    saved = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32 = saved


@pytest.fixture
def exact_fp32_conv():
    """cuDNN without TF32 (PyTorch's default uses it for convolutions), only in the conv tests: with the cuDNN
    flag also cleared for the linear tests, PyTorch 2.11's tf32 linear measured 7.6e-4 relative L2 for dX
    against float64 where it measures 7.3e-3 otherwise (H100): not the TF32 that test compares with."""
    saved = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cudnn.allow_tf32 = saved


def seed2_spec(m, k, n, precision="fp32"):
    return f"""\
name: seed2_small
precision: {precision}
inputs:
  - {{name: x, shape: [{m}, {k}]}}
  - {{name: gemm_w, shape: [{n}, {k}]}}
  - {{name: bias, shape: [{n}], init: normal}}
ops:
  - {{name: gemm, op: linear, args: [x, gemm_w]}}
  - {{name: biased, op: add, args: [gemm, bias]}}
  - {{name: y, op: relu, args: [biased]}}
outputs: [y]
"""


def seed2_chain(x, w, b):
    return torch.relu(F.linear(x, w) + b)


def grads_of(fn, vals, gy, dtype, compute=None):
    """Gradients (float64) of sum(fn(*inputs) * gy) for the values `vals` rounded to `dtype` on the GPU, then
    converted to `compute` (None: kept in dtype)."""
    ts = [v.to(DEV, dtype) for v in vals]
    ts = [(t if compute is None else t.to(compute)).requires_grad_() for t in ts]
    (fn(*ts).double() * gy.double()).sum().backward()
    return [t.grad.double() for t in ts]


def rel_l2(a, b):
    a, b = a.double(), b.double()
    return ((a - b).norm() / b.norm()).item()


CHAIN = """\
name: ad_gpu_chain
inputs:
  - {name: x, shape: [96, 160]}
  - {name: w, shape: [200, 160]}
  - {name: b, shape: [200]}
  - {name: scale, shape: [200]}
ops:
  - {name: h, op: linear, args: [x, w, b]}
  - {name: g, op: gelu, args: [h]}
  - {name: y, op: mul, args: [g, scale]}
  - {name: s, op: logsumexp, args: [y], dims: [1]}
outputs: [y, s]
"""


def test_gradients_match_torch_float64():
    g = torch.Generator(device="cpu").manual_seed(0)
    vals = [torch.randn(96, 160, generator=g), torch.randn(200, 160, generator=g) * 0.1,
            torch.randn(200, generator=g), torch.rand(200, generator=g) + 0.5]
    ours = [v.to(DEV).requires_grad_() for v in vals]
    ref = [v.to(DEV).double().requires_grad_() for v in vals]
    y, s = fusejit.autograd.function(CHAIN)(*ours)
    gy = torch.randn(96, 200, device=DEV)
    ((y * gy).sum() + s.sum()).backward()
    ry = F.gelu(F.linear(ref[0], ref[1], ref[2])) * ref[3]
    ((ry * gy.double()).sum() + torch.logsumexp(ry, dim=1).sum()).backward()
    for name, o, r in zip("x w b scale".split(), ours, ref):
        assert rel_l2(o.grad, r.grad) <= 1e-5, (name, rel_l2(o.grad, r.grad))


def test_seed2_training_tracks_pytorch_fp32():
    m, k, n = 128, 256, 192
    g = torch.Generator(device="cpu").manual_seed(1)
    w0, b0 = torch.randn(n, k, generator=g) / k ** 0.5, torch.randn(n, generator=g)
    x = torch.rand(m, k, generator=g).to(DEV)
    target = torch.randn(m, n, generator=g).to(DEV)
    block = fusejit.nn.Fused(seed2_spec(m, k, n), gemm_w=w0.clone().to(DEV), bias=b0.clone().to(DEV))
    ref_w = torch.nn.Parameter(w0.clone().to(DEV))
    ref_b = torch.nn.Parameter(b0.clone().to(DEV))
    opt = torch.optim.SGD(block.parameters(), lr=0.5)
    ref_opt = torch.optim.SGD([ref_w, ref_b], lr=0.5)
    worst = 0.0
    for step in range(100):
        opt.zero_grad()
        ref_opt.zero_grad()
        loss = F.mse_loss(block(x), target)
        ref_loss = F.mse_loss(torch.relu(F.linear(x, ref_w) + ref_b), target)
        loss.backward()
        ref_loss.backward()
        opt.step()
        ref_opt.step()
        worst = max(worst, abs(loss.item() - ref_loss.item()) / abs(ref_loss.item()))
    assert worst <= 1e-4, worst
    assert loss.item() < 0.9 * F.mse_loss(torch.relu(F.linear(x, w0.to(DEV)) + b0.to(DEV)), target).item()


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_square_linear_backward(precision):
    """M = K = N: the dX and dW stages are the same graph but for their argument names. The engine's memory cache
    once handed dW the dX kernel (the structural hash ignores names) and the stage failed to compile ("the engine's
    argument list differs from the spec's"); each now gets its own kernel."""
    n = 64
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    g = torch.Generator(device="cpu").manual_seed(3)
    vals = [torch.rand(n, n, generator=g), torch.randn(n, n, generator=g) / n ** 0.5, torch.randn(n, generator=g)]
    gy = torch.randn(n, n, generator=g).to(DEV)

    ours = grads_of(fusejit.autograd.function(seed2_spec(n, n, n, precision)), vals, gy, dtype)
    ref = grads_of(seed2_chain, vals, gy, dtype, torch.float64)
    tol = 2e-2 if precision == "bf16" else 1e-5
    for name, o, r in zip(("x", "gemm_w", "bias"), ours, ref):
        assert rel_l2(o, r) <= tol, (name, rel_l2(o, r))


@pytest.mark.parametrize("precision", ["tf32", "bf16"])
def test_tf32_and_bf16_gradients_within_pytorchs_own_error(precision):
    """Against float64, fusejit's gradients are within a small factor of PyTorch's own error in the same
    precision (the relu mask of a rounded forward flips where z is near 0, so neither is close to float64
    elementwise). tf32: fusejit lands at about 2-4x PyTorch's error (a likely cause, not measured: wgmma
    uses the top 19 bits of the fp32 operands where cuBLAS may round; H100: 7.1e-3 vs 2.0e-3 for x in one run).
    With gy drawn unseeded on the device, x's errors moved from run to run (H100, tf32, one build: fusejit
    1.1e-2 to 2.3e-2, PyTorch 5.6e-4 to 7.3e-3; a few flipped relu masks dominate), so gy is seeded (three
    runs at 9ecfbe7: x 1.31e-2 vs PyTorch 8.5e-3 each time)."""
    m, k, n = 128, 256, 192
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    g = torch.Generator(device="cpu").manual_seed(2)
    vals = [torch.rand(m, k, generator=g), torch.randn(n, k, generator=g) / k ** 0.5, torch.randn(n, generator=g)]
    gy = torch.randn(m, n, generator=g).to(DEV)  # seeded: the unseeded CUDA draw made this test flaky (below)

    ours = grads_of(fusejit.autograd.function(seed2_spec(m, k, n, precision)), vals, gy, dtype)
    ref = grads_of(seed2_chain, vals, gy, dtype, torch.float64)
    torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
    theirs = grads_of(seed2_chain, vals, gy, dtype)
    for name, o, t, r in zip(("x", "gemm_w", "bias"), ours, theirs, ref):
        assert rel_l2(o, r) <= 5 * rel_l2(t, r) + 1e-3, (name, rel_l2(o, r), rel_l2(t, r))


@needs_ops
def test_compile_fullgraph_two_modules_forward_and_backward():
    torch._dynamo.reset()
    g = torch.Generator(device="cpu").manual_seed(3)

    def block(k, n):
        spec = seed2_spec(64, k, n).replace("seed2_small", f"seed2_{k}_{n}")
        return fusejit.nn.Fused(spec, gemm_w=(torch.randn(n, k, generator=g) / k ** 0.5).to(DEV),
                                bias=torch.randn(n, generator=g).to(DEV))

    class Two(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = block(96, 128), block(128, 80)

        def forward(self, x):
            return self.b(self.a(x))

    model = Two()
    x = torch.rand(64, 96, device=DEV, requires_grad=True)
    eager = model(x)
    eager.sum().backward()
    eager_grads = [p.grad.clone() for p in model.parameters()] + [x.grad.clone()]
    for p in model.parameters():
        p.grad = None
    x.grad = None
    explain = torch._dynamo.explain(model)(x)
    assert explain.graph_break_count == 0, explain.break_reasons
    compiled = torch.compile(model, fullgraph=True)
    out = compiled(x)
    out.sum().backward()
    torch.testing.assert_close(out, eager, rtol=0, atol=0)
    for got, want in zip([p.grad for p in model.parameters()] + [x.grad], eager_grads):
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)


def _conv_seed(which):
    """The seed model (fusejit.models) and its PyTorch twin with the same weights; reduced batch and size."""
    torch.manual_seed(4 + which)
    if which == 1:
        model = fusejit.models.ConvReluBias(64, 128, 3, (128, 1, 1), precision="fp32").to(DEV)
        x = torch.rand(8, 64, 34, 30, device=DEV)

        def twin(x, w, cb, b):
            return torch.relu(F.conv2d(x, w, cb)) + b
    else:
        model = fusejit.models.ConvTanhScaleBiasMaxPool(8, 64, 3, 2.0, (64, 1, 1), 4, precision="fp32").to(DEV)
        x = torch.rand(8, 8, 66, 70, device=DEV)

        def twin(x, w, cb, b):
            return F.max_pool2d(torch.tanh(F.conv2d(x, w, cb)) * 2.0 + b, 4)
    return model, x, twin


@pytest.mark.parametrize("which", [1, 3])
def test_conv_seed_gradients_match_torch_float64(which, exact_fp32_conv):
    model, x, twin = _conv_seed(which)
    params = [model.conv.weight, model.conv.bias, model.bias]
    x = x.requires_grad_()
    y = model(x)
    gy = torch.randn_like(y)
    (y * gy).sum().backward()
    ref = [t.detach().double().requires_grad_() for t in [x] + params]
    (twin(*ref) * gy.double()).sum().backward()
    for name, o, r in zip(("x", "conv.weight", "conv.bias", "bias"), [x] + params, ref):
        assert rel_l2(o.grad, r.grad) <= 1e-5, (name, rel_l2(o.grad, r.grad))


@pytest.mark.parametrize("which", [1, 3])
def test_conv_seed_training_tracks_pytorch_fp32(which, exact_fp32_conv):
    model, x, twin = _conv_seed(which)
    ref = [torch.nn.Parameter(t.detach().clone()) for t in (model.conv.weight, model.conv.bias, model.bias)]
    with torch.no_grad():
        target = torch.randn_like(twin(x, *ref))
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    ref_opt = torch.optim.SGD(ref, lr=0.5)
    worst, first = 0.0, None
    for step in range(100):
        opt.zero_grad()
        ref_opt.zero_grad()
        loss = F.mse_loss(model(x), target)
        ref_loss = F.mse_loss(twin(x, *ref), target)
        loss.backward()
        ref_loss.backward()
        opt.step()
        ref_opt.step()
        first = first or ref_loss.item()
        worst = max(worst, abs(loss.item() - ref_loss.item()) / abs(ref_loss.item()))
    assert worst <= 1e-4, worst
    assert loss.item() < 0.95 * first, (loss.item(), first)
