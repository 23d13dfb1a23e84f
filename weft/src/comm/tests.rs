//! The internal collectives over real engines, one thread per rank, on an in-memory fabric.

use super::context::{self, ContextMask};
use super::group::GroupData;
use super::{agree_pair, barrier_among, split, CommData};
use std::rc::Rc;
use crate::engine::{Config, Engine};
use crate::fabric::{Fabric, Header, PullError, Sink};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Packets in flight to each rank, shared by threads.
type Queues = Arc<Mutex<Vec<VecDeque<(Header, Vec<u8>)>>>>;

/// One rank's end of the in-memory network: unbounded queues, no single copy.
struct ThreadFabric {
    rank: u32,
    net: Queues,
}

impl Fabric for ThreadFabric {
    fn rank(&self) -> u32 {
        self.rank
    }
    fn size(&self) -> u32 {
        self.net.lock().unwrap().len() as u32
    }
    fn max_payload(&self, _peer: u32) -> usize {
        1024
    }
    fn try_send(&mut self, peer: u32, hdr: &Header, payload: &[u8]) -> bool {
        self.net.lock().unwrap()[peer as usize].push_back((*hdr, payload.to_vec()));
        true
    }
    fn poll<S: Sink>(&mut self, sink: &mut S) -> usize {
        let batch: Vec<_> = self.net.lock().unwrap()[self.rank as usize]
            .drain(..)
            .collect();
        for (h, p) in &batch {
            sink.packet(h, p);
        }
        batch.len()
    }
    unsafe fn pull(&mut self, _peer: u32, _remote: u64, _dst: &mut [u8]) -> Result<(), PullError> {
        Err(PullError::Unsupported)
    }
    unsafe fn push(&mut self, _peer: u32, _remote: u64, _src: &[u8]) -> Result<(), PullError> {
        Err(PullError::Unsupported)
    }
    fn prepare_sleep(&mut self) {}
    fn sleep(&mut self, timeout: Duration) {
        std::thread::sleep(timeout.min(Duration::from_micros(100)));
    }
    fn cancel_sleep(&mut self) {}
}

fn engine(rank: u32, net: Queues) -> Engine<ThreadFabric> {
    engine_with(rank, net, 1024)
}

/// An engine sending eagerly up to `eager_limit` bytes (0: every message by rendezvous).
fn engine_with(rank: u32, net: Queues, eager_limit: usize) -> Engine<ThreadFabric> {
    Engine::new(
        ThreadFabric { rank, net },
        Config {
            eager_limit,
            spin_count: 10,
            yield_count: 10,
            sleep_timeout: Duration::from_millis(1),
            split_copy_min: 0,
            ..Config::from_tunables(&crate::tunables::Tunables::defaults(), 1, 1)
        },
    )
}

/// How long the late rank of a round holds back, waiting to see whether anyone leaves
/// without it. A correct barrier makes it wait all of it, so this is its cost per round.
const HOLD_BACK: Duration = Duration::from_millis(100);

/// `n` ranks go through `n` barriers (among world ranks `members`); in barrier `k` rank
/// `k % n` enters last: it holds back until some rank has left barrier `k` or
/// [`HOLD_BACK`] has passed. Every rank counts itself in before entering and checks, on
/// leaving, that all `n` had entered: what only a real barrier guarantees. Returns every
/// violation seen.
fn early_leavers(n: usize) -> Vec<String> {
    let net: Queues = Arc::new(Mutex::new((0..n).map(|_| VecDeque::new()).collect()));
    let entered: Arc<Vec<AtomicU32>> = Arc::new((0..n).map(|_| AtomicU32::new(0)).collect());
    let left: Arc<Vec<AtomicBool>> = Arc::new((0..n).map(|_| AtomicBool::new(false)).collect());
    // Communicator ranks differ from world ranks: the barrier must use `members`.
    let members: Vec<u32> = (0..n as u32).rev().collect();
    let (tx, rx) = std::sync::mpsc::channel();
    for me in 0..n {
        let (net, entered, left, members, tx) = (
            net.clone(),
            entered.clone(),
            left.clone(),
            members.clone(),
            tx.clone(),
        );
        std::thread::spawn(move || {
            let mut eng = engine(members[me], net);
            let mut seen = Vec::new();
            for k in 0..n {
                if me == k % n {
                    let t0 = Instant::now();
                    while !left[k].load(Ordering::SeqCst) && t0.elapsed() < HOLD_BACK {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                }
                entered[k].fetch_add(1, Ordering::SeqCst);
                barrier_among(&mut eng, 7, -16, &members, me).expect("barrier_among");
                let inside = entered[k].load(Ordering::SeqCst);
                if inside as usize != n {
                    seen.push(format!(
                        "rank {me} of {n} left barrier {k} when {inside} had entered it"
                    ));
                }
                left[k].store(true, Ordering::SeqCst);
            }
            let _ = tx.send(seen);
        });
    }
    drop(tx);
    let mut all = Vec::new();
    for _ in 0..n {
        // A watchdog: a deadlocked barrier becomes a failure.
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(seen) => all.extend(seen),
            Err(e) => panic!("barrier_among among {n}: a rank did not finish in 60 s ({e})"),
        }
    }
    all
}

