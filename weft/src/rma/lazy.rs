//! Lazy locks on targets reached directly: `MPI_Win_lock` need not block, except when the
//! target is the calling process (MPICH's manual page; the standard's locks protect RMA calls
//! in the epoch, and load/store accesses only to the locked local or shared-memory window),
//! so a lock epoch on another member's part takes the target's lock word at its first
//! operation, and an epoch with none never touches it (as reference document 004 does for
//! targets reached by messages).
//!
//! Deferring is sound only where the lock protects RMA calls alone. It is not done for the
//! calling process's own part (its loads and stores in the epoch are protected too), for
//! `allocate_shared` windows, nor for an `allocate` window once `shared_query` has handed out
//! pointers to its parts (the program's loads and stores through them are protected then),
//! nor on windows reaching some member by messages (the operation table defers those itself).
//!
//! At most one lock is deferred per process: every other lock call (`lock`, `lock_all`, on
//! any window) takes a deferred one first, so locks are taken in the order the program asked
//! for them, and a program whose lock order cannot deadlock still cannot. A lock on a member
//! reached by messages, which the operation table defers itself (004's lazy lock), takes this
//! slot too: the next lock call settles it (sends the request if nothing went yet, and waits
//! for the grant), where 004's design alone would take locks in operation order. The front ends keep
//! the epochs (which lock is still deferred); a word held by someone else is waited for with
//! the runtime, which they pass in as `wait` ([`WindowData::lock`]).

use super::lock::LockKind;
use super::window::WindowData;
use crate::error::Result;
use std::cell::Cell;

/// The lock asked for and not taken yet.
#[derive(Clone, Copy)]
struct Deferred {
    /// Its window: live while it is here ([`forget_window`] takes it out when the window
    /// goes, with the epoch forgotten).
    window: *const WindowData,
    target: i32,
    kind: LockKind,
}

impl Deferred {
    #[inline(always)]
    fn is(&self, window: &WindowData, target: i32) -> bool {
        self.target == target && std::ptr::eq(self.window, window)
    }

    /// Takes its word if it is free now, and then leaves the slot; whether it did.
    #[inline(always)]
    fn try_take(&self) -> bool {
        // SAFETY: the window is live while its lock is deferred (see `window`).
        let window = unsafe { &*self.window };
        // The word's Acquire is 004's MEM_SYNC after the grant, as in an eager lock.
        let taken = window.try_lock_here(self.target, self.kind);
        if taken {
            set_slot(None);
        }
        taken
    }
}

thread_local! {
    /// This thread's deferred lock, if any (windows are used only by the runtime's thread).
    static DEFERRED: Cell<Option<Deferred>> = const { Cell::new(None) };
}

#[inline(always)]
fn slot() -> Option<Deferred> {
    DEFERRED.with(Cell::get)
}

#[inline(always)]
fn set_slot(d: Option<Deferred>) {
    DEFERRED.with(|slot| slot.set(d));
}

/// Takes a deferred lock the caller could not take at once, with the runtime:
/// `(window, target, kind)` ([`WindowData::take_deferred_lock`]).
pub type Wait<'a> = &'a dyn Fn(&WindowData, i32, LockKind) -> Result<()>;

/// Whether `MPI_Win_lock` of `target` on `data` may be deferred (see the module's rules).
#[inline(always)]
pub fn may_defer(data: &WindowData, target: i32) -> bool {
    !data.loads_and_stores()
        && usize::try_from(target).is_ok_and(|t| t != data.rank())
        && !data.by_messages()
}

/// Defers `target`'s lock of `kind` on `window` until the epoch's first operation. The caller
/// took any lock deferred before ([`take_deferred`]).
#[inline(always)]
pub fn defer(window: &WindowData, target: i32, kind: LockKind) {
    set_slot(Some(Deferred {
        window,
        target,
        kind,
    }));
}

/// Takes the deferred lock, if any: before another lock call, so locks are taken in the
/// order asked for. On error it stays deferred.
#[inline(always)]
pub fn take_deferred(wait: Wait<'_>) -> Result<()> {
    match slot() {
        None => Ok(()),
        Some(d) => take(d, wait),
    }
}

/// [`take_deferred`] with no waiting: whether no lock is deferred any more (false: the
/// deferred one's word is held by someone else, and it stays deferred).
#[inline(always)]
pub fn try_take_deferred() -> bool {
    slot().is_none_or(|d| d.try_take())
}

/// Takes `target`'s lock on `window` if it is the one deferred (the epoch's first operation);
/// otherwise it was taken already (by a later lock call).
#[inline(always)]
pub fn take_if(window: &WindowData, target: i32, wait: Wait<'_>) -> Result<()> {
    match slot() {
        Some(d) if d.is(window, target) => take(d, wait),
        _ => Ok(()),
    }
}

/// [`take_if`] with no waiting (the C ABI's fast path): whether `target`'s lock on `window`
/// is held now, taken here if it was the one deferred and its word is free; if the word is
/// held by someone else it stays deferred.
#[inline(always)]
pub fn try_take_if(window: &WindowData, target: i32) -> bool {
    match slot() {
        Some(d) if d.is(window, target) => d.try_take(),
        _ => true,
    }
}

/// Forgets `target`'s lock on `window` if it is the one deferred (an epoch ending with no
/// operation); whether it was (then no lock word is held to release).
#[inline(always)]
pub fn cancel_if(window: &WindowData, target: i32) -> bool {
    match slot() {
        Some(d) if d.is(window, target) => {
            set_slot(None);
            true
        }
        _ => false,
    }
}

/// A window going away: a lock deferred on it (by an epoch the program forgot, or never
/// ended) is dropped, never taken.
pub fn forget_window(window: &WindowData) {
    if slot().is_some_and(|d| std::ptr::eq(d.window, window)) {
        set_slot(None);
    }
}

/// Takes the lock `d` defers (its word now if free, else by `wait`); it stays deferred on
/// error.
#[inline(always)]
fn take(d: Deferred, wait: Wait<'_>) -> Result<()> {
    if !d.try_take() {
        // SAFETY: the window is live while its lock is deferred (see `Deferred::window`).
        wait(unsafe { &*d.window }, d.target, d.kind)?;
        set_slot(None);
    }
    Ok(())
}
