#!/usr/bin/env bash
# Device call (branch k2-fix) of session 2026-12-02i: v12e, the key split without the sum kernel, with the fix for its
# fault (slice 0's O store indexed by the real head: nvh / vhead instead of a.h / sq.head). k2f = .gpu/cand/k2f
# against fin2 (main: gla_fwd_ksum) at 8×4096×8×256 GLA .ks2, twice interleaved; k2f's key-split tests.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/r; mkdir -p $L
for r in 1 2; do for c in fin2 k2f; do
  ( timeout 25 .gpu/cand/$c/bench --out $L/ab_${c}_$r.json --reps 50 --gates gla --variants ks2 --shapes "8,4096,8,256" ) > $L/ab_${c}_$r.log 2>&1
  echo "== $c run $r"; grep -v screening $L/ab_${c}_$r.log | grep -E " ms |failed|rror" | head -2
done; done
( GLA_REQUIRE_GPU=1 GLA_TEST_VARIANTS=.ks2. timeout 40 .gpu/cand/k2f/gpu_forward --test-threads=1 --nocapture every_variant ) > $L/every_k2f.log 2>&1
( GLA_REQUIRE_GPU=1 GLA_TEST_VARIANTS=.ks2. timeout 60 .gpu/cand/k2f/gpu_forward --test-threads=1 --nocapture warp_specialised ) > $L/ws_k2f.log 2>&1
grep -E "^\| [a-z]|test result" $L/every_k2f.log $L/ws_k2f.log | tail -16; grep -A8 "panicked\|out of tol" $L/every_k2f.log $L/ws_k2f.log | head -10
cd $L && tar czf $OUT/k2.tgz * && cd - > /dev/null && rm -rf $L
echo "call took $SECONDS s"
