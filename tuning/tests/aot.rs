//! The no-GPU path on a tiny selection: `--gates gla --dims 64 --dtypes bf16` into a temporary cache. Needs NVRTC:
//! without it the test prints `SKIPPED` and passes, unless `GLA_REQUIRE_NVRTC=1`.
use gla_codegen::{generate, generate_backward, BackwardSpec, KernelSpec};
use gla_core::{DType, Gate};
use gla_runtime::cache::{sha256_hex, Bucket, CacheKey, TuningCache};
use gla_runtime::testing::nvrtc_or_skip;
use std::path::{Path, PathBuf};
use tuning::{aot, args};

fn temp_dir(name: &str) -> PathBuf {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let d = std::env::temp_dir().join(format!("gla-tuning-{name}-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn options(extra: &str, out: &Path) -> args::Options {
    let mut a: Vec<String> = extra.split_whitespace().map(String::from).collect();
    a.extend(["--out".to_string(), out.display().to_string()]);
    args::parse(&a).unwrap()
}

fn gates() -> Vec<&'static dyn Gate> {
    let _ = &gla::gates::Gla;
    tuning::select_gates(Some(&["gla".to_string()])).unwrap()
}

#[test]
fn aot_writes_untimed_entries_and_merges_on_rerun() {
    if !nvrtc_or_skip("aot_writes_untimed_entries_and_merges_on_rerun") {
        return;
    }
    let dir = temp_dir("aot");
    let out = dir.join("cache");
    let gate: &'static dyn Gate = &gla::gates::Gla;
    let spec = KernelSpec::default_for(gate, DType::BF16, 64, 64).unwrap();
    let bwd = BackwardSpec::default_for(gate, DType::BF16, 64, 64).unwrap();
    let dv = spec.with_pass(gla_codegen::Pass::Dv).unwrap();
    let pass = |p| KernelSpec::pass_default(gate, DType::BF16, 64, 64, p).unwrap();
    let (dq, dk) = (pass(gla_codegen::Pass::Dq), pass(gla_codegen::Pass::Dk));

    // First run: six compiles (the forward variant, the backward kernel set, its dv, dq and dk passes, the decode
    // step), six entries.
    let r = aot::run(&gates(), &options("--dims 64 --dtypes bf16", &out)).unwrap();
    assert!(r.ok(), "{:?}", r.rows);
    assert_eq!((r.rows.len(), r.entries), (6, 6));
    let mut ids: Vec<String> = r.rows.iter().map(|r| r.variant.clone()).collect();
    ids.sort();
    let mut want = vec![
        bwd.id(),
        gla_codegen::decode_id(gate, DType::BF16),
        spec.id(),
        dv.id(),
        dq.id(),
        dk.id(),
    ];
    want.sort();
    assert_eq!(ids, want);
    assert!(
        r.rows.iter().all(|r| r.compile_s.is_some()),
        "the first run compiles"
    );
    let cache = TuningCache::open(&out).unwrap();
    assert_eq!(cache.entries().len(), 6);
    let e = cache
        .entries()
        .iter()
        .find(|e| e.key.pass == "fwd")
        .unwrap();
    assert_eq!(e.key, CacheKey::new(gate, DType::BF16, 64, 64));
    assert_eq!(e.bucket, Bucket::of(1, 1));
    assert_eq!(e.variant, spec.id());
    assert!(!e.is_timed() && e.validators.gpu.is_none());
    assert_eq!(e.validators.arch, "sm_90a");
    assert_eq!(
        e.validators.nvrtc_version,
        gla_runtime::nvrtc::probe().unwrap().version
    );
    assert_eq!(
        e.validators.source_sha256,
        sha256_hex(generate(&spec).unwrap().source.as_bytes())
    );
    assert_eq!(
        e.spec.unwrap().spec(gate, DType::BF16).unwrap().id(),
        spec.id()
    );
    let cubin = cache.cubin(e).expect("the cubin verifies against its hash");
    assert!(cubin.starts_with(b"\x7fELF"));
    assert_eq!(sha256_hex(&cubin), e.cubin_sha256);
    // The backward entry: its own key, its kernel-set record, the backward source's hash, a cubin that verifies.
    let b = cache
        .entries()
        .iter()
        .find(|e| e.key.pass == "bwd")
        .unwrap();
    assert_eq!(b.key, CacheKey::backward(gate, DType::BF16, 64, 64));
    assert!(b.spec.is_none() && !b.is_timed());
    assert_eq!(
        b.backward.unwrap().spec(gate, DType::BF16).unwrap().id(),
        bwd.id()
    );
    assert_eq!(
        b.validators.source_sha256,
        sha256_hex(generate_backward(&bwd).unwrap().as_bytes())
    );
    assert!(cache.cubin(b).unwrap().starts_with(b"\x7fELF"));
    // The dv pass's entry: its own key, the forward variant's record, the dv pass's source hash.
    let d = cache.entries().iter().find(|e| e.key.pass == "dv").unwrap();
    assert_eq!(
        d.key,
        CacheKey::of_pass(gate, DType::BF16, 64, 64, gla_codegen::Pass::Dv)
    );
    assert_eq!(d.variant, dv.id());
    assert_eq!(
        d.spec.unwrap().spec(gate, DType::BF16).unwrap().id(),
        spec.id()
    );
    assert_eq!(
        d.validators.source_sha256,
        sha256_hex(generate(&dv).unwrap().source.as_bytes())
    );
    assert!(cache.cubin(d).unwrap().starts_with(b"\x7fELF"));
    // The decode entry: its key (no head dims), no record, the decode source's hash.
    let dec = cache
        .entries()
        .iter()
        .find(|e| e.key.pass == "dec")
        .unwrap();
    assert_eq!(dec.key, CacheKey::decode(gate, DType::BF16));
    assert!(dec.spec.is_none() && dec.backward.is_none());
    assert_eq!(
        dec.validators.source_sha256,
        sha256_hex(
            gla_codegen::generate_decode(gate, DType::BF16)
                .unwrap()
                .as_bytes()
        )
    );

    // Second run, same selection: the entries are up to date (no compile) and not duplicated.
    let r = aot::run(&gates(), &options("--dims 64 --dtypes bf16", &out)).unwrap();
    assert!(r.ok());
    assert_eq!((r.rows.len(), r.entries), (6, 6));
    assert!(
        r.rows.iter().all(|r| r.compile_s.is_none()),
        "an up-to-date entry is not recompiled"
    );
    assert_eq!(TuningCache::open(&out).unwrap().entries(), cache.entries());

    // A changed cubin on disk is not trusted: the next run compiles the variant again instead of keeping the entry.
    let path = cache.cubin_path(e);
    let good = std::fs::read(&path).unwrap();
    std::fs::write(&path, b"\x7fELF truncated").unwrap();
    let r = aot::run(&gates(), &options("--dims 64 --dtypes bf16", &out)).unwrap();
    let fwd_row = r.rows.iter().find(|r| r.variant == spec.id()).unwrap();
    assert!(
        r.ok() && fwd_row.compile_s.is_some(),
        "a cubin that fails its hash is recompiled"
    );
    assert_eq!(TuningCache::open(&out).unwrap().entries().len(), 6);
    std::fs::write(&path, good).unwrap();

    // A wider selection adds to the cache: bf16 kept (up to date), f16 added.
    let r = aot::run(&gates(), &options("--dims 64 --dtypes bf16,f16", &out)).unwrap();
    assert!(r.ok());
    assert_eq!(r.entries, 12);
    let both = TuningCache::open(&out).unwrap();
    let dtypes: Vec<&str> = both
        .entries()
        .iter()
        .map(|e| e.key.dtype.as_str())
        .collect();
    assert_eq!(dtypes.len(), 12);
    assert!(
        dtypes.contains(&"bf16") && dtypes.contains(&"f16"),
        "{dtypes:?}"
    );
    for e in both.entries() {
        both.cubin(e).unwrap();
    }

    // The binary, with no GPU: the same cache (up to date), the closing message, exit 0.
    if gla_runtime::Gla::new().is_err() {
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_autotune"))
            .args([
                "--gates", "gla", "--dims", "64", "--dtypes", "bf16,f16", "--out",
            ])
            .arg(&out)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&o.stdout);
        assert!(
            o.status.success(),
            "{stdout}\n{}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(stdout.contains("No GPU here"), "{stdout}");
        assert!(
            stdout.contains("timing needs a GPU: run autotune on a Hopper GPU"),
            "{stdout}"
        );
        assert!(stdout.contains(&spec.id()), "{stdout}");
        assert_eq!(TuningCache::open(&out).unwrap().entries().len(), 12);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_corrupt_cache_is_an_error_and_left_alone() {
    if !nvrtc_or_skip("a_corrupt_cache_is_an_error_and_left_alone") {
        return;
    }
    let dir = temp_dir("corrupt");
    std::fs::write(dir.join("index.json"), b"{\"format\": 1, \"entries\": [").unwrap();
    let e = aot::run(&gates(), &options("--dims 64 --dtypes bf16", &dir)).unwrap_err();
    assert!(e.contains("index.json") && e.contains("truncated"), "{e}");
    assert_eq!(
        std::fs::read(dir.join("index.json")).unwrap(),
        b"{\"format\": 1, \"entries\": ["
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn usage() {
    use std::process::ExitCode;
    assert_eq!(tuning::run(&["--help".to_string()]), ExitCode::SUCCESS);
    assert_eq!(
        tuning::run(&["--frobnicate".to_string()]),
        ExitCode::from(2)
    );
    let _ = &gla::gates::Gla;
    assert_eq!(
        tuning::run(&["--gates".to_string(), "nope".to_string()]),
        ExitCode::from(2)
    );
    // --plan over a selection that holds no variant compiles nothing and succeeds (NVRTC permitting).
    if gla_runtime::nvrtc::probe().is_ok() {
        assert_eq!(
            tuning::run(&[
                "--plan".to_string(),
                "--only".to_string(),
                "no-such-variant".to_string()
            ]),
            ExitCode::SUCCESS
        );
    }
}

/// `--restamp`: an entry whose current source compiles to its cubin byte for byte gets the new source hash; one
/// whose cubin differs from what the source compiles to (a changed kernel) stays stale and is listed.
#[test]
fn restamp_keeps_entries_whose_cubin_is_unchanged_and_lists_the_others() {
    if !nvrtc_or_skip("restamp_keeps_entries_whose_cubin_is_unchanged_and_lists_the_others") {
        return;
    }
    let dir = temp_dir("restamp");
    let out = dir.join("cache");
    let r = aot::run(&gates(), &options("--dims 64 --dtypes bf16", &out)).unwrap();
    assert!(r.ok() && r.entries == 6, "{:?}", r.rows);
    let gate: &'static dyn Gate = &gla::gates::Gla;
    let fwd_key = CacheKey::new(gate, DType::BF16, 64, 64);
    let dec_key = CacheKey::decode(gate, DType::BF16);
    // As if the templates had changed since: the forward entry's source hash is old but its cubin is what the
    // source compiles to; the decode entry's cubin is another kernel's.
    let mut cache = TuningCache::open(&out).unwrap();
    let fwd = cache
        .entries()
        .iter()
        .find(|e| e.key == fwd_key)
        .unwrap()
        .clone();
    let dec = cache
        .entries()
        .iter()
        .find(|e| e.key == dec_key)
        .unwrap()
        .clone();
    let fwd_cubin = cache.cubin(&fwd).unwrap();
    let mut old = fwd.clone();
    old.validators.source_sha256 = "0".repeat(64);
    cache.insert(old, fwd_cubin.clone());
    let mut changed = dec.clone();
    changed.validators.source_sha256 = "0".repeat(64);
    cache.insert(changed, fwd_cubin.clone());
    cache.save().unwrap();

    let rep = tuning::restamp::restamp(&out).unwrap();
    assert_eq!((rep.current, rep.restamped), (4, 1), "{rep:?}");
    assert_eq!(rep.stale.len(), 1, "{rep:?}");
    assert!(
        rep.stale[0].contains(&dec.variant) && rep.stale[0].contains("kernel changed"),
        "{rep:?}"
    );
    let cache = TuningCache::open(&out).unwrap();
    let e = cache.entries().iter().find(|e| e.key == fwd_key).unwrap();
    assert_eq!(e.validators.source_sha256, fwd.validators.source_sha256);
    assert_eq!(e.cubin_sha256, sha256_hex(&fwd_cubin));
    let e = cache.entries().iter().find(|e| e.key == dec_key).unwrap();
    assert_eq!(e.validators.source_sha256, "0".repeat(64));
    // A second run: five current, the changed one still stale.
    let rep = tuning::restamp::restamp(&out).unwrap();
    assert_eq!(
        (rep.current, rep.restamped, rep.stale.len()),
        (5, 0, 1),
        "{rep:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
