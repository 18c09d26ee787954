//! The tuner's decisions as plain functions (no GPU, no I/O): which variants are candidates, which problems are
//! timed, when a candidate passes the reference check, which candidates are dropped early, and which one wins.

use crate::args::Buckets;
use gla_codegen::{all_variants, BackwardForm, BackwardSpec, KernelSpec};
use gla_core::{DType, Gate, GateShape};
use gla_runtime::cache::Bucket;

/// Warm-up calls before a candidate's first timed run (its first launch also loads the module), unless that first
/// launch takes [`LONG_RUN_MS`] or more: then it is the probe itself (`search::screen_then_time`).
pub const WARMUPS: usize = 1;
/// The screening: every candidate gets runs worth about this much GPU time at each strength (its first run says how
/// long one takes), at least [`SCREEN_RUNS`]`.0` and at most `.1` of them.
pub const SCREEN_BUDGET_MS: f64 = 8.0;
pub const SCREEN_RUNS: (usize, usize) = (2, 5);
/// The final timing: the candidates that survive the screening get runs worth about this much GPU time on top, at
/// least [`FINAL_RUNS`]`.0` and at most `.1`. (A 0.05 ms kernel gets 5 + 20 runs: run-to-run spread of a large problem
/// is ≤ 0.3 % on the H200, and half the default grid's timing went to its largest bucket and f32.)
pub const FINAL_BUDGET_MS: f64 = 30.0;
pub const FINAL_RUNS: (usize, usize) = (3, 20);
/// A candidate whose first run takes at least this long is timed with fewer runs: its first run alone screens it
/// ([`SCREEN_RUNS_LONG`]; the 1.3× drop is far over such a run's spread) and 2 final runs follow ([`FINAL_RUNS_LONG`]),
/// and that first run is its first launch (no warm-up): 3 launches instead of 7. By the H100 run of the default grid
/// (each finalist's time kept in the cache), 4 launches made it 105 → 71 s of its kernels' GPU time; measured on an
/// H100 with 4, the whole grid took 142.5 s wall (130.5 s of timing).
pub const LONG_RUN_MS: f64 = 5.0;
pub const SCREEN_RUNS_LONG: (usize, usize) = (1, 5);
pub const FINAL_RUNS_LONG: (usize, usize) = (2, 20);

/// Screening runs (the first included) for a candidate whose first run took `probe_ms`.
pub fn screen_runs(probe_ms: f64) -> usize {
    sized(probe_ms, SCREEN_BUDGET_MS, SCREEN_RUNS, SCREEN_RUNS_LONG)
}

/// Final runs for a surviving candidate whose first run took `probe_ms`.
pub fn final_runs(probe_ms: f64) -> usize {
    sized(probe_ms, FINAL_BUDGET_MS, FINAL_RUNS, FINAL_RUNS_LONG)
}

fn sized(probe_ms: f64, budget_ms: f64, short: (usize, usize), long: (usize, usize)) -> usize {
    runs_for(
        probe_ms,
        budget_ms,
        if probe_ms >= LONG_RUN_MS { long } else { short },
    )
}

/// How many runs of a kernel that takes `t_ms` fit `budget_ms`, within `(min, max)`; `max` where `t_ms` is not a
/// positive time.
pub fn runs_for(t_ms: f64, budget_ms: f64, (min, max): (usize, usize)) -> usize {
    if !t_ms.is_finite() || t_ms <= 0.0 {
        return max;
    }
    ((budget_ms / t_ms).ceil() as usize).clamp(min, max)
}
/// A candidate whose screening time is over this multiple of the best screening time is dropped.
pub const DROP_RATIO: f64 = 1.3;

/// The small problem (B, T, H) every candidate must get right before it may be timed.
pub const CHECK_PROBLEM: (usize, usize, usize) = (1, 256, 2);

/// Relative RMS error vs the f64 reference a candidate may have (issue 4's tolerances).
pub fn tolerance(dtype: DType) -> f64 {
    match dtype {
        DType::F32 => 1e-5,
        DType::BF16 | DType::F16 => 3e-3,
    }
}

