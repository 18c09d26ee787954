//! Generator tests: validation errors, determinism, launch plans, the variant space, and committed snapshots of
//! the emitted source (`GLA_UPDATE_SNAPSHOTS=1 cargo test -p gla-codegen` rewrites them; CI fails on a diff).
use gla_codegen::{all_variants, fixtures, generate, Features, KernelSpec, Pass, Tiles};
use gla_core::{DType, GlaError};

fn spec(c: u32, sc: u32, d: u32, bv: u32, mat: bool) -> Result<KernelSpec, GlaError> {
    KernelSpec::new(
        &fixtures::PER_KEY,
        DType::BF16,
        c,
        sc,
        d,
        d,
        mat,
        Tiles {
            block_v: bv,
            warps: 4,
            producer_warps: 0,
            producer_groups: 1,
            wgmma: false,
            ctas_per_sm: 1,
        },
    )
}

#[test]
fn rejects_bad_variants_with_a_reason() {
    for (c, sc, d, bv, why) in [
        (48, 16, 128, 64, "chunk size C must be 32, 64 or 128"),
        (32, 64, 128, 64, "sub-chunk c must be 16 or 32 and divide C"),
        (64, 16, 96, 64, "specialised d_k must be 64, 128 or 256"),
        (32, 16, 512, 64, "runs as key slices"),
        (64, 16, 64, 128, "block_v must be"),
        (128, 32, 256, 64, "shared memory"),
    ] {
        let e = spec(c, sc, d, bv, false).unwrap_err().to_string();
        assert!(e.contains(why), "{e}");
    }
}

#[test]
fn generation_is_deterministic_and_self_contained() {
    let s = spec(64, 16, 128, 64, false).unwrap();
    let a = generate(&s).unwrap();
    let b = generate(&s).unwrap();
    assert_eq!(a.source, b.source);
    assert!(
        !a.source.contains("#include"),
        "emitted source must need no headers"
    );
    assert!(a
        .source
        .contains("extern \"C\" __global__ void __launch_bounds__(NT, 1) gla_fwd_fused"));
    // Fused plan: the two-level scan's segment passes (skipped when P = 1), then the fused kernel.
    assert_eq!(
        a.plan
            .kernels
            .iter()
            .map(|k| k.name.as_str())
            .collect::<Vec<_>>(),
        ["gla_fwd_seg_states", "gla_fwd_seg_combine", "gla_fwd_fused"]
    );
    assert!(!a.plan.needs_state_buffer && a.plan.segmented);
    for name in ["gla_fwd_seg_states", "gla_fwd_seg_combine"] {
        assert!(
            a.source
                .contains(&format!("__launch_bounds__(NT, 1) {name}(")),
            "{name} missing"
        );
    }
    let m = generate(&spec(64, 16, 128, 64, true).unwrap()).unwrap();
    assert_eq!(
        m.plan
            .kernels
            .iter()
            .map(|k| k.name.as_str())
            .collect::<Vec<_>>(),
        ["gla_fwd_states", "gla_fwd_output"]
    );
    assert!(m.plan.needs_state_buffer && !m.plan.segmented);
    assert!(m
        .plan
        .kernels
        .iter()
        .all(|k| k.smem_bytes <= gla_codegen::spec::MAX_SMEM_BYTES && k.block == 128));
}

#[test]
fn variant_space_is_complete_and_valid() {
    let v = all_variants(&fixtures::PER_KEY);
    // every chunk size (of the valid space; C = 128 never won and stays out of the tuner's), sub-chunk size, head
    // dim, dtype, and both materialize settings appear
    for c in [32, 64, 128] {
        assert!(
            gla_codegen::variants::candidates(&fixtures::PER_KEY)
                .iter()
                .any(|s| s.chunk == c),
            "C = {c} missing"
        );
    }
    assert!(v.iter().any(|s| s.chunk == 32) && v.iter().any(|s| s.chunk == 64));
    for sc in [16, 32] {
        assert!(v.iter().any(|s| s.sub_chunk == sc));
    }
    for d in [64, 128, 256] {
        assert!(v.iter().any(|s| s.dk == d));
    }
    for dt in DType::ALL {
        assert!(
            v.iter().any(|s| s.dtype == dt && s.materialize)
                && v.iter().any(|s| s.dtype == dt && !s.materialize)
        );
    }
    assert!(v.iter().all(|s| s.validate().is_ok()));
    let ids: std::collections::BTreeSet<_> = v.iter().map(|s| s.id()).collect();
    assert_eq!(ids.len(), v.len(), "ids must be unique");
    let scalar = all_variants(&fixtures::PER_HEAD);
    assert!(scalar.iter().all(|s| s.sub_chunk == 16));
    // value gates decompose with sub-chunks like per-key gates
    let pv = all_variants(&fixtures::PER_VALUE);
    assert!(
        pv.iter().any(|s| s.sub_chunk == 32)
            && pv.iter().any(|s| s.materialize)
            && pv.iter().all(|s| s.validate().is_ok())
    );
}

#[test]
fn the_space_is_what_can_win() {
    use gla_codegen::variants::candidates;
    for g in [
        &fixtures::PER_KEY as &'static dyn gla_core::Gate,
        &fixtures::PER_HEAD,
        &fixtures::FIXED,
        &fixtures::PER_VALUE,
    ] {
        let all = all_variants(g);
        let ids: std::collections::BTreeSet<String> = all.iter().map(|s| s.id()).collect();
        // Every default of a square head dim is a candidate the tuner times, as is every kernel family it may fall
        // back to: the plain fused and materialized kernels of every dtype and head dim.
        for dt in DType::ALL {
            for d in [64, 128, 256] {
                let def = KernelSpec::default_for(g, dt, d, d).unwrap();
                assert!(ids.contains(&def.id()), "default {} missing", def.id());
                for mat in [false, true] {
                    assert!(
                        all.iter().any(|s| s.dtype == dt
                            && s.key_dim() == d as u32
                            && !s.tiles.specialised()
                            && s.materialize == mat),
                        "{} {dt} d {d} mat {mat}",
                        g.name()
                    );
                }
            }
        }
        // A subset of the valid space, and a small one: the runner-ups only (benches/NOTES.md: the defaults won
        // every measured shape).
        let cand: std::collections::BTreeSet<String> =
            candidates(g).iter().map(|s| s.id()).collect();
        assert!(ids.is_subset(&cand), "{}", g.name());
        assert!(
            all.len() <= 45 && all.len() * 5 < cand.len(),
            "{}: {} of {} candidates",
            g.name(),
            all.len(),
            cand.len()
        );
    }
}

fn check_snapshot(name: &str, got: &str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/snapshots")
        .join(name);
    if std::env::var_os("GLA_UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&path, got).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_else(|_| {
        panic!(
            "missing snapshot {}; run with GLA_UPDATE_SNAPSHOTS=1",
            path.display()
        )
    });
    assert!(want == got, "snapshot {name} differs from the generated source; review and run with GLA_UPDATE_SNAPSHOTS=1");
}

