// ---------------------------------------------------------------------------------------------------------------
// Stages of the chunkwise GLA forward (paper §2.2 / §4, Alg. 1). Notation, per (sequence, head, value tile):
//   chunk [n] of C tokens, rows i, j in 0..C;  log α_i = gate(x_i);  Γ_i = Σ_{m<=i} log α_m (in-chunk, f32);
//   S = state entering the chunk (d_k x BV, f32);  Γ_L = Γ of the last row (padding rows have log α = 0).
// ---------------------------------------------------------------------------------------------------------------

struct Tiles {
    elem_t* q;    // [C][LDK]  raw q, later q ⊙ exp(Γ)
    elem_t* k;    // [C][LDK]  raw k
    float* G;     // [C][DK] (per key) or [C] (scalar): log α, then Γ
    elem_t* vt;   // [BV][LDC] v transposed
    elem_t* kt;   // [DK][LDC] (k ⊙ exp(Γ_L − Γ))^T; also the scratch of the off-diagonal blocks
    elem_t* st;   // [BV][LDK] S^T (state entering the chunk)
    elem_t* A;    // [C][LDC] masked decayed scores
};

__device__ __forceinline__ Tiles carve_smem(unsigned char* smem) {
    Tiles s;
    s.q = reinterpret_cast<elem_t*>(smem + OFF_Q);
    s.k = reinterpret_cast<elem_t*>(smem + OFF_K);
    s.G = reinterpret_cast<float*>(smem + OFF_G);
    s.vt = reinterpret_cast<elem_t*>(smem + OFF_VT);
    s.kt = reinterpret_cast<elem_t*>(smem + OFF_KT);
    s.st = reinterpret_cast<elem_t*>(smem + OFF_ST);
    s.A = reinterpret_cast<elem_t*>(smem + OFF_A);
    return s;
}

// Where one (sequence, head, value tile) lives.
struct Seq {
    i64 bos;   // first token (row of the flattened [B*T] axis)
    int len;   // tokens in the sequence
    int head;
    int v0;    // first value column of this tile
};

// Stage load: q, k (optional), v^T, and log α for chunk rows [i0, i0 + C).
// Full rows of specialised width (d_k == DK, d_v covering the tile) move in 16-byte vectors; the rest (masked head
// dims, padding rows past the sequence end) element by element with zeros.
constexpr int VEC = 16 / sizeof(elem_t);  // elements per 16-byte vector
__device__ __forceinline__ void load_chunk(const FwdArgs& a, const Tiles& s, const Seq& sq, int i0, bool with_q, float fixed_log_alpha) {
    const int tid = threadIdx.x;
    const float* p = a.params ? a.params + (i64)sq.head * NPARAM : nullptr;
    const int rows = min(C, sq.len - i0);
    if (a.dk == DK) {
        for (int idx = tid; idx < C * (DK / VEC); idx += NT) {
            const int i = idx / (DK / VEC), d = (idx - i * (DK / VEC)) * VEC;
            const i64 off = ((sq.bos + i0 + i) * a.h + sq.head) * (i64)DK + d;
            const uint4 zero = make_uint4(0, 0, 0, 0);
            if (with_q) *reinterpret_cast<uint4*>(s.q + i * LDK + d) = i < rows ? *reinterpret_cast<const uint4*>(a.q + off) : zero;
            *reinterpret_cast<uint4*>(s.k + i * LDK + d) = i < rows ? *reinterpret_cast<const uint4*>(a.k + off) : zero;
        }
    } else {
        for (int idx = tid; idx < C * DK; idx += NT) {
            const int i = idx / DK, d = idx - (idx / DK) * DK;
            const bool ok = (i < rows) && (d < a.dk);
            const i64 off = ((sq.bos + i0 + i) * a.h + sq.head) * (i64)a.dk + d;
            if (with_q) s.q[i * LDK + d] = ok ? a.q[off] : elem_t(0);
            s.k[i * LDK + d] = ok ? a.k[off] : elem_t(0);
        }
    }
#if KEY_GATE == GATE_PER_KEY
    if (a.dk == DK) {
        for (int idx = tid; idx < C * (DK / VEC); idx += NT) {
            const int i = idx / (DK / VEC), d = (idx - i * (DK / VEC)) * VEC;
            union { uint4 u; elem_t x[VEC]; } buf;
            if (i < rows) buf.u = *reinterpret_cast<const uint4*>(a.g + ((sq.bos + i0 + i) * a.h + sq.head) * (i64)DK + d);
#pragma unroll
            for (int u = 0; u < VEC; ++u) s.G[i * DK + d + u] = i < rows ? gate_log_alpha(to_f32(buf.x[u]), p) : 0.f;
        }
    } else {
        for (int idx = tid; idx < C * DK; idx += NT) {
            const int i = idx / DK, d = idx - (idx / DK) * DK;
            const bool ok = (i < rows) && (d < a.dk);
            s.G[i * DK + d] = ok ? gate_log_alpha(to_f32(a.g[((sq.bos + i0 + i) * a.h + sq.head) * (i64)a.dk + d]), p) : 0.f;
        }
    }
#elif KEY_GATE == GATE_PER_HEAD
    for (int i = tid; i < C; i += NT)
        s.G[i] = (i < rows) ? gate_log_alpha(to_f32(a.g[(sq.bos + i0 + i) * a.h + sq.head]), p) : 0.f;
#elif KEY_GATE == GATE_FIXED
    for (int i = tid; i < C; i += NT) s.G[i] = (i < rows) ? fixed_log_alpha : 0.f;
#endif
    if (a.dv % VEC == 0 && sq.v0 + BV <= a.dv) {
        for (int idx = tid; idx < C * (BV / VEC); idx += NT) {
            const int i = idx / (BV / VEC), e = (idx - i * (BV / VEC)) * VEC;
            union { uint4 u; elem_t x[VEC]; } buf;
            buf.u = make_uint4(0, 0, 0, 0);
            if (i < rows) buf.u = *reinterpret_cast<const uint4*>(a.v + ((sq.bos + i0 + i) * a.h + sq.head) * (i64)a.dv + sq.v0 + e);
#pragma unroll
            for (int u = 0; u < VEC; ++u) s.vt[(e + u) * LDC + i] = buf.x[u];
        }
    } else {
        for (int idx = tid; idx < C * BV; idx += NT) {
            const int i = idx / BV, e = idx - (idx / BV) * BV;
            const bool ok = (i < rows) && (sq.v0 + e < a.dv);
            s.vt[e * LDC + i] = ok ? a.v[((sq.bos + i0 + i) * a.h + sq.head) * (i64)a.dv + sq.v0 + e] : elem_t(0);
        }
    }
}

