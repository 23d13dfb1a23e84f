//! The origin's operation table (004's design, simplified): what this member has started by
//! messages on each target of one window. A target's state is made on first contact and goes
//! when its epoch ends, so a member keeps nothing for targets it does not reach (004's "no
//! O(P) structures").
//!
//! - **Lazy locks**: `MPI_Win_lock` on a target reached by messages sends nothing. The first
//!   operation on it sends the lock request and goes right behind it, without waiting for the
//!   grant (the target holds, in order, what an origin sends after a request it cannot grant
//!   yet); an epoch with no operation sends nothing at all. `lock_all` takes each target's
//!   shared lock so, on first contact.
//! - **Operations that return once started**: puts and accumulates that fetch nothing, up to
//!   [`COPIED`] bytes, copy their data and leave their requests here; `flush`, `unlock`,
//!   `fence`, `complete` and `free` wait for them. At most `limit` requests are in flight per
//!   window: one more waits for the oldest first (exhaustion handled by waiting, never by
//!   failing: 004's CLEANUP_WIN_AGGRESSIVE).
//! - **One message kept unsent** in a lock epoch: the latest small put or accumulate that
//!   fetches nothing, until the window sends anything else. An unlock then sends it with the
//!   release behind it in one message (004's done flag piggybacked on the last operation), and
//!   with the lock request before it too when it was the epoch's only operation (004's
//!   single-operation optimization: lock, put, unlock is one message and one answer).

use super::lock::LockKind;
use crate::engine::core::active::AmId;
use crate::engine::request::Handle;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::fabric::Fabric;
use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

/// Puts and accumulates of up to this many bytes are copied and left in flight; larger ones
/// are waited for at once (their copy would cost about what the wait does).
pub(super) const COPIED: usize = 64 << 10;

/// Where a target's lock stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Lock {
    /// No lock epoch on it (fence or PSCW operations).
    None,
    /// Locked by the program; nothing sent yet.
    Wanted(LockKind),
    /// The request went; the operations follow it.
    Sent(LockKind),
    /// Locked with `MPI_MODE_NOCHECK` (the program promises no other process locks the
    /// target meanwhile): no lock is taken, no message sent for it.
    NoCheck,
}

/// A request in flight, and the data it sends (kept until it is answered).
#[derive(Debug)]
pub(super) struct InFlight {
    pub handle: Handle,
    /// The call that started it (named by an error found later).
    pub call: &'static str,
    pub data: Option<Box<[u8]>>,
}

/// Bytes an unsent message keeps before its payload: room for its own argument and a word of
/// flags, should it go bracketed by its epoch's lock request or release.
pub(super) const BRACKET: usize = 16;

/// A message not sent yet (see the module's notes): everything needed to send it later.
#[derive(Debug)]
pub(super) struct Unsent {
    /// The target's world rank and the window's handler.
    pub to: (u32, AmId),
    /// The target's window rank.
    pub t: usize,
    /// The message's argument.
    pub arg: u64,
    /// Its payload's element size.
    pub unit: usize,
    /// The lock request to send before it (its epoch's first contact).
    pub lock: Option<LockKind>,
    /// [`BRACKET`] bytes of room, then the payload.
    pub data: Box<[u8]>,
    /// The call that made it.
    pub call: &'static str,
}

/// Hashes a rank by one multiplication: the keys are small integers chosen by no adversary,
/// and an odd multiplier spreads consecutive ones over distinct buckets.
#[derive(Default)]
pub(super) struct RankHasher(u64);

impl Hasher for RankHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
}

/// A map keyed by rank.
pub(super) type ByRank<V> = HashMap<usize, V, BuildHasherDefault<RankHasher>>;

#[derive(Debug, Default)]
struct Inner {
    /// The targets in lock epochs (window ranks): made by the lock, gone with the unlock.
    locks: ByRank<Lock>,
    /// A lock_all epoch is open: a target first contacted is locked shared then.
    all: bool,
    /// Requests in flight, over every target, oldest first.
    in_flight: VecDeque<InFlight>,
    /// The message kept unsent, which goes before anything else this window sends.
    unsent: Option<Unsent>,
}

