"""A fusejit spec as a PyTorch function, for checking fusejit against torch.

Built from the spec's canonical IR (fusejit.Spec.ir(): every attribute explicit,
dims normalized, each value's dtype and shape given), one function per op kind
mapping to torch / torch.nn.functional with the spec's attributes (docs/spec.md,
ir/op_table.cpp). Every op of the op table is covered.

    model = TorchSpec(fusejit.Spec(path).ir())
    outs = model(*inputs)                   # float64 inputs: computed in float64
    outs = model(*inputs, mode="native")    # each value cast to its IR dtype: PyTorch's kernels in that dtype
    outs = model(*inputs, mode="rounded")   # float32 kernels, each value and its gradient rounded to its dtype
"""
import math
import re

import torch

F = torch.nn.functional
DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}

_VALUE = re.compile(r'^\s*%(\d+) = (\w+)(?:\(([^)]*)\))?(.*?) : (\w+)\[([\d,]*)\](.*)$')
_ATTR = re.compile(r'(\w+)=("[^"]*"|\[[^\]]*\]|\S+)')
_OUTPUT = re.compile(r'^\s*output "([^"]+)" = %(\d+)')


def _number(text):
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    return float(text)  # also inf, -inf, nan


def _attr_value(text):
    if text.startswith('"'):
        return text[1:-1]
    if text.startswith("["):
        return [_number(t) for t in text[1:-1].split(",") if t]
    if text in ("true", "false"):
        return text == "true"
    try:
        return _number(text)
    except ValueError:
        return text  # an identifier (an input's init kind)


class Node:
    def __init__(self, vid, op, operands, attrs, dtype, shape, name):
        self.id, self.op, self.operands, self.attrs = vid, op, operands, attrs
        self.dtype, self.shape, self.name = dtype, shape, name


def parse_ir(text):
    """(precision, nodes by id in order, [(output name, value id)]) of canonical IR text."""
    precision = re.search(r"precision=(\w+)", text).group(1)
    nodes, outputs = {}, []
    for line in text.splitlines():
        m = _VALUE.match(line)
        if m:
            vid, op, args, attrs, dtype, shape, rest = m.groups()
            name = rest.split("//", 1)[1].strip() if "//" in rest else ""
            if op == "input":
                name = re.match(r'\s*"([^"]+)"', attrs).group(1)
                attrs = attrs[attrs.index('"', attrs.index('"') + 1) + 1:] + rest
            operands = [int(a.strip()[1:]) for a in args.split(",")] if args else []
            nodes[int(vid)] = Node(int(vid), op, operands, {k: _attr_value(v) for k, v in _ATTR.findall(attrs)},
                                   dtype, [int(d) for d in shape.split(",") if d], name)
            continue
        m = _OUTPUT.match(line)
        if m:
            outputs.append((m.group(1), int(m.group(2))))
    return precision, nodes, outputs


def _pool1d(fn, x, **kw):  # pools along the last dim of any input
    y = fn(x.reshape(-1, 1, x.shape[-1]), **kw)
    return y.reshape(*x.shape[:-1], y.shape[-1])


def _max_pool2d_backward(a, x, g):
    with torch.enable_grad():
        xx = x.detach().requires_grad_()
        y = F.max_pool2d(xx, a["kernel_size"], a["stride"], a["padding"], a["dilation"], a["ceil_mode"])
        return torch.autograd.grad(y, xx, g, create_graph=g.requires_grad)[0]


def _avg_pool2d_backward(a, g):
    with torch.enable_grad():
        xx = torch.zeros(a["input_shape"], dtype=g.dtype, device=g.device, requires_grad=True)
        y = F.avg_pool2d(xx, a["kernel_size"], a["stride"], a["padding"], a["ceil_mode"], a["count_include_pad"])
        return torch.autograd.grad(y, xx, g, create_graph=g.requires_grad)[0]


