// ---------------------------------------------------------------------------------------------------------------
// Stages of the chunkwise GLA forward (paper §2.2 / §4, Alg. 1). Notation, per (sequence, head, value tile):
//   chunk [n] of C tokens, rows i, j in 0..C;  log α_i = gate(x_i);  Γ_i = log2(e) · Σ_{m<=i} log α_m (in-chunk,
//   f32, log2 units);  S = state entering the chunk (d_k x BV, f32);  Γ_L = Γ of the last row (padding rows have
//   log α = 0, so Γ_L is the last valid row's).
// Inputs of chunk n+1 are copied (cp.async) into the other stage buffer while chunk n computes (STAGES == 2).
// ---------------------------------------------------------------------------------------------------------------

constexpr int VEC = 16 / sizeof(elem_t);  // elements per 16-byte vector
constexpr int LDV = BV + 8;
// Layout of the q, k, v tiles and the scores A (element offsets KO / VO / AO, row step KROW / VROW between rows
// 8 apart): padded row-major, or (GLA_WGMMA) the 128-byte-swizzled wgmma operand layout — A's rows are then one
// 64-element panel. The logits / K̃ tile x, Γ and the overlays stay padded row-major in both.
#if GLA_WGMMA
__device__ __forceinline__ int KO(int r, int d) { return swz(r, d); }
__device__ __forceinline__ int VO(int r, int e) { return swz(r, e); }
__device__ __forceinline__ int AO(int i, int j) { return swz(i, j); }
constexpr int KROW = 64, VROW = 64;
__device__ __forceinline__ Swz ktile(const elem_t* p) { return Swz{p}; }
__device__ __forceinline__ Swz vtile(const elem_t* p) { return Swz{p}; }
__device__ __forceinline__ Swz atile(const elem_t* p) { return Swz{p}; }
#else
__device__ __forceinline__ int KO(int r, int d) { return r * LDK + d; }
__device__ __forceinline__ int VO(int r, int e) { return r * LDV + e; }
__device__ __forceinline__ int AO(int i, int j) { return i * LDC + j; }
constexpr int KROW = LDK, VROW = LDV;
__device__ __forceinline__ Pad ktile(const elem_t* p) { return Pad{p, LDK}; }
__device__ __forceinline__ Pad vtile(const elem_t* p) { return Pad{p, LDV}; }
__device__ __forceinline__ Pad atile(const elem_t* p) { return Pad{p, LDC}; }
#endif
// The per-key logits as loaded (offset XO, row step XROW): swizzled like q / k where TMA fills the tile, else padded.
#if GLA_LOGITS_SWIZZLED
__device__ __forceinline__ int XO(int r, int d) { return KO(r, d); }
constexpr int XROW = KROW;
#else
__device__ __forceinline__ int XO(int r, int d) { return r * LDK + d; }
constexpr int XROW = LDK;
#endif
#if KEY_GATE == GATE_PER_KEY
// Padded Γ row. Rows land 12 banks apart (row-parallel float4 reads do not conflict), and one row holds two
// bf16/f16 rows of LDK: on mild chunks decay_operands overlays row i of Γ with the low halves Q̃_lo, K̃_lo of row i.
constexpr int LDG = DK + 12;
constexpr int LDLO = 2 * LDG;  // row stride (elements) of the Q̃_lo / K̃_lo overlay
#elif KEY_GATE == GATE_PER_VALUE
constexpr int LDG = BV + 4;  // value gate: Γ is C x BV (this CTA's value columns), rows padded as above
#endif

struct Tiles {
    unsigned char* base;  // stage buffers, STAGE_BYTES each
    float* G;         // [C][LDG] (per key) or [C] (scalar): Γ
    float* GL;        // [DK] per key: Γ_L (the last row), kept apart from G's overlay
    float* EGL;       // [DK] per key: exp(Γ_L)
    elem_t* A_lo;     // [C][LDC] SPLIT_A: A − A_hi, so A V = A_hi V + A_lo V carries A to ~f32 precision
    elem_t* st;       // [DK][LDV] S (state entering the chunk), row-major: the k-major B operand of Q̃ S
    elem_t* A;        // [C][LDC] masked decayed scores
    elem_t* vt;       // [C][LDV] value gate only: V ⊙ exp(Γ_p − Γ), p = last row of each key sub-chunk
    float* tot;       // [SEGS][DK] per key: gate_cumsum's segment totals (the state tile st, or its own region in the
                      // warp-specialised kernel, whose producer must not touch the consumers' st)
    float* qk;        // GLA_WG_SCORES: [Q̃; K̃] in tf32, 2C x DK f32, swizzled (swz32_rows<2C>; the producer group's own)
    elem_t* xg;       // GLA_X_PER_GROUP: the producer group's logits tile (x(b) of every slot the group fills)
    elem_t* vs;       // per value (wgmma): the producer group's [C][BV] swizzled tile of a strong chunk's V' (strong_values)
    float* P;         // [C][BV] GLA_VALUE_ROWS: a strong chunk's intra-chunk output (value_operands)
    // Stage buffer b holds one chunk's inputs:
    __device__ __forceinline__ elem_t* stage(int b, unsigned off) const {
        return reinterpret_cast<elem_t*>(base + (STAGES > 1 ? b : 0) * STAGE_BYTES + off);
    }
    __device__ __forceinline__ elem_t* q(int b) const { return stage(b, STAGE_Q); }  // [C][LDK] raw q, later q ⊙ exp(Γ)
    __device__ __forceinline__ elem_t* k(int b) const { return stage(b, STAGE_K); }  // [C][LDK] raw k, later K̂ = k ⊙ exp(Γ_L − Γ)
    __device__ __forceinline__ elem_t* v(int b) const { return stage(b, STAGE_V); }  // [C][LDV] v (row-major)
    // GLA_SPLIT_OPS (the dq / dk passes): the low halves Q̃ − Q̃_hi, K̂ − K̂_hi (q, k's layout)
    __device__ __forceinline__ elem_t* q_lo(int b) const { return stage(b, STAGE_Q_LO); }
    __device__ __forceinline__ elem_t* k_lo(int b) const { return stage(b, STAGE_K_LO); }
    // GLA_SPLIT_OPS per value (a per-key gate's dq / dk passes): V̂ − V̂_hi (v's layout, in the K̂_lo tile; q, k raw)
    __device__ __forceinline__ elem_t* v_lo(int b) const { return stage(b, STAGE_K_LO); }
    // raw gate logits ([C][LDK] per key, [C][LDV] per value, [C] per head); dead after gate_cumsum, so per-key
    // gates then reuse it: K̃ = k ⊙ exp(−Γ) (factorised path) or the off-diagonal scratch (sub-chunk path).
    __device__ __forceinline__ elem_t* x(int b) const { return GLA_X_PER_GROUP ? xg : stage(b, STAGE_X); }
};

__device__ __forceinline__ Tiles carve_smem(unsigned char* smem) {
    Tiles s;
    s.base = smem;
    s.G = reinterpret_cast<float*>(smem + OFF_G);
    s.st = reinterpret_cast<elem_t*>(smem + OFF_ST);
    s.A = reinterpret_cast<elem_t*>(smem + OFF_A);
    s.A_lo = reinterpret_cast<elem_t*>(smem + OFF_ALO);
    s.GL = reinterpret_cast<float*>(smem + OFF_GL);
    s.EGL = s.GL + DK;
    s.vt = reinterpret_cast<elem_t*>(smem + OFF_VT);
    s.tot = reinterpret_cast<float*>(smem + OFF_TOT);
    s.xg = reinterpret_cast<elem_t*>(smem + OFF_XG);
    s.vs = reinterpret_cast<elem_t*>(smem + OFF_VS);
    return s;
}

// VEC elements of a 16-byte vector as f32, and back (rounded once, or as hi + lo halves: x ≈ hi + lo).
__device__ __forceinline__ void load_vec(const elem_t* p, float out[VEC]) {
    const uint4 u = *reinterpret_cast<const uint4*>(p);
#if GLA_TENSOR_CORES
    const unsigned w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        const float2 f = unpack2(w[j]);
        out[2 * j] = f.x;
        out[2 * j + 1] = f.y;
    }
#else
    out[0] = __uint_as_float(u.x); out[1] = __uint_as_float(u.y); out[2] = __uint_as_float(u.z); out[3] = __uint_as_float(u.w);
#endif
}
__device__ __forceinline__ void store_vec(elem_t* p, const float in[VEC]) {
#if GLA_TENSOR_CORES
    *reinterpret_cast<uint4*>(p) = make_uint4(pack2(in[0], in[1]), pack2(in[2], in[3]), pack2(in[4], in[5]), pack2(in[6], in[7]));
#else
    *reinterpret_cast<float4*>(p) = make_float4(in[0], in[1], in[2], in[3]);
#endif
}
__device__ __forceinline__ void store_vec_split(elem_t* hi_p, elem_t* lo_p, const float in[VEC]) {
#if GLA_TENSOR_CORES
    unsigned hi[4], lo[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        hi[j] = pack2(in[2 * j], in[2 * j + 1]);
        const float2 h = unpack2(hi[j]);
        lo[j] = pack2(in[2 * j] - h.x, in[2 * j + 1] - h.y);
    }
    *reinterpret_cast<uint4*>(hi_p) = make_uint4(hi[0], hi[1], hi[2], hi[3]);
    *reinterpret_cast<uint4*>(lo_p) = make_uint4(lo[0], lo[1], lo[2], lo[3]);
#else
    store_vec(hi_p, in);
    (void)lo_p;
#endif
}
// A pair of adjacent elements as hi + lo halves (x ≈ hi + lo), each pair one 32-bit store.
__device__ __forceinline__ void st_pair_split(elem_t* hi_p, elem_t* lo_p, float x, float y) {
#if GLA_TENSOR_CORES
    const unsigned hi = pack2(x, y);
    const float2 h = unpack2(hi);
    *reinterpret_cast<unsigned*>(hi_p) = hi;
    *reinterpret_cast<unsigned*>(lo_p) = pack2(x - h.x, y - h.y);
#else
    hi_p[0] = x; hi_p[1] = y;
    (void)lo_p;
#endif
}
// Two adjacent elements (4-byte aligned for 16-bit types) as f32.
__device__ __forceinline__ float2 load_pair(const elem_t* p) {
#if GLA_TENSOR_CORES
    return unpack2(*reinterpret_cast<const unsigned*>(p));
#else
    return *reinterpret_cast<const float2*>(p);
#endif
}

// Where one (sequence, head, value tile) lives.
struct Seq {
    i64 bos;   // first token (row of the flattened [B*T] axis)
    int len;   // tokens in the sequence
    int head;  // head of q, k, the logits and the states (key split: a (head, key slice) pair, head = KSPLIT·h + slice)
    int v0;    // first value column of this tile
};
// The head of v, o and the gate parameters, and the number of such heads (KSPLIT > 1: a head is KSPLIT key slices).
__device__ __forceinline__ int vhead(const Seq& sq) { return sq.head / KSPLIT; }
__device__ __forceinline__ int nvh(const FwdArgs& a) { return a.h / KSPLIT; }

// A per-head gate's logit of chunk row G::tid() (rows i0..; 0 past the sequence or for other gates), returned in a
// register and landed in the slot later (land_logit), so that its global latency overlaps the chunk's work.
// GLA_REG_LOGIT (TMA variants, C = 32): every warp of the group loads the chunk's 32 logits itself, lane l row l, and
// keeps them in a register for its own scalar_scan — nothing lands in shared memory, no barrier waits for it.
template <class G = CTA>
__device__ __forceinline__ elem_t issue_logit(const FwdArgs& a, const Seq& sq, int i0) {
    elem_t x = elem_t(0);
#if GLA_REG_LOGIT
    static_assert(C == 32, "one logit a lane");
    if ((G::tid() & 31) < min(C, sq.len - i0)) x = a.g[(sq.bos + i0 + (G::tid() & 31)) * nvh(a) + vhead(sq)];
#elif KEY_GATE == GATE_PER_HEAD
    if (G::tid() < min(C, sq.len - i0)) x = a.g[(sq.bos + i0 + G::tid()) * nvh(a) + vhead(sq)];
#endif
    (void)a; (void)sq; (void)i0;
    return x;
}

