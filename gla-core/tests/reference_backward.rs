//! `recurrent_backward` against central finite differences of the f64 recurrence, for every input (q, k, v, key
//! gate of every kind, value gate, initial state), with a given d(final state).

mod common;

use common::*;
use gla_core::reference::{recurrent_backward, recurrent_forward, rel_rms, Grads};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// Tolerance of analytic vs finite-difference gradients, relative RMS per tensor. Central differences with step
/// 1e-5 in f64 have truncation error ~h²·|ℒ'''| ≈ 1e-10 and rounding error ~ε·|ℒ|/h ≈ 1e-10 on these O(1)
/// problems, so 1e-6 leaves a wide margin while still catching any wrong term (which is O(1) wrong).
const TOL: f64 = 1e-6;
const STEP: f64 = 1e-5;

/// ℒ = Σ dO ⊙ O + Σ dS ⊙ S_final (the loss whose gradients `recurrent_backward` returns).
fn loss(o: &Owned, d_o: &[f64], d_final: Option<&[f64]>) -> f64 {
    let f = recurrent_forward(&o.problem(), true).unwrap();
    let mut l: f64 = f.o.iter().zip(d_o).map(|(a, b)| a * b).sum();
    if let Some(df) = d_final {
        l += f
            .final_state
            .unwrap()
            .iter()
            .zip(df)
            .map(|(a, b)| a * b)
            .sum::<f64>();
    }
    l
}

/// The tensors of a problem that have gradients.
#[derive(Clone, Copy, Debug)]
enum Input {
    Q,
    K,
    V,
    KeyGate,
    ValueGate,
    InitialState,
}

fn tensor(o: &mut Owned, which: Input) -> Option<&mut Vec<f64>> {
    match which {
        Input::Q => Some(&mut o.q),
        Input::K => Some(&mut o.k),
        Input::V => Some(&mut o.v),
        Input::KeyGate => (o.kind != Kind::None).then_some(&mut o.key_gate),
        Input::ValueGate => o.value_gate.as_mut(),
        Input::InitialState => o.initial_state.as_mut(),
    }
}

fn analytic(g: &Grads, which: Input) -> Option<&Vec<f64>> {
    match which {
        Input::Q => Some(&g.dq),
        Input::K => Some(&g.dk),
        Input::V => Some(&g.dv),
        Input::KeyGate => g.d_key_gate.as_ref(),
        Input::ValueGate => g.d_value_gate.as_ref(),
        Input::InitialState => g.d_initial_state.as_ref(),
    }
}

const INPUTS: [Input; 6] = [
    Input::Q,
    Input::K,
    Input::V,
    Input::KeyGate,
    Input::ValueGate,
    Input::InitialState,
];

/// Compare every gradient of `owned` with central differences at `indices(len)` of each tensor. Returns the worst
/// relative RMS error.
fn check_grads(owned: &Owned, d_final: Option<&[f64]>, seed: u64, sample: Option<usize>) -> f64 {
    let mut rng = SmallRng::seed_from_u64(seed);
    let d_o = uniform(&mut rng, owned.q.len() / owned.dims.dk * owned.dims.dv);
    let g = recurrent_backward(&owned.problem(), &d_o, d_final).unwrap();
    // None-ness follows the inputs.
    assert_eq!(g.d_key_gate.is_some(), owned.kind != Kind::None);
    assert_eq!(g.d_value_gate.is_some(), owned.value_gate.is_some());
    assert_eq!(g.d_initial_state.is_some(), owned.initial_state.is_some());
    let mut worst: f64 = 0.0;
    for which in INPUTS {
        let mut o = owned.clone();
        let Some(n) = tensor(&mut o, which).map(|t| t.len()) else {
            continue;
        };
        let want = analytic(&g, which).unwrap_or_else(|| panic!("{which:?}: gradient missing"));
        assert_eq!(want.len(), n, "{which:?}: gradient has the wrong length");
        let idx: Vec<usize> = match sample {
            Some(m) if m < n => (0..m).map(|_| rng.random_range(0..n)).collect(),
            _ => (0..n).collect(),
        };
        let (mut got, mut exp) = (Vec::new(), Vec::new());
        for &i in &idx {
            let x = tensor(&mut o, which).unwrap()[i];
            tensor(&mut o, which).unwrap()[i] = x + STEP;
            let lp = loss(&o, &d_o, d_final);
            tensor(&mut o, which).unwrap()[i] = x - STEP;
            let lm = loss(&o, &d_o, d_final);
            tensor(&mut o, which).unwrap()[i] = x;
            got.push(want[i]);
            exp.push((lp - lm) / (2.0 * STEP));
        }
        let e = rel_rms(&got, &exp);
        assert!(
            e <= TOL,
            "{:?} {which:?}: rel RMS {e:e} > {TOL:e}\nanalytic {got:?}\nnumeric  {exp:?}",
            owned.kind
        );
        worst = worst.max(e);
    }
    worst
}

