// The backward pass, first form (issue 28): the chunkwise backward of gla_core::reference::chunkwise_backward on
// CUDA cores in f32, one chunk a CTA, every decay factor exact — e^{Γ_i − Γ_j} with Γ_i − Γ_j ≤ 0 for j ≤ i, so no
// factor overflows at any gate strength. Correctness first: the tensor-core form comes next.
//
// Per (sequence, head), chunk-local Γ (natural log units; padding rows repeat the last valid row), dÔ = scale · dO:
//   gla_bwd_states   (forward, per value tile):  S_[0] = h0,  S_[n+1] = diag(e^{Γ_L}) S_[n] + K̂ᵀ V,  K̂ = K ⊙ e^{Γ_L − Γ}
//   gla_bwd_dstates  (reverse, per value tile):  dS_[N] = dht,  dS_[n] = diag(e^{Γ_L}) dS_[n+1] + Q̃ᵀ dÔ,  Q̃ = Q ⊙ e^{Γ}
//                                                (dh0 = dS_[0])
//   gla_bwd_chunk    (every chunk at once):      dA_ij = dÔ_i · v_j,  A_ij = Σ_d q_id k_jd e^{Γ_id − Γ_jd}   (j ≤ i)
//     dq_i = (dÔ_i S_[n]ᵀ) ⊙ e^{Γ_i}        + Σ_{j≤i} dA_ij (k_j ⊙ e^{Γ_i − Γ_j})
//     dk_j = (v_j dS_[n+1]ᵀ) ⊙ e^{Γ_L − Γ_j} + Σ_{i≥j} dA_ij (q_i ⊙ e^{Γ_i − Γ_j})
//     dv_j = K̂_j dS_[n+1]                   + Σ_{i≥j} A_ij dÔ_i
//     d log α_t = rowsum(dS_[n+1] ⊙ S_[n+1]) + Σ_{s=t..L} (q_s ⊙ dq_s − k_s ⊙ dk_s)   (paper, appendix; summed over
//     d_k for a per-head gate, and over the tokens too for a fixed one), then d logits = d log α · ∂log α/∂x and
//     d params[h] += d log α · ∂log α/∂p (atomic, f32).
// The states live in the workspace: slot (sequence n, chunk c) = chunk_offsets[n] + n + c, c = 0 .. chunks(n).

struct BwdArgs {               // mirrors gla_codegen::BackwardArgs (#[repr(C)])
    const elem_t* q;           // [B*T, H, dk]
    const elem_t* k;           // [B*T, H, dk]
    const elem_t* v;           // [B*T, H, dv]
    const elem_t* g;           // raw gate logits (per key [B*T,H,dk] / per head [B*T,H]); null for fixed gates
    const float* params;       // [H, P] gate parameters, or null
    const float* h0;           // [N, H, dk, dv] initial state, or null
    const elem_t* d_o;         // [B*T, H, dv]
    const float* dht;          // [N, H, dk, dv] gradient of the final state, or null
    elem_t* dq_out;            // [B*T, H, dk]
    elem_t* dk_out;            // [B*T, H, dk]
    elem_t* dv_out;            // [B*T, H, dv]
    elem_t* dg;                // like g, or null (fixed gates)
    float* dparams;            // [H, P] (zeroed by the host; atomically accumulated), or null
    float* dh0;                // [N, H, dk, dv], or null
    float* states;             // [chunks + N, H, dk, dv] S_[c] of every sequence
    float* dstates;            // [chunks + N, H, dk, dv] dS_[c]
    const i64* cu_seqlens;     // [N+1] token offsets
    const i64* chunk_offsets;  // [N+1] chunk offsets
    const int* chunk_index;    // [2*chunks] (sequence, chunk) pairs
    float* seg_states;         // walk form, segmented: [segments, H, dk, dv] ΔS_σ, then S at the segment's end
    float* seg_dstates;        // [segments, H, dk, dv] ΔdS_σ, then dS at the segment's start
    float* seg_gamma;          // [segments, H, dk] Σ log α over the segment
    const i64* seg_offsets;    // [N+1] the sequences' first segments (walk form)
    const int* seg_index;      // [2*segments] (sequence, segment) pairs (walk form)
    int n_seqs, h, dk, dv;
    float scale;
    int seg_chunks;            // chunks a segment (walk form; 0: a sequence is one segment)
    float* gamma;              // walk form, per-key gates: [B*T, H, dk] chunk-local Γ (gla_bwd_gamma), else null
};

