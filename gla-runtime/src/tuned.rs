//! Run-time dispatch from tuning caches ([`crate::cache`]): which variant a forward call runs when it names none —
//! and which backward kernel set (form and walk segments, key pass `"bwd"`: [`Tuned::pick_backward`]) a backward
//! call runs when it names no form — and the cubin, with no NVRTC and no tuning.
//!
//! A [`Gla`](crate::Gla) consults, in order, the caches added with [`Gla::add_tuning_cache`](crate::Gla::add_tuning_cache),
//! the directories in `GLA_TUNING_CACHE` (separated by `:`), and the caches shipped in the repository
//! (`tuning/caches/<model>` of [`SHIPPED`], each only on its GPU model, then the local untimed one `tuning/caches/local`
//! that `autotune` writes with no GPU).
//! For a call it takes the usable entry (see [`crate::cache::check`]: same GPU, driver and generated source) whose
//! shape bucket is nearest the call's; a timed entry wins over an untimed one at the same distance. Stale and
//! unreadable caches are skipped with one warning each, never used. A miss runs `KernelSpec::default_for`, compiled
//! once per process; [`TuningStats`] counts hits and misses.
//!
//! Decisions are memoised per (gate, dtype, d_k, d_v, bucket), so a call pays one hash-map lookup after the first.

use crate::cache::{self, Bucket, CacheKey, Entry, Environment, GpuFacts, TuningCache};
use gla_codegen::{BackwardSpec, KernelSpec};
use gla_core::error::Result;
use gla_core::{DType, Gate};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

/// A variant chosen from a tuning cache, with its cubin.
#[derive(Clone, Debug)]
pub struct Pick {
    pub spec: KernelSpec,
    pub cubin: Arc<Vec<u8>>,
    /// Whether the entry was timed on a GPU like this one (false: compiled ahead of time, the default variant).
    pub timed: bool,
    /// The cache directory it came from.
    pub cache: PathBuf,
    pub bucket: Bucket,
}

/// A backward kernel set chosen from a tuning cache (key pass `"bwd"`), with its walk segments and its cubin.
#[derive(Clone, Debug)]
pub struct BackwardPick {
    pub spec: BackwardSpec,
    /// The walk form's chunks a segment it was chosen with (`None`: the runtime's heuristic).
    pub seg_chunks: Option<u32>,
    /// Whether dq and dk run as passes, as chosen (`None`: the runtime's default).
    pub dq_dk_passes: Option<bool>,
    pub cubin: Arc<Vec<u8>>,
    /// Whether the entry was timed on a GPU like this one.
    pub timed: bool,
    /// The cache directory it came from.
    pub cache: PathBuf,
    pub bucket: Bucket,
}

/// How the calls that named no variant were served.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TuningStats {
    /// Decisions served from a cache (each (gate, dtype, dims, bucket) counted once).
    pub hits: usize,
    /// Decisions with no usable entry: the default variant ran. The keys and buckets, for logging.
    pub misses: Vec<(CacheKey, Bucket)>,
    /// Entries skipped as stale (other GPU, driver or generated source), with the reason.
    pub stale: Vec<String>,
}

type DecisionKey = (CacheKey, Bucket);

/// The caches of one [`Gla`](crate::Gla) and its memoised decisions.
pub struct Tuned {
    caches: RwLock<Vec<TuningCache>>,
    env: Environment,
    decisions: Mutex<HashMap<DecisionKey, Option<Pick>>>,
    bwd_decisions: Mutex<HashMap<DecisionKey, Option<BackwardPick>>>,
    dec_decisions: Mutex<HashMap<DecisionKey, Option<Arc<Vec<u8>>>>>,
    /// SHA-256 of the source the current codegen emits for (variant id, gate hash).
    sources: Mutex<HashMap<(String, u64), Option<String>>>,
    warned: Mutex<HashSet<String>>,
    stats: Mutex<TuningStats>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The cache directories consulted by default: `GLA_TUNING_CACHE` (`:`-separated), then the repository's shipped
/// caches ([`SHIPPED`]) and the local untimed one (`tuning/caches/{h200,h100,local}` beside this crate).
pub fn default_cache_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("GLA_TUNING_CACHE")
        .map(|v| {
            std::env::split_paths(&v)
                .filter(|p| !p.as_os_str().is_empty())
                .collect()
        })
        .unwrap_or_default();
    if let Some(ws) = Path::new(env!("CARGO_MANIFEST_DIR")).parent() {
        for gpu in SHIPPED {
            dirs.push(ws.join("tuning/caches").join(gpu));
        }
        dirs.push(ws.join("tuning/caches/local"));
    }
    dirs
}

