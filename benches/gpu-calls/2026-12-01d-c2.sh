#!/usr/bin/env bash
# Device call 2 of session 2026-12-01d: transposed-state consumers (ST_FORM: S^T in registers, the inter-chunk
# product's A operand from registers, per-key S as hi + lo), the row-block segment combine, one-pass Γ/K̂ in the
# warp-specialised segment-state pass.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/r; mkdir -p $L
t=$(ls .gpu/tests/gpu_forward-*)
G=gla,mamba2,mlstm,gated_retnet,hgrn2,rwkv6,retnet
( time GLA_REQUIRE_GPU=1 GLA_TEST_GATES=$G GLA_TEST_VARIANTS=p4.,p8.,p4x2,p8x2 timeout 120 $t --test-threads=1 --nocapture every_variant ) > $L/every_ws.log 2>&1
grep -E "^\||test result|real|compiled" $L/every_ws.log | tail -16; grep -A14 "out of tolerance\|panicked" $L/every_ws.log | head -16
( time GLA_REQUIRE_GPU=1 GLA_TEST_GATES=$G timeout 90 $t --test-threads=1 --nocapture warp_specialised ) > $L/ws_shapes.log 2>&1
grep -E "^\||test result|real|runs" $L/ws_shapes.log | tail -18; grep -A14 "out of tolerance\|panicked" $L/ws_shapes.log | head -16
( time timeout 120 .gpu/bin/bench --out $L/screen.json --reps 30 --shapes "8,4096,16,128;2,16384,16,128;32,1024,16,128;8,4096,32,64" --variants p4 --gates gla,mamba2 ) > $L/screen.log 2>&1
grep -v screening $L/screen.log | tail -24; grep -E "w8p4\.|w4p4" $L/screen.log | head -30
tar czf $OUT/c2.tgz -C $OUT r; rm -rf $L
