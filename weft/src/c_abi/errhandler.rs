//! Error handlers the program makes (MPI_Comm_create_errhandler: a C function called with
//! the communicator and the error code), attaching and querying them, calling them
//! (MPI_Comm_call_errhandler), and the error classes, codes and strings the program adds
//! (MPI_Add_error_class and the others, MPI 4.1 §9.5).
//!
//! A user error handler is boxed behind its handle and counted: by its handle until
//! MPI_Errhandler_free, and by each communicator it is attached to (`state::Comm` retains it
//! when made and releases it when dropped), so it lives while anything uses it.

use crate::c_abi::abi::*;
use crate::c_abi::env::put_int;
use crate::c_abi::errors::{guard, CError};
use crate::c_abi::handles::{self, Marked};
use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::{c_char, c_int, c_void};
use std::sync::Mutex;

/// MPI_Comm_errhandler_function: `(comm*, errorcode*, ...)`.
pub(crate) type CommErrhandlerFn = unsafe extern "C" fn(*mut *mut c_void, *mut c_int, ...);

/// An error handler the program made.
pub(crate) struct CErrhandler {
    magic: Cell<u64>,
    function: CommErrhandlerFn,
    /// The handle's reference (until MPI_Errhandler_free) and one per attachment.
    refs: Cell<usize>,
}

const ERRHANDLER_MAGIC: u64 = 0x5745_4654_4548_4e44; // "WEFTEHND"

impl Marked for CErrhandler {
    const MARK: u64 = ERRHANDLER_MAGIC;
    fn mark(&self) -> u64 {
        self.magic.get()
    }
}

fn predefined(handle: usize) -> bool {
    matches!(
        handle,
        MPI_ERRORS_ARE_FATAL | MPI_ERRORS_RETURN | MPI_ERRORS_ABORT
    )
}

/// Counts one more use of the handler `handle` (nothing for the predefined ones).
pub(crate) fn retain(handle: usize) {
    if let Some(h) = handles::user_object::<CErrhandler>(handle) {
        h.refs.set(h.refs.get() + 1);
    }
}

/// Counts one use less; frees a user handler nothing uses any more.
pub(crate) fn release(handle: usize) {
    let Some(h) = handles::user_object::<CErrhandler>(handle) else {
        return;
    };
    let left = h.refs.get() - 1;
    h.refs.set(left);
    if left == 0 {
        h.magic.set(0);
        // SAFETY: boxed by MPI_Comm_create_errhandler; no reference is left (the count).
        drop(unsafe { Box::from_raw(handle as *mut CErrhandler) });
    }
}

/// Calls the user handler `handler` on `comm` with `code`, if it is one; its return.
pub(crate) fn call_user(handler: usize, comm: *mut c_void, code: c_int) -> Option<c_int> {
    let h = handles::user_object::<CErrhandler>(handler)?;
    let (mut comm, mut code) = (comm, code);
    // SAFETY: MPI_Comm_create_errhandler's contract: a function taking the communicator
    // and the code by pointer (the standard's variadic tail is empty here).
    unsafe { (h.function)(&mut comm, &mut code) };
    Some(code)
}

/// The error handler of `handle`, checked (predefined or a live user one).
pub(crate) fn checked(call: &'static str, handle: *mut c_void) -> Result<usize, CError> {
    let value = handle as usize;
    if predefined(value) || handles::user_object::<CErrhandler>(value).is_some() {
        return Ok(value);
    }
    let what = if value == MPI_ERRHANDLER_NULL {
        "MPI_ERRHANDLER_NULL".to_string()
    } else {
        format!("{value:#x}")
    };
    Err(CError::new(
        MPI_ERR_ARG,
        call,
        format!("{what} is not an error handler"),
    ))
}

pub unsafe extern "C" fn comm_create_errhandler(
    function: Option<CommErrhandlerFn>,
    errhandler: *mut *mut c_void,
) -> c_int {
    // SAFETY: passed on.
    unsafe { create("MPI_Comm_create_errhandler", function, errhandler) }
}
export!(Comm_create_errhandler, comm_create_errhandler);

/// Makes an error handler calling `function` (for communicators or sessions: both kinds of
/// function take the object's handle and the code by pointer), its handle at `errhandler`.
///
/// # Safety
/// `errhandler` is null or a writable handle slot.
pub(crate) unsafe fn create(
    call: &'static str,
    function: Option<CommErrhandlerFn>,
    errhandler: *mut *mut c_void,
) -> c_int {
    guard(call, std::ptr::null_mut(), || {
        let Some(function) = function else {
            return Err(CError::new(
                MPI_ERR_ARG,
                call,
                "the function is a null pointer",
            ));
        };
        if errhandler.is_null() {
            return Err(CError::new(
                MPI_ERR_ARG,
                call,
                "errhandler is a null pointer",
            ));
        }
        let h = Box::new(CErrhandler {
            magic: Cell::new(ERRHANDLER_MAGIC),
            function,
            refs: Cell::new(1),
        });
        // SAFETY: checked non-null; the standard's contract: a handle slot.
        unsafe { *errhandler = Box::into_raw(h).cast() };
        Ok(())
    })
}

