//! `autotune --backward`, with a GPU, after the forward search: the backward's choice per (gate, dtype, d) and
//! bucket — its form (every chunk's state through HBM, or the walks that keep none), for the walks whether and where
//! to cut the sequences into segments, and for a per-key gate whose dq / dk passes have kernels whether dq and dk run
//! as those passes or as walks ([`decide::backward_candidates`], [`decide::dq_dk_passes_choice`]). On the first
//! device:
//!
//! 1. each kernel set of the key (both forms, where the walk form has kernels) is compiled once with NVRTC and its
//!    cubin loaded (`Gla::load_backward_cubin`: the runtime then runs exactly that cubin);
//! 2. each set runs a small random problem with an initial state and a final-state gradient at every strength of
//!    the gate ([`decide::strengths`]; the walk form whole and cut into segments of one chunk, and — where dq / dk
//!    may run as passes, which take neither — without them, passes forced) and dq, dk, dv, dh0 — and d logits at
//!    logits ~ N(0, 1) — are compared with the f64 reference gradients ([`decide::backward_tolerance`]) BEFORE it may
//!    be timed: a failing set is reported and never cached;
//! 3. the candidates are timed at each bucket's problem (CUDA events, warm-ups, L2 flushed, median; screening and
//!    final runs as the forward's), forward not included, at every strength of the gate, and scored by the worst
//!    ([`decide::worst_case`], as the forward): the cost depends on the gate's values (strong chunks take the exact
//!    intra-chunk paths — H100, bf16 8×4096×16×128 passes: gla/16 1.77 ms vs RWKV-6 3.35, `benches/NOTES.md`) and
//!    the walks' and the passes' costs depend on them differently;
//! 4. the winner goes into the cache as a timed entry of key pass `"bwd"` (its kernel set, its segments, its dq / dk
//!    choice — explicit where the key has one — and its cubin).

use crate::args::Options;
use crate::decide::{self, BwdCandidate, Target};
use crate::inputs::{rel_rms, shifted, HostInputs, Pool};
use crate::progress::{bar, say};
use crate::search::{print_rows, screen_then_time, upload, upload_pool, Failure, Row};
use gla_codegen::{
    generate_backward, BackwardForm, BackwardRecord, BackwardSpec, KernelSpec, Pass,
};
use gla_core::{DType, Dims, Gate, GateShape};
use gla_runtime::cache::{sha256_hex, CacheKey, Entry, Environment, GpuFacts, Timing, TuningCache};
use gla_runtime::timing::{bench, L2Flush};
use gla_runtime::{nvrtc, BackwardOptions, CompileOptions, DeviceTensor, Gla};
use rand::rngs::SmallRng;
use rand::SeedableRng;
use std::path::PathBuf;
use std::time::Instant;

type Res<T> = gla_core::error::Result<T>;

/// What [`run`] did.
#[derive(Debug)]
pub struct BackwardReport {
    pub dir: PathBuf,
    /// The winners (`default_ms`: the default set's, `BackwardSpec::default_for`).
    pub rows: Vec<Row>,
    pub failures: Vec<Failure>,
    pub entries: usize,
    pub wall_s: f64,
}

/// A candidate's name: the kernel set's id, `whole` / `seg<k>` for the walk form, and `dq/dk passes` /
/// `dq/dk walks` where it forces the choice.
pub fn candidate_label(c: &BwdCandidate) -> String {
    let form = match c.cut {
        None => c.spec.id(),
        Some(0) => format!("{} whole", c.spec.id()),
        Some(k) => format!("{} seg{k}", c.spec.id()),
    };
    match c.passes {
        None => form,
        Some(true) => format!("{form} dq/dk passes"),
        Some(false) => format!("{form} dq/dk walks"),
    }
}

/// A compiled kernel set.
struct Compiled {
    spec: BackwardSpec,
    cubin: Vec<u8>,
    source_sha256: String,
}

