#!/usr/bin/env bash
# Device call 5 of session 2026-12-02j (calls 1-3 and the final run before it). x5 = ef2ca90 + key split 2 for the
# scalar gates (per-head, fixed): each d_k = 256 head as two 128-column key slices on the d = 128 wgmma kernel
# with two TMA producer groups (w8p4x2g.ks2; the slices' f32 partial outputs summed by gla_fwd_ksum). The final
# run had Mamba-2 at 8×4096×8×256 0.642 ms on the mma.sync w8p4 (fla chunk_simple_gla 0.569).
# 1. Every fused Mamba-2 variant at 8×4096×8×256 (old and new side by side, one process), twice. 2. x5's GPU tests
# of the key-split variants of every gate (warp-specialised sweep incl. D = 200 / 256, every-variant).
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/r; mkdir -p $L
for r in 1 2; do
  ( timeout 60 .gpu/cand/x5/bench --out $L/ab_m2_$r.json --reps 50 --gates mamba2 --variants fused --shapes "8,4096,8,256"; echo "rc=$?" ) > $L/ab_m2_$r.log 2>&1
  echo "== run $r"; grep -v screening $L/ab_m2_$r.log | grep -E " ms |failed|rror|rc=" | grep -v best | head -6
done
t=.gpu/cand/x5/gpu_forward
( GLA_REQUIRE_GPU=1 GLA_TEST_VARIANTS=ks2 timeout 150 $t --test-threads=1 --nocapture warp_specialised ) > $L/ws_ks2.log 2>&1
( GLA_REQUIRE_GPU=1 GLA_TEST_VARIANTS=ks2 timeout 90 $t --test-threads=1 --nocapture every_variant ) > $L/every_ks2.log 2>&1
grep -E "^\| [a-z]|test result|runs of" $L/ws_ks2.log $L/every_ks2.log | tail -40; grep -A8 "panicked\|out of tol" $L/ws_ks2.log $L/every_ks2.log | head -12
cd $L && tar czf $OUT/c5.tgz * && cd - > /dev/null && rm -rf $L
echo "call took $SECONDS s"
