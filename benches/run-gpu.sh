#!/usr/bin/env bash
# The benchmark, side by side, on the GPU host (run from the repo root after packing .gpu/, see README). What
# benches/results/ holds is the output of, on the H200 host:
#   FLA_AUTOTUNE_IN=benches/results/fla_autotune_h200_d64_d256.tar.gz bash benches/run-gpu.sh OUT --variants fused
# and then, back on the build machine (writes forward.md, forward.json, forward_vs_T.png, forward_strength.png and
# copies the run's four JSON files):
#   python3 benches/python/report.py --run OUT --out-dir benches/results/
# Usage: bash benches/run-gpu.sh OUT [bench options, e.g. --variants fused; --backward adds ours fwd+bwd rows, and
# FLA_CASES=copy,sdpa,gla_fwd,simple_fwd,gla_fwdbwd,simple_fwdbwd,acc_bwd fla's; then
#   python3 benches/python/backward_report.py --ours OUT/ours.json --fla OUT/fla.json --out-dir benches/results/
# writes backward.json / backward.md]
# In one run: fla 0.6.0 and torch SDPA with the copy bandwidth (fla_bench.py -> OUT/fla.json), fla's error vs an f64
# recurrence and a dump of one accuracy case (-> OUT/fla_acc.json, OUT/fla_dump/); every bf16 forward variant of ours at the issue's
# shapes (bench -> OUT/ours.json; the best per shape is what the autotuner would pick) and, for ours and fla alike, the
# per-key forward at every gate strength of tests::strengths (FLA_STRENGTHS / bench --strengths; default all);
# ours on fla's dumped inputs
# (bench --fla-dump -> OUT/same_inputs.json: ours vs f64, fla vs f64, ours vs fla); report.py --run OUT reads these.
# fla autotunes 45-100 s per (op, head shape) on its first calls, so a full fla run needs ~10 minutes; within a
# shorter device budget narrow it: FLA_CASES=a,b FLA_SHAPES="B,T,H,D;..." FLA_BUDGET_S=N FLA_EXTRA="options".
set -euo pipefail
out=${1:?usage: run-gpu.sh OUT [bench options]}; shift || true
mkdir -p "$out"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
[ -d /tmp/site/fla ] || python3 -m pip install -q --no-index --no-deps --target /tmp/site .gpu/whl/fla_core-0.6.0-py3-none-any.whl
shapes=${FLA_SHAPES:-"8,4096,16,128;32,1024,16,128;2,16384,16,128;8,4096,32,64;8,4096,8,256;8,4096,4,512"}
# fla's autotuning is keyed by head count and head dim (not B or T), so whichever call comes first picks the configs
# for every shape of that head shape: the timing run goes first (it tunes at the benchmark's own shapes, the first
# of each head shape listed), the accuracy case after it. FLA_AUTOTUNE_IN: tar.gz(s) of Triton *.autotune.json from
# an earlier run on this kind of GPU (benches/results/fla_autotune_h200_d64_d256.tar.gz: the D = 64 / 256
# families on the H200), which skips those autotunes; the run's own results go to OUT/fla_autotune.tar.gz.
# shellcheck disable=SC2086
PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 python3 benches/python/fla_bench.py --cases "${FLA_CASES:-copy,sdpa,gla_fwd,simple_fwd}" \
  --shapes "$shapes" --strengths "${FLA_STRENGTHS:-all}" --reps 50 --no-dump --budget-s "${FLA_BUDGET_S:-inf}" ${FLA_AUTOTUNE_IN:+--autotune-cache-in $FLA_AUTOTUNE_IN} \
  --autotune-cache-out "$out/fla_autotune.tar.gz" ${FLA_EXTRA:-} --out "$out/fla.json" > "$out/fla.log" 2>&1 || true
grep -E "median|GB/s|skipped|ERROR|first call [0-9]|autotune cache" "$out/fla.log" || true
PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 python3 benches/python/fla_bench.py --cases acc --acc-shapes "2,1024,16,128" \
  --acc-gate-dtypes f32 --dump-shape "2,1024,16,128" --dump-dir "$out/fla_dump" --reps 50 --out "$out/fla_acc.json" > "$out/fla_acc.log" 2>&1 || true
grep -E "rel_rms|ERROR|dumped" "$out/fla_acc.log" || true
.gpu/bin/bench --out "$out/ours.json" --reps 50 "$@" > "$out/ours.log" 2>&1
grep -E "best|copy" "$out/ours.log"
if [ -f "$out/fla_dump/header.json" ]; then
  .gpu/bin/bench --fla-dump "$out/fla_dump" --out "$out/same_inputs.json" | tee "$out/same_inputs.log"
fi