#[test]
fn barrier_among_lets_no_rank_leave_before_every_rank_entered() {
    for n in [2, 3, 5, 8] {
        let bad = early_leavers(n);
        assert!(bad.is_empty(), "{n} ranks: {bad:#?}");
    }
}

#[test]
fn barrier_among_one_rank_returns() {
    let net: Queues = Arc::new(Mutex::new(vec![VecDeque::new()]));
    let mut eng = engine(0, net);
    barrier_among(&mut eng, 7, -16, &[0], 0).expect("barrier of one");
}

/// Runs `body(engine, member)` on `n` threads (member ranks reversed against world ranks)
/// and returns each member's result, in member order.
fn on_members<T: Send + 'static>(
    n: usize,
    eager_limit: usize,
    body: impl Fn(&mut Engine<ThreadFabric>, &[u32], usize) -> T + Send + Sync + 'static,
) -> Vec<T> {
    let net: Queues = Arc::new(Mutex::new((0..n).map(|_| VecDeque::new()).collect()));
    let members: Arc<Vec<u32>> = Arc::new((0..n as u32).rev().collect());
    let body = Arc::new(body);
    let hs: Vec<_> = (0..n)
        .map(|me| {
            let (net, members, body) = (net.clone(), members.clone(), body.clone());
            std::thread::spawn(move || {
                let mut eng = engine_with(members[me], net, eager_limit);
                body(&mut eng, &members, me)
            })
        })
        .collect();
    hs.into_iter().map(|h| h.join().expect("a member panicked")).collect()
}

/// Every member takes some pairs first (member m takes 2 + m, and 10 + 3m if m is odd).
fn busy_mask(m: usize) -> ContextMask {
    let mut mask = ContextMask::default();
    mask.take(2 + m as u32);
    if !m.is_multiple_of(2) {
        mask.take(10 + 3 * m as u32);
    }
    mask
}

#[test]
fn members_agree_on_the_lowest_pair_free_everywhere_at_every_count() {
    for n in 1..=9 {
        for eager in [1024, 0] {
            let got = on_members(n, eager, |eng, members, me| {
                let mut mask = busy_mask(me);
                agree_pair(eng, &mut mask, 3, 0, members, me).expect("agreement")
            });
            // Pairs 2..2+n are each taken somewhere; 10+3m for odd m.
            let taken: Vec<u32> = (0..n)
                .flat_map(|m| {
                    let mut t = vec![2 + m as u32];
                    if !m.is_multiple_of(2) {
                        t.push(10 + 3 * m as u32);
                    }
                    t
                })
                .collect();
            let want = (2..).find(|p| !taken.contains(p)).unwrap();
            assert!(got.iter().all(|&p| p == want), "n={n}: {got:?}, want {want}");
        }
    }
}

#[test]
fn split_groups_by_color_and_key_with_one_pair_for_all() {
    for n in 1..=9 {
        let got = on_members(n, 0, move |eng, members, me| {
            let parent = CommData::new(0, Rc::new(GroupData::new(members.to_vec())), me as u32);
            let mut mask = busy_mask(0);
            // Every third member opts out; colors by parity; keys reversed.
            let color = (me % 3 != 1).then_some((me % 2) as i32);
            split(eng, &mut mask, &parent, color, -(me as i32))
                .expect("split")
                .map(|c| (c.pair, c.group.members().to_vec(), c.rank))
        });
        let pair = got.iter().flatten().map(|c| c.0).next();
        let members: Vec<u32> = (0..n as u32).rev().collect();
        for (me, c) in got.iter().enumerate() {
            if me % 3 == 1 {
                assert!(c.is_none(), "n={n}: member {me} opted out");
                continue;
            }
            let (p, group, rank) = c.clone().expect("in a group");
            assert_eq!(Some(p), pair, "one pair for the whole split");
            assert_ne!(p, 2, "pair 2 is taken at every member");
            // Same color, ordered by key (reversed member order).
            let want: Vec<u32> = (0..n)
                .rev()
                .filter(|&m| m % 3 != 1 && m % 2 == me % 2)
                .map(|m| members[m])
                .collect();
            assert_eq!(group, want, "n={n} member {me}");
            assert_eq!(group[rank as usize], members[me]);
        }
    }
}

