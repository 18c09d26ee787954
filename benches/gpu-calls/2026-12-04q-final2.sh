#!/usr/bin/env bash
# Second final device call of session 2026-12-04q, build of v21 (v20 + the segment combine loading three segments'
# ΔS and decays before storing any S_init: one DRAM round trip a batch instead of a segment). A/B at 2x16384 (gla,
# mamba2; same binary, -DGLA_COMBINE_BATCH=1 builds the segment-at-a-time chain), ncu of the combine in both forms,
# then the README's benchmark, then the two-level-scan test for gla and mamba2. The budget is tight: the benchmark's
# results are copied to $OUT as soon as they exist.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/r; mkdir -p $L
cap() { local left=$((560 - SECONDS)); [ "$left" -lt "$1" ] && echo $((left > 5 ? left : 5)) || echo "$1"; }
for r in 1 2; do
  for f in batch one; do
    env=""; [ $f = one ] && env="GLA_NVRTC_EXTRA=-DGLA_COMBINE_BATCH=1"
    ( env $env timeout $(cap 40) .gpu/bin/bench --out $L/ab_${f}_$r.json --reps 50 --variants default --gates gla,mamba2 --shapes "2,16384,16,128" ) > $L/ab_${f}_$r.log 2>&1
    echo "form=$f run $r: $(grep -E ' ms ' $L/ab_${f}_$r.log | grep -v -E 'best|screening' | awk '{print $2, $5}' | tr '\n' ' ')"
  done
done
for f in batch one; do
  env=""; [ $f = one ] && env="GLA_NVRTC_EXTRA=-DGLA_COMBINE_BATCH=1"
  ( env $env timeout $(cap 40) ncu --clock-control none --section SpeedOfLight -k regex:gla_fwd_seg_combine -s 1 -c 2 \
      .gpu/bin/bench --out /tmp/x.json --reps 3 --shapes "2,16384,16,128" --variants default --gates gla ) > $L/ncu_combine_$f.txt 2>&1
  echo "ncu combine $f: $(grep -E 'Duration' $L/ncu_combine_$f.txt | awk '{print $3}' | tr '\n' ' ') us"
done
FLA_AUTOTUNE_IN=benches/results/raw/fla_autotune_h200_d64_d256.tar.gz timeout $(cap 330) bash benches/run-gpu.sh $L/bench --variants fused; echo "bench rc=$?"
rm -rf $L/bench/fla_dump; mkdir -p $OUT/bench; cp $L/bench/* $OUT/bench/ 2>/dev/null
echo "bench done at $SECONDS s"
( GLA_REQUIRE_GPU=1 GLA_TEST_GATES=gla,mamba2 timeout $(cap 80) .gpu/bin/gpu_forward --test-threads=1 --nocapture segments_with_a_lead ) > $L/lead_test.log 2>&1; echo "lead test rc=$?"
grep -E "test result|SKIP" $L/lead_test.log; grep -A8 "panicked\|out of tol" $L/lead_test.log | head -12
rm -rf $L/bench; cd $L && tar czf $OUT/final2.tgz * && cd - > /dev/null && rm -rf $L
echo "call took $SECONDS s"
