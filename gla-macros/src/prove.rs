//! The proof: over every input (x ∈ ℝ, or h ∈ [0, 1024] for a fixed gate) and every parameter in its declared
//! range (ℝ when undeclared),
//! 1. every `log`/`sqrt`/`/`/`powf` is defined (positive / non-negative / non-zero argument), and
//! 2. log α ≤ 0 (unless the user wrote `assume_nonpositive`).
//!
//! Method: interval arithmetic over the extended reals ([`crate::interval`]), so the tails x → ±∞ are part of the
//! same computation (σ([3, +∞)) = [σ(3), 1)); branch and bound (bisection of the widest variable, in a
//! compactified coordinate so that infinite ranges split too); and a monotonicity test that defeats the
//! dependency problem: where an interval enclosure of ∂e/∂v has a sign over the box, the bound of `e` is
//! evaluated with `v` pinned to the matching (finite) endpoint. That is what proves HGRN-2's
//! log(γ + (1 − γ)σ(x)) ≤ 0 and γ + (1 − γ)σ(x) > 0, which naive intervals put in [0, 2].
//!
//! Before branching, a grid of points (and x = ±10³⁰ for the limits) is searched for a concrete violation, so that
//! a wrong gate fails fast with an example in its message.

use crate::diff::diff;
use crate::expr::{Expr, Func, Node, Op};
use crate::interval::Iv;
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::rc::Rc;

/// Head indices a fixed gate is proved for.
pub const FIXED_H_MAX: f64 = 1024.0;
const MAX_REFINE_DEPTH: u32 = 3;
const BOX_BUDGET: usize = 4000;
const MAX_SPLITS: u32 = 48;
/// A point value above this is a definite counterexample to log α ≤ 0 (below it could be f64 rounding).
const WITNESS_TOL: f64 = 1e-7;

/// What an operation needs of its argument.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Guard {
    /// `log(a)`: a > 0.
    Log,
    /// `log1p(a)` (derivatives and simplified forms only): a > −1.
    Log1p,
    /// `sqrt(a)`: a ≥ 0.
    Sqrt,
    /// `n / d`: d ≠ 0.
    Div,
    /// `powf(a, p)`: a ≥ 0 for non-integer p > 0, a > 0 for non-integer p < 0, a ≠ 0 for integer p < 0.
    Pow(f64),
}

impl Guard {
    fn of(e: &Expr) -> Option<(Guard, usize)> {
        match e.op() {
            Op::F(Func::Log) => Some((Guard::Log, 0)),
            Op::F(Func::Log1p) => Some((Guard::Log1p, 0)),
            Op::F(Func::Sqrt) => Some((Guard::Sqrt, 0)),
            Op::Div => Some((Guard::Div, 1)),
            Op::Powf(p) => {
                let g = Guard::Pow(p);
                (!g.trivial()).then_some((g, 0))
            }
            _ => None,
        }
    }
    fn trivial(self) -> bool {
        matches!(self, Guard::Pow(p) if p.fract() == 0.0 && p > 0.0)
    }
    fn ok(self, a: Iv) -> bool {
        match self {
            Guard::Log => a.positive(),
            Guard::Log1p => a.lo > -1.0 || (a.lo == -1.0 && a.lo_open),
            Guard::Sqrt => a.nonneg(),
            Guard::Div => a.excludes_zero(),
            Guard::Pow(p) => {
                if p.fract() == 0.0 {
                    p > 0.0 || a.excludes_zero()
                } else if p > 0.0 {
                    a.nonneg()
                } else {
                    a.positive()
                }
            }
        }
    }
    /// Whether the point value `v` violates the guard (NaN counts).
    fn violated_at(self, v: f64) -> bool {
        v.is_nan()
            || match self {
                Guard::Log => v < 0.0,
                Guard::Log1p => v < -1.0,
                Guard::Sqrt => v < 0.0,
                Guard::Div => false,
                Guard::Pow(p) => p.fract() != 0.0 && v < 0.0,
            }
    }
    /// Whether an exact zero is a violation.
    fn zero_violates(self) -> bool {
        match self {
            Guard::Log | Guard::Div => true,
            Guard::Log1p => false,
            Guard::Sqrt => false,
            Guard::Pow(p) => p < 0.0,
        }
    }
}

