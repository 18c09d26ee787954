// ---------------------------------------------------------------------------------------------------------------
// gla prelude: element types, conversions and the warp-level tensor-core tile product. Self-contained: no includes.
// ---------------------------------------------------------------------------------------------------------------
typedef long long i64;

// A CUtensorMap (TMA descriptor), encoded by the runtime; 64-byte aligned in the parameter space.
struct alignas(64) TmaMap {
    unsigned long long w[16];
};
struct FwdArgs {               // mirrors gla_codegen::ForwardArgs (#[repr(C)])
    const elem_t* q;           // [B*T, H, dk]
    const elem_t* k;           // [B*T, H, dk]
    const elem_t* v;           // [B*T, H, dv]
    const elem_t* g;           // raw gate logits, same dtype as q (per key [B*T,H,dk] / per head [B*T,H]); null for fixed gates
    const float* params;       // [H, P] gate parameters, or null
    const float* h0;           // [N, H, dk, dv] initial state, or null
    float* ht;                 // [N, H, dk, dv] final state, or null
    elem_t* o;                 // [B*T, H, dv]
    float* states;             // [chunks, H, dk, dv] chunk-start states (materialize on), the segment workspace (segs > 1), or null
    const i64* cu_seqlens;     // [N+1] token offsets
    const i64* chunk_offsets;  // [N+1] chunk offsets
    const int* chunk_index;    // [2*chunks] (sequence, chunk) pairs (materialize on), or null
    int n_seqs, h, dk, dv;
    float scale;
    int segs;                  // segments per sequence S of the fused plan's two-level scan, the lead included (1: none)
    int tma;                   // 1: tm_q .. tm_g are encoded (GLA_TMA kernels then load whole chunks by TMA)
    int lead;                  // the lead segment's length, in thousandths of a later segment's (segs > 1)
    TmaMap tm_q, tm_k, tm_v, tm_g;  // over the [tokens, H, d] views of q, k, v and (per key) the logits; boxes 64 x 1 x C
    const elem_t* rs_w;        // GLA_ROW_SUMS: [B*T, H, dv] the original q (dq pass) or k (dk pass), else null
    float* rs_out;             // GLA_ROW_SUMS: [ceil(dv / 64), B*T, H] Σ over 64 columns of rs_w ⊙ o (dk pass: subtracted);
                               // per value (a per-key gate's passes): [B*T, H, dv], q ⊙ dq (dq pass, read by the dk pass)
    elem_t* dg;                // a per-key gate's dk pass: its d logits [B*T, H, dv], or null (no gate gradients)
    float* dparams;            // a per-key gate's dk pass: d params [H, P], added to (the host zeroed them), or null
    unsigned long long pad_[4];  // (explicit tail padding: 704 bytes, as gla_codegen::ForwardArgs)
};

// x, opaque to the compiler where registers are tight (16 warps: 128 a thread): what is derived from it is then
// recomputed where it is used instead of hoisted out of the chunk loop and kept live (the per-key producers'
// swizzled row offsets and copy addresses: a few integer instructions a chunk against the ~30 registers that 8 + 8
// warps' producers do not have — 0 B of spills instead of 416). Elsewhere the identity.
template <int THREADS>
__device__ __forceinline__ int opaque(int x) {
    if constexpr (THREADS > 384) asm volatile("" : "+r"(x));
    return x;
}

// A group of warps that runs a stage together: the whole CTA (`CTA`), or one role of the warp-specialised kernel.
// THREADS threads from thread FIRST on; BAR = 0 synchronises with __syncthreads, else with named barrier BAR.
template <int THREADS, int FIRST, int BAR>
struct Group {
    static constexpr int NT = THREADS, NW = THREADS / 32, FIRST_THREAD = FIRST;
    static __device__ __forceinline__ int tid() { return FIRST == 0 ? (int)threadIdx.x : (int)threadIdx.x - FIRST; }
    static __device__ __forceinline__ void sync() {
        if (BAR == 0) __syncthreads();
        else asm volatile("bar.sync %0, %1;\n" ::"n"(BAR), "n"(THREADS) : "memory");
    }
    // Barrier that also returns whether p holds on every thread of the group.
    static __device__ __forceinline__ bool all(bool p) {
        if (BAR == 0) return __syncthreads_and(p) != 0;
        unsigned r;
        asm volatile("{\n .reg .pred p, q;\n setp.ne.u32 p, %1, 0;\n bar.red.and.pred q, %2, %3, p;\n selp.u32 %0, 1, 0, q;\n}\n"
                     : "=r"(r) : "r"((unsigned)p), "n"(BAR), "n"(THREADS) : "memory");
        return r != 0;
    }
};
typedef Group<NT, 0, 0> CTA;

