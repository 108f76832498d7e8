#!/usr/bin/env python3
"""Norm / reduction chains (issue 10 §4): fusejit vs PyTorch (eager, torch.compile), in one process.

Seven chains, one spec each in bench/specs_norm/ (--problems takes 1-based indices, these names, or 'all'):

  1 lin_gn_swish  a_linear_group_norm_swish.yaml   x 4096x1024 -> Linear(1024->4096, bias) -> group_norm(32 groups,
                  weight, bias) on the 2-D [M, 4096] output (each row's features in 32 groups of 128, as
                  F.group_norm on a 2-D input) -> silu                                     -> [4096, 4096]
  2 conv_gn_pool  b_conv_group_norm_maxpool.yaml   x 32x64x56x56 -> Conv2d(64->128, k3, p1, bias) -> group_norm(32
                  groups, weight, bias) -> max_pool2d(2)                                   -> [32, 128, 28, 28]
  3 lin_sum_max_lse c_linear_sum_max_logsumexp.yaml x 8192x1024 -> Linear(1024->4096, bias) = h; three outputs:
                  h.sum(-1, keepdim), h.amax(-1, keepdim), h.logsumexp(-1, keepdim)        -> 3 x [8192, 1]
  4 lin_manual_ln d_linear_manual_layer_norm.yaml  x 4096x1024 -> Linear(1024->4096, bias) = h; a layer norm written
                  out: c = h - mean(h), c * rsqrt(mean(c*c) + 1e-5) * gamma + beta          -> [4096, 4096]
  5 lin_gelu_pool1d e_linear_gelu_pool1d.yaml    x 8192x1024 -> Linear(1024->4096, bias) -> gelu = g; two outputs:
                  max_pool1d(g, 4, 2, 1), avg_pool1d(g, 3, 2, 1, count_include_pad=False)   -> 2 x [8192, 2048]
  6 lin_zloss     f_linear_log_softmax_zloss.yaml x 4096x1024 -> Linear(1024->32000) = logits (an LM head); two
                  outputs: log_softmax(logits, -1), logsumexp(logits, -1) (z-loss)   -> [4096, 32000], [4096]
  7 conv_in_head  g_conv_instance_norm_head.yaml  x 32x64x28x28 -> Conv2d(64->256, k3, p1, bias) -> instance_norm ->
                  relu -> global average pool -> sigmoid (a classifier head)            -> [32, 256, 1, 1]

The PyTorch twin of each chain (Runner.twins) takes the same tensors, in the spec's argument order. The spec files
are written in fp32; mode bf16 runs the same text with `precision: bf16` (so every input is bf16 and the twin gets
the same bf16 tensors), tf32 with `precision: tf32` (PyTorch allow_tf32 on). --small: the first dim of x (rows /
images) becomes 64 / 2, in the spec text and the twin alike.

Modes (--modes): fp32 (default; cuBLAS/cuDNN allow_tf32 off), bf16 (default), tf32 and f16 may be named too.

Sides (--sides, comma-separated; default all three):
  eager    the twin in PyTorch eager
  compile  torch.compile(twin, dynamic=False) (mode default)
  fusejit  fusejit.compile(spec text): the heuristic config, autotune off; its kernel count is read from the plan
           (fusejit.emit(spec, "plan"); `fusejit emit --plan` through --fusejit-bin when the bridge cannot)

Measurement and checks reuse bench/bench_conv.py's Runner (bench/bench.py's time_fn: CUDA events, warm-up, an L2
flush before every trial, median ms; trials = --trials capped at about --max-side-s per side) and its tables.
Errors: rel L2 of every side against a float64 twin computed on the GPU from the same (rounded) inputs upcast, on
the first --ref-batch rows (linear chains, default 1024) or images (conv chain, default 4) of the batch; every
chain is independent per row / image, so the subset is exact. For several outputs the row shows the largest rel
L2 (the JSON has each). A rel L2 above fusejit's tolerance for the mode (fp32 1e-5, tf32 2e-3, bf16 2e-2,
f16 5e-3) is marked '!' and its check column says FAIL; the run goes on. Floor = max(anchor FLOPs / the mode's
torch.mm rate, bytes (inputs and outputs once) / copy bandwidth), both measured at the start of the run.
fj/side = fusejit ms / side ms (< 1: fusejit faster), with a geomean per mode.
Each side is wrapped: an exception (unsupported op, OOM, compile error) is recorded and the run goes on; a sticky
CUDA error stops it (results so far are written). --time-budget (default 500 s from process start) skips what is
left cleanly so that the gpu_check stage (timeout 560) ends with results.

Output: --out (default bench/results) gets bench_norm_<device>_<UTC date-time>[_tag].json (meta: device, driver,
torch, triton, CUDA, commit, command; ceilings; every side's row) and .md (the same, the compact table, geomeans,
every side), rewritten after every row; the compact table is printed last on stdout.

  python3 bench/bench_norm.py [--problems 1,conv_gn_pool,all] [--modes fp32,bf16] [--sides eager,compile,fusejit]
        [--small] [--ref-batch N] [--trials 100] [--max-side-s 1.5] [--time-budget 500] [--out DIR] [--tag T]
        [--commit C] [--dry-run] [--print-specs] [--spec-dir DIR] [--fusejit-bin PATH]

--dry-run (no torch, no GPU): parses every planned spec (each mode) through the Python bridge (fusejit.Spec),
checks its argument shapes against the twin's, prints each plan's kernels; without the bridge it runs
`fusejit validate` and `fusejit emit --plan` (--fusejit-bin, default $BUILD_DIR/fusejit or build/fusejit).
--print-specs prints the planned spec texts (--spec-dir DIR also writes them there) and exits.
"""
import argparse
import datetime
import json
import math
import os
import re
import shlex
import subprocess
import sys
import time
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import bench_conv as C  # noqa: E402  (no torch at import) Runner, tables; C.G = bench_gemm (fmt_*, TOL, ...)
from norm_problems import (MODES, PROBLEMS, anchor_flops, batch, build_plan, check_spec_args,  # noqa: E402
                           cli_plan, dry_run, input_shapes, output_shapes, plan_kernels, print_specs, row_label,
                           spec_file_name, spec_text)

