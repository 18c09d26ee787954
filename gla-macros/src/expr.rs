//! The gate expression language: a small, shared (`Rc`) expression tree over one input (`x`, or the head index
//! `h` of a `fixed` gate) and the learnable parameters.
//!
//! Every node keeps the span of the user's token it came from, so that the validation and proof passes can
//! point at it. Equality and hashing ignore spans (structural), which is what simplification and common
//! subexpression elimination need.

use proc_macro2::Span;
use std::fmt::{self, Write as _};
use std::hash::{Hash, Hasher};
use std::rc::Rc;

/// A unary function of the language.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Func {
    Exp,
    Log,
    Sqrt,
    Tanh,
    Sigmoid,
    LogSigmoid,
    Softplus,
    /// log(1 + a): not in the user's language; the simplifier writes `log(1 ± u)` with it (accurate for small u).
    Log1p,
}

impl Func {
    pub fn name(self) -> &'static str {
        match self {
            Func::Exp => "exp",
            Func::Log => "log",
            Func::Sqrt => "sqrt",
            Func::Tanh => "tanh",
            Func::Sigmoid => "sigmoid",
            Func::LogSigmoid => "log_sigmoid",
            Func::Softplus => "softplus",
            Func::Log1p => "log1p",
        }
    }

    /// Numerically stable f64 evaluation (the same forms the generated Rust and CUDA use).
    pub fn eval(self, a: f64) -> f64 {
        match self {
            Func::Exp => a.exp(),
            Func::Log => a.ln(),
            Func::Sqrt => a.sqrt(),
            Func::Tanh => a.tanh(),
            Func::Sigmoid => sigmoid(a),
            Func::LogSigmoid => log_sigmoid(a),
            Func::Softplus => softplus(a),
            Func::Log1p => a.ln_1p(),
        }
    }
}

/// σ(a) through exp(−|a|), so that no exp overflows.
pub fn sigmoid(a: f64) -> f64 {
    let e = (-a.abs()).exp();
    if a >= 0.0 {
        1.0 / (1.0 + e)
    } else {
        e / (1.0 + e)
    }
}

/// log σ(a) = min(a, 0) − log1p(exp(−|a|)).
pub fn log_sigmoid(a: f64) -> f64 {
    a.min(0.0) - (-a.abs()).exp().ln_1p()
}

/// softplus(a) = log(1 + e^a) = max(a, 0) + log1p(exp(−|a|)).
pub fn softplus(a: f64) -> f64 {
    a.max(0.0) + (-a.abs()).exp().ln_1p()
}

/// One operation. `Const` and `Var` are leaves.
#[derive(Clone, Copy, Debug)]
pub enum Op {
    Const(f64),
    /// Variable `i`: 0 is the input (`x` or `h`), `1 + k` is parameter `k`.
    Var(usize),
    Neg,
    Add,
    Sub,
    Mul,
    Div,
    F(Func),
    /// `powf(a, p)` with a constant exponent.
    Powf(f64),
    Min,
    Max,
    /// `if a <= b { c } else { d }` (appears in derivatives of min/max only).
    SelectLe,
}

impl PartialEq for Op {
    fn eq(&self, o: &Op) -> bool {
        use Op::*;
        match (self, o) {
            (Const(a), Const(b)) | (Powf(a), Powf(b)) => a.to_bits() == b.to_bits(),
            (Var(a), Var(b)) => a == b,
            (F(a), F(b)) => a == b,
            (Neg, Neg)
            | (Add, Add)
            | (Sub, Sub)
            | (Mul, Mul)
            | (Div, Div)
            | (Min, Min)
            | (Max, Max) => true,
            (SelectLe, SelectLe) => true,
            _ => false,
        }
    }
}
impl Eq for Op {}
impl Hash for Op {
    fn hash<H: Hasher>(&self, h: &mut H) {
        std::mem::discriminant(self).hash(h);
        match self {
            Op::Const(v) | Op::Powf(v) => v.to_bits().hash(h),
            Op::Var(i) => i.hash(h),
            Op::F(f) => f.hash(h),
            _ => {}
        }
    }
}

pub struct Node {
    pub op: Op,
    pub args: Vec<Expr>,
    pub span: Span,
}

