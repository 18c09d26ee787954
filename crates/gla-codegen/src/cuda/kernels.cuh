// ---------------------------------------------------------------------------------------------------------------
// Entry points. Each is a short tile program over the stages above.
// ---------------------------------------------------------------------------------------------------------------

#if GLA_FUSED
// Alg. 1 (right), materialize off: one CTA per (value tile, head, sequence) walks the chunks in order; the state S
// stays in registers; only q, k, v, gate logits are read and o written.
extern "C" __global__ void __launch_bounds__(NT) gla_fwd_fused(const __grid_constant__ FwdArgs a) {
    extern __shared__ __align__(16) unsigned char smem[];
    const Tiles s = carve_smem(smem);
    const int head = blockIdx.y, n = blockIdx.z;
    const Seq sq = locate(a, n, head, blockIdx.x);
    const float fixed_log_alpha = fixed_gate(a, head);
    const i64 slab = ((i64)n * a.h + head) * a.dk * (i64)a.dv;
    float S[S_PER_WARP][4] = {};
    if (a.h0) state_global<false>(S, const_cast<float*>(a.h0) + slab, a, sq.v0);   // S_0
    for (int i0 = 0; i0 < sq.len; i0 += C) {
        load_chunk(a, s, sq, i0, true, fixed_log_alpha);  // q, k, v^T, log α = gate(x)
        __syncthreads();
        cumsum_gate(s);                                   // Γ = cumsum(log α)
        state_to_smem(S, s);                              // S^T for the inter-chunk product
        __syncthreads();
        intra_scores(s);                                  // A = (Q K^T) ⊙ D  (decay-masked)
        decay_operands(s, true);                          // Q̃ = Q ⊙ exp(Γ), K̂ = K ⊙ exp(Γ_L − Γ)
        __syncthreads();
        output_chunk(a, s, sq, i0);                       // O = Q̃ S + A V
        state_update(S, s);                               // S ← diag(exp(Γ_L)) S + K̂^T V
        __syncthreads();
    }
    if (a.ht) state_global<true>(S, a.ht + slab, a, sq.v0);
}
#else
// Alg. 1 (left), materialize on, kernel 1: walk the chunks in order and write S_[n] (the state entering each chunk).
extern "C" __global__ void __launch_bounds__(NT) gla_fwd_states(const __grid_constant__ FwdArgs a) {
    extern __shared__ __align__(16) unsigned char smem[];
    const Tiles s = carve_smem(smem);
    const int head = blockIdx.y, n = blockIdx.z;
    const Seq sq = locate(a, n, head, blockIdx.x);
    const float fixed_log_alpha = fixed_gate(a, head);
    const i64 slab = ((i64)n * a.h + head) * a.dk * (i64)a.dv;
    const i64 c0 = a.chunk_offsets[n];
    float S[S_PER_WARP][4] = {};
    if (a.h0) state_global<false>(S, const_cast<float*>(a.h0) + slab, a, sq.v0);
    for (int i0 = 0, ci = 0; i0 < sq.len; i0 += C, ++ci) {
        load_chunk(a, s, sq, i0, false, fixed_log_alpha); // k, v^T, log α
        __syncthreads();
        cumsum_gate(s);                                   // Γ
        state_global<true>(S, a.states + ((c0 + ci) * a.h + head) * a.dk * (i64)a.dv, a, sq.v0);  // S_[n]
        __syncthreads();
        decay_operands(s, false);                         // K̂ = K ⊙ exp(Γ_L − Γ)
        __syncthreads();
        state_update(S, s);                               // S ← diag(exp(Γ_L)) S + K̂^T V
        __syncthreads();
    }
    if (a.ht) state_global<true>(S, a.ht + slab, a, sq.v0);
}

// Kernel 2: every chunk in parallel, from its stored state:  O_[n] = Q̃_[n] S_[n] + A_[n] V_[n].
extern "C" __global__ void __launch_bounds__(NT) gla_fwd_output(const __grid_constant__ FwdArgs a) {
    extern __shared__ __align__(16) unsigned char smem[];
    const Tiles s = carve_smem(smem);
    const int gc = blockIdx.x, head = blockIdx.y;
    const int n = a.chunk_index[2 * gc], ci = a.chunk_index[2 * gc + 1];
    const Seq sq = locate(a, n, head, blockIdx.z);
    const int i0 = ci * C;
    load_chunk(a, s, sq, i0, true, fixed_gate(a, head));  // q, k, v^T, log α
    __syncthreads();
    cumsum_gate(s);                                       // Γ
    state_global_to_smem(a.states + ((i64)gc * a.h + head) * a.dk * (i64)a.dv, s, a, sq.v0);  // S_[n]^T
    __syncthreads();
    intra_scores(s);                                      // A
    decay_operands(s, true);                              // Q̃
    __syncthreads();
    output_chunk(a, s, sq, i0);                           // O = Q̃ S + A V
}
#endif
