//! With a GPU: the search. For each selected (gate, dtype, d) and each target bucket ([`decide::targets`]):
//!
//! 1. every candidate ([`decide::candidates`]) is compiled (rayon + NVRTC, with the options the runtime uses, so the
//!    runtime's own compile of the same source hits the driver's compute cache), one key after another on all cores
//!    but one a device — while the devices already check and time the keys compiled before (each device's worker
//!    loads a key's cubins itself, so no module load runs beside a timed kernel);
//!
//! then one worker a device (every GPU of the host, or `--devices`) takes the next compiled (gate, dtype, d) and does
//! 2–4 for it:
//! 2. every candidate runs a small random problem ([`decide::CHECK_PROBLEM`], with an initial state) at every
//!    strength and is compared with the f64 reference ([`decide::check_passes`]) BEFORE it may be timed: a failing
//!    candidate is reported and never cached;
//! 3. the rest are timed at the bucket's problem with CUDA events, [`decide::WARMUPS`] warm-ups and the L2 flushed
//!    before each run: screening runs worth [`decide::SCREEN_BUDGET_MS`] of GPU time each (2–5 runs; the first
//!    alone for a run of [`decide::LONG_RUN_MS`] or more), then
//!    candidates slower than [`decide::DROP_RATIO`] × the best are dropped ([`decide::survivors`]; the default variant
//!    is kept for its baseline time) and the others get runs worth [`decide::FINAL_BUDGET_MS`] more (3–20, 2 for
//!    long runs,
//!    [`screen_then_time`]); a candidate's time is the median of its runs, its score the worst over the gate's
//!    strengths ([`decide::strengths`], [`decide::worst_case`]);
//! 4. the winner ([`decide::winner`]) goes into the cache as a timed entry with its cubin, and the cache is saved
//!    after each (gate, dtype, d).
//!
//! The timed problems' inputs are tiled on the device from one pool of draws ([`Pool`], `DeviceTensor::tiled`).

use crate::args::Options;
use crate::decide::{self, Strength, Target};
use crate::inputs::{host_tensor, rel_rms, shifted, HostInputs, Pool};
use crate::progress::{bar, say};
use gla_codegen::{generate, KernelSpec, SpecRecord};
use gla_core::{DType, Dims, Gate, GateShape};
use gla_runtime::cache::{sha256_hex, CacheKey, Entry, Environment, GpuFacts, Timing, TuningCache};
use gla_runtime::timing::{bench, L2Flush};
use gla_runtime::{nvrtc, CompileOptions, DeviceTensor, ForwardOptions, Gla};
use rayon::prelude::*;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

/// One (gate, dtype, d) and its candidates.
pub(crate) struct Key {
    pub(crate) gate: &'static dyn Gate,
    pub(crate) dtype: DType,
    pub(crate) d: usize,
    pub(crate) specs: Vec<KernelSpec>,
}

impl Key {
    pub(crate) fn label(&self) -> String {
        format!("{} {} d{}", self.gate.name(), self.dtype, self.d)
    }
}

/// A compiled candidate.
pub(crate) struct Compiled {
    pub(crate) spec: KernelSpec,
    cubin: Vec<u8>,
    source_sha256: String,
}

/// A candidate that was not cached, and why.
#[derive(Clone, Debug)]
pub struct Failure {
    pub key: String,
    pub variant: String,
    pub what: String,
}

/// One line of the summary: the winner of a key at a bucket.
#[derive(Clone, Debug)]
pub struct Row {
    pub key: String,
    pub target: Target,
    pub winner: String,
    pub ms: f64,
    pub default_ms: Option<f64>,
    pub timed: usize,
    /// Wall seconds its device spent timing the candidates at this target.
    pub secs: f64,
}

/// What [`run`] did.
#[derive(Debug)]
pub struct SearchReport {
    pub dir: PathBuf,
    pub gpu: String,
    pub rows: Vec<Row>,
    pub failures: Vec<Failure>,
    pub entries: usize,
    pub wall_s: f64,
}

/// The inputs of one problem on the device: q, k, v, params, and the logits at each strength.
pub(crate) struct DeviceInputs {
    pub(crate) q: DeviceTensor,
    pub(crate) k: DeviceTensor,
    pub(crate) v: DeviceTensor,
    pub(crate) params: Option<DeviceTensor>,
    /// One per strength (`None` for fixed gates).
    pub(crate) logits: Vec<Option<DeviceTensor>>,
    pub(crate) h0: Option<DeviceTensor>,
}

type Res<T> = gla_core::error::Result<T>;

