//! `bench`: time every bf16 forward variant of the GLA (per-key) and Mamba-2 (per-head) gates at the issue's
//! shapes on the GPU, with the memory floor measured in the same run. Writes JSON in the schema of
//! `benches/python/report.py` (which merges it with fla's numbers into `benches/results/`).
//!
//!   bench [--out ours.json] [--reps 50] [--shapes all|quick|B,T,H,D;...] [--variants all|default|none|<id part>]
//!         [--gates gla,mamba2,<any registered gate>] [--strengths all|none|<label>,...] [--backward [--forms chunks,walks,frozen,passes,dqdk-walks]] [--decode] [--lineinfo]
//!   bench --cold-start [--out cold.json]   (Gla::new → the first forward's output, with the tuning caches; where
//!   the repository is not where it was built, name the shipped one: GLA_TUNING_CACHE=$PWD/tuning/caches/h200)
//!   (`--backward`: also the forward + backward and the backward alone at the benchmark shapes, in each backward
//!   form of `--forms` (default chunks,walks; `frozen`: the walk form without the gate's gradients,
//!   `BackwardOptions::skip_gate_gradients`; `walks`: dq / dk as `Gla::backward` chooses by default; `passes`: dq / dk
//!   as passes wherever they exist, `dqdk-walks`: from the walks, `BackwardOptions::dq_dk_passes`), rows with
//!   `"pass": "fwd_bwd"` / `"bwd"` and `"form"`)
//!   (`--decode`: also the decode step at N × H × d from 8 × 16 × 128 to 256 × 16 × 128, rows `"pass": "decode"`)
//!   (`--lineinfo`: kernels compiled with -lineinfo, for ncu's source view)
//!
//! Two kinds of rows, all `{"impl": "ours", "pass": "fwd", "gate", "strength", "B", "T", "H", "D", "ms", ...}`:
//! * the variant sweep (`--variants`, `--gates`): every bf16 variant of the GLA (`gla/16`) and Mamba-2 gates;
//! * the strength axis (`--strengths`, `tests::strengths`): the variant the runtime runs for the call
//!   (`Gla::variant_for`: the tuning cache's pick or the default) for each per-key gate strength — GLA with
//!   normaliser 16 / 1 / 0.1, fla's benchmark gate, RWKV-6, HGRN-2, constant −60 and −1e-6 — on logits x ~ N(0, 1),
//!   each with its accuracy vs f64 at B2 T1024 H4. fla_bench.py times fla on the same gates (case `gla_fwd`).
//!   bench --fla-dump DIR --out same_inputs.json
//!
//! `--fla-dump`: the same-inputs check. `benches/python/fla_bench.py` (case `acc`) dumps one per-key case: q, k, v,
//! fla's log-gate g, fla's output and the f64 recurrence's output. Our default variant runs on exactly those inputs
//! (the raw logits x are recovered from g as the dump's header says) and we report ours vs f64, fla vs f64 and
//! ours vs fla (relative RMS).
//!
//! Timing: CUDA events around each run, 3 warm-ups, median of `--reps` runs, L2 flushed (256 MB write) before each
//! run; inputs are fresh random values (never zeros). Accuracy: each shape's best variant is re-run at a smaller
//! problem (B=2, T=1024, H=4, same D) and compared with the f64 reference (relative RMS).
use gla_codegen::{all_variants, KernelSpec};
use gla_core::{DType, Dims, Gate, GateShape};
use gla_runtime::timing::{bench, copy_bandwidth, L2Flush};
use gla_runtime::{BackwardForm, BackwardOptions, DeviceTensor, ForwardOptions, Gla};
use serde_json::json;
use tests::strengths::Strength;
use tests::{rel_rms, Case};

struct Inputs {
    q: DeviceTensor,
    k: DeviceTensor,
    v: DeviceTensor,
    logits: Option<DeviceTensor>,
    params: Option<DeviceTensor>,
    o: DeviceTensor,
}

fn upload(gla: &Gla, gate: &'static dyn Gate, case: &Case) -> Inputs {
    let d = case.dims;
    let dt = case.dtype;
    let lshape = gla_runtime::forward::logits_shape(gate.shape(), &d);
    let np = gate.params().len();
    Inputs {
        q: gla.upload(&case.host(&case.q, &d.q_shape(), dt)).unwrap(),
        k: gla.upload(&case.host(&case.k, &d.q_shape(), dt)).unwrap(),
        v: gla.upload(&case.host(&case.v, &d.v_shape(), dt)).unwrap(),
        logits: (gate.shape() != GateShape::Fixed)
            .then(|| gla.upload(&case.host(&case.logits, &lshape, dt)).unwrap()),
        params: (np > 0)
            .then(|| DeviceTensor::from_f32(gla.gpu(), &[d.h, np], &case.params).unwrap()),
        o: gla.poisoned(dt, &d.v_shape()).unwrap(),
    }
}

