//! `Gla::decode` on the GPU: a prompt's chunkwise forward (from an initial state, keeping its final state), then
//! decode steps token by token from that state, against the f64 recurrence over the whole sequence — the outputs of
//! the decoded tokens and the final state — for every gate shape (the seven built-in gates and the tests' per-value
//! gate) × f32 / bf16 / f16 at d_k 64, d_v 96 and d = 128, logits shifted by 0 and −12. Tolerances (relative RMS vs
//! f64): the outputs f32 1e-5, bf16 / f16 3e-3; the f32 state 1e-5 in f32 and 3e-3 otherwise (the prompt's forward
//! reads rounded inputs through the dtype's kernels). Without a GPU the tests print `SKIPPED` (with
//! `GLA_REQUIRE_GPU=1` they fail); `decode_emulated.rs` runs the kernel's source on the CPU.
use gla_core::{DType, Dims, Gate, GateShape};
use gla_runtime::testing::gpu_or_skip;
use gla_runtime::{DecodeOptions, DeviceTensor, ForwardOptions};
use rayon::prelude::*;
use tests::{rel_rms, tolerance, Case};

/// Token rows [t0, t1) of a `[B, T, H, w]` tensor as `[B, t1 − t0, H, w]`.
fn tokens(x: &[f32], d: Dims, w: usize, t0: usize, t1: usize) -> Vec<f32> {
    let mut out = Vec::with_capacity(d.b * (t1 - t0) * d.h * w);
    for b in 0..d.b {
        out.extend_from_slice(&x[((b * d.t + t0) * d.h) * w..((b * d.t + t1) * d.h) * w]);
    }
    out
}

