#!/usr/bin/env python3
"""Conv2d + epilogue chains: fusejit vs PyTorch (cuDNN, eager, torch.compile), in one process.

Every problem is c = F.conv2d(x, w, cb, stride, padding, groups=g) on NCHW tensors, followed by one chain
(--problems takes 1-based indices, these names, or 'all'):

  1 seed1    x 128x 64x128x128, conv  64->128 k3       (+cb)  relu(c) + bias[128,1,1]           (seed problem 1)
  2 seed3    x 128x  8x256x256, conv   8-> 64 k3       (+cb)  maxpool4(tanh(c) * 2 + bias[64,1,1])  (seed 3)
  3 c64_224  x  32x 64x224x224, conv  64->128 k3 p1    (+cb)  relu(c)
  4 stem     x  64x  3x224x224, conv   3-> 64 k7 s2 p3 (no cb) maxpool(relu(c), k3 s2 p1)    (ResNet stem)
  5 r56      x 128x256x 56x 56, conv 256->256 k3 p1    (no cb) relu(c + bias[256,1,1])
  6 cmin     x 128x 16x192x192, conv  16-> 32 k3       (+cb)  tanh(min over C of c, keepdim) -> [N,1,Ho,Wo]
  7 gap      x  64x 32x128x128, conv  32-> 64 k3 g4    (+cb)  adaptive_avg_pool2d(gelu(c), 1) -> [N,64,1,1]

(+cb: the conv has its own bias, as nn.Conv2d's default; 'bias' is an extra per-channel parameter added in the
epilogue. r56's "+ bias" is that extra parameter on a bias-free conv, as a folded BatchNorm; the stem is
bias-free as in ResNet.) fusejit runs the stem's overlapping padded pool unfused, as a second kernel; the
kernel column names every kernel of the plan. --small: batch 2 and H/W divided by 4 (2 for r56), same channels.

Modes: fp32 (cuDNN/cuBLAS allow_tf32 off; fusejit precision fp32), tf32 (allow_tf32 on; fusejit tf32),
bf16 (x, w, cb and bias in bf16; fusejit bf16); f16 may be named too (not in the default).

Sides (--sides, comma-separated):
  cudnn          F.conv2d alone: the anchor (its error is against the fp64 conv output)
  eager          the whole chain in PyTorch eager
  compile        torch.compile(chain, dynamic=False); --compile-mode picks 'default' (the default),
                 'max-autotune' (mode max-autotune-no-cudagraphs) or 'both' (two sides, compile and
                 max-autotune)
  fusejit        fusejit.compile(spec text): the heuristic config, autotune off
  fusejit-tuned  fusejit.compile(spec text, autotune="force"): tuned now on these shapes (docs/autotune.md), the
                 winner timed as any side; its config is in the row's note (not in the default: ~10-30 s a row)

Default: all 7 problems x fp32, tf32, bf16 (21 rows) x cudnn, eager, compile, fusejit. Expected on an H100:
~5-7 min (torch import + ceilings ~20 s; torch.compile ~3-5 s per row plus ~20 s for the first; fusejit NVRTC
~1-2 s per row; timing <= --max-side-s per side). --time-budget (default 500 s, counted from process start)
skips whatever is left cleanly (rows marked 'skip') so that the gpu_check stage (timeout 560) ends with results.

Measurement (bench/bench.py's helpers): CUDA events, warm-up, an L2 flush before every trial, median ms;
trials = --trials, capped so one side's timing takes about --max-side-s (at least 10 trials). cuDNN runs with
PyTorch's default torch.backends.cudnn.benchmark=False (--cudnn-benchmark turns it on for every side).
Errors: rel L2 against a float64 reference computed on the GPU from the same (rounded) inputs upcast, on a
SUBSET of the batch: the first --ref-batch images (default 2); every side's output is compared on the same
images (full-size fp64 convs would take longer than the benchmark). '!' marks an error above fusejit's
tolerance for the precision (fp32 1e-5, tf32 2e-3, bf16 2e-2, f16 5e-3).
Floor = max(2*N*Ho*Wo*Cout*(Cin/g)*kh*kw / the mode's rate, bytes / copy bandwidth), both measured at the start
of the run (rate: an 8192^3 torch.mm in that mode: fp32 = FFMA, tf32/bf16/f16 = tensor cores; bytes: x, w,
cb, bias and the final output once each). TFLOP/s = conv FLOPs / ms. fj/side = fusejit ms / side ms (< 1:
fusejit faster); the geomean of each ratio over the problems is given per mode.
Each side is wrapped: an exception (unsupported chain, OOM, compile error) is recorded as an error string and
the run goes on; a sticky CUDA error stops the run (results so far are written).

Output: --out (default bench/results) gets bench_conv_<device>_<UTC date-time>[_tag].json (meta, ceilings,
every side's row) and .md (versions, commit, command line, the compact table, geomeans, the full per-side
table), rewritten after every row; the compact table is printed last on stdout.

  python3 bench/bench_conv.py [--problems 1,seed3,all] [--modes fp32,tf32,bf16,f16]
        [--sides cudnn,eager,compile,fusejit] [--compile-mode default|max-autotune|both] [--small]
        [--ref-batch 2] [--trials 100] [--max-side-s 1.5] [--time-budget 500] [--cudnn-benchmark]
        [--out DIR] [--tag T] [--commit C] [--print-specs] [--spec-dir DIR]

--print-specs prints the fusejit YAML specs of the planned rows and exits (needs neither torch nor a GPU);
--spec-dir DIR also writes them there (check them with `build/fusejit validate DIR/*.yaml`).
"""
import argparse
import datetime
import json
import os
import re
import shlex
import subprocess
import sys
import time
import zlib

