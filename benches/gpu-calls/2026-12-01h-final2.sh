#!/usr/bin/env bash
# Second final device call of session 2026-12-01h, on the final code (.gpu/cand/fin: the committed kernels — st's
# key split with gla_fwd_ksum — with the scalar gates' one-group variants back on cp.async, and the default-variant
# choices of this session). The first final call's default-variant shape sweep stopped at a harness bug (it derived
# an invalid materialized variant from the new two-CTA default); here it runs again, fixed, for gla and mamba2, then
# 64-bit offsets, then the final build timed on the shapes whose best variant's code differs from the benchmarked
# build's (Mamba-2 w8p4 variants) and on the key split (GLA 8×4096×8×256).
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/r; mkdir -p $L
cap() { local left=$((280 - SECONDS)); [ "$left" -lt "$1" ] && echo $((left > 5 ? left : 5)) || echo "$1"; }
t=.gpu/cand/fin/gpu_forward
( time GLA_REQUIRE_GPU=1 GLA_TEST_GATES=gla,mamba2 timeout $(cap 130) $t --test-threads=1 --nocapture shapes_varlen ) > $L/shapes.log 2>&1
grep -E "test result|real" $L/shapes.log; grep -A10 "out of tolerance\|panicked" $L/shapes.log | head -14
( time GLA_REQUIRE_GPU=1 timeout $(cap 70) $t --test-threads=1 --nocapture offsets_beyond ) > $L/offsets.log 2>&1
grep -E "rel RMS|test result|real" $L/offsets.log
( timeout $(cap 40) .gpu/cand/fin/bench --out $L/fin_m2.json --reps 50 --gates mamba2 --variants w8p4 --shapes "8,4096,16,128;32,1024,16,128;2,16384,16,128" ) > $L/fin_m2.log 2>&1
grep -E "best|copy" $L/fin_m2.log
( timeout $(cap 25) .gpu/cand/fin/bench --out $L/fin_ks.json --reps 50 --gates gla --variants ks2 --shapes "8,4096,8,256" ) > $L/fin_ks.log 2>&1
grep -E "best" $L/fin_ks.log
cd $L && tar czf $OUT/final2.tgz * && cd - > /dev/null && rm -rf $L
echo "call took $SECONDS s"
