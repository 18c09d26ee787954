//! The forward kernels run from their generated source on the host emulator (`tests::emu`: fibers for threads, warp
//! shuffles, ldmatrix / mma.sync / stmatrix as warp collectives, wgmma as the warpgroup's product over 128-byte-
//! swizzled shared operands, named barriers, mbarriers, TMA loads over tensor maps this test encodes as the runtime's
//! are, cp.async as a synchronous copy) against the f64 recurrence on fresh random inputs: the plain fused kernel (the
//! default of f32 and of the value gates; bf16 / f16 `w8` tiles), the materialized two-pass plan, the warp-specialised
//! mma.sync family (`w8p4`, `w8p4x2`, `w4p4.o2`) and the bf16 / f16 defaults (wgmma consumers and TMA loads:
//! `w4p4g.o2`, `w8p8x2g`, `w8p4x2g`), unsplit and as the two-level scan (state pass, combine, fused pass over 3–4
//! segments), and d_k over 128 as key slices (`ks4`, the d_k = 512 default; `ks2`), at weak and strong decays (logits
//! shifted by 0 / −12 / +12: the exact sub-chunk path and the factorised one both run), varlen, an initial state and
//! the final state. Not here: the 2-CTA clusters of the d_k = 256 default (`ks2c`: DSMEM and cluster barriers are not
//! emulated) — the GPU tests' (`gpu_forward.rs`). Launch grids come from the plan (`gla_runtime::launch::resolve_axis`,
//! `plan_segments`), sequence arrays from `seq_arrays`; outputs start as NaN. Tolerance (relative RMS vs f64): f32
//! 1e-5, bf16 / f16 3e-3. Skips, saying so, without a host C++ compiler unless `GLA_REQUIRE_EMU=1`.
use gla_codegen::{generate, ForwardArgs, KernelSpec, Tiles, TmaMap};
use gla_core::{DType, Dims, Gate, GateShape};
use gla_runtime::launch::{plan_segments, resolve_axis, seq_arrays, GridSizes};
use tests::emu::{Elems, EmuError, Emulated};
use tests::{rel_rms, Case};

/// The dq / dk passes' row sums: their weights (`[tokens, H, d_v]`, as o), their f32 output (`[⌈d_v / 64⌉, tokens,
/// H]`, a per-key gate's `[tokens, H, d_v]`), which the dq pass writes and the dk pass updates, and a per-key gate's
/// d logits (`[tokens, H, d_v]` in the dtype, NaN first) and d params (zeroed), which its dk pass makes.
struct Rows<'a> {
    w: &'a [f32],
    out: &'a mut Vec<f32>,
    grads: Option<(&'a mut Elems, &'a mut Vec<f32>)>,
}

/// Runs `spec`'s plan on `case` with `segments` segments a sequence where the plan is segmented (the two-level scan:
/// state pass, combine, fused pass; `launch::plan_segments`, 1: none); returns (o, final state). `rows`: a dq / dk
/// pass's row sums ([`Rows`]).
fn emulate(
    spec: &KernelSpec,
    case: &Case,
    segments: usize,
    rows: Option<Rows>,
) -> Result<(Vec<f64>, Vec<f64>), String> {
    let g = generate(spec).map_err(|e| e.to_string())?;
    let names: Vec<&str> = g.plan.kernels.iter().map(|k| k.name.as_str()).collect();
    let kernels = match Emulated::compile(&g.source, &names) {
        Ok(k) => k,
        Err(EmuError::NoCompiler(m)) => return Err(format!("SKIP {m}")),
        Err(e) => return Err(format!("{}: {e}", spec.id())),
    };
    let (d, dt) = (case.dims, case.dtype);
    let (h, dk, dv) = (d.h, d.dk, d.dv);
    // A key split runs each head as `ks` heads of d_k / ks key columns (the kernels' view of q, k, logits and
    // states; v, o and the parameters keep the real heads), as the runtime binds it.
    let ks = spec.key_split.max(1) as usize;
    let (kh, kdk) = (h * ks, dk / ks);
    let seqs = d.sequences(case.cu_seqlens.as_deref()).unwrap();
    let (mut cu, mut co, mut ci) = seq_arrays(&seqs, spec.chunk);
    let n = seqs.len();
    let chunks = ci.len() / 2;
    let tokens = d.b * d.t;
    let mut q = Elems::of(&case.q, dt);
    let mut k = Elems::of(&case.k, dt);
    let mut v = Elems::of(&case.v, dt);
    let mut lg = Elems::of(&case.logits, dt);
    let mut params = case.params.clone();
    let mut h0 = case.initial_state.clone().expect("an initial state");
    let mut ht = vec![f32::NAN; n * h * dk * dv];
    let mut o = Elems::nan(tokens * h * dv, dt);
    let (mut rs_w, rs_out, dg, dparams) = match rows {
        Some(r) => {
            let (dg, dp) = match r.grads {
                Some((dg, dp)) => (
                    dg.ptr(),
                    if dp.is_empty() {
                        0
                    } else {
                        dp.as_mut_ptr() as u64
                    },
                ),
                None => (0, 0),
            };
            (Elems::of(r.w, dt), r.out.as_mut_ptr() as u64, dg, dp)
        }
        None => (Elems::of(&[], dt), 0, 0, 0),
    };
    let lens: Vec<usize> = seqs.iter().map(|&(_, l)| l).collect();
    let segs = plan_segments(&g.plan, spec, &lens, kh, dv, Some(segments));
    let ws_floats = if g.plan.needs_state_buffer {
        chunks * h * dk * dv
    } else {
        g.plan.workspace_bytes(n, segs, kh, kdk, dv, tokens, h) / 4
    };
    let mut states = vec![f32::NAN; ws_floats];
    let p = |v: &mut Vec<f32>| {
        if v.is_empty() {
            0
        } else {
            v.as_mut_ptr() as u64
        }
    };
    let args = ForwardArgs {
        q: q.ptr(),
        k: k.ptr(),
        v: v.ptr(),
        g: if gate_of(spec).shape() == GateShape::Fixed {
            0
        } else {
            lg.ptr()
        },
        params: p(&mut params),
        h0: h0.as_mut_ptr() as u64,
        ht: ht.as_mut_ptr() as u64,
        o: o.ptr(),
        states: p(&mut states),
        cu_seqlens: cu.as_mut_ptr() as u64,
        chunk_offsets: co.as_mut_ptr() as u64,
        chunk_index: if g.plan.needs_state_buffer {
            ci.as_mut_ptr() as u64
        } else {
            0
        },
        n_seqs: n as i32,
        h: kh as i32,
        dk: kdk as i32,
        dv: dv as i32,
        scale: 1.0 / (dk as f32).sqrt(),
        segs: segs as i32,
        tma: g.plan.tma as i32,
        lead: g.plan.lead_permille,
        tm_q: emu_map(q.ptr(), kdk, kh, tokens, dt, spec.chunk),
        tm_k: emu_map(k.ptr(), kdk, kh, tokens, dt, spec.chunk),
        tm_v: emu_map(v.ptr(), dv, h, tokens, dt, spec.chunk),
        tm_g: if spec.shape() == GateShape::PerKey {
            emu_map(lg.ptr(), kdk, kh, tokens, dt, spec.chunk)
        } else {
            TmaMap::default()
        },
        rs_w: if rs_out == 0 { 0 } else { rs_w.ptr() },
        rs_out,
        dg,
        dparams,
        ..Default::default()
    };
    let sizes = GridSizes {
        h: kh,
        dv,
        seq_lens: &lens,
        segs,
    };
    for kl in &g.plan.kernels {
        let grid = kl.grid.map(|a| resolve_axis(a, &sizes) as u32);
        if grid.contains(&0) {
            continue;
        }
        // SAFETY: every address in `args` is a live host buffer above of the extent the runtime's launch checks
        // for this plan (the state buffer where the plan needs it, the chunk index with it).
        #[allow(unsafe_code)]
        unsafe {
            kernels.launch(
                &kl.name,
                (grid[0], grid[1], grid[2]),
                kl.block,
                kl.smem_bytes,
                &args,
            )
        }?;
    }
    Ok((o.to_f64(dt), ht.iter().map(|&x| x as f64).collect()))
}

