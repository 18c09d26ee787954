//! The user's fn → signature (input, parameters) and body → [`Expr`], validating as it goes. Every problem is
//! reported to the [`Ctxt`] at its token and parsing continues, so all of them are shown at once.

use crate::attr::{self, Shape};
use crate::ctxt::{did_you_mean, Ctxt};
use crate::expr::{self, Expr, Func, Op};
use proc_macro2::{Span, TokenStream};
use quote::ToTokens;
use syn::spanned::Spanned;

pub const SUPPORTED: &str = "f32 literals, + - * /, unary -, exp, log, sqrt, tanh, sigmoid, log_sigmoid, softplus, \
                             min, max, clamp, powf (constant exponent), the parameters, `let` bindings and parentheses";

pub const FUNCS: [&str; 11] = [
    "exp",
    "log",
    "sqrt",
    "tanh",
    "sigmoid",
    "log_sigmoid",
    "softplus",
    "min",
    "max",
    "clamp",
    "powf",
];

/// A learnable parameter.
pub struct Param {
    pub ident: syn::Ident,
    pub name: String,
    pub range: Option<(f64, f64)>,
}

pub struct Signature {
    /// The input's name (`x`, or `h` for a fixed gate) and its identifier.
    pub input: Option<syn::Ident>,
    pub params: Vec<Param>,
    /// Arguments whose declaration had an error (already reported): known names with no value, so that their
    /// uses in the body do not cascade into "unknown name" errors.
    pub poisoned: Vec<String>,
}

fn is_f32(ty: &syn::Type) -> bool {
    match ty {
        syn::Type::Path(p) => p.qself.is_none() && p.path.is_ident("f32"),
        syn::Type::Paren(p) => is_f32(&p.elem),
        syn::Type::Group(g) => is_f32(&g.elem),
        _ => false,
    }
}

