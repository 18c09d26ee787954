//! A forward pass of a gate declared here, on the GPU, checked against the f64 CPU reference:
//! `cargo run --release -p gla --example forward`. Needs an NVIDIA Hopper GPU (sm_90) and NVRTC 13; without them it
//! prints what is missing and exits 0.
use gla::core::gate_ref::{gate_forward, GateProblem};
use gla::prelude::*;

/// The GLA paper's gate (§4.4): α = σ(x)^(1/16), one per key channel. The fn returns log α.
#[gated_linear_attention(gate = per_key)]
fn my_gla(x: f32) -> f32 {
    log_sigmoid(x) / 16.0
}

fn main() -> Result<(), GlaError> {
    let gla = match Gla::new() {
        Ok(gla) => gla,
        Err(e) => {
            println!("skipped: this example needs an NVIDIA Hopper GPU (sm_90) and NVRTC 13 — {e}");
            return Ok(());
        }
    };
    let d = Dims::new(2, 1024, 4, 128, 128); // B, T, H, d_k, d_v
    let host = |seed, shape: [usize; 4]| {
        HostTensor::from_f32(DType::BF16, &shape, &randn(shape.iter().product(), seed))
    };
    // q, k [B,T,H,d_k], v [B,T,H,d_v] and the gate's raw logits x [B,T,H,d_k] (per key), all ~ N(0,1), in bf16
    let (q, k, v, x) = (
        host(1, d.q_shape())?,
        host(2, d.q_shape())?,
        host(3, d.v_shape())?,
        host(4, d.q_shape())?,
    );
    let (qd, kd, vd, xd) = (
        gla.upload(&q)?,
        gla.upload(&k)?,
        gla.upload(&v)?,
        gla.upload(&x)?,
    );
    let t0 = std::time::Instant::now(); // the first call of a variant compiles it (NVRTC, a few seconds)
    let out = gla.forward(
        &MyGla,
        &qd,
        &kd,
        &vd,
        Some(&xd),
        None,
        &ForwardOptions::default(),
    )?;
    let o = out.o.download()?.to_f64(); // o: [B,T,H,d_v], bf16
    println!(
        "{}: o[..4] = {:.4?} ({:.1} s, compile included)",
        gla.gpu().info().name,
        &o[..4],
        t0.elapsed().as_secs_f64()
    );

    // The f64 recurrence (gla-core's CPU reference) on the same bf16-rounded inputs.
    let (q, k, v, x) = (q.to_f64(), k.to_f64(), v.to_f64(), x.to_f64());
    let p = GateProblem {
        dims: d,
        q: &q,
        k: &k,
        v: &v,
        gate: &MyGla,
        logits: &x,
        params: &[],
        scale: None,
        initial_state: None,
        cu_seqlens: None,
    };
    let want = gate_forward(&p, false)?.o;
    println!("reference: o[..4] = {:.4?}", &want[..4]);
    let err: f64 = o.iter().zip(&want).map(|(a, b)| (a - b) * (a - b)).sum();
    let norm: f64 = want.iter().map(|b| b * b).sum();
    println!(
        "relative RMS error vs f64: {:.2e} (bf16: about 2e-3 expected)",
        (err / norm).sqrt()
    );
    Ok(())
}

/// `n` samples of N(0,1) (xorshift64 + Box–Muller; any generator will do).
fn randn(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut uniform = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        ((s >> 11) as f64 + 0.5) / (1u64 << 53) as f64 // in (0, 1)
    };
    (0..n)
        .map(|_| {
            ((-2.0 * uniform().ln()).sqrt() * (std::f64::consts::TAU * uniform()).cos()) as f32
        })
        .collect()
}