#[test]
fn agreeing_on_a_pair_costs_log_n_masks_per_member_not_n() {
    let n = 16;
    let sent = on_members(n, 1024, |eng, members, me| {
        let mut mask = ContextMask::default();
        agree_pair(eng, &mut mask, 3, 0, members, me).expect("agreement");
        eng.stats().sent_bytes
    });
    let mask_bytes = context::OFFER_LEN as u64;
    // log2(16) = 4 exchanges of one mask (and its "real" word) each: 4 masks, where gathering at one member would
    // send it 15.
    for (me, &b) in sent.iter().enumerate() {
        assert!(b <= 4 * mask_bytes, "member {me} sent {b} bytes ({} masks)", b / mask_bytes);
    }
    let total: u64 = sent.iter().sum();
    assert_eq!(total, 16 * 4 * mask_bytes, "recursive doubling: 4 masks each");
}

/// Member `me` of `members`' world, in a group of the first `k` members or of the rest: its
/// group as a communicator (pair 5 in both groups: they are disjoint), the world, and the
/// other group's leader's world rank.
fn two_groups(members: &[u32], me: usize, k: usize) -> (CommData, CommData, u32) {
    let (a, b) = members.split_at(k);
    let (mine, other) = if me < k { (a, b) } else { (b, a) };
    let rank = mine.iter().position(|&w| w == members[me]).unwrap() as u32;
    let local = CommData::new(5, Rc::new(GroupData::new(mine.to_vec())), rank);
    let world = CommData::new(0, Rc::new(GroupData::new((0..members.len() as u32).collect())), members[me]);
    (local, world, other[0])
}

#[test]
fn an_intercommunicator_joins_two_groups_on_a_pair_free_in_both() {
    for n in 2..=7 {
        for k in 1..n {
            for eager in [1024, 0] {
                let got = on_members(n, eager, move |eng, members, me| {
                    let (local, world, other_leader) = two_groups(members, me, k);
                    let mut mask = busy_mask(me);
                    let peer = (local.rank == 0).then_some((&world, other_leader));
                    let inter = super::inter::create(eng, &mut mask, &local, 0, peer, 77)
                        .expect("create");
                    let dup = super::dup(eng, &mut mask, &inter).expect("dup");
                    // The second group asks to go first; merge puts it first.
                    let merged = super::inter::merge(eng, &mut mask, &inter, me < k).expect("merge");
                    let remote = inter.remote.as_ref().unwrap().members().to_vec();
                    (inter.pair, dup.pair, remote, merged.pair, merged.group.members().to_vec(), merged.rank)
                });
                let (a, b) = (&(0..n as u32).rev().collect::<Vec<_>>()[..k].to_vec(), &(0..n as u32).rev().collect::<Vec<_>>()[k..].to_vec());
                let taken: Vec<u32> = (0..n)
                    .flat_map(|m| [Some(2 + m as u32), (m % 2 == 1).then_some(10 + 3 * m as u32)])
                    .flatten()
                    .collect();
                let free: Vec<u32> = (2..).filter(|p| !taken.contains(p)).take(3).collect();
                let both: Vec<u32> = b.iter().chain(a.iter()).copied().collect();
                for (me, (p, d, remote, mp, group, rank)) in got.into_iter().enumerate() {
                    let label = format!("n={n} k={k} eager={eager} member {me}");
                    assert_eq!((p, d, mp), (free[0], free[1], free[2]), "{label}: the pairs");
                    assert_eq!(&remote, if me < k { b } else { a }, "{label}: the remote group");
                    assert_eq!(group, both, "{label}: the merged group, high group last");
                    assert_eq!(group[rank as usize], (n - 1 - me) as u32, "{label}: my merged rank");
                }
            }
        }
    }
}

#[test]
fn merging_groups_that_ask_alike_puts_the_lower_leader_first() {
    let got = on_members(5, 1024, |eng, members, me| {
        let (local, world, other_leader) = two_groups(members, me, 2);
        let mut mask = ContextMask::default();
        let peer = (local.rank == 0).then_some((&world, other_leader));
        let inter = super::inter::create(eng, &mut mask, &local, 0, peer, 3).expect("create");
        let merged = super::inter::merge(eng, &mut mask, &inter, true).expect("merge");
        merged.group.members().to_vec()
    });
    // Group A is world ranks [4, 3], group B [2, 1, 0]: B's leader (2) is the lower.
    for g in got {
        assert_eq!(g, [2, 1, 0, 4, 3]);
    }
}

