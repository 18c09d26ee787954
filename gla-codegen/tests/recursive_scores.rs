//! Model of the exact per-key scores' recursive secondary chunking (`intra_scores` in stages.cuh): the level of a
//! pair, the reference row of a scaled row and the 16x8 tiles a level takes, checked for coverage over every chunk
//! size. The predicates here are the kernel's, character for character (the test checks the template holds them).
use std::collections::BTreeSet;

fn level_pair(i: i32, j: i32, h: i32) -> bool {
    j < i && (i ^ j) >= h && (i ^ j) < 2 * h
}

fn tile_has_level(r0: i32, c0: i32, h: i32) -> bool {
    if h >= 16 {
        return (r0 & h) != 0 && (r0 ^ c0) >= h && (r0 ^ c0) < 2 * h;
    }
    if h == 8 {
        return c0 == r0;
    }
    c0 >= r0 && c0 < r0 + 16
}

/// The lower-triangle tile index → (row tile, column tile) walk of the kernel.
fn tile_of(tile: i32) -> (i32, i32) {
    let (mut tm, mut tn) = (0, tile);
    while tn >= 2 * tm + 2 {
        tn -= 2 * tm + 2;
        tm += 1;
    }
    (tm, tn)
}

/// The reference row of row t at level h (the first row of its block's upper half) and whether t is a query row.
fn reference(t: i32, h: i32) -> (i32, bool) {
    let query = (t & h) != 0;
    (
        if query {
            t & !(h - 1)
        } else {
            (t | (h - 1)) + 1
        },
        query,
    )
}

#[test]
fn every_pair_is_computed_once_with_exponents_at_most_zero() {
    for c in [32i32, 64, 128] {
        let ntiles = (c / 16) * (c / 16 + 1);
        let mut seen = BTreeSet::new();
        let mut tiles_per_level = Vec::new();
        let mut h = c / 2;
        while h >= 1 {
            let mut used = 0;
            for tile in 0..ntiles {
                let (tm, tn) = tile_of(tile);
                assert!(
                    tm < c / 16 && 8 * tn < 16 * tm + 16,
                    "C={c} tile {tile} -> ({tm}, {tn}) outside the lower triangle"
                );
                let (r0, c0) = (16 * tm, 8 * tn);
                let has = (0..16).any(|g| (0..8).any(|e| level_pair(r0 + g, c0 + e, h)));
                assert_eq!(
                    tile_has_level(r0, c0, h),
                    has,
                    "C={c} h={h} tile ({r0}, {c0})"
                );
                if !has {
                    continue;
                }
                used += 1;
                for g in 0..16 {
                    for e in 0..8 {
                        let (i, j) = (r0 + g, c0 + e);
                        if level_pair(i, j, h) {
                            assert!(seen.insert((i, j)), "C={c}: pair ({i}, {j}) stored twice");
                            // Row i's operand is a query row and row j's a key row of the same reference m, j < m <= i:
                            // both exponents Γ_i − Γ_m and Γ_m − Γ_j are <= 0 (Γ non-increasing).
                            let ((mi, qi), (mj, qj)) = (reference(i, h), reference(j, h));
                            assert!(
                                qi && !qj && mi == mj && j < mi && mi <= i && mi < c,
                                "C={c} h={h} ({i}, {j}) m {mi} / {mj}"
                            );
                        }
                    }
                }
            }
            tiles_per_level.push(used);
            h /= 2;
        }
        let want: BTreeSet<(i32, i32)> = (0..c).flat_map(|i| (0..i).map(move |j| (i, j))).collect();
        assert_eq!(
            seen, want,
            "C={c}: every pair j < i exactly once (the diagonal is stored apart)"
        );
        println!("C={c}: tiles a level {tiles_per_level:?}");
        if c == 32 {
            assert_eq!(tiles_per_level, vec![2, 2, 4, 4, 4]);
        }
    }
}

#[test]
fn the_template_holds_the_modelled_predicates() {
    let src = include_str!("../src/cuda/stages.cuh");
    for line in [
        "return j < i && (i ^ j) >= h && (i ^ j) < 2 * h;",
        "if (h >= 16) return (r0 & h) != 0 && (r0 ^ c0) >= h && (r0 ^ c0) < 2 * h;",
        "if (h == 8) return c0 == r0;",
        "return c0 >= r0 && c0 < r0 + 16;",
        "while (tn >= 2 * tm + 2) tn -= 2 * tm++ + 2;",
        "const bool query = (t & h) != 0;",
        "const int m = query ? (t & ~(h - 1)) : ((t | (h - 1)) + 1);",
    ] {
        assert!(
            src.contains(line),
            "stages.cuh no longer holds `{line}`: update this model with it"
        );
    }
}
