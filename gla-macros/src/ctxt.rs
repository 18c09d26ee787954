//! Error accumulator (serde_derive's `Ctxt`): every pass reports into it, so the user sees all problems at once,
//! each pointing at its token.

use proc_macro2::Span;
use quote::ToTokens;
use std::cell::RefCell;
use std::fmt::Display;
use std::thread;

#[derive(Default)]
pub struct Ctxt {
    // `None` once checked, so that forgetting to check is caught.
    errors: RefCell<Option<Vec<syn::Error>>>,
}

impl Ctxt {
    pub fn new() -> Self {
        Ctxt {
            errors: RefCell::new(Some(Vec::new())),
        }
    }

    /// An error covering the tokens of `obj` (first to last token).
    pub fn error_spanned_by<A: ToTokens, T: Display>(&self, obj: A, msg: T) {
        self.push(syn::Error::new_spanned(obj.into_token_stream(), msg));
    }

    /// An error at one span.
    pub fn error_at<T: Display>(&self, span: Span, msg: T) {
        self.push(syn::Error::new(span, msg));
    }

    /// One of syn's parse errors.
    pub fn syn_error(&self, err: syn::Error) {
        self.push(err);
    }

    fn push(&self, e: syn::Error) {
        self.errors
            .borrow_mut()
            .as_mut()
            .expect("Ctxt used after check")
            .push(e);
    }

    pub fn has_errors(&self) -> bool {
        self.errors.borrow().as_ref().is_some_and(|v| !v.is_empty())
    }

    /// Consume the context: all errors combined, or `Ok`.
    pub fn check(self) -> syn::Result<()> {
        let mut errors = self.errors.borrow_mut().take().unwrap().into_iter();
        let Some(mut combined) = errors.next() else {
            return Ok(());
        };
        for rest in errors {
            combined.combine(rest);
        }
        Err(combined)
    }
}

impl Drop for Ctxt {
    fn drop(&mut self) {
        if !thread::panicking() && self.errors.borrow().is_some() {
            panic!("gla-macros: Ctxt dropped without check()");
        }
    }
}

/// Levenshtein distance, for "did you mean" hints.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, &cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != cb))
                .min(prev[j + 1] + 1)
                .min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// `" (did you mean `x`?)"` for the closest candidate within distance 2, else `""`.
pub fn did_you_mean<'a>(got: &str, candidates: impl IntoIterator<Item = &'a str>) -> String {
    candidates
        .into_iter()
        .map(|c| (edit_distance(got, c), c))
        .filter(|&(d, c)| d <= 2 && d < c.len())
        .min()
        .map(|(_, c)| format!(" (did you mean `{c}`?)"))
        .unwrap_or_default()
}