/// The emulator's tensor map (`EmuTensorMap` in `host_cuda.h`) of a `[tokens, H, d]` tensor at `base`: boxes of 64
/// elements × 1 head × `chunk` tokens, as the runtime encodes its CUtensorMaps for the TMA loads.
fn emu_map(base: u64, d: usize, h: usize, tokens: usize, dt: DType, chunk: u32) -> TmaMap {
    let es = dt.size_bytes() as u64;
    let mut w = [0u64; 16];
    w[..12].copy_from_slice(&[
        base,
        d as u64,
        h as u64,
        tokens as u64,
        d as u64 * es,
        (h * d) as u64 * es,
        64,
        1,
        chunk as u64,
        es,
        0x656d_7574_6d61_7021, // EMU_MAP_MAGIC
        0,
    ]);
    TmaMap(w)
}

fn gate_of(spec: &KernelSpec) -> &'static dyn Gate {
    spec.gate
}

/// What is added to the logits: a constant, or +12 / −12 by chunk of 32 tokens (−12 on chunks 2, 5, 8, …): for
/// RWKV-6's −exp(x) strong and mild chunks in turn, each kind following both kinds in each of two producer groups.
#[derive(Clone, Copy, Debug)]
enum Shift {
    By(f32),
    Alternating,
    /// `tests::spike_shift`: one near-zero forget gate a chunk among mild ones (RWKV-6 at +30).
    Spike,
}
use Shift::*;

impl Shift {
    fn at(self, t: usize) -> f32 {
        match self {
            By(x) => x,
            Spike => tests::spike_shift(t),
            Alternating => {
                if (t / 32) % 3 == 2 {
                    -12.0
                } else {
                    12.0
                }
            }
        }
    }
}

impl std::fmt::Display for Shift {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        match self {
            By(x) => write!(f, "{x:+}"),
            Spike => write!(f, "spike"),
            Alternating => write!(f, "±12 by chunk"),
        }
    }
}

