#!/usr/bin/env bash
# Device call 3 of session 2026-12-01h. Candidate sv (.gpu/cand/sv): the segment-state pass of the per-key wgmma-score
# variants computes Γ by gate_decays_vec's shuffle scan and K̂ = K ⊙ exp(Γ_L − Γ) with no group barrier
# (gate_khat_vec) instead of gate_decays<KHAT_ONLY> (a totals tile, two barriers a chunk). A/B against ks
# (.gpu/cand/ks, the previous build) at 2×16384×16×128 (segmented: P = 4) and 8×4096×16×128 (unsegmented), GLA
# w8p4g, twice interleaved; the warp-specialised sweep of the per-key gates' wgmma variants (segments None splits
# the narrow problems: the state pass runs); ncu profiles (SASS stall summary) of GLA and Mamba-2 w8p4g at the main
# shape. Everything returned in one tarball.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/r; mkdir -p $L
cap() { local left=$((420 - SECONDS)); [ "$left" -lt "$1" ] && echo $((left > 5 ? left : 5)) || echo "$1"; }
for r in 1 2; do for c in ks sv; do
  ( timeout $(cap 40) .gpu/cand/$c/bench --out $L/ab_${c}_$r.json --reps 50 --gates gla --variants C32.c16.k128.v128.bv128.w8p4g --shapes "2,16384,16,128;8,4096,16,128" ) > $L/ab_${c}_$r.log 2>&1
  echo "== $c run $r"; grep -v screening $L/ab_${c}_$r.log | grep -E " ms |failed|rror" | head -4
done; done
t=.gpu/cand/sv/gpu_forward
( time GLA_REQUIRE_GPU=1 GLA_TEST_GATES=gla,rwkv6,hgrn2 GLA_TEST_VARIANTS=g. timeout $(cap 150) $t --test-threads=1 --nocapture warp_specialised ) > $L/ws_sv.log 2>&1
grep -E "test result|real|runs|^\| [a-z]" $L/ws_sv.log | tail -10; grep -A10 "out of tolerance\|panicked" $L/ws_sv.log | head -12
prof() {  # name gate
  local v=C32.c16.k128.v128.bv128.w8p4g.fused
  ( timeout $(cap 90) ncu --clock-control none --set full --import-source no -k regex:gla_fwd_ws -s 2 -c 1 -o $L/ncu_$1 \
      .gpu/cand/sv/bench --out /tmp/x.json --reps 3 --shapes "8,4096,16,128" --variants $v --gates $2 ) > $L/ncu_$1.txt 2>&1
  tail -1 $L/ncu_$1.txt
  if [ -f $L/ncu_$1.ncu-rep ]; then
    ncu -i $L/ncu_$1.ncu-rep --page details > $L/ncu_$1_details.txt 2>&1
    ncu -i $L/ncu_$1.ncu-rep --page source --csv --print-source sass > $L/ncu_$1_sass.csv 2>&1
    python3 benches/python/ncu_top.py $L/ncu_$1_sass.csv 100 > $L/ncu_$1_sass_top.txt 2>&1
    gzip $L/ncu_$1_sass.csv; rm -f $L/ncu_$1.ncu-rep
    grep -E "Duration|Issue Slots Busy|No Eligible" $L/ncu_$1_details.txt | head -4
  fi
}
prof gla gla
prof mamba2 mamba2
cd $L && tar czf $OUT/c3.tgz * && cd - > /dev/null && rm -rf $L
echo "call took $SECONDS s"
