#!/usr/bin/env bash
# Device call 1 of session 2026-12-03o. v18 candidate: per key (w8p8x2g), a producer group issues its next chunk right
# after its gate has read the logits (GLA_EARLY_ISSUE=1) instead of after the decays (=0, through GLA_NVRTC_EXTRA),
# same binary, twice interleaved; then the GPU tests of the per-key x2g variants (every-variant, the warp-specialised
# sweep incl. logits +-12, i.e. the exact path of chunks that are not mild) and the default-variant shape sweep of the
# per-key gates; then ncu (warp states + SASS source counters) of the new form at 8x4096x16x128.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/r; mkdir -p $L
cap() { local left=$((565 - SECONDS)); [ "$left" -lt "$1" ] && echo $((left > 5 ? left : 5)) || echo "$1"; }
b=.gpu/bin/bench; t=.gpu/bin/gpu_forward
S="8,4096,16,128;2,16384,16,128;32,1024,16,128;8,4096,8,256"
for r in 1 2; do
  for x in 1 0; do
    ( GLA_NVRTC_EXTRA="-DGLA_EARLY_ISSUE=$x" timeout $(cap 70) $b --out $L/ab_x${x}_$r.json --reps 50 --gates gla --variants w8p8x2g --shapes "$S" ) > $L/ab_x${x}_$r.log 2>&1; echo "early=$x run $r rc=$?"
    grep -E " ms " $L/ab_x${x}_$r.log | grep -v -E "best|screening" | awk '{print $1, $2, $3, $4, $5}'
    grep -E "failed|rror" $L/ab_x${x}_$r.log | head -3
  done
done
( GLA_REQUIRE_GPU=1 GLA_TEST_VARIANTS=w8p8x2g timeout $(cap 80) $t --test-threads=1 --nocapture every_variant ) > $L/every.log 2>&1; echo "every rc=$?"
( GLA_REQUIRE_GPU=1 GLA_TEST_VARIANTS=w8p8x2g timeout $(cap 80) $t --test-threads=1 --nocapture warp_specialised ) > $L/ws.log 2>&1; echo "ws rc=$?"
grep -E "test result" $L/every.log $L/ws.log; grep -A8 "panicked\|out of tol" $L/every.log $L/ws.log | head -20
( timeout $(cap 90) ncu --clock-control none --section WarpStateStats --section SourceCounters --section SpeedOfLight --import-source no -k regex:gla_fwd_ws -s 2 -c 1 -o $L/ncu_gla \
    $b --out /tmp/x.json --reps 3 --shapes "8,4096,16,128" --variants w8p8x2g.fused --gates gla ) > $L/ncu_gla.txt 2>&1; echo "ncu rc=$?"
if [ -f $L/ncu_gla.ncu-rep ]; then
  ncu -i $L/ncu_gla.ncu-rep --page details > $L/ncu_gla_details.txt 2>&1
  ncu -i $L/ncu_gla.ncu-rep --page source --csv --print-source sass > $L/ncu_gla_sass.csv 2>&1
  python3 benches/python/ncu_top.py $L/ncu_gla_sass.csv 100 > $L/ncu_gla_sass_top.txt 2>&1
  gzip $L/ncu_gla_sass.csv; rm -f $L/ncu_gla.ncu-rep
  grep -E "Duration|Compute \(SM\) Throughput|Issue Slots Busy|No Eligible" $L/ncu_gla_details.txt | head -6
fi
( GLA_REQUIRE_GPU=1 GLA_TEST_GATES=gla,rwkv6,hgrn2 timeout $(cap 150) $t --test-threads=1 --nocapture shapes_varlen ) > $L/shapes.log 2>&1; echo "shapes rc=$?"
grep -E "test result" $L/shapes.log; grep -A8 "panicked\|out of tol" $L/shapes.log | head -10
cd $L && tar czf $OUT/c1.tgz * && cd - > /dev/null && rm -rf $L
echo "call took $SECONDS s"
