//! The CUDA writer: emits one self-contained translation unit per [`KernelSpec`].
//!
//! Layout of the emitted source, top to bottom: a header naming the variant and the equations; the variant's
//! configuration as `constexpr`s and macros; element-type conversions; the gate's device functions (from the
//! macro); the prelude (argument struct, tensor-core tile product); the stages; the entry points.

use crate::plan::{GridAxis, KernelLaunch, LaunchPlan};
use crate::spec::{Generated, KernelSpec};
use gla_core::{DType, GateShape};
use std::fmt::Write;

const PRELUDE: &str = include_str!("cuda/prelude.cuh");
const STAGES: &str = include_str!("cuda/stages.cuh");
const KERNELS: &str = include_str!("cuda/kernels.cuh");

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
    /// TMA variants ([`tma`]): one 8-byte mbarrier a slot (0 otherwise).
    pub mbar: u32,
    /// [`x_per_group`] variants: each producer group's logits tile (`xg_stride` bytes apart); 0 otherwise.
    pub xg: u32,
    pub xg_stride: u32,
    /// Cluster key split ([`KernelSpec::cluster`]): the exchange tile that receives the other key slice's f32
    /// partial output of a chunk (one 16-byte vector of each consumer thread's accumulators after another), and
    /// its two mbarriers at `xbar` (XFULL, XEMPTY); 0 otherwise.
    pub xch: u32,
    pub xbar: u32,
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
        let shape = spec.gate.shape();
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
            match shape {                                                    // Γ (padded rows)
                GateShape::PerKey => c * (dk + 12) * 4,
                GateShape::PerValue => c * (bv + 4) * 4,
                _ => c * 4,
            },
            dk * ldv * e,                                                    // S
            c * ldc * e,                                                     // A
            if per_value { c * ldv * e } else { 0 },                         // Ṽ (value gate)
            if split_a(spec) { c * ldc * e } else { 0 },                     // A_lo
            if shape == GateShape::PerKey { 2 * dk * 4 } else { 0 },         // Γ_L, exp(Γ_L)
        ]);
        let stages = if 2 * stage_bytes + rest <= crate::spec::MAX_SMEM_BYTES { 2 } else { 1 };
        let base = stages * stage_bytes;
        SmemLayout {
            stages,
            stage_bytes,
            stage_q: so[0],
            stage_k: so[1],
            stage_v: so[2],
            stage_x: so[3],
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
            mbar: 0,
            xch: 0,
            xbar: 0,
            total: base + rest,
        }
    }

    /// The slot ring of a warp-specialised variant (see the type's doc). `x`: bytes of the logits tile.
    fn specialised(spec: &KernelSpec, x: u32) -> Self {
        let e = spec.dtype.size_bytes() as u32;
        let (c, dk, bv) = (spec.chunk, spec.dk, spec.tiles.block_v);
        let (ldk, ldc, ldv) = (dk + 8, c + 8, bv + 8);
        let per_key = spec.gate.shape() == GateShape::PerKey;
        let wg = spec.tiles.wgmma;
        // wgmma: q, k, v and A in the swizzled layout (unpadded rows; A's rows one 64-element panel), 1024-aligned.
        let (ldk, ldv, ldc) = if wg { (dk, bv, c.max(64)) } else { (ldk, ldv, ldc) };
        let x = if wg && per_key { c * (dk + 8) * e } else { x };  // the logits / K̃ tile stays padded
        let xg = x_per_group(spec);
        let a_bytes = c * ldc * e;
        let (so, slot_bytes) = carve_aligned(&[
            c * ldk * e,                                        // q → Q̃
            c * ldk * e,                                        // k → K̂
            c * ldv * e,                                        // v
            if xg { 0 } else { x },                             // logits → K̃ / scratch (x_per_group: below)
            a_bytes,                                            // A
            if split_a(spec) { a_bytes } else { 0 },            // A_lo
            if per_key { 2 * dk * 4 } else { 0 },               // Γ_L, exp(Γ_L)
            if per_key { 0 } else { c * 4 },                    // Γ (scalar gates)
        ], if wg { SWIZZLE_ALIGN } else { 128 });
        // Per producer group: its Γ tile (per key) and its segment totals.
        let groups = spec.tiles.producer_groups;
        let group_threads = 32 * spec.tiles.producer_warps / groups;
        let segs = if group_threads >= dk / 2 { group_threads / (dk / 2) } else { 1 };
        let tot_bytes = if per_key && segs > 1 { segs * dk * 4 } else { 0 };
        // Producer-side wgmma scores: the 2C x d_k f32 operand tile [Q̃; K̃], per group. Such a group's Γ tile (the
        // exact path's, non-mild chunks only, which never build [Q̃; K̃]) lives in the same bytes: 18 KB a group
        // less (with the per-group logits tiles, what lets two per-key groups have four slots).
        let ps_stride = if wg_scores(spec) { (2 * c * dk * 4).div_ceil(SWIZZLE_ALIGN) * SWIZZLE_ALIGN } else { 0 };
        let g_bytes = if per_key { (c * (dk + 12) * 4).div_ceil(128) * 128 } else { 0 };
        debug_assert!(ps_stride == 0 || g_bytes <= ps_stride, "the Γ tile fits in [Q̃; K̃]");
        let g_stride = if ps_stride > 0 { 0 } else { g_bytes };
        let tot_stride = tot_bytes.div_ceil(128) * 128;
        // wgmma: S stays in the accumulators; at 8 + 8 warps the output product reads a bf16 copy of Sᵀ from
        // shared memory (one 64 x d_k swizzled tile per consumer warpgroup) instead of registers.
        let st_bytes = if wg_smem_s(spec) { (spec.tiles.warps / 4) * 64 * dk * e } else if wg { 0 } else { dk * (bv + 8) * e };
        let os_bytes = if wg { c * (bv + 8) * e } else { 0 };
        let (ro, rest) = carve_aligned(&[
            st_bytes,                                           // S (consumers')
            groups * g_stride,                                  // Γ (per key, one per producer group)
            groups * tot_stride,                                // segment totals (one per producer group)
            os_bytes,                                           // output staging (wgmma)
            groups * ps_stride,                                 // [Q̃; K̃] in tf32 (wg_scores)
            if tma(spec) { 8 * 4 } else { 0 },                  // one mbarrier a slot (TMA loads)
            if xg { groups * x.div_ceil(SWIZZLE_ALIGN) * SWIZZLE_ALIGN } else { 0 }, // x_per_group: the groups' logits
            if spec.cluster { 32 * spec.tiles.warps * (c / 2) * 4 } else { 0 }, // the cluster key split's exchange tile
            if spec.cluster { 2 * 8 } else { 0 },               // its mbarriers XFULL, XEMPTY
        ], if wg { SWIZZLE_ALIGN } else { 128 });
        let slack = if wg { SWIZZLE_ALIGN } else { 0 };
        let fits = |n: u32| n * slot_bytes + rest + slack <= crate::spec::MAX_SMEM_BYTES;
        let stages = if two_tma_groups(spec) && fits(4) { 4 } else if fits(3) { 3 } else { 2 };
        let base = stages * slot_bytes;
        SmemLayout {
            stages,
            stage_bytes: slot_bytes,
            stage_q: so[0],
            stage_k: so[1],
            stage_v: so[2],
            stage_x: so[3],
            g: if ps_stride > 0 { base + ro[4] } else if per_key { base + ro[1] } else { so[7] },
            st: base + ro[0],
            a: so[4],
            vt: 0,
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
            xg_stride: if xg { x.div_ceil(SWIZZLE_ALIGN) * SWIZZLE_ALIGN } else { 0 },
            xch: if spec.cluster { base + ro[7] } else { 0 },
            xbar: if spec.cluster { base + ro[8] } else { 0 },
            total: base + rest + slack,
        }
    }
}