def _im2col(a, x):  # [N, C*kh*kw, L] -> [C*kh*kw, N*L]
    cols = F.unfold(x, a["kernel_size"], a["dilation"], a["padding"], a["stride"])
    return cols.permute(1, 0, 2).reshape(cols.shape[1], -1)


def _insert_zeros(a, x):  # x's pixels stride apart, extra zero rows / columns at the end, crop at each side
    (sh, sw), (e0, e1), (n, c, h, w) = a["stride"], a["extra"], x.shape
    ch, cw = a.get("crop", (0, 0))
    out = x.new_zeros(n, c, (h - 1) * sh + 1 + e0, (w - 1) * sw + 1 + e1)
    out[:, :, 0:(h - 1) * sh + 1:sh, 0:(w - 1) * sw + 1:sw] = x
    return out[:, :, ch:out.shape[2] - ch, cw:out.shape[3] - cw]


def _im2col_backward(a, g):  # col2im: [C*kh*kw, N*L] as fold's [N, C*kh*kw, L], summed back into [N, C, H, W]
    n, _, h, w = a["input_shape"]
    cols = g.reshape(g.shape[0], n, -1).permute(1, 0, 2)
    return F.fold(cols, (h, w), a["kernel_size"], a["dilation"], a["padding"], a["stride"])


def _max_pool2d_double_backward(a, x, g):  # g at each window's first maximum of x (max_pool2d's indices)
    _, idx = F.max_pool2d(x.detach(), a["kernel_size"], a["stride"], a["padding"], a["dilation"], a["ceil_mode"],
                          return_indices=True)
    return g.flatten(2).gather(2, idx.flatten(2)).reshape(idx.shape)


def _insert_zeros_backward(a, g):  # g[.., i*stride - crop, j*stride - crop], 0 outside g
    (sh, sw), (e0, e1), (ch, cw) = a["stride"], a["extra"], a["crop"]
    h, w = (g.shape[2] - 1 - e0 + 2 * ch) // sh + 1, (g.shape[3] - 1 - e1 + 2 * cw) // sw + 1
    return F.pad(g, (cw, cw, ch, ch))[:, :, 0:(h - 1) * sh + 1:sh, 0:(w - 1) * sw + 1:sw]


def _batch_norm(a, x, mean, var, weight=None, bias=None):
    return F.batch_norm(x, mean, var, weight, bias, training=False, eps=a["eps"])


