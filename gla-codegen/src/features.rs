//! What a variant *is*, decided once. [`Features::of`] computes every feature of the kernels a [`KernelSpec`]
//! emits — kernel family, loads (TMA or cp.async), producer groups and where they issue the next chunk, wgmma
//! products, register split, key split / cluster, the lead segment, the shared-memory layout and the combine's
//! blocks — from the spec's fields. The writer emits them into the kernel as `constexpr`s / 0-1 macros, the plan and
//! the runtime read them from here; the CUDA templates never work a feature out from other defines.

use crate::spec::{KernelSpec, MAX_SMEM_BYTES};
use gla_core::{DType, GateShape};

/// The kernel family a variant's forward belongs to: which entry points it has and which template code runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Family {
    /// Alg. 1 (left): `gla_fwd_states` writes every chunk's start state, `gla_fwd_output` runs all chunks at once.
    Materialized,
    /// Alg. 1 (right), one fused sequential kernel a (sequence, head, value tile), mma.sync on every warp
    /// (`gla_fwd_fused`, with the two-level scan's `gla_fwd_seg_states`).
    Fused,
    /// The fused kernel split into producer warps (loads, gate, decays, scores) and consumer warps (output and state
    /// update) passing chunks through a ring of shared-memory slots, mma.sync products (`gla_fwd_ws`,
    /// `gla_fwd_ws_states`).
    WarpSpecialised,
    /// [`Family::WarpSpecialised`] with the consumers' products on wgmma (and, where [`Features::tma`], TMA loads).
    WarpSpecialisedWgmma,
}

/// setmaxnreg's split of the register file between consumer and producer threads (wgmma variants).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegisterSplit {
    /// Registers a thread of the CTA's share of the register file (multiple of 8, ≤ 255).
    pub cap: u32,
    pub consumer: u32,
    pub producer: u32,
    /// Whether the kernel moves registers at all (`setmaxnreg`); without it every thread has `cap`.
    pub split: bool,
}

/// Every feature of a variant's kernels (see the module doc). Built only by [`Features::of`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Features {
    pub family: Family,
    pub shape: GateShape,
    /// [`crate::Pass::Dv`], [`crate::Pass::Dk`]: chunks walked last to first, the consumers contract Aᵀ and swap
    /// Q̃ and K̂.
    pub reverse: bool,
    /// A backward pass (dv, dq, dk): never segmented (the two-level scan is the forward's).
    pub backward_pass: bool,
    /// Whether the plan may cut narrow problems into segments (the two-level scan): not the backward's passes, and
    /// not per-value gates on wgmma consumers (their segment-state pass and combine are not written yet).
    pub segmented: bool,
    /// Per-value gates on wgmma consumers: the producers write V̂ = V ⊙ 2^(Γ_L − Γ) over the value columns and, on a
    /// chunk whose span passes SPAN_MAX, the intra-chunk output P by running products of α; the consumers scale Sᵀ's
    /// rows by 2^Γ_L and the output by 2^(Γ − Γ_L) (mild) or 2^Γ plus P (see `value_operands`).
    pub value_rows: bool,
    /// [`crate::Pass::Dq`], [`crate::Pass::Dk`]: the store takes the gate's row sums Σ_e rs_w ⊙ o per token and
    /// consumer warpgroup (64 columns) from the f32 accumulators (`ForwardArgs::rs_w`, `rs_out`).
    pub row_sums: bool,
    /// [`crate::Pass::Dq`], [`crate::Pass::Dk`]: Sᵀ, Q̃ and K̂ enter their products as hi + lo halves (Sᵀ_hi Q̃_hiᵀ +
    /// Sᵀ_lo Q̃_hiᵀ + Sᵀ_hi Q̃_loᵀ, Vᵀ K̂_hi + Vᵀ K̂_lo), so dq and dk are f32-like: the gate's gradient sums
    /// q ⊙ dq − k ⊙ dk, which nearly cancel, over the sequence. No row-scaled chunks (Q̃ is always decayed).
    pub split_operands: bool,
    /// bf16/f16: mma.sync / wgmma on tensor cores and approximate transcendentals; f32: CUDA-core FMAs, IEEE math.
    pub tensor_cores: bool,
    /// The scores A kept as hi + lo halves (A V on tensor cores to ~f32 precision).
    pub split_a: bool,
    pub wgmma: bool,
    /// wgmma at 8 + 8 warps: Sᵀ reaches the output product through shared memory.
    pub wg_smem_s: bool,
    /// Per key, C = 32: the producer warpgroup computes the scores as one tf32 wgmma group.
    pub wg_scores: bool,
    /// Whole chunks reach the slots by TMA (one producer thread, an mbarrier a slot).
    pub tma: bool,
    /// Producer groups taking alternate chunks (1 or 2; 1 where the variant is not warp-specialised).
    pub producer_groups: u32,
    /// Two producer groups with TMA loads (every slot then holds one group's chunks).
    pub two_tma_groups: bool,
    /// Per key, two producer warpgroups: each group's logits in its own tile (the fourth slot fits).
    pub x_per_group: bool,
    /// Per key with the producers' wgmma scores, at most 384 threads a CTA: the producer warps have the registers to
    /// keep the gate's lane map across the chunk loop (`VecLane`; at 512 threads it is rebuilt each chunk).
    pub roomy_producers: bool,
    /// Every slot belongs to one producer group (slot j mod STAGES, group j mod PG): one EMPTY barrier a slot.
    pub slot_per_group: bool,
    /// Where a producer group of the fused pass issues its next chunk j + PG while working on chunk j ([`Issue`]).
    pub issue: Issue,
    /// The same for the segment-state pass (which loads no q and computes no scores).
    pub states_issue: Issue,
    /// The segment-state pass issues a group's chunk j + 2 at the top of chunk j (its logits land in the slot's
    /// idle q tile).
    pub states_issue_ahead: bool,
    /// TMA scalar gates: every producer warp loads the chunk's per-head logits itself (lane l row l).
    pub reg_logit: bool,
    /// The per-key logits tile is filled by TMA, so it has the swizzled 64-element rows of q and k.
    pub logits_swizzled: bool,
    /// Scalar gates on wgmma (not 8 + 8): mild chunks keep q raw and scale O's rows by 2^Γ_i.
    pub rows_scaled: bool,
    /// Cluster key split, per key: each CTA of the pair finishes half the value columns (scalar gates: slice 0
    /// finishes all, one-way exchange).
    pub xch_split: bool,
    pub key_split: u32,
    pub cluster: bool,
    /// wgmma variants: setmaxnreg's split.
    pub regs: Option<RegisterSplit>,
    /// The lead segment of the two-level scan, in thousandths of a later segment ([`crate::plan::LEAD_PERMILLE`]).
    pub lead_permille: i32,
    /// Warp tiles (16×8 mma tiles) of O (C × BV), S (d_k × BV) and A (C × C).
    pub warp_tiles: [(u32, u32); 3],
    /// The segment combine's state rows a CTA and CTAs a head.
    pub combine_rows: u32,
    pub combine_blocks: u32,
    pub smem: SmemLayout,
}

