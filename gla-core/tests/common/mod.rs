//! Shared helpers of the reference tests: random problems that own their tensors.
#![allow(dead_code)]

use gla_core::reference::{KeyGate, Problem};
use gla_core::Dims;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// Which key gate a random problem gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    None,
    PerKey,
    PerHead,
    Fixed,
}

pub const KINDS: [Kind; 4] = [Kind::None, Kind::PerKey, Kind::PerHead, Kind::Fixed];

/// Range of the random log-gates.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Regime {
    /// log α ∈ [−60, 0]: strong decay (in-chunk Γ reaches −60·C).
    Strong,
    /// log α ∈ [−1e-6, 0]: long memory (α ≈ 1, the state sums every token).
    LongMemory,
    /// log α ∈ [−3, −0.01]: for finite differences (a ±1e-5 step stays ≤ 0).
    Moderate,
    /// log α ∈ [−0.3, 0]: mild decay — chunks of ≤ 64 tokens stay within the kernels' factorisation span.
    Mild,
    /// Mild (as `Mild`) but one element in 32 a near-zero forget gate, log α = −1e13: the later tokens' decays must
    /// survive it (`gla_core::LOG2_ALPHA_FLOOR`).
    Spike,
}

impl Regime {
    pub fn sample(self, rng: &mut SmallRng) -> f64 {
        match self {
            Regime::Strong => -rng.random_range(0.0..=60.0),
            Regime::LongMemory => -rng.random_range(0.0..=1e-6),
            Regime::Moderate => -rng.random_range(0.01..=3.0),
            Regime::Mild => -rng.random_range(0.0..=0.3),
            Regime::Spike => {
                if rng.random_range(0..32) == 0 {
                    -1e13
                } else {
                    -rng.random_range(0.0..=0.3)
                }
            }
        }
    }
}

/// A problem that owns its tensors; [`Owned::problem`] borrows them.
#[derive(Clone, Debug)]
pub struct Owned {
    pub dims: Dims,
    pub q: Vec<f64>,
    pub k: Vec<f64>,
    pub v: Vec<f64>,
    pub kind: Kind,
    pub key_gate: Vec<f64>,
    pub value_gate: Option<Vec<f64>>,
    pub scale: Option<f64>,
    pub initial_state: Option<Vec<f64>>,
    pub cu_seqlens: Option<Vec<usize>>,
}

impl Owned {
    pub fn problem(&self) -> Problem<'_> {
        Problem {
            dims: self.dims,
            q: &self.q,
            k: &self.k,
            v: &self.v,
            key_gate: match self.kind {
                Kind::None => KeyGate::None,
                Kind::PerKey => KeyGate::PerKey(&self.key_gate),
                Kind::PerHead => KeyGate::PerHead(&self.key_gate),
                Kind::Fixed => KeyGate::Fixed(&self.key_gate),
            },
            value_gate: self.value_gate.as_deref(),
            scale: self.scale,
            initial_state: self.initial_state.as_deref(),
            cu_seqlens: self.cu_seqlens.as_deref(),
        }
    }

    /// Number of sequences.
    pub fn nseq(&self) -> usize {
        self.cu_seqlens
            .as_ref()
            .map_or(self.dims.b, |c| c.len() - 1)
    }

    /// Elements of a `[N,H,d_k,d_v]` state tensor.
    pub fn state_len(&self) -> usize {
        self.nseq() * self.dims.h * self.dims.dk * self.dims.dv
    }
}

/// Uniform values in [−1, 1] (never all zero).
pub fn uniform(rng: &mut SmallRng, n: usize) -> Vec<f64> {
    (0..n).map(|_| rng.random_range(-1.0..=1.0)).collect()
}

/// `cu_seqlens` of sequences with these lengths.
pub fn cu_of(lens: &[usize]) -> Vec<usize> {
    let mut cu = vec![0];
    for &l in lens {
        cu.push(cu.last().unwrap() + l);
    }
    cu
}

/// Specification of a random problem.
#[derive(Clone, Debug)]
pub struct Spec {
    pub b: usize,
    pub h: usize,
    pub dk: usize,
    pub dv: usize,
    /// `Some(lengths)`: varlen (B must be 1), else every batch row has length `t`.
    pub lens: Option<Vec<usize>>,
    pub t: usize,
    pub kind: Kind,
    pub value_gate: bool,
    pub regime: Regime,
    pub initial_state: bool,
    pub scale: Option<f64>,
}

