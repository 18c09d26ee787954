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
    /// `N · (S − 1)` for `S > 1` segments a sequence, else `N`: the fused pass (segments 1 ..= S − 1 of the
    /// two-level scan, [`total_segments`]; `S = 1` on problems that fill the GPU).
    SeqSegments,
    /// `N · (S − 1)` when `S > 1`, else 0 (the kernel is skipped): the first pass of the two-level scan (the lead
    /// segment's fused forward and the state pass of segments 1 ..= S − 2).
    SplitSeqSegments,
    /// `N` when `S > 1`, else 0: the sequential combine of the segment states.
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

/// CTAs `P` a sequence gets in each pass of the fused plan's two-level scan over chunks: when the (sequence, head,
/// value tile) CTAs fill at most half the GPU, `P = ⌊132 / CTAs⌋` (at most `max_chunks`, the longest sequence's
/// chunk count, and 63), so that `N·H·tiles·P` CTAs run in each pass; `P = 1` otherwise (no segment pass). The
/// sequence is then cut into [`total_segments`]`(P) = P + 1` segments.
pub fn segments(n_seqs: usize, h: usize, vtiles: usize, max_chunks: usize) -> usize {
    segments_on(WAVE_CTAS, n_seqs, h, vtiles, max_chunks)
}

/// [`segments`] for a GPU that holds `wave` CTAs at once (`WAVE_CTAS · ctas_per_sm`).
pub fn segments_on(
    wave: usize,
    n_seqs: usize,
    h: usize,
    vtiles: usize,
    max_chunks: usize,
) -> usize {
    let ctas = n_seqs.saturating_mul(h).saturating_mul(vtiles);
    if ctas == 0 {
        return 1;
    }
    (wave / ctas).clamp(1, max_chunks.clamp(1, 63))
}

/// Segments `S` per sequence for `P` CTAs a sequence a pass ([`segments`]): 1 when `P = 1`, else `P + 1`.
///
/// The two-level scan with a lead segment. Segment 0 (the lead) starts from the initial state, so its output needs
/// no segment state: it runs the fused forward in the *first* pass, beside the state pass of segments 1 ..= S − 2
/// (`gla_fwd_ws_states` / `gla_fwd_seg_states`, `N·(S − 1)` CTAs), and writes its final state. The combine then
/// chains the states; the second pass (`gla_fwd_ws` / `gla_fwd_fused`, `N·(S − 1)` CTAs) runs segments 1 ..= S − 1
/// from them, and the last one writes the final state — no state pass for the last segment. The lead is shorter
/// than the other segments ([`LEAD_PERMILLE`]) so that both passes take about as long as a state pass and a fused
/// pass over one later segment.
pub fn total_segments(p: usize) -> usize {
    if p >= 2 {
        p + 1
    } else {
        1
    }
}

/// The lead segment's length in thousandths of a later segment's: a fused chunk costs about 1 / 0.6 of a state-pass
/// chunk (H200: 2×16384×16×128 took 0.471 ms with P = 4 against 0.290 for the unsegmented 8×4096 of
/// the same 4096 chunks a CTA), so a lead of 0.6 segments ends with the state pass. The default of the variants
/// whose state pass loads ahead is [`LEAD_AHEAD_PER_KEY_PERMILLE`] / [`LEAD_AHEAD_SCALAR_PERMILLE`]
/// (`Features::lead_permille`).
pub const LEAD_PERMILLE: i32 = 600;

/// The lead of the variants whose segment-state pass issues a group's next chunk at the top of the current one
/// (two TMA producer groups: the kernels' `STATES_ISSUE_AHEAD`), which makes that pass cheaper, so the lead is
/// shorter: H200, 2×16384×16×128, same binary, interleaved twice — GLA (per key) 0.370 / 0.370 ms at
/// 450 and 500 (600: 0.382; the old form 0.379 at 600, 0.370 at 500), Mamba-2 (scalar) 0.275 / 0.275 at 400,
/// 0.280 at 500, 0.291 at 600 (the old form 0.288 at 600).
pub const LEAD_AHEAD_PER_KEY_PERMILLE: i32 = 475;
/// See [`LEAD_AHEAD_PER_KEY_PERMILLE`] (per-head and fixed gates).
pub const LEAD_AHEAD_SCALAR_PERMILLE: i32 = 400;

/// The chunks `[c0, c1)` of segment `p` of a sequence of `nch` chunks cut into `segs` segments with a lead of
/// `lead` thousandths of a later segment (the kernels' `seg_range`, which this mirrors for the host's tests and
/// plans): the lead takes `⌊nch · lead / (lead + 1000 (S − 1))⌋` chunks, the rest is cut into `S − 1` equal runs.
pub fn segment_chunks(nch: usize, segs: usize, lead: i32, p: usize) -> (usize, usize) {
    if segs <= 1 {
        return (0, nch);
    }
    let rest = segs - 1;
    let lead = lead.max(0) as usize;
    let l = nch * lead / (lead + 1000 * rest);
    if p == 0 {
        return (0, l);
    }
    let per = (nch - l).div_ceil(rest);
    let c0 = nch.min(l + (p - 1) * per);
    (c0, nch.min(c0 + per))
}

