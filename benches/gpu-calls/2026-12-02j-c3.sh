#!/usr/bin/env bash
# Device call 3 of session 2026-12-02j. (1) Probe: the three-slot per-key w8p8x2g build (x2, a4e119b) printed nothing
# past 8×4096×16×128 in calls 1 and 2 (the bench's 45 s cap) — run it alone at 2×16384 and 32×1024 with its exit
# status (124: still running at the cap, i.e. a hang; else the error). (2) The GPU tests of the committed build
# (x4 = 2336eff): every wgmma variant of every gate, every f32 variant, the warp-specialised sweep of the wgmma
# variants over the shapes (logits ±12 included), the default-variant shape sweep (gla, mamba2), 64-bit offsets.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/r; mkdir -p $L
for sh in "2,16384,16,128" "32,1024,16,128"; do
  ( timeout 25 .gpu/cand/x2/bench --out $L/probe.json --reps 10 --gates gla --variants w8p8x2g --shapes "$sh"; echo "rc=$?" ) > $L/probe_$sh.log 2>&1
  echo "== x2 probe $sh"; tail -3 "$L/probe_$sh.log"
done
t=.gpu/cand/x4/gpu_forward
( time GLA_REQUIRE_GPU=1 GLA_TEST_VARIANTS=g. timeout 80 $t --test-threads=1 --nocapture every_variant ) > $L/every_wg.log 2>&1
grep -E "^\| [a-z]|test result|real" $L/every_wg.log | tail -16; grep -A10 "out of tolerance\|panicked" $L/every_wg.log | head -12
( time GLA_REQUIRE_GPU=1 GLA_TEST_VARIANTS=f32 timeout 60 $t --test-threads=1 --nocapture every_variant ) > $L/every_f32.log 2>&1
grep -E "^\| [a-z]|test result|real" $L/every_f32.log | tail -9; grep -A10 "out of tolerance\|panicked" $L/every_f32.log | head -12
( time GLA_REQUIRE_GPU=1 GLA_TEST_VARIANTS=g. timeout 150 $t --test-threads=1 --nocapture warp_specialised ) > $L/ws_shapes.log 2>&1
grep -E "test result|real|runs|^\| [a-z]" $L/ws_shapes.log | tail -17; grep -A10 "out of tolerance\|panicked" $L/ws_shapes.log | head -12
( time GLA_REQUIRE_GPU=1 GLA_TEST_GATES=gla,mamba2 timeout 90 $t --test-threads=1 --nocapture shapes_varlen ) > $L/shapes.log 2>&1
grep -E "test result|real" $L/shapes.log; grep -A10 "out of tolerance\|panicked" $L/shapes.log | head -12
( time GLA_REQUIRE_GPU=1 timeout 70 $t --test-threads=1 --nocapture offsets_beyond ) > $L/offsets.log 2>&1
grep -E "rel RMS|test result|real" $L/offsets.log
cd $L && tar czf $OUT/c3.tgz * && cd - > /dev/null && rm -rf $L
echo "call took $SECONDS s"