#[test]
fn snapshots_of_emitted_source() {
    let cases: [(&str, KernelSpec); 9] = [
        (
            "per_key.bf16.C32.c16.k128.bv128.w8p4.fused.cu",
            ws(&fixtures::PER_KEY, 32, 128, 128, 8, 4).unwrap(),
        ),
        (
            // the per-key default at d = 128: wgmma consumers and the producers' wgmma scores
            "per_key.bf16.C32.c16.k128.bv128.w8p4g.fused.cu",
            KernelSpec::new(
                &fixtures::PER_KEY,
                DType::BF16,
                32,
                16,
                128,
                128,
                false,
                Tiles {
                    block_v: 128,
                    warps: 8,
                    producer_warps: 4,
                    producer_groups: 1,
                    wgmma: true,
                    ctas_per_sm: 1,
                },
            )
            .unwrap(),
        ),
        (
            "per_head.bf16.C32.k128.bv128.w8p4x2g.fused.cu",
            KernelSpec::new(
                &fixtures::PER_HEAD,
                DType::BF16,
                32,
                16,
                128,
                128,
                false,
                Tiles {
                    block_v: 128,
                    warps: 8,
                    producer_warps: 4,
                    producer_groups: 2,
                    wgmma: true,
                    ctas_per_sm: 1,
                },
            )
            .unwrap(),
        ),
        (
            // d_k = 256 for scalar gates: key split 2 as a 2-CTA cluster exchanging the partial outputs over DSMEM
            "per_head.bf16.C32.k128.v256.bv128.w8p4x2g.ks2c.fused.cu",
            KernelSpec::new(
                &fixtures::PER_HEAD,
                DType::BF16,
                32,
                16,
                128,
                256,
                false,
                Tiles {
                    block_v: 128,
                    warps: 8,
                    producer_warps: 4,
                    producer_groups: 2,
                    wgmma: true,
                    ctas_per_sm: 1,
                },
            )
            .unwrap()
            .with_cluster_key_split()
            .unwrap(),
        ),
        (
            "per_key.bf16.C64.c16.k128.bv64.fused.cu",
            spec(64, 16, 128, 64, false).unwrap(),
        ),
        (
            "per_head.f32.C64.k64.bv32.mat.cu",
            KernelSpec::new(
                &fixtures::PER_HEAD,
                DType::F32,
                64,
                16,
                64,
                64,
                true,
                Tiles {
                    block_v: 32,
                    warps: 4,
                    producer_warps: 0,
                    producer_groups: 1,
                    wgmma: false,
                    ctas_per_sm: 1,
                },
            )
            .unwrap(),
        ),
        (
            "fixed.f16.C32.k128.bv64.fused.cu",
            KernelSpec::new(
                &fixtures::FIXED,
                DType::F16,
                32,
                16,
                128,
                128,
                false,
                Tiles {
                    block_v: 64,
                    warps: 4,
                    producer_warps: 0,
                    producer_groups: 1,
                    wgmma: false,
                    ctas_per_sm: 1,
                },
            )
            .unwrap(),
        ),
        (
            "per_value.bf16.C64.c16.k128.bv64.fused.cu",
            KernelSpec::new(
                &fixtures::PER_VALUE,
                DType::BF16,
                64,
                16,
                128,
                128,
                false,
                Tiles {
                    block_v: 64,
                    warps: 8,
                    producer_warps: 0,
                    producer_groups: 1,
                    wgmma: false,
                    ctas_per_sm: 1,
                },
            )
            .unwrap(),
        ),
        (
            // the backward's dv pass on the per-key default at d = 128 (the time-reversed forward)
            "per_key.bf16.C32.c16.k128.bv128.w8p8x2g.dv.cu",
            KernelSpec::default_for(&fixtures::PER_KEY, DType::BF16, 128, 128)
                .and_then(|s| s.with_pass(Pass::Dv))
                .unwrap(),
        ),
    ];
    for (name, s) in cases {
        check_snapshot(name, &generate(&s).unwrap().source);
    }
}

/// The dv pass: key gates on the wgmma family only (a typed error names what it needs), never segmented, scalar
/// gates without row-scaled chunks (A keeps its row factors), and one dv pass for each bf16 / f16 wgmma default of
/// d = 64 … 512.
#[test]
fn dv_pass_variants() {
    let pk = KernelSpec::default_for(&fixtures::PER_KEY, DType::BF16, 128, 128).unwrap();
    let dv = pk.with_pass(Pass::Dv).unwrap();
    assert!(
        dv.id().starts_with("fixture_per_key.dv.bf16."),
        "{}",
        dv.id()
    );
    assert!(Features::of(&dv).reverse && !Features::of(&pk).reverse);
    assert!(!generate(&dv).unwrap().plan.segmented);
    assert!(generate(&pk).unwrap().plan.segmented);
    let scalar = KernelSpec::default_for(&fixtures::PER_HEAD, DType::BF16, 128, 128).unwrap();
    let scalar_dv = scalar.with_pass(Pass::Dv).unwrap();
    assert!(Features::of(&scalar).rows_scaled && !Features::of(&scalar_dv).rows_scaled);
    let value = KernelSpec::default_for(&fixtures::PER_VALUE, DType::BF16, 128, 128).unwrap();
    match value.with_pass(Pass::Dv) {
        Err(GlaError::Unsupported { msg, .. }) => assert!(msg.contains("per-head"), "{msg}"),
        other => panic!("a value gate's dv pass: {other:?}"),
    }
    let d256 = KernelSpec::default_for(&fixtures::PER_KEY, DType::BF16, 256, 256).unwrap();
    assert!(
        d256.with_pass(Pass::Dv).is_ok(),
        "the d = 256 default: a cluster key split"
    );
    let mmasync = ws(&fixtures::PER_KEY, 32, 128, 128, 8, 4).unwrap();
    assert!(mmasync.with_pass(Pass::Dv).is_err(), "mma.sync consumers");
    for g in [
        &fixtures::PER_KEY as &'static dyn gla_core::Gate,
        &fixtures::PER_HEAD,
    ] {
        let ids: Vec<String> = gla_codegen::dv_pass_variants(g)
            .iter()
            .map(|s| s.id())
            .collect();
        assert_eq!(ids.len(), 8, "{ids:?}");
    }
    assert!(gla_codegen::dv_pass_variants(&fixtures::PER_VALUE).is_empty());
}

/// The dq / dk passes: per-head and fixed gates on wgmma without a key split (a typed error names what they need),
/// the gate's row sums at the store, Sᵀ / Q̃ / K̂ as hi + lo halves, dk walked last to first, never segmented; four of
/// each a scalar or per-key gate (bf16 / f16 × d = 64, 128; per key as per-value kernels), none for per-value gates.
#[test]
fn dq_dk_pass_variants() {
    let scalar = KernelSpec::default_for(&fixtures::PER_HEAD, DType::BF16, 128, 128).unwrap();
    let dq = scalar.with_pass(Pass::Dq).unwrap();
    let dk = scalar.with_pass(Pass::Dk).unwrap();
    assert!(
        dq.id().starts_with("fixture_per_head.dq.bf16."),
        "{}",
        dq.id()
    );
    assert!(
        dk.id().starts_with("fixture_per_head.dk.bf16."),
        "{}",
        dk.id()
    );
    let (fq, fk) = (Features::of(&dq), Features::of(&dk));
    assert!(fq.row_sums && fk.row_sums && !Features::of(&scalar).row_sums);
    // (Sᵀ, Q̃, K̂ as hi + lo halves: Q̃ always decayed, the low halves in every slot, consumers with more registers)
    assert!(!fq.reverse && fk.reverse && !fq.rows_scaled && !fk.rows_scaled);
    assert!(fq.split_operands && fk.split_operands && !Features::of(&scalar).split_operands);
    assert!(fq.smem.stage_k_lo > fq.smem.stage_q_lo && fq.smem.stage_q_lo > 0);
    assert_eq!(Features::of(&scalar).smem.stage_q_lo, 0);
    assert!(fq.regs.unwrap().consumer > Features::of(&scalar).regs.unwrap().consumer);
    let src = generate(&dq).unwrap().source;
    assert!(src.contains("#define GLA_ROW_SUMS 1") && src.contains("#define GLA_SPLIT_OPS 1"));
    assert!(!generate(&dq).unwrap().plan.segmented && !generate(&dk).unwrap().plan.segmented);
    // A per-key gate's dq / dk passes are per-value kernels (the decay on the output's columns, d_k): one producer
    // warpgroup, V̂ as hi + lo halves in the K̂_lo tile (q and k raw: no Q̃_lo), the dk pass reversed.
    let pk = KernelSpec::default_for(&fixtures::PER_KEY, DType::BF16, 128, 128).unwrap();
    match pk.with_pass(Pass::Dq) {
        Err(GlaError::Unsupported { msg, .. }) => {
            assert!(msg.contains("4 producer warps"), "{msg}")
        }
        other => panic!("the per-key default (two producer groups) as a dq pass: {other:?}"),
    }
    for d in [64, 128] {
        for pass in [Pass::Dq, Pass::Dk] {
            let s = KernelSpec::pass_default(&fixtures::PER_KEY, DType::BF16, d, d, pass).unwrap();
            let f = Features::of(&s);
            assert_eq!(s.shape(), gla_core::GateShape::PerValue);
            assert!(
                f.value_rows && f.split_operands && f.row_sums && f.reverse == (pass == Pass::Dk)
            );
            assert!(f.smem.stage_q_lo == 0 && f.smem.stage_k_lo > 0);
            let src = generate(&s).unwrap().source;
            assert!(
                src.contains("#define KEY_GATE GATE_PER_VALUE")
                    && src.contains("#define GLA_VALUE_ROWS 1")
            );
        }
    }
    assert!(KernelSpec::pass_default(&fixtures::PER_KEY, DType::BF16, 256, 256, Pass::Dq).is_err());
    assert!(KernelSpec::pass_default(&fixtures::PER_VALUE, DType::BF16, 64, 64, Pass::Dq).is_err());
    let d256 = KernelSpec::default_for(&fixtures::PER_HEAD, DType::BF16, 256, 256).unwrap();
    assert!(
        d256.with_pass(Pass::Dk).is_err(),
        "the d = 256 default: a key split"
    );
    for g in [
        &fixtures::PER_HEAD as &'static dyn gla_core::Gate,
        &fixtures::FIXED,
    ] {
        assert_eq!(gla_codegen::dq_dk_pass_variants(g).len(), 8);
    }
    // (per key: every tile of per_key_pass_tiles, the default first — bf16 4 at d = 64 and 6 at d = 128, f16 4 and 4)
    assert_eq!(
        gla_codegen::dq_dk_pass_variants(&fixtures::PER_KEY).len(),
        18
    );
    for dt in [DType::BF16, DType::F16] {
        for d in [64, 128] {
            for pass in [Pass::Dq, Pass::Dk] {
                let s = KernelSpec::pass_default(&fixtures::PER_KEY, dt, d, d, pass).unwrap();
                assert_eq!(s.tiles, gla_codegen::per_key_pass_tiles(dt, d)[0]);
            }
        }
    }
    assert!(gla_codegen::dq_dk_pass_variants(&fixtures::PER_VALUE).is_empty());
    // (the per-key passes are the default on the bf16 d = 64 and 128 kernels, a call at d = 100 included; else the
    // walks)
    assert!(gla_codegen::per_key_passes_default(DType::BF16, 128));
    assert!(gla_codegen::per_key_passes_default(DType::BF16, 100));
    assert!(gla_codegen::per_key_passes_default(DType::BF16, 64));
    assert!(!gla_codegen::per_key_passes_default(DType::BF16, 256));
    assert!(!gla_codegen::per_key_passes_default(DType::F16, 128));
    assert!(!gla_codegen::per_key_passes_default(DType::F16, 64));
}

