// ---------------------------------------------------------------------------------------------------------------
// Entry points. Each is a short tile program over the stages above.
// ---------------------------------------------------------------------------------------------------------------

// The chunk's scores A and decayed operands. Per-key gates take the one-matmul factorised form on mild chunks
// (decay span <= SPAN_MAX: intra_scores_factored) and the exact sub-chunk form (§4.3) otherwise.
template <class G = CTA>
__device__ __forceinline__ void intra_and_operands(const Tiles& s, int b, bool mild) {
#if KEY_GATE == GATE_PER_KEY
    if (mild) {
        decay_operands<G>(s, b, true, true);                 // Q̃ = Q ⊙ exp(Γ), K̃ = K ⊙ exp(−Γ), K̂
        G::sync();
        intra_scores_factored<G>(s, b);                      // A = (Q̃ K̃^T) ⊙ M
        return;
    }
#endif
    (void)mild;
    intra_scores<G>(s, b);                                   // A = (Q K^T) ⊙ D  (decay-masked, §4.3)
    decay_operands<G>(s, b, true, false);                    // Q̃ = Q ⊙ exp(Γ), K̂ = K ⊙ exp(Γ_L − Γ)
}

#if GLA_FUSED
// Two-level scan for narrow problems (segs = S > 1): sequence n is cut into S segments of whole chunks — a short
// lead segment 0 (a.lead thousandths of a later one), then S − 1 equal ones; slot z = n·S + p of the workspace.
//   pass 1 (gla_fwd_seg_states / gla_fwd_ws_states, p = 0 .. S − 2): p = 0 runs the fused forward of the lead from
//           S_0 and writes its final state E_0 to slot 0; p ≥ 1 computes ΔS_p = the state segment p alone produces
//           from S = 0, and its decay Σ Γ_L (log2 units)
//   gla_fwd_seg_combine: S_init(1) = E_0;  S_init(p+1) = diag(exp(Σ Γ_L(p))) S_init(p) + ΔS_p   (sequential in p)
//   pass 2 (gla_fwd_fused / gla_fwd_ws, p = 1 .. S − 1): every later segment from its S_init, all in parallel; the
//           last one writes the final state.
// The workspace a.states holds E_0 and ΔS_p (replaced in place by S_init(p)), then the decays. (The host's
// gla_codegen::segment_chunks mirrors seg_range.)
__device__ __forceinline__ void seg_range(const FwdArgs& a, const Seq& sq, int p, int& c0, int& c1) {
    const int nch = (sq.len + C - 1) / C;
    if (a.segs <= 1) {
        c0 = 0;
        c1 = nch;
        return;
    }
    const int rest = a.segs - 1, lead = (int)((long long)nch * a.lead / (a.lead + 1000LL * rest));
    if (p == 0) {
        c0 = 0;
        c1 = lead;
        return;
    }
    const int per = (nch - lead + rest - 1) / rest;
    c0 = min(nch, lead + (p - 1) * per);
    c1 = min(nch, c0 + per);
}
// The grid's z of either pass → (sequence n, segment p): pass 1 (LEAD) takes p = 0 .. S − 2, pass 2 p = 1 .. S − 1;
// unsegmented (S = 1) z is the sequence and p = 0.
__device__ __forceinline__ void seg_of(const FwdArgs& a, int z, bool lead_pass, int& n, int& p) {
    const int per = a.segs > 1 ? a.segs - 1 : 1;
    n = z / per;
    p = z - n * per + (a.segs > 1 && !lead_pass ? 1 : 0);
}
// The state slot of (sequence n, segment p) in the segment workspace.
__device__ __forceinline__ float* seg_slot(const FwdArgs& a, int n, int p, int head) {
    return a.states + (((i64)n * a.segs + p) * a.h + head) * a.dk * (i64)a.dv;
}
// The state a fused segment starts from and where its final state goes: segment 0 from S_0, a later one from
// S_init(p) (the combine's); the last segment's final state is the sequence's, the lead's is E_0 (slot 0).
__device__ __forceinline__ const float* seg_init(const FwdArgs& a, int n, int p, int head) {
    return p > 0 ? seg_slot(a, n, p, head) : a.h0 ? a.h0 + ((i64)n * a.h + head) * a.dk * (i64)a.dv : nullptr;
}
__device__ __forceinline__ float* seg_fin(const FwdArgs& a, int n, int p, int head) {
    if (p == (a.segs > 1 ? a.segs - 1 : 0)) return a.ht ? a.ht + ((i64)n * a.h + head) * a.dk * (i64)a.dv : nullptr;
    return p == 0 ? seg_slot(a, n, 0, head) : nullptr;
}

// Decays of the segment states: per key d_k values, per value d_v, scalar gates 1; rows of max(d_k, d_v).
__device__ __forceinline__ float* seg_decay(const FwdArgs& a, int z, int head) {
    const i64 states = (i64)a.n_seqs * a.segs * a.h * a.dk * (i64)a.dv;
    return a.states + states + ((i64)z * a.h + head) * max(a.dk, a.dv);
}
#if KEY_GATE == GATE_PER_KEY
constexpr int DEC = DK;
#elif KEY_GATE == GATE_PER_VALUE
constexpr int DEC = BV;
#else
constexpr int DEC = 1;
#endif
constexpr int DEC_PER_THREAD = (DEC + NT - 1) / NT;

// Segment decay Σ Γ_L, one running sum per thread and decay index i = threadIdx.x + u·NT (thread < NT).
__device__ __forceinline__ void add_seg_decay(const Tiles& s, float (&dec)[DEC_PER_THREAD]) {
#pragma unroll
    for (int u = 0; u < DEC_PER_THREAD; ++u) {
        const int i = threadIdx.x + u * NT;
#if KEY_GATE == GATE_PER_KEY
        if (i < DEC) dec[u] += s.GL[i];
#elif KEY_GATE == GATE_PER_VALUE
        if (i < DEC) dec[u] += s.G[(C - 1) * LDG + i];
#else
        if (i < DEC) dec[u] += s.G[C - 1];
#endif
    }
}
__device__ __forceinline__ void store_seg_decay(const FwdArgs& a, int z, int head, const Seq& sq, const float (&dec)[DEC_PER_THREAD]) {
    float* dz = seg_decay(a, z, head);
#pragma unroll
    for (int u = 0; u < DEC_PER_THREAD; ++u) {
        const int i = threadIdx.x + u * NT;
#if KEY_GATE == GATE_PER_KEY
        if (i < a.dk) dz[i] = dec[u];
#elif KEY_GATE == GATE_PER_VALUE
        if (i < BV && sq.v0 + i < a.dv) dz[sq.v0 + i] = dec[u];
#else
        (void)sq;
        if (i == 0 && blockIdx.x == 0) dz[0] = dec[u];
#endif
    }
}

