//! The safe forward API: [`Gla::forward`] / [`Gla::forward_into`], with every shape, dtype and argument
//! validated by the pure [`validate_forward`] before anything is launched.

use crate::cache::GpuFacts;
use crate::device::Gpu;
use crate::launch::{self, Bound, Buffers, SeqMeta, Variant};
use crate::nvrtc::CompileOptions;
use crate::tensor::{check_tensor, DeviceTensor};
use crate::tuned::{Tuned, TuningStats};
use cudarc::driver::CudaSlice;
use gla_codegen::KernelSpec;
use gla_core::error::Result;
use gla_core::{DType, Dims, Gate, GateShape, GlaError, HostTensor};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// Options of one forward call. `Default` gives: scale 1/√d_k, no initial state, no final state, fixed-length
/// batch, the default variant.
#[derive(Clone, Copy, Debug, Default)]
pub struct ForwardOptions<'a> {
    /// Multiplies q·S (default `1/sqrt(d_k)`, as in fla).
    pub scale: Option<f32>,
    /// f32 `[N, H, d_k, d_v]`.
    pub initial_state: Option<&'a DeviceTensor>,
    /// Return the state after the last token of each sequence, f32 `[N, H, d_k, d_v]` ([`Gla::forward`] only;
    /// [`Gla::forward_into`] writes it iff given a tensor for it).
    pub output_final_state: bool,
    /// Variable-length batch: N+1 token offsets into the packed T axis (B must be 1).
    pub cu_seqlens: Option<&'a [usize]>,
    /// The kernel variant (default: [`KernelSpec::default_for`] the problem's head dims).
    pub variant: Option<KernelSpec>,
    /// Segments per sequence of the fused variants' two-level scan, its short lead segment included (default:
    /// `gla_codegen::total_segments` of `gla_codegen::segments`, which splits only problems too narrow to fill the
    /// GPU). `Some(1)` never splits; larger values are capped at 64 (segments past a short sequence's end are
    /// empty). Ignored by materialized variants.
    pub segments: Option<usize>,
}

/// Result of [`Gla::forward`].
#[derive(Debug)]
pub struct ForwardOutput {
    /// `[B, T, H, d_v]` in the input dtype.
    pub o: DeviceTensor,
    /// f32 `[N, H, d_k, d_v]` when asked for.
    pub final_state: Option<DeviceTensor>,
}

/// Shape and dtype of a tensor, for validation without a device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TensorDesc<'a> {
    pub shape: &'a [usize],
    pub dtype: DType,
}

impl<'a> TensorDesc<'a> {
    pub fn new(shape: &'a [usize], dtype: DType) -> Self {
        TensorDesc { shape, dtype }
    }
    pub fn of(t: &'a DeviceTensor) -> Self {
        TensorDesc {
            shape: t.shape(),
            dtype: t.dtype(),
        }
    }
    pub fn of_host(t: &'a HostTensor) -> Self {
        TensorDesc {
            shape: &t.shape,
            dtype: t.dtype(),
        }
    }
}

/// Everything [`validate_forward`] looks at.
#[derive(Clone, Copy, Debug)]
pub struct ForwardRequest<'a> {
    pub q: TensorDesc<'a>,
    pub k: TensorDesc<'a>,
    pub v: TensorDesc<'a>,
    pub logits: Option<TensorDesc<'a>>,
    pub params: Option<TensorDesc<'a>>,
    pub initial_state: Option<TensorDesc<'a>>,
    /// `o` of [`Gla::forward_into`].
    pub o: Option<TensorDesc<'a>>,
    /// The final-state tensor of [`Gla::forward_into`].
    pub final_state: Option<TensorDesc<'a>>,
    pub scale: Option<f32>,
    pub output_final_state: bool,
    pub cu_seqlens: Option<&'a [usize]>,
    pub variant: Option<KernelSpec>,
    pub segments: Option<usize>,
}

/// A validated problem: what to launch and with which sizes.
#[derive(Clone, Debug)]
pub struct ResolvedProblem {
    pub dims: Dims,
    pub dtype: DType,
    /// `(start, len)` of each sequence on the flattened `[B·T]` token axis.
    pub seqs: Vec<(usize, usize)>,
    pub spec: KernelSpec,
    pub scale: f32,
    pub has_initial_state: bool,
    pub output_final_state: bool,
    /// `Σ ceil(len / C)` for the spec's chunk size.
    pub total_chunks: usize,
    /// Requested segments per sequence (`ForwardOptions::segments`; validated ≥ 1).
    pub segments: Option<usize>,
}