#[test]
fn default_variant_exists_for_every_dtype_and_head_dim() {
    for g in [
        &fixtures::PER_KEY as &'static dyn gla_core::Gate,
        &fixtures::PER_HEAD,
        &fixtures::FIXED,
        &fixtures::PER_VALUE,
    ] {
        for dt in DType::ALL {
            for (dk, dv) in [
                1usize, 63, 64, 100, 128, 129, 200, 256, 258, 320, 384, 500, 510, 512,
            ]
            .map(|d| (d, d))
            .into_iter()
            .chain([
                (512, 64),
                (64, 512),
                (128, 512),
                (512, 128),
                (256, 512),
                (510, 300),
                (258, 64),
            ]) {
                let s = KernelSpec::default_for(g, dt, dk, dv)
                    .unwrap_or_else(|e| panic!("{dt} d_k={dk} d_v={dv}: {e}"));
                // (A key-split default serves d_k = key_split · dk, in equal slices.)
                assert!(
                    s.key_dim() as usize >= dk
                        && dk % s.key_split as usize == 0
                        && s.dv as usize >= dv
                        && s.validate().is_ok(),
                    "{}",
                    s.id()
                );
            }
        }
    }
    // An odd d_k over 256 cannot be cut into equal key slices: a typed error that says so and what to do.
    for dk in [259usize, 511] {
        let e = KernelSpec::default_for(&fixtures::PER_KEY, DType::BF16, dk, 128)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("d_k")
                && e.contains("even")
                && e.contains(&dk.to_string())
                && e.contains("pad"),
            "{e}"
        );
    }
    let e = KernelSpec::default_for(&fixtures::PER_KEY, DType::BF16, 513, 64)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("d_k") && e.contains("1..=512") && e.contains("513"),
        "{e}"
    );
    let e = KernelSpec::default_for(&fixtures::PER_KEY, DType::BF16, 64, 600)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("d_v") && e.contains("1..=512") && e.contains("600"),
        "{e}"
    );
}

#[test]
fn default_variants_follow_the_measurements() {
    let id = |g: &'static dyn gla_core::Gate, d: usize| {
        KernelSpec::default_for(g, DType::BF16, d, d).unwrap().id()
    };
    // d = 128: one 128-wide value tile per head (narrow problems are split into segments by the plan instead).
    // d = 128, bf16/f16: the warp-specialised kernel; f32 and value gates: the plain fused one.
    // (consumers on wgmma: 2026-12-01e; with d_v < 128 the mma.sync kernels.)
    assert_eq!(
        id(&fixtures::PER_KEY, 128),
        "fixture_per_key.fwd.bf16.C32.c16.k128.v128.bv128.w8p8x2g.fused"
    );
    // (scalar gates: two producer groups, TMA loads — 2026-12-01h)
    assert_eq!(
        id(&fixtures::PER_HEAD, 128),
        "fixture_per_head.fwd.bf16.C32.c16.k128.v128.bv128.w8p4x2g.fused"
    );
    assert_eq!(
        id(&fixtures::FIXED, 128),
        "fixture_fixed.fwd.bf16.C32.c16.k128.v128.bv128.w8p4x2g.fused"
    );
    let narrow_v = KernelSpec::default_for(&fixtures::PER_HEAD, DType::BF16, 128, 64).unwrap();
    assert!(
        narrow_v.tiles.specialised() && !narrow_v.tiles.wgmma,
        "{}",
        narrow_v.id()
    );
    assert!(
        !KernelSpec::default_for(&fixtures::PER_KEY, DType::F32, 128, 128)
            .unwrap()
            .tiles
            .specialised()
    );
    assert!(
        !KernelSpec::default_for(&fixtures::PER_VALUE, DType::BF16, 128, 128)
            .unwrap()
            .tiles
            .specialised()
    );
    // d = 64, bf16/f16: 4 + 4 warps on wgmma, two CTAs an SM (2026-12-01h); f32 and value gates: the plain ones.
    assert_eq!(
        id(&fixtures::PER_KEY, 64),
        "fixture_per_key.fwd.bf16.C32.c16.k64.v64.bv64.w4p4g.o2.fused"
    );
    assert_eq!(
        id(&fixtures::PER_HEAD, 64),
        "fixture_per_head.fwd.bf16.C32.c16.k64.v64.bv64.w4p4g.o2.fused"
    );
    assert_eq!(
        KernelSpec::default_for(&fixtures::PER_KEY, DType::F32, 64, 64)
            .unwrap()
            .id(),
        "fixture_per_key.fwd.f32.C32.c16.k64.v64.bv64.w4.fused"
    );
    assert_eq!(
        KernelSpec::default_for(&fixtures::PER_VALUE, DType::BF16, 64, 64)
            .unwrap()
            .id(),
        "fixture_per_value.fwd.bf16.C64.c16.k64.v64.bv64.w8.fused"
    );
    // d_k = 256: the d = 128 kernel on two key slices as a 2-CTA cluster (2026-12-02l); f32 the plain one.
    assert_eq!(
        id(&fixtures::PER_KEY, 256),
        "fixture_per_key.fwd.bf16.C32.c16.k128.v256.bv128.w8p4g.ks2c.fused"
    );
    assert_eq!(
        KernelSpec::default_for(&fixtures::PER_KEY, DType::F32, 256, 256)
            .unwrap()
            .id(),
        "fixture_per_key.fwd.f32.C32.c16.k256.v256.bv64.w8.fused"
    );
    assert_eq!(
        id(&fixtures::PER_HEAD, 256),
        "fixture_per_head.fwd.bf16.C32.c16.k128.v256.bv128.w8p4x2g.ks2c.fused"
    );
    // (an odd d_k cannot be halved: the d = 256 kernel)
    assert_eq!(
        KernelSpec::default_for(&fixtures::PER_HEAD, DType::BF16, 201, 256)
            .unwrap()
            .id(),
        "fixture_per_head.fwd.bf16.C64.c16.k256.v256.bv64.w8.fused"
    );
    // Every default is a valid, fused variant of the enumerated space, for every gate shape, dtype and head dim.
    for g in [
        &fixtures::PER_KEY as &'static dyn gla_core::Gate,
        &fixtures::PER_HEAD,
        &fixtures::FIXED,
        &fixtures::PER_VALUE,
    ] {
        let space: std::collections::BTreeSet<String> =
            all_variants(g).iter().map(|s| s.id()).collect();
        for dt in DType::ALL {
            for d in [32usize, 64, 100, 128, 256, 512] {
                let s = KernelSpec::default_for(g, dt, d, d)
                    .unwrap_or_else(|e| panic!("{dt} d={d}: {e}"));
                assert!(
                    space.contains(&s.id()) && !s.materialize,
                    "{} is not a fused variant of the space",
                    s.id()
                );
            }
        }
    }
}