/// Where a producer group issues the load of its next chunk j + PG while it works on chunk j (warp-specialised
/// kernels; one value a pass, [`Features::issue`] and [`Features::states_issue`]). The producer template has one
/// site a point and asks `AT == point` there: this enum is the decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Issue {
    /// Not warp-specialised: the plain kernels double-buffer by cp.async.
    None,
    /// Before working on chunk j: one producer group (it then waits for chunk j's load only), and the segment-state
    /// pass of two TMA groups, whose logits land in the slot's idle q tile ([`Features::states_issue_ahead`]).
    Top,
    /// Per key with the producers' wgmma scores and four slots: right after the gate has read chunk j's logits tile
    /// (every warp of the group arrives on BAR_XREAD; the issuing warp waits there before its TMA overwrites it).
    AfterGate,
    /// Scalar gates, two TMA groups and four slots: after the scores, once the consumers freed chunk j − 2's slot.
    Mid,
    /// Two groups otherwise: after publishing chunk j (the other group works while this one loads).
    AfterPublish,
}

impl Issue {
    /// The emitted constant (`enum IssuePoint` of the kernel source).
    pub fn cuda_name(self) -> &'static str {
        match self {
            Issue::None => "ISSUE_NONE",
            Issue::Top => "ISSUE_TOP",
            Issue::AfterGate => "ISSUE_AFTER_GATE",
            Issue::Mid => "ISSUE_MID",
            Issue::AfterPublish => "ISSUE_AFTER_PUBLISH",
        }
    }
}

/// State elements a thread of the segment combine (`gla_fwd_seg_combine`) carries.
pub const COMBINE_PER: u32 = 4;

