#!/usr/bin/env bash
# Final device call B of session 2026-12-01b: fla 0.6.0 (+ torch SDPA, copy bandwidth, fla's error vs f64 and a
# dump of its inputs/outputs) and ours in one run; then ours on fla's dumped inputs (the same-inputs check).
# fla autotunes ~60-75 s per (op, H, D) family on its first call: within the device budget it runs the H=16, D=128
# family (three of the five shapes); its D=64 / D=256 figures come from the 2026-12-01 session-1 run
# (benches/results/raw/fla_v5_more_shapes.json).
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/r; mkdir -p $L
[ -d /tmp/site/fla ] || python3 -m pip install -q --no-index --no-deps --target /tmp/site .gpu/whl/fla_core-0.6.0-py3-none-any.whl
PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 python3 benches/python/fla_bench.py --cases copy,sdpa,acc,gla_fwd,simple_fwd \
  --shapes "8,4096,16,128;32,1024,16,128;2,16384,16,128" --acc-shapes "2,1024,16,128" --acc-gate-dtypes f32 \
  --dump-shape "2,1024,16,128" --reps 50 --budget-s ${FLA_BUDGET_S:-330} --out $L/fla.json > $L/fla.log 2>&1 || true
grep -E "median|rel_rms|GB/s|skipped|ERROR|dumped" $L/fla.log | head -30
.gpu/bin/bench --out $L/ours.json --reps 50 --variants fused > $L/ours.log 2>&1
grep -E "best|copy" $L/ours.log
.gpu/bin/bench --fla-dump $L/fla_dump --out $L/same_inputs.json 2>&1 | tee $L/same_inputs.log
rm -f $L/fla_dump/*.bin  # 6 x 16 MB: over what the device returns; header.json stays
tar czf $OUT/final_bench.tgz -C $OUT r; rm -rf $L
