//! Errors through the C boundary: every call's body runs under [`guard`], which adopts the
//! runtime for the calling thread, catches any panic, and turns a failure into the error
//! handler's action: abort the job with a message naming the call and the values
//! (`MPI_ERRORS_ARE_FATAL`, `MPI_ERRORS_ABORT`, the default), or return the error code
//! (`MPI_ERRORS_RETURN`), remembering the message for `MPI_Error_string`.

use crate::c_abi::abi::*;
use crate::c_abi::state::{self, Phase};
use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// A failed call: the standard's error class, the call, and a sentence naming the values.
///
/// Boxed, so that a `Result<&T, CError>` is two words and comes back in registers: the
/// success path of every call returns one, and a large error would send each through memory.
#[derive(Debug)]
pub(crate) struct CError(Box<Failure>);

#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) class: i32,
    pub(crate) call: &'static str,
    pub(crate) detail: String,
}

impl std::ops::Deref for CError {
    type Target = Failure;
    fn deref(&self) -> &Failure {
        &self.0
    }
}

impl CError {
    #[cold]
    #[inline(never)]
    pub(crate) fn new(class: i32, call: &'static str, detail: impl Into<String>) -> CError {
        CError(Box::new(Failure {
            class,
            call,
            detail: detail.into(),
        }))
    }

    pub(crate) fn not_initialized(call: &'static str) -> CError {
        let detail = match state::phase() {
            Phase::After => "called after MPI_Finalize",
            _ => "called before MPI_Init",
        };
        CError::new(MPI_ERR_OTHER, call, detail)
    }

    /// Weft's error as the standard's class.
    pub(crate) fn from_weft(e: crate::Error) -> CError {
        use crate::ErrorClass as W;
        let class = match e.class {
            W::Rank => MPI_ERR_RANK,
            W::Tag => MPI_ERR_TAG,
            W::Count => MPI_ERR_COUNT,
            W::Truncate => MPI_ERR_TRUNCATE,
            W::Op => MPI_ERR_OP,
            W::Root => MPI_ERR_ROOT,
            W::Handle | W::Comm => MPI_ERR_COMM,
            W::Unsupported => MPI_ERR_UNSUPPORTED_OPERATION,
            W::Topology => MPI_ERR_TOPOLOGY,
            W::Dims => MPI_ERR_DIMS,
            W::Arg => MPI_ERR_ARG,
            W::Port => MPI_ERR_PORT,
            W::Spawn => MPI_ERR_SPAWN,
            W::Name => MPI_ERR_NAME,
            W::Service => MPI_ERR_SERVICE,
            W::Resource => MPI_ERR_NO_MEM,
            W::Internal => MPI_ERR_INTERN,
            W::Disp => MPI_ERR_DISP,
            W::RmaSync => MPI_ERR_RMA_SYNC,
            W::Assert => MPI_ERR_ASSERT,
            W::Type => MPI_ERR_TYPE,
            _ => MPI_ERR_OTHER,
        };
        CError::new(class, e.call, e.detail)
    }
}

thread_local! {
    /// The last error's code and message (for MPI_Error_string).
    static LAST: RefCell<Option<(i32, String)>> = const { RefCell::new(None) };
}

/// The thread inside a C call (its `crate::runtime::this_thread` id), or 0: its panics are
/// the error handler's to report, so the panic hook stays quiet for it. One word for the
/// process, not a thread-local (which in a shared library costs a call on every access):
/// calls are serialized, so at most one thread is inside at a time.
static INSIDE: AtomicUsize = AtomicUsize::new(0);

/// Installs a panic hook that is quiet inside C calls (their panics become the error
/// handler's action, with its own message) and the previous hook elsewhere.
pub(crate) fn quiet_panics_inside_calls() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if INSIDE.load(Relaxed) != crate::runtime::this_thread() {
            previous(info);
        }
    }));
}

