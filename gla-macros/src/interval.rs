//! Sound interval arithmetic over the extended reals, with outward rounding and open/closed endpoints.
//!
//! An [`Iv`] encloses a set of *finite* reals: the values a sub-expression takes over a box of inputs.
//! Infinite endpoints stand for "unbounded" and are always open; a lower endpoint is never +∞ and an upper one
//! never −∞. An endpoint is *open* when the value is known never to be attained (σ(x) > 0 for every finite x):
//! that is what proves `log(σ(x))` and `log(γ + (1 − γ)σ(x))` well defined. Claiming "closed" is always safe;
//! "open" is claimed only when certain.
//!
//! Rounding: + − × ÷ use error-free transformations (TwoSum, FMA) to detect inexact results and then step one
//! ulp outward; the transcendental functions step 4 ulps outward (the platform libm is within 1 ulp) unless the
//! value is exact (a limit at ±∞, exp(0) = 1, log(1) = 0, ...), and are clamped to the function's range
//! (0 < σ < 1, exp > 0, log σ(x) < min(x, 0), ...). A rounded endpoint is open (the true bound lies strictly
//! inside).

use crate::expr::{log_sigmoid, sigmoid, softplus, Func};

const INF: f64 = f64::INFINITY;

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Iv {
    pub lo: f64,
    pub hi: f64,
    pub lo_open: bool,
    pub hi_open: bool,
}

pub fn next_up(v: f64) -> f64 {
    if v.is_nan() || v == INF {
        return v;
    }
    if v == 0.0 {
        return f64::from_bits(1);
    }
    let b = v.to_bits();
    f64::from_bits(if v > 0.0 { b + 1 } else { b - 1 })
}

pub fn next_down(v: f64) -> f64 {
    -next_up(-v)
}

fn ulps_up(v: f64, n: usize) -> f64 {
    (0..n).fold(v, |v, _| next_up(v))
}
fn ulps_down(v: f64, n: usize) -> f64 {
    (0..n).fold(v, |v, _| next_down(v))
}

impl Iv {
    pub const ENTIRE: Iv = Iv {
        lo: -INF,
        hi: INF,
        lo_open: true,
        hi_open: true,
    };

    /// A closed interval (infinite ends open).
    pub fn closed(lo: f64, hi: f64) -> Iv {
        Iv {
            lo,
            hi,
            lo_open: lo.is_infinite(),
            hi_open: hi.is_infinite(),
        }
        .fix()
    }
    pub fn point(v: f64) -> Iv {
        Iv::closed(v, v)
    }

    /// Restore the invariants after an operation: NaN → entire; finite values overflowed to the wrong infinity
    /// → ±MAX (open); infinite ends open.
    fn fix(mut self) -> Iv {
        if self.lo.is_nan() || self.hi.is_nan() || self.lo > self.hi {
            return Iv::ENTIRE;
        }
        if self.lo == INF {
            self.lo = f64::MAX;
            self.lo_open = true;
        }
        if self.hi == -INF {
            self.hi = -f64::MAX;
            self.hi_open = true;
        }
        if self.lo == -INF {
            self.lo_open = true;
        }
        if self.hi == INF {
            self.hi_open = true;
        }
        if self.lo > self.hi {
            return Iv::ENTIRE;
        }
        self
    }

    pub fn is_entire(&self) -> bool {
        self.lo == -INF && self.hi == INF
    }

    /// Every value > 0.
    pub fn positive(&self) -> bool {
        self.lo > 0.0 || (self.lo == 0.0 && self.lo_open)
    }
    /// Every value < 0.
    pub fn negative(&self) -> bool {
        self.hi < 0.0 || (self.hi == 0.0 && self.hi_open)
    }
    pub fn nonneg(&self) -> bool {
        self.lo >= 0.0
    }
    pub fn nonpos(&self) -> bool {
        self.hi <= 0.0
    }
    pub fn excludes_zero(&self) -> bool {
        self.positive() || self.negative()
    }

