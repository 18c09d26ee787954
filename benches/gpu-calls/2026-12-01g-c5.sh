#!/usr/bin/env bash
# Device call 5 of session 2026-12-01g: kernel v11e (gate_decays_vec: the decays run speculatively as if the chunk
# were mild and the mild vote is the barrier that ends them; non-mild chunks recompute Γ and reload q, k) against
# the v11d build (.gpu/alt/bench_v11d) and v10, GLA w8p4g, interleaved twice; then correctness of every per-key
# wgmma variant and the warp-specialised sweep of the per-key gates (logits ±12: both paths).
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/r; mkdir -p $L
t=$(ls .gpu/tests/gpu_forward-*)
for r in 1 2; do for b in bin/bench alt/bench_v11d alt/bench_v10; do
  n=$(basename $b)
  ( timeout 40 .gpu/$b --out $L/ab_${n}_$r.json --reps 50 --gates gla --variants w8p4g --shapes "8,4096,16,128;2,16384,16,128" ) > $L/ab_${n}_$r.log 2>&1
  echo "== $n run $r"; grep -v screening $L/ab_${n}_$r.log | grep " ms " | grep -v best | head -4
done; done
( time GLA_REQUIRE_GPU=1 GLA_TEST_GATES=gla,hgrn2,rwkv6 GLA_TEST_VARIANTS=g.fused timeout 100 $t --test-threads=1 --nocapture every_variant ) > $L/every_wg.log 2>&1
grep -E "^\||test result|real" $L/every_wg.log | tail -10; grep -A14 "out of tolerance\|panicked" $L/every_wg.log | head -20
( time GLA_REQUIRE_GPU=1 GLA_TEST_GATES=gla,hgrn2,rwkv6 GLA_TEST_VARIANTS=g.fused timeout 150 $t --test-threads=1 --nocapture warp_specialised ) > $L/ws_shapes.log 2>&1
grep -E "test result|real|runs|^\| [a-z]" $L/ws_shapes.log | tail -10; grep -A10 "out of tolerance\|panicked" $L/ws_shapes.log | head -12
cd $L && tar czf $OUT/c5.tgz . && cd - > /dev/null
echo "call took $SECONDS s"
