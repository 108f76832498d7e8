#!/usr/bin/env python3
"""GEMM + epilogue chains: fusejit vs PyTorch (cuBLAS, eager, torch.compile), in one process.

Every problem is y = F.linear(x, W), x [M, K], W [N, K] (no linear bias), followed by one chain
(--op matmul: y = x @ W with W stored [K, N], the same values, as fusejit's matmul op):

  a  bias_relu   relu(y + b[N])
  b  bias_gelu   gelu(y + b[N])                  (erf GELU, F.gelu's default)
  c  swish2      y * sigmoid(y) * 2
  d  row_lse     logsumexp(y, dim=-1) -> [M]
  e  softmax     softmax(y, dim=-1)

Shapes, M x K x N (--shapes takes 1-based indices, these names, 'all', or any MxKxN):

  1 sq4096     4096 x  4096 x  4096
  2 sq8192     8192 x  8192 x  8192
  3 seed2      1024 x  8192 x  8192   (seed problem 2)
  4 m256        256 x 16384 x 16384
  5 m16384    16384 x  2048 x  2048
  6 mlp11008    512 x  4096 x 11008
  7 odd         100 x  1000 x   500

Modes: fp32 (allow_tf32 off; fusejit precision fp32), tf32 (allow_tf32 on; fusejit tf32), bf16 and f16
(x, W and b in that dtype; fusejit precision bf16 / f16 on tensors of that dtype).

Sides (--sides, comma-separated):
  cublas         F.linear alone: the anchor, cuBLAS (its error is against the fp64 anchor output y)
  eager          the whole chain in PyTorch eager
  compile        torch.compile(chain, dynamic=False); --compile-mode picks 'default' (the default),
                 'max-autotune' (mode max-autotune-no-cudagraphs, ~30-60 s of compile per row) or
                 'both' (two sides, labelled compile and max-autotune)
  fusejit        fusejit.compile(spec text): the heuristic config, autotune off
  fusejit-tuned  only with --tuned (or named in --sides): `build/fusejit tune SPEC --budget
                 --tune-budget` in a subprocess stores the winner in the tuning database, then
                 fusejit.compile(spec, autotune="use_db") compiles it in this process. The Python
                 bridge has no budget option, so --tune-via force (the fallback when the CLI is
                 missing) uses fusejit.compile(autotune="force") with the library's 120 s budget.

Default subset (no --shapes/--chains/--modes given), 29 rows x 4 sides (cublas, eager, compile in
'default' mode, fusejit):
  chain a on all 7 shapes in fp32, tf32 and bf16              (21 rows)
  chains b, c, d, e on shape 3 (seed2) in fp32 and bf16       ( 8 rows)
Expected on an H100: ~3-4 min (torch import + ceilings ~15 s; torch.compile 'default' ~3-5 s per
row plus ~20 s for the first; fusejit NVRTC compile ~1-2 s per row; fp64 references ~10 s; timing
~40 s, more where fusejit runs a SIMT mainloop: ~37 ms per call on sq8192). --time-budget (default
480 s, counted from process start) skips what is left cleanly if it runs long. Any of --shapes/--chains/--modes replaces the default subset with one
product grid whose missing axes default to all shapes, chain a, and fp32,tf32,bf16; --all is every
shape x chain x mode (140 rows: several device calls, split it with --shapes).

Measurement (bench/bench.py's helpers): CUDA events, warm-up, an L2 flush before every trial, median
ms; trials = --trials, capped so one side's timing takes about --max-side-s (at least 10 trials).
Errors: rel L2 against a float64 reference computed on the GPU from the same inputs upcast (so for
bf16/f16 the reference sees the rounded inputs and the error is the kernel's, not the inputs'); a
'!' marks an error above fusejit's tolerance for that precision (fp32 1e-5, tf32 2e-3, bf16 2e-2,
f16 5e-3). Floor = max(2MNK / the mode's cuBLAS rate at 8192^3, bytes / copy bandwidth), both
measured at the start of the run (bytes: x, W, b and the output once each). TFLOP/s = 2MNK / ms.
Ratios fj/side = fusejit ms / that side's ms (< 1: fusejit is faster).
Each side is wrapped: an exception (unsupported chain, OOM, compile error) is recorded as an error
string and the run goes on; a sticky CUDA error stops the run (results so far are written).

Output: --out (default bench/results) gets bench_gemm_<device>_<UTC date-time>[_tag].json (meta,
ceilings, every side's row) and .md (the compact table and the full per-side table), rewritten after
every shape/mode group; the compact markdown table is printed last on stdout.

  python3 bench/bench_gemm.py [--shapes 1,3,odd|all|MxKxN] [--chains a,b,c,d,e,f,g] [--modes fp32,tf32,bf16,f16]
        [--all] [--sides cublas,eager,compile,fusejit] [--compile-mode default|max-autotune|both]
        [--tuned [--tune-budget 60] [--tune-via auto|cli|force]] [--small] [--trials 100]
        [--max-side-s 2] [--time-budget 480] [--out DIR] [--tag T] [--commit C]
        [--print-specs] [--spec-dir DIR]

--small divides every dim >= 1024 by 8 (smoke test). --print-specs prints the fusejit YAML specs of
the planned rows and exits (needs neither torch nor a GPU); --spec-dir DIR also writes them there as
files (check them with `build/fusejit validate DIR/*.yaml`).
"""
import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import zlib

