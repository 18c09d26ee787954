#!/usr/bin/env bash
# First device call of session 2026-12-01f: fla 0.6.0 (chunk_gla, chunk_simple_gla), torch SDPA flash causal and the
# copy bandwidth at every issue shape, fla's error vs f64 and a dump of one accuracy case; Triton's autotune results
# saved (fla_autotune_h200.tar.gz) so that the final call can time fla again without autotuning; then ours (kernel v9,
# every fused bf16 variant) at the issue shapes and on fla's dumped inputs, in the same machine session.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/r; mkdir -p $L
cap() { local left=$((575 - SECONDS)); [ "$left" -lt "$1" ] && echo $((left > 5 ? left : 5)) || echo "$1"; }
[ -d /tmp/site/fla ] || python3 -m pip install -q --no-index --no-deps --target /tmp/site .gpu/whl/fla_core-0.6.0-py3-none-any.whl
( time PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 timeout 440 python3 benches/python/fla_bench.py --cases copy,sdpa,acc,gla_fwd,simple_fwd \
  --shapes "8,4096,16,128;32,1024,16,128;2,16384,16,128;8,4096,32,64;8,4096,8,256" --acc-shapes "2,1024,16,128" --acc-gate-dtypes f32 \
  --dump-shape "2,1024,16,128" --dump-dir $L/fla_dump --reps 50 --budget-s 420 --out $L/fla.json --autotune-cache-out $L/fla_autotune_h200.tar.gz ) > $L/fla.log 2>&1
grep -E "median|rel_rms|GB/s|skipped|ERROR|dumped|first call [0-9]|real|autotune cache" $L/fla.log | tail -40
( time timeout $(cap 100) .gpu/bin/bench --out $L/ours_v9.json --reps 50 --variants fused --shapes "8,4096,16,128;8,4096,32,64;8,4096,8,256;2,16384,16,128;32,1024,16,128" ) > $L/ours.log 2>&1
grep -E "best|copy|real" $L/ours.log
if [ -f $L/fla_dump/header.json ]; then ( timeout $(cap 40) .gpu/bin/bench --fla-dump $L/fla_dump --out $L/same_inputs.json ) > $L/same_inputs.log 2>&1; tail -5 $L/same_inputs.log; fi
rm -rf $L/fla_dump  # large; same_inputs.json keeps the comparison
echo "call took $SECONDS s"
