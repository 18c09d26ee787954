//! Launching a generated variant: grid resolution, the per-problem sequence arrays, and the one `unsafe` launch.
//!
//! Soundness in one paragraph: a kernel launch is memory-safe when (a) the kernel is the one generated for the
//! variant, so its single parameter is the C mirror of [`ForwardArgs`]; (b) every pointer in the arguments is a
//! live allocation of the context, at least as large as the extents the kernel derives from the arguments and its
//! grid; (c) the allocations outlive the kernel. [`Variant`] guarantees (a) (private fields, built only from
//! `gla_codegen::generate`); [`Bound::new`] checks (b) from the tensors' own byte sizes, and the sequence arrays
//! it points the kernel at are built here from validated `(start, len)` pairs; (c) holds because every buffer is
//! allocated on, and freed stream-ordered on, the same stream the kernels run on. What no host code can check is
//! that the generated kernel stays inside the extents it is given: that is gla-codegen's contract, exercised by
//! the GPU tests (poisoned outputs, odd sizes).

use crate::device::{cuda_err, Gpu, LoadedModule};
use crate::ffi;
use crate::nvrtc::{CompileOptions, KernelResources};
use crate::tensor::DeviceTensor;
use cudarc::driver::{
    CudaFunction, CudaSlice, CudaStream, DevicePtr, DeviceRepr, DriverError, LaunchConfig,
    PushKernelArg,
};
use gla_codegen::{BackwardArgs, ForwardArgs, GridAxis, KernelSpec, LaunchPlan};
use gla_core::error::Result;
use gla_core::{DType, GateShape, GlaError};
use std::sync::Arc;

// The C struct `FwdArgs` is 12 pointers, 8 four-byte fields (128 bytes), 4 64-byte-aligned 128-byte tensor maps,
// 2 pointers and 6 explicit padding words: 704 bytes, 64-byte aligned, no implicit padding.
const _: () =
    assert!(std::mem::size_of::<ForwardArgs>() == 704 && std::mem::align_of::<ForwardArgs>() == 64);

/// [`ForwardArgs`] as a kernel parameter. A newtype because the orphan rule forbids implementing cudarc's
/// `DeviceRepr` for gla-codegen's type here.
#[repr(transparent)]
struct ArgsRepr(ForwardArgs);

// SAFETY: `ForwardArgs` is `#[repr(C)]`, `Copy`, made of u64/i32/f32 fields and u64 arrays with no padding (asserted above), and
// mirrors the emitted C `struct FwdArgs` field for field; `#[repr(transparent)]` gives `ArgsRepr` the same layout.
// Passed by value (`const __grid_constant__ FwdArgs`), its bytes are copied into the launch's parameter buffer.
#[allow(unsafe_code)]
unsafe impl DeviceRepr for ArgsRepr {}

/// Launch one forward kernel with `args` as its single by-value parameter.
///
/// # Safety
/// 1. `func` is an entry function of a module compiled from `gla_codegen::generate` output, declared
///    `extern "C" __global__ void f(const __grid_constant__ FwdArgs a)`, where `FwdArgs` mirrors [`ForwardArgs`].
/// 2. Every non-zero pointer in `args` is a live device allocation of `stream`'s context, at least as large as the
///    extents the kernel derives from `args` (shapes from `n_seqs`, `h`, `dk`, `dv`, the contents of
///    `cu_seqlens` / `chunk_offsets` / `chunk_index`) and from `cfg.grid_dim`; pointers the variant requires
///    (q, k, v, o, cu_seqlens, chunk_offsets; g unless the gate is fixed; states and chunk_index when the plan
///    materializes) are non-zero.
/// 3. The allocations stay alive until the kernel has finished: freed only stream-ordered on `stream` or after a
///    synchronisation.
/// 4. Outputs (`o`, `ht`, `states`) overlap no other buffer of `args`.
/// 5. `cfg.shared_mem_bytes` is at most what `func` may use (its `MAX_DYNAMIC_SHARED_SIZE_BYTES` attribute).
#[allow(unsafe_code)]
unsafe fn launch(
    stream: &CudaStream,
    func: &CudaFunction,
    cfg: LaunchConfig,
    args: &ForwardArgs,
) -> Result<(), DriverError> {
    let repr = ArgsRepr(*args);
    let mut b = stream.launch_builder(func);
    b.arg(&repr);
    // SAFETY: forwarded to the caller (points 1–5 above); `repr` outlives the call, which copies it.
    unsafe { b.launch(cfg) }.map(|_| ())
}

/// [`BackwardArgs`] as a kernel parameter (the orphan rule, as for [`ArgsRepr`]).
#[repr(transparent)]
struct BwdArgsRepr(BackwardArgs);

// The C struct `BwdArgs` is 24 pointers, 6 four-byte fields and 1 pointer: 224 bytes, 8-byte aligned, no implicit padding.
const _: () = assert!(
    std::mem::size_of::<BackwardArgs>() == 224 && std::mem::align_of::<BackwardArgs>() == 8
);

// SAFETY: `BackwardArgs` is `#[repr(C)]`, `Copy`, made of u64/i32/f32 fields with no padding (asserted above), and
// mirrors the emitted C `struct BwdArgs` field for field; `#[repr(transparent)]` gives `BwdArgsRepr` its layout.
#[allow(unsafe_code)]
unsafe impl DeviceRepr for BwdArgsRepr {}

/// Launch one backward kernel (`gla_codegen::BWD_KERNELS`) with `args` as its single by-value parameter.
///
/// # Safety
/// 1. `func` is an entry function of a module compiled from `gla_codegen::generate_backward` output, declared
///    `extern "C" __global__ void f(const __grid_constant__ BwdArgs a)`, where `BwdArgs` mirrors [`BackwardArgs`].
/// 2. Every non-zero pointer in `args` is a live device allocation of `stream`'s context, at least as large as the
///    extents the kernel derives from `args` (shapes from `n_seqs`, `h`, `d_k`, `d_v`, the contents of
///    `cu_seqlens` / `chunk_offsets` / `chunk_index`: the two workspaces hold `BackwardSpec::workspace_elems`) and from
///    `cfg.grid_dim`; q, k, v, d_o, dq, dk, dv, states, dstates and the sequence arrays are non-zero, g and dg are
///    non-zero unless the gate is fixed, params iff the gate has parameters.
/// 3. The allocations stay alive until the kernel has finished (freed only stream-ordered on `stream`).
/// 4. Outputs (dq, dk, dv, dg, dparams, dh0, states, dstates) overlap no other buffer of `args`.
/// 5. `cfg.shared_mem_bytes` is at most what `func` may use.
#[allow(unsafe_code)]
unsafe fn launch_backward(
    stream: &CudaStream,
    func: &CudaFunction,
    cfg: LaunchConfig,
    args: &BackwardArgs,
) -> Result<(), DriverError> {
    let repr = BwdArgsRepr(*args);
    let mut b = stream.launch_builder(func);
    b.arg(&repr);
    // SAFETY: forwarded to the caller (points 1–5 above); `repr` outlives the call, which copies it.
    unsafe { b.launch(cfg) }.map(|_| ())
}

/// [`gla_codegen::DecodeArgs`] as a kernel parameter (the orphan rule, as for [`ArgsRepr`]).
#[repr(transparent)]
struct DecArgsRepr(gla_codegen::DecodeArgs);

// The C struct `DecArgs` is 7 pointers and 6 four-byte fields: 80 bytes, 8-byte aligned, no implicit padding.
const _: () = assert!(
    std::mem::size_of::<gla_codegen::DecodeArgs>() == 80
        && std::mem::align_of::<gla_codegen::DecodeArgs>() == 8
);

// SAFETY: `DecodeArgs` is `#[repr(C)]`, `Copy`, made of u64/i32/f32 fields with no padding (asserted above), and
// mirrors the emitted C `struct DecArgs` field for field; `#[repr(transparent)]` gives `DecArgsRepr` its layout.
#[allow(unsafe_code)]
unsafe impl DeviceRepr for DecArgsRepr {}

