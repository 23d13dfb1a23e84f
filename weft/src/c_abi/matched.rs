//! Matched probes and receives (MPI_Mprobe, MPI_Improbe, MPI_Mrecv, MPI_Imrecv): a probe
//! takes the message out of matching, and its `MPI_Message` handle (a pointer to the boxed
//! weft message) is received from later, by this thread or another.

use crate::c_abi::abi::*;
use crate::c_abi::env::put_int;
use crate::c_abi::errors::{guard, CError};
use crate::c_abi::handles::{self, view_mut, CCount};
use crate::c_abi::p2p::{check_rank, check_tag, Status};
use crate::c_abi::requests::{self, CRequest};
use crate::c_abi::state::Comm;
use crate::point_to_point::Message;
use crate::request::StaticScope;
use crate::traits::*;
use std::ffi::{c_int, c_void};

/// Probes for a message matching (`source`, `tag`) and takes it: blocking, or `None` when
/// none has arrived (`wait` false). A probe of MPI_PROC_NULL gives MPI_MESSAGE_NO_PROC.
fn matched_probe(
    call: &'static str,
    source: c_int,
    tag: c_int,
    c: &Comm,
    wait: bool,
) -> Result<Option<(*mut c_void, Status)>, CError> {
    check_rank(call, "source", source, c, true)?;
    check_tag(call, tag, true)?;
    if source == MPI_PROC_NULL {
        return Ok(Some((
            MPI_MESSAGE_NO_PROC as *mut c_void,
            Status::proc_null(),
        )));
    }
    let found = match (source, tag, wait) {
        (MPI_ANY_SOURCE, MPI_ANY_TAG, true) => Some(c.comm.any_process().matched_probe()),
        (MPI_ANY_SOURCE, t, true) => Some(c.comm.any_process().matched_probe_with_tag(t)),
        (s, MPI_ANY_TAG, true) => Some(c.comm.process_at_rank(s).matched_probe()),
        (s, t, true) => Some(c.comm.process_at_rank(s).matched_probe_with_tag(t)),
        (MPI_ANY_SOURCE, MPI_ANY_TAG, false) => c.comm.any_process().immediate_matched_probe(),
        (MPI_ANY_SOURCE, t, false) => c.comm.any_process().immediate_matched_probe_with_tag(t),
        (s, MPI_ANY_TAG, false) => c.comm.process_at_rank(s).immediate_matched_probe(),
        (s, t, false) => c
            .comm
            .process_at_rank(s)
            .immediate_matched_probe_with_tag(t),
    };
    Ok(found.map(|(m, st)| (Box::into_raw(Box::new(m)).cast(), Status::from_weft(&st))))
}

fn check_out(call: &'static str, message: *mut *mut c_void) -> Result<(), CError> {
    if message.is_null() {
        return Err(CError::new(MPI_ERR_ARG, call, "message is a null pointer"));
    }
    Ok(())
}

pub unsafe extern "C" fn mprobe(
    source: c_int,
    tag: c_int,
    comm: *mut c_void,
    message: *mut *mut c_void,
    status: *mut Status,
) -> c_int {
    const CALL: &str = "MPI_Mprobe";
    guard(CALL, comm, || {
        let c = handles::comm(CALL, comm)?;
        check_out(CALL, message)?;
        let (m, st) =
            matched_probe(CALL, source, tag, c, true)?.expect("a blocking probe finds one");
        // SAFETY: checked non-null; the standard's contract for `status`.
        unsafe {
            *message = m;
            st.store(status);
        }
        Ok(())
    })
}
export!(Mprobe, mprobe);

pub unsafe extern "C" fn improbe(
    source: c_int,
    tag: c_int,
    comm: *mut c_void,
    flag: *mut c_int,
    message: *mut *mut c_void,
    status: *mut Status,
) -> c_int {
    const CALL: &str = "MPI_Improbe";
    guard(CALL, comm, || {
        let c = handles::comm(CALL, comm)?;
        check_out(CALL, message)?;
        let found = matched_probe(CALL, source, tag, c, false)?;
        put_int(CALL, "flag", flag, found.is_some().into())?;
        if let Some((m, st)) = found {
            // SAFETY: checked non-null; the standard's contract for `status`.
            unsafe {
                *message = m;
                st.store(status);
            }
        }
        Ok(())
    })
}
export!(Improbe, improbe);

/// Takes the message out of its handle (setting it to MPI_MESSAGE_NULL): `None` for
/// MPI_MESSAGE_NO_PROC.
///
/// # Safety
/// `message` is a writable slot holding a handle a matched probe made, not yet received.
unsafe fn take(
    call: &'static str,
    message: *mut *mut c_void,
) -> Result<Option<Box<Message>>, CError> {
    check_out(call, message)?;
    // SAFETY: checked non-null; the caller's promise.
    let handle = unsafe { *message };
    let out = match handle as usize {
        MPI_MESSAGE_NO_PROC => None,
        MPI_MESSAGE_NULL => {
            return Err(CError::new(
                MPI_ERR_REQUEST,
                call,
                "the message is MPI_MESSAGE_NULL",
            ))
        }
        // SAFETY: the caller's promise: a handle from `matched_probe`, boxed there.
        _ => Some(unsafe { Box::from_raw(handle.cast::<Message>()) }),
    };
    // SAFETY: checked non-null.
    unsafe { *message = MPI_MESSAGE_NULL as *mut c_void };
    Ok(out)
}

pub unsafe extern "C" fn mrecv<C: CCount>(
    buf: *mut c_void,
    count: C,
    datatype: *mut c_void,
    message: *mut *mut c_void,
    status: *mut Status,
) -> c_int {
    #[allow(non_snake_case)]
    let CALL = C::pick("MPI_Mrecv", "MPI_Mrecv_c");
    guard(CALL, std::ptr::null_mut(), || {
        let dt = handles::datatype(CALL, datatype)?;
        // SAFETY: the standard's contract: room for `count` elements at `buf`.
        let mut v = unsafe { view_mut(CALL, buf, count, dt)? };
        // SAFETY: the standard's contract for `message`.
        let st = match unsafe { take(CALL, message)? } {
            None => Status::proc_null(),
            Some(m) => Status::from_weft(&m.matched_receive_into(&mut v)),
        };
        // SAFETY: the standard's contract for `status`.
        unsafe { st.store(status) };
        Ok(())
    })
}
export!(Mrecv, mrecv::<c_int>);
export!(Mrecv_c, mrecv::<i64>);

pub unsafe extern "C" fn imrecv<C: CCount>(
    buf: *mut c_void,
    count: C,
    datatype: *mut c_void,
    message: *mut *mut c_void,
    request: *mut *mut c_void,
) -> c_int {
    #[allow(non_snake_case)]
    let CALL = C::pick("MPI_Imrecv", "MPI_Imrecv_c");
    guard(CALL, std::ptr::null_mut(), || {
        let dt = handles::datatype(CALL, datatype)?;
        requests::check_out(CALL, request)?;
        // SAFETY: the standard's contract: room for `count` elements at `buf` until the
        // request completes.
        let v = unsafe { view_mut(CALL, buf, count, dt)? };
        // SAFETY: the standard's contract for `message`.
        let r = match unsafe { take(CALL, message)? } {
            None => CRequest::done(Status::proc_null()),
            Some(m) => CRequest::receive(v, |v| m.immediate_matched_receive_into(StaticScope, v)),
        };
        // SAFETY: checked above.
        unsafe { requests::hand_out(request, r) };
        Ok(())
    })
}
export!(Imrecv, imrecv::<c_int>);
export!(Imrecv_c, imrecv::<i64>);
