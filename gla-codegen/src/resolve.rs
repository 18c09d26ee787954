//! Resolve the preprocessor conditionals of an emitted kernel: keep only the code that actually runs.
//!
//! The emitted translation unit selects most of its code with `#if` groups over the variant's `#define`s
//! (`KEY_GATE`, `GLA_WGMMA`, `SPLIT_A`, …). [`resolve_conditionals`] evaluates every group whose outcome is known
//! from the source itself, keeps the lines of the branch taken and drops the directive lines and the untaken
//! branches, so a reader sees one variant's code. Pure text processing: no dependencies, no I/O.
//!
//! What it understands:
//! * `#define NAME value`, `#define NAME`, `#undef NAME` (object-like macros), in source order and only where the
//!   line is live (a `#define` in an untaken branch does not take effect). `#define` / `#undef` lines stay in the
//!   output. Function-like macros (`#define F(x) …`) stay too but are never evaluated: a condition that needs one is
//!   unresolvable.
//! * `#if` / `#elif` expressions: integer literals (decimal, octal, hex, binary; `u` / `l` suffixes), `defined X` /
//!   `defined(X)`, object-like macros (expanded token by token, recursively, as the preprocessor does), `true` /
//!   `false`, identifiers that are not macros (0, as in C), the operators `! ~ - +` (unary) `* / % + - << >> < <= >
//!   >= == != & ^ | && || ?:` with C precedence and C's signed / unsigned (`intmax_t` / `uintmax_t`) arithmetic,
//!   and parentheses. `#ifdef`, `#ifndef`, `#elifdef`, `#elifndef`, `#else`, `#endif`.
//! * Comments (`//`, `/* */`, also spanning lines) and backslash-newline continuations: a `#if` inside a block
//!   comment is not a directive.
//!
//! What it will not guess: a group whose condition it cannot evaluate (a function-like macro, a character or
//! floating literal, a division by zero, an identifier the compiler may predefine such as `__CUDA_ARCH__`, a
//! macro whose definition is itself uncertain, a malformed expression) is kept verbatim, nested groups and all,
//! after a `// resolve:` note line, and listed in [`Resolved::kept`]. Every `#define` / `#undef` inside such a
//! group makes its name uncertain for the rest of the file. C++ declarations such as `constexpr int X = 4;` are
//! not macros: to the preprocessor (and here) `X` in an `#if` is 0.
//!
//! Macros given on the compiler's command line (`-DNAME=…`) are not known here: the result is the source as
//! compiled without them (a `#ifndef KNOB` / `#define KNOB 1` default is taken as defined here).
//!
//! Unbalanced structure (`#endif` / `#else` / `#elif` without `#if`, `#elif` or `#else` after `#else`, an `#if`
//! never closed) is an error with its line number. Runs of blank lines are collapsed to one.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;

/// Marker that starts the note line put before a group kept verbatim.
pub const NOTE_PREFIX: &str = "// resolve: kept verbatim";

/// A structural error of the conditionals, with its 1-based line number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResolveError {
    /// `#endif`, `#else` or `#elif` with no open `#if`.
    Unmatched { line: usize, directive: String },
    /// `#elif` or `#else` after the group's `#else` (at `else_line`).
    AfterElse {
        line: usize,
        directive: String,
        else_line: usize,
    },
    /// An `#if` (`#ifdef`, `#ifndef`) never closed by `#endif`.
    Unterminated { line: usize, directive: String },
}

impl fmt::Display for ResolveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ResolveError::Unmatched { line, directive } => {
                write!(f, "line {line}: #{directive} without #if")
            }
            ResolveError::AfterElse {
                line,
                directive,
                else_line,
            } => {
                write!(
                    f,
                    "line {line}: #{directive} after #else (line {else_line})"
                )
            }
            ResolveError::Unterminated { line, directive } => {
                write!(f, "line {line}: #{directive} without #endif")
            }
        }
    }
}

impl std::error::Error for ResolveError {}

impl ResolveError {
    /// The 1-based line the error is reported at.
    pub fn line(&self) -> usize {
        match self {
            ResolveError::Unmatched { line, .. }
            | ResolveError::AfterElse { line, .. }
            | ResolveError::Unterminated { line, .. } => *line,
        }
    }
}

/// A conditional group kept verbatim because one of its conditions could not be evaluated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kept {
    /// 1-based line of the group's `#if` (`#ifdef`, `#ifndef`) in the input.
    pub line: usize,
    /// 1-based line of the directive that could not be evaluated (the `#if` or one of its `#elif`s).
    pub at: usize,
    /// That directive's text (comments removed).
    pub directive: String,
    /// Why it could not be evaluated.
    pub reason: String,
}

/// The resolved source and the groups that had to be kept verbatim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub source: String,
    pub kept: Vec<Kept>,
}

/// `source` with every preprocessor conditional whose outcome is known removed: the lines of the taken branch
/// stay, the directive lines and the untaken branches go (see the module docs).
pub fn resolve_conditionals(source: &str) -> Result<String, ResolveError> {
    resolve(source).map(|r| r.source)
}

