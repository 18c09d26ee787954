#!/usr/bin/env python3
"""The tuning cache as a PNG heatmap: which variant wins per (gate, dtype, d) and shape bucket, and by how much over
the default variant.

    python3 tuning/python/heatmap.py tuning/caches/h200            # writes tuning/caches/h200/heatmap.png

Reads <cache>/index.json (gla-runtime's tuning cache, format 1). One row per key (gate, dtype, d_k x d_v), one
column per shape bucket (N*H = 2^r rows, T = 2^t tokens); a cell's colour is the gain of the cached winner over
the default variant (default ms / winner ms; 1 = the default won), its text the winner's distinguishing id parts
and the gain. Untimed entries (compiled ahead of time without a GPU) are grey. Needs matplotlib; `--markdown`
prints the same grid as a Markdown table instead (no matplotlib).
"""
import argparse
import json
import os
import sys


def load(cache_dir):
    with open(os.path.join(cache_dir, "index.json")) as f:
        index = json.load(f)
    if index.get("format") != 1:
        raise SystemExit(f"{cache_dir}/index.json: format {index.get('format')!r}, expected 1")
    return index["entries"]


def key_label(k):
    d = f"{k['dk']}" if k["dk"] == k["dv"] else f"{k['dk']}x{k['dv']}"
    return f"{k['gate']} {k['dtype']} d{d}"


def short_variant(v):
    """The id parts after gate.fwd.dtype (e.g. C32.c16.k128.v128.bv128.w8p8x2g.fused -> k128.bv128.w8p8x2g)."""
    parts = v.split(".")[3:]
    keep = [p for p in parts if p[0] in "kbw" or p.startswith(("ks", "o2")) or p == "mat"]
    return ".".join(keep) or v


def grid(entries):
    """(row labels, column buckets, {(row, col): entry})."""
    rows = sorted({key_label(e["key"]) for e in entries})
    cols = sorted({(e["bucket"]["rows_log2"], e["bucket"]["tokens_log2"]) for e in entries})
    cells = {(key_label(e["key"]), (e["bucket"]["rows_log2"], e["bucket"]["tokens_log2"])): e for e in entries}
    return rows, cols, cells


def gain(e):
    t = e.get("timing")
    if not t or not t.get("default_ms") or not t.get("median_ms"):
        return None
    return t["default_ms"] / t["median_ms"]


def col_label(c):
    r, t = c
    return "any" if (r, t) == (0, 0) else f"2^{r} x 2^{t}"


def markdown(entries):
    rows, cols, cells = grid(entries)
    out = ["| key | " + " | ".join(col_label(c) for c in cols) + " |", "|---|" + "---|" * len(cols)]
    for r in rows:
        line = []
        for c in cols:
            e = cells.get((r, c))
            if e is None:
                line.append("—")
            elif e.get("timing") is None:
                line.append(f"{short_variant(e['variant'])} (untimed)")
            else:
                g = gain(e)
                line.append(f"{short_variant(e['variant'])} {e['timing']['median_ms']:.3f} ms" + (f" ({g:.2f}×)" if g else ""))
        out.append(f"| {r} | " + " | ".join(line) + " |")
    return "\n".join(out)


def plot(entries, path, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import LinearSegmentedColormap
    rows, cols, cells = grid(entries)
    fig, ax = plt.subplots(figsize=(2.4 * len(cols) + 2.5, 0.55 * len(rows) + 1.8))
    cmap = LinearSegmentedColormap.from_list("gain", ["#ffffff", "#2b8cbe"])
    gmax = max([g for g in (gain(e) for e in entries) if g] + [1.05])
    for i, r in enumerate(rows):
        for j, c in enumerate(cols):
            e = cells.get((r, c))
            g = gain(e) if e else None
            if e is None:
                colour, text = "#f0f0f0", "—"
            elif e.get("timing") is None:
                colour, text = "#d9d9d9", f"{short_variant(e['variant'])}\nuntimed"
            else:
                colour = cmap(min(1.0, ((g or 1.0) - 1.0) / (gmax - 1.0)))
                text = f"{short_variant(e['variant'])}\n{e['timing']['median_ms']:.3f} ms" + (f"  {g:.2f}×" if g else "")
            ax.add_patch(plt.Rectangle((j, i), 1, 1, facecolor=colour, edgecolor="white"))
            ax.text(j + 0.5, i + 0.5, text, ha="center", va="center", fontsize=6.5)
    ax.set_xlim(0, len(cols))
    ax.set_ylim(len(rows), 0)
    ax.set_xticks([j + 0.5 for j in range(len(cols))])
    ax.set_xticklabels([col_label(c) for c in cols], fontsize=8)
    ax.set_yticks([i + 0.5 for i in range(len(rows))])
    ax.set_yticklabels(rows, fontsize=8)
    ax.set_xlabel("shape bucket (sequences x heads, tokens)")
    ax.set_title(title, fontsize=9)
    ax.tick_params(length=0)
    for s in ax.spines.values():
        s.set_visible(False)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("cache", help="tuning cache directory (holds index.json)")
    ap.add_argument("--out", default=None, help="PNG path (default <cache>/heatmap.png)")
    ap.add_argument("--markdown", action="store_true", help="print the grid as Markdown instead (no matplotlib)")
    args = ap.parse_args(argv)
    entries = load(args.cache)
    if not entries:
        raise SystemExit(f"{args.cache}: the cache has no entries")
    if args.markdown:
        print(markdown(entries))
        return None
    gpus = sorted({(e["validators"].get("gpu") or {}).get("name", "") for e in entries if e.get("timing")} - {""})
    title = (f"tuning cache {os.path.basename(os.path.normpath(args.cache))}: winner per key and bucket, gain over the "
             f"default variant" + (f" ({', '.join(gpus)})" if gpus else " (untimed)"))
    path = args.out or os.path.join(args.cache, "heatmap.png")
    plot(entries, path, title)
    print(f"heatmap: wrote {path}", file=sys.stderr)
    return path


if __name__ == "__main__":
    main()
