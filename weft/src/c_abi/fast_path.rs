//! `MPI_Send` and `MPI_Recv` of contiguous predefined data, the calls small-message latency
//! is made of: the handles decoded and the arguments checked once, then straight to the
//! engine through [`crate::front_end`], all inlined into the C function. And `MPI_Isend` and
//! `MPI_Irecv` of such data, which streams of small messages are made of: their requests
//! work on the program's bytes directly (no view to box). Anything else (a
//! derived or restricted type, `MPI_PROC_NULL`, a bad argument, a call before `MPI_Init`)
//! is not taken here: the general path runs it and reports its errors.

use crate::c_abi::abi::*;
use crate::c_abi::errors::{guard, CError};
use crate::c_abi::p2p::{post_receive, Status};
use crate::c_abi::requests::{self, CRequest};
use crate::c_abi::state::Comm;
use crate::c_abi::{datatype, handles, inter};
use crate::point_to_point::TAG_UB;
use crate::request::{Request, StaticScope};
use crate::traits::*;
use std::ffi::{c_int, c_void};

/// The communicator and the byte length of a call whose arguments the fast path takes:
/// a communicator handle that is live, a predefined datatype of plain bytes (no bool or
/// char values to check), a count that is not negative, a rank of the communicator
/// (`any`: or `MPI_ANY_SOURCE`) and a tag in range (`any`: or `MPI_ANY_TAG`).
#[inline(always)]
fn plain(
    comm: *mut c_void,
    datatype: *mut c_void,
    count: c_int,
    rank: c_int,
    tag: c_int,
    any: bool,
) -> Option<(&'static Comm, usize)> {
    let c = handles::comm("", comm).ok()?;
    let size = datatype::predefined::plain_size(datatype as usize)?;
    let tag_ok = (0..=TAG_UB).contains(&tag) || (any && tag == MPI_ANY_TAG);
    let rank_ok = (0..inter::partners(c)).contains(&rank) || (any && rank == MPI_ANY_SOURCE);
    if !(tag_ok && rank_ok && count >= 0) {
        return None;
    }
    Some((c, size * count as usize))
}

/// `MPI_Send`'s fast path: `None` when the general path must run the call.
///
/// # Safety
/// The standard's contract for `buf`, `count` and `datatype`.
#[inline(always)]
pub(crate) unsafe fn send(
    buf: *const c_void,
    count: c_int,
    datatype: *mut c_void,
    dest: c_int,
    tag: c_int,
    comm: *mut c_void,
) -> Option<c_int> {
    const CALL: &str = "MPI_Send";
    let (c, len) = plain(comm, datatype, count, dest, tag, false)?;
    Some(guard(CALL, comm, || {
        // SAFETY: the caller's promise: `count` contiguous elements at `buf`.
        let bytes = unsafe { handles::bytes(buf, len) };
        crate::front_end::send_bytes(CALL, &c.comm, dest, tag, bytes).map_err(CError::from_weft)
    }))
}

/// `MPI_Recv`'s fast path: `None` when the general path must run the call.
///
/// # Safety
/// The standard's contract for `buf`, `count`, `datatype` and `status`.
#[inline(always)]
pub(crate) unsafe fn recv(
    buf: *mut c_void,
    count: c_int,
    datatype: *mut c_void,
    source: c_int,
    tag: c_int,
    comm: *mut c_void,
    status: *mut Status,
) -> Option<c_int> {
    const CALL: &str = "MPI_Recv";
    let (c, len) = plain(comm, datatype, count, source, tag, true)?;
    Some(guard(CALL, comm, || {
        // SAFETY: the caller's promise: room for `count` contiguous elements at `buf`.
        let bytes = unsafe { handles::bytes_mut(buf, len) };
        let from = (source != MPI_ANY_SOURCE).then_some(source);
        let with = (tag != MPI_ANY_TAG).then_some(tag);
        let st = crate::front_end::receive_bytes(CALL, &c.comm, from, with, bytes)
            .map_err(CError::from_weft)?;
        // SAFETY: the standard's contract: MPI_STATUS_IGNORE or a status.
        unsafe { Status::from_weft(&st).store(status) };
        Ok(())
    }))
}

/// `MPI_Isend`'s fast path: `None` when the general path must run the call.
///
/// # Safety
/// The standard's contract for `buf`, `count` and `datatype` (valid until the request
/// completes) and for `request`.
#[inline(always)]
pub(crate) unsafe fn isend(
    buf: *const c_void,
    count: c_int,
    datatype: *mut c_void,
    dest: c_int,
    tag: c_int,
    comm: *mut c_void,
    request: *mut *mut c_void,
) -> Option<c_int> {
    const CALL: &str = "MPI_Isend";
    let (c, len) = plain(comm, datatype, count, dest, tag, false)?;
    Some(start(CALL, comm, request, || {
        // SAFETY: the caller's promise: `count` contiguous elements at `buf`, valid until the
        // request completes (which its handle's owner waits for, or frees it).
        let bytes: &'static [u8] = unsafe { handles::bytes(buf, len) };
        let to = c.comm.process_at_rank(dest);
        to.immediate_send_with_tag(StaticScope, bytes, tag)
    }))
}

/// `MPI_Irecv`'s fast path: `None` when the general path must run the call.
///
/// # Safety
/// The standard's contract for `buf`, `count` and `datatype` (room until the request
/// completes) and for `request`.
#[inline(always)]
pub(crate) unsafe fn irecv(
    buf: *mut c_void,
    count: c_int,
    datatype: *mut c_void,
    source: c_int,
    tag: c_int,
    comm: *mut c_void,
    request: *mut *mut c_void,
) -> Option<c_int> {
    const CALL: &str = "MPI_Irecv";
    let (c, len) = plain(comm, datatype, count, source, tag, true)?;
    Some(start(CALL, comm, request, || {
        // SAFETY: the caller's promise: room for `count` contiguous elements at `buf`, used
        // by nothing else until the request completes.
        let bytes: &'static mut [u8] = unsafe { handles::bytes_mut(buf, len) };
        post_receive(c, source, tag, bytes)
    }))
}

/// Checks the request slot, starts the operation (`post`) and hands its request out there,
/// under `guard`.
#[inline(always)]
fn start(
    call: &'static str,
    comm: *mut c_void,
    request: *mut *mut c_void,
    post: impl FnOnce() -> Request<'static, [u8], StaticScope>,
) -> c_int {
    guard(call, comm, || {
        requests::check_out(call, request)?;
        let r = post();
        // SAFETY: checked non-null above.
        unsafe { requests::hand_out(request, CRequest::bytes(r)) };
        Ok(())
    })
}