fn run(
    gla: &Gla,
    gate: &'static dyn Gate,
    x: &mut Inputs,
    spec: KernelSpec,
) -> gla_core::error::Result<()> {
    let opts = ForwardOptions {
        variant: Some(spec),
        ..Default::default()
    };
    gla.forward_into(
        gate,
        &x.q,
        &x.k,
        &x.v,
        x.logits.as_ref(),
        x.params.as_ref(),
        &opts,
        &mut x.o,
        None,
    )
}

/// Read a raw little-endian f32 file of the fla dump.
fn read_f32(dir: &std::path::Path, name: &str) -> Vec<f32> {
    let bytes = std::fs::read(dir.join(name))
        .unwrap_or_else(|e| panic!("{}: {e}", dir.join(name).display()));
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// The same-inputs check against fla's dump (see the module doc).
fn same_inputs(gla: &Gla, dir: &str, out: &str) {
    let dir = std::path::Path::new(dir);
    let header: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("header.json")).expect("header.json"),
    )
    .expect("header JSON");
    let s: Vec<usize> = header["shape_BTHD"]
        .as_array()
        .expect("shape_BTHD")
        .iter()
        .map(|x| x.as_u64().unwrap() as usize)
        .collect();
    let (b, t, h, d) = (s[0], s[1], s[2], s[3]);
    let scale = header["scale"].as_f64().expect("scale") as f32;
    let file = |n: &str| {
        header["tensors"][n]["file"]
            .as_str()
            .unwrap_or_else(|| panic!("tensor {n} missing"))
            .to_string()
    };
    let (q, k, v, g) = (
        read_f32(dir, &file("q")),
        read_f32(dir, &file("k")),
        read_f32(dir, &file("v")),
        read_f32(dir, &file("g")),
    );
    let (o_fla, o_ref) = (read_f32(dir, &file("o_fla")), read_f32(dir, &file("o_ref")));
    // Raw logits from fla's g = logsigmoid(x)/16: x = bf16(y − log(−expm1(y))), y = 16 g (the dump's recipe).
    let x: Vec<f32> = g
        .iter()
        .map(|&gv| {
            let y = 16.0 * gv as f64;
            half::bf16::from_f64(y - (-y.exp_m1()).ln()).to_f32()
        })
        .collect();
    let gate: &'static dyn Gate = &gla::gates::Gla;
    let shape = [b, t, h, d];
    let up = |data: &[f32]| {
        gla.upload(&gla_core::HostTensor::from_f32(DType::BF16, &shape, data).expect("host tensor"))
            .expect("upload")
    };
    let (qd, kd, vd, xd) = (up(&q), up(&k), up(&v), up(&x));
    let spec = KernelSpec::default_for(gate, DType::BF16, d, d).expect("variant");
    let opts = ForwardOptions {
        scale: Some(scale),
        variant: Some(spec),
        ..Default::default()
    };
    let o = gla
        .forward(gate, &qd, &kd, &vd, Some(&xd), None, &opts)
        .expect("forward")
        .o;
    let ours: Vec<f64> = o.to_f32().unwrap().into_iter().map(f64::from).collect();
    let f64v = |x: &[f32]| x.iter().map(|&v| v as f64).collect::<Vec<f64>>();
    let (refv, flav) = (f64v(&o_ref), f64v(&o_fla));
    let (e_ours, e_fla, e_diff) = (
        rel_rms(&ours, &refv),
        rel_rms(&flav, &refv),
        rel_rms(&ours, &flav),
    );
    println!(
        "same inputs ({b},{t},{h},{d}, per-key gla, bf16): ours vs f64 {e_ours:.3e}, fla vs f64 {e_fla:.3e}, ours vs fla {e_diff:.3e} ({})",
        spec.id()
    );
    let rec = json!({"same_inputs": {"shape": shape, "gate": "gla", "variant": spec.id(), "ours_vs_f64": e_ours,
        "fla_vs_f64": e_fla, "ours_vs_fla": e_diff, "fla_vs_f64_in_header": header["rel_rms_fla_vs_ref"],
        "x_from_g_mismatches": header["x_from_g_mismatches"], "dump": dir.display().to_string()}});
    std::fs::write(out, serde_json::to_string_pretty(&rec).unwrap()).unwrap();
}

/// Bytes a forward moves (q, k, v, logits read, o written; bf16) and its nominal flops (C = 64), as report.py models.
fn traffic(gate: &dyn Gate, b: usize, t: usize, h: usize, d: usize) -> (f64, f64) {
    let gate_elems = if gate.shape() == GateShape::PerKey {
        b * t * h * d
    } else {
        b * t * h
    };
    let bytes = 2.0 * (4.0 * (b * t * h * d) as f64 + gate_elems as f64);
    let flops = (b * h * t) as f64 * (4.0 * 64.0 * d as f64 + 4.0 * (d * d) as f64);
    (bytes, flops)
}

