//! Command-line flags of `autotune` ([`parse`] is pure: no I/O, no gate registry).

use gla_core::DType;
use std::path::PathBuf;

/// `--help`.
pub const USAGE: &str = "\
usage: autotune [--plan | --report | --restamp] [--only <id part>] [--gates a,b] [--dims 64,128,256] [--dtypes bf16,f16,f32]
                [--out DIR] [--buckets default|B,T,H;...] [--devices all|0,1,...] [--backward]
                [--resume] [--regret default|B,T,H;...]

With a GPU: for every registered gate x dtype x head dim x shape bucket, compile the candidate variants in
parallel, check each against the f64 reference on a small random problem (a failing candidate is reported and
never cached), time the rest (CUDA events, a warm-up, L2 flushed, median; runs worth ~8 ms of GPU time each (2-5;
the first alone for a run of 5 ms or more), candidates slower than 1.3x the best then dropped, the others get runs
worth ~30 ms more (3-20; 2 or more for long runs)) and write the
fastest per bucket into the cache at --out. The next key compiles on the CPU while the GPUs time the one before.
Per-key gates are timed at logits ~ N(0,1) and N(0,1) - 12 (strong decays) and chosen by the worse of the two.
With no GPU: compile ahead of time what the runtime would use — the forward variant (KernelSpec::default_for) and
the backward kernel set (BackwardSpec::default_for) for every gate x dtype x head dim, the decode step for every
gate x dtype — into the cache at --out, as untimed entries; a GPU run later refines it.

  --plan            compile EVERY variant of every registered gate (no GPU needed), print the resource table and
                    fail on a compile error, a register spill, wgmma serialised by ptxas (C7512) or too much shared
                    memory (what CI runs)
  --report          write the cache at --out as Markdown (DIR/report.md: per key and bucket the chosen variant, its
                    time, the default's and the gain) and print it; no compile, no GPU (the PNG heatmap of the same:
                    python3 tuning/python/heatmap.py DIR)
  --restamp         bring the cache at --out up to date with this codegen where its kernels did not change: an entry
                    whose current source compiles (same NVRTC) to its cubin byte for byte gets the new source hash
                    (its timing holds: same machine code); the others stay stale and are listed (they need a GPU
                    run); no GPU needed. Exit 1 if any stays stale
  --only <part>     only the variants whose id contains <part> (e.g. `w8p4`, `gla.fwd.bf16.C32`)
  --gates a,b       only these registered gates (default: every registered gate)
  --dims d,...      square head dims d_k = d_v, each in 1..=512 (default 64,128,256)
  --dtypes t,...    bf16, f16, f32 (default all three)
  --out DIR         the tuning cache directory (default tuning/caches/local, relative to the current directory)
  --buckets B       `default`: the grid of gla_runtime::cache::Bucket::grid() (batch*heads 2^5, 2^7, 2^9 x tokens
                    2^10, 2^12, 2^14), each timed at its Bucket::problem(); or `B,T,H;B,T,H;...`: these problems, each
                    cached under the bucket of (B*H, T)
  --devices D       the GPUs that share the search, one worker each taking the next gate x dtype x head dim:
                    `all` (default: every device of the host) or ordinals 0,1,...
  --backward        with a GPU, also tune the backward where it has a choice (bf16/f16 key gates, d <= 256): its form
                    (chunks or walks), the walks' segments and, for per-key gates at d = 64, 128, dq / dk as passes
                    of the forward kernel or as walks; checked against the f64 reference gradients first, timed per
                    bucket on the first device at the gate's strengths (as the forward) and chosen by the worse
  --resume          with a GPU, skip every key (gate x dtype x head dim; forward, and with --backward backward) whose
                    buckets all hold timed entries the runtime would use on this GPU (same GPU, driver and NVRTC, and
                    the variant's source as this codegen generates it): a run cut short goes on where it stopped (the
                    cache is saved after every key)
  --regret P        with a GPU, tune nothing: measure the cache at --out against an exhaustive search (every
                    candidate timed in full, no early elimination) at the problems P — `default`: five problems that
                    are not grid points (tuning::regret::PROBLEMS) — and print the regret of the cache's pick
                    (its time / the best time − 1) per gate x dtype x head dim x problem; rows in DIR/regret.json
  -h, --help        this text";

/// Which shape buckets a GPU run times.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Buckets {
    /// `Bucket::grid()`, each at `Bucket::problem()`.
    Default,
    /// Explicit problems `(B, T, H)`.
    Problems(Vec<(usize, usize, usize)>),
}

/// Parsed flags. `None` for gates, dims and dtypes means "not given": every registered gate, the default dims and
/// every dtype; `--plan` then applies no filter at all (every variant of `all_variants`).
#[derive(Clone, Debug, PartialEq)]
pub struct Options {
    pub help: bool,
    pub plan: bool,
    pub report: bool,
    /// `--restamp`.
    pub restamp: bool,
    pub only: Option<String>,
    pub gates: Option<Vec<String>>,
    pub dims: Option<Vec<usize>>,
    pub dtypes: Option<Vec<DType>>,
    pub out: PathBuf,
    pub buckets: Buckets,
    /// `--devices`: the GPU ordinals to tune on (`None`: every device).
    pub devices: Option<Vec<usize>>,
    /// `--backward`: also tune the backward's form and walk segments (GPU runs).
    pub backward: bool,
    /// `--resume`: skip the keys this GPU has already tuned with this codegen (`crate::resume`).
    pub resume: bool,
    /// `--regret`: measure the cache at `--out` against an exhaustive search at these problems (GPU runs) instead of
    /// tuning.
    pub regret: Option<Vec<(usize, usize, usize)>>,
}

