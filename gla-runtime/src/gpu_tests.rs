//! Tests that need the GPU (skipped with `SKIPPED <test>: <reason>` without one; fail with `GLA_REQUIRE_GPU=1`).
//! The forward tests compare against a small f64 recurrence written here on purpose (independent of the kernels'
//! chunkwise decomposition): `S_t = diag(α_t) S_{t-1} + k_tᵀ v_t`, `o_t = scale · q_t S_t`.

use crate::forward::{ForwardOptions, Gla};
use crate::tensor::DeviceTensor;
use crate::testing::gpu_or_skip;
use crate::timing;
use gla_codegen::fixtures::{FIXED, PER_HEAD, PER_KEY};
use gla_codegen::{KernelSpec, Tiles};
use gla_core::{DType, Gate, GateShape, HostTensor};

/// xorshift64*: deterministic inputs without a dev-dependency.
struct Rng(u64);
impl Rng {
    fn uniform(&mut self, lo: f32, hi: f32) -> f32 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let u = (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 40) as f32 / (1u64 << 24) as f32;
        lo + (hi - lo) * u
    }
    fn vec(&mut self, n: usize, lo: f32, hi: f32) -> Vec<f32> {
        (0..n).map(|_| self.uniform(lo, hi)).collect()
    }
}

struct Case {
    gate: &'static dyn Gate,
    dtype: DType,
    b: usize,
    t: usize,
    h: usize,
    dk: usize,
    dv: usize,
    cu: Option<Vec<usize>>,
    h0: bool,
    variant: Option<KernelSpec>,
}

struct Inputs {
    q: HostTensor,
    k: HostTensor,
    v: HostTensor,
    g: Option<HostTensor>,
    h0: Option<HostTensor>,
}

fn inputs(c: &Case, seed: u64) -> Inputs {
    let mut r = Rng(seed | 1);
    let (b, t, h, dk, dv) = (c.b, c.t, c.h, c.dk, c.dv);
    let n = c.cu.as_ref().map_or(b, |cu| cu.len() - 1);
    let ten = |r: &mut Rng, dt, shape: &[usize], lo, hi| {
        HostTensor::from_f32(dt, shape, &r.vec(shape.iter().product(), lo, hi)).unwrap()
    };
    let q = ten(&mut r, c.dtype, &[b, t, h, dk], -1.0, 1.0);
    let k = ten(&mut r, c.dtype, &[b, t, h, dk], -1.0, 1.0);
    let v = ten(&mut r, c.dtype, &[b, t, h, dv], -1.0, 1.0);
    let g = match c.gate.shape() {
        // Logits are stored in the element dtype, like q.
        GateShape::PerKey => Some(ten(&mut r, c.dtype, &[b, t, h, dk], -3.0, 3.0)),
        GateShape::PerHead => Some(ten(&mut r, c.dtype, &[b, t, h], -3.0, 3.0)),
        _ => None,
    };
    let h0 =
        c.h0.then(|| ten(&mut r, DType::F32, &[n, h, dk, dv], -0.5, 0.5));
    Inputs { q, k, v, g, h0 }
}

/// f64 recurrence over the rounded inputs: (o `[B·T·H·dv]`, final state `[N·H·dk·dv]`).
fn reference(c: &Case, x: &Inputs, scale: f64) -> (Vec<f64>, Vec<f64>) {
    let (h, dk, dv) = (c.h, c.dk, c.dv);
    let (q, k, v) = (x.q.to_f64(), x.k.to_f64(), x.v.to_f64());
    let g = x.g.as_ref().map(|g| g.to_f64());
    let seqs: Vec<(usize, usize)> = match &c.cu {
        Some(cu) => cu.windows(2).map(|w| (w[0], w[1] - w[0])).collect(),
        None => (0..c.b).map(|i| (i * c.t, c.t)).collect(),
    };
    let mut o = vec![0.0; c.b * c.t * h * dv];
    let mut ht = vec![0.0; seqs.len() * h * dk * dv];
    for (n, &(start, len)) in seqs.iter().enumerate() {
        for hh in 0..h {
            let slab = (n * h + hh) * dk * dv;
            let mut s: Vec<f64> = match &x.h0 {
                Some(h0) => h0.to_f64()[slab..slab + dk * dv].to_vec(),
                None => vec![0.0; dk * dv],
            };
            for tok in start..start + len {
                let row = tok * h + hh;
                for i in 0..dk {
                    let la = match c.gate.shape() {
                        GateShape::PerKey => {
                            c.gate.log_alpha(g.as_ref().unwrap()[row * dk + i], &[])
                        }
                        GateShape::PerHead => c.gate.log_alpha(g.as_ref().unwrap()[row], &[]),
                        _ => c.gate.log_alpha(hh as f64, &[]),
                    };
                    let a = la.exp();
                    for j in 0..dv {
                        s[i * dv + j] = a * s[i * dv + j] + k[row * dk + i] * v[row * dv + j];
                    }
                }
                for j in 0..dv {
                    o[row * dv + j] = scale
                        * (0..dk)
                            .map(|i| q[row * dk + i] * s[i * dv + j])
                            .sum::<f64>();
                }
            }
            ht[slab..slab + dk * dv].copy_from_slice(&s);
        }
    }
    (o, ht)
}