// A hint: bring the 128-byte line at p into L2 (no register, no wait).
__device__ __forceinline__ void prefetch_l2(const void* p) { asm volatile("prefetch.global.L2 [%0];\n" ::"l"(p)); }

// Two 16-bit elements as one 32-bit register (lo in the low half: an mma fragment's pair, or a 4-byte store).
__device__ __forceinline__ unsigned pair_bits(elem_t lo, elem_t hi) { return (unsigned)lo | ((unsigned)hi << 16); }
// (x, y) as high + low element pairs: hi = the pair rounded, lo = the remainders rounded; hi + lo holds x and y to
// ~2^-17 relative in bf16, so a product taken as two tensor-core products (hi, lo) keeps f32-like accuracy.
__device__ __forceinline__ void split_pair(float x, float y, unsigned& hi, unsigned& lo) {
    const elem_t hx = to_elem(x), hy = to_elem(y);
    hi = pair_bits(hx, hy);
    lo = pair_bits(to_elem(x - to_f32(hx)), to_elem(y - to_f32(hy)));
}

// One lane's accumulator element x of tile (mi, ni) → (row, column) of the warp's [16·MI][8·NI] block at (m0, n0).
__device__ __forceinline__ int acc_row(int m0, int mi, int x) { return m0 + mi * 16 + ((threadIdx.x & 31) >> 2) + (x >> 1) * 8; }
__device__ __forceinline__ int acc_col(int n0, int ni, int x) { return n0 + ni * 8 + 2 * (threadIdx.x & 3) + (x & 1); }
// Accumulator tiles (rows r0 + 16 mi + g, + 8; columns c0 + 8 ni + 2t, + 1) of this lane, handed to f(row, col, value).
template <int MI, int NI, class F>
__device__ __forceinline__ void for_acc(const float (&acc)[MI][NI][4], int r0, int c0, F f) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int ni = 0; ni < NI; ++ni)
#pragma unroll
            for (int x = 0; x < 4; ++x) f(r0 + 16 * mi + g + (x >> 1) * 8, c0 + ni * 8 + 2 * t + (x & 1), acc[mi][ni][x]);
}

__device__ __forceinline__ float* slot_ptr(float* base, const BwdArgs& a, i64 slot, int head) {
    return base + (slot * a.h + head) * (i64)a.dk * a.dv;
}

// Running sums down the columns of a [C][N] f32 tile in shared memory, G[i][d] ← Σ_{m ≤ i} G[m][d]: a thread a
// column (the order of additions of a sequential scan). column0_sums: the same for column 0 of a [C][DK] tile only
// (a scalar gate's row values), by one thread. Neither ends on a barrier.
template <int N>
__device__ __forceinline__ void column_sums(float* G) {
    for (int d = threadIdx.x; d < N; d += NT) {
        float acc = 0.f;
#pragma unroll 8
        for (int i = 0; i < C; ++i) {
            acc += G[i * N + d];
            G[i * N + d] = acc;
        }
    }
}
__device__ __forceinline__ void column0_sums(float* G) {
    if (threadIdx.x == 0) {
        float acc = 0.f;
        for (int i = 0; i < C; ++i) {
            acc += G[i * DK];
            G[i * DK] = acc;
        }
    }
}

