//! tuning/python/heatmap.py (the cache report's PNG heatmap) on a fixture index: the Markdown grid, and the PNG
//! where matplotlib is installed. Needs python3; skipped with a message where there is none.
use std::process::Command;

#[test]
fn heatmap_of_a_fixture_cache() {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/python/test_heatmap.py");
    let out = match Command::new("python3").arg(script).output() {
        Ok(o) => o,
        Err(e) => {
            println!("SKIPPED heatmap_of_a_fixture_cache: no python3 ({e})");
            return;
        }
    };
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    println!("{text}");
    assert!(
        out.status.success() && text.contains("test_heatmap: all ok"),
        "{script}:\n{text}"
    );
}
