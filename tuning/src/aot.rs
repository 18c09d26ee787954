//! No GPU: compile ahead of time the kernels the runtime would use — the forward variant (`KernelSpec::default_for`),
//! the backward kernel set (`BackwardSpec::default_for`, key pass `"bwd"`) and, where it has them, the backward's
//! passes (the default's `Pass::Dv`, `Pass::Dq`, `Pass::Dk`, key passes `"dv"`, `"dq"`, `"dk"`) for every selected
//! (gate, dtype, d),
//! the decode step (key pass `"dec"`, any head dims) for every (gate, dtype) —
//! in parallel, into the cache at `--out` as UNTIMED entries (bucket `Bucket::of(1, 1)`, `validators.gpu = None`). A GPU run refines the cache later; the runtime uses an untimed entry when no timed one
//! is usable, so a deployment with this cache needs no NVRTC for the default variants.
//!
//! An entry already in the cache for the same variant, generated source and NVRTC version, whose cubin verifies,
//! is kept as it is (no compile): a second run is quick.

use crate::args::Options;
use crate::progress::{bar, say};
use gla_codegen::{
    generate, generate_backward, BackwardRecord, BackwardSpec, KernelSpec, Pass, SpecRecord,
};
use gla_core::{DType, Gate};
use gla_runtime::cache::{check, sha256_hex, Bucket, CacheKey, Entry, Environment, TuningCache};
use gla_runtime::nvrtc;
use rayon::prelude::*;
use std::path::PathBuf;
use std::time::Instant;

/// The bucket of untimed entries: they are for every problem size (the runtime takes the nearest bucket, and prefers
/// a timed entry at the same distance).
pub fn untimed_bucket() -> Bucket {
    Bucket::of(1, 1)
}

/// One (gate, dtype, d) of the ahead-of-time compile.
#[derive(Clone, Debug)]
pub struct AotRow {
    pub gate: String,
    pub dtype: DType,
    pub d: usize,
    /// The variant id ("-" when there is none).
    pub variant: String,
    pub cubin_bytes: usize,
    /// NVRTC's compile time; `None` when the cache already held this cubin (nothing compiled).
    pub compile_s: Option<f64>,
    /// What went wrong, if anything (no default variant, codegen or NVRTC error).
    pub problem: Option<String>,
}

/// What [`run`] did.
#[derive(Debug)]
pub struct AotReport {
    pub dir: PathBuf,
    pub rows: Vec<AotRow>,
    /// Entries in the cache after saving.
    pub entries: usize,
    pub nvrtc_version: (i32, i32),
    pub wall_s: f64,
}

impl AotReport {
    /// Whether every selected (gate, dtype, d) has its cubin in the cache.
    pub fn ok(&self) -> bool {
        self.rows.iter().all(|r| r.problem.is_none())
    }
}