#if !GLA_WS
// Alg. 1 (right), materialize off: one CTA per (value tile, head, sequence or segment) walks its chunks in order;
// the state S stays in registers; only q, k, v, gate logits are read and o written. Chunk n+1 loads while chunk n
// computes.
// One segment p of sequence n, from seg_init, its final state to seg_fin (both taken where they are used: a pointer
// held across the chunk loop costs the w16 kernels registers they do not have).
__device__ __forceinline__ void fused_segment(const FwdArgs& a, unsigned char* smem, int head, int n, int p) {
    const Tiles s = carve_smem(smem);
    const Seq sq = locate(a, n, head, blockIdx.x);
    const float fixed_log_alpha = fixed_gate(a, head);
    int c0, c1;
    seg_range(a, sq, p, c0, c1);
    SRegs S = {};
    if (const float* init = seg_init(a, n, p, head)) state_global<false>(S, const_cast<float*>(init), a, sq.v0);  // S_0 or S_init(p)
    if (c0 < c1) land_logit(s, 0, issue_chunk(a, s, sq, c0 * C, 0, true));
    for (int c = c0; c < c1; ++c) {
        const int b = STAGES >= 2 ? ((c - c0) & 1) : 0, i0 = c * C;
        const bool next = c + 1 < c1;
        elem_t x_next = elem_t(0);
        if (STAGES >= 2 && next) {
            x_next = issue_chunk(a, s, sq, i0 + C, b ^ 1, true);  // prefetch chunk c+1
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();
        const bool mild = gate_cumsum(a, s, sq, i0, b, fixed_log_alpha);  // Γ = log2e · cumsum(gate(x))
        state_to_smem(S, s);                                 // S^T for the inter-chunk product
        __syncthreads();
        intra_and_operands(s, b, mild);                      // A = (Q K^T) ⊙ D;  Q̃ = Q ⊙ exp(Γ), K̂ = K ⊙ exp(Γ_L − Γ)
        __syncthreads();
        output_chunk(a, s, sq, i0, b);                       // O = Q̃ S + A V
#if KEY_GATE == GATE_PER_VALUE
        __syncthreads();
        decay_values_for_state(s, b);                        // V̂ = V ⊙ exp(Γ_L − Γ)  (value gate)
        __syncthreads();
#endif
        state_update(S, s, b);                               // S ← diag(exp(Γ_L)) S + K̂^T V
        if (STAGES >= 2 && next) land_logit(s, b ^ 1, x_next);
        __syncthreads();
        if (STAGES == 1 && next) land_logit(s, 0, issue_chunk(a, s, sq, i0 + C, 0, true));
    }
    if (float* fin = seg_fin(a, n, p, head)) state_global<true>(S, fin, a, sq.v0);  // the final state, or E_0 (the lead)
}

extern "C" __global__ void __launch_bounds__(NT, 1) gla_fwd_fused(const __grid_constant__ FwdArgs a) {
    extern __shared__ __align__(128) unsigned char smem[];
    const int head = blockIdx.y;
    int n, p;
    seg_of(a, blockIdx.z, false, n, p);
    fused_segment(a, smem, head, n, p);
}
#else
// Named barriers of the warp-specialised kernel (0 is __syncthreads, unused here): the consumers', one per
// producer group, FULL[b] per slot and EMPTY[b][g] per slot and producer group. EMPTY is per group because the
// two groups refill the same slot in turn: on one shared barrier a group running ahead could join the phase meant
// for the other one and refill a slot whose chunk the consumers have not read (tests/ws_protocol.rs models it).
constexpr int BAR_CONSUMERS = 1, BAR_PRODUCERS = 2, BAR_FULL = 4, BAR_EMPTY = 4 + STAGES;
// EMPTY barrier of slot b that producer group g waits on before refilling it. Where every slot belongs to one group
// (SLOT_PER_GROUP: STAGES a multiple of PG, slot j mod STAGES, group j mod PG) one barrier a slot; else one a
// (slot, group).
constexpr int EMPTY_BARS = SLOT_PER_GROUP ? STAGES : STAGES * PG;
__device__ __forceinline__ int bar_empty(int b, int g) { return SLOT_PER_GROUP ? BAR_EMPTY + b : BAR_EMPTY + b * PG + g; }
static_assert(PG == 1 || PG == 2, "one or two producer groups");
static_assert(BAR_EMPTY + EMPTY_BARS <= 16, "sm_90 has 16 named barriers");
static_assert(!GLA_MID_ISSUE || (SLOT_PER_GROUP && GLA_TMA), "mid-chunk loads: a group's slots are its own");
// TMA with two groups needs every slot to be one group's: else a group's warps, past publishing chunk j, wait for
// chunk j + 2 on the slot of the other group's chunk j − 1, and if that copy has not landed the mbarrier is still in
// the phase whose parity they ask for — the wait passes on stale data (on the H200 the three-slot per-key
// w8p8x2g hung; tests/ws_protocol.rs reproduces it).
static_assert(!(GLA_TMA && PG == 2) || SLOT_PER_GROUP, "two TMA producer groups: four slots (a slot holds one group's chunks)");
static_assert(!GLA_X_PER_GROUP || GLA_MID_ISSUE, "per-group logits tiles: loaded after the gate");
// GLA_ISSUE_AFTER_GATE (per key with the producers' wgmma scores and mid-chunk loads): a group issues its next chunk
// as soon as its threads have read this chunk's logits (after the gate, before the decays) instead of after the
// decays — the load then has the decays and the scores to land in, not the scores alone. The group's threads arrive
// on BAR_XREAD + group once they have read the logits tile; the issuing warp waits there before its TMA overwrites it.
typedef Group<NT, 0, BAR_CONSUMERS> Consumers;  // warps 0 .. NW−1: hold S, compute O and the state update
// Slot b of the ring: the chunk inputs (stage b) and the per-chunk results the consumers read (A, A_lo, Γ_L / Γ);
// producer group g's own Γ tile (per key) and segment totals.
__device__ __forceinline__ Tiles carve_slot(unsigned char* smem, int b, int g = 0) {
    Tiles s = carve_smem(smem);
    const unsigned off = b * STAGE_BYTES;
    s.A = reinterpret_cast<elem_t*>(smem + OFF_A + off);
    s.A_lo = reinterpret_cast<elem_t*>(smem + OFF_ALO + off);
#if KEY_GATE == GATE_PER_KEY
    s.GL = reinterpret_cast<float*>(smem + OFF_GL + off);
    s.EGL = s.GL + DK;
    s.G = reinterpret_cast<float*>(smem + OFF_G + g * G_STRIDE);
#else
    s.G = reinterpret_cast<float*>(smem + OFF_G + off);
#endif
    s.tot = reinterpret_cast<float*>(smem + OFF_TOT + g * TOT_STRIDE);
#if GLA_WG_SCORES
    s.qk = reinterpret_cast<float*>(smem + OFF_PS + g * PS_STRIDE);
#endif
    s.xg = reinterpret_cast<elem_t*>(smem + OFF_XG + g * XG_STRIDE);
    return s;
}
// Producer -> consumer hand-off on named barrier `id` (the NT consumers and one producer group take part): the
// producers arrive without waiting, the consumers wait for them (and the other way round for a freed slot). The
// barrier orders the shared-memory writes before it against the reads after it.
__device__ __forceinline__ void bar_arrive(int id) { asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "n"(NT + PGT) : "memory"); }
__device__ __forceinline__ void bar_wait(int id) { asm volatile("bar.sync %0, %1;\n" ::"r"(id), "n"(NT + PGT) : "memory"); }
// EMPTY: with TMA loads only the producer group's issuing warp (its last) takes part — the others go on with their
// chunk and learn of a free slot from a group barrier only where they refill it themselves (cp.async chunks).
constexpr int EMPTY_T = GLA_TMA ? NT + 32 : NT + PGT;
__device__ __forceinline__ void bar_arrive_empty(int id) { asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "n"(EMPTY_T) : "memory"); }
__device__ __forceinline__ void bar_wait_empty(int id) { asm volatile("bar.sync %0, %1;\n" ::"r"(id), "n"(EMPTY_T) : "memory"); }
// x as a value the compiler knows is the same on every lane of the warp (lane 0's): a branch on it is not divergent,
// which wgmma inside it requires (ptxas otherwise serialises the wgmma instructions).
__device__ __forceinline__ int warp_uniform(int x) { return __shfl_sync(0xffffffffu, x, 0); }

