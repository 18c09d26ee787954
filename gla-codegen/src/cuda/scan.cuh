// ---------------------------------------------------------------------------------------------------------------
// Two-level scan over segments of a sequence (the fused families): segment ranges, workspace slots, decays.
// ---------------------------------------------------------------------------------------------------------------
// Two-level scan for narrow problems (segs = S > 1): sequence n is cut into S segments of whole chunks — a short
// lead segment 0 (a.lead thousandths of a later one), then S − 1 equal ones; slot z = n·S + p of the workspace.
//   pass 1 (gla_fwd_seg_states / gla_fwd_ws_states, p = 0 .. S − 2): p = 0 runs the fused forward of the lead from
//           S_0 and writes its final state E_0 to slot 0; p ≥ 1 computes ΔS_p = the state segment p alone produces
//           from S = 0, and its decay Σ Γ_L (log2 units)
//   gla_fwd_seg_combine: S_init(1) = E_0;  S_init(p+1) = diag(exp(Σ Γ_L(p))) S_init(p) + ΔS_p   (sequential in p)
//   pass 2 (gla_fwd_fused / gla_fwd_ws, p = 1 .. S − 1): every later segment from its S_init, all in parallel; the
//           last one writes the final state.
// The workspace a.states holds E_0 and ΔS_p (replaced in place by S_init(p)), then the decays. (The host's
// gla_codegen::segment_chunks mirrors seg_range.)
__device__ __forceinline__ void seg_range(const FwdArgs& a, const Seq& sq, int p, int& c0, int& c1) {
    const int nch = (sq.len + C - 1) / C;
    if (a.segs <= 1) {
        c0 = 0;
        c1 = nch;
        return;
    }
    const int rest = a.segs - 1, lead = (int)((long long)nch * a.lead / (a.lead + 1000LL * rest));
    if (p == 0) {
        c0 = 0;
        c1 = lead;
        return;
    }
    const int per = (nch - lead + rest - 1) / rest;
    c0 = min(nch, lead + (p - 1) * per);
    c1 = min(nch, c0 + per);
}
// The grid's z of either pass → (sequence n, segment p): pass 1 (LEAD) takes p = 0 .. S − 2, pass 2 p = 1 .. S − 1;
// unsegmented (S = 1) z is the sequence and p = 0.
__device__ __forceinline__ void seg_of(const FwdArgs& a, int z, bool lead_pass, int& n, int& p) {
    const int per = a.segs > 1 ? a.segs - 1 : 1;
    n = z / per;
    p = z - n * per + (a.segs > 1 && !lead_pass ? 1 : 0);
}
// The state slot of (sequence n, segment p) in the segment workspace.
__device__ __forceinline__ float* seg_slot(const FwdArgs& a, int n, int p, int head) {
    return a.states + (((i64)n * a.segs + p) * a.h + head) * a.dk * (i64)a.dv;
}
// The state a fused segment starts from and where its final state goes: segment 0 from S_0, a later one from
// S_init(p) (the combine's); the last segment's final state is the sequence's, the lead's is E_0 (slot 0).
__device__ __forceinline__ const float* seg_init(const FwdArgs& a, int n, int p, int head) {
    return p > 0 ? seg_slot(a, n, p, head) : a.h0 ? a.h0 + ((i64)n * a.h + head) * a.dk * (i64)a.dv : nullptr;
}
__device__ __forceinline__ float* seg_fin(const FwdArgs& a, int n, int p, int head) {
    if (p == (a.segs > 1 ? a.segs - 1 : 0)) return a.ht ? a.ht + ((i64)n * a.h + head) * a.dk * (i64)a.dv : nullptr;
    return p == 0 ? seg_slot(a, n, 0, head) : nullptr;
}

// Decays of the segment states: per key d_k values, per value d_v, scalar gates 1; rows of max(d_k, d_v).
__device__ __forceinline__ float* seg_decay(const FwdArgs& a, int z, int head) {
    const i64 states = (i64)a.n_seqs * a.segs * a.h * a.dk * (i64)a.dv;
    return a.states + states + ((i64)z * a.h + head) * max(a.dk, a.dv);
}
#if KEY_GATE == GATE_PER_KEY
constexpr int DEC = DK;
#elif KEY_GATE == GATE_PER_VALUE
constexpr int DEC = BV;
#else
constexpr int DEC = 1;
#endif
constexpr int DEC_PER_THREAD = (DEC + NT - 1) / NT;

// Segment decay Σ Γ_L, one running sum per thread and decay index i = threadIdx.x + u·NT (thread < NT).
__device__ __forceinline__ void add_seg_decay(const Tiles& s, float (&dec)[DEC_PER_THREAD]) {
#pragma unroll
    for (int u = 0; u < DEC_PER_THREAD; ++u) {
        const int i = threadIdx.x + u * NT;
#if KEY_GATE == GATE_PER_KEY
        if (i < DEC) dec[u] += s.GL[i];
#elif KEY_GATE == GATE_PER_VALUE
        if (i < DEC) dec[u] += s.G[(C - 1) * LDG + i];
#else
        if (i < DEC) dec[u] += s.G[C - 1];
#endif
    }
}
__device__ __forceinline__ void store_seg_decay(const FwdArgs& a, int z, int head, const Seq& sq, const float (&dec)[DEC_PER_THREAD]) {
    float* dz = seg_decay(a, z, head);
#pragma unroll
    for (int u = 0; u < DEC_PER_THREAD; ++u) {
        const int i = threadIdx.x + u * NT;
#if KEY_GATE == GATE_PER_KEY
        if (i < a.dk) dz[i] = dec[u];
#elif KEY_GATE == GATE_PER_VALUE
        if (i < BV && sq.v0 + i < a.dv) dz[sq.v0 + i] = dec[u];
#else
        (void)sq;
        if (i == 0 && blockIdx.x == 0) dz[0] = dec[u];
#endif
    }
}
