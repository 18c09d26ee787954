//! The chunkwise backward in f32: the decomposition the backward kernels are to perform (issue 28), checked against
//! the f64 recurrence's gradients ([`recurrent_backward`](super::recurrent_backward)).
//!
//! Per (sequence, head), with chunk-local Γ (the forward's cumulative log-decays) and `scale` folded into dO:
//!
//! ```text
//!   states (forward):     S_[0] = h0,  S_[n+1] = diag(e^{Γ_L}) S_[n] + K̂ᵀ V,   K̂ = K ⊙ e^{Γ_L − Γ}
//!   state grads (reverse): dS_[N] = dS_final,
//!                          dS_[n] = diag(e^{Γ_L}) dS_[n+1] + Q̃ᵀ dO,            Q̃ = Q ⊙ e^{Γ}   (dh0 = dS_[0])
//!   per chunk n (independent once S_[n], dS_[n+1] are known):
//!     dA_ij = dO_i · v_j  (j ≤ i)
//!     dq_i  = (dO_i S_[n]ᵀ) ⊙ e^{Γ_i}            + Σ_{j≤i} dA_ij (k_j ⊙ e^{Γ_i − Γ_j})
//!     dk_j  = (v_j dS_[n+1]ᵀ) ⊙ e^{Γ_L − Γ_j}     + Σ_{i≥j} dA_ij (q_i ⊙ e^{Γ_i − Γ_j})
//!     dv_j  = K̂_j dS_[n+1]                        + Σ_{i≥j} A_ij dO_i
//!   gate (the paper's closed form, appendix): with Γ the *global* cumulative sum, ∂ℒ/∂Γ_t = q_t ⊙ dq_t − k_t ⊙ dk_t
//!     and d log α_t = Σ_{s ≥ t} ∂ℒ/∂Γ_s; the part after chunk n is the decay of the state it hands on,
//!     rowsum(dS_[n+1] ⊙ S_[n+1]), so each chunk finishes its own:
//!     d log α_t = rowsum(dS_[n+1] ⊙ S_[n+1]) + Σ_{s=t..L} (q_s ⊙ dq_s − k_s ⊙ dk_s)
//!     (summed over d_k for a per-head gate, and over every token too for a fixed one). Where the decay is strong the
//!     true value is tiny and the sum of O(1) terms leaves an f32 residue of their size (fla's backward alike): the
//!     error of this gradient is bounded relative to its terms, not to itself.
//! ```
//!
//! The intra-chunk sums with per-key decays take the forward's recursive secondary chunking (module docs of
//! [`reference`](super)): the diagonal has exponent 0, and a pair at level h goes through its block's upper-half
//! first row m — `e^{Γ_i − Γ_j} = e^{Γ_i − Γ_m} · e^{Γ_m − Γ_j}`, both ≤ 0 — so that
//! `dq_i += e^{Γ_i − Γ_m} ⊙ Σ_{j in the lower half} dA_ij (k_j ⊙ e^{Γ_m − Γ_j})` and alike for dk: products of a
//! block of dA with scaled rows, as the kernels' tensor cores would take them. Every exponent is ≤ 0 (recorded in
//! [`ExpStats`]). A value gate (log β, cumulative B) decays the value side the same way: dO_i ⊙ e^{B_i} meets S and
//! the state path, V̂_j = v_j ⊙ e^{B_L − B_j} the state update, and dA_ij = Σ_e dO_ie v_je e^{B_ie − B_je} and
//! dv_j's intra sum take the pair levels on the value side; d log β_t = colsum(dS_[n+1] ⊙ S_[n+1]) +
//! Σ_{s=t..L} (o_s ⊙ dO_s − v_s ⊙ dv_s).

use super::check::{check, expect_finite, expect_len, RowGate, SeqHead, Task};
use super::chunkwise::{axpy, check_config, check_f32, dot, Chunk};
use super::levels::{pair_scores, pair_sum, Decay};
use super::{ChunkConfig, ExpStats, Fault, Grads, KeyGate, Problem};
use crate::error::Result;
use rayon::prelude::*;

/// The gradients of one (sequence, head), f32.
struct TaskGrads {
    dq: Vec<f32>,
    dk: Vec<f32>,
    dv: Vec<f32>,
    /// d log α per key channel, `[len, d_k]` (scalar gates: every channel holds its row's share; summed later).
    d_alpha: Vec<f32>,
    /// d log β, `[len, d_v]` (value gates).
    d_beta: Vec<f32>,
    d_h0: Vec<f32>,
    stats: ExpStats,
}