impl Features {
    /// The features of `spec`'s kernels. Pure; the spec need not be validated (validation reads
    /// [`Features::smem`]).
    pub fn of(spec: &KernelSpec) -> Self {
        let t = &spec.tiles;
        let shape = spec.shape();
        let per_key = shape == GateShape::PerKey;
        let scalar = matches!(shape, GateShape::PerHead | GateShape::Fixed);
        let smem = SmemLayout::of(spec);
        let family = if spec.materialize {
            Family::Materialized
        } else if !t.specialised() {
            Family::Fused
        } else if t.wgmma {
            Family::WarpSpecialisedWgmma
        } else {
            Family::WarpSpecialised
        };
        let two = two_tma_groups(spec);
        let slot_per_group = t.specialised()
            && t.producer_groups > 1
            && smem.stages.is_multiple_of(t.producer_groups);
        let mid = mid_issue(spec);
        let issue = if !t.specialised() {
            Issue::None
        } else if t.producer_groups == 1 {
            Issue::Top
        } else if mid && wg_scores(spec) && per_key {
            Issue::AfterGate
        } else if mid {
            Issue::Mid
        } else {
            Issue::AfterPublish
        };
        let states_issue = match issue {
            Issue::None => Issue::None,
            _ if t.producer_groups == 1 || two => Issue::Top,
            _ => Issue::AfterPublish,
        };
        let lead_permille = if !two {
            crate::plan::LEAD_PERMILLE
        } else if per_key {
            crate::plan::LEAD_AHEAD_PER_KEY_PERMILLE
        } else {
            crate::plan::LEAD_AHEAD_SCALAR_PERMILLE
        };
        let combine_rows = (COMBINE_PER * t.warps * 32 / t.block_v).max(1);
        let value_rows = shape == GateShape::PerValue && t.wgmma;
        Features {
            family,
            shape,
            reverse: spec.pass.reverse(),
            backward_pass: spec.pass != crate::spec::Pass::Forward,
            segmented: spec.pass == crate::spec::Pass::Forward && !value_rows,
            value_rows,
            row_sums: spec.pass.row_sums(),
            split_operands: split_operands(spec),
            tensor_cores: spec.dtype != DType::F32,
            split_a: split_a(spec),
            wgmma: t.wgmma,
            wg_smem_s: wg_smem_s(spec),
            wg_scores: wg_scores(spec),
            tma: tma(spec),
            producer_groups: t.producer_groups.max(1),
            two_tma_groups: two,
            x_per_group: x_per_group(spec),
            roomy_producers: wg_scores(spec) && 32 * (t.warps + t.producer_warps) <= 384,
            slot_per_group,
            issue,
            states_issue,
            states_issue_ahead: two,
            reg_logit: tma(spec) && shape == GateShape::PerHead,
            logits_swizzled: tma(spec) && per_key,
            // (the dv pass contracts A over its rows: no row factor can wait for the store)
            rows_scaled: scalar
                && t.wgmma
                && !wg_smem_s(spec)
                && !spec.pass.reverse()
                && !split_operands(spec),
            xch_split: spec.cluster && per_key,
            key_split: spec.key_split,
            cluster: spec.cluster,
            regs: t.wgmma.then(|| register_split(spec)),
            lead_permille,
            warp_tiles: warp_tiles(spec),
            combine_rows,
            combine_blocks: spec.dk.div_ceil(combine_rows),
            smem,
        }
    }

    /// Whether the producer issues chunk j + PG in the middle of chunk j ([`Issue::Mid`] or [`Issue::AfterGate`]).
    pub fn mid_issue(&self) -> bool {
        matches!(self.issue, Issue::Mid | Issue::AfterGate)
    }

    /// Slices whose f32 partial outputs go through the workspace: `key_split`, or 1 where a cluster key split adds
    /// them on chip.
    pub fn workspace_partials(&self) -> u32 {
        if self.cluster {
            1
        } else {
            self.key_split.max(1)
        }
    }
}

/// setmaxnreg's split (wgmma variants): the CTA's share of the register file (168 a thread at 384 threads, 128 at
/// 512 or at 256 with two CTAs an SM), split so that the consumers keep 160 (120 when Sᵀ reaches the output product
/// through shared memory; 104 with two CTAs an SM; 144 beside two per-key producer warpgroups) and the producers
/// (per key: Γ of their rows in registers plus the swizzled addresses) get the rest. The scalar gates' TMA variants
/// take no split (168 each: their consumers spill at 160).
fn register_split(spec: &KernelSpec) -> RegisterSplit {
    let t = &spec.tiles;
    let (nt, pt) = (32 * t.warps as i64, 32 * t.producer_warps as i64);
    let file = 65536 / t.ctas_per_sm.max(1) as i64;
    let cap = ((file / (nt + pt)) / 8 * 8).min(255);
    let per_key = spec.shape() == GateShape::PerKey;
    // (the dq / dk passes' consumers also hold Sᵀ's low halves: 16 more registers at d = 64, 32 at 128 — without
    // them in the split their kernels spilled 16 B. A per-key gate's passes, per-value kernels of 8 + 4 warps, take
    // the same 184 / 136: at the even 168 / 168 ptxas serialised every wgmma of the six bf16 d = 128 passes (C7512,
    // insufficient registers: each product waited for the one before); at 176 / 152 the dq passes spilled 160 B; 0
    // spills at 184 / 136 with gate_prefetch after the output group and the producers' warp_mma offsets not hoisted.
    // `autotune --plan` fails on C7512 as on a spill.)
    let consumer: i64 = if split_operands(spec) {
        if t.ctas_per_sm > 1 {
            120
        } else {
            184
        }
    } else if t.ctas_per_sm > 1 {
        104
    } else if wg_smem_s(spec) {
        120
    } else if wg_scores(spec) && t.producer_groups == 2 {
        144
    } else if tma(spec) && !per_key {
        168
    } else {
        160
    };
    // (C's division: truncation toward zero, as Rust's.)
    let producer = if pt > 0 {
        ((cap * (nt + pt) - consumer * nt) / pt) / 8 * 8
    } else {
        cap
    };
    let split = cap < 200 && producer != cap && (24..=256).contains(&producer);
    RegisterSplit {
        cap: cap as u32,
        consumer: consumer as u32,
        producer: producer as u32,
        split,
    }
}

