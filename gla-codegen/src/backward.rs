//! The backward pass's kernels (issue 28): the chunkwise backward of `gla_core::reference::chunkwise_backward`
//! (`cuda/bwd.cuh`: the paper's equations beside each stage), every decay factor exact (e^{Γ_i − Γ_j} with
//! Γ_i − Γ_j ≤ 0), so that it holds at any gate strength. Three kernels: the chunk states forward, their gradients
//! in reverse, then every chunk's dq, dk, dv and gate gradients at once — on bf16 / f16 key gates up to d = 128 with
//! their decay-free products on tensor cores (`bwd_scan_tc.cuh`, `bwd_chunk_tc.cuh`,
//! [`BackwardSpec::tensor_cores`]), else in f32 on CUDA cores (`bwd_scan_f32.cuh`, `bwd_chunk_f32.cuh`,
//! `bwd_chunk_value.cuh` for per-value gates).
//!
//! What a backward kernel set is: the gate, the dtype and the specialised head dims ([`specialised_dim`]); its chunk
//! size follows from them so that one chunk's tiles fit in shared memory ([`backward_chunk`]).

use crate::spec::{specialised_dim, MAX_SMEM_BYTES};
use crate::writer::{elem_section, gate_math_section, write_gate_shape, PRELUDE};
use gla_core::{DType, Gate, GateShape, GlaError};
use std::fmt::Write as _;

const BWD: &str = include_str!("cuda/bwd.cuh");
const BWD_SCAN_F32: &str = include_str!("cuda/bwd_scan_f32.cuh");
const BWD_SCAN_TC: &str = include_str!("cuda/bwd_scan_tc.cuh");
const BWD_CHUNK_F32: &str = include_str!("cuda/bwd_chunk_f32.cuh");
const BWD_CHUNK_TC: &str = include_str!("cuda/bwd_chunk_tc.cuh");
const BWD_CHUNK_VALUE: &str = include_str!("cuda/bwd_chunk_value.cuh");

/// Threads a CTA of every backward kernel.
pub const BWD_THREADS: u32 = 256;
/// The kernels, in launch order.
pub const BWD_KERNELS: [&str; 3] = ["gla_bwd_states", "gla_bwd_dstates", "gla_bwd_chunk"];

/// One backward kernel set: for `gate` in `dtype` at head dims up to `dk` × `dv` (specialised).
#[derive(Clone, Copy, Debug)]
pub struct BackwardSpec {
    pub gate: &'static dyn Gate,
    pub dtype: DType,
    /// Specialised d_k (64, 128, 256 or 512): the kernels serve any d_k up to it.
    pub dk: u32,
    /// Specialised d_v.
    pub dv: u32,
}

impl BackwardSpec {
    /// The kernel set for a problem's gate, dtype and head dims. Errors: a head dim over [`crate::MAX_HEAD_DIM`].
    pub fn for_problem(
        gate: &'static dyn Gate,
        dtype: DType,
        dk: usize,
        dv: usize,
    ) -> Result<Self, GlaError> {
        let spec = |d: usize, what: &'static str| {
            specialised_dim(d).ok_or_else(|| {
                GlaError::invalid(what, format!("must be 1..=512 for the backward, got {d}"))
            })
        };
        Ok(BackwardSpec {
            gate,
            dtype,
            dk: spec(dk, "d_k")?,
            dv: spec(dv, "d_v")?,
        })
    }

    /// Chunk size: 32 rows on the tensor-core kernels; on the f32 ones 32 up to d = 128, 16 at 256, 8 at 512 (one
    /// chunk's f32 tiles in shared memory).
    pub fn chunk(&self) -> u32 {
        if self.tensor_cores() {
            32
        } else {
            backward_chunk(self.dk.max(self.dv))
        }
    }

    /// Whether the kernels run their decay-free products on tensor cores (`cuda/bwd_scan_tc.cuh`: the state
    /// scans, `cuda/bwd_chunk_tc.cuh`: the chunk kernel): bf16 and f16 key gates at head dims up to 256 (chunk 32;
    /// one chunk kernel CTA an SM at 256, two at 128). f32, per-value gates and d = 512 take the f32 CUDA-core kernels.
    pub fn tensor_cores(&self) -> bool {
        self.dtype != DType::F32
            && self.dk <= 256
            && self.dv <= 256
            && self.gate.shape() != GateShape::PerValue
    }

    /// Value columns a CTA of the two state scans (`gla_bwd_states`, `gla_bwd_dstates`) carries: 64 on the
    /// tensor-core scans (one wave of CTAs at 8 × 16 heads; each CTA's gate and decayed-operand work is spread over
    /// twice the columns of 32), 32 on the f32 ones (their state slice lives in shared memory).
    pub fn state_cols(&self) -> u32 {
        if self.tensor_cores() {
            64
        } else {
            32
        }
    }

    /// Dynamic shared memory of kernel `name` (one of [`BWD_KERNELS`]), bytes.
    pub fn smem_bytes(&self, name: &str) -> u32 {
        let (c, dk, dv, bv) = (self.chunk(), self.dk, self.dv, self.state_cols());
        match name {
            // element tiles Q, K, K̂ (later A [C][C] f32) [C][dk+8], V, dO [C][dv+8]; f32 Γ, dq, dk, α [C][dk],
            // dA [C][C], R [dk], W [C] (the states go from the workspace straight into mma fragments)
            "gla_bwd_chunk" if self.tensor_cores() => {
                2 * (3 * c * (dk + 8) + 2 * c * (dv + 8)) + 4 * (4 * c * dk + c * c + dk + c)
            }
            // f32 Q, K, Γ, K̂/P, dq, dk, α [C][dk], V, dO [C][dv+1], A, dA, R, W
            // per value: f32 Q, K [C][dk], V, dO [C][dv+1], Γ, β, ô, dv [C][dv], B, dA, R, W
            "gla_bwd_chunk" if self.gate.shape() == GateShape::PerValue => {
                4 * (2 * c * dk + 2 * c * (dv + 1) + 4 * c * dv + 2 * c * c + dv + c)
            }
            "gla_bwd_chunk" => 4 * (7 * c * dk + 2 * c * (dv + 1) + 2 * c * c + dk + c),
            // Γ [C][dk] f32, the decayed operand (high, low) [C][dk+8] and this tile's V / dO [C][bv+8] elements
            _ if self.tensor_cores() => 4 * c * dk + 2 * (2 * c * (dk + 8) + c * (bv + 8)),
            _ => 4 * (dk * bv + 2 * c * dk + c * bv),
        }
    }

    /// A name for logs: `gla.bwd.bf16.k128.v128`.
    pub fn id(&self) -> String {
        format!(
            "{}.bwd.{}.k{}.v{}",
            self.gate.name(),
            self.dtype,
            self.dk,
            self.dv
        )
    }
}

