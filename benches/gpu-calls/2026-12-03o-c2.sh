#!/usr/bin/env bash
# Device call 2 of session 2026-12-03o. v18b: the early issue in the segment-state pass too (gate_khat_vec). A/B
# against -DGLA_EARLY_ISSUE=0 and the opt-in -DGLA_SPLIT_ISSUE=1 (every warp of a group issues a quarter of the
# chunk's boxes) (same binary, twice interleaved) at the shapes the per-key w8p8x2g serves; then the
# GPU tests that take the state pass (segments with a lead, S = 2, 3, 5) and the warp-specialised sweep of the
# per-key two-group variants, and the rest of the default-variant shape sweep (rwkv6, hgrn2).
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/r; mkdir -p $L
cap() { local left=$((565 - SECONDS)); [ "$left" -lt "$1" ] && echo $((left > 5 ? left : 5)) || echo "$1"; }
b=.gpu/bin/bench; t=.gpu/bin/gpu_forward
S="8,4096,16,128;2,16384,16,128;32,1024,16,128"
for r in 1 2; do
  for x in 1 0 s; do
    e="-DGLA_EARLY_ISSUE=$x"; [ $x = s ] && e="-DGLA_SPLIT_ISSUE=1"
    ( GLA_NVRTC_EXTRA="$e" timeout $(cap 60) $b --out $L/ab_x${x}_$r.json --reps 50 --gates gla,rwkv6 --variants w8p8x2g.fused --shapes "$S" ) > $L/ab_x${x}_$r.log 2>&1; echo "form=$x run $r rc=$?"
    grep -E " ms " $L/ab_x${x}_$r.log | grep -v -E "best|screening" | awk '{print $1, $2, $3, $4, $5}'
    grep -E "failed|rror" $L/ab_x${x}_$r.log | head -3
  done
done
( GLA_REQUIRE_GPU=1 GLA_TEST_GATES=gla,rwkv6,hgrn2 timeout $(cap 120) $t --test-threads=1 --nocapture segments_with_a_lead ) > $L/lead.log 2>&1; echo "lead rc=$?"
( GLA_REQUIRE_GPU=1 GLA_TEST_VARIANTS=w8p8x2g timeout $(cap 60) $t --test-threads=1 --nocapture warp_specialised ) > $L/ws.log 2>&1; echo "ws rc=$?"
( GLA_REQUIRE_GPU=1 GLA_NVRTC_EXTRA="-DGLA_SPLIT_ISSUE=1" GLA_TEST_VARIANTS=w8p8x2g timeout $(cap 60) $t --test-threads=1 --nocapture warp_specialised ) > $L/ws_split.log 2>&1; echo "ws split rc=$?"
grep -E "test result" $L/lead.log $L/ws.log $L/ws_split.log; grep -A8 "panicked\|out of tol" $L/lead.log $L/ws.log $L/ws_split.log | head -20
( GLA_REQUIRE_GPU=1 GLA_TEST_GATES=rwkv6,hgrn2 timeout $(cap 200) $t --test-threads=1 --nocapture shapes_varlen ) > $L/shapes.log 2>&1; echo "shapes rc=$?"
grep -E "test result" $L/shapes.log; grep -A8 "panicked\|out of tol" $L/shapes.log | head -10
cd $L && tar czf $OUT/c2.tgz * && cd - > /dev/null && rm -rf $L
echo "call took $SECONDS s"