// Stage cumsum: Γ_i = Σ_{m<=i} log α_m  (f32, sequential per column: the same order as the CPU reference).
__device__ __forceinline__ void cumsum_gate(const Tiles& s) {
#if KEY_GATE == GATE_PER_KEY
    for (int d = threadIdx.x; d < DK; d += NT) {
        float acc = 0.f;
        for (int i = 0; i < C; ++i) { acc += s.G[i * DK + d]; s.G[i * DK + d] = acc; }
    }
#else
    if (threadIdx.x == 0) {
        float acc = 0.f;
        for (int i = 0; i < C; ++i) { acc += s.G[i]; s.G[i] = acc; }
    }
#endif
}

// Per-warp ownership of the 16x8 tiles of the state S (d_k x BV) and of the output O (C x BV).
constexpr int S_TILES = (DK / 16) * (BV / 8);
constexpr int S_PER_WARP = (S_TILES + NW - 1) / NW;
constexpr int O_TILES = (C / 16) * (BV / 8);
constexpr int O_PER_WARP = (O_TILES + NW - 1) / NW;

// Stage state_to_smem: st = S^T in elem_t (the B operand of Q̃ S).
__device__ __forceinline__ void state_to_smem(const float S[S_PER_WARP][4], const Tiles& s) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int u = 0; u < S_PER_WARP; ++u) {
        const int tile = warp + u * NW;
        if (tile < S_TILES) {
            const int d = (tile / (BV / 8)) * 16 + g, e = (tile % (BV / 8)) * 8 + 2 * t;
            s.st[e * LDK + d] = to_elem(S[u][0]);
            s.st[(e + 1) * LDK + d] = to_elem(S[u][1]);
            s.st[e * LDK + d + 8] = to_elem(S[u][2]);
            s.st[(e + 1) * LDK + d + 8] = to_elem(S[u][3]);
        }
    }
}

// Move S between registers and a global [.., H, dk, dv] f32 slab (h0, ht, chunk states). Masked to the real dims.
template <bool STORE>
__device__ __forceinline__ void state_global(float S[S_PER_WARP][4], float* base, const FwdArgs& a, int v0) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int u = 0; u < S_PER_WARP; ++u) {
        const int tile = warp + u * NW;
        if (tile < S_TILES) {
#pragma unroll
            for (int r = 0; r < 4; ++r) {
                const int d = (tile / (BV / 8)) * 16 + g + (r >= 2 ? 8 : 0);
                const int e = v0 + (tile % (BV / 8)) * 8 + 2 * t + (r & 1);
                const bool ok = d < a.dk && e < a.dv;
                if (STORE) { if (ok) base[(i64)d * a.dv + e] = S[u][r]; }
                else S[u][r] = ok ? base[(i64)d * a.dv + e] : 0.f;
            }
        }
    }
}

