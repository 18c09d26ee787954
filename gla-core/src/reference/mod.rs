//! CPU reference of the gated linear recurrence: the ground truth every GPU kernel is tested against.
//!
//! Three entry points, all on the same [`Problem`]:
//! * [`recurrent_forward`] — the recurrence itself, token by token, in **f64**. This is the ground truth.
//! * [`chunkwise_forward`] — the chunkwise parallel form in **f32**, performing *exactly* the decomposition the GPU
//!   kernels perform (same cumulative sums, same reference points, same exponentials), so that a kernel bug and a
//!   decomposition bug can be told apart. It also records every `exp` it evaluates ([`ExpStats`]).
//! * [`recurrent_backward`] — gradients of the recurrence with respect to every input, in **f64**.
//! * [`chunkwise_backward`] — the same gradients by the chunkwise decomposition the backward kernels are to take
//!   (issue 28), in **f32**, every `exp` ≤ 0, for every gate shape.
//! * [`walks_backward`] — the same gradients (key gates) as three forward walks that keep no chunk state, in f64:
//!   the plan for state-free backward kernels.
//!
//! # Layout
//! fla's layout, row-major, last dimension fastest: `q, k: [B,T,H,d_k]`, `v, o: [B,T,H,d_v]`, per-key gate
//! `[B,T,H,d_k]`, per-head gate `[B,T,H]`, fixed gate `[H]`, value gate `[B,T,H,d_v]`, states `[N,H,d_k,d_v]`.
//! Without `cu_seqlens` the `N = B` sequences are the rows of the batch; with `cu_seqlens` (`B = 1`) sequence `n`
//! is tokens `cu_seqlens[n]..cu_seqlens[n+1]` of the packed `T` axis (`N = cu_seqlens.len() − 1`). Empty sequences
//! are allowed: their final state is their initial state.
//!
//! # The recurrence (per sequence and head)
//! With log-gates `log α_t ∈ (−∞, 0]^{d_k}` and `log β_t ∈ (−∞, 0]^{d_v}`:
//!
//! ```text
//!   S_0 = initial state (or 0)
//!   S_t = diag(α_t) S_{t−1} diag(β_t) + k_tᵀ v_t            (paper eq. 3, with the value gate of the appendix)
//!   o_t = scale · q_t S_t                                   (scale defaults to 1/√d_k)
//! ```
//!
//! `α_t = exp(log α_t)` where the key gate is a per-key vector ([`KeyGate::PerKey`], GLA), a per-head scalar
//! broadcast over `d_k` ([`KeyGate::PerHead`], Mamba-2), a per-head constant ([`KeyGate::Fixed`], RetNet) or 1
//! ([`KeyGate::None`]); `β_t = exp(log β_t)` or 1 without a value gate.
//!
//! # The chunkwise form (§2.2, §4.2, §4.3 and Alg. 1 of the paper), as the kernels compute it
//! Every sequence is split into chunks of `C` tokens (the last one partial, `L ≤ C` valid rows). Inside one chunk,
//! rows `i, j ∈ 0..L`, and with `S` the state entering the chunk (`S_[n]`):
//!
//! ```text
//!   Γ_i = Σ_{m ≤ i} log α_m      in-chunk inclusive cumulative sum, f32, sequential  (≤ 0, non-increasing)
//!   B_i = Σ_{m ≤ i} log β_m      same on the value side
//!
//!   inter-chunk (§4.2):  o_i  = ((q_i ⊙ exp(Γ_i)) S) ⊙ exp(B_i)
//!                        (scalar gates: exp(Γ_i) is a row factor applied to q_i S, as the kernel does)
//!   intra-chunk:         o_i += Σ_{j ≤ i} A_ij (v_j ⊙ exp(B_i − B_j))
//!   output:              o_i ← scale · o_i
//!   state update:        S_[n+1] = diag(exp(Γ_L)) S diag(exp(B_L)) + (K ⊙ exp(Γ_L − Γ))ᵀ (V ⊙ exp(B_L − B))
//!                        (Γ_L, B_L: the last valid row of the chunk)
//! ```
//!
//! The score matrix `A` (lower triangular, `j ≤ i`):
//! * per-key gate, mild chunks (the decay span −min_d Γ_L,d within [`ChunkConfig::factorise_span`]): one product
//!   `A_ij = Σ_d [q_id exp(Γ_id)] · [k_jd exp(−Γ_jd)]` (the second factor's argument is positive, at most the span);
//! * per-key gate, every other chunk: the secondary chunking of §4.3 applied recursively (binary), whose cost does
//!   not depend on the decay —
//!   - diagonal, exponent 0: `A_ii = q_i · k_i`;
//!   - pair `(i, j < i)` at level `p` = the highest bit in which `i` and `j` differ: both in one block of `2^(p+1)`
//!     rows, `i` in its upper half, `j` in the lower one, and `m` = the upper half's **first** row (`i ≥ m > j`):
//!     `A_ij = Σ_d [q_id exp(Γ_id − Γ_md)] · [k_jd exp(Γ_md − Γ_jd)]` (tensor cores on the GPU; each row is scaled
//!     once a level, `log2(C) · C · d_k` exponentials a chunk);
//! * per-head, fixed and no gate (one scalar per row): the single-matmul form `A_ij = (q_i · k_j) exp(Γ_i − Γ_j)`,
//!   no sub-chunking (no gate = a scalar gate with `log α ≡ 0`).
//! * value gate (CPU only for now, the analogue on the value side, sub-chunked for every key gate): for query
//!   sub-chunk `s` with first row `r`,
//!   - `j < r`: `o_i += exp(B_i − B_r) ⊙ Σ_{j<r} A_ij (v_j ⊙ exp(B_r − B_j))`,
//!   - `r ≤ j ≤ i`: `o_i += Σ_j A_ij (v_j ⊙ exp(B_i − B_j))` pairwise.
//!
//! Every exponent above is `x_later − x_earlier` of a non-increasing cumulative sum, or a cumulative sum itself, so
//! **every `exp` argument is ≤ 0 by construction** (the invariant of ARCHITECTURE.md); the reference routes every
//! `exp` through one helper that records the number of evaluations and the largest argument ([`ExpStats`]).
//!
//! [`ChunkConfig::materialize`] selects the schedule of Alg. 1: `true` (left) first walks the chunks once to
//! compute and store every chunk-start state `S_[n]`, then computes every chunk's output independently (in
//! parallel) from its stored state; `false` (right) is one sequential pass (output of chunk `n`, then update `S`).
//! Both schedules perform the same f32 operations per chunk.
//!
//! # Backward
//! [`recurrent_backward`] differentiates the recurrence in f64 by the reverse-time recurrence of `dS`
//! (`G_t = ∂ℒ/∂S_t`, including the paths through later states):
//!
//! ```text
//!   G_T      = dS_final + scale · q_Tᵀ do_T
//!   G_t      = scale · q_tᵀ do_t + diag(α_{t+1}) G_{t+1} diag(β_{t+1})
//!   dq_t     = scale · S_t do_tᵀ             dk_t = G_t v_tᵀ           dv_t = k_t G_t
//!   dlog α_t = rowsum(G_t ⊙ diag(α_t) S_{t−1} diag(β_t))       dlog β_t = colsum(same)
//!   dS_0     = diag(α_1) G_1 diag(β_1)       (= dS_final for an empty sequence)
//! ```
//!
//! The per-head gate's gradient sums over `d_k`; the fixed gate's over `d_k` and every token of every sequence of
//! its head. States are recomputed forward from checkpoints every ⌈√len⌉ tokens, so memory stays
//! `O(√len · d_k · d_v)` per (sequence, head).
//!
//! # Errors
//! Every function validates its inputs first and returns a typed [`GlaError`](crate::GlaError): a wrong length is
//! [`GlaError::Shape`](crate::GlaError::Shape) (`got` = the slice length), a bad value (positive or non-finite
//! log-gate, non-finite tensor, bad `cu_seqlens`, bad scale) is
//! [`GlaError::InvalidArgument`](crate::GlaError::InvalidArgument), an impossible chunk configuration is
//! [`GlaError::Unsupported`](crate::GlaError::Unsupported). Nothing panics on bad input.