/// The strength axis at one shape: the runtime's variant for each strength's gate, timed, and its accuracy vs f64.
fn strength_rows(
    gla: &Gla,
    flush: &mut L2Flush,
    reps: usize,
    copy_gbps: f64,
    shape: (usize, usize, usize, usize),
    strengths: &[Strength],
) -> Vec<serde_json::Value> {
    let (b, t, h, d) = shape;
    let gpu = gla.gpu();
    let mut rows = Vec::new();
    // Compile (or load from a tuning cache) every strength's kernel first, in parallel (not timed).
    let picks: Vec<(Strength, Option<KernelSpec>)> = {
        use rayon::prelude::*;
        strengths
            .par_iter()
            .map(|st| {
                let spec = gla
                    .variant_for(st.gate, DType::BF16, &[b, t, h, d], d, None)
                    .ok();
                if let Some(s) = &spec {
                    if let Err(e) = gla.compile_spec(s) {
                        println!("{:<60} failed to compile: {e}", s.id());
                    }
                }
                (*st, spec)
            })
            .collect()
    };
    for (st, spec) in picks {
        let Some(spec) = spec else {
            println!("{b},{t},{h},{d} {}: no variant", st.label);
            continue;
        };
        let case = Case::random(
            st.gate,
            Dims::new(b, t, h, d, d),
            DType::BF16,
            42,
            false,
            None,
        );
        let mut x = upload(gla, st.gate, &case);
        let (bytes, flops) = traffic(st.gate, b, t, h, d);
        let floor_ms = bytes / (copy_gbps * 1e9) * 1e3;
        let timed = run(gla, st.gate, &mut x, spec).and_then(|_| {
            bench(gpu, 3, reps, Some(&mut *flush), || {
                run(gla, st.gate, &mut x, spec)
            })
        });
        drop(x);
        let ms = match timed {
            Ok(t) => t.median_ms as f64,
            Err(e) => {
                println!("{b},{t},{h},{d} {} {}: failed: {e}", st.label, spec.id());
                continue;
            }
        };
        let small = Case::random(
            st.gate,
            Dims::new(2, 1024, 4, d, d),
            DType::BF16,
            43,
            false,
            None,
        );
        let want = small.reference(st.gate, None).0;
        let mut xs = upload(gla, st.gate, &small);
        let err = match run(gla, st.gate, &mut xs, spec) {
            Ok(()) => rel_rms(
                &xs.o
                    .to_f32()
                    .unwrap()
                    .into_iter()
                    .map(f64::from)
                    .collect::<Vec<_>>(),
                &want,
            ),
            Err(_) => f64::INFINITY,
        };
        println!(
            "{:>2},{:>5},{:>2},{:>3} {:<10} {:<20} {:<50} {:8.3} ms  {:5.2}x floor  rel RMS {:.2e}",
            b,
            t,
            h,
            d,
            st.label,
            st.formula,
            spec.id(),
            ms,
            ms / floor_ms,
            err
        );
        rows.push(json!({
            "impl": "ours", "pass": "fwd", "gate": st.gate.name(), "strength": st.label, "formula": st.formula,
            "distribution": "x ~ N(0, 1), bf16", "B": b, "T": t, "H": h, "D": d, "shape": [b, t, h, d], "ms": ms,
            "reps": reps, "variant": spec.id(), "gbps": bytes / ms / 1e6, "tflops": flops / ms / 1e9,
            "floor_ms": floor_ms, "copy_gbps": copy_gbps, "rel_rms_vs_f64": err, "axis": "strength"
        }));
    }
    rows
}

