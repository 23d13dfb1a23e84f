//! Synchronization on a window: fence, passive target (lock/unlock, lock_all, flush, sync) and
//! post-start-complete-wait, with the epochs this process has open checked on every call.

use super::{win, CWin};
use crate::c_abi::abi::*;
use crate::c_abi::errors::{guard, CError};
use crate::rma::assert::Assert;
use crate::rma::lazy;
use crate::rma::lock::LockKind;
use crate::rma::window::WindowData;
use crate::runtime;
use crate::topology::Group;
use std::ffi::{c_int, c_void};

/// The assertions a synchronization call accepts (`MPI_MODE_*`).
pub(super) const MODES: c_int =
    MPI_MODE_NOCHECK | MPI_MODE_NOPRECEDE | MPI_MODE_NOPUT | MPI_MODE_NOSTORE | MPI_MODE_NOSUCCEED;

fn check_assert(call: &'static str, assert: c_int) -> Result<(), CError> {
    if assert & !MODES != 0 {
        return Err(CError::new(
            MPI_ERR_ASSERT,
            call,
            format!("the assertion {assert:#x} has bits that are no MPI_MODE_* value"),
        ));
    }
    Ok(())
}

/// `assert`'s `MPI_MODE_*` bits (checked by [`check_assert`]) as Weft's [`Assert`].
fn asserted(assert: c_int) -> Assert {
    [
        (MPI_MODE_NOCHECK, Assert::NO_CHECK),
        (MPI_MODE_NOSTORE, Assert::NO_STORE),
        (MPI_MODE_NOPUT, Assert::NO_PUT),
        (MPI_MODE_NOPRECEDE, Assert::NO_PRECEDE),
        (MPI_MODE_NOSUCCEED, Assert::NO_SUCCEED),
    ]
    .into_iter()
    .filter(|&(mode, _)| assert & mode != 0)
    .fold(Assert::NONE, |all, (_, a)| all | a)
}

fn sync_error(call: &'static str, detail: impl Into<String>) -> CError {
    CError::new(MPI_ERR_RMA_SYNC, call, detail)
}

/// Checks that an epoch this process has open covers `target` (a window rank), and takes
/// its lock if it was deferred (the epoch's first operation: see `rma::lazy`).
pub(super) fn covers(call: &'static str, w: &CWin, target: usize) -> Result<(), CError> {
    let deferred = {
        let e = w.epochs.borrow();
        let covered = e.fence
            || e.lock_all
            || e.locks.iter().any(|&(t, _)| t == target)
            || e.access.as_ref().is_some_and(|a| a.contains(&target));
        if !covered {
            return Err(sync_error(
                call,
                format!("no epoch this process has open on the window covers target {target}"),
            ));
        }
        e.deferred.get() == Some(target)
    };
    if deferred {
        w.with(|d| lazy::take_if(d, target as c_int, &wait_lock(call)))
            .map_err(CError::from_weft)?;
        w.epochs.borrow().deferred.set(None);
    }
    Ok(())
}

/// Waits for a lock word someone else holds, progressing the runtime (a deferred lock taken).
fn wait_lock(
    call: &'static str,
) -> impl Fn(&WindowData, c_int, LockKind) -> crate::error::Result<()> {
    move |d, t, kind| {
        runtime::with_call(call, |rt| {
            d.take_deferred_lock(&mut rt.engine, call, t, kind)
        })
    }
}

/// Takes the lock this process deferred (on any window), if any: before another lock call
/// or a `shared_query`, so locks are taken in the order asked for.
pub(super) fn take_deferred(call: &'static str) -> Result<(), CError> {
    lazy::take_deferred(&wait_lock(call)).map_err(CError::from_weft)
}

/// Checks that no epoch is open but a fence's (for MPI_Win_free, and for a fence).
pub(super) fn check_no_epoch(call: &'static str, w: &CWin) -> Result<(), CError> {
    let e = w.epochs.borrow();
    let open = if !e.locks.is_empty() {
        "a lock epoch"
    } else if e.lock_all {
        "a lock_all epoch"
    } else if e.access.is_some() {
        "an access epoch (MPI_Win_start)"
    } else if e.exposure.is_some() {
        "an exposure epoch (MPI_Win_post)"
    } else {
        return Ok(());
    };
    Err(sync_error(
        call,
        format!("{open} is open on this window; close it first"),
    ))
}

/// A window rank argument: checked against the window's size.
fn target(call: &'static str, w: &CWin, rank: c_int) -> Result<usize, CError> {
    w.with(|d| d.check_target(call, rank))
        .map_err(CError::from_weft)
}

