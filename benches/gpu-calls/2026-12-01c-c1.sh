#!/usr/bin/env bash
# Device call 1 of session 2026-12-01c: first run of the warp-specialised fused kernel (gla_fwd_ws).
# Correctness of every ws variant of a per-key, a per-head and a fixed gate (split and unsplit), a variant screen at
# the main shape and T = 1024, then the ws shape sweep. Every step under `timeout` (a hand-off bug would hang).
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/r; mkdir -p $L
t=$(ls .gpu/tests/gpu_forward-*)
G=gla,mamba2,retnet
( time GLA_REQUIRE_GPU=1 GLA_TEST_GATES=$G GLA_TEST_VARIANTS=p4.,p8. timeout 200 $t --test-threads=1 --nocapture every_variant ) > $L/every.log 2>&1
grep -E "^\||test result|real|compiled|GLA_TEST" $L/every.log; grep -A14 "out of tolerance\|panicked" $L/every.log | head -16
( time timeout 200 .gpu/bin/bench --out $L/screen.json --reps 30 --shapes "8,4096,16,128;32,1024,16,128" --variants fused --gates gla,mamba2 ) > $L/screen.log 2>&1
grep -v screening $L/screen.log | tail -24; grep -E "w[48]p[48]" $L/screen.log | head -40
( time GLA_REQUIRE_GPU=1 GLA_TEST_GATES=$G timeout 150 $t --test-threads=1 --nocapture warp_specialised ) > $L/ws_shapes.log 2>&1
grep -E "^\||test result|real|runs" $L/ws_shapes.log; grep -A14 "out of tolerance\|panicked" $L/ws_shapes.log | head -16
tar czf $OUT/c1.tgz -C $OUT r; rm -rf $L