impl ResolvedProblem {
    pub fn n_seqs(&self) -> usize {
        self.seqs.len()
    }
    /// `[B, T, H, d_v]`.
    pub fn o_shape(&self) -> [usize; 4] {
        self.dims.v_shape()
    }
    /// `[N, H, d_k, d_v]`.
    pub fn state_shape(&self) -> [usize; 4] {
        [self.n_seqs(), self.dims.h, self.dims.dk, self.dims.dv]
    }
    /// Bytes of the chunk-state workspace the variant needs when it materializes.
    pub fn states_bytes(&self) -> usize {
        // Saturating: an absurd size then fails the allocation instead of wrapping.
        [self.dims.h, self.dims.dk, self.dims.dv, 4]
            .iter()
            .fold(self.total_chunks, |a, &d| a.saturating_mul(d))
    }
}

fn rank4(what: &'static str, t: &TensorDesc, names: &str) -> Result<[usize; 4]> {
    match t.shape {
        &[a, b, c, d] => Ok([a, b, c, d]),
        s => Err(GlaError::shape(what, format!("{names} (rank 4)"), s)),
    }
}

/// Whether `spec` was generated for `gate` (same name and content hash).
fn same_gate(a: &dyn Gate, b: &dyn Gate) -> bool {
    a.name() == b.name() && a.content_hash() == b.content_hash()
}