/// The window ranks of `group`'s members (each must be one).
fn window_ranks(call: &'static str, w: &CWin, group: *mut c_void) -> Result<Vec<usize>, CError> {
    let g = &crate::c_abi::group::group(call, group)?.group;
    w.with(|d| {
        g.group_data()
            .members()
            .iter()
            .map(|&world| {
                d.comm().group.rank_of(world).ok_or_else(|| {
                    CError::new(
                        MPI_ERR_GROUP,
                        call,
                        format!("the group names world rank {world}, which is not in the window's group"),
                    )
                })
            })
            .collect()
    })
}

pub unsafe extern "C" fn win_fence(assert: c_int, win: *mut c_void) -> c_int {
    const CALL: &str = "MPI_Win_fence";
    guard(CALL, win, || {
        let w = self::win(CALL, win)?;
        check_assert(CALL, assert)?;
        check_no_epoch(CALL, w)?;
        w.with(|d| runtime::with_call(CALL, |rt| d.fence(&mut rt.engine, asserted(assert))))
            .map_err(CError::from_weft)?;
        w.epochs.borrow_mut().fence = assert & MPI_MODE_NOSUCCEED == 0;
        Ok(())
    })
}
export!(Win_fence, win_fence);

fn lock_kind(call: &'static str, lock_type: c_int) -> Result<LockKind, CError> {
    match lock_type {
        MPI_LOCK_SHARED => Ok(LockKind::Shared),
        MPI_LOCK_EXCLUSIVE => Ok(LockKind::Exclusive),
        t => Err(CError::new(
            MPI_ERR_LOCKTYPE,
            call,
            format!("the lock type {t} is neither MPI_LOCK_SHARED nor MPI_LOCK_EXCLUSIVE"),
        )),
    }
}

/// Takes target `t`'s lock of `kind`, progressing the runtime while it is taken (a target
/// reached by messages: lazily, or not at all under `MPI_MODE_NOCHECK` in `assert`).
fn take_lock(
    call: &'static str,
    w: &CWin,
    t: usize,
    kind: LockKind,
    assert: c_int,
) -> Result<(), CError> {
    let how = (kind, asserted(assert).contains(Assert::NO_CHECK));
    w.with(|d| {
        if d.try_lock_here(t as c_int, kind) {
            return Ok(()); // free now: no runtime
        }
        runtime::with_call(call, |rt| d.lock(&mut rt.engine, call, t as c_int, how))
    })
    .map_err(CError::from_weft)
}

/// Releases target `t`'s lock of `kind` (a message to a target reached so).
fn release_lock(call: &'static str, w: &CWin, t: usize, kind: LockKind) -> Result<(), CError> {
    w.with(|d| runtime::with_call(call, |rt| d.unlock(&mut rt.engine, call, t as c_int, kind)))
        .map_err(CError::from_weft)
}

pub unsafe extern "C" fn win_lock(
    lock_type: c_int,
    rank: c_int,
    assert: c_int,
    win: *mut c_void,
) -> c_int {
    const CALL: &str = "MPI_Win_lock";
    if let Some(rc) = super::fast::lock(CALL, lock_type, rank, assert, win) {
        return rc;
    }
    guard(CALL, win, || {
        let w = self::win(CALL, win)?;
        let kind = lock_kind(CALL, lock_type)?;
        check_assert(CALL, assert)?;
        if rank == MPI_PROC_NULL {
            return Ok(());
        }
        let t = target(CALL, w, rank)?;
        {
            let e = w.epochs.borrow();
            if e.lock_all || e.locks.iter().any(|&(x, _)| x == t) {
                return Err(sync_error(
                    CALL,
                    format!("this process already holds a lock on target {t} of this window"),
                ));
            }
        }
        take_deferred(CALL)?;
        let deferred = w.with(|d| {
            let deferred = lazy::may_defer(d, t as c_int);
            if deferred {
                lazy::defer(d, t as c_int, kind);
            }
            deferred
        });
        if !deferred {
            take_lock(CALL, w, t, kind, assert)?;
        }
        let mut e = w.epochs.borrow_mut();
        e.locks.push((t, kind));
        if deferred {
            e.deferred.set(Some(t));
        }
        e.fence = false;
        Ok(())
    })
}
export!(Win_lock, win_lock);

/// At the unlock of target `t`: whether its lock was deferred and never taken (an epoch with
/// no operation), forgotten now.
pub(super) fn unlock_deferred(w: &CWin, t: usize) -> bool {
    let e = w.epochs.borrow();
    if e.deferred.get() != Some(t) {
        return false;
    }
    e.deferred.set(None);
    w.with(|d| lazy::cancel_if(d, t as c_int))
}

