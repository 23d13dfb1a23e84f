//! Point-to-point: sends in the four modes, receives, probes, blocking and nonblocking, and
//! what a status tells.

use crate::c_abi::abi::*;
use crate::c_abi::errors::{guard, CError};
use crate::c_abi::fast_path;
use crate::c_abi::handles::{self, view, view_mut, CCount};
use crate::c_abi::requests::{self, CRequest};
use crate::c_abi::state::Comm;
use crate::point_to_point::Status as WeftStatus;
use crate::request::StaticScope;
use crate::traits::*;
use std::ffi::{c_int, c_void};

/// The status words Weft keeps in `MPI_internal`: the message's length in bytes (two words,
/// low first) and whether the request was cancelled.
const BYTES_LOW: usize = 0;
const BYTES_HIGH: usize = 1;
const CANCELLED: usize = 2;

/// The standard's `MPI_Status`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct Status {
    pub(crate) source: c_int,
    pub(crate) tag: c_int,
    pub(crate) error: c_int,
    internal: [c_int; 5],
}

impl Status {
    pub(crate) fn new(source: c_int, tag: c_int, len: usize, cancelled: bool) -> Status {
        let len = len as u64;
        let mut internal = [0; 5];
        internal[BYTES_LOW] = len as u32 as c_int;
        internal[BYTES_HIGH] = (len >> 32) as u32 as c_int;
        internal[CANCELLED] = cancelled.into();
        Status {
            source,
            tag,
            error: MPI_SUCCESS,
            internal,
        }
    }

    pub(crate) fn from_weft(st: &WeftStatus) -> Status {
        Status::new(
            st.source_rank(),
            st.tag(),
            st.byte_count(),
            st.is_cancelled(),
        )
    }

    /// The empty status: what a wait on MPI_REQUEST_NULL or an inactive request reports.
    pub(crate) fn empty() -> Status {
        Status::new(MPI_ANY_SOURCE, MPI_ANY_TAG, 0, false)
    }

    /// What an operation on MPI_PROC_NULL reports.
    pub(crate) fn proc_null() -> Status {
        Status::new(MPI_PROC_NULL, MPI_ANY_TAG, 0, false)
    }

    pub(crate) fn bytes(&self) -> u64 {
        (self.internal[BYTES_LOW] as u32 as u64) | ((self.internal[BYTES_HIGH] as u32 as u64) << 32)
    }

    pub(crate) fn cancelled(&self) -> bool {
        self.internal[CANCELLED] != 0
    }

    pub(crate) fn set_bytes(&mut self, len: u64) {
        self.internal[BYTES_LOW] = len as u32 as c_int;
        self.internal[BYTES_HIGH] = (len >> 32) as u32 as c_int;
    }

    pub(crate) fn set_cancelled(&mut self, cancelled: bool) {
        self.internal[CANCELLED] = cancelled.into();
    }

    /// Stores this status at `out` unless it is `MPI_STATUS_IGNORE`.
    ///
    /// # Safety
    /// `out` is null or points to a writable `MPI_Status`.
    pub(crate) unsafe fn store(self, out: *mut Status) {
        if out.is_null() {
            return;
        }
        if self.source == MPI_ANY_SOURCE && self.tag == MPI_ANY_TAG {
            // The empty status is whole, MPI_ERROR = MPI_SUCCESS included (MPI 4.1 §3.7.3).
            // SAFETY: the caller's promise.
            unsafe { *out = self };
            return;
        }
        // Otherwise the MPI_ERROR field is left as it was: only a call that returns
        // MPI_ERR_IN_STATUS sets it (MPI 4.1 §3.2.5; `requests::InStatus`).
        // SAFETY: the caller's promise.
        unsafe {
            let error = (*out).error;
            *out = Status { error, ..self };
        }
    }
}

pub(crate) fn check_tag(call: &'static str, tag: c_int, any: bool) -> Result<(), CError> {
    if tag >= 0 || (any && tag == MPI_ANY_TAG) {
        return Ok(());
    }
    Err(CError::new(
        MPI_ERR_TAG,
        call,
        format!("the tag {tag} is negative"),
    ))
}

