// ---------------------------------------------------------------------------------------------------------------
// Consumers on wgmma. Warpgroup wg (4 warps) owns the value columns [64 wg, 64 wg + 64) of the CTA's tile and keeps
// its part of the state TRANSPOSED, Sᵀ (64 x d_k, f32), in wgmma accumulators. Per chunk, two asynchronous groups:
//   output:  Oᵀ = Sᵀ Q̃ᵀ  +  Vᵀ Aᵀ            (O = Q̃ S + A V; Q̃ = Q ⊙ exp(Γ) for every gate shape here)
//   state:   Sᵀ ← Sᵀ diag(exp(Γ_L)) + Vᵀ K̂    (S ← diag(exp(Γ_L)) S + K̂ᵀ V)
// Sᵀ enters the output product as bf16/f16 registers (the A operand; at 8 + 8 warps a shared tile instead); Q̃,
// V, A, K̂ are read by the tensor cores from the slot. Accumulator element i of a thread (lane = 4 g + t, warp w of its warpgroup) is row
// 16 w + g + 8·((i >> 1) & 1), column 8·(i >> 2) + 2 t + (i & 1).
// ---------------------------------------------------------------------------------------------------------------
constexpr int NWG = NW / 4;
static_assert(NW % 4 == 0 && BV == 64 * NWG && DK % 64 == 0 && C % 16 == 0 && C <= 64, "wgmma consumers: 64 value columns per warpgroup");
static_assert(!GLA_REVERSE || ((KEY_GATE != GATE_PER_VALUE || GLA_VALUE_ROWS) && !GLA_ROWS_SCALED), "the dv / dk passes: A with its row factors");
static_assert(!GLA_SPLIT_OPS || (!GLA_WG_SMEM_S && !GLA_ROWS_SCALED), "the dq / dk passes: Sᵀ's halves in registers, Q̃ decayed");
static_assert(!GLA_VALUE_ROWS || (!GLA_WG_SMEM_S && KSPLIT == 1), "per value: Sᵀ in registers, no key split");
constexpr int BAR_WG = BAR_EMPTY + EMPTY_BARS;  // one per consumer warpgroup (the output staging tile)
constexpr int BAR_XREAD = BAR_WG + 2;             // GLA_ISSUE_AFTER_GATE: one per producer group (its logits are read)
static_assert(!GLA_ISSUE_AFTER_GATE || BAR_XREAD + PG <= 16, "sm_90 has 16 named barriers");
static_assert(BAR_WG + NWG <= 16, "sm_90 has 16 named barriers");
constexpr int LDO = BV + 8;  // output staging rows (conflict-free stmatrix)
typedef float WgState[DK / 2];
typedef float WgOut[C / 2];  // Oᵀ: both products accumulate into it (scalar gates get Q̃ = Q ⊙ exp(Γ) from decay_keys)
// Sᵀ as the output product's A operand: DK / 16 k-steps of bf16/f16 pairs; GLA_SPLIT_OPS: then the low halves'.
constexpr int SA_STEPS = (GLA_SPLIT_OPS ? 2 : 1) * (DK / 16);
typedef unsigned WgStateA[SA_STEPS][4];

// Matrix descriptor of a swizzled tile at byte offset off: 128-byte swizzle, 8-row groups 1024 bytes apart (SBO),
// lbo between 64-element panels along M / N (MN-major operands; K-major ones ignore it: 16).
// (The start address field is addr / 16 < 2^14 for any shared address, so a 16-byte multiple off is added to the
// descriptor of the tile's base without carrying into the other fields: one add per k-step.)
// (The start address is a 14-bit field: the shared address is masked to the CTA's 256 KB window first — in a
// cluster launch the address the conversion gives carries the CTA's rank in its high bits, which unmasked would
// land in the leading-byte-offset field and corrupt slice 1's state.)
__device__ __forceinline__ unsigned long long wg_desc(const elem_t* tile, unsigned off, unsigned lbo) {
    const unsigned long long base = (unsigned long long)((smem_u32(tile) & 0x3FFFFu) >> 4) | ((unsigned long long)(lbo >> 4) << 16) |
                                    ((unsigned long long)(1024u >> 4) << 32) | (1ull << 62);
    return base + (off >> 4);
}
constexpr unsigned PANEL = C * 128;  // bytes of one 64-element panel of a C-row tile
__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wg_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory"); }
// Keep the compiler from moving accesses of registers an asynchronous group uses across its wait.
template <int N>
__device__ __forceinline__ void reg_fence(float (&r)[N]) {
#pragma unroll
    for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}
__device__ __forceinline__ void reg_fence(WgStateA& r) {
#pragma unroll
    for (int k = 0; k < SA_STEPS; ++k)
#pragma unroll
        for (int i = 0; i < 4; ++i) asm volatile("" : "+r"(r[k][i])::"memory");
}
__device__ __forceinline__ int wg_index() { return (int)threadIdx.x >> 7; }

// Sᵀ between the accumulators and a global [.., H, dk, dv] f32 slab (h0, ht, S_init, ΔS), masked to the real dims.
template <bool STORE>
__device__ __forceinline__ void wg_state_global(WgState& S, float* base, const FwdArgs& a, int v0) {
    const int w = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int e0 = v0 + 64 * wg_index() + 16 * w + g;
#if KEY_GATE == GATE_PER_KEY
    // (Per key: one running pointer — rows 8j + 2t, 8j + 2t + 1, columns e0, e0 + 8 — and at most 16 accesses in
    // flight, so that few address registers are live while the accumulators fill. ptxas's allocation is sensitive
    // to this prologue: the scalar gates keep the plain form below, with which their kernels fit; with this one
    // their 8 + 8-warp kernels spill 8 B.)
    const bool oke0 = e0 < a.dv, oke1 = e0 + 8 < a.dv;
    float* r = base + (i64)(2 * t) * a.dv + e0;
#pragma unroll
    for (int j = 0; j < DK / 8; ++j, r += 8 * (i64)a.dv) {
        const int d = 8 * j + 2 * t;
        const bool ok[4] = {d < a.dk && oke0, d + 1 < a.dk && oke0, d < a.dk && oke1, d + 1 < a.dk && oke1};
        float* p[4] = {r, r + a.dv, r + 8, r + a.dv + 8};
#pragma unroll
        for (int q = 0; q < 4; ++q) {  // element 4j + q: row d + (q & 1), column e0 + 8 (q >> 1)
            if (STORE) { if (ok[q]) *p[q] = S[4 * j + q]; }
            else S[4 * j + q] = ok[q] ? *p[q] : 0.f;
        }
        if ((j & 3) == 3) asm volatile("" ::: "memory");
    }
#else
#pragma unroll
    for (int i = 0; i < DK / 2; ++i) {
        const int e = e0 + 8 * ((i >> 1) & 1), d = 8 * (i >> 2) + 2 * t + (i & 1);
        const bool ok = d < a.dk && e < a.dv;
        if (STORE) { if (ok) base[(i64)d * a.dv + e] = S[i]; }
        else S[i] = ok ? base[(i64)d * a.dv + e] : 0.f;
    }
#endif
}

