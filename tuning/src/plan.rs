//! `autotune --plan`: compile EVERY variant of `all_variants` for the selected gates with NVRTC in parallel (no GPU),
//! print a resource table (variant, kernel, registers, shared memory, spills, compile ms) and fail if any variant
//! fails to compile, spills registers (`gla_codegen::spills_acceptable`: no kernel may), has its wgmma serialised by
//! ptxas (C7512: each asynchronous product waits for the one before) or needs more than [`MAX_SMEM`] bytes of shared
//! memory. CI runs it.

use crate::args::Options;
use gla_codegen::{all_variants, dq_dk_pass_variants, dv_pass_variants, generate, KernelSpec};
use gla_core::Gate;
use rayon::prelude::*;
use std::time::Instant;

/// Shared memory one block may use on sm_90 (227 KB).
pub const MAX_SMEM: u32 = gla_codegen::spec::MAX_SMEM_BYTES;

/// One kernel of one compiled variant.
#[derive(Clone, Debug)]
pub struct Row {
    pub id: String,
    pub kernel: String,
    pub registers: u32,
    pub smem: u32,
    pub spills: u32,
    pub compile_ms: f64,
    /// Why this kernel is not acceptable, if it is not.
    pub problem: Option<String>,
}

fn failed(id: String, problem: String) -> Vec<Row> {
    vec![Row {
        id,
        kernel: "-".into(),
        registers: 0,
        smem: 0,
        spills: 0,
        compile_ms: 0.0,
        problem: Some(problem),
    }]
}

/// Generate and compile `spec`; one row per kernel of its plan.
pub fn compile_one(spec: &KernelSpec) -> Vec<Row> {
    let id = spec.id();
    let gen = match generate(spec) {
        Ok(g) => g,
        Err(e) => return failed(id, e.to_string()),
    };
    match gla_runtime::nvrtc::compile(&gen.source, &id) {
        Err(e) => failed(id, e.to_string()),
        Ok(c) => gen
            .plan
            .kernels
            .iter()
            .map(|k| {
                let r = c.resources.iter().find(|r| r.name == k.name);
                let (registers, spills, static_smem, serialized) = r
                    .map(|r| {
                        (
                            r.registers,
                            r.spill_stores_bytes + r.spill_loads_bytes,
                            r.static_smem_bytes,
                            r.wgmma_serialized.clone(),
                        )
                    })
                    .unwrap_or((0, 0, 0, None));
                let smem = k.smem_bytes + static_smem;
                let problem = if r.is_none() {
                    Some(format!("ptxas reported nothing for kernel {}", k.name))
                } else if !gla_codegen::spills_acceptable(&k.name, spills) {
                    Some(format!("{spills} B of register spills"))
                } else if smem > MAX_SMEM {
                    Some(format!("{smem} B shared memory > {MAX_SMEM}"))
                } else if let Some(why) = serialized {
                    Some(format!("wgmma serialised by ptxas (C7512: {why})"))
                } else {
                    None
                };
                Row {
                    id: id.clone(),
                    kernel: k.name.clone(),
                    registers,
                    smem,
                    spills,
                    compile_ms: c.compile_ms,
                    problem,
                }
            })
            .collect(),
    }
}

/// The variants `--plan` compiles: every variant of `all_variants` of `gates`, their dv passes
/// (`dv_pass_variants`) and scalar gates' dq / dk passes (`dq_dk_pass_variants`), narrowed by `--only` and, where given, `--dims` (d_k and d_v) and `--dtypes`.
pub fn plan_specs(gates: &[&'static dyn Gate], o: &Options) -> Vec<KernelSpec> {
    gates
        .iter()
        .flat_map(|g| {
            all_variants(*g)
                .into_iter()
                .chain(dv_pass_variants(*g))
                .chain(dq_dk_pass_variants(*g))
        })
        .filter(|s| o.selects(&s.id()))
        .filter(|s| o.dtypes.as_ref().is_none_or(|d| d.contains(&s.dtype)))
        .filter(|s| {
            o.dims
                .as_ref()
                .is_none_or(|d| d.contains(&(s.key_dim() as usize)) && d.contains(&(s.dv as usize)))
        })
        .collect()
}

/// Run `--plan`; `true` when every variant compiled within its limits.
pub fn plan(gates: &[&'static dyn Gate], o: &Options) -> bool {
    let specs = plan_specs(gates, o);
    println!(
        "autotune --plan: {} registered gates ({}), {} variants (forward, dv, dq and dk passes), compiling for sm_90a with NVRTC on {} threads",
        gates.len(),
        gates.iter().map(|g| g.name()).collect::<Vec<_>>().join(", "),
        specs.len(),
        rayon::current_num_threads()
    );
    if let Err(e) = gla_runtime::nvrtc::probe() {
        eprintln!("error: {e}");
        return false;
    }
    let t0 = Instant::now();
    let rows: Vec<Row> = specs.par_iter().flat_map_iter(compile_one).collect();
    println!(
        "{:<58} {:<15} {:>5} {:>8} {:>7} {:>9}  status",
        "variant", "kernel", "regs", "smem B", "spill B", "compile ms"
    );
    for r in &rows {
        println!(
            "{:<58} {:<15} {:>5} {:>8} {:>7} {:>9.0}  {}",
            r.id,
            r.kernel,
            r.registers,
            r.smem,
            r.spills,
            r.compile_ms,
            r.problem.as_deref().unwrap_or("ok")
        );
    }
    let bad: Vec<&Row> = rows.iter().filter(|r| r.problem.is_some()).collect();
    let max_regs = rows.iter().map(|r| r.registers).max().unwrap_or(0);
    let max_smem = rows.iter().map(|r| r.smem).max().unwrap_or(0);
    println!(
        "compiled {} variants ({} kernels) in {:.1} s; max {} registers, max {} B shared memory; {} problem(s)",
        specs.len(),
        rows.len(),
        t0.elapsed().as_secs_f64(),
        max_regs,
        max_smem,
        bad.len()
    );
    for r in &bad {
        eprintln!(
            "FAILED {} {}: {}",
            r.id,
            r.kernel,
            r.problem.as_deref().unwrap_or("")
        );
    }
    bad.is_empty()
}
