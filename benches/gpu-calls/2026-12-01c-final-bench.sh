#!/usr/bin/env bash
# Final benchmark of session 2026-12-01c (kernel v7), then the two GPU tests the tests call could not finish:
#   bash benches/run-gpu.sh $OUT/bench --variants fused   (fla 0.6.0 + SDPA + copy + fla's error and dump; every
#   fused bf16 variant of ours at every shape; ours on fla's dumped inputs), with fla's soft budget at 170 s;
# the default-variant shape sweep (fixed derivation of its materialized variant) and the 64-bit offsets test.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
FLA_BUDGET_S=170 timeout 420 bash benches/run-gpu.sh $OUT/bench --variants fused
cp $OUT/bench/fla_dump/header.json $OUT/bench/fla_dump_header.json 2>/dev/null; rm -rf $OUT/bench/fla_dump  # (100 MB of raw tensors)
L=$OUT/r; mkdir -p $L
t=$(ls .gpu/tests/gpu_forward-*)
( time GLA_REQUIRE_GPU=1 GLA_TEST_GATES=gla,mamba2,value_gla timeout 100 $t --test-threads=1 --nocapture shapes_varlen ) > $L/shapes.log 2>&1
grep -E "test result|real" $L/shapes.log; grep -A10 "out of tolerance\|panicked" $L/shapes.log | head -14
( time GLA_REQUIRE_GPU=1 timeout 90 $t --test-threads=1 --nocapture offsets_beyond ) > $L/offsets.log 2>&1
grep -E "rel RMS|test result|real" $L/offsets.log