/// Runs a call's body: adopts the runtime for this thread when weft runs, catches panics,
/// and hands a failure to the error handler of `comm` (a communicator handle; errors with no
/// communicator go to `MPI_COMM_SELF`'s, as MPI-4 says).
#[inline]
pub(crate) fn guard(
    call: &'static str,
    comm: *mut c_void,
    body: impl FnOnce() -> Result<(), CError>,
) -> c_int {
    if state::phase_is_running() {
        // SAFETY: the serialized threading level: the program makes one call at a time, and
        // orders them itself when they come from different threads (what `adopt` asks).
        if let Err(e) = unsafe { crate::runtime::adopt(call) } {
            return handle(comm, CError::from_weft(e));
        }
    } else if let Err(e) = join_outside_running(call) {
        return handle(comm, e);
    }
    // Relaxed, and a load and a store rather than a swap (no locked instruction): calls are
    // serialized, and only the calling thread reads its own id back (the hook runs on the
    // thread that panics).
    let was_inside = INSIDE.load(Relaxed);
    INSIDE.store(crate::runtime::this_thread(), Relaxed);
    let out = catch_unwind(AssertUnwindSafe(body));
    INSIDE.store(was_inside, Relaxed);
    match out {
        Ok(Ok(())) => MPI_SUCCESS,
        Ok(Err(e)) => handle(comm, e),
        Err(panic) => {
            let detail = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "a panic without a message".into());
            let detail = detail.strip_prefix("weft: ").unwrap_or(&detail).to_string();
            handle(comm, CError::new(MPI_ERR_OTHER, call, detail))
        }
    }
}

/// [`guard`]'s way in outside `Phase::Running`: before MPI_Init with the runtime running (the
/// Rust API started it), C joins that runtime; otherwise the body runs as it is (its handles
/// report the phase).
#[cold]
#[inline(never)]
fn join_outside_running(call: &'static str) -> Result<(), CError> {
    if state::phase() == Phase::Before && crate::runtime::is_running() {
        // SAFETY: as in `guard`.
        unsafe { crate::runtime::adopt(call) }.map_err(CError::from_weft)?;
        crate::c_abi::env::join_rust_runtime();
    }
    Ok(())
}

/// The error handler's action on `e`.
#[cold]
fn handle(comm: *mut c_void, e: CError) -> c_int {
    let message = format!("{}: {} ({})", e.call, e.detail, class_name(e.class));
    let comm = if comm.is_null() {
        unattached_errors_comm()
    } else {
        comm
    };
    let session = crate::c_abi::session::session_object(comm);
    #[cfg(not(loom))]
    let window = crate::c_abi::window::errhandler_of(comm);
    #[cfg(loom)]
    let window: Option<usize> = None;
    let (handler, comm) = match state::phase() {
        Phase::Running if window.is_some() => (window.unwrap_or(MPI_ERRORS_ARE_FATAL), comm),
        Phase::Running if session.is_some() => (
            session.map_or(MPI_ERRORS_ARE_FATAL, |s| s.errhandler.get()),
            comm,
        ),
        Phase::Running => match crate::c_abi::handles::comm(e.call, comm) {
            Ok(c) => (c.errhandler.get(), comm),
            Err(_) => (
                state::running().map_or(MPI_ERRORS_ARE_FATAL, |r| r.self_comm.errhandler.get()),
                MPI_COMM_SELF as *mut c_void,
            ),
        },
        _ => (MPI_ERRORS_ARE_FATAL, comm),
    };
    if handler == MPI_ERRORS_RETURN {
        LAST.with(|l| *l.borrow_mut() = Some((e.class, message)));
        return e.class;
    }
    LAST.with(|l| *l.borrow_mut() = Some((e.class, message.clone())));
    if crate::c_abi::errhandler::call_user(handler, comm, e.class).is_some() {
        return e.class;
    }
    fatal(&message, e.class)
}

