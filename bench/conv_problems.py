"""The problems of bench/bench_conv.py and what needs no torch: their shapes and FLOPs, --problems / --modes /
--sides parsing, the plan, each row's fusejit spec text and --print-specs (bench_conv.py's docstring describes
them)."""
import math
import os

import bench_gemm as G  # (no torch at import) parse_list
import gemm_problems as GP  # op_line, write_text

# name, x [N, Cin, H, W], --small x, Cout, kernel, stride, padding, groups, conv bias, extra bias [Cout,1,1],
# what follows the conv (None | ("pool", k, s, p) | ("cmin",) | ("gap",)), formula,
# the fusejit ops after the conv value c as (name, op, args, attributes); the last one is the output.
PROBLEMS = [
    dict(name="seed1", x=(128, 64, 128, 128), small=(2, 64, 32, 32), cout=128, k=3, s=1, p=0, g=1,
         cb=True, bias=True, post=None, formula="relu(c) + bias",
         ops=[("act", "relu", ["c"], {}), ("out", "add", ["act", "bias"], {})]),
    dict(name="seed3", x=(128, 8, 256, 256), small=(2, 8, 64, 64), cout=64, k=3, s=1, p=0, g=1,
         cb=True, bias=True, post=("pool", 4, 4, 0), formula="max_pool2d(tanh(c) * 2 + bias, 4)",
         ops=[("act", "tanh", ["c"], {}), ("scaled", "mul", ["act", "2.0"], {}),
              ("biased", "add", ["scaled", "bias"], {}), ("out", "max_pool2d", ["biased"], {"kernel_size": "4"})]),
    dict(name="c64_224", x=(32, 64, 224, 224), small=(2, 64, 56, 56), cout=128, k=3, s=1, p=1, g=1,
         cb=True, bias=False, post=None, formula="relu(c)",
         ops=[("out", "relu", ["c"], {})]),
    dict(name="stem", x=(64, 3, 224, 224), small=(2, 3, 56, 56), cout=64, k=7, s=2, p=3, g=1,
         cb=False, bias=False, post=("pool", 3, 2, 1), formula="max_pool2d(relu(c), 3, stride 2, padding 1)",
         ops=[("act", "relu", ["c"], {}),
              ("out", "max_pool2d", ["act"], {"kernel_size": "3", "stride": "2", "padding": "1"})]),
    dict(name="r56", x=(128, 256, 56, 56), small=(2, 256, 28, 28), cout=256, k=3, s=1, p=1, g=1,
         cb=False, bias=True, post=None, formula="relu(c + bias)",
         ops=[("cb_", "add", ["c", "bias"], {}), ("out", "relu", ["cb_"], {})]),
    dict(name="cmin", x=(128, 16, 192, 192), small=(2, 16, 48, 48), cout=32, k=3, s=1, p=0, g=1,
         cb=True, bias=False, post=("cmin",), formula="tanh(amin(c, dim=1, keepdim=True))",
         ops=[("mn", "min", ["c"], {"dims": "[1]", "keepdim": "true"}), ("out", "tanh", ["mn"], {})]),
    dict(name="gap", x=(64, 32, 128, 128), small=(2, 32, 32, 32), cout=64, k=3, s=1, p=0, g=4,
         cb=True, bias=False, post=("gap",), formula="adaptive_avg_pool2d(gelu(c), 1)",
         ops=[("act", "gelu", ["c"], {"approximate": "none"}), ("out", "global_avg_pool", ["act"], {})]),
]

MODES = {"fp32": ("fp32", "f32"), "tf32": ("tf32", "f32"), "bf16": ("bf16", "bf16"), "f16": ("f16", "f16")}
ELEM_BYTES = {"f32": 4, "bf16": 2, "f16": 2}
DEFAULT_MODES = ["fp32", "tf32", "bf16"]
SIDES = ["cudnn", "eager", "compile", "max-autotune", "fusejit", "fusejit-tuned"]
TORCH_SIDES = ["cudnn", "eager", "compile", "max-autotune"]
COMPILE_MODES = {"compile": "default", "max-autotune": "max-autotune-no-cudagraphs"}


# ---- the plan and the specs (no torch) -------------------------------------------------


def x_dims(P, small):
    return P["small"] if small else P["x"]


def conv_dims(P, small):
    n, _, h, w = x_dims(P, small)
    ho = (h + 2 * P["p"] - P["k"]) // P["s"] + 1
    wo = (w + 2 * P["p"] - P["k"]) // P["s"] + 1
    return n, P["cout"], ho, wo


