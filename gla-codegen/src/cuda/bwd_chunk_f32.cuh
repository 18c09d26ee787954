// The backward's chunk kernel, first form (f32 CUDA cores; f32, and head dims over 128): one chunk's gradients,
// every chunk of every sequence at once (grid x = chunks, y = heads).
extern "C" __global__ void __launch_bounds__(NT) gla_bwd_chunk(const __grid_constant__ BwdArgs a) {
    extern __shared__ __align__(16) float sm[];
    float* Q = sm;              // [C][DK]
    float* K = Q + C * DK;      // [C][DK]
    float* G = K + C * DK;      // [C][DK]  Γ
    float* KH = G + C * DK;     // [C][DK]  K̂, later P = q ⊙ dq − k ⊙ dk
    float* DQ = KH + C * DK;    // [C][DK]
    float* DKs = DQ + C * DK;   // [C][DK]
    float* V = DKs + C * DK;    // [C][DV]
    float* DO = V + C * DV;     // [C][DV]  dÔ
    float* A = DO + C * DV;     // [C][C]
    float* DA = A + C * C;      // [C][C]
    float* R = DA + C * C;      // [DK]  rowsum(dS_[c+1] ⊙ S_[c+1])
    float* W = R + DK;          // [C]   (chunk_gate_grads)
    const int gc = blockIdx.x, head = blockIdx.y;
    const int n = a.chunk_index[2 * gc], c = a.chunk_index[2 * gc + 1];
    const i64 bos = a.cu_seqlens[n], len = a.cu_seqlens[n + 1] - bos, slot = a.chunk_offsets[n] + n + c;
    const int i0 = c * C, l = (int)min((i64)C, len - i0);
    const float* S0 = slot_ptr(a.states, a, slot, head);       // S_[c]
    const float* S1 = slot_ptr(a.states, a, slot + 1, head);   // S_[c+1]
    const float* dS1 = slot_ptr(a.dstates, a, slot + 1, head); // dS_[c+1]
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
        V[idx] = ok ? to_f32(a.v[off]) : 0.f;
        DO[idx] = ok ? a.scale * to_f32(a.d_o[off]) : 0.f;
    }
    chunk_gamma(a, G, bos, head, i0, l);  // (its barriers also publish Q, K, V, DO)
    const float* GL = G + (l - 1) * DK;
    for (int idx = threadIdx.x; idx < C * DK; idx += NT) KH[idx] = K[idx] * gla_exp(GL[idx % DK] - G[idx]);  // K̂
    for (int idx = threadIdx.x; idx < C * C; idx += NT) {  // A_ij, dA_ij (j ≤ i < l)
        const int i = idx / C, j = idx - i * C;
        float s = 0.f, ds = 0.f;
        if (j <= i && i < l) {
            for (int d = 0; d < a.dk; ++d) s = fmaf(Q[i * DK + d] * K[j * DK + d], gla_exp(G[i * DK + d] - G[j * DK + d]), s);
            for (int e = 0; e < a.dv; ++e) ds = fmaf(DO[i * DV + e], V[j * DV + e], ds);
        }
        A[idx] = s;
        DA[idx] = ds;
    }
    __syncthreads();
    for (int idx = threadIdx.x; idx < C * DK; idx += NT) {
        const int i = idx / DK, d = idx - i * DK;
        float dq = 0.f, dk = 0.f;
        if (i < l && d < a.dk) {
            // dq_i = (dÔ_i S_[c]ᵀ) ⊙ e^{Γ_i} + Σ_{j≤i} dA_ij k_j ⊙ e^{Γ_i − Γ_j}
            float inter = 0.f;
            for (int e = 0; e < a.dv; ++e) inter = fmaf(DO[i * DV + e], S0[(i64)d * a.dv + e], inter);
            dq = inter * gla_exp(G[idx]);
            for (int j = 0; j <= i; ++j) dq = fmaf(DA[i * C + j] * K[j * DK + d], gla_exp(G[idx] - G[j * DK + d]), dq);
            // dk_i = (v_i dS_[c+1]ᵀ) ⊙ e^{Γ_L − Γ_i} + Σ_{m≥i} dA_mi q_m ⊙ e^{Γ_m − Γ_i}
            float st = 0.f;
            for (int e = 0; e < a.dv; ++e) st = fmaf(V[i * DV + e], dS1[(i64)d * a.dv + e], st);
            dk = st * gla_exp(GL[d] - G[idx]);
            for (int m = i; m < l; ++m) dk = fmaf(DA[m * C + i] * Q[m * DK + d], gla_exp(G[m * DK + d] - G[idx]), dk);
            const i64 off = ((bos + i0 + i) * a.h + head) * (i64)a.dk + d;
            a.dq_out[off] = to_elem(dq);
            a.dk_out[off] = to_elem(dk);
        }
        DQ[idx] = dq;
        DKs[idx] = dk;
    }
    for (int d = threadIdx.x; d < DK; d += NT) {
        float r = 0.f;
        if (d < a.dk)
            for (int e = 0; e < a.dv; ++e) r = fmaf(dS1[(i64)d * a.dv + e], S1[(i64)d * a.dv + e], r);
        R[d] = r;
    }
    for (int idx = threadIdx.x; idx < C * DV; idx += NT) {
        const int j = idx / DV, e = idx - j * DV;
        if (j < l && e < a.dv) {  // dv_j = K̂_j dS_[c+1] + Σ_{i≥j} A_ij dÔ_i
            float s = 0.f;
            for (int d = 0; d < a.dk; ++d) s = fmaf(KH[j * DK + d], dS1[(i64)d * a.dv + e], s);
            for (int i = j; i < l; ++i) s = fmaf(A[i * C + j], DO[i * DV + e], s);
            a.dv_out[((bos + i0 + j) * a.h + head) * (i64)a.dv + e] = to_elem(s);
        }
    }
    __syncthreads();  // (KH is reused below)
    for (int idx = threadIdx.x; idx < C * DK; idx += NT) KH[idx] = Q[idx] * DQ[idx] - K[idx] * DKs[idx];
    __syncthreads();
    chunk_gate_grads(a, KH, R, W, bos, head, i0, l);
}