/// The tensors of one decode step (`Gla::decode`), checked by [`launch_decode`] before the launch.
pub(crate) struct DecodeBuffers<'a> {
    pub q: &'a DeviceTensor,
    pub k: &'a DeviceTensor,
    pub v: &'a DeviceTensor,
    pub logits: Option<&'a DeviceTensor>,
    pub params: Option<&'a DeviceTensor>,
    pub state: &'a DeviceTensor,
    pub o: &'a DeviceTensor,
}

/// `gate`'s decode kernel in `dtype`: compiled from `gla_codegen::generate_decode` with `options` through the GPU's
/// module cache, or loaded from `prebuilt` (a tuning cache's cubin of that source); allowed the shared memory of any
/// head dim up to 512. `Gla::decode` keeps it, so that a step does not generate or hash the source again.
pub(crate) fn decode_function(
    gpu: &Gpu,
    gate: &dyn gla_core::Gate,
    dtype: DType,
    options: &CompileOptions,
    prebuilt: Option<&[u8]>,
) -> Result<CudaFunction> {
    let source = gla_codegen::generate_decode(gate, dtype)?;
    let module = match prebuilt {
        Some(cubin) => gpu.load_prebuilt(&source, cubin)?,
        None => gpu.load_source(gla_codegen::DECODE_KERNEL, &source, options)?,
    };
    let smem = gla_codegen::decode_smem_bytes(gla_codegen::MAX_HEAD_DIM);
    gpu.function(&module, gla_codegen::DECODE_KERNEL, smem)
}

/// Launch `gate`'s decode kernel `func` ([`decode_function`]) for `n` sequences, `h` heads, head dims `dk` × `dv`: every tensor of `b` is checked
/// against the extents the kernel derives from these first; stream-ordered on `gpu`'s stream.
#[allow(clippy::too_many_arguments)]
pub(crate) fn launch_decode(
    gpu: &Gpu,
    func: &CudaFunction,
    gate: &dyn gla_core::Gate,
    dtype: DType,
    (n, h, dk, dv): (usize, usize, usize, usize),
    scale: f32,
    b: &DecodeBuffers,
) -> Result<()> {
    if n == 0 || h == 0 {
        return Ok(());
    }
    let np = gate.params().len();
    let lw = gate.shape().logits_per_token(dk, dv);
    let opt = |what, t: Option<&DeviceTensor>, elems, dt| {
        t.map_or(Ok(0), |t| need(what, t, gpu, elems, dt))
    };
    if b.logits.is_some() != (lw > 0) || b.params.is_some() != (np > 0) {
        return Err(GlaError::invalid(
            "decode",
            "the logits go with every gate but a fixed one, the parameters with a gate that has some",
        ));
    }
    let args = gla_codegen::DecodeArgs {
        q: need("q", b.q, gpu, n * h * dk, dtype)?,
        k: need("k", b.k, gpu, n * h * dk, dtype)?,
        v: need("v", b.v, gpu, n * h * dv, dtype)?,
        g: opt("logits", b.logits, n * h * lw, dtype)?,
        params: opt("params", b.params, h * np, DType::F32)?,
        state: need("state", b.state, gpu, n * h * dk * dv, DType::F32)?,
        o: need("o", b.o, gpu, n * h * dv, dtype)?,
        n: n as i32,
        h: h as i32,
        d_k: dk as i32,
        d_v: dv as i32,
        scale,
        pad: 0,
    };
    let smem = gla_codegen::decode_smem_bytes(dk);
    let cfg = LaunchConfig {
        grid_dim: gla_codegen::decode_grid(n, h, dv),
        block_dim: (gla_codegen::DECODE_THREADS, 1, 1),
        shared_mem_bytes: smem,
    };
    let repr = DecArgsRepr(args);
    let stream = gpu.stream();
    let mut lb = stream.launch_builder(func);
    lb.arg(&repr);
    // SAFETY: (1) `func` comes from [`decode_function`] for this gate and dtype: `gla_decode` of
    // generate_decode(gate, dtype)'s module (compiled, or a cubin whose cache entry names that source's hash),
    // declared `extern "C" __global__ void gla_decode(const __grid_constant__ DecArgs a)` with `DecArgs` mirrored by
    // `DecodeArgs`; (2) every pointer is a tensor checked above to hold the extents the kernel derives from n, h,
    // d_k, d_v and the grid (logits / params present exactly where the kernel reads them); (3) the tensors are
    // borrowed for the call and freed only stream-ordered; (4) the outputs are `o`, a fresh allocation of
    // `Gla::decode`, and `state`, borrowed mutably there (so no input aliases it); (5) `decode_function` allowed the
    // largest `smem` any head dim up to 512 takes.
    #[allow(unsafe_code)]
    unsafe { lb.launch(cfg) }.map_err(|e| GlaError::Cuda {
        op: "cuLaunchKernel",
        msg: format!("gla_decode: {e:?}"),
    })?;
    Ok(())
}

/// The buffers of one backward call (`Gla::backward`), checked by [`launch_backward_set`] before any launch.
pub(crate) struct BwdBuffers<'a> {
    pub q: &'a DeviceTensor,
    pub k: &'a DeviceTensor,
    pub v: &'a DeviceTensor,
    pub logits: Option<&'a DeviceTensor>,
    pub params: Option<&'a DeviceTensor>,
    pub h0: Option<&'a DeviceTensor>,
    pub d_o: &'a DeviceTensor,
    pub dht: Option<&'a DeviceTensor>,
    pub dq: &'a DeviceTensor,
    pub dk: &'a DeviceTensor,
    pub dv: &'a DeviceTensor,
    pub dg: Option<&'a DeviceTensor>,
    pub dparams: Option<&'a DeviceTensor>,
    pub dh0: Option<&'a DeviceTensor>,
    pub states: &'a CudaSlice<u8>,
    pub dstates: &'a CudaSlice<u8>,
    /// The walk form's segments ([`gla_codegen::walk_segments`]) and chunks a segment (0: a sequence is one).
    pub seg_offsets: &'a [i64],
    pub seg_index: &'a [i32],
    pub seg_chunks: u32,
    /// dv comes from the dv pass (the time-reversed forward, `gla_codegen::Pass::Dv`) launched beside this set:
    /// the walk form's `gla_bwd_walk_dv` is not launched.
    pub dv_by_pass: bool,
    /// A scalar gate's dq and dk came from their passes (`Pass::Dq` / `Pass::Dk`, into `dq` / `dk`), which left the
    /// gate's row sums in `dstates` (`ForwardArgs::rs_out`, Z zeroed): the walks for dq and dk (and Γ, segments) are
    /// skipped; `gla_bwd_gate` runs only where the gate's gradients are asked for (`dg` / `dparams`).
    pub dq_dk_by_pass: bool,
}

/// The kernels of `spec`, in `spec.kernels()` order: from `prebuilt` (a tuning cache's or the tuner's cubin of
/// `generate_backward(spec)`), else compiled with `options` through the GPU's module cache. `Gla` keeps them per
/// kernel set, so that a call does not generate or hash the source again.
pub(crate) fn backward_functions(
    gpu: &Gpu,
    spec: &gla_codegen::BackwardSpec,
    options: &CompileOptions,
    prebuilt: Option<&[u8]>,
) -> Result<Vec<CudaFunction>> {
    let source = gla_codegen::generate_backward(spec)?;
    let kernels = spec.kernels();
    let module = match prebuilt {
        Some(cubin) => gpu.load_prebuilt(&source, cubin)?,
        None => gpu.load_source(kernels[kernels.len() - 1], &source, options)?,
    };
    kernels
        .iter()
        .map(|name| gpu.function(&module, name, spec.smem_bytes(name)))
        .collect()
}

