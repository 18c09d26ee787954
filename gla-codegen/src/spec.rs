//! Kernel variant specification: the plain data naming which kernel to generate for which gate. What the variant's
//! kernels then are is [`crate::features`]'s; which specs are valid, the default and the tuner's candidates are
//! [`crate::variants`]'.

use gla_core::{DType, Gate, GateShape};
use std::fmt;

/// Which pass a kernel computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pass {
    Forward,
    /// The backward's dv as the forward of the time-reversed problem (`.dv` ids; set with
    /// [`KernelSpec::with_pass`]): dv_s = scale · Σ_{t≥s} (q_t · (k_s ⊙ b_t / b_s)) dO_t + (k_s ⊙ b_T / b_s) dht, so
    /// with the forward's own chunk operands — A (lower triangular), Q̃ = Q ⊙ 2^Γ, K̂ = K ⊙ 2^(Γ_L − Γ) — and the
    /// chunks walked last to first from S' = dht:  dV_[n] = K̂ S' + Aᵀ dO,  S' ← diag(2^Γ_L) S' + Q̃ᵀ dO.
    /// The producers are the forward's unchanged; the consumers swap Q̃ and K̂ and contract A over its rows.
    /// v = dO, h0 = dht, o = dv (the final state, if asked for, is dh0). Per-key, per-head and fixed gates on the
    /// wgmma family (key splits too: dv is linear in the key slices, as O is; scalar gates without row-scaled
    /// chunks); never segmented.
    Dv,
    /// A scalar gate's dq as a forward (`.dq` ids): dq_t = scale · S_t dO_t, and S_tᵀ = α_t S_{t−1}ᵀ + v_tᵀ k_t is the
    /// state of the forward with q ← dO, k ← v, v ← k (d_k and d_v swap; the gate is the same scalar a token). The
    /// forward's kernel with its products' operands as hi + lo halves and, at its store, the gate's row sums
    /// Σ_e q ⊙ dq per token and 64 columns from the unrounded f32 dq ([`Pass::row_sums`]): the gate's gradient sums
    /// q ⊙ dq − k ⊙ dk, which cancel to a small difference that rounded gradients would not keep. Per-head and fixed
    /// gates on the wgmma family without a key split; never segmented; no initial state.
    Dq,
    /// A scalar gate's dk as the dv pass (`.dk` ids): dk_s = scale · Σ_{t≥s} (b_t / b_s)(dO_t · v_s) q_t is the dv
    /// pass's sum with q ← dO, k ← v, v ← q — chunks last to first; its store subtracts Σ_e k ⊙ dk from
    /// [`Pass::Dq`]'s row sums. No final-state gradient (the walks take calls with dht).
    Dk,
}

impl Pass {
    /// Chunks walked last to first ([`Pass::Dv`], [`Pass::Dk`]).
    pub fn reverse(self) -> bool {
        matches!(self, Pass::Dv | Pass::Dk)
    }
    /// Its store also takes the gate's row sums (`ForwardArgs::rs_w`, `rs_out`: [`Pass::Dq`], [`Pass::Dk`]).
    pub fn row_sums(self) -> bool {
        matches!(self, Pass::Dq | Pass::Dk)
    }
}

