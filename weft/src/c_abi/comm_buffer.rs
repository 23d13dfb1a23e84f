//! MPI 5's buffered-send buffers of communicators: MPI_Comm_attach_buffer, _detach_buffer
//! (and their `_c` forms), _flush_buffer and _iflush_buffer, over Weft's
//! `SimpleCommunicator::attach_buffer` and the others. Weft copies buffered messages into
//! memory of its own, so the program's buffer is only remembered (in the handle's `Comm`),
//! for the detach to hand back; MPI_BUFFER_AUTOMATIC attaches an unbounded one.

use crate::c_abi::abi::*;
use crate::c_abi::errors::{guard, CError};
use crate::c_abi::handles::{self, CCount};
use crate::c_abi::requests::{self, CRequest};
use std::ffi::{c_int, c_void};

pub unsafe extern "C" fn comm_attach_buffer<C: CCount>(
    comm: *mut c_void,
    buffer: *mut c_void,
    size: C,
) -> c_int {
    #[allow(non_snake_case)]
    let CALL = C::pick("MPI_Comm_attach_buffer", "MPI_Comm_attach_buffer_c");
    guard(CALL, comm, || {
        let c = handles::comm(CALL, comm)?;
        let automatic = buffer as usize == MPI_BUFFER_AUTOMATIC;
        let bytes = if automatic {
            None
        } else {
            Some(handles::count(CALL, size)?)
        };
        c.comm
            .attach_buffer(bytes)
            .map_err(|e| CError::new(MPI_ERR_BUFFER, CALL, e.detail))?;
        c.buffer.set(Some((
            buffer as usize,
            if automatic { 0 } else { size.wide() },
        )));
        Ok(())
    })
}
export!(Comm_attach_buffer, comm_attach_buffer::<c_int>);
export!(Comm_attach_buffer_c, comm_attach_buffer::<i64>);

pub unsafe extern "C" fn comm_detach_buffer<C: CCount>(
    comm: *mut c_void,
    buffer_addr: *mut c_void,
    size: *mut C,
) -> c_int {
    #[allow(non_snake_case)]
    let CALL = C::pick("MPI_Comm_detach_buffer", "MPI_Comm_detach_buffer_c");
    guard(CALL, comm, || {
        let c = handles::comm(CALL, comm)?;
        if buffer_addr.is_null() || size.is_null() {
            return Err(CError::new(
                MPI_ERR_ARG,
                CALL,
                "buffer_addr or size is a null pointer",
            ));
        }
        // Waits until the communicator's buffered messages have gone.
        if c.comm.detach_buffer().is_none() {
            return Err(CError::new(
                MPI_ERR_BUFFER,
                CALL,
                "the communicator has no buffer attached",
            ));
        }
        let (addr, bytes) = c.buffer.take().unwrap_or((0, 0));
        // SAFETY: checked non-null; the standard's contract: the address of a pointer.
        unsafe { *buffer_addr.cast::<*mut c_void>() = addr as *mut c_void };
        // Attached by the other form with a size this one cannot hold: the largest it can.
        let n = C::narrow(bytes).unwrap_or_else(|| C::narrow(i32::MAX.into()).expect("fits"));
        // SAFETY: checked non-null; the standard's contract: a pointer to the size.
        unsafe { *size = n };
        Ok(())
    })
}
export!(Comm_detach_buffer, comm_detach_buffer::<c_int>);
export!(Comm_detach_buffer_c, comm_detach_buffer::<i64>);

pub unsafe extern "C" fn comm_flush_buffer(comm: *mut c_void) -> c_int {
    const CALL: &str = "MPI_Comm_flush_buffer";
    guard(CALL, comm, || {
        handles::comm(CALL, comm)?.comm.flush_buffer();
        Ok(())
    })
}
export!(Comm_flush_buffer, comm_flush_buffer);

/// MPI_Comm_iflush_buffer's operation: complete once the communicator's buffered sends have
/// gone. Holds the handle's value: a communicator freed meanwhile ends the wait.
struct Flushing(usize);

impl Flushing {
    fn comm(&self) -> Option<&'static crate::c_abi::state::Comm> {
        handles::comm("MPI_Comm_iflush_buffer", self.0 as *mut c_void).ok()
    }
}

impl requests::Ongoing for Flushing {
    fn wait(&mut self) {
        if let Some(c) = self.comm() {
            c.comm.flush_buffer();
        }
    }
    fn test(&mut self) -> bool {
        self.comm().is_none_or(|c| c.comm.buffer_flushed())
    }
}

pub unsafe extern "C" fn comm_iflush_buffer(comm: *mut c_void, request: *mut *mut c_void) -> c_int {
    const CALL: &str = "MPI_Comm_iflush_buffer";
    guard(CALL, comm, || {
        handles::comm(CALL, comm)?;
        requests::check_out(CALL, request)?;
        // SAFETY: checked above.
        unsafe { requests::hand_out(request, CRequest::ongoing(Flushing(comm as usize))) };
        Ok(())
    })
}
export!(Comm_iflush_buffer, comm_iflush_buffer);
