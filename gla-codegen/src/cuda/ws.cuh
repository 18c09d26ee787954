// ---------------------------------------------------------------------------------------------------------------
// Family: warp-specialised fused forward — the producer program, the consumer program, the entry points.
// ---------------------------------------------------------------------------------------------------------------
// STATES_ISSUE_AHEAD (two TMA producer groups, every slot one group's): the segment-state pass issues a group's
// next chunk at the top of the current one, so the load has the gate and K̂ to land in, not K̂ alone (per key) or
// nothing at all (scalar gates, which issued after publishing). Per key that needs the logits out of the group's
// one logits tile, which the next load would overwrite before this chunk's gate has read it: the state pass loads
// no q, so its logits land in the slot's q tile (same shape and swizzle); the scalar gates' logits are in registers
// already (GLA_REG_LOGIT). The host's lead segment is shorter for these variants (`Features::lead_permille`).

// The token where step j of a segment of chunks [c0, c0 + nchunks) starts: chunk c0 + j, or (GLA_REVERSE, the dv pass)
// chunk c0 + nchunks − 1 − j — the segment walked last to first. Every other index (slots, groups, phases) counts
// steps, so the ring's protocol is the forward's.
__device__ __forceinline__ int chunk_token(int c0, int nchunks, int j) {
    return (GLA_REVERSE ? c0 + nchunks - 1 - j : c0 + j) * C;
}

// One producer group P: chunks j = g, g + PG, ... of the segment, chunk j into slot j % STAGES. Slot j may be
// refilled once the consumers are done with chunk j − STAGES (EMPTY).
// STATES: for the segment-state pass (no q, no scores: Γ and K̂ only).
// The group issues its next chunk j + PG at ONE point of chunk j, decided on the host for each pass (ISSUE,
// STATES_ISSUE: `Features::issue`): ISSUE_TOP before the chunk's work, ISSUE_AFTER_GATE once the gate has read the
// logits tile, ISSUE_MID after the scores, ISSUE_AFTER_PUBLISH once the chunk is published. Each point below is one
// `AT == point` test.
template <class P, bool STATES = false>
__device__ __forceinline__ void produce(const FwdArgs& a, unsigned char* smem, const Seq& sq, int c0, int nchunks, int g, float fixed_log_alpha) {
    constexpr IssuePoint AT = STATES ? STATES_ISSUE : ISSUE;
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
        const int i0 = chunk_token(c0, nchunks, j);
#if GLA_TMA
        // (chunk j belongs to this group: j % PG == g). The issuing warp waits for the slot to be free.
        if (j >= STAGES && P::tid() >= P::NT - 32) bar_wait_empty(bar_empty(j % STAGES, g));
        if (tma_chunk(a, sq, i0)) {  // whole chunk: one thread's TMA boxes (an empty cp.async group keeps
#if GLA_ISSUE_AFTER_GATE
            if (after_gate) {                   // the issuing warp waits until every warp of the group has read the logits
                if (P::tid() >= P::NT - 32) asm volatile("bar.sync %0, %1;\n" ::"r"(BAR_XREAD + g), "n"(P::NT) : "memory");
                else asm volatile("bar.arrive %0, %1;\n" ::"r"(BAR_XREAD + g), "n"(P::NT) : "memory");
            }
#endif
            tma_issue<P>(a, slot(j % STAGES), sq, i0, j % STAGES, !STATES, mbar_addr(smem, j % STAGES));
            cp_async_commit();                  // cp_async_wait's count of groups per chunk)
            return issue_logit<P>(a, sq, i0);
        }
        if (P::tid() == P::NT - 32) mbar_arrive_no_tx(mbar_addr(smem, j % STAGES));  // (its phase completes all the same)
        if (j >= STAGES || after_gate) P::sync();  // cp.async: every producer thread copies, once the slot is free
#else                                            // (and, after the gate, once every thread has read the logits)
        if (j >= STAGES) bar_wait(bar_empty(j % STAGES, g));  // (chunk j belongs to this group: j % PG == g)
#endif
        return issue_chunk<P>(a, slot(j % STAGES), sq, i0, j % STAGES, !STATES);
    };
    if (g >= nchunks) return;
    elem_t x = issue(g);
    [[maybe_unused]] bool last_mild = true;                  // (per key, wgmma scores: the group's last chunk was mild)
#if KEY_GATE == GATE_PER_KEY && GLA_WG_SCORES
    [[maybe_unused]] const VecLane<P> lanes;                 // the gate's lane map, kept across chunks (ROOMY_PRODUCERS)
    auto lane_map = [&] {
        if constexpr (ROOMY_PRODUCERS) return lanes;
        else return VecLane<P>();
    };
