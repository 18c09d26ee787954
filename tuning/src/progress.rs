//! Progress bars (indicatif) with ETA, and log lines that show whether or not stderr is a terminal.

use indicatif::{ProgressBar, ProgressStyle};

/// A bar of `len` steps headed `what`. Drawn on stderr when it is a terminal; hidden otherwise (logs then get the
/// lines of [`say`] only).
pub fn bar(len: usize, what: &str) -> ProgressBar {
    let pb = ProgressBar::new(len as u64);
    let style = ProgressStyle::with_template(
        "{prefix} [{elapsed_precise}] {wide_bar} {pos}/{len} ETA {eta} {msg}",
    )
    .expect("a valid progress template")
    .progress_chars("=> ");
    pb.set_style(style);
    pb.set_prefix(what.to_string());
    pb
}

/// Print a line above the bar (or plainly, when the bar is hidden).
pub fn say(pb: &ProgressBar, line: impl AsRef<str>) {
    if pb.is_hidden() {
        println!("{}", line.as_ref());
    } else {
        pb.println(line.as_ref());
    }
}
