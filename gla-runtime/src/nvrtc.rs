//! NVRTC 13: CUDA C++ source → sm_90a cubin, plus ptxas's per-kernel resource report.
//!
//! # Finding the library
//! cudarc 0.19 (features `dynamic-loading`, `cuda-13000`) `dlopen`s plain file names, first match wins, in the order
//! of [`library_names`]: `libnvrtc.so`, `libnvrtc64.so`, `libnvrtc64_13.so`, ..., `libnvrtc.so.13`,
//! `libnvrtc.so.12`, .... They are resolved by the dynamic loader, so the folder must be on `LD_LIBRARY_PATH`
//! (read once, at process start) or in the loader cache. The PyPI wheel `nvidia-cuda-nvrtc==13.0.88` ships only
//! `libnvrtc.so.13` (+ `libnvrtc-builtins.so.13.0`, found next to it), which cudarc finds under its 13th name;
//! `.ci/install-nvrtc.sh` adds a `libnvrtc.so -> libnvrtc.so.13` link so that the *first* name tried is this copy
//! and not an unversioned `libnvrtc.so` of another CUDA on the default path. [`probe`] then checks that the version
//! loaded really is 13.x.
//!
//! If no name resolves, [`probe`] preloads `libnvrtc.so.13` by absolute path from, in order, `$GLA_NVRTC_LIB` (a
//! file), `$GLA_CUDA_DIR/nvidia/cu13/lib`, this workspace's `.cuda/nvidia/cu13/lib` (what the install script
//! makes) and `/usr/local/cuda/lib64`, together with `libnvrtc-builtins.so.13.0` from the same folder (NVRTC
//! `dlopen`s it by name when compiling); a later `dlopen("libnvrtc.so.13")` by cudarc then matches the loaded
//! soname. `LD_LIBRARY_PATH` remains the documented way; this fallback makes `cargo test` work without it.
//!
//! # The ptxas report
//! With `--ptxas-options=-v`, NVRTC 13.0 appends ptxas's report to the program log, one block per kernel (unless
//! the cubin came from the driver's compute cache: see [`CompileOptions::driver_cache`]):
//! ```text
//! ptxas info    : 0 bytes gmem
//! ptxas info    : Compiling entry function 'k' for 'sm_90a'
//! ptxas info    : Function properties for k
//!     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
//! ptxas info    : Used 40 registers, used 1 barriers, 8 bytes smem, 1024 bytes cmem[0]
//! ```
//! [`parse_ptxas_report`] turns it into [`KernelResources`].

use crate::ffi;
use gla_core::error::Result;
use gla_core::GlaError;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Instant;

/// The file names cudarc tries for NVRTC, in order (on Linux x86-64 with feature `cuda-13000`: `libnvrtc.so`,
/// `libnvrtc64.so`, `libnvrtc64_13.so`, `libnvrtc64_130.so`, ..., `libnvrtc.so.13`, `libnvrtc.so.12`, ...).
pub fn library_names() -> Vec<String> {
    cudarc::get_lib_name_candidates("nvrtc")
}

/// The architecture every gla kernel is built for (H100/H200, with the `a` features: wgmma, setmaxnreg).
pub const ARCH: &str = "sm_90a";

/// Options of one NVRTC compilation. [`CompileOptions::default`] is what gla uses: sm_90a cubin, C++17,
/// `-default-device`, ptxas verbose report, no line info.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CompileOptions {
    /// Real architecture, e.g. `sm_90a`. Must be `sm_XX[a]` (a cubin is wanted, never PTX).
    pub arch: String,
    /// `-lineinfo` (source lines in the cubin, for profilers).
    pub lineinfo: bool,
    /// `-I` folders, for sources that `#include` CUDA headers (gla's generated sources do not).
    pub include_paths: Vec<String>,
    /// Further options, passed as is.
    pub extra: Vec<String>,
    /// Let NVRTC use the CUDA driver's compute cache (`~/.nv/ComputeCache`, `CUDA_CACHE_DISABLE` /
    /// `CUDA_CACHE_PATH`). NVRTC ≥ 12.9 does so whenever `libcuda` is loadable: a hit returns the cubin without
    /// running ptxas, so the log is EMPTY and there is no resource report. Default `false` (`--no-cache`): the
    /// report is always there. [`crate::Gla`] turns it on (faster start-up across processes) and reads resources
    /// from the loaded functions when the log has none.
    pub driver_cache: bool,
}

