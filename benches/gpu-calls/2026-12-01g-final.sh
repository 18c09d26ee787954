#!/usr/bin/env bash
# Final device call of session 2026-12-01g (kernel v11e: TMA loads of the per-key wgmma-score variants, EMPTY
# taken by the issuing warp only, speculative decays ended by the mild vote). First an A/B of ours new build vs the
# v11d build (.gpu/alt/bench_v11d) and the v10 build (.gpu/alt/bench_v10) at two shapes; then the README's benchmark command (fla 0.6.0 / SDPA / copy
# at every issue shape, fla's error vs f64 and its dumped inputs, ours at every fused bf16 variant, ours on fla's
# inputs); then the GPU tests: every wgmma variant of every gate, the warp-specialised sweep of every non-value
# gate (wgmma variants), the default-variant shape sweep (gla) and 64-bit offsets. Steps capped to end by 580 s.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/r; mkdir -p $L
t=$(ls .gpu/tests/gpu_forward-*)
cap() { local left=$((580 - SECONDS)); [ "$left" -lt "$1" ] && echo $((left > 5 ? left : 5)) || echo "$1"; }
for b in bin/bench alt/bench_v11d alt/bench_v10; do
  n=$(basename $b)
  ( timeout 40 .gpu/$b --out $L/ab_$n.json --reps 50 --gates gla --variants w8p4g --shapes "8,4096,16,128;2,16384,16,128" ) > $L/ab_$n.log 2>&1
  echo "== $n"; grep -v screening $L/ab_$n.log | grep " ms " | head -4
done
( time FLA_AUTOTUNE_IN=benches/results/raw/fla_autotune_h200_d64_d256.tar.gz timeout 300 bash benches/run-gpu.sh $L --variants fused ) > $L/run_gpu.log 2>&1
tail -30 $L/run_gpu.log
rm -rf $L/fla_dump
tar czf $OUT/bench.tgz -C $L . && rm -rf $L && mkdir -p $L
( time GLA_REQUIRE_GPU=1 GLA_TEST_VARIANTS=g.fused timeout $(cap 60) $t --test-threads=1 --nocapture every_variant ) > $L/every_wg.log 2>&1
grep -E "^\||test result|real" $L/every_wg.log | tail -18; grep -A10 "out of tolerance\|panicked" $L/every_wg.log | head -12
( time GLA_REQUIRE_GPU=1 GLA_TEST_VARIANTS=g.fused timeout $(cap 80) $t --test-threads=1 --nocapture warp_specialised ) > $L/ws_shapes.log 2>&1
grep -E "test result|real|runs|^\| [a-z]" $L/ws_shapes.log | tail -18; grep -A10 "out of tolerance\|panicked" $L/ws_shapes.log | head -12
( time GLA_REQUIRE_GPU=1 GLA_TEST_GATES=gla timeout $(cap 60) $t --test-threads=1 --nocapture shapes_varlen ) > $L/shapes.log 2>&1
grep -E "test result|real" $L/shapes.log; grep -A10 "out of tolerance\|panicked" $L/shapes.log | head -12
( time GLA_REQUIRE_GPU=1 timeout $(cap 40) $t --test-threads=1 --nocapture offsets_beyond ) > $L/offsets.log 2>&1
grep -E "rel RMS|test result|real" $L/offsets.log
tar czf $OUT/tests.tgz -C $L . && rm -rf $L
echo "call took $SECONDS s"
