//! The backward pass's kernels (issue 28): the chunkwise backward of `gla_core::reference::chunkwise_backward`
//! (`cuda/bwd.cuh`: the paper's equations beside each stage), every decay factor exact (e^{Γ_i − Γ_j} with
//! Γ_i − Γ_j ≤ 0), so that it holds at any gate strength. Three kernels: the chunk states forward, their gradients
//! in reverse, then every chunk's dq, dk, dv and gate gradients at once — on bf16 / f16 key gates up to d = 128 with
//! their decay-free products on tensor cores (`bwd_scan_tc.cuh`, `bwd_chunk_tc.cuh`,
//! [`BackwardSpec::tensor_cores`]), else in f32 on CUDA cores (`bwd_scan_f32.cuh`, `bwd_chunk_f32.cuh`,
//! `bwd_chunk_value.cuh` for per-value gates).
//!
//! The walk form ([`BackwardForm::Walks`], `cuda/bwd_walk_tc.cuh`) keeps no chunk state in HBM: dq, dk and dv are
//! three walks over the chunks with their state slices on chip (the decomposition of
//! `gla_core::reference::walks_backward`), the gate's gradients by a reverse sum (bf16 / f16 key gates, d ≤ 256).
//!
//! What a backward kernel set is: the gate, the dtype, the specialised head dims ([`specialised_dim`]) and the form;
//! its chunk size follows from them so that one chunk's tiles fit in shared memory ([`backward_chunk`]).

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
const BWD_WALK_TC: &str = include_str!("cuda/bwd_walk_tc.cuh");

/// Threads a CTA of every backward kernel.
pub const BWD_THREADS: u32 = 256;
/// The chunk form's kernels, in launch order.
pub const BWD_KERNELS: [&str; 3] = ["gla_bwd_states", "gla_bwd_dstates", "gla_bwd_chunk"];
/// The walk form's kernels, in launch order (the three segment kernels have empty grids where every sequence is
/// one segment, `gla_bwd_gate` for per-key gates).
pub const BWD_WALK_KERNELS: [&str; 8] = [
    "gla_bwd_gamma",
    "gla_bwd_seg_states",
    "gla_bwd_seg_dstates",
    "gla_bwd_seg_combine",
    "gla_bwd_walk_dq",
    "gla_bwd_walk_dk",
    "gla_bwd_walk_dv",
    "gla_bwd_gate",
];
/// Columns of a state slice a walk CTA carries (`WT` of `cuda/bwd_walk_tc.cuh`).
const WALK_TILE: usize = 64;

/// How a backward kernel set computes the gradients.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum BackwardForm {
    /// Every chunk's state `S_[c]` and state gradient `dS_[c]` through HBM (two state scans, then every chunk at
    /// once): 2 · (chunks + N) · H · d_k · d_v f32 of workspace. Every gate shape, dtype and head dim.
    #[default]
    Chunks,
    /// No chunk state in HBM: dq, dk and dv as three walks over the chunks with their state slices in registers,
    /// the gate's gradient as a reverse sum; q ⊙ dq (f32, tokens · H · d_k) is the one large workspace. bf16 / f16
    /// key gates at d_k, d_v ≤ 256 ([`BackwardSpec::tensor_cores`]).
    Walks,
}

/// One backward kernel set: for `gate` in `dtype` at head dims up to `dk` × `dv` (specialised), in `form`.
#[derive(Clone, Copy, Debug)]
pub struct BackwardSpec {
    pub gate: &'static dyn Gate,
    pub dtype: DType,
    /// Specialised d_k (64, 128, 256 or 512): the kernels serve any d_k up to it.
    pub dk: u32,
    /// Specialised d_v.
    pub dv: u32,
    pub form: BackwardForm,
}

