// The backward's walk form (issue 28): no chunk state in HBM. Each gradient is a walk over the chunks of one segment
// of a (sequence, head) — the whole sequence, or a piece of it where the walks alone would leave the GPU idle —
// like the forward's fused kernel, with its slice of a state in mma.sync accumulators (f32): the decomposition of
// gla_core::reference::walks_backward. Chunk-local Γ (natural log; rows past l repeat the last valid one),
// dÔ = scale · dO, every decay factor e^{x} with x ≤ 0:
//   gla_bwd_walk_dq  forward, a CTA per (64 key columns J, head, segment), S = S[J, :] from h0 (or the segment's start):
//       dq_i = (dÔ_i S_[c]ᵀ) ⊙ e^{Γ_i} + Σ_{j≤i} dA_ij k_j ⊙ e^{Γ_i − Γ_j},      dA = dÔ Vᵀ
//       S_[c+1] = diag(e^{Γ_L}) S_[c] + K̂ᵀ V,                                    K̂ = K ⊙ e^{Γ_L − Γ}
//     and, for the gate, q ⊙ dq (f32) and Z = rowsum(dS ⊙ S) at the segment's end (Z_N = rowsum(dht ⊙ S_T)).
//   gla_bwd_walk_dk  reverse, a CTA per (64 key columns J, head, segment), dS = dS[J, :] from dht (or the segment's end):
//       dk_j = (v_j dS_[c+1]ᵀ) ⊙ e^{Γ_L − Γ_j} + Σ_{i≥j} dA_ij q_i ⊙ e^{Γ_i − Γ_j}
//       dS_[c] = diag(e^{Γ_0}) (diag(e^{Γ_L − Γ_0}) dS_[c+1] + Q̂ᵀ dO),          Q̂ = scale · Q ⊙ e^{Γ − Γ_0}
//       (dh0 = dS_[0]), and the gate (paper, appendix): d log α_t = Z + Σ_{s≥t in the segment} (q_s ⊙ dq_s − k_s ⊙
//       dk_s) — the per-key gate's d logits and d params here; a scalar gate's row sums go to gla_bwd_gate.
//   gla_bwd_walk_dv  reverse, a CTA per (64 value columns E, head, segment), dS = dS[:, E] likewise:
//       dv_j = K̂_j dS_[c+1] + Σ_{i≥j} A_ij dÔ_i,                                 A_ij = Σ_d q_id k_jd e^{Γ_id − Γ_jd}
//   gla_bwd_gate     scalar gates, a CTA per (head, sequence): the reverse cumulative sum of the row sums over the
//       sequence, d logits, d params. (Where a scalar gate's dq and dk came from their passes — Pass::Dq, Pass::Dk:
//       the forward's kernel with q ← dO, k ← v and v ← k, resp. the dv pass's with v ← q — those passes' stores
//       leave the row sums of q ⊙ dq − k ⊙ dk in the same place, and Z = 0: no dht there.)
// The per-pair decays inside a diagonal block of C/2 rows stay exact on CUDA cores in f32 (running products of α,
// every partial product ≤ 1); every other product runs on tensor cores, the states and decayed operands as high + low
// element pairs (f32-like accuracy). Segments (their kernels below) start from the states that the first pass and
// gla_bwd_seg_combine leave at their ends. Workspaces: a.states = q ⊙ dq, f32 [tokens, H, d_k]; a.dstates = Z, f32
// [segments, H, d_k], then a scalar gate's row sums of q ⊙ dq − k ⊙ dk, f32 [DK / 64][tokens, H].

constexpr int WT = 64;                                               // a walk CTA's columns: key tile J or value tile E
constexpr int LDT = WT + 8, LDK = DK + 8, LDV = DV + 8, LDA = C + 8;  // padded element rows (16-byte rows for ldmatrix)
static_assert(C == 32 && NT == 256 && DK % WT == 0 && DV % WT == 0 && DK <= 256 && DV <= 256, "the walks' tile maps");
// Warp maps. A key tile's state [WT][DV]: 4 row tiles of 16, two warps each (DV / 2 columns).
constexpr int KS_NI = DV / 16;
// A value tile's state [DK][WT]: DK / 16 row tiles over the 8 warps (VS_MI a warp, or VS_WPG warps a row tile).
constexpr int VS_RT = DK / 16, VS_MI = VS_RT >= 8 ? VS_RT / 8 : 1, VS_WPG = VS_RT >= 8 ? 1 : 8 / VS_RT, VS_NI = 8 / VS_WPG;
constexpr int WALK_CTAS_K = DV <= 128 ? 2 : 1, WALK_CTAS_V = DK <= 128 ? 2 : 1;  // CTAs an SM (shared memory)

// Chunk rows of a [tokens, H, w] tensor from row0 on, columns from c0: the address of (row0, c0) once a chunk (one
// 64-bit product), then each element's row i and column d as a 32-bit offset i · H · w + d (i < C, so it cannot
// overflow for any H ≤ 65535, w ≤ 512) — the copies' address arithmetic was most of a walk step's instructions.
template <class T>
struct WalkRows {
    const T* base;  // (row0, c0)
    int rs;         // elements between rows: H · w
    __device__ __forceinline__ WalkRows(const T* src, int w, int c0, const BwdArgs& a, i64 row0, int head)
        : base(src + (row0 * a.h + head) * (i64)w + c0), rs(a.h * w) {}
    __device__ __forceinline__ const T* at(int i, int d) const { return base + (i * rs + d); }
};

// Columns [c0, c0 + N) of chunk rows row0 .. row0 + l of a [tokens, H, w] input as an element tile X [C][ld]: zero past
// row l and column w; 16-byte asynchronous copies where `vec` (w % 8 = 0, 16-byte aligned; the caller commits and
// waits), element loads otherwise. (A thread's copies are a fixed, unrolled count: no loop to run per chunk.)
template <int N>
__device__ __forceinline__ void walk_tile(elem_t* X, int ld, const elem_t* src, int w, int c0, const BwdArgs& a, i64 row0,
                                          int head, int l, bool vec) {
    const WalkRows<elem_t> rows(src, w, c0, a, row0, head);
    if (vec) {
        constexpr int CP = C * N / 8;
#pragma unroll
        for (int u = 0; u < (CP + NT - 1) / NT; ++u) {
            const int idx = threadIdx.x + u * NT, i = idx / (N / 8), d = (idx % (N / 8)) * 8;
            const bool ok = (CP % NT == 0 || idx < CP) && i < l && c0 + d < w;
            if (CP % NT == 0 || idx < CP) cp_async16(X + i * ld + d, ok ? rows.at(i, d) : src, ok);
        }
    } else {
        for (int idx = threadIdx.x; idx < C * N; idx += NT) {
            const int i = idx / N, d = idx - i * N;
            const bool ok = i < l && c0 + d < w;
            X[i * ld + d] = ok ? *rows.at(i, d) : to_elem(0.f);
        }
    }
}

// The same rows and columns of a [tokens, H, w] input of T asked into L2 (a hint, no register, no wait): issued for
// the next chunk while this one computes, so that its copies wait on L2 rather than on memory.
template <int N, class T>
__device__ __forceinline__ void walk_prefetch(const T* src, int w, int c0, const BwdArgs& a, i64 row0, int head, int l) {
    constexpr int LINE = 128 / (int)sizeof(T), PER_ROW = (N + LINE - 1) / LINE;  // elements a line, lines a row
    const WalkRows<T> rows(src, w, c0, a, row0, head);
#pragma unroll
    for (int u = 0; u < (C * PER_ROW + NT - 1) / NT; ++u) {
        const int idx = threadIdx.x + u * NT, i = idx / PER_ROW, d = (idx % PER_ROW) * LINE;
        if (i < l && c0 + d < w) prefetch_l2(rows.at(i, d));
    }
}

// A warp's accumulator block (MI × NI tiles of 16 × 8 at (r0, c0)) into shared memory as high + low element tiles
// Xh, Xl [·][ld]: the state as a tensor-core operand.
template <int MI, int NI>
__device__ __forceinline__ void publish_split(const float (&acc)[MI][NI][4], int r0, int c0, elem_t* Xh, elem_t* Xl, int ld) {
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int ni = 0; ni < NI; ++ni)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int r = acc_row(r0, mi, 2 * h), c = acc_col(c0, ni, 0);
                split_pair(acc[mi][ni][2 * h], acc[mi][ni][2 * h + 1], *reinterpret_cast<unsigned*>(Xh + r * ld + c),
                           *reinterpret_cast<unsigned*>(Xl + r * ld + c));
            }
}

// Rows of a warp's accumulator block scaled by f(row).
template <int MI, int NI, class F>
__device__ __forceinline__ void scale_rows(float (&acc)[MI][NI][4], int r0, F f) {
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const float s = f(acc_row(r0, mi, 2 * h));
#pragma unroll
            for (int ni = 0; ni < NI; ++ni) {
                acc[mi][ni][2 * h] *= s;
                acc[mi][ni][2 * h + 1] *= s;
            }
        }
}

