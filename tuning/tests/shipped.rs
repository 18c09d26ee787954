//! The tuning caches shipped in the repository (`tuning/caches/<gpu>/`) match the kernels this source generates:
//! every entry's gate is built in, its spec rebuilds the variant it names, the generated source hashes to the
//! entry's `source_sha256` (else the runtime would skip it as stale and run the default), and its cubin passes its
//! SHA-256 check. A change to codegen or a gate that changes a shipped kernel fails here until the cache is re-tuned
//! on that GPU (`cargo run --release --bin autotune -- --out tuning/caches/<gpu> …`) or the stale entries are dropped;
//! where the kernels themselves did not change (same cubin), `autotune --restamp --out tuning/caches/<gpu>` suffices.
use gla_runtime::cache::{sha256_hex, TuningCache};
use std::path::Path;

#[test]
fn shipped_caches_match_the_generated_kernels() {
    let _ = &gla::gates::Gla; // link the built-in gates' registrations
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("caches");
    let mut checked = 0usize;
    let mut problems = Vec::new();
    for dir in std::fs::read_dir(&root).unwrap().map(|d| d.unwrap().path()) {
        // (`local` is what `autotune` wrote on this machine; it is not shipped.)
        if !dir.join("index.json").exists() || dir.file_name().unwrap() == "local" {
            continue;
        }
        let cache = TuningCache::open(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        for e in cache.entries() {
            let what = format!("{}: {} at {:?}", dir.display(), e.variant, e.bucket);
            // A forward entry's variant or a backward entry's kernel set, rebuilt, and its current source.
            let source = match tuning::restamp::rebuild(e) {
                Ok((.., source)) => source,
                Err(err) => {
                    problems.push(format!("{what}: {err}"));
                    continue;
                }
            };
            if sha256_hex(source.as_bytes()) != e.validators.source_sha256 {
                problems.push(format!(
                    "{what}: stale (the generated source changed since it was timed)"
                ));
            }
            if let Err(err) = cache.cubin(e) {
                problems.push(format!("{what}: {err}"));
            }
            assert!(e.is_timed(), "{what}: a shipped entry is timed on its GPU");
            checked += 1;
        }
    }
    println!("{checked} shipped entries checked");
    assert!(checked > 0, "no shipped cache under {}", root.display());
    assert!(
        problems.is_empty(),
        "{} problem(s) in the shipped caches:\n{}",
        problems.len(),
        problems.join("\n")
    );
}
