#!/usr/bin/env bash
# Device call 5 of session 2026-12-01e: the misaligned address again — the new build's sweep for gla narrowed to
# the two-group mma.sync variants only (no wgmma kernel in the process), then to both, under compute-sanitizer
# memcheck (every access's alignment checked).
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/r; mkdir -p $L
t=$(ls .gpu/tests/gpu_forward-*)
cap() { local left=$((560 - SECONDS)); [ "$left" -lt "$1" ] && echo $((left > 5 ? left : 5)) || echo "$1"; }
( GLA_REQUIRE_GPU=1 GLA_TEST_GATES=gla GLA_TEST_VARIANTS=w8p4x2. GLA_TEST_TRACE=1 timeout $(cap 60) $t --test-threads=1 --nocapture warp_specialised ) > $L/x2_only.log 2>&1
echo "== x2 only"; grep -E "test result|runs" $L/x2_only.log | tail -2; grep -B2 -A3 "panicked" $L/x2_only.log | head -6
( GLA_REQUIRE_GPU=1 GLA_TEST_GATES=gla GLA_TEST_VARIANTS=w8p4x2 GLA_TEST_TRACE=1 timeout $(cap 300) /usr/local/cuda/bin/compute-sanitizer --tool memcheck --print-limit 4 $t --test-threads=1 --nocapture warp_specialised ) > $L/sanitizer.log 2>&1
echo "== memcheck x2 + x2g"; grep -E "test result|runs|ERROR SUMMARY" $L/sanitizer.log | tail -3; grep -B2 -A12 "Invalid\|Misaligned" $L/sanitizer.log | head -40
echo "call took $SECONDS s"