/// Relative RMS error vs the f64 reference gradients a backward kernel set may have (issue 28's tolerances).
pub fn backward_tolerance(dtype: DType) -> f64 {
    match dtype {
        DType::F32 => 1e-5,
        DType::BF16 | DType::F16 => 5e-3,
    }
}

/// One backward candidate: a kernel set, the walk form's chunks a segment (`Some(0)`: whole sequences; `None` for
/// the chunk form) and whether dq and dk run as passes of the forward kernel (`Some(true)`), from the walks
/// (`Some(false)`) or as the runtime decides (`None`).
#[derive(Clone, Copy, Debug)]
pub struct BwdCandidate {
    pub spec: BackwardSpec,
    pub cut: Option<u32>,
    pub passes: Option<bool>,
}

/// Whether the tuner chooses a key's dq / dk between passes and walks: a per-key gate whose passes have kernels at
/// (dtype, d) (bf16 / f16, d = 64 or 128: `gla_codegen::per_key_pass_tiles`) — not where there are none, nor a scalar
/// gate's, which the runtime always takes (Mamba-2 on an H100: 2.63 → 1.33 ms).
pub fn dq_dk_passes_choice(gate: &'static dyn Gate, dtype: DType, d: usize) -> bool {
    gate.shape() == GateShape::PerKey
        && KernelSpec::pass_default(gate, dtype, d, d, gla_codegen::Pass::Dq).is_ok()
}

/// The backward's candidates for a key whose kernel sets are `sets` (the default first) at a problem of
/// `rows` = sequences × heads and sequences of `chunks` chunks, d_k `dk`, on `sms` multiprocessors, every choice
/// explicit: each chunk-form set as it is; each walk-form set first as the runtime runs it with no choice made (its
/// heuristic's k chunks a segment, [`BackwardSpec::walk_segment_chunks`], 0 = whole, and, where the key has a dq /
/// dk choice ([`dq_dk_passes_choice`]), `passes` = `Some(the runtime's default here)` —
/// `gla_codegen::per_key_passes_default_at`), then the other dq / dk choice (passes on whole sequences: they never
/// cut one; or the walks cut as the default), then, where the heuristic cuts (k > 0), the walks on whole sequences
/// and cut at 2k (where 2k still cuts). The key's first set's first candidate is the runtime's default. Empty where
/// there is nothing to choose.
pub fn backward_candidates(
    sets: &[BackwardSpec],
    rows: usize,
    chunks: usize,
    dk: usize,
    sms: u32,
    passes: Option<bool>,
) -> Vec<BwdCandidate> {
    let mut out = Vec::new();
    let c = |spec, cut, passes| BwdCandidate { spec, cut, passes };
    for &s in sets {
        if s.form == BackwardForm::Chunks {
            out.push(c(s, None, None));
            continue;
        }
        // (the heuristic's rows: one head a sequence here; its CTAs count key tiles × rows)
        let k = s.walk_segment_chunks(chunks, rows, 1, dk, sms);
        out.push(c(s, Some(k), passes));
        if let Some(d) = passes {
            out.push(if d {
                c(s, Some(k), Some(false))
            } else {
                c(s, Some(0), Some(true))
            });
        }
        let walks = passes.map(|_| false);
        if k > 0 {
            out.push(c(s, Some(0), walks));
            if (2 * k as usize) < chunks {
                out.push(c(s, Some(2 * k), walks));
            }
        }
    }
    if out.len() < 2 {
        out.clear();
    }
    out
}

/// Whether errors (relative RMS of o and of the final state) pass; NaN and ∞ fail.
pub fn check_passes(err_o: f64, err_state: f64, dtype: DType) -> bool {
    let tol = tolerance(dtype);
    err_o <= tol && err_state <= tol
}

/// An input distribution of the gate logits the candidates are timed at.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Strength {
    /// Recorded in `Timing::strengths`.
    pub name: &'static str,
    /// Added to logits drawn from N(0, 1).
    pub shift: f32,
}

/// Logits ~ N(0, 1) as drawn.
pub const AS_DRAWN: Strength = Strength {
    name: "logits~N(0,1)",
    shift: 0.0,
};
/// Logits ~ N(0, 1) − 12: strong decays (per-key kernels take the exact sub-chunk path on most chunks).
pub const STRONG: Strength = Strength {
    name: "logits~N(0,1)-12",
    shift: -12.0,
};

