//! One-sided windows in the C ABI (issue 12, item 10): `MPI_Win_*` and the operations over
//! `rma::window`. A window's handle is a pointer to a boxed [`CWin`]: the window, what its
//! attributes point to, its error handler, name, attributes, and the epochs this process has
//! open on it (the C API cannot make them guards, so each call checks them and an operation
//! outside an epoch is an `MPI_ERR_RMA_SYNC` error naming the call and the target).
//!
//! - this module: creation in the four flavours, free, attach/detach, group, shared query,
//!   name, info;
//! - `sync`: fence, lock/unlock, lock_all, flush, sync, post-start-complete-wait;
//! - `ops`: put, get, accumulate, get_accumulate, fetch_and_op, compare_and_swap and their
//!   request-based forms, with derived datatypes on both sides;
//! - `fast`: the small operations, the flushes, lock and unlock on windows reached directly,
//!   with the handles decoded once and nothing built (the others fall through to `ops` and
//!   `sync`);
//! - `attrs`: attributes (the predefined `MPI_WIN_BASE` ... `MPI_WIN_MODEL` and keyed ones) and
//!   error handlers.

pub(crate) mod attrs;
mod fast;
pub(crate) mod ops;
pub(crate) mod sync;

use crate::c_abi::abi::*;
use crate::c_abi::errors::{guard, CError};
use crate::c_abi::handles::{self, Marked};
use crate::c_abi::state::Comm;
use crate::rma::window::{Exposure, Flavor, WindowData};
use crate::runtime;
use crate::topology::{AsCommunicator, UserGroup};
use crate::traits::*;
use std::cell::{Cell, RefCell};
use std::ffi::{c_char, c_int, c_void};
use std::rc::Rc;

pub(crate) use attrs::errhandler_of;

/// A window as C holds it. `repr(C)` with its mark first: the error path asks of any handle
/// whether it is a window, and so reads only the first word of another object.
#[repr(C)]
pub(crate) struct CWin {
    /// [`WIN_MAGIC`] while the handle is live.
    magic: Cell<u64>,
    data: RefCell<Option<Rc<WindowData>>>,
    /// The group of the communicator it was made over.
    group: UserGroup,
    /// This member's part as the program sees it (the attributes point at these).
    base: *mut c_void,
    size: isize,
    disp_unit: c_int,
    flavor: c_int,
    model: c_int,
    pub(crate) errhandler: Cell<usize>,
    pub(crate) attrs: RefCell<Vec<(i32, *mut c_void)>>,
    name: RefCell<String>,
    /// The info hints the program gave (MPI_Win_get_info returns them with Weft's values).
    hints: RefCell<Vec<(String, String)>>,
    epochs: RefCell<Epochs>,
}

/// The epochs this process has open on a window.
#[derive(Default)]
struct Epochs {
    /// A fence was called without `MPI_MODE_NOSUCCEED`: operations may follow.
    fence: bool,
    /// Targets locked (window ranks), with the lock's kind.
    locks: Vec<(usize, crate::rma::lock::LockKind)>,
    /// The target of those whose lock was deferred (`rma::lazy`) and whose epoch has made no
    /// operation yet: its word is taken by the first, or by this process's next lock call.
    deferred: Cell<Option<usize>>,
    lock_all: bool,
    /// The targets of an access epoch (`MPI_Win_start`).
    access: Option<Vec<usize>>,
    /// An exposure epoch (`MPI_Win_post`).
    exposure: Option<Exposure>,
}

const WIN_MAGIC: u64 = 0x5745_4654_5749_4e44; // "WEFTWIND"

impl Marked for CWin {
    const MARK: u64 = WIN_MAGIC;
    fn mark(&self) -> u64 {
        self.magic.get()
    }
}

impl Drop for CWin {
    fn drop(&mut self) {
        crate::c_abi::errhandler::release(self.errhandler.get());
    }
}

