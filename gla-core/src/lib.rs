//! gla-core: the vocabulary every other gla crate speaks.
//!
//! * [`Gate`]: a gating parameterisation (written by `#[gated_linear_attention]`), with its CPU and CUDA forms.
//! * [`GateShape`], [`DType`], [`Dims`]: what a problem looks like.
//! * [`GlaError`]: every typed error a user can see.
//! * [`reference`]: the f64 recurrent / f32 chunkwise CPU reference, the ground truth of every kernel test.
//!
//! This crate has no GPU dependency and no `unsafe`.
#![forbid(unsafe_code)]

pub mod error;
pub mod gate;
pub mod gate_ref;
pub mod reference;
pub mod tensor;

/// Floor of every token's log2 α in the kernels (forward, backward, decode) and in the f32 chunkwise reference
/// ([`reference::chunkwise_forward`], which performs the kernels' decomposition): a gate whose log α falls below it — a
/// forget gate under 2^−160 ≈ 6.8e−49, below f32's smallest subnormal, so every decay across such a token is still
/// exactly 0, as in the f64 references — decays by 2^−160 instead. Without it one such token (RWKV-6's −exp(x) at
/// x = 30 is −1e13; at x > 88.7 it is −∞ in f32) left Γ, the chunk's running f32 sum, too large for the later
/// tokens' differences Γ_i − Γ_j: their decays came out wrong (14 % relative RMS on the emulator with one such token
/// a chunk among mild ones) or NaN (−∞ − −∞). With the floor |Γ| grows at most 160 a token, so those differences
/// keep f32's relative precision of |Γ|. NaN passes (max.NaN). The f64 recurrences are not floored (the difference
/// is below 2^−160 of a term). The kernels' backward's d logits (and d params) are 0 where the floor holds, its
/// derivative.
pub const LOG2_ALPHA_FLOOR: f32 = -160.0;

pub use error::GlaError;
pub use gate::{registered_gates, Gate, GateRegistration, GateShape, ParamSpec};
pub use tensor::{DType, Dims, HostTensor};

/// Re-exports used by code that `#[gated_linear_attention]` generates. Not public API.
#[doc(hidden)]
pub mod __private {
    pub use inventory;
}
