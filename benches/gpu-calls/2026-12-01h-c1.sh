#!/usr/bin/env bash
# Device call 1 of session 2026-12-01h. Candidate o2 (.gpu/cand/o2): warp-specialised 4 + 4-warp variants at d = 64
# with two CTAs an SM (__launch_bounds__(256, 2), setmaxnreg 104 / 152) against the v11f build (.gpu/cand/a, the
# committed kernels) in the same call, GLA and Mamba-2 at 8×4096×32×64, twice interleaved; correctness of every
# .o2 variant (every gate, bf16 + f16) and the warp-specialised sweep restricted to them; then ncu profiles of the
# current per-key (gla w8p4g) and scalar (mamba2 w8p4g) kernels at the main shape, to choose the next change.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/r; mkdir -p $L
cap() { local left=$((560 - SECONDS)); [ "$left" -lt "$1" ] && echo $((left > 5 ? left : 5)) || echo "$1"; }
S="8,4096,32,64"
for r in 1 2; do for c in a o2; do
  ( timeout $(cap 40) .gpu/cand/$c/bench --out $L/ab_${c}_$r.json --reps 50 --gates gla,mamba2 --variants w4p4 --shapes "$S" ) > $L/ab_${c}_$r.log 2>&1
  echo "== $c run $r"; grep -v screening $L/ab_${c}_$r.log | grep -E " ms |best|copy" | head -12
done; done
t=.gpu/cand/o2/gpu_forward
( time GLA_REQUIRE_GPU=1 GLA_TEST_VARIANTS=.o2. timeout $(cap 90) $t --test-threads=1 --nocapture every_variant ) > $L/every_o2.log 2>&1
grep -E "^\||test result|real|compiled" $L/every_o2.log | tail -20; grep -A14 "out of tolerance\|panicked" $L/every_o2.log | head -20
( time GLA_REQUIRE_GPU=1 GLA_TEST_VARIANTS=.o2. timeout $(cap 120) $t --test-threads=1 --nocapture warp_specialised ) > $L/ws_o2.log 2>&1
grep -E "test result|real|runs|^\| [a-z]" $L/ws_o2.log | tail -18; grep -A10 "out of tolerance\|panicked" $L/ws_o2.log | head -12
prof() {  # name gate
  local v=C32.c16.k128.v128.bv128.w8p4g.fused
  ( timeout $(cap 100) ncu --clock-control none --set full --import-source no -k regex:gla_fwd_ws -s 2 -c 1 -o $L/ncu_$1 \
      .gpu/cand/a/bench --out /tmp/x.json --reps 3 --shapes "8,4096,16,128" --variants $v --gates $2 ) > $L/ncu_$1.txt 2>&1
  tail -2 $L/ncu_$1.txt
  if [ -f $L/ncu_$1.ncu-rep ]; then
    ncu -i $L/ncu_$1.ncu-rep --page details > $L/ncu_$1_details.txt 2>&1
    ncu -i $L/ncu_$1.ncu-rep --page source --csv --print-source sass > /tmp/sass.csv 2>&1
    python3 benches/python/ncu_top.py /tmp/sass.csv 80 > $L/ncu_$1_sass_top.txt 2>&1
    gzip -c /tmp/sass.csv > $L/ncu_$1_sass.csv.gz; rm -f $L/ncu_$1.ncu-rep
    grep -E "Duration|Issue Slots Busy|No Eligible" $L/ncu_$1_details.txt | head -4
    sed -n '/stretches/,$p' $L/ncu_$1_sass_top.txt | head -24
  fi
}
prof gla_v11f gla
prof mamba2_v11f mamba2
cd $L && tar czf logs.tgz *.log *.txt *.json && cd - > /dev/null
echo "call took $SECONDS s"
