//! The CPU reference, forward: the f32 chunkwise form against the f64 recurrence (every chunk configuration, gate
//! kind and regime), an independent check of the recurrence itself, the detection of broken decompositions, edge
//! cases, property tests and a timing sanity check.

#![allow(clippy::neg_cmp_op_on_partial_ord)] // `!(e <= tol)` on purpose: NaN must fail.

mod common;

use common::*;
use gla_core::reference::{
    chunkwise_forward, chunkwise_forward_with_fault, recurrent_forward, rel_rms, ChunkConfig,
    ExpStats, Fault, Forward, KeyGate, Problem,
};
use gla_core::Dims;
use std::time::Instant;

/// Tolerance of the f32 chunkwise form against the f64 recurrence: relative RMS over the whole output and over
/// the whole final state, by gate regime.
///
/// * Long memory (log α ∈ [−1e-6, 0]): plain f32 rounding (ε ≈ 6e-8) accumulated over sums of ≤ 1000 tokens and
///   ≤ 100 channels: a few 1e-7 measured.
/// * Strong decay (log α ∈ [−60, 0]): inherent to the kernels' decomposition. The in-chunk Γ reaches −60·C
///   (−7680 at C = 128), where one f32 ulp is ~5e-4, so `exp(Γ_i − Γ_j)` of nearby rows carries a relative error
///   up to ~2e-4. Weighted by how much those terms contribute it is ~1e-5 on average, and more on small tensors
///   (a final state, a short sequence) where a single term dominates. The same decomposition evaluated in f64
///   matches the recurrence to 2e-14 (checked while writing this test), so this is rounding, not a wrong term; any
///   wrong term shows up as ≥ 1e-2.
fn tol(regime: Regime) -> f64 {
    match regime {
        Regime::LongMemory => 3e-6,
        Regime::Strong | Regime::Moderate | Regime::Mild | Regime::Spike => 5e-5,
    }
}

/// The acceptance predicate every chunkwise result must pass against the f64 recurrence: finite, every `exp`
/// argument ≤ 0, and the error of the output and of the final state ≤ `tol`, measured as relative RMS error
/// ([`rel_rms`]) — or, with `magnitude`, as `rms(got − want) / rms(magnitude)` where `magnitude` is the recurrence
/// on `|q|, |k|, |v|, |S_0|` (the sum of the absolute values of every term; used on tiny tensors, where a sum that
/// cancels to nearly 0 would make the plain relative error meaningless). Returns the worst error.
fn accept(
    got: &(Forward, ExpStats),
    want: &Forward,
    tol: f64,
    magnitude: Option<&Forward>,
) -> Result<f64, String> {
    let (fwd, stats) = got;
    let err = |g: &[f64], w: &[f64], m: Option<&[f64]>| match m {
        None => rel_rms(g, w),
        Some(m) => {
            let num: f64 = g.iter().zip(w).map(|(a, b)| (a - b) * (a - b)).sum();
            let den: f64 = m.iter().map(|x| x * x).sum();
            if num == 0.0 {
                0.0
            } else {
                (num / den).sqrt()
            }
        }
    };
    let mut problems = Vec::new();
    if !all_finite(&fwd.o) {
        problems.push("non-finite output".to_string());
    }
    if !(stats.max_arg <= 0.0) {
        problems.push(format!(
            "exp of a positive argument: max_arg = {:e} over {} exps",
            stats.max_arg, stats.count
        ));
    }
    let e_o = err(&fwd.o, &want.o, magnitude.map(|m| &m.o[..]));
    let e_s = match (&fwd.final_state, &want.final_state) {
        (Some(g), Some(w)) => {
            if !all_finite(g) {
                problems.push("non-finite final state".to_string());
            }
            err(
                g,
                w,
                magnitude.map(|m| m.final_state.as_deref().unwrap_or(&[])),
            )
        }
        (None, None) => 0.0,
        _ => {
            problems.push("final state present in one result only".to_string());
            f64::INFINITY
        }
    };
    if !(e_o <= tol) {
        problems.push(format!("output error {e_o:e} > {tol:e}"));
    }
    if !(e_s <= tol) {
        problems.push(format!("final-state error {e_s:e} > {tol:e}"));
    }
    if problems.is_empty() {
        Ok(e_o.max(e_s))
    } else {
        Err(problems.join("; "))
    }
}