// Stage chunk_state_from_global (materialize on): st = S_[n]^T read from the states buffer.
__device__ __forceinline__ void state_global_to_smem(const float* base, const Tiles& s, const FwdArgs& a, int v0) {
    for (int idx = threadIdx.x; idx < BV * DK; idx += NT) {
        const int e = idx / DK, d = idx - (idx / DK) * DK;
        const bool ok = d < a.dk && v0 + e < a.dv;
        s.st[e * LDK + d] = ok ? to_elem(base[(i64)d * a.dv + v0 + e]) : elem_t(0);
    }
}

#if KEY_GATE == GATE_PER_KEY
// Stage intra_scores, per-key gate (§4.3 secondary chunking), A_ij for j <= i:
//   diagonal sub-chunk blocks, exact pairwise:   A_ij = Σ_d q_id k_jd exp(Γ_id − Γ_jd)
//   off-diagonal blocks (sub-chunk s > s'), reference r = first row of s, on tensor cores:
//                                                A_ij = Σ_d [q_id exp(Γ_id − Γ_rd)] [k_jd exp(Γ_rd − Γ_jd)]
__device__ __forceinline__ void intra_scores(const Tiles& s) {
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
    for (int idx = tid; idx < C * C; idx += NT) {
        const int i = idx / C, j = idx - (idx / C) * C;
        if (j > i) { s.A[i * LDC + j] = elem_t(0); continue; }
        if (j / SC != i / SC) continue;  // off-diagonal block: below
        float acc = 0.f;
        for (int d = 0; d < DK; ++d)
            acc += to_f32(s.q[i * LDK + d]) * to_f32(s.k[j * LDK + d]) * exp_nonpos(s.G[i * DK + d] - s.G[j * DK + d]);
        s.A[i * LDC + j] = to_elem(acc);
    }
    elem_t* qs = s.kt;              // scratch [SC][LDK]: q_i ⊙ exp(Γ_i − Γ_r)
    elem_t* ks = s.kt + SC * LDK;   // scratch [C − SC][LDK]: k_j ⊙ exp(Γ_r − Γ_j)
    for (int sb = 1; sb < NSUB; ++sb) {
        const int r = sb * SC;
        for (int idx = tid; idx < SC * DK; idx += NT) {
            const int i = idx / DK, d = idx - (idx / DK) * DK;
            qs[i * LDK + d] = to_elem(to_f32(s.q[(r + i) * LDK + d]) * exp_nonpos(s.G[(r + i) * DK + d] - s.G[r * DK + d]));
        }
        for (int idx = tid; idx < r * DK; idx += NT) {
            const int j = idx / DK, d = idx - (idx / DK) * DK;
            ks[j * LDK + d] = to_elem(to_f32(s.k[j * LDK + d]) * exp_nonpos(s.G[r * DK + d] - s.G[j * DK + d]));
        }
        __syncthreads();
        const int ncol = r / 8, ntiles = (SC / 16) * ncol;
        for (int tile = warp; tile < ntiles; tile += NW) {
            float c[4] = {0.f, 0.f, 0.f, 0.f};
            const int tm = tile / ncol, tn = tile - (tile / ncol) * ncol;
            tile_mma<DK>(c, qs, LDK, tm * 16, ks, LDK, tn * 8);
            tile_store(c, s.A, LDC, r + tm * 16, tn * 8);
        }
        __syncthreads();
    }
    __syncthreads();  // also when C == c (no off-diagonal blocks)
    (void)g; (void)t;
}
#else
// Stage intra_scores, scalar gate (single-matmul form): A_ij = (q_i · k_j) exp(Γ_i − Γ_j) for j <= i, else 0.
__device__ __forceinline__ void intra_scores(const Tiles& s) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    constexpr int NCOL = C / 8, NTILES = (C / 16) * NCOL;
    for (int tile = warp; tile < NTILES; tile += NW) {
        const int tm = tile / NCOL, tn = tile % NCOL;
        float c[4] = {0.f, 0.f, 0.f, 0.f};
        if (tn * 8 <= tm * 16 + 15) tile_mma<DK>(c, s.q, LDK, tm * 16, s.k, LDK, tn * 8);
#pragma unroll
        for (int r = 0; r < 4; ++r) {
            const int i = tm * 16 + g + (r >= 2 ? 8 : 0), j = tn * 8 + 2 * t + (r & 1);
            c[r] = (j <= i) ? c[r] * exp_nonpos(s.G[i] - s.G[j]) : 0.f;
        }
        tile_store(c, s.A, LDC, tm * 16, tn * 8);
    }
    __syncthreads();
}
#endif

