//! A window's attributes and error handler: the predefined attributes (`MPI_WIN_BASE`,
//! `MPI_WIN_SIZE`, `MPI_WIN_DISP_UNIT`, `MPI_WIN_CREATE_FLAVOR`, `MPI_WIN_MODEL`), keyed ones
//! (keys share the communicators' numbering and callbacks' shape; windows are never copied,
//! so their copy callbacks never run), and `MPI_Win_*_errhandler`.

use super::{win, CWin};
use crate::c_abi::abi::*;
use crate::c_abi::comm::{create_keyval, delete_keyed, delete_one, free_keyval, keyval, set_keyed};
use crate::c_abi::env::put_int;
use crate::c_abi::errhandler::{self, CommErrhandlerFn};
use crate::c_abi::errors::{guard, CError};
use crate::c_abi::handles;
use std::ffi::{c_int, c_void};

/// The error handler of window `handle`, if it is a live window.
pub(crate) fn errhandler_of(handle: *mut c_void) -> Option<usize> {
    handles::user_object::<CWin>(handle as usize).map(|w| w.errhandler.get())
}

/// Deletes every attribute of `w` (its handle `handle`), newest first.
pub(super) fn delete_all(call: &'static str, w: &CWin, handle: *mut c_void) -> Result<(), CError> {
    loop {
        let Some((key, value)) = w.attrs.borrow_mut().pop() else {
            return Ok(());
        };
        delete_one(call, handle, key, value)?;
    }
}

/// The value of a predefined window attribute, or `None` if `key` is not one.
fn predefined(w: &CWin, key: c_int) -> Option<*mut c_void> {
    Some(match key {
        MPI_WIN_BASE => w.base,
        MPI_WIN_SIZE => std::ptr::from_ref(&w.size).cast_mut().cast(),
        MPI_WIN_DISP_UNIT => std::ptr::from_ref(&w.disp_unit).cast_mut().cast(),
        MPI_WIN_CREATE_FLAVOR => std::ptr::from_ref(&w.flavor).cast_mut().cast(),
        MPI_WIN_MODEL => std::ptr::from_ref(&w.model).cast_mut().cast(),
        _ => return None,
    })
}

pub unsafe extern "C" fn win_create_keyval(
    copy: usize,
    delete: usize,
    key: *mut c_int,
    extra: *mut c_void,
) -> c_int {
    // SAFETY: passed on.
    unsafe { create_keyval("MPI_Win_create_keyval", copy, delete, key, extra) }
}
export!(Win_create_keyval, win_create_keyval);

pub unsafe extern "C" fn win_free_keyval(key: *mut c_int) -> c_int {
    // SAFETY: passed on.
    unsafe { free_keyval("MPI_Win_free_keyval", key) }
}
export!(Win_free_keyval, win_free_keyval);

pub unsafe extern "C" fn win_get_attr(
    win: *mut c_void,
    key: c_int,
    value: *mut c_void,
    flag: *mut c_int,
) -> c_int {
    const CALL: &str = "MPI_Win_get_attr";
    guard(CALL, win, || {
        let w = self::win(CALL, win)?;
        if value.is_null() {
            return Err(CError::new(
                MPI_ERR_ARG,
                CALL,
                "attribute_val is a null pointer",
            ));
        }
        let found = match predefined(w, key) {
            Some(v) => Some(v),
            None => {
                keyval(CALL, key)?;
                w.attrs
                    .borrow()
                    .iter()
                    .find(|(k, _)| *k == key)
                    .map(|(_, v)| *v)
            }
        };
        put_int(CALL, "flag", flag, found.is_some().into())?;
        if let Some(v) = found {
            // SAFETY: the standard's contract: `attribute_val` is the address of a pointer.
            unsafe { *value.cast::<*mut c_void>() = v };
        }
        Ok(())
    })
}
export!(Win_get_attr, win_get_attr);

pub extern "C" fn win_set_attr(win: *mut c_void, key: c_int, value: *mut c_void) -> c_int {
    const CALL: &str = "MPI_Win_set_attr";
    guard(CALL, win, || {
        let w = self::win(CALL, win)?;
        if predefined(w, key).is_some() {
            return Err(CError::new(
                MPI_ERR_KEYVAL,
                CALL,
                format!("{key} is a predefined attribute: it cannot be set"),
            ));
        }
        set_keyed(CALL, &w.attrs, win, key, value)
    })
}
export!(Win_set_attr, win_set_attr);

pub extern "C" fn win_delete_attr(win: *mut c_void, key: c_int) -> c_int {
    const CALL: &str = "MPI_Win_delete_attr";
    guard(CALL, win, || {
        let w = self::win(CALL, win)?;
        delete_keyed(CALL, &w.attrs, win, key, "window")
    })
}
export!(Win_delete_attr, win_delete_attr);

pub unsafe extern "C" fn win_create_errhandler(
    function: Option<CommErrhandlerFn>,
    out: *mut *mut c_void,
) -> c_int {
    // SAFETY: passed on: a window's handler function has the communicator one's shape.
    unsafe { errhandler::create("MPI_Win_create_errhandler", function, out) }
}
export!(Win_create_errhandler, win_create_errhandler);

pub unsafe extern "C" fn win_set_errhandler(win: *mut c_void, handler: *mut c_void) -> c_int {
    const CALL: &str = "MPI_Win_set_errhandler";
    guard(CALL, win, || {
        let w = self::win(CALL, win)?;
        let new = errhandler::checked(CALL, handler)?;
        errhandler::retain(new);
        errhandler::release(w.errhandler.replace(new));
        Ok(())
    })
}
export!(Win_set_errhandler, win_set_errhandler);

pub unsafe extern "C" fn win_get_errhandler(win: *mut c_void, out: *mut *mut c_void) -> c_int {
    const CALL: &str = "MPI_Win_get_errhandler";
    guard(CALL, win, || {
        let w = self::win(CALL, win)?;
        if out.is_null() {
            return Err(CError::new(
                MPI_ERR_ARG,
                CALL,
                "errhandler is a null pointer",
            ));
        }
        // A new reference: the program frees it.
        let h = w.errhandler.get();
        errhandler::retain(h);
        // SAFETY: checked non-null; the caller's handle slot.
        unsafe { *out = h as *mut c_void };
        Ok(())
    })
}
export!(Win_get_errhandler, win_get_errhandler);

pub unsafe extern "C" fn win_call_errhandler(win: *mut c_void, errorcode: c_int) -> c_int {
    const CALL: &str = "MPI_Win_call_errhandler";
    let Some(handler) = errhandler_of(win) else {
        return guard(CALL, win, || self::win(CALL, win).map(drop));
    };
    match handler {
        MPI_ERRORS_RETURN => MPI_SUCCESS,
        MPI_ERRORS_ARE_FATAL | MPI_ERRORS_ABORT => crate::c_abi::errors::fatal(
            &format!("{CALL}: error code {errorcode} raised on the window"),
            errorcode,
        ),
        h => {
            errhandler::call_user(h, win, errorcode);
            MPI_SUCCESS
        }
    }
}
export!(Win_call_errhandler, win_call_errhandler);
