#!/usr/bin/env bash
# Device call 2 of session 2026-12-01e: where the time of the wgmma variant goes (timing-only ablation builds of
# commit c611914, outputs not meaningful: abl1 consumers do no math, abl2 producers only load and publish, abl3 the
# gate function replaced by −|x|/16, abl4 no hi + lo split of A), then correctness of every wgmma variant of all
# seven gates and the warp-specialised shape sweep.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/r; mkdir -p $L
t=$(ls .gpu/tests/gpu_forward-*)
cap() { local left=$((560 - SECONDS)); [ "$left" -lt "$1" ] && echo $((left > 5 ? left : 5)) || echo "$1"; }
S="8,4096,16,128"
for b in bin/bench alt/bench_abl1 alt/bench_abl2 alt/bench_abl3 alt/bench_abl4; do
  n=$(basename $b)
  ( timeout $(cap 40) .gpu/$b --out $L/$n.json --reps 30 --variants w8p4g --shapes "$S" ) > $L/$n.log 2>&1
  echo "== $n"; grep -v screening $L/$n.log | grep " ms " | head -4
done
( time GLA_REQUIRE_GPU=1 GLA_TEST_VARIANTS=g.fused timeout $(cap 100) $t --test-threads=1 --nocapture every_variant ) > $L/every_wg_all.log 2>&1
grep -E "^\||test result|real|compiled" $L/every_wg_all.log | tail -20; grep -A14 "out of tolerance\|panicked" $L/every_wg_all.log | head -24
( time GLA_REQUIRE_GPU=1 GLA_TEST_GATES=gla,mamba2,mlstm,gated_retnet,hgrn2,rwkv6,retnet timeout $(cap 300) $t --test-threads=1 --nocapture warp_specialised ) > $L/ws_shapes.log 2>&1
grep -E "test result|real|runs|worst|compiled" $L/ws_shapes.log | tail -8; grep -A14 "out of tolerance\|panicked" $L/ws_shapes.log | head -16
echo "call took $SECONDS s"
