//! Validation of forward calls, with no device: one `check(request, expected)` per rule.

use super::*;
use gla_codegen::fixtures::{FIXED, PER_HEAD, PER_KEY};
use gla_codegen::Tiles;
use gla_core::{Gate, GateShape, ParamSpec};

const BF: DType = DType::BF16;
const F32: DType = DType::F32;

/// A per-head gate with two parameters (to test `params`).
struct WithParams;
impl Gate for WithParams {
    fn name(&self) -> &'static str {
        "with_params"
    }
    fn shape(&self) -> GateShape {
        GateShape::PerHead
    }
    fn params(&self) -> &'static [ParamSpec] {
        &[
            ParamSpec {
                name: "a",
                range: None,
            },
            ParamSpec {
                name: "b",
                range: None,
            },
        ]
    }
    fn expr(&self) -> &'static str {
        "-softplus(x) * a"
    }
    fn log_alpha(&self, _: f64, _: &[f64]) -> f64 {
        0.0
    }
    fn dlog_alpha_dx(&self, _: f64, _: &[f64]) -> f64 {
        0.0
    }
    fn dlog_alpha_dparams(&self, _: f64, _: &[f64], _: &mut [f64]) {}
    fn cuda_ident(&self) -> &'static str {
        "wp"
    }
    fn cuda_source(&self) -> &'static str {
        ""
    }
    fn content_hash(&self) -> u64 {
        7
    }
}
static WITH_PARAMS: WithParams = WithParams;

/// Shapes of one call, owned, so tests can mutate one field at a time.
#[derive(Clone)]
struct Call {
    q: (Vec<usize>, DType),
    k: (Vec<usize>, DType),
    v: (Vec<usize>, DType),
    g: Option<(Vec<usize>, DType)>,
    p: Option<(Vec<usize>, DType)>,
    h0: Option<(Vec<usize>, DType)>,
    o: Option<(Vec<usize>, DType)>,
    ht: Option<(Vec<usize>, DType)>,
    scale: Option<f32>,
    final_state: bool,
    cu: Option<Vec<usize>>,
    variant: Option<KernelSpec>,
    segments: Option<usize>,
}

/// B=2, T=100, H=4, d_k=128, d_v=96 in bf16 with per-key logits (bf16, like q).
fn base() -> Call {
    Call {
        q: (vec![2, 100, 4, 128], BF),
        k: (vec![2, 100, 4, 128], BF),
        v: (vec![2, 100, 4, 96], BF),
        g: Some((vec![2, 100, 4, 128], BF)),
        p: None,
        h0: None,
        o: None,
        ht: None,
        scale: None,
        final_state: false,
        cu: None,
        variant: None,
        segments: None,
    }
}

fn desc(t: &Option<(Vec<usize>, DType)>) -> Option<TensorDesc<'_>> {
    t.as_ref().map(|(s, d)| TensorDesc::new(s, *d))
}

fn run(gate: &'static dyn Gate, c: &Call) -> Result<ResolvedProblem> {
    let r = ForwardRequest {
        q: TensorDesc::new(&c.q.0, c.q.1),
        k: TensorDesc::new(&c.k.0, c.k.1),
        v: TensorDesc::new(&c.v.0, c.v.1),
        logits: desc(&c.g),
        params: desc(&c.p),
        initial_state: desc(&c.h0),
        o: desc(&c.o),
        final_state: desc(&c.ht),
        scale: c.scale,
        output_final_state: c.final_state,
        cu_seqlens: c.cu.as_deref(),
        variant: c.variant,
        segments: c.segments,
    };
    validate_forward(gate, &r)
}

/// Expect an error whose message contains every one of `needles`.
#[track_caller]
fn check_err(gate: &'static dyn Gate, c: &Call, needles: &[&str]) {
    match run(gate, c) {
        Ok(p) => panic!("expected an error containing {needles:?}, got Ok({p:?})"),
        Err(e) => {
            let m = e.to_string();
            for n in needles {
                assert!(m.contains(n), "error `{m}` lacks `{n}`");
            }
        }
    }
}

