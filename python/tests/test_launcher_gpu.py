"""The C++ launchers (FUSEJIT_LAUNCHER=cpp, cpp-autograd: python/fusejit/csrc/) on a GPU: they build where torch's
C++ extensions build (the GPU machine: a compiler, ninja and torch's headers), and a training step through each gives
the same outputs and gradients as the Python launcher (the same kernels on the same inputs: equal but for the
order of a reduction's atomics, if any).
Skips without torch or a CUDA device."""
import warnings

import pytest
from gpu_util import cuda_torch

torch, DEV = cuda_torch()

import fusejit.models as fm  # noqa: E402
from fusejit import _launcher  # noqa: E402


@pytest.fixture(params=["cpp", "cpp-autograd"])
def launcher(request):
    """The C++ launcher in each mode (built, or taken from torch's extension cache) for the models the test sets
    up; the mode's name."""
    _launcher.set_mode(request.param)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a failed build warns: make it this test's failure
            assert _launcher.module() is not None
            if request.param == "cpp-autograd":
                assert _launcher.autograd_module() is not None
        yield request.param
    finally:
        _launcher.set_mode(None)


def step(model, x, gy):
    for t in [x, *model.parameters()]:
        t.grad = None
    y = model(x)
    (y * gy).sum().backward()
    torch.cuda.synchronize()
    return [y.detach().clone()] + [t.grad.clone() for t in [x, *model.parameters()]]


@pytest.mark.parametrize("name", ["gemm_bias_relu", "conv_relu_bias", "conv_tanh_pool"])
def test_training_step_matches_the_python_launcher(launcher, name):
    def make():
        torch.manual_seed(0)
        if name == "gemm_bias_relu":
            return fm.GemmBiasRelu(64, 96, (96,)).to(DEV), torch.rand(16, 64, device=DEV)
        if name == "conv_relu_bias":
            return fm.ConvReluBias(8, 16, 3, (16, 1, 1)).to(DEV), torch.rand(2, 8, 12, 12, device=DEV)
        return fm.ConvTanhScaleBiasMaxPool(8, 16, 3, 2.0, (16, 1, 1), 2).to(DEV), torch.rand(2, 8, 14, 14, device=DEV)

    native_model, x = make()
    x.requires_grad_()
    gy = torch.randn_like(native_model(x))
    native = step(native_model, x, gy)
    assert native_model._differentiable, "the step went through fusejit.autograd"
    diff = next(iter(native_model._differentiable.values()))
    if launcher == "cpp-autograd":  # forward and backward node in C++
        assert diff._native_ag and all(v is not None for v in diff._native_ag.values())
        grad_fn = native_model(x).grad_fn
        assert grad_fn is not None and type(grad_fn).__name__ != "_FusedFunctionBackward", type(grad_fn).__name__
    else:  # the C++ forward and backward program under Python's autograd Function
        assert diff._launchers and all(entry[-1] is not None for entry in diff._launchers.values())
        natives = [v for p in diff._programs.values() for v in p._native.values()]
        assert natives and all(v is not None for v in natives)

    _launcher.set_mode("python")
    python_model, _ = make()
    python = step(python_model, x, gy)
    for a, b in zip(native, python):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)


def zero_output_gradient_gives_zero_gradients():
    """Exact zeros, not 3xTF32's tiny cross terms (the fp32 backward's dX and dW GEMMs on a zero dZ)."""
    torch.manual_seed(0)
    model = fm.GemmBiasRelu(32, 48, (48,)).to(DEV)
    x = torch.rand(8, 32, device=DEV, requires_grad=True)
    (model(x) * 0).sum().backward()
    assert x.grad is not None and torch.count_nonzero(x.grad) == 0
    assert torch.count_nonzero(model.gemm.weight.grad) == 0 and torch.count_nonzero(model.bias.grad) == 0


def test_zero_output_gradient_gives_zero_gradients(launcher):
    zero_output_gradient_gives_zero_gradients()


def test_zero_output_gradient_gives_zero_gradients_python_launcher():
    _launcher.set_mode("python")
    try:
        zero_output_gradient_gives_zero_gradients()
    finally:
        _launcher.set_mode(None)


def test_cpp_autograd_refuses_create_graph():
    """Under create_graph the C++ node raises (its kernels record no graph) instead of a missing second
    derivative."""
    _launcher.set_mode("cpp-autograd")
    try:
        if _launcher.autograd_module() is None:
            pytest.fail("launcher_autograd.cpp did not build")
        model = fm.GemmBiasRelu(32, 48, (48,)).to(DEV)
        x = torch.rand(8, 32, device=DEV, requires_grad=True)
        with pytest.raises(RuntimeError, match="not differentiable"):
            torch.autograd.grad(model(x).sum(), x, create_graph=True)
    finally:
        _launcher.set_mode(None)
