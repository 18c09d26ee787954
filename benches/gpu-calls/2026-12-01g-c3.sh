#!/usr/bin/env bash
# Device call 3 of session 2026-12-01g (kernel v11c: TMA for the per-key wgmma-score variants only; a TMA chunk's
# producers wait on the slot's mbarrier each, with no group barrier after it; the issuing thread is lane 0 of the
# group's last warp). Ours new build against the call-2 build (.gpu/alt/bench_v11b: TMA, barrier after the wait,
# thread 0 issues) and the v10 build (.gpu/alt/bench_v10) in the same call, GLA + Mamba-2; correctness of every
# per-key wgmma variant and the warp-specialised sweep of the per-key gates; an ncu profile of gla w8p4g.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/r; mkdir -p $L
t=$(ls .gpu/tests/gpu_forward-*)
cap() { local left=$((575 - SECONDS)); [ "$left" -lt "$1" ] && echo $((left > 5 ? left : 5)) || echo "$1"; }
S="8,4096,16,128;2,16384,16,128;32,1024,16,128"
for b in bin/bench alt/bench_v11b alt/bench_v10; do
  n=$(basename $b)
  ( time timeout $(cap 60) .gpu/$b --out $L/ab_$n.json --reps 50 --gates gla,mamba2 --variants w8p4 --shapes "$S" ) > $L/ab_$n.log 2>&1
  echo "== $n"; grep -E "copy" $L/ab_$n.log; grep -v screening $L/ab_$n.log | grep " ms " | grep -E "w8p4g|w8p4x2g" | head -12
done
( time GLA_REQUIRE_GPU=1 GLA_TEST_GATES=gla,hgrn2,rwkv6 GLA_TEST_VARIANTS=g.fused timeout $(cap 100) $t --test-threads=1 --nocapture every_variant ) > $L/every_wg.log 2>&1
grep -E "^\||test result|real|compiled" $L/every_wg.log | tail -10; grep -A14 "out of tolerance\|panicked" $L/every_wg.log | head -20
( time GLA_REQUIRE_GPU=1 GLA_TEST_GATES=gla,hgrn2,rwkv6 GLA_TEST_VARIANTS=g.fused timeout $(cap 150) $t --test-threads=1 --nocapture warp_specialised ) > $L/ws_shapes.log 2>&1
grep -E "test result|real|runs|^\| [a-z]" $L/ws_shapes.log | tail -10; grep -A10 "out of tolerance\|panicked" $L/ws_shapes.log | head -12
v=C32.c16.k128.v128.bv128.w8p4g.fused
( time timeout $(cap 100) ncu --clock-control none --set full --import-source no -k regex:gla_fwd_ws -s 2 -c 1 -o $L/ncu_v11c \
    .gpu/bin/bench --out /tmp/x.json --reps 3 --shapes "8,4096,16,128" --variants $v --gates gla ) > $L/ncu_v11c.txt 2>&1
if [ -f $L/ncu_v11c.ncu-rep ]; then
  ncu -i $L/ncu_v11c.ncu-rep --page details > $L/ncu_v11c_details.txt 2>&1
  ncu -i $L/ncu_v11c.ncu-rep --page source --csv --print-source sass > /tmp/sass.csv 2>&1
  python3 benches/python/ncu_top.py /tmp/sass.csv 70 > $L/ncu_v11c_sass_top.txt 2>&1
  gzip -c /tmp/sass.csv > $L/ncu_v11c_sass.csv.gz; rm -f $L/ncu_v11c.ncu-rep
  grep -E "Duration|Issue Slots Busy|No Eligible" $L/ncu_v11c_details.txt | head -4
  sed -n '/stretches/,$p' $L/ncu_v11c_sass_top.txt | head -16
fi
cd $L && tar czf logs.tgz *.log *.json && cd - > /dev/null
echo "call took $SECONDS s"