#[test]
fn mild_chunk_overlay_fits_and_is_warp_owned() {
    // decay_operands overlays row i of Γ (f32, LDG = d_k + 12) with Q̃_lo and K̃_lo (two rows of LDK = d_k + 8
    // elements) and orders the overwrite with __syncwarp, which needs every warp to own whole rows of the
    // vector loop: C·d_k/VEC a multiple of 32 and a row at most 32 vectors (or a multiple of 32).
    for s in all_variants(&fixtures::PER_KEY) {
        let e = s.dtype.size_bytes() as u32;
        if !Features::of(&s).split_a {
            continue;
        }
        assert!(
            2 * (s.dk + 8) * e <= 4 * (s.dk + 12),
            "{}: overlay does not fit a Γ row",
            s.id()
        );
        let vec = 16 / e;
        let per_row = s.dk / vec;
        assert!(
            (s.chunk * per_row) % 32 == 0 && (per_row <= 32 || per_row % 32 == 0),
            "{}",
            s.id()
        );
        // rows of the overlay stay 16-byte aligned for ldmatrix
        assert_eq!((4 * (s.dk + 12)) % 16, 0);
    }
    assert_eq!(gla_codegen::writer::span_max(DType::F16), 8.0);
    assert!(gla_codegen::writer::span_max(DType::BF16) <= 64.0);
}

#[test]
fn warp_tiles_divide_the_products_over_the_warps() {
    use gla_codegen::features::warp_tile;
    // O (64 x 128) over 8 warps: 32 x 32 warp tiles (2 x 4 mma tiles), 8 of them.
    assert_eq!(
        warp_tile(64, 128, 8, &[(2, 4), (1, 4), (2, 2), (1, 2)]),
        (2, 4)
    );
    // over 16 warps the 2 x 4 tile leaves 8 for 16 warps: the next preference that gives 16.
    assert_eq!(
        warp_tile(64, 128, 16, &[(2, 4), (1, 4), (2, 2), (1, 2)]),
        (1, 4)
    );
    // nothing fits: one mma tile per step
    assert_eq!(warp_tile(16, 8, 4, &[(2, 4)]), (1, 1));
    // every variant: each product's warp tiles cover it exactly, in a whole number of rounds over the warps
    for s in all_variants(&fixtures::PER_KEY)
        .iter()
        .chain(all_variants(&fixtures::PER_HEAD).iter())
    {
        let (c, dk, bv) = (s.chunk, s.dk, s.tiles.block_v);
        // O and S belong to the state warps; the scores to the producers when the variant is warp-specialised.
        let aw = if s.tiles.specialised() {
            s.tiles.producer_warps / s.tiles.producer_groups
        } else {
            s.tiles.warps
        };
        for (((m, n), (wm, wn)), w) in [(c, bv), (dk, bv), (c, c)]
            .into_iter()
            .zip(Features::of(s).warp_tiles)
            .zip([s.tiles.warps, s.tiles.warps, aw])
        {
            assert!(
                (m / 16) % wm == 0 && (n / 8) % wn == 0,
                "{}: {m}x{n} by {wm}x{wn}",
                s.id()
            );
            let count = (m / 16 / wm) * (n / 8 / wn);
            assert!(
                count >= w || (wm, wn) == (1, 1),
                "{}: {count} warp tiles for {w} warps",
                s.id()
            );
        }
    }
}

fn ws(
    g: &'static dyn gla_core::Gate,
    c: u32,
    d: u32,
    bv: u32,
    w: u32,
    p: u32,
) -> Result<KernelSpec, GlaError> {
    KernelSpec::new(
        g,
        DType::BF16,
        c,
        16,
        d,
        d,
        false,
        Tiles {
            block_v: bv,
            warps: w,
            producer_warps: p,
            producer_groups: 1,
            wgmma: false,
            ctas_per_sm: 1,
        },
    )
}

#[test]
fn warp_specialised_variants_are_validated_with_a_reason() {
    let pk: &'static dyn gla_core::Gate = &fixtures::PER_KEY;
    for (spec, why) in [
        (
            ws(pk, 32, 128, 64, 8, 2),
            "producer_warps must be 0 (no warp specialisation), 4 or 8",
        ),
        (ws(pk, 32, 128, 64, 16, 4), "at most 8 consumer warps"),
        (
            ws(&fixtures::PER_VALUE, 32, 128, 64, 8, 4),
            "a per-value gate is warp-specialised on wgmma consumers",
        ),
        (
            KernelSpec::new(
                pk,
                DType::BF16,
                32,
                16,
                128,
                128,
                true,
                Tiles {
                    block_v: 64,
                    warps: 8,
                    producer_warps: 4,
                    producer_groups: 1,
                    wgmma: false,
                    ctas_per_sm: 1,
                },
            ),
            "fused (materialize off) plan",
        ),
        (ws(pk, 128, 128, 128, 8, 4), "shared memory"),
        (
            KernelSpec::new(
                pk,
                DType::F32,
                32,
                16,
                128,
                128,
                false,
                Tiles {
                    block_v: 64,
                    warps: 8,
                    producer_warps: 4,
                    producer_groups: 1,
                    wgmma: false,
                    ctas_per_sm: 1,
                },
            ),
            "needs a tensor-core dtype",
        ),
        (
            KernelSpec::new(
                pk,
                DType::BF16,
                32,
                16,
                128,
                128,
                false,
                Tiles {
                    block_v: 64,
                    warps: 8,
                    producer_warps: 4,
                    producer_groups: 3,
                    wgmma: false,
                    ctas_per_sm: 1,
                },
            ),
            "producer_groups must be 1 or 2",
        ),
        (
            KernelSpec::new(
                pk,
                DType::BF16,
                32,
                16,
                128,
                128,
                false,
                Tiles {
                    block_v: 64,
                    warps: 8,
                    producer_warps: 0,
                    producer_groups: 2,
                    wgmma: false,
                    ctas_per_sm: 1,
                },
            ),
            "producer_groups must be 1 without producer warps",
        ),
    ] {
        let e = spec.unwrap_err().to_string();
        assert!(e.contains(why), "{e}");
    }
    assert_eq!(
        ws(pk, 32, 128, 128, 8, 4).unwrap().id(),
        "fixture_per_key.fwd.bf16.C32.c16.k128.v128.bv128.w8p4.fused"
    );
}