__device__ __forceinline__ float gamma_at(const Tiles& s, int i, int d) {
#if KEY_GATE == GATE_PER_KEY
    return s.G[i * DK + d];
#else
    return s.G[i];
#endif
}

// Stage decay_operands:  q ← q ⊙ exp(Γ)  (per key; scalar gates scale O's rows instead)
//                        kt ← (k ⊙ exp(Γ_L − Γ))^T   (the K̂ of the state update)
__device__ __forceinline__ void decay_operands(const Tiles& s, bool with_q) {
    for (int idx = threadIdx.x; idx < C * DK; idx += NT) {
        const int i = idx / DK, d = idx - (idx / DK) * DK;
        const float gi = gamma_at(s, i, d);
#if KEY_GATE == GATE_PER_KEY
        if (with_q) s.q[i * LDK + d] = to_elem(to_f32(s.q[i * LDK + d]) * exp_nonpos(gi));
#endif
        s.kt[d * LDC + i] = to_elem(to_f32(s.k[i * LDK + d]) * exp_nonpos(gamma_at(s, C - 1, d) - gi));
    }
    (void)with_q;
}

// Stage output:  O = scale · ( (Q ⊙ exp(Γ)) S  +  A V )   (inter-chunk + intra-chunk), stored masked.
__device__ __forceinline__ void output_chunk(const FwdArgs& a, const Tiles& s, const Seq& sq, int i0) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int u = 0; u < O_PER_WARP; ++u) {
        const int tile = warp + u * NW;
        if (tile >= O_TILES) continue;
        const int tm = tile / (BV / 8), tn = tile % (BV / 8);
        float c[4] = {0.f, 0.f, 0.f, 0.f};
        tile_mma<DK>(c, s.q, LDK, tm * 16, s.st, LDK, tn * 8);          // inter: Q̃ S
#if KEY_GATE != GATE_PER_KEY
        const float e_lo = exp_nonpos(s.G[tm * 16 + g]), e_hi = exp_nonpos(s.G[tm * 16 + g + 8]);
        c[0] *= e_lo; c[1] *= e_lo; c[2] *= e_hi; c[3] *= e_hi;        // scalar gate: diag(exp(Γ)) Q S
#endif
        tile_mma<C>(c, s.A, LDC, tm * 16, s.vt, LDC, tn * 8);           // intra: A V
#pragma unroll
        for (int r = 0; r < 4; ++r) {
            const int i = tm * 16 + g + (r >= 2 ? 8 : 0), e = sq.v0 + tn * 8 + 2 * t + (r & 1);
            if (i0 + i < sq.len && e < a.dv)
                a.o[((sq.bos + i0 + i) * a.h + sq.head) * (i64)a.dv + e] = to_elem(a.scale * c[r]);
        }
    }
}

// Stage state_update:  S ← diag(exp(Γ_L)) S + K̂^T V.
__device__ __forceinline__ void state_update(float S[S_PER_WARP][4], const Tiles& s) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2;
#pragma unroll
    for (int u = 0; u < S_PER_WARP; ++u) {
        const int tile = warp + u * NW;
        if (tile >= S_TILES) continue;
        const int tm = tile / (BV / 8), tn = tile % (BV / 8);
        const float f_lo = exp_nonpos(gamma_at(s, C - 1, tm * 16 + g));
        const float f_hi = exp_nonpos(gamma_at(s, C - 1, tm * 16 + g + 8));
        S[u][0] *= f_lo; S[u][1] *= f_lo; S[u][2] *= f_hi; S[u][3] *= f_hi;
        tile_mma<C>(S[u], s.kt, LDC, tm * 16, s.vt, LDC, tn * 8);
    }
}

__device__ __forceinline__ Seq locate(const FwdArgs& a, int n, int head, int vtile) {
    Seq sq;
    sq.bos = a.cu_seqlens[n];
    sq.len = (int)(a.cu_seqlens[n + 1] - a.cu_seqlens[n]);
    sq.head = head;
    sq.v0 = vtile * BV;
    return sq;
}

__device__ __forceinline__ float fixed_gate(const FwdArgs& a, int head) {
#if KEY_GATE == GATE_FIXED
    const float* p = a.params ? a.params + (i64)head * NPARAM : nullptr;
    return gate_log_alpha((float)head, p);
#else
    (void)a; (void)head;
    return 0.f;
#endif
}