/// Launch the backward kernels `funcs` of `spec` ([`backward_functions`]) for a validated problem: `dims`, the
/// sequences of `meta` (built for `spec.chunk()` with the chunk index), `gate_params` parameters a head. Every
/// buffer's size is checked against the extents the kernels derive from these first (point 2 of
/// [`launch_backward`]); the launches are stream-ordered on `gpu`'s stream.
#[allow(clippy::too_many_arguments)]
pub(crate) fn launch_backward_set(
    gpu: &Gpu,
    spec: &gla_codegen::BackwardSpec,
    funcs: &[CudaFunction],
    meta: &SeqMeta,
    dims: gla_core::Dims,
    gate_params: usize,
    scale: f32,
    b: &BwdBuffers,
) -> Result<()> {
    let (n, h, dk, dv) = (meta.seqs().len(), dims.h, dims.dk, dims.dv);
    let tokens = meta.seqs().last().map_or(0, |&(s, l)| s + l);
    let chunks = meta.total_chunks();
    if meta.chunk() != spec.chunk() || !meta.has_index() {
        return Err(GlaError::invalid(
            "backward",
            "sequence arrays or kernels built for another plan",
        ));
    }
    if spec.dk < dk as u32
        || spec.dv < dv as u32
        || h > 65535
        || n > 65535
        || chunks > i32::MAX as usize
    {
        return Err(GlaError::invalid("backward", format!("{}: dims {dk} x {dv}, H = {h}, N = {n}, {chunks} chunks exceed its kernels or grid", spec.id())));
    }
    // Every tensor on this GPU, of its dtype and element count ([`need`], as the forward's buffers).
    let dt = spec.dtype;
    let (qk, vv, st) = (tokens * h * dk, tokens * h * dv, n * h * dk * dv);
    let logit_elems = spec.gate.shape().logits_per_token(dk, dv) * tokens * h;
    let opt = |what, t: Option<&DeviceTensor>, elems, dtype| {
        t.map_or(Ok(0), |t| need(what, t, gpu, elems, dtype))
    };
    // (the gate's gradients may be left out where dq / dk passes run: no gate kernel then)
    let gate_grads_out = !b.dq_dk_by_pass || b.dg.is_some() || b.dparams.is_some();
    if (gate_grads_out && b.logits.is_some() != b.dg.is_some())
        || b.logits.is_some() != (logit_elems > 0)
    {
        return Err(GlaError::invalid(
            "logits",
            "the logits and their gradient go together (none for a fixed gate)",
        ));
    }
    if (gate_grads_out && b.params.is_some() != b.dparams.is_some())
        || b.params.is_some() != (gate_params > 0)
    {
        return Err(GlaError::invalid(
            "params",
            "the gate's parameters and their gradient go together",
        ));
    }
    let segments = b.seg_index.len() / 2;
    let seg_ok = b.seg_offsets.len() == n + 1
        && b.seg_offsets.last() == Some(&(segments as i64))
        && (spec.form == gla_codegen::BackwardForm::Walks || segments == n)
        && b.seg_offsets.windows(2).all(|w| w[1] > w[0])
        && b.seg_index.chunks(2).enumerate().all(|(g, p)| {
            let n_of = p[0] as usize;
            n_of < n
                && b.seg_offsets[n_of] + p[1] as i64 == g as i64
                && (b.seg_chunks as usize * p[1] as usize)
                    < meta.seqs()[n_of].1.div_ceil(spec.chunk() as usize).max(1)
        })
        && (b.seg_chunks > 0 || segments == n)
        && b.seg_offsets.first() == Some(&0)
        // (every chunk of a sequence in one of its segments)
        && (b.seg_chunks == 0
            || (0..n).all(|i| {
                let segs = (b.seg_offsets[i + 1] - b.seg_offsets[i]) as usize;
                segs * b.seg_chunks as usize >= meta.seqs()[i].1.div_ceil(spec.chunk() as usize)
            }));
    if !seg_ok || segments > 65535 {
        return Err(GlaError::invalid(
            "backward segments",
            "segment arrays that do not cover the sequences (gla_codegen::walk_segments builds them)",
        ));
    }
    let [w0, w1] = spec
        .workspace_elems(tokens, n, chunks, segments, h, dk, dv)
        .ok_or_else(|| GlaError::invalid("problem size", "the backward's workspaces overflow"))?;
    let [s0, s1, s2] = spec.segment_elems(n, segments, h, dk, dv).ok_or_else(|| {
        GlaError::invalid("problem size", "the backward's segment workspaces overflow")
    })?;
    for (what, ws, elems) in [
        ("backward workspace 0", b.states, w0),
        ("backward workspace 1", b.dstates, w1),
    ] {
        if ws.len() < elems * 4 {
            return Err(GlaError::invalid(
                what,
                format!(
                    "{} B, the backward kernels of {} need {} B",
                    ws.len(),
                    spec.id(),
                    elems * 4
                ),
            ));
        }
    }
    let kernels = spec.kernels();
    if funcs.len() != kernels.len() {
        return Err(GlaError::invalid(
            "backward",
            "kernels of another kernel set",
        ));
    }
    let stream = gpu.stream();
    let (cu, co, ci) = meta.ptrs(stream);
    // The segments' arrays and workspaces (every element written by the first pass before it is read).
    let le = |v: &[i64]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let seg_offsets = upload_bytes(gpu, le(b.seg_offsets))?;
    let seg_index = upload_bytes(
        gpu,
        b.seg_index.iter().flat_map(|x| x.to_le_bytes()).collect(),
    )?;
    let seg_ws = [s0, s1, s2]
        .iter()
        .map(|&e| (e > 0).then(|| alloc_workspace(gpu, e * 4)).transpose())
        .collect::<Result<Vec<_>>>()?;
    let ptr = |w: &Option<CudaSlice<u8>>| w.as_ref().map_or(0, |w| w.device_ptr(stream).0);
    let args = BackwardArgs {
        q: need("q", b.q, gpu, qk, dt)?,
        k: need("k", b.k, gpu, qk, dt)?,
        v: need("v", b.v, gpu, vv, dt)?,
        g: opt("logits", b.logits, logit_elems, dt)?,
        params: opt("params", b.params, h * gate_params, DType::F32)?,
        h0: opt("initial_state", b.h0, st, DType::F32)?,
        d_o: need("d_o", b.d_o, gpu, vv, dt)?,
        dht: opt("d_final_state", b.dht, st, DType::F32)?,
        dq: need("dq", b.dq, gpu, qk, dt)?,
        dk: need("dk", b.dk, gpu, qk, dt)?,
        dv: need("dv", b.dv, gpu, vv, dt)?,
        dg: opt("d_logits", b.dg, logit_elems, dt)?,
        dparams: opt("d_params", b.dparams, h * gate_params, DType::F32)?,
        dh0: opt("d_initial_state", b.dh0, st, DType::F32)?,
        states: b.states.device_ptr(stream).0,
        dstates: b.dstates.device_ptr(stream).0,
        cu_seqlens: cu,
        chunk_offsets: co,
        chunk_index: ci,
        seg_states: ptr(&seg_ws[0]),
        seg_dstates: ptr(&seg_ws[1]),
        seg_gamma: ptr(&seg_ws[2]),
        seg_offsets: seg_offsets.device_ptr(stream).0,
        seg_index: seg_index.device_ptr(stream).0,
        n_seqs: n as i32,
        h: h as i32,
        d_k: dk as i32,
        d_v: dv as i32,
        scale,
        seg_chunks: b.seg_chunks as i32,
        // Γ after q ⊙ dq in workspace 0 (its size, checked above, includes it: workspace_elems)
        gamma: spec
            .gamma_offset(tokens, h, dk)
            .map_or(0, |off| b.states.device_ptr(stream).0 + 4 * off as u64),
    };
    if b.dq_dk_by_pass
        && (spec.gate.shape() == GateShape::PerValue
            || !b.dv_by_pass
            || b.dht.is_some()
            || b.h0.is_some())
    {
        return Err(GlaError::invalid(
            "backward",
            "dq / dk passes are for per-key and scalar gates with the dv pass, no initial state and no final-state gradient",
        ));
    }
    for ((name, func), grid) in kernels.iter().zip(funcs).zip(gla_codegen::backward_grids(
        spec, dk, dv, h, n, chunks, segments,
    )) {
        if grid.0 == 0 || grid.1 == 0 || grid.2 == 0 {
            continue; // nothing to do (no chunk at all)
        }
        if b.dv_by_pass && *name == "gla_bwd_walk_dv" {
            continue; // (dv from the dv pass)
        }
        let walked_by_passes = matches!(
            *name,
            "gla_bwd_gamma"
                | "gla_bwd_seg_states"
                | "gla_bwd_seg_dstates"
                | "gla_bwd_seg_combine"
                | "gla_bwd_walk_dq"
                | "gla_bwd_walk_dk"
        );
        // (after the passes the gate's kernel runs only where its gradients are asked for)
        let gate_skipped = *name == "gla_bwd_gate" && !gate_grads_out;
        if (b.dq_dk_by_pass && walked_by_passes) || gate_skipped {
            continue; // (dq, dk from their passes)
        }
        let cfg = LaunchConfig {
            grid_dim: grid,
            block_dim: (gla_codegen::BWD_THREADS, 1, 1),
            shared_mem_bytes: spec.smem_bytes(name),
        };
        // SAFETY: (1) `funcs` come from `backward_functions(spec)`: generate_backward(spec)'s module (the caller
        // keeps them per spec; their count is checked above); (2) every pointer
        // is a tensor or workspace checked above to hold the extents the kernels derive from `args` and the grid
        // (the sequence arrays are `meta`'s, built for this chunk size with the index); (3) all are freed only
        // stream-ordered on this stream; (4) the outputs are the caller's fresh allocations (`BwdBuffers`
        // borrows them apart from the inputs); (5) `gpu.function` allowed `spec.smem_bytes(name)` on each.
        #[allow(unsafe_code)]
        unsafe { launch_backward(stream, func, cfg, &args) }.map_err(|e| GlaError::Cuda {
            op: "cuLaunchKernel",
            msg: format!("{name}: {e:?}"),
        })?;
    }
    Ok(())
}