// A warp's block of a state slice from (or to) f32 [d_k][d_v] at `base`, rows from d0, columns from e0 (0 past the
// head dims; a null source gives zeros).
template <int MI, int NI>
__device__ __forceinline__ void state_load(float (&acc)[MI][NI][4], const float* base, const BwdArgs& a, int r0, int c0, int d0, int e0) {
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int ni = 0; ni < NI; ++ni)
#pragma unroll
            for (int x = 0; x < 4; ++x) {
                const int d = d0 + acc_row(r0, mi, x), e = e0 + acc_col(c0, ni, x);
                acc[mi][ni][x] = (base && d < a.dk && e < a.dv) ? base[(i64)d * a.dv + e] : 0.f;
            }
}
template <int MI, int NI>
__device__ __forceinline__ void state_store(const float (&acc)[MI][NI][4], float* base, const BwdArgs& a, int r0, int c0, int d0, int e0) {
    for_acc<MI, NI>(acc, r0, c0, [&](int r, int c, float x) {
        if (d0 + r < a.dk && e0 + c < a.dv) base[(i64)(d0 + r) * a.dv + e0 + c] = x;
    });
}

// dA = scale · dO Vᵀ on tensor cores, kept where j ≤ i < l (0 elsewhere): DA [C][C] f32, a 16 × 8 tile a warp.
__device__ __forceinline__ void chunk_dA(float* DA, const elem_t* DOe, const elem_t* Ve, float scale, int l) {
    const int warp = threadIdx.x / 32, r0 = 16 * (warp >> 2), c0 = 8 * (warp & 3);
    float acc[1][1][4] = {};
    warp_mma<1, 1, false, false, DV>(acc, DOe, LDV, r0, Ve, LDV, c0, DV);
    for_acc<1, 1>(acc, r0, c0, [&](int i, int j, float x) { DA[i * C + j] = (j <= i && i < l) ? scale * x : 0.f; });
}

// The intra-chunk terms split at HB = C / 2 (§4.3's secondary chunking, one level): pairs inside a diagonal block
// (both rows in [0, HB) or both in [HB, C)) exactly on CUDA cores here; the off-diagonal block (i ≥ HB > j) on tensor
// cores through the reference row at the split (offdiag_*), every factor e^{x} with x ≤ 0 there too.
// The key walks' diagonal blocks over the tile's WT columns: thread (row, lane group g of NG = 8) owns columns g + 8u
// and carries a running factor a column, f = e^{Γ_i − Γ_j} (a product of α's, each ≤ 1):
//   pairs_down (dq walk): OUT[i][d] += Σ_{j ≤ i, same block} DA[i][j] X_j,d e^{Γ_i,d − Γ_j,d}   (j down: f times α_j)
//   pairs_up   (dk walk): OUT[j][d] += Σ_{j ≤ i < l, same block} DA[i][j] X_i,d e^{Γ_i,d − Γ_j,d}  (i up: f times α_{i+1})
// No barrier inside (threads of rows past l return at once).
constexpr int HB = C / 2, LDH = HB + 8;  // the split row; padded rows of the off-diagonal block's [HB][HB] tiles
constexpr int PNG = NT / C, PDG = WT / PNG;
static_assert(PNG * C == NT && PDG * PNG == WT, "whole rows of lane groups");
template <class XF>
__device__ __forceinline__ void pairs_down(XF X, const float* AL, const float* DA, float* OUT, int l) {
    const int i = threadIdx.x / PNG, g = threadIdx.x % PNG;
    if (i >= l) return;
    float f[PDG], acc[PDG];
#pragma unroll
    for (int u = 0; u < PDG; ++u) f[u] = 1.f, acc[u] = 0.f;
    for (int j = i; j >= (i & ~(HB - 1)); --j) {
        const float da = DA[i * C + j];
#pragma unroll
        for (int u = 0; u < PDG; ++u) {
            const int d = g + PNG * u;
            acc[u] = fmaf(da, X(j, d) * f[u], acc[u]);
            f[u] *= AL[j * WT + d];
        }
    }
#pragma unroll
    for (int u = 0; u < PDG; ++u) OUT[i * WT + g + PNG * u] += acc[u];
}
template <class XF>
__device__ __forceinline__ void pairs_up(XF X, const float* AL, const float* DA, float* OUT, int l) {
    const int j = threadIdx.x / PNG, g = threadIdx.x % PNG;
    if (j >= l) return;
    float f[PDG], acc[PDG];
#pragma unroll
    for (int u = 0; u < PDG; ++u) f[u] = 1.f, acc[u] = 0.f;
    for (int i = j, iend = min(l, (j | (HB - 1)) + 1); i < iend; ++i) {
        const float da = DA[i * C + j];
        const float* al = AL + min(i + 1, C - 1) * WT;  // (α_{i+1}; unused after the last row)
#pragma unroll
        for (int u = 0; u < PDG; ++u) {
            const int d = g + PNG * u;
            acc[u] = fmaf(da, X(i, d) * f[u], acc[u]);
            f[u] *= al[d];
        }
    }
#pragma unroll
    for (int u = 0; u < PDG; ++u) OUT[j * WT + g + PNG * u] += acc[u];
}