// Producer groups that share one copy of their code: groups k = 0, 1, .. of THREADS threads from thread
// FIRST + k·THREADS on, group k on named barrier BAR + k. The group and a thread's rank in it come from threadIdx.x
// (warp-uniform), so every group runs the same instructions: one copy in the SM's instruction caches instead of one
// a group (with a Group type a group, the per-key 8 + 8-warp kernel's two producer copies are ~160 KB of SASS and its
// producers waited on instruction fetch, no_inst, 14 % of their samples: ncu, benches/NOTES.md).
template <int THREADS, int FIRST, int BAR>
struct SharedGroup {
    static constexpr int NT = THREADS, NW = THREADS / 32, FIRST_THREAD = FIRST;
    static __device__ __forceinline__ int tid() { return (int)((threadIdx.x - (unsigned)FIRST) % (unsigned)THREADS); }
    static __device__ __forceinline__ int index() { return (int)((threadIdx.x - (unsigned)FIRST) / (unsigned)THREADS); }
    static __device__ __forceinline__ void sync() { asm volatile("bar.sync %0, %1;\n" ::"r"(BAR + index()), "n"(THREADS) : "memory"); }
    static __device__ __forceinline__ bool all(bool p) {
        unsigned r;
        asm volatile("{\n .reg .pred p, q;\n setp.ne.u32 p, %1, 0;\n bar.red.and.pred q, %2, %3, p;\n selp.u32 %0, 1, 0, q;\n}\n"
                     : "=r"(r) : "r"((unsigned)p), "r"(BAR + index()), "n"(THREADS) : "memory");
        return r != 0;
    }
};

__device__ __forceinline__ unsigned ld_u32(const elem_t* p) { return *reinterpret_cast<const unsigned*>(p); }

// 2^x of an argument that is <= 0 by construction (paper §4.3: every exponent is Γ_later − Γ_earlier). Γ is kept
// in log2 units (log α · log2 e), so one ex2 per decay factor.
__device__ __forceinline__ float exp_nonpos(float x) { return GLA_EXP2(x); }
// 2^x for the one factor of the chunk-level factorisation (see intra_scores_factored) whose argument is positive:
// only called when the chunk's decay span, checked at run time, is at most SPAN_MAX, so 2^x <= 2^SPAN_MAX.
__device__ __forceinline__ float exp_span(float x) { return GLA_EXP2(x); }
constexpr float LOG2E = 1.4426950408889634f;

