//! [`Gla::backward`]: the gradients of [`Gla::forward`] with respect to q, k, v, the raw gate logits, the gate
//! parameters and the initial state, given dO and (optionally) the final state's gradient — the backward kernels of
//! `gla_codegen::backward` in one of its two forms (`BackwardOptions::form`: every chunk's state through HBM, or the
//! walks that keep none; exact decays either way; nothing is kept from the forward). Validated like the forward; no
//! launch happens before every check has passed.

use super::{lock, validate_forward, ForwardRequest, Gla, TensorDesc};
use crate::launch;
use crate::tensor::{check_tensor, DeviceTensor};
use gla_codegen::{BackwardForm, BackwardSpec};
use gla_codegen::{KernelSpec, Pass};
use gla_core::error::Result;
use gla_core::{DType, Gate, GateShape, GlaError};
use std::sync::Arc;

/// Options of [`Gla::backward`]: those of the forward pass that was run, and the final state's gradient.
#[derive(Clone, Copy, Debug, Default)]
pub struct BackwardOptions<'a> {
    /// The forward's output scale (default 1/√d_k).
    pub scale: Option<f32>,
    /// The forward's initial state (f32 `[N, H, d_k, d_v]`); its gradient is then returned.
    pub initial_state: Option<&'a DeviceTensor>,
    /// ∂ℒ/∂(final state), f32 `[N, H, d_k, d_v]`, where the loss reads the final state.
    pub d_final_state: Option<&'a DeviceTensor>,
    /// The forward's sequence boundaries (B = 1), as in [`super::ForwardOptions::cu_seqlens`].
    pub cu_seqlens: Option<&'a [usize]>,
    /// The kernels' form (default: a tuning cache's pick, else `BackwardSpec::default_for`'s — the walks where they
    /// have kernels); [`BackwardForm::Walks`] keeps no chunk state in memory (bf16 / f16 key gates at d ≤ 256, else
    /// a typed error), [`BackwardForm::Chunks`] runs everywhere.
    pub form: Option<BackwardForm>,
    /// The walk form's chunks a segment: `Some(0)` walks every sequence whole, `Some(k)` cuts sequences into
    /// segments of k chunks (of 32 tokens) that walk in parallel; default: whole where the walks fill the GPU, else
    /// as `BackwardSpec::walk_segment_chunks` says. Ignored by the chunk form.
    pub walk_segment_chunks: Option<u32>,
    /// Skip the gate's gradients (a frozen gate: [`Gradients::d_logits`] and [`Gradients::d_params`] are then
    /// `None`), as autograd skips an input that needs no gradient. Where a per-key (d_k = d_v), per-head or fixed gate's dq
    /// and dk come from passes of the forward kernel (walk form, no initial state and no final-state gradient)
    /// this leaves out the gate's kernel; elsewhere the walks compute them anyway and they are dropped. Default false.
    pub skip_gate_gradients: bool,
    /// Whether dq and dk run as passes of the forward kernel (the walk form, no initial state, no final-state
    /// gradient; a per-key gate at d_k = d_v ≤ 128) instead of the dq / dk walks. Default: yes for per-head and
    /// fixed gates (Mamba-2 8×4096×16×128 on an H100: backward 2.63 → 1.33 ms); for per-key gates where
    /// `gla_codegen::per_key_passes_default` says so — bf16 at d = 64 and 128, where the passes (per-value kernels)
    /// win at every strength (H100, bf16 backward, walks / passes in one run: 8×4096×16×128 gla/16 2.85 / 2.13 ms,
    /// RWKV-6 3.73 / 3.54, log α = −60 3.52 / 3.26; 8×4096×32×64 2.51 / 2.29, 3.43 / 3.31, 3.18 / 3.06) — and their
    /// CTAs fill more than half the GPU (with fewer sequences × heads the walks' segments won: 2×16384×16×128
    /// RWKV-6 8.11 vs 12.92 ms; `gla_codegen::per_key_passes_default_at`).
    /// `Some(true)` takes them wherever they exist, `Some(false)` never; `None`: a tuning cache's pick where it
    /// chose (`autotune --backward`: by the worst gate strength), else the default above.
    pub dq_dk_passes: Option<bool>,
    /// The tiles of a per-key gate's dq / dk passes where they run (one of `gla_codegen::per_key_pass_tiles`, as
    /// the benchmark times them); default: a tuning cache's, else `KernelSpec::pass_default`'s. Tiles the pass
    /// has no kernel for are a typed error; other gates' passes (one kernel each) do not read it.
    pub dq_dk_pass_tiles: Option<gla_codegen::Tiles>,
}