T_START = time.time()
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import bench_gemm as G  # noqa: E402  (no torch at import) fmt_ms, fmt_tflops, fmt_err, parse_list, TOL, ...
# Re-exported: bench_norm.py, norm_problems.py and conv_dram_writes.py use them as bench_conv.<name>.
from conv_problems import (COMPILE_MODES, DEFAULT_MODES, ELEM_BYTES, MODES, PROBLEMS, SIDES,  # noqa: E402,F401
                           TORCH_SIDES, build_plan, conv_dims, conv_flops, numel, out_dims, parse_problem_list,
                           parse_problems, parse_sides, print_specs, row_label, spec_name, spec_text, write_spec,
                           x_dims)
from conv_report import (compact_table, error_notes, full_table, geomean_table, groups_of,  # noqa: E402,F401
                         ratio_cells, short, write_report, write_results)


# ---- the GPU run ---------------------------------------------------------------------


def tuned_winner(since):
    """The winner config of the tuning record written since `since` (docs/autotune.md: the cache dir's tuning/)."""
    base = (os.environ.get("FUSEJIT_CACHE_DIR") or
            os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "fusejit"))
    d = os.path.join(base, "tuning")
    try:
        files = [os.path.join(d, f) for f in os.listdir(d) if f.endswith(".tune")]
        newest = max((f for f in files if os.path.getmtime(f) >= since - 1), key=os.path.getmtime)
        with open(newest) as fh:
            for line in fh:
                if line.startswith("winner "):
                    return repr(line[len("winner "):].rstrip("\n"))
    except (OSError, ValueError):
        pass
    return "? (no tuning record found)"


