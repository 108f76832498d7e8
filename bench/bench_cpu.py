#!/usr/bin/env python3
"""fusejit's LLVM CPU backend vs PyTorch CPU eager, in one process, on the same inputs.

Problems (specs in bench/specs_cpu/, fp32):
  a linear  x 512x2048,  W 2048x2048: relu(x W^T + bias[2048])                  (seed 2's chain)
  b conv    x 8x64x64x64, 64->128 k3 (+cb): relu(c) + bias[128,1,1]               (seed 1's chain)
  c conv    x 8x8x128x128, 8->64 k3 (+cb): maxpool4(tanh(c) * 2 + bias[64,1,1])   (seed 3's chain)
  d linear  x 256x1024,  W 4096x1024 (+b): logsumexp over each row

Threads: T = $FUSEJIT_NUM_THREADS, else os.cpu_count(); torch.set_num_threads(T) and fusejit's pool
(FUSEJIT_NUM_THREADS=T, set before the library loads) use the same count.
Timing: time.perf_counter around each call (both are synchronous on the CPU); --rounds (2) rounds of
alternating blocks (torch, fusejit, torch, fusejit), each after a 0.5 s pause and --warmup calls, of
--trials calls (fewer, at least 3, when a side's block would take more than --max-side-s / 2); the
median over all rounds per side, and each round's ratio (reported as a min-max range). (Blocks, not single interleaved calls: torch's OpenMP / OpenBLAS
threads spin after each call and would slow whatever runs next.)
ratio = torch ms / fusejit ms (> 1: fusejit faster). Convs (b, c) are also timed in torch on channels_last
copies of x and the weight (made outside the timing; same values, checked against NCHW): torch 1.13's NCHW
conv takes a much slower path on this machine, so the channels_last ratio is the one to hold fusejit to.
Compile: a fresh FUSEJIT_CACHE_DIR (a temp dir) so the first compile of each chain is cold (codegen +
LLVM O3 + JIT link); "disk hit" = the same spec in a new engine (object file from the disk cache, JIT
link); "memory hit" = the same engine again. All three time fusejit.compile on a pre-parsed Spec
(the YAML parse is not included); hits are the median of 5. Targets: cold <= 300 ms, hit <= 5 ms.
Check: rel L2 of fusejit's output against torch's fp32 output (pass: <= 1e-5) and, for information,
against torch in float64 on the same inputs.
Machine: lscpu's model name, CPU count, the AVX-512 flags; the measured FMA peak from the
cpu_fma_peak binary (bench/cpu_fma_peak.cpp, built by CMake) and torch.mm 4096^3 GFLOP/s; the load
average before and after.

Output: --out (default bench/results) gets bench_cpu_<machine>_<UTC date-time>.json and .md.

  python3 bench/bench_cpu.py [--build build] [--problems a,b,c,d] [--trials 20] [--warmup 3]
        [--max-side-s 3] [--rounds 2] [--out DIR]
"""
import argparse
import datetime
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SPECS = os.path.join(HERE, "specs_cpu")

PROBLEMS = {
    "a": dict(spec="a_linear_bias_relu.yaml", what="linear 512x2048x2048 + bias + relu",
              flops=2 * 512 * 2048 * 2048),
    "b": dict(spec="b_conv_relu_bias.yaml", what="conv 8x64x64x64 -> 128 k3, relu, + bias[C]",
              flops=2 * 8 * 128 * 62 * 62 * 64 * 9),
    "c": dict(spec="c_conv_tanh_scale_bias_maxpool.yaml",
              what="conv 8x8x128x128 -> 64 k3, tanh, *2, + bias[C], maxpool4",
              flops=2 * 8 * 64 * 126 * 126 * 8 * 9),
    "d": dict(spec="d_linear_logsumexp.yaml", what="linear 256x1024x4096 + row logsumexp",
              flops=2 * 256 * 4096 * 1024),
}


