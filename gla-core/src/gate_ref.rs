//! CPU reference driven by a [`Gate`] and raw logits: log-gates from logits, then the f64 recurrence
//! ([`crate::reference`]), forward and backward, with the gradients carried back to the logits and the gate
//! parameters by the chain rule.
//!
//! Shapes (fla's layout, row-major): logits `[B,T,H,d_k]` ([`GateShape::PerKey`]), `[B,T,H]`
//! ([`GateShape::PerHead`]), `[B,T,H,d_v]` ([`GateShape::PerValue`]), empty ([`GateShape::Fixed`]: the gate's input is
//! the head index `h`); parameters `[H, P]` with `P = gate.params().len()`. Per-value gates become the reference's
//! value gate (log β); the others its key gate (log α).

use crate::error::{GlaError, Result};
use crate::gate::{Gate, GateShape};
use crate::reference::{self, Forward, KeyGate, Problem};
use crate::Dims;

/// A problem of the gated recurrence whose gate is given as a [`Gate`] applied to raw logits.
#[derive(Clone, Copy)]
pub struct GateProblem<'a> {
    pub dims: Dims,
    /// `[B,T,H,d_k]`.
    pub q: &'a [f64],
    /// `[B,T,H,d_k]`.
    pub k: &'a [f64],
    /// `[B,T,H,d_v]`.
    pub v: &'a [f64],
    pub gate: &'a dyn Gate,
    /// Raw gate logits (see the module docs for the shape per [`GateShape`]; empty for fixed gates).
    pub logits: &'a [f64],
    /// Gate parameters `[H, P]` (empty when the gate has none).
    pub params: &'a [f64],
    /// Output scale; `None` means `1/√d_k`.
    pub scale: Option<f64>,
    /// `[N,H,d_k,d_v]`.
    pub initial_state: Option<&'a [f64]>,
    /// `N+1` offsets into the packed `T` axis; needs `B == 1`.
    pub cu_seqlens: Option<&'a [usize]>,
}

/// Gradients of `ℒ = Σ dO ⊙ O + Σ dS_final ⊙ S_final` with respect to the inputs of a [`GateProblem`].
#[derive(Clone, Debug, PartialEq)]
pub struct GateGrads {
    pub dq: Vec<f64>,
    pub dk: Vec<f64>,
    pub dv: Vec<f64>,
    /// Same shape as the logits (empty for fixed gates).
    pub d_logits: Vec<f64>,
    /// `[H, P]`: summed over every token and channel of each head.
    pub d_params: Vec<f64>,
    /// `[N,H,d_k,d_v]`; `None` when the problem has no initial state.
    pub d_initial_state: Option<Vec<f64>>,
}

/// Logits per (token, head) for this gate and these dims, and the expected logits shape.
fn logits_shape(shape: GateShape, dims: Dims) -> (usize, Vec<usize>) {
    let n = shape.logits_per_token(dims.dk, dims.dv);
    let s = match shape {
        GateShape::PerHead => vec![dims.b, dims.t, dims.h],
        GateShape::Fixed => vec![0],
        _ => vec![dims.b, dims.t, dims.h, n],
    };
    (n, s)
}

