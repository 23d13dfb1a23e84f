//! The wake-up handshake between a rank that wants to sleep and the ranks that send to it.
//!
//! A Dekker-style handshake with `fence(SeqCst)` on both sides (as in folly's and
//! crossbeam's parkers, and the Linux futex(7) idiom of a sequence word):
//!
//! ```text
//! sleeper                                   sender
//! t = seq.load()                            publish record (Release store of its stamp)
//! sleeping.store(1)                         fence(SeqCst)                      [F_S]
//! fence(SeqCst)                  [F_R]      if sleeping.load() != 0 {
//! re-poll every ring                            seq.fetch_add(1)
//! if nothing: futex_wait(seq, t)                futex_wake(seq)
//! sleeping.store(0)                         }
//! ```
//!
//! Either F_R precedes F_S in the single total order of SeqCst fences, and then the sender's
//! load sees `sleeping == 1` and rings, or F_S precedes F_R and the re-poll sees the record.
//! A ring between the re-poll and the wait is not lost because the futex compares `seq` with
//! the ticket `t` read before the re-poll. The fast path of a sender (receiver awake) is a
//! fence and a load of a line that stays in its cache: no system call.
//!
//! With [`Fences::Asymmetric`] (every rank of the node registered for `membarrier(2)`) the
//! sender's F_S is a compiler fence only, and the sleeper adds a heavy barrier after F_R
//! (`sys::membarrier::heavy_barrier`), which runs a full barrier on every CPU that runs a
//! sender: if a sender's load of `sleeping` came before that barrier on its CPU, its store of
//! the record (earlier in program order) was drained by it, before the sleeper's re-poll; if
//! after, the sleeper's `sleeping = 1`, made visible by F_R before the barrier began, is what
//! it reads. The frequent side (a sender, on every packet and collective) saves a full fence,
//! which waits for its stores to leave the store buffer (a cache line's round trip when a
//! reader holds the line: 2-rank barrier 0.26 against 0.20 µs); the rare side (a rank about to
//! sleep) pays a system call and an interrupt per busy CPU (15 µs here).
//!
//! Both words live in the sleeper's control block in shared memory, each on its own 128-byte
//! line: `seq` is written by senders, `sleeping` by its owner. Model-checked by the loom
//! tests below; stress-tested across threads in `tests.rs`.

use crate::sync::{fence, AtomicU32, CachePadded, Ordering};
use std::time::Duration;

/// `sleeping` while the owner waits on the futex.
pub const ON_FUTEX: u32 = 1;
/// `sleeping` while the owner waits in `poll(2)` (it has sockets too): senders signal its
/// wake-up descriptor instead of the futex.
pub const IN_POLL: u32 = 2;

/// The futex word and sleep flag of one rank.
#[repr(C)]
#[derive(Debug, Default)]
pub struct Doorbell {
    /// Bumped by every sender that wakes the owner; the futex word.
    pub seq: CachePadded<AtomicU32>,
    /// [`ON_FUTEX`] or [`IN_POLL`] while the owner is (about to be) asleep, else 0.
    pub sleeping: CachePadded<AtomicU32>,
}

/// How the two sides of the handshake fence (the same on every rank of a node: they agree
/// at start-up).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fences {
    /// A SeqCst fence on both sides.
    Symmetric,
    /// A compiler fence on the sender's side, and on the sleeper's a SeqCst fence followed by
    /// a heavy barrier. Only when every process that rings these doorbells has registered
    /// with `sys::membarrier::register`.
    Asymmetric,
}

/// How the owner blocks and senders unblock it: futexes in production, a model in loom tests.
pub trait Park {
    /// Blocks while `*word == expected` (may return early).
    fn wait(&self, word: &AtomicU32, expected: u32, timeout: Option<Duration>);
    /// Wakes the owner, asleep as `how` says ([`ON_FUTEX`] or [`IN_POLL`]) on `word`.
    fn wake(&self, word: &AtomicU32, how: u32);
}

/// Futex wait/wake on the shared word (cross-process: not the private futex flavour).
pub struct Futex;

impl Park for Futex {
    #[inline]
    fn wait(&self, word: &AtomicU32, expected: u32, timeout: Option<Duration>) {
        crate::sync::futex_wait(word, expected, timeout);
    }
    #[inline]
    fn wake(&self, word: &AtomicU32, _how: u32) {
        crate::sync::futex_wake_all(word);
    }
}

/// The sender's half of the Dekker handshake, between its stores (a record, a flag) and its
/// loads of the owners' `sleeping` words in [`Doorbell::ring_fenced`].
#[inline]
pub fn ring_fence(fences: Fences) {
    match fences {
        // SYNC: [F_S] pairs with the SeqCst fence [F_R] in `Doorbell::prepare`.
        Fences::Symmetric => fence(Ordering::SeqCst),
        // SYNC: [F_S] as a compiler fence (program order only) pairs with the heavy barrier
        // after [F_R] in `Doorbell::prepare`, which fences this CPU when it matters.
        Fences::Asymmetric => std::sync::atomic::compiler_fence(Ordering::SeqCst),
    }
}

