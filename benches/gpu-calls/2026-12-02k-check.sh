#!/usr/bin/env bash
# Last device call of session 2026-12-02k: the build with the spill fix (the fused segment takes its state pointers
# where it uses them), which changed the emitted code after the final benchmark: the lead test (every gate, bf16;
# f32 for GLA / Mamba-2) and a timing check at the main shape and 2×16384.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
( timeout 60 .gpu/bin/bench --out $OUT/t.json --reps 50 --gates gla,mamba2 --variants x2g --shapes "8,4096,16,128;2,16384,16,128" ) > $OUT/t.log 2>&1; echo "bench rc=$?"
grep -v screening $OUT/t.log | grep -E " ms " | grep -v best
( GLA_REQUIRE_GPU=1 timeout 200 .gpu/bin/gpu_forward --test-threads=1 --nocapture segments_with_a_lead ) > $OUT/lead.log 2>&1; echo "lead rc=$?"
grep -E "test result" $OUT/lead.log; grep -c "^| " $OUT/lead.log; grep -A8 panicked $OUT/lead.log | head
echo "call took $SECONDS s"