impl CWin {
    /// The window's data (freed windows are never reached: their handles are dead).
    fn with<R>(&self, f: impl FnOnce(&WindowData) -> R) -> R {
        f(self
            .data
            .borrow()
            .as_ref()
            .expect("a live window has its data"))
    }
}

/// The window of `handle`.
pub(crate) fn win(call: &'static str, handle: *mut c_void) -> Result<&'static CWin, CError> {
    let value = handle as usize;
    handles::user_object::<CWin>(value).ok_or_else(|| {
        let what = if value == MPI_WIN_NULL {
            "MPI_WIN_NULL".to_string()
        } else {
            format!("{value:#x}")
        };
        CError::new(
            MPI_ERR_WIN,
            call,
            format!("{what} is not a window (freed, or never made)"),
        )
    })
}

fn flavor_value(f: Flavor) -> c_int {
    match f {
        Flavor::Create => MPI_WIN_FLAVOR_CREATE,
        Flavor::Allocate => MPI_WIN_FLAVOR_ALLOCATE,
        Flavor::Shared => MPI_WIN_FLAVOR_SHARED,
        Flavor::Dynamic => MPI_WIN_FLAVOR_DYNAMIC,
    }
}

/// The info entries the program passed (none for `MPI_INFO_NULL`).
fn hints(call: &'static str, info: *mut c_void) -> Result<Vec<(String, String)>, CError> {
    if info as usize == MPI_INFO_NULL {
        return Ok(Vec::new());
    }
    Ok(crate::c_abi::info::info(call, info)?
        .entries
        .borrow()
        .clone())
}

/// Makes a window of `flavor` over `comm` and hands it out at `out`.
#[allow(clippy::too_many_arguments)]
fn make(
    call: &'static str,
    flavor: Flavor,
    base: *mut c_void,
    size: i64,
    disp_unit: i64,
    info: *mut c_void,
    c: &Comm,
    out: *mut *mut c_void,
) -> Result<&'static CWin, CError> {
    if out.is_null() {
        return Err(CError::new(MPI_ERR_ARG, call, "win is a null pointer"));
    }
    let size = usize::try_from(size)
        .map_err(|_| CError::new(MPI_ERR_SIZE, call, format!("the size {size} is negative")))?;
    let unit = match c_int::try_from(disp_unit) {
        Ok(u) if u > 0 => u,
        _ => {
            return Err(CError::new(
                MPI_ERR_DISP,
                call,
                format!("the displacement unit {disp_unit} is not positive"),
            ))
        }
    };
    if c.comm.as_inter().is_some() {
        return Err(CError::new(
            MPI_ERR_COMM,
            call,
            "windows are made over intracommunicators, and this is an intercommunicator",
        ));
    }
    let hints = hints(call, info)?;
    let cd = c.comm.comm_data();
    let data = runtime::with_call(call, |rt| {
        WindowData::new(
            &mut rt.engine,
            &mut rt.contexts,
            cd,
            &rt.boot.node_of,
            flavor,
            (base.cast(), size),
            unit as usize,
            (&rt.tunables, call),
        )
    })
    .map_err(CError::from_weft)?;
    let rank = data.rank() as c_int;
    let (base, size) = match flavor {
        Flavor::Create => (base, size),
        Flavor::Dynamic => (std::ptr::null_mut(), 0),
        Flavor::Allocate | Flavor::Shared => (
            data.part(call, rank)
                .map_err(CError::from_weft)?
                .base
                .cast(),
            size,
        ),
    };
    crate::c_abi::errhandler::retain(c.errhandler.get());
    let w = Box::new(CWin {
        magic: Cell::new(WIN_MAGIC),
        data: RefCell::new(Some(data)),
        group: c.comm.group(),
        base,
        size: size as isize,
        disp_unit: unit,
        flavor: flavor_value(flavor),
        model: MPI_WIN_UNIFIED,
        errhandler: Cell::new(c.errhandler.get()),
        attrs: Default::default(),
        name: RefCell::new(String::new()),
        hints: RefCell::new(hints),
        epochs: Default::default(),
    });
    let w: &'static CWin = Box::leak(w);
    // SAFETY: checked non-null; a handle slot.
    unsafe { *out = std::ptr::from_ref(w).cast_mut().cast() };
    Ok(w)
}

