// The backward's chunk kernel on tensor cores (bf16 / f16, d_k and d_v ≤ 256, C = 32): one chunk's gradients,
// every chunk of every sequence at once (grid x = chunks, y = heads; 8 warps; two CTAs an SM at d = 128, one at 256). The
// products without a decay inside their sum run as mma.sync tile products on bf16 / f16 operands, f32 accumulators:
//   dA = dÔ Vᵀ,   dq⁽ⁱⁿᵗᵉʳ⁾ = (dÔ S_[c]ᵀ) ⊙ e^{Γ},   dk⁽ⁱⁿᵗᵉʳ⁾ = (V dS_[c+1]ᵀ) ⊙ e^{Γ_L − Γ},   dv⁽ⁱⁿᵗᵉʳ⁾ = K̂ dS_[c+1]
// (the states read from the workspace straight into mma fragments as high + low element pairs, two products; at
// d ≥ 128 each of the 8 warps owns all 32 rows × d / 8 columns, so that a state fragment serves both row tiles).
// The terms with a per-pair decay e^{Γ_i − Γ_j} (j ≤ i: ≤ 1 at any gate strength) stay exact on CUDA cores in f32,
// as running products of the decays α (`intra_pairs`): A_ij, Σ_j dA_ij k_j ⊙ e^{Γ_i − Γ_j}, Σ_i dA_ij q_i ⊙ e^{Γ_i − Γ_j};
// then Σ_i A_ij dÔ_i.

// The chunk form's two state scans (bwd_scan_tc.cuh): every chunk boundary's state of each sequence.
extern "C" __global__ void __launch_bounds__(NT, SCAN_CTAS) gla_bwd_states(const __grid_constant__ BwdArgs a) { state_scan<false, false>(a); }
extern "C" __global__ void __launch_bounds__(NT, SCAN_CTAS) gla_bwd_dstates(const __grid_constant__ BwdArgs a) { state_scan<true, false>(a); }

constexpr int LDK = DK + 8, LDV = DV + 8;  // padded rows of the element tiles (16-byte rows for ldmatrix)
// The state products' warp map: at d ≥ 128 each of the 8 warps owns all 32 rows (SMI = 2 row tiles) × d / 8 columns,
// so a state fragment serves both row tiles; at d = 64 (one column tile a warp that way) 2 × 4 warps of 16 rows ×
// d / 4 columns as before (the build with 32-row blocks everywhere was 5 % slower at d = 64 on the H100, session v;
// not profiled, and this split not yet timed).
constexpr int SMI = DK >= 128 && DV >= 128 ? 2 : 1;
constexpr int SRG = 2 / SMI, SCG = 8 / SRG;        // row groups, column groups of warps
constexpr int WN_K = DK / SCG, WN_V = DV / SCG;    // columns a warp owns of a [C][DK] / [C][DV] state product
constexpr int SUNROLL = SMI == 2 ? 4 : 2;          // k-steps of state loads in flight
static_assert(C == 32 && NT == 256 && DK % 64 == 0 && DV % 64 == 0, "the tile map: 8 warps over 32 rows");
static_assert(C * C * 4 <= C * LDK * (int)sizeof(elem_t), "A [C][C] f32 fits in the K̂ tile it replaces");