__device__ __forceinline__ unsigned smem_u32(const void* p) {
    unsigned r;
    asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(r) : "l"(p));
    return r;
}
// 16-byte asynchronous copy global -> shared (zero-filled when !ok: src-size 0 reads nothing).
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool ok) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(dst)), "l"(src), "r"(ok ? 16 : 0));
}
// The same with a whole 16-byte source and a shared-window destination address (no predicate).
__device__ __forceinline__ void cp_async16_full(unsigned dst, const void* src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

#if GLA_TENSOR_CORES
// One tensor-core step c[16x8] += a[16x16] · b[16x8] (bf16/f16 in, f32 accumulate), fragments in mma.sync layout.
__device__ __forceinline__ void mma_16816(float c[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0, unsigned b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32." GLA_MMA_TYPE "." GLA_MMA_TYPE ".f32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
#else
__device__ __forceinline__ elem_t At_(const elem_t* A, int lda, int k, int m) { return A[k * lda + m]; }
// The exact-f32 step of one reduction index: rows (g, g+8) x cols (2t, 2t+1) of the accumulator layout.
__device__ __forceinline__ void fma_2x2(float c[4], float al, float ah, float x0, float x1) {
    c[0] = fmaf(al, x0, c[0]);
    c[1] = fmaf(al, x1, c[1]);
    c[2] = fmaf(ah, x0, c[2]);
    c[3] = fmaf(ah, x1, c[3]);
}
#endif

// c[16x8] += A[r0:r0+16, 0:K] · B[c0:c0+8, 0:K]^T.  A is row-major (lda), B is stored n-major (ldb): both have the
// reduction index contiguous. c uses the mma.sync m16n8 accumulator layout: c0,c1 -> (row g, cols 2t, 2t+1),
// c2,c3 -> (row g+8, same cols), g = lane/4, t = lane%4.
template <int K>
__device__ __forceinline__ void tile_mma(float c[4], const elem_t* A, int lda, int r0, const elem_t* B, int ldb, int c0) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#if GLA_TENSOR_CORES
    // ldmatrix: lanes 0-15 address A rows r0..r0+15 at k, lanes 16-31 the same rows at k+8 (x4 -> a0..a3);
    // lanes 0-7 address B rows c0..c0+7 at k, lanes 8-15 at k+8 (x2 -> b0, b1).
    const unsigned a_addr = smem_u32(A + (r0 + (lane & 15)) * lda + (lane >> 4) * 8);
    const unsigned b_addr = smem_u32(B + (c0 + (lane & 7)) * ldb + ((lane >> 3) & 1) * 8);
    (void)g; (void)t;
#pragma unroll
    for (int kk = 0; kk < K; kk += 16) {
        unsigned a0, a1, a2, a3, b0, b1;
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3) : "r"(a_addr + kk * (int)sizeof(elem_t)));
        asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
                     : "=r"(b0), "=r"(b1) : "r"(b_addr + kk * (int)sizeof(elem_t)));
        mma_16816(c, a0, a1, a2, a3, b0, b1);
    }
#else
    // Exact f32 path (no tf32): same output mapping as the tensor-core path.
    const elem_t* a_lo = A + (r0 + g) * lda;
    const elem_t* a_hi = a_lo + 8 * lda;
    const elem_t* b0 = B + (c0 + 2 * t) * ldb;
    const elem_t* b1 = b0 + ldb;
#pragma unroll 4
    for (int kk = 0; kk < K; ++kk) {
        const float al = to_f32(a_lo[kk]), ah = to_f32(a_hi[kk]), x0 = to_f32(b0[kk]), x1 = to_f32(b1[kk]);
        fma_2x2(c, al, ah, x0, x1);
    }
#endif
}

// c[16x8] += A[r0:r0+16, 0:K] · B[0:K, c0:c0+8] with B stored row-major [k][n] (ldb): the B fragments come from
// ldmatrix.trans (tensor-core path) or direct reads (f32 path).
template <int K>
__device__ __forceinline__ void tile_mma_kn(float c[4], const elem_t* A, int lda, int r0, const elem_t* B, int ldb, int c0) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#if GLA_TENSOR_CORES
    const unsigned a_addr = smem_u32(A + (r0 + (lane & 15)) * lda + (lane >> 4) * 8);
    const unsigned b_addr = smem_u32(B + (lane & 15) * ldb + c0);
    (void)g; (void)t;
#pragma unroll
    for (int kk = 0; kk < K; kk += 16) {
        unsigned a0, a1, a2, a3, b0, b1;
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3) : "r"(a_addr + kk * (int)sizeof(elem_t)));
        asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
                     : "=r"(b0), "=r"(b1) : "r"(b_addr + kk * ldb * (int)sizeof(elem_t)));
        mma_16816(c, a0, a1, a2, a3, b0, b1);
    }
#else
    const elem_t* a_lo = A + (r0 + g) * lda;
    const elem_t* a_hi = a_lo + 8 * lda;
    const elem_t* b = B + c0 + 2 * t;
