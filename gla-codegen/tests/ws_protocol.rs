//! A model of the warp-specialised kernel's hand-off protocol (`gla_fwd_ws` in `src/cuda/ws.cuh`): the
//! consumer warps and one or two producer groups, a ring of `STAGES` slots, named barriers FULL[b] and EMPTY[b].
//!
//! Each role is written here as the sequence of barrier operations its loop performs (the same loop structure as
//! the CUDA code), and a scheduler runs the roles in many random interleavings with the hardware's barrier
//! semantics (a phase completes when the consumers and one producer group have both arrived; `bar.sync` waits for
//! its phase, `bar.arrive` does not; with TMA loads the group's part in EMPTY is its issuing warp alone, which is the
//! same protocol at this level: the group's other warps never touch the slot before it is refilled). Checked for every chunk count 0..=13, slot count 2 and 3, one and two groups,
//! and for the four-slot ring of two TMA groups that issue their next chunk midway through the current one:
//! no deadlock, no barrier left with a half-complete phase at exit (the ARCHITECTURE.md invariant), a slot is only
//! refilled after the consumers finished the chunk it held, and the consumers only read a chunk after its
//! producers published it; with one logits tile a producer group (`GLA_X_PER_GROUP`), also that a chunk's load
//! overwrites the tile only after every warp's gate has read the group's previous chunk from it (the v18 early issue
//! and its BAR_XREAD); and the segment-state pass's issue at the top of a chunk (`STATES_ISSUE_AHEAD`: the logits
//! in the slot, no group barrier, every producer warp's own arrival on FULL).
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

#[derive(Clone, Copy, Debug, PartialEq)]
enum Op {
    /// `bar.arrive` (no waiting).
    Arrive(usize),
    /// `bar.sync` (waits for the phase it joins).
    Wait(usize),
    /// The producers start refilling the slot of chunk j (cp.async issue).
    Issue(usize),
    /// The producers publish chunk j (their stages are done; followed by Arrive FULL).
    Produced(usize),
    /// The consumers start reading chunk j (after Wait FULL).
    Consume(usize),
    /// The consumers are done with chunk j.
    Consumed(usize),
    /// TMA chunks: a producer thread waits on chunk j's slot mbarrier with parity (j / STAGES) & 1
    /// (`mbarrier.try_wait.parity`: passes once the barrier's current phase has the other parity).
    MbarWait(usize),
    /// TMA chunks: a producer group's own barrier (`G::sync` / the gate's vote, or the warpgroup's wgmma) between
    /// its issuing warp (the lead) and its other warps (the rest).
    GroupSync(usize),
    /// TMA chunks: `bar.arrive` on a group barrier (the rest, on BAR_XREAD: its gate has read the logits).
    GroupArrive(usize),
    /// TMA chunks with mid-chunk loads: a producer role's gate has read chunk j's logits from its group's logits
    /// tile (`GLA_X_PER_GROUP`: one tile a group, so chunk j + groups's load overwrites it).
    GateRead(usize),
    /// The arrival of a group's other warps on FULL[b] where the model runs them apart from the issuing warp with no
    /// group barrier to meet it at (`publish` is every producer thread's `bar.arrive`): FULL[b]'s phase then also
    /// needs them.
    ArriveRest(usize),
}

fn full(b: usize) -> usize {
    b
}
/// EMPTY barrier of slot b for producer group g (ws_ring.cuh `bar_empty`): one a slot where every slot belongs to
/// one group (`SLOT_PER_GROUP`: slots a multiple of two groups), else one a (slot, group).
fn empty(stages: usize, groups: usize, b: usize, g: usize) -> usize {
    if groups > 1 && stages % groups == 0 {
        stages + b
    } else {
        stages + b * groups + g
    }
}

/// Producer group g's operations (ws.cuh `produce`).
fn producer(n: usize, stages: usize, groups: usize, g: usize) -> Vec<Op> {
    producer_with(n, stages, groups, g, false)
}

/// `mid`: `GLA_MID_ISSUE` (two groups, four slots): a group issues its next chunk midway through the current one,
/// before publishing it, instead of after.
fn producer_with(n: usize, stages: usize, groups: usize, g: usize, mid: bool) -> Vec<Op> {
    producer_tma(n, stages, groups, g, mid, false)
}

/// Group g's three group barriers (after the ring's FULL and EMPTY barriers): the vote, the scores, BAR_XREAD.
fn group_bar(stages: usize, groups: usize, g: usize, k: usize) -> usize {
    stages + stages * groups + 3 * g + k
}