// acc[16·MI × 8·NI] += X[r0 .. r0 + 16·MI][0 .. K) · B on tensor cores, X an element tile in shared memory
// (ldmatrix), B read straight from an f32 state S [d_k][d_v] in global memory into mma fragments, as high + low element
// pairs (S − high, rounded: their sum holds S to ~2^-17 relative in bf16, so the state terms keep f32-like accuracy;
// two products), each fragment serving the MI row tiles; SUNROLL k-steps' loads in flight at a time:
//   STATE_T = false: B[k][n] = S[n][k] with n = d_k row c0 + n, k = d_v column   (dÔ S_[c]ᵀ, V dS_[c+1]ᵀ)
//   STATE_T = true:  B[k][n] = S[k][n] with k = d_k row, n = d_v column c0 + n    (K̂ dS_[c+1])
// Zero past the head dims.
template <int MI, int NI, bool STATE_T, int K>
__device__ __forceinline__ void state_mma(float (&acc)[MI][NI][4], const elem_t* X, int ldx, int r0, const float* S, int c0,
                                          const BwdArgs& a) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const unsigned x_addr = smem_u32(X + (r0 + (lane & 15)) * ldx + (lane >> 4) * 8);
    auto b = [&](int k, int n) -> float {
        const int d = STATE_T ? k : n, e = STATE_T ? n : k;
        return (d < a.dk && e < a.dv) ? S[(i64)d * a.dv + e] : 0.f;
    };
#pragma unroll SUNROLL
    for (int kk = 0; kk < K; kk += 16) {
        unsigned xf[MI][4];
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)
            asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                         : "=r"(xf[mi][0]), "=r"(xf[mi][1]), "=r"(xf[mi][2]), "=r"(xf[mi][3])
                         : "r"(x_addr + (mi * 16 * ldx + kk) * (int)sizeof(elem_t)));
#pragma unroll
        for (int ni = 0; ni < NI; ++ni) {
            const int n = c0 + ni * 8 + g, k = kk + 2 * t;
            unsigned h0, l0, h1, l1;
            split_pair(b(k, n), b(k + 1, n), h0, l0);
            split_pair(b(k + 8, n), b(k + 9, n), h1, l1);
#pragma unroll
            for (int mi = 0; mi < MI; ++mi) {
                mma_16816(acc[mi][ni], xf[mi][0], xf[mi][1], xf[mi][2], xf[mi][3], h0, h1);
                mma_16816(acc[mi][ni], xf[mi][0], xf[mi][1], xf[mi][2], xf[mi][3], l0, l1);
            }
        }
    }
}

// Two [C][LD] element tiles X, Y of the chunk's rows row0 .. row0 + l of two [tokens, H, w] inputs (w ≤ N): zero
// past row l and column w; 16-byte asynchronous copies where `vec` (w % 8 = 0, 16-byte aligned inputs; the caller
// commits and waits), element loads otherwise.
template <int N, int LD>
__device__ __forceinline__ void tile_pair(elem_t* X, elem_t* Y, const elem_t* xs, const elem_t* ys, int w, const BwdArgs& a,
                                          i64 row0, int head, int l, bool vec) {
    if (vec) {
        for (int idx = threadIdx.x; idx < C * N / 8; idx += NT) {
            const int i = idx / (N / 8), d = (idx - i * (N / 8)) * 8;
            const bool ok = i < l && d < w;
            const i64 off = ok ? ((row0 + i) * a.h + head) * (i64)w + d : 0;
            cp_async16(X + i * LD + d, xs + off, ok);
            cp_async16(Y + i * LD + d, ys + off, ok);
        }
    } else {
        const elem_t zero = to_elem(0.f);
        for (int idx = threadIdx.x; idx < C * N; idx += NT) {
            const int i = idx / N, d = idx - i * N;
            const bool ok = i < l && d < w;
            const i64 off = ((row0 + i) * a.h + head) * (i64)w + d;
            X[i * LD + d] = ok ? xs[off] : zero;
            Y[i * LD + d] = ok ? ys[off] : zero;
        }
    }
}

constexpr int CHUNK_CTAS = DK <= 128 && DV <= 128 ? 2 : 1;  // CTAs an SM (shared memory: 111 KB at d = 128)