/// Writes the base address of this member's part to `baseptr` (a `void **`).
fn put_base(call: &'static str, baseptr: *mut c_void, w: &CWin) -> Result<(), CError> {
    if baseptr.is_null() {
        return Err(CError::new(MPI_ERR_ARG, call, "baseptr is a null pointer"));
    }
    // SAFETY: the standard's contract: `baseptr` is the address of a pointer.
    unsafe { *baseptr.cast::<*mut c_void>() = w.base };
    Ok(())
}

/// `MPI_Win_create` and its large-count form.
unsafe fn create(
    call: &'static str,
    base: *mut c_void,
    size: i64,
    disp_unit: i64,
    info: *mut c_void,
    comm: *mut c_void,
    out: *mut *mut c_void,
) -> c_int {
    guard(call, comm, || {
        let c = handles::comm(call, comm)?;
        if size > 0 && base.is_null() {
            return Err(CError::new(
                MPI_ERR_BASE,
                call,
                format!("base is a null pointer for a part of {size} bytes"),
            ));
        }
        make(call, Flavor::Create, base, size, disp_unit, info, c, out).map(drop)
    })
}

pub unsafe extern "C" fn win_create(
    base: *mut c_void,
    size: isize,
    disp_unit: c_int,
    info: *mut c_void,
    comm: *mut c_void,
    out: *mut *mut c_void,
) -> c_int {
    // SAFETY: passed on.
    unsafe {
        create(
            "MPI_Win_create",
            base,
            size as i64,
            disp_unit.into(),
            info,
            comm,
            out,
        )
    }
}
export!(Win_create, win_create);

pub unsafe extern "C" fn win_create_c(
    base: *mut c_void,
    size: isize,
    disp_unit: isize,
    info: *mut c_void,
    comm: *mut c_void,
    out: *mut *mut c_void,
) -> c_int {
    // SAFETY: passed on.
    unsafe {
        create(
            "MPI_Win_create_c",
            base,
            size as i64,
            disp_unit as i64,
            info,
            comm,
            out,
        )
    }
}
export!(Win_create_c, win_create_c);

/// `MPI_Win_allocate`, `MPI_Win_allocate_shared` and their large-count forms.
#[allow(clippy::too_many_arguments)]
unsafe fn allocate(
    call: &'static str,
    flavor: Flavor,
    size: i64,
    disp_unit: i64,
    info: *mut c_void,
    comm: *mut c_void,
    baseptr: *mut c_void,
    out: *mut *mut c_void,
) -> c_int {
    guard(call, comm, || {
        let c = handles::comm(call, comm)?;
        if baseptr.is_null() {
            return Err(CError::new(MPI_ERR_ARG, call, "baseptr is a null pointer"));
        }
        let w = make(
            call,
            flavor,
            std::ptr::null_mut(),
            size,
            disp_unit,
            info,
            c,
            out,
        )?;
        put_base(call, baseptr, w)
    })
}

pub unsafe extern "C" fn win_allocate(
    size: isize,
    disp_unit: c_int,
    info: *mut c_void,
    comm: *mut c_void,
    baseptr: *mut c_void,
    out: *mut *mut c_void,
) -> c_int {
    // SAFETY: passed on.
    unsafe {
        allocate(
            "MPI_Win_allocate",
            Flavor::Allocate,
            size as i64,
            disp_unit.into(),
            info,
            comm,
            baseptr,
            out,
        )
    }
}
export!(Win_allocate, win_allocate);