/// [`resolve_conditionals`], also reporting the groups kept verbatim.
pub fn resolve(source: &str) -> Result<Resolved, ResolveError> {
    let phys: Vec<&str> = {
        let body = source.strip_suffix('\n').unwrap_or(source);
        if source.is_empty() {
            Vec::new()
        } else {
            body.split('\n').collect()
        }
    };
    let lines = logical_lines(&phys);
    let tree = build_tree(&lines)?;
    let mut w = Walker {
        phys: &phys,
        lines: &lines,
        macros: HashMap::new(),
        out: Vec::new(),
        kept: Vec::new(),
    };
    w.walk(&tree);
    let mut text = String::with_capacity(source.len());
    let mut blank_run = false;
    for l in &w.out {
        let blank = l.trim().is_empty();
        if blank && blank_run {
            continue;
        }
        blank_run = blank;
        text.push_str(l);
        text.push('\n');
    }
    if !source.ends_with('\n') && text.ends_with('\n') {
        text.pop();
    }
    Ok(Resolved {
        source: text,
        kept: w.kept,
    })
}

// ---------------------------------------------------------------------------------------------------------------
// Lines

/// One logical line: physical lines `first..=last` joined by backslash-newline continuations.
struct Line {
    first: usize,
    last: usize,
    /// The directive on this line, if it is one: its name (`if`, `define`, …) and the rest, comments removed.
    directive: Option<(String, String)>,
}

fn logical_lines(phys: &[&str]) -> Vec<Line> {
    // physical lines from..=returned index joined by backslash-newline continuations
    let join = |from: usize| {
        let mut joined = String::new();
        let mut i = from;
        loop {
            let l = phys[i].strip_suffix('\r').unwrap_or(phys[i]);
            match l.strip_suffix('\\') {
                Some(cont) if i + 1 < phys.len() => {
                    joined.push_str(cont);
                    i += 1;
                }
                _ => {
                    joined.push_str(l);
                    return (joined, i);
                }
            }
        }
    };
    let mut out = Vec::new();
    let mut in_block = false;
    let mut i = 0;
    while i < phys.len() {
        let started_in_comment = in_block;
        let (text, mut last) = join(i);
        let mut clean = strip_comments(&text, &mut in_block);
        let is_directive = !started_in_comment && clean.trim_start().starts_with('#');
        // A block comment opened on a directive line belongs to the directive up to its end.
        while is_directive && in_block && last + 1 < phys.len() {
            let (text, l) = join(last + 1);
            clean.push_str(&strip_comments(&text, &mut in_block));
            last = l;
        }
        let directive = is_directive.then(|| {
            let rest = clean.trim_start()[1..].trim_start();
            let n = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            (rest[..n].to_string(), rest[n..].trim().to_string())
        });
        out.push(Line {
            first: i,
            last,
            directive,
        });
        i = last + 1;
    }
    out
}

/// `text` with its comments replaced by one space each (string and character literals left alone); `in_block`
/// carries an unterminated block comment from line to line.
fn strip_comments(text: &str, in_block: &mut bool) -> String {
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if *in_block {
            if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                *in_block = false;
                out.push(b' ');
                i += 2;
            } else {
                i += 1;
            }
            continue;
        }
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                out.push(b' ');
                break;
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                *in_block = true;
                i += 2;
            }
            q @ (b'"' | b'\'') => {
                // a literal ends at its closing quote or at the end of the line
                out.push(q);
                i += 1;
                while i < b.len() {
                    out.push(b[i]);
                    if b[i] == b'\\' && i + 1 < b.len() {
                        out.push(b[i + 1]);
                        i += 2;
                        continue;
                    }
                    i += 1;
                    if b[i - 1] == q {
                        break;
                    }
                }
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    if *in_block {
        out.push(b' ');
    }
    // Only ASCII bytes were removed or inserted between whole characters: still UTF-8.
    String::from_utf8(out).unwrap_or_default()
}

// ---------------------------------------------------------------------------------------------------------------
// Group tree

enum Item {
    Line(usize),
    Group(Group),
}

struct Group {
    branches: Vec<Branch>,
    /// logical index of the `#endif`
    end: usize,
    else_at: Option<usize>,
}

struct Branch {
    /// logical index of the `#if` / `#elif` / `#else`
    head: usize,
    cond: Cond,
    body: Vec<Item>,
}

enum Cond {
    Expr(String),
    Defined(String),
    NotDefined(String),
    Else,
}