/// The chunkwise backward of one (sequence, head).
fn backward_one(
    x: &SeqHead<f32>,
    cfg: ChunkConfig,
    scale: f32,
    d_o: &[f32],
    d_final: Vec<f32>,
) -> TaskGrads {
    let (len, dk, dv) = (x.len, x.dk, x.dv);
    let cfg = ChunkConfig {
        factorise_span: None,
        ..cfg
    };
    let starts: Vec<usize> = (0..len).step_by(cfg.chunk).collect();
    let mut st = ExpStats::default();
    // Forward: every chunk-start state (the backward kernels' "materialize": saved by the forward, or recomputed).
    let mut states = Vec::with_capacity(starts.len() + 1);
    states.push(x.h0.clone());
    for &i0 in &starts {
        let mut s = states.last().cloned().unwrap_or_default();
        Chunk::prepare(x, i0, cfg, Fault::None).update_state(&mut s, &mut st);
        states.push(s);
    }
    let mut g = TaskGrads {
        dq: vec![0.0; len * dk],
        dk: vec![0.0; len * dk],
        dv: vec![0.0; len * dv],
        d_alpha: vec![0.0; len * dk],
        d_beta: vec![0.0; len * dv],
        d_h0: Vec::new(),
        stats: ExpStats::default(),
    };
    let valued = x.value.is_some();
    // Reverse over the chunks: dS_[n+1] → chunk n's gradients → dS_[n].
    let mut ds = d_final;
    let mut ds_after = vec![Vec::new(); starts.len()]; // dS_[n+1], for the gates
    let mut outputs = vec![Vec::new(); starts.len()]; // the chunk's (scaled) output, for the value gate
    for (n, &i0) in starts.iter().enumerate().rev() {
        ds_after[n] = ds.clone();
        let c = Chunk::prepare(x, i0, cfg, Fault::None);
        let (l, s) = (c.l, &states[n]);
        let last = l - 1;
        let zeros = vec![0.0f32; l * dv];
        let key = Decay {
            vals: &c.gamma,
            width: if c.per_key { dk } else { 1 },
        };
        let val = Decay {
            vals: c.beta.as_deref().unwrap_or(&zeros),
            width: dv,
        };
        // dO ⊙ scale, and dO_i ⊙ e^{B_i} (value gate) for the inter-chunk and state paths.
        let dor: Vec<Vec<f32>> = (0..l)
            .map(|i| {
                d_o[(i0 + i) * dv..(i0 + i + 1) * dv]
                    .iter()
                    .map(|&y| y * scale)
                    .collect()
            })
            .collect();
        let dob: Vec<Vec<f32>> = if valued {
            (0..l)
                .map(|i| (0..dv).map(|e| dor[i][e] * st.exp(c.b(i, e))).collect())
                .collect()
        } else {
            dor.clone()
        };
        // Inter: dq_i = (dÔ_i Sᵀ) ⊙ e^{Γ_i}.
        for i in 0..l {
            for d in 0..dk {
                g.dq[(i0 + i) * dk + d] +=
                    dot(&dob[i], &s[d * dv..(d + 1) * dv]) * st.exp(c.g(i, d));
            }
        }
        // State path, dS = dS_[n+1], V̂_j = v_j ⊙ e^{B_L − B_j}, K̂_j = k_j ⊙ e^{Γ_L − Γ_j}:
        //   dk_j = (V̂_j dSᵀ) ⊙ e^{Γ_L − Γ_j},  dv_j = (K̂_j dS) ⊙ e^{B_L − B_j}.
        for j in 0..l {
            let vb: Vec<f32> = if valued {
                (0..dv).map(|e| st.exp(c.b(last, e) - c.b(j, e))).collect()
            } else {
                vec![1.0; dv]
            };
            let vhat: Vec<f32> = c.v(j).iter().zip(&vb).map(|(v, f)| v * f).collect();
            let mut kds = vec![0.0f32; dv];
            for d in 0..dk {
                let f = st.exp(c.g(last, d) - c.g(j, d));
                g.dk[(i0 + j) * dk + d] += dot(&vhat, &ds[d * dv..(d + 1) * dv]) * f;
                axpy(&mut kds, c.k(j)[d] * f, &ds[d * dv..(d + 1) * dv]);
            }
            for e in 0..dv {
                g.dv[(i0 + j) * dv + e] += kds[e] * vb[e];
            }
        }
        // Intra: A (key side), dA_ij = Σ_e dO_ie v_je e^{B_ie − B_je} (value side), both by the pair levels;
        //   dv_j += Σ_{i≥j} A_ij (dO_i ⊙ e^{B_i − B_j}),  dq_i += Σ_j dA_ij (k_j ⊙ e^{Γ_i − Γ_j}),
        //   dk_j += Σ_i dA_ij (q_i ⊙ e^{Γ_i − Γ_j}).
        let qs: Vec<Vec<f32>> = (0..l).map(|i| c.q(i).to_vec()).collect();
        let ks: Vec<Vec<f32>> = (0..l).map(|j| c.k(j).to_vec()).collect();
        let vs: Vec<Vec<f32>> = (0..l).map(|j| c.v(j).to_vec()).collect();
        let a = pair_scores(&qs, &ks, &key, |m, _| m, &mut st);
        let da = pair_scores(&dor, &vs, &val, |m, _| m, &mut st);
        for (j, row) in pair_sum(&a, &dor, &val, false, &mut st)
            .into_iter()
            .enumerate()
        {
            axpy(&mut g.dv[(i0 + j) * dv..(i0 + j + 1) * dv], 1.0, &row);
        }
        for (i, row) in pair_sum(&da, &ks, &key, true, &mut st)
            .into_iter()
            .enumerate()
        {
            axpy(&mut g.dq[(i0 + i) * dk..(i0 + i + 1) * dk], 1.0, &row);
        }
        for (j, row) in pair_sum(&da, &qs, &key, false, &mut st)
            .into_iter()
            .enumerate()
        {
            axpy(&mut g.dk[(i0 + j) * dk..(i0 + j + 1) * dk], 1.0, &row);
        }
        if valued {
            outputs[n] = c.output(s, scale, &mut st);
        }
        // dS_[n] = diag(e^{Γ_L}) dS_[n+1] diag(e^{B_L}) + Q̃ᵀ dÔ.
        for d in 0..dk {
            let f = st.exp(c.g(last, d));
            for e in 0..dv {
                ds[d * dv + e] *= f * if valued { st.exp(c.b(last, e)) } else { 1.0 };
            }
            for i in 0..l {
                let qd = c.q(i)[d] * st.exp(c.g(i, d));
                axpy(&mut ds[d * dv..(d + 1) * dv], qd, &dob[i]);
            }
        }
    }
    g.d_h0 = ds;
    // Gates, per chunk (no pass over the whole sequence): the decays after the chunk's last token L act on the state
    // S_[n+1] it hands on, so Σ_{s>L} ∂ℒ/∂Γ_s = rowsum(dS_[n+1] ⊙ S_[n+1]) (for the last chunk: dS_final ⊙
    // S_final), and inside the chunk d log α_t = that + Σ_{s=t..L} (q_s ⊙ dq_s − k_s ⊙ dk_s). The value side alike:
    // d log β_t = colsum(dS_[n+1] ⊙ S_[n+1]) + Σ_{s=t..L} (o_s ⊙ dO_s − v_s ⊙ dv_s).
    for (n, &i0) in starts.iter().enumerate() {
        let l = (len - i0).min(cfg.chunk);
        let (s_next, ds_next) = (&states[n + 1], &ds_after[n]);
        if !matches!(x.key, RowGate::None) {
            let mut acc: Vec<f32> = (0..dk)
                .map(|d| {
                    dot(
                        &ds_next[d * dv..(d + 1) * dv],
                        &s_next[d * dv..(d + 1) * dv],
                    )
                })
                .collect();
            for t in (i0..i0 + l).rev() {
                for d in 0..dk {
                    acc[d] +=
                        x.q[t * dk + d] * g.dq[t * dk + d] - x.k[t * dk + d] * g.dk[t * dk + d];
                    g.d_alpha[t * dk + d] = acc[d];
                }
            }
        }
        if valued {
            let mut acc: Vec<f32> = (0..dv)
                .map(|e| {
                    (0..dk)
                        .map(|d| ds_next[d * dv + e] * s_next[d * dv + e])
                        .sum()
                })
                .collect();
            for t in (i0..i0 + l).rev() {
                let o = &outputs[n][(t - i0) * dv..(t - i0 + 1) * dv];
                for e in 0..dv {
                    acc[e] += o[e] * d_o[t * dv + e] - x.v[t * dv + e] * g.dv[t * dv + e];
                    g.d_beta[t * dv + e] = acc[e];
                }
            }
        }
    }
    g.stats = st;
    g
}