pub(crate) fn check_rank(
    call: &'static str,
    what: &str,
    rank: c_int,
    c: &Comm,
    any: bool,
) -> Result<(), CError> {
    // Point-to-point ranks on an intercommunicator name the other group's members.
    let size = crate::c_abi::inter::partners(c);
    if (0..size).contains(&rank) || rank == MPI_PROC_NULL || (any && rank == MPI_ANY_SOURCE) {
        return Ok(());
    }
    Err(CError::new(
        MPI_ERR_RANK,
        call,
        format!("the {what} rank {rank} is outside the communicator (size {size})"),
    ))
}

/// A send's communicator and datatype, its destination and tag checked.
pub(crate) fn check_send(
    call: &'static str,
    datatype: *mut c_void,
    dest: c_int,
    tag: c_int,
    comm: *mut c_void,
) -> Result<(&'static Comm, handles::Dt), CError> {
    let c = handles::comm(call, comm)?;
    let dt = handles::datatype(call, peer_type(datatype, dest))?;
    check_rank(call, "destination", dest, c, false)?;
    check_tag(call, tag, false)?;
    Ok((c, dt))
}

/// The datatype of an operation with `peer`: MPI_DATATYPE_NULL stands for no data with
/// MPI_PROC_NULL (which moves none; MPICH and Open MPI accept it too).
fn peer_type(datatype: *mut c_void, peer: c_int) -> *mut c_void {
    if peer == MPI_PROC_NULL && datatype as usize == MPI_DATATYPE_NULL {
        MPI_BYTE as *mut c_void
    } else {
        datatype
    }
}

/// A receive's communicator and datatype, its source and tag checked (wildcards allowed).
pub(crate) fn check_receive(
    call: &'static str,
    datatype: *mut c_void,
    source: c_int,
    tag: c_int,
    comm: *mut c_void,
) -> Result<(&'static Comm, handles::Dt), CError> {
    let c = handles::comm(call, comm)?;
    let dt = handles::datatype(call, peer_type(datatype, source))?;
    check_rank(call, "source", source, c, true)?;
    check_tag(call, tag, true)?;
    Ok((c, dt))
}

/// The send modes.
#[derive(Clone, Copy)]
pub(crate) enum Mode {
    Standard,
    Synchronous,
    Ready,
    Buffered,
}

/// The C functions of a send in its four modes: each passes its name, its mode and its
/// arguments (the send's six, then `extra`) to `inner`. Counts are of type `count` (`c_int`,
/// or `MPI_Count` for the large-count forms).
macro_rules! send_modes {
    ($inner:ident, [$($p:ident: $ty:ty),*], $count:ty;) => {};
    ($inner:ident, [$($p:ident: $ty:ty),*], $count:ty; $name:ident, $fn:ident, $mode:ident; $($rest:tt)*) => {
        pub unsafe extern "C" fn $fn(
            buf: *const c_void,
            count: $count,
            datatype: *mut c_void,
            dest: c_int,
            tag: c_int,
            comm: *mut c_void,
            $($p: $ty),*
        ) -> c_int {
            // SAFETY: the standard's contract, passed on.
            unsafe {
                $inner(concat!("MPI_", stringify!($name)), Mode::$mode, buf, count, datatype, dest, tag, comm, $($p),*)
            }
        }
        $crate::c_abi::p2p::send_modes! { $inner, [$($p: $ty),*], $count; $($rest)* }
    };
}
pub(crate) use send_modes;

