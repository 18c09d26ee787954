#!/usr/bin/env bash
# Device call 2 of session 2026-12-02k: why call 1's cluster key-split variants were wrong (final state 0.7, o 0.4).
# l2 = l1 + the per-slice key-split test; dbg = l2 with the cluster launch and its barriers but the partials
# through global memory and gla_fwd_ksum (the exchange switched off): if dbg passes the exchange is at fault,
# else the cluster launch itself. Then l2's lead test with a longer cap (call 1 cut it at 120 s, 168 rows passed).
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/r; mkdir -p $L
cap() { local left=$((560 - SECONDS)); [ "$left" -lt "$1" ] && echo $((left > 5 ? left : 5)) || echo "$1"; }
for c in l2 dbg; do
  ( GLA_REQUIRE_GPU=1 GLA_TEST_GATES=mamba2,gla timeout $(cap 90) .gpu/cand/$c/gpu_forward --test-threads=1 --nocapture key_slices ) > $L/slices_$c.log 2>&1; echo "$c rc=$?"
  grep -E "^\| [a-z]|test result" $L/slices_$c.log | head -40
done
( GLA_REQUIRE_GPU=1 timeout $(cap 240) .gpu/cand/l2/gpu_forward --test-threads=1 --nocapture segments_with_a_lead ) > $L/lead_test.log 2>&1; echo "lead rc=$?"
grep -E "test result" $L/lead_test.log; grep -c "^| " $L/lead_test.log; grep -A10 "panicked" $L/lead_test.log | head -20
cd $L && tar czf $OUT/c2.tgz * && cd - > /dev/null && rm -rf $L
echo "call took $SECONDS s"
