//! A CPU model of the backward kernels (`gla-codegen/src/cuda/bwd.cuh`), loop for loop: the same chunk size, the
//! same state slots (`chunk_offsets[n] + n + c`), the same per-chunk formulas, the scalar gates' Γ broadcast and
//! column sums, the fixed gate's token sum, in f32 — checked against the f64 reference gradients
//! (`gate_ref::gate_backward`) for every gate shape the kernels serve, at weak and strong decays, with varlen,
//! initial state and final-state gradient. What it cannot check is CUDA itself (barriers, launch geometry): that is
//! the GPU test `gpu_backward.rs`. Tolerance: relative RMS 1e-4 (f32 arithmetic over ≤ 75 tokens); the gate's
//! gradients (logits, parameters) against the size of their closed form's terms (`tests::gate_grad_errors`).
#![allow(clippy::needless_range_loop)] // (loop for loop as the CUDA, whose indices these are)
use gla_codegen::BackwardSpec;
use gla_core::{registered_gates, DType, Dims, Gate, GateShape};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tests::{gate_grad_errors, rel_rms, Case};

struct Grads {
    dq: Vec<f32>,
    dk: Vec<f32>,
    dv: Vec<f32>,
    dg: Vec<f32>,
    dparams: Vec<f32>,
    dh0: Vec<f32>,
}