#pragma unroll 4
    for (int kk = 0; kk < K; ++kk) {
        const float al = to_f32(a_lo[kk]), ah = to_f32(a_hi[kk]), x0 = to_f32(b[kk * ldb]), x1 = to_f32(b[kk * ldb + 1]);
        fma_2x2(c, al, ah, x0, x1);
    }
#endif
}

// c[16x8] += A[r0:r0+16, 0:K] · B[0:K, c0:c0+8] with A given TRANSPOSED, row-major [k][m] (lda), and B row-major
// [k][n] (ldb): both operands come from ldmatrix.trans, so a k-major tile (e.g. K̂ stored [token][d] for K̂^T V)
// needs no transposed copy.
template <int K>
__device__ __forceinline__ void tile_mma_tn(float c[4], const elem_t* At, int lda, int r0, const elem_t* B, int ldb, int c0) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#if GLA_TENSOR_CORES
    // x4.trans: lanes 8q..8q+7 address the rows (k) of 8x8 block q: q=0 (m 0-7, k 0-7), 1 (m 8-15, k 0-7),
    // 2 (m 0-7, k 8-15), 3 (m 8-15, k 8-15)  ->  a0..a3 in the mma fragment order.
    const int q = lane >> 3;
    const unsigned a_addr = smem_u32(At + ((lane & 7) + (q >> 1) * 8) * lda + r0 + (q & 1) * 8);
    const unsigned b_addr = smem_u32(B + (lane & 15) * ldb + c0);
    (void)g; (void)t;
#pragma unroll
    for (int kk = 0; kk < K; kk += 16) {
        unsigned a0, a1, a2, a3, b0, b1;
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3) : "r"(a_addr + kk * lda * (int)sizeof(elem_t)));
        asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
                     : "=r"(b0), "=r"(b1) : "r"(b_addr + kk * ldb * (int)sizeof(elem_t)));
        mma_16816(c, a0, a1, a2, a3, b0, b1);
    }
#else
    const elem_t* b = B + c0 + 2 * t;
#pragma unroll 4
    for (int kk = 0; kk < K; ++kk) {
        const float al = to_f32(At[kk * lda + r0 + g]), ah = to_f32(At[kk * lda + r0 + g + 8]);
        const float x0 = to_f32(b[kk * ldb]), x1 = to_f32(b[kk * ldb + 1]);
        fma_2x2(c, al, ah, x0, x1);
    }
#endif
}

// Shared-memory tile layouts, element offset of (row r, column c):
//   Pad: row-major with a padded row length ld (bank-conflict-free fragment loads).
//   Swz: the 128-byte-swizzled wgmma operand layout (CUTLASS's Swizzle<3,4,3>): 64-element-wide panels of C rows
//        (panel p at p·C·64 elements, each 1024-byte aligned), and the 16-byte chunk ch of row r stored at chunk
//        position ch ^ (r mod 8) — the address bits the tensor cores' 128-byte swizzle XORs. ldmatrix rows and
//        16-byte vectors never straddle a chunk, so every access below goes through off().
struct Pad {
    const elem_t* p;
    int ld;
    __device__ __forceinline__ int off(int r, int c) const { return r * ld + c; }
};
// (As one XOR on the linear offset: its bits 3..5 are c's chunk within the panel, r·64 leaves them alone.)
template <int ROWS>
__device__ __forceinline__ int swz_rows(int r, int c) { return ((c >> 6) * (ROWS * 64) + r * 64 + (c & 63)) ^ ((r & 7) << 3); }
__device__ __forceinline__ int swz(int r, int c) { return swz_rows<C>(r, c); }
// The same 128-byte swizzle for an f32 tile (32 elements a row of a panel; 4 a 16-byte chunk).
template <int ROWS>
__device__ __forceinline__ int swz32_rows(int r, int c) { return ((c >> 5) * (ROWS * 32) + r * 32 + (c & 31)) ^ ((r & 7) << 2); }
// x prepared for a tf32 tensor-core operand, rounded to 10 mantissa bits with ties away from zero: half a tf32 ulp
// is added to the bits here and the tensor cores drop the low 13 bits (they truncate an f32 operand; CUTLASS's
// round_half_ulp_truncate) — one integer add a value, where masking as well would be a second instruction. Finite x
// only: the mild chunks that use it have no NaN (a speculative, non-mild chunk's garbage is never multiplied).
__device__ __forceinline__ float tf32_half_ulp(float x) { return __uint_as_float(__float_as_uint(x) + 0x1000u); }
struct Swz {
    const elem_t* p;
    __device__ __forceinline__ int off(int r, int c) const { return swz(r, c); }
};