// Running sums down the columns of a [C][N] f32 tile, G[i][d] ← Σ_{m ≤ i} G[m][d], with P = NT / N threads a column:
// each sums its C / P rows in turn, then the parts' totals are chained by a scan over the column's P lanes (shuffles)
// — C / P dependent steps where column_sums takes C. Does not end on a barrier.
template <int N>
__device__ __forceinline__ void column_sums_par(float* G) {
    constexpr int P = NT / N, R = C / P;
    static_assert(P * N == NT && R * P == C && 32 % P == 0, "whole columns a warp");
    const int d = threadIdx.x / P, part = threadIdx.x % P;
    float* g = G + part * R * N + d;
    float acc = 0.f;
#pragma unroll
    for (int r = 0; r < R; ++r) {
        acc += g[r * N];
        g[r * N] = acc;
    }
    float incl = acc;  // Σ of the totals of parts 0 ..= part
#pragma unroll
    for (int o = 1; o < P; o <<= 1) {
        const float y = __shfl_up_sync(0xffffffffu, incl, o, P);
        if (part >= o) incl += y;
    }
    const float before = __shfl_up_sync(0xffffffffu, incl, 1, P);  // (the parts above this one; unused by part 0)
    if (part > 0)
#pragma unroll
        for (int r = 0; r < R; ++r) g[r * N] += before;
}

// A thread's logits of one chunk for gamma_cols, loaded at once (a per-key gate's PER elements, coalesced; a per-head
// gate's row threadIdx.x, threads < C; none for a fixed gate): the walks issue these loads before their tile copies so
// that both round trips overlap, and hand them to gamma_cols after the copies' wait.
template <int N>
struct ChunkLogits {
#if KEY_GATE == GATE_PER_KEY
    elem_t x[(C * N + NT - 1) / NT];
#elif KEY_GATE == GATE_PER_HEAD
    elem_t x[1];
#endif
};
template <int N>
__device__ __forceinline__ ChunkLogits<N> chunk_logits(const BwdArgs& a, i64 bos, int head, int i0, int l, int d0) {
    ChunkLogits<N> lg;
#if KEY_GATE == GATE_PER_KEY
    constexpr int PER = (C * N + NT - 1) / NT;
#pragma unroll
    for (int u = 0; u < PER; ++u) {
        const int idx = threadIdx.x + u * NT, i = idx / N, d = idx - i * N;
        lg.x[u] = idx < C * N && i < l && d0 + d < a.dk ? a.g[((bos + i0 + i) * a.h + head) * (i64)a.dk + d0 + d] : to_elem(0.f);
    }
#elif KEY_GATE == GATE_PER_HEAD
    static_assert(C <= NT, "a row a thread");
    const int i = threadIdx.x;
    lg.x[0] = i < C && i < l ? a.g[(bos + i0 + i) * a.h + head] : to_elem(0.f);
    (void)d0;
#else
    (void)a, (void)bos, (void)head, (void)i0, (void)l, (void)d0;
#endif
    return lg;
}