#if GLA_WG_SMEM_S
// Stage wg_stage_state (8 + 8 warps, where the registers do not hold a bf16 copy of Sᵀ): Sᵀ as bf16/f16 into the
// warpgroup's tile st (64 rows x d_k, the K-major swizzled layout: the A operand of Sᵀ Q̃ᵀ) by stmatrix, then
// fenced for the async proxy and barriered within the warpgroup.
__device__ __forceinline__ void wg_stage_state(const WgState& S, elem_t* st) {
    const int wg = wg_index(), w = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31, m = lane >> 3, rr = lane & 7;
    elem_t* tile = st + wg * 64 * DK;
#pragma unroll
    for (int jp = 0; jp < DK / 16; ++jp) {  // 8x8 matrices q: rows 16 w + 8 (q & 1).., columns 8 (2 jp + q / 2)..
        unsigned r[4];
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            const int j = 2 * jp + (q >> 1), h = q & 1;
            r[q] = pack2(S[4 * j + 2 * h], S[4 * j + 2 * h + 1]);
        }
        const elem_t* dst = tile + swz_rows<64>(16 * w + 8 * (m & 1) + rr, 8 * (2 * jp + (m >> 1)));
        asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(smem_u32(dst)),
                     "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3]) : "memory");
    }
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    asm volatile("bar.sync %0, 128;\n" ::"r"(BAR_WG + wg) : "memory");
}
#endif

// Stage wg_output (issue):  Oᵀ = Sᵀ Q̃ᵀ + Vᵀ Aᵀ (+ Vᵀ A_loᵀ)  — one wgmma group (the dv pass, REVERSE:
// dVᵀ = S'ᵀ K̂ᵀ + dOᵀ A (+ dOᵀ A_lo): the same tiles, K̂ for Q̃, A read over its rows). sa: Sᵀ as the A operand (packed by
// wg_pack before the state decays).
__device__ __forceinline__ void wg_pack(const WgState& S, WgStateA& sa) {
#pragma unroll
    for (int k = 0; k < DK / 16; ++k) {  // accumulator columns 16k..16k+15 = the A fragment of k-step k
        sa[k][0] = pack2(S[8 * k + 0], S[8 * k + 1]);
        sa[k][1] = pack2(S[8 * k + 2], S[8 * k + 3]);
        sa[k][2] = pack2(S[8 * k + 4], S[8 * k + 5]);
        sa[k][3] = pack2(S[8 * k + 6], S[8 * k + 7]);
#if GLA_SPLIT_OPS
        // (the low halves: Sᵀ − Sᵀ_hi, k-step DK / 16 + k)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const float2 h = unpack2(sa[k][i]);
            sa[DK / 16 + k][i] = pack2(S[8 * k + 2 * i] - h.x, S[8 * k + 2 * i + 1] - h.y);
        }
#endif
    }
}
__device__ __forceinline__ void wg_output(WgStateA& sa, WgOut& o, const Tiles& s, int b, bool intra = true) {
    const int wg = wg_index();
#pragma unroll
    for (int i = 0; i < C / 2; ++i) o[i] = 0.f;
#if !GLA_WG_SMEM_S
    reg_fence(sa);
#endif
    reg_fence(o);  // defined before the fence, not sunk past it
    wg_fence();
    const elem_t* qt = GLA_REVERSE ? s.k(b) : s.q(b);  // Q̃ (the dv pass: K̂, the same [C][d_k] swizzled layout)
#pragma unroll
    for (int k = 0; k < DK / 16; ++k) {  // K = d: Q̃'s 16-column step k, in panel k / 4
#if GLA_WG_SMEM_S
        (void)sa;
        wg_out_t(o, wg_desc(s.st, wg * (64 * DK * 2) + (k / 4) * (64 * 128) + (k % 4) * 32, 16), wg_desc(qt, (k / 4) * PANEL + (k % 4) * 32, 16));
#else
        wg_out_s(o, sa[k], wg_desc(qt, (k / 4) * PANEL + (k % 4) * 32, 16));
#if GLA_SPLIT_OPS
        // (the dq / dk passes: + Sᵀ_lo Q̃_hiᵀ + Sᵀ_hi Q̃_loᵀ — the products to ~f32 precision; per value q and k are
        // raw, exact in the dtype: Sᵀ_lo Qᵀ only)
        wg_out_s(o, sa[DK / 16 + k], wg_desc(qt, (k / 4) * PANEL + (k % 4) * 32, 16));
        if (!GLA_VALUE_ROWS) wg_out_s(o, sa[k], wg_desc(GLA_REVERSE ? s.k_lo(b) : s.q_lo(b), (k / 4) * PANEL + (k % 4) * 32, 16));
#endif
#endif
    }
#pragma unroll
    for (int k = 0; k < C / 16; ++k) {  // K = token: V's rows 16k.. of this warpgroup's panel; A's columns 16k..
        if (!intra) break;  // (per value, a strong chunk: the producers' P instead; warp-uniform)
        const unsigned long long dv = wg_desc(s.v(b), wg * PANEL + k * 2048, PANEL);
#if GLA_REVERSE
        // (the dv pass: dOᵀ A — K = token t: A's rows 16k.., read N-major)
        wg_out_w(o, dv, wg_desc(s.A, k * 2048, PANEL));
#if SPLIT_A
        wg_out_w(o, dv, wg_desc(s.A_lo, k * 2048, PANEL));
#endif
#if GLA_SPLIT_OPS && GLA_VALUE_ROWS
        wg_out_w(o, wg_desc(s.v_lo(b), wg * PANEL + k * 2048, PANEL), wg_desc(s.A, k * 2048, PANEL));  // + Ṽ_loᵀ A_hi
#endif
#else
        wg_out_v(o, dv, wg_desc(s.A, k * 32, 16));
#if SPLIT_A
        wg_out_v(o, dv, wg_desc(s.A_lo, k * 32, 16));
#endif
#if GLA_SPLIT_OPS && GLA_VALUE_ROWS
        wg_out_v(o, wg_desc(s.v_lo(b), wg * PANEL + k * 2048, PANEL), wg_desc(s.A, k * 32, 16));  // + V̂_loᵀ A_hiᵀ
#endif
#endif
    }
    wg_commit();
}

// Stage wg_decay:  Sᵀ ← Sᵀ diag(exp(Γ_L))  (S ← diag(exp(Γ_L)) S; before any wgmma group is issued, so no
// register of a pending group is touched).
__device__ __forceinline__ void wg_decay(WgState& S, const Tiles& s) {
#if KEY_GATE == GATE_PER_KEY
    const int t = threadIdx.x & 3;
#pragma unroll
    for (int j = 0; j < DK / 8; ++j) {  // column d of Sᵀ is row d of S
        const float2 f = *reinterpret_cast<const float2*>(s.EGL + 8 * j + 2 * t);  // exp(Γ_L), from the producers
        S[4 * j] *= f.x; S[4 * j + 1] *= f.y; S[4 * j + 2] *= f.x; S[4 * j + 3] *= f.y;
    }
#elif GLA_VALUE_ROWS
    // (per value: row r of Sᵀ is value column r — accumulator element i is row 16 w + g + 8·((i >> 1) & 1))
    const int r = 64 * wg_index() + 16 * ((threadIdx.x >> 5) & 3) + ((threadIdx.x & 31) >> 2);
    const float f0 = s.EGL[r], f1 = s.EGL[r + 8];
#pragma unroll
    for (int i = 0; i < DK / 2; ++i) S[i] *= ((i >> 1) & 1) ? f1 : f0;
#else
    const float f = exp_nonpos(s.G[C - 1]);
#pragma unroll
    for (int i = 0; i < DK / 2; ++i) S[i] *= f;
#endif
}

// Stage wg_state (issue):  Sᵀ += Vᵀ K̂  — one wgmma group (the dv pass: S'ᵀ += dOᵀ Q̃; GLA_SPLIT_OPS: + Vᵀ K̂_lo).
__device__ __forceinline__ void wg_state_update(WgState& S, const Tiles& s, int b) {
    const int wg = wg_index();
    reg_fence(S);
    wg_fence();
#pragma unroll
    for (int k = 0; k < C / 16; ++k) {
        wg_state(S, wg_desc(s.v(b), wg * PANEL + k * 2048, PANEL), wg_desc(GLA_REVERSE ? s.q(b) : s.k(b), k * 2048, PANEL));  // (dv pass: Q̃)
#if GLA_SPLIT_OPS && GLA_VALUE_ROWS
        wg_state(S, wg_desc(s.v_lo(b), wg * PANEL + k * 2048, PANEL), wg_desc(GLA_REVERSE ? s.q(b) : s.k(b), k * 2048, PANEL));  // + V̂_loᵀ K
#elif GLA_SPLIT_OPS
        wg_state(S, wg_desc(s.v(b), wg * PANEL + k * 2048, PANEL), wg_desc(GLA_REVERSE ? s.q_lo(b) : s.k_lo(b), k * 2048, PANEL));  // + Vᵀ K̂_lo
#endif
    }
    wg_commit();
}

