"""The problems of bench/bench_gemm.py and what needs no torch: shapes, chains, modes, sides, the plan, the
fusejit spec texts (--print-specs, --spec-dir) and the --sides / --fusejit-configs parsing (bench_gemm.py's
docstring describes them)."""
import os
import re

SHAPES = [  # (name, M, K, N)
    ("sq4096", 4096, 4096, 4096),
    ("sq8192", 8192, 8192, 8192),
    ("seed2", 1024, 8192, 8192),
    ("m256", 256, 16384, 16384),
    ("m16384", 16384, 2048, 2048),
    ("mlp11008", 512, 4096, 11008),
    ("odd", 100, 1000, 500),
]

CHAINS = {  # key: (name, reads the bias b, formula)
    "a": ("bias_relu", True, "relu(y + b)"),
    "b": ("bias_gelu", True, "gelu(y + b)"),
    "c": ("swish2", False, "y * sigmoid(y) * 2"),
    "d": ("row_lse", False, "logsumexp(y, dim=-1)"),
    "e": ("softmax", False, "softmax(y, dim=-1)"),
    "f": ("bias_relu_colsum", True, "relu(y + b).sum(dim=0)"),
    "g": ("center_rows", False, "y - y.mean(dim=0, keepdim=True)"),
}

# The ops after the anchor value y, as (name, op, args, attributes); the last one is the output.
CHAIN_OPS = {
    "a": [("yb", "add", ["y", "b"], {}), ("out", "relu", ["yb"], {})],
    "b": [("yb", "add", ["y", "b"], {}), ("out", "gelu", ["yb"], {"approximate": "none"})],
    "c": [("sig", "sigmoid", ["y"], {}), ("ysig", "mul", ["y", "sig"], {}),
          ("out", "mul", ["ysig", "2.0"], {})],
    "d": [("out", "logsumexp", ["y"], {"dims": "[-1]"})],
    "e": [("out", "softmax", ["y"], {"dim": "-1"})],
    "f": [("yb", "add", ["y", "b"], {}), ("r", "relu", ["yb"], {}), ("out", "sum", ["r"], {"dims": "[0]"})],
    "g": [("mu", "mean", ["y"], {"dims": "[0]", "keepdim": "true"}), ("out", "sub", ["y", "mu"], {})],
}

MODES = {"fp32": ("fp32", "f32"), "tf32": ("tf32", "f32"), "bf16": ("bf16", "bf16"), "f16": ("f16", "f16")}
ELEM_BYTES = {"f32": 4, "bf16": 2, "f16": 2}
TOL = {"fp32": 1e-5, "tf32": 2e-3, "bf16": 2e-2, "f16": 5e-3}  # fusejit's rel L2 tolerances (README)

SIDES = ["cublas", "eager", "compile", "max-autotune", "fusejit", "fusejit-tuned"]
TORCH_SIDES = ["cublas", "eager", "compile", "max-autotune"]
FJ_SIDES = ["fusejit", "fusejit-tuned"]  # plus "fj:<label>" per --fusejit-configs entry
FJ_CONFIGS = {}  # label -> codegen config string
COMPILE_MODES = {"compile": "default", "max-autotune": "max-autotune-no-cudagraphs"}

DEFAULT_MODES = ["fp32", "tf32", "bf16"]


# ---- the plan and the specs (no torch) -------------------------------------------------


def shrink(d):
    return d // 8 if d >= 1024 else d


def named_items(tok, items, name_of):
    """A list token: 'all', a 1-based index or a name of `items` -> those items; None for any other token."""
    if tok == "all":
        return list(items)
    if tok.isdigit() and 1 <= int(tok) <= len(items):
        return [items[int(tok) - 1]]
    return [x for x in items if name_of(x) == tok][:1] or None


def parse_shapes(text, small):
    out = []
    for tok in [t.strip() for t in text.split(",") if t.strip()]:
        named = named_items(tok, SHAPES, lambda s: s[0])
        if named:
            out += named
        elif re.fullmatch(r"\d+x\d+x\d+", tok):
            m, k, n = (int(v) for v in tok.split("x"))
            if min(m, k, n) < 1:
                raise SystemExit(f"--shapes: dims must be positive: {tok}")
            out.append((tok, m, k, n))
        else:
            raise SystemExit(f"--shapes: unknown shape {tok!r} (1..{len(SHAPES)}, "
                             f"{', '.join(s[0] for s in SHAPES)}, all, or MxKxN)")
    if small:
        out = [(name, shrink(m), shrink(k), shrink(n)) for name, m, k, n in out]
    seen, uniq = set(), []
    for s in out:
        if s not in seen:
            seen.add(s)
            uniq.append(s)
    return uniq


def parse_list(text, allowed, what):
    items = [t.strip() for t in text.split(",") if t.strip()]
    for t in items:
        if t not in allowed:
            raise SystemExit(f"--{what}: unknown {t!r} (expected some of {', '.join(allowed)})")
    return list(dict.fromkeys(items))