/// Warp tile (rows, cols in 16 x 8 mma tiles) of an `m x n` product shared by `warps` warps: the first of `prefs`
/// that tiles the product exactly into a multiple of `warps` warp tiles, else 1 x 1 (one mma tile per step).
/// Bigger warp tiles load each fragment once for more tensor-core steps and give independent accumulators.
pub fn warp_tile(m: u32, n: u32, warps: u32, prefs: &[(u32, u32)]) -> (u32, u32) {
    let (tm, tn) = (m / 16, n / 8);
    prefs
        .iter()
        .copied()
        .find(|&(wm, wn)| tm % wm == 0 && tn % wn == 0 && ((tm / wm) * (tn / wn)) % warps == 0)
        .unwrap_or((1, 1))
}

/// The warp tiles of the output O (C x BV), the state S (d_k x BV) and the scores A (C x C) of a variant.
fn warp_tiles(spec: &KernelSpec) -> [(u32, u32); 3] {
    let (c, dk, bv, w) = (spec.chunk, spec.dk, spec.tiles.block_v, spec.tiles.warps);
    // The scores are the producers' product when the variant is warp-specialised.
    let aw = if spec.tiles.specialised() {
        spec.tiles.producer_warps / spec.tiles.producer_groups
    } else {
        w
    };
    [
        warp_tile(c, bv, w, &[(2, 4), (1, 4), (2, 2), (1, 2)]),
        warp_tile(dk, bv, w, &[(4, 4), (2, 4), (4, 2), (2, 2), (1, 4), (1, 2)]),
        warp_tile(c, c, aw, &[(1, 4), (2, 2), (1, 2)]),
    ]
}

