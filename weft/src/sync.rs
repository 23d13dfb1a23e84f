//! The one place atomics and spin hints come from, so loom can replace them in model tests
//! (`RUSTFLAGS="--cfg loom"`). Code in `fabric::shm` and `sys` uses these, never `std::sync`.
//!
//! Loom models threads, not processes: under `cfg(loom)` the atomic types are loom's and must
//! not be placed in shared memory, so code that maps segments is only exercised without loom.

#[cfg(loom)]
pub use loom::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};
#[cfg(not(loom))]
pub use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

use std::time::Duration;

/// A hint that we are busy-waiting.
#[inline]
pub fn spin_hint() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    std::hint::spin_loop();
}

/// Pads and aligns a value to 128 bytes: two cache lines on x86_64, because its adjacent-line
/// prefetcher pulls pairs of lines (as crossbeam-utils' `CachePadded` does), so a word written
/// by one side never shares a line pair with a word written by the other.
#[repr(C, align(128))]
#[derive(Debug, Default)]
pub struct CachePadded<T>(pub T);

impl<T> std::ops::Deref for CachePadded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// Sleeps while `*word == expected` (a futex wait on a word that may be in shared memory).
/// May return spuriously; the caller re-checks. Under loom there is no kernel to sleep in, so
/// this returns at once (a spurious wake-up, which every caller must tolerate anyway).
#[inline]
pub fn futex_wait(word: &AtomicU32, expected: u32, timeout: Option<Duration>) {
    #[cfg(not(loom))]
    crate::sys::futex::wait(word, expected, timeout);
    #[cfg(loom)]
    {
        let _ = (word, expected, timeout);
        loom::thread::yield_now();
    }
}

/// Wakes every waiter on `word` (see [`futex_wait`]).
#[inline]
pub fn futex_wake_all(word: &AtomicU32) {
    #[cfg(not(loom))]
    crate::sys::futex::wake(word, u32::MAX);
    #[cfg(loom)]
    let _ = word;
}