#[test]
fn warp_specialised_plan_and_slot_ring() {
    let s = ws(&fixtures::PER_KEY, 32, 128, 128, 8, 4).unwrap();
    let g = generate(&s).unwrap();
    // The segment-state pass is warp-specialised too, the combine runs on the state warps alone, the fused pass
    // is the warp-specialised kernel.
    let k: Vec<(&str, u32)> = g
        .plan
        .kernels
        .iter()
        .map(|k| (k.name.as_str(), k.block))
        .collect();
    assert_eq!(
        k,
        [
            ("gla_fwd_ws_states", 384),
            ("gla_fwd_seg_combine", 256),
            ("gla_fwd_ws", 384)
        ]
    );
    assert!(g
        .source
        .contains("__launch_bounds__(NT + PT, CTAS_PER_SM) gla_fwd_ws("));
    assert!(g
        .source
        .contains("__launch_bounds__(NT + PT, CTAS_PER_SM) gla_fwd_ws_states("));
    assert!(g.source.contains("constexpr int CTAS_PER_SM = 1;"));
    // The combine's grid: value tiles x (heads · blocks of 4·256/128 = 8 state rows: 128 / 8 = 16) x sequences.
    use gla_codegen::GridAxis;
    assert_eq!(
        g.plan.kernels[1].grid,
        [
            GridAxis::VTiles { block_v: 128 },
            GridAxis::HeadBlocks { blocks: 16 },
            GridAxis::SplitSequences
        ]
    );
    // A plain variant: 4 warps, 64-wide tiles, d_k 64 → blocks of 8 rows, 8 blocks per head.
    let plain = generate(&spec(32, 16, 64, 64, false).unwrap()).unwrap();
    let comb = plain
        .plan
        .kernels
        .iter()
        .find(|k| k.name == "gla_fwd_seg_combine")
        .unwrap();
    assert_eq!(comb.grid[1], GridAxis::HeadBlocks { blocks: 8 });
    // Only the family's templates are emitted: the warp-specialised source has no plain fused kernel, and the other
    // way round.
    assert!(
        g.source.contains("gla_fwd_ws(") && !g.source.contains("gla_fwd_fused("),
        "the plain fused kernel is left out"
    );
    assert!(
        plain.source.contains("gla_fwd_fused(") && !plain.source.contains("gla_fwd_ws("),
        "the warp-specialised kernel is left out"
    );
    // d = 128, 128-wide value tiles at C 32: three slots fit (loads of chunk n+1 land while the producers work on
    // chunk n and the consumers on chunk n-1).
    assert_eq!(Features::of(&s).smem.stages, 3);
    let mut seen = 0;
    for gate in [
        &fixtures::PER_KEY as &'static dyn gla_core::Gate,
        &fixtures::PER_HEAD,
        &fixtures::FIXED,
    ] {
        for v in gla_codegen::variants::candidates(gate)
            .into_iter()
            .filter(|v| v.tiles.specialised())
        {
            seen += 1;
            let l = Features::of(&v).smem;
            // Four slots exactly where two TMA producer groups load midway through a chunk (each slot one group's).
            let mid = Features::of(&v).mid_issue();
            assert!(
                if mid {
                    l.stages == 4
                } else {
                    l.stages == 2 || l.stages == 3
                },
                "{}",
                v.id()
            );
            assert_eq!(
                mid,
                v.tiles.producer_groups == 2 && Features::of(&v).tma,
                "{}",
                v.id()
            );
            // Per key, the fourth slot fits only with the logits tiles per producer group, past the ring.
            assert_eq!(
                Features::of(&v).x_per_group,
                mid && v.gate.shape() == gla_core::GateShape::PerKey,
                "{}",
                v.id()
            );
            if Features::of(&v).x_per_group {
                assert!(
                    l.xg >= l.stages * l.stage_bytes && l.xg_stride > 0,
                    "{}",
                    v.id()
                );
            }
            assert!(l.total <= gla_codegen::spec::MAX_SMEM_BYTES, "{}", v.id());
            // Named barriers of the 16 of sm_90: consumers, two producer groups, FULL[b], EMPTY[b] (one a slot where
            // the slots are the groups' own, else one a (slot, group)), one a consumer warpgroup.
            let empty = if mid || v.tiles.producer_groups == 1 {
                l.stages
            } else {
                2 * l.stages
            };
            assert!(4 + l.stages + empty + v.tiles.warps / 4 <= 16, "{}", v.id());
            // Everything a consumer reads of a chunk is in its slot; the producers' Γ / totals and the consumers'
            // state tile lie past the ring.
            let ring = l.stages * l.stage_bytes;
            for off in [l.a, l.a_lo, l.gl] {
                assert!(
                    off < l.stage_bytes,
                    "{}: per-chunk tile outside slot 0",
                    v.id()
                );
            }
            assert!(
                l.st >= ring && l.tot >= ring && l.total >= l.st,
                "{}",
                v.id()
            );
            if v.gate.shape() == gla_core::GateShape::PerKey {
                assert!(
                    l.g >= ring,
                    "{}: per-key Γ must be the producers' own",
                    v.id()
                );
            } else {
                assert!(
                    l.g < l.stage_bytes,
                    "{}: scalar Γ travels with the chunk",
                    v.id()
                );
            }
            assert_eq!(
                generate(&v).unwrap().plan.kernels[2].block,
                v.tiles.threads()
            );
        }
    }
    assert!(seen > 50, "{seen} warp-specialised variants");
    // value gates: on wgmma consumers only, 4 producer warps (one or two groups), never segmented (no segment-state
    // pass)
    let pv: Vec<_> = all_variants(&fixtures::PER_VALUE)
        .into_iter()
        .filter(|v| v.tiles.specialised())
        .collect();
    assert!(!pv.is_empty());
    for v in &pv {
        assert!(
            v.tiles.wgmma && v.tiles.producer_warps == 4 && v.key_split == 1,
            "{}",
            v.id()
        );
        let g = generate(v).unwrap();
        assert!(!g.plan.segmented && g.plan.kernels.len() == 1, "{}", v.id());
        assert!(g.source.contains("#define GLA_VALUE_ROWS 1"), "{}", v.id());
    }
}

#[test]
fn wgmma_variants_are_validated() {
    let t = |bv, w, p, c, d| {
        KernelSpec::new(
            &fixtures::PER_KEY,
            DType::BF16,
            c,
            16,
            d,
            d,
            false,
            Tiles {
                block_v: bv,
                warps: w,
                producer_warps: p,
                producer_groups: 1,
                wgmma: true,
                ctas_per_sm: 1,
            },
        )
    };
    assert!(t(128, 8, 4, 32, 128).is_ok());
    assert!(t(64, 4, 4, 32, 64).is_ok());
    for (bv, w, p, c, d, what) in [
        (128, 8, 0, 32, 128, "warp-specialised"),
        (64, 8, 4, 32, 128, "block_v must be 16 · warps"),
        (64, 4, 4, 32, 256, "d_k must be 64 or 128"),
        (64, 4, 4, 64, 64, "C = 32"),
    ] {
        let e = t(bv, w, p, c, d)
            .err()
            .unwrap_or_else(|| panic!("bv {bv} w {w} p {p} C {c} d {d} should be refused"))
            .to_string();
        assert!(e.contains(what), "{e}");
    }
    let f32 = KernelSpec::new(
        &fixtures::PER_KEY,
        DType::F32,
        32,
        16,
        128,
        128,
        false,
        Tiles {
            block_v: 128,
            warps: 8,
            producer_warps: 4,
            producer_groups: 1,
            wgmma: true,
            ctas_per_sm: 1,
        },
    );
    assert!(f32.is_err());
    // The search space holds them (C 32, d <= 128, 4 + 4 or 8 + 4 warps) and their ids say so.
    let all = gla_codegen::all_variants(&fixtures::PER_KEY);
    let wg: Vec<_> = all.iter().filter(|s| s.tiles.wgmma).collect();
    assert!(!wg.is_empty());
    for s in wg {
        assert!(
            (s.id().contains("g.fused")
                || s.id().contains("g.o2.fused")
                || s.id().contains("g.ks2.fused")
                || s.id().contains("g.ks2c.fused")
                || s.id().contains("g.ks4.fused"))
                && s.chunk == 32
                && s.dk <= 128
                && s.tiles.warps + s.tiles.producer_warps <= 16,
            "{}",
            s.id()
        );
    }
}

