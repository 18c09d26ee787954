//! The tuning cache: which kernel variant to run for a (gate, pass, dtype, d_k, d_v) key and a problem-size
//! [`Bucket`], with the variant's compiled cubin, so that a deployment needs neither tuning nor NVRTC.
//!
//! A cache is a directory:
//!
//! ```text
//! <dir>/index.json              the human-readable index (serde_json, pretty): an [`Index`] of [`Entry`]s
//! <dir>/cubins/<sha256>.cubin   the cubins, content-addressed (file name = SHA-256 of the bytes)
//! <dir>/.lock                   the file [`TuningCache::save`] holds an exclusive lock on while it writes
//! ```
//!
//! Each entry carries [`Validators`] (arch, NVRTC version, SHA-256 of the generated CUDA source, and for a timed
//! entry the GPU it was timed on); [`check`] says whether an entry may be used in the current [`Environment`].
//! Every failure is a typed [`GlaError::Cache`] naming the file and what is wrong, never a panic: a missing or
//! corrupt index in [`TuningCache::open`], a missing cubin or one whose bytes no longer match the index in
//! [`TuningCache::cubin`]. A caller that finds an entry stale or corrupt skips it (and the runtime falls back to its
//! default variant) — a wrong kernel is never run.
//!
//! Writes are atomic (temp file + rename, for the cubins and the index) and serialised between processes and
//! threads by an exclusive lock on `.lock` (the `fs4` crate; `flock` on Unix, which also excludes two handles of
//! one process). [`TuningCache::save`] merges into the index on disk under that lock, so concurrent tuners never
//! lose each other's entries; caches of several runs or machines merge with [`TuningCache::merge`]. The rule for
//! two entries of one (key, bucket) is [`replaces`].
//!
//! Host-only: nothing here needs a GPU or NVRTC.

use crate::device::DeviceInfo;
use gla_codegen::{BackwardRecord, SpecRecord};
use gla_core::error::Result;
use gla_core::{DType, Gate, GlaError};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The index's file name in a cache directory.
pub const INDEX_FILE: &str = "index.json";
/// The folder of the cubins in a cache directory.
pub const CUBIN_DIR: &str = "cubins";
/// The lock file [`TuningCache::save`] locks exclusively in a cache directory.
pub const LOCK_FILE: &str = ".lock";
/// The index format this version reads and writes ([`Index::format`]). An index of another format is an error,
/// never misread.
pub const FORMAT_VERSION: u32 = 1;

/// A problem-size bucket: `rows = N·H` (sequences × heads) and `tokens` (the longest sequence's length), each
/// rounded up to a power of two and stored as its log2. A cache holds at most one entry per (key, bucket); a call
/// uses the entry of the nearest bucket ([`TuningCache::lookup`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Bucket {
    /// log2 of `N·H` rounded up to a power of two.
    pub rows_log2: u32,
    /// log2 of the longest sequence's length rounded up to a power of two.
    pub tokens_log2: u32,
}

/// ⌈log2 n⌉, with 0 and 1 → 0.
fn ceil_log2(n: usize) -> u32 {
    n.max(1).next_power_of_two().trailing_zeros()
}

impl Bucket {
    /// The bucket of a problem of `rows = N·H` (sequences × heads) and `tokens` = the longest sequence's length;
    /// each is rounded UP to a power of two (0 and 1 → 2^0, 3 → 2^2, 1025 → 2^11).
    pub fn of(rows: usize, tokens: usize) -> Bucket {
        Bucket {
            rows_log2: ceil_log2(rows),
            tokens_log2: ceil_log2(tokens),
        }
    }

    /// The L1 distance of the two buckets in log2 steps: `|Δ rows_log2| + |Δ tokens_log2|`.
    pub fn distance(&self, other: &Bucket) -> u32 {
        self.rows_log2.abs_diff(other.rows_log2) + self.tokens_log2.abs_diff(other.tokens_log2)
    }

    /// The default grid the tuner times: rows 2^5, 2^7, 2^9 (32, 128, 512 sequence-heads) × tokens 2^10, 2^12, 2^14
    /// (1024, 4096, 16384), 9 buckets, rows-major in ascending order. Every other power of two: a call's bucket is at
    /// most 2 steps from one of them (the nearest wins), and the tuner's time stays a few seconds a key.
    pub fn grid() -> Vec<Bucket> {
        [5, 7, 9]
            .into_iter()
            .flat_map(|r| {
                [10, 12, 14].into_iter().map(move |t| Bucket {
                    rows_log2: r,
                    tokens_log2: t,
                })
            })
            .collect()
    }

