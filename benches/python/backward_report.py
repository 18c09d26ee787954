#!/usr/bin/env python3
"""The backward's benchmark report: benches/results/backward.json and backward.md from one GPU run.

usage: backward_report.py --ours OURS.json [OURS2.json ...] [--fla FLA.json ...] [--device NAME] [--out-dir benches/results/]
       [--note TEXT]

OURS.json: `bench --backward ... --out OURS.json` (rows {"impl": "ours", "pass": "fwd_bwd" | "bwd", "gate",
"strength", "form": "chunks" | "walks", "B", "T", "H", "D", "ms", "variant", "distribution"}; forward rows are
ignored; a row without "form" is the chunk form; several files: one run's shapes taken by several `bench` calls). FLA.json:
`fla_bench.py --cases gla_fwdbwd,simple_fwdbwd,acc_bwd` (records with "pass": "fwd_bwd", "accuracy" entries with
"pass": "bwd", "activation_memory"). Both runs belong on the same machine in the same call. --device names the GPU where no fla run
does (a run of ours alone: `nvidia-smi --query-gpu=name`).

backward.json: {"schema": "gla_backward/1", "device": ..., "rows": [{"impl": "ours" | "fla.chunk_gla" | ...,
"pass": "fwd+bwd" | "bwd", "gate", "strength", "form"?, "B", "T", "H", "D", "ms", "variant"?, "distribution"}],
"accuracy": [fla's gradient errors vs f64 autograd], "activation_memory": [...]}.
"""
import argparse
import json
import os


def load(path):
    with open(path) as f:
        return json.load(f)


def ours_rows(ours):
    out = []
    for r in ours:
        if r.get("impl") != "ours" or r.get("pass") not in ("fwd_bwd", "bwd") or not r.get("ms"):
            continue
        out.append({"impl": "ours", "pass": "fwd+bwd" if r["pass"] == "fwd_bwd" else "bwd", "gate": r["gate"],
                    "strength": r.get("strength", r["gate"]), "form": r.get("form", "chunks"), "B": r["B"], "T": r["T"], "H": r["H"], "D": r["D"],
                    "ms": r["ms"], "variant": r.get("variant"), "distribution": r.get("distribution")})
    return out


def fla_rows(fla):
    out = []
    for r in fla.get("records", []):
        if r.get("pass") != "fwd_bwd" or r.get("status") != "ok":
            continue
        b, t, h, d = r["shape"]
        gate = r["gate"]
        out.append({"impl": r["impl"], "pass": "fwd+bwd", "gate": gate,
                    "strength": r.get("strength") or ("gla/16" if gate == "gla" else gate), "B": b, "T": t, "H": h,
                    "D": d, "ms": r["ms"], "distribution": "q, k, v, dO ~ N(0,1) bf16; g = gate(x), x ~ N(0,1)"})
    return out


def fla_failures(fla):
    return [r for r in fla.get("records", []) if r.get("pass") == "fwd_bwd" and r.get("status") == "error"]


def shp(r):
    return f"{r['B']},{r['T']},{r['H']},{r['D']}"


