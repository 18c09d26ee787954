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
        let mut s = Schedule { temps: Vec::new(), index: HashMap::new(), fuse_sigmoid_neg };
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
    let s = if s.contains(['.', 'e']) { s } else { format!("{s}.0") };
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
        let a: Vec<String> = if fused { vec![] } else { e.args().iter().map(|a| c_operand(&s, a)).collect() };
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
                let (u, flip) = if fused { (c_operand(&s, e.arg(0).arg(0)), true) } else { (a[0].clone(), false) };
                let en = exp_neg_abs(&mut out, &u, i);
                let (pos, negv) = (format!("gla_rcp(1.0f + {en})"), format!("{en} * gla_rcp(1.0f + {en})"));
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

/// The three device functions of a gate.
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
    let extra = if g.dp.is_empty() { "    (void)dp;\n" } else { "" };
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

    #[test]
    fn c_literals() {
        assert_eq!(c_float(16.0), "16.0f");
        assert_eq!(c_float(0.1), "0.1f");
        assert_eq!(c_float(-0.5), "(-0.5f)");
        assert_eq!(c_float(1e-5), "1e-5f");
        assert_eq!(c_float(std::f64::consts::LN_2), "0.6931472f");
    }
}
