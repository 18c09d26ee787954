// ---------------------------------------------------------------------------------------------------------------
// Family: fused (Alg. 1 right), every warp holds the state and computes every stage; mma.sync.
// ---------------------------------------------------------------------------------------------------------------
// Alg. 1 (right), materialize off: one CTA per (value tile, head, sequence or segment) walks its chunks in order;
// the state S stays in registers; only q, k, v, gate logits are read and o written. Chunk n+1 loads while chunk n
// computes.
// One segment p of sequence n, from seg_init, its final state to seg_fin (both taken where they are used: a pointer
// held across the chunk loop costs the w16 kernels registers they do not have).
__device__ __forceinline__ void fused_segment(const FwdArgs& a, unsigned char* smem, int head, int n, int p) {
    const Tiles s = carve_smem(smem);
    const Seq sq = locate(a, n, head, blockIdx.x);
    const float fixed_log_alpha = fixed_gate(a, head);
    int c0, c1;
    seg_range(a, sq, p, c0, c1);
    SRegs S = {};
    if (const float* init = seg_init(a, n, p, head)) state_global<false>(S, const_cast<float*>(init), a, sq.v0);  // S_0 or S_init(p)
    if (c0 < c1) land_logit(s, 0, issue_chunk(a, s, sq, c0 * C, 0, true));
    for (int c = c0; c < c1; ++c) {
        const int b = STAGES >= 2 ? ((c - c0) & 1) : 0, i0 = c * C;
        const bool next = c + 1 < c1;
        elem_t x_next = elem_t(0);
        if (STAGES >= 2 && next) {
            x_next = issue_chunk(a, s, sq, i0 + C, b ^ 1, true);  // prefetch chunk c+1
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();
        const bool mild = gate_cumsum(a, s, sq, i0, b, fixed_log_alpha);  // Γ = log2e · cumsum(gate(x))
        state_to_smem(S, s);                                 // S^T for the inter-chunk product
        __syncthreads();
        intra_and_operands(s, b, mild);                      // A = (Q K^T) ⊙ D;  Q̃ = Q ⊙ exp(Γ), K̂ = K ⊙ exp(Γ_L − Γ)
        __syncthreads();
        output_chunk(a, s, sq, i0, b);                       // O = Q̃ S + A V
#if KEY_GATE == GATE_PER_VALUE
        __syncthreads();
        decay_values_for_state(s, b);                        // V̂ = V ⊙ exp(Γ_L − Γ)  (value gate)
        __syncthreads();
#endif
        state_update(S, s, b);                               // S ← diag(exp(Γ_L)) S + K̂^T V
        if (STAGES >= 2 && next) land_logit(s, b ^ 1, x_next);
        __syncthreads();
        if (STAGES == 1 && next) land_logit(s, 0, issue_chunk(a, s, sq, i0 + C, 0, true));
    }
    if (float* fin = seg_fin(a, n, p, head)) state_global<true>(S, fin, a, sq.v0);  // the final state, or E_0 (the lead)
}

extern "C" __global__ void __launch_bounds__(NT, 1) gla_fwd_fused(const __grid_constant__ FwdArgs a) {
    extern __shared__ __align__(128) unsigned char smem[];
    const int head = blockIdx.y;
    int n, p;
    seg_of(a, blockIdx.z, false, n, p);
    fused_segment(a, smem, head, n, p);
}

// Two-level scan, pass 1: ΔS_p and Σ Γ_L of segment p (from S = 0; no output).
extern "C" __global__ void __launch_bounds__(NT, 1) gla_fwd_seg_states(const __grid_constant__ FwdArgs a) {
    extern __shared__ __align__(128) unsigned char smem[];
    const int head = blockIdx.y;
    int n, p;
    seg_of(a, blockIdx.z, true, n, p);
    if (p == 0) {                                            // the lead: its output from S_0, and E_0
        fused_segment(a, smem, head, n, 0);
        return;
    }
    const Tiles s = carve_smem(smem);
    const Seq sq = locate(a, n, head, blockIdx.x);
    const float fixed_log_alpha = fixed_gate(a, head);
    int c0, c1;
    seg_range(a, sq, p, c0, c1);
    SRegs S = {};
    float dec[DEC_PER_THREAD] = {};
    if (c0 < c1) land_logit(s, 0, issue_chunk(a, s, sq, c0 * C, 0, false));
    for (int c = c0; c < c1; ++c) {
        const int b = STAGES >= 2 ? ((c - c0) & 1) : 0, i0 = c * C;
        const bool next = c + 1 < c1;
        elem_t x_next = elem_t(0);
        if (STAGES >= 2 && next) {
            x_next = issue_chunk(a, s, sq, i0 + C, b ^ 1, false);
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();
        gate_cumsum(a, s, sq, i0, b, fixed_log_alpha);       // Γ
        __syncthreads();
        add_seg_decay(s, dec);                               // Σ Γ_L
        decay_operands(s, b, false, false);                  // K̂ = K ⊙ exp(Γ_L − Γ)  (value gate: V̂)
        __syncthreads();
        state_update(S, s, b);                               // S ← diag(exp(Γ_L)) S + K̂^T V
        if (STAGES >= 2 && next) land_logit(s, b ^ 1, x_next);
        __syncthreads();
        if (STAGES == 1 && next) land_logit(s, 0, issue_chunk(a, s, sq, i0 + C, 0, false));
    }
    state_global<true>(S, seg_slot(a, n, p, head), a, sq.v0);  // ΔS_p
    store_seg_decay(a, n * a.segs + p, head, sq, dec);
}