fn compile(gla: &Gla, spec: &BackwardSpec) -> Result<Compiled, String> {
    let source = generate_backward(spec).map_err(|e| format!("codegen: {e}"))?;
    let opts = CompileOptions {
        driver_cache: true,
        ..CompileOptions::default()
    };
    let c = nvrtc::compile_with(&source, spec.kernels()[0], &opts).map_err(|e| e.to_string())?;
    gla.load_backward_cubin(spec, &c.cubin)
        .map_err(|e| format!("load: {e}"))?;
    Ok(Compiled {
        spec: *spec,
        cubin: c.cubin,
        source_sha256: sha256_hex(source.as_bytes()),
    })
}

/// N(0, 1) draws rounded to `dt`.
fn randn(rng: &mut SmallRng, n: usize, dt: DType) -> Vec<f32> {
    crate::inputs::randn(rng, n, 1.0)
        .into_iter()
        .map(|x| dt.round(x))
        .collect()
}

/// Step 2 for one kernel set: `None` if it matches the f64 reference gradients at every strength (and, for the walk
/// form, cut into segments of one chunk too, and with dq / dk as passes where `passes` says they exist), else what
/// was wrong.
fn check(
    gla: &Gla,
    gate: &'static dyn Gate,
    dtype: DType,
    d: usize,
    spec: &BackwardSpec,
    passes: bool,
) -> Res<Option<String>> {
    let (b, t, h) = decide::CHECK_PROBLEM;
    let dims = Dims::new(b, t, h, d, d);
    let strengths = decide::strengths(gate.shape());
    let x = HostInputs::random(gate, dims, dtype, 17 + d as u64);
    // (the passes take no initial state and no final-state gradient: their reference has neither)
    let x0 = HostInputs {
        initial_state: None,
        ..x.clone()
    };
    let mut rng = SmallRng::seed_from_u64(23 + d as u64);
    let d_o = randn(&mut rng, b * t * h * d, dtype);
    let dht = randn(&mut rng, b * h * d * d, DType::F32);
    let no_dht = vec![0.0f32; dht.len()];
    let dev = upload(gla, gate, &x, &strengths)?;
    let d_o_dev = gla.upload(&crate::inputs::host_tensor(dtype, &dims.v_shape(), &d_o)?)?;
    let dht_dev = DeviceTensor::from_f32(gla.gpu(), &[b, h, d, d], &dht)?;
    // (segments: `Some(0)` whole, `Some(1)` one chunk each; dq / dk passes forced, no h0 / dht)
    let mut runs: Vec<(Option<u32>, bool)> = if spec.form == BackwardForm::Walks {
        vec![(Some(0), false), (Some(1), false)]
    } else {
        vec![(None, false)]
    };
    // (the passes run beside the walk form only: its sets alone need their reference)
    let passes = passes && spec.form == BackwardForm::Walks;
    if passes {
        runs.push((Some(0), true));
    }
    let tol = decide::backward_tolerance(dtype);
    let get = |t: &DeviceTensor| -> Res<Vec<f64>> {
        Ok(t.to_f32()?.into_iter().map(f64::from).collect())
    };
    for (si, s) in strengths.iter().enumerate() {
        let logits = shifted(&x.logits, s.shift, dtype);
        let want = x.reference_backward(gate, &logits, &d_o, &dht)?;
        let want0 = if passes {
            Some(x0.reference_backward(gate, &logits, &d_o, &no_dht)?)
        } else {
            None
        };
        for &(cut, forced) in &runs {
            let opts = BackwardOptions {
                initial_state: dev.h0.as_ref().filter(|_| !forced),
                d_final_state: Some(&dht_dev).filter(|_| !forced),
                form: Some(spec.form),
                walk_segment_chunks: cut,
                dq_dk_passes: forced.then_some(true),
                ..BackwardOptions::default()
            };
            let want = if forced {
                want0.as_ref().expect("a reference without h0 / dht")
            } else {
                &want
            };
            let g = gla.backward(
                gate,
                &dev.q,
                &dev.k,
                &dev.v,
                dev.logits[si].as_ref(),
                dev.params.as_ref(),
                &d_o_dev,
                &opts,
            )?;
            let mut errs = vec![
                ("dq", rel_rms(&get(&g.dq)?, &want.dq)),
                ("dk", rel_rms(&get(&g.dk)?, &want.dk)),
                ("dv", rel_rms(&get(&g.dv)?, &want.dv)),
            ];
            if let (Some(got), Some(w)) = (&g.d_initial_state, &want.d_initial_state) {
                errs.push(("dh0", rel_rms(&get(got)?, w)));
            }
            // (d logits only where it is not a cancellation: under strong decays the true gradient is tiny and any
            // f32 evaluation of its closed form leaves a residue of its terms' size — the GPU tests measure it so)
            if let Some(got) = g.d_logits.as_ref().filter(|_| s.shift == 0.0) {
                errs.push(("d logits", rel_rms(&get(got)?, &want.d_logits)));
            }
            if let Some((what, e)) = errs.iter().find(|(_, e)| e.is_nan() || *e > tol) {
                return Ok(Some(format!(
                    "wrong at {}{}: rel RMS {what} {e:.2e} (tolerance {tol:.0e})",
                    s.name,
                    match (cut, forced) {
                        (_, true) => ", dq / dk passes (no h0, no dht)",
                        (Some(1), _) => ", segments of one chunk",
                        _ => "",
                    }
                )));
            }
        }
    }
    Ok(None)
}

