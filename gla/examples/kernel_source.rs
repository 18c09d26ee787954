//! Print the CUDA source of one forward variant of a built-in gate, by variant id:
//! `cargo run -p gla --example kernel_source -- gla.fwd.bf16.C64.c16.k128.v128.bv128.w8.fused` (`--list`: every id)
use gla_codegen::{all_variants, generate};

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