/// The caches shipped in the repository, one a GPU model (`tuning/caches/<model>`); each is consulted only on a GPU
/// of the name its timed entries were tuned on.
pub const SHIPPED: [&str; 2] = ["h200", "h100"];

/// Whether a shipped cache was tuned on another GPU model than `gpu` (every timed entry names another device):
/// such a cache is left out quietly, where a user-named one would warn entry by entry.
fn for_another_gpu(c: &TuningCache, gpu: Option<&GpuFacts>) -> bool {
    let Some(gpu) = gpu else { return false };
    let mut timed = c
        .entries()
        .iter()
        .filter_map(|e| e.validators.gpu.as_ref())
        .peekable();
    timed.peek().is_some() && timed.all(|g| g.name != gpu.name)
}

impl Tuned {
    /// No caches yet; entries are checked against `gpu`.
    pub fn new(gpu: Option<GpuFacts>) -> Tuned {
        Tuned {
            caches: RwLock::new(Vec::new()),
            // The NVRTC that produced a cubin does not bind its use (the driver loads any sm_90a cubin of NVRTC 13):
            // only the GPU, its driver and the generated source are checked.
            env: Environment {
                nvrtc_version: None,
                gpu,
            },
            decisions: Mutex::default(),
            bwd_decisions: Mutex::default(),
            dec_decisions: Mutex::default(),
            sources: Mutex::default(),
            warned: Mutex::default(),
            stats: Mutex::default(),
        }
    }

    /// [`Tuned::new`] with the [`default_cache_dirs`] that exist; an unreadable one is skipped with a warning
    /// (explicitly named ones — `GLA_TUNING_CACHE` — also when missing).
    pub fn with_defaults(gpu: Option<GpuFacts>) -> Tuned {
        let t = Tuned::new(gpu);
        let named: HashSet<PathBuf> = std::env::var_os("GLA_TUNING_CACHE")
            .map(|v| std::env::split_paths(&v).collect())
            .unwrap_or_default();
        for dir in default_cache_dirs() {
            if !named.contains(&dir) && !dir.join(cache::INDEX_FILE).exists() {
                continue;
            }
            // (opened once: the index is parsed on the cold-start path)
            match TuningCache::open(&dir) {
                Ok(c) if !named.contains(&dir) && for_another_gpu(&c, t.env.gpu.as_ref()) => {}
                Ok(c) => {
                    t.add_opened(c);
                }
                Err(e) => t.warn_once(
                    &format!("open:{}", dir.display()),
                    &format!("gla: tuning cache skipped: {e}"),
                ),
            }
        }
        t
    }

    /// Add a cache directory (consulted after those added before). Returns its number of entries.
    pub fn add(&self, dir: &Path) -> Result<usize> {
        Ok(self.add_opened(TuningCache::open(dir)?))
    }

    /// [`Tuned::add`] of a cache already opened. Returns its number of entries.
    fn add_opened(&self, c: TuningCache) -> usize {
        let n = c.entries().len();
        self.caches
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .push(c);
        lock(&self.decisions).clear();
        lock(&self.bwd_decisions).clear();
        lock(&self.dec_decisions).clear();
        n
    }