/// Step 3 at one target: (index of the winner, its score, the default's score), a score being the worst over the
/// gate's strengths of the candidate's median.
fn time_target(
    gla: &Gla,
    gate: &'static dyn Gate,
    dtype: DType,
    d: usize,
    cands: &[BwdCandidate],
    target: &Target,
    flush: &mut L2Flush,
) -> Res<Option<(usize, f64, Option<f64>)>> {
    let (b, t, h) = target.problem;
    let dims = Dims::new(b, t, h, d, d);
    let strengths = decide::strengths(gate.shape());
    let dev = upload_pool(gla, gate, &Pool::new(gate, dims, dtype, 42), &strengths)?;
    // (dO: the values tensor, random like it; d_v = d_k here.) samples[candidate][strength]
    let mut samples: Vec<Vec<Vec<f64>>> = vec![vec![Vec::new(); strengths.len()]; cands.len()];
    let mut failed = vec![false; cands.len()];
    let mut measure = |i: usize,
                       warmups: usize,
                       runs: usize,
                       samples: &mut Vec<Vec<f64>>,
                       failed: &mut bool|
     -> Res<()> {
        let c = cands[i];
        let opts = BackwardOptions {
            form: Some(c.spec.form),
            walk_segment_chunks: c.cut,
            dq_dk_passes: c.passes,
            ..BackwardOptions::default()
        };
        for (j, logits) in dev.logits.iter().enumerate() {
            let st = bench(gla.gpu(), warmups, runs, Some(&mut *flush), || {
                gla.backward(
                    gate,
                    &dev.q,
                    &dev.k,
                    &dev.v,
                    logits.as_ref(),
                    dev.params.as_ref(),
                    &dev.v,
                    &opts,
                )
                .map(|_| ())
            });
            match st {
                Ok(st) => samples[j].extend(st.samples_ms.iter().map(|&s| s as f64)),
                Err(e) => {
                    // A broken context ends the run; a refused launch (e.g. the chunk form's workspace out of
                    // memory) drops the candidate.
                    gla.synchronize()?;
                    *failed = true;
                    eprintln!("  {} at {:?}: {e}", candidate_label(&c), target.problem);
                    break;
                }
            }
        }
        Ok(())
    };
    let finals = screen_then_time(
        &mut samples,
        &mut failed,
        Some(0),
        decide::DROP_RATIO,
        &mut measure,
        |s: &Vec<Vec<f64>>, failed| decide::score(s, failed),
    )?;
    let default_ms = Some(finals[0]).filter(|m| m.is_finite());
    Ok(decide::winner(&finals).map(|w| (w, finals[w], default_ms)))
}