/// Validate a forward call without touching a device. Errors say what was expected.
///
/// Rules: q, k `[B,T,H,d_k]` and v `[B,T,H,d_v]` of one dtype; logits in that same dtype (the kernels read them
/// like q, see `gla_codegen::ForwardArgs::g`) `[B,T,H,d_k]` (per key), `[B,T,H]` (per head), `[B,T,H,d_v]` (per
/// value), absent (fixed); params f32 `[H,P]`, present iff the gate has P > 0
/// parameters; initial/final state f32 `[N,H,d_k,d_v]`; `cu_seqlens` as [`Dims::sequences`] (B = 1); the variant
/// must be for this gate and dtype and its specialised d_k/d_v must cover the actual ones; sizes must fit the
/// kernels' 32-bit indices. (Grid limits depend on the plan; `launch::Bound::new` checks them before any launch.)
pub fn validate_forward(gate: &'static dyn Gate, r: &ForwardRequest) -> Result<ResolvedProblem> {
    let [b, t, h, dk] = rank4("q", &r.q, "[B, T, H, d_k]")?;
    let dtype = r.q.dtype;
    check_tensor("k", r.k.shape, r.k.dtype, r.q.shape, dtype)?;
    let [_, _, _, dv] = rank4("v", &r.v, "[B, T, H, d_v]")?;
    check_tensor("v", r.v.shape, r.v.dtype, &[b, t, h, dv], dtype)?;
    let dims = Dims::new(b, t, h, dk, dv);
    let seqs = dims.sequences(r.cu_seqlens)?;

    let spec = match r.variant {
        Some(s) => s,
        None => KernelSpec::default_for(gate, dtype, dk, dv)?,
    };
    if !same_gate(spec.gate, gate) {
        return Err(GlaError::invalid(
            "variant",
            format!(
                "was generated for gate `{}`, but the call is for gate `{}`",
                spec.gate.name(),
                gate.name()
            ),
        ));
    }
    if spec.dtype != dtype {
        return Err(GlaError::DType {
            what: "variant",
            expected: format!("{dtype} (the dtype of q, k, v)"),
            got: spec.dtype.to_string(),
        });
    }
    if (spec.key_dim() as usize) < dk || (spec.dv as usize) < dv {
        return Err(GlaError::Unsupported {
            variant: spec.id(),
            msg: format!(
                "specialised for d_k <= {}, d_v <= {}, but the inputs have d_k = {dk}, d_v = {dv}",
                spec.key_dim(),
                spec.dv
            ),
        });
    }
    let ks = spec.key_split as usize;
    if ks > 1 && (dk % ks != 0 || dk / ks > spec.dk as usize) {
        return Err(GlaError::Unsupported {
            variant: spec.id(),
            msg: format!("splits d_k into {ks} slices of at most {} columns: d_k must be a multiple of {ks}, got {dk}", spec.dk),
        });
    }
    spec.validate()?;
    if spec.pass != gla_codegen::Pass::Forward {
        return Err(GlaError::Unsupported {
            variant: spec.id(),
            msg: "is a backward pass's kernel (Gla::backward runs it); name a forward variant"
                .into(),
        });
    }

    let f32_ = DType::F32;
    match (gate.shape(), r.logits) {
        (GateShape::Fixed, None) => {}
        (GateShape::Fixed, Some(_)) => {
            return Err(GlaError::invalid(
                "logits",
                format!(
                    "gate `{}` is fixed (a function of the head only) and takes no logits",
                    gate.name()
                ),
            ))
        }
        (shape, None) => {
            return Err(GlaError::invalid(
                "logits",
                format!(
                    "gate `{}` is {shape}: pass {dtype} logits {:?}",
                    gate.name(),
                    logits_shape(shape, &dims)
                ),
            ))
        }
        (shape, Some(g)) => check_tensor(
            "logits",
            g.shape,
            g.dtype,
            &logits_shape(shape, &dims),
            dtype,
        )?,
    }
    let np = gate.params().len();
    match (np, r.params) {
        (0, None) => {}
        (0, Some(_)) => {
            return Err(GlaError::invalid(
                "params",
                format!("gate `{}` has no learnable parameters", gate.name()),
            ))
        }
        (_, None) => {
            let names: Vec<_> = gate.params().iter().map(|p| p.name).collect();
            return Err(GlaError::invalid(
                "params",
                format!(
                    "gate `{}` needs f32 params [H, {np}] = [{h}, {np}] ({names:?})",
                    gate.name()
                ),
            ));
        }
        (_, Some(p)) => check_tensor("params", p.shape, p.dtype, &[h, np], f32_)?,
    }
    let state = [seqs.len(), h, dk, dv];
    if let Some(s) = r.initial_state {
        check_tensor("initial_state", s.shape, s.dtype, &state, f32_)?;
    }
    if let Some(s) = r.final_state {
        check_tensor("final_state", s.shape, s.dtype, &state, f32_)?;
    }
    if let Some(o) = r.o {
        check_tensor("o", o.shape, o.dtype, &dims.v_shape(), dtype)?;
    }
    let scale = r.scale.unwrap_or(1.0 / (dk as f32).sqrt());
    if !scale.is_finite() {
        return Err(GlaError::invalid(
            "scale",
            format!("must be finite, got {scale}"),
        ));
    }

    let lens: Vec<usize> = seqs.iter().map(|s| s.1).collect();
    let total_chunks = launch::total_chunks(&lens, spec.chunk);
    if r.segments == Some(0) {
        return Err(GlaError::invalid(
            "segments",
            "must be at least 1 (1 = never split a sequence), got 0",
        ));
    }
    let tokens = b
        .checked_mul(t)
        .ok_or_else(|| GlaError::invalid("problem size", "B·T overflows"))?;
    for (what, n) in [("B·T (tokens)", tokens), ("total chunks", total_chunks)] {
        if n > i32::MAX as usize {
            return Err(GlaError::invalid(
                "problem size",
                format!(
                    "{what} = {n} is over the kernels' 32-bit limit {}",
                    i32::MAX
                ),
            ));
        }
    }
    let elems = tokens
        .checked_mul(h)
        .and_then(|x| x.checked_mul(dk.max(dv)));
    if elems.is_none_or(|e| e > i64::MAX as usize) {
        return Err(GlaError::invalid(
            "problem size",
            "B·T·H·d overflows 64-bit offsets",
        ));
    }
    Ok(ResolvedProblem {
        dims,
        dtype,
        seqs,
        spec,
        scale,
        has_initial_state: r.initial_state.is_some(),
        output_final_state: r.output_final_state || r.final_state.is_some(),
        total_chunks,
        segments: r.segments,
    })
}

/// The logits shape of a gate shape: `[B,T,H,d_k]`, `[B,T,H]`, `[B,T,H,d_v]`, or `[]` for fixed gates.
pub fn logits_shape(shape: GateShape, d: &Dims) -> Vec<usize> {
    match shape {
        GateShape::PerKey => vec![d.b, d.t, d.h, d.dk],
        GateShape::PerHead => vec![d.b, d.t, d.h],
        GateShape::PerValue => vec![d.b, d.t, d.h, d.dv],
        GateShape::Fixed => vec![],
    }
}