// Warp-tile product: acc[mi][ni] (16x8 tiles) += A[r0 + 16 mi .. +16, k] · B[k, c0 + 8 ni .. +8] for k in [0, kend)
// (kend a multiple of 16, at most K). Each k-step loads every A fragment once for all NI tiles and every B fragment
// once for all MI tiles (ldmatrix.x4: two n-tiles of B per load), and the MI·NI accumulators are independent, so the
// tensor-core steps of one k-step overlap instead of waiting on each other. A and B are tiles of layout LA / LB
// (used with a swizzled tile; padded tiles on both sides resolve to the overload below).
//   A_T  = false: A row-major [m][k];   true: A stored k-major [k][m], read with ldmatrix.trans.
//   B_KN = true:  B row-major [k][n], read with ldmatrix.trans;   false: B stored n-major [n][k].
template <int MI, int NI, bool A_T, bool B_KN, int K, class LA, class LB>
__device__ __forceinline__ void warp_mma(float (&acc)[MI][NI][4], const LA A, int r0, const LB B, int c0, int kend) {
    int lane = threadIdx.x & 31;
#if GLA_ROW_SUMS && GLA_VALUE_ROWS
    // (a per-key gate's passes: the lane's swizzled offsets are recomputed at each call rather than hoisted out of
    // the producers' chunk loop — kept live there, 7 of them spilled at the producers' 136 registers)
    asm volatile("" : "+r"(lane));
#endif
#if GLA_TENSOR_CORES
    static_assert(NI == 1 || NI % 2 == 0, "B fragments are loaded for pairs of n-tiles");
    const unsigned a_base = smem_u32(A.p), b_base = smem_u32(B.p);
    constexpr int ES = (int)sizeof(elem_t);
    // The (row, column) this lane addresses for ldmatrix of m-tile mi / n-tile pair p at k-step kk.
    auto a_addr = [&](int mi, int kk) {
        return a_base + ES * (A_T ? A.off(kk + (lane & 7) + (lane >> 4) * 8, r0 + mi * 16 + ((lane >> 3) & 1) * 8)
                                  : A.off(r0 + mi * 16 + (lane & 15), kk + (lane >> 4) * 8));
    };
    auto b_addr = [&](int p, int kk) {
        return b_base + ES * (B_KN ? B.off(kk + (lane & 7) + ((lane >> 3) & 1) * 8, c0 + p * 16 + (lane >> 4) * 8)
                                   : B.off(c0 + p * 16 + (lane & 7) + (lane >> 4) * 8, kk + ((lane >> 3) & 1) * 8));
    };
    // Fragments of k-step kk into (a, b).
    auto load = [&](int kk, unsigned (&a)[MI][4], unsigned (&b)[NI][2]) {
#pragma unroll
        for (int mi = 0; mi < MI; ++mi) {
            const unsigned addr = a_addr(mi, kk);
            if (A_T)
                asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                             : "=r"(a[mi][0]), "=r"(a[mi][1]), "=r"(a[mi][2]), "=r"(a[mi][3]) : "r"(addr));
            else
                asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                             : "=r"(a[mi][0]), "=r"(a[mi][1]), "=r"(a[mi][2]), "=r"(a[mi][3]) : "r"(addr));
        }
