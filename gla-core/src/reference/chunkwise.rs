//! The chunkwise form in f32, exactly as the kernels decompose it (equations in the module docs of
//! [`reference`](super)).
//!
//! Per (sequence, head): the state `S` (`[d_k, d_v]`, f32) enters chunk `n` as `S_[n]`; [`Chunk::prepare`]
//! computes the in-chunk cumulative log-decays, [`Chunk::output`] the chunk's outputs from `S_[n]`,
//! [`Chunk::update_state`] `S_[n+1]`. The two schedules of Alg. 1 call these in different orders.

use super::check::{check, Checked, RowGate, SeqHead, Task};
use super::levels::{pair_scores, Decay};
use super::{ChunkConfig, ExpStats, Fault, Forward, KeyGate, Problem};
use crate::error::Result;
use crate::GlaError;
use rayon::prelude::*;

/// Log-gates below this are rejected by the f32 form: their in-chunk sums could overflow f32 (and `exp` of them is
/// 0 anyway).
const MIN_LOG_GATE_F32: f64 = -1e30;

impl ExpStats {
    /// `exp(x)`, recording the evaluation. Every `exp` of the chunkwise form goes through here.
    pub(super) fn exp(&mut self, x: f32) -> f32 {
        self.count += 1;
        let x64 = f64::from(x);
        if x.is_nan() || self.max_arg.is_nan() {
            self.max_arg = f64::NAN;
        } else if x64 > self.max_arg {
            self.max_arg = x64;
        }
        x.exp()
    }

    /// `exp(x)` of the factorised form's positive-argument factor (`K ⊙ e^−Γ`), recorded apart from `max_arg`.
    fn exp_factor(&mut self, x: f32) -> f32 {
        self.count += 1;
        let x64 = f64::from(x);
        if x.is_nan() || self.max_factor_arg.is_nan() {
            self.max_factor_arg = f64::NAN;
        } else if x64 > self.max_factor_arg {
            self.max_factor_arg = x64;
        }
        x.exp()
    }
}

/// One chunk of one (sequence, head): rows `i0 .. i0 + l` of the sequence, with its cumulative log-decays.
pub(super) struct Chunk<'x> {
    pub(super) x: &'x SeqHead<f32>,
    i0: usize,
    /// Valid rows (`≤ C`).
    pub(super) l: usize,
    /// Γ: `[l, d_k]` for a per-key gate, `[l]` for a scalar gate (none, per head, fixed).
    pub(super) gamma: Vec<f32>,
    pub(super) per_key: bool,
    /// B (value side): `[l, d_v]`.
    pub(super) beta: Option<Vec<f32>>,
    sub_chunk: usize,
    fault: Fault,
    /// Per-key chunk taking the factorised form (its decay span passed the check, or the check is faulted away).
    factorised: bool,
}

/// [`crate::LOG2_ALPHA_FLOOR`] in nats.
const LOG_ALPHA_FLOOR: f32 = crate::LOG2_ALPHA_FLOOR * std::f32::consts::LN_2;

/// In-chunk cumulative sum of the `[l, width]` rows `g` (each log-gate floored at [`crate::LOG2_ALPHA_FLOOR`]) (per column, sequential, f32). Inclusive, or exclusive under
/// [`Fault::ExclusiveCumsum`].
fn cumsum(g: &[f32], width: usize, fault: Fault) -> Vec<f32> {
    let mut out = vec![0.0f32; g.len()];
    for col in 0..width {
        let mut acc = 0.0f32;
        for i in 0..g.len() / width {
            // (the kernels' floor on log α, nats; NaN passes: NaN < floor is false)
            let x = g[i * width + col];
            let x = if x < LOG_ALPHA_FLOOR {
                LOG_ALPHA_FLOOR
            } else {
                x
            };
            if fault == Fault::ExclusiveCumsum {
                out[i * width + col] = acc;
                acc += x;
            } else {
                acc += x;
                out[i * width + col] = acc;
            }
        }
    }
    out
}