#if GLA_TMA
// Stage load by TMA (issue / wait): a whole chunk's q (optional), k, per-key logits and this CTA's value columns as
// boxes of 64 columns x C rows (cp.async.bulk.tensor.3d over the runtime's [tokens, H, d] tensor maps), written in
// the 128-byte-swizzled layout of swz_rows — one producer thread issues them all; the slot's mbarrier counts the
// bytes in (expect_tx / complete_tx) and every thread of the group waits on its phase: use n of slot b (chunk
// j = b + n·STAGES) completes phase n, parity n & 1.
__device__ __forceinline__ unsigned mbar_addr(const unsigned char* smem, int b) { return smem_u32(smem + OFF_MBAR + 8 * b); }
__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity) {
    asm volatile("{\n .reg .pred p;\n TMA_WAIT:\n mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n @!p bra TMA_WAIT;\n}\n"
                 ::"r"(bar), "r"(parity) : "memory");
}
__device__ __forceinline__ void tma_load(const elem_t* dst, const TmaMap& map, int col, int head, int row, unsigned bar) {
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];\n"
                 ::"r"(smem_u32(dst)), "l"(&map), "r"(col), "r"(head), "r"(row), "r"(bar) : "memory");
}
// A chunk that moves by cp.async instead (a sequence's partial chunk) still completes its slot's phase — the issuing
// thread's one arrival, no bytes — so use n of a slot completes phase n however each use was loaded (the dv pass
// walks a sequence from its partial last chunk).
__device__ __forceinline__ void mbar_arrive_no_tx(unsigned bar) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(0u) : "memory");
}
// Whether chunk rows [i0, i0 + C) move by TMA: whole, d_k = DK, this CTA's value columns inside d_v, maps encoded.
__device__ __forceinline__ bool tma_chunk(const FwdArgs& a, const Seq& sq, int i0) {
    return a.tma != 0 && sq.len - i0 >= C && a.dk == DK && sq.v0 + BV <= a.dv;
}
// The slots' mbarriers (one arrival each: the issuing thread's expect_tx), by thread 0 before the roles start.
__device__ __forceinline__ void tma_init(unsigned char* smem) {
    if (threadIdx.x == 0) {
        for (int b = 0; b < STAGES; ++b) mbar_init(mbar_addr(smem, b), 1);
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
}
template <class G>
__device__ __forceinline__ void tma_issue(const FwdArgs& a, const Tiles& s, const Seq& sq, int i0, int b, bool with_q, unsigned bar) {
    if (G::tid() != G::NT - 32) return;  // lane 0 of the group's last warp (warps 0, 1 finish the scores: the longest)
    constexpr unsigned BOX = C * 64 * sizeof(elem_t), KB = DK / 64, VB = BV / 64;
    const unsigned bytes = ((with_q ? KB : 0) + KB + (KEY_GATE == GATE_PER_KEY ? KB : 0) + VB) * BOX;
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
    const int row = (int)(sq.bos + i0);
#pragma unroll
    for (int p = 0; p < (int)KB; ++p) {  // panel p: columns 64p.., at element C·64·p of the tile
        if (with_q) tma_load(s.q(b) + p * C * 64, a.tm_q, 64 * p, sq.head, row, bar);
        tma_load(s.k(b) + p * C * 64, a.tm_k, 64 * p, sq.head, row, bar);
#if KEY_GATE == GATE_PER_KEY
        tma_load(s.x(b) + p * C * 64, a.tm_g, 64 * p, sq.head, row, bar);
#endif
    }
#pragma unroll
    for (int p = 0; p < (int)VB; ++p) tma_load(s.v(b) + p * C * 64, a.tm_v, sq.v0 + 64 * p, vhead(sq), row, bar);
}
#endif

// Stage load (issue): start copying chunk rows [i0, i0 + C) of q (optional), k, v and the gate logits into stage
// buffer b. Full-width rows move as 16-byte cp.async (zero-filled past the sequence end); masked head dims go
// element by element. A per-head logit is returned in a register (thread i < C holds row i) and landed later.
template <class G = CTA>
__device__ __forceinline__ elem_t issue_chunk(const FwdArgs& a, const Tiles& s, const Seq& sq, int i0, int b, bool with_q, bool with_x = true) {
    const int tid = opaque<NT + PT>(G::tid());  // (16 warps: the offsets recomputed a chunk, see opaque)
    const int rows = min(C, sq.len - i0);
    if (a.dk == DK) {
        // Thread tid copies vector column (tid % VPR) of rows tid / VPR, + RSTEP, ...: the global address advances by
        // a constant row stride (H·d_k elements), so each copy costs one add, not a 64-bit index computation.
        constexpr int VPR = DK / VEC, RSTEP = G::NT / VPR;
        const int r0 = tid / VPR, d = (tid % VPR) * VEC;
        const i64 rs = (i64)a.h * DK;
        const i64 base = ((sq.bos + i0 + r0) * a.h + sq.head) * (i64)DK + d;
        // (Swizzled tiles: steps of whole 8-row groups keep the swizzle phase, so the shared address is linear too.)
        if (C % RSTEP == 0 && (!GLA_WGMMA || RSTEP % 8 == 0) && rows == C) {
            // A whole chunk (every chunk but a sequence's last): no predicates; the shared addresses advance by
            // RSTEP rows, the global ones by RSTEP row strides.
            const i64 step = (i64)RSTEP * rs;
            const elem_t* gq = a.q + base;
            const elem_t* gk = a.k + base;
            const elem_t* gx = a.g + base;
            const unsigned so = smem_u32(s.q(b) + KO(r0, d)), sko = smem_u32(s.k(b) + KO(r0, d));
            const unsigned sxo = smem_u32(s.x(b) + XO(r0, d));
            (void)gx; (void)sxo;
#pragma unroll
            for (int u = 0; u < C / RSTEP; ++u) {
                const unsigned row = u * RSTEP * KROW * (unsigned)sizeof(elem_t), xrow = u * RSTEP * XROW * (unsigned)sizeof(elem_t);
                if (with_q) cp_async16_full(so + row, gq);
                cp_async16_full(sko + row, gk);
#if KEY_GATE == GATE_PER_KEY
                if (with_x) cp_async16_full(sxo + xrow, gx);
                gx += step;
#endif
                gq += step;
                gk += step;
            }
        } else {
#pragma unroll 4
            for (int i = r0; i < C; i += RSTEP) {
                const bool ok = i < rows;
                const i64 off = ok ? base + (i64)(i - r0) * rs : 0;
                if (with_q) cp_async16(s.q(b) + KO(i, d), a.q + off, ok);
                cp_async16(s.k(b) + KO(i, d), a.k + off, ok);
#if KEY_GATE == GATE_PER_KEY
                if (with_x) cp_async16(s.x(b) + XO(i, d), a.g + off, ok);
#endif
            }
        }
    } else {
        for (int idx = tid; idx < C * DK; idx += G::NT) {
            const int i = idx / DK, d = idx - (idx / DK) * DK;
            const bool ok = (i < rows) && (d < a.dk);
            const i64 off = ((sq.bos + i0 + i) * a.h + sq.head) * (i64)a.dk + d;
            if (with_q) s.q(b)[KO(i, d)] = ok ? a.q[off] : elem_t(0);
            s.k(b)[KO(i, d)] = ok ? a.k[off] : elem_t(0);
#if KEY_GATE == GATE_PER_KEY
            if (with_x) s.x(b)[XO(i, d)] = ok ? a.g[off] : elem_t(0);
#endif
        }
    }
    if (a.dv % VEC == 0 && sq.v0 + BV <= a.dv) {
        constexpr int VPR = BV / VEC, RSTEP = G::NT / VPR;  // as above, rows of this CTA's value columns
        const int r0 = tid / VPR, e = (tid % VPR) * VEC;
        const i64 rs = (i64)nvh(a) * a.dv;
        const i64 base = ((sq.bos + i0 + r0) * nvh(a) + vhead(sq)) * (i64)a.dv + sq.v0 + e;
        if (C % RSTEP == 0 && (!GLA_WGMMA || RSTEP % 8 == 0) && rows == C) {  // whole chunk, as above
            const i64 step = (i64)RSTEP * rs;
            const elem_t* gv = a.v + base;
            const elem_t* gx = a.g + base;
            const unsigned svo = smem_u32(s.v(b) + VO(r0, e)), sxo = smem_u32(s.x(b) + r0 * LDV + e);
            (void)gx; (void)sxo;
#pragma unroll
            for (int u = 0; u < C / RSTEP; ++u) {
                const unsigned row = u * RSTEP * VROW * (unsigned)sizeof(elem_t), xrow = u * RSTEP * LDV * (unsigned)sizeof(elem_t);
                (void)xrow;
                cp_async16_full(svo + row, gv);
#if KEY_GATE == GATE_PER_VALUE
                if (with_x) cp_async16_full(sxo + xrow, gx);
                gx += step;
#endif
                gv += step;
            }
        } else {
#pragma unroll 4
            for (int i = r0; i < C; i += RSTEP) {
                const bool ok = i < rows;
                const i64 off = ok ? base + (i64)(i - r0) * rs : 0;
                cp_async16(s.v(b) + VO(i, e), a.v + off, ok);
#if KEY_GATE == GATE_PER_VALUE
                if (with_x) cp_async16(s.x(b) + i * LDV + e, a.g + off, ok);
#endif
            }
        }
    } else {
        for (int idx = tid; idx < C * BV; idx += G::NT) {
            const int i = idx / BV, e = idx - (idx / BV) * BV;
            const bool ok = (i < rows) && (sq.v0 + e < a.dv);
            const i64 off = ((sq.bos + i0 + i) * nvh(a) + vhead(sq)) * (i64)a.dv + sq.v0 + e;
            s.v(b)[VO(i, e)] = ok ? a.v[off] : elem_t(0);
#if KEY_GATE == GATE_PER_VALUE
            if (with_x) s.x(b)[i * LDV + e] = ok ? a.g[off] : elem_t(0);
#endif
        }
    }
    cp_async_commit();
    return issue_logit<G>(a, sq, i0);
}

// Land the per-head logit loaded by issue_chunk into stage buffer b.
template <class G = CTA>
__device__ __forceinline__ void land_logit(const Tiles& s, int b, elem_t x) {
#if KEY_GATE == GATE_PER_HEAD && !GLA_REG_LOGIT
    if (G::tid() < C) s.x(b)[G::tid()] = x;
#else
    (void)s; (void)b; (void)x;
#endif
}

// Where gate_cumsum / gate_decays post their per-segment totals ([SEGS][DK] f32): the state tile st for the whole
// CTA (free then), the group's own region for producers of the warp-specialised kernel (the consumers own st).
template <class G, int SEGS>
__device__ __forceinline__ float* seg_totals(const Tiles& s) {
    static_assert(SEGS == 1 || SEGS * DK * 4 <= (G::FIRST_THREAD > 0 ? TOT_BYTES : ST_BYTES), "segment totals must fit");
    return G::FIRST_THREAD > 0 ? s.tot : reinterpret_cast<float*>(s.st);
}

#if KEY_GATE != GATE_PER_KEY && KEY_GATE != GATE_PER_VALUE
constexpr int GPL = C / 32;  // scalar gates: Γ values per lane (lane l holds rows l·GPL .. l·GPL + GPL − 1)
// Scalar gate, one warp (all 32 lanes): Γ_i = log2(e) · Σ_{m<=i} gate(x_m) for this lane's GPL rows — a serial
// sum over the lane's rows, then a shuffle scan across lanes. Padding rows (i >= rows) repeat the last valid row's
// Γ bit for bit: the state update's Γ_L = Γ_{C−1} must cancel exactly against Γ of the last token. Every warp that
// runs it gets the same bits (the same operations in the same order).
// (xr: GLA_REG_LOGIT's logit of row `lane`, in place of the landed tile.)
__device__ __forceinline__ void scalar_scan(const FwdArgs& a, const Tiles& s, const Seq& sq, int i0, int b, float fixed_log_alpha, int lane, float (&gam)[GPL], elem_t xr = elem_t(0)) {
    const int rows = min(C, sq.len - i0);
    const float* p = a.params ? a.params + (i64)vhead(sq) * NPARAM : nullptr;
    float v[GPL], sum = 0.f;
#pragma unroll
    for (int u = 0; u < GPL; ++u) {
        const int i = lane * GPL + u;
#if GLA_REG_LOGIT
        v[u] = i < rows ? gate_log2_acc(to_f32(xr), p, 0.f) : 0.f;
#elif KEY_GATE == GATE_PER_HEAD
        v[u] = i < rows ? gate_log2_acc(to_f32(s.x(b)[i]), p, 0.f) : 0.f;
#else
        v[u] = i < rows ? LOG2E * fixed_log_alpha : 0.f;
#endif
        sum += v[u];
    }
    (void)p; (void)b; (void)xr;
    float incl = sum;
#pragma unroll
    for (int off = 1; off < 32; off <<= 1) {
        const float n = __shfl_up_sync(0xffffffffu, incl, off);
        if (lane >= off) incl += n;
    }
    // Exclusive prefix by shuffle (not incl − sum, which cancels badly once Γ is large).
    const float excl = __shfl_up_sync(0xffffffffu, incl, 1);
    float run = lane == 0 ? 0.f : excl;
#pragma unroll
    for (int u = 0; u < GPL; ++u) { run += v[u]; gam[u] = run; }
    const int last = rows - 1;
    float gl = 0.f;
#pragma unroll
    for (int u = 0; u < GPL; ++u) {
        const float x = __shfl_sync(0xffffffffu, gam[u], last / GPL);
        if (u == last % GPL) gl = x;
    }
#pragma unroll
    for (int u = 0; u < GPL; ++u)
        if (lane * GPL + u >= rows) gam[u] = gl;
}
// Γ_i from the registers of scalar_scan (every lane of the warp takes part; i may differ per lane).
__device__ __forceinline__ float gamma_at(const float (&gam)[GPL], int i) {
    float x = 0.f;
#pragma unroll
    for (int u = 0; u < GPL; ++u) {
        const float y = __shfl_sync(0xffffffffu, gam[u], i / GPL);
        if (i % GPL == u) x = y;
    }
    return x;
}
#endif

// Stage gate + cumsum:  Γ_i = log2(e) · Σ_{m<=i} gate(x_m)   (f32; padding rows and masked columns contribute 0).
// Returns (CTA-uniform) whether the chunk is "mild": its decay span −min_d Γ_L,d is at most SPAN_MAX, so the
// chunk-level factorisation of intra_scores_factored is safe (per-key gates only; always false otherwise).
template <class G = CTA>
__device__ __forceinline__ bool gate_cumsum(const FwdArgs& a, const Tiles& s, const Seq& sq, int i0, int b, float fixed_log_alpha) {
    const int tid = G::tid();
    const int rows = min(C, sq.len - i0);
    const float* p = a.params ? a.params + (i64)vhead(sq) * NPARAM : nullptr;
#if KEY_GATE == GATE_PER_KEY
    // Thread (seg, pair) runs the gate and a running sum down key columns d, d + 1 over its segment of C / SEGS rows
    // (every thread busy; one 32-bit read of two logits, one 64-bit store of two Γ) and posts the segment's total;
    // after one barrier every segment adds the totals of the segments above it. The totals live in the state tile
    // st, which is free here (the previous chunk's output has read it; state_to_smem writes it after this stage),
    // or, for the producers of the warp-specialised kernel (the consumers own st), in their own region tot.
    constexpr int CP = DK / 2, SEGS = G::NT >= CP ? G::NT / CP : 1, SR = C / SEGS, PER = (SEGS * CP + G::NT - 1) / G::NT;
    float* tot = seg_totals<G, SEGS>(s);  // [SEGS][DK]
    const bool full = rows == C && a.dk == DK;  // no padding rows, no masked columns (every chunk but a last one)
    bool mild = true;  // every Γ_L of this thread's columns >= −SPAN_MAX (false for NaN)
#pragma unroll
    for (int u = 0; u < PER; ++u) {
        const int idx = tid + u * G::NT;
        if (idx >= SEGS * CP) break;
        const int d = (idx % CP) * 2, seg = idx / CP, i0s = seg * SR;
        float acc0 = 0.f, acc1 = 0.f;
        if (full) {
#pragma unroll 8
            for (int i = i0s; i < i0s + SR; ++i) {
                const float2 x = load_pair(s.x(b) + XO(i, d));
                acc0 = gate_log2_acc(x.x, p, acc0);
                acc1 = gate_log2_acc(x.y, p, acc1);
                *reinterpret_cast<float2*>(s.G + i * LDG + d) = make_float2(acc0, acc1);
            }
        } else {
            for (int i = i0s; i < i0s + SR; ++i) {
                const float2 x = load_pair(s.x(b) + XO(i, d));
                if (i < rows && d < a.dk) acc0 = gate_log2_acc(x.x, p, acc0);
                if (i < rows && d + 1 < a.dk) acc1 = gate_log2_acc(x.y, p, acc1);
                *reinterpret_cast<float2*>(s.G + i * LDG + d) = make_float2(acc0, acc1);
            }
        }
        if (SEGS > 1) {
            *reinterpret_cast<float2*>(tot + seg * DK + d) = make_float2(acc0, acc1);
        } else {  // one segment: this thread's sums are Γ_L
            s.GL[d] = acc0; s.GL[d + 1] = acc1;
            s.EGL[d] = exp_nonpos(acc0); s.EGL[d + 1] = exp_nonpos(acc1);  // exp(Γ_L): K̂ = K̃ ⊙ exp(Γ_L) on mild chunks
            mild = mild && acc0 >= -SPAN_MAX && acc1 >= -SPAN_MAX;
        }
    }
    if (SEGS > 1) {
        G::sync();
#pragma unroll
        for (int u = 0; u < PER; ++u) {
            const int idx = tid + u * G::NT, d = (idx % CP) * 2, seg = idx / CP;
            if (idx >= SEGS * CP || seg == 0) continue;
            float2 off = make_float2(0.f, 0.f);
            for (int m = 0; m < seg; ++m) {  // totals of the segments above
                const float2 t = *reinterpret_cast<const float2*>(tot + m * DK + d);
                off.x += t.x;
                off.y += t.y;
            }
#pragma unroll 8
            for (int i = seg * SR; i < seg * SR + SR; ++i) {
                float2* g = reinterpret_cast<float2*>(s.G + i * LDG + d);
                const float2 v = *g;
                *g = make_float2(v.x + off.x, v.y + off.y);
            }
            if (seg == SEGS - 1) {  // the last segment holds Γ_L
                const float2 gl = *reinterpret_cast<const float2*>(s.G + (C - 1) * LDG + d);
                s.GL[d] = gl.x; s.GL[d + 1] = gl.y;
                s.EGL[d] = exp_nonpos(gl.x); s.EGL[d + 1] = exp_nonpos(gl.y);
                mild = mild && gl.x >= -SPAN_MAX && gl.y >= -SPAN_MAX;
            }
        }
    }
    (void)fixed_log_alpha;
    return G::all(mild);  // NaN logits fail the test: the exact path handles them
#elif KEY_GATE == GATE_PER_VALUE
    // Value gate: Γ over this CTA's BV value columns (columns past d_v contribute 0).
    for (int idx = tid; idx < C * BV; idx += G::NT) {
        const int i = idx / BV, e = idx - (idx / BV) * BV;
        s.G[i * LDG + e] = (i < rows && sq.v0 + e < a.dv) ? gate_log2_acc(to_f32(s.x(b)[i * LDV + e]), p, 0.f) : 0.f;
    }
    G::sync();
    for (int e = tid; e < BV; e += G::NT) {
        float acc = 0.f;
        for (int i = 0; i < C; ++i) { acc += s.G[i * LDG + e]; s.G[i * LDG + e] = acc; }
    }
    (void)fixed_log_alpha;
#else
    // Scalar gate: warp 0 scans the C values (scalar_scan) and publishes Γ.
    if (tid < 32) {
        float gam[GPL];
        scalar_scan(a, s, sq, i0, b, fixed_log_alpha, tid, gam);
#pragma unroll
        for (int u = 0; u < GPL; ++u) s.G[tid * GPL + u] = gam[u];
    }
    (void)b; (void)fixed_log_alpha;
#endif
    return false;
}

// Warp tiles of the three products (16x8 mma tiles; the writer picks O_WM x O_WN etc. so that the warp tiles
// divide evenly over the NW warps): O (C x BV), the state S (d_k x BV, in registers), the scores A (C x C).
constexpr int S_WCOLS = BV / (8 * S_WN), S_WTILES = (DK / (16 * S_WM)) * S_WCOLS;
constexpr int O_WCOLS = BV / (8 * O_WN), O_WTILES = (C / (16 * O_WM)) * O_WCOLS;
constexpr int A_WCOLS = C / (8 * A_WN), A_WTILES = (C / (16 * A_WM)) * A_WCOLS;
// Warp tiles each warp of a group of `warps` runs (the last ones may have fewer).
constexpr int per_warp(int tiles, int warps) { return (tiles + warps - 1) / warps; }
// This thread's part of S, in mma accumulator layout. S lives with the NW warps of the state group (the whole CTA,
// or the consumer warps of the warp-specialised kernel).
typedef float SRegs[per_warp(S_WTILES, NW)][S_WM][S_WN][4];

// Origin (row, col) of warp tile wt of a product whose warp tiles are WM x WN mma tiles, WCOLS of them per row.
template <int WM, int WN, int WCOLS>
__device__ __forceinline__ int2 wtile_origin(int wt) { return make_int2((wt / WCOLS) * 16 * WM, (wt % WCOLS) * 8 * WN); }

// Stage state_to_smem: st = S in elem_t (the B operand of Q̃ S); pairs of columns as one 32-bit store.
template <class G = CTA>
__device__ __forceinline__ void state_to_smem(const SRegs& S, const Tiles& s) {
    static_assert(G::NW == NW, "S is held by the NW warps of the state group");
    const int warp = (G::tid() >> 5), lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int u = 0; u < per_warp(S_WTILES, G::NW); ++u) {
        const int wt = warp + u * G::NW;
        if (wt >= S_WTILES) continue;
        const int2 o = wtile_origin<S_WM, S_WN, S_WCOLS>(wt);
#pragma unroll
        for (int mi = 0; mi < S_WM; ++mi)
#pragma unroll
            for (int ni = 0; ni < S_WN; ++ni) {
                const int d = o.x + mi * 16 + g, e = o.y + ni * 8 + 2 * t;
                st_pair(s.st + d * LDV + e, S[u][mi][ni][0], S[u][mi][ni][1]);
                st_pair(s.st + (d + 8) * LDV + e, S[u][mi][ni][2], S[u][mi][ni][3]);
            }
    }
}