/// A guard that could not be proved.
#[derive(Clone)]
pub struct Fail {
    /// The `log`/`sqrt`/`powf` call or the division.
    pub node: Expr,
    pub guard: Guard,
    /// The argument's enclosure on the box where the proof gave up.
    pub arg: Iv,
    /// A concrete violation: a description like "it is -1 at x = -1".
    pub witness: Option<String>,
}

/// Why log α ≤ 0 could not be proved.
pub struct Positive {
    /// A concrete counterexample ("up to +inf as x → +inf", "e.g. log α = 0.5 at x = 1"), if one was found.
    pub witness: Option<String>,
    /// The box where branch and bound gave up and the bound there.
    pub bx: Vec<Iv>,
    pub hi: f64,
}

pub struct Outcome {
    pub domain: Vec<Fail>,
    pub positive: Option<Positive>,
}

impl Outcome {
    pub fn ok(&self) -> bool {
        self.domain.is_empty() && self.positive.is_none()
    }
}

/// One analysis problem.
pub struct Problem<'a> {
    pub f: &'a Expr,
    /// Variable names (input first).
    pub names: &'a [String],
    /// Per variable: the range proved over.
    pub domain: Vec<Iv>,
    /// Whether variable 0 is the unbounded logit (x ∈ ℝ) rather than the head index.
    pub x_unbounded: bool,
}

pub fn analyze(p: &Problem<'_>, check_sign: bool) -> Outcome {
    let prover = Prover::new(p.domain.len());
    let mut domain = Vec::new();

    // 1. Definite domain violations on the grid.
    let mut guards = Vec::new();
    collect_guards(p.f, &mut guards, &mut HashSet::new());
    let grid = Grid::new(p);
    for (node, g, ai) in &guards {
        if let Some(w) = grid.guard_witness(&node.args()[*ai], *g, p.names) {
            prover.ignored.borrow_mut().insert(node.id());
            domain.push(Fail {
                node: node.clone(),
                guard: *g,
                arg: Iv::ENTIRE,
                witness: Some(w),
            });
        }
    }
    // 2. Branch and bound for the rest.
    domain.extend(prover.prove_domain(p.f, &p.domain));
    if !domain.is_empty() {
        return Outcome {
            domain,
            positive: None,
        };
    }
    if !check_sign {
        return Outcome {
            domain,
            positive: None,
        };
    }
    // 3. log α ≤ 0: grid first, then branch and bound.
    if let Some(w) = grid.positive_witness(p) {
        return Outcome {
            domain,
            positive: Some(Positive {
                witness: Some(w),
                bx: p.domain.clone(),
                hi: f64::INFINITY,
            }),
        };
    }
    let positive = prover.prove_sign(p.f, &p.domain);
    Outcome { domain, positive }
}

fn collect_guards(e: &Expr, out: &mut Vec<(Expr, Guard, usize)>, seen: &mut HashSet<*const Node>) {
    if !seen.insert(e.id()) {
        return;
    }
    for a in e.args() {
        collect_guards(a, out, seen);
    }
    if let Some((g, i)) = Guard::of(e) {
        out.push((e.clone(), g, i));
    }
}

type Partials = HashMap<*const Node, (Expr, Rc<Vec<Expr>>)>;

struct Prover {
    nvars: usize,
    /// Partial derivatives per node (the node is kept alive beside them, so its address stays a valid key).
    partials: RefCell<Partials>,
    /// Guards already reported: evaluated as "unknown" without a new report.
    ignored: RefCell<HashSet<*const Node>>,
}

