//! Model of the wgmma producers' exact path (`exact_scores_vec` in ws_wgmma.cuh): the group's vote on the block size
//! and the live levels, which round stores each score, and the exponent bounds — checked over every block size, every
//! set of live levels, both lane maps (2 and 4 rows a thread) and random decays from weak to beyond f32's range. The
//! predicates are the kernel's, character for character (the last test checks the template still holds them).

const C: i32 = 32;
const BLOCK_SPAN: f64 = 176.0;
const NEGLIGIBLE: f64 = 64.0;

/// Round 1 (the blocks' product) stores (i, j) from D when `j <= i && (i ^ j) < bs`, else 0.
fn in_block(i: i32, j: i32, bs: i32) -> bool {
    j <= i && (i ^ j) < bs
}

/// Level h's round stores the 32-bit pair (i, j), (i, j + 1) for even j when (h >= 2) this holds, and for h = 1
/// the single score (i, j) when `(i & 1) && j + 1 == i`.
fn level_pair(i: i32, j: i32, h: i32) -> bool {
    (i & !(2 * h - 1)) == (j & !(2 * h - 1)) && (i & h) != 0 && (j & h) == 0
}

/// What the rounds leave in A(i, j) (j even pairs as the kernel stores them): the round that wrote it last.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Owner {
    Block,
    Zero,
    Level(i32),
}

fn owners(bs: i32, levels: u32) -> Vec<Vec<Owner>> {
    let mut a = vec![vec![Owner::Zero; C as usize]; C as usize];
    for i in 0..C {
        for j in (0..C).step_by(2) {
            for jj in [j, j + 1] {
                a[i as usize][jj as usize] = if in_block(i, jj, bs) {
                    Owner::Block
                } else {
                    Owner::Zero
                };
            }
        }
    }
    let mut left = levels;
    while left != 0 {
        let h = 1 << (31 - left.leading_zeros());
        left &= !(h as u32);
        for i in 0..C {
            for j in (0..C).step_by(2) {
                if h >= 2 {
                    if level_pair(i, j, h) {
                        a[i as usize][j as usize] = Owner::Level(h);
                        a[i as usize][j as usize + 1] = Owner::Level(h);
                    }
                } else if (i & 1) != 0 && j + 1 == i {
                    a[i as usize][j as usize] = Owner::Level(1);
                }
            }
        }
    }
    a
}

#[test]
fn every_score_comes_from_its_block_or_its_one_level() {
    for bs in [1, 2, 4, 8, 16, 32] {
        for live in 0u32..32 {
            let levels = live & (C as u32 - 1) & !(bs as u32 - 1);
            let a = owners(bs, levels);
            for i in 0..C {
                for j in 0..C {
                    let got = a[i as usize][j as usize];
                    let want = if j > i {
                        Owner::Zero
                    } else if (i ^ j) < bs {
                        Owner::Block
                    } else {
                        // the pair's level: the highest bit where i and j differ (i in the upper half of that block)
                        let h = 1 << (31 - ((i ^ j) as u32).leading_zeros());
                        if levels & h as u32 != 0 {
                            Owner::Level(h)
                        } else {
                            Owner::Zero
                        }
                    };
                    assert_eq!(got, want, "bs {bs} levels {levels:#x}: A({i}, {j})");
                }
            }
        }
    }
}

/// The kernel's vote on one chunk's Γ (rows × columns, log2 units, non-increasing down a column): the fail bits (bit
/// log2 s: a block of s rows spans over BLOCK_SPAN in some column, NaN too) and the live bits (bit log2 h: level h has
/// a boundary step not below −NEGLIGIBLE) — per thread of the lane map (SR rows a thread), OR-ed as the group does.
fn vote(g: &[Vec<f64>], sr: usize) -> (i32, u32) {
    let over = |span: f64| !(span <= BLOCK_SPAN);
    let cols = g[0].len();
    let mut word = 0u32;
    for seg in 0..(C as usize / sr) {
        let r0 = seg * sr;
        for c in 0..cols {
            let mut u = 0;
            while u + 1 < sr {
                if over(g[r0 + u][c] - g[r0 + u + 1][c]) {
                    word |= 2;
                }
                u += 2;
            }
            if sr == 4 && over(g[r0][c] - g[r0 + 3][c]) {
                word |= 4;
            }
            // blocks of 2o segments: from the block's first row to this segment's last (the block's whole span
            // at its last segment)
            let mut o = 1;
            while o < C as usize / sr {
                let first = seg & !(2 * o - 1);
                let (f, l) = (first * sr, r0 + sr - 1);
                if over(g[f][c] - g[l][c]) {
                    word |= (2 * o * sr) as u32;
                }
                o <<= 1;
            }
            for u in 0..sr {
                let r = r0 + u;
                if r > 0 {
                    let step = g[r][c] - g[r - 1][c];
                    if !(step < -NEGLIGIBLE) {
                        word |= ((r as i32 & -(r as i32)) as u32) << 8;
                    }
                }
            }
        }
    }
    let fail = word & 0x3f;
    let bs = if fail != 0 {
        1 << (fail.trailing_zeros() as i32 - 1)
    } else {
        C
    };
    let levels = (word >> 8) & (C as u32 - 1) & !(bs as u32 - 1);
    (bs, levels)
}

