#!/usr/bin/env bash
# Device call 3 of session 2026-12-01c: ws producers load by bulk row copies (cp.async.bulk + mbarrier).
# Correctness (ws variants of three gates, ws shape sweep), screen of the ws variants at three shapes.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/r; mkdir -p $L
t=$(ls .gpu/tests/gpu_forward-*)
( time GLA_REQUIRE_GPU=1 GLA_TEST_GATES=gla,mamba2,retnet GLA_TEST_VARIANTS=p4,p8 timeout 100 $t --test-threads=1 --nocapture every_variant ) > $L/every_ws.log 2>&1
grep -E "^\||test result|real|compiled|GLA_TEST" $L/every_ws.log; grep -A14 "out of tolerance\|panicked" $L/every_ws.log | head -16
( time timeout 120 .gpu/bin/bench --out $L/screen.json --reps 30 --shapes "8,4096,16,128;2,16384,16,128;8,4096,32,64" --variants w8p --gates gla,mamba2 ) > $L/screen.log 2>&1
grep -v screening $L/screen.log | tail -20
( time GLA_REQUIRE_GPU=1 GLA_TEST_GATES=gla,mamba2,retnet timeout 150 $t --test-threads=1 --nocapture warp_specialised ) > $L/ws_shapes.log 2>&1
grep -E "^\||test result|real|runs|compiled" $L/ws_shapes.log; grep -A14 "out of tolerance\|panicked" $L/ws_shapes.log | head -16
tar czf $OUT/c3.tgz -C $OUT r; rm -rf $L