mod check;
mod chunkwise;
mod chunkwise_bwd;
mod levels;
mod recurrent;
mod walks;

use crate::error::Result;
use crate::Dims;

#[doc(hidden)]
pub use chunkwise::chunkwise_forward_with_fault;

/// The key-side (forget) gate, as **log α** values (all ≤ 0 and finite).
#[derive(Clone, Copy, Debug)]
pub enum KeyGate<'a> {
    /// No gate: α ≡ 1 (plain linear attention).
    None,
    /// One value per key channel, `[B,T,H,d_k]` (GLA, HGRN-2, RWKV-6).
    PerKey(&'a [f64]),
    /// One value per token and head, broadcast over `d_k`, `[B,T,H]` (Mamba-2, mLSTM).
    PerHead(&'a [f64]),
    /// One data-independent value per head, `[H]` (RetNet).
    Fixed(&'a [f64]),
}

/// One problem: inputs of the gated recurrence. See the [module docs](self) for layouts and equations.
#[derive(Clone, Copy, Debug)]
pub struct Problem<'a> {
    pub dims: Dims,
    /// `[B,T,H,d_k]`.
    pub q: &'a [f64],
    /// `[B,T,H,d_k]`.
    pub k: &'a [f64],
    /// `[B,T,H,d_v]`.
    pub v: &'a [f64],
    pub key_gate: KeyGate<'a>,
    /// log β, `[B,T,H,d_v]`, all ≤ 0.
    pub value_gate: Option<&'a [f64]>,
    /// Output scale; `None` means `1/√d_k`.
    pub scale: Option<f64>,
    /// `[N,H,d_k,d_v]`, `N` = number of sequences.
    pub initial_state: Option<&'a [f64]>,
    /// `N+1` offsets into the packed `T` axis; needs `B == 1`.
    pub cu_seqlens: Option<&'a [usize]>,
}

/// Output of a forward pass.
#[derive(Clone, Debug, PartialEq)]
pub struct Forward {
    /// `[B,T,H,d_v]`.
    pub o: Vec<f64>,
    /// `[N,H,d_k,d_v]`, the state after the last token of every sequence (when requested).
    pub final_state: Option<Vec<f64>>,
}

/// Chunk configuration of the chunkwise form.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ChunkConfig {
    /// Chunk size `C ≥ 1`.
    pub chunk: usize,
    /// Sub-chunk size `c ≥ 1` of the value gate's secondary chunking (§4.3); must divide `C`. (Per-key gates
    /// recurse down to single rows whatever `c` is; scalar gates do not sub-chunk.)
    pub sub_chunk: usize,
    /// Alg. 1 left (materialize every chunk-start state, then all chunks in parallel) vs right (one sequential
    /// pass).
    pub materialize: bool,
    /// Per-key gates: chunks whose decay span `−min_d Γ_L,d` (natural log units) is at most this take the
    /// factorised one-product form `A = (Q ⊙ e^Γ)(K ⊙ e^−Γ)ᵀ`, as the kernels do on "mild" chunks (their bound
    /// is `SPAN_MAX` in log2 units, i.e. `SPAN_MAX · ln 2` here); `None`: always the exact (recursive) form.
    pub factorise_span: Option<f32>,
    /// Fused form only: split each sequence into this many segments of whole chunks (the kernels' two-level scan,
    /// `gla_fwd_seg_states` / `gla_fwd_seg_combine`): every segment's state ΔS from S = 0 and its decay Σ Γ_L, then
    /// sequentially S_init(p+1) = diag(e^{Σ Γ_L(p)}) S_init(p) + ΔS_p, then each segment's chunks from S_init(p).
    /// `1`: one pass per sequence. Must be ≥ 1.
    pub segments: usize,
}

