//! Symbolic differentiation, simplified as it is built (constant folding and the 0/1 identities of the smart
//! constructors in [`crate::expr`]). Derivatives reuse the nodes of the expression they differentiate
//! (`d exp(u) = exp(u) · du` shares `exp(u)`), so that the emitters' common-subexpression elimination computes
//! each function once per device function.

use crate::expr::*;
use std::collections::HashMap;

/// ∂e/∂(variable `v`).
pub fn diff(e: &Expr, v: usize) -> Expr {
    let mut memo = HashMap::new();
    d(e, v, &mut memo)
}

fn d(e: &Expr, v: usize, memo: &mut HashMap<*const Node, Expr>) -> Expr {
    if let Some(r) = memo.get(&e.id()) {
        return r.clone();
    }
    if !e.uses_var(v) {
        return num(0.0);
    }
    let a = |i: usize| e.arg(i).clone();
    let r = match e.op() {
        Op::Const(_) => num(0.0),
        Op::Var(i) => num(if i == v { 1.0 } else { 0.0 }),
        Op::Neg => neg(d(e.arg(0), v, memo)),
        Op::Add => {
            let (da, db) = (d(e.arg(0), v, memo), d(e.arg(1), v, memo));
            add(da, db)
        }
        Op::Sub => {
            let (da, db) = (d(e.arg(0), v, memo), d(e.arg(1), v, memo));
            sub(da, db)
        }
        Op::Mul => {
            let (da, db) = (d(e.arg(0), v, memo), d(e.arg(1), v, memo));
            add(mul(da, a(1)), mul(a(0), db))
        }
        Op::Div => {
            let (da, db) = (d(e.arg(0), v, memo), d(e.arg(1), v, memo));
            if db.is_const(0.0) {
                div(da, a(1))
            } else {
                // (a/b)' = a'/b − (a/b)·b'/b, written with the quotient node itself so that it is shared.
                sub(div(da, a(1)), div(mul(e.clone(), db), a(1)))
            }
        }
        Op::F(f) => {
            let du = d(e.arg(0), v, memo);
            let u = a(0);
            let outer = match f {
                Func::Exp => e.clone(),
                Func::Log => return memo_put(memo, e, div(du, u)),
                Func::Log1p => return memo_put(memo, e, div(du, add(num(1.0), u))),
                Func::Sqrt => return memo_put(memo, e, div(du, mul(num(2.0), e.clone()))),
                Func::Tanh => sub(num(1.0), mul(e.clone(), e.clone())),
                // σ'(u) = σ(u)·σ(−u): no cancellation in 1 − σ(u) for large u.
                Func::Sigmoid => mul(e.clone(), call(Func::Sigmoid, neg(u))),
                Func::LogSigmoid => call(Func::Sigmoid, neg(u)),
                Func::Softplus => call(Func::Sigmoid, u),
            };
            mul(outer, du)
        }
        Op::Powf(p) => {
            let du = d(e.arg(0), v, memo);
            mul(mul(num(p), powf(a(0), p - 1.0)), du)
        }
        Op::Min => {
            let (da, db) = (d(e.arg(0), v, memo), d(e.arg(1), v, memo));
            select_le(a(0), a(1), da, db)
        }
        Op::Max => {
            let (da, db) = (d(e.arg(0), v, memo), d(e.arg(1), v, memo));
            select_le(a(0), a(1), db, da)
        }
        Op::SelectLe => {
            let (dc, dd) = (d(e.arg(2), v, memo), d(e.arg(3), v, memo));
            select_le(a(0), a(1), dc, dd)
        }
    };
    memo_put(memo, e, r)
}