/// The strengths a gate is timed at: per-key gates' speed depends on the decays' span per chunk (factorised vs exact
/// scores), so they are timed at both [`AS_DRAWN`] and [`STRONG`] and judged by the worse; other gates at
/// [`AS_DRAWN`] only.
pub fn strengths(shape: GateShape) -> Vec<Strength> {
    match shape {
        GateShape::PerKey => vec![AS_DRAWN, STRONG],
        _ => vec![AS_DRAWN],
    }
}

/// The candidates of (gate, dtype, d): `all_variants(gate)` of that dtype with d_k = d_v = d (a key-split variant
/// serves d_k = key_split · its slice), narrowed by `only` (`--only`), in `all_variants`' order.
pub fn candidates(
    gate: &'static dyn Gate,
    dtype: DType,
    d: usize,
    only: Option<&str>,
) -> Vec<KernelSpec> {
    all_variants(gate)
        .into_iter()
        .filter(|s| s.dtype == dtype && s.key_dim() as usize == d && s.dv as usize == d)
        .filter(|s| only.is_none_or(|o| s.id().contains(o)))
        .collect()
}

/// One timed problem: the bucket its result is cached under and the (B, T, H) it is timed at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Target {
    pub bucket: Bucket,
    pub problem: (usize, usize, usize),
}

/// The problems a GPU run times: the grid's buckets at their `Bucket::problem()`, or the given problems, each under
/// `Bucket::of(B·H, T)`. A bucket given twice is timed once (the first problem that names it).
pub fn targets(buckets: &Buckets) -> Vec<Target> {
    let mut out: Vec<Target> = match buckets {
        Buckets::Default => Bucket::grid()
            .into_iter()
            .map(|bucket| Target {
                bucket,
                problem: bucket.problem(),
            })
            .collect(),
        Buckets::Problems(p) => p
            .iter()
            .map(|&(b, t, h)| Target {
                bucket: Bucket::of(b * h, t),
                problem: (b, t, h),
            })
            .collect(),
    };
    let mut seen = Vec::new();
    out.retain(|t| {
        let new = !seen.contains(&t.bucket);
        seen.push(t.bucket);
        new
    });
    out
}

/// Median of `xs` (mean of the two middle values for an even count); NaN for none.
pub fn median(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        return f64::NAN;
    }
    let mut s = xs.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        0.5 * (s[n / 2 - 1] + s[n / 2])
    }
}

/// A candidate's score: its worst time over the strengths it was timed at. A missing or failed measurement (NaN,
/// ∞, or no strengths at all) scores +∞, so it can never win.
pub fn worst_case(times_ms: &[f64]) -> f64 {
    if times_ms.is_empty() || times_ms.iter().any(|t| !t.is_finite()) {
        return f64::INFINITY;
    }
    times_ms.iter().copied().fold(f64::NEG_INFINITY, f64::max)
}

/// A candidate's score from its runs at each strength (`samples[strength]`): the worst of their medians; +∞ for a
/// failed candidate or a strength without runs ([`worst_case`]). The forward's and the backward's searches alike.
pub fn score(samples: &[Vec<f64>], failed: bool) -> f64 {
    if failed {
        return f64::INFINITY;
    }
    worst_case(&samples.iter().map(|s| median(s)).collect::<Vec<_>>())
}

/// The early elimination rule: which candidates keep being timed after the screening runs. A candidate survives
/// iff its (worst-case) screening time is finite and at most `ratio` × the best one. `keep` (the default variant,
/// whose time is reported as the baseline) is timed fully whatever its screening time, as long as it is finite.
pub fn survivors(scores: &[f64], ratio: f64, keep: Option<usize>) -> Vec<bool> {
    let best = scores
        .iter()
        .copied()
        .filter(|s| s.is_finite())
        .fold(f64::INFINITY, f64::min);
    scores
        .iter()
        .enumerate()
        .map(|(i, &s)| s.is_finite() && (s <= ratio * best || keep == Some(i)))
        .collect()
}

/// The winner: the lowest finite score; ties go to the earlier candidate. `None` when no score is finite.
pub fn winner(scores: &[f64]) -> Option<usize> {
    scores
        .iter()
        .enumerate()
        .filter(|(_, s)| s.is_finite())
        .min_by(|a, b| a.1.total_cmp(b.1))
        .map(|(i, _)| i)
}

