#!/usr/bin/env python3
"""Merge our Rust harness's results with fla's (fla_bench.py) into Markdown tables and a plot.

    python3 benches/python/report.py --run OUT --out-dir benches/results/
    python3 benches/python/report.py --ours ours.json --fla fla.json [more_fla.json ...] --out-dir benches/results/

Writes <out-dir>/forward.md, <out-dir>/forward.json (the rows below), <out-dir>/forward_vs_T.png and
<out-dir>/forward_strength.png (the plots need matplotlib; without it only the Markdown and JSON are written).

forward.json: {"schema": "gla_forward/1", "rows": [{"impl": "ours"|"fla"|"sdpa", "pass": "fwd", "gate": <gate fn
or null>, "strength": <label or null>, "B", "T", "H", "D", "ms", "variant" (ours), "rel_rms_vs_f64" (ours, where
measured)}]}: ours at every strength (the variant the runtime runs) and the best variant of the sweep (gla/16,
mamba2), fla's chunk_gla at every strength (chunk_simple_gla: strength "mamba2"), SDPA (gate and strength null). Every input is optional: a missing file, record or field prints "—".
`--run OUT` takes the files of one `benches/run-gpu.sh OUT` run (OUT/ours.json, OUT/fla.json, OUT/fla_acc.json,
OUT/same_inputs.json; an explicit --ours / --fla / --same-inputs wins) and copies them into <out-dir> under the same
names, so that <out-dir> holds the run's JSON beside its report and the report can be rebuilt from <out-dir> alone
(`--run benches/results/`).

Input schema of --ours (what the Rust bench harness emits): a JSON list of records (a top-level object with a
"records" list is accepted too), one per (shape, gate, variant[, pass]):

    {
      "shape": [B, T, H, D],          # ints; layout [B, T, H, D], D_k = D_v = D
      "gate": "gla" | "mamba2",       # gla: per-key log-gate [B,T,H,D]; mamba2: scalar per head [B,T,H]
      "variant": "C64_c16_...",       # free-form name of the kernel variant
      "ms": 0.412,                    # median forward time in milliseconds (CUDA events, L2 flushed)
      "gbps": 1628.0,                 # bytes(model below) / ms, in GB/s (1e9 B/s)
      "tflops": 125.1,                # flops(model below) / ms, in TFLOP/s (1e12 /s)
      "floor_ms": 0.158,              # bytes / copy bandwidth, in ms
      "copy_gbps": 4240.0,            # device-to-device copy bandwidth measured in the same run (read+write bytes)
      "rel_rms_vs_f64": 2.5e-3,       # sqrt(sum((o - ref)^2) / sum(ref^2)) vs an f64 recurrence, or null
      "pass": "fwd"                   # optional: "fwd" (default) or "fwd_bwd"
    }

Models (also used for fla and wherever a field of ours is missing; element size 2 B for bf16):
    bytes = 2 * (4 * B*T*H*D  +  gate_elems)     q, k, v read + o written, plus the gate input read once;
            gate_elems = B*T*H*D (gla) or B*T*H (mamba2)
    flops = B*H*T * (4*C*D + 4*D*D), C = 64        QK^T and (A)V within each 64-token chunk (full, unmasked
            blocks) + Q S and K^T V against the D x D state; gate arithmetic not counted. Nominal, identical for
            every implementation, so TFLOP/s compares like with like.
    floor_ms = bytes / copy_gbps                  the copy bandwidth counts bytes read + bytes written.

fla's JSON is fla_bench.py's output (schema "fla_bench/1"); several files are merged (later ones win per key).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys

DASH = "—"
ELT = 2  # bf16
CHUNK = 64
RUN_FILES = ("ours.json", "fla.json", "fla_acc.json", "same_inputs.json")  # what benches/run-gpu.sh OUT writes
STRENGTH_ORDER = ["const-1e-6", "gla/16", "hgrn2", "fla", "gla/1", "rwkv6", "gla/0.1", "const-60"]  # weak → strong
FWD_ORDER = [(8, 4096, 16, 128), (8, 4096, 32, 64), (8, 4096, 8, 256), (2, 16384, 16, 128), (32, 1024, 16, 128),
             (8, 4096, 4, 512)]


# --------------------------------------------------------------------------------------------- models
def model_bytes(shape, gate, elt=ELT):
    b, t, h, d = shape
    gate_elems = b * t * h * d if gate == "gla" else b * t * h
    return elt * (4 * b * t * h * d + gate_elems)


def model_flops(shape, chunk=CHUNK):
    b, t, h, d = shape
    return b * h * t * (4 * chunk * d + 4 * d * d)


# --------------------------------------------------------------------------------------------- loading
def load_json(path):
    if not path:
        return None
    if not os.path.exists(path):
        print(f"report: {path} not found; its columns print {DASH}", file=sys.stderr)
        return None
    with open(path) as f:
        return json.load(f)


def load_ours(path):
    data = load_json(path)
    if data is None:
        return []
    recs = data.get("records", []) if isinstance(data, dict) else data
    out = []
    for r in recs:
        if not isinstance(r, dict) or "shape" not in r:
            continue
        r = dict(r)
        r["shape"] = tuple(int(x) for x in r["shape"])
        r.setdefault("pass", "fwd")
        r.setdefault("variant", "?")
        out.append(r)
    return out


def load_fla(paths):
    """Merge fla_bench JSON files: records keyed by (impl, gate, pass, shape); accuracy by (impl, gate, shape,
    gate_dtype); copy from the first file that has one (all listed in copies)."""
    recs, acc, copies, metas, dump, strength = {}, {}, [], [], None, {}
    for p in paths or []:
        d = load_json(p)
        if not d:
            continue
        metas.append(d.get("meta") or {})
        c = d.get("copy") or {}
        if c.get("gbps"):
            copies.append(c["gbps"])
        for r in d.get("records", []):
            st = r.get("strength")
            if st is not None:
                skey = (r.get("impl"), st, r.get("pass", "fwd"), tuple(r.get("shape", ())))
                if not (skey in strength and strength[skey].get("status") == "ok" and r.get("status") != "ok"):
                    strength[skey] = r
                if st != "gla/16":
                    continue  # the forward table's gla column is the paper's gate
            key = (r.get("impl"), r.get("gate"), r.get("pass", "fwd"), tuple(r.get("shape", ())))
            # an ok record is never replaced by a later failed/skipped one
            if key in recs and recs[key].get("status") == "ok" and r.get("status") != "ok":
                continue
            recs[key] = r
        for a in d.get("accuracy", []):
            key = (a.get("impl"), a.get("gate"), tuple(a.get("shape", ())), a.get("gate_dtype"))
            if key in acc and acc[key].get("status") == "ok" and a.get("status") != "ok":
                continue
            acc[key] = a
        dump = d.get("dump") or dump
    return {"records": recs, "accuracy": acc, "copy_gbps": copies[0] if copies else None, "copies": copies,
            "metas": metas, "dump": dump, "strength": strength}


# --------------------------------------------------------------------------------------------- formatting
def num(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def fms(x):
    if not num(x):
        return DASH
    return f"{x:.4f}" if x < 0.1 else f"{x:.3f}"


def fx(x, fmt):
    return format(x, fmt) if num(x) else DASH


def fratio(a, b, fmt=".2f", suffix="×"):
    if num(a) and num(b) and b > 0:
        return f"{a / b:{fmt}}{suffix}"
    return DASH


def shp(s):
    return ",".join(str(x) for x in s)


def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def fla_ms(fla, impl, gate, pss, shape):
    r = fla["records"].get((impl, gate, pss, tuple(shape)))
    return r.get("ms") if r and r.get("status") == "ok" else None


def fla_impl(gate):
    return "fla.chunk_gla" if gate == "gla" else "fla.chunk_simple_gla"


def fla_err(fla, gate, shape):
    """fla's rel RMS at this shape (f32 gate preferred), else the worst at the accuracy shapes, marked '†'."""
    impl = fla_impl(gate)
    same = [a for (i, g, s, gd), a in fla["accuracy"].items()
            if i == impl and g == gate and s == tuple(shape) and a.get("status") == "ok" and num(a.get("rel_rms"))]
    if same:
        same.sort(key=lambda a: a.get("gate_dtype") != "f32")
        return fx(same[0]["rel_rms"], ".2e")
    other = [a["rel_rms"] for (i, g, s, gd), a in fla["accuracy"].items()
             if i == impl and g == gate and a.get("status") == "ok" and num(a.get("rel_rms"))]
    return f"{max(other):.2e}†" if other else DASH