impl Prover {
    fn new(nvars: usize) -> Self {
        Prover {
            nvars,
            partials: RefCell::new(HashMap::new()),
            ignored: RefCell::new(HashSet::new()),
        }
    }

    fn partials(&self, e: &Expr) -> Rc<Vec<Expr>> {
        if let Some((_, p)) = self.partials.borrow().get(&e.id()) {
            return p.clone();
        }
        let p = Rc::new((0..self.nvars).map(|v| diff(e, v)).collect::<Vec<_>>());
        self.partials
            .borrow_mut()
            .insert(e.id(), (e.clone(), p.clone()));
        p
    }

    /// Enclosure of `e` over `bx`; guards that cannot be proved are pushed to `fails` (and make their node's
    /// value unknown).
    fn eval(&self, e: &Expr, bx: &[Iv], fails: &mut Vec<Fail>, depth: u32) -> Iv {
        let ev = |i: usize, fails: &mut Vec<Fail>| self.eval(e.arg(i), bx, fails, depth);
        match e.op() {
            Op::Const(v) => Iv::point(v),
            Op::Var(i) => bx[i],
            Op::Neg => ev(0, fails).neg(),
            Op::Add => {
                let a = ev(0, fails);
                a.add(ev(1, fails))
            }
            Op::Sub => {
                let a = ev(0, fails);
                a.sub(ev(1, fails))
            }
            Op::Mul => {
                let a = ev(0, fails);
                a.mul(ev(1, fails))
            }
            Op::Div => {
                let a = ev(0, fails);
                match self.guarded(e, Guard::Div, 1, bx, fails, depth) {
                    Some(b) => a.div(b),
                    None => Iv::ENTIRE,
                }
            }
            Op::F(f @ (Func::Log | Func::Sqrt | Func::Log1p)) => {
                let g = match f {
                    Func::Log => Guard::Log,
                    Func::Log1p => Guard::Log1p,
                    _ => Guard::Sqrt,
                };
                match self.guarded(e, g, 0, bx, fails, depth) {
                    Some(a) => a.func(f),
                    None => Iv::ENTIRE,
                }
            }
            Op::F(f) => ev(0, fails).func(f),
            Op::Powf(p) => {
                let g = Guard::Pow(p);
                if g.trivial() {
                    return ev(0, fails).powf(p);
                }
                match self.guarded(e, g, 0, bx, fails, depth) {
                    Some(a) => a.powf(p),
                    None => Iv::ENTIRE,
                }
            }
            Op::Min => {
                let a = ev(0, fails);
                a.min(ev(1, fails))
            }
            Op::Max => {
                let a = ev(0, fails);
                a.max(ev(1, fails))
            }
            Op::SelectLe => {
                let a = ev(0, fails);
                let b = ev(1, fails);
                let c = ev(2, fails);
                let d = ev(3, fails);
                if a.hi <= b.lo {
                    c
                } else if a.lo > b.hi {
                    d
                } else {
                    Iv::hull(c, d)
                }
            }
        }
    }

    fn guarded(
        &self,
        e: &Expr,
        g: Guard,
        ai: usize,
        bx: &[Iv],
        fails: &mut Vec<Fail>,
        depth: u32,
    ) -> Option<Iv> {
        let arg = e.arg(ai);
        let mut a = self.eval(arg, bx, fails, depth);
        if !g.ok(a) && depth < MAX_REFINE_DEPTH {
            a = Iv::meet(a, self.refine(arg, bx, depth + 1));
        }
        if g.ok(a) {
            return Some(a);
        }
        if !self.ignored.borrow().contains(&e.id()) {
            fails.push(Fail {
                node: e.clone(),
                guard: g,
                arg: a,
                witness: None,
            });
        }
        None
    }

