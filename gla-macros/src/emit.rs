//! Emitters: the expression DAG → straight-line Rust (f64) and CUDA C (f32) with common subexpressions computed
//! once. Both use the numerically stable forms:
//! log σ(u) = min(u, 0) − log1p(exp(−|u|)), softplus(u) = max(u, 0) + log1p(exp(−|u|)),
//! σ(u) = 1/(1 + e) for u ≥ 0 and e/(1 + e) otherwise, with e = exp(−|u|).

use crate::expr::{Expr, Func, Op};
use proc_macro2::{Ident, Literal, Span, TokenStream};
use quote::{format_ident, quote};
use std::collections::HashMap;
use std::fmt::Write as _;

/// Non-leaf nodes of `roots` in evaluation order, each once (structural equality).
pub struct Schedule {
    pub temps: Vec<Expr>,
    index: HashMap<Expr, usize>,
    /// σ(−u) is emitted from u directly (CUDA): do not compute −u for it.
    fuse_sigmoid_neg: bool,
}

impl Schedule {
    pub fn new(roots: &[Expr]) -> Self {
        Self::with(roots, false)
    }
    pub fn with(roots: &[Expr], fuse_sigmoid_neg: bool) -> Self {
        let mut s = Schedule {
            temps: Vec::new(),
            index: HashMap::new(),
            fuse_sigmoid_neg,
        };
        for r in roots {
            s.visit(r);
        }
        s
    }
    fn visit(&mut self, e: &Expr) {
        if e.args().is_empty() || self.index.contains_key(e) {
            return;
        }
        if self.fuse_sigmoid_neg && e.op() == Op::F(Func::Sigmoid) && e.arg(0).op() == Op::Neg {
            self.visit(e.arg(0).arg(0));
        } else {
            for a in e.args() {
                self.visit(a);
            }
        }
        self.index.insert(e.clone(), self.temps.len());
        self.temps.push(e.clone());
    }
    fn temp(&self, e: &Expr) -> Option<usize> {
        self.index.get(e).copied()
    }
}

// ---------------------------------------------------------------------------------------------------------
// Rust (f64), through ::gla::__private::math
// ---------------------------------------------------------------------------------------------------------

/// Names of the Rust variables: the input and the parameters.
pub struct RustVars {
    pub input: Ident,
    pub params: Vec<Ident>,
}

