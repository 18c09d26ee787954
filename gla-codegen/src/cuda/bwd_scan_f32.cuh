// The backward's two state scans on f32 CUDA cores (f32, per-value gates, head dims over 128).

// S_[c] of every chunk of one (sequence, head, value tile of BVS columns), forward.
extern "C" __global__ void __launch_bounds__(NT) gla_bwd_states(const __grid_constant__ BwdArgs a) {
    extern __shared__ __align__(16) float sm[];
    float* S = sm;              // [DK][BVS]
    float* G = S + DK * BVS;    // [C][DK]
    float* KH = G + C * DK;     // [C][DK]  K̂
    float* V = KH + C * DK;     // [C][BVS]
    const int e0 = blockIdx.x * BVS, head = blockIdx.y, n = blockIdx.z;
    const i64 bos = a.cu_seqlens[n], len = a.cu_seqlens[n + 1] - bos, slot0 = a.chunk_offsets[n] + n;
    const int nc = (int)((len + C - 1) / C), ne = min(BVS, a.dv - e0);
    for (int idx = threadIdx.x; idx < DK * BVS; idx += NT) {
        const int d = idx / BVS, e = idx - d * BVS;
        S[idx] = (a.h0 && d < a.dk && e < ne) ? a.h0[(((i64)n * a.h + head) * a.dk + d) * a.dv + e0 + e] : 0.f;
    }
    __syncthreads();
    for (int c = 0;; ++c) {
        float* dst = slot_ptr(a.states, a, slot0 + c, head);
        for (int idx = threadIdx.x; idx < DK * BVS; idx += NT) {
            const int d = idx / BVS, e = idx - d * BVS;
            if (d < a.dk && e < ne) dst[(i64)d * a.dv + e0 + e] = S[idx];
        }
        if (c == nc) break;
        const int i0 = c * C, l = (int)min((i64)C, len - i0);
#if KEY_GATE == GATE_PER_VALUE
        // Value gate: S ← S diag(e^{Γ_L}) + Kᵀ V̂,  V̂ = V ⊙ e^{Γ_L − Γ} (Γ over this tile's value columns).
        value_gamma<BVS>(a, G, nullptr, e0, bos, head, i0, l);
        for (int idx = threadIdx.x; idx < C * DK; idx += NT) {
            const int j = idx / DK, d = idx - j * DK;
            KH[idx] = (j < l && d < a.dk) ? to_f32(a.k[((bos + i0 + j) * a.h + head) * (i64)a.dk + d]) : 0.f;
        }
        for (int idx = threadIdx.x; idx < C * BVS; idx += NT) {
            const int j = idx / BVS, e = idx - j * BVS;
            V[idx] = (j < l && e < ne) ? to_f32(a.v[((bos + i0 + j) * a.h + head) * (i64)a.dv + e0 + e]) * gla_exp(G[(l - 1) * BVS + e] - G[idx]) : 0.f;
        }
#else
        chunk_gamma(a, G, nullptr, bos, head, i0, l);
        for (int idx = threadIdx.x; idx < C * DK; idx += NT) {  // K̂ = K ⊙ e^{Γ_L − Γ}
            const int j = idx / DK, d = idx - j * DK;
            KH[idx] = (j < l && d < a.dk) ? to_f32(a.k[((bos + i0 + j) * a.h + head) * (i64)a.dk + d]) * gla_exp(G[(l - 1) * DK + d] - G[idx]) : 0.f;
        }
        for (int idx = threadIdx.x; idx < C * BVS; idx += NT) {
            const int j = idx / BVS, e = idx - j * BVS;
            V[idx] = (j < l && e < ne) ? to_f32(a.v[((bos + i0 + j) * a.h + head) * (i64)a.dv + e0 + e]) : 0.f;
        }
#endif
        __syncthreads();
        for (int idx = threadIdx.x; idx < DK * BVS; idx += NT) {  // S ← diag(e^{Γ_L}) S + K̂ᵀ V  (value gates: S diag(e^{Γ_L}) + Kᵀ V̂)
            const int d = idx / BVS, e = idx - d * BVS;
            float s = S[idx] * gla_exp(KEY_GATE == GATE_PER_VALUE ? G[(l - 1) * BVS + e] : G[(l - 1) * DK + d]);
            for (int j = 0; j < l; ++j) s = fmaf(KH[j * DK + d], V[j * BVS + e], s);
            S[idx] = s;
        }
        __syncthreads();
    }
}

