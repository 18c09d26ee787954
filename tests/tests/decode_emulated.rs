//! The decode kernel's real source (`gla_codegen::generate_decode`) on the CPU emulator (`tests::emu`), stepped token
//! by token over a sequence from an initial state, against the f64 recurrence (`Case::reference`) on fresh random
//! inputs: every gate shape (the seven built-in gates and the tests' per-value gate `value_gla`) × f32 / bf16 / f16,
//! logits shifted by 0 and −12 (strong decays), head dims that are no multiple of anything (d_k 40, d_v 72). Every
//! output starts as NaN. Tolerances (relative RMS vs f64): the outputs as the forward's (f32 1e-5, bf16 / f16 3e-3:
//! their rounding to the dtype), the f32 state 1e-5 in every dtype (it is never rounded). Skips, saying so, where the
//! host has no C++ compiler, unless `GLA_REQUIRE_EMU=1`.
use gla_codegen::{
    decode_grid, decode_smem_bytes, generate_decode, DecodeArgs, DECODE_KERNEL, DECODE_THREADS,
};
use gla_core::{registered_gates, DType, Dims, Gate, GateShape};
use tests::emu::{Elems, EmuError, Emulated};
use tests::{rel_rms, tolerance, Case};

/// Token t of a `[B, T, H, w]` tensor as `[B, H, w]`.
fn token(x: &[f32], d: Dims, w: usize, t: usize) -> Vec<f32> {
    let mut out = Vec::with_capacity(d.b * d.h * w);
    for b in 0..d.b {
        let at = ((b * d.t + t) * d.h) * w;
        out.extend_from_slice(&x[at..at + d.h * w]);
    }
    out
}

/// Steps the kernel over every token of `case` (state from its initial state): (o `[B, T, H, d_v]`, final state).
fn emulate(kernels: &Emulated, gate: &dyn Gate, case: &Case) -> (Vec<f64>, Vec<f64>) {
    let (d, dt) = (case.dims, case.dtype);
    let lw = gate.shape().logits_per_token(d.dk, d.dv);
    let mut state = case.initial_state.clone().expect("an initial state");
    let mut params = case.params.clone();
    let mut o_all = vec![0f64; d.b * d.t * d.h * d.dv];
    for t in 0..d.t {
        let mut q = Elems::of(&token(&case.q, d, d.dk, t), dt);
        let mut k = Elems::of(&token(&case.k, d, d.dk, t), dt);
        let mut v = Elems::of(&token(&case.v, d, d.dv, t), dt);
        let mut g = Elems::of(&token(&case.logits, d, lw, t), dt);
        let mut o = Elems::nan(d.b * d.h * d.dv, dt);
        let args = DecodeArgs {
            q: q.ptr(),
            k: k.ptr(),
            v: v.ptr(),
            g: if lw == 0 { 0 } else { g.ptr() },
            params: if params.is_empty() {
                0
            } else {
                params.as_mut_ptr() as u64
            },
            state: state.as_mut_ptr() as u64,
            o: o.ptr(),
            n: d.b as i32,
            h: d.h as i32,
            d_k: d.dk as i32,
            d_v: d.dv as i32,
            scale: 1.0 / (d.dk as f32).sqrt(),
            pad: 0,
        };
        // SAFETY: every address in `args` is a live host buffer above of the extent the kernel derives from the
        // dims (the runtime's `Gla::decode` checks the same element counts).
        #[allow(unsafe_code)]
        unsafe {
            kernels.launch(
                DECODE_KERNEL,
                decode_grid(d.b, d.h, d.dv),
                DECODE_THREADS,
                decode_smem_bytes(d.dk),
                &args,
            )
        }
        .unwrap();
        let ot = o.to_f64(dt);
        for b in 0..d.b {
            let at = ((b * d.t + t) * d.h) * d.dv;
            o_all[at..at + d.h * d.dv].copy_from_slice(&ot[b * d.h * d.dv..(b + 1) * d.h * d.dv]);
        }
    }
    (o_all, state.iter().map(|&x| x as f64).collect())
}

#[test]
fn the_decode_kernel_steps_the_f64_recurrence_on_the_emulator() {
    let gates = tests::builtin_and_value_gates();
    let mut failures = Vec::new();
    for gate in gates {
        for dt in DType::ALL {
            let source = generate_decode(gate, dt).unwrap();
            let kernels = match Emulated::compile(&source, &[DECODE_KERNEL]) {
                Ok(k) => k,
                Err(EmuError::NoCompiler(m)) if std::env::var("GLA_REQUIRE_EMU").is_err() => {
                    println!("skipped: {m}");
                    return;
                }
                Err(e) => panic!("{} {dt}: {e}", gate.name()),
            };
            for (i, shift) in [0.0f32, -12.0].into_iter().enumerate() {
                let dims = Dims::new(3, 6, 2, 40, 72);
                let mut case = Case::random(gate, dims, dt, 900 + i as u64, true, None);
                case.logits
                    .iter_mut()
                    .for_each(|x| *x = dt.round(*x + shift));
                let (want_o, want_s) = case.reference(gate, None);
                let (got_o, got_s) = emulate(&kernels, gate, &case);
                let (eo, es) = (rel_rms(&got_o, &want_o), rel_rms(&got_s, &want_s));
                println!(
                    "{} {dt} shift {shift:+}: o {eo:.2e}, state {es:.2e}",
                    gate.name()
                );
                if !(eo <= tolerance(dt) && es <= 1e-5) {
                    failures.push(format!(
                        "{} {dt} shift {shift}: o {eo:.2e} (tolerance {:.0e}), state {es:.2e} (1e-5)",
                        gate.name(),
                        tolerance(dt)
                    ));
                }
                if gate.shape() == GateShape::Fixed {
                    break; // (a fixed gate has no logits to shift)
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Every gate × dtype's decode kernel compiles for sm_90a with NVRTC and spills nothing (without NVRTC the test
/// prints `SKIPPED`; with `GLA_REQUIRE_NVRTC=1` it fails).
#[test]
fn the_decode_kernels_compile_for_sm_90a_without_spills() {
    use gla_runtime::testing::nvrtc_or_skip;
    use gla_runtime::{nvrtc, CompileOptions};
    if !nvrtc_or_skip("the_decode_kernels_compile_for_sm_90a_without_spills") {
        return;
    }
    let _ = (&gla::gates::Gla, &tests::gates::ValueGla);
    let mut n = 0;
    for gate in registered_gates() {
        for dt in DType::ALL {
            let src = generate_decode(gate, dt).unwrap();
            let c = nvrtc::compile_with(&src, DECODE_KERNEL, &CompileOptions::default())
                .unwrap_or_else(|e| panic!("{} {dt}: {e}", gate.name()));
            let r = c.resources_of(DECODE_KERNEL).expect("a resource report");
            assert!(
                !r.spills(),
                "{} {dt}: {} B spilled",
                gate.name(),
                r.spill_stores_bytes
            );
            n += 1;
        }
    }
    println!("compiled {n} decode kernels");
}