#pragma unroll
        for (int p = 0; p < (NI + 1) / 2; ++p) {
            const unsigned addr = b_addr(p, kk);
            if (NI == 1) {
                if (B_KN)
                    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
                                 : "=r"(b[0][0]), "=r"(b[0][1]) : "r"(addr));
                else
                    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
                                 : "=r"(b[0][0]), "=r"(b[0][1]) : "r"(addr));
            } else {
                if (B_KN)
                    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                                 : "=r"(b[2 * p][0]), "=r"(b[2 * p][1]), "=r"(b[(2 * p + 1) % NI][0]), "=r"(b[(2 * p + 1) % NI][1]) : "r"(addr));
                else
                    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                                 : "=r"(b[2 * p][0]), "=r"(b[2 * p][1]), "=r"(b[(2 * p + 1) % NI][0]), "=r"(b[(2 * p + 1) % NI][1]) : "r"(addr));
            }
        }
    };
    // Double-buffered fragments: step kk + 16's loads are issued before step kk's tensor-core steps, so the
    // ldmatrix latency overlaps the mma chain instead of preceding it.
    unsigned a[2][MI][4], b[2][NI][2];
    if (kend > 0) load(0, a[0], b[0]);
#pragma unroll
    for (int kk = 0; kk < K; kk += 16) {
        if (kk >= kend) break;
        const int cur = (kk / 16) & 1;
        if (kk + 16 < K && kk + 16 < kend) load(kk + 16, a[cur ^ 1], b[cur ^ 1]);
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)
#pragma unroll
            for (int ni = 0; ni < NI; ++ni)
                mma_16816(acc[mi][ni], a[cur][mi][0], a[cur][mi][1], a[cur][mi][2], a[cur][mi][3], b[cur][ni][0], b[cur][ni][1]);
    }
#else
    // Only swizzled (wgmma, tensor-core) tiles come here: padded ones take the overload below, f32 included.
    static_assert(sizeof(LA) == 0, "the layout-generic warp_mma is for tensor-core dtypes");
    (void)lane; (void)A; (void)B; (void)r0; (void)c0; (void)kend; (void)acc;
#endif
}
template <int MI, int NI, bool A_T, bool B_KN, int K>
__device__ __forceinline__ void warp_mma(float (&acc)[MI][NI][4], const elem_t* A, int lda, int r0, const elem_t* B, int ldb, int c0, int kend) {
    const int lane = threadIdx.x & 31;
#if GLA_TENSOR_CORES
    static_assert(NI == 1 || NI % 2 == 0, "B fragments are loaded for pairs of n-tiles");
    const unsigned a_addr = A_T ? smem_u32(A + ((lane & 7) + (lane >> 4) * 8) * lda + r0 + ((lane >> 3) & 1) * 8)
                                : smem_u32(A + (r0 + (lane & 15)) * lda + (lane >> 4) * 8);
    const unsigned b_addr = B_KN ? smem_u32(B + ((lane & 7) + ((lane >> 3) & 1) * 8) * ldb + c0 + (lane >> 4) * 8)
                                 : smem_u32(B + (c0 + (lane & 7) + (lane >> 4) * 8) * ldb + ((lane >> 3) & 1) * 8);
    constexpr int ES = (int)sizeof(elem_t);
    // Fragments of k-step kk into (a, b).
    auto load = [&](int kk, unsigned (&a)[MI][4], unsigned (&b)[NI][2]) {
#pragma unroll
        for (int mi = 0; mi < MI; ++mi) {
            const unsigned addr = a_addr + (A_T ? (kk * lda + mi * 16) : (mi * 16 * lda + kk)) * ES;
            if (A_T)
                asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                             : "=r"(a[mi][0]), "=r"(a[mi][1]), "=r"(a[mi][2]), "=r"(a[mi][3]) : "r"(addr));
            else
                asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                             : "=r"(a[mi][0]), "=r"(a[mi][1]), "=r"(a[mi][2]), "=r"(a[mi][3]) : "r"(addr));
        }
