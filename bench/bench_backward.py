#!/usr/bin/env python3
"""Forward + backward of a linear chain: fusejit (fusejit.nn.Fused: the forward
kernel and the generated backward stages) against PyTorch eager and
torch.compile, in one process on the same inputs (docs/backward.md).

    FUSEJIT_LIB=build/capi/libfusejit_c.so python3 bench/bench_backward.py \\
        --shapes 1024x8192x8192 --modes fp32,tf32,bf16 --out bench/results

One step = forward, loss = sum(y * g), backward (grads of x, W and the bias);
CUDA events around each step, L2 flushed before it (a 256 MiB write), warm-up
first, the median of --iters steps. Gradients are checked against float64
autograd first (relative L2, printed). Writes a Markdown table.
"""
import argparse
import datetime
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

import torch  # noqa: E402

import fusejit  # noqa: E402

F = torch.nn.functional
DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16}


def spec(m, k, n, mode):
    return f"""\
name: bench_bw_{m}x{k}x{n}_{mode}
precision: {mode}
inputs:
  - {{name: x, shape: [{m}, {k}]}}
  - {{name: w, shape: [{n}, {k}]}}
  - {{name: bias, shape: [{n}], init: normal}}
ops:
  - {{name: gemm, op: linear, args: [x, w]}}
  - {{name: biased, op: add, args: [gemm, bias]}}
  - {{name: y, op: relu, args: [biased]}}
outputs: [y]
"""


def torch_chain(x, w, bias):
    return torch.relu(F.linear(x, w) + bias)


def step_times(step, n, flush):
    """ms of each of n steps: CUDA events around the step, the L2 flushed before it."""
    times = []
    for _ in range(n):
        flush.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        step()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return times


def time_steps(step, iters, warmup, flush):
    for _ in range(warmup):
        step()
    return statistics.median(step_times(step, iters, flush))