def table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ours", required=True, nargs="+")
    ap.add_argument("--device", default=None)
    ap.add_argument("--fla", nargs="*", default=[])
    ap.add_argument("--out-dir", default="benches/results/")
    ap.add_argument("--note", default=None)
    args = ap.parse_args(argv)
    ours = [r for p in args.ours for r in ours_rows(load(p))]
    flas = [load(p) for p in args.fla]
    rows = ours + [r for f in flas for r in fla_rows(f)]
    accuracy = [a for f in flas for a in f.get("accuracy", []) if a.get("pass") == "bwd"]
    memory = []
    for m in (m for f in flas for m in f.get("activation_memory", [])):
        if not any((n["impl"], n["gate"], n["shape"]) == (m["impl"], m["gate"], m["shape"]) for n in memory):
            memory.append(m)  # (one row per op and shape where several runs measured it)
    device = next((f["meta"].get("device") for f in flas if f.get("meta")), None) or args.device
    os.makedirs(args.out_dir, exist_ok=True)
    with open(os.path.join(args.out_dir, "backward.json"), "w") as f:
        json.dump({"schema": "gla_backward/1", "device": device, "note": args.note, "rows": rows,
                   "accuracy": accuracy, "activation_memory": memory}, f, indent=1)

    md = ["# GLA forward + backward: ours vs fla", ""]
    if args.note:
        md += [f"> {args.note}", ""]
    if device:
        md += [f"- device: {device}; bf16; q, k, v, dO ~ N(0, 1); gate logits x ~ N(0, 1); median of CUDA-event "
               "timings with an L2 flush before each call", ""]
    fla_by = {(r["gate"], shp(r)): r["ms"] for r in rows if r["impl"] != "ours" and r["pass"] == "fwd+bwd"}
    body = []
    for r in sorted((r for r in ours if r["pass"] == "fwd+bwd"), key=lambda r: (shp(r), r["strength"], r["form"])):
        bwd = next((o["ms"] for o in ours if o["pass"] == "bwd" and shp(o) == shp(r)
                    and o["strength"] == r["strength"] and o["form"] == r["form"]), None)
        f = fla_by.get((r["gate"], shp(r))) if r["strength"] in ("gla/16", "mamba2") else None
        body.append([shp(r), r["gate"], r["strength"], r["form"], f"{r['ms']:.3f}", f"{bwd:.3f}" if bwd else "—",
                     f"{f:.3f}" if f else "—", f"{f / r['ms']:.2f}×" if f else "—"])
    md += ["## Forward + backward (ms)", "",
           table(["B,T,H,D", "gate", "strength", "form", "ours fwd+bwd", "ours bwd alone", "fla fwd+bwd",
                  "fla ÷ ours"], body), ""]
    fails = [r for f in flas for r in fla_failures(f)]
    if fails:
        md += ["fla could not run: " + "; ".join(f"{r['impl']} {tuple(r['shape'])}: {r.get('error', '?')[:160]}"
                                                 for r in fails), ""]
    if accuracy:
        md += ["## fla's gradient error (relative RMS vs torch autograd through an f64 recurrence)", "",
               table(["fla op", "gate", "B,T,H,D", "dq", "dk", "dv", "dg (d log α)", "status"],
                     [[a["impl"], a["gate"], ",".join(map(str, a["shape"])),
                       *(f"{a[k]:.2e}" if a.get(k) is not None else "—"
                         for k in ("rel_rms_dq", "rel_rms_dk", "rel_rms_dv", "rel_rms_dg")),
                       a.get("status", "—") + (f": {a['error'][:80]}" if a.get("error") else "")]
                      for a in accuracy]), ""]
    if memory:
        # Ours keeps nothing between the passes (the backward recomputes what it needs from q, k, v, logits). The
        # backward's own workspace (BackwardSpec::workspace_elems): the chunk form two f32 state slots a chunk of 32
        # and a sequence, 2·(B·T/32 + B)·H·d_k·d_v·4 B; the walk form q ⊙ dq, Z_N and a scalar gate's row sums,
        # (B·T·H·d_k + B·H·d_k + ⌈d_k/64⌉·B·T·H)·4 B.
        def workspace(form, b, t, h, d):
            if form == "walks":
                return (b * t * h * d + b * h * d + -(-d // 64) * b * t * h) * 4
            return 2 * (b * t // 32 + b) * h * d * d * 4
        shapes = sorted({(r["form"], r["B"], r["T"], r["H"], r["D"]) for r in ours})
        ws = [[f"ours ({form})", "any", f"{b},{t},{h},{d}", "0", f"{workspace(form, b, t, h, d) / 2**20:.0f}"]
              for (form, b, t, h, d) in shapes]
        md += ["## Memory: kept between the passes, and the backward's own workspace", "",
               table(["impl", "gate", "B,T,H,D", "MiB kept (beyond inputs and o)", "MiB workspace in the backward"],
                     [[m["impl"], m["gate"], ",".join(map(str, m["shape"])), f"{m['bytes_kept'] / 2**20:.1f}", "—"]
                      for m in memory] + ws), ""]
    with open(os.path.join(args.out_dir, "backward.md"), "w") as f:
        f.write("\n".join(md))
    print(f"wrote {len(rows)} rows to {os.path.join(args.out_dir, 'backward.json')} and backward.md")


if __name__ == "__main__":
    main()
