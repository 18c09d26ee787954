use gla::prelude::*;

#[gated_linear_attention(gate = per_key)]
fn g(x: f32) -> f32 {
    -softplus(x % 2.0)
}

fn main() {}
