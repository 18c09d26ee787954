#!/usr/bin/env bash
# Device call 2 + final of session 2026-12-03o (one call: the device was unavailable for most of the session), build
# of v18 (per key: the next chunk issued right after the gate, in the fused forward and the segment-state pass).
# First the tests that take the per-key state pass and the exact path (segments with a lead, the warp-specialised
# sweep, also with the opt-in -DGLA_SPLIT_ISSUE=1), a one-run A/B of the three forms at the two shapes that use the
# state pass or not; then the README's benchmark; then the per-key gates' shape sweep for as long as the call has left.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/r; mkdir -p $L
cap() { local left=$((575 - SECONDS)); [ "$left" -lt "$1" ] && echo $((left > 5 ? left : 5)) || echo "$1"; }
b=.gpu/bin/bench; t=.gpu/bin/gpu_forward
( GLA_REQUIRE_GPU=1 GLA_TEST_GATES=gla,rwkv6,hgrn2 timeout 90 $t --test-threads=1 --nocapture segments_with_a_lead ) > $L/lead.log 2>&1; echo "lead rc=$?"
( GLA_REQUIRE_GPU=1 GLA_TEST_VARIANTS=w8p8x2g timeout 40 $t --test-threads=1 --nocapture warp_specialised ) > $L/ws.log 2>&1; echo "ws rc=$?"
( GLA_REQUIRE_GPU=1 GLA_NVRTC_EXTRA="-DGLA_SPLIT_ISSUE=1" GLA_TEST_VARIANTS=w8p8x2g timeout 40 $t --test-threads=1 --nocapture warp_specialised ) > $L/ws_split.log 2>&1; echo "ws split rc=$?"
grep -E "test result" $L/lead.log $L/ws.log $L/ws_split.log; grep -A8 "panicked\|out of tol" $L/lead.log $L/ws.log $L/ws_split.log | head -20
for x in 1 0 s; do
  e="-DGLA_EARLY_ISSUE=$x"; [ $x = s ] && e="-DGLA_SPLIT_ISSUE=1"
  ( GLA_NVRTC_EXTRA="$e" timeout 40 $b --out $L/ab_x${x}.json --reps 50 --gates gla --variants w8p8x2g.fused --shapes "8,4096,16,128;2,16384,16,128" ) > $L/ab_x${x}.log 2>&1; echo "form=$x rc=$?"
  grep -E " ms " $L/ab_x${x}.log | grep -v -E "best|screening" | awk '{print $1, $2, $3, $4, $5}'
done
echo "tests + A/B took $SECONDS s"
FLA_AUTOTUNE_IN=benches/results/raw/fla_autotune_h200_d64_d256.tar.gz timeout $(cap 360) bash benches/run-gpu.sh $L/bench --variants fused; echo "bench rc=$?"
rm -rf $L/bench/fla_dump; for f in ours fla fla_acc same_inputs; do cp $L/bench/$f.json $OUT/ 2>/dev/null; done
( GLA_REQUIRE_GPU=1 GLA_TEST_GATES=rwkv6,hgrn2,gla timeout $(cap 200) $t --test-threads=1 --nocapture shapes_varlen ) > $L/shapes.log 2>&1; echo "shapes rc=$?"
grep -E "test result" $L/shapes.log; grep -A8 "panicked\|out of tol" $L/shapes.log | head -10
cd $L && tar czf $OUT/c2final.tgz * && cd - > /dev/null && rm -rf $L
echo "call took $SECONDS s"
