//! Shared helpers of the integration tests: random problems, the f64 reference driven by a gate, error metrics.
//!
//! Inputs are drawn fresh from a seeded RNG (never zeros) and rounded to the kernel dtype *before* the reference
//! sees them, so the comparison measures the kernel's arithmetic, not input rounding.

use gla_core::gate_ref::{gate_backward, gate_forward, GateGrads, GateProblem};
use gla_core::reference;
use gla_core::{DType, Dims, Gate, HostTensor};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

pub mod emu;
pub mod strengths;

/// Gates declared here for the tests only (none of the seven built-ins gates the value side).
pub mod gates {
    use gla::prelude::*;

    /// A value-side gate: S_t = S_(t−1) diag(β_t) + k_tᵀ v_t with log β = log_sigmoid(x) · (1/16 + w), one logit
    /// per value channel, w a per-head parameter in (0, 1).
    #[gated_linear_attention(gate = per_value)]
    pub fn value_gla(x: f32, #[param(range = 0.0..1.0)] w: f32) -> f32 {
        log_sigmoid(x) * (0.0625 + w)
    }
}

/// `n` values uniform in [−1, 1) from `rng`, rounded to `dtype` (a backward's dO or dht).
pub fn uniform(rng: &mut SmallRng, n: usize, dtype: DType) -> Vec<f32> {
    (0..n)
        .map(|_| dtype.round(rng.random_range(-1.0f32..1.0)))
        .collect()
}

/// One random problem on the host.
pub struct Case {
    pub dims: Dims,
    pub dtype: DType,
    pub q: Vec<f32>,
    pub k: Vec<f32>,
    pub v: Vec<f32>,
    /// Raw gate logits (empty for fixed gates).
    pub logits: Vec<f32>,
    /// `[H, P]` gate parameters.
    pub params: Vec<f32>,
    pub initial_state: Option<Vec<f32>>,
    pub cu_seqlens: Option<Vec<usize>>,
}

fn normal(rng: &mut SmallRng) -> f32 {
    // Box–Muller; never exactly zero in practice, and q/k/v are re-drawn if they are.
    let u1: f32 = rng.random_range(1e-7f32..1.0);
    let u2: f32 = rng.random::<f32>();
    (-2.0 * u1.ln()).sqrt() * (std::f32::consts::TAU * u2).cos()
}