impl<'x> Chunk<'x> {
    /// Stage load + cumsum: `Γ_i = Σ_{m≤i} log α_m`, `B_i = Σ_{m≤i} log β_m` relative to the chunk start.
    pub(super) fn prepare(x: &'x SeqHead<f32>, i0: usize, cfg: ChunkConfig, fault: Fault) -> Self {
        let (chunk, sub_chunk) = (cfg.chunk, cfg.sub_chunk);
        let l = chunk.min(x.len - i0);
        let (dk, dv) = (x.dk, x.dv);
        let (gamma, per_key) = match &x.key {
            // No gate: a scalar gate with log α ≡ 0.
            RowGate::None => (vec![0.0; l], false),
            RowGate::PerKey(g) => (cumsum(&g[i0 * dk..(i0 + l) * dk], dk, fault), true),
            RowGate::Scalar(g) => (cumsum(&g[i0..i0 + l], 1, fault), false),
        };
        let beta = x
            .value
            .as_ref()
            .map(|g| cumsum(&g[i0 * dv..(i0 + l) * dv], dv, fault));
        // The kernels' span check: Γ is non-increasing, so the span is −min_d Γ_L,d (NaN fails it).
        let span = if per_key {
            gamma[(l - 1) * dk..l * dk]
                .iter()
                .fold(0.0f32, |m, &g| m.max(-g))
        } else {
            0.0
        };
        let factorised = per_key
            && (fault == Fault::UncheckedFactorisation
                || cfg
                    .factorise_span
                    .is_some_and(|bound| span <= bound && !gamma.iter().any(|g| g.is_nan())));
        Chunk {
            x,
            i0,
            l,
            gamma,
            per_key,
            beta,
            sub_chunk,
            fault,
            factorised,
        }
    }

    /// Γ_id (scalar gates ignore `d`).
    pub(super) fn g(&self, i: usize, d: usize) -> f32 {
        if self.per_key {
            self.gamma[i * self.x.dk + d]
        } else {
            self.gamma[i]
        }
    }

    /// B_ie.
    pub(super) fn b(&self, i: usize, e: usize) -> f32 {
        self.beta.as_ref().map_or(0.0, |b| b[i * self.x.dv + e])
    }