def build_plan(a):
    """[(shape, mode, chain)], grouped by shape then mode (inputs and references are shared)."""
    if a.all:
        grids = [(parse_shapes("all", a.small), list(MODES), list(CHAINS))]
    elif a.shapes is None and a.chains is None and a.modes is None:
        grids = [(parse_shapes("all", a.small), DEFAULT_MODES, ["a"]),
                 (parse_shapes("seed2", a.small), ["fp32", "bf16"], ["b", "c", "d", "e"])]
    else:
        grids = [(parse_shapes(a.shapes or "all", a.small),
                  parse_list(a.modes or ",".join(DEFAULT_MODES), list(MODES), "modes"),
                  parse_list(a.chains or "a", list(CHAINS), "chains"))]
    rows = set()
    shapes = []
    for sh, modes, chains in grids:
        for s in sh:
            if s not in shapes:
                shapes.append(s)
            for m in modes:
                for c in chains:
                    rows.add((s, m, c))
    mode_order, chain_order = list(MODES), list(CHAINS)
    return sorted(rows, key=lambda r: (shapes.index(r[0]), mode_order.index(r[1]), chain_order.index(r[2])))


def shape_label(shape):
    _, m, k, n = shape
    return f"{m}x{k}x{n}"


def spec_name(shape, mode, chain):
    return f"{'gemm' if OP == 'linear' else 'matmul'}_{shape_label(shape)}_{CHAINS[chain][0]}_{mode}"


OP = "linear"  # --op: linear (W [N, K]) or matmul (W [K, N]); bench_gemm.main sets it


def spec_text(shape, mode, chain):
    """The fusejit YAML spec (docs/spec.md) of one row; kernel arguments x, w[, b]."""
    _, m, k, n = shape
    precision, dt = MODES[mode]
    cname, bias, formula = CHAINS[chain]
    w_shape = f"[{k}, {n}]" if OP == "matmul" else f"[{n}, {k}]"
    anchor = f"x[{m},{k}] @ w[{k},{n}]" if OP == "matmul" else f"F.linear(x[{m},{k}], w[{n},{k}])"
    lines = [f"# bench_gemm: y = {anchor}; out = {formula}; mode {mode}",
             f"name: {spec_name(shape, mode, chain)}",
             f"precision: {precision}",
             "inputs:",
             f"  - {{name: x, shape: [{m}, {k}], dtype: {dt}, init: uniform01}}",
             f"  - {{name: w, shape: {w_shape}, dtype: {dt}, init: torch_weight}}"]
    if bias:
        lines.append(f"  - {{name: b, shape: [{n}], dtype: {dt}, init: normal}}")
    lines += ["ops:", f"  - {{name: y, op: {OP}, args: [x, w]}}"]
    lines += [op_line(*op) for op in CHAIN_OPS[chain]]
    lines.append("outputs: [out]")
    return "\n".join(lines) + "\n"


def op_line(name, op, args, attrs):
    """One op of a spec's `ops:` list, in flow style."""
    fields = [f"name: {name}", f"op: {op}", "args: [" + ", ".join(args) + "]"]
    fields += [f"{key}: {val}" for key, val in attrs.items()]
    return "  - {" + ", ".join(fields) + "}"


def write_text(directory, name, text):
    """Writes `text` to directory/name.yaml (the directory made if missing); returns the path."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, name + ".yaml")
    with open(path, "w") as f:
        f.write(text)
    return path


def write_spec(directory, shape, mode, chain):
    return write_text(directory, spec_name(shape, mode, chain), spec_text(shape, mode, chain))


def print_specs(a, plan):
    for i, (shape, mode, chain) in enumerate(plan, 1):
        path = write_spec(a.spec_dir, shape, mode, chain) if a.spec_dir else None
        print(f"# ==== row {i}/{len(plan)}: shape {shape[0]} ({shape_label(shape)}), chain {chain} "
              f"({CHAINS[chain][0]}), mode {mode}" + (f" -> {path}" if path else ""))
        print(spec_text(shape, mode, chain))


def compile_sides(sides, compile_mode, order):
    """`sides` with 'compile' as --compile-mode asks (default, max-autotune or both), in the order of `order`."""
    out = []
    for s in sides:
        if s == "compile" and compile_mode != "default":
            out += ["max-autotune"] if compile_mode == "max-autotune" else ["compile", "max-autotune"]
        else:
            out.append(s)
    return [s for s in order if s in out]


def parse_sides(a):
    sides = parse_list(a.sides, SIDES, "sides")
    if a.tuned and "fusejit-tuned" not in sides:
        sides.append("fusejit-tuned")
    out = compile_sides(sides, a.compile_mode, SIDES)
    for label in FJ_CONFIGS:  # --fusejit-configs: one fusejit side per config, after the others
        FJ_SIDES.append("fj:" + label)
        out.append("fj:" + label)
    return out


def parse_fusejit_configs(text):
    """'label=config;label=config' -> {label: config} (a config is fusejit's key=value,... string)."""
    out = {}
    for item in filter(None, (t.strip() for t in (text or "").split(";"))):
        label, eq, cfg = item.partition("=")
        if not eq or not label.strip() or not cfg.strip():
            raise SystemExit(f"bench_gemm: --fusejit-configs wants label=config;..., got '{item}'")
        out[label.strip()] = cfg.strip()
    return out
