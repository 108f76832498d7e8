#!/usr/bin/env python3
"""Where a fusejit forward + backward step spends its time: torch.profiler's
kernel table for one linear + bias + relu step (bench_backward.py's chain),
GPU kernel time against the step's wall time (CPU launch overhead).

    FUSEJIT_LIB=build/capi/libfusejit_c.so python3 bench/profile_backward.py --shape 1024x8192x8192 --mode bf16
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

import torch  # noqa: E402

import fusejit  # noqa: E402
from bench_backward import DTYPES, spec  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--shape", default="1024x8192x8192")
ap.add_argument("--mode", default="bf16")
a = ap.parse_args()
m, k, n = (int(v) for v in a.shape.split("x"))
dtype = DTYPES[a.mode]
torch.backends.cuda.matmul.allow_tf32 = a.mode == "tf32"
x = torch.rand(m, k, device="cuda", dtype=dtype, requires_grad=True)
block = fusejit.nn.Fused(spec(m, k, n, a.mode), w=(torch.randn(n, k) / k ** 0.5).to("cuda", dtype),
                         bias=torch.randn(n).to("cuda", dtype))
gy = torch.randn(m, n, device="cuda", dtype=dtype)


def step():
    x.grad = block.w.grad = block.bias.grad = None
    (block(x) * gy).sum().backward()


for _ in range(5):
    step()
torch.cuda.synchronize()
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]) as p:
    for _ in range(5):
        step()
    torch.cuda.synchronize()
print(p.key_averages().table(sort_by="cuda_time_total", row_limit=15))