// The dv walk's scores A'_ij = scale · Σ_d q_id k_jd e^{Γ_id − Γ_jd} of the diagonal blocks (j ≤ i < l, same block;
// every other entry 0: the off-diagonal block is offdiag_scores') over every key column, exact on CUDA cores, as high
// + low element tiles Ah, Al [C][LDA]: thread (row i, lane group g of 8) owns columns g + 8u and walks j from its
// warp's last row down to its block's first (the row's sum: a shuffle over its 8 lanes), carrying f = e^{Γ_i − Γ_j}.
// No barrier inside.
__device__ __forceinline__ void pair_scores(const elem_t* Qe, const elem_t* Ke, const float* AL, elem_t* Ah, elem_t* Al,
                                            float scale, int l) {
    constexpr int DG = DK / PNG;
    const int i = threadIdx.x / PNG, g = threadIdx.x % PNG;
    for (int j = g; j < C; j += PNG) {
        Ah[i * LDA + j] = to_elem(0.f);
        Al[i * LDA + j] = to_elem(0.f);
    }
    __syncwarp();  // (a row's entries are zeroed by its lanes before lane 0 writes them)
    float f[DG], qv[DG];
#pragma unroll
    for (int u = 0; u < DG; ++u) f[u] = 1.f, qv[u] = i < l ? to_f32(Qe[i * LDK + g + PNG * u]) : 0.f;
    const int wlast = (int)((threadIdx.x | 31u) / PNG), jtop = min(l - 1, wlast);  // the warp's last row (one block's)
    static_assert(32 / PNG <= HB, "a warp's rows in one block");
    for (int j = jtop; j >= (wlast & ~(HB - 1)); --j) {
        const bool on = j <= i && i < l;
        float s = 0.f;
        if (on) {
#pragma unroll
            for (int u = 0; u < DG; ++u) {
                const int d = g + PNG * u;
                s = fmaf(qv[u], to_f32(Ke[j * LDK + d]) * f[u], s);
                f[u] *= AL[j * DK + d];
            }
        }
#pragma unroll
        for (int o = PNG / 2; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
        if (on && g == 0) {
            const float x = scale * s;
            const elem_t hx = to_elem(x);
            Ah[i * LDA + j] = hx;
            Al[i * LDA + j] = to_elem(x - to_f32(hx));
        }
    }
}

// ROWS × COLS of dA [C][C] f32 from `DA` on as high + low element tiles Dh, Dl [ROWS][ld]: the off-diagonal block
// (dA_ij for i ∈ [HB, C), j < HB: split_dA<HB, HB>(DA + HB * C, …, LDH)) or the whole chunk (<C, C>, LDA). No
// barrier inside.
template <int ROWS, int COLS>
__device__ __forceinline__ void split_dA(const float* DA, elem_t* Dh, elem_t* Dl, int ld) {
    for (int idx = threadIdx.x; idx < ROWS * COLS / 2; idx += NT) {
        const int r = idx / (COLS / 2), j = 2 * (idx - r * (COLS / 2));
        split_pair(DA[r * C + j], DA[r * C + j + 1], *reinterpret_cast<unsigned*>(Dh + r * ld + j),
                   *reinterpret_cast<unsigned*>(Dl + r * ld + j));
    }
}
// A decayed operand as high + low elements: rows [row0, row0 + rows) of an element tile X [C][ldx] over N columns
// (G: Γ [C][N]) times mul · e^{Γ_ref − Γ} (`TO_REF`: rows before the reference row, e.g. K̂ = K ⊙ e^{Γ_L − Γ}) or
// mul · e^{Γ − Γ_ref} (rows after it, e.g. Q̂ = scale · Q ⊙ e^{Γ − Γ_0}) — every exponent ≤ 0 — into Xh, Xl [rows][ldo]
// (Xh may be X itself with row0 = 0: each pair is read, then written, by one thread). No barrier inside.
template <int N, bool TO_REF>
__device__ __forceinline__ void decayed_operand(const elem_t* X, int ldx, const float* G, int ref, int row0, int rows,
                                                elem_t* Xh, elem_t* Xl, int ldo, float mul) {
    for (int idx = threadIdx.x; idx < rows * N / 2; idx += NT) {
        const int r = idx / (N / 2), d = 2 * (idx - r * (N / 2)), i = row0 + r;
        float x[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const float e = TO_REF ? G[ref * N + d + h] - G[i * N + d + h] : G[i * N + d + h] - G[ref * N + d + h];
            x[h] = mul * to_f32(X[i * ldx + d + h]) * decay_exp(e);
        }
        split_pair(x[0], x[1], *reinterpret_cast<unsigned*>(Xh + r * ldo + d), *reinterpret_cast<unsigned*>(Xl + r * ldo + d));
    }
}

// The key walks' cross-half block on tensor cores, a warp an 8-column tile (three products: dA high · X̃ high, low ·
// high, high · low), added to OUT [C][WT] with the factor to the reference row r = HB − 1:
//   DQ (dq walk):  OUT_i += e^{Γ_i − Γ_r} ⊙ Σ_{j<HB} dA_ij K̃_j     for i ≥ HB   (K̃ = K ⊙ e^{Γ_r − Γ}, rows < HB)
//   else (dk walk): OUT_j += e^{Γ_r − Γ_j} ⊙ Σ_{i≥HB} dA_ij Q̃_i    for j < HB   (Q̃ = Q ⊙ e^{Γ − Γ_r}, rows ≥ HB)
// (rows < l only). No barrier inside.
template <bool DQ>
__device__ __forceinline__ void offdiag_add(const elem_t* Dh, const elem_t* Dl, const elem_t* Xh, const elem_t* Xl,
                                            const float* G, float* OUT, int l) {
    constexpr int R = HB - 1;
    const int c0 = 8 * (threadIdx.x / 32);
    float acc[1][1][4] = {};
    warp_mma<1, 1, !DQ, true, HB>(acc, Dh, LDH, 0, Xh, LDT, c0, HB);
    warp_mma<1, 1, !DQ, true, HB>(acc, Dl, LDH, 0, Xh, LDT, c0, HB);
    warp_mma<1, 1, !DQ, true, HB>(acc, Dh, LDH, 0, Xl, LDT, c0, HB);
    for_acc<1, 1>(acc, 0, c0, [&](int r, int d, float x) {
        const int i = DQ ? HB + r : r;
        if (i < l) OUT[i * WT + d] += x * decay_exp(DQ ? G[i * WT + d] - G[R * WT + d] : G[R * WT + d] - G[i * WT + d]);
    });
}

// ---- The factorised intra-chunk terms: a chunk whose decay span fits WALK_SPAN ----
// Where every column's decay over the chunk is at most WALK_SPAN nats (Γ_0,d − Γ_l−1,d ≤ WALK_SPAN), the pairs'
// decays factor through the chunk's first or last row and each intra-chunk term is one tensor-core product (§2.2's
// factorised form, as the forward's mild chunks), with the operands the state products use anyway:
//   dq walk: dq_i += e^{Γ_i − Γ_L} ⊙ Σ_{j≤i} dA_ij K̂_j            K̂ = K ⊙ e^{Γ_L − Γ}
//   dk walk: dk_j += e^{Γ_0 − Γ_j} ⊙ Σ_{i≥j} dA_ij Q̂_i / scale    Q̂ = scale · Q ⊙ e^{Γ − Γ_0}
//   dv walk: scale · A = Q̂ K'ᵀ (j ≤ i),                            K' = K ⊙ e^{Γ_0 − Γ}  (every gate)
// Every operand scaled down keeps its exponent ≤ 0 and at least e^−WALK_SPAN of its value; the factor up (≤ e^WALK_SPAN)
// multiplies the f32 result, or (dv walk) the one element operand K', far below bf16's largest. Other chunks take
// the exact pairs above. Every warp finds the span from Γ in shared memory (max is exact: they agree), so the
// choice is the CTA's with no barrier.
// (A NaN anywhere in the span makes it NaN — a max that keeps NaN — so such a chunk fails the check: exact path.)
template <int N>
__device__ __forceinline__ bool chunk_factorised(const float* G, int l) {
    float s = 0.f;
    for (int d = threadIdx.x & 31; d < N; d += 32) s = gla_max_nan(s, G[d] - G[(l - 1) * N + d]);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) s = gla_max_nan(s, __shfl_xor_sync(0xffffffffu, s, o));
    return s <= WALK_SPAN;
}
// A scalar gate's pairs in the key walks at any strength: one decay a pair, D_ij = e^{Γ_i − Γ_j} ≤ 1 (j ≤ i), so the
// intra-chunk terms are the products of dA ⊙ D with the raw tiles (exact elements) on tensor cores — no span limit, no
// running products. (The dv walk's (Q Kᵀ) ⊙ D, written the same way, spilled 148 B at d = 128: its scalar gates take
// the factorised or exact path above.) dA ⊙ D as high + low element tiles Dh, Dl [C][LDA] (G: Γ [C][ldg], every
// column the same). No barrier inside.
__device__ __forceinline__ void decay_dA(const float* DA, const float* G, int ldg, elem_t* Dh, elem_t* Dl) {
    for (int idx = threadIdx.x; idx < C * C / 2; idx += NT) {
        const int r = idx / (C / 2), j = 2 * (idx - r * (C / 2));
        const float gi = G[r * ldg];
        const float x0 = j <= r ? DA[r * C + j] * decay_exp(gi - G[j * ldg]) : 0.f;
        const float x1 = j + 1 <= r ? DA[r * C + j + 1] * decay_exp(gi - G[(j + 1) * ldg]) : 0.f;
        split_pair(x0, x1, *reinterpret_cast<unsigned*>(Dh + r * LDA + j), *reinterpret_cast<unsigned*>(Dl + r * LDA + j));
    }
}
// OUT [C][WT] (rows < l) += (dA ⊙ D) X (DQ: dq, X = K) or (dA ⊙ D)ᵀ X (dk, X = Q), a warp a 16 × 16 block (two products:
// the high and the low part of dA ⊙ D with the exact X). No barrier inside.
template <bool DQ>
__device__ __forceinline__ void intra_decayed(const elem_t* Dh, const elem_t* Dl, const elem_t* X, float* OUT, int l) {
    const int warp = threadIdx.x / 32, r0 = 16 * (warp / 4), c0 = 16 * (warp % 4);
    float acc[1][2][4] = {};
    warp_mma<1, 2, !DQ, true, C>(acc, Dh, LDA, r0, X, LDT, c0, C);
    warp_mma<1, 2, !DQ, true, C>(acc, Dl, LDA, r0, X, LDT, c0, C);
    for_acc<1, 2>(acc, r0, c0, [&](int i, int d, float x) {
        if (i < l) OUT[i * WT + d] += x;
    });
}
// The key walks' factorised intra-chunk term added to OUT [C][WT] (rows < l), a warp a 16 × 16 block (three products:
// dA high · X high, low · high, high · low): DQ: OUT_i += e^{Γ_i − Γ_L} ⊙ (dA X)_i with X = K̂; else OUT_j += mul ·
// e^{Γ_0 − Γ_j} ⊙ (dAᵀ X)_j with X = Q̂ (mul = 1 / scale). No barrier inside.
template <bool DQ>
__device__ __forceinline__ void intra_fact(const elem_t* Dh, const elem_t* Dl, const elem_t* Xh, const elem_t* Xl,
                                           const float* G, float* OUT, int l, float mul) {
    const int warp = threadIdx.x / 32, r0 = 16 * (warp / 4), c0 = 16 * (warp % 4);
    float acc[1][2][4] = {};
    warp_mma<1, 2, !DQ, true, C>(acc, Dh, LDA, r0, Xh, LDT, c0, C);
    warp_mma<1, 2, !DQ, true, C>(acc, Dl, LDA, r0, Xh, LDT, c0, C);
    warp_mma<1, 2, !DQ, true, C>(acc, Dh, LDA, r0, Xl, LDT, c0, C);
    const float* ref = G + (DQ ? (l - 1) * WT : 0);
    for_acc<1, 2>(acc, r0, c0, [&](int i, int d, float x) {
        if (i < l) OUT[i * WT + d] += mul * x * decay_exp(DQ ? G[i * WT + d] - ref[d] : ref[d] - G[i * WT + d]);
    });
}

// Where a walk CTA's segment lies (grid z = segment g; a.seg_index gives its sequence n and its place σ in it; a
// sequence is one segment where a.seg_chunks = 0): its chunks [cb, ce), and the states at its two ends in [d_k][d_v]
// layout (null: zero) — S0, the forward state at its start (h0, or the previous segment's end from
// gla_bwd_seg_combine), dS1, the state gradient at its end (dht, or the next segment's start).
struct WalkAt {
    int n, g, cb, ce;
    i64 bos, len, sbase;
    const float *S0, *dS1;
};
__device__ __forceinline__ WalkAt walk_at(const BwdArgs& a) {
    const int g = blockIdx.z, head = blockIdx.y, n = a.seg_index[2 * g], sg = a.seg_index[2 * g + 1];
    const i64 bos = a.cu_seqlens[n], len = a.cu_seqlens[n + 1] - bos, st = (i64)a.dk * a.dv;
    const int nc = (int)((len + C - 1) / C);
    const int cb = a.seg_chunks > 0 ? sg * a.seg_chunks : 0, ce = a.seg_chunks > 0 ? min(nc, cb + a.seg_chunks) : nc;
    const i64 sbase = ((i64)n * a.h + head) * st;
    const bool last = g + 1 == a.seg_offsets[n + 1];
    const float* S0 = sg == 0 ? (a.h0 ? a.h0 + sbase : nullptr) : a.seg_states + ((i64)(g - 1) * a.h + head) * st;
    const float* dS1 = last ? (a.dht ? a.dht + sbase : nullptr) : a.seg_dstates + ((i64)(g + 1) * a.h + head) * st;
    return WalkAt{n, g, cb, ce, bos, len, sbase, S0, dS1};
}

// The key walks' tiles of chunk rows row0 .. row0 + l: dO and V whole [C][LDV], q and k the key tile's columns
// [C][LDT] (asynchronous copies committed where `vec`: the caller waits).
__device__ __forceinline__ void key_walk_tiles(const BwdArgs& a, elem_t* DOe, elem_t* Ve, elem_t* Qe, elem_t* Ke, i64 row0,
                                               int head, int l, int d0, bool vec) {
    walk_tile<DV>(DOe, LDV, a.d_o, a.dv, 0, a, row0, head, l, vec);
    walk_tile<DV>(Ve, LDV, a.v, a.dv, 0, a, row0, head, l, vec);
    walk_tile<WT>(Qe, LDT, a.q, a.dk, d0, a, row0, head, l, vec);
    walk_tile<WT>(Ke, LDT, a.k, a.dk, d0, a, row0, head, l, vec);
    if (vec) cp_async_commit();
}

