//! Blocking collectives on intracommunicators: barrier, broadcast, reductions and scans,
//! gather, scatter, allgather, all-to-all and reduce-scatter, with `MPI_IN_PLACE` where the
//! standard allows it.

use crate::abi::*;
use crate::errors::{guard, CError};
use crate::handles::{self, view, view_mut};
use crate::state::Comm;
use std::ffi::{c_int, c_void};
use weft::collective::SystemOperation;
use weft::traits::*;

fn in_place(buf: *const c_void) -> bool {
    buf as usize == MPI_IN_PLACE
}

fn check_root(call: &'static str, root: c_int, c: &Comm) -> Result<(), CError> {
    let size = c.comm.size();
    if (0..size).contains(&root) {
        return Ok(());
    }
    Err(CError::new(
        MPI_ERR_ROOT,
        call,
        format!("the root {root} is outside the communicator (size {size})"),
    ))
}

/// `count` times the communicator's size: one block per member.
fn per_member(call: &'static str, count: c_int, c: &Comm) -> Result<c_int, CError> {
    handles::count(call, count)?;
    count.checked_mul(c.comm.size()).ok_or_else(|| {
        CError::new(
            MPI_ERR_COUNT,
            call,
            format!(
                "{count} elements for each of {} members overflow an int",
                c.comm.size()
            ),
        )
    })
}

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
        MPI_MINLOC => SystemOperation::min_loc(),
        MPI_MAXLOC => SystemOperation::max_loc(),
        MPI_OP_NULL => {
            return Err(CError::new(
                MPI_ERR_OP,
                call,
                "the operation is MPI_OP_NULL",
            ))
        }
        other => {
            return Err(CError::new(
                MPI_ERR_OP,
                call,
                format!("{other:#x} is not an operation Weft's C ABI supports yet"),
            ))
        }
    })
}

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
        let dt = handles::datatype(CALL, datatype)?;
        check_root(CALL, root, c)?;
        // SAFETY: the standard's contract: `count` elements of `datatype` at `buffer`.
        let mut v = unsafe { view_mut(CALL, buffer, count, dt)? };
        c.comm.process_at_rank(root).broadcast_into(&mut v);
        Ok(())
    })
}
export!(Bcast, bcast);

/// The reductions that take one send and one receive buffer of `count` elements each on
/// every member.
#[derive(Clone, Copy)]
enum Everyone {
    Allreduce,
    Scan,
    Exscan,
}

/// # Safety
/// The standard's contract for the buffers.
#[allow(clippy::too_many_arguments)]
unsafe fn reduce_everyone(
    call: &'static str,
    kind: Everyone,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    datatype: *mut c_void,
    op: *mut c_void,
    comm: *mut c_void,
) -> c_int {
    guard(call, comm, || {
        let c = handles::comm(call, comm)?;
        let dt = handles::datatype(call, datatype)?;
        let op = operation(call, op)?;
        // SAFETY: the standard's contract: room for `count` elements at `recvbuf`.
        let mut out = unsafe { view_mut(call, recvbuf, count, dt)? };
        if in_place(sendbuf) {
            match kind {
                Everyone::Allreduce => c.comm.all_reduce_in_place(&mut out, op),
                Everyone::Scan => c.comm.scan_in_place(&mut out, op),
                Everyone::Exscan => c.comm.exclusive_scan_in_place(&mut out, op),
            }
        } else {
            // SAFETY: the standard's contract: `count` elements at `sendbuf`.
            let input = unsafe { view(call, sendbuf, count, dt)? };
            match kind {
                Everyone::Allreduce => c.comm.all_reduce_into(&input, &mut out, op),
                Everyone::Scan => c.comm.scan_into(&input, &mut out, op),
                Everyone::Exscan => c.comm.exclusive_scan_into(&input, &mut out, op),
            }
        }
        Ok(())
    })
}

macro_rules! everyone {
    ($($name:ident, $fn:ident, $kind:ident;)*) => {$(
        unsafe extern "C" fn $fn(
            sendbuf: *const c_void,
            recvbuf: *mut c_void,
            count: c_int,
            datatype: *mut c_void,
            op: *mut c_void,
            comm: *mut c_void,
        ) -> c_int {
            // SAFETY: the standard's contract, passed on.
            unsafe {
                reduce_everyone(concat!("MPI_", stringify!($name)), Everyone::$kind, sendbuf, recvbuf, count, datatype, op, comm)
            }
        }
    )*};
}

