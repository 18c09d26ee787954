#!/usr/bin/env bash
# Device call 1 of session 2026-12-02i. Candidate p1 (.gpu/cand/p1): (a) the gate's running sum in log2 units with
# the scale folded into the gate (`{id}_log2_acc`: two fmaf into Γ, no separate log2 e / ln 2 multiplies), (b) the
# per-key wgmma scores' operand tile with interleaved 8-row groups, so all four producer warps mask and store A
# (was warps 0, 1). Candidate p2 (.gpu/cand/p2) = p1 + the scalar gates' row-scaled chunks (wgmma consumers: q
# stays raw, A'_ij = (q_i·k_j) exp(−Γ_j), the consumers scale O's rows by exp(Γ_i); see rows_scaled). A/B against fin
# (.gpu/cand/fin, the previous session's final build), twice interleaved; then p2's GPU tests: every variant of every gate (all code paths take the new gate form), the warp-specialised sweep of
# the per-key wgmma variants. Everything returned in one tarball.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/r; mkdir -p $L
cap() { local left=$((560 - SECONDS)); [ "$left" -lt "$1" ] && echo $((left > 5 ? left : 5)) || echo "$1"; }
for r in 1 2; do for c in fin p1 p2; do
  ( timeout $(cap 40) .gpu/cand/$c/bench --out $L/ab_${c}_$r.json --reps 50 --gates gla,mamba2 --variants C32.c16.k128.v128.bv128.w8p4 --shapes "8,4096,16,128;32,1024,16,128" ) > $L/ab_${c}_$r.log 2>&1
  echo "== $c run $r"; grep -v screening $L/ab_${c}_$r.log | grep -E " ms |failed|rror" | head -6
done; done
for c in fin p2; do
  ( timeout $(cap 30) .gpu/cand/$c/bench --out $L/ab64_${c}.json --reps 50 --gates gla,mamba2 --variants w4p4g.o2 --shapes "8,4096,32,64" ) > $L/ab64_${c}.log 2>&1
  echo "== d64 $c"; grep -v screening $L/ab64_${c}.log | grep -E " ms |failed|rror" | head -3
done
t=.gpu/cand/p2/gpu_forward
( time GLA_REQUIRE_GPU=1 timeout $(cap 200) $t --test-threads=1 --nocapture every_variant ) > $L/every.log 2>&1
grep -E "^\| [a-z]|test result|real" $L/every.log | tail -20; grep -A10 "out of tolerance\|panicked" $L/every.log | head -14
( time GLA_REQUIRE_GPU=1 GLA_TEST_GATES=gla,rwkv6,hgrn2,mamba2,retnet GLA_TEST_VARIANTS=g. timeout $(cap 150) $t --test-threads=1 --nocapture warp_specialised ) > $L/ws.log 2>&1
grep -E "test result|real|runs|^\| [a-z]" $L/ws.log | tail -10; grep -A10 "out of tolerance\|panicked" $L/ws.log | head -12
cd $L && tar czf $OUT/c1.tgz * && cd - > /dev/null && rm -rf $L
echo "call took $SECONDS s"