/// `n` N(0, scale²) values, never exactly zero; generated in parallel blocks, each with its own RNG seeded from
/// `(seed, block)`, so the result depends only on the arguments.
fn randn(rng: &mut SmallRng, n: usize, scale: f32) -> Vec<f32> {
    use rayon::prelude::*;
    const BLOCK: usize = 1 << 16;
    let seed: u64 = rng.random();
    let mut out = vec![0f32; n];
    out.par_chunks_mut(BLOCK)
        .enumerate()
        .for_each(|(b, chunk)| {
            let mut r =
                SmallRng::seed_from_u64(seed ^ (b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
            for x in chunk {
                *x = loop {
                    let y = normal(&mut r) * scale;
                    if y != 0.0 {
                        break y;
                    }
                };
            }
        });
    out
}

impl Case {
    /// A random case for `gate`: q, k ~ N(0,1) (rounded to `dtype`), v ~ N(0,1), logits ~ N(0,1) (for RWKV-6's
    /// −exp(x) that spans decays from ~0.01 to ~e^−7 per step), params inside their declared ranges.
    pub fn random(
        gate: &dyn Gate,
        dims: Dims,
        dtype: DType,
        seed: u64,
        with_state: bool,
        cu: Option<Vec<usize>>,
    ) -> Case {
        let mut rng = SmallRng::seed_from_u64(seed);
        let (nq, nv) = (
            dims.b * dims.t * dims.h * dims.dk,
            dims.b * dims.t * dims.h * dims.dv,
        );
        let round = |v: Vec<f32>| {
            use rayon::prelude::*;
            v.into_par_iter()
                .map(|x| dtype.round(x))
                .collect::<Vec<_>>()
        };
        let q = round(randn(&mut rng, nq, 1.0));
        let k = round(randn(&mut rng, nq, 1.0));
        let v = round(randn(&mut rng, nv, 1.0));
        let nl = dims.b * dims.t * dims.h * gate.shape().logits_per_token(dims.dk, dims.dv);
        let logits = round(randn(&mut rng, nl, 1.0)); // logits are stored in the kernel dtype, like q
        let mut params = Vec::new();
        for _ in 0..dims.h {
            for p in gate.params() {
                let (lo, hi) = p.range.unwrap_or((-1.0, 1.0));
                let (lo, hi) = (lo.max(-1.0) as f32, hi.min(1.0) as f32);
                params.push(rng.random_range(lo + 0.01 * (hi - lo)..hi - 0.01 * (hi - lo)));
            }
        }
        let n = cu.as_ref().map(|c| c.len() - 1).unwrap_or(dims.b);
        let initial_state =
            with_state.then(|| randn(&mut rng, n * dims.h * dims.dk * dims.dv, 0.5));
        Case {
            dims,
            dtype,
            q,
            k,
            v,
            logits,
            params,
            initial_state,
            cu_seqlens: cu,
        }
    }

    pub fn n_seqs(&self) -> usize {
        self.cu_seqlens
            .as_ref()
            .map(|c| c.len() - 1)
            .unwrap_or(self.dims.b)
    }

    /// f64 recurrent reference driven by the gate (`gla_core::gate_ref`): (o [B,T,H,dv], final state [N,H,dk,dv]).
    pub fn reference(&self, gate: &dyn Gate, scale: Option<f64>) -> (Vec<f64>, Vec<f64>) {
        let out = self
            .with_problem(gate, scale, |p| gate_forward(p, true))
            .expect("reference forward");
        (out.o, out.final_state.expect("final state"))
    }

    /// `f` of this case as a [`GateProblem`] (f64 of the dtype-rounded inputs).
    fn with_problem<R>(
        &self,
        gate: &dyn Gate,
        scale: Option<f64>,
        f: impl FnOnce(&GateProblem) -> R,
    ) -> R {
        let c = |v: &[f32]| v.iter().map(|&x| x as f64).collect::<Vec<f64>>();
        let (q, k, v, logits, params) = (
            c(&self.q),
            c(&self.k),
            c(&self.v),
            c(&self.logits),
            c(&self.params),
        );
        let h0 = self.initial_state.as_deref().map(c);
        f(&GateProblem {
            dims: self.dims,
            q: &q,
            k: &k,
            v: &v,
            gate,
            logits: &logits,
            params: &params,
            scale,
            initial_state: h0.as_deref(),
            cu_seqlens: self.cu_seqlens.as_deref(),
        })
    }

    /// The f64 gradients of the recurrence on this case's (dtype-rounded) inputs for the output gradient `d_o`
    /// (`[B,T,H,d_v]`) and the final state's gradient `d_final` (`[N,H,d_k,d_v]`).
    pub fn reference_backward(
        &self,
        gate: &dyn Gate,
        d_o: &[f32],
        d_final: Option<&[f32]>,
    ) -> GateGrads {
        let c = |v: &[f32]| v.iter().map(|&x| x as f64).collect::<Vec<f64>>();
        let (d_o, d_final) = (c(d_o), d_final.map(c));
        self.with_problem(gate, None, |p| gate_backward(p, &d_o, d_final.as_deref()))
            .expect("reference backward")
    }

    pub fn host(&self, what: &[f32], shape: &[usize], dtype: DType) -> HostTensor {
        HostTensor::from_f32(dtype, shape, what).expect("host tensor")
    }
}

/// Error of a gate gradient measured against the size of the terms its closed form sums (`gla_core`'s chunkwise
/// backward docs): d log α_t = rowsum(dS ⊙ S) + Σ_{s≥t} (q ⊙ dq − k ⊙ dk) cancels to a tiny value under strong decays,
/// and any f32 evaluation of it leaves a residue of the terms' size, which ∂log α/∂x and ∂log α/∂p then scale. Returns
/// RMS(got − want) / max(RMS(want), RMS(terms)) for the logits' gradient (terms: |q ⊙ dq| · |∂log α/∂x|, summed over
/// d_k for a per-head gate; |v ⊙ dv| · |∂log β/∂x| for a per-value gate, whose closed form sums ô ⊙ dÔ − v ⊙ dv) and
/// for the parameters' (terms: the same magnitudes · |∂log α/∂p| summed per head). `reference`: the f64 gradients.
pub fn gate_grad_errors(
    gate: &dyn Gate,
    case: &Case,
    reference: &GateGrads,
    got: (&[f64], &[f64]),
) -> (f64, f64) {
    let want = (&reference.d_logits[..], &reference.d_params[..]);
    let (dq_ref, dv_ref) = (&reference.dq, &reference.dv);
    use gla_core::GateShape;
    let d = case.dims;
    let (h, dk, dv) = (d.h, d.dk, d.dv);
    let np = gate.params().len();
    let tokens = d.b * d.t;
    let mut logit_terms = vec![0.0; want.0.len()];
    let mut param_terms = vec![0.0; h * np];
    let mut dp = vec![0.0; np];
    for t in 0..tokens {
        for hh in 0..h {
            let p: Vec<f64> = case.params[hh * np..(hh + 1) * np]
                .iter()
                .map(|&x| x as f64)
                .collect();
            let qdq = |x: usize| {
                (case.q[(t * h + hh) * dk + x] as f64 * dq_ref[(t * h + hh) * dk + x]).abs()
            };
            let mut add = |li: Option<usize>, mag: f64, xv: f64| {
                if let Some(li) = li {
                    logit_terms[li] += mag * gate.dlog_alpha_dx(xv, &p).abs();
                }
                gate.dlog_alpha_dparams(xv, &p, &mut dp);
                for u in 0..np {
                    param_terms[hh * np + u] += mag * dp[u].abs();
                }
            };
            match gate.shape() {
                GateShape::PerKey => {
                    for x in 0..dk {
                        let li = (t * h + hh) * dk + x;
                        add(Some(li), qdq(x), case.logits[li] as f64);
                    }
                }
                GateShape::PerHead => {
                    let li = t * h + hh;
                    add(Some(li), (0..dk).map(qdq).sum(), case.logits[li] as f64);
                }
                // The value side's terms: v ⊙ dv (the closed form sums ô ⊙ dÔ − v ⊙ dv).
                GateShape::PerValue => {
                    for e in 0..dv {
                        let li = (t * h + hh) * dv + e;
                        let mag = (case.v[li] as f64 * dv_ref[li]).abs();
                        add(Some(li), mag, case.logits[li] as f64);
                    }
                }
                _ => add(None, (0..dk).map(qdq).sum(), hh as f64),
            }
        }
    }
    let rms = |x: &[f64]| (x.iter().map(|y| y * y).sum::<f64>() / x.len().max(1) as f64).sqrt();
    let err = |g: &[f64], w: &[f64], terms: &[f64]| -> f64 {
        if g.is_empty() && w.is_empty() {
            return 0.0;
        }
        if g.len() != w.len() || g.iter().any(|x| !x.is_finite()) {
            return f64::INFINITY;
        }
        let e: Vec<f64> = g.iter().zip(w).map(|(a, b)| a - b).collect();
        rms(&e) / rms(w).max(rms(terms))
    };
    (
        err(got.0, want.0, &logit_terms),
        err(got.1, want.1, &param_terms),
    )
}

/// An emulator test's end: prints each case's line; a `SKIP …` case (no host C++ compiler) ends the test quietly
/// unless `GLA_REQUIRE_EMU` is set; fails with every failing case's line.
pub fn report_cases(results: Vec<Result<String, String>>) {
    let mut failures = Vec::new();
    for r in results {
        match r {
            Ok(line) => println!("{line}"),
            Err(m) if m.starts_with("SKIP ") && std::env::var("GLA_REQUIRE_EMU").is_err() => {
                println!("skipped: {}", &m[5..]);
                return;
            }
            Err(m) => failures.push(m),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// `what e, what e, …` of a case's relative errors (two decimals).
pub fn error_list(errs: &[(&str, f64)]) -> String {
    errs.iter()
        .map(|(w, e)| format!("{w} {e:.2e}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The "spike" logit shift of token `t`: +30 on token 5 of every chunk of 32, −5 elsewhere — for RWKV-6's −exp(x) one
/// near-zero forget gate (log α ≈ −1e13) a chunk among mild ones, whose later tokens' decays must survive it
/// (`gla_core::LOG2_ALPHA_FLOOR`).
pub fn spike_shift(t: usize) -> f32 {
    if t % 32 == 5 {
        30.0
    } else {
        -5.0
    }
}

/// Relative RMS error sqrt(Σ(got − want)² / Σ want²); NaN/Inf in `got` give +∞.
pub fn rel_rms(got: &[f64], want: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len());
    if got.iter().any(|x| !x.is_finite()) {
        return f64::INFINITY;
    }
    reference::rel_rms(got, want)
}

/// The seven built-in gates and the tests' per-value gate `value_gla` — every gate shape: what the kernel tests run.
pub fn builtin_and_value_gates() -> Vec<&'static dyn Gate> {
    let _ = (&gla::gates::Gla, &gates::ValueGla); // link the gates' registrations
    let g: Vec<&'static dyn Gate> = gla_core::registered_gates()
        .into_iter()
        .filter(|g| gla::gates::BUILT_IN.contains(&g.name()) || g.name() == "value_gla")
        .collect();
    assert!(g.len() >= 8, "the built-in gates and the value gate");
    g
}

/// The registered gate called `name` (the built-in gates, the strength gates, the value gate).
pub fn gate_named(name: &str) -> &'static dyn Gate {
    let _ = (&gla::gates::Gla, &gates::ValueGla, &strengths::GlaN1); // link the gates' registrations
    gla_core::registered_gates()
        .into_iter()
        .find(|g| g.name() == name)
        .unwrap_or_else(|| panic!("no registered gate `{name}`"))
}

/// The tolerance of issue 4, as relative RMS error vs the f64 reference.
pub fn tolerance(dtype: DType) -> f64 {
    match dtype {
        DType::F32 => 1e-5,
        DType::BF16 | DType::F16 => 3e-3,
    }
}
