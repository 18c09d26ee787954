//! User-declared gates: plain fns stay callable, the generated types implement Gate, and the escape hatch works.
use gla::prelude::*;

/// A per-value gate with a bounded parameter and let bindings.
#[gated_linear_attention(gate = per_value)]
pub fn leaky(x: f32, #[param(range = 0.0..0.5)] floor: f32, #[param] scale: f32) -> f32 {
    let s = sigmoid(x);
    let keep = floor + (1.0 - floor) * s;
    log(keep) * exp(scale)
}

// ≤ 0, but by 5e-25 at x → +inf: beyond the rounding of the interval proof. The user vouches.
#[gated_linear_attention(gate = per_head, assume_nonpositive)]
fn vouched(x: f32) -> f32 {
    log(1.0 + 0.000000000001 * sigmoid(x)) - 0.000000000001
}

#[gated_linear_attention(gate = fixed)]
fn decay(h: f32) -> f32 {
    -exp(-h) - 0.01
}

fn main() {
    assert!(leaky(0.5, 0.1, 0.0) < 0.0);
    assert_eq!(Leaky.shape(), GateShape::PerValue);
    assert_eq!(Leaky.params().len(), 2);
    let v = Leaky.log_alpha(0.5, &[0.1, 0.0]);
    assert!((v - leaky(0.5, 0.1, 0.0) as f64).abs() < 1e-6);
    let mut g = [0.0; 2];
    Leaky.dlog_alpha_dparams(0.5, &[0.1, 0.2], &mut g);
    assert!(g[0] > 0.0 && g[1] < 0.0);
    assert!(Vouched.log_alpha(-2.0, &[]) < 0.0);
    assert_eq!(Decay.shape(), GateShape::Fixed);
    let names: Vec<&str> = gla::core::registered_gates().iter().map(|g| g.name()).collect();
    for n in ["leaky", "vouched", "decay", "gla", "mamba2"] {
        assert!(names.contains(&n), "{n} not in {names:?}");
    }
    run_on_cpu();
}

/// The user's per-value gate end to end through the CPU reference: forward, backward, and one gradient checked
/// against a central difference.
fn run_on_cpu() {
    use gla::core::gate_ref::{gate_backward, gate_forward, GateProblem};
    let d = gla::Dims::new(1, 4, 2, 3, 2);
    let fill = |n: usize, s: f64| (0..n).map(|i| ((i as f64 * 0.7 + s).sin())).collect::<Vec<f64>>();
    let (q, k, v) = (fill(24, 0.1), fill(24, 0.2), fill(16, 0.3));
    let logits = fill(16, 0.4);
    let params = vec![0.1, 0.3, 0.2, -0.4]; // [H, P] = [2, 2]
    let d_o = fill(16, 0.5);
    let loss = |logits: &[f64], params: &[f64]| {
        let p = GateProblem { dims: d, q: &q, k: &k, v: &v, gate: &Leaky, logits, params, scale: None, initial_state: None, cu_seqlens: None };
        gate_forward(&p, false).unwrap().o.iter().zip(&d_o).map(|(a, b)| a * b).sum::<f64>()
    };
    let p = GateProblem { dims: d, q: &q, k: &k, v: &v, gate: &Leaky, logits: &logits, params: &params, scale: None, initial_state: None, cu_seqlens: None };
    let g = gate_backward(&p, &d_o, None).unwrap();
    let h = 1e-6;
    let (mut a, mut b) = (params.clone(), params.clone());
    a[3] += h;
    b[3] -= h;
    let fd = (loss(&logits, &a) - loss(&logits, &b)) / (2.0 * h);
    assert!((fd - g.d_params[3]).abs() < 1e-6 * (1.0 + fd.abs()), "{fd} vs {}", g.d_params[3]);
    let (mut a, mut b) = (logits.clone(), logits.clone());
    a[5] += h;
    b[5] -= h;
    let fd = (loss(&a, &params) - loss(&b, &params)) / (2.0 * h);
    assert!((fd - g.d_logits[5]).abs() < 1e-6 * (1.0 + fd.abs()), "{fd} vs {}", g.d_logits[5]);
}
