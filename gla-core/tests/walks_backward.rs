//! `walks_backward` (the backward as three forward walks that keep no chunk state, and the gate's chunk recurrence)
//! against the f64 recurrence's gradients (`recurrent_backward`, itself checked against finite differences), for
//! every key-gate kind, strong, long-memory and moderate decays, several chunk sizes, varlen with empty sequences and
//! a batch, an initial state and a final-state gradient. Both sides are f64: they differ only in summation order.

mod common;

use common::*;
use gla_core::reference::{recurrent_backward, rel_rms, walks_backward};
use gla_core::GlaError;
use rand::rngs::SmallRng;
use rand::SeedableRng;

/// f64 against f64 in another order.
const TOL: f64 = 1e-10;

#[test]
fn the_three_walks_give_the_recurrences_gradients() {
    for kind in KINDS {
        for regime in [Regime::Strong, Regime::LongMemory, Regime::Moderate] {
            for (name, mut spec) in [
                ("varlen", Spec::varlen(&[37, 0, 1, 20], 2, 5, 3)),
                ("batch", Spec::new(2, 23, 2, 4, 6)),
            ] {
                spec = spec.gates(kind, false, regime);
                spec.initial_state = true;
                let owned = spec.build(11);
                let p = owned.problem();
                let mut rng = SmallRng::seed_from_u64(5);
                let d_o = uniform(&mut rng, owned.q.len() / owned.dims.dk * owned.dims.dv);
                let d_final = uniform(&mut rng, owned.state_len());
                let want = recurrent_backward(&p, &d_o, Some(&d_final)).unwrap();
                for chunk in [1, 4, 16] {
                    let got = walks_backward(&p, chunk, &d_o, Some(&d_final)).unwrap();
                    let what = format!("{kind:?} {regime:?} {name} C={chunk}");
                    for (g, w, n) in [
                        (&got.dq, &want.dq, "dq"),
                        (&got.dk, &want.dk, "dk"),
                        (&got.dv, &want.dv, "dv"),
                    ] {
                        let e = rel_rms(g, w);
                        assert!(e <= TOL, "{what}: {n} rel RMS {e:.2e}");
                    }
                    let e = rel_rms(
                        got.d_initial_state.as_ref().unwrap(),
                        want.d_initial_state.as_ref().unwrap(),
                    );
                    assert!(e <= TOL, "{what}: dh0 rel RMS {e:.2e}");
                    match (&got.d_key_gate, &want.d_key_gate) {
                        (Some(g), Some(w)) => {
                            let e = gate_error(g, w, &owned, &want);
                            assert!(e <= TOL, "{what}: d log α rel error {e:.2e}");
                        }
                        (None, None) => {}
                        _ => panic!("{what}: the gate's gradient in one result only"),
                    }
                }
            }
        }
    }
}

#[test]
fn without_initial_state_or_final_gradient() {
    let mut spec = Spec::new(1, 19, 1, 3, 2).gates(Kind::PerKey, false, Regime::Moderate);
    spec.initial_state = false;
    let owned = spec.build(3);
    let p = owned.problem();
    let d_o = uniform(&mut SmallRng::seed_from_u64(1), owned.v.len());
    let want = recurrent_backward(&p, &d_o, None).unwrap();
    let got = walks_backward(&p, 8, &d_o, None).unwrap();
    assert!(got.d_initial_state.is_none());
    assert!(rel_rms(&got.dk, &want.dk) <= TOL && rel_rms(&got.dv, &want.dv) <= TOL);
    assert!(
        rel_rms(
            got.d_key_gate.as_ref().unwrap(),
            want.d_key_gate.as_ref().unwrap()
        ) <= TOL
    );
}

#[test]
fn a_value_gate_or_a_zero_chunk_is_refused() {
    let owned = Spec::new(1, 5, 1, 2, 2)
        .gates(Kind::PerKey, true, Regime::Moderate)
        .build(2);
    let d_o = vec![0.5; owned.v.len()];
    assert!(matches!(
        walks_backward(&owned.problem(), 4, &d_o, None),
        Err(GlaError::Unsupported { .. })
    ));
    let owned = Spec::new(1, 5, 1, 2, 2)
        .gates(Kind::PerKey, false, Regime::Moderate)
        .build(2);
    assert!(matches!(
        walks_backward(&owned.problem(), 0, &d_o, None),
        Err(GlaError::InvalidArgument { .. })
    ));
    assert!(matches!(
        walks_backward(&owned.problem(), 4, &d_o[1..], None),
        Err(GlaError::Shape { .. })
    ));
}