    /// A tighter enclosure of `e` from monotonicity: where ∂e/∂v has a sign over the box, the lower (upper)
    /// bound is taken with `v` pinned at the endpoint that minimises (maximises) `e`. Sound because `e` is
    /// continuous on the box whenever the caller's own evaluation of `e` proved its guards.
    fn refine(&self, e: &Expr, bx: &[Iv], depth: u32) -> Iv {
        let parts = self.partials(e);
        let mut lo_box = bx.to_vec();
        let mut hi_box = bx.to_vec();
        let mut any = false;
        for v in 0..self.nvars {
            let iv = bx[v];
            if iv.lo == iv.hi || !e.uses_var(v) {
                continue;
            }
            let mut scratch = Vec::new();
            let d = self.eval(&parts[v], bx, &mut scratch, depth);
            if !scratch.is_empty() {
                continue;
            }
            let ((min_at, min_open), (max_at, max_open)) = if d.nonneg() {
                ((iv.lo, iv.lo_open), (iv.hi, iv.hi_open))
            } else if d.nonpos() {
                ((iv.hi, iv.hi_open), (iv.lo, iv.lo_open))
            } else {
                continue;
            };
            if min_at.is_finite() {
                lo_box[v] = Iv {
                    lo: min_at,
                    hi: min_at,
                    lo_open: min_open,
                    hi_open: min_open,
                };
                any = true;
            }
            if max_at.is_finite() {
                hi_box[v] = Iv {
                    lo: max_at,
                    hi: max_at,
                    lo_open: max_open,
                    hi_open: max_open,
                };
                any = true;
            }
        }
        if !any {
            return Iv::ENTIRE;
        }
        let mut scratch = Vec::new();
        let l = self.eval(e, &lo_box, &mut scratch, depth);
        let h = self.eval(e, &hi_box, &mut scratch, depth);
        if l.lo > h.hi || l.lo.is_nan() || h.hi.is_nan() {
            return Iv::ENTIRE;
        }
        Iv {
            lo: l.lo,
            hi: h.hi,
            lo_open: l.lo_open,
            hi_open: h.hi_open,
        }
    }

    /// Branch and bound until every guard holds on every box; returns the guards that could not be proved.
    fn prove_domain(&self, f: &Expr, domain: &[Iv]) -> Vec<Fail> {
        let mut reported = Vec::new();
        let mut queue = vec![(domain.to_vec(), 0u32)];
        let mut evals = 0usize;
        while let Some((bx, depth)) = queue.pop() {
            evals += 1;
            let mut fails = Vec::new();
            self.eval(f, &bx, &mut fails, 0);
            if fails.is_empty() {
                continue;
            }
            match split(f, &bx) {
                Some((a, b)) if evals < BOX_BUDGET && depth < MAX_SPLITS => {
                    queue.push((b, depth + 1));
                    queue.push((a, depth + 1));
                }
                _ => {
                    for fl in fails {
                        if self.ignored.borrow_mut().insert(fl.node.id()) {
                            reported.push(fl);
                        }
                    }
                    if evals < 2 * BOX_BUDGET {
                        // Look again with those guards set aside, for further independent problems.
                        queue.push((bx, depth));
                    }
                }
            }
        }
        reported
    }

    /// Branch and bound for sup f ≤ 0 (the domain is already proved).
    fn prove_sign(&self, f: &Expr, domain: &[Iv]) -> Option<Positive> {
        let mut queue = vec![(domain.to_vec(), 0u32)];
        let mut evals = 0usize;
        while let Some((bx, depth)) = queue.pop() {
            evals += 1;
            let mut fails = Vec::new();
            let mut v = self.eval(f, &bx, &mut fails, 0);
            if fails.is_empty() && !v.nonpos() {
                v = Iv::meet(v, self.refine(f, &bx, 1));
            }
            if fails.is_empty() && v.nonpos() {
                continue;
            }
            match split(f, &bx) {
                Some((a, b)) if evals < BOX_BUDGET && depth < MAX_SPLITS => {
                    queue.push((b, depth + 1));
                    queue.push((a, depth + 1));
                }
                _ => {
                    return Some(Positive {
                        witness: None,
                        bx,
                        hi: v.hi,
                    })
                }
            }
        }
        None
    }
}

