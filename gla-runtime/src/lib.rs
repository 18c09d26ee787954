//! gla-runtime: the only crate that talks to CUDA.
//!
//! * [`nvrtc`]: CUDA C++ → sm_90a cubin with NVRTC 13, plus ptxas's per-kernel resource report. Needs no GPU.
//! * [`device`]: driver probe, [`Gpu`] (context, default stream, device facts), module cache.
//! * [`tensor`]: [`DeviceTensor`] (upload, download, zeros, NaN poison).
//! * [`launch`]: grid resolution, sequence arrays, [`launch::Variant`] (a compiled plan) and the kernel launch.
//! * [`forward`]: the safe API, [`Gla::forward`], with all validation in the pure [`validate_forward`];
//!   [`Gla::backward`] (first form of the backward pass).
//! * [`timing`]: CUDA-event timing, L2 flush, device-to-device copy bandwidth.
//! * [`testing`]: skip-or-fail helpers for GPU and NVRTC tests.
//! * [`cache`]: the tuning cache (a directory of `index.json` + content-addressed cubins; validators, merge, locked
//!   atomic saves).
//! * [`tuned`]: dispatch — the variant and cubin a call that names none runs, from the tuning caches.
//!
//! `unsafe` is denied crate-wide and allowed in two private places only: `ffi` (NVRTC program calls, `dlopen`,
//! library probes, raw memsets and uninitialised allocations) and the kernel launch in [`launch`] (the
//! `DeviceRepr` impls of the argument structs and `unsafe fn launch` / `launch_backward`, whose soundness argument
//! heads that module).
//! Every `unsafe` block carries a `// SAFETY:` comment.
//!
//! No call panics for want of a GPU or of NVRTC: probes run first and return `GlaError::NoDriver`,
//! `GlaError::NoDevice` or `GlaError::NoNvrtc`.
#![deny(unsafe_code)]

#[allow(unsafe_code)]
mod ffi;

pub mod cache;
pub mod device;
pub mod forward;
pub mod launch;
pub mod nvrtc;
pub mod tensor;
pub mod testing;
pub mod timing;
pub mod tuned;

#[cfg(test)]
mod gpu_tests;

pub use device::{DeviceInfo, Gpu};
pub use forward::{
    validate_forward, BackwardOptions, DecodeOptions, ForwardOptions, ForwardOutput,
    ForwardRequest, Gla, Gradients, ResolvedProblem, TensorDesc,
};
pub use gla_codegen::BackwardForm;
pub use launch::Variant;
pub use nvrtc::{CompileOptions, Compiled, KernelResources};
pub use tensor::DeviceTensor;

// Gla is shared across threads (tests, the tuner): keep it Send + Sync.
const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<Gla>();
    send_sync::<DeviceTensor>();
};