/// The launch grids of [`BWD_KERNELS`] of `spec`, in order, for `n_seqs` sequences of `chunks` chunks in all (every
/// sequence's, at [`BackwardSpec::chunk`]), `h` heads and `dv` value columns: the two state scans a CTA per (value
/// tile of [`BackwardSpec::state_cols`], head, sequence), the chunk kernel a CTA per (chunk, head). An axis of 0
/// means nothing to launch. Blocks of [`BWD_THREADS`] threads.
pub fn backward_grids(
    spec: &BackwardSpec,
    dv: usize,
    h: usize,
    n_seqs: usize,
    chunks: usize,
) -> [(u32, u32, u32); 3] {
    let scan = (
        dv.div_ceil(spec.state_cols() as usize) as u32,
        h as u32,
        n_seqs as u32,
    );
    [scan, scan, (chunks as u32, h as u32, 1)]
}

/// The backward's chunk size for a specialised head dim `d`.
pub fn backward_chunk(d: u32) -> u32 {
    (4096 / d.max(1)).clamp(8, 32)
}

/// The C mirror of `struct BwdArgs` in `cuda/bwd.cuh`: 19 device pointers (0 = absent), then 8 four-byte fields.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct BackwardArgs {
    pub q: u64,
    pub k: u64,
    pub v: u64,
    /// Raw gate logits, or 0 (fixed gates).
    pub g: u64,
    pub params: u64,
    pub h0: u64,
    pub d_o: u64,
    /// The final state's gradient, or 0.
    pub dht: u64,
    pub dq: u64,
    pub dk: u64,
    pub dv: u64,
    /// The logits' gradient (like `g`), or 0.
    pub dg: u64,
    /// f32 `[H, P]`, zeroed before the launch, or 0.
    pub dparams: u64,
    pub dh0: u64,
    /// f32 workspace `[chunks + N, H, d_k, d_v]`: S_[c].
    pub states: u64,
    /// Alike: dS_[c].
    pub dstates: u64,
    pub cu_seqlens: u64,
    pub chunk_offsets: u64,
    pub chunk_index: u64,
    pub n_seqs: i32,
    pub h: i32,
    pub d_k: i32,
    pub d_v: i32,
    pub scale: f32,
    pub pad: [i32; 3],
}

