#!/usr/bin/env bash
# The default-variant shape sweep for the gates final2's cap did not reach (mamba2 first: its d_k = 256 default is
# now the cluster key split), with the last of the session's device time.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
( GLA_REQUIRE_GPU=1 GLA_TEST_GATES=mamba2,rwkv6 timeout 140 .gpu/bin/gpu_forward --test-threads=1 --nocapture shapes_varlen ) > $OUT/shapes3.log 2>&1; echo "shapes rc=$?"
grep -E "test result|^\| [a-z_0-9]+ \| (bf16|f16|f32)" $OUT/shapes3.log | awk -F'|' '{print $2,$3,$4,$5,$6}' | tail -40; grep -A8 "panicked\|out of tol" $OUT/shapes3.log | head -20
echo "call took $SECONDS s"
