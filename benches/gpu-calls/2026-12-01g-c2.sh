#!/usr/bin/env bash
# Device call 2 of session 2026-12-01g (kernel v11b: whole chunks reach the slots by TMA — one producer thread,
# an mbarrier a slot — in every warp-specialised wgmma variant but the per-key ones without producer-side scores).
# Ours (every wgmma variant, gla + mamba2) against the v10 build (.gpu/alt/bench_v10, commit bcf663a) in the same
# call; correctness of every wgmma variant of every gate and the warp-specialised shape sweep (wgmma variants);
# an ncu profile of gla w8p4g at the main shape.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/r; mkdir -p $L
t=$(ls .gpu/tests/gpu_forward-*)
cap() { local left=$((575 - SECONDS)); [ "$left" -lt "$1" ] && echo $((left > 5 ? left : 5)) || echo "$1"; }
S="8,4096,16,128;2,16384,16,128"
( time timeout $(cap 90) .gpu/bin/bench --out $L/ours_v11b.json --reps 50 --gates gla,mamba2 --variants g.fused --shapes "$S" ) > $L/ours_v11b.log 2>&1
grep -E "copy|real" $L/ours_v11b.log; grep -v screening $L/ours_v11b.log | grep " ms " | head -20
( time timeout $(cap 60) .gpu/alt/bench_v10 --out $L/ours_v10.json --reps 50 --gates gla,mamba2 --variants w8p4g --shapes "$S" ) > $L/ours_v10.log 2>&1
grep -E "copy|real" $L/ours_v10.log; grep -v screening $L/ours_v10.log | grep " ms " | head -20
v=C32.c16.k128.v128.bv128.w8p4g.fused
( time timeout $(cap 120) ncu --clock-control none --set full --import-source no -k regex:gla_fwd_ws -s 2 -c 1 -o $L/ncu_v11b \
    .gpu/bin/bench --out /tmp/x.json --reps 3 --shapes "8,4096,16,128" --variants $v --gates gla ) > $L/ncu_v11b.txt 2>&1
tail -2 $L/ncu_v11b.txt
if [ -f $L/ncu_v11b.ncu-rep ]; then
  ncu -i $L/ncu_v11b.ncu-rep --page details > $L/ncu_v11b_details.txt 2>&1
  ncu -i $L/ncu_v11b.ncu-rep --page source --csv --print-source sass > /tmp/sass.csv 2>&1
  python3 benches/python/ncu_top.py /tmp/sass.csv 70 > $L/ncu_v11b_sass_top.txt 2>&1
  gzip -c /tmp/sass.csv > $L/ncu_v11b_sass.csv.gz; rm -f $L/ncu_v11b.ncu-rep
  grep -E "Duration|Issue Slots Busy|No Eligible" $L/ncu_v11b_details.txt | head -4
  sed -n '/stretches/,$p' $L/ncu_v11b_sass_top.txt | head -16
fi
( time GLA_REQUIRE_GPU=1 GLA_TEST_VARIANTS=g.fused timeout $(cap 120) $t --test-threads=1 --nocapture every_variant ) > $L/every_wg.log 2>&1
grep -E "^\||test result|real|compiled" $L/every_wg.log | tail -20; grep -A14 "out of tolerance\|panicked" $L/every_wg.log | head -20
( time GLA_REQUIRE_GPU=1 GLA_TEST_VARIANTS=g.fused timeout $(cap 250) $t --test-threads=1 --nocapture warp_specialised ) > $L/ws_shapes.log 2>&1
grep -E "test result|real|runs|^\| [a-z]" $L/ws_shapes.log | tail -18; grep -A10 "out of tolerance\|panicked" $L/ws_shapes.log | head -12
cd $L && tar czf logs.tgz *.log && cd - > /dev/null
echo "call took $SECONDS s"
