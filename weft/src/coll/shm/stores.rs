//! Which stores a member of a node-shared area writes its large data with, and how the
//! members find out: the calibration when an area is made (`NodeArea::calibrate_stores`), the
//! 2-member probe of the CPUs (`NodeArea::cores_shared_now`), and the rules they feed.

use super::{NodeArea, Waiter};
use std::sync::atomic::Ordering;

/// From this size a member's data goes into its large buffer by non-temporal stores
/// ([`crate::sys::cpu::copy_streaming`]): straight to memory, where the readers find it
/// without taking each line from the writer's cache. Interleaved at 2 ranks
/// (`docs/performance.md`, 2026-11-26): with the CPUs apart a 64 KiB broadcast took 4.1 µs
/// against 34.6 with ordinary stores, an allgather 9.3 against 40.3; together 4.2 against
/// 10.1 and 9.6 against 13.3; at 8 KiB, together, ordinary stores were faster (broadcast 0.71
/// against 1.02 µs).
pub(super) const STREAM_FROM: usize = 16 * 1024;

/// Bytes each member writes per exchange of [`NodeArea::calibrate_stores`]: a size where the
/// kinds of store differ most (64 KiB: `bench/c/exchange.c`).
pub(super) const CALIBRATION_BYTES: usize = 64 * 1024;
/// Exchanges timed per kind of store by [`NodeArea::calibrate_stores`] (after one that is not).
const CALIBRATION_ROUNDS: usize = 3;
/// The members keep to ordinary stores when their exchanges by non-temporal ones took over
/// this many times as long in sum as by ordinary ones. On the Intel VM: 1.55 at 2 members,
/// 1.56-1.59 at 4, 2.1 at 8, 1.5 at 16 (oversubscribed from 3), and ordinary stores won at
/// every count measured (8 ranks, 64 KiB allreduce 51 µs against 75). On the AMD VM, where
/// the built-in rules stay, non-temporal ones were never slower from 16 KiB (2 ranks, one
/// core, 64 KiB allgather 9.6 µs against 13.3).
const ORDINARY_WHEN: f64 = 1.1;

/// From this size a call on a 2-member area writes with ordinary stores when the members'
/// CPUs share a core ([`NodeArea::cores_shared_now`]), with non-temporal ones otherwise: at 2
/// ranks through 1 MiB buffers, with the vCPUs on one core, a 1 MiB allreduce took 77 µs with
/// ordinary stores against 101 with non-temporal ones, a 256 KiB one 30 against 39, a 1 MiB
/// allgather 74 against 109; on two cores ordinary stores took 4-5 times as long (1 MiB
/// allreduce 513 against 97; `docs/performance.md`, 2026-11-26, second session). Below it
/// the probe would cost more than it saves.
pub(super) const PROBE_FROM: usize = 256 * 1024;
/// A 2-member area probes its CPUs at the first of every this many calls of [`PROBE_FROM`]
/// bytes or more (the host moves them every few seconds; a probe costs up to ~2 µs).
pub(super) const PROBE_EVERY: u64 = 8;
/// Round trips a probe times.
const PROBE_TRIPS: u64 = 8;
/// A round trip of a line between CPUs that share a core takes about 65 ns here, between two
/// cores 300-340 (`bench/out/build/floor` prints half of it); a probe's 8 trips, started cold,
/// took 115-125 ns each on one core.
const SHARED_TRIP_NS: std::time::Duration = std::time::Duration::from_nanos(180);
/// How long a member waits for the other at a probe before it gives up.
const PROBE_WAIT: std::time::Duration = std::time::Duration::from_micros(20);

impl NodeArea {
    /// Whether the two members of a 2-member area run on CPUs that share a core (and its
    /// caches) now: [`PROBE_TRIPS`] round trips of a line between them, each under
    /// [`SHARED_TRIP_NS`]. Both members call it at the start of the same calls (counted
    /// alike); one that finds the other gone on to the call's collectives without it (their
    /// sizes differ, which the collective then reports) answers no, as does one that does not
    /// see the other's next trip within [`PROBE_WAIT`] (its CPU was taken: it gives up and
    /// tells the other so). No is the default: non-temporal stores.
    ///
    /// Why: a host may move the two vCPUs of a VM between one core and two every few
    /// seconds, and large data is best written for the reader in different ways: through the
    /// shared caches with ordinary stores on one core, to memory with non-temporal ones
    /// across two (`bench/c/exchange.c`: 1 MiB exchange 78-80 µs against 142-172 on one
    /// core, 414-509 against 129-131 on two).
    pub(super) fn cores_shared_now(&mut self, w: &mut impl Waiter) -> bool {
        debug_assert_eq!(self.n, 2);
        let other = 1 - self.me;
        let (mine, theirs) = (self.probe(self.me), self.probe(other));
        // Values above every earlier call's (the area's collectives are numbered alike at
        // both members): this call's, its trips', and a mark that a member gave up. The
        // probe words carry no data, only their own values: Relaxed.
        let (seq, base) = (self.seq, (self.seq + 1) << 5);
        let gave_up = base | 31;
        // Both here: each says so and wakes the other (which may sleep in the wait policy).
        mine.store(base, Ordering::Relaxed);
        w.wake_all(&self.others);
        // Acquire: pairs with the Release store of `ready` in `publish`.
        let went_on = |a: &NodeArea| a.ready(other).load(Ordering::Acquire) > seq;
        w.wait_until(&mut || theirs.load(Ordering::Relaxed) >= base || went_on(self));
        if theirs.load(Ordering::Relaxed) < base {
            return false;
        }
        // The trips: member 0 stores, member 1 echoes; both spin (the other is here).
        let trip = |v: u64| -> bool {
            let start = std::time::Instant::now();
            let mut spins = 0u32;
            loop {
                let t = theirs.load(Ordering::Relaxed);
                if t >= v {
                    return t != gave_up;
                }
                spins += 1;
                if spins.is_multiple_of(256) && start.elapsed() > PROBE_WAIT {
                    mine.store(gave_up, Ordering::Relaxed);
                    return false;
                }
            }
        };
        let pinger = self.me == 0;
        let start = std::time::Instant::now();
        for i in 1..=PROBE_TRIPS {
            if pinger {
                mine.store(base | i, Ordering::Relaxed);
            }
            if !trip(base | i) {
                return false;
            }
            if !pinger {
                mine.store(base | i, Ordering::Relaxed);
            }
        }
        start.elapsed() < SHARED_TRIP_NS * PROBE_TRIPS as u32
    }