/// Tile and warp choices.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Tiles {
    /// Width of the value tile one CTA owns (the state is `d_k × block_v`).
    pub block_v: u32,
    /// Warps that hold the state and compute the output (the whole CTA unless `producer_warps > 0`).
    pub warps: u32,
    /// Warp specialisation (0: none). With `p > 0` the CTA has `p` more warps, the producers, that run chunk n+1's
    /// state-independent stages (loads, gate, cumsum, decays, scores) while the `warps` consumers compute chunk
    /// n's output and state update; chunks pass between them through a ring of shared-memory slots.
    pub producer_warps: u32,
    /// The producer warps split into this many independent groups (1 or 2) that take alternate chunks, so that two
    /// chunks' S-independent stages are in flight at once (each group has its own barrier and Γ tile).
    pub producer_groups: u32,
    /// The consumers' products on the warpgroup tensor-core instruction (`wgmma.mma_async`, sm_90a) instead of
    /// `mma.sync`: the state lives transposed in wgmma accumulators (one warpgroup per 64 value columns), the
    /// operands are read by the tensor cores from shared memory in the 128-byte-swizzled layout that the producers
    /// then write. Warp-specialised variants only.
    pub wgmma: bool,
    /// CTAs resident on one SM (1 or 2; `__launch_bounds__(threads, ctas_per_sm)`). 2: warp-specialised
    /// 256-thread variants whose shared memory fits twice in an SM (228 KB, 1 KB of it reserved a CTA); the
    /// registers a thread are then at most 128 (setmaxnreg moves them between consumers and producers), and two
    /// CTAs' producers hide each other's latency on problems of more CTAs than SMs.
    pub ctas_per_sm: u32,
}

impl Tiles {
    /// The tiles' part of a variant id, e.g. `bv128.w8p4x2g` (`.o2` with two CTAs an SM).
    pub fn id(&self) -> String {
        format!(
            "bv{}.w{}{}{}{}",
            self.block_v,
            self.warps,
            match (self.producer_warps, self.producer_groups) {
                (0, _) => String::new(),
                (p, 1) => format!("p{p}"),
                (p, g) => format!("p{p}x{g}"),
            },
            if self.wgmma { "g" } else { "" },
            if self.ctas_per_sm > 1 {
                format!(".o{}", self.ctas_per_sm)
            } else {
                String::new()
            },
        )
    }

    /// Whether the variant is warp-specialised (producer and consumer warps).
    pub fn specialised(&self) -> bool {
        self.producer_warps > 0
    }
    /// Threads per CTA of the forward kernel.
    pub fn threads(&self) -> u32 {
        32 * (self.warps + self.producer_warps)
    }
}

/// One kernel variant. Construct with [`KernelSpec::new`], which validates it.
#[derive(Clone, Copy)]
pub struct KernelSpec {
    pub gate: &'static dyn Gate,
    pub pass: Pass,
    /// Chunk size C ∈ {32, 64, 128}.
    pub chunk: u32,
    /// Sub-chunk size c ∈ {16, 32}, c | C: the value gate's secondary chunking (§4.3). Per-key gates' exact path
    /// recurses to single rows whatever c is (`intra_scores`), scalar gates do not sub-chunk.
    pub sub_chunk: u32,
    /// Specialised key dim of one kernel (64, 128, 256); smaller actual d_k run masked, wider ones (up to 512) as
    /// key slices ([`KernelSpec::key_split`]).
    pub dk: u32,
    /// Specialised value dim (64, 128, 256, 512); smaller actual d_v run masked. The kernels see only the value
    /// tile (`block_v`): d_v sets the grid's value tiles at run time, and this field what the variant is named for.
    pub dv: u32,
    /// Alg. 1 left (materialize chunk states, then all chunks in parallel) vs right (one fused sequential kernel).
    pub materialize: bool,
    pub dtype: DType,
    pub tiles: Tiles,
    /// Key split (1, 2 or 4): the variant serves d_k up to `key_split · dk` by running each head as `key_split` heads
    /// of `dk` key columns each (the chunkwise form is linear in d_k: O = Σ_s Q̃_s S_s + ((Q̃_s K̃_sᵀ) ⊙ M) V over
    /// the key slices s, and a per-key gate's state rows are independent), whose f32 partial outputs a last kernel
    /// adds. For d_k = 256 it keeps each CTA's d_k × block_v state in the registers of one 128-wide value tile
    /// (one gate pass per 128 value columns instead of per 64); d_k = 512 runs as four 128-column slices. Per-key,
    /// per-head and fixed gates, wgmma variants. Set with
    /// [`KernelSpec::with_key_split`].
    pub key_split: u32,
    /// Key split 2 as a 2-CTA thread-block cluster (`.ks2c`): the two slices of a head run as one cluster and hand
    /// each other their f32 partial outputs of each chunk through distributed shared memory (per-key gates: each
    /// CTA finishes half of the value columns; scalar gates: slice 0 finishes all), the receiver adds and writes O
    /// — no partial outputs in global memory, no sum kernel. Set with [`KernelSpec::with_cluster_key_split`].
    pub cluster: bool,
}