fn build_tree(lines: &[Line]) -> Result<Vec<Item>, ResolveError> {
    let mut root = Vec::new();
    let mut open: Vec<Group> = Vec::new();
    fn body<'a>(root: &'a mut Vec<Item>, open: &'a mut [Group]) -> &'a mut Vec<Item> {
        match open.last_mut() {
            Some(g) => &mut g.branches.last_mut().expect("a group has a branch").body,
            None => root,
        }
    }
    for (i, l) in lines.iter().enumerate() {
        let line = l.first + 1;
        let Some((name, rest)) = &l.directive else {
            body(&mut root, &mut open).push(Item::Line(i));
            continue;
        };
        let cond = match name.as_str() {
            "if" => Some(Cond::Expr(rest.clone())),
            "ifdef" => Some(Cond::Defined(rest.clone())),
            "ifndef" => Some(Cond::NotDefined(rest.clone())),
            _ => None,
        };
        if let Some(cond) = cond {
            open.push(Group {
                branches: vec![Branch {
                    head: i,
                    cond,
                    body: Vec::new(),
                }],
                end: 0,
                else_at: None,
            });
            continue;
        }
        let cond = match name.as_str() {
            "elif" => Some(Cond::Expr(rest.clone())),
            "elifdef" => Some(Cond::Defined(rest.clone())),
            "elifndef" => Some(Cond::NotDefined(rest.clone())),
            "else" => Some(Cond::Else),
            _ => None,
        };
        if let Some(cond) = cond {
            let Some(g) = open.last_mut() else {
                return Err(ResolveError::Unmatched {
                    line,
                    directive: name.clone(),
                });
            };
            if let Some(e) = g.else_at {
                return Err(ResolveError::AfterElse {
                    line,
                    directive: name.clone(),
                    else_line: lines[e].first + 1,
                });
            }
            if matches!(cond, Cond::Else) {
                g.else_at = Some(i);
            }
            g.branches.push(Branch {
                head: i,
                cond,
                body: Vec::new(),
            });
            continue;
        }
        if name == "endif" {
            let Some(mut g) = open.pop() else {
                return Err(ResolveError::Unmatched {
                    line,
                    directive: name.clone(),
                });
            };
            g.end = i;
            body(&mut root, &mut open).push(Item::Group(g));
            continue;
        }
        body(&mut root, &mut open).push(Item::Line(i));
    }
    if let Some(g) = open.pop() {
        let l = &lines[g.branches[0].head];
        return Err(ResolveError::Unterminated {
            line: l.first + 1,
            directive: l
                .directive
                .as_ref()
                .map(|d| d.0.clone())
                .unwrap_or_default(),
        });
    }
    Ok(root)
}

// ---------------------------------------------------------------------------------------------------------------
// Walking the tree

#[derive(Clone)]
enum Macro {
    Object(String),
    Function,
    /// `#undef`ined
    Undefined,
    /// defined or undefined inside a group kept verbatim: unknown from there on
    Unknown,
}

struct Walker<'a> {
    phys: &'a [&'a str],
    lines: &'a [Line],
    macros: HashMap<String, Macro>,
    out: Vec<Cow<'a, str>>,
    kept: Vec<Kept>,
}