/// Worst errors seen by a sweep (per regime), and its failures.
#[derive(Default)]
struct Sweep {
    cases: usize,
    /// `(regime, worst rel RMS, case)`.
    worst: Vec<(Regime, f64, String)>,
    failures: Vec<String>,
}

impl Sweep {
    /// Run every `(C, c)` in `pairs` with materialize on and off on `owned` (gates of `regime`), against the
    /// recurrence.
    fn run(&mut self, label: &str, owned: &Owned, regime: Regime, pairs: &[(usize, usize)]) {
        let p = owned.problem();
        let want = recurrent_forward(&p, true).expect("valid problem");
        assert!(
            all_finite(&want.o) && all_finite(want.final_state.as_ref().unwrap()),
            "{label}: recurrence not finite"
        );
        for &(chunk, sub_chunk) in pairs {
            let mut results = Vec::new();
            // Alg. 1 right, Alg. 1 left, and the right form split into 3 segments (the kernels' two-level scan).
            for (materialize, segments) in [(false, 1), (true, 1), (false, 3)] {
                let cfg = ChunkConfig {
                    chunk,
                    sub_chunk,
                    materialize,
                    factorise_span: None,
                    segments,
                };
                let case = format!("{label} {cfg:?}");
                let got = chunkwise_forward(&p, cfg, true).expect("valid problem");
                self.cases += 1;
                match accept(&got, &want, tol(regime), None) {
                    Ok(e) => match self.worst.iter_mut().find(|w| w.0 == regime) {
                        Some(w) if e > w.1 => *w = (regime, e, case),
                        Some(_) => {}
                        None => self.worst.push((regime, e, case)),
                    },
                    Err(msg) => self.failures.push(format!("{case}: {msg}")),
                }
                assert!(
                    got.1.count > 0 || want.o.is_empty(),
                    "{label}: no exp recorded"
                );
                results.push(got.0);
            }
            // The two schedules of Alg. 1 perform the same f32 operations per chunk: bitwise equal.
            assert_eq!(
                results[0], results[1],
                "{label} C={chunk} c={sub_chunk}: materialize on/off differ"
            );
        }
    }

    fn finish(self, name: &str) {
        println!("{name}: {} cases", self.cases);
        for (regime, e, case) in &self.worst {
            println!(
                "  {regime:?}: worst rel RMS {e:.3e} (tolerance {:.0e}) at {case}",
                tol(*regime)
            );
        }
        assert!(
            self.failures.is_empty(),
            "{name}: {} failures:\n{}",
            self.failures.len(),
            self.failures.join("\n")
        );
    }
}

/// The gate combinations of the sweeps: every key-gate kind without and with the value gate (`None` + value gate
/// = the value gate alone).
fn gate_combos() -> Vec<(Kind, bool)> {
    KINDS
        .iter()
        .flat_map(|&k| [(k, false), (k, true)])
        .collect()
}

const REGIMES: [Regime; 2] = [Regime::Strong, Regime::LongMemory];

/// Varlen batch with an empty and length-1 sequences, lengths around the chunk sizes; every (C, c), both
/// schedules, every gate combination, both regimes; initial + final state.
#[test]
fn chunkwise_matches_recurrent_varlen_every_config() {
    let lens = [63, 0, 1, 65, 64, 130, 1];
    let mut sweep = Sweep::default();
    let mut seed = 100;
    for (kind, vg) in gate_combos() {
        for regime in REGIMES {
            seed += 1;
            let owned = Spec::varlen(&lens, 2, 16, 24)
                .gates(kind, vg, regime)
                .build(seed);
            sweep.run(
                &format!("varlen {kind:?} vg={vg} {regime:?}"),
                &owned,
                regime,
                &chunk_pairs(),
            );
        }
    }
    sweep.finish("varlen, every config");
}