/// Check `params` (`[H, P]`, finite, inside the declared ranges).
fn check_params(gate: &dyn Gate, dims: Dims, params: &[f64]) -> Result<()> {
    let specs = gate.params();
    let np = specs.len();
    if params.len() != dims.h * np {
        return Err(GlaError::shape(
            "params",
            format!("[H, P] = [{}, {np}] (gate `{}`)", dims.h, gate.name()),
            &[params.len()],
        ));
    }
    for (i, &v) in params.iter().enumerate() {
        let (h, k) = (i / np.max(1), i % np.max(1));
        let spec = &specs[k];
        if !v.is_finite() {
            return Err(GlaError::invalid(
                "params",
                format!("`{}` of head {h} is {v}, must be finite", spec.name),
            ));
        }
        if let Some((lo, hi)) = spec.range {
            if v < lo || v > hi {
                return Err(GlaError::invalid(
                    "params",
                    format!(
                        "`{}` of head {h} is {v}, outside its declared range [{lo}, {hi}] (gate `{}`: log α ≤ 0 is proved only there)",
                        spec.name,
                        gate.name()
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// log α (or log β for a per-value gate) of every logit: same shape as `logits`, or `[H]` for a fixed gate
/// (evaluated at `x = h`). Validates the shapes, that logits and parameters are finite and parameters inside their
/// declared ranges, and that every log-gate is finite and ≤ 0.
pub fn log_gates(gate: &dyn Gate, dims: Dims, logits: &[f64], params: &[f64]) -> Result<Vec<f64>> {
    if dims.h == 0 || dims.dk == 0 || dims.dv == 0 {
        return Err(GlaError::invalid(
            "dims",
            format!("H, d_k and d_v must be positive, got {dims:?}"),
        ));
    }
    check_params(gate, dims, params)?;
    let np = gate.params().len();
    let p_of = |h: usize| &params[h * np..(h + 1) * np];
    let shape = gate.shape();
    let (n, want) = logits_shape(shape, dims);
    let out: Vec<f64> = if shape == GateShape::Fixed {
        if !logits.is_empty() {
            return Err(GlaError::shape(
                "logits",
                format!("[] (gate `{}` is fixed: it takes no logits)", gate.name()),
                &[logits.len()],
            ));
        }
        (0..dims.h)
            .map(|h| gate.log_alpha(h as f64, p_of(h)))
            .collect()
    } else {
        let len: usize = want.iter().product();
        if logits.len() != len {
            return Err(GlaError::shape(
                "logits",
                format!("{want:?} (gate `{}` is {shape})", gate.name()),
                &[logits.len()],
            ));
        }
        if let Some(i) = logits.iter().position(|x| !x.is_finite()) {
            return Err(GlaError::invalid(
                "logits",
                format!("logits[{i}] = {}, must be finite", logits[i]),
            ));
        }
        logits
            .iter()
            .enumerate()
            .map(|(i, &x)| gate.log_alpha(x, p_of((i / n) % dims.h)))
            .collect()
    };
    if let Some(i) = out.iter().position(|v| !(v.is_finite() && *v <= 0.0)) {
        return Err(GlaError::invalid(
            "gate",
            format!(
                "gate `{}` gave log α = {} at index {i}: must be finite and ≤ 0 (log α = {})",
                gate.name(),
                out[i],
                gate.expr()
            ),
        ));
    }
    Ok(out)
}

fn problem<'a>(p: &GateProblem<'a>, lg: &'a [f64]) -> Problem<'a> {
    let (key_gate, value_gate) = match p.gate.shape() {
        GateShape::PerKey => (KeyGate::PerKey(lg), None),
        GateShape::PerHead => (KeyGate::PerHead(lg), None),
        GateShape::Fixed => (KeyGate::Fixed(lg), None),
        GateShape::PerValue => (KeyGate::None, Some(lg)),
    };
    Problem {
        dims: p.dims,
        q: p.q,
        k: p.k,
        v: p.v,
        key_gate,
        value_gate,
        scale: p.scale,
        initial_state: p.initial_state,
        cu_seqlens: p.cu_seqlens,
    }
}

/// Forward pass of the recurrence (f64) with the gate applied to the raw logits.
pub fn gate_forward(p: &GateProblem, output_final_state: bool) -> Result<Forward> {
    let lg = log_gates(p.gate, p.dims, p.logits, p.params)?;
    reference::recurrent_forward(&problem(p, &lg), output_final_state)
}

/// Gradients of the recurrence (f64) with respect to q, k, v, the raw logits, the gate parameters and the
/// initial state: `∂ℒ/∂x = ∂ℒ/∂log α · ∂log α/∂x` per logit, `∂ℒ/∂p_h = Σ ∂ℒ/∂log α · ∂log α/∂p` over every
/// token and channel of head `h` (every head `h` itself for a fixed gate).
pub fn gate_backward(
    p: &GateProblem,
    d_o: &[f64],
    d_final_state: Option<&[f64]>,
) -> Result<GateGrads> {
    let gate = p.gate;
    let lg = log_gates(gate, p.dims, p.logits, p.params)?;
    let g = reference::recurrent_backward(&problem(p, &lg), d_o, d_final_state)?;
    let shape = gate.shape();
    let d_lg = if shape == GateShape::PerValue {
        g.d_value_gate
    } else {
        g.d_key_gate
    };
    let d_lg =
        d_lg.ok_or_else(|| GlaError::invalid("gate", "the reference returned no gate gradient"))?;
    let np = gate.params().len();
    let h_count = p.dims.h;
    let mut d_params = vec![0.0; h_count * np];
    let mut dp = vec![0.0; np];
    let (n, _) = logits_shape(shape, p.dims);
    let mut d_logits = Vec::new();
    if shape == GateShape::Fixed {
        for (h, &dl) in d_lg.iter().enumerate() {
            let ph = &p.params[h * np..(h + 1) * np];
            gate.dlog_alpha_dparams(h as f64, ph, &mut dp);
            for k in 0..np {
                d_params[h * np + k] += dl * dp[k];
            }
        }
    } else {
        d_logits.reserve(p.logits.len());
        for (i, (&x, &dl)) in p.logits.iter().zip(&d_lg).enumerate() {
            let h = (i / n) % h_count;
            let ph = &p.params[h * np..(h + 1) * np];
            d_logits.push(dl * gate.dlog_alpha_dx(x, ph));
            if np > 0 {
                gate.dlog_alpha_dparams(x, ph, &mut dp);
                for k in 0..np {
                    d_params[h * np + k] += dl * dp[k];
                }
            }
        }
    }
    Ok(GateGrads {
        dq: g.dq,
        dk: g.dk,
        dv: g.dv,
        d_logits,
        d_params,
        d_initial_state: g.d_initial_state,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::ParamSpec;

    /// HGRN-2 by hand (the macro lives downstream): log(γ + (1 − γ)σ(x)), γ ∈ [0, 1].
    struct Hand(GateShape);
    fn sig(x: f64) -> f64 {
        1.0 / (1.0 + (-x).exp())
    }
    impl Gate for Hand {
        fn name(&self) -> &'static str {
            "hand"
        }
        fn shape(&self) -> GateShape {
            self.0
        }
        fn params(&self) -> &'static [ParamSpec] {
            &[ParamSpec {
                name: "gamma",
                range: Some((0.0, 1.0)),
            }]
        }
        fn expr(&self) -> &'static str {
            "log(gamma + (1 - gamma) * sigmoid(x))"
        }
        fn log_alpha(&self, x: f64, p: &[f64]) -> f64 {
            (p[0] + (1.0 - p[0]) * sig(x)).ln()
        }
        fn dlog_alpha_dx(&self, x: f64, p: &[f64]) -> f64 {
            (1.0 - p[0]) * sig(x) * sig(-x) / (p[0] + (1.0 - p[0]) * sig(x))
        }
        fn dlog_alpha_dparams(&self, x: f64, p: &[f64], g: &mut [f64]) {
            g[0] = sig(-x) / (p[0] + (1.0 - p[0]) * sig(x));
        }
        fn cuda_ident(&self) -> &'static str {
            "hand"
        }
        fn cuda_source(&self) -> &'static str {
            ""
        }
        fn content_hash(&self) -> u64 {
            0
        }
    }

    fn data(n: usize, seed: u64) -> Vec<f64> {
        let mut s = seed | 1;
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                (s % 2001) as f64 / 1000.0 - 1.0
            })
            .collect()
    }

    #[test]
    fn shapes_and_ranges_are_checked() {
        let d = Dims::new(1, 3, 2, 4, 5);
        let g = Hand(GateShape::PerKey);
        assert!(log_gates(&g, d, &data(24, 1), &[0.5, 0.5]).is_ok());
        let e = log_gates(&g, d, &data(23, 1), &[0.5, 0.5])
            .unwrap_err()
            .to_string();
        assert!(e.contains("[1, 3, 2, 4]"), "{e}");
        let e = log_gates(&g, d, &data(24, 1), &[0.5])
            .unwrap_err()
            .to_string();
        assert!(e.contains("[H, P] = [2, 1]"), "{e}");
        let e = log_gates(&g, d, &data(24, 1), &[0.5, 1.5])
            .unwrap_err()
            .to_string();
        assert!(e.contains("outside its declared range"), "{e}");
        let e = log_gates(&Hand(GateShape::PerHead), d, &data(24, 1), &[0.5, 0.5])
            .unwrap_err()
            .to_string();
        assert!(e.contains("[1, 3, 2]"), "{e}");
        assert_eq!(
            log_gates(&Hand(GateShape::PerValue), d, &data(30, 1), &[0.5, 0.5])
                .unwrap()
                .len(),
            30
        );
        let f = log_gates(&Hand(GateShape::Fixed), d, &[], &[0.5, 0.25]).unwrap();
        assert_eq!(
            f,
            vec![(0.5f64 + 0.5 * 0.5).ln(), (0.25f64 + 0.75 * sig(1.0)).ln()]
        );
        assert!(log_gates(&Hand(GateShape::Fixed), d, &[1.0], &[0.5, 0.5]).is_err());
    }

    #[test]
    fn backward_matches_finite_differences() {
        for shape in [
            GateShape::PerKey,
            GateShape::PerHead,
            GateShape::PerValue,
            GateShape::Fixed,
        ] {
            let d = Dims::new(2, 3, 2, 3, 2);
            let g = Hand(shape);
            let nl = match shape {
                GateShape::Fixed => 0,
                s => d.b * d.t * d.h * s.logits_per_token(d.dk, d.dv),
            };
            let (q, k, v) = (data(36, 2), data(36, 3), data(24, 4));
            let logits: Vec<f64> = data(nl, 5).iter().map(|x| 3.0 * x).collect();
            let params = vec![0.3, 0.6];
            let d_o = data(24, 6);
            let loss = |logits: &[f64], params: &[f64]| {
                let p = GateProblem {
                    dims: d,
                    q: &q,
                    k: &k,
                    v: &v,
                    gate: &g,
                    logits,
                    params,
                    scale: None,
                    initial_state: None,
                    cu_seqlens: None,
                };
                let f = gate_forward(&p, false).unwrap();
                f.o.iter().zip(&d_o).map(|(a, b)| a * b).sum::<f64>()
            };
            let p = GateProblem {
                dims: d,
                q: &q,
                k: &k,
                v: &v,
                gate: &g,
                logits: &logits,
                params: &params,
                scale: None,
                initial_state: None,
                cu_seqlens: None,
            };
            let gr = gate_backward(&p, &d_o, None).unwrap();
            assert_eq!(gr.d_logits.len(), nl);
            let h = 1e-6;
            for i in 0..nl {
                let (mut a, mut b) = (logits.clone(), logits.clone());
                a[i] += h;
                b[i] -= h;
                let fd = (loss(&a, &params) - loss(&b, &params)) / (2.0 * h);
                assert!(
                    (fd - gr.d_logits[i]).abs() < 1e-7 * (1.0 + fd.abs()),
                    "{shape}: d logit {i}: fd {fd} vs {}",
                    gr.d_logits[i]
                );
            }
            for j in 0..params.len() {
                let (mut a, mut b) = (params.clone(), params.clone());
                a[j] += h;
                b[j] -= h;
                let fd = (loss(&logits, &a) - loss(&logits, &b)) / (2.0 * h);
                assert!(
                    (fd - gr.d_params[j]).abs() < 1e-7 * (1.0 + fd.abs()),
                    "{shape}: d param {j}: fd {fd} vs {}",
                    gr.d_params[j]
                );
            }
        }
    }
}