OPS = {
    # anchors
    "linear": lambda a, x, w, b=None: F.linear(x, w, b),
    "matmul": lambda a, x, y: torch.matmul(x, y),
    "conv2d": lambda a, x, w, b=None: F.conv2d(x, w, b, a["stride"], a["padding"], a["dilation"], a["groups"]),
    "conv2d_weight_grad": lambda a, x, g: torch.nn.grad.conv2d_weight(
        x, (g.shape[1], x.shape[1] // a["groups"], *a["kernel_size"]), g, a["stride"], a["padding"], a["dilation"],
        a["groups"]),
    # unary
    "relu": lambda a, x: F.relu(x),
    "leaky_relu": lambda a, x: F.leaky_relu(x, a["negative_slope"]),
    "gelu": lambda a, x: F.gelu(x, approximate=a["approximate"]),
    "sigmoid": lambda a, x: torch.sigmoid(x),
    "tanh": lambda a, x: torch.tanh(x),
    "silu": lambda a, x: F.silu(x),
    "mish": lambda a, x: F.mish(x),
    "softplus": lambda a, x: F.softplus(x, a["beta"], a["threshold"]),
    "hardswish": lambda a, x: F.hardswish(x),
    "hardsigmoid": lambda a, x: F.hardsigmoid(x),
    "hardtanh": lambda a, x: F.hardtanh(x, a["min_val"], a["max_val"]),
    "elu": lambda a, x: F.elu(x, a["alpha"]),
    "exp": lambda a, x: torch.exp(x),
    "log": lambda a, x: torch.log(x),
    "abs": lambda a, x: torch.abs(x),
    "neg": lambda a, x: torch.neg(x),
    "sqrt": lambda a, x: torch.sqrt(x),
    "rsqrt": lambda a, x: torch.rsqrt(x),
    "square": lambda a, x: torch.square(x),
    "clamp": lambda a, x: torch.clamp(x, a["min"], a["max"]),
    "erf": lambda a, x: torch.erf(x),
    # rounded to the dtype, kept in the evaluation's dtype (native mode then casts each value to its IR dtype)
    "cast": lambda a, x: x.to(DTYPES[a["dtype"]]).to(x.dtype),
    # binary (comparisons give 1 or 0 in the value's dtype: cast after the call)
    "add": lambda a, x, y: x + y,
    "sub": lambda a, x, y: x - y,
    "mul": lambda a, x, y: x * y,
    "div": lambda a, x, y: x / y,
    "minimum": lambda a, x, y: torch.minimum(x, y),
    "maximum": lambda a, x, y: torch.maximum(x, y),
    "pow": lambda a, x, y: torch.pow(x, y),
    "gt": lambda a, x, y: x > y,
    "ge": lambda a, x, y: x >= y,
    "lt": lambda a, x, y: x < y,
    "le": lambda a, x, y: x <= y,
    "eq": lambda a, x, y: x == y,
    # reductions (max / min as amax / amin: ties share the gradient, as in fusejit)
    "sum": lambda a, x: torch.sum(x, a["dims"], keepdim=a["keepdim"]),
    "mean": lambda a, x: torch.mean(x, a["dims"], keepdim=a["keepdim"]),
    "max": lambda a, x: torch.amax(x, a["dims"], keepdim=a["keepdim"]),
    "min": lambda a, x: torch.amin(x, a["dims"], keepdim=a["keepdim"]),
    "logsumexp": lambda a, x: torch.logsumexp(x, a["dims"], keepdim=a["keepdim"]),
    "softmax": lambda a, x: torch.softmax(x, a["dim"]),
    "log_softmax": lambda a, x: torch.log_softmax(x, a["dim"]),
    # norms
    "group_norm": lambda a, x, w=None, b=None: F.group_norm(x, a["num_groups"], w, b, a["eps"]),
    "instance_norm": lambda a, x, w=None, b=None: F.instance_norm(x, weight=w, bias=b, eps=a["eps"]),
    "layer_norm": lambda a, x, w=None, b=None: F.layer_norm(x, a["normalized_shape"], w, b, a["eps"]),
    "batch_norm": _batch_norm,
    # pools
    "max_pool2d": lambda a, x: F.max_pool2d(x, a["kernel_size"], a["stride"], a["padding"], a["dilation"],
                                            a["ceil_mode"]),
    "avg_pool2d": lambda a, x: F.avg_pool2d(x, a["kernel_size"], a["stride"], a["padding"], a["ceil_mode"],
                                            a["count_include_pad"]),
    "global_avg_pool": lambda a, x: torch.mean(x, (2, 3), keepdim=True),
    "max_pool1d": lambda a, x: _pool1d(F.max_pool1d, x, kernel_size=a["kernel_size"], stride=a["stride"],
                                       padding=a["padding"], ceil_mode=a["ceil_mode"]),
    "avg_pool1d": lambda a, x: _pool1d(F.avg_pool1d, x, kernel_size=a["kernel_size"], stride=a["stride"],
                                       padding=a["padding"], ceil_mode=a["ceil_mode"],
                                       count_include_pad=a["count_include_pad"]),
    # layout
    "expand": lambda a, x: x.expand(a["shape"]),
    "reshape": lambda a, x: x.reshape(a["shape"]),
    "transpose": lambda a, x: x.transpose(*a["dims"]),
    # gather ops (the backward's own)
    "flip": lambda a, x: torch.flip(x, a["dims"]),
    "im2col": _im2col,
    "insert_zeros": _insert_zeros,
    "max_pool2d_backward": _max_pool2d_backward,
    "avg_pool2d_backward": _avg_pool2d_backward,
    # their adjoints (the double backward)
    "im2col_backward": _im2col_backward,
    "max_pool2d_double_backward": _max_pool2d_double_backward,
    "insert_zeros_backward": _insert_zeros_backward,
}


class _Round(torch.autograd.Function):
    """x rounded to `dtype` (kept in x's dtype); its gradient rounded the same way."""

    @staticmethod
    def forward(ctx, x, dtype):
        ctx.dtype = dtype
        return x.to(dtype).to(x.dtype)

    @staticmethod
    def backward(ctx, g):
        return g.to(ctx.dtype).to(g.dtype), None


class TorchSpec:
    """The spec's graph as a function of its inputs (in spec order), returning its outputs (in spec order)."""

    def __init__(self, ir_text):
        self.precision, self.nodes, self.outputs = parse_ir(ir_text)
        self.inputs = [n for n in self.nodes.values() if n.op == "input"]
        for n in self.nodes.values():
            if n.op not in OPS and n.op not in ("input", "constant"):
                raise NotImplementedError(f"torch_spec: no PyTorch mapping for op '{n.op}'")

    def dtype(self, value):
        """The torch dtype of IR value `value` (an id)."""
        return DTYPES[self.nodes[value].dtype]

    def anchor(self):
        return next((n for n in self.nodes.values() if n.op in ("linear", "matmul", "conv2d")), None)

    def running_statistics(self):
        """Names of the inputs read as batch_norm running statistics: PyTorch does not differentiate them."""
        return {self.nodes[n.operands[k]].name for n in self.nodes.values() if n.op == "batch_norm" for k in (1, 2)}

    def random_inputs(self, seed, device="cpu"):
        """Seeded inputs by each input's init kind (the spec's, as fusejit fills them: docs/spec.md), in the
        input's dtype; spec inits keep what must be positive positive (e.g. running_var: uniform01)."""
        g = torch.Generator().manual_seed(seed)
        anchor = self.anchor()
        out = []
        for n in self.inputs:
            init = n.attrs.get("init", "normal")
            if init == "uniform01":
                t = torch.rand(n.shape, generator=g, dtype=torch.float64)
            elif init in ("torch_weight", "torch_bias"):
                w = self.nodes[anchor.operands[1]].shape if anchor is not None else n.shape
                bound = 1 / math.sqrt(math.prod(w[1:]))
                t = (torch.rand(n.shape, generator=g, dtype=torch.float64) * 2 - 1) * bound
            else:
                t = torch.randn(n.shape, generator=g, dtype=torch.float64)
            out.append(t.to(DTYPES[n.dtype]).to(device))
        return out

    def __call__(self, *inputs, mode="float64"):
        """mode "float64": every value in float64 (pass float64 inputs); "native": each value cast to its IR
        dtype (inputs in their dtypes); "rounded": float32 values, each (and its gradient) rounded to its IR
        dtype (inputs in float32): PyTorch's storage rounding where it has no kernels for a dtype."""
        if len(inputs) != len(self.inputs):
            raise TypeError(f"expected {len(self.inputs)} inputs, got {len(inputs)}")
        device = inputs[0].device if inputs else "cpu"
        env = {n.id: t for n, t in zip(self.inputs, inputs)}
        for n in self.nodes.values():
            if n.op == "input":
                continue
            if n.op == "constant":  # 0-dim: does not promote a tensor of the same kind
                env[n.id] = torch.tensor(n.attrs["value"], dtype=torch.float64 if mode == "float64" else torch.float32,
                                         device=device)
                continue
            y = OPS[n.op](n.attrs, *[env[o] for o in n.operands])
            if list(y.shape) != n.shape:
                raise AssertionError(f"torch_spec: {n.op} '{n.name}' gave {list(y.shape)}, the IR says {n.shape}")
            if mode == "native":
                y = y.to(DTYPES[n.dtype])
            elif mode == "rounded":
                y = _Round.apply(y.to(torch.float32), DTYPES[n.dtype])
            else:
                y = y.to(torch.float64)
            env[n.id] = y
        return tuple(env[v] for _, v in self.outputs)