    pub(super) fn q(&self, i: usize) -> &'x [f32] {
        let dk = self.x.dk;
        &self.x.q[(self.i0 + i) * dk..(self.i0 + i + 1) * dk]
    }

    pub(super) fn k(&self, j: usize) -> &'x [f32] {
        let dk = self.x.dk;
        &self.x.k[(self.i0 + j) * dk..(self.i0 + j + 1) * dk]
    }

    pub(super) fn v(&self, j: usize) -> &'x [f32] {
        let dv = self.x.dv;
        &self.x.v[(self.i0 + j) * dv..(self.i0 + j + 1) * dv]
    }

    /// Query sub-chunks `(r0, r1)` (rows `r0..r1`) of the secondary chunking.
    fn sub_chunks(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        (0..self.l)
            .step_by(self.sub_chunk)
            .map(|r0| (r0, (r0 + self.sub_chunk).min(self.l)))
    }

    /// Reference row of the off-diagonal blocks of query sub-chunk `r0..r1`: its first row (§4.3), or its last
    /// under [`Fault::WrongReferencePoint`].
    fn reference_row(&self, r0: usize, r1: usize) -> usize {
        if self.fault == Fault::WrongReferencePoint {
            r1 - 1
        } else {
            r0
        }
    }

    /// Stage intra_scores: the lower-triangular `A` (`[l, l]`, zero above the diagonal).
    fn scores(&self, st: &mut ExpStats) -> Vec<f32> {
        let (l, dk) = (self.l, self.x.dk);
        let mut a = vec![0.0f32; l * l];
        if !self.per_key {
            // Scalar gate, single-matmul form: A_ij = (q_i · k_j) exp(Γ_i − Γ_j).
            for i in 0..l {
                for j in 0..=i {
                    let qk = dot(self.q(i), self.k(j));
                    a[i * l + j] = qk * st.exp(self.gamma[i] - self.gamma[j]);
                }
            }
            return a;
        }
        if self.factorised {
            // Factorised form (mild chunks): A_ij = Σ_d [q_id e^{Γ_id}] · [k_jd e^{−Γ_jd}], one product; the second
            // factor's argument is positive but at most the chunk's checked span.
            let q_t: Vec<f32> = (0..l * dk)
                .map(|x| self.q(x / dk)[x % dk] * st.exp(self.gamma[x]))
                .collect();
            let k_t: Vec<f32> = (0..l * dk)
                .map(|x| self.k(x / dk)[x % dk] * st.exp_factor(-self.gamma[x]))
                .collect();
            for i in 0..l {
                for j in 0..=i {
                    a[i * l + j] = dot(&q_t[i * dk..(i + 1) * dk], &k_t[j * dk..(j + 1) * dk]);
                }
            }
            return a;
        }
        // Exact form (chunks over the span bound): the secondary chunking of §4.3 applied recursively (`levels`):
        // A_ii = q_i · k_i with exponent 0; pair (i, j < i) through the first row m of the upper half of the block
        // of its level: A_ij = Σ_d [q_id exp(Γ_id − Γ_md)] · [k_jd exp(Γ_md − Γ_jd)] (both exponents ≤ 0; tensor
        // cores in the kernels). Each row is scaled once a level, log2(C) · C · d_k exponentials a chunk whatever
        // the decay, and no pair needs its own.
        let qs: Vec<Vec<f32>> = (0..l).map(|i| self.q(i).to_vec()).collect();
        let ks: Vec<Vec<f32>> = (0..l).map(|j| self.k(j).to_vec()).collect();
        let fault = self.fault == Fault::WrongReferencePoint;
        let last = l - 1;
        // (The fault: the upper half's last row instead of its first.)
        let reference = |m: usize, h: usize| if fault { (m + h - 1).min(last) } else { m };
        pair_scores(
            &qs,
            &ks,
            &Decay {
                vals: &self.gamma,
                width: dk,
            },
            reference,
            st,
        )
    }

    /// Stages intra_scores + output: `scale · (inter + intra)` of the chunk's `l` rows (`[l, d_v]`), from the
    /// state `s` entering the chunk.
    pub(super) fn output(&self, s: &[f32], scale: f32, st: &mut ExpStats) -> Vec<f32> {
        let (l, dk, dv) = (self.l, self.x.dk, self.x.dv);
        let mut o = vec![0.0f32; l * dv];

        // Inter-chunk: o_i = ((q_i ⊙ exp(Γ_i)) S) ⊙ exp(B_i); a scalar gate scales the row of q_i S instead.
        for i in 0..l {
            let q = self.q(i);
            let row = &mut o[i * dv..(i + 1) * dv];
            for d in 0..dk {
                let qd = if self.per_key {
                    q[d] * st.exp(self.g(i, d))
                } else {
                    q[d]
                };
                for (oe, &se) in row.iter_mut().zip(&s[d * dv..(d + 1) * dv]) {
                    *oe += qd * se;
                }
            }
            if !self.per_key {
                let f = st.exp(self.gamma[i]);
                row.iter_mut().for_each(|oe| *oe *= f);
            }
            if self.beta.is_some() {
                for (e, oe) in row.iter_mut().enumerate() {
                    *oe *= st.exp(self.b(i, e));
                }
            }
        }

        // Intra-chunk: o_i += Σ_{j≤i} A_ij (v_j ⊙ exp(B_i − B_j)).
        let a = self.scores(st);
        if self.beta.is_none() {
            for i in 0..l {
                let row = &mut o[i * dv..(i + 1) * dv];
                for j in 0..=i {
                    axpy(row, a[i * l + j], self.v(j));
                }
            }
        } else {
            // Value gate, sub-chunked on the value side with the same reference rows.
            for (r0, r1) in self.sub_chunks() {
                let r = self.reference_row(r0, r1);
                // Earlier sub-chunks (j < r0): ṽ_j = v_j ⊙ exp(B_r − B_j), Σ_j A_ij ṽ_j, then × exp(B_i − B_r).
                let v_hat: Vec<f32> = (0..r0)
                    .flat_map(|j| self.v(j).iter().enumerate().map(move |(e, &v)| (v, j, e)))
                    .map(|(v, j, e)| v * st.exp(self.b(r, e) - self.b(j, e)))
                    .collect();
                for i in r0..r1 {
                    let row = &mut o[i * dv..(i + 1) * dv];
                    if r0 > 0 {
                        let mut acc = vec![0.0f32; dv];
                        for j in 0..r0 {
                            axpy(&mut acc, a[i * l + j], &v_hat[j * dv..(j + 1) * dv]);
                        }
                        for e in 0..dv {
                            row[e] += acc[e] * st.exp(self.b(i, e) - self.b(r, e));
                        }
                    }
                    // Same sub-chunk, pairwise: A_ij v_je exp(B_ie − B_je).
                    for j in r0..=i {
                        let (aij, v) = (a[i * l + j], self.v(j));
                        for e in 0..dv {
                            row[e] += aij * v[e] * st.exp(self.b(i, e) - self.b(j, e));
                        }
                    }
                }
            }
        }
        o.iter_mut().for_each(|x| *x *= scale);
        o
    }

    /// Stage state_update: `S ← diag(exp(Γ_L)) S diag(exp(B_L)) + (K ⊙ exp(Γ_L − Γ))ᵀ (V ⊙ exp(B_L − B))`, with
    /// `L` the last valid row.
    pub(super) fn update_state(&self, s: &mut [f32], st: &mut ExpStats) {
        let (l, dk, dv) = (self.l, self.x.dk, self.x.dv);
        let last = l - 1;
        for d in 0..dk {
            let f = st.exp(self.g(last, d));
            s[d * dv..(d + 1) * dv].iter_mut().for_each(|x| *x *= f);
        }
        if self.beta.is_some() {
            for e in 0..dv {
                let f = st.exp(self.b(last, e));
                for d in 0..dk {
                    s[d * dv + e] *= f;
                }
            }
        }
        for j in 0..l {
            let k = self.k(j);
            let v_hat: Vec<f32> = match self.beta {
                None => self.v(j).to_vec(),
                Some(_) => self
                    .v(j)
                    .iter()
                    .enumerate()
                    .map(|(e, &v)| v * st.exp(self.b(last, e) - self.b(j, e)))
                    .collect(),
            };
            for d in 0..dk {
                let kd = k[d] * st.exp(self.g(last, d) - self.g(j, d));
                axpy(&mut s[d * dv..(d + 1) * dv], kd, &v_hat);
            }
        }
    }
}