// Rows row0 .. row0 + l and columns [d0, d0 + N) of an f32 [tokens, H, d_k] workspace — the dk walk's q ⊙ dq (the dq
// walk's), a per-key gate's Γ (gla_bwd_gamma's) — into X [C][N] (0 past row l and column d_k): 16-byte asynchronous
// copies where `vec` (committed here; the caller's wait covers them), element loads otherwise.
template <int N>
__device__ __forceinline__ void walk_f32(float* X, const float* src, const BwdArgs& a, i64 row0, int head, int l, int d0, bool vec) {
    const WalkRows<float> rows(src, a.dk, d0, a, row0, head);
    if (vec) {
        constexpr int CP = C * N / 4;
#pragma unroll
        for (int u = 0; u < (CP + NT - 1) / NT; ++u) {
            const int idx = threadIdx.x + u * NT, i = idx / (N / 4), d = (idx % (N / 4)) * 4;
            const bool ok = (CP % NT == 0 || idx < CP) && i < l && d0 + d < a.dk;
            if (CP % NT == 0 || idx < CP) cp_async16(X + i * N + d, ok ? rows.at(i, d) : src, ok);
        }
        cp_async_commit();
    } else {
        for (int idx = threadIdx.x; idx < C * N; idx += NT) {
            const int i = idx / N, d = idx - i * N;
            X[idx] = i < l && d0 + d < a.dk ? *rows.at(i, d) : 0.f;
        }
    }
}

// After walk_f32 brought a chunk's Γ [C][N] (and the caller's wait): rows past l repeat the last valid one, as
// gamma_cols leaves them. Ends on a barrier (it publishes the chunk's tiles too).
template <int N>
__device__ __forceinline__ void gamma_tail(float* G, int l) {
    __syncthreads();
    if (l < C) {  // (CTA-uniform)
        for (int idx = l * N + threadIdx.x; idx < C * N; idx += NT) G[idx] = G[(l - 1) * N + idx % N];
        __syncthreads();
    }
}

// α_i = e^{Γ_i − Γ_i−1} (Γ_−1 = 0) from a chunk's Γ [C][N], for the exact pairs' running products: 1 past row l and
// column d_k (Γ repeats there, or is 0), each ≤ 1. (Γ is a running f32 sum: the differences give back log α to its
// rounding, the accuracy every factorised product of Γ differences has.) The caller barriers before they are read.
template <int N>
__device__ __forceinline__ void alphas_of(const float* G, float* AL) {
    for (int idx = threadIdx.x; idx < C * N; idx += NT)
        AL[idx] = decay_exp(fminf(G[idx] - (idx >= N ? G[idx - N] : 0.f), 0.f));
}

__device__ __forceinline__ bool walk_vec(const BwdArgs& a) {
    return a.dk % 8 == 0 && a.dv % 8 == 0 &&
           (((unsigned long long)a.q | (unsigned long long)a.k | (unsigned long long)a.v | (unsigned long long)a.d_o) & 15) == 0;
}

// ---- The segments (a sequence split where its walks alone would leave the GPU idle; empty grids otherwise) ----
// First pass, every segment at once: ΔS_σ and ΔdS_σ, its states from zero (bwd_scan_tc.cuh's scans in segment mode),
// and Σ log α over it. Then gla_bwd_seg_combine chains them along each sequence, an element (d, e) a thread:
//   S_end(σ) = diag(e^{Σ_σ log α}) S_end(σ − 1) + ΔS_σ        (S_end(−1) = h0)
//   dS_start(σ) = diag(e^{Σ_σ log α}) dS_start(σ + 1) + ΔdS_σ  (dS_start(last + 1) = dht)
// in place, so that a walk of segment σ starts from slot σ − 1 (forward) or σ + 1 (reverse): walk_at.
// (One CTA an SM asked of the compiler: the pass runs only where there are few sequences and heads, and two spilled.)
extern "C" __global__ void __launch_bounds__(NT, 1) gla_bwd_seg_states(const __grid_constant__ BwdArgs a) { state_scan<false, true>(a); }
extern "C" __global__ void __launch_bounds__(NT, 1) gla_bwd_seg_dstates(const __grid_constant__ BwdArgs a) { state_scan<true, true>(a); }
extern "C" __global__ void __launch_bounds__(NT) gla_bwd_seg_combine(const __grid_constant__ BwdArgs a) {
    const int head = blockIdx.y, n = blockIdx.z;
    const i64 st = (i64)a.dk * a.dv, idx = (i64)blockIdx.x * NT + threadIdx.x;
    if (idx >= st) return;
    const int d = (int)(idx / a.dv);
    const i64 s0 = a.seg_offsets[n], s1 = a.seg_offsets[n + 1], sbase = ((i64)n * a.h + head) * st + idx;
    auto at = [&](i64 g) { return (g * a.h + head) * st + idx; };
    auto decay = [&](i64 g) { return gla_exp(a.seg_gamma[(g * a.h + head) * a.dk + d]); };
    float x = a.h0 ? a.h0[sbase] : 0.f;
    for (i64 g = s0; g < s1; ++g) {
        x = fmaf(decay(g), x, a.seg_states[at(g)]);
        a.seg_states[at(g)] = x;
    }
    x = a.dht ? a.dht[sbase] : 0.f;
    for (i64 g = s1 - 1; g >= s0; --g) {
        x = fmaf(decay(g), x, a.seg_dstates[at(g)]);
        a.seg_dstates[at(g)] = x;
    }
}

// ---- gla_bwd_gamma: a per-key gate's Γ of every chunk, once, for the three walks ----
// A thread a (chunk, key column), NT / WT chunks a CTA: Γ_i = Σ_{m ≤ i} log α_m down the column (the gate's code on
// each logit, a running f32 sum) into a.gamma [tokens, H, d_k] (chunk-local, natural log; rows < l). No shared
// memory, no barrier: the loads of a row are one coalesced line a warp. The walks copy Γ with their tiles: the gate's
// code and the column sums were a fifth of a walk step's instructions, three times over (ncu, H100).
extern "C" __global__ void __launch_bounds__(NT) gla_bwd_gamma(const __grid_constant__ BwdArgs a) {
#if KEY_GATE == GATE_PER_KEY
    constexpr int CPB = NT / WT;  // chunks a CTA
    const i64 chunk = (i64)blockIdx.x * CPB + threadIdx.x / WT;
    const int d = blockIdx.z * WT + threadIdx.x % WT, head = blockIdx.y;
    if (chunk >= a.chunk_offsets[a.n_seqs] || d >= a.dk) return;
    const int n = a.chunk_index[2 * chunk], c = a.chunk_index[2 * chunk + 1];
    const i64 bos = a.cu_seqlens[n], len = a.cu_seqlens[n + 1] - bos;
    const int l = (int)min((i64)C, len - (i64)c * C);
    const float* p = a.params ? a.params + (i64)head * NPARAM : nullptr;
    const i64 o = ((bos + (i64)c * C) * a.h + head) * (i64)a.dk + d, rs = (i64)a.h * a.dk;
    float acc = 0.f;
#pragma unroll 4
    for (int i = 0; i < l; ++i) {
        acc += gate_log_alpha(to_f32(a.g[o + i * rs]), p);
        a.gamma[o + i * rs] = acc;
    }
#else
    (void)a;
#endif
}