    /// The cache directories in use, in order.
    pub fn dirs(&self) -> Vec<PathBuf> {
        self.caches
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|c| c.dir().to_path_buf())
            .collect()
    }

    pub fn stats(&self) -> TuningStats {
        lock(&self.stats).clone()
    }

    pub(crate) fn warn_once(&self, key: &str, msg: &str) {
        if lock(&self.warned).insert(key.to_string()) {
            eprintln!("{msg}");
        }
    }

    /// SHA-256 of the source the current codegen emits for kernel id `id` of `gate` (`generate`; None if it no
    /// longer generates), memoised.
    fn source_sha(
        &self,
        id: String,
        gate: &dyn Gate,
        generate: impl FnOnce() -> Option<String>,
    ) -> Option<String> {
        let key = (id, gate.content_hash());
        if let Some(s) = lock(&self.sources).get(&key) {
            return s.clone();
        }
        let sha = generate().map(|src| cache::sha256_hex(src.as_bytes()));
        lock(&self.sources).insert(key, sha.clone());
        sha
    }

    /// Whether `e` may run here for `gate`: its record rebuilds (`rebuild`: the kernel, its id and its current
    /// source's SHA-256), names the entry's variant, and passes [`cache::check`] against this GPU and that source.
    fn usable_with<T>(
        &self,
        dir: &Path,
        e: &Entry,
        rebuild: impl FnOnce() -> std::result::Result<(T, String, Option<String>), String>,
    ) -> Option<T> {
        let reason = match rebuild() {
            Err(why) => Err(why),
            Ok((_, id, _)) if id != e.variant => {
                Err(format!("its record builds {id}, not {}", e.variant))
            }
            Ok((_, _, None)) => Err("the current codegen does not generate it".to_string()),
            Ok((k, _, Some(sha))) => cache::check(e, &self.env, &sha).map(|()| k),
        };
        match reason {
            Ok(k) => Some(k),
            Err(why) => {
                let msg = format!(
                    "{}: entry {} ({:?}) is stale: {why}",
                    dir.display(),
                    e.variant,
                    e.bucket
                );
                if lock(&self.warned).insert(format!("stale:{msg}")) {
                    eprintln!("gla: tuning cache {msg}; skipped");
                    lock(&self.stats).stale.push(msg);
                }
                None
            }
        }
    }

    /// A forward (or dv-pass: its forward record made `pass`) entry's variant, if usable here
    /// ([`Tuned::usable_with`]).
    fn usable(
        &self,
        gate: &'static dyn Gate,
        dtype: DType,
        pass: gla_codegen::Pass,
        dir: &Path,
        e: &Entry,
    ) -> Option<KernelSpec> {
        self.usable_with(dir, e, || {
            let rec = e.spec.ok_or("an entry without a variant record")?;
            let spec = rec
                .spec(gate, dtype)
                .and_then(|s| s.with_pass(pass))
                .map_err(|err| format!("its variant no longer validates: {err}"))?;
            let sha = self.source_sha(spec.id(), gate, || {
                gla_codegen::generate(&spec).ok().map(|g| g.source)
            });
            Ok((spec, spec.id(), sha))
        })
    }

    /// A backward entry's kernel set and walk segments, if usable here ([`Tuned::usable_with`]).
    fn usable_backward(
        &self,
        gate: &'static dyn Gate,
        dtype: DType,
        dir: &Path,
        e: &Entry,
    ) -> Option<(BackwardSpec, gla_codegen::BackwardRecord)> {
        self.usable_with(dir, e, || {
            let rec = e
                .backward
                .ok_or("a backward entry without a kernel-set record")?;
            let spec = rec
                .spec(gate, dtype)
                .map_err(|err| format!("its kernel set no longer validates: {err}"))?;
            let sha = self.source_sha(spec.id(), gate, || {
                gla_codegen::generate_backward(&spec).ok()
            });
            Ok(((spec, rec), spec.id(), sha))
        })
    }

    /// The nearest usable entry of `key` over every cache (each cache's nearest, then the nearest of those: timed
    /// first at equal distance, earlier caches first after that), with its cubin; `usable` rebuilds an entry's
    /// kernel or says it is stale.
    fn decide_with<T>(
        &self,
        key: &CacheKey,
        bucket: &Bucket,
        usable: impl Fn(&Path, &Entry) -> Option<T>,
    ) -> Option<(T, Arc<Vec<u8>>, bool, PathBuf, Bucket)> {
        let caches = self.caches.read().unwrap_or_else(|p| p.into_inner());
        let mut best: Option<(u32, bool, usize, &Entry, T)> = None;
        for (i, c) in caches.iter().enumerate() {
            // (`usable` memoises the source hash, so asking again for the winner is cheap.)
            let found = c.lookup(key, bucket, |e| usable(c.dir(), e).is_some());
            if let Some((e, k)) = found.and_then(|e| Some((e, usable(c.dir(), e)?))) {
                let rank = (e.bucket.distance(bucket), e.timing.is_none(), i);
                if best.as_ref().is_none_or(|b| rank < (b.0, b.1, b.2)) {
                    best = Some((rank.0, rank.1, rank.2, e, k));
                }
            }
        }
        let (_, untimed, i, e, k) = best?;
        match caches[i].cubin(e) {
            Ok(bytes) => Some((
                k,
                Arc::new(bytes),
                !untimed,
                caches[i].dir().to_path_buf(),
                e.bucket,
            )),
            Err(err) => {
                self.warn_once(
                    &format!("cubin:{err}"),
                    &format!("gla: tuning cache entry {} skipped: {err}", e.variant),
                );
                None
            }
        }
    }

    /// The memoised decision for (`key`, `bucket`) in `memo`, else `decide`'s, recorded as a hit or a miss.
    fn memoised<T: Clone>(
        &self,
        memo: &Mutex<HashMap<DecisionKey, Option<T>>>,
        key: CacheKey,
        bucket: Bucket,
        decide: impl FnOnce(&CacheKey, &Bucket) -> Option<T>,
    ) -> Option<T> {
        let dkey = (key, bucket);
        if let Some(p) = lock(memo).get(&dkey) {
            return p.clone();
        }
        let pick = decide(&dkey.0, &dkey.1);
        {
            let mut st = lock(&self.stats);
            match &pick {
                Some(_) => st.hits += 1,
                None => st.misses.push(dkey.clone()),
            }
        }
        lock(memo).insert(dkey, pick.clone());
        pick
    }

    /// The cached backward kernel set for a call of `gate` (`rows` = sequences × heads, `tokens` = the longest
    /// sequence), or None (the caller runs the default form, compiled). Memoised like [`Tuned::pick`].
    pub fn pick_backward(
        &self,
        gate: &'static dyn Gate,
        dtype: DType,
        dk: usize,
        dv: usize,
        rows: usize,
        tokens: usize,
    ) -> Option<BackwardPick> {
        let key = CacheKey::backward(gate, dtype, dk, dv);
        self.memoised(
            &self.bwd_decisions,
            key,
            Bucket::of(rows, tokens),
            |key, bucket| {
                let ((spec, rec), cubin, timed, cache, bucket) =
                    self.decide_with(key, bucket, |dir, e| {
                        self.usable_backward(gate, dtype, dir, e)
                    })?;
                Some(BackwardPick {
                    spec,
                    seg_chunks: rec.seg_chunks,
                    dq_dk_passes: rec.dq_dk_passes,
                    cubin,
                    timed,
                    cache,
                    bucket,
                })
            },
        )
    }

    /// The cached kernel of a backward pass made of a forward variant (`pass`: `Pass::Dv`, or `Pass::Dq` / `Pass::Dk`,
    /// a scalar gate's dq / dk; `dk`, `dv` the pass kernel's head dims) for a backward call (`rows`, `tokens` as
    /// [`Tuned::pick`]), or None (the caller compiles the default's).
    #[allow(clippy::too_many_arguments)]
    pub fn pick_backward_pass(
        &self,
        gate: &'static dyn Gate,
        dtype: DType,
        dk: usize,
        dv: usize,
        pass: gla_codegen::Pass,
        rows: usize,
        tokens: usize,
    ) -> Option<Pick> {
        let key = CacheKey::of_pass(gate, dtype, dk, dv, pass);
        self.pick_pass(key, gate, dtype, pass, rows, tokens)
    }

    /// The cached decode kernel of `gate` in `dtype` (its cubin: no NVRTC), or None (the caller compiles it).
    pub fn pick_decode(&self, gate: &'static dyn Gate, dtype: DType) -> Option<Arc<Vec<u8>>> {
        let key = CacheKey::decode(gate, dtype);
        self.memoised(&self.dec_decisions, key, Bucket::of(1, 1), |key, bucket| {
            let usable = |dir: &Path, e: &Entry| {
                self.usable_with(dir, e, || {
                    let id = gla_codegen::decode_id(gate, dtype);
                    let sha = self.source_sha(id.clone(), gate, || {
                        gla_codegen::generate_decode(gate, dtype).ok()
                    });
                    Ok(((), id, sha))
                })
            };
            self.decide_with(key, bucket, usable)
                .map(|(_, cubin, ..)| cubin)
        })
    }

    /// The cached variant for a call of `gate` (`rows` = sequences × heads, `tokens` = the longest sequence), or
    /// None (the caller runs the default variant).
    pub fn pick(
        &self,
        gate: &'static dyn Gate,
        dtype: DType,
        dk: usize,
        dv: usize,
        rows: usize,
        tokens: usize,
    ) -> Option<Pick> {
        let key = CacheKey::new(gate, dtype, dk, dv);
        self.pick_pass(key, gate, dtype, gla_codegen::Pass::Forward, rows, tokens)
    }

    /// [`Tuned::pick`] / [`Tuned::pick_backward_pass`]: the memoised decision for `key` among entries whose record is a
    /// `pass` variant of `gate` in `dtype`.
    fn pick_pass(
        &self,
        key: CacheKey,
        gate: &'static dyn Gate,
        dtype: DType,
        pass: gla_codegen::Pass,
        rows: usize,
        tokens: usize,
    ) -> Option<Pick> {
        self.memoised(
            &self.decisions,
            key,
            Bucket::of(rows, tokens),
            |key, bucket| {
                let (spec, cubin, timed, cache, bucket) =
                    self.decide_with(key, bucket, |dir, e| self.usable(gate, dtype, pass, dir, e))?;
                Some(Pick {
                    spec,
                    cubin,
                    timed,
                    cache,
                    bucket,
                })
            },
        )
    }
}

