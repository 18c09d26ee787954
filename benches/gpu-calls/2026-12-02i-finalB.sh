#!/usr/bin/env bash
# Final device call B of session 2026-12-02i: the GPU tests of the chosen build (call A picked p4; .gpu/cand/fin2 is
# the committed code rebuilt — its generated kernels equal p4's but for comments). Every wgmma variant of every gate,
# every f32 variant (the gate's log2 form in IEEE math), the warp-specialised sweep of the wgmma variants over the
# shapes (incl. logits ±12: the scalar gates' chunks that are not row scaled), the default-variant shape sweep (gla,
# mamba2), 64-bit offsets. Every step capped; one tarball.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/r; mkdir -p $L
t=.gpu/cand/fin2/gpu_forward
( time GLA_REQUIRE_GPU=1 GLA_TEST_VARIANTS=g. timeout 70 $t --test-threads=1 --nocapture every_variant ) > $L/every_wg.log 2>&1
grep -E "^\| [a-z]|test result|real" $L/every_wg.log | tail -16; grep -A10 "out of tolerance\|panicked" $L/every_wg.log | head -12
( time GLA_REQUIRE_GPU=1 GLA_TEST_VARIANTS=f32 timeout 50 $t --test-threads=1 --nocapture every_variant ) > $L/every_f32.log 2>&1
grep -E "^\| [a-z]|test result|real" $L/every_f32.log | tail -9; grep -A10 "out of tolerance\|panicked" $L/every_f32.log | head -12
( time GLA_REQUIRE_GPU=1 GLA_TEST_VARIANTS=g. timeout 90 $t --test-threads=1 --nocapture warp_specialised ) > $L/ws_shapes.log 2>&1
grep -E "test result|real|runs|^\| [a-z]" $L/ws_shapes.log | tail -17; grep -A10 "out of tolerance\|panicked" $L/ws_shapes.log | head -12
( time GLA_REQUIRE_GPU=1 GLA_TEST_GATES=gla,mamba2 timeout 80 $t --test-threads=1 --nocapture shapes_varlen ) > $L/shapes.log 2>&1
grep -E "test result|real" $L/shapes.log; grep -A10 "out of tolerance\|panicked" $L/shapes.log | head -12
( time GLA_REQUIRE_GPU=1 timeout 50 $t --test-threads=1 --nocapture offsets_beyond ) > $L/offsets.log 2>&1
grep -E "rel RMS|test result|real" $L/offsets.log
cd $L && tar czf $OUT/finalB.tgz * && cd - > /dev/null && rm -rf $L
echo "call took $SECONDS s"
