use gla::prelude::*;

#[gated_linear_attention(gate = per_key)]
async fn g<T>(x: f32) -> f32 {
    log_sigmoid(x)
}

#[gated_linear_attention(gate = per_key)]
fn Gla(x: f32) -> f32 {
    log_sigmoid(x)
}

fn main() {}