/// Relative RMS error ‖got − want‖ / ‖want‖; NaN if any value is not finite (an unwritten, poisoned element).
fn rel_rms(got: &[f32], want: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len());
    if got.iter().any(|x| !x.is_finite()) {
        return f64::NAN;
    }
    let num: f64 = got
        .iter()
        .zip(want)
        .map(|(&g, &w)| (g as f64 - w).powi(2))
        .sum();
    let den: f64 = want.iter().map(|w| w * w).sum();
    (num / den.max(1e-300)).sqrt()
}

/// Where a result goes wrong: non-finite count and first index, worst finite element.
fn diagnose(got: &[f32], want: &[f64], shape: &[usize]) -> String {
    let unravel = |mut i: usize| {
        let mut idx = vec![0; shape.len()];
        for d in (0..shape.len()).rev() {
            idx[d] = i % shape[d];
            i /= shape[d];
        }
        idx
    };
    let bad: Vec<usize> = (0..got.len()).filter(|&i| !got[i].is_finite()).collect();
    let worst = (0..got.len())
        .filter(|&i| got[i].is_finite())
        .max_by(|&a, &b| {
            (got[a] as f64 - want[a])
                .abs()
                .total_cmp(&(got[b] as f64 - want[b]).abs())
        });
    let mut m = format!("{} of {} non-finite", bad.len(), got.len());
    if let (Some(&f), Some(&l)) = (bad.first(), bad.last()) {
        m += &format!(" (first at {:?}, last at {:?})", unravel(f), unravel(l));
    }
    if let Some(w) = worst {
        m += &format!(
            "; worst finite at {:?}: got {} want {:.5}",
            unravel(w),
            got[w],
            want[w]
        );
    }
    let finite = got.iter().zip(want).filter(|(g, _)| g.is_finite());
    let (num, den) = finite.fold((0.0, 0.0), |(n, d), (&g, &w)| {
        (n + (g as f64 - w).powi(2), d + w * w)
    });
    m + &format!(
        "; rel RMS over finite {:.2e}",
        (num / f64::max(den, 1e-300)).sqrt()
    )
}

fn tolerance(dt: DType) -> f64 {
    match dt {
        DType::F32 => 1e-4,
        _ => 1.5e-2,
    }
}