#[test]
fn wgmma_tiles_are_swizzle_aligned_and_fit() {
    use gla_codegen::features::SWIZZLE_ALIGN;
    let mut seen = 0;
    let mut scored = 0;
    let mut tma = 0;
    for g in [
        &fixtures::PER_KEY as &'static dyn gla_core::Gate,
        &fixtures::PER_HEAD,
        &fixtures::FIXED,
    ] {
        for s in all_variants(g).into_iter().filter(|s| s.tiles.wgmma) {
            seen += 1;
            let l = Features::of(&s).smem;
            let e = s.dtype.size_bytes() as u32;
            // Every swizzled tile (q, k, v, A, A_lo) starts on a 1024-byte boundary of every slot, and holds its
            // unpadded rows: q / k C x d_k, v C x block_v, A C x 64 (one panel); the panels of q / k / v are
            // C x 64 elements (the kernel's PANEL = C · 128 bytes).
            assert_eq!(l.stage_bytes % SWIZZLE_ALIGN, 0, "{}", s.id());
            for (name, off) in [
                ("q", l.stage_q),
                ("k", l.stage_k),
                ("v", l.stage_v),
                ("A", l.a),
                ("A_lo", l.a_lo),
            ] {
                assert_eq!(off % SWIZZLE_ALIGN, 0, "{} tile {name} at {off}", s.id());
            }
            assert!(
                l.stage_k - l.stage_q >= s.chunk * s.dk * e
                    && l.stage_x - l.stage_v >= s.chunk * s.tiles.block_v * e,
                "{}",
                s.id()
            );
            assert!(l.a_lo - l.a >= s.chunk * 64 * e, "{}", s.id());
            // The state copy of the 8 + 8-warp form (one 64 x d_k tile per consumer warpgroup) is aligned too; the
            // output staging tile holds C rows of block_v + 8 elements; the slack lets the kernel align its base.
            if Features::of(&s).wg_smem_s {
                assert_eq!(l.st % SWIZZLE_ALIGN, 0, "{}", s.id());
                assert_eq!(
                    l.st_bytes,
                    (s.tiles.warps / 4) * 64 * s.dk * e,
                    "{}",
                    s.id()
                );
            } else {
                assert_eq!(l.st_bytes, 0, "{}", s.id());
            }
            assert!(
                l.os % 16 == 0 && l.os >= l.stages * l.stage_bytes,
                "{}",
                s.id()
            );
            assert!(
                l.total >= l.os + s.chunk * (s.tiles.block_v + 8) * e + SWIZZLE_ALIGN,
                "{}",
                s.id()
            );
            assert!(l.total <= gla_codegen::spec::MAX_SMEM_BYTES, "{}", s.id());
            // The emitted source says so, and carries the variant's wgmma instructions.
            let src = generate(&s).unwrap().source;
            assert!(
                src.contains("#define GLA_WGMMA 1")
                    && src.contains(&format!("m64n{}k16", s.dk))
                    && src.contains(&format!("m64n{}k16", s.chunk)),
                "{}",
                s.id()
            );
            // Producer-side wgmma scores: per group the 2C x d_k f32 tile [Q̃; K̃] (tf32), 1024-aligned, after everything
            // else and inside the allocation (less the alignment slack).
            if Features::of(&s).wg_scores {
                scored += 1;
                assert!(
                    s.chunk == 32 && s.tiles.producer_warps / s.tiles.producer_groups == 4,
                    "{}",
                    s.id()
                );
                assert_eq!(l.ps % SWIZZLE_ALIGN, 0, "{}", s.id());
                assert!(
                    l.ps_stride % SWIZZLE_ALIGN == 0 && l.ps_stride >= 2 * s.chunk * s.dk * 4,
                    "{}",
                    s.id()
                );
                assert!(
                    l.ps >= l.os + s.chunk * (s.tiles.block_v + 8) * e,
                    "{}",
                    s.id()
                );
                assert!(
                    l.total >= l.ps + s.tiles.producer_groups * l.ps_stride + SWIZZLE_ALIGN,
                    "{}",
                    s.id()
                );
                assert!(
                    src.contains("#define GLA_WG_SCORES 1")
                        && src.contains(&format!("m64n{}k8.f32.tf32.tf32", s.chunk)),
                    "{}",
                    s.id()
                );
            } else {
                assert!(
                    l.ps == 0 && l.ps_stride == 0 && src.contains("#define GLA_WG_SCORES 0"),
                    "{}",
                    s.id()
                );
            }
            // TMA loads (the per-key wgmma-score variants, the scalar gates' 4-producer ones): three 8-byte mbarriers
            // inside the allocation, apart from every tile; the boxes are 64 columns wide, so d_k and the value tile
            // are whole panels.
            if Features::of(&s).tma {
                tma += 1;
                let scalar =
                    s.shape() != gla_core::GateShape::PerKey && s.tiles.producer_warps == 4;
                assert!(
                    (Features::of(&s).wg_scores || scalar)
                        && s.dk % 64 == 0
                        && s.tiles.block_v % 64 == 0,
                    "{}",
                    s.id()
                );
                assert!(
                    l.mbar % 8 == 0 && l.mbar >= l.ps + s.tiles.producer_groups * l.ps_stride,
                    "{}",
                    s.id()
                );
                assert!(
                    l.mbar >= l.os + s.chunk * (s.tiles.block_v + 8) * e,
                    "{}",
                    s.id()
                );
                assert!(l.total >= l.mbar + 24 + SWIZZLE_ALIGN, "{}", s.id());
                assert!(
                    src.contains("#define GLA_TMA 1") && src.contains("cp.async.bulk.tensor.3d"),
                    "{}",
                    s.id()
                );
            } else {
                assert!(
                    l.mbar == 0 && src.contains("#define GLA_TMA 0"),
                    "{}",
                    s.id()
                );
            }
        }
    }
    assert!(seen >= 12, "{seen} wgmma variants");
    assert!(
        scored >= 2,
        "{scored} variants with the producers' wgmma scores"
    );
    assert!(tma >= 2, "{tma} variants with TMA loads");
    // The per-key default at d = 128 has them.
    let d = KernelSpec::default_for(&fixtures::PER_KEY, DType::BF16, 128, 128).unwrap();
    assert!(Features::of(&d).wg_scores, "{}", d.id());
    // Without the flag nothing of it is emitted.
    let plain = ws(&fixtures::PER_KEY, 32, 128, 128, 8, 4).unwrap();
    let src = generate(&plain).unwrap().source;
    assert!(src.contains("#define GLA_WGMMA 0") && !src.contains("wgmma.mma_async.sync"));
}

/// A model of `gate_decays_vec`'s lane map (stages.cuh) and of the tiles it reads and writes: the 16-byte accesses
/// of each quarter-warp (the unit a 128-bit shared access is served in) must fall in distinct 16-byte bank groups —
/// the logits tile x (padded rows of d_k + 8), q / k (128-byte swizzle, bf16), and at most two-way for the f32 tile
/// [Q̃; K̃]. v10c put an octet's segments on consecutive lanes (`lane % SEGS`): 4-way conflicts, 0.635 vs 0.366 ms.
#[test]
fn gate_decays_vec_lane_map_is_bank_conflict_free() {
    fn swz_bf16(rows: u32, r: u32, c: u32) -> u32 {
        2 * (((c >> 6) * (rows * 64) + r * 64 + (c & 63)) ^ ((r & 7) << 3))
    }
    fn swz_f32(rows: u32, r: u32, c: u32) -> u32 {
        4 * (((c >> 5) * (rows * 32) + r * 32 + (c & 31)) ^ ((r & 7) << 2))
    }
    // Worst multiplicity of a 16-byte bank group within a quarter-warp, over the thread's rows u.
    // `nt` threads in the producer group (one warpgroup, or two at 8 + 8 warps).
    fn worst(nt: u32, dk: u32, c: u32, consecutive: bool, byte: &dyn Fn(u32, u32) -> u32) -> usize {
        let (segs, sr) = (nt / (dk / 8), c / (nt / (dk / 8)));
        let opw = 32 / segs;
        let mut w = 0;
        for warp in 0..nt / 32 {
            for u in 0..sr {
                for q in 0..4 {
                    let mut groups = [0usize; 8];
                    for lane in 8 * q..8 * q + 8 {
                        let (seg, oct) = if consecutive {
                            (lane % segs, (32 * warp + lane) / segs)
                        } else {
                            (lane / opw, warp * opw + lane % opw)
                        };
                        groups[((byte(seg * sr + u, 8 * oct) / 16) % 8) as usize] += 1;
                    }
                    w = w.max(*groups.iter().max().unwrap());
                }
            }
        }
        w
    }
    for (nt, dk) in [(128u32, 64u32), (128, 128), (256, 64), (256, 128)] {
        let c = 32;
        let x = |r: u32, col: u32| 2 * (r * (dk + 8) + col);
        let qk_lo = |r: u32, col: u32| swz_f32(2 * c, r, col);
        let qk_hi = |r: u32, col: u32| swz_f32(2 * c, r, col + 4);
        assert_eq!(
            worst(nt, dk, c, false, &x),
            1,
            "logits tile, {nt} threads, d_k = {dk}"
        );
        assert_eq!(
            worst(nt, dk, c, false, &|r, col| swz_bf16(c, r, col)),
            1,
            "q / k tiles, {nt} threads, d_k = {dk}"
        );
        assert!(
            worst(nt, dk, c, false, &qk_lo) <= 2 && worst(nt, dk, c, false, &qk_hi) <= 2,
            "[Q̃; K̃], {nt} threads, d_k = {dk}"
        );
    }
    // The model sees v10c's conflicts at d_k = 128, where they were measured (so the test can fail).
    assert!(worst(128, 128, 32, true, &|r, col| swz_bf16(32, r, col)) >= 4);
}

#[test]
fn two_ctas_an_sm_are_validated() {
    let t = |bv, w, p, d, wg, ctas| {
        KernelSpec::new(
            &fixtures::PER_KEY,
            DType::BF16,
            32,
            16,
            d,
            d,
            false,
            Tiles {
                block_v: bv,
                warps: w,
                producer_warps: p,
                producer_groups: 1,
                wgmma: wg,
                ctas_per_sm: ctas,
            },
        )
    };
    let two = t(64, 4, 4, 64, true, 2).unwrap();
    assert_eq!(
        two.id(),
        "fixture_per_key.fwd.bf16.C32.c16.k64.v64.bv64.w4p4g.o2.fused"
    );
    let g = generate(&two).unwrap();
    assert!(g.source.contains("constexpr int CTAS_PER_SM = 2;"));
    // Both CTAs' shared memory (and the 1 KB the hardware keeps for each) fit in one SM.
    let smem = g.plan.kernels.iter().map(|k| k.smem_bytes).max().unwrap();
    assert!(
        2 * (smem + gla_codegen::SMEM_RESERVED_PER_CTA) <= gla_codegen::SMEM_PER_SM,
        "{smem}"
    );
    for (bv, w, p, d, wg, ctas, why) in [
        (
            64,
            4,
            0,
            64,
            false,
            2,
            "warp-specialised variant of 256 threads",
        ),
        (128, 8, 4, 128, true, 2, "256 threads"),
        (64, 4, 4, 128, true, 2, "d_k = 64 only"),
        (64, 4, 4, 64, true, 3, "ctas_per_sm must be 1 or 2"),
    ] {
        let e = t(bv, w, p, d, wg, ctas)
            .err()
            .unwrap_or_else(|| panic!("{bv} {w} {p} {d} {ctas} should be refused"))
            .to_string();
        assert!(e.contains(why), "{e}");
    }
    // The search space has them (every gate but value gates, d = 64) and segments fill 2 · 132 CTAs.
    assert!(gla_codegen::all_variants(&fixtures::PER_HEAD)
        .iter()
        .any(|s| s.tiles.ctas_per_sm == 2));
    assert!(gla_codegen::all_variants(&fixtures::PER_KEY)
        .iter()
        .filter(|s| s.tiles.ctas_per_sm == 2)
        .all(|s| s.dk == 64 && s.tiles.threads() == 256));
    assert_eq!(gla_codegen::segments_on(264, 2, 16, 1, 256), 8);
}

