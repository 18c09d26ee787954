#!/usr/bin/env bash
# Device call 4 of session 2026-12-01b: v6d = v6c + two-level scan (segments) for narrow problems.
# Correctness (every variant split and unsplit, shape sweep) on four gates (per key, per head, per value, fixed);
# variant screen at the main shape and the long narrow shape.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/r; mkdir -p $L
t=$(ls .gpu/tests/gpu_forward-*)
G=gla,mamba2,value_gla,retnet
( time GLA_REQUIRE_GPU=1 GLA_TEST_GATES=$G $t --test-threads=1 --nocapture every_variant ) > $L/every.log 2>&1
grep -E "^\||test result|real|compiled" $L/every.log; grep -A12 "out of tolerance" $L/every.log | head -14
( time GLA_REQUIRE_GPU=1 GLA_TEST_GATES=$G $t --test-threads=1 --nocapture shapes_varlen ) > $L/shapes.log 2>&1
grep -E "test result|real" $L/shapes.log; grep -A10 "out of tolerance\|panicked" $L/shapes.log | head -14
.gpu/bin/bench --out $L/screen.json --reps 50 --shapes "8,4096,16,128;2,16384,16,128" --variants fused --gates gla,mamba2 > $L/screen.log 2>&1
grep -v screening $L/screen.log | tail -16
tar czf $OUT/c4.tgz -C $OUT r; rm -rf $L
