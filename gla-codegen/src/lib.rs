//! gla-codegen: a validated [`KernelSpec`] → CUDA C++ source + [`LaunchPlan`].
//!
//! Pure Rust and deterministic: no GPU, no NVRTC, no I/O. The emitted source is self-contained (no `#include`),
//! so NVRTC needs no CUDA headers. Every stage of the emitted kernel carries the paper's equation as a comment.
#![forbid(unsafe_code)]

pub mod plan;
pub mod spec;
pub mod writer;
pub mod fixtures;

pub use plan::{key_split_workspace_bytes, segment_chunks, segment_workspace_bytes, segments, segments_on, spills_acceptable, total_segments, lead_permille, ForwardArgs, TmaMap, GridAxis, KernelLaunch, LaunchPlan, LEAD_AHEAD_PER_KEY_PERMILLE, LEAD_AHEAD_SCALAR_PERMILLE, LEAD_PERMILLE, WAVE_CTAS};
pub use spec::{all_variants, generate, specialised_dim, Generated, KernelSpec, Pass, Tiles, MAX_SMEM_BYTES, SMEM_PER_SM, SMEM_RESERVED_PER_CTA};