pub unsafe extern "C" fn win_allocate_c(
    size: isize,
    disp_unit: isize,
    info: *mut c_void,
    comm: *mut c_void,
    baseptr: *mut c_void,
    out: *mut *mut c_void,
) -> c_int {
    // SAFETY: passed on.
    unsafe {
        allocate(
            "MPI_Win_allocate_c",
            Flavor::Allocate,
            size as i64,
            disp_unit as i64,
            info,
            comm,
            baseptr,
            out,
        )
    }
}
export!(Win_allocate_c, win_allocate_c);

pub unsafe extern "C" fn win_allocate_shared(
    size: isize,
    disp_unit: c_int,
    info: *mut c_void,
    comm: *mut c_void,
    baseptr: *mut c_void,
    out: *mut *mut c_void,
) -> c_int {
    // SAFETY: passed on.
    unsafe {
        allocate(
            "MPI_Win_allocate_shared",
            Flavor::Shared,
            size as i64,
            disp_unit.into(),
            info,
            comm,
            baseptr,
            out,
        )
    }
}
export!(Win_allocate_shared, win_allocate_shared);

pub unsafe extern "C" fn win_allocate_shared_c(
    size: isize,
    disp_unit: isize,
    info: *mut c_void,
    comm: *mut c_void,
    baseptr: *mut c_void,
    out: *mut *mut c_void,
) -> c_int {
    // SAFETY: passed on.
    unsafe {
        allocate(
            "MPI_Win_allocate_shared_c",
            Flavor::Shared,
            size as i64,
            disp_unit as i64,
            info,
            comm,
            baseptr,
            out,
        )
    }
}
export!(Win_allocate_shared_c, win_allocate_shared_c);

pub unsafe extern "C" fn win_create_dynamic(
    info: *mut c_void,
    comm: *mut c_void,
    out: *mut *mut c_void,
) -> c_int {
    const CALL: &str = "MPI_Win_create_dynamic";
    guard(CALL, comm, || {
        let c = handles::comm(CALL, comm)?;
        make(
            CALL,
            Flavor::Dynamic,
            std::ptr::null_mut(),
            0,
            1,
            info,
            c,
            out,
        )
        .map(drop)
    })
}
export!(Win_create_dynamic, win_create_dynamic);

pub unsafe extern "C" fn win_attach(win: *mut c_void, base: *mut c_void, size: isize) -> c_int {
    const CALL: &str = "MPI_Win_attach";
    guard(CALL, win, || {
        let w = self::win(CALL, win)?;
        if size < 0 {
            return Err(CError::new(
                MPI_ERR_SIZE,
                CALL,
                format!("the size {size} is negative"),
            ));
        }
        if size > 0 && base.is_null() {
            return Err(CError::new(MPI_ERR_ARG, CALL, "base is a null pointer"));
        }
        w.with(|d| d.attach(CALL, base.cast(), size as usize))
            .map_err(|e| rma_attach(CError::from_weft(e)))
    })
}
export!(Win_attach, win_attach);

/// Attach and detach errors are `MPI_ERR_RMA_ATTACH` (or `MPI_ERR_RMA_FLAVOR` on a window
/// of another flavour).
fn rma_attach(e: CError) -> CError {
    let class = if e.detail.contains("flavour") {
        MPI_ERR_RMA_FLAVOR
    } else {
        MPI_ERR_RMA_ATTACH
    };
    CError::new(class, e.call, e.detail.clone())
}

pub unsafe extern "C" fn win_detach(win: *mut c_void, base: *const c_void) -> c_int {
    const CALL: &str = "MPI_Win_detach";
    guard(CALL, win, || {
        let w = self::win(CALL, win)?;
        w.with(|d| d.detach(CALL, base.cast()))
            .map_err(|e| rma_attach(CError::from_weft(e)))
    })
}
export!(Win_detach, win_detach);