everyone! {
    Allreduce, allreduce, Allreduce;
    Scan, scan, Scan;
    Exscan, exscan, Exscan;
}
export!(Allreduce, allreduce);
export!(Scan, scan);
export!(Exscan, exscan);

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn reduce(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    datatype: *mut c_void,
    op: *mut c_void,
    root: c_int,
    comm: *mut c_void,
) -> c_int {
    const CALL: &str = "MPI_Reduce";
    guard(CALL, comm, || {
        let c = handles::comm(CALL, comm)?;
        let dt = handles::datatype(CALL, datatype)?;
        let op = operation(CALL, op)?;
        check_root(CALL, root, c)?;
        let at = c.comm.process_at_rank(root);
        if c.comm.rank() != root {
            // SAFETY: the standard's contract: `count` elements at `sendbuf`.
            let input = unsafe { view(CALL, sendbuf, count, dt)? };
            at.reduce_into(&input, op);
            return Ok(());
        }
        // SAFETY: the standard's contract: room for `count` elements at the root's `recvbuf`.
        let mut out = unsafe { view_mut(CALL, recvbuf, count, dt)? };
        if in_place(sendbuf) {
            at.reduce_into_root_in_place(&mut out, op);
        } else {
            // SAFETY: as above.
            let input = unsafe { view(CALL, sendbuf, count, dt)? };
            at.reduce_into_root(&input, &mut out, op);
        }
        Ok(())
    })
}
export!(Reduce, reduce);

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn gather(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: *mut c_void,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: *mut c_void,
    root: c_int,
    comm: *mut c_void,
) -> c_int {
    const CALL: &str = "MPI_Gather";
    guard(CALL, comm, || {
        let c = handles::comm(CALL, comm)?;
        check_root(CALL, root, c)?;
        let at = c.comm.process_at_rank(root);
        if c.comm.rank() != root {
            let sdt = handles::datatype(CALL, sendtype)?;
            // SAFETY: the standard's contract: `sendcount` elements at `sendbuf`.
            let input = unsafe { view(CALL, sendbuf, sendcount, sdt)? };
            at.gather_into(&input);
            return Ok(());
        }
        let rdt = handles::datatype(CALL, recvtype)?;
        let total = per_member(CALL, recvcount, c)?;
        // SAFETY: the standard's contract: room for a block from every member at the root.
        let mut out = unsafe { view_mut(CALL, recvbuf, total, rdt)? };
        if in_place(sendbuf) {
            at.gather_into_root_in_place(&mut out);
        } else {
            let sdt = handles::datatype(CALL, sendtype)?;
            // SAFETY: as above.
            let input = unsafe { view(CALL, sendbuf, sendcount, sdt)? };
            at.gather_into_root(&input, &mut out);
        }
        Ok(())
    })
}
export!(Gather, gather);

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn scatter(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: *mut c_void,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: *mut c_void,
    root: c_int,
    comm: *mut c_void,
) -> c_int {
    const CALL: &str = "MPI_Scatter";
    guard(CALL, comm, || {
        let c = handles::comm(CALL, comm)?;
        check_root(CALL, root, c)?;
        let at = c.comm.process_at_rank(root);
        if c.comm.rank() != root {
            let rdt = handles::datatype(CALL, recvtype)?;
            // SAFETY: the standard's contract: room for `recvcount` elements at `recvbuf`.
            let mut out = unsafe { view_mut(CALL, recvbuf, recvcount, rdt)? };
            at.scatter_into(&mut out);
            return Ok(());
        }
        let sdt = handles::datatype(CALL, sendtype)?;
        let total = per_member(CALL, sendcount, c)?;
        if in_place(recvbuf) {
            // SAFETY: the standard's contract: a block for every member at the root's sendbuf
            // (its own block stays where it is).
            let mut all = unsafe { view_mut(CALL, sendbuf.cast_mut(), total, sdt)? };
            at.scatter_into_root_in_place(&mut all);
        } else {
            // SAFETY: as above, and room for `recvcount` elements at `recvbuf`.
            let input = unsafe { view(CALL, sendbuf, total, sdt)? };
            let rdt = handles::datatype(CALL, recvtype)?;
            // SAFETY: as above.
            let mut out = unsafe { view_mut(CALL, recvbuf, recvcount, rdt)? };
            at.scatter_into_root(&input, &mut out);
        }
        Ok(())
    })
}
export!(Scatter, scatter);