impl Default for ChunkConfig {
    /// The kernels' default variant: `C = 64`, `c = 16`, fused (not materialized), exact (recursive) per-key form, unsplit.
    fn default() -> Self {
        ChunkConfig {
            chunk: 64,
            sub_chunk: 16,
            materialize: false,
            factorise_span: None,
            segments: 1,
        }
    }
}

/// Statistics over every `exp` the chunkwise form evaluated.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ExpStats {
    /// Number of `exp` evaluations.
    pub count: u64,
    /// Largest argument (`−∞` if none was evaluated, NaN if any argument was NaN). The decomposition guarantees
    /// `max_arg ≤ 0`.
    pub max_arg: f64,
    /// Largest argument of the one positive-argument `exp` of the factorised form (`K ⊙ e^−Γ`; `−∞` if none).
    /// Bounded by [`ChunkConfig::factorise_span`].
    pub max_factor_arg: f64,
}

impl Default for ExpStats {
    fn default() -> Self {
        ExpStats {
            count: 0,
            max_arg: f64::NEG_INFINITY,
            max_factor_arg: f64::NEG_INFINITY,
        }
    }
}

impl ExpStats {
    /// Combine the statistics of two disjoint sets of evaluations.
    pub fn merge(self, other: ExpStats) -> ExpStats {
        let max_arg = if self.max_arg.is_nan() || other.max_arg.is_nan() {
            f64::NAN
        } else {
            self.max_arg.max(other.max_arg)
        };
        let max_factor_arg = if self.max_factor_arg.is_nan() || other.max_factor_arg.is_nan() {
            f64::NAN
        } else {
            self.max_factor_arg.max(other.max_factor_arg)
        };
        ExpStats {
            count: self.count + other.count,
            max_arg,
            max_factor_arg,
        }
    }
}