fn gate_combos() -> Vec<(Kind, bool)> {
    KINDS
        .iter()
        .flat_map(|&k| [(k, false), (k, true)])
        .collect()
}

/// Every input, every gate combination, batched and varlen (with an empty and a length-1 sequence), T ≤ 9, D ≤ 4.
#[test]
fn backward_matches_finite_differences() {
    let mut worst: f64 = 0.0;
    let mut seed = 1000;
    for (kind, vg) in gate_combos() {
        for spec in [
            Spec::new(2, 5, 2, 3, 4),
            Spec::varlen(&[3, 0, 1, 5], 1, 4, 2),
            Spec::new(1, 9, 1, 2, 3),
        ] {
            seed += 1;
            let mut spec = spec.gates(kind, vg, Regime::Moderate);
            spec.scale = (seed % 2 == 0).then_some(0.7);
            let owned = spec.build(seed);
            let d_final = uniform(&mut SmallRng::seed_from_u64(seed + 7), owned.state_len());
            worst = worst.max(check_grads(&owned, Some(&d_final), seed, None));
        }
    }
    println!("backward vs finite differences (T <= 9, D <= 4): worst rel RMS {worst:.3e}");
}

/// Without an initial state and without d(final state).
#[test]
fn backward_without_states() {
    let mut worst: f64 = 0.0;
    for (i, (kind, vg)) in gate_combos().into_iter().enumerate() {
        let mut spec = Spec::varlen(&[4, 1, 0, 6], 2, 3, 2).gates(kind, vg, Regime::Moderate);
        spec.initial_state = false;
        worst = worst.max(check_grads(
            &spec.build(2000 + i as u64),
            None,
            2000 + i as u64,
            None,
        ));
    }
    println!("backward without states: worst rel RMS {worst:.3e}");
}

/// Longer sequences (several checkpoint segments of the backward) on a random sample of coordinates of every
/// tensor. (Moderate gates only: with strong gates most gate gradients are ~e^-30, below what a finite difference
/// of an O(1) loss can resolve; the strong regime is checked against the paper's closed form below.)
#[test]
fn backward_long_sequences_sampled() {
    let mut worst: f64 = 0.0;
    for (i, (kind, vg)) in gate_combos().into_iter().enumerate() {
        let owned = Spec::varlen(&[37, 1, 0, 50], 2, 4, 3)
            .gates(kind, vg, Regime::Moderate)
            .build(3000 + i as u64);
        let d_final = uniform(&mut SmallRng::seed_from_u64(i as u64), owned.state_len());
        worst = worst.max(check_grads(
            &owned,
            Some(&d_final),
            3000 + i as u64,
            Some(24),
        ));
    }
    println!("backward, T up to 50, sampled: worst rel RMS {worst:.3e}");
}