/// Near-zero forget gates (log α = −1e13, one element in 32) among mild ones: the chunkwise form floors log α
/// (`gla_core::LOG2_ALPHA_FLOOR`) so the later tokens' Γ differences keep their precision; every config and gate.
#[test]
fn chunkwise_matches_recurrent_near_zero_forget_gates() {
    let mut sweep = Sweep::default();
    let mut seed = 150;
    for (kind, vg) in gate_combos() {
        seed += 1;
        let owned = Spec::new(2, 130, 2, 16, 24)
            .gates(kind, vg, Regime::Spike)
            .build(seed);
        sweep.run(
            &format!("spikes {kind:?} vg={vg}"),
            &owned,
            Regime::Spike,
            &chunk_pairs(),
        );
    }
    sweep.finish("near-zero forget gates, every config");
}

/// Fixed-length batches, T ∈ {1, 63, 64, 65}, B = 2, H = 3, d_k ≠ d_v, explicit scale on some.
#[test]
fn chunkwise_matches_recurrent_batched_every_config() {
    let mut sweep = Sweep::default();
    let mut seed = 200;
    for t in [1, 63, 64, 65] {
        for (kind, vg) in gate_combos() {
            for regime in REGIMES {
                seed += 1;
                let mut spec = Spec::new(2, t, 3, 20, 12).gates(kind, vg, regime);
                if seed % 2 == 0 {
                    spec.scale = Some(0.37);
                }
                sweep.run(
                    &format!("B=2 T={t} {kind:?} vg={vg} {regime:?}"),
                    &spec.build(seed),
                    regime,
                    &chunk_pairs(),
                );
            }
        }
    }
    sweep.finish("batched T in {1,63,64,65}, every config");
}

/// T = 1000 with D = 100 on the key or on the value side, H = 1, a subset of configurations.
#[test]
fn chunkwise_matches_recurrent_long_d100() {
    let pairs = [(16, 8), (64, 16), (128, 32), (128, 8)];
    let mut sweep = Sweep::default();
    let mut seed = 300;
    for (dk, dv) in [(100, 48), (48, 100)] {
        for (kind, vg) in gate_combos() {
            for regime in REGIMES {
                seed += 1;
                let owned = Spec::new(1, 1000, 1, dk, dv)
                    .gates(kind, vg, regime)
                    .build(seed);
                sweep.run(
                    &format!("T=1000 dk={dk} dv={dv} {kind:?} vg={vg} {regime:?}"),
                    &owned,
                    regime,
                    &pairs,
                );
            }
        }
    }
    sweep.finish("T=1000, D=100");
}

/// Without an initial state and without asking for the final state.
#[test]
fn chunkwise_matches_recurrent_without_states() {
    let mut spec = Spec::varlen(&[5, 70, 0, 33], 2, 8, 8).gates(Kind::PerKey, true, Regime::Strong);
    spec.initial_state = false;
    let owned = spec.build(7);
    let p = owned.problem();
    let want = recurrent_forward(&p, false).unwrap();
    assert!(want.final_state.is_none());
    let got = chunkwise_forward(
        &p,
        ChunkConfig {
            chunk: 32,
            sub_chunk: 8,
            materialize: true,
            factorise_span: None,
            segments: 1,
        },
        false,
    )
    .unwrap();
    assert!(got.0.final_state.is_none());
    let e = accept(&got, &want, tol(Regime::Strong), None).unwrap();
    println!("no states: rel RMS {e:.3e}");
}

// ---------------------------------------------------------------------------------------------------------------
// The tests catch a broken decomposition.
// ---------------------------------------------------------------------------------------------------------------