/// What [`Gla::backward`] returns.
#[derive(Debug)]
pub struct Gradients {
    /// `[B, T, H, d_k]`, the dtype of q.
    pub dq: DeviceTensor,
    /// `[B, T, H, d_k]`.
    pub dk: DeviceTensor,
    /// `[B, T, H, d_v]`.
    pub dv: DeviceTensor,
    /// Like the logits (absent for a fixed gate, or with [`BackwardOptions::skip_gate_gradients`]).
    pub d_logits: Option<DeviceTensor>,
    /// f32 `[H, P]` when the gate has parameters: summed over every token and channel of each head.
    pub d_params: Option<DeviceTensor>,
    /// f32 `[N, H, d_k, d_v]` when an initial state was given.
    pub d_initial_state: Option<DeviceTensor>,
}

/// Whether dq and dk run as passes of the forward kernel, where the problem allows them (the dv pass ran, no h0, no
/// dht): as asked (`BackwardOptions::dq_dk_passes`), else as a tuning cache's pick chose, else by default — a scalar
/// gate's always, a per-key gate's (d_k = d_v) where `gla_codegen::per_key_passes_default_at` takes them at `rows` =
/// sequences × heads on `sms` multiprocessors (the passes walk whole sequences: with too few the walks' segments
/// win); other gates have none.
#[allow(clippy::too_many_arguments)]
pub(crate) fn dq_dk_by_passes(
    shape: GateShape,
    dtype: DType,
    dk: usize,
    dv: usize,
    asked: Option<bool>,
    picked: Option<bool>,
    rows: usize,
    sms: u32,
) -> bool {
    let choice = asked.or(picked);
    match shape {
        GateShape::PerHead | GateShape::Fixed => choice != Some(false),
        GateShape::PerKey if dk == dv => {
            choice.unwrap_or_else(|| gla_codegen::per_key_passes_default_at(dtype, dk, rows, sms))
        }
        _ => false,
    }
}