// Move S between registers and a global [.., H, dk, dv] f32 slab (h0, ht, chunk states). Masked to the real dims.
template <bool STORE, class G = CTA>
__device__ __forceinline__ void state_global(SRegs& S, float* base, const FwdArgs& a, int v0) {
    static_assert(G::NW == NW, "S is held by the NW warps of the state group");
    const int warp = (G::tid() >> 5), lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int u = 0; u < per_warp(S_WTILES, G::NW); ++u) {
        const int wt = warp + u * G::NW;
        if (wt >= S_WTILES) continue;
        const int2 o = wtile_origin<S_WM, S_WN, S_WCOLS>(wt);
#pragma unroll
        for (int mi = 0; mi < S_WM; ++mi)
#pragma unroll
            for (int ni = 0; ni < S_WN; ++ni)
#pragma unroll
                for (int r = 0; r < 4; ++r) {
                    const int d = o.x + mi * 16 + g + (r >= 2 ? 8 : 0);
                    const int e = v0 + o.y + ni * 8 + 2 * t + (r & 1);
                    const bool ok = d < a.dk && e < a.dv;
                    if (STORE) { if (ok) base[(i64)d * a.dv + e] = S[u][mi][ni][r]; }
                    else S[u][mi][ni][r] = ok ? base[(i64)d * a.dv + e] : 0.f;
                }
    }
}

// Stage chunk_state_from_global (materialize on): st = S_[n] read from the states buffer (coalesced rows).
template <class G = CTA>
__device__ __forceinline__ void state_global_to_smem(const float* base, const Tiles& s, const FwdArgs& a, int v0) {
    for (int idx = G::tid(); idx < BV * DK; idx += G::NT) {
        const int d = idx / BV, e = idx - (idx / BV) * BV;
        const bool ok = d < a.dk && v0 + e < a.dv;
        s.st[d * LDV + e] = ok ? to_elem(base[(i64)d * a.dv + v0 + e]) : elem_t(0);
    }
}

union Vec16 {
    uint4 u;
    elem_t x[VEC];
};

// VEC consecutive Γ values as float4 loads (16-byte aligned: d is a multiple of VEC, LDG of 4).
__device__ __forceinline__ void load_g(const float* p, float out[VEC]) {
#pragma unroll
    for (int u = 0; u < VEC; u += 4) {
        const float4 f = *reinterpret_cast<const float4*>(p + u);
        out[u] = f.x; out[u + 1] = f.y; out[u + 2] = f.z; out[u + 3] = f.w;
    }
}

// Store A_ij (f32) as bf16/f16 hi + lo halves (SPLIT_A), or rounded once.
__device__ __forceinline__ void store_split(const Tiles& s, int i, int j, float x) {
    const elem_t hi = to_elem(x);
    s.A[AO(i, j)] = hi;
#if SPLIT_A
    s.A_lo[AO(i, j)] = to_elem(x - to_f32(hi));
#endif
}
// Store a 16x8 accumulator tile of A (rows r0.., cols c0..), split into hi + lo halves when SPLIT_A.
__device__ __forceinline__ void tile_store_a(const float c[4], const Tiles& s, int r0, int c0) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int r = 0; r < 4; ++r) store_split(s, r0 + g + (r >= 2 ? 8 : 0), c0 + 2 * t + (r & 1), c[r]);
}

#if KEY_GATE == GATE_PER_KEY
// Whether pair (i, j) belongs to level h of the binary secondary chunking: j < i and the highest bit in which they
// differ is h (both in one block of 2h rows, i in its upper half, j in the lower one).
__device__ __forceinline__ bool level_pair(int i, int j, int h) { return j < i && (i ^ j) >= h && (i ^ j) < 2 * h; }
// Whether the 16x8 tile of A at rows r0.., columns c0.. (r0 a multiple of 16, c0 of 8) holds a pair of level h.
__device__ __forceinline__ bool tile_has_level(int r0, int c0, int h) {
    if (h >= 16) return (r0 & h) != 0 && (r0 ^ c0) >= h && (r0 ^ c0) < 2 * h;  // whole tile in one half of a block
    if (h == 8) return c0 == r0;                                                // the 16-row block's lower half
    return c0 >= r0 && c0 < r0 + 16;                                            // blocks of <= 8 rows: diagonal tiles
}
// Store the level-h pairs of a 16x8 accumulator tile of A (the tile's other entries belong to other levels).
__device__ __forceinline__ void tile_store_level(const float c[4], const Tiles& s, int r0, int c0, int h) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int r = 0; r < 4; ++r) {
        const int i = r0 + g + (r >= 2 ? 8 : 0), j = c0 + 2 * t + (r & 1);
        if (level_pair(i, j, h)) store_split(s, i, j, c[r]);
    }
}

// Stage intra_scores, per-key gate, chunks over SPAN_MAX (the exact path): §4.3's secondary chunking applied
// recursively, so that its cost does not depend on the decay. A_ij for j <= i:
//   diagonal, exponent 0:           A_ii = q_i · k_i
//   level h = C/2, C/4, …, 1:       pairs of one block of 2h rows, i in the upper half (first row m), j in the lower:
//                                   A_ij = Σ_d [q_id exp(Γ_id − Γ_md)] [k_jd exp(Γ_md − Γ_jd)]     (both <= 0)
// Each level scales every row once (query rows of upper halves, key rows of lower halves) into the scratch tile and
// takes its pairs from 16x8 tensor-core tiles of scratch · scratchᵀ: log2(C) · C · d_k exponentials a chunk at any
// gate strength (C 32, d_k 128: 20 k; the pairwise diagonal blocks of c = 16 took 35 k, and one dependent shuffle
// chain a pair), no exponent > 0, and an exponent that underflows only where the decay itself is below f32's range.
template <class G = CTA>
__device__ __forceinline__ void intra_scores(const Tiles& s, int b) {
    const int tid = G::tid(), warp = tid >> 5, lane = tid & 31;
    const elem_t* q = s.q(b);
    const elem_t* k = s.k(b);
    for (int idx = tid; idx < C * C; idx += G::NT) {  // causal mask: zero above the diagonal
        const int i = idx / C, j = idx - (idx / C) * C;
        if (j > i) {
            s.A[AO(i, j)] = elem_t(0);
#if SPLIT_A
            s.A_lo[AO(i, j)] = elem_t(0);
#endif
        }
    }
    // Diagonal: one warp per row, lanes split d (conflict-free row reads).
    constexpr int DPL = DK / 32;
    for (int i = warp; i < C; i += G::NW) {
        float acc = 0.f;
#pragma unroll
        for (int u = 0; u < DPL; ++u) acc += to_f32(q[KO(i, lane + 32 * u)]) * to_f32(k[KO(i, lane + 32 * u)]);
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
        if (lane == 0) store_split(s, i, i, acc);
    }
    elem_t* xs = s.x(b);  // scratch [C][LDK]: each row's operand of the level (the logits are dead)
#pragma unroll 1
    for (int h = C / 2; h >= 1; h >>= 1) {
        for (int idx = tid; idx < C * (DK / VEC); idx += G::NT) {
            const int t = idx / (DK / VEC), d = (idx - t * (DK / VEC)) * VEC;
            const bool query = (t & h) != 0;                   // upper half of its block
            const int m = query ? (t & ~(h - 1)) : ((t | (h - 1)) + 1);  // the upper half's first row
            const float sgn = query ? 1.f : -1.f;            // query: Γ_t − Γ_m; key: Γ_m − Γ_t (exact negation)
            Vec16 in, out;
            in.u = *reinterpret_cast<const uint4*>((query ? q : k) + KO(t, d));
#pragma unroll
            for (int u = 0; u < VEC; u += 4) {                 // four Γ pairs live at a time (producer registers)
                const float4 gt = *reinterpret_cast<const float4*>(s.G + t * LDG + d + u);
                const float4 gm = *reinterpret_cast<const float4*>(s.G + m * LDG + d + u);
                out.x[u] = to_elem(to_f32(in.x[u]) * exp_nonpos(sgn * (gt.x - gm.x)));
                out.x[u + 1] = to_elem(to_f32(in.x[u + 1]) * exp_nonpos(sgn * (gt.y - gm.y)));
                out.x[u + 2] = to_elem(to_f32(in.x[u + 2]) * exp_nonpos(sgn * (gt.z - gm.z)));
                out.x[u + 3] = to_elem(to_f32(in.x[u + 3]) * exp_nonpos(sgn * (gt.w - gm.w)));
            }
            *reinterpret_cast<uint4*>(xs + t * LDK + d) = out.u;
        }
        G::sync();
        // The 16x8 tiles of the lower triangle (row tile tm holds column tiles 0 .. 2 tm + 1), over the warps; those
        // without a pair of this level are skipped.
        constexpr int NTILES = (C / 16) * (C / 16 + 1);
#pragma unroll 1
        for (int tile = warp; tile < NTILES; tile += G::NW) {
            int tm = 0, tn = tile;
            while (tn >= 2 * tm + 2) tn -= 2 * tm++ + 2;
            if (!tile_has_level(16 * tm, 8 * tn, h)) continue;
            float c[4] = {0.f, 0.f, 0.f, 0.f};
            tile_mma<DK>(c, xs, LDK, 16 * tm, xs, LDK, 8 * tn);
            tile_store_level(c, s, 16 * tm, 8 * tn, h);
        }
        G::sync();  // the scratch is free for the next level; after the last, A is complete
    }
}
#else
// Stage intra_scores, scalar gate (single-matmul form): A_ij = (q_i · k_j) exp(Γ_i − Γ_j) for j <= i, else 0.
// Value gate: A_ij = q_i · k_j for j <= i (the decay acts on V's columns, see output_chunk).
template <class G = CTA>
__device__ __forceinline__ void intra_scores(const Tiles& s, int b) {
    const int warp = (G::tid() >> 5), lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int u = 0; u < per_warp(A_WTILES, G::NW); ++u) {
        const int wt = warp + u * G::NW;
        if (wt >= A_WTILES) continue;
        const int2 o = wtile_origin<A_WM, A_WN, A_WCOLS>(wt);
        float c[A_WM][A_WN][4] = {};
        if (o.y <= o.x + 16 * A_WM - 1) warp_mma<A_WM, A_WN, false, false, DK>(c, ktile(s.q(b)), o.x, ktile(s.k(b)), o.y, DK);
#pragma unroll
        for (int mi = 0; mi < A_WM; ++mi)
#pragma unroll
            for (int ni = 0; ni < A_WN; ++ni) {
#pragma unroll
                for (int r = 0; r < 4; ++r) {
                    const int i = o.x + mi * 16 + g + (r >= 2 ? 8 : 0), j = o.y + ni * 8 + 2 * t + (r & 1);
#if KEY_GATE == GATE_PER_VALUE
                    c[mi][ni][r] = (j <= i) ? c[mi][ni][r] : 0.f;
#else
                    c[mi][ni][r] = (j <= i) ? c[mi][ni][r] * exp_nonpos(s.G[i] - s.G[j]) : 0.f;
#endif
                }
                tile_store_a(c[mi][ni], s, o.x + mi * 16, o.y + ni * 8);
            }
    }
    G::sync();
}
#endif

