#!/usr/bin/env bash
# Final device call A of session 2026-12-01b: the GPU tests on the final kernels for the four gates call 4 did not
# cover (call 4 ran every variant split and unsplit + the shape sweep for gla, mamba2, value_gla, retnet on the
# same kernel source), then the 2^31-offset test if time allows.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/r; mkdir -p $L
t=$(ls .gpu/tests/gpu_forward-*)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $L/gpu.txt
G=hgrn2,rwkv6,mlstm,gated_retnet
( time GLA_REQUIRE_GPU=1 GLA_TEST_GATES=$G $t --test-threads=1 --nocapture every_variant ) > $L/every.log 2>&1
grep -E "^\||test result|real|compiled" $L/every.log; grep -A12 "out of tolerance" $L/every.log | head -14
# gla too: its default at d = 128 changed after call 4 (16 warps; the variant itself is in call 4's every-variant run)
( time GLA_REQUIRE_GPU=1 GLA_TEST_GATES=$G,gla $t --test-threads=1 --nocapture shapes_varlen ) > $L/shapes.log 2>&1
grep -E "test result|real" $L/shapes.log; grep -A10 "out of tolerance\|panicked" $L/shapes.log | head -14
( time GLA_REQUIRE_GPU=1 timeout ${OFFSETS_S:-240} $t --test-threads=1 --nocapture offsets_beyond bad_shapes ) > $L/offsets.log 2>&1
grep -E "test result|real|rel|Terminated" $L/offsets.log | head
tar czf $OUT/final_tests.tgz -C $OUT r; rm -rf $L