pub unsafe extern "C" fn win_free(win: *mut *mut c_void) -> c_int {
    const CALL: &str = "MPI_Win_free";
    let handle = if win.is_null() {
        std::ptr::null_mut()
    } else {
        // SAFETY: checked non-null; the standard's contract: a handle slot.
        unsafe { *win }
    };
    guard(CALL, handle, || {
        let w = self::win(CALL, handle)?;
        sync::check_no_epoch(CALL, w)?;
        attrs::delete_all(CALL, w, handle)?;
        let data = w
            .data
            .borrow_mut()
            .take()
            .expect("a live window has its data");
        w.magic.set(0);
        runtime::with_call(CALL, |rt| {
            WindowData::free(data, &mut rt.engine, &mut rt.contexts)
        })
        .map_err(CError::from_weft)?;
        // SAFETY: made by `make` with `Box::leak`; its mark is cleared, so no call reaches it
        // through a stale handle any more.
        drop(unsafe { Box::from_raw(std::ptr::from_ref(w).cast_mut()) });
        // SAFETY: checked non-null above (a null slot is not a window, so the call failed).
        unsafe { *win = MPI_WIN_NULL as *mut c_void };
        Ok(())
    })
}
export!(Win_free, win_free);

pub unsafe extern "C" fn win_get_group(win: *mut c_void, group: *mut *mut c_void) -> c_int {
    const CALL: &str = "MPI_Win_get_group";
    guard(CALL, win, || {
        let w = self::win(CALL, win)?;
        crate::c_abi::group::hand_out(CALL, group, w.group.clone())
    })
}
export!(Win_get_group, win_get_group);

/// `MPI_Win_shared_query` and its large-count form: where `rank`'s part is in this process
/// (`MPI_PROC_NULL`: the first part that is not empty). Windows over node-shared memory
/// answer for every member; `create` and dynamic windows only for this one.
unsafe fn shared_query(
    call: &'static str,
    win: *mut c_void,
    rank: c_int,
    size: *mut isize,
    disp_unit: *mut c_void,
    large: bool,
    baseptr: *mut c_void,
) -> c_int {
    guard(call, win, || {
        let w = self::win(call, win)?;
        if size.is_null() || disp_unit.is_null() || baseptr.is_null() {
            return Err(CError::new(MPI_ERR_ARG, call, "a null output pointer"));
        }
        let part = w.with(|d| {
            let n = d.size() as c_int;
            let shared = matches!(d.flavor(), Flavor::Allocate | Flavor::Shared);
            let rank = match rank {
                MPI_PROC_NULL => (0..n)
                    .find(|&r| d.part(call, r).is_ok_and(|p| p.size > 0))
                    .unwrap_or(0),
                r => r,
            };
            let mut p = d.part(call, rank).map_err(CError::from_weft)?;
            // A part in another process (a window over the program's memory) has no address
            // here: size 0 and a null base, as MPI 4.1 answers for memory not shared.
            if !shared && rank != d.rank() as c_int || d.flavor() == Flavor::Dynamic {
                p.size = 0;
            }
            Ok::<_, CError>(p)
        })?;
        let (base, bytes) = match part.size {
            0 => (std::ptr::null_mut(), 0),
            n => (part.base, n),
        };
        // Loads and stores through the pointer are protected by lock epochs: none deferred
        // from now on, and one deferred now is taken.
        w.with(|d| d.note_raw_access());
        sync::take_deferred(call)?;
        // SAFETY: checked non-null; the standard's contract: an MPI_Aint, an int (or an
        // MPI_Aint in the large form) and a pointer's address.
        unsafe {
            *size = bytes as isize;
            if large {
                *disp_unit.cast::<isize>() = part.disp_unit as isize;
            } else {
                *disp_unit.cast::<c_int>() = part.disp_unit as c_int;
            }
            *baseptr.cast::<*mut u8>() = base;
        }
        Ok(())
    })
}