type VariantKey = (String, u64);
type MetaKey = (Vec<(usize, usize)>, u32, bool);

/// A backward kernel set's functions, in launch order.
type BackwardFunctions = Arc<Vec<cudarc::driver::CudaFunction>>;

struct Inner {
    gpu: Gpu,
    options: CompileOptions,
    variants: Mutex<HashMap<VariantKey, Arc<Variant>>>,
    metas: Mutex<HashMap<MetaKey, Arc<SeqMeta>>>,
    /// Chunk-state workspace, grown on demand and reused (stream-ordered, so reuse is safe).
    workspace: Mutex<Option<CudaSlice<u8>>>,
    /// Tuning caches: the variant (and its cubin) of calls that name none.
    tuned: Tuned,
    /// The backward kernels of each (kernel-set id, gate content hash), ready to launch.
    backward_sets: Mutex<HashMap<(String, u64), BackwardFunctions>>,
    /// The decode kernel of each (gate content hash, dtype), ready to launch.
    decoders: Mutex<HashMap<(u64, DType), cudarc::driver::CudaFunction>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // The maps stay consistent across a panic (single inserts), so a poisoned lock is recovered.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The gla runtime on one GPU: compiles, caches and launches forward kernels. Cheap to clone (shared caches).
#[derive(Clone)]
pub struct Gla {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Gla {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gla")
            .field("gpu", &self.inner.gpu)
            .finish_non_exhaustive()
    }
}

impl Gla {
    /// Open GPU 0, with the default tuning caches ([`crate::tuned`]). Errors: `NoDriver`, `NoDevice` (also for a
    /// device that is not compute capability 9.0). NVRTC is needed only for a variant that no tuning cache holds:
    /// its absence is then a `NoNvrtc` error of that call.
    pub fn new() -> Result<Gla> {
        Self::on_device(0)
    }

    /// Open GPU `ordinal`.
    pub fn on_device(ordinal: usize) -> Result<Gla> {
        Self::with_options(
            ordinal,
            CompileOptions {
                driver_cache: true,
                ..CompileOptions::default()
            },
        )
    }

    /// Open GPU `ordinal` with the given compile options (e.g. `lineinfo: true`, so that profilers such as ncu map
    /// SASS to the kernel source).
    pub fn with_options(ordinal: usize, options: CompileOptions) -> Result<Gla> {
        Ok(Self::with_gpu(Gpu::new(ordinal)?, options))
    }

    /// Wrap an opened GPU with the given compile options and the default tuning caches.
    pub fn with_gpu(gpu: Gpu, options: CompileOptions) -> Gla {
        let tuned = Tuned::with_defaults(Some(GpuFacts::from(gpu.info())));
        Gla {
            inner: Arc::new(Inner {
                gpu,
                options,
                variants: Mutex::default(),
                metas: Mutex::default(),
                backward_sets: Mutex::default(),
                decoders: Mutex::default(),
                workspace: Mutex::default(),
                tuned,
            }),
        }
    }

    /// Consult the tuning cache in `dir` too (after the ones already in use). Returns its number of entries.
    /// Errors: `Cache` (missing, unreadable or corrupt index).
    pub fn add_tuning_cache(&self, dir: impl AsRef<std::path::Path>) -> Result<usize> {
        self.inner.tuned.add(dir.as_ref())
    }

    /// The tuning cache directories in use, in the order they are consulted.
    pub fn tuning_caches(&self) -> Vec<std::path::PathBuf> {
        self.inner.tuned.dirs()
    }