/// How a TMA group issues its next chunk.
#[derive(Clone, Copy, PartialEq)]
enum Issue {
    /// After the chunk is published (`!GLA_MID_ISSUE`), or (`mid`) after the gate's vote.
    Late,
    /// `Issue::AfterGate` (`GLA_ISSUE_AFTER_GATE`): right after the gate, before the vote; the issuing warp waits on BAR_XREAD for the
    /// group's other warps to have read the logits (they arrive there), unless `xread` is false (broken on purpose).
    Early { xread: bool },
}

/// TMA chunks: the group's warps other than its issuing one. They never wait on EMPTY: after publishing chunk j
/// they go straight to chunk j + groups's mbarrier, and meet the issuing warp at the group barriers of each chunk
/// (the gate's vote; with mid-chunk loads also the warpgroup's score wgmma after the issue).
/// `joined`: (a three-slot form not built) after publishing chunk j they also wait at a group barrier for the
/// issuing warp to have issued chunk j + groups — past its EMPTY wait, so the slot's previous copy has landed.
fn producer_rest(
    n: usize,
    stages: usize,
    groups: usize,
    g: usize,
    mid: bool,
    joined: bool,
) -> Vec<Op> {
    producer_rest_with(n, stages, groups, g, mid, joined, Issue::Late)
}

fn producer_rest_with(
    n: usize,
    stages: usize,
    groups: usize,
    g: usize,
    mid: bool,
    joined: bool,
    how: Issue,
) -> Vec<Op> {
    let mut ops = Vec::new();
    let mut j = g;
    while j < n {
        ops.push(Op::MbarWait(j));
        if mid {
            ops.push(Op::GateRead(j)); // (mid-chunk loads go with one logits tile a group: GLA_X_PER_GROUP)
        }
        if how == (Issue::Early { xread: true }) && j + groups < n {
            ops.push(Op::GroupArrive(group_bar(stages, groups, g, 2)));
        }
        ops.push(Op::GroupSync(group_bar(stages, groups, g, 0)));
        if mid || (joined && j + groups < n) {
            ops.push(Op::GroupSync(group_bar(stages, groups, g, 1)));
        }
        j += groups;
    }
    ops
}

/// `tma`: the chunk arrives by TMA and every producer thread waits on the slot's mbarrier for it (modelled below);
/// this is then the group's issuing warp (its other warps: [`producer_rest`]).
fn producer_tma(n: usize, stages: usize, groups: usize, g: usize, mid: bool, tma: bool) -> Vec<Op> {
    producer_lead(n, stages, groups, g, mid, tma, false)
}

fn producer_lead(
    n: usize,
    stages: usize,
    groups: usize,
    g: usize,
    mid: bool,
    tma: bool,
    joined: bool,
) -> Vec<Op> {
    producer_lead_with(n, stages, groups, g, mid, tma, joined, Issue::Late)
}

#[allow(clippy::too_many_arguments)]
fn producer_lead_with(
    n: usize,
    stages: usize,
    groups: usize,
    g: usize,
    mid: bool,
    tma: bool,
    joined: bool,
    how: Issue,
) -> Vec<Op> {
    let mut ops = Vec::new();
    let issue = |ops: &mut Vec<Op>, j: usize| {
        if j >= stages {
            ops.push(Op::Wait(empty(stages, groups, j % stages, g)));
        }
        if how == (Issue::Early { xread: true }) && j >= groups {
            ops.push(Op::GroupSync(group_bar(stages, groups, g, 2))); // BAR_XREAD: the rest's gates are done
        }
        ops.push(Op::Issue(j));
    };
    if g >= n {
        return ops;
    }
    issue(&mut ops, g);
    let mut j = g;
    while j < n {
        let jn = j + groups;
        if groups == 1 && jn < n {
            issue(&mut ops, jn); // prefetch before working on j
        }
        if tma {
            ops.push(Op::MbarWait(j));
            if mid {
                ops.push(Op::GateRead(j));
            }
            if matches!(how, Issue::Early { .. }) && jn < n {
                issue(&mut ops, jn); // right after the gate, before the vote
            }
            ops.push(Op::GroupSync(group_bar(stages, groups, g, 0)));
        }
        if mid && how == Issue::Late && jn < n {
            issue(&mut ops, jn); // after the gate's vote, before the scores of chunk j
        }
        if tma && mid {
            ops.push(Op::GroupSync(group_bar(stages, groups, g, 1)));
        }
        ops.push(Op::Produced(j));
        ops.push(Op::Arrive(full(j % stages)));
        if groups > 1 && !mid && jn < n {
            issue(&mut ops, jn);
            if joined {
                ops.push(Op::GroupSync(group_bar(stages, groups, g, 1)));
            }
        }
        j = jn;
    }
    ops
}