def time_sides(steps, iters, warmup, flush, rounds=1):
    """The median ms a step of each side (steps: name -> step function), and each round's medians. With
    rounds > 1 the sides take turns, iters // rounds steps a turn, round r starting at side r: a host whose
    speed drifts during the run weighs on every side alike."""
    for step in steps.values():
        for _ in range(warmup):
            step()
    names = list(steps)
    per_turn = max(1, iters // rounds)
    times = {name: [] for name in names}
    by_round = []
    for r in range(rounds):
        medians = {}
        for name in names[r % len(names):] + names[:r % len(names)]:
            t = step_times(steps[name], per_turn, flush)
            times[name] += t
            medians[name] = statistics.median(t)
        by_round.append(medians)
    return {name: statistics.median(t) for name, t in times.items()}, by_round


def time_training_steps(row, sides, fns, params, gy, a, flush):
    """Times a step (forward fns[side](), sum(y * gy), backward of params[side]) of each side (time_sides with
    a.iters, a.warmup, a.rounds) into row: each side's median ms and row["rounds"]."""
    def step(side):
        for t in params[side]:
            t.grad = None
        (fns[side]() * gy).sum().backward()
    medians, row["rounds"] = time_sides({s: (lambda s=s: step(s)) for s in sides}, a.iters, a.warmup, flush, a.rounds)
    row.update(medians)


def chain_tensors(m, k, n, dtype, dev):
    """Seeded x [m, k], w [n, k], bias [n] (requiring grad) and a gradient gy [m, n] for the linear chain."""
    g = torch.Generator(device="cpu").manual_seed(0)
    x = torch.rand(m, k, generator=g).to(dev, dtype).requires_grad_()
    w = (torch.randn(n, k, generator=g) / k ** 0.5).to(dev, dtype).requires_grad_()
    bias = torch.randn(n, generator=g).to(dev, dtype).requires_grad_()
    return x, w, bias, torch.randn(m, n, generator=g).to(dev, dtype)


def round_spread(by_round, peer, side="fusejit"):
    """'min-max' of peer / side over the rounds ('' with one round or a side missing)."""
    ratios = [r[peer] / r[side] for r in by_round if peer in r and side in r]
    return f"{min(ratios):.2f}-{max(ratios):.2f}" if len(ratios) > 1 else ""


def rel_l2(a, b):
    a, b = a.double(), b.double()
    return ((a - b).norm() / b.norm()).item()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shapes", default="1024x8192x8192", help="MxKxN,...")
    ap.add_argument("--modes", default="fp32,tf32,bf16")
    ap.add_argument("--sides", default="eager,compile,fusejit")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=4, help="the sides take turns this many times (time_sides)")
    ap.add_argument("--out", default=None, help="directory for the Markdown results")
    ap.add_argument("--tag", default="backward")
    a = ap.parse_args()
    dev = torch.device("cuda")
    flush = torch.empty(256 << 20, dtype=torch.uint8, device=dev)
    sides = a.sides.split(",")
    rows = []
    for shape in a.shapes.split(","):
        m, k, n = (int(v) for v in shape.split("x"))
        for mode in a.modes.split(","):
            torch.backends.cuda.matmul.allow_tf32 = mode == "tf32"
            dtype = DTYPES[mode]
            x, w, bias, gy = chain_tensors(m, k, n, dtype, dev)
            block = fusejit.nn.Fused(spec(m, k, n, mode), w=w.detach().clone(), bias=bias.detach().clone())
            compiled = torch.compile(torch_chain, mode="max-autotune-no-cudagraphs")
            fns = {"eager": lambda: torch_chain(x, w, bias), "compile": lambda: compiled(x, w, bias),
                   "fusejit": lambda: block(x)}
            params = {"eager": [x, w, bias], "compile": [x, w, bias], "fusejit": [x, block.w, block.bias]}
            # correctness first: fusejit's gradients against float64 autograd
            x64, w64, b64 = (t.detach().double().requires_grad_() for t in (x, w, bias))
            (torch_chain(x64, w64, b64) * gy.double()).sum().backward()
            for t in params["fusejit"]:
                t.grad = None
            (block(x) * gy).sum().backward()
            errs = {nm: rel_l2(t.grad, r.grad) for nm, t, r in zip(("x", "w", "bias"), params["fusejit"],
                                                                   (x64, w64, b64))}
            row = {"shape": shape, "mode": mode, "errs": errs}
            time_training_steps(row, sides, fns, params, gy, a, flush)
            rows.append(row)
            print(f"{shape} {mode}: " + ", ".join(f"{s} {row[s]:.3f} ms" for s in sides) +
                  "".join(f"; {p} / fusejit by round {round_spread(row['rounds'], p)}" for p in sides
                          if p != "fusejit" and round_spread(row["rounds"], p)) +
                  "; fusejit grad rel L2 vs fp64: " + ", ".join(f"{k} {v:.1e}" for k, v in errs.items()), flush=True)
    flops = {r["shape"]: 6 * eval(r["shape"].replace("x", "*")) for r in rows}
    lines = [f"# Forward + backward, linear + bias + relu ({torch.cuda.get_device_name()}, torch {torch.__version__})",
             "", f"{datetime.datetime.now():%Y-%m-%d %H:%M}; command: bench/bench_backward.py --shapes {a.shapes} "
             f"--modes {a.modes} --rounds {a.rounds}; median of {a.iters} steps (the sides taking turns in {a.rounds} "
             "rounds), L2 flushed, CUDA events; one step = forward, "
             "sum(y * g), backward (x, W, bias). torch.compile: max-autotune-no-cudagraphs.", "",
             "| shape | mode | " + " | ".join(f"{s} ms" for s in sides) + " | fusejit / eager | fusejit / compile "
             "| fusejit TFLOP/s | grad rel L2 (x, W, bias) | compile / fusejit by round |",
             "|---|---|" + "---|" * (len(sides) + 5)]
    for r in rows:
        fj = r.get("fusejit")
        ratio = lambda s: f"{r[s] / fj:.2f}x" if fj and s in r else "-"  # noqa: E731
        lines.append(f"| {r['shape']} | {r['mode']} | " + " | ".join(f"{r[s]:.3f}" for s in sides) +
                     f" | {ratio('eager')} | {ratio('compile')} | {flops[r['shape']] / fj / 1e9:.0f} | " +
                     ", ".join(f"{v:.1e}" for v in r["errs"].values()) + f" | {round_spread(r['rounds'], 'compile')} |")
    lines.append("")
    lines.append("Ratios are peer time / fusejit time (above 1: fusejit faster).")
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        name = torch.cuda.get_device_name().replace(" ", "_")
        path = os.path.join(a.out, f"bench_backward_{name}_{datetime.datetime.now():%Y%m%d-%H%M%S}_{a.tag}.md")
        with open(path, "w") as f:
            f.write(text)
        print("wrote", path)


if __name__ == "__main__":
    main()