    /// A problem `(B, T, H)` of this bucket for timing: `H = min(rows, 16)`, `B = rows / H`, `T = 2^tokens_log2`
    /// (`rows = 2^rows_log2`).
    pub fn problem(&self) -> (usize, usize, usize) {
        let rows = 1usize << self.rows_log2;
        let h = rows.min(16);
        (rows / h, 1usize << self.tokens_log2, h)
    }

    /// `rows = 2^rows_log2` and `tokens = 2^tokens_log2`, the bucket's largest problem.
    pub fn rows_tokens(&self) -> (usize, usize) {
        (1usize << self.rows_log2, 1usize << self.tokens_log2)
    }
}

/// What an entry is for, apart from the problem size: the gate (by name and content hash), the pass, the dtype and
/// the actual head dims.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct CacheKey {
    /// The gate's name ([`Gate::name`]), for people reading the index.
    pub gate: String,
    /// `format!("{:016x}", gate.content_hash())`: a gate whose definition changed gets another key.
    pub gate_hash: String,
    /// The pass: `"fwd"`, `"bwd"`, `"dv"` (the backward's dv pass, a forward record) or `"dec"` (the decode step: no
    /// record beside the key, d_k = d_v = 0).
    pub pass: String,
    /// The dtype as [`DType`]'s `Display` writes it: `"bf16"`, `"f16"` or `"f32"`.
    pub dtype: String,
    /// The problem's d_k (not the specialised dim).
    pub dk: u32,
    /// The problem's d_v (not the specialised dim).
    pub dv: u32,
}

impl CacheKey {
    /// The forward pass's key of `gate`, `dtype` and head dims `dk`, `dv`.
    pub fn new(gate: &dyn Gate, dtype: DType, dk: usize, dv: usize) -> CacheKey {
        CacheKey {
            gate: gate.name().to_string(),
            gate_hash: format!("{:016x}", gate.content_hash()),
            pass: "fwd".to_string(),
            dtype: dtype.to_string(),
            dk: dk as u32,
            dv: dv as u32,
        }
    }
}

impl CacheKey {
    /// The decode step's key (pass `"dec"`) of `gate` and `dtype`: one kernel for every head dim (d_k = d_v = 0 here).
    pub fn decode(gate: &dyn Gate, dtype: DType) -> CacheKey {
        CacheKey {
            pass: "dec".to_string(),
            ..CacheKey::new(gate, dtype, 0, 0)
        }
    }

    /// The key of a backward pass made of a forward variant (`gla_codegen::Pass::Dv`, `Dq`, `Dk`: pass `"dv"`,
    /// `"dq"`, `"dk"`, the record the forward variant's) of `gate`, `dtype` and the pass kernel's head dims `dk`, `dv`
    /// (a dq / dk pass has the problem's swapped: q ← dO). `Pass::Forward` gives [`CacheKey::new`]'s.
    pub fn of_pass(
        gate: &dyn Gate,
        dtype: DType,
        dk: usize,
        dv: usize,
        pass: gla_codegen::Pass,
    ) -> CacheKey {
        let label = match pass {
            gla_codegen::Pass::Forward => "fwd",
            gla_codegen::Pass::Dv => "dv",
            gla_codegen::Pass::Dq => "dq",
            gla_codegen::Pass::Dk => "dk",
        };
        CacheKey {
            pass: label.to_string(),
            ..CacheKey::new(gate, dtype, dk, dv)
        }
    }

    /// The backward pass's key (pass `"bwd"`) of `gate`, `dtype` and head dims `dk`, `dv`.
    pub fn backward(gate: &dyn Gate, dtype: DType, dk: usize, dv: usize) -> CacheKey {
        CacheKey {
            pass: "bwd".to_string(),
            ..CacheKey::new(gate, dtype, dk, dv)
        }
    }
}

impl std::fmt::Display for CacheKey {
    /// e.g. `gla#5eed000000000001.fwd.bf16.k128.v128`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}#{}.{}.{}.k{}.v{}",
            self.gate, self.gate_hash, self.pass, self.dtype, self.dk, self.dv
        )
    }
}

