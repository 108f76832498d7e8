"""Every example spec's gradients against PyTorch's float64 autograd (issue 11: the gradients of every input
and parameter at the mode's tolerance, for the seed models and every example spec).

Each examples/*.yaml becomes a PyTorch function built from its canonical IR (torch_spec.py). fusejit.autograd
runs it forward and backward (the LLVM CPU backend; CUDA in the GPU twin) on seeded inputs (drawn by each
input's init kind) with a seeded upstream gradient for every output; every output and every input's gradient
is compared with float64 autograd on the same values. batch_norm's running statistics get no gradient, as in
PyTorch. Examples whose backward is a documented fusejit error are listed in EXPECTED_ERRORS and asserted to
fail with that error; the gradients they can give are checked all the same. Skips without torch, without a CPU
backend (the CPU test) or without CUDA (the GPU test)."""
import re
import zlib
from pathlib import Path

import pytest

import fusejit

torch = pytest.importorskip("torch")
import torch_spec  # noqa: E402  (python/tests/torch_spec.py)

EXAMPLES_DIR = Path(__file__).resolve().parents[2] / "examples"
EXAMPLES = sorted(p.stem for p in EXAMPLES_DIR.glob("*.yaml"))

# Smaller input shapes, consistent with each spec (same ranks; weights kept unless the batch alone is not
# enough): the examples' own shapes (a 128x64x128x128 conv input, an 8192x8192 weight) take minutes in
# float64 on this CPU. Specs not listed keep their shapes: they are small, or attributes fix their shapes
# (reshape / expand / input_shape).
SMALL = {
    "conv_batch_norm_instance_norm": {"x": [2, 16, 12, 10]},
    "conv_channel_reductions": {"x": [2, 16, 11, 9]},
    "conv_elementwise_zoo": {"x": [2, 8, 12, 10]},
    "conv_group_norm_swish": {"x": [2, 32, 10, 9]},
    "conv_grouped_dilated_maxpool": {"x": [2, 32, 14, 13]},
    "conv_softplus_global_pool_bf16": {"x": [2, 32, 10, 9]},
    "conv_strided_mish_avgpool_f16": {"x": [2, 16, 15, 14]},
    "linear_erf_transpose": {"x": [24, 256]},
    "linear_gelu_elu_tf32": {"x": [24, 2048]},
    "linear_layer_norm_gelu": {"x": [24, 512]},
    "linear_max_subtract_gelu": {"x": [24, 1024]},
    "linear_pool1d": {"x": [24, 1024]},
    "linear_rmsnorm": {"x": [24, 1024]},
    "linear_row_stats": {"x": [24, 1024]},
    "linear_swish_residual": {"x": [24, 1024]},
    "matmul_attention_softmax_bf16": {"q": [2, 2, 40, 64], "k_t": [2, 2, 64, 40]},
    "matmul_log_softmax_f16": {"a": [2, 24, 512]},
    "seed1_conv_relu_bias": {"x": [2, 64, 14, 12]},
    "seed2_linear_bias_relu": {"x": [16, 1024], "gemm_w": [1024, 1024], "bias": [1024]},
    "seed3_conv_tanh_scale_bias_maxpool": {"x": [2, 8, 34, 30]},
}

# Examples whose backward is a documented fusejit error (docs/backward.md): the error's text, and the inputs
# whose gradients must be left out (requires_grad off) for the others to be checked; None: no gradient at all
# (the forward is still checked).
EXPECTED_ERRORS = {
    # the adjoints of the backward's gather ops (im2col_backward, max_pool2d_double_backward,
    # insert_zeros_backward) have no derivative yet: only w's gradient (a scale after them) is checked
    # (pointwise_conv_backward_ops, the gather ops themselves, has every input's gradient checked)
    "pointwise_double_backward_ops": ("max_pool2d_double_backward 'ddpool': has no derivative in fusejit yet",
                                      {"dcols", "x", "ddx", "dspread"}),
}

