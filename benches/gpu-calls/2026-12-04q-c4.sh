#!/usr/bin/env bash
# Device call 4 of session 2026-12-04q. v20c: the state pass's issue-ahead extended to the scalar gates' two TMA
# groups (Mamba-2's w8p4x2g: logits in registers, so nothing to relocate); call 1's consumer K̂ removed. A/B at
# 2x16384, interleaved twice: Mamba-2 old (-DGLA_STATES_AHEAD=0) at lead 600 and 500, ahead at 600 / 500 / 400;
# GLA ahead at 500 / 450; then the GPU tests of the two-level scan for every gate and the every-variant test of
# the two-group variants of every gate (each also runs split into segments).
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/r; mkdir -p $L
cap() { local left=$((570 - SECONDS)); [ "$left" -lt "$1" ] && echo $((left > 5 ? left : 5)) || echo "$1"; }
t=.gpu/bin/gpu_forward
for r in 1 2; do
  for c in mamba2:old:600 mamba2:old:500 mamba2:ahead:600 mamba2:ahead:500 mamba2:ahead:400 gla:ahead:500 gla:ahead:450; do
    IFS=: read gate f lead <<< "$c"
    env="GLA_SEG_LEAD=$lead"; [ $f = old ] && env="$env GLA_NVRTC_EXTRA=-DGLA_STATES_AHEAD=0"
    n=${gate}_${f}_${lead}_$r
    ( env $env timeout $(cap 40) .gpu/bin/bench --out $L/ab_$n.json --reps 50 --variants default --gates $gate --shapes "2,16384,16,128" ) > $L/ab_$n.log 2>&1
    echo "$gate form=$f lead=$lead run $r: $(grep -E ' ms ' $L/ab_$n.log | grep -v -E 'best|screening' | awk '{print $3, $4, $5}')"
  done
done
( GLA_REQUIRE_GPU=1 timeout $(cap 240) $t --test-threads=1 --nocapture segments_with_a_lead ) > $L/lead_test.log 2>&1; echo "lead test rc=$?"
grep -E "test result|SKIP" $L/lead_test.log; grep -A8 "panicked\|out of tol" $L/lead_test.log | head -20
grep -E "^\|" $L/lead_test.log | awk -F'|' '{print $3}' | sort | uniq -c | head
( GLA_REQUIRE_GPU=1 GLA_TEST_VARIANTS=x2g timeout $(cap 150) $t --test-threads=1 --nocapture every_variant ) > $L/every.log 2>&1; echo "every rc=$?"
grep -E "test result|SKIP|narrow" $L/every.log; grep -A8 "panicked\|out of tol" $L/every.log | head -20
cd $L && tar czf $OUT/c4.tgz * && cd - > /dev/null && rm -rf $L
echo "call took $SECONDS s"