impl<'a> Walker<'a> {
    fn walk(&mut self, items: &[Item]) {
        'items: for item in items {
            match item {
                Item::Line(i) => {
                    let l = &self.lines[*i];
                    if let Some((name, rest)) = &l.directive {
                        match name.as_str() {
                            "define" => self.define(rest),
                            "undef" => {
                                if let Some(n) = leading_ident(rest) {
                                    self.macros.insert(n.to_string(), Macro::Undefined);
                                }
                            }
                            _ => {}
                        }
                    }
                    self.out.extend(
                        self.phys[l.first..=l.last]
                            .iter()
                            .map(|l| Cow::Borrowed(*l)),
                    );
                }
                Item::Group(g) => {
                    for b in &g.branches {
                        match self.condition(&b.cond) {
                            Ok(true) => {
                                self.walk(&b.body);
                                continue 'items;
                            }
                            Ok(false) => {}
                            Err(reason) => {
                                self.keep(g, b.head, reason);
                                continue 'items;
                            }
                        }
                    }
                }
            }
        }
    }

    fn define(&mut self, rest: &str) {
        let Some(name) = leading_ident(rest) else {
            return;
        };
        let after = &rest[name.len()..];
        let m = if after.starts_with('(') {
            Macro::Function
        } else {
            Macro::Object(after.trim().to_string())
        };
        self.macros.insert(name.to_string(), m);
    }

    fn condition(&self, c: &Cond) -> Result<bool, String> {
        match c {
            Cond::Else => Ok(true),
            Cond::Defined(n) | Cond::NotDefined(n) => {
                let name = leading_ident(n).ok_or_else(|| "no macro name given".to_string())?;
                let d = self.is_defined(name)?;
                Ok(d == matches!(c, Cond::Defined(_)))
            }
            Cond::Expr(e) => {
                let toks = tokenize(e)?;
                let toks = self.expand(&toks, &mut Vec::new())?;
                if toks.is_empty() {
                    return Err("empty expression".into());
                }
                let mut p = Parser { t: &toks, i: 0 };
                let ast = p.ternary()?;
                if p.i != toks.len() {
                    return Err(format!("unexpected `{}`", toks[p.i]));
                }
                Ok(eval(&ast)?.v != 0)
            }
        }
    }

    fn is_defined(&self, name: &str) -> Result<bool, String> {
        match self.macros.get(name) {
            Some(Macro::Object(_) | Macro::Function) => Ok(true),
            Some(Macro::Undefined) => Ok(false),
            Some(Macro::Unknown) => Err(format!(
                "`{name}` is (un)defined inside a group kept verbatim"
            )),
            None if reserved(name) => Err(format!("`{name}` may be predefined by the compiler")),
            None => Ok(false),
        }
    }

    /// Macro-expand `toks` (with `defined` evaluated) as the preprocessor does; `hide` holds the macros being
    /// expanded (a macro does not expand inside itself).
    fn expand(&self, toks: &[Tok], hide: &mut Vec<String>) -> Result<Vec<Tok>, String> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < toks.len() {
            let Tok::Ident(name) = &toks[i] else {
                out.push(toks[i].clone());
                i += 1;
                continue;
            };
            i += 1;
            if name == "defined" {
                let operand = match (toks.get(i), toks.get(i + 1), toks.get(i + 2)) {
                    (Some(Tok::Ident(n)), _, _) => {
                        i += 1;
                        n
                    }
                    (Some(Tok::Punct("(")), Some(Tok::Ident(n)), Some(Tok::Punct(")"))) => {
                        i += 3;
                        n
                    }
                    _ => return Err("malformed `defined`".into()),
                };
                out.push(Tok::Num(Val::int(self.is_defined(operand)? as i64)));
                continue;
            }
            if hide.iter().any(|h| h == name) {
                out.push(Tok::Num(Val::int(0)));
                continue;
            }
            match self.macros.get(name.as_str()) {
                Some(Macro::Object(v)) => {
                    let body = tokenize(v).map_err(|e| format!("macro `{name}`: {e}"))?;
                    hide.push(name.clone());
                    let r = self.expand(&body, hide);
                    hide.pop();
                    out.extend(r?);
                }
                Some(Macro::Function) => return Err(format!("function-like macro `{name}`")),
                Some(Macro::Unknown) => {
                    return Err(format!(
                        "`{name}` is (un)defined inside a group kept verbatim"
                    ))
                }
                Some(Macro::Undefined) | None => {
                    let v = match name.as_str() {
                        "true" => 1,
                        "false" => 0,
                        _ if reserved(name) && !self.macros.contains_key(name.as_str()) => {
                            return Err(format!("`{name}` may be predefined by the compiler"))
                        }
                        _ => 0,
                    };
                    out.push(Tok::Num(Val::int(v)));
                }
            }
        }
        Ok(out)
    }

    /// Emit group `g` verbatim after a note; every name it (un)defines becomes unknown.
    fn keep(&mut self, g: &Group, at: usize, reason: String) {
        let head = &self.lines[g.branches[0].head];
        let at_line = &self.lines[at];
        let directive = at_line
            .directive
            .as_ref()
            .map(|(n, r)| {
                if r.is_empty() {
                    format!("#{n}")
                } else {
                    format!("#{n} {r}")
                }
            })
            .unwrap_or_default();
        let note = format!(
            "{NOTE_PREFIX} (line {}): cannot evaluate `{directive}` (line {}): {reason}",
            head.first + 1,
            at_line.first + 1
        );
        self.kept.push(Kept {
            line: head.first + 1,
            at: at_line.first + 1,
            directive,
            reason,
        });
        self.out.push(Cow::Owned(note));
        let end = &self.lines[g.end];
        self.out.extend(
            self.phys[head.first..=end.last]
                .iter()
                .map(|l| Cow::Borrowed(*l)),
        );
        self.forget(g);
    }

    fn forget(&mut self, g: &Group) {
        for b in &g.branches {
            for item in &b.body {
                match item {
                    Item::Line(i) => {
                        if let Some((name, rest)) = &self.lines[*i].directive {
                            if name == "define" || name == "undef" {
                                if let Some(n) = leading_ident(rest) {
                                    self.macros.insert(n.to_string(), Macro::Unknown);
                                }
                            }
                        }
                    }
                    Item::Group(inner) => self.forget(inner),
                }
            }
        }
    }
}

fn leading_ident(s: &str) -> Option<&str> {
    let s = s.trim_start();
    let n = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    let id = &s[..n];
    (!id.is_empty() && !id.as_bytes()[0].is_ascii_digit()).then_some(id)
}

/// Identifiers reserved to the implementation (`__x`, `_X`): the compiler may predefine them.
fn reserved(name: &str) -> bool {
    let b = name.as_bytes();
    b.len() >= 2 && b[0] == b'_' && (b[1] == b'_' || b[1].is_ascii_uppercase())
}

// ---------------------------------------------------------------------------------------------------------------
// Expressions

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Val {
    /// the bits; signed values as two's complement
    v: u64,
    unsigned: bool,
}

impl Val {
    fn int(v: i64) -> Val {
        Val {
            v: v as u64,
            unsigned: false,
        }
    }
    fn s(self) -> i64 {
        self.v as i64
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Num(Val),
    Ident(String),
    Punct(&'static str),
}

impl fmt::Display for Tok {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Tok::Num(v) if v.unsigned => write!(f, "{}u", v.v),
            Tok::Num(v) => write!(f, "{}", v.s()),
            Tok::Ident(s) => f.write_str(s),
            Tok::Punct(p) => f.write_str(p),
        }
    }
}

const PUNCTS: [&str; 25] = [
    "<<", ">>", "<=", ">=", "==", "!=", "&&", "||", "(", ")", "!", "~", "*", "/", "%", "+", "-",
    "<", ">", "&", "^", "|", "?", ":", ",",
];