/// The exchanges where every member sends and receives a block per member (allgather,
/// all-to-all).
#[derive(Clone, Copy)]
enum Exchange {
    Allgather,
    Alltoall,
}

/// # Safety
/// The standard's contract for the buffers.
#[allow(clippy::too_many_arguments)]
unsafe fn exchange(
    call: &'static str,
    kind: Exchange,
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: *mut c_void,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: *mut c_void,
    comm: *mut c_void,
) -> c_int {
    guard(call, comm, || {
        let c = handles::comm(call, comm)?;
        let rdt: handles::Dt = handles::datatype(call, recvtype)?;
        let total = per_member(call, recvcount, c)?;
        // SAFETY: the standard's contract: room for a block from every member.
        let mut out = unsafe { view_mut(call, recvbuf, total, rdt)? };
        if in_place(sendbuf) {
            match kind {
                Exchange::Allgather => c.comm.all_gather_in_place(&mut out),
                Exchange::Alltoall => c.comm.all_to_all_in_place(&mut out),
            }
            return Ok(());
        }
        let sdt = handles::datatype(call, sendtype)?;
        let sent = match kind {
            Exchange::Allgather => sendcount,
            Exchange::Alltoall => per_member(call, sendcount, c)?,
        };
        // SAFETY: the standard's contract: the blocks to send at `sendbuf`.
        let input = unsafe { view(call, sendbuf, sent, sdt)? };
        match kind {
            Exchange::Allgather => c.comm.all_gather_into(&input, &mut out),
            Exchange::Alltoall => c.comm.all_to_all_into(&input, &mut out),
        }
        Ok(())
    })
}

macro_rules! exchanges {
    ($($name:ident, $fn:ident, $kind:ident;)*) => {$(
        #[allow(clippy::too_many_arguments)]
        unsafe extern "C" fn $fn(
            sendbuf: *const c_void,
            sendcount: c_int,
            sendtype: *mut c_void,
            recvbuf: *mut c_void,
            recvcount: c_int,
            recvtype: *mut c_void,
            comm: *mut c_void,
        ) -> c_int {
            // SAFETY: the standard's contract, passed on.
            unsafe {
                exchange(concat!("MPI_", stringify!($name)), Exchange::$kind, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm)
            }
        }
    )*};
}

exchanges! {
    Allgather, allgather, Allgather;
    Alltoall, alltoall, Alltoall;
}
export!(Allgather, allgather);
export!(Alltoall, alltoall);

unsafe extern "C" fn reduce_scatter_block(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    recvcount: c_int,
    datatype: *mut c_void,
    op: *mut c_void,
    comm: *mut c_void,
) -> c_int {
    const CALL: &str = "MPI_Reduce_scatter_block";
    guard(CALL, comm, || {
        let c = handles::comm(CALL, comm)?;
        let dt = handles::datatype(CALL, datatype)?;
        let op = operation(CALL, op)?;
        let total = per_member(CALL, recvcount, c)?;
        if in_place(sendbuf) {
            // SAFETY: the standard's contract: in place, the input (a block per member) is at
            // `recvbuf`, and the result goes to its first block.
            let mut all = unsafe { view_mut(CALL, recvbuf, total, dt)? };
            c.comm.reduce_scatter_block_in_place(&mut all, op);
        } else {
            // SAFETY: the standard's contract for both buffers.
            let input = unsafe { view(CALL, sendbuf, total, dt)? };
            // SAFETY: as above.
            let mut out = unsafe { view_mut(CALL, recvbuf, recvcount, dt)? };
            c.comm.reduce_scatter_block_into(&input, &mut out, op);
        }
        Ok(())
    })
}
export!(Reduce_scatter_block, reduce_scatter_block);
