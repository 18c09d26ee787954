#!/usr/bin/env bash
# Final device call of session 2026-12-02l, build 9af7264 (the cluster key split, v16): the README's benchmark,
# then the GPU tests of this session's changes on that build: the per-slice and every-variant tests of the key-split
# variants (ks2, ks2c), and the default-variant shape sweep. The fla dump (thousands of files) is deleted before
# the files come back; the report's four JSON files are copied to OUT's top level.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/r; mkdir -p $L
FLA_AUTOTUNE_IN=benches/results/raw/fla_autotune_h200_d64_d256.tar.gz timeout 330 bash benches/run-gpu.sh $L/bench --variants fused; echo "bench rc=$?"
rm -rf $L/bench/fla_dump; for f in ours fla fla_acc same_inputs; do cp $L/bench/$f.json $OUT/ 2>/dev/null; done
cap() { local left=$((560 - SECONDS)); [ "$left" -lt "$1" ] && echo $((left > 5 ? left : 5)) || echo "$1"; }
t=.gpu/bin/gpu_forward
( GLA_REQUIRE_GPU=1 GLA_TEST_VARIANTS=ks2c timeout $(cap 60) $t --test-threads=1 --nocapture key_slices ) > $L/slices.log 2>&1; echo "slices rc=$?"
( GLA_REQUIRE_GPU=1 GLA_TEST_VARIANTS=ks2 timeout $(cap 60) $t --test-threads=1 --nocapture every_variant ) > $L/every_ks2.log 2>&1; echo "every ks2 rc=$?"
( GLA_REQUIRE_GPU=1 timeout $(cap 150) $t --test-threads=1 --nocapture shapes_varlen ) > $L/shapes.log 2>&1; echo "shapes rc=$?"
grep -E "test result|^\| [a-z]+ \| (bf16|f16)" $L/slices.log $L/every_ks2.log $L/shapes.log | tail -20; grep -A8 "panicked\|out of tol" $L/*.log | head -20
cd $L && tar czf $OUT/final.tgz * && cd - > /dev/null && rm -rf $L
echo "call took $SECONDS s"
