#!/usr/bin/env bash
# Device call 4 of session 2026-12-01c: predicate-free cp.async issue on whole chunks; ws per-key gate_decays.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/r; mkdir -p $L
t=$(ls .gpu/tests/gpu_forward-*)
( time GLA_REQUIRE_GPU=1 GLA_TEST_GATES=gla,mamba2 GLA_TEST_VARIANTS=C32.c16.k128.v128.bv128.w8,C64.c16.k128.v128.bv128.w16,p4.,p8x2 timeout 80 $t --test-threads=1 --nocapture every_variant ) > $L/every.log 2>&1
grep -E "^\||test result|real|compiled|GLA_TEST" $L/every.log; grep -A14 "out of tolerance\|panicked" $L/every.log | head -16
( time timeout 60 .gpu/bin/bench --out $L/screen.json --reps 30 --shapes "8,4096,16,128" --variants k128.v128.bv128.w --gates gla,mamba2 ) > $L/screen.log 2>&1
grep -v screening $L/screen.log | tail -10; grep -E "p[48]" $L/screen.log | head -20
tar czf $OUT/c4.tgz -C $OUT r; rm -rf $L
