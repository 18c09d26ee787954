//! `--regret`: how much the cache's choice loses against an exhaustive search at problems that are NOT the grid's
//! (issue 27's check that bucketing is good enough: ≤ 3 %). For each selected (gate, dtype, d) and each problem:
//!
//! 1. the cache at `--out` picks a variant exactly as the runtime does (`Tuned::pick`: the nearest bucket, timed
//!    entries first, then between equally near buckets the winner that loses least at them), and that entry's cubin is loaded — the
//!    kernel timed is the one a user would run;
//! 2. every candidate ([`decide::candidates`]) is compiled, checked against the f64 reference like in the search,
//!    and timed at the problem with no early elimination (every candidate gets all its runs), at every strength of
//!    the gate, scored by the worst one — the same score the search chooses by;
//! 3. regret = score(picked) / score(best) − 1.
//!
//! Nothing is written into the cache; the rows go to `<out>/regret.json` and a table.

use crate::args::Options;
use crate::decide::{self, Target};
use crate::search::{check, compile_keys, keys, time_candidates, Failure};
use gla_codegen::KernelSpec;
use gla_core::Gate;
use gla_runtime::cache::{Bucket, GpuFacts};
use gla_runtime::timing::L2Flush;
use gla_runtime::tuned::Tuned;
use gla_runtime::Gla;
use serde_json::json;
use std::time::Instant;

/// The default problems (B, T, H): none is a grid point (rows = B·H and T between the grid's powers of two, or off
/// its rows), from few long sequences to many short ones.
pub const PROBLEMS: [(usize, usize, usize); 5] = [
    (4, 2048, 16),
    (3, 6000, 12),
    (16, 1536, 20),
    (1, 12000, 24),
    (12, 700, 32),
];

/// One problem of one key.
#[derive(Clone, Debug)]
pub struct RegretRow {
    pub key: String,
    pub problem: (usize, usize, usize),
    /// The cache's pick (variant id), whether it was a timed entry, and the bucket it was timed for.
    pub picked: String,
    pub picked_timed: bool,
    pub picked_bucket: Bucket,
    pub picked_ms: f64,
    /// The exhaustive search's best.
    pub best: String,
    pub best_ms: f64,
    pub candidates: usize,
    /// Every candidate's time (ms, worst over the gate's strengths; ∞ where it failed), so other lookup rules can be
    /// replayed on the measurement.
    pub all: Vec<(String, f64)>,
}

impl RegretRow {
    /// score(picked) / score(best) − 1 (≥ 0 up to timing noise).
    pub fn regret(&self) -> f64 {
        self.picked_ms / self.best_ms - 1.0
    }
}

/// What [`run`] measured.
pub struct RegretReport {
    pub rows: Vec<RegretRow>,
    pub failures: Vec<Failure>,
    /// Keys / problems for which the cache at `--out` had no entry (nothing to measure).
    pub misses: Vec<String>,
    pub wall_s: f64,
}