// Stage wg_store:  O = scale · Oᵀᵀ — transposed into the warpgroup's columns of the staging tile by stmatrix.trans,
// then written as 16-byte rows (masked to the sequence and d_v). Key split (KSPLIT > 1): O_s = scale · Oᵀᵀ of key
// slice s = head % KSPLIT, in f32 straight from the accumulators (gla_fwd_ksum adds the slices: O = Σ_s O_s); as a
// cluster (KS_CLUSTER), the slices add each other's halves over DSMEM (ks_exchange) and each writes half of O.
#if KS_CLUSTER
// Key split 2 as a 2-CTA cluster (__cluster_dims__(1, 2, 1) on the grid's heads: grid heads 2h and 2h + 1, the two
// key slices of head h, are CTA ranks 0 and 1 of one cluster). Each chunk, the sending warpgroup puts its f32
// partial output (scaled, the accumulators' fragment order) into the other CTA's exchange tile over distributed
// shared memory; the receiving one adds it to its own (O = O_0 + O_1, one rounding) and writes those columns of O.
// Two mbarriers of XCH_T arrivals a phase in each CTA, phase j = chunk j:
//   XFULL  (the receiver's): the sender's partial of chunk j is in the receiver's tile (remote release arrivals)
//   XEMPTY (the sender's):   the receiver has read it, the tile may take chunk j + 1 (remote release arrivals)
// A thread only ever exchanges its own accumulators (both CTAs run the same code on the same lane map).
__device__ __forceinline__ unsigned cluster_addr(unsigned a, unsigned rank) {  // a shared::cta address in CTA `rank`
    unsigned r;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(a), "r"(rank));
    return r;
}
__device__ __forceinline__ void xbar_wait(unsigned bar, unsigned parity) {  // acquire at cluster scope
    asm volatile("{\n .reg .pred p;\n XCH_WAIT:\n mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%0], %1;\n @!p bra XCH_WAIT;\n}\n"
                 ::"r"(bar), "r"(parity) : "memory");
}
__device__ __forceinline__ void xbar_arrive_remote(unsigned cluster_bar) {  // release at cluster scope
    asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];\n" ::"r"(cluster_bar) : "memory");
}
constexpr unsigned XCH_T = XCH_SPLIT ? 128 : NT;  // threads that exchange through one CTA's tile
// Before the roles start: XFULL, XEMPTY initialised, and visible to the other CTA before either arrives remotely.
__device__ __forceinline__ void ks_cluster_init(unsigned char* smem) {
    unsigned ranks;
    asm volatile("mov.u32 %0, %%cluster_nctarank;\n" : "=r"(ranks));
    if (ranks != 2) __trap();                                            // (launched without its cluster)
    if (threadIdx.x == 0) {
        for (int i = 0; i < 2; ++i) asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(smem + OFF_XBAR + 8 * i)), "r"(XCH_T) : "memory");
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
// After the roles: neither CTA of the pair exits while the other may still arrive on its barriers.
__device__ __forceinline__ void ks_cluster_exit() {
    asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
}
// Stage ks_exchange (consumers, chunk j of the segment). XCH_SPLIT (per-key gates): the CTA of rank w finishes
// consumer warpgroup w's 64 value columns — the other CTA's warpgroup w hands its partial over — so each CTA sends
// one warpgroup's partial, receives one and writes half of O (XFULL / XEMPTY: 128 arrivals a phase). Otherwise slice
// 1 hands all of x over and slice 0 writes O (NT arrivals). Returns whether this thread writes its part of O.
__device__ __forceinline__ bool ks_exchange(unsigned char* smem, const Seq& sq, int j, float (&x)[C / 2]) {
    static_assert(C % 8 == 0 && (!XCH_SPLIT || NWG == 2), "16-byte vectors of the accumulators; two consumer warpgroups");
    const unsigned full = smem_u32(smem + OFF_XBAR), empty = full + 8;
    const unsigned rank = sq.head & 1;                                  // = %cluster_ctarank (slice)
    const unsigned to = XCH_SPLIT ? (unsigned)wg_index() : 0u;        // the CTA that finishes these columns
    const unsigned mine = smem_u32(smem + OFF_XCH) + 16 * (threadIdx.x % XCH_T);  // vector u at + 16 · XCH_T · u
    if (rank != to) {                                                    // sender
        if (j > 0) xbar_wait(empty, (j - 1) & 1);                        // the receiver has read chunk j − 1's partial
        const unsigned dst = cluster_addr(mine, to);
#pragma unroll
        for (int u = 0; u < C / 8; ++u)
            asm volatile("st.shared::cluster.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"r"(dst + 16 * XCH_T * u), "f"(x[4 * u]), "f"(x[4 * u + 1]),
                         "f"(x[4 * u + 2]), "f"(x[4 * u + 3]) : "memory");
        xbar_arrive_remote(cluster_addr(full, to));
        return false;
    }
    xbar_wait(full, j & 1);                                              // the other slice's partial of chunk j is here
#pragma unroll
    for (int u = 0; u < C / 8; ++u) {
        float y[4];
        asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];\n" : "=f"(y[0]), "=f"(y[1]), "=f"(y[2]), "=f"(y[3]) : "r"(mine + 16 * XCH_T * u) : "memory");
#pragma unroll
        for (int e = 0; e < 4; ++e) x[4 * u + e] += y[e];
    }
    xbar_arrive_remote(cluster_addr(empty, rank ^ 1));                   // (the sender's XEMPTY)
    return true;
}
#endif

// A per-key gate's dk pass (GLA_ROW_SUMS, per value, reverse): what a consumer thread carries from chunk to chunk —
// d log α's running sums of its two key columns and its part of d params.
struct GateAcc {
    float carry[2] = {0.f, 0.f};
    float dp[NPARAM > 0 ? NPARAM : 1] = {};
    // (both passes) this chunk's rs_w (q or k) and, in the dk pass, the dq pass's q ⊙ dq at this thread's elements,
    // read by gate_prefetch from the warpgroup's tiles (rows_issue) while the chunk's wgmma groups run
    float w[C / 2], e[C / 2];
};
#if GLA_ROW_SUMS && GLA_VALUE_ROWS
constexpr int LDRW = 64 + 8, LDRE = 64 + 4;  // the tiles' padded rows (RW_E: a thread's (column, token) reads
                                             // hit distinct banks)
