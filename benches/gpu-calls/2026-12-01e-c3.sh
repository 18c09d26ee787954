#!/usr/bin/env bash
# Device call 3 of session 2026-12-01e: the warp-specialised shape sweep traced (call 2's stopped on a misaligned
# address), the wgmma variants incl. 8 + 8 warps (Sᵀ through shared memory) at four shapes, and an experimental
# build (.gpu/alt/bench_pk16) that also has per-key 8 + 8 wgmma variants (they spill a little) at the main shape.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/r; mkdir -p $L
t=$(ls .gpu/tests/gpu_forward-*)
cap() { local left=$((560 - SECONDS)); [ "$left" -lt "$1" ] && echo $((left > 5 ? left : 5)) || echo "$1"; }
( time GLA_REQUIRE_GPU=1 GLA_TEST_GATES=gla,mamba2 GLA_TEST_VARIANTS=g.fused timeout $(cap 60) $t --test-threads=1 --nocapture every_variant ) > $L/every_wg.log 2>&1
grep -E "^\||test result|real|compiled" $L/every_wg.log | tail -8; grep -A14 "out of tolerance\|panicked" $L/every_wg.log | head -20
S="8,4096,16,128;8,4096,32,64;2,16384,16,128;32,1024,16,128"
( time timeout $(cap 100) .gpu/bin/bench --out /dev/null --reps 50 --variants g.fused --shapes "$S" ) > $L/ours_wg.log 2>&1
grep -v screening $L/ours_wg.log | grep " ms " | head -40
( timeout $(cap 40) .gpu/alt/bench_pk16 --out /dev/null --reps 50 --variants w8p8g --gates gla --shapes "8,4096,16,128;32,1024,16,128" ) > $L/pk16.log 2>&1
grep " ms " $L/pk16.log | head -6
( time GLA_REQUIRE_GPU=1 GLA_TEST_TRACE=1 GLA_TEST_GATES=gla,mamba2,mlstm,gated_retnet,hgrn2,rwkv6,retnet timeout $(cap 330) $t --test-threads=1 --nocapture warp_specialised ) > $L/ws_shapes.log 2>&1
grep -E "test result|real|runs|worst|compiled" $L/ws_shapes.log | tail -8; grep -B3 -A8 "out of tolerance\|panicked" $L/ws_shapes.log | head -24
echo "call took $SECONDS s"