impl BackwardSpec {
    /// The chunk-form kernel set for a problem's gate, dtype and head dims. Errors: a head dim over
    /// [`crate::MAX_HEAD_DIM`].
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
            form: BackwardForm::Chunks,
        })
    }

    /// The set the runtime runs for a problem when neither the call nor a tuning cache names one: the walk form
    /// where it has kernels (no chunk state in HBM: 8× less workspace, and faster than the chunk form at 7 of the 8
    /// (gate, shape) pairs timed on the H200 in session x), else the chunk form. Errors as
    /// [`BackwardSpec::for_problem`].
    pub fn default_for(
        gate: &'static dyn Gate,
        dtype: DType,
        dk: usize,
        dv: usize,
    ) -> Result<Self, GlaError> {
        let s = BackwardSpec::for_problem(gate, dtype, dk, dv)?;
        Ok(s.with_form(BackwardForm::Walks).unwrap_or(s))
    }

    /// The same set in `form`. Errors: the walk form where it has no kernels (f32, per-value gates, d over 256).
    pub fn with_form(self, form: BackwardForm) -> Result<Self, GlaError> {
        if form == BackwardForm::Walks && !self.tensor_cores() {
            return Err(GlaError::invalid(
                "backward form",
                format!(
                    "{}: the walk form runs bf16 / f16 per-key, per-head and fixed gates at d_k, d_v <= 256; \
                     use the chunk form",
                    self.id()
                ),
            ));
        }
        Ok(BackwardSpec { form, ..self })
    }

    /// The segments' workspaces (elements) of the walk form: ΔS and ΔdS (`segments` · H · d_k · d_v each) and Σ log α
    /// (`segments` · H · d_k) where some sequence is several segments (`segments` > `n_seqs`), else none. None
    /// where the sizes overflow.
    pub fn segment_elems(
        &self,
        n_seqs: usize,
        segments: usize,
        h: usize,
        dk: usize,
        dv: usize,
    ) -> Option<[usize; 3]> {
        if self.form != BackwardForm::Walks || segments <= n_seqs {
            return Some([0; 3]);
        }
        let g = segments.checked_mul(h)?.checked_mul(dk)?;
        let s = g.checked_mul(dv)?;
        Some([s, s, g])
    }

    /// The walk form's factorised intra-chunk terms: the largest decay span of a chunk (nats, max over its key
    /// columns of Γ_0 − Γ_last) whose pairs' decays factor through the chunk's first or last row, or `None` where
    /// every chunk takes the exact pairs. bf16: 64 · ln 2 (the forward's SPAN_MAX; the operands scaled down by up to
    /// e^−span keep their high + low bits far above bf16's smallest normal, and the dv walk's operand scaled up by up
    /// to e^span stays far below its largest). f16's range (6.1e-5 .. 65504) would allow only a few nats: exact.
    pub fn walk_span(&self) -> Option<f32> {
        (self.form == BackwardForm::Walks && self.dtype == DType::BF16)
            .then_some(64.0 * std::f32::consts::LN_2)
    }

    /// Chunks a walk segment should take for sequences of `max_chunks` chunks at most, `n_seqs` of them, `h` heads,
    /// d_k `dk`, on a GPU of `sms` multiprocessors: 0 (every sequence one segment) where the walks' CTAs — ⌈d_k /
    /// 64⌉ · H · N — give every multiprocessor one at least; else the fewest chunks (at least 16) a segment that
    /// give each two. (A heuristic: `autotune --backward` times it against walking whole.)
    pub fn walk_segment_chunks(
        &self,
        max_chunks: usize,
        n_seqs: usize,
        h: usize,
        dk: usize,
        sms: u32,
    ) -> u32 {
        let ctas = dk.div_ceil(WALK_TILE) * h * n_seqs;
        let want = 2 * sms as usize;
        if self.form != BackwardForm::Walks || ctas == 0 || ctas >= sms as usize {
            return 0;
        }
        let per_seq = want.div_ceil(ctas);
        let k = max_chunks.div_ceil(per_seq).max(16);
        if k >= max_chunks {
            0
        } else {
            k as u32
        }
    }

    /// The kernels of this set, in launch order.
    pub fn kernels(&self) -> &'static [&'static str] {
        match self.form {
            BackwardForm::Chunks => &BWD_KERNELS,
            BackwardForm::Walks => &BWD_WALK_KERNELS,
        }
    }

    /// The two f32 workspaces (elements) of a call with `tokens` tokens in `n_seqs` sequences of `chunks` chunks
    /// in all (`segments` walk segments, [`walk_segments`]), `h` heads, head dims `dk` × `dv`: the chunk form's `S_[c]`
    /// and `dS_[c]` ((chunks + N) · H · d_k · d_v each); the walk form's q ⊙ dq (tokens · H · d_k) and Z (segments · H
    /// · d_k) with the dq / dk passes' row sums (a scalar gate's ⌈d_k / 64⌉ · tokens · H, a per-key gate's q ⊙ dq,
    /// tokens · H · d_k). The segments' own three are
    /// [`BackwardSpec::segment_elems`]. None where the sizes overflow.
    #[allow(clippy::too_many_arguments)]
    pub fn workspace_elems(
        &self,
        tokens: usize,
        n_seqs: usize,
        chunks: usize,
        segments: usize,
        h: usize,
        dk: usize,
        dv: usize,
    ) -> Option<[usize; 2]> {
        match self.form {
            BackwardForm::Chunks => {
                let s = (chunks.checked_add(n_seqs)?)
                    .checked_mul(h)?
                    .checked_mul(dk)?
                    .checked_mul(dv)?;
                Some([s, s])
            }
            BackwardForm::Walks => {
                let pq = tokens.checked_mul(h)?.checked_mul(dk)?;
                // (the dq / dk passes' row sums: a per-key gate's q ⊙ dq by key column, which the dk pass reads)
                let rows = if self.gate.shape() == GateShape::PerKey {
                    pq
                } else {
                    dk.div_ceil(WALK_TILE).checked_mul(tokens)?.checked_mul(h)?
                };
                Some([
                    if self.walk_gamma() {
                        pq.checked_mul(2)?
                    } else {
                        pq
                    },
                    segments
                        .checked_mul(h)?
                        .checked_mul(dk)?
                        .checked_add(rows)?,
                ])
            }
        }
    }

    /// Whether `gla_bwd_gamma` computes a per-key gate's Γ once for the walks (the walk form's per-key gates): f32
    /// `[tokens, H, d_k]` in workspace 0 after q ⊙ dq, at element [`BackwardSpec::gamma_offset`].
    pub fn walk_gamma(&self) -> bool {
        self.form == BackwardForm::Walks && self.gate.shape() == GateShape::PerKey
    }

    /// Where Γ starts in workspace 0 (elements; q ⊙ dq comes first), for `tokens` tokens, `h` heads and `dk`, where
    /// [`BackwardSpec::walk_gamma`]; else None. [`BackwardArgs::gamma`] is that workspace's address plus 4 × this.
    pub fn gamma_offset(&self, tokens: usize, h: usize, dk: usize) -> Option<usize> {
        if self.walk_gamma() {
            tokens.checked_mul(h)?.checked_mul(dk)
        } else {
            None
        }
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

    /// Dynamic shared memory of kernel `name` (one of [`BackwardSpec::kernels`]), bytes.
    pub fn smem_bytes(&self, name: &str) -> u32 {
        let (c, dk, dv, bv) = (self.chunk(), self.dk, self.dv, self.state_cols());
        let t = WALK_TILE as u32;
        match name {
            // f32 Γ, α, dq [C][WT], dA [C][C], Z_N's halves [2][WT]; elements dO, V [C][DV+8], q, k, K̂ low
            // [C][WT+8], S high + low [WT][DV+8], the off-diagonal block's K̃ high +
            // low [C/2][WT+8] and dA high + low [C][C+8] (the off-diagonal block's [C/2][C/2+8], or the whole
            // chunk's where it is factorised)
            "gla_bwd_walk_dq" => {
                4 * (3 * c * t + c * c + 2 * t)
                    + 2 * (2 * c * (dv + 8) + 3 * c * (t + 8) + 2 * t * (dv + 8))
                    + 2 * (c * (t + 8) + 2 * c * (c + 8))
            }
            // the same with the running Z (two buffers by chunk parity) [2][WT] and the group sums [4][WT] in place of
            // Z_N's halves (Q̃ for K̃), and q ⊙ dq [C][WT]
            "gla_bwd_walk_dk" => {
                4 * (4 * c * t + c * c + 6 * t)
                    + 2 * (2 * c * (dv + 8) + 3 * c * (t + 8) + 2 * t * (dv + 8))
                    + 2 * (c * (t + 8) + 2 * c * (c + 8))
            }
            // f32 Γ, α [C][DK]; elements q, Q̂ low, k [C][DK+8], dO [C][WT+8], A high + low [C][C+8], dS high +
            // low [DK][WT+8]
            "gla_bwd_walk_dv" => {
                4 * (2 * c * dk)
                    + 2 * (3 * c * (dk + 8) + c * (t + 8) + 2 * c * (c + 8) + 2 * dk * (t + 8))
            }
            // the threads' runs' totals [NT]
            "gla_bwd_gate" => 4 * BWD_THREADS,
            // none (a thread a column of a chunk, in registers)
            "gla_bwd_gamma" => 0,
            // the chunk form's tensor-core state scans' (bwd_scan_tc.cuh) in segment mode; the combine none
            "gla_bwd_seg_states" | "gla_bwd_seg_dstates" => {
                4 * c * dk + 2 * (2 * c * (dk + 8) + c * (bv + 8))
            }
            "gla_bwd_seg_combine" => 0,
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

    /// A name for logs: `gla.bwd.bf16.k128.v128` (the chunk form), `gla.bwd.bf16.k128.v128.walk`.
    pub fn id(&self) -> String {
        format!(
            "{}.bwd.{}.k{}.v{}{}",
            self.gate.name(),
            self.dtype,
            self.dk,
            self.dv,
            if self.form == BackwardForm::Walks {
                ".walk"
            } else {
                ""
            }
        )
    }
}

/// The launch grids of [`BackwardSpec::kernels`], in order, for `n_seqs` sequences of `chunks` chunks in all (every
/// sequence's, at [`BackwardSpec::chunk`]), `h` heads and head dims `dk` × `dv`. The chunk form: the two state scans a
/// CTA per (value tile of [`BackwardSpec::state_cols`], head, sequence), the chunk kernel a CTA per (chunk, head).
/// The walk form (`segments` in all, [`walk_segments`]): a per-key gate's Γ a thread per (chunk, key column); where some sequence is several segments, their first pass a
/// CTA per (64 value columns, head, segment) twice and the combine a CTA per (256 state elements, head, sequence);
/// the dq and dk walks a CTA per (64 key columns, head, segment), the dv walk per (64 value columns, head, segment),
/// the gate a CTA per (head, sequence) for scalar gates (none for per-key ones). An axis of 0 means nothing to
/// launch. Blocks of [`BWD_THREADS`] threads.
pub fn backward_grids(
    spec: &BackwardSpec,
    dk: usize,
    dv: usize,
    h: usize,
    n_seqs: usize,
    chunks: usize,
    segments: usize,
) -> Vec<(u32, u32, u32)> {
    let (h32, n32) = (h as u32, n_seqs as u32);
    match spec.form {
        BackwardForm::Chunks => {
            let scan = (dv.div_ceil(spec.state_cols() as usize) as u32, h32, n32);
            vec![scan, scan, (chunks as u32, h32, 1)]
        }
        BackwardForm::Walks => {
            let segs = segments as u32;
            let keys = (dk.div_ceil(WALK_TILE) as u32, h32, segs);
            let values = (dv.div_ceil(WALK_TILE) as u32, h32, segs);
            let gate = if spec.gate.shape() == GateShape::PerKey {
                (0, 0, 0)
            } else {
                (h32, n32, 1)
            };
            // The segments' first pass and combine only where some sequence is more than one segment.
            let (first, combine) = if segments > n_seqs {
                (
                    values,
                    ((dk * dv).div_ceil(BWD_THREADS as usize) as u32, h32, n32),
                )
            } else {
                ((0, 0, 0), (0, 0, 0))
            };
            // Γ once (per-key gates): a thread per (chunk, key column), a CTA per (BWD_THREADS / 64 chunks, head,
            // 64 key columns).
            let gamma = if spec.walk_gamma() {
                (
                    chunks.div_ceil(BWD_THREADS as usize / WALK_TILE) as u32,
                    h32,
                    dk.div_ceil(WALK_TILE) as u32,
                )
            } else {
                (0, 0, 0)
            };
            vec![gamma, first, first, combine, keys, keys, values, gate]
        }
    }
}

/// The walk form's segment arrays for sequences of `chunks[n]` chunks, `seg_chunks` chunks a segment (0: a sequence
/// is one segment): the sequences' first segments (`[N + 1]`, i64) and the (sequence, segment) pairs (i32, two a
/// segment). Every sequence has at least one segment (an empty one walks nothing but still passes its states on).
pub fn walk_segments(chunks: &[usize], seg_chunks: u32) -> (Vec<i64>, Vec<i32>) {
    let mut offsets = Vec::with_capacity(chunks.len() + 1);
    let mut index = Vec::new();
    let mut total = 0i64;
    for (n, &c) in chunks.iter().enumerate() {
        offsets.push(total);
        let segs = if seg_chunks == 0 {
            1
        } else {
            c.div_ceil(seg_chunks as usize).max(1)
        };
        for s in 0..segs {
            index.push(n as i32);
            index.push(s as i32);
        }
        total += segs as i64;
    }
    offsets.push(total);
    (offsets, index)
}

/// The backward's chunk size for a specialised head dim `d`.
pub fn backward_chunk(d: u32) -> u32 {
    (4096 / d.max(1)).clamp(8, 32)
}

/// The C mirror of `struct BwdArgs` in `cuda/bwd.cuh`: 24 device pointers (0 = absent), 6 four-byte fields, 3 pointers.
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
    /// f32 workspace `[chunks + N, H, d_k, d_v]`: `S_[c]`.
    pub states: u64,
    /// Alike: `dS_[c]`.
    pub dstates: u64,
    pub cu_seqlens: u64,
    pub chunk_offsets: u64,
    pub chunk_index: u64,
    /// The walk form's segments (0 where every sequence is one): f32 `[segments, H, d_k, d_v]` ΔS, then S at each
    /// segment's end.
    pub seg_states: u64,
    /// Alike: ΔdS, then dS at each segment's start.
    pub seg_dstates: u64,
    /// f32 `[segments, H, d_k]`: Σ log α over each segment.
    pub seg_gamma: u64,
    /// i64 `[N + 1]`: the sequences' first segments ([`walk_segments`]).
    pub seg_offsets: u64,
    /// i32 `[2 · segments]`: (sequence, segment) pairs.
    pub seg_index: u64,
    pub n_seqs: i32,
    pub h: i32,
    pub d_k: i32,
    pub d_v: i32,
    pub scale: f32,
    /// Chunks a segment (walk form; 0: every sequence is one segment).
    pub seg_chunks: i32,
    /// f32 `[tokens, H, d_k]`: chunk-local Γ (`gla_bwd_gamma`), where [`BackwardSpec::walk_gamma`]; else 0.
    pub gamma: u64,
}

/// The CUDA source of `spec`'s three kernels (self-contained, no `#include`).
pub fn generate_backward(spec: &BackwardSpec) -> Result<String, GlaError> {
    if spec.form == BackwardForm::Walks && !spec.tensor_cores() {
        return Err(GlaError::invalid(
            "backward form",
            format!("{}: the walk form has no kernels here", spec.id()),
        ));
    }
    for &name in spec.kernels() {
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
        "// {}: generated by gla-codegen (backward, exact decays; {})",
        spec.id(),
        if spec.form == BackwardForm::Walks {
            "walks: no chunk state in HBM"
        } else if spec.tensor_cores() {
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
    // The gate's derivatives in IEEE f32 whatever the dtype: the parameter gradient sums ∂log α/∂p, whose relative
    // precision counts, and the special-function unit's log is only absolutely accurate (log σ(u) = −log(1 + e^−u) at u = 12
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
    // log α itself (the Γ stages: tens of evaluations a thread a chunk) in the dtype's math — for bf16 / f16 the
    // special-function unit's, absolute error ~2^-22 a token in Γ, as the forward — from a second copy of the gate in
    // namespace gate_fast; its derivatives above stay IEEE.
    let fast = if spec.dtype == DType::F32 {
        ""
    } else {
        let _ = writeln!(
            w,
            "namespace gate_fast {{  // the gate again, in the dtype's math (log α only)"
        );
        w.push_str(gate_math_section(spec.dtype));
        w.push_str(gate.cuda_source());
        let _ = writeln!(w, "\n}}  // namespace gate_fast");
        "gate_fast::"
    };
    // log α floored as the forward's (writer::LOG2_ALPHA_FLOOR); below the floor its derivatives are 0.
    crate::writer::write_log_alpha_floor(&mut w);
    let _ = writeln!(w, "__device__ __forceinline__ float gate_log_alpha(float x, const float* p) {{ return gla_max_nan({fast}{id}(x, p), LOG_ALPHA_FLOOR); }}");
    crate::writer::write_gate_grads(&mut w, gate, fast, "");
    let _ = writeln!(
        w,
        "__device__ __forceinline__ void gate_dp(float x, const float* p, float* dp) {{ (void)gate_grads(x, p, dp); }}"
    );
    // The decays α = e^{log α} and the decay factors e^{Γ_i − Γ_j} (x ≤ 0): IEEE for f32; for bf16 / f16 one MUFU.EX2
    // of x·log2 e (relative error ≤ 3e-6 at |x| ≤ 44, far below the elements' 2^-8 or 2^-11; a result below 2^-126
    // flushes to 0) where expf takes eight instructions — tens of them a thread a chunk.
    let _ = writeln!(
        w,
        "__device__ __forceinline__ float decay_exp(float x) {{ return {}; }}",
        if spec.dtype == DType::F32 {
            "expf(x)"
        } else {
            "exp2f_approx(x * 1.4426950408889634f)"
        }
    );
    w.push_str(BWD);
    if spec.form == BackwardForm::Walks {
        w.push_str(BWD_SCAN_TC); // (its scans in segment mode: the segments' first pass)
        let _ = writeln!(
            w,
            "constexpr float WALK_SPAN = {:.4}f;  // a chunk's decay span (nats) up to which its intra-chunk terms are factorised (< 0: never)",
            spec.walk_span().unwrap_or(-1.0)
        );
        w.push_str(BWD_WALK_TC);
        return Ok(w);
    }
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
        assert_eq!(std::mem::size_of::<BackwardArgs>(), 25 * 8 + 6 * 4);
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
                form: BackwardForm::Chunks,
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

    #[test]
    fn the_walk_form_fits_where_it_runs_and_refuses_elsewhere() {
        for gate in [&PER_KEY as &'static dyn Gate, &PER_HEAD, &FIXED] {
            for dt in [DType::BF16, DType::F16] {
                for (dk, dv) in [(64, 64), (128, 128), (256, 256), (64, 256), (256, 64)] {
                    let s = BackwardSpec::for_problem(gate, dt, dk, dv)
                        .unwrap()
                        .with_form(BackwardForm::Walks)
                        .unwrap();
                    assert!(s.id().ends_with(".walk"));
                    let src = generate_backward(&s).unwrap();
                    for &k in s.kernels() {
                        assert!(s.smem_bytes(k) <= MAX_SMEM_BYTES, "{} {k}", s.id());
                        assert!(src.contains(&format!(" {k}(const __grid_constant__ BwdArgs a)")));
                    }
                    assert!(!src.contains("gla_bwd_chunk("), "one form a module");
                }
            }
        }
        // Two CTAs an SM at d = 128 (the launch bounds ask for it): 2 · (bytes + 1 KiB reserved) ≤ 228 KiB.
        let s = BackwardSpec::for_problem(&PER_KEY, DType::BF16, 128, 128)
            .unwrap()
            .with_form(BackwardForm::Walks)
            .unwrap();
        for k in ["gla_bwd_walk_dq", "gla_bwd_walk_dk", "gla_bwd_walk_dv"] {
            assert!(
                2 * (s.smem_bytes(k) + 1024) <= 228 * 1024,
                "{k}: {}",
                s.smem_bytes(k)
            );
        }
        for (gate, dt, d) in [
            (&PER_KEY as &'static dyn Gate, DType::F32, 128),
            (&PER_VALUE, DType::BF16, 128),
            (&PER_KEY, DType::BF16, 512),
        ] {
            let e = BackwardSpec::for_problem(gate, dt, d, d)
                .unwrap()
                .with_form(BackwardForm::Walks)
                .unwrap_err();
            assert!(e.to_string().contains("chunk form"), "{e}");
        }
    }

    #[test]
    fn walk_grids_and_workspaces() {
        let key = BackwardSpec::for_problem(&PER_KEY, DType::BF16, 100, 130)
            .unwrap()
            .with_form(BackwardForm::Walks)
            .unwrap();
        let none = (0, 0, 0);
        // A per-key gate's Γ first: a thread per (chunk, key column), 4 chunks a CTA (9 chunks → 3 CTAs a head and
        // 64 key columns).
        assert_eq!(
            backward_grids(&key, 100, 130, 3, 2, 9, 2),
            vec![
                (3, 3, 2),
                none,
                none,
                none,
                (2, 3, 2),
                (2, 3, 2),
                (3, 3, 2),
                none
            ]
        );
        // Five segments for two sequences: the first pass and the combine run; the walks a CTA per segment.
        assert_eq!(
            backward_grids(&key, 100, 130, 3, 2, 9, 5),
            vec![
                (3, 3, 2),
                (3, 3, 5),
                (3, 3, 5),
                (51, 3, 2),
                (2, 3, 5),
                (2, 3, 5),
                (3, 3, 5),
                none
            ]
        );
        // Workspace 0: q ⊙ dq, then Γ (a per-key gate's); workspace 1: Z, then the dq / dk passes' row sums (a
        // per-key gate's q ⊙ dq by key column).
        assert_eq!(
            key.workspace_elems(50, 2, 9, 5, 3, 100, 130),
            Some([2 * 50 * 3 * 100, 5 * 3 * 100 + 50 * 3 * 100])
        );
        assert_eq!(key.gamma_offset(50, 3, 100), Some(50 * 3 * 100));
        assert_eq!(key.segment_elems(2, 2, 3, 100, 130), Some([0; 3]));
        assert_eq!(
            key.segment_elems(2, 5, 3, 100, 130),
            Some([5 * 3 * 100 * 130, 5 * 3 * 100 * 130, 5 * 3 * 100])
        );
        let head = BackwardSpec {
            gate: &PER_HEAD,
            ..key
        };
        let hg = backward_grids(&head, 100, 130, 3, 2, 9, 2);
        assert_eq!(
            (hg[0], hg[7]),
            (none, (3, 2, 1)),
            "no Γ pass for a scalar gate; its gate kernel a CTA per (head, sequence)"
        );
        assert_eq!(head.gamma_offset(50, 3, 100), None);
        assert_eq!(
            head.workspace_elems(50, 2, 9, 5, 3, 100, 130).unwrap()[0],
            50 * 3 * 100
        );
        let chunks = BackwardSpec::for_problem(&PER_KEY, DType::BF16, 100, 130).unwrap();
        assert_eq!(
            chunks.workspace_elems(50, 2, 9, 2, 3, 100, 130),
            Some([11 * 3 * 100 * 130; 2])
        );
        assert_eq!(key.workspace_elems(usize::MAX, 1, 1, 1, 3, 64, 64), None);
    }

    #[test]
    fn walk_segments_split_long_sequences_only_where_the_gpu_would_idle() {
        let key = BackwardSpec::for_problem(&PER_KEY, DType::BF16, 128, 128)
            .unwrap()
            .with_form(BackwardForm::Walks)
            .unwrap();
        // 8 × 16 heads × 2 key tiles = 256 CTAs, one a multiprocessor at least: one segment a sequence.
        assert_eq!(key.walk_segment_chunks(128, 8, 16, 128, 132), 0);
        // 2 × 16 × 2 = 64 CTAs on 132 SMs: 5 segments of 103 chunks for 512-chunk sequences.
        assert_eq!(key.walk_segment_chunks(512, 2, 16, 128, 132), 103);
        // Short sequences are never cut below 16 chunks, nor into one piece.
        assert_eq!(key.walk_segment_chunks(20, 1, 1, 64, 132), 16);
        assert_eq!(key.walk_segment_chunks(16, 1, 1, 64, 132), 0);
        let chunk_form = BackwardSpec::for_problem(&PER_KEY, DType::BF16, 128, 128).unwrap();
        assert_eq!(chunk_form.walk_segment_chunks(512, 2, 16, 128, 132), 0);
        assert_eq!(
            walk_segments(&[3, 0, 7], 0),
            (vec![0, 1, 2, 3], vec![0, 0, 1, 0, 2, 0])
        );
        assert_eq!(
            walk_segments(&[3, 0, 7], 3),
            (vec![0, 1, 2, 5], vec![0, 0, 1, 0, 2, 0, 2, 1, 2, 2])
        );
    }
}