/// Run `c` through `forward_into` with poisoned outputs and compare o and the final state to the reference.
fn check_case(gla: &Gla, name: &str, c: &Case) {
    let x = inputs(c, 0x9e37_79b9_7f4a_7c15 ^ (c.t as u64 * 31 + c.dk as u64));
    let up = |t: &HostTensor| gla.upload(t).unwrap();
    let (q, k, v) = (up(&x.q), up(&x.k), up(&x.v));
    let g = x.g.as_ref().map(up);
    let h0 = x.h0.as_ref().map(up);
    let n = c.cu.as_ref().map_or(c.b, |cu| cu.len() - 1);
    let mut o = gla.poisoned(c.dtype, &[c.b, c.t, c.h, c.dv]).unwrap();
    let mut ht = gla.poisoned(DType::F32, &[n, c.h, c.dk, c.dv]).unwrap();
    let opts = ForwardOptions {
        initial_state: h0.as_ref(),
        cu_seqlens: c.cu.as_deref(),
        variant: c.variant,
        ..Default::default()
    };
    gla.forward_into(
        c.gate,
        &q,
        &k,
        &v,
        g.as_ref(),
        None,
        &opts,
        &mut o,
        Some(&mut ht),
    )
    .unwrap_or_else(|e| panic!("{name}: {e}"));
    gla.synchronize().unwrap();
    let (want_o, want_ht) = reference(c, &x, 1.0 / (c.dk as f64).sqrt());
    let (got_o, got_ht) = (o.to_f32().unwrap(), ht.to_f32().unwrap());
    let eo = rel_rms(&got_o, &want_o);
    let eh = rel_rms(&got_ht, &want_ht);
    println!("{name}: rel RMS error o {eo:.2e}, final state {eh:.2e}");
    // NaN (an unwritten, poisoned element) fails both comparisons.
    let (ok_o, ok_h) = (
        eo <= tolerance(c.dtype),
        eh <= tolerance(DType::F32).max(tolerance(c.dtype) / 2.0),
    );
    if !ok_o {
        println!("  o: {}", diagnose(&got_o, &want_o, &[c.b, c.t, c.h, c.dv]));
    }
    if !ok_h {
        println!(
            "  final state: {}",
            diagnose(&got_ht, &want_ht, &[n, c.h, c.dk, c.dv])
        );
    }
    assert!(ok_o, "{name}: o error {eo:.3e} (NaN = unwritten output)");
    assert!(ok_h, "{name}: final state error {eh:.3e}");
}

fn case(
    gate: &'static dyn Gate,
    dtype: DType,
    b: usize,
    t: usize,
    h: usize,
    dk: usize,
    dv: usize,
) -> Case {
    Case {
        gate,
        dtype,
        b,
        t,
        h,
        dk,
        dv,
        cu: None,
        h0: false,
        variant: None,
    }
}

#[test]
fn device_is_an_h200_class_gpu() {
    let Some(gla) = gpu_or_skip("device_is_an_h200_class_gpu") else {
        return;
    };
    let i = gla.gpu().info();
    println!("{i:?}");
    assert_eq!(i.compute_capability, (9, 0));
    assert!(
        i.sm_count >= 100 && i.max_smem_per_block_optin >= 200 * 1024,
        "{i:?}"
    );
}

#[test]
fn tensors_round_trip() {
    let Some(gla) = gpu_or_skip("tensors_round_trip") else {
        return;
    };
    for dt in DType::ALL {
        let vals: Vec<f32> = (0..1001).map(|i| i as f32 * 0.25 - 100.0).collect();
        let h = HostTensor::from_f32(dt, &[7, 11, 13], &vals).unwrap();
        let mut d = gla.upload(&h).unwrap();
        assert_eq!(
            (d.shape(), d.dtype(), d.num_bytes()),
            (&[7usize, 11, 13][..], dt, 1001 * dt.size_bytes())
        );
        assert_eq!(d.download().unwrap(), h, "{dt}");
        let mut c = DeviceTensor::zeros(gla.gpu(), dt, &[7, 11, 13]).unwrap();
        assert!(c.to_f32().unwrap().iter().all(|&x| x == 0.0));
        c.copy_from(&d).unwrap();
        assert_eq!(c.download().unwrap(), h);
        d.poison().unwrap();
        assert!(
            d.to_f32().unwrap().iter().all(|x| x.is_nan()),
            "{dt}: poison"
        );
        d.fill_bytes(0).unwrap();
        assert!(d.to_f32().unwrap().iter().all(|&x| x == 0.0));
        assert!(d.device_ptr() != 0 && d.is_on(gla.gpu()));
    }
    let e = DeviceTensor::zeros(gla.gpu(), DType::F32, &[0, 4]).unwrap();
    assert_eq!(e.download().unwrap().to_f32().len(), 0);
}

#[test]
fn variants_are_compiled_once() {
    let Some(gla) = gpu_or_skip("variants_are_compiled_once") else {
        return;
    };
    let spec = KernelSpec::default_for(&PER_HEAD, DType::BF16, 64, 64).unwrap();
    let a = gla.compile_spec(&spec).unwrap();
    let b = gla.compile_spec(&spec).unwrap();
    assert!(std::sync::Arc::ptr_eq(&a, &b));
    assert!(gla.gpu().cached_modules() >= 1);
    assert_eq!(a.resources().len(), a.plan().kernels.len());
    for (k, r) in a.plan().kernels.iter().zip(a.resources()) {
        assert_eq!(k.name, r.name);
        assert!(r.registers > 0, "{r:?}");
        println!(
            "{} {}: {r:?} (from {}), smem {} B, compile {:.0} ms",
            spec.id(),
            k.name,
            if a.resources_from_log() {
                "ptxas log"
            } else {
                "driver attributes"
            },
            k.smem_bytes,
            a.compile_ms()
        );
    }
}