/// A blocking send in `mode`.
///
/// # Safety
/// The standard's contract for `buf`, `count` and `datatype`.
#[inline(never)]
#[allow(clippy::too_many_arguments)]
unsafe fn send_in<C: CCount>(
    call: &'static str,
    mode: Mode,
    buf: *const c_void,
    count: C,
    datatype: *mut c_void,
    dest: c_int,
    tag: c_int,
    comm: *mut c_void,
) -> c_int {
    guard(call, comm, || {
        let c = handles::comm(call, comm)?;
        let dt = handles::datatype(call, peer_type(datatype, dest))?;
        check_rank(call, "destination", dest, c, false)?;
        check_tag(call, tag, false)?;
        // SAFETY: the caller's promise.
        let v = unsafe { view(call, buf, count, dt)? };
        if dest == MPI_PROC_NULL {
            return Ok(());
        }
        let to = c.comm.process_at_rank(dest);
        let map = dt.type_map();
        if matches!(mode, Mode::Standard) && map.is_contiguous() && !map.is_restricted() {
            // Plain bytes: the shortest way in.
            // SAFETY: the caller's promise: `count` contiguous elements at `buf`.
            let bytes = unsafe { handles::bytes(buf, map.size() * count.wide() as usize) };
            return to.try_send_with_tag(bytes, tag).map_err(CError::from_weft);
        }
        match mode {
            Mode::Standard => to.send_with_tag(&v, tag),
            Mode::Synchronous => to.synchronous_send_with_tag(&v, tag),
            // SAFETY: MPI_Rsend's contract: the matching receive is posted.
            Mode::Ready => unsafe { to.ready_send_with_tag(&v, tag) },
            Mode::Buffered => {
                return to
                    .try_buffered_send_with_tag(&v, tag)
                    .map_err(buffered_error);
            }
        }
        Ok(())
    })
}

/// A buffered send's error: no room in the attached buffer is `MPI_ERR_BUFFER` (MPICH's
/// class for it).
fn buffered_error(e: crate::Error) -> CError {
    if e.class == crate::ErrorClass::Resource {
        return CError::new(MPI_ERR_BUFFER, e.call, e.detail);
    }
    CError::from_weft(e)
}

/// `MPI_Send`: the fast path for contiguous predefined data, else the general one.
pub unsafe extern "C" fn send(
    buf: *const c_void,
    count: c_int,
    datatype: *mut c_void,
    dest: c_int,
    tag: c_int,
    comm: *mut c_void,
) -> c_int {
    // SAFETY: the standard's contract, passed on.
    unsafe {
        if let Some(rc) = fast_path::send(buf, count, datatype, dest, tag, comm) {
            return rc;
        }
        send_in(
            "MPI_Send",
            Mode::Standard,
            buf,
            count,
            datatype,
            dest,
            tag,
            comm,
        )
    }
}

send_modes! { send_in, [], c_int;
    Ssend, ssend, Synchronous;
    Rsend, rsend, Ready;
    Bsend, bsend, Buffered;
}
send_modes! { send_in, [], i64;
    Send_c, send_c, Standard;
    Ssend_c, ssend_c, Synchronous;
    Rsend_c, rsend_c, Ready;
    Bsend_c, bsend_c, Buffered;
}
export!(Send, send);
export!(Ssend, ssend);
export!(Rsend, rsend);
export!(Bsend, bsend);
export!(Send_c, send_c);
export!(Ssend_c, ssend_c);
export!(Rsend_c, rsend_c);
export!(Bsend_c, bsend_c);

/// Starts a nonblocking send in `mode`.
///
/// # Safety
/// The standard's contract for `buf`, `count` and `datatype` (valid until the request
/// completes).
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn start_send<C: CCount>(
    call: &'static str,
    mode: Mode,
    buf: *const c_void,
    count: C,
    datatype: *mut c_void,
    dest: c_int,
    tag: c_int,
    comm: *mut c_void,
) -> Result<CRequest, CError> {
    let (c, dt) = check_send(call, datatype, dest, tag, comm)?;
    // SAFETY: the caller's promise: the buffer stays valid until the request completes.
    let v = unsafe { view(call, buf, count, dt)? };
    if dest == MPI_PROC_NULL {
        return Ok(CRequest::done(Status::proc_null()));
    }
    let to = c.comm.process_at_rank(dest);
    Ok(CRequest::send(v, |v| match mode {
        Mode::Standard => to.immediate_send_with_tag(StaticScope, v, tag),
        Mode::Synchronous => to.immediate_synchronous_send_with_tag(StaticScope, v, tag),
        // SAFETY: MPI_Irsend's contract: the matching receive is posted.
        Mode::Ready => unsafe { to.immediate_ready_send_with_tag(StaticScope, v, tag) },
        Mode::Buffered => to.immediate_buffered_send_with_tag(StaticScope, v, tag),
    }))
}

