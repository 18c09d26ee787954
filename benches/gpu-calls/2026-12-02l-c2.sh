#!/usr/bin/env bash
# Device call 2 of session 2026-12-02l. c2 = call 1's build without the stagger (no gain, removed) and with slice 0's
# O store of the cluster key split indexed by the real heads (nvh / vhead: it indexed O by the 2H slice heads, so
# it wrote past O — into the final state, which is what broke slice 1's state in call 1 and on ks-cluster).
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/r; mkdir -p $L
cap() { local left=$((560 - SECONDS)); [ "$left" -lt "$1" ] && echo $((left > 5 ? left : 5)) || echo "$1"; }
t=.gpu/cand/c2/gpu_forward
( GLA_REQUIRE_GPU=1 GLA_TEST_GATES=mamba2,gla GLA_TEST_VARIANTS=ks2c timeout $(cap 80) $t --test-threads=1 --nocapture key_slices ) > $L/slices.log 2>&1; echo "slices rc=$?"
grep -E "^\| [a-z]|test result" $L/slices.log | head -40
for r in 1 2; do
( timeout $(cap 70) .gpu/cand/c2/bench --out $L/d256_$r.json --reps 50 --gates gla,mamba2 --variants ks2 --shapes "8,4096,8,256" ) > $L/d256_$r.log 2>&1; echo "d256 rc=$?"
grep -E " ms |failed|rror" $L/d256_$r.log | head -20
done
( GLA_REQUIRE_GPU=1 GLA_TEST_VARIANTS=ks2 timeout $(cap 120) $t --test-threads=1 --nocapture every_variant ) > $L/every.log 2>&1; echo "every rc=$?"
( GLA_REQUIRE_GPU=1 GLA_TEST_VARIANTS=ks2c timeout $(cap 120) $t --test-threads=1 --nocapture warp_specialised ) > $L/ws.log 2>&1; echo "ws rc=$?"
grep -E "test result|testing only|^\| [a-z]+ \| (bf16|f16)" $L/every.log $L/ws.log | tail -30; grep -A12 "panicked\|out of tol" $L/slices.log $L/every.log $L/ws.log | head -30
cd $L && tar czf $OUT/c2.tgz * && cd - > /dev/null && rm -rf $L
echo "call took $SECONDS s"