impl Default for CompileOptions {
    fn default() -> Self {
        CompileOptions {
            arch: ARCH.to_string(),
            lineinfo: false,
            include_paths: Vec::new(),
            extra: Vec::new(),
            driver_cache: false,
        }
    }
}

impl CompileOptions {
    /// The option strings handed to `nvrtcCompileProgram`.
    pub fn build(&self) -> Vec<String> {
        let mut o = vec![
            format!("-arch={}", self.arch),
            "-std=c++17".to_string(),
            "-default-device".to_string(),
            "--ptxas-options=-v".to_string(),
        ];
        if !self.driver_cache {
            o.push("--no-cache".to_string());
        }
        if self.lineinfo {
            o.push("-lineinfo".to_string());
        }
        o.extend(self.include_paths.iter().map(|p| format!("-I{p}")));
        o.extend(self.extra.iter().cloned());
        o
    }
}

/// Registers, spills, shared memory and stack of one kernel, as reported by ptxas.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct KernelResources {
    /// The entry function's (mangled) name; `extern "C"` kernels keep their source name.
    pub name: String,
    pub registers: u32,
    pub spill_stores_bytes: u32,
    pub spill_loads_bytes: u32,
    /// Static shared memory (`__shared__` arrays); dynamic shared memory is not in the report.
    pub static_smem_bytes: u32,
    /// Stack per thread: the entry's frame, or the cumulative stack size (with non-inlined callees) if larger.
    pub stack_bytes: u32,
    /// Why ptxas serialised the kernel's wgmma instructions, if it did (`(C7512) Potential Performance Loss:
    /// wgmma.mma_async instructions are serialized due to <reason> for the function ...`, e.g. "insufficient
    /// register resources"): each then waits for the one before, so a warpgroup's asynchronous groups run one
    /// product at a time. (Absent in caches written before it was reported: None.)
    #[serde(default)]
    pub wgmma_serialized: Option<String>,
}

impl KernelResources {
    /// Whether ptxas spilled registers to local memory.
    pub fn spills(&self) -> bool {
        self.spill_stores_bytes > 0 || self.spill_loads_bytes > 0
    }
}

/// The functions that a ptxas report says had their wgmma serialised, with the reason: `... wgmma.mma_async
/// instructions are serialized due to <reason> for the function 'NAME'` (message C7512; it comes before the
/// function's block).
fn wgmma_serialized_functions(log: &str) -> Vec<(&str, &str)> {
    log.lines()
        .filter_map(|l| after(l, "wgmma.mma_async instructions are serialized due to "))
        .filter_map(|r| {
            let (reason, rest) = r.split_once(" for the function '")?;
            Some((rest.split('\'').next()?, reason.trim()))
        })
        .collect()
}

/// A compiled program.
#[derive(Clone, Debug)]
pub struct Compiled {
    /// ELF image for [`ARCH`] (starts with `\x7fELF`).
    pub cubin: Vec<u8>,
    /// NVRTC's log, including ptxas's report.
    pub log: String,
    /// One entry per entry function, in the order ptxas reported them.
    pub resources: Vec<KernelResources>,
    /// Wall time of `nvrtcCompileProgram`, in milliseconds.
    pub compile_ms: f64,
}

impl Compiled {
    /// The resources of the entry function `name`.
    pub fn resources_of(&self, name: &str) -> Option<&KernelResources> {
        self.resources.iter().find(|r| r.name == name)
    }
}

/// What [`probe`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NvrtcInfo {
    /// `(major, minor)`, e.g. `(13, 0)`.
    pub version: (i32, i32),
    /// Where it was loaded from if it was preloaded by path; `None` when cudarc found it by name.
    pub preloaded_from: Option<PathBuf>,
}

