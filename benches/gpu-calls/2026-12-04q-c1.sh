#!/usr/bin/env bash
# Device call 1 of session 2026-12-04q. v20: the segment-state pass's K̂ applied by the consumers (the producers write
# only the exponents Γ_L − Γ), for the per-key two-group variants. A/B, same binary, interleaved twice: new vs the
# v18 form (GLA_NVRTC_EXTRA=-DGLA_KHAT_CONSUMERS=0) at 2x16384 (and the main shape, which takes no state pass); the
# lead length swept with the new form; ncu of the launches at 2x16384 in both forms; then the GPU tests of the
# two-level scan for the per-key gates and the every-variant test of the per-key two-group variants.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/r; mkdir -p $L
cap() { local left=$((570 - SECONDS)); [ "$left" -lt "$1" ] && echo $((left > 5 ? left : 5)) || echo "$1"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
t=.gpu/bin/gpu_forward
S="2,16384,16,128;8,4096,16,128"
for r in 1 2; do
  for f in new old; do
    env=""; [ $f = old ] && env="GLA_NVRTC_EXTRA=-DGLA_KHAT_CONSUMERS=0"
    ( env $env timeout $(cap 60) .gpu/bin/bench --out $L/ab_${f}_$r.json --reps 50 --variants default --gates gla --shapes "$S" ) > $L/ab_${f}_$r.log 2>&1; echo "form=$f run $r rc=$?"
    grep -E " ms " $L/ab_${f}_$r.log | grep -v -E "best|screening" | awk '{print $1, $2, $3, $4, $5}'
    grep -E "failed|rror" $L/ab_${f}_$r.log | head -3
  done
done
for lead in 300 400 500; do
  ( GLA_SEG_LEAD=$lead timeout $(cap 40) .gpu/bin/bench --out $L/lead_$lead.json --reps 50 --variants default --gates gla --shapes "2,16384,16,128" ) > $L/lead_$lead.log 2>&1; echo "lead=$lead rc=$?"
  grep -E " ms " $L/lead_$lead.log | grep -v -E "best|screening" | awk '{print $1, $2, $3, $4, $5}'
done
for f in new old; do
  env=""; [ $f = old ] && env="GLA_NVRTC_EXTRA=-DGLA_KHAT_CONSUMERS=0"
  ( env $env timeout $(cap 60) ncu --clock-control none --section SpeedOfLight -k regex:gla_fwd -s 6 -c 6 \
      .gpu/bin/bench --out /tmp/x.json --reps 3 --shapes "2,16384,16,128" --variants default --gates gla ) > $L/ncu_2x16384_$f.txt 2>&1; echo "ncu $f rc=$?"
  grep -E "^  gla_fwd|Duration" $L/ncu_2x16384_$f.txt | head -12
done
( GLA_REQUIRE_GPU=1 GLA_TEST_GATES=gla,hgrn2,rwkv6 timeout $(cap 150) $t --test-threads=1 --nocapture segments_with_a_lead ) > $L/lead_test.log 2>&1; echo "lead test rc=$?"
grep -E "test result|SKIP" $L/lead_test.log; grep -A8 "panicked\|out of tol" $L/lead_test.log | head -20
( GLA_REQUIRE_GPU=1 GLA_TEST_GATES=gla,hgrn2,rwkv6 GLA_TEST_VARIANTS=w8p8x2g timeout $(cap 150) $t --test-threads=1 --nocapture every_variant ) > $L/every.log 2>&1; echo "every rc=$?"
grep -E "test result|SKIP" $L/every.log; grep -A8 "panicked\|out of tol" $L/every.log | head -20
cd $L && tar czf $OUT/c1.tgz * && cd - > /dev/null && rm -rf $L
echo "call took $SECONDS s"
