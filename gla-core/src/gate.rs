//! The [`Gate`] trait: one gating parameterisation of the forget gate, as declared with
//! `#[gated_linear_attention]`.
//!
//! Conventions shared by the CPU reference, the code generator and the runtime:
//! * The gate function returns **log α** (≤ 0) of one raw logit `x`.
//! * Learnable parameters are per head: a tensor `params` of shape `[H, P]` (f32), `P = params().len()`.
//! * `GateShape::Fixed` gates take no logits: `x` is the head index `h` (as a float), e.g. RetNet's
//!   `log(1 - 2^(-5-h))`.

use std::fmt;

/// Where the gate acts and how many values it has per token and head.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum GateShape {
    /// α_t ∈ (0,1]^{d_k}: one logit per key channel (GLA, HGRN-2, RWKV-6). Logits `[B,T,H,d_k]`.
    PerKey,
    /// α_t ∈ (0,1]: one logit per token and head (Mamba-2, mLSTM, Gated RetNet). Logits `[B,T,H]`.
    PerHead,
    /// β_t ∈ (0,1]^{d_v}: value-side gate, one logit per value channel. Logits `[B,T,H,d_v]`.
    PerValue,
    /// Data-independent decay, a function of the head index only (RetNet). No logits.
    Fixed,
}

impl GateShape {
    /// The attribute spelling: `per_key`, `per_head`, `per_value`, `fixed`.
    pub fn as_str(self) -> &'static str {
        match self {
            GateShape::PerKey => "per_key",
            GateShape::PerHead => "per_head",
            GateShape::PerValue => "per_value",
            GateShape::Fixed => "fixed",
        }
    }
    /// Number of logits per (token, head) for head dims `dk`, `dv`.
    pub fn logits_per_token(self, dk: usize, dv: usize) -> usize {
        match self {
            GateShape::PerKey => dk,
            GateShape::PerHead => 1,
            GateShape::PerValue => dv,
            GateShape::Fixed => 0,
        }
    }
}

impl fmt::Display for GateShape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A learnable parameter of a gate (one value per head).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ParamSpec {
    pub name: &'static str,
    /// The declared range `#[param(range = lo..hi)]`, if any; the interval proof of log α ≤ 0 holds over it.
    pub range: Option<(f64, f64)>,
}

/// A gating parameterisation. Implemented by the type that `#[gated_linear_attention]` generates.
///
/// Invariant (proved by the macro unless the user wrote `assume_nonpositive`): `log_alpha(x, p) <= 0` for every
/// finite `x` and every `p` in the declared ranges.
pub trait Gate: Send + Sync + 'static {
    /// The Rust function's name, e.g. `"gla"`.
    fn name(&self) -> &'static str;
    fn shape(&self) -> GateShape;
    fn params(&self) -> &'static [ParamSpec];
    /// Canonical text of the log-α expression (for docs, hashes and error messages).
    fn expr(&self) -> &'static str;
    /// log α(x; params) in f64 (CPU reference).
    fn log_alpha(&self, x: f64, params: &[f64]) -> f64;
    /// ∂ log α / ∂x in f64.
    fn dlog_alpha_dx(&self, x: f64, params: &[f64]) -> f64;
    /// ∂ log α / ∂p_k for every parameter, written into `grad` (length `params().len()`).
    fn dlog_alpha_dparams(&self, x: f64, params: &[f64], grad: &mut [f64]);
    /// Prefix of the CUDA device functions in [`Gate::cuda_source`]:
    /// `float {id}(float x, const float* p)`, `float {id}_dx(float x, const float* p)`,
    /// `void {id}_dp(float x, const float* p, float* dp)`.
    fn cuda_ident(&self) -> &'static str;
    /// Self-contained CUDA C source (no includes) defining the three device functions (and `{id}_log2_acc` where
    /// [`Gate::cuda_log2_acc`] says so).
    fn cuda_source(&self) -> &'static str;
    /// Whether [`Gate::cuda_source`] also defines `float {id}_log2_acc(float x, const float* p, float acc)`:
    /// `acc + log2(e) · log α(x)`, never above `acc` (NaN passes) — the kernels' running sum Γ in log2 units with
    /// the scale folded into the gate's own operations. Generated gates do; without it the kernels compute
    /// `fmaf(log α, log2 e, acc)`.
    fn cuda_log2_acc(&self) -> bool {
        false
    }
    /// Stable 64-bit hash of (name, shape, params, expression, generator version); part of the tuning cache key.
    fn content_hash(&self) -> u64;
}

impl fmt::Debug for dyn Gate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Gate({}: {} = {})",
            self.name(),
            self.shape(),
            self.expr()
        )
    }
}

/// Registration of a gate, submitted by generated code through `inventory`, so a binary can enumerate every gate
/// declared in any crate it links.
pub struct GateRegistration {
    pub gate: &'static dyn Gate,
}

inventory::collect!(GateRegistration);

/// Every gate declared with `#[gated_linear_attention]` in the crates linked into this binary, sorted by name.
pub fn registered_gates() -> Vec<&'static dyn Gate> {
    let mut v: Vec<&'static dyn Gate> = inventory::iter::<GateRegistration>
        .into_iter()
        .map(|r| r.gate)
        .collect();
    v.sort_by_key(|g| g.name());
    v.dedup_by_key(|g| g.name());
    v
}