/// Folders searched for `libnvrtc.so.13` when no library name resolves (see the module docs).
fn fallback_library_paths() -> Vec<PathBuf> {
    let mut v = Vec::new();
    if let Some(p) = std::env::var_os("GLA_NVRTC_LIB") {
        v.push(PathBuf::from(p));
    }
    if let Some(d) = std::env::var_os("GLA_CUDA_DIR") {
        v.push(PathBuf::from(d).join("nvidia/cu13/lib/libnvrtc.so.13"));
    }
    // gla-runtime -> the workspace root, where `.ci/install-nvrtc.sh` puts `.cuda/`.
    if let Some(ws) = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(1)
    {
        v.push(ws.join(".cuda/nvidia/cu13/lib/libnvrtc.so.13"));
    }
    v.push(PathBuf::from("/usr/local/cuda/lib64/libnvrtc.so.13"));
    v
}

fn probe_uncached() -> std::result::Result<NvrtcInfo, String> {
    let mut preloaded_from = None;
    if !ffi::nvrtc_present() {
        let mut tried = Vec::new();
        for p in fallback_library_paths() {
            if !p.is_file() {
                tried.push(format!("{} (absent)", p.display()));
                continue;
            }
            // NVRTC dlopens `libnvrtc-builtins.so.13.0` by name at compile time: preload it from the same folder.
            let builtins = p.with_file_name("libnvrtc-builtins.so.13.0");
            if builtins.is_file() {
                if let Err(e) = ffi::preload_library(&builtins) {
                    tried.push(format!("{} ({e})", builtins.display()));
                    continue;
                }
            }
            match ffi::preload_library(&p) {
                Ok(()) if ffi::nvrtc_present() => {
                    preloaded_from = Some(p);
                    break;
                }
                Ok(()) => tried.push(format!(
                    "{} (loaded, but cudarc still cannot open it by name)",
                    p.display()
                )),
                Err(e) => tried.push(format!("{} ({e})", p.display())),
            }
        }
        if preloaded_from.is_none() {
            return Err(format!(
                "libnvrtc.so.13 is not on the library path (cudarc tried {}) nor at {}",
                dedup(library_names()).join(", "),
                tried.join(", ")
            ));
        }
    }
    let version = ffi::nvrtc_version().map_err(|e| format!("nvrtcVersion failed: {e:?}"))?;
    if version.0 != 13 {
        return Err(format!(
            "found NVRTC {}.{}, need 13.x (an older or newer libnvrtc comes first on the library path; \
             put the 13.0 folder first)",
            version.0, version.1
        ));
    }
    Ok(NvrtcInfo {
        version,
        preloaded_from,
    })
}

fn dedup(mut v: Vec<String>) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    v.retain(|x| seen.insert(x.clone()));
    v
}

/// Find and check NVRTC 13 once per process; the typed error is [`GlaError::NoNvrtc`].
pub fn probe() -> Result<NvrtcInfo> {
    static PROBE: OnceLock<std::result::Result<NvrtcInfo, String>> = OnceLock::new();
    PROBE
        .get_or_init(probe_uncached)
        .clone()
        .map_err(GlaError::NoNvrtc)
}

/// Compile `source` to an sm_90a cubin with gla's default options ([`CompileOptions::default`]). `kernel` names
/// the program in errors (e.g. a variant id).
pub fn compile(source: &str, kernel: &str) -> Result<Compiled> {
    compile_with(source, kernel, &CompileOptions::default())
}

/// Compile `source` with `opts` to a cubin. `kernel` names the program in errors (e.g. a variant id).
pub fn compile_with(source: &str, kernel: &str, opts: &CompileOptions) -> Result<Compiled> {
    probe()?;
    if !is_real_arch(&opts.arch) {
        return Err(GlaError::invalid(
            "arch",
            format!(
                "must be a real architecture such as sm_90a (a cubin), got `{}`",
                opts.arch
            ),
        ));
    }
    let options = opts.build();
    let compile_err = |log: String| GlaError::Compile {
        kernel: kernel.to_string(),
        options: options.clone(),
        log,
    };
    let prog = ffi::Program::new(source, kernel).map_err(compile_err)?;
    let t0 = Instant::now();
    let res = prog.compile(&options);
    let compile_ms = t0.elapsed().as_secs_f64() * 1e3;
    let log = prog.log();
    if let Err(e) = res {
        return Err(compile_err(format!("{e:?}\n{log}")));
    }
    let cubin = prog
        .cubin()
        .map_err(|e| compile_err(format!("nvrtcGetCUBIN failed: {e:?}\n{log}")))?;
    if !is_elf(&cubin) {
        return Err(compile_err(format!(
            "NVRTC returned no cubin ({} bytes, not an ELF image)\n{log}",
            cubin.len()
        )));
    }
    let resources = parse_ptxas_report(&log);
    Ok(Compiled {
        cubin,
        log,
        resources,
        compile_ms,
    })
}