/// Compactified coordinate: ℝ ∪ {±∞} → [−1, 1].
fn squash(v: f64) -> f64 {
    if v.is_infinite() {
        v.signum()
    } else {
        v / (1.0 + v.abs())
    }
}

/// Bisect the variable of `f` that is widest in the compactified coordinate.
fn split(f: &Expr, bx: &[Iv]) -> Option<(Vec<Iv>, Vec<Iv>)> {
    let mut best: Option<(usize, f64)> = None;
    for (v, iv) in bx.iter().enumerate() {
        if !f.uses_var(v) {
            continue;
        }
        let finite = iv.lo.is_finite() && iv.hi.is_finite();
        if finite && iv.hi - iv.lo <= 1e-9 * (1.0 + iv.lo.abs().max(iv.hi.abs())) {
            continue;
        }
        let w = squash(iv.hi) - squash(iv.lo);
        if best.is_none_or(|(_, bw)| w > bw) {
            best = Some((v, w));
        }
    }
    let (v, _) = best?;
    let iv = bx[v];
    let m = match (iv.lo.is_finite(), iv.hi.is_finite()) {
        (false, false) => 0.0,
        (true, false) => {
            if iv.lo < 0.0 {
                0.0
            } else {
                (iv.lo * 4.0).max(1.0)
            }
        }
        (false, true) => {
            if iv.hi > 0.0 {
                0.0
            } else {
                (iv.hi * 4.0).min(-1.0)
            }
        }
        (true, true) => 0.5 * iv.lo + 0.5 * iv.hi,
    };
    if !(m > iv.lo && m < iv.hi) {
        return None;
    }
    let (mut a, mut b) = (bx.to_vec(), bx.to_vec());
    a[v] = Iv {
        lo: iv.lo,
        hi: m,
        lo_open: iv.lo_open,
        hi_open: false,
    };
    b[v] = Iv {
        lo: m,
        hi: iv.hi,
        lo_open: false,
        hi_open: iv.hi_open,
    };
    Some((a, b))
}

// -------------------------------------------------------------------------------------------------------------
// Counterexample search
// -------------------------------------------------------------------------------------------------------------

struct Grid {
    axes: Vec<Vec<f64>>,
}

const X_GRID: [f64; 23] = [
    -1e6, -1000.0, -100.0, -32.0, -16.0, -8.0, -4.0, -2.0, -1.0, -0.5, -0.25, 0.0, 0.25, 0.5, 1.0,
    2.0, 4.0, 8.0, 16.0, 32.0, 100.0, 1000.0, 1e6,
];
const X_GRID_SMALL: [f64; 11] = [
    -1000.0, -32.0, -4.0, -1.0, -0.5, 0.0, 0.5, 1.0, 4.0, 32.0, 1000.0,
];
const H_GRID: [f64; 17] = [
    0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 12.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0,
    1024.0,
];

impl Grid {
    fn new(p: &Problem<'_>) -> Self {
        let unranged = p.domain.iter().skip(1).filter(|d| d.is_entire()).count();
        let big = unranged >= 2;
        let axes = p
            .domain
            .iter()
            .enumerate()
            .map(|(v, d)| {
                if v == 0 && p.x_unbounded {
                    X_GRID.to_vec()
                } else if v == 0 {
                    H_GRID
                        .iter()
                        .copied()
                        .filter(|h| *h >= d.lo && *h <= d.hi)
                        .collect()
                } else if d.is_entire() {
                    if big {
                        X_GRID_SMALL.to_vec()
                    } else {
                        X_GRID.to_vec()
                    }
                } else {
                    let (lo, hi) = (d.lo, d.hi);
                    let mut a = vec![
                        lo,
                        lo + 0.25 * (hi - lo),
                        lo + 0.5 * (hi - lo),
                        lo + 0.75 * (hi - lo),
                        hi,
                    ];
                    if lo < 0.0 && hi > 0.0 {
                        a.push(0.0);
                    }
                    a
                }
            })
            .collect();
        Grid { axes }
    }

