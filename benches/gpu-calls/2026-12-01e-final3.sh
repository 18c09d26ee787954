#!/usr/bin/env bash
# Last device call of session 2026-12-01e: the tests the final call could not finish — every variant of gla /
# mamba2 / value_gla (the f32 kernels' At_ helper was missing: a compile error), the default-variant shape sweep (its
# materialized companion now drops the wgmma flag too), 64-bit offsets. fla is not re-run: no device time left.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/r; mkdir -p $L
t=$(ls .gpu/tests/gpu_forward-*)
cap() { local left=$((290 - SECONDS)); [ "$left" -lt "$1" ] && echo $((left > 5 ? left : 5)) || echo "$1"; }
( time GLA_REQUIRE_GPU=1 GLA_TEST_GATES=gla,mamba2,value_gla timeout $(cap 170) $t --test-threads=1 --nocapture every_variant ) > $L/every.log 2>&1
grep -E "^\||test result|real" $L/every.log | tail -10; grep -A10 "out of tolerance\|panicked" $L/every.log | head -12
( time GLA_REQUIRE_GPU=1 GLA_TEST_GATES=gla,mamba2 timeout $(cap 50) $t --test-threads=1 --nocapture shapes_varlen ) > $L/shapes.log 2>&1
grep -E "test result|real" $L/shapes.log; grep -A10 "out of tolerance\|panicked" $L/shapes.log | head -12
( time GLA_REQUIRE_GPU=1 timeout $(cap 60) $t --test-threads=1 --nocapture offsets_beyond ) > $L/offsets.log 2>&1
grep -E "rel RMS|test result|real" $L/offsets.log
echo "call took $SECONDS s"
