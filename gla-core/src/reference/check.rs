//! Validation of a [`Problem`] and per-(sequence, head) views of it.
//!
//! Everything the algorithms index is checked here first, so that the algorithms themselves cannot go out of
//! bounds on bad input.

use super::{KeyGate, Problem};
use crate::error::Result;
use crate::{Dims, GlaError};

/// A validated problem.
pub(super) struct Checked<'a> {
    pub p: Problem<'a>,
    /// `(first row of the flattened [B*T] axis, length)` of every sequence.
    pub seqs: Vec<(usize, usize)>,
    /// The effective output scale.
    pub scale: f64,
}

/// One unit of parallel work: head `h` of sequence `n`.
#[derive(Clone, Copy, Debug)]
pub(super) struct Task {
    pub n: usize,
    pub h: usize,
    pub start: usize,
    pub len: usize,
}

/// The key gate of one (sequence, head), per token.
pub(super) enum RowGate<T> {
    None,
    /// `[len, d_k]`.
    PerKey(Vec<T>),
    /// `[len]` (per-head gate, or the fixed gate repeated on every token).
    Scalar(Vec<T>),
}

/// The inputs of one (sequence, head), gathered into contiguous row-major arrays (token `t` is row `t`).
pub(super) struct SeqHead<T> {
    pub len: usize,
    pub dk: usize,
    pub dv: usize,
    /// `[len, d_k]`.
    pub q: Vec<T>,
    /// `[len, d_k]`.
    pub k: Vec<T>,
    /// `[len, d_v]`.
    pub v: Vec<T>,
    pub key: RowGate<T>,
    /// log β, `[len, d_v]`.
    pub value: Option<Vec<T>>,
    /// `[d_k, d_v]`, zeros without an initial state.
    pub h0: Vec<T>,
}

/// Product of dimensions, as a typed error on overflow.
pub(super) fn numel(what: &'static str, dims: &[usize]) -> Result<usize> {
    dims.iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| {
            GlaError::invalid(
                what,
                format!("element count of shape {dims:?} overflows usize"),
            )
        })
}

/// `xs.len()` must be the element count of `shape` (named `names`).
pub(super) fn expect_len(
    what: &'static str,
    xs: &[f64],
    names: &str,
    shape: &[usize],
) -> Result<()> {
    let n = numel(what, shape)?;
    if xs.len() != n {
        return Err(GlaError::shape(
            what,
            format!("{names} = {shape:?} ({n} elements)"),
            &[xs.len()],
        ));
    }
    Ok(())
}

/// Every value must be finite.
pub(super) fn expect_finite(what: &'static str, xs: &[f64]) -> Result<()> {
    match xs.iter().position(|x| !x.is_finite()) {
        Some(i) => Err(GlaError::invalid(
            what,
            format!("element {i} is {}, every value must be finite", xs[i]),
        )),
        None => Ok(()),
    }
}

/// Every value must be a finite log-gate, i.e. finite and ≤ 0.
fn expect_log_gate(what: &'static str, xs: &[f64]) -> Result<()> {
    expect_finite(what, xs)?;
    match xs.iter().position(|&x| x > 0.0) {
        Some(i) => Err(GlaError::invalid(
            what,
            format!(
                "element {i} is {}: a log-gate must be <= 0 (a gate value in (0, 1])",
                xs[i]
            ),
        )),
        None => Ok(()),
    }
}

