//! Futex wait/wake on a 32-bit word in memory shared between processes.
//!
//! The shared (non-`FUTEX_PRIVATE_FLAG`) operations key the wait queue on the physical page,
//! so a waiter and a waker in different processes that map the same segment meet.

use std::sync::atomic::AtomicU32;
use std::time::Duration;

/// Sleeps while `*word == expected`, until woken by [`wake`], a signal, a spurious wake-up or
/// `timeout`. Returns at once if the word differs. The caller re-checks its condition.
pub fn wait(word: &AtomicU32, expected: u32, timeout: Option<Duration>) {
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
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT,
            expected,
            tsp,
            std::ptr::null::<u32>(),
            0u32,
        );
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

    #[test]
    fn wait_returns_on_mismatch_and_timeout() {
        let w = AtomicU32::new(5);
        wait(&w, 4, None); // differs: immediate
        wait(&w, 5, Some(Duration::from_millis(5))); // times out
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
