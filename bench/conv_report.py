"""The output of bench/bench_conv.py (bench_norm.py reuses most of it): the compact, geomean and full tables of
the rows, the error notes, and the .json / .md results written after every row."""
import json
import math
import os

import bench_gemm as G  # (no torch at import) fmt_ms, fmt_tflops, fmt_err
import gemm_report  # error_notes
from conv_problems import PROBLEMS, TORCH_SIDES


def ratio_cells(g, tsides, fj="fusejit"):
    rf = g.get(fj)
    out = []
    for t in tsides:
        rt = g.get(t)
        ok = rf and rt and rf.get("median_ms") and rt.get("median_ms")
        out.append(f"{rf['median_ms'] / rt['median_ms']:.2f}" if ok else "")
    return out


def short(r):
    if r is None:
        return ""
    if "skipped" in r:
        return "skip"
    if "error" in r:
        return "ERR"
    return G.fmt_ms(r.get("median_ms"))


def groups_of(rows):
    """{(problem, mode): {side: row}} in first-seen order."""
    groups = {}
    for r in rows:
        groups.setdefault((r["problem"], r["mode"]), {})[r["side"]] = r
    return groups


def compact_table(rows, sides):
    groups = groups_of(rows)
    present = [s for s in sides if any(s in g for g in groups.values())]
    tsides = [s for s in present if s in TORCH_SIDES]
    has_fj = "fusejit" in present
    has_tuned = has_fj and "fusejit-tuned" in present
    head = (["#", "problem", "mode", "GFLOP", "floor ms"] + [f"{s} ms" for s in present]
            + ([f"fj/{t}" for t in tsides] + ([f"tuned/{t}" for t in tsides] if has_tuned else [])
               + ["fj TFLOP/s", "fj x floor", "fj rel L2", "fj kernels"] if has_fj else []))
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for (prob, mode), g in groups.items():
        any_row = next(iter(g.values()))
        cells = [str(any_row.get("index", "")), prob, mode,
                 f"{any_row['gflop']:.1f}" if any_row.get("gflop") else "", G.fmt_ms(any_row.get("floor_ms"))]
        cells += [short(g.get(s)) for s in present]
        if has_fj:
            rf = g.get("fusejit") or {}
            cells += ratio_cells(g, tsides)
            if has_tuned:
                cells += ratio_cells(g, tsides, "fusejit-tuned")
            cells.append(G.fmt_tflops(rf.get("tflops")))
            cells.append(f"{rf['median_ms'] / rf['floor_ms']:.2f}"
                         if rf.get("median_ms") and rf.get("floor_ms") else "")
            cells.append(G.fmt_err(rf) if "rel_l2" in rf else "")
            cells.append(" + ".join(rf.get("kernels") or ([rf["kernel"]] if rf.get("kernel") else [])))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def geomean_table(rows, sides):
    groups = groups_of(rows)
    tsides = [s for s in sides if s in TORCH_SIDES and any(s in g for g in groups.values())]
    if "fusejit" not in sides or not tsides:
        return ""
    modes = []
    for (_, mode) in groups:
        if mode not in modes:
            modes.append(mode)
    head = ["mode"] + [f"geomean fj/{t}" for t in tsides]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for mode in modes:
        cells = [mode]
        for t in tsides:
            rs = []
            for (_, m), g in groups.items():
                rf, rt = g.get("fusejit"), g.get(t)
                if m == mode and rf and rt and rf.get("median_ms") and rt.get("median_ms"):
                    rs.append(rf["median_ms"] / rt["median_ms"])
            cells.append(f"{math.exp(sum(map(math.log, rs)) / len(rs)):.2f} (n={len(rs)})" if rs else "")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def error_notes(rows):
    return gemm_report.error_notes(rows, lambda r: f"{r['problem']} {r['mode']}")