/// A nonblocking send in `mode`, its request handed out at `request`.
///
/// # Safety
/// As for [`start_send`], and `request` is a writable handle slot.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn isend_in<C: CCount>(
    call: &'static str,
    mode: Mode,
    buf: *const c_void,
    count: C,
    datatype: *mut c_void,
    dest: c_int,
    tag: c_int,
    comm: *mut c_void,
    request: *mut *mut c_void,
) -> c_int {
    if let (Mode::Standard, Some(count)) = (mode, C::classic(count)) {
        // SAFETY: the caller's promise, passed on.
        let fast = unsafe { fast_path::isend(buf, count, datatype, dest, tag, comm, request) };
        if let Some(rc) = fast {
            return rc;
        }
    }
    guard(call, comm, || {
        requests::check_out(call, request)?;
        // SAFETY: the caller's promise.
        let r = unsafe { start_send(call, mode, buf, count, datatype, dest, tag, comm)? };
        // SAFETY: checked above.
        unsafe { requests::hand_out(request, r) };
        Ok(())
    })
}

send_modes! { isend_in, [request: *mut *mut c_void], c_int;
    Isend, isend, Standard;
    Issend, issend, Synchronous;
    Irsend, irsend, Ready;
    Ibsend, ibsend, Buffered;
}
send_modes! { isend_in, [request: *mut *mut c_void], i64;
    Isend_c, isend_c, Standard;
    Issend_c, issend_c, Synchronous;
    Irsend_c, irsend_c, Ready;
    Ibsend_c, ibsend_c, Buffered;
}
export!(Isend, isend);
export!(Issend, issend);
export!(Irsend, irsend);
export!(Ibsend, ibsend);
export!(Isend_c, isend_c);
export!(Issend_c, issend_c);
export!(Irsend_c, irsend_c);
export!(Ibsend_c, ibsend_c);

/// Receives into `buf` (blocking); the status.
///
/// # Safety
/// The standard's contract for `buf`, `count` and `datatype`.
unsafe fn receive<C: CCount>(
    call: &'static str,
    buf: *mut c_void,
    count: C,
    datatype: *mut c_void,
    source: c_int,
    tag: c_int,
    c: &Comm,
) -> Result<Status, CError> {
    let dt = handles::datatype(call, peer_type(datatype, source))?;
    check_rank(call, "source", source, c, true)?;
    check_tag(call, tag, true)?;
    // SAFETY: the caller's promise.
    let mut v = unsafe { view_mut(call, buf, count, dt)? };
    if source == MPI_PROC_NULL {
        return Ok(Status::proc_null());
    }
    let map = dt.type_map();
    if source >= 0 && tag >= 0 && map.is_contiguous() && !map.is_restricted() {
        // SAFETY: the caller's promise: room for `count` contiguous elements at `buf`.
        let bytes = unsafe { handles::bytes_mut(buf, map.size() * count.wide() as usize) };
        let st = c
            .comm
            .process_at_rank(source)
            .try_receive_into_with_tag(bytes, tag)
            .map_err(CError::from_weft)?;
        return Ok(Status::from_weft(&st));
    }
    let st = match (source, tag) {
        (MPI_ANY_SOURCE, MPI_ANY_TAG) => c.comm.any_process().receive_into(&mut v),
        (MPI_ANY_SOURCE, t) => c.comm.any_process().receive_into_with_tag(&mut v, t),
        (s, MPI_ANY_TAG) => c.comm.process_at_rank(s).receive_into(&mut v),
        (s, t) => c.comm.process_at_rank(s).receive_into_with_tag(&mut v, t),
    };
    Ok(Status::from_weft(&st))
}

pub unsafe extern "C" fn recv<C: CCount>(
    buf: *mut c_void,
    count: C,
    datatype: *mut c_void,
    source: c_int,
    tag: c_int,
    comm: *mut c_void,
    status: *mut Status,
) -> c_int {
    #[allow(non_snake_case)]
    let CALL = C::pick("MPI_Recv", "MPI_Recv_c");
    if let Some(count) = C::classic(count) {
        // SAFETY: the standard's contract, passed on.
        let fast = unsafe { fast_path::recv(buf, count, datatype, source, tag, comm, status) };
        if let Some(rc) = fast {
            return rc;
        }
    }
    // SAFETY: the standard's contract, passed on.
    unsafe { recv_in(CALL, buf, count, datatype, source, tag, comm, status) }
}

