#!/usr/bin/env bash
# Device call 1 of session 2026-12-02k. fin = .gpu/bin/bench (session j's final build, 2336eff). l1 =
#  (F) the two-level scan with a lead segment (segment 0's fused forward runs in the state pass's launch; no state
#      pass for the last segment; GLA_SEG_LEAD = the lead's length in thousandths of a later segment, default 600);
#  (E) key split 2 as a 2-CTA cluster where the exchange buffers fit (Mamba-2 w8p4x2g.ks2, GLA w8p4g.ks2): slice 1's
#      partial output goes to slice 0 through DSMEM, no f32 partials in global memory, no gla_fwd_ksum.
# 1. A/B twice interleaved: 8×4096×16×128 and 2×16384×16×128 (x2g variants), 8×4096×8×256 (ks2 variants); then l1
#    with leads 0 / 400 / 800 at 2×16384. 2. l1's GPU tests: the lead test, the key-split variants (every-variant and
#    the warp-specialised sweep), the default-variant shape sweep.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/r; mkdir -p $L
cap() { local left=$((560 - SECONDS)); [ "$left" -lt "$1" ] && echo $((left > 5 ? left : 5)) || echo "$1"; }
S2="8,4096,16,128;2,16384,16,128"
for r in 1 2; do
  for c in fin l1; do
    b=.gpu/cand/$c/bench; [ $c = fin ] && b=.gpu/bin/bench
    ( timeout $(cap 60) $b --out $L/ab_${c}_$r.json --reps 50 --gates gla,mamba2 --variants x2g --shapes "$S2" ) > $L/ab_${c}_$r.log 2>&1; echo "rc=$?"
    ( timeout $(cap 60) $b --out $L/ab256_${c}_$r.json --reps 50 --gates gla,mamba2 --variants ks2 --shapes "8,4096,8,256" ) > $L/ab256_${c}_$r.log 2>&1; echo "rc=$?"
    echo "== $c run $r"; cat $L/ab_${c}_$r.log $L/ab256_${c}_$r.log | grep -v screening | grep -E " ms |failed|rror" | grep -v best | head -14
  done
done
for lead in 0 400 800; do
  ( GLA_SEG_LEAD=$lead timeout $(cap 50) .gpu/cand/l1/bench --out $L/lead_$lead.json --reps 50 --gates gla,mamba2 --variants x2g --shapes "2,16384,16,128" ) > $L/lead_$lead.log 2>&1; echo "rc=$?"
  echo "== lead $lead"; grep -v screening $L/lead_$lead.log | grep -E " ms |failed|rror" | grep -v best | head -4
done
t=.gpu/cand/l1/gpu_forward
( GLA_REQUIRE_GPU=1 timeout $(cap 120) $t --test-threads=1 --nocapture segments_with_a_lead ) > $L/lead_test.log 2>&1; echo "rc=$?"
( GLA_REQUIRE_GPU=1 GLA_TEST_VARIANTS=ks2 timeout $(cap 90) $t --test-threads=1 --nocapture every_variant ) > $L/every_ks2.log 2>&1; echo "rc=$?"
( GLA_REQUIRE_GPU=1 GLA_TEST_VARIANTS=ks2 timeout $(cap 100) $t --test-threads=1 --nocapture warp_specialised ) > $L/ws_ks2.log 2>&1; echo "rc=$?"
( GLA_REQUIRE_GPU=1 timeout $(cap 150) $t --test-threads=1 --nocapture shapes_varlen ) > $L/shapes.log 2>&1; echo "rc=$?"
grep -E "test result|runs of|SKIPP|^\| [a-z].*(bf16|f16|f32) \| [0-9]" $L/lead_test.log $L/every_ks2.log $L/ws_ks2.log $L/shapes.log | grep -v "T=\|varlen" | tail -30
grep -A12 "panicked\|out of tol" $L/lead_test.log $L/every_ks2.log $L/ws_ks2.log $L/shapes.log | head -40
cd $L && tar czf $OUT/c1.tgz * && cd - > /dev/null && rm -rf $L
echo "call took $SECONDS s"
