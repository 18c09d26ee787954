//! [`Gla::decode`]: one new token a sequence in the recurrent form — what inference runs after a prompt's chunkwise
//! forward, continuing its `final_state` (`gla_codegen::decode`). Validated like the forward; no launch happens
//! before every check has passed.

use super::{lock, Gla};
use crate::launch;
use crate::tensor::{check_tensor, DeviceTensor};
use gla_core::error::Result;
use gla_core::{DType, Gate, GateShape, GlaError};

/// Options of [`Gla::decode`].
#[derive(Clone, Copy, Debug, Default)]
pub struct DecodeOptions {
    /// The output scale (default 1/√d_k, as the forward's).
    pub scale: Option<f32>,
}

impl Gla {
    /// One decode step for N sequences: q, k `[N, H, d_k]` and v `[N, H, d_v]` of the new token (bf16, f16 or f32,
    /// one dtype), the token's raw gate logits (per key `[N, H, d_k]`, per head `[N, H]`, per value `[N, H, d_v]`;
    /// `None` for a fixed gate) and the gate's parameters (f32 `[H, P]`, where it has some); `state`, f32
    /// `[N, H, d_k, d_v]` (e.g. the forward's `final_state`), is updated in place: S ← diag(α) S + k vᵀ (per-value
    /// gates: S diag(β) + k vᵀ). Returns o = scale · Sᵀ q, `[N, H, d_v]` in the inputs' dtype — what
    /// [`Gla::forward`] gives for that token. Errors (typed, before any launch): shapes, dtypes, head dims over 512.
    #[allow(clippy::too_many_arguments)]
    pub fn decode(
        &self,
        gate: &'static dyn Gate,
        q: &DeviceTensor,
        k: &DeviceTensor,
        v: &DeviceTensor,
        logits: Option<&DeviceTensor>,
        params: Option<&DeviceTensor>,
        state: &mut DeviceTensor,
        opts: &DecodeOptions,
    ) -> Result<DeviceTensor> {
        let &[n, h, dk] = q.shape() else {
            return Err(GlaError::shape(
                "q",
                "[N, H, d_k] (one token a sequence)",
                q.shape(),
            ));
        };
        let dtype = q.dtype();
        let Some(&dv) = v.shape().last() else {
            return Err(GlaError::shape("v", format!("[{n}, {h}, d_v]"), v.shape()));
        };
        for (what, d) in [("d_k", dk), ("d_v", dv)] {
            if !(1..=gla_codegen::MAX_HEAD_DIM).contains(&d) {
                return Err(GlaError::invalid(
                    what,
                    format!("must be 1..={}, got {d}", gla_codegen::MAX_HEAD_DIM),
                ));
            }
        }
        if n > 65535 || h > 65535 {
            return Err(GlaError::invalid(
                "decode",
                format!("N = {n}, H = {h}: at most 65535 each"),
            ));
        }
        check_tensor("k", k.shape(), k.dtype(), &[n, h, dk], dtype)?;
        check_tensor("v", v.shape(), v.dtype(), &[n, h, dv], dtype)?;
        check_tensor(
            "state",
            state.shape(),
            state.dtype(),
            &[n, h, dk, dv],
            DType::F32,
        )?;
        match (gate.shape(), logits) {
            (GateShape::Fixed, None) => {}
            (GateShape::Fixed, Some(_)) => {
                return Err(GlaError::invalid("logits", "a fixed gate takes none"))
            }
            (_, None) => {
                return Err(GlaError::invalid(
                    "logits",
                    "this gate needs the token's logits",
                ))
            }
            (shape, Some(l)) => {
                let want: Vec<usize> = match shape {
                    GateShape::PerHead => vec![n, h],
                    GateShape::PerValue => vec![n, h, dv],
                    _ => vec![n, h, dk],
                };
                check_tensor("logits", l.shape(), l.dtype(), &want, dtype)?;
            }
        }
        let np = gate.params().len();
        match (np, params) {
            (0, None) => {}
            (0, Some(_)) => return Err(GlaError::invalid("params", "this gate has no parameters")),
            (_, None) => {
                return Err(GlaError::invalid(
                    "params",
                    format!("this gate needs its parameters, f32 [{h}, {np}]"),
                ))
            }
            (_, Some(p)) => check_tensor("params", p.shape(), p.dtype(), &[h, np], DType::F32)?,
        }
        let scale = opts.scale.unwrap_or(1.0 / (dk as f32).sqrt());
        let gpu = &self.inner.gpu;
        let o = DeviceTensor::empty(gpu, dtype, &[n, h, dv])?;
        // The kernel, found once per gate and dtype: a tuning cache's cubin (no NVRTC), else a compile.
        let key = (gate.content_hash(), dtype);
        let cached = lock(&self.inner.decoders).get(&key).cloned();
        let func = match cached {
            Some(f) => f,
            None => {
                let cubin = self.inner.tuned.pick_decode(gate, dtype);
                let f = launch::decode_function(
                    gpu,
                    gate,
                    dtype,
                    &self.inner.options,
                    cubin.as_deref().map(|c| c.as_slice()),
                )?;
                lock(&self.inner.decoders).entry(key).or_insert(f).clone()
            }
        };
        let _serial = lock(&self.inner.workspace); // (as the forward: one call's launches at a time per Gla)
        launch::launch_decode(
            gpu,
            &func,
            gate,
            dtype,
            (n, h, dk, dv),
            scale,
            &launch::DecodeBuffers {
                q,
                k,
                v,
                logits,
                params,
                state,
                o: &o,
            },
        )?;
        Ok(o)
    }
}
