//! Print the CUDA source of one variant: `cargo run -p gla-codegen --example dump -- per_key bf16 64 16 128 64 fused 8 4 1` (gate dtype C c D block_v fused|mat warps producer_warps producer_groups [wgmma 0|1] [ctas_per_sm 1|2] [key_split 1|2: d_v doubled])
//!
//! `--resolved <variant id>`: the source of the variant with that id (a fixture gate's, `fixture_per_key.fwd…`, or a
//! built-in gate's, `gla.fwd.bf16.C32.c16.k128.v128.bv128.w8p8x2g.fused`, or a dv pass, `gla.dv.…`, or a dq / dk pass, `mamba2.dq.…`) with every preprocessor conditional whose
//! outcome is known resolved (gla_codegen::resolve): the code that actually runs. An unknown id prints the closest
//! ids and exits with status 2.
use gla_codegen::{
    all_variants, dq_dk_pass_variants, dv_pass_variants, fixtures, generate, KernelSpec, Tiles,
};
use gla_core::{DType, Gate};

fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    if a.first().map(String::as_str) == Some("--resolved") {
        resolved(a.get(1).map(String::as_str).unwrap_or(""));
        return;
    }
    let get = |i: usize, d: &str| a.get(i).cloned().unwrap_or_else(|| d.to_string());
    let gate: &'static dyn Gate = match get(0, "per_key").as_str() {
        "per_head" => &fixtures::PER_HEAD,
        "fixed" => &fixtures::FIXED,
        "per_value" => &fixtures::PER_VALUE,
        _ => &fixtures::PER_KEY,
    };
    let dtype = match get(1, "bf16").as_str() {
        "f32" => DType::F32,
        "f16" => DType::F16,
        _ => DType::BF16,
    };
    let n = |i, d| get(i, d).parse::<u32>().unwrap();
    let spec = KernelSpec::new(
        gate,
        dtype,
        n(2, "64"),
        n(3, "16"),
        n(4, "128"),
        n(4, "128"),
        get(6, "fused") == "mat",
        Tiles {
            block_v: n(5, "64"),
            warps: n(7, "4"),
            producer_warps: n(8, "0"),
            producer_groups: n(9, "1"),
            wgmma: get(10, "0") == "1",
            ctas_per_sm: n(11, "1"),
        },
    );
    // [key_split] (argument 12, default 1): d_v = 256 with a key split of the 128-column key dim
    let ks = n(12, "1");
    let spec = spec.and_then(|s| {
        if ks > 1 {
            KernelSpec::new(
                s.gate,
                s.dtype,
                s.chunk,
                s.sub_chunk,
                s.dk,
                2 * s.dv,
                s.materialize,
                s.tiles,
            )?
            .with_key_split(ks)
        } else {
            Ok(s)
        }
    });
    match spec.and_then(|s| generate(&s)) {
        Ok(g) => {
            eprintln!("{:?}", g.plan);
            print!("{}", g.source)
        }
        Err(e) => eprintln!("{e}"),
    }
}

/// `--resolved <id>`: find the variant among the fixture gates' and the built-in gates' variant spaces.
fn resolved(id: &str) {
    let _ = &gla::gates::Gla; // link the built-in gates' registrations
    let mut gates: Vec<&'static dyn Gate> = vec![
        &fixtures::PER_KEY,
        &fixtures::PER_HEAD,
        &fixtures::FIXED,
        &fixtures::PER_VALUE,
    ];
    gates.extend(gla_core::registered_gates());
    // (and each gate's dv passes, `gla.dv.…`, and a scalar gate's dq / dk passes, `mamba2.dq.…`)
    let variants: Vec<KernelSpec> = gates
        .into_iter()
        .flat_map(|g| {
            all_variants(g)
                .into_iter()
                .chain(dv_pass_variants(g))
                .chain(dq_dk_pass_variants(g))
        })
        .collect();
    let Some(spec) = variants.iter().find(|s| s.id() == id) else {
        let mut near: Vec<(usize, String)> = variants
            .iter()
            .map(|s| s.id())
            .map(|v| (distance(id, &v), v))
            .collect();
        near.sort();
        near.dedup();
        eprintln!("no variant with id `{id}`; the closest:");
        near.iter().take(8).for_each(|(_, v)| eprintln!("  {v}"));
        std::process::exit(2);
    };
    let g = match generate(spec) {
        Ok(g) => g,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    match gla_codegen::resolve::resolve(&g.source) {
        Ok(r) => {
            for k in &r.kept {
                eprintln!(
                    "kept verbatim: line {}: cannot evaluate `{}` (line {}): {}",
                    k.line, k.directive, k.at, k.reason
                );
            }
            eprintln!(
                "{id}: {} lines emitted, {} resolved",
                g.source.lines().count(),
                r.source.lines().count()
            );
            print!("{}", r.source);
        }
        Err(e) => {
            eprintln!("{id}: {e}");
            std::process::exit(1);
        }
    }
}

/// Levenshtein distance (by characters).
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diag = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let next = (diag + (ca != *cb) as usize)
                .min(row[j] + 1)
                .min(row[j + 1] + 1);
            diag = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}