pub unsafe extern "C" fn errhandler_free(errhandler: *mut *mut c_void) -> c_int {
    const CALL: &str = "MPI_Errhandler_free";
    guard(CALL, std::ptr::null_mut(), || {
        if errhandler.is_null() {
            return Err(CError::new(
                MPI_ERR_ARG,
                CALL,
                "errhandler is a null pointer",
            ));
        }
        // SAFETY: checked non-null; the caller's handle.
        let value = checked(CALL, unsafe { *errhandler })?;
        // The predefined handlers stay (freeing one only clears the caller's handle).
        release(value);
        // SAFETY: checked non-null.
        unsafe { *errhandler = MPI_ERRHANDLER_NULL as *mut c_void };
        Ok(())
    })
}
export!(Errhandler_free, errhandler_free);

pub unsafe extern "C" fn comm_set_errhandler(comm: *mut c_void, handler: *mut c_void) -> c_int {
    const CALL: &str = "MPI_Comm_set_errhandler";
    guard(CALL, comm, || {
        let c = handles::comm(CALL, comm)?;
        let new = checked(CALL, handler)?;
        retain(new);
        release(c.errhandler.replace(new));
        Ok(())
    })
}
export!(Comm_set_errhandler, comm_set_errhandler);

pub unsafe extern "C" fn comm_get_errhandler(comm: *mut c_void, out: *mut *mut c_void) -> c_int {
    const CALL: &str = "MPI_Comm_get_errhandler";
    guard(CALL, comm, || {
        let c = handles::comm(CALL, comm)?;
        if out.is_null() {
            return Err(CError::new(
                MPI_ERR_ARG,
                CALL,
                "errhandler is a null pointer",
            ));
        }
        // The handle handed out is a new reference (the program frees it).
        let h = c.errhandler.get();
        retain(h);
        // SAFETY: checked non-null; the caller's handle slot.
        unsafe { *out = h as *mut c_void };
        Ok(())
    })
}
export!(Comm_get_errhandler, comm_get_errhandler);

pub unsafe extern "C" fn comm_call_errhandler(comm: *mut c_void, errorcode: c_int) -> c_int {
    const CALL: &str = "MPI_Comm_call_errhandler";
    let handler = match handles::comm(CALL, comm) {
        Ok(c) => c.errhandler.get(),
        Err(_) => return guard(CALL, comm, || handles::comm(CALL, comm).map(|_| ())),
    };
    match handler {
        MPI_ERRORS_RETURN => MPI_SUCCESS,
        MPI_ERRORS_ARE_FATAL | MPI_ERRORS_ABORT => crate::c_abi::errors::fatal(
            &format!("{CALL}: error code {errorcode} raised on the communicator"),
            errorcode,
        ),
        h => {
            call_user(h, comm, errorcode);
            MPI_SUCCESS
        }
    }
}
export!(Comm_call_errhandler, comm_call_errhandler);

/// The program's error classes and codes, and the strings set for any code.
struct Registry {
    /// User classes and codes: each code's class (a class is its own).
    added: BTreeMap<c_int, c_int>,
    /// Values removed, to hand out again (lowest first).
    free: BTreeSet<c_int>,
    next: c_int,
    strings: BTreeMap<c_int, String>,
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    added: BTreeMap::new(),
    free: BTreeSet::new(),
    next: MPI_ERR_LASTCODE + 1,
    strings: BTreeMap::new(),
});

fn registry() -> std::sync::MutexGuard<'static, Registry> {
    REGISTRY.lock().unwrap_or_else(|e| e.into_inner())
}

/// The largest error code or class in use (MPI_LASTUSEDCODE).
pub(crate) fn last_used_code() -> c_int {
    registry()
        .added
        .keys()
        .next_back()
        .copied()
        .unwrap_or(MPI_ERR_LASTCODE)
}

/// The class of a code the program added (a class is its own), if it is one.
pub(crate) fn added_class(code: c_int) -> Option<c_int> {
    registry().added.get(&code).copied()
}

/// The string set for `code`, if any.
pub(crate) fn added_string(code: c_int) -> Option<String> {
    registry().strings.get(&code).cloned()
}

/// Registers a new value of class `class` (itself for a new class); updates LASTUSEDCODE.
fn add(class: Option<c_int>) -> c_int {
    let value = {
        let mut r = registry();
        let value = r.free.pop_first().unwrap_or_else(|| {
            let v = r.next;
            r.next += 1;
            v
        });
        r.added.insert(value, class.unwrap_or(value));
        value
    };
    publish_last_used();
    value
}