/// The facts of the GPU an entry was timed on; a timed entry is used only on a GPU with the same facts ([`check`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GpuFacts {
    /// The device name, e.g. `NVIDIA H200`.
    pub name: String,
    /// Streaming multiprocessors.
    pub sm_count: u32,
    /// `(major, minor)`, e.g. `(9, 0)`.
    pub compute_capability: (i32, i32),
    /// The driver's CUDA version, e.g. 13000.
    pub driver_version: i32,
}

impl From<&DeviceInfo> for GpuFacts {
    /// The facts of an opened device ([`crate::Gpu::info`]).
    fn from(d: &DeviceInfo) -> GpuFacts {
        GpuFacts {
            name: d.name.clone(),
            sm_count: d.sm_count,
            compute_capability: d.compute_capability,
            driver_version: d.driver_version,
        }
    }
}

/// What an entry was built and timed with; [`check`] compares them with the current [`Environment`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Validators {
    /// The cubin's architecture: [`crate::nvrtc::ARCH`] (`"sm_90a"`).
    pub arch: String,
    /// The NVRTC version that compiled the cubin.
    pub nvrtc_version: (i32, i32),
    /// SHA-256 ([`sha256_hex`]) of the generated CUDA source the cubin was compiled from: a change of codegen or
    /// gate that changes the kernel changes it.
    pub source_sha256: String,
    /// The GPU the entry was timed on; `None`: compiled ahead of time with no GPU (untimed).
    pub gpu: Option<GpuFacts>,
}

/// How the entry's variant was chosen on the GPU.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Timing {
    /// The winner's median time (the worst case over `strengths` where the speed depends on the gate's values).
    pub median_ms: f64,
    /// The default variant's ([`gla_codegen::KernelSpec::default_for`]) median time, where it was timed.
    pub default_ms: Option<f64>,
    /// How many candidate variants were timed.
    pub candidates: u32,
    /// The gate strengths the variants were timed at (empty: one, the benchmark's).
    pub strengths: Vec<String>,
    /// Every candidate that got its final runs, by variant id: its median time here (the worst over `strengths`).
    /// Between buckets, [`TuningCache::lookup`] takes the nearby winner that loses least at each of them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub all_ms: BTreeMap<String, f64>,
}

/// One cached choice: for `key` at `bucket`, run `variant` from the cubin `cubins/<cubin>`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// What the entry is for.
    pub key: CacheKey,
    /// The problem-size bucket it was chosen for.
    pub bucket: Bucket,
    /// The variant's [`gla_codegen::KernelSpec::id`].
    pub variant: String,
    /// A forward entry's variant ([`SpecRecord::spec`] rebuilds it with the key's gate and dtype); absent from a
    /// backward entry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<SpecRecord>,
    /// A backward entry's kernel set and walk segments (key pass `"bwd"`, [`CacheKey::backward`];
    /// [`BackwardRecord::spec`] rebuilds it); absent from a forward entry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backward: Option<BackwardRecord>,
    /// The cubin's file name under `cubins/`: [`cubin_file_name`] of its SHA-256 (set by [`TuningCache::insert`]).
    pub cubin: String,
    /// The cubin's SHA-256 ([`sha256_hex`]), checked on every read (set by [`TuningCache::insert`]).
    pub cubin_sha256: String,
    /// What it was built and timed with.
    pub validators: Validators,
    /// The timing that chose it; `None`: untimed (compiled ahead of time, the default choice).
    pub timing: Option<Timing>,
}

impl Entry {
    /// An entry of `key` at `bucket` for kernel `variant`, compiled for [`crate::nvrtc::ARCH`] by NVRTC
    /// `nvrtc_version` from a source of SHA-256 `source_sha256`; timed on `gpu` when `timing` is given. No record yet
    /// (`spec` for a forward entry, `backward` for a backward one); [`TuningCache::insert`] sets the cubin fields.
    pub fn compiled(
        key: CacheKey,
        bucket: Bucket,
        variant: String,
        nvrtc_version: (i32, i32),
        source_sha256: String,
        timed: Option<(GpuFacts, Timing)>,
    ) -> Entry {
        let (gpu, timing) = timed.map_or((None, None), |(g, t)| (Some(g), Some(t)));
        Entry {
            key,
            bucket,
            variant,
            spec: None,
            backward: None,
            cubin: String::new(),
            cubin_sha256: String::new(),
            validators: Validators {
                arch: crate::nvrtc::ARCH.to_string(),
                nvrtc_version,
                source_sha256,
                gpu,
            },
            timing,
        }
    }

    /// Whether the entry was timed on a GPU.
    pub fn is_timed(&self) -> bool {
        self.timing.is_some()
    }
}