#if GLA_VALUE_ROWS
// The 8 elements of `in` times 2^x[c] (x[c] <= 0) rounded into hi (GLA_SPLIT_OPS: their low halves into lo, so that
// hi + lo carries the product to ~16 mantissa bits): V' and V̂ of value_operands.
__device__ __forceinline__ void scale_store8(const Vec16& in, const float (&x)[8], elem_t* hi, [[maybe_unused]] elem_t* lo) {
    Vec16 h;
#if GLA_SPLIT_OPS
    Vec16 l;
#endif
#pragma unroll
    for (int c = 0; c < 8; ++c) {
        const float y = to_f32(in.x[c]) * exp_nonpos(x[c]);
        h.x[c] = to_elem(y);
#if GLA_SPLIT_OPS
        l.x[c] = to_elem(y - to_f32(h.x[c]));
#endif
    }
    *reinterpret_cast<uint4*>(hi) = h.u;
#if GLA_SPLIT_OPS
    *reinterpret_cast<uint4*>(lo) = l.u;
#endif
}

// One 16-byte vector of value_operands' V̂: row r, columns e .. e + 7 of slot b's V scaled in place by 2^(Γ_L − Γ)
// (GLA_REVERSE: Ṽ, by 2^Γ), Γ from s.G, `gl` = Γ_L of those columns; the producers (value gates' forward) and the
// passes' consumers (wg_scale_values) alike.
__device__ __forceinline__ void scale_value8(const Tiles& s, int b, int r, int e, const float (&gl)[8]) {
    elem_t* v = s.v(b);
    const int o = VO(r, e);
    Vec16 in;
    in.u = *reinterpret_cast<const uint4*>(v + o);
    const float4 ga = *reinterpret_cast<const float4*>(s.G + r * LDG + e), gb = *reinterpret_cast<const float4*>(s.G + r * LDG + e + 4);
    const float gr[8] = {ga.x, ga.y, ga.z, ga.w, gb.x, gb.y, gb.z, gb.w};
    float x[8];
#pragma unroll
    for (int c = 0; c < 8; ++c) x[c] = GLA_REVERSE ? gr[c] : gl[c] - gr[c];
    scale_store8(in, x, v + o, s.v_lo(b) + o);
}

struct SwzAt {  // a swizzled tile seen from (dr, dc): rows and columns of a 16-multiple block
    const elem_t* p;
    int dr, dc;
    __device__ __forceinline__ int off(int r, int c) const { return swz(r + dr, c + dc); }
};
// strong_values' tensor-core part: V' into the group's tile, the blocks, P's stores (every column; those that do not fit
// are redone after).
template <class G>
__device__ __forceinline__ void strong_blocks(const Tiles& s, int b) {
    constexpr int NWP = G::NT / 32, CW = BV / NWP, NB = CW / 16;
    constexpr float SIGN = GLA_REVERSE ? -1.f : 1.f;
    constexpr int P0 = GLA_REVERSE ? 0 : SC - 1, P1 = GLA_REVERSE ? SC : C - 1;  // the sub-chunks' reference rows
    const int tid = G::tid(), warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
    const elem_t* v = s.v(b);
    // V' in the group's own tile (hi halves) and, GLA_SPLIT_OPS, in v_lo's (low halves; V̂_lo goes there after this
    // stage)
    elem_t* vh = s.vs;
    elem_t* vl = s.v_lo(b);
    // V'_j = v_j ⊙ 2^(±(Γ_p − Γ_j)), 8 columns a step
    for (int idx = tid; idx < C * (BV / 8); idx += G::NT) {
        const int r = idx / (BV / 8), e = (idx - r * (BV / 8)) * 8, p = r < SC ? P0 : P1;
        Vec16 in;
        in.u = *reinterpret_cast<const uint4*>(v + VO(r, e));
        float gr[8], gp[8], x[8];
        load_g(s.G + r * LDG + e, gr);
        load_g(s.G + p * LDG + e, gp);
#pragma unroll
        for (int c = 0; c < 8; ++c) x[c] = SIGN * (gp[c] - gr[c]);
        scale_store8(in, x, vh + VO(r, e), vl + VO(r, e));
    }
    G::sync();
    // The blocks on tensor cores, 16 of this warp's columns at a time. Block (m, k) reads A's rows 16m, columns 16k
    // (A_ij, forward) or A's rows 16k, columns 16m (Aᵀ, reversed) and V'_k.
    const int cw0 = warp * CW;
    auto block = [&](float (&acc)[1][2][4], int m, int k, int col) {
        const SwzAt Ah{s.A, GLA_REVERSE ? 16 * k : 0, GLA_REVERSE ? 0 : 16 * k};
        const SwzAt Bh{vh, 16 * k, 0};
        warp_mma<1, 2, (bool)GLA_REVERSE, true, 16>(acc, Ah, 16 * m, Bh, col, 16);
#if SPLIT_A
        const SwzAt Al{s.A_lo, Ah.dr, Ah.dc};
        warp_mma<1, 2, (bool)GLA_REVERSE, true, 16>(acc, Al, 16 * m, Bh, col, 16);
#endif
#if GLA_SPLIT_OPS
        const SwzAt Bl{vl, 16 * k, 0};
        warp_mma<1, 2, (bool)GLA_REVERSE, true, 16>(acc, Ah, 16 * m, Bl, col, 16);
#endif
    };
    // out (rows 16m + g, + 8; columns col + 8 ni + 2t, + 1) = Σ over m's blocks of 2^(±(Γ_i − Γ_p)) · (A V')
    auto rows_of = [&](float (&out)[2][4], int m, int col) {
#pragma unroll
        for (int ni = 0; ni < 2; ++ni)
#pragma unroll
            for (int h = 0; h < 4; ++h) out[ni][h] = 0.f;
#pragma unroll
        for (int k = 0; k < 2; ++k) {
            if (k != m && m != (GLA_REVERSE ? 0 : 1)) continue;     // the off-diagonal block: (1, 0), reversed (0, 1)
            float acc[1][2][4] = {};
            block(acc, m, k, col);
            const int p = k ? P1 : P0;
#pragma unroll
            for (int ni = 0; ni < 2; ++ni)
#pragma unroll
                for (int h = 0; h < 4; ++h) {
                    const int i = 16 * m + g + 8 * (h >> 1), e = col + 8 * ni + 2 * t + (h & 1);
                    out[ni][h] += exp_span(SIGN * (s.G[i * LDG + e] - s.G[p * LDG + e])) * acc[0][ni][h];
                }
        }
    };
    auto store_rows = [&](const float (&out)[2][4], int m, int col) {
#pragma unroll
        for (int ni = 0; ni < 2; ++ni)
#pragma unroll
            for (int h2 = 0; h2 < 2; ++h2) {
                const int i = 16 * m + g + 8 * h2, e = col + 8 * ni + 2 * t;
                *reinterpret_cast<float2*>(s.P + i * BV + e) = make_float2(out[ni][2 * h2], out[ni][2 * h2 + 1]);
            }
    };
#pragma unroll 1
    for (int q = 0; q < NB; ++q)
#pragma unroll
        for (int m = 0; m < 2; ++m) {
            float out[2][4];
            rows_of(out, m, cw0 + 16 * q);
            store_rows(out, m, cw0 + 16 * q);
        }
    __syncwarp();
}
// A pair's exponent in P_ie (column e): Γ_i − Γ_j, reversed Γ_j − Γ_i (<= 0 on a monotone Γ; the callers stop a row's
// sum once it is below −128), and its coefficient A_ij 2^x (reversed A_ji: the dk pass's A_ts, t = j >= s = i).
__device__ __forceinline__ float pair_exp(const Tiles& s, float gi, int j, int e) {
    return (GLA_REVERSE ? -1.f : 1.f) * (gi - s.G[j * LDG + e]);
}
__device__ __forceinline__ float pair_a(const Tiles& s, int i, int j) {
    const int r = GLA_REVERSE ? j : i, c = GLA_REVERSE ? i : j;
    float aij = to_f32(s.A[AO(r, c)]);
#if SPLIT_A
    aij += to_f32(s.A_lo[AO(r, c)]);
#endif
    return aij;
}
// The pairwise parts' early exit. P_ie's terms from j on have factors 2^(±(Γ_i − Γ_j')) <= w, the factor of the pair
// just added (Γ is monotone), so once rem · (max |A|) · (max_j |v_je|) · w < 2^−24 |acc| — rem the terms left — all
// of them together are below one unit in the last place of the f32 sum: the row stops (10·log σ(x): after ~3 pairs
// rather than the ~11 until the factors flush below 2^−128). A NaN in A or v makes the bound NaN: no early exit, the
// NaN goes on and shows. amax: a_bound's, vmax: the column's max |v_je| (NaN-propagating).
__device__ __forceinline__ bool pair_done(float rem, float amax, float vmax, float w, float acc) {
    return rem * amax * vmax * w < 0x1p-24f * fabsf(acc);
}
// max |A_ij| over the chunk (hi + lo halves: |A_hi| + |A_lo| bounds their sum), every lane of the calling warp the
// same (NaN-propagating).
__device__ __forceinline__ float a_bound(const Tiles& s, int lane) {
    float m = 0.f;
    for (int idx = lane; idx < C * C; idx += 32) {
        const int r = idx / C, c = idx - (idx / C) * C;
        float a = fabsf(to_f32(s.A[AO(r, c)]));
#if SPLIT_A
        a += fabsf(to_f32(s.A_lo[AO(r, c)]));
#endif
        m = gla_max_nan(m, a);
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) m = gla_max_nan(m, __shfl_xor_sync(0xffffffffu, m, o));
    return m;
}
// strong_values' pairwise part where some column fits: P_ie of each of this warp's columns e that `fits` rejects,
// lane = row i, j from i away from it (forward: down to 0; reversed: up to C − 1), four pairs a step (their loads in
// flight together; RWKV-6: most rows sum far — one pair a step took 4.18 ms for its backward at 8×4096×16×128 on an
// H100, four 3.71); the row stops after the step where 2^(±(Γ_i − Γ_j)) < 2^−128 (the term flushes to zero, and so
// does every later one: Γ is monotone) or where pair_done finds the terms left below the sum's last place (a NaN goes
// on and shows).
template <class G, class Fits>
__device__ __forceinline__ void pairwise_columns(const Tiles& s, const elem_t* v, int warp, int lane, Fits fits) {
    static_assert(C == 32, "a row a lane");
    constexpr int CW = BV / (G::NT / 32), STEP = GLA_REVERSE ? 1 : -1, U = 4;
    const int cw0 = warp * CW;
    float amax = -1.f;                                       // (a_bound, once a column needs it)
#pragma unroll 1
    for (int e0 = cw0; e0 < cw0 + CW; e0 += 32) {
        const int e = e0 + lane;
        const bool ok = e >= cw0 + CW || fits(e);
        unsigned redo = __ballot_sync(0xffffffffu, !ok);
        if (redo && amax < 0.f) amax = a_bound(s, lane);
        while (redo) {
            const int ec = e0 + __ffs(redo) - 1;
            redo &= redo - 1;
            const int i = lane;
            const float gi = s.G[i * LDG + ec];
            float vmax = fabsf(to_f32(v[VO(i, ec)]));        // max_j |v_j,ec| (lane = row)
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) vmax = gla_max_nan(vmax, __shfl_xor_sync(0xffffffffu, vmax, o));
            float acc = 0.f;
#pragma unroll 1
            for (int j0 = i; GLA_REVERSE ? j0 < C : j0 >= 0; j0 += U * STEP) {
                float last = 0.f, w = 1.f;
                int jl = j0;
#pragma unroll
                for (int u = 0; u < U; ++u) {
                    const int j = j0 + u * STEP;
                    if (GLA_REVERSE ? j >= C : j < 0) break;
                    last = pair_exp(s, gi, j, ec);
                    w = exp_nonpos(last);
                    jl = j;
                    acc = fmaf(pair_a(s, i, j) * w, to_f32(v[VO(j, ec)]), acc);
                }
                if (last < -128.f || pair_done((float)(GLA_REVERSE ? C - 1 - jl : jl), amax, vmax, w, acc)) break;
            }
            s.P[i * BV + ec] = acc;
        }
    }
}
// strong_values' pairwise part where no column of the group fits (e.g. log α = −60, 10·log σ(x)): every column of
// this warp, lane = column (32 at a time), P_ie for the rows i in turn, j from i away from it, four pairs a step (their
// loads and exponentials in flight together, as pairwise_columns), until the step where 2^(±(Γ_i − Γ_j)) < 2^−128 or
// pair_done (a NaN goes on and shows) — A_ij is the same for every lane (a broadcast), Γ and v are consecutive columns
// of a row (−60's backward at 8×4096×16×128 on an H100: lane = row 3.80 ms, lane = column 3.52).
template <class G>
__device__ __forceinline__ void pairwise_all_columns(const Tiles& s, const elem_t* v, int warp, int lane) {
    constexpr int CW = BV / (G::NT / 32), STEP = GLA_REVERSE ? 1 : -1, U = 4;
    const float amax = a_bound(s, lane);
#pragma unroll 1
    for (int e0 = warp * CW; e0 < (warp + 1) * CW; e0 += 32) {
        const int e = e0 + lane;
        if (e >= (warp + 1) * CW) break;
        float vmax = 0.f;                                    // max_j |v_je| (lane = column)
#pragma unroll 4
        for (int j = 0; j < C; ++j) vmax = gla_max_nan(vmax, fabsf(to_f32(v[VO(j, e)])));
        // Two rows at a time, the lead (forward i + 1, reversed i) and the trail (its neighbour towards the diagonal's
        // other side): a step's U + 1 tokens j serve both (the lead's pairs are the window's first U, the trail's its
        // last U), each row keeping its own order of summation and its own exit.
#pragma unroll 1
        for (int i = 0; i < C; i += 2) {
            const int lead = GLA_REVERSE ? i : i + 1, trail = GLA_REVERSE ? i + 1 : i;
            const float g0 = s.G[lead * LDG + e], g1 = s.G[trail * LDG + e];
            float acc0 = 0.f, acc1 = 0.f;
            bool done0 = false, done1 = false;
#pragma unroll 1
            for (int j0 = lead; !(done0 && done1); j0 += U * STEP) {
                float gj[U + 1], vj[U + 1];
#pragma unroll
                for (int u = 0; u <= U; ++u) {
                    const int j = j0 + u * STEP;
                    const bool in = GLA_REVERSE ? j < C : j >= 0;
                    gj[u] = in ? s.G[j * LDG + e] : 0.f;
                    vj[u] = in ? to_f32(v[VO(j, e)]) : 0.f;
                }
                float last0 = 0.f, w0 = 1.f, last1 = 0.f, w1 = 1.f;
                int jl0 = j0, jl1 = j0 + STEP;
#pragma unroll
                for (int u = 0; u < U; ++u) {
                    const int j = j0 + u * STEP;
                    if (done0 || (GLA_REVERSE ? j >= C : j < 0)) break;
                    last0 = (GLA_REVERSE ? -1.f : 1.f) * (g0 - gj[u]);
                    w0 = exp_nonpos(last0);
                    jl0 = j;
                    acc0 = fmaf(pair_a(s, lead, j) * w0, vj[u], acc0);
                }
#pragma unroll
                for (int u = 1; u <= U; ++u) {
                    const int j = j0 + u * STEP;
                    if (done1 || (GLA_REVERSE ? j >= C : j < 0)) break;
                    last1 = (GLA_REVERSE ? -1.f : 1.f) * (g1 - gj[u]);
                    w1 = exp_nonpos(last1);
                    jl1 = j;
                    acc1 = fmaf(pair_a(s, trail, j) * w1, vj[u], acc1);
                }
                // a row ends after its last token, or where its factors flushed, or where pair_done says so
                const int end0 = j0 + (U - 1) * STEP, end1 = j0 + U * STEP;
                done0 = done0 || (GLA_REVERSE ? end0 >= C - 1 : end0 <= 0) || last0 < -128.f ||
                        pair_done((float)(GLA_REVERSE ? C - 1 - jl0 : jl0), amax, vmax, w0, acc0);
                done1 = done1 || (GLA_REVERSE ? end1 >= C - 1 : end1 <= 0) || last1 < -128.f ||
                        pair_done((float)(GLA_REVERSE ? C - 1 - jl1 : jl1), amax, vmax, w1, acc1);
            }
            s.P[lead * BV + e] = acc0;
            s.P[trail * BV + e] = acc1;
        }
    }
}
// Stage strong_values (a strong chunk of value_operands, the producer group): the intra-chunk output of every value
// column e, P_ie = Σ_{j<=i} A_ij v_je 2^(Γ_ie − Γ_je) (GLA_REVERSE: P_se = Σ_{t>=s} A_ts v_te 2^(Γ_te − Γ_se)), by
// §4.3's secondary chunking along the tokens. Sub-chunk k (rows 16k .. 16k + 15) has a reference row p_k — its last
// (its first, reversed) — and its rows enter as V'_j = v_j ⊙ 2^(Γ_p − Γ_j) (reversed 2^(Γ_j − Γ_p)), every exponent <= 0:
//   rows of sub-chunk 0:  P = 2^(Γ_i − Γ_p0) ⊙ (A_00 V'_0)                              (reversed + 2^(Γ_p1 − Γ_s) ⊙ (A_10ᵀ V'_1))
//   rows of sub-chunk 1:  P = 2^(Γ_i − Γ_p1) ⊙ (A_11 V'_1) + 2^(Γ_i − Γ_p0) ⊙ (A_10 V'_0)  (reversed: the diagonal block only)
// The off-diagonal block's factors are <= 1 on both sides (exact at any strength); a diagonal block's row factor is at
// most 2^span of its sub-chunk — so a column is taken this way while both sub-chunks' spans Γ_first − Γ_last are at
// most SPAN_MAX (the row factor <= 2^SPAN_MAX, V' >= 2^−SPAN_MAX of v: no overflow, no flush to zero), and any other
// column (a sub-chunk decaying by more than 2^−SPAN_MAX, or NaN) is redone pairwise, 2^(Γ_i − Γ_j) <= 1 a pair, by the
// warp that owns it (pairwise_columns: a row a lane; where no column fits, pairwise_all_columns: a column a lane),
// each row's sum stopping where the factors flush to zero (at log α = −60 after its second pair). A and V' are hi + lo halves (GLA_SPLIT_OPS: V' too, three products a block; else
// two) on mma.sync, V' in the group's own tile (`Tiles::vs`). A warp owns BV / (its group's warps) columns, in
// blocks of 16.
template <class G>
__device__ __forceinline__ void strong_values(const Tiles& s, int b) {
    static_assert(C == 2 * SC && SC == 16 && VEC == 8, "two sub-chunks of 16 rows, 8 columns a 16-byte vector");
    constexpr int NWP = G::NT / 32, CW = BV / NWP;
    static_assert(G::NT % 32 == 0 && BV % NWP == 0 && CW % 16 == 0, "a warp owns whole 16-column blocks");
    const int tid = G::tid(), warp = tid >> 5, lane = tid & 31;
    const elem_t* v = s.v(b);
    // A column's sub-chunks are both within SPAN_MAX (NaN: no)
    auto fits = [&](int e) {
        return s.G[0 * LDG + e] - s.G[(SC - 1) * LDG + e] <= SPAN_MAX && s.G[SC * LDG + e] - s.G[(C - 1) * LDG + e] <= SPAN_MAX;
    };
    bool none_fit = true;
    for (int e = tid; e < BV; e += G::NT) none_fit = none_fit && !fits(e);
    none_fit = G::all(none_fit);
    if (!none_fit) strong_blocks<G>(s, b);               // (no column fits, e.g. log α = −60: pairwise alone)
    // Columns whose sub-chunks decay too fast for the factors above: pairwise — where none fits (−60: a row's sum
    // ends at its third pair) every column, lane = column; else the few that do not, lane = row, four pairs a step
    // (their loads in flight together; RWKV-6: most rows sum far)
    if (none_fit)
        pairwise_all_columns<G>(s, v, warp, lane);
    else
        pairwise_columns<G>(s, v, warp, lane, fits);
}