G = C.G
T_START = C.T_START

DEFAULT_MODES = ["fp32", "bf16"]
SIDES = ["eager", "compile", "fusejit"]


# ---- output --------------------------------------------------------------------------


def compact_table(rows, sides):
    groups = C.groups_of(rows)
    present = [s for s in sides if any(s in g for g in groups.values())]
    tsides = [s for s in present if s != "fusejit"]
    has_fj = "fusejit" in present
    head = (["#", "problem", "mode", "GFLOP", "floor ms"] + [f"{s} ms" for s in present]
            + ([f"fj/{t}" for t in tsides] + ["fj x floor", "fj rel L2", "fj check", "fj kernels"]
               if has_fj else [])
            + [f"{t} rel L2" for t in tsides])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for (prob, mode), g in groups.items():
        any_row = next(iter(g.values()))
        cells = [str(any_row.get("index", "")), prob, mode,
                 f"{any_row['gflop']:.1f}" if any_row.get("gflop") else "", G.fmt_ms(any_row.get("floor_ms"))]
        cells += [C.short(g.get(s)) for s in present]
        if has_fj:
            rf = g.get("fusejit") or {}
            cells += C.ratio_cells(g, tsides)
            cells.append(f"{rf['median_ms'] / rf['floor_ms']:.2f}"
                         if rf.get("median_ms") and rf.get("floor_ms") else "")
            cells.append(G.fmt_err(rf) if rf.get("rel_l2") is not None else "")
            cells.append(rf.get("check", ""))
            ks = rf.get("kernels") or []
            cells.append(f"{len(ks)}: {' + '.join(ks)}" if ks else "")
        for t in tsides:
            r = g.get(t) or {}
            cells.append(G.fmt_err(r) if r.get("rel_l2") is not None else "")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def write_results(stem, meta, ceil, rows, sides, final=False):
    compact = compact_table(rows, sides)
    geo = C.geomean_table(rows, sides)
    legend = (f"Median ms (up to {meta['trials']} trials, at most ~{meta['max_side_s']} s per side, L2 flushed before "
              f"each; CUDA events). eager = the PyTorch twin; compile = torch.compile(twin) mode default; fusejit = "
              f"heuristic config, autotune off. fj/side = fusejit ms / side ms (< 1: fusejit faster). GFLOP = the "
              f"anchor's FLOPs; floor = max(GFLOP / the mode's torch.mm rate, bytes (inputs, outputs once) / copy "
              f"bandwidth). rel L2 vs a float64 twin (GPU, same rounded inputs) on the first rows / images of the "
              f"batch (ref_batch in the JSON), the largest over the outputs; '!' and check FAIL = above fusejit's "
              f"tolerance for the mode (fp32 1e-5, tf32 2e-3, bf16 2e-2, f16 5e-3). fj kernels: the count and names "
              f"of the kernels of fusejit's plan.")
    problems = "Problems: " + "; ".join(f"{i} {P['name']} ({P['spec']}) = {P['formula']}"
                                        for i, P in enumerate(PROBLEMS, 1)) + "."
    C.write_report(stem, meta, ceil, rows, "fusejit norm / reduction chains vs PyTorch", legend, problems, compact, geo,
                   final)
    return compact, geo


