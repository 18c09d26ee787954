//! Built-in gates, declared with `#[gated_linear_attention]` itself. Each gives log α of one raw logit `x` (the
//! output of the model's gate projection), with its source equation.

use crate::prelude::*;

/// GLA (Yang et al. 2024, "Gated Linear Attention Transformers with Hardware-Efficient Training", §4.4):
/// α_t = σ(x_t W_α + b_α)^{1/τ} with τ = 16, so log α = log σ(x) / 16. Per key channel.
#[gated_linear_attention(gate = per_key)]
pub fn gla(x: f32) -> f32 {
    log_sigmoid(x) / 16.0
}

/// Mamba-2 (Dao & Gu 2024, "Transformers are SSMs", §3): a_t = exp(Δ_t A) with Δ_t = softplus(x_t) and
/// A = −exp(A_log) per head, so log α = −softplus(x) · exp(a) with the parameter a = A_log. Per head.
#[gated_linear_attention(gate = per_head)]
pub fn mamba2(x: f32, #[param] a: f32) -> f32 {
    -softplus(x) * exp(a)
}

/// mLSTM forget gate (Beck et al. 2024, "xLSTM", §2.3, sigmoid variant): f_t = σ(f̃_t), so log f = log σ(x).
/// Per head.
#[gated_linear_attention(gate = per_head)]
pub fn mlstm(x: f32) -> f32 {
    log_sigmoid(x)
}

/// Gated RetNet (Sun et al. 2024, "You Only Cache Once", gRetNet): a data-dependent scalar decay
/// γ_t = σ(x_t)^{1/τ} with τ = 16, so log γ = log σ(x) / 16. Per head.
#[gated_linear_attention(gate = per_head)]
pub fn gated_retnet(x: f32) -> f32 {
    log_sigmoid(x) / 16.0
}

/// HGRN-2 (Qin et al. 2024, "HGRN2: Gated Linear RNNs with State Expansion", eq. 3–4): a forget gate with a
/// learnable lower bound γ ∈ [0, 1], f_t = γ + (1 − γ) σ(x_t), so log f = log(γ + (1 − γ) σ(x)). Per key channel.
/// Numerics: at γ = 0 this is log σ(x) computed through σ, which underflows in f32 for x < −103 (log α = −∞,
/// ∂/∂x = NaN); use `mlstm`'s log_sigmoid form if γ = 0 with such logits matters.
#[gated_linear_attention(gate = per_key)]
pub fn hgrn2(x: f32, #[param(range = 0.0..1.0)] gamma: f32) -> f32 {
    log(gamma + (1.0 - gamma) * sigmoid(x))
}

/// RWKV-6 decay (Peng et al. 2024, "Eagle and Finch", eq. 17): w_t = exp(−exp(d_t)), so log w = −exp(x).
/// Per key channel.
#[gated_linear_attention(gate = per_key)]
pub fn rwkv6(x: f32) -> f32 {
    -exp(x)
}

/// RetNet (Sun et al. 2023, "Retentive Network", §2.2): a fixed decay per head h, γ_h = 1 − 2^{−5−h}, so
/// log γ = log(1 − 2^{−5−h}) (2^y written exp(y · ln 2)). No logits.
#[gated_linear_attention(gate = fixed)]
pub fn retnet(h: f32) -> f32 {
    log(1.0 - exp((-5.0 - h) * std::f32::consts::LN_2))
}

/// The names of the seven built-in gates above.
pub const BUILT_IN: [&str; 7] = [
    "gla",
    "mamba2",
    "mlstm",
    "gated_retnet",
    "hgrn2",
    "rwkv6",
    "retnet",
];
