//! Generalized requests (MPI 4.1 §13.2): operations the program runs itself and reports to
//! MPI. MPI_Grequest_start makes a request that waits until MPI_Grequest_complete; its query
//! callback fills the status on completion, its free callback runs when the request is
//! freed, its cancel callback on MPI_Cancel. At MPI_THREAD_SERIALIZED the program completes
//! it before waiting on it (no call can complete it during the wait).

use crate::c_abi::abi::*;
use crate::c_abi::errors::{guard, CError};
use crate::c_abi::p2p::Status;
use crate::c_abi::requests::{check_out, hand_out, CRequest};
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, Ordering};

type QueryFn = unsafe extern "C" fn(*mut c_void, *mut Status) -> c_int;
type FreeFn = unsafe extern "C" fn(*mut c_void) -> c_int;
type CancelFn = unsafe extern "C" fn(*mut c_void, c_int) -> c_int;

/// The program's operation behind a generalized request.
pub(crate) struct Generalized {
    query: Option<QueryFn>,
    free: Option<FreeFn>,
    cancel: Option<CancelFn>,
    extra_state: *mut c_void,
    /// Set by MPI_Grequest_complete (Release), read by wait and test (Acquire): the
    /// program's writes before completing it are seen by the thread that waits on it.
    complete: AtomicBool,
    /// The first error code a callback returned, which the call that completes or frees
    /// the request returns (MPI 4.1 §13.2); MPI_SUCCESS while none did.
    failed: c_int,
}

impl Generalized {
    fn is_complete(&self) -> bool {
        self.complete.load(Ordering::Acquire)
    }

    /// Keeps `code` if it is the first error a callback returned.
    fn note(&mut self, code: c_int) {
        if self.failed == MPI_SUCCESS {
            self.failed = code;
        }
    }

    /// The status the query callback gives (the empty one when there is none).
    fn status(&mut self) -> Status {
        let mut st = Status::empty();
        if let Some(q) = self.query {
            // SAFETY: MPI_Grequest_start's contract: the callback fills a status.
            let code = unsafe { q(self.extra_state, &mut st) };
            self.note(code);
        }
        st
    }

    /// Runs the free callback (once: dropping the request later does not run it again);
    /// the first error code a callback returned, or MPI_SUCCESS.
    pub(crate) fn free_now(&mut self) -> c_int {
        if let Some(f) = self.free.take() {
            // SAFETY: MPI_Grequest_start's contract: called once, when the request is freed.
            let code = unsafe { f(self.extra_state) };
            self.note(code);
        }
        std::mem::replace(&mut self.failed, MPI_SUCCESS)
    }

    pub(crate) fn wait(&mut self) -> Status {
        // Only MPI_Grequest_complete completes it, and under MPI_THREAD_SERIALIZED no call
        // can run while this one waits: an incomplete request would wait forever.
        if !self.is_complete() {
            panic!(
                "the generalized request is not complete, and at MPI_THREAD_SERIALIZED nothing \
                 can complete it while this call waits (call MPI_Grequest_complete first)"
            );
        }
        self.status()
    }

    pub(crate) fn test(&mut self) -> Option<Status> {
        self.is_complete().then(|| self.status())
    }

    /// Runs the cancel callback; its error code, which MPI_Cancel returns.
    pub(crate) fn cancel(&self) -> c_int {
        match self.cancel {
            // SAFETY: MPI_Grequest_start's contract.
            Some(c) => unsafe { c(self.extra_state, self.is_complete().into()) },
            None => MPI_SUCCESS,
        }
    }
}

impl Drop for Generalized {
    fn drop(&mut self) {
        if let Some(f) = self.free {
            // SAFETY: MPI_Grequest_start's contract: called once, when the request is freed.
            unsafe { f(self.extra_state) };
        }
    }
}

pub unsafe extern "C" fn grequest_start(
    query_fn: Option<QueryFn>,
    free_fn: Option<FreeFn>,
    cancel_fn: Option<CancelFn>,
    extra_state: *mut c_void,
    request: *mut *mut c_void,
) -> c_int {
    const CALL: &str = "MPI_Grequest_start";
    guard(CALL, std::ptr::null_mut(), || {
        check_out(CALL, request)?;
        let g = Generalized {
            query: query_fn,
            free: free_fn,
            cancel: cancel_fn,
            extra_state,
            complete: AtomicBool::new(false),
            failed: MPI_SUCCESS,
        };
        // SAFETY: checked non-null.
        unsafe { hand_out(request, CRequest::generalized(g)) };
        Ok(())
    })
}
export!(Grequest_start, grequest_start);

/// Marks the request complete.
pub unsafe extern "C" fn grequest_complete(request: *mut c_void) -> c_int {
    const CALL: &str = "MPI_Grequest_complete";
    guard(CALL, std::ptr::null_mut(), || {
        if request.is_null() || request as usize == MPI_REQUEST_NULL {
            return Err(CError::new(
                MPI_ERR_REQUEST,
                CALL,
                "the request is MPI_REQUEST_NULL",
            ));
        }
        // SAFETY: the standard's contract: a live request handle (calls are serialized, so
        // nothing else uses the request meanwhile).
        let r = unsafe { &*request.cast::<CRequest>() };
        let g = r.as_generalized().ok_or_else(|| {
            CError::new(
                MPI_ERR_REQUEST,
                CALL,
                "the request is not a generalized one",
            )
        })?;
        g.complete.store(true, Ordering::Release);
        Ok(())
    })
}
export!(Grequest_complete, grequest_complete);

/// `code`, an error code a generalized request's callback returned, as `call`'s error (the
/// call that completed, freed or cancelled the request returns it: MPI 4.1 §13.2).
pub(crate) fn callback_error(call: &'static str, code: c_int) -> Result<(), CError> {
    match code {
        MPI_SUCCESS => Ok(()),
        code => Err(CError::new(
            code,
            call,
            format!("a callback of the generalized request returned error code {code}"),
        )),
    }
}