/// Where the error of a call on no communicator, window, file or session is raised:
/// `MPI_COMM_SELF` (MPI 4), but `MPI_COMM_WORLD` while `MPI_COMM_SELF` still has the
/// initial `MPI_ERRORS_ARE_FATAL` and the program gave `MPI_COMM_WORLD` another handler
/// (MPI 3 raised such errors there, and programs written for it set only that one: MPICH
/// and Open MPI honour it too).
fn unattached_errors_comm() -> *mut c_void {
    let world_only = state::running().is_some_and(|r| {
        r.self_comm.errhandler.get() == MPI_ERRORS_ARE_FATAL
            && r.world.errhandler.get() != MPI_ERRORS_ARE_FATAL
    });
    match (world_only, state::phase()) {
        (true, Phase::Running) => MPI_COMM_WORLD as *mut c_void,
        _ => MPI_COMM_SELF as *mut c_void,
    }
}

/// Ends the whole job with `message` (MPI_ERRORS_ARE_FATAL).
pub(crate) fn fatal(message: &str, code: i32) -> ! {
    eprintln!("weft: {message}");
    if let Some(running) = state::running() {
        use crate::traits::*;
        // SAFETY: as in `guard`.
        if unsafe { crate::runtime::adopt("MPI_Abort") }.is_ok() {
            running.world.comm.abort(code.max(1));
        }
    }
    std::process::exit(code.max(1))
}

/// For the stubs of functions not implemented yet.
#[cold]
pub(crate) fn unsupported(call: &'static str) -> c_int {
    guard(call, std::ptr::null_mut(), || {
        Err(CError::new(
            MPI_ERR_UNSUPPORTED_OPERATION,
            call,
            "not supported by Weft yet (`weft info --abi` lists what is not)",
        ))
    })
}

/// The standard's name of an error class.
pub(crate) fn class_name(class: i32) -> &'static str {
    ERROR_CLASSES
        .iter()
        .find(|(c, _)| *c == class)
        .map_or("MPI_ERR_UNKNOWN", |(_, n)| n)
}

/// What an error class means, in a few words (the name alone for the rarer ones).
fn describe(class: i32) -> Option<String> {
    let name = ERROR_CLASSES.iter().find(|(c, _)| *c == class)?.1;
    Some(match CLASSES.iter().find(|(c, _, _)| *c == class) {
        Some((_, _, what)) => format!("{name}: {what}"),
        None => name.to_string(),
    })
}

/// The commoner error classes: value, name, description.
const CLASSES: &[(i32, &str, &str)] = &[
    (MPI_SUCCESS, "MPI_SUCCESS", "no error"),
    (MPI_ERR_BUFFER, "MPI_ERR_BUFFER", "invalid buffer pointer"),
    (MPI_ERR_COUNT, "MPI_ERR_COUNT", "invalid count argument"),
    (MPI_ERR_TYPE, "MPI_ERR_TYPE", "invalid datatype"),
    (MPI_ERR_TAG, "MPI_ERR_TAG", "invalid tag"),
    (MPI_ERR_COMM, "MPI_ERR_COMM", "invalid communicator"),
    (MPI_ERR_RANK, "MPI_ERR_RANK", "invalid rank"),
    (MPI_ERR_REQUEST, "MPI_ERR_REQUEST", "invalid request"),
    (MPI_ERR_ROOT, "MPI_ERR_ROOT", "invalid root"),
    (MPI_ERR_GROUP, "MPI_ERR_GROUP", "invalid group"),
    (MPI_ERR_OP, "MPI_ERR_OP", "invalid operation"),
    (MPI_ERR_TOPOLOGY, "MPI_ERR_TOPOLOGY", "invalid topology"),
    (MPI_ERR_DIMS, "MPI_ERR_DIMS", "invalid dimension argument"),
    (MPI_ERR_ARG, "MPI_ERR_ARG", "invalid argument"),
    (MPI_ERR_UNKNOWN, "MPI_ERR_UNKNOWN", "unknown error"),
    (
        MPI_ERR_TRUNCATE,
        "MPI_ERR_TRUNCATE",
        "message truncated on receive",
    ),
    (MPI_ERR_OTHER, "MPI_ERR_OTHER", "other error"),
    (MPI_ERR_INTERN, "MPI_ERR_INTERN", "internal error in Weft"),
    (
        MPI_ERR_IN_STATUS,
        "MPI_ERR_IN_STATUS",
        "error code is in the status",
    ),
    (MPI_ERR_PENDING, "MPI_ERR_PENDING", "pending request"),
    (MPI_ERR_NO_MEM, "MPI_ERR_NO_MEM", "out of memory"),
    (MPI_ERR_INFO, "MPI_ERR_INFO", "invalid info object"),
    (MPI_ERR_KEYVAL, "MPI_ERR_KEYVAL", "invalid attribute key"),
    (
        MPI_ERR_UNSUPPORTED_OPERATION,
        "MPI_ERR_UNSUPPORTED_OPERATION",
        "unsupported operation",
    ),
    (
        MPI_ERR_ERRHANDLER,
        "MPI_ERR_ERRHANDLER",
        "invalid error handler",
    ),
    (MPI_ERR_LASTCODE, "MPI_ERR_LASTCODE", "last error code"),
];

