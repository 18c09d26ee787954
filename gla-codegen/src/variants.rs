//! The variant space: which [`KernelSpec`]s are valid ([`KernelSpec::new`] / [`KernelSpec::validate`]), the default
//! a problem runs when nothing else is chosen ([`KernelSpec::default_for`]) and the autotuner's candidates
//! ([`all_variants`]).

use crate::features::Features;
use crate::spec::{
    specialised_dim, KernelSpec, Pass, Tiles, MAX_HEAD_DIM, MAX_SMEM_BYTES, SMEM_PER_SM,
    SMEM_RESERVED_PER_CTA,
};
use gla_core::{DType, Gate, GateShape, GlaError};

impl KernelSpec {
    /// The same variant with key split `ks` (1, 2 or 4), validated.
    pub fn with_key_split(self, ks: u32) -> Result<Self, GlaError> {
        let s = KernelSpec {
            key_split: ks,
            cluster: false,
            ..self
        };
        s.validate()?;
        Ok(s)
    }

    /// The same variant with key split 2 as a 2-CTA cluster exchanging the slices' partial outputs over
    /// distributed shared memory ([`KernelSpec::cluster`]), validated.
    pub fn with_cluster_key_split(self) -> Result<Self, GlaError> {
        let s = KernelSpec {
            key_split: 2,
            cluster: true,
            ..self
        };
        s.validate()?;
        Ok(s)
    }

    /// The same variant computing `pass` ([`Pass::Dv`]: the backward's dv as the time-reversed forward), validated:
    /// the dv pass runs per-key gates on the wgmma family without a key split.
    pub fn with_pass(self, pass: Pass) -> Result<Self, GlaError> {
        let s = KernelSpec { pass, ..self };
        s.validate()?;
        Ok(s)
    }

