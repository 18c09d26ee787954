//! GPU forward kernels vs the f64 CPU reference (issue 4). Without a GPU every test prints `SKIPPED <test>: <why>`
//! and passes; with `GLA_REQUIRE_GPU=1` a missing GPU fails.
//!
//! Tolerances are relative RMS errors vs the f64 recurrence on the same (dtype-rounded) inputs:
//! f32 ≤ 1e-5, bf16/f16 ≤ 3e-3. Outputs are poisoned with NaN before every launch, so an element the kernel
//! does not write shows up as an infinite error.
use gla_codegen::{all_variants, specialised_dim, KernelSpec, Tiles};
use gla_core::{registered_gates, DType, Dims, Gate, GateShape};
use gla_runtime::testing::gpu_or_skip;
use gla_runtime::{DeviceTensor, ForwardOptions, Gla};
use rayon::prelude::*;
use std::collections::BTreeMap;
use std::sync::Mutex;
use tests::{rel_rms, tolerance, Case};

/// The 7 built-in gates and the tests' value gate (all four gate shapes).
fn kernel_gates() -> Vec<&'static dyn Gate> {
    let _ = (&gla::gates::Gla, &tests::gates::ValueGla); // link the gates' registrations
                                                         // The strength gates (tests::strengths) have a test of their own: every_strength_matches_the_f64_reference.
    let strength_only: Vec<&str> = tests::strengths::all()
        .iter()
        .map(|s| s.gate.name())
        .filter(|n| !gla::gates::BUILT_IN.contains(n))
        .collect();
    let g: Vec<&'static dyn Gate> = registered_gates()
        .into_iter()
        .filter(|g| !strength_only.contains(&g.name()))
        .collect();
    for shape in [
        GateShape::PerKey,
        GateShape::PerHead,
        GateShape::PerValue,
        GateShape::Fixed,
    ] {
        assert!(
            g.iter().any(|g| g.shape() == shape),
            "no registered {shape} gate"
        );
    }
    // GLA_TEST_GATES=name,name narrows a run to some gates (printed, so a narrowed log says so).
    match std::env::var("GLA_TEST_GATES") {
        Ok(list) => {
            println!("GLA_TEST_GATES={list}: testing only these gates");
            g.into_iter()
                .filter(|g| list.split(',').any(|n| n == g.name()))
                .collect()
        }
        Err(_) => g,
    }
}

/// `GLA_TEST_VARIANTS=part,part` narrows the every-variant test and the warp-specialised sweep to the variants whose
/// id contains one of the parts
/// (e.g. `p4.,p8.` for the warp-specialised ones); printed, so a narrowed log says so.
fn variant_selected(s: &KernelSpec) -> bool {
    match std::env::var("GLA_TEST_VARIANTS") {
        Ok(list) => list.split(',').any(|p| s.id().contains(p)),
        Err(_) => true,
    }
}

/// Run one case with one variant (and segments per sequence: `None` = the runtime's choice, which splits these
/// small problems; `Some(1)` = one CTA walks each whole sequence); returns (rel RMS of o, rel RMS of the final
/// state).
fn run_case(
    gla: &Gla,
    gate: &'static dyn Gate,
    case: &Case,
    spec: Option<KernelSpec>,
    segments: Option<usize>,
    want: &(Vec<f64>, Vec<f64>),
) -> (f64, f64) {
    let (got_o, got_s) = run_case_raw(gla, gate, case, spec, segments);
    (rel_rms(&got_o, &want.0), rel_rms(&got_s, &want.1))
}

/// [`run_case`]'s outputs: o and the final state.
fn run_case_raw(
    gla: &Gla,
    gate: &'static dyn Gate,
    case: &Case,
    spec: Option<KernelSpec>,
    segments: Option<usize>,
) -> (Vec<f64>, Vec<f64>) {
    let d = case.dims;
    let dt = case.dtype;
    let q = gla.upload(&case.host(&case.q, &d.q_shape(), dt)).unwrap();
    let k = gla.upload(&case.host(&case.k, &d.q_shape(), dt)).unwrap();
    let v = gla.upload(&case.host(&case.v, &d.v_shape(), dt)).unwrap();
    let lshape = gla_runtime::forward::logits_shape(gate.shape(), &d);
    let logits = (gate.shape() != GateShape::Fixed)
        .then(|| gla.upload(&case.host(&case.logits, &lshape, dt)).unwrap());
    let np = gate.params().len();
    let params =
        (np > 0).then(|| DeviceTensor::from_f32(gla.gpu(), &[d.h, np], &case.params).unwrap());
    let n = case.n_seqs();
    let sshape = [n, d.h, d.dk, d.dv];
    let h0 = case
        .initial_state
        .as_ref()
        .map(|s| DeviceTensor::from_f32(gla.gpu(), &sshape, s).unwrap());
    let mut o = gla.poisoned(dt, &d.v_shape()).unwrap();
    let mut ht = gla.poisoned(DType::F32, &sshape).unwrap();
    let opts = ForwardOptions {
        scale: None,
        initial_state: h0.as_ref(),
        output_final_state: true,
        cu_seqlens: case.cu_seqlens.as_deref(),
        variant: spec,
        segments,
    };
    gla.forward_into(
        gate,
        &q,
        &k,
        &v,
        logits.as_ref(),
        params.as_ref(),
        &opts,
        &mut o,
        Some(&mut ht),
    )
    .unwrap_or_else(|e| panic!("forward failed for {:?}: {e}", spec));
    let got_o: Vec<f64> = o.to_f32().unwrap().into_iter().map(f64::from).collect();
    let got_s: Vec<f64> = ht.to_f32().unwrap().into_iter().map(f64::from).collect();
    (got_o, got_s)
}

