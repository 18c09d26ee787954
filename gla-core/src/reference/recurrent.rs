//! The recurrent form in f64: forward (the ground truth) and backward (reverse-time recurrence of `dS`).

use super::check::{check, expect_finite, expect_len, RowGate, SeqHead};
use super::{Forward, Grads, KeyGate, Problem};
use crate::error::Result;
use rayon::prelude::*;

impl SeqHead<f64> {
    /// The decays of token `t`: `alpha[d] = α_td` (`d_k` values) and `beta[e] = β_te` (`d_v` values).
    fn decays(&self, t: usize, alpha: &mut [f64], beta: &mut [f64]) {
        match &self.key {
            RowGate::None => alpha.fill(1.0),
            RowGate::PerKey(g) => {
                for (a, &lg) in alpha.iter_mut().zip(&g[t * self.dk..(t + 1) * self.dk]) {
                    *a = lg.exp();
                }
            }
            RowGate::Scalar(g) => alpha.fill(g[t].exp()),
        }
        match &self.value {
            None => beta.fill(1.0),
            Some(g) => {
                for (b, &lg) in beta.iter_mut().zip(&g[t * self.dv..(t + 1) * self.dv]) {
                    *b = lg.exp();
                }
            }
        }
    }

    /// One step of the recurrence on `s` (`[d_k, d_v]`): `S ← diag(α_t) S diag(β_t) + k_tᵀ v_t`.
    fn step(&self, t: usize, s: &mut [f64], alpha: &mut [f64], beta: &mut [f64]) {
        let (dk, dv) = (self.dk, self.dv);
        self.decays(t, alpha, beta);
        let k = &self.k[t * dk..(t + 1) * dk];
        let v = &self.v[t * dv..(t + 1) * dv];
        for d in 0..dk {
            let row = &mut s[d * dv..(d + 1) * dv];
            for e in 0..dv {
                row[e] = alpha[d] * row[e] * beta[e] + k[d] * v[e];
            }
        }
    }
}

/// Forward of one (sequence, head): `(o [len, d_v], final state [d_k, d_v])`.
fn forward_one(x: &SeqHead<f64>, scale: f64) -> (Vec<f64>, Vec<f64>) {
    let (dk, dv) = (x.dk, x.dv);
    let mut s = x.h0.clone();
    let mut o = vec![0.0; x.len * dv];
    let (mut alpha, mut beta) = (vec![0.0; dk], vec![0.0; dv]);
    for t in 0..x.len {
        x.step(t, &mut s, &mut alpha, &mut beta);
        // o_t = scale · q_t S_t
        let q = &x.q[t * dk..(t + 1) * dk];
        let ot = &mut o[t * dv..(t + 1) * dv];
        for d in 0..dk {
            for (oe, &se) in ot.iter_mut().zip(&s[d * dv..(d + 1) * dv]) {
                *oe += q[d] * se;
            }
        }
        for oe in ot.iter_mut() {
            *oe *= scale;
        }
    }
    (o, s)
}

pub(super) fn forward(p: &Problem, output_final_state: bool) -> Result<Forward> {
    let c = check(p)?;
    let dims = p.dims;
    let tasks = c.tasks();
    let results: Vec<(Vec<f64>, Vec<f64>)> = tasks
        .par_iter()
        .map(|task| forward_one(&c.gather(task, |x| x), c.scale))
        .collect();

    let mut o = vec![0.0; dims.b * dims.t * dims.h * dims.dv];
    let mut final_state =
        output_final_state.then(|| vec![0.0; c.nseq() * dims.h * dims.dk * dims.dv]);
    for (task, (ot, st)) in tasks.iter().zip(&results) {
        c.scatter(&mut o, task, dims.dv, ot);
        if let Some(fs) = final_state.as_mut() {
            let off = c.state_offset(task);
            fs[off..off + st.len()].copy_from_slice(st);
        }
    }
    Ok(Forward { o, final_state })
}

/// Gradients of one (sequence, head).
struct TaskGrads {
    dq: Vec<f64>,
    dk: Vec<f64>,
    dv: Vec<f64>,
    /// d log α per key channel, `[len, d_k]` (reduced to the gate's shape by the caller).
    d_alpha: Vec<f64>,
    /// d log β, `[len, d_v]`.
    d_beta: Vec<f64>,
    /// d S_0, `[d_k, d_v]`.
    d_h0: Vec<f64>,
}

