#!/usr/bin/env bash
# Device call 1 of session 2026-12-01d: scalar-gate producers scan on every warp; warp-specialised segment-state
# pass (gla_fwd_ws_states); the two-group hand-off fix (EMPTY per slot and group) of the last session, first GPU run.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/r; mkdir -p $L
t=$(ls .gpu/tests/gpu_forward-*)
G=gla,mamba2,mlstm,gated_retnet,hgrn2,rwkv6,retnet
( time GLA_REQUIRE_GPU=1 GLA_TEST_GATES=$G GLA_TEST_VARIANTS=p4.,p8.,p4x2,p8x2 timeout 120 $t --test-threads=1 --nocapture every_variant ) > $L/every_ws.log 2>&1
grep -E "^\||test result|real|compiled" $L/every_ws.log | tail -12; grep -A14 "out of tolerance\|panicked" $L/every_ws.log | head -16
( time GLA_REQUIRE_GPU=1 GLA_TEST_GATES=$G timeout 90 $t --test-threads=1 --nocapture warp_specialised ) > $L/ws_shapes.log 2>&1
grep -E "test result|real|runs|worst" $L/ws_shapes.log | tail -8; grep -A14 "out of tolerance\|panicked" $L/ws_shapes.log | head -16
( time timeout 100 .gpu/bin/bench --out $L/screen.json --reps 30 --shapes "8,4096,16,128;2,16384,16,128;32,1024,16,128" --variants k128.v128.bv128.w8p --gates gla,mamba2 ) > $L/screen.log 2>&1
grep -v screening $L/screen.log | tail -12
( time GLA_REQUIRE_GPU=1 GLA_TEST_GATES=gla,mamba2,value_gla timeout 150 $t --test-threads=1 --nocapture shapes_varlen ) > $L/shapes.log 2>&1
grep -E "test result|real" $L/shapes.log; grep -A10 "out of tolerance\|panicked" $L/shapes.log | head -14
tar czf $OUT/c1.tgz -C $OUT r; rm -rf $L