pub unsafe extern "C" fn win_unlock(rank: c_int, win: *mut c_void) -> c_int {
    const CALL: &str = "MPI_Win_unlock";
    if let Some(rc) = super::fast::unlock(CALL, rank, win) {
        return rc;
    }
    guard(CALL, win, || {
        let w = self::win(CALL, win)?;
        if rank == MPI_PROC_NULL {
            return Ok(());
        }
        let t = target(CALL, w, rank)?;
        let kind = {
            let mut e = w.epochs.borrow_mut();
            let at = e.locks.iter().position(|&(x, _)| x == t).ok_or_else(|| {
                sync_error(
                    CALL,
                    format!("this process holds no lock on target {t} of this window"),
                )
            })?;
            e.locks.remove(at).1
        };
        if unlock_deferred(w, t) {
            return Ok(()); // never taken: no word to release
        }
        release_lock(CALL, w, t, kind)
    })
}
export!(Win_unlock, win_unlock);

pub unsafe extern "C" fn win_lock_all(assert: c_int, win: *mut c_void) -> c_int {
    const CALL: &str = "MPI_Win_lock_all";
    guard(CALL, win, || {
        let w = self::win(CALL, win)?;
        check_assert(CALL, assert)?;
        {
            let e = w.epochs.borrow();
            if e.lock_all || !e.locks.is_empty() {
                return Err(sync_error(
                    CALL,
                    "this process holds locks on this window already",
                ));
            }
        }
        // Locks are taken in the order asked for: a deferred one (on another window) first.
        take_deferred(CALL)?;
        let nocheck = asserted(assert).contains(Assert::NO_CHECK);
        w.with(|d| runtime::with_call(CALL, |rt| d.lock_all(&mut rt.engine, CALL, nocheck)))
            .map_err(CError::from_weft)?;
        let mut e = w.epochs.borrow_mut();
        e.lock_all = true;
        e.fence = false;
        Ok(())
    })
}
export!(Win_lock_all, win_lock_all);

pub unsafe extern "C" fn win_unlock_all(win: *mut c_void) -> c_int {
    const CALL: &str = "MPI_Win_unlock_all";
    guard(CALL, win, || {
        let w = self::win(CALL, win)?;
        if !std::mem::take(&mut w.epochs.borrow_mut().lock_all) {
            return Err(sync_error(CALL, "no lock_all epoch is open on this window"));
        }
        w.with(|d| runtime::with_call(CALL, |rt| d.unlock_all(&mut rt.engine, CALL)))
            .map_err(CError::from_weft)
    })
}
export!(Win_unlock_all, win_unlock_all);

/// The flushes and `MPI_Win_sync`: operations complete as they are made, so each is a memory
/// barrier; a flush to one target checks that a passive-target epoch covers it.
/// `sync`: `MPI_Win_sync`, which orders the program's own loads and stores too, so its
/// barrier is never skipped (a flush's is after nothing but the CPU's atomics).
fn flush(call: &'static str, win: *mut c_void, rank: Option<c_int>, sync: bool) -> c_int {
    if let Some(rc) = (!sync)
        .then(|| super::fast::flush(call, win, rank))
        .flatten()
    {
        return rc;
    }
    guard(call, win, || {
        let w = self::win(call, win)?;
        if let Some(r) = rank.filter(|&r| r != MPI_PROC_NULL) {
            let t = target(call, w, r)?;
            let e = w.epochs.borrow();
            if !e.lock_all && !e.locks.iter().any(|&(x, _)| x == t) {
                return Err(sync_error(
                    call,
                    format!("no passive-target epoch this process has open covers target {t}"),
                ));
            }
        }
        w.with(|d| match (d.by_messages(), sync) {
            (true, false) => {
                runtime::with_call(call, |rt| match rank.filter(|&r| r != MPI_PROC_NULL) {
                    Some(r) => d.flush_target(&mut rt.engine, call, r),
                    None => d.flush(&mut rt.engine, call),
                })
            }
            (true, true) => runtime::with_call(call, |rt| d.sync(&mut rt.engine, call)),
            // Every member reached directly: the barrier alone, no runtime to enter.
            (false, false) => {
                d.flush_memory();
                Ok(())
            }
            (false, true) => {
                d.sync_memory();
                Ok(())
            }
        })
        .map_err(CError::from_weft)
    })
}

pub extern "C" fn win_flush(rank: c_int, win: *mut c_void) -> c_int {
    flush("MPI_Win_flush", win, Some(rank), false)
}
export!(Win_flush, win_flush);

