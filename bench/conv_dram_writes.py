#!/usr/bin/env python3
"""Issue 9's traffic target: a pooled or reduced conv chain writes only its outputs.

For each bench_conv problem and mode: one run of the fusejit program (`fusejit run SPEC --no-time`) under ncu,
DRAM bytes written and read summed over its kernels (every kernel named fj_*: staging, conv, finish), against the
outputs' size. The issue wants bytes written within 1.2x of the outputs'.

    python3 bench/conv_dram_writes.py [--problems 2,4,6,7] [--modes fp32,tf32,bf16] [--fusejit build/fusejit]
                                      [--ncu ncu] [--out DIR] [--commit C] [--config C1 [C2 ...]]

--config: fusejit codegen configs (e.g. mma_tile=128x32x3x16), each measured on every problem and mode ("" the
default plan), one row each.

Baseline: ncu reports DRAM writes for kernels that write almost nothing (H100, session 52: a kernel summing a
134 MB input over H, W -- 8 KB of output -- "wrote" 2.37 MB). Each problem and mode also measures such a read-only
kernel over the conv's input x (`sum` over dims [2, 3], same dtype), and the table shows the writes net of it
(written - baseline) next to the raw figure. That net moves run to run by more than the outputs' size; the L2
stores column (write, reduction and atomic sectors the kernels send to L2, x 32 bytes) is what the kernels
themselves write, the most DRAM can receive from them.

Writes conv_dram_writes_<device>_<UTC time>.md (and .json) to --out (default bench/results) and prints the table.
GPU machine only (ncu); no torch needed.
"""
import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import bench_conv as C  # noqa: E402  (no torch at import) PROBLEMS, MODES, ELEM_BYTES, out_dims, spec_text

TARGET = 1.2


def config_args(config):
    return ["--config", config] if config else []


def launches(fusejit, spec, config=""):
    """The program's launch count (`fusejit emit --plan`: one 'launch' line each)."""
    plan = subprocess.run([fusejit, "emit", spec, "--plan"] + config_args(config), capture_output=True, text=True,
                          check=True).stdout
    return sum(1 for line in plan.splitlines() if line.startswith("launch ")), plan


L2_STORES = ("lts__t_sectors_op_write.sum", "lts__t_sectors_op_red.sum", "lts__t_sectors_op_atom.sum")