/// Byte offsets of the shared-memory tiles of one CTA. The inputs of a chunk (q, k, v, raw gate logits) live in a
/// stage buffer; two stages (double buffering) when they fit, one otherwise.
///
/// Warp-specialised variants (`tiles.producer_warps > 0`) have a ring of `stages` slots (3 when they fit, else 2):
/// a slot holds everything the consumers read of one chunk — q (→ Q̃), k (→ K̂), v, the logits (→ K̃ / scratch),
/// the scores A and A_lo, and Γ_L / exp(Γ_L) (per key) or Γ (scalar gates). `a`, `a_lo`, `gl` (and `g` for scalar
/// gates) are then the offsets in slot 0; slot b's are `stage_bytes · b` further. The per-key Γ tile (`g`) and the
/// segment totals (`tot`) belong to the producers, the state tile `st` to the consumers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SmemLayout {
    pub stages: u32,
    pub stage_bytes: u32,
    pub stage_q: u32,
    pub stage_k: u32,
    pub stage_v: u32,
    pub stage_x: u32,
    /// [`Features::split_operands`]: the low halves of Q̃ and K̂ (same layout as q / k; 0 otherwise).
    pub stage_q_lo: u32,
    pub stage_k_lo: u32,
    pub g: u32,
    pub st: u32,
    pub a: u32,
    /// Value gate only: V ⊙ exp(Γ_p − Γ) (0 bytes otherwise).
    pub vt: u32,
    /// Low halves of the scores A (bf16/f16 with per-key, per-head or fixed gates; 0 bytes otherwise).
    pub a_lo: u32,
    /// Per-key: Γ of the chunk's last row (0 bytes otherwise).
    pub gl: u32,
    /// gate_cumsum's segment totals: in the state tile `st` (== `st`), or their own region when warp-specialised.
    pub tot: u32,
    /// Bytes available at `tot` (per producer group).
    pub tot_bytes: u32,
    /// Bytes from one producer group's Γ tile / segment totals to the next group's (0 unless warp-specialised).
    pub g_stride: u32,
    pub tot_stride: u32,
    /// Bytes of the state tile `st`.
    pub st_bytes: u32,
    /// wgmma consumers: the output staging tile (C x (block_v + 8) elements; 0 bytes otherwise).
    pub os: u32,
    /// Producer-side wgmma scores (`wg_scores`): per producer group, [Q̃; K̃] in tf32 as one 64-row swizzled f32
    /// operand tile (0 bytes otherwise).
    pub ps: u32,
    /// Bytes from one producer group's `ps` region to the next group's.
    pub ps_stride: u32,
    /// TMA variants ([`Features::tma`]): one 8-byte mbarrier a slot (0 otherwise).
    pub mbar: u32,
    /// [`Features::x_per_group`] variants: each producer group's logits tile (`xg_stride` bytes apart); 0 otherwise.
    pub xg: u32,
    pub xg_stride: u32,
    /// Per-value wgmma variants: each producer group's tile of a strong chunk's V' (C x block_v elements, swizzled;
    /// `strong_values`), `vs_stride` bytes apart; 0 otherwise.
    pub vs: u32,
    pub vs_stride: u32,
    /// Cluster key split ([`KernelSpec::cluster`]): the exchange tile that receives the other key slice's f32
    /// partial output of a chunk (one 16-byte vector of each consumer thread's accumulators after another), and
    /// its two mbarriers at `xbar` (XFULL, XEMPTY); 0 otherwise.
    pub xch: u32,
    pub xbar: u32,
    /// [`Features::row_sums`]: the consumers' per-warp row sums of a chunk, f32 [warps][C] (0 otherwise).
    pub rs: u32,
    /// A per-key gate's dq / dk passes ([`Features::row_sums`] per value): each consumer warpgroup's tiles of a chunk's
    /// row-sum weights (q or k: [C][64 + 8] elements) and, in the dk pass, the dq pass's q ⊙ dq ([C][64 + 4] f32,
    /// `rw_e` bytes into the region), filled by 16-byte copies at the top of the chunk (`rows_issue`) and read by the
    /// store; the warpgroups' regions `rw_stride` bytes apart (0 otherwise).
    pub rw: u32,
    pub rw_stride: u32,
    pub rw_e: u32,
    /// Bytes the kernel asks for: the tiles, plus (wgmma) the slack that lets it align its base to 1024 bytes.
    pub total: u32,
}

fn carve(sizes: &[u32]) -> (Vec<u32>, u32) {
    carve_aligned(sizes, 128)
}

/// Consecutive offsets of tiles of `sizes` bytes, each starting on a multiple of `align`; and the bytes taken.
fn carve_aligned(sizes: &[u32], align: u32) -> (Vec<u32>, u32) {
    let mut off = Vec::with_capacity(sizes.len());
    let mut at = 0;
    for s in sizes {
        off.push(at);
        at += s.div_ceil(align) * align;
    }
    (off, at)
}

/// Alignment of the 128-byte-swizzled tiles of wgmma variants (the swizzle pattern repeats every 8 rows of 128 B).
pub const SWIZZLE_ALIGN: u32 = 1024;

impl SmemLayout {
    pub fn of(spec: &KernelSpec) -> Self {
        let e = spec.dtype.size_bytes() as u32;
        let (c, dk, bv) = (spec.chunk, spec.dk, spec.tiles.block_v);
        let (ldk, ldc, ldv) = (dk + 8, c + 8, bv + 8);
        let shape = spec.shape();
        let per_value = shape == GateShape::PerValue;
        let x = match shape {
            GateShape::PerKey => c * ldk * e,
            GateShape::PerHead => c * e,
            GateShape::PerValue => c * ldv * e,
            GateShape::Fixed => 0,
        };
        if spec.tiles.specialised() {
            return Self::specialised(spec, x);
        }
        let (so, stage_bytes) = carve(&[c * ldk * e, c * ldk * e, c * ldv * e, x]);
        let (ro, rest) = carve(&[
            match shape {
                // Γ (padded rows)
                GateShape::PerKey => c * (dk + 12) * 4,
                GateShape::PerValue => c * (bv + 4) * 4,
                _ => c * 4,
            },
            dk * ldv * e,                                // S
            c * ldc * e,                                 // A
            if per_value { c * ldv * e } else { 0 },     // Ṽ (value gate)
            if split_a(spec) { c * ldc * e } else { 0 }, // A_lo
            if shape == GateShape::PerKey {
                2 * dk * 4
            } else {
                0
            }, // Γ_L, exp(Γ_L)
        ]);
        let stages = if 2 * stage_bytes + rest <= MAX_SMEM_BYTES {
            2
        } else {
            1
        };
        let base = stages * stage_bytes;
        SmemLayout {
            stages,
            stage_bytes,
            stage_q: so[0],
            stage_k: so[1],
            stage_v: so[2],
            stage_x: so[3],
            stage_q_lo: 0,
            stage_k_lo: 0,
            g: base + ro[0],
            st: base + ro[1],
            a: base + ro[2],
            vt: base + ro[3],
            a_lo: base + ro[4],
            gl: base + ro[5],
            tot: base + ro[1],
            tot_bytes: dk * ldv * e,
            g_stride: 0,
            tot_stride: 0,
            st_bytes: dk * ldv * e,
            os: 0,
            ps: 0,
            ps_stride: 0,
            xg: 0,
            xg_stride: 0,
            vs: 0,
            vs_stride: 0,
            mbar: 0,
            xch: 0,
            xbar: 0,
            rs: 0,
            rw: 0,
            rw_stride: 0,
            rw_e: 0,
            total: base + rest,
        }
    }