/// wgmma variants whose consumers read Sᵀ for the output product from shared memory (8 + 8 warps: 128 registers
/// a thread do not hold the state, its bf16 copy and the output accumulators).
pub fn wg_smem_s(spec: &KernelSpec) -> bool {
    spec.tiles.wgmma && spec.tiles.warps + spec.tiles.producer_warps > 12 && !(wg_scores(spec) && spec.tiles.producer_groups == 2)
}

/// wgmma variants whose producer warpgroup computes the per-key scores on the tensor cores: A = Q̃ K̃ᵀ as ONE tf32
/// product (Q̃, K̃ rounded to tf32 — 10 mantissa bits where the mma.sync path's bf16x3 keeps ~16; the rounding
/// emulator gives 2.26e-3 vs 2.24e-3 for the whole forward) from the producers' f32 tile [Q̃; K̃]: its 2C = 64 rows
/// are the m64 A operand (rows C.. give K̃ K̃ᵀ, discarded), rows C.. the n = C B operand. C = 32 and a producer group
/// of one warpgroup; the operands need the tensor-core dtypes' split (bf16/f16 kernels).
pub fn wg_scores(spec: &KernelSpec) -> bool {
    let t = &spec.tiles;
    t.wgmma && spec.gate.shape() == GateShape::PerKey && split_a(spec) && spec.chunk == 32 && t.producer_groups >= 1
        && t.producer_warps / t.producer_groups == 4
}

/// Per-key variants with two producer groups of one warpgroup each (8 + 8 warps, [`wg_scores`]): each group's
/// logits live in its own tile instead of the slot (a group reads them only in its gate stage), which frees the
/// shared memory for a fourth slot. A slot then only ever holds one group's chunks (slot j mod 4, group j mod 2), so
/// a group issues its chunk j + 2 in the middle of chunk j — after the gate (its logits tile is read), once the
/// consumers have freed chunk j − 2's slot — and the load lands while the group finishes chunk j.
pub fn x_per_group(spec: &KernelSpec) -> bool {
    wg_scores(spec) && two_tma_groups(spec)
}