    pub fn hull(a: Iv, b: Iv) -> Iv {
        let (lo, lo_open) = if a.lo < b.lo {
            (a.lo, a.lo_open)
        } else if b.lo < a.lo {
            (b.lo, b.lo_open)
        } else {
            (a.lo, a.lo_open && b.lo_open)
        };
        let (hi, hi_open) = if a.hi > b.hi {
            (a.hi, a.hi_open)
        } else if b.hi > a.hi {
            (b.hi, b.hi_open)
        } else {
            (a.hi, a.hi_open && b.hi_open)
        };
        Iv {
            lo,
            hi,
            lo_open,
            hi_open,
        }
    }

    /// Intersection of two enclosures of the same set (both sound, so the intersection is).
    pub fn meet(a: Iv, b: Iv) -> Iv {
        let (lo, lo_open) = if a.lo > b.lo {
            (a.lo, a.lo_open)
        } else if b.lo > a.lo {
            (b.lo, b.lo_open)
        } else {
            (a.lo, a.lo_open || b.lo_open)
        };
        let (hi, hi_open) = if a.hi < b.hi {
            (a.hi, a.hi_open)
        } else if b.hi < a.hi {
            (b.hi, b.hi_open)
        } else {
            (a.hi, a.hi_open || b.hi_open)
        };
        if lo > hi {
            // Only possible through rounding disagreements; fall back to one of them.
            return a;
        }
        Iv {
            lo,
            hi,
            lo_open,
            hi_open,
        }
    }

    pub fn neg(self) -> Iv {
        Iv {
            lo: -self.hi,
            hi: -self.lo,
            lo_open: self.hi_open,
            hi_open: self.lo_open,
        }
    }

    pub fn add(self, b: Iv) -> Iv {
        let (lo, lo_exact) = sum_down(self.lo, b.lo);
        let (hi, hi_exact) = sum_up(self.hi, b.hi);
        Iv {
            lo,
            hi,
            lo_open: self.lo_open || b.lo_open || !lo_exact,
            hi_open: self.hi_open || b.hi_open || !hi_exact,
        }
        .fix()
    }

    pub fn sub(self, b: Iv) -> Iv {
        self.add(b.neg())
    }

    pub fn mul(self, b: Iv) -> Iv {
        // Extremes of a bilinear function over a box lie at the vertices; 0 · ∞ = 0 (the ∞ is never attained,
        // the 0 may be). A vertex value is attained when both endpoints are, or when one of them is a closed 0.
        let mut lo = (INF, true);
        let mut hi = (-INF, true);
        for (x, xo) in [(self.lo, self.lo_open), (self.hi, self.hi_open)] {
            for (y, yo) in [(b.lo, b.lo_open), (b.hi, b.hi_open)] {
                let (pd, pu, exact) = prod(x, y);
                let attained = exact && ((!xo && (!yo || x == 0.0)) || (y == 0.0 && !yo));
                if pd < lo.0 {
                    lo = (pd, !attained);
                } else if pd == lo.0 && attained {
                    lo.1 = false;
                }
                if pu > hi.0 {
                    hi = (pu, !attained);
                } else if pu == hi.0 && attained {
                    hi.1 = false;
                }
            }
        }
        Iv {
            lo: lo.0,
            hi: hi.0,
            lo_open: lo.1,
            hi_open: hi.1,
        }
        .fix()
    }

    /// 1/b for b not containing 0 (the caller checks). 1/∞ = 0 (open), 1/0⁺ = +∞.
    pub fn recip(self) -> Iv {
        debug_assert!(self.excludes_zero());
        let r = |v: f64, up: bool| -> (f64, bool) {
            if v.is_infinite() {
                return (0.0, true);
            }
            if v == 0.0 {
                // Only an open 0 reaches here: 1/0⁺ = +∞ (1/0⁻ = −∞).
                return (if self.positive() { INF } else { -INF }, true);
            }
            let q = 1.0 / v;
            let exact = q.is_finite() && q.mul_add(v, -1.0) == 0.0;
            if exact {
                (q, false)
            } else {
                (if up { next_up(q) } else { next_down(q) }, true)
            }
        };
        let (lo, lo_r) = r(self.hi, false);
        let (hi, hi_r) = r(self.lo, true);
        Iv {
            lo,
            hi,
            lo_open: self.hi_open || lo_r,
            hi_open: self.lo_open || hi_r,
        }
        .fix()
    }