// Stage rows_issue (a per-key gate's passes, the consumers, at the top of chunk j before FULL): each warpgroup copies
// its 64 columns of the chunk's rs_w rows (q or k) and, in the dk pass, of the dq pass's q ⊙ dq (rs_out) into its
// tiles, 16 bytes a copy (cp.async, zero past the sequence; element by element where the tile passes d_v), so that the
// store reads shared memory rather than waiting on scattered 2-byte loads (those were 16 % of the dq pass's stall
// samples). The previous chunk's reads ended before its store's two warpgroup barriers.
__device__ __forceinline__ void rows_issue(const FwdArgs& a, const Seq& sq, int i0, unsigned char* smem) {
    const int wg = wg_index(), tid = threadIdx.x & 127, c0 = sq.v0 + 64 * wg, rows = min(C, sq.len - i0);
    elem_t* tw = reinterpret_cast<elem_t*>(smem + OFF_RW + wg * RW_STRIDE);
    float* te = reinterpret_cast<float*>(smem + OFF_RW + wg * RW_STRIDE + RW_E);
    const i64 row0 = (sq.bos + i0) * nvh(a) + vhead(sq), rstride = (i64)nvh(a) * a.dv;
    if (a.dv % VEC == 0 && c0 + 64 <= a.dv) {
        for (int idx = tid; idx < C * (64 / VEC); idx += 128) {
            const int r = idx / (64 / VEC), c = (idx % (64 / VEC)) * VEC;
            const bool ok = r < rows;
            cp_async16(tw + r * LDRW + c, a.rs_w + (ok ? row0 * a.dv + r * rstride + c0 + c : 0), ok);
        }
        if constexpr (GLA_REVERSE)
            for (int idx = tid; idx < C * 16; idx += 128) {
                const int r = idx / 16, c = (idx % 16) * 4;
                const bool ok = r < rows;
                cp_async16(te + r * LDRE + c, a.rs_out + (ok ? row0 * a.dv + r * rstride + c0 + c : 0), ok);
            }
    } else {
        for (int idx = tid; idx < C * 64; idx += 128) {
            const int r = idx / 64, c = idx % 64;
            const bool ok = r < rows && c0 + c < a.dv;
            const i64 off = ok ? row0 * a.dv + r * rstride + c0 + c : 0;
            tw[r * LDRW + c] = ok ? a.rs_w[off] : to_elem(0.f);
            if (GLA_REVERSE) te[r * LDRE + c] = ok ? a.rs_out[off] : 0.f;
        }
    }
    cp_async_commit();
}
// Stage wg_scale_values (a per-key gate's passes, the consumers, once slot b is full; value_operands' last step moved
// from the producers, which bound the passes — their FULL wait was a third of the consumers' time): the warpgroup's
// 64 value columns of V̂ = V ⊙ 2^(Γ_L − Γ) (the dk pass: Ṽ = V ⊙ 2^Γ; every exponent <= 0) over v in place, the low
// halves in v_lo (GLA_SPLIT_OPS), 8 columns a 16-byte vector, two a thread; then the async proxy fence and the
// warpgroup's barrier — its wgmma groups read every thread's rows. Γ, Γ_L: the producers' (s.G, s.GL).
__device__ __forceinline__ void wg_scale_values(const Tiles& s, int b) {
    const int wg = wg_index(), tid = threadIdx.x & 127;
    static_assert(C * 8 % 128 == 0, "whole vectors a thread");
#pragma unroll
    for (int idx = tid; idx < C * 8; idx += 128) {
        const int r = idx >> 3, e = 64 * wg + 8 * (idx & 7);
        float gl[8] = {};
        if constexpr (!GLA_REVERSE) {
            const float4 la = *reinterpret_cast<const float4*>(s.GL + e), lb = *reinterpret_cast<const float4*>(s.GL + e + 4);
            gl[0] = la.x; gl[1] = la.y; gl[2] = la.z; gl[3] = la.w; gl[4] = lb.x; gl[5] = lb.y; gl[6] = lb.z; gl[7] = lb.w;
        }
        scale_value8(s, b, r, e, gl);
    }
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");   // V̂, to the warpgroup's tensor cores
    asm volatile("bar.sync %0, 128;\n" ::"r"(BAR_WG + wg) : "memory");
}
// Stage gate_prefetch (after issuing the chunk's wgmma groups): this thread's rs_w and (dk pass) q ⊙ dq from the
// warpgroup's tiles — element i is column r + 8·((i >> 1) & 1), token 8·(i >> 2) + 2 t + (i & 1); 0 outside the
// sequence and d_v (rows_issue zero-filled them).
__device__ __forceinline__ void gate_prefetch(unsigned char* smem, GateAcc& acc) {
    const int wg = wg_index(), lane = threadIdx.x & 31, w = (threadIdx.x >> 5) & 3, t = lane & 3;
    const int r = 16 * w + (lane >> 2);
    cp_async_wait<0>();                                               // this thread's copies,
    asm volatile("bar.sync %0, 128;\n" ::"r"(BAR_WG + wg) : "memory");  // and the warpgroup's
    const elem_t* tw = reinterpret_cast<const elem_t*>(smem + OFF_RW + wg * RW_STRIDE);
    const float* te = reinterpret_cast<const float*>(smem + OFF_RW + wg * RW_STRIDE + RW_E);
#pragma unroll
    for (int i = 0; i < C / 2; ++i) {
        const int col = r + 8 * ((i >> 1) & 1), tok = 8 * (i >> 2) + 2 * t + (i & 1);
        acc.w[i] = to_f32(tw[tok * LDRW + col]);
        acc.e[i] = GLA_REVERSE ? te[tok * LDRE + col] : 0.f;
    }
}
#endif
// d params[head] += the consumers' parts (a warp's sum, one atomic f32 add a warp), after the sequence's last chunk.
__device__ __forceinline__ void gate_acc_flush(const FwdArgs& a, const Seq& sq, const GateAcc& acc) {
    if (NPARAM > 0 && a.dparams)
        for (int u = 0; u < NPARAM; ++u) {
            float x = acc.dp[u];
#pragma unroll
            for (int m = 16; m > 0; m >>= 1) x += __shfl_xor_sync(0xffffffffu, x, m);
            if ((threadIdx.x & 31) == 0 && x != 0.f) atomicAdd(a.dparams + (i64)vhead(sq) * NPARAM + u, x);
        }
}

