//! `autotune --restamp --out DIR`: carry a cache's entries across a codegen change that does not change their
//! kernels. A cache entry is valid for the source it was timed with (`validators.source_sha256`); any edit of the
//! templates — a comment, a branch of another family — changes every variant's source and would leave the whole
//! cache stale until a GPU re-tunes it. What runs is the machine code. An entry whose current source compiles, with
//! the NVRTC version it was compiled with, to its very cubin (SHA-256), or to a cubin with the same SASS and resource
//! usage (`cuobjdump -sass -res-usage`: every instruction, each kernel's registers, stack, shared and constant memory;
//! not the module's count of global symbols and size of constant bank 4, which can change while every instruction
//! stays the same), runs the same instructions: its timing holds, it takes the new source hash and keeps its cubin.
//! An entry whose machine code differs is left as it is (stale) and listed: that kernel changed and needs a GPU
//! (`autotune --out DIR`). No GPU needed; cuobjdump comes from `GLA_CUOBJDUMP` or `.cuda/tools/nvidia/cu13/bin/`
//! (`bash benches/sass.sh` fetches it); without it only byte-identical cubins are restamped.

use crate::progress::{bar, say};
use gla_codegen::{generate, generate_backward, Pass};
use gla_core::{registered_gates, DType, Gate};
use gla_runtime::cache::{sha256_hex, CacheKey, Entry, TuningCache};
use gla_runtime::nvrtc;
use rayon::prelude::*;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// cuobjdump: `GLA_CUOBJDUMP`, else the copy `benches/sass.sh` puts in `.cuda/tools` (from the current directory).
fn cuobjdump() -> Option<PathBuf> {
    let p = std::env::var_os("GLA_CUOBJDUMP")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(".cuda/tools/nvidia/cu13/bin/cuobjdump"));
    p.is_file().then_some(p)
}

