// The backward's chunk kernel for a per-value gate (f32 CUDA cores, every dtype): one chunk's gradients, every
// chunk of every sequence at once (grid x = chunks, y = heads). The decay acts on the state's value columns,
// S_t = S_{t−1} diag(β_t) + k_tᵀ v_t, so with Γ the chunk-local cumulative log β of each value column,
// B_ij = q_i · k_j (no decay) and dÔ = scale · dO:
//   ô_ie = e^{Γ_ie} (q_i S_[c])_e + Σ_{j≤i} B_ij e^{Γ_ie − Γ_je} v_je                      (the forward, recomputed)
//   dA_ij = Σ_e dÔ_ie v_je e^{Γ_ie − Γ_je}
//   dq_i = (dÔ_i ⊙ e^{Γ_i}) S_[c]ᵀ + Σ_{j≤i} dA_ij k_j,      dk_j = V̂_j dS_[c+1]ᵀ + Σ_{i≥j} dA_ij q_i,  V̂ = V ⊙ e^{Γ_L − Γ}
//   dv_je = e^{Γ_Le − Γ_je} (k_j dS_[c+1])_e + Σ_{i≥j} B_ij dÔ_ie e^{Γ_ie − Γ_je}
//   d log β_t = colsum(dS_[c+1] ⊙ S_[c+1]) + Σ_{s=t..L} (ô_s ⊙ dÔ_s − v_s ⊙ dv_s)
// The three decayed sums are `intra_pairs` along the value columns with (dÔ, V, B) in the places of (Q, K, dA).
constexpr int LDV1 = DV + 1;  // V, dÔ rows padded by one (the state terms read a column of them a warp)

extern "C" __global__ void __launch_bounds__(NT) gla_bwd_chunk(const __grid_constant__ BwdArgs a) {
    extern __shared__ __align__(16) float sm[];
    float* Q = sm;              // [C][DK]
    float* K = Q + C * DK;      // [C][DK]
    float* V = K + C * DK;      // [C][LDV1]
    float* DO = V + C * LDV1;   // [C][LDV1]  dÔ
    float* G = DO + C * LDV1;   // [C][DV]  Γ over the value columns
    float* AL = G + C * DV;     // [C][DV]  β
    float* O = AL + C * DV;     // [C][DV]  ô, later P = ô ⊙ dÔ − v ⊙ dv
    float* DVs = O + C * DV;    // [C][DV]  dv
    float* B = DVs + C * DV;    // [C][C]   q_i · k_j
    float* DA = B + C * C;      // [C][C]
    float* R = DA + C * C;      // [DV]  colsum(dS_[c+1] ⊙ S_[c+1])
    float* W = R + DV;          // [C]   (chunk_gate_grads; per-value gates leave it unused)
    const ChunkAt ch = chunk_at(a);
    const int head = ch.head, i0 = ch.i0, l = ch.l;
    const i64 bos = ch.bos;
    const float *S0 = ch.S0, *S1 = ch.S1, *dS1 = ch.dS1;  // S_[c], S_[c+1], dS_[c+1]

    // 1. Tiles of the chunk (zero past row l and the head dims), Γ and β over the value columns.
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
        O[idx] = 0.f;
        DVs[idx] = 0.f;
    }
    value_gamma<DV>(a, G, AL, 0, bos, head, i0, l);  // (its barrier publishes the tiles)
    const float* GL = G + (l - 1) * DV;

    // 2. B_ij = q_i · k_j (j ≤ i < l); colsum(dS_[c+1] ⊙ S_[c+1]).
    for (int idx = threadIdx.x; idx < C * C; idx += NT) {
        const int i = idx / C, j = idx - i * C;
        float s = 0.f;
        if (j <= i && i < l)
            for (int d = 0; d < a.dk; ++d) s = fmaf(Q[i * DK + d], K[j * DK + d], s);
        B[idx] = s;
    }
    for (int e = threadIdx.x; e < DV; e += NT) {
        float r = 0.f;
        if (e < a.dv)
            for (int d = 0; d < a.dk; ++d) r = fmaf(dS1[(i64)d * a.dv + e], S1[(i64)d * a.dv + e], r);
        R[e] = r;
    }
    __syncthreads();

    // 3. The decayed sums along the value columns (running products of β): dA, ô's intra part, dv's intra part.
    intra_pairs<DV>([&](int i, int e) { return DO[i * LDV1 + e]; }, [&](int j, int e) { return V[j * LDV1 + e]; }, AL,
                    B, DA, O, DVs, l);

    // 4. The state terms (rows fastest: a warp reads one state row), ô and dv completed.
    for (int idx = threadIdx.x; idx < C * DV; idx += NT) {
        const int e = idx / C, i = idx - e * C;
        if (i < l && e < a.dv) {
            float o = 0.f, v = 0.f;
            for (int d = 0; d < a.dk; ++d) {
                o = fmaf(Q[i * DK + d], S0[(i64)d * a.dv + e], o);
                v = fmaf(K[i * DK + d], dS1[(i64)d * a.dv + e], v);
            }
            O[i * DV + e] = fmaf(o, gla_exp(G[i * DV + e]), O[i * DV + e]);
            DVs[i * DV + e] = fmaf(v, gla_exp(GL[e] - G[i * DV + e]), DVs[i * DV + e]);
        }
    }
    //    dq_i = (dÔ_i ⊙ e^{Γ_i}) S_[c]ᵀ + Σ_{j≤i} dA_ij k_j,  dk_j = V̂_j dS_[c+1]ᵀ + Σ_{i≥j} dA_ij q_i.
    for (int idx = threadIdx.x; idx < C * DK; idx += NT) {
        const int d = idx / C, i = idx - d * C;
        if (i < l && d < a.dk) {
            float q = 0.f, k = 0.f;
            for (int e = 0; e < a.dv; ++e) {
                q = fmaf(DO[i * LDV1 + e] * gla_exp(G[i * DV + e]), S0[(i64)d * a.dv + e], q);
                k = fmaf(V[i * LDV1 + e] * gla_exp(GL[e] - G[i * DV + e]), dS1[(i64)d * a.dv + e], k);
            }
            for (int j = 0; j <= i; ++j) q = fmaf(DA[i * C + j], K[j * DK + d], q);
            for (int m = i; m < l; ++m) k = fmaf(DA[m * C + i], Q[m * DK + d], k);
            const i64 off = ((bos + i0 + i) * a.h + head) * (i64)a.dk + d;
            a.dq_out[off] = to_elem(q);
            a.dk_out[off] = to_elem(k);
        }
    }
    __syncthreads();

    // 5. dv out; P = ô ⊙ dÔ − v ⊙ dv for the gate.
    for (int idx = threadIdx.x; idx < C * DV; idx += NT) {
        const int j = idx / DV, e = idx - j * DV;
        float p = 0.f;
        if (j < l && e < a.dv) {
            a.dv_out[((bos + i0 + j) * a.h + head) * (i64)a.dv + e] = to_elem(DVs[idx]);
            p = O[idx] * DO[j * LDV1 + e] - V[j * LDV1 + e] * DVs[idx];
        }
        O[idx] = p;
    }
    __syncthreads();
    chunk_gate_grads(a, O, R, W, bos, head, i0, l);
}
