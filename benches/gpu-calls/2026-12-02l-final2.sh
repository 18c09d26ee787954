#!/usr/bin/env bash
# After the final call: the default-variant shape sweep again, with its materialized companion variant built
# without the cluster flag (the test set key_split = 1 and kept cluster = true, which validation refuses).
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
( GLA_REQUIRE_GPU=1 timeout 200 .gpu/bin/gpu_forward --test-threads=1 --nocapture shapes_varlen ) > $OUT/shapes.log 2>&1; echo "shapes rc=$?"
grep -E "test result|^\| [a-z]+ \| (bf16|f16|f32)" $OUT/shapes.log | tail -24; grep -A8 "panicked\|out of tol" $OUT/shapes.log | head -20
echo "call took $SECONDS s"