// Producers publish slot b (FULL). wgmma reads shared memory through the async proxy, so with wgmma consumers each
// producer thread first orders its own generic-proxy writes (stores, cp.async) before it.
__device__ __forceinline__ void publish(int b) {
#if GLA_WGMMA
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
    bar_arrive(BAR_FULL + b);
}

// Base of the dynamic shared memory: 1024-byte aligned for the swizzled tiles of wgmma variants (the plan asks for
// SWIZZLE_ALIGN bytes of slack), as declared otherwise.
__device__ __forceinline__ unsigned char* smem_base(unsigned char* raw) {
#if GLA_WGMMA
    return raw + ((1024u - (smem_u32(raw) & 1023u)) & 1023u);
#else
    return raw;
#endif
}

#if GLA_WGMMA
// Registers a thread of each role may use (setmaxnreg; multiples of 8): REG_CAP, REG_CONSUMER, REG_PRODUCER and
// REG_SPLIT come from the host (`features::register_split`). Without the split every thread has the cap.
__device__ __forceinline__ void regs_producer() {
    if constexpr (REG_SPLIT && REG_PRODUCER > REG_CAP) asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(REG_PRODUCER));
    if constexpr (REG_SPLIT && REG_PRODUCER < REG_CAP) asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(REG_PRODUCER));
}
__device__ __forceinline__ void regs_consumer() {
    if constexpr (REG_SPLIT && REG_CONSUMER < REG_CAP) asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(REG_CONSUMER));
    if constexpr (REG_SPLIT && REG_CONSUMER > REG_CAP) asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(REG_CONSUMER));
}
#else
__device__ __forceinline__ void regs_producer() {}
__device__ __forceinline__ void regs_consumer() {}
#endif

#if GLA_WGMMA
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
constexpr int BAR_WG = BAR_EMPTY + EMPTY_BARS;  // one per consumer warpgroup (the output staging tile)
constexpr int BAR_XREAD = BAR_WG + 2;             // GLA_ISSUE_AFTER_GATE: one per producer group (its logits are read)
static_assert(!GLA_ISSUE_AFTER_GATE || BAR_XREAD + PG <= 16, "sm_90 has 16 named barriers");
static_assert(BAR_WG + NWG <= 16, "sm_90 has 16 named barriers");
constexpr int LDO = BV + 8;  // output staging rows (conflict-free stmatrix)
typedef float WgState[DK / 2];
typedef float WgOut[C / 2];  // Oᵀ: both products accumulate into it (scalar gates get Q̃ = Q ⊙ exp(Γ) from decay_keys)
typedef unsigned WgStateA[DK / 16][4];

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
    for (int k = 0; k < DK / 16; ++k)
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

