#!/usr/bin/env bash
# Device call 3 of session 2026-12-03o (run inline through the device tool, recorded here): the three launches of
# one GLA forward at 2x16384x16x128 (segment-state pass, combine, fused pass) timed apart by ncu.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
timeout 150 ncu --clock-control none --section SpeedOfLight --section LaunchStats -k regex:gla_ -c 14 .gpu/bin/bench --out /tmp/x.json --reps 2 --shapes "2,16384,16,128" --variants w8p8x2g.fused --gates gla > $OUT/ncu_2x16384.txt 2>&1; echo rc=$?
grep -E "gla_fwd|Duration|Grid Size|Block Size" $OUT/ncu_2x16384.txt | head -60