fn publish_last_used() {
    if let Some(running) = crate::c_abi::state::running() {
        running.predefined_attrs.lastusedcode.set(last_used_code());
    }
}

pub unsafe extern "C" fn add_error_class(errorclass: *mut c_int) -> c_int {
    const CALL: &str = "MPI_Add_error_class";
    guard(CALL, std::ptr::null_mut(), || {
        if errorclass.is_null() {
            return Err(CError::new(
                MPI_ERR_ARG,
                CALL,
                "errorclass is a null pointer",
            ));
        }
        put_int(CALL, "errorclass", errorclass, add(None))
    })
}
export!(Add_error_class, add_error_class);

/// Whether `class` is an error class (predefined or added).
fn is_class(class: c_int) -> bool {
    crate::c_abi::abi::ERROR_CLASSES
        .iter()
        .any(|(c, _)| *c == class)
        || added_class(class) == Some(class)
}

pub unsafe extern "C" fn add_error_code(errorclass: c_int, errorcode: *mut c_int) -> c_int {
    const CALL: &str = "MPI_Add_error_code";
    guard(CALL, std::ptr::null_mut(), || {
        if !is_class(errorclass) {
            return Err(CError::new(
                MPI_ERR_ARG,
                CALL,
                format!("{errorclass} is not an error class"),
            ));
        }
        if errorcode.is_null() {
            return Err(CError::new(
                MPI_ERR_ARG,
                CALL,
                "errorcode is a null pointer",
            ));
        }
        put_int(CALL, "errorcode", errorcode, add(Some(errorclass)))
    })
}
export!(Add_error_code, add_error_code);

pub unsafe extern "C" fn add_error_string(errorcode: c_int, string: *const c_char) -> c_int {
    const CALL: &str = "MPI_Add_error_string";
    guard(CALL, std::ptr::null_mut(), || {
        if added_class(errorcode).is_none() {
            return Err(CError::new(
                MPI_ERR_ARG,
                CALL,
                format!("{errorcode} is not an error code or class the program added"),
            ));
        }
        if string.is_null() {
            return Err(CError::new(MPI_ERR_ARG, CALL, "string is a null pointer"));
        }
        // SAFETY: the standard's contract: a NUL-terminated string.
        let text = unsafe { std::ffi::CStr::from_ptr(string) }.to_string_lossy();
        let text: String = text
            .chars()
            .take(MPI_MAX_ERROR_STRING as usize - 1)
            .collect();
        registry().strings.insert(errorcode, text);
        Ok(())
    })
}
export!(Add_error_string, add_error_string);

pub unsafe extern "C" fn remove_error_string(errorcode: c_int) -> c_int {
    const CALL: &str = "MPI_Remove_error_string";
    guard(CALL, std::ptr::null_mut(), || {
        match registry().strings.remove(&errorcode) {
            Some(_) => Ok(()),
            None => Err(CError::new(
                MPI_ERR_ARG,
                CALL,
                format!("{errorcode} has no string the program added"),
            )),
        }
    })
}
export!(Remove_error_string, remove_error_string);

/// Removes an added code (`class`: false) or class (true), checked.
fn remove(call: &'static str, value: c_int, class: bool) -> Result<(), CError> {
    {
        let mut r = registry();
        let ok = match r.added.get(&value) {
            Some(&c) => (c == value) == class,
            None => false,
        };
        if !ok {
            let what = if class { "error class" } else { "error code" };
            return Err(CError::new(
                MPI_ERR_ARG,
                call,
                format!("{value} is not an {what} the program added"),
            ));
        }
        if class && r.added.iter().any(|(&k, &c)| c == value && k != value) {
            return Err(CError::new(
                MPI_ERR_ARG,
                call,
                format!("the error class {value} still has codes (remove them first)"),
            ));
        }
        if r.strings.contains_key(&value) {
            return Err(CError::new(
                MPI_ERR_ARG,
                call,
                format!("{value} still has a string (remove it first)"),
            ));
        }
        r.added.remove(&value);
        r.free.insert(value);
    }
    publish_last_used();
    Ok(())
}

pub unsafe extern "C" fn remove_error_code(errorcode: c_int) -> c_int {
    const CALL: &str = "MPI_Remove_error_code";
    guard(CALL, std::ptr::null_mut(), || {
        remove(CALL, errorcode, false)
    })
}
export!(Remove_error_code, remove_error_code);

pub unsafe extern "C" fn remove_error_class(errorclass: c_int) -> c_int {
    const CALL: &str = "MPI_Remove_error_class";
    guard(CALL, std::ptr::null_mut(), || {
        remove(CALL, errorclass, true)
    })
}
export!(Remove_error_class, remove_error_class);