/// A cubin's machine code as cuobjdump prints it (SASS and resource usage of every kernel).
fn machine_code(tool: &Path, cubin: &[u8], tag: &str) -> Result<String, String> {
    let f = std::env::temp_dir().join(format!("gla-restamp-{}-{tag}.cubin", std::process::id()));
    std::fs::write(&f, cubin).map_err(|e| format!("{}: {e}", f.display()))?;
    let mut cmd = Command::new(tool);
    if let Some(dir) = tool.parent() {
        // (cuobjdump runs nvdisasm from its PATH)
        let path = std::env::var_os("PATH").unwrap_or_default();
        let mut dirs = vec![dir.to_path_buf()];
        dirs.extend(std::env::split_paths(&path));
        cmd.env(
            "PATH",
            std::env::join_paths(dirs).map_err(|e| e.to_string())?,
        );
    }
    let out = cmd.args(["-sass", "-res-usage"]).arg(&f).output();
    let _ = std::fs::remove_file(&f);
    let out = out.map_err(|e| format!("{}: {e}", tool.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{} failed: {}",
            tool.display(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    // (Without the module's "Common" usage — its count of global symbols and the size of its constant bank 4 can
    // change while every instruction stays the same: the instructions and each kernel's own usage are compared.)
    let text = String::from_utf8_lossy(&out.stdout);
    let mut kept = Vec::new();
    let mut common = false;
    for line in text.lines() {
        if line.trim() == "Common:" {
            common = true;
            continue;
        }
        if common && line.starts_with("  ") && !line.starts_with(" Function") {
            continue;
        }
        common = false;
        kept.push(line);
    }
    Ok(kept.join("\n"))
}

/// The built-in (registered) gate, dtype and the current `(variant id, source)` that `e` names: its forward
/// variant, backward pass, backward kernel set or decode step rebuilt from its record. Errors say what does not
/// match (an unknown dtype or gate, a record that rebuilds another variant).
pub fn rebuild(e: &Entry) -> Result<(&'static dyn Gate, DType, String, String), String> {
    let dtype = DType::ALL
        .into_iter()
        .find(|d| d.to_string() == e.key.dtype)
        .ok_or_else(|| format!("unknown dtype {:?}", e.key.dtype))?;
    let (dk, dv) = (e.key.dk as usize, e.key.dv as usize);
    let gate = registered_gates()
        .into_iter()
        .find(|g| {
            CacheKey::new(*g, dtype, dk, dv) == e.key
                || CacheKey::backward(*g, dtype, dk, dv) == e.key
                || [Pass::Dv, Pass::Dq, Pass::Dk]
                    .into_iter()
                    .any(|p| CacheKey::of_pass(*g, dtype, dk, dv, p) == e.key)
                || CacheKey::decode(*g, dtype) == e.key
        })
        .ok_or_else(|| {
            format!(
                "no registered gate has key {:?} (gate or its hash changed)",
                e.key
            )
        })?;
    let (id, source) = match (e.key.pass.as_str(), e.spec, e.backward) {
        ("fwd", Some(r), None) => r
            .spec(gate, dtype)
            .and_then(|s| Ok((s.id(), generate(&s)?.source))),
        (p @ ("dv" | "dq" | "dk"), Some(r), None) => r
            .spec(gate, dtype)
            .and_then(|s| {
                s.with_pass(match p {
                    "dv" => Pass::Dv,
                    "dq" => Pass::Dq,
                    _ => Pass::Dk,
                })
            })
            .and_then(|s| Ok((s.id(), generate(&s)?.source))),
        ("bwd", None, Some(r)) => r
            .spec(gate, dtype)
            .and_then(|s| Ok((s.id(), generate_backward(&s)?))),
        ("dec", None, None) => gla_codegen::generate_decode(gate, dtype)
            .map(|src| (gla_codegen::decode_id(gate, dtype), src)),
        (pass, ..) => return Err(format!("pass {pass:?} with the wrong record")),
    }
    .map_err(|err| err.to_string())?;
    if id != e.variant {
        return Err(format!("the record rebuilds {id}, not {}", e.variant));
    }
    Ok((gate, dtype, id, source))
}

/// What [`restamp`] found, entry by entry.
#[derive(Debug, Default)]
pub struct RestampReport {
    /// Entries whose source hash was already current.
    pub current: usize,
    /// Entries brought up to date: their new source compiles to their cubin's machine code.
    pub restamped: usize,
    /// Entries left stale: `variant at bucket: why` (the kernel changed, another NVRTC version, a rebuild error).
    pub stale: Vec<String>,
}

/// Restamp the cache in `dir` (see the module doc) and save it. Errors: no NVRTC, an unreadable or unwritable cache.
pub fn restamp(dir: &Path) -> Result<RestampReport, String> {
    let _ = &gla::gates::Gla; // (links the built-in gates' registrations)
    let nv = nvrtc::probe().map_err(|e| e.to_string())?.version;
    let mut cache = TuningCache::open(dir).map_err(|e| e.to_string())?;
    let mut report = RestampReport::default();
    // The stale entries' new sources, each compiled once (many buckets share a variant).
    let mut todo: Vec<(Entry, String, String)> = Vec::new(); // (entry, new source sha, source)
    for e in cache.entries() {
        let what = format!("{} at {:?}", e.variant, e.bucket);
        match rebuild(e) {
            Err(err) => report.stale.push(format!("{what}: {err}")),
            Ok((.., source)) => {
                let sha = sha256_hex(source.as_bytes());
                if sha == e.validators.source_sha256 {
                    report.current += 1;
                } else if e.validators.nvrtc_version != nv {
                    report.stale.push(format!(
                        "{what}: compiled by NVRTC {:?}, this is {}.{}: its cubin cannot be compared",
                        e.validators.nvrtc_version, nv.0, nv.1
                    ));
                } else {
                    todo.push((e.clone(), sha, source));
                }
            }
        }
    }
    let mut sources: HashMap<String, (String, String)> = HashMap::new(); // sha -> (variant, source)
    for (e, sha, source) in &todo {
        sources
            .entry(sha.clone())
            .or_insert_with(|| (e.variant.clone(), source.clone()));
    }
    println!(
        "restamp {}: {} entries current, {} stale ({} distinct sources to compile with NVRTC {}.{} on {} threads)",
        dir.display(),
        report.current,
        todo.len(),
        sources.len(),
        nv.0,
        nv.1,
        rayon::current_num_threads()
    );
    let tool = cuobjdump();
    if tool.is_none() {
        println!("(no cuobjdump: only byte-identical cubins are restamped; `bash benches/sass.sh <id>` fetches it)");
    }
    let pb = bar(sources.len(), "compiling");
    let cubins: HashMap<String, Result<Vec<u8>, String>> = sources
        .into_par_iter()
        .map(|(sha, (id, source))| {
            pb.set_message(id.clone());
            let c = nvrtc::compile(&source, &id)
                .map(|c| c.cubin)
                .map_err(|e| e.to_string());
            if let Err(e) = &c {
                say(&pb, format!("  {id}: {e}"));
            }
            pb.inc(1);
            (sha, c)
        })
        .collect();
    pb.finish_and_clear();
    let pb = bar(todo.len(), "comparing");
    let mut same_code: HashMap<(String, String), bool> = HashMap::new(); // (old cubin, new source) -> same SASS
    for (mut e, sha, _) in todo {
        pb.inc(1);
        let what = format!("{} at {:?}", e.variant, e.bucket);
        let new = match &cubins[&sha] {
            Ok(c) => c,
            Err(err) => {
                report.stale.push(format!("{what}: {err}"));
                continue;
            }
        };
        let same = if sha256_hex(new) == e.cubin_sha256 {
            true
        } else if let Some(tool) = &tool {
            let k = (e.cubin_sha256.clone(), sha.clone());
            match same_code.get(&k) {
                Some(&v) => v,
                None => {
                    let old = cache.cubin(&e).map_err(|err| format!("{what}: {err}"))?;
                    let v = machine_code(tool, &old, "old")? == machine_code(tool, new, "new")?;
                    same_code.insert(k, v);
                    v
                }
            }
        } else {
            false
        };
        if same {
            // (the cubin that was timed stays: its machine code is the new source's, and the repository does not take
            // a second copy of every kernel for metadata)
            let old = cache.cubin(&e).map_err(|err| format!("{what}: {err}"))?;
            e.validators.source_sha256 = sha;
            cache.insert(e, old);
            report.restamped += 1;
        } else {
            report.stale.push(format!(
                "{what}: the kernel changed (its machine code differs): re-tune on its GPU"
            ));
        }
    }
    pb.finish_and_clear();
    cache.save().map_err(|e| e.to_string())?;
    Ok(report)
}
