#!/usr/bin/env bash
# Device call 2 of session 2026-12-02i. Call 1 measured p1/p2 slower than fin for GLA w8p4g (0.320 vs 0.304 ms).
# Which change: p3 = p2 with the gate's log2 fold off (the writer's fallback fmaf(log α, log2 e, acc): fin's
# arithmetic), p4 = p2 without the interleaved score operand tile (warps 0, 1 store A, as fin). A/B fin, p2, p3, p4
# twice interleaved at the main shape (GLA w8p4g, Mamba-2 w8p4x2g / w8p4g); then an ncu profile (warp states +
# source counters) of Mamba-2 w8p4x2g on p2 (where do the scalar gates' producers and consumers wait now).
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/r; mkdir -p $L
cap() { local left=$((400 - SECONDS)); [ "$left" -lt "$1" ] && echo $((left > 5 ? left : 5)) || echo "$1"; }
for r in 1 2; do for c in fin p2 p3 p4; do
  ( timeout $(cap 30) .gpu/cand/$c/bench --out $L/ab_${c}_$r.json --reps 50 --gates gla,mamba2 --variants C32.c16.k128.v128.bv128.w8p4 --shapes "8,4096,16,128" ) > $L/ab_${c}_$r.log 2>&1
  echo "== $c run $r"; grep -v screening $L/ab_${c}_$r.log | grep -E "w8p4g|w8p4x2g|failed|rror" | grep " ms " | head -4
done; done
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
prof mamba2_x2g mamba2 C32.c16.k128.v128.bv128.w8p4x2g.fused p2
cd $L && tar czf $OUT/c2.tgz * && cd - > /dev/null && rm -rf $L
echo "call took $SECONDS s"
