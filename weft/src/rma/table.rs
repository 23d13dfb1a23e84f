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
//!   [`COPIED`] bytes, copy their data and leave their requests here, queued per target;
//!   `flush`, `fence`, `complete` and `free` wait for them all, `unlock` for its target's.
//!   Slots come from two pools (004's): the window's own (`WEFT_RMA_OPS`), then the process's
//!   (`WEFT_RMA_OPS_GLOBAL`, shared by every window); with both used up one more waits for
//!   one of the window's own first (exhaustion handled by waiting, never by failing: 004's
//!   CLEANUP_WIN_AGGRESSIVE).
//! - **Bounded per-target state**: a lock_all epoch that reaches more than `WEFT_RMA_TARGETS`
//!   targets falls back to window-wide state (004's): every member reached by messages is sent
//!   its shared lock then, the per-target entries go, and `unlock_all` releases them all.
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
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

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

/// Slots of the process's pool in use, over every window (each window's beyond its own).
/// Relaxed: a count, read and written by the one thread inside the library at a time.
static BORROWED: AtomicUsize = AtomicUsize::new(0);

/// How many requests a table keeps in flight, and for how many targets it keeps lock_all
/// state, before it waits or falls back.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Slots of the window's own pool (`WEFT_RMA_OPS`, at least 1).
    pub own: usize,
    /// Slots of the process's pool, shared by every window (`WEFT_RMA_OPS_GLOBAL`).
    pub shared: usize,
    /// Targets with lock_all state of their own (`WEFT_RMA_TARGETS`, at least 1).
    pub targets: usize,
}

#[derive(Debug, Default)]
struct Inner {
    /// The targets in lock epochs (window ranks): made by the lock, gone with the unlock.
    locks: ByRank<Lock>,
    /// A lock_all epoch is open: a target first contacted is locked shared then.
    all: bool,
    /// The lock_all epoch outgrew its per-target state: every member reached by messages was
    /// sent its shared lock.
    all_wide: bool,
    /// Requests in flight per target, oldest first (a target's entry goes when it empties).
    in_flight: ByRank<VecDeque<InFlight>>,
    /// Requests in flight over every target.
    count: usize,
    /// How many of them hold slots of the process's pool.
    borrowed: usize,
    /// The message kept unsent, which goes before anything else this window sends.
    unsent: Option<Unsent>,
}

impl Inner {
    /// The oldest request in flight to `t`, or else to any target, out of the table (its slot
    /// given back).
    fn pop(&mut self, t: Option<usize>) -> Option<InFlight> {
        let t = t
            .filter(|t| self.in_flight.contains_key(t))
            .or_else(|| self.in_flight.keys().next().copied())?;
        let queue = self.in_flight.get_mut(&t)?;
        let f = queue.pop_front();
        if queue.is_empty() {
            self.in_flight.remove(&t);
        }
        if f.is_some() {
            self.count -= 1;
            if self.borrowed > 0 {
                self.borrowed -= 1;
                BORROWED.fetch_sub(1, Relaxed);
            }
        }
        f
    }
}

/// One window's operation table at this origin.
#[derive(Debug)]
pub struct OpTable {
    inner: RefCell<Inner>,
    limits: Limits,
}