# ---- the GPU run ---------------------------------------------------------------------


class Runner(C.Runner):
    """bench_conv's Runner (torch, fusejit loading, over_budget, alive, measure) with tuple outputs."""

    def __init__(self, a, sides):
        super().__init__(a, sides)
        torch, F = self.torch, self.F

        def lin_gn_swish(x, w, b, gamma, beta):
            return F.silu(F.group_norm(F.linear(x, w, b), 32, gamma, beta, 1e-5))

        def conv_gn_pool(x, w, b, gamma, beta):
            return F.max_pool2d(F.group_norm(F.conv2d(x, w, b, 1, 1), 32, gamma, beta, 1e-5), 2)

        def lin_sum_max_lse(x, w, b):
            h = F.linear(x, w, b)
            return h.sum(-1, keepdim=True), h.amax(-1, keepdim=True), torch.logsumexp(h, -1, keepdim=True)

        def lin_manual_ln(x, w, b, gamma, beta):
            h = F.linear(x, w, b)
            c = h - h.mean(-1, keepdim=True)
            return c * torch.rsqrt((c * c).mean(-1, keepdim=True) + 1e-5) * gamma + beta

        def lin_gelu_pool1d(x, w, b):
            g = F.gelu(F.linear(x, w, b)).unsqueeze(1)  # [M, 1, N]: pools along N
            return (F.max_pool1d(g, 4, 2, 1).squeeze(1),
                    F.avg_pool1d(g, 3, 2, 1, count_include_pad=False).squeeze(1))

        def lin_zloss(x, w):
            logits = F.linear(x, w)
            return F.log_softmax(logits, -1), torch.logsumexp(logits, -1)

        def conv_in_head(x, w, b):
            c = F.instance_norm(F.conv2d(x, w, b, 1, 1), eps=1e-5)
            return torch.sigmoid(F.adaptive_avg_pool2d(F.relu(c), 1))

        self.twins = {"lin_gn_swish": lin_gn_swish, "conv_gn_pool": conv_gn_pool,
                      "lin_sum_max_lse": lin_sum_max_lse, "lin_manual_ln": lin_manual_ln,
                      "lin_gelu_pool1d": lin_gelu_pool1d, "lin_zloss": lin_zloss, "conv_in_head": conv_in_head}

    @staticmethod
    def as_tuple(out):
        return tuple(out) if isinstance(out, (tuple, list)) else (out,)

    def side(self, base, name, build, refs, shapes):
        """One side of one row: build, check the first R rows / images of every output, time."""
        torch = self.torch
        row = {**base, "side": name}
        if self.over_budget():
            row["skipped"] = f"time budget ({self.a.time_budget:.0f} s) spent"
            self.rows.append(row)
            print(f"  {name:8s} skipped (time budget)", flush=True)
            return
        try:
            t0 = time.time()
            fn, info = build()
            row.update(info)
            t1 = time.time()
            outs = self.as_tuple(fn())
            torch.cuda.synchronize()
            if name == "compile":
                row["compile_s"] = round(time.time() - t0, 2)  # tracing + codegen + first run
            elif "compile_s" not in row:
                row["first_call_s"] = round(time.time() - t1, 3)
            got = [tuple(o.shape) for o in outs]
            if got != [tuple(s) for s in shapes]:
                raise RuntimeError(f"output shapes {got} != expected {[tuple(s) for s in shapes]}")
            errs = [self.B.rel_err(o[:ref.shape[0]], ref) for o, ref in zip(outs, refs)]
            row["out_dtype"] = str(outs[0].dtype).replace("torch.", "")
            del outs
            t = self.measure(fn)
            row.update(t)
            row["rel_l2"] = max(e[0] for e in errs)
            row["max_abs"] = max(e[1] for e in errs)
            if len(errs) > 1:
                row["rel_l2_each"] = [e[0] for e in errs]
            row["check"] = "ok" if row["rel_l2"] <= G.TOL[base["mode"]] else "FAIL"
            row["tflops"] = base["gflop"] / t["median_ms"]  # GFLOP / ms = TFLOP/s
            print(f"  {name:8s} median {t['median_ms']:9.4f} ms  {row['tflops']:7.1f} TFLOP/s  "
                  f"rel_l2 {row['rel_l2']:.2e} {row['check']}  ({t['trials']} trials)"
                  + (f"  {len(row['kernels'])} kernel(s): {' + '.join(row['kernels'])}"
                     if row.get("kernels") else ""), flush=True)
        except Exception as e:
            msg = f"{type(e).__name__}: {e}".strip()
            row["error"] = msg[:2000]
            print(f"  {name:8s} ERROR {msg.splitlines()[0][:300] if msg else ''}", flush=True)
            if not self.alive():
                row["error"] += f" [{self.dead}]"
        self.rows.append(row)
        try:
            torch.cuda.empty_cache()
        except Exception:
            pass

    def fusejit_build(self, P, mode, args):
        def build():
            if self.fj is None:
                raise RuntimeError(self.fj_error or "fusejit not loaded")
            text = spec_text(P, mode, self.a.small)
            spec = self.fj.Spec(text, filename=spec_file_name(P, mode, self.a.small))
            check_spec_args(P, self.a.small, spec)
            t0 = time.time()
            k = self.fj.compile(spec)
            info = {"compile_s": round(time.time() - t0, 3), "kernel": k.name}
            try:
                plan = self.fj.emit(spec, "plan", arch=k.arch)
            except Exception as e:  # the CLI, else names are missing (informative only)
                try:
                    _, plan = cli_plan(self.a, text, spec_file_name(P, mode, self.a.small))
                except Exception as e2:
                    plan = ""
                    info["note"] = (f"plan unavailable: {type(e).__name__}: {str(e)[:150]}; "
                                    f"CLI: {type(e2).__name__}: {str(e2)[:150]}")
            if plan:
                info["kernels"] = plan_kernels(plan)
                info["kernel_count"] = len(info["kernels"])
                info["plan_notes"] = [n.strip()[len("note: "):] for n in re.findall(r"^\s*note: .*$", plan, re.M)]
            return (lambda: k(*args)), info
        return build

    def make_inputs(self, P, dt):
        """The spec's inputs with its init kinds (docs/spec.md), seeded per problem: the same in every mode."""
        torch = self.torch
        gen = torch.Generator(device="cuda")
        gen.manual_seed(zlib.crc32(P["name"].encode()))
        bound = 1.0 / P["fan_in"] ** 0.5
        args = []
        for name, shape, init in input_shapes(P, self.a.small):
            if init == "uniform01":
                t = torch.rand(*shape, device="cuda", generator=gen)
            elif init in ("torch_weight", "torch_bias"):
                t = (torch.rand(*shape, device="cuda", generator=gen) * 2 - 1) * bound
            else:  # normal
                t = torch.randn(*shape, device="cuda", generator=gen)
            args.append(t.to(dt))
        return args

    def run_row(self, index, P, mode, ceil):
        torch, B = self.torch, self.B
        small = self.a.small
        dt = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}[MODES[mode][1]]
        B.set_mode(mode)  # allow_tf32 only in tf32
        args = self.make_inputs(P, dt)
        n = batch(P, small)
        R = min(self.a.ref_batch or P["ref"], n)
        twin = self.twins[P["name"]]
        with torch.no_grad():
            refs = self.as_tuple(twin(args[0][:R].double(), *[t.double() for t in args[1:]]))
        oshapes = [s for _, s in output_shapes(P, small)]
        elem = C.ELEM_BYTES[MODES[mode][1]]
        nbytes = elem * (sum(t.numel() for t in args) + sum(math.prod(s) for s in oshapes))
        flops = anchor_flops(P, small)
        rate = ceil.get(f"cublas_{mode}_TFLOPs") or ceil["cublas_bf16_TFLOPs"]
        floor = max(flops / (rate * 1e12), nbytes / (ceil["copy_TBps"] * 1e12)) * 1e3
        base = {"index": index, "problem": P["name"], "label": row_label(P, small), "mode": mode,
                "spec": os.path.join("bench", "specs_norm", P["spec"]), "chain": P["formula"],
                "input_shapes": [list(t.shape) for t in args], "out_shapes": [list(s) for s in oshapes],
                "gflop": flops / 1e9, "mbytes": nbytes / 1e6, "floor_ms": floor, "ref_batch": R}
        print(f"{index} {row_label(P, small)} {P['formula']} {mode}: {flops / 1e9:.1f} GFLOP, floor {floor:.4f} ms "
              f"[{time.time() - T_START:.0f} s]", flush=True)
        with torch.no_grad():
            for side in self.sides:
                if self.dead:
                    break
                if side == "eager":
                    build = lambda: ((lambda: twin(*args)), {})
                elif side == "compile":
                    def build():
                        torch._dynamo.reset()
                        cf = torch.compile(twin, mode="default", dynamic=False)
                        return (lambda: cf(*args)), {"compile_mode": "default"}
                else:
                    build = self.fusejit_build(P, mode, args)
                self.side(base, side, build, refs, oshapes)
        torch._dynamo.reset()


