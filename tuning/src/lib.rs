//! `autotune`, the whole program, as a library: [`main`] works for whatever gates are registered in the binary that
//! calls it. The workspace's `autotune` binary links the built-in gates; a crate with its own gates gets the same
//! program from two lines in its `src/bin/autotune.rs`:
//!
//! ```ignore
//! fn main() -> std::process::ExitCode {
//!     let _ = &gla::gates::Gla; // link the built-in gates too (optional)
//!     tuning::main()
//! }
//! ```
//!
//! What it does (`autotune --help` prints the flags, [`args::USAGE`]):
//! * `--plan` ([`plan`]): compile every variant of `all_variants` for every registered gate (no GPU needed), print
//!   the resource table, fail on a compile error, a spill, wgmma serialised by ptxas or too much shared memory. CI
//!   runs it.
//! * no GPU ([`aot`]): compile ahead of time the variant the runtime would use (`KernelSpec::default_for`) for every
//!   gate × dtype × head dim into the cache at `--out` (default `tuning/caches/local`) as untimed entries; exit 0.
//! * `--report` ([`report`]): the cache at `--out` as Markdown (`report.md` beside its index).
//! * `--regret` ([`regret`], a GPU): the cache's pick vs an exhaustive search at problems off the grid.
//! * a GPU ([`search`]): compile, check against the f64 reference, and time every candidate per gate × dtype × head
//!   dim × shape bucket, and write the winners into the cache as timed entries; `--backward` ([`backward`]) then the
//!   backward's form, walk segments and a per-key gate's dq / dk passes or walks, by the worst gate strength. The
//!   decisions are the plain functions of [`decide`].
//!
//! The library names no gate: gla does not depend on it, and it depends on gla only for the `autotune` binary.

pub mod aot;
pub mod args;
pub mod backward;
pub mod decide;
pub mod inputs;
pub mod plan;
mod progress;
pub mod regret;
pub mod report;
pub mod restamp;
pub mod resume;
pub mod search;

use gla_core::{registered_gates, Gate};
use std::process::ExitCode;

/// The registered gates named by `--gates` (all of them when it is not given). Errors name the unknown gates and
/// list the registered ones.
pub fn select_gates(names: Option<&[String]>) -> Result<Vec<&'static dyn Gate>, String> {
    let all = registered_gates();
    if all.is_empty() {
        return Err("no gates are registered in this binary (declare one with #[gated_linear_attention], or link \
                    gla's built-in gates with `let _ = &gla::gates::Gla;` in main)"
            .into());
    }
    let Some(names) = names else { return Ok(all) };
    let unknown: Vec<&str> = names
        .iter()
        .map(String::as_str)
        .filter(|n| !all.iter().any(|g| g.name() == *n))
        .collect();
    if !unknown.is_empty() {
        return Err(format!(
            "unknown gate(s) {} (registered: {})",
            unknown.join(", "),
            all.iter().map(|g| g.name()).collect::<Vec<_>>().join(", ")
        ));
    }
    Ok(all
        .into_iter()
        .filter(|g| names.iter().any(|n| n == g.name()))
        .collect())
}

/// The whole program, on `std::env::args()`.
pub fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    run(&args)
}