#endif
    for (int j = g; j < nchunks; j += PG) {
        const int b = j % STAGES, i0 = chunk_token(c0, nchunks, j), jn = j + PG;
        const Tiles s = slot(b);
        const elem_t xc = x;                                 // (GLA_REG_LOGIT: this chunk's logit, row lane)
        land_logit<P>(s, b, x);
        if (AT == ISSUE_TOP && PG > 1 && jn < nchunks) x = issue(jn);  // ISSUE_TOP: before working on chunk j
        if (AT == ISSUE_TOP && PG == 1 && jn < nchunks) {
            x = issue(jn);
            cp_async_wait<1>();                              // (one group: wait for chunk j only)
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
            gate_khat_vec<P>(a, s, sq, i0, b, [&] { if (AT == ISSUE_AFTER_GATE && jn < nchunks) x = issue(jn, true); });  // Γ (registers, shuffle scan), Γ_L;  K̂ = K ⊙ exp(Γ_L − Γ)
#elif KEY_GATE == GATE_PER_KEY
            if constexpr (P::NT % (DK / 2) == 0 && C * (DK / 2) <= 16 * P::NT) {
                gate_decays<P, true>(a, s, sq, i0, b);          // Γ (registers), Γ_L;  K̂ = K ⊙ exp(Γ_L − Γ)
            } else {
                gate_cumsum<P>(a, s, sq, i0, b, fixed_log_alpha);  // Γ = log2e · cumsum(gate(x))  (ends on a barrier)
                decay_operands<P>(s, b, false, false);           // K̂ = K ⊙ exp(Γ_L − Γ)
            }
#elif GLA_VALUE_ROWS
            static_assert(!STATES, "per value on wgmma: no segment-state pass");
#else
            float gam[GPL];
            scan_publish(a, s, sq, i0, b, fixed_log_alpha, P::tid() >> 5, threadIdx.x & 31, gam, xc);  // Γ (every warp)
            decay_keys<P>(s, b, gam);                           // K̂ = K ⊙ exp(Γ_L − Γ)
#endif
            publish(b);
            if (AT == ISSUE_AFTER_PUBLISH && jn < nchunks) x = issue(jn);
            continue;
        }
#if KEY_GATE == GATE_PER_KEY
        // One pass where its registers fit (one (row segment, column pair) per thread, at most 16 rows a thread,
        // 168 registers a thread or more; with the producers' wgmma scores one (row segment, 8 columns) per thread);
        // else the two passes, Γ through shared memory.
        if constexpr (P::NT % (DK / 2) == 0 && C * (DK / 2) <= 16 * P::NT && (GLA_WG_SCORES || NT + PT <= 384 || (GLA_WG_SMEM_S && P::NT >= 256))) {
            // Γ, and on mild chunks Q̃ = Q ⊙ exp(Γ), K̃ = K ⊙ exp(−Γ), K̂ = K̃ ⊙ exp(Γ_L), in one pass
#if GLA_WG_SCORES
            // (warp_uniform: the branch holds wgmma; gate_decays_vec's answer is group-uniform.) After a chunk that
            // was not mild the group votes before the decays: a chunk's strength predicts the next one's.
            const bool early = AT == ISSUE_AFTER_GATE && jn < nchunks;  // the next chunk loads during the decays
            last_mild = warp_uniform((int)gate_decays_vec<P>(a, s, sq, i0, b, lane_map(), !last_mild, [&] { if (early) x = issue(jn, true); }));
            if (last_mild) wg_scores<P>(s);                  // A = (Q̃ K̃^T) ⊙ M  (one tf32 wgmma group; else the exact
                                                             // path ran: A = (Q K^T) ⊙ D on wgmma, §4.3, Q̃ and K̂)
#else
            if (gate_decays<P>(a, s, sq, i0, b)) {
                intra_scores_factored<P>(s, b);              // A = (Q̃ K̃^T) ⊙ M
            } else {
                intra_scores<P>(s, b);                       // A = (Q K^T) ⊙ D  (decay-masked, §4.3)
                decay_operands<P>(s, b, true, false);        // Q̃ = Q ⊙ exp(Γ), K̂ = K ⊙ exp(Γ_L − Γ)
            }
#endif
        } else {
            static_assert(!GLA_WG_SCORES || P::NT == 0, "wg_scores takes its operands from gate_decays_vec");
            const bool mild = gate_cumsum<P>(a, s, sq, i0, b, fixed_log_alpha);  // Γ = log2e · cumsum(gate(x))
            intra_and_operands<P>(s, b, mild);               // A;  Q̃, K̂ (and K̃ on mild chunks)
        }
#elif GLA_VALUE_ROWS
        intra_scores<P>(s, b);                               // A = (Q Kᵀ) ⊙ M  (no decay: it acts on V's columns)
        value_operands<P>(a, s, sq, i0, b);                  // Γ, Γ_L, 2^Γ_L, mild?  strong: P;  V̂ = V ⊙ 2^(Γ_L − Γ)
#else
        float gam[GPL];
        gate_scores<P>(a, s, sq, i0, b, fixed_log_alpha, gam, xc);  // Γ = log2e · cumsum(gate(x)) (every warp);  A = (Q K^T) ⊙ D
        if (AT == ISSUE_MID && jn < nchunks) x = issue(jn);          // ISSUE_MID: after the scores (xc keeps this chunk's logit)
        decay_keys<P, GLA_WGMMA>(s, b, gam);                 // K̂ = K ⊙ exp(Γ_L − Γ)  (wgmma: and Q̃ = Q ⊙ exp(Γ))
#endif
        publish(b);                                          // slot b holds chunk j
        if (AT == ISSUE_AFTER_PUBLISH && jn < nchunks) x = issue(jn);  // the other group works while this one loads
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
        // (GLA_REVERSE, the dv pass: S'ᵀ from dht, dVᵀ = S'ᵀ K̂ᵀ + dOᵀ A, S'ᵀ ← S'ᵀ diag(exp(Γ_L)) + dOᵀ Q̃, chunks last to first)
        WgState S = {};
        if (const float* init = seg_init(a, n, p, head)) wg_state_global<false>(S, const_cast<float*>(init), a, sq.v0);  // S_0 or S_init(p)
        if constexpr (GLA_REVERSE) {                         // dv pass: S' = dht / scale (dV = scale · (K̂ S' + Aᵀ dO))
            const float inv = 1.f / a.scale;
#pragma unroll
            for (int i = 0; i < DK / 2; ++i) S[i] *= inv;
        }
        GateAcc gacc;                                        // (a per-key gate's dk pass: d log α's running sums, d params)
        for (int j = 0; j < nchunks; ++j) {
            const int b = j % STAGES, i0 = chunk_token(c0, nchunks, j);
            const Tiles s = carve_slot(smem, b);
#if GLA_ROW_SUMS && GLA_VALUE_ROWS
            rows_issue(a, sq, i0, smem);                     // (a per-key gate's passes: the store's rs_w, q ⊙ dq)
#endif
            bar_wait(BAR_FULL + b);                          // a producer group filled slot b
#if GLA_ROW_SUMS && GLA_VALUE_ROWS
            wg_scale_values(s, b);                           // V̂ = V ⊙ 2^(Γ_L − Γ)  (dk pass: Ṽ = V ⊙ 2^Γ), this warpgroup's columns
#endif
            WgStateA sa;
            WgOut o;
#if GLA_VALUE_ROWS
            // (per value: a mild chunk packs Sᵀ decayed and takes the intra-chunk product, a strong one packs it as
            // it entered and adds the producers' P at the store — value_operands)
            const bool mild = warp_uniform((int)value_mild(s));
            if (mild) wg_decay(S, s);                        // Sᵀ ← diag(2^Γ_L) Sᵀ
            wg_pack(S, sa);
            if (!mild) wg_decay(S, s);
            wg_output(sa, o, s, b, mild);                    // Oᵀ = Sᵀ Qᵀ (+ V̂ᵀ Aᵀ on a mild chunk)   (async)
#else
#if GLA_WG_SMEM_S
            wg_stage_state(S, s.st);                         // Sᵀ (bf16) for the output product, in shared memory
#else
            wg_pack(S, sa);                                  // Sᵀ (bf16) for the output product
#endif
            wg_decay(S, s);                                  // Sᵀ ← Sᵀ diag(exp(Γ_L))
            wg_output(sa, o, s, b);                          // Oᵀ = Sᵀ Q̃ᵀ + Vᵀ Aᵀ   (async)
#endif
            wg_state_update(S, s, b);                        // Sᵀ += Vᵀ K̂           (async)
            wg_wait<1>();                                    // the output group is done
            reg_fence(o);
#if !GLA_WG_SMEM_S
            reg_fence(sa);
#endif
#if GLA_ROW_SUMS && GLA_VALUE_ROWS
            gate_prefetch(smem, gacc);                       // (… read while the state group runs)
#endif
            auto release = [&] {
                wg_wait<0>();                                // the state group is done: slot b is read
                reg_fence(S);
                if (j + STAGES < nchunks) bar_arrive_empty(bar_empty(b, (j + STAGES) % PG));
            };
            wg_store(a, sq, i0, j, o, smem, s, gacc, release);  // O = scale · (Oᵀ)ᵀ  (row-scaled chunks: · exp(Γ_i));
            if constexpr (!GLA_VALUE_ROWS) release();        // per value, the store released slot b once it read it
        }
        if constexpr (GLA_REVERSE) {                         // dv pass: the final state is dh0 = scale · S'
#pragma unroll
            for (int i = 0; i < DK / 2; ++i) S[i] *= a.scale;
        }
        if constexpr (GLA_ROW_SUMS && GLA_VALUE_ROWS && GLA_REVERSE) gate_acc_flush(a, sq, gacc);  // d params
        if (float* fin = seg_fin(a, n, p, head)) wg_state_global<true>(S, fin, a, sq.v0);  // the final state, or E_0 (the lead)
#else
        // ---- consumers: S, O = Q̃ S + A V, S ← diag(exp(Γ_L)) S + K̂^T V ----
        SRegs S = {};
        if (const float* init = seg_init(a, n, p, head)) state_global<false, Consumers>(S, const_cast<float*>(init), a, sq.v0);  // S_0 or S_init(p)
        for (int j = 0; j < nchunks; ++j) {
            const int b = j % STAGES, i0 = chunk_token(c0, nchunks, j);
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

#if GLA_SEGMENTED  // (the backward's passes and per-value gates on wgmma are never segmented)
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