/// `--backward`: the forward (default variant) + [`Gla::backward`] and the backward alone, at one benchmark shape,
/// q, k, v, dO ~ N(0, 1) bf16, logits ~ N(0, 1) (the gates of `--gates`, then the per-key gate of each strength of
/// `--strengths`), in each form the backward has for it (`"form": "chunks" | "walks"`). Rows `{"pass": "fwd_bwd" |
/// "bwd", ...}` (fla_bench.py's name); the backward's time includes its allocations (outputs and the two workspaces,
/// stream-ordered).
fn backward_rows(
    gla: &Gla,
    flush: &mut L2Flush,
    reps: usize,
    (b, t, h, d): (usize, usize, usize, usize),
    gname: &str,
    strength: &str,
    gate: &'static dyn Gate,
    forms: &[(BackwardForm, bool, Option<bool>)],
    pass_tiles_all: bool,
) -> Vec<serde_json::Value> {
    let case = Case::random(gate, Dims::new(b, t, h, d, d), DType::BF16, 44, false, None);
    let mut x = upload(gla, gate, &case);
    let d_o = gla
        .upload(&case.host(&case.v, &case.dims.v_shape(), DType::BF16))
        .unwrap();
    let spec = KernelSpec::default_for(gate, DType::BF16, d, d).unwrap();
    let mut rows = Vec::new();
    // Each form the backward has for this problem, side by side in one run.
    // (`--pass-tiles all`: a per-key gate's passes with each of their tiles, `"form": "passes:<tiles>"`)
    let runs = forms.iter().flat_map(|&(form, frozen, passes)| {
        let tiles: Vec<Option<gla_codegen::Tiles>> = if passes == Some(true)
            && pass_tiles_all
            && gate.shape() == gla_core::GateShape::PerKey
        {
            gla_codegen::per_key_pass_tiles(DType::BF16, d)
                .into_iter()
                .map(Some)
                .collect()
        } else {
            vec![None]
        };
        tiles.into_iter().map(move |t| (form, frozen, passes, t))
    });
    for (form, frozen, passes, tiles) in runs {
        let Ok(bspec) = gla_codegen::BackwardSpec::for_problem(gate, DType::BF16, d, d)
            .and_then(|s| s.with_form(form))
        else {
            continue;
        };
        // (the row's "form" and the suffix of its printed id)
        let (fname, suffix) = match (frozen, passes, tiles.map(|t| t.id())) {
            (true, _, _) => ("frozen".to_string(), " frozen".to_string()),
            (_, Some(true), Some(t)) => (format!("passes:{t}"), format!(" dq/dk passes {t}")),
            (_, Some(true), None) => ("passes".to_string(), " dq/dk passes".to_string()),
            (_, Some(false), _) => ("dqdk-walks".to_string(), " dq/dk walks".to_string()),
            (_, None, _) => (format!("{form:?}").to_lowercase(), String::new()),
        };
        let bwd_id = bspec.id() + &suffix;
        let opts = BackwardOptions {
            form: Some(form),
            skip_gate_gradients: frozen,
            dq_dk_passes: passes,
            dq_dk_pass_tiles: tiles,
            ..BackwardOptions::default()
        };
        for pass in ["fwd_bwd", "bwd"] {
            let st = bench(gla.gpu(), 2, reps, Some(&mut *flush), || {
                if pass == "fwd_bwd" {
                    run(gla, gate, &mut x, spec)?;
                }
                gla.backward(
                    gate,
                    &x.q,
                    &x.k,
                    &x.v,
                    x.logits.as_ref(),
                    x.params.as_ref(),
                    &d_o,
                    &opts,
                )
                .map(|_| ())
            });
            match st {
                Ok(st) => {
                    let ms = st.median_ms as f64;
                    println!(
                        "{b:>2},{t:>5},{h:>2},{d:>3} {strength:<10} {pass:<8} {} + {bwd_id} {ms:8.3} ms",
                        spec.id()
                    );
                    rows.push(json!({
                        "impl": "ours", "pass": pass, "gate": gname, "strength": strength, "form": fname,
                        "B": b, "T": t, "H": h, "D": d, "shape": [b, t, h, d], "ms": ms, "reps": reps,
                        "variant": format!("{} + {bwd_id}", spec.id()), "distribution": "q, k, v, dO, x ~ N(0, 1), bf16"
                    }));
                }
                Err(e) => println!("{b},{t},{h},{d} {gname} {pass} {fname}: failed: {e}"),
            }
        }
    }
    rows
}

