// The backward's two state scans on tensor cores (bf16 / f16, key gates, d_k and d_v ≤ 128): a CTA per (value tile
// of BVS columns, head, sequence) walks the chunks in order and keeps its [DK][BVS] slice of the state in mma.sync
// accumulators (f32), stored to the workspace at every chunk boundary:
//   gla_bwd_states:   S ← diag(e^{Γ_L}) S + K̂ᵀ V,          K̂ = K ⊙ e^{Γ_L − Γ}
//   gla_bwd_dstates:  dS ← diag(e^{Γ_L}) dS + Q̃ᵀ dO,       Q̃ = scale · Q ⊙ e^{Γ}     (dh0 = dS_[0])
// The decayed operand (K̂ or Q̃, every factor ≤ 1) enters as high + low element tiles (two products), so the state keeps
// f32-like accuracy; V and dO are the inputs themselves. Warps: the DK/16 row tiles of 16, each warp MI of them and
// NI column tiles of 8 (two warps a row tile where DK = 64).

constexpr int LDS = DK + 8, LDB = BVS + 8;                     // padded element rows (16-byte rows for ldmatrix)
constexpr int SCAN_MT = DK / 16;                               // row tiles of the state slice
constexpr int SCAN_WM = SCAN_MT >= NT / 32 ? SCAN_MT / (NT / 32) : 1;  // row tiles a warp
constexpr int SCAN_WN = SCAN_MT >= NT / 32 ? BVS / 8 : BVS / 8 / ((NT / 32) / SCAN_MT);  // column tiles a warp
static_assert(NT == 256 && BVS == 32 && DK % 64 == 0 && DK <= 128, "the scan's warp map");

// One lane's accumulator element x of tile (mi, ni) → (row, column) of the warp's [16·MI][8·NI] block at (m0, n0).
__device__ __forceinline__ int acc_row(int m0, int mi, int x) { return m0 + mi * 16 + ((threadIdx.x & 31) >> 2) + (x >> 1) * 8; }
__device__ __forceinline__ int acc_col(int n0, int ni, int x) { return n0 + ni * 8 + 2 * (threadIdx.x & 3) + (x & 1); }

// The decayed operand X ⊙ e^{E(i, d)} (E ≤ 0; times `mul`) as high + low element tiles [C][LDS] (zero past row l and
// column d_k); `src` the input rows of this chunk (d_k elements a token and head).
template <class Exponent>
__device__ __forceinline__ void split_operand(elem_t* hi, elem_t* lo, const elem_t* src, const BwdArgs& a, i64 row0, int head,
                                              int l, float mul, Exponent E) {
    for (int idx = threadIdx.x; idx < C * DK; idx += NT) {
        const int i = idx / DK, d = idx - i * DK;
        float x = 0.f;
        if (i < l && d < a.dk) x = mul * to_f32(src[((row0 + i) * a.h + head) * (i64)a.dk + d]) * gla_exp(E(i, d));
        const elem_t h = to_elem(x);
        hi[i * LDS + d] = h;
        lo[i * LDS + d] = to_elem(x - to_f32(h));
    }
}

// The chunk's columns [e0, e0 + BVS) of a [tokens, H, d_v] input, as an element tile [C][LDB] (zero past l, d_v).
__device__ __forceinline__ void value_tile(elem_t* dst, const elem_t* src, const BwdArgs& a, i64 row0, int head, int l, int e0) {
    for (int idx = threadIdx.x; idx < C * BVS; idx += NT) {
        const int i = idx / BVS, e = idx - i * BVS;
        dst[i * LDB + e] = (i < l && e0 + e < a.dv) ? src[((row0 + i) * a.h + head) * (i64)a.dv + e0 + e] : to_elem(0.f);
    }
}