impl Gla {
    /// Gradients of the chunkwise forward ([`Gla::forward`] with the same gate, inputs and options) for the output
    /// gradient `d_o` (`[B, T, H, d_v]`, the dtype of v). Per-value gates have no backward kernels yet (a typed
    /// error says so). Errors as the forward's, and for a `d_o` or `d_final_state` of the wrong shape or dtype.
    #[allow(clippy::too_many_arguments)]
    pub fn backward(
        &self,
        gate: &'static dyn Gate,
        q: &DeviceTensor,
        k: &DeviceTensor,
        v: &DeviceTensor,
        logits: Option<&DeviceTensor>,
        params: Option<&DeviceTensor>,
        d_o: &DeviceTensor,
        opts: &BackwardOptions,
    ) -> Result<Gradients> {
        let p = validate_forward(
            gate,
            &ForwardRequest {
                q: TensorDesc::of(q),
                k: TensorDesc::of(k),
                v: TensorDesc::of(v),
                logits: logits.map(TensorDesc::of),
                params: params.map(TensorDesc::of),
                initial_state: opts.initial_state.map(TensorDesc::of),
                o: None,
                final_state: None,
                scale: opts.scale,
                output_final_state: false,
                cu_seqlens: opts.cu_seqlens,
                variant: None,
                segments: None,
            },
        )?;
        // The kernel set: the named form, else a tuning cache's pick for the call's bucket (its cubin: no NVRTC),
        // else the default form.
        let base = BackwardSpec::default_for(gate, p.dtype, p.dims.dk, p.dims.dv)?;
        let pick = match opts.form {
            Some(_) => None,
            None => {
                crate::tuned::call_shape(q.shape(), opts.cu_seqlens).and_then(|(rows, tokens)| {
                    self.inner
                        .tuned
                        .pick_backward(gate, p.dtype, p.dims.dk, p.dims.dv, rows, tokens)
                })
            }
        };
        let spec = match &pick {
            Some(pk) => pk.spec,
            None => match opts.form {
                Some(f) => base.with_form(f)?,
                None => base,
            },
        };
        check_tensor("d_o", d_o.shape(), d_o.dtype(), &p.o_shape(), p.dtype)?;
        if let Some(t) = opts.d_final_state {
            check_tensor(
                "d_final_state",
                t.shape(),
                t.dtype(),
                &p.state_shape(),
                DType::F32,
            )?;
        }
        let gpu = &self.inner.gpu;
        let (n, h, dk, dv) = (p.n_seqs(), p.dims.h, p.dims.dk, p.dims.dv);
        let chunk = spec.chunk();
        let meta = self.seq_meta(&p.seqs, chunk, true)?;
        let chunks = meta.total_chunks();

        // Outputs and the two workspaces (every element is written before it is read).
        let mut dq = DeviceTensor::empty(gpu, p.dtype, q.shape())?;
        let mut dkt = DeviceTensor::empty(gpu, p.dtype, k.shape())?;
        let mut dvt = DeviceTensor::empty(gpu, p.dtype, v.shape())?;
        // (the gate's gradients, which the walks take whether asked for or not — dropped at the end when skipped)
        let d_logits = logits
            .map(|l| DeviceTensor::empty(gpu, p.dtype, l.shape()))
            .transpose()?;
        let d_params = params
            .map(|t| DeviceTensor::zeros(gpu, DType::F32, t.shape()))
            .transpose()?;
        let d_h0 = opts
            .initial_state
            .map(|_| DeviceTensor::empty(gpu, DType::F32, &p.state_shape()))
            .transpose()?;
        let tokens = p.seqs.last().map_or(0, |&(s, l)| s + l);
        let per_seq: Vec<usize> = p
            .seqs
            .iter()
            .map(|&(_, l)| l.div_ceil(chunk as usize))
            .collect();
        let seg_chunks = match (
            spec.form,
            opts.walk_segment_chunks,
            pick.as_ref().and_then(|pk| pk.seg_chunks),
        ) {
            (BackwardForm::Chunks, _, _) => 0,
            (_, Some(k), _) | (_, None, Some(k)) => k,
            (_, None, None) => spec.walk_segment_chunks(
                per_seq.iter().copied().max().unwrap_or(0),
                n,
                h,
                dk,
                gpu.info().sm_count,
            ),
        };
        let (seg_offsets, seg_index) = gla_codegen::walk_segments(&per_seq, seg_chunks);
        // dv (walk form): the dv pass where it has kernels — the forward of the time-reversed problem, the
        // forward's producers and ring (`Pass::Dv`) — else the dv walk.
        let dv_pass = match spec.form {
            BackwardForm::Walks => {
                // (the pass starts from S' = dht / scale: a scale with a finite inverse)
                if p.scale.is_normal() && (1.0 / p.scale).is_finite() {
                    self.backward_pass(gate, p.dtype, Pass::Dv, dk, dv, q.shape(), opts.cu_seqlens)?
                } else {
                    None
                }
            }
            BackwardForm::Chunks => None,
        };
        if let Some(ds) = dv_pass {
            // dv = scale · (K̂ S' + Aᵀ dO) over the chunks last to first from S' = dht
            let inputs = [q, k, d_o];
            self.run_pass(
                gate,
                ds,
                inputs,
                logits,
                params,
                opts.d_final_state,
                &mut dvt,
                p.scale,
                opts.cu_seqlens,
                None,
            )?;
        }
        // A scalar or per-key gate's dq and dk as passes too, where the dv pass ran, without h0 or dht (whole sequences, even
        // where the walks would cut them into segments: a pass walks 512 chunks faster than the walks' segments): dq =
        // scale · S_t dO_t is the forward with q ← dO, k ← v, v ← k (`Pass::Dq`), dk the dv pass with v ← q
        // (`Pass::Dk`), straight into dq and dk; their stores take the gate's row sums Σ_d (q ⊙ dq − k ⊙ dk) from
        // the unrounded accumulators into the workspace where `gla_bwd_gate` reads them (`launch::RowSums`). Those
        // nearly cancel over the sequence, so the passes carry Sᵀ, Q̃ and K̂ as hi + lo halves
        // (`Features::split_operands`; with bf16 products d log α was 0.9–2.6e-2 off at T = 2048).
        // A per-key gate's the same way, as per-value kernels (`KernelSpec::shape`: the decay on dq's and dk's
        // columns), d_k = d_v: the dq pass's store leaves q ⊙ dq by key column, the dk pass's turns it into d log α_t
        // = Σ_{s≥t} (q ⊙ dq − k ⊙ dk)_s (reverse-summed in the store: the chunks come last to first) and the d logits
        // and d params of it (the gate's derivative at the store, the logits still in shared memory).
        let per_key = gate.shape() == GateShape::PerKey && dk == dv;
        let passes = if dv_pass.is_some()
            && opts.initial_state.is_none()
            && opts.d_final_state.is_none()
            && dq_dk_by_passes(
                gate.shape(),
                p.dtype,
                dk,
                dv,
                opts.dq_dk_passes,
                pick.as_ref().and_then(|pk| pk.dq_dk_passes),
                n * h,
                gpu.info().sm_count,
            ) {
            // (d_k and d_v swapped: q ← dO)
            let pass = |ps| match opts.dq_dk_pass_tiles.filter(|_| per_key) {
                Some(tiles) => {
                    let spec = KernelSpec::per_key_pass(gate, p.dtype, dk, tiles, ps)?;
                    self.compile_spec(&spec).map(|_| Some(spec))
                }
                None => self.backward_pass(gate, p.dtype, ps, dv, dk, q.shape(), opts.cu_seqlens),
            };
            match (pass(Pass::Dq)?, pass(Pass::Dk)?) {
                (Some(a), Some(b)) => Some((a, b)),
                _ => None,
            }
        } else {
            None
        };
        let [w0, w1] = spec
            .workspace_elems(tokens, n, chunks, seg_index.len() / 2, h, dk, dv)
            .and_then(|w| Some([w[0].checked_mul(4)?, w[1].checked_mul(4)?]))
            .ok_or_else(|| {
                GlaError::invalid("problem size", "the backward's workspaces overflow")
            })?;
        let states = launch::alloc_workspace(gpu, w0)?;
        let mut dstates = launch::alloc_workspace(gpu, w1)?;
        if let Some((dq_spec, dk_spec)) = passes {
            // Z = 0 (no dht) for gla_bwd_gate; the row sums follow the segments' Z, as the dk walk leaves them, and
            // the dq pass writes every one of them.
            let offset = 4 * (seg_index.len() / 2) * h * dk;
            gpu.stream()
                .memset_zeros(&mut dstates.slice_mut(..offset))
                .map_err(|e| GlaError::Cuda {
                    op: "cuMemsetD8Async",
                    msg: format!("{e:?}"),
                })?;
            // (q ← dO, k ← v, v ← k or q; the row sums' weights: q for dq, k for dk — the dk pass subtracts; a per-key
            // gate's dk pass also makes the d logits and d params, where they are asked for)
            let grads = per_key && !opts.skip_gate_gradients;
            for (ps, vin, w, out, last) in [
                (dq_spec, k, q, &mut dq, false),
                (dk_spec, q, k, &mut dkt, true),
            ] {
                let rows = launch::RowSums {
                    w,
                    out: &dstates,
                    offset,
                    dg: d_logits.as_ref().filter(|_| grads && last),
                    dparams: d_params.as_ref().filter(|_| grads && last),
                };
                self.run_pass(
                    gate,
                    ps,
                    [d_o, v, vin],
                    logits,
                    params,
                    None,
                    out,
                    p.scale,
                    opts.cu_seqlens,
                    Some(rows),
                )?;
            }
        }
        let buffers = launch::BwdBuffers {
            q,
            k,
            v,
            logits,
            params,
            h0: opts.initial_state,
            d_o,
            dht: opts.d_final_state,
            dq: &dq,
            dk: &dkt,
            dv: &dvt,
            // (the walks write the gate's gradients in any case; after the passes the gate kernel runs only if asked,
            // and a per-key gate's came from the dk pass)
            dg: d_logits
                .as_ref()
                .filter(|_| passes.is_none() || (!opts.skip_gate_gradients && !per_key)),
            dparams: d_params
                .as_ref()
                .filter(|_| passes.is_none() || (!opts.skip_gate_gradients && !per_key)),
            dh0: d_h0.as_ref(),
            states: &states,
            dstates: &dstates,
            seg_offsets: &seg_offsets,
            seg_index: &seg_index,
            seg_chunks,
            dv_by_pass: dv_pass.is_some(),
            dq_dk_by_pass: passes.is_some(),
        };
        // The kernel set's functions, found once per set: the pick's cubin (no NVRTC), a loaded one, or a compile.
        let key = (spec.id(), gate.content_hash());
        let cached = lock(&self.inner.backward_sets).get(&key).cloned();
        let funcs = match cached {
            Some(f) => f,
            None => {
                let cubin = pick.as_ref().map(|pk| pk.cubin.as_slice());
                let f = Arc::new(launch::backward_functions(
                    gpu,
                    &spec,
                    &self.inner.options,
                    cubin,
                )?);
                lock(&self.inner.backward_sets)
                    .entry(key)
                    .or_insert(f)
                    .clone()
            }
        };
        let _serial = lock(&self.inner.workspace); // (as the forward: one call's launches at a time per Gla)
        launch::launch_backward_set(
            gpu,
            &spec,
            &funcs,
            &meta,
            p.dims,
            gate.params().len(),
            p.scale,
            &buffers,
        )?;
        let (d_logits, d_params) = if opts.skip_gate_gradients {
            (None, None)
        } else {
            (d_logits, d_params)
        };
        Ok(Gradients {
            dq,
            dk: dkt,
            dv: dvt,
            d_logits,
            d_params,
            d_initial_state: d_h0,
        })
    }