T_START = time.time()
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import gemm_problems as P  # noqa: E402  P.OP: --op, set in main
from gemm_problems import (CHAINS, COMPILE_MODES, ELEM_BYTES, FJ_CONFIGS, FJ_SIDES, MODES, SIDES,  # noqa: E402,F401
                           TOL, build_plan, parse_fusejit_configs, parse_list, parse_sides, print_specs,
                           shape_label, spec_text, write_spec)
from gemm_report import error_notes, fmt_err, fmt_ms, fmt_tflops, write_results  # noqa: E402,F401
# (TOL, parse_list and fmt_* are also read here by bench_conv.py and bench_norm.py, as G.<name>)


# ---- the GPU run ---------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="See the module docstring (head -80 bench/bench_gemm.py) for details.")
    ap.add_argument("--shapes", default=None, help="1-based indices, names, 'all' or MxKxN (comma-separated)")
    ap.add_argument("--chains", default=None, help="a,b,c,d,e,f,g (default with other axes given: a)")
    ap.add_argument("--modes", default=None, help="fp32,tf32,bf16,f16 (default with other axes given: fp32,tf32,bf16)")
    ap.add_argument("--all", action="store_true", help="every shape x chain x mode (140 rows: split it)")
    ap.add_argument("--sides", default="cublas,eager,compile,fusejit", help=",".join(SIDES))
    ap.add_argument("--compile-mode", default="default", choices=["default", "max-autotune", "both"],
                    help="what the 'compile' side runs (max-autotune = max-autotune-no-cudagraphs)")
    ap.add_argument("--tuned", action="store_true", help="add the fusejit-tuned side")
    ap.add_argument("--fusejit-configs", default="",
                    help="'label=config;...': one more fusejit side per codegen config (side 'fj:label'), "
                         "e.g. 'pp=wgmma_schedule=pingpong,wgmma_tile=128x128x6x16'")
    ap.add_argument("--tune-budget", type=int, default=60, help="seconds per tuning run (--tune-via cli)")
    ap.add_argument("--tune-via", default="auto", choices=["auto", "cli", "force"],
                    help="cli: `fusejit tune --budget` then autotune=use_db; force: autotune='force' "
                         "(library budget, 120 s); auto: cli when the CLI is found")
    ap.add_argument("--trials", type=int, default=100)
    ap.add_argument("--max-side-s", type=float, default=2.0, help="cap on one side's timing loop (seconds)")
    ap.add_argument("--time-budget", type=float, default=480.0,
                    help="seconds since start after which remaining sides/rows are skipped (0: none)")
    ap.add_argument("--small", action="store_true", help="dims >= 1024 divided by 8 (smoke test)")
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--tag", default="")
    ap.add_argument("--op", default="linear", choices=["linear", "matmul"],
                    help="the anchor: F.linear (W [N, K]) or matmul (W [K, N])")
    ap.add_argument("--commit", default="", help="git commit to record (when the tree has no .git)")
    ap.add_argument("--print-specs", action="store_true", help="print the fusejit specs of the plan and exit")
    ap.add_argument("--spec-dir", default=None, help="also write the specs there (one YAML file per row)")
    a = ap.parse_args()
    P.OP = a.op  # read by gemm_problems' spec_name / spec_text and by Runner
    if P.OP != "linear" and not a.tag:
        a.tag = P.OP

    plan = build_plan(a)
    FJ_CONFIGS.update(parse_fusejit_configs(a.fusejit_configs))
    sides = parse_sides(a)
    if a.print_specs:
        print_specs(a, plan)
        return 0
    return run(a, plan, sides)


