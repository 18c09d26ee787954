#!/usr/bin/env bash
# Final GPU tests of session 2026-12-01c (kernel v7: warp-specialised fused forward + the shared-stage changes):
# every variant of every gate (split and unsplit), the ws shape sweep for every non-value gate, the default-variant
# shape sweep for one gate of each kind but fixed (per key, per head, per value), 64-bit offsets. Each step under a
# timeout so that one call fits the device budget; logs under $OUT/r.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/r; mkdir -p $L
t=$(ls .gpu/tests/gpu_forward-*)
( time GLA_REQUIRE_GPU=1 timeout 340 $t --test-threads=1 --nocapture every_variant ) > $L/every.log 2>&1
grep -E "^\||test result|real|compiled" $L/every.log; grep -A14 "out of tolerance\|panicked" $L/every.log | head -16
( time GLA_REQUIRE_GPU=1 GLA_TEST_GATES=gla,mamba2,mlstm,gated_retnet,hgrn2,rwkv6,retnet timeout 90 $t --test-threads=1 --nocapture warp_specialised ) > $L/ws_shapes.log 2>&1
grep -E "^\||test result|real|runs|compiled" $L/ws_shapes.log; grep -A14 "out of tolerance\|panicked" $L/ws_shapes.log | head -16
( time GLA_REQUIRE_GPU=1 GLA_TEST_GATES=gla,mamba2,value_gla timeout 110 $t --test-threads=1 --nocapture shapes_varlen ) > $L/shapes.log 2>&1
grep -E "test result|real" $L/shapes.log; grep -A10 "out of tolerance\|panicked" $L/shapes.log | head -14
( time GLA_REQUIRE_GPU=1 timeout 30 $t --test-threads=1 --nocapture offsets_beyond ) > $L/offsets.log 2>&1
grep -E "rel RMS|test result|real" $L/offsets.log
tar czf $OUT/final_tests.tgz -C $OUT r; rm -rf $L