/// Sequential f32 dot product.
pub(super) fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).fold(0.0f32, |acc, (x, y)| acc + x * y)
}

/// `y += a·x`.
pub(super) fn axpy(y: &mut [f32], a: f32, x: &[f32]) {
    for (yi, &xi) in y.iter_mut().zip(x) {
        *yi += a * xi;
    }
}

/// The chunkwise forward of one (sequence, head): `(o [len, d_v], final state, stats)`.
fn forward_one(
    x: &SeqHead<f32>,
    cfg: ChunkConfig,
    scale: f32,
    fault: Fault,
) -> (Vec<f32>, Vec<f32>, ExpStats) {
    let (len, dv) = (x.len, x.dv);
    let starts: Vec<usize> = (0..len).step_by(cfg.chunk).collect();
    let prepare = |i0: usize| Chunk::prepare(x, i0, cfg, fault);
    let mut o = vec![0.0f32; len * dv];
    let mut stats = ExpStats::default();
    if cfg.materialize {
        // Alg. 1 left. Pass 1: every chunk-start state S_[n] (the inter-chunk recurrence), stored.
        let mut states = Vec::with_capacity(starts.len() + 1);
        states.push(x.h0.clone());
        for &i0 in &starts {
            let mut s = states.last().cloned().unwrap_or_default();
            prepare(i0).update_state(&mut s, &mut stats);
            states.push(s);
        }
        // Pass 2: every chunk's output independently, from its stored state.
        let outs: Vec<(Vec<f32>, ExpStats)> = starts
            .par_iter()
            .zip(&states)
            .map(|(&i0, s)| {
                let mut st = ExpStats::default();
                let oc = prepare(i0).output(s, scale, &mut st);
                (oc, st)
            })
            .collect();
        for (&i0, (oc, st)) in starts.iter().zip(outs) {
            o[i0 * dv..i0 * dv + oc.len()].copy_from_slice(&oc);
            stats = stats.merge(st);
        }
        let final_state = states.pop().unwrap_or_default();
        (o, final_state, stats)
    } else if cfg.segments > 1 {
        // Two-level scan (the kernels' segmented fused plan): segments of ceil(chunks / P) whole chunks.
        let (dk, per) = (x.dk, starts.len().div_ceil(cfg.segments).max(1));
        let segs: Vec<&[usize]> = starts.chunks(per).collect();
        // Pass 1 (segments in parallel): ΔS_p from S = 0 and the segment's decay Σ Γ_L (key side d_k, value side d_v).
        let pass1: Vec<(Vec<f32>, Vec<f32>, Vec<f32>, ExpStats)> = segs
            .par_iter()
            .map(|seg| {
                let (mut s, mut dec_k, mut dec_v, mut st) = (
                    vec![0.0f32; dk * dv],
                    vec![0.0f32; dk],
                    vec![0.0f32; dv],
                    ExpStats::default(),
                );
                for &i0 in seg.iter() {
                    let c = prepare(i0);
                    c.update_state(&mut s, &mut st);
                    dec_k
                        .iter_mut()
                        .enumerate()
                        .for_each(|(d, a)| *a += c.g(c.l - 1, d));
                    if c.beta.is_some() {
                        dec_v
                            .iter_mut()
                            .enumerate()
                            .for_each(|(e, a)| *a += c.b(c.l - 1, e));
                    }
                }
                (s, dec_k, dec_v, st)
            })
            .collect();
        // Pass 2 (sequential over the segments): each segment's initial state.
        let mut inits = Vec::with_capacity(segs.len());
        let mut s = x.h0.clone();
        for (ds, dec_k, dec_v, st) in &pass1 {
            inits.push(s.clone());
            stats = stats.merge(*st);
            for d in 0..dk {
                for e in 0..dv {
                    let f = stats.exp(dec_k[d]) * stats.exp(dec_v[e]);
                    s[d * dv + e] = f * s[d * dv + e] + ds[d * dv + e];
                }
            }
        }
        // Pass 3 (segments in parallel): the fused pass over each segment from its initial state.
        let outs: Vec<(Vec<(usize, Vec<f32>)>, ExpStats)> = segs
            .par_iter()
            .zip(&inits)
            .map(|(seg, s0)| {
                let (mut s, mut st, mut out) = (s0.clone(), ExpStats::default(), Vec::new());
                for &i0 in seg.iter() {
                    let c = prepare(i0);
                    out.push((i0, c.output(&s, scale, &mut st)));
                    c.update_state(&mut s, &mut st);
                }
                (out, st)
            })
            .collect();
        for (chunks, st) in outs {
            for (i0, oc) in chunks {
                o[i0 * dv..i0 * dv + oc.len()].copy_from_slice(&oc);
            }
            stats = stats.merge(st);
        }
        (o, s, stats)
    } else {
        // Alg. 1 right: one sequential pass, output of chunk n from S_[n], then S_[n+1].
        let mut s = x.h0.clone();
        for &i0 in &starts {
            let c = prepare(i0);
            let oc = c.output(&s, scale, &mut stats);
            o[i0 * dv..i0 * dv + oc.len()].copy_from_slice(&oc);
            c.update_state(&mut s, &mut stats);
        }
        (o, s, stats)
    }
}