extern "C" __global__ void __launch_bounds__(NT, CHUNK_CTAS) gla_bwd_chunk(const __grid_constant__ BwdArgs a) {
    extern __shared__ __align__(16) float sm[];
    elem_t* Qe = reinterpret_cast<elem_t*>(sm);  // [C][LDK]
    elem_t* Ke = Qe + C * LDK;                   // [C][LDK]
    elem_t* KHe = Ke + C * LDK;                  // [C][LDK]  K̂ = K ⊙ e^{Γ_L − Γ}, then A [C][C] f32
    elem_t* Ve = KHe + C * LDK;                  // [C][LDV]
    elem_t* DOe = Ve + C * LDV;                  // [C][LDV]  dO (dÔ = scale · dO: the scale goes on the results)
    float* G = reinterpret_cast<float*>(DOe + C * LDV);  // [C][DK] Γ
    float* DQ = G + C * DK;                      // [C][DK]  dq, later P = q ⊙ dq − k ⊙ dk
    float* DKs = DQ + C * DK;                    // [C][DK]  dk
    float* AL = DKs + C * DK;                    // [C][DK]  α
    float* DA = AL + C * DK;                     // [C][C]
    float* R = DA + C * C;                       // [DK]     rowsum(dS_[c+1] ⊙ S_[c+1])
    float* W = R + DK;                           // [C]      (chunk_gate_grads)
    float* A = reinterpret_cast<float*>(KHe);    // [C][C]   (intra_pairs; K̂ is spent by then)
    const int warp = threadIdx.x / 32;
    const ChunkAt ch = chunk_at(a);
    const int head = ch.head, i0 = ch.i0, l = ch.l;
    const i64 bos = ch.bos;
    const float *S0 = ch.S0, *dS1 = ch.dS1;  // S_[c], dS_[c+1]
    // The warp's block of a [C][·] state product: rows wr .. wr + 16·SMI, columns from wk / wv.
    const int wr = 16 * (warp % SRG), wk = (warp / SRG) * WN_K, wv = (warp / SRG) * WN_V;

    // 0. The three states this chunk reads (S_[c], S_[c+1], dS_[c+1]: 3 · d_k · d_v · 4 bytes) asked into L2 now, so
    //    that their reads below wait on L2 rather than on memory.
    {
        const int lines = (int)(((i64)a.dk * a.dv * 4 + 127) / 128);
        for (int ln = threadIdx.x; ln < 3 * lines; ln += NT) {
            const float* base = ln < lines ? ch.S0 : ln < 2 * lines ? ch.S1 : ch.dS1;
            prefetch_l2(base + (i64)(ln % lines) * 32);
        }
    }

    // 1. Tiles of the chunk (zero past row l and past the head dims) — 16-byte asynchronous copies where the head dims
    //    are multiples of 8 and the tensors 16-byte aligned — then Γ and α.
    const bool vec = a.dk % 8 == 0 && a.dv % 8 == 0 &&
                     (((unsigned long long)a.q | (unsigned long long)a.k | (unsigned long long)a.v | (unsigned long long)a.d_o) & 15) == 0;
    tile_pair<DK, LDK>(Qe, Ke, a.q, a.k, a.dk, a, bos + i0, head, l, vec);
    tile_pair<DV, LDV>(Ve, DOe, a.v, a.d_o, a.dv, a, bos + i0, head, l, vec);
    if (vec) {
        cp_async_commit();
        cp_async_wait<0>();
    }
    chunk_gamma(a, G, AL, bos, head, i0, l);  // (its barriers publish the tiles)
    const float* GL = G + (l - 1) * DK;

    // 2. K̂ = K ⊙ e^{Γ_L − Γ} (for dv⁽ⁱⁿᵗᵉʳ⁾); tensor cores: dA = scale · dO Vᵀ (j ≤ i < l),
    //    dq⁽ⁱⁿᵗᵉʳ⁾ = scale · (dO S_[c]ᵀ) ⊙ e^{Γ}; R = rowsum(dS_[c+1] ⊙ S_[c+1]) for the gate.
    for (int idx = threadIdx.x; idx < C * DK; idx += NT) {
        const int i = idx / DK, d = idx - i * DK;
        KHe[i * LDK + d] = to_elem(to_f32(Ke[i * LDK + d]) * gla_exp(GL[d] - G[idx]));
    }
    {
        float acc[1][1][4] = {};
        const int r0 = 16 * (warp >> 2), c0 = 8 * (warp & 3);  // 2 x 4 tiles of 16 x 8
        warp_mma<1, 1, false, false, DV>(acc, DOe, LDV, r0, Ve, LDV, c0, DV);
        for_acc<1, 1>(acc, r0, c0, [&](int i, int j, float x) { DA[i * C + j] = (j <= i && i < l) ? a.scale * x : 0.f; });
    }
    {
        float acc[SMI][WN_K / 8][4] = {};
        state_mma<SMI, WN_K / 8, false, DV>(acc, DOe, LDV, wr, S0, wk, a);
        for_acc<SMI, WN_K / 8>(acc, wr, wk, [&](int i, int d, float x) {
            DQ[i * DK + d] = i < l ? a.scale * x * gla_exp(G[i * DK + d]) : 0.f;
        });
    }
    state_rowsum(R, ch, a);
    __syncthreads();  // (K̂ is read by every warp)

    // 3. Tensor cores: dk⁽ⁱⁿᵗᵉʳ⁾ = (V dS_[c+1]ᵀ) ⊙ e^{Γ_L − Γ}, dv⁽ⁱⁿᵗᵉʳ⁾ = K̂ dS_[c+1] (kept in registers).
    {
        float acc[SMI][WN_K / 8][4] = {};
        state_mma<SMI, WN_K / 8, false, DV>(acc, Ve, LDV, wr, dS1, wk, a);
        for_acc<SMI, WN_K / 8>(acc, wr, wk, [&](int j, int d, float x) {
            DKs[j * DK + d] = j < l ? x * gla_exp(GL[d] - G[j * DK + d]) : 0.f;
        });
    }
    float dv_acc[SMI][WN_V / 8][4] = {};
    state_mma<SMI, WN_V / 8, true, DK>(dv_acc, KHe, LDK, wr, dS1, wv, a);
    __syncthreads();  // (the K̂ tile becomes A)

    // 4. The per-pair terms, exact (CUDA cores, running products of α): A, and dq, dk += their intra-chunk sums.
    intra_pairs<DK>([&](int i, int d) { return to_f32(Qe[i * LDK + d]); }, [&](int j, int d) { return to_f32(Ke[j * LDK + d]); },
                AL, DA, A, DQ, DKs, l);

    // 5. The outputs, dv_j = dv⁽ⁱⁿᵗᵉʳ⁾_j + Σ_{i≥j} A_ij dÔ_i, and P = q ⊙ dq − k ⊙ dk for the gate.
    for (int idx = threadIdx.x; idx < C * DK; idx += NT) {
        const int i = idx / DK, d = idx - i * DK;
        if (i < l && d < a.dk) {
            const float dq = DQ[idx], dk = DKs[idx];
            const i64 off = ((bos + i0 + i) * a.h + head) * (i64)a.dk + d;
            a.dq_out[off] = to_elem(dq);
            a.dk_out[off] = to_elem(dk);
            DQ[idx] = to_f32(Qe[i * LDK + d]) * dq - to_f32(Ke[i * LDK + d]) * dk;
        } else {
            DQ[idx] = 0.f;
        }
    }
    for_acc<SMI, WN_V / 8>(dv_acc, wr, wv, [&](int j, int e, float x) {
        if (j < l && e < a.dv) {
            float s = 0.f;
            for (int i = j; i < l; ++i) s = fmaf(A[i * C + j], to_f32(DOe[i * LDV + e]), s);
            a.dv_out[((bos + i0 + j) * a.h + head) * (i64)a.dv + e] = to_elem(fmaf(a.scale, s, x));
        }
    });
    __syncthreads();
    chunk_gate_grads(a, DQ, R, W, bos, head, i0, l);
}
