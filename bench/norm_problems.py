"""The problems of bench/bench_norm.py and what needs no torch: spec texts per mode, plans through the bridge or
the CLI, --dry-run and --print-specs (bench_norm.py's docstring describes them)."""
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import bench_conv as C  # noqa: E402  (no torch at import) MODES; C.G = bench_gemm (parse_list)

G = C.G
SPEC_DIR = os.path.join(HERE, "specs_norm")

# name, spec file, anchor kind, the twin's inputs (name, shape, init) in the spec's order (checked against the
# spec), anchor dims for FLOPs, output shapes, formula, default reference batch (leading dim of x), --small batch.
PROBLEMS = [
    dict(name="lin_gn_swish", spec="a_linear_group_norm_swish.yaml", anchor="linear", ref=1024, small=64,
         inputs=[("x", (4096, 1024), "uniform01"), ("w", (4096, 1024), "torch_weight"),
                 ("b", (4096,), "torch_bias"), ("gamma", (4096,), "normal"), ("beta", (4096,), "normal")],
         outputs=[("y", (4096, 4096))], fan_in=1024,
         formula="silu(group_norm(linear(x, w, b), 32, gamma, beta))"),
    dict(name="conv_gn_pool", spec="b_conv_group_norm_maxpool.yaml", anchor="conv2d", ref=4, small=2,
         inputs=[("x", (32, 64, 56, 56), "uniform01"), ("w", (128, 64, 3, 3), "torch_weight"),
                 ("b", (128,), "torch_bias"), ("gamma", (128,), "normal"), ("beta", (128,), "normal")],
         outputs=[("y", (32, 128, 28, 28))], fan_in=64 * 9, conv=dict(stride=1, padding=1, ho=56, wo=56),
         formula="max_pool2d(group_norm(conv2d(x, w, b, padding 1), 32, gamma, beta), 2)"),
    dict(name="lin_sum_max_lse", spec="c_linear_sum_max_logsumexp.yaml", anchor="linear", ref=1024, small=64,
         inputs=[("x", (8192, 1024), "uniform01"), ("w", (4096, 1024), "torch_weight"),
                 ("b", (4096,), "torch_bias")],
         outputs=[("row_sum", (8192, 1)), ("row_max", (8192, 1)), ("row_lse", (8192, 1))], fan_in=1024,
         formula="h = linear(x, w, b); h.sum(-1, keepdim), h.amax(-1, keepdim), h.logsumexp(-1, keepdim)"),
    dict(name="lin_manual_ln", spec="d_linear_manual_layer_norm.yaml", anchor="linear", ref=1024, small=64,
         inputs=[("x", (4096, 1024), "uniform01"), ("w", (4096, 1024), "torch_weight"),
                 ("b", (4096,), "torch_bias"), ("gamma", (4096,), "normal"), ("beta", (4096,), "normal")],
         outputs=[("y", (4096, 4096))], fan_in=1024,
         formula="c = h - h.mean(-1, keepdim); c * rsqrt((c * c).mean(-1, keepdim) + 1e-5) * gamma + beta"),
    dict(name="lin_gelu_pool1d", spec="e_linear_gelu_pool1d.yaml", anchor="linear", ref=1024, small=64,
         inputs=[("x", (8192, 1024), "uniform01"), ("w", (4096, 1024), "torch_weight"),
                 ("b", (4096,), "torch_bias")],
         outputs=[("mp", (8192, 2048)), ("ap", (8192, 2048))], fan_in=1024,
         formula="g = gelu(linear(x, w, b)); max_pool1d(g, 4, 2, 1), avg_pool1d(g, 3, 2, 1, count_include_pad=False)"),
    dict(name="lin_zloss", spec="f_linear_log_softmax_zloss.yaml", anchor="linear", ref=128, small=64,
         inputs=[("x", (4096, 1024), "uniform01"), ("w", (32000, 1024), "torch_weight")],
         outputs=[("logp", (4096, 32000)), ("lse", (4096,))], fan_in=1024,
         formula="logits = linear(x, w); log_softmax(logits, -1), logsumexp(logits, -1)"),
    dict(name="conv_in_head", spec="g_conv_instance_norm_head.yaml", anchor="conv2d", ref=4, small=2,
         inputs=[("x", (32, 64, 28, 28), "uniform01"), ("w", (256, 64, 3, 3), "torch_weight"),
                 ("b", (256,), "torch_bias")],
         outputs=[("y", (32, 256, 1, 1))], fan_in=64 * 9, conv=dict(stride=1, padding=1, ho=28, wo=28),
         formula="sigmoid(global_avg_pool(relu(instance_norm(conv2d(x, w, b, padding 1)))))"),
]

MODES = C.MODES  # mode -> (spec precision, input dtype)


# ---- the plan and the specs (no torch) -------------------------------------------------


def parse_problems(text):
    return C.parse_problem_list(text, PROBLEMS)


def batch(P, small):
    return P["small"] if small else P["inputs"][0][1][0]


def input_shapes(P, small):
    """[(name, shape, init)]: x's first dim is the batch; the rest is fixed."""
    out = []
    for name, shape, init in P["inputs"]:
        out.append((name, ((batch(P, small),) + tuple(shape[1:])) if name == "x" else tuple(shape), init))
    return out


def output_shapes(P, small):
    return [(name, (batch(P, small),) + tuple(shape[1:])) for name, shape in P["outputs"]]