def torch_chain(name, F, torch):
    return {
        "a": lambda x, w, bias: torch.relu(F.linear(x, w) + bias),
        "b": lambda x, w, cb, bias: torch.relu(F.conv2d(x, w, cb)) + bias,
        "c": lambda x, w, cb, bias: F.max_pool2d(torch.tanh(F.conv2d(x, w, cb)) * 2.0 + bias, 4),
        "d": lambda x, w, b: torch.logsumexp(F.linear(x, w, b), 1),
    }[name]


def make_inputs(spec, torch, seed):
    """x: U[0,1); weights U(+-1/sqrt(fan_in)) and conv/linear biases likewise (PyTorch's init);
    the extra 'bias': N(0,1)."""
    g = torch.Generator().manual_seed(seed)
    w_shape = spec.inputs[1].shape
    fan_in = 1
    for d in w_shape[1:]:
        fan_in *= d
    bound = fan_in ** -0.5
    out = []
    for i, a in enumerate(spec.inputs):
        if i == 0:
            t = torch.rand(a.shape, generator=g)
        elif a.name == "bias":
            t = torch.randn(a.shape, generator=g)
        else:
            t = (torch.rand(a.shape, generator=g) * 2 - 1) * bound
        out.append(t.contiguous())
    return out


def time_calls(fn, warmup, trials, max_side_s):
    for _ in range(warmup):
        fn()
    ms = []
    start = time.perf_counter()
    while len(ms) < trials and (len(ms) < 5 or time.perf_counter() - start < max_side_s):
        t0 = time.perf_counter()
        fn()
        ms.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ms), len(ms)


def time_pair(fa, fb, warmup, trials, max_s, rounds=2, pause_s=0.5):
    """Median ms of fa and of fb over `rounds` alternating blocks (a-block, b-block, a-block, ...),
    each warmed up and preceded by a pause, and the ratio a/b of each round's medians. Blocks rather
    than single interleaved calls: torch's OpenMP and OpenBLAS worker threads spin for a while after
    each call and would slow the other side; alternating blocks still let both sides see the same
    drift of a shared machine's load."""
    ta, tb, ratios = [], [], []
    for _ in range(rounds):
        medians = []
        for fn, out in ((fa, ta), (fb, tb)):
            time.sleep(pause_s)
            for _ in range(warmup):
                fn()
            start, n, block = time.perf_counter(), 0, []
            while n < trials and (n < 3 or time.perf_counter() - start < max_s / rounds):
                t0 = time.perf_counter()
                fn()
                block.append((time.perf_counter() - t0) * 1e3)
                n += 1
            out.extend(block)
            medians.append(statistics.median(block))
        ratios.append(medians[0] / medians[1])
    return statistics.median(ta), statistics.median(tb), [len(ta), len(tb)], ratios


def rel_l2(a, b):
    a, b = a.double(), b.double()
    return ((a - b).norm() / b.norm()).item()


def machine_info():
    info = {"model": "unknown", "cpus": os.cpu_count(), "avx512": []}
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        m = re.search(r"^Model name:\s*(.+)$", out, re.M)
        info["model"] = m.group(1).strip() if m else "unknown"
    except (OSError, subprocess.CalledProcessError):
        pass
    try:
        flags = open("/proc/cpuinfo").read()
        info["avx512"] = sorted(set(re.findall(r"\bavx512\w*", flags)))
        info["fma"] = " fma " in flags
    except OSError:
        pass
    return info


def fma_peak(build):
    exe = os.path.join(build, "cpu_fma_peak")
    if not os.access(exe, os.X_OK):
        return {"error": f"{exe} not built (ninja -C {build} cpu_fma_peak)"}
    out = subprocess.run([exe], capture_output=True, text=True, timeout=120)
    try:
        return json.loads(out.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"error": f"cpu_fma_peak: {out.stdout!r} {out.stderr!r}"}


def torch_mm_gflops(torch, n=4096):
    a, b = torch.rand(n, n), torch.rand(n, n)
    t0 = time.perf_counter()
    torch.mm(a, b)
    first = time.perf_counter() - t0
    if first > 2:  # a slow BLAS (Debian's reference libblas): one call says enough
        return 2 * n ** 3 / (first * 1e9)
    ms, _ = time_calls(lambda: torch.mm(a, b), 0, 5, 10)
    return 2 * n ** 3 / (ms * 1e6)


