#!/usr/bin/env python3
"""CPU test of backward_report.py (no torch needed): python3 benches/python/test_backward_report.py

Made-up records (fixtures, not measurements): ours fwd_bwd / bwd rows at two shapes and two gates, an fla run with
one timed fwd_bwd record, one failed one, a gradient-accuracy entry and an activation-memory entry. Checks
backward.json's rows (pass names, speed ratio inputs) and backward.md's tables.
"""
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import backward_report  # noqa: E402


def check(cond, msg):
    if not cond:
        raise SystemExit(f"TEST FAILED: {msg}")
    print(f"ok: {msg}")


def main():
    ours = []
    for (b, t, h, d), base in (((8, 4096, 16, 128), 2.0), ((8, 4096, 8, 256), 4.0)):
        for gate, strength in (("gla", "gla/16"), ("mamba2", "mamba2")):
            for pss, ms in (("fwd_bwd", base + 0.5), ("bwd", base)):
                ours.append({"impl": "ours", "pass": pss, "gate": gate, "strength": strength, "B": b, "T": t, "H": h,
                             "D": d, "shape": [b, t, h, d], "ms": ms, "variant": f"{gate}.x", "distribution": "N(0,1)"})
                if d == 128:  # the walk form beside the chunk form (the chunk form's rows carry no "form": old runs)
                    ours.append({**ours[-1], "form": "walks", "ms": ms / 4})
    ours.append({"impl": "ours", "pass": "fwd", "gate": "gla", "B": 8, "T": 4096, "H": 16, "D": 128, "ms": 0.25})
    fla = {"meta": {"device": "TEST GPU"},
           "records": [{"impl": "fla.chunk_gla", "gate": "gla", "pass": "fwd_bwd", "shape": [8, 4096, 16, 128],
                        "status": "ok", "ms": 5.0},
                       {"impl": "fla.chunk_simple_gla", "gate": "mamba2", "pass": "fwd_bwd",
                        "shape": [8, 4096, 16, 128], "status": "error", "error": "RuntimeError: no"}],
           "accuracy": [{"impl": "fla.chunk_gla", "gate": "gla", "pass": "bwd", "shape": [2, 1024, 16, 128],
                         "status": "ok", "rel_rms_dq": 1e-3, "rel_rms_dk": 2e-3, "rel_rms_dv": 3e-3,
                         "rel_rms_dg": 4e-3},
                        {"impl": "fla.chunk_gla", "gate": "gla", "shape": [2, 1024, 16, 128], "rel_rms": 9e-3}],
           "activation_memory": [{"impl": "fla.chunk_gla", "gate": "gla", "shape": [8, 4096, 16, 128],
                                  "bytes_kept": 128 * 2**20}]}
    with tempfile.TemporaryDirectory() as tmp:
        po, pf = os.path.join(tmp, "ours.json"), os.path.join(tmp, "fla.json")
        json.dump(ours, open(po, "w"))
        json.dump(fla, open(pf, "w"))
        backward_report.main(["--ours", po, "--fla", pf, "--out-dir", tmp, "--note", "fixture"])
        out = json.load(open(os.path.join(tmp, "backward.json")))
        md = open(os.path.join(tmp, "backward.md")).read()
    rows = out["rows"]
    check(out["schema"] == "gla_backward/1" and out["device"] == "TEST GPU", "schema and device")
    check(sum(r["impl"] == "ours" for r in rows) == 12, "ours: 12 rows (the forward row is left out)")
    check(sum(r.get("form") == "walks" for r in rows) == 4, "the walk form's rows keep their form")
    check({r["pass"] for r in rows} == {"fwd+bwd", "bwd"}, "pass names fwd+bwd / bwd")
    check(any(r["impl"] == "fla.chunk_gla" and r["pass"] == "fwd+bwd" and r["ms"] == 5.0 for r in rows),
          "fla's timed fwd_bwd record becomes a fwd+bwd row; the failed one does not")
    check(len(out["accuracy"]) == 1 and out["accuracy"][0]["rel_rms_dg"] == 4e-3, "only the gradient accuracy")
    check("| 8,4096,16,128 | gla | gla/16 | chunks | 2.500 | 2.000 | 5.000 | 2.00× |" in md,
          "speed row with fla's ratio")
    check("| 8,4096,16,128 | gla | gla/16 | walks | 0.625 | 0.500 | 5.000 | 8.00× |" in md,
          "the walk form's row, its own bwd alone")
    check("| 8,4096,8,256 | mamba2 | mamba2 | chunks | 4.500 | 4.000 | — | — |" in md, "a row without fla")
    check("fla could not run: fla.chunk_simple_gla" in md, "fla's failure is said")
    check("| fla.chunk_gla | gla | 8,4096,16,128 | 128.0 | — |" in md, "fla's activation memory")
    check("| ours (chunks) | any | 8,4096,16,128 | 0 | 2064 |" in md, "ours: nothing kept, the chunk form's workspace")
    check("| ours (walks) | any | 8,4096,16,128 | 0 | 260 |" in md, "the walk form's workspace")
    # A run of ours alone over two files (two `bench` calls), the device named on the command line.
    with tempfile.TemporaryDirectory() as tmp:
        p1, p2 = os.path.join(tmp, "a.json"), os.path.join(tmp, "b.json")
        json.dump([r for r in ours if r["D"] == 128], open(p1, "w"))
        json.dump([r for r in ours if r["D"] == 256], open(p2, "w"))
        backward_report.main(["--ours", p1, p2, "--device", "OTHER GPU", "--out-dir", tmp])
        out = json.load(open(os.path.join(tmp, "backward.json")))
        md = open(os.path.join(tmp, "backward.md")).read()
    check(out["device"] == "OTHER GPU" and "- device: OTHER GPU;" in md, "--device names the GPU of a run without fla")
    check(sum(r["impl"] == "ours" for r in out["rows"]) == 12 and all(r["impl"] == "ours" for r in out["rows"]),
          "both files' rows, nothing of fla")
    check("| 8,4096,8,256 | mamba2 | mamba2 | chunks | 4.500 | 4.000 | — | — |" in md, "the second file's shape")
    print("test_backward_report: all ok")


if __name__ == "__main__":
    main()
