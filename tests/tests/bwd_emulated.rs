//! The backward kernels' real source (`gla_codegen::generate_backward`, i.e. `cuda/bwd.cuh` with each gate's
//! generated code) run on the CPU by the host emulator (`tests::emu`: fibers for threads, barriers checked), against
//! the f64 reference gradients (`gate_ref::gate_backward`) on fresh random inputs: every gate shape the kernels serve
//! (the seven built-in gates and the tests' per-value gate `value_gla`), weak and strong decays (logits shifted by 0, −12, +12), varlen with empty and one-token
//! sequences, an initial state and a final-state gradient, at each specialised head dim's chunk size (32, 16, 8).
//! The launch grids are the runtime's (`gla_codegen::backward_grids`), the sequence arrays too
//! (`gla_runtime::launch::seq_arrays`), and every output and workspace starts as NaN, so an element a kernel fails to
//! write shows. What this cannot check is the GPU itself (memory model, occupancy, speed): `gpu_backward.rs`.
//!
//! Tolerances (relative RMS vs f64): f32 1e-5; bf16 and f16 5e-3 (issue 28's); the gate's gradients (logits,
//! parameters) against the size of their closed form's terms (`tests::gate_grad_errors`). Skips, saying so, where
//! the host has no C++ compiler (`$CXX` or g++), unless `GLA_REQUIRE_EMU=1`.
use gla_codegen::{
    backward_grids, generate_backward, walk_segments, BackwardArgs, BackwardForm, BackwardSpec,
    BWD_THREADS,
};
use gla_core::{DType, Dims, Gate, GateShape};
use gla_runtime::launch::seq_arrays;
use rand::rngs::SmallRng;
use rand::SeedableRng;
use tests::emu::{Elems, EmuError, Emulated};
use tests::{gate_grad_errors, rel_rms, Case};

struct Grads {
    dq: Vec<f64>,
    dk: Vec<f64>,
    dv: Vec<f64>,
    dg: Vec<f64>,
    dparams: Vec<f64>,
    dh0: Vec<f64>,
}

