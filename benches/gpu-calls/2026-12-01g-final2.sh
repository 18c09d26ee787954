#!/usr/bin/env bash
# Second final device call of session 2026-12-01g. Three builds side by side (.gpu/cand/<x>/bench + gpu_forward):
#   e = v11e (the first final call's build), a = v11f (tf32 operands: half an ulp added, the tensor cores truncate),
#   b = v11g (v11f + the consumers take K̃ on mild chunks: S ← diag(exp Γ_L)(S + K̃ᵀV), 32 fewer multiplies a
#   producer thread a chunk).
# A/B twice interleaved (GLA w8p4g, two shapes); the fastest whose error vs f64 is <= 2.4e-3 is chosen; its GPU tests
# (every wgmma variant of every gate, the warp-specialised sweep of the wgmma variants); if they fail the choice
# falls back to e. Then the README's benchmark command with the chosen build, the default-variant shape sweep and
# 64-bit offsets. Every step capped: the call ends by ~480 s.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/r; mkdir -p $L
cap() { local left=$((480 - SECONDS)); [ "$left" -lt "$1" ] && echo $((left > 5 ? left : 5)) || echo "$1"; }
for r in 1 2; do for c in e a b; do
  ( timeout 30 .gpu/cand/$c/bench --out $L/ab_${c}_$r.json --reps 50 --gates gla --variants w8p4g --shapes "8,4096,16,128;2,16384,16,128" ) > $L/ab_${c}_$r.log 2>&1
  echo "== $c run $r"; grep -v screening $L/ab_${c}_$r.log | grep -E " ms |best" | head -4
done; done
pick=$(python3 - "$L" <<'PY' || echo e
import json, re, sys, glob
L = sys.argv[1]; best = None
for c in "eab":
    ms = []; ok = True
    for r in (1, 2):
        try:
            recs = json.load(open(f"{L}/ab_{c}_{r}.json"))
            recs = recs if isinstance(recs, list) else recs.get("records", [])
            ms += [x["ms"] for x in recs if x.get("shape") == [8, 4096, 16, 128]]
        except Exception:
            ok = False
        try:
            log = open(f"{L}/ab_{c}_{r}.log").read()
        except OSError:
            log = ""
        errs = [float(e) for e in re.findall(r"rel RMS vs f64 ([0-9.e-]+)", log)]
        ok = ok and bool(errs) and max(errs) <= 2.4e-3
    if ok and ms:
        m = sum(ms) / len(ms)
        print(f"candidate {c}: {m:.4f} ms", file=sys.stderr)
        if best is None or m < best[1]: best = (c, m)
print(best[0] if best else "e")
PY
)
echo "picked: $pick" | tee $L/pick.txt
t=.gpu/cand/$pick/gpu_forward
if [ "$pick" != e ]; then
  ( time GLA_REQUIRE_GPU=1 GLA_TEST_VARIANTS=g.fused timeout $(cap 60) $t --test-threads=1 --nocapture every_variant ) > $L/every_wg.log 2>&1
  grep -E "^\||test result|real" $L/every_wg.log | tail -18; grep -A10 "out of tolerance\|panicked" $L/every_wg.log | head -12
  ( time GLA_REQUIRE_GPU=1 GLA_TEST_VARIANTS=g.fused timeout $(cap 80) $t --test-threads=1 --nocapture warp_specialised ) > $L/ws_shapes.log 2>&1
  grep -E "test result|real|runs|^\| [a-z]" $L/ws_shapes.log | tail -18; grep -A10 "out of tolerance\|panicked" $L/ws_shapes.log | head -12
  if ! grep -q "test result: ok" $L/every_wg.log || ! grep -q "test result: ok" $L/ws_shapes.log; then
    pick=e; t=.gpu/cand/e/gpu_forward; echo "tests failed: falling back to e" | tee -a $L/pick.txt
  fi
fi
cp .gpu/cand/$pick/bench .gpu/bin/bench
( time FLA_AUTOTUNE_IN=benches/results/raw/fla_autotune_h200_d64_d256.tar.gz timeout $(cap 300) bash benches/run-gpu.sh $L/bench --variants fused ) > $L/run_gpu.log 2>&1
tail -24 $L/run_gpu.log
rm -rf $L/bench/fla_dump
( time GLA_REQUIRE_GPU=1 GLA_TEST_GATES=gla timeout $(cap 60) $t --test-threads=1 --nocapture shapes_varlen ) > $L/shapes.log 2>&1
grep -E "test result|real" $L/shapes.log; grep -A10 "out of tolerance\|panicked" $L/shapes.log | head -12
( time GLA_REQUIRE_GPU=1 timeout $(cap 70) $t --test-threads=1 --nocapture offsets_beyond ) > $L/offsets.log 2>&1
grep -E "rel RMS|test result|real" $L/offsets.log
tar czf $OUT/final2.tgz -C $L . && rm -rf $L
echo "call took $SECONDS s"