class Runner:
    def __init__(self, a, sides):
        import torch
        import torch.nn.functional as F
        sys.path.insert(0, HERE)
        import bench as B  # timing, L2 flush, ceilings, set_mode, rel_err, git_commit
        self.torch, self.F, self.B = torch, F, B
        self.a = a
        self.sides = sides
        self.rows = []
        self.dead = None  # a sticky CUDA error: stop
        self.fj = None
        self.fj_error = None
        self.cli = os.environ.get("FUSEJIT_CLI") or os.path.join(ROOT, "build", "fusejit")
        self.tune_via = a.tune_via
        if self.tune_via == "auto":
            self.tune_via = "cli" if os.access(self.cli, os.X_OK) else "force"
        self.spec_dir = a.spec_dir or tempfile.mkdtemp(prefix="bench_gemm_specs_")
        if any(s in FJ_SIDES for s in sides):
            try:
                sys.path.insert(0, os.path.join(ROOT, "python"))
                import fusejit
                fusejit.version()  # loads libfusejit_c.so
                self.fj = fusejit
            except Exception as e:
                self.fj_error = f"fusejit unavailable: {type(e).__name__}: {e}"
                print(self.fj_error, flush=True)
        t, F = torch, F
        self.epilogues = {
            "a": lambda y, b: t.relu(y + b),
            "b": lambda y, b: F.gelu(y + b),
            "c": lambda y, b: y * t.sigmoid(y) * 2,
            "d": lambda y, b: t.logsumexp(y, dim=-1),
            "e": lambda y, b: t.softmax(y, dim=-1),
            "f": lambda y, b: t.relu(y + b).sum(dim=0),
            "g": lambda y, b: y - y.mean(dim=0, keepdim=True),
        }

    def over_budget(self):
        return self.a.time_budget > 0 and time.time() - T_START > self.a.time_budget

    def anchor(self, x, w):
        return self.torch.matmul(x, w) if P.OP == "matmul" else self.F.linear(x, w)

    def chain_fn(self, chain):
        epi, anchor = self.epilogues[chain], self.anchor
        if CHAINS[chain][1]:
            def f(x, w, b):
                return epi(anchor(x, w), b)
        else:
            def f(x, w):
                return epi(anchor(x, w), None)
        return f

    def alive(self):
        try:
            self.torch.cuda.synchronize()
            return True
        except Exception as e:
            self.dead = f"CUDA context unusable after an error: {type(e).__name__}: {str(e)[:300]}"
            return False

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

    # One side of one row: build (compile, ...), check against the reference, time.
    def side(self, base, name, build, ref, anchor_ref):
        torch = self.torch
        row = {**base, "side": name}
        if self.over_budget():
            row["skipped"] = f"time budget ({self.a.time_budget:.0f} s) spent"
            self.rows.append(row)
            return
        try:
            t0 = time.time()
            fn, info = build()
            row.update(info)
            t1 = time.time()
            out = fn()
            torch.cuda.synchronize()
            if name in ("compile", "max-autotune"):
                row["compile_s"] = round(time.time() - t0, 2)  # tracing + codegen + first run
            elif "compile_s" not in row:
                row["first_call_s"] = round(time.time() - t1, 3)
            if tuple(out.shape) != tuple((anchor_ref if name == "cublas" else ref).shape):
                raise RuntimeError(f"output shape {tuple(out.shape)} != reference "
                                   f"{tuple((anchor_ref if name == 'cublas' else ref).shape)}")
            err = self.B.rel_err(out, anchor_ref if name == "cublas" else ref)
            row["out_dtype"] = str(out.dtype).replace("torch.", "")
            del out
            t = self.measure(fn)
            row.update(t)
            row["rel_l2"], row["max_abs"] = err
            row["tflops"] = base["gflop"] / t["median_ms"]  # GFLOP / ms = TFLOP/s
            print(f"  {name:13s} median {t['median_ms']:9.4f} ms  {row['tflops']:7.1f} TFLOP/s  "
                  f"rel_l2 {err[0]:.2e}  ({t['trials']} trials)" + (f"  {row['note']}" if row.get("note") else ""),
                  flush=True)
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

    def fusejit_build(self, shape, mode, chain, args, tuned, config=None):
        def build():
            if self.fj is None:
                raise RuntimeError(self.fj_error or "fusejit not loaded")
            text = spec_text(shape, mode, chain)
            info = {}
            t0 = time.time()
            if config:
                k = self.fj.compile(text, config=config)
                info["note"] = "config " + config
            elif not tuned:
                k = self.fj.compile(text)
            elif self.tune_via == "cli":
                path = write_spec(self.spec_dir, shape, mode, chain)
                self.torch.cuda.synchronize()
                self.torch.cuda.empty_cache()
                p = subprocess.run([self.cli, "tune", path, "--budget", str(self.a.tune_budget), "--quiet"],
                                   capture_output=True, text=True, timeout=self.a.tune_budget + 300)
                if p.returncode != 0:
                    raise RuntimeError(f"fusejit tune rc={p.returncode}: {(p.stderr or p.stdout)[-800:]}")
                win = re.search(r"^winner: (.*)$", p.stdout, re.M)
                info["tune_s"] = round(time.time() - t0, 1)
                info["note"] = (win.group(1).strip() if win else "winner ?") + f" [tune --budget {self.a.tune_budget}]"
                t0 = time.time()
                k = self.fj.compile(text, autotune="use_db")
            else:
                k = self.fj.compile(text, autotune="force")
                info["tune_s"] = round(time.time() - t0, 1)
                info["note"] = "autotune=force (library budget 120 s)"
            info["compile_s"] = round(time.time() - t0, 3)
            try:
                info["kernel"] = k.name
            except Exception:
                pass
            return (lambda: k(*args)), info
        return build

    def run_group(self, shape, mode, chains, ceil):
        """One shape and mode: inputs and the fp64 anchor output once, then each chain."""
        torch, F, B = self.torch, self.F, self.B
        sname, m, k, n = shape
        precision, dt_name = MODES[mode]
        dt = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}[dt_name]
        B.set_mode(mode)
        gen = torch.Generator(device="cuda")
        gen.manual_seed(zlib.crc32(shape_label(shape).encode()))  # same inputs in every mode and run
        # x ~ U[0,1), W ~ nn.Linear's init U(-1/sqrt(K), 1/sqrt(K)), b ~ N(0,1): as the seed problems.
        x = torch.rand(m, k, device="cuda", generator=gen).to(dt)
        w = ((torch.rand(n, k, device="cuda", generator=gen) * 2 - 1) / k ** 0.5).to(dt)
        b = torch.randn(n, device="cuda", generator=gen).to(dt)
        if P.OP == "matmul":
            w = w.t().contiguous()  # [K, N]: the same values
        with torch.no_grad():
            y64 = self.anchor(x.double(), w.double())
            b64 = b.double()
        elem = ELEM_BYTES[dt_name]
        rate = ceil[f"cublas_{mode}_TFLOPs"]
        for chain in chains:
            if self.dead:
                return
            cname, bias, _ = CHAINS[chain]
            out_numel = m if chain == "d" else n if chain == "f" else m * n
            nbytes = elem * (m * k + n * k + (n if bias else 0) + out_numel)
            flops = 2.0 * m * n * k
            floor = max(flops / (rate * 1e12), nbytes / (ceil["copy_TBps"] * 1e12)) * 1e3
            base = {"shape": shape_label(shape), "shape_name": sname, "M": m, "K": k, "N": n, "chain": chain,
                    "chain_name": cname, "mode": mode, "gflop": flops / 1e9, "mbytes": nbytes / 1e6,
                    "floor_ms": floor,
                    "floor_3xtf32_ms": (max(3 * flops / (ceil["cublas_tf32_TFLOPs"] * 1e12),
                                            nbytes / (ceil["copy_TBps"] * 1e12)) * 1e3 if mode == "fp32" else None)}
            print(f"{shape_label(shape)} ({sname}) chain {chain} {cname} {mode}: floor {floor:.4f} ms "
                  f"[{time.time() - T_START:.0f} s]", flush=True)
            with torch.no_grad():
                ref = self.epilogues[chain](y64, b64)
            args = (x, w, b) if bias else (x, w)
            fn = self.chain_fn(chain)
            with torch.no_grad():
                for side in self.sides:
                    if self.dead:
                        break
                    if side == "cublas":
                        build = lambda: ((lambda: self.anchor(x, w)), {})
                    elif side == "eager":
                        build = lambda: ((lambda: fn(*args)), {})
                    elif side in COMPILE_MODES:
                        def build(side=side):
                            torch._dynamo.reset()
                            cf = torch.compile(fn, mode=COMPILE_MODES[side], dynamic=False)
                            return (lambda: cf(*args)), {"compile_mode": COMPILE_MODES[side]}
                    else:
                        build = self.fusejit_build(shape, mode, chain, args, side == "fusejit-tuned",
                                                   FJ_CONFIGS.get(side[3:]) if side.startswith("fj:") else None)
                    self.side(base, side, build, ref, y64)
            del ref
            torch._dynamo.reset()
        # x, w, b and y64 go with this frame; run() empties the allocator's cache after it