// Γ of chunk rows [i0, i0 + l) of sequence (bos, head) over key columns [d0, d0 + N): G[i][d] = Σ_{m ≤ min(i, l−1)}
// log α_m,d0+d (natural log; rows past l repeat the last valid one, columns past d_k are 0); scalar gates fill every
// column of a row with its Γ. AL (or null) gets the decays themselves, AL[i][d] = α_i,d0+d = e^{log α} (1 past row l
// and column d_k): the per-pair factors e^{Γ_i − Γ_j} are running products of them (intra_pairs). Two stages: every
// log α at once (each thread's logits are independent, coalesced loads, then one copy of the gate's code over them:
// unrolled 16 times it overflowed the instruction cache), then the running sums down the columns in shared memory
// (column_sums_par where the threads divide into whole columns, else column_sums). Ends on a barrier.
template <int N>
__device__ __forceinline__ void gamma_cols(const BwdArgs& a, const ChunkLogits<N>& lg, float* G, float* AL, i64 bos, int head, int i0,
                                           int l, int d0) {
    const float* p = a.params ? a.params + (i64)head * NPARAM : nullptr;
#if KEY_GATE == GATE_PER_KEY
    constexpr int PER = (C * N + NT - 1) / NT;
#pragma unroll
    for (int u = 0; u < PER; ++u)
        if (threadIdx.x + u * NT < C * N) G[threadIdx.x + u * NT] = to_f32(lg.x[u]);
#pragma unroll 1
    for (int idx = threadIdx.x; idx < C * N; idx += NT) {  // (this thread's own elements: no barrier needed)
        const int i = idx / N, d = idx - i * N;
        const bool ok = i < l && d0 + d < a.dk;
        const float la = ok ? gate_log_alpha(G[idx], p) : 0.f;
        G[idx] = la;
        if (AL) AL[idx] = ok ? decay_exp(la) : 1.f;
    }
    __syncthreads();
    constexpr int P = N <= NT && NT % N == 0 ? NT / N : 0;  // threads a column, where they divide evenly
    if constexpr (P > 0 && C % P == 0 && 32 % P == 0)
        column_sums_par<N>(G);
    else
        column_sums<N>(G);
    __syncthreads();
#else
    // log α a row (column 0), then one thread's running sum, then every column of a row.
    for (int i = threadIdx.x; i < C; i += NT) {
        float la = 0.f;
        if (i < l) {
#if KEY_GATE == GATE_PER_HEAD
            la = gate_log_alpha(to_f32(lg.x[0]), p);  // (i = threadIdx.x: C ≤ NT)
#else
            la = gate_log_alpha((float)head, p);  // a fixed gate's input is the head index
            (void)lg;
#endif
        }
        G[i * N] = la;
        if (AL) AL[i * N] = i < l ? decay_exp(la) : 1.f;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        float acc = 0.f;
        for (int i = 0; i < C; ++i) {
            acc += G[i * N];
            G[i * N] = acc;
        }
    }
    __syncthreads();
    for (int idx = threadIdx.x; idx < C * N; idx += NT) {
        const int i = idx / N, d = idx - i * N;
        if (d > 0) {
            G[idx] = d0 + d < a.dk ? G[i * N] : 0.f;
            if (AL) AL[idx] = d0 + d < a.dk ? AL[i * N] : 1.f;
        }
    }
    __syncthreads();
#endif
}

// gamma_cols with its logits loaded here.
template <int N>
__device__ __forceinline__ void gamma_cols(const BwdArgs& a, float* G, float* AL, i64 bos, int head, int i0, int l, int d0) {
    gamma_cols<N>(a, chunk_logits<N>(a, bos, head, i0, l, d0), G, AL, bos, head, i0, l, d0);
}
// Γ and α over every key column of the chunk ([C][DK]).
__device__ __forceinline__ void chunk_gamma(const BwdArgs& a, float* G, float* AL, i64 bos, int head, int i0, int l) {
    gamma_cols<DK>(a, G, AL, bos, head, i0, l, 0);
}

// A per-value gate's Γ over value columns [e0, e0 + N) of chunk rows [i0, i0 + l): G[i][e] = Σ_{m ≤ min(i, l−1)}
// log β_m,e0+e (stride N; columns past d_v are 0), AL[i][e] = β_i,e0+e (or null; 1 past row l and column d_v).
// Ends on a barrier.
template <int N>
__device__ __forceinline__ void value_gamma(const BwdArgs& a, float* G, float* AL, int e0, i64 bos, int head, int i0, int l) {
    const float* p = a.params ? a.params + (i64)head * NPARAM : nullptr;
    for (int idx = threadIdx.x; idx < C * N; idx += NT) {  // every log β at once, as in chunk_gamma
        const int i = idx / N, e = idx - i * N;
        const bool ok = i < l && e0 + e < a.dv;
        const float la = ok ? gate_log_alpha(to_f32(a.g[((bos + i0 + i) * a.h + head) * (i64)a.dv + e0 + e]), p) : 0.f;
        G[idx] = la;
        if (AL) AL[idx] = ok ? decay_exp(la) : 1.f;
    }
    __syncthreads();
    column_sums<N>(G);
    __syncthreads();
}

