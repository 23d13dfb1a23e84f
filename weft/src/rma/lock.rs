//! The passive-target lock of one window at one target: one word in the target's node-shared
//! memory, taken and released by the origin alone (issue 12, item 6), so a target busy
//! computing outside the library never delays anyone.
//!
//! The word holds an exclusive bit, a "an exclusive locker is waiting" bit and the count of
//! shared holders. Shared lockers stay out while either bit is set, so a stream of shared
//! epochs cannot starve an exclusive one; exclusive lockers take the word only when no one
//! holds it. MPI asks for no more fairness than that.

use crate::sync::{spin_hint, AtomicU64, Ordering};

/// Which lock an epoch holds (`MPI_LOCK_SHARED`, `MPI_LOCK_EXCLUSIVE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockKind {
    /// Any number of holders at once (but no exclusive one).
    Shared,
    /// One holder, and no shared ones.
    Exclusive,
}

/// Held exclusively.
const EXCLUSIVE: u64 = 1 << 63;
/// An exclusive locker found the word taken and waits: shared lockers stay out.
const WRITER_WAITING: u64 = 1 << 62;
/// The shared holders' count: the bits below the two flags.
const SHARED_MASK: u64 = WRITER_WAITING - 1;

/// Spins between looks at a taken word before asking the caller to make progress (and yield).
/// One under loom, whose model counts every look as a branch.
const SPINS: u32 = if cfg!(loom) { 1 } else { 64 };

/// One lock word. `#[repr(transparent)]` over a `u64`, so a window lays one out per rank in its
/// node-shared memory (zero: unlocked) and every rank on the node reaches it there.
#[repr(transparent)]
pub struct LockWord(AtomicU64);

impl Default for LockWord {
    fn default() -> LockWord {
        LockWord::new()
    }
}

impl std::fmt::Debug for LockWord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LockWord({:#x})", self.0.load(Ordering::Relaxed))
    }
}

impl LockWord {
    /// An unlocked word (for tests and for memory that is not shared).
    pub fn new() -> LockWord {
        LockWord(AtomicU64::new(0))
    }

    /// The lock word at `ptr`.
    ///
    /// # Safety
    /// `ptr` is 8-aligned, points to a `u64` that every user touches only through a
    /// `LockWord` (atomically), and stays mapped for `'a`.
    #[cfg(not(loom))]
    pub unsafe fn at<'a>(ptr: *mut u64) -> &'a LockWord {
        // SAFETY: the caller's promise; `LockWord` is a transparent `AtomicU64`, which has the
        // size and alignment of a `u64`.
        unsafe { &*(ptr as *const LockWord) }
    }