#[test]
fn the_forward_kernels_match_the_f64_recurrence_on_the_emulator() {
    let gate = tests::gate_named;
    let d64 = Dims::new(2, 70, 2, 64, 64);
    let vary = Dims::new(1, 75, 2, 64, 48);
    let d128 = Dims::new(1, 75, 2, 128, 128);
    let cu = Some(vec![0, 0, 1, 41, 75]);
    // (gate, dtype, dims, cu_seqlens, shift, the spec: default or (C, c, block_v, warps, materialize,
    // producer warps, producer groups, CTAs an SM))
    type Tiling = Option<(u32, u32, u32, u32, bool, u32, u32, u32)>;
    let cases: Vec<(&str, DType, Dims, Option<Vec<usize>>, Shift, Tiling)> = vec![
        ("gla", DType::F32, d64, None, By(0.0), None),
        ("gla", DType::F32, vary, cu.clone(), By(-12.0), None),
        ("rwkv6", DType::F32, d64, None, By(12.0), None),
        ("mamba2", DType::F32, vary, cu.clone(), By(0.0), None),
        ("value_gla", DType::F32, d64, None, By(-12.0), None),
        (
            "hgrn2",
            DType::F32,
            vary,
            cu.clone(),
            By(12.0),
            Some((32, 16, 64, 8, false, 0, 1, 1)),
        ),
        (
            "gla",
            DType::F32,
            vary,
            cu.clone(),
            By(0.0),
            Some((32, 16, 64, 4, true, 0, 1, 1)),
        ),
        (
            "mamba2",
            DType::F32,
            d64,
            None,
            By(-12.0),
            Some((64, 16, 64, 4, true, 0, 1, 1)),
        ),
        ("value_gla", DType::BF16, vary, cu.clone(), By(0.0), None),
        (
            "gla",
            DType::BF16,
            d64,
            None,
            By(-12.0),
            Some((32, 16, 64, 8, false, 0, 1, 1)),
        ),
        (
            "gla",
            DType::BF16,
            d64,
            None,
            By(0.0),
            Some((32, 16, 64, 8, false, 0, 1, 1)),
        ),
        (
            "hgrn2",
            DType::F16,
            vary,
            cu.clone(),
            By(12.0),
            Some((32, 16, 64, 8, false, 0, 1, 1)),
        ),
        (
            "mamba2",
            DType::BF16,
            vary,
            cu.clone(),
            By(0.0),
            Some((32, 16, 64, 8, false, 0, 1, 1)),
        ),
        (
            "gla",
            DType::BF16,
            vary,
            cu.clone(),
            By(0.0),
            Some((32, 16, 64, 4, true, 0, 1, 1)),
        ),
        // warp-specialised, mma.sync consumers (cp.async loads; named barriers between the roles)
        (
            "gla",
            DType::BF16,
            d64,
            None,
            By(0.0),
            Some((32, 16, 64, 8, false, 4, 1, 1)),
        ),
        (
            "rwkv6",
            DType::BF16,
            vary,
            cu.clone(),
            By(-12.0),
            Some((32, 16, 64, 8, false, 4, 2, 1)),
        ),
        (
            "mamba2",
            DType::BF16,
            vary,
            cu.clone(),
            By(0.0),
            Some((32, 16, 64, 8, false, 4, 2, 1)),
        ),
        (
            "gla",
            DType::F16,
            d64,
            None,
            By(12.0),
            Some((32, 16, 64, 4, false, 4, 1, 2)),
        ),
        // the defaults of bf16 / f16: warp-specialised, wgmma consumers (cp.async loads: TMA is not emulated)
        ("gla", DType::BF16, d64, None, By(0.0), None),
        ("gla", DType::BF16, d128, cu.clone(), By(-12.0), None),
        ("mamba2", DType::F16, d128, None, By(0.0), None),
        ("rwkv6", DType::BF16, d128, None, By(12.0), None),
        // near-zero forget gates: one a chunk among mild ones, and log α = −∞ in f32 (−exp(x + 95))
        ("rwkv6", DType::BF16, d128, None, Spike, None),
        ("rwkv6", DType::F32, d64, None, Spike, None),
        ("rwkv6", DType::BF16, d64, None, Spike, None),
        ("rwkv6", DType::BF16, d128, None, By(95.0), None),
        ("rwkv6", DType::F32, d64, None, By(95.0), None),
        // chunks strong and mild in turn (the wgmma producers vote first after a chunk that was not mild)
        // RWKV-6 at logits + 0 / + 1: spans over SPAN_MAX with pairs of every level still weighing in (at + 12 only
        // the diagonal does)
        ("rwkv6", DType::BF16, d128, cu.clone(), By(0.0), None),
        ("rwkv6", DType::BF16, d128, None, By(1.0), None),
        ("rwkv6", DType::F16, d64, None, By(0.0), None),
        // the exact path's block sizes and skipped levels (exact_scores_vec): log σ(x − 2) spans 64–128 a chunk (one
        // block of 32), 10·log σ(x) blocks of 2–8 rows with every level live, constant −60 blocks of 2 with every
        // level negligible; d = 64 has 2 rows a thread, d = 128 four
        ("gla_n1", DType::BF16, d128, None, By(-2.0), None),
        ("gla_n1", DType::BF16, d64, None, By(-2.0), None),
        ("gla_n01", DType::BF16, d128, cu.clone(), By(0.0), None),
        ("gla_n01", DType::BF16, d64, None, By(0.0), None),
        ("const_m60", DType::BF16, d64, None, By(0.0), None),
        ("const_m60", DType::BF16, d128, cu.clone(), By(0.0), None),
        // (T = 170: the last chunk is mild, so the final state is not ~0)
        (
            "rwkv6",
            DType::BF16,
            Dims::new(1, 170, 2, 128, 128),
            None,
            Alternating,
            None,
        ),
        (
            "rwkv6",
            DType::F16,
            Dims::new(1, 170, 1, 64, 64),
            None,
            Alternating,
            None,
        ),
    ];
    // (gate, dtype, dims, shift, tiling as above, segments a sequence): the two-level scan of segmented plans
    let long = Dims::new(1, 300, 1, 64, 64);
    let split: Vec<(&str, DType, Dims, Shift, Tiling, usize)> = vec![
        ("gla", DType::BF16, long, By(0.0), None, 4),
        (
            "mamba2",
            DType::BF16,
            Dims::new(1, 300, 1, 128, 128),
            By(0.0),
            None,
            3,
        ),
        ("gla", DType::F32, long, By(-12.0), None, 4),
        (
            "hgrn2",
            DType::BF16,
            long,
            By(0.0),
            Some((32, 16, 64, 8, false, 4, 2, 1)),
            3,
        ),
    ];
    // (gate, dtype, dims, shift, key split): d_k over 128 as key slices whose f32 partial outputs `gla_fwd_ksum`
    // adds (d_k = 512: the default, 4 slices; d_k = 256: 2 slices without the cluster the default uses)
    // (and the key slices' 384-thread wgmma variant, 4 rows a producer thread: the exact path's one block of 32 and
    // blocks of 2)
    let key_splits: Vec<(&str, DType, Dims, Shift, u32)> = vec![
        (
            "gla_n1",
            DType::BF16,
            Dims::new(1, 75, 2, 256, 128),
            By(-2.0),
            2,
        ),
        (
            "const_m60",
            DType::BF16,
            Dims::new(1, 45, 2, 256, 128),
            By(0.0),
            2,
        ),
        ("gla", DType::BF16, Dims::new(1, 40, 1, 512, 64), By(0.0), 0),
        (
            "gla",
            DType::BF16,
            Dims::new(1, 45, 2, 256, 128),
            By(-12.0),
            2,
        ),
        (
            "mamba2",
            DType::BF16,
            Dims::new(1, 45, 2, 256, 128),
            By(0.0),
            2,
        ),
    ];
    let cases: Vec<_> = cases
        .into_iter()
        .map(|(g, dt, d, cu, sh, t)| (g, dt, d, cu, sh, t, 1usize, 0u32))
        .chain(
            split
                .into_iter()
                .map(|(g, dt, d, sh, t, segs)| (g, dt, d, None, sh, t, segs, 0)),
        )
        .chain(
            key_splits
                .into_iter()
                .map(|(g, dt, d, sh, ks)| (g, dt, d, None, sh, None, 1, ks)),
        )
        .collect();
    use rayon::prelude::*;
    let results: Vec<Result<String, String>> = cases
        .par_iter()
        .enumerate()
        .map(|(i, (name, dt, dims, cu, shift, tiling, segs, ks))| {
            let g = gate(name);
            let spec = match tiling {
                None if *ks > 0 => KernelSpec::default_for(g, *dt, dims.dk, dims.dv)
                    .and_then(|s| s.with_key_split(*ks))
                    .unwrap(),
                None => KernelSpec::default_for(g, *dt, dims.dk, dims.dv).unwrap(),
                Some((c, sc, bv, w, mat, pw, pg, ctas)) => {
                    let kd = gla_codegen::specialised_dim(dims.dk).unwrap();
                    let vd = gla_codegen::specialised_dim(dims.dv).unwrap();
                    let tiles = Tiles {
                        block_v: *bv,
                        warps: *w,
                        producer_warps: *pw,
                        producer_groups: *pg,
                        wgmma: false,
                        ctas_per_sm: *ctas,
                    };
                    KernelSpec::new(g, *dt, *c, *sc, kd, vd, *mat, tiles).unwrap()
                }
            };
            let mut case = Case::random(g, *dims, *dt, 700 + i as u64, true, cu.clone());
            let per_token = case.logits.len() / (dims.b * dims.t);
            for (n, x) in case.logits.iter_mut().enumerate() {
                *x = dt.round(*x + shift.at((n / per_token) % dims.t));
            }
            let (o, ht) = emulate(&spec, &case, *segs, None)?;
            let (want_o, want_ht) = case.reference(g, None);
            let (eo, eh) = (rel_rms(&o, &want_o), rel_rms(&ht, &want_ht));
            let tol = if *dt == DType::F32 { 1e-5 } else { 3e-3 };
            let line = format!(
                "{} shift {shift} segments {segs}: o {eo:.2e}, final state {eh:.2e}",
                spec.id()
            );
            if eo <= tol && eh <= tol {
                Ok(line)
            } else {
                Err(format!("{line} (tolerance {tol:.0e})"))
            }
        })
        .collect();
    tests::report_cases(results);
}