/// Check the signature and strip the `#[param]` attributes from `func` (they are ours, not rustc's).
pub fn signature(cx: &Ctxt, func: &mut syn::ItemFn, shape: Option<Shape>) -> Signature {
    let sig = &mut func.sig;
    let name = sig.ident.to_string();
    let (want, what) = match shape {
        Some(Shape::Fixed) => ("h", "the head index (a `fixed` gate's input)"),
        _ => ("x", "the raw gate logit"),
    };
    let example = format!("fn {name}({want}: f32) -> f32");

    if let Some(t) = &sig.constness {
        cx.error_spanned_by(t, "a gate fn must be a plain fn: remove `const`");
    }
    if let Some(t) = &sig.asyncness {
        cx.error_spanned_by(t, "a gate fn must be a plain fn: remove `async`");
    }
    if let Some(t) = &sig.unsafety {
        cx.error_spanned_by(t, "a gate fn must be a plain fn: remove `unsafe`");
    }
    if let Some(a) = &sig.abi {
        cx.error_spanned_by(a, "a gate fn must be a plain fn: remove the `extern` ABI");
    }
    if !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
        cx.error_spanned_by(
            &sig.generics,
            "a gate fn cannot be generic: it computes in f32",
        );
    }
    if let Some(v) = &sig.variadic {
        cx.error_spanned_by(v, "a gate fn cannot be variadic");
    }
    if !name.is_ascii() {
        cx.error_spanned_by(
            &sig.ident,
            "gate fn names must be ASCII: they also name CUDA device functions",
        );
    } else if crate::expand::camel_case(&name) == name.trim_start_matches("r#") {
        cx.error_spanned_by(
            &sig.ident,
            format!("name the gate fn in snake_case: the generated gate type is its CamelCase (`{name}` would collide)"),
        );
    }

    match &sig.output {
        syn::ReturnType::Type(_, ty) if is_f32(ty) => {}
        syn::ReturnType::Type(_, ty) => {
            cx.error_spanned_by(ty, "a gate fn returns log α as `f32`: write `-> f32`")
        }
        syn::ReturnType::Default => cx.error_at(
            sig.paren_token.span.join(),
            format!("a gate fn returns log α as `f32`: add `-> f32` (`{example}`)"),
        ),
    }

    let mut input = None;
    let mut params = Vec::new();
    let mut poisoned = Vec::new();
    if sig.inputs.is_empty() {
        cx.error_at(
            sig.paren_token.span.join(),
            format!("a gate fn takes {what} first: `{example}`"),
        );
    }
    for (i, arg) in sig.inputs.iter_mut().enumerate() {
        let pt = match arg {
            syn::FnArg::Receiver(r) => {
                cx.error_spanned_by(&*r, "a gate is a free fn, not a method: remove `self`");
                continue;
            }
            syn::FnArg::Typed(pt) => pt,
        };
        // Take our attribute out.
        let mut param_attrs = Vec::new();
        pt.attrs.retain(|a| {
            if a.path().is_ident("param") {
                param_attrs.push(a.clone());
                false
            } else {
                true
            }
        });
        let ident = match &*pt.pat {
            syn::Pat::Ident(pi) if pi.by_ref.is_none() && pi.subpat.is_none() => {
                Some(pi.ident.clone())
            }
            other => {
                cx.error_spanned_by(
                    other,
                    "gate fn arguments must be plain names, e.g. `x: f32`",
                );
                None
            }
        };
        if !is_f32(&pt.ty) {
            cx.error_spanned_by(&pt.ty, "gate fn arguments must be `f32`");
        }
        if i == 0 {
            if let Some(a) = param_attrs.first() {
                cx.error_spanned_by(
                    a,
                    format!("the first argument is {what}, not a parameter: remove `#[param]`"),
                );
            }
            if let Some(id) = ident {
                let s = id.to_string();
                let ok = match shape {
                    Some(_) => s == want,
                    None => s == "x" || s == "h",
                };
                if !ok {
                    cx.error_spanned_by(
                        &id,
                        format!(
                            "the first argument is {what} and must be named `{want}`: `{example}`"
                        ),
                    );
                }
                input = Some(id);
            }
            continue;
        }
        if let Some(id) = &ident {
            poisoned.push(id.to_string());
        }
        if param_attrs.is_empty() {
            let n = ident
                .as_ref()
                .map(|i| i.to_string())
                .unwrap_or_else(|| "..".into());
            cx.error_spanned_by(
                &*pt,
                format!(
                    "extra argument `{n}` must be a learnable parameter: mark it `#[param] {n}: f32` or \
                     `#[param(range = lo..hi)] {n}: f32`"
                ),
            );
            continue;
        }
        if param_attrs.len() > 1 {
            cx.error_spanned_by(&param_attrs[1], "duplicate `#[param]`");
        }
        let range = attr::parse_param(cx, &param_attrs[0]);
        if let (Some(id), Ok(range), true) = (ident, range, is_f32(&pt.ty)) {
            poisoned.pop();
            let name = id.to_string().trim_start_matches("r#").to_string();
            params.push(Param {
                ident: id,
                name,
                range,
            });
        }
    }
    Signature {
        input,
        params,
        poisoned,
    }
}

/// Names in scope while converting the body.
struct Env {
    vars: Vec<(String, Option<Expr>)>,
    input: String,
    params: Vec<String>,
}

impl Env {
    fn lookup(&self, name: &str) -> Option<&Option<Expr>> {
        self.vars
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, e)| e)
    }
    fn known(&self) -> String {
        let mut v = vec![format!("`{}`", self.input)];
        v.extend(self.params.iter().map(|p| format!("`{p}`")));
        v.join(", ")
    }
}