    /// A backward pass made of a forward variant (`Pass::Dv`, `Pass::Dq`, `Pass::Dk`) whose kernel has head dims
    /// `kdk` × `kdv`, loaded for a call with q of shape `q_shape`: a tuning cache's (its key pass, its cubin: no
    /// NVRTC), else the default forward variant of those dims made that pass, compiled. None: no such kernel for the
    /// gate, or no NVRTC to build it (the backward then runs the walk it replaces).
    #[allow(clippy::too_many_arguments)]
    fn backward_pass(
        &self,
        gate: &'static dyn Gate,
        dtype: DType,
        pass: Pass,
        kdk: usize,
        kdv: usize,
        q_shape: &[usize],
        cu_seqlens: Option<&[usize]>,
    ) -> Result<Option<KernelSpec>> {
        let cached = crate::tuned::call_shape(q_shape, cu_seqlens).and_then(|(rows, tokens)| {
            self.inner
                .tuned
                .pick_backward_pass(gate, dtype, kdk, kdv, pass, rows, tokens)
        });
        if let Some(pk) = cached {
            match self.load_cubin(&pk.spec, &pk.cubin) {
                Ok(_) => return Ok(Some(pk.spec)),
                // A cubin the driver refuses: as the forward, warned once, then the default's pass.
                Err(e) => self.inner.tuned.warn_once(
                    &format!("load:{}", pk.spec.id()),
                    &format!(
                        "gla: tuning cache {}: {} not loaded ({e}); the default pass runs",
                        pk.cache.display(),
                        pk.spec.id()
                    ),
                ),
            }
        }
        let Ok(spec) = KernelSpec::pass_default(gate, dtype, kdk, kdv, pass) else {
            return Ok(None);
        };
        match self.compile_spec(&spec) {
            Ok(_) => Ok(Some(spec)),
            Err(GlaError::NoNvrtc(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Run the pass `spec` (`Pass::Dv` / `Dq` / `Dk`) on `inputs` in the forward's roles (q, k, v) from the state
    /// `h0` into `out` (f32 for dq / dk): validated as the forward of those inputs on its forward variant, then the
    /// pass's kernel, never segmented.
    #[allow(clippy::too_many_arguments)]
    fn run_pass(
        &self,
        gate: &'static dyn Gate,
        spec: KernelSpec,
        inputs: [&DeviceTensor; 3],
        logits: Option<&DeviceTensor>,
        params: Option<&DeviceTensor>,
        h0: Option<&DeviceTensor>,
        out: &mut DeviceTensor,
        scale: f32,
        cu_seqlens: Option<&[usize]>,
        row_sums: Option<launch::RowSums<'_>>,
    ) -> Result<()> {
        let [q, k, v] = inputs;
        let mut fp = validate_forward(
            gate,
            &ForwardRequest {
                q: TensorDesc::of(q),
                k: TensorDesc::of(k),
                v: TensorDesc::of(v),
                logits: logits.map(TensorDesc::of),
                params: params.map(TensorDesc::of),
                initial_state: h0.map(TensorDesc::of),
                o: None,
                final_state: None,
                scale: Some(scale),
                output_final_state: false,
                cu_seqlens,
                variant: Some(spec.with_pass(Pass::Forward)?),
                segments: Some(1),
            },
        )?;
        fp.spec = spec;
        self.run(&fp, q, k, v, logits, params, h0, out, None, row_sums)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dq_dk_passes_as_asked_else_as_picked_else_by_default() {
        let (bf, f16, pk) = (DType::BF16, DType::F16, GateShape::PerKey);
        // (shape, dtype, d_k, d_v, asked, picked, rows, want) on 132 SMs
        let cases = [
            // Per key, by default: bf16 at d = 64, 128 where the passes' CTAs fill more than half the GPU (8×16
            // rows: yes; 2×16: no).
            (pk, bf, 128, 128, None, None, 128, true),
            (pk, bf, 64, 64, None, None, 128, true),
            (pk, bf, 128, 128, None, None, 32, false),
            (pk, f16, 128, 128, None, None, 512, false),
            // A cache's pick over the default, the caller's ask over both.
            (pk, bf, 128, 128, None, Some(true), 32, true),
            (pk, bf, 128, 128, None, Some(false), 128, false),
            (pk, bf, 128, 128, Some(false), Some(true), 128, false),
            (pk, bf, 128, 128, Some(true), Some(false), 32, true),
            // Per key with d_k ≠ d_v, per value: never.
            (pk, bf, 128, 64, Some(true), None, 128, false),
            (
                GateShape::PerValue,
                bf,
                128,
                128,
                Some(true),
                None,
                128,
                false,
            ),
            // Scalar gates: always, unless asked (or picked) not to.
            (GateShape::PerHead, bf, 128, 128, None, None, 2, true),
            (GateShape::Fixed, bf, 128, 128, None, None, 2, true),
            (
                GateShape::PerHead,
                bf,
                128,
                128,
                Some(false),
                None,
                512,
                false,
            ),
            (
                GateShape::Fixed,
                bf,
                128,
                128,
                None,
                Some(false),
                512,
                false,
            ),
        ];
        for (shape, dt, dk, dv, asked, picked, rows, want) in cases {
            let got = dq_dk_by_passes(shape, dt, dk, dv, asked, picked, rows, 132);
            assert_eq!(
                got, want,
                "{shape:?} {dt} {dk}×{dv} asked {asked:?} picked {picked:?} {rows} rows"
            );
        }
    }
}
