#!/usr/bin/env bash
# Second final call of session 2026-12-01e, on the machine still warm from the first: fla 0.6.0 chunk_gla /
# chunk_simple_gla, SDPA flash and the copy bandwidth at the main shape (8, 4096, 16, 128) and T = 1024 (fla
# autotunes once per head shape); Triton's autotune results saved for later sessions.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/r; mkdir -p $L
[ -d /tmp/site/fla ] || python3 -m pip install -q --no-index --no-deps --target /tmp/site .gpu/whl/fla_core-0.6.0-py3-none-any.whl
( time PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 timeout 250 python3 benches/python/fla_bench.py --cases copy,sdpa,gla_fwd,simple_fwd \
  --shapes "8,4096,16,128;32,1024,16,128" --reps 50 --no-dump --out $L/fla.json --autotune-cache-out $L/fla_autotune_h200.tar.gz ) > $L/fla.log 2>&1
grep -E "median|GB/s|skipped|ERROR|real" $L/fla.log | tail -20
echo "call took $SECONDS s"