/// The body → the log-α expression (let bindings inlined), and the tokens of its tail expression (for errors
/// about the whole expression).
pub fn body(
    cx: &Ctxt,
    block: &syn::Block,
    sig: &Signature,
    input_name: &str,
) -> Option<(Expr, TokenStream)> {
    let mut env = Env {
        vars: Vec::new(),
        input: input_name.to_string(),
        params: sig.params.iter().map(|p| p.name.clone()).collect(),
    };
    for name in &sig.poisoned {
        env.vars.push((name.clone(), None));
    }
    if let Some(id) = &sig.input {
        env.vars
            .push((id.to_string(), Some(Expr::var(0, id.span()))));
    }
    for (k, p) in sig.params.iter().enumerate() {
        env.vars
            .push((p.ident.to_string(), Some(Expr::var(1 + k, p.ident.span()))));
    }
    let n = block.stmts.len();
    if n == 0 {
        cx.error_spanned_by(
            block,
            "the body must end with the log α expression, e.g. `log_sigmoid(x) / 16.0`",
        );
        return None;
    }
    let mut ok = true;
    for (i, stmt) in block.stmts.iter().enumerate() {
        let last = i + 1 == n;
        match stmt {
            syn::Stmt::Local(local) => {
                let name = local_name(cx, local);
                let value = match &local.init {
                    None => {
                        cx.error_spanned_by(local, "a `let` binding needs a value: `let y = ...;`");
                        None
                    }
                    Some(init) => {
                        if let Some((_, d)) = &init.diverge {
                            cx.error_spanned_by(d, "`let ... else` is not supported");
                        }
                        convert(cx, &init.expr, &env)
                    }
                };
                ok &= value.is_some() && name.is_some();
                if let Some(name) = name {
                    env.vars.push((name, value));
                }
                if last {
                    cx.error_spanned_by(
                        local,
                        "the body must end with the log α expression (after the `let`s)",
                    );
                    return None;
                }
            }
            syn::Stmt::Expr(e, semi) if last => {
                if let syn::Expr::Return(r) = e {
                    cx.error_spanned_by(
                        r.return_token,
                        "`return` is not supported: end the body with the log α expression",
                    );
                    return None;
                }
                if let Some(s) = semi {
                    cx.error_spanned_by(
                        s,
                        "the body must end with the log α expression: remove this `;`",
                    );
                }
                let r = convert(cx, e, &env);
                return match (r, ok && semi.is_none()) {
                    (Some(r), true) => Some((r, e.to_token_stream())),
                    _ => None,
                };
            }
            syn::Stmt::Expr(syn::Expr::Return(r), _) => {
                cx.error_spanned_by(
                    r.return_token,
                    "`return` is not supported: end the body with the log α expression",
                );
                ok = false;
            }
            syn::Stmt::Expr(e, _) => {
                cx.error_spanned_by(e, "only `let` bindings may precede the log α expression");
                ok = false;
            }
            syn::Stmt::Item(item) => {
                cx.error_spanned_by(
                    item,
                    format!("items are not supported in a gate body; supported: {SUPPORTED}"),
                );
                ok = false;
            }
            syn::Stmt::Macro(m) => {
                cx.error_spanned_by(
                    &m.mac.path,
                    format!("macros are not supported in a gate body; supported: {SUPPORTED}"),
                );
                ok = false;
                if last {
                    return None;
                }
            }
        }
    }
    None
}

fn local_name(cx: &Ctxt, local: &syn::Local) -> Option<String> {
    let (pat, ty) = match &local.pat {
        syn::Pat::Type(pt) => (&*pt.pat, Some(&*pt.ty)),
        p => (p, None),
    };
    if let Some(ty) = ty {
        if !is_f32(ty) {
            cx.error_spanned_by(ty, "`let` bindings in a gate body are `f32`");
        }
    }
    match pat {
        syn::Pat::Ident(pi) if pi.by_ref.is_none() && pi.subpat.is_none() => {
            if let Some(m) = &pi.mutability {
                cx.error_spanned_by(
                    m,
                    "`let` bindings in a gate body cannot be `mut` (no assignments)",
                );
            }
            Some(pi.ident.to_string())
        }
        other => {
            cx.error_spanned_by(
                other,
                "`let` bindings in a gate body bind one name: `let y = ...;`",
            );
            None
        }
    }
}

/// The user's (unsimplified) tree node.
fn node(op: Op, args: Vec<Expr>, span: Span) -> Expr {
    Expr::node(op, args, span)
}