fn tokenize(s: &str) -> Result<Vec<Tok>, String> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c.is_ascii_digit()
            || (c == b'.' && b.get(i + 1).is_some_and(|d| d.is_ascii_digit()))
        {
            // a preprocessing number: digits, letters, `_`, `.`, and a sign after an exponent
            let start = i;
            i += 1;
            while i < b.len() {
                let d = b[i];
                let sign =
                    (d == b'+' || d == b'-') && matches!(b[i - 1], b'e' | b'E' | b'p' | b'P');
                if !(sign || d.is_ascii_alphanumeric() || d == b'_' || d == b'.') {
                    break;
                }
                i += 1;
            }
            out.push(Tok::Num(number(&s[start..i])?));
        } else if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            out.push(Tok::Ident(s[start..i].to_string()));
        } else if c == b'\'' {
            return Err("character literal".into());
        } else if c == b'"' {
            return Err("string literal".into());
        } else if let Some(p) = PUNCTS.iter().find(|p| s[i..].starts_with(**p)) {
            out.push(Tok::Punct(p));
            i += p.len();
        } else {
            let ch = s[i..].chars().next().unwrap_or('?');
            return Err(format!("unexpected character `{ch}`"));
        }
    }
    Ok(out)
}

fn number(t: &str) -> Result<Val, String> {
    let lower = t.to_ascii_lowercase();
    let (digits, radix) = if let Some(h) = lower.strip_prefix("0x") {
        (h, 16)
    } else if let Some(b) = lower.strip_prefix("0b") {
        (b, 2)
    } else if lower.len() > 1 && lower.starts_with('0') && lower.as_bytes()[1].is_ascii_digit() {
        (&lower[1..], 8)
    } else {
        (lower.as_str(), 10)
    };
    let n = digits
        .find(|c: char| !c.is_digit(radix))
        .unwrap_or(digits.len());
    let (digits, suffix) = digits.split_at(n);
    let suffix_ok = matches!(suffix, "" | "u" | "l" | "ul" | "lu" | "ll" | "ull" | "llu");
    if digits.is_empty() || !suffix_ok {
        let what = if radix == 10 && (suffix.starts_with('.') || suffix.starts_with('e'))
            || suffix.ends_with('f')
        {
            "floating-point literal"
        } else {
            "malformed number"
        };
        return Err(format!("{what} `{t}`"));
    }
    let v = u64::from_str_radix(digits, radix)
        .map_err(|_| format!("integer literal `{t}` out of range"))?;
    Ok(Val {
        v,
        unsigned: suffix.contains('u') || v > i64::MAX as u64,
    })
}

#[derive(Debug)]
enum Expr {
    Num(Val),
    Unary(&'static str, Box<Expr>),
    Binary(&'static str, Box<Expr>, Box<Expr>),
    Cond(Box<Expr>, Box<Expr>, Box<Expr>),
}

struct Parser<'t> {
    t: &'t [Tok],
    i: usize,
}

/// Binary operators by C precedence, loosest first.
const LEVELS: [&[&str]; 10] = [
    &["||"],
    &["&&"],
    &["|"],
    &["^"],
    &["&"],
    &["==", "!="],
    &["<", "<=", ">", ">="],
    &["<<", ">>"],
    &["+", "-"],
    &["*", "/", "%"],
];

impl Parser<'_> {
    fn peek(&self) -> Option<&'static str> {
        match self.t.get(self.i) {
            Some(Tok::Punct(p)) => Some(p),
            _ => None,
        }
    }

    fn expect(&mut self, p: &str) -> Result<(), String> {
        if self.peek() == Some(p) {
            self.i += 1;
            Ok(())
        } else {
            Err(match self.t.get(self.i) {
                Some(t) => format!("expected `{p}`, found `{t}`"),
                None => format!("expected `{p}` at the end"),
            })
        }
    }

    fn ternary(&mut self) -> Result<Expr, String> {
        let c = self.binary(0)?;
        if self.peek() != Some("?") {
            return Ok(c);
        }
        self.i += 1;
        let a = self.ternary()?;
        self.expect(":")?;
        let b = self.ternary()?;
        Ok(Expr::Cond(Box::new(c), Box::new(a), Box::new(b)))
    }

    fn binary(&mut self, level: usize) -> Result<Expr, String> {
        if level == LEVELS.len() {
            return self.unary();
        }
        let mut lhs = self.binary(level + 1)?;
        while let Some(op) = self.peek().filter(|p| LEVELS[level].contains(p)) {
            self.i += 1;
            let rhs = self.binary(level + 1)?;
            lhs = Expr::Binary(op, Box::new(lhs), Box::new(rhs));
        }
        Ok(lhs)
    }

    fn unary(&mut self) -> Result<Expr, String> {
        match self.t.get(self.i) {
            Some(Tok::Punct(op @ ("!" | "~" | "-" | "+"))) => {
                self.i += 1;
                Ok(Expr::Unary(op, Box::new(self.unary()?)))
            }
            Some(Tok::Punct("(")) => {
                self.i += 1;
                let e = self.ternary()?;
                self.expect(")")?;
                Ok(e)
            }
            Some(Tok::Num(v)) => {
                self.i += 1;
                Ok(Expr::Num(*v))
            }
            Some(t) => Err(format!("unexpected `{t}`")),
            None => Err("expression ends early".into()),
        }
    }
}