impl Spec {
    pub fn new(b: usize, t: usize, h: usize, dk: usize, dv: usize) -> Self {
        Spec {
            b,
            h,
            dk,
            dv,
            lens: None,
            t,
            kind: Kind::PerKey,
            value_gate: false,
            regime: Regime::Strong,
            initial_state: true,
            scale: None,
        }
    }
    pub fn varlen(lens: &[usize], h: usize, dk: usize, dv: usize) -> Self {
        let mut s = Spec::new(1, lens.iter().sum(), h, dk, dv);
        s.lens = Some(lens.to_vec());
        s
    }
    pub fn gates(mut self, kind: Kind, value_gate: bool, regime: Regime) -> Self {
        self.kind = kind;
        self.value_gate = value_gate;
        self.regime = regime;
        self
    }

    pub fn build(&self, seed: u64) -> Owned {
        let mut rng = SmallRng::seed_from_u64(seed);
        let (b, t, h, dk, dv) = (self.b, self.t, self.h, self.dk, self.dv);
        let dims = Dims::new(b, t, h, dk, dv);
        let cu_seqlens = self.lens.as_ref().map(|l| cu_of(l));
        let nseq = cu_seqlens.as_ref().map_or(b, |c| c.len() - 1);
        let q = uniform(&mut rng, b * t * h * dk);
        let k = uniform(&mut rng, b * t * h * dk);
        let v = uniform(&mut rng, b * t * h * dv);
        let n_gate = match self.kind {
            Kind::None => 0,
            Kind::PerKey => b * t * h * dk,
            Kind::PerHead => b * t * h,
            Kind::Fixed => h,
        };
        let regime = self.regime;
        let key_gate = (0..n_gate).map(|_| regime.sample(&mut rng)).collect();
        let value_gate = self.value_gate.then(|| {
            (0..b * t * h * dv)
                .map(|_| regime.sample(&mut rng))
                .collect()
        });
        let initial_state = self
            .initial_state
            .then(|| uniform(&mut rng, nseq * h * dk * dv));
        Owned {
            dims,
            q,
            k,
            v,
            kind: self.kind,
            key_gate,
            value_gate,
            scale: self.scale,
            initial_state,
            cu_seqlens,
        }
    }
}

/// Every (C, c) with C ∈ {16, 32, 64, 128}, c ∈ {8, 16, 32}, c | C, c ≤ C.
pub fn chunk_pairs() -> Vec<(usize, usize)> {
    let mut v = Vec::new();
    for c_big in [16, 32, 64, 128] {
        for c in [8, 16, 32] {
            if c <= c_big && c_big % c == 0 {
                v.push((c_big, c));
            }
        }
    }
    v
}

pub fn all_finite(xs: &[f64]) -> bool {
    xs.iter().all(|x| x.is_finite())
}

/// The key gate's gradient error: ‖got − want‖ / max(‖want‖, ‖terms‖), the terms |q ⊙ dq| + |k ⊙ dk| summed into the
/// gate's shape (`g`: the reference gradients). The gate's gradient is a sum of such terms that cancel where the
/// decay is strong: its true value is then tiny, so the error is measured against the larger of it and its terms.
pub fn gate_error(got: &[f64], want: &[f64], o: &Owned, g: &gla_core::reference::Grads) -> f64 {
    let (dk, n) = (o.dims.dk, o.q.len() / o.dims.dk);
    let per_elem: Vec<f64> = (0..n * dk)
        .map(|x| (o.q[x] * g.dq[x]).abs() + (o.k[x] * g.dk[x]).abs())
        .collect();
    let terms: Vec<f64> = match o.kind {
        Kind::PerKey => per_elem,
        Kind::PerHead => per_elem.chunks_exact(dk).map(|r| r.iter().sum()).collect(),
        Kind::Fixed => {
            let h = o.dims.h;
            let mut t = vec![0.0; h];
            for (row, r) in per_elem.chunks_exact(dk).enumerate() {
                t[row % h] += r.iter().sum::<f64>();
            }
            t
        }
        Kind::None => return 0.0,
    };
    let norm = |v: &[f64]| v.iter().map(|x| x * x).sum::<f64>().sqrt();
    let diff: Vec<f64> = got.iter().zip(want).map(|(a, b)| a - b).collect();
    norm(&diff) / norm(want).max(norm(&terms))
}
