#!/usr/bin/env bash
# Device call 1 of session 2026-12-02l. st = 7a7ec1f + the producer stagger (per key, two TMA groups: group 1's
# first gate waits for group 0's); base = the same with the stagger off. Both have the cluster key split (.ks2c).
# 1. The cluster key split's per-slice test (every gate but the value gate, T = 1, 32, 65, 300, with and without h0).
# 2. d = 256: ks2 (f32 partials + gla_fwd_ksum) against ks2c (DSMEM exchange), GLA and Mamba-2.
# 3. A/B base / st twice interleaved at 8×4096×16×128 and 2×16384×16×128 (GLA w8p8x2g).
# 4. Tests of st: every variant of the ks2 / ks2c and w8p8x2g families.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/r; mkdir -p $L
cap() { local left=$((560 - SECONDS)); [ "$left" -lt "$1" ] && echo $((left > 5 ? left : 5)) || echo "$1"; }
t=.gpu/cand/st/gpu_forward
( GLA_REQUIRE_GPU=1 GLA_TEST_GATES=mamba2,gla GLA_TEST_VARIANTS=ks2c timeout $(cap 80) $t --test-threads=1 --nocapture key_slices ) > $L/slices.log 2>&1; echo "slices rc=$?"
grep -E "^\| [a-z]|test result" $L/slices.log | head -40
( timeout $(cap 70) .gpu/cand/st/bench --out $L/d256.json --reps 50 --gates gla,mamba2 --variants ks2 --shapes "8,4096,8,256" ) > $L/d256.log 2>&1; echo "d256 rc=$?"
grep -E " ms |failed|rror" $L/d256.log | head -20
S2="8,4096,16,128;2,16384,16,128"
for r in 1 2; do
  for c in base st; do
    ( timeout $(cap 45) .gpu/cand/$c/bench --out $L/ab_${c}_$r.json --reps 50 --gates gla --variants w8p8x2g --shapes "$S2" ) > $L/ab_${c}_$r.log 2>&1; echo "rc=$?"
    echo "== $c run $r"; grep -E " ms |failed|rror" $L/ab_${c}_$r.log | grep -v "ks2\|screening" | head -6
  done
done
( GLA_REQUIRE_GPU=1 GLA_TEST_VARIANTS=ks2,w8p8x2g timeout $(cap 150) $t --test-threads=1 --nocapture every_variant ) > $L/every.log 2>&1; echo "every rc=$?"
grep -E "test result|testing only|^\| [a-z]+ \| (bf16|f16)" $L/every.log | tail -12; grep -A12 "panicked\|out of tol" $L/slices.log $L/every.log | head -30
cd $L && tar czf $OUT/c1.tgz * && cd - > /dev/null && rm -rf $L
echo "call took $SECONDS s"
