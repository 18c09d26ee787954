//! Random inputs: exact i.i.d. host draws for the reference check, and a pool the timed problems' device tensors
//! cycle (timing depends on the values only through the gate's decays, whose distribution the pool keeps).

use gla_core::gate_ref::{gate_forward, GateProblem};
use gla_core::tensor::HostData;
use gla_core::{DType, Dims, Gate, HostTensor};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rayon::prelude::*;

/// A timed problem's inputs, described rather than drawn: every tensor (q, k, v, logits) cycles one pool of
/// [`Pool::LEN`] N(0, 1) draws, rounded to the dtype, from its own offset — `DeviceTensor::tiled` builds them on the
/// device, so a 2^14-token bucket costs no host memory — plus the gate's parameters. For timing only (values
/// repeat; their distribution is N(0, 1), which is what the per-key kernels' speed depends on).
#[derive(Clone, Debug)]
pub struct Pool {
    pub dims: Dims,
    pub dtype: DType,
    /// The draws, rounded to `dtype`.
    pub values: Vec<f32>,
    /// Where q, k, v and the logits start in the pool.
    pub offsets: [usize; 4],
    /// `[H, P]` gate parameters.
    pub params: Vec<f32>,
}

impl Pool {
    pub const LEN: usize = 1 << 20;

    pub fn new(gate: &dyn Gate, dims: Dims, dtype: DType, seed: u64) -> Pool {
        let mut rng = SmallRng::seed_from_u64(seed);
        let values = randn(&mut rng, Self::LEN, 1.0)
            .into_iter()
            .map(|x| dtype.round(x))
            .collect();
        let offsets = std::array::from_fn(|_| rng.random_range(0..Self::LEN));
        let params = params(&mut rng, gate, dims.h);
        Pool {
            dims,
            dtype,
            values,
            offsets,
            params,
        }
    }

    /// The pool as a host tensor, its values shifted by `shift` and rounded (the strong-decay logits: shift −12).
    pub fn tensor(&self, shift: f32) -> gla_core::error::Result<HostTensor> {
        let v = if shift == 0.0 {
            self.values.clone()
        } else {
            shifted(&self.values, shift, self.dtype)
        };
        host_tensor(self.dtype, &[Self::LEN], &v)
    }
}

/// One problem's inputs, already rounded to the kernel dtype (so the reference sees exactly what the kernel reads).
#[derive(Clone, Debug)]
pub struct HostInputs {
    pub dims: Dims,
    pub dtype: DType,
    /// `[B,T,H,d_k]`.
    pub q: Vec<f32>,
    /// `[B,T,H,d_k]`.
    pub k: Vec<f32>,
    /// `[B,T,H,d_v]`.
    pub v: Vec<f32>,
    /// Raw logits ~ N(0, 1) in the gate's logits shape (empty for fixed gates).
    pub logits: Vec<f32>,
    /// `[H, P]` parameters inside their declared ranges.
    pub params: Vec<f32>,
    /// `[N, H, d_k, d_v]` initial state (the check uses one; timed problems do not).
    pub initial_state: Option<Vec<f32>>,
}

/// N(0, 1) by Box–Muller, never exactly 0.
fn normal(rng: &mut SmallRng) -> f32 {
    loop {
        let u1: f32 = rng.random_range(1e-7f32..1.0);
        let u2: f32 = rng.random::<f32>();
        let x = (-2.0 * u1.ln()).sqrt() * (std::f32::consts::TAU * u2).cos();
        if x != 0.0 {
            return x;
        }
    }
}

pub(crate) fn randn(rng: &mut SmallRng, n: usize, scale: f32) -> Vec<f32> {
    (0..n).map(|_| normal(rng) * scale).collect()
}

