//! CPU tests of the tuning cache (`gla_runtime::cache`): round trip, every staleness rule of `check`, corrupt and
//! truncated files, concurrent writers, merging, bucket choice. No GPU, no NVRTC.

use gla_codegen::fixtures::{FIXED, PER_HEAD, PER_KEY};
use gla_codegen::{KernelSpec, SpecRecord};
use gla_core::{DType, Gate, GlaError};
use gla_runtime::cache::{
    check, replaces, sha256_hex, Bucket, CacheKey, Entry, Environment, GpuFacts, Index, Timing,
    TuningCache, Validators, FORMAT_VERSION, INDEX_FILE,
};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// A fresh, empty directory under the system temp dir, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        static N: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let p = std::env::temp_dir().join(format!(
            "gla-cache-test-{tag}-{}-{}-{nanos}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
    fn path(&self) -> &Path {
        &self.0
    }
    /// A cache directory inside (not created).
    fn sub(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

const SOURCE_SHA: &str = "5f1d7c0ffee0000000000000000000000000000000000000000000000000000a";

fn h200() -> GpuFacts {
    GpuFacts {
        name: "NVIDIA H200".into(),
        sm_count: 132,
        compute_capability: (9, 0),
        driver_version: 13000,
    }
}

fn env() -> Environment {
    Environment {
        nvrtc_version: Some((13, 0)),
        gpu: Some(h200()),
    }
}

fn key(gate: &dyn Gate) -> CacheKey {
    CacheKey::new(gate, DType::BF16, 128, 128)
}

/// An entry of the default variant of `gate` (bf16, d = 128) at `bucket`; timed on `gpu` if given.
fn entry(gate: &'static dyn Gate, bucket: Bucket, gpu: Option<GpuFacts>) -> Entry {
    let spec = KernelSpec::default_for(gate, DType::BF16, 128, 128).unwrap();
    let timing = gpu.as_ref().map(|_| Timing {
        median_ms: 0.3,
        default_ms: Some(0.31),
        candidates: 12,
        strengths: vec!["bench".into()],
        all_ms: Default::default(),
    });
    Entry {
        key: key(gate),
        bucket,
        variant: spec.id(),
        spec: Some(SpecRecord::of(&spec)),
        backward: None,
        cubin: String::new(),
        cubin_sha256: String::new(),
        validators: Validators {
            arch: "sm_90a".into(),
            nvrtc_version: (13, 0),
            source_sha256: SOURCE_SHA.into(),
            gpu,
        },
        timing,
    }
}

fn b(rows_log2: u32, tokens_log2: u32) -> Bucket {
    Bucket {
        rows_log2,
        tokens_log2,
    }
}

/// Fake cubin bytes, distinct per tag.
fn cubin(tag: &str) -> Vec<u8> {
    let mut v = b"\x7fELF fake cubin ".to_vec();
    v.extend_from_slice(tag.as_bytes());
    v.extend((0..300u32).map(|i| (i * 7) as u8));
    v
}

fn cache_error(r: gla_core::error::Result<impl std::fmt::Debug>) -> (String, String) {
    match r {
        Err(GlaError::Cache { path, msg }) => (path, msg),
        other => panic!("expected GlaError::Cache, got {other:?}"),
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Buckets

#[test]
fn bucket_of_edge_cases() {
    assert_eq!(Bucket::of(0, 0), b(0, 0));
    assert_eq!(Bucket::of(1, 1), b(0, 0));
    assert_eq!(Bucket::of(3, 3), b(2, 2));
    assert_eq!(Bucket::of(1024, 1024), b(10, 10));
    assert_eq!(Bucket::of(1025, 1025), b(11, 11));
    assert_eq!(Bucket::of(8 * 16, 4096), b(7, 12));
    assert_eq!(Bucket::of(0, 1025), b(0, 11));
}

#[test]
fn bucket_distance_grid_problem() {
    assert_eq!(b(4, 10).distance(&b(4, 10)), 0);
    assert_eq!(b(4, 10).distance(&b(6, 9)), 3);
    assert_eq!(b(6, 9).distance(&b(4, 10)), 3);
    let g = Bucket::grid();
    assert_eq!(g.len(), 9);
    assert_eq!(g.first(), Some(&b(5, 10)));
    assert_eq!(g.last(), Some(&b(9, 14)));
    assert!(g.windows(2).all(|w| w[0] < w[1]));
    for x in &g {
        let (bb, t, h) = x.problem();
        assert_eq!(Bucket::of(bb * h, t), *x, "{x:?} → {:?}", (bb, t, h));
        assert!(h <= 16);
    }
    assert_eq!(b(4, 10).problem(), (1, 1024, 16));
    assert_eq!(b(7, 12).problem(), (8, 4096, 16));
    assert_eq!(b(2, 3).problem(), (1, 8, 4));
}

#[test]
fn cache_key_fields() {
    let k = CacheKey::new(&PER_KEY, DType::F16, 100, 64);
    assert_eq!(k.gate, PER_KEY.name());
    assert_eq!(k.gate_hash, format!("{:016x}", PER_KEY.content_hash()));
    assert_eq!(k.gate_hash.len(), 16);
    assert_eq!(
        (k.pass.as_str(), k.dtype.as_str(), k.dk, k.dv),
        ("fwd", "f16", 100, 64)
    );
    assert_eq!(CacheKey::new(&PER_KEY, DType::BF16, 1, 1).dtype, "bf16");
    assert_eq!(CacheKey::new(&PER_KEY, DType::F32, 1, 1).dtype, "f32");
    assert_ne!(CacheKey::new(&PER_HEAD, DType::F16, 100, 64), k);
}

#[test]
fn lookup_picks_the_nearest_bucket() {
    let dir = TempDir::new("lookup");
    let mut c = TuningCache::empty(dir.path());
    let k = key(&PER_KEY);
    for x in [b(4, 10), b(6, 12), b(9, 14)] {
        c.insert(entry(&PER_KEY, x, Some(h200())), cubin(&format!("{x:?}")));
    }
    let all = |_: &Entry| true;
    assert_eq!(c.lookup(&k, &b(4, 10), all).unwrap().bucket, b(4, 10));
    assert_eq!(c.lookup(&k, &b(5, 12), all).unwrap().bucket, b(6, 12));
    assert_eq!(c.lookup(&k, &b(0, 0), all).unwrap().bucket, b(4, 10));
    assert_eq!(c.lookup(&k, &b(20, 20), all).unwrap().bucket, b(9, 14));
    // Tie at distance 2 between (4,10) and (6,12) from (5,11): the lower bucket wins.
    assert_eq!(c.lookup(&k, &b(5, 11), all).unwrap().bucket, b(4, 10));
    // The `usable` filter is respected.
    assert_eq!(
        c.lookup(&k, &b(5, 11), |e| e.bucket != b(4, 10))
            .unwrap()
            .bucket,
        b(6, 12)
    );
    assert!(c.lookup(&k, &b(5, 11), |_| false).is_none());
    // No entry for another key (gate, dtype, head dims).
    assert!(c.lookup(&key(&PER_HEAD), &b(4, 10), all).is_none());
    assert!(c
        .lookup(
            &CacheKey::new(&PER_KEY, DType::F16, 128, 128),
            &b(4, 10),
            all
        )
        .is_none());
    assert!(c
        .lookup(
            &CacheKey::new(&PER_KEY, DType::BF16, 64, 128),
            &b(4, 10),
            all
        )
        .is_none());
}

#[test]
fn lookup_ties_prefer_timed_entries() {
    let dir = TempDir::new("ties");
    let mut c = TuningCache::empty(dir.path());
    let k = key(&FIXED);
    // (4, 12) untimed and (6, 12) timed, both at distance 1 from (5, 12): the timed one wins despite being higher.
    c.insert(entry(&FIXED, b(4, 12), None), cubin("untimed"));
    c.insert(entry(&FIXED, b(6, 12), Some(h200())), cubin("timed"));
    assert_eq!(c.lookup(&k, &b(5, 12), |_| true).unwrap().bucket, b(6, 12));
    // Nearer still wins over timed.
    assert_eq!(c.lookup(&k, &b(4, 12), |_| true).unwrap().bucket, b(4, 12));
    // Both untimed at equal distance: the lower bucket.
    c.insert(entry(&FIXED, b(4, 14), None), cubin("u2"));
    c.insert(entry(&FIXED, b(6, 14), None), cubin("u3"));
    assert_eq!(c.lookup(&k, &b(5, 14), |_| true).unwrap().bucket, b(4, 14));
}

#[test]
fn lookup_between_buckets_takes_the_variant_most_of_them_chose() {
    let dir = TempDir::new("votes");
    let mut c = TuningCache::empty(dir.path());
    let k = key(&PER_KEY);
    let other = KernelSpec::default_for(&PER_KEY, DType::BF16, 64, 64)
        .unwrap()
        .id();
    let with = |x: Bucket, variant: Option<&str>| {
        let mut e = entry(&PER_KEY, x, Some(h200()));
        if let Some(v) = variant {
            e.variant = v.to_string();
        }
        e
    };
    // (6, 11) lies at distance 2 from four grid buckets; the lowest, (5, 10), chose another variant than the other
    // three: the three's variant wins, from its lowest bucket.
    c.insert(with(b(5, 10), Some(&other)), cubin("a"));
    for x in [b(5, 12), b(7, 10), b(7, 12)] {
        c.insert(with(x, None), cubin(&format!("{x:?}")));
    }
    let got = c.lookup(&k, &b(6, 11), |_| true).unwrap();
    assert_eq!(
        (got.bucket, got.variant.as_str()),
        (b(5, 12), entry(&PER_KEY, b(0, 0), None).variant.as_str())
    );
    // On the grid the bucket's own entry wins, whatever its neighbours chose.
    assert_eq!(c.lookup(&k, &b(5, 10), |_| true).unwrap().variant, other);
    // Two against two: the lower bucket, as before.
    c.insert(with(b(7, 12), Some(&other)), cubin("b"));
    assert_eq!(c.lookup(&k, &b(6, 11), |_| true).unwrap().bucket, b(5, 10));
    // Untimed entries do not vote against timed ones at the same distance.
    let dir2 = TempDir::new("votes2");
    let mut c2 = TuningCache::empty(dir2.path());
    c2.insert(with(b(5, 10), Some(&other)), cubin("c"));
    for x in [b(5, 12), b(7, 10)] {
        c2.insert(entry(&PER_KEY, x, None), cubin(&format!("u{x:?}")));
    }
    assert_eq!(c2.lookup(&k, &b(6, 11), |_| true).unwrap().variant, other);
}

#[test]
fn lookup_between_buckets_takes_the_winner_that_loses_least_at_each() {
    let dir = TempDir::new("losses");
    let mut c = TuningCache::empty(dir.path());
    let k = key(&PER_KEY);
    let a = entry(&PER_KEY, b(0, 0), None).variant;
    let other = KernelSpec::default_for(&PER_KEY, DType::BF16, 64, 64)
        .unwrap()
        .id();
    // (winner, its ms, the other variant's ms) at each bucket around (6, 11)
    let with = |x: Bucket, won_by_other: bool, win_ms: f64, lose_ms: f64| {
        let mut e = entry(&PER_KEY, x, Some(h200()));
        if won_by_other {
            e.variant = other.clone();
        }
        let t = e.timing.as_mut().unwrap();
        t.median_ms = win_ms;
        let loser = if won_by_other {
            a.clone()
        } else {
            other.clone()
        };
        t.all_ms = [(e.variant.clone(), win_ms), (loser, lose_ms)]
            .into_iter()
            .collect();
        e
    };
    // Three buckets chose `a` by a hair; the fourth chose `other` by 30 %: `other` loses least everywhere.
    c.insert(with(b(5, 10), true, 1.0, 1.3), cubin("o"));
    for x in [b(5, 12), b(7, 10), b(7, 12)] {
        c.insert(with(x, false, 1.0, 1.01), cubin(&format!("{x:?}")));
    }
    assert_eq!(c.lookup(&k, &b(6, 11), |_| true).unwrap().variant, other);
    // A bucket that did not time the other winner (no final runs for it) rules it out: the vote's choice stands.
    let dir2 = TempDir::new("losses2");
    let mut c2 = TuningCache::empty(dir2.path());
    c2.insert(with(b(5, 10), true, 1.0, 1.3), cubin("o2"));
    for x in [b(5, 12), b(7, 10), b(7, 12)] {
        let mut e = with(x, false, 1.0, 1.01);
        e.timing.as_mut().unwrap().all_ms.remove(&other);
        c2.insert(e, cubin(&format!("2{x:?}")));
    }
    assert_eq!(c2.lookup(&k, &b(6, 11), |_| true).unwrap().variant, a);
    // On the grid the bucket's own winner, whatever the losses elsewhere.
    assert_eq!(c.lookup(&k, &b(5, 12), |_| true).unwrap().variant, a);
}

// ---------------------------------------------------------------------------------------------------------------
// Round trip

#[test]
fn round_trip() {
    let dir = TempDir::new("round");
    let d = dir.sub("cache");
    let mut c = TuningCache::empty(&d);
    assert_eq!(c.dir(), d.as_path());
    assert!(c.entries().is_empty());
    assert!(!d.exists(), "nothing is written before save");
    let mut e1 = entry(&PER_KEY, b(7, 12), Some(h200()));
    // (every finalist's time survives the round trip: the lookup between buckets weighs them)
    e1.timing.as_mut().unwrap().all_ms = [
        (e1.variant.clone(), 0.3),
        ("another.variant".to_string(), 0.36),
    ]
    .into_iter()
    .collect();
    let e2 = entry(&PER_HEAD, b(4, 10), None);
    c.insert(e1.clone(), cubin("one"));
    c.insert(e2.clone(), cubin("two"));
    // Readable before save (from memory), and the cache named the cubins by their hash.
    let staged = c.lookup(&e1.key, &e1.bucket, |_| true).unwrap().clone();
    assert_eq!(staged.cubin_sha256, sha256_hex(&cubin("one")));
    assert_eq!(staged.cubin, format!("{}.cubin", staged.cubin_sha256));
    assert_eq!(c.cubin(&staged).unwrap(), cubin("one"));
    assert_eq!(c.save().unwrap(), 2);
    assert!(d.join(INDEX_FILE).is_file());
    assert!(d.join("cubins").join(&staged.cubin).is_file());

    let r = TuningCache::open(&d).unwrap();
    assert_eq!(r.entries().len(), 2);
    assert_eq!(r.index().format, FORMAT_VERSION);
    let got = r.lookup(&e1.key, &e1.bucket, |_| true).unwrap();
    assert_eq!(got, &staged);
    assert_eq!(got.timing, e1.timing);
    assert_eq!(got.validators, e1.validators);
    assert_eq!(r.cubin(got).unwrap(), cubin("one"));
    let got2 = r.lookup(&e2.key, &e2.bucket, |_| true).unwrap();
    assert_eq!(r.cubin(got2).unwrap(), cubin("two"));
    assert!(got2.timing.is_none() && got2.validators.gpu.is_none());
    // The spec record turns back into the variant.
    assert_eq!(
        got.spec.unwrap().spec(&PER_KEY, DType::BF16).unwrap().id(),
        got.variant
    );
    // The index is human-readable JSON of an `Index`.
    let text = std::fs::read_to_string(d.join(INDEX_FILE)).unwrap();
    assert!(text.contains("\"median_ms\"") && text.contains('\n'));
    let parsed: Index = serde_json::from_str(&text).unwrap();
    assert_eq!(parsed.entries, r.entries());
    // Saving again changes nothing.
    let mut r = r;
    assert_eq!(r.save().unwrap(), 2);
    assert_eq!(TuningCache::open(&d).unwrap().entries(), r.entries());
}

#[test]
fn same_cubin_shared_by_two_entries() {
    let dir = TempDir::new("shared");
    let mut c = TuningCache::empty(dir.path());
    c.insert(entry(&PER_KEY, b(4, 10), None), cubin("same"));
    c.insert(entry(&PER_KEY, b(5, 10), None), cubin("same"));
    assert_eq!(c.save().unwrap(), 2);
    let r = TuningCache::open(dir.path()).unwrap();
    assert_eq!(r.entries()[0].cubin, r.entries()[1].cubin);
    assert_eq!(
        std::fs::read_dir(dir.path().join("cubins"))
            .unwrap()
            .count(),
        1
    );
    for e in r.entries() {
        assert_eq!(r.cubin(e).unwrap(), cubin("same"));
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Staleness

#[test]
fn check_accepts_a_matching_entry() {
    let e = entry(&PER_KEY, b(7, 12), Some(h200()));
    assert_eq!(check(&e, &env(), SOURCE_SHA), Ok(()));
    // With no NVRTC in the process (a deployment), the cubin runs as it is.
    assert_eq!(
        check(
            &e,
            &Environment {
                nvrtc_version: None,
                ..env()
            },
            SOURCE_SHA
        ),
        Ok(())
    );
}

#[test]
fn check_rejects_every_stale_field() {
    let e = entry(&PER_KEY, b(7, 12), Some(h200()));
    let on = |g: GpuFacts| Environment {
        gpu: Some(g),
        ..env()
    };
    let cases: Vec<(&str, Environment, &str, Entry)> = vec![
        (
            "this GPU is NVIDIA H100",
            on(GpuFacts {
                name: "NVIDIA H100 80GB HBM3".into(),
                ..h200()
            }),
            SOURCE_SHA,
            e.clone(),
        ),
        (
            "SMs",
            on(GpuFacts {
                sm_count: 114,
                ..h200()
            }),
            SOURCE_SHA,
            e.clone(),
        ),
        (
            "compute capability",
            on(GpuFacts {
                compute_capability: (9, 1),
                ..h200()
            }),
            SOURCE_SHA,
            e.clone(),
        ),
        (
            "driver",
            on(GpuFacts {
                driver_version: 12080,
                ..h200()
            }),
            SOURCE_SHA,
            e.clone(),
        ),
        (
            "NVRTC",
            Environment {
                nvrtc_version: Some((13, 1)),
                ..env()
            },
            SOURCE_SHA,
            e.clone(),
        ),
        (
            "no GPU",
            Environment { gpu: None, ..env() },
            SOURCE_SHA,
            e.clone(),
        ),
        ("source", env(), "0000", e.clone()),
        (
            "sm_90a",
            env(),
            SOURCE_SHA,
            Entry {
                validators: Validators {
                    arch: "sm_100a".into(),
                    ..e.validators.clone()
                },
                ..e.clone()
            },
        ),
    ];
    for (what, env, sha, e) in cases {
        let reason = check(&e, &env, sha).expect_err(what);
        assert!(reason.contains(what), "{what}: {reason}");
    }
}

#[test]
fn untimed_entries_are_usable_on_any_gpu() {
    let e = entry(&PER_KEY, b(7, 12), None);
    for g in [
        h200(),
        GpuFacts {
            name: "NVIDIA H100 80GB HBM3".into(),
            sm_count: 132,
            ..h200()
        },
        GpuFacts {
            sm_count: 114,
            driver_version: 12080,
            ..h200()
        },
    ] {
        assert_eq!(
            check(
                &e,
                &Environment {
                    gpu: Some(g),
                    ..env()
                },
                SOURCE_SHA
            ),
            Ok(())
        );
    }
    assert_eq!(
        check(
            &e,
            &Environment {
                gpu: None,
                nvrtc_version: None
            },
            SOURCE_SHA
        ),
        Ok(())
    );
    // ... but not with another source, NVRTC or arch.
    assert!(check(&e, &env(), "other").is_err());
    assert!(check(
        &e,
        &Environment {
            nvrtc_version: Some((12, 8)),
            ..env()
        },
        SOURCE_SHA
    )
    .is_err());
}

#[test]
fn gpu_facts_from_device_info() {
    let d = gla_runtime::DeviceInfo {
        ordinal: 0,
        name: "NVIDIA H200".into(),
        compute_capability: (9, 0),
        sm_count: 132,
        driver_version: 13000,
        total_mem_bytes: 1 << 37,
        l2_bytes: 60 << 20,
        max_smem_per_block_optin: 227 * 1024,
    };
    assert_eq!(GpuFacts::from(&d), h200());
}

// ---------------------------------------------------------------------------------------------------------------
// Missing, corrupt and truncated files

fn saved_cache(tag: &str) -> (TempDir, Entry) {
    let dir = TempDir::new(tag);
    let mut c = TuningCache::empty(dir.path());
    c.insert(entry(&PER_KEY, b(7, 12), Some(h200())), cubin("a"));
    c.insert(entry(&PER_KEY, b(8, 12), Some(h200())), cubin("b"));
    c.insert(entry(&FIXED, b(4, 10), None), cubin("c"));
    c.save().unwrap();
    let e = c.entries()[0].clone();
    (dir, e)
}

#[test]
fn missing_directory_or_index() {
    let dir = TempDir::new("missing");
    let (path, msg) = cache_error(TuningCache::open(&dir.sub("nope")));
    assert!(
        path.ends_with("nope") && msg.contains("missing"),
        "{path}: {msg}"
    );
    let (path, msg) = cache_error(TuningCache::open(dir.path()));
    assert!(
        path.ends_with(INDEX_FILE) && msg.contains("missing"),
        "{path}: {msg}"
    );
    assert!(TuningCache::open_or_empty(dir.path())
        .unwrap()
        .entries()
        .is_empty());
}

#[test]
fn corrupt_index() {
    let (dir, _) = saved_cache("garbage");
    let idx = dir.path().join(INDEX_FILE);
    for garbage in [
        &b"\x00\x01not json at all\xff"[..],
        b"",
        b"[1, 2, 3]",
        b"{\"format\": 1, \"entries\": 7}",
        b"null",
    ] {
        std::fs::write(&idx, garbage).unwrap();
        let (path, msg) = cache_error(TuningCache::open(dir.path()));
        assert!(path.ends_with(INDEX_FILE), "{path}");
        assert!(msg.contains("index"), "{msg}");
        // save() refuses to write over what it cannot read.
        let mut c = TuningCache::empty(dir.path());
        c.insert(entry(&PER_HEAD, b(4, 10), None), cubin("x"));
        let (path, _) = cache_error(c.save());
        assert!(path.ends_with(INDEX_FILE), "{path}");
        assert_eq!(std::fs::read(&idx).unwrap(), garbage);
    }
}

#[test]
fn truncated_index() {
    let (dir, _) = saved_cache("trunc");
    let idx = dir.path().join(INDEX_FILE);
    let full = std::fs::read(&idx).unwrap();
    for len in [full.len() / 2, full.len() - 3, 1] {
        std::fs::write(&idx, &full[..len]).unwrap();
        let (path, msg) = cache_error(TuningCache::open(dir.path()));
        assert!(path.ends_with(INDEX_FILE), "{path}");
        assert!(
            msg.contains("truncated") || msg.contains("corrupt"),
            "{len}: {msg}"
        );
    }
    std::fs::write(&idx, &full).unwrap();
    assert_eq!(TuningCache::open(dir.path()).unwrap().entries().len(), 3);
}

#[test]
fn wrong_format_version() {
    let (dir, _) = saved_cache("format");
    let idx = dir.path().join(INDEX_FILE);
    let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(&idx).unwrap()).unwrap();
    v["format"] = serde_json::json!(FORMAT_VERSION + 1);
    std::fs::write(&idx, serde_json::to_vec(&v).unwrap()).unwrap();
    let (path, msg) = cache_error(TuningCache::open(dir.path()));
    assert!(
        path.ends_with(INDEX_FILE) && msg.contains("format version 2"),
        "{path}: {msg}"
    );
    v.as_object_mut().unwrap().remove("format");
    std::fs::write(&idx, serde_json::to_vec(&v).unwrap()).unwrap();
    let (_, msg) = cache_error(TuningCache::open(dir.path()));
    assert!(msg.contains("format"), "{msg}");
}

#[test]
fn duplicate_entries_and_bad_cubin_names() {
    let (dir, _) = saved_cache("dup");
    let idx = dir.path().join(INDEX_FILE);
    let good: Index = serde_json::from_slice(&std::fs::read(&idx).unwrap()).unwrap();
    let mut dup = good.clone();
    dup.entries.push(dup.entries[0].clone());
    std::fs::write(&idx, serde_json::to_vec(&dup).unwrap()).unwrap();
    let (path, msg) = cache_error(TuningCache::open(dir.path()));
    assert!(
        path.ends_with(INDEX_FILE) && msg.contains("two entries"),
        "{path}: {msg}"
    );
    let mut escape = good.clone();
    escape.entries[0].cubin = "../../etc/passwd".into();
    std::fs::write(&idx, serde_json::to_vec(&escape).unwrap()).unwrap();
    let (_, msg) = cache_error(TuningCache::open(dir.path()));
    assert!(msg.contains("cubin"), "{msg}");
}

#[test]
fn changed_cubin_is_a_hash_mismatch() {
    let (dir, e) = saved_cache("changed");
    let c = TuningCache::open(dir.path()).unwrap();
    let e = c.lookup(&e.key, &e.bucket, |_| true).unwrap();
    let file = dir.path().join("cubins").join(&e.cubin);
    let mut bytes = std::fs::read(&file).unwrap();
    bytes[20] ^= 1;
    std::fs::write(&file, &bytes).unwrap();
    let (path, msg) = cache_error(c.cubin(e));
    assert!(
        path.ends_with(&e.cubin) && msg.contains("SHA-256"),
        "{path}: {msg}"
    );
    // Truncated likewise.
    std::fs::write(&file, &bytes[..10]).unwrap();
    let (_, msg) = cache_error(c.cubin(e));
    assert!(msg.contains("SHA-256"), "{msg}");
    // The other entries still read.
    for other in c.entries().iter().filter(|x| x.cubin != e.cubin) {
        c.cubin(other).unwrap();
    }
}

#[test]
fn saving_an_entry_again_repairs_its_damaged_cubin() {
    let (dir, _) = saved_cache("repair");
    let c = TuningCache::open(dir.path()).unwrap();
    let e = c.entries()[0].clone();
    let file = dir.path().join("cubins").join(&e.cubin);
    let good = std::fs::read(&file).unwrap();
    std::fs::write(&file, b"damaged").unwrap();
    assert!(c.cubin(&e).is_err());
    // The same entry, inserted again with its bytes and saved: the index is unchanged, the file is rewritten.
    let mut again = TuningCache::open(dir.path()).unwrap();
    again.insert(e.clone(), good.clone());
    again.save().unwrap();
    let reread = TuningCache::open(dir.path()).unwrap();
    assert_eq!(reread.entries(), c.entries());
    assert_eq!(reread.cubin(&e).unwrap(), good);
}

#[test]
fn missing_cubin_file() {
    let (dir, e) = saved_cache("nocubin");
    let c = TuningCache::open(dir.path()).unwrap();
    let e = c.lookup(&e.key, &e.bucket, |_| true).unwrap();
    std::fs::remove_file(dir.path().join("cubins").join(&e.cubin)).unwrap();
    let (path, msg) = cache_error(c.cubin(e));
    assert!(
        path.ends_with(&e.cubin) && msg.contains("missing"),
        "{path}: {msg}"
    );
    // Merging from it fails on that cubin and merges nothing.
    let other_dir = TempDir::new("nocubin-into");
    let mut into = TuningCache::empty(other_dir.path());
    let (path, _) = cache_error(into.merge(&c));
    assert!(path.ends_with(&e.cubin), "{path}");
    assert!(into.entries().is_empty());
}

// ---------------------------------------------------------------------------------------------------------------
// Replacement rule, merging, concurrent writers

#[test]
fn replacement_rule_on_insert() {
    let dir = TempDir::new("replace");
    let mut c = TuningCache::empty(dir.path());
    let at = b(5, 11);
    let k = key(&PER_KEY);
    let current = |c: &TuningCache| c.cubin(c.lookup(&k, &at, |_| true).unwrap()).unwrap();
    c.insert(entry(&PER_KEY, at, None), cubin("untimed"));
    // An untimed entry replaces an untimed one.
    c.insert(entry(&PER_KEY, at, None), cubin("untimed2"));
    assert_eq!(current(&c), cubin("untimed2"));
    // A timed one replaces an untimed one.
    c.insert(entry(&PER_KEY, at, Some(h200())), cubin("timed"));
    assert_eq!(current(&c), cubin("timed"));
    // An untimed one never replaces a timed one.
    assert!(!c.accepts(&entry(&PER_KEY, at, None)));
    c.insert(entry(&PER_KEY, at, None), cubin("untimed3"));
    assert_eq!(current(&c), cubin("timed"));
    // A timed one of the same GPU facts replaces it (a newer measurement) ...
    c.insert(entry(&PER_KEY, at, Some(h200())), cubin("timed2"));
    assert_eq!(current(&c), cubin("timed2"));
    // ... one of another GPU does not.
    let h100 = GpuFacts {
        name: "NVIDIA H100".into(),
        sm_count: 132,
        ..h200()
    };
    c.insert(entry(&PER_KEY, at, Some(h100.clone())), cubin("h100"));
    assert_eq!(current(&c), cubin("timed2"));
    assert_eq!(c.entries().len(), 1);
    assert!(replaces(
        &entry(&PER_KEY, at, Some(h100.clone())),
        &entry(&PER_KEY, at, None)
    ));
    assert!(!replaces(
        &entry(&PER_KEY, at, None),
        &entry(&PER_KEY, at, Some(h100))
    ));
}

#[test]
fn merge_two_caches() {
    let dir = TempDir::new("merge");
    let h100 = GpuFacts {
        name: "NVIDIA H100".into(),
        ..h200()
    };
    // a: untimed at (4,10), timed H200 at (5,10), only-a at (6,10), timed H200 at (7,10).
    let mut a = TuningCache::empty(&dir.sub("a"));
    a.insert(entry(&PER_KEY, b(4, 10), None), cubin("a4"));
    a.insert(entry(&PER_KEY, b(5, 10), Some(h200())), cubin("a5"));
    a.insert(entry(&PER_KEY, b(6, 10), None), cubin("a6"));
    a.insert(entry(&PER_KEY, b(7, 10), Some(h200())), cubin("a7"));
    a.save().unwrap();
    // b: timed H200 at (4,10), untimed at (5,10), only-b at (8,10), timed H100 at (7,10).
    let mut bb = TuningCache::empty(&dir.sub("b"));
    bb.insert(entry(&PER_KEY, b(4, 10), Some(h200())), cubin("b4"));
    bb.insert(entry(&PER_KEY, b(5, 10), None), cubin("b5"));
    bb.insert(entry(&PER_KEY, b(8, 10), None), cubin("b8"));
    bb.insert(entry(&PER_KEY, b(7, 10), Some(h100)), cubin("b7"));
    bb.save().unwrap();
    let (a, bb) = (
        TuningCache::open(&dir.sub("a")).unwrap(),
        TuningCache::open(&dir.sub("b")).unwrap(),
    );
    let k = key(&PER_KEY);
    let bytes = |c: &TuningCache, x: Bucket| {
        c.cubin(
            c.lookup(&k, &x, |_| true)
                .filter(|e| e.bucket == x)
                .unwrap(),
        )
        .unwrap()
    };

    // b into a, saved to a third directory.
    let mut ab = TuningCache::empty(&dir.sub("ab"));
    ab.merge(&a).unwrap();
    ab.merge(&bb).unwrap();
    assert_eq!(ab.save().unwrap(), 5);
    let ab = TuningCache::open(&dir.sub("ab")).unwrap();
    assert_eq!(bytes(&ab, b(4, 10)), cubin("b4"), "timed replaces untimed");
    assert_eq!(
        bytes(&ab, b(5, 10)),
        cubin("a5"),
        "untimed never replaces timed"
    );
    assert_eq!(bytes(&ab, b(6, 10)), cubin("a6"));
    assert_eq!(
        bytes(&ab, b(7, 10)),
        cubin("a7"),
        "timed on another GPU does not replace"
    );
    assert_eq!(bytes(&ab, b(8, 10)), cubin("b8"));

    // a into b, in place.
    let mut ba = TuningCache::open(&dir.sub("b")).unwrap();
    ba.merge(&a).unwrap();
    assert_eq!(ba.save().unwrap(), 5);
    let ba = TuningCache::open(&dir.sub("b")).unwrap();
    assert_eq!(bytes(&ba, b(4, 10)), cubin("b4"));
    assert_eq!(bytes(&ba, b(5, 10)), cubin("a5"));
    assert_eq!(bytes(&ba, b(6, 10)), cubin("a6"));
    assert_eq!(
        bytes(&ba, b(7, 10)),
        cubin("b7"),
        "the H100 entry already there stays"
    );
    assert_eq!(bytes(&ba, b(8, 10)), cubin("b8"));
}

#[test]
fn save_merges_with_what_another_writer_saved() {
    let dir = TempDir::new("stale-writer");
    let at = b(6, 12);
    let k = key(&PER_HEAD);
    let mut first = TuningCache::empty(dir.path());
    first.insert(entry(&PER_HEAD, at, None), cubin("old"));
    first.save().unwrap();
    // Two handles read the same state; one saves a newer timed entry, the other then saves something else.
    let mut x = TuningCache::open(dir.path()).unwrap();
    let mut y = TuningCache::open(dir.path()).unwrap();
    x.insert(entry(&PER_HEAD, at, Some(h200())), cubin("new"));
    x.save().unwrap();
    y.insert(entry(&PER_HEAD, b(7, 12), None), cubin("other"));
    assert_eq!(y.save().unwrap(), 2);
    let r = TuningCache::open(dir.path()).unwrap();
    assert_eq!(
        r.cubin(r.lookup(&k, &at, |_| true).unwrap()).unwrap(),
        cubin("new"),
        "y's stale copy did not win"
    );
    assert_eq!(
        y.entries(),
        r.entries(),
        "after save a cache holds what was written"
    );
}

#[test]
fn concurrent_writers_lose_nothing() {
    let dir = TempDir::new("concurrent");
    let d = dir.sub("shared-cache");
    let gates: [&'static dyn Gate; 3] = [&PER_KEY, &PER_HEAD, &FIXED];
    std::thread::scope(|s| {
        for t in 0..8u32 {
            let d = d.clone();
            s.spawn(move || {
                // Each writer saves several times, so that saves interleave.
                for round in 0..3u32 {
                    let mut c = TuningCache::empty(&d);
                    for g in gates {
                        let gpu = (t % 2 == 0).then(h200);
                        c.insert(
                            entry(g, b(t, 10 + round), gpu),
                            cubin(&format!("{t}-{round}-{}", g.name())),
                        );
                    }
                    c.save().unwrap();
                }
            });
        }
    });
    let r = TuningCache::open(&d).unwrap();
    assert_eq!(r.entries().len(), 8 * 3 * 3);
    for t in 0..8u32 {
        for round in 0..3u32 {
            for g in gates {
                let e = r.lookup(&key(g), &b(t, 10 + round), |_| true).unwrap();
                assert_eq!(e.bucket, b(t, 10 + round));
                assert_eq!(
                    r.cubin(e).unwrap(),
                    cubin(&format!("{t}-{round}-{}", g.name()))
                );
            }
        }
    }
    let text = std::fs::read(d.join(INDEX_FILE)).unwrap();
    serde_json::from_slice::<Index>(&text).unwrap();
    // No temporary files left behind.
    let stray: Vec<_> = std::fs::read_dir(&d)
        .unwrap()
        .chain(std::fs::read_dir(d.join("cubins")).unwrap())
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp."))
        .collect();
    assert!(stray.is_empty(), "{stray:?}");
}
