"""YAML spec text for the seed chains, for exact shapes (pure Python, no torch).

Each tensor is given as (shape, dtype) with dtype "f32", "f16" or "bf16". The
specs follow docs/spec.md; fusejit.models uses them, and they can be compiled
directly: fusejit.compile(specs.gemm_bias_relu(...)).
"""
import math


def _ints(values):
    return "[" + ", ".join(str(int(v)) for v in values) + "]"


def _pair(value):
    if isinstance(value, int):
        return (value, value)
    value = tuple(int(v) for v in value)
    if len(value) == 1:
        return value * 2
    if len(value) != 2:
        raise ValueError(f"expected an int or a pair of ints, got {value}")
    return value


def number(x):
    """A float as YAML the spec front end reads (.inf, -.inf, .nan included)."""
    x = float(x)
    if math.isnan(x):
        return ".nan"
    if math.isinf(x):
        return ".inf" if x > 0 else "-.inf"
    return repr(x)


def _build(name, precision, inputs, ops, outputs):
    """inputs: (name, (shape, dtype), init or None); ops: (name, op, args, attrs)."""
    lines = [f"name: {name}", f"precision: {precision}", "inputs:"]
    for input_name, (shape, dtype), init in inputs:
        extra = f", init: {init}" if init else ""
        lines.append(f"  - {{name: {input_name}, shape: {_ints(shape)}, dtype: {dtype}{extra}}}")
    lines.append("ops:")
    for op_name, op, args, attrs in ops:
        fields = [f"name: {op_name}", f"op: {op}", "args: [" + ", ".join(args) + "]"]
        fields += [f"{k}: {v}" for k, v in attrs.items()]
        lines.append("  - {" + ", ".join(fields) + "}")
    lines.append("outputs: [" + ", ".join(outputs) + "]")
    return "\n".join(lines) + "\n"


def _conv_attrs(stride, padding, dilation, groups):
    return {"stride": _ints(_pair(stride)), "padding": _ints(_pair(padding)),
            "dilation": _ints(_pair(dilation)), "groups": int(groups)}


def _conv_inputs(x, conv_w, conv_b):
    inputs = [("x", x, "uniform01"), ("conv_w", conv_w, "torch_weight")]
    if conv_b is not None:
        inputs.append(("conv_b", conv_b, "torch_bias"))
    return inputs, ["x", "conv_w"] + (["conv_b"] if conv_b is not None else [])


def conv_relu_bias(x, conv_w, conv_b, bias, *, stride=1, padding=0, dilation=1, groups=1,
                   precision="fp32"):
    """relu(conv2d(x, conv_w, conv_b)) + bias (seed 1). conv_b may be None."""
    inputs, conv_args = _conv_inputs(x, conv_w, conv_b)
    inputs.append(("bias", bias, "normal"))
    ops = [("conv", "conv2d", conv_args, _conv_attrs(stride, padding, dilation, groups)),
           ("act", "relu", ["conv"], {}),
           ("y", "add", ["act", "bias"], {})]
    return _build("fusejit_conv_relu_bias", precision, inputs, ops, ["y"])


def gemm_bias_relu(x, gemm_w, bias, *, precision="fp32"):
    """relu(linear(x, gemm_w) + bias), no linear bias (seed 2)."""
    inputs = [("x", x, "uniform01"), ("gemm_w", gemm_w, "torch_weight"), ("bias", bias, "normal")]
    ops = [("gemm", "linear", ["x", "gemm_w"], {}),
           ("biased", "add", ["gemm", "bias"], {}),
           ("y", "relu", ["biased"], {})]
    return _build("fusejit_gemm_bias_relu", precision, inputs, ops, ["y"])


def conv_tanh_scale_bias_maxpool(x, conv_w, conv_b, bias, scaling_factor, pool_kernel_size, *,
                                 pool_stride=None, pool_padding=0, pool_dilation=1,
                                 pool_ceil_mode=False, stride=1, padding=0, dilation=1,
                                 groups=1, precision="fp32"):
    """max_pool2d(tanh(conv2d(x, conv_w, conv_b)) * scaling_factor + bias) (seed 3)."""
    inputs, conv_args = _conv_inputs(x, conv_w, conv_b)
    inputs.append(("bias", bias, "normal"))
    kernel = _pair(pool_kernel_size)
    pool_attrs = {"kernel_size": _ints(kernel),
                  "stride": _ints(_pair(pool_stride if pool_stride is not None else kernel)),
                  "padding": _ints(_pair(pool_padding)), "dilation": _ints(_pair(pool_dilation)),
                  "ceil_mode": "true" if pool_ceil_mode else "false"}
    ops = [("conv", "conv2d", conv_args, _conv_attrs(stride, padding, dilation, groups)),
           ("act", "tanh", ["conv"], {}),
           ("scaled", "mul", ["act", number(scaling_factor)], {}),
           ("biased", "add", ["scaled", "bias"], {}),
           ("y", "max_pool2d", ["biased"], pool_attrs)]
    return _build("fusejit_conv_tanh_scale_bias_maxpool", precision, inputs, ops, ["y"])