fn params(rng: &mut SmallRng, gate: &dyn Gate, h: usize) -> Vec<f32> {
    let mut out = Vec::with_capacity(h * gate.params().len());
    for _ in 0..h {
        for p in gate.params() {
            let (lo, hi) = p.range.unwrap_or((-1.0, 1.0));
            let (lo, hi) = (lo.max(-1.0) as f32, hi.min(1.0) as f32);
            out.push(rng.random_range(lo + 0.01 * (hi - lo)..hi - 0.01 * (hi - lo)));
        }
    }
    out
}

/// Logits per (token, head) of `gate` at `dims`.
fn logits_len(gate: &dyn Gate, d: Dims) -> usize {
    d.b * d.t * d.h * gate.shape().logits_per_token(d.dk, d.dv)
}

/// Values of a tensor rounded to `dtype` after adding `shift`.
pub fn shifted(values: &[f32], shift: f32, dtype: DType) -> Vec<f32> {
    values.par_iter().map(|&x| dtype.round(x + shift)).collect()
}

impl HostInputs {
    /// I.i.d. draws (q, k, v, logits ~ N(0, 1), an initial state ~ N(0, 0.25)): the check problem.
    pub fn random(gate: &dyn Gate, dims: Dims, dtype: DType, seed: u64) -> HostInputs {
        let mut rng = SmallRng::seed_from_u64(seed);
        let (nq, nv) = (
            dims.b * dims.t * dims.h * dims.dk,
            dims.b * dims.t * dims.h * dims.dv,
        );
        let round = |v: Vec<f32>| v.into_iter().map(|x| dtype.round(x)).collect::<Vec<_>>();
        let q = round(randn(&mut rng, nq, 1.0));
        let k = round(randn(&mut rng, nq, 1.0));
        let v = round(randn(&mut rng, nv, 1.0));
        let logits = round(randn(&mut rng, logits_len(gate, dims), 1.0));
        let params = params(&mut rng, gate, dims.h);
        let initial_state = Some(randn(&mut rng, dims.b * dims.h * dims.dk * dims.dv, 0.5));
        HostInputs {
            dims,
            dtype,
            q,
            k,
            v,
            logits,
            params,
            initial_state,
        }
    }

    /// `f` on this problem in f64 with `logits` in place of [`HostInputs::logits`].
    fn with_problem<T>(
        &self,
        gate: &dyn Gate,
        logits: &[f32],
        f: impl FnOnce(&GateProblem) -> gla_core::error::Result<T>,
    ) -> gla_core::error::Result<T> {
        let c = |v: &[f32]| v.iter().map(|&x| x as f64).collect::<Vec<f64>>();
        let (q, k, v, logits, params) = (
            c(&self.q),
            c(&self.k),
            c(&self.v),
            c(logits),
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
            scale: None,
            initial_state: h0.as_deref(),
            cu_seqlens: None,
        })
    }

    /// The f64 recurrent reference with `logits` in place of [`HostInputs::logits`]: (o `[B,T,H,d_v]`, final state
    /// `[B,H,d_k,d_v]`). Errors come from the gate (e.g. a NaN log α).
    pub fn reference(
        &self,
        gate: &dyn Gate,
        logits: &[f32],
    ) -> gla_core::error::Result<(Vec<f64>, Vec<f64>)> {
        self.with_problem(gate, logits, |p| {
            let out = gate_forward(p, true)?;
            Ok((out.o, out.final_state.unwrap_or_default()))
        })
    }

    /// The f64 reference gradients (`gla_core::gate_ref::gate_backward`) for output gradient `d_o` and final-state
    /// gradient `dht`, with `logits` in place of [`HostInputs::logits`].
    pub fn reference_backward(
        &self,
        gate: &dyn Gate,
        logits: &[f32],
        d_o: &[f32],
        dht: &[f32],
    ) -> gla_core::error::Result<gla_core::gate_ref::GateGrads> {
        let c = |v: &[f32]| v.iter().map(|&x| x as f64).collect::<Vec<f64>>();
        self.with_problem(gate, logits, |p| {
            gla_core::gate_ref::gate_backward(p, &c(d_o), Some(&c(dht)))
        })
    }
}

