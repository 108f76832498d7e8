#!/usr/bin/env python3
"""fusejit vs PyTorch on the seed problems, in one process, on the GPU machine.

For each problem and precision mode: PyTorch eager, torch.compile (default and
max-autotune-no-cudagraphs) and fusejit, with the same weights and inputs.
Timing: CUDA events, warm-up, an L2 flush before every trial, >= 100 trials,
mean and median. Correctness: every side against an fp64 PyTorch reference.
The ceilings (copy bandwidth, cuBLAS fp32/tf32/bf16) are measured in the same
run, and each problem's floor is computed from them.

  python3 bench/bench.py [--problems 1,2,3] [--modes fp32,tf32,bf16]
                         [--variants eager,compile,max-autotune,fusejit]
                         [--trials 100] [--out bench/results] [--small]
"""
import argparse, datetime, json, math, os, subprocess, sys, time

import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))

# ---- the seed models (shared/seed-problems.md) ------------------------------------


class ConvReluBias(nn.Module):  # seed 1
    def __init__(self, cin, cout, k):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, k)
        self.bias = nn.Parameter(torch.randn(cout, 1, 1))

    def forward(self, x):
        return torch.relu(self.conv(x)) + self.bias


class GemmBiasRelu(nn.Module):  # seed 2
    def __init__(self, fin, fout):
        super().__init__()
        self.gemm = nn.Linear(fin, fout, bias=False)
        self.bias = nn.Parameter(torch.randn(fout))

    def forward(self, x):
        return torch.relu(self.gemm(x) + self.bias)


class ConvTanhScaleBiasPool(nn.Module):  # seed 3
    def __init__(self, cin, cout, k, scale, pool):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, k)
        self.scale = scale
        self.bias = nn.Parameter(torch.randn(cout, 1, 1))
        self.pool = nn.MaxPool2d(pool)

    def forward(self, x):
        return self.pool(torch.tanh(self.conv(x)) * self.scale + self.bias)


def problem(pid, small):
    """(model, input shape, spec builder, fusejit argument order, MACs, anchor-only fn)"""
    if pid == 1:
        n, cin, cout, hw = (4, 64, 128, 64) if small else (128, 64, 128, 128)
        m = ConvReluBias(cin, cout, 3)
        oh = hw - 2
        spec = lambda p, dt: f"""
name: seed1_conv_relu_bias
precision: {p}
inputs:
  - {{name: x, shape: [{n}, {cin}, {hw}, {hw}]}}
  - {{name: conv_w, shape: [{cout}, {cin}, 3, 3]}}
  - {{name: conv_b, shape: [{cout}]}}
  - {{name: bias, shape: [{cout}, 1, 1], dtype: {dt}}}
ops:
  - {{name: conv, op: conv2d, args: [x, conv_w, conv_b]}}
  - {{name: act, op: relu, args: [conv]}}
  - {{name: y, op: add, args: [act, bias]}}
outputs: [y]
"""
        args = lambda m: [m.conv.weight, m.conv.bias, m.bias]
        macs = n * cout * oh * oh * cin * 9
        anchor = lambda m: m.conv
        return m, (n, cin, hw, hw), spec, args, macs, anchor
    if pid == 2:
        b, f = (256, 2048) if small else (1024, 8192)
        m = GemmBiasRelu(f, f)
        spec = lambda p, dt: f"""
name: seed2_linear_bias_relu
precision: {p}
inputs:
  - {{name: x, shape: [{b}, {f}]}}
  - {{name: gemm_w, shape: [{f}, {f}]}}
  - {{name: bias, shape: [{f}], dtype: {dt}}}
ops:
  - {{name: gemm, op: linear, args: [x, gemm_w]}}
  - {{name: biased, op: add, args: [gemm, bias]}}
  - {{name: y, op: relu, args: [biased]}}
outputs: [y]
"""
        args = lambda m: [m.gemm.weight, m.bias]
        return m, (b, f), spec, args, b * f * f, lambda m: m.gemm
    n, cin, cout, hw = (8, 8, 64, 128) if small else (128, 8, 64, 256)
    m = ConvTanhScaleBiasPool(cin, cout, 3, 2.0, 4)
    spec = lambda p, dt: f"""
name: seed3_conv_tanh_scale_bias_maxpool
precision: {p}
inputs:
  - {{name: x, shape: [{n}, {cin}, {hw}, {hw}]}}
  - {{name: conv_w, shape: [{cout}, {cin}, 3, 3]}}
  - {{name: conv_b, shape: [{cout}]}}
  - {{name: bias, shape: [{cout}, 1, 1], dtype: {dt}}}
ops:
  - {{name: conv, op: conv2d, args: [x, conv_w, conv_b]}}
  - {{name: act, op: tanh, args: [conv]}}
  - {{name: scaled, op: mul, args: [act, 2.0]}}
  - {{name: biased, op: add, args: [scaled, bias]}}
  - {{name: y, op: max_pool2d, args: [biased], kernel_size: 4}}
outputs: [y]
"""
    args = lambda m: [m.conv.weight, m.conv.bias, m.bias]
    oh = hw - 2
    return m, (n, cin, hw, hw), spec, args, n * cout * oh * oh * cin * 9, lambda m: m.conv


