"""bench/bench_gemm.py's output: number formats, the compact and per-side markdown tables, the error notes
and the .json / .md result files (bench_conv.py and bench_norm.py read fmt_* through bench_gemm)."""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from gemm_problems import CHAINS, FJ_SIDES, TOL, TORCH_SIDES  # noqa: E402  (FJ_SIDES: parse_sides adds fj:<label>)


def fmt_ms(v):
    if v is None:
        return ""
    return f"{v:.3f}" if v >= 0.1 else f"{v:.4f}" if v >= 0.001 else f"{v:.1e}"


def fmt_tflops(v):
    return "" if not v else f"{v:.0f}" if v >= 100 else f"{v:.1f}" if v >= 1 else f"{v:.3f}"


def fmt_err(r):
    if r.get("rel_l2") is None:
        return ""
    e = r["rel_l2"]
    return f"{e:.1e}" + ("!" if e > TOL[r["mode"]] else "")


def short_err(r):
    if "skipped" in r:
        return "skip"
    return "ERR" if "error" in r else None


def groups_of(rows):
    """{(shape label, chain, mode): {side: row}} in first-seen order."""
    groups = {}
    for r in rows:
        groups.setdefault((r["shape"], r["chain"], r["mode"]), {})[r["side"]] = r
    return groups


def compact_table(rows, sides):
    groups = groups_of(rows)
    present = [s for s in sides if any(s in g for g in groups.values())]
    tsides = [s for s in present if s in TORCH_SIDES]
    fsides = [s for s in present if s in FJ_SIDES]
    tf_sides = [s for s in present if s == "cublas" or s in FJ_SIDES]
    head = (["shape", "chain", "mode", "floor ms"] + [f"{s} ms" for s in present] + [f"{s} TF/s" for s in tf_sides]
            + [f"{'fj' if f == 'fusejit' else 'fj-tuned' if f == 'fusejit-tuned' else f}/{t}" for f in fsides for t in tsides]
            + [f"err {s}" for s in present])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for (shape, chain, mode), g in groups.items():
        any_row = next(iter(g.values()))
        cells = [shape, f"{chain} {CHAINS[chain][0]}", mode, fmt_ms(any_row.get("floor_ms"))]
        for s in present:
            r = g.get(s)
            cells.append("" if r is None else (short_err(r) or fmt_ms(r["median_ms"])))
        for s in tf_sides:
            r = g.get(s)
            cells.append(fmt_tflops(r.get("tflops")) if r is not None else "")
        for f in fsides:
            for t in tsides:
                rf, rt = g.get(f), g.get(t)
                ok = rf and rt and rf.get("median_ms") and rt.get("median_ms")
                cells.append(f"{rf['median_ms'] / rt['median_ms']:.2f}" if ok else "")
        for s in present:
            r = g.get(s)
            cells.append("" if r is None else fmt_err(r))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def error_notes(rows, where=lambda r: f"{r['shape']} {r['chain']} {r['mode']}"):
    """The failed sides, one line per side and message (the rows it happened in listed, as `where` names them)."""
    by = {}
    for r in rows:
        if r.get("error"):
            first = (r["error"].strip().splitlines() or [""])[0][:200]
            by.setdefault((r["side"], first), []).append(where(r))
    out = []
    for (side, msg), where in by.items():
        more = f" and {len(where) - 6} more" if len(where) > 6 else ""
        out.append(f"- ERR {side}: {msg} [{'; '.join(where[:6])}{more}]")
    return "\n".join(out)


def full_table(rows):
    head = ["shape", "chain", "mode", "floor ms", "side", "median ms", "mean ms", "trials", "TFLOP/s",
            "x floor", "fusejit / side", "rel L2", "max abs", "compile s", "note"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    groups = groups_of(rows)
    for (shape, chain, mode), g in groups.items():
        for side, r in g.items():
            base = [shape, f"{chain} {CHAINS[chain][0]}", mode, fmt_ms(r.get("floor_ms")), side]
            if "median_ms" not in r:
                note = r.get("skipped") or ("error: " + r.get("error", "").splitlines()[0][:160] if r.get("error") else "")
                lines.append("| " + " | ".join(base + [""] * 9 + [note.replace("|", "/")]) + " |")
                continue
            ratios = []
            if side in TORCH_SIDES:
                for f in FJ_SIDES:
                    rf = g.get(f)
                    if rf and rf.get("median_ms"):
                        ratios.append(f"{'fj' if f == 'fusejit' else 'tuned' if f == 'fusejit-tuned' else f} "
                                      f"{rf['median_ms'] / r['median_ms']:.2f}")
            note = "; ".join(v for v in (r.get("kernel"), r.get("note")) if v)
            cs = r.get("compile_s")
            lines.append("| " + " | ".join(base + [
                fmt_ms(r["median_ms"]), fmt_ms(r["mean_ms"]), str(r["trials"]), fmt_tflops(r["tflops"]),
                f"{r['median_ms'] / r['floor_ms']:.2f}" if r.get("floor_ms") else "",
                ", ".join(ratios), fmt_err(r),
                "" if r.get("max_abs") is None else f"{r['max_abs']:.1e}",
                "" if cs is None else f"{cs:.1f}", note.replace("|", "/")]) + " |")
    return "\n".join(lines)


def write_results(path_stem, meta, ceil, rows, sides, final=False):
    os.makedirs(os.path.dirname(path_stem) or ".", exist_ok=True)
    with open(path_stem + ".json", "w") as f:
        json.dump({"meta": meta, "ceilings": ceil, "rows": rows}, f, indent=1)
    ceil_txt = ", ".join(f"{k} {v:.2f}" for k, v in ceil.items())
    compact = compact_table(rows, sides)
    md = [f"# fusejit GEMM chains vs PyTorch — {meta['device']}, driver {meta['driver']}, torch {meta['torch']}, "
          f"triton {meta['triton']}, {meta['date'][:10]}, commit {meta['commit']}"
          + (" (SMALL shapes)" if meta["small"] else "") + ("" if final else " (in progress)"), "",
          f"Ceilings measured in this run: {ceil_txt}.", "",
          f"Median ms (up to {meta['trials']} trials, L2 flushed before each; CUDA events). torch.compile modes: "
          f"compile = default, max-autotune = max-autotune-no-cudagraphs. fj/side = fusejit ms / side ms "
          f"(< 1: fusejit faster). err = rel L2 vs a float64 reference on the same (upcast) inputs; cublas's is "
          f"the anchor's (vs fp64 y); '!' = above fusejit's tolerance for the precision. Floor = max(FLOPs / the "
          f"mode's cuBLAS rate, bytes / copy bandwidth). Chains: "
          + "; ".join(f"{k} {v[0]} = {v[2]}" for k, v in CHAINS.items()) + ".", "",
          "## Summary", "", compact, "", error_notes(rows), "", "## Every side", "", full_table(rows), ""]
    if meta.get("stopped"):
        md += [f"Stopped early: {meta['stopped']}", ""]
    with open(path_stem + ".md", "w") as f:
        f.write("\n".join(md))
    return compact