/// Whether `e` has an unsigned type (C's usual arithmetic conversions over intmax_t / uintmax_t).
fn unsigned(e: &Expr) -> bool {
    match e {
        Expr::Num(v) => v.unsigned,
        Expr::Unary("!", _) => false,
        Expr::Unary(_, a) => unsigned(a),
        Expr::Binary(op, a, b) => match *op {
            "||" | "&&" | "==" | "!=" | "<" | "<=" | ">" | ">=" => false,
            "<<" | ">>" => unsigned(a),
            _ => unsigned(a) || unsigned(b),
        },
        Expr::Cond(_, a, b) => unsigned(a) || unsigned(b),
    }
}

fn eval(e: &Expr) -> Result<Val, String> {
    let u = unsigned(e);
    let mk = |v: u64| Val { v, unsigned: u };
    let truth = |b: bool| Val::int(b as i64);
    Ok(match e {
        Expr::Num(v) => *v,
        Expr::Unary(op, a) => {
            let a = eval(a)?;
            match *op {
                "!" => truth(a.v == 0),
                "~" => mk(!a.v),
                "-" => mk(a.v.wrapping_neg()),
                _ => mk(a.v),
            }
        }
        Expr::Cond(c, a, b) => {
            let v = if eval(c)?.v != 0 { eval(a)? } else { eval(b)? };
            mk(v.v)
        }
        Expr::Binary("&&", a, b) => truth(eval(a)?.v != 0 && eval(b)?.v != 0),
        Expr::Binary("||", a, b) => truth(eval(a)?.v != 0 || eval(b)?.v != 0),
        Expr::Binary(op @ ("<<" | ">>"), a, b) => {
            let (x, n) = (eval(a)?, eval(b)?);
            // the shift count as a signed amount; a negative count shifts the other way (as GCC does)
            let n = if n.unsigned && n.v > i64::MAX as u64 {
                i64::MAX
            } else {
                n.s()
            };
            let left = (*op == "<<") == (n >= 0);
            let n = n.unsigned_abs();
            mk(match (left, x.unsigned) {
                (true, _) => {
                    if n >= 64 {
                        0
                    } else {
                        x.v << n
                    }
                }
                (false, true) => {
                    if n >= 64 {
                        0
                    } else {
                        x.v >> n
                    }
                }
                (false, false) => (x.s() >> n.min(63)) as u64,
            })
        }
        Expr::Binary(op, a, b) => {
            let (x, y) = (eval(a)?, eval(b)?);
            let both = x.unsigned || y.unsigned;
            match *op {
                "==" => truth(x.v == y.v),
                "!=" => truth(x.v != y.v),
                "<" | "<=" | ">" | ">=" => {
                    let ord = if both {
                        x.v.cmp(&y.v)
                    } else {
                        x.s().cmp(&y.s())
                    };
                    truth(match *op {
                        "<" => ord.is_lt(),
                        "<=" => ord.is_le(),
                        ">" => ord.is_gt(),
                        _ => ord.is_ge(),
                    })
                }
                "/" | "%" if y.v == 0 => return Err("division by zero".into()),
                "/" => mk(if both {
                    x.v / y.v
                } else {
                    x.s().wrapping_div(y.s()) as u64
                }),
                "%" => mk(if both {
                    x.v % y.v
                } else {
                    x.s().wrapping_rem(y.s()) as u64
                }),
                "*" => mk(x.v.wrapping_mul(y.v)),
                "+" => mk(x.v.wrapping_add(y.v)),
                "-" => mk(x.v.wrapping_sub(y.v)),
                "&" => mk(x.v & y.v),
                "^" => mk(x.v ^ y.v),
                "|" => mk(x.v | y.v),
                _ => return Err(format!("operator `{op}`")),
            }
        }
    })
}