/// A tiny deterministic generator (no dependency for a model test).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 11) as f64) / ((1u64 << 53) as f64)
    }
}

#[test]
fn the_vote_bounds_every_factor_and_skips_only_negligible_levels() {
    let mut rng = Lcg(7);
    let mut seen_bs = [0usize; 6];
    for trial in 0..3000 {
        // per-step decays (log2 units): a strength from 1e-3 to 1e3 a token, some columns mixed
        let scale = 10f64.powf(-3.0 + 6.0 * rng.next());
        let cols = 8;
        let mut g = vec![vec![0.0f64; cols]; C as usize];
        for c in 0..cols {
            let col_scale = if trial % 3 == 0 {
                scale * (0.01 + rng.next())
            } else {
                scale
            };
            let mut acc = 0.0;
            for r in 0..C as usize {
                acc -= col_scale * (-(rng.next().max(1e-12)).ln());
                g[r][c] = acc;
            }
        }
        for sr in [2usize, 4] {
            let (bs, levels) = vote(&g, sr);
            seen_bs[bs.trailing_zeros() as usize] += 1;
            for i in 0..C {
                for j in 0..=i {
                    for c in 0..cols {
                        let (gi, gj) = (g[i as usize][c], g[j as usize][c]);
                        if (i ^ j) < bs {
                            // round 1: both factors within 2^±BLOCK_SPAN/2 of the block's midpoint
                            let f = (i & !(bs - 1)) as usize;
                            let l = f + bs as usize - 1;
                            let r = 0.5 * (g[f][c] + g[l][c]);
                            assert!(
                                (gi - r).abs() <= BLOCK_SPAN / 2.0
                                    && (r - gj).abs() <= BLOCK_SPAN / 2.0
                            );
                        } else {
                            let h = 1 << (31 - ((i ^ j) as u32).leading_zeros());
                            let m = ((i & !(2 * h - 1)) + h) as usize;
                            // a level's factors are <= 1 ...
                            assert!(gi - g[m][c] <= 0.0 && g[m][c] - gj <= 0.0);
                            // ... and a skipped level's product is below 2^−NEGLIGIBLE
                            if levels & h as u32 == 0 {
                                assert!(
                                    gi - gj < -NEGLIGIBLE,
                                    "trial {trial} sr {sr}: dropped ({i}, {j}) at 2^{}",
                                    gi - gj
                                );
                            }
                        }
                    }
                }
            }
        }
    }
    // every block size was voted for somewhere in the sweep
    assert!(
        seen_bs.iter().all(|&n| n > 0),
        "block sizes seen {seen_bs:?}"
    );
}

#[test]
fn the_template_holds_the_modelled_predicates() {
    let src = include_str!("../src/cuda/ws_wgmma.cuh");
    for line in [
        "j <= i && (i ^ j) < bs ? dd[e] : 0.f,",
        "if ((i & ~(2 * h - 1)) == (j & ~(2 * h - 1)) && (i & h) && !(j & h))",
        "} else if ((i & 1) && j + 1 == i) {",
        "const int bs = fail ? 1 << (__ffs(fail) - 2) : C;",
        "unsigned levels = (word >> 8) & (unsigned)(C - 1) & ~(unsigned)(bs - 1);",
        "if (r > 0 && !(hi[u] < -NEGLIGIBLE)) word |= (unsigned)(r & -r) << 8;",
        "const float x = __shfl_sync(0xffffffffu, g[0][c], lane_of(f)) - g[SR - 1][c];",
        "auto over = [](float span) { return !(span <= BLOCK_SPAN); };",
        "const int h = 1 << (31 - __clz(levels));",
    ] {
        assert!(
            src.contains(line),
            "ws_wgmma.cuh no longer holds `{line}`: update this model with it"
        );
    }
    let writer = include_str!("../src/writer.rs");
    assert!(
        writer.contains("pub const BLOCK_SPAN: f32 = 176.0;")
            && writer.contains("pub const NEGLIGIBLE: f32 = 64.0;")
    );
}
