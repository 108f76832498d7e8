#!/usr/bin/env python3
"""Host timestamps inside one training step of a seed model, without a profiler: where the host is when it
launches each kernel (docs/python.md, "Host overhead").

    FUSEJIT_LIB=build/capi/libfusejit_c.so python3 bench/profile_stamps.py --seed 2 --mode bf16

Each step is timed as bench_backward.py times it (L2 flush, CUDA events); perf_counter stamps mark the step's
start, fusejit's forward / backward entry and exit and each kernel launch (Kernel.__call__ before and after), the
end of the forward + loss, and the return of backward(). Prints the median offset of each stamp (us from the
step's start) over --iters steps, and the median step time on the device. FUSEJIT_PYTHON: another copy of the
package, to compare.
"""
import argparse
import os
import statistics
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.environ.get("FUSEJIT_PYTHON") or os.path.join(HERE, "..", "python"))
sys.path.insert(0, HERE)

import torch  # noqa: E402

import fusejit  # noqa: E402
from fusejit import _kernel, autograd  # noqa: E402
from bench_backward import DTYPES  # noqa: E402
from bench_backward_seeds import seed  # noqa: E402

stamps = []


def stamp(label):
    stamps.append((label, time.perf_counter()))


def wrap(owner, name, label):
    fn = getattr(owner, name)

    def wrapped(*args, **kwargs):
        stamp(f"{label} enter")
        try:
            return fn(*args, **kwargs)
        finally:
            stamp(f"{label} exit")
    setattr(owner, name, staticmethod(wrapped) if isinstance(owner.__dict__[name], staticmethod) else wrapped)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=2)
    ap.add_argument("--mode", default="bf16")
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--hooks", action="store_true", help="also stamp when autograd reaches the loss's SumBackward "
                    "(a node pre-hook) and the chain output's gradient (a tensor hook): both take the GIL")
    a = ap.parse_args()
    dtype = DTYPES[a.mode]
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = a.mode == "tf32"
    model, twin, params_of, x = seed(a.seed, a.mode, 1)
    model = model.to("cuda", dtype)
    x = x.to("cuda", dtype).requires_grad_()
    params = [x] + params_of(model)
    with torch.no_grad():
        gy = torch.randn_like(model(x))
    wrap(fusejit.models._FusedModule, "_run", "models._run")
    wrap(autograd.DifferentiableSpec, "__call__", "DifferentiableSpec call")
    wrap(_kernel.Kernel, "__call__", "kernel")
    wrap(autograd._FusedFunction, "forward", "fwd")
    wrap(autograd._FusedFunction, "backward", "bwd")
    L = fusejit._lib.lib()
    launch = L.fj_kernel_launch

    def stamped_launch(*args):
        stamp("  fj_kernel_launch enter")
        try:
            return launch(*args)
        finally:
            stamp("  fj_kernel_launch exit")
    L.fj_kernel_launch = stamped_launch
    wrap(torch.autograd.function.BackwardCFunction, "apply", "BackwardCFunction.apply")
    pt = [torch.nn.Parameter(t.detach().clone()) for t in params_of(model)]

    def step_fusejit():
        for t in params:
            t.grad = None
        stamp("grads cleared")
        y = model(x)
        stamp("forward returned")
        loss = (y * gy).sum()
        stamp("loss")
        if a.hooks:
            loss.grad_fn.register_prehook(lambda grads: stamp("SumBackward pre-hook"))
            y.register_hook(lambda g: stamp("y's gradient hook"))
        loss.backward()

    def step_eager():
        for t in [x] + pt:
            t.grad = None
        stamp("grads cleared")
        y = twin(x, *pt)
        stamp("forward returned")
        loss = (y * gy).sum()
        stamp("loss")
        loss.backward()

    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    print("python threads:", [t.name for t in threading.enumerate()])
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, seed {a.seed} {a.mode}")
    for name, step in (("fusejit", step_fusejit), ("eager", step_eager)):
        for _ in range(5):
            step()
        torch.cuda.synchronize()
        runs, times = [], []
        for _ in range(a.iters):
            flush.zero_()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            stamps.clear()
            stamp("start")
            step()
            stamp("backward() returned")
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
            runs.append(list(stamps))
        print(f"\n{name}: step {statistics.median(times):.3f} ms on the device (median of {a.iters}); host stamps, "
              f"us from the step's start (median):")
        for i, (label, _) in enumerate(runs[0]):
            offsets = [(r[i][1] - r[0][1]) * 1e6 for r in runs if len(r) == len(runs[0])]
            print(f"  {statistics.median(offsets):8.1f}  {label}")


if __name__ == "__main__":
    main()