impl fmt::Debug for KernelSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.id())
    }
}

impl PartialEq for KernelSpec {
    fn eq(&self, o: &Self) -> bool {
        self.id() == o.id()
    }
}

impl KernelSpec {
    /// Stable identifier, e.g. `gla.fwd.bf16.C64.c16.k128.v128.bv64.w4.fused`.
    pub fn id(&self) -> String {
        format!(
            "{}.{}.{}.C{}.c{}.k{}.v{}.{}{}.{}",
            self.gate.name(),
            match self.pass {
                Pass::Forward => "fwd",
                Pass::Dv => "dv",
                Pass::Dq => "dq",
                Pass::Dk => "dk",
            },
            self.dtype,
            self.chunk,
            self.sub_chunk,
            self.dk,
            self.dv,
            self.tiles.id(),
            if self.key_split > 1 {
                format!(
                    ".ks{}{}",
                    self.key_split,
                    if self.cluster { "c" } else { "" }
                )
            } else {
                String::new()
            },
            if self.materialize { "mat" } else { "fused" }
        )
    }

    /// The gate's shape as the variant's kernels apply it: the gate's own, but a per-key gate's [`Pass::Dq`] /
    /// [`Pass::Dk`] put it on the value side (q ← dO, k ← v, v ← k: the decay acts on the output's columns, d_k), so
    /// those passes are per-value kernels.
    pub fn shape(&self) -> GateShape {
        match (self.gate.shape(), self.pass) {
            (GateShape::PerKey, Pass::Dq | Pass::Dk) => GateShape::PerValue,
            (s, _) => s,
        }
    }

    /// f32 elements the store of a dq / dk pass ([`Pass::row_sums`]) writes for `tokens` tokens, `h` heads and the
    /// kernel's d_v `dv` (the output's columns): a scalar gate's row sums `[⌈d_v / 64⌉, tokens, H]`; a per-key
    /// gate's (per-value kernels) gradient by key column `[tokens, H, d_v]` — the dq pass's q ⊙ dq, which the dk
    /// pass turns into d log α. None where the count overflows.
    pub fn row_sum_elems(&self, tokens: usize, h: usize, dv: usize) -> Option<usize> {
        if self.shape() == GateShape::PerValue {
            tokens.checked_mul(h)?.checked_mul(dv)
        } else {
            dv.div_ceil(64).checked_mul(tokens)?.checked_mul(h)
        }
    }

    /// The largest d_k the variant serves: `key_split · dk`.
    pub fn key_dim(&self) -> u32 {
        self.key_split * self.dk
    }
}

/// Largest dynamic shared memory of one CTA on sm_90 (227 KB).
pub const MAX_SMEM_BYTES: u32 = 227 * 1024;
/// Shared memory of one sm_90 SM (228 KB), and what the hardware reserves of it for each resident CTA (1 KB).
pub const SMEM_PER_SM: u32 = 228 * 1024;
pub const SMEM_RESERVED_PER_CTA: u32 = 1024;

/// The largest head dim (d_k and d_v) a variant serves.
pub const MAX_HEAD_DIM: usize = 512;

/// Smallest specialised head dim (64, 128, 256, 512) that holds `d`, or `None` if `d` is 0 or > [`MAX_HEAD_DIM`].
pub fn specialised_dim(d: usize) -> Option<u32> {
    match d {
        1..=64 => Some(64),
        65..=128 => Some(128),
        129..=256 => Some(256),
        257..=512 => Some(512),
        _ => None,
    }
}
