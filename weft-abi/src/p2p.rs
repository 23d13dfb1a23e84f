//! Point-to-point: blocking send and receive on contiguous predefined datatypes, and what a
//! status tells.

use crate::abi::*;
use crate::errors::{guard, CError};
use crate::handles::{self, bytes, bytes_mut, span};
use std::ffi::{c_int, c_void};
use weft::datatype::{DatatypeRef, MutView, View};
use weft::traits::*;

/// The status words Weft keeps in `MPI_internal`: the message's length in bytes (two words,
/// low first) and whether the request was cancelled.
const BYTES_LOW: usize = 0;
const BYTES_HIGH: usize = 1;
const CANCELLED: usize = 2;

/// The standard's `MPI_Status`.
#[repr(C)]
pub(crate) struct Status {
    source: c_int,
    tag: c_int,
    error: c_int,
    internal: [c_int; 5],
}

/// Fills `out` (unless it is `MPI_STATUS_IGNORE`).
///
/// # Safety
/// `out` is null or points to a writable `MPI_Status`.
pub(crate) unsafe fn fill_status(
    out: *mut Status,
    source: c_int,
    tag: c_int,
    len: usize,
    cancelled: bool,
) {
    if out.is_null() {
        return;
    }
    let len = len as u64;
    // SAFETY: the caller's promise.
    let st = unsafe { &mut *out };
    st.source = source;
    st.tag = tag;
    st.error = MPI_SUCCESS;
    st.internal[BYTES_LOW] = len as u32 as c_int;
    st.internal[BYTES_HIGH] = (len >> 32) as u32 as c_int;
    st.internal[CANCELLED] = cancelled.into();
}

fn check_tag(call: &'static str, tag: c_int, any: bool) -> Result<(), CError> {
    if tag >= 0 || (any && tag == MPI_ANY_TAG) {
        return Ok(());
    }
    Err(CError::new(
        MPI_ERR_TAG,
        call,
        format!("the tag {tag} is negative"),
    ))
}

fn check_rank(
    call: &'static str,
    what: &str,
    rank: c_int,
    size: c_int,
    any: bool,
) -> Result<(), CError> {
    if (0..size).contains(&rank) || rank == MPI_PROC_NULL || (any && rank == MPI_ANY_SOURCE) {
        return Ok(());
    }
    Err(CError::new(
        MPI_ERR_RANK,
        call,
        format!("the {what} rank {rank} is outside the communicator (size {size})"),
    ))
}

unsafe extern "C" fn send(
    buf: *const c_void,
    count: c_int,
    datatype: *mut c_void,
    dest: c_int,
    tag: c_int,
    comm: *mut c_void,
) -> c_int {
    const CALL: &str = "MPI_Send";
    guard(CALL, comm, || {
        let c = handles::comm(CALL, comm)?;
        let map = handles::datatype(CALL, datatype)?;
        let len = span(CALL, map, count)?;
        check_rank(CALL, "destination", dest, c.comm.size(), false)?;
        check_tag(CALL, tag, false)?;
        if dest == MPI_PROC_NULL {
            return Ok(());
        }
        // SAFETY: the standard's contract: `count` elements of `datatype` at `buf`.
        let data = unsafe { bytes(buf, len) };
        let dt = DatatypeRef::from_map(map);
        // SAFETY: `data` spans exactly `count` elements of the datatype.
        let view = unsafe { View::with_count_and_datatype(data, count, &dt) };
        c.comm.process_at_rank(dest).send_with_tag(&view, tag);
        Ok(())
    })
}
export!(Send, send);

unsafe extern "C" fn recv(
    buf: *mut c_void,
    count: c_int,
    datatype: *mut c_void,
    source: c_int,
    tag: c_int,
    comm: *mut c_void,
    status: *mut Status,
) -> c_int {
    const CALL: &str = "MPI_Recv";
    guard(CALL, comm, || {
        let c = handles::comm(CALL, comm)?;
        let map = handles::datatype(CALL, datatype)?;
        let len = span(CALL, map, count)?;
        check_rank(CALL, "source", source, c.comm.size(), true)?;
        check_tag(CALL, tag, true)?;
        if source == MPI_PROC_NULL {
            // SAFETY: the standard's contract: `status` is MPI_STATUS_IGNORE or writable.
            unsafe { fill_status(status, MPI_PROC_NULL, MPI_ANY_TAG, 0, false) };
            return Ok(());
        }
        // SAFETY: the standard's contract: room for `count` elements of `datatype` at `buf`.
        let data = unsafe { bytes_mut(buf, len) };
        let dt = DatatypeRef::from_map(map);
        // SAFETY: `data` spans exactly `count` elements of the datatype.
        let mut view = unsafe { MutView::with_count_and_datatype(data, count, &dt) };
        let st = match (source, tag) {
            (MPI_ANY_SOURCE, MPI_ANY_TAG) => c.comm.any_process().receive_into(&mut view),
            (MPI_ANY_SOURCE, t) => c.comm.any_process().receive_into_with_tag(&mut view, t),
            (s, MPI_ANY_TAG) => c.comm.process_at_rank(s).receive_into(&mut view),
            (s, t) => c
                .comm
                .process_at_rank(s)
                .receive_into_with_tag(&mut view, t),
        };
        // SAFETY: as above.
        unsafe {
            fill_status(
                status,
                st.source_rank(),
                st.tag(),
                st.byte_count(),
                st.is_cancelled(),
            )
        };
        Ok(())
    })
}
export!(Recv, recv);

unsafe extern "C" fn get_count(
    status: *const Status,
    datatype: *mut c_void,
    count: *mut c_int,
) -> c_int {
    const CALL: &str = "MPI_Get_count";
    guard(CALL, std::ptr::null_mut(), || {
        if status.is_null() || count.is_null() {
            return Err(CError::new(
                MPI_ERR_ARG,
                CALL,
                "a null status or count pointer",
            ));
        }
        let map = handles::datatype(CALL, datatype)?;
        // SAFETY: checked non-null; the standard's contract: a status a receive filled.
        let st = unsafe { &*status };
        let len = (st.internal[BYTES_LOW] as u32 as u64)
            | ((st.internal[BYTES_HIGH] as u32 as u64) << 32);
        let n = match map.size() as u64 {
            0 => 0,
            size if len.is_multiple_of(size) => c_int::try_from(len / size).unwrap_or(MPI_UNDEFINED),
            _ => MPI_UNDEFINED,
        };
        // SAFETY: checked non-null.
        unsafe { *count = n };
        Ok(())
    })
}
export!(Get_count, get_count);