// The intra-chunk terms of one chunk with their per-pair decays, exact and without an exponent: e^{Γ_i − Γ_j} =
// Π_{m=j+1..i} α_m (each α ≤ 1, so every partial product is ≤ 1 at any gate strength; one rounding a step):
//   A_ij = Σ_d q_id k_jd e^{Γ_id − Γ_jd},   dq_id += Σ_{j≤i} dA_ij k_jd e^{Γ_id − Γ_jd},
//   dk_jd += Σ_{m≥j} dA_mj q_md e^{Γ_md − Γ_jd}                                   (j ≤ i < l)
// Thread (row, group g) of NG = NT / C groups owns the columns d = g + NG·u, u < DG: walking j from i down it
// carries one running factor a column; A's entry is the sum over the row's NG lanes (a whole-warp shuffle).
// Q, K: accessors (row, column) → f32; AL from chunk_gamma; DA: dA [C][C] (zero above the diagonal and past l);
// DQ, DKs: [C][N], added to; A: [C][C], written (zero outside j ≤ i < l). Ends on a barrier. N = DK for key gates;
// a value gate's decays run along the value columns (N = DV), the same sums with other operands (bwd_chunk_value).
template <int N, class QF, class KF>
__device__ __forceinline__ void intra_pairs(QF Q, KF K, const float* AL, const float* DA, float* A, float* DQ, float* DKs, int l) {
    constexpr int NG = NT / C, DG = (N + NG - 1) / NG;
    static_assert(NT % C == 0 && NG <= 32 && 32 % NG == 0, "whole rows of groups, a row's groups in one warp");
    const int r = threadIdx.x / NG, g = threadIdx.x - r * NG;
    for (int j = r + 1 + g; j < C; j += NG) A[r * C + j] = 0.f;  // above the diagonal
    float f[DG], acc[DG], qv[DG];
#pragma unroll
    for (int u = 0; u < DG; ++u) {
        const int d = g + NG * u;
        f[u] = 1.f;
        acc[u] = 0.f;
        qv[u] = (r < l && d < N) ? Q(r, d) : 0.f;
    }
    // Row i = r: j = i, i − 1, .., 0 (f = e^{Γ_i − Γ_j}, then times α_j for j − 1). The loop runs from the warp's
    // last row down, the same steps for every lane (the row sum is a whole-warp shuffle); a lane works where j ≤ r.
    const int jtop = min(l - 1, (int)((threadIdx.x | 31u) / NG));
    for (int j = jtop; j >= 0; --j) {
        const bool on = j <= r && r < l;
        float s = 0.f;
        if (on) {
            const float da = DA[r * C + j];
#pragma unroll
            for (int u = 0; u < DG; ++u) {
                const int d = g + NG * u;
                if (d < N) {
                    const float t = K(j, d) * f[u];
                    acc[u] = fmaf(da, t, acc[u]);
                    s = fmaf(qv[u], t, s);
                    f[u] *= AL[j * N + d];
                }
            }
        }
#pragma unroll
        for (int o = NG / 2; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
        if (on && g == 0) A[r * C + j] = s;
    }
    if (r >= l)
        for (int j = g; j <= r && j < C; j += NG) A[r * C + j] = 0.f;  // rows past l
    if (r < l) {
#pragma unroll
        for (int u = 0; u < DG; ++u) {
            const int d = g + NG * u;
            if (d < N) DQ[r * N + d] += acc[u];
            f[u] = 1.f;
            acc[u] = 0.f;
        }
        // Column j = r of dA: m = j, j + 1, .., l − 1 (f = e^{Γ_m − Γ_j}, then times α_{m+1}).
        for (int m = r; m < l; ++m) {
            const float da = DA[m * C + r];
#pragma unroll
            for (int u = 0; u < DG; ++u) {
                const int d = g + NG * u;
                if (d < N) {
                    acc[u] = fmaf(da * f[u], Q(m, d), acc[u]);
                    if (m + 1 < C) f[u] *= AL[(m + 1) * N + d];
                }
            }
        }
#pragma unroll
        for (int u = 0; u < DG; ++u) {
            const int d = g + NG * u;
            if (d < N) DKs[r * N + d] += acc[u];
        }
    }
    __syncthreads();
}

// Where the chunk of a chunk kernel's CTA lies (grid x = global chunk, y = head): its head, first token of its
// sequence, first row and valid rows, and the states around it — S_[c], S_[c+1] and dS_[c+1] in the workspaces.
struct ChunkAt {
    int head, i0, l;
    i64 bos;
    const float *S0, *S1, *dS1;
};
__device__ __forceinline__ ChunkAt chunk_at(const BwdArgs& a) {
    const int gc = blockIdx.x, head = blockIdx.y;
    const int n = a.chunk_index[2 * gc], c = a.chunk_index[2 * gc + 1];
    const i64 bos = a.cu_seqlens[n], len = a.cu_seqlens[n + 1] - bos, slot = a.chunk_offsets[n] + n + c;
    const int i0 = c * C;
    return ChunkAt{head, i0, (int)min((i64)C, len - i0), bos, slot_ptr(a.states, a, slot, head),
                   slot_ptr(a.states, a, slot + 1, head), slot_ptr(a.dstates, a, slot + 1, head)};
}

// R_d = rowsum(dS_[c+1] ⊙ S_[c+1]) for d < DK (0 past d_k): the state's share of the key gates' d log α.
__device__ __forceinline__ void state_rowsum(float* R, const ChunkAt& ch, const BwdArgs& a) {
    const int lane = threadIdx.x & 31;
    for (int d = threadIdx.x / 32; d < DK; d += NT / 32) {  // a warp a row: coalesced reads, a shuffle sum
        float r = 0.f;
        if (d < a.dk)
            for (int e = lane; e < a.dv; e += 32) r = fmaf(ch.dS1[(i64)d * a.dv + e], ch.S1[(i64)d * a.dv + e], r);
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) r += __shfl_xor_sync(0xffffffffu, r, o);
        if (lane == 0) R[d] = r;
    }
}

