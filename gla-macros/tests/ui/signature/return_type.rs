use gla::prelude::*;

#[gated_linear_attention(gate = per_key)]
fn g(x: f32) -> f64 {
    log_sigmoid(x) as f64
}

#[gated_linear_attention(gate = per_key)]
fn h(x: f32) {
    let _ = x;
}

fn main() {}