#[test]
fn an_intercommunicator_with_its_own_group_is_an_error_not_a_hang() {
    let got = on_members(1, 1024, |eng, _members, _me| {
        let local = CommData::new(5, Rc::new(GroupData::new(vec![0])), 0);
        let world = CommData::new(0, Rc::new(GroupData::new(vec![0])), 0);
        let mut mask = ContextMask::default();
        super::inter::create(eng, &mut mask, &local, 0, Some((&world, 0)), 1).unwrap_err()
    });
    assert_eq!(got[0].class, crate::error::ErrorClass::Arg);
    assert!(got[0].detail.contains("world rank 0 is in both groups"), "{}", got[0]);
}

#[test]
fn splitting_an_intercommunicator_pairs_each_color_across_the_groups() {
    for n in 2..=7 {
        for k in 1..n {
            let got = on_members(n, 0, move |eng, members, me| {
                let (local, world, other_leader) = two_groups(members, me, k);
                let mut mask = busy_mask(me);
                let peer = (local.rank == 0).then_some((&world, other_leader));
                let inter =
                    super::inter::create(eng, &mut mask, &local, 0, peer, 9).expect("create");
                // Colors by parity, every third member out; keys reverse the order.
                let color = (me % 3 != 2).then_some((me % 2) as i32);
                super::inter::split(eng, &mut mask, &inter, color, -(me as i32))
                    .expect("split")
                    .map(|c| {
                        let remote = c.remote.as_ref().unwrap().members().to_vec();
                        (c.pair, c.group.members().to_vec(), c.rank, remote)
                    })
            });
            let world: Vec<u32> = (0..n as u32).rev().collect();
            // Members of `range` with `color`, by reversed key: highest member first.
            let of = |range: std::ops::Range<usize>, color: usize| -> Vec<u32> {
                range
                    .rev()
                    .filter(|&m| m % 3 != 2 && m % 2 == color)
                    .map(|m| world[m])
                    .collect()
            };
            let pairs: Vec<u32> = got.iter().flatten().map(|c| c.0).collect();
            assert!(pairs.windows(2).all(|w| w[0] == w[1]), "one pair: {pairs:?}");
            for (me, c) in got.into_iter().enumerate() {
                let label = format!("n={n} k={k} member {me}");
                let (mine, other) = if me < k { (0..k, k..n) } else { (k..n, 0..k) };
                let (want_local, want_remote) = (of(mine, me % 2), of(other, me % 2));
                if me % 3 == 2 || want_remote.is_empty() {
                    assert!(c.is_none(), "{label}: no intercommunicator");
                    continue;
                }
                let (_, group, rank, remote) = c.expect("an intercommunicator");
                assert_eq!(group, want_local, "{label}: my group");
                assert_eq!(remote, want_remote, "{label}: the other group");
                assert_eq!(group[rank as usize], world[me], "{label}: my rank");
            }
        }
    }
}

/// Two communicators over the same members, duplicated without blocking in opposite orders
/// at the two halves (MPICH's comm_idup_overlap, with a shared parent too): every duplicate
/// completes, the members of each agree on its pair, and no two live ones share a pair.
#[test]
fn nonblocking_duplicates_started_in_different_orders_all_complete_on_distinct_pairs() {
    for n in [2, 3, 5] {
        let got = on_members(n, 1024, move |eng, members, me| {
            let group = Rc::new(GroupData::new(members.to_vec()));
            let (a, b) = (
                CommData::new(3, group.clone(), me as u32),
                CommData::new(4, group, me as u32),
            );
            let mask = busy_mask(me);
            // Fill the eager part at one member, so that the later rounds run too.
            let mut full = mask.share();
            if me == 1 {
                (0..64).for_each(|p| full.take(p));
            }
            let first = me % 2 == 0;
            let (x, y) = if first { (&a, &b) } else { (&b, &a) };
            let px = super::start_dup(eng, &mask, x, -70_000);
            let py = super::start_dup(eng, &mask, y, -70_000);
            // A blocking one in the middle, while both are in flight.
            let mut m2 = mask.share();
            let blocking = super::dup(eng, &mut m2, &a).expect("blocking dup").pair;
            let (hx, hy) = (px.handle, py.handle);
            let dx = px.finish(&mask, eng.wait(hx).map(drop)).expect("idup x").pair;
            let dy = py.finish(&mask, eng.wait(hy).map(drop)).expect("idup y").pair;
            let (da, db) = if first { (dx, dy) } else { (dy, dx) };
            (da, db, blocking)
        });
        let (da, db, bl) = got[0];
        assert!(got.iter().all(|g| *g == (da, db, bl)), "n={n}: members disagree: {got:?}");
        assert!(da != db && da != bl && db != bl, "n={n}: a pair used twice: {got:?}");
    }
}