#[test]
fn valid_fixed_length_problem() {
    let p = run(&PER_KEY, &base()).unwrap();
    assert_eq!(p.dims, Dims::new(2, 100, 4, 128, 96));
    assert_eq!(p.seqs, vec![(0, 100), (100, 100)]);
    assert_eq!(
        p.spec,
        KernelSpec::default_for(&PER_KEY, BF, 128, 96).unwrap()
    );
    assert_eq!(
        p.spec.tiles.block_v, 128,
        "one value tile per head (the plan splits narrow problems into segments)"
    );
    assert_eq!(
        p.spec.dv, 128,
        "d_v = 96 runs on the 128 specialisation, masked"
    );
    let c = p.spec.chunk as usize;
    assert_eq!(
        p.total_chunks,
        2 * 100usize.div_ceil(c),
        "2 sequences x ceil(100 / C)"
    );
    assert!((p.scale - 1.0 / 128f32.sqrt()).abs() < 1e-7);
    assert_eq!(p.o_shape(), [2, 100, 4, 96]);
    assert_eq!(p.state_shape(), [2, 4, 128, 96]);
    assert_eq!(
        p.states_bytes(),
        p.total_chunks * 4 * 128 * 96 * 4,
        "chunks x H x d_k x d_v f32"
    );
    assert!(!p.has_initial_state && !p.output_final_state);
}

#[test]
fn q_k_v_shapes_and_dtypes() {
    let mut c = base();
    c.q.0 = vec![2, 100, 4];
    check_err(&PER_KEY, &c, &["`q`", "[B, T, H, d_k]", "[2, 100, 4]"]);
    let mut c = base();
    c.k.0[3] = 64;
    check_err(
        &PER_KEY,
        &c,
        &["`k`", "[2, 100, 4, 128]", "[2, 100, 4, 64]"],
    );
    let mut c = base();
    c.k.1 = DType::F16;
    check_err(&PER_KEY, &c, &["`k`", "dtype f16", "bf16"]);
    let mut c = base();
    c.v.0[2] = 3;
    check_err(&PER_KEY, &c, &["`v`", "[2, 100, 4, 96]"]);
    let mut c = base();
    c.v.1 = F32;
    check_err(&PER_KEY, &c, &["`v`", "f32", "bf16"]);
    let mut c = base();
    c.q.0[3] = 600;
    c.k.0[3] = 600;
    c.g = Some((vec![2, 100, 4, 600], BF));
    check_err(&PER_KEY, &c, &["d_k", "1..=512", "600"]);
    // Up to 512: even d_k over 256 run as key slices; an odd one says how to pad.
    let mut c = base();
    c.q.0[3] = 320;
    c.k.0[3] = 320;
    c.g = Some((vec![2, 100, 4, 320], BF));
    assert_eq!(run(&PER_KEY, &c).unwrap().dims.dk, 320);
    c.q.0[3] = 301;
    c.k.0[3] = 301;
    c.g = Some((vec![2, 100, 4, 301], BF));
    check_err(&PER_KEY, &c, &["d_k", "even", "301", "pad"]);
    let mut c = base();
    c.v.0[2] = 0;
    c.q.0[2] = 0;
    c.k.0[2] = 0;
    c.g = Some((vec![2, 100, 0, 128], BF));
    check_err(&PER_KEY, &c, &["must be positive"]);
}

#[test]
fn logits_follow_the_gate_shape() {
    // per key: [B,T,H,d_k]
    let mut c = base();
    c.g = Some((vec![2, 100, 4], BF));
    check_err(&PER_KEY, &c, &["`logits`", "[2, 100, 4, 128]"]);
    c.g = None;
    check_err(
        &PER_KEY,
        &c,
        &["logits", "per_key", "bf16", "[2, 100, 4, 128]"],
    );
    // The element dtype, like q: f32 logits for bf16 q are an error.
    let mut c = base();
    c.g.as_mut().unwrap().1 = F32;
    check_err(&PER_KEY, &c, &["`logits`", "dtype f32", "expected bf16"]);
    // per head: [B,T,H]
    let mut c = base();
    c.g = Some((vec![2, 100, 4], BF));
    run(&PER_HEAD, &c).unwrap();
    c.g = Some((vec![2, 100, 4, 128], BF));
    check_err(&PER_HEAD, &c, &["`logits`", "[2, 100, 4]"]);
    // fixed: none
    let c = base();
    check_err(&FIXED, &c, &["fixed", "no logits"]);
    let mut c = base();
    c.g = None;
    run(&FIXED, &c).unwrap();
}

#[test]
fn params_required_iff_the_gate_has_them() {
    let mut c = base();
    c.g = Some((vec![2, 100, 4], BF));
    c.variant = None;
    // WithParams has no kernel source, but validation does not generate code.
    check_err(&WITH_PARAMS, &c, &["params", "[H, 2] = [4, 2]", "\"a\""]);
    c.p = Some((vec![4, 2], F32));
    run(&WITH_PARAMS, &c).unwrap();
    c.p = Some((vec![4, 3], F32));
    check_err(&WITH_PARAMS, &c, &["`params`", "[4, 2]", "[4, 3]"]);
    c.p = Some((vec![4, 2], BF));
    check_err(&WITH_PARAMS, &c, &["`params`", "f32"]);
    let mut c = base();
    c.p = Some((vec![4, 0], F32));
    check_err(&PER_KEY, &c, &["params", "no learnable parameters"]);
}