/// `sm_NN` or `sm_NNa` / `sm_NNf` (a real architecture, for which NVRTC emits a cubin).
pub fn is_real_arch(arch: &str) -> bool {
    let Some(rest) = arch.strip_prefix("sm_") else {
        return false;
    };
    let digits = rest.trim_end_matches(['a', 'f']);
    !digits.is_empty()
        && digits.len() + 1 >= rest.len()
        && digits.bytes().all(|b| b.is_ascii_digit())
}

/// Whether `bytes` starts with the ELF magic `\x7fELF`.
pub fn is_elf(bytes: &[u8]) -> bool {
    bytes.starts_with(b"\x7fELF")
}

/// Parse ptxas's `-v` report (see the module docs) into one [`KernelResources`] per entry function.
///
/// A block starts at `Compiling entry function 'NAME'` (or `Function properties for NAME` when a log has no such
/// line); `N bytes stack frame, N bytes spill stores, N bytes spill loads` and
/// `Used N registers, ..., N bytes smem, ...` fill it in; a C7512 line naming the kernel sets
/// [`KernelResources::wgmma_serialized`]. Device functions' property blocks (non-entry functions that were not
/// inlined) are attributed to no kernel. Unknown lines are ignored.
pub fn parse_ptxas_report(log: &str) -> Vec<KernelResources> {
    let mut out: Vec<KernelResources> = Vec::new();
    // Index into `out` of the kernel the next lines describe; None inside a non-entry function's block.
    let mut cur: Option<usize> = None;
    for line in log.lines() {
        let l = line.trim();
        if let Some(name) =
            after(l, "Compiling entry function '").and_then(|r| r.split('\'').next())
        {
            out.push(KernelResources {
                name: name.to_string(),
                ..Default::default()
            });
            cur = Some(out.len() - 1);
        } else if let Some(name) = after(l, "Function properties for ") {
            let name = name.trim();
            // None for a function never announced as an entry: a non-inlined device function.
            cur = out.iter().position(|r| r.name == name);
        } else if l.contains("bytes stack frame") {
            if let Some(i) = cur {
                let r = &mut out[i];
                r.stack_bytes = number_before(l, "bytes stack frame").unwrap_or(0);
                r.spill_stores_bytes = number_before(l, "bytes spill stores").unwrap_or(0);
                r.spill_loads_bytes = number_before(l, "bytes spill loads").unwrap_or(0);
            }
        } else if l.contains("Used ") && l.contains(" registers") {
            if let Some(i) = cur {
                let r = &mut out[i];
                r.registers = number_before(l, "registers").unwrap_or(0);
                r.static_smem_bytes = number_before(l, "bytes smem").unwrap_or(0);
                // Includes the frames of non-inlined callees.
                if let Some(c) = number_before(l, "bytes cumulative stack size") {
                    r.stack_bytes = r.stack_bytes.max(c);
                }
            }
        }
    }
    let serialized = wgmma_serialized_functions(log);
    for r in &mut out {
        r.wgmma_serialized = serialized
            .iter()
            .find(|(name, _)| *name == r.name)
            .map(|(_, reason)| reason.to_string());
    }
    out
}

fn after<'a>(s: &'a str, pat: &str) -> Option<&'a str> {
    s.find(pat).map(|i| &s[i + pat.len()..])
}

/// The integer immediately before `unit` in `s` (`"... 40 registers"` → 40).
fn number_before(s: &str, unit: &str) -> Option<u32> {
    let i = s.find(unit)?;
    s[..i]
        .split([',', ':'])
        .next_back()?
        .split_whitespace()
        .next_back()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests;
