#!/usr/bin/env bash
# Device call 6 of session 2026-12-01e: bisecting the misaligned address (two-group mma.sync variants, gla f16,
# T=1000 d_k != d_v): test builds of commit e822a8d with one change reverted each — t_b1 the 1024-byte alignment
# declaration of the dynamic shared memory, t_b2 the order of the consumer state tile and the Γ tiles, t_b3 the
# layout-generic warp_mma (the v8 one for padded tiles), t_b124 b1 + b2 + the shuffled role index — and the new
# build as the control.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/r; mkdir -p $L
t=$(ls .gpu/tests/gpu_forward-*)
for b in $t .gpu/alt/t_b1 .gpu/alt/t_b2 .gpu/alt/t_b3 .gpu/alt/t_b124; do
  ( GLA_REQUIRE_GPU=1 GLA_TEST_GATES=gla GLA_TEST_VARIANTS=w8p4x2. timeout 60 $b --test-threads=1 --nocapture warp_specialised ) > $L/$(basename $b).log 2>&1
  echo "== $(basename $b): $(grep -E 'test result' $L/$(basename $b).log) $(grep -o 'CUDA_ERROR_[A-Z_]*' $L/$(basename $b).log | head -1)"
done
echo "call took $SECONDS s"