/// Per-value gates on wgmma consumers (`value_operands`: V̂ and, on chunks over SPAN_MAX, the exact intra-chunk
/// part P by the producers; Sᵀ's rows and O scaled by the consumers) against the f64 recurrence: mild, strong and
/// alternating chunks, varlen with empty and one-token sequences, d = 64 (one consumer warpgroup) and 128, one or two
/// producer groups, bf16 and f16, an initial state. Tolerance 3e-3 relative RMS.
#[test]
fn the_value_gate_on_wgmma_matches_the_f64_recurrence_on_the_emulator() {
    let gate = tests::gate_named;
    let cu = Some(vec![0, 0, 1, 41, 75]);
    let cases: Vec<(&str, DType, Dims, Option<Vec<usize>>, Shift, (u32, u32))> = vec![
        (
            "value_gla",
            DType::BF16,
            Dims::new(1, 75, 2, 128, 128),
            cu.clone(),
            By(0.0),
            (8, 1),
        ),
        (
            "value_gla",
            DType::BF16,
            Dims::new(2, 70, 2, 128, 128),
            None,
            By(-12.0),
            (8, 1),
        ),
        (
            "value_gla",
            DType::BF16,
            Dims::new(1, 170, 2, 128, 128),
            None,
            Alternating,
            (8, 1),
        ),
        (
            "value_gla",
            DType::F16,
            Dims::new(1, 75, 2, 64, 64),
            cu.clone(),
            Alternating,
            (4, 1),
        ),
        (
            "value_gla",
            DType::BF16,
            Dims::new(2, 70, 2, 64, 64),
            None,
            By(0.0),
            (4, 1),
        ),
        // two producer groups taking alternate chunks (strong and mild ones in each group; varlen)
        (
            "value_gla",
            DType::BF16,
            Dims::new(1, 170, 2, 128, 128),
            None,
            Alternating,
            (8, 2),
        ),
        (
            "value_gla",
            DType::F16,
            Dims::new(1, 75, 2, 64, 64),
            cu.clone(),
            Alternating,
            (4, 2),
        ),
        // chunks too strong for one factor whose sub-chunks mostly are not (strong_values' tensor-core blocks, a
        // column now and then pairwise)
        (
            "value_gla",
            DType::BF16,
            Dims::new(1, 170, 2, 128, 128),
            None,
            By(-3.0),
            (8, 2),
        ),
        (
            "value_gla",
            DType::F16,
            Dims::new(2, 70, 2, 64, 64),
            None,
            By(-3.0),
            (4, 1),
        ),
    ];
    use rayon::prelude::*;
    let results: Vec<Result<String, String>> = cases
        .par_iter()
        .enumerate()
        .map(|(i, (name, dt, dims, cu, shift, (warps, groups)))| {
            let g = gate(name);
            let tiles = Tiles {
                block_v: 16 * warps,
                warps: *warps,
                producer_warps: 4,
                producer_groups: *groups,
                wgmma: true,
                ctas_per_sm: 1,
            };
            let kd = gla_codegen::specialised_dim(dims.dk).unwrap();
            let vd = gla_codegen::specialised_dim(dims.dv).unwrap();
            let spec =
                KernelSpec::new(g, *dt, 32, 16, kd, vd, false, tiles).map_err(|e| e.to_string())?;
            let mut case = Case::random(g, *dims, *dt, 900 + i as u64, true, cu.clone());
            let per_token = case.logits.len() / (dims.b * dims.t);
            for (n, x) in case.logits.iter_mut().enumerate() {
                *x = dt.round(*x + shift.at((n / per_token) % dims.t));
            }
            let (o, ht) = emulate(&spec, &case, 1, None)?;
            let (want_o, want_ht) = case.reference(g, None);
            let (eo, eh) = (rel_rms(&o, &want_o), rel_rms(&ht, &want_ht));
            let line = format!(
                "{} shift {shift}: o {eo:.2e}, final state {eh:.2e}",
                spec.id()
            );
            if eo <= 3e-3 && eh <= 3e-3 {
                Ok(line)
            } else {
                Err(format!("{line} (tolerance 3e-3)"))
            }
        })
        .collect();
    tests::report_cases(results);
}