pub fn rust_const(v: f64) -> TokenStream {
    let lit = Literal::f64_suffixed(v.abs());
    if v.is_sign_negative() {
        quote!((-#lit))
    } else {
        quote!(#lit)
    }
}

fn rust_operand(s: &Schedule, vars: &RustVars, e: &Expr) -> TokenStream {
    match e.op() {
        Op::Const(v) => rust_const(v),
        Op::Var(0) => {
            let i = &vars.input;
            quote!(#i)
        }
        Op::Var(k) => {
            let p = &vars.params[k - 1];
            quote!(#p)
        }
        _ => {
            let t = format_ident!("__t{}", s.temp(e).expect("scheduled"));
            quote!(#t)
        }
    }
}

/// `let` statements for every temporary, then the root expressions' operands.
pub fn rust_block(roots: &[Expr], vars: &RustVars) -> (TokenStream, Vec<TokenStream>) {
    let s = Schedule::new(roots);
    let m = quote!(::gla::__private::math);
    let mut stmts = TokenStream::new();
    for (i, e) in s.temps.iter().enumerate() {
        let a: Vec<TokenStream> = e.args().iter().map(|a| rust_operand(&s, vars, a)).collect();
        let value = match e.op() {
            Op::Neg => quote!(-#(#a)*),
            Op::Add => {
                let (x, y) = (&a[0], &a[1]);
                quote!(#x + #y)
            }
            Op::Sub => {
                let (x, y) = (&a[0], &a[1]);
                quote!(#x - #y)
            }
            Op::Mul => {
                let (x, y) = (&a[0], &a[1]);
                quote!(#x * #y)
            }
            Op::Div => {
                let (x, y) = (&a[0], &a[1]);
                quote!(#x / #y)
            }
            Op::F(f) => {
                let name = Ident::new(f.name(), Span::call_site());
                let x = &a[0];
                quote!(#m::#name(#x))
            }
            Op::Powf(p) => {
                let x = &a[0];
                let p = rust_const(p);
                quote!(#m::powf(#x, #p))
            }
            Op::Min => {
                let (x, y) = (&a[0], &a[1]);
                quote!(#m::min(#x, #y))
            }
            Op::Max => {
                let (x, y) = (&a[0], &a[1]);
                quote!(#m::max(#x, #y))
            }
            Op::SelectLe => {
                let (x, y, c, d) = (&a[0], &a[1], &a[2], &a[3]);
                quote!(if #x <= #y { #c } else { #d })
            }
            Op::Const(_) | Op::Var(_) => unreachable!("leaves are not scheduled"),
        };
        let t = format_ident!("__t{}", i);
        stmts.extend(quote!(let #t: f64 = #value;));
    }
    let outs = roots.iter().map(|r| rust_operand(&s, vars, r)).collect();
    (stmts, outs)
}

// ---------------------------------------------------------------------------------------------------------
// CUDA C (f32)
// ---------------------------------------------------------------------------------------------------------

/// A C float literal: the value rounded to f32, shortest round-trip digits, `f` suffix.
pub fn c_float(v: f64) -> String {
    let f = v as f32;
    let s = format!("{:?}", f.abs());
    let s = if s.contains(['.', 'e']) {
        s
    } else {
        format!("{s}.0")
    };
    // `1e-5` needs a dot or exponent to be a float literal: Debug gives `1e-5`, which C accepts as a double
    // literal with exponent; the `f` suffix makes it float.
    if f.is_sign_negative() {
        format!("(-{s}f)")
    } else {
        format!("{s}f")
    }
}

fn c_operand(s: &Schedule, e: &Expr) -> String {
    match e.op() {
        Op::Const(v) => c_float(v),
        Op::Var(0) => "x".into(),
        Op::Var(k) => format!("p[{}]", k - 1),
        _ => format!("t{}", s.temp(e).expect("scheduled")),
    }
}

/// Straight-line C statements (one indent level) computing `roots`; returns (statements, root operands).
pub fn cuda_block(roots: &[Expr]) -> (String, Vec<String>) {
    let s = Schedule::with(roots, true);
    let mut out = String::new();
    // exp(−|u|) per operand u, shared by σ(u), σ(−u), log σ(u) and softplus(u).
    let mut e_of: HashMap<String, String> = HashMap::new();
    let mut exp_neg_abs = |out: &mut String, u: &str, i: usize| -> String {
        e_of.entry(u.to_string())
            .or_insert_with(|| {
                let _ = writeln!(out, "    const float e{i} = gla_exp(-fabsf({u}));");
                format!("e{i}")
            })
            .clone()
    };
    for (i, e) in s.temps.iter().enumerate() {
        let fused = e.op() == Op::F(Func::Sigmoid) && e.arg(0).op() == Op::Neg;
        let a: Vec<String> = if fused {
            vec![]
        } else {
            e.args().iter().map(|a| c_operand(&s, a)).collect()
        };
        let t = format!("t{i}");
        let value = match e.op() {
            Op::Neg => format!("-{}", a[0]),
            Op::Add => format!("{} + {}", a[0], a[1]),
            Op::Sub => format!("{} - {}", a[0], a[1]),
            Op::Mul => format!("{} * {}", a[0], a[1]),
            // Division by a power-of-two constant is an exact multiplication; any other goes through gla_div
            // (IEEE in f32 kernels, the fast reciprocal in bf16/f16 kernels; see the writer's element section).
            Op::Div => match e.arg(1).op() {
                Op::Const(c) if c != 0.0 && c.is_finite() && (c.abs().log2().fract() == 0.0) => {
                    format!("{} * {}", a[0], c_float(1.0 / c))
                }
                _ => format!("gla_div({}, {})", a[0], a[1]),
            },
            Op::F(Func::Exp) => format!("gla_exp({})", a[0]),
            Op::F(Func::Log) => format!("gla_log({})", a[0]),
            Op::F(Func::Log1p) => format!("gla_log1p({})", a[0]),
            Op::F(Func::Sqrt) => format!("sqrtf({})", a[0]),
            Op::F(Func::Tanh) => format!("tanhf({})", a[0]),
            Op::F(Func::LogSigmoid) => {
                let en = exp_neg_abs(&mut out, &a[0], i);
                format!("fminf({}, 0.0f) - gla_log1p_unit({en})", a[0])
            }
            Op::F(Func::Softplus) => {
                let en = exp_neg_abs(&mut out, &a[0], i);
                format!("fmaxf({}, 0.0f) + gla_log1p_unit({en})", a[0])
            }
            Op::F(Func::Sigmoid) => {
                // σ(−u) from u itself: same exp(−|u|), branches swapped.
                let (u, flip) = if fused {
                    (c_operand(&s, e.arg(0).arg(0)), true)
                } else {
                    (a[0].clone(), false)
                };
                let en = exp_neg_abs(&mut out, &u, i);
                let (pos, negv) = (
                    format!("gla_rcp(1.0f + {en})"),
                    format!("{en} * gla_rcp(1.0f + {en})"),
                );
                let (pos, negv) = if flip { (negv, pos) } else { (pos, negv) };
                format!("{u} >= 0.0f ? {pos} : {negv}")
            }
            Op::Powf(2.0) => format!("{0} * {0}", a[0]),
            Op::Powf(0.5) => format!("sqrtf({})", a[0]),
            Op::Powf(p) => format!("powf({}, {})", a[0], c_float(p)),
            Op::Min => format!("fminf({}, {})", a[0], a[1]),
            Op::Max => format!("fmaxf({}, {})", a[0], a[1]),
            Op::SelectLe => format!("{} <= {} ? {} : {}", a[0], a[1], a[2], a[3]),
            Op::Const(_) | Op::Var(_) => unreachable!("leaves are not scheduled"),
        };
        let _ = writeln!(out, "    const float {t} = {value};");
    }
    let outs = roots.iter().map(|r| c_operand(&s, r)).collect();
    (out, outs)
}

/// One term of `acc + k·f` with the constant factor k pushed down to where it folds into an operation that is
/// there anyway: a constant (`k·c`), a multiplication by a constant (`k·c·a`), and the log family, whose natural
/// logarithm becomes log2 with the factor k·ln 2 (log2 e · ln 2 = 1: the gate in log2 units needs no multiply).
/// Every term is then one `fmaf` into the running sum, so `acc + log2(e)·f(x)` costs no separate scaling and no
/// separate addition.
#[derive(Clone, Debug, PartialEq)]
enum Term {
    /// `acc + k` (a constant term).
    Const(f64),
    /// `fmaf(leaf, k, acc)`.
    Leaf(Expr, f64),
    /// log σ(u) · k = k·min(u, 0) − k·ln2 · log2(1 + exp(−|u|)).
    LogSigmoid(Expr, f64),
    /// softplus(u) · k = k·max(u, 0) + k·ln2 · log2(1 + exp(−|u|)).
    Softplus(Expr, f64),
    /// log(u) · k = k·ln2 · log2(u).
    Log(Expr, f64),
}

/// The terms of k·e, in evaluation order.
fn push_scale(e: &Expr, k: f64, out: &mut Vec<Term>) {
    let c = |i: usize| e.arg(i).as_const().filter(|c| c.is_finite());
    match e.op() {
        Op::Const(v) => out.push(Term::Const(k * v)),
        Op::Neg => push_scale(e.arg(0), -k, out),
        Op::Add => {
            push_scale(e.arg(0), k, out);
            push_scale(e.arg(1), k, out);
        }
        Op::Sub => {
            push_scale(e.arg(0), k, out);
            push_scale(e.arg(1), -k, out);
        }
        Op::Mul if c(1).is_some() => push_scale(e.arg(0), k * c(1).unwrap(), out),
        Op::Mul if c(0).is_some() => push_scale(e.arg(1), k * c(0).unwrap(), out),
        Op::Div if c(1).is_some_and(|c| c != 0.0) => push_scale(e.arg(0), k / c(1).unwrap(), out),
        Op::F(Func::LogSigmoid) => out.push(Term::LogSigmoid(e.arg(0).clone(), k)),
        Op::F(Func::Softplus) => out.push(Term::Softplus(e.arg(0).clone(), k)),
        Op::F(Func::Log) => out.push(Term::Log(e.arg(0).clone(), k)),
        _ => out.push(Term::Leaf(e.clone(), k)),
    }
}

/// The terms of log2(e) · f.
fn log2_terms(f: &Expr) -> Vec<Term> {
    let mut t = Vec::new();
    push_scale(f, std::f64::consts::LOG2_E, &mut t);
    t
}

/// `acc + log2(e)·f(x)` evaluated term by term in f64 (tests: the rewrite is the identity).
#[cfg(test)]
fn eval_log2_terms(terms: &[Term], vars: &[f64], acc: f64) -> f64 {
    let ln2 = std::f64::consts::LN_2;
    terms.iter().fold(acc, |acc, t| match t {
        Term::Const(k) => acc + k,
        Term::Leaf(l, k) => acc + l.eval(vars) * k,
        Term::LogSigmoid(u, k) => {
            let u = u.eval(vars);
            acc + k * u.min(0.0) - k * ln2 * (1.0 + (-u.abs()).exp()).log2()
        }
        Term::Softplus(u, k) => {
            let u = u.eval(vars);
            acc + k * u.max(0.0) + k * ln2 * (1.0 + (-u.abs()).exp()).log2()
        }
        Term::Log(u, k) => acc + k * ln2 * u.eval(vars).log2(),
    })
}

/// The body of `{id}_log2_acc`: statements, then the C expression of `acc + log2(e)·f(x)` (before the clamp).
fn cuda_log2_acc(f: &Expr) -> (String, String) {
    let terms = log2_terms(f);
    let leaves: Vec<Expr> = terms
        .iter()
        .filter_map(|t| match t {
            Term::Const(_) => None,
            Term::Leaf(l, _) | Term::LogSigmoid(l, _) | Term::Softplus(l, _) | Term::Log(l, _) => {
                Some(l.clone())
            }
        })
        .collect();
    let (mut body, outs) = cuda_block(&leaves);
    let mut outs = outs.into_iter(); // the leaves' operands, in the terms' order
    let ln2 = std::f64::consts::LN_2;
    let mut acc = "acc".to_string();
    for (i, t) in terms.iter().enumerate() {
        let mut leaf = || outs.next().expect("an operand for every non-constant term");
        acc = match t {
            Term::Const(k) => format!("({acc} + {})", c_float(*k)),
            Term::Leaf(_, k) => format!("fmaf({}, {}, {acc})", leaf(), c_float(*k)),
            Term::Log(_, k) => format!("fmaf(gla_lg2({}), {}, {acc})", leaf(), c_float(k * ln2)),
            Term::LogSigmoid(_, k) | Term::Softplus(_, k) => {
                let u = leaf();
                let _ = writeln!(
                    body,
                    "    const float l{i} = gla_log2_1p_unit(gla_exp(-fabsf({u})));"
                );
                let (branch, sign) = if matches!(t, Term::LogSigmoid(..)) {
                    ("fminf", -1.0)
                } else {
                    ("fmaxf", 1.0)
                };
                format!(
                    "fmaf(l{i}, {}, fmaf({branch}({u}, 0.0f), {}, {acc}))",
                    c_float(sign * k * ln2),
                    c_float(*k)
                )
            }
        };
    }
    (body, acc)
}

/// The four device functions of a gate.
pub struct CudaGate<'a> {
    pub ident: &'a str,
    pub header: &'a str,
    pub f: &'a Expr,
    pub dx: &'a Expr,
    pub dp: &'a [Expr],
}

pub fn cuda_source(g: &CudaGate<'_>) -> String {
    let mut src = String::new();
    src.push_str(g.header);
    let uses = |roots: &[Expr], v: usize| roots.iter().any(|r| r.uses_var(v));
    let uses_p = |roots: &[Expr]| roots.iter().any(|r| r.max_var() >= 1);
    let voids = |roots: &[Expr], extra: &str| {
        let mut s = String::new();
        if !uses(roots, 0) {
            s.push_str("    (void)x;\n");
        }
        if !uses_p(roots) {
            s.push_str("    (void)p;\n");
        }
        s.push_str(extra);
        s
    };
    let id = g.ident;
    // f
    let roots = [g.f.clone()];
    let (body, outs) = cuda_block(&roots);
    let _ = write!(
        src,
        "__device__ __forceinline__ float {id}(float x, const float* p) {{\n{}{body}    \
         // log alpha <= 0 is proved over the reals; f32 rounding near 0 must not lift it above 0 (NaN passes).\n    \
         return {o} > 0.0f ? 0.0f : {o};\n}}\n\n",
        voids(&roots, ""),
        o = outs[0]
    );
    // acc + log2 α: the kernels' Γ in log2 units, the scale folded into the gate (see `Term`)
    let (body, sum) = cuda_log2_acc(g.f);
    let roots = [g.f.clone()];
    let _ = write!(
        src,
        "// acc + log2(e) * log alpha: the running sum of the kernels' Gamma (log2 units); never above acc (NaN passes).\n\
         __device__ __forceinline__ float {id}_log2_acc(float x, const float* p, float acc) {{\n{}{body}    \
         return gla_min_nan({sum}, acc);\n}}\n\n",
        voids(&roots, "")
    );
    // dx
    let roots = [g.dx.clone()];
    let (body, outs) = cuda_block(&roots);
    let _ = write!(
        src,
        "__device__ __forceinline__ float {id}_dx(float x, const float* p) {{\n{}{body}    return {};\n}}\n\n",
        voids(&roots, ""),
        outs[0]
    );
    // dp
    let (body, outs) = cuda_block(g.dp);
    let extra = if g.dp.is_empty() {
        "    (void)dp;\n"
    } else {
        ""
    };
    let mut stores = String::new();
    for (k, o) in outs.iter().enumerate() {
        let _ = writeln!(stores, "    dp[{k}] = {o};");
    }
    let _ = write!(
        src,
        "__device__ __forceinline__ void {id}_dp(float x, const float* p, float* dp) {{\n{}{body}{stores}}}\n",
        voids(g.dp, extra)
    );
    src
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diff::tests::{f, p, raw as node, x, Rng};
    use crate::expr::num;

    #[test]
    fn c_literals() {
        assert_eq!(c_float(16.0), "16.0f");
        assert_eq!(c_float(0.1), "0.1f");
        assert_eq!(c_float(-0.5), "(-0.5f)");
        assert_eq!(c_float(1e-5), "1e-5f");
        assert_eq!(c_float(std::f64::consts::LN_2), "0.6931472f");
    }

    /// The built-in gates' expressions (and a few shapes the pushdown walks through: constants, subtraction, a
    /// product with the constant first).
    fn gate_exprs() -> Vec<(Expr, usize)> {
        let one = || num(1.0);
        vec![
            (node(Op::Div, vec![f(Func::LogSigmoid, x()), num(16.0)]), 1),
            (
                node(
                    Op::Mul,
                    vec![
                        node(Op::Neg, vec![f(Func::Softplus, x())]),
                        f(Func::Exp, p(0)),
                    ],
                ),
                2,
            ),
            (f(Func::LogSigmoid, x()), 1),
            (
                f(
                    Func::Log,
                    node(
                        Op::Add,
                        vec![
                            p(0),
                            node(
                                Op::Mul,
                                vec![node(Op::Sub, vec![one(), p(0)]), f(Func::Sigmoid, x())],
                            ),
                        ],
                    ),
                ),
                2,
            ),
            (node(Op::Neg, vec![f(Func::Exp, x())]), 1),
            (
                node(
                    Op::Sub,
                    vec![
                        node(Op::Mul, vec![num(-0.25), f(Func::Softplus, x())]),
                        num(0.5),
                    ],
                ),
                1,
            ),
            (
                node(
                    Op::Mul,
                    vec![
                        num(3.0),
                        node(
                            Op::Sub,
                            vec![f(Func::LogSigmoid, x()), node(Op::Mul, vec![x(), x()])],
                        ),
                    ],
                ),
                1,
            ),
        ]
    }

    /// acc + log2(e)·f by the pushed-down terms equals the direct sum, at many points (f64).
    #[test]
    fn log2_terms_are_the_scaled_gate() {
        let mut rng = Rng::new(20_261_202);
        for (e, nv) in gate_exprs() {
            let terms = log2_terms(&e);
            for _ in 0..500 {
                let vars: Vec<f64> = (0..nv)
                    .map(|v| {
                        if v == 0 {
                            rng.range(-20.0, 20.0)
                        } else {
                            rng.next_f64()
                        }
                    })
                    .collect();
                let acc = rng.range(-10.0, 0.0);
                let want = acc + std::f64::consts::LOG2_E * e.eval(&vars);
                let got = eval_log2_terms(&terms, &vars, acc);
                assert!(
                    (got - want).abs() <= 1e-12 * (1.0 + want.abs()),
                    "{e:?} at {vars:?}: {got} vs {want}"
                );
            }
        }
    }

    /// GLA's gate folds completely: no multiply by log2 e or ln 2 is left, two fmaf into the running sum.
    #[test]
    fn log2_acc_of_gla_folds_the_constants() {
        let (body, sum) = cuda_log2_acc(&node(Op::Div, vec![f(Func::LogSigmoid, x()), num(16.0)]));
        assert_eq!(
            body,
            "    const float l0 = gla_log2_1p_unit(gla_exp(-fabsf(x)));\n"
        );
        assert_eq!(
            sum,
            "fmaf(l0, (-0.0625f), fmaf(fminf(x, 0.0f), 0.09016844f, acc))"
        );
        // Mamba-2: the product is a leaf (no constant factor); log2 e goes into the one fmaf.
        let (_, sum) = cuda_log2_acc(&node(
            Op::Mul,
            vec![
                node(Op::Neg, vec![f(Func::Softplus, x())]),
                f(Func::Exp, p(0)),
            ],
        ));
        assert!(
            sum.starts_with("fmaf(t") && sum.ends_with(", 1.442695f, acc)"),
            "{sum}"
        );
    }
}
