//! The gate between the CPU's atomics and the element locks on node-shared window memory
//! (issue 12, item 4): a few elements are updated in place with the CPU's atomic
//! instructions, one element at a time, while a large accumulate takes the element locks of
//! the pages it touches and combines whole blocks with plain (vectorised) loads and stores.
//! Both keep MPI's element-wise atomicity only if neither runs while the other touches the
//! same element: the gate sees to that, with no shared word written on the atomics' path.
//!
//! Each origin has a flag saying it is in an atomic (in its own entry of the window's header,
//! written by nobody else: big-reader locking). An atomic raises its flag, then looks at the
//! element locks of the pages its elements lie in; if one is held, it lowers the flag, waits
//! until it is free, and starts again. A locker takes its element locks, then waits until
//! every origin's flag is down. Dekker's handshake: the atomic's raise and look, and the
//! locker's take and look, cannot both miss the other (a sequentially consistent store before
//! a load on each side). An atomic never waits with its flag up and a locker's wait is bounded
//! by one atomic's length, so nobody waits for ever. The cost on the atomics' path: one
//! exchange on a line the origin alone writes, a load of a line lockers alone write, and a
//! plain store.
//!
//! One flag per member suffices because one thread at a time uses a window in a process
//! (`MPI_THREAD_SERIALIZED` at most; the window's data is not `Sync`): `MPI_THREAD_MULTIPLE`
//! will need one per thread.

use super::lock::LockWord;
#[cfg(loom)]
use crate::sync::fence;
use crate::sync::{spin_hint, AtomicU64, Ordering};

/// Spins between looks before yielding the processor (a descheduled holder on an
/// oversubscribed node needs it to run).
const SPINS: u32 = if cfg!(loom) { 1 } else { 64 };

/// Waits, spinning a little then yielding between looks, while `busy` says so.
fn wait_while(mut busy: impl FnMut() -> bool) {
    let mut spins = 0;
    while busy() {
        spins += 1;
        if spins < SPINS {
            spin_hint();
        } else {
            spins = 0;
            #[cfg(not(loom))]
            std::thread::yield_now();
            #[cfg(loom)]
            loom::thread::yield_now();
        }
    }
}

/// Whether any element lock `mask` names (bit `i`: `stripes[i]`) is held, as loads of
/// `order`.
#[inline]
fn any_held(stripes: &[LockWord], mut mask: u32, order: Ordering) -> bool {
    while mask != 0 {
        if stripes[mask.trailing_zeros() as usize].held_exclusively(order) {
            return true;
        }
        mask &= mask - 1;
    }
    false
}

/// Runs `atomics` (the CPU's atomic instructions on elements in the pages whose element locks
/// `mask` names) once no locker holds any of those locks, with `mine` (this origin's flag)
/// raised while it runs.
#[inline(always)]
pub fn through<R>(mine: &AtomicU64, stripes: &[LockWord], mask: u32, atomics: impl FnOnce() -> R) -> R {
    debug_assert_eq!(mine.load(Ordering::Relaxed), 0, "one thread at a time in a window's gate");
    loop {
        // SeqCst, with the SeqCst look below: against the locker's SeqCst taking of the lock
        // and looks at the flags in `drain` (its partners), either this look sees the
        // locker's lock or the locker sees this flag.
        mine.store(1, Ordering::SeqCst);
        // Loom treats SeqCst accesses as AcqRel (it implements only SeqCst fences), so its
        // model needs the fence the memory model does not: the one a fence-based handshake
        // has on both sides.
        #[cfg(loom)]
        fence(Ordering::SeqCst);
        // SeqCst: as above; it is also an Acquire, partner of the locker's Release unlock, so
        // the locker's plain stores happen before our atomics.
        if !any_held(stripes, mask, Ordering::SeqCst) {
            break;
        }
        // Relaxed: nothing was done with the flag up.
        mine.store(0, Ordering::Relaxed);
        // Relaxed looks: the SeqCst one above decides.
        wait_while(|| any_held(stripes, mask, Ordering::Relaxed));
    }
    let result = atomics();
    // Release: partner of the Acquire look in `drain`: our atomics happen before the
    // locker's plain loads and stores.
    mine.store(0, Ordering::Release);
    result
}