/// syn expression → [`Expr`]. On error reports and returns `None`, but still converts the sub-expressions so that
/// all errors are reported.
fn convert(cx: &Ctxt, e: &syn::Expr, env: &Env) -> Option<Expr> {
    use syn::Expr as E;
    match e {
        E::Lit(l) => literal(cx, &l.lit),
        E::Paren(p) => convert(cx, &p.expr, env),
        E::Group(g) => convert(cx, &g.expr, env),
        E::Unary(u) => {
            let a = convert(cx, &u.expr, env);
            match u.op {
                syn::UnOp::Neg(t) => Some(node(Op::Neg, vec![a?], t.span())),
                op => {
                    cx.error_spanned_by(op, format!("unsupported operator `{}`: a gate expression supports + - * / and unary -", op.to_token_stream()));
                    None
                }
            }
        }
        E::Binary(b) => {
            let l = convert(cx, &b.left, env);
            let r = convert(cx, &b.right, env);
            let op = match b.op {
                syn::BinOp::Add(_) => Op::Add,
                syn::BinOp::Sub(_) => Op::Sub,
                syn::BinOp::Mul(_) => Op::Mul,
                syn::BinOp::Div(_) => Op::Div,
                other => {
                    let sym = other.to_token_stream().to_string();
                    let hint = match other {
                        syn::BinOp::Lt(_)
                        | syn::BinOp::Le(_)
                        | syn::BinOp::Gt(_)
                        | syn::BinOp::Ge(_)
                        | syn::BinOp::Eq(_)
                        | syn::BinOp::Ne(_) => " (for a branch use min, max or clamp)",
                        syn::BinOp::Rem(_) => "",
                        _ if sym.ends_with('=') => " (a gate body has no assignments; use `let`)",
                        _ => "",
                    };
                    cx.error_spanned_by(other, format!("unsupported operator `{sym}`: a gate expression supports + - * / and unary -{hint}"));
                    return None;
                }
            };
            Some(node(op, vec![l?, r?], b.op.span()))
        }
        E::Path(p) => path(cx, p, env),
        E::Call(c) => call(cx, c, env),
        E::MethodCall(m) => {
            for a in &m.args {
                let _ = convert(cx, a, env);
            }
            let method = m.method.to_string();
            let recv = m.receiver.to_token_stream().to_string();
            let as_fn = match method.as_str() {
                "ln" => Some("log"),
                "exp" | "sqrt" | "tanh" | "min" | "max" | "clamp" | "powf" => Some(method.as_str()),
                _ => None,
            };
            let msg = match as_fn {
                Some(f) => {
                    let mut args = vec![recv];
                    args.extend(m.args.iter().map(|a| a.to_token_stream().to_string()));
                    format!(
                        "method calls are not supported: write `{f}({})`",
                        args.join(", ")
                    )
                }
                None => format!(
                    "unsupported method `.{method}()`: a gate expression supports {SUPPORTED}"
                ),
            };
            cx.error_spanned_by(&m.method, msg);
            None
        }
        E::If(i) => unsupported(
            cx,
            i.if_token,
            "`if`",
            " (for a branch use min, max or clamp)",
        ),
        E::Match(m) => unsupported(
            cx,
            m.match_token,
            "`match`",
            " (for a branch use min, max or clamp)",
        ),
        E::Cast(c) => unsupported(cx, c.as_token, "`as` casts", " (everything is f32)"),
        E::Macro(m) => unsupported(cx, &m.mac.path, "macros", ""),
        E::Block(b) => unsupported_at(
            cx,
            b.block.brace_token.span.open(),
            "nested blocks",
            " (put `let`s at the top of the body)",
        ),
        E::Return(r) => unsupported(
            cx,
            r.return_token,
            "`return`",
            " (end the body with the log α expression)",
        ),
        E::Closure(c) => unsupported(cx, c.or1_token, "closures", ""),
        E::Index(i) => unsupported_at(cx, i.bracket_token.span.join(), "indexing", ""),
        E::Field(f) => unsupported(cx, &f.member, "field access", ""),
        E::Assign(a) => unsupported(cx, a.eq_token, "assignments", " (use `let`)"),
        E::Loop(l) => unsupported(cx, l.loop_token, "loops", ""),
        E::While(w) => unsupported(cx, w.while_token, "loops", ""),
        E::ForLoop(f) => unsupported(cx, f.for_token, "loops", ""),
        E::Reference(r) => unsupported(cx, r.and_token, "references", ""),
        E::Try(t) => unsupported(cx, t.question_token, "`?`", ""),
        E::Unsafe(u) => unsupported(cx, u.unsafe_token, "`unsafe`", ""),
        E::Tuple(t) => unsupported_at(cx, t.paren_token.span.join(), "tuples", ""),
        E::Array(a) => unsupported_at(cx, a.bracket_token.span.join(), "arrays", ""),
        E::Range(r) => unsupported(cx, r.limits, "ranges", ""),
        other => unsupported(cx, other, "this expression", ""),
    }
}