/// A kernel the runtime would use: a forward variant or a backward kernel set.
#[derive(Clone, Copy)]
enum Kernel {
    Fwd(KernelSpec),
    /// A backward pass made of a forward variant (`Pass::Dv`, `Pass::Dq`, `Pass::Dk`: its record is the forward
    /// variant's).
    Pass(KernelSpec),
    Bwd(BackwardSpec),
    /// The decode step of a gate and dtype.
    Dec(&'static dyn Gate, DType),
}

impl Kernel {
    fn id(&self) -> String {
        match self {
            Kernel::Fwd(s) | Kernel::Pass(s) => s.id(),
            Kernel::Bwd(s) => s.id(),
            Kernel::Dec(g, dt) => gla_codegen::decode_id(*g, *dt),
        }
    }
    fn key(&self, gate: &dyn Gate, dtype: DType, d: usize) -> CacheKey {
        match self {
            Kernel::Fwd(_) => CacheKey::new(gate, dtype, d, d),
            Kernel::Pass(s) => CacheKey::of_pass(gate, dtype, s.dk as usize, s.dv as usize, s.pass),
            Kernel::Bwd(_) => CacheKey::backward(gate, dtype, d, d),
            Kernel::Dec(..) => CacheKey::decode(gate, dtype),
        }
    }
    fn source(&self) -> Result<String, String> {
        match self {
            Kernel::Fwd(s) | Kernel::Pass(s) => generate(s).map(|g| g.source),
            Kernel::Bwd(s) => generate_backward(s),
            Kernel::Dec(g, dt) => gla_codegen::generate_decode(*g, *dt),
        }
        .map_err(|e| format!("codegen: {e}"))
    }
}

struct Job {
    gate: &'static dyn Gate,
    dtype: DType,
    d: usize,
    kernel: Kernel,
    source: String,
    source_sha256: String,
}

/// Compile the default variants of `gates` × `o.dtypes_or_default()` × `o.dims_or_default()` (narrowed by `--only`)
/// into the cache at `o.out`, and save it. Errors: no NVRTC, or the cache cannot be read or written (the message
/// says which file and why).
pub fn run(gates: &[&'static dyn Gate], o: &Options) -> Result<AotReport, String> {
    let t0 = Instant::now();
    let nvrtc_version = nvrtc::probe().map_err(|e| e.to_string())?.version;
    let mut cache = TuningCache::open_or_empty(&o.out).map_err(|e| e.to_string())?;
    let env = Environment {
        nvrtc_version: Some(nvrtc_version),
        gpu: None,
    };
    let bucket = untimed_bucket();

    let mut rows = Vec::new();
    let mut jobs = Vec::new();
    for &gate in gates {
        for dtype in o.dtypes_or_default() {
            // (d = 0: the decode step serves every head dim)
            for d in std::iter::once(0).chain(o.dims_or_default()) {
                let row = |variant: String, problem: Option<String>| AotRow {
                    gate: gate.name().to_string(),
                    dtype,
                    d,
                    variant,
                    cubin_bytes: 0,
                    compile_s: None,
                    problem,
                };
                let kernels = if d == 0 {
                    vec![Ok(Kernel::Dec(gate, dtype))]
                } else {
                    vec![
                        KernelSpec::default_for(gate, dtype, d, d)
                            .map(Kernel::Fwd)
                            .map_err(|e| format!("no default variant: {e}")),
                        BackwardSpec::default_for(gate, dtype, d, d)
                            .map(Kernel::Bwd)
                            .map_err(|e| format!("no backward kernel set: {e}")),
                    ]
                    .into_iter()
                    // the backward's passes where the gate and default have them (dv: every gate but per-value
                    // ones on wgmma; dq, dk: per-key and scalar gates without a key split)
                    .chain([Pass::Dv, Pass::Dq, Pass::Dk].into_iter().filter_map(|p| {
                        KernelSpec::pass_default(gate, dtype, d, d, p)
                            .ok()
                            .map(|s| Ok(Kernel::Pass(s)))
                    }))
                    .collect()
                };
                for k in kernels {
                    let kernel = match k {
                        Ok(k) => k,
                        Err(e) => {
                            rows.push(row("-".into(), Some(e)));
                            continue;
                        }
                    };
                    if !o.selects(&kernel.id()) {
                        continue;
                    }
                    match kernel.source() {
                        Ok(source) => {
                            let source_sha256 = sha256_hex(source.as_bytes());
                            jobs.push(Job {
                                gate,
                                dtype,
                                d,
                                kernel,
                                source,
                                source_sha256,
                            });
                        }
                        Err(e) => rows.push(row(kernel.id(), Some(e))),
                    }
                }
            }
        }
    }

    // Up to date: an untimed entry of this variant and source, by this NVRTC, with a cubin that verifies.
    let mut todo = Vec::new();
    for job in jobs {
        let key = job.kernel.key(job.gate, job.dtype, job.d);
        let current = cache.entries().iter().find(|e| {
            e.key == key
                && e.bucket == bucket
                && !e.is_timed()
                && e.variant == job.kernel.id()
                && check(e, &env, &job.source_sha256).is_ok()
        });
        match current.map(|e| cache.cubin(e)) {
            Some(Ok(bytes)) => rows.push(AotRow {
                gate: job.gate.name().to_string(),
                dtype: job.dtype,
                d: job.d,
                variant: job.kernel.id(),
                cubin_bytes: bytes.len(),
                compile_s: None,
                problem: None,
            }),
            _ => todo.push(job),
        }
    }

    // Longest first (the time grows with d): the two-core tail is then short.
    todo.sort_by_key(|j| std::cmp::Reverse(j.d));
    println!(
        "compiling {} default kernel(s) (forward variants, backward sets) for {} ahead of time with NVRTC {}.{} on {} threads ({} already in {})",
        todo.len(),
        nvrtc::ARCH,
        nvrtc_version.0,
        nvrtc_version.1,
        rayon::current_num_threads(),
        rows.iter().filter(|r| r.problem.is_none()).count(),
        o.out.display()
    );
    let pb = bar(todo.len(), "compiling");
    let compiled: Vec<(Job, Result<nvrtc::Compiled, String>)> = todo
        .into_par_iter()
        .map(|job| {
            let id = job.kernel.id();
            pb.set_message(id.clone());
            let c = nvrtc::compile(&job.source, &id).map_err(|e| e.to_string());
            match &c {
                Ok(c) => say(
                    &pb,
                    format!(
                        "  {id}: {:.1} s, {} KB",
                        c.compile_ms / 1e3,
                        c.cubin.len() / 1024
                    ),
                ),
                Err(_) => say(&pb, format!("  {id}: FAILED")),
            }
            pb.inc(1);
            (job, c)
        })
        .collect();
    pb.finish_and_clear();

    for (job, c) in compiled {
        let mut row = AotRow {
            gate: job.gate.name().to_string(),
            dtype: job.dtype,
            d: job.d,
            variant: job.kernel.id(),
            cubin_bytes: 0,
            compile_s: None,
            problem: None,
        };
        match c {
            Err(e) => row.problem = Some(e),
            Ok(c) => {
                row.cubin_bytes = c.cubin.len();
                row.compile_s = Some(c.compile_ms / 1e3);
                let (spec, backward) = match job.kernel {
                    Kernel::Fwd(s) | Kernel::Pass(s) => (Some(SpecRecord::of(&s)), None),
                    Kernel::Bwd(s) => (None, Some(BackwardRecord::of(&s, None, None))),
                    Kernel::Dec(..) => (None, None),
                };
                let entry = Entry {
                    spec,
                    backward,
                    ..Entry::compiled(
                        job.kernel.key(job.gate, job.dtype, job.d),
                        bucket,
                        job.kernel.id(),
                        nvrtc_version,
                        job.source_sha256,
                        None,
                    )
                };
                // An untimed entry never replaces a timed one of the same (key, bucket).
                if !cache.accepts(&entry) {
                    row.problem = None;
                    row.variant = format!("{} (a timed entry is kept)", row.variant);
                }
                cache.insert(entry, c.cubin);
            }
        }
        rows.push(row);
    }
    let entries = cache.save().map_err(|e| e.to_string())?;
    rows.sort_by_key(|r| {
        (
            r.gate.clone(),
            DType::ALL.iter().position(|&d| d == r.dtype),
            r.d,
            r.variant.clone(),
        )
    });
    Ok(AotReport {
        dir: o.out.clone(),
        rows,
        entries,
        nvrtc_version,
        wall_s: t0.elapsed().as_secs_f64(),
    })
}

/// The summary table (gate, dtype, d, variant, cubin KB, compile s) and the closing lines.
pub fn print_report(r: &AotReport) {
    println!(
        "\n{:<12} {:<5} {:>4} {:<58} {:>9} {:>9}",
        "gate", "dtype", "d", "variant", "cubin KB", "compile s"
    );
    for row in &r.rows {
        let compile = match (row.compile_s, &row.problem) {
            (_, Some(_)) => "FAILED".to_string(),
            (Some(s), None) => format!("{s:.1}"),
            (None, None) => "cached".to_string(),
        };
        println!(
            "{:<12} {:<5} {:>4} {:<58} {:>9.0} {:>9}",
            row.gate,
            row.dtype.as_str(),
            row.d,
            row.variant,
            row.cubin_bytes as f64 / 1024.0,
            compile
        );
    }
    for row in r.rows.iter().filter(|r| r.problem.is_some()) {
        eprintln!(
            "FAILED {} {} d={} {}: {}",
            row.gate,
            row.dtype,
            row.d,
            row.variant,
            row.problem.as_deref().unwrap_or("")
        );
    }
    let compiled = r
        .rows
        .iter()
        .filter(|r| r.compile_s.is_some() && r.problem.is_none())
        .count();
    println!(
        "\n{} untimed entries in {} ({} compiled now, {} already there) in {:.1} s",
        r.entries,
        r.dir.display(),
        compiled,
        r.rows
            .iter()
            .filter(|r| r.compile_s.is_none() && r.problem.is_none())
            .count(),
        r.wall_s
    );
    println!(
        "timing needs a GPU: run autotune on a Hopper GPU (H100 / H200) to time the candidates and refine this cache"
    );
}
