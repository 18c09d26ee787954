#!/usr/bin/env bash
# Device call 1 of session 2026-12-02j. x2 = per-key 8 + 8 warps in two producer groups of one warpgroup each
# (`w8p8x2g`: alternate chunks, two producer warps a scheduler; consumers' Sᵀ in registers at 144, producers 112;
# each group's exact-path Γ tile inside its tf32 tile; 16 warps: opaque() keeps the row offsets out of the live
# registers) and the same as key split 2 (`w8p8x2g.ks2`). fin = the previous session's final code (main, 1bf2dd4).
# 1. A/B GLA at the d = 128 shapes (every `bv128.w8p` variant) and d = 256 (ks2), twice interleaved. 2. x2's GPU
# tests of the new variants (every-variant and the warp-specialised sweep). 3. ncu of x2g at the main shape.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/r; mkdir -p $L
cap() { local left=$((570 - SECONDS)); [ "$left" -lt "$1" ] && echo $((left > 5 ? left : 5)) || echo "$1"; }
for r in 1 2; do for c in fin x2; do
  ( timeout $(cap 45) .gpu/cand/$c/bench --out $L/ab_${c}_$r.json --reps 50 --gates gla --variants bv128.w8p --shapes "8,4096,16,128;2,16384,16,128;32,1024,16,128" ) > $L/ab_${c}_$r.log 2>&1
  ( timeout $(cap 30) .gpu/cand/$c/bench --out $L/ab256_${c}_$r.json --reps 50 --gates gla --variants ks2 --shapes "8,4096,8,256" ) > $L/ab256_${c}_$r.log 2>&1
  echo "== $c run $r"; cat $L/ab_${c}_$r.log $L/ab256_${c}_$r.log | grep -v screening | grep -E " ms |failed|rror" | grep -v best | head -12
done; done
t=.gpu/cand/x2/gpu_forward
( GLA_REQUIRE_GPU=1 GLA_TEST_GATES=gla,hgrn2,rwkv6 GLA_TEST_VARIANTS=w8p8x2g timeout $(cap 90) $t --test-threads=1 --nocapture warp_specialised ) > $L/ws_x2.log 2>&1
( GLA_REQUIRE_GPU=1 GLA_TEST_VARIANTS=w8p8x2g timeout $(cap 90) $t --test-threads=1 --nocapture every_variant ) > $L/every_x2.log 2>&1
grep -E "^\| [a-z]|test result|runs of" $L/ws_x2.log $L/every_x2.log | tail -20; grep -A8 "panicked\|out of tol" $L/ws_x2.log $L/every_x2.log | head -12
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
[ $SECONDS -lt 440 ] && prof gla_x2g gla C32.c16.k128.v128.bv128.w8p8x2g.fused x2
cd $L && tar czf $OUT/c1.tgz * && cd - > /dev/null && rm -rf $L
echo "call took $SECONDS s"