pub(super) fn check_config(cfg: ChunkConfig) -> Result<()> {
    let bad = |msg: String| {
        Err(GlaError::Unsupported {
            variant: format!("chunkwise C={} c={}", cfg.chunk, cfg.sub_chunk),
            msg,
        })
    };
    if cfg.chunk == 0 || cfg.sub_chunk == 0 {
        return bad("chunk size C and sub-chunk size c must be >= 1".into());
    }
    #[allow(clippy::manual_is_multiple_of)]
    // `is_multiple_of` needs Rust 1.87; the workspace MSRV is 1.85.
    if cfg.sub_chunk > cfg.chunk || cfg.chunk % cfg.sub_chunk != 0 {
        return bad(format!(
            "sub-chunk size c = {} must divide chunk size C = {}",
            cfg.sub_chunk, cfg.chunk
        ));
    }
    if cfg.segments == 0 {
        return bad("segments must be >= 1 (1 = one pass per sequence)".into());
    }
    if let Some(b) = cfg.factorise_span {
        if !(b.is_finite() && b >= 0.0) {
            return bad(format!(
                "factorise_span must be a finite bound >= 0 (natural-log units), got {b}"
            ));
        }
    }
    Ok(())
}

/// Every value must survive rounding to f32 (and log-gates must be ≥ [`MIN_LOG_GATE_F32`]).
pub(super) fn check_f32(c: &Checked) -> Result<()> {
    let p = &c.p;
    let fits = |what: &'static str, xs: &[f64], min: f64| -> Result<()> {
        match xs.iter().position(|&x| !(x as f32).is_finite() || x < min) {
            Some(i) => Err(GlaError::invalid(
                what,
                format!(
                    "element {i} = {} is out of the range of the f32 chunkwise form (finite f32, >= {min:e})",
                    xs[i]
                ),
            )),
            None => Ok(()),
        }
    };
    fits("q", p.q, f64::NEG_INFINITY)?;
    fits("k", p.k, f64::NEG_INFINITY)?;
    fits("v", p.v, f64::NEG_INFINITY)?;
    match p.key_gate {
        KeyGate::None => {}
        KeyGate::PerKey(g) | KeyGate::PerHead(g) | KeyGate::Fixed(g) => {
            fits("key_gate", g, MIN_LOG_GATE_F32)?
        }
    }
    if let Some(g) = p.value_gate {
        fits("value_gate", g, MIN_LOG_GATE_F32)?;
    }
    if let Some(s) = p.initial_state {
        fits("initial_state", s, f64::NEG_INFINITY)?;
    }
    if !(c.scale as f32).is_finite() {
        return Err(GlaError::invalid(
            "scale",
            format!("{} overflows f32", c.scale),
        ));
    }
    Ok(())
}