    /// Takes the lock if it is free for `kind` now; whether it did.
    pub fn try_lock(&self, kind: LockKind) -> bool {
        let word = self.0.load(Ordering::Relaxed);
        match kind {
            LockKind::Exclusive => {
                if word & (EXCLUSIVE | SHARED_MASK) != 0 {
                    return false;
                }
                // Acquire: partner of the Release in `unlock` (either kind): the previous
                // holders' accesses happen before ours. SeqCst, for the element gate: this
                // taking and the locker's SeqCst looks at the flags that follow it are its
                // half of the handshake with `gate::through`'s raise and look (see
                // `gate::drain`). The same instruction as Acquire on x86-64.
                self.0
                    .compare_exchange(word, EXCLUSIVE, Ordering::SeqCst, Ordering::Relaxed)
                    .is_ok()
            }
            LockKind::Shared => {
                if word & (EXCLUSIVE | WRITER_WAITING) != 0 || word & SHARED_MASK == SHARED_MASK {
                    return false;
                }
                // Acquire: partner of the Release in `unlock` (an exclusive holder's writes
                // happen before our reads).
                self.0
                    .compare_exchange(word, word + 1, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
            }
        }
    }

    /// One look of [`LockWord::lock`]: takes the lock if it is free for `kind` now; an
    /// exclusive locker that finds it taken marks the word waiting (shared lockers then stay
    /// out until it is taken). Whether it took it.
    pub fn attempt(&self, kind: LockKind) -> bool {
        if self.try_lock(kind) {
            return true;
        }
        // Relaxed: a hint to shared lockers, ordering nothing; the taking CAS clears it.
        // Set only when it is not (a write on every look would keep the line bouncing).
        if kind == LockKind::Exclusive && self.0.load(Ordering::Relaxed) & WRITER_WAITING == 0 {
            self.0.fetch_or(WRITER_WAITING, Ordering::Relaxed);
        }
        false
    }

    /// Takes the lock for `kind`, waiting as long as it is taken: spinning a little, then
    /// calling `idle` (the caller's progress and yield) between looks.
    pub fn lock(&self, kind: LockKind, mut idle: impl FnMut()) {
        let mut spins = 0;
        while !self.attempt(kind) {
            spins += 1;
            if spins < SPINS {
                spin_hint();
            } else {
                spins = 0;
                idle();
            }
        }
    }

    /// Releases a lock of `kind` this caller holds.
    pub fn unlock(&self, kind: LockKind) {
        match kind {
            // Release: partner of the Acquire in `try_lock`: our accesses happen before the
            // next holder's. Clears the waiting bit too: waiting lockers set it again.
            LockKind::Exclusive => self.0.store(0, Ordering::Release),
            // Release: as above.
            LockKind::Shared => {
                let before = self.0.fetch_sub(1, Ordering::Release);
                debug_assert!(before & SHARED_MASK != 0, "a shared unlock with no holder");
            }
        }
    }

    /// Whether an exclusive holder has the lock now, as a load of `order` (the element gate's
    /// look: see `gate`).
    pub fn held_exclusively(&self, order: Ordering) -> bool {
        self.0.load(order) & EXCLUSIVE != 0
    }

    /// Whether anyone holds the lock now (a snapshot, for tests and diagnostics).
    pub fn is_locked(&self) -> bool {
        self.0.load(Ordering::Relaxed) & (EXCLUSIVE | SHARED_MASK) != 0
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::cell::UnsafeCell;
    use std::sync::Arc;

    #[test]
    fn exclusive_excludes_everyone_and_shared_share() {
        let w = LockWord::new();
        assert!(w.try_lock(LockKind::Shared));
        assert!(w.try_lock(LockKind::Shared));
        assert!(!w.try_lock(LockKind::Exclusive));
        w.unlock(LockKind::Shared);
        assert!(!w.try_lock(LockKind::Exclusive));
        w.unlock(LockKind::Shared);
        assert!(!w.is_locked());
        assert!(w.try_lock(LockKind::Exclusive));
        assert!(!w.try_lock(LockKind::Shared));
        assert!(!w.try_lock(LockKind::Exclusive));
        w.unlock(LockKind::Exclusive);
        assert!(w.try_lock(LockKind::Shared));
    }

    #[test]
    fn a_waiting_exclusive_locker_keeps_new_shared_lockers_out() {
        let w = LockWord::new();
        assert!(w.try_lock(LockKind::Shared));
        // What `lock` does after a failed exclusive attempt.
        assert!(!w.try_lock(LockKind::Exclusive));
        w.0.fetch_or(WRITER_WAITING, Ordering::Relaxed);
        assert!(!w.try_lock(LockKind::Shared));
        w.unlock(LockKind::Shared);
        assert!(w.try_lock(LockKind::Exclusive));
        w.unlock(LockKind::Exclusive);
        assert!(w.try_lock(LockKind::Shared));
    }

    struct Counter(UnsafeCell<u64>);
    // SAFETY: the test touches the cell only under the exclusive lock.
    unsafe impl Sync for Counter {}

    #[test]
    fn exclusive_epochs_from_many_threads_give_an_exact_count() {
        let w = Arc::new(LockWord::new());
        let c = Arc::new(Counter(UnsafeCell::new(0)));
        let threads: Vec<_> = (0..4)
            .map(|i| {
                let (w, c) = (w.clone(), c.clone());
                std::thread::spawn(move || {
                    for _ in 0..2000 {
                        // Half the threads also take shared epochs between, to race with both.
                        if i % 2 == 0 {
                            w.lock(LockKind::Shared, std::thread::yield_now);
                            w.unlock(LockKind::Shared);
                        }
                        w.lock(LockKind::Exclusive, std::thread::yield_now);
                        // SAFETY: only the exclusive holder touches the counter.
                        unsafe { *c.0.get() += 1 };
                        w.unlock(LockKind::Exclusive);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        // SAFETY: every thread has ended.
        assert_eq!(unsafe { *c.0.get() }, 8000);
        assert!(!w.is_locked());
    }

    #[test]
    fn the_word_in_shared_memory_is_the_same_lock() {
        let mut raw = 0u64;
        // SAFETY: an aligned u64 used only through LockWord in this test.
        let w = unsafe { LockWord::at(&mut raw) };
        assert!(w.try_lock(LockKind::Exclusive));
        assert!(w.is_locked());
        w.unlock(LockKind::Exclusive);
        assert!(!w.is_locked());
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::Arc;

    /// An exclusive locker and a shared one: they never overlap, and the word ends unlocked.
    /// (Two exclusive lockers, or a third locker, exceed loom's branch limit: a waiting look is
    /// a relaxed load, which the model may let read a stale word for ever, where hardware makes
    /// the release visible; the threaded test above covers writers against writers.)
    #[test]
    fn loom_lock_word_excludes() {
        model(LockKind::Exclusive, LockKind::Shared);
    }

    fn model(first: LockKind, second: LockKind) {
        loom::model(move || {
            let w = Arc::new(LockWord::new());
            let inside = Arc::new(loom::sync::atomic::AtomicU32::new(0));
            let run = |kind: LockKind| {
                let (w, inside) = (w.clone(), inside.clone());
                loom::thread::spawn(move || {
                    w.lock(kind, loom::thread::yield_now);
                    let add = if kind == LockKind::Exclusive { 100 } else { 1 };
                    let before = inside.fetch_add(add, std::sync::atomic::Ordering::Relaxed);
                    if kind == LockKind::Exclusive {
                        assert_eq!(before, 0, "an exclusive holder is alone");
                    } else {
                        assert!(before < 100, "no exclusive holder beside a shared one");
                    }
                    inside.fetch_sub(add, std::sync::atomic::Ordering::Relaxed);
                    w.unlock(kind);
                })
            };
            let a = run(first);
            let b = run(second);
            a.join().unwrap();
            b.join().unwrap();
            assert!(!w.is_locked());
        });
    }
}
