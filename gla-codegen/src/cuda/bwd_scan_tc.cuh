// The backward's two state scans on tensor cores (bf16 / f16, key gates, d_k and d_v ≤ 256): a CTA per (value tile
// of BVS = 64 columns, head, sequence) walks the chunks in order and keeps its [DK][BVS] slice of the state in mma.sync
// accumulators (f32), stored to the workspace at every chunk boundary; each chunk's inputs are loaded into registers
// while the previous chunk's products run (scan_fetch), so the walk does not wait on memory a step:
//   gla_bwd_states:   S ← diag(e^{Γ_L}) S + K̂ᵀ V,          K̂ = K ⊙ e^{Γ_L − Γ}
//   gla_bwd_dstates:  dS ← diag(e^{Γ_L}) dS + Q̃ᵀ dO,       Q̃ = scale · Q ⊙ e^{Γ}     (dh0 = dS_[0]),
//                     as dS ← diag(e^{Γ_0}) (diag(e^{Γ_L − Γ_0}) dS + Q̂ᵀ dO), Q̂ = scale · Q ⊙ e^{Γ − Γ_0}
// The decayed operand (K̂ or Q̃, every factor ≤ 1) enters as high + low element tiles (two products), so the state keeps
// f32-like accuracy; V and dO are the inputs themselves. Warps: the DK/16 row tiles of 16, each warp MI of them and
// NI column tiles of 8 (two warps a row tile where DK = 64).

constexpr int LDS = DK + 8, LDB = BVS + 8;                     // padded element rows (16-byte rows for ldmatrix)
constexpr int SCAN_MT = DK / 16;                               // row tiles of the state slice
constexpr int SCAN_WM = SCAN_MT >= NT / 32 ? SCAN_MT / (NT / 32) : 1;  // row tiles a warp
constexpr int SCAN_WN = SCAN_MT >= NT / 32 ? BVS / 8 : BVS / 8 / ((NT / 32) / SCAN_MT);  // column tiles a warp
static_assert(NT == 256 && BVS == 64 && DK % 64 == 0 && DK <= 256, "the scan's warp map");
constexpr int SCAN_CTAS = DK <= 128 ? 2 : 1;  // CTAs an SM (the accumulators: 32 a thread at d_k = 128, 64 at 256)

constexpr int NX = C * DK / (2 * NT), NY = C * BVS / (2 * NT);  // a thread's element pairs of a chunk's [C][DK], [C][BVS] tiles
static_assert(2 * NX * NT == C * DK && 2 * NY * NT == C * BVS && C <= NT, "whole tiles a thread");

// One chunk's inputs, held in registers a chunk ahead so that their loads overlap the current chunk's products:
// this thread's element pairs (2p, 2p + 1), p = threadIdx.x + u·NT, of the chunk's [C][DK] tiles (the decayed
// operand's input, k or q, and a per-key gate's logits) and of its [C][BVS] value tile (v or dO), two elements a
// register; a per-head gate's logit of row threadIdx.x.
struct ScanIn {
    unsigned x[NX], y[NY];
    unsigned g[KEY_GATE == GATE_PER_KEY ? NX : 1];
};
__device__ __forceinline__ float pair_f32(unsigned w, int half) { return to_f32((elem_t)(half ? w >> 16 : w & 0xffffu)); }