def anchor_flops(P, small):
    n = batch(P, small)
    w = P["inputs"][1][1]
    if P["anchor"] == "linear":
        return 2.0 * n * w[0] * w[1]
    cv = P["conv"]
    return 2.0 * n * cv["ho"] * cv["wo"] * w[0] * w[1] * w[2] * w[3]


def spec_text(P, mode, small):
    """The spec file's text with the mode's precision (and, --small, x's first dim) substituted."""
    with open(os.path.join(SPEC_DIR, P["spec"])) as f:
        text = f.read()
    precision = MODES[mode][0]
    text, n = re.subn(r"^precision: *\w+ *$", f"precision: {precision}", text, count=1, flags=re.M)
    if n != 1:
        raise SystemExit(f"{P['spec']}: no 'precision:' line to substitute")
    text = re.sub(r"^name: *(\S+)", lambda m: f"name: {m.group(1)}_{mode}" + ("_small" if small else ""),
                  text, count=1, flags=re.M)
    if small:
        text, n = re.subn(r"(\{name: x, shape: \[)(\d+)", lambda m: m.group(1) + str(P["small"]), text, count=1)
        if n != 1:
            raise SystemExit(f"{P['spec']}: no '{{name: x, shape: [...' input to shrink for --small")
    return text


def spec_file_name(P, mode, small):
    return os.path.splitext(P["spec"])[0] + f"_{mode}" + ("_small" if small else "") + ".yaml"


def build_plan(a):
    problems = parse_problems(a.problems)
    modes = G.parse_list(a.modes, list(MODES), "modes")
    return [(P, m) for P in problems for m in modes]


def row_label(P, small):
    return f"{P['name']} x{'x'.join(map(str, input_shapes(P, small)[0][1]))}"


def plan_kernels(plan_text):
    return re.findall(r"^kernel \d+ (\S+)", plan_text, re.M)


def fusejit_bin(a):
    if a.fusejit_bin:
        return a.fusejit_bin
    return os.path.join(ROOT, os.environ.get("BUILD_DIR", "build"), "fusejit")


def cli_plan(a, text, name):
    """`fusejit emit --plan` of a spec text through the CLI: (kernel names, plan text)."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, name)
        with open(path, "w") as f:
            f.write(text)
        plan = subprocess.run([fusejit_bin(a), "emit", "--plan", path, "--arch", "sm_90a"], capture_output=True,
                              text=True, timeout=120)
        if plan.returncode != 0:
            raise RuntimeError(f"fusejit emit --plan: rc {plan.returncode}: {(plan.stderr or plan.stdout)[:500]}")
        return plan_kernels(plan.stdout), plan.stdout


def load_bridge():
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import fusejit
    fusejit.version()  # loads libfusejit_c.so
    return fusejit


def check_spec_args(P, small, spec):
    """The spec's arguments against the twin's shapes (raises on a mismatch)."""
    want = [(n, tuple(s)) for n, s, _ in input_shapes(P, small)] + [(n, tuple(s)) for n, s in output_shapes(P, small)]
    got = [(arg.name, tuple(arg.shape)) for arg in spec.inputs] + [(arg.name, tuple(arg.shape)) for arg in spec.outputs]
    if want != got:
        raise RuntimeError(f"{P['spec']}: the spec's arguments {got} differ from the twin's {want}")


def dry_run(a, plan):
    """Parse every planned spec without torch or a GPU; print its kernels. rc 1 on any failure."""
    try:
        fj = load_bridge()
        how = f"the Python bridge (fusejit {fj.version()})"
    except Exception as e:
        fj = None
        how = f"the CLI {fusejit_bin(a)} (bridge unavailable: {type(e).__name__}: {str(e)[:200]})"
    print(f"dry run through {how}")
    bad = 0
    for P, mode in plan:
        text = spec_text(P, mode, a.small)
        label = f"{P['name']} {mode}" + (" small" if a.small else "")
        try:
            if fj is not None:
                spec = fj.Spec(text, filename=spec_file_name(P, mode, a.small))
                check_spec_args(P, a.small, spec)
                dtypes = sorted({arg.dtype for arg in spec.inputs})
                kernels = plan_kernels(fj.emit(spec, "plan", arch="sm_90a"))
            else:
                with tempfile.TemporaryDirectory() as d:
                    path = os.path.join(d, spec_file_name(P, mode, a.small))
                    with open(path, "w") as f:
                        f.write(text)
                    v = subprocess.run([fusejit_bin(a), "validate", path], capture_output=True, text=True,
                                       timeout=120)
                    if v.returncode != 0:
                        raise RuntimeError(f"fusejit validate: {(v.stdout + v.stderr).strip()[:500]}")
                dtypes = ["(not checked)"]
                kernels, _ = cli_plan(a, text, spec_file_name(P, mode, a.small))
            print(f"  ok   {label:28s} inputs {','.join(dtypes)}; {len(kernels)} kernel(s): {' + '.join(kernels)}")
        except Exception as e:
            bad += 1
            print(f"  FAIL {label:28s} {type(e).__name__}: {str(e)[:600]}")
    print(f"{len(plan) - bad}/{len(plan)} specs ok")
    return 1 if bad else 0


def print_specs(a, plan):
    for i, (P, mode) in enumerate(plan, 1):
        text = spec_text(P, mode, a.small)
        path = None
        if a.spec_dir:
            os.makedirs(a.spec_dir, exist_ok=True)
            path = os.path.join(a.spec_dir, spec_file_name(P, mode, a.small))
            with open(path, "w") as f:
                f.write(text)
        print(f"# ==== row {i}/{len(plan)}: problem {P['name']}, mode {mode}" + (f" -> {path}" if path else ""))
        print(text)
