use gla::prelude::*;

// Extra arguments must be #[param] f32; the logit is not a parameter. Uses of a bad parameter in the body are not
// reported again.
#[gated_linear_attention(gate = per_head)]
fn g(#[param] x: f32, a: f32, #[param] b: f64, #[param(rnage = 0.0..1.0)] c: f32, #[param(range = 1.0..0.0)] d: f32) -> f32 {
    -softplus(x) * exp(a + b as f32 + c + d)
}

fn main() {}
