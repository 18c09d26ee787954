//! `chunkwise_backward` (the f32 decomposition the backward kernels are to take) against the f64 recurrence's
//! gradients (`recurrent_backward`, itself checked against finite differences), for every key-gate kind, strong and
//! long-memory decays, with and without a value gate, several chunk sizes, varlen with empty sequences, an initial
//! state and a final-state gradient.
//! Every `exp` argument is ≤ 0.

mod common;

use common::*;
use gla_core::reference::{
    chunkwise_backward, recurrent_backward, recurrent_forward, rel_rms, ChunkConfig,
};
use rand::rngs::SmallRng;
use rand::SeedableRng;

/// f32 arithmetic against f64: relative RMS per gradient tensor.
const TOL: f64 = 2e-5;
/// The gate gradient is a sum of q ⊙ dq − k ⊙ dk terms (the closed form) that cancel where the decay is strong: its
/// true value is then tiny and f32 leaves a residue of the terms' size. Its error is measured relative to the larger
/// of the gradient and its terms (for mild and long-memory decays that is the gradient itself).
const TOL_GATE: f64 = TOL;

/// The value side's analogue: terms |o ⊙ dO| + |v ⊙ dv|.
fn value_gate_error(
    got: &[f64],
    want: &[f64],
    o: &Owned,
    g: &gla_core::reference::Grads,
    d_o: &[f64],
) -> f64 {
    let out = recurrent_forward(&o.problem(), false).unwrap().o;
    let terms: Vec<f64> = (0..out.len())
        .map(|x| (out[x] * d_o[x]).abs() + (o.v[x] * g.dv[x]).abs())
        .collect();
    let norm = |v: &[f64]| v.iter().map(|x| x * x).sum::<f64>().sqrt();
    let diff: Vec<f64> = got.iter().zip(want).map(|(a, b)| a - b).collect();
    norm(&diff) / norm(want).max(norm(&terms))
}

#[test]
fn chunkwise_backward_matches_the_recurrence() {
    let mut worst = std::collections::BTreeMap::new();
    for (kind, vg) in KINDS.into_iter().map(|k| (k, false)).chain([
        (Kind::PerKey, true),
        (Kind::None, true),
        (Kind::PerHead, true),
    ]) {
        for regime in [Regime::Strong, Regime::LongMemory, Regime::Moderate] {
            let mut spec = Spec::varlen(&[70, 0, 1, 33, 129], 2, 12, 10).gates(kind, vg, regime);
            spec.initial_state = true;
            let owned = spec.build(31);
            let p = owned.problem();
            let mut rng = SmallRng::seed_from_u64(7);
            let d_o = uniform(&mut rng, owned.q.len() / 12 * 10);
            let d_final = uniform(&mut rng, owned.state_len());
            let want = recurrent_backward(&p, &d_o, Some(&d_final)).unwrap();
            for (chunk, sub_chunk) in [(16, 8), (32, 16), (64, 16)] {
                let cfg = ChunkConfig {
                    chunk,
                    sub_chunk,
                    materialize: false,
                    factorise_span: None,
                    segments: 1,
                };
                let (got, stats) = chunkwise_backward(&p, cfg, &d_o, Some(&d_final)).unwrap();
                assert!(
                    stats.max_arg <= 0.0,
                    "{kind:?} vg={vg} {regime:?} C={chunk}: exp of {:e}",
                    stats.max_arg
                );
                let mut check = |what: &str, g: &[f64], w: &[f64], tol: f64| {
                    let e = match what {
                        "d log α" => gate_error(g, w, &owned, &want),
                        "d log β" => value_gate_error(g, w, &owned, &want, &d_o),
                        _ => rel_rms(g, w),
                    };
                    let slot = worst
                        .entry((what.to_string(), format!("{regime:?}")))
                        .or_insert(0.0f64);
                    *slot = slot.max(e);
                    assert!(
                        e <= tol,
                        "{kind:?} vg={vg} {regime:?} C={chunk}: {what} rel RMS {e:.2e} > {tol:.0e}"
                    );
                };
                check("dq", &got.dq, &want.dq, TOL);
                check("dk", &got.dk, &want.dk, TOL);
                check("dv", &got.dv, &want.dv, TOL);
                check(
                    "dh0",
                    got.d_initial_state.as_ref().unwrap(),
                    want.d_initial_state.as_ref().unwrap(),
                    TOL,
                );
                match (&got.d_key_gate, &want.d_key_gate) {
                    (Some(g), Some(w)) => {
                        check("d log α", g, w, TOL_GATE);
                        if regime != Regime::Strong {
                            check("d log α (plain)", g, w, TOL_GATE);
                        }
                    }
                    (None, None) => {}
                    _ => panic!("{kind:?}: gate gradient present in one result only"),
                }
                match (&got.d_value_gate, &want.d_value_gate) {
                    (Some(g), Some(w)) => {
                        check("d log β", g, w, TOL_GATE);
                        if regime != Regime::Strong {
                            check("d log β (plain)", g, w, TOL_GATE);
                        }
                    }
                    (None, None) => {}
                    _ => panic!("{kind:?} vg={vg}: value-gate gradient present in one result only"),
                }
            }
        }
    }
    for ((what, regime), e) in &worst {
        println!("{what:8} {regime:11} worst rel RMS {e:.2e}");
    }
}

#[test]
fn chunkwise_backward_validates_its_inputs() {
    let owned = Spec::new(1, 20, 1, 4, 4)
        .gates(Kind::PerKey, true, Regime::Moderate)
        .build(3);
    let d_o = vec![0.5; 20 * 4];
    let e = chunkwise_backward(&owned.problem(), ChunkConfig::default(), &d_o[..10], None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("d_o"), "{e}");
    let mut bad = d_o.clone();
    bad[3] = f64::NAN;
    let e = chunkwise_backward(&owned.problem(), ChunkConfig::default(), &bad, None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("d_o") && e.contains("finite"), "{e}");
    let e = chunkwise_backward(
        &owned.problem(),
        ChunkConfig::default(),
        &d_o,
        Some(&[1.0; 3]),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("d_final_state"), "{e}");
}