def ncu_bytes(ncu, fusejit, spec, count, config=""):
    """(written, read, kernels, stored) summed over the first `count` fj_ launches of one run; stored: the 32-byte
    L2 sectors the kernels write, reduce or atomically update (what they send toward DRAM themselves)."""
    cmd = [ncu, "--csv", "--metrics", ",".join(("dram__bytes_write.sum", "dram__bytes_read.sum") + L2_STORES),
           "-k", "regex:^fj_",
           "--launch-count", str(count), fusejit, "run", spec, "--no-time", "--samples", "2000"] + config_args(config)
    r = subprocess.run(cmd, capture_output=True, text=True)
    written = read = stored = 0.0
    kernels = []
    unit_scale = {"byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "KB": 1e3, "MB": 1e6, "GB": 1e9}
    for line in r.stdout.splitlines():
        cells = [c.strip('"') for c in re.findall(r'"(?:[^"]|"")*"', line)]
        if len(cells) < 3 or not cells[-1].replace(",", "").replace(".", "", 1).isdigit():
            continue
        name, unit, value = cells[-3], cells[-2], float(cells[-1].replace(",", ""))
        kernel = next((c for c in cells if c.startswith("fj_")), "?")
        if kernel not in kernels:
            kernels.append(kernel)
        if name == "dram__bytes_write.sum":
            written += value * unit_scale.get(unit, 1)
        elif name == "dram__bytes_read.sum":
            read += value * unit_scale.get(unit, 1)
        elif name in L2_STORES:
            stored += 32 * value
    if not kernels:
        raise RuntimeError(f"ncu gave no fj_ kernels (rc {r.returncode}): {(r.stderr or r.stdout)[-400:]}")
    return written, read, kernels, stored


def baseline_spec(P, mode):
    """A read-only kernel over the conv's input: x summed over H, W (an [N, C] f32 output)."""
    n, cin, h, w = C.x_dims(P, False)
    precision, dt = C.MODES[mode]
    return (f"name: read_x_{P['name']}_{mode}\nprecision: {precision}\ninputs:\n"
            f"  - {{name: x, shape: [{n}, {cin}, {h}, {w}], dtype: {dt}, init: uniform01}}\n"
            "ops:\n  - {name: s, op: sum, args: [x], dims: [2, 3]}\noutputs: [s]\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", default="2,4,6,7")
    ap.add_argument("--modes", default="fp32,tf32,bf16")
    ap.add_argument("--fusejit", default=os.path.join(ROOT, "build", "fusejit"))
    ap.add_argument("--ncu", default="ncu")
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--commit", default="")
    ap.add_argument("--config", nargs="*", default=[""], help="codegen configs, each a row ('' the default)")
    a = ap.parse_args()
    problems = C.parse_problems(a.problems)
    modes = [m for m in a.modes.split(",") if m]
    rows = []
    baselines = {}
    with tempfile.TemporaryDirectory() as d:
        for P, mode in ((P, m) for P in problems for m in modes):
            spec = os.path.join(d, f"read_x_{P['name']}_{mode}.yaml")
            with open(spec, "w") as f:
                f.write(baseline_spec(P, mode))
            try:
                count, _ = launches(a.fusejit, spec)
                baselines[(P["name"], mode)] = ncu_bytes(a.ncu, a.fusejit, spec, count)[0]
            except Exception as e:  # the rows still run, without a net figure
                print(f"baseline {P['name']} {mode}: {type(e).__name__}: {str(e)[:200]}", flush=True)
        for P, mode, config in ((P, m, c) for P in problems for m in modes for c in a.config):
            spec = os.path.join(d, f"conv_{P['name']}_{mode}.yaml")
            with open(spec, "w") as f:
                f.write(C.spec_text(P, mode, False))
            elem = C.ELEM_BYTES[C.MODES[mode][1]]
            out_bytes = elem * C.numel(C.out_dims(P, False))
            row = {"index": C.PROBLEMS.index(P) + 1, "problem": P["name"], "mode": mode, "config": config,
                   "out_bytes": out_bytes}
            try:
                count, _ = launches(a.fusejit, spec, config)
                w, r, kernels, stored = ncu_bytes(a.ncu, a.fusejit, spec, count, config)
                row.update(written=w, read=r, kernels=kernels, ratio=w / out_bytes, stored=stored,
                           stored_ratio=stored / out_bytes)
                if (P["name"], mode) in baselines:
                    row.update(baseline=baselines[(P["name"], mode)],
                               net_ratio=(w - baselines[(P["name"], mode)]) / out_bytes)
            except Exception as e:  # one row's failure is reported, the rest still run
                row["error"] = f"{type(e).__name__}: {str(e)[:300]}"
            rows.append(row)
            print(row, flush=True)
    configs = a.config != [""]
    head = "| # | problem | mode |" + (" config |" if configs else "") + \
        " outputs MB | DRAM written MB | read-only baseline MB | net / outputs | target <= 1.2 (net) | " \
        "written / outputs (raw) | L2 stores MB | L2 stores / outputs | read MB | kernels |"
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        cfg = f" {r['config'] or '(default)'} |" if configs else ""
        if "error" in r:
            lines.append(f"| {r['index']} | {r['problem']} | {r['mode']} |{cfg} {r['out_bytes'] / 1e6:.3f} | ERR | | | | "
                         f"| | | | {r['error'].replace('|', '/')} |")
            continue
        net = r.get("net_ratio")
        ok = "?" if net is None else "yes" if net <= TARGET else "no"
        base = "?" if net is None else f"{r['baseline'] / 1e6:.3f}"
        lines.append(f"| {r['index']} | {r['problem']} | {r['mode']} |{cfg} {r['out_bytes'] / 1e6:.3f} | "
                     f"{r['written'] / 1e6:.3f} | {base} | {'?' if net is None else f'{net:.2f}'} | {ok} | "
                     f"{r['ratio']:.2f} | {r['stored'] / 1e6:.3f} | {r['stored_ratio']:.2f} | {r['read'] / 1e6:.1f} | "
                     f"{' + '.join(r['kernels'])} |")
    now = datetime.datetime.now(datetime.timezone.utc)
    try:
        device = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                                text=True).stdout.strip().splitlines()[0]
    except Exception:
        device = "unknown"
    title = (f"# Conv chains: DRAM bytes written vs the outputs' size ({device})\n\n"
             f"{now:%Y-%m-%d %H:%M} UTC; commit {a.commit or '?'}; command: python3 bench/conv_dram_writes.py "
             f"--problems {a.problems} --modes {a.modes}"
             f"{' --config ' + ' '.join(repr(c) for c in a.config) if configs else ''}; ncu dram__bytes_write.sum / dram__bytes_read.sum summed over "
             f"one run's fj_ kernels (`fusejit run --no-time`); baseline: the same for a kernel that only reads x "
             f"(x summed over H, W), net = (written - baseline) / outputs; L2 stores: 32 x the L2 sectors the "
             f"kernels write, reduce or update atomically ({', '.join(L2_STORES)}).\n")
    text = title + "\n" + "\n".join(lines) + "\n"
    print(text)
    os.makedirs(a.out, exist_ok=True)
    base = os.path.join(a.out, f"conv_dram_writes_{re.sub(r'[^A-Za-z0-9]+', '_', device)}_{now:%Y%m%d-%H%M%S}")
    with open(base + ".md", "w") as f:
        f.write(text)
    with open(base + ".json", "w") as f:
        json.dump({"device": device, "commit": a.commit, "date": now.isoformat(), "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
