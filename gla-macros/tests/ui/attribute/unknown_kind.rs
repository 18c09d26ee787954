use gla::prelude::*;

#[gated_linear_attention(gate = perkey)]
fn g(x: f32) -> f32 {
    log_sigmoid(x)
}

#[gated_linear_attention(gate = "per_head")]
fn h(x: f32) -> f32 {
    log_sigmoid(x)
}

fn main() {}
