#!/usr/bin/env bash
# Final device call of session 2026-12-03o, build of v18 (per key: the next chunk issued right after the gate, in the
# fused forward and the segment-state pass): the README's benchmark, then the default-variant shape sweep of the
# per-key gates (the only kernels v18 changed) for as long as the call has left. The fla dump is deleted before the
# files come back; the report's JSON files go to OUT's top level.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/r; mkdir -p $L
FLA_AUTOTUNE_IN=benches/results/raw/fla_autotune_h200_d64_d256.tar.gz timeout 360 bash benches/run-gpu.sh $L/bench --variants fused; echo "bench rc=$?"
rm -rf $L/bench/fla_dump; for f in ours fla fla_acc same_inputs; do cp $L/bench/$f.json $OUT/ 2>/dev/null; done
cap() { local left=$((520 - SECONDS)); [ "$left" -lt "$1" ] && echo $((left > 5 ? left : 5)) || echo "$1"; }
( GLA_REQUIRE_GPU=1 GLA_TEST_GATES=gla timeout $(cap 120) .gpu/bin/gpu_forward --test-threads=1 --nocapture shapes_varlen ) > $L/shapes.log 2>&1; echo "shapes rc=$?"
grep -E "test result" $L/shapes.log; grep -A8 "panicked\|out of tol" $L/shapes.log | head -10
cd $L && tar czf $OUT/final.tgz * && cd - > /dev/null && rm -rf $L
echo "call took $SECONDS s"
