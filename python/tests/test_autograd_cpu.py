"""fusejit.autograd on the CPU backend: gradients of every input against
PyTorch's float64 autograd on the same values, no_grad inputs, the program's
structure through fusejit.Backward, and errors. Skips without torch or without
a CPU backend in the library."""
import pytest

import fusejit

torch = pytest.importorskip("torch")
if not fusejit.backend_available("cpu"):
    pytest.skip("this libfusejit_c.so has no CPU backend (built without LLVM)", allow_module_level=True)
F = torch.nn.functional

LINEAR_CHAIN = """\
name: ad_linear_chain
inputs:
  - {name: x, shape: [6, 20]}
  - {name: w, shape: [12, 20]}
  - {name: b, shape: [12]}
  - {name: scale, shape: [12]}
ops:
  - {name: h, op: linear, args: [x, w, b]}
  - {name: g, op: gelu, args: [h]}
  - {name: y, op: mul, args: [g, scale]}
  - {name: s, op: logsumexp, args: [y], dims: [1]}
outputs: [y, s]
"""


def torch_chain(x, w, b, scale):
    y = F.gelu(F.linear(x, w, b)) * scale
    return y, torch.logsumexp(y, dim=1)


def rel_l2(a, b):
    a, b = a.double(), b.double()
    return ((a - b).norm() / b.norm()).item()


def values(seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(6, 20, generator=g), torch.randn(12, 20, generator=g) * 0.3,
            torch.randn(12, generator=g), torch.rand(12, generator=g) + 0.5]


def test_gradients_match_torch_float64():
    f = fusejit.autograd.function(LINEAR_CHAIN)
    ours = [v.clone().requires_grad_() for v in values()]
    ref = [v.double().requires_grad_() for v in values()]
    y, s = f(*ours)
    ry, rs = torch_chain(*ref)
    gy, gs = torch.randn(6, 12, generator=torch.Generator().manual_seed(1)), torch.randn(6)
    (y * gy).sum().backward(retain_graph=True)
    (s * gs).sum().backward()
    ((ry * gy.double()).sum() + (rs * gs.double()).sum()).backward()
    assert rel_l2(y.detach(), ry.detach()) < 1e-5
    for name, a, r in zip("x w b scale".split(), ours, ref):
        assert a.grad is not None, name
        assert a.grad.shape == r.shape and a.grad.dtype == torch.float32, name
        assert rel_l2(a.grad, r.grad) < 1e-5, (name, rel_l2(a.grad, r.grad))


def test_no_grad_inputs_get_none_and_fewer_stages():
    f = fusejit.autograd.function(LINEAR_CHAIN)
    x, w, b, scale = values()
    w.requires_grad_()
    y, s = f(x, w, b, scale)
    s.sum().backward()
    assert x.grad is None and b.grad is None and scale.grad is None
    ref_w = values()[1].double().requires_grad_()
    torch_chain(x.double(), ref_w, b.double(), scale.double())[1].sum().backward()
    assert rel_l2(w.grad, ref_w.grad) < 1e-5
    bw = fusejit.Backward(LINEAR_CHAIN, no_grad=("x", "b", "scale"))
    assert set(bw.input_grads) == {"w"}
    assert not any("dX" in str(s) for s in bw.stages)


def test_matmul_softmax_three_dims():
    spec = """\
name: ad_matmul
inputs:
  - {name: a, shape: [2, 5, 8]}
  - {name: m, shape: [8, 7]}
ops:
  - {name: z, op: matmul, args: [a, m]}
  - {name: y, op: softmax, args: [z], dim: 2}
outputs: [y]
"""
    g = torch.Generator().manual_seed(3)
    a, m = torch.randn(2, 5, 8, generator=g), torch.randn(8, 7, generator=g)
    ours = [a.clone().requires_grad_(), m.clone().requires_grad_()]
    ref = [a.double().requires_grad_(), m.double().requires_grad_()]
    gy = torch.randn(2, 5, 7, generator=g)
    (fusejit.autograd.function(spec)(*ours) * gy).sum().backward()
    (torch.softmax(ref[0] @ ref[1], dim=2) * gy.double()).sum().backward()
    for o, r in zip(ours, ref):
        assert rel_l2(o.grad, r.grad) < 1e-5


