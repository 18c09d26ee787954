//! Input validation of the CPU reference: every bad input is a typed error (never a panic), from every entry point.

mod common;

use common::*;
use gla_core::reference::{
    chunkwise_forward, recurrent_backward, recurrent_forward, rel_rms, ChunkConfig, KeyGate,
    Problem,
};
use gla_core::{Dims, GlaError};

/// Run all three entry points on `p` (chunkwise with a valid config) and return their errors.
fn errors(p: &Problem) -> [GlaError; 3] {
    let n = p.dims.b * p.dims.t * p.dims.h * p.dims.dv;
    let d_o = vec![0.5; n];
    [
        recurrent_forward(p, true).expect_err("recurrent_forward accepted a bad input"),
        chunkwise_forward(p, ChunkConfig::default(), true)
            .expect_err("chunkwise_forward accepted a bad input"),
        recurrent_backward(p, &d_o, None).expect_err("recurrent_backward accepted a bad input"),
    ]
}

fn assert_shape(p: &Problem, name: &str) {
    for e in errors(p) {
        assert!(
            matches!(&e, GlaError::Shape { what, .. } if *what == name),
            "expected Shape({name}), got {e:?}"
        );
    }
}

fn assert_invalid(p: &Problem, name: &str) {
    for e in errors(p) {
        assert!(
            matches!(&e, GlaError::InvalidArgument { what, .. } if *what == name),
            "expected InvalidArgument({name}), got {e:?}"
        );
        println!("{e}");
    }
}

fn base(kind: Kind, vg: bool) -> Owned {
    Spec::varlen(&[3, 0, 4], 2, 3, 5)
        .gates(kind, vg, Regime::Moderate)
        .build(1)
}

#[test]
fn wrong_lengths_are_shape_errors() {
    let o = base(Kind::PerKey, true);
    let short = &o.q[1..];
    let long: Vec<f64> = o.v.iter().chain([1.0].iter()).copied().collect();
    assert_shape(
        &Problem {
            q: short,
            ..o.problem()
        },
        "q",
    );
    assert_shape(
        &Problem {
            k: short,
            ..o.problem()
        },
        "k",
    );
    assert_shape(
        &Problem {
            v: &long,
            ..o.problem()
        },
        "v",
    );
    assert_shape(
        &Problem {
            key_gate: KeyGate::PerKey(&o.key_gate[2..]),
            ..o.problem()
        },
        "key_gate (per key)",
    );
    // A per-key tensor passed as a per-head gate.
    assert_shape(
        &Problem {
            key_gate: KeyGate::PerHead(&o.key_gate),
            ..o.problem()
        },
        "key_gate (per head)",
    );
    assert_shape(
        &Problem {
            key_gate: KeyGate::Fixed(&[-0.1, -0.2, -0.3]),
            ..o.problem()
        },
        "key_gate (fixed)",
    );
    assert_shape(
        &Problem {
            value_gate: Some(&o.key_gate),
            ..o.problem()
        },
        "value_gate",
    );
    // Initial state sized for B = 1 instead of N = 3 sequences.
    let h0 = &o.initial_state.as_ref().unwrap()[..2 * 3 * 5];
    assert_shape(
        &Problem {
            initial_state: Some(h0),
            ..o.problem()
        },
        "initial_state",
    );
}

#[test]
fn bad_values_are_invalid_arguments() {
    let o = base(Kind::PerKey, true);
    let mut pos = o.key_gate.clone();
    pos[5] = 1e-9;
    assert_invalid(
        &Problem {
            key_gate: KeyGate::PerKey(&pos),
            ..o.problem()
        },
        "key_gate (per key)",
    );
    let ph = vec![
        -0.5, 0.25, -0.1, -0.1, -0.1, -0.1, -0.1, -0.1, -0.1, -0.1, -0.1, -0.1, -0.1, -0.1,
    ];
    assert_invalid(
        &Problem {
            key_gate: KeyGate::PerHead(&ph),
            ..o.problem()
        },
        "key_gate (per head)",
    );
    assert_invalid(
        &Problem {
            key_gate: KeyGate::Fixed(&[-0.1, 0.5]),
            ..o.problem()
        },
        "key_gate (fixed)",
    );
    assert_invalid(
        &Problem {
            key_gate: KeyGate::Fixed(&[-0.1, f64::NEG_INFINITY]),
            ..o.problem()
        },
        "key_gate (fixed)",
    );
    let mut nan = o.value_gate.clone().unwrap();
    nan[0] = f64::NAN;
    assert_invalid(
        &Problem {
            value_gate: Some(&nan),
            ..o.problem()
        },
        "value_gate",
    );
    let mut vpos = o.value_gate.clone().unwrap();
    vpos[3] = 0.1;
    assert_invalid(
        &Problem {
            value_gate: Some(&vpos),
            ..o.problem()
        },
        "value_gate",
    );
    let mut q = o.q.clone();
    q[2] = f64::INFINITY;
    assert_invalid(
        &Problem {
            q: &q,
            ..o.problem()
        },
        "q",
    );
    let mut h0 = o.initial_state.clone().unwrap();
    h0[1] = f64::NAN;
    assert_invalid(
        &Problem {
            initial_state: Some(&h0),
            ..o.problem()
        },
        "initial_state",
    );
    assert_invalid(
        &Problem {
            scale: Some(f64::NAN),
            ..o.problem()
        },
        "scale",
    );
    // Zero-sized head dimensions.
    assert_invalid(
        &Problem {
            dims: Dims { h: 0, ..o.dims },
            ..o.problem()
        },
        "dims",
    );
}

