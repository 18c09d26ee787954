use gla::prelude::*;

// Every unsupported construct is reported, each at its token.
#[gated_linear_attention(gate = per_key)]
fn g(x: f32) -> f32 {
    let y = if x > 0.0 { x } else { 0.0 };
    let z = x as f32;
    log_sigmoid(y * z * w) + "text".len() as f32
}

fn main() {}
