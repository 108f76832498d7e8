#!/usr/bin/env python3
"""Summarize ncu's source page (`ncu --import R --page source --csv --print-source sass`) of one kernel:
where the warp-stall samples fall, per SASS instruction and per region, with the top stall reasons.

  python3 bench/ncu_sass_stalls.py report.sass.csv [--top 60] [--split-at 'WARPGROUP.DEPBAR.LE gsb0, 0x0']

--split-at names an instruction (a substring of its SASS) that ends the mainloop: samples after its first
occurrence count as the epilogue region (the default is the wgmma mainloop's last wait)."""
import argparse
import collections
import csv
import sys


def load(path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    # The first row names the kernel; the header follows.
    start = next(i for i, r in enumerate(rows) if r and r[0] == "Address")
    return rows[start - 1] if start else [], rows[start], [r for r in rows[start + 1:] if len(r) == len(rows[start])]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=60)
    ap.add_argument("--split-at", default="WARPGROUP.DEPBAR.LE gsb0, 0x0")
    a = ap.parse_args()
    try:
        title, hdr, data = load(a.csv)
    except (OSError, StopIteration) as e:
        sys.exit(f"ncu_sass_stalls: cannot read a source page from {a.csv}: {e}")
    col = {h: i for i, h in enumerate(hdr)}
    samples_col = col.get("Warp Stall Sampling (All Samples)")
    if samples_col is None:
        sys.exit(f"ncu_sass_stalls: {a.csv} has no 'Warp Stall Sampling (All Samples)' column (profile with "
                 "--section SourceCounters)")
    execs_col = col.get("Instructions Executed")
    reasons = [i for i, h in enumerate(hdr) if h.startswith("stall_") and "Not Issued" not in h]

    def num(r, i):
        try:
            return int(float(r[i]))
        except (ValueError, IndexError):
            return 0

    split = next((i for i, r in enumerate(data) if a.split_at and a.split_at in r[1]), len(data))
    total = sum(num(r, samples_col) for r in data) or 1
    regions = {"mainloop and before": collections.Counter(), "after (epilogue)": collections.Counter()}
    counts = {k: 0 for k in regions}
    for i, r in enumerate(data):
        k = "mainloop and before" if i <= split else "after (epilogue)"
        counts[k] += num(r, samples_col)
        for j in reasons:
            regions[k][hdr[j]] += num(r, j)
    print(f"# {' '.join(title).strip()}: {total} samples over {len(data)} instructions; split after '{a.split_at}'")
    for k, c in regions.items():
        top = ", ".join(f"{n[6:]} {v * 100 // max(counts[k], 1)}%" for n, v in c.most_common(5) if v)
        print(f"# {k}: {counts[k]} samples ({counts[k] * 100 // total}%): {top}")
    print("# address  samples  executed  top reasons  SASS")
    for r in sorted(data, key=lambda r: -num(r, samples_col))[:a.top]:
        top = ",".join(f"{hdr[j][6:]}:{num(r, j)}" for j in sorted(reasons, key=lambda j: -num(r, j))[:3] if num(r, j))
        execs = num(r, execs_col) if execs_col is not None else 0
        print(f"{r[0][-6:]} {num(r, samples_col):>7} {execs:>9}  {top}  {r[1].strip()}")


if __name__ == "__main__":
    main()
