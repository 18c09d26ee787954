//! gla: gated linear attention kernels for Hopper — the facade.
//!
//! `use gla::prelude::*;` is all a user needs: the gate macro, the GPU handle and the tensor types.
//!
//! * [`gated_linear_attention`]: declare a gate as a Rust fn returning log α; the macro proves log α ≤ 0,
//!   differentiates it and generates a [`Gate`] with CPU (f64) and CUDA forms.
//! * [`Gla`]: the runtime on one GPU (from `gla-runtime`): [`Gla::new`], [`Gla::upload`], [`Gla::forward`] /
//!   [`Gla::forward_into`] with [`ForwardOptions`], giving a [`ForwardOutput`] of [`DeviceTensor`]s;
//!   [`DeviceTensor::download`] brings a result back as a [`HostTensor`]; [`Gla::backward`] with
//!   [`BackwardOptions`] gives the [`Gradients`] (the walk form by default where it has kernels, else the chunk
//!   form: see the README); [`Gla::decode`] with [`DecodeOptions`] steps one new token a sequence from a state (inference after
//!   a prompt's forward). Every call returns [`Result`] with a typed [`GlaError`] (no GPU, no NVRTC, a wrong shape,
//!   ...); nothing panics for want of a GPU.
//! * [`KernelSpec`] / [`all_variants`] (from `gla-codegen`): the kernel variants, one of which
//!   [`ForwardOptions::variant`] may pick (the default is [`KernelSpec::default_for`] the head dims).
//! * [`gates`]: the built-in gates (GLA, Mamba-2, mLSTM, Gated RetNet, HGRN-2, RWKV-6, RetNet), declared with the
//!   macro itself. (`gates::Gla` is the GLA *gate*; `gla::Gla` is the runtime handle.)
//! * [`prelude`]: the macro, [`Gate`], [`GateShape`], the f32 gate functions ([`math`]), [`Gla`],
//!   [`ForwardOptions`], [`ForwardOutput`], [`DeviceTensor`], [`HostTensor`], [`DType`], [`Dims`], [`GlaError`].
//! * [`core`], [`runtime`], [`codegen`]: the underlying crates, for everything else ([`core::gate_ref`] runs a
//!   gate end to end on the CPU from raw logits: the f64 reference every kernel is tested against).
//!
//! ```
//! use gla::prelude::*;
//!
//! /// GLA (paper §4.4): α = σ(x)^(1/16)
//! #[gated_linear_attention(gate = per_key)]
//! fn my_gla(x: f32) -> f32 {
//!     log_sigmoid(x) / 16.0
//! }
//!
//! assert!(my_gla(0.3) < 0.0); // still a plain fn
//! assert_eq!(MyGla.name(), "my_gla");
//! assert_eq!(MyGla.cuda_ident(), "gla_gate_my_gla");
//! assert!((MyGla.log_alpha(0.3, &[]) - my_gla(0.3) as f64).abs() < 1e-6);
//!
//! // On the GPU (see examples/forward.rs); without one, `Gla::new` returns a typed error.
//! match Gla::new() {
//!     Ok(gla) => println!("{:?}", gla.gpu().info()),
//!     Err(e) => println!("no GPU run: {e}"),
//! }
//! ```
#![forbid(unsafe_code)]

extern crate self as gla;

pub use gla_core::error::Result;
pub use gla_core::tensor::HostData;
pub use gla_core::{
    self as core, registered_gates, DType, Dims, Gate, GateRegistration, GateShape, GlaError,
    HostTensor, ParamSpec,
};
pub use gla_macros::gated_linear_attention;

// The runtime (the only crate that talks to CUDA) and the kernel variants it runs.
pub use gla_codegen::{self as codegen, all_variants, KernelSpec};
pub use gla_runtime::forward::logits_shape;
pub use gla_runtime::{
    self as runtime, cache::TuningCache, tuned::TuningStats, BackwardForm, BackwardOptions,
    CompileOptions, DecodeOptions, DeviceInfo, DeviceTensor, ForwardOptions, ForwardOutput, Gla,
    Gpu, Gradients,
};

pub mod gates;
pub mod math;

/// `use gla::prelude::*;`: the macro, the gate vocabulary, the f32 gate functions a gate body calls, and what a
/// forward pass needs (the [`Gla`] handle, its options and output, device and host tensors, dtypes, errors).
///
/// The built-in gates are not in the prelude: name them `gla::gates::Mamba2` etc. (`gla::gates::Gla`, the GLA gate,
/// would clash with the [`Gla`] handle).
pub mod prelude {
    pub use crate::gated_linear_attention;
    pub use crate::math::*;
    pub use crate::{
        BackwardForm, BackwardOptions, DType, DecodeOptions, DeviceTensor, Dims, ForwardOptions,
        ForwardOutput, Gate, GateShape, Gla, GlaError, Gradients, HostTensor,
    };
}

/// Paths used by the code `#[gated_linear_attention]` generates. Not public API.
#[doc(hidden)]
pub mod __private {
    pub use gla_core;
    pub use gla_core::__private::inventory;

    /// The f32 functions brought into scope inside a gate fn's body.
    pub use crate::math as gate_fns;

    /// f64 forms of the gate functions used by the generated CPU code (same stable formulas as the CUDA).
    pub mod math {
        #[inline]
        pub fn exp(a: f64) -> f64 {
            a.exp()
        }
        #[inline]
        pub fn log(a: f64) -> f64 {
            a.ln()
        }
        /// log(1 + a) (the simplifier's form of `log(1 ± u)`).
        #[inline]
        pub fn log1p(a: f64) -> f64 {
            a.ln_1p()
        }
        #[inline]
        pub fn sqrt(a: f64) -> f64 {
            a.sqrt()
        }
        #[inline]
        pub fn tanh(a: f64) -> f64 {
            a.tanh()
        }
        /// σ(a) via e = exp(−|a|): no overflow.
        #[inline]
        pub fn sigmoid(a: f64) -> f64 {
            let e = (-a.abs()).exp();
            if a >= 0.0 {
                1.0 / (1.0 + e)
            } else {
                e / (1.0 + e)
            }
        }
        /// log σ(a) = min(a, 0) − log1p(exp(−|a|)).
        #[inline]
        pub fn log_sigmoid(a: f64) -> f64 {
            a.min(0.0) - (-a.abs()).exp().ln_1p()
        }
        /// softplus(a) = max(a, 0) + log1p(exp(−|a|)).
        #[inline]
        pub fn softplus(a: f64) -> f64 {
            a.max(0.0) + (-a.abs()).exp().ln_1p()
        }
        #[inline]
        pub fn min(a: f64, b: f64) -> f64 {
            a.min(b)
        }
        #[inline]
        pub fn max(a: f64, b: f64) -> f64 {
            a.max(b)
        }
        #[inline]
        pub fn powf(a: f64, p: f64) -> f64 {
            a.powf(p)
        }
    }
}