// Stage value_operands (per value on wgmma consumers, the producer group, after intra_scores' A = (Q Kᵀ) ⊙ M): the
// gate, Γ and the value operands of the chunk in one register pass. The decay acts on the value columns e, outside the
// key contraction:
//   O_ie = 2^Γ_ie (Sᵀ qᵢ)_e + Σ_{j<=i} A_ij 2^(Γ_ie − Γ_je) v_je,     Sᵀ ← diag(2^Γ_L) Sᵀ + V̂ᵀ K,  V̂ = V ⊙ 2^(Γ_L − Γ)
// A chunk is mild when every column's span is at most SPAN_MAX (Γ_L >= −SPAN_MAX, the group's vote); its consumers
// then take one product and one factor at the store,
//   O_ie = 2^(Γ_ie − Γ_Le) · [(diag(2^Γ_L) Sᵀ) Qᵀ + V̂ᵀ Aᵀ]_ei          (2^(Γ_ie − Γ_Le) <= 2^SPAN_MAX)
// else the intra-chunk part P is computed here (strong_values: §4.3's sub-chunks on tensor cores, pairwise where a
// sub-chunk's own span is too large), and the consumers add it:
//   P_ie = Σ_{j<=i} A_ij v_je 2^(Γ_ie − Γ_je),                      O_ie = 2^Γ_ie (Sᵀ Qᵀ)_ei + P_ie
// GLA_REVERSE (a per-key gate's dk pass: chunks last to first, S' the later tokens' sum relative to the chunk's end)
// is the mirror image: Ṽ = V ⊙ 2^Γ for S'ᵀ ← diag(2^Γ_L) S'ᵀ + Ṽᵀ Q, and
//   mild:   O_se = 2^(−Γ_se) · [(diag(2^Γ_L) S'ᵀ) Kᵀ + Ṽᵀ A]_es          (2^(−Γ_se) <= 2^SPAN_MAX)
//   strong: O_se = 2^(Γ_Le − Γ_se) (S'ᵀ Kᵀ)_es + P_se,   P_se = Σ_{t>=s} A_ts v_te 2^(Γ_te − Γ_se)
// Every exponent evaluated is <= 0 but the mild factor's, bounded by the vote.
// Thread layout: a thread owns 8 value columns (one 16-byte vector) × SR rows; the SEGS threads of a column vector are
// consecutive lanes, so Γ's running sum crosses segments by shuffles (its rows' partial sums go through s.G: SR × 8
// registers would spill at SR = 8, two producer groups of two warps). Writes Γ (s.G), Γ_L, 2^Γ_L and the chunk's mild
// flag (s.GL[2 BV]) for the consumers, V̂ (Ṽ) over v in place (GLA_SPLIT_OPS: its low half in v_lo), P on strong
// chunks; ends on the vote's barrier (strong chunks: two more) plus this thread's own stores (the FULL barrier
// publishes them). A per-key gate's passes (GLA_ROW_SUMS) leave V̂ to their consumers (wg_scale_values: the producers
// bound the passes, the consumers waited on FULL a third of their time).
template <class G>
__device__ __forceinline__ void value_operands(const FwdArgs& a, const Tiles& s, const Seq& sq, int i0, int b) {
    constexpr int CV = BV / 8, SEGS = G::NT / CV, SR = C / SEGS;
    static_assert(G::NT % CV == 0 && SEGS <= 32 && 32 % SEGS == 0 && C % SEGS == 0, "8 columns a thread, a column's segments in one warp");
    const int tid = G::tid(), seg = tid % SEGS, c0 = 8 * (tid / SEGS), r0 = seg * SR;
    const int rows = min(C, sq.len - i0);
    const float* p = a.params ? a.params + (i64)vhead(sq) * NPARAM : nullptr;
    // Γ of this thread's rows: the gate's running sum down its segment (into s.G), then the segments above it added
    // (shuffles) to what it stored
    float tot[8];
#pragma unroll
    for (int c = 0; c < 8; ++c) tot[c] = 0.f;
    // (a per-key gate's passes: the gate runs on every element and a select keeps it inside the sequence and d_v —
    // a branch an element made each evaluation its own block, its exponentials back to back, the producers at IPC
    // 0.12; H100 bwd gla/16 2.13 → 1.96 ms. The value gates' forward measured slower with it, 0.540 → 0.571 ms.)
#pragma unroll
    for (int r = 0; r < SR; ++r) {
        Vec16 x;
        x.u = *reinterpret_cast<const uint4*>(s.x(b) + (r0 + r) * LDV + c0);
#pragma unroll
        for (int c = 0; c < 8; ++c) {
            if constexpr (GLA_ROW_SUMS) {
                const float next = gate_log2_acc(to_f32(x.x[c]), p, tot[c]);
                tot[c] = r0 + r < rows && sq.v0 + c0 + c < a.dv ? next : tot[c];
            } else if (r0 + r < rows && sq.v0 + c0 + c < a.dv) {
                tot[c] = gate_log2_acc(to_f32(x.x[c]), p, tot[c]);
            }
        }
        float4* dst = reinterpret_cast<float4*>(s.G + (r0 + r) * LDG + c0);
        dst[0] = make_float4(tot[0], tot[1], tot[2], tot[3]);
        dst[1] = make_float4(tot[4], tot[5], tot[6], tot[7]);
    }
    float gl[8], above[8];
#pragma unroll
    for (int c = 0; c < 8; ++c) {
        float incl = tot[c];
#pragma unroll
        for (int off = 1; off < SEGS; off <<= 1) {
            const float y = __shfl_up_sync(0xffffffffu, incl, off, SEGS);
            if (seg >= off) incl += y;
        }
        above[c] = incl - tot[c];
        gl[c] = __shfl_sync(0xffffffffu, incl, SEGS - 1, SEGS);
    }
    if (seg > 0)
#pragma unroll 1
        for (int r = 0; r < SR; ++r) {
            float4* dst = reinterpret_cast<float4*>(s.G + (r0 + r) * LDG + c0);
            const float4 u = dst[0], w = dst[1];
            dst[0] = make_float4(u.x + above[0], u.y + above[1], u.z + above[2], u.w + above[3]);
            dst[1] = make_float4(w.x + above[4], w.y + above[5], w.z + above[6], w.w + above[7]);
        }
    bool mild = true;
#pragma unroll
    for (int c = 0; c < 8; ++c) mild = mild && gl[c] >= -SPAN_MAX;  // (NaN: not mild)
    if (seg == SEGS - 1)
#pragma unroll
        for (int c = 0; c < 8; ++c) {
            s.GL[c0 + c] = gl[c];
            s.EGL[c0 + c] = exp_nonpos(gl[c]);
        }
    mild = G::all(mild);  // (a barrier: Γ is visible to the group)
    if (tid == 0) s.GL[2 * BV] = mild ? 1.f : 0.f;
    if (!mild) {
        strong_values<G>(s, b);                          // P (reads the raw V and A; Γ from s.G)
        if constexpr (!GLA_ROW_SUMS) G::sync();          // every column's raw V is read
    }
    if constexpr (GLA_ROW_SUMS) return;                  // (the passes: the consumers scale V — wg_scale_values)
    // (Γ and Γ_L read back from shared memory — visible since the vote — rather than kept live across P's loop,
    // whose running products need the registers)
    float glr[8];
    {
        const float4 l0 = *reinterpret_cast<const float4*>(s.GL + c0), l1 = *reinterpret_cast<const float4*>(s.GL + c0 + 4);
        glr[0] = l0.x; glr[1] = l0.y; glr[2] = l0.z; glr[3] = l0.w; glr[4] = l1.x; glr[5] = l1.y; glr[6] = l1.z; glr[7] = l1.w;
    }
#pragma unroll
    for (int r = 0; r < SR; ++r) scale_value8(s, b, r0 + r, c0, glr);  // V̂ = V ⊙ 2^(Γ_L − Γ)   (GLA_REVERSE: Ṽ = V ⊙ 2^Γ)
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // V̂, to the consumers' tensor cores
}
// The consumers' view of the chunk in slot s: whether value_operands found it mild.
__device__ __forceinline__ bool value_mild(const Tiles& s) { return s.GL[2 * BV] != 0.f; }
#endif

#if KEY_GATE != GATE_PER_KEY && KEY_GATE != GATE_PER_VALUE
// Scalar gates with wgmma consumers (one output accumulator), chunks whose decay span is at most SPAN_MAX ("row
// scaled"): q stays raw, the scores carry the column factor only and the consumers scale O's rows —
//   O_i = exp(Γ_i) · (q_i S + Σ_j A'_ij v_j),   A'_ij = (q_i · k_j) exp(−Γ_j)  (j <= i; exp(−Γ_j) <= 2^SPAN_MAX)
// which equals q_i exp(Γ_i) S + Σ_j (q_i · k_j) exp(Γ_i − Γ_j) v_j: the producers skip Q̃ = Q ⊙ exp(Γ) (C x d_k
// multiplies a chunk) and the mask's exponent is per column. Other chunks keep Q̃ and the decay-masked scores.
// Producers and consumers decide alike from Γ_L (s.G[C − 1]); NaN is not row scaled. Not at 8 + 8 warps (Sᵀ through
// shared memory, 120 registers a consumer): the row factors spill 8 B there.
__device__ __forceinline__ bool rows_scaled(float gl) { return GLA_ROWS_SCALED && gl >= -SPAN_MAX; }

