//! The gate strengths of the benchmark and of the strength tests (issue 26): per-key gates from very weak to very
//! strong decay, each a log α of one raw logit x ~ N(0, 1). The cost of a per-key forward can depend on the decay
//! (a chunk whose decay span passes SPAN_MAX takes the exact sub-chunk path), so every speed figure of a per-key
//! kernel names its strength, and the benchmark times ours and fla at every one of these.
//!
//! fla is given the same gate: `benches/python/fla_bench.py` computes its log-gate `g` from fresh x ~ N(0, 1) with
//! the formula in [`Strength::fla_formula`] (the same expression, evaluated in f32 by torch).

use gla::prelude::*;
use gla_core::Gate;

/// `log_sigmoid(x) / 1`: the GLA gate without the paper's normaliser (strong: most chunks take the exact path).
#[gated_linear_attention(gate = per_key)]
pub fn gla_n1(x: f32) -> f32 {
    log_sigmoid(x)
}

/// `log_sigmoid(x) / 0.1`: ten times stronger than `gla_n1`.
#[gated_linear_attention(gate = per_key)]
pub fn gla_n01(x: f32) -> f32 {
    log_sigmoid(x) * 10.0
}

/// fla's own benchmark gate: `max(log_sigmoid(x), −5)` (fla `benchmarks/ops/benchmark_gla.py`).
#[gated_linear_attention(gate = per_key)]
pub fn fla_gate(x: f32) -> f32 {
    max(log_sigmoid(x), -5.0)
}

/// Constant log α = −60 (every key forgets all but e^−60 each step): the strongest decay of the axis.
#[gated_linear_attention(gate = per_key)]
pub fn const_m60(x: f32) -> f32 {
    -60.0 + 0.0 * x
}

/// Constant log α = −10⁻⁶ (nearly no decay): the weakest.
#[gated_linear_attention(gate = per_key)]
pub fn const_m1e6(x: f32) -> f32 {
    -0.000001 + 0.0 * x
}

/// One point of the strength axis.
#[derive(Clone, Copy)]
pub struct Strength {
    /// Short label used in JSON rows and on the command line (`gla/16`, `rwkv6`, `const-60`, …).
    pub label: &'static str,
    /// The gate's log α as a formula (the table's column heading).
    pub formula: &'static str,
    /// The same log α in torch, for fla (`x`: the f32 logits; `gamma`: a per-head parameter broadcast over
    /// [B, T, H, D], drawn in (0.01, 0.99) like ours).
    pub fla_formula: &'static str,
    pub gate: &'static dyn Gate,
}

/// Every strength, weakest decay first (as measured: mean log α per step ≈ −5·10⁻², −0.8, −8 …).
pub fn all() -> Vec<Strength> {
    vec![
        Strength {
            label: "const-1e-6",
            formula: "−1e-6",
            fla_formula: "torch.full_like(x, -1e-6)",
            gate: &ConstM1e6,
        },
        Strength {
            label: "gla/16",
            formula: "log σ(x)/16",
            fla_formula: "F.logsigmoid(x) / 16",
            gate: &gla::gates::Gla,
        },
        Strength {
            label: "hgrn2",
            formula: "log(γ + (1−γ) σ(x))",
            fla_formula: "torch.log(gamma + (1 - gamma) * torch.sigmoid(x))",
            gate: &gla::gates::Hgrn2,
        },
        Strength {
            label: "fla",
            formula: "max(log σ(x), −5)",
            fla_formula: "torch.clamp(F.logsigmoid(x), min=-5)",
            gate: &FlaGate,
        },
        Strength {
            label: "gla/1",
            formula: "log σ(x)",
            fla_formula: "F.logsigmoid(x)",
            gate: &GlaN1,
        },
        Strength {
            label: "rwkv6",
            formula: "−exp(x)",
            fla_formula: "-torch.exp(x)",
            gate: &gla::gates::Rwkv6,
        },
        Strength {
            label: "gla/0.1",
            formula: "log σ(x)/0.1",
            fla_formula: "F.logsigmoid(x) * 10",
            gate: &GlaN01,
        },
        Strength {
            label: "const-60",
            formula: "−60",
            fla_formula: "torch.full_like(x, -60.0)",
            gate: &ConstM60,
        },
    ]
}

/// The strengths named in a comma list (`all` for every one, `none` for none); an unknown label is an error naming
/// the known ones.
pub fn select(list: &str) -> Result<Vec<Strength>, String> {
    match list {
        "all" => return Ok(all()),
        "none" => return Ok(Vec::new()),
        _ => {}
    }
    list.split(',')
        .filter(|s| !s.is_empty())
        .map(|l| {
            all().into_iter().find(|s| s.label == l).ok_or_else(|| {
                format!(
                    "unknown strength `{l}`; known: {}",
                    all().iter().map(|s| s.label).collect::<Vec<_>>().join(", ")
                )
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strengths_are_distinct_per_key_gates_ordered_by_mean_decay() {
        let all = all();
        let mut labels: Vec<_> = all.iter().map(|s| s.label).collect();
        labels.sort();
        labels.dedup();
        assert_eq!(labels.len(), all.len());
        // Mean log α over x ~ N(0,1) (midpoint rule on [−8, 8]), hgrn2 at γ = 0.5: non-decreasing decay.
        let mean = |g: &dyn Gate| {
            let params: Vec<f64> = g.params().iter().map(|_| 0.5).collect();
            let (n, lo, hi) = (4000, -8.0f64, 8.0f64);
            let h = (hi - lo) / n as f64;
            (0..n)
                .map(|i| {
                    let x = lo + (i as f64 + 0.5) * h;
                    g.log_alpha(x, &params) * (-x * x / 2.0).exp()
                        / (2.0 * std::f64::consts::PI).sqrt()
                        * h
                })
                .sum::<f64>()
        };
        let means: Vec<f64> = all.iter().map(|s| mean(s.gate)).collect();
        for (w, s) in means.windows(2).zip(all.windows(2)) {
            assert!(
                w[1] <= w[0],
                "{} (mean log α {:.3}) decays less than {} ({:.3})",
                s[1].label,
                w[1],
                s[0].label,
                w[0]
            );
        }
        assert!(
            (means[0] + 1e-6).abs() < 1e-9 && (means[7] + 60.0).abs() < 1e-9,
            "{means:?}"
        );
        assert!(all
            .iter()
            .all(|s| s.gate.shape() == gla_core::GateShape::PerKey));
    }

    #[test]
    fn select_names_the_known_labels() {
        assert_eq!(select("gla/16,const-60").unwrap().len(), 2);
        assert_eq!(select("all").unwrap().len(), 8);
        assert!(select("none").unwrap().is_empty());
        let e = select("gla/2").err().unwrap();
        assert!(e.contains("gla/2") && e.contains("rwkv6"), "{e}");
    }
}
