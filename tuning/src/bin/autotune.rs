//! `autotune`: tune the kernel variants of every registered gate (see `tuning` and `autotune --help`). These two
//! lines are the whole binary; a crate with its own gates writes the same in its `src/bin/autotune.rs`.
use std::process::ExitCode;

fn main() -> ExitCode {
    let _ = &gla::gates::Gla; // link the built-in gates
    tuning::main()
}