# --------------------------------------------------------------------------------------------- report
def build(ours, fla, note=None):
    lines = []
    m = fla["metas"][0] if fla["metas"] else {}
    lines.append("# GLA forward on the H200: ours vs fla vs SDPA")
    lines.append("")
    if note:
        lines += [f"> {note}", ""]
    info = []
    if m:
        info.append(f"fla run: {m.get('device', DASH)}, torch {m.get('torch', DASH)}, triton {m.get('triton', DASH)}, "
                    f"fla {m.get('fla', DASH)}, dtype {m.get('dtype', DASH)}, gate dtype {m.get('gate_dtype', DASH)}, "
                    f"{m.get('started_at', DASH)}" + (" (**dry run on CPU**)" if m.get("dry_run") else ""))
    ours_copy = [r["copy_gbps"] for r in ours if num(r.get("copy_gbps"))]
    info.append(f"copy bandwidth (read+write): fla run {fx(fla['copy_gbps'], '.0f')} GB/s; "
                f"ours {fx(ours_copy[0], '.0f') if ours_copy else DASH} GB/s")
    info.append("bytes = 2·(4·BTHD + gate elems), flops = BHT·(4·64·D + 4·D²) (nominal); floor = bytes / copy "
                "bandwidth; speedup = fla ms / ours ms; errors: relative RMS vs an f64 recurrence")
    lines += [f"- {s}" for s in info]
    lines.append("")

    # ---------------- forward table
    ours_fwd = [r for r in ours if r.get("pass", "fwd") == "fwd" and r.get("axis") != "strength"]
    keys = []
    for s in FWD_ORDER:
        for g in ("gla", "mamba2"):
            keys.append((s, g))
    extra = set()
    for r in ours_fwd:
        extra.add((r["shape"], r.get("gate")))
    for (impl, g, pss, s) in fla["records"]:
        if pss == "fwd" and impl.startswith("fla."):
            extra.add((tuple(s), g))
    for k in sorted(extra - set(keys), key=lambda k: (k[0][1], k[0], str(k[1]))):
        keys.append(k)
    present = set(extra)
    for (impl, g, pss, s) in fla["records"]:
        if impl == "torch.sdpa_flash":
            present.update({(tuple(s), "gla"), (tuple(s), "mamba2")})
    keys = [k for k in keys if k in present]

    header = ["B,T,H,D", "gate", "ours variant", "ours ms", "fla ms", "speedup", "SDPA ms", "floor ms",
              "ours/floor", "ours GB/s", "ours TFLOP/s", "ours err", "fla err"]
    rows = []
    for shape, gate in keys:
        fms_ = fla_ms(fla, fla_impl(gate), gate, "fwd", shape)
        sdpa = fla_ms(fla, "torch.sdpa_flash", None, "fwd", shape)
        nbytes = model_bytes(shape, gate)
        flops = model_flops(shape)
        recs = sorted([r for r in ours_fwd if r["shape"] == tuple(shape) and r.get("gate") == gate],
                      key=lambda r: r["ms"] if num(r.get("ms")) else float("inf"))
        if not recs:
            recs = [None]
        for i, r in enumerate(recs):
            r = r or {}
            ms = r.get("ms")
            copy = r.get("copy_gbps") if num(r.get("copy_gbps")) else fla["copy_gbps"]
            floor = r.get("floor_ms") if num(r.get("floor_ms")) else (nbytes / (copy * 1e9) * 1e3 if num(copy)
                                                                     else None)
            gbps = r.get("gbps") if num(r.get("gbps")) else (nbytes / (ms * 1e-3) / 1e9 if num(ms) else None)
            tfl = r.get("tflops") if num(r.get("tflops")) else (flops / (ms * 1e-3) / 1e12 if num(ms) else None)
            rows.append([shp(shape), gate, r.get("variant", DASH) + (" (best)" if i == 0 and len(recs) > 1 else ""),
                         fms(ms), fms(fms_), fratio(fms_, ms), fms(sdpa), fms(floor), fratio(ms, floor),
                         fx(gbps, ".0f"), fx(tfl, ".1f"), fx(r.get("rel_rms_vs_f64"), ".2e"),
                         fla_err(fla, gate, shape)])
    lines.append("## Forward")
    lines.append("")
    lines.append(table(header, rows) if rows else "(no forward results)")
    lines.append("")
    if any("†" in row[-1] for row in rows):
        lines.append("† fla's error measured at its accuracy shapes (worst of them), not at this shape.")
        lines.append("")

    # ---------------- gate strength
    lines += strength_section(ours, fla)

    # ---------------- forward + backward
    fb_keys = [tuple(s) for (impl, g, pss, s) in fla["records"] if pss == "fwd_bwd"]
    fb_keys += [r["shape"] for r in ours if r.get("pass") == "fwd_bwd"]
    fb_keys = list(dict.fromkeys(fb_keys))
    if fb_keys:
        rows = []
        for s in fb_keys:
            for gate in ("gla", "mamba2"):
                f = fla_ms(fla, fla_impl(gate), gate, "fwd_bwd", s)
                ob = sorted([r for r in ours if r.get("pass") == "fwd_bwd" and r["shape"] == s
                             and r.get("gate") == gate and num(r.get("ms"))], key=lambda r: r["ms"])
                if f is None and not ob and (fla_impl(gate), gate, "fwd_bwd", s) not in fla["records"]:
                    continue
                o = ob[0] if ob else {}
                rows.append([shp(s), gate, o.get("variant", DASH), fms(o.get("ms")), fms(f), fratio(f, o.get("ms"))])
        lines.append("## Forward + backward")
        lines.append("")
        lines.append(table(["B,T,H,D", "gate", "ours variant", "ours ms", "fla ms", "speedup"], rows))
        lines.append("")

    # ---------------- accuracy
    if fla["accuracy"]:
        rows = []
        for (impl, gate, s, gd), a in fla["accuracy"].items():
            ours_e = [r["rel_rms_vs_f64"] for r in ours if r["shape"] == tuple(s) and r.get("gate") == gate
                      and num(r.get("rel_rms_vs_f64"))]
            rows.append([shp(s), gate, gd or DASH, impl, fx(a.get("rel_rms"), ".2e"), fx(a.get("max_abs_err"), ".2e"),
                         fx(a.get("naive_f32_rel_rms"), ".1e"), f"{max(ours_e):.2e}" if ours_e else DASH,
                         a.get("status", DASH)])
        lines.append("## Accuracy (relative RMS vs f64 recurrence, bf16 q/k/v)")
        lines.append("")
        lines.append(table(["B,T,H,D", "gate", "g dtype", "fla op", "fla rel RMS", "fla max abs", "check‡",
                            "ours (worst variant)", "status"], rows))
        lines.append("")
        lines.append("‡ fla's own naive f32 recurrence vs our f64 reference: validates the reference (≈1e-7).")
        lines.append("")

    # ---------------- fla detail
    if fla["records"]:
        rows = []
        for (impl, gate, pss, s), r in fla["records"].items():
            spread = (f"{fms(r.get('ms_p10'))}–{fms(r.get('ms_p90'))}"
                      if num(r.get("ms_p10")) and num(r.get("ms_p90")) else DASH)
            rows.append([impl, pss, shp(s), gate or DASH, fms(r.get("ms")), spread, fx(r.get("first_call_s"), ".1f"),
                         r.get("reps", DASH), r.get("status", DASH) + (f": {r['error'][:80]}" if r.get("error") else "")])
        lines.append("## Baseline detail (fla, SDPA)")
        lines.append("")
        lines.append(table(["impl", "pass", "B,T,H,D", "gate", "median ms", "p10–p90 ms", "first call s", "reps",
                            "status"], rows))
        lines.append("")
    if fla.get("dump"):
        lines.append(f"Raw inputs/outputs of one accuracy case: `{fla['dump'].get('dir')}` "
                     f"(header.json describes the files).")
        lines.append("")
    return "\n".join(lines)


