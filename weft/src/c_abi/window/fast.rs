//! The one-sided calls small-operation latency is made of, on windows whose every member this
//! process reaches directly (node-shared parts, mapped here): `MPI_Put` and `MPI_Get`,
//! `MPI_Accumulate`, `MPI_Get_accumulate` and `MPI_Fetch_and_op`, `MPI_Compare_and_swap`, of
//! contiguous predefined data alike on both sides; the flushes; `MPI_Win_lock` (deferred to the
//! epoch's first operation, `rma::lazy`, or of a free word) and `MPI_Win_unlock`. Like `c_abi::fast_path` for `MPI_Send`: the handles decoded and the
//! arguments checked once, no allocation, nothing returned through memory, all of it inlined
//! into the C function.
//!
//! Each function returns `None` and changes nothing when it does not take the call: a derived
//! or restricted datatype, `MPI_PROC_NULL`, a window some member reaches by messages, a part
//! not mapped here, a lock held by someone else, any bad argument, a call outside
//! `MPI_Init`..`MPI_Finalize` or while another thread is inside the library. The general path
//! then runs the call and reports its errors. Nothing taken here can fail or panic, so no
//! error handler and no unwinding guard is needed.

use super::CWin;
use crate::c_abi::abi::*;
use crate::c_abi::datatype::predefined;
use crate::c_abi::{handles, op, state};
use crate::coll::op::{applies, Basic, Elements, SysOp};
use crate::rma::lock::LockKind;
use crate::rma::window::{Mapped, WindowData};
use crate::rma::{atomic, lazy};
use std::ffi::{c_int, c_void};

/// Window `win` and its data, when the call may be taken here: the library is running and
/// this thread may enter it, `win` is a live window, and this member reaches every other one
/// directly.
#[inline(always)]
fn direct(call: &'static str, win: *mut c_void) -> Option<(&'static CWin, &'static WindowData)> {
    // SAFETY: the serialized threading level (as in `errors::guard`); `adopt` only notes the
    // calling thread when no other is inside, which the general path would do alike.
    if !state::phase_is_running() || unsafe { crate::runtime::adopt(call) }.is_err() {
        return None;
    }
    let w = handles::user_object::<CWin>(win as usize)?;
    // SAFETY: the data is replaced only by `MPI_Win_free`, which cannot run while this call
    // (the serialized level: one call at a time) uses the reference; the fast paths borrow it
    // no other way.
    let d = unsafe { w.data.try_borrow_unguarded() }.ok()?.as_deref()?;
    (!d.by_messages()).then_some((w, d))
}

/// Whether an epoch this process has open on `w` covers target `t` (`passive`: a lock or
/// lock_all epoch, what a flush needs).
#[inline(always)]
fn covered(w: &CWin, t: c_int, passive: bool) -> bool {
    let Ok(e) = w.epochs.try_borrow() else {
        return false;
    };
    let Ok(t) = usize::try_from(t) else {
        return false;
    };
    e.lock_all
        || e.locks.iter().any(|&(x, _)| x == t)
        || (!passive && (e.fence || e.access.as_ref().is_some_and(|a| a.contains(&t))))
}

/// Whether target `t`'s lock is held, if this process's epoch on it deferred it (`rma::lazy`):
/// taken here at the epoch's first operation when its word is free (false when someone else
/// holds it: the general path waits).
#[inline(always)]
fn taken(w: &CWin, d: &WindowData, t: c_int) -> bool {
    let Ok(e) = w.epochs.try_borrow() else {
        return false;
    };
    if e.deferred.get().is_none_or(|x| x as c_int != t) {
        return true;
    }
    let held = lazy::try_take_if(d, t);
    if held {
        e.deferred.set(None);
    }
    held
}

/// The target's `len` bytes at displacement `disp` (none for an empty operation), when an
/// epoch covers the target (its lock taken) and they lie in a part mapped here.
#[inline(always)]
fn span(w: &CWin, d: &WindowData, (rank, disp): (c_int, isize), len: usize) -> Option<Mapped> {
    if len == 0 {
        return None;
    }
    let at = d.shared_span(rank, disp, len)?;
    (covered(w, rank, false) && taken(w, d, rank)).then_some(at)
}