// ---------------------------------------------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;

    fn r(s: &str) -> String {
        resolve_conditionals(s).unwrap()
    }

    /// The value of `expr` in `#if`, after `defs`.
    fn value(defs: &str, expr: &str) -> bool {
        let src = format!("{defs}\n#if {expr}\nyes\n#else\nno\n#endif\n");
        let out = resolve(&src).unwrap();
        assert!(out.kept.is_empty(), "{expr}: kept {:?}", out.kept);
        match out.source.lines().last() {
            Some("yes") => true,
            Some("no") => false,
            other => panic!("{expr}: {other:?}"),
        }
    }

    #[test]
    fn precedence_and_arithmetic() {
        for (e, want) in [
            ("1 + 2 * 3 == 7", true),
            ("(1 + 2) * 3 == 9", true),
            ("1 << 2 + 1 == 8", true),
            ("1 | 2 ^ 3 & 1", true), // 1 | (2 ^ (3 & 1)) = 3
            ("(1 | 2 ^ 3 & 1) == 3", true),
            ("6 & 3 == 3", false), // 6 & (3 == 3) = 0
            ("1 || 0 && 0", true), // || binds looser than &&
            ("0 && 1 || 1", true),
            ("!0 + 1 == 2", true),
            ("-1 < 0", true),
            ("-1 < 0u", false), // unsigned comparison
            ("~0 == -1", true),
            ("~0u > 0", true),
            ("10 / 3 == 3 && 10 % 3 == 1 && -7 / 2 == -3", true),
            (
                "0x10 == 16 && 010 == 8 && 0b101 == 5 && 16UL == 16 && 0xffLL == 255",
                true,
            ),
            ("1 ? 2 : 0", true),
            ("0 ? 1 : 0 ? 1 : 0", false), // right associative
            ("1 ? 0 : 1 ? 1 : 1", false),
            ("(0 ? 1u : -1) > 0", true), // common type of ?: is unsigned
            ("2 - 1 - 1 == 0", true),    // left associative
            ("64 >> 2 >> 1 == 8", true),
            ("-8 >> 1 == -4", true),
            ("1 < 2 == 1", true),
            ("3 > 2 > 1", false), // (3 > 2) > 1
            ("true && !false", true),
            ("0 && 1 / 0", false), // not evaluated: no division by zero
            ("1 || 1 / 0", true),
            ("9223372036854775807 + 1 < 0", true), // wraps
            ("18446744073709551615 == -1", true),  // too large for intmax_t: unsigned
        ] {
            assert_eq!(value("", e), want, "{e}");
        }
    }

    #[test]
    fn macros_defined_and_undefined_identifiers() {
        let defs = "#define A 4\n#define B (A * 2)\n#define C A + 1\n#define EMPTY\n#define SELF SELF\n#define F(x) x";
        for (e, want) in [
            ("A == 4", true),
            ("B == 8", true),
            ("C * 2 == 6", true), // token substitution: A + 1 * 2
            ("defined(EMPTY) && defined EMPTY", true),
            ("defined F", true),
            ("!defined(NOPE) && NOPE == 0", true),
            ("SELF == 0", true), // a macro does not expand inside itself
            ("UNDEFINED_THING + 1 == 1", true),
        ] {
            assert_eq!(value(defs, e), want, "{e}");
        }
        // #undef, then #ifdef / #ifndef
        assert_eq!(
            r("#define X 1\n#undef X\n#ifdef X\na\n#else\nb\n#endif\n#ifndef X\nc\n#endif\n"),
            "#define X 1\n#undef X\nb\nc\n"
        );
        // macros take effect in source order
        assert_eq!(
            r("#if Y\na\n#endif\n#define Y 1\n#if Y\nb\n#endif\n"),
            "#define Y 1\nb\n"
        );
    }

    #[test]
    fn constexpr_is_not_a_macro() {
        // `N` is not a macro: 0 in `#if`, as the preprocessor has it
        assert_eq!(
            r("constexpr int N = 4;\n#if N == 4\na\n#else\nb\n#endif\n"),
            "constexpr int N = 4;\nb\n"
        );
    }

    #[test]
    fn elif_chains() {
        let src = "#define G 3\n#if G == 1\none\n#elif G == 2\ntwo\n#elif G == 3\nthree\n#elif G == 3\nthree again\n#else\nother\n#endif\nend\n";
        assert_eq!(r(src), "#define G 3\nthree\nend\n");
        assert_eq!(r("#if 0\na\n#elif 0\nb\n#else\nc\n#endif\n"), "c\n");
        assert_eq!(r("#if 0\na\n#elif 0\nb\n#endif\n"), "");
        assert_eq!(
            r("#define D\n#ifdef Q\na\n#elifdef D\nb\n#endif\n"),
            "#define D\nb\n"
        );
        // a later #elif is not evaluated once a branch is taken (here: it could not be)
        let out = resolve("#if 1\na\n#elif F(1)\nb\n#endif\n").unwrap();
        assert_eq!((out.source.as_str(), out.kept.len()), ("a\n", 0));
    }

    #[test]
    fn nesting() {
        let src = "\
#define A 1
#define B 0
#if A
a1
#  if B
ab
#  else
a-not-b
#    if A && !B
deep
#    endif
#  endif
a2
#else
#  if 1
dead nested
#  endif
#endif
";
        assert_eq!(r(src), "#define A 1\n#define B 0\na1\na-not-b\ndeep\na2\n");
    }

    #[test]
    fn defines_in_dead_branches_do_not_take_effect() {
        let src = "\
#if 0
#define X 1
#undef Y
#else
#define Z 1
#endif
#define Y 1
#if 0
#  if 1
#  define Y2 1
#  endif
#endif
#if defined(X) || defined(Y2)
bad
#elif Z && Y
good
#endif
";
        assert_eq!(r(src), "#define Z 1\n#define Y 1\ngood\n");
        // redefinition in the taken branch of a group with a dead one (the emitted WS_CLUSTER pattern)
        let src = "#define K 0\n#if K\n#define W __cluster_dims__(1, 2, 1)\n#else\n#define W\n#endif\n#if defined(W)\nw\n#endif\n";
        assert_eq!(r(src), "#define K 0\n#define W\nw\n");
    }

    #[test]
    fn unresolvable_groups_are_kept_verbatim() {
        let src = "\
#define F(x) (x + 1)
before
#if 0
gone
#elif F(1) == 2
#  if 1
nested stays
#  endif
#define M 1
maybe
#else
other
#endif
#if M
after-M
#endif
#ifdef __CUDA_ARCH__
device
#endif
#if 'a' == 97
char
#endif
#if 1 / 0
zero
#endif
#if 1 +
bad
#endif
#if 1
kept
#endif
";
        let out = resolve(src).unwrap();
        let reasons: Vec<&str> = out.kept.iter().map(|k| k.reason.as_str()).collect();
        assert_eq!(out.kept.len(), 6, "{reasons:?}");
        assert!(
            reasons[0].contains("function-like macro `F`"),
            "{reasons:?}"
        );
        assert_eq!((out.kept[0].line, out.kept[0].at), (3, 5));
        assert_eq!(out.kept[0].directive, "#elif F(1) == 2");
        assert!(reasons[1].contains("`M`"), "{reasons:?}"); // defined inside the kept group: unknown after it
        assert!(reasons[2].contains("predefined"), "{reasons:?}");
        assert!(reasons[3].contains("character literal"), "{reasons:?}");
        assert!(reasons[4].contains("division by zero"), "{reasons:?}");
        assert!(reasons[5].contains("ends early"), "{reasons:?}");
        // every line of the kept groups is there, in order, after its note
        let s = &out.source;
        let group = "#if 0\ngone\n#elif F(1) == 2\n#  if 1\nnested stays\n#  endif\n#define M 1\nmaybe\n#else\nother\n#endif\n";
        assert!(s.contains(&format!("{NOTE_PREFIX} (line 3): cannot evaluate `#elif F(1) == 2` (line 5): function-like macro `F`\n{group}")), "{s}");
        assert!(
            s.contains("#if M\nafter-M\n#endif\n")
                && s.contains("#ifdef __CUDA_ARCH__\ndevice\n#endif\n"),
            "{s}"
        );
        assert!(s.ends_with("#if 1 +\nbad\n#endif\nkept\n"), "{s}");
        assert_eq!(s.matches(NOTE_PREFIX).count(), 6);
        // a known outcome elsewhere is still resolved; a later #define makes the name known again
        assert_eq!(
            r("#if 1\n#define M 1\n#endif\n#if M\nm\n#endif\n"),
            "#define M 1\nm\n"
        );
        let out =
            resolve("#if F(1)\n#define M 1\n#endif\n#define M 2\n#if M == 2\nm\n#endif\n").unwrap();
        assert_eq!(out.kept.len(), 1);
        assert!(out.source.ends_with("#endif\n#define M 2\nm\n"));
    }

    #[test]
    fn unbalanced_is_an_error_with_its_line() {
        let e = resolve_conditionals("a\n#if 1\nb\n#endif\n#endif\n").unwrap_err();
        assert_eq!(
            e,
            ResolveError::Unmatched {
                line: 5,
                directive: "endif".into()
            }
        );
        assert_eq!(e.to_string(), "line 5: #endif without #if");
        assert_eq!(resolve_conditionals("#else\n").unwrap_err().line(), 1);
        assert_eq!(
            resolve_conditionals("x\n#elif 1\n").unwrap_err(),
            ResolveError::Unmatched {
                line: 2,
                directive: "elif".into()
            }
        );
        let e = resolve_conditionals("#if 1\n#else\n#elif 1\n#endif\n").unwrap_err();
        assert_eq!(
            e,
            ResolveError::AfterElse {
                line: 3,
                directive: "elif".into(),
                else_line: 2
            }
        );
        assert_eq!(e.to_string(), "line 3: #elif after #else (line 2)");
        let e = resolve_conditionals("#if 1\n#if 0\n#endif\nx\n").unwrap_err();
        assert_eq!(
            e,
            ResolveError::Unterminated {
                line: 1,
                directive: "if".into()
            }
        );
        assert_eq!(e.to_string(), "line 1: #if without #endif");
        // an error in a dead branch is still an error (the structure is checked first)
        assert!(resolve_conditionals("#if 0\n#else\n#else\n#endif\n").is_err());
    }

    #[test]
    fn comments_continuations_and_spacing() {
        // comments in directives; a directive inside a block comment is not one
        let src = "#define A 1 // one\n#define B /* two */ 2\n/*\n#if 0\n*/\n#if A + B == 3 /* yes\n   still a comment */\nx\n#endif // A\n";
        assert_eq!(
            r(src),
            "#define A 1 // one\n#define B /* two */ 2\n/*\n#if 0\n*/\nx\n"
        );
        // backslash continuations, in conditions and in kept defines
        let src = "#define LONG 1 + \\\n  2\n#if LONG == \\\n 3\nyes\n#endif\n";
        assert_eq!(r(src), "#define LONG 1 + \\\n  2\nyes\n");
        // `# if` with space; a string holding `/*` does not open a comment
        assert_eq!(
            r("#define S \"/*\"\n  #  if 1\nz\n  # endif\n#if 0\nq\n#endif\n"),
            "#define S \"/*\"\nz\n"
        );
        // runs of blank lines collapse to one; no trailing newline stays none
        assert_eq!(r("a\n\n#if 0\nb\n#endif\n\n\nc"), "a\n\nc");
        assert_eq!(r("a\n\n\n\nb\n"), "a\n\nb\n");
        assert_eq!(r(""), "");
        // CRLF line ends
        assert_eq!(r("#if 0\r\na\r\n#else\r\nb\r\n#endif\r\n"), "b\r\n");
        // other directives are kept
        assert_eq!(
            r("#pragma once\n#if 1\n#error no\n#endif\n"),
            "#pragma once\n#error no\n"
        );
    }
}