def ours_strength(ours):
    """{(strength, shape): record} of our strength-axis rows."""
    return {(r["strength"], r["shape"]): r for r in ours if r.get("axis") == "strength" and r.get("strength")}


def fla_strength_ms(fla, st, shape):
    r = fla.get("strength", {}).get(("fla.chunk_gla", st, "fwd", tuple(shape)))
    return r.get("ms") if r and r.get("status") == "ok" else None


def strength_labels(ours, fla):
    seen = {k[0] for k in ours_strength(ours)} | {k[1] for k in fla.get("strength", {}) if k[0] == "fla.chunk_gla"}
    return [s for s in STRENGTH_ORDER if s in seen] + sorted(seen - set(STRENGTH_ORDER))


def strength_section(ours, fla):
    """Markdown: per shape, ours and fla at every per-key gate strength, and ours' slowest / fastest strength."""
    os_ = ours_strength(ours)
    labels = strength_labels(ours, fla)
    if not labels:
        return []
    shapes = sorted({k[1] for k in os_} | {k[3] for k in fla.get("strength", {})},
                    key=lambda s: (FWD_ORDER.index(s) if s in FWD_ORDER else len(FWD_ORDER), s))
    formula = {}
    for r in list(os_.values()) + list(fla.get("strength", {}).values()):
        formula.setdefault(r.get("strength"), r.get("formula"))
    lines = ["## Per-key forward at every gate strength", "",
             "Logits x ~ N(0, 1) (bf16 for ours; fla gets log α computed from fresh f32 x with the same formula); "
             "ours = the variant the runtime runs for the call. Each cell: ours ms / fla ms (fla ÷ ours).", ""]
    lines.append(table(["strength", "log α"], [[s, formula.get(s) or DASH] for s in labels]))
    lines.append("")
    rows = []
    for shape in shapes:
        row = [shp(shape)]
        mine = []
        for st in labels:
            o = (os_.get((st, shape)) or {}).get("ms")
            f = fla_strength_ms(fla, st, shape)
            if num(o):
                mine.append(o)
            row.append(f"{fms(o)} / {fms(f)} ({fratio(f, o)})" if num(o) or num(f) else DASH)
        row.append(f"{max(mine) / min(mine):.2f}×" if len(mine) >= 2 else DASH)
        rows.append(row)
    lines.append(table(["B,T,H,D", *labels, "ours slowest / fastest"], rows))
    lines.append("")
    errs = [(st, sh, r.get("rel_rms_vs_f64"), r.get("variant")) for (st, sh), r in os_.items() if num(r.get("rel_rms_vs_f64"))]
    if errs:
        worst = max(errs, key=lambda e: e[2])
        lines.append(f"Ours vs f64 at B2 T1024 H4 (same gate, dtype and variant as the timed call): worst "
                     f"{worst[2]:.2e} ({worst[0]}, D = {worst[1][3]}).")
        lines.append("")
    return lines