/// The contents of `index.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Index {
    /// The format version, [`FORMAT_VERSION`].
    pub format: u32,
    /// What wrote the cache, e.g. `gla-runtime 0.1.0`.
    pub created_by: String,
    /// The entries, at most one per (key, bucket), sorted by (key, bucket) when saved.
    pub entries: Vec<Entry>,
}

/// What this process runs on (checked against each entry's validators by [`check`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Environment {
    /// The loaded NVRTC's version; `None`: no NVRTC here (a deployment running cached cubins only).
    pub nvrtc_version: Option<(i32, i32)>,
    /// The GPU the kernels will run on; `None`: no GPU.
    pub gpu: Option<GpuFacts>,
}

impl Environment {
    /// The environment of a process running on `gpu`, with NVRTC's version if [`crate::nvrtc::probe`] finds it.
    pub fn current(gpu: Option<&DeviceInfo>) -> Environment {
        Environment {
            nvrtc_version: crate::nvrtc::probe().ok().map(|i| i.version),
            gpu: gpu.map(GpuFacts::from),
        }
    }
}

/// Whether `e` may be used here: `Ok(())`, or `Err(reason)` for a stale entry — another arch than
/// [`crate::nvrtc::ARCH`], a changed generated source (`e.validators.source_sha256 != current_source_sha256`:
/// codegen or gate changed), another NVRTC version than the one loaded here (where one is: a process with no NVRTC
/// runs the cubins as they are), and for a timed entry another GPU (name, SM count, compute capability), another
/// driver version, or no GPU here. An untimed entry (`gpu: None`) is usable on any GPU (that the GPU can run sm_90a
/// cubins, compute capability 9.0, the runtime checks when it opens the device).
pub fn check(
    e: &Entry,
    env: &Environment,
    current_source_sha256: &str,
) -> std::result::Result<(), String> {
    let v = &e.validators;
    if v.arch != crate::nvrtc::ARCH {
        return Err(format!(
            "built for {}, this runtime runs {} cubins",
            v.arch,
            crate::nvrtc::ARCH
        ));
    }
    if v.source_sha256 != current_source_sha256 {
        return Err(format!(
            "the generated source changed (codegen or gate changed): cached {}, now {}",
            short(&v.source_sha256),
            short(current_source_sha256)
        ));
    }
    if let Some(here) = env.nvrtc_version {
        if here != v.nvrtc_version {
            return Err(format!(
                "compiled by NVRTC {}.{}, this process loads NVRTC {}.{}",
                v.nvrtc_version.0, v.nvrtc_version.1, here.0, here.1
            ));
        }
    }
    let Some(then) = &v.gpu else { return Ok(()) };
    let Some(now) = &env.gpu else {
        return Err(format!(
            "timed on {}, and this process has no GPU",
            then.name
        ));
    };
    if then.name != now.name {
        return Err(format!("timed on {}, this GPU is {}", then.name, now.name));
    }
    if then.sm_count != now.sm_count {
        return Err(format!(
            "timed on {} with {} SMs, this one has {}",
            then.name, then.sm_count, now.sm_count
        ));
    }
    if then.compute_capability != now.compute_capability {
        let (a, b) = (then.compute_capability, now.compute_capability);
        return Err(format!(
            "timed on compute capability {}.{}, this GPU is {}.{}",
            a.0, a.1, b.0, b.1
        ));
    }
    if then.driver_version != now.driver_version {
        return Err(format!(
            "timed with driver version {}, this driver is {}",
            then.driver_version, now.driver_version
        ));
    }
    Ok(())
}

/// The first 12 hex digits of a hash, for messages.
fn short(h: &str) -> &str {
    h.get(..12).unwrap_or(h)
}

