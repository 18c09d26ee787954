#!/usr/bin/env bash
# Device call 1 of session 2026-12-01e (kernel v9: wgmma consumers, variant flag `g`). Correctness of every wgmma
# variant of gla and mamba2 (every_variant narrowed to `g.fused`), then ours at four of the issue's shapes for
# the warp-specialised `p4` variants, new build (.gpu/bin/bench: wgmma and mma.sync consumers, swizzle-aware
# producers) against the v8 build (.gpu/alt/bench_v8: commit f5f0f51) in the same call, then the ws shape sweep.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/r; mkdir -p $L
t=$(ls .gpu/tests/gpu_forward-*)
cap() { local left=$((560 - SECONDS)); [ "$left" -lt "$1" ] && echo $((left > 5 ? left : 5)) || echo "$1"; }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
( time GLA_REQUIRE_GPU=1 GLA_TEST_GATES=gla,mamba2 GLA_TEST_VARIANTS=g.fused timeout $(cap 120) $t --test-threads=1 --nocapture every_variant ) > $L/every_wg.log 2>&1
grep -E "^\||test result|real|compiled" $L/every_wg.log | tail -14; grep -A14 "out of tolerance\|panicked" $L/every_wg.log | head -24
S="8,4096,16,128;8,4096,32,64;2,16384,16,128;32,1024,16,128"
( time timeout $(cap 120) .gpu/bin/bench --out $L/ours_v9.json --reps 50 --variants p4 --shapes "$S" ) > $L/ours_v9.log 2>&1
grep -E "copy|real" $L/ours_v9.log; grep -v screening $L/ours_v9.log | grep " ms " | head -40
( time timeout $(cap 90) .gpu/alt/bench_v8 --out $L/ours_v8.json --reps 50 --variants p4 --shapes "$S" ) > $L/ours_v8.log 2>&1
grep -E "copy|real" $L/ours_v8.log; grep -v screening $L/ours_v8.log | grep " ms " | head -30
( time GLA_REQUIRE_GPU=1 GLA_TEST_GATES=gla,mamba2,mlstm,gated_retnet,hgrn2,rwkv6,retnet timeout $(cap 120) $t --test-threads=1 --nocapture warp_specialised ) > $L/ws_shapes.log 2>&1
grep -E "test result|real|runs|worst" $L/ws_shapes.log | tail -8; grep -A14 "out of tolerance\|panicked" $L/ws_shapes.log | head -16
echo "call took $SECONDS s"
