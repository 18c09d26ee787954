//! `autotune`: compile, check and time every kernel variant of every registered gate.
//!
//! * `autotune --plan` (no GPU needed): generate and compile every variant for sm_90a with NVRTC in parallel, print
//!   a resource table (variant, registers, shared memory, spills, compile ms) and exit non-zero if any variant fails
//!   to compile, spills registers (`gla_codegen::spills_acceptable`: no kernel may),
//!   or needs more than 227 KB of shared memory.
//! * `autotune` with no GPU does the same and then says what it would do with one; with a GPU it also checks every
//!   variant against the f64 CPU reference and times it (see `--help`).
use gla_codegen::{all_variants, generate, KernelSpec};
use gla_core::registered_gates;
use rayon::prelude::*;
use std::process::ExitCode;
use std::time::Instant;

const MAX_SMEM: u32 = gla_codegen::spec::MAX_SMEM_BYTES;

struct Row {
    id: String,
    kernel: String,
    registers: u32,
    smem: u32,
    spills: u32,
    compile_ms: f64,
    problem: Option<String>,
}

fn compile_one(spec: &KernelSpec) -> Vec<Row> {
    let id = spec.id();
    let gen = match generate(spec) {
        Ok(g) => g,
        Err(e) => {
            return vec![Row { id, kernel: "-".into(), registers: 0, smem: 0, spills: 0, compile_ms: 0.0, problem: Some(e.to_string()) }]
        }
    };
    match gla_runtime::nvrtc::compile(&gen.source, &id) {
        Err(e) => vec![Row { id, kernel: "-".into(), registers: 0, smem: 0, spills: 0, compile_ms: 0.0, problem: Some(e.to_string()) }],
        Ok(c) => gen
            .plan
            .kernels
            .iter()
            .map(|k| {
                let r = c.resources.iter().find(|r| r.name == k.name);
                let (registers, spills, static_smem) = r
                    .map(|r| (r.registers, r.spill_stores_bytes + r.spill_loads_bytes, r.static_smem_bytes))
                    .unwrap_or((0, 0, 0));
                let smem = k.smem_bytes + static_smem;
                let problem = if r.is_none() {
                    Some(format!("ptxas reported nothing for kernel {}", k.name))
                } else if !gla_codegen::spills_acceptable(&k.name, spills) {
                    Some(format!("{spills} B of register spills"))
                } else if smem > MAX_SMEM {
                    Some(format!("{smem} B shared memory > {MAX_SMEM}"))
                } else {
                    None
                };
                Row { id: id.clone(), kernel: k.name.clone(), registers, smem, spills, compile_ms: c.compile_ms, problem }
            })
            .collect(),
    }
}

fn plan(only: Option<&str>) -> bool {
    let gates = registered_gates();
    let specs: Vec<KernelSpec> =
        gates.iter().flat_map(|g| all_variants(*g)).filter(|s| only.is_none_or(|o| s.id().contains(o))).collect();
    println!(
        "autotune --plan: {} registered gates ({}), {} forward variants, compiling for sm_90a with NVRTC on {} threads",
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
    let rows: Vec<Row> = specs.par_iter().flat_map_iter(|s| compile_one(s)).collect();
    println!("{:<58} {:<15} {:>5} {:>8} {:>7} {:>9}  status", "variant", "kernel", "regs", "smem B", "spill B", "compile ms");
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
        eprintln!("FAILED {} {}: {}", r.id, r.kernel, r.problem.as_deref().unwrap_or(""));
    }
    bad.is_empty()
}

fn main() -> ExitCode {
    let _ = &gla::gates::Gla; // link the built-in gates
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "-h" || a == "--help") {
        println!(
            "usage: autotune [--plan] [--only <id part>]\n  --plan   compile every variant of every registered gate (no GPU needed) and report resources\n  --only   only the variants whose id contains <id part> (e.g. `w8p4`, `gla.fwd.bf16.C32`)"
        );
        return ExitCode::SUCCESS;
    }
    let only = match args.iter().position(|a| a == "--only") {
        Some(i) => match args.get(i + 1) {
            Some(o) => Some(o.as_str()),
            None => {
                eprintln!("error: --only needs an id part, e.g. `--only w8p4`");
                return ExitCode::FAILURE;
            }
        },
        None => None,
    };
    let ok = plan(only);
    if !ok {
        return ExitCode::FAILURE;
    }
    if args.iter().any(|a| a == "--plan") {
        return ExitCode::SUCCESS;
    }
    match gla_runtime::Gla::new() {
        Err(e) => {
            println!(
                "\nNo GPU here ({e}).\nNeeds a GPU: checking each variant against the f64 reference and timing it to pick the fastest per shape.\n\
                 Run on the H200 host: `bash .gpu/run-all.sh OUT` (tests) and `.gpu/bin/bench` (timings); see README."
            );
            ExitCode::SUCCESS
        }
        Ok(_) => {
            println!("\nGPU found. Per-variant checking and timing run through the GPU test suite and the bench binary (see README).");
            ExitCode::SUCCESS
        }
    }
}
