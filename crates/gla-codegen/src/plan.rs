//! What the runtime needs to launch a generated kernel: kernel names, grid, block, dynamic shared memory, and
//! the argument struct shared with the emitted C (`struct FwdArgs`).

use serde::{Deserialize, Serialize};

/// How one grid dimension is sized from the problem at launch time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum GridAxis {
    /// `ceil(d_v / block_v)`: tiles of the value dimension.
    VTiles { block_v: u32 },
    /// `H`.
    Heads,
    /// `N`: number of sequences (B, or `cu_seqlens.len() - 1`).
    Sequences,
    /// Total number of chunks over all sequences (Σ ceil(len_n / C)).
    Chunks { chunk: u32 },
    /// `N · P`: the sequences, each split into `P` segments of whole chunks ([`segments`]; `P = 1` on problems
    /// that fill the GPU).
    SeqSegments,
    /// `N · P` when `P > 1`, else 0 (the kernel is skipped): the segment-state pass of the two-level scan.
    SplitSeqSegments,
    /// `N` when `P > 1`, else 0: the sequential combine of the segment states.
    SplitSequences,
    /// `H · blocks`: each head split into `blocks` CTAs (the combine's blocks of state rows).
    HeadBlocks { blocks: u32 },
    /// `ceil(tokens · (H / key_split) · d_v / per_block)`: the key-split sum's blocks of outputs (H counts the key
    /// slices, see `KernelSpec::key_split`).
    KeySplitSum { key_split: u32, per_block: u32 },
    /// 1.
    One,
}

/// Whether `spill_bytes` (stores + loads) of kernel `name` is acceptable: no kernel may spill.
pub fn spills_acceptable(_name: &str, spill_bytes: u32) -> bool {
    spill_bytes == 0
}

/// CTAs that fill the H200 (132 SMs, one fused CTA per SM).
pub const WAVE_CTAS: usize = 132;

/// Segments `P` per sequence of the fused plan (a two-level scan over chunks): when the (sequence, head, value
/// tile) CTAs fill at most half the GPU, each sequence is split into `P = ⌊132 / CTAs⌋` segments of whole chunks
/// (at most `max_chunks`, the longest sequence's chunk count, and 64), so that `N·H·tiles·P` CTAs run. `P = 1`
/// otherwise (no segment pass).
pub fn segments(n_seqs: usize, h: usize, vtiles: usize, max_chunks: usize) -> usize {
    segments_on(WAVE_CTAS, n_seqs, h, vtiles, max_chunks)
}

/// [`segments`] for a GPU that holds `wave` CTAs at once (`WAVE_CTAS · ctas_per_sm`).
pub fn segments_on(wave: usize, n_seqs: usize, h: usize, vtiles: usize, max_chunks: usize) -> usize {
    let ctas = n_seqs.saturating_mul(h).saturating_mul(vtiles);
    if ctas == 0 {
        return 1;
    }
    (wave / ctas).clamp(1, max_chunks.clamp(1, 64))
}

/// Bytes of the key-split partial outputs (`key_split > 1`: f32 `[key_split, tokens, H, d_v]`, H the real heads),
/// which follow the segment workspace in the same buffer; 0 when `key_split == 1`.
pub fn key_split_workspace_bytes(key_split: usize, tokens: usize, h: usize, dv: usize) -> usize {
    if key_split <= 1 {
        return 0;
    }
    key_split.saturating_mul(tokens).saturating_mul(h).saturating_mul(dv).saturating_mul(4)
}

/// One kernel launch of a plan.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelLaunch {
    /// `extern "C"` name in the source.
    pub name: String,
    /// Grid `(x, y, z)`.
    pub grid: [GridAxis; 3],
    /// Threads per block.
    pub block: u32,
    /// Dynamic shared memory in bytes.
    pub smem_bytes: u32,
}