#[test]
fn states_and_outputs() {
    let mut c = base();
    c.h0 = Some((vec![2, 4, 128, 96], F32));
    c.final_state = true;
    let p = run(&PER_KEY, &c).unwrap();
    assert!(p.has_initial_state && p.output_final_state);
    c.h0 = Some((vec![2, 4, 96, 128], F32));
    check_err(&PER_KEY, &c, &["`initial_state`", "[2, 4, 128, 96]"]);
    c.h0 = Some((vec![2, 4, 128, 96], BF));
    check_err(&PER_KEY, &c, &["`initial_state`", "f32"]);
    let mut c = base();
    c.ht = Some((vec![1, 4, 128, 96], F32));
    check_err(&PER_KEY, &c, &["`final_state`", "[2, 4, 128, 96]"]);
    let mut c = base();
    c.o = Some((vec![2, 100, 4, 96], F32));
    check_err(&PER_KEY, &c, &["`o`", "bf16"]);
    c.o = Some((vec![2, 100, 4, 128], BF));
    check_err(&PER_KEY, &c, &["`o`", "[2, 100, 4, 96]"]);
    c.o = Some((vec![2, 100, 4, 96], BF));
    run(&PER_KEY, &c).unwrap();
}

#[test]
fn varlen_sequences() {
    let mut c = base();
    c.cu = Some(vec![0, 10, 200]);
    check_err(&PER_KEY, &c, &["cu_seqlens", "B = 1"]);
    let mut c = base();
    for t in [
        &mut c.q.0,
        &mut c.k.0,
        &mut c.v.0,
        &mut c.g.as_mut().unwrap().0,
    ] {
        t[0] = 1;
        t[1] = 200;
    }
    c.cu = Some(vec![0, 10, 10, 200]);
    c.h0 = Some((vec![3, 4, 128, 96], F32));
    let p = run(&PER_KEY, &c).unwrap();
    assert_eq!(p.seqs, vec![(0, 10), (10, 0), (10, 190)]);
    let ch = p.spec.chunk as usize;
    assert_eq!(
        p.total_chunks,
        10usize.div_ceil(ch) + 190usize.div_ceil(ch),
        "ceil(10 / C) + 0 + ceil(190 / C) chunks"
    );
    assert_eq!(p.state_shape(), [3, 4, 128, 96]);
    c.h0 = Some((vec![1, 4, 128, 96], F32));
    check_err(&PER_KEY, &c, &["`initial_state`", "[3, 4, 128, 96]"]);
    c.h0 = None;
    c.cu = Some(vec![0, 10, 199]);
    check_err(&PER_KEY, &c, &["cu_seqlens", "end at T = 200"]);
    c.cu = Some(vec![0, 20, 10, 200]);
    check_err(&PER_KEY, &c, &["non-decreasing"]);
    c.cu = Some(vec![0]);
    check_err(&PER_KEY, &c, &["N+1 >= 2"]);
}

#[test]
fn explicit_variants() {
    let tiles = Tiles {
        block_v: 32,
        warps: 4,
        producer_warps: 0,
        producer_groups: 1,
        wgmma: false,
        ctas_per_sm: 1,
    };
    let mut c = base();
    c.variant = Some(KernelSpec::new(&PER_KEY, BF, 32, 16, 128, 128, true, tiles).unwrap());
    let p = run(&PER_KEY, &c).unwrap();
    assert_eq!(p.total_chunks, 2 * 4, "C = 32");
    // Too small a specialisation.
    c.variant = Some(KernelSpec::new(&PER_KEY, BF, 64, 16, 128, 64, false, tiles).unwrap());
    check_err(&PER_KEY, &c, &["d_v <= 64", "d_v = 96"]);
    // Wrong dtype.
    c.variant =
        Some(KernelSpec::new(&PER_KEY, DType::F16, 64, 16, 128, 128, false, tiles).unwrap());
    check_err(&PER_KEY, &c, &["`variant`", "f16", "bf16"]);
    // Another gate's variant.
    c.variant = Some(KernelSpec::new(&PER_HEAD, BF, 64, 16, 128, 128, false, tiles).unwrap());
    check_err(&PER_KEY, &c, &["`fixture_per_head`", "`fixture_per_key`"]);
    // A spec that was built by hand around the constructor is still validated.
    let mut bad = KernelSpec::default_for(&PER_KEY, BF, 128, 96).unwrap();
    bad.chunk = 48;
    c.variant = Some(bad);
    check_err(&PER_KEY, &c, &["chunk size C"]);
    // The backward's dv pass is no forward.
    let dv = KernelSpec::default_for(&PER_KEY, BF, 128, 96)
        .and_then(|s| s.with_pass(gla_codegen::Pass::Dv))
        .unwrap();
    c.variant = Some(dv);
    check_err(&PER_KEY, &c, &["backward pass", "forward variant"]);
}

