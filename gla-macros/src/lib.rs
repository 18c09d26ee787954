//! `#[gated_linear_attention(gate = per_key | per_head | per_value | fixed)]`: declare a gate of gated linear
//! attention as a Rust fn whose body is log α, the log of the forget gate.
//!
//! ```ignore
//! use gla::prelude::*;
//!
//! /// GLA (§4.4): α = σ(x)^(1/16)
//! #[gated_linear_attention(gate = per_key)]
//! fn gla(x: f32) -> f32 { log_sigmoid(x) / 16.0 }
//!
//! #[gated_linear_attention(gate = per_key)]
//! fn hgrn2(x: f32, #[param(range = 0.0..1.0)] gamma: f32) -> f32 { log(gamma + (1.0 - gamma) * sigmoid(x)) }
//! ```
//!
//! The macro
//! 1. parses the body into an expression over `x` (the raw logit; `h`, the head index, for `fixed` gates) and the
//!    `#[param]`s, and validates it (every unsupported construct is reported, at its token, all at once);
//! 2. proves by interval arithmetic and branch and bound that the expression is defined and log α ≤ 0 for every
//!    x ∈ ℝ (h ∈ [0, 1024]) and every parameter in its declared range (ℝ when undeclared);
//!    `assume_nonpositive` skips the sign proof (not the definedness proof);
//! 3. differentiates it symbolically (∂/∂x and ∂/∂param, simplified);
//! 4. keeps the fn callable as plain Rust and generates a unit struct (the fn name in CamelCase) implementing
//!    `gla_core::Gate` with f64 CPU functions, CUDA device functions and a stable content hash, registered with
//!    `inventory` so that `gla::core::registered_gates()` lists it.
//!
//! Generated code names `::gla::__private::*` paths only, so a crate using the macro depends on `gla`.
#![forbid(unsafe_code)]

mod attr;
mod ctxt;
mod diff;
mod emit;
mod expand;
mod expr;
mod interval;
mod parse;
mod prove;

use proc_macro::TokenStream;

/// Declare a gate. See the crate documentation.
///
/// * `gate = per_key | per_head | per_value | fixed` (required): where the gate acts.
/// * `assume_nonpositive` (optional): skip the proof of log α ≤ 0 (you vouch for it).
/// * `#[param]` / `#[param(range = lo..hi)]` on each argument after the first: a learnable per-head parameter.
#[proc_macro_attribute]
pub fn gated_linear_attention(attr: TokenStream, item: TokenStream) -> TokenStream {
    expand::expand(attr.into(), item.into()).into()
}