impl OpTable {
    /// An empty table within `limits`.
    pub fn new(limits: Limits) -> OpTable {
        let limits = Limits {
            own: limits.own.max(1),
            targets: limits.targets.max(1),
            ..limits
        };
        OpTable {
            inner: RefCell::default(),
            limits,
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

    /// `MPI_Win_unlock_all`: the targets whose shared lock was sent, or `None` when the epoch
    /// fell back to window-wide state (every member reached by messages was sent its lock).
    /// Every state goes.
    pub(super) fn unlock_all(&self) -> Option<Vec<usize>> {
        let mut inner = self.inner.borrow_mut();
        inner.all = false;
        let wide = std::mem::take(&mut inner.all_wide);
        let sent = inner.locks.drain().filter(|(_, l)| matches!(l, Lock::Sent(_)));
        let sent = sent.map(|(t, _)| t).collect();
        (!wide).then_some(sent)
    }

    /// Whether the lock_all epoch should fall back to window-wide state before `t` gets state
    /// of its own: it holds as many targets as it may, and `t` is not one of them. The caller
    /// then sends every other member its lock and calls [`OpTable::go_wide`].
    pub(super) fn outgrown(&self, t: usize) -> bool {
        let inner = self.inner.borrow();
        inner.all
            && !inner.all_wide
            && !inner.locks.contains_key(&t)
            && inner.locks.len() >= self.limits.targets
    }

    /// The lock_all epoch's per-target state goes: every member reached by messages holds
    /// (or was sent) its shared lock. The targets whose lock was sent already.
    pub(super) fn go_wide(&self) -> Vec<usize> {
        let mut inner = self.inner.borrow_mut();
        inner.all_wide = true;
        let sent = inner.locks.iter().filter(|(_, l)| matches!(l, Lock::Sent(_)));
        let sent = sent.map(|(&t, _)| t).collect();
        inner.locks.retain(|_, l| !matches!(l, Lock::Sent(_)));
        sent
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
                None if inner.all && !inner.all_wide => {
                    inner.locks.insert(t, Lock::Sent(LockKind::Shared));
                    Some(LockKind::Shared)
                }
                None => None,
            }
        };
        // This operation's request, the lock's and the unsent message's.
        let wanted = 1 + usize::from(send.is_some()) + usize::from(inner.unsent.is_some());
        let own_free = self.limits.own.saturating_sub(inner.count);
        let borrow = wanted.saturating_sub(own_free);
        let full = borrow > 0 && BORROWED.load(Relaxed) + borrow > self.limits.shared;
        let oldest = if full { inner.pop(Some(t)) } else { None };
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

    /// Keeps `flight`, a request to `t`, until a synchronization waits for it: in a slot of
    /// the window's pool, else of the process's ([`OpTable::contact`] made room).
    pub(super) fn keep(&self, t: usize, flight: InFlight) {
        let inner = &mut *self.inner.borrow_mut();
        if inner.count >= self.limits.own {
            inner.borrowed += 1;
            BORROWED.fetch_add(1, Relaxed);
        }
        inner.count += 1;
        inner.in_flight.entry(t).or_default().push_back(flight);
    }

    /// Waits for every request in flight (all of them, even after one failed: each may still
    /// read its data), each target's oldest first: a flush, fence, complete or free, once the
    /// message kept unsent went. The first error, as `call`'s.
    pub(super) fn complete<F: Fabric>(&self, eng: &mut Engine<F>, call: &'static str) -> Result<()> {
        self.complete_only(eng, call, None)
    }

    /// [`OpTable::complete`], of the requests to `t` alone when it is some (an unlock or a
    /// flush of one target: the target does what one origin sends in order, so the others
    /// need not be waited for).
    pub(super) fn complete_only<F: Fabric>(&self, eng: &mut Engine<F>, call: &'static str, t: Option<usize>) -> Result<()> {
        debug_assert!(self.inner.borrow().unsent.is_none(), "the unsent message went first");
        let mut first = None;
        // One at a time: the table is not borrowed while the engine progresses.
        loop {
            let next = {
                let mut inner = self.inner.borrow_mut();
                match t {
                    Some(t) if !inner.in_flight.contains_key(&t) => None,
                    _ => inner.pop(t),
                }
            };
            let Some(f) = next else {
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
        let inner = self.inner.get_mut();
        BORROWED.fetch_sub(inner.borrowed, Relaxed);
        for f in inner.in_flight.drain().flat_map(|(_, q)| q) {
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

    /// A table of `own` slots, none of the process's, keeping state for every target.
    fn table(own: usize) -> OpTable {
        OpTable::new(Limits { own, shared: 0, targets: usize::MAX })
    }

    fn flight(n: u32) -> InFlight {
        InFlight {
            handle: Handle::from_cookie(u64::from(n)),
            call: "Put",
            data: None,
        }
    }

    #[test]
    fn a_lock_goes_with_the_first_operation_only() {
        let table = table(8);
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
        let table = table(8);
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
        let table = table(2);
        table.keep(1, flight(1));
        assert!(table.contact(1).1.is_none());
        table.defer(unsent(1));
        assert_eq!(table.contact(1).1.map(|f| f.handle), Some(Handle::from_cookie(1)), "full");
    }

    #[test]
    fn lock_all_locks_each_target_on_first_contact() {
        let table = table(8);
        table.lock_all();
        assert_eq!(table.contact(5).0, Some(LockKind::Shared));
        assert_eq!(table.contact(5).0, None);
        assert_eq!(table.contact(2).0, Some(LockKind::Shared));
        let mut locked = table.unlock_all().expect("per-target state");
        locked.sort();
        assert_eq!(locked, [2, 5]);
        assert_eq!(table.contact(5).0, None, "the epoch is over");
    }

    #[test]
    fn a_full_table_gives_its_oldest_request_to_wait_for() {
        let table = table(2);
        assert!(table.contact(1).1.is_none());
        table.keep(1, flight(1));
        assert!(table.contact(1).1.is_none());
        table.keep(1, flight(2));
        let oldest = table.contact(2).1.expect("full");
        assert_eq!(oldest.handle, Handle::from_cookie(1));
        table.keep(1, flight(3));
        table.lock(4, LockKind::Exclusive, false);
        let (lock, oldest) = table.contact(4);
        assert_eq!(lock, Some(LockKind::Exclusive));
        assert_eq!(oldest.expect("full with the lock request").handle, Handle::from_cookie(2));
    }

    #[test]
    fn requests_queue_per_target_and_a_full_table_waits_for_its_targets_oldest() {
        let table = table(3);
        table.keep(1, flight(1));
        table.keep(2, flight(2));
        table.keep(1, flight(3));
        let oldest = table.contact(2).1.expect("full: 3 of 3 own slots, none of the process's");
        assert_eq!(oldest.handle, Handle::from_cookie(2), "the contacted target's oldest");
        assert!(!table.inner.borrow().in_flight.contains_key(&2), "an emptied target's state goes");
        table.keep(1, flight(4));
        let oldest = table.contact(5).1.expect("full again");
        assert_eq!(oldest.handle, Handle::from_cookie(1), "no request to 5: another target's oldest");
        let mut inner = table.inner.borrow_mut();
        assert_eq!(inner.pop(Some(1)).map(|f| f.handle), Some(Handle::from_cookie(3)));
        assert_eq!(inner.pop(Some(1)).map(|f| f.handle), Some(Handle::from_cookie(4)));
        assert!(inner.in_flight.is_empty() && inner.count == 0);
    }

    #[test]
    fn past_its_own_slots_a_window_borrows_the_processs() {
        let generous = OpTable::new(Limits { own: 1, shared: usize::MAX / 2, targets: 8 });
        generous.keep(1, flight(1));
        assert!(generous.contact(1).1.is_none(), "the process's pool has room");
        generous.keep(1, flight(2));
        generous.keep(1, flight(3));
        assert_eq!(generous.inner.borrow().borrowed, 2, "two beyond its own slot");
        assert!(generous.inner.borrow_mut().pop(None).is_some());
        assert_eq!(generous.inner.borrow().borrowed, 1, "a borrowed slot goes back first");
        let mean = OpTable::new(Limits { own: 1, shared: 0, targets: 8 });
        assert!(mean.contact(1).1.is_none(), "its own slot is free");
        mean.keep(1, flight(4));
        assert!(mean.contact(1).1.is_some(), "no slot of the process's: wait for its own");
    }

    #[test]
    fn lock_all_falls_back_to_window_wide_state_past_its_targets() {
        let table = OpTable::new(Limits { own: 8, shared: 0, targets: 2 });
        table.lock_all();
        assert!(!table.outgrown(4));
        assert_eq!(table.contact(4).0, Some(LockKind::Shared));
        assert_eq!(table.contact(6).0, Some(LockKind::Shared));
        assert!(!table.outgrown(6), "a target it has state for");
        assert!(table.outgrown(7), "a third target");
        let mut sent = table.go_wide();
        sent.sort();
        assert_eq!(sent, [4, 6], "the locks sent already (the caller sends the others)");
        assert!(table.inner.borrow().locks.is_empty(), "the per-target state goes");
        assert_eq!(table.contact(7).0, None, "window-wide: locked already");
        assert!(!table.outgrown(9));
        assert!(table.defers(9), "every target's release goes at unlock_all");
        assert_eq!(table.unlock_all(), None, "window-wide: release every member reached by messages");
        assert_eq!(table.contact(7).0, None, "the epoch is over");
        table.lock_all();
        assert!(!table.inner.borrow().all_wide, "a new epoch starts per target again");
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
        let table = table(8);
        let mut started = Vec::new();
        for _ in 0..2 {
            let kept: Box<[u8]> = vec![1u8; 16].into();
            // SAFETY: the box's heap bytes move with it into the table, which keeps them
            // until the request is answered.
            let h = unsafe { es[0].am_start((1, 7), 0, RawBuf::new(&kept), 1, None) }.expect("start");
            started.push((0, h));
            table.keep(1, InFlight { handle: h, call: "MPI_Put", data: Some(kept) });
        }
        run_until_done(&mut es, &started, 1000);
        let e = table.complete(&mut es[0], "MPI_Win_unlock").expect_err("refused");
        assert_eq!(e.class, ErrorClass::Disp);
        assert_eq!(e.call, "MPI_Win_unlock");
        assert!(e.detail.starts_with("MPI_Put started before this failed: "), "{e}");
        assert!(e.detail.contains("no region attached there"), "{e}");
        let inner = table.inner.borrow();
        assert!(inner.in_flight.is_empty() && inner.count == 0, "both waited for, not only the first");
    }

    #[test]
    fn ranks_hash_to_distinct_buckets() {
        use std::hash::BuildHasher;
        let build = BuildHasherDefault::<RankHasher>::default();
        let low: std::collections::HashSet<u64> = (0..64usize).map(|r| build.hash_one(r) & 63).collect();
        assert_eq!(low.len(), 64, "consecutive ranks fill 64 buckets");
    }
}