/// Problem sizes the grid axes are resolved from.
#[derive(Clone, Copy, Debug)]
pub struct GridSizes<'a> {
    pub h: usize,
    pub dv: usize,
    /// Length of each sequence, in tokens.
    pub seq_lens: &'a [usize],
    /// Segments per sequence `S` of a segmented plan, the lead included (`gla_codegen::total_segments`), else 1.
    pub segs: usize,
}

/// `Σ ceil(len / chunk)` over the sequences.
pub fn total_chunks(seq_lens: &[usize], chunk: u32) -> usize {
    seq_lens.iter().map(|&l| l.div_ceil(chunk as usize)).sum()
}

/// The size of one grid axis: `VTiles{bv}` → ceil(d_v / bv), `Heads` → H, `Sequences` → N, `Chunks{C}` → total
/// chunks.
pub fn resolve_axis(axis: GridAxis, s: &GridSizes) -> usize {
    match axis {
        GridAxis::VTiles { block_v } => s.dv.div_ceil(block_v as usize),
        GridAxis::Heads => s.h,
        GridAxis::Sequences => s.seq_lens.len(),
        GridAxis::Chunks { chunk } => total_chunks(s.seq_lens, chunk),
        GridAxis::SeqSegments => s.seq_lens.len() * if s.segs > 1 { s.segs - 1 } else { 1 },
        GridAxis::SplitSeqSegments => {
            if s.segs > 1 {
                s.seq_lens.len() * (s.segs - 1)
            } else {
                0
            }
        }
        GridAxis::SplitSequences => {
            if s.segs > 1 {
                s.seq_lens.len()
            } else {
                0
            }
        }
        GridAxis::HeadBlocks { blocks } => s.h * blocks as usize,
        GridAxis::KeySplitSum {
            key_split,
            per_block,
        } => {
            let tokens: usize = s.seq_lens.iter().sum();
            (tokens * (s.h / key_split.max(1) as usize) * s.dv).div_ceil(per_block.max(1) as usize)
        }
        GridAxis::One => 1,
    }
}

/// Segments `S` a sequence for `variant`'s plan on a problem (the lead included): 1 for plans that do not segment;
/// else `requested` (at most 64) or, by default, `gla_codegen::total_segments` of `gla_codegen::segments`.
pub fn plan_segments(
    plan: &LaunchPlan,
    spec: &KernelSpec,
    seq_lens: &[usize],
    h: usize,
    dv: usize,
    requested: Option<usize>,
) -> usize {
    if !plan.segmented {
        return 1;
    }
    match requested {
        Some(s) => s.clamp(1, 64),
        None => {
            let max_chunks = seq_lens
                .iter()
                .map(|l| l.div_ceil(spec.chunk as usize))
                .max()
                .unwrap_or(0);
            let wave = gla_codegen::WAVE_CTAS * spec.tiles.ctas_per_sm as usize;
            gla_codegen::total_segments(gla_codegen::segments_on(
                wave,
                seq_lens.len(),
                h,
                dv.div_ceil(spec.tiles.block_v as usize),
                max_chunks,
            ))
        }
    }
}

/// Device limits on grid dimensions (x, y, z).
pub const MAX_GRID: [usize; 3] = [i32::MAX as usize, 65535, 65535];

/// Resolve a kernel's grid. A zero-sized axis is allowed (the launch is then skipped); an axis over the device
/// limit is an error naming the axis.
pub fn resolve_grid(kernel: &str, grid: &[GridAxis; 3], s: &GridSizes) -> Result<(u32, u32, u32)> {
    let mut g = [0u32; 3];
    for (i, axis) in grid.iter().enumerate() {
        let n = resolve_axis(*axis, s);
        if n > MAX_GRID[i] {
            return Err(GlaError::invalid(
                "problem size",
                format!(
                    "kernel `{kernel}` would need {n} blocks along grid axis {} ({axis:?}), over the limit of {}",
                    ["x", "y", "z"][i],
                    MAX_GRID[i]
                ),
            ));
        }
        g[i] = n as u32;
    }
    Ok((g[0], g[1], g[2]))
}

/// The host side of the sequence arrays of [`ForwardArgs`]: `cu_seqlens` (i64[N+1] token offsets),
/// `chunk_offsets` (i64[N+1], Σ_{m<n} ceil(len_m / C)) and `chunk_index` (i32[2·chunks], (sequence,
/// chunk-in-sequence) of each global chunk). `seqs` are `(start, len)` pairs, contiguous and in order.
pub fn seq_arrays(seqs: &[(usize, usize)], chunk: u32) -> (Vec<i64>, Vec<i64>, Vec<i32>) {
    let mut cu = Vec::with_capacity(seqs.len() + 1);
    let mut co = Vec::with_capacity(seqs.len() + 1);
    let mut idx = Vec::new();
    let mut chunks = 0i64;
    for (n, &(start, len)) in seqs.iter().enumerate() {
        cu.push(start as i64);
        co.push(chunks);
        let nc = len.div_ceil(chunk as usize);
        for c in 0..nc {
            idx.push(n as i32);
            idx.push(c as i32);
        }
        chunks += nc as i64;
    }
    cu.push(seqs.last().map_or(0, |&(s, l)| (s + l) as i64));
    co.push(chunks);
    (cu, co, idx)
}

fn upload_bytes(gpu: &Gpu, bytes: Vec<u8>) -> Result<CudaSlice<u8>> {
    // Never allocate 0 bytes (an empty chunk_index): pad to 8.
    let mut bytes = bytes;
    if bytes.is_empty() {
        bytes.resize(8, 0);
    }
    gpu.stream()
        .clone_htod(&bytes)
        .map_err(cuda_err("cuMemcpyHtoD"))
}

/// The sequence arrays of one problem on the device (immutable once built).
pub struct SeqMeta {
    seqs: Vec<(usize, usize)>,
    chunk: u32,
    total_chunks: usize,
    cu_seqlens: CudaSlice<u8>,
    chunk_offsets: CudaSlice<u8>,
    chunk_index: Option<CudaSlice<u8>>,
}