/// Default head dims (square, d_k = d_v).
pub const DEFAULT_DIMS: [usize; 3] = [64, 128, 256];

/// Default cache directory, relative to the current directory.
pub const DEFAULT_OUT: &str = "tuning/caches/local";

impl Default for Options {
    fn default() -> Self {
        Options {
            help: false,
            plan: false,
            report: false,
            restamp: false,
            only: None,
            gates: None,
            dims: None,
            dtypes: None,
            out: PathBuf::from(DEFAULT_OUT),
            buckets: Buckets::Default,
            devices: None,
            backward: false,
            resume: false,
            regret: None,
        }
    }
}

impl Options {
    /// The head dims to tune: `--dims` or [`DEFAULT_DIMS`].
    pub fn dims_or_default(&self) -> Vec<usize> {
        self.dims.clone().unwrap_or_else(|| DEFAULT_DIMS.to_vec())
    }
    /// The dtypes to tune: `--dtypes` or all three.
    pub fn dtypes_or_default(&self) -> Vec<DType> {
        self.dtypes.clone().unwrap_or_else(|| DType::ALL.to_vec())
    }
    /// Whether variant id `id` passes `--only`.
    pub fn selects(&self, id: &str) -> bool {
        self.only.as_deref().is_none_or(|o| id.contains(o))
    }
}

fn parse_dtype(s: &str) -> Result<DType, String> {
    DType::ALL
        .into_iter()
        .find(|d| d.as_str() == s)
        .ok_or_else(|| format!("unknown dtype `{s}` (bf16, f16 or f32)"))
}

fn list(s: &str) -> impl Iterator<Item = &str> {
    s.split(',').map(str::trim).filter(|x| !x.is_empty())
}

/// Parse `B,T,H;B,T,H;...` (every number ≥ 1).
pub fn parse_problems(s: &str) -> Result<Vec<(usize, usize, usize)>, String> {
    let mut out = Vec::new();
    for p in s.split(';').map(str::trim).filter(|p| !p.is_empty()) {
        let v: Vec<usize> = p
            .split(',')
            .map(|x| x.trim().parse::<usize>().ok().filter(|&n| n > 0))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| format!("--buckets: `{p}` is not B,T,H with positive integers"))?;
        match v[..] {
            [b, t, h] => out.push((b, t, h)),
            _ => {
                return Err(format!(
                    "--buckets: `{p}` has {} numbers, expected B,T,H",
                    v.len()
                ))
            }
        }
    }
    if out.is_empty() {
        return Err("--buckets: expected `default` or B,T,H;B,T,H;...".into());
    }
    Ok(out)
}