    /// Ids of the variants loaded so far (compiled or from a tuning cache).
    pub fn loaded_variants(&self) -> Vec<String> {
        lock(&self.inner.variants)
            .keys()
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// How calls that named no variant were served: cache hits, misses (which ran the default variant) and
    /// stale entries skipped.
    pub fn tuning_stats(&self) -> TuningStats {
        self.inner.tuned.stats()
    }

    /// Load `spec`'s kernels from a cubin built for it (e.g. by NVRTC in the tuner), with no compile; later calls
    /// naming `spec` run exactly this cubin. Returns the loaded variant (an already loaded one if `spec` was).
    pub fn load_cubin(&self, spec: &KernelSpec, cubin: &[u8]) -> Result<Arc<Variant>> {
        let key = (spec.id(), spec.gate.content_hash());
        if let Some(v) = lock(&self.inner.variants).get(&key) {
            return Ok(v.clone());
        }
        let v = Arc::new(Variant::from_cubin(&self.inner.gpu, spec, cubin)?);
        Ok(lock(&self.inner.variants).entry(key).or_insert(v).clone())
    }

    /// Generate, compile (sm_90a cubin) and load the backward kernel set `spec` unless it is loaded; later backward
    /// calls that run `spec` find it (the backward's twin of [`Gla::compile_spec`]; safe to call from several
    /// threads, e.g. to compile many sets in parallel). Errors: `Unsupported`, `Compile`, `Cuda`.
    pub fn compile_backward(&self, spec: &gla_codegen::BackwardSpec) -> Result<()> {
        let key = (spec.id(), spec.gate.content_hash());
        if lock(&self.inner.backward_sets).contains_key(&key) {
            return Ok(());
        }
        let f = launch::backward_functions(&self.inner.gpu, spec, &self.inner.options, None)?;
        lock(&self.inner.backward_sets)
            .entry(key)
            .or_insert(Arc::new(f));
        Ok(())
    }

    /// Load the backward kernel set `spec` from a cubin built for it (e.g. by NVRTC in the tuner), with no compile;
    /// later backward calls that run `spec` run exactly this cubin.
    pub fn load_backward_cubin(
        &self,
        spec: &gla_codegen::BackwardSpec,
        cubin: &[u8],
    ) -> Result<()> {
        let f =
            launch::backward_functions(&self.inner.gpu, spec, &self.inner.options, Some(cubin))?;
        lock(&self.inner.backward_sets).insert((spec.id(), spec.gate.content_hash()), Arc::new(f));
        Ok(())
    }

    /// The variant a call that names none runs, for q of shape `q_shape` (`[B, T, H, d_k]`, or `[1, T, H, d_k]` with
    /// `cu_seqlens`), values of width `d_v` and `dtype`: the tuning cache's pick for the call's bucket (its cubin
    /// loaded), else the default ([`KernelSpec::default_for`]). What benchmarks report as "ours"; needs no tensor.
    pub fn variant_for(
        &self,
        gate: &'static dyn Gate,
        dtype: DType,
        q_shape: &[usize],
        d_v: usize,
        cu_seqlens: Option<&[usize]>,
    ) -> Result<KernelSpec> {
        match self.cached_variant(gate, dtype, q_shape, d_v, cu_seqlens) {
            Some(s) => Ok(s),
            None => {
                let Some(&dk) = q_shape.last() else {
                    return Err(GlaError::invalid(
                        "q",
                        format!("must be [B, T, H, d_k], got {q_shape:?}"),
                    ));
                };
                KernelSpec::default_for(gate, dtype, dk, d_v)
            }
        }
    }

    /// The variant a tuning cache holds for such a call, its cubin loaded (no NVRTC); None: none holds one (or the
    /// shape is malformed: validation says what is wrong), and the default runs.
    fn cached_variant(
        &self,
        gate: &'static dyn Gate,
        dtype: DType,
        q_shape: &[usize],
        d_v: usize,
        cu_seqlens: Option<&[usize]>,
    ) -> Option<KernelSpec> {
        let (rows, tokens) = crate::tuned::call_shape(q_shape, cu_seqlens)?;
        let dk = *q_shape.last()?;
        let pick = self.inner.tuned.pick(gate, dtype, dk, d_v, rows, tokens)?;
        if let Err(e) = self.load_cubin(&pick.spec, &pick.cubin) {
            // A cubin the driver refuses: the default variant runs instead (warned once).
            self.inner.tuned.warn_once(
                &format!("load:{}", pick.spec.id()),
                &format!(
                    "gla: tuning cache {}: {} not loaded ({e}); the default variant runs",
                    pick.cache.display(),
                    pick.spec.id()
                ),
            );
            return None;
        }
        Some(pick.spec)
    }

    /// `opts` with the variant a tuning cache holds for this call when it names none; unchanged otherwise.
    fn tuned_options<'a>(
        &self,
        gate: &'static dyn Gate,
        q: &DeviceTensor,
        v: &DeviceTensor,
        opts: &ForwardOptions<'a>,
    ) -> Result<ForwardOptions<'a>> {
        if opts.variant.is_some() {
            return Ok(*opts);
        }
        let Some(&dv) = v.shape().last() else {
            return Ok(*opts);
        };
        Ok(
            match self.cached_variant(gate, q.dtype(), q.shape(), dv, opts.cu_seqlens) {
                Some(spec) => ForwardOptions {
                    variant: Some(spec),
                    ..*opts
                },
                None => *opts,
            },
        )
    }