/// A shared expression node.
#[derive(Clone)]
pub struct Expr(pub Rc<Node>);

impl PartialEq for Expr {
    fn eq(&self, o: &Expr) -> bool {
        Rc::ptr_eq(&self.0, &o.0) || (self.0.op == o.0.op && self.0.args == o.0.args)
    }
}
impl Eq for Expr {}
impl Hash for Expr {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.0.op.hash(h);
        self.0.args.len().hash(h);
        for a in &self.0.args {
            a.hash(h);
        }
    }
}

impl fmt::Debug for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<String> = (0..self.max_var() + 1)
            .map(|i| {
                if i == 0 {
                    "x".into()
                } else {
                    format!("p{}", i - 1)
                }
            })
            .collect();
        f.write_str(&self.to_text(&names))
    }
}

impl Expr {
    pub fn node(op: Op, args: Vec<Expr>, span: Span) -> Expr {
        Expr(Rc::new(Node { op, args, span }))
    }
    pub fn constant(v: f64, span: Span) -> Expr {
        Expr::node(Op::Const(v), vec![], span)
    }
    pub fn var(i: usize, span: Span) -> Expr {
        Expr::node(Op::Var(i), vec![], span)
    }
    pub fn op(&self) -> Op {
        self.0.op
    }
    pub fn args(&self) -> &[Expr] {
        &self.0.args
    }
    pub fn arg(&self, i: usize) -> &Expr {
        &self.0.args[i]
    }
    pub fn span(&self) -> Span {
        self.0.span
    }
    pub fn as_const(&self) -> Option<f64> {
        match self.0.op {
            Op::Const(v) => Some(v),
            _ => None,
        }
    }
    pub fn is_const(&self, v: f64) -> bool {
        self.as_const() == Some(v)
    }
    /// Identity of this node (for per-node tables).
    pub fn id(&self) -> *const Node {
        Rc::as_ptr(&self.0)
    }

    /// Highest variable index used (0 if none).
    pub fn max_var(&self) -> usize {
        match self.0.op {
            Op::Var(i) => i,
            _ => self.0.args.iter().map(Expr::max_var).max().unwrap_or(0),
        }
    }

    /// Whether variable `i` occurs.
    pub fn uses_var(&self, i: usize) -> bool {
        match self.0.op {
            Op::Var(j) => i == j,
            _ => self.0.args.iter().any(|a| a.uses_var(i)),
        }
    }

    /// Point evaluation in f64.
    pub fn eval(&self, vars: &[f64]) -> f64 {
        let a = |i: usize| self.0.args[i].eval(vars);
        match self.0.op {
            Op::Const(v) => v,
            Op::Var(i) => vars[i],
            Op::Neg => -a(0),
            Op::Add => a(0) + a(1),
            Op::Sub => a(0) - a(1),
            Op::Mul => a(0) * a(1),
            Op::Div => a(0) / a(1),
            Op::F(f) => f.eval(a(0)),
            Op::Powf(p) => a(0).powf(p),
            Op::Min => a(0).min(a(1)),
            Op::Max => a(0).max(a(1)),
            Op::SelectLe => {
                if a(0) <= a(1) {
                    a(2)
                } else {
                    a(3)
                }
            }
        }
    }

    /// Canonical text, with the minimum parentheses, e.g. `log(gamma + (1.0 - gamma) * sigmoid(x))`.
    pub fn to_text(&self, names: &[String]) -> String {
        let mut s = String::new();
        self.write_text(&mut s, names, 0);
        s
    }

    fn prec(&self) -> u8 {
        match self.0.op {
            Op::Add | Op::Sub => 1,
            Op::Mul | Op::Div => 2,
            Op::Neg => 3,
            Op::Const(v) if v < 0.0 || (v == 0.0 && v.is_sign_negative()) => 3,
            _ => 4,
        }
    }

