//! Every forward variant of a value-side (per_value) gate compiles for sm_90a with NVRTC — no GPU needed. The
//! autotuner's `--plan` covers the registered built-in gates; none of them is a value gate, so this test covers
//! the value-gate kernels in CI. Skips (printing why) without NVRTC unless `GLA_REQUIRE_NVRTC=1`.
use gla_codegen::{all_variants, generate, spec::MAX_SMEM_BYTES};
use gla_core::{Gate, GateShape};
use gla_runtime::nvrtc;
use gla_runtime::testing::nvrtc_or_skip;
use rayon::prelude::*;

#[test]
fn every_value_gate_variant_compiles_without_spills() {
    if !nvrtc_or_skip("every_value_gate_variant_compiles_without_spills") {
        return;
    }
    let gate: &'static dyn Gate = &tests::gates::ValueGla;
    assert_eq!(gate.shape(), GateShape::PerValue);
    let specs = all_variants(gate);
    // The tuner's space for a value gate: every plain fused and materialized kernel of every dtype and head dim, and
    // the bf16 wgmma kernels of d = 64 and 128 (f16 runs the same kernels: all_variants keeps its defaults only).
    assert!(
        specs.len() >= 18
            && specs.iter().any(|s| s.materialize)
            && specs.iter().any(|s| s.sub_chunk == 32)
            && specs.iter().filter(|s| s.tiles.wgmma).count() >= 2,
        "got {}",
        specs.len()
    );
    let t0 = std::time::Instant::now();
    let problems: Vec<String> = specs
        .par_iter()
        .flat_map_iter(|s| {
            let g = generate(s).expect("valid spec");
            let mut out = Vec::new();
            // One compile per variant (the module holds every kernel of its plan).
            match nvrtc::compile(&g.source, &s.id()) {
                Err(e) => out.push(format!("{}: {e}", s.id())),
                Ok(c) => {
                    for k in &g.plan.kernels {
                        match c.resources_of(&k.name) {
                            None => out.push(format!("{} {}: no ptxas report", s.id(), k.name)),
                            Some(r)
                                if !gla_codegen::spills_acceptable(
                                    &k.name,
                                    r.spill_stores_bytes + r.spill_loads_bytes,
                                ) =>
                            {
                                out.push(format!(
                                    "{} {}: {} B spilled",
                                    s.id(),
                                    k.name,
                                    r.spill_stores_bytes + r.spill_loads_bytes
                                ))
                            }
                            Some(r) if k.smem_bytes + r.static_smem_bytes > MAX_SMEM_BYTES => out
                                .push(format!(
                                    "{} {}: {} B shared memory",
                                    s.id(),
                                    k.name,
                                    k.smem_bytes + r.static_smem_bytes
                                )),
                            Some(_) => {}
                        }
                    }
                }
            }
            out
        })
        .collect();
    println!(
        "compiled {} value-gate variants in {:.1} s",
        specs.len(),
        t0.elapsed().as_secs_f64()
    );
    assert!(
        problems.is_empty(),
        "{} problems:\n{}",
        problems.len(),
        problems.join("\n")
    );
}
