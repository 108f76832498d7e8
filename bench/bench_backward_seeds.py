#!/usr/bin/env python3
"""Training step (forward + backward) of the three seed models: fusejit.models
(the fused forward and the generated backward stages) against PyTorch eager
and torch.compile of the same chain, in one process on the same inputs.

    FUSEJIT_LIB=build/capi/libfusejit_c.so python3 bench/bench_backward_seeds.py \\
        --seeds 1,2,3 --modes fp32,tf32,bf16 --out bench/results

One step = forward, sum(y * g), backward (grads of x and every parameter).
CUDA events around each step, L2 flushed before it, warm-up first, the median
of --iters steps. Gradients are checked against float64 autograd first
(relative L2, printed). fp32: TF32 off in cuBLAS and cuDNN; tf32: on.
"""
import argparse
import datetime
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

import torch  # noqa: E402

import fusejit  # noqa: E402
from fusejit import _launcher  # noqa: E402
from bench_backward import DTYPES, rel_l2, round_spread, time_training_steps  # noqa: E402

F = torch.nn.functional


def seed(which, mode, scale):
    """(fusejit model, PyTorch twin(x, *params), input x) at the seed's size / scale."""
    prec = mode
    if which == 1:
        model = fusejit.models.ConvReluBias(64, 128, 3, (128, 1, 1), precision=prec)
        x = torch.rand(128 // scale, 64, 128, 128)

        def twin(x, w, cb, b):
            return torch.relu(F.conv2d(x, w, cb)) + b
        params = lambda m: [m.conv.weight, m.conv.bias, m.bias]  # noqa: E731
    elif which == 2:
        model = fusejit.models.GemmBiasRelu(8192, 8192, (8192,), precision=prec)
        x = torch.rand(1024 // scale, 8192)

        def twin(x, w, b):
            return torch.relu(F.linear(x, w) + b)
        params = lambda m: [m.gemm.weight, m.bias]  # noqa: E731
    else:
        model = fusejit.models.ConvTanhScaleBiasMaxPool(8, 64, 3, 2.0, (64, 1, 1), 4, precision=prec)
        x = torch.rand(128 // scale, 8, 256, 256)

        def twin(x, w, cb, b):
            return F.max_pool2d(torch.tanh(F.conv2d(x, w, cb)) * 2.0 + b, 4)
        params = lambda m: [m.conv.weight, m.conv.bias, m.bias]  # noqa: E731
    return model, twin, params, x


def launcher_in_use():
    """What the fusejit side's models run under in this process: the mode, as built."""
    if _launcher.autograd_module() is not None:
        return "cpp-autograd"
    return "cpp" if _launcher.module() is not None else "python"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--modes", default="fp32,tf32,bf16")
    ap.add_argument("--sides", default="eager,compile,fusejit",
                    help="also fusejit-python, fusejit-cpp, fusejit-cpp-autograd: the same model under that "
                         "launcher (FUSEJIT_LAUNCHER's modes; the fusejit side: the default, auto)")
    ap.add_argument("--scale", type=int, default=1, help="divide the batch by this")
    ap.add_argument("--compile-mode", default="max-autotune-no-cudagraphs")
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2, help="the sides take turns this many times (time_sides)")
    ap.add_argument("--out", default=None)
    ap.add_argument("--tag", default="seeds")
    a = ap.parse_args()
    dev = torch.device("cuda")
    flush = torch.empty(256 << 20, dtype=torch.uint8, device=dev)
    sides = a.sides.split(",")
    rows = []
    for which in (int(s) for s in a.seeds.split(",")):
        for mode in a.modes.split(","):
            torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = mode == "tf32"
            dtype = DTYPES[mode]
            torch.manual_seed(which)
            model, twin, params_of, x = seed(which, mode, a.scale)
            model = model.to(dev, dtype)
            x = x.to(dev, dtype).requires_grad_()
            fj_params = params_of(model)
            pt_params = [torch.nn.Parameter(t.detach().clone()) for t in fj_params]
            with torch.no_grad():
                gy = torch.randn_like(twin(x, *pt_params))
            compiled = torch.compile(twin, mode=a.compile_mode)
            fns = {"eager": lambda: twin(x, *pt_params), "compile": lambda: compiled(x, *pt_params),
                   "fusejit": lambda: model(x)}
            grads_of = {"eager": [x] + pt_params, "compile": [x] + pt_params, "fusejit": [x] + fj_params}
            twins = {}  # a twin of the fusejit model a C++ launcher mode ("fusejit-<mode>" sides)
            for side in sides:
                if side.startswith("fusejit-"):
                    twin_model, _, _, _ = seed(which, mode, a.scale)
                    twin_model = twin_model.to(dev, dtype)
                    twin_model.load_state_dict(model.state_dict())
                    twins[side] = twin_model
                    fns[side] = lambda m=twin_model: m(x)
                    grads_of[side] = [x] + params_of(twin_model)
            # correctness first: fusejit's gradients against float64 autograd
            ref = [t.detach().double().requires_grad_() for t in [x] + pt_params]
            (twin(*ref) * gy.double()).sum().backward()
            for t in grads_of["fusejit"]:
                t.grad = None
            (model(x) * gy).sum().backward()
            errs = [rel_l2(t.grad, r.grad) for t, r in zip(grads_of["fusejit"], ref)]
            python_grads = [t.grad.clone() for t in grads_of["fusejit"]]
            for side in twins:  # set up under its launcher mode (its first call), checked against fusejit's
                _launcher.set_mode(side[len("fusejit-"):])
                if side == "fusejit-python":
                    built = True
                else:
                    built = _launcher.module() if side == "fusejit-cpp" else _launcher.autograd_module()
                if built is None:
                    raise SystemExit(f"{side}: the C++ launcher did not build (the warning above says why)")
                for t in grads_of[side]:
                    t.grad = None
                (fns[side]() * gy).sum().backward()
                _launcher.set_mode(None)
                cpp_errs = [rel_l2(t.grad, g) for t, g in zip(grads_of[side], python_grads)]
                print(f"seed {which} {mode}: {side}'s gradients vs fusejit's, rel L2: " +
                      ", ".join(f"{v:.1e}" for v in cpp_errs), flush=True)
            for t in grads_of["eager"]:
                t.grad = None
            (fns["eager"]() * gy).sum().backward()
            torch_errs = [rel_l2(t.grad, r.grad) for t, r in zip(grads_of["eager"], ref)]
            del ref
            row = {"seed": which, "mode": mode, "shape": "x".join(map(str, x.shape)), "errs": errs,
                   "torch_errs": torch_errs}
            time_training_steps(row, sides, fns, grads_of, gy, a, flush)
            rows.append(row)
            print(f"seed {which} {mode}: " + ", ".join(f"{s} {row[s]:.3f} ms" for s in sides) +
                  "".join(f"; {p} / fusejit by round {round_spread(row['rounds'], p)}" for p in sides
                          if p != "fusejit" and round_spread(row["rounds"], p)) +
                  "; grad rel L2 vs fp64: fusejit " + ", ".join(f"{v:.1e}" for v in errs) +
                  "; eager " + ", ".join(f"{v:.1e}" for v in torch_errs), flush=True)
            del model, x, fj_params, pt_params, compiled, fns, grads_of
            twins = None
            torch.cuda.empty_cache()
    lines = [f"# Training step of the seed models ({torch.cuda.get_device_name()}, torch {torch.__version__})", "",
             f"{datetime.datetime.now():%Y-%m-%d %H:%M}; command: bench/bench_backward_seeds.py --seeds {a.seeds} "
             f"--modes {a.modes} --scale {a.scale} --rounds {a.rounds}; median of {a.iters} steps (the sides taking turns "
             f"in {a.rounds} rounds), L2 flushed, CUDA events; one step = "
             f"forward, sum(y * g), backward (x and every parameter). torch.compile: {a.compile_mode}. "
             f"fusejit's launcher: {launcher_in_use()} (FUSEJIT_LAUNCHER={_launcher.mode()}).", "",
             "| seed | x | mode | " + " | ".join(f"{s} ms" for s in sides) +
             " | fusejit / eager | fusejit / compile | grad rel L2 vs fp64 (x, params): fusejit | eager "
             "| compile / fusejit by round |",
             "|---|---|---|" + "---|" * (len(sides) + 5)]
    for r in rows:
        fj = r.get("fusejit")
        ratio = lambda s: f"{r[s] / fj:.2f}x" if fj and s in r else "-"  # noqa: E731
        lines.append(f"| {r['seed']} | {r['shape']} | {r['mode']} | " + " | ".join(f"{r[s]:.3f}" for s in sides) +
                     f" | {ratio('eager')} | {ratio('compile')} | " + ", ".join(f"{v:.1e}" for v in r["errs"]) + " | " +
                     ", ".join(f"{v:.1e}" for v in r["torch_errs"]) + f" | {round_spread(r['rounds'], 'compile')} |")
    lines += ["", "Ratios are peer time / fusejit time (above 1: fusejit faster)."]
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        name = torch.cuda.get_device_name().replace(" ", "_")
        path = os.path.join(a.out, f"bench_backward_seeds_{name}_{datetime.datetime.now():%Y%m%d-%H%M%S}_{a.tag}.md")
        with open(path, "w") as f:
            f.write(text)
        print("wrote", path)


if __name__ == "__main__":
    main()