// Per value (GLA_VALUE_ROWS) the store calls `release` — wait for the state group, free the slot — as soon as it has
// read what it needs of the slot (Γ, Γ_L, P, the dk pass's logits), before its global writes: the producer group
// that refills the slot then loads its next chunk while this store writes out (the passes' two slots, one a group,
// otherwise serialise a group's next load behind the consumers' whole store). Other kernels release after the store.
template <class Release>
__device__ __forceinline__ void wg_store(const FwdArgs& a, const Seq& sq, int i0, int j, const WgOut& o, unsigned char* smem, const Tiles& s, GateAcc& acc,
                                         Release&& release) {
    const int wg = wg_index(), w = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31;
    elem_t* os = reinterpret_cast<elem_t*>(smem + OFF_OS);
    float x[C / 2];
#if GLA_ROWS_SCALED
    // Row-scaled chunks (scalar gates, see rows_scaled): O_i = exp(Γ_i) · o_i; element e is token 8 (e >> 2) + 2 t + (e & 1).
    {
        const bool rows = rows_scaled(s.G[C - 1]);
        float f[C / 4];
#pragma unroll
        for (int m = 0; m < C / 4; ++m) f[m] = rows ? a.scale * exp_nonpos(s.G[8 * (m >> 1) + 2 * (lane & 3) + (m & 1)]) : a.scale;
#pragma unroll
        for (int i = 0; i < C / 2; ++i) x[i] = f[2 * (i >> 2) + (i & 1)] * o[i];
    }
#elif GLA_VALUE_ROWS
    // Per value (value_operands): element i is value column r + 8·((i >> 1) & 1), token 8·(i >> 2) + 2 t + (i & 1);
    // mild chunks O = 2^(Γ − Γ_L) ⊙ o, strong ones O = 2^Γ ⊙ o + P (GLA_REVERSE: 2^(−Γ) ⊙ o, and 2^(Γ_L − Γ) ⊙ o + P).
    {
        const bool mild = value_mild(s);
        const int r = 64 * wg + 16 * w + (lane >> 2), t = lane & 3;
#pragma unroll
        for (int i = 0; i < C / 2; ++i) {
            const int e = r + 8 * ((i >> 1) & 1), tok = 8 * (i >> 2) + 2 * t + (i & 1);
            const float gam = s.G[tok * LDG + e];
            if (GLA_REVERSE) x[i] = a.scale * (mild ? exp_span(-gam) * o[i] : fmaf(exp_nonpos(s.GL[e] - gam), o[i], s.P[tok * BV + e]));
            else x[i] = a.scale * (mild ? exp_span(gam - s.GL[e]) * o[i] : fmaf(exp_nonpos(gam), o[i], s.P[tok * BV + e]));
        }
    }
#if !(GLA_ROW_SUMS && GLA_REVERSE)
    release();  // the slot is read (the dk pass: after d logits, which reads the logits from it)
#endif
#else
    (void)s;
#pragma unroll
    for (int i = 0; i < C / 2; ++i) x[i] = a.scale * o[i];
#endif
#if GLA_ROW_SUMS && GLA_VALUE_ROWS
    // (a per-key gate's dq / dk passes) The gate's gradient by key column e, from the f32 accumulators before o is
    // rounded: the dq pass writes E = q ⊙ dq, the dk pass turns it into d log α_se = Σ_{t>=s} (E − k ⊙ dk)_te
    // (chunks come last to first: the running sum of the later chunks, `carry`, a (row, thread); within the chunk a
    // row's tokens are 8 m + 2 t + u — groups m, the quad's lanes t — so a suffix sum over the quad by shuffles, then
    // the groups from the last), then d logits = d log α · ∂log α/∂x from the logits still in the slot, and its part of
    // d params. Element i is column r + 8·((i >> 1) & 1), token 8·(i >> 2) + 2 t + (i & 1).
    static_assert(KSPLIT == 1, "the dq / dk passes: no key split");
    {
        const int t = lane & 3, r = sq.v0 + 64 * wg + 16 * w + (lane >> 2);
        float ev[C / 2];
#pragma unroll
        for (int i = 0; i < C / 2; ++i) {
            const int col = r + 8 * ((i >> 1) & 1), tok = 8 * (i >> 2) + 2 * t + (i & 1);
            const bool ok = i0 + tok < sq.len && col < a.dv;
            const i64 off = ((sq.bos + i0 + tok) * nvh(a) + vhead(sq)) * (i64)a.dv + col;
            const float wx = acc.w[i] * x[i];  // (gate_prefetch: 0 where !ok)
            if (GLA_REVERSE) ev[i] = acc.e[i] - wx;
            else if (ok) a.rs_out[off] = wx;
        }
#if GLA_REVERSE
        {
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                float run = acc.carry[h];
#pragma unroll
                for (int m = C / 8 - 1; m >= 0; --m) {
                    const float e0 = ev[4 * m + 2 * h], e1 = ev[4 * m + 2 * h + 1], pair = e0 + e1;
                    const float p1 = __shfl_down_sync(0xffffffffu, pair, 1, 4);
                    float suf = pair + (t < 3 ? p1 : 0.f);
                    const float p2 = __shfl_down_sync(0xffffffffu, suf, 2, 4);
                    suf += t < 2 ? p2 : 0.f;                    // Σ pairs of lanes >= t
                    const float total = __shfl_sync(0xffffffffu, suf, 0, 4);
                    ev[4 * m + 2 * h + 1] = run + (suf - pair) + e1;
                    ev[4 * m + 2 * h] = ev[4 * m + 2 * h + 1] + e0;
                    run += total;
                }
                acc.carry[h] = run;
            }
            if (a.dg) {
                const float* p = a.params ? a.params + (i64)vhead(sq) * NPARAM : nullptr;
                const elem_t* xs = s.x(j % STAGES);  // (the raw logits [C][LDV], as gate_cumsum read them)
                // Branch-free, element by element: an element outside the sequence or d_v takes logit 0 (its slot
                // entry may be anything) and weight 0, and only its store is skipped — no control flow around an
                // element, so the elements' gate derivatives (MUFU chains) interleave rather than run one by one. The
                // stores come in a second loop: a global store the compiler cannot prove apart from the slot would
                // keep each later logit's shared-memory read behind it.
                float dg[C / 2];
#pragma unroll
                for (int i = 0; i < C / 2; ++i) {
                    const int col = r + 8 * ((i >> 1) & 1), tok = 8 * (i >> 2) + 2 * t + (i & 1);
                    const bool ok = i0 + tok < sq.len && col < a.dv;
                    const float e = ok ? ev[i] : 0.f;
                    float dp[NPARAM > 0 ? NPARAM : 1];
                    dg[i] = e * gate_grads(ok ? to_f32(xs[tok * LDV + col - sq.v0]) : 0.f, p, dp);
#pragma unroll
                    for (int u = 0; u < NPARAM; ++u) acc.dp[u] = fmaf(e, dp[u], acc.dp[u]);
                }
#pragma unroll
                for (int i = 0; i < C / 2; ++i) {
                    const int col = r + 8 * ((i >> 1) & 1), tok = 8 * (i >> 2) + 2 * t + (i & 1);
                    if (i0 + tok < sq.len && col < a.dv) a.dg[((sq.bos + i0 + tok) * nvh(a) + vhead(sq)) * (i64)a.dv + col] = to_elem(dg[i]);
                }
            }
        }
        release();  // the slot is read (its logits held in registers from the top of the store spilled 56–136 bytes)
#endif
    }