fn memo_put(memo: &mut HashMap<*const Node, Expr>, e: &Expr, r: Expr) -> Expr {
    memo.insert(e.id(), r.clone());
    r
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proc_macro2::Span;

    /// A tiny deterministic generator (xorshift64*), so the tests need no `rand`.
    pub struct Rng(u64);
    impl Rng {
        pub fn new(seed: u64) -> Self {
            Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
        }
        pub fn next_f64(&mut self) -> f64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
        }
        pub fn range(&mut self, lo: f64, hi: f64) -> f64 {
            lo + (hi - lo) * self.next_f64()
        }
    }

    fn s() -> Span {
        Span::call_site()
    }
    // Expression builders (also used by emit.rs's tests).
    pub(crate) fn x() -> Expr {
        Expr::var(0, s())
    }
    pub(crate) fn p(i: usize) -> Expr {
        Expr::var(1 + i, s())
    }
    pub(crate) fn f(fu: Func, a: Expr) -> Expr {
        Expr::node(Op::F(fu), vec![a], s())
    }
    pub(crate) fn raw(op: Op, a: Vec<Expr>) -> Expr {
        Expr::node(op, a, s())
    }

    /// Central finite differences vs the symbolic derivative at random points.
    fn check_fd(e: &Expr, nvars: usize, ranges: &[(f64, f64)]) {
        let mut rng = Rng::new(7);
        let ds: Vec<Expr> = (0..nvars).map(|v| diff(e, v)).collect();
        for _ in 0..200 {
            let pt: Vec<f64> = ranges.iter().map(|&(lo, hi)| rng.range(lo, hi)).collect();
            for v in 0..nvars {
                let h = 1e-5 * (1.0 + pt[v].abs());
                let (mut a, mut b) = (pt.clone(), pt.clone());
                a[v] += h;
                b[v] -= h;
                let fd = (e.eval(&a) - e.eval(&b)) / (2.0 * h);
                let sym = ds[v].eval(&pt);
                let tol = 1e-6 * (1.0 + fd.abs());
                assert!(
                    (fd - sym).abs() < tol,
                    "d/dv{v} of {e:?} at {pt:?}: fd {fd} vs symbolic {sym} ({:?})",
                    ds[v]
                );
            }
        }
    }

    #[test]
    fn finite_differences() {
        let one = || num(1.0);
        type Case = (Expr, usize, Vec<(f64, f64)>);
        let cases: Vec<Case> = vec![
            (
                raw(Op::Div, vec![f(Func::LogSigmoid, x()), num(16.0)]),
                1,
                vec![(-20.0, 20.0)],
            ),
            (
                raw(
                    Op::Mul,
                    vec![
                        raw(Op::Neg, vec![f(Func::Softplus, x())]),
                        f(Func::Exp, p(0)),
                    ],
                ),
                2,
                vec![(-20.0, 20.0), (-3.0, 3.0)],
            ),
            (
                f(
                    Func::Log,
                    raw(
                        Op::Add,
                        vec![
                            p(0),
                            raw(
                                Op::Mul,
                                vec![raw(Op::Sub, vec![one(), p(0)]), f(Func::Sigmoid, x())],
                            ),
                        ],
                    ),
                ),
                2,
                vec![(-15.0, 15.0), (0.0, 1.0)],
            ),
            (raw(Op::Neg, vec![f(Func::Exp, x())]), 1, vec![(-5.0, 5.0)]),
            (
                f(
                    Func::Log,
                    raw(
                        Op::Sub,
                        vec![
                            one(),
                            f(
                                Func::Exp,
                                raw(
                                    Op::Mul,
                                    vec![
                                        raw(Op::Sub, vec![num(-5.0), x()]),
                                        num(std::f64::consts::LN_2),
                                    ],
                                ),
                            ),
                        ],
                    ),
                ),
                1,
                vec![(0.0, 64.0)],
            ),
            (
                raw(
                    Op::Mul,
                    vec![
                        f(Func::Tanh, x()),
                        raw(Op::Powf(1.5), vec![f(Func::Sigmoid, p(0))]),
                    ],
                ),
                2,
                vec![(-4.0, 4.0), (-4.0, 4.0)],
            ),
            (
                raw(
                    Op::Div,
                    vec![
                        f(
                            Func::Sqrt,
                            raw(Op::Add, vec![raw(Op::Mul, vec![x(), x()]), one()]),
                        ),
                        raw(Op::Add, vec![f(Func::Exp, p(0)), one()]),
                    ],
                ),
                2,
                vec![(-4.0, 4.0), (-4.0, 4.0)],
            ),
            (
                raw(
                    Op::Min,
                    vec![
                        raw(Op::Max, vec![x(), num(-3.0)]),
                        raw(Op::Mul, vec![num(0.5), p(0)]),
                    ],
                ),
                2,
                vec![(-6.0, 6.0), (-6.0, 6.0)],
            ),
            (
                raw(
                    Op::Powf(-2.0),
                    vec![raw(Op::Add, vec![f(Func::Softplus, x()), one()])],
                ),
                1,
                vec![(-6.0, 6.0)],
            ),
        ];
        for (e, n, r) in &cases {
            check_fd(e, *n, r);
        }
    }

    #[test]
    fn simplified_forms() {
        let gla = raw(Op::Div, vec![f(Func::LogSigmoid, x()), num(16.0)]);
        assert_eq!(format!("{:?}", diff(&gla, 0)), "sigmoid(-x) / 16.0");
        let mamba = raw(
            Op::Mul,
            vec![
                raw(Op::Neg, vec![f(Func::Softplus, x())]),
                f(Func::Exp, p(0)),
            ],
        );
        assert_eq!(format!("{:?}", diff(&mamba, 0)), "-(sigmoid(x) * exp(p0))");
        assert_eq!(format!("{:?}", diff(&mamba, 1)), "-(softplus(x) * exp(p0))");
        assert_eq!(
            format!("{:?}", diff(&raw(Op::Neg, vec![f(Func::Exp, x())]), 0)),
            "-exp(x)"
        );
    }
}