class Runner:
    def __init__(self, a, sides):
        import torch
        import torch.nn.functional as F
        import bench as B  # time_fn (L2 flush, CUDA events), ceilings, set_mode, rel_err, git_commit
        self.torch, self.F, self.B = torch, F, B
        self.a = a
        self.sides = sides
        self.rows = []
        self.dead = None  # a sticky CUDA error: stop
        self.fj = None
        self.fj_error = None
        if "fusejit" in sides or "fusejit-tuned" in sides:
            try:
                sys.path.insert(0, os.path.join(ROOT, "python"))
                import fusejit
                fusejit.version()  # loads libfusejit_c.so
                self.fj = fusejit
            except Exception as e:
                self.fj_error = f"fusejit unavailable: {type(e).__name__}: {e}"
                print(self.fj_error, flush=True)
        t = torch
        self.epilogues = {
            "seed1": lambda c, b: t.relu(c) + b,
            "seed3": lambda c, b: F.max_pool2d(t.tanh(c) * 2.0 + b, 4),
            "c64_224": lambda c, b: t.relu(c),
            "stem": lambda c, b: F.max_pool2d(t.relu(c), 3, 2, 1),
            "r56": lambda c, b: t.relu(c + b),
            "cmin": lambda c, b: t.tanh(t.amin(c, dim=1, keepdim=True)),
            "gap": lambda c, b: F.adaptive_avg_pool2d(F.gelu(c), 1),
        }

    def over_budget(self):
        return self.a.time_budget > 0 and time.time() - T_START > self.a.time_budget

    def alive(self):
        try:
            self.torch.cuda.synchronize()
            return True
        except Exception as e:
            self.dead = f"CUDA context unusable after an error: {type(e).__name__}: {str(e)[:300]}"
            return False

    def conv_fn(self, P):
        F, s, p, g = self.F, P["s"], P["p"], P["g"]

        def conv(x, w, cb=None):
            return F.conv2d(x, w, cb, s, p, 1, g)
        return conv

    def chain_fn(self, P):
        """The PyTorch chain with fusejit's argument order: x, w[, cb][, bias]."""
        conv, epi = self.conv_fn(P), self.epilogues[P["name"]]
        if P["cb"] and P["bias"]:
            def f(x, w, cb, bias):
                return epi(conv(x, w, cb), bias)
        elif P["cb"]:
            def f(x, w, cb):
                return epi(conv(x, w, cb), None)
        elif P["bias"]:
            def f(x, w, bias):
                return epi(conv(x, w), bias)
        else:
            def f(x, w):
                return epi(conv(x, w), None)
        return f

    def measure(self, fn):
        torch = self.torch
        fn()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        est = time.perf_counter() - t0
        n = max(10, min(self.a.trials, int(self.a.max_side_s / max(est, 1e-6))))
        return self.B.time_fn(fn, n, warmup=10 if est < 0.005 else 3)

    # One side of one row: build (compile, ...), check the first R images against the reference, time.
    def side(self, base, name, build, ref, shape):
        torch = self.torch
        row = {**base, "side": name}
        if self.over_budget():
            row["skipped"] = f"time budget ({self.a.time_budget:.0f} s) spent"
            self.rows.append(row)
            print(f"  {name:13s} skipped (time budget)", flush=True)
            return
        try:
            t0 = time.time()
            fn, info = build()
            row.update(info)
            t1 = time.time()
            out = fn()
            torch.cuda.synchronize()
            if name in COMPILE_MODES:
                row["compile_s"] = round(time.time() - t0, 2)  # tracing + codegen + first run
            elif "compile_s" not in row:
                row["first_call_s"] = round(time.time() - t1, 3)
            if tuple(out.shape) != tuple(shape):
                raise RuntimeError(f"output shape {tuple(out.shape)} != expected {tuple(shape)}")
            err = self.B.rel_err(out[:ref.shape[0]], ref)
            row["out_dtype"] = str(out.dtype).replace("torch.", "")
            del out
            t = self.measure(fn)
            row.update(t)
            row["rel_l2"], row["max_abs"] = err
            row["tflops"] = base["gflop"] / t["median_ms"]  # GFLOP / ms = TFLOP/s
            print(f"  {name:13s} median {t['median_ms']:9.4f} ms  {row['tflops']:7.1f} TFLOP/s  "
                  f"rel_l2 {err[0]:.2e}  ({t['trials']} trials)"
                  + (f"  {' + '.join(row['kernels'])}" if row.get("kernels") else ""), flush=True)
        except Exception as e:
            msg = f"{type(e).__name__}: {e}".strip()
            row["error"] = msg[:2000]
            print(f"  {name:13s} ERROR {msg.splitlines()[0][:300] if msg else ''}", flush=True)
            if not self.alive():
                row["error"] += f" [{self.dead}]"
        self.rows.append(row)
        try:
            torch.cuda.empty_cache()
        except Exception:
            pass

    def fusejit_build(self, P, mode, args, tuned=False):
        def build():
            if self.fj is None:
                raise RuntimeError(self.fj_error or "fusejit not loaded")
            text = spec_text(P, mode, self.a.small)
            t0 = time.time()
            k = self.fj.compile(text, autotune="force" if tuned else "off")
            info = {"compile_s": round(time.time() - t0, 3)}
            if tuned:
                info["note"] = "tuned config: " + tuned_winner(t0)
            try:
                info["kernel"] = k.name
                plan = self.fj.emit(text, "plan", arch=k.arch)
                info["kernels"] = re.findall(r"^kernel \d+ (\S+)", plan, re.M) or [k.name]
                info["plan_notes"] = [n.strip()[len("note: "):] for n in re.findall(r"^\s*note: .*$", plan, re.M)]
            except Exception as e:  # names are informative only
                info.setdefault("note", f"plan unavailable: {type(e).__name__}: {str(e)[:200]}")
            return (lambda: k(*args)), info
        return build

    def run_row(self, index, P, mode, ceil):
        torch, F, B = self.torch, self.F, self.B
        small = self.a.small
        precision, dt_name = MODES[mode]
        dt = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}[dt_name]
        B.set_mode(mode)
        n, cin, h, w_ = x_dims(P, small)
        cout, k, g = P["cout"], P["k"], P["g"]
        gen = torch.Generator(device="cuda")
        gen.manual_seed(zlib.crc32(P["name"].encode()))  # the same inputs in every mode and run
        # x ~ U[0,1), w and cb ~ nn.Conv2d's init U(-1/sqrt(fan_in), 1/sqrt(fan_in)), bias ~ N(0,1): as the seeds.
        fan_in = (cin // g) * k * k
        x = torch.rand(n, cin, h, w_, device="cuda", generator=gen).to(dt)
        w = ((torch.rand(cout, cin // g, k, k, device="cuda", generator=gen) * 2 - 1) / fan_in ** 0.5).to(dt)
        cb = ((torch.rand(cout, device="cuda", generator=gen) * 2 - 1) / fan_in ** 0.5).to(dt) if P["cb"] else None
        bias = torch.randn(cout, 1, 1, device="cuda", generator=gen).to(dt) if P["bias"] else None
        args = [x, w] + ([cb] if P["cb"] else []) + ([bias] if P["bias"] else [])
        R = min(self.a.ref_batch, n)
        conv, epi = self.conv_fn(P), self.epilogues[P["name"]]
        with torch.no_grad():
            c64 = conv(x[:R].double(), w.double(), None if cb is None else cb.double())
            ref = epi(c64, None if bias is None else bias.double())
        oshape = out_dims(P, small)
        cshape = conv_dims(P, small)
        elem = ELEM_BYTES[dt_name]
        nbytes = elem * sum(t.numel() for t in args) + elem * numel(oshape)
        flops = conv_flops(P, small)
        rate = ceil.get(f"cublas_{mode}_TFLOPs") or ceil["cublas_bf16_TFLOPs"]
        floor = max(flops / (rate * 1e12), nbytes / (ceil["copy_TBps"] * 1e12)) * 1e3
        base = {"index": index, "problem": P["name"], "label": row_label(P, small), "mode": mode,
                "x_shape": list(x.shape), "w_shape": list(w.shape), "conv_shape": list(cshape),
                "out_shape": list(oshape), "stride": P["s"], "padding": P["p"], "groups": g,
                "conv_bias": P["cb"], "extra_bias": P["bias"], "chain": P["formula"],
                "gflop": flops / 1e9, "mbytes": nbytes / 1e6, "floor_ms": floor, "ref_batch": R,
                "floor_3xtf32_ms": (max(3 * flops / (ceil["cublas_tf32_TFLOPs"] * 1e12),
                                        nbytes / (ceil["copy_TBps"] * 1e12)) * 1e3 if mode == "fp32" else None)}
        print(f"{index} {row_label(P, small)} {P['formula']} {mode}: {flops / 1e9:.1f} GFLOP, floor {floor:.4f} ms "
              f"[{time.time() - T_START:.0f} s]", flush=True)
        fn = self.chain_fn(P)
        with torch.no_grad():
            for side in self.sides:
                if self.dead:
                    break
                if side == "cudnn":
                    anchor_args = [x, w] + ([cb] if P["cb"] else [])
                    build = lambda: ((lambda: conv(*anchor_args)), {})
                    self.side(base, side, build, c64, cshape)
                    continue
                if side == "eager":
                    build = lambda: ((lambda: fn(*args)), {})
                elif side in COMPILE_MODES:
                    def build(side=side):
                        torch._dynamo.reset()
                        cf = torch.compile(fn, mode=COMPILE_MODES[side], dynamic=False)
                        return (lambda: cf(*args)), {"compile_mode": COMPILE_MODES[side]}
                else:
                    build = self.fusejit_build(P, mode, args, tuned=side == "fusejit-tuned")
                self.side(base, side, build, ref, oshape)
        torch._dynamo.reset()
        # x, w, cb, bias, c64 and ref go with this frame; run() empties the allocator's cache after it


def run(a, plan, sides):
    try:
        import importlib
        importlib.import_module("torch")
    except ImportError as e:
        print(f"bench_conv: the benchmark needs PyTorch ({e}); --print-specs works without it", file=sys.stderr)
        return 2
    R = Runner(a, sides)
    torch, B = R.torch, R.B
    if not torch.cuda.is_available():
        print("bench_conv: no CUDA device", file=sys.stderr)
        return 2
    torch.backends.cudnn.benchmark = bool(a.cudnn_benchmark)
    try:
        import triton
        triton_version = triton.__version__
    except Exception:
        triton_version = "?"
    now = datetime.datetime.now(datetime.timezone.utc)
    device = torch.cuda.get_device_name()
    meta = {"device": device, "torch": torch.__version__, "cudnn": torch.backends.cudnn.version(),
            "triton": triton_version, "cuda": torch.version.cuda, "date": now.isoformat(),
            "commit": a.commit or B.git_commit(), "small": a.small, "trials": a.trials,
            "max_side_s": a.max_side_s, "sides": sides, "ref_batch": a.ref_batch,
            "cudnn_benchmark": bool(a.cudnn_benchmark), "argv": sys.argv[1:],
            "command": "python3 " + " ".join(shlex.quote(v) for v in [os.path.relpath(sys.argv[0], ROOT)
                                                                       if os.path.isabs(sys.argv[0])
                                                                       else sys.argv[0]] + sys.argv[1:]),
            "time_budget_s": a.time_budget,
            "allow_bf16_reduced_precision_reduction": G.backend_flag(torch, "allow_bf16_reduced_precision_reduction"),
            "fusejit": R.fj.version() if R.fj else R.fj_error}
    try:
        meta["driver"] = subprocess.check_output(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"], text=True).strip().splitlines()[0]
    except Exception:
        meta["driver"] = "?"
    slug = re.sub(r"[^A-Za-z0-9]+", "_", device).strip("_")
    stem = os.path.join(a.out, f"bench_conv_{slug}_{now.strftime('%Y%m%d-%H%M%S')}" + (f"_{a.tag}" if a.tag else ""))
    print(f"{device}, torch {meta['torch']}, triton {triton_version}, CUDA {meta['cuda']}; {len(plan)} rows x "
          f"sides {','.join(sides)}; references on the first {a.ref_batch} image(s)", flush=True)

    torch.manual_seed(0)
    ceil = G.device_ceilings(R, {m for _, m in plan}, a.trials)  # copy_TBps, cublas_<mode>_TFLOPs
    print("ceilings:", json.dumps({k: round(v, 2) for k, v in ceil.items()}), flush=True)

    for P, mode in plan:
        index = PROBLEMS.index(P) + 1
        if R.dead:
            break
        if R.over_budget():  # skip the whole row without building its inputs
            print(f"{index} {P['name']} {mode}: skipped (time budget)", flush=True)
            for side in sides:
                R.rows.append({"index": index, "problem": P["name"], "label": row_label(P, a.small), "mode": mode,
                               "floor_ms": None, "side": side,
                               "skipped": f"time budget ({a.time_budget:.0f} s) spent"})
            continue
        try:
            R.run_row(index, P, mode, ceil)
        except Exception as e:  # inputs / reference (e.g. out of memory): every side of the row fails
            msg = f"{type(e).__name__}: {e}"[:2000]
            print(f"{index} {P['name']} {mode}: ERROR {msg.splitlines()[0][:300]}", flush=True)
            done = {r["side"] for r in R.rows if r["problem"] == P["name"] and r["mode"] == mode}
            for side in sides:
                if side not in done:
                    R.rows.append({"index": index, "problem": P["name"], "label": row_label(P, a.small),
                                   "mode": mode, "floor_ms": None, "side": side, "error": "setup: " + msg})
            R.alive()
        try:
            torch.cuda.empty_cache()
        except Exception:
            pass
        meta["elapsed_s"] = round(time.time() - T_START, 1)
        write_results(stem, meta, ceil, R.rows, sides)
    if R.dead:
        meta["stopped"] = R.dead
    meta["elapsed_s"] = round(time.time() - T_START, 1)
    skipped = sum(1 for r in R.rows if "skipped" in r)
    compact, geo = write_results(stem, meta, ceil, R.rows, sides, final=True)
    print(f"\nwrote {stem}.json and {stem}.md ({meta['elapsed_s']:.0f} s"
          + (f"; {skipped} sides skipped over the time budget" if skipped else "")
          + (f"; stopped: {R.dead}" if R.dead else "") + ")\n")
    print(f"ceilings: copy {ceil['copy_TBps']:.2f} TB/s, torch.mm "
          + ", ".join(f"{k.split('_')[1]} {v:.0f}" for k, v in ceil.items() if k.startswith("cublas"))
          + f" TFLOP/s; fj/side < 1: fusejit faster; ! = error above fusejit's tolerance; rel L2 on the first "
          f"{a.ref_batch} image(s)\n")
    notes = error_notes(R.rows)
    if notes:
        print(notes + "\n")
    print(compact)
    if geo:
        print("\n" + geo)
    return 1 if R.dead else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="See the module docstring (head -60 bench/bench_conv.py) for details.")
    ap.add_argument("--problems", default="all", help="1-based indices, names or 'all' (comma-separated)")
    ap.add_argument("--modes", default=",".join(DEFAULT_MODES), help="fp32,tf32,bf16,f16")
    ap.add_argument("--sides", default="cudnn,eager,compile,fusejit", help=",".join(SIDES))
    ap.add_argument("--compile-mode", default="default", choices=["default", "max-autotune", "both"],
                    help="what the 'compile' side runs (max-autotune = max-autotune-no-cudagraphs)")
    ap.add_argument("--small", action="store_true", help="batch 2, smaller H/W (smoke test)")
    ap.add_argument("--ref-batch", type=int, default=2, help="images of the batch checked against fp64")
    ap.add_argument("--trials", type=int, default=100)
    ap.add_argument("--max-side-s", type=float, default=1.5, help="cap on one side's timing loop (seconds)")
    ap.add_argument("--time-budget", type=float, default=500.0,
                    help="seconds since start after which remaining sides/rows are skipped (0: none)")
    ap.add_argument("--cudnn-benchmark", action="store_true", help="torch.backends.cudnn.benchmark = True")
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--tag", default="")
    ap.add_argument("--commit", default="", help="git commit to record (when the tree has no .git)")
    ap.add_argument("--print-specs", action="store_true", help="print the fusejit specs of the plan and exit")
    ap.add_argument("--spec-dir", default=None, help="also write the specs there (one YAML file per row)")
    a = ap.parse_args()
    if a.ref_batch < 1:
        raise SystemExit("--ref-batch must be >= 1")

    plan = build_plan(a)
    sides = parse_sides(a)
    if a.print_specs:
        print_specs(a, plan)
        return 0
    return run(a, plan, sides)


if __name__ == "__main__":
    sys.exit(main())