    fn write_text(&self, s: &mut String, names: &[String], min_prec: u8) {
        let p = self.prec();
        let paren = p < min_prec;
        if paren {
            s.push('(');
        }
        let args = &self.0.args;
        match self.0.op {
            Op::Const(v) => s.push_str(&fmt_const(v)),
            Op::Var(i) => s.push_str(&names[i]),
            Op::Neg => {
                s.push('-');
                args[0].write_text(s, names, 4);
            }
            Op::Add | Op::Sub | Op::Mul | Op::Div => {
                let sym = match self.0.op {
                    Op::Add => "+",
                    Op::Sub => "-",
                    Op::Mul => "*",
                    _ => "/",
                };
                // Left-associative: the right operand of - and / (and, for a canonical form, of + and *)
                // needs parentheses at equal precedence.
                args[0].write_text(s, names, p);
                let _ = write!(s, " {sym} ");
                args[1].write_text(s, names, p + 1);
            }
            Op::F(f) => {
                s.push_str(f.name());
                s.push('(');
                args[0].write_text(s, names, 0);
                s.push(')');
            }
            Op::Powf(e) => {
                s.push_str("powf(");
                args[0].write_text(s, names, 0);
                let _ = write!(s, ", {})", fmt_const(e));
            }
            Op::Min | Op::Max => {
                s.push_str(if matches!(self.0.op, Op::Min) {
                    "min("
                } else {
                    "max("
                });
                args[0].write_text(s, names, 0);
                s.push_str(", ");
                args[1].write_text(s, names, 0);
                s.push(')');
            }
            Op::SelectLe => {
                s.push_str("if ");
                args[0].write_text(s, names, 0);
                s.push_str(" <= ");
                args[1].write_text(s, names, 0);
                s.push_str(" { ");
                args[2].write_text(s, names, 0);
                s.push_str(" } else { ");
                args[3].write_text(s, names, 0);
                s.push_str(" }");
            }
        }
        if paren {
            s.push(')');
        }
    }
}

/// Canonical text of a constant: the shortest round-trip form of its f64 value, e.g. `16.0`, `0.1`,
/// `0.6931471805599453`.
pub fn fmt_const(v: f64) -> String {
    format!("{v:?}")
}

// ---------------------------------------------------------------------------------------------------------
// Smart constructors: constant folding and the 0/1 identities. Used for derivatives and for the simplified
// forward expression (the user's tree itself is kept as written, for error spans and the canonical text).
// ---------------------------------------------------------------------------------------------------------

fn cs() -> Span {
    Span::call_site()
}

fn folded(v: f64) -> Option<Expr> {
    v.is_finite().then(|| Expr::constant(v, cs()))
}

pub fn num(v: f64) -> Expr {
    Expr::constant(v, cs())
}

pub fn neg(a: Expr) -> Expr {
    if let Some(c) = a.as_const() {
        return num(-c);
    }
    match a.op() {
        Op::Neg => return a.arg(0).clone(),
        // −(c·e) = (−c)·e; −(a/b) = (−a)/b when −a is simpler (a constant multiple).
        Op::Mul if a.arg(0).as_const().is_some() => {
            return mul(num(-a.arg(0).as_const().unwrap()), a.arg(1).clone())
        }
        Op::Div
            if a.arg(0).as_const().is_some()
                || (a.arg(0).op() == Op::Mul && a.arg(0).arg(0).as_const().is_some()) =>
        {
            return div(neg(a.arg(0).clone()), a.arg(1).clone())
        }
        _ => {}
    }
    Expr::node(Op::Neg, vec![a], cs())
}

pub fn add(a: Expr, b: Expr) -> Expr {
    if let (Some(x), Some(y)) = (a.as_const(), b.as_const()) {
        if let Some(e) = folded(x + y) {
            return e;
        }
    }
    if a.is_const(0.0) {
        return b;
    }
    if b.is_const(0.0) {
        return a;
    }
    if let Op::Neg = b.op() {
        return sub(a, b.arg(0).clone());
    }
    if let Op::Neg = a.op() {
        return sub(b, a.arg(0).clone());
    }
    Expr::node(Op::Add, vec![a, b], cs())
}

