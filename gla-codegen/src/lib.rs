//! gla-codegen: a validated [`KernelSpec`] → CUDA C++ source + [`LaunchPlan`].
//!
//! Pure Rust and deterministic: no GPU, no NVRTC, no I/O. The emitted source is self-contained (no `#include`),
//! so NVRTC needs no CUDA headers. Every stage of the emitted kernel carries the paper's equation as a comment.
#![forbid(unsafe_code)]

pub mod backward;
pub mod decode;
pub mod features;
pub mod fixtures;
pub mod plan;
pub mod record;
pub mod resolve;
pub mod spec;
pub mod variants;
pub mod writer;

pub use backward::{
    backward_grids, generate_backward, walk_segments, BackwardArgs, BackwardForm, BackwardSpec,
    BWD_KERNELS, BWD_THREADS, BWD_WALK_KERNELS,
};
pub use decode::{
    decode_grid, decode_id, decode_smem_bytes, generate_decode, DecodeArgs, DECODE_KERNEL,
    DECODE_THREADS,
};
pub use features::{Family, Features, Issue, RegisterSplit, SmemLayout};
pub use plan::{
    key_split_workspace_bytes, segment_chunks, segment_workspace_bytes, segments, segments_on,
    spills_acceptable, total_segments, ForwardArgs, GridAxis, KernelLaunch, LaunchPlan, TmaMap,
    LEAD_AHEAD_PER_KEY_PERMILLE, LEAD_AHEAD_SCALAR_PERMILLE, LEAD_PERMILLE, WAVE_CTAS,
};
pub use record::{BackwardRecord, SpecRecord};
pub use spec::{
    specialised_dim, KernelSpec, Pass, Tiles, MAX_HEAD_DIM, MAX_SMEM_BYTES, SMEM_PER_SM,
    SMEM_RESERVED_PER_CTA,
};
pub use variants::{
    all_variants, dq_dk_pass_variants, dv_pass_variants, per_key_pass_tiles,
    per_key_passes_default, per_key_passes_default_at,
};
pub use writer::Generated;

/// Generate the CUDA source and launch plan of `spec` (validated first).
pub fn generate(spec: &KernelSpec) -> Result<Generated, gla_core::GlaError> {
    spec.validate()?;
    Ok(writer::write_forward(spec))
}