// scalar_scan on every warp of a producer group; warp 0 publishes Γ (s.G) for the consumers.
__device__ __forceinline__ void scan_publish(const FwdArgs& a, const Tiles& s, const Seq& sq, int i0, int b, float fixed_log_alpha, int warp, int lane, float (&gam)[GPL], elem_t xr) {
    scalar_scan(a, s, sq, i0, b, fixed_log_alpha, lane, gam, xr);
    if (warp == 0) {
#pragma unroll
        for (int m = 0; m < GPL; ++m) s.G[lane * GPL + m] = gam[m];
    }
}
// Stage gate_scores (scalar gate, a producer group of the warp-specialised kernel): gate_cumsum's scan on every
// warp, Γ kept in registers (no barrier, no round trip through shared memory), and intra_scores' product
//   A_ij = (q_i · k_j) exp(Γ_i − Γ_j) for j <= i, else 0.
// With one score tile a warp its product is issued before the scan: the two are independent, so the scan's
// shuffle chain overlaps the tensor-core chain. Ends on a barrier (k is then rewritten as K̂).
template <class G>
__device__ __forceinline__ void gate_scores(const FwdArgs& a, const Tiles& s, const Seq& sq, int i0, int b, float fixed_log_alpha, float (&gam)[GPL], elem_t xr) {
    const int warp = (G::tid() >> 5), lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    constexpr int PW = per_warp(A_WTILES, G::NW) > 0 ? per_warp(A_WTILES, G::NW) : 1;
    // With one score tile a warp the scan goes after its product (overlap); with more, first (registers).
    constexpr bool SCAN_FIRST = PW > 1;
    if (SCAN_FIRST) scan_publish(a, s, sq, i0, b, fixed_log_alpha, warp, lane, gam, xr);
#pragma unroll 1
    for (int u = 0; u < PW; ++u) {
        const int wt = warp + u * G::NW;
        const bool has_tile = wt < A_WTILES;  // warp-uniform
        const int2 o = wtile_origin<A_WM, A_WN, A_WCOLS>(has_tile ? wt : 0);
        float c[A_WM][A_WN][4] = {};
        if (has_tile && o.y <= o.x + 16 * A_WM - 1) warp_mma<A_WM, A_WN, false, false, DK>(c, ktile(s.q(b)), o.x, ktile(s.k(b)), o.y, DK);
        if (!SCAN_FIRST) scan_publish(a, s, sq, i0, b, fixed_log_alpha, warp, lane, gam, xr);
        if (!has_tile) continue;
        float gi[A_WM][2], gj[A_WN][2];
#pragma unroll
        for (int mi = 0; mi < A_WM; ++mi)
#pragma unroll
            for (int h = 0; h < 2; ++h) gi[mi][h] = gamma_at(gam, o.x + mi * 16 + g + 8 * h);
#pragma unroll
        for (int ni = 0; ni < A_WN; ++ni)
#pragma unroll
            for (int e = 0; e < 2; ++e) gj[ni][e] = gamma_at(gam, o.y + ni * 8 + 2 * t + e);
        // The causal mask and the decay factor of element r of tile (mi, ni), then the hi + lo store.
        auto mask_store = [&](auto decay) {
#pragma unroll
            for (int mi = 0; mi < A_WM; ++mi)
#pragma unroll
                for (int ni = 0; ni < A_WN; ++ni) {
#pragma unroll
                    for (int r = 0; r < 4; ++r) {
                        const int i = o.x + mi * 16 + g + (r >= 2 ? 8 : 0), j = o.y + ni * 8 + 2 * t + (r & 1);
                        c[mi][ni][r] = (j <= i) ? c[mi][ni][r] * decay(mi, ni, r) : 0.f;
                    }
                    tile_store_a(c[mi][ni], s, o.x + mi * 16, o.y + ni * 8);
                }
        };
        if (rows_scaled(gamma_at(gam, C - 1))) {  // (group-uniform)  A'_ij = (q_i · k_j) exp(−Γ_j): per column
            float wj[A_WN][2];
#pragma unroll
            for (int ni = 0; ni < A_WN; ++ni)
#pragma unroll
                for (int e = 0; e < 2; ++e) wj[ni][e] = exp_span(-gj[ni][e]);
            mask_store([&](int, int ni, int r) { return wj[ni][r & 1]; });
        } else {                                  // A_ij = (q_i · k_j) exp(Γ_i − Γ_j)
            mask_store([&](int mi, int ni, int r) { return exp_nonpos(gi[mi][r >> 1] - gj[ni][r & 1]); });
        }
    }
    G::sync();  // every warp has read k
}

// Stage decay_keys (scalar gate, from scalar_scan's registers): k ← K̂ = k ⊙ exp(Γ_L − Γ) in place (16-byte vectors);
// WITH_Q (wgmma consumers, whose output product has one accumulator) on chunks that are not row scaled: also
// q ← Q̃ = q ⊙ exp(Γ) in place, as per-key gates do (row-scaled chunks leave q raw: see rows_scaled).
template <class G, bool Q>
__device__ __forceinline__ void decay_pass(const Tiles& s, int b, const float (&gam)[GPL], float gl) {
    constexpr int N = C * (DK / VEC);
    for (int base = 0; base < N; base += G::NT) {  // whole passes (warp-uniform): the shuffles need every lane
        const int idx = base + G::tid(), i = min(idx / (DK / VEC), C - 1), d = (idx - i * (DK / VEC)) * VEC;
        const float gi = gamma_at(gam, i), f = exp_nonpos(gl - gi);
        if (idx >= N) continue;
        float kf[VEC];
        load_vec(s.k(b) + KO(i, d), kf);
#pragma unroll
        for (int u = 0; u < VEC; ++u) kf[u] *= f;
#if GLA_SPLIT_OPS
        store_vec_split(s.k(b) + KO(i, d), s.k_lo(b) + KO(i, d), kf);  // K̂ = K̂_hi + K̂_lo
#else
        store_vec(s.k(b) + KO(i, d), kf);
#endif
        if constexpr (Q) {
            const float fq = exp_nonpos(gi);
            float qf[VEC];
            load_vec(s.q(b) + KO(i, d), qf);
#pragma unroll
            for (int u = 0; u < VEC; ++u) qf[u] *= fq;
#if GLA_SPLIT_OPS
            store_vec_split(s.q(b) + KO(i, d), s.q_lo(b) + KO(i, d), qf);  // Q̃ = Q̃_hi + Q̃_lo
#else
            store_vec(s.q(b) + KO(i, d), qf);
#endif
        }
    }
}
template <class G, bool WITH_Q = false>
__device__ __forceinline__ void decay_keys(const Tiles& s, int b, const float (&gam)[GPL]) {
    const float gl = gamma_at(gam, C - 1);
    if (WITH_Q && !rows_scaled(gl)) decay_pass<G, true>(s, b, gam, gl);  // (group-uniform)
    else decay_pass<G, false>(s, b, gam, gl);
}
#endif

#if KEY_GATE == GATE_PER_VALUE
// Value gate, V ← V ⊙ exp(Γ_L − Γ) in place (the V̂ of the state update; after the output stage has read V).
template <class G = CTA>
__device__ __forceinline__ void decay_values_for_state(const Tiles& s, int b) {
    elem_t* v = s.v(b);
    for (int idx = G::tid(); idx < C * (BV / VEC); idx += G::NT) {
        const int i = idx / (BV / VEC), e = (idx - i * (BV / VEC)) * VEC;
        Vec16 in;
        in.u = *reinterpret_cast<const uint4*>(v + VO(i, e));
        float gi[VEC], gl[VEC];
        load_g(s.G + i * LDG + e, gi);
        load_g(s.G + (C - 1) * LDG + e, gl);
#pragma unroll
        for (int u = 0; u < VEC; ++u) in.x[u] = to_elem(to_f32(in.x[u]) * exp_nonpos(gl[u] - gi[u]));
        *reinterpret_cast<uint4*>(v + VO(i, e)) = in.u;
    }
}
#endif

#if KEY_GATE == GATE_PER_KEY
// Rows of the Q̃_lo / K̃_lo overlay of Γ (mild chunks, SPLIT_A).
__device__ __forceinline__ elem_t* q_lo(const Tiles& s, int i) { return reinterpret_cast<elem_t*>(s.G + i * LDG); }
__device__ __forceinline__ elem_t* k_lo(const Tiles& s, int i) { return reinterpret_cast<elem_t*>(s.G + i * LDG) + LDK; }
#endif

// Stage decay_operands (row-major, 16-byte vectors; no transposed copies):
//   k ← K̂ = k ⊙ exp(Γ_L − Γ)                   (in place: the state update's K̂; value gates use k itself)
//   with_q, per key:  q ← Q̃ = q ⊙ exp(Γ)        (in place; scalar gates scale O's rows instead)
//   mild (per key):   x ← K̃ = k ⊙ exp(−Γ)       (into the dead logit buffer; for intra_scores_factored)
//   value gate:       vt ← V ⊙ exp(Γ_p − Γ), p = last row of the key sub-chunk (with_q: the output's operand);
//                     without q (state kernel) V ← V ⊙ exp(Γ_L − Γ) in place instead.
template <class G = CTA>
__device__ __forceinline__ void decay_operands(const Tiles& s, int b, bool with_q, bool mild) {
#if KEY_GATE != GATE_PER_VALUE
    for (int idx = G::tid(); idx < C * (DK / VEC); idx += G::NT) {
        const int i = idx / (DK / VEC), d = (idx - i * (DK / VEC)) * VEC;
        float kf[VEC], kh[VEC];
        load_vec(s.k(b) + KO(i, d), kf);
#if KEY_GATE == GATE_PER_KEY
        float gi[VEC];
        load_g(s.G + i * LDG + d, gi);
        bool done = false;
        if (with_q) {
            float qf[VEC];
            load_vec(s.q(b) + KO(i, d), qf);
#pragma unroll
            for (int u = 0; u < VEC; ++u) qf[u] *= exp_nonpos(gi[u]);
            if (mild) {
                float kt[VEC], egl[VEC];
                load_g(s.EGL + d, egl);
#pragma unroll
                for (int u = 0; u < VEC; ++u) {
                    kt[u] = kf[u] * exp_span(-gi[u]);     // K̃ = K ⊙ exp(−Γ)
                    kh[u] = kt[u] * egl[u];               // K̂ = K̃ ⊙ exp(Γ_L)  (= K ⊙ exp(Γ_L − Γ), ≤ |K|)
                }
#if SPLIT_A
                // The lo halves overlay row i of Γ: a warp owns whole rows (C·d_k/VEC is a multiple of 32 and a
                // row is at most 32 vectors), so once every lane has read its Γ values the warp may overwrite them.
                __syncwarp();
                store_vec_split(s.q(b) + KO(i, d), q_lo(s, i) + d, qf);
                store_vec_split(s.x(b) + i * LDK + d, k_lo(s, i) + d, kt);
#else
                store_vec(s.q(b) + KO(i, d), qf);
                store_vec(s.x(b) + i * LDK + d, kt);
#endif
                done = true;
            } else {
                store_vec(s.q(b) + KO(i, d), qf);
            }
        }
        if (!done) {
            float gl[VEC];
            load_g(s.GL + d, gl);
#pragma unroll
            for (int u = 0; u < VEC; ++u) kh[u] = kf[u] * exp_nonpos(gl[u] - gi[u]);
        }
#else
        const float f = exp_nonpos(s.G[C - 1] - s.G[i]);
#pragma unroll
        for (int u = 0; u < VEC; ++u) kh[u] = kf[u] * f;
#endif
        store_vec(s.k(b) + KO(i, d), kh);  // in place: this thread read k here above
    }
#else
    if (!with_q) {
        decay_values_for_state<G>(s, b);
        return;
    }
    for (int idx = G::tid(); idx < C * (BV / VEC); idx += G::NT) {
        const int i = idx / (BV / VEC), e = (idx - i * (BV / VEC)) * VEC;
        const int p = (i / SC) * SC + SC - 1;  // reference: last row of the key sub-chunk
        Vec16 in;
        in.u = *reinterpret_cast<const uint4*>(s.v(b) + VO(i, e));
        float gi[VEC], gp[VEC];
        load_g(s.G + i * LDG + e, gi);
        load_g(s.G + p * LDG + e, gp);
#pragma unroll
        for (int u = 0; u < VEC; ++u) in.x[u] = to_elem(to_f32(in.x[u]) * exp_nonpos(gp[u] - gi[u]));
        *reinterpret_cast<uint4*>(s.vt + i * LDV + e) = in.u;
    }
#endif
    (void)with_q; (void)mild;
}