pub(crate) fn two_tma_groups(spec: &KernelSpec) -> bool {
    spec.tiles.producer_groups == 2 && tma(spec)
}

/// Two producer groups with TMA loads and four slots (a slot then only ever holds one group's chunks): each group
/// issues its chunk j + 2 in the middle of chunk j (per key: after the gate; scalar gates: after the scores), once
/// the consumers are done with chunk j − 2 in that slot, instead of after publishing chunk j — where it then
/// waited for its own load (H200, 2026-12-02i: the Mamba-2 x2g producers' TMA wait was 7 % of all samples; j-c1:
/// GLA w8p8x2g's 18 % of the producers'). Per-key gates need [`x_per_group`] for the fourth slot to fit.
pub fn mid_issue(spec: &KernelSpec) -> bool {
    two_tma_groups(spec) && SmemLayout::of(spec).stages == 4
}

/// Warp-specialised wgmma variants whose producers load whole chunks by TMA (`cp.async.bulk.tensor`, one thread, an
/// mbarrier a slot) instead of 16-byte cp.async from every producer thread: boxes of 64 columns × C rows land in the
/// 128-byte-swizzled layout the tiles already have, the per-key logits' tile included (`gate_decays_vec` reads it
/// through the same swizzle). The runtime encodes the tensor maps; partial chunks, masked head dims and strides the
/// driver cannot encode use cp.async. Per-key gates with the producers' wgmma scores ([`wg_scores`]), and the scalar
/// gates' wgmma variants with 4 producer warps (each warp loads its chunk's per-head logits itself, `GLA_REG_LOGIT`):
/// H200, 2026-12-01h, Mamba-2 8×4096×16×128 w8p4x2g 0.232 ms vs 0.293 by cp.async, 8×4096×32×64 w4p4g 0.216 vs 0.319
/// (the one-group w8p4g: 0.249 vs 0.240 — the tuner takes x2g there); 8 + 8 warps spill with it (2026-12-01g).
pub fn tma(spec: &KernelSpec) -> bool {
    let t = &spec.tiles;
    let scalar = matches!(spec.gate.shape(), GateShape::PerHead | GateShape::Fixed);
    let scalar_fit = scalar && t.wgmma && t.producer_warps == 4 && spec.chunk == 32;
    (wg_scores(spec) || scalar_fit) && t.specialised() && !spec.materialize && spec.dk % 64 == 0 && t.block_v % 64 == 0
}

/// Whether the scores A are kept as hi + lo halves (A V = A_hi V + A_lo V): for the tensor-core dtypes and the gates
/// whose A feeds that product (per-key, per-head, fixed). Rounding A once to bf16 alone costs ~1.5e-3 relative
/// RMS at the output (tests/examples/rounding_budget.rs).
pub fn split_a(spec: &KernelSpec) -> bool {
    spec.dtype != DType::F32 && spec.gate.shape() != GateShape::PerValue
}

/// The gate's math functions (`gla_exp`, `gla_log`, `gla_log1p`, `gla_log1p_unit`, `gla_div`, `gla_rcp`; emitted
/// by the macro; `gla_log1p_unit` is log1p of exp(−|u|) ∈ (0, 1] inside log σ and softplus; the log2 form
/// `{id}_log2_acc` uses `gla_lg2`, `gla_log2_1p_unit` and `gla_min_nan`, a min that keeps NaN). f32
/// kernels get the IEEE library functions. bf16/f16 kernels (tolerance 3e-3) get the special-function-unit
/// approximations: relative error ~2^-22 for exp and 1/x, absolute ~2^-22 for log; log1p keeps its relative precision
/// for small arguments with a degree-5 series (|x| < 1/16, truncation < 2e-7 relative), where log(1 + x) would not.
fn gate_math_section(dtype: DType) -> &'static str {
    match dtype {
        DType::F32 => {
            "__device__ __forceinline__ float gla_exp(float x) { return expf(x); }\n\
             __device__ __forceinline__ float gla_log(float x) { return logf(x); }\n\
             __device__ __forceinline__ float gla_log1p(float x) { return log1pf(x); }\n\
             __device__ __forceinline__ float gla_log1p_unit(float x) { return log1pf(x); }\n\
             __device__ __forceinline__ float gla_div(float a, float b) { return a / b; }\n\
             __device__ __forceinline__ float gla_rcp(float x) { return 1.0f / x; }\n\
             __device__ __forceinline__ float gla_lg2(float x) { return log2f(x); }\n\
             __device__ __forceinline__ float gla_log2_1p_unit(float x) { return log1pf(x) * 1.4426950408889634f; }\n\
             __device__ __forceinline__ float gla_min_nan(float a, float b) { float r; asm(\"min.NaN.f32 %0, %1, %2;\" : \"=f\"(r) : \"f\"(a), \"f\"(b)); return r; }\n"
        }
        DType::BF16 | DType::F16 => {
            "__device__ __forceinline__ float gla_exp(float x) { return exp2f_approx(x * 1.4426950408889634f); }\n\
             __device__ __forceinline__ float gla_log(float x) { float r; asm(\"lg2.approx.ftz.f32 %0, %1;\" : \"=f\"(r) : \"f\"(x)); return r * 0.6931471805599453f; }\n\
             __device__ __forceinline__ float gla_log1p(float x) {\n\
             \x20   const float s = x * (1.0f + x * (-0.5f + x * (0.33333334f + x * (-0.25f + x * 0.2f))));\n\
             \x20   return fabsf(x) < 0.0625f ? s : gla_log(1.0f + x);\n\
             }\n\
             // log(1 + x) for x = exp(−|u|) in (0, 1] (log σ, softplus): absolute error ~2^-22, as the f32 cumsum of Γ.\n\
             __device__ __forceinline__ float gla_log1p_unit(float x) { return gla_log(1.0f + x); }\n\
             __device__ __forceinline__ float gla_div(float a, float b) { return __fdividef(a, b); }\n\
             __device__ __forceinline__ float gla_rcp(float x) { float r; asm(\"rcp.approx.ftz.f32 %0, %1;\" : \"=f\"(r) : \"f\"(x)); return r; }\n\
             __device__ __forceinline__ float gla_lg2(float x) { float r; asm(\"lg2.approx.ftz.f32 %0, %1;\" : \"=f\"(r) : \"f\"(x)); return r; }\n\
             // log2(1 + x) for x = exp(−|u|) in (0, 1]: the log σ / softplus term of the gates' log2 form (_log2_acc).\n\
             __device__ __forceinline__ float gla_log2_1p_unit(float x) { return gla_lg2(1.0f + x); }\n\
             __device__ __forceinline__ float gla_min_nan(float a, float b) { float r; asm(\"min.NaN.f32 %0, %1, %2;\" : \"=f\"(r) : \"f\"(a), \"f\"(b)); return r; }\n"
        }
    }
}