/// The bytes of `count` elements of `dt`, when it is a predefined type of plain bytes and the
/// count is not negative.
#[inline(always)]
fn plain_len(count: i64, dt: *mut c_void) -> Option<usize> {
    let size = predefined::plain_size(dt as usize)?;
    usize::try_from(count).ok()?.checked_mul(size)
}

/// `MPI_Put` (`get`: false) or `MPI_Get` (true) of `count` elements of `dt` on both sides.
///
/// # Safety
/// The standard's contract: `origin` holds (a get: has room for) `count` elements of `dt`.
#[inline(always)]
pub(super) unsafe fn put_or_get(
    call: &'static str,
    get: bool,
    origin: (*const c_void, i64, *mut c_void),
    (rank, disp): (c_int, isize),
    (count, dt): (i64, *mut c_void),
    win: *mut c_void,
) -> Option<c_int> {
    if origin.1 != count || origin.2 != dt {
        return None;
    }
    let len = plain_len(count, dt)?;
    let (w, d) = direct(call, win)?;
    let at = span(w, d, (rank, disp), len)?;
    if get {
        // SAFETY: the caller's promise: room for `len` bytes at the origin.
        d.get_in_place(&at, unsafe { handles::bytes_mut(origin.0.cast_mut(), len) });
    } else {
        // SAFETY: the caller's promise: `len` bytes at the origin.
        d.put_in_place(&at, unsafe { handles::bytes(origin.0, len) });
    }
    Some(MPI_SUCCESS)
}

/// The one predefined element type `dt` is, and the accumulate operation `op` as Weft's,
/// when it applies to it.
#[inline(always)]
fn element_and_op(dt: *mut c_void, op: *mut c_void) -> Option<(Basic, SysOp)> {
    let basic = predefined::element(dt as usize)?;
    let sys = match op as usize {
        MPI_REPLACE => SysOp::Replace,
        MPI_NO_OP => SysOp::NoOp,
        v => op::predefined(v)?.sys_op(),
    };
    applies(sys, Elements::Basic(basic)).then_some((basic, sys))
}

/// `MPI_Accumulate` (`result` null), `MPI_Get_accumulate` and `MPI_Fetch_and_op`: `count`
/// elements of one predefined type, contiguous on every side. One lock-free element by the
/// CPU's atomics, more combined in place under the element locks.
///
/// # Safety
/// The standard's contract: `count` elements of `dt` at `origin` (unless `op` is
/// `MPI_NO_OP`) and room for as many at `result` when it is not null.
#[inline(always)]
pub(super) unsafe fn accumulate(
    call: &'static str,
    (origin, result): (*const c_void, *mut c_void),
    (rank, disp): (c_int, isize),
    (count, dt): (i64, *mut c_void),
    op: *mut c_void,
    win: *mut c_void,
) -> Option<c_int> {
    let (basic, sys) = element_and_op(dt, op)?;
    let len = plain_len(count, dt)?;
    let (w, d) = direct(call, win)?;
    let at = span(w, d, (rank, disp), len)?;
    let operand = match sys {
        SysOp::NoOp => &[][..],
        // SAFETY: the caller's promise.
        _ => unsafe { handles::bytes(origin, len) },
    };
    // SAFETY: the caller's promise.
    let old = (!result.is_null()).then(|| unsafe { handles::bytes_mut(result, len) });
    if count > 1 || !atomic::is_lock_free_at(basic, at.at) {
        d.accumulate_in_place(&at, sys, basic, operand, old);
        return Some(MPI_SUCCESS);
    }
    let (zeros, mut scratch) = ([0u8; 8], [0u8; 8]);
    let operand = if operand.is_empty() {
        &zeros[..len]
    } else {
        operand
    };
    let old = old.unwrap_or(&mut scratch[..len]);
    d.lone_atomic(&at, |at| {
        // SAFETY: `at` heads one lock-free element of `basic` within the target's part,
        // mapped here, which origins touch only atomically in accumulate epochs, and the
        // gate keeps lockers' plain updates away meanwhile.
        unsafe { atomic::fetch_and_op(basic, sys, at, operand, old) }
    })
    .ok()?;
    Some(MPI_SUCCESS)
}