// ---- gla_bwd_walk_dq: dq, q ⊙ dq and Z (forward over a segment's chunks) ----
extern "C" __global__ void __launch_bounds__(NT, WALK_CTAS_K) gla_bwd_walk_dq(const __grid_constant__ BwdArgs a) {
    extern __shared__ __align__(16) float sm[];
    float* G = sm;                                         // [C][WT]  Γ
    float* AL = G + C * WT;                                // [C][WT]  α
    float* DQ = AL + C * WT;                               // [C][WT]  dq
    float* DA = DQ + C * WT;                               // [C][C]   dA
    float* ZS = DA + C * C;                                // [2][WT]  Z_N's two column halves
    elem_t* DOe = reinterpret_cast<elem_t*>(ZS + 2 * WT);  // [C][LDV] dO
    elem_t* Ve = DOe + C * LDV;                            // [C][LDV] V
    elem_t* Qe = Ve + C * LDV;                             // [C][LDT] q (the tile's columns)
    elem_t* Ke = Qe + C * LDT;                             // [C][LDT] k, then K̂'s high part
    elem_t* Kl = Ke + C * LDT;                             // [C][LDT] K̂'s low part
    elem_t* Sh = Kl + C * LDT;                             // [WT][LDV] S_[c], high part
    elem_t* Sl = Sh + WT * LDV;                            // [WT][LDV] low part
    elem_t* Xh = Sl + WT * LDV;                            // [HB][LDT] K̃ = K ⊙ e^{Γ_HB−1 − Γ} (rows < HB), high part
    elem_t* Xl = Xh + HB * LDT;                            // [HB][LDT] low part
    elem_t* Dh = Xl + HB * LDT;                            // [HB][LDH] dA's off-diagonal block (or [C][LDA] all of dA), high part
    elem_t* Dl = Dh + C * LDA;                             // the same, low part
    const int d0 = blockIdx.x * WT, head = blockIdx.y, warp = threadIdx.x / 32;
    const WalkAt w = walk_at(a);
    const i64 bos = w.bos, len = w.len;
    const int sm0 = 16 * (warp % 4), sn0 = (warp / 4) * (DV / 2);  // this warp's block of S [WT][DV]
    const int r0 = 16 * (warp / 4), c0 = 16 * (warp % 4);          // and of a chunk product [C][WT]
    const bool vec = walk_vec(a);
    float S[1][KS_NI][4];
    state_load<1, KS_NI>(S, w.S0, a, sm0, sn0, d0, 0);

#pragma unroll 1
    for (int c = w.cb; c < w.ce; ++c) {
        const int i0 = c * C, l = (int)min((i64)C, len - i0);
        const i64 row0 = bos + i0;
        // 1. The chunk's logits (their loads first: they overlap the tiles' copies), tiles (dO, V whole; q, k the
        //    tile's columns), S_[c] as high + low elements, Γ and α.
#if KEY_GATE == GATE_PER_KEY
        walk_f32<WT>(G, a.gamma, a, row0, head, l, d0, vec);  // (gla_bwd_gamma's Γ)
#else
        const ChunkLogits<WT> lg = chunk_logits<WT>(a, bos, head, i0, l, d0);
#endif
        key_walk_tiles(a, DOe, Ve, Qe, Ke, row0, head, l, d0, vec);
        if (c + 1 < w.ce) {  // the next chunk's inputs into L2
            const i64 r1 = row0 + C;
            const int l1 = (int)min((i64)C, len - i0 - C);
            walk_prefetch<DV>(a.d_o, a.dv, 0, a, r1, head, l1);
            walk_prefetch<DV>(a.v, a.dv, 0, a, r1, head, l1);
            walk_prefetch<WT>(a.q, a.dk, d0, a, r1, head, l1);
            walk_prefetch<WT>(a.k, a.dk, d0, a, r1, head, l1);
            if (KEY_GATE == GATE_PER_KEY) walk_prefetch<WT>(a.gamma, a.dk, d0, a, r1, head, l1);
        }
        publish_split<1, KS_NI>(S, sm0, sn0, Sh, Sl, LDV);
        if (vec) cp_async_wait<0>();
#if KEY_GATE == GATE_PER_KEY
        gamma_tail<WT>(G, l);  // (its barrier publishes the tiles and S_[c])
#else
        gamma_cols<WT>(a, lg, G, AL, bos, head, i0, l, d0);  // (its barriers publish the tiles and S_[c])
#endif
        const float* GL = G + (l - 1) * WT;

        // 2. Tensor cores: dA = scale · dO Vᵀ; dq⁽ⁱⁿᵗᵉʳ⁾ = scale · (dO S_[c]ᵀ) ⊙ e^{Γ} (S high + low: two products).
        chunk_dA(DA, DOe, Ve, a.scale, l);
        {
            float acc[1][2][4] = {};
            warp_mma<1, 2, false, false, DV>(acc, DOe, LDV, r0, Sh, LDV, c0, DV);
            warp_mma<1, 2, false, false, DV>(acc, DOe, LDV, r0, Sl, LDV, c0, DV);
            for_acc<1, 2>(acc, r0, c0, [&](int i, int d, float x) {
                DQ[i * WT + d] = i < l ? a.scale * x * decay_exp(G[i * WT + d]) : 0.f;
            });
        }
        __syncthreads();

#if KEY_GATE == GATE_PER_KEY
        elem_t* const KH = Ke;  // K̂'s high part (over K)
        if (chunk_factorised<WT>(G, l)) {
            // 3f. dA and K̂ = K ⊙ e^{Γ_L − Γ} as high (over K) + low elements, the whole chunk.
            split_dA<C, C>(DA, Dh, Dl, LDA);
            decayed_operand<WT, true>(Ke, LDT, G, l - 1, 0, C, Ke, Kl, LDT, 1.f);
            __syncthreads();
            // 4f. Tensor cores: dq_i += e^{Γ_i − Γ_L} ⊙ Σ_{j≤i} dA_ij K̂_j.
            intra_fact<true>(Dh, Dl, Ke, Kl, G, DQ, l, 1.f);
        } else {
            // 3. dq += Σ_{j≤i} dA_ij k_j ⊙ e^{Γ_i − Γ_j} inside the diagonal blocks (exact, CUDA cores); the
            //    off-diagonal block's operands dA and K̃ = K ⊙ e^{Γ_HB−1 − Γ} (rows < HB) as high + low elements.
            alphas_of<WT>(G, AL);
            __syncthreads();
            pairs_down([&](int j, int d) { return to_f32(Ke[j * LDT + d]); }, AL, DA, DQ, l);
            split_dA<HB, HB>(DA + HB * C, Dh, Dl, LDH);
            decayed_operand<WT, true>(Ke, LDT, G, HB - 1, 0, HB, Xh, Xl, LDT, 1.f);
            __syncthreads();
            // 4. Tensor cores: dq_i += e^{Γ_i − Γ_HB−1} ⊙ Σ_{j<HB} dA_ij K̃_j for i ≥ HB (a warp an 8-column tile);
            //    K̂ = K ⊙ e^{Γ_L − Γ} as high (over K) + low elements.
            offdiag_add<true>(Dh, Dl, Xh, Xl, G, DQ, l);
            decayed_operand<WT, true>(Ke, LDT, G, l - 1, 0, C, Ke, Kl, LDT, 1.f);
        }
#else
        // 3s. A scalar gate: dA ⊙ D as high + low elements; K̂ = K ⊙ e^{Γ_L − Γ} high + low into [C][LDT] over Xh, Xl
        //     and Kl (K stays: the product below reads it).
        elem_t* const KH = Xh;
        decay_dA(DA, G, WT, Dh, Dl);
        decayed_operand<WT, true>(Ke, LDT, G, l - 1, 0, C, KH, Kl, LDT, 1.f);
        __syncthreads();
        // 4s. Tensor cores: dq += (dA ⊙ D) K.
        intra_decayed<true>(Dh, Dl, Ke, DQ, l);
#endif
        __syncthreads();

        // 5. The outputs dq and q ⊙ dq (f32, for the gate); S_[c+1] = diag(e^{Γ_L}) S_[c] + K̂ᵀ V (K̂ high + low).
        const i64 ob = (row0 * a.h + head) * (i64)a.dk + d0;  // (row0, d0) of the [tokens, H, d_k] outputs
        const int rs = a.h * a.dk;
#pragma unroll
        for (int u = 0; u < C * WT / NT; ++u) {
            const int idx = threadIdx.x + u * NT, i = idx / WT, d = idx % WT;
            if (i < l && d0 + d < a.dk) {
                const i64 off = ob + (i * rs + d);
                const float dq = DQ[idx];
                a.dq_out[off] = to_elem(dq);
                a.states[off] = to_f32(Qe[i * LDT + d]) * dq;
            }
        }
        scale_rows<1, KS_NI>(S, sm0, [&](int r) { return decay_exp(GL[r]); });
        warp_mma<1, KS_NI, true, true, C>(S, KH, LDT, sm0, Ve, LDV, sn0, C);
        warp_mma<1, KS_NI, true, true, C>(S, Kl, LDT, sm0, Ve, LDV, sn0, C);
        __syncthreads();  // (the tiles are rewritten by the next chunk)
    }

    // Z_g = rowsum(dS ⊙ S) at the segment's end over the tile's rows (Z_N = rowsum(dht ⊙ S_T) for a sequence's last):
    // the gate's boundary term, read by the dk walk (and gla_bwd_gate).
    float z[2] = {0.f, 0.f};
    if (w.dS1)
        for_acc<1, KS_NI>(S, sm0, sn0, [&](int r, int e, float x) {
            if (d0 + r < a.dk && e < a.dv) z[((r - sm0) >> 3) & 1] += w.dS1[(i64)(d0 + r) * a.dv + e] * x;
        });
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        z[h] += __shfl_xor_sync(0xffffffffu, z[h], 1);
        z[h] += __shfl_xor_sync(0xffffffffu, z[h], 2);
        if ((threadIdx.x & 3) == 0) ZS[(warp / 4) * WT + acc_row(sm0, 0, 2 * h)] = z[h];
    }
    __syncthreads();
    for (int d = threadIdx.x; d < WT; d += NT)
        if (d0 + d < a.dk) a.dstates[((i64)w.g * a.h + head) * a.dk + d0 + d] = ZS[d] + ZS[WT + d];
}