/// The consumers' operations.
fn consumer(n: usize, stages: usize, groups: usize) -> Vec<Op> {
    let mut ops = Vec::new();
    for j in 0..n {
        ops.push(Op::Wait(full(j % stages)));
        ops.push(Op::Consume(j));
        ops.push(Op::Consumed(j));
        if j + stages < n {
            ops.push(Op::Arrive(empty(
                stages,
                groups,
                j % stages,
                (j + stages) % groups,
            )));
        }
    }
    ops
}

/// The protocol before the per-group EMPTY barriers: one EMPTY barrier per slot shared by both groups.
fn shared_empty(ops: Vec<Op>, stages: usize, groups: usize) -> Vec<Op> {
    let remap = |b: usize| {
        if b >= stages {
            stages + (b - stages) / groups
        } else {
            b
        }
    };
    ops.into_iter()
        .map(|o| match o {
            Op::Arrive(b) => Op::Arrive(remap(b)),
            Op::Wait(b) => Op::Wait(remap(b)),
            o => o,
        })
        .collect()
}

/// One barrier: arrivals in the open phase by party (0 = consumers, 1 = producers, 2 = a group's other warps where
/// they arrive apart: `ArriveRest`), and the number of completed phases.
#[derive(Clone, Default)]
struct Bar {
    arrived: [bool; 3],
    completed: usize,
}

/// Run all roles in a random interleaving; panics on a protocol violation. Role 0 is the consumers.
fn run(n: usize, stages: usize, groups: usize, rng: &mut SmallRng) {
    run_with(n, stages, groups, false, rng)
}

fn run_with(n: usize, stages: usize, groups: usize, mid: bool, rng: &mut SmallRng) {
    let mut progs: Vec<Vec<Op>> = vec![consumer(n, stages, groups)];
    for g in 0..groups {
        progs.push(producer_with(n, stages, groups, g, mid));
    }
    run_programs(progs, n, stages, groups, rng);
}

/// The ring with TMA chunks: the producers wait on the slots' mbarriers, whose phases the copy engine completes at
/// random times after each issue (one phase a use of the slot).
fn run_tma(n: usize, stages: usize, groups: usize, mid: bool, rng: &mut SmallRng) {
    run_tma_with(n, stages, groups, mid, false, rng)
}

fn run_tma_with(
    n: usize,
    stages: usize,
    groups: usize,
    mid: bool,
    joined: bool,
    rng: &mut SmallRng,
) {
    let mut progs: Vec<Vec<Op>> = vec![consumer(n, stages, groups)];
    for g in 0..groups {
        progs.push(producer_lead(n, stages, groups, g, mid, true, joined));
        progs.push(producer_rest(n, stages, groups, g, mid, joined));
    }
    run_programs(progs, n, stages, groups, rng);
}

/// The segment-state pass with `STATES_ISSUE_AHEAD` (2026-12-04q): four slots, two TMA groups, the logits in the
/// slot (so no per-group logits tile and no BAR_XREAD), no group barrier a chunk (`gate_khat_vec` has none). A
/// group's issuing warp loads chunk j + 2 at the top of chunk j — after EMPTY for chunk j − 2, before its own wait on
/// chunk j's mbarrier — then the group computes chunk j and publishes it; the other warps only wait on the
/// mbarriers.
fn run_states_ahead(n: usize, rng: &mut SmallRng) {
    let (stages, groups) = (4, 2);
    let mut progs: Vec<Vec<Op>> = vec![consumer(n, stages, groups)];
    for g in 0..groups {
        let mut lead = Vec::new();
        let issue = |ops: &mut Vec<Op>, j: usize| {
            if j >= stages {
                ops.push(Op::Wait(empty(stages, groups, j % stages, g)));
            }
            ops.push(Op::Issue(j));
        };
        let mut rest = Vec::new();
        if g < n {
            issue(&mut lead, g);
        }
        let mut j = g;
        while j < n {
            if j + groups < n {
                issue(&mut lead, j + groups);
            }
            lead.push(Op::MbarWait(j));
            lead.push(Op::Produced(j));
            lead.push(Op::Arrive(full(j % stages)));
            rest.push(Op::MbarWait(j));
            rest.push(Op::ArriveRest(full(j % stages)));
            j += groups;
        }
        progs.push(lead);
        progs.push(rest);
    }
    run_programs(progs, n, stages, groups, rng);
}