/// `MPI_Recv`'s general path: out of line, so that the fast path's function stays small
/// (fewer registers saved, a smaller frame).
///
/// # Safety
/// The standard's contract for `buf`, `count`, `datatype` and `status`.
#[inline(never)]
#[allow(clippy::too_many_arguments)]
unsafe fn recv_in<C: CCount>(
    call: &'static str,
    buf: *mut c_void,
    count: C,
    datatype: *mut c_void,
    source: c_int,
    tag: c_int,
    comm: *mut c_void,
    status: *mut Status,
) -> c_int {
    guard(call, comm, || {
        let c = handles::comm(call, comm)?;
        // SAFETY: the standard's contract.
        let st = unsafe { receive(call, buf, count, datatype, source, tag, c)? };
        // SAFETY: the standard's contract: MPI_STATUS_IGNORE or a status.
        unsafe { st.store(status) };
        Ok(())
    })
}
export!(Recv, recv::<c_int>);
export!(Recv_c, recv::<i64>);

/// Starts a nonblocking receive.
///
/// # Safety
/// The standard's contract for `buf`, `count` and `datatype` (room until the request
/// completes).
pub(crate) unsafe fn start_recv<C: CCount>(
    call: &'static str,
    buf: *mut c_void,
    count: C,
    datatype: *mut c_void,
    source: c_int,
    tag: c_int,
    comm: *mut c_void,
) -> Result<CRequest, CError> {
    let (c, dt) = check_receive(call, datatype, source, tag, comm)?;
    // SAFETY: the caller's promise.
    let v = unsafe { view_mut(call, buf, count, dt)? };
    if source == MPI_PROC_NULL {
        return Ok(CRequest::done(Status::proc_null()));
    }
    Ok(CRequest::receive(v, |v| post_receive(c, source, tag, v)))
}

/// Posts a receive into `buf` from `source` with `tag` (either may be a wildcard), both
/// checked.
pub(crate) fn post_receive<V: ?Sized + crate::datatype::BufferMut>(
    c: &Comm,
    source: c_int,
    tag: c_int,
    buf: &'static mut V,
) -> crate::request::Request<'static, V, StaticScope> {
    match (source, tag) {
        (MPI_ANY_SOURCE, MPI_ANY_TAG) => c
            .comm
            .any_process()
            .immediate_receive_into(StaticScope, buf),
        (MPI_ANY_SOURCE, t) => {
            c.comm
                .any_process()
                .immediate_receive_into_with_tag(StaticScope, buf, t)
        }
        (s, MPI_ANY_TAG) => c
            .comm
            .process_at_rank(s)
            .immediate_receive_into(StaticScope, buf),
        (s, t) => c
            .comm
            .process_at_rank(s)
            .immediate_receive_into_with_tag(StaticScope, buf, t),
    }
}

pub unsafe extern "C" fn irecv<C: CCount>(
    buf: *mut c_void,
    count: C,
    datatype: *mut c_void,
    source: c_int,
    tag: c_int,
    comm: *mut c_void,
    request: *mut *mut c_void,
) -> c_int {
    #[allow(non_snake_case)]
    let CALL = C::pick("MPI_Irecv", "MPI_Irecv_c");
    if let Some(count) = C::classic(count) {
        // SAFETY: the standard's contract, passed on.
        let fast = unsafe { fast_path::irecv(buf, count, datatype, source, tag, comm, request) };
        if let Some(rc) = fast {
            return rc;
        }
    }
    guard(CALL, comm, || {
        requests::check_out(CALL, request)?;
        // SAFETY: the standard's contract: the buffer stays valid until the request completes.
        let r = unsafe { start_recv(CALL, buf, count, datatype, source, tag, comm)? };
        // SAFETY: checked above.
        unsafe { requests::hand_out(request, r) };
        Ok(())
    })
}
export!(Irecv, irecv::<c_int>);
export!(Irecv_c, irecv::<i64>);

