//! Whether a waiting rank yields the CPU or sleeps on its futex.
//!
//! Yielding is the cheap way to wait when the other runnable processes are ranks that wait
//! too: each runs a few microseconds, finds nothing or does its step, and yields back. Beside
//! a process that never blocks (a busy neighbour, or a rank in a long compute phase), a yield
//! hands it a whole time slice, milliseconds, and a rank that goes on yielding stays runnable
//! and keeps competing for the CPU its peers need: 4 ranks on 2 CPUs beside one shell loop ran
//! a stencil 60x slower. Sleeping on the futex takes the rank off the run queue until a peer's
//! packet wakes it, and a woken sleeper preempts a CPU hog promptly.
//!
//! So a rank times each yield. Yields that kept the CPU away for at least a slice
//! ([`Config::yield_slice`](super::Config::yield_slice)),
//! [`Config::yield_streak`](super::Config::yield_streak) of them among the last [`HISTORY`],
//! show that yields are not helping (one alone may be a passing process, and against other
//! work that comes and goes yielding still beats sleeping; not "in a row": beside a spinner,
//! long yields alternate with short ones, as the scheduler makes the spinner wait its turn
//! after each slice). The rank then sleeps instead, and skips yielding for the next
//! [`Config::yield_pause`](super::Config::yield_pause), after which one yield probes whether
//! the neighbour is gone (a short one resumes yielding; a long one stops it again at once).
//!
//! A long yield is not always a neighbour's doing: with more ranks than CPUs, the job's own
//! ranks copying or reducing large data keep a yielder waiting just as long, and sleeping
//! then only slows the next small exchange (each wake-up a futex call). So a long yield after
//! which another rank of the node is running on this rank's CPU (its advisory activity word
//! in shared memory says so: `Fabric::sibling_running_here`) counts as a short one: the CPU
//! went to a sibling, which is what yielding is for. Beside a busy neighbour the siblings are
//! yielding or asleep when the neighbour's slice ends, and the yield counts as long.

use std::time::{Duration, Instant};

/// How many of a rank's latest yields the gate remembers.
pub const HISTORY: u32 = 8;

/// The adaptive part of the wait policy: whether yields help right now.
#[derive(Clone, Debug)]
pub(crate) struct YieldGate {
    /// A yield that kept the CPU away at least this long handed it to a process that wanted
    /// a whole slice (zero: no yield counts as long).
    slice: Duration,
    /// How long yields stay off after `streak` long ones among the last [`HISTORY`].
    pause: Duration,
    /// Long yields among the last [`HISTORY`] that stop yielding.
    streak: u32,
    /// The last [`HISTORY`] yields, newest in bit 0: 1 for a long one.
    history: u8,
    /// Yields are off until this instant.
    off_until: Option<Instant>,
    /// Yields that lasted at least `slice` (and did not go to a sibling).
    pub long_yields: u64,
    /// Yields that lasted at least `slice` but ended with a sibling running on this CPU.
    pub sibling_yields: u64,
}

impl YieldGate {
    pub(crate) fn new(slice: Duration, pause: Duration, streak: u32) -> Self {
        YieldGate {
            slice,
            pause,
            streak: streak.clamp(1, HISTORY),
            history: 0,
            off_until: None,
            long_yields: 0,
            sibling_yields: 0,
        }
    }

    /// Whether a waiting rank may yield at `now` (else it should sleep).
    pub(crate) fn open(&mut self, now: Instant) -> bool {
        match self.off_until {
            Some(until) if now < until => false,
            _ => {
                self.off_until = None;
                true
            }
        }
    }

    /// Records a yield that lasted `took` and ended at `now`; `sibling` says, for a long
    /// one, whether a sibling rank had the CPU (then it counts as short). Returns whether
    /// yields still help.
    pub(crate) fn record(
        &mut self,
        took: Duration,
        now: Instant,
        sibling: impl FnOnce() -> bool,
    ) -> bool {
        let mut long = !self.slice.is_zero() && took >= self.slice;
        if long && sibling() {
            self.sibling_yields += 1;
            long = false;
        }
        self.history = (self.history << 1) | u8::from(long);
        if !long {
            return true;
        }
        self.long_yields += 1;
        if self.history.count_ones() < self.streak {
            return true;
        }
        self.off_until = Some(now + self.pause);
        false
    }

    /// Yields the CPU once, timed; `sibling` as in [`YieldGate::record`]. Returns whether
    /// yields still help.
    pub(crate) fn yield_now(&mut self, sibling: impl FnOnce() -> bool) -> bool {
        let before = Instant::now();
        std::thread::yield_now();
        let now = Instant::now();
        self.record(now.duration_since(before), now, sibling)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);
    const SLICE: Duration = Duration::from_micros(250);
    const SHORT: Duration = Duration::from_micros(249);

    #[test]
    fn long_yields_among_the_last_few_close_the_gate_for_the_pause_then_it_reopens() {
        let mut g = YieldGate::new(SLICE, 100 * MS, 2);
        let t0 = Instant::now();
        assert!(g.open(t0));
        assert!(g.record(SHORT, t0, || false), "a short yield keeps yielding");
        assert!(g.record(SLICE, t0, || false), "one long yield alone does not stop it");
        for _ in 0..HISTORY - 1 {
            assert!(g.record(SHORT, t0, || false), "short ones push it out of the history");
        }
        assert!(g.record(SLICE, t0, || false));
        assert!(g.record(SHORT, t0, || false));
        assert!(
            !g.record(SLICE, t0, || false),
            "two long ones among the last 8 stop it"
        );
        assert_eq!(g.long_yields, 3);
        assert!(!g.open(t0 + 99 * MS), "closed during the pause");
        assert!(
            g.open(t0 + 100 * MS),
            "open after the pause: probe once more"
        );
        assert!(
            !g.record(SLICE, t0 + 100 * MS, || false),
            "a long probe closes it at once"
        );
        assert!(!g.open(t0 + 150 * MS));
        assert!(g.open(t0 + 200 * MS));
        assert!(
            g.record(SHORT, t0 + 200 * MS, || false),
            "a short probe resumes yielding"
        );
        for _ in 0..HISTORY {
            assert!(g.record(SHORT, t0 + 200 * MS, || false));
        }
        assert!(
            g.record(SLICE, t0 + 200 * MS, || false),
            "and long ones must build up again"
        );
    }

    #[test]
    fn a_long_yield_that_went_to_a_sibling_counts_as_short() {
        let mut g = YieldGate::new(SLICE, 100 * MS, 2);
        let t0 = Instant::now();
        let mut asked = 0;
        for _ in 0..HISTORY {
            assert!(g.record(SLICE, t0, || {
                asked += 1;
                true
            }));
        }
        assert_eq!((g.long_yields, g.sibling_yields, asked), (0, 8, 8));
        // A short yield does not even ask.
        assert!(g.record(SHORT, t0, || unreachable!("asked about a short yield")));
        // The neighbour's long yields still close it.
        assert!(g.record(SLICE, t0, || false));
        assert!(!g.record(SLICE, t0, || false));
        assert_eq!(g.long_yields, 2);
    }

    #[test]
    fn a_zero_slice_never_closes_the_gate() {
        let mut g = YieldGate::new(Duration::ZERO, 100 * MS, 1);
        let t0 = Instant::now();
        assert!(g.record(Duration::from_secs(1), t0, || false));
        assert!(g.open(t0));
        assert_eq!(g.long_yields, 0);
    }
}