    pub fn gpu(&self) -> &Gpu {
        &self.inner.gpu
    }

    /// Wait for all submitted work; reports asynchronous errors.
    pub fn synchronize(&self) -> Result<()> {
        self.inner.gpu.synchronize()
    }

    /// Copy a host tensor to this GPU.
    pub fn upload(&self, t: &HostTensor) -> Result<DeviceTensor> {
        DeviceTensor::upload(&self.inner.gpu, t)
    }
    pub fn zeros(&self, dtype: DType, shape: &[usize]) -> Result<DeviceTensor> {
        DeviceTensor::zeros(&self.inner.gpu, dtype, shape)
    }
    /// A NaN-filled tensor (for outputs in tests).
    pub fn poisoned(&self, dtype: DType, shape: &[usize]) -> Result<DeviceTensor> {
        DeviceTensor::poisoned(&self.inner.gpu, dtype, shape)
    }

    /// Generate, compile (sm_90a cubin), load and cache the kernels of `spec`; later calls return the cached
    /// variant. Errors: `Unsupported` (spec / generator), `Compile`, `Cuda`.
    pub fn compile_spec(&self, spec: &KernelSpec) -> Result<Arc<Variant>> {
        let key = (spec.id(), spec.gate.content_hash());
        if let Some(v) = lock(&self.inner.variants).get(&key) {
            return Ok(v.clone());
        }
        let v = Arc::new(Variant::load(&self.inner.gpu, spec, &self.inner.options)?);
        Ok(lock(&self.inner.variants).entry(key).or_insert(v).clone())
    }

    fn seq_meta(
        &self,
        seqs: &[(usize, usize)],
        chunk: u32,
        with_index: bool,
    ) -> Result<Arc<SeqMeta>> {
        let key = (seqs.to_vec(), chunk, with_index);
        if let Some(m) = lock(&self.inner.metas).get(&key) {
            return Ok(m.clone());
        }
        let m = Arc::new(SeqMeta::new(&self.inner.gpu, seqs, chunk, with_index)?);
        let mut map = lock(&self.inner.metas);
        if map.len() >= 64 {
            map.clear();
        }
        Ok(map.entry(key).or_insert(m).clone())
    }

    /// Chunkwise GLA forward: `o_t = scale · q_t S_t`, `S_t = diag(α_t) S_{t-1} + k_tᵀ v_t` with `log α_t =
    /// gate(logits_t)`, per sequence and head. Allocates the outputs.
    #[allow(clippy::too_many_arguments)]
    pub fn forward(
        &self,
        gate: &'static dyn Gate,
        q: &DeviceTensor,
        k: &DeviceTensor,
        v: &DeviceTensor,
        logits: Option<&DeviceTensor>,
        params: Option<&DeviceTensor>,
        opts: &ForwardOptions,
    ) -> Result<ForwardOutput> {
        let opts = &self.tuned_options(gate, q, v, opts)?;
        let problem = validate_forward(gate, &request(q, k, v, logits, params, opts, None, None))?;
        let gpu = &self.inner.gpu;
        let mut o = DeviceTensor::empty(gpu, problem.dtype, &problem.o_shape())?;
        let mut fs = if opts.output_final_state {
            Some(DeviceTensor::empty(
                gpu,
                DType::F32,
                &problem.state_shape(),
            )?)
        } else {
            None
        };
        self.run(
            &problem,
            q,
            k,
            v,
            logits,
            params,
            opts.initial_state,
            &mut o,
            fs.as_mut(),
            None,
        )?;
        Ok(ForwardOutput { o, final_state: fs })
    }