fn unsupported<T: ToTokens>(cx: &Ctxt, at: T, what: &str, hint: &str) -> Option<Expr> {
    cx.error_spanned_by(
        at,
        format!("{what} not supported in a gate expression{hint}; supported: {SUPPORTED}"),
    );
    None
}

fn unsupported_at(cx: &Ctxt, at: Span, what: &str, hint: &str) -> Option<Expr> {
    cx.error_at(
        at,
        format!("{what} not supported in a gate expression{hint}; supported: {SUPPORTED}"),
    );
    None
}

fn literal(cx: &Ctxt, lit: &syn::Lit) -> Option<Expr> {
    match lit {
        syn::Lit::Float(f) => {
            if !matches!(f.suffix(), "" | "f32") {
                cx.error_spanned_by(
                    f,
                    format!("gate literals are f32: remove the `{}` suffix", f.suffix()),
                );
                return None;
            }
            // The decimal value itself (the mathematical gate): the f64 CPU reference uses it exactly, the f32 CUDA
            // code and the user's f32 fn round it.
            let v: f64 = f.base10_parse().ok()?;
            Some(Expr::constant(v, f.span()))
        }
        syn::Lit::Int(i) => {
            if !matches!(i.suffix(), "" | "f32") {
                cx.error_spanned_by(i, format!("gate literals are f32, not `{}`", i.suffix()));
                return None;
            }
            let v: f64 = i.base10_parse::<u64>().ok()? as f64;
            Some(Expr::constant(v, i.span()))
        }
        other => {
            cx.error_spanned_by(other, format!("unsupported literal: a gate expression uses f32 literals like `16.0`; supported: {SUPPORTED}"));
            None
        }
    }
}

/// f32 constants usable by path (`std::f32::consts::LN_2`).
/// (The f64 value: the mathematical constant.)
fn f32_const(name: &str) -> Option<f64> {
    use std::f64::consts::*;
    Some(match name {
        "E" => E,
        "PI" => PI,
        "TAU" => TAU,
        "LN_2" => LN_2,
        "LN_10" => LN_10,
        "LOG2_E" => LOG2_E,
        "LOG10_E" => LOG10_E,
        "SQRT_2" => SQRT_2,
        "FRAC_1_SQRT_2" => FRAC_1_SQRT_2,
        _ => return None,
    })
}

fn path(cx: &Ctxt, p: &syn::ExprPath, env: &Env) -> Option<Expr> {
    if p.qself.is_none() {
        if let Some(id) = p.path.get_ident() {
            let name = id.to_string();
            return match env.lookup(&name) {
                // Re-span variable uses at the use site.
                Some(Some(e)) => Some(match e.op() {
                    Op::Var(i) => Expr::var(i, id.span()),
                    _ => e.clone(),
                }),
                Some(None) => None, // a binding whose value had an error: already reported
                None => {
                    let names: Vec<&str> = env.vars.iter().map(|(n, _)| n.as_str()).collect();
                    cx.error_spanned_by(
                        id,
                        format!(
                            "unknown name `{name}`{}: a gate expression can use {}, `let` bindings and f32 literals",
                            did_you_mean(&name, names),
                            env.known()
                        ),
                    );
                    None
                }
            };
        }
        // std::f32::consts::LN_2, core::f32::consts::PI, f32::consts::E, consts::E
        let segs: Vec<String> = p
            .path
            .segments
            .iter()
            .map(|s| s.ident.to_string())
            .collect();
        let n = segs.len();
        let generic = p.path.segments.iter().any(|s| !s.arguments.is_none());
        if !generic && n >= 2 && segs[n - 2] == "consts" && (n < 3 || segs[n - 3] == "f32") {
            if let Some(v) = f32_const(&segs[n - 1]) {
                return Some(Expr::constant(v, p.span()));
            }
        }
    }
    cx.error_spanned_by(p, format!("unsupported path: a gate expression can use {}, `let` bindings, f32 literals and `std::f32::consts`", env.known()));
    None
}

