use gla::prelude::*;

#[gated_linear_attention(gate = per_key)]
struct Gate;

fn main() {}