impl SeqMeta {
    /// Build and upload the arrays for validated sequences `seqs` (contiguous `(start, len)` pairs) and chunk size.
    pub fn new(gpu: &Gpu, seqs: &[(usize, usize)], chunk: u32, with_index: bool) -> Result<Self> {
        if let Some(w) = seqs.windows(2).find(|w| w[0].0 + w[0].1 != w[1].0) {
            return Err(GlaError::invalid(
                "sequences",
                format!("not contiguous: {:?} then {:?}", w[0], w[1]),
            ));
        }
        let (cu, co, idx) = seq_arrays(seqs, chunk);
        let le8 = |v: &[i64]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        Ok(SeqMeta {
            seqs: seqs.to_vec(),
            chunk,
            total_chunks: idx.len() / 2,
            cu_seqlens: upload_bytes(gpu, le8(&cu))?,
            chunk_offsets: upload_bytes(gpu, le8(&co))?,
            chunk_index: if with_index {
                Some(upload_bytes(
                    gpu,
                    idx.iter().flat_map(|x| x.to_le_bytes()).collect(),
                )?)
            } else {
                None
            },
        })
    }
    pub fn seqs(&self) -> &[(usize, usize)] {
        &self.seqs
    }
    pub fn chunk(&self) -> u32 {
        self.chunk
    }
    pub fn total_chunks(&self) -> usize {
        self.total_chunks
    }
    pub fn has_index(&self) -> bool {
        self.chunk_index.is_some()
    }
    /// Device addresses of `cu_seqlens`, `chunk_offsets` and `chunk_index` (0 when built without it).
    pub(crate) fn ptrs(&self, stream: &CudaStream) -> (u64, u64, u64) {
        (
            self.cu_seqlens.device_ptr(stream).0,
            self.chunk_offsets.device_ptr(stream).0,
            self.chunk_index
                .as_ref()
                .map_or(0, |c| c.device_ptr(stream).0),
        )
    }
}

/// A compiled, loaded variant: its spec, launch plan, module and one function per plan kernel.
pub struct Variant {
    spec: KernelSpec,
    plan: LaunchPlan,
    module: Arc<LoadedModule>,
    functions: Vec<CudaFunction>,
    /// One per plan kernel, in plan order.
    resources: Vec<KernelResources>,
    resources_from_log: bool,
}

impl std::fmt::Debug for Variant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Variant")
            .field("spec", &self.spec.id())
            .field("plan", &self.plan)
            .finish_non_exhaustive()
    }
}

impl Variant {
    /// Generate (`gla_codegen::generate`), compile (sm_90a cubin, module cache), load, and prepare each kernel of
    /// the plan (dynamic shared memory opt-in).
    pub fn load(gpu: &Gpu, spec: &KernelSpec, opts: &CompileOptions) -> Result<Variant> {
        let generated = gla_codegen::generate(spec)?;
        let module = gpu.load_source(&spec.id(), &generated.source, opts)?;
        Self::prepare(gpu, spec, generated.plan, module)
    }

    /// The variant from a cubin built ahead of time (a tuning cache's entry for `spec`): generated for its plan,
    /// loaded with no NVRTC.
    pub fn from_cubin(gpu: &Gpu, spec: &KernelSpec, cubin: &[u8]) -> Result<Variant> {
        let generated = gla_codegen::generate(spec)?;
        let module = gpu.load_prebuilt(&generated.source, cubin)?;
        Self::prepare(gpu, spec, generated.plan, module)
    }

    /// Look up each kernel of the plan in the loaded module (dynamic shared memory opt-in) and its resources.
    fn prepare(
        gpu: &Gpu,
        spec: &KernelSpec,
        plan: LaunchPlan,
        module: Arc<crate::device::LoadedModule>,
    ) -> Result<Variant> {
        let functions = plan
            .kernels
            .iter()
            .map(|k| {
                if k.block == 0 || k.block > 1024 {
                    return Err(GlaError::Unsupported {
                        variant: spec.id(),
                        msg: format!("kernel `{}` has block size {}", k.name, k.block),
                    });
                }
                gpu.function(&module, &k.name, k.smem_bytes)
            })
            .collect::<Result<Vec<_>>>()?;
        let from_log = plan
            .kernels
            .iter()
            .all(|k| module.resources.iter().any(|r| r.name == k.name));
        let resources = if from_log {
            plan.kernels
                .iter()
                .filter_map(|k| module.resources.iter().find(|r| r.name == k.name).cloned())
                .collect()
        } else {
            plan.kernels
                .iter()
                .zip(&functions)
                .map(|(k, f)| crate::device::function_resources(&k.name, f))
                .collect::<Result<Vec<_>>>()?
        };
        Ok(Variant {
            spec: *spec,
            plan,
            module,
            functions,
            resources,
            resources_from_log: from_log,
        })
    }
    pub fn spec(&self) -> &KernelSpec {
        &self.spec
    }
    pub fn plan(&self) -> &LaunchPlan {
        &self.plan
    }
    /// Resources of each kernel of the plan, in plan order: ptxas's report, or (when the cubin came from the
    /// driver's compute cache and the log is empty) the driver's function attributes, without spill sizes.
    pub fn resources(&self) -> &[KernelResources] {
        &self.resources
    }
    /// Whether [`Variant::resources`] come from ptxas's report (with spill sizes).
    pub fn resources_from_log(&self) -> bool {
        self.resources_from_log
    }
    /// NVRTC's log.
    pub fn log(&self) -> &str {
        &self.module.log
    }
    pub fn compile_ms(&self) -> f64 {
        self.module.compile_ms
    }
    /// Key of the module in the [`Gpu`]'s cache (hash of source and options).
    pub fn source_key(&self) -> u64 {
        self.module.key
    }
}

/// The buffers of one forward call.
pub struct Buffers<'a> {
    pub q: &'a DeviceTensor,
    pub k: &'a DeviceTensor,
    pub v: &'a DeviceTensor,
    pub g: Option<&'a DeviceTensor>,
    pub params: Option<&'a DeviceTensor>,
    pub h0: Option<&'a DeviceTensor>,
    pub ht: Option<&'a mut DeviceTensor>,
    pub o: &'a mut DeviceTensor,
    /// Chunk-state workspace (at least `total_chunks·H·d_k·d_v·4` bytes) when the plan materializes; the segment
    /// workspace (`gla_codegen::segment_workspace_bytes`) when a segmented plan splits the problem (`P > 1`).
    pub states: Option<&'a mut CudaSlice<u8>>,
    pub meta: &'a SeqMeta,
    /// The backward's dq / dk passes (`Pass::row_sums`): where their stores put the gate's row sums.
    pub row_sums: Option<RowSums<'a>>,
}

/// Where a dq / dk pass's store takes the gate's row sums (`ForwardArgs::rs_w`, `rs_out`).
pub struct RowSums<'a> {
    /// The original q (dq pass) or k (dk pass): `[B, T, H, d_v]` of the pass (its o's shape), the inputs' dtype.
    pub w: &'a DeviceTensor,
    /// A workspace holding f32 `[⌈d_v / 64⌉, tokens, H]` at byte `offset` (the backward's, where `gla_bwd_gate`
    /// reads them); a per-key gate's passes: `[tokens, H, d_v]`, q ⊙ dq by key column (`KernelSpec::row_sum_elems`).
    pub out: &'a CudaSlice<u8>,
    pub offset: usize,
    /// A per-key gate's dk pass: its d logits (`[B, T, H, d_v]` of the pass, the inputs' dtype) and d params (f32
    /// `[H, P]`, added to), which its store makes; None where the gate's gradients are not asked for.
    pub dg: Option<&'a DeviceTensor>,
    pub dparams: Option<&'a DeviceTensor>,
}

/// Launch arguments checked against the variant and the buffers; borrows the buffers while it lives.
pub struct Bound<'a> {
    args: ForwardArgs,
    grids: Vec<(u32, u32, u32)>,
    stream: &'a Arc<CudaStream>,
}

/// The product of `dims`, or an error if it overflows (a wrapped product could pass a size check).
fn prod(dims: &[usize]) -> Result<usize> {
    dims.iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .ok_or_else(|| GlaError::invalid("problem size", format!("{dims:?} overflows usize")))
}

