//! Where the bf16 error of the per-key forward comes from: the chunkwise form in f64 with bf16 rounding switched on
//! at each point where the kernel rounds, vs the exact f64 result (relative RMS of o). Pure CPU.
//!   cargo run --release -p tests --example rounding_budget [-- C]     (chunk size C, default 64; 32 is the
//!   warp-specialised kernels' chunk)
use rand::{Rng, SeedableRng};

fn bf(x: f64) -> f64 {
    let b = (x as f32).to_bits();
    let r = b.wrapping_add(0x7fff + ((b >> 16) & 1)) & 0xffff_0000;
    f32::from_bits(r) as f64
}

// tf32 as `cvt.rna.tf32.f32` rounds (10 mantissa bits, ties away from zero).
fn tf32(x: f64) -> f64 {
    let b = (x as f32).to_bits();
    f32::from_bits(if std::env::var("TF32_TRUNC").is_ok() {
        b & 0xffff_e000
    } else {
        b.wrapping_add(0x1000) & 0xffff_e000
    }) as f64
}

#[derive(Clone, Copy, Default)]
struct R {
    qt: bool,              // Q̃ = q·e^Γ rounded (operand of Q̃S and of the factorised A)
    kt: bool,              // K̃ factor rounded
    a: bool,               // A stored rounded
    s: bool,               // S rounded for Q̃S
    kh: bool,              // K̂ rounded for the state update
    o: bool,               // output rounded
    factor: bool,          // A fully factorised (else: diagonal 16x16 blocks exact)
    split_a: bool,         // A = hi + lo (store error ~u²)
    exact_a_factors: bool, // factorised A from unrounded Q̃, K̃ (bf16x3), Q̃ still rounded for Q̃S if qt
    split_s: bool,         // S = hi + lo halves for Q̃S (two products), error ~u²
    q_exact_in_a: bool, // factorised A from unrounded Q̃ but rounded K̃ (bf16x2: Q̃_hi K̃_hi + Q̃_lo K̃_hi)
    tf32_a: bool, // factorised A from Q̃, K̃ rounded to tf32 (one tf32 product instead of bf16x3)
}

fn run(
    r: R,
    q: &[f64],
    k: &[f64],
    v: &[f64],
    la: &[f64],
    t: usize,
    d: usize,
    c: usize,
) -> Vec<f64> {
    let rd = |on: bool, x: f64| if on { bf(x) } else { x };
    let sc = 1.0 / (d as f64).sqrt();
    let mut s = vec![0f64; d * d];
    let mut o = vec![0f64; t * d];
    let sub = 16;
    for c0 in (0..t).step_by(c) {
        let n = c.min(t - c0);
        let mut g = vec![0f64; n * d];
        for dd in 0..d {
            let mut acc = 0.0;
            for i in 0..n {
                acc += la[(c0 + i) * d + dd];
                g[i * d + dd] = acc;
            }
        }
        let qt: Vec<f64> = (0..n * d)
            .map(|x| rd(r.qt, q[c0 * d + x] * g[x].exp()))
            .collect();
        let sr: Vec<f64> = s
            .iter()
            .map(|&x| {
                if r.split_s {
                    let h = bf(x);
                    h + bf(x - h)
                } else {
                    rd(r.s, x)
                }
            })
            .collect();
        let mut a = vec![0f64; n * n];
        for i in 0..n {
            for j in 0..=i {
                let mut acc = 0.0;
                if r.factor {
                    for dd in 0..d {
                        let exact_q = r.exact_a_factors || r.q_exact_in_a;
                        if r.tf32_a {
                            acc += tf32(q[(c0 + i) * d + dd] * g[i * d + dd].exp())
                                * tf32(k[(c0 + j) * d + dd] * (-g[j * d + dd]).exp());
                            continue;
                        }
                        let qi = if exact_q {
                            q[(c0 + i) * d + dd] * g[i * d + dd].exp()
                        } else {
                            qt[i * d + dd]
                        };
                        acc += qi
                            * rd(
                                r.kt && !r.exact_a_factors,
                                k[(c0 + j) * d + dd] * (-g[j * d + dd]).exp(),
                            );
                    }
                } else if i / sub == j / sub {
                    for dd in 0..d {
                        acc += q[(c0 + i) * d + dd]
                            * k[(c0 + j) * d + dd]
                            * (g[i * d + dd] - g[j * d + dd]).exp();
                    }
                } else {
                    let rr = (i / sub) * sub;
                    for dd in 0..d {
                        let gr = g[rr * d + dd];
                        acc += rd(r.qt, q[(c0 + i) * d + dd] * (g[i * d + dd] - gr).exp())
                            * rd(r.kt, k[(c0 + j) * d + dd] * (gr - g[j * d + dd]).exp());
                    }
                }
                a[i * n + j] = if r.split_a {
                    let h = bf(acc);
                    h + bf(acc - h)
                } else {
                    rd(r.a, acc)
                };
            }
        }
        for i in 0..n {
            for e in 0..d {
                let mut acc = 0.0;
                for dd in 0..d {
                    acc += qt[i * d + dd] * sr[dd * d + e];
                }
                for j in 0..=i {
                    acc += a[i * n + j] * v[(c0 + j) * d + e];
                }
                o[(c0 + i) * d + e] = rd(r.o, sc * acc);
            }
        }
        let l = n - 1;
        for dd in 0..d {
            let f = g[l * d + dd].exp();
            for e in 0..d {
                let mut acc = s[dd * d + e] * f;
                for j in 0..n {
                    acc += rd(
                        r.kh,
                        k[(c0 + j) * d + dd] * (g[l * d + dd] - g[j * d + dd]).exp(),
                    ) * v[(c0 + j) * d + e];
                }
                s[dd * d + e] = acc;
            }
        }
    }
    o
}