# ---- measurement -----------------------------------------------------------------

_flush = None


def flush_l2():
    global _flush
    if _flush is None:
        _flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    _flush.random_(0, 255)  # writes 256 MB: evicts the 50-60 MB L2


def time_fn(fn, trials, warmup=10):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    ms = []
    for _ in range(trials):
        flush_l2()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        ms.append(s.elapsed_time(e))
    ms.sort()
    return {"median_ms": ms[len(ms) // 2] if len(ms) % 2 else 0.5 * (ms[len(ms) // 2 - 1] + ms[len(ms) // 2]),
            "mean_ms": sum(ms) / len(ms), "min_ms": ms[0], "max_ms": ms[-1], "trials": len(ms)}


def ceilings(trials):
    out = {}
    n = 1 << 30
    a = torch.empty(n, dtype=torch.uint8, device="cuda").random_(0, 255)
    b = torch.empty_like(a)
    t = time_fn(lambda: b.copy_(a), max(20, trials // 5))
    out["copy_TBps"] = 2 * n / (t["median_ms"] * 1e-3) / 1e12
    del a, b
    s = 8192
    for name, dt, tf32 in [("fp32", torch.float32, False), ("tf32", torch.float32, True), ("bf16", torch.bfloat16, False)]:
        torch.backends.cuda.matmul.allow_tf32 = tf32
        x = torch.rand(s, s, device="cuda", dtype=dt)
        y = torch.rand(s, s, device="cuda", dtype=dt)
        t = time_fn(lambda: x @ y, 20, warmup=3)
        out[f"cublas_{name}_TFLOPs"] = 2 * s ** 3 / (t["median_ms"] * 1e-3) / 1e12
    torch.backends.cuda.matmul.allow_tf32 = False
    return out


def set_mode(mode):
    tf32 = mode == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32


def rel_err(out, ref):
    d = out.double() - ref
    if not torch.isfinite(out).all():
        return float("inf"), float("inf")
    return (d.norm() / ref.norm()).item(), d.abs().max().item()


def git_commit():
    try:
        return subprocess.check_output(["git", "rev-parse", "--short", "HEAD"], cwd=HERE, text=True).strip()
    except Exception:
        return "unknown"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--problems", default="1,2,3")
    ap.add_argument("--modes", default="fp32,tf32,bf16")
    ap.add_argument("--variants", default="eager,compile,max-autotune,fusejit")
    ap.add_argument("--trials", type=int, default=100)
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--small", action="store_true", help="reduced shapes (smoke test)")
    ap.add_argument("--tag", default="")
    ap.add_argument("--commit", default="", help="git commit to record (when the tree has no .git)")
    a = ap.parse_args()
    torch.manual_seed(0)
    variants = a.variants.split(",")
    meta = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
            "cudnn": torch.backends.cudnn.version(), "date": datetime.datetime.utcnow().isoformat() + "Z",
            "commit": a.commit or git_commit(), "small": a.small, "trials": a.trials}
    try:
        meta["driver"] = subprocess.check_output(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"], text=True).strip()
    except Exception:
        meta["driver"] = "?"
    ceil = ceilings(a.trials)
    print("ceilings:", json.dumps({k: round(v, 2) for k, v in ceil.items()}), flush=True)
    fj = None
    if "fusejit" in variants:
        import fusejit as fj
    rows = []
    for pid in [int(p) for p in a.problems.split(",")]:
        torch.manual_seed(pid)
        model, xshape, spec, fj_args, macs, anchor = problem(pid, a.small)
        model = model.cuda().eval()
        x32 = torch.rand(xshape, device="cuda")
        with torch.no_grad():
            ref = model.double()(x32.double())
            model.float()
        for mode in a.modes.split(","):
            set_mode(mode)
            dt = torch.bfloat16 if mode == "bf16" else torch.float32
            m = model.to(dt)
            x = x32.to(dt)
            elem = 2 if mode == "bf16" else 4
            nbytes = elem * (x.numel() + sum(p.numel() for p in m.parameters()) + ref.numel())
            rate = {"fp32": ceil["cublas_fp32_TFLOPs"], "tf32": ceil["cublas_tf32_TFLOPs"],
                    "bf16": ceil["cublas_bf16_TFLOPs"]}[mode]
            floor = max(2 * macs / (rate * 1e12), nbytes / (ceil["copy_TBps"] * 1e12)) * 1e3
            floor3x = max(2 * macs * 3 / (ceil["cublas_tf32_TFLOPs"] * 1e12), nbytes / (ceil["copy_TBps"] * 1e12)) * 1e3
            base = {"problem": pid, "mode": mode, "gflop": 2 * macs / 1e9, "mbytes": nbytes / 1e6,
                    "floor_ms": floor, "floor_3xtf32_ms": floor3x if mode == "fp32" else None}
            sides = []
            with torch.no_grad():
                if "eager" in variants:
                    sides.append(("eager", lambda: m(x)))
                    sides.append(("anchor-only", lambda: anchor(m)(x)))
                if "compile" in variants:
                    torch._dynamo.reset()
                    cm = torch.compile(m)
                    sides.append(("compile", lambda cm=cm: cm(x)))
                if "max-autotune" in variants:
                    torch._dynamo.reset()
                    cm = torch.compile(m, mode="max-autotune-no-cudagraphs")
                    sides.append(("max-autotune", lambda cm=cm: cm(x)))
                if fj is not None:
                    try:
                        t0 = time.time()
                        k = fj.compile(spec(mode, "bf16" if mode == "bf16" else "f32"))
                        params = [p.detach().contiguous() for p in fj_args(m)]
                        meta.setdefault("fusejit_compile_s", {})[f"{pid}/{mode}"] = round(time.time() - t0, 3)
                        sides.append(("fusejit", lambda: k(x, *params)))
                    except Exception as e:  # report, keep benchmarking the others
                        rows.append({**base, "side": "fusejit", "error": str(e)})
                        print(f"problem {pid} {mode} fusejit: {e}", flush=True)
                for name, fn in sides:
                    try:
                        out = fn()
                        if name == "anchor-only":
                            err = (None, None)
                        else:
                            err = rel_err(out.float(), ref)
                        t = time_fn(fn, a.trials)
                        rows.append({**base, "side": name, **t, "rel_l2": err[0], "max_abs": err[1]})
                        print(f"problem {pid} {mode:5s} {name:13s} median {t['median_ms']:.3f} ms "
                              f"mean {t['mean_ms']:.3f}  rel_l2 {err[0]}", flush=True)
                    except Exception as e:
                        rows.append({**base, "side": name, "error": str(e)[:500]})
                        print(f"problem {pid} {mode} {name}: ERROR {str(e)[:300]}", flush=True)
            m.float()
        del model, ref, x32
        torch.cuda.empty_cache()
    write(a, meta, ceil, rows)


def write(a, meta, ceil, rows):
    os.makedirs(a.out, exist_ok=True)
    stem = os.path.join(a.out, "bench" + (("_" + a.tag) if a.tag else ""))
    with open(stem + ".json", "w") as f:
        json.dump({"meta": meta, "ceilings": ceil, "rows": rows}, f, indent=1)
    lines = [f"# fusejit vs PyTorch — {meta['device']}, driver {meta['driver']}, torch {meta['torch']}, "
             f"{meta['date'][:10]}, commit {meta['commit']}" + (" (SMALL shapes)" if meta["small"] else ""), "",
             "Ceilings measured in this run: copy {:.2f} TB/s; cuBLAS fp32 {:.1f}, tf32 {:.1f}, bf16 {:.1f} TFLOP/s."
             .format(ceil["copy_TBps"], ceil["cublas_fp32_TFLOPs"], ceil["cublas_tf32_TFLOPs"], ceil["cublas_bf16_TFLOPs"]),
             "", "Median ms over {} trials (L2 flushed before each); ratio = side / eager; error = rel L2 vs fp64.".format(meta["trials"]),
             "", "| problem | mode | floor ms | side | median ms | mean ms | vs eager | rel L2 |", "|---|---|---|---|---|---|---|---|"]
    eager = {(r["problem"], r["mode"]): r.get("median_ms") for r in rows if r["side"] == "eager"}
    for r in rows:
        e = eager.get((r["problem"], r["mode"]))
        if "error" in r:
            lines.append(f"| {r['problem']} | {r['mode']} | {r['floor_ms']:.3f} | {r['side']} | error: {r['error'][:80]} | | | |")
            continue
        ratio = f"{r['median_ms'] / e:.2f}x" if e else ""
        rl = "" if r["rel_l2"] is None else f"{r['rel_l2']:.1e}"
        lines.append(f"| {r['problem']} | {r['mode']} | {r['floor_ms']:.3f} | {r['side']} | {r['median_ms']:.3f} | "
                     f"{r['mean_ms']:.3f} | {ratio} | {rl} |")
    text = "\n".join(lines) + "\n"
    with open(stem + ".md", "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
