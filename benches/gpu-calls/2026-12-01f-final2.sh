#!/usr/bin/env bash
# Second final call of session 2026-12-01f: the two GPU tests the final call's caps cut short — the warp-specialised
# shape sweep of the per-key gates (the kernels v10 changed; the scalar gates' kernels are v9's, swept in session e)
# and 64-bit offsets.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/r; mkdir -p $L
t=$(ls .gpu/tests/gpu_forward-*)
( time GLA_REQUIRE_GPU=1 GLA_TEST_GATES=gla,hgrn2,rwkv6 timeout 85 $t --test-threads=1 --nocapture warp_specialised ) > $L/ws_shapes.log 2>&1
grep -E "test result|real|runs|^\| [a-z]" $L/ws_shapes.log | tail -12; grep -A10 "out of tolerance\|panicked" $L/ws_shapes.log | head -12
( time GLA_REQUIRE_GPU=1 timeout 85 $t --test-threads=1 --nocapture offsets_beyond ) > $L/offsets.log 2>&1
grep -E "rel RMS|test result|real" $L/offsets.log
echo "call took $SECONDS s"
