#!/usr/bin/env bash
# Device call 5 of session 2026-12-04q (the submitted build, v20): ncu warp states + SASS source counters of the
# fused pass (gla_fwd_ws) of the 2x16384 forward — the launch that dominates that missed shape — for the note.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/r; mkdir -p $L
( timeout 150 ncu --clock-control none --section WarpStateStats --section SourceCounters --section SpeedOfLight --import-source no \
    -k 'regex:^gla_fwd_ws$' -s 1 -c 1 -o $L/ncu_ws .gpu/bin/bench --out /tmp/x.json --reps 3 --shapes "2,16384,16,128" \
    --variants default --gates gla ) > $L/ncu_ws.txt 2>&1; echo "ncu rc=$?"
if [ -f $L/ncu_ws.ncu-rep ]; then
  ncu -i $L/ncu_ws.ncu-rep --page details > $L/ncu_ws_details.txt 2>&1
  ncu -i $L/ncu_ws.ncu-rep --page source --csv --print-source sass > $L/ncu_ws_sass.csv 2>&1
  python3 benches/python/ncu_top.py $L/ncu_ws_sass.csv 60 > $L/ncu_ws_sass_top.txt 2>&1
  gzip $L/ncu_ws_sass.csv; rm -f $L/ncu_ws.ncu-rep
  grep -E "Duration|Compute \(SM\) Throughput|DRAM Throughput|Issue Slots Busy|No Eligible" $L/ncu_ws_details.txt | head -8
fi
cd $L && tar czf $OUT/c5.tgz * && cd - > /dev/null && rm -rf $L
echo "call took $SECONDS s"
