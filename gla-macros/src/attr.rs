//! `#[gated_linear_attention(gate = per_key, assume_nonpositive)]` and `#[param(range = lo..hi)]`.

use crate::ctxt::{did_you_mean, Ctxt};
use proc_macro2::{Span, TokenStream};
use syn::parse::Parser;
use syn::Token;

/// `gla_core::GateShape`, mirrored (the macro crate does not link gla-core).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    PerKey,
    PerHead,
    PerValue,
    Fixed,
}

impl Shape {
    pub const ALL: [Shape; 4] = [Shape::PerKey, Shape::PerHead, Shape::PerValue, Shape::Fixed];
    pub fn as_str(self) -> &'static str {
        match self {
            Shape::PerKey => "per_key",
            Shape::PerHead => "per_head",
            Shape::PerValue => "per_value",
            Shape::Fixed => "fixed",
        }
    }
    /// The `GateShape` variant name.
    pub fn variant(self) -> &'static str {
        match self {
            Shape::PerKey => "PerKey",
            Shape::PerHead => "PerHead",
            Shape::PerValue => "PerValue",
            Shape::Fixed => "Fixed",
        }
    }
}

pub const KINDS: &str = "per_key, per_head, per_value or fixed";

pub struct Attr {
    pub shape: Option<Shape>,
    pub assume_nonpositive: bool,
}

/// Parse the attribute's arguments; every problem goes to `cx`.
pub fn parse(cx: &Ctxt, tokens: TokenStream) -> Attr {
    let mut shape: Option<Shape> = None;
    let mut shape_seen = false;
    let mut assume: Option<Span> = None;
    let parser = syn::meta::parser(|meta| {
        if meta.path.is_ident("gate") {
            if shape_seen {
                cx.error_spanned_by(&meta.path, "duplicate `gate = ...`");
            }
            shape_seen = true;
            if !meta.input.peek(Token![=]) {
                cx.error_spanned_by(
                    &meta.path,
                    format!("`gate` needs a kind: write `gate = per_key` ({KINDS})"),
                );
                return Ok(());
            }
            let value: syn::Expr = meta.value()?.parse()?;
            match &value {
                syn::Expr::Path(p) if p.path.get_ident().is_some() => {
                    let id = p.path.get_ident().unwrap();
                    let s = id.to_string();
                    match Shape::ALL.iter().find(|k| k.as_str() == s) {
                        Some(&k) => shape = Some(k),
                        None => cx.error_spanned_by(
                            id,
                            format!(
                                "unknown gate kind `{s}`: expected {KINDS}{}",
                                did_you_mean(&s, Shape::ALL.iter().map(|k| k.as_str()))
                            ),
                        ),
                    }
                }
                syn::Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Str(l),
                    ..
                }) => cx.error_spanned_by(
                    l,
                    format!("write the gate kind without quotes: `gate = {}`", l.value()),
                ),
                other => cx.error_spanned_by(other, format!("expected a gate kind: {KINDS}")),
            }
        } else if meta.path.is_ident("assume_nonpositive") {
            if assume.is_some() {
                cx.error_spanned_by(&meta.path, "duplicate `assume_nonpositive`");
            }
            assume = Some(Span::call_site());
            if meta.input.peek(Token![=]) {
                let v: syn::Expr = meta.value()?.parse()?;
                cx.error_spanned_by(
                    v,
                    "`assume_nonpositive` is a flag: write it without a value",
                );
            }
        } else {
            let name = meta
                .path
                .get_ident()
                .map(|i| i.to_string())
                .unwrap_or_else(|| "?".into());
            cx.error_spanned_by(
                &meta.path,
                format!(
                    "unknown key `{name}`{}: supported are `gate = {}` and `assume_nonpositive`",
                    did_you_mean(&name, ["gate", "assume_nonpositive"]),
                    KINDS.replace(", ", " | ").replace(" or ", " | ")
                ),
            );
            // Skip its value so that later keys are still checked.
            if meta.input.peek(Token![=]) {
                let _: syn::Expr = meta.value()?.parse()?;
            } else if meta.input.peek(syn::token::Paren) {
                let _ = meta.parse_nested_meta(|m| {
                    let _: TokenStream = m.input.parse()?;
                    Ok(())
                });
            }
        }
        Ok(())
    });
    let had_parse_error = match parser.parse2(tokens) {
        Ok(()) => false,
        Err(e) => {
            cx.syn_error(e);
            true
        }
    };
    if !shape_seen && !had_parse_error {
        cx.error_at(
            Span::call_site(),
            format!("missing gate kind: write #[gated_linear_attention(gate = per_key)] ({KINDS})"),
        );
    }
    Attr {
        shape,
        assume_nonpositive: assume.is_some(),
    }
}