/// Validate every input of `p`.
pub(super) fn check<'a>(p: &Problem<'a>) -> Result<Checked<'a>> {
    let Dims { b, t, h, dk, dv } = p.dims;
    // Validates H, d_k, d_v > 0 and cu_seqlens (B == 1, 0 = first <= ... <= last = T).
    let seqs = p.dims.sequences(p.cu_seqlens)?;
    let n = seqs.len();

    expect_len("q", p.q, "[B,T,H,d_k]", &[b, t, h, dk])?;
    expect_len("k", p.k, "[B,T,H,d_k]", &[b, t, h, dk])?;
    expect_len("v", p.v, "[B,T,H,d_v]", &[b, t, h, dv])?;
    match p.key_gate {
        KeyGate::None => {}
        KeyGate::PerKey(g) => expect_len("key_gate (per key)", g, "[B,T,H,d_k]", &[b, t, h, dk])?,
        KeyGate::PerHead(g) => expect_len("key_gate (per head)", g, "[B,T,H]", &[b, t, h])?,
        KeyGate::Fixed(g) => expect_len("key_gate (fixed)", g, "[H]", &[h])?,
    }
    if let Some(g) = p.value_gate {
        expect_len("value_gate", g, "[B,T,H,d_v]", &[b, t, h, dv])?;
    }
    if let Some(s) = p.initial_state {
        expect_len("initial_state", s, "[N,H,d_k,d_v]", &[n, h, dk, dv])?;
    }

    expect_finite("q", p.q)?;
    expect_finite("k", p.k)?;
    expect_finite("v", p.v)?;
    match p.key_gate {
        KeyGate::None => {}
        KeyGate::PerKey(g) => expect_log_gate("key_gate (per key)", g)?,
        KeyGate::PerHead(g) => expect_log_gate("key_gate (per head)", g)?,
        KeyGate::Fixed(g) => expect_log_gate("key_gate (fixed)", g)?,
    }
    if let Some(g) = p.value_gate {
        expect_log_gate("value_gate", g)?;
    }
    if let Some(s) = p.initial_state {
        expect_finite("initial_state", s)?;
    }
    let scale = match p.scale {
        None => 1.0 / (dk as f64).sqrt(),
        Some(s) if s.is_finite() => s,
        Some(s) => {
            return Err(GlaError::invalid(
                "scale",
                format!("must be finite, got {s}"),
            ))
        }
    };
    Ok(Checked { p: *p, seqs, scale })
}

impl Checked<'_> {
    /// Number of sequences `N`.
    pub fn nseq(&self) -> usize {
        self.seqs.len()
    }

    /// Every (sequence, head), sequence-major.
    pub fn tasks(&self) -> Vec<Task> {
        let h = self.p.dims.h;
        self.seqs
            .iter()
            .enumerate()
            .flat_map(|(n, &(start, len))| {
                (0..h).map(move |hh| Task {
                    n,
                    h: hh,
                    start,
                    len,
                })
            })
            .collect()
    }

    /// Offset of the state of `task` in a `[N,H,d_k,d_v]` tensor.
    pub fn state_offset(&self, task: &Task) -> usize {
        let d = &self.p.dims;
        (task.n * d.h + task.h) * d.dk * d.dv
    }

    /// Gather the inputs of `task` into contiguous arrays, converted by `f` (identity or rounding to f32).
    pub fn gather<T: Copy + Default>(
        &self,
        task: &Task,
        f: impl Fn(f64) -> T + Copy,
    ) -> SeqHead<T> {
        let Dims { h, dk, dv, .. } = self.p.dims;
        let hh = task.h;
        let rows = |src: &[f64], width: usize| -> Vec<T> {
            let mut out = Vec::with_capacity(task.len * width);
            for r in task.start..task.start + task.len {
                let off = (r * h + hh) * width;
                out.extend(src[off..off + width].iter().map(|&x| f(x)));
            }
            out
        };
        let key = match self.p.key_gate {
            KeyGate::None => RowGate::None,
            KeyGate::PerKey(g) => RowGate::PerKey(rows(g, dk)),
            KeyGate::PerHead(g) => RowGate::Scalar(rows(g, 1)),
            KeyGate::Fixed(g) => RowGate::Scalar(vec![f(g[hh]); task.len]),
        };
        let h0 = match self.p.initial_state {
            Some(s) => {
                let off = self.state_offset(task);
                s[off..off + dk * dv].iter().map(|&x| f(x)).collect()
            }
            None => vec![T::default(); dk * dv],
        };
        SeqHead {
            len: task.len,
            dk,
            dv,
            q: rows(self.p.q, dk),
            k: rows(self.p.k, dk),
            v: rows(self.p.v, dv),
            key,
            value: self.p.value_gate.map(|g| rows(g, dv)),
            h0,
        }
    }

    /// Write the `[len, width]` rows of `task` from `src` into the `[B,T,H,width]` tensor `dst`.
    pub fn scatter(&self, dst: &mut [f64], task: &Task, width: usize, src: &[f64]) {
        let h = self.p.dims.h;
        for (t, row) in src.chunks_exact(width).enumerate() {
            let off = ((task.start + t) * h + task.h) * width;
            dst[off..off + width].copy_from_slice(row);
        }
    }
}
