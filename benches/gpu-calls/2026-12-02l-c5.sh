#!/usr/bin/env bash
# Device call 5 of session 2026-12-02l. c5 = the cluster key split with the split exchange (KS_XCH_SPLIT=1, the
# default: each CTA finishes one consumer warpgroup's value columns, so both send, receive and store half) against
# the one-way exchange of call 4 (-DKS_XCH_SPLIT=0 through GLA_NVRTC_EXTRA), same binary, twice interleaved; the
# per-slice and every-variant tests of the split form; ncu of the chosen Mamba-2 / GLA ks2c kernels at d = 256.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/r; mkdir -p $L
cap() { local left=$((560 - SECONDS)); [ "$left" -lt "$1" ] && echo $((left > 5 ? left : 5)) || echo "$1"; }
b=.gpu/cand/c5/bench; t=.gpu/cand/c5/gpu_forward
for r in 1 2; do
  for x in 1 0; do
    ( GLA_NVRTC_EXTRA="-DKS_XCH_SPLIT=$x" timeout $(cap 50) $b --out $L/d256_x${x}_$r.json --reps 50 --gates gla,mamba2 --variants ks2c --shapes "8,4096,8,256" ) > $L/d256_x${x}_$r.log 2>&1; echo "split=$x run $r rc=$?"
    grep -E " ms |failed|rror" $L/d256_x${x}_$r.log | grep -v best | head -4
  done
done
( GLA_REQUIRE_GPU=1 GLA_TEST_VARIANTS=ks2c timeout $(cap 90) $t --test-threads=1 --nocapture key_slices ) > $L/slices.log 2>&1; echo "slices rc=$?"
grep -E "test result" $L/slices.log; grep -E "^\| [a-z]" $L/slices.log | awk -F'|' '{print $2, $5, $6, $7}' | sort -k2 -g | tail -2
( GLA_REQUIRE_GPU=1 GLA_TEST_VARIANTS=ks2c timeout $(cap 90) $t --test-threads=1 --nocapture every_variant ) > $L/every.log 2>&1; echo "every rc=$?"
grep -E "test result|^\| [a-z]+ \| (bf16|f16)" $L/every.log | tail -14; grep -A8 "panicked\|out of tol" $L/slices.log $L/every.log | head -20
for g in mamba2 gla; do
  v=w8p4x2g.ks2c; [ $g = gla ] && v=w8p4g.ks2c
  timeout $(cap 80) ncu --clock-control none --set full --import-source no -k regex:gla_fwd_ws -s 2 -c 1 -o $L/ncu_$g \
    $b --out /tmp/x.json --reps 3 --shapes "8,4096,8,256" --variants $v --gates $g > $L/ncu_$g.txt 2>&1; echo "ncu $g rc=$?"
  ncu -i $L/ncu_$g.ncu-rep --page details > $L/ncu_${g}_details.txt 2>&1
  grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|Issue Slots Busy|No Eligible|Stall" $L/ncu_${g}_details.txt | head -12
  rm -f $L/ncu_$g.ncu-rep
done
cd $L && tar czf $OUT/c5.tgz * && cd - > /dev/null && rm -rf $L
echo "call took $SECONDS s"
