#!/usr/bin/env bash
# Device call 4 of session 2026-12-01e: the misaligned address of call 3 (gla f16 C32 k64 v128 bv128 w8p4x2,
# T=1000 d_k != d_v, one segment): the v8 test build (commit f5f0f51) on the same sweep, the new build narrowed to
# the variant, and the new build under compute-sanitizer memcheck if the host has it.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/r; mkdir -p $L
t=$(ls .gpu/tests/gpu_forward-*)
cap() { local left=$((560 - SECONDS)); [ "$left" -lt "$1" ] && echo $((left > 5 ? left : 5)) || echo "$1"; }
( time GLA_REQUIRE_GPU=1 GLA_TEST_GATES=gla timeout $(cap 100) .gpu/alt/gpu_forward_v8 --test-threads=1 --nocapture warp_specialised ) > $L/v8_ws.log 2>&1
echo "== v8 build"; grep -E "test result|real|runs|compiled" $L/v8_ws.log | tail -4; grep -A6 "panicked" $L/v8_ws.log | head -8
( time GLA_REQUIRE_GPU=1 GLA_TEST_GATES=gla GLA_TEST_VARIANTS=w8p4x2 GLA_TEST_TRACE=1 timeout $(cap 60) $t --test-threads=1 --nocapture warp_specialised ) > $L/new_ws.log 2>&1
echo "== new build, w8p4x2"; grep -E "test result|real|runs|compiled" $L/new_ws.log | tail -4; grep -B3 -A6 "panicked" $L/new_ws.log | head -12
CS=$(ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || which compute-sanitizer 2>/dev/null)
echo "sanitizer: $CS"
if [ -n "$CS" ]; then
  ( GLA_REQUIRE_GPU=1 GLA_TEST_GATES=gla GLA_TEST_VARIANTS=f16.C32.c16.k64.v128.bv128.w8p4x2 GLA_TEST_TRACE=1 timeout $(cap 200) $CS --tool memcheck --print-limit 5 $t --test-threads=1 --nocapture warp_specialised ) > $L/sanitizer.log 2>&1
  grep -E "Invalid|Misaligned|at 0x|by thread|Address|=========" $L/sanitizer.log | head -30
fi
echo "call took $SECONDS s"
