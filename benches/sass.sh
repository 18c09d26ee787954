#!/usr/bin/env bash
# sass.sh: one variant's kernel as SASS with static instruction counts — no GPU needed (benches/NOTES.md's
# instruction counts of the per-key producer's gate and decays were taken this way).
#   bash benches/sass.sh <variant id> [kernel, default gla_fwd_ws] [out dir, default /tmp/gla-sass]
#   (`cargo run -p gla --example kernel_source -- --list` prints the variant ids)
# It generates the source (gla's kernel_source example), compiles it with the runtime's NVRTC options to an sm_90a
# cubin (gla-runtime's compile_log example, GLA_CUBIN_OUT; ptxas's register / spill report goes to <out>/<id>.log),
# disassembles it with cuobjdump (the nvidia-cuda-cuobjdump and -nvdisasm wheels — cuobjdump runs nvdisasm —
# downloaded once into .cuda/tools: any 13.x disassembles sm_90a) and prints benches/python/sass_hist.py's counts. For a stretch of the listing:
#   python3 benches/python/sass_hist.py <out>/<id>.sass --from 11910 --to 13640
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ID=${1:?usage: sass.sh <variant id> [kernel] [out dir]}
KERNEL=${2:-gla_fwd_ws}
OUT=${3:-/tmp/gla-sass}
mkdir -p "$OUT"
cd "$REPO"
eval "$(bash .ci/install-nvrtc.sh --env)"
TOOLS=$REPO/.cuda/tools
CUOBJDUMP=$TOOLS/nvidia/cu13/bin/cuobjdump
if [ ! -x "$CUOBJDUMP" ]; then
  tmp=$(mktemp -d)
  ${PYTHON:-python3} -m pip download -q --no-deps -d "$tmp" nvidia-cuda-cuobjdump==13.5.37 nvidia-cuda-nvdisasm==13.5.37
  for w in "$tmp"/*.whl; do ${PYTHON:-python3} -c "import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])" "$w" "$TOOLS"; done
  chmod +x "$CUOBJDUMP" "$TOOLS/nvidia/cu13/bin/nvdisasm"
  rm -rf "$tmp"
fi
cargo run -q --release -p gla --example kernel_source -- "$ID" > "$OUT/$ID.cu"
[ -s "$OUT/$ID.cu" ] || { echo "no variant $ID (see --list)" >&2; exit 1; }
GLA_CUBIN_OUT="$OUT/$ID.cubin" cargo run -q --release -p gla-runtime --example compile_log -- "$OUT/$ID.cu" "$KERNEL" > "$OUT/$ID.log"
grep -E "registers|spill" "$OUT/$ID.log" | sed 's/^/ptxas: /' | sort -u
PATH=$TOOLS/nvidia/cu13/bin:$PATH "$CUOBJDUMP" -sass -fun "$KERNEL" "$OUT/$ID.cubin" > "$OUT/$ID.sass"
echo "SASS: $OUT/$ID.sass"
python3 "$REPO/benches/python/sass_hist.py" "$OUT/$ID.sass" --stretches
