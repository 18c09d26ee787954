//! `autotune --report`: a tuning cache as Markdown — per key and shape bucket the variant it runs, how it was
//! chosen (timed on which GPU, or untimed), its time, the default variant's and the gain over the default.

use crate::decide::gain;
use gla_runtime::cache::{Entry, TuningCache};
use std::fmt::Write;
use std::path::{Path, PathBuf};

/// The report's file name, beside the cache's index.
pub const REPORT_FILE: &str = "report.md";

/// The Markdown report of `cache`: one table, rows sorted by key then bucket, and a summary line.
pub fn markdown(cache: &TuningCache) -> String {
    let mut rows: Vec<_> = cache.entries().iter().collect();
    rows.sort_by_key(|a| (a.key.to_string(), a.bucket));
    let mut md = String::new();
    let _ = writeln!(md, "# Tuning cache `{}`\n", cache.dir().display());
    let _ = writeln!(
        md,
        "| key | bucket (N·H × T) | variant | chosen | ms | default ms | gain |"
    );
    let _ = writeln!(md, "|---|---|---|---|---|---|---|");
    let (mut timed, mut gains) = (0, Vec::new());
    for e in &rows {
        let (r, t) = e.bucket.rows_tokens();
        let (chosen, ms, def, g) = match &e.timing {
            None => (
                "untimed (compiled ahead of time: the default)".to_string(),
                "—".to_string(),
                "—".to_string(),
                "—".to_string(),
            ),
            Some(tm) => {
                timed += 1;
                let gpu = e.validators.gpu.as_ref().map_or("?".to_string(), |g| {
                    format!("{}, driver {}", g.name, g.driver_version)
                });
                let strengths = if tm.strengths.is_empty() {
                    String::new()
                } else {
                    format!("; worst of {}", tm.strengths.join(", "))
                };
                let g = gain(tm.median_ms, tm.default_ms);
                if let Some(g) = g {
                    gains.push(g);
                }
                (
                    format!("timed on {gpu}, {} candidates{strengths}", tm.candidates),
                    format!("{:.3}", tm.median_ms),
                    tm.default_ms.map_or("—".to_string(), |d| format!("{d:.3}")),
                    g.map_or("—".to_string(), |g| format!("{g:.2}×")),
                )
            }
        };
        let _ = writeln!(
            md,
            "| {} | {r} × {t} | {} | {chosen} | {ms} | {def} | {g} |",
            e.key,
            variant_cell(e)
        );
    }
    let best = gains.iter().copied().fold(f64::NAN, f64::max);
    let _ = writeln!(
        md,
        "\n{} entries, {timed} timed{}.",
        rows.len(),
        if gains.is_empty() {
            String::new()
        } else {
            format!(
                "; gain over the default up to {best:.2}× ({} timed against it)",
                gains.len()
            )
        }
    );
    md
}

/// The variant's id and, for a backward entry, the choices its record makes: the walks' segments, dq / dk as passes or
/// walks (where the tuner chose; else the runtime decides at the call).
fn variant_cell(e: &Entry) -> String {
    let mut cell = format!("`{}`", e.variant);
    if let Some(b) = &e.backward {
        match b.seg_chunks {
            Some(0) => cell.push_str(", whole sequences"),
            Some(k) => cell.push_str(&format!(", segments of {k} chunks")),
            None => {}
        }
        match b.dq_dk_passes {
            Some(true) => cell.push_str(", dq / dk passes"),
            Some(false) => cell.push_str(", dq / dk walks"),
            None => {}
        }
    }
    cell
}

/// Read the cache in `dir` and write its report beside the index. Returns the report's path and text.
pub fn write(dir: &Path) -> Result<(PathBuf, String), String> {
    let cache = TuningCache::open(dir).map_err(|e| e.to_string())?;
    let md = markdown(&cache);
    let path = dir.join(REPORT_FILE);
    std::fs::write(&path, &md).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok((path, md))
}

#[cfg(test)]
mod tests {
    use super::*;
    use gla_codegen::fixtures::PER_KEY;
    use gla_codegen::{BackwardForm, BackwardRecord, BackwardSpec};
    use gla_codegen::{KernelSpec, SpecRecord};
    use gla_core::DType;
    use gla_runtime::cache::{Bucket, CacheKey, GpuFacts, Timing, Validators};

    fn entry(bucket: Bucket, timing: Option<Timing>) -> Entry {
        let s = KernelSpec::default_for(&PER_KEY, DType::BF16, 128, 128).unwrap();
        let gpu = timing.as_ref().map(|_| GpuFacts {
            name: "NVIDIA H200".into(),
            sm_count: 132,
            compute_capability: (9, 0),
            driver_version: 13000,
        });
        Entry {
            key: CacheKey::new(&PER_KEY, DType::BF16, 128, 128),
            bucket,
            variant: s.id(),
            spec: Some(SpecRecord::of(&s)),
            backward: None,
            cubin: String::new(),
            cubin_sha256: String::new(),
            validators: Validators {
                arch: "sm_90a".into(),
                nvrtc_version: (13, 0),
                source_sha256: "0".repeat(64),
                gpu,
            },
            timing,
        }
    }

    #[test]
    fn report_lists_every_entry_with_its_gain() {
        let dir = std::env::temp_dir().join(format!("gla-report-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut c = TuningCache::empty(&dir);
        c.insert(entry(Bucket::of(1, 1), None), b"\x7fELF a".to_vec());
        let tm = Timing {
            median_ms: 0.25,
            default_ms: Some(0.30),
            candidates: 5,
            strengths: vec!["N(0,1)".into(), "N(0,1) - 12".into()],
            all_ms: Default::default(),
        };
        c.insert(
            entry(Bucket::of(128, 4096), Some(tm)),
            b"\x7fELF b".to_vec(),
        );
        // (a backward entry: its record's choices beside the kernel set)
        let walks = BackwardSpec::for_problem(&PER_KEY, DType::BF16, 128, 128)
            .unwrap()
            .with_form(BackwardForm::Walks)
            .unwrap();
        c.insert(
            Entry {
                key: CacheKey::backward(&PER_KEY, DType::BF16, 128, 128),
                variant: walks.id(),
                spec: None,
                backward: Some(BackwardRecord::of(&walks, Some(57), Some(false))),
                ..entry(Bucket::of(32, 16384), None)
            },
            b"\x7fELF c".to_vec(),
        );
        c.save().unwrap();
        let (path, md) = write(&dir).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), md);
        assert!(
            md.contains("| 128 × 4096 |") && md.contains("| 0.250 | 0.300 | 1.20× |"),
            "{md}"
        );
        assert!(
            md.contains(
                "timed on NVIDIA H200, driver 13000, 5 candidates; worst of N(0,1), N(0,1) - 12"
            ),
            "{md}"
        );
        assert!(
            md.contains("untimed (compiled ahead of time: the default)"),
            "{md}"
        );
        assert!(
            md.contains(&format!(
                "| `{}`, segments of 57 chunks, dq / dk walks |",
                walks.id()
            )),
            "{md}"
        );
        assert!(
            md.contains("3 entries, 1 timed; gain over the default up to 1.20×"),
            "{md}"
        );
        // A directory that is no cache: an error naming it, no file written.
        let none = dir.join("nope");
        assert!(write(&none).unwrap_err().contains("nope"));
    }
}
