#!/usr/bin/env bash
# Device call 4 of session 2026-12-01h. Candidate st (.gpu/cand/st): TMA chunk loads for the scalar gates' wgmma
# variants with 4 producer warps (one or two groups) — every producer warp loads the chunk's 32 per-head logits
# itself (lane l, row l: GLA_REG_LOGIT), so no thread waits for another after the mbarrier; no register split
# (168 each). A/B against sv (.gpu/cand/sv, the previous build) at the main shape, 32×1024 and 2×16384, Mamba-2
# wgmma variants, twice interleaved; correctness of every wgmma variant of the scalar gates and their
# warp-specialised sweep.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/r; mkdir -p $L
cap() { local left=$((400 - SECONDS)); [ "$left" -lt "$1" ] && echo $((left > 5 ? left : 5)) || echo "$1"; }
for r in 1 2; do for c in sv st; do
  ( timeout $(cap 50) .gpu/cand/$c/bench --out $L/ab_${c}_$r.json --reps 50 --gates mamba2 --variants g.fused --shapes "8,4096,16,128;32,1024,16,128;2,16384,16,128" ) > $L/ab_${c}_$r.log 2>&1
  echo "== $c run $r"; grep -v screening $L/ab_${c}_$r.log | grep -E " ms |failed|rror" | head -9
done; done
t=.gpu/cand/st/gpu_forward
( time GLA_REQUIRE_GPU=1 GLA_TEST_GATES=mamba2,retnet,mlstm,gated_retnet GLA_TEST_VARIANTS=g. timeout $(cap 60) $t --test-threads=1 --nocapture every_variant ) > $L/every_st.log 2>&1
grep -E "^\||test result|real|compiled" $L/every_st.log | tail -12; grep -A14 "out of tolerance\|panicked" $L/every_st.log | head -20
( time GLA_REQUIRE_GPU=1 GLA_TEST_GATES=mamba2,retnet,mlstm,gated_retnet GLA_TEST_VARIANTS=g. timeout $(cap 150) $t --test-threads=1 --nocapture warp_specialised ) > $L/ws_st.log 2>&1
grep -E "test result|real|runs|^\| [a-z]" $L/ws_st.log | tail -12; grep -A10 "out of tolerance\|panicked" $L/ws_st.log | head -12
cd $L && tar czf $OUT/c4.tgz * && cd - > /dev/null && rm -rf $L
echo "call took $SECONDS s"