/// The three kernels of `spec` on the emulator, launched as `launch_backward_set` launches them.
fn emulate(
    kernels: &Emulated,
    spec: &BackwardSpec,
    gate: &dyn Gate,
    case: &Case,
    d_o: &[f32],
    dht: &[f32],
    seg_chunks: u32,
) -> Grads {
    let (d, dt) = (case.dims, case.dtype);
    let (h, dk, dv) = (d.h, d.dk, d.dv);
    let seqs = d.sequences(case.cu_seqlens.as_deref()).unwrap();
    let (mut cu, mut co, mut ci) = seq_arrays(&seqs, spec.chunk());
    let (n, chunks) = (seqs.len(), ci.len() / 2);
    let per_seq: Vec<usize> = seqs
        .iter()
        .map(|&(_, l)| l.div_ceil(spec.chunk() as usize))
        .collect();
    let (mut so, mut si) = walk_segments(&per_seq, seg_chunks);
    let segments = si.len() / 2;
    let [s0, s1, s2] = spec.segment_elems(n, segments, h, dk, dv).unwrap();
    let (mut seg_s, mut seg_ds, mut seg_g) =
        (vec![f32::NAN; s0], vec![f32::NAN; s1], vec![f32::NAN; s2]);
    let tokens = d.b * d.t;
    let mut q = Elems::of(&case.q, dt);
    let mut k = Elems::of(&case.k, dt);
    let mut v = Elems::of(&case.v, dt);
    let mut g = Elems::of(&case.logits, dt);
    let mut dov = Elems::of(d_o, dt);
    let mut params = case.params.clone();
    let mut h0 = case.initial_state.clone().expect("an initial state");
    let mut dht = dht.to_vec();
    let (mut dq, mut dkk) = (
        Elems::nan(tokens * h * dk, dt),
        Elems::nan(tokens * h * dk, dt),
    );
    let mut dvv = Elems::nan(tokens * h * dv, dt);
    let mut dg = Elems::nan(case.logits.len(), dt);
    let np = gate.params().len();
    let mut dparams = vec![0f32; h * np];
    let mut dh0 = vec![f32::NAN; n * h * dk * dv];
    let [w0, w1] = spec
        .workspace_elems(tokens, n, chunks, segments, h, dk, dv)
        .unwrap();
    let (mut states, mut dstates) = (vec![f32::NAN; w0], vec![f32::NAN; w1]);
    let fixed = gate.shape() == GateShape::Fixed;
    let p = |v: &mut Vec<f32>| {
        if v.is_empty() {
            0
        } else {
            v.as_mut_ptr() as u64
        }
    };
    let args = BackwardArgs {
        q: q.ptr(),
        k: k.ptr(),
        v: v.ptr(),
        g: if fixed { 0 } else { g.ptr() },
        params: p(&mut params),
        h0: h0.as_mut_ptr() as u64,
        d_o: dov.ptr(),
        dht: dht.as_mut_ptr() as u64,
        dq: dq.ptr(),
        dk: dkk.ptr(),
        dv: dvv.ptr(),
        dg: if fixed { 0 } else { dg.ptr() },
        dparams: p(&mut dparams),
        dh0: dh0.as_mut_ptr() as u64,
        states: states.as_mut_ptr() as u64,
        dstates: dstates.as_mut_ptr() as u64,
        cu_seqlens: cu.as_mut_ptr() as u64,
        chunk_offsets: co.as_mut_ptr() as u64,
        chunk_index: ci.as_mut_ptr() as u64,
        seg_states: p(&mut seg_s),
        seg_dstates: p(&mut seg_ds),
        seg_gamma: p(&mut seg_g),
        seg_offsets: so.as_mut_ptr() as u64,
        seg_index: si.as_mut_ptr() as u64,
        n_seqs: n as i32,
        h: h as i32,
        d_k: dk as i32,
        d_v: dv as i32,
        scale: 1.0 / (dk as f32).sqrt(),
        seg_chunks: seg_chunks as i32,
        gamma: spec
            .gamma_offset(tokens, h, dk)
            .map_or(0, |off| states.as_mut_ptr() as u64 + 4 * off as u64),
        ..BackwardArgs::default() // (no dq / dk passes: the walks compute them)
    };
    for (name, grid) in spec
        .kernels()
        .iter()
        .zip(backward_grids(spec, dk, dv, h, n, chunks, segments))
    {
        if grid.0 * grid.1 * grid.2 == 0 {
            continue;
        }
        // SAFETY: every address in `args` is a live host buffer above of the extent the runtime's launch checks
        // (`launch_backward_set`'s `need`): the same element counts, the workspaces of `workspace_elems`.
        #[allow(unsafe_code)]
        unsafe { kernels.launch(name, grid, BWD_THREADS, spec.smem_bytes(name), &args) }.unwrap();
    }
    let f = |x: &[f32]| x.iter().map(|&y| y as f64).collect::<Vec<f64>>();
    Grads {
        dq: dq.to_f64(dt),
        dk: dkk.to_f64(dt),
        dv: dvv.to_f64(dt),
        dg: if fixed { vec![] } else { dg.to_f64(dt) },
        dparams: f(&dparams),
        dh0: f(&dh0),
    }
}

fn tolerance(dtype: DType) -> f64 {
    match dtype {
        DType::F32 => 1e-5,
        _ => 5e-3,
    }
}

