#!/usr/bin/env bash
# Device call 2 of session 2026-12-04q. v20b: the segment-state pass loads its logits into the slot's idle q tile and
# issues a group's next chunk at the start of the chunk (GLA_STATES_AHEAD); opt-in GLA_KHAT_CONSUMERS (call 1's K̂
# on the consumers) on top of it. A/B at 2x16384, same binary, interleaved twice: ahead (default), old
# (-DGLA_STATES_AHEAD=0), ahead + khat; the lead swept with the default; ncu of the launches; the GPU tests of the
# two-level scan (per-key gates) and the every-variant test of the per-key two-group variants (which split too).
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/r; mkdir -p $L
cap() { local left=$((570 - SECONDS)); [ "$left" -lt "$1" ] && echo $((left > 5 ? left : 5)) || echo "$1"; }
t=.gpu/bin/gpu_forward
for r in 1 2; do
  for f in ahead old khat; do
    env=""; [ $f = old ] && env="GLA_NVRTC_EXTRA=-DGLA_STATES_AHEAD=0"; [ $f = khat ] && env="GLA_NVRTC_EXTRA=-DGLA_KHAT_CONSUMERS=1"
    ( env $env timeout $(cap 50) .gpu/bin/bench --out $L/ab_${f}_$r.json --reps 50 --variants default --gates gla,mamba2 --shapes "2,16384,16,128" ) > $L/ab_${f}_$r.log 2>&1; echo "form=$f run $r rc=$?"
    grep -E " ms " $L/ab_${f}_$r.log | grep -v -E "best|screening" | awk '{print $1, $2, $3, $4, $5}'
    grep -E "failed|rror" $L/ab_${f}_$r.log | head -3
  done
done
for lead in 400 500 700 800; do
  ( GLA_SEG_LEAD=$lead timeout $(cap 40) .gpu/bin/bench --out $L/lead_$lead.json --reps 50 --variants default --gates gla --shapes "2,16384,16,128" ) > $L/lead_$lead.log 2>&1; echo "lead=$lead rc=$?"
  grep -E " ms " $L/lead_$lead.log | grep -v -E "best|screening" | awk '{print $1, $2, $3, $4, $5}'
done
( timeout $(cap 60) ncu --clock-control none --section SpeedOfLight -k regex:gla_fwd -s 6 -c 3 \
    .gpu/bin/bench --out /tmp/x.json --reps 3 --shapes "2,16384,16,128" --variants default --gates gla ) > $L/ncu_2x16384_ahead.txt 2>&1; echo "ncu rc=$?"
grep -E "^  gla_fwd|Duration|DRAM Throughput" $L/ncu_2x16384_ahead.txt | head -12
( GLA_REQUIRE_GPU=1 GLA_TEST_GATES=gla,hgrn2,rwkv6 timeout $(cap 150) $t --test-threads=1 --nocapture segments_with_a_lead ) > $L/lead_test.log 2>&1; echo "lead test rc=$?"
grep -E "test result|SKIP" $L/lead_test.log; grep -A8 "panicked\|out of tol" $L/lead_test.log | head -20
( GLA_REQUIRE_GPU=1 GLA_TEST_GATES=gla,hgrn2,rwkv6 GLA_TEST_VARIANTS=w8p8x2g timeout $(cap 100) $t --test-threads=1 --nocapture every_variant ) > $L/every.log 2>&1; echo "every rc=$?"
grep -E "test result|SKIP" $L/every.log; grep -A8 "panicked\|out of tol" $L/every.log | head -20
cd $L && tar czf $OUT/c2.tgz * && cd - > /dev/null && rm -rf $L
echo "call took $SECONDS s"
