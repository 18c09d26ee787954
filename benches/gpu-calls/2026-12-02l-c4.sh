#!/usr/bin/env bash
# Device call 4 of session 2026-12-02l. c4 = c3 + wg_desc masks the shared address to 18 bits before it fills the
# descriptor's 14-bit start field (hypothesis from call 3: in a cluster launch the converted shared address of
# CTA rank 1 carries the rank in its high bits, which spilled into the leading-byte offset — used only by the state
# update's N-major K̂ operand, whose 128 columns span two panels: hence slice 1's state wrong, its output right).
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/r; mkdir -p $L
cap() { local left=$((560 - SECONDS)); [ "$left" -lt "$1" ] && echo $((left > 5 ? left : 5)) || echo "$1"; }
t=.gpu/cand/c4/gpu_forward
( GLA_REQUIRE_GPU=1 GLA_TEST_VARIANTS=ks2c timeout $(cap 90) $t --test-threads=1 --nocapture key_slices ) > $L/slices.log 2>&1; echo "slices rc=$?"
grep -E "test result" $L/slices.log; grep -E "^\| [a-z]" $L/slices.log | awk -F'|' '{print $2, $5, $6, $7}' | sort -k2 -g | tail -3
for r in 1 2; do
( timeout $(cap 70) .gpu/cand/c4/bench --out $L/d256_$r.json --reps 50 --gates gla,mamba2 --variants ks2 --shapes "8,4096,8,256" ) > $L/d256_$r.log 2>&1; echo "d256 rc=$?"
grep -E " ms |failed|rror" $L/d256_$r.log | head -20
done
( GLA_REQUIRE_GPU=1 GLA_TEST_VARIANTS=ks2 timeout $(cap 120) $t --test-threads=1 --nocapture every_variant ) > $L/every.log 2>&1; echo "every rc=$?"
( GLA_REQUIRE_GPU=1 GLA_TEST_VARIANTS=ks2 timeout $(cap 150) $t --test-threads=1 --nocapture warp_specialised ) > $L/ws.log 2>&1; echo "ws rc=$?"
grep -E "test result|testing only|^\| [a-z]+ \| (bf16|f16)" $L/every.log $L/ws.log | tail -30; grep -A12 "panicked\|out of tol" $L/slices.log $L/every.log $L/ws.log | head -30
cd $L && tar czf $OUT/c4.tgz * && cd - > /dev/null && rm -rf $L
echo "call took $SECONDS s"
