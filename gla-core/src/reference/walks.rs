//! The backward as three forward walks that keep no chunk state (the plan of `benches/NOTES.md` for the state-free
//! backward kernels), in f64, for key gates (per key, per head, fixed, none). Each gradient is the output of a
//! forward recurrence ([`super::recurrent::forward`]) on other operands, so the kernels can be the forward's fused
//! walk with other inputs:
//!
//! ```text
//!   dq  = forward(q ← dO, k ← v, v ← k; value gate log α (on d_k); scale; S_0 = h0ᵀ)           (final state S_Tᵀ)
//!   dk  = rev(forward(q ← rev v, k ← rev dO, v ← rev scale·q; value gate rev shift log α; scale 1; S_0 = dhtᵀ))
//!   dv  = rev(forward(q ← rev k, k ← rev scale·q, v ← rev dO; key gate rev shift log α; scale 1; S_0 = dht))
//!   dh0 = diag(α_0) · (the dv walk's final state)
//! ```
//!
//! `rev` reverses each sequence's tokens; `shift` gives token t the decay of token t + 1 (0 for a sequence's last
//! token: the walk from t + 1 to t decays by α_{t+1}). The gate's gradient needs no state either: with chunks of
//! `C` tokens, the pairs (i ≥ t > j) that cross token t are
//!
//! ```text
//!   d log α_t = Z_{c+1} + Σ_{s ∈ c, s ≥ t} (q_s ⊙ dq_s − k_s ⊙ dk_s)        (t in chunk c)
//!   Z_N = rowsum(dht ⊙ S_T),   Z_c = Z_{c+1} + X_c − Y_c,
//!   X_c = Σ_{i ∈ c} q_i ⊙ dq_i⁽ⁱⁿᵗᵉʳ⁾,   Y_c = Σ_{j ∈ c} k_j ⊙ dk_j⁽ⁱⁿᵗᵉʳ⁾
//! ```
//!
//! (`Z_c`: the pairs crossing chunk c's first token, h0 counting as a token before the sequence and dht as one after
//! it; `dq⁽ⁱⁿᵗᵉʳ⁾` the part of dq from tokens before the chunk and h0, `dk⁽ⁱⁿᵗᵉʳ⁾` the part of dk from tokens after
//! it and dht). Here the in-chunk parts are summed pair by pair and the inter parts are the rest; a kernel has both
//! from its chunk step.
use super::{recurrent, Grads, KeyGate, Problem};
use crate::error::Result;
use crate::{Dims, GlaError};