/// `MPI_Compare_and_swap` of one lock-free element of a predefined type.
///
/// # Safety
/// The standard's contract: one element of `dt` at `origin` and `compare`, room for one at
/// `result`.
#[inline(always)]
pub(super) unsafe fn compare_and_swap(
    call: &'static str,
    (origin, compare, result): (*const c_void, *const c_void, *mut c_void),
    (rank, disp): (c_int, isize),
    dt: *mut c_void,
    win: *mut c_void,
) -> Option<c_int> {
    let basic = predefined::element(dt as usize)?;
    let len = basic.size();
    let (w, d) = direct(call, win)?;
    let at = span(w, d, (rank, disp), len).filter(|at| atomic::is_lock_free_at(basic, at.at))?;
    // SAFETY: the caller's promise: one element at each buffer.
    let (swap, cmp, old) = unsafe {
        (
            handles::bytes(origin, len),
            handles::bytes(compare, len),
            handles::bytes_mut(result, len),
        )
    };
    d.lone_atomic(&at, |at| {
        // SAFETY: as in `accumulate`.
        unsafe { atomic::compare_and_swap(basic, at, cmp, swap, old) }
    })
    .ok()?;
    Some(MPI_SUCCESS)
}

/// `MPI_Win_flush` and `MPI_Win_flush_local` (`rank`), `MPI_Win_flush_all` and
/// `MPI_Win_flush_local_all` (`None`): every operation is done when it returns, so a memory
/// barrier where one is owed.
#[inline(always)]
pub(super) fn flush(call: &'static str, win: *mut c_void, rank: Option<c_int>) -> Option<c_int> {
    let (w, d) = direct(call, win)?;
    if let Some(r) = rank {
        (usize::try_from(r).is_ok_and(|t| t < d.size()) && covered(w, r, true)).then_some(())?;
    }
    d.flush_memory();
    Some(MPI_SUCCESS)
}

/// `MPI_Win_lock`, deferred (`rma::lazy`), or of a word that is free now (the general path
/// waits for a held one).
#[inline(always)]
pub(super) fn lock(
    call: &'static str,
    lock_type: c_int,
    rank: c_int,
    assert: c_int,
    win: *mut c_void,
) -> Option<c_int> {
    let kind = match lock_type {
        MPI_LOCK_SHARED => LockKind::Shared,
        MPI_LOCK_EXCLUSIVE => LockKind::Exclusive,
        _ => return None,
    };
    if assert & !super::sync::MODES != 0 {
        return None;
    }
    let (w, d) = direct(call, win)?;
    let t = usize::try_from(rank).ok().filter(|&t| t < d.size())?;
    let mut e = w.epochs.try_borrow_mut().ok()?;
    // Locks are taken in the order asked for: a deferred one first (`rma::lazy`).
    if e.lock_all || e.locks.iter().any(|&(x, _)| x == t) || !lazy::try_take_deferred() {
        return None;
    }
    let deferred = lazy::may_defer(d, rank);
    if deferred {
        lazy::defer(d, rank, kind);
        e.deferred.set(Some(t));
    } else if !d.try_lock_here(rank, kind) {
        return None;
    }
    e.locks.push((t, kind));
    e.fence = false;
    Some(MPI_SUCCESS)
}

/// `MPI_Win_unlock` of a lock this process holds.
#[inline(always)]
pub(super) fn unlock(call: &'static str, rank: c_int, win: *mut c_void) -> Option<c_int> {
    let (w, d) = direct(call, win)?;
    let t = usize::try_from(rank).ok().filter(|&t| t < d.size())?;
    let mut e = w.epochs.try_borrow_mut().ok()?;
    let at = e.locks.iter().position(|&(x, _)| x == t)?;
    // A lock deferred and never taken (no operation): no word to release.
    let never_taken = e.deferred.get() == Some(t) && {
        e.deferred.set(None);
        lazy::cancel_if(d, rank)
    };
    if !never_taken && !d.try_unlock_here(rank, e.locks[at].1) {
        return None;
    }
    // Not `swap_remove`: the last entry (the usual one) would be copied onto itself, a
    // 16-byte load of what the lock stored as 8 + 1 bytes (a stall store forwarding cannot
    // hide).
    let last = e.locks.len() - 1;
    if at != last {
        e.locks.swap(at, last);
    }
    e.locks.truncate(last);
    Some(MPI_SUCCESS)
}