fn call(cx: &Ctxt, c: &syn::ExprCall, env: &Env) -> Option<Expr> {
    let args: Vec<Option<Expr>> = c.args.iter().map(|a| convert(cx, a, env)).collect();
    let fname = match &*c.func {
        syn::Expr::Path(p) if p.qself.is_none() && p.path.get_ident().is_some() => {
            p.path.get_ident().unwrap().clone()
        }
        syn::Expr::Path(p) => {
            let last = p
                .path
                .segments
                .last()
                .map(|s| s.ident.to_string())
                .unwrap_or_default();
            let hint = if FUNCS.contains(&last.as_str()) {
                format!(" (write `{last}(..)`)")
            } else {
                String::new()
            };
            cx.error_spanned_by(
                &c.func,
                format!(
                    "unsupported function path{hint}: a gate expression calls {}",
                    FUNCS.join(", ")
                ),
            );
            return None;
        }
        other => {
            cx.error_spanned_by(
                other,
                format!(
                    "unsupported call: a gate expression calls {}",
                    FUNCS.join(", ")
                ),
            );
            return None;
        }
    };
    let name = fname.to_string();
    let span = fname.span();
    let arity = match name.as_str() {
        "exp" | "log" | "sqrt" | "tanh" | "sigmoid" | "log_sigmoid" | "softplus" => 1,
        "min" | "max" | "powf" => 2,
        "clamp" => 3,
        _ => {
            let alias = match name.as_str() {
                "ln" => " (did you mean `log`?)".to_string(),
                "logsigmoid" | "log_sig" => " (did you mean `log_sigmoid`?)".to_string(),
                "exp2" | "pow" | "powi" => {
                    " (write `powf(x, c)` for a constant c, or `exp(y * log(2.0))` for 2^y)"
                        .to_string()
                }
                _ => did_you_mean(&name, FUNCS),
            };
            cx.error_spanned_by(
                &fname,
                format!(
                    "unsupported function `{name}`{alias}: a gate expression calls {}",
                    FUNCS.join(", ")
                ),
            );
            return None;
        }
    };
    if args.len() != arity {
        cx.error_spanned_by(
            &fname,
            format!(
                "`{name}` takes {arity} argument{}, got {}",
                if arity == 1 { "" } else { "s" },
                args.len()
            ),
        );
        return None;
    }
    let args: Vec<Expr> = args.into_iter().collect::<Option<_>>()?;
    let a = |i: usize| args[i].clone();
    let f = |func: Func| Some(node(Op::F(func), vec![a(0)], span));
    match name.as_str() {
        "exp" => f(Func::Exp),
        "log" => f(Func::Log),
        "sqrt" => f(Func::Sqrt),
        "tanh" => f(Func::Tanh),
        "sigmoid" => f(Func::Sigmoid),
        "log_sigmoid" => f(Func::LogSigmoid),
        "softplus" => f(Func::Softplus),
        "min" => Some(node(Op::Min, vec![a(0), a(1)], span)),
        "max" => Some(node(Op::Max, vec![a(0), a(1)], span)),
        "clamp" => {
            // clamp(v, lo, hi) = min(max(v, lo), hi) (f32::clamp needs lo <= hi).
            if let (Some(lo), Some(hi)) = (
                expr::simplify(&a(1)).as_const(),
                expr::simplify(&a(2)).as_const(),
            ) {
                if lo > hi {
                    cx.error_spanned_by(
                        &c.args,
                        format!("`clamp` needs lo <= hi, got {lo:?} > {hi:?}"),
                    );
                    return None;
                }
            }
            Some(node(
                Op::Min,
                vec![node(Op::Max, vec![a(0), a(1)], span), a(2)],
                span,
            ))
        }
        "powf" => match expr::simplify(&a(1)).as_const() {
            Some(p) => Some(node(Op::Powf(p), vec![a(0)], span)),
            None => {
                cx.error_spanned_by(
                    &c.args[1],
                    "`powf` needs a constant exponent, e.g. `powf(x, 0.5)`; for b^y with a variable y write `exp(y * log(b))`",
                );
                None
            }
        },
        _ => unreachable!(),
    }
}