/// One window's operation table at this origin.
#[derive(Debug)]
pub struct OpTable {
    inner: RefCell<Inner>,
    /// Most requests in flight at once (`WEFT_RMA_OPS`).
    limit: usize,
}

impl OpTable {
    /// An empty table keeping at most `limit` requests in flight (at least 1).
    pub fn new(limit: usize) -> OpTable {
        OpTable {
            inner: RefCell::default(),
            limit: limit.max(1),
        }
    }

    /// `MPI_Win_lock` on `t`: wanted, sent with the first operation (never, `nocheck`).
    pub(super) fn lock(&self, t: usize, kind: LockKind, nocheck: bool) {
        let lock = if nocheck { Lock::NoCheck } else { Lock::Wanted(kind) };
        self.inner.borrow_mut().locks.insert(t, lock);
    }

    /// `MPI_Win_unlock` of `t`: where its lock stood (the state goes).
    pub(super) fn unlock(&self, t: usize) -> Lock {
        self.inner.borrow_mut().locks.remove(&t).unwrap_or(Lock::None)
    }

    /// `MPI_Win_lock_all`: targets are locked shared on first contact.
    pub(super) fn lock_all(&self) {
        self.inner.borrow_mut().all = true;
    }

    /// `MPI_Win_unlock_all`: the targets whose shared lock was sent (every state goes).
    pub(super) fn unlock_all(&self) -> Vec<usize> {
        let mut inner = self.inner.borrow_mut();
        inner.all = false;
        let sent = inner.locks.drain().filter(|(_, l)| matches!(l, Lock::Sent(_)));
        sent.map(|(t, _)| t).collect()
    }

    /// An operation on `t` is about to start: the lock to request first, if this is its lock
    /// epoch's first contact (then it counts as sent), and the oldest request to wait for
    /// first if the table is full.
    pub(super) fn contact(&self, t: usize) -> (Option<LockKind>, Option<InFlight>) {
        let inner = &mut *self.inner.borrow_mut();
        let send = if inner.locks.is_empty() && !inner.all {
            None // fence or PSCW: no lookup
        } else {
            match inner.locks.get_mut(&t) {
                Some(lock) => match *lock {
                    Lock::Wanted(kind) => {
                        *lock = Lock::Sent(kind);
                        Some(kind)
                    }
                    _ => None,
                },
                None if inner.all => {
                    inner.locks.insert(t, Lock::Sent(LockKind::Shared));
                    Some(LockKind::Shared)
                }
                None => None,
            }
        };
        let pending = usize::from(send.is_some()) + usize::from(inner.unsent.is_some());
        let full = inner.in_flight.len() + pending >= self.limit;
        let oldest = if full { inner.in_flight.pop_front() } else { None };
        (send, oldest)
    }

    /// Whether an operation on `t` may be kept unsent: its lock epoch ends with a message (an
    /// unlock) that can go with it.
    pub(super) fn defers(&self, t: usize) -> bool {
        let inner = self.inner.borrow();
        match inner.locks.get(&t) {
            Some(lock) => matches!(lock, Lock::Wanted(_) | Lock::Sent(_)),
            None => inner.all,
        }
    }

    /// Keeps `unsent` unsent, until [`OpTable::take_unsent`] (the caller took the one before).
    pub(super) fn defer(&self, unsent: Unsent) {
        let old = self.inner.borrow_mut().unsent.replace(unsent);
        debug_assert!(old.is_none(), "the unsent message before was sent first");
    }

    /// The message kept unsent, to send now.
    pub(super) fn take_unsent(&self) -> Option<Unsent> {
        self.inner.borrow_mut().unsent.take()
    }

    /// Keeps `flight` until a synchronization waits for it.
    pub(super) fn keep(&self, flight: InFlight) {
        self.inner.borrow_mut().in_flight.push_back(flight);
    }

