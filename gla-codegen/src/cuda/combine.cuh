// Two-level scan, the combine (elementwise over a block of COMBINE_ROWS state rows × the value tile; sequential over
// the segments):  S = E_0;  for p = 1 .. S − 2: S_init(p) = S, S ← diag(exp(Σ Γ_L(p))) S + ΔS_p;  S_init(S − 1) = S.
// Grid: (value tile, head · row block, sequence) with COMBINE_ROWS / COMBINE_BLOCKS from the writer (the plan's
// grid uses the same numbers); COMBINE_PER elements a thread, every segment's loads issued before its stores (the
// stores go to the same workspace, so they would otherwise serialise the loads).
static_assert(COMBINE_ROWS * BV == COMBINE_PER * NT && COMBINE_BLOCKS * COMBINE_ROWS >= DK, "whole rows per block");
extern "C" __global__ void __launch_bounds__(NT, 1) gla_fwd_seg_combine(const __grid_constant__ FwdArgs a) {
    const int head = blockIdx.y / COMBINE_BLOCKS, d0 = (blockIdx.y % COMBINE_BLOCKS) * COMBINE_ROWS;
    const int n = blockIdx.z, v0 = blockIdx.x * BV;
    float S[COMBINE_PER];
    i64 off[COMBINE_PER];  // element offset in a [dk, dv] slab
    int row[COMBINE_PER];
    bool ok[COMBINE_PER];
    const float* e0 = seg_slot(a, n, 0, head);
#pragma unroll
    for (int u = 0; u < COMBINE_PER; ++u) {
        const int idx = threadIdx.x + u * NT, d = d0 + idx / BV, e = v0 + idx % BV;
        ok[u] = d < a.dk && e < a.dv;
        row[u] = d;
        off[u] = (i64)d * a.dv + e;
#if KEY_GATE == GATE_PER_VALUE
        row[u] = e;
#endif
        S[u] = ok[u] ? e0[off[u]] : 0.f;                      // S_init(1) = E_0, the lead's final state
    }
    for (int p = 1; p < a.segs - 1; ++p) {
        float* ds = seg_slot(a, n, p, head);
        const float* dz = seg_decay(a, n * a.segs + p, head);
        float delta[COMBINE_PER], f[COMBINE_PER];
#pragma unroll
        for (int u = 0; u < COMBINE_PER; ++u) {
            delta[u] = ok[u] ? ds[off[u]] : 0.f;
#if KEY_GATE == GATE_PER_KEY || KEY_GATE == GATE_PER_VALUE
            f[u] = ok[u] ? exp_nonpos(dz[row[u]]) : 0.f;
#else
            f[u] = exp_nonpos(dz[0]);
#endif
        }
#pragma unroll
        for (int u = 0; u < COMBINE_PER; ++u) {
            if (ok[u]) ds[off[u]] = S[u];                     // S_init(p), in place of ΔS_p
            S[u] = f[u] * S[u] + delta[u];
        }
    }
    float* last = seg_slot(a, n, a.segs - 1, head);          // S_init(S − 1): the last segment has no state pass
#pragma unroll
    for (int u = 0; u < COMBINE_PER; ++u)
        if (ok[u]) last[off[u]] = S[u];
}