/// SHA-256 of `bytes` as 64 lowercase hex digits.
pub fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut s = String::with_capacity(64);
    for b in digest.iter() {
        use std::fmt::Write as _;
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// The file name under `cubins/` of the cubin whose SHA-256 is `sha256`: `<sha256>.cubin`.
pub fn cubin_file_name(sha256: &str) -> String {
    format!("{sha256}.cubin")
}

/// Whether `new` takes the place of `old`, an entry of the same (key, bucket):
///
/// * a timed entry replaces an untimed one, and an untimed one never replaces a timed one;
/// * a timed entry replaces a timed one only if both were timed on the same GPU facts (name, SM count, compute
///   capability, driver version): a newer measurement of the same setup. An entry timed on another GPU is dropped
///   and the one already there kept — keep the caches of different GPUs in different directories;
/// * an untimed entry replaces an untimed one (the later compile, e.g. of a newer codegen).
pub fn replaces(new: &Entry, old: &Entry) -> bool {
    match (new.is_timed(), old.is_timed()) {
        (true, false) | (false, false) => true,
        (false, true) => false,
        (true, true) => new.validators.gpu == old.validators.gpu,
    }
}

/// A tuning cache: the index of a cache directory, plus cubins inserted since it was read and not yet saved.
#[derive(Debug)]
pub struct TuningCache {
    dir: PathBuf,
    index: Index,
    /// Cubins not yet written, by file name.
    staged: HashMap<String, Vec<u8>>,
    /// The (key, bucket)s inserted or merged since the index was read or saved: what [`TuningCache::save`] merges
    /// into the index on disk (the other entries are what was read, which the disk may since have newer ones of).
    dirty: HashSet<(CacheKey, Bucket)>,
}

fn cache_err(path: &Path, msg: impl Into<String>) -> GlaError {
    GlaError::Cache {
        path: path.display().to_string(),
        msg: msg.into(),
    }
}

/// Whether `name` is a cubin file name as the cache writes them (no path separators, no way out of `cubins/`).
fn plain_cubin_name(name: &str) -> bool {
    name.strip_suffix(".cubin")
        .is_some_and(|h| !h.is_empty() && h.bytes().all(|b| b.is_ascii_alphanumeric()))
}

/// A name for a temporary file beside `target`, unique among threads and processes.
fn temp_path(target: &Path) -> PathBuf {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    target.with_file_name(format!(".{name}.tmp.{}.{n}", std::process::id()))
}

/// Write `bytes` to `target` atomically: a temporary file beside it, synced, then renamed over it.
fn write_atomic(target: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = temp_path(target);
    let res = (|| -> std::io::Result<()> {
        let mut f = fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        drop(f);
        fs::rename(&tmp, target)
    })();
    res.map_err(|e| {
        let _ = fs::remove_file(&tmp);
        cache_err(target, format!("cannot write: {e}"))
    })
}

impl TuningCache {
    /// An empty cache that will live in `dir` (nothing is written until [`TuningCache::save`]).
    pub fn empty(dir: &Path) -> TuningCache {
        TuningCache {
            dir: dir.to_path_buf(),
            index: Index {
                format: FORMAT_VERSION,
                created_by: created_by(),
                entries: Vec::new(),
            },
            staged: HashMap::new(),
            dirty: HashSet::new(),
        }
    }

    /// Read the cache directory `dir`. Errors ([`GlaError::Cache`] naming the path, never a panic): the directory or
    /// its index is missing; the index is not readable, not JSON of an [`Index`] (garbage, truncated), of another
    /// format version than [`FORMAT_VERSION`], has two entries of one (key, bucket) or an entry whose cubin name is
    /// not a plain `<hash>.cubin`. Cubins are read (and checked) only by [`TuningCache::cubin`].
    pub fn open(dir: &Path) -> Result<TuningCache> {
        if !dir.is_dir() {
            return Err(cache_err(dir, "missing: no such directory"));
        }
        let path = dir.join(INDEX_FILE);
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(cache_err(
                    &path,
                    format!("missing: the cache directory has no {INDEX_FILE}"),
                ))
            }
            Err(e) => return Err(cache_err(&path, format!("cannot read: {e}"))),
        };
        let index = parse_index(&bytes).map_err(|msg| cache_err(&path, msg))?;
        Ok(TuningCache {
            dir: dir.to_path_buf(),
            index,
            staged: HashMap::new(),
            dirty: HashSet::new(),
        })
    }

    /// [`TuningCache::open`] if `dir` has an index, else [`TuningCache::empty`]; errors as `open`'s for an index
    /// that is there but unreadable.
    pub fn open_or_empty(dir: &Path) -> Result<TuningCache> {
        if dir.join(INDEX_FILE).exists() {
            TuningCache::open(dir)
        } else {
            Ok(TuningCache::empty(dir))
        }
    }

    /// The cache directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The entries: those read, with those inserted or merged since.
    pub fn entries(&self) -> &[Entry] {
        &self.index.entries
    }

    /// The index (entries as [`TuningCache::entries`]).
    pub fn index(&self) -> &Index {
        &self.index
    }

    /// Among the entries of `key` for which `usable(e)` holds (e.g. `|e| check(e, &env, &sha).is_ok()`), the one
    /// whose bucket is nearest `bucket` ([`Bucket::distance`]); ties: timed before untimed, then, where the equally
    /// near buckets chose different variants, the winner among theirs whose worst slowdown at those buckets is least
    /// (from each entry's [`Timing::all_ms`]; where one lacks them, the variant most of them chose), then the lower
    /// `(rows_log2, tokens_log2)`. `None` if there is none.
    pub fn lookup(
        &self,
        key: &CacheKey,
        bucket: &Bucket,
        usable: impl Fn(&Entry) -> bool,
    ) -> Option<&Entry> {
        let rank = |e: &Entry| (e.bucket.distance(bucket), !e.is_timed());
        let found: Vec<&Entry> = self
            .index
            .entries
            .iter()
            .filter(|e| &e.key == key && usable(e))
            .collect();
        let best = found.iter().map(|e| rank(e)).min()?;
        let near: Vec<&Entry> = found.into_iter().filter(|e| rank(e) == best).collect();
        // Between equally near buckets: the winner among theirs whose worst slowdown over their winners is least,
        // where every one recorded all its candidates' times; else the variant most of them chose.
        let loss = |v: &str| -> Option<f64> {
            near.iter()
                .map(|e| {
                    let t = e.timing.as_ref()?;
                    let ms = if e.variant == v {
                        Some(t.median_ms)
                    } else {
                        t.all_ms.get(v).copied()
                    };
                    Some(ms.unwrap_or(f64::INFINITY) / t.median_ms)
                })
                .try_fold(1.0f64, |w, r| Some(w.max(r?)))
        };
        let known = near.len() > 1
            && near
                .iter()
                .all(|e| e.timing.as_ref().is_some_and(|t| !t.all_ms.is_empty()));
        let votes = |v: &str| near.iter().filter(|e| e.variant == v).count();
        // (losses compare in thousandths: timing noise does not outvote the buckets)
        let score = |e: &Entry| {
            let l = if known {
                loss(&e.variant).unwrap_or(f64::INFINITY)
            } else {
                1.0
            };
            (
                (l * 1000.0).round() as u64,
                std::cmp::Reverse(votes(&e.variant)),
                e.bucket,
            )
        };
        near.iter().copied().min_by_key(|e| score(e))
    }

    /// The path of an entry's cubin file.
    pub fn cubin_path(&self, e: &Entry) -> PathBuf {
        self.dir.join(CUBIN_DIR).join(&e.cubin)
    }

    /// The entry's cubin bytes (from memory if inserted and not yet saved), checked against `e.cubin_sha256`.
    /// Errors ([`GlaError::Cache`] naming the cubin file): the file is missing or unreadable, its name is not a
    /// plain `<hash>.cubin`, or its bytes' SHA-256 is not the index's (the file changed or was truncated).
    pub fn cubin(&self, e: &Entry) -> Result<Vec<u8>> {
        let path = self.cubin_path(e);
        if !plain_cubin_name(&e.cubin) {
            return Err(cache_err(
                &path,
                format!(
                    "`{}` is not a cubin file name of the cache (<sha256>.cubin)",
                    e.cubin
                ),
            ));
        }
        let bytes = match self.staged.get(&e.cubin) {
            Some(b) => b.clone(),
            None => match fs::read(&path) {
                Ok(b) => b,
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                    return Err(cache_err(
                        &path,
                        format!("cubin of {} ({}) missing", e.variant, e.key),
                    ))
                }
                Err(err) => {
                    return Err(cache_err(
                        &path,
                        format!("cannot read the cubin of {}: {err}", e.variant),
                    ))
                }
            },
        };
        let sha = sha256_hex(&bytes);
        if sha != e.cubin_sha256 {
            return Err(cache_err(
                &path,
                format!(
                    "cubin of {} has SHA-256 {} ({} bytes), the index says {}: the file changed or is truncated",
                    e.variant,
                    short(&sha),
                    bytes.len(),
                    short(&e.cubin_sha256)
                ),
            ));
        }
        Ok(bytes)
    }

    /// Add an entry with its cubin (kept in memory until [`TuningCache::save`]). The entry's `cubin` and
    /// `cubin_sha256` are set from the bytes ([`cubin_file_name`] of [`sha256_hex`]). If an entry of the same
    /// (key, bucket) is present, the new one takes its place only as [`replaces`] says (a timed entry replaces an
    /// untimed one, a timed one replaces a timed one of the same GPU facts, an untimed one never replaces a timed
    /// one); otherwise it is dropped ([`TuningCache::accepts`] tells beforehand).
    pub fn insert(&mut self, mut e: Entry, cubin: Vec<u8>) {
        e.cubin_sha256 = sha256_hex(&cubin);
        e.cubin = cubin_file_name(&e.cubin_sha256);
        if !self.accepts(&e) {
            return;
        }
        self.staged.insert(e.cubin.clone(), cubin);
        self.dirty.insert((e.key.clone(), e.bucket));
        self.put(e);
    }

    /// Whether [`TuningCache::insert`] would take `e` (no entry of its (key, bucket), or one that `e` [`replaces`]).
    pub fn accepts(&self, e: &Entry) -> bool {
        self.position(&e.key, &e.bucket)
            .is_none_or(|i| replaces(e, &self.index.entries[i]))
    }

    fn position(&self, key: &CacheKey, bucket: &Bucket) -> Option<usize> {
        self.index
            .entries
            .iter()
            .position(|x| &x.key == key && &x.bucket == bucket)
    }

    /// Put `e` in the index, in place of the entry of its (key, bucket) if there is one (no rule applied).
    fn put(&mut self, e: Entry) {
        match self.position(&e.key, &e.bucket) {
            Some(i) => self.index.entries[i] = e,
            None => self.index.entries.push(e),
        }
    }

    /// Merge another cache's entries in, by the rule of [`TuningCache::insert`], reading (and checking) the cubins
    /// of the entries taken from `other`. On an error (a missing or changed cubin in `other`) nothing is merged.
    pub fn merge(&mut self, other: &TuningCache) -> Result<()> {
        let mut taken = Vec::new();
        for e in other.entries() {
            if self.accepts(e) {
                taken.push((e.clone(), other.cubin(e)?));
            }
        }
        for (e, bytes) in taken {
            self.insert(e, bytes);
        }
        Ok(())
    }

    /// Write the cache to its directory (created if missing) under an exclusive lock on `dir/.lock`: re-read the
    /// index on disk if there is one, merge into it the entries inserted or merged into this cache since it was
    /// read or last saved, by the rule of [`TuningCache::insert`] (so concurrent writers never lose each other's
    /// entries), write their cubins content-addressed (temp file and rename; a cubin already there with the right
    /// bytes is kept), then the index sorted by (key, bucket) (temp file and rename: readers see the old or the new
    /// index, never a partial one). Afterwards this cache holds what was written. Returns the number of entries
    /// written (all of the index, not only the new ones).
    ///
    /// Errors ([`GlaError::Cache`]): the directory, lock or files cannot be created or written; the index on disk
    /// is unreadable (corrupt, another format version — it is left as it is: move it away to start anew).
    pub fn save(&mut self) -> Result<usize> {
        let cubins = self.dir.join(CUBIN_DIR);
        fs::create_dir_all(&cubins)
            .map_err(|e| cache_err(&cubins, format!("cannot create: {e}")))?;
        let lock_path = self.dir.join(LOCK_FILE);
        let lock = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|e| cache_err(&lock_path, format!("cannot open the lock file: {e}")))?;
        fs4::FileExt::lock(&lock)
            .map_err(|e| cache_err(&lock_path, format!("cannot lock: {e}")))?;
        let res = self.save_locked();
        let _ = fs4::FileExt::unlock(&lock);
        res
    }

    fn save_locked(&mut self) -> Result<usize> {
        let index_path = self.dir.join(INDEX_FILE);
        let mut disk = if index_path.exists() {
            TuningCache::open(&self.dir).map_err(|e| match e {
                GlaError::Cache { path, msg } => GlaError::Cache {
                    path,
                    msg: format!(
                        "{msg}; not writing over it (move it away to write a new cache there)"
                    ),
                },
                e => e,
            })?
        } else {
            TuningCache::empty(&self.dir)
        };
        // Entries (and their cubins) this cache adds to what is on disk.
        for e in &self.index.entries {
            // An entry already on disk as it is still gets its cubin rewritten if the file there was damaged.
            let already = disk.index.entries.contains(e);
            if !self.dirty.contains(&(e.key.clone(), e.bucket)) || (!already && !disk.accepts(e)) {
                continue;
            }
            let target = self.dir.join(CUBIN_DIR).join(&e.cubin);
            if !plain_cubin_name(&e.cubin) {
                return Err(cache_err(
                    &target,
                    format!(
                        "`{}` is not a cubin file name of the cache (<sha256>.cubin)",
                        e.cubin
                    ),
                ));
            }
            match self.staged.get(&e.cubin) {
                Some(bytes) => {
                    let present = fs::read(&target).is_ok_and(|b| sha256_hex(&b) == e.cubin_sha256);
                    if !present {
                        write_atomic(&target, bytes)?;
                    }
                }
                None => {
                    if !target.is_file() {
                        return Err(cache_err(
                            &target,
                            format!("cubin of {} ({}) missing", e.variant, e.key),
                        ));
                    }
                }
            }
            if !already {
                disk.put(e.clone());
            }
        }
        disk.index
            .entries
            .sort_by(|a, b| (&a.key, a.bucket).cmp(&(&b.key, b.bucket)));
        disk.index.format = FORMAT_VERSION;
        let json = serde_json::to_vec_pretty(&disk.index)
            .map_err(|e| cache_err(&index_path, format!("cannot serialise: {e}")))?;
        write_atomic(&index_path, &json)?;
        // Make the renames durable where the platform allows (best effort).
        if let Ok(d) = fs::File::open(&self.dir) {
            let _ = d.sync_all();
        }
        let n = disk.index.entries.len();
        self.index = disk.index;
        self.staged.clear();
        self.dirty.clear();
        Ok(n)
    }
}