/// The bucket coordinates of a call: `rows` = sequences × heads, `tokens` = the longest sequence.
pub fn call_shape(q_shape: &[usize], cu_seqlens: Option<&[usize]>) -> Option<(usize, usize)> {
    let &[b, t, h, _] = q_shape else { return None };
    match cu_seqlens {
        None => Some((b * h, t)),
        Some(cu) if cu.len() >= 2 => {
            let longest = cu
                .windows(2)
                .map(|w| w[1].saturating_sub(w[0]))
                .max()
                .unwrap_or(0);
            Some(((cu.len() - 1) * h, longest))
        }
        Some(_) => None,
    }
}

#[cfg(test)]
mod tests {
    //! Dispatch on the CPU: caches built here with fake cubin bytes (a pick reads and hash-checks the bytes; only
    //! loading them needs a GPU).
    use super::*;
    use crate::cache::{Timing, Validators};
    use gla_codegen::fixtures::PER_KEY;
    use gla_codegen::{SpecRecord, Tiles};

    fn h200() -> GpuFacts {
        GpuFacts {
            name: "NVIDIA H200".into(),
            sm_count: 132,
            compute_capability: (9, 0),
            driver_version: 13000,
        }
    }

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("gla-tuned-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    fn spec(block_v: u32, warps: u32) -> KernelSpec {
        let tiles = Tiles {
            block_v,
            warps,
            producer_warps: 0,
            producer_groups: 1,
            wgmma: false,
            ctas_per_sm: 1,
        };
        KernelSpec::new(&PER_KEY, DType::BF16, 64, 16, 128, 128, false, tiles).unwrap()
    }

