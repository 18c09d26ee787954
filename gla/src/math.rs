//! The f32 functions of the gate language, so that a gate fn compiles and runs as plain Rust. The same
//! numerically stable forms are used by the generated f64 CPU code and the CUDA device functions:
//! log σ(x) = min(x, 0) − log1p(exp(−|x|)), softplus(x) = max(x, 0) + log1p(exp(−|x|)), σ(x) via exp(−|x|).

/// eˣ.
#[inline]
pub fn exp(x: f32) -> f32 {
    x.exp()
}
/// Natural logarithm.
#[inline]
pub fn log(x: f32) -> f32 {
    x.ln()
}
#[inline]
pub fn sqrt(x: f32) -> f32 {
    x.sqrt()
}
#[inline]
pub fn tanh(x: f32) -> f32 {
    x.tanh()
}
/// σ(x) = 1 / (1 + e⁻ˣ).
#[inline]
pub fn sigmoid(x: f32) -> f32 {
    let e = (-x.abs()).exp();
    if x >= 0.0 {
        1.0 / (1.0 + e)
    } else {
        e / (1.0 + e)
    }
}
/// log σ(x), stable for every x.
#[inline]
pub fn log_sigmoid(x: f32) -> f32 {
    x.min(0.0) - (-x.abs()).exp().ln_1p()
}
/// log(1 + eˣ), stable for every x.
#[inline]
pub fn softplus(x: f32) -> f32 {
    x.max(0.0) + (-x.abs()).exp().ln_1p()
}
#[inline]
pub fn min(a: f32, b: f32) -> f32 {
    a.min(b)
}
#[inline]
pub fn max(a: f32, b: f32) -> f32 {
    a.max(b)
}
/// `min(max(x, lo), hi)`.
#[inline]
pub fn clamp(x: f32, lo: f32, hi: f32) -> f32 {
    x.max(lo).min(hi)
}
/// xᵖ; in a gate body the exponent must be a constant.
#[inline]
pub fn powf(x: f32, p: f32) -> f32 {
    x.powf(p)
}
