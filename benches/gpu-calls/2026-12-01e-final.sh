#!/usr/bin/env bash
# Final device call of session 2026-12-01e (kernel v9: wgmma consumers, now the default at d = 128; the mma.sync
# kernels' padded-tile products back on the v8 form after call 6's bisection). Tests: the warp-specialised shape
# sweep (all seven non-value gates, wgmma configurations included), every variant of gla / mamba2 / value_gla, the
# default-variant shape sweep, 64-bit offsets; then ours at the shapes (every fused bf16 variant). Logs
# straight under $OUT/r; every step capped so that the call ends by 480 s.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/r; mkdir -p $L
t=$(ls .gpu/tests/gpu_forward-*)
cap() { local left=$((480 - SECONDS)); [ "$left" -lt "$1" ] && echo $((left > 5 ? left : 5)) || echo "$1"; }
( time GLA_REQUIRE_GPU=1 GLA_TEST_GATES=gla,mamba2,mlstm,gated_retnet,hgrn2,rwkv6,retnet timeout $(cap 140) $t --test-threads=1 --nocapture warp_specialised ) > $L/ws_shapes.log 2>&1
grep -E "test result|real|runs|^\|" $L/ws_shapes.log | tail -20; grep -A10 "out of tolerance\|panicked" $L/ws_shapes.log | head -12
( time GLA_REQUIRE_GPU=1 GLA_TEST_GATES=gla,mamba2,value_gla timeout $(cap 140) $t --test-threads=1 --nocapture every_variant ) > $L/every.log 2>&1
grep -E "^\||test result|real" $L/every.log | tail -10; grep -A10 "out of tolerance\|panicked" $L/every.log | head -12
( time timeout $(cap 80) .gpu/bin/bench --out $L/ours_v9_final.json --reps 50 --variants fused --shapes "8,4096,16,128;8,4096,32,64;8,4096,8,256;2,16384,16,128;32,1024,16,128" ) > $L/ours.log 2>&1
grep -E "best|copy|real" $L/ours.log
( time GLA_REQUIRE_GPU=1 GLA_TEST_GATES=gla,mamba2 timeout $(cap 80) $t --test-threads=1 --nocapture shapes_varlen ) > $L/shapes.log 2>&1
grep -E "test result|real" $L/shapes.log; grep -A10 "out of tolerance\|panicked" $L/shapes.log | head -12
( time GLA_REQUIRE_GPU=1 timeout $(cap 40) $t --test-threads=1 --nocapture offsets_beyond ) > $L/offsets.log 2>&1
grep -E "rel RMS|test result|real" $L/offsets.log
echo "call took $SECONDS s"