    /// Waits for every request in flight (all of them, even after one failed: each may still
    /// read its data), oldest first: a flush, unlock, fence, complete or free, once the
    /// message kept unsent went. The first error, as `call`'s.
    pub(super) fn complete<F: Fabric>(&self, eng: &mut Engine<F>, call: &'static str) -> Result<()> {
        debug_assert!(self.inner.borrow().unsent.is_none(), "the unsent message went first");
        let mut first = None;
        // One at a time: the table is not borrowed while the engine progresses.
        loop {
            let Some(f) = self.inner.borrow_mut().in_flight.pop_front() else {
                break;
            };
            if let Err(e) = wait(eng, call, f) {
                first.get_or_insert(e);
            }
        }
        first.map_or(Ok(()), Err)
    }
}

/// Waits for `f`; its error as `call`'s, naming the call that started it.
pub(super) fn wait<F: Fabric>(eng: &mut Engine<F>, call: &'static str, f: InFlight) -> Result<()> {
    eng.wait(f.handle).map(|_| ()).map_err(|e| before(call, Error::new(e.class, f.call, e.detail)))
}

/// `e`, an error of an operation an earlier call started, as `call`'s, naming that call.
pub(super) fn before(call: &'static str, e: Error) -> Error {
    let detail = match e.call == call {
        true => e.detail,
        false => format!("{} started before this failed: {}", e.call, e.detail),
    };
    Error::new(e.class, call, detail)
}

