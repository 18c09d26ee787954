#!/usr/bin/env bash
# Device call 3 of session 2026-12-02l: bisect slice 1's wrong state in the cluster key split (KS_DEBUG through
# GLA_NVRTC_EXTRA): 0 = as built; 1 = no exchange (both slices write O), cluster launch kept; 2 = no exchange and no
# cluster (the shared-memory layout alone); 3 = the exchange, and slice 1 also writes O.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/r; mkdir -p $L
t=.gpu/cand/c3/gpu_forward
for k in 0 1 2 3; do
  ( GLA_NVRTC_EXTRA="-DKS_DEBUG=$k" GLA_REQUIRE_GPU=1 GLA_TEST_GATES=mamba2 GLA_TEST_VARIANTS=ks2c timeout 60 $t --test-threads=1 --nocapture key_slices ) > $L/slices_$k.log 2>&1; echo "KS_DEBUG=$k rc=$?"
  grep -E "^\| [a-z]" $L/slices_$k.log | head -8
done
cd $L && tar czf $OUT/c3.tgz * && cd - > /dev/null && rm -rf $L
echo "call took $SECONDS s"
