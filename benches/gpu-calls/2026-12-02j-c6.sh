#!/usr/bin/env bash
# Device call 6 of session 2026-12-02j: trust checks of the committed kernels (x5 = 878e01f's build, the final run's
# kernels plus the scalar key split). (1) The two-group variants at every issue shape in reverse order in one
# process, with the exit status (the three-slot build of call 1/2 stopped after its first shape in a multi-shape
# process). (2) compute-sanitizer memcheck and synccheck over the every-variant test of the two-group variants.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/r; mkdir -p $L
REV="32,1024,16,128;2,16384,16,128;8,4096,8,256;8,4096,32,64;8,4096,16,128"
( time timeout 90 .gpu/cand/x5/bench --out $L/rev.json --reps 20 --gates gla,mamba2 --variants x2g --shapes "$REV"; echo "rc=$?" ) > $L/rev.log 2>&1
grep -E "best|rc=|real|rror|failed" $L/rev.log
CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
echo "compute-sanitizer: ${CS:-not found}"
if [ -n "$CS" ]; then
  for tool in memcheck synccheck; do
    ( time GLA_REQUIRE_GPU=1 GLA_TEST_VARIANTS=bf16.C32.c16.k128.v128.bv128.w8p8x2g,bf16.C32.c16.k128.v128.bv128.w8p4x2g timeout 120 $CS --tool $tool --print-limit 20 .gpu/cand/x5/gpu_forward --test-threads=1 --nocapture every_variant; echo "rc=$?" ) > $L/cs_$tool.log 2>&1
    echo "== $tool"; grep -E "ERROR SUMMARY|test result|rc=|real|Invalid|Race|hazard|Barrier" $L/cs_$tool.log | head -8
  done
fi
cd $L && tar czf $OUT/c6.tgz * && cd - > /dev/null && rm -rf $L
echo "call took $SECONDS s"
