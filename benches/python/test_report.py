#!/usr/bin/env python3
"""CPU test of report.py's strength axis and forward.json (no torch, no matplotlib needed):

    python3 benches/python/test_report.py

Builds a small run folder of made-up records (two shapes, three strengths, ours + fla + SDPA; the values are
fixtures, not measurements), runs report.py --run on it and checks forward.json's rows and the strength table.
"""
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import report  # noqa: E402


def check(cond, msg):
    if not cond:
        raise SystemExit(f"TEST FAILED: {msg}")
    print(f"ok: {msg}")


def main():
    shapes = [(8, 4096, 16, 128), (8, 4096, 8, 256)]
    strengths = [("gla/16", "gla", 0.25), ("gla/1", "gla_n1", 0.30), ("const-60", "const_m60", 0.40)]
    ours, fla_recs = [], []
    for s in shapes:
        b, t, h, d = s
        scale = 1.0 if d == 128 else 2.0
        for st, gate, ms in strengths:
            ours.append({"impl": "ours", "pass": "fwd", "gate": gate, "strength": st, "formula": st, "axis": "strength",
                         "B": b, "T": t, "H": h, "D": d, "shape": list(s), "ms": ms * scale, "variant": f"v.{gate}",
                         "rel_rms_vs_f64": 2e-3, "copy_gbps": 4200.0})
            fla_recs.append({"impl": "fla.chunk_gla", "gate": "gla", "strength": st, "formula": st, "pass": "fwd",
                             "shape": list(s), "status": "ok", "ms": 1.3 * scale})
        for v, ms in (("best", 0.24), ("other", 0.5)):
            ours.append({"shape": list(s), "gate": "gla", "variant": v, "ms": ms * scale, "pass": "fwd",
                         "strength": "gla/16", "axis": "variant", "copy_gbps": 4200.0})
        ours.append({"shape": list(s), "gate": "mamba2", "variant": "m", "ms": 0.19 * scale, "pass": "fwd",
                     "strength": "mamba2", "axis": "variant"})
        fla_recs.append({"impl": "fla.chunk_simple_gla", "gate": "mamba2", "pass": "fwd", "shape": list(s),
                         "status": "ok", "ms": 0.41 * scale})
        fla_recs.append({"impl": "torch.sdpa_flash", "gate": None, "pass": "fwd", "shape": list(s), "status": "ok",
                         "ms": 1.7 * scale})
    with tempfile.TemporaryDirectory() as tmp:
        run = os.path.join(tmp, "run")
        os.makedirs(run)
        with open(os.path.join(run, "ours.json"), "w") as f:
            json.dump(ours, f)
        with open(os.path.join(run, "fla.json"), "w") as f:
            json.dump({"schema": "fla_bench/1", "meta": {}, "copy": {"gbps": 4200.0}, "records": fla_recs,
                       "accuracy": []}, f)
        out = os.path.join(tmp, "results")
        report.main(["--run", run, "--out-dir", out])
        with open(os.path.join(out, "forward.json")) as f:
            fj = json.load(f)
        md = open(os.path.join(out, "forward.md")).read()
    rows = fj["rows"]
    check(fj["schema"] == "gla_forward/1", "forward.json schema")
    keys = {"impl", "pass", "gate", "strength", "B", "T", "H", "D", "ms"}
    check(all(keys <= set(r) for r in rows), "every row has impl, pass, gate, strength, B, T, H, D, ms")
    ours_st = [r for r in rows if r["impl"] == "ours" and r["strength"] in ("gla/16", "gla/1", "const-60")]
    check(len(ours_st) == 6, f"ours: 3 strengths x 2 shapes ({len(ours_st)})")
    check(all(r["ms"] in (0.25, 0.30, 0.40, 0.5, 0.6, 0.8) for r in ours_st), "ours' strength rows keep their ms")
    check(sum(r["impl"] == "fla" and r["gate"] == "fla.chunk_gla" for r in rows) == 6, "fla: 3 strengths x 2 shapes")
    check(sum(r["impl"] == "sdpa" for r in rows) == 2 and all(r["gate"] is None for r in rows if r["impl"] == "sdpa"),
          "sdpa rows, gate null")
    check(any(r["impl"] == "ours" and r["strength"] == "mamba2" and r["ms"] == 0.19 for r in rows),
          "the sweep's best mamba2 row")
    check(not any(r["impl"] == "ours" and r.get("best_of_sweep") and r["gate"] == "gla" for r in rows),
          "gla/16 from the strength axis, not duplicated from the sweep")
    check("## Per-key forward at every gate strength" in md, "strength section in forward.md")
    check("0.250 / 1.300 (5.20×)" in md, "a strength cell: ours / fla (speedup)")
    check("| 8,4096,16,128 | 0.250 / 1.300 (5.20×) | 0.300 / 1.300 (4.33×) | 0.400 / 1.300 (3.25×) | 1.60× |" in md,
          "a full strength row with slowest / fastest")
    check("| 8,4096,16,128 | gla | best (best) | 0.240 |" in md, "the forward table still lists the sweep")
    print("test_report: all ok")


if __name__ == "__main__":
    main()
