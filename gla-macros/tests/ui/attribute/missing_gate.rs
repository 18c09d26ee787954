use gla::prelude::*;

#[gated_linear_attention]
fn g(x: f32) -> f32 {
    log_sigmoid(x)
}

fn main() {}
