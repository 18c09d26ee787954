#!/usr/bin/env bash
# Device call 7 of session 2026-12-02j: the three-slot per-key w8p8x2g build (x2 = a4e119b) once more with call 2's
# exact command (GLA, four shapes, one process), every output line time-stamped, and its exit status; then, if it
# stopped, the same with a 100 s cap (slow or stuck?).
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/r; mkdir -p $L
S="8,4096,16,128;2,16384,16,128;32,1024,16,128;8,4096,8,256"
ts() { while IFS= read -r l; do echo "$(date +%s.%N | cut -c1-14) $l"; done; }
date +%s.%N | cut -c1-14
( timeout 45 .gpu/cand/x2/bench --out $L/x2a.json --reps 50 --gates gla --variants w8p8x2g --shapes "$S" 2>&1; echo "rc=$?" ) | ts > $L/x2a.log
cat $L/x2a.log | grep -v screening
if ! grep -q "rc=0" $L/x2a.log; then
  ( timeout 100 .gpu/cand/x2/bench --out $L/x2b.json --reps 50 --gates gla --variants w8p8x2g --shapes "$S" 2>&1; echo "rc=$?" ) | ts > $L/x2b.log
  cat $L/x2b.log | grep -v screening
fi
cd $L && tar czf $OUT/c7.tgz * && cd - > /dev/null && rm -rf $L
echo "call took $SECONDS s"