/// Copies `text` into a C buffer of `capacity` bytes, NUL-terminated, and its length to `len`.
///
/// # Safety
/// `out` must hold `capacity` writable bytes and `len` be writable.
pub(crate) unsafe fn write_string(text: &str, out: *mut c_char, capacity: usize, len: *mut c_int) {
    let n = text.len().min(capacity.saturating_sub(1));
    // SAFETY: the caller's promise; `n + 1 <= capacity`.
    unsafe {
        std::ptr::copy_nonoverlapping(text.as_ptr(), out.cast::<u8>(), n);
        *out.add(n) = 0;
        *len = n as c_int;
    }
}

pub unsafe extern "C" fn error_string(
    code: c_int,
    string: *mut c_char,
    resultlen: *mut c_int,
) -> c_int {
    guard("MPI_Error_string", std::ptr::null_mut(), || {
        if string.is_null() || resultlen.is_null() {
            return Err(CError::new(
                MPI_ERR_ARG,
                "MPI_Error_string",
                "a null output pointer",
            ));
        }
        let last = LAST.with(|l| l.borrow().clone());
        let text = match last {
            Some((c, message)) if c == code => message,
            _ if crate::c_abi::errhandler::added_class(code).is_some() => {
                crate::c_abi::errhandler::added_string(code).unwrap_or_default()
            }
            _ => match describe(code) {
                Some(text) => text,
                None => {
                    return Err(CError::new(
                        MPI_ERR_ARG,
                        "MPI_Error_string",
                        format!("{code} is not an error code"),
                    ))
                }
            },
        };
        // SAFETY: the standard's contract: `string` holds MPI_MAX_ERROR_STRING bytes.
        unsafe { write_string(&text, string, MPI_MAX_ERROR_STRING as usize, resultlen) };
        Ok(())
    })
}
export!(Error_string, error_string);

pub unsafe extern "C" fn error_class(code: c_int, class: *mut c_int) -> c_int {
    guard("MPI_Error_class", std::ptr::null_mut(), || {
        if class.is_null() {
            return Err(CError::new(
                MPI_ERR_ARG,
                "MPI_Error_class",
                "errorclass is a null pointer",
            ));
        }
        let of = match crate::c_abi::errhandler::added_class(code) {
            Some(c) => c,
            None if ERROR_CLASSES.iter().any(|(c, _)| *c == code) => code,
            None => {
                return Err(CError::new(
                    MPI_ERR_ARG,
                    "MPI_Error_class",
                    format!("{code} is not an error code"),
                ))
            }
        };
        // SAFETY: checked non-null; the caller's pointer to an int.
        unsafe { *class = of };
        Ok(())
    })
}
export!(Error_class, error_class);
