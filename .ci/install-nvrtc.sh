#!/usr/bin/env bash
# install-nvrtc.sh: a CUDA 13.0 NVRTC (+ headers) from PyPI wheels, for machines with no CUDA toolkit (CI, the build
# machine). No GPU and no root needed. Idempotent: an existing, complete install is kept and only the paths printed.
#
#   bash .ci/install-nvrtc.sh            # installs into <repo>/.cuda (git-ignored)
#   eval "$(bash .ci/install-nvrtc.sh --env)"   # the same, then exports LD_LIBRARY_PATH / GLA_CUDA_INCLUDE
#
# Environment:
#   GLA_CUDA_DIR    install folder (default: <repo>/.cuda). An existing folder holding nvidia/cu13/lib/libnvrtc.so.13
#                   is used as is (e.g. GLA_CUDA_DIR=/opt/cuda-wheels), nothing is downloaded.
#   GLA_WHEEL_DIR   a folder that already holds the four wheels (offline install); default: pip download them.
#   PYTHON          python with pip (default: python3).
#
# Why these four wheels, at these versions: NVRTC must stay at 13.0 (PTX from a newer NVRTC does not load on the GPU
# host's driver 580; see ../shared/gpu.md). nvidia-cuda-nvrtc has libnvrtc.so.13 + libnvrtc-builtins.so.13.0;
# nvidia-cuda-runtime/-crt/-cccl give the headers (cuda_bf16.h, crt/, cuda/ptx) for sources that include them.
#
# Library names: cudarc 0.19 (feature cuda-13000, dynamic-loading) dlopen()s, in this order, libnvrtc.so,
# libnvrtc64.so, libnvrtc64_13.so, ..., libnvrtc.so.13, libnvrtc.so.12, ... -- plain file names, so the folder must
# be on LD_LIBRARY_PATH (read once at process start). The wheel ships only libnvrtc.so.13, which cudarc finds; we
# also add libnvrtc.so -> libnvrtc.so.13 so that the FIRST name cudarc tries resolves to this 13.0 copy and not to
# an unversioned libnvrtc.so of another CUDA version somewhere on the default search path.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DEST=${GLA_CUDA_DIR:-$REPO/.cuda}
PY=${PYTHON:-python3}
WHEELS=(nvidia-cuda-nvrtc==13.0.88 nvidia-cuda-runtime==13.0.96 nvidia-cuda-crt==13.0.88 nvidia-cuda-cccl==13.0.85)
EMIT_ENV=0
[ "${1:-}" = "--env" ] && EMIT_ENV=1

log() { echo "install-nvrtc: $*" >&2; }

LIB=$DEST/nvidia/cu13/lib
INC=$DEST/nvidia/cu13/include
complete() {
  [ -f "$LIB/libnvrtc.so.13" ] && [ -f "$LIB/libnvrtc-builtins.so.13.0" ] && [ -f "$INC/cuda_bf16.h" ] \
    && [ -d "$INC/cccl" ] && [ -f "$INC/crt/host_defines.h" ]
}

if complete; then
  log "using existing NVRTC 13.0 in $DEST"
else
  mkdir -p "$DEST"
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/gla-nvrtc.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  if [ -n "${GLA_WHEEL_DIR:-}" ]; then
    log "unpacking wheels from $GLA_WHEEL_DIR"
    for w in "${WHEELS[@]}"; do
      name=${w%%==*}; ver=${w##*==}; f=$(ls "$GLA_WHEEL_DIR"/"${name//-/_}"-"$ver"-*.whl 2>/dev/null | head -1 || true)
      [ -n "$f" ] || { log "missing $w in $GLA_WHEEL_DIR"; exit 1; }
      cp "$f" "$tmp/"
    done
  else
    log "downloading ${WHEELS[*]}"
    "$PY" -m pip download --quiet --no-deps --only-binary=:all: --dest "$tmp" "${WHEELS[@]}"
  fi
  for f in "$tmp"/*.whl; do
    # python's zipfile (no `unzip` needed); only the nvidia/ tree is wanted, not the dist-info folders.
    "$PY" - "$f" "$DEST" <<'PY'
import sys, zipfile
whl, dest = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(whl) as z:
    z.extractall(dest, [m for m in z.namelist() if m.startswith("nvidia/")])
PY
  done
  complete || { log "unpacked, but $LIB/libnvrtc.so.13 or the headers are missing"; exit 1; }
  log "installed NVRTC 13.0 into $DEST"
fi

# libnvrtc.so -> libnvrtc.so.13 (see above). -n: replace an old link, never follow it.
if [ -w "$LIB" ] && [ ! -e "$LIB/libnvrtc.so" ]; then ln -sfn libnvrtc.so.13 "$LIB/libnvrtc.so"; fi

if [ "$EMIT_ENV" = 1 ]; then
  echo "export LD_LIBRARY_PATH=$LIB\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
  echo "export GLA_CUDA_INCLUDE=$INC"
else
  echo "LD_LIBRARY_PATH=$LIB"
  echo "GLA_CUDA_INCLUDE=$INC"
  log "use: export LD_LIBRARY_PATH=$LIB\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}  (and -I$INC for sources with #include)"
fi