    /// Validate and build a spec. Errors name the bad field and the allowed values.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        gate: &'static dyn Gate,
        dtype: DType,
        chunk: u32,
        sub_chunk: u32,
        dk: u32,
        dv: u32,
        materialize: bool,
        tiles: Tiles,
    ) -> Result<Self, GlaError> {
        let s = KernelSpec {
            gate,
            pass: Pass::Forward,
            chunk,
            sub_chunk,
            dk,
            dv,
            materialize,
            dtype,
            tiles,
            key_split: 1,
            cluster: false,
        };
        s.validate()?;
        Ok(s)
    }

    /// The variant to run when the caller names none (the runtime default until the tuning cache is consulted):
    /// per specialised head dim, the fastest fused variant of the H200 measurements (benches/NOTES.md). bf16/f16,
    /// per-key, per-head and fixed gates: d = 128 → the warp-specialised C 32 kernel with one 128-wide value tile,
    /// 8 consumer warps on wgmma and TMA loads (scalar gates: 4 producer warps in two groups; per key: 8 in two groups
    /// of one warpgroup); d = 64 → 4 + 4 warps on wgmma, two CTAs an SM; d_k = 256 → the d = 128 kernel on two key
    /// slices as a 2-CTA cluster. Otherwise (f32, value gates, d_v < 128) the plain tiles of `plain_prefs`. Narrow
    /// problems need no narrower tiles: the fused plan's two-level scan (`crate::segments`) splits their sequences
    /// until the GPU is full. Where a choice does not fit (f32 needs more shared memory) the next one is taken.
    pub fn default_for(
        gate: &'static dyn Gate,
        dtype: DType,
        dk: usize,
        dv: usize,
    ) -> Result<Self, GlaError> {
        let kd = specialised_dim(dk).ok_or_else(|| {
            GlaError::invalid("d_k", format!("must be 1..={MAX_HEAD_DIM}, got {dk}"))
        })?;
        let vd = specialised_dim(dv).ok_or_else(|| {
            GlaError::invalid("d_v", format!("must be 1..={MAX_HEAD_DIM}, got {dv}"))
        })?;
        let per_key = gate.shape() == GateShape::PerKey;
        // (chunk, block_v, warps, producer warps, producer groups, wgmma) in order of preference.
        let ws = dtype != DType::F32 && gate.shape() != GateShape::PerValue;
        let mut prefs: Vec<(u32, u32, u32, u32, u32, bool)> = Vec::new();
        // d = 64 (H200, 8×4096×32×64): 4 + 4 warps on wgmma, two CTAs an SM (GLA 0.277 ms vs 0.384 for
        // the best one-CTA kernel; Mamba-2 0.213 vs 0.230).
        if ws && kd == 64 {
            prefs.push((32, 64, 4, 4, 1, true));
        }
        if ws && kd == 128 {
            // Warp-specialised, H200 measurements at 8×4096×16×128: C 32, 8 consumer + 4 producer
            // warps in one group, consumers on wgmma (Mamba-2 0.240 ms vs 0.262 ms for the best mma.sync kernel,
            // GLA 0.361 vs 0.364 ms); then the mma.sync kernels: scalar gates in two producer
            // groups on alternate chunks, per-key gates in one.
            // Scalar gates: two producer groups with TMA loads first (Mamba-2 0.232 ms vs 0.240).
            // Per-key gates: 8 + 8 warps, two producer groups of one warpgroup each, four slots (
            // GLA 0.293 ms vs 0.302 for 8 + 4; 2×16384 0.475 vs 0.518).
            prefs.push(if per_key {
                (32, 128, 8, 8, 2, true)
            } else {
                (32, 128, 8, 4, 2, true)
            });
            prefs.push((32, 128, 8, 4, 1, true));
            if !per_key {
                prefs.push((32, 128, 8, 4, 2, false));
            }
            prefs.push((32, 128, 8, 4, 1, false));
        }
        prefs.extend(
            plain_prefs(per_key, kd)
                .into_iter()
                .map(|(c, bv, w)| (c, bv, w, 0, 1, false)),
        );
        // d_k = 256: two 128-column key slices on the d = 128 wgmma kernel as one 2-CTA cluster exchanging the
        // partial outputs over DSMEM (8×4096×8×256: GLA 0.624 ms vs 0.813 for the key split through
        // global memory, which was 0.811 vs 1.572 for the best d = 256 kernel; Mamba-2 0.489 vs 0.634).
        // Per key 4 producer warps in one group, scalar gates 4 in two.
        if ws && kd == 256 && vd >= 128 && dk.is_multiple_of(2) {
            let groups = if per_key { 1 } else { 2 };
            let tiles = Tiles {
                block_v: 128,
                warps: 8,
                producer_warps: 4,
                producer_groups: groups,
                wgmma: true,
                ctas_per_sm: 1,
            };
            if let Ok(s) = KernelSpec::new(gate, dtype, 32, 16, 128, vd, false, tiles)
                .and_then(|s| s.with_cluster_key_split().or_else(|_| s.with_key_split(2)))
            {
                return Ok(s);
            }
        }
        // d_k = 512: four 128-column key slices on the same d = 128 wgmma kernel, their f32 partial outputs summed
        // by gla_fwd_ksum (a 4-CTA cluster exchange is not built).
        if ws && kd == 512 && vd >= 128 && dk.is_multiple_of(4) {
            let groups = if per_key { 1 } else { 2 };
            let tiles = Tiles {
                block_v: 128,
                warps: 8,
                producer_warps: 4,
                producer_groups: groups,
                wgmma: true,
                ctas_per_sm: 1,
            };
            if let Ok(s) = KernelSpec::new(gate, dtype, 32, 16, 128, vd, false, tiles)
                .and_then(|s| s.with_key_split(4))
            {
                return Ok(s);
            }
        }
        // Otherwise d_k = 257..512 runs as key slices of equal width on the plain fused kernels (f32, value gates,
        // d_v < 128, d_k not a multiple of 4): four of at most 128 columns, or two of at most 256. No single kernel
        // holds a 512-wide key tile (a plain C 32 kernel needs 432 KB of shared memory in f32).
        if kd == 512 {
            for (ks, kdim) in [(4u32, 128u32), (2, 256)] {
                if !dk.is_multiple_of(ks as usize) || dk / ks as usize > kdim as usize {
                    continue;
                }
                for (chunk, bv, warps) in plain_prefs(per_key, kdim) {
                    let tiles = Tiles {
                        block_v: bv.min(vd),
                        warps,
                        producer_warps: 0,
                        producer_groups: 1,
                        wgmma: false,
                        ctas_per_sm: 1,
                    };
                    if let Ok(s) = KernelSpec::new(gate, dtype, chunk, 16, kdim, vd, false, tiles)
                        .and_then(|s| s.with_key_split(ks))
                    {
                        return Ok(s);
                    }
                }
            }
            return Err(GlaError::invalid(
                "d_k",
                format!("a d_k over 256 runs as 2 or 4 key slices of equal width, so it must be even; got {dk} (pad q and k with a zero column to {})", dk + 1),
            ));
        }
        let mut first_err = None;
        for (chunk, bv, warps, producer_warps, producer_groups, wgmma) in prefs {
            // Two CTAs an SM wherever they fit (d = 64, 256 threads).
            let tiles = Tiles {
                block_v: bv.min(vd),
                warps,
                producer_warps,
                producer_groups,
                wgmma,
                ctas_per_sm: 1,
            };
            let two = Tiles {
                ctas_per_sm: 2,
                ..tiles
            };
            let spec = KernelSpec::new(gate, dtype, chunk, 16, kd, vd, false, two)
                .or_else(|_| KernelSpec::new(gate, dtype, chunk, 16, kd, vd, false, tiles));
            match spec {
                Ok(s) => return Ok(s),
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        Err(first_err.expect("at least one candidate"))
    }

    /// Check the spec against the supported space.
    pub fn validate(&self) -> Result<(), GlaError> {
        let bad = |msg: String| {
            Err(GlaError::Unsupported {
                variant: self.id(),
                msg,
            })
        };
        if ![32, 64, 128].contains(&self.chunk) {
            return bad(format!(
                "chunk size C must be 32, 64 or 128, got {}",
                self.chunk
            ));
        }
        if ![16, 32].contains(&self.sub_chunk) || !self.chunk.is_multiple_of(self.sub_chunk) {
            return bad(format!(
                "sub-chunk c must be 16 or 32 and divide C = {}, got {}",
                self.chunk, self.sub_chunk
            ));
        }
        // A kernel's key tile is at most 256 wide (d_k up to 512 runs as 2 or 4 key slices); the value dim only sets
        // the grid's value tiles.
        if ![64, 128, 256].contains(&self.dk) {
            return bad(format!("specialised d_k must be 64, 128 or 256 (a wider d_k, up to 512, runs as key slices: key_split 2 or 4), got {}", self.dk));
        }
        if ![64, 128, 256, 512].contains(&self.dv) {
            return bad(format!(
                "specialised d_v must be 64, 128, 256 or 512, got {}",
                self.dv
            ));
        }
        if ![16, 32, 64, 128].contains(&self.tiles.block_v) || self.tiles.block_v > self.dv {
            return bad(format!(
                "block_v must be 16, 32, 64 or 128 and <= d_v = {}, got {}",
                self.dv, self.tiles.block_v
            ));
        }
        if ![4, 8, 16].contains(&self.tiles.warps) {
            return bad(format!(
                "warps must be 4, 8 or 16, got {}",
                self.tiles.warps
            ));
        }
        if !self.tiles.specialised() && self.tiles.producer_groups != 1 {
            return bad(format!(
                "producer_groups must be 1 without producer warps, got {}",
                self.tiles.producer_groups
            ));
        }
        if self.tiles.specialised() {
            let p = self.tiles.producer_warps;
            if ![4, 8].contains(&p) {
                return bad(format!(
                    "producer_warps must be 0 (no warp specialisation), 4 or 8, got {p}"
                ));
            }
            if ![1, 2].contains(&self.tiles.producer_groups)
                || !(p / self.tiles.producer_groups).is_multiple_of(2)
            {
                return bad(format!(
                    "producer_groups must be 1 or 2 and leave an even number of warps in each group, got {} for {p} producer warps",
                    self.tiles.producer_groups
                ));
            }
            if self.tiles.warps > 8 {
                return bad(format!(
                    "a warp-specialised CTA has at most 8 consumer warps, got {}",
                    self.tiles.warps
                ));
            }
            if self.materialize {
                return bad(
                    "warp specialisation is a fused (materialize off) plan; use producer_warps = 0"
                        .into(),
                );
            }
            if self.dtype == DType::F32 {
                return bad("warp specialisation needs a tensor-core dtype (bf16 or f16); use producer_warps = 0 for f32".into());
            }
            if self.shape() == GateShape::PerValue
                && !(self.tiles.wgmma && self.tiles.producer_warps == 4 && self.key_split == 1)
            {
                return bad("a per-value gate is warp-specialised on wgmma consumers with 4 producer warps (one or two groups) and no key split; use wgmma, or producer_warps = 0".into());
            }
        }
        if self.tiles.wgmma {
            let t = &self.tiles;
            if !t.specialised() {
                return bad(
                    "wgmma consumers need a warp-specialised variant (producer_warps 4 or 8)"
                        .into(),
                );
            }
            if t.block_v != 16 * t.warps {
                return bad(format!(
                    "wgmma consumers hold 64 value columns per warpgroup of 4 warps: block_v must be 16 · warps = {}, got {}",
                    16 * t.warps,
                    t.block_v
                ));
            }
            if self.dk > 128 {
                return bad(format!("wgmma consumers keep the d_k x 64 state of a warpgroup in registers: d_k must be 64 or 128, got {}", self.dk));
            }
            if self.chunk != 32 {
                return bad(format!("wgmma consumers run C = 32 (the output and state accumulators of C 64 do not fit beside the state), got C = {}", self.chunk));
            }
        }
        match self.key_split {
            1 => {}
            2 | 4 => {
                // Every fused family writes the slices' f32 partial outputs (gla_fwd_ksum adds them); the
                // materialized plan's state pass is not split.
                if self.materialize {
                    return bad(format!("key split {} is a fused plan (each key slice's CTAs write f32 partial outputs); use materialize off", self.key_split));
                }
            }
            n => return bad(format!("key_split must be 1, 2 or 4, got {n}")),
        }
        if self.cluster
            && (self.key_split != 2
                || !self.tiles.wgmma
                || self.materialize
                || self.tiles.ctas_per_sm != 1)
        {
            return bad(format!(
                "a cluster key split pairs the two key slices of a head in one 2-CTA cluster: it needs key_split 2, a fused variant with wgmma consumers and one CTA an SM, got key_split {}, {}, {} CTA(s) an SM",
                self.key_split,
                if self.materialize { "materialize" } else if self.tiles.wgmma { "wgmma" } else { "no wgmma" },
                self.tiles.ctas_per_sm
            ));
        }
        if self.pass == Pass::Dv && (self.shape() == GateShape::PerValue || !self.tiles.wgmma) {
            return bad(format!(
                "the dv pass (the time-reversed forward) runs per-key, per-head and fixed gates on wgmma consumers, got a {:?} gate, {}",
                self.shape(),
                if self.tiles.wgmma { "wgmma" } else { "no wgmma" },
            ));
        }
        if matches!(self.pass, Pass::Dq | Pass::Dk)
            && (self.gate.shape() == GateShape::PerValue || !self.tiles.wgmma || self.key_split > 1)
        {
            return bad(format!(
                "the dq / dk passes run per-key gates (as per-value kernels), per-head and fixed gates on wgmma consumers without a key split, got a {:?} gate, {}, key_split {}",
                self.gate.shape(),
                if self.tiles.wgmma { "wgmma" } else { "no wgmma" },
                self.key_split
            ));
        }
        let features = Features::of(self);
        let smem = features.smem.total;
        match self.tiles.ctas_per_sm {
            1 => {}
            2 => {
                if !self.tiles.specialised() || self.tiles.threads() != 256 {
                    return bad(format!(
                        "two CTAs an SM need a warp-specialised variant of 256 threads (at most 128 registers a thread), got {} threads{}",
                        self.tiles.threads(),
                        if self.tiles.specialised() { "" } else { " without producer warps" }
                    ));
                }
                if self.dk != 64 {
                    return bad(format!(
                        "two CTAs an SM (128 registers a thread) fit d_k = 64 only (at d_k = {} the kernel spills): use ctas_per_sm = 1",
                        self.dk
                    ));
                }
                if 2 * (smem + SMEM_RESERVED_PER_CTA) > SMEM_PER_SM {
                    return bad(format!(
                        "two CTAs an SM need 2 × ({smem} + {SMEM_RESERVED_PER_CTA}) B of shared memory, over the SM's {SMEM_PER_SM} B: use ctas_per_sm = 1"
                    ));
                }
            }
            n => return bad(format!("ctas_per_sm must be 1 or 2, got {n}")),
        }
        if smem > MAX_SMEM_BYTES {
            return bad(format!(
                "needs {} B of shared memory, over the {} B an sm_90 CTA can have: use a smaller chunk or block_v",
                smem, MAX_SMEM_BYTES
            ));
        }
        let stages = features.smem.stages;
        if self.cluster && features.two_tma_groups && stages < 4 {
            return bad(format!(
                "two TMA producer groups need four slots, and with the cluster key split's exchange tile only {stages} fit: use one producer group"
            ));
        }
        Ok(())
    }
}

/// The plain (not warp-specialised) tiles (chunk, block_v, warps) of a specialised head dim, in the order
/// [`KernelSpec::default_for`] tries them (the runtime's kernels for f32, value gates and head dims the
/// warp-specialised kernels do not take).
fn plain_prefs(per_key: bool, kd: u32) -> Vec<(u32, u32, u32)> {
    let mut v = match kd {
        64 => vec![if per_key { (32, 64, 4) } else { (64, 64, 8) }, (32, 64, 4)],
        128 => vec![(64, 128, if per_key { 16 } else { 8 }), (32, 64, 8)],
        _ => vec![if per_key { (32, 64, 8) } else { (64, 64, 8) }],
    };
    v.extend([(64, 64, 8), (32, 64, 8), (64, 32, 8), (32, 32, 8)]);
    v
}

/// The first plain tiles of [`plain_prefs`] that make a valid variant (fused or materialized).
fn plain_fallback(
    gate: &'static dyn Gate,
    dtype: DType,
    kd: u32,
    materialize: bool,
) -> Option<KernelSpec> {
    plain_prefs(gate.shape() == GateShape::PerKey, kd)
        .into_iter()
        .find_map(|(c, bv, w)| {
            let tiles = Tiles {
                block_v: bv.min(kd),
                warps: w,
                producer_warps: 0,
                producer_groups: 1,
                wgmma: false,
                ctas_per_sm: 1,
            };
            KernelSpec::new(gate, dtype, c, 16, kd, kd, materialize, tiles).ok()
        })
}

/// Plain fused bf16 variants kept for the coverage of the tile parameters (sub-chunk 32, 32-wide value tiles, 16
/// warps): (chunk, sub-chunk, d, block_v, warps). (C = 128 stays a candidate only: its compile is the slowest of
/// all, ~20 s, and it never won.)
const COVERAGE: [(u32, u32, u32, u32, u32); 3] = [
    (64, 32, 64, 64, 8),
    (32, 16, 64, 32, 4),
    (64, 16, 128, 128, 16),
];

/// Whether a candidate can win somewhere, or keeps a kernel family compiled and tested. The last full benchmark
/// (H200, every bf16 fused variant of the GLA and Mamba-2 gates at d = 64, 128, 256 and eight shapes; benches/NOTES.md)
/// had the defaults win at every shape — the next best 11–42 % behind, except the one-CTA `w4p4g` tying the
/// per-head d = 64 default — so the space is: the defaults, the bf16 runner-ups on wgmma (d = 64: 4 + 4 warps, one
/// or two CTAs an SM; d = 128: `w8p4g`; d_k = 256: every key split), one bf16 warp-specialised mma.sync kernel a
/// head dim (the tiles `default_for` takes for d_v < 128; f16 runs the same kernels and would rank alike), the plain fallback fused and materialized, and [`COVERAGE`].
fn worth_keeping(s: &KernelSpec, kept: &[String]) -> bool {
    let t = &s.tiles;
    let (d, per_key) = (s.key_dim(), s.shape() == GateShape::PerKey);
    if kept.contains(&s.id()) {
        return true;
    }
    if !t.specialised() {
        return s.dtype == DType::BF16
            && !s.materialize
            && COVERAGE.contains(&(s.chunk, s.sub_chunk, s.dk, t.block_v, t.warps));
    }
    // f16 runs the same kernels as bf16 (only the conversions differ): its runner-ups would rank alike.
    if s.dtype != DType::BF16 {
        return false;
    }
    let groups = (t.producer_warps, t.producer_groups);
    if t.wgmma {
        return match d {
            64 => t.warps == 4,
            // (a value gate's also in two producer groups: its producers are what limits it)
            128 => {
                s.key_split == 1
                    && t.block_v == 128
                    && (groups == (4, 1) || (s.shape() == GateShape::PerValue && groups == (4, 2)))
            }
            256 => s.key_split == 2,
            _ => s.key_split == 4,
        };
    }
    s.chunk == 32
        && ((d == 128
            && t.block_v == 64
            && t.warps == 8
            && t.ctas_per_sm == 1
            && groups == if per_key { (4, 1) } else { (4, 2) })
            || (d == 64 && t.warps == 4 && t.ctas_per_sm == 2))
}

/// The dv pass's kernels of `gate` ([`Pass::Dv`], the backward's dv as the time-reversed forward): the bf16 / f16
/// defaults of d = 64 … 512 made dv passes (on wgmma, key splits included; empty for per-value gates).
/// `Gla::backward` runs them; `autotune --plan` compiles them with the forward variants.
pub fn dv_pass_variants(gate: &'static dyn Gate) -> Vec<KernelSpec> {
    [DType::BF16, DType::F16]
        .into_iter()
        .flat_map(|dt| [64, 128, 256, 512].map(|d| (dt, d)))
        .filter_map(|(dt, d)| {
            KernelSpec::default_for(gate, dt, d, d)
                .and_then(|s| s.with_pass(Pass::Dv))
                .ok()
        })
        .collect()
}

/// The dq and dk passes ([`Pass::Dq`], [`Pass::Dk`]) of `gate` that `Gla::backward` may run: bf16 / f16, d = 64
/// and 128, the default ([`KernelSpec::pass_default`]) and, for a per-key gate, the other tiles of
/// [`per_key_pass_tiles`]; empty for per-value gates. `autotune --plan` compiles them.
pub fn dq_dk_pass_variants(gate: &'static dyn Gate) -> Vec<KernelSpec> {
    let mut out = Vec::new();
    for dt in [DType::BF16, DType::F16] {
        for d in [64, 128] {
            for p in [Pass::Dq, Pass::Dk] {
                if gate.shape() == GateShape::PerKey {
                    out.extend(
                        per_key_pass_tiles(dt, d)
                            .into_iter()
                            .filter_map(|t| KernelSpec::per_key_pass(gate, dt, d, t, p).ok()),
                    );
                } else {
                    out.extend(KernelSpec::pass_default(gate, dt, d, d, p).ok());
                }
            }
        }
    }
    out
}

/// The tiles a per-key gate's dq / dk pass (a per-value kernel on wgmma, 4 producer warps) may run with at
/// d_k = d_v = `d` in `dtype`, the default's first: one consumer warpgroup (64 value columns a CTA: two CTAs a head at
/// d = 128) or, at d = 128 in bf16, two (the whole head in one CTA, producers in two groups; in f16 their
/// consumers spilled 32 B, one group's producers 52 B and were slower); producers in two groups on alternate chunks,
/// or one. H100, bf16 backward at 8×4096×16×128 (gla/16, RWKV-6): the walks 2.84 /
/// 3.72 ms, passes `w8p4x2g` 2.37 / 4.22, `w4p4x2g` 2.89 / 4.76 (before strong_values). Eight producer warps in two
/// groups (`w8p8x2g`, 128 registers a thread) spilled 88–384 B at every consumer / producer split tried.
pub fn per_key_pass_tiles(dtype: DType, d: usize) -> Vec<Tiles> {
    let t = |warps: u32, producer_groups: u32| Tiles {
        block_v: 16 * warps,
        warps,
        producer_warps: 4,
        producer_groups,
        wgmma: true,
        ctas_per_sm: 1,
    };
    match (d, dtype) {
        (64, _) => vec![t(4, 2), t(4, 1)],
        (128, DType::BF16) => vec![t(8, 2), t(4, 2), t(4, 1)],
        (128, _) => vec![t(4, 2), t(4, 1)],
        _ => Vec::new(),
    }
}

/// Whether a per-key gate's backward takes its dq / dk passes (rather than the dq / dk walks) by default at
/// d_k = d_v = `d` in `dtype`, where the problem allows them (no initial state, no final-state gradient) and their
/// CTAs fill the GPU ([`per_key_passes_default_at`]). Chosen by the worst gate strength, as the tuner chooses. H100,
/// bf16 backward, walks / passes in one run, after the passes' consumers took V's scaling (session am):
/// 8×4096×16×128 (`w8p4x2g`) gla/16 2.85 / 2.13 ms (al), RWKV-6 3.73 / 3.54 (al; the passes 3.38 since), log α =
/// −60 3.52 / 3.26 (3.19 since); 8×4096×32×64 (`w4p4x2g`) gla/16 2.51 / 2.29, RWKV-6 3.43 / 3.31, −60 3.18 / 3.06 —
/// faster at every strength at both head dims. f16 (no two-group tile at d = 128) was not timed: the walks.
pub fn per_key_passes_default(dtype: DType, d: usize) -> bool {
    // (by the kernel's head dim: a call at d = 100 runs the d = 128 kernels)
    dtype == DType::BF16 && matches!(specialised_dim(d), Some(64 | 128))
}

/// [`per_key_passes_default`] at a call of `rows` = sequences × heads on `sms` multiprocessors: the passes only where
/// their CTAs (a row's value tiles of the default tiles, [`per_key_pass_tiles`]) fill more than half the GPU, as the
/// forward's two-level scan starts below half — a pass walks each sequence whole, and with too few sequences the walks'
/// segments win. H100 (132 SMs), bf16, walks (cut as `BackwardSpec::walk_segment_chunks` says) / passes: 2×16384×16
/// (32 CTAs) d = 128 gla/16 7.43 / 7.05 ms, RWKV-6 8.11 / 12.92, −60 7.91 / 12.42; d = 64 3.34 / 4.75, 4.23 / 6.96,
/// 3.76 / 6.46; at 8×4096×16 (128 CTAs) `autotune --backward`'s worst strength, d = 64: passes 1.21 vs cut walks 2.18
/// (gla), 1.90 vs 2.63 (RWKV-6). What `Gla::backward` takes with no choice made, and the tuner's baseline.
pub fn per_key_passes_default_at(dtype: DType, d: usize, rows: usize, sms: u32) -> bool {
    let Some(k) = specialised_dim(d) else {
        return false;
    };
    per_key_passes_default(dtype, d)
        && per_key_pass_tiles(dtype, k as usize)
            .first()
            .is_some_and(|t| 2 * rows * (k as usize).div_ceil(t.block_v as usize) > sms as usize)
}

impl KernelSpec {
    /// The kernel of backward pass `pass` for a call with head dims `dk` × `dv` *of the pass's kernel* (the dq / dk
    /// passes swap them: q ← dO): the default forward variant made that pass — but a per-key gate's dq / dk passes
    /// are per-value kernels ([`KernelSpec::shape`]) with the first of [`per_key_pass_tiles`], d_k = d_v = 64 or
    /// 128. Errors where the pass has no kernel.
    pub fn pass_default(
        gate: &'static dyn Gate,
        dtype: DType,
        dk: usize,
        dv: usize,
        pass: Pass,
    ) -> Result<Self, GlaError> {
        if gate.shape() == GateShape::PerKey && matches!(pass, Pass::Dq | Pass::Dk) {
            let d = specialised_dim(dk).filter(|&d| Some(d) == specialised_dim(dv));
            return match d.and_then(|d| per_key_pass_tiles(dtype, d as usize).first().copied()) {
                Some(tiles) => KernelSpec::per_key_pass(gate, dtype, dk, tiles, pass),
                None => Err(GlaError::Unsupported {
                    variant: format!("{}.{:?}", gate.name(), pass),
                    msg: format!(
                        "a per-key gate's dq / dk passes run d_k = d_v = 64 or 128, got {dk} x {dv}"
                    ),
                }),
            };
        }
        KernelSpec::default_for(gate, dtype, dk, dv).and_then(|s| s.with_pass(pass))
    }

    /// A per-key gate's dq or dk pass (`pass`) for head dim `d` (d_k = d_v) on `tiles` (one of
    /// [`per_key_pass_tiles`]; others are validated like any variant and may be refused).
    pub fn per_key_pass(
        gate: &'static dyn Gate,
        dtype: DType,
        d: usize,
        tiles: Tiles,
        pass: Pass,
    ) -> Result<Self, GlaError> {
        let d = specialised_dim(d).unwrap_or(d as u32);
        KernelSpec::new(gate, dtype, 32, 16, d, d, false, tiles).and_then(|s| s.with_pass(pass))
    }
}

/// The autotuner's search space for `gate`, in a deterministic order: the variants that can win or that keep a
/// kernel family compiled and tested (`worth_keeping`: the defaults, the runner-ups, one kernel a family), out of
/// every valid combination ([`candidates`]). Every variant [`KernelSpec::default_for`] gives for d = 64, 128, 256
/// is in it.
pub fn all_variants(gate: &'static dyn Gate) -> Vec<KernelSpec> {
    let mut kept = Vec::new();
    for dtype in DType::ALL {
        for d in [64u32, 128, 256, 512] {
            kept.extend(
                KernelSpec::default_for(gate, dtype, d as usize, d as usize)
                    .ok()
                    .map(|s| s.id()),
            );
            for materialize in [false, true] {
                kept.extend(plain_fallback(gate, dtype, d, materialize).map(|s| s.id()));
            }
        }
    }
    candidates(gate)
        .into_iter()
        .filter(|s| worth_keeping(s, &kept))
        .collect()
}

/// Every valid forward variant of `gate` that the generator builds, in a deterministic order (a superset of
/// [`all_variants`]; the layout and protocol tests check their invariants over it). Combinations that do not fit in
/// shared memory are left out. Scalar and fixed gates do not use sub-chunks, so they get one
/// sub-chunk size only.
pub fn candidates(gate: &'static dyn Gate) -> Vec<KernelSpec> {
    // Per-key and per-value gates decompose with sub-chunks (§4.3); scalar and fixed gates do not.
    let scalar = matches!(gate.shape(), GateShape::PerHead | GateShape::Fixed);
    let mut out = Vec::new();
    for dtype in DType::ALL {
        for d in [64u32, 128, 256] {
            for chunk in [32u32, 64, 128] {
                for sub_chunk in [16u32, 32] {
                    if chunk % sub_chunk != 0 || (scalar && sub_chunk != 16) {
                        continue;
                    }
                    for materialize in [false, true] {
                        for block_v in [32u32, 64, 128] {
                            for warps in [4u32, 8, 16] {
                                if d == 256 && warps == 4 {
                                    continue; // the d_k x block_v state would not fit in 4 warps' registers
                                }
                                // d = 256 with 32-wide value tiles: 8 tiles per head repeat the gate and scores 8×
                                // (2× slower than 64-wide on the H200) and per-key C 64 spills.
                                if d == 256 && block_v == 32 {
                                    continue;
                                }
                                // 16 warps (4 per scheduler, at most 128 registers a thread) at d = 128 with wide
                                // tiles and tensor-core dtypes only: f32's CUDA-core path and d = 256 spill there.
                                if warps == 16 && (d != 128 || block_v < 64 || dtype == DType::F32)
                                {
                                    continue;
                                }
                                // One 128-wide value tile per head (no per-tile repeat of the gate, scores and
                                // decays) where the d_k x 128 state fits in the registers: d = 128 with 8 or 16
                                // warps (64 / 32 registers a thread). (d = 256 with 16 warps spills ~400 B.)
                                if block_v == 128 && !(d == 128 && warps >= 8) {
                                    continue;
                                }
                                let tiles = Tiles {
                                    block_v,
                                    warps,
                                    producer_warps: 0,
                                    producer_groups: 1,
                                    wgmma: false,
                                    ctas_per_sm: 1,
                                };
                                if let Ok(s) = KernelSpec::new(
                                    gate,
                                    dtype,
                                    chunk,
                                    sub_chunk,
                                    d,
                                    d,
                                    materialize,
                                    tiles,
                                ) {
                                    out.push(s);
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    // Warp-specialised fused variants (tensor-core dtypes; per-key, per-head and fixed gates): C 32 / 64, one
    // sub-chunk size, consumer x producer warps 4x4, 8x4, 8x8; value tiles 64 (any d) and 128 (d = 128, 8
    // consumers). Left out where the slot ring does not fit in shared memory or the registers spill.
    if gate.shape() != GateShape::PerValue {
        for dtype in [DType::BF16, DType::F16] {
            for d in [64u32, 128, 256] {
                for chunk in [32u32, 64] {
                    for block_v in [64u32, 128] {
                        for (warps, producer_warps, producer_groups) in [
                            (4u32, 4u32, 1u32),
                            (8, 4, 1),
                            (8, 8, 1),
                            (8, 4, 2),
                            (8, 8, 2),
                        ] {
                            if block_v > d
                                || (block_v == 128 && (d != 128 || warps != 8))
                                || (d == 256 && warps == 4)
                            {
                                continue;
                            }
                            // 8 + 8 warps: 128 registers a thread; the consumers' state spills beyond d_k x BV =
                            // 128 x 128 at C 32 or 64 x 64 at C 64 (ptxas; setmaxnreg does not raise its limit).
                            if producer_warps == 8 && (d == 256 || (d == 128 && chunk == 64)) {
                                continue;
                            }
                            // Two producer groups (two Γ tiles): d = 128 at C 32 only (elsewhere the ring no longer
                            // has three slots or the registers spill).
                            if producer_groups == 2 && (d != 128 || chunk != 32) {
                                continue;
                            }
                            // Per-key gates, 8 + 8 warps (128 registers a thread) with one 128-wide tile at C 32, or
                            // 64-wide at C 64 and d = 64: their producers spill 12–136 B since the stages address
                            // tiles through the layout functions (v8 fitted exactly). Left out: the
                            // strict no-spill rule stands, and they were never the fastest (GLA 0.40–0.44 ms at
                            // 8×4096×16×128 against 0.365 for w8p4g).
                            let per_key = gate.shape() == GateShape::PerKey;
                            let spills_8x8 = per_key
                                && warps == 8
                                && producer_warps == 8
                                && ((d == 128 && chunk == 32 && block_v == 128)
                                    || (d == 64 && chunk == 64 && block_v == 64));
                            let tiles = Tiles {
                                block_v,
                                warps,
                                producer_warps,
                                producer_groups,
                                wgmma: false,
                                ctas_per_sm: 1,
                            };
                            if !spills_8x8 {
                                if let Ok(s) =
                                    KernelSpec::new(gate, dtype, chunk, 16, d, d, false, tiles)
                                {
                                    out.push(s);
                                }
                                if let Ok(s) = KernelSpec::new(
                                    gate,
                                    dtype,
                                    chunk,
                                    16,
                                    d,
                                    d,
                                    false,
                                    Tiles {
                                        ctas_per_sm: 2,
                                        ..tiles
                                    },
                                ) {
                                    out.push(s);
                                }
                            }
                            // The same with wgmma consumers where they apply (C 32, 64 value columns per consumer
                            // warpgroup, d <= 128; at 8 + 8 warps Sᵀ reaches the output product through shared
                            // memory, see writer::wg_smem_s).
                            let tiles = Tiles {
                                wgmma: true,
                                ..tiles
                            };
                            // Register fits (ptxas, no spill): 8 + 8 warps leave the producers 136 registers a thread
                            // (the consumers keep 120) — enough for one group of scalar-gate producers only; per-key
                            // producers in two groups of two warps spill at any warp count (416 B). (Per-key 8 + 8 with
                            // the tf32 wgmma scores split over two producer warpgroups was built and measured in
                            // 0.441 vs 0.345 ms for w8p4g at 8×4096×16×128 — a second warp a
                            // scheduler does not hide the gate's MUFU latency — and removed again.)
                            let sixteen_warps = warps + producer_warps > 12;
                            let two_groups = producer_groups > 1;
                            // Per key, two groups of one warpgroup each (8 + 8, C 32, one 128-wide tile): two producer
                            // warps a scheduler on alternate chunks, the consumers' Sᵀ in registers (144 / 112 split).
                            let per_key_x2 = per_key
                                && sixteen_warps
                                && two_groups
                                && d == 128
                                && chunk == 32
                                && block_v == 128;
                            if !per_key_x2
                                && ((per_key && (sixteen_warps || two_groups))
                                    || (sixteen_warps && two_groups))
                            {
                                continue;
                            }
                            // Scalar gates, 8 + 8 warps, one 128-wide tile at d = 128: since the state pass also runs
                            // the lead segment's fused forward its kernel spills 56–64 B; the best
                            // variant at no shape measured (Mamba-2 w8p8g 0.263 ms vs 0.221 for w8p4x2g), left out.
                            if !per_key
                                && sixteen_warps
                                && !two_groups
                                && d == 128
                                && block_v == 128
                            {
                                continue;
                            }
                            if let Ok(s) =
                                KernelSpec::new(gate, dtype, chunk, 16, d, d, false, tiles)
                            {
                                out.push(s);
                            }
                            // Two CTAs an SM where 256 threads' shared memory fits twice (d = 64).
                            if let Ok(s) = KernelSpec::new(
                                gate,
                                dtype,
                                chunk,
                                16,
                                d,
                                d,
                                false,
                                Tiles {
                                    ctas_per_sm: 2,
                                    ..tiles
                                },
                            ) {
                                out.push(s);
                            }
                        }
                    }
                }
            }
        }
    }
    // Per-value gates on wgmma consumers (tensor-core dtypes, C 32, 4 producer warps in one group or in two taking
    // alternate chunks, no key split: see `value_operands`): 64 value columns a consumer warpgroup, d = 64 (one
    // warpgroup; one or two CTAs an SM) and d = 128 (one or two warpgroups).
    if gate.shape() == GateShape::PerValue {
        for dtype in [DType::BF16, DType::F16] {
            for (d, warps, ctas_per_sm, producer_groups) in [
                (64u32, 4u32, 1u32, 1u32),
                (64, 4, 2, 1),
                (64, 4, 1, 2),
                (128, 4, 1, 1),
                (128, 8, 1, 1),
                (128, 8, 1, 2),
            ] {
                let tiles = Tiles {
                    block_v: 16 * warps,
                    warps,
                    producer_warps: 4,
                    producer_groups,
                    wgmma: true,
                    ctas_per_sm,
                };
                if let Ok(s) = KernelSpec::new(gate, dtype, 32, 16, d, d, false, tiles) {
                    out.push(s);
                }
            }
        }
    }
    // Key split 2 (d_k = 256): each head as two 128-column key slices on the d = 128 kernel with one 128-wide value
    // tile (8 consumer warps on wgmma; per key 4 producer warps, or 8 in two groups; scalar gates 4 in two groups),
    // f32 partial outputs summed by gla_fwd_ksum — and each also as a 2-CTA cluster whose slices exchange the
    // partial outputs over DSMEM (where the exchange tile fits beside the slots). (The chunkwise form is linear in the key columns and a scalar
    // gate's decay is the same for every key row, so the slices' O_s = Q̃_s S_s + (Q_s K_sᵀ ⊙ D) V add up to O.)
    if gate.shape() != GateShape::PerValue {
        // (Per key one producer group: the two-group 8 + 8-warp producers spill at 112 registers with the exact
        // path's levels, 172–196 B, and never won a key split.)
        let groups: &[(u32, u32)] = if gate.shape() == GateShape::PerKey {
            &[(4, 1)]
        } else {
            &[(4, 2)]
        };
        for dtype in [DType::BF16, DType::F16] {
            for &(producer_warps, producer_groups) in groups {
                let tiles = Tiles {
                    block_v: 128,
                    warps: 8,
                    producer_warps,
                    producer_groups,
                    wgmma: true,
                    ctas_per_sm: 1,
                };
                if let Ok(s) = KernelSpec::new(gate, dtype, 32, 16, 128, 256, false, tiles)
                    .and_then(|s| s.with_key_split(2))
                {
                    out.push(s);
                    // The same as a 2-CTA cluster (where its exchange tile fits in shared memory).
                    if let Ok(c) = s.with_cluster_key_split() {
                        out.push(c);
                    }
                }
            }
        }
    }
    // Key split 4 (d_k = 512): four 128-column slices on the d = 128 wgmma kernel of the key split 2 above
    // (tensor-core dtypes; per-key, per-head and fixed gates), and on the first plain fused tiles that fit for every
    // dtype and gate (what default_for takes for f32, value gates and d_v < 128).
    let per_key = gate.shape() == GateShape::PerKey;
    for dtype in DType::ALL {
        if dtype != DType::F32 && gate.shape() != GateShape::PerValue {
            let groups: &[(u32, u32)] = if per_key { &[(4, 1)] } else { &[(4, 2)] }; // (as for key split 2)
            for &(producer_warps, producer_groups) in groups {
                let tiles = Tiles {
                    block_v: 128,
                    warps: 8,
                    producer_warps,
                    producer_groups,
                    wgmma: true,
                    ctas_per_sm: 1,
                };
                if let Ok(s) = KernelSpec::new(gate, dtype, 32, 16, 128, 512, false, tiles)
                    .and_then(|s| s.with_key_split(4))
                {
                    out.push(s);
                }
            }
        }
        let plain = plain_prefs(per_key, 128)
            .into_iter()
            .find_map(|(chunk, bv, warps)| {
                let tiles = Tiles {
                    block_v: bv,
                    warps,
                    producer_warps: 0,
                    producer_groups: 1,
                    wgmma: false,
                    ctas_per_sm: 1,
                };
                KernelSpec::new(gate, dtype, chunk, 16, 128, 512, false, tiles)
                    .and_then(|s| s.with_key_split(4))
                    .ok()
            });
        out.extend(plain);
    }
    out
}