/// Parse the arguments (without the program name). Accepts `--flag value` and `--flag=value`.
pub fn parse(args: &[String]) -> Result<Options, String> {
    let mut o = Options::default();
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        let (flag, inline) = match a.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_string())),
            _ => (a, None),
        };
        let takes_value = matches!(
            flag,
            "--only"
                | "--gates"
                | "--dims"
                | "--dtypes"
                | "--out"
                | "--buckets"
                | "--devices"
                | "--regret"
        );
        let value = if takes_value {
            match inline {
                Some(v) => Some(v),
                None => {
                    i += 1;
                    Some(
                        args.get(i)
                            .cloned()
                            .ok_or_else(|| format!("{flag} needs a value (see --help)"))?,
                    )
                }
            }
        } else {
            if inline.is_some() {
                return Err(format!("{flag} takes no value"));
            }
            None
        };
        match (flag, value) {
            ("-h" | "--help", _) => o.help = true,
            ("--plan", _) => o.plan = true,
            ("--report", _) => o.report = true,
            ("--restamp", _) => o.restamp = true,
            ("--backward", _) => o.backward = true,
            ("--resume", _) => o.resume = true,
            ("--only", Some(v)) => o.only = Some(v),
            ("--gates", Some(v)) => {
                let g: Vec<String> = list(&v).map(String::from).collect();
                if g.is_empty() {
                    return Err("--gates: expected a,b,...".into());
                }
                o.gates = Some(g);
            }
            ("--dims", Some(v)) => {
                let d = list(&v)
                    .map(|x| {
                        x.parse::<usize>()
                            .ok()
                            .filter(|d| (1..=gla_codegen::MAX_HEAD_DIM).contains(d))
                            .ok_or_else(|| {
                                format!(
                                    "--dims: `{x}` is not a head dim in 1..={}",
                                    gla_codegen::MAX_HEAD_DIM
                                )
                            })
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                if d.is_empty() {
                    return Err("--dims: expected d,d,...".into());
                }
                o.dims = Some(d);
            }
            ("--dtypes", Some(v)) => {
                let d = list(&v).map(parse_dtype).collect::<Result<Vec<_>, _>>()?;
                if d.is_empty() {
                    return Err("--dtypes: expected bf16,f16,f32".into());
                }
                o.dtypes = Some(d);
            }
            ("--out", Some(v)) => {
                if v.is_empty() {
                    return Err("--out: expected a directory".into());
                }
                o.out = PathBuf::from(v);
            }
            ("--devices", Some(v)) => {
                o.devices = if v.trim() == "all" {
                    None
                } else {
                    let d = list(&v)
                        .map(|x| {
                            x.parse::<usize>().map_err(|_| {
                                format!("--devices: `{x}` is not a device ordinal (or use `all`)")
                            })
                        })
                        .collect::<Result<Vec<_>, _>>()?;
                    if d.is_empty() {
                        return Err("--devices: expected all or 0,1,...".into());
                    }
                    Some(d)
                };
            }
            ("--buckets", Some(v)) => {
                o.buckets = if v.trim() == "default" {
                    Buckets::Default
                } else {
                    Buckets::Problems(parse_problems(&v)?)
                }
            }
            ("--regret", Some(v)) => {
                o.regret = Some(if v.trim() == "default" {
                    crate::regret::PROBLEMS.to_vec()
                } else {
                    parse_problems(&v).map_err(|e| e.replace("--buckets", "--regret"))?
                })
            }
            (f, _) => return Err(format!("unknown argument `{f}` (see --help)")),
        }
        i += 1;
    }
    Ok(o)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Result<Options, String> {
        parse(&s.split_whitespace().map(String::from).collect::<Vec<_>>())
    }

    #[test]
    fn devices() {
        assert_eq!(p("--devices 0,2").unwrap().devices, Some(vec![0, 2]));
        assert_eq!(p("--devices=all").unwrap().devices, None);
        assert_eq!(p("").unwrap().devices, None);
        let e = p("--devices x").unwrap_err();
        assert!(e.contains("--devices") && e.contains("`x`"), "{e}");
    }

    #[test]
    fn defaults() {
        let o = p("").unwrap();
        assert_eq!(o, Options::default());
        assert_eq!(o.dims_or_default(), vec![64, 128, 256]);
        assert_eq!(o.dtypes_or_default(), DType::ALL.to_vec());
        assert_eq!(o.out, PathBuf::from("tuning/caches/local"));
        assert!(o.selects("anything"));
    }

    #[test]
    fn every_flag() {
        let o = p("--plan --only w8p4 --gates gla,mamba2 --dims 64,128 --dtypes bf16,f32 --out /tmp/x --buckets 8,4096,16;2,16384,16").unwrap();
        assert!(o.plan && !o.help && !o.backward);
        assert!(p("--backward").unwrap().backward);
        assert!(p("--resume").unwrap().resume && !o.resume);
        assert!(p("--resume=1").is_err());
        assert_eq!(
            p("--regret default").unwrap().regret,
            Some(crate::regret::PROBLEMS.to_vec())
        );
        assert_eq!(
            p("--regret 3,6000,12;1,100,2").unwrap().regret,
            Some(vec![(3, 6000, 12), (1, 100, 2)])
        );
        assert!(p("--regret 3,0,12").unwrap_err().contains("--regret"));
        assert_eq!(o.only.as_deref(), Some("w8p4"));
        assert_eq!(o.gates, Some(vec!["gla".to_string(), "mamba2".to_string()]));
        assert_eq!(o.dims, Some(vec![64, 128]));
        assert_eq!(o.dtypes, Some(vec![DType::BF16, DType::F32]));
        assert_eq!(o.out, PathBuf::from("/tmp/x"));
        assert_eq!(
            o.buckets,
            Buckets::Problems(vec![(8, 4096, 16), (2, 16384, 16)])
        );
        assert!(o.selects("gla.fwd.bf16.C32.w8p4x2g") && !o.selects("gla.fwd.bf16.C32.w4p4g"));
        let o = p("--dims=256 --buckets=default --gates=rwkv6").unwrap();
        assert_eq!(
            (o.dims, o.buckets, o.gates),
            (
                Some(vec![256]),
                Buckets::Default,
                Some(vec!["rwkv6".to_string()])
            )
        );
        assert!(p("-h").unwrap().help && p("--help").unwrap().help);
    }

    #[test]
    fn errors_say_what_is_wrong() {
        for (args, part) in [
            ("--only", "needs a value"),
            ("--dims 64,600", "1..=512"),
            ("--dims x", "not a head dim"),
            ("--dtypes bf8", "unknown dtype"),
            ("--buckets 8,4096", "expected B,T,H"),
            ("--buckets 8,0,16", "positive"),
            ("--buckets ;", "expected `default`"),
            ("--frobnicate", "unknown argument"),
            ("--plan=1", "takes no value"),
            ("--gates ,", "expected a,b"),
        ] {
            let e = p(args).unwrap_err();
            assert!(e.contains(part), "{args}: {e}");
        }
    }
}