def full_table(rows):
    head = ["problem", "mode", "floor ms", "side", "median ms", "mean ms", "trials", "TFLOP/s", "x floor",
            "fusejit / side", "rel L2", "max abs", "compile s", "note"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for (prob, mode), g in groups_of(rows).items():
        for side, r in g.items():
            base = [prob, mode, G.fmt_ms(r.get("floor_ms")), side]
            if "median_ms" not in r:
                note = r.get("skipped") or ("error: " + r.get("error", "").splitlines()[0][:160]
                                            if r.get("error") else "")
                lines.append("| " + " | ".join(base + [""] * 9 + [note.replace("|", "/")]) + " |")
                continue
            rf = g.get("fusejit")
            ratio = (f"{rf['median_ms'] / r['median_ms']:.2f}"
                     if (side in TORCH_SIDES or side == "fusejit-tuned") and rf and rf.get("median_ms") else "")
            note = "; ".join(v for v in (" + ".join(r.get("kernels") or []) or r.get("kernel"),
                                         "; ".join(r.get("plan_notes") or []), r.get("note")) if v)
            cs = r.get("compile_s")
            lines.append("| " + " | ".join(base + [
                G.fmt_ms(r["median_ms"]), G.fmt_ms(r["mean_ms"]), str(r["trials"]), G.fmt_tflops(r["tflops"]),
                f"{r['median_ms'] / r['floor_ms']:.2f}" if r.get("floor_ms") else "", ratio, G.fmt_err(r),
                "" if r.get("max_abs") is None else f"{r['max_abs']:.1e}",
                "" if cs is None else f"{cs:.1f}", note.replace("|", "/")]) + " |")
    return "\n".join(lines)


def write_report(stem, meta, ceil, rows, title, legend, problems, compact, geo, final):
    """stem.json (meta, ceilings, rows) and stem.md: the run's header, `legend` (what the columns mean), the
    `problems` line, the `compact` and `geo` tables, the error notes and every side's row (bench_norm.py too)."""
    os.makedirs(os.path.dirname(stem) or ".", exist_ok=True)
    with open(stem + ".json", "w") as f:
        json.dump({"meta": meta, "ceilings": ceil, "rows": rows}, f, indent=1)
    ceil_txt = ", ".join(f"{k} {v:.2f}" for k, v in ceil.items())
    md = [f"# {title} — {meta['device']}" + (" (SMALL shapes)" if meta["small"] else "")
          + ("" if final else " (in progress)"), "",
          f"- device: {meta['device']}, driver {meta['driver']}",
          f"- torch {meta['torch']} (cuDNN {meta['cudnn']}), triton {meta['triton']}, CUDA {meta['cuda']}; "
          f"fusejit {meta['fusejit']}",
          f"- commit: {meta['commit']}",
          f"- command: `{meta['command']}`",
          f"- date: {meta['date']}; elapsed {meta.get('elapsed_s', '?')} s",
          f"- ceilings measured in this run: {ceil_txt}", "", legend, "", problems, "", compact, ""]
    if geo:
        md += ["Geomean of fusejit / side over the problems of each mode:", "", geo, ""]
    notes = error_notes(rows)
    if notes:
        md += [notes, ""]
    md += ["## Every side", "", full_table(rows), ""]
    if meta.get("stopped"):
        md += [f"Stopped early: {meta['stopped']}", ""]
    with open(stem + ".md", "w") as f:
        f.write("\n".join(md))


def write_results(stem, meta, ceil, rows, sides, final=False):
    compact = compact_table(rows, sides)
    geo = geomean_table(rows, sides)
    legend = (f"Median ms (up to {meta['trials']} trials, at most ~{meta['max_side_s']} s per side, L2 flushed before "
              f"each; CUDA events). cudnn = F.conv2d alone (cudnn.benchmark {meta['cudnn_benchmark']}); eager = the "
              f"whole chain; compile = torch.compile default, max-autotune = max-autotune-no-cudagraphs; fusejit = "
              f"heuristic config, autotune off. fj/side = fusejit ms / side ms (< 1: fusejit faster). GFLOP = conv "
              f"FLOPs (2*N*Ho*Wo*Cout*Cin/g*kh*kw); floor = max(GFLOP / the mode's torch.mm rate, bytes (x, w, "
              f"biases, output once) / copy bandwidth); fj x floor = fusejit ms / floor. rel L2 vs a float64 "
              f"reference (GPU, same rounded inputs) on the first {meta['ref_batch']} image(s) of the batch only; "
              f"'!' = above fusejit's tolerance for the precision. fj kernels: the kernels of fusejit's plan.")
    problems = "Problems: " + "; ".join(f"{i} {P['name']} = {P['formula']}" for i, P in enumerate(PROBLEMS, 1)) + "."
    write_report(stem, meta, ceil, rows, "fusejit conv chains vs PyTorch", legend, problems, compact, geo, final)
    return compact, geo
