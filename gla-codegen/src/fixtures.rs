//! Hand-written gates for testing the generator on its own (no proc macro involved). Production gates are
//! declared with `#[gated_linear_attention]` in the `gla` crate.
#![doc(hidden)]

use gla_core::{Gate, GateShape, ParamSpec};

fn log_sigmoid(x: f64) -> f64 {
    x.min(0.0) - (-x.abs()).exp().ln_1p()
}
fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// log α = log_sigmoid(x) / 16, one logit per key channel (GLA §4.4), or one per head.
pub struct LogSigmoid16(pub GateShape);

impl Gate for LogSigmoid16 {
    fn name(&self) -> &'static str {
        match self.0 {
            GateShape::PerKey => "fixture_per_key",
            GateShape::PerHead => "fixture_per_head",
            GateShape::PerValue => "fixture_per_value",
            GateShape::Fixed => "fixture_other",
        }
    }
    fn shape(&self) -> GateShape {
        self.0
    }
    fn params(&self) -> &'static [ParamSpec] {
        &[]
    }
    fn expr(&self) -> &'static str {
        "log_sigmoid(x) / 16"
    }
    fn log_alpha(&self, x: f64, _: &[f64]) -> f64 {
        log_sigmoid(x) / 16.0
    }
    fn dlog_alpha_dx(&self, x: f64, _: &[f64]) -> f64 {
        (1.0 - sigmoid(x)) / 16.0
    }
    fn dlog_alpha_dparams(&self, _: f64, _: &[f64], _: &mut [f64]) {}
    fn cuda_ident(&self) -> &'static str {
        "fixture_gate"
    }
    fn cuda_source(&self) -> &'static str {
        "__device__ __forceinline__ float fixture_gate(float x, const float* p) { (void)p; return (fminf(x, 0.f) - gla_log1p_unit(gla_exp(-fabsf(x)))) * 0.0625f; }\n\
         __device__ __forceinline__ float fixture_gate_dx(float x, const float* p) { (void)p; return 0.0625f * gla_rcp(1.f + gla_exp(x)); }\n\
         __device__ __forceinline__ void fixture_gate_dp(float x, const float* p, float* dp) { (void)x; (void)p; (void)dp; }\n\
         __device__ __forceinline__ float fixture_gate_log2_acc(float x, const float* p, float acc) { (void)p; const float l = gla_log2_1p_unit(gla_exp(-fabsf(x))); return gla_min_nan(fmaf(l, -0.0625f, fmaf(fminf(x, 0.f), 0.09016844f, acc)), acc); }\n"
    }
    fn cuda_log2_acc(&self) -> bool {
        true
    }
    fn content_hash(&self) -> u64 {
        0x5eed_0000_0000_0001 ^ self.0 as u64
    }
}

/// RetNet-style fixed decay log(1 − 2^(−5−h)).
pub struct FixedRetNet;

impl Gate for FixedRetNet {
    fn name(&self) -> &'static str {
        "fixture_fixed"
    }
    fn shape(&self) -> GateShape {
        GateShape::Fixed
    }
    fn params(&self) -> &'static [ParamSpec] {
        &[]
    }
    fn expr(&self) -> &'static str {
        "log(1 - exp2(-5 - h))"
    }
    fn log_alpha(&self, h: f64, _: &[f64]) -> f64 {
        (-(2f64.powf(-5.0 - h))).ln_1p()
    }
    fn dlog_alpha_dx(&self, h: f64, _: &[f64]) -> f64 {
        let e = 2f64.powf(-5.0 - h);
        e * std::f64::consts::LN_2 / (1.0 - e)
    }
    fn dlog_alpha_dparams(&self, _: f64, _: &[f64], _: &mut [f64]) {}
    fn cuda_ident(&self) -> &'static str {
        "fixture_fixed"
    }
    fn cuda_source(&self) -> &'static str {
        "__device__ __forceinline__ float fixture_fixed(float h, const float* p) { (void)p; return log1pf(-exp2f(-5.f - h)); }\n\
         __device__ __forceinline__ float fixture_fixed_dx(float h, const float* p) { (void)p; float e = exp2f(-5.f - h); return e * 0.69314718f / (1.f - e); }\n\
         __device__ __forceinline__ void fixture_fixed_dp(float h, const float* p, float* dp) { (void)h; (void)p; (void)dp; }\n"
    }
    fn content_hash(&self) -> u64 {
        0x5eed_0000_0000_00ff
    }
}

pub static PER_KEY: LogSigmoid16 = LogSigmoid16(GateShape::PerKey);
pub static PER_HEAD: LogSigmoid16 = LogSigmoid16(GateShape::PerHead);
pub static PER_VALUE: LogSigmoid16 = LogSigmoid16(GateShape::PerValue);
pub static FIXED: FixedRetNet = FixedRetNet;
