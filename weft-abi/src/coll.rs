//! Collectives: barrier, broadcast and the all-reduce of predefined operations, on contiguous
//! predefined datatypes.

use crate::abi::*;
use crate::errors::{guard, CError};
use crate::handles::{self, bytes, bytes_mut, span};
use std::ffi::{c_int, c_void};
use weft::collective::SystemOperation;
use weft::datatype::{DatatypeRef, MutView, View};
use weft::traits::*;

unsafe extern "C" fn barrier(comm: *mut c_void) -> c_int {
    guard("MPI_Barrier", comm, || {
        handles::comm("MPI_Barrier", comm)?.comm.barrier();
        Ok(())
    })
}
export!(Barrier, barrier);

unsafe extern "C" fn bcast(
    buffer: *mut c_void,
    count: c_int,
    datatype: *mut c_void,
    root: c_int,
    comm: *mut c_void,
) -> c_int {
    const CALL: &str = "MPI_Bcast";
    guard(CALL, comm, || {
        let c = handles::comm(CALL, comm)?;
        let map = handles::datatype(CALL, datatype)?;
        let len = span(CALL, map, count)?;
        if !(0..c.comm.size()).contains(&root) {
            return Err(CError::new(
                MPI_ERR_ROOT,
                CALL,
                format!(
                    "the root {root} is outside the communicator (size {})",
                    c.comm.size()
                ),
            ));
        }
        // SAFETY: the standard's contract: `count` elements of `datatype` at `buffer`.
        let data = unsafe { bytes_mut(buffer, len) };
        let dt = DatatypeRef::from_map(map);
        // SAFETY: `data` spans exactly `count` elements.
        let mut view = unsafe { MutView::with_count_and_datatype(data, count, &dt) };
        c.comm.process_at_rank(root).broadcast_into(&mut view);
        Ok(())
    })
}
export!(Bcast, bcast);

/// The predefined operation `op`.
fn operation(call: &'static str, op: *mut c_void) -> Result<SystemOperation, CError> {
    Ok(match op as usize {
        MPI_SUM => SystemOperation::sum(),
        MPI_PROD => SystemOperation::product(),
        MPI_MAX => SystemOperation::max(),
        MPI_MIN => SystemOperation::min(),
        MPI_LAND => SystemOperation::logical_and(),
        MPI_LOR => SystemOperation::logical_or(),
        MPI_LXOR => SystemOperation::logical_xor(),
        MPI_BAND => SystemOperation::bitwise_and(),
        MPI_BOR => SystemOperation::bitwise_or(),
        MPI_BXOR => SystemOperation::bitwise_xor(),
        other => {
            return Err(CError::new(
                MPI_ERR_OP,
                call,
                format!("{other:#x} is not an operation Weft's C ABI supports yet"),
            ))
        }
    })
}

unsafe extern "C" fn allreduce(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    datatype: *mut c_void,
    op: *mut c_void,
    comm: *mut c_void,
) -> c_int {
    const CALL: &str = "MPI_Allreduce";
    guard(CALL, comm, || {
        let c = handles::comm(CALL, comm)?;
        let map = handles::datatype(CALL, datatype)?;
        let len = span(CALL, map, count)?;
        let op = operation(CALL, op)?;
        let dt = DatatypeRef::from_map(map);
        // SAFETY: the standard's contract: `count` elements of `datatype` at `recvbuf`.
        let out = unsafe { bytes_mut(recvbuf, len) };
        // SAFETY: `out` spans exactly `count` elements.
        let mut out = unsafe { MutView::with_count_and_datatype(out, count, &dt) };
        if sendbuf as usize == MPI_IN_PLACE {
            c.comm.all_reduce_in_place(&mut out, op);
        } else {
            // SAFETY: the standard's contract: `count` elements at `sendbuf`, apart from
            // `recvbuf`.
            let input = unsafe { bytes(sendbuf, len) };
            // SAFETY: `input` spans exactly `count` elements.
            let input = unsafe { View::with_count_and_datatype(input, count, &dt) };
            c.comm.all_reduce_into(&input, &mut out, op);
        }
        Ok(())
    })
}
export!(Allreduce, allreduce);