/// The three kernels of bwd.cuh on the CPU.
#[allow(clippy::too_many_arguments)]
fn model(gate: &dyn Gate, case: &Case, d_o: &[f32], dht: Option<&[f32]>, c: usize) -> Grads {
    let d = case.dims;
    let (h, dk, dv) = (d.h, d.dk, d.dv);
    let seqs = d.sequences(case.cu_seqlens.as_deref()).unwrap();
    let n_seqs = seqs.len();
    let scale = 1.0 / (dk as f32).sqrt();
    let np = gate.params().len();
    let shape = gate.shape();
    let mut chunk_offsets = vec![0usize];
    for &(_, len) in &seqs {
        chunk_offsets.push(chunk_offsets.last().unwrap() + len.div_ceil(c));
    }
    let slots = chunk_offsets[n_seqs] + n_seqs;
    let sz = dk * dv;
    let mut states = vec![f32::NAN; slots * h * sz];
    let mut dstates = vec![f32::NAN; slots * h * sz];
    let q = |t: usize, hh: usize, x: usize| case.q[(t * h + hh) * dk + x];
    let k = |t: usize, hh: usize, x: usize| case.k[(t * h + hh) * dk + x];
    let v = |t: usize, hh: usize, e: usize| case.v[(t * h + hh) * dv + e];
    let dov = |t: usize, hh: usize, e: usize| scale * d_o[(t * h + hh) * dv + e];
    let params = |hh: usize| -> Vec<f64> {
        case.params[hh * np..(hh + 1) * np]
            .iter()
            .map(|&x| x as f64)
            .collect()
    };
    // chunk_gamma: G[i][x] (f32, natural log), X[i][x] the raw logit.
    let gamma = |bos: usize, hh: usize, i0: usize, l: usize| -> (Vec<f32>, Vec<f32>) {
        let p = params(hh);
        let mut g = vec![0f32; c * dk];
        let mut xs = vec![0f32; c * dk];
        match shape {
            GateShape::PerKey => {
                for x in 0..dk {
                    let mut acc = 0f32;
                    for i in 0..c {
                        if i < l {
                            let xv = case.logits[((bos + i0 + i) * h + hh) * dk + x];
                            xs[i * dk + x] = xv;
                            acc += gate.log_alpha(xv as f64, &p) as f32;
                        }
                        g[i * dk + x] = acc;
                    }
                }
            }
            _ => {
                let mut acc = 0f32;
                for i in 0..c {
                    if i < l {
                        let xv = if shape == GateShape::PerHead {
                            case.logits[(bos + i0 + i) * h + hh]
                        } else {
                            hh as f32
                        };
                        xs[i * dk] = xv;
                        acc += gate.log_alpha(xv as f64, &p) as f32;
                    }
                    for x in 0..dk {
                        g[i * dk + x] = acc;
                    }
                }
            }
        }
        (g, xs)
    };
    let mut dh0 = vec![0f32; n_seqs * h * sz];
    // gla_bwd_states and gla_bwd_dstates (whole value width at once: the value tiles are independent columns).
    for (n, &(bos, len)) in seqs.iter().enumerate() {
        let nc = len.div_ceil(c);
        let slot0 = chunk_offsets[n] + n;
        for hh in 0..h {
            let base = (n * h + hh) * sz;
            let mut s: Vec<f32> = case
                .initial_state
                .as_ref()
                .map_or(vec![0.0; sz], |s0| s0[base..base + sz].to_vec());
            for ch in 0..=nc {
                let at = ((slot0 + ch) * h + hh) * sz;
                states[at..at + sz].copy_from_slice(&s);
                if ch == nc {
                    break;
                }
                let (i0, l) = (ch * c, c.min(len - ch * c));
                let (g, _) = gamma(bos, hh, i0, l);
                for x in 0..dk {
                    let gl = g[(l - 1) * dk + x];
                    for e in 0..dv {
                        let mut acc = s[x * dv + e] * gl.exp();
                        for j in 0..l {
                            acc += k(bos + i0 + j, hh, x)
                                * (gl - g[j * dk + x]).exp()
                                * v(bos + i0 + j, hh, e);
                        }
                        s[x * dv + e] = acc;
                    }
                }
            }
            let mut ds: Vec<f32> = dht.map_or(vec![0.0; sz], |t| t[base..base + sz].to_vec());
            for ch in (0..=nc).rev() {
                let at = ((slot0 + ch) * h + hh) * sz;
                dstates[at..at + sz].copy_from_slice(&ds);
                if ch == 0 {
                    dh0[base..base + sz].copy_from_slice(&ds);
                    break;
                }
                let (i0, l) = ((ch - 1) * c, c.min(len - (ch - 1) * c));
                let (g, _) = gamma(bos, hh, i0, l);
                for x in 0..dk {
                    let gl = g[(l - 1) * dk + x];
                    for e in 0..dv {
                        let mut acc = ds[x * dv + e] * gl.exp();
                        for i in 0..l {
                            acc += q(bos + i0 + i, hh, x)
                                * g[i * dk + x].exp()
                                * dov(bos + i0 + i, hh, e);
                        }
                        ds[x * dv + e] = acc;
                    }
                }
            }
        }
    }
    // gla_bwd_chunk.
    let tokens = d.b * d.t;
    let mut out = Grads {
        dq: vec![f32::NAN; tokens * h * dk],
        dk: vec![f32::NAN; tokens * h * dk],
        dv: vec![f32::NAN; tokens * h * dv],
        dg: vec![f32::NAN; case.logits.len()],
        dparams: vec![0.0; h * np],
        dh0,
    };
    for (n, &(bos, len)) in seqs.iter().enumerate() {
        for ch in 0..len.div_ceil(c) {
            let slot = chunk_offsets[n] + n + ch;
            let (i0, l) = (ch * c, c.min(len - ch * c));
            for hh in 0..h {
                let s0 = &states[(slot * h + hh) * sz..][..sz];
                let s1 = &states[((slot + 1) * h + hh) * sz..][..sz];
                let ds1 = &dstates[((slot + 1) * h + hh) * sz..][..sz];
                let (g, xs) = gamma(bos, hh, i0, l);
                let t = |i: usize| bos + i0 + i;
                let gl = |x: usize| g[(l - 1) * dk + x];
                let mut a = vec![0f32; c * c];
                let mut da = vec![0f32; c * c];
                for i in 0..l {
                    for j in 0..=i {
                        a[i * c + j] = (0..dk)
                            .map(|x| {
                                q(t(i), hh, x)
                                    * k(t(j), hh, x)
                                    * (g[i * dk + x] - g[j * dk + x]).exp()
                            })
                            .sum();
                        da[i * c + j] = (0..dv).map(|e| dov(t(i), hh, e) * v(t(j), hh, e)).sum();
                    }
                }
                let mut dq = vec![0f32; c * dk];
                let mut dkk = vec![0f32; c * dk];
                for i in 0..l {
                    for x in 0..dk {
                        let inter: f32 = (0..dv).map(|e| dov(t(i), hh, e) * s0[x * dv + e]).sum();
                        let mut r = inter * g[i * dk + x].exp();
                        for j in 0..=i {
                            r += da[i * c + j]
                                * k(t(j), hh, x)
                                * (g[i * dk + x] - g[j * dk + x]).exp();
                        }
                        dq[i * dk + x] = r;
                        let st: f32 = (0..dv).map(|e| v(t(i), hh, e) * ds1[x * dv + e]).sum();
                        let mut r = st * (gl(x) - g[i * dk + x]).exp();
                        for m in i..l {
                            r += da[m * c + i]
                                * q(t(m), hh, x)
                                * (g[m * dk + x] - g[i * dk + x]).exp();
                        }
                        dkk[i * dk + x] = r;
                        out.dq[(t(i) * h + hh) * dk + x] = dq[i * dk + x];
                        out.dk[(t(i) * h + hh) * dk + x] = dkk[i * dk + x];
                    }
                    for e in 0..dv {
                        let mut r: f32 = (0..dk)
                            .map(|x| {
                                k(t(i), hh, x) * (gl(x) - g[i * dk + x]).exp() * ds1[x * dv + e]
                            })
                            .sum();
                        for m in i..l {
                            r += a[m * c + i] * dov(t(m), hh, e);
                        }
                        out.dv[(t(i) * h + hh) * dv + e] = r;
                    }
                }
                let p = params(hh);
                let mut tmp = vec![0f64; np];
                let rowsum =
                    |x: usize| -> f32 { (0..dv).map(|e| ds1[x * dv + e] * s1[x * dv + e]).sum() };
                let contrib = |i: usize, x: usize| {
                    q(t(i), hh, x) * dq[i * dk + x] - k(t(i), hh, x) * dkk[i * dk + x]
                };
                match shape {
                    GateShape::PerKey => {
                        for x in 0..dk {
                            let mut r = rowsum(x);
                            for i in (0..l).rev() {
                                r += contrib(i, x);
                                let xv = xs[i * dk + x] as f64;
                                out.dg[(t(i) * h + hh) * dk + x] =
                                    r * gate.dlog_alpha_dx(xv, &p) as f32;
                                gate.dlog_alpha_dparams(xv, &p, &mut tmp);
                                for u in 0..np {
                                    out.dparams[hh * np + u] += r * tmp[u] as f32;
                                }
                            }
                        }
                    }
                    _ => {
                        let mut r: f32 = (0..dk).map(rowsum).sum();
                        let mut total = 0f32;
                        for i in (0..l).rev() {
                            r += (0..dk).map(|x| contrib(i, x)).sum::<f32>();
                            if shape == GateShape::PerHead {
                                let xv = xs[i * dk] as f64;
                                out.dg[t(i) * h + hh] = r * gate.dlog_alpha_dx(xv, &p) as f32;
                                gate.dlog_alpha_dparams(xv, &p, &mut tmp);
                                for u in 0..np {
                                    out.dparams[hh * np + u] += r * tmp[u] as f32;
                                }
                            } else {
                                total += r;
                            }
                        }
                        if shape == GateShape::Fixed {
                            gate.dlog_alpha_dparams(hh as f64, &p, &mut tmp);
                            for u in 0..np {
                                out.dparams[hh * np + u] += total * tmp[u] as f32;
                            }
                        }
                    }
                }
            }
        }
    }
    out
}

