"""fusejit.nn.Fused on the CPU backend: any spec as an nn.Module, against
PyTorch in float64 on the same weights; parameters, state_dict, inputs by
position and by name, and every argument error. Skips without torch or
without a CPU backend in the library."""
import warnings

import pytest

import fusejit

torch = pytest.importorskip("torch")
if not fusejit.backend_available("cpu"):
    pytest.skip("this libfusejit_c.so has no CPU backend (built without LLVM)", allow_module_level=True)
F = torch.nn.functional

LINEAR_GELU = """\
name: nn_linear_gelu
inputs:
  - {name: x, shape: [6, 20]}
  - {name: w, shape: [12, 20]}
  - {name: b, shape: [12]}
  - {name: scale, shape: [12]}
ops:
  - {name: h, op: linear, args: [x, w, b]}
  - {name: g, op: gelu, args: [h]}
  - {name: y, op: mul, args: [g, scale]}
  - {name: s, op: sum, args: [y], dims: [1]}
outputs: [y, s]
"""


def rel_l2(a, b):
    a, b = a.double(), b.double()
    return ((a - b).norm() / b.norm()).item()


def make(seed=0):
    g = torch.Generator().manual_seed(seed)
    return dict(w=torch.randn(12, 20, generator=g) * 0.3, b=torch.randn(12, generator=g),
                scale=torch.rand(12, generator=g) + 0.5), torch.randn(6, 20, generator=g)


def reference(p, x):
    y = F.gelu(F.linear(x.double(), p["w"].double(), p["b"].double())) * p["scale"].double()
    return y, y.sum(dim=1)


def test_matches_torch_float64_and_holds_parameters():
    p, x = make()
    m = fusejit.nn.Fused(LINEAR_GELU, w=p["w"], b=p["b"], scale=p["scale"])
    assert m.input_names == ["x"]
    assert sorted(n for n, _ in m.named_parameters()) == ["b", "scale", "w"]
    assert "nn_linear_gelu" in repr(m)
    with torch.no_grad():
        y, s = m(x)
    ry, rs = reference(p, x)
    assert y.dtype == torch.float32 and y.shape == (6, 12) and s.shape == (6,)
    assert rel_l2(y, ry) <= 1e-5 and rel_l2(s, rs) <= 1e-5
    with torch.no_grad():  # by name, the same kernel
        y2, _ = m(x=x)
    assert torch.equal(y, y2)
    assert len(m._kernels) == 1


def test_state_dict_round_trip_changes_the_output():
    p, x = make(1)
    m = fusejit.nn.Fused(LINEAR_GELU, w=p["w"], b=p["b"], scale=p["scale"])
    q, _ = make(2)
    m.load_state_dict(q)
    assert torch.equal(m.state_dict()["w"], q["w"])
    with torch.no_grad():
        y, _ = m(x)
    assert rel_l2(y, reference(q, x)[0]) <= 1e-5


def test_parameters_anywhere_in_the_spec_order():
    # x given as the parameter, w as the input: the forward takes what is left, in spec order.
    p, x = make(3)
    m = fusejit.nn.Fused(LINEAR_GELU, x=x, scale=p["scale"])
    assert m.input_names == ["w", "b"]
    with torch.no_grad():
        y, _ = m(p["w"], b=p["b"])
    assert rel_l2(y, reference(p, x)[0]) <= 1e-5


def test_constructor_errors_name_the_parameter():
    p, _ = make()
    with pytest.raises(TypeError, match="'bias' is not an input of the spec"):
        fusejit.nn.Fused(LINEAR_GELU, bias=p["b"])
    with pytest.raises(ValueError, match=r"parameter 'w': expected shape \(12, 20\)"):
        fusejit.nn.Fused(LINEAR_GELU, w=p["w"].t())
    with pytest.raises(TypeError, match="parameter 'b': expected dtype"):
        fusejit.nn.Fused(LINEAR_GELU, b=p["b"].double())
    with pytest.raises(TypeError, match="parameter 'scale': expected a torch.Tensor"):
        fusejit.nn.Fused(LINEAR_GELU, scale=[1.0] * 12)