/// Reference point of the off-diagonal sub-chunk blocks at the *last* row of the query sub-chunk: algebraically
/// still exact, but `exp` gets positive arguments. On strong gates they overflow (inf·0 = NaN or huge errors); on
/// long-memory gates the values stay accurate, and only the `max_arg ≤ 0` check catches it. Both are rejected by
/// the same acceptance predicate the sweeps use.
#[test]
fn wrong_reference_point_is_detected() {
    let cfg = ChunkConfig {
        chunk: 64,
        sub_chunk: 16,
        materialize: false,
        factorise_span: None,
        segments: 1,
    };
    for (kind, vg) in [
        (Kind::PerKey, false),
        (Kind::None, true),
        (Kind::PerKey, true),
    ] {
        for regime in REGIMES {
            let owned = Spec::varlen(&[100, 1, 64], 2, 16, 12)
                .gates(kind, vg, regime)
                .build(11);
            let p = owned.problem();
            let want = recurrent_forward(&p, true).unwrap();
            let good = chunkwise_forward_with_fault(&p, cfg, true, Fault::None).unwrap();
            assert_eq!(good, chunkwise_forward(&p, cfg, true).unwrap());
            let e = accept(&good, &want, tol(regime), None)
                .unwrap_or_else(|m| panic!("correct form rejected: {m}"));
            let bad =
                chunkwise_forward_with_fault(&p, cfg, true, Fault::WrongReferencePoint).unwrap();
            let verdict = accept(&bad, &want, tol(regime), None);
            let err = rel_rms(&bad.0.o, &want.o);
            println!(
                "wrong reference point, {kind:?} vg={vg} {regime:?}: correct {e:.2e}; faulty max_arg {:.3e}, \
                 rel RMS {err:.3e}, finite {} -> {verdict:?}",
                bad.1.max_arg,
                all_finite(&bad.0.o)
            );
            assert!(verdict.is_err(), "fault not detected");
            assert!(
                bad.1.max_arg > 0.0,
                "a wrong reference point must show positive exp arguments"
            );
            if regime == Regime::Strong {
                // Overflow: non-finite outputs or errors far above the tolerance.
                assert!(
                    !all_finite(&bad.0.o) || !(err <= 1e-2),
                    "strong gates: expected a visibly wrong output"
                );
            }
        }
    }
}

/// An off-by-one in the decay (exclusive in-chunk cumulative sums) keeps every exponent ≤ 0 but is caught by the
/// error check, for every gate kind.
#[test]
fn exclusive_cumsum_is_detected() {
    let cfg = ChunkConfig {
        chunk: 32,
        sub_chunk: 8,
        materialize: true,
        factorise_span: None,
        segments: 1,
    };
    for (kind, vg) in [
        (Kind::PerKey, false),
        (Kind::PerHead, false),
        (Kind::Fixed, false),
        (Kind::None, true),
    ] {
        let mut spec = Spec::varlen(&[50, 1, 40], 1, 8, 8).gates(kind, vg, Regime::Moderate);
        spec.initial_state = true;
        let owned = spec.build(12);
        let p = owned.problem();
        let want = recurrent_forward(&p, true).unwrap();
        let bad = chunkwise_forward_with_fault(&p, cfg, true, Fault::ExclusiveCumsum).unwrap();
        let err = rel_rms(&bad.0.o, &want.o);
        println!(
            "exclusive cumsum, {kind:?} vg={vg}: max_arg {:.3e}, rel RMS {err:.3e}",
            bad.1.max_arg
        );
        assert!(
            accept(&bad, &want, tol(Regime::Moderate), None).is_err(),
            "fault not detected"
        );
        assert!(err > 1e-2);
    }
}

