#!/usr/bin/env bash
# Second final device call of session 2026-12-01d: the two GPU tests the first final call ran out of time for
# (the warp-specialised shape sweep, 64-bit offsets), then fla 0.6.0 chunk_gla / chunk_simple_gla, SDPA flash and
# the copy bandwidth at the d = 128 shapes (fla autotunes once per head shape), on the same machine as
# the first final call's benchmark of ours.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/r; mkdir -p $L
t=$(ls .gpu/tests/gpu_forward-*)
( time GLA_REQUIRE_GPU=1 GLA_TEST_GATES=gla,mamba2,mlstm,gated_retnet,hgrn2,rwkv6,retnet timeout 100 $t --test-threads=1 --nocapture warp_specialised ) > $L/ws_shapes.log 2>&1
grep -E "test result|real|runs" $L/ws_shapes.log | tail -4; grep -A14 "out of tolerance\|panicked" $L/ws_shapes.log | head -16
( time GLA_REQUIRE_GPU=1 timeout 60 $t --test-threads=1 --nocapture offsets_beyond ) > $L/offsets.log 2>&1
grep -E "rel RMS|test result|real" $L/offsets.log
[ -d /tmp/site/fla ] || python3 -m pip install -q --no-index --no-deps --target /tmp/site .gpu/whl/fla_core-0.6.0-py3-none-any.whl
( time PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 timeout 240 python3 benches/python/fla_bench.py --cases copy,sdpa,gla_fwd,simple_fwd \
  --shapes "8,4096,16,128;2,16384,16,128;32,1024,16,128" --reps 50 --no-dump --out $L/fla.json ) > $L/fla.log 2>&1
grep -E "median|GB/s|skipped|ERROR|real" $L/fla.log | tail -20
echo "call took $SECONDS s"
