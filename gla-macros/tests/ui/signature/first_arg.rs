use gla::prelude::*;

// The logit must be `x: f32`.
#[gated_linear_attention(gate = per_key)]
fn g(y: f64) -> f32 {
    log_sigmoid(y as f32)
}

// A fixed gate's input is the head index `h`.
#[gated_linear_attention(gate = fixed)]
fn r(x: f32) -> f32 {
    log_sigmoid(x)
}

// No input at all.
#[gated_linear_attention(gate = per_head)]
fn n() -> f32 {
    -1.0
}

fn main() {}
