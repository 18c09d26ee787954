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
//! [`ExpStats`]). Value gates are not covered yet (an `Unsupported` error; the recurrent backward has them).

use super::check::{check, expect_finite, expect_len, RowGate, SeqHead, Task};
use super::chunkwise::{axpy, check_config, check_f32, dot, Chunk};
use super::{ChunkConfig, ExpStats, Fault, Grads, KeyGate, Problem};
use crate::error::Result;
use crate::GlaError;
use rayon::prelude::*;

/// The gradients of one (sequence, head), f32.
struct TaskGrads {
    dq: Vec<f32>,
    dk: Vec<f32>,
    dv: Vec<f32>,
    /// d log α per key channel, `[len, d_k]` (scalar gates: every channel holds its row's share; summed later).
    d_alpha: Vec<f32>,
    d_h0: Vec<f32>,
    stats: ExpStats,
}

/// The chunk's pair level decomposition of `Σ_{j≤i} w_ij (x_j ⊙ e^{Γ_i − Γ_j})` (`rows_out[i]`, to = the query
/// side) or of `Σ_{i≥j} w_ij (x_i ⊙ e^{Γ_i − Γ_j})` (`rows_out[j]`, to = the key side), per key column: the
/// diagonal with exponent 0, then each level's pairs through their reference row.
fn decayed_pair_sum(c: &Chunk, w: &[f32], x: &[Vec<f32>], to_query: bool, st: &mut ExpStats) -> Vec<Vec<f32>> {
    let (l, dk) = (c.l, c.x.dk);
    let mut out = vec![vec![0.0f32; dk]; l];
    for i in 0..l {
        axpy(&mut out[i], w[i * l + i], &x[i]);
    }
    if !c.per_key {
        // Scalar gate: one decay per pair.
        for i in 0..l {
            for j in 0..i {
                let f = w[i * l + j] * st.exp(c.gamma[i] - c.gamma[j]);
                if to_query {
                    axpy(&mut out[i], f, &x[j]);
                } else {
                    axpy(&mut out[j], f, &x[i]);
                }
            }
        }
        return out;
    }
    let g = |t: usize| &c.gamma[t * dk..(t + 1) * dk];
    let levels = (usize::BITS - (l.max(1) - 1).leading_zeros()) as usize;
    for p in 0..levels {
        let h = 1usize << p;
        for block in (0..l).step_by(2 * h) {
            let m = block + h;
            if m >= l {
                continue;
            }
            let (lower, upper) = (block..m, m..(m + h).min(l));
            let gm = g(m);
            if to_query {
                // dq_i (i upper) += e^{Γ_i − Γ_m} ⊙ Σ_j w_ij (x_j ⊙ e^{Γ_m − Γ_j})   (j lower)
                let xs: Vec<Vec<f32>> = lower.clone().map(|j| (0..dk).map(|d| x[j][d] * st.exp(gm[d] - g(j)[d])).collect()).collect();
                for i in upper {
                    let mut acc = vec![0.0f32; dk];
                    for (jj, j) in lower.clone().enumerate() {
                        axpy(&mut acc, w[i * l + j], &xs[jj]);
                    }
                    for d in 0..dk {
                        out[i][d] += acc[d] * st.exp(g(i)[d] - gm[d]);
                    }
                }
            } else {
                // dk_j (j lower) += e^{Γ_m − Γ_j} ⊙ Σ_i w_ij (x_i ⊙ e^{Γ_i − Γ_m})   (i upper)
                let xs: Vec<Vec<f32>> = upper.clone().map(|i| (0..dk).map(|d| x[i][d] * st.exp(g(i)[d] - gm[d])).collect()).collect();
                for j in lower.clone() {
                    let mut acc = vec![0.0f32; dk];
                    for (ii, i) in upper.clone().enumerate() {
                        axpy(&mut acc, w[i * l + j], &xs[ii]);
                    }
                    for d in 0..dk {
                        out[j][d] += acc[d] * st.exp(gm[d] - g(j)[d]);
                    }
                }
            }
        }
    }
    out
}