    /// The slot ring of a warp-specialised variant (see the type's doc). `x`: bytes of the logits tile.
    fn specialised(spec: &KernelSpec, x: u32) -> Self {
        let e = spec.dtype.size_bytes() as u32;
        let (c, dk, bv) = (spec.chunk, spec.dk, spec.tiles.block_v);
        let (ldk, ldc, ldv) = (dk + 8, c + 8, bv + 8);
        let per_key = spec.shape() == GateShape::PerKey;
        let per_value = spec.shape() == GateShape::PerValue;
        let wg = spec.tiles.wgmma;
        // wgmma: q, k, v and A in the swizzled layout (unpadded rows; A's rows one 64-element panel), 1024-aligned.
        let (ldk, ldv, ldc) = if wg {
            (dk, bv, c.max(64))
        } else {
            (ldk, ldv, ldc)
        };
        let x = if wg && per_key { c * (dk + 8) * e } else { x }; // the logits / K̃ tile stays padded
        let xg = x_per_group(spec);
        let a_bytes = c * ldc * e;
        let (so, slot_bytes) = carve_aligned(
            &[
                c * ldk * e,                             // q → Q̃
                c * ldk * e,                             // k → K̂
                c * ldv * e,                             // v
                if xg { 0 } else { x }, // logits → K̃ / scratch (x_per_group: below)
                a_bytes,                // A
                if split_a(spec) { a_bytes } else { 0 }, // A_lo
                if per_key {
                    2 * dk * 4
                } else if per_value {
                    2 * bv * 4 + 16
                } else {
                    0
                }, // Γ_L, exp(Γ_L) (per value: then the chunk's mild flag)
                if per_key {
                    0
                } else if per_value {
                    c * (bv + 4) * 4
                } else {
                    c * 4
                }, // Γ (scalar gates; per value C x BV, padded rows)
                if split_operands(spec) && !per_value {
                    c * ldk * e
                } else {
                    0
                }, // Q̃_lo (the dq / dk passes)
                if split_operands(spec) {
                    c * if per_value { ldv } else { ldk } * e
                } else {
                    0
                }, // K̂_lo (per value, a per-key gate's passes: V̂_lo; q and k stay raw)
                if per_value { c * bv * 4 } else { 0 }, // P: a strong chunk's intra-chunk output (per value)
            ],
            if wg { SWIZZLE_ALIGN } else { 128 },
        );
        // Per producer group: its Γ tile (per key) and its segment totals.
        let groups = spec.tiles.producer_groups;
        let group_threads = 32 * spec.tiles.producer_warps / groups;
        let segs = if group_threads >= dk / 2 {
            group_threads / (dk / 2)
        } else {
            1
        };
        let tot_bytes = if per_key && segs > 1 {
            segs * dk * 4
        } else {
            0
        };
        // Producer-side wgmma scores: the 2C x d_k f32 operand tile [Q̃; K̃], per group (on chunks that are not mild
        // the exact path's level operands, two C-row halves). Such a group keeps Γ in registers; its Γ tile
        // (`Tiles::G`, unused) is an alias of these bytes, not bytes of its own.
        let ps_stride = if wg_scores(spec) {
            (2 * c * dk * 4).div_ceil(SWIZZLE_ALIGN) * SWIZZLE_ALIGN
        } else {
            0
        };
        let g_bytes = if per_key {
            (c * (dk + 12) * 4).div_ceil(128) * 128
        } else {
            0
        };
        debug_assert!(
            ps_stride == 0 || g_bytes <= ps_stride,
            "the Γ tile fits in [Q̃; K̃]"
        );
        let g_stride = if ps_stride > 0 { 0 } else { g_bytes };
        let tot_stride = tot_bytes.div_ceil(128) * 128;
        // wgmma: S stays in the accumulators; at 8 + 8 warps the output product reads a bf16 copy of Sᵀ from
        // shared memory (one 64 x d_k swizzled tile per consumer warpgroup) instead of registers.
        let st_bytes = if wg_smem_s(spec) {
            (spec.tiles.warps / 4) * 64 * dk * e
        } else if wg {
            0
        } else {
            dk * (bv + 8) * e
        };
        let os_bytes = if wg { c * (bv + 8) * e } else { 0 };
        let vs_stride = if wg && per_value {
            (c * bv * e).div_ceil(SWIZZLE_ALIGN) * SWIZZLE_ALIGN
        } else {
            0
        };
        // (the passes' row-sum weights: padded rows, so that a thread's (column, token) reads are conflict-free)
        let rw_e = if wg && per_value && spec.pass.row_sums() {
            (c * (64 + 8) * e).div_ceil(128) * 128
        } else {
            0
        };
        let rw_stride = if spec.pass.reverse() && rw_e > 0 {
            rw_e + (c * (64 + 4) * 4).div_ceil(128) * 128
        } else {
            rw_e
        };
        let (ro, rest) = carve_aligned(
            &[
                st_bytes,                          // S (consumers')
                groups * g_stride,                 // Γ (per key, one per producer group)
                groups * tot_stride,               // segment totals (one per producer group)
                os_bytes,                          // output staging (wgmma)
                groups * ps_stride,                // [Q̃; K̃] in tf32 (wg_scores)
                if tma(spec) { 8 * 4 } else { 0 }, // one mbarrier a slot (TMA loads)
                if xg {
                    groups * x.div_ceil(SWIZZLE_ALIGN) * SWIZZLE_ALIGN
                } else {
                    0
                }, // x_per_group: the groups' logits
                if spec.cluster {
                    32 * spec.tiles.warps * (c / 2) * 4
                } else {
                    0
                }, // the cluster key split's exchange tile
                if spec.cluster { 2 * 8 } else { 0 }, // its mbarriers XFULL, XEMPTY
                if wg && spec.pass.row_sums() {
                    spec.tiles.warps * c * 4
                } else {
                    0
                }, // the passes' per-warp row sums
                groups * vs_stride, // per value: the groups' V' tiles (strong chunks)
                (spec.tiles.warps / 4) * rw_stride, // per-key passes: the warpgroups' row-sum weights
            ],
            if wg { SWIZZLE_ALIGN } else { 128 },
        );
        let slack = if wg { SWIZZLE_ALIGN } else { 0 };
        let fits = |n: u32| n * slot_bytes + rest + slack <= MAX_SMEM_BYTES;
        let stages = if two_tma_groups(spec) && fits(4) {
            4
        } else if fits(3) {
            3
        } else {
            2
        };
        let base = stages * slot_bytes;
        SmemLayout {
            stages,
            stage_bytes: slot_bytes,
            stage_q: so[0],
            stage_k: so[1],
            stage_v: so[2],
            stage_x: so[3],
            stage_q_lo: if split_operands(spec) && !per_value {
                so[8]
            } else {
                0
            },
            stage_k_lo: if split_operands(spec) { so[9] } else { 0 },
            g: if ps_stride > 0 {
                base + ro[4]
            } else if per_key {
                base + ro[1]
            } else {
                so[7]
            },
            st: base + ro[0],
            a: so[4],
            vt: if per_value { so[10] } else { 0 },
            a_lo: so[5],
            gl: so[6],
            tot: base + ro[2],
            tot_bytes,
            g_stride: if ps_stride > 0 { ps_stride } else { g_stride },
            tot_stride,
            st_bytes,
            os: if wg { base + ro[3] } else { 0 },
            ps: if ps_stride > 0 { base + ro[4] } else { 0 },
            ps_stride,
            mbar: if tma(spec) { base + ro[5] } else { 0 },
            xg: if xg { base + ro[6] } else { 0 },
            xg_stride: if xg {
                x.div_ceil(SWIZZLE_ALIGN) * SWIZZLE_ALIGN
            } else {
                0
            },
            xch: if spec.cluster { base + ro[7] } else { 0 },
            xbar: if spec.cluster { base + ro[8] } else { 0 },
            rs: if wg && spec.pass.row_sums() {
                base + ro[9]
            } else {
                0
            },
            vs: if vs_stride > 0 { base + ro[10] } else { 0 },
            vs_stride,
            rw: if rw_stride > 0 { base + ro[11] } else { 0 },
            rw_stride,
            rw_e,
            total: base + rest + slack,
        }
    }
}

