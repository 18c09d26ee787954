#!/usr/bin/env bash
# Device call 3 of session 2026-12-04q (the build of call 2). The lead length against the state-pass form at
# 2x16384, interleaved twice: old (-DGLA_STATES_AHEAD=0) at 600 and 500, ahead at 500 and 450, ahead + consumer K̂
# (-DGLA_KHAT_CONSUMERS=1) at 450 and 400; then ncu of the three forms' state pass with a short lead (300), so that
# the launch's duration is the state CTAs'.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/r; mkdir -p $L
cap() { local left=$((570 - SECONDS)); [ "$left" -lt "$1" ] && echo $((left > 5 ? left : 5)) || echo "$1"; }
for r in 1 2; do
  for c in old:600 old:500 ahead:500 ahead:450 khat:450 khat:400; do
    f=${c%%:*}; lead=${c##*:}
    env="GLA_SEG_LEAD=$lead"; [ $f = old ] && env="$env GLA_NVRTC_EXTRA=-DGLA_STATES_AHEAD=0"; [ $f = khat ] && env="$env GLA_NVRTC_EXTRA=-DGLA_KHAT_CONSUMERS=1"
    ( env $env timeout $(cap 40) .gpu/bin/bench --out $L/ab_${f}_${lead}_$r.json --reps 50 --variants default --gates gla --shapes "2,16384,16,128" ) > $L/ab_${f}_${lead}_$r.log 2>&1
    echo "form=$f lead=$lead run $r: $(grep -E ' ms ' $L/ab_${f}_${lead}_$r.log | grep -v -E 'best|screening' | awk '{print $4, $5}')"
  done
done
for f in old ahead khat; do
  env="GLA_SEG_LEAD=300"; [ $f = old ] && env="$env GLA_NVRTC_EXTRA=-DGLA_STATES_AHEAD=0"; [ $f = khat ] && env="$env GLA_NVRTC_EXTRA=-DGLA_KHAT_CONSUMERS=1"
  ( env $env timeout $(cap 50) ncu --clock-control none --section SpeedOfLight -k regex:gla_fwd_ws_states -s 2 -c 2 \
      .gpu/bin/bench --out /tmp/x.json --reps 3 --shapes "2,16384,16,128" --variants default --gates gla ) > $L/ncu_states_$f.txt 2>&1
  echo "ncu $f (lead 300): $(grep -E 'Duration' $L/ncu_states_$f.txt | awk '{print $3}' | tr '\n' ' ') us; DRAM % $(grep -E 'DRAM Throughput' $L/ncu_states_$f.txt | awk '{print $4}' | tr '\n' ' ')"
done
cd $L && tar czf $OUT/c3.tgz * && cd - > /dev/null && rm -rf $L
echo "call took $SECONDS s"
