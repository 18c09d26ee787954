//! The backward kernels (issue 28: the chunk form, and the walk form where it has kernels) vs the f64 reference gradients
//! (`gla_core::gate_ref::gate_backward`: the recurrence's gradients carried to the raw logits and the parameters).
//!
//! Without NVRTC the compile test prints `SKIPPED`; without a GPU the GPU test does (with `GLA_REQUIRE_GPU=1` it
//! fails). Tolerances, relative RMS error of each gradient vs f64 on the same (dtype-rounded) inputs: f32 1e-5,
//! bf16/f16 5e-3 (the issue's). The gradients of the logits and the gate parameters are measured against the size
//! of the terms their closed form sums (`tests::gate_grad_errors`): under strong decays the true gradient is tiny and
//! any f32 evaluation of the closed form leaves a residue of the terms' size (the reference module's docs).
//! `bwd_emulated.rs` runs the same kernels' source on the CPU (the host emulator, `tests::emu`).
use gla_codegen::{generate_backward, BackwardForm, BackwardSpec, Tiles};
use gla_core::{registered_gates, DType, Dims, Gate, GateShape};
use gla_runtime::testing::{gpu_or_skip, nvrtc_or_skip};
use gla_runtime::{nvrtc, BackwardOptions, CompileOptions, DeviceTensor};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rayon::prelude::*;
use tests::{gate_grad_errors, rel_rms, Case};

/// The gates with backward kernels: every registered gate but the per-value ones and the benchmark's strength
/// gates (`GLA_TEST_GATES=a,b` narrows, printed).
fn gates() -> Vec<&'static dyn Gate> {
    let _ = (&gla::gates::Gla, &tests::gates::ValueGla);
    let strength_only: Vec<&str> = tests::strengths::all()
        .iter()
        .map(|s| s.gate.name())
        .filter(|n| !gla::gates::BUILT_IN.contains(n))
        .collect();
    let g = registered_gates()
        .into_iter()
        .filter(|g| !strength_only.contains(&g.name()));
    match std::env::var("GLA_TEST_GATES") {
        Ok(list) => {
            println!("GLA_TEST_GATES={list}: testing only these gates");
            g.filter(|g| list.split(',').any(|n| n == g.name()))
                .collect()
        }
        Err(_) => g.collect(),
    }
}

/// Spill stores a backward kernel may have: the first form's f32 CUDA-core kernels are not register-bound (ptxas
/// picks 40–64 registers) and some spill a few words at that choice (≤ 28 B seen); more would mean a change gone
/// wrong. (The forward kernels allow none.)
const SPILL_BOUND: u32 = 64;