    pub fn div(self, b: Iv) -> Iv {
        self.mul(b.recip())
    }

    pub fn min(self, b: Iv) -> Iv {
        let (lo, lo_open) = if self.lo < b.lo {
            (self.lo, self.lo_open)
        } else if b.lo < self.lo {
            (b.lo, b.lo_open)
        } else {
            (self.lo, self.lo_open && b.lo_open)
        };
        let (hi, hi_open) = if self.hi < b.hi {
            (self.hi, self.hi_open)
        } else if b.hi < self.hi {
            (b.hi, b.hi_open)
        } else {
            (self.hi, self.hi_open && b.hi_open)
        };
        Iv {
            lo,
            hi,
            lo_open,
            hi_open,
        }
    }

    pub fn max(self, b: Iv) -> Iv {
        self.neg().min(b.neg()).neg()
    }

    /// A unary function of the language (the caller has checked the domain: log > 0, sqrt ≥ 0).
    pub fn func(self, f: Func) -> Iv {
        match f {
            // Increasing functions.
            Func::Exp
            | Func::Log
            | Func::Sqrt
            | Func::Tanh
            | Func::Sigmoid
            | Func::LogSigmoid
            | Func::Softplus
            | Func::Log1p => {
                let (lo, lo_exact) = eval_func(f, self.lo, false);
                let (hi, hi_exact) = eval_func(f, self.hi, true);
                let mut r = Iv {
                    lo,
                    hi,
                    lo_open: self.lo_open || !lo_exact || self.lo.is_infinite(),
                    hi_open: self.hi_open || !hi_exact || self.hi.is_infinite(),
                };
                // Clamp to the function's range.
                let clamp_lo = |r: &mut Iv, v: f64, open: bool| {
                    if r.lo < v {
                        r.lo = v;
                        r.lo_open = open;
                    }
                };
                let clamp_hi = |r: &mut Iv, v: f64, open: bool| {
                    if r.hi > v {
                        r.hi = v;
                        r.hi_open = open;
                    }
                };
                match f {
                    Func::Exp => clamp_lo(&mut r, 0.0, true),
                    Func::Sqrt => clamp_lo(&mut r, 0.0, false),
                    Func::Tanh => {
                        clamp_lo(&mut r, -1.0, true);
                        clamp_hi(&mut r, 1.0, true);
                    }
                    Func::Sigmoid => {
                        clamp_lo(&mut r, 0.0, true);
                        clamp_hi(&mut r, 1.0, true);
                    }
                    // log σ(u) < min(u, 0) and softplus(u) > max(u, 0) for finite u.
                    Func::LogSigmoid => {
                        let b = self.hi.min(0.0);
                        clamp_hi(&mut r, b, true);
                    }
                    Func::Softplus => {
                        let b = self.lo.max(0.0);
                        clamp_lo(&mut r, b, true);
                    }
                    Func::Log | Func::Log1p => {}
                }
                if r.lo > r.hi {
                    // Cannot happen for a non-empty input; be safe.
                    return Iv::ENTIRE;
                }
                r.fix()
            }
        }
    }