/// wgmma variants whose consumers read Sᵀ for the output product from shared memory (8 + 8 warps: 128 registers
/// a thread do not hold the state, its bf16 copy and the output accumulators).
fn wg_smem_s(spec: &KernelSpec) -> bool {
    spec.tiles.wgmma
        && spec.tiles.warps + spec.tiles.producer_warps > 12
        && !(wg_scores(spec) && spec.tiles.producer_groups == 2)
}

/// wgmma variants whose producer warpgroup computes the per-key scores on the tensor cores: A = Q̃ K̃ᵀ as ONE tf32
/// product (Q̃, K̃ rounded to tf32 — 10 mantissa bits where the mma.sync path's bf16x3 keeps ~16; the rounding
/// emulator gives 2.26e-3 vs 2.24e-3 for the whole forward) from the producers' f32 tile [Q̃; K̃]: its 2C = 64 rows
/// are the m64 A operand (rows C.. give K̃ K̃ᵀ, discarded), rows C.. the n = C B operand. C = 32 and a producer group
/// of one warpgroup; the operands need the tensor-core dtypes' split (bf16/f16 kernels).
fn wg_scores(spec: &KernelSpec) -> bool {
    let t = &spec.tiles;
    t.wgmma
        && spec.shape() == GateShape::PerKey
        && split_a(spec)
        && spec.chunk == 32
        && t.producer_groups >= 1
        && t.producer_warps / t.producer_groups == 4
}