/// Tune the backward of `gates` on `gla` (see the module docs) into the cache at `o.out`, saved after every key.
/// Errors: no NVRTC, an unreadable or unwritable cache, a broken CUDA context (the cache keeps what was found).
pub fn run(gla: &Gla, gates: &[&'static dyn Gate], o: &Options) -> Result<BackwardReport, String> {
    let t0 = Instant::now();
    let nvrtc_version = nvrtc::probe().map_err(|e| e.to_string())?.version;
    let mut cache = TuningCache::open_or_empty(&o.out).map_err(|e| e.to_string())?;
    let targets = decide::targets(&o.buckets);
    let facts = GpuFacts::from(gla.gpu().info());
    let sms = gla.gpu().info().sm_count;
    let mut flush = L2Flush::new(gla.gpu()).map_err(|e| e.to_string())?;
    let mut keys = Vec::new();
    for &gate in gates {
        for dtype in o.dtypes_or_default() {
            for d in o.dims_or_default() {
                let Ok(base) = BackwardSpec::default_for(gate, dtype, d, d) else {
                    continue;
                };
                // Both forms, the default (`BackwardSpec::default_for`'s) first; a key with one has nothing to
                // choose.
                let other = match base.form {
                    BackwardForm::Walks => BackwardForm::Chunks,
                    BackwardForm::Chunks => BackwardForm::Walks,
                };
                let sets: Vec<BackwardSpec> = [base.form, other]
                    .into_iter()
                    .filter_map(|f| base.with_form(f).ok())
                    .filter(|s| o.selects(&s.id()))
                    .collect();
                if sets.len() == 2 && sets[0].id() == base.id() {
                    keys.push((gate, dtype, d, sets));
                }
            }
        }
    }
    if o.resume {
        crate::resume::skip_tuned(
            &mut keys,
            &cache,
            &targets,
            &Environment {
                nvrtc_version: Some(nvrtc_version),
                gpu: Some(facts.clone()),
            },
            "backward keys",
            |(gate, dtype, d, _)| CacheKey::backward(*gate, *dtype, *d, *d),
            |(_, _, _, sets), id| {
                let s = sets.iter().find(|s| s.id() == id)?;
                generate_backward(s)
                    .ok()
                    .map(|src| sha256_hex(src.as_bytes()))
            },
        );
    }
    println!(
        "autotune --backward on {}: {} keys (gate x dtype x d) with a choice of form, {} buckets",
        facts.name,
        keys.len(),
        targets.len()
    );
    let mut rows = Vec::new();
    let mut failures = Vec::new();
    let pb = bar(keys.len() * (2 + targets.len()), "backward");
    for (gate, dtype, d, sets) in keys {
        let label = format!("{} {} d{}", gate.name(), dtype, d);
        // (dq / dk as passes: a per-key gate's a choice, a scalar gate's always taken where they have kernels)
        let choice = decide::dq_dk_passes_choice(gate, dtype, d);
        let passes_exist = gate.shape() != GateShape::PerValue
            && KernelSpec::pass_default(gate, dtype, d, d, Pass::Dq).is_ok();
        // 1–2. Compile, load and check each set; only sets that pass may be timed.
        let mut passing = Vec::new();
        for s in &sets {
            pb.set_message(format!("{label}: {}", s.id()));
            let r =
                compile(gla, s).and_then(|c| match check(gla, gate, dtype, d, s, passes_exist) {
                    Ok(None) => Ok(c),
                    Ok(Some(what)) => Err(what),
                    Err(e) => {
                        gla.synchronize().map_err(|e| e.to_string())?; // a broken context ends the run
                        Err(format!("failed: {e}"))
                    }
                });
            match r {
                Ok(c) => passing.push(c),
                Err(what) => {
                    say(&pb, format!("  {label} {}: {what} — not cached", s.id()));
                    failures.push(Failure {
                        key: label.clone(),
                        variant: s.id(),
                        what,
                    });
                }
            }
            pb.inc(1);
        }
        if passing.first().map(|c| c.spec.id()) != Some(sets[0].id()) {
            // (without the default there is no baseline: the key keeps its untimed entry)
            pb.inc(targets.len() as u64);
            continue;
        }
        // 3–4. Time the candidates at every target, cache the winners.
        let specs: Vec<BackwardSpec> = passing.iter().map(|c| c.spec).collect();
        for target in &targets {
            let (b, t, h) = target.problem;
            let cands = decide::backward_candidates(
                &specs,
                b * h,
                t.div_ceil(specs[0].chunk() as usize),
                d,
                sms,
                choice.then(|| gla_codegen::per_key_passes_default_at(dtype, d, b * h, sms)),
            );
            pb.set_message(format!("{label} {:?}", target.problem));
            pb.inc(1);
            if cands.is_empty() {
                continue;
            }
            let started = Instant::now();
            let res =
                time_target(gla, gate, dtype, d, &cands, target, &mut flush).map_err(|e| {
                    format!(
                        "{label} at {:?}: {e} (the cache keeps what was found before)",
                        target.problem
                    )
                })?;
            let Some((w, ms, default_ms)) = res else {
                say(
                    &pb,
                    format!(
                        "  {label} at {:?}: no candidate could be timed",
                        target.problem
                    ),
                );
                continue;
            };
            let win = cands[w];
            let spec = win.spec;
            let c = passing
                .iter()
                .find(|c| c.spec.id() == spec.id())
                .expect("a passing set");
            let timing = Timing {
                median_ms: ms,
                default_ms,
                candidates: cands.len() as u32,
                strengths: decide::strengths(gate.shape())
                    .iter()
                    .map(|s| s.name.to_string())
                    .collect(),
                all_ms: Default::default(),
            };
            // (every choice explicit, the default's included: the entry says what was timed even if the
            // runtime's default changes)
            let entry = Entry {
                backward: Some(BackwardRecord::of(&spec, win.cut, win.passes)),
                ..Entry::compiled(
                    CacheKey::backward(gate, dtype, d, d),
                    target.bucket,
                    spec.id(),
                    nvrtc_version,
                    c.source_sha256.clone(),
                    Some((facts.clone(), timing)),
                )
            };
            let winner = candidate_label(&win);
            say(
                &pb,
                format!(
                    "  {label} {:?}: {winner} {ms:.3} ms (default {})",
                    target.problem,
                    default_ms.map_or("-".to_string(), |d| format!("{d:.3} ms"))
                ),
            );
            cache.insert(entry, c.cubin.clone());
            rows.push(Row {
                key: label.clone(),
                target: *target,
                winner,
                ms,
                default_ms,
                timed: cands.len(),
                secs: started.elapsed().as_secs_f64(),
            });
        }
        cache.save().map_err(|e| e.to_string())?;
    }
    pb.finish_and_clear();
    let entries = cache.save().map_err(|e| e.to_string())?;
    Ok(BackwardReport {
        dir: o.out.clone(),
        rows,
        failures,
        entries,
        wall_s: t0.elapsed().as_secs_f64(),
    })
}

/// The summary table (key, bucket, winner, ms, default ms, gain) and the failures.
pub fn print_report(r: &BackwardReport) {
    print_rows("backward key", &r.rows, &r.failures);
    crate::search::print_time_split(&r.rows);
    println!(
        "\n{} timed backward winners written; {} entries in {}; {} set(s) failed; {:.1} s",
        r.rows.len(),
        r.entries,
        r.dir.display(),
        r.failures.len(),
        r.wall_s
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidate_labels() {
        let _ = &gla::gates::Gla;
        let s = BackwardSpec::for_problem(&gla::gates::Gla, DType::BF16, 128, 128).unwrap();
        let w = s.with_form(BackwardForm::Walks).unwrap();
        let c = |spec, cut, passes| BwdCandidate { spec, cut, passes };
        assert_eq!(candidate_label(&c(s, None, None)), "gla.bwd.bf16.k128.v128");
        assert_eq!(
            candidate_label(&c(w, Some(0), None)),
            "gla.bwd.bf16.k128.v128.walk whole"
        );
        assert_eq!(
            candidate_label(&c(w, Some(103), Some(false))),
            "gla.bwd.bf16.k128.v128.walk seg103 dq/dk walks"
        );
        assert_eq!(
            candidate_label(&c(w, Some(0), Some(true))),
            "gla.bwd.bf16.k128.v128.walk whole dq/dk passes"
        );
    }
}
