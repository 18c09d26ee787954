#!/usr/bin/env bash
# Final device call of session 2026-12-03p, build of v19 (the segment combine folded into the fused pass's prologue,
# the fused pass a programmatic dependent launch of the state pass): the README's benchmark (every fused variant,
# the 37 mma.sync warp-specialised ones included again), then the every-variant test of the mma.sync
# warp-specialised variants (their consumers take seg_init_regs; each fused variant also runs split into segments).
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/r; mkdir -p $L
FLA_AUTOTUNE_IN=benches/results/raw/fla_autotune_h200_d64_d256.tar.gz timeout 360 bash benches/run-gpu.sh $L/bench --variants fused; echo "bench rc=$?"
rm -rf $L/bench/fla_dump; for f in ours fla fla_acc same_inputs; do cp $L/bench/$f.json $OUT/ 2>/dev/null; done
cap() { local left=$((540 - SECONDS)); [ "$left" -lt "$1" ] && echo $((left > 5 ? left : 5)) || echo "$1"; }
( GLA_REQUIRE_GPU=1 GLA_TEST_VARIANTS=w8p4.fused,w4p4.fused,w8p8.fused timeout $(cap 150) .gpu/bin/gpu_forward --test-threads=1 --nocapture every_variant ) > $L/every.log 2>&1; echo "every rc=$?"
grep -E "test result" $L/every.log; grep -A8 "panicked\|out of tol" $L/every.log | head -10
cd $L && tar czf $OUT/final.tgz * && cd - > /dev/null && rm -rf $L
echo "call took $SECONDS s"
