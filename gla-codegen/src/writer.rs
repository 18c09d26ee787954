//! The CUDA writer: emits one self-contained translation unit per [`KernelSpec`].
//!
//! Layout of the emitted source, top to bottom: a header naming the variant and the equations; the variant's
//! configuration as `constexpr`s and macros; element-type conversions; the gate's device functions (from the
//! macro); the prelude (argument struct, tensor-core tile product); the stages; the entry points.

use crate::features::{Family, Features, Issue, COMBINE_PER};
use crate::plan::{GridAxis, KernelLaunch, LaunchPlan};
use crate::spec::KernelSpec;
use gla_core::{DType, Gate, GateShape};
use std::fmt::Write;

pub(crate) const PRELUDE: &str = include_str!("cuda/prelude.cuh");
const STAGES: &str = include_str!("cuda/stages.cuh");
/// The entry points, one template per kernel family (`Features::family`), each a short tile program over the stages.
mod family {
    pub const COMMON: &str = include_str!("cuda/kernels_common.cuh");
    pub const SCAN: &str = include_str!("cuda/scan.cuh");
    pub const FUSED: &str = include_str!("cuda/fused.cuh");
    pub const WS_RING: &str = include_str!("cuda/ws_ring.cuh");
    pub const WS_WGMMA: &str = include_str!("cuda/ws_wgmma.cuh");
    pub const WS: &str = include_str!("cuda/ws.cuh");
    pub const COMBINE: &str = include_str!("cuda/combine.cuh");
    pub const MATERIALIZED: &str = include_str!("cuda/materialized.cuh");
    pub const KSUM: &str = include_str!("cuda/ksum.cuh");
}

/// The templates of `f`'s kernel family, in the order they are emitted.
pub fn family_templates(f: &Features) -> Vec<&'static str> {
    use family::*;
    let mut t = vec![COMMON];
    match f.family {
        Family::Materialized => t.push(MATERIALIZED),
        Family::Fused => t.extend([SCAN, FUSED, COMBINE]),
        Family::WarpSpecialised => t.extend([SCAN, WS_RING, WS, COMBINE]),
        // (the backward's passes are never segmented: no combine)
        Family::WarpSpecialisedWgmma if !f.segmented => t.extend([SCAN, WS_RING, WS_WGMMA, WS]),
        Family::WarpSpecialisedWgmma => t.extend([SCAN, WS_RING, WS_WGMMA, WS, COMBINE]),
    }
    if f.key_split > 1 && !f.cluster {
        t.push(KSUM);
    }
    t
}

/// Source and launch plan of one variant.
#[derive(Clone, Debug)]
pub struct Generated {
    pub source: String,
    pub plan: LaunchPlan,
}

/// The gate-shape constants (`GATE_PER_KEY` .. `GATE_PER_VALUE`) and `KEY_GATE`, the shape of this gate.
pub(crate) fn write_gate_shape(w: &mut String, shape: GateShape) {
    let _ = writeln!(w, "#define GATE_PER_KEY 1\n#define GATE_PER_HEAD 2\n#define GATE_FIXED 3\n#define GATE_PER_VALUE 4");
    let kg = match shape {
        GateShape::PerKey => "GATE_PER_KEY",
        GateShape::PerHead => "GATE_PER_HEAD",
        GateShape::Fixed => "GATE_FIXED",
        GateShape::PerValue => "GATE_PER_VALUE",
    };
    let _ = writeln!(w, "#define KEY_GATE {kg}");
}