#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn sendrecv<C: CCount>(
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
    status: *mut Status,
) -> c_int {
    #[allow(non_snake_case)]
    let CALL = C::pick("MPI_Sendrecv", "MPI_Sendrecv_c");
    guard(CALL, comm, || {
        let c = handles::comm(CALL, comm)?;
        let sdt = handles::datatype(CALL, sendtype)?;
        check_rank(CALL, "destination", dest, c, false)?;
        check_tag(CALL, sendtag, false)?;
        // SAFETY: the standard's contract for the send buffer.
        let out = unsafe { view(CALL, sendbuf, sendcount, sdt)? };
        // The send goes first, nonblocking, so the two ranks of an exchange do not wait on
        // each other; it completes after the receive.
        crate::request::scope(|scope| {
            let pending = (dest != MPI_PROC_NULL).then(|| {
                c.comm
                    .process_at_rank(dest)
                    .immediate_send_with_tag(scope, &out, sendtag)
            });
            // SAFETY: the standard's contract for the receive buffer, apart from the send's.
            let received =
                unsafe { receive(CALL, recvbuf, recvcount, recvtype, source, recvtag, c) };
            if let Some(p) = pending {
                p.wait();
            }
            // SAFETY: the standard's contract: MPI_STATUS_IGNORE or a status.
            unsafe { received?.store(status) };
            Ok(())
        })
    })
}
export!(Sendrecv, sendrecv::<c_int>);
export!(Sendrecv_c, sendrecv::<i64>);

/// The status of the next message matching (`source`, `tag`): blocking, or `None` when none
/// has arrived (`wait` false).
fn probe_in(
    call: &'static str,
    source: c_int,
    tag: c_int,
    c: &Comm,
    wait: bool,
) -> Result<Option<Status>, CError> {
    check_rank(call, "source", source, c, true)?;
    check_tag(call, tag, true)?;
    if source == MPI_PROC_NULL {
        return Ok(Some(Status::proc_null()));
    }
    let st = match (source, tag, wait) {
        (MPI_ANY_SOURCE, MPI_ANY_TAG, true) => Some(c.comm.any_process().probe()),
        (MPI_ANY_SOURCE, t, true) => Some(c.comm.any_process().probe_with_tag(t)),
        (s, MPI_ANY_TAG, true) => Some(c.comm.process_at_rank(s).probe()),
        (s, t, true) => Some(c.comm.process_at_rank(s).probe_with_tag(t)),
        (MPI_ANY_SOURCE, MPI_ANY_TAG, false) => c.comm.any_process().immediate_probe(),
        (MPI_ANY_SOURCE, t, false) => c.comm.any_process().immediate_probe_with_tag(t),
        (s, MPI_ANY_TAG, false) => c.comm.process_at_rank(s).immediate_probe(),
        (s, t, false) => c.comm.process_at_rank(s).immediate_probe_with_tag(t),
    };
    Ok(st.map(|st| Status::from_weft(&st)))
}

pub unsafe extern "C" fn probe(
    source: c_int,
    tag: c_int,
    comm: *mut c_void,
    status: *mut Status,
) -> c_int {
    const CALL: &str = "MPI_Probe";
    guard(CALL, comm, || {
        let c = handles::comm(CALL, comm)?;
        let st = probe_in(CALL, source, tag, c, true)?.unwrap_or_else(Status::empty);
        // SAFETY: the standard's contract: MPI_STATUS_IGNORE or a status.
        unsafe { st.store(status) };
        Ok(())
    })
}
export!(Probe, probe);

pub unsafe extern "C" fn iprobe(
    source: c_int,
    tag: c_int,
    comm: *mut c_void,
    flag: *mut c_int,
    status: *mut Status,
) -> c_int {
    const CALL: &str = "MPI_Iprobe";
    guard(CALL, comm, || {
        let c = handles::comm(CALL, comm)?;
        if flag.is_null() {
            return Err(CError::new(MPI_ERR_ARG, CALL, "flag is a null pointer"));
        }
        let st = probe_in(CALL, source, tag, c, false)?;
        // SAFETY: checked non-null; the standard's contract for `status`.
        unsafe {
            *flag = st.is_some().into();
            if let Some(st) = st {
                st.store(status);
            }
        }
        Ok(())
    })
}
export!(Iprobe, iprobe);