// ---- gla_bwd_walk_dk: dk, dh0 and the gate's gradients (reverse over the chunks) ----
extern "C" __global__ void __launch_bounds__(NT, WALK_CTAS_K) gla_bwd_walk_dk(const __grid_constant__ BwdArgs a) {
    extern __shared__ __align__(16) float sm[];
    float* G = sm;                                         // [C][WT]  Γ (later the logits)
    float* AL = G + C * WT;                                // [C][WT]  α
    float* DKs = AL + C * WT;                              // [C][WT]  dk, then P = q ⊙ dq − k ⊙ dk, then d log α
    float* DA = DKs + C * WT;                              // [C][C]   dA
    float* ZR = DA + C * C;                                // [2][WT]  Z_N + Σ of P over the later chunks (by parity)
    float* TS = ZR + 2 * WT;                               // [4][WT]  P's sums over 8-row groups
    float* QD = TS + 4 * WT;                               // [C][WT]  q ⊙ dq (the dq walk's), copied with the tiles
    elem_t* DOe = reinterpret_cast<elem_t*>(QD + C * WT);  // [C][LDV] dO
    elem_t* Ve = DOe + C * LDV;                            // [C][LDV] V
    elem_t* Qe = Ve + C * LDV;                             // [C][LDT] q, then Q̂'s high part
    elem_t* Ql = Qe + C * LDT;                             // [C][LDT] Q̂'s low part
    elem_t* Ke = Ql + C * LDT;                             // [C][LDT] k
    elem_t* Sh = Ke + C * LDT;                             // [WT][LDV] dS_[c+1], high part
    elem_t* Sl = Sh + WT * LDV;                            // [WT][LDV] low part
    elem_t* Xh = Sl + WT * LDV;                            // [HB][LDT] Q̃ = Q ⊙ e^{Γ − Γ_HB−1} (rows ≥ HB), high part
    elem_t* Xl = Xh + HB * LDT;                            // [HB][LDT] low part
    elem_t* Dh = Xl + HB * LDT;                            // [HB][LDH] dA's off-diagonal block (or [C][LDA] all of dA), high part
    elem_t* Dl = Dh + C * LDA;                             // the same, low part
    const int d0 = blockIdx.x * WT, head = blockIdx.y, warp = threadIdx.x / 32;
    const WalkAt w = walk_at(a);
    const i64 bos = w.bos, len = w.len;
    const int sm0 = 16 * (warp % 4), sn0 = (warp / 4) * (DV / 2);
    const int r0 = 16 * (warp / 4), c0 = 16 * (warp % 4);
    const bool vec = walk_vec(a);
    const float* p = a.params ? a.params + (i64)head * NPARAM : nullptr;
    float dp[NPARAM > 0 ? NPARAM : 1], t[NPARAM > 0 ? NPARAM : 1];
    for (int u = 0; u < NPARAM; ++u) dp[u] = 0.f;
    float S[1][KS_NI][4];
    state_load<1, KS_NI>(S, w.dS1, a, sm0, sn0, d0, 0);
    for (int d = threadIdx.x; d < WT; d += NT) ZR[d] = d0 + d < a.dk ? a.dstates[((i64)w.g * a.h + head) * a.dk + d0 + d] : 0.f;
    int zp = 0;  // the ZR buffer holding Z for this chunk

#pragma unroll 1
    for (int c = w.ce - 1; c >= w.cb; --c) {
        const int i0 = c * C, l = (int)min((i64)C, len - i0);
        const i64 row0 = bos + i0;
        // 1. Tiles and q ⊙ dq (read in step 5: a load there would wait on L2 once an element), dS_[c+1] as high + low
        //    elements, Γ and α.
#if KEY_GATE == GATE_PER_KEY
        walk_f32<WT>(G, a.gamma, a, row0, head, l, d0, vec);  // (gla_bwd_gamma's Γ)
#endif
        key_walk_tiles(a, DOe, Ve, Qe, Ke, row0, head, l, d0, vec);
        walk_f32<WT>(QD, a.states, a, row0, head, l, d0, vec && ((unsigned long long)a.states & 15) == 0);
        if (c > w.cb) {  // the next chunk's (c − 1, a whole one) inputs into L2
            const i64 r1 = row0 - C;
            walk_prefetch<DV>(a.d_o, a.dv, 0, a, r1, head, C);
            walk_prefetch<DV>(a.v, a.dv, 0, a, r1, head, C);
            walk_prefetch<WT>(a.q, a.dk, d0, a, r1, head, C);
            walk_prefetch<WT>(a.k, a.dk, d0, a, r1, head, C);
            walk_prefetch<WT>(a.states, a.dk, d0, a, r1, head, C);
            if (KEY_GATE == GATE_PER_KEY) {
                walk_prefetch<WT>(a.gamma, a.dk, d0, a, r1, head, C);
                walk_prefetch<WT>(a.g, a.dk, d0, a, r1, head, C);
            }
        }
        publish_split<1, KS_NI>(S, sm0, sn0, Sh, Sl, LDV);
        if (vec) cp_async_wait<0>();
#if KEY_GATE == GATE_PER_KEY
        gamma_tail<WT>(G, l);
#else
        gamma_cols<WT>(a, G, AL, bos, head, i0, l, d0);  // (logits loaded here: early, they spilled 4–24 B)
#endif
        const float *GL = G + (l - 1) * WT, *G0 = G;

        // 2. Tensor cores: dA = scale · dO Vᵀ; dk⁽ⁱⁿᵗᵉʳ⁾ = (V dS_[c+1]ᵀ) ⊙ e^{Γ_L − Γ}.
        chunk_dA(DA, DOe, Ve, a.scale, l);
        {
            float acc[1][2][4] = {};
            warp_mma<1, 2, false, false, DV>(acc, Ve, LDV, r0, Sh, LDV, c0, DV);
            warp_mma<1, 2, false, false, DV>(acc, Ve, LDV, r0, Sl, LDV, c0, DV);
            // (IEEE expf here: with decay_exp ptxas spilled 88 B in hgrn2's dk walk at d = 128.)
            for_acc<1, 2>(acc, r0, c0, [&](int j, int d, float x) {
                DKs[j * WT + d] = j < l ? x * gla_exp(GL[d] - G[j * WT + d]) : 0.f;
            });
        }
        __syncthreads();

#if KEY_GATE == GATE_PER_KEY
        elem_t* const QH = Qe;  // Q̂'s high part (over Q)
        if (chunk_factorised<WT>(G, l)) {
            // 3f. dA and Q̂ = scale · Q ⊙ e^{Γ − Γ_0} as high (over Q) + low elements, the whole chunk.
            split_dA<C, C>(DA, Dh, Dl, LDA);
            decayed_operand<WT, false>(Qe, LDT, G, 0, 0, C, Qe, Ql, LDT, a.scale);
            __syncthreads();
            // 4f. Tensor cores: dk_j += e^{Γ_0 − Γ_j} ⊙ Σ_{i≥j} dA_ij Q̂_i / scale.
            intra_fact<false>(Dh, Dl, Qe, Ql, G, DKs, l, 1.f / a.scale);
        } else {
            // 3. dk += Σ_{i≥j} dA_ij q_i ⊙ e^{Γ_i − Γ_j} inside the diagonal blocks (exact, CUDA cores); the
            //    off-diagonal block's operands dA and Q̃ = Q ⊙ e^{Γ − Γ_HB−1} (rows ≥ HB) as high + low elements.
            alphas_of<WT>(G, AL);
            __syncthreads();
            pairs_up([&](int i, int d) { return to_f32(Qe[i * LDT + d]); }, AL, DA, DKs, l);
            split_dA<HB, HB>(DA + HB * C, Dh, Dl, LDH);
            decayed_operand<WT, false>(Qe, LDT, G, HB - 1, HB, HB, Xh, Xl, LDT, 1.f);
            __syncthreads();
            // 4. Tensor cores: dk_j += e^{Γ_HB−1 − Γ_j} ⊙ Σ_{i≥HB} dA_ij Q̃_i for j < HB (a warp an 8-column tile);
            //    Q̂ = scale · Q ⊙ e^{Γ − Γ_0} as high (over Q) + low elements.
            offdiag_add<false>(Dh, Dl, Xh, Xl, G, DKs, l);
            decayed_operand<WT, false>(Qe, LDT, G, 0, 0, C, Qe, Ql, LDT, a.scale);
        }
#else
        // 3s. A scalar gate: dA ⊙ D as high + low elements; Q̂ = scale · Q ⊙ e^{Γ − Γ_0} high + low into [C][LDT] over
        //     Xh, Xl and Ql (Q stays: the product below reads it).
        elem_t* const QH = Xh;
        decay_dA(DA, G, WT, Dh, Dl);
        decayed_operand<WT, false>(Qe, LDT, G, 0, 0, C, QH, Ql, LDT, a.scale);
        __syncthreads();
        // 4s. Tensor cores: dk += (dA ⊙ D)ᵀ Q.
        intra_decayed<false>(Dh, Dl, Qe, DKs, l);
#endif
        __syncthreads();

        // 5. The output dk and P = q ⊙ dq − k ⊙ dk; dS_[c] = diag(e^{Γ_0}) (diag(e^{Γ_L − Γ_0}) dS_[c+1] + Q̂ᵀ dO)
        //    (Q̂ high + low: two products).
        //    A thread owns column pd of rows 8·pg … 8·pg + 7 here and in step 6, so a per-key gate's suffix sums read
        //    back only its own P (no barrier between); a scalar gate's row sums read every thread's (one barrier).
        const i64 ob = (row0 * a.h + head) * (i64)a.dk + d0;  // (row0, d0) of the [tokens, H, d_k] tensors
        const int rs = a.h * a.dk;
        const int pd = threadIdx.x % WT, pg = threadIdx.x / WT;
        static_assert(NT == 4 * WT && C == 32, "a thread's 8 rows of one column");
#pragma unroll 1
        for (int u = 0; u < 8; ++u) {
            const int i = 8 * pg + u, idx = i * WT + pd;
            float pv = 0.f;
            if (i < l && d0 + pd < a.dk) {
                const i64 off = ob + (i * rs + pd);
                const float dk = DKs[idx];
                a.dk_out[off] = to_elem(dk);
                pv = QD[idx] - to_f32(Ke[i * LDT + pd]) * dk;
            }
            DKs[idx] = pv;
        }
        scale_rows<1, KS_NI>(S, sm0, [&](int r) { return decay_exp(GL[r] - G0[r]); });
        warp_mma<1, KS_NI, true, true, C>(S, QH, LDT, sm0, DOe, LDV, sn0, C);
        warp_mma<1, KS_NI, true, true, C>(S, Ql, LDT, sm0, DOe, LDV, sn0, C);
        scale_rows<1, KS_NI>(S, sm0, [&](int r) { return decay_exp(G0[r]); });
#if KEY_GATE != GATE_PER_KEY
        __syncthreads();  // (P complete)
#endif

        // 6. The gate: d log α_t = Z_N + Σ_{s ≥ t} P_s.
#if KEY_GATE == GATE_PER_KEY
        {
            // Suffix sums of P down each column: this thread's 8 rows (its own P from step 5), then the later groups'
            // totals and Z (ZR: two buffers by chunk parity, so group 0 updates one while the others read the other).
            const int d = pd, grp = pg;
            const i64 gb = (row0 * a.h + head) * (i64)a.dk + d0;  // (row0, d0) of the logits and their gradient
            const int grs = a.h * a.dk;
            elem_t xs[8];
            float pv[8];
#pragma unroll
            for (int u = 0; u < 8; ++u) {
                const int i = 8 * grp + u;
                xs[u] = i < l && d0 + d < a.dk ? a.g[gb + (i * grs + d)] : to_elem(0.f);
                pv[u] = DKs[i * WT + d];
            }
#pragma unroll
            for (int u = 6; u >= 0; --u) pv[u] += pv[u + 1];
            TS[grp * WT + d] = pv[0];
            __syncthreads();  // (every thread reaches it: NT = 4 · WT; Γ's last reads, step 5's, are done)
            float later = ZR[zp * WT + d];
            for (int g2 = grp + 1; g2 < 4; ++g2) later += TS[g2 * WT + d];
            if (grp == 0) ZR[(zp ^ 1) * WT + d] = later + pv[0];
            zp ^= 1;
            // d log α_t = Z + Σ_{s ≥ t} P_s through the gate's derivative, a thread's own 8 elements: at once where the
            // gate has no parameters; else one at a time from shared memory (unrolled, hgrn2's spilled 68 B).
            auto grad = [&](int u, float r2, float x) {
                const int i = 8 * grp + u;
                if (i < l && d0 + d < a.dk) {
                    a.dg[gb + (i * grs + d)] = to_elem(r2 * gate_grads(x, p, t));
                    if (NPARAM > 0)
                        for (int k = 0; k < NPARAM; ++k) dp[k] = fmaf(r2, t[k], dp[k]);
                }
            };
            if constexpr (NPARAM == 0) {
#pragma unroll
                for (int u = 0; u < 8; ++u) grad(u, pv[u] + later, to_f32(xs[u]));
            } else {
#pragma unroll
                for (int u = 0; u < 8; ++u) {  // (own elements: Γ over which the logits go is spent, see above)
                    G[(8 * grp + u) * WT + d] = to_f32(xs[u]);
                    DKs[(8 * grp + u) * WT + d] = pv[u];
                }
#pragma unroll 1
                for (int u = 0; u < 8; ++u) grad(u, DKs[(8 * grp + u) * WT + d] + later, G[(8 * grp + u) * WT + d]);
            }
        }
#else
        // A scalar gate: the row sums of P over the tile's columns (a warp 4 rows), for gla_bwd_gate.
        for (int i = warp * 4; i < warp * 4 + 4; ++i) {
            float s = DKs[i * WT + (threadIdx.x & 31)] + DKs[i * WT + 32 + (threadIdx.x & 31)];
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
            if ((threadIdx.x & 31) == 0 && i < l) {
                const i64 tokens = a.cu_seqlens[a.n_seqs];  // (read here, not held through the loop)
                a.dstates[a.seg_offsets[a.n_seqs] * a.h * a.dk + ((i64)blockIdx.x * tokens + row0 + i) * a.h + head] = s;
            }
        }
        (void)ZR, (void)TS, (void)p, (void)t, (void)zp, (void)pd, (void)pg;
#endif
        __syncthreads();  // (the tiles are rewritten by the next chunk)
    }
    if (a.dh0) {  // dh0 = dS_[0], by a sequence's first segment (where it is found again: fewer registers live above)
        const WalkAt w0 = walk_at(a);
        if (w0.cb == 0) state_store<1, KS_NI>(S, a.dh0 + w0.sbase, a, sm0, sn0, d0, 0);
    }
#if KEY_GATE == GATE_PER_KEY
    add_dparams(a, dp, head);
#endif
    (void)dp;
}

