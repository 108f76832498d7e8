#!/usr/bin/env python3
"""Host-side cost of fusejit's Python path, layer by layer, for the linear +
bias + relu chain of bench_backward.py (docs/python.md, "Host overhead").

    FUSEJIT_LIB=build/capi/libfusejit_c.so python3 bench/profile_host.py \\
        --shapes 64x64x64,1024x8192x8192 --modes bf16 [--cprofile]

For each layer (raw launch, Kernel call, torch operator, nn.Module forward,
forward with autograd, the whole training step; PyTorch eager alongside) it
times --calls calls on the host clock with no sync between them (one at the
end): at a tiny shape the device keeps up, so this is the host's cost a call.
At larger shapes it also times the step with CUDA events after an L2 flush,
as bench_backward.py does, so host and device time sit side by side.
--cprofile prints where the host time of a step goes (cProfile, by own time).
"""
import argparse
import cProfile
import os
import pstats
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.environ.get("FUSEJIT_PYTHON") or os.path.join(HERE, "..", "python"))  # FUSEJIT_PYTHON: another copy of the package, to compare
sys.path.insert(0, HERE)

import torch  # noqa: E402

import fusejit  # noqa: E402
from bench_backward import DTYPES, chain_tensors, spec, time_steps, torch_chain  # noqa: E402


def host_us(fn, calls):
    """Host microseconds a call: `calls` calls back to back, one sync at the end."""
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / calls * 1e6


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shapes", default="64x64x64,1024x8192x8192")
    ap.add_argument("--modes", default="bf16,tf32")
    ap.add_argument("--calls", type=int, default=500)
    ap.add_argument("--cprofile", action="store_true")
    a = ap.parse_args()
    dev = torch.device("cuda")
    flush = torch.empty(256 << 20, dtype=torch.uint8, device=dev)
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}")
    for shape in a.shapes.split(","):
        m, k, n = (int(v) for v in shape.split("x"))
        small = m * k * n <= 1 << 24
        for mode in a.modes.split(","):
            torch.backends.cuda.matmul.allow_tf32 = mode == "tf32"
            dtype = DTYPES[mode]
            x, w, bias, gy = chain_tensors(m, k, n, dtype, dev)
            text = spec(m, k, n, mode)
            block = fusejit.nn.Fused(text, w=w.detach().clone(), bias=bias.detach().clone())
            kernel = fusejit.compile(text)
            op = fusejit.torch.op_for(text) if fusejit.torch.available() else None
            xd, wd, bd = x.detach(), w.detach(), bias.detach()
            y = kernel(xd, wd, bd)
            stream = torch.cuda.current_stream().cuda_stream
            pointers = [xd.data_ptr(), wd.data_ptr(), bd.data_ptr(), y.data_ptr()]

            def step_fusejit():
                x.grad = block.w.grad = block.bias.grad = None
                (block(x) * gy).sum().backward()

            def step_eager():
                x.grad = w.grad = bias.grad = None
                (torch_chain(x, w, bias) * gy).sum().backward()

            def fused_no_grad():
                with torch.no_grad():
                    block(x)

            y_f = block(x)  # a graph kept for timing the backward alone
            y_e = torch_chain(x, w, bias)
            diff = block._autograd()
            fwd_outs = diff._forward_kernels.for_device(dev)(xd, block.w.detach(), block.bias.detach())  # y, saved
            stage_args = ([xd, block.w.detach(), block.bias.detach()], fwd_outs, (gy,), (True, True, True))
            layers = [("raw launch (ctypes)", lambda: kernel.launch(pointers, stream)),
                      ("Kernel(x, w, b, out=y)", lambda: kernel(xd, wd, bd, out=y)),
                      ("Kernel(x, w, b)", lambda: kernel(xd, wd, bd))]
            if op is not None:
                layers.append(("torch.ops.fusejit op", lambda: op(xd, wd, bd)))
            layers += [("Fused(x), no_grad", fused_no_grad),
                       ("Fused(x), forward with autograd", lambda: block(x)),
                       ("fusejit backward(y, g) alone", lambda: y_f.backward(gy, retain_graph=True)),
                       ("fusejit _backward, no autograd", lambda: diff._backward(*stage_args, direct=True)),
                       ("fusejit step (fwd + bwd)", step_fusejit),
                       ("eager chain, no_grad", lambda: torch_chain(xd, wd, bd)),
                       ("eager backward(y, g) alone", lambda: y_e.backward(gy, retain_graph=True)),
                       ("eager step (fwd + bwd)", step_eager)]
            calls = a.calls if small else max(20, a.calls // 20)
            print(f"\n{shape} {mode}: host us a call ({calls} calls, one sync)")
            for name, fn in layers:
                print(f"  {name:34s} {host_us(fn, calls):9.1f}")
            if not small:
                for name, fn in (("fusejit", step_fusejit), ("eager", step_eager)):
                    ms = time_steps(fn, 20, 3, flush)
                    print(f"  {name} step, CUDA events after an L2 flush (median of 20): {ms:.3f} ms")
            if a.cprofile:
                prof = cProfile.Profile()
                prof.enable()
                for _ in range(200):
                    step_fusejit()
                torch.cuda.synchronize()
                prof.disable()
                print(f"\ncProfile of 200 fusejit steps ({shape} {mode}), by own time:")
                pstats.Stats(prof).sort_stats("tottime").print_stats(30)
                pstats.Stats(prof).sort_stats("cumulative").print_stats(30)


if __name__ == "__main__":
    main()