/// The CUDA source of `spec`'s three kernels (self-contained, no `#include`).
pub fn generate_backward(spec: &BackwardSpec) -> Result<String, GlaError> {
    for name in BWD_KERNELS {
        if spec.smem_bytes(name) > MAX_SMEM_BYTES {
            return Err(GlaError::invalid(
                "head dims",
                format!(
                    "{}: {name} needs {} B of shared memory",
                    spec.id(),
                    spec.smem_bytes(name)
                ),
            ));
        }
    }
    let gate = spec.gate;
    let mut w = String::new();
    let _ = writeln!(
        w,
        "// {}: generated by gla-codegen (backward, exact decays; chunk kernel: {})",
        spec.id(),
        if spec.tensor_cores() {
            "decay-free products on tensor cores"
        } else {
            "f32 CUDA cores"
        }
    );
    let _ = writeln!(w, "// gate `{}`: log α = {}", gate.name(), gate.expr());
    let _ = writeln!(w, "typedef long long i64;");
    write_gate_shape(&mut w, gate.shape());
    let _ = writeln!(
        w,
        "constexpr int C = {}, DK = {}, DV = {}, NT = {BWD_THREADS}, BVS = {};  // chunk, specialised head dims, threads, state-scan value tile",
        spec.chunk(),
        spec.dk,
        spec.dv,
        spec.state_cols()
    );
    let _ = writeln!(w, "constexpr int NPARAM = {};", gate.params().len());
    let _ = writeln!(
        w,
        "constexpr int GCOLS = {};  // the gate's columns a token: d_k (key gates) or d_v (value gates), specialised",
        if gate.shape() == GateShape::PerValue {
            spec.dv
        } else {
            spec.dk
        }
    );
    w.push_str(elem_section(spec.dtype));
    if spec.tensor_cores() {
        w.push_str(PRELUDE); // the mma.sync tile product warp_mma
    }
    // The gate's math in IEEE f32 whatever the dtype: the parameter gradient sums ∂log α/∂p, whose relative precision
    // counts, and the special-function unit's log is only absolutely accurate (log σ(u) = −log(1 + e^−u) at u = 12
    // came out 4 % off: a value gate's d params measured 6.6e-3 on the H200 with it).
    w.push_str(gate_math_section(DType::F32));
    let _ = writeln!(
        w,
        "// ---- gate `{}` (generated by #[gated_linear_attention]) ----",
        gate.name()
    );
    w.push_str(gate.cuda_source());
    let id = gate.cuda_ident();
    let _ = writeln!(w);
    let _ = writeln!(w, "__device__ __forceinline__ float gate_log_alpha(float x, const float* p) {{ return {id}(x, p); }}");
    let _ = writeln!(w, "__device__ __forceinline__ float gate_dx(float x, const float* p) {{ return {id}_dx(x, p); }}");
    let _ = writeln!(w, "__device__ __forceinline__ void gate_dp(float x, const float* p, float* dp) {{ {id}_dp(x, p, dp); }}");
    w.push_str(BWD);
    w.push_str(if spec.tensor_cores() {
        BWD_SCAN_TC
    } else {
        BWD_SCAN_F32
    });
    w.push_str(if gate.shape() == GateShape::PerValue {
        BWD_CHUNK_VALUE
    } else if spec.tensor_cores() {
        BWD_CHUNK_TC
    } else {
        BWD_CHUNK_F32
    });
    Ok(w)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{FIXED, PER_HEAD, PER_KEY, PER_VALUE};

    #[test]
    fn the_args_mirror_is_packed() {
        assert_eq!(std::mem::size_of::<BackwardArgs>(), 19 * 8 + 8 * 4);
        assert_eq!(std::mem::align_of::<BackwardArgs>(), 8);
    }

    #[test]
    fn chunk_and_shared_memory_fit_at_every_head_dim() {
        for d in [64u32, 128, 256, 512] {
            let s = BackwardSpec {
                gate: &PER_KEY,
                dtype: DType::BF16,
                dk: d,
                dv: d,
            };
            assert_eq!(s.chunk(), [32, 32, 32, 8][d.trailing_zeros() as usize - 6]);
            assert_eq!(s.tensor_cores(), d <= 256);
            for k in BWD_KERNELS {
                assert!(
                    s.smem_bytes(k) <= MAX_SMEM_BYTES,
                    "{} {k}: {}",
                    s.id(),
                    s.smem_bytes(k)
                );
            }
            let src = generate_backward(&s).unwrap();
            assert!(
                src.contains(&format!(
                    "constexpr int C = {}, DK = {d}, DV = {d}",
                    s.chunk()
                )),
                "{}",
                s.id()
            );
            for k in BWD_KERNELS {
                assert!(
                    src.contains(&format!(" {k}(const __grid_constant__ BwdArgs a)")),
                    "{k}"
                );
            }
        }
    }

    #[test]
    fn gate_shapes() {
        let s = BackwardSpec::for_problem(&PER_HEAD, DType::F32, 100, 64).unwrap();
        assert_eq!((s.dk, s.dv), (128, 64));
        assert!(generate_backward(&s)
            .unwrap()
            .contains("#define KEY_GATE GATE_PER_HEAD"));
        assert!(BackwardSpec::for_problem(&PER_KEY, DType::F32, 513, 64)
            .unwrap_err()
            .to_string()
            .contains("1..=512"));
        let pv = BackwardSpec::for_problem(&PER_VALUE, DType::BF16, 64, 64).unwrap();
        assert!(!pv.tensor_cores());
        assert!(generate_backward(&pv)
            .unwrap()
            .contains("constexpr int GCOLS = 64"));
        let f = BackwardSpec::for_problem(&FIXED, DType::BF16, 64, 64).unwrap();
        assert!(generate_backward(&f)
            .unwrap()
            .contains("#define KEY_GATE GATE_FIXED"));
    }
}
