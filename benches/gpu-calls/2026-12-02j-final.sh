#!/usr/bin/env bash
# Final device call of session 2026-12-02j: the README's benchmark (benches/run-gpu.sh OUT --variants fused) with the
# committed build (2336eff: per-key w8p8x2g and the scalar gates' w8p4x2g on four slots with mid-chunk loads;
# .gpu/bin/bench), fla 0.6.0 and SDPA side by side, fla's D = 64 / 256 autotune results from an earlier H200 run.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/r; mkdir -p $L
( time FLA_AUTOTUNE_IN=benches/results/raw/fla_autotune_h200_d64_d256.tar.gz timeout 540 bash benches/run-gpu.sh $L/bench --variants fused ) > $L/run_gpu.log 2>&1
tail -16 $L/run_gpu.log; rm -rf $L/bench/fla_dump
cd $L && tar czf $OUT/final.tgz * && cd - > /dev/null && rm -rf $L
echo "call took $SECONDS s"