/// The factorised form the kernels take on mild per-key chunks, A = (Q ⊙ e^Γ)(K ⊙ e^−Γ)ᵀ: with the span check it
/// matches the recurrence, its positive `exp` arguments stay within the bound and every other argument ≤ 0; chunks
/// over the bound take the exact sub-chunk form. Without the check (fault), strong gates overflow.
#[test]
fn factorised_mild_chunks_match_and_the_span_check_is_needed() {
    // The kernels' SPAN_MAX (bf16/f32: 64 in log2 units since issue 26; it was 32) in nat units; both are checked.
    let cases = [
        (Regime::Mild, true),
        (Regime::LongMemory, true),
        (Regime::Moderate, false),
        (Regime::Strong, false),
    ];
    for bound in [64.0 * std::f32::consts::LN_2, 32.0 * std::f32::consts::LN_2] {
        for (regime, mostly_factorised) in cases {
            let mut spec =
                Spec::varlen(&[100, 1, 64, 150], 2, 16, 12).gates(Kind::PerKey, false, regime);
            spec.initial_state = true;
            let owned = spec.build(21);
            let p = owned.problem();
            let want = recurrent_forward(&p, true).unwrap();
            for (chunk, sub_chunk, materialize) in
                [(64, 16, false), (32, 8, true), (128, 32, false)]
            {
                let cfg = ChunkConfig {
                    chunk,
                    sub_chunk,
                    materialize,
                    factorise_span: Some(bound),
                    segments: 1,
                };
                let got = chunkwise_forward(&p, cfg, true).unwrap();
                let e = accept(&got, &want, tol(regime), None).unwrap_or_else(|m| {
                    panic!("{regime:?} C={chunk}: factorised form rejected: {m}")
                });
                let fa = got.1.max_factor_arg;
                println!("factorised (bound {bound:.1}) {regime:?} C={chunk} c={sub_chunk} mat={materialize}: rel RMS {e:.2e}, max factor arg {fa:.3}");
                assert!(
                    fa <= f64::from(bound) || fa == f64::NEG_INFINITY,
                    "factor argument {fa} beyond the span bound"
                );
                if mostly_factorised {
                    assert!(
                        fa > 0.0 || regime == Regime::LongMemory && fa >= 0.0,
                        "{regime:?}: the factorised form was not taken"
                    );
                }
            }
        }
    }
    let bound = 64.0 * std::f32::consts::LN_2;
    let owned = Spec::varlen(&[100, 64], 2, 16, 12)
        .gates(Kind::PerKey, false, Regime::Strong)
        .build(22);
    let p = owned.problem();
    let want = recurrent_forward(&p, true).unwrap();
    let cfg = ChunkConfig {
        chunk: 64,
        sub_chunk: 16,
        materialize: false,
        factorise_span: Some(bound),
        segments: 1,
    };
    let bad = chunkwise_forward_with_fault(&p, cfg, true, Fault::UncheckedFactorisation).unwrap();
    let err = rel_rms(&bad.0.o, &want.o);
    println!(
        "unchecked factorisation, strong gates: max factor arg {:.1}, rel RMS {err:.2e}, finite {}",
        bad.1.max_factor_arg,
        all_finite(&bad.0.o)
    );
    assert!(bad.1.max_factor_arg > f64::from(bound));
    assert!(
        !all_finite(&bad.0.o) || !(err <= 1e-2),
        "strong gates without the span check: expected a visibly wrong output"
    );
}

// ---------------------------------------------------------------------------------------------------------------
// The ground truth itself.
// ---------------------------------------------------------------------------------------------------------------

/// log α of (row, head, key channel) and log β of (row, head, value channel), for the naive form.
fn log_alpha(o: &Owned, row: usize, h: usize, d: usize) -> f64 {
    let Dims { h: nh, dk, .. } = o.dims;
    match o.kind {
        Kind::None => 0.0,
        Kind::PerKey => o.key_gate[(row * nh + h) * dk + d],
        Kind::PerHead => o.key_gate[row * nh + h],
        Kind::Fixed => o.key_gate[h],
    }
}

fn log_beta(o: &Owned, row: usize, h: usize, e: usize) -> f64 {
    let Dims { h: nh, dv, .. } = o.dims;
    o.value_gate
        .as_ref()
        .map_or(0.0, |g| g[(row * nh + h) * dv + e])
}

