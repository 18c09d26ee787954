//! Print the CUDA source of one kernel set of a built-in gate, by id: a forward variant
//! (`cargo run -p gla --example kernel_source -- gla.fwd.bf16.C64.c16.k128.v128.bv128.w8.fused`) or a backward set
//! (`… -- gla.bwd.bf16.k128.v128`, the walk form `… -- gla.bwd.bf16.k128.v128.walk`). `--list`: every id.
use gla_codegen::backward::{generate_backward, BackwardForm, BackwardSpec};
use gla_codegen::{all_variants, generate};
use gla_core::DType;

/// Every backward kernel set of the registered gates: dtype × square head dims × form.
fn backward_specs() -> Vec<BackwardSpec> {
    let mut out = Vec::new();
    for gate in gla_core::registered_gates() {
        for dtype in DType::ALL {
            for d in [64usize, 128, 256, 512] {
                for form in [BackwardForm::Chunks, BackwardForm::Walks] {
                    out.extend(
                        BackwardSpec::for_problem(gate, dtype, d, d)
                            .and_then(|s| s.with_form(form))
                            .ok(),
                    );
                }
            }
        }
    }
    out
}

fn main() {
    let id = std::env::args()
        .nth(1)
        .expect("usage: kernel_source <variant id> | --list");
    let _ = &gla::gates::Gla; // link the built-in gates' registrations
    if id == "--list" {
        gla_core::registered_gates()
            .into_iter()
            .flat_map(all_variants)
            .for_each(|s| println!("{}", s.id()));
        backward_specs().iter().for_each(|s| println!("{}", s.id()));
        return;
    }
    if let Some(spec) = backward_specs().into_iter().find(|s| s.id() == id) {
        match generate_backward(&spec) {
            Ok(src) => print!("{src}"),
            Err(e) => eprintln!("{e}"),
        }
        return;
    }
    let found = gla_core::registered_gates()
        .into_iter()
        .flat_map(all_variants)
        .find(|s| s.id() == id);
    match found.map(|s| generate(&s)) {
        Some(Ok(g)) => print!("{}", g.source),
        Some(Err(e)) => eprintln!("{e}"),
        None => eprintln!("no variant with id {id}"),
    }
}