/// Elements of `datatype` in `status`'s message (`basic`: basic elements, partial ones of
/// the last counted, as MPI_Get_elements; otherwise whole elements, as MPI_Get_count):
/// `MPI_UNDEFINED` when not a whole number.
fn elements(
    call: &'static str,
    status: *const Status,
    datatype: *mut c_void,
    basic: bool,
) -> Result<i64, CError> {
    if status.is_null() {
        return Err(CError::new(
            MPI_ERR_ARG,
            call,
            "status is a null pointer (MPI_STATUS_IGNORE?)",
        ));
    }
    let shape = crate::c_abi::datatype::decode(call, datatype)?.shape();
    let size = shape.size() as u64;
    // SAFETY: checked non-null; the standard's contract: a status a call filled.
    let bytes = unsafe { (*status).bytes() };
    if basic {
        return Ok(shape
            .elements_in(bytes as usize)
            .map_or(MPI_UNDEFINED.into(), |n| n as i64));
    }
    Ok(match size {
        0 => 0,
        s if bytes.is_multiple_of(s) => (bytes / s) as i64,
        _ => MPI_UNDEFINED.into(),
    })
}

/// MPI_Get_count and MPI_Get_elements: elements of `datatype` in `status`'s message.
fn store_count(
    call: &'static str,
    status: *const Status,
    datatype: *mut c_void,
    count: *mut c_int,
    basic: bool,
) -> c_int {
    guard(call, std::ptr::null_mut(), || {
        let n = elements(call, status, datatype, basic)?;
        crate::c_abi::env::put_int(
            call,
            "count",
            count,
            c_int::try_from(n).unwrap_or(MPI_UNDEFINED),
        )
    })
}

/// The `_c` and `_x` forms: an `MPI_Count` out.
fn store_large_count(
    call: &'static str,
    status: *const Status,
    datatype: *mut c_void,
    count: *mut i64,
    basic: bool,
) -> c_int {
    guard(call, std::ptr::null_mut(), || {
        let n = elements(call, status, datatype, basic)?;
        if count.is_null() {
            return Err(CError::new(MPI_ERR_ARG, call, "count is a null pointer"));
        }
        // SAFETY: checked non-null; the standard's contract: a pointer to an MPI_Count.
        unsafe { *count = n };
        Ok(())
    })
}

pub extern "C" fn get_count(
    status: *const Status,
    datatype: *mut c_void,
    count: *mut c_int,
) -> c_int {
    store_count("MPI_Get_count", status, datatype, count, false)
}
export!(Get_count, get_count);

pub extern "C" fn get_count_c(
    status: *const Status,
    datatype: *mut c_void,
    count: *mut i64,
) -> c_int {
    store_large_count("MPI_Get_count_c", status, datatype, count, false)
}
export!(Get_count_c, get_count_c);

pub extern "C" fn get_elements(
    status: *const Status,
    datatype: *mut c_void,
    count: *mut c_int,
) -> c_int {
    store_count("MPI_Get_elements", status, datatype, count, true)
}
export!(Get_elements, get_elements);

pub extern "C" fn get_elements_x(
    status: *const Status,
    datatype: *mut c_void,
    count: *mut i64,
) -> c_int {
    store_large_count("MPI_Get_elements_x", status, datatype, count, true)
}
export!(Get_elements_x, get_elements_x);

pub extern "C" fn get_elements_c(
    status: *const Status,
    datatype: *mut c_void,
    count: *mut i64,
) -> c_int {
    store_large_count("MPI_Get_elements_c", status, datatype, count, true)
}
export!(Get_elements_c, get_elements_c);

pub unsafe extern "C" fn test_cancelled(status: *const Status, flag: *mut c_int) -> c_int {
    const CALL: &str = "MPI_Test_cancelled";
    guard(CALL, std::ptr::null_mut(), || {
        if status.is_null() {
            return Err(CError::new(MPI_ERR_ARG, CALL, "status is a null pointer"));
        }
        // SAFETY: checked non-null.
        let cancelled = unsafe { (*status).cancelled() };
        crate::c_abi::env::put_int(CALL, "flag", flag, cancelled.into())
    })
}
export!(Test_cancelled, test_cancelled);