    /// Every grid point, simplest (smallest magnitudes) first, so that examples in messages read well.
    fn points(&self) -> Vec<Vec<f64>> {
        let total: usize = self.axes.iter().map(Vec::len).product();
        let mut pts: Vec<Vec<f64>> = (0..total)
            .map(|mut k| {
                self.axes
                    .iter()
                    .map(|ax| {
                        let v = ax[k % ax.len()];
                        k /= ax.len();
                        v
                    })
                    .collect()
            })
            .collect();
        let key = |p: &Vec<f64>| p.iter().map(|v| (1.0 + v.abs()).ln()).sum::<f64>();
        pts.sort_by(|a, b| key(a).total_cmp(&key(b)));
        pts
    }

    /// A grid point where the guard's argument is robustly out of its domain.
    fn guard_witness(&self, arg: &Expr, g: Guard, names: &[String]) -> Option<String> {
        for pt in self.points() {
            let v = arg.eval(&pt);
            if g.violated_at(v) && !v.is_nan() && v < -1e-9 {
                return Some(format!("it is {} at {}", fmt_num(v), fmt_point(names, &pt)));
            }
            if v == 0.0 && g.zero_violates() {
                // An exact 0 that is not an underflow: the neighbours are clearly away from 0.
                let robust = (0..pt.len()).all(|d| {
                    let ax = &self.axes[d];
                    let i = ax.iter().position(|&a| a == pt[d]).unwrap();
                    [i.checked_sub(1), Some(i + 1)]
                        .into_iter()
                        .flatten()
                        .filter(|&j| j < ax.len())
                        .all(|j| {
                            let mut q = pt.clone();
                            q[d] = ax[j];
                            arg.eval(&q).abs() > 1e-6
                        })
                });
                if robust {
                    return Some(format!("it is 0 at {}", fmt_point(names, &pt)));
                }
            }
            if g == Guard::Div || matches!(g, Guard::Pow(p) if p.fract() == 0.0) {
                // A sign change along an axis.
                for d in 0..pt.len() {
                    let ax = &self.axes[d];
                    let i = ax.iter().position(|&a| a == pt[d]).unwrap();
                    if i + 1 < ax.len() {
                        let mut q = pt.clone();
                        q[d] = ax[i + 1];
                        let w = arg.eval(&q);
                        if v.abs() > 1e-9
                            && w.abs() > 1e-9
                            && v.signum() != w.signum()
                            && (q[d] - pt[d]).abs() > 0.0
                        {
                            return Some(format!(
                                "it changes sign between {} and {}",
                                fmt_point(names, &pt),
                                fmt_point(names, &q)
                            ));
                        }
                    }
                }
            }
        }
        None
    }