#pragma unroll
        for (int p = 0; p < (NI + 1) / 2; ++p) {
            const unsigned addr = b_addr + (B_KN ? (kk * ldb + p * 16) : (p * 16 * ldb + kk)) * ES;
            if (NI == 1) {
                if (B_KN)
                    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
                                 : "=r"(b[0][0]), "=r"(b[0][1]) : "r"(addr));
                else
                    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
                                 : "=r"(b[0][0]), "=r"(b[0][1]) : "r"(addr));
            } else {
                if (B_KN)
                    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                                 : "=r"(b[2 * p][0]), "=r"(b[2 * p][1]), "=r"(b[(2 * p + 1) % NI][0]), "=r"(b[(2 * p + 1) % NI][1]) : "r"(addr));
                else
                    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                                 : "=r"(b[2 * p][0]), "=r"(b[2 * p][1]), "=r"(b[(2 * p + 1) % NI][0]), "=r"(b[(2 * p + 1) % NI][1]) : "r"(addr));
            }
        }
    };
    // Double-buffered fragments: step kk + 16's loads are issued before step kk's tensor-core steps, so the
    // ldmatrix latency overlaps the mma chain instead of preceding it.
    unsigned a[2][MI][4], b[2][NI][2];
    if (kend > 0) load(0, a[0], b[0]);
#pragma unroll
    for (int kk = 0; kk < K; kk += 16) {
        if (kk >= kend) break;
        const int cur = (kk / 16) & 1;
        if (kk + 16 < K && kk + 16 < kend) load(kk + 16, a[cur ^ 1], b[cur ^ 1]);
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)
#pragma unroll
            for (int ni = 0; ni < NI; ++ni)
                mma_16816(acc[mi][ni], a[cur][mi][0], a[cur][mi][1], a[cur][mi][2], a[cur][mi][3], b[cur][ni][0], b[cur][ni][1]);
    }
#else
    // Exact f32 path (no tf32): same output mapping as the tensor-core path.
    const int g = lane >> 2, t = lane & 3;
#pragma unroll 2
    for (int kk = 0; kk < kend; ++kk) {
#pragma unroll
        for (int mi = 0; mi < MI; ++mi) {
            const int m = r0 + mi * 16 + g;
            const float al = to_f32(A_T ? At_(A, lda, kk, m) : A[m * lda + kk]);
            const float ah = to_f32(A_T ? At_(A, lda, kk, m + 8) : A[(m + 8) * lda + kk]);
#pragma unroll
            for (int ni = 0; ni < NI; ++ni) {
                const int n = c0 + ni * 8 + 2 * t;
                const float x0 = to_f32(B_KN ? B[kk * ldb + n] : B[n * ldb + kk]);
                const float x1 = to_f32(B_KN ? B[kk * ldb + n + 1] : B[(n + 1) * ldb + kk]);
                fma_2x2(acc[mi][ni], al, ah, x0, x1);
            }
        }
    }
#endif
}

template <int MI, int NI, bool A_T, bool B_KN, int K>
__device__ __forceinline__ void warp_mma(float (&acc)[MI][NI][4], const Pad A, int r0, const Pad B, int c0, int kend) {
    warp_mma<MI, NI, A_T, B_KN, K>(acc, A.p, A.ld, r0, B.p, B.ld, c0, kend);
}

// Store a pair of adjacent elements (e even, so 4-byte aligned for 16-bit types) as one store.
__device__ __forceinline__ void st_pair(elem_t* p, float x, float y) {
#if GLA_TENSOR_CORES
    *reinterpret_cast<unsigned*>(p) = pack2(x, y);
#else
    p[0] = to_elem(x);
    p[1] = to_elem(y);
#endif
}

// Store a 16x8 accumulator tile (rows r0.., cols c0..) into a row-major elem_t matrix.
__device__ __forceinline__ void tile_store(const float c[4], elem_t* M, int ld, int r0, int c0) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    elem_t* p = M + (r0 + g) * ld + c0 + 2 * t;
    p[0] = to_elem(c[0]);
    p[1] = to_elem(c[1]);
    p[8 * ld] = to_elem(c[2]);
    p[8 * ld + 1] = to_elem(c[3]);
}