/// `values` as a host tensor of `dtype` (converted in parallel: the largest timed problems hold 2^31 values).
pub fn host_tensor(
    dtype: DType,
    shape: &[usize],
    values: &[f32],
) -> gla_core::error::Result<HostTensor> {
    let n: usize = shape.iter().product();
    if n != values.len() {
        return Err(gla_core::GlaError::invalid(
            "values",
            format!("shape {shape:?} holds {n} elements, got {}", values.len()),
        ));
    }
    let data = match dtype {
        DType::F32 => HostData::F32(values.to_vec()),
        DType::BF16 => HostData::BF16(
            values
                .par_iter()
                .map(|&x| half::bf16::from_f32(x))
                .collect(),
        ),
        DType::F16 => HostData::F16(values.par_iter().map(|&x| half::f16::from_f32(x)).collect()),
    };
    Ok(HostTensor {
        shape: shape.to_vec(),
        data,
    })
}

/// Relative RMS error `sqrt(Σ(got − want)² / Σ want²)`; a NaN or ∞ in `got` gives +∞.
pub fn rel_rms(got: &[f64], want: &[f64]) -> f64 {
    if got.len() != want.len() || got.iter().any(|x| !x.is_finite()) {
        return f64::INFINITY;
    }
    gla_core::reference::rel_rms(got, want)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_rounding_and_reference() {
        let _ = &gla::gates::Gla;
        let gate: &'static dyn Gate = &gla::gates::Gla;
        let d = Dims::new(1, 40, 2, 16, 16);
        let x = HostInputs::random(gate, d, DType::BF16, 1);
        assert_eq!(
            (x.q.len(), x.k.len(), x.v.len(), x.logits.len()),
            (1280, 1280, 1280, 1280)
        );
        assert!(x.q.iter().all(|&v| v != 0.0 && DType::BF16.round(v) == v));
        let (o, s) = x.reference(gate, &x.logits).unwrap();
        assert_eq!((o.len(), s.len()), (1280, 2 * 16 * 16));
        assert_eq!(rel_rms(&o, &o), 0.0);
        let mut bad = o.clone();
        bad[3] = f64::NAN;
        assert_eq!(rel_rms(&bad, &o), f64::INFINITY);
        // The strong-decay logits are the same draws shifted, then rounded.
        let strong = shifted(&x.logits, -12.0, DType::BF16);
        assert_eq!(strong[0], DType::BF16.round(x.logits[0] - 12.0));

        let p = Pool::new(
            &gla::gates::Mamba2,
            Dims::new(2, 1000, 3, 64, 64),
            DType::F16,
            2,
        );
        assert_eq!(
            (p.values.len(), p.params.len()),
            (Pool::LEN, 3 * gla::gates::Mamba2.params().len())
        );
        assert!(
            p.values.iter().all(|&v| v == DType::F16.round(v)),
            "rounded to the dtype"
        );
        let mean = p.values.iter().map(|&v| v as f64).sum::<f64>() / p.values.len() as f64;
        let var = p
            .values
            .iter()
            .map(|&v| (v as f64 - mean).powi(2))
            .sum::<f64>()
            / p.values.len() as f64;
        assert!(
            mean.abs() < 0.05 && (var - 1.0).abs() < 0.05,
            "mean {mean}, var {var}"
        );
        assert_eq!(
            p.tensor(-12.0).unwrap().to_f64()[5],
            DType::F16.round(p.values[5] - 12.0) as f64
        );
        for dt in DType::ALL {
            let vals = [0.1f32, -2.5, 3.0e4, 1.0e-3, 7.0, -0.0];
            assert_eq!(
                host_tensor(dt, &[2, 3], &vals).unwrap(),
                HostTensor::from_f32(dt, &[2, 3], &vals).unwrap()
            );
        }
        assert!(host_tensor(DType::BF16, &[2, 2], &[1.0]).is_err());
    }
}