#[test]
fn decode_continues_the_forward_and_matches_the_f64_recurrence() {
    let Some(gla) = gpu_or_skip("decode_continues_the_forward_and_matches_the_f64_recurrence")
    else {
        return;
    };
    let gates = tests::builtin_and_value_gates();
    let (prompt, steps) = (70usize, 4usize);
    // The prompts' forward variants, compiled on all cores first (the loop's forward calls then find them
    // loaded): one NVRTC compile after another would take minutes.
    let mut specs: Vec<gla_codegen::KernelSpec> = Vec::new();
    for &gate in &gates {
        for dt in DType::ALL {
            for (dk, dv) in [(64usize, 96usize), (128, 128)] {
                let s = gla
                    .variant_for(gate, dt, &[2, prompt, 3, dk], dv, None)
                    .unwrap();
                if !specs
                    .iter()
                    .any(|x| x.id() == s.id() && x.gate.name() == s.gate.name())
                {
                    specs.push(s);
                }
            }
        }
    }
    specs.par_iter().for_each(|s| {
        gla.compile_spec(s)
            .unwrap_or_else(|e| panic!("{}: {e}", s.id()));
    });
    let mut failures = Vec::new();
    println!("| gate | dtype | d_k × d_v | shift | o (decoded tokens) | final state |");
    println!("|---|---|---|---|---|---|");
    for gate in gates {
        for dt in DType::ALL {
            for (dk, dv) in [(64usize, 96usize), (128, 128)] {
                for shift in [0.0f32, -12.0] {
                    if gate.shape() == GateShape::Fixed && shift != 0.0 {
                        continue;
                    }
                    let d = Dims::new(2, prompt + steps, 3, dk, dv);
                    let mut case = Case::random(gate, d, dt, 31 + dk as u64, true, None);
                    case.logits
                        .iter_mut()
                        .for_each(|x| *x = dt.round(*x + shift));
                    let (want_o, want_s) = case.reference(gate, None);
                    let lw = gate.shape().logits_per_token(dk, dv);
                    let p = Dims::new(2, prompt, 3, dk, dv);
                    let up =
                        |x: &[f32], shape: &[usize]| gla.upload(&case.host(x, shape, dt)).unwrap();
                    let lshape = |t: usize| {
                        gla_runtime::forward::logits_shape(
                            gate.shape(),
                            &Dims::new(2, t, 3, dk, dv),
                        )
                    };
                    let params = (!case.params.is_empty()).then(|| {
                        DeviceTensor::from_f32(gla.gpu(), &[3, gate.params().len()], &case.params)
                            .unwrap()
                    });
                    let h0 = DeviceTensor::from_f32(
                        gla.gpu(),
                        &[2, 3, dk, dv],
                        case.initial_state.as_ref().unwrap(),
                    )
                    .unwrap();
                    // The prompt: the chunkwise forward, keeping its final state.
                    let out = gla
                        .forward(
                            gate,
                            &up(&tokens(&case.q, d, dk, 0, prompt), &p.q_shape()),
                            &up(&tokens(&case.k, d, dk, 0, prompt), &p.q_shape()),
                            &up(&tokens(&case.v, d, dv, 0, prompt), &p.v_shape()),
                            (lw > 0)
                                .then(|| {
                                    up(&tokens(&case.logits, d, lw, 0, prompt), &lshape(prompt))
                                })
                                .as_ref(),
                            params.as_ref(),
                            &ForwardOptions {
                                initial_state: Some(&h0),
                                output_final_state: true,
                                ..Default::default()
                            },
                        )
                        .unwrap();
                    let mut state = out.final_state.unwrap();
                    // The decoded tokens, one step each.
                    let mut got_o = Vec::new();
                    for t in prompt..prompt + steps {
                        let one = |x: &[f32], w: usize| up(&tokens(x, d, w, t, t + 1), &[2, 3, w]);
                        let logits = match gate.shape() {
                            GateShape::Fixed => None,
                            GateShape::PerHead => {
                                Some(up(&tokens(&case.logits, d, 1, t, t + 1), &[2, 3]))
                            }
                            _ => Some(one(&case.logits, lw)),
                        };
                        let o = gla
                            .decode(
                                gate,
                                &one(&case.q, dk),
                                &one(&case.k, dk),
                                &one(&case.v, dv),
                                logits.as_ref(),
                                params.as_ref(),
                                &mut state,
                                &DecodeOptions::default(),
                            )
                            .unwrap();
                        got_o.push(o.to_f32().unwrap());
                    }
                    // o of the decoded tokens, [B, steps, H, d_v] in the reference's order.
                    let want: Vec<f64> = (0..2)
                        .flat_map(|b| {
                            let at = ((b * d.t + prompt) * 3) * dv;
                            want_o[at..at + steps * 3 * dv].to_vec()
                        })
                        .collect();
                    let got: Vec<f64> = (0..2)
                        .flat_map(|b| {
                            got_o.iter().flat_map(move |o| {
                                o[b * 3 * dv..(b + 1) * 3 * dv].iter().map(|&x| x as f64)
                            })
                        })
                        .collect();
                    let eo = rel_rms(&got, &want);
                    let got_s: Vec<f64> =
                        state.to_f32().unwrap().into_iter().map(f64::from).collect();
                    let es = rel_rms(&got_s, &want_s);
                    println!(
                        "| {} | {dt} | {dk} × {dv} | {shift:+} | {eo:.2e} | {es:.2e} |",
                        gate.name()
                    );
                    if !(eo <= tolerance(dt) && es <= tolerance(dt)) {
                        failures.push(format!(
                            "{} {dt} {dk}×{dv} shift {shift}: o {eo:.2e}, state {es:.2e} (tolerance {:.0e})",
                            gate.name(),
                            tolerance(dt)
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

/// Bad input to the decode step is a typed error before any launch.
#[test]
fn decode_bad_input_is_a_typed_error() {
    let Some(gla) = gpu_or_skip("decode_bad_input_is_a_typed_error") else {
        return;
    };
    let gate: &'static dyn Gate = &gla::gates::Gla;
    let t = |shape: &[usize], dt: DType| DeviceTensor::zeros(gla.gpu(), dt, shape).unwrap();
    let (q, v, lg) = (
        t(&[2, 3, 64], DType::BF16),
        t(&[2, 3, 64], DType::BF16),
        t(&[2, 3, 64], DType::BF16),
    );
    let opts = DecodeOptions::default();
    let mut state = t(&[2, 3, 64, 64], DType::F32);
    let e = gla
        .decode(gate, &q, &q, &v, None, None, &mut state, &opts)
        .unwrap_err();
    assert!(e.to_string().contains("logits"), "{e}");
    let mut bad_state = t(&[2, 3, 64, 64], DType::BF16);
    let e = gla
        .decode(gate, &q, &q, &v, Some(&lg), None, &mut bad_state, &opts)
        .unwrap_err();
    assert!(e.to_string().contains("state"), "{e}");
    let q4 = t(&[2, 1, 3, 64], DType::BF16);
    let e = gla
        .decode(gate, &q4, &q, &v, Some(&lg), None, &mut state, &opts)
        .unwrap_err();
    assert!(e.to_string().contains("[N, H, d_k]"), "{e}");
}
