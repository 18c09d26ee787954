#!/usr/bin/env bash
# Device call 2 of session 2026-12-02j. x2 = commit a4e119b (per-key w8p8x2g, three slots, each group loads its next
# chunk after publishing this one — call 1's ncu: its producers wait on their own TMA load, long_sb, 18 % of their
# samples). x4 = x2 + four slots for two TMA producer groups (a slot only ever holds one group's chunks) with the
# next chunk issued midway through this one (per key: after the gate, the logits tiles per group so that four
# slots fit in 227 KB; scalar gates: after the scores — session i's `ring4-mid`).
# 1. A/B twice interleaved: GLA w8p8x2g at the d = 128 shapes and ks2 at d = 256, Mamba-2 w8p4x2g at the d = 128
# shapes. 2. x4's GPU tests of every x2g variant (warp-specialised sweep, every-variant). 3. ncu of x4 (GLA).
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/r; mkdir -p $L
cap() { local left=$((570 - SECONDS)); [ "$left" -lt "$1" ] && echo $((left > 5 ? left : 5)) || echo "$1"; }
S3="8,4096,16,128;2,16384,16,128;32,1024,16,128"
for r in 1 2; do for c in x2 x4; do
  ( timeout $(cap 45) .gpu/cand/$c/bench --out $L/ab_gla_${c}_$r.json --reps 50 --gates gla --variants w8p8x2g --shapes "$S3;8,4096,8,256" ) > $L/ab_gla_${c}_$r.log 2>&1
  ( timeout $(cap 45) .gpu/cand/$c/bench --out $L/ab_m2_${c}_$r.json --reps 50 --gates mamba2 --variants w8p4x2g --shapes "$S3" ) > $L/ab_m2_${c}_$r.log 2>&1
  echo "== $c run $r"; cat $L/ab_gla_${c}_$r.log $L/ab_m2_${c}_$r.log | grep -v screening | grep -E " ms |failed|rror" | grep -v best | head -12
done; done
t=.gpu/cand/x4/gpu_forward
( GLA_REQUIRE_GPU=1 GLA_TEST_VARIANTS=x2g timeout $(cap 120) $t --test-threads=1 --nocapture warp_specialised ) > $L/ws_x4.log 2>&1
( GLA_REQUIRE_GPU=1 GLA_TEST_VARIANTS=x2g timeout $(cap 90) $t --test-threads=1 --nocapture every_variant ) > $L/every_x4.log 2>&1
grep -E "^\| [a-z]|test result|runs of" $L/ws_x4.log $L/every_x4.log | tail -24; grep -A8 "panicked\|out of tol" $L/ws_x4.log $L/every_x4.log | head -12
prof() {  # name gate variant build
  ( timeout $(cap 100) ncu --clock-control none --section WarpStateStats --section SourceCounters --section SpeedOfLight --import-source no -k regex:gla_fwd_ws -s 2 -c 1 -o $L/ncu_$1 \
      .gpu/cand/$4/bench --out /tmp/x.json --reps 3 --shapes "8,4096,16,128" --variants $3 --gates $2 ) > $L/ncu_$1.txt 2>&1
  tail -1 $L/ncu_$1.txt
  if [ -f $L/ncu_$1.ncu-rep ]; then
    ncu -i $L/ncu_$1.ncu-rep --page details > $L/ncu_$1_details.txt 2>&1
    ncu -i $L/ncu_$1.ncu-rep --page source --csv --print-source sass > $L/ncu_$1_sass.csv 2>&1
    python3 benches/python/ncu_top.py $L/ncu_$1_sass.csv 100 > $L/ncu_$1_sass_top.txt 2>&1
    gzip $L/ncu_$1_sass.csv; rm -f $L/ncu_$1.ncu-rep
    grep -E "Duration|Issue Slots Busy|No Eligible" $L/ncu_$1_details.txt | head -4
  fi
}
[ $SECONDS -lt 440 ] && prof gla_x4 gla C32.c16.k128.v128.bv128.w8p8x2g.fused x4
cd $L && tar czf $OUT/c2.tgz * && cd - > /dev/null && rm -rf $L
echo "call took $SECONDS s"