    /// The largest log α on the grid (and in the limits x → ±∞), if it is clearly positive.
    fn positive_witness(&self, p: &Problem<'_>) -> Option<String> {
        let mut best: Option<(f64, String)> = None;
        let mut consider = |v: f64, what: String| {
            if v.is_nan() || v <= WITNESS_TOL {
                return;
            }
            if best.as_ref().is_none_or(|(b, _)| v > *b) {
                best = Some((v, what));
            }
        };
        for pt in self.points() {
            let v = p.f.eval(&pt);
            consider(
                v,
                format!("e.g. log α = {} at {}", fmt_num(v), fmt_point(p.names, &pt)),
            );
            if p.x_unbounded {
                for lim in [-1e30, 1e30] {
                    let mut q = pt.clone();
                    q[0] = lim;
                    let v = p.f.eval(&q);
                    let rest = if q.len() > 1 {
                        format!(" (with {})", fmt_point(&p.names[1..], &q[1..]))
                    } else {
                        String::new()
                    };
                    let sign = if lim > 0.0 { "+" } else { "-" };
                    let mut w = p.f.eval(&{
                        let mut r = q.clone();
                        r[0] = lim * 1e-10;
                        r
                    });
                    if w.is_nan() {
                        w = v;
                    }
                    // Growing without bound, or approaching a positive limit.
                    let (shown, big) = if v > 1e15 || (v > 1e6 && v > 2.0 * w) {
                        ("+inf".to_string(), f64::INFINITY)
                    } else {
                        (fmt_num(v), v)
                    };
                    consider(
                        big,
                        format!("up to {shown} as {} → {sign}inf{rest}", p.names[0]),
                    );
                }
            }
        }
        best.map(|(_, s)| s)
    }
}

pub fn fmt_num(v: f64) -> String {
    if v.is_nan() {
        return "NaN".into();
    }
    if v.is_infinite() {
        return if v > 0.0 {
            "+inf".into()
        } else {
            "-inf".into()
        };
    }
    if v == 0.0 {
        return "0".into();
    }
    let mag = v.abs().log10().floor() as i32;
    if !(-4..=6).contains(&mag) {
        return format!("{v:.3e}");
    }
    let scale = 10f64.powi(3 - mag);
    let r = (v * scale).round() / scale;
    format!("{r}")
}

pub fn fmt_point(names: &[String], pt: &[f64]) -> String {
    names
        .iter()
        .zip(pt)
        .map(|(n, v)| format!("{n} = {}", fmt_num(*v)))
        .collect::<Vec<_>>()
        .join(", ")
}

