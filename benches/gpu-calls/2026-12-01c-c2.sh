#!/usr/bin/env bash
# Device call 2 of session 2026-12-01c: ws kernel with two producer groups (x2), scores' correction products on
# their own accumulators. Correctness (ws variants of three gates; every gla variant), screen at the main and the
# long narrow shape, ncu of the best ws variants, the ws shape sweep.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/r; mkdir -p $L
t=$(ls .gpu/tests/gpu_forward-*)
( time GLA_REQUIRE_GPU=1 GLA_TEST_GATES=gla,mamba2,retnet GLA_TEST_VARIANTS=p4,p8 timeout 120 $t --test-threads=1 --nocapture every_variant ) > $L/every_ws.log 2>&1
grep -E "^\||test result|real|compiled|GLA_TEST" $L/every_ws.log; grep -A14 "out of tolerance\|panicked" $L/every_ws.log | head -16
( time GLA_REQUIRE_GPU=1 GLA_TEST_GATES=gla timeout 150 $t --test-threads=1 --nocapture every_variant ) > $L/every_gla.log 2>&1
grep -E "^\||test result|real|compiled|GLA_TEST" $L/every_gla.log; grep -A14 "out of tolerance\|panicked" $L/every_gla.log | head -16
( time timeout 150 .gpu/bin/bench --out $L/screen.json --reps 30 --shapes "8,4096,16,128;2,16384,16,128" --variants fused --gates gla,mamba2 ) > $L/screen.log 2>&1
grep -v screening $L/screen.log | tail -16; grep -E "w[48]p[48]" $L/screen.log | head -30
for gv in gla:gla.fwd.bf16.C32.c16.k128.v128.bv128.w8p8x2 gla:gla.fwd.bf16.C32.c16.k128.v128.bv128.w8p8. mamba2:mamba2.fwd.bf16.C32.c16.k128.v128.bv128.w8p4.; do
  g=${gv%%:*}; v=${gv#*:}; n=$(echo $v | tr -c 'a-z0-9\n' '_')
  GLA_LINEINFO=1 timeout 100 ncu --clock-control none --set full --import-source no -k regex:gla_fwd_ws -s 2 -c 1 -o $L/ncu_$n \
    .gpu/bin/bench --out /tmp/x.json --reps 3 --shapes "8,4096,16,128" --variants $v --gates $g > $L/ncu_$n.txt 2>&1
  ncu -i $L/ncu_$n.ncu-rep --page details > $L/ncu_${n}_details.txt 2>&1
  ncu -i $L/ncu_$n.ncu-rep --page source --csv --print-source sass > $L/ncu_${n}_sass.csv 2>&1
  rm -f $L/ncu_$n.ncu-rep
  echo "== $v"; grep -E "Duration|Registers Per|Issue Slots Busy|Warp Cycles Per Issued|No Eligible|Eligible Warps|Memory Throughput|DRAM Throughput" $L/ncu_${n}_details.txt | head -10
done
( time GLA_REQUIRE_GPU=1 GLA_TEST_GATES=gla,mamba2,retnet timeout 200 $t --test-threads=1 --nocapture warp_specialised ) > $L/ws_shapes.log 2>&1
grep -E "^\||test result|real|runs|compiled" $L/ws_shapes.log; grep -A14 "out of tolerance\|panicked" $L/ws_shapes.log | head -16
tar czf $OUT/c2.tgz -C $OUT r; rm -rf $L