#[test]
fn key_split_variants_are_validated_and_planned() {
    use gla_codegen::GridAxis;
    let tiles = |wg| Tiles {
        block_v: 128,
        warps: 8,
        producer_warps: 4,
        producer_groups: 1,
        wgmma: wg,
        ctas_per_sm: 1,
    };
    let s = KernelSpec::new(
        &fixtures::PER_KEY,
        DType::BF16,
        32,
        16,
        128,
        256,
        false,
        tiles(true),
    )
    .unwrap()
    .with_key_split(2)
    .unwrap();
    assert_eq!(
        s.id(),
        "fixture_per_key.fwd.bf16.C32.c16.k128.v256.bv128.w8p4g.ks2.fused"
    );
    assert_eq!(s.key_dim(), 256);
    let g = generate(&s).unwrap();
    assert!(g.source.contains("#define KSPLIT 2"));
    assert!(g.source.contains("gla_fwd_ksum"));
    // The key-split sum runs last, over the outputs.
    let last = g.plan.kernels.last().unwrap();
    assert_eq!(last.name, "gla_fwd_ksum");
    assert_eq!(
        last.grid,
        [
            GridAxis::KeySplitSum {
                key_split: 2,
                per_block: 1024
            },
            GridAxis::One,
            GridAxis::One
        ]
    );
    // Without a key split the source says KSPLIT 1 and the plan has no sum.
    let one = KernelSpec::new(
        &fixtures::PER_KEY,
        DType::BF16,
        32,
        16,
        128,
        128,
        false,
        tiles(true),
    )
    .unwrap();
    let g1 = generate(&one).unwrap();
    assert!(
        g1.source.contains("#define KSPLIT 1")
            && g1.plan.kernels.iter().all(|k| k.name != "gla_fwd_ksum")
    );
    // (Per-value gates on wgmma are not key-split.)
    let e = KernelSpec::new(
        &fixtures::PER_VALUE,
        DType::BF16,
        32,
        16,
        128,
        256,
        false,
        tiles(true),
    )
    .and_then(|s| s.with_key_split(2))
    .unwrap_err()
    .to_string();
    assert!(e.contains("no key split"), "{e}");
    // Key splits 2 and 4 on every fused family (the plain and mma.sync kernels write f32 partials from
    // output_chunk); not on the materialized plan, and no other count.
    let plain = Tiles {
        block_v: 64,
        warps: 8,
        producer_warps: 0,
        producer_groups: 1,
        wgmma: false,
        ctas_per_sm: 1,
    };
    for gate in [
        &fixtures::PER_HEAD as &'static dyn gla_core::Gate,
        &fixtures::PER_KEY,
        &fixtures::PER_VALUE,
    ] {
        let s4 = KernelSpec::new(gate, DType::F32, 32, 16, 128, 128, false, plain)
            .unwrap()
            .with_key_split(4)
            .unwrap();
        assert_eq!(s4.key_dim(), 512);
        let g4 = generate(&s4).unwrap();
        assert!(
            g4.source.contains("#define KSPLIT 4")
                && g4.plan.kernels.last().unwrap().name == "gla_fwd_ksum"
        );
        assert_eq!(Features::of(&s4).workspace_partials(), 4);
    }
    for (gate, wg, mat, ks, why) in [
        (
            &fixtures::PER_KEY as &'static dyn gla_core::Gate,
            false,
            true,
            2,
            "fused plan",
        ),
        (&fixtures::PER_VALUE, false, true, 4, "fused plan"),
        (
            &fixtures::PER_KEY,
            true,
            false,
            3,
            "key_split must be 1, 2 or 4",
        ),
    ] {
        let t = if wg { tiles(true) } else { plain };
        let e = KernelSpec::new(gate, DType::BF16, 32, 16, 128, 256, mat, t)
            .unwrap()
            .with_key_split(ks)
            .unwrap_err()
            .to_string();
        assert!(e.contains(why), "{e}");
    }
    // The cluster form needs wgmma consumers.
    let e = KernelSpec::new(
        &fixtures::PER_KEY,
        DType::BF16,
        32,
        16,
        128,
        256,
        false,
        tiles(false),
    )
    .unwrap()
    .with_cluster_key_split()
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("cluster key split") && e.contains("wgmma"),
        "{e}"
    );
    // The valid space has them for per-key gates (4 producer warps; 8 in two groups spill with the exact path's
    // levels) and the scalar gates (4 in two groups), serving d = 256; none for per-value gates. (The tuner's space keeps the bf16 ones and f16's default.)
    // Each also as a 2-CTA cluster where the exchange tile fits (per key: not beside 8 producer warps' four slots).
    let ks: Vec<_> = gla_codegen::variants::candidates(&fixtures::PER_KEY)
        .into_iter()
        .filter(|s| s.key_split == 2)
        .collect();
    assert_eq!(
        ks.len(),
        4,
        "bf16 and f16, 4 producer warps, and as clusters"
    );
    assert!(ks.iter().all(|s| s.key_dim() == 256 && s.dv == 256));
    // Key split 4 (d = 512): the same wgmma kernels (bf16, f16) and one plain kernel a dtype.
    let ks4: Vec<_> = gla_codegen::variants::candidates(&fixtures::PER_KEY)
        .into_iter()
        .filter(|s| s.key_split == 4)
        .collect();
    assert_eq!(ks4.len(), 2 + 3, "{ks4:?}");
    assert!(ks4
        .iter()
        .all(|s| s.key_dim() == 512 && s.dv == 512 && !s.cluster));
    assert!(ks
        .iter()
        .filter(|s| s.cluster)
        .all(|s| s.tiles.producer_warps == 4 && s.id().contains(".ks2c.")));
    for scalar in [
        &fixtures::PER_HEAD as &'static dyn gla_core::Gate,
        &fixtures::FIXED,
    ] {
        let ks: Vec<_> = gla_codegen::variants::candidates(scalar)
            .into_iter()
            .filter(|s| s.key_split == 2)
            .collect();
        assert_eq!(ks.len(), 4, "bf16 and f16, each also as a cluster");
        assert!(ks.iter().all(|s| s.key_dim() == 256
            && s.dv == 256
            && s.tiles.producer_groups == 2
            && Features::of(s).tma));
    }
    assert!(gla_codegen::all_variants(&fixtures::PER_VALUE)
        .iter()
        .all(|s| s.key_split == 1 || (s.key_split == 4 && !s.tiles.specialised())));
    // The cluster form: the two slices of a head are one 2-CTA cluster exchanging partial outputs on chip — no
    // sum kernel, no partials in the workspace; it needs key split 2 on a warp-specialised kernel.
    let c = s.with_cluster_key_split().unwrap();
    assert_eq!(
        c.id(),
        "fixture_per_key.fwd.bf16.C32.c16.k128.v256.bv128.w8p4g.ks2c.fused"
    );
    let gc = generate(&c).unwrap();
    assert!(
        gc.source.contains("#define KS_CLUSTER 1")
            && gc.source.contains("__cluster_dims__(1, 2, 1)")
    );
    assert!(gc.plan.kernels.iter().all(|k| k.name != "gla_fwd_ksum"));
    assert_eq!(
        (
            Features::of(&c).workspace_partials(),
            Features::of(&s).workspace_partials(),
            Features::of(&one).workspace_partials()
        ),
        (1, 2, 1),
        "partials through the workspace"
    );
    assert!(
        Features::of(&c).smem.total > Features::of(&s).smem.total,
        "the exchange tile"
    );
    let e = KernelSpec { key_split: 1, ..c }
        .validate()
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("cluster key split") && e.contains("key_split 2"),
        "{e}"
    );
    assert_eq!(
        gla_codegen::key_split_workspace_bytes(2, 10, 3, 256),
        2 * 10 * 3 * 256 * 4
    );
    assert_eq!(gla_codegen::key_split_workspace_bytes(1, 10, 3, 256), 0);
}

