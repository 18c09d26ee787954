//! The built-in gates: registration, metadata, derivatives vs finite differences, the plain-Rust fns, and
//! snapshots of their CUDA (`GLA_UPDATE_SNAPSHOTS=1 cargo test -p gla --test builtins` rewrites them).

use gla::gates::*;
use gla::{Gate, GateShape};

const ALL: [(&str, GateShape, usize); 7] = [
    ("gated_retnet", GateShape::PerHead, 0),
    ("gla", GateShape::PerKey, 0),
    ("hgrn2", GateShape::PerKey, 1),
    ("mamba2", GateShape::PerHead, 1),
    ("mlstm", GateShape::PerHead, 0),
    ("retnet", GateShape::Fixed, 0),
    ("rwkv6", GateShape::PerKey, 0),
];

fn builtins() -> Vec<&'static dyn Gate> {
    vec![&GatedRetnet, &Gla, &Hgrn2, &Mamba2, &Mlstm, &Retnet, &Rwkv6]
}

#[test]
fn registry_lists_all_seven() {
    let reg = gla::core::registered_gates();
    let names: Vec<&str> = reg.iter().map(|g| g.name()).collect();
    let mut listed = gla::gates::BUILT_IN.to_vec();
    listed.sort();
    assert_eq!(listed, ALL.map(|a| a.0).to_vec(), "gla::gates::BUILT_IN");
    for (name, shape, np) in ALL {
        let g = reg
            .iter()
            .find(|g| g.name() == name)
            .unwrap_or_else(|| panic!("`{name}` not registered: {names:?}"));
        assert_eq!(g.shape(), shape, "{name}");
        assert_eq!(g.params().len(), np, "{name}");
        assert_eq!(g.cuda_ident(), format!("gla_gate_{name}"));
    }
}

#[test]
fn metadata() {
    assert_eq!(Gla.expr(), "log_sigmoid(x) / 16.0");
    assert_eq!(Mamba2.expr(), "-softplus(x) * exp(a)");
    assert_eq!(Hgrn2.expr(), "log(gamma + (1.0 - gamma) * sigmoid(x))");
    assert_eq!(Hgrn2.params()[0].name, "gamma");
    assert_eq!(Hgrn2.params()[0].range, Some((0.0, 1.0)));
    assert_eq!(Mamba2.params()[0].range, None);
    // Hashes: distinct, and stable (a changed value means every tuning cache key changes: bump deliberately).
    let mut hashes: Vec<u64> = builtins().iter().map(|g| g.content_hash()).collect();
    hashes.sort();
    hashes.dedup();
    assert_eq!(hashes.len(), 7);
    assert_ne!(
        Gla.content_hash(),
        GatedRetnet.content_hash(),
        "same expression, different name and shape"
    );
}

#[test]
fn plain_rust_fns_agree_with_the_gate() {
    for x in [-30.0f32, -3.0, -0.5, 0.0, 0.7, 4.0, 25.0] {
        let close = |a: f32, b: f64| {
            assert!(
                (a as f64 - b).abs() <= 1e-5 * (1.0 + b.abs()),
                "{a} vs {b} at x = {x}"
            )
        };
        close(gla(x), Gla.log_alpha(x as f64, &[]));
        close(mamba2(x, 0.3), Mamba2.log_alpha(x as f64, &[0.3f32 as f64]));
        close(mlstm(x), Mlstm.log_alpha(x as f64, &[]));
        close(gated_retnet(x), GatedRetnet.log_alpha(x as f64, &[]));
        close(hgrn2(x, 0.25), Hgrn2.log_alpha(x as f64, &[0.25]));
        close(rwkv6(x.min(10.0)), Rwkv6.log_alpha(x.min(10.0) as f64, &[]));
    }
    for h in 0..16 {
        let want = (1.0 - 2f64.powi(-5 - h)).ln();
        assert!(
            (Retnet.log_alpha(h as f64, &[]) - want).abs() < 1e-7 * want.abs(),
            "h = {h}"
        );
        assert!((retnet(h as f32) as f64 - want).abs() < 1e-5 * want.abs());
    }
}

/// xorshift64*: deterministic random points without a dependency.
struct Rng(u64);
impl Rng {
    fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let u = (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64;
        lo + (hi - lo) * u
    }
}

