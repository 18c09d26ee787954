#!/usr/bin/env bash
# Final device call of session 2026-12-01d (kernel v8: warp-specialised segment-state pass, row-block combine,
# scalar scan on every producer warp; the transposed-state consumers of call 2 were measured slower and removed).
# Tests: every variant of one gate per kind (per key, per head, per value), the warp-specialised shape sweep (all
# non-value gates); ours at the shapes (every fused bf16 variant; fla is not re-run: its autotuning does not
# fit the device time left); then the default-variant shape sweep and 64-bit offsets in the time that is left.
# Logs go straight to $OUT/r (they come back even if the call runs out of time). Every step is capped so that the
# whole call ends by 570 s.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/r; mkdir -p $L
t=$(ls .gpu/tests/gpu_forward-*)
cap() { local left=$((570 - SECONDS)); [ "$left" -lt "$1" ] && echo $((left > 5 ? left : 5)) || echo "$1"; }
( time GLA_REQUIRE_GPU=1 GLA_TEST_GATES=gla,mamba2,value_gla timeout $(cap 150) $t --test-threads=1 --nocapture every_variant ) > $L/every.log 2>&1
grep -E "^\||test result|real|compiled" $L/every.log | tail -12; grep -A14 "out of tolerance\|panicked" $L/every.log | head -16
( time GLA_REQUIRE_GPU=1 GLA_TEST_GATES=gla,mamba2,mlstm,gated_retnet,hgrn2,rwkv6,retnet timeout $(cap 80) $t --test-threads=1 --nocapture warp_specialised ) > $L/ws_shapes.log 2>&1
grep -E "test result|real|runs" $L/ws_shapes.log | tail -4; grep -A14 "out of tolerance\|panicked" $L/ws_shapes.log | head -16
( time timeout $(cap 200) .gpu/bin/bench --out $L/ours.json --reps 50 --variants fused ) > $L/ours.log 2>&1
grep -E "best|copy|real" $L/ours.log
( time GLA_REQUIRE_GPU=1 GLA_TEST_GATES=gla,mamba2,value_gla timeout $(cap 140) $t --test-threads=1 --nocapture shapes_varlen ) > $L/shapes.log 2>&1
grep -E "test result|real" $L/shapes.log; grep -A10 "out of tolerance\|panicked" $L/shapes.log | head -14
( time GLA_REQUIRE_GPU=1 timeout $(cap 40) $t --test-threads=1 --nocapture offsets_beyond ) > $L/offsets.log 2>&1
grep -E "rel RMS|test result|real" $L/offsets.log
echo "call took $SECONDS s"
