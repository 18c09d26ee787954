use gla::prelude::*;

#[gated_linear_attention(gate = per_key, assume_nonpositiv, chunk = 64)]
fn g(x: f32) -> f32 {
    log_sigmoid(x)
}

fn main() {}
