#!/usr/bin/env bash
# Final device call of session 2026-12-02k, build e178c2c (the lead segment, v15a): the README's benchmark, then
# the key-split tests on main's (non-cluster) key-split variants, per slice, and the every-variant test of them.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
FLA_AUTOTUNE_IN=benches/results/raw/fla_autotune_h200_d64_d256.tar.gz timeout 330 bash benches/run-gpu.sh $OUT/bench --variants fused; echo "bench rc=$?"
cap() { local left=$((560 - SECONDS)); [ "$left" -lt "$1" ] && echo $((left > 5 ? left : 5)) || echo "$1"; }
t=.gpu/bin/gpu_forward
( GLA_REQUIRE_GPU=1 GLA_TEST_GATES=mamba2,gla timeout $(cap 60) $t --test-threads=1 --nocapture key_slices ) > $OUT/slices.log 2>&1; echo "slices rc=$?"
( GLA_REQUIRE_GPU=1 GLA_TEST_VARIANTS=ks2 timeout $(cap 90) $t --test-threads=1 --nocapture every_variant ) > $OUT/every_ks2.log 2>&1; echo "every ks2 rc=$?"
grep -E "test result|^\| [a-z]+ \| (bf16|f16)" $OUT/slices.log $OUT/every_ks2.log | tail -12; grep -A6 panicked $OUT/slices.log $OUT/every_ks2.log | head -14
echo "call took $SECONDS s"
