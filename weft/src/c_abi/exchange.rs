//! A send and a receive as one operation, nonblocking (MPI_Isendrecv) or on one buffer
//! (MPI_Sendrecv_replace, MPI_Isendrecv_replace). The send starts first, so the two ranks
//! of an exchange never wait on each other; one request completes both and carries the
//! receive's status. On one buffer, the send reads a packed copy taken when the call starts,
//! so the receive may land in the buffer at once.

use crate::c_abi::abi::*;
use crate::c_abi::errors::{guard, CError};
use crate::c_abi::handles::{self, view, CCount};
use crate::c_abi::p2p::{start_recv, start_send, Mode, Status};
use crate::c_abi::requests::{check_out, hand_out, CRequest};
use crate::datatype::Buffer;
use std::ffi::{c_int, c_void};

/// Starts the exchange of `buf` (sent packed, then received into).
///
/// # Safety
/// The standard's contract: `count` elements of `datatype` at `buf`, valid until completion.
#[allow(clippy::too_many_arguments)]
unsafe fn start_replace<C: CCount>(
    call: &'static str,
    buf: *mut c_void,
    count: C,
    datatype: *mut c_void,
    dest: c_int,
    sendtag: c_int,
    source: c_int,
    recvtag: c_int,
    comm: *mut c_void,
) -> Result<CRequest, CError> {
    let dt = handles::datatype(call, datatype)?;
    // SAFETY: the caller's promise: `count` elements at `buf`.
    let staged = unsafe { view(call, buf, count, dt)? }.layout().pack();
    let len = c_int::try_from(staged.len()).map_err(|_| {
        CError::new(
            MPI_ERR_COUNT,
            call,
            format!("{} bytes are more than one call sends", staged.len()),
        )
    })?;
    let byte = MPI_BYTE as *mut c_void;
    // SAFETY: `staged` is kept in the request until the send completes (`CRequest::pair`).
    let send = unsafe {
        start_send(
            call,
            Mode::Standard,
            staged.as_ptr().cast(),
            len,
            byte,
            dest,
            sendtag,
            comm,
        )?
    };
    // SAFETY: the caller's promise.
    let recv = unsafe { start_recv(call, buf, count, datatype, source, recvtag, comm)? };
    Ok(CRequest::pair(send, recv, Some(staged)))
}

#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn isendrecv<C: CCount>(
    sendbuf: *const c_void,
    sendcount: C,
    sendtype: *mut c_void,
    dest: c_int,
    sendtag: c_int,
    recvbuf: *mut c_void,
    recvcount: C,
    recvtype: *mut c_void,
    source: c_int,
    recvtag: c_int,
    comm: *mut c_void,
    request: *mut *mut c_void,
) -> c_int {
    #[allow(non_snake_case)]
    let CALL = C::pick("MPI_Isendrecv", "MPI_Isendrecv_c");
    guard(CALL, comm, || {
        check_out(CALL, request)?;
        // SAFETY: the standard's contract for both buffers, valid until completion.
        let pair = unsafe {
            let send = start_send(
                CALL,
                Mode::Standard,
                sendbuf,
                sendcount,
                sendtype,
                dest,
                sendtag,
                comm,
            )?;
            let recv = start_recv(CALL, recvbuf, recvcount, recvtype, source, recvtag, comm)?;
            CRequest::pair(send, recv, None)
        };
        // SAFETY: checked non-null.
        unsafe { hand_out(request, pair) };
        Ok(())
    })
}
export!(Isendrecv, isendrecv::<c_int>);
export!(Isendrecv_c, isendrecv::<i64>);

#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn isendrecv_replace<C: CCount>(
    buf: *mut c_void,
    count: C,
    datatype: *mut c_void,
    dest: c_int,
    sendtag: c_int,
    source: c_int,
    recvtag: c_int,
    comm: *mut c_void,
    request: *mut *mut c_void,
) -> c_int {
    #[allow(non_snake_case)]
    let CALL = C::pick("MPI_Isendrecv_replace", "MPI_Isendrecv_replace_c");
    guard(CALL, comm, || {
        check_out(CALL, request)?;
        // SAFETY: the standard's contract for the buffer, valid until completion.
        let pair = unsafe {
            start_replace(
                CALL, buf, count, datatype, dest, sendtag, source, recvtag, comm,
            )?
        };
        // SAFETY: checked non-null.
        unsafe { hand_out(request, pair) };
        Ok(())
    })
}
export!(Isendrecv_replace, isendrecv_replace::<c_int>);
export!(Isendrecv_replace_c, isendrecv_replace::<i64>);

#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn sendrecv_replace<C: CCount>(
    buf: *mut c_void,
    count: C,
    datatype: *mut c_void,
    dest: c_int,
    sendtag: c_int,
    source: c_int,
    recvtag: c_int,
    comm: *mut c_void,
    status: *mut Status,
) -> c_int {
    #[allow(non_snake_case)]
    let CALL = C::pick("MPI_Sendrecv_replace", "MPI_Sendrecv_replace_c");
    guard(CALL, comm, || {
        // SAFETY: the standard's contract for the buffer.
        let pair = unsafe {
            start_replace(
                CALL, buf, count, datatype, dest, sendtag, source, recvtag, comm,
            )?
        };
        let st = pair.finish_with_status();
        // SAFETY: the standard's contract: MPI_STATUS_IGNORE or a status.
        unsafe { st.store(status) };
        Ok(())
    })
}
export!(Sendrecv_replace, sendrecv_replace::<c_int>);
export!(Sendrecv_replace_c, sendrecv_replace::<i64>);
