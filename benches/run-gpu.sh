#!/usr/bin/env bash
# The benchmark, side by side, on the GPU host (run from the repo root after packing .gpu/, see README):
#   bash benches/run-gpu.sh OUT [bench options, e.g. --variants default]
# Times every bf16 forward variant of ours at the shapes (bench; the best per shape is what the autotuner
# would pick) and fla 0.6.0 / torch SDPA (fla_bench.py) in one run, writing OUT/ours.json and OUT/fla.json. Then,
# on the build machine:
#   python3 benches/python/report.py --ours OUT/ours.json --fla OUT/fla.json --out-dir benches/results/
# fla autotunes ~60 s per new shape family on its first call, so a full fla run needs ~10 minutes; within a
# shorter device budget narrow it: FLA_CASES=a,b FLA_SHAPES="B,T,H,D;..." FLA_BUDGET_S=N FLA_EXTRA="options".
set -euo pipefail
out=${1:?usage: run-gpu.sh OUT [bench options]}; shift || true
mkdir -p "$out"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
.gpu/bin/bench --out "$out/ours.json" --reps 50 "$@" > "$out/ours.log" 2>&1
grep -v screening "$out/ours.log"
[ -d /tmp/site/fla ] || python3 -m pip install -q --no-index --no-deps --target /tmp/site .gpu/whl/fla_core-0.6.0-py3-none-any.whl
shapes=${FLA_SHAPES:-"8,4096,16,128;32,1024,16,128;2,16384,16,128;8,4096,32,64;8,4096,8,256"}
# shellcheck disable=SC2086
PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 python3 benches/python/fla_bench.py --cases "${FLA_CASES:-copy,sdpa,acc,gla_fwd,simple_fwd}" \
  --shapes "$shapes" --reps 50 --budget-s "${FLA_BUDGET_S:-inf}" ${FLA_EXTRA:-} --out "$out/fla.json" > "$out/fla.log" 2>&1 || true
grep -E "median|rel_rms|GB/s|skipped|ERROR" "$out/fla.log" || true