#[test]
fn bad_cu_seqlens_are_invalid_arguments() {
    let o = base(Kind::PerHead, false);
    let t = o.dims.t;
    for cu in [
        vec![0, 5, 4, t],
        vec![1, 3, t],
        vec![0, 3, t - 1],
        vec![0, 3, t + 1],
        vec![0],
    ] {
        assert_invalid(
            &Problem {
                cu_seqlens: Some(&cu),
                ..o.problem()
            },
            "cu_seqlens",
        );
    }
    // cu_seqlens needs B = 1.
    let b2 = Spec::new(2, 4, 1, 2, 2)
        .gates(Kind::PerHead, false, Regime::Moderate)
        .build(2);
    let cu = [0, 2, 4];
    assert_invalid(
        &Problem {
            cu_seqlens: Some(&cu),
            initial_state: None,
            ..b2.problem()
        },
        "cu_seqlens",
    );
}

#[test]
fn bad_chunk_configs_are_unsupported() {
    let o = base(Kind::PerKey, false);
    let p = o.problem();
    for (chunk, sub_chunk) in [(64, 24), (16, 32), (0, 1), (8, 0), (48, 32)] {
        let e = chunkwise_forward(
            &p,
            ChunkConfig {
                chunk,
                sub_chunk,
                materialize: false,
                factorise_span: None,
                segments: 1,
            },
            true,
        )
        .unwrap_err();
        assert!(
            matches!(e, GlaError::Unsupported { .. }),
            "C={chunk} c={sub_chunk}: {e:?}"
        );
        println!("{e}");
    }
}

#[test]
fn bad_backward_inputs() {
    let o = base(Kind::Fixed, true);
    let p = o.problem();
    let n = o.dims.t * o.dims.h * o.dims.dv;
    let e = recurrent_backward(&p, &vec![1.0; n - 1], None).unwrap_err();
    assert!(matches!(e, GlaError::Shape { what: "d_o", .. }), "{e:?}");
    let mut d_o = vec![1.0; n];
    d_o[0] = f64::NAN;
    let e = recurrent_backward(&p, &d_o, None).unwrap_err();
    assert!(
        matches!(e, GlaError::InvalidArgument { what: "d_o", .. }),
        "{e:?}"
    );
    let e = recurrent_backward(&p, &vec![1.0; n], Some(&[1.0; 3])).unwrap_err();
    assert!(
        matches!(
            e,
            GlaError::Shape {
                what: "d_final_state",
                ..
            }
        ),
        "{e:?}"
    );
}

/// Values that are valid f64 but overflow the f32 chunkwise form are rejected by it (and only by it).
#[test]
fn f32_range_of_the_chunkwise_form() {
    let o = base(Kind::PerKey, false);
    let mut g = o.key_gate.clone();
    g[0] = -1e35;
    let p = Problem {
        key_gate: KeyGate::PerKey(&g),
        ..o.problem()
    };
    assert!(recurrent_forward(&p, true).is_ok());
    let e = chunkwise_forward(&p, ChunkConfig::default(), true).unwrap_err();
    assert!(
        matches!(
            e,
            GlaError::InvalidArgument {
                what: "key_gate",
                ..
            }
        ),
        "{e:?}"
    );
    let mut q = o.q.clone();
    q[0] = 1e39;
    let p = Problem {
        q: &q,
        ..o.problem()
    };
    assert!(recurrent_forward(&p, true).is_ok());
    let e = chunkwise_forward(&p, ChunkConfig::default(), true).unwrap_err();
    assert!(
        matches!(e, GlaError::InvalidArgument { what: "q", .. }),
        "{e:?}"
    );
}

#[test]
fn rel_rms_semantics() {
    assert_eq!(rel_rms(&[], &[]), 0.0);
    assert_eq!(rel_rms(&[0.0, 0.0], &[0.0, 0.0]), 0.0);
    assert_eq!(rel_rms(&[1.0], &[0.0]), f64::INFINITY);
    assert_eq!(rel_rms(&[1.0], &[1.0, 2.0]), f64::INFINITY);
    assert!(rel_rms(&[f64::NAN], &[1.0]).is_nan());
    assert!((rel_rms(&[1.0, 2.0], &[2.0, 2.0]) - (1.0f64 / 8.0).sqrt()).abs() < 1e-15);
}