pub(super) fn forward(
    p: &Problem,
    cfg: ChunkConfig,
    output_final_state: bool,
    fault: Fault,
) -> Result<(Forward, ExpStats)> {
    check_config(cfg)?;
    let c = check(p)?;
    check_f32(&c)?;
    let dims = p.dims;
    let tasks: Vec<Task> = c.tasks();
    let scale = c.scale as f32;
    let results: Vec<(Vec<f32>, Vec<f32>, ExpStats)> = tasks
        .par_iter()
        .map(|task| forward_one(&c.gather(task, |x| x as f32), cfg, scale, fault))
        .collect();

    let mut o = vec![0.0; dims.b * dims.t * dims.h * dims.dv];
    let mut final_state =
        output_final_state.then(|| vec![0.0; c.nseq() * dims.h * dims.dk * dims.dv]);
    let mut stats = ExpStats::default();
    for (task, (ot, st, es)) in tasks.iter().zip(results) {
        let ot: Vec<f64> = ot.into_iter().map(f64::from).collect();
        c.scatter(&mut o, task, dims.dv, &ot);
        if let Some(fs) = final_state.as_mut() {
            let off = c.state_offset(task);
            for (dst, &x) in fs[off..off + st.len()].iter_mut().zip(&st) {
                *dst = f64::from(x);
            }
        }
        stats = stats.merge(es);
    }
    Ok((Forward { o, final_state }, stats))
}

/// [`chunkwise_forward`](super::chunkwise_forward) with a deliberate [`Fault`] in the decomposition, to show that
/// the tests detect it. Not API.
#[doc(hidden)]
pub fn chunkwise_forward_with_fault(
    p: &Problem,
    cfg: ChunkConfig,
    output_final_state: bool,
    fault: Fault,
) -> Result<(Forward, ExpStats)> {
    forward(p, cfg, output_final_state, fault)
}