#if KEY_GATE == GATE_PER_KEY
// Stage gate_decays (per key; a group whose threads each own one (row segment, column pair), SEGS·DK/2 = its
// threads): gate_cumsum and, on mild chunks, decay_operands' Q̃ / K̃ / K̂ in one pass, Γ kept in registers —
//   Γ_i = log2(e) · Σ_{m<=i} gate(x_m);  Q̃ = Q ⊙ exp(Γ), K̃ = K ⊙ exp(−Γ) (hi + lo halves), K̂ = K̃ ⊙ exp(Γ_L).
// The same f32 operations in the same order as gate_cumsum + decay_operands (the same bits), without writing
// Γ to shared memory and reading it back. Non-mild chunks get Γ in s.G (and Γ_L, exp(Γ_L)) for the exact path.
// Returns (group-uniform) whether the chunk is mild; ends on a barrier either way.
// KHAT_ONLY (the segment-state pass): only Γ_L and K̂ = K ⊙ exp(Γ_L − Γ), the exact form (no span test).
template <class G, bool KHAT_ONLY = false>
__device__ __forceinline__ bool gate_decays(const FwdArgs& a, const Tiles& s, const Seq& sq, int i0, int b) {
    constexpr int CP = DK / 2, SEGS = G::NT / CP, SR = C / SEGS;
    static_assert(SEGS >= 1 && SEGS * CP == G::NT && C % SEGS == 0, "one (segment, column pair) per thread");
    const int tid = G::tid(), d = (tid % CP) * 2, seg = tid / CP, r0 = seg * SR;
    const int rows = min(C, sq.len - i0);
    const float* p = a.params ? a.params + (i64)vhead(sq) * NPARAM : nullptr;
    float* tot = seg_totals<G, SEGS>(s);  // [SEGS][DK]
    float g0[SR], g1[SR];  // this thread's Γ (column d, d + 1) over its rows
    float acc0 = 0.f, acc1 = 0.f;
    if (rows == C && a.dk == DK) {
#pragma unroll
        for (int u = 0; u < SR; ++u) {
            const float2 x = load_pair(s.x(b) + XO(r0 + u, d));
            acc0 = gate_log2_acc(x.x, p, acc0);
            acc1 = gate_log2_acc(x.y, p, acc1);
            g0[u] = acc0; g1[u] = acc1;
        }
    } else {
#pragma unroll
        for (int u = 0; u < SR; ++u) {
            const int i = r0 + u;
            const float2 x = load_pair(s.x(b) + XO(i, d));
            if (i < rows && d < a.dk) acc0 = gate_log2_acc(x.x, p, acc0);
            if (i < rows && d + 1 < a.dk) acc1 = gate_log2_acc(x.y, p, acc1);
            g0[u] = acc0; g1[u] = acc1;
        }
    }
    float gl0 = acc0, gl1 = acc1;  // Γ_L of the two columns
    if (SEGS > 1) {
        *reinterpret_cast<float2*>(tot + seg * DK + d) = make_float2(acc0, acc1);
        G::sync();
        float2 off = make_float2(0.f, 0.f), all = make_float2(0.f, 0.f);
#pragma unroll
        for (int m = 0; m < SEGS; ++m) {  // totals of the segments above (the offset) and of all (Γ_L), in order
            const float2 t = *reinterpret_cast<const float2*>(tot + m * DK + d);
            if (m == seg) off = all;
            if (m < SEGS - 1) { all.x += t.x; all.y += t.y; }
        }
        // Γ_L = (Σ_{m<last} tot_m) + tot_last, as the last segment's own row C−1 (local sum + offset) gives it.
        const float2 tl = *reinterpret_cast<const float2*>(tot + (SEGS - 1) * DK + d);
        gl0 = tl.x + all.x;
        gl1 = tl.y + all.y;
        if (seg > 0) {
#pragma unroll
            for (int u = 0; u < SR; ++u) { g0[u] += off.x; g1[u] += off.y; }
        }
    }
    if (seg == SEGS - 1) {  // Γ_L and exp(Γ_L) (the consumers' state decay; the exact path's K̂)
        s.GL[d] = gl0; s.GL[d + 1] = gl1;
        s.EGL[d] = exp_nonpos(gl0); s.EGL[d + 1] = exp_nonpos(gl1);
    }
    if constexpr (KHAT_ONLY) {
#pragma unroll
        for (int u = 0; u < SR; ++u) {
            const int i = r0 + u;
            const float2 kf = load_pair(s.k(b) + KO(i, d));
            st_pair(s.k(b) + KO(i, d), kf.x * exp_nonpos(gl0 - g0[u]), kf.y * exp_nonpos(gl1 - g1[u]));
        }
        G::sync();
        return false;
    }
    const bool mild = G::all(gl0 >= -SPAN_MAX && gl1 >= -SPAN_MAX);  // NaN fails: the exact path handles it
    if (!mild) {  // the exact path reads Γ and exp(Γ_L) from shared memory
#pragma unroll
        for (int u = 0; u < SR; ++u) *reinterpret_cast<float2*>(s.G + (r0 + u) * LDG + d) = make_float2(g0[u], g1[u]);
        G::sync();
        return false;
    }
    const float e0 = exp_nonpos(gl0), e1 = exp_nonpos(gl1);
#pragma unroll
    for (int u = 0; u < SR; ++u) {
        const int i = r0 + u;
        const float2 qf = load_pair(s.q(b) + KO(i, d)), kf = load_pair(s.k(b) + KO(i, d));
        const float q0 = qf.x * exp_nonpos(g0[u]), q1 = qf.y * exp_nonpos(g1[u]);      // Q̃
        const float t0 = kf.x * exp_span(-g0[u]), t1 = kf.y * exp_span(-g1[u]);        // K̃
        st_pair_split(s.q(b) + KO(i, d), q_lo(s, i) + d, q0, q1);
        st_pair_split(s.x(b) + i * LDK + d, k_lo(s, i) + d, t0, t1);
        st_pair(s.k(b) + KO(i, d), t0 * e0, t1 * e1);                              // K̂ = K̃ ⊙ exp(Γ_L)
    }
    G::sync();
    return true;
}
#endif

#if GLA_WG_SCORES
// gate_decays_vec's lane map for one producer thread of group G: thread (octet o, segment m) owns key columns
// d = 8o .. 8o + 7 of rows r0 = m·SR .. r0 + SR − 1, and the segments of an octet are lanes OPW apart in one warp —
// with the slot-relative offsets of its rows in the logits tile (XO), in q / k (KO) and in [Q̃; K̃] (swz32_rows).
// `produce` builds it once, before the chunk loop, where the producers have the registers to keep it
// (ROOMY_PRODUCERS: at most 384 threads); at 512 threads it is built where it is used (`opaque`: recomputed, not kept
// live).
template <class G>
struct VecLane {
    static constexpr int OCT = DK / 8, SEGS = G::NT / OCT, SR = C / SEGS, OPW = 32 / SEGS;
    int lane, seg, d, r0;
    int xo[SR], ko[SR], so[SR];
    __device__ __forceinline__ VecLane() {
        const int tid = opaque<NT + PT>(G::tid());
        lane = tid & 31;
        seg = lane / OPW;
        d = ((tid >> 5) * OPW + lane % OPW) * 8;
        r0 = seg * SR;
#pragma unroll
        for (int u = 0; u < SR; ++u) {
            xo[u] = pin(XO(r0 + u, d));
            ko[u] = pin(KO(r0 + u, d));
            so[u] = pin(swz32_rows<2 * C>(r0 + u, d));
        }
    }
    // (kept where it is hoisted: ptxas would otherwise recompute the offsets from the thread index every chunk)
    static __device__ __forceinline__ int pin(int x) {
        if constexpr (ROOMY_PRODUCERS) asm volatile("" : "+r"(x));
        return x;
    }
};

// Γ of a thread's (octet, segment) in gate_decays_vec's lane map: the gate over its rows, then the shuffle scan of
// the segment sums over the octet's lanes (g: Γ of its rows, gl: Γ_L of its columns).
template <class G>
__device__ __forceinline__ void gate_gamma_vec(const FwdArgs& a, const Tiles& s, const Seq& sq, int i0, int b, const VecLane<G>& L, float (&g)[C / (G::NT / (DK / 8))][8], float (&gl)[8]) {
    constexpr int SEGS = VecLane<G>::SEGS, SR = VecLane<G>::SR, OPW = VecLane<G>::OPW;  // OPW: octets a warp
    const int lane = L.lane, seg = L.seg, d = L.d, r0 = L.r0;
    const int rows = min(C, sq.len - i0);
    const float* p = a.params ? a.params + (i64)vhead(sq) * NPARAM : nullptr;
    const bool full = rows == C && a.dk == DK;
    float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
    if (full) {  // every chunk but a sequence's last: no predicates (a branch per element would serialise the gate)
#pragma unroll
        for (int u = 0; u < SR; ++u) {
            float x[8];
            load_vec(s.x(b) + L.xo[u], x);
#pragma unroll
            for (int c = 0; c < 8; ++c) {
                acc[c] = gate_log2_acc(x[c], p, acc[c]);
                g[u][c] = acc[c];
            }
        }
    } else {
#pragma unroll
        for (int u = 0; u < SR; ++u) {
            const int i = r0 + u;
            float x[8];
            load_vec(s.x(b) + L.xo[u], x);
#pragma unroll
            for (int c = 0; c < 8; ++c) {
                if (i < rows && d + c < a.dk) acc[c] = gate_log2_acc(x[c], p, acc[c]);
                g[u][c] = acc[c];
            }
        }
    }
    // Inclusive scan of the segment sums over the octet's lanes; the exclusive offset is the previous lane's.
    float inc[8];
#pragma unroll
    for (int c = 0; c < 8; ++c) inc[c] = acc[c];
#pragma unroll
    for (int o = 1; o < SEGS; o <<= 1)
#pragma unroll
        for (int c = 0; c < 8; ++c) {
            const float v = __shfl_up_sync(0xffffffffu, inc[c], o * OPW);
            if (seg >= o) inc[c] += v;
        }
    // Γ_L is the last valid row's Γ bit for bit (its segment's local sum + that segment's offset; later rows of the
    // segment repeat it), not the tree-ordered inclusive sum, whose rounding differs: K̂'s exponent Γ_L − Γ must be
    // exactly 0 on that row, or a decay span of 2^20 (log2 units) scales its key by 2^±ulp (RWKV-6, logits + 12).
    const int sl = (max(rows, 1) - 1) / SR;
#pragma unroll
    for (int c = 0; c < 8; ++c) {
        const float off = __shfl_up_sync(0xffffffffu, inc[c], OPW);
        if (seg > 0)
#pragma unroll
            for (int u = 0; u < SR; ++u) g[u][c] += off;
        gl[c] = __shfl_sync(0xffffffffu, g[SR - 1][c], sl * OPW + lane % OPW);
    }
}

// Γ_L and exp(Γ_L) of key columns d .. d + 7 into the slot (the last segment's threads of gate_gamma_vec's map).
__device__ __forceinline__ void store_gamma_last(const Tiles& s, int d, const float (&gl)[8], const float (&e)[8]) {
    *reinterpret_cast<float4*>(s.GL + d) = make_float4(gl[0], gl[1], gl[2], gl[3]);
    *reinterpret_cast<float4*>(s.GL + d + 4) = make_float4(gl[4], gl[5], gl[6], gl[7]);
    *reinterpret_cast<float4*>(s.EGL + d) = make_float4(e[0], e[1], e[2], e[3]);
    *reinterpret_cast<float4*>(s.EGL + d + 4) = make_float4(e[4], e[5], e[6], e[7]);
}
__device__ __forceinline__ void store_gamma_last(const Tiles& s, int d, const float (&gl)[8]) {
    float e[8];
#pragma unroll
    for (int c = 0; c < 8; ++c) e[c] = exp_nonpos(gl[c]);
    store_gamma_last(s, d, gl, e);
}

// Stage gate_khat_vec (the segment-state pass of the variants with producer-side wgmma scores): Γ in
// gate_decays_vec's lane map (the shuffle scan: no totals tile, no barrier), Γ_L, exp(Γ_L), and
//   K̂ = K ⊙ exp(Γ_L − Γ)   (exact on every chunk: Γ_L − Γ <= 0, no span test).
// Each thread rewrites only its own elements of k; the FULL barrier the group arrives on next publishes them.
// (Applying K̂ on the state pass's idle consumers instead, from the producers' exponents, was slower: benches/NOTES.md.)
template <class G, class AfterGate>
__device__ __forceinline__ void gate_khat_vec(const FwdArgs& a, const Tiles& s, const Seq& sq, int i0, int b, AfterGate&& after_gate) {
    constexpr int SEGS = VecLane<G>::SEGS, SR = VecLane<G>::SR;
    const VecLane<G> L;
    float g[SR][8], gl[8];
    gate_gamma_vec<G>(a, s, sq, i0, b, L, g, gl);
    after_gate();  // (the logits tile is read: GLA_ISSUE_AFTER_GATE loads the group's next chunk from here on)
    if (L.seg == SEGS - 1) store_gamma_last(s, L.d, gl);
#pragma unroll
    for (int u = 0; u < SR; ++u) {
        float kf[8];
        load_vec(s.k(b) + L.ko[u], kf);
#pragma unroll
        for (int c = 0; c < 8; ++c) kf[c] *= exp_nonpos(gl[c] - g[u][c]);
        store_vec(s.k(b) + L.ko[u], kf);
    }
}

// (the exact path of gate_decays_vec, on the producers' wgmma: ws_wgmma.cuh)
template <class G, int SR>
__device__ __forceinline__ void exact_scores_vec(const Tiles& s, int b, const float (&g)[SR][8]);

// Stage gate_decays_vec (per key, a producer warpgroup with wgmma scores): gate_decays with 16-byte vectors — thread
// (octet o, segment m) owns key columns 8o .. 8o + 7 of rows [m·SR, m·SR + SR), and the SEGS segments of an octet
// are lanes OPW apart in one warp (lane = m·OPW + o mod OPW), so the segment offsets are a shuffle scan (no barrier,
// no totals tile) and each quarter-warp's 16-byte accesses (rows of 8 / OPW segments, OPW octets) fall in
// distinct bank groups of the swizzled and the padded tiles (v10c had an octet's segments in consecutive lanes:
// 4-way conflicts, 0.635 ms):
//   Γ_i = log2(e) · Σ_{m<=i} gate(x_m);  mild chunks: Q̃ = Q ⊙ exp(Γ) (bf16/f16 for the consumers, tf32 in [Q̃; K̃]),
//   K̃ = K ⊙ exp(−Γ) (tf32 in [Q̃; K̃]), K̂ = K̃ ⊙ exp(Γ_L).  A chunk that is not mild (a decay span over 2^SPAN_MAX)
// takes the exact path from the same registers: exact_scores_vec writes A, Q̃ and K̂.
// The decays run speculatively (as if the chunk were mild) and the group's mild vote is the barrier that ends them:
// one barrier a chunk instead of two; a chunk that is not mild after all gets its raw q, k reloaded over the
// speculative Q̃, K̂. With vote_first (group-uniform: the group's last chunk was not mild, and strong decays stay
// strong) the vote comes before the decays instead: a chunk that is not mild then costs no discarded decays and no
// reload, a mild one a second barrier. `after_gate` runs once the thread has read the logits tile
// (GLA_ISSUE_AFTER_GATE: the group's next chunk is loaded from there on).
// Returns (group-uniform) whether the chunk is mild (then wg_scores makes A); ends on a barrier either way.
template <class G, class AfterGate>
__device__ __forceinline__ bool gate_decays_vec(const FwdArgs& a, const Tiles& s, const Seq& sq, int i0, int b, const VecLane<G>& L, bool vote_first, AfterGate&& after_gate) {
    constexpr int OCT = VecLane<G>::OCT, SEGS = VecLane<G>::SEGS, SR = VecLane<G>::SR;
    static_assert(VEC == 8 && SEGS * OCT == G::NT && SEGS >= 2 && SEGS <= 32 && (SEGS & (SEGS - 1)) == 0 && C % SEGS == 0,
                  "one (octet, segment) per thread, an octet's segments in one warp");
    const int seg = L.seg, d = L.d;
    float g[SR][8], gl[8];  // this thread's Γ, and Γ_L of its columns
    gate_gamma_vec<G>(a, s, sq, i0, b, L, g, gl);
    after_gate();  // (the logits tile is no longer read: the group's next chunk may be loaded into it)
    float e[8];  // exp(Γ_L)
#pragma unroll
    for (int c = 0; c < 8; ++c) e[c] = exp_nonpos(gl[c]);
    if (seg == SEGS - 1) store_gamma_last(s, d, gl, e);  // (the consumers' state decay)
    bool ok = true;
#pragma unroll
    for (int c = 0; c < 8; ++c) ok = ok && gl[c] >= -SPAN_MAX;  // NaN fails: the exact path handles it
    if (vote_first && !G::all(ok)) {  // (the vote is a barrier: every thread's ok)
        exact_scores_vec<G, SR>(s, b, g);
        return false;
    }
#pragma unroll
    for (int u = 0; u < SR; ++u) {
        float qf[8], kf[8];
        load_vec(s.q(b) + L.ko[u], qf);
        load_vec(s.k(b) + L.ko[u], kf);
#pragma unroll
        for (int c = 0; c < 8; ++c) {
            qf[c] *= exp_nonpos(g[u][c]);  // Q̃
            kf[c] *= exp_span(-g[u][c]);   // K̃
        }
        store_vec(s.q(b) + L.ko[u], qf);
        // (swz32_rows(i, d + 4) = swz32_rows(i, d) ^ 4 for d % 8 == 0, and row C + i = row i + 32 C: C % 8 == 0 keeps
        // the swizzle phase — one swizzle a row, not four)
        const int o = L.so[u];
        float* qr = s.qk + o;
        float* qr4 = s.qk + (o ^ 4);
        float* kr = s.qk + (o + 32 * C);
        float* kr4 = s.qk + ((o ^ 4) + 32 * C);
        *reinterpret_cast<float4*>(qr) = make_float4(tf32_half_ulp(qf[0]), tf32_half_ulp(qf[1]), tf32_half_ulp(qf[2]), tf32_half_ulp(qf[3]));
        *reinterpret_cast<float4*>(qr4) = make_float4(tf32_half_ulp(qf[4]), tf32_half_ulp(qf[5]), tf32_half_ulp(qf[6]), tf32_half_ulp(qf[7]));
        *reinterpret_cast<float4*>(kr) = make_float4(tf32_half_ulp(kf[0]), tf32_half_ulp(kf[1]), tf32_half_ulp(kf[2]), tf32_half_ulp(kf[3]));
        *reinterpret_cast<float4*>(kr4) = make_float4(tf32_half_ulp(kf[4]), tf32_half_ulp(kf[5]), tf32_half_ulp(kf[6]), tf32_half_ulp(kf[7]));
#pragma unroll
        for (int c = 0; c < 8; ++c) kf[c] *= e[c];  // K̂ = K̃ ⊙ exp(Γ_L)
        store_vec(s.k(b) + L.ko[u], kf);
    }
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // [Q̃; K̃], to the tensor cores
    if (vote_first) {  // (voted mild above)
        G::sync();
        return true;
    }
    if (G::all(ok)) return true;  // (the barrier that ends the decays)
    // Not mild after all: the raw q, k back over Q̃, K̂ (v comes again, unchanged; the logits do not: with_x = false).
    issue_chunk<G>(a, s, sq, i0, b, true, false);  // (the vote above ordered every thread's stores before it)
    cp_async_wait<0>();
    G::sync();
    exact_scores_vec<G, SR>(s, b, g);
    return false;
}
#endif

