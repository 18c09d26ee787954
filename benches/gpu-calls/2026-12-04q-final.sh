#!/usr/bin/env bash
# Final device call of session 2026-12-04q, build of v20 (the segment-state pass issues a group's next chunk at the
# top of the current one, per-variant leads): the README's benchmark (every fused variant, fla 0.6.0, SDPA, same
# inputs); ncu of the two missed shapes (d = 256: the default's launch with the scheduler and warp-state sections;
# 2x16384: the three launches' durations); then the GPU test of the two-level scan (every gate) with the new leads.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/r; mkdir -p $L
FLA_AUTOTUNE_IN=benches/results/raw/fla_autotune_h200_d64_d256.tar.gz timeout 330 bash benches/run-gpu.sh $L/bench --variants fused; echo "bench rc=$?"
rm -rf $L/bench/fla_dump; for f in ours fla fla_acc same_inputs; do cp $L/bench/$f.json $OUT/ 2>/dev/null; done
echo "bench done at $SECONDS s"
cap() { local left=$((575 - SECONDS)); [ "$left" -lt "$1" ] && echo $((left > 5 ? left : 5)) || echo "$1"; }
( timeout $(cap 60) ncu --clock-control none --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats \
    -k regex:gla_fwd_ws -s 2 -c 1 .gpu/bin/bench --out /tmp/x.json --reps 3 --shapes "8,4096,8,256" --variants default --gates gla ) > $L/ncu_d256.txt 2>&1; echo "ncu d256 rc=$?"
grep -E "^  gla_fwd|Duration|DRAM Throughput|Compute \(SM\)|Issue Slots Busy|No Eligible|Active Warps Per|Waves Per SM|Registers Per|Achieved Occupancy" $L/ncu_d256.txt | head -16
( timeout $(cap 50) ncu --clock-control none --section SpeedOfLight -k regex:gla_fwd -s 3 -c 3 \
    .gpu/bin/bench --out /tmp/x.json --reps 3 --shapes "2,16384,16,128" --variants default --gates gla ) > $L/ncu_2x16384.txt 2>&1; echo "ncu 2x16384 rc=$?"
grep -E "^  gla_fwd|Duration|DRAM Throughput" $L/ncu_2x16384.txt | head -12
( GLA_REQUIRE_GPU=1 timeout $(cap 150) .gpu/bin/gpu_forward --test-threads=1 --nocapture segments_with_a_lead ) > $L/lead_test.log 2>&1; echo "lead test rc=$?"
grep -E "test result|SKIP" $L/lead_test.log; grep -A8 "panicked\|out of tol" $L/lead_test.log | head -12
cd $L && tar czf $OUT/final.tgz * && cd - > /dev/null && rm -rf $L
echo "call took $SECONDS s"
