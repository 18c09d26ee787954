//! Training steps on the GPU with a gate declared here: forward, loss, backward, update —
//! `cargo run --release -p gla --example train_step`. The "model" is just the gate's logits x and the values v of one
//! GLA layer, fitted by gradient descent to the output of the same layer with other logits and values; the loss
//! ½‖o − o*‖² should fall. Needs an NVIDIA Hopper GPU (sm_90) and NVRTC 13; without them it prints what is missing and
//! exits 0. (The backward kernels it runs are checked against the f64 reference gradients by `tests/tests/gpu_backward.rs`.)
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
    let d = Dims::new(1, 256, 2, 64, 64); // B, T, H, d_k, d_v
    let dt = DType::F32;
    let (nq, nv) = (
        d.q_shape().iter().product::<usize>(),
        d.v_shape().iter().product::<usize>(),
    );
    let up = |x: &[f32], shape: [usize; 4]| gla.upload(&HostTensor::from_f32(dt, &shape, x)?);
    let (q, k) = (
        up(&randn(nq, 1), d.q_shape())?,
        up(&randn(nq, 2), d.q_shape())?,
    );
    // The target: the layer's output with other logits and values.
    let target = {
        let (x, v) = (
            up(&randn(nq, 3), d.q_shape())?,
            up(&randn(nv, 4), d.v_shape())?,
        );
        let out = gla.forward(
            &MyGla,
            &q,
            &k,
            &v,
            Some(&x),
            None,
            &ForwardOptions::default(),
        )?;
        out.o.download()?.to_f64()
    };
    // The parameters, on the host: logits x and values v, from another start.
    let (mut x, mut v) = (randn(nq, 5), randn(nv, 6));
    let lr = 0.005f32; // (below 2 / the curvature along v: Σ_i A_ij² ~ T / 2 for this weak gate)
    for step in 0..8 {
        // Forward.
        let (xd, vd) = (up(&x, d.q_shape())?, up(&v, d.v_shape())?);
        let o = gla
            .forward(
                &MyGla,
                &q,
                &k,
                &vd,
                Some(&xd),
                None,
                &ForwardOptions::default(),
            )?
            .o
            .download()?
            .to_f64();
        // Loss ½‖o − o*‖² and its gradient dO = o − o*.
        let d_o: Vec<f32> = o.iter().zip(&target).map(|(a, b)| (a - b) as f32).collect();
        let loss: f64 = d_o.iter().map(|e| 0.5 * (*e as f64).powi(2)).sum();
        println!("step {step}: loss {loss:.4}");
        // Backward: the gradients of every input; this model learns x and v.
        let g = gla.backward(
            &MyGla,
            &q,
            &k,
            &vd,
            Some(&xd),
            None,
            &up(&d_o, d.v_shape())?,
            &BackwardOptions::default(),
        )?;
        let dx = g
            .d_logits
            .expect("a per-key gate has logits")
            .download()?
            .to_f64();
        let dv = g.dv.download()?.to_f64();
        // Update (plain gradient descent).
        x.iter_mut()
            .zip(&dx)
            .for_each(|(p, g)| *p -= lr * *g as f32);
        v.iter_mut()
            .zip(&dv)
            .for_each(|(p, g)| *p -= lr * *g as f32);
    }
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