pub unsafe extern "C" fn buffer_attach<C: CCount>(buffer: *mut c_void, size: C) -> c_int {
    #[allow(non_snake_case)]
    let CALL = C::pick("MPI_Buffer_attach", "MPI_Buffer_attach_c");
    guard(CALL, std::ptr::null_mut(), || {
        let r = crate::c_abi::state::running().ok_or_else(|| CError::not_initialized(CALL))?;
        if r.bsend_buffer.get().is_some() {
            return Err(CError::new(
                MPI_ERR_BUFFER,
                CALL,
                "a buffer is attached already (detach it first)",
            ));
        }
        // MPI_BUFFER_AUTOMATIC: as much as the buffered sends need.
        let bytes = match buffer as usize == MPI_BUFFER_AUTOMATIC {
            true => usize::MAX,
            false => handles::count(CALL, size)?,
        };
        // Weft copies buffered messages into memory of its own of this capacity; the
        // program's buffer is only remembered, for MPI_Buffer_detach to hand back.
        r.universe.borrow_mut().set_buffer_size(bytes);
        r.bsend_buffer.set(Some((buffer as usize, size.wide())));
        Ok(())
    })
}
export!(Buffer_attach, buffer_attach::<c_int>);
export!(Buffer_attach_c, buffer_attach::<i64>);

pub unsafe extern "C" fn buffer_detach<C: CCount>(buffer_addr: *mut c_void, size: *mut C) -> c_int {
    #[allow(non_snake_case)]
    let CALL = C::pick("MPI_Buffer_detach", "MPI_Buffer_detach_c");
    guard(CALL, std::ptr::null_mut(), || {
        let r = crate::c_abi::state::running().ok_or_else(|| CError::not_initialized(CALL))?;
        if buffer_addr.is_null() || size.is_null() {
            return Err(CError::new(
                MPI_ERR_ARG,
                CALL,
                "buffer_addr or size is a null pointer",
            ));
        }
        // Waits until the buffered messages have gone.
        r.universe.borrow_mut().detach_buffer();
        let (addr, bytes) = r.bsend_buffer.take().unwrap_or((0, 0));
        // SAFETY: checked non-null; the standard's contract: the address of a pointer.
        unsafe { *buffer_addr.cast::<*mut c_void>() = addr as *mut c_void };
        // Attached by the other form with a size this one cannot hold: the largest it can.
        let n = C::narrow(bytes).unwrap_or_else(|| C::narrow(i32::MAX.into()).expect("fits"));
        // SAFETY: checked non-null; the standard's contract: a pointer to the size.
        unsafe { *size = n };
        Ok(())
    })
}
export!(Buffer_detach, buffer_detach::<c_int>);
export!(Buffer_detach_c, buffer_detach::<i64>);

pub unsafe extern "C" fn buffer_flush() -> c_int {
    const CALL: &str = "MPI_Buffer_flush";
    guard(CALL, std::ptr::null_mut(), || {
        let r = crate::c_abi::state::running().ok_or_else(|| CError::not_initialized(CALL))?;
        r.universe.borrow().flush_buffer();
        Ok(())
    })
}
export!(Buffer_flush, buffer_flush);

/// MPI_Buffer_iflush's operation: complete once every buffered send has gone.
struct Flushing;

impl requests::Ongoing for Flushing {
    fn wait(&mut self) {
        if let Some(r) = crate::c_abi::state::running() {
            r.universe.borrow().flush_buffer();
        }
    }
    fn test(&mut self) -> bool {
        crate::c_abi::state::running().is_none_or(|r| r.universe.borrow().buffer_flushed())
    }
}

pub unsafe extern "C" fn buffer_iflush(request: *mut *mut c_void) -> c_int {
    const CALL: &str = "MPI_Buffer_iflush";
    guard(CALL, std::ptr::null_mut(), || {
        crate::c_abi::state::running().ok_or_else(|| CError::not_initialized(CALL))?;
        requests::check_out(CALL, request)?;
        // SAFETY: checked above.
        unsafe { requests::hand_out(request, CRequest::ongoing(Flushing)) };
        Ok(())
    })
}
export!(Buffer_iflush, buffer_iflush);
