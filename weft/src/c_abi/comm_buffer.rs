//! MPI 5's buffered-send buffers of communicators and sessions: MPI_Comm_attach_buffer,
//! MPI_Session_attach_buffer, their detach (and the `_c` forms), flush and iflush, over the
//! engine's buffers (`engine::comm_buffers`). A buffered send charges its communicator's
//! buffer, else its session's (a communicator made from a session's groups), else the
//! process's. Weft copies buffered messages into memory of its own, so the program's buffer
//! is only remembered (in the handle's object), for the detach to hand back;
//! MPI_BUFFER_AUTOMATIC attaches an unbounded one.

use crate::c_abi::abi::*;
use crate::c_abi::errors::{guard, CError};
use crate::c_abi::handles::{self, CCount};
use crate::c_abi::requests::{self, CRequest};
use crate::c_abi::session::session;
use crate::engine::comm_buffers::{Owner, AUTOMATIC};
use crate::topology::AsCommunicator;
use std::cell::Cell;
use std::ffi::{c_int, c_void};

/// The program's buffer as it attached it (address and size), for the detach.
pub(crate) type Remembered = Cell<Option<(usize, i64)>>;

/// The buffer of a communicator handle (its point-to-point context) or a session handle,
/// with where the program's buffer is remembered.
fn owner_of(
    call: &'static str,
    handle: *mut c_void,
    of_session: bool,
) -> Result<(Owner, &'static Remembered), CError> {
    if of_session {
        let s = session(call, handle)?;
        return Ok((Owner::Session(s.id), &s.buffer));
    }
    let c = handles::comm(call, handle)?;
    Ok((Owner::Comm(c.comm.comm_data().p2p_context()), &c.buffer))
}

/// MPI_{Comm,Session}_attach_buffer{,_c}.
fn attach<C: CCount>(
    call: &'static str,
    handle: *mut c_void,
    of_session: bool,
    buffer: *mut c_void,
    size: C,
) -> c_int {
    guard(call, handle, || {
        let (owner, remembered) = owner_of(call, handle, of_session)?;
        let automatic = buffer as usize == MPI_BUFFER_AUTOMATIC;
        let bytes = if automatic {
            AUTOMATIC
        } else {
            handles::count(call, size)?
        };
        if !crate::runtime::with_call(call, |rt| rt.engine.attach_buffer(owner, bytes)) {
            return Err(CError::new(
                MPI_ERR_BUFFER,
                call,
                "a buffer is attached already (detach it first)",
            ));
        }
        remembered.set(Some((
            buffer as usize,
            if automatic { 0 } else { size.wide() },
        )));
        Ok(())
    })
}

/// MPI_{Comm,Session}_detach_buffer{,_c}: waits until the buffered messages charged to the
/// buffer have gone.
///
/// # Safety
/// The standard's contract for `buffer_addr` and `size`.
unsafe fn detach<C: CCount>(
    call: &'static str,
    handle: *mut c_void,
    of_session: bool,
    buffer_addr: *mut c_void,
    size: *mut C,
) -> c_int {
    guard(call, handle, || {
        let (owner, remembered) = owner_of(call, handle, of_session)?;
        if buffer_addr.is_null() || size.is_null() {
            return Err(CError::new(
                MPI_ERR_ARG,
                call,
                "buffer_addr or size is a null pointer",
            ));
        }
        if crate::runtime::with_call(call, |rt| rt.engine.detach_buffer(owner)).is_none() {
            return Err(CError::new(MPI_ERR_BUFFER, call, "no buffer is attached"));
        }
        let (addr, bytes) = remembered.take().unwrap_or((0, 0));
        // SAFETY: checked non-null; the standard's contract: the address of a pointer.
        unsafe { *buffer_addr.cast::<*mut c_void>() = addr as *mut c_void };
        // Attached by the other form with a size this one cannot hold: the largest it can.
        let n = C::narrow(bytes).unwrap_or_else(|| C::narrow(i32::MAX.into()).expect("fits"));
        // SAFETY: checked non-null; the standard's contract: a pointer to the size.
        unsafe { *size = n };
        Ok(())
    })
}

/// MPI_{Comm,Session}_flush_buffer.
fn flush(call: &'static str, handle: *mut c_void, of_session: bool) -> c_int {
    guard(call, handle, || {
        let (owner, _) = owner_of(call, handle, of_session)?;
        crate::runtime::with_call(call, |rt| rt.engine.flush_buffer_of(owner));
        Ok(())
    })
}

