#!/usr/bin/env bash
# Final device call of session 2026-12-01h (one machine session). Two builds side by side:
#   st = .gpu/cand/st (key split with gla_fwd_ksum), k2 = .gpu/cand/k2 (the committed code: the main pass once a key
#   slice, slice 0 adds slice 1's f32 output; no sum kernel).
# 1. A/B at 8×4096×8×256 (GLA .ks2), twice interleaved, and k2's key-split tests; k2 is chosen if it is faster and
#    its tests pass, else st. 2. The README's benchmark with the chosen build. 3. Its GPU tests: every wgmma variant of
#    every gate, the warp-specialised sweep of the wgmma variants, the default-variant shape sweep (gla, mamba2),
#    64-bit offsets. Every step capped; everything returned in one tarball.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/r; mkdir -p $L
cap() { local left=$((570 - SECONDS)); [ "$left" -lt "$1" ] && echo $((left > 5 ? left : 5)) || echo "$1"; }
for r in 1 2; do for c in st k2; do
  ( timeout 30 .gpu/cand/$c/bench --out $L/ab_${c}_$r.json --reps 50 --gates gla --variants ks2 --shapes "8,4096,8,256" ) > $L/ab_${c}_$r.log 2>&1
  echo "== $c run $r"; grep -v screening $L/ab_${c}_$r.log | grep -E " ms |failed|rror" | head -2
done; done
( GLA_REQUIRE_GPU=1 GLA_TEST_VARIANTS=.ks2. timeout 40 .gpu/cand/k2/gpu_forward --test-threads=1 --nocapture every_variant ) > $L/every_k2.log 2>&1
( GLA_REQUIRE_GPU=1 GLA_TEST_VARIANTS=.ks2. timeout 50 .gpu/cand/k2/gpu_forward --test-threads=1 --nocapture warp_specialised ) > $L/ws_k2.log 2>&1
grep -E "^\| [a-z]|test result" $L/every_k2.log $L/ws_k2.log | tail -16
pick=$(python3 - "$L" <<'PY' || echo st
import json, sys
L = sys.argv[1]; m = {}
for c in ("st", "k2"):
    v = []
    for r in (1, 2):
        try:
            recs = json.load(open(f"{L}/ab_{c}_{r}.json")); recs = recs if isinstance(recs, list) else recs.get("records", [])
            v += [x["ms"] for x in recs if x.get("shape") == [8, 4096, 8, 256]]
        except Exception:
            pass
    if v: m[c] = sum(v) / len(v)
ok = all("test result: ok" in open(f"{L}/{f}").read() for f in ("every_k2.log", "ws_k2.log"))
print(m, "k2 tests ok" if ok else "k2 tests FAILED", file=sys.stderr)
print("k2" if ok and "k2" in m and m["k2"] <= m.get("st", 1e9) else "st")
PY
)
echo "picked: $pick" | tee $L/pick.txt
cp .gpu/cand/$pick/bench .gpu/bin/bench; t=.gpu/cand/$pick/gpu_forward
( time FLA_AUTOTUNE_IN=benches/results/raw/fla_autotune_h200_d64_d256.tar.gz timeout $(cap 300) bash benches/run-gpu.sh $L/bench --variants fused ) > $L/run_gpu.log 2>&1
tail -14 $L/run_gpu.log; rm -rf $L/bench/fla_dump
( time GLA_REQUIRE_GPU=1 GLA_TEST_VARIANTS=g. timeout $(cap 60) $t --test-threads=1 --nocapture every_variant ) > $L/every_wg.log 2>&1
grep -E "^\| [a-z]|test result|real" $L/every_wg.log | tail -16; grep -A10 "out of tolerance\|panicked" $L/every_wg.log | head -12
( time GLA_REQUIRE_GPU=1 GLA_TEST_VARIANTS=g. timeout $(cap 80) $t --test-threads=1 --nocapture warp_specialised ) > $L/ws_shapes.log 2>&1
grep -E "test result|real|runs|^\| [a-z]" $L/ws_shapes.log | tail -17; grep -A10 "out of tolerance\|panicked" $L/ws_shapes.log | head -12
( time GLA_REQUIRE_GPU=1 GLA_TEST_GATES=gla,mamba2 timeout $(cap 80) $t --test-threads=1 --nocapture shapes_varlen ) > $L/shapes.log 2>&1
grep -E "test result|real" $L/shapes.log; grep -A10 "out of tolerance\|panicked" $L/shapes.log | head -12
( time GLA_REQUIRE_GPU=1 timeout $(cap 60) $t --test-threads=1 --nocapture offsets_beyond ) > $L/offsets.log 2>&1
grep -E "rel RMS|test result|real" $L/offsets.log
cd $L && tar czf $OUT/final.tgz * && cd - > /dev/null && rm -rf $L
echo "call took $SECONDS s"