// S_[c] of every chunk of one (sequence, head, value tile of BVS columns), forward (REVERSE = false), or dS_[c] in
// reverse (REVERSE = true; dh0 = dS_[0]).
template <bool REVERSE>
__device__ __forceinline__ void state_scan(const BwdArgs& a) {
    extern __shared__ __align__(16) float sm[];
    float* G = sm;                                     // [C][DK] Γ
    elem_t* Xh = reinterpret_cast<elem_t*>(G + C * DK); // [C][LDS] K̂ (or Q̃), high part
    elem_t* Xl = Xh + C * LDS;                         // [C][LDS] low part
    elem_t* Y = Xl + C * LDS;                          // [C][LDB] V (or dO), this tile's columns
    const int e0 = blockIdx.x * BVS, head = blockIdx.y, n = blockIdx.z, warp = threadIdx.x / 32;
    const i64 bos = a.cu_seqlens[n], len = a.cu_seqlens[n + 1] - bos, slot0 = a.chunk_offsets[n] + n;
    const int nc = (int)((len + C - 1) / C);
    const int m0 = (warp % SCAN_MT) * SCAN_WM * 16, n0 = (warp / SCAN_MT) * SCAN_WN * 8;  // this warp's block
    const i64 sbase = (((i64)n * a.h + head) * a.dk) * a.dv;
    float* const ws = REVERSE ? a.dstates : a.states;
    const float* init = REVERSE ? a.dht : a.h0;
    float acc[SCAN_WM][SCAN_WN][4];
#pragma unroll
    for (int mi = 0; mi < SCAN_WM; ++mi)
#pragma unroll
        for (int ni = 0; ni < SCAN_WN; ++ni)
#pragma unroll
            for (int x = 0; x < 4; ++x) {
                const int d = acc_row(m0, mi, x), e = e0 + acc_col(n0, ni, x);
                acc[mi][ni][x] = (init && d < a.dk && e < a.dv) ? init[sbase + (i64)d * a.dv + e] : 0.f;
            }
    for (int step = 0;; ++step) {
        const int c = REVERSE ? nc - step : step;
        // The state at this chunk boundary (and dh0).
        float* dst = slot_ptr(ws, a, slot0 + c, head);
#pragma unroll
        for (int mi = 0; mi < SCAN_WM; ++mi)
#pragma unroll
            for (int ni = 0; ni < SCAN_WN; ++ni)
#pragma unroll
                for (int x = 0; x < 4; ++x) {
                    const int d = acc_row(m0, mi, x), e = e0 + acc_col(n0, ni, x);
                    if (d < a.dk && e < a.dv) {
                        dst[(i64)d * a.dv + e] = acc[mi][ni][x];
                        if (REVERSE && c == 0 && a.dh0) a.dh0[sbase + (i64)d * a.dv + e] = acc[mi][ni][x];
                    }
                }
        if (REVERSE ? c == 0 : c == nc) break;
        const int i0 = (REVERSE ? c - 1 : c) * C, l = (int)min((i64)C, len - i0);
        chunk_gamma(a, G, nullptr, bos, head, i0, l);
        const float* GL = G + (l - 1) * DK;
        if (REVERSE) {
            split_operand(Xh, Xl, a.q, a, bos + i0, head, l, a.scale, [&](int i, int d) { return G[i * DK + d]; });
            value_tile(Y, a.d_o, a, bos + i0, head, l, e0);
        } else {
            split_operand(Xh, Xl, a.k, a, bos + i0, head, l, 1.f, [&](int i, int d) { return GL[d] - G[i * DK + d]; });
            value_tile(Y, a.v, a, bos + i0, head, l, e0);
        }
        __syncthreads();
        // state ← diag(e^{Γ_L}) state + Xᵀ Y
#pragma unroll
        for (int mi = 0; mi < SCAN_WM; ++mi)
#pragma unroll
            for (int x = 0; x < 4; ++x) {
                const float f = gla_exp(GL[acc_row(m0, mi, x)]);
#pragma unroll
                for (int ni = 0; ni < SCAN_WN; ++ni) acc[mi][ni][x] *= f;
            }
        warp_mma<SCAN_WM, SCAN_WN, true, true, C>(acc, Xh, LDS, m0, Y, LDB, n0, C);
        warp_mma<SCAN_WM, SCAN_WN, true, true, C>(acc, Xl, LDS, m0, Y, LDB, n0, C);
        __syncthreads();  // (G and the tiles are rewritten by the next chunk)
    }
}

extern "C" __global__ void __launch_bounds__(NT) gla_bwd_states(const __grid_constant__ BwdArgs a) { state_scan<false>(a); }
extern "C" __global__ void __launch_bounds__(NT) gla_bwd_dstates(const __grid_constant__ BwdArgs a) { state_scan<true>(a); }
