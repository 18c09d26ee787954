use gla::prelude::*;

// HGRN-2 without a range on gamma: gamma + (1 - gamma) * sigmoid(x) can be <= 0.
#[gated_linear_attention(gate = per_key)]
fn hgrn2(x: f32, #[param] gamma: f32) -> f32 {
    log(gamma + (1.0 - gamma) * sigmoid(x))
}

// A range that is too wide.
#[gated_linear_attention(gate = per_key)]
fn hgrn2_wide(x: f32, #[param(range = -1.0..1.0)] gamma: f32) -> f32 {
    log(gamma + (1.0 - gamma) * sigmoid(x))
}

fn main() {}