def test_backward_program_description():
    bw = fusejit.Backward(LINEAR_CHAIN)
    assert [b.name for b in bw.output_grads] == ["grad_y", "grad_s"]
    assert [a.name for a in bw.saved] == ["saved_h"]
    assert set(bw.input_grads) == {"x", "w", "b", "scale"}
    assert len(bw.stages) == 3
    roles = {b.name: b.role for b in bw.buffers}
    assert roles["x"] == "input" and roles["saved_h"] == "saved" and roles["grad_y"] == "output_grad"
    text = str(bw)
    assert "dW = dZ^T X" in text and "stage 1" in text


def test_errors():
    padded = """\
name: ad_conv
inputs:
  - {name: x, shape: [1, 4, 6, 6]}
  - {name: w, shape: [3, 4, 1, 1]}
ops:
  - {name: z, op: conv2d, args: [x, w], padding: 1}
outputs: [z]
"""
    # a padded 1x1 conv: dX crops dZ (insert_zeros' crop), then a conv with padding 0
    assert "tmp_dz_cropped" in str(fusejit.Backward(padded))
    g = torch.Generator().manual_seed(5)
    x, w = torch.randn(1, 4, 6, 6, generator=g), torch.randn(3, 4, 1, 1, generator=g)
    fn = fusejit.autograd.function(padded)
    xs, ws = x.clone().requires_grad_(), w.clone().requires_grad_()
    fn(xs, ws).sum().backward()
    rx, rw = x.double().requires_grad_(), w.double().requires_grad_()
    F.conv2d(rx, rw, padding=1).sum().backward()
    assert rel_l2(xs.grad, rx.grad) < 1e-5 and rel_l2(ws.grad, rw.grad) < 1e-5
    # through autograd a gradient fusejit cannot give (through im2col_backward, col2im) is an error only when
    # asked for
    folded = """\
name: ad_im2col_backward
inputs:
  - {name: x, shape: [18, 4]}
  - {name: w, shape: [1, 2, 4, 4]}
ops:
  - {name: c, op: im2col_backward, args: [x], input_shape: [1, 2, 4, 4], kernel_size: 3}
  - {name: z, op: mul, args: [c, w]}
outputs: [z]
"""
    with pytest.raises(fusejit.SpecError, match="im2col_backward 'c': has no derivative"):
        fusejit.Backward(folded)
    x, w = torch.randn(18, 4, generator=g), torch.randn(1, 2, 4, 4, generator=g)
    fn = fusejit.autograd.function(folded)
    ws = w.clone().requires_grad_()
    fn(x, ws).sum().backward()
    rw = w.double().requires_grad_()
    (F.fold(x.double()[None], (4, 4), 3) * rw).sum().backward()
    assert rel_l2(ws.grad, rw.grad) < 1e-5
    with pytest.raises(fusejit.SpecError, match="has no derivative"):
        fn(x.clone().requires_grad_(), w).sum().backward()
    with pytest.raises(fusejit.SpecError, match="'nope'"):
        fusejit.Backward(LINEAR_CHAIN, no_grad=("nope",))
    f = fusejit.autograd.function(LINEAR_CHAIN)
    with pytest.raises(TypeError, match="takes 4 inputs"):
        f(torch.zeros(6, 20))


def test_seed2_model_trains_like_pytorch():
    import fusejit.models as fm
    torch.manual_seed(0)
    ours = fm.GemmBiasRelu(20, 12, (12,))
    ref_w = ours.gemm.weight.detach().double().clone().requires_grad_()
    ref_b = ours.bias.detach().double().clone().requires_grad_()
    x, target = torch.rand(8, 20), torch.randn(8, 12)
    opt = torch.optim.SGD(ours.parameters(), lr=0.3)
    ref_opt = torch.optim.SGD([ref_w, ref_b], lr=0.3)
    for _ in range(20):
        opt.zero_grad()
        ref_opt.zero_grad()
        loss = F.mse_loss(ours(x), target)
        ref_loss = F.mse_loss(torch.relu(F.linear(x.double(), ref_w) + ref_b), target.double())
        loss.backward()
        ref_loss.backward()
        opt.step()
        ref_opt.step()
        assert abs(loss.item() - ref_loss.item()) <= 1e-5 * ref_loss.item()
    assert not ours._kernels  # training compiled fusejit.autograd's kernels, not the forward-only one
    with torch.no_grad():
        torch.testing.assert_close(ours(x), torch.relu(F.linear(x, ours.gemm.weight) + ours.bias), rtol=1e-5, atol=1e-5)
    assert len(ours._kernels) == 1