def out_dims(P, small):
    n, c, ho, wo = conv_dims(P, small)
    post = P["post"]
    if post is None:
        return n, c, ho, wo
    if post[0] == "pool":
        _, k, s, p = post
        return n, c, (ho + 2 * p - k) // s + 1, (wo + 2 * p - k) // s + 1
    if post[0] == "cmin":
        return n, 1, ho, wo
    return n, c, 1, 1  # gap


def conv_flops(P, small):
    n, cout, ho, wo = conv_dims(P, small)
    cin = x_dims(P, small)[1]
    return 2.0 * n * ho * wo * cout * (cin // P["g"]) * P["k"] * P["k"]


def numel(shape):
    return math.prod(shape)


def parse_problem_list(text, problems):
    """--problems: 1-based indices, names or 'all' (comma-separated) of `problems`, each once, in order."""
    out = []
    for tok in [t.strip() for t in text.split(",") if t.strip()]:
        named = GP.named_items(tok, problems, lambda P: P["name"])
        if named:
            out += named
        else:
            raise SystemExit(f"--problems: unknown problem {tok!r} (1..{len(problems)}, "
                             f"{', '.join(P['name'] for P in problems)} or all)")
    uniq = []
    for P in out:
        if P not in uniq:
            uniq.append(P)
    return uniq


def parse_problems(text):
    return parse_problem_list(text, PROBLEMS)


def parse_sides(a):
    return GP.compile_sides(G.parse_list(a.sides, SIDES, "sides"), a.compile_mode, SIDES)


def build_plan(a):
    """[(problem, mode)], problem-major (one problem's inputs are built once per mode)."""
    problems = parse_problems(a.problems)
    modes = G.parse_list(a.modes, list(MODES), "modes")
    return [(P, m) for P in problems for m in modes]


def row_label(P, small):
    n, cin, h, w = x_dims(P, small)
    return f"{P['name']} {n}x{cin}x{h}x{w}->{P['cout']}"


def spec_name(P, mode, small):
    return f"conv_{P['name']}_{mode}" + ("_small" if small else "")


def spec_text(P, mode, small):
    """The fusejit YAML spec (docs/spec.md) of one row; kernel arguments x, w[, cb][, bias]."""
    n, cin, h, w = x_dims(P, small)
    precision, dt = MODES[mode]
    cout, k, g = P["cout"], P["k"], P["g"]
    lines = [f"# bench_conv {P['name']}: c = F.conv2d(x[{n},{cin},{h},{w}], w[{cout},{cin // g},{k},{k}]"
             + (", cb" if P["cb"] else "") + f", stride {P['s']}, padding {P['p']}, groups {g}); "
             f"out = {P['formula']}; mode {mode}",
             f"name: {spec_name(P, mode, small)}",
             f"precision: {precision}",
             "inputs:",
             f"  - {{name: x, shape: [{n}, {cin}, {h}, {w}], dtype: {dt}, init: uniform01}}",
             f"  - {{name: w, shape: [{cout}, {cin // g}, {k}, {k}], dtype: {dt}, init: torch_weight}}"]
    if P["cb"]:
        lines.append(f"  - {{name: cb, shape: [{cout}], dtype: {dt}, init: torch_bias}}")
    if P["bias"]:
        lines.append(f"  - {{name: bias, shape: [{cout}, 1, 1], dtype: {dt}, init: normal}}")
    conv_args = "[x, w, cb]" if P["cb"] else "[x, w]"
    lines += ["ops:", f"  - {{name: c, op: conv2d, args: {conv_args}, stride: {P['s']}, padding: {P['p']}, "
                      f"groups: {g}}}"]
    lines += [GP.op_line(*op) for op in P["ops"]]
    lines.append("outputs: [out]")
    return "\n".join(lines) + "\n"


def write_spec(directory, P, mode, small):
    return GP.write_text(directory, spec_name(P, mode, small), spec_text(P, mode, small))


def print_specs(a, plan):
    for i, (P, mode) in enumerate(plan, 1):
        path = write_spec(a.spec_dir, P, mode, a.small) if a.spec_dir else None
        print(f"# ==== row {i}/{len(plan)}: problem {P['name']} ({row_label(P, a.small)}), mode {mode}"
              + (f" -> {path}" if path else ""))
        print(spec_text(P, mode, a.small))
