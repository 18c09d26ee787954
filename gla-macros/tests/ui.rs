//! UI tests: one file per diagnostic (compile-fail, with the committed `.stderr`), and pass tests that declare a
//! gate and run it end to end on the CPU. Regenerate the `.stderr` files with `TRYBUILD=overwrite` and review
//! them.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    for category in [
        "attribute",
        "signature",
        "unsupported",
        "nonfinite",
        "positive",
        "param_range",
    ] {
        t.compile_fail(format!("tests/ui/{category}/*.rs"));
    }
    t.pass("tests/ui/pass/*.rs");
}