/// `--decode`: [`Gla::decode`] steps of `gate` (bf16; q, k, v, x ~ N(0, 1), a state ~ N(0, 0.25)) at N sequences × H
/// heads × d, each with the L2 flushed before it: rows `{"pass": "decode", "N", "H", "D", "ms", "floor_ms", "gbps"}`, the
/// floor being the bytes a step must move (the f32 state read and written, the token's inputs and output) at the
/// measured copy bandwidth. The decode's cost does not depend on the gate's values (one exponential a row).
fn decode_rows(
    gla: &Gla,
    flush: &mut L2Flush,
    reps: usize,
    copy_gbps: f64,
    gname: &str,
    gate: &'static dyn Gate,
) -> Vec<serde_json::Value> {
    let mut rows = Vec::new();
    for (n, h, d) in [
        (8usize, 16usize, 128usize),
        (64, 16, 128),
        (256, 16, 128),
        (64, 32, 64),
        (64, 8, 256),
    ] {
        let case = Case::random(gate, Dims::new(n, 1, h, d, d), DType::BF16, 47, true, None);
        let up =
            |x: &[f32], shape: &[usize]| gla.upload(&case.host(x, shape, DType::BF16)).unwrap();
        let (q, k, v) = (
            up(&case.q, &[n, h, d]),
            up(&case.k, &[n, h, d]),
            up(&case.v, &[n, h, d]),
        );
        let logits = match gate.shape() {
            GateShape::Fixed => None,
            GateShape::PerHead => Some(up(&case.logits, &[n, h])),
            _ => Some(up(&case.logits, &[n, h, d])),
        };
        let np = gate.params().len();
        let params =
            (np > 0).then(|| DeviceTensor::from_f32(gla.gpu(), &[h, np], &case.params).unwrap());
        let mut state = DeviceTensor::from_f32(
            gla.gpu(),
            &[n, h, d, d],
            case.initial_state.as_ref().unwrap(),
        )
        .unwrap();
        let opts = gla_runtime::DecodeOptions::default();
        let st = bench(gla.gpu(), 3, reps, Some(&mut *flush), || {
            gla.decode(
                gate,
                &q,
                &k,
                &v,
                logits.as_ref(),
                params.as_ref(),
                &mut state,
                &opts,
            )
            .map(|_| ())
        });
        let lw = gate.shape().logits_per_token(d, d); // (q, k, v, o and the logits, 2 bytes each)
        let bytes = (2 * n * h * d * d * 4 + (4 * n * h * d + n * h * lw) * 2) as f64;
        let floor_ms = bytes / (copy_gbps * 1e9) * 1e3;
        match st {
            Ok(st) => {
                let ms = st.median_ms as f64;
                println!(
                    "decode {gname:<7} N{n:>4} H{h:>3} D{d:>4} {ms:8.4} ms  {:6.0} GB/s  {:5.2}x floor",
                    bytes / ms / 1e6,
                    ms / floor_ms
                );
                rows.push(json!({
                    "impl": "ours", "pass": "decode", "gate": gname, "strength": gname, "N": n, "H": h, "D": d,
                    "ms": ms, "floor_ms": floor_ms, "gbps": bytes / ms / 1e6, "copy_gbps": copy_gbps, "reps": reps,
                    "distribution": "q, k, v, x ~ N(0, 1) bf16, state ~ N(0, 0.25) f32"
                }));
            }
            Err(e) => println!("decode {gname} N{n} H{h} D{d}: failed: {e}"),
        }
    }
    rows
}

