#!/usr/bin/env python3
"""Where a fusejit forward + backward step spends its time: torch.profiler's
kernel table for one linear + bias + relu step (bench_backward.py's chain), or
of a seed model (--seed 1|2|3, bench_backward_seeds.py's models), GPU kernel
time against the step's wall time (CPU launch overhead).

    FUSEJIT_LIB=build/capi/libfusejit_c.so python3 bench/profile_backward.py --shape 1024x8192x8192 --mode bf16
    FUSEJIT_LIB=build/capi/libfusejit_c.so python3 bench/profile_backward.py --seed 3 --mode fp32
    ... --seed 1 --mode tf32 --side eager     (PyTorch's kernels for the same seed step: cuDNN's convs)
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

import torch  # noqa: E402

import fusejit  # noqa: E402
from bench_backward import DTYPES, spec  # noqa: E402
from bench_backward_seeds import seed  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--shape", default="1024x8192x8192")
ap.add_argument("--mode", default="bf16")
ap.add_argument("--seed", type=int, default=0, help="profile seed model 1, 2 or 3 instead")
ap.add_argument("--gaps", action="store_true", help="also list the device's idle gaps between kernels (after which "
                "kernel, before which): where host overhead or a sync leaves the GPU waiting")
ap.add_argument("--flush", action="store_true", help="profile steps as bench_backward.py times them: an L2 flush "
                "(a 256 MiB write) before each, a sync after")
ap.add_argument("--timeline", action="store_true", help="also print the last step's host ops (each thread) and "
                "device kernels on one clock, in start order: what the host was doing while the device waited")
ap.add_argument("--side", default="fusejit", choices=["fusejit", "eager", "compile"],
                help="with --seed: profile PyTorch's eager or torch.compile twin instead")
a = ap.parse_args()
dtype = DTYPES[a.mode]
torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = a.mode == "tf32"
if a.seed:
    model, twin, params_of, x = seed(a.seed, a.mode, 1)
    model = model.to("cuda", dtype)
    x = x.to("cuda", dtype).requires_grad_()
    if a.side == "fusejit":
        block, params = model, [x] + params_of(model)
    else:
        pt = [torch.nn.Parameter(t.detach().clone()) for t in params_of(model)]
        fn = twin if a.side == "eager" else torch.compile(twin, mode="max-autotune-no-cudagraphs")
        block, params = (lambda v: fn(v, *pt)), [x] + pt
else:
    m, k, n = (int(v) for v in a.shape.split("x"))
    x = torch.rand(m, k, device="cuda", dtype=dtype, requires_grad=True)
    block = fusejit.nn.Fused(spec(m, k, n, a.mode), w=(torch.randn(n, k) / k ** 0.5).to("cuda", dtype),
                             bias=torch.randn(n).to("cuda", dtype))
    params = [x, block.w, block.bias]
with torch.no_grad():
    gy = torch.randn_like(block(x))


def step():
    with torch.profiler.record_function("step"):
        step_body()


def step_body():
    for t in params:
        t.grad = None
    (block(x) * gy).sum().backward()


for _ in range(5):
    step()
torch.cuda.synchronize()
flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
# --gaps: device activity only (recording CPU ops would slow the host down and widen the gaps it measures)
activities = [torch.profiler.ProfilerActivity.CUDA] + ([] if a.gaps and not a.timeline
                                                      else [torch.profiler.ProfilerActivity.CPU])
with torch.profiler.profile(activities=activities) as p:
    for _ in range(5):
        if a.flush:
            flush.zero_()
        step()
        if a.flush:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
print(p.key_averages().table(sort_by="cuda_time_total", row_limit=25))
if a.gaps:
    kernels = sorted((e for e in p.events() if e.device_type == torch.autograd.DeviceType.CUDA),
                     key=lambda e: e.time_range.start)
    busy = sum(e.time_range.end - e.time_range.start for e in kernels)
    span = kernels[-1].time_range.end - kernels[0].time_range.start
    print(f"device: {len(kernels)} kernels, busy {busy / 5:.1f} us a step, first start to last end "
          f"{span / 5:.1f} us a step (5 steps)")
    gaps = {}
    for prev, nxt in zip(kernels, kernels[1:]):
        gap = nxt.time_range.start - prev.time_range.end
        if gap > 2:
            key = (prev.name[:48], nxt.name[:48])
            total, count = gaps.get(key, (0.0, 0))
            gaps[key] = (total + gap, count + 1)
    first = next((e.name for e in kernels if e.name.startswith("fj_")), kernels[0].name)  # the step's forward
    begin = max(i for i, e in enumerate(kernels) if e.name == first)
    last = kernels[max(0, begin - 1):]  # with the flush (or the previous step's last kernel) before it
    print("the last step's kernels (start and duration, us from its first kernel's start):")
    for e in last:
        print(f"  {e.time_range.start - last[0].time_range.start:9.1f} {e.time_range.end - e.time_range.start:8.1f}  "
              f"{e.name[:70]}")
    print("idle gaps over 2 us, by total (us; after -> before):")
    for (before, after), (total, count) in sorted(gaps.items(), key=lambda kv: -kv[1][0])[:15]:
        print(f"  {total:9.1f} in {count:3d}  {before} -> {after}")
if a.timeline:
    steps = sorted((e for e in p.events() if e.name == "step" and e.device_type == torch.autograd.DeviceType.CPU),
                   key=lambda e: e.time_range.start)
    t0 = steps[-1].time_range.start
    rows = sorted((e for e in p.events() if e.time_range.start >= t0 and e.name != "step"),
                  key=lambda e: e.time_range.start)
    threads = {}
    print(f"the last step's timeline (us from its start; host ops by thread, 'GPU' kernels; host ops under 2 us "
          f"left out unless they launch):")
    for e in rows:
        on_gpu = e.device_type == torch.autograd.DeviceType.CUDA
        dur = e.time_range.end - e.time_range.start
        if not on_gpu and dur < 2 and "aunch" not in e.name:
            continue
        where = "GPU" if on_gpu else f"T{threads.setdefault(e.thread, len(threads))}"
        print(f"  {e.time_range.start - t0:9.1f} {dur:8.1f}  {where:4s} {e.name[:90]}")
