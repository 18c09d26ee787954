use gla::prelude::*;

#[gated_linear_attention(gate = per_key)]
fn g(x: f32) -> f32 {
    x
}

fn main() {}
