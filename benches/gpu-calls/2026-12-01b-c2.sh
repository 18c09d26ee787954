#!/usr/bin/env bash
# Device call 2 of session 2026-12-01b: v6b (cheaper gate math, strength-reduced loads, packed conversions)
# correctness on three gates, variant screen at the main shape, ncu source view (gla w8, mamba2 w8).
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/r; mkdir -p $L
t=$(ls .gpu/tests/gpu_forward-*)
( time GLA_REQUIRE_GPU=1 GLA_TEST_GATES=gla,mamba2,value_gla $t --test-threads=1 --nocapture every_variant ) > $L/every.log 2>&1
grep -E "^\||test result|real|compiled" $L/every.log; grep -A12 "out of tolerance" $L/every.log | head -14
.gpu/bin/bench --out $L/screen.json --reps 50 --shapes "8,4096,16,128" --variants all --gates gla,mamba2 > $L/screen.log 2>&1
grep -v screening $L/screen.log | tail -12
for gv in gla:C64.c16.k128.v128.bv128.w8.fused mamba2:C64.c16.k128.v128.bv128.w8.fused; do
  g=${gv%%:*}; v=${gv#*:}
  timeout 100 ncu --clock-control none --set full --import-source no -k regex:gla_fwd_fused -s 2 -c 1 -o $L/ncu_${g}_$v \
    .gpu/bin/bench --out /tmp/x.json --reps 3 --shapes "8,4096,16,128" --variants $v --gates $g > $L/ncu_${g}_$v.txt 2>&1
  ncu -i $L/ncu_${g}_$v.ncu-rep --page details > $L/ncu_${g}_${v}_details.txt 2>&1
  ncu -i $L/ncu_${g}_$v.ncu-rep --page source --csv --print-source sass > $L/ncu_${g}_${v}_sass.csv 2>&1
  rm -f $L/ncu_${g}_$v.ncu-rep
  grep -E "Duration|Registers Per|Issue Slots Busy|Warp Cycles Per Issued|No Eligible|Eligible Warps" $L/ncu_${g}_${v}_details.txt | head -8
done
tar czf $OUT/c2.tgz -C $OUT r; rm -rf $L