fn need(
    what: &'static str,
    t: &DeviceTensor,
    gpu: &Gpu,
    elems: usize,
    dtype: DType,
) -> Result<u64> {
    if !t.is_on(gpu) {
        return Err(GlaError::invalid(
            what,
            "lives on another device/context than this Gla",
        ));
    }
    if t.dtype() != dtype {
        return Err(GlaError::DType {
            what,
            expected: dtype.to_string(),
            got: t.dtype().to_string(),
        });
    }
    if t.len() != elems {
        return Err(GlaError::shape(
            what,
            format!("{elems} elements"),
            t.shape(),
        ));
    }
    Ok(t.device_ptr())
}

impl<'a> Bound<'a> {
    /// Check every buffer against the variant and the problem (`n_seqs` from `meta`, `h`, `dk`, `dv`), build the
    /// argument struct and resolve the grids. This is the check that makes [`launch_plan`] sound.
    #[allow(clippy::too_many_arguments)]
    /// `segs`: segments per sequence ([`plan_segments`]; 1 for plans that do not segment).
    /// With a key split (`spec.key_split = s > 1`), `h` and `dk` are the kernels' view — `s · H` heads of `d_k / s`
    /// key columns — and v, o and the gate parameters are checked against the real `H = h / s`.
    pub fn new(
        gpu: &'a Gpu,
        variant: &Variant,
        b: Buffers<'a>,
        h: usize,
        dk: usize,
        dv: usize,
        scale: f32,
        segs: usize,
    ) -> Result<Bound<'a>> {
        let spec = &variant.spec;
        let meta = b.meta;
        let ks = spec.key_split.max(1) as usize;
        if dk == 0
            || dv == 0
            || h == 0
            || dk > spec.dk as usize
            || dv > spec.dv as usize
            || !h.is_multiple_of(ks)
        {
            return Err(GlaError::invalid(
                "dims",
                format!(
                    "H = {h}, d_k = {dk}, d_v = {dv} do not fit variant {}",
                    spec.id()
                ),
            ));
        }
        let hv = h / ks;
        let parts = variant.plan.workspace_partials.max(1) as usize;
        if meta.chunk != spec.chunk {
            return Err(GlaError::invalid(
                "sequence arrays",
                format!(
                    "built for C = {}, variant has C = {}",
                    meta.chunk, spec.chunk
                ),
            ));
        }
        let n = meta.seqs.len();
        let tokens = meta.seqs.last().map_or(0, |&(s, l)| s + l);
        for (what, v) in [
            ("H", h),
            ("d_k", dk),
            ("d_v", dv),
            ("sequences", n),
            ("tokens", tokens),
            ("chunks", meta.total_chunks),
        ] {
            if v > i32::MAX as usize {
                return Err(GlaError::invalid(
                    "problem size",
                    format!("{what} = {v} does not fit the kernels' 32-bit indices"),
                ));
            }
        }
        let dt = spec.dtype;
        let q = need("q", b.q, gpu, prod(&[tokens, h, dk])?, dt)?;
        let k = need("k", b.k, gpu, prod(&[tokens, h, dk])?, dt)?;
        let v = need("v", b.v, gpu, prod(&[tokens, hv, dv])?, dt)?;
        // Logits per token: per key [h, d_k] (the slices' view of [H, d_k · s]), per head [H] (one logit a real head,
        // shared by its key slices), per value [H, d_v].
        let per_token = match spec.shape() {
            GateShape::PerKey => Some(h * dk),
            GateShape::PerHead => Some(hv),
            GateShape::PerValue => Some(hv * dv),
            GateShape::Fixed => None,
        };
        let g = match (per_token, b.g) {
            // Logits are stored in the element dtype, like q (gla_codegen::ForwardArgs::g).
            (Some(p), Some(t)) => need("gate logits", t, gpu, prod(&[tokens, p])?, dt)?,
            (None, None) => 0,
            (Some(_), None) => {
                return Err(GlaError::invalid(
                    "gate logits",
                    format!("gate `{}` needs logits", spec.gate.name()),
                ))
            }
            (None, Some(_)) => {
                return Err(GlaError::invalid(
                    "gate logits",
                    format!("gate `{}` is fixed and takes none", spec.gate.name()),
                ))
            }
        };
        let np = spec.gate.params().len();
        let params = match (np, b.params) {
            (0, None) => 0,
            (0, Some(_)) => {
                return Err(GlaError::invalid(
                    "gate params",
                    format!("gate `{}` has no parameters", spec.gate.name()),
                ))
            }
            (_, None) => {
                return Err(GlaError::invalid(
                    "gate params",
                    format!("gate `{}` needs [H, {np}] parameters", spec.gate.name()),
                ))
            }
            (p, Some(t)) => need("gate params", t, gpu, prod(&[hv, p])?, DType::F32)?,
        };
        let state_elems = prod(&[n, h, dk, dv])?;
        let h0 =
            b.h0.map(|t| need("initial_state", t, gpu, state_elems, DType::F32))
                .transpose()?
                .unwrap_or(0);
        let ht =
            b.ht.map(|t| need("final_state", t, gpu, state_elems, DType::F32))
                .transpose()?
                .unwrap_or(0);
        let o = need("o", b.o, gpu, prod(&[tokens, hv, dv])?, dt)?;
        // (the backward's dq / dk passes: the gate's row sums, [⌈d_v / 64⌉, tokens, H] f32 in a workspace; a
        // per-key gate's: by key column, [tokens, H, d_v])
        let (rs_w, rs_out, dg, dparams) = match (spec.pass.row_sums(), &b.row_sums) {
            (false, None) => (0, 0, 0, 0),
            (true, Some(r)) => {
                let w = need("row sums' q / k", r.w, gpu, prod(&[tokens, hv, dv])?, dt)?;
                let bytes = spec
                    .row_sum_elems(tokens, hv, dv)
                    .and_then(|e| e.checked_mul(4))
                    .ok_or_else(|| GlaError::invalid("problem size", "the row sums overflow"))?;
                if r.out.len() < r.offset.saturating_add(bytes) || r.offset % 4 != 0 {
                    return Err(GlaError::invalid(
                        "row sums",
                        format!(
                            "workspace of {} bytes: {bytes} from byte {} (a multiple of 4) needed",
                            r.out.len(),
                            r.offset
                        ),
                    ));
                }
                // (the gate's gradients: a per-key gate's dk pass only — a per-value kernel walking in reverse)
                let makes_grads = spec.shape() == GateShape::PerValue && spec.pass.reverse();
                if (r.dg.is_some() || r.dparams.is_some()) && !makes_grads {
                    return Err(GlaError::invalid(
                        "row sums",
                        format!(
                            "{} makes no gate gradients (a per-key gate's dk pass does)",
                            spec.id()
                        ),
                    ));
                }
                let np = spec.gate.params().len();
                if r.dparams.is_some() != (r.dg.is_some() && np > 0) {
                    return Err(GlaError::invalid(
                        "d_params",
                        "a gate with parameters takes their gradient with the d logits (none without)",
                    ));
                }
                let dg =
                    r.dg.map(|t| need("d_logits", t, gpu, prod(&[tokens, hv, dv])?, dt))
                        .transpose()?
                        .unwrap_or(0);
                let dparams = r
                    .dparams
                    .map(|t| need("d_params", t, gpu, prod(&[hv, np])?, DType::F32))
                    .transpose()?
                    .unwrap_or(0);
                (
                    w,
                    r.out.device_ptr(gpu.stream()).0 + r.offset as u64,
                    dg,
                    dparams,
                )
            }
            (true, None) => {
                return Err(GlaError::invalid(
                    "row sums",
                    format!(
                        "{} takes the gate's row sums and needs their buffers",
                        spec.id()
                    ),
                ))
            }
            (false, Some(_)) => {
                return Err(GlaError::invalid(
                    "row sums",
                    format!(
                        "{} takes no row sums (only the backward's dq / dk passes do)",
                        spec.id()
                    ),
                ))
            }
        };
        let lens: Vec<usize> = meta.seqs.iter().map(|s| s.1).collect();
        if segs == 0 || segs > 64 || (segs > 1 && !variant.plan.segmented) {
            return Err(GlaError::invalid("segments", format!("{segs} segments per sequence for variant {} (1..=64, and 1 unless its plan segments)", spec.id())));
        }
        let (states, chunk_index) = if variant.plan.needs_state_buffer {
            let ws = b.states.ok_or_else(|| {
                GlaError::invalid(
                    "states",
                    "the variant materializes chunk states and needs a workspace",
                )
            })?;
            let bytes = prod(&[meta.total_chunks, h, dk, dv, 4])?;
            if ws.len() < bytes {
                return Err(GlaError::invalid(
                    "states",
                    format!("workspace has {} bytes, needs {bytes}", ws.len()),
                ));
            }
            let idx = meta
                .chunk_index
                .as_ref()
                .ok_or_else(|| GlaError::invalid("sequence arrays", "built without chunk_index"))?;
            (
                ws.device_ptr(gpu.stream()).0,
                idx.device_ptr(gpu.stream()).0,
            )
        } else if segs > 1 || parts > 1 {
            let ws = b.states.ok_or_else(|| {
                GlaError::invalid("states", format!("the problem runs in {segs} segments per sequence and {ks} key slices and needs a workspace"))
            })?;
            prod(&[n, segs, h, dk * dv + dk.max(dv), 4])?; // overflow check
            prod(&[parts, tokens, hv, dv, 4])?;
            let bytes = variant.plan.workspace_bytes(n, segs, h, dk, dv, tokens, hv);
            if ws.len() < bytes {
                return Err(GlaError::invalid(
                    "states",
                    format!("workspace has {} bytes, needs {bytes}", ws.len()),
                ));
            }
            (ws.device_ptr(gpu.stream()).0, 0)
        } else {
            (0, 0)
        };
        let mut args = ForwardArgs {
            q,
            k,
            v,
            g,
            params,
            h0,
            ht,
            o,
            states,
            cu_seqlens: meta.cu_seqlens.device_ptr(gpu.stream()).0,
            chunk_offsets: meta.chunk_offsets.device_ptr(gpu.stream()).0,
            chunk_index,
            n_seqs: n as i32,
            h: h as i32,
            dk: dk as i32,
            dv: dv as i32,
            scale,
            segs: segs as i32,
            lead: variant.plan.lead_permille,
            rs_w,
            rs_out,
            dg,
            dparams,
            ..Default::default()
        };
        if variant.plan.tma && dk == spec.dk as usize && tokens > 0 {
            tma_maps(&mut args, spec, tokens, h, dk, dv, hv);
        }
        let sizes = GridSizes {
            h,
            dv,
            seq_lens: &lens,
            segs,
        };
        let grids = variant
            .plan
            .kernels
            .iter()
            .map(|k| resolve_grid(&k.name, &k.grid, &sizes))
            .collect::<Result<Vec<_>>>()?;
        Ok(Bound {
            args,
            grids,
            stream: gpu.stream(),
        })
    }

    /// The argument struct (for inspection and tests).
    pub fn args(&self) -> &ForwardArgs {
        &self.args
    }
    pub fn grids(&self) -> &[(u32, u32, u32)] {
        &self.grids
    }
}

