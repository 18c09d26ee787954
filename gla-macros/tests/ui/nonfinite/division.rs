use gla::prelude::*;

#[gated_linear_attention(gate = per_key)]
fn g(x: f32) -> f32 {
    -1.0 / x
}

#[gated_linear_attention(gate = per_key)]
fn h(x: f32) -> f32 {
    -sqrt(tanh(x)) - powf(x, 0.5)
}

fn main() {}
