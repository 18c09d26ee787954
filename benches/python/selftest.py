#!/usr/bin/env python3
"""CPU self-test of fla_bench.py and report.py (no GPU, no Triton kernels).

    PYTHONPATH=/tmp/site python3 benches/python/selftest.py [--keep DIR]

Needs torch (CPU is enough), numpy, and fla-core importable (pip install --no-deps --target /tmp/site
fla_core-0.6.0-py3-none-any.whl; it also needs einops and packaging); matplotlib optional (plot). Runs fla_bench.py
--dry-run on tiny shapes (fla's naive recurrences stand in for the Triton ops, whose call signatures are checked),
checks its JSON and raw dump, then runs report.py on (a) that JSON + fake "ours" records derived from it, (b) the
gpu.md sample + testdata/fake_ours.json, (c) no inputs at all.
"""
import argparse
import json
import os
import shutil
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import fla_bench  # noqa: E402
import report  # noqa: E402


def check(cond, msg):
    if not cond:
        raise SystemExit(f"SELFTEST FAILED: {msg}")
    print(f"ok: {msg}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--keep", default=None, help="write outputs here instead of a temp dir")
    args = ap.parse_args()
    tmp = args.keep or tempfile.mkdtemp(prefix="gla_selftest_")
    os.makedirs(tmp, exist_ok=True)
    fla_json = os.path.join(tmp, "fla.json")

    # 1. fla_bench dry run (every case)
    fla_bench.main(["--dry-run", "--out", fla_json, "--autotune-cache-out", os.path.join(tmp, "at.tgz"),
                           "--autotune-cache-in", os.path.join(tmp, "at.tgz")])
    d = json.load(open(fla_json))
    check(d["schema"] == "fla_bench/1", "schema tag")
    check(d["copy"] and d["copy"]["gbps"] > 0, "copy bandwidth measured")
    ok = [r for r in d["records"] if r["status"] == "ok"]
    check(len(ok) == len(d["records"]) == 3 * 3 + 2, f"all {len(d['records'])} timing records ok")
    check(all(r["ms"] > 0 and r["first_call_s"] is not None and r["reps"] == 3 for r in ok), "ms/first_call_s/reps")
    acc = d["accuracy"]
    check(len(acc) == 8 and all(a["status"] == "ok" for a in acc), "8 accuracy records")
    check(all(1e-4 < a["rel_rms"] < 1e-2 for a in acc), "bf16-output error in (1e-4, 1e-2)")
    check(all(a["naive_f32_rel_rms"] < 1e-5 for a in acc), "f64 reference agrees with fla's naive recurrence")

    # 1a. autotune cache export/import round trip (Triton's cache dir redirected to a temp dir)
    os.environ["TRITON_CACHE_DIR"] = os.path.join(tmp, "tcache")
    os.makedirs(os.path.join(tmp, "tcache", "abc123"), exist_ok=True)
    with open(os.path.join(tmp, "tcache", "abc123", "kern.autotune.json"), "w") as f:
        f.write('{"key": [1], "configs_timings": []}')
    with open(os.path.join(tmp, "tcache", "abc123", "kern.cubin"), "w") as f:
        f.write("x")
    check(fla_bench._triton_cache_dir() == os.path.join(tmp, "tcache"), "Triton cache dir follows TRITON_CACHE_DIR")
    check(fla_bench.autotune_cache_export(os.path.join(tmp, "at2.tgz")) == 1, "autotune export (json only)")
    os.environ["TRITON_CACHE_DIR"] = os.path.join(tmp, "tcache2")
    check(fla_bench.autotune_cache_import(os.path.join(tmp, "at2.tgz")) == 1
          and os.path.exists(os.path.join(tmp, "tcache2", "abc123", "kern.autotune.json")), "autotune import")
    del os.environ["TRITON_CACHE_DIR"]

    # 1b. the CUDA branch of Timer.measure with CPU stand-ins for events, sleep and synchronize
    import time as _time
    import torch

    class FakeEvent:
        def __init__(self, enable_timing=False):
            assert enable_timing
            self.t = None

        def record(self):
            self.t = _time.perf_counter()

        def elapsed_time(self, other):
            return (other.t - self.t) * 1e3

    saved = (torch.cuda.Event, torch.cuda._sleep, torch.cuda.synchronize)
    calls = []
    torch.cuda.Event, torch.cuda._sleep = FakeEvent, (lambda n: calls.append(n))
    torch.cuda.synchronize = lambda *a: None
    try:
        timer = fla_bench.Timer("cpu", 1, 123)
        timer.cuda = True
        ms = timer.measure(lambda: _time.sleep(0.002), lambda: None, 5)
    finally:
        torch.cuda.Event, torch.cuda._sleep, torch.cuda.synchronize = saved
    check(len(ms) == 5 and all(1.5 < x < 50 for x in ms) and calls == [123] * 5, f"CUDA timing branch ({ms[0]:.2f} ms)")

    # 2. raw dump readable as described by its header
    dd = os.path.join(tmp, "fla_dump")
    hdr = json.load(open(os.path.join(dd, "header.json")))
    arrs = {}
    for name, t in hdr["tensors"].items():
        a = np.fromfile(os.path.join(dd, t["file"]), dtype="<f4")
        check(a.size == int(np.prod(t["shape"])), f"dump {name} size {t['shape']}")
        arrs[name] = a.reshape(t["shape"]).astype(np.float64)
    o, ref = arrs["o_fla"], arrs["o_ref"]
    err = float(np.sqrt(((o - ref) ** 2).sum() / (ref ** 2).sum()))
    check(abs(err - hdr["rel_rms_fla_vs_ref"]) < 1e-6, f"dump rel_rms reproduces ({err:.3e})")
    # recompute the reference from the dumped inputs in numpy f64
    q, k, v, g = arrs["q"], arrs["k"], arrs["v"], arrs["g"]
    b, t, h, dk = q.shape
    s = np.zeros((b, h, dk, v.shape[-1]))
    o2 = np.zeros_like(v)
    for i in range(t):
        s = s * np.exp(g[:, i])[..., None] + k[:, i][..., None] * v[:, i][..., None, :]
        o2[:, i] = np.einsum("bhk,bhkv->bhv", q[:, i] * hdr["scale"], s)
    check(np.abs(o2 - ref).max() / np.abs(ref).max() < 1e-6, "numpy recurrence on dumped inputs == o_ref")
    check(hdr["x_from_g_mismatches"] == 0, "raw logits recoverable from g")
    check(all(np.all(arrs[n].astype(np.float32).view(np.uint32) & 0xFFFF == 0) for n in ("q", "k", "v")),
          "q,k,v are bf16 values")

    # 3. report on the dry-run JSON + fake ours at the tiny shapes (one gate left out, one field missing)
    fake = []
    for r in ok:
        if r["impl"] == "fla.chunk_gla" and r["pass"] == "fwd":
            fake.append({"shape": r["shape"], "gate": "gla", "variant": "fake", "ms": r["ms"] / 3,
                         "copy_gbps": d["copy"]["gbps"], "rel_rms_vs_f64": 2e-3})
    fake_path = os.path.join(tmp, "ours_tiny.json")
    json.dump(fake, open(fake_path, "w"))
    out1 = os.path.join(tmp, "rep_dry")
    report.main(["--ours", fake_path, "--fla", fla_json, "--out-dir", out1])
    md = open(os.path.join(out1, "forward.md")).read()
    check("| 2,64,2,32 | gla | fake |" in md and "| 2,64,2,32 | mamba2 | — |" in md, "dry-run report rows")

    # 4. report on the gpu.md sample + committed fake ours
    out2 = os.path.join(tmp, "rep_sample")
    report.main(["--ours", os.path.join(HERE, "testdata", "fake_ours.json"),
                 "--fla", os.path.join(HERE, "testdata", "sample_fla_gpumd.json"), "--out-dir", out2])
    md = open(os.path.join(out2, "forward.md")).read()
    check("| 8,4096,8,256 | mamba2 | — | — | 0.591 |" in md, "missing ours entry prints —")
    check("3.33×" in md, "speedup column")

    # 5. nothing at all
    out3 = os.path.join(tmp, "rep_empty")
    report.main(["--ours", os.path.join(tmp, "nope.json"), "--out-dir", out3])
    check(os.path.exists(os.path.join(out3, "forward.md")), "report with no inputs")

    # 6. --run: one run-gpu.sh output folder in, its JSON copied beside the report
    run = os.path.join(tmp, "run")
    os.makedirs(run)
    shutil.copyfile(os.path.join(HERE, "testdata", "fake_ours.json"), os.path.join(run, "ours.json"))
    shutil.copyfile(os.path.join(HERE, "testdata", "sample_fla_gpumd.json"), os.path.join(run, "fla.json"))
    out4 = os.path.join(tmp, "rep_run")
    report.main(["--run", run, "--out-dir", out4])
    check(open(os.path.join(out4, "forward.md")).read() == md, "--run gives the report of --ours / --fla")
    check(all(os.path.exists(os.path.join(out4, n)) for n in ("ours.json", "fla.json")), "--run copies the JSON")
    report.main(["--run", out4, "--out-dir", out4])
    check(open(os.path.join(out4, "forward.md")).read() == md, "--run on the report's own folder")
    print(f"SELFTEST PASSED (outputs in {tmp})")
    if not args.keep:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