/// The unrolled (parallel) form, O(T²), f64, written independently of the library:
/// `o_t = scale Σ_d q_td [Σ_{s≤t} k_sd v_se Π_{s<m≤t} α_md β_me + h0_de Π_{m≤t} α_md β_me]`.
fn naive(o: &Owned) -> (Vec<f64>, Vec<f64>) {
    let Dims {
        b,
        t,
        h: nh,
        dk,
        dv,
    } = o.dims;
    let seqs: Vec<(usize, usize)> = match &o.cu_seqlens {
        Some(cu) => cu.windows(2).map(|w| (w[0], w[1] - w[0])).collect(),
        None => (0..b).map(|i| (i * t, t)).collect(),
    };
    let scale = o.scale.unwrap_or(1.0 / (dk as f64).sqrt());
    let mut out = vec![0.0; b * t * nh * dv];
    let mut fin = vec![0.0; seqs.len() * nh * dk * dv];
    // Σ of log decays of rows (s, t] of the sequence starting at `start`, channel (d, e).
    let decay =
        |start: usize, s_excl: Option<usize>, t_incl: usize, h: usize, d: usize, e: usize| -> f64 {
            let from = s_excl.map_or(0, |s| s + 1);
            (from..=t_incl)
                .map(|m| log_alpha(o, start + m, h, d) + log_beta(o, start + m, h, e))
                .sum::<f64>()
                .exp()
        };
    for (n, &(start, len)) in seqs.iter().enumerate() {
        for h in 0..nh {
            let h0 = |d: usize, e: usize| {
                o.initial_state
                    .as_ref()
                    .map_or(0.0, |s| s[((n * nh + h) * dk + d) * dv + e])
            };
            let state_at = |tt: usize, d: usize, e: usize| -> f64 {
                let mut acc = h0(d, e) * decay(start, None, tt, h, d, e);
                for s in 0..=tt {
                    let (rs, k, v) = (start + s, &o.k, &o.v);
                    acc += k[(rs * nh + h) * dk + d]
                        * v[(rs * nh + h) * dv + e]
                        * decay(start, Some(s), tt, h, d, e);
                }
                acc
            };
            for tt in 0..len {
                let row = start + tt;
                for e in 0..dv {
                    let mut acc = 0.0;
                    for d in 0..dk {
                        acc += o.q[(row * nh + h) * dk + d] * state_at(tt, d, e);
                    }
                    out[(row * nh + h) * dv + e] = scale * acc;
                }
            }
            for d in 0..dk {
                for e in 0..dv {
                    fin[((n * nh + h) * dk + d) * dv + e] = if len == 0 {
                        h0(d, e)
                    } else {
                        state_at(len - 1, d, e)
                    };
                }
            }
        }
    }
    (out, fin)
}

/// The recurrence agrees with the independently written unrolled form (f64 vs f64: 1e-12).
#[test]
fn recurrent_matches_naive_parallel_form() {
    let mut worst: f64 = 0.0;
    for (i, (kind, vg)) in gate_combos().into_iter().enumerate() {
        for (j, spec) in [
            Spec::varlen(&[7, 0, 1, 12], 2, 3, 4),
            Spec::new(2, 9, 1, 4, 3),
        ]
        .into_iter()
        .enumerate()
        {
            let mut spec = spec.gates(kind, vg, Regime::Moderate);
            spec.scale = (j == 1).then_some(0.8);
            let owned = spec.build(400 + i as u64);
            let got = recurrent_forward(&owned.problem(), true).unwrap();
            let (o, fin) = naive(&owned);
            let (e_o, e_s) = (
                rel_rms(&got.o, &o),
                rel_rms(got.final_state.as_ref().unwrap(), &fin),
            );
            assert!(
                e_o <= 1e-12 && e_s <= 1e-12,
                "{kind:?} vg={vg}: {e_o:e} {e_s:e}"
            );
            worst = worst.max(e_o).max(e_s);
        }
    }
    println!("recurrence vs unrolled form: worst rel RMS {worst:.3e}");
}

/// A hand-computed case: d_k = d_v = 1, per-head gate, two tokens.
#[test]
fn recurrent_hand_computed() {
    let (q, k, v) = ([2.0, -1.0], [0.5, 3.0], [4.0, 1.5]);
    let la = [-0.5f64, -1.0];
    let h0 = [0.25];
    let p = Problem {
        dims: Dims::new(1, 2, 1, 1, 1),
        q: &q,
        k: &k,
        v: &v,
        key_gate: KeyGate::PerHead(&la),
        value_gate: None,
        scale: Some(1.0),
        initial_state: Some(&h0),
        cu_seqlens: None,
    };
    let s1 = la[0].exp() * 0.25 + 0.5 * 4.0;
    let s2 = la[1].exp() * s1 + 3.0 * 1.5;
    let f = recurrent_forward(&p, true).unwrap();
    assert_eq!(f.o, vec![2.0 * s1, -s2]);
    assert_eq!(f.final_state, Some(vec![s2]));
}

