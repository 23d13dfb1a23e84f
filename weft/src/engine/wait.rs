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
//! So a rank times each yield: one that kept the CPU away for at least a slice
//! ([`Config::yield_slice`](super::Config::yield_slice)) shows that yields are not helping,
//! and the rank sleeps instead, and skips yielding for the next
//! [`Config::yield_pause`](super::Config::yield_pause), after which one yield probes again
//! whether the neighbour is gone.

use std::time::{Duration, Instant};

/// The adaptive part of the wait policy: whether yields help right now.
#[derive(Clone, Debug)]
pub(crate) struct YieldGate {
    /// A yield that kept the CPU away at least this long handed it to a process that wanted
    /// a whole slice (zero: no yield counts as long).
    slice: Duration,
    /// How long yields stay off after a long one.
    pause: Duration,
    /// Yields are off until this instant.
    off_until: Option<Instant>,
    /// Yields that lasted at least `slice`.
    pub long_yields: u64,
}

impl YieldGate {
    pub(crate) fn new(slice: Duration, pause: Duration) -> Self {
        YieldGate {
            slice,
            pause,
            off_until: None,
            long_yields: 0,
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

    /// Records a yield that lasted `took` and ended at `now`; returns whether yields still help.
    pub(crate) fn record(&mut self, took: Duration, now: Instant) -> bool {
        if self.slice.is_zero() || took < self.slice {
            return true;
        }
        self.long_yields += 1;
        self.off_until = Some(now + self.pause);
        false
    }

    /// Yields the CPU once, timed; returns whether yields still help.
    pub(crate) fn yield_now(&mut self) -> bool {
        let before = Instant::now();
        std::thread::yield_now();
        let now = Instant::now();
        self.record(now.duration_since(before), now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn a_long_yield_closes_the_gate_for_the_pause_then_it_reopens() {
        let mut g = YieldGate::new(Duration::from_micros(250), 100 * MS);
        let t0 = Instant::now();
        assert!(g.open(t0));
        assert!(
            g.record(Duration::from_micros(249), t0),
            "a short yield keeps yielding"
        );
        assert!(g.open(t0));
        assert!(
            !g.record(Duration::from_micros(250), t0),
            "a slice-long yield stops it"
        );
        assert_eq!(g.long_yields, 1);
        assert!(!g.open(t0 + 99 * MS), "closed during the pause");
        assert!(
            g.open(t0 + 100 * MS),
            "open again after the pause: probe once more"
        );
        assert!(g.open(t0 + 100 * MS));
    }

    #[test]
    fn a_zero_slice_never_closes_the_gate() {
        let mut g = YieldGate::new(Duration::ZERO, 100 * MS);
        let t0 = Instant::now();
        assert!(g.record(Duration::from_secs(1), t0));
        assert!(g.open(t0));
        assert_eq!(g.long_yields, 0);
    }
}