/// Every variant of every built-in gate, every dtype, on one ragged problem (T not a multiple of any chunk,
/// initial and final state), at the variant's specialised head dim.
/// Compile `specs` on all cores before a test runs them (one after another inside its loops they took most of its
/// time: dozens of NVRTC compiles).
fn precompile(gla: &Gla, specs: &[KernelSpec]) {
    let t0 = std::time::Instant::now();
    let mut ids: Vec<&KernelSpec> = specs.iter().collect();
    ids.sort_by_key(|s| (s.id(), s.gate.content_hash()));
    ids.dedup_by_key(|s| (s.id(), s.gate.content_hash()));
    ids.par_iter().for_each(|s| {
        gla.compile_spec(s)
            .unwrap_or_else(|e| panic!("{}: {e}", s.id()));
    });
    println!(
        "compiled {} variants in {:.1} s",
        ids.len(),
        t0.elapsed().as_secs_f64()
    );
}

/// The materialized two-pass plan of a (fused) default: not warp-specialised, one CTA an SM, no key split.
fn materialized_of(fused: KernelSpec) -> KernelSpec {
    let mut mat = fused;
    mat.materialize = true;
    mat.tiles.producer_warps = 0; // the materialized plan is not warp-specialised
    mat.tiles.producer_groups = 1;
    mat.tiles.wgmma = false;
    mat.tiles.ctas_per_sm = 1; // (two CTAs an SM and key splits are warp-specialised plans too)
    if mat.key_split > 1 {
        mat.dk *= mat.key_split;
        mat.key_split = 1;
        mat.cluster = false;
        mat.tiles.block_v = 64;
    }
    if mat.validate().is_err() {
        mat.chunk = 32;
    }
    mat
}

/// A plain fused mma.sync variant beside a warp-specialised default (None where it is the default or invalid).
fn plain_of(ws: KernelSpec) -> Option<KernelSpec> {
    let mut plain = ws;
    plain.tiles = Tiles {
        block_v: 64.min(plain.dv),
        warps: 8,
        producer_warps: 0,
        producer_groups: 1,
        wgmma: false,
        ctas_per_sm: 1,
    };
    plain.key_split = 1;
    plain.cluster = false;
    plain.chunk = 64;
    (plain.validate().is_ok() && plain != ws).then_some(plain)
}

#[test]
fn every_variant_matches_the_f64_reference() {
    let Some(gla) = gpu_or_skip("every_variant_matches_the_f64_reference") else {
        return;
    };
    let gates = kernel_gates();
    assert!(!gates.is_empty(), "no gates to test");
    let specs: Vec<KernelSpec> = gates
        .iter()
        .flat_map(|g| all_variants(*g))
        .filter(|s| variant_selected(s))
        .collect();
    assert!(!specs.is_empty(), "GLA_TEST_VARIANTS selects no variant");
    if let Ok(list) = std::env::var("GLA_TEST_VARIANTS") {
        println!(
            "GLA_TEST_VARIANTS={list}: testing only these variants ({} of them)",
            specs.len()
        );
    }
    precompile(&gla, &specs);
    // One problem (and one f64 reference) per (gate, dtype, head dim), shared by all variants of that key.
    // (A key-split variant serves d_k = key_split · dk: its problem has that d_k.)
    let mut cases: BTreeMap<(String, DType, u32), (Case, (Vec<f64>, Vec<f64>))> = BTreeMap::new();
    for s in &specs {
        let key = (s.gate.name().to_string(), s.dtype, s.key_dim());
        cases.entry(key).or_insert_with(|| {
            let d = s.key_dim() as usize;
            let case = Case::random(
                s.gate,
                Dims::new(2, 150, 2, d, d),
                s.dtype,
                7 + d as u64,
                true,
                None,
            );
            let want = case.reference(s.gate, None);
            (case, want)
        });
    }
    let worst: Mutex<BTreeMap<(String, DType), (f64, String)>> = Mutex::new(BTreeMap::new());
    let mut failures = Vec::new();
    // Fused variants run twice: split into segments (the two-level scan; the runtime splits this small problem)
    // and unsplit (one CTA per sequence).
    let runs: Vec<(KernelSpec, Option<usize>)> = specs
        .iter()
        .flat_map(|s| {
            if s.materialize {
                vec![(*s, None)]
            } else {
                vec![(*s, None), (*s, Some(1))]
            }
        })
        .collect();
    for (s, segs) in &runs {
        let (case, want) = &cases[&(s.gate.name().to_string(), s.dtype, s.key_dim())];
        let (eo, es) = run_case(&gla, s.gate, case, Some(*s), *segs, want);
        let e = eo.max(es);
        let mut w = worst.lock().unwrap();
        let slot = w
            .entry((s.gate.name().to_string(), s.dtype))
            .or_insert((0.0, String::new()));
        if e > slot.0 || !e.is_finite() {
            *slot = (e, s.id());
        }
        if !(e <= tolerance(s.dtype)) {
            failures.push(format!(
                "{} (segments {segs:?}): o {:.2e}, final state {:.2e} (tolerance {:.0e})",
                s.id(),
                eo,
                es,
                tolerance(s.dtype)
            ));
        }
    }
    println!("| gate | dtype | variants | worst rel RMS (o, final state) | worst variant |");
    println!("|---|---|---|---|---|");
    for ((g, dt), (e, id)) in worst.lock().unwrap().iter() {
        let n = specs
            .iter()
            .filter(|s| s.gate.name() == g && s.dtype == *dt)
            .count();
        println!("| {g} | {dt} | {n} | {e:.2e} | {id} |");
    }
    assert!(
        failures.is_empty(),
        "{} of {} variants out of tolerance:\n{}",
        failures.len(),
        specs.len(),
        failures.join("\n")
    );
}

