#!/usr/bin/env bash
# Device call 6 of session 2026-12-01f (kernel v10e: v10e + the per-key producers' gate and decays on 16-byte vectors, shuffle scan). Correctness
# of every per-key wgmma variant of gla (every_variant narrowed to `g.fused`) and the warp-specialised shape sweep of
# the per-key gates (left to the final call); ours (gla, the w8p4g / w4p4g variants) new build against the v9 build (.gpu/alt/bench_v9, commit
# b113f0d) in the same call; an ncu profile (details + SASS stall samples) of the new default at the main shape.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/r; mkdir -p $L
t=$(ls .gpu/tests/gpu_forward-*)
cap() { local left=$((570 - SECONDS)); [ "$left" -lt "$1" ] && echo $((left > 5 ? left : 5)) || echo "$1"; }
( time GLA_REQUIRE_GPU=1 GLA_TEST_GATES=gla GLA_TEST_VARIANTS=g.fused timeout $(cap 90) $t --test-threads=1 --nocapture every_variant ) > $L/every_wg.log 2>&1
grep -E "^\||test result|real|compiled" $L/every_wg.log | tail -8; grep -A14 "out of tolerance\|panicked" $L/every_wg.log | head -20
S="8,4096,16,128;2,16384,16,128"
( time timeout $(cap 70) .gpu/bin/bench --out $L/ours_v10e.json --reps 50 --gates gla --variants w8p4g --shapes "$S" ) > $L/ours_v10e.log 2>&1
grep -E "copy|real" $L/ours_v10e.log; grep -v screening $L/ours_v10e.log | grep " ms " | head -20
( time timeout $(cap 70) .gpu/alt/bench_v9 --out $L/ours_v9.json --reps 50 --gates gla --variants w8p4g --shapes "$S" ) > $L/ours_v9.log 2>&1
grep -E "copy|real" $L/ours_v9.log; grep -v screening $L/ours_v9.log | grep " ms " | head -20
v=C32.c16.k128.v128.bv128.w8p4g.fused
( time timeout $(cap 150) ncu --clock-control none --set full --import-source no -k regex:gla_fwd_ws -s 2 -c 1 -o $L/ncu_v10e \
    .gpu/bin/bench --out /tmp/x.json --reps 3 --shapes "8,4096,16,128" --variants $v --gates gla ) > $L/ncu_v10e.txt 2>&1
tail -3 $L/ncu_v10e.txt
if [ -f $L/ncu_v10e.ncu-rep ]; then
  ncu -i $L/ncu_v10e.ncu-rep --page details > $L/ncu_v10e_details.txt 2>&1
  ncu -i $L/ncu_v10e.ncu-rep --page source --csv --print-source sass > /tmp/sass.csv 2>&1
  python3 benches/python/ncu_top.py /tmp/sass.csv 70 > $L/ncu_v10e_sass_top.txt 2>&1
  gzip -c /tmp/sass.csv > $L/ncu_v10e_sass.csv.gz; rm -f $L/ncu_v10e.ncu-rep
  grep -E "Duration|Registers Per|Issue Slots Busy|Warp Cycles Per Issued|No Eligible|Eligible Warps" $L/ncu_v10e_details.txt | head -8
  head -40 $L/ncu_v10e_sass_top.txt
fi
echo "call took $SECONDS s"
