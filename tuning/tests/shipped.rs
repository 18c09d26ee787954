//! The tuning caches shipped in the repository (`tuning/caches/<gpu>/`) match the kernels this source generates:
//! every entry's gate is built in, its spec rebuilds the variant it names, the generated source hashes to the
//! entry's `source_sha256` (else the runtime would skip it as stale and run the default), and its cubin passes its
//! SHA-256 check. A change to codegen or a gate that changes a shipped kernel fails here until the cache is re-tuned
//! on that GPU (`cargo run --release --bin autotune -- --out tuning/caches/h200 …`) or the stale entries are dropped.
use gla_codegen::generate;
use gla_core::{registered_gates, DType};
use gla_runtime::cache::{sha256_hex, CacheKey, TuningCache};
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
            let Some(dtype) = DType::ALL
                .into_iter()
                .find(|d| d.to_string() == e.key.dtype)
            else {
                problems.push(format!("{what}: unknown dtype {:?}", e.key.dtype));
                continue;
            };
            let Some(gate) = registered_gates()
                .into_iter()
                .find(|g| CacheKey::new(*g, dtype, e.key.dk as usize, e.key.dv as usize) == e.key)
            else {
                problems.push(format!(
                    "{what}: no built-in gate has key {:?} (gate or its hash changed)",
                    e.key
                ));
                continue;
            };
            let spec = match e.spec.spec(gate, dtype) {
                Ok(s) if s.id() == e.variant => s,
                Ok(s) => {
                    problems.push(format!("{what}: the spec record rebuilds {}", s.id()));
                    continue;
                }
                Err(err) => {
                    problems.push(format!("{what}: {err}"));
                    continue;
                }
            };
            let source = generate(&spec).unwrap().source;
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