/// The chunkwise backward of one (sequence, head).
fn backward_one(x: &SeqHead<f32>, cfg: ChunkConfig, scale: f32, d_o: &[f32], d_final: Vec<f32>) -> TaskGrads {
    let (len, dk, dv) = (x.len, x.dk, x.dv);
    let cfg = ChunkConfig { factorise_span: None, ..cfg };
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
        d_h0: Vec::new(),
        stats: ExpStats::default(),
    };
    // Reverse over the chunks: dS_[n+1] → chunk n's gradients → dS_[n].
    let mut ds = d_final;
    let mut ds_after = vec![Vec::new(); starts.len()]; // dS_[n+1], for the gate
    for (n, &i0) in starts.iter().enumerate().rev() {
        ds_after[n] = ds.clone();
        let c = Chunk::prepare(x, i0, cfg, Fault::None);
        let (l, s) = (c.l, &states[n]);
        let last = l - 1;
        let e = |st: &mut ExpStats, i: usize, d: usize| st.exp(c.g(i, d)); // e^{Γ_id} (scalar gates ignore d)
        let dor: Vec<Vec<f32>> = (0..l).map(|i| d_o[(i0 + i) * dv..(i0 + i + 1) * dv].iter().map(|&y| y * scale).collect()).collect();
        // Inter: dq_i = (dO_i Sᵀ) ⊙ e^{Γ_i}.
        for i in 0..l {
            for d in 0..dk {
                g.dq[(i0 + i) * dk + d] += dot(&dor[i], &s[d * dv..(d + 1) * dv]) * e(&mut st, i, d);
            }
        }
        // State path: dk_j = (v_j dSᵀ) ⊙ e^{Γ_L − Γ_j}, dv_j = K̂_j dS, with dS = dS_[n+1].
        for j in 0..l {
            for d in 0..dk {
                let f = st.exp(c.g(last, d) - c.g(j, d));
                g.dk[(i0 + j) * dk + d] += dot(c.v(j), &ds[d * dv..(d + 1) * dv]) * f;
                axpy(&mut g.dv[(i0 + j) * dv..(i0 + j + 1) * dv], c.k(j)[d] * f, &ds[d * dv..(d + 1) * dv]);
            }
        }
        // Intra: dA_ij = dO_i · v_j;  dv_j += Σ_i A_ij dO_i;  dq, dk through the pair levels.
        let a = c.scores(&mut st);
        let mut da = vec![0.0f32; l * l];
        for i in 0..l {
            for j in 0..=i {
                da[i * l + j] = dot(&dor[i], c.v(j));
                axpy(&mut g.dv[(i0 + j) * dv..(i0 + j + 1) * dv], a[i * l + j], &dor[i]);
            }
        }
        let ks: Vec<Vec<f32>> = (0..l).map(|j| c.k(j).to_vec()).collect();
        let qs: Vec<Vec<f32>> = (0..l).map(|i| c.q(i).to_vec()).collect();
        for (i, row) in decayed_pair_sum(&c, &da, &ks, true, &mut st).into_iter().enumerate() {
            axpy(&mut g.dq[(i0 + i) * dk..(i0 + i + 1) * dk], 1.0, &row);
        }
        for (j, row) in decayed_pair_sum(&c, &da, &qs, false, &mut st).into_iter().enumerate() {
            axpy(&mut g.dk[(i0 + j) * dk..(i0 + j + 1) * dk], 1.0, &row);
        }
        // dS_[n] = diag(e^{Γ_L}) dS_[n+1] + Q̃ᵀ dO.
        for d in 0..dk {
            let f = e(&mut st, last, d);
            ds[d * dv..(d + 1) * dv].iter_mut().for_each(|y| *y *= f);
            for i in 0..l {
                let qd = c.q(i)[d] * e(&mut st, i, d);
                axpy(&mut ds[d * dv..(d + 1) * dv], qd, &dor[i]);
            }
        }
    }
    g.d_h0 = ds;
    // Gate, per chunk (no pass over the whole sequence): the decays after the chunk's last token L act on the state
    // S_[n+1] it hands on, so Σ_{s>L} ∂ℒ/∂Γ_s = rowsum(dS_[n+1] ⊙ S_[n+1]) (for the last chunk: dS_final ⊙
    // S_final), and inside the chunk d log α_t = that + Σ_{s=t..L} (q_s ⊙ dq_s − k_s ⊙ dk_s).
    if !matches!(x.key, RowGate::None) {
        for (n, &i0) in starts.iter().enumerate() {
            let l = (len - i0).min(cfg.chunk);
            let (s_next, ds_next) = (&states[n + 1], &ds_after[n]);
            let mut acc: Vec<f32> = (0..dk).map(|d| dot(&ds_next[d * dv..(d + 1) * dv], &s_next[d * dv..(d + 1) * dv])).collect();
            for t in (i0..i0 + l).rev() {
                for d in 0..dk {
                    acc[d] += x.q[t * dk + d] * g.dq[t * dk + d] - x.k[t * dk + d] * g.dk[t * dk + d];
                    g.d_alpha[t * dk + d] = acc[d];
                }
            }
        }
    }
    g.stats = st;
    g
}

pub(super) fn backward(p: &Problem, cfg: ChunkConfig, d_o: &[f64], d_final_state: Option<&[f64]>) -> Result<(Grads, ExpStats)> {
    check_config(cfg)?;
    let c = check(p)?;
    check_f32(&c)?;
    if p.value_gate.is_some() {
        return Err(GlaError::Unsupported {
            variant: "chunkwise backward".into(),
            msg: "value gates are not in the chunkwise backward yet; recurrent_backward has their gradients".into(),
        });
    }
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
        d_value_gate: None,
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
                let rows: Vec<f64> = tg.d_alpha.chunks_exact(dk).map(|r| r.iter().map(|&y| f64::from(y)).sum()).collect();
                c.scatter(dg, task, 1, &rows);
            }
            (KeyGate::Fixed(_), Some(dg)) => dg[task.h] += tg.d_alpha.iter().map(|&y| f64::from(y)).sum::<f64>(),
            _ => {}
        }
        if let Some(dh) = out.d_initial_state.as_mut() {
            let off = c.state_offset(task);
            dh[off..off + dk * dv].copy_from_slice(&wide(&tg.d_h0));
        }
        stats = stats.merge(tg.stats);
    }
    Ok((out, stats))
}
