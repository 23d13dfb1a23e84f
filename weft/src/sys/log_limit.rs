//! A rate limit for log lines that outsiders can cause (connections dropped because they did
//! not prove they belong to the job): at most a burst of lines per window, the rest counted and
//! reported with the next line that is logged.

use std::time::{Duration, Instant};

/// At most `burst` lines per `window`; the others are counted.
#[derive(Debug)]
pub struct LogLimit {
    window: Duration,
    burst: u32,
    started: Option<Instant>,
    lines: u32,
    suppressed: u64,
}

impl LogLimit {
    /// A limit of `burst` lines per `window`.
    pub const fn new(burst: u32, window: Duration) -> Self {
        LogLimit {
            window,
            burst,
            started: None,
            lines: 0,
            suppressed: 0,
        }
    }

    /// Whether one more line may be logged now: `Some(n)` with the `n` lines suppressed since
    /// the last one logged (to say so in this one), or `None` (counted, not to be logged).
    pub fn admit(&mut self) -> Option<u64> {
        let now = Instant::now();
        if self.started.is_none_or(|w| now - w >= self.window) {
            self.started = Some(now);
            self.lines = 0;
        }
        if self.lines == self.burst {
            self.suppressed += 1;
            return None;
        }
        self.lines += 1;
        Some(std::mem::take(&mut self.suppressed))
    }

    /// The lines suppressed and not reported yet (to report them at the end).
    pub fn take_suppressed(&mut self) -> u64 {
        std::mem::take(&mut self.suppressed)
    }

    /// `" (N more dropped and not logged before this one)"` for `admit`'s `Some(N > 0)`, or
    /// nothing.
    pub fn more_note(suppressed: u64) -> String {
        if suppressed > 0 {
            format!(" ({suppressed} more dropped and not logged before this one)")
        } else {
            String::new()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_is_logged_then_the_rest_counted_and_reported_with_the_next_line() {
        let mut l = LogLimit::new(2, Duration::from_millis(50));
        assert_eq!(l.admit(), Some(0));
        assert_eq!(l.admit(), Some(0));
        assert_eq!(l.admit(), None);
        assert_eq!(l.admit(), None);
        std::thread::sleep(Duration::from_millis(60));
        assert_eq!(l.admit(), Some(2), "the next window's first line reports the two");
        assert_eq!(l.take_suppressed(), 0);
        assert_eq!(l.admit(), Some(0));
        assert_eq!(l.admit(), None);
        assert_eq!(l.take_suppressed(), 1);
        assert_eq!(LogLimit::more_note(0), "");
        assert_eq!(
            LogLimit::more_note(3),
            " (3 more dropped and not logged before this one)"
        );
    }
}
