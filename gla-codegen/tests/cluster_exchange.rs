//! A model of the cluster key split's exchange (`ks_exchange` in `src/cuda/ws_wgmma.cuh`): two CTAs of one cluster,
//! each consumer thread of a sending warpgroup putting its partial output of chunk j into its own vectors of the
//! receiving CTA's exchange tile, the receiving thread adding it, with two mbarriers per CTA:
//!   XFULL  (the receiver's): arrived on by every sending thread after its stores (remote `mbarrier.arrive`);
//!   XEMPTY (the sender's):   arrived on by every receiving thread after its loads;
//! a sender waits on XEMPTY with parity (j − 1) & 1 before chunk j (j > 0), a receiver on XFULL with parity j & 1.
//! `mbarrier.try_wait.parity p` passes once the barrier's completed-phase count has the other parity than p.
//!
//! Threads are independent agents (nothing else orders them inside `ks_exchange`) run in many random interleavings,
//! for the split form (CTA rank w finishes warpgroup w's columns: each CTA one sender and one receiver warpgroup) and
//! the one-way form (CTA 1's two warpgroups send, CTA 0's receive), chunk counts 0..=9. Checked: no deadlock, a
//! receiver reads exactly the chunk it waits for (never a stale or a later one), a sender never overwrites a vector
//! the receiver has not read, and every barrier ends on a completed phase (nothing arrives after the CTAs' exit
//! barrier). The last test shows the model catching broken forms of the protocol.
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// One mbarrier: `count` arrivals complete a phase.
#[derive(Clone, Debug)]
struct Mbar {
    count: usize,
    arrived: usize,
    phases: usize,
}