pub(crate) fn upload(
    gla: &Gla,
    gate: &'static dyn Gate,
    x: &HostInputs,
    strengths: &[Strength],
) -> Res<DeviceInputs> {
    let d = x.dims;
    let dt = x.dtype;
    let host = |v: &[f32], shape: &[usize]| host_tensor(dt, shape, v);
    let lshape = gla_runtime::forward::logits_shape(gate.shape(), &d);
    let np = gate.params().len();
    let logits = strengths
        .iter()
        .map(|s| {
            if gate.shape() == GateShape::Fixed {
                Ok(None)
            } else {
                let l = if s.shift == 0.0 {
                    x.logits.clone()
                } else {
                    shifted(&x.logits, s.shift, dt)
                };
                Ok(Some(gla.upload(&host(&l, &lshape)?)?))
            }
        })
        .collect::<Res<Vec<_>>>()?;
    Ok(DeviceInputs {
        q: gla.upload(&host(&x.q, &d.q_shape())?)?,
        k: gla.upload(&host(&x.k, &d.q_shape())?)?,
        v: gla.upload(&host(&x.v, &d.v_shape())?)?,
        params: if np > 0 {
            Some(DeviceTensor::from_f32(gla.gpu(), &[d.h, np], &x.params)?)
        } else {
            None
        },
        logits,
        h0: match &x.initial_state {
            Some(s) => Some(DeviceTensor::from_f32(
                gla.gpu(),
                &[d.b, d.h, d.dk, d.dv],
                s,
            )?),
            None => None,
        },
    })
}

/// The timed problem's device inputs, tiled from `pool` on the device (`DeviceTensor::tiled`): q, k, v, the logits
/// once per strength (the pool shifted), the parameters; no initial state.
pub(crate) fn upload_pool(
    gla: &Gla,
    gate: &'static dyn Gate,
    pool: &Pool,
    strengths: &[Strength],
) -> Res<DeviceInputs> {
    let d = pool.dims;
    let base = pool.tensor(0.0)?;
    let tiled = |shape: &[usize], which: usize| {
        DeviceTensor::tiled(gla.gpu(), shape, &base, pool.offsets[which])
    };
    let lshape = gla_runtime::forward::logits_shape(gate.shape(), &d);
    let logits = strengths
        .iter()
        .map(|s| match gate.shape() {
            GateShape::Fixed => Ok(None),
            _ if s.shift == 0.0 => tiled(&lshape, 3).map(Some),
            _ => DeviceTensor::tiled(gla.gpu(), &lshape, &pool.tensor(s.shift)?, pool.offsets[3])
                .map(Some),
        })
        .collect::<Res<Vec<_>>>()?;
    let np = gate.params().len();
    Ok(DeviceInputs {
        q: tiled(&d.q_shape(), 0)?,
        k: tiled(&d.q_shape(), 1)?,
        v: tiled(&d.v_shape(), 2)?,
        params: if np > 0 {
            Some(DeviceTensor::from_f32(gla.gpu(), &[d.h, np], &pool.params)?)
        } else {
            None
        },
        logits,
        h0: None,
    })
}