/// MPI_{Comm,Session}_iflush_buffer's operation: complete once the buffered sends charged to
/// the buffer have gone. Holds the handle's value: a communicator or session freed meanwhile
/// ends the wait.
struct Flushing {
    call: &'static str,
    handle: usize,
    of_session: bool,
}

impl Flushing {
    fn owner(&self) -> Option<Owner> {
        owner_of(self.call, self.handle as *mut c_void, self.of_session)
            .ok()
            .map(|(o, _)| o)
    }
}

impl requests::Ongoing for Flushing {
    fn wait(&mut self) {
        if let Some(owner) = self.owner() {
            crate::runtime::with_call(self.call, |rt| rt.engine.flush_buffer_of(owner));
        }
    }
    fn test(&mut self) -> bool {
        self.owner().is_none_or(|owner| {
            crate::runtime::with_call(self.call, |rt| rt.engine.buffer_done(owner))
        })
    }
}

/// MPI_{Comm,Session}_iflush_buffer.
fn iflush(
    call: &'static str,
    handle: *mut c_void,
    of_session: bool,
    request: *mut *mut c_void,
) -> c_int {
    guard(call, handle, || {
        owner_of(call, handle, of_session)?;
        requests::check_out(call, request)?;
        let flushing = Flushing {
            call,
            handle: handle as usize,
            of_session,
        };
        // SAFETY: checked above.
        unsafe { requests::hand_out(request, CRequest::ongoing(flushing)) };
        Ok(())
    })
}

pub unsafe extern "C" fn comm_attach_buffer<C: CCount>(
    comm: *mut c_void,
    buffer: *mut c_void,
    size: C,
) -> c_int {
    let call = C::pick("MPI_Comm_attach_buffer", "MPI_Comm_attach_buffer_c");
    attach(call, comm, false, buffer, size)
}
export!(Comm_attach_buffer, comm_attach_buffer::<c_int>);
export!(Comm_attach_buffer_c, comm_attach_buffer::<i64>);

pub unsafe extern "C" fn session_attach_buffer<C: CCount>(
    session: *mut c_void,
    buffer: *mut c_void,
    size: C,
) -> c_int {
    let call = C::pick("MPI_Session_attach_buffer", "MPI_Session_attach_buffer_c");
    attach(call, session, true, buffer, size)
}
export!(Session_attach_buffer, session_attach_buffer::<c_int>);
export!(Session_attach_buffer_c, session_attach_buffer::<i64>);

pub unsafe extern "C" fn comm_detach_buffer<C: CCount>(
    comm: *mut c_void,
    buffer_addr: *mut c_void,
    size: *mut C,
) -> c_int {
    let call = C::pick("MPI_Comm_detach_buffer", "MPI_Comm_detach_buffer_c");
    // SAFETY: the standard's contract, passed on.
    unsafe { detach(call, comm, false, buffer_addr, size) }
}
export!(Comm_detach_buffer, comm_detach_buffer::<c_int>);
export!(Comm_detach_buffer_c, comm_detach_buffer::<i64>);

pub unsafe extern "C" fn session_detach_buffer<C: CCount>(
    session: *mut c_void,
    buffer_addr: *mut c_void,
    size: *mut C,
) -> c_int {
    let call = C::pick("MPI_Session_detach_buffer", "MPI_Session_detach_buffer_c");
    // SAFETY: the standard's contract, passed on.
    unsafe { detach(call, session, true, buffer_addr, size) }
}
export!(Session_detach_buffer, session_detach_buffer::<c_int>);
export!(Session_detach_buffer_c, session_detach_buffer::<i64>);

pub unsafe extern "C" fn comm_flush_buffer(comm: *mut c_void) -> c_int {
    flush("MPI_Comm_flush_buffer", comm, false)
}
export!(Comm_flush_buffer, comm_flush_buffer);

pub unsafe extern "C" fn session_flush_buffer(session: *mut c_void) -> c_int {
    flush("MPI_Session_flush_buffer", session, true)
}
export!(Session_flush_buffer, session_flush_buffer);

pub unsafe extern "C" fn comm_iflush_buffer(comm: *mut c_void, request: *mut *mut c_void) -> c_int {
    iflush("MPI_Comm_iflush_buffer", comm, false, request)
}
export!(Comm_iflush_buffer, comm_iflush_buffer);

pub unsafe extern "C" fn session_iflush_buffer(
    session: *mut c_void,
    request: *mut *mut c_void,
) -> c_int {
    iflush("MPI_Session_iflush_buffer", session, true, request)
}
export!(Session_iflush_buffer, session_iflush_buffer);