pub extern "C" fn win_flush_local(rank: c_int, win: *mut c_void) -> c_int {
    flush("MPI_Win_flush_local", win, Some(rank), false)
}
export!(Win_flush_local, win_flush_local);

pub extern "C" fn win_flush_all(win: *mut c_void) -> c_int {
    flush("MPI_Win_flush_all", win, None, false)
}
export!(Win_flush_all, win_flush_all);

pub extern "C" fn win_flush_local_all(win: *mut c_void) -> c_int {
    flush("MPI_Win_flush_local_all", win, None, false)
}
export!(Win_flush_local_all, win_flush_local_all);

pub extern "C" fn win_sync(win: *mut c_void) -> c_int {
    flush("MPI_Win_sync", win, None, true)
}
export!(Win_sync, win_sync);

pub unsafe extern "C" fn win_post(group: *mut c_void, assert: c_int, win: *mut c_void) -> c_int {
    const CALL: &str = "MPI_Win_post";
    guard(CALL, win, || {
        let w = self::win(CALL, win)?;
        check_assert(CALL, assert)?;
        if w.epochs.borrow().exposure.is_some() {
            return Err(sync_error(
                CALL,
                "an exposure epoch is open on this window already",
            ));
        }
        let origins = window_ranks(CALL, w, group)?;
        let exposure = w
            .with(|d| runtime::with_call(CALL, |rt| d.post(&mut rt.engine, &origins)))
            .map_err(CError::from_weft)?;
        let mut e = w.epochs.borrow_mut();
        e.exposure = Some(exposure);
        e.fence = false;
        Ok(())
    })
}
export!(Win_post, win_post);

pub unsafe extern "C" fn win_start(group: *mut c_void, assert: c_int, win: *mut c_void) -> c_int {
    const CALL: &str = "MPI_Win_start";
    guard(CALL, win, || {
        let w = self::win(CALL, win)?;
        check_assert(CALL, assert)?;
        if w.epochs.borrow().access.is_some() {
            return Err(sync_error(
                CALL,
                "an access epoch is open on this window already",
            ));
        }
        let targets = window_ranks(CALL, w, group)?;
        w.with(|d| runtime::with_call(CALL, |rt| d.start(&mut rt.engine, &targets)))
            .map_err(CError::from_weft)?;
        let mut e = w.epochs.borrow_mut();
        e.access = Some(targets);
        e.fence = false;
        Ok(())
    })
}
export!(Win_start, win_start);

pub unsafe extern "C" fn win_complete(win: *mut c_void) -> c_int {
    const CALL: &str = "MPI_Win_complete";
    guard(CALL, win, || {
        let w = self::win(CALL, win)?;
        let targets = w.epochs.borrow_mut().access.take().ok_or_else(|| {
            sync_error(
                CALL,
                "no access epoch (MPI_Win_start) is open on this window",
            )
        })?;
        w.with(|d| runtime::with_call(CALL, |rt| d.complete(&mut rt.engine, &targets)))
            .map_err(CError::from_weft)
    })
}
export!(Win_complete, win_complete);

pub unsafe extern "C" fn win_wait(win: *mut c_void) -> c_int {
    const CALL: &str = "MPI_Win_wait";
    guard(CALL, win, || {
        let w = self::win(CALL, win)?;
        let exposure = w.epochs.borrow_mut().exposure.take().ok_or_else(|| {
            sync_error(
                CALL,
                "no exposure epoch (MPI_Win_post) is open on this window",
            )
        })?;
        w.with(|d| runtime::with_call(CALL, |rt| d.wait(&mut rt.engine, exposure)))
            .map_err(CError::from_weft)
    })
}
export!(Win_wait, win_wait);

pub unsafe extern "C" fn win_test(win: *mut c_void, flag: *mut c_int) -> c_int {
    const CALL: &str = "MPI_Win_test";
    guard(CALL, win, || {
        let w = self::win(CALL, win)?;
        if flag.is_null() {
            return Err(CError::new(MPI_ERR_ARG, CALL, "flag is a null pointer"));
        }
        let mut exposure = w.epochs.borrow_mut().exposure.take().ok_or_else(|| {
            sync_error(
                CALL,
                "no exposure epoch (MPI_Win_post) is open on this window",
            )
        })?;
        let done = w
            .with(|d| runtime::with_call(CALL, |rt| d.test(&mut rt.engine, &mut exposure)))
            .map_err(CError::from_weft)?;
        if !done {
            w.epochs.borrow_mut().exposure = Some(exposure);
        }
        // SAFETY: checked non-null.
        unsafe { *flag = done.into() };
        Ok(())
    })
}
export!(Win_test, win_test);