pub fn sub(a: Expr, b: Expr) -> Expr {
    if let (Some(x), Some(y)) = (a.as_const(), b.as_const()) {
        if let Some(e) = folded(x - y) {
            return e;
        }
    }
    if b.is_const(0.0) {
        return a;
    }
    if a.is_const(0.0) {
        return neg(b);
    }
    if let Op::Neg = b.op() {
        return add(a, b.arg(0).clone());
    }
    if a == b {
        return num(0.0);
    }
    // 1 − σ(u) = σ(−u), without the cancellation.
    if a.is_const(1.0) && b.op() == Op::F(Func::Sigmoid) {
        return call(Func::Sigmoid, neg(b.arg(0).clone()));
    }
    Expr::node(Op::Sub, vec![a, b], cs())
}

pub fn mul(a: Expr, b: Expr) -> Expr {
    if let (Some(x), Some(y)) = (a.as_const(), b.as_const()) {
        if let Some(e) = folded(x * y) {
            return e;
        }
    }
    if a.is_const(0.0) || b.is_const(0.0) {
        return num(0.0);
    }
    if a.is_const(1.0) {
        return b;
    }
    if b.is_const(1.0) {
        return a;
    }
    if a.is_const(-1.0) {
        return neg(b);
    }
    if b.is_const(-1.0) {
        return neg(a);
    }
    if let Op::Neg = a.op() {
        return neg(mul(a.arg(0).clone(), b));
    }
    if let Op::Neg = b.op() {
        return neg(mul(a, b.arg(0).clone()));
    }
    // Constants to the left, and c1 * (c2 * e) folded.
    if b.as_const().is_some() {
        return mul(b, a);
    }
    if let (Some(c1), Op::Mul) = (a.as_const(), b.op()) {
        if let Some(c2) = b.arg(0).as_const() {
            if let Some(c) = folded(c1 * c2) {
                return mul(c, b.arg(1).clone());
            }
        }
    }
    Expr::node(Op::Mul, vec![a, b], cs())
}

pub fn div(a: Expr, b: Expr) -> Expr {
    if let (Some(x), Some(y)) = (a.as_const(), b.as_const()) {
        if y != 0.0 {
            if let Some(e) = folded(x / y) {
                return e;
            }
        }
    }
    if a.is_const(0.0) {
        return num(0.0);
    }
    if b.is_const(1.0) {
        return a;
    }
    if b.is_const(-1.0) {
        return neg(a);
    }
    if let Op::Neg = a.op() {
        return neg(div(a.arg(0).clone(), b));
    }
    if let Op::Neg = b.op() {
        return neg(div(a, b.arg(0).clone()));
    }
    if a == b {
        return num(1.0);
    }
    Expr::node(Op::Div, vec![a, b], cs())
}

pub fn call(f: Func, a: Expr) -> Expr {
    if let Some(c) = a.as_const() {
        let v = f.eval(c);
        // Fold only where the value is exact or the function is not one of the transcendental ones whose
        // f32 evaluation would differ: we fold everything finite (values are f64 constants, emitted as f32).
        if let Some(e) = folded(v) {
            return e;
        }
    }
    match (f, a.op()) {
        // log(exp(u)) = u; log(sigmoid(u)) = log_sigmoid(u) (the stable form).
        (Func::Log, Op::F(Func::Exp)) => return a.arg(0).clone(),
        (Func::Log, Op::F(Func::Sigmoid)) => return call(Func::LogSigmoid, a.arg(0).clone()),
        // log(1 + u) = log1p(u), log(1 − u) = log1p(−u): no rounding of 1 ± u (RetNet's 1 − 2^(−5−h)).
        (Func::Log, Op::Add) if a.arg(0).is_const(1.0) => {
            return call(Func::Log1p, a.arg(1).clone())
        }
        (Func::Log, Op::Add) if a.arg(1).is_const(1.0) => {
            return call(Func::Log1p, a.arg(0).clone())
        }
        (Func::Log, Op::Sub) if a.arg(0).is_const(1.0) => {
            return call(Func::Log1p, neg(a.arg(1).clone()))
        }
        _ => {}
    }
    Expr::node(Op::F(f), vec![a], cs())
}

pub fn powf(a: Expr, p: f64) -> Expr {
    if p == 0.0 {
        return num(1.0);
    }
    if p == 1.0 {
        return a;
    }
    if let Some(c) = a.as_const() {
        if let Some(e) = folded(c.powf(p)) {
            return e;
        }
    }
    Expr::node(Op::Powf(p), vec![a], cs())
}