# Tolerances (relative L2 against float64), from PyTorch's own error on the same values in the spec's dtypes
# (measured in each test): fp32 (and tf32 on the CPU, where fusejit computes it in fp32: docs/cpu.md): 1e-5, the
# mode's tolerance, or 5x PyTorch's fp32 error where that is larger (a chain ill-conditioned in fp32: in
# conv_batch_norm_instance_norm, relu then instance_norm makes beta's gradient a near-cancelling sum, and
# PyTorch's fp32 error there is 7e-6). tf32 on a GPU, bf16, f16: 5x PyTorch's error plus 1e-3, as
# test_autograd_gpu.py. Where PyTorch has no kernel for a dtype on the device (f16 matmul and conv on the CPU in
# torch 1.13), PyTorch's float32 kernels with each value and each gradient rounded to its dtype stand in
# (storage rounding only, as fusejit's CPU backend computes).
FP32_TOL = 1e-5


def spec_text(name):
    text = (EXAMPLES_DIR / f"{name}.yaml").read_text()
    for inp, shape in SMALL.get(name, {}).items():
        text, n = re.subn(r"(name:\s*%s\s*,?\s*shape:\s*)\[[^\]]*\]" % re.escape(inp),
                          lambda m: m.group(1) + str(shape), text)
        assert n == 1, f"{name}: input '{inp}' not found once in the spec text"
    return text


def rel_l2(a, b):
    a, b = a.double(), b.double()
    return ((a - b).norm() / b.norm()).item()


def as_tuple(x):
    return x if isinstance(x, tuple) else (x,)


def upstream_grads(outs, seed):
    g = torch.Generator().manual_seed(seed + 1)
    return [torch.randn(o.shape, generator=g, dtype=torch.float64).to(o.dtype).to(o.device) for o in outs]


def grad(outs, inputs, gys):
    """d(sum <gy, out>)/d(inputs) (None: zero); outputs that depend on no input (only comparisons) left out."""
    pairs = [(o, g) for o, g in zip(outs, gys) if o.requires_grad]
    if not pairs:
        return [None] * len(inputs)
    return torch.autograd.grad([o for o, _ in pairs], inputs, [g for _, g in pairs], allow_unused=True)


def pytorch_own_error(model, values, wants, gys, ref_outs, ref_grads):
    """PyTorch's relative L2 errors (outputs, then gradients) in the spec's dtypes, and how they were had."""
    cuda = values[0].is_cuda
    flags = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = model.precision == "tf32" and cuda

    def run(mode, cast):
        ts = [cast(v).requires_grad_(w) for v, w in zip(values, wants)]
        outs = model(*ts, mode=mode)
        grads = grad(outs, [t for t, w in zip(ts, wants) if w], [cast(g) for g in gys])
        return ([rel_l2(o, r) for o, r in zip(outs, ref_outs)],
                [0.0 if r is None or g is None else rel_l2(g, r) for g, r in zip(grads, ref_grads)])

    try:
        return run("native", lambda t: t.clone()), "native"
    except RuntimeError as e:
        if "not implemented for" not in str(e):
            raise
        return run("rounded", lambda t: t.float()), "rounded"
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = flags


def check_close(what, got, want, bound, dtype, theirs=""):
    """`got` (of `dtype`) within relative L2 `bound` of float64 `want`; both zero where `want` is (or None)."""
    if want is None or not bool(want.abs().max() > 0):  # nothing differentiable depends on it
        assert got is None or not bool(got.abs().max() > 0), f"{what}: non-zero where PyTorch's is zero"
        return
    assert got is not None, f"{what}: no gradient"
    assert got.shape == want.shape and got.dtype == dtype, (what, got.shape, got.dtype, want.shape, dtype)
    err = rel_l2(got, want)
    assert err <= bound, f"{what}: relative L2 {err:.3g} > {bound:.3g} {theirs}"