// d params[head] += this thread's dp (a warp's sum, one atomic f32 add a warp; the host zeroed d params).
__device__ __forceinline__ void add_dparams(const BwdArgs& a, const float* dp, int head) {
    if (NPARAM > 0 && a.dparams)
        for (int u = 0; u < NPARAM; ++u) {
            float s = dp[u];
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
            if ((threadIdx.x & 31) == 0 && s != 0.f) atomicAdd(a.dparams + (i64)head * NPARAM + u, s);
        }
}

// The gate's gradients of one chunk (paper, appendix): d log α_t = R + Σ_{s=t..L} P_s with P = q ⊙ dq − k ⊙ dk
// (P: [C][GCOLS] f32, zero past row l and the gate's width; overwritten) and R_d = rowsum(dS_[c+1] ⊙ S_[c+1])
// ([GCOLS]); a per-head gate sums both over d_k, the fixed gate over the chunk's tokens too; a per-value gate takes
// P = ô ⊙ dÔ − v ⊙ dv and R_e = colsum(dS_[c+1] ⊙ S_[c+1]) over the value columns. Then d logits = d log α · ∂log α/∂x
// and d params[h] += d log α · ∂log α/∂p (a warp's sum, one atomic f32 add a warp). The logits are read again from
// global memory, all of a thread's at once (before the running sums, so the loads overlap them). W: [C] f32 scratch.
__device__ __forceinline__ void chunk_gate_grads(const BwdArgs& a, float* P, const float* R, float* W, i64 bos, int head, int i0, int l) {
    const float* p = a.params ? a.params + (i64)head * NPARAM : nullptr;
    float dp[NPARAM > 0 ? NPARAM : 1], t[NPARAM > 0 ? NPARAM : 1];
    for (int u = 0; u < NPARAM; ++u) dp[u] = 0.f;
#if KEY_GATE == GATE_PER_KEY || KEY_GATE == GATE_PER_VALUE
    (void)W;
    const int width = KEY_GATE == GATE_PER_VALUE ? a.dv : a.dk;  // logits a token and head
    // (This thread's logits loaded before any store — a store to dg could alias them for the compiler, which would
    // then wait on each load in turn — and used in a loop that is not unrolled: one copy of the gate's derivative.)
    constexpr int PER = (C * GCOLS + NT - 1) / NT;
    elem_t xs[PER];
#pragma unroll
    for (int u = 0; u < PER; ++u) {
        const int idx = threadIdx.x + u * NT, i = idx / GCOLS, d = idx - i * GCOLS;
        xs[u] = idx < C * GCOLS && i < l && d < width ? a.g[((bos + i0 + i) * a.h + head) * (i64)width + d] : to_elem(0.f);
    }
    // d log α, the reverse running sum down each column (shared memory only).
    for (int d = threadIdx.x; d < width; d += NT) {
        float r = R[d];
        for (int i = l - 1; i >= 0; --i) {
            r += P[i * GCOLS + d];
            P[i * GCOLS + d] = r;
        }
    }
    __syncthreads();
#pragma unroll 1
    for (int u = 0; u < PER; ++u) {
        const int idx = threadIdx.x + u * NT, i = idx / GCOLS, d = idx - i * GCOLS;
        if (idx < C * GCOLS && i < l && d < width) {
            const float r = P[idx];
            const i64 off = ((bos + i0 + i) * a.h + head) * (i64)width + d;
            const float x = to_f32(xs[u]);
            a.dg[off] = to_elem(r * gate_grads(x, p, t));
            if (NPARAM > 0)
                for (int k = 0; k < NPARAM; ++k) dp[k] = fmaf(r, t[k], dp[k]);
        }
    }
#else
    // Row sums of P in parallel, then one thread runs the reverse cumulative sum over the rows (W[i] ← d log α_i),
    // then the rows' logit gradients in parallel.
    for (int i = threadIdx.x; i < C; i += NT) {
        float s = 0.f;
        for (int d = 0; d < a.dk; ++d) s += P[i * DK + d];
        W[i] = s;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        float r = 0.f, total = 0.f;
        for (int d = 0; d < a.dk; ++d) r += R[d];
        for (int i = l - 1; i >= 0; --i) {
            r += W[i];
            W[i] = r;
            total += r;
        }
#if KEY_GATE != GATE_PER_HEAD
        if (NPARAM > 0) {
            gate_dp((float)head, p, t);  // a fixed gate's input is the head index
            for (int u = 0; u < NPARAM; ++u) dp[u] = total * t[u];
        }
#endif
        (void)total;
    }
    __syncthreads();
#if KEY_GATE == GATE_PER_HEAD
    for (int i = threadIdx.x; i < l; i += NT) {
        const float r = W[i], x = to_f32(a.g[(bos + i0 + i) * a.h + head]);
        a.dg[(bos + i0 + i) * a.h + head] = to_elem(r * gate_grads(x, p, t));
        if (NPARAM > 0)
            for (int u = 0; u < NPARAM; ++u) dp[u] = fmaf(r, t[u], dp[u]);
    }
#endif
#endif
    add_dparams(a, dp, head);
    (void)t;
}
