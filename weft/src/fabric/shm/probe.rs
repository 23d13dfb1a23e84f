//! The start-up probe of the node's cores: do two of its CPUs share one core, and so its
//! caches? Then data one rank has just written costs the other nothing extra to read, and
//! the two share one core's work; on CPUs of their own, reading freshly written lines runs at
//! a fraction of the copy rate. On bare metal the answer follows from the topology; on a
//! virtual machine the host decides, and may change its mind (this project's 2-vCPU VMs flip
//! every few minutes), so it is measured: local ranks 0 and 1 bounce a value between two
//! lines, each written by one side only (the cheapest exchange the rings make), and time
//! the round trip. Local rank 0 publishes the result; every local rank reads the same one,
//! so every member of a communicator on this node decides alike.
//!
//! It runs only where both ranks have CPUs of their own (no more local ranks than CPUs):
//! otherwise each trip would wait for the scheduler, and the figure would say nothing about
//! the caches. A partner that does not answer in time ends the probe without a result.

use crate::sync::{spin_hint, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Round trips before the timed ones (both sides settle on their CPUs and lines).
const WARMUP: u64 = 64;
/// Round trips timed.
const TRIPS: u64 = 256;
/// Longest the leader spends before giving up (a partner without a CPU). The others have no
/// deadline of their own: they take whatever the leader publishes, a figure or none, so that
/// every rank of the node ends with the same answer (a rank that gave up on its own could
/// pick other algorithms than its peers, and a collective would hang). The leader always
/// publishes within this time unless it dies, and then the launcher ends the job.
const LEAD_DEADLINE: Duration = Duration::from_millis(50);
/// Set in the leader's word with the result: the rest is the round trip in ns (0: none).
const DONE: u64 = 1 << 63;
/// A round trip below this many ns means the two CPUs share a core (measured here: about
/// 50 ns on one core, 150-250 on two).
pub const SHARED_BELOW_NS: u32 = 120;

/// Local rank 0's side, with local rank 1 answering on `theirs`: publishes and returns the
/// round trip in ns (`None`: no answer in time).
pub fn lead(mine: &AtomicU64, theirs: &AtomicU64) -> Option<u32> {
    let begun = Instant::now();
    let mut timed = begun;
    for i in 1..=WARMUP + TRIPS {
        // SYNC: Release pairs with the Acquire load in `follow`; nothing else is published
        // through this word but the count itself.
        mine.store(i, Ordering::Release);
        let mut spins = 0u32;
        // SYNC: Acquire pairs with the Release store in `follow`.
        while theirs.load(Ordering::Acquire) != i {
            spins = spins.wrapping_add(1);
            if spins.is_multiple_of(1024) && begun.elapsed() > LEAD_DEADLINE {
                publish(mine, None);
                return None;
            }
            spin_hint();
        }
        if i == WARMUP {
            timed = Instant::now();
        }
    }
    let ns = (timed.elapsed().as_nanos() / u128::from(TRIPS)).clamp(1, u32::MAX.into()) as u32;
    publish(mine, Some(ns));
    Some(ns)
}

/// Local rank 1's side: answers every count the leader writes on `lead` with the same count
/// on `mine`, until the leader publishes its result, which it returns.
pub fn follow(lead: &AtomicU64, mine: &AtomicU64) -> Option<u32> {
    let begun = Instant::now();
    let mut answered = 0;
    let mut spins = 0u32;
    loop {
        // SYNC: Acquire pairs with the Release stores in `lead` and `publish`.
        let v = lead.load(Ordering::Acquire);
        if v & DONE != 0 {
            return decode(v);
        }
        if v != answered {
            // SYNC: Release pairs with the Acquire load in `lead`.
            mine.store(v, Ordering::Release);
            answered = v;
            continue;
        }
        spins = spins.wrapping_add(1);
        if spins.is_multiple_of(1024) && begun.elapsed() > LEAD_DEADLINE {
            // The leader has given up or lost its CPU: wait for its word without spinning.
            std::thread::yield_now();
        } else {
            spin_hint();
        }
    }
}

/// The other local ranks: the leader's result, once published.
pub fn result(lead: &AtomicU64) -> Option<u32> {
    loop {
        // SYNC: Acquire pairs with the Release store in `publish`.
        let v = lead.load(Ordering::Acquire);
        if v & DONE != 0 {
            return decode(v);
        }
        // These ranks may share a CPU with the two that measure: leave it to them.
        std::thread::yield_now();
    }
}

fn publish(word: &AtomicU64, ns: Option<u32>) {
    // SYNC: Release pairs with the Acquire loads in `follow` and `result`.
    word.store(DONE | u64::from(ns.unwrap_or(0)), Ordering::Release);
}

fn decode(v: u64) -> Option<u32> {
    match (v & !DONE) as u32 {
        0 => None,
        ns => Some(ns),
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn the_leader_times_the_trips_and_every_rank_reads_its_result() {
        let words: Arc<[AtomicU64; 2]> = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
        let w = words.clone();
        let follower = std::thread::spawn(move || follow(&w[0], &w[1]));
        let w = words.clone();
        let other = std::thread::spawn(move || result(&w[0]));
        let led = lead(&words[0], &words[1]);
        let followed = follower.join().unwrap();
        let read = other.join().unwrap();
        // On a loaded machine the partner thread may miss the leader's deadline: then nobody
        // has a figure, and all agree on that.
        assert_eq!(led, followed);
        assert_eq!(led, read);
        if let Some(ns) = led {
            assert!(ns > 0);
        }
    }

    #[test]
    fn a_partner_that_never_answers_ends_the_probe_without_a_result() {
        let (mine, silent) = (AtomicU64::new(0), AtomicU64::new(0));
        assert_eq!(lead(&mine, &silent), None);
        // The others learn that there is no result, instead of waiting for one.
        assert_eq!(result(&mine), None);
        assert_eq!(follow(&mine, &silent), None);
    }
}