/// The (gate, dtype, d) keys of `gates` × `--dtypes` × `--dims` that have candidates ([`decide::candidates`]), dtype
/// by dtype in `--dtypes`' order (bf16 first by default: a run cut short has cached what training uses most).
pub(crate) fn keys(gates: &[&'static dyn Gate], o: &Options) -> Vec<Key> {
    let dims = o.dims_or_default();
    o.dtypes_or_default()
        .into_iter()
        .flat_map(|dtype| {
            let dims = dims.clone();
            gates.iter().flat_map(move |&gate| {
                dims.clone().into_iter().map(move |d| Key {
                    gate,
                    dtype,
                    d,
                    specs: decide::candidates(gate, dtype, d, o.only.as_deref()),
                })
            })
        })
        .filter(|k| !k.specs.is_empty())
        .collect()
}

/// Step 1 at once (`--regret`): every candidate of `keys` compiled in parallel (rayon + NVRTC) and loaded on `gla`,
/// keyed by (id, gate content hash); the ones that fail are returned as failures.
pub(crate) fn compile_keys(
    gla: &Gla,
    keys: &[Key],
) -> (HashMap<(String, u64), Compiled>, Vec<Failure>) {
    let results: Vec<(&Key, KernelSpec, Result<Compiled, String>)> = keys
        .iter()
        .flat_map(|k| k.specs.iter().map(move |s| (k, *s)))
        .collect::<Vec<_>>()
        .into_par_iter()
        .map(|(k, s)| (k, s, compile(&s).and_then(|c| load(gla, &c).map(|()| c))))
        .collect();
    let mut compiled = HashMap::new();
    let mut failures = Vec::new();
    for (k, s, r) in results {
        match r {
            Ok(c) => {
                compiled.insert((s.id(), s.gate.content_hash()), c);
            }
            Err(what) => failures.push(Failure {
                key: k.label(),
                variant: s.id(),
                what: format!("compile failed: {what}"),
            }),
        }
    }
    (compiled, failures)
}

/// Compile one candidate with NVRTC (once, whatever the number of devices): its cubin is what every device loads as
/// is ([`load`]) — the kernel that is checked and timed is the cubin that gets cached.
fn compile(spec: &KernelSpec) -> Result<Compiled, String> {
    let id = spec.id();
    let gen = generate(spec).map_err(|e| format!("codegen: {e}"))?;
    let opts = CompileOptions {
        driver_cache: true,
        ..CompileOptions::default()
    };
    let c = nvrtc::compile_with(&gen.source, &id, &opts).map_err(|e| e.to_string())?;
    Ok(Compiled {
        spec: *spec,
        cubin: c.cubin,
        source_sha256: sha256_hex(gen.source.as_bytes()),
    })
}

/// Load a compiled candidate into one device's runtime (later calls naming its spec run exactly this cubin).
fn load(gla: &Gla, c: &Compiled) -> Result<(), String> {
    gla.load_cubin(&c.spec, &c.cubin)
        .map(|_| ())
        .map_err(|e| format!("load on device {}: {e}", gla.gpu().info().ordinal))
}

/// Step 2: which compiled candidates of `key` match the f64 reference at every strength (index into `cands`); the
/// others are pushed to `failures`.
pub(crate) fn check(
    gla: &Gla,
    key: &Key,
    cands: &[&Compiled],
    failures: &mut Vec<Failure>,
    pb: &indicatif::ProgressBar,
) -> Res<Vec<usize>> {
    let (b, t, h) = decide::CHECK_PROBLEM;
    let dims = Dims::new(b, t, h, key.d, key.d);
    let strengths = decide::strengths(key.gate.shape());
    let x = HostInputs::random(key.gate, dims, key.dtype, 7 + key.d as u64);
    let wants = strengths
        .iter()
        .map(|s| x.reference(key.gate, &shifted(&x.logits, s.shift, key.dtype)))
        .collect::<Res<Vec<_>>>()?;
    let dev = upload(gla, key.gate, &x, &strengths)?;
    let mut passed = Vec::new();
    for (i, c) in cands.iter().enumerate() {
        let mut worst: Option<String> = None;
        for (li, (s, want)) in strengths.iter().zip(&wants).enumerate() {
            let res = (|| -> Res<(f64, f64)> {
                let mut o = gla.poisoned(key.dtype, &dims.v_shape())?;
                let mut ht = gla.poisoned(DType::F32, &[b, h, key.d, key.d])?;
                let opts = ForwardOptions {
                    variant: Some(c.spec),
                    initial_state: dev.h0.as_ref(),
                    ..Default::default()
                };
                gla.forward_into(
                    key.gate,
                    &dev.q,
                    &dev.k,
                    &dev.v,
                    dev.logits[li].as_ref(),
                    dev.params.as_ref(),
                    &opts,
                    &mut o,
                    Some(&mut ht),
                )?;
                let got_o: Vec<f64> = o.to_f32()?.into_iter().map(f64::from).collect();
                let got_s: Vec<f64> = ht.to_f32()?.into_iter().map(f64::from).collect();
                Ok((rel_rms(&got_o, &want.0), rel_rms(&got_s, &want.1)))
            })();
            match res {
                Ok((eo, es)) if decide::check_passes(eo, es, key.dtype) => {}
                Ok((eo, es)) => {
                    worst = Some(format!(
                        "wrong at {}: rel RMS o {eo:.2e}, final state {es:.2e} (tolerance {:.0e})",
                        s.name,
                        decide::tolerance(key.dtype)
                    ));
                    break;
                }
                Err(e) => {
                    gla.synchronize()?; // a broken context ends the run
                    worst = Some(format!("failed at {}: {e}", s.name));
                    break;
                }
            }
        }
        match worst {
            None => passed.push(i),
            Some(what) => {
                say(
                    pb,
                    format!("  {} {}: {what} — not cached", key.label(), c.spec.id()),
                );
                failures.push(Failure {
                    key: key.label(),
                    variant: c.spec.id(),
                    what,
                });
            }
        }
        pb.inc(1);
    }
    Ok(passed)
}

/// Step 3's schedule over candidates with `samples` / `failed` state each: a probe run each says how long one run
/// takes — each candidate's first launch, cold, is its probe where it takes [`decide::LONG_RUN_MS`] or more, else it
/// was the warm-up ([`decide::WARMUPS`]) and a second launch is the probe — then more screening runs up to
/// [`decide::SCREEN_BUDGET_MS`] of GPU time ([`decide::screen_runs`]: none more for a run of
/// [`decide::LONG_RUN_MS`] or longer); the survivors ([`decide::survivors`] within `ratio` × the best,
/// [`decide::DROP_RATIO`] in a search, ∞ for an exhaustive one; `default` always) get runs worth
/// [`decide::FINAL_BUDGET_MS`] more ([`decide::final_runs`]; one warm-up first where a run is under a millisecond:
/// other candidates ran in between);
/// `measure(i, warmups, runs, samples, failed)` adds runs, `score(samples, failed)` is a candidate's score (∞ when
/// it failed). Returns the final scores (∞ for the dropped).
pub(crate) fn screen_then_time<S: Clone>(
    samples: &mut [S],
    failed: &mut [bool],
    default: Option<usize>,
    ratio: f64,
    measure: &mut impl FnMut(usize, usize, usize, &mut S, &mut bool) -> Res<()>,
    score: impl Fn(&S, bool) -> f64,
) -> Res<Vec<f64>> {
    let n = samples.len();
    for i in 0..n {
        // (A cold start — lazy module load, cold caches — is far below the spread of a long run, and the final median
        // is of warm runs; a short run's would be off by more than its spread.)
        let mut first = samples[i].clone();
        measure(i, 0, 1, &mut first, &mut failed[i])?;
        if failed[i] || score(&first, false) >= decide::LONG_RUN_MS {
            samples[i] = first;
        } else {
            measure(i, 0, 1, &mut samples[i], &mut failed[i])?;
        }
    }
    let probe: Vec<f64> = (0..n).map(|i| score(&samples[i], failed[i])).collect();
    for i in 0..n {
        let more = decide::screen_runs(probe[i]) - 1;
        if !failed[i] && more > 0 {
            measure(i, 0, more, &mut samples[i], &mut failed[i])?;
        }
    }
    let screen: Vec<f64> = (0..n).map(|i| score(&samples[i], failed[i])).collect();
    let keep = decide::survivors(&screen, ratio, default);
    for i in (0..n).filter(|&i| keep[i]) {
        let warm = usize::from(probe[i] < 1.0);
        let runs = decide::final_runs(probe[i]);
        measure(i, warm, runs, &mut samples[i], &mut failed[i])?;
    }
    Ok((0..n)
        .map(|i| {
            if keep[i] {
                score(&samples[i], failed[i])
            } else {
                f64::INFINITY
            }
        })
        .collect())
}

/// Step 3's outcome from the scores of [`time_candidates`]: (index of the winner, its score, the score of
/// `default`), or None where no score is finite.
fn outcome(finals: &[f64], default: Option<usize>) -> Option<(usize, f64, Option<f64>)> {
    let default_ms = default.map(|d| finals[d]).filter(|m| m.is_finite());
    decide::winner(finals).map(|w| (w, finals[w], default_ms))
}

/// Step 3's scores at one target: each candidate's (worst over the strengths of its median), ∞ for a dropped or
/// failed one.
pub(crate) fn time_candidates(
    gla: &Gla,
    key: &Key,
    cands: &[KernelSpec],
    default: Option<usize>,
    ratio: f64,
    target: &Target,
    flush: &mut L2Flush,
) -> Res<Vec<f64>> {
    let (b, t, h) = target.problem;
    let dims = Dims::new(b, t, h, key.d, key.d);
    let strengths = decide::strengths(key.gate.shape());
    let dev = upload_pool(
        gla,
        key.gate,
        &Pool::new(key.gate, dims, key.dtype, 42),
        &strengths,
    )?;
    let mut o = gla.zeros(key.dtype, &dims.v_shape())?;
    // samples[candidate][strength]; a candidate whose launch fails is out (score ∞).
    let mut samples: Vec<Vec<Vec<f64>>> = vec![vec![Vec::new(); strengths.len()]; cands.len()];
    let mut failed = vec![false; cands.len()];
    let mut measure = |i: usize,
                       warmups: usize,
                       runs: usize,
                       samples: &mut Vec<Vec<f64>>,
                       failed: &mut bool|
     -> Res<()> {
        let opts = ForwardOptions {
            variant: Some(cands[i]),
            ..Default::default()
        };
        for (j, logits) in dev.logits.iter().enumerate() {
            let st = bench(gla.gpu(), warmups, runs, Some(&mut *flush), || {
                gla.forward_into(
                    key.gate,
                    &dev.q,
                    &dev.k,
                    &dev.v,
                    logits.as_ref(),
                    dev.params.as_ref(),
                    &opts,
                    &mut o,
                    None,
                )
            });
            match st {
                Ok(st) => samples[j].extend(st.samples_ms.iter().map(|&s| s as f64)),
                Err(e) => {
                    // A broken context ends the run; a refused launch (e.g. out of memory) drops the candidate.
                    gla.synchronize()?;
                    *failed = true;
                    eprintln!(
                        "  {} {} at {:?}: {e}",
                        key.label(),
                        cands[i].id(),
                        target.problem
                    );
                    break;
                }
            }
        }
        Ok(())
    };
    screen_then_time(
        &mut samples,
        &mut failed,
        default,
        ratio,
        &mut measure,
        |s: &Vec<Vec<f64>>, failed| decide::score(s, failed),
    )
}

/// Run the search for `gates` on the GPUs of `glas` (one runtime a device; see the module docs): the candidates
/// are compiled once, then each device's worker takes the next (gate, dtype, d) — check, then time at every target
/// — until none is left, and its winners go into the one cache (saved after every key). Errors: no NVRTC, an
/// unreadable or unwritable cache, a broken CUDA context (the cache keeps what was found before it).
pub fn run(glas: &[Gla], gates: &[&'static dyn Gate], o: &Options) -> Result<SearchReport, String> {
    let t0 = Instant::now();
    let Some(first) = glas.first() else {
        return Err("no device to tune on".into());
    };
    let nvrtc_version = nvrtc::probe().map_err(|e| e.to_string())?.version;
    let cache = TuningCache::open_or_empty(&o.out).map_err(|e| e.to_string())?;
    let targets = decide::targets(&o.buckets);
    let mut keys = keys(gates, o);
    if o.resume {
        crate::resume::skip_tuned(
            &mut keys,
            &cache,
            &targets,
            &Environment {
                nvrtc_version: Some(nvrtc_version),
                gpu: Some(GpuFacts::from(first.gpu().info())),
            },
            "keys",
            |k| CacheKey::new(k.gate, k.dtype, k.d, k.d),
            |k, id| {
                let s = k.specs.iter().find(|s| s.id() == id)?;
                generate(s).ok().map(|g| sha256_hex(g.source.as_bytes()))
            },
        );
    }
    let n_specs: usize = keys.iter().map(|k| k.specs.len()).sum();
    let devices: Vec<String> = glas
        .iter()
        .map(|g| {
            let i = g.gpu().info();
            format!(
                "{} {} ({} SMs, driver {})",
                i.ordinal, i.name, i.sm_count, i.driver_version
            )
        })
        .collect();
    println!(
        "autotune on {} device(s) [{}]: {} keys (gate x dtype x d), {} candidates, {} buckets; cache {}",
        glas.len(),
        devices.join("; "),
        keys.len(),
        n_specs,
        targets.len(),
        o.out.display()
    );
    // 1. Compile (CPU) while the devices time: a pool on all cores but one a device compiles every candidate in key
    // order and hands each key over when its last candidate is done; 2–4. one worker a device takes the next compiled
    // key: loads its cubins, checks its candidates, times them at every target, caches the winners.
    struct Shared {
        cache: TuningCache,
        rows: Vec<Row>,
        failures: Vec<Failure>,
        error: Option<String>,
    }
    let shared = std::sync::Mutex::new(Shared {
        cache,
        rows: Vec::new(),
        failures: Vec::new(),
        error: None,
    });
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(cores.saturating_sub(glas.len()).max(1))
        .build()
        .map_err(|e| format!("compile thread pool: {e}"))?;
    let (tx, rx) = std::sync::mpsc::channel::<(usize, HashMap<(String, u64), Compiled>)>();
    let rx = std::sync::Mutex::new(rx);
    let pb = bar(
        n_specs + keys.len() * targets.len(),
        "compiling, checking and timing",
    );
    let lock = || shared.lock().unwrap_or_else(|p| p.into_inner());
    std::thread::scope(|scope| {
        {
            let (keys, pb, lock, pool) = (&keys, &pb, &lock, &pool);
            scope.spawn(move || {
                // Every candidate of every key, taken in key order by whichever compile thread is free (so keys
                // complete roughly in order and all cores stay busy); a key goes to the workers when its last
                // candidate is done.
                let remaining: Vec<AtomicUsize> = keys
                    .iter()
                    .map(|k| AtomicUsize::new(k.specs.len()))
                    .collect();
                let done: Vec<std::sync::Mutex<HashMap<(String, u64), Compiled>>> =
                    keys.iter().map(|_| Default::default()).collect();
                let n_ok = AtomicUsize::new(0);
                pool.install(|| {
                    keys.iter()
                        .enumerate()
                        .flat_map(|(i, k)| k.specs.iter().map(move |s| (i, s)))
                        .par_bridge()
                        .for_each(|(i, s)| {
                            if lock().error.is_none() {
                                pb.set_message(format!("compiling {}", s.id()));
                                match compile(s) {
                                    Ok(c) => {
                                        n_ok.fetch_add(1, Ordering::Relaxed);
                                        done[i]
                                            .lock()
                                            .unwrap_or_else(|p| p.into_inner())
                                            .insert((s.id(), s.gate.content_hash()), c);
                                    }
                                    Err(what) => {
                                        let f = Failure {
                                            key: keys[i].label(),
                                            variant: s.id(),
                                            what: format!("compile failed: {what}"),
                                        };
                                        say(
                                            pb,
                                            format!(
                                                "  {} {}: {} — not cached",
                                                f.key, f.variant, f.what
                                            ),
                                        );
                                        pb.inc(1);
                                        lock().failures.push(f);
                                    }
                                }
                            }
                            if remaining[i].fetch_sub(1, Ordering::AcqRel) == 1 {
                                let c = std::mem::take(
                                    &mut *done[i].lock().unwrap_or_else(|p| p.into_inner()),
                                );
                                let _ = tx.send((i, c)); // (the workers may have stopped)
                            }
                        })
                });
                drop(tx);
                say(
                    pb,
                    format!(
                        "compiled {} of {n_specs} candidates in {:.1} s (timing alongside)",
                        n_ok.load(Ordering::Relaxed),
                        t0.elapsed().as_secs_f64()
                    ),
                );
            });
        }
        for gla in glas {
            let (keys, targets, pb, rx, lock) = (&keys, &targets, &pb, &rx, &lock);
            scope.spawn(move || {
                let facts = GpuFacts::from(gla.gpu().info());
                let dev = gla.gpu().info().ordinal;
                let mut flush = match L2Flush::new(gla.gpu()) {
                    Ok(f) => f,
                    Err(e) => {
                        lock()
                            .error
                            .get_or_insert(format!("device {dev}: L2 flush buffer: {e}"));
                        return;
                    }
                };
                loop {
                    // The next compiled key (in order; the lock is held only while waiting for it).
                    let next = rx.lock().unwrap_or_else(|p| p.into_inner()).recv();
                    let Ok((i, compiled)) = next else { break };
                    let k = &keys[i];
                    if lock().error.is_some() {
                        break; // another device's context broke: stop taking work
                    }
                    // Loaded here, by the device's own worker: a module load on another thread would hold the
                    // driver while this one times, and an event pair would take in the stall.
                    let mut fails = Vec::new();
                    let cands: Vec<&Compiled> = k
                        .specs
                        .iter()
                        .filter_map(|s| compiled.get(&(s.id(), s.gate.content_hash())))
                        .filter(|c| match load(gla, c) {
                            Ok(()) => true,
                            Err(what) => {
                                say(
                                    pb,
                                    format!("  {} {}: {what} — not cached", k.label(), c.spec.id()),
                                );
                                pb.inc(1);
                                fails.push(Failure {
                                    key: k.label(),
                                    variant: c.spec.id(),
                                    what,
                                });
                                false
                            }
                        })
                        .collect();
                    let passing = match check(gla, k, &cands, &mut fails, pb) {
                        Ok(ok) => ok.into_iter().map(|j| cands[j]).collect::<Vec<_>>(),
                        Err(e) => {
                            lock()
                                .error
                                .get_or_insert(format!("{} on device {dev}: {e}", k.label()));
                            break;
                        }
                    };
                    lock().failures.extend(fails);
                    if passing.is_empty() {
                        say(
                            pb,
                            format!(
                                "  {}: no candidate passed the reference check; nothing cached",
                                k.label()
                            ),
                        );
                        pb.inc(targets.len() as u64);
                        continue;
                    }
                    let default_id = KernelSpec::default_for(k.gate, k.dtype, k.d, k.d)
                        .ok()
                        .map(|s| s.id());
                    let default = passing.iter().position(|c| Some(c.spec.id()) == default_id);
                    let strengths: Vec<String> = decide::strengths(k.gate.shape())
                        .iter()
                        .map(|s| s.name.to_string())
                        .collect();
                    for target in targets {
                        pb.set_message(format!(
                            "{} {:?} (device {dev})",
                            k.label(),
                            target.problem
                        ));
                        let specs: Vec<KernelSpec> = passing.iter().map(|c| c.spec).collect();
                        let started = Instant::now();
                        let mut all_ms = std::collections::BTreeMap::new();
                        let res = match time_candidates(
                            gla,
                            k,
                            &specs,
                            default,
                            decide::DROP_RATIO,
                            target,
                            &mut flush,
                        ) {
                            Ok(finals) => {
                                all_ms.extend(
                                    specs
                                        .iter()
                                        .zip(&finals)
                                        .filter(|(_, m)| m.is_finite())
                                        .map(|(s, m)| (s.id(), *m)),
                                );
                                outcome(&finals, default)
                            }
                            Err(e) => {
                                lock().error.get_or_insert(format!(
                                    "{} at {:?} on device {dev}: {e}",
                                    k.label(),
                                    target.problem
                                ));
                                break;
                            }
                        };
                        pb.inc(1);
                        let Some((w, ms, default_ms)) = res else {
                            say(
                                pb,
                                format!(
                                    "  {} at {:?}: no candidate could be timed",
                                    k.label(),
                                    target.problem
                                ),
                            );
                            continue;
                        };
                        let c = passing[w];
                        let timing = Timing {
                            median_ms: ms,
                            default_ms,
                            candidates: passing.len() as u32,
                            strengths: strengths.clone(),
                            all_ms,
                        };
                        let entry = Entry {
                            spec: Some(SpecRecord::of(&c.spec)),
                            ..Entry::compiled(
                                CacheKey::new(k.gate, k.dtype, k.d, k.d),
                                target.bucket,
                                c.spec.id(),
                                nvrtc_version,
                                c.source_sha256.clone(),
                                Some((facts.clone(), timing)),
                            )
                        };
                        say(
                            pb,
                            format!(
                                "  {} {:?}: {} {:.3} ms (default {}; device {dev})",
                                k.label(),
                                target.problem,
                                c.spec.id(),
                                ms,
                                default_ms.map_or("-".to_string(), |d| format!("{d:.3} ms"))
                            ),
                        );
                        let mut sh = lock();
                        sh.cache.insert(entry, c.cubin.clone());
                        sh.rows.push(Row {
                            key: k.label(),
                            target: *target,
                            winner: c.spec.id(),
                            ms,
                            default_ms,
                            timed: passing.len(),
                            secs: started.elapsed().as_secs_f64(),
                        });
                    }
                    let mut sh = lock();
                    if let Err(e) = sh.cache.save() {
                        sh.error
                            .get_or_insert(format!("saving {}: {e}", o.out.display()));
                    }
                }
            });
        }
    });
    pb.finish_and_clear();
    let mut sh = shared.into_inner().unwrap_or_else(|p| p.into_inner());
    let entries = sh.cache.save().map_err(|e| e.to_string())?;
    if let Some(e) = sh.error.take() {
        return Err(format!(
            "{e} (the cache keeps the {entries} entries found before)"
        ));
    }
    // Rows in a stable order whatever device finished first.
    sh.rows.sort_by(|a, b| {
        (
            &a.key,
            a.target.bucket.rows_log2,
            a.target.bucket.tokens_log2,
        )
            .cmp(&(
                &b.key,
                b.target.bucket.rows_log2,
                b.target.bucket.tokens_log2,
            ))
    });
    let gpu = first.gpu().info().name.clone();
    Ok(SearchReport {
        dir: o.out.clone(),
        gpu: format!("{gpu} x{}", glas.len()),
        rows: sh.rows,
        failures: sh.failures,
        entries,
        wall_s: t0.elapsed().as_secs_f64(),
    })
}

/// The summary table (key, bucket, winner, ms, default ms, gain) and the failures.
pub fn print_report(r: &SearchReport) {
    print_rows("key", &r.rows, &r.failures);
    print_time_split(&r.rows);
    println!(
        "\n{} timed winners on {} written; {} entries in {}; {} candidate(s) failed; {:.1} s",
        r.rows.len(),
        r.gpu,
        r.entries,
        r.dir.display(),
        r.failures.len(),
        r.wall_s
    );
}

/// Where the devices' timing went: seconds by dtype and by bucket (what a faster schedule has to cut).
pub(crate) fn print_time_split(rows: &[Row]) {
    let mut by_dtype: Vec<(String, f64)> = Vec::new();
    let mut by_bucket: Vec<((u32, u32), f64)> = Vec::new();
    for row in rows {
        let dtype = row.key.split_whitespace().nth(1).unwrap_or("?").to_string();
        match by_dtype.iter_mut().find(|(d, _)| *d == dtype) {
            Some(x) => x.1 += row.secs,
            None => by_dtype.push((dtype, row.secs)),
        }
        let b = (row.target.bucket.rows_log2, row.target.bucket.tokens_log2);
        match by_bucket.iter_mut().find(|(x, _)| *x == b) {
            Some(x) => x.1 += row.secs,
            None => by_bucket.push((b, row.secs)),
        }
    }
    by_bucket.sort_by_key(|x| x.0);
    let total: f64 = rows.iter().map(|r| r.secs).sum();
    let fmt = |v: Vec<String>| v.join(", ");
    println!(
        "
timing {total:.1} s of device time; by dtype: {}; by bucket (rows x tokens): {}",
        fmt(by_dtype
            .iter()
            .map(|(d, s)| format!("{d} {s:.1} s"))
            .collect()),
        fmt(by_bucket
            .iter()
            .map(|((r, t), s)| format!("2^{r}x2^{t} {s:.1} s"))
            .collect())
    );
}

/// A search's winners as a table (`what` heads the key column) and its failures.
pub(crate) fn print_rows(what: &str, rows: &[Row], failures: &[Failure]) {
    println!(
        "\n{:<20} {:<24} {:<58} {:>9} {:>10} {:>6} {:>5}",
        what, "bucket (B,T,H)", "winner", "ms", "default ms", "gain", "cands"
    );
    for row in rows {
        let b = row.target.bucket;
        let (pb, pt, ph) = row.target.problem;
        println!(
            "{:<20} {:<24} {:<58} {:>9.3} {:>10} {:>6} {:>5}",
            row.key,
            format!("2^{}x2^{} ({pb},{pt},{ph})", b.rows_log2, b.tokens_log2),
            row.winner,
            row.ms,
            row.default_ms
                .map_or("-".to_string(), |d| format!("{d:.3}")),
            decide::gain(row.ms, row.default_ms).map_or("-".to_string(), |g| format!("{g:.2}x")),
            row.timed
        );
    }
    for f in failures {
        eprintln!("NOT CACHED {} {}: {}", f.key, f.variant, f.what);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The schedule with made-up per-run times (no GPU): candidate i's runs all take `t[i]` ms (∞ = its launch
    /// fails). Returns the scores and how many launches each candidate got: (warm-ups and discarded runs, runs its
    /// score is of).
    fn schedule(t: &[f64], default: Option<usize>, ratio: f64) -> (Vec<f64>, Vec<(usize, usize)>) {
        let n = t.len();
        let mut samples: Vec<Vec<f64>> = vec![Vec::new(); n];
        let mut failed = vec![false; n];
        let mut launches = vec![0usize; n];
        let mut measure =
            |i: usize, w: usize, r: usize, s: &mut Vec<f64>, f: &mut bool| -> Res<()> {
                launches[i] += w + r;
                if t[i].is_finite() {
                    s.extend(std::iter::repeat_n(t[i], r));
                } else {
                    *f = true;
                }
                Ok(())
            };
        let score = |s: &Vec<f64>, f: bool| if f { f64::INFINITY } else { decide::median(s) };
        let scores = screen_then_time(
            &mut samples,
            &mut failed,
            default,
            ratio,
            &mut measure,
            score,
        )
        .unwrap();
        let runs = (0..n)
            .map(|i| (launches[i] - samples[i].len(), samples[i].len()))
            .collect();
        (scores, runs)
    }

    #[test]
    fn runs_are_sized_by_gpu_time() {
        // A 0.05 ms kernel: 1 warm-up, 5 screening runs, then 1 warm-up and 20 final runs.
        let (s, r) = schedule(&[0.05], None, decide::DROP_RATIO);
        assert_eq!((s[0], r[0]), (0.05, (2, 25)));
        // A 2 ms kernel: 4 screening runs, then 15 final ones.
        let (s, r) = schedule(&[2.0], None, decide::DROP_RATIO);
        assert_eq!((s[0], r[0]), (2.0, (1, 19)));
        // A 10 ms kernel (long): its first, cold launch is its probe and screens it, 3 final ones, no warm-up.
        let (s, r) = schedule(&[10.0], None, decide::DROP_RATIO);
        assert_eq!((s[0], r[0]), (10.0, (0, 4)));
        // A 150 ms kernel: 1 + 2 launches in all.
        let (s, r) = schedule(&[150.0], None, decide::DROP_RATIO);
        assert_eq!((s[0], r[0]), (150.0, (0, 3)));
        // Just under the long-run bound: a warm-up, then the probe.
        let just = decide::LONG_RUN_MS * 0.99;
        let (_, r) = schedule(&[just], None, decide::DROP_RATIO);
        assert_eq!(r[0].0, 1 + usize::from(just < 1.0));
    }

    #[test]
    fn losers_are_dropped_after_screening_except_the_default() {
        // 1.0 wins; 1.2 survives (≤ 1.3×); 2.0 is dropped unless it is the default; a failing launch scores ∞.
        let (s, r) = schedule(&[1.0, 1.2, 2.0, f64::INFINITY], None, decide::DROP_RATIO);
        assert_eq!(s, vec![1.0, 1.2, f64::INFINITY, f64::INFINITY]);
        assert_eq!(r[2].1, decide::screen_runs(2.0));
        assert_eq!(decide::winner(&s), Some(0));
        let (s, _) = schedule(&[1.0, 1.2, 2.0], Some(2), decide::DROP_RATIO);
        assert_eq!(s, vec![1.0, 1.2, 2.0]);
        // Exhaustive (`--regret`): nobody is dropped.
        let (s, r) = schedule(&[1.0, 5.0], None, f64::INFINITY);
        assert_eq!(s, vec![1.0, 5.0]);
        assert_eq!(r[1].1, 2 + 6, "5 ms: 2 screening runs, then 6 final ones");
    }

    #[test]
    fn keys_go_dtype_by_dtype() {
        let _ = &gla::gates::Gla;
        let gates = crate::select_gates(Some(&["gla".into(), "mamba2".into()])).unwrap();
        let o = Options {
            dims: Some(vec![64, 128]),
            ..Options::default()
        };
        let k: Vec<(DType, &str, usize)> = keys(&gates, &o)
            .iter()
            .map(|k| (k.dtype, k.gate.name(), k.d))
            .collect();
        assert_eq!(k.len(), 12);
        assert!(k[..4].iter().all(|x| x.0 == DType::BF16), "{k:?}");
        assert_eq!(
            &k[..2],
            &[(DType::BF16, "gla", 64), (DType::BF16, "gla", 128)]
        );
        assert!(k[8..].iter().all(|x| x.0 == DType::F32), "{k:?}");
    }
}
