//! The tuning caches shipped in the repository (`tuning/caches/<gpu>/`) match the kernels this source generates:
//! every entry's gate is built in, its spec rebuilds the variant it names, the generated source hashes to the
//! entry's `source_sha256` (else the runtime would skip it as stale and run the default), and its cubin passes its
//! SHA-256 check. A change to codegen or a gate that changes a shipped kernel fails here until the cache is re-tuned
//! on that GPU (`cargo run --release --bin autotune -- --out tuning/caches/<gpu> …`) or the stale entries are dropped.
use gla_codegen::{generate, generate_backward};
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
            let (dk, dv) = (e.key.dk as usize, e.key.dv as usize);
            let Some(gate) = registered_gates().into_iter().find(|g| {
                CacheKey::new(*g, dtype, dk, dv) == e.key
                    || CacheKey::backward(*g, dtype, dk, dv) == e.key
                    || [
                        gla_codegen::Pass::Dv,
                        gla_codegen::Pass::Dq,
                        gla_codegen::Pass::Dk,
                    ]
                    .into_iter()
                    .any(|p| CacheKey::of_pass(*g, dtype, dk, dv, p) == e.key)
                    || CacheKey::decode(*g, dtype) == e.key
            }) else {
                problems.push(format!(
                    "{what}: no built-in gate has key {:?} (gate or its hash changed)",
                    e.key
                ));
                continue;
            };
            // A forward entry's variant or a backward entry's kernel set, rebuilt, and its current source.
            let rebuilt: Result<(String, String), String> =
                match (e.key.pass.as_str(), e.spec, e.backward) {
                    ("fwd", Some(r), None) => r
                        .spec(gate, dtype)
                        .and_then(|s| Ok((s.id(), generate(&s)?.source))),
                    (p @ ("dv" | "dq" | "dk"), Some(r), None) => r
                        .spec(gate, dtype)
                        .and_then(|s| {
                            s.with_pass(match p {
                                "dv" => gla_codegen::Pass::Dv,
                                "dq" => gla_codegen::Pass::Dq,
                                _ => gla_codegen::Pass::Dk,
                            })
                        })
                        .and_then(|s| Ok((s.id(), generate(&s)?.source))),
                    ("bwd", None, Some(r)) => r
                        .spec(gate, dtype)
                        .and_then(|s| Ok((s.id(), generate_backward(&s)?))),
                    ("dec", None, None) => gla_codegen::generate_decode(gate, dtype)
                        .map(|src| (gla_codegen::decode_id(gate, dtype), src)),
                    (pass, ..) => {
                        problems.push(format!("{what}: pass {pass:?} with the wrong record"));
                        continue;
                    }
                }
                .map_err(|err| err.to_string());
            let source = match rebuilt {
                Ok((id, source)) if id == e.variant => source,
                Ok((id, _)) => {
                    problems.push(format!("{what}: the record rebuilds {id}"));
                    continue;
                }
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
