#!/usr/bin/env bash
# Final device call C of session 2026-12-02i (call B's every-f32-variant run and 64-bit offsets test hit their 50 s
# caps without a verdict): the same build (.gpu/cand/fin2), every variant of the seven gates at C 64, d 128, 64-wide
# value tiles in f32 and bf16 (the CUDA-core / mma.sync paths: gate_cumsum, gate_decays with the gate's log2 form),
# and the 64-bit offsets test with a longer cap.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/r; mkdir -p $L
t=.gpu/cand/fin2/gpu_forward
( time GLA_REQUIRE_GPU=1 GLA_TEST_VARIANTS=f32.C64.c16.k128.v128.bv64,bf16.C64.c16.k128.v128.bv64 timeout 100 $t --test-threads=1 --nocapture every_variant ) > $L/every_c64.log 2>&1
grep -E "^\| [a-z]|test result|real" $L/every_c64.log | tail -24; grep -A10 "out of tolerance\|panicked" $L/every_c64.log | head -12
( time GLA_REQUIRE_GPU=1 timeout 120 $t --test-threads=1 --nocapture offsets_beyond ) > $L/offsets.log 2>&1
grep -E "rel RMS|test result|real" $L/offsets.log
cd $L && tar czf $OUT/finalC.tgz * && cd - > /dev/null && rm -rf $L
echo "call took $SECONDS s"