def check_example(name, device):
    text = spec_text(name)
    spec = fusejit.Spec(text, f"{name}.yaml")
    for arg in spec.inputs:
        assert list(arg.shape) == SMALL.get(name, {}).get(arg.name, list(arg.shape)), (name, arg)
    model = torch_spec.TorchSpec(spec.ir())
    seed = zlib.crc32(name.encode()) % 2**31
    values = model.random_inputs(seed, device)
    message, left_out = EXPECTED_ERRORS.get(name, ("", set()))
    if message:
        with pytest.raises(fusejit.SpecError, match=re.escape(message)):
            fusejit.Backward(spec)
    if left_out is None:  # no gradient at all: the forward only
        with pytest.raises(fusejit.SpecError, match=re.escape(message)):
            fusejit.autograd.function(spec)
        outs = as_tuple(fusejit.compile(spec, device=device)(*values))
        for (out_name, v), o, r in zip(model.outputs, outs, model(*[v.double() for v in values])):
            check_close(f"{name}: output '{out_name}'", o, r, FP32_TOL, model.dtype(v))
        return

    wants = [n.name not in left_out | model.running_statistics() for n in model.inputs]
    f = fusejit.autograd.function(spec)
    ours = [v.clone().requires_grad_(w) for v, w in zip(values, wants)]
    outs = as_tuple(f(*ours))
    gys = upstream_grads(outs, seed)
    torch.autograd.backward(outs, gys)
    ref = [v.double().requires_grad_(w) for v, w in zip(values, wants)]
    ref_outs = model(*ref)
    ref_grads = grad(ref_outs, [r for r, w in zip(ref, wants) if w], [g.double() for g in gys])
    wanted = [n.name for n, w in zip(model.inputs, wants) if w]
    (out_errors, grad_errors), how = pytorch_own_error(model, values, wants, gys, ref_outs, ref_grads)
    if model.precision == "fp32" or (model.precision == "tf32" and not values[0].is_cuda):
        bound = lambda e: max(FP32_TOL, 5 * e)  # noqa: E731
    else:
        bound = lambda e: 5 * e + 1e-3  # noqa: E731
    for (out_name, v), o, r, e in zip(model.outputs, outs, ref_outs, out_errors):
        check_close(f"{name}: output '{out_name}'", o.detach(), r.detach(), bound(e), model.dtype(v),
                    f"(PyTorch's own, {how}: {e:.3g})")
    inputs = [(n.name, t) for n, t in zip(model.inputs, ours) if n.name in wanted]
    for (input_name, t), want, e in zip(inputs, ref_grads, grad_errors):
        check_close(f"{name}: gradient of '{input_name}'", t.grad, want, bound(e), t.dtype,
                    f"(PyTorch's own, {how}: {e:.3g})")
    if left_out:  # asking for the gradient fusejit cannot give is the documented error
        every = [v.clone().requires_grad_(n.name not in model.running_statistics())
                 for v, n in zip(values, model.inputs)]
        outs = as_tuple(f(*every))
        with pytest.raises(fusejit.SpecError, match=re.escape(message)):
            torch.autograd.backward(outs, gys)


def test_lists_name_examples():
    for name in list(SMALL) + list(EXPECTED_ERRORS):
        assert name in EXAMPLES, f"{name}: no such example"
    assert {"seed1_conv_relu_bias", "seed2_linear_bias_relu", "seed3_conv_tanh_scale_bias_maxpool"} <= set(EXAMPLES)


@pytest.mark.skipif(not fusejit.backend_available("cpu"), reason="this libfusejit_c.so has no CPU backend")
@pytest.mark.parametrize("name", EXAMPLES)
def test_example_gradients_cpu(name):
    check_example(name, "cpu")


def _cuda():
    return torch.cuda.is_available() and fusejit.device_count() > 0


@pytest.mark.skipif(not _cuda(), reason="no CUDA device for torch and fusejit")
@pytest.mark.parametrize("name", EXAMPLES)
def test_example_gradients_gpu(name):
    check_example(name, torch.device("cuda", torch.cuda.current_device()))