pub unsafe extern "C" fn win_shared_query(
    win: *mut c_void,
    rank: c_int,
    size: *mut isize,
    disp_unit: *mut c_int,
    baseptr: *mut c_void,
) -> c_int {
    // SAFETY: passed on.
    unsafe {
        shared_query(
            "MPI_Win_shared_query",
            win,
            rank,
            size,
            disp_unit.cast(),
            false,
            baseptr,
        )
    }
}
export!(Win_shared_query, win_shared_query);

pub unsafe extern "C" fn win_shared_query_c(
    win: *mut c_void,
    rank: c_int,
    size: *mut isize,
    disp_unit: *mut isize,
    baseptr: *mut c_void,
) -> c_int {
    // SAFETY: passed on.
    unsafe {
        shared_query(
            "MPI_Win_shared_query_c",
            win,
            rank,
            size,
            disp_unit.cast(),
            true,
            baseptr,
        )
    }
}
export!(Win_shared_query_c, win_shared_query_c);

pub unsafe extern "C" fn win_set_name(win: *mut c_void, name: *const c_char) -> c_int {
    const CALL: &str = "MPI_Win_set_name";
    guard(CALL, win, || {
        let w = self::win(CALL, win)?;
        if name.is_null() {
            return Err(CError::new(MPI_ERR_ARG, CALL, "win_name is a null pointer"));
        }
        // SAFETY: the standard's contract: a NUL-terminated string.
        let text = unsafe { std::ffi::CStr::from_ptr(name) }.to_string_lossy();
        let max = MPI_MAX_OBJECT_NAME as usize - 1;
        *w.name.borrow_mut() = text.chars().take(max).collect();
        Ok(())
    })
}
export!(Win_set_name, win_set_name);

pub unsafe extern "C" fn win_get_name(
    win: *mut c_void,
    name: *mut c_char,
    resultlen: *mut c_int,
) -> c_int {
    const CALL: &str = "MPI_Win_get_name";
    guard(CALL, win, || {
        if name.is_null() || resultlen.is_null() {
            return Err(CError::new(MPI_ERR_ARG, CALL, "a null output pointer"));
        }
        // MPI_WIN_NULL has its name too (as MPICH and Open MPI answer).
        let text = match win as usize {
            MPI_WIN_NULL => "MPI_WIN_NULL".to_string(),
            _ => self::win(CALL, win)?.name.borrow().clone(),
        };
        // SAFETY: the standard's contract: MPI_MAX_OBJECT_NAME bytes at `name`.
        unsafe {
            crate::c_abi::errors::write_string(&text, name, MPI_MAX_OBJECT_NAME as usize, resultlen)
        };
        Ok(())
    })
}
export!(Win_get_name, win_get_name);

pub unsafe extern "C" fn win_set_info(win: *mut c_void, info: *mut c_void) -> c_int {
    const CALL: &str = "MPI_Win_set_info";
    guard(CALL, win, || {
        let w = self::win(CALL, win)?;
        let new = hints(CALL, info)?;
        let mut kept = w.hints.borrow_mut();
        for (k, v) in new {
            kept.retain(|(old, _)| *old != k);
            kept.push((k, v));
        }
        Ok(())
    })
}
export!(Win_set_info, win_set_info);

pub unsafe extern "C" fn win_get_info(win: *mut c_void, out: *mut *mut c_void) -> c_int {
    const CALL: &str = "MPI_Win_get_info";
    guard(CALL, win, || {
        let w = self::win(CALL, win)?;
        // Weft's values for the standard's keys, then the program's for the others.
        let mut entries: Vec<(String, String)> = crate::rma::window::INFO
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        for (k, v) in w.hints.borrow().iter() {
            match entries.iter_mut().find(|(old, _)| old == k) {
                // The program's hints that do not change what Weft does are reported as given.
                Some(e) if k != "alloc_shared_noncontig" => e.1 = v.clone(),
                Some(_) => {}
                None => entries.push((k.clone(), v.clone())),
            }
        }
        crate::c_abi::info::hand_out(CALL, out, crate::c_abi::info::CInfo::new(entries))
    })
}
export!(Win_get_info, win_get_info);
