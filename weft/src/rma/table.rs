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

use super::lock::LockKind;
use crate::engine::request::Handle;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::fabric::Fabric;
use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};

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
}

/// A request in flight, and the data it sends (kept until it is answered).
#[derive(Debug)]
pub(super) struct InFlight {
    pub handle: Handle,
    /// The call that started it (named by an error found later).
    pub call: &'static str,
    pub data: Option<Box<[u8]>>,
}

#[derive(Debug)]
struct Target {
    lock: Lock,
    in_flight: VecDeque<InFlight>,
}

#[derive(Debug, Default)]
struct Inner {
    /// The targets contacted (window ranks).
    targets: HashMap<usize, Target>,
    /// A lock_all epoch is open: a target first contacted is locked shared then.
    all: bool,
    /// Requests in flight, over every target.
    count: usize,
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

    /// `MPI_Win_lock` on `t`: wanted, sent with the first operation.
    pub(super) fn lock(&self, t: usize, kind: LockKind) {
        let mut inner = self.inner.borrow_mut();
        let target = inner.targets.entry(t).or_insert_with(|| Target {
            lock: Lock::None,
            in_flight: VecDeque::new(),
        });
        target.lock = Lock::Wanted(kind);
    }

    /// `MPI_Win_unlock` of `t`: its lock's state and what is in flight there (the target's
    /// state goes).
    pub(super) fn unlock(&self, t: usize) -> (Lock, Vec<InFlight>) {
        let mut inner = self.inner.borrow_mut();
        match inner.targets.remove(&t) {
            Some(target) => {
                inner.count -= target.in_flight.len();
                (target.lock, target.in_flight.into())
            }
            None => (Lock::None, Vec::new()),
        }
    }

    /// `MPI_Win_lock_all`: targets are locked shared on first contact.
    pub(super) fn lock_all(&self) {
        self.inner.borrow_mut().all = true;
    }

    /// `MPI_Win_unlock_all`: the targets whose shared lock was sent, and everything in flight
    /// (every target's state goes).
    pub(super) fn unlock_all(&self) -> (Vec<usize>, Vec<InFlight>) {
        let mut inner = self.inner.borrow_mut();
        inner.all = false;
        inner.count = 0;
        let mut locked = Vec::new();
        let mut flights = Vec::new();
        for (t, target) in inner.targets.drain() {
            if matches!(target.lock, Lock::Sent(_)) {
                locked.push(t);
            }
            flights.extend(target.in_flight);
        }
        (locked, flights)
    }

    /// An operation on `t` is about to start: the lock to request first, if this is the lock
    /// epoch's first contact (then it counts as sent), and the oldest request to wait for
    /// first if the table is full.
    pub(super) fn contact(&self, t: usize) -> (Option<LockKind>, Option<InFlight>) {
        let mut inner = self.inner.borrow_mut();
        let all = inner.all;
        let target = inner.targets.entry(t).or_insert_with(|| Target {
            lock: Lock::None,
            in_flight: VecDeque::new(),
        });
        let send = match target.lock {
            Lock::Wanted(kind) => Some(kind),
            Lock::None if all => Some(LockKind::Shared),
            _ => None,
        };
        if let Some(kind) = send {
            target.lock = Lock::Sent(kind);
        }
        let oldest = if inner.count + usize::from(send.is_some()) >= self.limit {
            Self::pop_oldest(&mut inner, t)
        } else {
            None
        };
        (send, oldest)
    }

    /// The oldest request in flight at `t`, or else at any target.
    fn pop_oldest(inner: &mut Inner, t: usize) -> Option<InFlight> {
        let from = match inner.targets.get(&t) {
            Some(target) if !target.in_flight.is_empty() => t,
            _ => *inner.targets.iter().find(|(_, x)| !x.in_flight.is_empty())?.0,
        };
        let oldest = inner.targets.get_mut(&from)?.in_flight.pop_front();
        inner.count -= usize::from(oldest.is_some());
        oldest
    }

