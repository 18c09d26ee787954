use gla::prelude::*;

// Positive for x < -0.5ish: a finite counterexample is shown.
#[gated_linear_attention(gate = per_head)]
fn g(x: f32) -> f32 {
    0.5 - softplus(x)
}

// Positive by at most 1e-12: no grid point shows it, the proof fails and says so.
#[gated_linear_attention(gate = per_head)]
fn h(x: f32) -> f32 {
    log(1.0 + 0.000000000001 * sigmoid(x))
}

fn main() {}
