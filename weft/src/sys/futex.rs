//! Futex wait/wake on a 32-bit word in memory shared between processes.
//!
//! The shared (non-`FUTEX_PRIVATE_FLAG`) operations key the wait queue on the physical page,
//! so a waiter and a waker in different processes that map the same segment meet.

use std::sync::atomic::AtomicU32;
use std::time::Duration;

/// Why [`wait`] returned. Callers re-check their condition whatever the reason; the reason is
/// there for tests, which can thus tell "returned at once" from "slept" without a clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Woke {
    /// The word did not hold `expected` (EAGAIN): the call did not sleep.
    Differed,
    /// The timeout passed (ETIMEDOUT).
    TimedOut,
    /// Woken by [`wake`], a signal (EINTR) or spuriously.
    Woken,
}

/// Sleeps while `*word == expected`, until woken by [`wake`], a signal, a spurious wake-up or
/// `timeout`. Returns at once if the word differs. The caller re-checks its condition.
pub fn wait(word: &AtomicU32, expected: u32, timeout: Option<Duration>) -> Woke {
    let ts = timeout.map(|d| libc::timespec {
        tv_sec: d.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: d.subsec_nanos() as libc::c_long,
    });
    let tsp = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: `word` is a valid, aligned 4-byte atomic for the duration of the call; the
    // kernel only reads it. `tsp` is null or points to a live timespec (a relative timeout
    // for FUTEX_WAIT). Errors (EAGAIN: value differed, ETIMEDOUT, EINTR) all mean "return
    // and re-check", which the caller does.
    let r = unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT,
            expected,
            tsp,
            std::ptr::null::<u32>(),
            0u32,
        )
    };
    if r == 0 {
        return Woke::Woken;
    }
    match std::io::Error::last_os_error().raw_os_error() {
        Some(libc::EAGAIN) => Woke::Differed,
        Some(libc::ETIMEDOUT) => Woke::TimedOut,
        _ => Woke::Woken,
    }
}

/// Wakes up to `n` waiters on `word`. Returns how many were woken.
pub fn wake(word: &AtomicU32, n: u32) -> usize {
    let n = n.min(i32::MAX as u32) as libc::c_int;
    // SAFETY: `word` is a valid, aligned 4-byte word; FUTEX_WAKE does not access its value.
    let r = unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE,
            n,
            std::ptr::null::<libc::timespec>(),
            std::ptr::null::<u32>(),
            0u32,
        )
    };
    r.max(0) as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;
    use std::sync::Arc;

    /// Runs `f` on a thread; a hang becomes a failure after a generous 20 s.
    fn within_watchdog<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(f());
        });
        rx.recv_timeout(Duration::from_secs(20))
            .unwrap_or_else(|e| panic!("{what}: no return within 20 s ({e})"))
    }

    #[test]
    fn wait_returns_on_mismatch_and_timeout() {
        // A word that differs: no sleep at all, even without a timeout (a wait that ignored
        // the value would hang here until the watchdog fires).
        let got = within_watchdog("wait on a differing word", || {
            let w = AtomicU32::new(5);
            wait(&w, 4, None)
        });
        assert_eq!(got, Woke::Differed, "wait(5 != 4) must return at once");

        // A matching word nobody wakes: it sleeps until the timeout, then returns. The kernel
        // never ends a FUTEX_WAIT early on its timeout, so half of it is a safe lower bound
        // (no upper bound: the machine may be slow).
        let timeout = Duration::from_millis(50);
        let (got, slept) = within_watchdog("wait with a timeout and no wake", move || {
            let w = AtomicU32::new(5);
            let t0 = std::time::Instant::now();
            let mut got = wait(&w, 5, Some(timeout));
            // A signal may cut the sleep short (EINTR); only a timeout ends the test's wait.
            while got == Woke::Woken && t0.elapsed() < timeout {
                got = wait(&w, 5, Some(timeout - t0.elapsed()));
            }
            (got, t0.elapsed())
        });
        assert_eq!(got, Woke::TimedOut, "wait(5 == 5, 50 ms) must time out");
        assert!(
            slept >= timeout / 2,
            "wait(5 == 5, 50 ms) returned after {slept:?}, before its timeout"
        );
    }

    #[test]
    fn wake_releases_a_waiter() {
        let w = Arc::new(AtomicU32::new(0));
        let w2 = w.clone();
        let t = std::thread::spawn(move || {
            while w2.load(Ordering::Acquire) == 0 {
                wait(&w2, 0, Some(Duration::from_secs(10)));
            }
        });
        std::thread::sleep(Duration::from_millis(20));
        w.store(1, Ordering::Release);
        wake(&w, 1);
        t.join().unwrap();
    }
}
