#!/usr/bin/env bash
# Device call 1 of session 2026-12-01g (kernel v11: per-key 8 + 8 warps — one producer group of two warpgroups,
# the tf32 score columns split between them; exp(Γ_L) from the producers for the consumers' state decay).
# Correctness of every per-key wgmma variant (gla, hgrn2, rwkv6) and the warp-specialised shape sweep of gla on the
# w8p4g / w8p8g variants; ours (every wgmma variant, gla + mamba2) new build against the v10 build
# (.gpu/alt/bench_v10, commit bcf663a) in the same call; an ncu profile of gla w8p8g at the main shape.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/r; mkdir -p $L
t=$(ls .gpu/tests/gpu_forward-*)
cap() { local left=$((570 - SECONDS)); [ "$left" -lt "$1" ] && echo $((left > 5 ? left : 5)) || echo "$1"; }
S="8,4096,16,128;2,16384,16,128"
( time timeout $(cap 90) .gpu/bin/bench --out $L/ours_v11.json --reps 50 --gates gla,mamba2 --variants g.fused --shapes "$S" ) > $L/ours_v11.log 2>&1
grep -E "copy|real" $L/ours_v11.log; grep -v screening $L/ours_v11.log | grep " ms " | head -20
( time timeout $(cap 60) .gpu/alt/bench_v10 --out $L/ours_v10.json --reps 50 --gates gla --variants w8p4g --shapes "$S" ) > $L/ours_v10.log 2>&1
grep -E "copy|real" $L/ours_v10.log; grep -v screening $L/ours_v10.log | grep " ms " | head -20
( time GLA_REQUIRE_GPU=1 GLA_TEST_GATES=gla,hgrn2,rwkv6 GLA_TEST_VARIANTS=g.fused timeout $(cap 100) $t --test-threads=1 --nocapture every_variant ) > $L/every_wg.log 2>&1
grep -E "^\||test result|real|compiled" $L/every_wg.log | tail -10; grep -A14 "out of tolerance\|panicked" $L/every_wg.log | head -20
( time GLA_REQUIRE_GPU=1 GLA_TEST_GATES=gla GLA_TEST_VARIANTS=w8p8g,w8p4g timeout $(cap 90) $t --test-threads=1 --nocapture warp_specialised ) > $L/ws_shapes.log 2>&1
grep -E "test result|real|runs|^\| [a-z]" $L/ws_shapes.log | tail -8; grep -A10 "out of tolerance\|panicked" $L/ws_shapes.log | head -12
v=C32.c16.k128.v128.bv128.w8p8g.fused
( time timeout $(cap 150) ncu --clock-control none --set full --import-source no -k regex:gla_fwd_ws -s 2 -c 1 -o $L/ncu_v11 \
    .gpu/bin/bench --out /tmp/x.json --reps 3 --shapes "8,4096,16,128" --variants $v --gates gla ) > $L/ncu_v11.txt 2>&1
tail -3 $L/ncu_v11.txt
if [ -f $L/ncu_v11.ncu-rep ]; then
  ncu -i $L/ncu_v11.ncu-rep --page details > $L/ncu_v11_details.txt 2>&1
  ncu -i $L/ncu_v11.ncu-rep --page source --csv --print-source sass > /tmp/sass.csv 2>&1
  python3 benches/python/ncu_top.py /tmp/sass.csv 70 > $L/ncu_v11_sass_top.txt 2>&1
  gzip -c /tmp/sass.csv > $L/ncu_v11_sass.csv.gz; rm -f $L/ncu_v11.ncu-rep
  grep -E "Duration|Registers Per|Issue Slots Busy|Warp Cycles Per Issued|No Eligible|Eligible Warps" $L/ncu_v11_details.txt | head -8
  sed -n '/stretches/,$p' $L/ncu_v11_sass_top.txt | head -20
fi
echo "call took $SECONDS s"