    fn entry(
        s: &KernelSpec,
        bucket: Bucket,
        gpu: Option<GpuFacts>,
        source_sha: Option<String>,
    ) -> Entry {
        let sha = source_sha.unwrap_or_else(|| {
            cache::sha256_hex(gla_codegen::generate(s).unwrap().source.as_bytes())
        });
        let timing = gpu.as_ref().map(|_| Timing {
            median_ms: 0.25,
            default_ms: Some(0.3),
            candidates: 3,
            strengths: vec![],
            all_ms: Default::default(),
        });
        Entry {
            key: CacheKey::new(&PER_KEY, DType::BF16, 128, 128),
            bucket,
            variant: s.id(),
            spec: Some(SpecRecord::of(s)),
            backward: None,
            cubin: String::new(),
            cubin_sha256: String::new(),
            validators: Validators {
                arch: "sm_90a".into(),
                nvrtc_version: (13, 0),
                source_sha256: sha,
                gpu,
            },
            timing,
        }
    }

    fn save(d: &Path, entries: Vec<Entry>) {
        let mut c = TuningCache::empty(d);
        for (i, e) in entries.into_iter().enumerate() {
            c.insert(e, format!("\x7fELF fake cubin {i}").into_bytes());
        }
        c.save().unwrap();
    }

    #[test]
    fn a_shipped_cache_of_another_gpu_model_is_left_out_quietly() {
        let d = dir("other-model");
        let s = spec(64, 8);
        let h100 = GpuFacts {
            name: "NVIDIA H100 80GB HBM3".into(),
            ..h200()
        };
        save(
            &d,
            vec![entry(
                &s,
                Bucket {
                    rows_log2: 7,
                    tokens_log2: 12,
                },
                Some(h100.clone()),
                None,
            )],
        );
        let c = TuningCache::open(&d).unwrap();
        assert!(
            for_another_gpu(&c, Some(&h200())),
            "tuned on an H100, asked on an H200"
        );
        assert!(!for_another_gpu(&c, Some(&h100)), "its own model");
        assert!(!for_another_gpu(&c, None), "no GPU: nothing to tell");
        let u = dir("other-model-untimed");
        save(
            &u,
            vec![entry(
                &s,
                Bucket {
                    rows_log2: 7,
                    tokens_log2: 12,
                },
                None,
                None,
            )],
        );
        assert!(
            !for_another_gpu(&TuningCache::open(&u).unwrap(), Some(&h200())),
            "untimed entries run anywhere"
        );
    }

    #[test]
    fn untimed_entry_is_picked_and_memoised() {
        let d = dir("untimed");
        let s = spec(64, 8);
        save(&d, vec![entry(&s, Bucket::of(1, 1), None, None)]);
        let t = Tuned::new(Some(h200()));
        assert_eq!(t.add(&d).unwrap(), 1);
        for _ in 0..3 {
            let p = t
                .pick(&PER_KEY, DType::BF16, 128, 128, 64, 4096)
                .expect("the untimed entry serves any bucket");
            assert_eq!(p.spec.id(), s.id());
            assert!(!p.timed && p.cubin.starts_with(b"\x7fELF"));
        }
        assert_eq!(t.stats().hits, 1, "one decision, memoised");
        // Another dtype or head dim is another key: a miss, recorded.
        assert!(t.pick(&PER_KEY, DType::F16, 128, 128, 64, 4096).is_none());
        assert!(t.pick(&PER_KEY, DType::BF16, 64, 64, 64, 4096).is_none());
        assert_eq!(t.stats().misses.len(), 2);
    }

