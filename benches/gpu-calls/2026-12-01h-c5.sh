#!/usr/bin/env bash
# Device call 5 of session 2026-12-01h. Candidate k2 (.gpu/cand/k2): the key split without the sum kernel — the
# main pass runs once a key slice, slice 1 first (f32 output to the workspace), then slice 0 (adds it, writes O).
# A/B against st (.gpu/cand/st: slices in one launch, f32 partials of both, gla_fwd_ksum) at 8×4096×8×256, GLA, twice
# interleaved; correctness of the .ks2 variants (every_variant; the warp-specialised sweep: D = 200, 256, logits+12).
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/r; mkdir -p $L
cap() { local left=$((200 - SECONDS)); [ "$left" -lt "$1" ] && echo $((left > 5 ? left : 5)) || echo "$1"; }
for r in 1 2; do for c in st k2; do
  ( timeout $(cap 30) .gpu/cand/$c/bench --out $L/ab_${c}_$r.json --reps 50 --gates gla --variants ks2 --shapes "8,4096,8,256" ) > $L/ab_${c}_$r.log 2>&1
  echo "== $c run $r"; grep -v screening $L/ab_${c}_$r.log | grep -E " ms |failed|rror" | head -3
done; done
t=.gpu/cand/k2/gpu_forward
( time GLA_REQUIRE_GPU=1 GLA_TEST_VARIANTS=.ks2. timeout $(cap 40) $t --test-threads=1 --nocapture every_variant ) > $L/every_k2.log 2>&1
grep -E "^\||test result|real" $L/every_k2.log | tail -8; grep -A14 "out of tolerance\|panicked" $L/every_k2.log | head -20
( time GLA_REQUIRE_GPU=1 GLA_TEST_VARIANTS=.ks2. timeout $(cap 60) $t --test-threads=1 --nocapture warp_specialised ) > $L/ws_k2.log 2>&1
grep -E "test result|real|runs|^\| [a-z]" $L/ws_k2.log | tail -8; grep -A10 "out of tolerance\|panicked" $L/ws_k2.log | head -12
cd $L && tar czf $OUT/c5.tgz * && cd - > /dev/null && rm -rf $L
echo "call took $SECONDS s"
