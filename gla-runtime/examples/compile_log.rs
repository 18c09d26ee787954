//! Compile a CUDA source file with the runtime's NVRTC options and print NVRTC's whole log (ptxas's resource
//! report and warnings, e.g. wgmma serialisation): `cargo run --release -p gla-runtime --example compile_log --
//! kernel.cu gla_fwd_ws [out.ptx]` (the source from `cargo run -p gla-codegen --example dump -- ...`); with a third
//! argument it also writes the PTX (for compute_90a) there, to look up the PTX lines ptxas's remarks name; with
//! `GLA_CUBIN_OUT=path` in the environment the sm_90a cubin as well (for `nvdisasm -c` / `cuobjdump -sass`).
fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    let (Some(path), Some(kernel)) = (a.first(), a.get(1)) else {
        eprintln!("usage: compile_log <source.cu> <kernel name>");
        std::process::exit(2);
    };
    let src = match std::fs::read_to_string(path) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("cannot read {path}: {e}");
            std::process::exit(2);
        }
    };
    if let Some(out) = a.get(2) {
        if gla_runtime::nvrtc::probe().is_err() {
            eprintln!("NVRTC not found");
            std::process::exit(1);
        }
        let opts = cudarc::nvrtc::CompileOptions {
            arch: Some("compute_90a"),
            options: vec!["-default-device".into()],
            ..Default::default()
        };
        match cudarc::nvrtc::compile_ptx_with_opts(&src, opts) {
            Ok(p) => {
                if let Err(e) = std::fs::write(out, p.to_src()) {
                    eprintln!("cannot write {out}: {e}");
                }
            }
            Err(e) => eprintln!("PTX: {e:?}"),
        }
    }
    match gla_runtime::nvrtc::compile(&src, kernel) {
        Ok(c) => {
            print!("{}", c.log);
            // GLA_CUBIN_OUT=path: the cubin too (for nvdisasm / cuobjdump -sass).
            if let Ok(out) = std::env::var("GLA_CUBIN_OUT") {
                if let Err(e) = std::fs::write(&out, &c.cubin) {
                    eprintln!("cannot write {out}: {e}");
                }
            }
        }
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    }
}
