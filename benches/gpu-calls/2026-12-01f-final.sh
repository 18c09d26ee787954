#!/usr/bin/env bash
# Final device call of session 2026-12-01f (kernel v10e: per-key producers with tf32 wgmma scores and 16-byte gate /
# decay passes). The README's benchmark command — fla 0.6.0 / SDPA / copy at every issue shape (fla autotuning its
# D = 128 families at the benchmark's own shapes, the D = 64 / 256 ones from session f call 1's results), fla's error
# vs f64 and its dumped inputs, ours (every fused bf16 variant), ours on fla's inputs — then the GPU tests of the
# changed kernels: the warp-specialised sweep (all seven non-value gates), every wgmma variant of the per-key gates,
# the default-variant shape sweep and 64-bit offsets (gla). Every step capped so that the call ends by 540 s.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/r; mkdir -p $L
t=$(ls .gpu/tests/gpu_forward-*)
cap() { local left=$((540 - SECONDS)); [ "$left" -lt "$1" ] && echo $((left > 5 ? left : 5)) || echo "$1"; }
( time FLA_AUTOTUNE_IN=benches/results/raw/fla_autotune_h200_d64_d256.tar.gz timeout 330 bash benches/run-gpu.sh $L --variants fused ) > $L/run_gpu.log 2>&1
tail -32 $L/run_gpu.log
rm -rf $L/fla_dump
tar czf $OUT/bench.tgz -C $L . && rm -rf $L && mkdir -p $L
( time GLA_REQUIRE_GPU=1 GLA_TEST_GATES=gla,mamba2,mlstm,gated_retnet,hgrn2,rwkv6,retnet timeout $(cap 100) $t --test-threads=1 --nocapture warp_specialised ) > $L/ws_shapes.log 2>&1
grep -E "test result|real|runs|^\| [a-z]" $L/ws_shapes.log | tail -20; grep -A10 "out of tolerance\|panicked" $L/ws_shapes.log | head -12
( time GLA_REQUIRE_GPU=1 GLA_TEST_GATES=gla,hgrn2,rwkv6 GLA_TEST_VARIANTS=g.fused timeout $(cap 60) $t --test-threads=1 --nocapture every_variant ) > $L/every_wg.log 2>&1
grep -E "^\||test result|real" $L/every_wg.log | tail -10; grep -A10 "out of tolerance\|panicked" $L/every_wg.log | head -12
( time GLA_REQUIRE_GPU=1 GLA_TEST_GATES=gla timeout $(cap 60) $t --test-threads=1 --nocapture shapes_varlen ) > $L/shapes.log 2>&1
grep -E "test result|real" $L/shapes.log; grep -A10 "out of tolerance\|panicked" $L/shapes.log | head -12
( time GLA_REQUIRE_GPU=1 timeout $(cap 40) $t --test-threads=1 --nocapture offsets_beyond ) > $L/offsets.log 2>&1
grep -E "rel RMS|test result|real" $L/offsets.log
tar czf $OUT/tests.tgz -C $L . && rm -rf $L
echo "call took $SECONDS s"
