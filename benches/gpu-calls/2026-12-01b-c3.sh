#!/usr/bin/env bash
# Device call 3 of session 2026-12-01b: v6c (double-buffered mma fragments, one barrier less in the gate scan)
# correctness (every variant + shape sweep) on three gates, variant screen at the main shape.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/r; mkdir -p $L
t=$(ls .gpu/tests/gpu_forward-*)
( time GLA_REQUIRE_GPU=1 GLA_TEST_GATES=gla,mamba2,value_gla $t --test-threads=1 --nocapture every_variant ) > $L/every.log 2>&1
grep -E "^\||test result|real|compiled" $L/every.log; grep -A12 "out of tolerance" $L/every.log | head -14
.gpu/bin/bench --out $L/screen.json --reps 50 --shapes "8,4096,16,128" --variants all --gates gla,mamba2 > $L/screen.log 2>&1
grep -v screening $L/screen.log | tail -12
( time GLA_REQUIRE_GPU=1 GLA_TEST_GATES=gla,mamba2,value_gla $t --test-threads=1 --nocapture shapes_varlen ) > $L/shapes.log 2>&1
grep -E "test result|real" $L/shapes.log; grep -B2 -A8 "out of tolerance\|panicked" $L/shapes.log | head -20
tar czf $OUT/c3.tgz -C $OUT r; rm -rf $L