pub fn min(a: Expr, b: Expr) -> Expr {
    if let (Some(x), Some(y)) = (a.as_const(), b.as_const()) {
        return num(x.min(y));
    }
    if a == b {
        return a;
    }
    Expr::node(Op::Min, vec![a, b], cs())
}

pub fn max(a: Expr, b: Expr) -> Expr {
    if let (Some(x), Some(y)) = (a.as_const(), b.as_const()) {
        return num(x.max(y));
    }
    if a == b {
        return a;
    }
    Expr::node(Op::Max, vec![a, b], cs())
}

pub fn select_le(a: Expr, b: Expr, c: Expr, d: Expr) -> Expr {
    if c == d {
        return c;
    }
    if let (Some(x), Some(y)) = (a.as_const(), b.as_const()) {
        return if x <= y { c } else { d };
    }
    Expr::node(Op::SelectLe, vec![a, b, c, d], cs())
}

/// Rebuild `e` bottom-up through the smart constructors.
pub fn simplify(e: &Expr) -> Expr {
    let a: Vec<Expr> = e.args().iter().map(simplify).collect();
    let arg = |i: usize| a[i].clone();
    match e.op() {
        Op::Const(_) | Op::Var(_) => Expr::node(e.op(), vec![], cs()),
        Op::Neg => neg(arg(0)),
        Op::Add => add(arg(0), arg(1)),
        Op::Sub => sub(arg(0), arg(1)),
        Op::Mul => mul(arg(0), arg(1)),
        Op::Div => div(arg(0), arg(1)),
        Op::F(f) => call(f, arg(0)),
        Op::Powf(p) => powf(arg(0), p),
        Op::Min => min(arg(0), arg(1)),
        Op::Max => max(arg(0), arg(1)),
        Op::SelectLe => select_le(arg(0), arg(1), arg(2), arg(3)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn x() -> Expr {
        Expr::var(0, cs())
    }

    #[test]
    fn identities() {
        assert_eq!(add(num(0.0), x()), x());
        assert_eq!(mul(num(1.0), x()), x());
        assert_eq!(mul(x(), num(0.0)), num(0.0));
        assert_eq!(neg(neg(x())), x());
        assert_eq!(mul(num(2.0), mul(num(3.0), x())), mul(num(6.0), x()));
        assert_eq!(sub(x(), x()), num(0.0));
        assert_eq!(
            call(Func::Log, call(Func::Sigmoid, x())),
            call(Func::LogSigmoid, x())
        );
        assert_eq!(add(num(1.0), num(2.0)), num(3.0));
    }

    #[test]
    fn text() {
        let names = vec!["x".to_string(), "g".to_string()];
        let g = Expr::var(1, cs());
        let raw = |op, a: Vec<Expr>| Expr::node(op, a, cs());
        // log(g + (1 - g) * sigmoid(x))
        let e = raw(
            Op::F(Func::Log),
            vec![raw(
                Op::Add,
                vec![
                    g.clone(),
                    raw(
                        Op::Mul,
                        vec![
                            raw(Op::Sub, vec![num(1.0), g]),
                            raw(Op::F(Func::Sigmoid), vec![x()]),
                        ],
                    ),
                ],
            )],
        );
        assert_eq!(e.to_text(&names), "log(g + (1.0 - g) * sigmoid(x))");
        let e = raw(Op::Sub, vec![x(), raw(Op::Sub, vec![x(), num(0.5)])]);
        assert_eq!(e.to_text(&names), "x - (x - 0.5)");
        let e = raw(Op::Neg, vec![raw(Op::Mul, vec![x(), x()])]);
        assert_eq!(e.to_text(&names), "-(x * x)");
    }

    #[test]
    fn stable_forms() {
        assert_eq!(log_sigmoid(-1000.0), -1000.0);
        assert_eq!(softplus(1000.0), 1000.0);
        assert_eq!(sigmoid(-1000.0), 0.0);
        assert!((log_sigmoid(0.3) - (1.0 / (1.0 + (-0.3f64).exp())).ln()).abs() < 1e-15);
    }
}