#if KEY_GATE == GATE_PER_KEY
// Stage intra_scores_factored, per-key gate, mild chunks only (decay span <= SPAN_MAX, checked by gate_cumsum):
//   A_ij = Σ_d q_id k_jd exp(Γ_id − Γ_jd) = Σ_d [q_id exp(Γ_id)] [k_jd exp(−Γ_jd)] = (Q̃ K̃^T)_ij   for j <= i
// one C x C x d_k product on tensor cores instead of the sub-chunk decomposition. Every factor stays within
// [2^−SPAN_MAX, 2^SPAN_MAX] of its input, so nothing over- or underflows; the result is masked causally.
template <class G = CTA>
__device__ __forceinline__ void intra_scores_factored(const Tiles& s, int b) {
    const int warp = (G::tid() >> 5), lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int u = 0; u < per_warp(A_WTILES, G::NW); ++u) {
        const int wt = warp + u * G::NW;
        if (wt >= A_WTILES) continue;
        const int2 o = wtile_origin<A_WM, A_WN, A_WCOLS>(wt);
        float c[A_WM][A_WN][4] = {};
        if (o.y <= o.x + 16 * A_WM - 1) {                                                   // not wholly above the diagonal
            warp_mma<A_WM, A_WN, false, false, DK>(c, ktile(s.q(b)), o.x, Pad{s.x(b), LDK}, o.y, DK);          // Q̃_hi K̃_hi^T
#if SPLIT_A
            // The two correction products accumulate apart from the main one (independent tensor-core chains),
            // then add in: + Q̃_lo K̃_hi^T + Q̃_hi K̃_lo^T.
            float lo[A_WM][A_WN][4] = {};
            warp_mma<A_WM, A_WN, false, false, DK>(lo, q_lo(s, 0), LDLO, o.x, s.x(b), LDK, o.y, DK);
            warp_mma<A_WM, A_WN, false, false, DK>(lo, ktile(s.q(b)), o.x, Pad{k_lo(s, 0), LDLO}, o.y, DK);
#pragma unroll
            for (int mi = 0; mi < A_WM; ++mi)
#pragma unroll
                for (int ni = 0; ni < A_WN; ++ni)
#pragma unroll
                    for (int r = 0; r < 4; ++r) c[mi][ni][r] += lo[mi][ni][r];
#endif
        }
#pragma unroll
        for (int mi = 0; mi < A_WM; ++mi)
#pragma unroll
            for (int ni = 0; ni < A_WN; ++ni) {
#pragma unroll
                for (int r = 0; r < 4; ++r) {
                    const int i = o.x + mi * 16 + g + (r >= 2 ? 8 : 0), j = o.y + ni * 8 + 2 * t + (r & 1);
                    if (j > i) c[mi][ni][r] = 0.f;
                }
                tile_store_a(c[mi][ni], s, o.x + mi * 16, o.y + ni * 8);
            }
    }
}
#endif

__device__ __forceinline__ float gamma_last(const Tiles& s, int d) {
#if KEY_GATE == GATE_PER_KEY
    return s.GL[d];
#else
    (void)d;
    return s.G[C - 1];
#endif
}

#if KEY_GATE == GATE_PER_VALUE
// Value gate (decay on V's columns, Γ is C x BV):  O_ie = exp(Γ_ie) (Q S)_ie + Σ_{j<=i} A_ij exp(Γ_ie − Γ_je) v_je.
//   key sub-chunk m below the query's (reference p = its last row, j <= p < i), on tensor cores:
//                                  exp(Γ_ie − Γ_pe) · Σ_{j∈m} A_ij [v_je exp(Γ_pe − Γ_je)]   (vt holds the bracket)
//   the query's own sub-chunk, exact pairwise in f32:  Σ_{j<=i} A_ij exp(Γ_ie − Γ_je) v_je
// c holds Q S for the 16x8 tile (tm, tn) on entry and the whole of O's tile (before scale) on return.
__device__ __forceinline__ void value_gate_intra(float c[4], const Tiles& s, int b, int tm, int tn) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int row[2] = {tm * 16 + g, tm * 16 + g + 8}, col = tn * 8 + 2 * t;
    float gi[2][2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        gi[h][0] = s.G[row[h] * LDG + col];
        gi[h][1] = s.G[row[h] * LDG + col + 1];
        c[2 * h] *= exp_nonpos(gi[h][0]);                               // inter: exp(Γ_i) ⊙ (Q S)
        c[2 * h + 1] *= exp_nonpos(gi[h][1]);
    }
    const int sb = (tm * 16) / SC;
    for (int m = 0; m < sb; ++m) {                                      // off-diagonal key sub-chunks
        float cm[4] = {0.f, 0.f, 0.f, 0.f};
        tile_mma_kn<SC>(cm, s.A + m * SC, LDC, tm * 16, s.vt + m * SC * LDV, LDV, tn * 8);
        const int p = m * SC + SC - 1;
        const float gp0 = s.G[p * LDG + col], gp1 = s.G[p * LDG + col + 1];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            c[2 * h] += exp_nonpos(gi[h][0] - gp0) * cm[2 * h];
            c[2 * h + 1] += exp_nonpos(gi[h][1] - gp1) * cm[2 * h + 1];
        }
    }
    const elem_t* v = s.v(b);
    for (int j = sb * SC; j <= row[1]; ++j) {                           // diagonal sub-chunk, pairwise
        const float gj0 = s.G[j * LDG + col], gj1 = s.G[j * LDG + col + 1];
        const float v0 = to_f32(v[VO(j, col)]), v1 = to_f32(v[VO(j, col + 1)]);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            if (j > row[h]) continue;
            const float aij = to_f32(s.A[AO(row[h], j)]);
            c[2 * h] += aij * exp_nonpos(gi[h][0] - gj0) * v0;
            c[2 * h + 1] += aij * exp_nonpos(gi[h][1] - gj1) * v1;
        }
    }
}
#endif

#if KSPLIT > 1 && !KS_CLUSTER
// Key split: the f32 partial outputs [KSPLIT, tokens, H, d_v] of the key slices, in the workspace after the segment
// states and decays (gla_codegen::key_split_workspace_bytes); slice s = head % KSPLIT, H the real heads.
__device__ __forceinline__ float* ks_partial(const FwdArgs& a) {
    const i64 seg = a.segs > 1 ? (i64)a.n_seqs * a.segs * a.h * ((i64)a.dk * a.dv + max(a.dk, a.dv)) : 0;
    return a.states + seg;
}
__device__ __forceinline__ float* ks_slice_partial(const FwdArgs& a, const Seq& sq) {
    return ks_partial(a) + (i64)(sq.head % KSPLIT) * a.cu_seqlens[a.n_seqs] * nvh(a) * a.dv;
}
#endif

// Stage output:  O = scale · ( (Q ⊙ exp(Γ)) S  +  A V )   (inter-chunk + intra-chunk), stored masked.
template <class G = CTA>
__device__ __forceinline__ void output_chunk(const FwdArgs& a, const Tiles& s, const Seq& sq, int i0, int b) {
    const int warp = (G::tid() >> 5), lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int u = 0; u < per_warp(O_WTILES, G::NW); ++u) {
        const int wt = warp + u * G::NW;
        if (wt >= O_WTILES) continue;
        const int2 o = wtile_origin<O_WM, O_WN, O_WCOLS>(wt);
        float c[O_WM][O_WN][4] = {};
        warp_mma<O_WM, O_WN, false, true, DK>(c, ktile(s.q(b)), o.x, Pad{s.st, LDV}, o.y, DK);    // inter: Q̃ S
#if KEY_GATE == GATE_PER_VALUE
#pragma unroll
        for (int mi = 0; mi < O_WM; ++mi)
#pragma unroll
            for (int ni = 0; ni < O_WN; ++ni)
                value_gate_intra(c[mi][ni], s, b, o.x / 16 + mi, o.y / 8 + ni);         // exp(Γ) ⊙ (Q S) + intra
#else
#if KEY_GATE != GATE_PER_KEY
#pragma unroll
        for (int mi = 0; mi < O_WM; ++mi) {                                              // scalar gate: diag(exp(Γ)) Q S
            const float e_lo = exp_nonpos(s.G[o.x + mi * 16 + g]), e_hi = exp_nonpos(s.G[o.x + mi * 16 + g + 8]);
#pragma unroll
            for (int ni = 0; ni < O_WN; ++ni) {
                c[mi][ni][0] *= e_lo; c[mi][ni][1] *= e_lo; c[mi][ni][2] *= e_hi; c[mi][ni][3] *= e_hi;
            }
        }
#endif
        const int kend = min(C, o.x + 16 * O_WM);                                       // A_ij = 0 for j > i
        warp_mma<O_WM, O_WN, false, true, C>(c, atile(s.A), o.x, vtile(s.v(b)), o.y, kend);     // intra: A V
#if SPLIT_A
        warp_mma<O_WM, O_WN, false, true, C>(c, atile(s.A_lo), o.x, vtile(s.v(b)), o.y, kend);  //        + A_lo V
#endif
#endif
        // Store: one 32-bit pair per (row, column pair); rows past the sequence end and columns past d_v are skipped.
        // Key split: this slice's O_s = scale · (Q̃_s S_s + A_s V) in f32 instead (gla_fwd_ksum adds the slices and
        // rounds once).
        const bool full_cols = (a.dv & 1) == 0 && sq.v0 + BV <= a.dv;
#if KSPLIT > 1 && !KS_CLUSTER
        float* out = ks_slice_partial(a, sq);
#else
        elem_t* out = a.o;
#endif
#pragma unroll
        for (int mi = 0; mi < O_WM; ++mi)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int row = o.x + mi * 16 + g + 8 * h;
                if (i0 + row >= sq.len) continue;
                auto* dst = out + ((sq.bos + i0 + row) * nvh(a) + vhead(sq)) * (i64)a.dv + sq.v0 + o.y + 2 * t;
#pragma unroll
                for (int ni = 0; ni < O_WN; ++ni) {
                    const float x0 = a.scale * c[mi][ni][2 * h], x1 = a.scale * c[mi][ni][2 * h + 1];
                    const int e = sq.v0 + o.y + ni * 8 + 2 * t;
#if KSPLIT > 1 && !KS_CLUSTER
                    (void)full_cols;
                    if (e < a.dv) dst[ni * 8] = x0;
                    if (e + 1 < a.dv) dst[ni * 8 + 1] = x1;
#else
                    if (full_cols) st_pair(dst + ni * 8, x0, x1);
                    else {
                        if (e < a.dv) dst[ni * 8] = to_elem(x0);
                        if (e + 1 < a.dv) dst[ni * 8 + 1] = to_elem(x1);
                    }
#endif
                }
            }
    }
}

// Stage state_update:  S ← diag(exp(Γ_L)) S + K̂^T V   (value gate: S ← S diag(exp(Γ_L)) + K^T V̂).
template <class G = CTA>
__device__ __forceinline__ void state_update(SRegs& S, const Tiles& s, int b) {
    static_assert(G::NW == NW, "S is held by the NW warps of the state group");
    const int warp = (G::tid() >> 5), lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int u = 0; u < per_warp(S_WTILES, G::NW); ++u) {
        const int wt = warp + u * G::NW;
        if (wt >= S_WTILES) continue;
        const int2 o = wtile_origin<S_WM, S_WN, S_WCOLS>(wt);
#if KEY_GATE == GATE_PER_VALUE
#pragma unroll
        for (int ni = 0; ni < S_WN; ++ni) {                                             // S ← S diag(exp(Γ_L)) (columns)
            const int col = o.y + ni * 8 + 2 * t;
            const float f0 = exp_nonpos(s.G[(C - 1) * LDG + col]), f1 = exp_nonpos(s.G[(C - 1) * LDG + col + 1]);
#pragma unroll
            for (int mi = 0; mi < S_WM; ++mi) {
                S[u][mi][ni][0] *= f0; S[u][mi][ni][1] *= f1; S[u][mi][ni][2] *= f0; S[u][mi][ni][3] *= f1;
            }
        }
        (void)g;
#else
#pragma unroll
        for (int mi = 0; mi < S_WM; ++mi) {                                             // S ← diag(exp(Γ_L)) S (rows)
            const float f_lo = exp_nonpos(gamma_last(s, o.x + mi * 16 + g));
            const float f_hi = exp_nonpos(gamma_last(s, o.x + mi * 16 + g + 8));
#pragma unroll
            for (int ni = 0; ni < S_WN; ++ni) {
                S[u][mi][ni][0] *= f_lo; S[u][mi][ni][1] *= f_lo; S[u][mi][ni][2] *= f_hi; S[u][mi][ni][3] *= f_hi;
            }
        }
        (void)t;
#endif
        warp_mma<S_WM, S_WN, true, true, C>(S[u], ktile(s.k(b)), o.x, vtile(s.v(b)), o.y, C);  // + K̂^T V  (value gate: K^T V̂)
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
    const float* p = a.params ? a.params + (i64)(head / KSPLIT) * NPARAM : nullptr;
    return gate_log_alpha((float)(head / KSPLIT), p);
#else
    (void)a; (void)head;
    return 0.f;
#endif
}
