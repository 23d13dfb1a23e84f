//! The one place atomics and spin hints come from, so loom can replace them in model tests
//! (`RUSTFLAGS="--cfg loom"`). Code in `fabric::shm` and `sys` uses these, never `std::sync`.

#[cfg(loom)]
pub use loom::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};
#[cfg(not(loom))]
pub use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

/// A hint that we are busy-waiting.
#[inline]
pub fn spin_hint() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    std::hint::spin_loop();
}
