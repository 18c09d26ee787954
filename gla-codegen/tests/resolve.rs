//! The emitted kernels' preprocessor conditionals resolve completely (gla_codegen::resolve): nothing is left to a
//! reader but the code that runs, and nothing had to be kept verbatim.
use gla_codegen::resolve::{resolve, NOTE_PREFIX};
use gla_codegen::{all_variants, fixtures, generate, KernelSpec, Tiles};
use gla_core::{DType, Gate};

const DIRECTIVES: [&str; 8] = [
    "if", "ifdef", "ifndef", "elif", "elifdef", "elifndef", "else", "endif",
];

/// The conditional directive on `line`, if any.
fn conditional(line: &str) -> Option<&str> {
    let rest = line.trim_start().strip_prefix('#')?.trim_start();
    let n = rest
        .find(|c: char| !c.is_ascii_alphanumeric())
        .unwrap_or(rest.len());
    DIRECTIVES.contains(&&rest[..n]).then_some(&rest[..n])
}

/// Resolve `spec`'s source; check it is fully resolved, only deletes lines and keeps every kernel; (before, after).
fn check(spec: &KernelSpec) -> (usize, usize) {
    let g = generate(spec).unwrap();
    let r = resolve(&g.source).unwrap_or_else(|e| panic!("{}: {e}", spec.id()));
    assert!(
        r.kept.is_empty(),
        "{}: groups kept verbatim: {:?}",
        spec.id(),
        r.kept
    );
    assert!(!r.source.contains(NOTE_PREFIX), "{}", spec.id());
    for (i, l) in r.source.lines().enumerate() {
        assert!(
            conditional(l).is_none(),
            "{}: line {} still has `{l}`",
            spec.id(),
            i + 1
        );
    }
    // Only whole lines went: the resolved lines are a subsequence of the emitted ones.
    let mut emitted = g.source.lines();
    for l in r.source.lines() {
        assert!(
            emitted.any(|e| e == l),
            "{}: `{l}` is not an emitted line (or out of order)",
            spec.id()
        );
    }
    // Every kernel of the plan is still defined.
    for k in &g.plan.kernels {
        assert!(
            r.source.contains(&format!(" {}(", k.name)),
            "{}: kernel {} lost",
            spec.id(),
            k.name
        );
    }
    let counts = (g.source.lines().count(), r.source.lines().count());
    let conds = g
        .source
        .lines()
        .filter(|l| conditional(l).is_some())
        .count();
    assert!(
        conds > 20,
        "{}: only {conds} conditional directives emitted",
        spec.id()
    );
    counts
}

#[test]
fn emitted_variants_resolve_completely() {
    let t = |block_v, warps, producer_warps, producer_groups, wgmma| Tiles {
        block_v,
        warps,
        producer_warps,
        producer_groups,
        wgmma,
        ctas_per_sm: 1,
    };
    let cases: Vec<KernelSpec> = vec![
        // the per-key default at d = 128 (w8p8x2g), the scalar-gate one, the cluster key split at d_k = 256
        KernelSpec::default_for(&fixtures::PER_KEY, DType::BF16, 128, 128).unwrap(),
        KernelSpec::default_for(&fixtures::PER_HEAD, DType::BF16, 128, 128).unwrap(),
        KernelSpec::default_for(&fixtures::PER_KEY, DType::BF16, 256, 256).unwrap(),
        // the snapshot variants of tests/codegen.rs: plain fused, materialised f32, fixed f16, per value
        KernelSpec::new(
            &fixtures::PER_KEY,
            DType::BF16,
            64,
            16,
            128,
            128,
            false,
            t(64, 4, 0, 1, false),
        )
        .unwrap(),
        KernelSpec::new(
            &fixtures::PER_HEAD,
            DType::F32,
            64,
            16,
            64,
            64,
            true,
            t(32, 4, 0, 1, false),
        )
        .unwrap(),
        KernelSpec::new(
            &fixtures::FIXED,
            DType::F16,
            32,
            16,
            128,
            128,
            false,
            t(64, 4, 0, 1, false),
        )
        .unwrap(),
        KernelSpec::new(
            &fixtures::PER_VALUE,
            DType::BF16,
            64,
            16,
            128,
            128,
            false,
            t(64, 8, 0, 1, false),
        )
        .unwrap(),
        KernelSpec::new(
            &fixtures::PER_KEY,
            DType::BF16,
            32,
            16,
            128,
            128,
            false,
            t(128, 8, 4, 1, false),
        )
        .unwrap(),
    ];
    assert_eq!(
        cases[0].id(),
        "fixture_per_key.fwd.bf16.C32.c16.k128.v128.bv128.w8p8x2g.fused"
    );
    for s in &cases {
        let (before, after) = check(s);
        println!(
            "{}: {before} lines emitted, {after} resolved ({:.0} %)",
            s.id(),
            100.0 * after as f64 / before as f64
        );
        assert!(
            after * 100 < before * 85,
            "{}: {before} -> {after} lines is not much shorter",
            s.id()
        );
    }
}

#[test]
fn every_fixture_variant_resolves_completely() {
    let gates: [&'static dyn Gate; 4] = [
        &fixtures::PER_KEY,
        &fixtures::PER_HEAD,
        &fixtures::FIXED,
        &fixtures::PER_VALUE,
    ];
    let (mut n, mut min, mut max) = (0, f64::MAX, 0f64);
    for g in gates {
        for s in all_variants(g) {
            let (before, after) = check(&s);
            let f = after as f64 / before as f64;
            (min, max) = (min.min(f), max.max(f));
            n += 1;
        }
    }
    println!(
        "{n} variants: resolved to {:.0}–{:.0} % of the emitted lines",
        100.0 * min,
        100.0 * max
    );
    assert!(max < 0.85, "{max}");
}