/// Bytes of the key-split partial outputs (`key_split > 1`: f32 `[key_split, tokens, H, d_v]`, H the real heads),
/// which follow the segment workspace in the same buffer; 0 when `key_split == 1`.
pub fn key_split_workspace_bytes(key_split: usize, tokens: usize, h: usize, dv: usize) -> usize {
    if key_split <= 1 {
        return 0;
    }
    key_split
        .saturating_mul(tokens)
        .saturating_mul(h)
        .saturating_mul(dv)
        .saturating_mul(4)
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
    /// Whether the plan splits narrow problems into segments ([`segments`], [`total_segments`]); with `S > 1` it then
    /// needs the segment workspace `states` (f32 `[N·S, H, d_k, d_v]` segment states, then `[N·S, H, max(d_k, d_v)]`
    /// decays).
    #[serde(default)]
    pub segmented: bool,
    /// Whether the kernels load whole chunks by TMA when the runtime encodes the tensor maps (`ForwardArgs::tma`).
    #[serde(default)]
    pub tma: bool,
    /// The lead segment's length in thousandths of a later segment's (`ForwardArgs::lead`).
    #[serde(default)]
    pub lead_permille: i32,
    /// Key slices whose f32 partial outputs go through the workspace (1: none, or added on chip by a cluster).
    #[serde(default)]
    pub workspace_partials: u32,
}

impl LaunchPlan {
    /// Bytes of the workspace a launch needs besides the chunk-state buffer: the segment states and decays
    /// ([`segment_workspace_bytes`], `h` and `dk` as the kernels see them) followed by the key slices' f32 partial
    /// outputs ([`key_split_workspace_bytes`], `hv` the real heads).
    pub fn workspace_bytes(
        &self,
        n_seqs: usize,
        segs: usize,
        h: usize,
        dk: usize,
        dv: usize,
        tokens: usize,
        hv: usize,
    ) -> usize {
        segment_workspace_bytes(n_seqs, segs, h, dk, dv)
            + key_split_workspace_bytes(self.workspace_partials as usize, tokens, hv, dv)
    }
}

/// Bytes of the segment workspace of a segmented plan with `S = segs > 1` segments a sequence (0 when `segs == 1`):
/// one state slot and one decay row a segment.
pub fn segment_workspace_bytes(
    n_seqs: usize,
    segs: usize,
    h: usize,
    dk: usize,
    dv: usize,
) -> usize {
    if segs <= 1 {
        return 0;
    }
    let rows = n_seqs.saturating_mul(segs).saturating_mul(h);
    rows.saturating_mul(dk.saturating_mul(dv).saturating_add(dk.max(dv)))
        .saturating_mul(4)
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
    /// Segments per sequence `S` of a segmented plan, the lead segment included ([`total_segments`]); 1 otherwise.
    pub segs: i32,
    /// 1 when the four tensor maps are encoded (kernels with TMA loads then move whole chunks by TMA; 0: by cp.async).
    pub tma: i32,
    /// The lead segment's length in thousandths of a later segment's (`segs > 1`; [`LEAD_PERMILLE`]).
    pub lead: i32,
    /// TMA descriptors (CUtensorMap) over the `[tokens, H, d]` views of q, k, v and the per-key logits: 3-d, boxes of
    /// 64 × 1 × C elements, 128-byte swizzle. All zero unless `tma` is 1.
    pub tm_q: TmaMap,
    pub tm_k: TmaMap,
    pub tm_v: TmaMap,
    pub tm_g: TmaMap,
    /// The backward's dq / dk passes ([`crate::Pass::row_sums`]): `[B,T,H,d_v]` in the spec's dtype — the original q
    /// (dq pass) or k (dk pass), whose products with o the store sums per token; else 0.
    pub rs_w: u64,
    /// f32 `[⌈d_v / 64⌉, tokens, H]`: per 64 columns and token, Σ_e rs_w ⊙ o (the dq pass writes it, the dk pass
    /// subtracts its own: the gate's row sums Σ (q ⊙ dq − k ⊙ dk)); else 0.
    pub rs_out: u64,
    /// A per-key gate's dk pass (per-value kernel, [`crate::Pass::Dk`]): its store turns the dq pass's q ⊙ dq by key
    /// column (`rs_out`, f32 `[tokens, H, d_v]`) into d log α and writes d logits `[B,T,H,d_v]` (the spec's dtype)
    /// here; 0: no gate gradients.
    pub dg: u64,
    /// The same pass's d params, f32 `[H, P]`, added to (zeroed by the host); 0 when the gate has none.
    pub dparams: u64,
    /// Explicit tail padding to the struct's 64-byte alignment (no implicit padding bytes: 704 in all).
    pub _pad: [u64; 4],
}

/// One encoded CUtensorMap: 128 opaque bytes, 64-byte aligned (as the driver and the kernel's parameter require).
#[repr(C, align(64))]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct TmaMap(pub [u64; 16]);