/// The TMA descriptors of a TMA variant (`LaunchPlan::tma`) over the checked `[tokens, H, d]` tensors of
/// `args`: boxes of 64 columns × 1 head × C tokens. If the driver cannot encode one (a stride that is not a multiple
/// of 16 bytes, say d_v = 100), `args.tma` stays 0 and the kernel loads every chunk by cp.async, as before. The maps'
/// dims are the extents `Bound::new` checked the tensors against, and TMA bounds every box by them (rows past the
/// end read as zeros), so the copies stay inside the allocations whatever the kernel asks for.
/// (`h`: the heads of q, k and the logits — key slices with a key split; `hv`: the heads of v.)
#[allow(clippy::too_many_arguments)]
fn tma_maps(
    args: &mut ForwardArgs,
    spec: &KernelSpec,
    tokens: usize,
    h: usize,
    dk: usize,
    dv: usize,
    hv: usize,
) {
    let f16 = spec.dtype == DType::F16;
    let e = spec.dtype.size_bytes() as u64;
    let t = tokens as u64;
    let boxd = [64, 1, spec.chunk];
    let map = |ptr: u64, h: usize, d: usize| {
        let (h, d) = (h as u64, d as u64);
        crate::ffi::encode_tensor_map_3d(ptr, f16, [d, h, t], [d * e, h * d * e], boxd)
            .map(gla_codegen::TmaMap)
    };
    let maps = (|| -> std::result::Result<_, DriverError> {
        let g = if spec.gate.shape() == GateShape::PerKey {
            map(args.g, h, dk)?
        } else {
            Default::default()
        };
        Ok((
            map(args.q, h, dk)?,
            map(args.k, h, dk)?,
            map(args.v, hv, dv)?,
            g,
        ))
    })();
    if let Ok((q, k, v, g)) = maps {
        (args.tm_q, args.tm_k, args.tm_v, args.tm_g, args.tma) = (q, k, v, g, 1);
    }
}

/// Launch the kernels of `variant`'s plan in order on the stream. Kernels with an empty grid are skipped.
pub fn launch_plan(variant: &Variant, bound: &Bound<'_>) -> Result<()> {
    for ((k, f), &grid) in variant
        .plan
        .kernels
        .iter()
        .zip(&variant.functions)
        .zip(&bound.grids)
    {
        if grid.0 == 0 || grid.1 == 0 || grid.2 == 0 {
            continue;
        }
        let cfg = LaunchConfig {
            grid_dim: grid,
            block_dim: (k.block, 1, 1),
            shared_mem_bytes: k.smem_bytes,
        };
        // SAFETY: (1) `f` was loaded by `Variant::load` from the module generated for `variant.spec`, with this
        // plan; (2) `Bound::new` checked every pointer's tensor against the sizes the kernel derives from the
        // arguments (tokens and sequences from the `SeqMeta` whose arrays it points at, H, d_k, d_v ≤ the spec's),
        // that the tensors live in this context, and that required pointers are present; (3) `bound` borrows the
        // buffers until after this enqueue, and all of them are freed stream-ordered on this same stream;
        // (4) `o`, `ht` and `states` come from `&mut` borrows, so they alias nothing else; (5) `Gpu::function`
        // set the dynamic shared memory attribute to `k.smem_bytes` (or it is ≤ 48 KB).
        #[allow(unsafe_code)]
        unsafe { launch(bound.stream, f, cfg, &bound.args) }.map_err(|e| GlaError::Cuda {
            op: "cuLaunchKernel",
            msg: format!(
                "{} of {} with grid {grid:?}, block {}, {} B smem: {e:?}",
                k.name,
                variant.spec.id(),
                k.block,
                k.smem_bytes
            ),
        })?;
    }
    Ok(())
}

