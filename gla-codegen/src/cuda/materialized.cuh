// ---------------------------------------------------------------------------------------------------------------
// Family: materialized (Alg. 1 left): chunk states first, then every chunk's output in parallel.
// ---------------------------------------------------------------------------------------------------------------
// Alg. 1 (left), materialize on, kernel 1: walk the chunks in order and write S_[n] (the state entering each chunk).
extern "C" __global__ void __launch_bounds__(NT, 1) gla_fwd_states(const __grid_constant__ FwdArgs a) {
    extern __shared__ __align__(128) unsigned char smem[];
    const Tiles s = carve_smem(smem);
    const int head = blockIdx.y, n = blockIdx.z;
    const Seq sq = locate(a, n, head, blockIdx.x);
    const float fixed_log_alpha = fixed_gate(a, head);
    const i64 slab = ((i64)n * a.h + head) * a.dk * (i64)a.dv;
    const i64 c0 = a.chunk_offsets[n];
    const int nchunks = (sq.len + C - 1) / C;
    SRegs S = {};
    if (a.h0) state_global<false>(S, const_cast<float*>(a.h0) + slab, a, sq.v0);
    if (nchunks > 0) land_logit(s, 0, issue_chunk(a, s, sq, 0, 0, false));
    for (int c = 0; c < nchunks; ++c) {
        const int b = STAGES >= 2 ? (c & 1) : 0, i0 = c * C;
        const bool next = c + 1 < nchunks;
        elem_t x_next = elem_t(0);
        if (STAGES >= 2 && next) {
            x_next = issue_chunk(a, s, sq, i0 + C, b ^ 1, false);
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();
        gate_cumsum(a, s, sq, i0, b, fixed_log_alpha);       // Γ
        state_global<true>(S, a.states + ((c0 + c) * a.h + head) * a.dk * (i64)a.dv, a, sq.v0);  // S_[n]
        __syncthreads();
        decay_operands(s, b, false, false);                  // K̂ = K ⊙ exp(Γ_L − Γ)
        __syncthreads();
        state_update(S, s, b);                               // S ← diag(exp(Γ_L)) S + K̂^T V
        if (STAGES >= 2 && next) land_logit(s, b ^ 1, x_next);
        __syncthreads();
        if (STAGES == 1 && next) land_logit(s, 0, issue_chunk(a, s, sq, i0 + C, 0, false));
    }
    if (a.ht) state_global<true>(S, a.ht + slab, a, sq.v0);
}

// Kernel 2: every chunk in parallel, from its stored state:  O_[n] = Q̃_[n] S_[n] + A_[n] V_[n].
extern "C" __global__ void __launch_bounds__(NT, 1) gla_fwd_output(const __grid_constant__ FwdArgs a) {
    extern __shared__ __align__(128) unsigned char smem[];
    const Tiles s = carve_smem(smem);
    const int gc = blockIdx.x, head = blockIdx.y;
    const int n = a.chunk_index[2 * gc], ci = a.chunk_index[2 * gc + 1];
    const Seq sq = locate(a, n, head, blockIdx.z);
    const int i0 = ci * C;
    land_logit(s, 0, issue_chunk(a, s, sq, i0, 0, true));   // q, k, v, x
    cp_async_wait<0>();
    __syncthreads();
    const bool mild = gate_cumsum(a, s, sq, i0, 0, fixed_gate(a, head));  // Γ
    state_global_to_smem(a.states + ((i64)gc * a.h + head) * a.dk * (i64)a.dv, s, a, sq.v0);  // S_[n]^T
    __syncthreads();
    intra_and_operands(s, 0, mild);                         // A, Q̃
    __syncthreads();
    output_chunk(a, s, sq, i0, 0);                          // O = Q̃ S + A V
}
