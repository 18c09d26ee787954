#!/usr/bin/env bash
# The benchmark, side by side, on the GPU host (run from the repo root after packing .gpu/, see README):
#   bash benches/run-gpu.sh OUT [--variants all|default]
# Times our forward variants (bench) and fla 0.6.0 / torch SDPA (fla_bench.py) in one run, writing
# OUT/ours.json and OUT/fla.json. Then, on the build machine:
#   python3 benches/python/report.py --ours OUT/ours.json --fla OUT/fla.json --out-dir benches/results/
set -euo pipefail
out=${1:?usage: run-gpu.sh OUT [--variants all|default]}; shift || true
mkdir -p "$out"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
.gpu/bin/bench --out "$out/ours.json" --reps 50 "$@" | tee "$out/ours.log"
[ -d /tmp/site/fla ] || python3 -m pip install -q --no-index --no-deps --target /tmp/site .gpu/whl/fla_core-0.6.0-py3-none-any.whl
PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 python3 benches/python/fla_bench.py --cases copy,sdpa,gla_fwd,simple_fwd,acc \
  --shapes "8,4096,16,128;32,1024,16,128;2,16384,16,128;8,4096,32,64;8,4096,8,256" --reps 50 --out "$out/fla.json" | tee "$out/fla.log"