/// The gate's math functions (`gla_exp`, `gla_log`, `gla_log1p`, `gla_log1p_unit`, `gla_div`, `gla_rcp`; emitted
/// by the macro; `gla_log1p_unit` is log1p of exp(−|u|) ∈ (0, 1] inside log σ and softplus; the log2 form
/// `{id}_log2_acc` uses `gla_lg2`, `gla_log2_1p_unit` and `gla_min_nan`, a min that keeps NaN). f32
/// kernels get the IEEE library functions. bf16/f16 kernels (tolerance 3e-3) get the special-function-unit
/// approximations: relative error ~2^-22 for exp and 1/x, absolute ~2^-22 for log; log1p keeps its relative precision
/// for small arguments with a degree-5 series (|x| < 1/16, truncation < 2e-7 relative), where log(1 + x) would not.
pub(crate) fn gate_math_section(dtype: DType) -> &'static str {
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
             __device__ __forceinline__ float gla_min_nan(float a, float b) { float r; asm(\"min.NaN.f32 %0, %1, %2;\" : \"=f\"(r) : \"f\"(a), \"f\"(b)); return r; }\n\
             __device__ __forceinline__ float gla_max_nan(float a, float b) { float r; asm(\"max.NaN.f32 %0, %1, %2;\" : \"=f\"(r) : \"f\"(a), \"f\"(b)); return r; }\n"
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
             __device__ __forceinline__ float gla_min_nan(float a, float b) { float r; asm(\"min.NaN.f32 %0, %1, %2;\" : \"=f\"(r) : \"f\"(a), \"f\"(b)); return r; }\n\
             __device__ __forceinline__ float gla_max_nan(float a, float b) { float r; asm(\"max.NaN.f32 %0, %1, %2;\" : \"=f\"(r) : \"f\"(a), \"f\"(b)); return r; }\n"
        }
    }
}

pub(crate) fn elem_section(dtype: DType) -> &'static str {
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
/// intra-chunk product (Q ⊙ 2^Γ)(K ⊙ 2^−Γ)^T: its operands then stay within 2^±SPAN_MAX of q and k. bf16, tf32 and
/// f32 share f32's exponent range (2^−126..2^128) and keep their relative precision at any scale, so 64 leaves
/// K̃ finite for |k| < 2^63 and Q̃ normal for |q| > 2^−62 (a smaller q's terms are below f32's resolution of the
/// sum anyway); it puts the GLA gate without its normaliser (log σ(x), ~37 per 32-token chunk), fla's benchmark
/// gate and HGRN-2 on the factorised path, which at 32 took the exact one. f16 (normal range 2^−14..2^15) gets a
/// small span so K̃ cannot overflow and Q̃ keeps its precision.
pub fn span_max(dtype: DType) -> f32 {
    match dtype {
        DType::F16 => 8.0,
        DType::BF16 | DType::F32 => 64.0,
    }
}

/// Every token's log2 α is floored here in the kernels: [`gla_core::LOG2_ALPHA_FLOOR`].
pub use gla_core::LOG2_ALPHA_FLOOR;

/// The exact path of the wgmma producers (`exact_scores_vec`) factorises a block of rows around its midpoint: a
/// query factor 2^(Γ_i − R), a key factor 2^(R − Γ_j), R = (Γ_first + Γ_last) / 2, so with the block's decay span at
/// most BLOCK_SPAN every factor lies within 2^±88, on tf32 operands (f32's exponent range) at every dtype: exact for
/// |q|, |k| within 2^±38 (K̃ finite, a row's Q̃ normal; f16 inputs always are). 176 rather than the mild path's 128
/// (2^±64): a block's span is a sum of decays, so the larger bound halves the blocks — RWKV-6 at logits ~ N(0, 1)
/// takes one round on ~98 % of its chunks (60 % at 128: the rest two to four), 10·log σ(x) three instead of four
/// (a sampled model of the vote, session ab: benches/NOTES.md).
pub const BLOCK_SPAN: f32 = 176.0;

/// A level of the exact path's hierarchy whose every decay factor is below 2^−NEGLIGIBLE in every key column (each
/// boundary step γ_m < −NEGLIGIBLE, log2 units) is skipped: its scores are written as 0, an absolute error below
/// 2^−64 · Σ_d |q_id k_jd| per score — far under f32's resolution of the terms that remain (the diagonal's).
pub const NEGLIGIBLE: f32 = 64.0;

/// `gate_floored(x, p)` (log α below the floor, from the gate in namespace `fast`) and `gate_grads(x, p, dp)`: d log α
/// / dx returned and d log α / d params into dp (from the gate in namespace `ieee`), both 0 below the floor — the gate
/// evaluated once for the check, the derivatives always, then selected (no branch: a caller's elements interleave).
/// The backward's kernels and a per-key gate's dk pass (its store's d logits).
pub(crate) fn write_gate_grads(w: &mut String, gate: &dyn Gate, fast: &str, ieee: &str) {
    let id = gate.cuda_ident();
    let _ = writeln!(w, "__device__ __forceinline__ bool gate_floored(float x, const float* p) {{ return {fast}{id}(x, p) < LOG_ALPHA_FLOOR; }}");
    let _ = writeln!(
        w,
        "__device__ __forceinline__ float gate_grads(float x, const float* p, float* dp) {{ const bool fl = gate_floored(x, p); {ieee}{id}_dp(x, p, dp); for (int i = 0; i < {np}; ++i) dp[i] = fl ? 0.f : dp[i]; const float dx = {ieee}{id}_dx(x, p); return fl ? 0.f : dx; }}",
        np = gate.params().len()
    );
}

/// `LOG2_ALPHA_FLOOR` and `LOG_ALPHA_FLOOR` (nats) as kernel constants, for the gate wrappers.
pub(crate) fn write_log_alpha_floor(w: &mut String) {
    let _ = writeln!(
        w,
        "constexpr float LOG2_ALPHA_FLOOR = {:.1}f, LOG_ALPHA_FLOOR = {:.6}f;  // every token's log α floored (writer.rs)",
        LOG2_ALPHA_FLOOR,
        LOG2_ALPHA_FLOOR * std::f32::consts::LN_2
    );
}

/// Emit the forward kernels of `spec` (already validated).
pub(crate) fn write_forward(spec: &KernelSpec) -> Generated {
    let gate = spec.gate;
    let f = Features::of(spec);
    let lay = f.smem;
    let nt = spec.tiles.warps * 32;
    let mut src = String::with_capacity(32 * 1024);
    let w = &mut src;
    // `write!` into a String cannot fail.
    let _ = writeln!(
        w,
        "// Generated by gla-codegen {} — do not edit.",
        env!("CARGO_PKG_VERSION")
    );
    let _ = writeln!(w, "// variant: {}", spec.id());
    let _ = writeln!(
        w,
        "// gate `{}` ({}): log α = {}",
        gate.name(),
        gate.shape(),
        gate.expr()
    );
    let _ = writeln!(w, "// gate content hash: {:016x}", gate.content_hash());
    let _ = writeln!(
        w,
        "// Chunkwise GLA forward (Yang et al. 2024, §2.2, §4, Alg. 1 {}):",
        if spec.materialize { "left" } else { "right" }
    );
    let _ = writeln!(
        w,
        "//   S_t = diag(α_t) S_(t-1) + k_t^T v_t,   o_t = scale · q_t S_t"
    );
    let _ = writeln!(w, "//   O_[n] = (Q ⊙ exp(Γ)) S_[n] + ((Q K^T) ⊙ D) V,  S_[n+1] = diag(exp(Γ_L)) S_[n] + (K ⊙ exp(Γ_L − Γ))^T V");
    let _ = writeln!(w);
    let _ = writeln!(w, "// ---- configuration ----");
    let _ = writeln!(w, "constexpr int C = {};        // chunk size", spec.chunk);
    let _ = writeln!(
        w,
        "constexpr int SC = {};       // sub-chunk size (§4.3)",
        spec.sub_chunk
    );
    let _ = writeln!(w, "constexpr int NSUB = C / SC;");
    let _ = writeln!(
        w,
        "constexpr int DK = {};       // specialised d_k (smaller d_k is masked)",
        spec.dk
    );
    let _ = writeln!(
        w,
        "constexpr int BV = {};       // value tile of one CTA",
        spec.tiles.block_v
    );
    let _ = writeln!(w, "constexpr int NW = {};       // warps holding the state S (the whole CTA unless warp-specialised)", spec.tiles.warps);
    let _ = writeln!(w, "constexpr int NT = {};", nt);
    let pw = spec.tiles.producer_warps;
    let _ = writeln!(
        w,
        "constexpr int PW = {pw};       // producer warps of the warp-specialised kernel (0: none)"
    );
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
    let _ = writeln!(
        w,
        "#define GLA_WGMMA {}    // consumers on wgmma.mma_async, q / k / v / A in the 128-byte-swizzled layout",
        spec.tiles.wgmma as u32
    );
    let _ = writeln!(w, "#define GLA_WG_SMEM_S {}    // wgmma: Sᵀ reaches the output product through shared memory (8 + 8 warps)", f.wg_smem_s as u32);
    let _ = writeln!(w, "#define GLA_WG_SCORES {}    // per key, C = 32: the producer warpgroup computes the scores as one tf32 wgmma group", f.wg_scores as u32);
    let _ = writeln!(w, "#define GLA_MID_ISSUE {}    // two producer groups, TMA: four slots, a group loads its next chunk midway through this one", f.mid_issue() as u32);
    let _ = writeln!(w, "#define GLA_X_PER_GROUP {}    // per key, two producer warpgroups: the logits tiles per group (the fourth slot fits)", f.x_per_group as u32);
    let _ = writeln!(w, "#define GLA_TMA {}    // whole chunks reach the slots by TMA (one producer thread, an mbarrier a slot)", f.tma as u32);
    let b = |x: bool| x as u32;
    let _ = writeln!(w, "enum IssuePoint {{ ISSUE_NONE, ISSUE_TOP, ISSUE_AFTER_GATE, ISSUE_MID, ISSUE_AFTER_PUBLISH }};");
    let _ = writeln!(
        w,
        "constexpr IssuePoint ISSUE = {}, STATES_ISSUE = {};  // where a producer group issues its next chunk (fused pass, segment-state pass)",
        f.issue.cuda_name(),
        f.states_issue.cuda_name()
    );
    let _ = writeln!(w, "#define GLA_ISSUE_AFTER_GATE {}    // per key, wg scores, mid issue: a group issues its next chunk right after its gate read the logits", b(f.issue == Issue::AfterGate));
    let _ = writeln!(w, "#define GLA_REG_LOGIT {}    // TMA, per-head gate: every producer warp loads the chunk's logits itself (lane l row l)", b(f.reg_logit));
    let _ = writeln!(w, "#define GLA_LOGITS_SWIZZLED {}    // the per-key logits tile is filled by TMA (64-element swizzled rows)", b(f.logits_swizzled));
    let _ = writeln!(w, "#define GLA_ROWS_SCALED {}    // scalar gates on wgmma: mild chunks scale O's rows by 2^Γ_i instead of q", b(f.rows_scaled));
    let _ = writeln!(w, "constexpr bool SLOT_PER_GROUP = {};  // every slot holds one producer group's chunks: one EMPTY barrier a slot", f.slot_per_group);
    let _ = writeln!(w, "constexpr bool STATES_ISSUE_AHEAD = {};  // the segment-state pass issues a group's chunk j + 2 at the top of chunk j", f.states_issue_ahead);
    let _ = writeln!(w, "constexpr bool ROOMY_PRODUCERS = {};  // per key, wg scores, <= 384 threads: the producers keep the gate's lane map across chunks", f.roomy_producers);
    let _ = writeln!(w, "constexpr bool XCH_SPLIT = {};  // cluster key split: each CTA finishes half the value columns (else slice 0 all)", f.xch_split);
    let _ = writeln!(w, "#define GLA_SEGMENTED {}  // the two-level scan's segment-state pass is part of the source", f.segmented as u32);
    let _ = writeln!(w, "#define GLA_VALUE_ROWS {}  // per value on wgmma: V̂ and P by the producers, Sᵀ's rows and O scaled by the consumers", f.value_rows as u32);
    let _ = writeln!(w, "#define GLA_REVERSE {}  // the backward's dv pass: chunks last to first, dVᵀ = S'ᵀ K̂ᵀ + dOᵀ A, S'ᵀ += dOᵀ Q̃", f.reverse as u32);
    let _ = writeln!(w, "#define GLA_ROW_SUMS {}  // the backward's dq / dk passes: the store takes the gate's row sums Σ rs_w ⊙ o", f.row_sums as u32);
    let _ = writeln!(w, "#define GLA_SPLIT_OPS {}  // the dq / dk passes: Sᵀ, Q̃, K̂ as hi + lo halves in their products", f.split_operands as u32);
    if let Some(r) = f.regs {
        let _ = writeln!(
            w,
            "constexpr int REG_CAP = {}, REG_CONSUMER = {}, REG_PRODUCER = {};  // setmaxnreg: registers a thread (the CTA's share; consumers; producers)",
            r.cap, r.consumer, r.producer
        );
        let _ = writeln!(w, "constexpr bool REG_SPLIT = {};", r.split);
    }
    let [(owm, own), (swm, swn), (awm, awn)] = f.warp_tiles;
    let _ = writeln!(
        w,
        "constexpr int O_WM = {owm}, O_WN = {own}, S_WM = {swm}, S_WN = {swn}, A_WM = {awm}, A_WN = {awn};  // warp tiles (16x8 mma tiles) of O, S, A"
    );
    let _ = writeln!(
        w,
        "constexpr int LDK = DK + 8;  // padded row lengths (bank-conflict-free fragment loads)"
    );
    let _ = writeln!(w, "constexpr int LDC = C + 8;");
    let _ = writeln!(w, "constexpr int NPARAM = {};", gate.params().len());
    let _ = writeln!(
        w,
        "constexpr float SPAN_MAX = {:.1}f;  // largest chunk decay span (log2 units) taking the factorised intra-chunk form",
        span_max(spec.dtype)
    );
    let _ = writeln!(
        w,
        "constexpr float BLOCK_SPAN = {:.1}f, NEGLIGIBLE = {:.1}f;  // the exact path's block factorisation bound and its skipped levels' bound (log2 units)",
        BLOCK_SPAN, NEGLIGIBLE
    );
    write_gate_shape(w, spec.shape()); // (a per-key gate's dq / dk passes: per value)
    let _ = writeln!(w, "#define SPLIT_A {}      // scores kept as hi + lo halves (A V on tensor cores to ~f32 precision)", f.split_a as u32);
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
        "constexpr unsigned STAGE_BYTES = {}, STAGE_Q = {}, STAGE_K = {}, STAGE_V = {}, STAGE_X = {}, STAGE_Q_LO = {}, STAGE_K_LO = {};",
        lay.stage_bytes, lay.stage_q, lay.stage_k, lay.stage_v, lay.stage_x, lay.stage_q_lo, lay.stage_k_lo
    );
    let _ = writeln!(
        w,
        "constexpr unsigned OFF_G = {}, OFF_ST = {}, OFF_A = {}, OFF_VT = {}, OFF_ALO = {}, OFF_GL = {};  // {} B of shared memory",
        lay.g, lay.st, lay.a, lay.vt, lay.a_lo, lay.gl, lay.total
    );
    let _ = writeln!(
        w,
        "constexpr unsigned OFF_TOT = {}, TOT_BYTES = {}, ST_BYTES = {}, OFF_OS = {}, OFF_RS = {};  // gate_cumsum's segment totals (per producer group), the state tile, the output staging tile, the passes' row sums",
        lay.tot, lay.tot_bytes, lay.st_bytes, lay.os, lay.rs
    );
    let _ = writeln!(
        w,
        "constexpr int COMBINE_PER = {COMBINE_PER}, COMBINE_ROWS = {}, COMBINE_BLOCKS = {};  // the segment combine's state-row blocks (grid y = H · blocks)",
        f.combine_rows,
        f.combine_blocks
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
    let _ = writeln!(
        w,
        "constexpr unsigned OFF_MBAR = {};  // TMA: the slots' mbarriers",
        lay.mbar
    );
    let _ = writeln!(w, "constexpr unsigned OFF_XCH = {}, OFF_XBAR = {};  // KS_CLUSTER: the exchange tile and its mbarriers", lay.xch, lay.xbar);
    let _ = writeln!(
        w,
        "constexpr unsigned OFF_XG = {}, XG_STRIDE = {};  // GLA_X_PER_GROUP: the producer groups' logits tiles",
        lay.xg, lay.xg_stride
    );
    let _ = writeln!(
        w,
        "constexpr unsigned OFF_VS = {}, VS_STRIDE = {};  // per value: the producer groups' V' tiles (strong_values)",
        lay.vs, lay.vs_stride
    );
    let _ = writeln!(
        w,
        "constexpr unsigned OFF_RW = {}, RW_STRIDE = {}, RW_E = {};  // per-key passes: the consumer warpgroups' row-sum weights (rows_issue)",
        lay.rw, lay.rw_stride, lay.rw_e
    );
    let _ = writeln!(w);
    let _ = writeln!(w, "// ---- element type ({}) ----", spec.dtype);
    w.push_str(elem_section(spec.dtype));
    w.push_str(gate_math_section(spec.dtype));
    let _ = writeln!(w);
    let _ = writeln!(
        w,
        "// ---- gate `{}` (generated by #[gated_linear_attention]) ----",
        gate.name()
    );
    w.push_str(gate.cuda_source());
    let _ = writeln!(w);
    write_log_alpha_floor(w);
    let _ = writeln!(
        w,
        "__device__ __forceinline__ float gate_log_alpha(float x, const float* p) {{ return gla_max_nan({}(x, p), LOG_ALPHA_FLOOR); }}",
        gate.cuda_ident()
    );
    // Γ's running sum in log2 units: acc + log2(e) · log α(x) (<= acc: log α <= 0 is clamped, fmaf rounds monotonically;
    // >= acc + LOG2_ALPHA_FLOOR: the floor)
    if gate.cuda_log2_acc() {
        let _ = writeln!(
            w,
            "__device__ __forceinline__ float gate_log2_acc(float x, const float* p, float acc) {{ return gla_max_nan({}_log2_acc(x, p, acc), acc + LOG2_ALPHA_FLOOR); }}",
            gate.cuda_ident()
        );
    } else {
        let _ = writeln!(
            w,
            "__device__ __forceinline__ float gate_log2_acc(float x, const float* p, float acc) {{ return fmaf(gate_log_alpha(x, p), 1.4426950408889634f, acc); }}"
        );
    }
    if f.row_sums && f.value_rows && f.reverse {
        // A per-key gate's dk pass makes the d logits at its store, 0 below the log α floor: the gate's derivatives
        // in the dtype's math (bf16 / f16: ex2 / rcp / lg2 approximations, ~2^-21 relative — the d logits are rounded
        // to 2^-9 / 2^-11), not IEEE f32 as the backward's kernels: an IEEE expf and division an element in the store,
        // whose consumers bound the dk pass (H100 bwd gla/16 1.87 → 1.77 ms; benches/NOTES.md).
        write_gate_grads(w, gate, "", "");
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
    for t in family_templates(&f) {
        w.push_str(t);
        let _ = writeln!(w);
    }

    let bv = spec.tiles.block_v;
    let plan = if spec.materialize {
        LaunchPlan {
            kernels: vec![
                KernelLaunch {
                    name: "gla_fwd_states".into(),
                    grid: [
                        GridAxis::VTiles { block_v: bv },
                        GridAxis::Heads,
                        GridAxis::Sequences,
                    ],
                    block: nt,
                    smem_bytes: lay.total,
                },
                KernelLaunch {
                    name: "gla_fwd_output".into(),
                    grid: [
                        GridAxis::Chunks { chunk: spec.chunk },
                        GridAxis::Heads,
                        GridAxis::VTiles { block_v: bv },
                    ],
                    block: nt,
                    smem_bytes: lay.total,
                },
            ],
            needs_state_buffer: true,
            segmented: false,
            tma: false,
            lead_permille: f.lead_permille,
            workspace_partials: f.workspace_partials(),
        }
    } else {
        // Alg. 1 (right), fused; narrow problems add the two-level scan's segment-state and combine passes
        // (skipped when P = 1: their grids are then empty).
        LaunchPlan {
            kernels: vec![
                KernelLaunch {
                    name: if spec.tiles.specialised() {
                        "gla_fwd_ws_states"
                    } else {
                        "gla_fwd_seg_states"
                    }
                    .into(),
                    grid: [
                        GridAxis::VTiles { block_v: bv },
                        GridAxis::Heads,
                        GridAxis::SplitSeqSegments,
                    ],
                    block: if spec.tiles.specialised() {
                        spec.tiles.threads()
                    } else {
                        nt
                    },
                    smem_bytes: lay.total,
                },
                KernelLaunch {
                    name: "gla_fwd_seg_combine".into(),
                    grid: [
                        GridAxis::VTiles { block_v: bv },
                        GridAxis::HeadBlocks {
                            blocks: f.combine_blocks,
                        },
                        GridAxis::SplitSequences,
                    ],
                    block: nt,
                    smem_bytes: 0,
                },
                KernelLaunch {
                    name: if spec.tiles.specialised() {
                        "gla_fwd_ws"
                    } else {
                        "gla_fwd_fused"
                    }
                    .into(),
                    grid: [
                        GridAxis::VTiles { block_v: bv },
                        GridAxis::Heads,
                        GridAxis::SeqSegments,
                    ],
                    block: spec.tiles.threads(),
                    smem_bytes: lay.total,
                },
            ],
            needs_state_buffer: false,
            segmented: f.segmented,
            tma: f.tma,
            lead_permille: f.lead_permille,
            workspace_partials: f.workspace_partials(),
        }
    };
    let mut plan = plan;
    if !f.segmented {
        // A backward pass, a per-value gate on wgmma: the fused kernel alone (its source has no segment-state pass
        // and no combine).
        plan.kernels.retain(|k| k.name == "gla_fwd_ws");
    }
    if spec.key_split > 1 && !spec.cluster {
        plan.kernels.push(KernelLaunch {
            name: "gla_fwd_ksum".into(),
            grid: [
                GridAxis::KeySplitSum {
                    key_split: spec.key_split,
                    per_block: KSUM_PER_BLOCK,
                },
                GridAxis::One,
                GridAxis::One,
            ],
            block: 256,
            smem_bytes: 0,
        });
    }
    Generated { source: src, plan }
}

/// Outputs one CTA of `gla_fwd_ksum` adds up (256 threads, 4 each).
const KSUM_PER_BLOCK: u32 = 1024;

/// The three warpgroup products of the wgmma consumers, one PTX instruction each (f32 accumulators, operands in
/// shared memory through matrix descriptors, or A from registers; `tnsp` 1 = MN-major in shared memory):
///   wg_out_s: Oᵀ (64 x C) += Sᵀ (registers, bf16/f16) · Q̃ᵀ (K-major)          — m64nCk16
///   wg_out_v: Oᵀ (64 x C) += Vᵀ (MN-major) · Aᵀ (K-major)                       — m64nCk16
///   wg_out_w: dVᵀ (64 x C) += dOᵀ (MN-major) · A (N-major; the dv pass)          — m64nCk16
///   wg_state: Sᵀ (64 x d_k) += Vᵀ (MN-major) · K̂ (N-major)                      — m64n{d_k}k16
fn write_wgmma(w: &mut String, spec: &KernelSpec) {
    let ty = match spec.dtype {
        DType::F16 => "f16",
        _ => "bf16",
    };
    let _ = writeln!(
        w,
        "// ---- warpgroup tensor-core products (wgmma.mma_async, sm_90a) ----"
    );
    let acc = |n: u32| {
        (0..n / 2)
            .map(|i| format!("%{i}"))
            .collect::<Vec<_>>()
            .join(",")
    };
    let outs = |n: u32| {
        (0..n / 2)
            .map(|i| format!("\"+f\"(d[{i}])"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    // One wrapper `name(d, a | da, db)`: D (m64 x n, f32) += A B for instruction shape/types `op` (e.g.
    // "m64n32k16.f32.bf16.bf16"); A from registers (a_regs) or a descriptor; `imm` the transpose immediates
    // (", tnsp_b" with A in registers, ", tnsp_a, tnsp_b" otherwise; none for tf32, whose operands are K-major only).
    let emit = |w: &mut String,
                name: &str,
                n: u32,
                a_regs: bool,
                op: &str,
                imm: &str,
                doc: &str| {
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
    emit(
        w,
        "wg_out_s",
        c,
        true,
        &op(c),
        ", 0",
        "Oᵀ += Sᵀ Q̃ᵀ: A = Sᵀ in registers, B = Q̃ [C][d_k] K-major",
    );
    emit(
        w,
        "wg_out_t",
        c,
        false,
        &op(c),
        ", 0, 0",
        "Oᵀ += Sᵀ Q̃ᵀ: A = Sᵀ [64][d_k] K-major in shared memory, B = Q̃ [C][d_k] K-major",
    );
    emit(
        w,
        "wg_out_v",
        c,
        false,
        &op(c),
        ", 1, 0",
        "Oᵀ += Vᵀ Aᵀ: A = V [C][64] M-major, B = A [C][C] K-major",
    );
    if Features::of(spec).reverse {
        emit(
            w,
            "wg_out_w",
            c,
            false,
            &op(c),
            ", 1, 1",
            "dVᵀ += dOᵀ A (dv pass): A = dO [C][64] M-major, B = A [C][C] N-major",
        );
    }
    emit(
        w,
        "wg_state",
        dk,
        false,
        &op(dk),
        ", 1, 1",
        "Sᵀ += Vᵀ K̂: A = V [C][64] M-major, B = K̂ [C][d_k] N-major",
    );
    if Features::of(spec).wg_scores {
        let doc = "D += [Q̃; K̃] K̃ᵀ (producers, tf32): A = [Q̃; K̃] [2C][d_k] f32 K-major, B = K̃ [C][d_k] f32 K-major";
        emit(
            w,
            "wg_scores_mma",
            c,
            false,
            &format!("m64n{c}k8.f32.tf32.tf32"),
            "",
            doc,
        );
    }
}
