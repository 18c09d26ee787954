//! Every built-in gate end to end on the CPU: raw logits → log-gates → f64 recurrence → gradients back to the
//! logits and parameters, against central finite differences of the whole pipeline (tiny shapes).

use gla::core::gate_ref::{gate_backward, gate_forward, log_gates, GateProblem};
use gla::gates::*;
use gla::{Dims, Gate, GateShape};

fn data(n: usize, seed: u64, scale: f64) -> Vec<f64> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            scale * ((s % 20001) as f64 / 10000.0 - 1.0)
        })
        .collect()
}

fn params_for(g: &dyn Gate, h: usize, seed: u64) -> Vec<f64> {
    let specs = g.params();
    let raw = data(h * specs.len(), seed, 1.0);
    raw.iter()
        .enumerate()
        .map(|(i, &u)| match specs[i % specs.len()].range {
            Some((lo, hi)) => lo + (hi - lo) * (0.1 + 0.8 * (u + 1.0) / 2.0),
            None => 0.5 * u,
        })
        .collect()
}

#[test]
fn every_builtin_matches_finite_differences_end_to_end() {
    let gates: [&dyn Gate; 7] = [&Gla, &Mamba2, &Mlstm, &GatedRetnet, &Hgrn2, &Rwkv6, &Retnet];
    for (gi, &g) in gates.iter().enumerate() {
        // One run with a batch and an initial state, one with packed variable-length sequences.
        for varlen in [false, true] {
            let d = if varlen {
                Dims::new(1, 5, 2, 3, 2)
            } else {
                Dims::new(2, 3, 2, 3, 2)
            };
            let cu: Option<Vec<usize>> = varlen.then(|| vec![0, 2, 5]);
            let n_seq = if varlen { 2 } else { d.b };
            let seed = 10 * gi as u64 + varlen as u64;
            let (q, k, v) = (
                data(d.b * d.t * d.h * d.dk, seed + 1, 1.0),
                data(d.b * d.t * d.h * d.dk, seed + 2, 1.0),
                data(d.b * d.t * d.h * d.dv, seed + 3, 1.0),
            );
            let nl = match g.shape() {
                GateShape::Fixed => 0,
                s => d.b * d.t * d.h * s.logits_per_token(d.dk, d.dv),
            };
            let logits = data(nl, seed + 4, 3.0);
            let params = params_for(g, d.h, seed + 5);
            let h0 = data(n_seq * d.h * d.dk * d.dv, seed + 6, 0.5);
            let d_o = data(d.b * d.t * d.h * d.dv, seed + 7, 1.0);
            let d_s = data(n_seq * d.h * d.dk * d.dv, seed + 8, 1.0);
            let problem = |logits: &'_ [f64], params: &'_ [f64]| {
                let p = GateProblem {
                    dims: d,
                    q: &q,
                    k: &k,
                    v: &v,
                    gate: g,
                    logits,
                    params,
                    scale: Some(0.7),
                    initial_state: Some(&h0),
                    cu_seqlens: cu.as_deref(),
                };
                let f = gate_forward(&p, true).unwrap();
                let s = f.final_state.unwrap();
                f.o.iter().zip(&d_o).map(|(a, b)| a * b).sum::<f64>()
                    + s.iter().zip(&d_s).map(|(a, b)| a * b).sum::<f64>()
            };
            let p = GateProblem {
                dims: d,
                q: &q,
                k: &k,
                v: &v,
                gate: g,
                logits: &logits,
                params: &params,
                scale: Some(0.7),
                initial_state: Some(&h0),
                cu_seqlens: cu.as_deref(),
            };
            let gr = gate_backward(&p, &d_o, Some(&d_s)).unwrap();
            assert_eq!(gr.d_logits.len(), nl, "{}", g.name());
            assert_eq!(gr.d_params.len(), params.len(), "{}", g.name());
            let h = 1e-6;
            let check = |what: String, fd: f64, got: f64| {
                assert!(
                    (fd - got).abs() <= 1e-6 * (1.0 + fd.abs()),
                    "{} (varlen {varlen}): {what}: finite difference {fd} vs {got}",
                    g.name()
                );
            };
            for i in 0..nl {
                let (mut a, mut b) = (logits.clone(), logits.clone());
                a[i] += h;
                b[i] -= h;
                check(
                    format!("d logits[{i}]"),
                    (problem(&a, &params) - problem(&b, &params)) / (2.0 * h),
                    gr.d_logits[i],
                );
            }
            for j in 0..params.len() {
                let (mut a, mut b) = (params.clone(), params.clone());
                a[j] += h;
                b[j] -= h;
                check(
                    format!("d params[{j}]"),
                    (problem(&logits, &a) - problem(&logits, &b)) / (2.0 * h),
                    gr.d_params[j],
                );
            }
        }
    }
}

#[test]
fn log_gates_per_shape() {
    let d = Dims::new(1, 2, 3, 4, 5);
    assert_eq!(log_gates(&Gla, d, &[0.0; 24], &[]).unwrap().len(), 24);
    assert_eq!(
        log_gates(&Mamba2, d, &[0.0; 6], &[0.0, 0.1, 0.2])
            .unwrap()
            .len(),
        6
    );
    let r = log_gates(&Retnet, d, &[], &[]).unwrap();
    assert_eq!(r.len(), 3);
    assert!((r[2] - (1.0 - 2f64.powi(-7)).ln()).abs() < 1e-12);
    let e = log_gates(&Hgrn2, d, &[0.0; 24], &[0.5, 2.0, 0.5])
        .unwrap_err()
        .to_string();
    assert!(e.contains("`gamma` of head 1 is 2"), "{e}");
    let e = log_gates(&Gla, d, &[0.0; 6], &[]).unwrap_err().to_string();
    assert!(e.contains("[1, 2, 3, 4]") && e.contains("per_key"), "{e}");
}
