#!/usr/bin/env python3
"""CPU test of heatmap.py on a fixture cache index (made-up entries, not measurements): the Markdown grid always,
the PNG where matplotlib is installed.

    python3 tuning/python/test_heatmap.py
"""
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import heatmap  # noqa: E402


def entry(gate, dtype, d, bucket, variant, timing):
    return {"key": {"gate": gate, "gate_hash": "0", "pass": "fwd", "dtype": dtype, "dk": d, "dv": d},
            "bucket": {"rows_log2": bucket[0], "tokens_log2": bucket[1]}, "variant": variant, "spec": {},
            "cubin": "x.cubin", "cubin_sha256": "x",
            "validators": {"arch": "sm_90a", "nvrtc_version": [13, 0], "source_sha256": "s",
                           "gpu": {"name": "NVIDIA H200", "sm_count": 132, "compute_capability": [9, 0],
                                   "driver_version": 13000} if timing else None},
            "timing": timing}


def check(cond, msg):
    if not cond:
        raise SystemExit(f"TEST FAILED: {msg}")
    print(f"ok: {msg}")


def main():
    v = "gla.fwd.bf16.C32.c16.k128.v128.bv128.w8p8x2g.fused"
    entries = [
        entry("gla", "bf16", 128, (7, 12), v, {"median_ms": 0.25, "default_ms": 0.25, "candidates": 5, "strengths": []}),
        entry("gla", "bf16", 128, (9, 14), v.replace("w8p8x2g", "w8p4g"), {"median_ms": 0.20, "default_ms": 0.30,
                                                                             "candidates": 5, "strengths": []}),
        entry("mamba2", "f32", 64, (0, 0), "mamba2.fwd.f32.C64.c16.k64.v64.bv64.w8.fused", None),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "index.json"), "w") as f:
            json.dump({"format": 1, "created_by": "fixture", "entries": entries}, f)
        md = heatmap.markdown(heatmap.load(tmp))
        print(md)
        check(md.splitlines()[0] == "| key | any | 2^7 x 2^12 | 2^9 x 2^14 |", "one column a bucket, in order")
        check("| gla bf16 d128 | — | k128.bv128.w8p8x2g 0.250 ms (1.00×) | k128.bv128.w8p4g 0.200 ms (1.50×) |" in md,
              "a timed row: winner, time, gain over the default")
        check("| mamba2 f32 d64 | k64.bv64.w8 (untimed) | — | — |" in md, "an untimed entry says so")
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            print("SKIPPED the PNG: no matplotlib")
            print("test_heatmap: all ok")
            return
        path = heatmap.main([tmp])
        check(os.path.getsize(path) > 5000 and open(path, "rb").read(8) == b"\x89PNG\r\n\x1a\n", "a PNG is written")
    print("test_heatmap: all ok")


if __name__ == "__main__":
    main()