/// Gradients of `ℒ = Σ dO ⊙ O + Σ dS_final ⊙ S_final` with respect to every input.
#[derive(Clone, Debug, PartialEq)]
pub struct Grads {
    /// `[B,T,H,d_k]`.
    pub dq: Vec<f64>,
    /// `[B,T,H,d_k]`.
    pub dk: Vec<f64>,
    /// `[B,T,H,d_v]`.
    pub dv: Vec<f64>,
    /// Gradient w.r.t. the log key gate, same shape as the gate tensor (`[H]` for [`KeyGate::Fixed`]); `None` for
    /// [`KeyGate::None`].
    pub d_key_gate: Option<Vec<f64>>,
    /// Gradient w.r.t. log β, `[B,T,H,d_v]`; `None` without a value gate.
    pub d_value_gate: Option<Vec<f64>>,
    /// `[N,H,d_k,d_v]`; `None` when the problem has no initial state.
    pub d_initial_state: Option<Vec<f64>>,
}

/// The chunkwise backward in f32 arithmetic: the decomposition of the backward kernels (the reverse pass over chunk
/// states, the per-chunk gradients with the recursive pair levels, the gate's closed form), with statistics of every
/// `exp` (all ≤ 0). Same gradients and layouts as [`recurrent_backward`], every gate shape and the value gate.
pub fn chunkwise_backward(
    p: &Problem,
    cfg: ChunkConfig,
    d_o: &[f64],
    d_final_state: Option<&[f64]>,
) -> Result<(Grads, ExpStats)> {
    chunkwise_bwd::backward(p, cfg, d_o, d_final_state)
}

/// The backward as three forward walks that keep no chunk state, in f64 (key gates): dq, dk, dv as forward
/// recurrences on swapped operands (dk, dv in reverse with the decays shifted by a token), the gate's gradient by a
/// chunk recurrence (chunks of `chunk` tokens) of the pairs crossing each chunk boundary — the plan for the
/// state-free backward kernels (`walks.rs` has the equations). Same gradients and layouts as [`recurrent_backward`];
/// a value gate is [`GlaError::Unsupported`](crate::GlaError::Unsupported).
pub fn walks_backward(
    p: &Problem,
    chunk: usize,
    d_o: &[f64],
    d_final_state: Option<&[f64]>,
) -> Result<Grads> {
    walks::backward(p, chunk, d_o, d_final_state)
}

/// The recurrence, token by token, in f64 (the ground truth).
pub fn recurrent_forward(p: &Problem, output_final_state: bool) -> Result<Forward> {
    recurrent::forward(p, output_final_state)
}

/// The chunkwise form in f32 arithmetic (inputs rounded to f32, result widened to f64), performing exactly the
/// kernels' decomposition (module docs), with statistics of every `exp` it evaluated.
pub fn chunkwise_forward(
    p: &Problem,
    cfg: ChunkConfig,
    output_final_state: bool,
) -> Result<(Forward, ExpStats)> {
    chunkwise::forward(p, cfg, output_final_state, Fault::None)
}

/// Gradients of the recurrence in f64, given `dO` (`[B,T,H,d_v]`) and optionally `d(final state)`
/// (`[N,H,d_k,d_v]`, zero if `None`).
pub fn recurrent_backward(
    p: &Problem,
    d_o: &[f64],
    d_final_state: Option<&[f64]>,
) -> Result<Grads> {
    recurrent::backward(p, d_o, d_final_state)
}

/// Deliberate breakages of the chunkwise decomposition, to show that the tests catch them. Not API.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fault {
    /// The correct decomposition.
    None,
    /// The reference row of a block's (per-key level, or value-side sub-chunk) query rows is their **last** row
    /// instead of the first: still algebraically exact, but `Γ_i − Γ_r > 0` for the earlier query rows, so `exp`
    /// overflows on strong gates (and `max_arg > 0` always).
    WrongReferencePoint,
    /// Exclusive instead of inclusive in-chunk cumulative sums (`Γ_i = Σ_{m<i}`): an off-by-one in the decay.
    ExclusiveCumsum,
    /// The factorised form on every chunk, without the span check: `K ⊙ e^−Γ` overflows on strong gates.
    UncheckedFactorisation,
}

/// Relative RMS error `sqrt(Σ(got−want)² / Σ want²)`; 0 if both are all zeros (or empty), `+∞` if `want` is all
/// zeros but `got` is not, or if the lengths differ; NaN if either holds a NaN.
pub fn rel_rms(got: &[f64], want: &[f64]) -> f64 {
    if got.len() != want.len() {
        return f64::INFINITY;
    }
    let (mut num, mut den) = (0.0f64, 0.0f64);
    for (g, w) in got.iter().zip(want) {
        num += (g - w) * (g - w);
        den += w * w;
    }
    if num.is_nan() || den.is_nan() {
        return f64::NAN;
    }
    if den == 0.0 {
        return if num == 0.0 { 0.0 } else { f64::INFINITY };
    }
    (num / den).sqrt()
}