    /// [`Gla::forward`] into caller-owned outputs (no allocation after the first call of a shape: for benchmarks
    /// and decoding loops). `o` is `[B,T,H,d_v]` in the input dtype; the final state (f32 `[N,H,d_k,d_v]`) is
    /// written iff `final_state` is given (`opts.output_final_state` is not read).
    #[allow(clippy::too_many_arguments)]
    pub fn forward_into(
        &self,
        gate: &'static dyn Gate,
        q: &DeviceTensor,
        k: &DeviceTensor,
        v: &DeviceTensor,
        logits: Option<&DeviceTensor>,
        params: Option<&DeviceTensor>,
        opts: &ForwardOptions,
        o: &mut DeviceTensor,
        final_state: Option<&mut DeviceTensor>,
    ) -> Result<()> {
        let opts = &self.tuned_options(gate, q, v, opts)?;
        let problem = validate_forward(
            gate,
            &request(
                q,
                k,
                v,
                logits,
                params,
                opts,
                Some(TensorDesc::of(o)),
                final_state.as_deref().map(TensorDesc::of),
            ),
        )?;
        self.run(
            &problem,
            q,
            k,
            v,
            logits,
            params,
            opts.initial_state,
            o,
            final_state,
            None,
        )
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn run(
        &self,
        p: &ResolvedProblem,
        q: &DeviceTensor,
        k: &DeviceTensor,
        v: &DeviceTensor,
        logits: Option<&DeviceTensor>,
        params: Option<&DeviceTensor>,
        h0: Option<&DeviceTensor>,
        o: &mut DeviceTensor,
        ht: Option<&mut DeviceTensor>,
        row_sums: Option<launch::RowSums<'_>>,
    ) -> Result<()> {
        let gpu = &self.inner.gpu;
        let variant = self.compile_spec(&p.spec)?;
        let materialize = variant.plan().needs_state_buffer;
        let meta = self.seq_meta(&p.seqs, p.spec.chunk, materialize)?;
        let lens: Vec<usize> = p.seqs.iter().map(|s| s.1).collect();
        // A key split runs each head as `ks` heads of d_k / ks key columns (the kernels' view of q, k, logits, states).
        let ks = p.spec.key_split.max(1) as usize;
        let (kh, kdk) = (p.dims.h * ks, p.dims.dk / ks);
        let segs = launch::plan_segments(variant.plan(), &p.spec, &lens, kh, p.dims.dv, p.segments);
        let tokens: usize = lens.iter().sum();
        let need = if materialize {
            p.states_bytes().max(8)
        } else {
            variant
                .plan()
                .workspace_bytes(lens.len(), segs, kh, kdk, p.dims.dv, tokens, p.dims.h)
        };
        let mut ws_guard = lock(&self.inner.workspace);
        let states = if need > 0 {
            if ws_guard.as_ref().is_none_or(|w| w.len() < need) {
                // Dropping the old buffer frees it stream-ordered, after the kernels that used it.
                *ws_guard = None;
                *ws_guard = Some(launch::alloc_workspace(gpu, need)?);
            }
            ws_guard.as_mut()
        } else {
            None
        };
        let bufs = Buffers {
            q,
            k,
            v,
            g: logits,
            params,
            h0,
            ht,
            o,
            states,
            meta: &meta,
            row_sums,
        };
        let bound = Bound::new(gpu, &variant, bufs, kh, kdk, p.dims.dv, p.scale, segs)?;
        launch::launch_plan(&variant, &bound)
    }
}

#[allow(clippy::too_many_arguments)]
fn request<'a>(
    q: &'a DeviceTensor,
    k: &'a DeviceTensor,
    v: &'a DeviceTensor,
    logits: Option<&'a DeviceTensor>,
    params: Option<&'a DeviceTensor>,
    opts: &ForwardOptions<'a>,
    o: Option<TensorDesc<'a>>,
    final_state: Option<TensorDesc<'a>>,
) -> ForwardRequest<'a> {
    ForwardRequest {
        q: TensorDesc::of(q),
        k: TensorDesc::of(k),
        v: TensorDesc::of(v),
        logits: logits.map(TensorDesc::of),
        params: params.map(TensorDesc::of),
        initial_state: opts.initial_state.map(TensorDesc::of),
        o,
        final_state,
        scale: opts.scale,
        output_final_state: opts.output_final_state,
        cu_seqlens: opts.cu_seqlens,
        variant: opts.variant,
        segments: opts.segments,
    }
}

mod backward;
mod decode;
pub use backward::{BackwardOptions, Gradients};
pub use decode::DecodeOptions;

#[cfg(test)]
mod tests;