    /// `powf(a, p)` for a constant `p` (the caller has checked the domain).
    pub fn powf(self, p: f64) -> Iv {
        if p == 0.0 {
            return Iv::point(1.0);
        }
        let is_int = p.fract() == 0.0 && p.abs() < 1e15;
        let even = is_int && (p / 2.0).fract() == 0.0;
        let ev = |v: f64, open: bool| -> Iv {
            let r = v.powf(p);
            let exact = v.is_infinite()
                || v == 0.0
                || v == 1.0
                || p == 1.0
                || (p == 2.0 && v.mul_add(v, -r) == 0.0);
            if exact {
                Iv {
                    lo: r,
                    hi: r,
                    lo_open: open,
                    hi_open: open,
                }
            } else {
                Iv {
                    lo: ulps_down(r, 4),
                    hi: ulps_up(r, 4),
                    lo_open: true,
                    hi_open: true,
                }
            }
        };
        // On an interval not containing 0 in its interior, x^p is monotone: the hull of the endpoint values.
        let mut r = Iv::hull(ev(self.lo, self.lo_open), ev(self.hi, self.hi_open));
        if self.lo < 0.0 && self.hi > 0.0 && even && p > 0.0 {
            r = Iv::hull(r, Iv::point(0.0));
        }
        if even || !is_int {
            // x^p ≥ 0 here (non-integer p needs x ≥ 0).
            if r.lo < 0.0 {
                r.lo = 0.0;
                r.lo_open = false;
            }
        }
        r.fix()
    }
}

/// Directed sum: returns (rounded value, exact).
fn sum_down(a: f64, b: f64) -> (f64, bool) {
    let s = a + b;
    if s.is_infinite() || a.is_infinite() || b.is_infinite() {
        return (s, true); // fix() handles a finite sum overflowed to +∞ in a lower bound
    }
    let err = two_sum_err(a, b, s);
    if err < 0.0 {
        (next_down(s), false)
    } else {
        (s, err == 0.0)
    }
}
fn sum_up(a: f64, b: f64) -> (f64, bool) {
    let s = a + b;
    if s.is_infinite() || a.is_infinite() || b.is_infinite() {
        return (s, true);
    }
    let err = two_sum_err(a, b, s);
    if err > 0.0 {
        (next_up(s), false)
    } else {
        (s, err == 0.0)
    }
}
/// Knuth's TwoSum: the exact error a + b − s.
fn two_sum_err(a: f64, b: f64, s: f64) -> f64 {
    let bb = s - a;
    let aa = s - bb;
    (a - aa) + (b - bb)
}

/// Product with 0 · ∞ = 0: (rounded down, rounded up, exact).
fn prod(x: f64, y: f64) -> (f64, f64, bool) {
    if x == 0.0 || y == 0.0 {
        return (0.0, 0.0, true);
    }
    let p = x * y;
    if x.is_infinite() || y.is_infinite() {
        return (p, p, true);
    }
    if p.is_infinite() {
        // Overflow of finite operands: the true value is finite.
        return if p > 0.0 {
            (f64::MAX, INF, false)
        } else {
            (-INF, -f64::MAX, false)
        };
    }
    let err = x.mul_add(y, -p);
    if err == 0.0 && !(p == 0.0) {
        (p, p, true)
    } else if p == 0.0 {
        // Underflow to 0 of a nonzero product.
        (next_down(0.0), next_up(0.0), false)
    } else if err > 0.0 {
        (p, next_up(p), false)
    } else {
        (next_down(p), p, false)
    }
}

