use gla::prelude::*;

fn my_helper(x: f32) -> f32 {
    x
}

#[gated_linear_attention(gate = per_key)]
fn g(x: f32) -> f32 {
    let a = my_helper(x);
    let b = ln(x) + x.abs() + x.exp();
    log_sigmoid(a + b) + powf(x, x) - exp(x, 2.0)
}

fn main() {}