    #[test]
    fn stale_entries_are_skipped_with_the_reason() {
        let d = dir("stale");
        let mut other = h200();
        other.name = "NVIDIA H100 80GB HBM3".into();
        other.sm_count = 132;
        let mut old_driver = h200();
        old_driver.driver_version = 12080;
        save(
            &d,
            vec![
                entry(&spec(64, 8), Bucket::of(16, 1024), Some(other), None),
                entry(&spec(32, 8), Bucket::of(32, 2048), Some(old_driver), None),
                entry(
                    &spec(128, 16),
                    Bucket::of(64, 4096),
                    None,
                    Some("0".repeat(64)),
                ),
            ],
        );
        let t = Tuned::new(Some(h200()));
        t.add(&d).unwrap();
        assert!(
            t.pick(&PER_KEY, DType::BF16, 128, 128, 64, 4096).is_none(),
            "no usable entry: the default runs"
        );
        let st = t.stats();
        assert_eq!(st.misses.len(), 1);
        let why = st.stale.join("\n");
        assert!(why.contains("this GPU is NVIDIA H200"), "{why}");
        assert!(why.contains("driver version 12080"), "{why}");
        assert!(why.contains("generated source changed"), "{why}");
    }

    #[test]
    fn nearest_bucket_and_timed_first() {
        let (d1, d2) = (dir("near1"), dir("near2"));
        let (small, large, untimed) = (spec(64, 8), spec(32, 8), spec(128, 16));
        save(&d1, vec![entry(&untimed, Bucket::of(16, 1024), None, None)]);
        save(
            &d2,
            vec![
                entry(&small, Bucket::of(16, 1024), Some(h200()), None),
                entry(&large, Bucket::of(512, 16384), Some(h200()), None),
            ],
        );
        let t = Tuned::new(Some(h200()));
        t.add(&d1).unwrap();
        t.add(&d2).unwrap();
        // At the small bucket the timed entry of the second cache beats the first cache's untimed one.
        let p = t.pick(&PER_KEY, DType::BF16, 128, 128, 16, 1000).unwrap();
        assert_eq!(
            (p.spec.id(), p.timed, p.cache.clone()),
            (small.id(), true, d2.clone())
        );
        // Far from both, the nearer bucket wins.
        assert_eq!(
            t.pick(&PER_KEY, DType::BF16, 128, 128, 400, 20000)
                .unwrap()
                .spec
                .id(),
            large.id()
        );
        assert_eq!(
            t.pick(&PER_KEY, DType::BF16, 128, 128, 8, 512)
                .unwrap()
                .spec
                .id(),
            small.id()
        );
    }

    #[test]
    fn a_changed_cubin_is_not_used() {
        let d = dir("tampered");
        let s = spec(64, 8);
        save(&d, vec![entry(&s, Bucket::of(1, 1), None, None)]);
        let c = TuningCache::open(&d).unwrap();
        std::fs::write(c.cubin_path(&c.entries()[0]), b"\x7fELF something else").unwrap();
        let t = Tuned::new(Some(h200()));
        t.add(&d).unwrap();
        assert!(t.pick(&PER_KEY, DType::BF16, 128, 128, 64, 4096).is_none());
    }

    #[test]
    fn call_shapes() {
        assert_eq!(call_shape(&[8, 4096, 16, 128], None), Some((128, 4096)));
        assert_eq!(
            call_shape(&[1, 100, 4, 64], Some(&[0, 10, 70, 100])),
            Some((12, 60))
        );
        assert_eq!(call_shape(&[1, 100, 4], None), None);
        assert_eq!(call_shape(&[1, 100, 4, 64], Some(&[0])), None);
    }