fn main() {
    let c: usize = std::env::args()
        .nth(1)
        .map(|a| a.parse().expect("chunk size C"))
        .unwrap_or(64);
    let (t, d) = (512usize, 128usize);
    println!("T = {t}, d = {d}, C = {c}: relative RMS of o vs the exact f64 chunkwise result");
    let mut rng = rand::rngs::SmallRng::seed_from_u64(5);
    let mut n = || {
        let u1: f64 = rng.random_range(1e-9..1.0);
        let u2: f64 = rng.random();
        bf((-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos())
    };
    let q: Vec<f64> = (0..t * d).map(|_| n()).collect();
    let k: Vec<f64> = (0..t * d).map(|_| n()).collect();
    let v: Vec<f64> = (0..t * d).map(|_| n()).collect();
    let la: Vec<f64> = (0..t * d)
        .map(|_| {
            let x = n();
            (x.min(0.0) - (-x.abs()).exp().ln_1p()) / 16.0
        })
        .collect();
    let exact = run(R::default(), &q, &k, &v, &la, t, d, c);
    let rel = |o: &[f64]| {
        let (mut num, mut den) = (0.0, 0.0);
        for (a, b) in o.iter().zip(&exact) {
            num += (a - b) * (a - b);
            den += b * b;
        }
        (num / den).sqrt()
    };
    let all = R {
        qt: true,
        kt: true,
        a: true,
        s: true,
        kh: true,
        o: true,
        ..R::default()
    };
    let cases: Vec<(&str, R)> = vec![
        ("v3: all roundings, exact diagonal blocks", all),
        (
            "v4: all roundings, factorised",
            R {
                factor: true,
                ..all
            },
        ),
        (
            "output rounding only",
            R {
                o: true,
                ..R::default()
            },
        ),
        (
            "factorised, only Q̃/K̃ factors",
            R {
                qt: true,
                kt: true,
                factor: true,
                ..R::default()
            },
        ),
        (
            "only A store",
            R {
                a: true,
                ..R::default()
            },
        ),
        (
            "only S",
            R {
                s: true,
                ..R::default()
            },
        ),
        (
            "only K̂",
            R {
                kh: true,
                ..R::default()
            },
        ),
        (
            "v4 + A split",
            R {
                factor: true,
                split_a: true,
                ..all
            },
        ),
        (
            "v4 + A split, K̃ exact",
            R {
                factor: true,
                split_a: true,
                kt: false,
                ..all
            },
        ),
        (
            "v4 + A split, Q̃,K̃ exact (bf16x3 A)",
            R {
                factor: true,
                split_a: true,
                kt: false,
                qt: false,
                ..all
            },
        ),
        (
            "v4 + A split, S exact",
            R {
                factor: true,
                split_a: true,
                s: false,
                ..all
            },
        ),
        (
            "v4 + A split, S, K̂ exact",
            R {
                factor: true,
                split_a: true,
                s: false,
                kh: false,
                ..all
            },
        ),
        (
            "v4, S + K̂ exact",
            R {
                factor: true,
                s: false,
                kh: false,
                ..all
            },
        ),
        (
            "v4 everything split but output",
            R {
                o: true,
                factor: true,
                ..R::default()
            },
        ),
        (
            "PLAN: bf16x3 A, A split, Q̃ rounded in Q̃S",
            R {
                factor: true,
                split_a: true,
                exact_a_factors: true,
                ..all
            },
        ),
        (
            "scalar-like: exact A, A split",
            R {
                factor: false,
                split_a: true,
                exact_a_factors: true,
                kt: false,
                ..all
            },
        ),
        (
            "PLAN + S split (hi + lo for Q̃S)",
            R {
                factor: true,
                split_a: true,
                exact_a_factors: true,
                split_s: true,
                ..all
            },
        ),
        // Two of the three score products (bf16x2): which correction term can go.
        (
            "bf16x2 A: Q̃_hi (K̃_hi + K̃_lo), A split",
            R {
                factor: true,
                split_a: true,
                kt: false,
                ..all
            },
        ),
        (
            "bf16x2 A: (Q̃_hi + Q̃_lo) K̃_hi, A split",
            R {
                factor: true,
                split_a: true,
                q_exact_in_a: true,
                ..all
            },
        ),
        (
            "bf16x3 A, A not split",
            R {
                factor: true,
                exact_a_factors: true,
                ..all
            },
        ),
        (
            "tf32 A (Q̃, K̃ rounded to tf32), A split",
            R {
                factor: true,
                split_a: true,
                tf32_a: true,
                ..all
            },
        ),
    ];
    for (name, r) in cases {
        println!(
            "{:<48} {:.2e}",
            name,
            rel(&run(r, &q, &k, &v, &la, t, d, c))
        );
    }
}