#[test]
fn derivatives_match_central_differences() {
    let mut rng = Rng(0x1234_5678_9abc_def1);
    for g in builtins() {
        let np = g.params().len();
        for _ in 0..500 {
            let x = if g.shape() == GateShape::Fixed {
                rng.uniform(0.0, 40.0)
            } else {
                rng.uniform(-12.0, 12.0)
            };
            let p: Vec<f64> = g
                .params()
                .iter()
                .map(|s| {
                    s.range
                        .map_or(rng.uniform(-2.0, 2.0), |(a, b)| rng.uniform(a, b))
                })
                .collect();
            let h = 1e-6 * (1.0 + x.abs());
            let fd = (g.log_alpha(x + h, &p) - g.log_alpha(x - h, &p)) / (2.0 * h);
            let d = g.dlog_alpha_dx(x, &p);
            assert!(
                (fd - d).abs() <= 1e-6 * (1.0 + d.abs()),
                "{}: d/dx at x = {x}, p = {p:?}: fd {fd}, symbolic {d}",
                g.name()
            );
            let mut grad = vec![f64::NAN; np];
            g.dlog_alpha_dparams(x, &p, &mut grad);
            for k in 0..np {
                let hk = 1e-6 * (1.0 + p[k].abs());
                let (mut a, mut b) = (p.clone(), p.clone());
                a[k] += hk;
                b[k] -= hk;
                let fd = (g.log_alpha(x, &a) - g.log_alpha(x, &b)) / (2.0 * hk);
                assert!(
                    (fd - grad[k]).abs() <= 1e-6 * (1.0 + grad[k].abs()),
                    "{}: d/d{} at x = {x}, p = {p:?}: fd {fd}, symbolic {}",
                    g.name(),
                    g.params()[k].name,
                    grad[k]
                );
            }
        }
    }
}

#[test]
fn log_alpha_is_nonpositive_and_finite_at_extremes() {
    for g in builtins() {
        let xs: Vec<f64> = if g.shape() == GateShape::Fixed {
            (0..1025).map(f64::from).collect()
        } else {
            vec![-1e4, -100.0, -1.0, 0.0, 1.0, 80.0, 700.0]
        };
        let p: Vec<f64> = g
            .params()
            .iter()
            .map(|s| s.range.map_or(0.5, |(_, b)| b))
            .collect();
        for x in xs {
            let v = g.log_alpha(x, &p);
            assert!(
                v <= 0.0 && !v.is_nan(),
                "{}: log α = {v} at x = {x}",
                g.name()
            );
            assert!(
                !g.dlog_alpha_dx(x, &p).is_nan(),
                "{}: d/dx NaN at x = {x}",
                g.name()
            );
        }
    }
}

#[test]
fn cuda_sources_are_self_contained() {
    for g in builtins() {
        let s = g.cuda_source();
        let id = g.cuda_ident();
        assert!(!s.contains("#include"), "{}", g.name());
        assert!(s.contains(&format!(
            "__device__ __forceinline__ float {id}(float x, const float* p)"
        )));
        assert!(s.contains(&format!(
            "__device__ __forceinline__ float {id}_dx(float x, const float* p)"
        )));
        assert!(s.contains(&format!(
            "__device__ __forceinline__ void {id}_dp(float x, const float* p, float* dp)"
        )));
        assert!(g.cuda_log2_acc() && s.contains(&format!("__device__ __forceinline__ float {id}_log2_acc(float x, const float* p, float acc)")));
        assert!(s.is_ascii(), "{}", g.name());
    }
}

#[test]
fn cuda_snapshots() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots");
    let update = std::env::var_os("GLA_UPDATE_SNAPSHOTS").is_some();
    let mut stale = Vec::new();
    for g in builtins() {
        let path = dir.join(format!("{}.cu", g.name()));
        if update {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&path, g.cuda_source()).unwrap();
            continue;
        }
        match std::fs::read_to_string(&path) {
            Ok(want) if want == g.cuda_source() => {}
            Ok(_) => stale.push(format!("{} differs", path.display())),
            Err(_) => stale.push(format!("{} is missing", path.display())),
        }
    }
    assert!(
        stale.is_empty(),
        "{stale:?}: review the generated CUDA and rerun with GLA_UPDATE_SNAPSHOTS=1"
    );
}