/// Backward of one (sequence, head), with `d_o` (`[len, d_v]`) and `d_final` (`[d_k, d_v]`).
///
/// States are checkpointed every `⌈√len⌉` tokens in a forward sweep, then every segment is recomputed forward
/// (its states kept) and walked backwards with `G = ∂ℒ/∂S_t` (see the module docs for the equations).
fn backward_one(x: &SeqHead<f64>, scale: f64, d_o: &[f64], d_final: Vec<f64>) -> TaskGrads {
    let (len, dk, dv) = (x.len, x.dk, x.dv);
    let mut g = TaskGrads {
        dq: vec![0.0; len * dk],
        dk: vec![0.0; len * dk],
        dv: vec![0.0; len * dv],
        d_alpha: vec![0.0; len * dk],
        d_beta: vec![0.0; len * dv],
        d_h0: Vec::new(),
    };
    let (mut alpha, mut beta) = (vec![0.0; dk], vec![0.0; dv]);

    // Checkpoints: ckpt[m] = S after m·seg tokens (S_0 = the initial state), for m·seg < len.
    let seg = ((len as f64).sqrt().ceil() as usize).max(1);
    let mut ckpt = Vec::with_capacity(len.div_ceil(seg));
    let mut s = x.h0.clone();
    for t in 0..len {
        if t % seg == 0 {
            ckpt.push(s.clone());
        }
        x.step(t, &mut s, &mut alpha, &mut beta);
    }

    // G = ∂ℒ/∂S_t, starting from the final state's gradient.
    let mut gs = d_final;
    let mut m_prev = vec![0.0; dk * dv];
    for (m, start) in ckpt.iter().enumerate().rev() {
        let a = m * seg;
        let b = (a + seg).min(len);
        // states[i] = S after a + i tokens, i = 0..=b−a.
        let mut states = Vec::with_capacity(b - a + 1);
        states.push(start.clone());
        for t in a..b {
            let mut next = states[t - a].clone();
            x.step(t, &mut next, &mut alpha, &mut beta);
            states.push(next);
        }
        for t in (a..b).rev() {
            let s_prev = &states[t - a];
            let s_cur = &states[t - a + 1];
            let q = &x.q[t * dk..(t + 1) * dk];
            let k = &x.k[t * dk..(t + 1) * dk];
            let v = &x.v[t * dv..(t + 1) * dv];
            let dot = &d_o[t * dv..(t + 1) * dv];
            // G_t = scale · q_tᵀ do_t + (decayed G_{t+1}, already in gs).
            for d in 0..dk {
                for e in 0..dv {
                    gs[d * dv + e] += scale * q[d] * dot[e];
                }
            }
            // dq_t = scale · S_t do_tᵀ;  dk_t = G_t v_tᵀ;  dv_t = k_t G_t.
            for d in 0..dk {
                let (mut acc_q, mut acc_k) = (0.0, 0.0);
                for e in 0..dv {
                    acc_q += s_cur[d * dv + e] * dot[e];
                    acc_k += gs[d * dv + e] * v[e];
                    g.dv[t * dv + e] += gs[d * dv + e] * k[d];
                }
                g.dq[t * dk + d] = scale * acc_q;
                g.dk[t * dk + d] = acc_k;
            }
            // M = diag(α_t) S_{t−1} diag(β_t);  dlog α_t = rowsum(G ⊙ M), dlog β_t = colsum(G ⊙ M).
            x.decays(t, &mut alpha, &mut beta);
            for d in 0..dk {
                for e in 0..dv {
                    m_prev[d * dv + e] = alpha[d] * s_prev[d * dv + e] * beta[e];
                }
            }
            for d in 0..dk {
                for e in 0..dv {
                    let gm = gs[d * dv + e] * m_prev[d * dv + e];
                    g.d_alpha[t * dk + d] += gm;
                    g.d_beta[t * dv + e] += gm;
                }
            }
            // Propagate to S_{t−1}: G ← diag(α_t) G diag(β_t).
            for d in 0..dk {
                for e in 0..dv {
                    gs[d * dv + e] *= alpha[d] * beta[e];
                }
            }
        }
    }
    g.d_h0 = gs;
    g
}

pub(super) fn backward(p: &Problem, d_o: &[f64], d_final_state: Option<&[f64]>) -> Result<Grads> {
    let c = check(p)?;
    let dims = p.dims;
    let (b, t, h, dk, dv) = (dims.b, dims.t, dims.h, dims.dk, dims.dv);
    expect_len("d_o", d_o, "[B,T,H,d_v]", &[b, t, h, dv])?;
    expect_finite("d_o", d_o)?;
    if let Some(df) = d_final_state {
        expect_len("d_final_state", df, "[N,H,d_k,d_v]", &[c.nseq(), h, dk, dv])?;
        expect_finite("d_final_state", df)?;
    }

    let tasks = c.tasks();
    let results: Vec<TaskGrads> = tasks
        .par_iter()
        .map(|task| {
            let x = c.gather(task, |x| x);
            // dO rows of this task, gathered like v.
            let mut dot = Vec::with_capacity(task.len * dv);
            for r in task.start..task.start + task.len {
                let off = (r * h + task.h) * dv;
                dot.extend_from_slice(&d_o[off..off + dv]);
            }
            let d_final = match d_final_state {
                Some(df) => {
                    let off = c.state_offset(task);
                    df[off..off + dk * dv].to_vec()
                }
                None => vec![0.0; dk * dv],
            };
            backward_one(&x, c.scale, &dot, d_final)
        })
        .collect();

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
    for (task, tg) in tasks.iter().zip(&results) {
        c.scatter(&mut out.dq, task, dk, &tg.dq);
        c.scatter(&mut out.dk, task, dk, &tg.dk);
        c.scatter(&mut out.dv, task, dv, &tg.dv);
        // d log α per key channel → the key gate's shape.
        match (p.key_gate, out.d_key_gate.as_mut()) {
            (KeyGate::PerKey(_), Some(dg)) => c.scatter(dg, task, dk, &tg.d_alpha),
            (KeyGate::PerHead(_), Some(dg)) => {
                let rows: Vec<f64> = tg
                    .d_alpha
                    .chunks_exact(dk)
                    .map(|r| r.iter().sum())
                    .collect();
                c.scatter(dg, task, 1, &rows);
            }
            (KeyGate::Fixed(_), Some(dg)) => dg[task.h] += tg.d_alpha.iter().sum::<f64>(),
            _ => {}
        }
        if let Some(dg) = out.d_value_gate.as_mut() {
            c.scatter(dg, task, dv, &tg.d_beta);
        }
        if let Some(dh) = out.d_initial_state.as_mut() {
            let off = c.state_offset(task);
            dh[off..off + dk * dv].copy_from_slice(&tg.d_h0);
        }
    }
    Ok(out)
}