template <bool REVERSE>
__device__ __forceinline__ void scan_fetch(ScanIn& in, const BwdArgs& a, i64 row0, int head, int l, int e0) {
    static_assert((2 * NT) % DK == 0 && (2 * NT) % BVS == 0, "a thread keeps its columns from pair to pair");
    constexpr int RX = 2 * NT / DK, RY = 2 * NT / BVS;  // rows from one of a thread's pairs to the next
    const elem_t zero = to_elem(0.f);
    const int ix = 2 * threadIdx.x / DK, d = 2 * threadIdx.x % DK, iy = 2 * threadIdx.x / BVS, e = 2 * threadIdx.x % BVS;
    const i64 sx = (i64)RX * a.h * a.dk, sy = (i64)RY * a.h * a.dv;  // the pairs' strides (elements)
    const i64 ox = ((row0 + ix) * a.h + head) * (i64)a.dk + d, oy = ((row0 + iy) * a.h + head) * (i64)a.dv + e0 + e;
    const elem_t* xs = (REVERSE ? a.q : a.k) + ox;
    const elem_t* ys = (REVERSE ? a.d_o : a.v) + oy;
#if KEY_GATE == GATE_PER_KEY
    const elem_t* gs = a.g + ox;
#endif
#pragma unroll
    for (int u = 0; u < NX; ++u) {
        const bool ok0 = ix + u * RX < l && d < a.dk, ok1 = ix + u * RX < l && d + 1 < a.dk;
        in.x[u] = pair_bits(ok0 ? xs[u * sx] : zero, ok1 ? xs[u * sx + 1] : zero);
#if KEY_GATE == GATE_PER_KEY
        in.g[u] = pair_bits(ok0 ? gs[u * sx] : zero, ok1 ? gs[u * sx + 1] : zero);
#endif
    }
#if KEY_GATE == GATE_PER_HEAD
    in.g[0] = (int)threadIdx.x < l ? a.g[(row0 + threadIdx.x) * a.h + head] : zero;
#endif
#pragma unroll
    for (int u = 0; u < NY; ++u) {
        const bool ok = iy + u * RY < l;
        in.y[u] = pair_bits(ok && e0 + e < a.dv ? ys[u * sy] : zero, ok && e0 + e + 1 < a.dv ? ys[u * sy + 1] : zero);
    }
}

// Γ of a chunk's row i at key column d (natural log): per key G[i][d]; a scalar gate's row value sits in column 0.
__device__ __forceinline__ float gam(const float* G, int i, int d) { return KEY_GATE == GATE_PER_KEY ? G[i * DK + d] : G[i * DK]; }

// The chunk's tiles from the registers of scan_fetch: Γ into G (log α of every element, then the running sums down
// the columns), the decayed operand X ⊙ e^{E} as high + low element tiles [C][LDS] — K̂ = K ⊙ e^{Γ_L − Γ} (states) or
// Q̂ = scale · Q ⊙ e^{Γ − Γ_0} (their gradients; Q̃ = Q̂ ⊙ e^{Γ_0}, the factor e^{Γ_0} goes on the state), every
// exponent ≤ 0 and each tile's largest factor 1 (the last row of K̂, the first of Q̂), so that strong decays do not
// push the operand into f16's subnormals — and the value tile [C][LDB]. Zero past row l and the head dims. Ends on a
// barrier.
template <bool REVERSE>
__device__ __forceinline__ void scan_stage(const ScanIn& in, const BwdArgs& a, float* G, elem_t* Xh, elem_t* Xl, elem_t* Y,
                                           int head, int l) {
    const float* p = a.params ? a.params + (i64)head * NPARAM : nullptr;
#if KEY_GATE == GATE_PER_KEY
#pragma unroll
    for (int u = 0; u < NX; ++u)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int idx = 2 * (threadIdx.x + u * NT) + h, i = idx / DK, d = idx - i * DK;
            G[idx] = (i < l && d < a.dk) ? gate_log_alpha(pair_f32(in.g[u], h), p) : 0.f;
        }
    __syncthreads();
    column_sums<DK>(G);
#else
    if ((int)threadIdx.x < C) {
        const int i = threadIdx.x;
#if KEY_GATE == GATE_PER_HEAD
        G[i * DK] = i < l ? gate_log_alpha(pair_f32(in.g[0], 0), p) : 0.f;
#else
        G[i * DK] = i < l ? gate_log_alpha((float)head, p) : 0.f;  // a fixed gate's input is the head index
#endif
    }
    __syncthreads();
    column0_sums(G);
#endif
    __syncthreads();
    const float mul = REVERSE ? a.scale : 1.f;