pub(super) fn backward(
    p: &Problem,
    cfg: ChunkConfig,
    d_o: &[f64],
    d_final_state: Option<&[f64]>,
) -> Result<(Grads, ExpStats)> {
    check_config(cfg)?;
    let c = check(p)?;
    check_f32(&c)?;
    let dims = p.dims;
    let (b, t, h, dk, dv) = (dims.b, dims.t, dims.h, dims.dk, dims.dv);
    expect_len("d_o", d_o, "[B,T,H,d_v]", &[b, t, h, dv])?;
    expect_finite("d_o", d_o)?;
    if let Some(df) = d_final_state {
        expect_len("d_final_state", df, "[N,H,d_k,d_v]", &[c.nseq(), h, dk, dv])?;
        expect_finite("d_final_state", df)?;
    }
    let scale = c.scale as f32;
    let tasks: Vec<Task> = c.tasks();
    let results: Vec<TaskGrads> = tasks
        .par_iter()
        .map(|task| {
            let x = c.gather(task, |v| v as f32);
            let mut dot_rows = Vec::with_capacity(task.len * dv);
            for r in task.start..task.start + task.len {
                let off = (r * h + task.h) * dv;
                dot_rows.extend(d_o[off..off + dv].iter().map(|&y| y as f32));
            }
            let d_final = match d_final_state {
                Some(df) => {
                    let off = c.state_offset(task);
                    df[off..off + dk * dv].iter().map(|&y| y as f32).collect()
                }
                None => vec![0.0; dk * dv],
            };
            backward_one(&x, cfg, scale, &dot_rows, d_final)
        })
        .collect();
    let wide = |v: &[f32]| v.iter().map(|&y| f64::from(y)).collect::<Vec<f64>>();
    let mut out = Grads {
        dq: vec![0.0; b * t * h * dk],
        dk: vec![0.0; b * t * h * dk],
        dv: vec![0.0; b * t * h * dv],
        d_key_gate: match p.key_gate {
            KeyGate::None => None,
            KeyGate::PerKey(_) => Some(vec![0.0; b * t * h * dk]),
            KeyGate::PerHead(_) => Some(vec![0.0; b * t * h]),
            KeyGate::Fixed(_) => Some(vec![0.0; h]),
        },
        d_value_gate: p.value_gate.map(|_| vec![0.0; b * t * h * dv]),
        d_initial_state: p.initial_state.map(|_| vec![0.0; c.nseq() * h * dk * dv]),
    };
    let mut stats = ExpStats::default();
    for (task, tg) in tasks.iter().zip(&results) {
        c.scatter(&mut out.dq, task, dk, &wide(&tg.dq));
        c.scatter(&mut out.dk, task, dk, &wide(&tg.dk));
        c.scatter(&mut out.dv, task, dv, &wide(&tg.dv));
        match (p.key_gate, out.d_key_gate.as_mut()) {
            (KeyGate::PerKey(_), Some(dg)) => c.scatter(dg, task, dk, &wide(&tg.d_alpha)),
            (KeyGate::PerHead(_), Some(dg)) => {
                let rows: Vec<f64> = tg
                    .d_alpha
                    .chunks_exact(dk)
                    .map(|r| r.iter().map(|&y| f64::from(y)).sum())
                    .collect();
                c.scatter(dg, task, 1, &rows);
            }
            (KeyGate::Fixed(_), Some(dg)) => {
                dg[task.h] += tg.d_alpha.iter().map(|&y| f64::from(y)).sum::<f64>()
            }
            _ => {}
        }
        if let Some(dg) = out.d_value_gate.as_mut() {
            c.scatter(dg, task, dv, &wide(&tg.d_beta));
        }
        if let Some(dh) = out.d_initial_state.as_mut() {
            let off = c.state_offset(task);
            dh[off..off + dk * dv].copy_from_slice(&wide(&tg.d_h0));
        }
        stats = stats.merge(tg.stats);
    }
    Ok((out, stats))
}