impl Doorbell {
    /// Owner: announce the intent to sleep. Returns the ticket for [`Doorbell::sleep`]; the
    /// caller must re-poll every ring after this and before sleeping.
    /// `how` is [`ON_FUTEX`], or [`IN_POLL`] for an owner that will sleep in `poll(2)` on
    /// its wake-up descriptor (and then does not need the ticket).
    /// With [`Fences::Asymmetric`], a failed heavy barrier (which registration rules out) is
    /// an internal error: the process panics rather than risk sleeping through a ring.
    #[inline]
    pub fn prepare(&self, how: u32, fences: Fences) -> u32 {
        // SYNC: pairs with the Release fetch_add in `ring` (a ticket that already includes a
        // ring also makes that sender's record visible to the re-poll).
        let ticket = self.seq.load(Ordering::Acquire);
        self.sleeping.store(how, Ordering::Relaxed);
        // SYNC: [F_R] pairs with the SeqCst fence [F_S] in `ring` (Dekker: store flag, fence,
        // load the rings / store stamp, fence, load flag).
        fence(Ordering::SeqCst);
        if fences == Fences::Asymmetric {
            // SYNC: pairs with the compiler fence [F_S] of senders in `ring_fence`: a full
            // barrier on every CPU running one (see the module's comment).
            crate::sys::membarrier::heavy_barrier()
                .expect("weft: membarrier failed after this process registered for it");
        }
        ticket
    }

    /// Owner: sleep until rung (or `timeout`, or spuriously), then withdraw the announcement.
    #[inline]
    pub fn sleep(&self, ticket: u32, park: &impl Park, timeout: Option<Duration>) {
        park.wait(&self.seq, ticket, timeout);
        self.cancel();
    }

    /// Owner: withdraw the announcement without sleeping.
    #[inline]
    pub fn cancel(&self) {
        // A sender that still sees 1 only makes a harmless extra wake-up.
        self.sleeping.store(0, Ordering::Relaxed);
    }

    /// Sender, after publishing a record for the owner: wake it if it sleeps. Returns whether
    /// it rang (made the system call).
    #[inline]
    pub fn ring(&self, park: &impl Park, fences: Fences) -> bool {
        ring_fence(fences);
        self.ring_fenced(park)
    }

    /// [`Doorbell::ring`] for a sender that has issued [`ring_fence`] after its last store
    /// and before this call (one fence serves every doorbell it rings then).
    #[inline]
    pub fn ring_fenced(&self, park: &impl Park) -> bool {
        let how = self.sleeping.load(Ordering::Relaxed);
        if how == 0 {
            return false;
        }
        // SYNC: pairs with the Acquire load of the ticket in `prepare`.
        self.seq.fetch_add(1, Ordering::Release);
        park.wake(&self.seq, how);
        true
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    //! `RUSTFLAGS="--cfg loom" cargo test -p weft --release --lib loom`
    use super::*;
    use crate::sync::AtomicU64;
    use loom::sync::{Arc, Condvar, Mutex};

    /// A futex model: the value check and the enqueue are atomic with respect to wake (the
    /// kernel holds the hash-bucket lock for both); no spurious wake-ups and no timeout, so a
    /// lost wake-up shows up as a deadlock, which loom reports.
    #[derive(Default)]
    struct ModelFutex {
        lock: Mutex<()>,
        cv: Condvar,
    }

    impl Park for ModelFutex {
        fn wait(&self, word: &AtomicU32, expected: u32, _timeout: Option<Duration>) {
            let g = self.lock.lock().unwrap();
            if word.load(Ordering::Acquire) == expected {
                drop(self.cv.wait(g).unwrap());
            }
        }
        fn wake(&self, _word: &AtomicU32, _how: u32) {
            drop(self.lock.lock().unwrap());
            self.cv.notify_all();
        }
    }

    struct World {
        bell: Doorbell,
        park: ModelFutex,
        /// Stands for a ring's record stamp: how many records were published.
        published: AtomicU64,
    }

    fn world() -> Arc<World> {
        Arc::new(World {
            bell: Doorbell::default(),
            park: ModelFutex::default(),
            published: AtomicU64::new(0),
        })
    }

    /// The engine's wait loop: poll, announce, re-poll, sleep; until `want` records arrived.
    fn receiver(w: &World, want: u64) {
        loop {
            // SYNC: pairs with the Release store of a record in the sender.
            if w.published.load(Ordering::Acquire) >= want {
                return;
            }
            let t = w.bell.prepare(ON_FUTEX, Fences::Symmetric);
            if w.published.load(Ordering::Acquire) >= want {
                w.bell.cancel();
                return;
            }
            w.bell.sleep(t, &w.park, None);
        }
    }

    #[test]
    fn loom_handshake_never_loses_a_wake_up() {
        loom::model(|| {
            let w = world();
            let w2 = w.clone();
            let s = loom::thread::spawn(move || {
                w2.published.store(1, Ordering::Release);
                w2.bell.ring(&w2.park, Fences::Symmetric);
            });
            receiver(&w, 1);
            s.join().unwrap();
        });
    }

    #[test]
    fn loom_handshake_two_records_two_sleeps() {
        loom::model(|| {
            let w = world();
            let w2 = w.clone();
            let s = loom::thread::spawn(move || {
                for i in 1..=2 {
                    w2.published.store(i, Ordering::Release);
                    w2.bell.ring(&w2.park, Fences::Symmetric);
                }
            });
            receiver(&w, 1);
            receiver(&w, 2);
            s.join().unwrap();
        });
    }

    /// The model is able to see the bug it guards against: a sender without the fence loses
    /// the wake-up in some interleaving (loom then reports a deadlock).
    #[test]
    #[should_panic]
    fn loom_handshake_without_sender_fence_is_caught() {
        loom::model(|| {
            let w = world();
            let w2 = w.clone();
            let s = loom::thread::spawn(move || {
                w2.published.store(1, Ordering::Release);
                if w2.bell.sleeping.load(Ordering::Relaxed) != 0 {
                    w2.bell.seq.fetch_add(1, Ordering::Release);
                    w2.park.wake(&w2.bell.seq, ON_FUTEX);
                }
            });
            receiver(&w, 1);
            s.join().unwrap();
        });
    }
}
