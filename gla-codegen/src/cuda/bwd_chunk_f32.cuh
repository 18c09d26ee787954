// The backward's chunk kernel, first form (f32 CUDA cores; f32, and head dims over 128): one chunk's gradients,
// every chunk of every sequence at once (grid x = chunks, y = heads).
constexpr int LDV1 = DV + 1;  // V, dÔ rows padded by one (the state terms read a column of them a warp)

extern "C" __global__ void __launch_bounds__(NT) gla_bwd_chunk(const __grid_constant__ BwdArgs a) {
    extern __shared__ __align__(16) float sm[];
    float* Q = sm;              // [C][DK]
    float* K = Q + C * DK;      // [C][DK]
    float* G = K + C * DK;      // [C][DK]  Γ
    float* KH = G + C * DK;     // [C][DK]  K̂, later P = q ⊙ dq − k ⊙ dk
    float* DQ = KH + C * DK;    // [C][DK]
    float* DKs = DQ + C * DK;   // [C][DK]
    float* AL = DKs + C * DK;   // [C][DK]  α
    float* V = AL + C * DK;     // [C][LDV1]
    float* DO = V + C * LDV1;   // [C][LDV1]  dÔ
    float* A = DO + C * LDV1;   // [C][C]
    float* DA = A + C * C;      // [C][C]
    float* R = DA + C * C;      // [DK]  rowsum(dS_[c+1] ⊙ S_[c+1])
    float* W = R + DK;          // [C]   (chunk_gate_grads)
    const ChunkAt ch = chunk_at(a);
    const int head = ch.head, i0 = ch.i0, l = ch.l;
    const i64 bos = ch.bos;
    const float *S0 = ch.S0, *dS1 = ch.dS1;  // S_[c], dS_[c+1]

    // 1. Tiles of the chunk (zero past row l and the head dims), Γ and α.
    for (int idx = threadIdx.x; idx < C * DK; idx += NT) {
        const int i = idx / DK, d = idx - i * DK;
        const bool ok = i < l && d < a.dk;
        const i64 off = ((bos + i0 + i) * a.h + head) * (i64)a.dk + d;
        Q[idx] = ok ? to_f32(a.q[off]) : 0.f;
        K[idx] = ok ? to_f32(a.k[off]) : 0.f;
    }
    for (int idx = threadIdx.x; idx < C * DV; idx += NT) {
        const int i = idx / DV, e = idx - i * DV;
        const bool ok = i < l && e < a.dv;
        const i64 off = ((bos + i0 + i) * a.h + head) * (i64)a.dv + e;
        V[i * LDV1 + e] = ok ? to_f32(a.v[off]) : 0.f;
        DO[i * LDV1 + e] = ok ? a.scale * to_f32(a.d_o[off]) : 0.f;
    }
    chunk_gamma(a, G, AL, bos, head, i0, l);  // (its barriers also publish the tiles)
    const float* GL = G + (l - 1) * DK;

    // 2. K̂ = K ⊙ e^{Γ_L − Γ}; dA_ij = dÔ_i · v_j (j ≤ i < l).
    for (int idx = threadIdx.x; idx < C * DK; idx += NT) KH[idx] = K[idx] * gla_exp(GL[idx % DK] - G[idx]);
    for (int idx = threadIdx.x; idx < C * C; idx += NT) {
        const int i = idx / C, j = idx - i * C;
        float ds = 0.f;
        if (j <= i && i < l)
            for (int e = 0; e < a.dv; ++e) ds = fmaf(DO[i * LDV1 + e], V[j * LDV1 + e], ds);
        DA[idx] = ds;
    }
    // 3. The state terms (rows fastest: a warp reads one state row, broadcast):
    //    dq_i = (dÔ_i S_[c]ᵀ) ⊙ e^{Γ_i},  dk_j = (v_j dS_[c+1]ᵀ) ⊙ e^{Γ_L − Γ_j};  R = rowsum(dS_[c+1] ⊙ S_[c+1]).
    for (int idx = threadIdx.x; idx < C * DK; idx += NT) {
        const int d = idx / C, i = idx - d * C;
        float q = 0.f, k = 0.f;
        if (i < l && d < a.dk) {
            for (int e = 0; e < a.dv; ++e) {
                q = fmaf(DO[i * LDV1 + e], S0[(i64)d * a.dv + e], q);
                k = fmaf(V[i * LDV1 + e], dS1[(i64)d * a.dv + e], k);
            }
            q *= gla_exp(G[i * DK + d]);
            k *= gla_exp(GL[d] - G[i * DK + d]);
        }
        DQ[i * DK + d] = q;
        DKs[i * DK + d] = k;
    }
    state_rowsum(R, ch, a);
    __syncthreads();

    // 4. The per-pair terms, exact (running products of α): A, and dq, dk += their intra-chunk sums.
    intra_pairs<DK>([&](int i, int d) { return Q[i * DK + d]; }, [&](int j, int d) { return K[j * DK + d]; }, AL, DA, A,
                DQ, DKs, l);

    // 5. The outputs; dv_j = K̂_j dS_[c+1] + Σ_{i≥j} A_ij dÔ_i; P = q ⊙ dq − k ⊙ dk for the gate.
    for (int idx = threadIdx.x; idx < C * DK; idx += NT) {
        const int i = idx / DK, d = idx - i * DK;
        if (i < l && d < a.dk) {
            const i64 off = ((bos + i0 + i) * a.h + head) * (i64)a.dk + d;
            a.dq_out[off] = to_elem(DQ[idx]);
            a.dk_out[off] = to_elem(DKs[idx]);
        }
    }
    for (int idx = threadIdx.x; idx < C * DV; idx += NT) {
        const int j = idx / DV, e = idx - j * DV;
        if (j < l && e < a.dv) {
            float s = 0.f;
            for (int d = 0; d < a.dk; ++d) s = fmaf(KH[j * DK + d], dS1[(i64)d * a.dv + e], s);
            for (int i = j; i < l; ++i) s = fmaf(A[i * C + j], DO[i * LDV1 + e], s);
            a.dv_out[((bos + i0 + j) * a.h + head) * (i64)a.dv + e] = to_elem(s);
        }
    }
    __syncthreads();  // (KH is reused below)
    for (int idx = threadIdx.x; idx < C * DK; idx += NT) KH[idx] = Q[idx] * DQ[idx] - K[idx] * DKs[idx];
    __syncthreads();
    chunk_gate_grads(a, KH, R, W, bos, head, i0, l);
}