/// f(v) rounded in the direction `up`; `v` may be ±∞ (then the exact limit). Returns (value, exact).
fn eval_func(f: Func, v: f64, up: bool) -> (f64, bool) {
    let exact_val = match (f, v) {
        (_, v) if v.is_infinite() => Some(match f {
            Func::Exp
            | Func::Sigmoid
            | Func::Softplus
            | Func::Log
            | Func::Sqrt
            | Func::Tanh
            | Func::LogSigmoid
            | Func::Log1p => f.eval(v),
        }),
        (Func::Exp, 0.0) => Some(1.0),
        (Func::Log, 1.0) => Some(0.0),
        (Func::Log, 0.0) => Some(-INF),
        (Func::Log1p, 0.0) => Some(0.0),
        (Func::Log1p, -1.0) => Some(-INF),
        (Func::Tanh, 0.0) | (Func::Sqrt, 0.0) => Some(0.0),
        (Func::Sigmoid, 0.0) => Some(0.5),
        (Func::Sqrt, v) => {
            let r = v.sqrt();
            (r.mul_add(r, -v) == 0.0).then_some(r)
        }
        _ => None,
    };
    if let Some(r) = exact_val {
        return (r, true);
    }
    let r = match f {
        Func::Sigmoid => sigmoid(v),
        Func::LogSigmoid => log_sigmoid(v),
        Func::Softplus => softplus(v),
        _ => f.eval(v),
    };
    (if up { ulps_up(r, 4) } else { ulps_down(r, 4) }, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sigmoid_is_open_positive() {
        let s = Iv::ENTIRE.func(Func::Sigmoid);
        assert_eq!((s.lo, s.hi, s.lo_open, s.hi_open), (0.0, 1.0, true, true));
        assert!(s.positive());
        let ls = Iv::ENTIRE.func(Func::LogSigmoid);
        assert_eq!((ls.lo, ls.hi, ls.hi_open), (-INF, 0.0, true));
    }

    #[test]
    fn products() {
        // (−∞, 0) · (0, ∞) = (−∞, 0)
        let a = Iv::ENTIRE.func(Func::Softplus).neg();
        let b = Iv::ENTIRE.func(Func::Exp);
        let p = a.mul(b);
        assert_eq!((p.lo, p.hi, p.hi_open), (-INF, 0.0, true));
        // [0, 1] · (0, 1) has a closed 0.
        let c = Iv::closed(0.0, 1.0).mul(Iv::ENTIRE.func(Func::Sigmoid));
        assert!(!c.lo_open && c.lo == 0.0);
        // [1, 2] · (0, 1) is positive.
        assert!(Iv::closed(1.0, 2.0)
            .mul(Iv::ENTIRE.func(Func::Sigmoid))
            .positive());
        // Inexact products round outward.
        let t = Iv::point(0.1).mul(Iv::point(3.0));
        assert!(t.lo <= 0.1 * 3.0 && t.hi >= 0.1 * 3.0 && t.lo < t.hi);
    }

    #[test]
    fn sums_and_division() {
        let a = Iv::point(0.1).add(Iv::point(0.2));
        assert!(a.lo < a.hi && a.lo_open && a.hi_open);
        let e = Iv::point(0.5).add(Iv::point(0.25));
        assert_eq!((e.lo, e.hi, e.lo_open), (0.75, 0.75, false));
        let d = Iv::ENTIRE.func(Func::LogSigmoid).div(Iv::point(16.0));
        assert_eq!((d.lo, d.hi, d.hi_open), (-INF, 0.0, true));
        let r = Iv::ENTIRE.func(Func::Sigmoid).recip();
        assert_eq!((r.lo, r.hi, r.lo_open), (1.0, INF, true));
    }

    #[test]
    fn functions_at_infinity_are_limits() {
        let e = Iv::closed(3.0, INF).func(Func::Sigmoid);
        assert!(e.hi == 1.0 && e.hi_open && e.lo > 0.9);
        let t = Iv::closed(-INF, 0.0).func(Func::Exp);
        assert_eq!((t.lo, t.hi, t.lo_open, t.hi_open), (0.0, 1.0, true, false));
    }

    #[test]
    fn powers() {
        assert_eq!(
            Iv::closed(-2.0, 3.0).powf(2.0),
            Iv {
                lo: 0.0,
                hi: 9.0,
                lo_open: false,
                hi_open: false
            }
        );
        let c = Iv::closed(-2.0, -1.0).powf(3.0);
        assert!(c.lo <= -8.0 && c.lo > -8.001 && c.hi >= -1.0 && c.hi < -0.999);
        let s = Iv::closed(1.0, 4.0).powf(0.5);
        assert!(s.lo <= 1.0 && s.hi >= 2.0);
    }
}