    fn bwd_entry(
        s: &BackwardSpec,
        seg: Option<u32>,
        bucket: Bucket,
        gpu: Option<GpuFacts>,
        sha: Option<String>,
    ) -> Entry {
        let sha = sha.unwrap_or_else(|| {
            cache::sha256_hex(gla_codegen::generate_backward(s).unwrap().as_bytes())
        });
        Entry {
            key: CacheKey::backward(&PER_KEY, DType::BF16, 128, 128),
            bucket,
            variant: s.id(),
            spec: None,
            // (a walk entry records a dq / dk choice: the tuner's, explicit)
            backward: Some(gla_codegen::BackwardRecord::of(
                s,
                seg,
                seg.map(|k| k % 16 == 0),
            )),
            cubin: String::new(),
            cubin_sha256: String::new(),
            validators: Validators {
                arch: "sm_90a".into(),
                nvrtc_version: (13, 0),
                source_sha256: sha,
                gpu: gpu.clone(),
            },
            timing: gpu.map(|_| Timing {
                median_ms: 1.2,
                default_ms: Some(8.3),
                candidates: 2,
                strengths: vec![],
                all_ms: Default::default(),
            }),
        }
    }

    #[test]
    fn backward_entries_are_their_own_key_and_carry_form_segments_and_dq_dk_choice() {
        use gla_codegen::BackwardForm;
        let d = dir("backward");
        let chunks = BackwardSpec::for_problem(&PER_KEY, DType::BF16, 128, 128).unwrap();
        let walks = chunks.with_form(BackwardForm::Walks).unwrap();
        save(
            &d,
            vec![
                entry(&spec(64, 8), Bucket::of(1, 1), None, None),
                bwd_entry(&chunks, None, Bucket::of(1, 1), None, None),
                bwd_entry(&walks, Some(16), Bucket::of(32, 16384), Some(h200()), None),
                // a timed entry whose source changed since: stale, skipped
                bwd_entry(
                    &walks,
                    Some(8),
                    Bucket::of(128, 4096),
                    Some(h200()),
                    Some("0".repeat(64)),
                ),
            ],
        );
        let t = Tuned::new(Some(h200()));
        assert_eq!(t.add(&d).unwrap(), 4);
        // The forward key does not see the backward entries, and the reverse.
        assert_eq!(
            t.pick(&PER_KEY, DType::BF16, 128, 128, 32, 16384)
                .unwrap()
                .spec
                .id(),
            spec(64, 8).id()
        );
        let p = t
            .pick_backward(&PER_KEY, DType::BF16, 128, 128, 32, 16384)
            .unwrap();
        assert_eq!(
            (p.spec.id(), p.seg_chunks, p.dq_dk_passes, p.timed),
            (walks.id(), Some(16), Some(true), true)
        );
        // Nearest usable bucket for 128 rows × 4096 tokens: the timed walk entry (distance 4) beats the untimed
        // chunk entry (distance 19) once the stale one at distance 0 is skipped.
        let p = t
            .pick_backward(&PER_KEY, DType::BF16, 128, 128, 128, 4096)
            .unwrap();
        assert_eq!(p.spec.id(), walks.id());
        assert_eq!(t.stats().stale.len(), 1, "{:?}", t.stats().stale);
        // f16 has no backward entry: a miss.
        assert!(t
            .pick_backward(&PER_KEY, DType::F16, 128, 128, 128, 4096)
            .is_none());
        // The index: a backward entry writes `backward`, not `spec`; a forward one the reverse.
        let json = std::fs::read_to_string(d.join(cache::INDEX_FILE)).unwrap();
        assert!(json.contains("\"pass\": \"bwd\"") && json.contains("\"form\": \"walks\""));
        let idx: serde_json::Value = serde_json::from_str(&json).unwrap();
        for e in idx["entries"].as_array().unwrap() {
            let bwd = e["key"]["pass"] == "bwd";
            assert_eq!(e.get("backward").is_some(), bwd);
            assert_eq!(e.get("spec").is_some(), !bwd);
        }
    }

    #[test]
    fn the_decode_kernel_is_found_by_gate_and_dtype_alone() {
        let d = dir("decode");
        let sha = |src: String| cache::sha256_hex(src.as_bytes());
        let entry = |dtype: DType, source_sha: String| Entry {
            key: CacheKey::decode(&PER_KEY, dtype),
            bucket: Bucket::of(1, 1),
            variant: gla_codegen::decode_id(&PER_KEY, dtype),
            spec: None,
            backward: None,
            cubin: String::new(),
            cubin_sha256: String::new(),
            validators: Validators {
                arch: "sm_90a".into(),
                nvrtc_version: (13, 0),
                source_sha256: source_sha,
                gpu: None,
            },
            timing: None,
        };
        save(
            &d,
            vec![
                entry(
                    DType::BF16,
                    sha(gla_codegen::generate_decode(&PER_KEY, DType::BF16).unwrap()),
                ),
                // f16's entry names an older source: stale
                entry(DType::F16, "0".repeat(64)),
            ],
        );
        let t = Tuned::new(Some(h200()));
        t.add(&d).unwrap();
        assert!(t
            .pick_decode(&PER_KEY, DType::BF16)
            .unwrap()
            .starts_with(b"\x7fELF"));
        assert!(t.pick_decode(&PER_KEY, DType::F16).is_none());
        assert!(t.pick_decode(&PER_KEY, DType::F32).is_none());
        assert_eq!(t.stats().stale.len(), 1);
        // Neither the forward nor the backward key sees it.
        assert!(t.pick(&PER_KEY, DType::BF16, 128, 128, 32, 1024).is_none());
    }