fn elem_section(dtype: DType) -> &'static str {
    match dtype {
        DType::BF16 => {
            "typedef unsigned short elem_t;  // bf16 bits\n\
             #define GLA_TENSOR_CORES 1\n#define GLA_MMA_TYPE \"bf16\"\n#define GLA_EXP2(x) exp2f_approx(x)\n\
             __device__ __forceinline__ float exp2f_approx(float x) { float r; asm(\"ex2.approx.ftz.f32 %0, %1;\" : \"=f\"(r) : \"f\"(x)); return r; }\n\
             __device__ __forceinline__ float to_f32(elem_t x) { return __uint_as_float(((unsigned)x) << 16); }\n\
             __device__ __forceinline__ elem_t to_elem(float x) { elem_t r; asm(\"cvt.rn.bf16.f32 %0, %1;\" : \"=h\"(r) : \"f\"(x)); return r; }\n\
             // (lo, hi) -> one 32-bit word, lo in the low half; and back\n\
             __device__ __forceinline__ unsigned pack2(float lo, float hi) { unsigned r; asm(\"cvt.rn.bf16x2.f32 %0, %1, %2;\" : \"=r\"(r) : \"f\"(hi), \"f\"(lo)); return r; }\n\
             __device__ __forceinline__ float2 unpack2(unsigned w) { return make_float2(__uint_as_float(w << 16), __uint_as_float(w & 0xffff0000u)); }\n"
        }
        DType::F16 => {
            "typedef unsigned short elem_t;  // f16 bits\n\
             #define GLA_TENSOR_CORES 1\n#define GLA_MMA_TYPE \"f16\"\n#define GLA_EXP2(x) exp2f_approx(x)\n\
             __device__ __forceinline__ float exp2f_approx(float x) { float r; asm(\"ex2.approx.ftz.f32 %0, %1;\" : \"=f\"(r) : \"f\"(x)); return r; }\n\
             __device__ __forceinline__ float to_f32(elem_t x) { float r; asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(r) : \"h\"(x)); return r; }\n\
             __device__ __forceinline__ elem_t to_elem(float x) { elem_t r; asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(r) : \"f\"(x)); return r; }\n\
             // (lo, hi) -> one 32-bit word, lo in the low half; and back\n\
             __device__ __forceinline__ unsigned pack2(float lo, float hi) { unsigned r; asm(\"cvt.rn.f16x2.f32 %0, %1, %2;\" : \"=r\"(r) : \"f\"(hi), \"f\"(lo)); return r; }\n\
             __device__ __forceinline__ float2 unpack2(unsigned w) { return make_float2(to_f32((elem_t)(w & 0xffffu)), to_f32((elem_t)(w >> 16))); }\n"
        }
        DType::F32 => {
            "typedef float elem_t;  // exact f32: CUDA-core FMAs, no tf32\n\
             #define GLA_TENSOR_CORES 0\n#define GLA_MMA_TYPE \"none\"\n#define GLA_EXP2(x) exp2f(x)\n\
             __device__ __forceinline__ float to_f32(elem_t x) { return x; }\n\
             __device__ __forceinline__ elem_t to_elem(float x) { return x; }\n"
        }
    }
}