/// Gradients of `p` (as [`super::recurrent_backward`]) by the three walks and the chunk recurrence of the gate's
/// term, with chunks of `chunk` tokens. Errors: a value gate (its walks are not derived here), `chunk == 0`, and
/// every input error of [`super::recurrent_backward`].
pub fn backward(
    p: &Problem,
    chunk: usize,
    d_o: &[f64],
    d_final_state: Option<&[f64]>,
) -> Result<Grads> {
    if p.value_gate.is_some() {
        return Err(GlaError::Unsupported {
            variant: "walks_backward".into(),
            msg: "the state-free backward's walks are derived for key gates only (this problem has a value gate)".into(),
        });
    }
    if chunk == 0 {
        return Err(GlaError::invalid("chunk", "must be at least 1"));
    }
    // The ground truth validates every input (and tells a wrong d_o length apart), before anything is indexed.
    super::recurrent_backward(p, d_o, d_final_state)?;
    let Dims { b, t, h, dk, dv } = p.dims;
    let seqs = p.dims.sequences(p.cu_seqlens)?;
    let n = seqs.len();
    let scale = p.scale.unwrap_or(1.0 / (dk as f64).sqrt());
    let tokens = b * t;
    // log α per (token, head, key column), whatever the gate's shape.
    let mut la = vec![0.0; tokens * h * dk];
    for (g, row) in la.chunks_mut(h * dk).enumerate() {
        for hh in 0..h {
            for d in 0..dk {
                row[hh * dk + d] = match p.key_gate {
                    KeyGate::None => 0.0,
                    KeyGate::PerKey(x) => x[(g * h + hh) * dk + d],
                    KeyGate::PerHead(x) => x[g * h + hh],
                    KeyGate::Fixed(x) => x[hh],
                };
            }
        }
    }
    let transpose = |s: &[f64], r: usize, c: usize| -> Vec<f64> {
        let mut out = vec![0.0; s.len()];
        for (blk, o) in s.chunks(r * c).zip(out.chunks_mut(r * c)) {
            for i in 0..r {
                for j in 0..c {
                    o[j * r + i] = blk[i * c + j];
                }
            }
        }
        out
    };
    // Each sequence's tokens reversed (rows of `w` elements); `shift`: token t takes row t + 1's values, 0 for the last.
    let rev = |x: &[f64], w: usize, shift: bool| -> Vec<f64> {
        let mut out = vec![0.0; x.len()];
        for &(s0, len) in &seqs {
            for tau in 0..len {
                let t = len - 1 - tau;
                if shift && t + 1 == len {
                    continue;
                }
                let src = s0 + if shift { t + 1 } else { t };
                out[(s0 + tau) * w..(s0 + tau + 1) * w].copy_from_slice(&x[src * w..(src + 1) * w]);
            }
        }
        out
    };
    let scaled_q: Vec<f64> = p.q.iter().map(|x| scale * x).collect();
    let zero_state = vec![0.0; n * h * dk * dv];
    let dht = d_final_state.unwrap_or(&zero_state);

    // dq: the forward walk over (dO, v, k) with the decay on its value columns (d_k), from h0ᵀ.
    let h0t = p.initial_state.map(|s| transpose(s, dk, dv));
    let fq = recurrent::forward(
        &Problem {
            dims: Dims::new(b, t, h, dv, dk),
            q: d_o,
            k: p.v,
            v: p.k,
            key_gate: KeyGate::None,
            value_gate: Some(&la),
            scale: Some(scale),
            initial_state: h0t.as_deref(),
            cu_seqlens: p.cu_seqlens,
        },
        true,
    )?;
    let dq = fq.o;
    let s_final = transpose(&fq.final_state.expect("requested"), dv, dk); // S_T, [N,H,d_k,d_v]

    // dk: the reverse walk over (v, dO, scale·q), decays shifted by a token, from dhtᵀ.
    let la_rs = rev(&la, h * dk, true);
    let dht_t = transpose(dht, dk, dv);
    let (rv, rdo, rq) = (
        rev(p.v, h * dv, false),
        rev(d_o, h * dv, false),
        rev(&scaled_q, h * dk, false),
    );
    let fk = recurrent::forward(
        &Problem {
            dims: Dims::new(b, t, h, dv, dk),
            q: &rv,
            k: &rdo,
            v: &rq,
            key_gate: KeyGate::None,
            value_gate: Some(&la_rs),
            scale: Some(1.0),
            initial_state: Some(&dht_t),
            cu_seqlens: p.cu_seqlens,
        },
        false,
    )?;
    let dkk = rev(&fk.o, h * dk, false);

    // dv: the reverse walk over (k, scale·q, dO) with the key decays shifted by a token, from dht; dh0 from its end.
    let rk = rev(p.k, h * dk, false);
    let fv = recurrent::forward(
        &Problem {
            dims: Dims::new(b, t, h, dk, dv),
            q: &rk,
            k: &rq,
            v: &rdo,
            key_gate: KeyGate::PerKey(&la_rs),
            value_gate: None,
            scale: Some(1.0),
            initial_state: Some(dht),
            cu_seqlens: p.cu_seqlens,
        },
        true,
    )?;
    let dvv = rev(&fv.o, h * dv, false);
    let d_initial_state = p.initial_state.map(|_| {
        let mut d0 = fv.final_state.clone().expect("requested");
        for (ni, &(s0, len)) in seqs.iter().enumerate() {
            for hh in 0..h {
                for d in 0..dk {
                    // α_0 of the sequence (an empty sequence passes dht through)
                    let a0 = if len > 0 {
                        la[(s0 * h + hh) * dk + d].exp()
                    } else {
                        1.0
                    };
                    for e in 0..dv {
                        d0[((ni * h + hh) * dk + d) * dv + e] *= a0;
                    }
                }
            }
        }
        d0
    });

    // The gate: the chunk recurrence of Z from the end, the in-chunk suffix sums of q ⊙ dq − k ⊙ dk.
    let at = |x: &[f64], g: usize, hh: usize, w: usize, c: usize| x[(g * h + hh) * w + c];
    let mut dla = vec![0.0; tokens * h * dk];
    for (ni, &(s0, len)) in seqs.iter().enumerate() {
        for hh in 0..h {
            let st = ((ni * h + hh) * dk) * dv;
            let mut z: Vec<f64> = (0..dk)
                .map(|d| {
                    (0..dv)
                        .map(|e| dht[st + d * dv + e] * s_final[st + d * dv + e])
                        .sum()
                })
                .collect();
            let n_chunks = len.div_ceil(chunk);
            for c in (0..n_chunks).rev() {
                let (c0, c1) = (c * chunk, (c * chunk + chunk).min(len));
                let dot = |i: usize, j: usize| -> f64 {
                    (0..dv)
                        .map(|e| at(d_o, s0 + i, hh, dv, e) * at(p.v, s0 + j, hh, dv, e))
                        .sum::<f64>()
                        * scale
                };
                // e^{Γ_i − Γ_j} = Π_{m=j+1..i} α_m (j ≤ i, one chunk), column d
                let decay = |i: usize, j: usize, d: usize| -> f64 {
                    ((j + 1)..=i)
                        .map(|m| at(&la, s0 + m, hh, dk, d))
                        .sum::<f64>()
                        .exp()
                };
                let mut x = vec![0.0; dk];
                let mut y = vec![0.0; dk];
                for i in c0..c1 {
                    for d in 0..dk {
                        let intra_q: f64 = (c0..=i)
                            .map(|j| dot(i, j) * at(p.k, s0 + j, hh, dk, d) * decay(i, j, d))
                            .sum();
                        let intra_k: f64 = (i..c1)
                            .map(|m| dot(m, i) * at(p.q, s0 + m, hh, dk, d) * decay(m, i, d))
                            .sum();
                        x[d] += at(p.q, s0 + i, hh, dk, d) * (at(&dq, s0 + i, hh, dk, d) - intra_q);
                        y[d] +=
                            at(p.k, s0 + i, hh, dk, d) * (at(&dkk, s0 + i, hh, dk, d) - intra_k);
                    }
                }
                let mut suffix = vec![0.0; dk];
                for i in (c0..c1).rev() {
                    for d in 0..dk {
                        suffix[d] += at(p.q, s0 + i, hh, dk, d) * at(&dq, s0 + i, hh, dk, d)
                            - at(p.k, s0 + i, hh, dk, d) * at(&dkk, s0 + i, hh, dk, d);
                        dla[((s0 + i) * h + hh) * dk + d] = z[d] + suffix[d];
                    }
                }
                for d in 0..dk {
                    z[d] += x[d] - y[d];
                }
            }
        }
    }
    let d_key_gate = match p.key_gate {
        KeyGate::None => None,
        KeyGate::PerKey(_) => Some(dla),
        KeyGate::PerHead(_) => Some(dla.chunks(dk).map(|r| r.iter().sum()).collect()),
        KeyGate::Fixed(_) => {
            let mut out = vec![0.0; h];
            for (i, r) in dla.chunks(dk).enumerate() {
                out[i % h] += r.iter().sum::<f64>();
            }
            Some(out)
        }
    };
    Ok(Grads {
        dq,
        dk: dkk,
        dv: dvv,
        d_key_gate,
        d_value_gate: None,
        d_initial_state,
    })
}
