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

pub use error::GlaError;
pub use gate::{registered_gates, Gate, GateRegistration, GateShape, ParamSpec};
pub use tensor::{DType, Dims, HostTensor};

/// Re-exports used by code that `#[gated_linear_attention]` generates. Not public API.
#[doc(hidden)]
pub mod __private {
    pub use inventory;
}
