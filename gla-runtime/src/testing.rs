//! Helpers for tests that need NVRTC or a GPU: they skip loudly (`SKIPPED <test>: <reason>`) where the hardware or
//! library is missing, and fail instead when the environment says it must be there:
//! `GLA_REQUIRE_GPU=1` (set by `.gpu/run-all.sh` on the GPU host) and `GLA_REQUIRE_NVRTC=1` (set by CI).

use crate::forward::Gla;
use crate::nvrtc;
use std::sync::OnceLock;

fn env_on(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| v == "1" || v.eq_ignore_ascii_case("true"))
}

/// Whether `GLA_REQUIRE_GPU=1`: a missing GPU fails tests instead of skipping them.
pub fn gpu_required() -> bool {
    env_on("GLA_REQUIRE_GPU")
}

/// Whether `GLA_REQUIRE_NVRTC=1` (or `GLA_REQUIRE_GPU=1`): a missing NVRTC fails tests instead of skipping them.
pub fn nvrtc_required() -> bool {
    env_on("GLA_REQUIRE_NVRTC") || gpu_required()
}

/// Print `SKIPPED <test>: <reason>`. Written to the process's stderr directly (not through `eprintln!`, which the
/// test harness captures), so the line shows in every log, also for tests that pass.
pub fn skip(test: &str, reason: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {reason}");
}

/// A shared [`Gla`] for tests (one context and one kernel cache per test binary), or `None` after printing
/// `SKIPPED <test>: <reason>` when there is no driver, GPU or NVRTC. Panics with the reason if `GLA_REQUIRE_GPU=1`.
pub fn gpu_or_skip(test: &str) -> Option<Gla> {
    static GLA: OnceLock<Result<Gla, String>> = OnceLock::new();
    match GLA.get_or_init(|| Gla::new().map_err(|e| e.to_string())) {
        Ok(g) => Some(g.clone()),
        Err(reason) if gpu_required() => {
            panic!("{test}: GLA_REQUIRE_GPU=1 but no usable GPU: {reason}")
        }
        Err(reason) => {
            skip(test, reason);
            None
        }
    }
}

/// `true` when NVRTC 13 is usable; otherwise prints `SKIPPED <test>: <reason>` and returns `false`, or panics if
/// `GLA_REQUIRE_NVRTC=1`.
pub fn nvrtc_or_skip(test: &str) -> bool {
    match nvrtc::probe() {
        Ok(_) => true,
        Err(e) if nvrtc_required() => {
            panic!("{test}: GLA_REQUIRE_NVRTC=1 but NVRTC is unusable: {e}")
        }
        Err(e) => {
            skip(test, &e.to_string());
            false
        }
    }
}