def test_forward_errors_name_the_input():
    p, x = make()
    m = fusejit.nn.Fused(LINEAR_GELU, w=p["w"], b=p["b"], scale=p["scale"])
    with torch.no_grad():
        with pytest.raises(TypeError, match="missing input"):
            m()
        with pytest.raises(TypeError, match="takes 1 inputs"):
            m(x, x)
        with pytest.raises(TypeError, match="'w' is a parameter of the module"):
            m(x, w=p["w"])
        with pytest.raises(TypeError, match="given twice"):
            m(x, x=x)
        with pytest.raises(TypeError, match="argument 'x'.*dtype"):
            m(x.double())
        with pytest.raises(ValueError, match="argument 'x'.*shape"):
            m(x[:3])
        with pytest.raises(TypeError, match="input 'x': expected a torch.Tensor"):
            m([1.0])
        with pytest.raises(ValueError, match="'w' is on cpu, 'x' on meta"):
            m(x.to("meta"))
        only_params = fusejit.nn.Fused(LINEAR_GELU, x=x, w=p["w"], b=p["b"], scale=p["scale"])
        assert only_params.input_names == []
        with pytest.raises(ValueError, match="expected CPU or CUDA tensors, got meta"):
            only_params.to("meta")()


def test_gradients_flow_to_parameters_and_inputs():
    p, x = make(5)
    m = fusejit.nn.Fused(LINEAR_GELU, w=p["w"], b=p["b"], scale=p["scale"])
    x = x.clone().requires_grad_()
    y, s = m(x)
    (y.sum() + 2 * s.sum()).backward()
    ref = {k: v.double().requires_grad_() for k, v in p.items()}
    x64 = x.detach().double().requires_grad_()
    ry, rs = reference(ref, x64)
    (ry.sum() + 2 * rs.sum()).backward()
    assert rel_l2(x.grad, x64.grad) <= 1e-5
    for name, param in m.named_parameters():
        assert rel_l2(param.grad, ref[name].grad) <= 1e-5, name


NORMED = """\
name: nn_linear_norm
inputs:
  - {name: x, shape: [6, 20]}
  - {name: w, shape: [12, 20]}
  - {name: ln_w, shape: [12]}
ops:
  - {name: h, op: linear, args: [x, w]}
  - {name: y, op: layer_norm, args: [h, ln_w], normalized_shape: [12]}
outputs: [y]
"""

# im2col_backward (col2im), the adjoint of one of the backward's own gather ops, has no derivative yet
NO_BACKWARD = """\
name: nn_linear_im2col_backward
inputs:
  - {name: x, shape: [6, 20]}
  - {name: w, shape: [12, 20]}
ops:
  - {name: h, op: linear, args: [x, w]}
  - {name: r, op: reshape, args: [h], shape: [18, 4]}
  - {name: y, op: im2col_backward, args: [r], input_shape: [1, 2, 4, 4], kernel_size: 3}
outputs: [y]
"""


def test_layer_norm_trains():
    p, x = make()
    ln_w = torch.rand(12) + 0.5
    m = fusejit.nn.Fused(NORMED, w=p["w"], ln_w=ln_w)
    x = x.requires_grad_()
    gy = torch.randn(6, 12, generator=torch.Generator().manual_seed(2))
    (m(x) * gy).sum().backward()
    ref = [t.detach().double().requires_grad_() for t in (x, p["w"], ln_w)]
    (F.layer_norm(F.linear(ref[0], ref[1]), (12,), ref[2]) * gy.double()).sum().backward()
    for got, want in zip((x.grad, m.w.grad, m.ln_w.grad), ref):
        assert rel_l2(got, want.grad) <= 1e-5


def test_warns_once_when_a_chain_has_no_backward():
    p, x = make()
    m = fusejit.nn.Fused(NO_BACKWARD, w=p["w"])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        y = m(x)
        m(x)
    assert sum("no backward" in str(w.message) and "im2col_backward" in str(w.message) for w in caught) == 1
    assert not y.requires_grad


@pytest.mark.skipif(not fusejit.torch.available(), reason="torch < 2.4: no torch.library fake kernels")
def test_torch_op_on_cpu_tensors():
    p, x = make(4)
    op = fusejit.torch.op_for(LINEAR_GELU)
    assert op is fusejit.torch.op_for(LINEAR_GELU)
    y, s = op(x, p["w"], p["b"], p["scale"])
    ry, rs = reference(p, x)
    assert rel_l2(y, ry) <= 1e-5 and rel_l2(s, rs) <= 1e-5
    with pytest.raises(TypeError, match="argument 'x'.*dtype"):
        op(x.double(), p["w"], p["b"], p["scale"])