/// `--cold-start` (run it as the process's first GPU work): the time from `Gla::new()` to the first forward's output
/// at 8×4096×16×128 with the GLA gate, bf16, the variant from the tuning caches (issue 27's target: ≤ 50 ms with the
/// shipped cache, no NVRTC call). Inputs are uploaded before the clock for the forward starts; the row says whether
/// the variant came from a cache (`tuning_stats`).
fn cold_start(out: &str) {
    use std::time::Instant;
    // Gla::new() step by step (as it does it: the device, then the default tuning caches), so the figure says
    // where the time goes.
    let t0 = Instant::now();
    // The driver's own start (cuInit, inside device_count) first, so the figure says how much of the device step is
    // the driver's and how much the context's.
    let init_ms = match gla_runtime::device::device_count() {
        Ok(_) => t0.elapsed().as_secs_f64() * 1e3,
        Err(e) => {
            eprintln!("bench needs a GPU: {e}");
            std::process::exit(2);
        }
    };
    let gpu = match gla_runtime::Gpu::new(0) {
        Ok(g) => g,
        Err(e) => {
            eprintln!("bench needs a GPU: {e}");
            std::process::exit(2);
        }
    };
    let device_ms = t0.elapsed().as_secs_f64() * 1e3;
    let gla = Gla::with_gpu(
        gpu,
        gla_runtime::CompileOptions {
            driver_cache: true,
            ..Default::default()
        },
    );
    let new_ms = t0.elapsed().as_secs_f64() * 1e3;
    let caches_ms = new_ms - device_ms;
    let gate: &'static dyn Gate = &gla::gates::Gla;
    let (b, t, h, d) = (8, 4096, 16, 128);
    let case = Case::random(gate, Dims::new(b, t, h, d, d), DType::BF16, 45, false, None);
    let x = upload(&gla, gate, &case);
    gla.synchronize().unwrap();
    let t1 = Instant::now();
    let r = gla.forward(
        gate,
        &x.q,
        &x.k,
        &x.v,
        x.logits.as_ref(),
        None,
        &ForwardOptions::default(),
    );
    let ok = r.is_ok() && gla.synchronize().is_ok();
    let fwd_ms = t1.elapsed().as_secs_f64() * 1e3;
    let st = gla.tuning_stats();
    println!(
        "cold start: Gla::new {new_ms:.1} ms (device {device_ms:.1}, of which cuInit {init_ms:.1}, + caches {caches_ms:.1}), first forward {fwd_ms:.1} ms (total {:.1} ms, upload excluded); cache hits {}, misses {}, stale {}{}",
        new_ms + fwd_ms,
        st.hits,
        st.misses.len(),
        st.stale.len(),
        if ok { "" } else { " — the forward FAILED" }
    );
    let row = json!([{
        "impl": "ours", "pass": "cold_start", "gate": "gla", "B": b, "T": t, "H": h, "D": d, "shape": [b, t, h, d],
        "new_ms": new_ms, "device_ms": device_ms, "cuinit_ms": init_ms, "caches_ms": caches_ms, "first_forward_ms": fwd_ms, "ms": new_ms + fwd_ms, "ok": ok,
        "cache_hits": st.hits, "cache_misses": st.misses.len(), "cache_stale": st.stale
    }]);
    std::fs::write(out, serde_json::to_string_pretty(&row).unwrap()).unwrap();
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let opt = |name: &str, d: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
            .unwrap_or_else(|| d.to_string())
    };
    let out = opt("--out", "ours.json");
    let reps: usize = opt("--reps", "50").parse().expect("--reps N");
    let quick = opt("--shapes", "all") == "quick";
    // --variants all | default | <text>: every bf16 variant, the default one, or those whose id contains <text>
    let which_v = opt("--variants", "all");
    let strengths = match tests::strengths::select(&opt("--strengths", "all")) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("--strengths: {e}");
            std::process::exit(2);
        }
    };
    if args.iter().any(|a| a == "--cold-start") {
        cold_start(&out);
        return;
    }
    let lineinfo = args.iter().any(|a| a == "--lineinfo");
    let opened = if lineinfo {
        Gla::with_options(
            0,
            gla_runtime::CompileOptions {
                lineinfo,
                driver_cache: true,
                ..Default::default()
            },
        )
    } else {
        Gla::new()
    };
    let gla = match opened {
        Ok(g) => g,
        Err(e) => {
            eprintln!("bench needs a GPU: {e}");
            std::process::exit(2);
        }
    };
    if let Some(dir) = args
        .iter()
        .position(|a| a == "--fla-dump")
        .and_then(|i| args.get(i + 1))
    {
        same_inputs(&gla, dir, &out);
        return;
    }
    let gpu = gla.gpu();
    let bw = copy_bandwidth(gpu, 1 << 30, 20).expect("copy bandwidth");
    let copy_gbps = bw.tb_per_s * 1000.0;
    println!(
        "device-to-device copy: {:.0} GB/s (read + write)",
        copy_gbps
    );
    let mut flush = L2Flush::new(gpu).expect("L2 flush buffer");
    let which = opt("--gates", "gla,mamba2");
    // (any registered gate by name, in the order given; an unknown name is an error that lists the known ones)
    let _ = &gla::gates::Gla; // (links the built-in gates' registrations)
    let _ = &tests::gates::ValueGla; // (and the tests' per-value gate, `value_gla`)
    let registered = gla_core::registered_gates();
    let mut gates: Vec<(&str, &'static dyn Gate)> = Vec::new();
    for w in which.split(',').filter(|w| !w.is_empty()) {
        match registered.iter().find(|g| g.name() == w) {
            Some(&g) => gates.push((g.name(), g)),
            None => {
                let known: Vec<&str> = registered.iter().map(|g| g.name()).collect();
                eprintln!(
                    "--gates: no registered gate `{w}` (known: {})",
                    known.join(", ")
                );
                std::process::exit(2);
            }
        }
    }
    let mut shapes = vec![
        (8, 4096, 16, 128),
        (8, 4096, 32, 64),
        (8, 4096, 8, 256),
        (2, 16384, 16, 128),
        (32, 1024, 16, 128),
        (8, 4096, 4, 512),
    ];
    // The strength axis runs at the benchmark shapes (not the T sweep of the plot).
    let strength_shapes = shapes.clone();
    shapes.extend([(8, 1024, 16, 128), (8, 2048, 16, 128), (8, 8192, 16, 128)]); // for the time-vs-T plot
    let shape_arg = opt("--shapes", "all");
    if quick {
        shapes.truncate(1);
    } else if shape_arg != "all" {
        shapes = shape_arg
            .split(';')
            .map(|s| {
                let v: Vec<usize> = s
                    .split(',')
                    .map(|x| x.trim().parse().expect("--shapes B,T,H,D;..."))
                    .collect();
                assert!(v.len() == 4, "--shapes takes B,T,H,D;...");
                (v[0], v[1], v[2], v[3])
            })
            .collect();
    }
    let mut records = Vec::new();
    let strength_shapes: Vec<_> = if shape_arg == "all" {
        strength_shapes
    } else {
        shapes.clone()
    };
    for &(b, t, h, d) in &shapes {
        for &(gname, gate) in gates.iter().filter(|_| which_v != "none") {
            let dims = Dims::new(b, t, h, d, d);
            let case = Case::random(gate, dims, DType::BF16, 42, false, None);
            let mut x = upload(&gla, gate, &case);
            let specs: Vec<KernelSpec> = if which_v != "default" {
                all_variants(gate)
                    .into_iter()
                    .filter(|s| {
                        s.dtype == DType::BF16 && s.key_dim() as usize == d && s.dv as usize == d
                    })
                    .filter(|s| which_v == "all" || s.id().contains(&which_v))
                    .collect()
            } else {
                vec![KernelSpec::default_for(gate, DType::BF16, d, d).unwrap()]
            };
            let (bytes, flops) = traffic(gate, b, t, h, d);
            let floor_ms = bytes / (copy_gbps * 1e9) * 1e3;
            // Compile in parallel first (not timed), then screen every variant with a few runs and time the three
            // fastest properly.
            use rayon::prelude::*;
            specs.par_iter().for_each(|s| {
                if let Err(e) = gla.compile_spec(s) {
                    println!("{:<60} failed to compile: {e}", s.id());
                }
            });
            let mut screened: Vec<(f64, KernelSpec)> = Vec::new();
            for spec in specs {
                match run(&gla, gate, &mut x, spec).and_then(|_| {
                    bench(gpu, 1, 5, Some(&mut flush), || {
                        run(&gla, gate, &mut x, spec)
                    })
                }) {
                    Ok(st) => screened.push((st.median_ms as f64, spec)),
                    Err(e) => println!("{:<60} failed: {e}", spec.id()),
                }
            }
            screened.sort_by(|a, b| a.0.total_cmp(&b.0));
            let mut best: Option<(f64, KernelSpec)> = None;
            for (i, &(screen_ms, spec)) in screened.iter().enumerate() {
                let ms = if i < 3 {
                    match bench(gpu, 3, reps, Some(&mut flush), || {
                        run(&gla, gate, &mut x, spec)
                    }) {
                        Ok(st) => st.median_ms as f64,
                        Err(e) => {
                            println!("{:<60} failed: {e}", spec.id());
                            continue;
                        }
                    }
                } else {
                    screen_ms
                };
                println!(
                    "{:>2},{:>5},{:>2},{:>3} {:<7} {:<56} {:8.3} ms  {:6.0} GB/s  {:5.1} TFLOP/s  {:5.2}x floor{}",
                    b, t, h, d, gname, spec.id(), ms, bytes / ms / 1e6, flops / ms / 1e9, ms / floor_ms,
                    if i < 3 { "" } else { "  (screening: median of 5)" }
                );
                records.push(json!({
                    "impl": "ours", "strength": if gname == "gla" { "gla/16" } else { gname }, "axis": "variant",
                    "B": b, "T": t, "H": h, "D": d,
                    "shape": [b, t, h, d], "gate": gname, "variant": spec.id(), "ms": ms,
                    "reps": if i < 3 { reps } else { 5 },
                    "gbps": bytes / ms / 1e6, "tflops": flops / ms / 1e9, "floor_ms": floor_ms, "copy_gbps": copy_gbps,
                    "rel_rms_vs_f64": null, "pass": "fwd", "best": false
                }));
                if i < 3 && best.is_none_or(|(m, _)| ms < m) {
                    best = Some((ms, spec));
                }
            }
            drop(x);
            let Some((ms, spec)) = best else { continue };
            // Accuracy of the winning variant vs f64, at a size the CPU reference handles in seconds.
            let small = Case::random(
                gate,
                Dims::new(2, 1024, 4, d, d),
                DType::BF16,
                43,
                false,
                None,
            );
            let want = small.reference(gate, None).0;
            let mut xs = upload(&gla, gate, &small);
            run(&gla, gate, &mut xs, spec).expect("accuracy run");
            let got: Vec<f64> = xs.o.to_f32().unwrap().into_iter().map(f64::from).collect();
            let err = rel_rms(&got, &want);
            println!(
                "  best {} {:.3} ms ({:.2}x floor), rel RMS vs f64 {:.2e} at B2 T1024 H4",
                spec.id(),
                ms,
                ms / floor_ms,
                err
            );
            if let Some(r) = records
                .iter_mut()
                .rev()
                .find(|r| r["variant"] == spec.id() && r["shape"] == json!([b, t, h, d]))
            {
                r["rel_rms_vs_f64"] = json!(err);
                r["best"] = json!(true);
            }
            std::fs::write(&out, serde_json::to_string_pretty(&records).unwrap()).unwrap();
        }
    }
    for &shape in &strength_shapes {
        records.extend(strength_rows(
            &gla, &mut flush, reps, copy_gbps, shape, &strengths,
        ));
        std::fs::write(&out, serde_json::to_string_pretty(&records).unwrap()).unwrap();
    }
    if args.iter().any(|a| a == "--decode") {
        for &(gname, gate) in &gates {
            records.extend(decode_rows(&gla, &mut flush, reps, copy_gbps, gname, gate));
            std::fs::write(&out, serde_json::to_string_pretty(&records).unwrap()).unwrap();
        }
    }
    if args.iter().any(|a| a == "--backward") {
        // (form, frozen, dq / dk passes: None as `Gla::backward` decides, else forced)
        let forms: Vec<(BackwardForm, bool, Option<bool>)> = opt("--forms", "chunks,walks")
            .split(',')
            .map(|f| match f {
                "chunks" => (BackwardForm::Chunks, false, None),
                "walks" => (BackwardForm::Walks, false, None),
                "frozen" => (BackwardForm::Walks, true, None),
                "passes" => (BackwardForm::Walks, false, Some(true)),
                "dqdk-walks" => (BackwardForm::Walks, false, Some(false)),
                other => {
                    eprintln!("--forms: `{other}` is not a backward form (chunks, walks: the walk form with dq / dk as the runtime chooses, frozen: walks without the gate's gradients, passes: dq / dk as passes wherever they exist, dqdk-walks: dq / dk from the walks)");
                    std::process::exit(2)
                }
            })
            .collect();
        let pass_tiles_all = opt("--pass-tiles", "default") == "all";
        let specialised = |d: usize| gla_codegen::specialised_dim(d).unwrap_or(0) as usize;
        // Every kernel the rows below run, compiled on all cores first (each row's first call then finds it
        // loaded): one NVRTC compile after another was most of a run's device time.
        {
            use rayon::prelude::*;
            let mut jobs: Vec<(&'static dyn Gate, usize)> = Vec::new();
            for &(_, _, _, d) in &strength_shapes {
                for g in gates
                    .iter()
                    .map(|g| g.1)
                    .chain(strengths.iter().map(|st| st.gate))
                {
                    if !jobs.iter().any(|&(h, e)| h.name() == g.name() && e == d) {
                        jobs.push((g, d));
                    }
                }
            }
            let t0 = std::time::Instant::now();
            let mut fwd: Vec<KernelSpec> = jobs
                .iter()
                .filter_map(|&(g, d)| KernelSpec::default_for(g, DType::BF16, d, d).ok())
                .collect();
            // (and, with --pass-tiles all, every per-key dq / dk pass the rows run)
            if pass_tiles_all && forms.iter().any(|f| f.2 == Some(true)) {
                for &(g, d) in &jobs {
                    fwd.extend(gla_codegen::dq_dk_pass_variants(g).into_iter().filter(|s| {
                        s.dtype == DType::BF16 && s.key_dim() as usize == specialised(d)
                    }));
                }
            }
            fwd.par_iter().for_each(|s| {
                if let Err(e) = gla.compile_spec(s) {
                    println!("{}: failed to compile: {e}", s.id());
                }
            });
            let bwd: Vec<gla_codegen::BackwardSpec> = jobs
                .iter()
                .flat_map(|&(g, d)| {
                    forms.iter().filter_map(move |&(f, _, _)| {
                        gla_codegen::BackwardSpec::for_problem(g, DType::BF16, d, d)
                            .and_then(|s| s.with_form(f))
                            .ok()
                    })
                })
                .collect();
            bwd.par_iter().for_each(|s| {
                if let Err(e) = gla.compile_backward(s) {
                    println!("{}: failed to compile: {e}", s.id());
                }
            });
            println!(
                "compiled {} forward variants and {} backward kernel sets in {:.1} s",
                fwd.len(),
                bwd.len(),
                t0.elapsed().as_secs_f64()
            );
        }
        for &shape in &strength_shapes {
            for &(gname, gate) in &gates {
                let strength = if gname == "gla" { "gla/16" } else { gname };
                records.extend(backward_rows(
                    &gla,
                    &mut flush,
                    reps,
                    shape,
                    gname,
                    strength,
                    gate,
                    &forms,
                    pass_tiles_all,
                ));
                std::fs::write(&out, serde_json::to_string_pretty(&records).unwrap()).unwrap();
            }
            // The per-key gate at every strength of --strengths (both passes' cost depends on the decays: a chunk
            // whose decay span is small takes the factorised intra-chunk path, the others the exact one).
            for st in strengths
                .iter()
                .filter(|st| !(st.label == "gla/16" && gates.iter().any(|g| g.0 == "gla")))
            {
                records.extend(backward_rows(
                    &gla,
                    &mut flush,
                    reps,
                    shape,
                    st.gate.name(),
                    st.label,
                    st.gate,
                    &forms,
                    pass_tiles_all,
                ));
                std::fs::write(&out, serde_json::to_string_pretty(&records).unwrap()).unwrap();
            }
        }
    }
    std::fs::write(&out, serde_json::to_string_pretty(&records).unwrap()).unwrap();
    println!("wrote {} records to {out}", records.len());
}