// ---- gla_bwd_walk_dv: dv (reverse over the chunks) ----
extern "C" __global__ void __launch_bounds__(NT, WALK_CTAS_V) gla_bwd_walk_dv(const __grid_constant__ BwdArgs a) {
    extern __shared__ __align__(16) float sm[];
    float* G = sm;                                         // [C][DK]  Γ
    float* AL = G + C * DK;                                // [C][DK]  α
    elem_t* Qe = reinterpret_cast<elem_t*>(AL + C * DK);   // [C][LDK] q, then Q̂'s high part
    elem_t* Ql = Qe + C * LDK;                             // [C][LDK] Q̂'s low part
    elem_t* Ke = Ql + C * LDK;                             // [C][LDK] k, then K̂
    elem_t* DOe = Ke + C * LDK;                            // [C][LDT] dO (the tile's columns)
    elem_t* Ah = DOe + C * LDT;                            // [C][LDA] scale · A, high part
    elem_t* Al = Ah + C * LDA;                             // [C][LDA] low part
    elem_t* Sh = Al + C * LDA;                             // [DK][LDT] dS_[c+1], high part (first, scratch: Q̃, K̃)
    elem_t* Sl = Sh + DK * LDT;                            // [DK][LDT] low part
    // Scratch before dS_[c+1] is published: the off-diagonal block's operands, high + low [HB][LDK] each, and its
    // products' four k-quarter partials [4][HB][HB] f32 over α (spent by then).
    // A factorised chunk's scratch there instead: K' = K ⊙ e^{Γ_0 − Γ}, high + low [C][LDK].
    elem_t *Xqh = Sh, *Xql = Xqh + HB * LDK, *Xkh = Xql + HB * LDK, *Xkl = Xkh + HB * LDK;
    elem_t *Kfh = Sh, *Kfl = Sh + C * LDK;
    float* PA = AL;
    static_assert(4 * HB * LDK <= 2 * DK * LDT && 2 * C * LDK <= 2 * DK * LDT && 4 * HB * HB <= C * DK, "the scratch fits");
    const int e0 = blockIdx.x * WT, head = blockIdx.y, warp = threadIdx.x / 32;
    const WalkAt w = walk_at(a);
    const i64 bos = w.bos, len = w.len;
    const int sm0 = (warp / VS_WPG) * 16 * VS_MI, sn0 = (warp % VS_WPG) * VS_NI * 8;  // this warp's block of dS [DK][WT]
    const int r0 = 16 * (warp / 4), c0 = 16 * (warp % 4);                            // and of dv [C][WT]
    const bool vec = walk_vec(a);
    float S[VS_MI][VS_NI][4];
    state_load<VS_MI, VS_NI>(S, w.dS1, a, sm0, sn0, 0, e0);

#pragma unroll 1
    for (int c = w.ce - 1; c >= w.cb; --c) {
        const int i0 = c * C, l = (int)min((i64)C, len - i0);
        const i64 row0 = bos + i0;
        // 1. Logits (loaded first: they overlap the copies), tiles (q, k whole; dO the tile's columns), Γ and α.
#if KEY_GATE == GATE_PER_KEY
        walk_f32<DK>(G, a.gamma, a, row0, head, l, 0, vec);  // (gla_bwd_gamma's Γ)
#else
        const ChunkLogits<DK> lg = chunk_logits<DK>(a, bos, head, i0, l, 0);
#endif
        walk_tile<DK>(Qe, LDK, a.q, a.dk, 0, a, row0, head, l, vec);
        walk_tile<DK>(Ke, LDK, a.k, a.dk, 0, a, row0, head, l, vec);
        walk_tile<WT>(DOe, LDT, a.d_o, a.dv, e0, a, row0, head, l, vec);
        if (vec) cp_async_commit();
        if (c > w.cb) {  // the next chunk's (c − 1) inputs into L2
            const i64 r1 = row0 - C;
            walk_prefetch<DK>(a.q, a.dk, 0, a, r1, head, C);
            walk_prefetch<DK>(a.k, a.dk, 0, a, r1, head, C);
            walk_prefetch<WT>(a.d_o, a.dv, e0, a, r1, head, C);
            if (KEY_GATE == GATE_PER_KEY) walk_prefetch<DK>(a.gamma, a.dk, 0, a, r1, head, C);
        }
        if (vec) cp_async_wait<0>();
#if KEY_GATE == GATE_PER_KEY
        gamma_tail<DK>(G, l);
#else
        gamma_cols<DK>(a, lg, G, AL, bos, head, i0, l, 0);
#endif
        const float *GL = G + (l - 1) * DK, *G0 = G;

        if (chunk_factorised<DK>(G, l)) {
            // 2f. Q̂ = scale · Q ⊙ e^{Γ − Γ_0} as high (over Q) + low elements, K' = K ⊙ e^{Γ_0 − Γ} likewise.
            decayed_operand<DK, false>(Qe, LDK, G, 0, 0, C, Qe, Ql, LDK, a.scale);
            decayed_operand<DK, true>(Ke, LDK, G, 0, 0, C, Kfh, Kfl, LDK, 1.f);
            __syncthreads();
            // 3f. Tensor cores: scale · A = Q̂ K'ᵀ where j ≤ i < l (three products), a warp a 16 × 8 tile, as high + low
            //     elements; K̂ = K ⊙ e^{Γ_L − Γ} (over K).
            {
                const int ra = 16 * (warp / 4), ca = 8 * (warp % 4);
                float acc[1][1][4] = {};
                warp_mma<1, 1, false, false, DK>(acc, Qe, LDK, ra, Kfh, LDK, ca, DK);
                warp_mma<1, 1, false, false, DK>(acc, Ql, LDK, ra, Kfh, LDK, ca, DK);
                warp_mma<1, 1, false, false, DK>(acc, Qe, LDK, ra, Kfl, LDK, ca, DK);
                for_acc<1, 1>(acc, ra, ca, [&](int i, int j, float x) {
                    const float y = j <= i && i < l ? x : 0.f;
                    const elem_t hy = to_elem(y);
                    Ah[i * LDA + j] = hy;
                    Al[i * LDA + j] = to_elem(y - to_f32(hy));
                });
            }
            for (int idx = threadIdx.x; idx < C * DK; idx += NT) {
                const int i = idx / DK, d = idx - i * DK;
                Ke[i * LDK + d] = to_elem(to_f32(Ke[i * LDK + d]) * decay_exp(GL[d] - G[idx]));
            }
            __syncthreads();
            publish_split<VS_MI, VS_NI>(S, sm0, sn0, Sh, Sl, LDT);
            __syncthreads();
        } else {
        // 2. The exact scores scale · A of the diagonal blocks (CUDA cores); the off-diagonal block's operands
        //    Q̃ = Q ⊙ e^{Γ − Γ_HB−1} (rows ≥ HB) and K̃ = K ⊙ e^{Γ_HB−1 − Γ} (rows < HB) as high + low elements.
#if KEY_GATE == GATE_PER_KEY
        alphas_of<DK>(G, AL);
        __syncthreads();
#endif
        pair_scores(Qe, Ke, AL, Ah, Al, a.scale, l);
        decayed_operand<DK, false>(Qe, LDK, G, HB - 1, HB, HB, Xqh, Xql, LDK, 1.f);
        decayed_operand<DK, true>(Ke, LDK, G, HB - 1, 0, HB, Xkh, Xkl, LDK, 1.f);
        __syncthreads();

        // 3. Tensor cores: A_ij = Σ_d Q̃_id K̃_jd for i ≥ HB > j, a warp an 8-column tile × a quarter of d_k (three
        //    products: high · high, low · high, high · low); K̂ = K ⊙ e^{Γ_L − Γ} (over K) and
        //    Q̂ = scale · Q ⊙ e^{Γ − Γ_0} as high (over Q) + low elements.
        {
            constexpr int KQ = DK / 4;
            const int nt = warp & 1, kq = (warp >> 1) * KQ;
            float acc[1][1][4] = {};
            warp_mma<1, 1, false, false, KQ>(acc, Xqh + kq, LDK, 0, Xkh + kq, LDK, 8 * nt, KQ);
            warp_mma<1, 1, false, false, KQ>(acc, Xql + kq, LDK, 0, Xkh + kq, LDK, 8 * nt, KQ);
            warp_mma<1, 1, false, false, KQ>(acc, Xqh + kq, LDK, 0, Xkl + kq, LDK, 8 * nt, KQ);
            for_acc<1, 1>(acc, 0, 8 * nt, [&](int r, int jj, float x) { PA[((warp >> 1) * HB + r) * HB + jj] = x; });
        }
        for (int idx = threadIdx.x; idx < C * DK; idx += NT) {  // (K̂ one element a value: it meets dS high + low)
            const int i = idx / DK, d = idx - i * DK;
            Ke[i * LDK + d] = to_elem(to_f32(Ke[i * LDK + d]) * decay_exp(GL[d] - G[idx]));
        }
        decayed_operand<DK, false>(Qe, LDK, G, 0, 0, C, Qe, Ql, LDK, a.scale);
        __syncthreads();

        // 4. dS_[c+1] as high + low elements (over the scratch); the off-diagonal block of scale · A from the partials.
        publish_split<VS_MI, VS_NI>(S, sm0, sn0, Sh, Sl, LDT);
        for (int idx = threadIdx.x; idx < HB * HB; idx += NT) {
            const int r = idx / HB, jj = idx - r * HB;
            const float x = a.scale * (PA[idx] + PA[HB * HB + idx] + PA[2 * HB * HB + idx] + PA[3 * HB * HB + idx]);
            const elem_t hx = to_elem(x);
            Ah[(HB + r) * LDA + jj] = hx;
            Al[(HB + r) * LDA + jj] = to_elem(x - to_f32(hx));
        }
        __syncthreads();
        }

        // 4. Tensor cores: dv = K̂ dS_[c+1] (dS high + low) + (scale · A)ᵀ dO (A high + low).
        {
            float acc[1][2][4] = {};
            warp_mma<1, 2, false, true, DK>(acc, Ke, LDK, r0, Sh, LDT, c0, DK);
            warp_mma<1, 2, false, true, DK>(acc, Ke, LDK, r0, Sl, LDT, c0, DK);
            warp_mma<1, 2, true, true, C>(acc, Ah, LDA, r0, DOe, LDT, c0, C);
            warp_mma<1, 2, true, true, C>(acc, Al, LDA, r0, DOe, LDT, c0, C);
            const i64 ob = (row0 * a.h + head) * (i64)a.dv + e0;  // (row0, e0) of dv
            const int rs = a.h * a.dv;
            for_acc<1, 2>(acc, r0, c0, [&](int j, int e, float x) {
                if (j < l && e0 + e < a.dv) a.dv_out[ob + (j * rs + e)] = to_elem(x);
            });
        }

        // 5. dS_[c] = diag(e^{Γ_0}) (diag(e^{Γ_L − Γ_0}) dS_[c+1] + Q̂ᵀ dO) (Q̂ high + low: two products).
        scale_rows<VS_MI, VS_NI>(S, sm0, [&](int r) { return decay_exp(GL[r] - G0[r]); });
        warp_mma<VS_MI, VS_NI, true, true, C>(S, Qe, LDK, sm0, DOe, LDT, sn0, C);
        warp_mma<VS_MI, VS_NI, true, true, C>(S, Ql, LDK, sm0, DOe, LDT, sn0, C);
        scale_rows<VS_MI, VS_NI>(S, sm0, [&](int r) { return decay_exp(G0[r]); });
        __syncthreads();  // (the tiles are rewritten by the next chunk)
    }
}