/// An uninitialised workspace of `bytes` bytes (the chunk-state buffer).
pub fn alloc_workspace(gpu: &Gpu, bytes: usize) -> Result<CudaSlice<u8>> {
    ffi::alloc_uninit(gpu.stream(), bytes.max(8)).map_err(cuda_err("cuMemAlloc"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grid_axes() {
        let lens = [100, 0, 64, 65];
        let s = GridSizes {
            h: 16,
            dv: 100,
            seq_lens: &lens,
            segs: 1,
        };
        assert_eq!(resolve_axis(GridAxis::VTiles { block_v: 64 }, &s), 2);
        assert_eq!(resolve_axis(GridAxis::VTiles { block_v: 32 }, &s), 4);
        assert_eq!(resolve_axis(GridAxis::Heads, &s), 16);
        assert_eq!(resolve_axis(GridAxis::Sequences, &s), 4);
        // 100 -> 2, 0 -> 0, 64 -> 1, 65 -> 2
        assert_eq!(resolve_axis(GridAxis::Chunks { chunk: 64 }, &s), 5);
        assert_eq!(
            resolve_axis(GridAxis::Chunks { chunk: 32 }, &s),
            9,
            "4 + 0 + 2 + 3"
        );
        let g = resolve_grid(
            "k",
            &[
                GridAxis::Chunks { chunk: 64 },
                GridAxis::Heads,
                GridAxis::VTiles { block_v: 64 },
            ],
            &s,
        )
        .unwrap();
        assert_eq!(g, (5, 16, 2));
    }

    #[test]
    fn grid_limits_name_the_axis() {
        let lens = vec![1usize; 70_000];
        let s = GridSizes {
            h: 4,
            dv: 64,
            seq_lens: &lens,
            segs: 1,
        };
        let e = resolve_grid(
            "gla_fwd_fused",
            &[
                GridAxis::VTiles { block_v: 64 },
                GridAxis::Heads,
                GridAxis::Sequences,
            ],
            &s,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("70000") && e.contains("axis z") && e.contains("65535"),
            "{e}"
        );
        // The same problem as chunks along x is fine.
        assert!(resolve_grid(
            "o",
            &[
                GridAxis::Chunks { chunk: 64 },
                GridAxis::Heads,
                GridAxis::VTiles { block_v: 64 }
            ],
            &s
        )
        .is_ok());
    }

    #[test]
    fn empty_grids_resolve_to_zero() {
        let s = GridSizes {
            h: 2,
            dv: 64,
            seq_lens: &[0, 0],
            segs: 1,
        };
        assert_eq!(
            resolve_grid(
                "k",
                &[
                    GridAxis::Chunks { chunk: 64 },
                    GridAxis::Heads,
                    GridAxis::Sequences
                ],
                &s
            )
            .unwrap(),
            (0, 2, 2)
        );
    }

    #[test]
    fn segment_axes() {
        let lens = [4096, 100];
        let one = GridSizes {
            h: 2,
            dv: 128,
            seq_lens: &lens,
            segs: 1,
        };
        assert_eq!(resolve_axis(GridAxis::SeqSegments, &one), 2);
        assert_eq!(
            resolve_axis(GridAxis::SplitSeqSegments, &one),
            0,
            "P = 1: the segment pass is skipped"
        );
        assert_eq!(resolve_axis(GridAxis::SplitSequences, &one), 0);
        // S = 4 segments: the lead + 3; each pass runs 3 CTAs a sequence.
        let four = GridSizes { segs: 4, ..one };
        assert_eq!(resolve_axis(GridAxis::SeqSegments, &four), 6);
        assert_eq!(resolve_axis(GridAxis::SplitSeqSegments, &four), 6);
        assert_eq!(resolve_axis(GridAxis::SplitSequences, &four), 2);
        assert_eq!(
            resolve_axis(GridAxis::HeadBlocks { blocks: 16 }, &four),
            32,
            "the combine: H x row blocks"
        );
        // P: fills the GPU only when the CTAs would fill at most half of it; at most the chunks of the longest sequence.
        assert_eq!(gla_codegen::segments(8, 16, 1, 64), 1);
        assert_eq!(gla_codegen::segments(2, 16, 1, 256), 4);
        assert_eq!(gla_codegen::segments(1, 2, 1, 64), 63);
        assert_eq!(gla_codegen::segments(1, 2, 1, 3), 3);
        assert_eq!(gla_codegen::segments(1, 1, 1, 1000), 63);
        assert_eq!(
            (
                gla_codegen::total_segments(1),
                gla_codegen::total_segments(4)
            ),
            (1, 5)
        );
        assert_eq!(
            gla_codegen::segment_workspace_bytes(2, 4, 16, 128, 64),
            2 * 4 * 16 * (128 * 64 + 128) * 4
        );
        assert_eq!(gla_codegen::segment_workspace_bytes(2, 1, 16, 128, 64), 0);
        // Key split: h counts the key slices; the sum covers tokens x real heads x d_v, 1024 outputs a block.
        let ks = GridSizes {
            h: 4,
            dv: 256,
            seq_lens: &lens,
            segs: 1,
        };
        assert_eq!(
            resolve_axis(
                GridAxis::KeySplitSum {
                    key_split: 2,
                    per_block: 1024
                },
                &ks
            ),
            (4196 * 2 * 256usize).div_ceil(1024)
        );
        assert_eq!(resolve_axis(GridAxis::One, &ks), 1);
        // Two CTAs an SM: segments fill 2 · 132 CTAs.
        assert_eq!(
            gla_codegen::segments_on(2 * gla_codegen::WAVE_CTAS, 2, 16, 1, 256),
            8
        );
    }

    #[test]
    fn segments_cover_each_sequence_in_order() {
        use gla_codegen::segment_chunks;
        for nch in [0, 1, 2, 3, 7, 128, 512, 1000] {
            for segs in [1, 2, 3, 5, 17, 64] {
                for lead in [0, 600, 1000, 4000] {
                    let mut next = 0;
                    for p in 0..segs {
                        let (c0, c1) = segment_chunks(nch, segs, lead, p);
                        assert!(c0 == next && c1 >= c0, "nch {nch} S {segs} lead {lead}: segment {p} is [{c0}, {c1}) after {next}");
                        next = c1;
                    }
                    assert_eq!(
                        next, nch,
                        "nch {nch} S {segs} lead {lead}: every chunk in a segment"
                    );
                }
            }
        }
        // 2×16384 at C = 32 (512 chunks), P = 4: a lead of 0.6 segments — 66 chunks, then 4 segments of 112.
        assert_eq!(segment_chunks(512, 5, 600, 0), (0, 66));
        assert_eq!(segment_chunks(512, 5, 600, 1), (66, 178));
        assert_eq!(segment_chunks(512, 5, 600, 4), (402, 512));
        assert_eq!(
            segment_chunks(512, 5, 0, 0),
            (0, 0),
            "lead 0: the old scheme (the lead is empty)"
        );
    }

    #[test]
    fn seq_arrays_fixed_length() {
        // B = 3, T = 100, C = 64: cu = n*T, 2 chunks each.
        let seqs: Vec<_> = (0..3).map(|b| (b * 100, 100)).collect();
        let (cu, co, idx) = seq_arrays(&seqs, 64);
        assert_eq!(cu, vec![0, 100, 200, 300]);
        assert_eq!(co, vec![0, 2, 4, 6]);
        assert_eq!(idx, vec![0, 0, 0, 1, 1, 0, 1, 1, 2, 0, 2, 1]);
    }

    #[test]
    fn seq_arrays_varlen_with_empty_sequences() {
        let seqs = [(0, 0), (0, 65), (65, 0), (65, 32)];
        let (cu, co, idx) = seq_arrays(&seqs, 32);
        assert_eq!(cu, vec![0, 0, 65, 65, 97]);
        assert_eq!(co, vec![0, 0, 3, 3, 4]);
        assert_eq!(idx, vec![1, 0, 1, 1, 1, 2, 3, 0]);
        assert_eq!(total_chunks(&[0, 65, 0, 32], 32), 4);
        let (cu, co, idx) = seq_arrays(&[], 64);
        assert_eq!((cu, co, idx.len()), (vec![0], vec![0], 0));
    }

    #[test]
    fn args_struct_layout_matches_c() {
        // Offsets of the C struct: 12 pointers, then n_seqs, h, dk, dv, scale, segs, tma, lead, 4 tensor maps.
        let a = ForwardArgs {
            n_seqs: 1,
            h: 2,
            dk: 3,
            dv: 4,
            scale: 0.5,
            ..Default::default()
        };
        let base = &a as *const ForwardArgs as usize;
        assert_eq!(&a.chunk_index as *const u64 as usize - base, 88);
        assert_eq!(&a.n_seqs as *const i32 as usize - base, 96);
        assert_eq!(&a.scale as *const f32 as usize - base, 112);
        assert_eq!(&a.tma as *const i32 as usize - base, 120);
        assert_eq!(&a.tm_q as *const _ as usize - base, 128);
        assert_eq!(&a.tm_g as *const _ as usize - base, 128 + 3 * 128);
        assert_eq!(&a.rs_w as *const u64 as usize - base, 640);
        assert_eq!(&a.dg as *const u64 as usize - base, 656);
        assert_eq!(&a.dparams as *const u64 as usize - base, 664);
        assert_eq!(std::mem::size_of::<ArgsRepr>(), 704);
    }
}