pub fn fmt_iv(iv: &Iv) -> String {
    format!(
        "{}{}, {}{}",
        if iv.lo_open { "(" } else { "[" },
        fmt_num(iv.lo),
        fmt_num(iv.hi),
        if iv.hi_open { ")" } else { "]" }
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expr::num;
    use proc_macro2::Span;

    fn s() -> Span {
        Span::call_site()
    }
    fn x() -> Expr {
        Expr::var(0, s())
    }
    fn p(i: usize) -> Expr {
        Expr::var(1 + i, s())
    }
    fn f(fu: Func, a: Expr) -> Expr {
        Expr::node(Op::F(fu), vec![a], s())
    }
    fn raw(op: Op, a: Vec<Expr>) -> Expr {
        Expr::node(op, a, s())
    }

    fn run(e: &Expr, params: &[Option<(f64, f64)>]) -> Outcome {
        let names: Vec<String> = std::iter::once("x".to_string())
            .chain((0..params.len()).map(|i| format!("p{i}")))
            .collect();
        let mut domain = vec![Iv::ENTIRE];
        domain.extend(
            params
                .iter()
                .map(|r| r.map_or(Iv::ENTIRE, |(a, b)| Iv::closed(a, b))),
        );
        analyze(
            &Problem {
                f: e,
                names: &names,
                domain,
                x_unbounded: true,
            },
            true,
        )
    }

    fn hgrn2(g: Expr) -> Expr {
        f(
            Func::Log,
            raw(
                Op::Add,
                vec![
                    g.clone(),
                    raw(
                        Op::Mul,
                        vec![raw(Op::Sub, vec![num(1.0), g]), f(Func::Sigmoid, x())],
                    ),
                ],
            ),
        )
    }

    #[test]
    fn builtins_prove() {
        let cases = vec![
            (
                raw(Op::Div, vec![f(Func::LogSigmoid, x()), num(16.0)]),
                vec![],
            ),
            (
                raw(
                    Op::Mul,
                    vec![
                        raw(Op::Neg, vec![f(Func::Softplus, x())]),
                        f(Func::Exp, p(0)),
                    ],
                ),
                vec![None],
            ),
            (f(Func::LogSigmoid, x()), vec![]),
            (raw(Op::Neg, vec![f(Func::Exp, x())]), vec![]),
            (hgrn2(p(0)), vec![Some((0.0, 1.0))]),
            (f(Func::Log, f(Func::Sigmoid, x())), vec![]),
            (
                f(
                    Func::Log,
                    raw(Op::Sub, vec![num(1.0), f(Func::Sigmoid, x())]),
                ),
                vec![],
            ),
            (raw(Op::Neg, vec![raw(Op::Powf(2.0), vec![x()])]), vec![]),
        ];
        for (e, params) in cases {
            let o = run(&e, &params);
            assert!(
                o.ok(),
                "{e:?}: domain {:?}, positive {:?}",
                o.domain
                    .iter()
                    .map(|d| d.witness.clone())
                    .collect::<Vec<_>>(),
                o.positive.map(|p| (p.witness, p.hi))
            );
        }
    }

    #[test]
    fn retnet_fixed() {
        // log(1 - exp((-5 - h) * log(2)))
        let e = f(
            Func::Log,
            raw(
                Op::Sub,
                vec![
                    num(1.0),
                    f(
                        Func::Exp,
                        raw(
                            Op::Mul,
                            vec![raw(Op::Sub, vec![num(-5.0), x()]), f(Func::Log, num(2.0))],
                        ),
                    ),
                ],
            ),
        );
        let names = vec!["h".to_string()];
        let o = analyze(
            &Problem {
                f: &e,
                names: &names,
                domain: vec![Iv::closed(0.0, FIXED_H_MAX)],
                x_unbounded: false,
            },
            true,
        );
        assert!(o.ok());
    }

    #[test]
    fn rejects() {
        let o = run(&x(), &[]);
        assert_eq!(
            o.positive.unwrap().witness.unwrap(),
            "up to +inf as x → +inf"
        );
        let o = run(&raw(Op::Neg, vec![f(Func::LogSigmoid, x())]), &[]);
        assert_eq!(
            o.positive.unwrap().witness.unwrap(),
            "up to +inf as x → -inf"
        );
        let o = run(&f(Func::Log, x()), &[]);
        assert_eq!(o.domain.len(), 1);
        assert_eq!(o.domain[0].witness.as_deref(), Some("it is 0 at x = 0"));
        // HGRN-2 with γ unranged: γ + (1 - γ)σ(x) can be ≤ 0.
        let o = run(&hgrn2(p(0)), &[None]);
        assert_eq!(o.domain.len(), 1);
        // 1/x
        let o = run(
            &raw(
                Op::Neg,
                vec![raw(Op::Div, vec![num(1.0), raw(Op::Mul, vec![x(), x()])])],
            ),
            &[],
        );
        assert_eq!(
            o.domain.len(),
            1,
            "{:?}",
            o.domain
                .iter()
                .map(|d| d.witness.clone())
                .collect::<Vec<_>>()
        );
        // 0.5 - softplus(x) -> 0.5 as x -> -inf
        let o = run(&raw(Op::Sub, vec![num(0.5), f(Func::Softplus, x())]), &[]);
        assert_eq!(
            o.positive.unwrap().witness.unwrap(),
            "up to 0.5 as x → -inf"
        );
    }

    #[test]
    fn tight_but_not_provable_is_reported_without_witness() {
        // log(1 + 1e-12 * sigmoid(x)) is positive but tiny: no grid witness, branch and bound fails.
        let e = f(
            Func::Log,
            raw(
                Op::Add,
                vec![
                    num(1.0),
                    raw(Op::Mul, vec![num(1e-12), f(Func::Sigmoid, x())]),
                ],
            ),
        );
        let o = run(&e, &[]);
        let pos = o.positive.expect("must not prove");
        assert!(pos.witness.is_none());
        assert!(pos.hi > 0.0);
    }
}