def run(a, plan, sides):
    try:
        import importlib
        importlib.import_module("torch")
    except ImportError as e:
        print(f"bench_norm: the benchmark needs PyTorch ({e}); --dry-run and --print-specs work without it",
              file=sys.stderr)
        return 2
    R = Runner(a, sides)
    torch, B = R.torch, R.B
    if not torch.cuda.is_available():
        print("bench_norm: no CUDA device (--dry-run checks the specs without one)", file=sys.stderr)
        return 2
    try:
        import triton
        triton_version = triton.__version__
    except Exception:
        triton_version = "?"
    now = datetime.datetime.now(datetime.timezone.utc)
    device = torch.cuda.get_device_name()
    argv0 = os.path.relpath(sys.argv[0], ROOT) if os.path.isabs(sys.argv[0]) else sys.argv[0]
    meta = {"device": device, "torch": torch.__version__, "cudnn": torch.backends.cudnn.version(),
            "triton": triton_version, "cuda": torch.version.cuda, "date": now.isoformat(),
            "commit": a.commit or B.git_commit(), "small": a.small, "trials": a.trials,
            "max_side_s": a.max_side_s, "sides": sides, "ref_batch": a.ref_batch or "per problem",
            "cudnn_benchmark": bool(torch.backends.cudnn.benchmark), "argv": sys.argv[1:],
            "command": "python3 " + " ".join(shlex.quote(v) for v in [argv0] + sys.argv[1:]),
            "time_budget_s": a.time_budget,
            "allow_bf16_reduced_precision_reduction": G.backend_flag(torch, "allow_bf16_reduced_precision_reduction"),
            "fusejit": R.fj.version() if R.fj else R.fj_error}
    try:
        meta["driver"] = subprocess.check_output(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"], text=True).strip().splitlines()[0]
    except Exception:
        meta["driver"] = "?"
    slug = re.sub(r"[^A-Za-z0-9]+", "_", device).strip("_")
    stem = os.path.join(a.out, f"bench_norm_{slug}_{now.strftime('%Y%m%d-%H%M%S')}" + (f"_{a.tag}" if a.tag else ""))
    print(f"{device}, torch {meta['torch']}, triton {triton_version}, CUDA {meta['cuda']}; {len(plan)} rows x "
          f"sides {','.join(sides)}", flush=True)

    torch.manual_seed(0)
    ceil = G.device_ceilings(R, {m for _, m in plan}, a.trials)  # copy_TBps, cublas_<mode>_TFLOPs
    print("ceilings:", json.dumps({k: round(v, 2) for k, v in ceil.items()}), flush=True)

    for P, mode in plan:
        index = PROBLEMS.index(P) + 1
        if R.dead:
            break
        if R.over_budget():
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
          + " TFLOP/s; fj/side < 1: fusejit faster; ! / FAIL = error above fusejit's tolerance\n")
    notes = C.error_notes(R.rows)
    if notes:
        print(notes + "\n")
    print(compact)
    if geo:
        print("\n" + geo)
    return 1 if R.dead else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="See the module docstring (head -55 bench/bench_norm.py) for details.")
    ap.add_argument("--problems", default="all", help="1-based indices, names or 'all' (comma-separated)")
    ap.add_argument("--modes", default=",".join(DEFAULT_MODES), help="fp32,bf16 (tf32, f16 also accepted)")
    ap.add_argument("--sides", default=",".join(SIDES), help=",".join(SIDES))
    ap.add_argument("--small", action="store_true", help="64 rows / 2 images (smoke test)")
    ap.add_argument("--ref-batch", type=int, default=0,
                    help="rows / images of the batch checked against fp64 (0: 1024 rows, 4 images)")
    ap.add_argument("--trials", type=int, default=100)
    ap.add_argument("--max-side-s", type=float, default=1.5, help="cap on one side's timing loop (seconds)")
    ap.add_argument("--time-budget", type=float, default=500.0,
                    help="seconds since start after which remaining sides/rows are skipped (0: none)")
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--tag", default="")
    ap.add_argument("--commit", default="", help="git commit to record (when the tree has no .git)")
    ap.add_argument("--dry-run", action="store_true",
                    help="parse the planned specs (bridge or CLI) and print their kernels; no torch, no GPU")
    ap.add_argument("--print-specs", action="store_true", help="print the planned spec texts and exit")
    ap.add_argument("--spec-dir", default=None, help="with --print-specs: also write them there")
    ap.add_argument("--fusejit-bin", default=None,
                    help="the fusejit CLI for --dry-run / plan fallback (default $BUILD_DIR/fusejit or build/fusejit)")
    a = ap.parse_args()
    if a.ref_batch < 0:
        raise SystemExit("--ref-batch must be >= 0")

    plan = build_plan(a)
    sides = [s for s in SIDES if s in G.parse_list(a.sides, SIDES, "sides")]
    if a.print_specs:
        print_specs(a, plan)
        return 0
    if a.dry_run:
        return dry_run(a, plan)
    return run(a, plan, sides)


if __name__ == "__main__":
    sys.exit(main())