impl Mbar {
    fn new(count: usize) -> Self {
        Mbar {
            count,
            arrived: 0,
            phases: 0,
        }
    }
    fn arrive(&mut self) {
        self.arrived += 1;
        if self.arrived == self.count {
            self.arrived = 0;
            self.phases += 1;
        }
    }
    /// `try_wait.parity p`: the phase of parity p has completed (the current phase's parity differs).
    fn passes(&self, parity: usize) -> bool {
        self.phases % 2 != parity
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Step {
    WaitEmpty,
    Store,
    ArriveFull,
    WaitFull,
    Load,
    ArriveEmpty,
}

/// Ways to get the protocol wrong, for the model's self-test.
#[derive(Clone, Copy, PartialEq)]
enum Bug {
    None,
    /// The sender does not wait for XEMPTY.
    NoEmptyWait,
    /// The receiver waits on XFULL with the parity of the chunk before.
    FullParityOffByOne,
    /// The receiver arrives on XEMPTY before it has loaded the partial.
    EarlyEmptyArrive,
}

/// One consumer thread: its CTA, its lane (the vector index in the receiver's tile), whether it sends, the other CTA,
/// and where it is: chunk j, step of that chunk.
struct Agent {
    cta: usize,
    lane: usize,
    sends: bool,
    peer: usize,
    chunk: usize,
    step: Step,
}

fn steps(sends: bool, bug: Bug) -> &'static [Step] {
    match (sends, bug) {
        (true, Bug::NoEmptyWait) => &[Step::Store, Step::ArriveFull],
        (true, _) => &[Step::WaitEmpty, Step::Store, Step::ArriveFull],
        (false, Bug::EarlyEmptyArrive) => &[Step::WaitFull, Step::ArriveEmpty, Step::Load],
        (false, _) => &[Step::WaitFull, Step::Load, Step::ArriveEmpty],
    }
}

/// Runs one interleaving; Err names the first violation.
fn run(split: bool, lanes: usize, n: usize, bug: Bug, rng: &mut SmallRng) -> Result<(), String> {
    // Per CTA: XFULL (index 0), XEMPTY (index 1); tile[cta][lane] = (chunk written, read yet).
    // Arrivals a phase: split, one warpgroup of each CTA sends / receives; one-way, CTA 1's two send, CTA 0's receive.
    let recv_count = if split { lanes } else { 2 * lanes };
    let mut bars: Vec<[Mbar; 2]> = (0..2)
        .map(|_| [Mbar::new(recv_count), Mbar::new(recv_count)])
        .collect();
    let tile_len = if split { lanes } else { 2 * lanes };
    let mut tile: Vec<Vec<Option<(usize, bool)>>> = vec![vec![None; tile_len]; 2];
    let mut agents = Vec::new();
    for cta in 0..2 {
        for wg in 0..2 {
            for l in 0..lanes {
                let to = if split { wg } else { 0 };
                let sends = cta != to;
                let lane = if split { l } else { wg * lanes + l };
                agents.push(Agent {
                    cta,
                    lane,
                    sends,
                    peer: cta ^ 1,
                    chunk: 0,
                    step: steps(sends, bug)[0],
                });
            }
        }
    }
    let mut done = vec![n == 0; agents.len()];
    let mut stalled = 0usize;
    while done.iter().any(|d| !d) {
        let live: Vec<usize> = (0..agents.len()).filter(|&i| !done[i]).collect();
        let i = live[rng.random_range(0..live.len())];
        let a = &mut agents[i];
        let j = a.chunk;
        let (me, peer) = (a.cta, a.peer);
        let parity_full = if bug == Bug::FullParityOffByOne {
            (j + 1) & 1
        } else {
            j & 1
        };
        let ran = match a.step {
            Step::WaitEmpty => j == 0 || bars[me][1].passes((j - 1) & 1),
            Step::Store => {
                if let Some((c, read)) = tile[peer][a.lane] {
                    if !read {
                        return Err(format!("CTA {me} lane {} overwrote chunk {c} with chunk {j} before it was read", a.lane));
                    }
                }
                tile[peer][a.lane] = Some((j, false));
                true
            }
            Step::ArriveFull => {
                bars[peer][0].arrive();
                true
            }
            Step::WaitFull => bars[me][0].passes(parity_full),
            Step::Load => match tile[me][a.lane] {
                Some((c, false)) if c == j => {
                    tile[me][a.lane] = Some((c, true));
                    true
                }
                other => {
                    return Err(format!(
                        "CTA {me} lane {} read {other:?} for chunk {j}",
                        a.lane
                    ))
                }
            },
            Step::ArriveEmpty => {
                bars[peer][1].arrive();
                true
            }
        };
        if !ran {
            stalled += 1;
            if stalled > 100_000 {
                return Err(format!("deadlock at chunk {j}"));
            }
            continue;
        }
        stalled = 0;
        let seq = steps(a.sends, bug);
        let k = seq.iter().position(|&s| s == a.step).unwrap();
        if k + 1 < seq.len() {
            a.step = seq[k + 1];
        } else {
            a.chunk += 1;
            a.step = seq[0];
            if a.chunk == n {
                done[i] = true;
            }
        }
    }
    // The exit barrier: every arrival has happened; each barrier sits on a completed phase.
    for (cta, b) in bars.iter().enumerate() {
        for (name, m) in ["XFULL", "XEMPTY"].iter().zip(b.iter()) {
            if m.arrived != 0 {
                return Err(format!(
                    "CTA {cta}'s {name} left with {} of {} arrivals",
                    m.arrived, m.count
                ));
            }
        }
    }
    // Every chunk reached a receiver: XFULL completed n phases in each receiving CTA.
    let receiving: Vec<usize> = if split { vec![0, 1] } else { vec![0] };
    for cta in receiving {
        if bars[cta][0].phases != n {
            return Err(format!(
                "CTA {cta}'s XFULL completed {} phases for {n} chunks",
                bars[cta][0].phases
            ));
        }
    }
    Ok(())
}

#[test]
fn the_exchange_hands_over_every_chunk_once() {
    let mut rng = SmallRng::seed_from_u64(7);
    for split in [true, false] {
        for n in 0..=9 {
            for _ in 0..200 {
                run(split, 3, n, Bug::None, &mut rng)
                    .unwrap_or_else(|e| panic!("split {split}, {n} chunks: {e}"));
            }
        }
    }
}

#[test]
fn the_model_catches_a_broken_exchange() {
    let mut rng = SmallRng::seed_from_u64(11);
    for (bug, what) in [
        (Bug::NoEmptyWait, "no XEMPTY wait"),
        (Bug::FullParityOffByOne, "XFULL parity off by one"),
        (Bug::EarlyEmptyArrive, "XEMPTY before the load"),
    ] {
        for split in [true, false] {
            let found = (0..2000).find_map(|_| run(split, 3, 6, bug, &mut rng).err());
            let e = found.unwrap_or_else(|| {
                panic!("a broken protocol went unnoticed: {what}, split {split}")
            });
            assert!(e.contains("overwrote") || e.contains("read"), "{what}: {e}");
        }
    }
}