#[test]
fn the_lead_is_shorter_where_the_state_pass_loads_ahead() {
    use gla_codegen::{LEAD_AHEAD_PER_KEY_PERMILLE, LEAD_AHEAD_SCALAR_PERMILLE, LEAD_PERMILLE};
    let d128 =
        |g: &'static dyn gla_core::Gate, dt| KernelSpec::default_for(g, dt, 128, 128).unwrap();
    // The d = 128 defaults of bf16 have two TMA producer groups: their state pass issues ahead, the lead is shorter.
    let per_key = d128(&fixtures::PER_KEY, DType::BF16);
    let per_head = d128(&fixtures::PER_HEAD, DType::BF16);
    assert!(
        per_key.id().ends_with("w8p8x2g.fused") && per_head.id().ends_with("w8p4x2g.fused"),
        "{} {}",
        per_key.id(),
        per_head.id()
    );
    assert_eq!(
        Features::of(&per_key).lead_permille,
        LEAD_AHEAD_PER_KEY_PERMILLE
    );
    assert_eq!(
        Features::of(&per_head).lead_permille,
        LEAD_AHEAD_SCALAR_PERMILLE
    );
    assert!(
        LEAD_AHEAD_SCALAR_PERMILLE < LEAD_PERMILLE && LEAD_AHEAD_PER_KEY_PERMILLE < LEAD_PERMILLE
    );
    // f32 (no tensor cores, no TMA) and one-group variants keep the default, and the source they get says so:
    // the kernels' STATES_ISSUE_AHEAD is the same feature (two TMA groups), emitted from `Features`.
    let f32 = d128(&fixtures::PER_KEY, DType::F32);
    assert!(!Features::of(&f32).tma);
    assert_eq!(Features::of(&f32).lead_permille, LEAD_PERMILLE);
    for s in all_variants(&fixtures::PER_KEY)
        .into_iter()
        .chain(all_variants(&fixtures::PER_HEAD))
    {
        let ahead = s.tiles.producer_groups == 2 && Features::of(&s).tma;
        assert_eq!(
            Features::of(&s).lead_permille != LEAD_PERMILLE,
            ahead,
            "{}",
            s.id()
        );
        if ahead {
            let src = generate(&s).unwrap().source;
            assert!(
                src.contains("#define GLA_TMA 1") && src.contains("constexpr int PG = 2"),
                "{}",
                s.id()
            );
            assert!(
                src.contains("constexpr bool STATES_ISSUE_AHEAD = true;"),
                "{}",
                s.id()
            );
        } else if !s.materialize {
            assert!(
                generate(&s)
                    .unwrap()
                    .source
                    .contains("constexpr bool STATES_ISSUE_AHEAD = false;"),
                "{}",
                s.id()
            );
        }
    }
}

#[test]
fn the_templates_derive_no_feature() {
    // What a variant is gets decided once, in Rust (`Features`): the CUDA templates read the emitted constants and
    // never define a feature of their own (no `#ifndef` switches, no `#define` worked out from other defines).
    for (name, text) in [
        ("prelude.cuh", include_str!("../src/cuda/prelude.cuh")),
        ("stages.cuh", include_str!("../src/cuda/stages.cuh")),
        (
            "kernels_common.cuh",
            include_str!("../src/cuda/kernels_common.cuh"),
        ),
        ("scan.cuh", include_str!("../src/cuda/scan.cuh")),
        ("fused.cuh", include_str!("../src/cuda/fused.cuh")),
        ("ws_ring.cuh", include_str!("../src/cuda/ws_ring.cuh")),
        ("ws_wgmma.cuh", include_str!("../src/cuda/ws_wgmma.cuh")),
        ("ws.cuh", include_str!("../src/cuda/ws.cuh")),
        ("combine.cuh", include_str!("../src/cuda/combine.cuh")),
        (
            "materialized.cuh",
            include_str!("../src/cuda/materialized.cuh"),
        ),
        ("ksum.cuh", include_str!("../src/cuda/ksum.cuh")),
    ] {
        for (i, line) in text.lines().enumerate() {
            let l = line.trim_start();
            assert!(
                !l.starts_with("#ifndef") && !l.starts_with("#ifdef"),
                "{name}:{}: a compile switch: {line}",
                i + 1
            );
            if let Some(def) = l.strip_prefix("#define ") {
                // Function-like helper macros (`NAME(args)`) are code, not features; WS_CLUSTER spells KS_CLUSTER.
                let ident: String = def
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                let function_like = def[ident.len()..].starts_with('(');
                assert!(
                    function_like || ident == "WS_CLUSTER",
                    "{name}:{}: a feature defined in the template: {line}",
                    i + 1
                );
            }
        }
    }
}

#[test]
fn register_split_fills_the_register_file() {
    // setmaxnreg's split, decided on the host: consumers and producers together never exceed the CTA's share.
    for g in [
        &fixtures::PER_KEY as &'static dyn gla_core::Gate,
        &fixtures::PER_HEAD,
        &fixtures::FIXED,
    ] {
        for s in all_variants(g).into_iter().filter(|s| s.tiles.wgmma) {
            let r = Features::of(&s)
                .regs
                .expect("wgmma variants have a register split");
            let (nt, pt) = (32 * s.tiles.warps, 32 * s.tiles.producer_warps);
            assert!(
                r.cap <= 255 && (r.cap % 8 == 0 || r.cap == 255) && r.producer % 8 == 0,
                "{}: {r:?}",
                s.id()
            );
            if r.split {
                assert!(
                    r.consumer * nt + r.producer * pt <= 65536 / s.tiles.ctas_per_sm,
                    "{}: {r:?}",
                    s.id()
                );
            }
            let src = generate(&s).unwrap().source;
            assert!(
                src.contains(&format!(
                    "REG_CONSUMER = {}, REG_PRODUCER = {}",
                    r.consumer, r.producer
                )),
                "{}",
                s.id()
            );
        }
    }
}

#[test]
fn the_per_key_passes_row_weight_tiles_lie_beside_every_other_region() {
    // rows_issue copies each consumer warpgroup's row-sum weights (C rows of 64 + 8 elements) and, in the dk pass, the
    // dq pass's q ⊙ dq (C rows of 64 + 4 f32) by 16-byte cp.async: 16-byte aligned, outside the slots (the producers
    // refill those while the store reads the tiles) and apart from the output staging, row-sum and V' regions.
    let mut seen = 0;
    for s in gla_codegen::dq_dk_pass_variants(&fixtures::PER_KEY) {
        seen += 1;
        let l = Features::of(&s).smem;
        let (c, e, id) = (s.chunk, s.dtype.size_bytes() as u32, s.id());
        let (nwg, groups) = (s.tiles.warps / 4, s.tiles.producer_groups);
        assert!(
            l.rw > 0 && l.rw % 16 == 0 && l.rw_e % 16 == 0 && l.rw_stride % 16 == 0,
            "{id}: {l:?}"
        );
        assert!(l.rw_e >= c * (64 + 8) * e, "{id}");
        if s.pass == Pass::Dk {
            assert!(l.rw_stride - l.rw_e >= c * (64 + 4) * 4, "{id}");
        } else {
            assert_eq!(l.rw_stride, l.rw_e, "{id}");
        }
        let rw = (l.rw, l.rw + nwg * l.rw_stride);
        assert!(
            rw.0 >= l.stages * l.stage_bytes && rw.1 <= l.total,
            "{id}: {rw:?} in {l:?}"
        );
        for (name, other) in [
            (
                "output staging",
                (l.os, l.os + c * (s.tiles.block_v + 8) * e),
            ),
            ("row sums", (l.rs, l.rs + s.tiles.warps * c * 4)),
            ("V'", (l.vs, l.vs + groups * l.vs_stride)),
        ] {
            assert!(
                other.1 <= rw.0 || rw.1 <= other.0,
                "{id}: the weights {rw:?} overlap the {name} {other:?}"
            );
        }
    }
    assert_eq!(seen, 18);
    // (every other kernel has no such tiles: the forward and a scalar gate's passes)
    for s in all_variants(&fixtures::PER_KEY)
        .into_iter()
        .chain(gla_codegen::dq_dk_pass_variants(&fixtures::PER_HEAD))
    {
        let l = Features::of(&s).smem;
        assert_eq!((l.rw, l.rw_stride, l.rw_e), (0, 0, 0), "{}", s.id());
    }
}