// ---- gla_bwd_gate: a scalar gate's d logits and d params ----
// d log α_t = Z + Σ_{s ≥ t} w_s over the sequence, w_s the dk walk's row sums over its tiles, Z = Σ_d Z_N. A CTA per
// (head, sequence); each thread a run of tokens (its total, a suffix scan of the totals, then its run in reverse).
extern "C" __global__ void __launch_bounds__(NT) gla_bwd_gate(const __grid_constant__ BwdArgs a) {
#if KEY_GATE == GATE_PER_KEY
    (void)a;  // (a per-key gate finishes in gla_bwd_walk_dk, or in its dk pass's store: this grid is empty)
#else
    extern __shared__ __align__(16) float sm[];
    float* T = sm;  // [NT] the runs' totals
    const int head = blockIdx.x, n = blockIdx.y, tiles = (a.dk + WT - 1) / WT;
    const i64 bos = a.cu_seqlens[n], len = a.cu_seqlens[n + 1] - bos, tokens = a.cu_seqlens[a.n_seqs];
    const float* W = a.dstates + a.seg_offsets[a.n_seqs] * a.h * a.dk;
    const float* p = a.params ? a.params + (i64)head * NPARAM : nullptr;
    auto w = [&](i64 s) {
        float x = 0.f;
        for (int u = 0; u < tiles; ++u) x += W[((i64)u * tokens + bos + s) * a.h + head];
        return x;
    };
    const i64 per = (len + NT - 1) / NT, s0 = min(len, (i64)threadIdx.x * per), s1 = min(len, s0 + per);
    float tot = 0.f;
    for (i64 s = s0; s < s1; ++s) tot += w(s);
    T[threadIdx.x] = tot;
    __syncthreads();
    if (threadIdx.x == 0) {
        float z = 0.f;
        const i64 g = a.seg_offsets[n + 1] - 1;  // the sequence's last segment: its Z is Z_N
        for (int d = 0; d < a.dk; ++d) z += a.dstates[(g * a.h + head) * a.dk + d];
        for (int u = NT - 1; u >= 0; --u) {  // T[u] ← Z + the totals of the later runs
            const float x = T[u];
            T[u] = z;
            z += x;
        }
    }
    __syncthreads();
    float dp[NPARAM > 0 ? NPARAM : 1], t[NPARAM > 0 ? NPARAM : 1];
    for (int u = 0; u < NPARAM; ++u) dp[u] = 0.f;
    float r = T[threadIdx.x], sum = 0.f;
    for (i64 s = s1 - 1; s >= s0; --s) {
        r += w(s);
        sum += r;
#if KEY_GATE == GATE_PER_HEAD
        const i64 off = (bos + s) * a.h + head;
        const float x = to_f32(a.g[off]);
        a.dg[off] = to_elem(r * gate_grads(x, p, t));
        if (NPARAM > 0)
            for (int u = 0; u < NPARAM; ++u) dp[u] = fmaf(r, t[u], dp[u]);
#endif
    }
#if KEY_GATE == GATE_FIXED
    if (NPARAM > 0) {
        gate_dp((float)head, p, t);  // a fixed gate's input is the head index
        for (int u = 0; u < NPARAM; ++u) dp[u] = sum * t[u];
    }
#endif
    (void)sum;
    add_dparams(a, dp, head);
    (void)t;
#endif
}
