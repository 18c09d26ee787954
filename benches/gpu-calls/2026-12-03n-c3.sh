#!/usr/bin/env bash
# Device call 3 of session 2026-12-03n (v17 build): the default-variant shape sweep for the gates the first two
# calls' time caps left out (mamba2, mlstm, retnet, rwkv6).
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
( GLA_REQUIRE_GPU=1 GLA_TEST_GATES=mamba2,mlstm,retnet,rwkv6 timeout 400 .gpu/bin/gpu_forward --test-threads=1 --nocapture shapes_varlen ) > $OUT/shapes_rest.log 2>&1; echo "shapes rc=$?"
grep -E "test result" $OUT/shapes_rest.log; grep -A8 "panicked\|out of tol" $OUT/shapes_rest.log | head -10
grep "^| " $OUT/shapes_rest.log | awk -F'|' '{print $2}' | sort | uniq -c
echo "call took $SECONDS s"