/// The whole program, on `args` (without the program name). Exit codes: 0 success (also with no GPU), 1 a failure
/// (a variant that does not compile, a `--plan` limit, a candidate that fails the reference check, an unreadable
/// cache), 2 a usage error.
pub fn run(args: &[String]) -> ExitCode {
    let o = match args::parse(args) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    if o.help {
        println!("{}", args::USAGE);
        return ExitCode::SUCCESS;
    }
    if o.report {
        return match report::write(&o.out) {
            Ok((path, md)) => {
                println!("{md}");
                println!("written to {}", path.display());
                println!(
                    "heatmap (PNG, needs matplotlib): python3 tuning/python/heatmap.py {}",
                    o.out.display()
                );
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::FAILURE
            }
        };
    }
    if o.restamp {
        return match restamp::restamp(&o.out) {
            Ok(r) => {
                for s in &r.stale {
                    println!("stale: {s}");
                }
                println!(
                    "{} entries current, {} restamped (same machine code), {} stale",
                    r.current,
                    r.restamped,
                    r.stale.len()
                );
                if r.stale.is_empty() {
                    ExitCode::SUCCESS
                } else {
                    ExitCode::FAILURE
                }
            }
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let gates = match select_gates(o.gates.as_deref()) {
        Ok(g) => g,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    if o.plan {
        return if plan::plan(&gates, &o) {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        };
    }
    match open_devices(o.devices.as_deref()) {
        Err(e) if o.regret.is_some() => {
            eprintln!("error: --regret times kernels and needs a GPU: {e}");
            ExitCode::FAILURE
        }
        Err(e) => {
            println!("No GPU here: {e}");
            println!(
                "Compiling ahead of time instead (the forward variants, backward sets and decode steps the runtime would use, untimed)."
            );
            match aot::run(&gates, &o) {
                Ok(r) => {
                    aot::print_report(&r);
                    if r.ok() {
                        ExitCode::SUCCESS
                    } else {
                        ExitCode::FAILURE
                    }
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Ok(glas) if o.regret.is_some() => {
            let problems = o.regret.clone().unwrap_or_default();
            match regret::run(&glas[0], &gates, &o, &problems)
                .and_then(|r| regret::print_report(&r, &o).map(|()| r))
            {
                Ok(r) if r.failures.is_empty() => ExitCode::SUCCESS,
                Ok(_) => ExitCode::FAILURE,
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Ok(glas) => {
            let fwd = match search::run(&glas, &gates, &o) {
                Ok(r) => {
                    search::print_report(&r);
                    r.failures.is_empty()
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    return ExitCode::FAILURE;
                }
            };
            // `--backward`: the backward's form and walk segments, on the first device.
            let bwd = !o.backward
                || match backward::run(&glas[0], &gates, &o) {
                    Ok(r) => {
                        backward::print_report(&r);
                        r.failures.is_empty()
                    }
                    Err(e) => {
                        eprintln!("error: {e}");
                        false
                    }
                };
            if fwd && bwd {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

/// One runtime for each GPU the search runs on: `devices`, or every device of the host (a device that cannot be
/// opened — e.g. not compute capability 9.0 — is skipped with a warning when none were named). Errors say why there
/// is none (no driver, no device, a named device that does not open).
fn open_devices(devices: Option<&[usize]>) -> Result<Vec<gla_runtime::Gla>, String> {
    let count = gla_runtime::device::device_count().map_err(|e| e.to_string())?;
    if count == 0 {
        return Err("the driver reports no CUDA devices".into());
    }
    match devices {
        Some(list) => list
            .iter()
            .map(|&i| gla_runtime::Gla::on_device(i).map_err(|e| format!("device {i}: {e}")))
            .collect(),
        None => {
            let mut glas = Vec::new();
            let mut why = Vec::new();
            for i in 0..count {
                match gla_runtime::Gla::on_device(i) {
                    Ok(g) => glas.push(g),
                    Err(e) => why.push(format!("device {i}: {e}")),
                }
            }
            if glas.is_empty() {
                return Err(why.join("; "));
            }
            for w in &why {
                eprintln!("warning: not tuning on {w}");
            }
            Ok(glas)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gates_by_name() {
        let _ = &gla::gates::Gla;
        let all = select_gates(None).unwrap();
        assert!(all.len() >= 7, "{} gates", all.len());
        let two = select_gates(Some(&["mamba2".to_string(), "gla".to_string()])).unwrap();
        assert_eq!(
            two.iter().map(|g| g.name()).collect::<Vec<_>>(),
            vec!["gla", "mamba2"]
        );
        let e = select_gates(Some(&["gla".to_string(), "nope".to_string()])).unwrap_err();
        assert!(
            e.contains("unknown gate(s) nope") && e.contains("mamba2"),
            "{e}"
        );
    }
}