/// The four-slot ring of two TMA groups with mid-chunk loads, issued as `how` says.
fn run_tma_issue(n: usize, how: Issue, rng: &mut SmallRng) {
    let (stages, groups) = (4, 2);
    let mut progs: Vec<Vec<Op>> = vec![consumer(n, stages, groups)];
    for g in 0..groups {
        progs.push(producer_lead_with(
            n, stages, groups, g, true, true, false, how,
        ));
        progs.push(producer_rest_with(n, stages, groups, g, true, false, how));
    }
    run_programs(progs, n, stages, groups, rng);
}

/// Roles: 0 the consumers; then per producer group its (lead) program and, for TMA chunks, its rest (odd roles ≥ 3
/// when every group has two; the party of a group barrier: rest 0, lead 1).
fn run_programs(progs: Vec<Vec<Op>>, n: usize, stages: usize, groups: usize, rng: &mut SmallRng) {
    let split = progs.len() == 1 + 2 * groups
        && groups > 0
        && progs
            .iter()
            .skip(1)
            .any(|p| p.iter().any(|o| matches!(o, Op::GroupSync(_))));
    let is_rest = |r: usize| split && r >= 1 && (r - 1) % 2 == 1;
    let mut pc = vec![0usize; progs.len()];
    // TMA: chunks issued and not landed yet, chunks landed, completed phases of each slot's mbarrier.
    let (mut in_flight, mut landed, mut mbar) =
        (Vec::<usize>::new(), vec![false; n], vec![0usize; stages]);
    // A role blocked in Wait: (barrier, phase it waits for).
    let mut blocked: Vec<Option<(usize, usize)>> = vec![None; progs.len()];
    let mut bars = vec![Bar::default(); stages + stages * groups + 3 * groups];
    let (mut issued, mut produced, mut consumed) = (vec![false; n], vec![false; n], vec![false; n]);
    // The roles of a group whose gate has read chunk j's logits, and how many a group has that read them at all.
    let mut gate_reads = vec![0usize; n];
    let readers = progs.get(1..=1 + usize::from(split)).map_or(0, |p| {
        p.iter()
            .filter(|p| p.iter().any(|o| matches!(o, Op::GateRead(_))))
            .count()
    });
    let ctx = format!("n={n} stages={stages} groups={groups}");
    // Barriers that a group's other warps arrive on too (party 2): a phase then completes once all three arrived.
    let mut with_rest = vec![false; bars.len()];
    for o in progs.iter().flatten() {
        if let Op::ArriveRest(b) = *o {
            with_rest[b] = true;
        }
    }
    loop {
        // Wake roles whose phase completed.
        for r in 0..progs.len() {
            if let Some((b, phase)) = blocked[r] {
                if bars[b].completed > phase {
                    blocked[r] = None;
                    pc[r] += 1;
                }
            }
        }
        // A role at MbarWait(j) may go on once slot j mod STAGES's mbarrier is in a phase of the other parity than
        // (j / STAGES) & 1 — which is what the hardware checks; whether chunk j has landed is asserted below.
        let mbar_open = |r: usize| match progs[r].get(pc[r]) {
            Some(&Op::MbarWait(j)) => mbar[j % stages] & 1 != (j / stages) & 1,
            _ => true,
        };
        let runnable: Vec<usize> = (0..progs.len())
            .filter(|&r| blocked[r].is_none() && pc[r] < progs[r].len() && mbar_open(r))
            .collect();
        if runnable.is_empty() && in_flight.is_empty() {
            let stuck: Vec<usize> = (0..progs.len())
                .filter(|&r| pc[r] < progs[r].len())
                .collect();
            assert!(
                stuck.is_empty(),
                "{ctx}: deadlock, roles {stuck:?} blocked at {:?}",
                stuck.iter().map(|&r| progs[r][pc[r]]).collect::<Vec<_>>()
            );
            break;
        }
        // The copy engine lands one chunk in flight (any of them: copies to different slots finish in any order).
        if !in_flight.is_empty()
            && (runnable.is_empty() || rng.random_range(0..runnable.len() + 1) == 0)
        {
            let j = in_flight.swap_remove(rng.random_range(0..in_flight.len()));
            landed[j] = true;
            mbar[j % stages] += 1;
            continue;
        }
        let r = runnable[rng.random_range(0..runnable.len())];
        let party = match progs[r][pc[r]] {
            Op::GroupSync(_) | Op::GroupArrive(_) => usize::from(!is_rest(r)),
            Op::ArriveRest(_) => 2,
            _ => usize::from(r != 0),
        };
        match progs[r][pc[r]] {
            op @ (Op::Arrive(b)
            | Op::Wait(b)
            | Op::GroupSync(b)
            | Op::GroupArrive(b)
            | Op::ArriveRest(b)) => {
                assert!(
                    !bars[b].arrived[party],
                    "{ctx}: role {r} joins barrier {b} twice in one phase"
                );
                bars[b].arrived[party] = true;
                let phase = bars[b].completed;
                if bars[b].arrived[0] && bars[b].arrived[1] && (bars[b].arrived[2] || !with_rest[b])
                {
                    bars[b].arrived = [false; 3];
                    bars[b].completed += 1;
                }
                if matches!(op, Op::Wait(_) | Op::GroupSync(_)) {
                    blocked[r] = Some((b, phase));
                    continue; // pc advances when the phase completes
                }
            }
            Op::Issue(j) => {
                assert!(!issued[j], "{ctx}: chunk {j} issued twice");
                assert!(
                    j < stages || consumed[j - stages],
                    "{ctx}: slot of chunk {j} refilled before chunk {} was consumed",
                    j - stages
                );
                // (chunk j's load also overwrites its group's logits tile, which held chunk j − groups's)
                if readers > 0 && j >= groups {
                    assert!(gate_reads[j - groups] == readers, "{ctx}: chunk {j}'s load overwrote the logits of chunk {} before every warp's gate read them", j - groups);
                }
                issued[j] = true;
                in_flight.push(j);
            }
            Op::MbarWait(j) => assert!(
                landed[j],
                "{ctx}: role {r} passed chunk {j}'s mbarrier before the chunk landed"
            ),
            Op::Produced(j) => {
                assert!(issued[j], "{ctx}: chunk {j} produced before it was loaded");
                produced[j] = true;
            }
            Op::Consume(j) => assert!(
                produced[j],
                "{ctx}: chunk {j} consumed before the producers published it"
            ),
            Op::Consumed(j) => consumed[j] = true,
            Op::GateRead(j) => gate_reads[j] += 1,
        }
        pc[r] += 1;
    }
    assert!(
        consumed.iter().all(|&c| c),
        "{ctx}: not every chunk was consumed"
    );
    for (b, bar) in bars.iter().enumerate() {
        assert!(
            bar.arrived == [false; 3],
            "{ctx}: barrier {b} left with a half-complete phase"
        );
    }
}