    /// Keeps `flight` (started on `t`) until a synchronization waits for it.
    pub(super) fn keep(&self, t: usize, flight: InFlight) {
        let mut inner = self.inner.borrow_mut();
        inner.count += 1;
        let target = inner.targets.entry(t).or_insert_with(|| Target {
            lock: Lock::None,
            in_flight: VecDeque::new(),
        });
        target.in_flight.push_back(flight);
    }

    /// Everything in flight (a flush, fence, complete or free waits for it); the states of
    /// targets outside lock epochs go.
    pub(super) fn take_all(&self) -> Vec<InFlight> {
        let mut inner = self.inner.borrow_mut();
        if inner.count == 0 && inner.targets.is_empty() {
            return Vec::new(); // no allocation on a window whose epochs sent nothing
        }
        inner.count = 0;
        let mut flights = Vec::new();
        inner.targets.retain(|_, target| {
            flights.extend(target.in_flight.drain(..));
            target.lock != Lock::None
        });
        flights
    }
}

/// Waits for every request of `flights` (all of them, even after one failed: each may still
/// read its data), then gives back their data; the first error, named as `call`'s and
/// naming the call that started the request.
pub(super) fn wait_all<F: Fabric>(
    eng: &mut Engine<F>,
    call: &'static str,
    flights: impl IntoIterator<Item = InFlight>,
) -> Result<()> {
    let mut first = None;
    for f in flights {
        if let Err(e) = eng.wait(f.handle) {
            let detail = match f.call == call {
                true => e.detail,
                false => format!("{} started before this failed: {}", f.call, e.detail),
            };
            first.get_or_insert(Error::new(e.class, call, detail));
        }
    }
    first.map_or(Ok(()), Err)
}

impl Drop for OpTable {
    /// Requests still in flight (a window dropped in Rust with an epoch that failed to end)
    /// may still read their data: it is leaked, not freed under them.
    fn drop(&mut self) {
        for target in self.inner.get_mut().targets.values_mut() {
            for f in target.in_flight.drain(..) {
                std::mem::forget(f.data);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        table.lock(3, LockKind::Exclusive);
        assert_eq!(table.contact(3).0, Some(LockKind::Exclusive));
        table.keep(3, flight(1));
        assert_eq!(table.contact(3).0, None, "sent once");
        let (lock, flights) = table.unlock(3);
        assert_eq!(lock, Lock::Sent(LockKind::Exclusive));
        assert_eq!(flights.len(), 1);
        table.lock(3, LockKind::Shared);
        let (lock, flights) = table.unlock(3);
        assert_eq!(lock, Lock::Wanted(LockKind::Shared), "no operation: nothing sent");
        assert!(flights.is_empty());
    }

    #[test]
    fn lock_all_locks_each_target_on_first_contact() {
        let table = OpTable::new(8);
        table.lock_all();
        assert_eq!(table.contact(5).0, Some(LockKind::Shared));
        assert_eq!(table.contact(5).0, None);
        assert_eq!(table.contact(2).0, Some(LockKind::Shared));
        table.keep(2, flight(1));
        let (mut locked, flights) = table.unlock_all();
        locked.sort();
        assert_eq!(locked, [2, 5]);
        assert_eq!(flights.len(), 1);
        assert_eq!(table.contact(5).0, None, "the epoch is over");
    }

    #[test]
    fn a_full_table_gives_its_oldest_request_to_wait_for() {
        let table = OpTable::new(2);
        assert!(table.contact(1).1.is_none());
        table.keep(1, flight(1));
        assert!(table.contact(1).1.is_none());
        table.keep(1, flight(2));
        let oldest = table.contact(2).1.expect("full");
        assert_eq!(oldest.handle, Handle::from_cookie(1));
        table.keep(2, flight(3));
        let rest = table.take_all();
        assert_eq!(rest.len(), 2);
        assert!(table.inner.borrow().targets.is_empty(), "no lock epoch: the states go");
    }
}
