//! `--resume`: a GPU run skips the keys this GPU has already tuned with this codegen, so a search cut short (a
//! time limit, a lost machine) goes on where it stopped — the cache is saved after every key, and a key counts as
//! tuned only when every one of the run's target buckets holds a timed entry that the runtime would use here:
//! [`check`] passes (same GPU name, SM count, compute capability and driver, same NVRTC, same architecture) and its
//! source hash is that of the variant's source as this codegen generates it now. A key with any bucket missing,
//! untimed, stale or timed elsewhere is tuned again whole.

use crate::decide::Target;
use gla_runtime::cache::{check, CacheKey, Environment, TuningCache};

/// Whether every target of `key` has a usable timed entry in `cache` (see the module docs). `source_sha256_of`
/// gives a variant id's current source hash, `None` for an id that is no longer a candidate of the key.
pub fn tuned(
    cache: &TuningCache,
    key: &CacheKey,
    targets: &[Target],
    env: &Environment,
    source_sha256_of: impl Fn(&str) -> Option<String>,
) -> bool {
    !targets.is_empty()
        && targets.iter().all(|t| {
            cache.entries().iter().any(|e| {
                &e.key == key
                    && e.bucket == t.bucket
                    && e.is_timed()
                    && source_sha256_of(&e.variant).is_some_and(|sha| check(e, env, &sha).is_ok())
            })
        })
}

/// `--resume` on a run's keys: drops from `keys` those [`tuned`] in `env` (the run's GPU and NVRTC) — `key` gives a
/// key's cache key, `source(k, id)` the current source hash of its variant `id` — and says how many (`what`: which
/// keys, for the message).
pub fn skip_tuned<K>(
    keys: &mut Vec<K>,
    cache: &TuningCache,
    targets: &[Target],
    env: &Environment,
    what: &str,
    key: impl Fn(&K) -> CacheKey,
    source: impl Fn(&K, &str) -> Option<String>,
) {
    let before = keys.len();
    keys.retain(|k| !tuned(cache, &key(k), targets, env, |id| source(k, id)));
    println!(
        "--resume: {} of {before} {what} already tuned on this GPU with this codegen; skipped",
        before - keys.len()
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::Buckets;
    use gla_core::DType;
    use gla_runtime::cache::{Entry, GpuFacts, Timing};

    fn facts(name: &str) -> GpuFacts {
        GpuFacts {
            name: name.into(),
            sm_count: 132,
            compute_capability: (9, 0),
            driver_version: 13000,
        }
    }

    fn timing() -> Timing {
        Timing {
            median_ms: 0.25,
            default_ms: Some(0.3),
            candidates: 3,
            strengths: vec!["logits~N(0,1)".into()],
            all_ms: Default::default(),
        }
    }

    /// A cache (in memory; never saved) holding, for each target's bucket, an entry of `key` for variant `v` with
    /// source hash `sha`, timed on `gpu` (`None`: untimed).
    fn cache_with(key: &CacheKey, targets: &[Target], sha: &str, gpu: Option<&str>) -> TuningCache {
        static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("gla-resume-{}-{n}", std::process::id()));
        let mut c = TuningCache::empty(&dir);
        for t in targets {
            let e = Entry::compiled(
                key.clone(),
                t.bucket,
                "v".into(),
                (13, 0),
                sha.into(),
                gpu.map(|g| (facts(g), timing())),
            );
            c.insert(e, vec![1, 2, 3]);
        }
        c
    }

    #[test]
    fn a_key_is_tuned_only_where_every_bucket_is_timed_here_by_this_codegen() {
        let gate = &gla::gates::Gla;
        let key = CacheKey::new(gate, DType::BF16, 128, 128);
        let targets = crate::decide::targets(&Buckets::Default);
        let env = Environment {
            nvrtc_version: Some((13, 0)),
            gpu: Some(facts("NVIDIA H200")),
        };
        let now = |id: &str| (id == "v").then(|| "aaaa".to_string());
        // every bucket timed on this GPU with the current source: tuned
        let c = cache_with(&key, &targets, "aaaa", Some("NVIDIA H200"));
        assert!(tuned(&c, &key, &targets, &env, now));
        // another key (dtype) is not
        let other = CacheKey::new(gate, DType::F16, 128, 128);
        assert!(!tuned(&c, &other, &targets, &env, now));
        // one bucket missing: not tuned
        let c = cache_with(&key, &targets[1..], "aaaa", Some("NVIDIA H200"));
        assert!(!tuned(&c, &key, &targets, &env, now));
        // but tuned for the targets it has
        assert!(tuned(&c, &key, &targets[1..], &env, now));
        // the codegen changed the variant's source: stale, not tuned
        let c = cache_with(&key, &targets, "bbbb", Some("NVIDIA H200"));
        assert!(!tuned(&c, &key, &targets, &env, now));
        // the variant is no longer a candidate
        assert!(!tuned(&c, &key, &targets, &env, |_| None));
        // timed on another GPU, or untimed: not tuned here
        let c = cache_with(&key, &targets, "aaaa", Some("NVIDIA H100 80GB HBM3"));
        assert!(!tuned(&c, &key, &targets, &env, now));
        let c = cache_with(&key, &targets, "aaaa", None);
        assert!(!tuned(&c, &key, &targets, &env, now));
        // another NVRTC here: stale
        let env12 = Environment {
            nvrtc_version: Some((12, 8)),
            ..env.clone()
        };
        let c = cache_with(&key, &targets, "aaaa", Some("NVIDIA H200"));
        assert!(!tuned(&c, &key, &targets, &env12, now));
        // no targets: nothing to resume
        assert!(!tuned(&c, &key, &[], &env, now));
    }
}