#[test]
fn ring_hand_off_has_no_deadlock_race_or_pending_phase() {
    let mut rng = SmallRng::seed_from_u64(2026_12_01);
    for stages in [2, 3] {
        for groups in [1, 2] {
            for n in 0..=13 {
                for _ in 0..200 {
                    run(n, stages, groups, &mut rng);
                }
            }
        }
    }
}

#[test]
fn four_slot_mid_chunk_issue_has_no_deadlock_race_or_pending_phase() {
    // GLA_MID_ISSUE: two TMA producer groups, four slots (slot j mod 4 only ever holds group j mod 2's chunks, one
    // EMPTY barrier a slot), chunk j + 2 issued before chunk j is published.
    let mut rng = SmallRng::seed_from_u64(2026_12_02);
    for n in 0..=17 {
        for _ in 0..300 {
            run_with(n, 4, 2, true, &mut rng);
        }
    }
}

#[test]
fn tma_parity_waits_see_their_own_chunk() {
    // One group on two or three slots (each use of a slot waited on by the group that issued the previous one), and
    // two groups on four slots (a slot only ever holds one group's chunks): a waiter's parity names the phase of its
    // own chunk.
    let mut rng = SmallRng::seed_from_u64(2026_12_03);
    for (stages, groups, mid) in [(2, 1, false), (3, 1, false), (4, 2, true)] {
        for n in 0..=13 {
            for _ in 0..300 {
                run_tma(n, stages, groups, mid, &mut rng);
            }
        }
    }
}