/// `created_by` of the indexes this version writes.
fn created_by() -> String {
    format!("gla-runtime {}", env!("CARGO_PKG_VERSION"))
}

/// Parse and check an index file's bytes; the error says what is wrong.
fn parse_index(bytes: &[u8]) -> std::result::Result<Index, String> {
    // The format first, so that an index of another version is reported as such, not as a schema mismatch.
    let value: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| {
        if e.is_eof() {
            format!("truncated index ({} bytes): {e}", bytes.len())
        } else {
            format!("corrupt index, not JSON: {e}")
        }
    })?;
    match value.get("format").and_then(|f| f.as_u64()) {
        Some(f) if f == FORMAT_VERSION as u64 => {}
        Some(f) => {
            return Err(format!(
                "index format version {f}, this gla reads version {FORMAT_VERSION}"
            ))
        }
        None => {
            return Err(format!(
                "corrupt index: no format version (expected \"format\": {FORMAT_VERSION})"
            ))
        }
    }
    let index: Index = serde_json::from_value(value).map_err(|e| format!("corrupt index: {e}"))?;
    let mut seen = std::collections::HashSet::new();
    for e in &index.entries {
        if !seen.insert((&e.key, e.bucket)) {
            return Err(format!(
                "corrupt index: two entries for {} at bucket rows 2^{} tokens 2^{}",
                e.key, e.bucket.rows_log2, e.bucket.tokens_log2
            ));
        }
        if !plain_cubin_name(&e.cubin) {
            return Err(format!(
                "corrupt index: entry {} names the cubin `{}`, not <sha256>.cubin",
                e.variant, e.cubin
            ));
        }
    }
    Ok(index)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_of_rounds_up() {
        assert_eq!(
            Bucket::of(0, 0),
            Bucket {
                rows_log2: 0,
                tokens_log2: 0
            }
        );
        assert_eq!(
            Bucket::of(1, 1),
            Bucket {
                rows_log2: 0,
                tokens_log2: 0
            }
        );
        assert_eq!(
            Bucket::of(3, 3),
            Bucket {
                rows_log2: 2,
                tokens_log2: 2
            }
        );
        assert_eq!(
            Bucket::of(1024, 1024),
            Bucket {
                rows_log2: 10,
                tokens_log2: 10
            }
        );
        assert_eq!(
            Bucket::of(1025, 1025),
            Bucket {
                rows_log2: 11,
                tokens_log2: 11
            }
        );
        assert_eq!(
            Bucket::of(2, 4097),
            Bucket {
                rows_log2: 1,
                tokens_log2: 13
            }
        );
    }

    #[test]
    fn sha256_known_answer() {
        assert_eq!(
            sha256_hex(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn cubin_names() {
        assert!(plain_cubin_name(&cubin_file_name(&sha256_hex(b"x"))));
        for bad in ["../x.cubin", "a/b.cubin", ".cubin", "x.ptx", "/etc/passwd"] {
            assert!(!plain_cubin_name(bad), "{bad}");
        }
    }
}