impl Drop for OpTable {
    /// Requests still in flight (a window dropped in Rust with an epoch that failed to end)
    /// may still read their data: it is leaked, not freed under them.
    fn drop(&mut self) {
        for f in self.inner.get_mut().in_flight.drain(..) {
            std::mem::forget(f.data);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::buffer::RawBuf;
    use crate::engine::core::active::{AmHandler, AmPart, Answer, ReplyTo};
    use crate::engine::testing::{run_until_done, world};
    use crate::error::ErrorClass;

    fn flight(n: u32) -> InFlight {
        InFlight {
            handle: Handle::from_cookie(u64::from(n)),
            call: "Put",
            data: None,
        }
    }

    #[test]
    fn a_lock_goes_with_the_first_operation_only() {
        let table = OpTable::new(8);
        table.lock(3, LockKind::Exclusive, false);
        assert_eq!(table.contact(3).0, Some(LockKind::Exclusive));
        assert_eq!(table.contact(3).0, None, "sent once");
        assert_eq!(table.contact(4).0, None, "no lock epoch on 4");
        assert_eq!(table.unlock(3), Lock::Sent(LockKind::Exclusive));
        table.lock(3, LockKind::Shared, false);
        assert_eq!(table.unlock(3), Lock::Wanted(LockKind::Shared), "no operation: nothing sent");
        table.lock(3, LockKind::Exclusive, true);
        assert_eq!(table.contact(3).0, None, "MPI_MODE_NOCHECK: no lock sent");
        assert_eq!(table.unlock(3), Lock::NoCheck);
        assert!(table.inner.borrow().locks.is_empty(), "the states go");
    }

    fn unsent(t: usize) -> Unsent {
        Unsent { to: (1, 7), t, arg: 0, unit: 1, lock: None, data: vec![0u8; BRACKET + 8].into(), call: "Put" }
    }

    #[test]
    fn only_an_epoch_ending_in_an_unlock_keeps_a_message_unsent() {
        let table = OpTable::new(8);
        assert!(!table.defers(3), "no lock epoch: nothing to go with");
        table.lock(3, LockKind::Exclusive, false);
        assert!(table.defers(3), "wanted");
        table.contact(3);
        assert!(table.defers(3), "sent");
        table.lock(4, LockKind::Shared, true);
        assert!(!table.defers(4), "MPI_MODE_NOCHECK: no unlock is sent");
        table.defer(unsent(3));
        assert_eq!(table.contact(5).1.map(|f| f.handle), None);
        assert_eq!(table.take_unsent().map(|u| u.t), Some(3));
        assert!(table.take_unsent().is_none(), "taken once");
        table.lock_all();
        assert!(table.defers(9), "lock_all: every target's unlock");
        assert!(!table.defers(4), "but not one locked with MPI_MODE_NOCHECK");
    }

    #[test]
    fn the_unsent_message_counts_against_the_limit() {
        let table = OpTable::new(2);
        table.keep(flight(1));
        assert!(table.contact(1).1.is_none());
        table.defer(unsent(1));
        assert_eq!(table.contact(1).1.map(|f| f.handle), Some(Handle::from_cookie(1)), "full");
    }

    #[test]
    fn lock_all_locks_each_target_on_first_contact() {
        let table = OpTable::new(8);
        table.lock_all();
        assert_eq!(table.contact(5).0, Some(LockKind::Shared));
        assert_eq!(table.contact(5).0, None);
        assert_eq!(table.contact(2).0, Some(LockKind::Shared));
        let mut locked = table.unlock_all();
        locked.sort();
        assert_eq!(locked, [2, 5]);
        assert_eq!(table.contact(5).0, None, "the epoch is over");
    }

    #[test]
    fn a_full_table_gives_its_oldest_request_to_wait_for() {
        let table = OpTable::new(2);
        assert!(table.contact(1).1.is_none());
        table.keep(flight(1));
        assert!(table.contact(1).1.is_none());
        table.keep(flight(2));
        let oldest = table.contact(2).1.expect("full");
        assert_eq!(oldest.handle, Handle::from_cookie(1));
        table.keep(flight(3));
        table.lock(4, LockKind::Exclusive, false);
        let (lock, oldest) = table.contact(4);
        assert_eq!(lock, Some(LockKind::Exclusive));
        assert_eq!(oldest.expect("full with the lock request").handle, Handle::from_cookie(2));
    }

    /// Refuses every part, as a target refuses a put outside its regions.
    struct Refuse;

    impl AmHandler for Refuse {
        fn handle(&mut self, _part: &AmPart<'_>, _reply: ReplyTo) -> Answer {
            Answer::Failed(Error::new(ErrorClass::Disp, "a window's target", "no region attached there"))
        }
    }

    #[test]
    fn an_error_found_at_the_target_surfaces_at_the_synchronization_naming_the_call() {
        let mut es = world(2, 4, 64, 64, false);
        es[1].am_register(7, Box::new(Refuse));
        let table = OpTable::new(8);
        let mut started = Vec::new();
        for _ in 0..2 {
            let kept: Box<[u8]> = vec![1u8; 16].into();
            // SAFETY: the box's heap bytes move with it into the table, which keeps them
            // until the request is answered.
            let h = unsafe { es[0].am_start((1, 7), 0, RawBuf::new(&kept), 1, None) }.expect("start");
            started.push((0, h));
            table.keep(InFlight { handle: h, call: "MPI_Put", data: Some(kept) });
        }
        run_until_done(&mut es, &started, 1000);
        let e = table.complete(&mut es[0], "MPI_Win_unlock").expect_err("refused");
        assert_eq!(e.class, ErrorClass::Disp);
        assert_eq!(e.call, "MPI_Win_unlock");
        assert!(e.detail.starts_with("MPI_Put started before this failed: "), "{e}");
        assert!(e.detail.contains("no region attached there"), "{e}");
        assert!(table.inner.borrow().in_flight.is_empty(), "both waited for, not only the first");
    }

    #[test]
    fn ranks_hash_to_distinct_buckets() {
        use std::hash::BuildHasher;
        let build = BuildHasherDefault::<RankHasher>::default();
        let low: std::collections::HashSet<u64> = (0..64usize).map(|r| build.hash_one(r) & 63).collect();
        assert_eq!(low.len(), 64, "consecutive ranks fill 64 buckets");
    }
}
