//! The recursive secondary chunking (§4.3 applied down to single rows) shared by the f32 chunkwise forward and
//! backward: within a chunk, pair (i, j < i) belongs to the level whose blocks of 2h rows hold i in the upper half
//! and j in the lower one, and its decay `e^{D_i − D_j}` factors through the upper half's first row m into
//! `e^{D_i − D_m} · e^{D_m − D_j}`, both exponents ≤ 0 — the form of the kernels' exact per-key scores.

use super::chunkwise::{axpy, dot};
use super::ExpStats;

/// A chunk's cumulative log-decays on one side: per column (`width` columns: per-key Γ or value-side B) or one per
/// row (`width` 1: scalar gates).
pub(super) struct Decay<'a> {
    pub(super) vals: &'a [f32],
    pub(super) width: usize,
}

impl Decay<'_> {
    pub(super) fn at(&self, t: usize, col: usize) -> f32 {
        if self.width == 1 {
            self.vals[t]
        } else {
            self.vals[t * self.width + col]
        }
    }
}

/// The pair levels of a chunk of `l` rows: `(lower rows, upper rows, reference row m)` of every block at every level
/// (§4.3 applied recursively; pairs (i, j < i) with i upper, j lower, both exponents through m ≤ 0).
pub(super) fn levels(l: usize) -> Vec<(std::ops::Range<usize>, std::ops::Range<usize>, usize)> {
    let mut out = Vec::new();
    let n = (usize::BITS - (l.max(1) - 1).leading_zeros()) as usize;
    for p in 0..n {
        let h = 1usize << p;
        for block in (0..l).step_by(2 * h) {
            let m = block + h;
            if m < l {
                out.push((block..m, m..(m + h).min(l), m));
            }
        }
    }
    out
}

/// `P_ij = Σ_c a_ic b_jc e^{D_ic − D_jc}` for j ≤ i (`[l, l]`, zero above the diagonal): the diagonal with exponent
/// 0, every other pair through its level's reference row `reference(m, h)` — `m`, the upper half's first row (a
/// fault injection may name another) — (a scalar decay: one factor a pair). The forward's exact per-key scores
/// (A from q, k, Γ) and the backward's dA (from dO, v, B) alike.
pub(super) fn pair_scores(
    a: &[Vec<f32>],
    b: &[Vec<f32>],
    dec: &Decay,
    reference: impl Fn(usize, usize) -> usize,
    st: &mut ExpStats,
) -> Vec<f32> {
    let l = a.len();
    let mut out = vec![0.0f32; l * l];
    for i in 0..l {
        out[i * l + i] = dot(&a[i], &b[i]);
    }
    if dec.width == 1 {
        for i in 0..l {
            for j in 0..i {
                out[i * l + j] = dot(&a[i], &b[j]) * st.exp(dec.at(i, 0) - dec.at(j, 0));
            }
        }
        return out;
    }
    for (lower, upper, m) in levels(l) {
        let (w, r) = (a[0].len(), reference(m, m - lower.start));
        let bs: Vec<Vec<f32>> = lower
            .clone()
            .map(|j| {
                (0..w)
                    .map(|c| b[j][c] * st.exp(dec.at(r, c) - dec.at(j, c)))
                    .collect()
            })
            .collect();
        for i in upper {
            let ai: Vec<f32> = (0..w)
                .map(|c| a[i][c] * st.exp(dec.at(i, c) - dec.at(r, c)))
                .collect();
            for (jj, j) in lower.clone().enumerate() {
                out[i * l + j] = dot(&ai, &bs[jj]);
            }
        }
    }
    out
}

/// `Σ_{j≤i} w_ij (x_j ⊙ e^{D_i − D_j})` into row i (`to_query`), or `Σ_{i≥j} w_ij (x_i ⊙ e^{D_i − D_j})` into row j,
/// per column: the diagonal with exponent 0, then each level's pairs through their reference row — a block of w
/// times scaled rows, then one scale a row.
pub(super) fn pair_sum(
    w: &[f32],
    x: &[Vec<f32>],
    dec: &Decay,
    to_query: bool,
    st: &mut ExpStats,
) -> Vec<Vec<f32>> {
    let l = x.len();
    let width = x.first().map_or(0, |r| r.len());
    let mut out = vec![vec![0.0f32; width]; l];
    for i in 0..l {
        axpy(&mut out[i], w[i * l + i], &x[i]);
    }
    if dec.width == 1 {
        for i in 0..l {
            for j in 0..i {
                let f = w[i * l + j] * st.exp(dec.at(i, 0) - dec.at(j, 0));
                if to_query {
                    axpy(&mut out[i], f, &x[j]);
                } else {
                    axpy(&mut out[j], f, &x[i]);
                }
            }
        }
        return out;
    }
    for (lower, upper, m) in levels(l) {
        if to_query {
            // row i (upper) += e^{D_i − D_m} ⊙ Σ_j w_ij (x_j ⊙ e^{D_m − D_j})
            let xs: Vec<Vec<f32>> = lower
                .clone()
                .map(|j| {
                    (0..width)
                        .map(|c| x[j][c] * st.exp(dec.at(m, c) - dec.at(j, c)))
                        .collect()
                })
                .collect();
            for i in upper {
                let mut acc = vec![0.0f32; width];
                for (jj, j) in lower.clone().enumerate() {
                    axpy(&mut acc, w[i * l + j], &xs[jj]);
                }
                for c in 0..width {
                    out[i][c] += acc[c] * st.exp(dec.at(i, c) - dec.at(m, c));
                }
            }
        } else {
            // row j (lower) += e^{D_m − D_j} ⊙ Σ_i w_ij (x_i ⊙ e^{D_i − D_m})
            let xs: Vec<Vec<f32>> = upper
                .clone()
                .map(|i| {
                    (0..width)
                        .map(|c| x[i][c] * st.exp(dec.at(i, c) - dec.at(m, c)))
                        .collect()
                })
                .collect();
            for j in lower {
                let mut acc = vec![0.0f32; width];
                for (ii, i) in upper.clone().enumerate() {
                    axpy(&mut acc, w[i * l + j], &xs[ii]);
                }
                for c in 0..width {
                    out[j][c] += acc[c] * st.exp(dec.at(m, c) - dec.at(j, c));
                }
            }
        }
    }
    out
}