// ---------------------------------------------------------------------------------------------------------------
// Edge cases.
// ---------------------------------------------------------------------------------------------------------------

/// T = 0 (every sequence empty) and B = 0: empty outputs, final state = initial state.
#[test]
fn empty_problems() {
    for (b, t, cu) in [
        (2usize, 0usize, None),
        (1, 0, Some(vec![0usize, 0, 0])),
        (0, 5, None),
    ] {
        let nseq = cu.as_ref().map_or(b, |c: &Vec<usize>| c.len() - 1);
        let (h, dk, dv) = (2, 3, 4);
        let h0: Vec<f64> = (0..nseq * h * dk * dv).map(|i| i as f64 + 0.5).collect();
        let p = Problem {
            dims: Dims::new(b, t, h, dk, dv),
            q: &[],
            k: &[],
            v: &[],
            key_gate: KeyGate::Fixed(&[-0.1, -0.2]),
            value_gate: Some(&[]),
            scale: None,
            initial_state: Some(&h0),
            cu_seqlens: cu.as_deref(),
        };
        let r = recurrent_forward(&p, true).unwrap();
        assert!(r.o.is_empty());
        assert_eq!(r.final_state.as_deref(), Some(&h0[..]));
        let (c, st) = chunkwise_forward(&p, ChunkConfig::default(), true).unwrap();
        assert_eq!(c, r);
        assert_eq!(st.count, 0);
        let g = gla_core::reference::recurrent_backward(&p, &[], Some(&h0)).unwrap();
        assert_eq!(g.d_initial_state.as_deref(), Some(&h0[..]));
        assert_eq!(g.d_key_gate, Some(vec![0.0; h]));
    }
}