/// Measure the regret of the cache at `o.out` at `problems` on `gla` (one device).
pub fn run(
    gla: &Gla,
    gates: &[&'static dyn Gate],
    o: &Options,
    problems: &[(usize, usize, usize)],
) -> Result<RegretReport, String> {
    let t0 = Instant::now();
    let tuned = Tuned::new(Some(GpuFacts::from(gla.gpu().info())));
    let entries = tuned.add(&o.out).map_err(|e| {
        format!(
            "--regret needs the tuning cache at {}: {e}",
            o.out.display()
        )
    })?;
    let keys = keys(gates, o);
    println!(
        "regret of the cache at {} ({entries} entries) at {} problems x {} keys, exhaustive timing",
        o.out.display(),
        problems.len(),
        keys.len()
    );
    let (compiled, mut failures) = compile_keys(gla, &keys);
    let mut flush = L2Flush::new(gla.gpu()).map_err(|e| e.to_string())?;
    let pb = indicatif::ProgressBar::hidden();
    let (mut rows, mut misses) = (Vec::new(), Vec::new());
    for k in &keys {
        let cands: Vec<_> = k
            .specs
            .iter()
            .filter_map(|s| compiled.get(&(s.id(), s.gate.content_hash())))
            .collect();
        let passing: Vec<KernelSpec> = check(gla, k, &cands, &mut failures, &pb)
            .map_err(|e| format!("{}: {e}", k.label()))?
            .into_iter()
            .map(|i| cands[i].spec)
            .collect();
        for &(b, t, h) in problems {
            let Some(pick) = tuned.pick(k.gate, k.dtype, k.d, k.d, b * h, t) else {
                misses.push(format!("{} at ({b},{t},{h})", k.label()));
                continue;
            };
            // The cache's cubin, as the runtime would load it (it replaces a candidate's cubin of the same id).
            gla.load_cubin(&pick.spec, &pick.cubin).map_err(|e| {
                format!("{}: loading the cached {}: {e}", k.label(), pick.spec.id())
            })?;
            let mut specs = passing.clone();
            let at = match specs.iter().position(|s| s.id() == pick.spec.id()) {
                Some(i) => i,
                None => {
                    specs.push(pick.spec);
                    specs.len() - 1
                }
            };
            let target = Target {
                bucket: Bucket::of(b * h, t),
                problem: (b, t, h),
            };
            let all = time_candidates(gla, k, &specs, Some(at), f64::INFINITY, &target, &mut flush)
                .map_err(|e| format!("{} at ({b},{t},{h}): {e}", k.label()))?;
            let (Some(w), picked_ms) = (decide::winner(&all), all[at]) else {
                misses.push(format!(
                    "{} at ({b},{t},{h}): no candidate could be timed",
                    k.label()
                ));
                continue;
            };
            if !picked_ms.is_finite() {
                misses.push(format!(
                    "{} at ({b},{t},{h}): the pick could not be timed",
                    k.label()
                ));
                continue;
            }
            let best_ms = all[w];
            let row = RegretRow {
                key: k.label(),
                problem: (b, t, h),
                picked: pick.spec.id(),
                picked_timed: pick.timed,
                picked_bucket: pick.bucket,
                picked_ms,
                best: specs[w].id(),
                best_ms,
                candidates: specs.len(),
                all: specs
                    .iter()
                    .map(|s| s.id())
                    .zip(all.iter().copied())
                    .collect(),
            };
            println!(
                "  {} ({b},{t},{h}): picked {} {:.3} ms, best {} {:.3} ms: regret {:+.1} %",
                row.key,
                row.picked,
                row.picked_ms,
                row.best,
                row.best_ms,
                100.0 * row.regret()
            );
            rows.push(row);
        }
    }
    Ok(RegretReport {
        rows,
        failures,
        misses,
        wall_s: t0.elapsed().as_secs_f64(),
    })
}

/// The regret target, a fraction of the fastest candidate's time.
pub const TARGET: f64 = 0.03;

/// How many pairs are within [`TARGET`], over all and per dtype (the key's second word), with each dtype's worst.
pub fn within_target(rows: &[RegretRow]) -> String {
    let ok = |rs: &[&RegretRow]| rs.iter().filter(|r| r.regret() <= TARGET).count();
    let all: Vec<&RegretRow> = rows.iter().collect();
    let mut by: std::collections::BTreeMap<&str, Vec<&RegretRow>> = Default::default();
    for r in rows {
        by.entry(r.key.split_whitespace().nth(1).unwrap_or("?"))
            .or_default()
            .push(r);
    }
    let parts: Vec<String> = by
        .iter()
        .map(|(dt, rs)| {
            let worst = rs.iter().map(|r| r.regret()).fold(0.0f64, f64::max);
            format!(
                "{dt} {} of {} (worst {:+.1} %)",
                ok(rs),
                rs.len(),
                100.0 * worst
            )
        })
        .collect();
    format!(
        "within {:.0} % of the fastest: {} of {} pairs; {}",
        100.0 * TARGET,
        ok(&all),
        all.len(),
        parts.join(", ")
    )
}

/// The table, the worst regret, and `<out>/regret.json`.
pub fn print_report(r: &RegretReport, o: &Options) -> Result<(), String> {
    println!(
        "\n{:<18} {:<16} {:<22} {:>9} {:>9} {:>8}  best",
        "key", "problem", "picked (bucket)", "ms", "best ms", "regret"
    );
    for row in &r.rows {
        let (b, t, h) = row.problem;
        println!(
            "{:<18} {:<16} {:<22} {:>9.3} {:>9.3} {:>7.1}%  {}",
            row.key,
            format!("{b},{t},{h}"),
            format!(
                "2^{}x2^{}{}",
                row.picked_bucket.rows_log2,
                row.picked_bucket.tokens_log2,
                if row.picked_timed { "" } else { " untimed" }
            ),
            row.picked_ms,
            row.best_ms,
            100.0 * row.regret(),
            if row.best == row.picked {
                "="
            } else {
                row.best.as_str()
            }
        );
    }
    for m in &r.misses {
        println!("no cached entry: {m}");
    }
    for f in &r.failures {
        eprintln!("FAILED CHECK {} {}: {}", f.key, f.variant, f.what);
    }
    let worst = r
        .rows
        .iter()
        .map(RegretRow::regret)
        .fold(f64::NEG_INFINITY, f64::max);
    if !r.rows.is_empty() {
        println!(
            "\nworst regret {:+.1} % over {} (key, problem) pairs; {:.1} s",
            100.0 * worst,
            r.rows.len(),
            r.wall_s
        );
        println!("{}", within_target(&r.rows));
    }
    let json: Vec<_> = r
        .rows
        .iter()
        .map(|row| {
            json!({
                "key": row.key, "problem": [row.problem.0, row.problem.1, row.problem.2],
                "picked": row.picked, "picked_timed": row.picked_timed,
                "picked_bucket": [row.picked_bucket.rows_log2, row.picked_bucket.tokens_log2],
                "picked_ms": row.picked_ms, "best": row.best, "best_ms": row.best_ms,
                "regret": row.regret(), "candidates": row.candidates,
                "all_ms": row.all.iter().map(|(v, ms)| json!({"variant": v, "ms": ms.is_finite().then_some(*ms)})).collect::<Vec<_>>(),
                "timing": format!("every candidate, {} warm-ups, then runs worth {} + {} ms of GPU time, L2 flushed, median; worst over the gate's strengths", decide::WARMUPS, decide::SCREEN_BUDGET_MS, decide::FINAL_BUDGET_MS),
            })
        })
        .collect();
    let path = o.out.join("regret.json");
    std::fs::write(&path, serde_json::to_string_pretty(&json).unwrap())
        .map_err(|e| format!("writing {}: {e}", path.display()))?;
    println!("written to {}", path.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(key: &str, picked_ms: f64, best_ms: f64) -> RegretRow {
        RegretRow {
            key: key.into(),
            problem: (1, 2, 3),
            picked: "p".into(),
            picked_timed: true,
            picked_bucket: Bucket {
                rows_log2: 5,
                tokens_log2: 10,
            },
            picked_ms,
            best: "b".into(),
            best_ms,
            candidates: 2,
            all: vec![],
        }
    }

    #[test]
    fn the_summary_counts_the_pairs_within_the_target_per_dtype() {
        let rows = [
            row("gla bf16 d64", 1.0, 1.0),
            row("gla bf16 d128", 1.1, 1.0),
            row("gla f32 d64", 1.02, 1.0),
        ];
        assert_eq!(
            within_target(&rows),
            "within 3 % of the fastest: 2 of 3 pairs; bf16 1 of 2 (worst +10.0 %), f32 1 of 1 (worst +2.0 %)"
        );
    }
}