/// The pairwise sums' early exit (`pair_done`) keeps a far term that is large: one token's values scaled by 2^40
/// (token 32, the first of its chunk) at a decay of ~2^−5 a token, so that the rows 5–10 tokens later still take
/// most of their value from it through factors of 2^−25 … 2^−50, far below the exit's threshold for their own
/// near terms — an exit bounded by the current pair's |v| rather than the column's max would drop it. Every column's sub-chunks too strong for §4.3's
/// factors (`pairwise_all_columns`), and about half of them (`pairwise_columns` beside the tensor-core blocks);
/// per-value gate `value_gla` (log α = (0.0625 + w)·log σ(x), w = 1e-3) forward, bf16, d = 64. Tolerance 3e-3
/// relative RMS, over the whole output and over those rows alone.
#[test]
fn the_pairwise_early_exit_keeps_a_far_large_term_on_the_emulator() {
    let g = tests::gate_named("value_gla");
    let dims = Dims::new(1, 96, 1, 64, 64);
    let tiles = Tiles {
        block_v: 64,
        warps: 4,
        producer_warps: 4,
        producer_groups: 1,
        wgmma: true,
        ctas_per_sm: 1,
    };
    let spec = KernelSpec::new(g, DType::BF16, 32, 16, 64, 64, false, tiles).unwrap();
    let (t0, far) = (32usize, 5..11usize);
    let mut lines = Vec::new();
    let mut bad = Vec::new();
    // (shift → log2 α ≈ 0.0635 · (x + shift) · log2 e a token: −4.51 (no 15-token span within 64) and −4.27 (about
    // half of them))
    for (i, shift) in [-50.0f32, -46.6].into_iter().enumerate() {
        let mut case = Case::random(g, dims, DType::BF16, 7100 + i as u64, true, None);
        case.params.iter_mut().for_each(|w| *w = 1e-3);
        for x in case.logits.iter_mut() {
            *x = DType::BF16.round(*x + shift);
        }
        for e in 0..dims.dv {
            case.v[t0 * dims.dv + e] *= 2f32.powi(40);
        }
        let (o, _) = emulate(&spec, &case, 1, None).unwrap();
        let (want, _) = case.reference(g, None);
        let rows = |x: &[f64]| x[(t0 + far.start) * dims.dv..(t0 + far.end) * dims.dv].to_vec();
        let (all, near) = (rel_rms(&o, &want), rel_rms(&rows(&o), &rows(&want)));
        // (the far token's share of those rows in the reference: what a dropped term would cost)
        case.v[t0 * dims.dv..(t0 + 1) * dims.dv]
            .iter_mut()
            .for_each(|v| *v = 0.0);
        let share = rel_rms(&rows(&case.reference(g, None).0), &rows(&want));
        let line = format!(
            "shift {shift}: o {all:.2e}, rows t0+{}..t0+{} {near:.2e} (the far token's share there {share:.2e})",
            far.start, far.end
        );
        assert!(
            share > 0.05,
            "{line}: the far token must matter in those rows"
        );
        if all <= 3e-3 && near <= 3e-3 {
            lines.push(line);
        } else {
            bad.push(format!("{line} (tolerance 3e-3)"));
        }
    }
    for l in &lines {
        println!("{l}");
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// The dv pass (`Pass::Dv`: the forward of the time-reversed problem, chunks last to first, the consumers swapping
/// Q̃ and K̂ and contracting A over its rows) against the f64 recurrence's gradients: o = dv and the final state =
/// dh0, for v = dO and h0 = ∂ℒ/∂S_T (both random, N(0, 1)-sized), at weak and strong decays (the exact path's
/// A included), varlen with empty and one-token sequences (a sequence's partial last chunk is its first step), on
/// the wgmma defaults of d ≤ 128 and d_k = 256 as key slices (`ks2`; the default's 2-CTA cluster is the GPU
/// tests'), per-key and scalar gates. Tolerance as the backward's (5e-3 bf16 / f16).
#[test]
fn the_dv_pass_matches_the_f64_gradients_on_the_emulator() {
    use gla_codegen::Pass;
    use rand::SeedableRng;
    let gate = tests::gate_named;
    let d64 = Dims::new(2, 70, 2, 64, 64);
    let d128 = Dims::new(1, 75, 2, 128, 128);
    let cu = Some(vec![0, 0, 1, 41, 75]);
    let cases: Vec<(&str, DType, Dims, Option<Vec<usize>>, Shift)> = vec![
        ("gla", DType::BF16, d64, None, By(0.0)),
        ("gla", DType::BF16, d128, cu.clone(), By(-12.0)),
        ("gla", DType::F16, d64, None, By(12.0)),
        ("rwkv6", DType::BF16, d128, None, By(0.0)),
        ("rwkv6", DType::BF16, d128, None, Spike),
        (
            "gla_n01",
            DType::BF16,
            Dims::new(1, 75, 2, 64, 64),
            cu.clone(),
            By(0.0),
        ),
        ("const_m60", DType::BF16, d128, None, By(0.0)),
        (
            "hgrn2",
            DType::BF16,
            Dims::new(1, 170, 1, 64, 64),
            None,
            Alternating,
        ),
        // d_k = 256 as two key slices whose f32 partial dv `gla_fwd_ksum` adds (the default's cluster is not emulated)
        (
            "gla",
            DType::BF16,
            Dims::new(1, 45, 2, 256, 128),
            None,
            By(-12.0),
        ),
        (
            "rwkv6",
            DType::BF16,
            Dims::new(1, 75, 1, 256, 128),
            cu.clone(),
            By(0.0),
        ),
        // scalar gates (A with its row factors: no row-scaled chunks)
        ("mamba2", DType::BF16, d128, None, By(0.0)),
        (
            "mamba2",
            DType::F16,
            Dims::new(1, 75, 2, 64, 64),
            cu.clone(),
            By(-12.0),
        ),
        (
            "gated_retnet",
            DType::BF16,
            Dims::new(1, 45, 2, 256, 128),
            None,
            By(0.0),
        ),
        ("mlstm", DType::BF16, d128, None, By(12.0)),
    ];
    use rayon::prelude::*;
    let results: Vec<Result<String, String>> = cases
        .par_iter()
        .enumerate()
        .map(|(i, (name, dt, dims, cu, shift))| {
            let g = gate(name);
            let spec = KernelSpec::default_for(g, *dt, dims.dk, dims.dv)
                .and_then(|s| {
                    if dims.dk > 128 {
                        s.with_key_split(2)
                    } else {
                        Ok(s)
                    }
                })
                .and_then(|s| s.with_pass(Pass::Dv))
                .unwrap();
            let mut case = Case::random(g, *dims, *dt, 900 + i as u64, true, cu.clone());
            let per_token = case.logits.len() / (dims.b * dims.t);
            for (n, x) in case.logits.iter_mut().enumerate() {
                *x = dt.round(*x + shift.at((n / per_token) % dims.t));
            }
            let mut rng = rand::rngs::SmallRng::seed_from_u64(1900 + i as u64);
            let mut rn = |n: usize| tests::uniform(&mut rng, n, *dt);
            let d_o = rn(dims.b * dims.t * dims.h * dims.dv);
            let dht = rn(case.n_seqs() * dims.h * dims.dk * dims.dv);
            let want = case.reference_backward(g, &d_o, Some(&dht));
            let reversed = Case {
                dims: case.dims,
                dtype: case.dtype,
                q: case.q.clone(),
                k: case.k.clone(),
                v: d_o,
                logits: case.logits.clone(),
                params: case.params.clone(),
                initial_state: Some(dht),
                cu_seqlens: case.cu_seqlens.clone(),
            };
            let (dv, dh0) = emulate(&spec, &reversed, 1, None)?;
            let (ev, eh) = (
                rel_rms(&dv, &want.dv),
                rel_rms(&dh0, want.d_initial_state.as_ref().unwrap()),
            );
            let tol = 5e-3;
            let line = format!("{} shift {shift}: dv {ev:.2e}, dh0 {eh:.2e}", spec.id());
            if ev <= tol && eh <= tol {
                Ok(line)
            } else {
                Err(format!("{line} (tolerance {tol:.0e})"))
            }
        })
        .collect();
    tests::report_cases(results);
}

/// A scalar gate's dq and dk passes (`Pass::Dq`: the forward with q ← dO, k ← v, v ← k; `Pass::Dk`: the dv pass
/// with v ← q) against the f64 reference backward's dq and dk, without an initial state or a final-state gradient
/// (the calls they serve), at weak and strong decays, varlen with empty and one-token sequences, on the wgmma
/// defaults of d = 64 and 128, bf16 and f16: dq, dk (rounded to the dtype) and the gate's row sums their stores
/// leave (Σ_d q ⊙ dq − k ⊙ dk a token, f32) each within the backward's tolerance (5e-3 relative RMS).
#[test]
fn the_scalar_dq_dk_passes_match_the_f64_gradients_on_the_emulator() {
    use rand::SeedableRng;
    let gate = tests::gate_named;
    let d64 = Dims::new(2, 70, 2, 64, 64);
    let d128 = Dims::new(1, 75, 2, 128, 128);
    let cu = Some(vec![0, 0, 1, 41, 75]);
    let cases: Vec<(&str, DType, Dims, Option<Vec<usize>>, Shift)> = vec![
        ("mamba2", DType::BF16, d128, None, By(0.0)),
        ("mamba2", DType::F16, d64, None, By(-12.0)),
        ("mamba2", DType::BF16, d128, cu.clone(), By(12.0)),
        ("mlstm", DType::BF16, d64, None, By(0.0)),
        ("gated_retnet", DType::F16, d128, cu.clone(), By(0.0)),
        ("retnet", DType::BF16, d64, None, By(0.0)),
    ];
    use rayon::prelude::*;
    let results: Vec<Result<String, String>> = cases
        .par_iter()
        .enumerate()
        .map(|(i, (name, dt, dims, cu, shift))| {
            let g = gate(name);
            let mut case = Case::random(g, *dims, *dt, 700 + i as u64, false, cu.clone());
            if !case.logits.is_empty() {
                let per_token = case.logits.len() / (dims.b * dims.t);
                for (n, x) in case.logits.iter_mut().enumerate() {
                    *x = dt.round(*x + shift.at((n / per_token) % dims.t));
                }
            }
            let mut rng = rand::rngs::SmallRng::seed_from_u64(1700 + i as u64);
            let d_o = tests::uniform(&mut rng, dims.b * dims.t * dims.h * dims.dv, *dt);
            let want = case.reference_backward(g, &d_o, None);
            let (got, rows) = run_scalar_passes(g, &case, &d_o, None)?;
            let (h, d) = (dims.h, dims.dk);
            let tokens = rows.len() / (h * d.div_ceil(64));
            // (the reference's row sums Σ_d q ⊙ dq − k ⊙ dk, a (token, head), in f64)
            let want_rows: Vec<f64> = (0..tokens * h)
                .map(|r| {
                    (0..d)
                        .map(|c| {
                            case.q[r * d + c] as f64 * want.dq[r * d + c]
                                - case.k[r * d + c] as f64 * want.dk[r * d + c]
                        })
                        .sum()
                })
                .collect();
            let got_rows: Vec<f64> = (0..tokens * h)
                .map(|r| {
                    (0..d.div_ceil(64))
                        .map(|u| rows[u * tokens * h + r] as f64)
                        .sum()
                })
                .collect();
            let errs = [
                ("dq", rel_rms(&got[0], &want.dq)),
                ("dk", rel_rms(&got[1], &want.dk)),
                ("row sums", rel_rms(&got_rows, &want_rows)),
            ];
            let tol = 5e-3;
            let line = format!(
                "{name} {dt} {dims:?} shift {shift}: {}",
                tests::error_list(&errs)
            );
            if errs.iter().all(|&(_, e)| e <= tol) {
                Ok(line)
            } else {
                Err(format!("{line} (tolerance {tol:.0e})"))
            }
        })
        .collect();
    tests::report_cases(results);
}

/// A per-key gate's dq and dk passes (per-value kernels, `KernelSpec::shape`: dq = the forward with q ← dO, k ← v,
/// v ← k and the gate on the value side; dk its time-reversed twin with v ← q) against the f64 reference backward,
/// without an initial state or a final-state gradient: dq, dk (rounded to the dtype) and the gate's gradient by key
/// column that their stores leave — the dq pass writes E = q ⊙ dq, the dk pass turns it into d log α_t = Σ_{s≥t}
/// (q ⊙ dq − k ⊙ dk)_s, and its store the d logits and d params of it (d log α · ∂log α/∂x) — at weak and strong decays (RWKV-6's −exp(x), GLA's log σ shifted −12 / alternating
/// ±12 by chunk), varlen with empty and one-token sequences, and a long sequence (T = 1024, where the nearly
/// cancelling sums add up), d = 64 and 128, bf16 and f16. Tolerance: 5e-3 relative RMS (the backward's).
#[test]
fn the_per_key_dq_dk_passes_match_the_f64_gradients_on_the_emulator() {
    use rand::SeedableRng;
    let gate = tests::gate_named;
    let cu = Some(vec![0, 0, 1, 41, 75]);
    let cases: Vec<(&str, DType, Dims, Option<Vec<usize>>, Shift)> = vec![
        (
            "gla",
            DType::BF16,
            Dims::new(2, 70, 2, 64, 64),
            None,
            By(0.0),
        ),
        (
            "rwkv6",
            DType::BF16,
            Dims::new(1, 75, 1, 128, 128),
            cu.clone(),
            By(0.0),
        ),
        (
            "gla",
            DType::F16,
            Dims::new(1, 75, 1, 128, 128),
            cu,
            Alternating,
        ),
        (
            "gla",
            DType::BF16,
            Dims::new(1, 96, 1, 64, 64),
            None,
            By(-12.0),
        ),
        (
            "hgrn2",
            DType::BF16,
            Dims::new(1, 1024, 1, 64, 64),
            None,
            By(0.0),
        ),
    ];
    use rayon::prelude::*;
    let results: Vec<Result<String, String>> = cases
        .par_iter()
        .enumerate()
        .map(|(i, (name, dt, dims, cu, shift))| {
            let g = gate(name);
            let mut case = Case::random(g, *dims, *dt, 900 + i as u64, false, cu.clone());
            let per_token = case.logits.len() / (dims.b * dims.t);
            for (n, x) in case.logits.iter_mut().enumerate() {
                *x = dt.round(*x + shift.at((n / per_token) % dims.t));
            }
            let mut rng = rand::rngs::SmallRng::seed_from_u64(1900 + i as u64);
            let d_o = tests::uniform(&mut rng, dims.b * dims.t * dims.h * dims.dv, *dt);
            let want = case.reference_backward(g, &d_o, None);
            let mut dg = Elems::nan(case.logits.len(), *dt);
            let mut dparams = vec![0f32; case.params.len()];
            let (got, _) = run_scalar_passes(g, &case, &d_o, Some((&mut dg, &mut dparams)))?;
            let dg = dg.to_f64(*dt);
            let dparams: Vec<f64> = dparams.iter().map(|&x| x as f64).collect();
            // (the closed form's d log α, in f64: the reverse sum of q ⊙ dq − k ⊙ dk down each key column of each
            // sequence; the kernels' d logits are this times ∂log α/∂x, rounded)
            let (h, d) = (dims.h, dims.dk);
            let mut want_dlog = vec![0f64; dg.len()];
            for (s0, len) in dims.sequences(case.cu_seqlens.as_deref()).unwrap() {
                for c in 0..h * d {
                    let mut acc = 0f64;
                    for t in (s0..s0 + len).rev() {
                        let x = t * h * d + c;
                        acc += case.q[x] as f64 * want.dq[x] - case.k[x] as f64 * want.dk[x];
                        want_dlog[x] = acc;
                    }
                }
            }
            let p = |hh: usize| -> Vec<f64> {
                let np = g.params().len();
                case.params[hh * np..(hh + 1) * np]
                    .iter()
                    .map(|&x| x as f64)
                    .collect()
            };
            let want_dg: Vec<f64> = (0..dg.len())
                .map(|x| want_dlog[x] * g.dlog_alpha_dx(case.logits[x] as f64, &p((x / d) % h)))
                .collect();
            let (e_dl, e_dp) = tests::gate_grad_errors(g, &case, &want, (&dg, &dparams));
            let errs = [
                ("dq", rel_rms(&got[0], &want.dq)),
                ("dk", rel_rms(&got[1], &want.dk)),
                ("d logits", rel_rms(&dg, &want_dg)),
                ("dlogits (terms)", e_dl),
                ("dparams", e_dp),
            ];
            let tol = 5e-3;
            let line = format!(
                "{name} {dt} {dims:?} shift {shift}: {}",
                tests::error_list(&errs)
            );
            if errs.iter().all(|&(_, e)| e <= tol) {
                Ok(line)
            } else {
                Err(format!("{line} (tolerance {tol:.0e})"))
            }
        })
        .collect();
    tests::report_cases(results);
}

/// Runs a gate's dq pass then its dk pass on the emulator as `Gla::backward` does (q ← dO, k ← v, v ← k for dq or q
/// for dk; no initial state; the row sums' weights q, then k): ([dq, dk], the row sums f32 `[⌈d_k / 64⌉, tokens,
/// H]` — a per-key gate's: d log α, f32 `[tokens, H, d_k]`).
fn run_scalar_passes(
    g: &'static dyn Gate,
    case: &Case,
    d_o: &[f32],
    mut grads: Option<(&mut Elems, &mut Vec<f32>)>,
) -> Result<([Vec<f64>; 2], Vec<f32>), String> {
    use gla_codegen::Pass;
    let dims = case.dims;
    let tokens = case
        .cu_seqlens
        .as_ref()
        .and_then(|c| c.last().copied())
        .unwrap_or(dims.b * dims.t);
    let per_key = g.shape() == GateShape::PerKey;
    let mut rows = if per_key {
        vec![f32::NAN; tokens * dims.h * dims.dk]
    } else {
        vec![f32::NAN; dims.dk.div_ceil(64) * tokens * dims.h]
    };
    let mut got = [Vec::new(), Vec::new()];
    for (n, pass) in [Pass::Dq, Pass::Dk].into_iter().enumerate() {
        let spec = KernelSpec::pass_default(g, case.dtype, dims.dv, dims.dk, pass)
            .map_err(|e| e.to_string())?;
        let permuted = Case {
            dims: Dims::new(dims.b, dims.t, dims.h, dims.dv, dims.dk),
            dtype: case.dtype,
            q: d_o.to_vec(),
            k: case.v.clone(),
            v: if pass == Pass::Dq {
                case.k.clone()
            } else {
                case.q.clone()
            },
            logits: case.logits.clone(),
            params: case.params.clone(),
            initial_state: Some(vec![0.0; case.n_seqs() * dims.h * dims.dk * dims.dv]),
            cu_seqlens: case.cu_seqlens.clone(),
        };
        let w = if pass == Pass::Dq { &case.q } else { &case.k };
        let rows = Rows {
            w,
            out: &mut rows,
            grads: if pass == Pass::Dk { grads.take() } else { None },
        };
        got[n] = emulate(&spec, &permuted, 1, Some(rows))?.0;
    }
    Ok((got, rows))
}

/// The gate's gradient from the passes' f32 dq and dk: d log α_t = Σ_{s ≥ t} Σ_d (q ⊙ dq − k ⊙ dk)_{s,d} (no
/// final-state gradient), where the two row sums nearly cancel — so the passes' own error, not a rounding, is what
/// reaches it, and it adds up over the sequence: the check that their products carry Sᵀ, Q̃ and K̂ as hi + lo halves
/// (with bf16 products alone this was 0.9–2.6e-2). Long sequences (T = 2048, one head, d = 64 and 128), weak and
/// strong decays: the row sums the emulated passes' stores leave, reverse-summed in f32 as `gla_bwd_gate` does,
/// against the f64 reference's dq and dk through the same sums in f64. Tolerance: 5e-3 relative RMS (the walks keep
/// 1.6–1.9e-3 in `bwd_emulated`).
#[test]
fn the_scalar_passes_keep_the_gates_gradient_over_long_sequences_on_the_emulator() {
    use rand::SeedableRng;
    let gate = tests::gate_named;
    let cases: Vec<(&str, DType, Dims, f32)> = vec![
        ("mamba2", DType::BF16, Dims::new(1, 2048, 1, 64, 64), 0.0),
        ("mamba2", DType::BF16, Dims::new(1, 2048, 1, 128, 128), -4.0),
        ("mlstm", DType::BF16, Dims::new(1, 2048, 1, 64, 64), 0.0),
        (
            "gated_retnet",
            DType::BF16,
            Dims::new(1, 2048, 1, 128, 128),
            0.0,
        ),
        ("mamba2", DType::F16, Dims::new(1, 2048, 1, 64, 64), 4.0),
    ];
    use rayon::prelude::*;
    let results: Vec<Result<String, String>> = cases
        .par_iter()
        .enumerate()
        .map(|(i, (name, dt, dims, shift))| {
            let g = gate(name);
            let mut case = Case::random(g, *dims, *dt, 500 + i as u64, false, None);
            for x in case.logits.iter_mut() {
                *x = dt.round(*x + shift);
            }
            let mut rng = rand::rngs::SmallRng::seed_from_u64(1500 + i as u64);
            let d_o = tests::uniform(&mut rng, dims.b * dims.t * dims.h * dims.dv, *dt);
            let want = case.reference_backward(g, &d_o, None);
            let (got, rows) = run_scalar_passes(g, &case, &d_o, None)?;
            // (one head: the stores' row sums, summed over the key tiles and reverse-summed in f32 as gla_bwd_gate
            // does; the reference's in f64)
            let (d, tiles) = (dims.dk, dims.dk.div_ceil(64));
            let mut acc = 0f32;
            let mut got_dlog = vec![0f64; dims.t];
            for t in (0..dims.t).rev() {
                acc += (0..tiles).map(|u| rows[u * dims.t + t]).sum::<f32>();
                got_dlog[t] = acc as f64;
            }
            let mut acc = 0f64;
            let mut want_dlog = vec![0f64; dims.t];
            for t in (0..dims.t).rev() {
                acc += (0..d)
                    .map(|c| {
                        case.q[t * d + c] as f64 * want.dq[t * d + c]
                            - case.k[t * d + c] as f64 * want.dk[t * d + c]
                    })
                    .sum::<f64>();
                want_dlog[t] = acc;
            }
            let e = rel_rms(&got_dlog, &want_dlog);
            let tol = 5e-3;
            let line = format!(
                "{name} {dt} T={} d={d} shift {shift}: d log α {e:.2e} (dq {:.2e}, dk {:.2e})",
                dims.t,
                rel_rms(&got[0], &want.dq),
                rel_rms(&got[1], &want.dk)
            );
            if e <= tol {
                Ok(line)
            } else {
                Err(format!("{line} (tolerance {tol:.0e})"))
            }
        })
        .collect();
    tests::report_cases(results);
}