def device_ceilings(R, modes, trials):
    torch, B = R.torch, R.B
    ceil = B.ceilings(trials)  # copy_TBps, cublas_{fp32,tf32,bf16}_TFLOPs
    if "f16" in modes:
        try:
            s = 8192
            xa = torch.rand(s, s, device="cuda", dtype=torch.float16)
            xb = torch.rand(s, s, device="cuda", dtype=torch.float16)
            t = B.time_fn(lambda: xa @ xb, 20, warmup=3)
            ceil["cublas_f16_TFLOPs"] = 2 * s ** 3 / (t["median_ms"] * 1e-3) / 1e12
            del xa, xb
        except Exception as e:  # keep going: f16 floors then use the bf16 rate
            print(f"f16 ceiling failed ({type(e).__name__}: {e}); using the bf16 rate", flush=True)
            ceil["cublas_f16_TFLOPs"] = ceil["cublas_bf16_TFLOPs"]
    torch.cuda.empty_cache()
    return ceil


def backend_flag(torch, name):
    try:
        return getattr(torch.backends.cuda.matmul, name)
    except Exception:
        return None


def run(a, plan, sides):
    try:
        import importlib
        importlib.import_module("torch")  # Runner imports it; fail here with a clear message
    except ImportError as e:
        print(f"bench_gemm: the benchmark needs PyTorch ({e}); --print-specs works without it", file=sys.stderr)
        return 2
    R = Runner(a, sides)
    torch, B = R.torch, R.B
    if not torch.cuda.is_available():
        print("bench_gemm: no CUDA device", file=sys.stderr)
        return 2
    try:
        import triton
        triton_version = triton.__version__
    except Exception:
        triton_version = "?"
    now = datetime.datetime.now(datetime.timezone.utc)
    device = torch.cuda.get_device_name()
    meta = {"device": device, "torch": torch.__version__, "triton": triton_version,
            "cuda": torch.version.cuda, "date": now.isoformat(), "commit": a.commit or B.git_commit(),
            "small": a.small, "trials": a.trials, "max_side_s": a.max_side_s, "sides": sides,
            "argv": sys.argv[1:], "time_budget_s": a.time_budget,
            "allow_bf16_reduced_precision_reduction": backend_flag(torch, "allow_bf16_reduced_precision_reduction"),
            "allow_fp16_reduced_precision_reduction": backend_flag(torch, "allow_fp16_reduced_precision_reduction"),
            "fusejit": R.fj.version() if R.fj else R.fj_error,
            "tune": ({"via": R.tune_via, "budget_s": a.tune_budget if R.tune_via == "cli" else 120,
                      "cli": R.cli if R.tune_via == "cli" else None} if "fusejit-tuned" in sides else None)}
    try:
        meta["driver"] = subprocess.check_output(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"], text=True).strip().splitlines()[0]
    except Exception:
        meta["driver"] = "?"
    slug = re.sub(r"[^A-Za-z0-9]+", "_", device).strip("_")
    stem = os.path.join(a.out, f"bench_gemm_{slug}_{now.strftime('%Y%m%d-%H%M%S')}" + (f"_{a.tag}" if a.tag else ""))
    print(f"{device}, torch {meta['torch']}, triton {triton_version}; {len(plan)} rows x sides {','.join(sides)}",
          flush=True)

    torch.manual_seed(0)
    ceil = device_ceilings(R, {m for _, m, _ in plan}, a.trials)
    print("ceilings:", json.dumps({k: round(v, 2) for k, v in ceil.items()}), flush=True)

    groups = []
    for shape, mode, chain in plan:
        if groups and groups[-1][0] == shape and groups[-1][1] == mode:
            groups[-1][2].append(chain)
        else:
            groups.append((shape, mode, [chain]))
    for shape, mode, chains in groups:
        if R.dead:
            break
        if R.over_budget():  # skip the whole group without building its inputs
            for chain in chains:
                print(f"{shape_label(shape)} chain {chain} {mode}: skipped (time budget)", flush=True)
                for side in sides:
                    R.rows.append({"shape": shape_label(shape), "shape_name": shape[0], "M": shape[1],
                                   "K": shape[2], "N": shape[3], "chain": chain, "chain_name": CHAINS[chain][0],
                                   "mode": mode, "floor_ms": None, "side": side,
                                   "skipped": f"time budget ({a.time_budget:.0f} s) spent"})
            continue
        try:
            R.run_group(shape, mode, chains, ceil)
            torch.cuda.empty_cache()
        except Exception as e:  # inputs / reference (e.g. out of memory): every side of the group fails
            msg = f"{type(e).__name__}: {e}"[:2000]
            print(f"{shape_label(shape)} {mode}: ERROR {msg.splitlines()[0][:300]}", flush=True)
            done = {(r["chain"], r["side"]) for r in R.rows if r["shape"] == shape_label(shape) and r["mode"] == mode}
            for chain in chains:
                for side in sides:
                    if (chain, side) not in done:
                        R.rows.append({"shape": shape_label(shape), "shape_name": shape[0], "M": shape[1],
                                       "K": shape[2], "N": shape[3], "chain": chain, "chain_name": CHAINS[chain][0],
                                       "mode": mode, "floor_ms": None, "side": side, "error": "setup: " + msg})
            R.alive()
            torch.cuda.empty_cache()
        meta["elapsed_s"] = round(time.time() - T_START, 1)
        write_results(stem, meta, ceil, R.rows, sides)
    if R.dead:
        meta["stopped"] = R.dead
    meta["elapsed_s"] = round(time.time() - T_START, 1)
    skipped = sum(1 for r in R.rows if "skipped" in r)
    compact = write_results(stem, meta, ceil, R.rows, sides, final=True)
    print(f"\nwrote {stem}.json and {stem}.md ({meta['elapsed_s']:.0f} s"
          + (f"; {skipped} sides skipped over the time budget" if skipped else "")
          + (f"; stopped: {R.dead}" if R.dead else "") + ")\n")
    print(f"ceilings: copy {ceil['copy_TBps']:.2f} TB/s, cuBLAS "
          + ", ".join(f"{k.split('_')[1]} {v:.0f}" for k, v in ceil.items() if k.startswith("cublas"))
          + " TFLOP/s; fj/side < 1: fusejit faster; ! = error above fusejit's tolerance\n")
    notes = error_notes(R.rows)
    if notes:
        print(notes + "\n")
    print(compact)
    return 1 if R.dead else 0


if __name__ == "__main__":
    sys.exit(main())