    #[test]
    fn the_dv_pass_is_found_by_its_own_key() {
        use gla_codegen::Pass;
        let d = dir("dv_pass");
        let fwd = KernelSpec::default_for(&PER_KEY, DType::BF16, 128, 128).unwrap();
        let dv = fwd.with_pass(gla_codegen::Pass::Dv).unwrap();
        let sha =
            |s: &KernelSpec| cache::sha256_hex(gla_codegen::generate(s).unwrap().source.as_bytes());
        let entry = |key: CacheKey, variant: String, source_sha: String| Entry {
            key,
            bucket: Bucket::of(1, 1),
            variant,
            spec: Some(SpecRecord::of(&fwd)),
            backward: None,
            cubin: String::new(),
            cubin_sha256: String::new(),
            validators: Validators {
                arch: "sm_90a".into(),
                nvrtc_version: (13, 0),
                source_sha256: source_sha,
                gpu: None,
            },
            timing: None,
        };
        save(
            &d,
            vec![
                entry(
                    CacheKey::of_pass(&PER_KEY, DType::BF16, 128, 128, Pass::Dv),
                    dv.id(),
                    sha(&dv),
                ),
                // a dv entry whose source is the forward's: stale (the variant it rebuilds is the dv pass)
                entry(
                    CacheKey::of_pass(&PER_KEY, DType::BF16, 64, 64, Pass::Dv),
                    fwd.id(),
                    sha(&fwd),
                ),
            ],
        );
        let t = Tuned::new(Some(h200()));
        t.add(&d).unwrap();
        let p = t
            .pick_backward_pass(&PER_KEY, DType::BF16, 128, 128, Pass::Dv, 32, 1024)
            .unwrap();
        assert_eq!(p.spec.id(), dv.id());
        assert!(p.cubin.starts_with(b"\x7fELF"));
        assert!(t
            .pick_backward_pass(&PER_KEY, DType::BF16, 64, 64, Pass::Dv, 32, 1024)
            .is_none());
        assert_eq!(t.stats().stale.len(), 1);
        // The forward key does not see it.
        assert!(t.pick(&PER_KEY, DType::BF16, 128, 128, 32, 1024).is_none());
    }

    #[test]
    fn the_dq_and_dk_passes_are_found_by_their_own_keys() {
        use gla_codegen::fixtures::PER_HEAD;
        use gla_codegen::Pass;
        let d = dir("dq_dk_passes");
        let fwd = KernelSpec::default_for(&PER_HEAD, DType::BF16, 128, 128).unwrap();
        let sha =
            |s: &KernelSpec| cache::sha256_hex(gla_codegen::generate(s).unwrap().source.as_bytes());
        let entry = |pass: Pass| {
            let s = fwd.with_pass(pass).unwrap();
            Entry {
                key: CacheKey::of_pass(&PER_HEAD, DType::BF16, 128, 128, pass),
                bucket: Bucket::of(1, 1),
                variant: s.id(),
                spec: Some(SpecRecord::of(&fwd)),
                backward: None,
                cubin: String::new(),
                cubin_sha256: String::new(),
                validators: Validators {
                    arch: "sm_90a".into(),
                    nvrtc_version: (13, 0),
                    source_sha256: sha(&s),
                    gpu: None,
                },
                timing: None,
            }
        };
        save(&d, vec![entry(Pass::Dq), entry(Pass::Dk)]);
        let t = Tuned::new(Some(h200()));
        t.add(&d).unwrap();
        for pass in [Pass::Dq, Pass::Dk] {
            let p = t
                .pick_backward_pass(&PER_HEAD, DType::BF16, 128, 128, pass, 32, 1024)
                .unwrap();
            assert_eq!(p.spec, fwd.with_pass(pass).unwrap());
            assert!(p.cubin.starts_with(b"\x7fELF"));
        }
        // Neither the forward nor the dv key sees them.
        assert!(t.pick(&PER_HEAD, DType::BF16, 128, 128, 32, 1024).is_none());
        assert!(t
            .pick_backward_pass(&PER_HEAD, DType::BF16, 128, 128, Pass::Dv, 32, 1024)
            .is_none());
        assert_eq!(t.stats().stale.len(), 0);
    }
}