#[test]
fn the_backward_kernels_model_matches_the_f64_gradients() {
    let _ = (&gla::gates::Gla, &tests::gates::ValueGla);
    let gates: Vec<&'static dyn Gate> = registered_gates()
        .into_iter()
        .filter(|g| g.shape() != GateShape::PerValue && gla::gates::BUILT_IN.contains(&g.name()))
        .collect();
    assert!(gates.len() >= 7, "the built-in gates");
    let f = |x: &[f32]| x.iter().map(|&y| y as f64).collect::<Vec<f64>>();
    let mut failures = Vec::new();
    for gate in gates {
        for (i, (dims, cu, shift, dkv)) in [
            (Dims::new(2, 70, 2, 16, 12), None, 0.0f32, 64usize),
            (
                Dims::new(1, 75, 2, 16, 16),
                Some(vec![0, 0, 1, 41, 75]),
                -12.0,
                128,
            ),
            (Dims::new(1, 50, 1, 8, 8), None, 12.0, 256),
        ]
        .into_iter()
        .enumerate()
        {
            // The chunk size of the kernels at a specialised head dim `dkv` (8, 16 or 32 rows), on small dims.
            let c = BackwardSpec::for_problem(gate, DType::F32, dkv, dkv)
                .unwrap()
                .chunk() as usize;
            let mut case = Case::random(gate, dims, DType::F32, 4200 + i as u64, true, cu);
            case.logits.iter_mut().for_each(|x| *x += shift);
            let mut rng = SmallRng::seed_from_u64(99 + i as u64);
            let mut rn = |n: usize| {
                (0..n)
                    .map(|_| rng.random_range(-1.0f32..1.0))
                    .collect::<Vec<f32>>()
            };
            let d_o = rn(dims.b * dims.t * dims.h * dims.dv);
            let dht = rn(case.n_seqs() * dims.h * dims.dk * dims.dv);
            let want = case.reference_backward(gate, &d_o, Some(&dht));
            let got = model(gate, &case, &d_o, Some(&dht), c);
            let mut errs = vec![
                ("dq", rel_rms(&f(&got.dq), &want.dq)),
                ("dk", rel_rms(&f(&got.dk), &want.dk)),
                ("dv", rel_rms(&f(&got.dv), &want.dv)),
                (
                    "dh0",
                    rel_rms(&f(&got.dh0), want.d_initial_state.as_ref().unwrap()),
                ),
            ];
            let (e_dl, e_dp) = gate_grad_errors(
                gate,
                &case,
                &want.dq,
                (&want.d_logits, &want.d_params),
                (&f(&got.dg), &f(&got.dparams)),
            );
            errs.push(("dlogits", e_dl));
            errs.push(("dparams", e_dp));
            println!(
                "{} C={c} shift {shift:+}: {}",
                gate.name(),
                errs.iter()
                    .map(|(w, e)| format!("{w} {e:.2e}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            for (what, e) in errs {
                if !(e <= 1e-4) {
                    failures.push(format!(
                        "{} case {i} (C = {c}, shift {shift}): {what} {e:.2e}",
                        gate.name()
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
