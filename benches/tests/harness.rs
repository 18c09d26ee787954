//! CPU tests of the benchmark harness: fla is timed on the same gates as ours, and the report's strength axis and
//! forward.json (benches/python/test_report.py) hold together.
use std::path::Path;
use std::process::Command;

fn python_dir() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/python"))
}

/// Every strength of `tests::strengths` is in fla_bench.py's STRENGTHS with the same label and formula, and
/// nothing else is: fla and ours are timed on the same gates.
#[test]
fn fla_bench_times_the_same_gate_strengths() {
    let src = std::fs::read_to_string(python_dir().join("fla_bench.py")).unwrap();
    let table = src
        .split("STRENGTHS = {")
        .nth(1)
        .and_then(|s| s.split('}').next())
        .expect("STRENGTHS table in fla_bench.py");
    let entries: Vec<&str> = table
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with('"'))
        .collect();
    let all = tests::strengths::all();
    assert_eq!(
        entries.len(),
        all.len(),
        "fla_bench.py STRENGTHS has {} entries, tests::strengths {}: {entries:?}",
        entries.len(),
        all.len()
    );
    for (st, line) in all.iter().zip(&entries) {
        let want = format!("\"{}\": \"{}\",", st.label, st.fla_formula);
        assert_eq!(
            *line, want,
            "fla_bench.py STRENGTHS (same order as tests::strengths::all)"
        );
    }
    let report = std::fs::read_to_string(python_dir().join("report.py")).unwrap();
    let order: Vec<String> = all.iter().map(|s| format!("\"{}\"", s.label)).collect();
    assert!(
        report.contains(&format!("STRENGTH_ORDER = [{}]", order.join(", "))),
        "report.py STRENGTH_ORDER lists {order:?}"
    );
}

/// Runs a Python self-test script of `benches/python/` and asserts that it printed `<script stem>: all ok`; skipped
/// with a message where there is no python3 (the scripts need no torch or matplotlib).
fn python_self_test(test: &str, script: &str) {
    let path = python_dir().join(script);
    let out = match Command::new("python3").arg(&path).output() {
        Ok(o) => o,
        Err(e) => {
            println!("SKIPPED {test}: no python3 ({e})");
            return;
        }
    };
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let marker = format!("{}: all ok", script.trim_end_matches(".py"));
    assert!(
        out.status.success() && text.contains(&marker),
        "{}:\n{text}",
        path.display()
    );
}

/// report.py on a fixture run folder (test_report.py): forward.json rows, the strength table.
#[test]
fn report_builds_the_strength_axis() {
    python_self_test("report_builds_the_strength_axis", "test_report.py");
}

/// backward_report.py on fixture records (test_backward_report.py): backward.json's rows and backward.md's tables.
#[test]
fn backward_report_builds_its_tables() {
    python_self_test(
        "backward_report_builds_its_tables",
        "test_backward_report.py",
    );
}