#[test]
fn segments_must_be_positive() {
    let mut c = base();
    c.segments = Some(0);
    let e = run(&PER_KEY, &c).unwrap_err().to_string();
    assert!(e.contains("segments") && e.contains("at least 1"), "{e}");
    c.segments = Some(4);
    assert_eq!(run(&PER_KEY, &c).unwrap().segments, Some(4));
}

#[test]
fn scale() {
    let mut c = base();
    c.scale = Some(0.25);
    assert_eq!(run(&PER_KEY, &c).unwrap().scale, 0.25);
    c.scale = Some(f32::NAN);
    check_err(&PER_KEY, &c, &["scale", "finite"]);
}

#[test]
fn empty_problems_validate() {
    // T = 0: N = B sequences of length 0, no chunks.
    let mut c = base();
    for t in [
        &mut c.q.0,
        &mut c.k.0,
        &mut c.v.0,
        &mut c.g.as_mut().unwrap().0,
    ] {
        t[1] = 0;
    }
    let p = run(&PER_KEY, &c).unwrap();
    assert_eq!((p.seqs.len(), p.total_chunks), (2, 0));
}

#[test]
fn per_value_gates_take_one_logit_per_value_channel() {
    use gla_core::GateShape::PerValue;
    struct PV;
    impl Gate for PV {
        fn name(&self) -> &'static str {
            "pv"
        }
        fn shape(&self) -> GateShape {
            PerValue
        }
        fn params(&self) -> &'static [ParamSpec] {
            &[]
        }
        fn expr(&self) -> &'static str {
            "x"
        }
        fn log_alpha(&self, _: f64, _: &[f64]) -> f64 {
            0.0
        }
        fn dlog_alpha_dx(&self, _: f64, _: &[f64]) -> f64 {
            0.0
        }
        fn dlog_alpha_dparams(&self, _: f64, _: &[f64], _: &mut [f64]) {}
        fn cuda_ident(&self) -> &'static str {
            "pv"
        }
        fn cuda_source(&self) -> &'static str {
            ""
        }
        fn content_hash(&self) -> u64 {
            1
        }
    }
    static G: PV = PV;
    let mut c = base();
    c.g = Some((vec![2, 100, 4, 96], BF)); // one logit per value channel
    assert!(run(&G, &c).is_ok());
    c.g = Some((vec![2, 100, 4, 128], BF)); // per-key shaped logits for a value gate
    check_err(&G, &c, &["logits"]);
    assert_eq!(
        logits_shape(PerValue, &Dims::new(2, 100, 4, 128, 96)),
        vec![2, 100, 4, 96]
    );
}

#[test]
fn key_split_variants_take_even_key_dims_up_to_twice_their_slice() {
    let tiles = Tiles {
        block_v: 128,
        warps: 8,
        producer_warps: 4,
        producer_groups: 1,
        wgmma: true,
        ctas_per_sm: 1,
    };
    let ks = KernelSpec::new(&PER_KEY, BF, 32, 16, 128, 256, false, tiles)
        .unwrap()
        .with_key_split(2)
        .unwrap();
    assert_eq!(ks.key_dim(), 256);
    let with_dk = |dk: usize| {
        let mut c = base();
        c.q.0[3] = dk;
        c.k.0[3] = dk;
        c.g = Some((vec![2, 100, 4, dk], BF));
        c.variant = Some(ks);
        c
    };
    for dk in [256, 200, 2] {
        let p = run(&PER_KEY, &with_dk(dk)).unwrap();
        assert_eq!(p.dims.dk, dk);
        assert!(
            (p.scale - 1.0 / (dk as f32).sqrt()).abs() < 1e-7,
            "the scale is of the whole d_k"
        );
    }
    check_err(&PER_KEY, &with_dk(201), &["multiple of 2", "201"]);
    check_err(&PER_KEY, &with_dk(258), &["d_k <= 256", "258"]);
    // Key split 4: d_k up to 512 in four equal slices.
    let ks4 = KernelSpec::new(&PER_KEY, BF, 32, 16, 128, 512, false, tiles)
        .unwrap()
        .with_key_split(4)
        .unwrap();
    for dk in [512, 320, 4] {
        let mut c = with_dk(dk);
        c.variant = Some(ks4);
        assert_eq!(run(&PER_KEY, &c).unwrap().dims.dk, dk);
    }
    let mut c = with_dk(510);
    c.variant = Some(ks4);
    check_err(&PER_KEY, &c, &["multiple of 4", "510"]);
}