#elif GLA_ROW_SUMS
    // (the backward's dq / dk passes) The gate's row sums from the f32 accumulators, before o is rounded: per token
    // and consumer warpgroup u (its 64 columns), Σ_e rs_w ⊙ o — the dq pass writes them, the dk pass subtracts its
    // own: Σ (q ⊙ dq − k ⊙ dk), terms that nearly cancel, for gla_bwd_gate's reverse sum. A thread's element e is
    // value row 16 w + g + 8·((e >> 1) & 1), token 8·(e >> 2) + 2 t + (e & 1): its two rows a token, then the 8 lanes of
    // a token (g) by shuffles, then the 4 warps through shared memory.
    static_assert(KSPLIT == 1, "the dq / dk passes: no key split");
    {
        const int g = lane >> 2, t = lane & 3, col0 = sq.v0 + 64 * wg + 16 * w + g;
        float part[C / 4];  // token 8 (m >> 1) + 2 t + (m & 1)
#pragma unroll
        for (int m = 0; m < C / 4; ++m) {
            const int row = 8 * (m >> 1) + 2 * t + (m & 1);
            const i64 base = ((sq.bos + i0 + row) * nvh(a) + vhead(sq)) * (i64)a.dv;
            float acc = 0.f;
#pragma unroll
            for (int h = 0; h < 2; ++h) {  // rows col0, col0 + 8: elements 4 (m >> 1) + 2 h + (m & 1)
                const int col = col0 + 8 * h;
                if (i0 + row < sq.len && col < a.dv) acc = fmaf(to_f32(a.rs_w[base + col]), x[4 * (m >> 1) + 2 * h + (m & 1)], acc);
            }
#pragma unroll
            for (int o = 4; o < 32; o <<= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
            part[m] = acc;
        }
        float* rs = reinterpret_cast<float*>(smem + OFF_RS) + (4 * wg + w) * C;
        if (g == 0)
#pragma unroll
            for (int m = 0; m < C / 4; ++m) rs[8 * (m >> 1) + 2 * t + (m & 1)] = part[m];
        asm volatile("bar.sync %0, 128;\n" ::"r"(BAR_WG + wg) : "memory");
        const int r = threadIdx.x & 127;  // (the warpgroup's thread r sums token r)
        const int u = (sq.v0 + 64 * wg) / 64;
        if (r < C && i0 + r < sq.len && sq.v0 + 64 * wg < a.dv) {
            const float* rw = reinterpret_cast<const float*>(smem + OFF_RS) + 4 * wg * C + r;
            const float sum = (rw[0] + rw[C]) + (rw[2 * C] + rw[3 * C]);
            float* out = a.rs_out + ((i64)u * a.cu_seqlens[a.n_seqs] + sq.bos + i0 + r) * nvh(a) + vhead(sq);
            *out = GLA_REVERSE ? *out - sum : sum;  // (dk pass: after the dq pass, stream-ordered)
        }
        // (rs is rewritten only after the staging store's two barriers below)
    }
#endif
#if KS_CLUSTER
    if (!ks_exchange(smem, sq, j, x)) return;                            // O = O_0 + O_1 (the receiving slice writes it)
#elif KSPLIT > 1
    {
        (void)os;
        (void)j;
        float* part = ks_slice_partial(a, sq);
        const int g = lane >> 2, t = lane & 3;
#pragma unroll
        for (int e = 0; e < C / 2; ++e) {  // element e: value row 16 w + g + 8·((e >> 1) & 1), token 8·(e >> 2) + 2 t + (e & 1)
            const int col = sq.v0 + 64 * wg + 16 * w + g + 8 * ((e >> 1) & 1), row = 8 * (e >> 2) + 2 * t + (e & 1);
            if (i0 + row < sq.len && col < a.dv) part[((sq.bos + i0 + row) * nvh(a) + vhead(sq)) * (i64)a.dv + col] = x[e];
        }
        return;
    }
#endif
    asm volatile("bar.sync %0, 128;\n" ::"r"(BAR_WG + wg) : "memory");  // the last chunk's rows have been written out
    const int m = lane >> 3, rr = lane & 7;
#pragma unroll
    for (int p = 0; p < C / 16; ++p) {  // 8x8 matrices (h = m & 1: rows +8h of the warp's 16; token block 2p + m/2)
        unsigned r[4];
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            const int j = 2 * p + (q >> 1), h = q & 1;
            r[q] = pack2(x[4 * j + 2 * h], x[4 * j + 2 * h + 1]);
        }
        const elem_t* dst = os + (8 * (2 * p + (m >> 1)) + rr) * LDO + 64 * wg + 16 * w + 8 * (m & 1);
        asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(smem_u32(dst)),
                     "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3]) : "memory");
    }
    asm volatile("bar.sync %0, 128;\n" ::"r"(BAR_WG + wg) : "memory");
    const bool full = a.dv % VEC == 0 && sq.v0 + BV <= a.dv;
    for (int idx = threadIdx.x & 127; idx < C * (64 / VEC); idx += 128) {
        const int row = idx / (64 / VEC), col = 64 * wg + (idx % (64 / VEC)) * VEC;
        if (i0 + row >= sq.len) continue;
        const elem_t* src = os + row * LDO + col;
        elem_t* dst = a.o + ((sq.bos + i0 + row) * nvh(a) + vhead(sq)) * (i64)a.dv + sq.v0 + col;  // (O has the real heads)
        if (full) *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src);
        else
            for (int u = 0; u < VEC; ++u)
                if (sq.v0 + col + u < a.dv) dst[u] = src[u];
    }
}