def json_rows(ours, fla):
    """forward.json's rows (schema in the module docstring)."""
    rows = []

    def row(impl, gate, st, shape, ms, **extra):
        b, t, h, d = shape
        rows.append({"impl": impl, "pass": "fwd", "gate": gate, "strength": st, "B": b, "T": t, "H": h, "D": d,
                     "ms": ms, **extra})

    for (st, shape), r in sorted(ours_strength(ours).items(), key=lambda kv: (kv[0][1], kv[0][0])):
        row("ours", r.get("gate"), st, shape, r.get("ms"), variant=r.get("variant"),
            rel_rms_vs_f64=r.get("rel_rms_vs_f64"))
    best = {}
    for r in ours:
        if r.get("axis") == "strength" or r.get("pass", "fwd") != "fwd" or not num(r.get("ms")):
            continue
        key = (r.get("gate"), r["shape"])
        if key not in best or r["ms"] < best[key]["ms"]:
            best[key] = r
    for (gate, shape), r in sorted(best.items(), key=lambda kv: (kv[0][1], str(kv[0][0]))):
        if gate == "gla" and ("gla/16", shape) in ours_strength(ours):
            continue  # the strength axis has this gate and shape already
        row("ours", gate, r.get("strength") or ("gla/16" if gate == "gla" else gate), shape, r["ms"],
            variant=r.get("variant"), rel_rms_vs_f64=r.get("rel_rms_vs_f64"), best_of_sweep=True)
    for (impl, st, pss, shape), r in sorted(fla.get("strength", {}).items(), key=lambda kv: (kv[0][3], kv[0][1])):
        if pss == "fwd" and r.get("status") == "ok":
            row("fla", "fla.chunk_gla", st, shape, r.get("ms"))
    for (impl, gate, pss, shape), r in sorted(fla["records"].items(), key=lambda kv: (kv[0][3], str(kv[0][1]))):
        if pss != "fwd" or r.get("status") != "ok":
            continue
        if impl == "torch.sdpa_flash":
            row("sdpa", None, None, shape, r.get("ms"))
        elif impl == "fla.chunk_simple_gla":
            row("fla", "fla.chunk_simple_gla", "mamba2", shape, r.get("ms"))
        elif impl == "fla.chunk_gla" and ("fla.chunk_gla", "gla/16", "fwd", tuple(shape)) not in fla.get("strength", {}):
            row("fla", "fla.chunk_gla", "gla/16", shape, r.get("ms"))
    return rows


