#!/usr/bin/env bash
# Device call 2 of session 2026-12-01h. Candidate ks (.gpu/cand/ks): key split — per-key gates at d_k = 256 run each
# head as two 128-column key slices on the d = 128 wgmma kernel (w8p4g, one 128-wide value tile), f32 partial
# outputs summed by gla_fwd_ksum. Against the v11f build (.gpu/cand/a) in the same call: GLA at 8×4096×8×256 (ks2
# vs the best one-CTA d = 256 kernel) and the main shape (w8p4g, whose PTX is unchanged); correctness of the .ks2
# variants (every_variant, the warp-specialised sweep incl. D = 200 and D = 256 with logits + 12).
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/r; mkdir -p $L
cap() { local left=$((400 - SECONDS)); [ "$left" -lt "$1" ] && echo $((left > 5 ? left : 5)) || echo "$1"; }
t=.gpu/cand/ks/gpu_forward
( time GLA_REQUIRE_GPU=1 GLA_TEST_VARIANTS=.ks2. timeout $(cap 60) $t --test-threads=1 --nocapture every_variant ) > $L/every_ks.log 2>&1
grep -E "^\||test result|real|compiled" $L/every_ks.log | tail -8; grep -A14 "out of tolerance\|panicked" $L/every_ks.log | head -20
for r in 1 2; do
  ( timeout $(cap 40) .gpu/cand/a/bench --out /tmp/a.json --reps 50 --gates gla --variants C32.c16.k256.v256.bv64.w8.fused --shapes "8,4096,8,256" ) > $L/ab_a256_$r.log 2>&1
  ( timeout $(cap 40) .gpu/cand/ks/bench --out /tmp/k.json --reps 50 --gates gla --variants ks2 --shapes "8,4096,8,256" ) > $L/ab_ks256_$r.log 2>&1
  ( timeout $(cap 40) .gpu/cand/a/bench --out /tmp/a.json --reps 50 --gates gla --variants C32.c16.k128.v128.bv128.w8p4g --shapes "8,4096,16,128" ) > $L/ab_a128_$r.log 2>&1
  ( timeout $(cap 40) .gpu/cand/ks/bench --out /tmp/k.json --reps 50 --gates gla --variants C32.c16.k128.v128.bv128.w8p4g --shapes "8,4096,16,128" ) > $L/ab_ks128_$r.log 2>&1
  for f in a256 ks256 a128 ks128; do echo "== $f $r"; grep -v screening $L/ab_${f}_$r.log | grep -E " ms |best|failed|rror" | head -4; done
done
( time GLA_REQUIRE_GPU=1 GLA_TEST_VARIANTS=.ks2. timeout $(cap 150) $t --test-threads=1 --nocapture warp_specialised ) > $L/ws_ks.log 2>&1
grep -E "test result|real|runs|^\| [a-z]" $L/ws_ks.log | tail -10; grep -A10 "out of tolerance\|panicked" $L/ws_ks.log | head -12
cd $L && tar czf logs.tgz *.log && rm -f *.log && cd - > /dev/null
echo "call took $SECONDS s"