/// The kernels of one variant, launched in order on one stream, all taking one [`ForwardArgs`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaunchPlan {
    pub kernels: Vec<KernelLaunch>,
    /// Whether the plan needs the per-chunk state buffer `states` (`[total_chunks, H, d_k, d_v]` f32).
    pub needs_state_buffer: bool,
    /// Whether the plan splits narrow problems into segments ([`segments`]); with `P > 1` it then needs the
    /// segment workspace `states` (f32 `[N·P, H, d_k, d_v]` segment states, then `[N·P, H, max(d_k, d_v)]` decays).
    #[serde(default)]
    pub segmented: bool,
}

/// Bytes of the segment workspace of a segmented plan with `P = segs > 1` (0 when `segs == 1`).
pub fn segment_workspace_bytes(n_seqs: usize, segs: usize, h: usize, dk: usize, dv: usize) -> usize {
    if segs <= 1 {
        return 0;
    }
    let rows = n_seqs.saturating_mul(segs).saturating_mul(h);
    rows.saturating_mul(dk.saturating_mul(dv).saturating_add(dk.max(dv))).saturating_mul(4)
}

/// The single argument of every generated forward kernel (`const __grid_constant__ FwdArgs`). Layout matches the
/// C struct emitted by [`crate::spec`]'s writer field for field (`#[repr(C)]`, 8-byte pointers first).
/// Pointers are device addresses; 0 means absent.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ForwardArgs {
    /// `[B,T,H,d_k]` in the spec's dtype.
    pub q: u64,
    pub k: u64,
    /// `[B,T,H,d_v]`.
    pub v: u64,
    /// Raw gate logits, in the spec's dtype (like q): `[B,T,H,d_k]` (per key), `[B,T,H]` (per head), `[B,T,H,d_v]` (per value), 0 (fixed).
    pub g: u64,
    /// Gate parameters, f32 `[H, P]`; 0 when the gate has none.
    pub params: u64,
    /// Initial state, f32 `[N,H,d_k,d_v]`, or 0.
    pub h0: u64,
    /// Final state out, f32 `[N,H,d_k,d_v]`, or 0.
    pub ht: u64,
    /// Output `[B,T,H,d_v]` in the spec's dtype.
    pub o: u64,
    /// Chunk-start states, f32 `[total_chunks,H,d_k,d_v]` (materialize on), the segment workspace (segmented plan
    /// with `segs > 1`, see [`segment_workspace_bytes`]), or 0.
    pub states: u64,
    /// `i64[N+1]` token offsets of the sequences (always given; `n*T` for fixed-length batches).
    pub cu_seqlens: u64,
    /// `i64[N+1]` chunk offsets: Σ_{m<n} ceil(len_m / C).
    pub chunk_offsets: u64,
    /// `i32[2 * total_chunks]`: (sequence, chunk-in-sequence) of each global chunk (materialize on), or 0.
    pub chunk_index: u64,
    /// Number of sequences N.
    pub n_seqs: i32,
    pub h: i32,
    /// Actual head dims (≤ the spec's specialised sizes; smaller ones go through the masked path).
    pub dk: i32,
    pub dv: i32,
    pub scale: f32,
    /// Segments per sequence `P` of a segmented plan ([`segments`]); 1 otherwise.
    pub segs: i32,
    /// 1 when the four tensor maps are encoded (kernels with TMA loads then move whole chunks by TMA; 0: by cp.async).
    pub tma: i32,
    pub pad: i32,
    /// TMA descriptors (CUtensorMap) over the `[tokens, H, d]` views of q, k, v and the per-key logits: 3-d, boxes of
    /// 64 × 1 × C elements, 128-byte swizzle. All zero unless `tma` is 1.
    pub tm_q: TmaMap,
    pub tm_k: TmaMap,
    pub tm_v: TmaMap,
    pub tm_g: TmaMap,
}

/// One encoded CUtensorMap: 128 opaque bytes, 64-byte aligned (as the driver and the kernel's parameter require).
#[repr(C, align(64))]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct TmaMap(pub [u64; 16]);