// Stage wg_output (issue):  Oᵀ = Sᵀ Q̃ᵀ + Vᵀ Aᵀ (+ Vᵀ A_loᵀ)  — one wgmma group. sa: Sᵀ as the A operand (packed by
// wg_pack before the state decays).
__device__ __forceinline__ void wg_pack(const WgState& S, WgStateA& sa) {
#pragma unroll
    for (int k = 0; k < DK / 16; ++k) {  // accumulator columns 16k..16k+15 = the A fragment of k-step k
        sa[k][0] = pack2(S[8 * k + 0], S[8 * k + 1]);
        sa[k][1] = pack2(S[8 * k + 2], S[8 * k + 3]);
        sa[k][2] = pack2(S[8 * k + 4], S[8 * k + 5]);
        sa[k][3] = pack2(S[8 * k + 6], S[8 * k + 7]);
    }
}
__device__ __forceinline__ void wg_output(WgStateA& sa, WgOut& o, const Tiles& s, int b) {
    const int wg = wg_index();
#pragma unroll
    for (int i = 0; i < C / 2; ++i) o[i] = 0.f;
#if !GLA_WG_SMEM_S
    reg_fence(sa);
#endif
    reg_fence(o);  // defined before the fence, not sunk past it
    wg_fence();
#pragma unroll
    for (int k = 0; k < DK / 16; ++k) {  // K = d: Q̃'s 16-column step k, in panel k / 4
#if GLA_WG_SMEM_S
        (void)sa;
        wg_out_t(o, wg_desc(s.st, wg * (64 * DK * 2) + (k / 4) * (64 * 128) + (k % 4) * 32, 16), wg_desc(s.q(b), (k / 4) * PANEL + (k % 4) * 32, 16));
#else
        wg_out_s(o, sa[k], wg_desc(s.q(b), (k / 4) * PANEL + (k % 4) * 32, 16));
#endif
    }
#pragma unroll
    for (int k = 0; k < C / 16; ++k) {  // K = token: V's rows 16k.. of this warpgroup's panel; A's columns 16k..
        const unsigned long long dv = wg_desc(s.v(b), wg * PANEL + k * 2048, PANEL);
        wg_out_v(o, dv, wg_desc(s.A, k * 32, 16));
#if SPLIT_A
        wg_out_v(o, dv, wg_desc(s.A_lo, k * 32, 16));
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
#else
    const float f = exp_nonpos(s.G[C - 1]);
#pragma unroll
    for (int i = 0; i < DK / 2; ++i) S[i] *= f;
#endif
}

// Stage wg_state (issue):  Sᵀ += Vᵀ K̂  — one wgmma group.
__device__ __forceinline__ void wg_state_update(WgState& S, const Tiles& s, int b) {
    const int wg = wg_index();
    reg_fence(S);
    wg_fence();
#pragma unroll
    for (int k = 0; k < C / 16; ++k)
        wg_state(S, wg_desc(s.v(b), wg * PANEL + k * 2048, PANEL), wg_desc(s.k(b), k * 2048, PANEL));
    wg_commit();
}

#if KSPLIT > 1 && !KS_CLUSTER
// Key split: the f32 partial outputs [KSPLIT, tokens, H, d_v] of the key slices, in the workspace after the segment
// states and decays (gla_codegen::key_split_workspace_bytes).
__device__ __forceinline__ float* ks_partial(const FwdArgs& a) {
    const i64 seg = a.segs > 1 ? (i64)a.n_seqs * a.segs * a.h * ((i64)a.dk * a.dv + max(a.dk, a.dv)) : 0;
    return a.states + seg;
}
#endif

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

__device__ __forceinline__ void wg_store(const FwdArgs& a, const Seq& sq, int i0, int j, const WgOut& o, unsigned char* smem, const Tiles& s) {
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
#else
    (void)s;
#pragma unroll
    for (int i = 0; i < C / 2; ++i) x[i] = a.scale * o[i];
#endif
#if KS_CLUSTER
    if (!ks_exchange(smem, sq, j, x)) return;                            // O = O_0 + O_1 (the receiving slice writes it)
#elif KSPLIT > 1
    {
        (void)os;
        (void)j;
        const i64 tokens = a.cu_seqlens[a.n_seqs];
        float* part = ks_partial(a) + (i64)(sq.head % KSPLIT) * tokens * nvh(a) * a.dv;
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
#endif

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
#endif

// STATES_ISSUE_AHEAD (two TMA producer groups, every slot one group's): the segment-state pass issues a group's
// next chunk at the top of the current one, so the load has the gate and K̂ to land in, not K̂ alone (per key) or
// nothing at all (scalar gates, which issued after publishing). Per key that needs the logits out of the group's
// one logits tile, which the next load would overwrite before this chunk's gate has read it: the state pass loads
// no q, so its logits land in the slot's q tile (same shape and swizzle); the scalar gates' logits are in registers
// already (GLA_REG_LOGIT). The host's lead segment is shorter for these variants (`Features::lead_permille`).

// One producer group P: chunks j = g, g + PG, ... of the segment, chunk j into slot j % STAGES. Slot j may be
// refilled once the consumers are done with chunk j − STAGES (EMPTY).
// STATES: for the segment-state pass (no q, no scores: Γ and K̂ only).
template <class P, bool STATES = false>
__device__ __forceinline__ void produce(const FwdArgs& a, unsigned char* smem, const Seq& sq, int c0, int nchunks, int g, float fixed_log_alpha) {
    constexpr bool AHEAD = STATES && STATES_ISSUE_AHEAD;
    // Slot b as this group sees it (AHEAD: the logits tile x(b) is the slot's q tile).
    auto slot = [&](int b) {
        Tiles t = carve_slot(smem, b, g);
        if constexpr (AHEAD && GLA_X_PER_GROUP) t.xg = t.q(b);
        return t;
    };
    // Start loading chunk j into its slot (returns a per-head logit to land). after_gate: called by every thread of
    // the group right after its gate read this group's logits tile, which chunk j's load overwrites.
    auto issue = [&](int j, bool after_gate = false) {
#if GLA_TMA
        // (chunk j belongs to this group: j % PG == g). The issuing warp waits for the slot to be free.
        if (j >= STAGES && P::tid() >= P::NT - 32) bar_wait_empty(bar_empty(j % STAGES, g));
        if (tma_chunk(a, sq, (c0 + j) * C)) {  // whole chunk: one thread's TMA boxes (an empty cp.async group keeps
#if GLA_ISSUE_AFTER_GATE
            if (after_gate) {                   // the issuing warp waits until every warp of the group has read the logits
                if (P::tid() >= P::NT - 32) asm volatile("bar.sync %0, %1;\n" ::"r"(BAR_XREAD + g), "n"(P::NT) : "memory");
                else asm volatile("bar.arrive %0, %1;\n" ::"r"(BAR_XREAD + g), "n"(P::NT) : "memory");
            }
#endif
            tma_issue<P>(a, slot(j % STAGES), sq, (c0 + j) * C, j % STAGES, !STATES, mbar_addr(smem, j % STAGES));
            cp_async_commit();                  // cp_async_wait's count of groups per chunk)
            return issue_logit<P>(a, sq, (c0 + j) * C);
        }
        if (j >= STAGES || after_gate) P::sync();  // cp.async: every producer thread copies, once the slot is free
#else                                            // (and, after the gate, once every thread has read the logits)
        if (j >= STAGES) bar_wait(bar_empty(j % STAGES, g));  // (chunk j belongs to this group: j % PG == g)
#endif
        return issue_chunk<P>(a, slot(j % STAGES), sq, (c0 + j) * C, j % STAGES, !STATES);
    };
    if (g >= nchunks) return;
    elem_t x = issue(g);
    for (int j = g; j < nchunks; j += PG) {
        const int b = j % STAGES, i0 = (c0 + j) * C, jn = j + PG;
        const Tiles s = slot(b);
        const elem_t xc = x;                                 // (GLA_REG_LOGIT: this chunk's logit, row lane)
        land_logit<P>(s, b, x);
        if (AHEAD && jn < nchunks) x = issue(jn);            // the group's next chunk, before this one's gate
        if (PG == 1 && jn < nchunks) {
            x = issue(jn);                                   // one group: prefetch chunk j + 1 before working on j
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
#if GLA_TMA
        // TMA chunk: every thread waits on the slot's mbarrier itself, which also makes the boxes visible to it — no
        // group barrier where nothing else needs one (per key; a per-head logit is landed by another thread).
        // (Scalar gates: every warp holds its own logits, GLA_REG_LOGIT.)
        if (tma_chunk(a, sq, i0)) {
            mbar_wait(mbar_addr(smem, b), (j / STAGES) & 1);
        } else {
            P::sync();
        }
#else
        P::sync();
#endif
        if constexpr (STATES) {
#if KEY_GATE == GATE_PER_KEY && GLA_WG_SCORES
            const bool early = GLA_ISSUE_AFTER_GATE && !AHEAD && PG > 1 && jn < nchunks;  // the next chunk loads during K̂
            gate_khat_vec<P>(a, s, sq, i0, b, [&] { if (early) x = issue(jn, true); });  // Γ (registers, shuffle scan), Γ_L;  K̂ = K ⊙ exp(Γ_L − Γ)
            publish(b);
            if (PG > 1 && !AHEAD && !early && jn < nchunks) x = issue(jn);
            continue;
#elif KEY_GATE == GATE_PER_KEY
            if constexpr (P::NT % (DK / 2) == 0 && C * (DK / 2) <= 16 * P::NT) {
                gate_decays<P, true>(a, s, sq, i0, b);          // Γ (registers), Γ_L;  K̂ = K ⊙ exp(Γ_L − Γ)
            } else {
                gate_cumsum<P>(a, s, sq, i0, b, fixed_log_alpha);  // Γ = log2e · cumsum(gate(x))  (ends on a barrier)
                decay_operands<P>(s, b, false, false);           // K̂ = K ⊙ exp(Γ_L − Γ)
            }
#else
            float gam[GPL];
            scan_publish(a, s, sq, i0, b, fixed_log_alpha, P::tid() >> 5, threadIdx.x & 31, gam, xc);  // Γ (every warp)
            decay_keys<P>(s, b, gam);                           // K̂ = K ⊙ exp(Γ_L − Γ)
#endif
            publish(b);
            if (PG > 1 && !AHEAD && jn < nchunks) x = issue(jn);
            continue;
        }
#if KEY_GATE == GATE_PER_KEY
        // One pass where its registers fit (one (row segment, column pair) per thread, at most 16 rows a thread,
        // 168 registers a thread or more; with the producers' wgmma scores one (row segment, 8 columns) per thread);
        // else the two passes, Γ through shared memory.
        if constexpr (P::NT % (DK / 2) == 0 && C * (DK / 2) <= 16 * P::NT && (GLA_WG_SCORES || NT + PT <= 384 || (GLA_WG_SMEM_S && P::NT >= 256))) {
            // Γ, and on mild chunks Q̃ = Q ⊙ exp(Γ), K̃ = K ⊙ exp(−Γ), K̂ = K̃ ⊙ exp(Γ_L), in one pass
#if GLA_WG_SCORES
            // (warp_uniform: the branch holds wgmma; gate_decays_vec's answer is group-uniform)
            const bool early = GLA_ISSUE_AFTER_GATE && jn < nchunks;  // the next chunk loads during the decays
            if (warp_uniform((int)gate_decays_vec<P>(a, s, sq, i0, b, [&] { if (early) x = issue(jn, true); }))) {
                if (GLA_MID_ISSUE && !early && jn < nchunks) x = issue(jn);  // mid-chunk: the logits tile is read
                wg_scores<P>(s);                             // A = (Q̃ K̃^T) ⊙ M  (one tf32 wgmma group)
#if GLA_ISSUE_AFTER_GATE
            } else if (early) {                              // (rare) the exact path takes the logits tile as scratch:
                const int bn = jn % STAGES;                  // let the next chunk land first, then its logits again
                if (tma_chunk(a, sq, (c0 + jn) * C)) mbar_wait(mbar_addr(smem, bn), (jn / STAGES) & 1);
                cp_async_wait<0>();
                P::sync();
                intra_scores<P>(s, b);                       // A = (Q K^T) ⊙ D  (decay-masked, §4.3)
                decay_operands<P>(s, b, true, false);        // Q̃ = Q ⊙ exp(Γ), K̂ = K ⊙ exp(Γ_L − Γ)
                reload_logits<P>(a, carve_slot(smem, bn, g), sq, (c0 + jn) * C, bn);
#endif
            } else {
#else
            if (gate_decays<P>(a, s, sq, i0, b)) {
                intra_scores_factored<P>(s, b);              // A = (Q̃ K̃^T) ⊙ M
            } else {
#endif
                intra_scores<P>(s, b);                       // A = (Q K^T) ⊙ D  (decay-masked, §4.3)
                decay_operands<P>(s, b, true, false);        // Q̃ = Q ⊙ exp(Γ), K̂ = K ⊙ exp(Γ_L − Γ)
                if (GLA_MID_ISSUE && jn < nchunks) x = issue(jn);  // (the logits tile was their scratch)
            }
        } else {
            static_assert(!GLA_WG_SCORES || P::NT == 0, "wg_scores takes its operands from gate_decays_vec");
            const bool mild = gate_cumsum<P>(a, s, sq, i0, b, fixed_log_alpha);  // Γ = log2e · cumsum(gate(x))
            intra_and_operands<P>(s, b, mild);               // A;  Q̃, K̂ (and K̃ on mild chunks)
        }
#else
        float gam[GPL];
        gate_scores<P>(a, s, sq, i0, b, fixed_log_alpha, gam, xc);  // Γ = log2e · cumsum(gate(x)) (every warp);  A = (Q K^T) ⊙ D
        if (GLA_MID_ISSUE && jn < nchunks) x = issue(jn);   // mid-chunk (xc keeps this chunk's logit)
        decay_keys<P, GLA_WGMMA>(s, b, gam);                 // K̂ = K ⊙ exp(Γ_L − Γ)  (wgmma: and Q̃ = Q ⊙ exp(Γ))
#endif
        publish(b);                                          // slot b holds chunk j
        if (PG > 1 && !GLA_MID_ISSUE && jn < nchunks) x = issue(jn);  // two groups: the other one works while this one loads
    }
}

// The producer warps: regs_producer, then the group(s) — one copy of the code for two groups (SharedGroup: the group
// and a thread's rank from threadIdx.x), so the SM's instruction caches hold one producer body, not two.
template <bool STATES>
__device__ __forceinline__ void run_producers(const FwdArgs& a, unsigned char* smem, const Seq& sq, int c0, int nchunks, int role_warp, int head) {
    regs_producer();                                         // (one warpgroup: both producer groups)
    if constexpr (PG > 1) {
        produce<SharedGroup<PGT, NT, BAR_PRODUCERS>, STATES>(a, smem, sq, c0, nchunks, (role_warp - NT / 32) / (PGT / 32), fixed_gate(a, head));
    } else {
        produce<Group<PGT, NT, BAR_PRODUCERS>, STATES>(a, smem, sq, c0, nchunks, 0, fixed_gate(a, head));
    }
}

// Alg. 1 (right), materialize off, warp-specialised: chunk n's S-independent stages (load, Γ, decays, A) run on
// the producer warps while the consumer warps compute chunk n−1's output and state update, the only sequential
// part. Chunks pass through a ring of STAGES slots: FULL[b] (producers → consumers: slot b holds a chunk) and
// EMPTY[b] (consumers → producers: slot b may be refilled). With two producer groups, group g takes the chunks
// j ≡ g (mod 2), so two chunks' producer stages overlap.
// One segment p of sequence n, from seg_init, its final state to seg_fin (taken where they are used, as in
// fused_segment).
__device__ __forceinline__ void ws_fused_segment(const FwdArgs& a, unsigned char* smem, int head, int n, int p) {
    const Seq sq = locate(a, n, head, blockIdx.x);
    int c0, c1;
    seg_range(a, sq, p, c0, c1);
    const int nchunks = c1 - c0;
    // The role branches, warp-uniform in a form the compiler can see for wgmma (a shuffle of lane 0's warp index).
    const int role_warp = GLA_WGMMA ? warp_uniform((int)threadIdx.x >> 5) : (int)threadIdx.x >> 5;
#if GLA_TMA
    tma_init(smem);
#endif
#if KS_CLUSTER
    ks_cluster_init(smem);                                   // XFULL, XEMPTY: the slices' exchange
#endif
    if (role_warp >= NT / 32) {
        run_producers<false>(a, smem, sq, c0, nchunks, role_warp, head);
    } else {
        regs_consumer();
#if GLA_WGMMA
        // ---- consumers (wgmma): Sᵀ, Oᵀ = Sᵀ Q̃ᵀ + Vᵀ Aᵀ, Sᵀ ← Sᵀ diag(exp(Γ_L)) + Vᵀ K̂ ----
        WgState S = {};
        if (const float* init = seg_init(a, n, p, head)) wg_state_global<false>(S, const_cast<float*>(init), a, sq.v0);  // S_0 or S_init(p)
        for (int j = 0; j < nchunks; ++j) {
            const int b = j % STAGES, i0 = (c0 + j) * C;
            const Tiles s = carve_slot(smem, b);
            bar_wait(BAR_FULL + b);                          // a producer group filled slot b
            WgStateA sa;
            WgOut o;
#if GLA_WG_SMEM_S
            wg_stage_state(S, s.st);                         // Sᵀ (bf16) for the output product, in shared memory
#else
            wg_pack(S, sa);                                  // Sᵀ (bf16) for the output product
#endif
            wg_decay(S, s);                                  // Sᵀ ← Sᵀ diag(exp(Γ_L))
            wg_output(sa, o, s, b);                          // Oᵀ = Sᵀ Q̃ᵀ + Vᵀ Aᵀ   (async)
            wg_state_update(S, s, b);                        // Sᵀ += Vᵀ K̂           (async)
            wg_wait<1>();                                    // the output group is done
            reg_fence(o);
#if !GLA_WG_SMEM_S
            reg_fence(sa);
#endif
            wg_store(a, sq, i0, j, o, smem, s);              // O = scale · (Oᵀ)ᵀ  (row-scaled chunks: · exp(Γ_i))
            wg_wait<0>();                                    // the state group is done: slot b is read
            reg_fence(S);
            if (j + STAGES < nchunks) bar_arrive_empty(bar_empty(b, (j + STAGES) % PG));
        }
        if (float* fin = seg_fin(a, n, p, head)) wg_state_global<true>(S, fin, a, sq.v0);  // the final state, or E_0 (the lead)
#else
        // ---- consumers: S, O = Q̃ S + A V, S ← diag(exp(Γ_L)) S + K̂^T V ----
        SRegs S = {};
        if (const float* init = seg_init(a, n, p, head)) state_global<false, Consumers>(S, const_cast<float*>(init), a, sq.v0);  // S_0 or S_init(p)
        for (int j = 0; j < nchunks; ++j) {
            const int b = j % STAGES, i0 = (c0 + j) * C;
            const Tiles s = carve_slot(smem, b);
            state_to_smem<Consumers>(S, s);                  // S^T for the inter-chunk product
            Consumers::sync();
            bar_wait(BAR_FULL + b);                          // a producer group filled slot b
            output_chunk<Consumers>(a, s, sq, i0, b);        // O = Q̃ S + A V
            Consumers::sync();                               // every consumer has read st
            state_update<Consumers>(S, s, b);                // S ← diag(exp(Γ_L)) S + K̂^T V
            // Slot b is free: tell the group that refills it with chunk j + STAGES (only if there is such a chunk).
            if (j + STAGES < nchunks) bar_arrive_empty(bar_empty(b, (j + STAGES) % PG));
        }
        if (float* fin = seg_fin(a, n, p, head)) state_global<true, Consumers>(S, fin, a, sq.v0);  // the final state, or E_0 (the lead)
#endif
    }
#if KS_CLUSTER
    ks_cluster_exit();
#endif
}

#if KS_CLUSTER
#define WS_CLUSTER __cluster_dims__(1, 2, 1)  // the two key slices of a head in one cluster (ks_exchange)
#else
#define WS_CLUSTER
#endif

extern "C" __global__ void WS_CLUSTER __launch_bounds__(NT + PT, CTAS_PER_SM) gla_fwd_ws(const __grid_constant__ FwdArgs a) {
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    unsigned char* smem = smem_base(smem_raw);
    const int head = blockIdx.y;
    int n, p;
    seg_of(a, blockIdx.z, false, n, p);
    ws_fused_segment(a, smem, head, n, p);
}

// Two-level scan, pass 1, warp-specialised (the same role split and ring as gla_fwd_ws): ΔS_p and Σ Γ_L of
// segment p from S = 0. Producers load k, v, logits and compute Γ and K̂ of the next chunks; the consumers add
// Σ Γ_L and run S ← diag(exp(Γ_L)) S + K̂^T V. No output.
extern "C" __global__ void WS_CLUSTER __launch_bounds__(NT + PT, CTAS_PER_SM) gla_fwd_ws_states(const __grid_constant__ FwdArgs a) {
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    unsigned char* smem = smem_base(smem_raw);
    const int head = blockIdx.y;
    int n, p;
    seg_of(a, blockIdx.z, true, n, p);
    if (p == 0) {                                            // the lead: its output from S_0, and E_0
        ws_fused_segment(a, smem, head, n, 0);
        return;
    }
    const int z = n * a.segs + p;                            // its workspace slot
    const Seq sq = locate(a, n, head, blockIdx.x);
    int c0, c1;
    seg_range(a, sq, p, c0, c1);
    const int nchunks = c1 - c0;
    // The role branches, warp-uniform in a form the compiler can see for wgmma (a shuffle of lane 0's warp index).
    const int role_warp = GLA_WGMMA ? warp_uniform((int)threadIdx.x >> 5) : (int)threadIdx.x >> 5;
#if GLA_TMA
    tma_init(smem);
#endif
    if (role_warp >= NT / 32) {
        run_producers<true>(a, smem, sq, c0, nchunks, role_warp, head);
    } else {
        regs_consumer();
        float dec[DEC_PER_THREAD] = {};
#if GLA_WGMMA
        WgState S = {};
        for (int j = 0; j < nchunks; ++j) {
            const int b = j % STAGES;
            const Tiles s = carve_slot(smem, b);
            bar_wait(BAR_FULL + b);                          // a producer group filled slot b
            add_seg_decay(s, dec);                           // Σ Γ_L
            wg_decay(S, s);                                  // Sᵀ ← Sᵀ diag(exp(Γ_L))
            wg_state_update(S, s, b);                        // Sᵀ += Vᵀ K̂
            wg_wait<0>();
            reg_fence(S);
            if (j + STAGES < nchunks) bar_arrive_empty(bar_empty(b, (j + STAGES) % PG));
        }
        wg_state_global<true>(S, a.states + ((i64)z * a.h + head) * a.dk * (i64)a.dv, a, sq.v0);  // ΔS_p
#else
        SRegs S = {};
        for (int j = 0; j < nchunks; ++j) {
            const int b = j % STAGES;
            const Tiles s = carve_slot(smem, b);
            bar_wait(BAR_FULL + b);                          // a producer group filled slot b
            add_seg_decay(s, dec);                           // Σ Γ_L
            state_update<Consumers>(S, s, b);                // S ← diag(exp(Γ_L)) S + K̂^T V
            if (j + STAGES < nchunks) bar_arrive_empty(bar_empty(b, (j + STAGES) % PG));
        }
        state_global<true, Consumers>(S, a.states + ((i64)z * a.h + head) * a.dk * (i64)a.dv, a, sq.v0);  // ΔS_p
#endif
        store_seg_decay(a, z, head, sq, dec);
    }
}
#endif

#if !GLA_WS
// Two-level scan, pass 1: ΔS_p and Σ Γ_L of segment p (from S = 0; no output).
extern "C" __global__ void __launch_bounds__(NT, 1) gla_fwd_seg_states(const __grid_constant__ FwdArgs a) {
    extern __shared__ __align__(128) unsigned char smem[];
    const int head = blockIdx.y;
    int n, p;
    seg_of(a, blockIdx.z, true, n, p);
    if (p == 0) {                                            // the lead: its output from S_0, and E_0
        fused_segment(a, smem, head, n, 0);
        return;
    }
    const Tiles s = carve_smem(smem);
    const Seq sq = locate(a, n, head, blockIdx.x);
    const float fixed_log_alpha = fixed_gate(a, head);
    int c0, c1;
    seg_range(a, sq, p, c0, c1);
    SRegs S = {};
    float dec[DEC_PER_THREAD] = {};
    if (c0 < c1) land_logit(s, 0, issue_chunk(a, s, sq, c0 * C, 0, false));
    for (int c = c0; c < c1; ++c) {
        const int b = STAGES >= 2 ? ((c - c0) & 1) : 0, i0 = c * C;
        const bool next = c + 1 < c1;
        elem_t x_next = elem_t(0);
        if (STAGES >= 2 && next) {
            x_next = issue_chunk(a, s, sq, i0 + C, b ^ 1, false);
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();
        gate_cumsum(a, s, sq, i0, b, fixed_log_alpha);       // Γ
        __syncthreads();
        add_seg_decay(s, dec);                               // Σ Γ_L
        decay_operands(s, b, false, false);                  // K̂ = K ⊙ exp(Γ_L − Γ)  (value gate: V̂)
        __syncthreads();
        state_update(S, s, b);                               // S ← diag(exp(Γ_L)) S + K̂^T V
        if (STAGES >= 2 && next) land_logit(s, b ^ 1, x_next);
        __syncthreads();
        if (STAGES == 1 && next) land_logit(s, 0, issue_chunk(a, s, sq, i0 + C, 0, false));
    }
    state_global<true>(S, seg_slot(a, n, p, head), a, sq.v0);  // ΔS_p
    store_seg_decay(a, n * a.segs + p, head, sq, dec);
}
#endif

// Two-level scan, the combine (elementwise over a block of COMBINE_ROWS state rows × the value tile; sequential over
// the segments):  S = E_0;  for p = 1 .. S − 2: S_init(p) = S, S ← diag(exp(Σ Γ_L(p))) S + ΔS_p;  S_init(S − 1) = S.
// Grid: (value tile, head · row block, sequence) with COMBINE_ROWS / COMBINE_BLOCKS from the writer (the plan's
// grid uses the same numbers); COMBINE_PER elements a thread, every segment's loads issued before its stores (the
// stores go to the same workspace, so they would otherwise serialise the loads).
static_assert(COMBINE_ROWS * BV == COMBINE_PER * NT && COMBINE_BLOCKS * COMBINE_ROWS >= DK, "whole rows per block");
extern "C" __global__ void __launch_bounds__(NT, 1) gla_fwd_seg_combine(const __grid_constant__ FwdArgs a) {
    const int head = blockIdx.y / COMBINE_BLOCKS, d0 = (blockIdx.y % COMBINE_BLOCKS) * COMBINE_ROWS;
    const int n = blockIdx.z, v0 = blockIdx.x * BV;
    float S[COMBINE_PER];
    i64 off[COMBINE_PER];  // element offset in a [dk, dv] slab
    int row[COMBINE_PER];
    bool ok[COMBINE_PER];
    const float* e0 = seg_slot(a, n, 0, head);
#pragma unroll
    for (int u = 0; u < COMBINE_PER; ++u) {
        const int idx = threadIdx.x + u * NT, d = d0 + idx / BV, e = v0 + idx % BV;
        ok[u] = d < a.dk && e < a.dv;
        row[u] = d;
        off[u] = (i64)d * a.dv + e;
#if KEY_GATE == GATE_PER_VALUE
        row[u] = e;
#endif
        S[u] = ok[u] ? e0[off[u]] : 0.f;                      // S_init(1) = E_0, the lead's final state
    }
    for (int p = 1; p < a.segs - 1; ++p) {
        float* ds = seg_slot(a, n, p, head);
        const float* dz = seg_decay(a, n * a.segs + p, head);
        float delta[COMBINE_PER], f[COMBINE_PER];
#pragma unroll
        for (int u = 0; u < COMBINE_PER; ++u) {
            delta[u] = ok[u] ? ds[off[u]] : 0.f;
#if KEY_GATE == GATE_PER_KEY || KEY_GATE == GATE_PER_VALUE
            f[u] = ok[u] ? exp_nonpos(dz[row[u]]) : 0.f;
#else
            f[u] = exp_nonpos(dz[0]);
#endif
        }
#pragma unroll
        for (int u = 0; u < COMBINE_PER; ++u) {
            if (ok[u]) ds[off[u]] = S[u];                     // S_init(p), in place of ΔS_p
            S[u] = f[u] * S[u] + delta[u];
        }
    }
    float* last = seg_slot(a, n, a.segs - 1, head);          // S_init(S − 1): the last segment has no state pass
#pragma unroll
    for (int u = 0; u < COMBINE_PER; ++u)
        if (ok[u]) last[off[u]] = S[u];
}
#else
// Alg. 1 (left), materialize on, kernel 1: walk the chunks in order and write S_[n] (the state entering each chunk).
extern "C" __global__ void __launch_bounds__(NT, 1) gla_fwd_states(const __grid_constant__ FwdArgs a) {
    extern __shared__ __align__(128) unsigned char smem[];
    const Tiles s = carve_smem(smem);
    const int head = blockIdx.y, n = blockIdx.z;
    const Seq sq = locate(a, n, head, blockIdx.x);
    const float fixed_log_alpha = fixed_gate(a, head);
    const i64 slab = ((i64)n * a.h + head) * a.dk * (i64)a.dv;
    const i64 c0 = a.chunk_offsets[n];
    const int nchunks = (sq.len + C - 1) / C;
    SRegs S = {};
    if (a.h0) state_global<false>(S, const_cast<float*>(a.h0) + slab, a, sq.v0);
    if (nchunks > 0) land_logit(s, 0, issue_chunk(a, s, sq, 0, 0, false));
    for (int c = 0; c < nchunks; ++c) {
        const int b = STAGES >= 2 ? (c & 1) : 0, i0 = c * C;
        const bool next = c + 1 < nchunks;
        elem_t x_next = elem_t(0);
        if (STAGES >= 2 && next) {
            x_next = issue_chunk(a, s, sq, i0 + C, b ^ 1, false);
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();
        gate_cumsum(a, s, sq, i0, b, fixed_log_alpha);       // Γ
        state_global<true>(S, a.states + ((c0 + c) * a.h + head) * a.dk * (i64)a.dv, a, sq.v0);  // S_[n]
        __syncthreads();
        decay_operands(s, b, false, false);                  // K̂ = K ⊙ exp(Γ_L − Γ)
        __syncthreads();
        state_update(S, s, b);                               // S ← diag(exp(Γ_L)) S + K̂^T V
        if (STAGES >= 2 && next) land_logit(s, b ^ 1, x_next);
        __syncthreads();
        if (STAGES == 1 && next) land_logit(s, 0, issue_chunk(a, s, sq, i0 + C, 0, false));
    }
    if (a.ht) state_global<true>(S, a.ht + slab, a, sq.v0);
}

// Kernel 2: every chunk in parallel, from its stored state:  O_[n] = Q̃_[n] S_[n] + A_[n] V_[n].
extern "C" __global__ void __launch_bounds__(NT, 1) gla_fwd_output(const __grid_constant__ FwdArgs a) {
    extern __shared__ __align__(128) unsigned char smem[];
    const Tiles s = carve_smem(smem);
    const int gc = blockIdx.x, head = blockIdx.y;
    const int n = a.chunk_index[2 * gc], ci = a.chunk_index[2 * gc + 1];
    const Seq sq = locate(a, n, head, blockIdx.z);
    const int i0 = ci * C;
    land_logit(s, 0, issue_chunk(a, s, sq, i0, 0, true));   // q, k, v, x
    cp_async_wait<0>();
    __syncthreads();
    const bool mild = gate_cumsum(a, s, sq, i0, 0, fixed_gate(a, head));  // Γ
    state_global_to_smem(a.states + ((i64)gc * a.h + head) * a.dk * (i64)a.dv, s, a, sq.v0);  // S_[n]^T
    __syncthreads();
    intra_and_operands(s, 0, mild);                         // A, Q̃
    __syncthreads();
    output_chunk(a, s, sq, i0, 0);                          // O = Q̃ S + A V
}
#endif

#if KSPLIT > 1 && !KS_CLUSTER
// Key split: O = Σ_s O_s over the KSPLIT key slices (the chunkwise form is linear in d_k: each slice's CTAs computed
// Q̃_s S_s + ((Q̃_s K̃_sᵀ) ⊙ M) V from their d_k / KSPLIT key columns), summed in f32 and rounded once. 4 outputs a
// thread, grid x = ceil(tokens · H · d_v / (4 · 256)).
extern "C" __global__ void __launch_bounds__(256) gla_fwd_ksum(const __grid_constant__ FwdArgs a) {
    const i64 n = a.cu_seqlens[a.n_seqs] * (i64)(a.h / KSPLIT) * a.dv;
    const i64 i = 4 * ((i64)blockIdx.x * 256 + threadIdx.x);
    if (i >= n) return;
    const float* part = ks_partial(a);
    if (n % 4 == 0) {
        float4 acc = *reinterpret_cast<const float4*>(part + i);
#pragma unroll
        for (int sl = 1; sl < KSPLIT; ++sl) {
            const float4 p = *reinterpret_cast<const float4*>(part + sl * n + i);
            acc.x += p.x; acc.y += p.y; acc.z += p.z; acc.w += p.w;
        }
        a.o[i] = to_elem(acc.x); a.o[i + 1] = to_elem(acc.y); a.o[i + 2] = to_elem(acc.z); a.o[i + 3] = to_elem(acc.w);
    } else {
        for (i64 j = i; j < min(n, i + 4); ++j) {
            float acc = 0.f;
#pragma unroll
            for (int sl = 0; sl < KSPLIT; ++sl) acc += part[sl * n + j];
            a.o[j] = to_elem(acc);
        }
    }
}
#endif
