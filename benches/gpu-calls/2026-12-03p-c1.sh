#!/usr/bin/env bash
# Device call 1 of session 2026-12-03p. v19: the segment combine folded into the fused pass's prologue and the fused
# pass launched as a programmatic dependent of the state pass. A/B, default variants, interleaved twice: v19 (bench),
# v19 with GLA_NO_PDL=1 (same kernels, plain launches), v18 (bench_v18 = the build of 9fec1cd, three launches);
# the lead length swept at 2x16384; then the GPU tests of the two-level scan (every gate, S = 2, 3, 5, varlen, h0)
# and the warp-specialised sweep; then ncu of the two launches at 2x16384.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/r; mkdir -p $L
cap() { local left=$((565 - SECONDS)); [ "$left" -lt "$1" ] && echo $((left > 5 ? left : 5)) || echo "$1"; }
t=.gpu/bin/gpu_forward
S="2,16384,16,128;8,4096,16,128"
for r in 1 2; do
  for f in new nopdl v18; do
    b=.gpu/bin/bench; env=""; [ $f = v18 ] && b=.gpu/bin/bench_v18; [ $f = nopdl ] && env="GLA_NO_PDL=1"
    ( env $env timeout $(cap 60) $b --out $L/ab_${f}_$r.json --reps 50 --variants default --shapes "$S" ) > $L/ab_${f}_$r.log 2>&1; echo "form=$f run $r rc=$?"
    grep -E " ms " $L/ab_${f}_$r.log | grep -v -E "best|screening" | awk '{print $1, $2, $3, $4, $5}'
    grep -E "failed|rror" $L/ab_${f}_$r.log | head -3
  done
done
for lead in 400 800 1000; do
  ( GLA_SEG_LEAD=$lead timeout $(cap 40) .gpu/bin/bench --out $L/lead_$lead.json --reps 50 --variants default --shapes "2,16384,16,128" ) > $L/lead_$lead.log 2>&1; echo "lead=$lead rc=$?"
  grep -E " ms " $L/lead_$lead.log | grep -v -E "best|screening" | awk '{print $1, $2, $3, $4, $5}'
done
( GLA_REQUIRE_GPU=1 timeout $(cap 200) $t --test-threads=1 --nocapture segments_with_a_lead ) > $L/lead_test.log 2>&1; echo "lead test rc=$?"
grep -E "test result" $L/lead_test.log; grep -A8 "panicked\|out of tol" $L/lead_test.log | head -20
( GLA_REQUIRE_GPU=1 timeout $(cap 90) $t --test-threads=1 --nocapture warp_specialised ) > $L/ws.log 2>&1; echo "ws rc=$?"
grep -E "test result" $L/ws.log; grep -A8 "panicked\|out of tol" $L/ws.log | head -10
( timeout $(cap 60) ncu --clock-control none --section SpeedOfLight --section LaunchStats -k regex:gla_fwd -s 4 -c 4 \
    .gpu/bin/bench --out /tmp/x.json --reps 3 --shapes "2,16384,16,128" --variants w8p8x2g.fused --gates gla ) > $L/ncu_2x16384.txt 2>&1; echo "ncu rc=$?"
grep -E "gla_fwd|Duration" $L/ncu_2x16384.txt | head -12
cd $L && tar czf $OUT/c1.tgz * && cd - > /dev/null && rm -rf $L
echo "call took $SECONDS s"