/// Every gate strength of the benchmark (tests::strengths: log σ(x)/16, /1, /0.1, fla's max(log σ(x), −5), RWKV-6,
/// HGRN-2, constant −60 and −1e-6) × dtype × head dim (64, 128, 256, 512: the default variant), with the logits as drawn and
/// shifted by −12 / +12, on a ragged problem with an initial and a final state: the decay-dependent paths of the
/// per-key kernels (factorised on mild chunks, exact otherwise) are exact at every strength.
///
/// Tolerance: f32 1e-5, f16 3e-3, bf16 4e-3. Where the decay is weak but not negligible (gla/0.1 at logits + 12:
/// |log α| ≈ 1e-5 .. 1e-3 a token) the factorised operands Q̃ = Q ⊙ exp(Γ) and K̂ differ from Q and K by less than
/// a bf16 ulp and so get rounded anew, beside the state and the output: ≈ 1.1e-3 relative RMS a rounding; every
/// bf16 variant measured 3.2e-3 there on the H200 (2026-12-05), the other strengths ≤ 3e-3. `GLA_TEST_STRENGTHS=a,b`
/// narrows the run to some strength labels (printed).
#[test]
fn every_strength_matches_the_f64_reference() {
    let Some(gla) = gpu_or_skip("every_strength_matches_the_f64_reference") else {
        return;
    };
    let tol = |dt: DType| {
        if dt == DType::BF16 {
            4e-3
        } else {
            tolerance(dt)
        }
    };
    let mut failures = Vec::new();
    let strengths: Vec<_> = match std::env::var("GLA_TEST_STRENGTHS") {
        Ok(list) => {
            println!("GLA_TEST_STRENGTHS={list}: testing only these strengths");
            tests::strengths::all()
                .into_iter()
                .filter(|s| list.split(',').any(|l| l == s.label))
                .collect()
        }
        Err(_) => tests::strengths::all(),
    };
    assert!(
        !strengths.is_empty(),
        "GLA_TEST_STRENGTHS selects no strength"
    );
    let specs: Vec<KernelSpec> = strengths
        .iter()
        .flat_map(|st| {
            DType::ALL.into_iter().flat_map(move |dt| {
                [64usize, 128, 256, 512]
                    .into_iter()
                    .map(move |d| KernelSpec::default_for(st.gate, dt, d, d).unwrap())
            })
        })
        .collect();
    precompile(&gla, &specs);
    println!("| strength | dtype | d | logit shift | variant | o | final state |");
    println!("|---|---|---|---|---|---|---|");
    for (si, st) in strengths.into_iter().enumerate() {
        for dt in DType::ALL {
            for d in [64usize, 128, 256, 512] {
                for shift in [0.0f32, -12.0, 12.0] {
                    let seed = 5000 + 100 * si as u64 + d as u64 + (shift as i64 + 12) as u64;
                    let mut case =
                        Case::random(st.gate, Dims::new(2, 200, 2, d, d), dt, seed, true, None);
                    case.logits
                        .iter_mut()
                        .for_each(|x| *x = dt.round(*x + shift));
                    let want = case.reference(st.gate, None);
                    let spec = KernelSpec::default_for(st.gate, dt, d, d).unwrap();
                    for segs in [None, Some(1)] {
                        let (eo, es) = run_case(&gla, st.gate, &case, Some(spec), segs, &want);
                        println!(
                            "| {} | {dt} | {d} | {shift:+} | {}{} | {eo:.2e} | {es:.2e} |",
                            st.label,
                            spec.id(),
                            if segs.is_some() { " (unsplit)" } else { "" }
                        );
                        if !(eo.max(es) <= tol(dt)) {
                            failures.push(format!("{} {} (segments {segs:?}) shift {shift}: o {eo:.2e}, state {es:.2e}", st.label, spec.id()));
                        }
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

/// q and k far from unit scale (2^−30 and 2^30, exact in every dtype) at the strengths that take the per-key kernels'
/// exact path (RWKV-6, 10·log σ(x), constant −60) and a mild one: the block factors 2^±(Γ − R) of that path reach
/// 2^±88 (`gla_codegen::BLOCK_SPAN`), so its operands stay finite and normal only for |q|, |k| within 2^±38 — checked
/// here with margin. bf16 and f32 (f16 cannot hold 2^30), d = 128 and 256, logits ~ N(0, 1).
///
/// Tolerance: f32 1e-5, bf16 4e-3 (as `every_strength_matches_the_f64_reference`).
#[test]
fn query_key_scales_far_from_one_stay_exact() {
    let Some(gla) = gpu_or_skip("query_key_scales_far_from_one_stay_exact") else {
        return;
    };
    let strengths: Vec<_> = tests::strengths::all()
        .into_iter()
        .filter(|s| ["gla/16", "rwkv6", "gla/0.1", "const-60"].contains(&s.label))
        .collect();
    assert_eq!(strengths.len(), 4, "the strength labels changed");
    let dtypes = [DType::BF16, DType::F32];
    let specs: Vec<KernelSpec> = strengths
        .iter()
        .flat_map(|st| {
            dtypes.into_iter().flat_map(move |dt| {
                [128usize, 256]
                    .into_iter()
                    .map(move |d| KernelSpec::default_for(st.gate, dt, d, d).unwrap())
            })
        })
        .collect();
    precompile(&gla, &specs);
    let mut failures = Vec::new();
    for (si, st) in strengths.iter().enumerate() {
        for dt in dtypes {
            let tol = if dt == DType::BF16 {
                4e-3
            } else {
                tolerance(dt)
            };
            for d in [128usize, 256] {
                for log2_scale in [-30i32, 30] {
                    let seed = 7000 + 10 * si as u64 + d as u64 + (log2_scale + 30) as u64;
                    let mut case =
                        Case::random(st.gate, Dims::new(2, 200, 2, d, d), dt, seed, true, None);
                    let f = (log2_scale as f32).exp2();
                    case.q
                        .iter_mut()
                        .chain(case.k.iter_mut())
                        .for_each(|x| *x *= f);
                    let want = case.reference(st.gate, None);
                    let spec = KernelSpec::default_for(st.gate, dt, d, d).unwrap();
                    let (eo, es) = run_case(&gla, st.gate, &case, Some(spec), Some(1), &want);
                    println!(
                        "{} {dt} d {d} |q|,|k| x 2^{log2_scale}: o {eo:.2e}, state {es:.2e} ({})",
                        st.label,
                        spec.id()
                    );
                    if !(eo.max(es) <= tol) {
                        failures.push(format!(
                            "{} {dt} d {d} scale 2^{log2_scale}: o {eo:.2e}, state {es:.2e}",
                            st.label
                        ));
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

/// Near-zero forget gates (`gla_codegen::LOG2_ALPHA_FLOOR`): RWKV-6's −exp(x) with one logit a chunk at +30
/// (log α ≈ −1e13) among mild ones (x − 5), and with every logit at x + 95 (log α = −∞ in f32). Without the floor the
/// tokens after such a gate got wrong decays (14 % relative RMS) or NaN. Every dtype, d = 64 / 128 / 256, each
/// sequence whole and the runtime's segments. Tolerance: f32 1e-5, bf16 / f16 3e-3.
#[test]
fn near_zero_forget_gates_keep_the_later_decays_exact() {
    let Some(gla) = gpu_or_skip("near_zero_forget_gates_keep_the_later_decays_exact") else {
        return;
    };
    let gate: &'static dyn Gate = registered_gates()
        .into_iter()
        .find(|g| g.name() == "rwkv6")
        .expect("the built-in rwkv6 gate");
    let dims = [64usize, 128, 256];
    let specs: Vec<KernelSpec> = DType::ALL
        .into_iter()
        .flat_map(|dt| {
            dims.into_iter()
                .map(move |d| KernelSpec::default_for(gate, dt, d, d).unwrap())
        })
        .collect();
    precompile(&gla, &specs);
    let mut failures = Vec::new();
    for dt in DType::ALL {
        for d in dims {
            for spike in [true, false] {
                let mut case = Case::random(
                    gate,
                    Dims::new(2, 200, 2, d, d),
                    dt,
                    9100 + d as u64,
                    true,
                    None,
                );
                let per_token = case.logits.len() / (2 * 200);
                for (n, x) in case.logits.iter_mut().enumerate() {
                    let t = (n / per_token) % 200;
                    let shift = if spike { tests::spike_shift(t) } else { 95.0 };
                    *x = dt.round(*x + shift);
                }
                let want = case.reference(gate, None);
                let spec = KernelSpec::default_for(gate, dt, d, d).unwrap();
                for segs in [None, Some(1)] {
                    let (eo, es) = run_case(&gla, gate, &case, Some(spec), segs, &want);
                    let what = if spike {
                        "one gate a chunk at −1e13"
                    } else {
                        "every gate −∞"
                    };
                    println!(
                        "{dt} d {d} {what} (segments {segs:?}): o {eo:.2e}, state {es:.2e} ({})",
                        spec.id()
                    );
                    if !(eo.max(es) <= tolerance(dt)) {
                        failures.push(format!(
                            "{dt} d {d} {what} (segments {segs:?}): o {eo:.2e}, state {es:.2e}"
                        ));
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

struct Shape {
    name: &'static str,
    dims: Dims,
    cu: Option<Vec<usize>>,
    state: bool,
    /// Added to every gate logit: −12 makes most gates decay fast (per-key kernels take the exact sub-chunk
    /// path), +12 makes them decay slowly (the factorised path) — both paths are checked for every gate.
    logit_shift: f32,
}

fn shapes() -> Vec<Shape> {
    let s = |name, b, t, h, dk, dv, state| Shape {
        name,
        dims: Dims::new(b, t, h, dk, dv),
        cu: None,
        state,
        logit_shift: 0.0,
    };
    vec![
        s("T=1", 2, 1, 2, 64, 64, true),
        s("T=63 D=100", 2, 63, 3, 100, 100, false),
        s("T=64 H=1", 1, 64, 1, 128, 128, true),
        s("T=65 D=256", 2, 65, 2, 256, 256, true),
        s("T=130 D=200", 1, 130, 2, 200, 200, true),
        Shape {
            name: "T=300 D=256 logits+12",
            dims: Dims::new(1, 300, 2, 256, 256),
            cu: None,
            state: true,
            logit_shift: 12.0,
        },
        s("T=130 D=512", 1, 130, 2, 512, 512, true),
        s("T=70 dk=320 dv=512", 2, 70, 2, 320, 512, true),
        Shape {
            name: "varlen D=510 logits-12",
            dims: Dims::new(1, 200, 2, 510, 510),
            cu: Some(vec![0, 77, 77, 200]),
            state: true,
            logit_shift: -12.0,
        },
        s("T=1000 dk!=dv", 1, 1000, 2, 64, 128, false),
        s("T=4096", 1, 4096, 2, 128, 128, true),
        Shape {
            name: "varlen (empty, 1, 100, 37, 64 + state)",
            dims: Dims::new(1, 202, 2, 128, 128),
            cu: Some(vec![0, 0, 1, 101, 138, 202]),
            state: true,
            logit_shift: 0.0,
        },
        Shape {
            name: "varlen D=100",
            dims: Dims::new(1, 300, 2, 100, 100),
            cu: Some(vec![0, 129, 129, 300]),
            state: false,
            logit_shift: 0.0,
        },
        Shape {
            name: "T=300 logits-12",
            dims: Dims::new(2, 300, 2, 128, 128),
            cu: None,
            state: true,
            logit_shift: -12.0,
        },
        Shape {
            name: "T=300 logits+12",
            dims: Dims::new(2, 300, 2, 128, 128),
            cu: None,
            state: true,
            logit_shift: 12.0,
        },
    ]
}

/// The default (fused) and a materialized variant of every gate and dtype, over the shapes: T ∈ {1, 63,
/// 64, 65, 1000, 4096}, D ∈ {64, 100, 128, 256, 510, 512}, d_k ≠ d_v, H = 1, varlen with an empty sequence, states.
/// (d_k over 256 has no materialized variant: the key slices are a fused plan; its column prints "n/a".)
#[test]
fn shapes_varlen_and_states_match_the_f64_reference() {
    let Some(gla) = gpu_or_skip("shapes_varlen_and_states_match_the_f64_reference") else {
        return;
    };
    let mut failures = Vec::new();
    let mut specs = Vec::new();
    for gate in kernel_gates() {
        for dt in DType::ALL {
            for sh in shapes() {
                let fused = KernelSpec::default_for(gate, dt, sh.dims.dk, sh.dims.dv).unwrap();
                specs.push(fused);
                if sh.dims.dk <= 256 {
                    specs.push(materialized_of(fused));
                }
            }
        }
    }
    precompile(&gla, &specs);
    println!("| gate | dtype | shape | fused o | fused state | fused unsplit o | fused unsplit state | materialized o | materialized state |");
    println!("|---|---|---|---|---|---|---|---|---|");
    for gate in kernel_gates() {
        for dt in DType::ALL {
            for (i, sh) in shapes().into_iter().enumerate() {
                let mut case =
                    Case::random(gate, sh.dims, dt, 1000 + i as u64, sh.state, sh.cu.clone());
                case.logits
                    .iter_mut()
                    .for_each(|x| *x = dt.round(*x + sh.logit_shift));
                let want = case.reference(gate, None);
                let d = sh.dims;
                let fused = KernelSpec::default_for(gate, dt, d.dk, d.dv).unwrap();
                let mat = materialized_of(fused);
                let mut row = format!("| {} | {} | {} |", gate.name(), dt, sh.name);
                let mut runs = vec![(fused, None), (fused, Some(1))];
                if d.dk <= 256 {
                    runs.push((mat, None));
                } else {
                    row += " n/a | n/a |";
                }
                for (spec, segs) in runs {
                    let (eo, es) = run_case(&gla, gate, &case, Some(spec), segs, &want);
                    row += &format!(" {eo:.2e} | {es:.2e} |");
                    if !(eo.max(es) <= tolerance(dt)) {
                        failures.push(format!(
                            "{} (segments {segs:?}) {}: o {eo:.2e}, state {es:.2e}",
                            spec.id(),
                            sh.name
                        ));
                    }
                }
                println!("{row}");
            }
        }
    }
    assert!(
        failures.is_empty(),
        "out of tolerance:\n{}",
        failures.join("\n")
    );
}

/// The warp-specialised variants (producer warps for the chunk-local stages, consumer warps for the state; a ring of
/// shared-memory slots between them) over the shape sweep, split into segments and unsplit: the ring wraps many
/// times at T = 4096, chunks end mid-slot at T = 63 / 65 / 1000, sequences are empty or one token long, and
/// logits ±12 send per-key chunks down the exact and the factorised path.
#[test]
fn warp_specialised_variants_over_the_shapes() {
    let Some(gla) = gpu_or_skip("warp_specialised_variants_over_the_shapes") else {
        return;
    };
    let mut failures = Vec::new();
    let mut runs = 0usize;
    let mut worst: BTreeMap<(String, DType), (f64, String)> = BTreeMap::new();
    let gates: Vec<&'static dyn Gate> = kernel_gates()
        .into_iter()
        .filter(|g| g.shape() != GateShape::PerValue)
        .collect();
    // A few warp-specialised configurations per (gate, dtype, head dims).
    let specs_for = |gate: &'static dyn Gate, dt: DType, d: &Dims| {
        let (kd, vd) = (
            specialised_dim(d.dk).unwrap(),
            specialised_dim(d.dv).unwrap(),
        );
        let mut specs: Vec<KernelSpec> = Vec::new();
        // (The wgmma consumers at C 32 with 4 + 4, 8 + 4 and 8 + 8 warps, one and two producer groups.)
        for (chunk, bv, warps, pw, pg, wg) in [
            (32, 64, 4, 4, 1, false),
            (32, 64, 8, 4, 1, false),
            (32, 128, 8, 4, 1, false),
            (32, 128, 8, 4, 2, false),
            (32, 128, 8, 8, 1, false),
            (32, 128, 8, 8, 2, false),
            (64, 64, 8, 4, 1, false),
            (32, 64, 4, 4, 1, true),
            (32, 128, 8, 4, 1, true),
            (32, 128, 8, 4, 2, true),
            (32, 128, 8, 8, 1, true),
            (32, 128, 8, 8, 2, true),
        ] {
            // (wgmma at 8 + 8 warps: one group for the scalar gates, two (one warpgroup each) for per-key gates.)
            if wg && pw == 8 && (gate.shape() == GateShape::PerKey) != (pg == 2) {
                continue;
            }
            // (Two CTAs an SM where they fit: 4 + 4 warps at d = 64.)
            for ctas_per_sm in [1, 2] {
                let tiles = Tiles {
                    block_v: if wg { 16 * warps } else { bv.min(vd) },
                    warps,
                    producer_warps: pw,
                    producer_groups: pg,
                    wgmma: wg,
                    ctas_per_sm,
                };
                if let Ok(s) = KernelSpec::new(gate, dt, chunk, 16, kd, vd, false, tiles) {
                    if !specs.contains(&s) && variant_selected(&s) {
                        specs.push(s);
                    }
                }
            }
        }
        // (d_k 129..=256: the search space's key-split variants — two 128-column key slices on the wgmma kernel —
        // with their tiles, at this shape's d_v.)
        // (d_k 257..=512: the key split 4 variants likewise, where d_k splits in four.)
        let want_ks = match kd {
            256 => 2,
            512 if d.dk % 4 == 0 => 4,
            _ => 0,
        };
        if want_ks > 0 && vd >= 128 {
            for ks in all_variants(gate)
                .into_iter()
                .filter(|s| s.key_split == want_ks && s.tiles.specialised() && s.dtype == dt)
            {
                if let Ok(s) =
                    KernelSpec::new(gate, dt, ks.chunk, ks.sub_chunk, ks.dk, vd, false, ks.tiles)
                        .and_then(|s| {
                            if ks.cluster {
                                s.with_cluster_key_split()
                            } else {
                                s.with_key_split(ks.key_split)
                            }
                        })
                {
                    if !specs.contains(&s) && variant_selected(&s) {
                        specs.push(s);
                    }
                }
            }
        }
        specs
    };
    // Compile them all in parallel first (NVRTC takes ~1.5 s a variant).
    let mut all: Vec<KernelSpec> = Vec::new();
    for &gate in &gates {
        for dt in [DType::BF16, DType::F16] {
            for sh in shapes() {
                for s in specs_for(gate, dt, &sh.dims) {
                    if !all.contains(&s) {
                        all.push(s);
                    }
                }
            }
        }
    }
    all.par_iter().for_each(|s| {
        gla.compile_spec(s)
            .unwrap_or_else(|e| panic!("{}: {e}", s.id()));
    });
    println!("compiled {} warp-specialised variants", all.len());
    // GLA_TEST_TRACE=1 prints every run before it starts (to name the one a device error stops).
    let trace = std::env::var("GLA_TEST_TRACE").is_ok();
    for &gate in &gates {
        for dt in [DType::BF16, DType::F16] {
            println!("{} {dt}", gate.name());
            for (i, sh) in shapes().into_iter().enumerate() {
                let d = sh.dims;
                let specs = specs_for(gate, dt, &d);
                if specs.is_empty() {
                    continue;
                }
                let mut case = Case::random(gate, d, dt, 5000 + i as u64, sh.state, sh.cu.clone());
                case.logits
                    .iter_mut()
                    .for_each(|x| *x = dt.round(*x + sh.logit_shift));
                let want = case.reference(gate, None);
                for spec in specs {
                    for segs in [None, Some(1)] {
                        if trace {
                            println!("  {} {} segments {segs:?}", spec.id(), sh.name);
                        }
                        let (eo, es) = run_case(&gla, gate, &case, Some(spec), segs, &want);
                        runs += 1;
                        let e = eo.max(es);
                        let w = worst
                            .entry((gate.name().to_string(), dt))
                            .or_insert((0.0, String::new()));
                        if e > w.0 || !e.is_finite() {
                            *w = (e, format!("{} {} segments {segs:?}", spec.id(), sh.name));
                        }
                        if !(e <= tolerance(dt)) {
                            failures.push(format!(
                                "{} (segments {segs:?}) {}: o {eo:.2e}, state {es:.2e}",
                                spec.id(),
                                sh.name
                            ));
                        }
                    }
                }
            }
        }
    }
    println!("{runs} runs of warp-specialised variants");
    println!("| gate | dtype | worst rel RMS (o, final state) | where |");
    println!("|---|---|---|---|");
    for ((g, dt), (e, at)) in &worst {
        println!("| {g} | {dt} | {e:.2e} | {at} |");
    }
    assert!(runs > 0, "no warp-specialised variant ran");
    assert!(
        failures.is_empty(),
        "out of tolerance:\n{}",
        failures.join("\n")
    );
}

/// The two-level scan with a lead segment (`gla_codegen::total_segments`): segment 0 runs the fused forward in the
/// state pass's launch and hands its final state to the combine; the last segment writes the final state. Long
/// enough sequences that the lead holds chunks (63 chunks at S = 3: a lead of 14), S = 2 (the lead and one segment,
/// no state pass), S = 5, the runtime's choice, varlen with an empty and a one-token sequence, an initial state; the
/// default (warp-specialised) variant and a mma.sync fused variant of every gate in bf16, of GLA and Mamba-2 in f32.
#[test]
fn segments_with_a_lead_match_the_f64_reference() {
    let Some(gla) = gpu_or_skip("segments_with_a_lead_match_the_f64_reference") else {
        return;
    };
    let mut failures = Vec::new();
    let mut runs = 0usize;
    println!("| gate | dtype | shape | variant | segments | o | final state |");
    println!("|---|---|---|---|---|---|---|");
    let shapes = [
        ("T=2000 H=2", Dims::new(1, 2000, 2, 128, 128), None),
        (
            "varlen (700, 0, 1, 1299) + state",
            Dims::new(1, 2000, 2, 128, 128),
            Some(vec![0, 700, 700, 701, 2000]),
        ),
        ("T=1500 D=64", Dims::new(2, 1500, 1, 64, 64), None),
    ];
    let dts_of = |gate: &dyn Gate| -> &'static [DType] {
        if ["gla", "mamba2"].contains(&gate.name()) {
            &[DType::BF16, DType::F32]
        } else {
            &[DType::BF16]
        }
    };
    let mut all = Vec::new();
    for gate in kernel_gates() {
        for &dt in dts_of(gate) {
            for (_, d, _) in &shapes {
                let ws = KernelSpec::default_for(gate, dt, d.dk, d.dv).unwrap();
                all.extend(std::iter::once(ws).chain(plain_of(ws)));
            }
        }
    }
    precompile(&gla, &all);
    for gate in kernel_gates() {
        for &dt in dts_of(gate) {
            for (i, (name, d, cu)) in shapes.iter().enumerate() {
                let case = Case::random(gate, *d, dt, 9100 + i as u64, true, cu.clone());
                let want = case.reference(gate, None);
                let ws = KernelSpec::default_for(gate, dt, d.dk, d.dv).unwrap();
                let specs: Vec<KernelSpec> = std::iter::once(ws).chain(plain_of(ws)).collect();
                for spec in specs {
                    for segs in [Some(2), Some(3), Some(5), None] {
                        let (eo, es) = run_case(&gla, gate, &case, Some(spec), segs, &want);
                        runs += 1;
                        println!(
                            "| {} | {dt} | {name} | {} | {segs:?} | {eo:.2e} | {es:.2e} |",
                            gate.name(),
                            spec.id()
                        );
                        if !(eo.max(es) <= tolerance(dt)) {
                            failures.push(format!(
                                "{} (segments {segs:?}) {name}: o {eo:.2e}, state {es:.2e}",
                                spec.id()
                            ));
                        }
                    }
                }
            }
        }
    }
    assert!(runs > 0, "nothing ran");
    assert!(
        failures.is_empty(),
        "out of tolerance:\n{}",
        failures.join("\n")
    );
}

/// Every key-split variant, each key slice on its own: the final state's rows of slice s (d_k rows s·d_k/2 ..) and
/// the output, at T = 1, 32 (one chunk), 65 and 300, with and without an initial state — so that a slice whose
/// state or partial output goes wrong is named (the cluster variants exchange the partials through DSMEM).
#[test]
fn key_slices_each_match_the_f64_reference() {
    let Some(gla) = gpu_or_skip("key_slices_each_match_the_f64_reference") else {
        return;
    };
    let mut failures = Vec::new();
    let mut runs = 0usize;
    println!("| variant | T | state | o | slice 0 state | slice 1 state |");
    println!("|---|---|---|---|---|---|");
    for gate in kernel_gates()
        .into_iter()
        .filter(|g| g.shape() != GateShape::PerValue)
    {
        let specs: Vec<KernelSpec> = all_variants(gate)
            .into_iter()
            .filter(|s| s.key_split == 2 && s.dtype == DType::BF16 && variant_selected(s))
            .collect();
        for spec in specs {
            for (i, t) in [1usize, 32, 65, 300].into_iter().enumerate() {
                for state in [false, true] {
                    let d = Dims::new(1, t, 2, 256, 256);
                    let case = Case::random(gate, d, DType::BF16, 9300 + i as u64, state, None);
                    let want = case.reference(gate, None);
                    let (got_o, got_s) = run_case_raw(&gla, gate, &case, Some(spec), Some(1));
                    runs += 1;
                    let eo = rel_rms(&got_o, &want.0);
                    // ht [1, H, 256, 256]: rows 0..128 of each head are slice 0's, 128.. slice 1's.
                    let rows = |sl: usize| -> (Vec<f64>, Vec<f64>) {
                        let (mut g, mut w) = (Vec::new(), Vec::new());
                        for h in 0..d.h {
                            let at = (h * 256 + sl * 128) * 256;
                            g.extend_from_slice(&got_s[at..at + 128 * 256]);
                            w.extend_from_slice(&want.1[at..at + 128 * 256]);
                        }
                        (g, w)
                    };
                    let (g0, w0) = rows(0);
                    let (g1, w1) = rows(1);
                    let (e0, e1) = (rel_rms(&g0, &w0), rel_rms(&g1, &w1));
                    println!(
                        "| {} | {t} | {state} | {eo:.2e} | {e0:.2e} | {e1:.2e} |",
                        spec.id()
                    );
                    if !(eo.max(e0).max(e1) <= tolerance(DType::BF16)) {
                        failures.push(format!("{} T={t} state {state}: o {eo:.2e}, slice 0 state {e0:.2e}, slice 1 state {e1:.2e}", spec.id()));
                    }
                }
            }
        }
    }
    assert!(runs > 0, "no key-split variant ran");
    assert!(
        failures.is_empty(),
        "out of tolerance:\n{}",
        failures.join("\n")
    );
}

/// Bad input to the GPU API returns typed errors (here: on a real device; the pure validation is unit-tested in
/// gla-runtime without a GPU).
#[test]
fn bad_shapes_are_typed_errors() {
    let Some(gla) = gpu_or_skip("bad_shapes_are_typed_errors") else {
        return;
    };
    let gate: &'static dyn Gate = &gla::gates::Gla;
    let d = Dims::new(1, 16, 2, 64, 64);
    let case = Case::random(gate, d, DType::BF16, 3, false, None);
    let q = gla
        .upload(&case.host(&case.q, &d.q_shape(), DType::BF16))
        .unwrap();
    let v_wrong = gla
        .upload(&case.host(&case.v[..16 * 2 * 32], &[1, 16, 2, 32], DType::BF16))
        .unwrap();
    let err = gla
        .forward(
            gate,
            &q,
            &q,
            &v_wrong,
            None,
            None,
            &ForwardOptions::default(),
        )
        .unwrap_err();
    assert!(
        matches!(
            err,
            gla_core::GlaError::InvalidArgument { .. } | gla_core::GlaError::Shape { .. }
        ),
        "{err}"
    );
}

/// 64-bit offsets (fla bug #1080): q, k, v and the logits hold more than 2^31 elements, and the second sequence of
/// a varlen batch starts past element 2^31. The kernel's output is checked against the f64 reference on the first
/// 64 tokens of sequence 0 and on the whole of sequence 1 (both computed on their own, from the same inputs).
#[test]
fn offsets_beyond_2_pow_31_elements() {
    let Some(gla) = gpu_or_skip("offsets_beyond_2_pow_31_elements") else {
        return;
    };
    let gate: &'static dyn Gate = &gla::gates::Gla;
    let (h, d, tail) = (16usize, 128usize, 80usize);
    let t = (1usize << 31) / (h * d) + 200; // B·T·H·D = 2^31 + 409600 elements
    let dims = Dims::new(1, t, h, d, d);
    let cu = vec![0, t - tail, t];
    let case = Case::random(gate, dims, DType::BF16, 2031, false, Some(cu.clone()));
    assert!(
        (t - tail) * h * d > 1usize << 31,
        "sequence 1 must start past element 2^31"
    );
    let q = gla
        .upload(&case.host(&case.q, &dims.q_shape(), DType::BF16))
        .unwrap();
    let k = gla
        .upload(&case.host(&case.k, &dims.q_shape(), DType::BF16))
        .unwrap();
    let v = gla
        .upload(&case.host(&case.v, &dims.v_shape(), DType::BF16))
        .unwrap();
    let lg = gla
        .upload(&case.host(&case.logits, &dims.q_shape(), DType::BF16))
        .unwrap();
    let mut o = gla.poisoned(DType::BF16, &dims.v_shape()).unwrap();
    let opts = ForwardOptions {
        cu_seqlens: Some(&cu),
        ..Default::default()
    };
    gla.forward_into(gate, &q, &k, &v, Some(&lg), None, &opts, &mut o, None)
        .expect("forward");
    let got = o.to_f32().unwrap();
    let row = h * d;
    for (name, start, len) in [
        ("sequence 0, first 64 tokens", 0usize, 64usize),
        ("sequence 1 (past 2^31)", t - tail, tail),
    ] {
        let sub = |x: &[f32]| x[start * row..(start + len) * row].to_vec();
        let part = Case {
            dims: Dims::new(1, len, h, d, d),
            dtype: DType::BF16,
            q: sub(&case.q),
            k: sub(&case.k),
            v: sub(&case.v),
            logits: sub(&case.logits),
            params: Vec::new(),
            initial_state: None,
            cu_seqlens: None,
        };
        let want = part.reference(gate, None).0;
        let got_part: Vec<f64> = got[start * row..(start + len) * row]
            .iter()
            .map(|&x| x as f64)
            .collect();
        let e = rel_rms(&got_part, &want);
        println!("{name}: rel RMS {e:.2e}");
        assert!(
            e <= tolerance(DType::BF16),
            "{name}: rel RMS {e:.2e} > {:.0e}",
            tolerance(DType::BF16)
        );
    }
}