/// The declared range of a `#[param(range = lo..hi)]`, or `None` for a bare `#[param]`. `Err(())` after
/// reporting a problem.
pub fn parse_param(cx: &Ctxt, attr: &syn::Attribute) -> Result<Option<(f64, f64)>, ()> {
    match &attr.meta {
        syn::Meta::Path(_) => Ok(None),
        syn::Meta::NameValue(nv) => {
            cx.error_spanned_by(nv, "write `#[param]` or `#[param(range = lo..hi)]`");
            Err(())
        }
        syn::Meta::List(list) => {
            let mut range = None;
            let mut bad = false;
            let r = list.parse_nested_meta(|meta| {
                if meta.path.is_ident("range") {
                    let e: syn::Expr = meta.value()?.parse()?;
                    match parse_range(cx, &e) {
                        Some(r) => range = Some(r),
                        None => bad = true,
                    }
                } else {
                    let name = meta
                        .path
                        .get_ident()
                        .map(|i| i.to_string())
                        .unwrap_or_default();
                    cx.error_spanned_by(
                        &meta.path,
                        format!(
                            "unknown key `{name}`{}: write `#[param(range = lo..hi)]`",
                            did_you_mean(&name, ["range"])
                        ),
                    );
                    bad = true;
                    if meta.input.peek(Token![=]) {
                        let _: syn::Expr = meta.value()?.parse()?;
                    }
                }
                Ok(())
            });
            if let Err(e) = r {
                cx.syn_error(e);
                return Err(());
            }
            if bad {
                Err(())
            } else {
                Ok(range)
            }
        }
    }
}

fn parse_range(cx: &Ctxt, e: &syn::Expr) -> Option<(f64, f64)> {
    let syn::Expr::Range(r) = e else {
        cx.error_spanned_by(
            e,
            "expected a range of f32 literals, e.g. `range = 0.0..1.0`",
        );
        return None;
    };
    let (Some(lo), Some(hi)) = (&r.start, &r.end) else {
        cx.error_spanned_by(
            r,
            "a parameter range needs both bounds, e.g. `range = 0.0..1.0`",
        );
        return None;
    };
    let lo = const_value(cx, lo);
    let hi = const_value(cx, hi);
    let (lo, hi) = (lo?, hi?);
    if lo.partial_cmp(&hi) != Some(std::cmp::Ordering::Less) {
        cx.error_spanned_by(
            r,
            format!("empty parameter range: {lo:?} is not below {hi:?}"),
        );
        return None;
    }
    Some((lo, hi))
}

/// A literal, optionally negated.
fn const_value(cx: &Ctxt, e: &syn::Expr) -> Option<f64> {
    match e {
        syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Float(f),
            ..
        }) => {
            let v: f64 = f.base10_parse().ok()?;
            if v.is_finite() {
                Some(v)
            } else {
                cx.error_spanned_by(f, "parameter range bounds must be finite f32 values");
                None
            }
        }
        syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Int(i),
            ..
        }) => i.base10_parse::<i64>().ok().map(|v| v as f64),
        syn::Expr::Unary(syn::ExprUnary {
            op: syn::UnOp::Neg(_),
            expr,
            ..
        }) => const_value(cx, expr).map(|v| -v),
        syn::Expr::Paren(p) => const_value(cx, &p.expr),
        other => {
            cx.error_spanned_by(
                other,
                "parameter range bounds must be f32 literals, e.g. `range = 0.0..1.0`",
            );
            None
        }
    }
}
