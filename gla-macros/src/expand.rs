//! Orchestration: parse → validate → prove → differentiate → expand.

use crate::attr::{self, Shape};
use crate::ctxt::Ctxt;
use crate::diff::diff;
use crate::emit::{self, CudaGate, RustVars};
use crate::expr::{self, Expr};
use crate::interval::Iv;
use crate::parse::{self, Param};
use crate::prove::{self, fmt_iv, fmt_num, Guard, Problem, FIXED_H_MAX};
use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, ToTokens};

/// Bumped whenever the generated code changes meaning; part of every gate's content hash.
pub const GENERATOR_VERSION: u32 = 2;

pub fn expand(attr: TokenStream, item: TokenStream) -> TokenStream {
    let mut func: syn::ItemFn = match syn::parse2::<syn::Item>(item.clone()) {
        Ok(syn::Item::Fn(f)) => f,
        Ok(other) => {
            let e = syn::Error::new_spanned(
                other.to_token_stream().into_iter().take(2).collect::<TokenStream>(),
                "#[gated_linear_attention] applies to a fn returning log α, e.g. `fn gla(x: f32) -> f32 { log_sigmoid(x) / 16.0 }`",
            );
            let mut ts = e.to_compile_error();
            ts.extend(item);
            return ts;
        }
        Err(e) => {
            let mut ts = e.to_compile_error();
            ts.extend(item);
            return ts;
        }
    };
    let cx = Ctxt::new();
    let attr = attr::parse(&cx, attr);
    let sig = parse::signature(&cx, &mut func, attr.shape);
    let input_name = if attr.shape == Some(Shape::Fixed) {
        "h"
    } else {
        "x"
    };
    let body = parse::body(&cx, &func.block, &sig, input_name);

    // Validation errors: stop before the proof (it would only repeat them).
    let model = match (attr.shape, body, cx.has_errors()) {
        (Some(shape), Some((f, tail)), false) => {
            let m = Model::new(&func, shape, attr.assume_nonpositive, sig.params, f, tail);
            m.prove(&cx);
            Some(m)
        }
        _ => None,
    };
    let user_fn = user_fn(&func);
    match (cx.check(), model) {
        (Ok(()), Some(m)) => {
            let gate = m.expand();
            quote!(#user_fn #gate)
        }
        (Err(e), _) => {
            let e = e.to_compile_error();
            quote!(#e #user_fn)
        }
        (Ok(()), None) => {
            let e = syn::Error::new(
                Span::call_site(),
                "gated_linear_attention: could not read this gate",
            )
            .to_compile_error();
            quote!(#e #user_fn)
        }
    }
}

/// The user's fn, callable as plain Rust: unchanged but for the `#[param]` attributes (already removed) and the
/// gate functions brought into scope inside its body.
fn user_fn(func: &syn::ItemFn) -> TokenStream {
    let mut f = func.clone();
    let stmts = std::mem::take(&mut f.block.stmts);
    let block: syn::Block = syn::parse_quote!({
        #[allow(unused_imports)]
        use ::gla::__private::gate_fns::*;
        #(#stmts)*
    });
    f.block = Box::new(block);
    f.into_token_stream()
}

pub fn camel_case(name: &str) -> String {
    let name = name.trim_start_matches("r#");
    let mut out = String::new();
    let mut up = true;
    for c in name.chars() {
        if c == '_' {
            up = true;
        } else if up {
            out.extend(c.to_uppercase());
            up = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// 64-bit FNV-1a: stable across builds and platforms.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

struct Model {
    vis: syn::Visibility,
    docs: Vec<syn::Attribute>,
    fn_ident: syn::Ident,
    name: String,
    shape: Shape,
    assume: bool,
    params: Vec<Param>,
    names: Vec<String>,
    /// The user's tree (spans; canonical text).
    raw: Expr,
    tail: TokenStream,
    /// Simplified forward expression and its derivatives.
    f: Expr,
    dx: Expr,
    dp: Vec<Expr>,
}

impl Model {
    fn new(
        func: &syn::ItemFn,
        shape: Shape,
        assume: bool,
        params: Vec<Param>,
        raw: Expr,
        tail: TokenStream,
    ) -> Model {
        let name = func
            .sig
            .ident
            .to_string()
            .trim_start_matches("r#")
            .to_string();
        let input = if shape == Shape::Fixed { "h" } else { "x" };
        let names: Vec<String> = std::iter::once(input.to_string())
            .chain(params.iter().map(|p| p.name.clone()))
            .collect();
        let f = expr::simplify(&raw);
        let dx = diff(&f, 0);
        let dp = (0..params.len()).map(|k| diff(&f, 1 + k)).collect();
        let docs = func
            .attrs
            .iter()
            .filter(|a| a.path().is_ident("doc"))
            .cloned()
            .collect();
        Model {
            vis: func.vis.clone(),
            docs,
            fn_ident: func.sig.ident.clone(),
            name,
            shape,
            assume,
            params,
            names,
            raw,
            tail,
            f,
            dx,
            dp,
        }
    }

    fn canonical(&self) -> String {
        self.raw.to_text(&self.names)
    }

    fn domain(&self, unranged: Iv) -> Vec<Iv> {
        let mut d = vec![if self.shape == Shape::Fixed {
            Iv::closed(0.0, FIXED_H_MAX)
        } else {
            Iv::ENTIRE
        }];
        d.extend(
            self.params
                .iter()
                .map(|p| p.range.map_or(unranged, |(lo, hi)| Iv::closed(lo, hi))),
        );
        d
    }

    fn over(&self) -> String {
        let mut s = if self.shape == Shape::Fixed {
            format!("every head index h ∈ [0, {FIXED_H_MAX}]")
        } else {
            "every x ∈ ℝ".to_string()
        };
        for p in &self.params {
            match p.range {
                Some((lo, hi)) => s.push_str(&format!(
                    ", {} ∈ [{}, {}]",
                    p.name,
                    fmt_num(lo),
                    fmt_num(hi)
                )),
                None => s.push_str(&format!(", {} ∈ ℝ", p.name)),
            }
        }
        s
    }

    /// The interval proof; problems are reported to `cx`.
    fn prove(&self, cx: &Ctxt) {
        let problem = Problem {
            f: &self.raw,
            names: &self.names,
            domain: self.domain(Iv::ENTIRE),
            x_unbounded: self.shape != Shape::Fixed,
        };
        let out = prove::analyze(&problem, !self.assume);
        if out.ok() {
            return;
        }
        for fl in &out.domain {
            let over = self.over();
            let (what, need) = match fl.guard {
                Guard::Log => (
                    "`log` of a value that may be ≤ 0".to_string(),
                    format!("log needs a positive argument for {over} (log_sigmoid(..) and -softplus(..) are defined everywhere)"),
                ),
                Guard::Log1p => ("`log(1 + ..)` of a value that may be ≤ -1".to_string(), format!("log needs a positive argument for {over}")),
                Guard::Sqrt => ("`sqrt` of a value that may be negative".to_string(), format!("sqrt needs a non-negative argument for {over}")),
                Guard::Div => ("division by a value that may be 0".to_string(), format!("the divisor must be non-zero for {over}")),
                Guard::Pow(p) if p.fract() != 0.0 => (
                    format!("`powf` with the non-integer exponent {} of a value that may be negative", fmt_num(p)),
                    format!("the base must be non-negative (positive for a negative exponent) for {over}"),
                ),
                Guard::Pow(p) => (
                    format!("`powf` with the negative exponent {} of a value that may be 0", fmt_num(p)),
                    format!("the base must be non-zero for {over}"),
                ),
            };
            let detail = match &fl.witness {
                Some(w) => w.clone(),
                None => format!("it is only known to lie in {} there", fmt_iv(&fl.arg)),
            };
            cx.error_at(fl.node.span(), format!("{what} ({detail}): {need}"));
        }
        if let Some(pos) = &out.positive {
            let msg = match &pos.witness {
                Some(w) => format!(
                    "log α may be positive ({w}): a forget gate needs log α ≤ 0 for {}; wrap the expression in \
                     -softplus(..) or log_sigmoid(..), or use e.g. -exp(..)",
                    self.over()
                ),
                None => {
                    let bx: Vec<String> = self.names.iter().zip(&pos.bx).map(|(n, iv)| format!("{n} ∈ {}", fmt_iv(iv))).collect();
                    format!(
                        "could not prove log α ≤ 0 for {} (the interval bound is {} where {}); if it does hold, \
                         add `assume_nonpositive`: #[gated_linear_attention(gate = {}, assume_nonpositive)]",
                        self.over(),
                        fmt_num(pos.hi),
                        bx.join(", "),
                        self.shape.as_str()
                    )
                }
            };
            cx.error_spanned_by(&self.tail, msg);
        }
        // Parameters without a range: would a range make the proof go through?
        let unranged: Vec<&Param> = self.params.iter().filter(|p| p.range.is_none()).collect();
        if !unranged.is_empty() {
            let retry = |r: Iv| {
                let problem = Problem {
                    f: &self.raw,
                    names: &self.names,
                    domain: self.domain(r),
                    x_unbounded: self.shape != Shape::Fixed,
                };
                prove::analyze(&problem, !self.assume).ok()
            };
            let works = [(0.0, 1.0), (-1.0, 1.0), (0.0, 16.0)]
                .into_iter()
                .find(|&(a, b)| retry(Iv::closed(a, b)));
            for p in unranged {
                let k = 1 + self.params.iter().position(|q| q.name == p.name).unwrap();
                if !self.raw.uses_var(k) {
                    continue;
                }
                let msg = match works {
                    Some((a, b)) => format!(
                        "`{}` has no declared range, so the proof took every {} ∈ ℝ: declare #[param(range = lo..hi)] \
                         (with e.g. #[param(range = {:?}..{:?})] the proof goes through)",
                        p.name, p.name, a, b
                    ),
                    None => format!(
                        "`{}` has no declared range, so the proof took every {} ∈ ℝ: if it is bounded, declare \
                         #[param(range = lo..hi)]",
                        p.name, p.name
                    ),
                };
                cx.error_spanned_by(&p.ident, msg);
            }
        }
    }

    fn expand(&self) -> TokenStream {
        let Model {
            vis,
            fn_ident,
            name,
            shape,
            ..
        } = self;
        let ty = format_ident!("{}", camel_case(name), span = fn_ident.span());
        let expr_text = self.canonical();
        let cuda_ident = format!("gla_gate_{name}");
        let var_names = |e: &Expr| e.to_text(&self.names);

        // Rust f64 bodies.
        let vars = RustVars {
            input: format_ident!("__x"),
            params: (0..self.params.len())
                .map(|k| format_ident!("__p{}", k))
                .collect(),
        };
        let param_lets: Vec<TokenStream> = vars
            .params
            .iter()
            .enumerate()
            .map(|(k, id)| quote!(let #id: f64 = __params[#k];))
            .collect();
        let (f_stmts, f_out) = emit::rust_block(std::slice::from_ref(&self.f), &vars);
        let f_out = &f_out[0];
        let (dx_stmts, dx_out) = emit::rust_block(std::slice::from_ref(&self.dx), &vars);
        let dx_out = &dx_out[0];
        let (dp_stmts, dp_out) = emit::rust_block(&self.dp, &vars);
        let dp_idx = 0..self.dp.len();

        // CUDA.
        let mut header = format!(
            "// gate `{name}` ({}), generated by #[gated_linear_attention] v{GENERATOR_VERSION}; do not edit.\n\
             // log alpha = {expr_text}\n",
            shape.as_str()
        );
        for (k, p) in self.params.iter().enumerate() {
            let range = p.range.map_or("unbounded".to_string(), |(a, b)| {
                format!("range [{}, {}]", fmt_num(a), fmt_num(b))
            });
            header.push_str(&format!("// p[{k}] = {} ({range})\n", p.name));
        }
        if *shape == Shape::Fixed {
            header.push_str("// x = head index h\n");
        }
        let cuda = emit::cuda_source(&CudaGate {
            ident: &cuda_ident,
            header: &header,
            f: &self.f,
            dx: &self.dx,
            dp: &self.dp,
        });

        // Content hash.
        let mut key = format!(
            "gla-gate v{GENERATOR_VERSION}\0{name}\0{}\0",
            shape.as_str()
        );
        for p in &self.params {
            match p.range {
                Some((a, b)) => key.push_str(&format!(
                    "{}:{:016x}:{:016x}\0",
                    p.name,
                    a.to_bits(),
                    b.to_bits()
                )),
                None => key.push_str(&format!("{}:-\0", p.name)),
            }
        }
        key.push_str(&expr_text);
        let hash = fnv1a(key.as_bytes());

        let shape_variant = format_ident!("{}", shape.variant());
        let param_specs = self.params.iter().map(|p| {
            let n = &p.name;
            match p.range {
                Some((a, b)) => {
                    let (a, b) = (emit::rust_const(a), emit::rust_const(b));
                    quote!(::gla::__private::gla_core::ParamSpec { name: #n, range: ::core::option::Option::Some((#a, #b)) })
                }
                None => quote!(::gla::__private::gla_core::ParamSpec { name: #n, range: ::core::option::Option::None }),
            }
        });

        // Docs.
        let docs = &self.docs;
        let mut doc = vec![
            format!("Gate type of [`{name}`](fn@{name}) ({}), generated by `#[gated_linear_attention]`:", shape.as_str()),
            String::new(),
            format!("log α = `{expr_text}`"),
            String::new(),
            format!("* ∂ log α / ∂{} = `{}`", self.names[0], var_names(&self.dx)),
        ];
        for (k, p) in self.params.iter().enumerate() {
            doc.push(format!(
                "* ∂ log α / ∂{} = `{}`",
                p.name,
                var_names(&self.dp[k])
            ));
        }
        doc.push(String::new());
        doc.push(if self.assume {
            format!(
                "log α ≤ 0 is *assumed* (`assume_nonpositive`) for {}.",
                self.over()
            )
        } else {
            format!(
                "Proved at compile time: log α ≤ 0 and finite for {}.",
                self.over()
            )
        });
        let doc_sep = if docs.is_empty() {
            quote!()
        } else {
            quote!(#[doc = ""])
        };

        quote! {
            #(#docs)*
            #doc_sep
            #(#[doc = #doc])*
            #[derive(::core::clone::Clone, ::core::marker::Copy, ::core::fmt::Debug, ::core::default::Default,
                     ::core::cmp::PartialEq, ::core::cmp::Eq, ::core::hash::Hash)]
            #vis struct #ty;

            #[allow(clippy::all, unused_parens, unused_variables)]
            impl ::gla::__private::gla_core::Gate for #ty {
                fn name(&self) -> &'static str { #name }
                fn shape(&self) -> ::gla::__private::gla_core::GateShape {
                    ::gla::__private::gla_core::GateShape::#shape_variant
                }
                fn params(&self) -> &'static [::gla::__private::gla_core::ParamSpec] {
                    const PARAMS: &[::gla::__private::gla_core::ParamSpec] = &[#(#param_specs),*];
                    PARAMS
                }
                fn expr(&self) -> &'static str { #expr_text }
                fn log_alpha(&self, __x: f64, __params: &[f64]) -> f64 {
                    #(#param_lets)*
                    #f_stmts
                    // log α ≤ 0 is proved over the reals; rounding near 0 must not lift it above 0 (NaN passes).
                    let __v: f64 = #f_out;
                    if __v > 0.0 { 0.0 } else { __v }
                }
                fn dlog_alpha_dx(&self, __x: f64, __params: &[f64]) -> f64 {
                    #(#param_lets)*
                    #dx_stmts
                    #dx_out
                }
                fn dlog_alpha_dparams(&self, __x: f64, __params: &[f64], __grad: &mut [f64]) {
                    #(#param_lets)*
                    #dp_stmts
                    #(__grad[#dp_idx] = #dp_out;)*
                }
                fn cuda_ident(&self) -> &'static str { #cuda_ident }
                fn cuda_source(&self) -> &'static str { #cuda }
                fn cuda_log2_acc(&self) -> bool { true }
                fn content_hash(&self) -> u64 { #hash }
            }

            ::gla::__private::inventory::submit! {
                ::gla::__private::gla_core::GateRegistration { gate: &#ty }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(camel_case("gla"), "Gla");
        assert_eq!(camel_case("mamba2"), "Mamba2");
        assert_eq!(camel_case("gated_retnet"), "GatedRetnet");
        assert_eq!(camel_case("r#fn_x"), "FnX");
    }

    #[test]
    fn fnv() {
        assert_eq!(fnv1a(b""), 0xcbf29ce484222325);
        assert_eq!(fnv1a(b"a"), 0xaf63dc4c8601ec8c);
    }

    fn expand_str(attr: &str, item: &str) -> String {
        expand(attr.parse().unwrap(), item.parse().unwrap()).to_string()
    }

    #[test]
    fn expands_gla() {
        let out = expand_str(
            "gate = per_key",
            "fn gla(x: f32) -> f32 { log_sigmoid(x) / 16.0 }",
        );
        assert!(out.contains("struct Gla"), "{out}");
        assert!(out.contains("gla_gate_gla"), "{out}");
        assert!(!out.contains("compile_error"), "{out}");
    }

    #[test]
    fn valid_gates_prove_quickly() {
        let t = std::time::Instant::now();
        for (attr, item) in [
            ("gate = per_key", "fn a(x: f32) -> f32 { -x * x }"),
            ("gate = per_key", "fn a(x: f32) -> f32 { clamp(-softplus(x), -10.0, 0.0) }"),
            ("gate = per_key", "fn a(x: f32) -> f32 { min(x, 0.0) }"),
            ("gate = per_key", "fn a(x: f32) -> f32 { -powf(sigmoid(x), 2.0) }"),
            ("gate = per_key", "fn a(x: f32) -> f32 { log(clamp(sigmoid(x), 0.01, 0.99)) }"),
            ("gate = per_key", "fn a(x: f32) -> f32 { -sqrt(softplus(x)) * tanh(exp(x)) }"),
            ("gate = per_key", "fn a(x: f32) -> f32 { sigmoid(x) * sigmoid(-x) - 0.2501 }"),
            ("gate = per_key", "fn a(x: f32) -> f32 { log(1.0 - sigmoid(x)) }"),
            ("gate = per_key", "fn a(x: f32) -> f32 { -softplus(x) / (1.0 + exp(x)) }"),
            ("gate = per_key", "fn a(x: f32) -> f32 { let s = sigmoid(x); log(s) + log(1.0 - s) }"),
            ("gate = per_value", "fn a(x: f32, #[param(range = 0.5..2.0)] t: f32) -> f32 { log_sigmoid(x) / t }"),
            ("gate = per_head", "fn a(x: f32, #[param(range = 0.0..1.0)] g: f32, #[param] c: f32) -> f32 { log(g + (1.0 - g) * sigmoid(x)) * exp(c) }"),
            ("gate = per_head", "fn a(x: f32, #[param(range = 0.1..1.0)] lam: f32) -> f32 { -lam * softplus(x - 3.0) }"),
            ("gate = fixed", "fn a(h: f32) -> f32 { -1.0 / (h + 1.0) }"),
            ("gate = fixed", "fn a(h: f32) -> f32 { log(1.0 - powf(2.0, -5.0) * exp(-h * std::f32::consts::LN_2)) }"),
        ] {
            let out = expand_str(attr, item);
            assert!(!out.contains("compile_error"), "{item}: {out}");
        }
        assert!(
            t.elapsed().as_secs_f64() < 10.0,
            "too slow: {:?}",
            t.elapsed()
        );
    }

    #[test]
    fn invalid_gates_fail_quickly_with_a_message() {
        let t = std::time::Instant::now();
        for (attr, item, want) in [
            ("gate = per_key", "fn a(x: f32) -> f32 { log(x * x) }", "`log` of a value that may be ≤ 0 (it is 0 at x = 0)"),
            ("gate = per_key", "fn a(x: f32) -> f32 { -1.0 / x - 10.0 }", "division by a value that may be 0"),
            ("gate = per_key", "fn a(x: f32, #[param] a: f32, #[param] b: f32, #[param] c: f32) -> f32 { a * b * c - softplus(x) }", "log α may be positive"),
            ("gate = per_key", "fn a(x: f32, #[param] a: f32, #[param] b: f32, #[param] c: f32) -> f32 { log(a * b + c) - softplus(x) }", "`log` of a value"),
            ("gate = fixed", "fn a(h: f32, #[param] a: f32) -> f32 { log(a) - h }", "declare #[param(range = lo..hi)]"),
            ("gate = fixed", "fn a(h: f32) -> f32 { h - 1000.0 }", "e.g. log α = 24 at h = 1024"),
            ("gate = per_head", "fn a(x: f32) -> f32 { max(log_sigmoid(x), -0.5) + 0.6 }", "up to 0.6 as x → +inf"),
        ] {
            let out = expand_str(attr, item);
            assert!(out.contains(want), "{item}: want {want:?} in {out}");
        }
        assert!(
            t.elapsed().as_secs_f64() < 20.0,
            "too slow: {:?}",
            t.elapsed()
        );
    }

    #[test]
    fn assume_nonpositive_skips_only_the_sign_proof() {
        let body =
            "fn v(x: f32) -> f32 { log(1.0 + 0.000000000001 * sigmoid(x)) - 0.000000000001 }";
        assert!(expand_str("gate = per_head", body).contains("could not prove"));
        assert!(!expand_str("gate = per_head, assume_nonpositive", body).contains("compile_error"));
        // Definedness is still proved.
        assert!(expand_str(
            "gate = per_head, assume_nonpositive",
            "fn v(x: f32) -> f32 { log(x) }"
        )
        .contains("compile_error"));
    }

    #[test]
    fn reports_every_error() {
        let out = expand_str(
            "gate = per_key",
            "fn bad(x: f32) -> f32 { let y = x % 2.0; foo(x) + if x > 0.0 { x } else { y } }",
        );
        assert_eq!(out.matches("compile_error").count(), 3, "{out}");
        assert!(out.contains("fn bad"), "the user's fn is kept: {out}");
    }
}