/// Per-key variants with two producer groups of one warpgroup each (8 + 8 warps, [`Features::wg_scores`]): each group's
/// logits live in its own tile instead of the slot (a group reads them only in its gate stage), which frees the
/// shared memory for a fourth slot. A slot then only ever holds one group's chunks (slot j mod 4, group j mod 2), so
/// a group issues its chunk j + 2 in the middle of chunk j — after the gate (its logits tile is read), once the
/// consumers have freed chunk j − 2's slot — and the load lands while the group finishes chunk j.
fn x_per_group(spec: &KernelSpec) -> bool {
    wg_scores(spec) && two_tma_groups(spec)
}

fn two_tma_groups(spec: &KernelSpec) -> bool {
    spec.tiles.producer_groups == 2 && tma(spec)
}

/// Two producer groups with TMA loads and four slots (a slot then only ever holds one group's chunks): each group
/// issues its chunk j + 2 in the middle of chunk j (per key: after the gate; scalar gates: after the scores), once
/// the consumers are done with chunk j − 2 in that slot, instead of after publishing chunk j — where it then
/// waited for its own load (H200: the Mamba-2 x2g producers' TMA wait was 7 % of all samples;
/// GLA w8p8x2g's 18 % of the producers'). Per-key gates need [`Features::x_per_group`] for the fourth slot to fit.
fn mid_issue(spec: &KernelSpec) -> bool {
    two_tma_groups(spec) && SmemLayout::of(spec).stages == 4
}

/// Warp-specialised wgmma variants whose producers load whole chunks by TMA (`cp.async.bulk.tensor`, one thread, an
/// mbarrier a slot) instead of 16-byte cp.async from every producer thread: boxes of 64 columns × C rows land in the
/// 128-byte-swizzled layout the tiles already have, the per-key logits' tile included (`gate_decays_vec` reads it
/// through the same swizzle). The runtime encodes the tensor maps; partial chunks, masked head dims and strides the
/// driver cannot encode use cp.async. Per-key gates with the producers' wgmma scores ([`Features::wg_scores`]), and the scalar
/// gates' wgmma variants with 4 producer warps (each warp loads its chunk's per-head logits itself, `GLA_REG_LOGIT`):
/// H200, Mamba-2 8×4096×16×128 w8p4x2g 0.232 ms vs 0.293 by cp.async, 8×4096×32×64 w4p4g 0.216 vs 0.319
/// (the one-group w8p4g: 0.249 vs 0.240 — the tuner takes x2g there); 8 + 8 warps spill with it.
fn tma(spec: &KernelSpec) -> bool {
    let t = &spec.tiles;
    let scalar = matches!(spec.shape(), GateShape::PerHead | GateShape::Fixed);
    let scalar_fit = scalar && t.wgmma && t.producer_warps == 4 && spec.chunk == 32;
    (wg_scores(spec) || scalar_fit)
        && t.specialised()
        && !spec.materialize
        && spec.dk.is_multiple_of(64)
        && t.block_v.is_multiple_of(64)
}

/// Whether the dq / dk passes' decayed operands and state copy are hi + lo halves ([`Features::split_operands`]).
fn split_operands(spec: &KernelSpec) -> bool {
    spec.pass.row_sums() && spec.dtype != DType::F32
}

/// Whether the scores A are kept as hi + lo halves (A V = A_hi V + A_lo V): for the tensor-core dtypes and the gates
/// whose A feeds that product (per-key, per-head, fixed). Rounding A once to bf16 alone costs ~1.5e-3 relative
/// RMS at the output (tests/examples/rounding_budget.rs).
fn split_a(spec: &KernelSpec) -> bool {
    spec.dtype != DType::F32 && (spec.shape() != GateShape::PerValue || spec.tiles.wgmma)
}
