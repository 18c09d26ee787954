//! Print the CUDA source of one variant: `cargo run -p gla-codegen --example dump -- per_key bf16 64 16 128 64 fused 8 4 1` (gate dtype C c D block_v fused|mat warps producer_warps producer_groups [wgmma 0|1] [ctas_per_sm 1|2] [key_split 1|2: d_v doubled])
use gla_codegen::{fixtures, generate, KernelSpec, Tiles};
use gla_core::{DType, Gate};

fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
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
    let spec = KernelSpec::new(gate, dtype, n(2, "64"), n(3, "16"), n(4, "128"), n(4, "128"), get(6, "fused") == "mat", Tiles { block_v: n(5, "64"), warps: n(7, "4"), producer_warps: n(8, "0"), producer_groups: n(9, "1"), wgmma: get(10, "0") == "1", ctas_per_sm: n(11, "1") });
    // [key_split] (argument 12, default 1): d_v = 256 with a key split of the 128-column key dim
    let ks = n(12, "1");
    let spec = spec.and_then(|s| if ks > 1 { KernelSpec::new(s.gate, s.dtype, s.chunk, s.sub_chunk, s.dk, 2 * s.dv, s.materialize, s.tiles)?.with_key_split(ks) } else { Ok(s) });
    match spec.and_then(|s| generate(&s)) {
        Ok(g) => {
            eprintln!("{:?}", g.plan);
            print!("{}", g.source)
        }
        Err(e) => eprintln!("{e}"),
    }
}