#if GLA_WG_SCORES
// Stage wg_scores (the producer warpgroup, mild chunks; gate_decays_vec wrote [Q̃; K̃] in tf32 and fenced it):
//   A = (Q̃ K̃ᵀ) ⊙ M as ONE tf32 wgmma group:  D = [Q̃; K̃] K̃ᵀ  (m64 n32 k8 steps; rows C.. of D are K̃ K̃ᵀ, unused)
// Warps 0, 1 hold rows 0..C of D: they mask causally and store A as hi + lo halves. (Interleaving Q̃'s and K̃'s 8-row
// groups so that all four warps store A — B then the odd groups, a 2048-byte group stride — measured slower:
// 0.318 vs 0.302 ms at 8×4096×16×128, benches/NOTES.md.)
template <class P>
__device__ __forceinline__ void wg_scores(const Tiles& s) {
    static_assert(P::NT == 128 && C == 32, "one producer warpgroup, C = 32: [Q̃; K̃] is one m64 operand");
    const int w = warp_uniform(P::tid() >> 5), lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;  // (uniform: no spill)
    float d[C / 2];  // m64 nC: element e is row 16 w + g + 8·((e >> 1) & 1), column 8·(e >> 2) + 2 t + (e & 1)
#pragma unroll
    for (int e = 0; e < C / 2; ++e) d[e] = 0.f;
    // (The tile pointer passes through an empty asm: the descriptors are then not loop-invariant, so the compiler
    // does not keep all 2·DK/8 of them live across the producer's whole chunk loop.)
    const float* qk = s.qk;
    asm volatile("" : "+l"(qk));
    reg_fence(d);
    wg_fence();
#pragma unroll
    for (int k = 0; k < DK / 8; ++k) {  // K = d: 8-column (32-byte) step k in panel k / 4 (32 f32 columns, 2C rows)
        const unsigned off = (k / 4) * (2 * C * 128) + (k % 4) * 32;
        wg_scores_mma(d, wg_desc(reinterpret_cast<const elem_t*>(qk), off, 16), wg_desc(reinterpret_cast<const elem_t*>(qk), off + C * 128, 16));
    }
    wg_commit();
    wg_wait<0>();
    reg_fence(d);
    if (w < 2) {
#pragma unroll
        for (int e = 0; e < C / 2; e += 2) {
            const int i = 16 * w + g + 8 * ((e >> 1) & 1), j = 8 * (e >> 2) + 2 * t;
            st_pair_split(s.A + AO(i, j), s.A_lo + AO(i, j), j <= i ? d[e] : 0.f, j + 1 <= i ? d[e + 1] : 0.f);
        }
    }
}
// Stage exact_scores_vec (the producer warpgroup, a chunk whose decay span is over SPAN_MAX; gate_decays_vec's lane
// map: thread (octet o, segment m) holds Γ of key columns 8o .. 8o + 7 of rows r0 .. r0 + SR − 1 in registers, and q,
// k are raw). §4.3's secondary chunking with blocks as large as the decays allow, on the producers' tensor cores:
//   blocks of s rows (s = C, C/2, …, 1: the largest whose every key column spans at most BLOCK_SPAN; the group's
//   vote), each factorised about its midpoint R = (Γ_first + Γ_last) / 2 — every factor within 2^±BLOCK_SPAN/2:
//     A_ij = Σ_d [q_id 2^(Γ_id − R_d)] [k_jd 2^(R_d − Γ_jd)]          i, j in one block, j <= i
//   the pairs across blocks by levels h = C/2, …, s: the block of 2h rows, i in its upper half (first row m), j in
//   the lower:
//     A_ij = Σ_d [q_id 2^(Γ_id − Γ_md)] [k_jd 2^(Γ_md − Γ_jd)]          (both exponents <= 0)
//   a level whose every factor is below 2^−NEGLIGIBLE (each boundary step γ_m < −NEGLIGIBLE) is skipped: its scores
//   are 0 (writer.rs, NEGLIGIBLE, bounds the error).
// Round 1: [Q_b; K_b] K_bᵀ (m64 n32, as wg_scores); then one round a live level: X_h in one half of the tile, [X_h;
// X_h'] X_hᵀ (m64 n32). Every pair of A is stored by one round: the blocks' round writes the pairs within blocks and zeros
// elsewhere, a level's round (after a barrier) its own pairs over those zeros. (Two levels a round as one m64 n64
// product spilled 708 bytes: 32 more accumulators beside Γ's 32 registers.) The weak decays' chunks that miss
// SPAN_MAX (up to BLOCK_SPAN) take one round, RWKV-6 at logits ~ N(0, 1) one (s = 32) on most chunks; constant −60 one (every
// level negligible). Where a level's reference row m lies in another segment, a factor is a segment-local one times
// one exponential a column, all <= 1:
//   2^(Γ_t − Γ_m) = 2^(Γ_t − Γ_r0) · 2^(Γ_r0 − Γ_m)        2^(Γ_m − Γ_t) = 2^(Γ_m − Γ_last) · 2^(Γ_last − Γ_t)
// Then the chunk's operands for the consumers, as a mild chunk leaves them: Q̃ = Q ⊙ 2^Γ, K̂ = K ⊙ 2^(Γ_L − Γ).
template <class G, int SR>
__device__ __forceinline__ void exact_scores_vec(const Tiles& s, int b, const float (&g)[SR][8]) {
    static_assert(G::NT == 128 && C == 32, "one producer warpgroup, C = 32: two C-row levels are one m64 operand");
    constexpr int OCT = DK / 8, SEGS = G::NT / OCT, OPW = 32 / SEGS;
    static_assert(SR == C / SEGS && (SR == 2 || SR == 4), "gate_decays_vec's lane map");
    const int tid = opaque<NT + PT>(G::tid()), w = warp_uniform(tid >> 5), lane = tid & 31, seg = lane / OPW;
    const int d = (w * OPW + lane % OPW) * 8, r0 = seg * SR, gq = lane >> 2, tq = lane & 3;
    const elem_t* q = s.q(b);
    const elem_t* k = s.k(b);
    auto lane_of = [&](int sg) { return sg * OPW + lane % OPW; };  // segment sg's thread of these columns

    // The vote: bit log2(s) when a block of s rows spans over BLOCK_SPAN in a column of this thread (NaN too), bit
    // 8 + log2(h) when level h has a boundary step of this thread's rows that is not negligible. Each test runs once
    // on the maximum (minimum) over this thread's 8 columns, NaN propagating (max.NaN / min.NaN): over a column's
    // values that is the per-column test's OR.
    unsigned word = 0;
    auto over = [](float span) { return !(span <= BLOCK_SPAN); };
    float hi[SR], lo[SR], s4 = 0.f;  // the step into row r0 + u: max and min over the columns; Γ_r0 − Γ_(r0+3)'s max
#pragma unroll
    for (int c = 0; c < 8; ++c) {
        const float before = __shfl_up_sync(0xffffffffu, g[SR - 1][c], OPW);  // (the previous segment's last row)
#pragma unroll
        for (int u = 0; u < SR; ++u) {
            const float step = g[u][c] - (u > 0 ? g[u > 0 ? u - 1 : 0][c] : before);
            hi[u] = c ? gla_max_nan(hi[u], step) : step;
            lo[u] = c ? gla_min_nan(lo[u], step) : step;
        }
        if (SR == 4) s4 = c ? gla_max_nan(s4, g[0][c] - g[SR - 1][c]) : g[0][c] - g[SR - 1][c];
    }
#pragma unroll
    for (int u = 1; u < SR; u += 2)  // blocks of 2 rows (u − 1, u): span −step
        if (over(-lo[u])) word |= 2u;
    if (SR == 4 && over(s4)) word |= 4u;
#pragma unroll
    for (int u = 0; u < SR; ++u) {  // boundary steps: row r's level is its lowest set bit
        const int r = r0 + u;
        if (r > 0 && !(hi[u] < -NEGLIGIBLE)) word |= (unsigned)(r & -r) << 8;
    }
#pragma unroll
    for (int o = 1; o < SEGS; o <<= 1) {  // blocks of 2o segments: from the block's first row to this thread's last
        const int f = seg & ~(2 * o - 1);  // (the block's whole span at its last segment; Γ does not increase down a
        float m = 0.f;                     // column, so the other segments' partial spans are no larger)
#pragma unroll
        for (int c = 0; c < 8; ++c) {
            const float x = __shfl_sync(0xffffffffu, g[0][c], lane_of(f)) - g[SR - 1][c];
            m = c ? gla_max_nan(m, x) : x;
        }
        if (over(m)) word |= (unsigned)(2 * o * SR);
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) word |= __shfl_xor_sync(0xffffffffu, word, o);
    static_assert(TOT_BYTES >= 16, "the vote's four words");
    unsigned* votes = reinterpret_cast<unsigned*>(s.tot) + 128;  // (the group's segment-totals words: unused by the vec stages)
    if (lane == 0) votes[w] = word;
    G::sync();
    word = votes[0] | votes[1] | votes[2] | votes[3];  // (rewritten only after this chunk's next group barrier)
    const unsigned fail = word & 0x3fu;
    const int bs = fail ? 1 << (__ffs(fail) - 2) : C;  // rows a block: the largest that no thread's columns fail
    unsigned levels = (word >> 8) & (unsigned)(C - 1) & ~(unsigned)(bs - 1);  // live levels h >= bs, bit h

    const float* qk = s.qk;
    asm volatile("" : "+l"(qk));
    // The level rounds' stores: level h's pairs (i, j), (i, j + 1) of D's row i (h = 1: (i, i − 1) alone — its pair
    // partner is the diagonal, the blocks' round's).
    auto store_level = [&](int h, int i, int j, float x, float y) {
        if (h >= 2) {
            if ((i & ~(2 * h - 1)) == (j & ~(2 * h - 1)) && (i & h) && !(j & h))
                st_pair_split(s.A + AO(i, j), s.A_lo + AO(i, j), x, y);
        } else if ((i & 1) && j + 1 == i) {
            store_split(s, i, j, x);
        }
    };

    // Round 1, the blocks: Q_b into the tile's first half, K_b into the second.
    {
        // R of rows 0, 1 (ra) and of rows 2, 3 (rb) of this thread's: the block's where it spans segments (one for
        // all its rows), a row pair's (bs = 2 < SR); bs = 1: the row itself (exponent 0, selected below).
        float ra[8], rb[8];
        if (bs >= SR) {
            const int f = seg & ~(bs / SR - 1), l = f + bs / SR - 1;
#pragma unroll
            for (int c = 0; c < 8; ++c)
                ra[c] = rb[c] = 0.5f * (__shfl_sync(0xffffffffu, g[0][c], lane_of(f)) + __shfl_sync(0xffffffffu, g[SR - 1][c], lane_of(l)));
        } else {
#pragma unroll
            for (int c = 0; c < 8; ++c) {
                ra[c] = 0.5f * (g[0][c] + g[1][c]);
                rb[c] = 0.5f * (g[SR > 2 ? 2 : 0][c] + g[SR > 2 ? 3 : 1][c]);
            }
        }
#pragma unroll
        for (int u = 0; u < SR; ++u) {
            float x[8], y[8];
            load_vec(q + KO(r0 + u, d), x);
            load_vec(k + KO(r0 + u, d), y);
#pragma unroll
            for (int c = 0; c < 8; ++c) {
                const float t = bs == 1 ? 0.f : g[u][c] - (u < 2 ? ra[c] : rb[c]);  // |t| <= BLOCK_SPAN / 2 (the vote)
                x[c] *= GLA_EXP2(t);
                y[c] *= GLA_EXP2(-t);
            }
            const int o = swz32_rows<2 * C>(r0 + u, d);  // (the other three as gate_decays_vec's)
            float* qr = s.qk + o;
            float* qr4 = s.qk + (o ^ 4);
            float* kr = s.qk + (o + 32 * C);
            float* kr4 = s.qk + ((o ^ 4) + 32 * C);
            *reinterpret_cast<float4*>(qr) = make_float4(tf32_half_ulp(x[0]), tf32_half_ulp(x[1]), tf32_half_ulp(x[2]), tf32_half_ulp(x[3]));
            *reinterpret_cast<float4*>(qr4) = make_float4(tf32_half_ulp(x[4]), tf32_half_ulp(x[5]), tf32_half_ulp(x[6]), tf32_half_ulp(x[7]));
            *reinterpret_cast<float4*>(kr) = make_float4(tf32_half_ulp(y[0]), tf32_half_ulp(y[1]), tf32_half_ulp(y[2]), tf32_half_ulp(y[3]));
            *reinterpret_cast<float4*>(kr4) = make_float4(tf32_half_ulp(y[4]), tf32_half_ulp(y[5]), tf32_half_ulp(y[6]), tf32_half_ulp(y[7]));
        }
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // [Q_b; K_b], to the tensor cores
        G::sync();
        float dd[C / 2];  // m64 nC: element e is row 16 w + gq + 8·((e >> 1) & 1), column 8·(e >> 2) + 2 tq + (e & 1)
#pragma unroll
        for (int e = 0; e < C / 2; ++e) dd[e] = 0.f;
        reg_fence(dd);
        wg_fence();
#pragma unroll
        for (int kk = 0; kk < DK / 8; ++kk) {
            const unsigned off = (kk / 4) * (2 * C * 128) + (kk % 4) * 32;
            wg_scores_mma(dd, wg_desc(reinterpret_cast<const elem_t*>(qk), off, 16), wg_desc(reinterpret_cast<const elem_t*>(qk), off + C * 128, 16));
        }
        wg_commit();
        wg_wait<0>();
        reg_fence(dd);
        if (w < 2) {  // D's rows of Q_b
#pragma unroll
            for (int e = 0; e < C / 2; e += 2) {
                const int i = 16 * w + gq + 8 * ((e >> 1) & 1), j = 8 * (e >> 2) + 2 * tq;
                st_pair_split(s.A + AO(i, j), s.A_lo + AO(i, j), j <= i && (i ^ j) < bs ? dd[e] : 0.f,
                              j + 1 <= i && (i ^ (j + 1)) < bs ? dd[e + 1] : 0.f);
            }
        }
    }

    // The live levels, one a round. Level h's operand X_h (every row scaled once: query rows of upper halves, key
    // rows of lower halves) goes in tf32 into the tile's first half, and its pairs come out of [X_h; ·] X_hᵀ (m64 n32)
    // in D's first 32 rows (warps 0, 1). A thread rewrites the half after its wait for the last round's product:
    // wgmma is one warpgroup-wide operation, so that wait ends only once every warp has issued it and it has read its
    // operands. (The halves in turn spilled 232–964 bytes of the producers' registers.)
    auto build_level = [&](int h) {
        float* xh = s.qk;  // rows 0 .. C of every 32-column panel (swz32_rows<2C>)
        float cross[8];                    // levels across segments: 2^(Γ_r0 − Γ_m) (query) or 2^(Γ_m − Γ_last) (key)
        bool query_seg = false;
        if (h >= SR) {
            const int m = (r0 & ~(2 * h - 1)) + h;  // the block's upper half's first row: a segment's first
            query_seg = r0 >= m;
#pragma unroll
            for (int c = 0; c < 8; ++c) {
                const float gm = __shfl_sync(0xffffffffu, g[0][c], lane_of(m / SR));
                // (one exponential of the selected exponent: a warp's lanes take both sides, so a select of two
                // exponentials would evaluate both)
                cross[c] = exp_nonpos(query_seg ? g[0][c] - gm : gm - g[SR - 1][c]);
            }
        }
#pragma unroll
        for (int u = 0; u < SR; ++u) {
            float f[8];
            bool query;
            if (h >= SR) {
                query = query_seg;
#pragma unroll
                for (int c = 0; c < 8; ++c)
                    f[c] = exp_nonpos(query ? g[u][c] - g[0][c] : g[SR - 1][c] - g[u][c]) * cross[c];  // (2^0 = 1 at the ends)
            } else {  // h = 1, or 2 with SR = 4: the block lies in this thread's rows, m = r0 + mu
                constexpr int M2 = SR == 4 ? 2 : 1;  // (h = 2 reaches here only with SR = 4)
                const int mu = (u & ~(2 * M2 - 1)) + M2, mu1 = u | 1;  // (compile-time register indices)
                query = h == 1 ? u >= mu1 : u >= mu;
#pragma unroll
                for (int c = 0; c < 8; ++c) {
                    const float gm = h == 1 ? g[mu1][c] : g[mu][c];
                    f[c] = u == (h == 1 ? mu1 : mu) ? 1.f : exp_nonpos(query ? g[u][c] - gm : gm - g[u][c]);
                }
            }
            float x[8];
            load_vec((query ? q : k) + KO(r0 + u, d), x);
            const int o = swz32_rows<2 * C>(r0 + u, d);
            float* r = xh + o;
            float* r4 = xh + (o ^ 4);
            *reinterpret_cast<float4*>(r) = make_float4(tf32_half_ulp(x[0] * f[0]), tf32_half_ulp(x[1] * f[1]), tf32_half_ulp(x[2] * f[2]), tf32_half_ulp(x[3] * f[3]));
            *reinterpret_cast<float4*>(r4) = make_float4(tf32_half_ulp(x[4] * f[4]), tf32_half_ulp(x[5] * f[5]), tf32_half_ulp(x[6] * f[6]), tf32_half_ulp(x[7] * f[7]));
        }
    };
    while (levels) {  // (group-uniform: the vote) the highest level first
        const int h = 1 << (31 - __clz(levels));
        levels &= ~(unsigned)h;
        build_level(h);  // (the last round's product, which read this half, is over: every warp waited for it)
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // X_h, to the tensor cores
        G::sync();
        float dd[C / 2];
#pragma unroll
        for (int e = 0; e < C / 2; ++e) dd[e] = 0.f;
        reg_fence(dd);
        wg_fence();
#pragma unroll
        for (int kk = 0; kk < DK / 8; ++kk) {  // D = [X_h; ·] X_hᵀ
            const unsigned off = (kk / 4) * (2 * C * 128) + (kk % 4) * 32;
            wg_scores_mma(dd, wg_desc(reinterpret_cast<const elem_t*>(qk), off, 16), wg_desc(reinterpret_cast<const elem_t*>(qk), off, 16));
        }
        wg_commit();
        wg_wait<0>();
        reg_fence(dd);
        if (w < 2)  // D's rows of X_h
#pragma unroll
            for (int e = 0; e < C / 2; e += 2) {
                const int i = 16 * w + gq + 8 * ((e >> 1) & 1), j = 8 * (e >> 2) + 2 * tq;
                store_level(h, i, j, dd[e], dd[e + 1]);
            }
    }
    // Q̃ = Q ⊙ 2^Γ and K̂ = K ⊙ 2^(Γ_L − Γ) over this thread's own elements (no other thread reads them). Γ_L comes
    // back from the slot (gate_decays_vec stored it before the vote; in registers it would be live through the rounds).
    const float4 gla = *reinterpret_cast<const float4*>(s.GL + d), glb = *reinterpret_cast<const float4*>(s.GL + d + 4);
    const float gl_[8] = {gla.x, gla.y, gla.z, gla.w, glb.x, glb.y, glb.z, glb.w};
#pragma unroll
    for (int u = 0; u < SR; ++u) {
        float x[8], y[8];
        load_vec(q + KO(r0 + u, d), x);
        load_vec(k + KO(r0 + u, d), y);
#pragma unroll
        for (int c = 0; c < 8; ++c) {
            x[c] *= exp_nonpos(g[u][c]);
            y[c] *= exp_nonpos(gl_[c] - g[u][c]);
        }
        store_vec(s.q(b) + KO(r0 + u, d), x);
        store_vec(s.k(b) + KO(r0 + u, d), y);
    }
    G::sync();  // (every warp's part of the last round's wgmma is over before the group's next chunk rewrites the tile)
}
#endif