def plot_strength(ours, fla, path):
    """Per benchmark shape, ours and fla forward time (log scale) against the gate strength (weak → strong)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception as e:
        print(f"report: matplotlib unavailable ({e}); no strength plot", file=sys.stderr)
        return False
    os_ = ours_strength(ours)
    labels = strength_labels(ours, fla)
    shapes = sorted({k[1] for k in os_}, key=lambda s: (FWD_ORDER.index(s) if s in FWD_ORDER else len(FWD_ORDER), s))
    if not labels or not shapes:
        return False
    fig, axes = plt.subplots(1, len(shapes), figsize=(4.2 * len(shapes), 4.2), squeeze=False, sharey=True)
    xs = list(range(len(labels)))
    for ax, shape in zip(axes[0], shapes):
        for vals, lab, style in (([(os_.get((st, shape)) or {}).get("ms") for st in labels], "ours", "C0-o"),
                                 ([fla_strength_ms(fla, st, shape) for st in labels], "fla chunk_gla", "C3--s")):
            pts = [(x, v) for x, v in zip(xs, vals) if num(v)]
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], style, label=lab)
        ax.set_yscale("log")
        from matplotlib.ticker import FormatStrFormatter
        ax.yaxis.set_major_formatter(FormatStrFormatter("%g"))
        ax.yaxis.set_minor_formatter(FormatStrFormatter("%g"))
        ax.tick_params(axis="y", which="minor", labelsize=7)
        ax.set_xticks(xs)
        ax.set_xticklabels(labels, rotation=60, fontsize=8)
        ax.set_title(f"B,T,H,D = {shp(shape)}", fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].set_ylabel("forward time (ms), bf16")
    axes[0][0].legend(fontsize=8)
    fig.suptitle("Per-key GLA forward vs gate strength (weak → strong decay; logits x ~ N(0,1))", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def plot(ours, fla, path):
    ours = [r for r in ours if r.get("axis") != "strength"]
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception as e:
        print(f"report: matplotlib unavailable ({e}); no plot", file=sys.stderr)
        return False
    # The T sweep at fixed B*T = 32768 tokens, H = 16, D = 128 (any shapes with H, D equal to the most common).
    shapes = set(tuple(s) for (_, _, pss, s) in fla["records"] if pss == "fwd")
    shapes |= {r["shape"] for r in ours if r.get("pass", "fwd") == "fwd"}
    if not shapes:
        print("report: nothing to plot", file=sys.stderr)
        return False
    hd = {}
    for s in shapes:
        hd[(s[2], s[3])] = hd.get((s[2], s[3]), 0) + 1
    h, d = (16, 128) if (16, 128) in hd else max(hd, key=hd.get)
    same_hd = [s for s in shapes if s[2] == h and s[3] == d]
    # Left: the sweep at a constant token count B·T (the most common one), ours vs fla vs SDPA.
    # Right: a fixed batch (the most common B), T varying — the work grows with T (ours only where fla was not run).
    bt_count = {}
    for s in same_hd:
        bt_count[s[0] * s[1]] = bt_count.get(s[0] * s[1], 0) + 1
    b_count = {}
    for s in same_hd:
        b_count[s[0]] = b_count.get(s[0], 0) + 1
    bt = max(bt_count, key=lambda k: (bt_count[k], k))
    b_fixed = max(b_count, key=lambda k: (b_count[k], k))
    panels = [(sorted((s for s in same_hd if s[0] * s[1] == bt), key=lambda s: s[1]), f"B·T = {bt} tokens"),
              (sorted((s for s in same_hd if s[0] == b_fixed), key=lambda s: s[1]), f"B = {b_fixed}")]
    panels = [p for p in panels if len(p[0]) >= 2] or panels[:1]
    fig, axes = plt.subplots(1, len(panels), figsize=(7 * len(panels), 4.5), squeeze=False)
    from matplotlib.ticker import FormatStrFormatter
    for ax, (sweep, what) in zip(axes[0], panels):
        ts = [s[1] for s in sweep]

        def line(vals, label, style):
            pts = [(t, v) for t, v in zip(ts, vals) if num(v)]
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], style, label=label)

        for gate, col in (("gla", "C0"), ("mamba2", "C1")):
            best = []
            for s in sweep:
                ms = [r["ms"] for r in ours if r["shape"] == s and r.get("gate") == gate
                      and r.get("pass", "fwd") == "fwd" and num(r.get("ms"))]
                best.append(min(ms) if ms else None)
            line(best, f"ours, {gate} (best variant)", f"{col}-o")
            line([fla_ms(fla, fla_impl(gate), gate, "fwd", s) for s in sweep],
                 f"fla {fla_impl(gate)[4:]} ({gate})", f"{col}--s")
            copy = fla["copy_gbps"] or next((r["copy_gbps"] for r in ours if num(r.get("copy_gbps"))), None)
            if copy:
                line([model_bytes(s, gate) / (copy * 1e9) * 1e3 for s in sweep], f"memory floor ({gate})", f"{col}:")
        line([fla_ms(fla, "torch.sdpa_flash", None, "fwd", s) for s in sweep], "SDPA flash causal", "k-^")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(ts)
        ax.set_xticklabels([f"T={s[1]}\nB={s[0]}" for s in sweep])
        ax.yaxis.set_major_formatter(FormatStrFormatter("%g"))
        ax.yaxis.set_minor_formatter(FormatStrFormatter("%g"))
        ax.tick_params(axis="y", which="minor", labelsize=7)
        ax.set_ylabel("forward time (ms)")
        ax.set_title(f"GLA forward, bf16, H={h}, D={d}, {what}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def main(argv=None):
    ap = argparse.ArgumentParser(description="merge ours + fla results into forward.md and forward_vs_T.png")
    ap.add_argument("--ours", default=None, help="our Rust harness's JSON (schema in this file's docstring)")
    ap.add_argument("--fla", nargs="*", default=[], help="fla_bench.py output(s); merged")
    ap.add_argument("--out-dir", default="benches/results/")
    ap.add_argument("--same-inputs", default=None,
                    help="JSON of `bench --fla-dump` (ours vs fla vs f64 on fla's dumped inputs)")
    ap.add_argument("--note", default=None, help="a line quoted under the title (e.g. where the fla figures come from)")
    ap.add_argument("--run", default=None,
                    help="output folder of one `benches/run-gpu.sh OUT` run: reads its ours.json, fla.json, "
                         "fla_acc.json, same_inputs.json and copies them into --out-dir")
    args = ap.parse_args(argv)
    if args.run:
        run_files = {name: os.path.join(args.run, name)
                     for name in RUN_FILES if os.path.exists(os.path.join(args.run, name))}
        args.ours = args.ours or run_files.get("ours.json")
        args.fla = args.fla or [run_files[n] for n in ("fla.json", "fla_acc.json") if n in run_files]
        args.same_inputs = args.same_inputs or run_files.get("same_inputs.json")
        os.makedirs(args.out_dir, exist_ok=True)
        for name, path in run_files.items():
            dest = os.path.join(args.out_dir, name)
            if not os.path.exists(dest) or not os.path.samefile(path, dest):
                shutil.copyfile(path, dest)
    ours = load_ours(args.ours)
    fla = load_fla(args.fla)
    os.makedirs(args.out_dir, exist_ok=True)
    md = build(ours, fla, args.note)
    if args.same_inputs:
        with open(args.same_inputs) as f:
            si = json.load(f)["same_inputs"]
        md += ("\n## Same inputs: ours and fla on one case\n\n"
               f"fla's dumped accuracy case (B,T,H,D = {','.join(map(str, si['shape']))}, per-key gate "
               f"g = logsigmoid(x)/16, bf16 q/k/v; raw logits recovered from g, {si['x_from_g_mismatches']} of "
               f"{si['shape'][0] * si['shape'][1] * si['shape'][2] * si['shape'][3]} differ from the logits fla drew: the inversion rounds) run through "
               f"our `{si['variant']}`:\n\n"
               + table(["ours vs f64", "fla vs f64", "ours vs fla"],
                       [[f"{si['ours_vs_f64']:.3e}", f"{si['fla_vs_f64']:.3e}", f"{si['ours_vs_fla']:.3e}"]]) + "\n")
    md_path = os.path.join(args.out_dir, "forward.md")
    png_path = os.path.join(args.out_dir, "forward_vs_T.png")
    if plot(ours, fla, png_path):
        md += f"\n![forward time vs T]({os.path.basename(png_path)})\n"
    st_path = os.path.join(args.out_dir, "forward_strength.png")
    if plot_strength(ours, fla, st_path):
        md += f"\n![forward time vs gate strength]({os.path.basename(st_path)})\n"
    with open(os.path.join(args.out_dir, "forward.json"), "w") as f:
        json.dump({"schema": "gla_forward/1", "rows": json_rows(ours, fla)}, f, indent=1)
    with open(md_path, "w") as f:
        f.write(md)
    print(md)
    print(f"\nreport: wrote {md_path}" + (f" and {png_path}" if os.path.exists(png_path) else ""), file=sys.stderr)


if __name__ == "__main__":
    main()