def expect_sum_gradients_match_float64(outputs, inputs):
    """Backward of the sum of fusejit's outputs of LINEAR_CHAIN: each input's gradient within 1e-5 of float64."""
    sum(o.sum() for o in outputs).backward()
    ref = [v.detach().double().requires_grad_() for v in inputs]
    sum(o.sum() for o in torch_chain(*ref)).backward()
    for got, want in zip(inputs, ref):
        assert rel_l2(got.grad, want.grad) <= 1e-5


def test_eager_calls_launch_directly_only_on_plain_tensors():
    """fusejit.autograd._eager decides whether a call may bypass the torch.library operators (docs/python.md,
    "Host overhead"): plain tensors and Parameters yes; a tensor subclass (a tracer's fake or functional tensor
    is one) no, since only the operators take those."""
    from fusejit.autograd import _eager

    class Wrapped(torch.Tensor):
        pass

    t = torch.zeros(3)
    assert _eager([t, torch.nn.Parameter(torch.zeros(3))])
    assert not _eager([t, t.as_subclass(Wrapped)])
    # the direct path (the only one on torch < 2.4) against float64 autograd
    f = fusejit.autograd.function(LINEAR_CHAIN)
    x, w, b, scale = (v.requires_grad_() for v in values(3))
    y, s = f(x, w, b, scale)
    expect_sum_gradients_match_float64((y, s), (x, w, b, scale))


def test_double_backward_is_an_error_not_zeros():
    """The backward stages are kernels that record no autograd graph: a second derivative through them raises
    instead of coming back as zeros."""
    f = fusejit.autograd.function(LINEAR_CHAIN)
    x, w, b, scale = (v.requires_grad_() for v in values(4))
    y, s = f(x, w, b, scale)
    (gx,) = torch.autograd.grad(s.sum(), x, create_graph=True)
    with pytest.raises(RuntimeError, match="no second derivatives"):
        torch.autograd.grad((gx * x).sum(), [x, w], allow_unused=True)  # else: w's second derivative None


def test_saves_only_the_outputs_the_backward_reads():
    """The forward saves its inputs and the outputs a backward stage reads (the anchor's output h here); the
    chain's own outputs y and s, which the backward recomputes from h, are not kept alive by autograd."""
    f = fusejit.autograd.function(LINEAR_CHAIN)
    x, w, b, scale = (v.requires_grad_() for v in values(5))
    packed = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: packed.append(t.data_ptr()) or t, lambda t: t):
        y, s = f(x, w, b, scale)
    assert y.data_ptr() not in packed and s.data_ptr() not in packed
    assert len(packed) == 5, packed  # x, w, b, scale and the saved h
    expect_sum_gradients_match_float64((y, s), (x, w, b, scale))


def test_programs_follow_which_inputs_want_gradients_call_by_call():
    # the program is looked up once per needs_input_grad pattern: alternating patterns must not mix them up
    f = fusejit.autograd.function(LINEAR_CHAIN)
    for wanted in (("x", "w", "b", "scale"), ("w",), ("x", "scale"), ("x", "w", "b", "scale"), ("w",)):
        ours = [v.clone().requires_grad_(n in wanted) for n, v in zip("x w b scale".split(), values())]
        ref = [v.double().requires_grad_(n in wanted) for n, v in zip("x w b scale".split(), values())]
        gy = torch.randn(12, 6, generator=torch.Generator().manual_seed(2)).t()  # a non-contiguous gradient
        f(*ours)[0].backward(gy)
        torch_chain(*ref)[0].backward(gy.double())
        for name, a, r in zip("x w b scale".split(), ours, ref):
            if name not in wanted:
                assert a.grad is None, (wanted, name)
                continue
            assert rel_l2(a.grad, r.grad) < 1e-5, (wanted, name, rel_l2(a.grad, r.grad))
    assert len(f._by_needs) == 3