def loaded_blas():
    """The BLAS library this process mapped (torch's linear goes through it; Debian's default
    libblas.so.3 is the reference BLAS, LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-pthread
    picks OpenBLAS)."""
    try:
        libs = {line.split()[-1] for line in open("/proc/self/maps") if "blas" in line.lower()}
    except OSError:
        return "unknown"
    return ", ".join(sorted(os.path.realpath(p) for p in libs if p.startswith("/"))) or "none"


def commit():
    try:
        head = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain"], capture_output=True,
                               text=True).stdout.strip()
        return head + ("+uncommitted" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def compile_times(fusejit, spec):
    """(cold ms, disk-hit ms, memory-hit ms, kernel) for a pre-parsed Spec."""
    from fusejit import _kernel, _lib
    from ctypes import byref, c_void_p
    t0 = time.perf_counter()
    kernel = fusejit.compile(spec, device="cpu")
    cold = (time.perf_counter() - t0) * 1e3
    mem = []
    for _ in range(5):
        t0 = time.perf_counter()
        fusejit.compile(spec, device="cpu")
        mem.append((time.perf_counter() - t0) * 1e3)
    L = _lib.lib()
    options = _kernel._Options(backend="cpu")
    disk = []
    for _ in range(5):  # a new engine each time: its memory cache is empty, the disk cache is not
        engine, handle = c_void_p(), c_void_p()
        _lib.check(L.fj_engine_create(byref(engine)))
        t0 = time.perf_counter()
        status = L.fj_engine_compile(engine, spec._handle, options._handle, byref(handle))
        disk.append((time.perf_counter() - t0) * 1e3)
        L.fj_kernel_destroy(handle)
        L.fj_engine_destroy(engine)
        _lib.check(status)
    return cold, statistics.median(disk), statistics.median(mem), kernel


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--problems", default="a,b,c,d")
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=2,
                    help="alternating rounds per pair (their per-round ratios are reported)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--max-side-s", type=float, default=3.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--tag", default="", help="appended to the result file names")
    args = ap.parse_args()
    names = [p.strip() for p in args.problems.split(",") if p.strip()]
    for n in names:
        if n not in PROBLEMS:
            ap.error(f"--problems: unknown '{n}' (a, b, c, d)")

    threads = int(os.environ.get("FUSEJIT_NUM_THREADS") or os.cpu_count() or 1)
    os.environ["FUSEJIT_NUM_THREADS"] = str(threads)  # before the library (and its pool) starts
    os.environ.setdefault("OPENBLAS_NUM_THREADS", str(threads))  # when torch's BLAS is OpenBLAS
    cache_dir = tempfile.mkdtemp(prefix="fusejit_bench_cpu_cache_")
    os.environ["FUSEJIT_CACHE_DIR"] = cache_dir  # empty: the first compile is cold
    os.environ.setdefault("FUSEJIT_LIB", os.path.join(args.build, "capi", "libfusejit_c.so"))
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import torch
    import torch.nn.functional as F
    import fusejit

    if not fusejit.backend_available("cpu"):
        sys.exit(f"bench_cpu: {os.environ['FUSEJIT_LIB']} has no CPU backend (built without LLVM)")
    torch.set_num_threads(threads)
    load_before = os.getloadavg()
    machine = machine_info()
    peak = fma_peak(args.build)
    mm = torch_mm_gflops(torch)
    blas = loaded_blas()
    print(f"{machine['model']}, {machine['cpus']} CPUs, {threads} threads; FMA peak {peak}; "
          f"torch.mm 4096^3 {mm:.1f} GFLOP/s (BLAS {blas}); load {load_before}", flush=True)

    rows = []
    for n in names:
        P = PROBLEMS[n]
        spec = fusejit.Spec(os.path.join(SPECS, P["spec"]))
        cold, disk_hit, mem_hit, kernel = compile_times(fusejit, spec)
        inputs = make_inputs(spec, torch, args.seed)
        chain = torch_chain(n, F, torch)
        with torch.no_grad():
            ref32 = chain(*inputs)
            ref64 = chain(*[t.double() for t in inputs])
            y = kernel(*inputs)
            torch_ms, fj_ms, trials, ratios = time_pair(lambda: chain(*inputs), lambda: kernel(*inputs),
                                                        args.warmup, args.trials, args.max_side_s, args.rounds)
            # Convs: torch also on channels_last copies of the 4-D inputs (converted outside the timing): on
            # this build its NCHW conv can be 8x slower than channels_last, so both are reported.
            torch_cl_ms = None
            if any(t.dim() == 4 for t in inputs):
                cl = [t.contiguous(memory_format=torch.channels_last) if t.dim() == 4 else t for t in inputs]
                if rel_l2(chain(*cl), ref32) > 1e-5:
                    raise RuntimeError(f"{n}: torch channels_last disagrees with NCHW")
                torch_cl_ms, _, _, cl_ratios = time_pair(lambda: chain(*cl), lambda: kernel(*inputs), args.warmup,
                                                         args.trials, args.max_side_s, args.rounds)
                if torch_cl_ms < torch_ms:  # the best torch layout is the peer
                    ratios = cl_ratios
        err32, err64, err_torch64 = rel_l2(y, ref32), rel_l2(y, ref64), rel_l2(ref32, ref64)
        row = dict(problem=n, what=P["what"], spec=f"bench/specs_cpu/{P['spec']}", kernel=kernel.name,
                   gflop=P["flops"] / 1e9, torch_ms=torch_ms, fusejit_ms=fj_ms, ratio=torch_ms / fj_ms,
                   torch_channels_last_ms=torch_cl_ms,
                   ratio_channels_last=torch_cl_ms / fj_ms if torch_cl_ms else None,
                   torch_gflops=P["flops"] / (torch_ms * 1e6), fusejit_gflops=P["flops"] / (fj_ms * 1e6),
                   trials=trials, rel_l2_vs_torch=err32, rel_l2_vs_fp64=err64,
                   torch_rel_l2_vs_fp64=err_torch64, check="ok" if err32 <= 1e-5 else "FAIL",
                   compile_cold_ms=cold, compile_disk_hit_ms=disk_hit, compile_memory_hit_ms=mem_hit,
                   best_torch_ratio_rounds=ratios)
        rows.append(row)
        if torch_cl_ms:
            print(f"{n}: torch channels_last {torch_cl_ms:.3f} ms, ratio {row['ratio_channels_last']:.2f}")
        print(f"{n}: torch {torch_ms:.3f} ms, fusejit {fj_ms:.3f} ms, ratio {row['ratio']:.2f}, "
              f"rel L2 {err32:.1e} ({row['check']}), compile cold {cold:.0f} ms, hits {disk_hit:.2f} / "
              f"{mem_hit:.3f} ms", flush=True)

    load_after = os.getloadavg()
    now = datetime.datetime.now(datetime.timezone.utc)
    meta = dict(machine=machine, threads=threads, rounds=args.rounds, fma_peak=peak, torch_mm_4096_gflops=mm, blas=blas,
                torch=torch.__version__, fusejit=fusejit.version(), commit=commit(),
                command="python3 bench/bench_cpu.py " + " ".join(shlex.quote(a) for a in sys.argv[1:]),
                date=now.isoformat(), load_before=load_before, load_after=load_after,
                cache_dir=cache_dir)
    tag = re.sub(r"[^A-Za-z0-9]+", "_", machine["model"]).strip("_") or "cpu"
    base = os.path.join(args.out, f"bench_cpu_{tag}_{now.strftime('%Y%m%d-%H%M%S')}"
                        + (f"_{args.tag}" if args.tag else ""))
    os.makedirs(args.out, exist_ok=True)
    with open(base + ".json", "w") as f:
        json.dump(dict(meta=meta, rows=rows), f, indent=1)
    with open(base + ".md", "w") as f:
        f.write(markdown(meta, rows))
    print(table(rows))
    print(f"wrote {base}.md and .json")
    return 0 if all(r["check"] == "ok" for r in rows) else 1


def rounds_range(r):
    ratios = r.get("best_torch_ratio_rounds") or []
    return f"{min(ratios):.2f}-{max(ratios):.2f} ({len(ratios)})" if ratios else "-"


def table(rows):
    lines = ["| # | chain | GFLOP | torch ms | torch channels_last ms | fusejit ms | torch/fusejit "
             "| torch channels_last/fusejit | torch GFLOP/s | fusejit GFLOP/s "
             "| best torch/fusejit per round (min-max) "
             "| rel L2 vs torch | vs fp64 | cold compile ms | disk hit ms | memory hit ms | trials | fusejit kernel |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        cl = r.get("torch_channels_last_ms")
        cl_ms, cl_ratio = (f"{cl:.3f}", f"{r['ratio_channels_last']:.2f}") if cl else ("-", "-")
        lines.append(f"| {r['problem']} | {r['what']} | {r['gflop']:.2f} | {r['torch_ms']:.3f} | {cl_ms} | "
                     f"{r['fusejit_ms']:.3f} | {r['ratio']:.2f} | {cl_ratio} | {r['torch_gflops']:.1f} | "
                     f"{r['fusejit_gflops']:.1f} | {rounds_range(r)} | {r['rel_l2_vs_torch']:.1e} {r['check']} | "
                     f"{r['rel_l2_vs_fp64']:.1e} | {r['compile_cold_ms']:.0f} | "
                     f"{r['compile_disk_hit_ms']:.2f} | {r['compile_memory_hit_ms']:.3f} | {r['trials'][0]}+{r['trials'][1]} | "
                     f"{r['kernel']} |")
    return "\n".join(lines) + "\n"


def markdown(meta, rows):
    m, peak = meta["machine"], meta["fma_peak"]
    peak_s = (f"{peak['gflops']:.1f} GFLOP/s on {peak['threads']} threads ({peak['gflops_1thread']:.1f} on one, "
              f"{peak['vector_bits']}-bit FMAs; bench/cpu_fma_peak.cpp)") if "gflops" in peak else peak["error"]
    return f"""# fusejit CPU backend vs PyTorch CPU eager — {m['model']}

- machine: {m['model']}, {m['cpus']} CPUs; AVX-512: {', '.join(m['avx512']) or 'none'}
- threads: {meta['threads']} (torch.set_num_threads and FUSEJIT_NUM_THREADS)
- measured fp32 FMA peak: {peak_s}; torch.mm 4096^3: {meta['torch_mm_4096_gflops']:.1f} GFLOP/s
- torch's BLAS (mapped in the process): {meta['blas']}
- torch {meta['torch']}; fusejit {meta['fusejit']}; commit {meta['commit']}
- command: `{meta['command']}`
- date: {meta['date']}; load average (1, 5, 15 min) before {tuple(round(x, 2) for x in meta['load_before'])}, \
after {tuple(round(x, 2) for x in meta['load_after'])} (the machine is shared: other jobs skew the times)

Median ms over {meta['rounds']} rounds of alternating blocks (torch, fusejit, torch, fusejit, ...; each block after a 0.5 s
pause and warm-up, up to the given trials; the per-round column: the ratio of each round's two medians, against
the faster torch layout; time.perf_counter; both sides synchronous, same fp32 inputs; both allocate their outputs: fusejit's time includes the Python bridge's argument checks).
torch/fusejit > 1: fusejit faster. rel L2: fusejit's output against torch's fp32 output (ok: <= 1e-5) and against torch in
float64. Compile: cold = empty disk cache, new engine (codegen + LLVM O3 + JIT link); disk hit = a new
engine, object file from the disk cache; memory hit = the same engine (targets: cold <= 300 ms,
hit <= 5 ms); all on a pre-parsed spec.

{table(rows)}"""


if __name__ == "__main__":
    sys.exit(main())