/// Degenerate chunkings: C = c = 1 (every token its own chunk) and C much larger than T.
#[test]
fn degenerate_chunkings() {
    let owned = Spec::varlen(&[9, 1, 0, 4], 1, 3, 5)
        .gates(Kind::PerKey, true, Regime::Strong)
        .build(13);
    let p = owned.problem();
    let want = recurrent_forward(&p, true).unwrap();
    for (chunk, sub_chunk) in [(1, 1), (2, 1), (3, 3), (6, 2), (512, 64)] {
        for materialize in [false, true] {
            let got = chunkwise_forward(
                &p,
                ChunkConfig {
                    chunk,
                    sub_chunk,
                    materialize,
                    factorise_span: None,
                    segments: 1,
                },
                true,
            )
            .unwrap();
            accept(&got, &want, tol(Regime::Strong), None)
                .unwrap_or_else(|m| panic!("C={chunk} c={sub_chunk}: {m}"));
        }
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Property tests (small case counts).
// ---------------------------------------------------------------------------------------------------------------

mod props {
    use super::*;
    use proptest::prelude::*;

    /// The same problem on |q|, |k|, |v|, |S_0|: every term of the recurrence becomes non-negative.
    fn magnitude_problem(o: &Owned) -> Owned {
        let abs = |x: &Vec<f64>| x.iter().map(|v| v.abs()).collect::<Vec<f64>>();
        Owned {
            q: abs(&o.q),
            k: abs(&o.k),
            v: abs(&o.v),
            initial_state: o.initial_state.as_ref().map(abs),
            ..o.clone()
        }
    }

    fn kind_of(i: usize) -> Kind {
        KINDS[i % 4]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 48, failure_persistence: None, ..ProptestConfig::default() })]

        /// Random small shapes and power-of-two chunkings: chunkwise ≈ recurrent, exp arguments ≤ 0.
        #[test]
        fn chunkwise_matches_recurrent(
            lens in proptest::collection::vec(0usize..40, 1..4),
            h in 1usize..3, dk in 1usize..9, dv in 1usize..9,
            clog in 0u32..6, csub in 0u32..6, materialize: bool,
            kind in 0usize..4, vg: bool, strong: bool, seed: u64,
        ) {
            let regime = if strong { Regime::Strong } else { Regime::LongMemory };
            let owned = Spec::varlen(&lens, h, dk, dv).gates(kind_of(kind), vg, regime).build(seed);
            let p = owned.problem();
            let cfg = ChunkConfig { chunk: 1 << clog, sub_chunk: 1 << csub.min(clog), materialize, factorise_span: None, segments: 1 };
            let want = recurrent_forward(&p, true).unwrap();
            let got = chunkwise_forward(&p, cfg, true).unwrap();
            // Tensors here can have a single element: measure the error against the magnitude of the terms.
            let mag = recurrent_forward(&magnitude_problem(&owned).problem(), true).unwrap();
            if let Err(m) = accept(&got, &want, tol(regime), Some(&mag)) {
                prop_assert!(false, "{:?}: {}", cfg, m);
            }
        }

        /// Packing sequences with cu_seqlens computes exactly what running each one alone computes (both forms).
        #[test]
        fn varlen_equals_separate_sequences(
            lens in proptest::collection::vec(0usize..30, 1..4), kind in 0usize..4, vg: bool, seed: u64,
        ) {
            let (h, dk, dv) = (2, 3, 5);
            let packed = Spec::varlen(&lens, h, dk, dv).gates(kind_of(kind), vg, Regime::Strong).build(seed);
            let cfg = ChunkConfig { chunk: 16, sub_chunk: 4, materialize: false, factorise_span: None, segments: 1 };
            let want_r = recurrent_forward(&packed.problem(), true).unwrap();
            let want_c = chunkwise_forward(&packed.problem(), cfg, true).unwrap().0;
            let cu = packed.cu_seqlens.clone().unwrap();
            let state = dk * dv * h;
            for (n, w) in cu.windows(2).enumerate() {
                let (a, b) = (w[0], w[1]);
                let rows = |x: &[f64], width: usize| x[a * h * width..b * h * width].to_vec();
                let single = Owned {
                    dims: Dims::new(1, b - a, h, dk, dv),
                    q: rows(&packed.q, dk),
                    k: rows(&packed.k, dk),
                    v: rows(&packed.v, dv),
                    kind: packed.kind,
                    key_gate: match packed.kind {
                        Kind::None | Kind::Fixed => packed.key_gate.clone(),
                        Kind::PerKey => rows(&packed.key_gate, dk),
                        Kind::PerHead => rows(&packed.key_gate, 1),
                    },
                    value_gate: packed.value_gate.as_ref().map(|g| rows(g, dv)),
                    scale: None,
                    initial_state: packed.initial_state.as_ref().map(|s| s[n * state..(n + 1) * state].to_vec()),
                    cu_seqlens: None,
                };
                let r = recurrent_forward(&single.problem(), true).unwrap();
                let c = chunkwise_forward(&single.problem(), cfg, true).unwrap().0;
                prop_assert_eq!(&r.o[..], &want_r.o[a * h * dv..b * h * dv]);
                prop_assert_eq!(&c.o[..], &want_c.o[a * h * dv..b * h * dv]);
                let fs = |f: &Forward| f.final_state.as_ref().unwrap()[n * state..(n + 1) * state].to_vec();
                prop_assert_eq!(r.final_state.unwrap(), fs(&want_r));
                prop_assert_eq!(c.final_state.unwrap(), fs(&want_c));
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Timing sanity (release).
// ---------------------------------------------------------------------------------------------------------------

/// `recurrent_forward` at [B=2, T=4096, H=4, D=128] runs; the time is printed, not asserted.
#[test]
fn timing_recurrent_forward_b2_t4096_h4_d128() {
    let owned = Spec::new(2, 4096, 4, 128, 128)
        .gates(Kind::PerKey, false, Regime::LongMemory)
        .build(9);
    let p = owned.problem();
    let t0 = Instant::now();
    let f = recurrent_forward(&p, true).unwrap();
    let dt = t0.elapsed();
    assert!(all_finite(&f.o));
    println!(
        "recurrent_forward [2,4096,4,128] per-key gate: {:.3} s",
        dt.as_secs_f64()
    );
}