/// Largest decay span −min_d Γ_L (log2 units) of a chunk for which the per-key kernels use the factorised
/// intra-chunk product (Q ⊙ 2^Γ)(K ⊙ 2^−Γ)^T: its operands then stay within 2^±SPAN_MAX of q and k. bf16 and f32
/// share f32's exponent range; f16 (normal range 2^−14..2^15) gets a small span so K̃ cannot overflow and Q̃
/// keeps its precision.
pub fn span_max(dtype: DType) -> f32 {
    match dtype {
        DType::F16 => 8.0,
        DType::BF16 | DType::F32 => 32.0,
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
pub fn warp_tiles(spec: &KernelSpec) -> [(u32, u32); 3] {
    let (c, dk, bv, w) = (spec.chunk, spec.dk, spec.tiles.block_v, spec.tiles.warps);
    // The scores are the producers' product when the variant is warp-specialised.
    let aw = if spec.tiles.specialised() { spec.tiles.producer_warps / spec.tiles.producer_groups } else { w };
    [
        warp_tile(c, bv, w, &[(2, 4), (1, 4), (2, 2), (1, 2)]),
        warp_tile(dk, bv, w, &[(4, 4), (2, 4), (4, 2), (2, 2), (1, 4), (1, 2)]),
        warp_tile(c, c, aw, &[(1, 4), (2, 2), (1, 2)]),
    ]
}

/// Emit the forward kernels of `spec` (already validated).
pub(crate) fn write_forward(spec: &KernelSpec) -> Generated {
    let gate = spec.gate;
    let lay = SmemLayout::of(spec);
    let nt = spec.tiles.warps * 32;
    let mut src = String::with_capacity(32 * 1024);
    let w = &mut src;
    // `write!` into a String cannot fail.
    let _ = writeln!(w, "// Generated by gla-codegen {} — do not edit.", env!("CARGO_PKG_VERSION"));
    let _ = writeln!(w, "// variant: {}", spec.id());
    let _ = writeln!(w, "// gate `{}` ({}): log α = {}", gate.name(), gate.shape(), gate.expr());
    let _ = writeln!(w, "// gate content hash: {:016x}", gate.content_hash());
    let _ = writeln!(w, "// Chunkwise GLA forward (Yang et al. 2024, §2.2, §4, Alg. 1 {}):", if spec.materialize { "left" } else { "right" });
    let _ = writeln!(w, "//   S_t = diag(α_t) S_(t-1) + k_t^T v_t,   o_t = scale · q_t S_t");
    let _ = writeln!(w, "//   O_[n] = (Q ⊙ exp(Γ)) S_[n] + ((Q K^T) ⊙ D) V,  S_[n+1] = diag(exp(Γ_L)) S_[n] + (K ⊙ exp(Γ_L − Γ))^T V");
    let _ = writeln!(w);
    let _ = writeln!(w, "// ---- configuration ----");
    let _ = writeln!(w, "constexpr int C = {};        // chunk size", spec.chunk);
    let _ = writeln!(w, "constexpr int SC = {};       // sub-chunk size (§4.3)", spec.sub_chunk);
    let _ = writeln!(w, "constexpr int NSUB = C / SC;");
    let _ = writeln!(w, "constexpr int DK = {};       // specialised d_k (smaller d_k is masked)", spec.dk);
    let _ = writeln!(w, "constexpr int BV = {};       // value tile of one CTA", spec.tiles.block_v);
    let _ = writeln!(w, "constexpr int NW = {};       // warps holding the state S (the whole CTA unless warp-specialised)", spec.tiles.warps);
    let _ = writeln!(w, "constexpr int NT = {};", nt);
    let pw = spec.tiles.producer_warps;
    let _ = writeln!(w, "constexpr int PW = {pw};       // producer warps of the warp-specialised kernel (0: none)");
    let _ = writeln!(w, "constexpr int PT = 32 * PW;");
    let _ = writeln!(
        w,
        "constexpr int CTAS_PER_SM = {};  // CTAs resident on one SM (__launch_bounds__ of the warp-specialised kernels)",
        spec.tiles.ctas_per_sm
    );
    let _ = writeln!(
        w,
        "#define KSPLIT {}  // key slices a head runs as (grid heads = KSPLIT · H; > 1: f32 partial outputs, gla_fwd_ksum)",
        spec.key_split
    );
    let _ = writeln!(
        w,
        "#define KS_CLUSTER {}  // key split 2 as a 2-CTA cluster: the slices add each other's partial outputs over DSMEM (no gla_fwd_ksum)",
        spec.cluster as u32
    );
    let _ = writeln!(
        w,
        "constexpr int PG = {}, PGT = PT / (PG > 0 ? PG : 1);  // producer groups (alternate chunks), threads of one",
        spec.tiles.producer_groups
    );
    let _ = writeln!(w, "#define GLA_WS {}", spec.tiles.specialised() as u32);
    let _ = writeln!(
        w,
        "#define GLA_WGMMA {}    // consumers on wgmma.mma_async, q / k / v / A in the 128-byte-swizzled layout",
        spec.tiles.wgmma as u32
    );
    let _ = writeln!(w, "#define GLA_WG_SMEM_S {}    // wgmma: Sᵀ reaches the output product through shared memory (8 + 8 warps)", wg_smem_s(spec) as u32);
    let _ = writeln!(w, "#define GLA_WG_SCORES {}    // per key, C = 32: the producer warpgroup computes the scores as one tf32 wgmma group", wg_scores(spec) as u32);
    let _ = writeln!(w, "#define GLA_MID_ISSUE {}    // two producer groups, TMA: four slots, a group loads its next chunk midway through this one", mid_issue(spec) as u32);
    let _ = writeln!(w, "#define GLA_X_PER_GROUP {}    // per key, two producer warpgroups: the logits tiles per group (the fourth slot fits)", x_per_group(spec) as u32);
    let _ = writeln!(w, "#define GLA_TMA {}    // whole chunks reach the slots by TMA (one producer thread, an mbarrier a slot)", tma(spec) as u32);
    let [(owm, own), (swm, swn), (awm, awn)] = warp_tiles(spec);
    let _ = writeln!(
        w,
        "constexpr int O_WM = {owm}, O_WN = {own}, S_WM = {swm}, S_WN = {swn}, A_WM = {awm}, A_WN = {awn};  // warp tiles (16x8 mma tiles) of O, S, A"
    );
    let _ = writeln!(w, "constexpr int LDK = DK + 8;  // padded row lengths (bank-conflict-free fragment loads)");
    let _ = writeln!(w, "constexpr int LDC = C + 8;");
    let _ = writeln!(w, "constexpr int NPARAM = {};", gate.params().len());
    let _ = writeln!(
        w,
        "constexpr float SPAN_MAX = {:.1}f;  // largest chunk decay span (log2 units) taking the factorised intra-chunk form",
        span_max(spec.dtype)
    );
    let _ = writeln!(w, "#define GATE_PER_KEY 1\n#define GATE_PER_HEAD 2\n#define GATE_FIXED 3\n#define GATE_PER_VALUE 4");
    let kg = match gate.shape() {
        GateShape::PerKey => "GATE_PER_KEY",
        GateShape::PerHead => "GATE_PER_HEAD",
        GateShape::Fixed => "GATE_FIXED",
        GateShape::PerValue => "GATE_PER_VALUE",
    };
    let _ = writeln!(w, "#define KEY_GATE {kg}");
    let _ = writeln!(w, "#define SPLIT_A {}      // scores kept as hi + lo halves (A V on tensor cores to ~f32 precision)", split_a(spec) as u32);
    let _ = writeln!(w, "#define GLA_FUSED {}", if spec.materialize { 0 } else { 1 });
    let _ = writeln!(
        w,
        "constexpr int STAGES = {};   // {}",
        lay.stages,
        if spec.tiles.specialised() {
            "chunk slots in the producer -> consumer ring"
        } else {
            "input stage buffers (2: chunk n+1 loads while chunk n computes)"
        }
    );
    let _ = writeln!(
        w,
        "constexpr unsigned STAGE_BYTES = {}, STAGE_Q = {}, STAGE_K = {}, STAGE_V = {}, STAGE_X = {};",
        lay.stage_bytes, lay.stage_q, lay.stage_k, lay.stage_v, lay.stage_x
    );
    let _ = writeln!(
        w,
        "constexpr unsigned OFF_G = {}, OFF_ST = {}, OFF_A = {}, OFF_VT = {}, OFF_ALO = {}, OFF_GL = {};  // {} B of shared memory",
        lay.g, lay.st, lay.a, lay.vt, lay.a_lo, lay.gl, lay.total
    );
    let _ = writeln!(
        w,
        "constexpr unsigned OFF_TOT = {}, TOT_BYTES = {}, ST_BYTES = {}, OFF_OS = {};  // gate_cumsum's segment totals (per producer group), the state tile, the output staging tile",
        lay.tot, lay.tot_bytes, lay.st_bytes, lay.os
    );
    let _ = writeln!(
        w,
        "constexpr int COMBINE_PER = {COMBINE_PER}, COMBINE_ROWS = {}, COMBINE_BLOCKS = {};  // the segment combine's state-row blocks (grid y = H · blocks)",
        combine_rows(spec),
        combine_blocks(spec)
    );
    let _ = writeln!(
        w,
        "constexpr unsigned G_STRIDE = {}, TOT_STRIDE = {};  // bytes between the producer groups' Γ tiles and totals",
        lay.g_stride, lay.tot_stride
    );
    let _ = writeln!(
        w,
        "constexpr unsigned OFF_PS = {}, PS_STRIDE = {};  // wg_scores: the producer groups' tf32 operand tiles [Q̃; K̃]",
        lay.ps, lay.ps_stride
    );
    let _ = writeln!(w, "constexpr unsigned OFF_MBAR = {};  // TMA: the slots' mbarriers", lay.mbar);
    let _ = writeln!(w, "constexpr unsigned OFF_XCH = {}, OFF_XBAR = {};  // KS_CLUSTER: the exchange tile and its mbarriers", lay.xch, lay.xbar);
    let _ = writeln!(
        w,
        "constexpr unsigned OFF_XG = {}, XG_STRIDE = {};  // GLA_X_PER_GROUP: the producer groups' logits tiles",
        lay.xg, lay.xg_stride
    );
    let _ = writeln!(w);
    let _ = writeln!(w, "// ---- element type ({}) ----", spec.dtype);
    w.push_str(elem_section(spec.dtype));
    w.push_str(gate_math_section(spec.dtype));
    let _ = writeln!(w);
    let _ = writeln!(w, "// ---- gate `{}` (generated by #[gated_linear_attention]) ----", gate.name());
    w.push_str(gate.cuda_source());
    let _ = writeln!(w);
    let _ = writeln!(
        w,
        "__device__ __forceinline__ float gate_log_alpha(float x, const float* p) {{ return {}(x, p); }}",
        gate.cuda_ident()
    );
    // Γ's running sum in log2 units: acc + log2(e) · log α(x) (<= acc: log α <= 0 is clamped, fmaf rounds monotonically)
    if gate.cuda_log2_acc() {
        let _ = writeln!(
            w,
            "__device__ __forceinline__ float gate_log2_acc(float x, const float* p, float acc) {{ return {}_log2_acc(x, p, acc); }}",
            gate.cuda_ident()
        );
    } else {
        let _ = writeln!(
            w,
            "__device__ __forceinline__ float gate_log2_acc(float x, const float* p, float acc) {{ return fmaf(gate_log_alpha(x, p), 1.4426950408889634f, acc); }}"
        );
    }
    let _ = writeln!(w);
    w.push_str(PRELUDE);
    let _ = writeln!(w);
    if spec.tiles.wgmma {
        write_wgmma(w, spec);
        let _ = writeln!(w);
    }
    w.push_str(STAGES);
    let _ = writeln!(w);
    w.push_str(KERNELS);

    let bv = spec.tiles.block_v;
    let plan = if spec.materialize {
        LaunchPlan {
            kernels: vec![
                KernelLaunch {
                    name: "gla_fwd_states".into(),
                    grid: [GridAxis::VTiles { block_v: bv }, GridAxis::Heads, GridAxis::Sequences],
                    block: nt,
                    smem_bytes: lay.total,
                },
                KernelLaunch {
                    name: "gla_fwd_output".into(),
                    grid: [GridAxis::Chunks { chunk: spec.chunk }, GridAxis::Heads, GridAxis::VTiles { block_v: bv }],
                    block: nt,
                    smem_bytes: lay.total,
                },
            ],
            needs_state_buffer: true,
            segmented: false,
        }
    } else {
        // Alg. 1 (right), fused; narrow problems add the two-level scan's segment-state and combine passes
        // (skipped when P = 1: their grids are then empty).
        LaunchPlan {
            kernels: vec![
                KernelLaunch {
                    name: if spec.tiles.specialised() { "gla_fwd_ws_states" } else { "gla_fwd_seg_states" }.into(),
                    grid: [GridAxis::VTiles { block_v: bv }, GridAxis::Heads, GridAxis::SplitSeqSegments],
                    block: if spec.tiles.specialised() { spec.tiles.threads() } else { nt },
                    smem_bytes: lay.total,
                },
                KernelLaunch {
                    name: "gla_fwd_seg_combine".into(),
                    grid: [GridAxis::VTiles { block_v: bv }, GridAxis::HeadBlocks { blocks: combine_blocks(spec) }, GridAxis::SplitSequences],
                    block: nt,
                    smem_bytes: 0,
                },
                KernelLaunch {
                    name: if spec.tiles.specialised() { "gla_fwd_ws" } else { "gla_fwd_fused" }.into(),
                    grid: [GridAxis::VTiles { block_v: bv }, GridAxis::Heads, GridAxis::SeqSegments],
                    block: spec.tiles.threads(),
                    smem_bytes: lay.total,
                },
            ],
            needs_state_buffer: false,
            segmented: true,
        }
    };
    let mut plan = plan;
    if spec.key_split > 1 && !spec.cluster {
        plan.kernels.push(KernelLaunch {
            name: "gla_fwd_ksum".into(),
            grid: [GridAxis::KeySplitSum { key_split: spec.key_split, per_block: KSUM_PER_BLOCK }, GridAxis::One, GridAxis::One],
            block: 256,
            smem_bytes: 0,
        });
    }
    Generated { source: src, plan }
}

/// Outputs one CTA of `gla_fwd_ksum` adds up (256 threads, 4 each).
const KSUM_PER_BLOCK: u32 = 1024;

/// State elements a thread of the segment combine (`gla_fwd_seg_combine`) carries.
const COMBINE_PER: u32 = 4;
/// State rows of one combine CTA: `COMBINE_PER · NT / block_v`, NT the state warps' threads.
fn combine_rows(spec: &KernelSpec) -> u32 {
    (COMBINE_PER * spec.tiles.warps * 32 / spec.tiles.block_v).max(1)
}
/// Combine CTAs per head (the `HeadBlocks` grid axis and the kernel's `COMBINE_BLOCKS` are this one number).
fn combine_blocks(spec: &KernelSpec) -> u32 {
    spec.dk.div_ceil(combine_rows(spec))
}

/// The three warpgroup products of the wgmma consumers, one PTX instruction each (f32 accumulators, operands in
/// shared memory through matrix descriptors, or A from registers; `tnsp` 1 = MN-major in shared memory):
///   wg_out_s: Oᵀ (64 x C) += Sᵀ (registers, bf16/f16) · Q̃ᵀ (K-major)          — m64nCk16
///   wg_out_v: Oᵀ (64 x C) += Vᵀ (MN-major) · Aᵀ (K-major)                       — m64nCk16
///   wg_state: Sᵀ (64 x d_k) += Vᵀ (MN-major) · K̂ (N-major)                      — m64n{d_k}k16
fn write_wgmma(w: &mut String, spec: &KernelSpec) {
    let ty = match spec.dtype {
        DType::F16 => "f16",
        _ => "bf16",
    };
    let _ = writeln!(w, "// ---- warpgroup tensor-core products (wgmma.mma_async, sm_90a) ----");
    let acc = |n: u32| (0..n / 2).map(|i| format!("%{i}")).collect::<Vec<_>>().join(",");
    let outs = |n: u32| (0..n / 2).map(|i| format!("\"+f\"(d[{i}])")).collect::<Vec<_>>().join(", ");
    // One wrapper `name(d, a | da, db)`: D (m64 x n, f32) += A B for instruction shape/types `op` (e.g.
    // "m64n32k16.f32.bf16.bf16"); A from registers (a_regs) or a descriptor; `imm` the transpose immediates
    // (", tnsp_b" with A in registers, ", tnsp_a, tnsp_b" otherwise; none for tf32, whose operands are K-major only).
    let emit = |w: &mut String, name: &str, n: u32, a_regs: bool, op: &str, imm: &str, doc: &str| {
        let m = n / 2;
        let _ = writeln!(w, "// {doc}");
        if a_regs {
            let _ = writeln!(w, "__device__ __forceinline__ void {name}(float (&d)[{m}], const unsigned (&a)[4], unsigned long long db) {{");
            let _ = writeln!(
                w,
                "    asm volatile(\"{{ .reg .pred p; setp.ne.b32 p, %{}, 0; wgmma.mma_async.sync.aligned.{op} {{{}}}, {{%{},%{},%{},%{}}}, %{}, p, 1, 1{imm}; }}\\n\"",
                m + 5,
                acc(n),
                m,
                m + 1,
                m + 2,
                m + 3,
                m + 4
            );
            let _ = writeln!(w, "                 : {}", outs(n));
            let _ = writeln!(w, "                 : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"l\"(db), \"r\"(1));");
        } else {
            let _ = writeln!(w, "__device__ __forceinline__ void {name}(float (&d)[{m}], unsigned long long da, unsigned long long db) {{");
            let _ = writeln!(
                w,
                "    asm volatile(\"{{ .reg .pred p; setp.ne.b32 p, %{}, 0; wgmma.mma_async.sync.aligned.{op} {{{}}}, %{}, %{}, p, 1, 1{imm}; }}\\n\"",
                m + 2,
                acc(n),
                m,
                m + 1
            );
            let _ = writeln!(w, "                 : {}", outs(n));
            let _ = writeln!(w, "                 : \"l\"(da), \"l\"(db), \"r\"(1));");
        }
        let _ = writeln!(w, "}}");
    };
    let (c, dk) = (spec.chunk, spec.dk);
    let op = |n: u32| format!("m64n{n}k16.f32.{ty}.{ty}");
    emit(w, "wg_out_s", c, true, &op(c), ", 0", "Oᵀ += Sᵀ Q̃ᵀ: A = Sᵀ in registers, B = Q̃ [C][d_k] K-major");
    emit(w, "wg_out_t", c, false, &op(c), ", 0, 0", "Oᵀ += Sᵀ Q̃ᵀ: A = Sᵀ [64][d_k] K-major in shared memory, B = Q̃ [C][d_k] K-major");
    emit(w, "wg_out_v", c, false, &op(c), ", 1, 0", "Oᵀ += Vᵀ Aᵀ: A = V [C][64] M-major, B = A [C][C] K-major");
    emit(w, "wg_state", dk, false, &op(dk), ", 1, 1", "Sᵀ += Vᵀ K̂: A = V [C][64] M-major, B = K̂ [C][d_k] N-major");
    if wg_scores(spec) {
        let doc = "D += [Q̃; K̃] K̃ᵀ (producers, tf32): A = [Q̃; K̃] [2C][d_k] f32 K-major, B = K̃ [C][d_k] f32 K-major";
        emit(w, "wg_scores_mma", c, false, &format!("m64n{c}k8.f32.tf32.tf32"), "", doc);
    }
}