#[test]
fn forward_per_key_bf16_matches_reference() {
    let Some(gla) = gpu_or_skip("forward_per_key_bf16_matches_reference") else {
        return;
    };
    check_case(
        &gla,
        "per_key bf16 fused",
        &case(&PER_KEY, DType::BF16, 2, 200, 3, 128, 128),
    );
    let mut c = case(&PER_KEY, DType::BF16, 2, 130, 2, 64, 64);
    c.variant = Some(
        KernelSpec::new(
            &PER_KEY,
            DType::BF16,
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
    );
    check_case(&gla, "per_key bf16 materialized", &c);
}

#[test]
fn forward_other_gates_and_dtypes() {
    let Some(gla) = gpu_or_skip("forward_other_gates_and_dtypes") else {
        return;
    };
    check_case(
        &gla,
        "per_head f16",
        &case(&PER_HEAD, DType::F16, 1, 257, 2, 64, 64),
    );
    check_case(
        &gla,
        "fixed f32",
        &case(&FIXED, DType::F32, 2, 100, 2, 64, 64),
    );
    check_case(
        &gla,
        "per_key f32",
        &case(&PER_KEY, DType::F32, 1, 70, 2, 64, 64),
    );
}

#[test]
fn forward_masked_dims_varlen_and_states() {
    let Some(gla) = gpu_or_skip("forward_masked_dims_varlen_and_states") else {
        return;
    };
    // d_k = 100, d_v = 72 run on the 128 specialisation, masked.
    check_case(
        &gla,
        "per_key bf16 dk100 dv72",
        &case(&PER_KEY, DType::BF16, 1, 96, 2, 100, 72),
    );
    // Variable length with an empty sequence, initial and final state.
    let mut c = case(&PER_KEY, DType::BF16, 1, 300, 2, 64, 64);
    c.cu = Some(vec![0, 1, 1, 65, 300]);
    c.h0 = true;
    check_case(&gla, "per_key bf16 varlen + h0", &c);
    c.variant = Some(
        KernelSpec::new(
            &PER_KEY,
            DType::BF16,
            32,
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
    );
    check_case(&gla, "per_key bf16 varlen + h0 materialized", &c);
}

#[test]
fn forward_allocating_api_and_errors() {
    let Some(gla) = gpu_or_skip("forward_allocating_api_and_errors") else {
        return;
    };
    let c = case(&PER_HEAD, DType::BF16, 1, 64, 2, 64, 64);
    let x = inputs(&c, 5);
    let (q, k, v, g) = (
        gla.upload(&x.q).unwrap(),
        gla.upload(&x.k).unwrap(),
        gla.upload(&x.v).unwrap(),
        gla.upload(x.g.as_ref().unwrap()).unwrap(),
    );
    let out = gla
        .forward(
            &PER_HEAD,
            &q,
            &k,
            &v,
            Some(&g),
            None,
            &ForwardOptions {
                output_final_state: true,
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(out.o.shape(), &[1, 64, 2, 64]);
    assert_eq!(out.final_state.as_ref().unwrap().shape(), &[1, 2, 64, 64]);
    assert!(out.o.to_f32().unwrap().iter().all(|x| x.is_finite()));
    // Validation errors come before any launch.
    let e = gla
        .forward(
            &PER_HEAD,
            &q,
            &k,
            &v,
            None,
            None,
            &ForwardOptions::default(),
        )
        .unwrap_err();
    assert!(e.to_string().contains("logits"), "{e}");
    let e = gla
        .forward(
            &PER_KEY,
            &q,
            &k,
            &v,
            Some(&g),
            None,
            &ForwardOptions::default(),
        )
        .unwrap_err();
    assert!(e.to_string().contains("`logits`"), "{e}");
    gla.synchronize().unwrap();
}

#[test]
fn large_shared_memory_variant_launches() {
    let Some(gla) = gpu_or_skip("large_shared_memory_variant_launches") else {
        return;
    };
    // The dk = 256 bf16 variant with the most shared memory.
    let smem_of =
        |s: &KernelSpec| gla_codegen::generate(s).map_or(0, |g| g.plan.kernels[0].smem_bytes);
    let spec = gla_codegen::all_variants(&PER_KEY)
        .into_iter()
        .filter(|s| s.dtype == DType::BF16 && s.dk == 256 && !s.materialize)
        .max_by_key(smem_of)
        .expect("a dk = 256 variant");
    let v = gla.compile_spec(&spec).unwrap();
    let smem = v.plan().kernels[0].smem_bytes;
    println!("{}: {smem} B dynamic shared memory", spec.id());
    assert!(smem > 48 * 1024);
    let mut c = case(&PER_KEY, DType::BF16, 1, 150, 1, 256, 256);
    c.variant = Some(spec);
    check_case(&gla, &format!("{} (large smem)", spec.id()), &c);
}

#[test]
fn timing_and_copy_bandwidth() {
    let Some(gla) = gpu_or_skip("timing_and_copy_bandwidth") else {
        return;
    };
    let gpu = gla.gpu();
    let bw = timing::copy_bandwidth(gpu, timing::COPY_BYTES, 10).unwrap();
    println!(
        "dtod copy of 1 GiB: median {:.3} ms -> {:.2} TB/s (read + write)",
        bw.stats.median_ms, bw.tb_per_s
    );
    assert!(bw.tb_per_s > 1.0 && bw.tb_per_s < 6.0, "{bw:?}");
    let mut flush = timing::L2Flush::new(gpu).unwrap();
    let ms = timing::time_ms(gpu, || flush.flush()).unwrap();
    println!("L2 flush (256 MB memset): {ms:.3} ms");
    assert!(ms > 0.0);
    // A forward timed with the harness, outputs reused.
    let c = case(&PER_KEY, DType::BF16, 2, 1024, 4, 128, 128);
    let x = inputs(&c, 9);
    let (q, k, v, g) = (
        gla.upload(&x.q).unwrap(),
        gla.upload(&x.k).unwrap(),
        gla.upload(&x.v).unwrap(),
        gla.upload(x.g.as_ref().unwrap()).unwrap(),
    );
    let mut o = gla.zeros(DType::BF16, &[2, 1024, 4, 128]).unwrap();
    let opts = ForwardOptions::default();
    let s = timing::bench(gpu, 3, 10, Some(&mut flush), || {
        gla.forward_into(&PER_KEY, &q, &k, &v, Some(&g), None, &opts, &mut o, None)
    })
    .unwrap();
    println!(
        "forward 2x1024x4x128 bf16: median {:.3} ms (min {:.3})",
        s.median_ms, s.min_ms
    );
    assert!(s.median_ms > 0.0);
}

#[test]
fn empty_sequences_pass_the_state_through() {
    let Some(gla) = gpu_or_skip("empty_sequences_pass_the_state_through") else {
        return;
    };
    // T = 0: no tokens, no chunks; the final state is the initial state. Fused and materialized plans.
    for materialize in [false, true] {
        let spec = KernelSpec::new(
            &PER_HEAD,
            DType::BF16,
            64,
            16,
            64,
            64,
            materialize,
            Tiles {
                block_v: 32,
                warps: 4,
                producer_warps: 0,
                producer_groups: 1,
                wgmma: false,
                ctas_per_sm: 1,
            },
        )
        .unwrap();
        let z = |shape: &[usize]| gla.zeros(DType::BF16, shape).unwrap();
        let (q, k, v, g) = (
            z(&[2, 0, 3, 64]),
            z(&[2, 0, 3, 64]),
            z(&[2, 0, 3, 64]),
            z(&[2, 0, 3]),
        );
        let h0_vals: Vec<f32> = (0..2 * 3 * 64 * 64)
            .map(|i| (i % 97) as f32 * 0.01)
            .collect();
        let h0 = DeviceTensor::from_f32(gla.gpu(), &[2, 3, 64, 64], &h0_vals).unwrap();
        let opts = ForwardOptions {
            initial_state: Some(&h0),
            output_final_state: true,
            variant: Some(spec),
            ..Default::default()
        };
        let out = gla
            .forward(&PER_HEAD, &q, &k, &v, Some(&g), None, &opts)
            .unwrap();
        assert_eq!(out.o.shape(), &[2, 0, 3, 64]);
        assert_eq!(
            out.final_state.unwrap().to_f32().unwrap(),
            h0_vals,
            "materialize = {materialize}"
        );
    }
}

#[test]
fn a_tuning_cache_entry_runs_from_its_cubin() {
    // A cache holding a non-default variant's cubin for the call's key: the call that names no variant runs it
    // (loaded from the cubin, no compile of that variant), and matches the reference.
    use crate::cache::{
        sha256_hex, Bucket, CacheKey, Entry, GpuFacts, Timing, TuningCache, Validators,
    };
    let Some(gla) = gpu_or_skip("a_tuning_cache_entry_runs_from_its_cubin") else {
        return;
    };
    let tiles = Tiles {
        block_v: 64,
        warps: 8,
        producer_warps: 0,
        producer_groups: 1,
        wgmma: false,
        ctas_per_sm: 1,
    };
    let spec = KernelSpec::new(&PER_KEY, DType::BF16, 64, 16, 128, 128, false, tiles).unwrap();
    assert_ne!(
        spec,
        KernelSpec::default_for(&PER_KEY, DType::BF16, 128, 128).unwrap(),
        "a variant the default would not pick"
    );
    let g = gla_codegen::generate(&spec).unwrap();
    let compiled = crate::nvrtc::compile(&g.source, &spec.id()).unwrap();
    let dir = std::env::temp_dir().join(format!("gla-gpu-tuned-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut c = TuningCache::empty(&dir);
    let gpu = GpuFacts::from(gla.gpu().info());
    let e = Entry {
        key: CacheKey::new(&PER_KEY, DType::BF16, 128, 128),
        bucket: Bucket::of(2 * 3, 200),
        variant: spec.id(),
        spec: Some(gla_codegen::SpecRecord::of(&spec)),
        backward: None,
        cubin: String::new(),
        cubin_sha256: String::new(),
        validators: Validators {
            arch: "sm_90a".into(),
            nvrtc_version: crate::nvrtc::probe().unwrap().version,
            source_sha256: sha256_hex(g.source.as_bytes()),
            gpu: Some(gpu),
        },
        timing: Some(Timing {
            median_ms: 1.0,
            default_ms: None,
            candidates: 1,
            strengths: vec![],
            all_ms: Default::default(),
        }),
    };
    c.insert(e, compiled.cubin);
    c.save().unwrap();
    assert_eq!(gla.add_tuning_cache(&dir).unwrap(), 1);
    check_case(
        &gla,
        "per_key bf16 from the tuning cache",
        &case(&PER_KEY, DType::BF16, 2, 200, 3, 128, 128),
    );
    let st = gla.tuning_stats();
    assert_eq!(st.hits, 1, "{st:?}");
    assert!(
        gla.loaded_variants().contains(&spec.id()),
        "the cached variant ran"
    );
}

/// `DeviceTensor::tiled` equals the host-side cycle of its pool, element for element: shorter than the pool, one
/// pool, and 5 pools + 3 (four doublings, a partial last copy), in bf16 and f32, from a non-zero offset.
#[test]
fn tiled_tensors_cycle_their_pool() {
    let Some(gla) = gpu_or_skip("tiled_tensors_cycle_their_pool") else {
        return;
    };
    let mut rng = Rng(77);
    for dt in [DType::BF16, DType::F32] {
        let pool_vals = rng.vec(1000, -2.0, 2.0);
        let pool = HostTensor::from_f32(dt, &[1000], &pool_vals).unwrap();
        let rounded = pool.to_f64();
        for (n, offset) in [(7usize, 3usize), (1000, 999), (5003, 1234)] {
            let t = DeviceTensor::tiled(gla.gpu(), &[1, n], &pool, offset).unwrap();
            let got = t.to_f32().unwrap();
            let bad = (0..n).find(|&i| got[i] as f64 != rounded[(i + offset) % 1000]);
            assert!(
                bad.is_none(),
                "{dt} n {n} offset {offset}: element {bad:?} differs"
            );
        }
    }
    assert!(DeviceTensor::tiled(
        gla.gpu(),
        &[4],
        &HostTensor::from_f32(DType::F32, &[0], &[]).unwrap(),
        0
    )
    .is_err());
}