// dS_[c] of every chunk of one (sequence, head, value tile), reverse; dh0 = dS_[0].
extern "C" __global__ void __launch_bounds__(NT) gla_bwd_dstates(const __grid_constant__ BwdArgs a) {
    extern __shared__ __align__(16) float sm[];
    float* dS = sm;             // [DK][BVS]
    float* G = dS + DK * BVS;   // [C][DK]
    float* QT = G + C * DK;     // [C][DK]  Q̃ = Q ⊙ e^{Γ}
    float* DO = QT + C * DK;    // [C][BVS] dÔ
    const int e0 = blockIdx.x * BVS, head = blockIdx.y, n = blockIdx.z;
    const i64 bos = a.cu_seqlens[n], len = a.cu_seqlens[n + 1] - bos, slot0 = a.chunk_offsets[n] + n;
    const int nc = (int)((len + C - 1) / C), ne = min(BVS, a.dv - e0);
    const i64 sbase = (((i64)n * a.h + head) * a.dk) * a.dv;
    for (int idx = threadIdx.x; idx < DK * BVS; idx += NT) {
        const int d = idx / BVS, e = idx - d * BVS;
        dS[idx] = (a.dht && d < a.dk && e < ne) ? a.dht[sbase + (i64)d * a.dv + e0 + e] : 0.f;
    }
    __syncthreads();
    for (int c = nc;; --c) {
        float* dst = slot_ptr(a.dstates, a, slot0 + c, head);
        for (int idx = threadIdx.x; idx < DK * BVS; idx += NT) {
            const int d = idx / BVS, e = idx - d * BVS;
            if (d < a.dk && e < ne) {
                dst[(i64)d * a.dv + e0 + e] = dS[idx];
                if (c == 0 && a.dh0) a.dh0[sbase + (i64)d * a.dv + e0 + e] = dS[idx];
            }
        }
        if (c == 0) break;
        const int i0 = (c - 1) * C, l = (int)min((i64)C, len - i0);
#if KEY_GATE == GATE_PER_VALUE
        // Value gate: dS ← dS diag(e^{Γ_L}) + Qᵀ (dÔ ⊙ e^{Γ}).
        value_gamma<BVS>(a, G, nullptr, e0, bos, head, i0, l);
        for (int idx = threadIdx.x; idx < C * DK; idx += NT) {
            const int i = idx / DK, d = idx - i * DK;
            QT[idx] = (i < l && d < a.dk) ? to_f32(a.q[((bos + i0 + i) * a.h + head) * (i64)a.dk + d]) : 0.f;
        }
        for (int idx = threadIdx.x; idx < C * BVS; idx += NT) {
            const int i = idx / BVS, e = idx - i * BVS;
            DO[idx] = (i < l && e < ne) ? a.scale * to_f32(a.d_o[((bos + i0 + i) * a.h + head) * (i64)a.dv + e0 + e]) * gla_exp(G[idx]) : 0.f;
        }
#else
        chunk_gamma(a, G, nullptr, bos, head, i0, l);
        for (int idx = threadIdx.x; idx < C * DK; idx += NT) {
            const int i = idx / DK, d = idx - i * DK;
            QT[idx] = (i < l && d < a.dk) ? to_f32(a.q[((bos + i0 + i) * a.h + head) * (i64)a.dk + d]) * gla_exp(G[idx]) : 0.f;
        }
        for (int idx = threadIdx.x; idx < C * BVS; idx += NT) {
            const int i = idx / BVS, e = idx - i * BVS;
            DO[idx] = (i < l && e < ne) ? a.scale * to_f32(a.d_o[((bos + i0 + i) * a.h + head) * (i64)a.dv + e0 + e]) : 0.f;
        }
#endif
        __syncthreads();
        for (int idx = threadIdx.x; idx < DK * BVS; idx += NT) {  // dS ← diag(e^{Γ_L}) dS + Q̃ᵀ dÔ
            const int d = idx / BVS, e = idx - d * BVS;
            float s = dS[idx] * gla_exp(KEY_GATE == GATE_PER_VALUE ? G[(l - 1) * BVS + e] : G[(l - 1) * DK + d]);
            for (int i = 0; i < l; ++i) s = fmaf(QT[i * DK + d], DO[i * BVS + e], s);
            dS[idx] = s;
        }
        __syncthreads();
    }
}