/// Every backward kernel set compiles for sm_90a within [`SPILL_BOUND`]: every gate above × dtype at d = 128, and
/// the per-key GLA gate at d = 64, 256, 512 and d_k ≠ d_v — in both forms where the walk form has kernels.
#[test]
fn backward_kernels_compile_within_the_spill_bound() {
    if !nvrtc_or_skip("backward_kernels_compile_within_the_spill_bound") {
        return;
    }
    let mut specs = Vec::new();
    for g in gates() {
        for dt in DType::ALL {
            specs.push(BackwardSpec::for_problem(g, dt, 128, 128).unwrap());
        }
    }
    for (dk, dv) in [(64, 64), (256, 256), (512, 512), (64, 256)] {
        specs.push(BackwardSpec::for_problem(&gla::gates::Gla, DType::BF16, dk, dv).unwrap());
    }
    let walks: Vec<BackwardSpec> = specs
        .iter()
        .filter_map(|s| s.with_form(BackwardForm::Walks).ok())
        .collect();
    specs.extend(walks);
    let problems: Vec<String> = specs
        .par_iter()
        .flat_map(|s| {
            let src = generate_backward(s).unwrap();
            match nvrtc::compile_with(&src, s.kernels()[0], &CompileOptions::default()) {
                Err(e) => vec![format!("{}: {e}", s.id())],
                Ok(c) => s
                    .kernels()
                    .iter()
                    .filter_map(|k| match c.resources_of(k) {
                        None => Some(format!("{}: no resource report for {k}", s.id())),
                        Some(r) if r.spill_stores_bytes > SPILL_BOUND => Some(format!(
                            "{}: {k} spills {} B (bound {SPILL_BOUND})",
                            s.id(),
                            r.spill_stores_bytes
                        )),
                        Some(r) => {
                            if r.spills() {
                                println!(
                                    "{} {k}: {} B spill stores, {} registers",
                                    s.id(),
                                    r.spill_stores_bytes,
                                    r.registers
                                );
                            }
                            None
                        }
                    })
                    .collect(),
            }
        })
        .collect();
    println!("compiled {} backward kernel sets", specs.len());
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

fn randn(rng: &mut SmallRng, n: usize, dt: DType) -> Vec<f32> {
    (0..n)
        .map(|_| {
            let (u1, u2): (f32, f32) = (rng.random_range(1e-7f32..1.0), rng.random());
            dt.round((-2.0 * u1.ln()).sqrt() * (std::f32::consts::TAU * u2).cos())
        })
        .collect()
}

/// Every gate above × dtype × shape (ragged T, d_k ≠ d_v, d = 256, varlen with an empty and a one-token sequence,
/// initial state and final-state gradient, logits shifted by −12 / +12: strong and weak decays): dq, dk, dv, d logits,
/// d params and d h0 each within tolerance of the f64 reference.
#[test]
fn backward_matches_the_f64_reference() {
    let Some(gla) = gpu_or_skip("backward_matches_the_f64_reference") else {
        return;
    };
    struct Shape {
        name: &'static str,
        dims: Dims,
        cu: Option<Vec<usize>>,
        state: bool,
        shift: f32,
        /// Long: the walk form alone, bf16 / f16 (the dq / dk passes and the gate's gradient over them).
        long: bool,
    }
    let shapes = [
        Shape {
            name: "T=150 D=64 + states",
            dims: Dims::new(2, 150, 2, 64, 64),
            cu: None,
            state: true,
            shift: 0.0,
            long: false,
        },
        Shape {
            name: "T=70 dk=128 dv=96",
            dims: Dims::new(1, 70, 2, 128, 96),
            cu: None,
            state: false,
            shift: 0.0,
            long: false,
        },
        Shape {
            name: "varlen (0, 1, 90, 37) + states",
            dims: Dims::new(1, 128, 2, 64, 64),
            cu: Some(vec![0, 0, 1, 91, 128]),
            state: true,
            shift: 0.0,
            long: false,
        },
        Shape {
            name: "T=40 D=256 logits-12",
            dims: Dims::new(1, 40, 1, 256, 256),
            cu: None,
            state: true,
            shift: -12.0,
            long: false,
        },
        Shape {
            name: "T=100 D=128 logits+12",
            dims: Dims::new(1, 100, 2, 128, 128),
            cu: None,
            state: true,
            shift: 12.0,
            long: false,
        },
        // shift NaN: +30 on token 5 of every chunk of 32, −5 elsewhere — for RWKV-6's −exp(x) one near-zero forget
        // gate a chunk among mild ones (gla_codegen::LOG2_ALPHA_FLOOR)
        Shape {
            name: "T=100 D=64 one logit a chunk +30, the rest −5",
            dims: Dims::new(1, 100, 2, 64, 64),
            cu: None,
            state: true,
            shift: f32::NAN,
            long: false,
        },
        // Long sequences without states: a per-key or scalar gate's dq and dk come from their passes, and the gate's gradient
        // sums q ⊙ dq − k ⊙ dk (which nearly cancel) over them
        Shape {
            name: "T=2048 D=64 (long)",
            dims: Dims::new(1, 2048, 2, 64, 64),
            cu: None,
            state: false,
            shift: 0.0,
            long: true,
        },
        Shape {
            name: "T=1024 D=128 logits-4 (long)",
            dims: Dims::new(1, 1024, 2, 128, 128),
            cu: None,
            state: false,
            shift: -4.0,
            long: true,
        },
    ];
    let mut failures = Vec::new();
    println!("| gate | dtype | form | shape | dq | dk | dv | d logits | d params | d h0 |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    // Each form the problem has kernels in; the walk form also with sequences cut into segments of one chunk (bf16),
    // and for a per-key or scalar gate without the gate's gradients (`skip_gate_gradients`: the gate's kernel left out after
    // the dq / dk passes, which run where the problem has no states). The long shapes: the walk form, bf16 / f16 —
    // a per-key gate's also with its dq / dk passes forced on (`BackwardOptions::dq_dk_passes`) and, where they are its
    // default (`gla_codegen::per_key_passes_default`), forced off.
    let forms = |gate: &'static dyn Gate,
                 dt: DType,
                 sh: &Shape|
     -> Vec<(BackwardForm, Option<u32>, bool, Option<bool>, Option<Tiles>)> {
        // (dq / dk passes: per-key and scalar gates)
        let passes = gate.shape() != GateShape::PerValue;
        let per_key = gate.shape() == GateShape::PerKey;
        [
            (BackwardForm::Chunks, None, false, None),
            (BackwardForm::Walks, None, false, None),
            (BackwardForm::Walks, Some(1), false, None),
            (BackwardForm::Walks, None, true, per_key.then_some(true)),
            (BackwardForm::Walks, None, false, Some(true)),
            (BackwardForm::Walks, None, false, Some(false)),
        ]
        .into_iter()
        .filter(|&(f, cut, skip, forced)| {
            (cut.is_none() || dt == DType::BF16)
                && (!skip || passes)
                && (forced.is_none() || (per_key && (sh.long || skip)))
                && (forced != Some(false) || gla_codegen::per_key_passes_default(dt, sh.dims.dk))
                && (!sh.long
                    || (f == BackwardForm::Walks && cut.is_none() && !skip && dt != DType::F32))
                && BackwardSpec::for_problem(gate, dt, sh.dims.dk, sh.dims.dv)
                    .and_then(|s| s.with_form(f))
                    .is_ok()
        })
        // (a per-key gate's forced passes on a long shape: with each of their tiles)
        .flat_map(|(f, cut, skip, forced)| {
            let tiles: Vec<Option<Tiles>> = if per_key && sh.long && forced == Some(true) && !skip {
                gla_codegen::per_key_pass_tiles(dt, sh.dims.dk)
                    .into_iter()
                    .map(Some)
                    .collect()
            } else {
                vec![None]
            };
            tiles.into_iter().map(move |t| (f, cut, skip, forced, t))
        })
        .collect()
    };
    // Every kernel set the loop runs, compiled on all cores first (the loop's calls then find it loaded): one NVRTC
    // compile after another would take minutes.
    let mut sets: Vec<(String, BackwardSpec)> = Vec::new();
    for gate in gates() {
        for dt in DType::ALL {
            for sh in &shapes {
                for (form, _, _, _, _) in forms(gate, dt, sh) {
                    let s = BackwardSpec::default_for(gate, dt, sh.dims.dk, sh.dims.dv)
                        .and_then(|s| s.with_form(form))
                        .unwrap();
                    let key = format!("{} {}", s.id(), gate.name());
                    if !sets.iter().any(|(k, _)| *k == key) {
                        sets.push((key, s));
                    }
                }
            }
        }
    }
    // (and the forward kernels of the dv / dq / dk passes the calls run: bf16 / f16, d_k = d_v ≤ 128)
    let passes: Vec<gla_codegen::KernelSpec> = gates()
        .into_iter()
        .flat_map(|g| {
            let mut v = gla_codegen::dq_dk_pass_variants(g);
            v.extend(gla_codegen::dv_pass_variants(g));
            v
        })
        .collect();
    let t0 = std::time::Instant::now();
    sets.par_iter().for_each(|(key, s)| {
        gla.compile_backward(s)
            .unwrap_or_else(|e| panic!("{key}: {e}"));
    });
    passes.par_iter().for_each(|s| {
        gla.compile_spec(s)
            .unwrap_or_else(|e| panic!("{}: {e}", s.id()));
    });
    println!(
        "compiled {} backward kernel sets in {:.1} s",
        sets.len(),
        t0.elapsed().as_secs_f64()
    );
    for gate in gates() {
        for dt in DType::ALL {
            let tol = if dt == DType::F32 { 1e-5 } else { 5e-3 };
            for (i, sh) in shapes.iter().enumerate() {
                for (form, cut, skip, forced, tiles) in forms(gate, dt, sh) {
                    let label = format!("{form:?}")
                        + &cut.map_or(String::new(), |k| format!(" cut {k}"))
                        + if skip { " no gate grads" } else { "" }
                        + match forced {
                            Some(true) => " dq/dk passes",
                            Some(false) => " dq/dk walks",
                            None => "",
                        }
                        + &tiles.map_or(String::new(), |t| format!(" {}", t.id()));
                    let seed = 7700 + 10 * i as u64;
                    let mut case = Case::random(gate, sh.dims, dt, seed, sh.state, sh.cu.clone());
                    let per_token = (case.logits.len() / (sh.dims.b * sh.dims.t)).max(1);
                    let shift_at = |n: usize| {
                        if !sh.shift.is_nan() {
                            sh.shift
                        } else {
                            tests::spike_shift((n / per_token) % sh.dims.t)
                        }
                    };
                    case.logits
                        .iter_mut()
                        .enumerate()
                        .for_each(|(n, x)| *x = dt.round(*x + shift_at(n)));
                    let d = case.dims;
                    let n = case.n_seqs();
                    let mut rng = SmallRng::seed_from_u64(seed + 1);
                    let d_o = randn(&mut rng, d.b * d.t * d.h * d.dv, dt);
                    let d_final: Option<Vec<f32>> = sh
                        .state
                        .then(|| randn(&mut rng, n * d.h * d.dk * d.dv, DType::F32));
                    let want = case.reference_backward(gate, &d_o, d_final.as_deref());

                    let up =
                        |x: &[f32], shape: &[usize]| gla.upload(&case.host(x, shape, dt)).unwrap();
                    let (q, k, v) = (
                        up(&case.q, &d.q_shape()),
                        up(&case.k, &d.q_shape()),
                        up(&case.v, &d.v_shape()),
                    );
                    let lshape = gla_runtime::forward::logits_shape(gate.shape(), &d);
                    let logits =
                        (gate.shape() != GateShape::Fixed).then(|| up(&case.logits, &lshape));
                    let np = gate.params().len();
                    let params = (np > 0).then(|| {
                        DeviceTensor::from_f32(gla.gpu(), &[d.h, np], &case.params).unwrap()
                    });
                    let sshape = [n, d.h, d.dk, d.dv];
                    let h0 = case
                        .initial_state
                        .as_ref()
                        .map(|s| DeviceTensor::from_f32(gla.gpu(), &sshape, s).unwrap());
                    let dht = d_final
                        .as_ref()
                        .map(|s| DeviceTensor::from_f32(gla.gpu(), &sshape, s).unwrap());
                    let dot = up(&d_o, &d.v_shape());
                    let opts = BackwardOptions {
                        scale: None,
                        initial_state: h0.as_ref(),
                        d_final_state: dht.as_ref(),
                        cu_seqlens: case.cu_seqlens.as_deref(),
                        form: Some(form),
                        walk_segment_chunks: cut,
                        skip_gate_gradients: skip,
                        dq_dk_passes: forced,
                        dq_dk_pass_tiles: tiles,
                    };
                    let g = gla
                        .backward(
                            gate,
                            &q,
                            &k,
                            &v,
                            logits.as_ref(),
                            params.as_ref(),
                            &dot,
                            &opts,
                        )
                        .unwrap_or_else(|e| {
                            panic!("{} {dt} {label} {}: {e}", gate.name(), sh.name)
                        });
                    let get = |t: &DeviceTensor| {
                        t.to_f32()
                            .unwrap()
                            .into_iter()
                            .map(f64::from)
                            .collect::<Vec<f64>>()
                    };
                    let e_dq = rel_rms(&get(&g.dq), &want.dq);
                    let e_dk = rel_rms(&get(&g.dk), &want.dk);
                    let e_dv = rel_rms(&get(&g.dv), &want.dv);
                    // The gate's gradients against the size of their closed form's terms (module docs); skipped: absent.
                    let got_dl = g.d_logits.as_ref().map(get).unwrap_or_default();
                    let got_dp = g.d_params.as_ref().map(get).unwrap_or_default();
                    let (e_dl, e_dp) = if skip {
                        let absent = g.d_logits.is_none() && g.d_params.is_none();
                        (if absent { 0.0 } else { f64::INFINITY }, 0.0)
                    } else {
                        gate_grad_errors(gate, &case, &want, (&got_dl, &got_dp))
                    };
                    let e_h0 = match (&g.d_initial_state, &want.d_initial_state) {
                        (Some(t), Some(w)) => rel_rms(&get(t), w),
                        (None, None) => 0.0,
                        _ => f64::INFINITY,
                    };
                    println!("| {} | {dt} | {label} | {} | {e_dq:.2e} | {e_dk:.2e} | {e_dv:.2e} | {e_dl:.2e} | {e_dp:.2e} | {e_h0:.2e} |", gate.name(), sh.name);
                    let worst =
                        [e_dq, e_dk, e_dv, e_dl, e_dp, e_h0]
                            .into_iter()
                            .fold(
                                0.0f64,
                                |a, b| if b.is_nan() { f64::INFINITY } else { a.max(b) },
                            );
                    if !(worst <= tol) {
                        failures.push(format!("{} {dt} {label} {}: dq {e_dq:.2e} dk {e_dk:.2e} dv {e_dv:.2e} dlogits {e_dl:.2e} dparams {e_dp:.2e} dh0 {e_h0:.2e} (tolerance {tol:.0e})", gate.name(), sh.name));
                    }
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "out of tolerance:\n{}",
        failures.join("\n")
    );
}

/// Bad input to the backward is a typed error before any launch: a d_o of the wrong shape, a gate's parameters
/// missing.
#[test]
fn backward_bad_input_is_a_typed_error() {
    let Some(gla) = gpu_or_skip("backward_bad_input_is_a_typed_error") else {
        return;
    };
    let gate: &'static dyn Gate = &gla::gates::Gla;
    let d = Dims::new(1, 16, 2, 64, 64);
    let case = Case::random(gate, d, DType::BF16, 3, false, None);
    let up = |x: &[f32], shape: &[usize]| gla.upload(&case.host(x, shape, DType::BF16)).unwrap();
    let (q, k, v) = (
        up(&case.q, &d.q_shape()),
        up(&case.k, &d.q_shape()),
        up(&case.v, &d.v_shape()),
    );
    let lg = up(&case.logits, &d.q_shape());
    let bad = up(&case.v[..16 * 2 * 32], &[1, 16, 2, 32]);
    let err = gla
        .backward(
            gate,
            &q,
            &k,
            &v,
            Some(&lg),
            None,
            &bad,
            &BackwardOptions::default(),
        )
        .unwrap_err();
    assert!(err.to_string().contains("d_o"), "{err}");
    let vg: &'static dyn Gate = &tests::gates::ValueGla;
    let err = gla
        .backward(
            vg,
            &q,
            &k,
            &v,
            Some(&lg),
            None,
            &v,
            &BackwardOptions::default(),
        )
        .unwrap_err();
    assert!(err.to_string().contains("params"), "{err}"); // value_gla has a parameter per head
                                                          // The walk form where it has no kernels (a per-value gate) names the form that has.
    let walks = BackwardOptions {
        form: Some(BackwardForm::Walks),
        ..BackwardOptions::default()
    };
    let pv = DeviceTensor::from_f32(gla.gpu(), &[2, 1], &[0.5, 0.5]).unwrap();
    let err = gla
        .backward(vg, &q, &k, &v, Some(&lg), Some(&pv), &v, &walks)
        .unwrap_err();
    assert!(err.to_string().contains("chunk form"), "{err}");
    // Pass tiles the per-key dq / dk passes have no kernel for (three producer warps) name what they need.
    let odd = BackwardOptions {
        dq_dk_passes: Some(true),
        dq_dk_pass_tiles: Some(Tiles {
            block_v: 64,
            warps: 4,
            producer_warps: 3,
            producer_groups: 1,
            wgmma: true,
            ctas_per_sm: 1,
        }),
        ..BackwardOptions::default()
    };
    let err = gla
        .backward(gate, &q, &k, &v, Some(&lg), None, &v, &odd)
        .unwrap_err();
    assert!(err.to_string().contains("producer_warps"), "{err}");
}