/// Strong gates (log α ∈ [−60, 0]) on longer sequences, against the closed form of the gate gradients of §4.3 and
/// the appendix (valid without initial and final states): with b_t = Π_{m≤t} α_m and d_t = Π_{m≤t} β_m,
/// `dlog b_t = q_t ⊙ dq_t − k_t ⊙ dk_t`, `dlog α_t = Σ_{i≥t} dlog b_i`, and on the value side
/// `dlog d_t = o_t ⊙ do_t − v_t ⊙ dv_t`, `dlog β_t = Σ_{i≥t} dlog d_i` (suffix sums within each sequence).
/// Per-head gates sum the per-key form over d_k, fixed gates also over every token. The closed form is computed
/// from dq, dk, dv, o, so this also cross-checks those; f64 vs f64: 1e-10 (relative to the magnitude of the summed terms, see
/// `compare`).
#[test]
fn backward_strong_gates_match_closed_form() {
    let mut worst: f64 = 0.0;
    for (i, (kind, vg)) in gate_combos().into_iter().enumerate() {
        if kind == Kind::None && !vg {
            continue;
        }
        let lens = [70, 1, 0, 129];
        let mut spec = Spec::varlen(&lens, 2, 5, 3).gates(kind, vg, Regime::Strong);
        spec.initial_state = false;
        let owned = spec.build(4000 + i as u64);
        let p = owned.problem();
        let (h, dk, dv) = (owned.dims.h, owned.dims.dk, owned.dims.dv);
        let d_o = uniform(&mut SmallRng::seed_from_u64(i as u64), owned.v.len());
        let g = recurrent_backward(&p, &d_o, None).unwrap();
        let o = recurrent_forward(&p, false).unwrap().o;
        // Suffix sums of per-token values x(row, channel) within each sequence, per head and channel.
        let suffix = |width: usize, x: &dyn Fn(usize, usize) -> f64| -> Vec<f64> {
            let mut out = vec![0.0; owned.dims.t * h * width];
            for w in owned.cu_seqlens.as_ref().unwrap().windows(2) {
                for hh in 0..h {
                    for c in 0..width {
                        let mut acc = 0.0;
                        for row in (w[0]..w[1]).rev() {
                            acc += x(row * h + hh, c);
                            out[(row * h + hh) * width + c] = acc;
                        }
                    }
                }
            }
            out
        };
        // Error of `got` against the closed form Σ_{i≥t} (a_i − b_i) (reduced to the gate's shape), relative to
        // the magnitude of the summed terms Σ_{i≥t} |a_i| + |b_i|: under strong decay the closed form sums O(1)
        // terms of both signs to values ~e^-30 (every entry when both gates are strong, or for a fixed gate), so a
        // plain relative error would only measure the cancellation inside the closed form itself.
        let compare = |got: &[f64],
                       width: usize,
                       a: &dyn Fn(usize) -> f64,
                       b: &dyn Fn(usize) -> f64,
                       reduce: &dyn Fn(Vec<f64>) -> Vec<f64>|
         -> f64 {
            let want = reduce(suffix(width, &|rh, c| {
                a(rh * width + c) - b(rh * width + c)
            }));
            let magnitude = reduce(suffix(width, &|rh, c| {
                a(rh * width + c).abs() + b(rh * width + c).abs()
            }));
            let num: f64 = got.iter().zip(&want).map(|(x, y)| (x - y) * (x - y)).sum();
            let den: f64 = magnitude.iter().map(|x| x * x).sum();
            (num / den).sqrt()
        };
        if kind != Kind::None {
            let reduce = |pk: Vec<f64>| -> Vec<f64> {
                match kind {
                    Kind::PerKey => pk,
                    Kind::PerHead => pk.chunks(dk).map(|r| r.iter().sum()).collect(),
                    Kind::Fixed => (0..h)
                        .map(|hh| pk.chunks(dk).skip(hh).step_by(h).flatten().sum())
                        .collect(),
                    Kind::None => unreachable!(),
                }
            };
            let e = compare(
                g.d_key_gate.as_ref().unwrap(),
                dk,
                &|j| owned.q[j] * g.dq[j],
                &|j| owned.k[j] * g.dk[j],
                &reduce,
            );
            assert!(e <= 1e-10, "{kind:?} vg={vg}: d key gate error {e:e}");
            worst = worst.max(e);
        }
        if vg {
            let e = compare(
                g.d_value_gate.as_ref().unwrap(),
                dv,
                &|j| o[j] * d_o[j],
                &|j| owned.v[j] * g.dv[j],
                &|x| x,
            );
            assert!(e <= 1e-10, "{kind:?} vg={vg}: d value gate error {e:e}");
            worst = worst.max(e);
        }
    }
    println!("backward, strong gates vs closed form: worst error {worst:.3e}");
}