/// Speed-up of the winner over the default: `default_ms / ms` (1 when the default won).
pub fn gain(ms: f64, default_ms: Option<f64>) -> Option<f64> {
    default_ms
        .filter(|d| d.is_finite() && ms > 0.0)
        .map(|d| d / ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_fit_the_budget() {
        assert_eq!(runs_for(0.05, SCREEN_BUDGET_MS, SCREEN_RUNS), 5);
        assert_eq!(runs_for(0.05, FINAL_BUDGET_MS, FINAL_RUNS), 20);
        assert_eq!(runs_for(2.0, FINAL_BUDGET_MS, FINAL_RUNS), 15);
        assert_eq!(runs_for(10.0, SCREEN_BUDGET_MS, SCREEN_RUNS), 2);
        assert_eq!(runs_for(10.0, FINAL_BUDGET_MS, FINAL_RUNS), 3);
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert_eq!(runs_for(bad, FINAL_BUDGET_MS, FINAL_RUNS), 20, "{bad}");
        }
        // Long runs: the first run screens alone, two final runs follow; short ones keep their minimums.
        assert_eq!((screen_runs(10.0), final_runs(10.0)), (1, 3));
        assert_eq!((screen_runs(150.0), final_runs(150.0)), (1, 2));
        assert_eq!((screen_runs(4.9), final_runs(4.9)), (2, 7));
        assert_eq!((screen_runs(0.05), final_runs(0.05)), (5, 20));
    }

    #[test]
    fn tolerances_and_checks() {
        assert_eq!(tolerance(DType::F32), 1e-5);
        assert_eq!(tolerance(DType::BF16), 3e-3);
        assert_eq!(tolerance(DType::F16), 3e-3);
        assert!(check_passes(2.9e-3, 1e-3, DType::BF16));
        assert!(!check_passes(3.1e-3, 1e-3, DType::BF16));
        assert!(!check_passes(1e-6, 2e-5, DType::F32));
        assert!(!check_passes(f64::NAN, 0.0, DType::F16));
        assert!(!check_passes(0.0, f64::INFINITY, DType::F16));
    }

    #[test]
    fn strengths_per_gate_shape() {
        assert_eq!(strengths(GateShape::PerKey), vec![AS_DRAWN, STRONG]);
        for s in [GateShape::PerHead, GateShape::PerValue, GateShape::Fixed] {
            assert_eq!(strengths(s), vec![AS_DRAWN]);
        }
        assert_eq!(STRONG.shift, -12.0);
    }

    #[test]
    fn median_of_odd_even_and_none() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert!(median(&[]).is_nan());
    }

    #[test]
    fn worst_case_is_the_max_and_failures_never_win() {
        assert_eq!(worst_case(&[0.2, 0.5]), 0.5);
        assert_eq!(worst_case(&[0.3]), 0.3);
        assert_eq!(worst_case(&[0.2, f64::NAN]), f64::INFINITY);
        assert_eq!(worst_case(&[]), f64::INFINITY);
        // (a score: the worst strength's median; failed or unrun: never a winner)
        assert_eq!(score(&[vec![0.2, 0.3, 0.1], vec![0.5, 0.4]], false), 0.45);
        assert_eq!(score(&[vec![0.2]], true), f64::INFINITY);
        assert_eq!(score(&[vec![0.2], vec![]], false), f64::INFINITY);
        // A candidate fast at weak decays but slow at strong ones loses to a steady one.
        let fast_weak = worst_case(&[0.20, 0.90]);
        let steady = worst_case(&[0.30, 0.35]);
        assert_eq!(winner(&[fast_weak, steady]), Some(1));
    }

    #[test]
    fn elimination_rule() {
        // best 1.0: 1.3 stays (boundary), 1.31 goes, ∞/NaN go.
        assert_eq!(
            survivors(&[1.0, 1.3, 1.31, f64::INFINITY, f64::NAN], 1.3, None),
            vec![true, true, false, false, false]
        );
        // The default is kept for its baseline time even when slow, but not when it failed.
        assert_eq!(
            survivors(&[1.0, 2.0, 3.0], 1.3, Some(2)),
            vec![true, false, true]
        );
        assert_eq!(
            survivors(&[1.0, f64::INFINITY], 1.3, Some(1)),
            vec![true, false]
        );
        // Nothing finite: nobody survives.
        assert_eq!(
            survivors(&[f64::INFINITY, f64::NAN], 1.3, Some(0)),
            vec![false, false]
        );
        assert!(survivors(&[], 1.3, None).is_empty());
    }

    #[test]
    fn winner_and_gain() {
        assert_eq!(winner(&[0.5, 0.3, 0.3, 0.4]), Some(1)); // ties: the earlier
        assert_eq!(winner(&[f64::INFINITY, f64::NAN]), None);
        assert_eq!(winner(&[]), None);
        assert_eq!(gain(0.25, Some(0.5)), Some(2.0));
        assert_eq!(gain(0.25, None), None);
        assert_eq!(gain(0.25, Some(f64::INFINITY)), None);
    }

    #[test]
    fn bucket_problems() {
        let grid = targets(&Buckets::Default);
        assert_eq!(grid.len(), Bucket::grid().len());
        assert_eq!(
            grid.len(),
            3 * 3,
            "rows 2^5, 2^7, 2^9 x tokens 2^10, 2^12, 2^14"
        );
        for t in &grid {
            let (b, tt, h) = t.problem;
            // Every grid problem lies in its own bucket.
            assert_eq!(Bucket::of(b * h, tt), t.bucket, "{t:?}");
        }
        let explicit = targets(&Buckets::Problems(vec![
            (8, 4096, 16),
            (2, 4096, 64),
            (2, 16384, 16),
        ]));
        // (8, 4096, 16) and (2, 4096, 64) are both 128 rows x 4096 tokens: timed once, at the first.
        assert_eq!(explicit.len(), 2);
        assert_eq!(
            explicit[0],
            Target {
                bucket: Bucket::of(128, 4096),
                problem: (8, 4096, 16)
            }
        );
        assert_eq!(
            explicit[1],
            Target {
                bucket: Bucket::of(32, 16384),
                problem: (2, 16384, 16)
            }
        );
    }

    #[test]
    fn candidates_are_the_variants_of_one_key() {
        let _ = &gla::gates::Gla;
        let gla: &'static dyn Gate = &gla::gates::Gla;
        for dtype in DType::ALL {
            for d in [64usize, 128, 256, 512] {
                let c = candidates(gla, dtype, d, None);
                assert!(!c.is_empty(), "{dtype} d={d}");
                assert!(c
                    .iter()
                    .all(|s| s.dtype == dtype && s.key_dim() as usize == d && s.dv as usize == d));
                // The runtime's default is always a candidate, so the gain over it is measured.
                let def = KernelSpec::default_for(gla, dtype, d, d).unwrap();
                assert!(
                    c.iter().any(|s| s.id() == def.id()),
                    "{} not a candidate",
                    def.id()
                );
            }
        }
        let only = candidates(gla, DType::BF16, 128, Some("w8p8x2g"));
        assert!(!only.is_empty() && only.iter().all(|s| s.id().contains("w8p8x2g")));
        assert!(candidates(gla, DType::BF16, 100, None).is_empty());
    }

    #[test]
    fn backward_candidates_cover_forms_and_cuts() {
        let _ = &gla::gates::Gla;
        let gate: &'static dyn Gate = &gla::gates::Gla;
        let chunks = BackwardSpec::for_problem(gate, DType::BF16, 128, 128).unwrap();
        let walks = chunks.with_form(BackwardForm::Walks).unwrap();
        let (c, w) = (chunks.id(), walks.id());
        // (sets, rows, chunks a sequence, dq / dk default) → (set, cut, dq / dk passes) in order, on 132 SMs
        type Want = Vec<(String, Option<u32>, Option<bool>)>;
        let cases: Vec<(Vec<BackwardSpec>, usize, usize, Option<bool>, Want)> = vec![
            // 8 × 16 rows of 128 chunks: the walks fill the SMs whole.
            (
                vec![chunks, walks],
                128,
                128,
                None,
                vec![(c.clone(), None, None), (w.clone(), Some(0), None)],
            ),
            // 32 rows of 512 chunks: the heuristic's 103 chunks first (the default), then whole and 206.
            (
                vec![chunks, walks],
                32,
                512,
                None,
                vec![
                    (c.clone(), None, None),
                    (w.clone(), Some(103), None),
                    (w.clone(), Some(0), None),
                    (w.clone(), Some(206), None),
                ],
            ),
            // A dq / dk choice, default passes, where the walks would cut: the passes, then the walks at k, 0, 2k.
            (
                vec![walks, chunks],
                32,
                512,
                Some(true),
                vec![
                    (w.clone(), Some(103), Some(true)),
                    (w.clone(), Some(103), Some(false)),
                    (w.clone(), Some(0), Some(false)),
                    (w.clone(), Some(206), Some(false)),
                    (c.clone(), None, None),
                ],
            ),
            // … default walks (too few CTAs for the passes): the cut walks, the passes, the walks whole and at 2k.
            (
                vec![walks],
                32,
                512,
                Some(false),
                vec![
                    (w.clone(), Some(103), Some(false)),
                    (w.clone(), Some(0), Some(true)),
                    (w.clone(), Some(0), Some(false)),
                    (w.clone(), Some(206), Some(false)),
                ],
            ),
            // … where the walks walk whole: the default, then the other choice — a choice even with one set.
            (
                vec![walks],
                128,
                128,
                Some(true),
                vec![
                    (w.clone(), Some(0), Some(true)),
                    (w.clone(), Some(0), Some(false)),
                ],
            ),
            (
                vec![walks],
                128,
                128,
                Some(false),
                vec![
                    (w.clone(), Some(0), Some(false)),
                    (w.clone(), Some(0), Some(true)),
                ],
            ),
            // One set and nothing to cut: nothing to choose.
            (vec![chunks], 32, 512, None, vec![]),
            (vec![walks], 128, 128, None, vec![]),
        ];
        for (sets, rows, n, passes, want) in cases {
            let got: Want = backward_candidates(&sets, rows, n, 128, 132, passes)
                .into_iter()
                .map(|c| (c.spec.id(), c.cut, c.passes))
                .collect();
            assert_eq!(got, want, "{rows} rows of {n} chunks, passes {passes:?}");
        }
        // The first candidate is what `Gla::backward` runs with no choice made: the heuristic's cut, and the passes
        // where `per_key_passes_default_at` takes them (given by the caller).
        for (rows, n) in [(32, 512), (128, 128), (512, 32)] {
            let def = gla_codegen::per_key_passes_default_at(DType::BF16, 128, rows, 132);
            let first = backward_candidates(&[walks], rows, n, 128, 132, Some(def))[0];
            assert_eq!(
                first.cut,
                Some(walks.walk_segment_chunks(n, rows, 1, 128, 132))
            );
            assert_eq!(first.passes, Some(def));
        }
        // The default passes' rule: more than half the SMs' worth of CTAs (a row's value tiles: one at d = 64, 128).
        for (dt, d, rows, want) in [
            (DType::BF16, 128, 32, false),
            (DType::BF16, 64, 66, false),
            (DType::BF16, 64, 67, true),
            (DType::BF16, 128, 128, true),
            (DType::F16, 128, 512, false),
            (DType::BF16, 256, 512, false),
        ] {
            let got = gla_codegen::per_key_passes_default_at(dt, d, rows, 132);
            assert_eq!(got, want, "{dt} d = {d}, {rows} rows");
        }
        // Which keys choose: per-key gates where the passes have kernels.
        assert!(dq_dk_passes_choice(gate, DType::BF16, 128));
        assert!(dq_dk_passes_choice(gate, DType::BF16, 64));
        assert!(dq_dk_passes_choice(gate, DType::F16, 128));
        assert!(
            !dq_dk_passes_choice(gate, DType::BF16, 256),
            "no pass kernels"
        );
        assert!(
            !dq_dk_passes_choice(gate, DType::F32, 128),
            "no pass kernels"
        );
        assert!(
            !dq_dk_passes_choice(&gla::gates::Mamba2, DType::BF16, 128),
            "a scalar gate always takes its passes"
        );
        assert_eq!(backward_tolerance(DType::BF16), 5e-3);
    }
}
