#!/usr/bin/env bash
# Device call 4 of session 2026-12-01g: A/B of kernel v11d (EMPTY: only the issuing producer warp) against the v11c
# build (.gpu/alt/bench_v11c) and v10 (.gpu/alt/bench_v10), GLA w8p4g, in one call; run twice, interleaved.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/r; mkdir -p $L
for r in 1 2; do for b in bin/bench alt/bench_v11c alt/bench_v10; do
  n=$(basename $b)
  ( timeout 40 .gpu/$b --out $L/ab_${n}_$r.json --reps 50 --gates gla --variants w8p4g --shapes "8,4096,16,128;2,16384,16,128" ) > $L/ab_${n}_$r.log 2>&1
  echo "== $n run $r"; grep -v screening $L/ab_${n}_$r.log | grep " ms " | grep -v best | head -4
done; done
cd $L && tar czf $OUT/ab.tgz . && cd - > /dev/null
echo "call took $SECONDS s"