#[test]
fn the_backward_kernels_match_the_f64_gradients_on_the_emulator() {
    let gates = tests::builtin_and_value_gates();
    // (`GLA_TEST_GATES=a,b` / `GLA_TEST_FORMS=walks` narrow, printed.)
    let only = |var: &str, name: &str| {
        std::env::var(var).map_or(true, |l| l.split(',').any(|n| n.eq_ignore_ascii_case(name)))
    };
    for var in ["GLA_TEST_GATES", "GLA_TEST_FORMS"] {
        if let Ok(l) = std::env::var(var) {
            println!("{var}={l}: testing only these");
        }
    }
    let gates: Vec<&'static dyn Gate> = gates
        .into_iter()
        .filter(|g| only("GLA_TEST_GATES", g.name()))
        .collect();
    // (dims, cu_seqlens, logit shift, specialised head dims (d_k, d_v) → chunk 32 / 32 / 32 (16 in f32) / 8, dtypes);
    // bf16 / f16 at d ≤ 256 run the tensor-core kernels, f32 and d = 512 the f32 CUDA-core ones.
    let all = [DType::F32, DType::BF16, DType::F16];
    // (a logit shift of NaN: +30 on token 5 of every chunk of 32 and −5 elsewhere — for RWKV-6's −exp(x) one
    // near-zero forget gate a chunk among mild ones: the later tokens' decays must survive it, writer::LOG2_ALPHA_FLOOR)
    let cases: Vec<(Dims, Option<Vec<usize>>, f32, (usize, usize), &[DType])> = vec![
        (Dims::new(1, 70, 2, 16, 12), None, f32::NAN, (64, 64), &all),
        (Dims::new(2, 70, 2, 16, 12), None, 0.0, (64, 64), &all),
        (
            Dims::new(1, 75, 2, 16, 16),
            Some(vec![0, 0, 1, 41, 75]),
            -12.0,
            (128, 128),
            &all,
        ),
        (Dims::new(1, 70, 1, 100, 72), None, 12.0, (128, 128), &all),
        (Dims::new(1, 40, 1, 8, 8), None, 12.0, (256, 256), &all[..2]),
        // strong decays in f16 at d = 256 (scale 1/16): the gradients' scan keeps its decayed operand out of f16's
        // subnormals (dh0 was 0.1 off on the H100 before)
        (
            Dims::new(1, 40, 1, 8, 8),
            None,
            -12.0,
            (256, 256),
            &all[2..],
        ),
        (
            Dims::new(1, 21, 1, 8, 4),
            Some(vec![0, 13, 21]),
            0.0,
            (512, 512),
            &all[..1],
        ),
        // d_k ≠ d_v specialisations: the key walks' [64][DV] states and the value walk's [DK][64] ones apart
        (
            Dims::new(1, 45, 1, 60, 200),
            None,
            0.0,
            (64, 256),
            &all[1..2],
        ),
        (
            Dims::new(1, 45, 1, 200, 60),
            None,
            0.0,
            (256, 64),
            &all[1..2],
        ),
        // an odd d_k: the walks' element copies
        (Dims::new(1, 45, 1, 61, 24), None, 0.0, (64, 64), &all[1..2]),
    ];
    // Every case in the chunk form, and in the walk form where it has kernels — each sequence walked whole, and
    // (bf16) cut into segments of one chunk, which the segments' first pass and combine then chain.
    let jobs: Vec<_> = gates
        .iter()
        .flat_map(|&gate| {
            cases.iter().enumerate().flat_map(move |(i, c)| {
                c.4.iter().flat_map(move |&dt| {
                    [BackwardForm::Chunks, BackwardForm::Walks]
                        .into_iter()
                        .filter(move |&f| {
                            only(
                                "GLA_TEST_FORMS",
                                if f == BackwardForm::Walks {
                                    "walks"
                                } else {
                                    "chunks"
                                },
                            ) && BackwardSpec::for_problem(gate, dt, c.3 .0, c.3 .1)
                                .unwrap()
                                .with_form(f)
                                .is_ok()
                        })
                        .flat_map(move |f| {
                            let cuts: &[u32] = match (f, dt) {
                                (BackwardForm::Walks, DType::BF16) => &[0, 1],
                                _ => &[0],
                            };
                            cuts.iter().map(move |&k| (gate, i, dt, f, k))
                        })
                })
            })
        })
        .collect();
    // One library a job (nothing shared between them), run side by side.
    use rayon::prelude::*;
    let results: Vec<Result<(String, Vec<String>), String>> = jobs
        .par_iter()
        .map(|&(gate, i, dtype, form, seg_chunks)| {
            let (dims, cu, shift, (dks, dvs), _) = &cases[i];
            let spec = BackwardSpec::for_problem(gate, dtype, *dks, *dvs)
                .unwrap()
                .with_form(form)
                .unwrap();
            let source = generate_backward(&spec).unwrap();
            let kernels = match Emulated::compile(&source, spec.kernels()) {
                Ok(k) => k,
                Err(EmuError::NoCompiler(m)) if std::env::var("GLA_REQUIRE_EMU").is_err() => {
                    return Err(m)
                }
                Err(e) => panic!("{}: {e}", spec.id()),
            };
            let mut case = Case::random(gate, *dims, dtype, 4200 + i as u64, true, cu.clone());
            // (shifted, then rounded to the dtype again: the kernel and the reference read the same logits)
            let per_token = (case.logits.len() / (dims.b * dims.t)).max(1);
            let shift_at = |n: usize| {
                if !shift.is_nan() {
                    *shift
                } else {
                    tests::spike_shift((n / per_token) % dims.t)
                }
            };
            case.logits
                .iter_mut()
                .enumerate()
                .for_each(|(n, x)| *x = dtype.round(*x + shift_at(n)));
            let mut rng = SmallRng::seed_from_u64(99 + i as u64);
            let mut rn = |n: usize| tests::uniform(&mut rng, n, dtype);
            let d_o = rn(dims.b * dims.t * dims.h * dims.dv);
            let dht = rn(case.n_seqs() * dims.h * dims.dk * dims.dv);
            let want = case.reference_backward(gate, &d_o, Some(&dht));
            let got = emulate(&kernels, &spec, gate, &case, &d_o, &dht, seg_chunks);
            let mut errs = vec![
                ("dq", rel_rms(&got.dq, &want.dq)),
                ("dk", rel_rms(&got.dk, &want.dk)),
                ("dv", rel_rms(&got.dv, &want.dv)),
                (
                    "dh0",
                    rel_rms(&got.dh0, want.d_initial_state.as_ref().unwrap()),
                ),
            ];
            let (e_dl, e_dp) = gate_grad_errors(gate, &case, &want, (&got.dg, &got.dparams));
            errs.push(("dlogits", e_dl));
            errs.push(("dparams", e_dp));
            let cut = if seg_chunks > 0 {
                format!(" segments of {seg_chunks}")
            } else {
                String::new()
            };
            let line = format!(
                "{}{cut} shift {shift:+}: {}",
                spec.id(),
                tests::error_list(&errs)
            );
            let failed = errs
                .iter()
                .filter(|(_, e)| !(*e <= tolerance(dtype)))
                .map(|(what, e)| {
                    format!(
                        "{}{cut} case {i} (shift {shift}): {what} {e:.2e}",
                        spec.id()
                    )
                })
                .collect();
            Ok((line, failed))
        })
        .collect();
    let mut failures = Vec::new();
    for r in results {
        match r {
            Ok((line, failed)) => {
                println!("{line}");
                failures.extend(failed);
            }
            Err(m) => {
                println!("skipped: {m}");
                return;
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The gate's gradient over a long sequence (T = 2048, one head): d logits sum q ⊙ dq − k ⊙ dk over every later
/// token, terms that nearly cancel, so an error in dq or dk adds up along the sequence (the dq / dk passes' bf16
/// products put it 0.9–2.6e-2 off here; the walks' hi + lo products must not). Walk form, bf16, weak and stronger
/// decays, per-key and scalar gates; dq, dk and d logits against the f64 reference directly (relative RMS, 5e-3).
#[test]
fn the_walks_keep_the_gates_gradient_over_long_sequences() {
    let gate = tests::gate_named;
    let cases = [
        ("mamba2", 64usize, 0.0f32),
        ("mlstm", 64, 0.0),
        ("mamba2", 128, -4.0),
        ("gla", 64, 0.0),
    ];
    use rayon::prelude::*;
    let results: Vec<Result<String, String>> = cases
        .par_iter()
        .enumerate()
        .map(|(i, &(name, d, shift))| {
            let (g, dt) = (gate(name), DType::BF16);
            let dims = Dims::new(1, 2048, 1, d, d);
            let spec = BackwardSpec::for_problem(g, dt, d, d)
                .unwrap()
                .with_form(BackwardForm::Walks)
                .unwrap();
            let kernels =
                match Emulated::compile(&generate_backward(&spec).unwrap(), spec.kernels()) {
                    Ok(k) => k,
                    Err(EmuError::NoCompiler(m)) if std::env::var("GLA_REQUIRE_EMU").is_err() => {
                        return Err(format!("SKIP {m}"))
                    }
                    Err(e) => panic!("{}: {e}", spec.id()),
                };
            let mut case = Case::random(g, dims, dt, 4300 + i as u64, true, None);
            for x in case.logits.iter_mut() {
                *x = dt.round(*x + shift);
            }
            let mut rng = SmallRng::seed_from_u64(4400 + i as u64);
            let mut rn = |n: usize| tests::uniform(&mut rng, n, dt);
            let d_o = rn(dims.t * d);
            let dht = rn(d * d);
            let want = case.reference_backward(g, &d_o, Some(&dht));
            let got = emulate(&kernels, &spec, g, &case, &d_o, &dht, 0);
            let errs = [
                ("dq", rel_rms(&got.dq, &want.dq)),
                ("dk", rel_rms(&got.dk, &want.dk)),
                ("d logits", rel_rms(&got.dg, &want.d_logits)),
            ];
            let line = format!(
                "{} T = 2048 shift {shift:+}: {}",
                spec.id(),
                tests::error_list(&errs)
            );
            if errs.iter().all(|(_, e)| *e <= tolerance(dt)) {
                Ok(line)
            } else {
                Err(format!("{line} (tolerance {:.0e})", tolerance(dt)))
            }
        })
        .collect();
    tests::report_cases(results);
}