#[test]
fn two_groups_sharing_three_tma_slots_read_a_chunk_before_it_lands() {
    // Session j's three-slot two-group TMA ring (H200, 2026-12-02j call 7: it hung): a group publishing chunk j
    // waits for chunk j + 2 on the slot that held the other group's chunk j − 1; if that copy has not landed yet, the
    // barrier is still in the phase before, whose parity equals the one the waiter asks for — the wait passes at
    // once on stale data, and the slot's phases and its waiters drift apart (deadlock further on).
    let mut rng = SmallRng::seed_from_u64(13);
    let found = (0..2000).find_map(|_| {
        let mut r = SmallRng::seed_from_u64(rng.random());
        let e = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            run_tma(9, 3, 2, false, &mut r)
        }))
        .err()?;
        Some(e.downcast_ref::<String>().cloned().unwrap_or_default())
    });
    let msg = found.expect("three slots shared by two TMA groups should fail in some interleaving");
    assert!(
        msg.contains("passed chunk") && msg.contains("before the chunk landed"),
        "{msg}"
    );
}

#[test]
fn three_tma_slots_for_two_groups_are_sound_once_the_group_waits_for_its_issue() {
    // The repair NOTES.md (2026-12-02j, Next 1) proposes for the three-slot ring: a group barrier after the issuing
    // warp's EMPTY wait and issue, before the other warps' next mbarrier wait.
    let mut rng = SmallRng::seed_from_u64(2026_12_04);
    for n in 0..=13 {
        for _ in 0..300 {
            run_tma_with(n, 3, 2, false, true, &mut rng);
        }
    }
}

#[test]
fn early_issue_after_the_gate_is_sound() {
    // Issue::AfterGate (v18): chunk j + 2 issued right after chunk j's gate, before the vote; the issuing warp waits
    // on BAR_XREAD for the group's other warps, which arrive there once their gate has read the logits tile.
    let mut rng = SmallRng::seed_from_u64(2026_12_05);
    for n in 0..=17 {
        for _ in 0..300 {
            run_tma_issue(n, Issue::Early { xread: true }, &mut rng);
            run_tma_issue(n, Issue::Late, &mut rng);
        }
    }
}

#[test]
fn state_pass_issue_ahead_is_sound() {
    // STATES_ISSUE_AHEAD: the state pass's logits in the slot, the next chunk issued at the top of the current one.
    let mut rng = SmallRng::seed_from_u64(2026_12_04);
    for n in 0..=17 {
        for _ in 0..300 {
            run_states_ahead(n, &mut rng);
        }
    }
}

#[test]
fn early_issue_without_the_logits_barrier_overwrites_a_gate_read() {
    // The same without BAR_XREAD: the issuing warp's TMA may overwrite the logits another warp's gate has not read.
    let mut rng = SmallRng::seed_from_u64(17);
    let found = (0..2000).find_map(|_| {
        let mut r = SmallRng::seed_from_u64(rng.random());
        let e = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            run_tma_issue(9, Issue::Early { xread: false }, &mut r)
        }))
        .err()?;
        Some(e.downcast_ref::<String>().cloned().unwrap_or_default())
    });
    let msg = found.expect("the early issue without BAR_XREAD should fail in some interleaving");
    assert!(msg.contains("overwrote the logits"), "{msg}");
}

#[test]
fn the_model_catches_a_broken_protocol() {
    // The first version of the kernel shared one EMPTY barrier per slot between the two producer groups: a group
    // running ahead joins the phase meant for the other one and refills a slot too early (or the roles deadlock).
    let (stages, groups) = (3, 2);
    let mut rng = SmallRng::seed_from_u64(7);
    let found = (0..2000).any(|_| {
        let mut progs = vec![shared_empty(consumer(7, stages, groups), stages, groups)];
        for g in 0..groups {
            progs.push(shared_empty(producer(7, stages, groups, g), stages, groups));
        }
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut r = SmallRng::seed_from_u64(rng.random());
            run_programs(progs, 7, stages, groups, &mut r)
        }))
        .is_err()
    });
    assert!(
        found,
        "the shared-EMPTY protocol should fail in some interleaving"
    );
    // One group cannot run ahead of itself: with a single group the shared and per-group barriers coincide.
    assert_eq!(
        shared_empty(consumer(7, stages, 1), stages, 1),
        consumer(7, stages, 1)
    );
}