    /// Decides how this member writes its large data from now on: with `ordinary` (the
    /// `WEFT_COLL_SHM_STREAM` tunable: 0 `Some(true)`, 1 `Some(false)`) as said; with `None`,
    /// collectively with every member, by timing exchanges of [`CALIBRATION_BYTES`] through
    /// the large buffers, written alternately by each kind of store. Each member keeps its
    /// cheapest exchange by each kind (its write and its read of the next member's data, not
    /// its waits); then all share their figures, and all keep to ordinary stores when the
    /// non-temporal exchanges took over [`ORDINARY_WHEN`] times as long in sum. Made for
    /// machines that differ: on the AMD EPYC VM the built-in rules come from, non-temporal
    /// stores were up to 4 times as fast with the two vCPUs on two cores and as fast or
    /// faster on one; on an Intel Xeon VM (a 300 MiB L3 that both cores share) they took
    /// half as long again (`bench/c/exchange.c`, 64 KiB: 15.2-16.0 µs against 10.5).
    /// Costs 8 exchanges of 64 KiB when the area is made: on 2 CPUs 0.2 ms at 2 members,
    /// 0.3-0.4 at 4, 0.7-1.0 at 8, 1.1 at 16, but about 30 at 32 and 100 at 64 (each member
    /// must get a CPU for each exchange). So a process keeps what it found (`kept`: ordinary
    /// stores or not), and the members of a new area first share what they kept, in one
    /// collective of a byte each: when every one of them found the same, they keep to it and
    /// time nothing.
    pub fn calibrate_stores(
        &mut self,
        w: &mut impl Waiter,
        ordinary: Option<bool>,
        kept: &mut Option<bool>,
    ) {
        if let Some(ordinary) = ordinary {
            self.ordinary_only = ordinary;
            return;
        }
        // Every member alike: the same piece size, agreed when the area was made.
        if self.piece < CALIBRATION_BYTES {
            return;
        }
        let said = [kept.map_or(0, |o| 1 + u8::from(o))];
        let mut all = vec![0u8; self.n()];
        if self.gather(w, None, &said, &mut all).is_ok()
            && said[0] != 0
            && all.iter().all(|&b| b == said[0])
        {
            self.ordinary_only = said[0] == 2;
            return;
        }
        let len = CALIBRATION_BYTES;
        let mine = vec![self.me as u8 ^ 0x5a; len];
        let mut into = vec![0u8; len];
        let mut best = [std::time::Duration::MAX; 2];
        for round in 0..=CALIBRATION_ROUNDS {
            for (kind, stream) in [false, true].into_iter().enumerate() {
                let k = self.begin(w, Some(len));
                let start = std::time::Instant::now();
                self.write_by(k, &mine, 0..0, stream);
                let mut spent = start.elapsed();
                self.publish(w, k, Some(len));
                // The next member's data only: the calibration's copies grow with the members,
                // not with their square.
                let next = (self.me + 1) % self.n();
                self.wait_data(w, k, next..next + 1);
                let start = std::time::Instant::now();
                into.copy_from_slice(self.read(next, k, len));
                // Kept: a copy into memory nothing reads could be left out.
                std::hint::black_box(&mut into);
                spent += start.elapsed();
                // Round 0 warms the buffers (their pages' first touch) and is not counted.
                if round > 0 {
                    best[kind] = best[kind].min(spent);
                }
            }
        }
        // Every member decides alike, from the sums of every member's figures: one member's
        // alone, oversubscribed, depends on which of the others shared its CPU.
        let mine: Vec<u8> = best.iter().flat_map(|d| (d.as_nanos() as u64).to_ne_bytes()).collect();
        let mut all = vec![0u8; mine.len() * self.n()];
        if self.gather(w, None, &mine, &mut all).is_err() {
            return; // not reached: every member writes 16 bytes
        }
        let mut sums = [0f64; 2];
        for (i, figure) in all.chunks_exact(8).enumerate() {
            sums[i % 2] += u64::from_ne_bytes(figure.try_into().expect("8 bytes")) as f64;
        }
        self.ordinary_only = sums[1] > sums[0] * ORDINARY_WHEN;
        *kept = Some(self.ordinary_only);
    }

    /// Whether data larger than a slot that every member only copies (a broadcast, an
    /// allgather) moves faster by messages, each byte copied once from the writer's buffer,
    /// than through this area a piece at a time, each byte written and read: at 2 members
    /// where ordinary stores won the calibration (or were set), since a reader there takes
    /// lines another core has just written faster than memory gives them. On the Intel VM, 2 ranks,
    /// 1 MiB broadcast 31 µs by messages against 65-75 through the area, 1 MiB allgather 168
    /// against 237; on the AMD VM (non-temporal stores kept) the area won (38-44 against
    /// 44-57, 78-88 against 106-136). Every member decides alike: the calibration's figures
    /// are shared.
    pub fn single_copies_win(&self) -> bool {
        self.ordinary_only && self.n == 2
    }
}
