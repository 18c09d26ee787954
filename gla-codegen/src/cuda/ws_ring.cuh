// ---------------------------------------------------------------------------------------------------------------
// Family: warp-specialised fused forward — the slot ring between producer and consumer warps, named barriers,
// register roles.
// ---------------------------------------------------------------------------------------------------------------
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
#elif GLA_VALUE_ROWS
    s.GL = reinterpret_cast<float*>(smem + OFF_GL + off);  // Γ_L, 2^Γ_L of the value columns, the mild flag
    s.EGL = s.GL + BV;
    s.G = reinterpret_cast<float*>(smem + OFF_G + off);
    s.P = reinterpret_cast<float*>(smem + OFF_VT + off);
#else
    s.G = reinterpret_cast<float*>(smem + OFF_G + off);
#endif
    s.tot = reinterpret_cast<float*>(smem + OFF_TOT + g * TOT_STRIDE);
#if GLA_WG_SCORES
    s.qk = reinterpret_cast<float*>(smem + OFF_PS + g * PS_STRIDE);
#endif
    s.xg = reinterpret_cast<elem_t*>(smem + OFF_XG + g * XG_STRIDE);
    s.vs = reinterpret_cast<elem_t*>(smem + OFF_VS + g * VS_STRIDE);
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