#pragma unroll
    for (int u = 0; u < NX; ++u) {
        const int idx = 2 * (threadIdx.x + u * NT), i = idx / DK, d = idx - i * DK;
        float x[2];
#pragma unroll
        for (int h = 0; h < 2; ++h)
            x[h] = (i < l && d + h < a.dk)
                       ? mul * pair_f32(in.x[u], h) *
                             gla_exp(REVERSE ? gam(G, i, d + h) - gam(G, 0, d + h) : gam(G, l - 1, d + h) - gam(G, i, d + h))
                       : 0.f;
        split_pair(x[0], x[1], *reinterpret_cast<unsigned*>(Xh + i * LDS + d), *reinterpret_cast<unsigned*>(Xl + i * LDS + d));
    }
#pragma unroll
    for (int u = 0; u < NY; ++u) {
        const int idx = 2 * (threadIdx.x + u * NT), i = idx / BVS, e = idx - i * BVS;
        *reinterpret_cast<unsigned*>(Y + i * LDB + e) = in.y[u];
    }
    __syncthreads();
}

// S_[c] of every chunk of one (sequence, head, value tile of BVS columns), forward (REVERSE = false), or dS_[c] in
// reverse (REVERSE = true; dh0 = dS_[0]): the chunk form's scans (grid z = sequence; each boundary's state stored).
// SEGMENT (the walk form's first pass; grid z = segment): the chunks of one segment of a.seg_chunks chunks from a zero
// state, only the last one stored — ΔS_σ (forward) or ΔdS_σ (reverse, at the segment's start) into slot σ of
// a.seg_states / a.seg_dstates — and, by the forward scan's first value tile, the segment's Σ log α a key column
// (a.seg_gamma), for gla_bwd_seg_combine.
template <bool REVERSE, bool SEGMENT>
__device__ __forceinline__ void state_scan(const BwdArgs& a) {
    extern __shared__ __align__(16) float sm[];
    float* G = sm;                                     // [C][DK] Γ
    elem_t* Xh = reinterpret_cast<elem_t*>(G + C * DK); // [C][LDS] K̂ (or Q̃), high part
    elem_t* Xl = Xh + C * LDS;                         // [C][LDS] low part
    elem_t* Y = Xl + C * LDS;                          // [C][LDB] V (or dO), this tile's columns
    const int e0 = blockIdx.x * BVS, head = blockIdx.y, warp = threadIdx.x / 32;
    const int n = SEGMENT ? a.seg_index[2 * blockIdx.z] : (int)blockIdx.z;
    const i64 bos = a.cu_seqlens[n], len = a.cu_seqlens[n + 1] - bos, slot0 = a.chunk_offsets[n] + n;
    const int nc = (int)((len + C - 1) / C);
    const int cb = SEGMENT ? a.seg_index[2 * blockIdx.z + 1] * a.seg_chunks : 0;  // this scan's chunks [cb, ce)
    const int ce = SEGMENT ? min(nc, cb + a.seg_chunks) : nc;
    auto rows = [&](int c) { return (int)min((i64)C, len - (i64)c * C); };
    const int m0 = (warp % SCAN_MT) * SCAN_WM * 16, n0 = (warp / SCAN_MT) * SCAN_WN * 8;  // this warp's block
    const i64 sbase = (((i64)n * a.h + head) * a.dk) * a.dv;
    float* const ws = REVERSE ? a.dstates : a.states;
    const float* init = SEGMENT ? nullptr : REVERSE ? a.dht : a.h0;
    float gseg = 0.f;  // (SEGMENT, forward: Σ_c Γ_L of key column threadIdx.x)
    // The warp's block as two halves of SCAN_WN / 2 column tiles (one half's fragments live at a time in warp_mma).
    constexpr int HN = SCAN_WN / 2;
    float acc[2][SCAN_WM][HN][4];
#pragma unroll
    for (int hh = 0; hh < 2; ++hh)
#pragma unroll
        for (int mi = 0; mi < SCAN_WM; ++mi)
#pragma unroll
            for (int ni = 0; ni < HN; ++ni)
#pragma unroll
                for (int x = 0; x < 4; ++x) {
                    const int d = acc_row(m0, mi, x), e = e0 + acc_col(n0 + hh * HN * 8, ni, x);
                    acc[hh][mi][ni][x] = (init && d < a.dk && e < a.dv) ? init[sbase + (i64)d * a.dv + e] : 0.f;
                }
    ScanIn in;
    if (ce > cb) {
        const int c = REVERSE ? ce - 1 : cb;
        scan_fetch<REVERSE>(in, a, bos + (i64)c * C, head, rows(c), e0);
    }
    for (int step = 0;; ++step) {
        const int c = REVERSE ? ce - step : cb + step;
        const bool last = REVERSE ? c <= cb : c >= ce;
        // The state at this chunk boundary (and dh0); a segment's only at its end.
        if (!SEGMENT || last) {
            float* dst = SEGMENT ? (REVERSE ? a.seg_dstates : a.seg_states) + ((i64)blockIdx.z * a.h + head) * a.dk * (i64)a.dv
                                 : slot_ptr(ws, a, slot0 + c, head);
            float* dh0 = !SEGMENT && REVERSE && c == 0 ? a.dh0 : nullptr;
#pragma unroll
            for (int mi = 0; mi < SCAN_WM; ++mi)
#pragma unroll
                for (int x = 0; x < 4; ++x) {
                    const int d = acc_row(m0, mi, x);
                    float* row = dst + (i64)d * a.dv;
#pragma unroll
                    for (int hh = 0; hh < 2; ++hh)
#pragma unroll
                        for (int ni = 0; ni < HN; ++ni) {
                            const int e = e0 + acc_col(n0 + hh * HN * 8, ni, x);
                            if (d < a.dk && e < a.dv) {
                                row[e] = acc[hh][mi][ni][x];
                                if (dh0) dh0[sbase + (i64)d * a.dv + e] = acc[hh][mi][ni][x];
                            }
                        }
                }
        }
        if (last) break;
        const int cc = REVERSE ? c - 1 : c, l = rows(cc);  // the chunk this step takes in
        scan_stage<REVERSE>(in, a, G, Xh, Xl, Y, head, l);
        if (SEGMENT && !REVERSE && blockIdx.x == 0 && (int)threadIdx.x < DK) gseg += gam(G, l - 1, threadIdx.x);
        const int cn = REVERSE ? cc - 1 : cc + 1;          // the next one: its loads overlap this step's products
        if (REVERSE ? cn >= cb : cn < ce) scan_fetch<REVERSE>(in, a, bos + (i64)cn * C, head, rows(cn), e0);
        // state ← diag(e^{Γ_L}) state + Xᵀ Y;  gradients: dS ← diag(e^{Γ_0}) (diag(e^{Γ_L − Γ_0}) dS + Q̂ᵀ dÔ)
#pragma unroll
        for (int mi = 0; mi < SCAN_WM; ++mi)
#pragma unroll
            for (int x = 0; x < 4; ++x) {
                const int d = acc_row(m0, mi, x);
                const float f = gla_exp(REVERSE ? gam(G, l - 1, d) - gam(G, 0, d) : gam(G, l - 1, d));
#pragma unroll
                for (int hh = 0; hh < 2; ++hh)
#pragma unroll
                    for (int ni = 0; ni < HN; ++ni) acc[hh][mi][ni][x] *= f;
            }
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
            warp_mma<SCAN_WM, HN, true, true, C>(acc[hh], Xh, LDS, m0, Y, LDB, n0 + hh * HN * 8, C);
            warp_mma<SCAN_WM, HN, true, true, C>(acc[hh], Xl, LDS, m0, Y, LDB, n0 + hh * HN * 8, C);
        }
        if (REVERSE) {
#pragma unroll
            for (int mi = 0; mi < SCAN_WM; ++mi)
#pragma unroll
                for (int x = 0; x < 4; ++x) {
                    const float f = gla_exp(gam(G, 0, acc_row(m0, mi, x)));
#pragma unroll
                    for (int hh = 0; hh < 2; ++hh)
#pragma unroll
                        for (int ni = 0; ni < HN; ++ni) acc[hh][mi][ni][x] *= f;
                }
        }
        __syncthreads();  // (G and the tiles are rewritten by the next chunk)
    }
    if (SEGMENT && !REVERSE && blockIdx.x == 0 && (int)threadIdx.x < a.dk)
        a.seg_gamma[((i64)blockIdx.z * a.h + head) * a.dk + threadIdx.x] = gseg;
}