/// Waits, after a locker took its element locks, until no origin is in [`through`] (`flags`:
/// every origin's flag on the node).
pub fn drain<'a>(flags: impl IntoIterator<Item = &'a AtomicU64>) {
    // The locker's half of Dekker's handshake is its SeqCst taking of the lock
    // (`LockWord::try_lock`) and the SeqCst looks below, against the SeqCst raise and look in
    // `through`: in the single total order of SeqCst operations, either the atomic's look
    // comes after the taking (and sees the lock) or the raise comes before these looks (and
    // they see the flag). No fence: on x86-64 the taking is a `lock cmpxchg`, already a full
    // barrier. Loom treats SeqCst accesses as AcqRel, so its model has the fence in their
    // place (the fence-based handshake, which the code without it refines).
    #[cfg(loom)]
    fence(Ordering::SeqCst);
    for flag in flags {
        // SeqCst: as above; also an Acquire, partner of the Release lowering in `through`.
        wait_while(|| flag.load(Ordering::SeqCst) != 0);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::rma::lock::LockKind;
    use std::sync::atomic::AtomicU64 as StdU64;
    use std::sync::Arc;

    /// Two elements on one page: threads add 1 to both with atomics through the gate (each with
/// its own flag), while
    /// others add 10 to both with plain loads and stores under the page's lock: no update is
    /// lost, so the plain ones never overlapped an atomic.
    #[test]
    fn atomics_and_locked_plain_updates_lose_nothing() {
        const ROUNDS: u64 = 20_000;
        let stripes: Arc<Vec<LockWord>> = Arc::new((0..4).map(|_| LockWord::new()).collect());
        let flags: Arc<Vec<AtomicU64>> = Arc::new((0..4).map(|_| AtomicU64::new(0)).collect());
        let elements = Arc::new([StdU64::new(0), StdU64::new(0)]);
        let threads: Vec<_> = (0..4)
            .map(|i| {
                let (stripes, flags, elements) = (stripes.clone(), flags.clone(), elements.clone());
                std::thread::spawn(move || {
                    for _ in 0..ROUNDS {
                        if i % 2 == 0 {
                            through(&flags[i], &stripes, 1 << 2, || {
                                elements[0].fetch_add(1, Ordering::Relaxed);
                                elements[1].fetch_add(1, Ordering::Relaxed);
                            });
                        } else {
                            stripes[2].lock(LockKind::Exclusive, std::thread::yield_now);
                            drain(flags.iter());
                            // A plain read-modify-write, as a vectorised accumulate does.
                            for e in elements.iter() {
                                let v = e.load(Ordering::Relaxed);
                                std::hint::black_box(());
                                e.store(v + 10, Ordering::Relaxed);
                            }
                            stripes[2].unlock(LockKind::Exclusive);
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        for e in elements.iter() {
            assert_eq!(e.load(Ordering::Relaxed), 2 * ROUNDS + 2 * 10 * ROUNDS);
        }
        assert!(flags.iter().all(|c| c.load(Ordering::Relaxed) == 0));
    }

    #[test]
    fn an_atomic_on_another_page_does_not_wait_for_the_locker() {
        let stripes: Vec<LockWord> = (0..2).map(|_| LockWord::new()).collect();
        let mine = AtomicU64::new(0);
        assert!(stripes[0].try_lock(LockKind::Exclusive));
        assert_eq!(through(&mine, &stripes, 1 << 1, || 7), 7);
        assert_eq!(mine.load(Ordering::Relaxed), 0);
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use crate::rma::lock::LockKind;
    use loom::sync::Arc;

    /// One origin adds 1 to an element through the gate; a locker adds 10 with a plain load
    /// and store under the element's lock: the sum is exact in every interleaving.
    #[test]
    fn loom_gate_keeps_atomics_out_of_a_locked_update() {
        loom::model(|| {
            let stripes = Arc::new([LockWord::new()]);
            let flag = Arc::new(AtomicU64::new(0));
            let element = Arc::new(AtomicU64::new(0));
            let origin = {
                let (stripes, flag, element) = (stripes.clone(), flag.clone(), element.clone());
                loom::thread::spawn(move || {
                    through(&flag, &stripes[..], 1, || element.fetch_add(1, Ordering::Relaxed));
                })
            };
            stripes[0].lock(LockKind::Exclusive, loom::thread::yield_now);
            drain([&*flag]);
            let v = element.load(Ordering::Relaxed);
            element.store(v + 10, Ordering::Relaxed);
            stripes[0].unlock(LockKind::Exclusive);
            origin.join().unwrap();
            assert_eq!(element.load(Ordering::Relaxed), 11);
        });
    }
}
