//! Blocking collectives on intracommunicators: barrier, broadcast, reductions and scans,
//! gather, scatter, allgather, all-to-all and reduce-scatter, with `MPI_IN_PLACE` where the
//! standard allows it.

use crate::c_abi::abi::*;
use crate::c_abi::errors::{guard, CError};
use crate::c_abi::handles::{self, view, view_mut, CCount};
use crate::c_abi::inter::partners;
use crate::c_abi::op::operation;
use crate::c_abi::state::Comm;
use crate::collective::SystemOperation;
use crate::datatype::{Buffer, BufferMut};
use crate::traits::*;
use std::ffi::{c_int, c_void};

pub(crate) fn in_place(buf: *const c_void) -> bool {
    buf as usize == MPI_IN_PLACE
}

/// A member's part in a rooted collective.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Part {
    /// The root (on an intercommunicator, the member that passed MPI_ROOT).
    Root,
    /// Another member (on an intercommunicator, a member of the other group).
    Member,
    /// On an intercommunicator, the rest of the root's group (MPI_PROC_NULL): it takes no
    /// part, and its buffers are not read.
    Idle,
}

/// Where a rooted collective's root is, as Weft names it, and this member's part; the root
/// checked (MPI_ERR_ROOT naming it and the sizes).
pub(crate) fn rooted<'c>(
    call: &'static str,
    root: c_int,
    c: &'c Comm,
) -> Result<(crate::topology::Process<'c>, Part), CError> {
    if let Some(i) = c.comm.as_inter() {
        return match root {
            MPI_ROOT => Ok((i.root(), Part::Root)),
            MPI_PROC_NULL => Ok((i.proc_null(), Part::Idle)),
            r if (0..i.remote_size()).contains(&r) => Ok((c.comm.process_at_rank(r), Part::Member)),
            r => Err(CError::new(
                MPI_ERR_ROOT,
                call,
                format!(
                    "the root {r} on an intercommunicator is neither a rank of the other group \
                     (size {}), MPI_ROOT nor MPI_PROC_NULL",
                    i.remote_size()
                ),
            )),
        };
    }
    let size = c.comm.size();
    if !(0..size).contains(&root) {
        return Err(CError::new(
            MPI_ERR_ROOT,
            call,
            format!("the root {root} is outside the communicator (size {size})"),
        ));
    }
    let part = if c.comm.rank() == root {
        Part::Root
    } else {
        Part::Member
    };
    Ok((c.comm.process_at_rank(root), part))
}

/// An empty buffer, for the side of a collective a member does not use.
pub(crate) fn nothing() -> Result<impl Buffer, CError> {
    let byte = handles::datatype("", MPI_BYTE as *mut c_void)?;
    // SAFETY: no elements: nothing is read.
    unsafe { view("", std::ptr::null(), 0, byte) }
}

/// An empty buffer to receive into.
pub(crate) fn nothing_mut() -> Result<impl BufferMut, CError> {
    let byte = handles::datatype("", MPI_BYTE as *mut c_void)?;
    // SAFETY: no elements: nothing is written.
    unsafe { view_mut("", std::ptr::null_mut(), 0, byte) }
}

/// `count` times the members a block goes to or comes from (an intercommunicator's: the
/// other group's).
fn per_member(call: &'static str, count: impl CCount, c: &Comm) -> Result<i64, CError> {
    handles::count(call, count)?;
    let n = partners(c);
    count.wide().checked_mul(n.into()).ok_or_else(|| {
        CError::new(
            MPI_ERR_COUNT,
            call,
            format!("{count} elements for each of {n} members overflow an MPI_Count"),
        )
    })
}

pub unsafe extern "C" fn barrier(comm: *mut c_void) -> c_int {
    guard("MPI_Barrier", comm, || {
        handles::comm("MPI_Barrier", comm)?.comm.barrier();
        Ok(())
    })
}
export!(Barrier, barrier);

pub unsafe extern "C" fn bcast<C: CCount>(
    buffer: *mut c_void,
    count: C,
    datatype: *mut c_void,
    root: c_int,
    comm: *mut c_void,
) -> c_int {
    #[allow(non_snake_case)]
    let CALL = C::pick("MPI_Bcast", "MPI_Bcast_c");
    guard(CALL, comm, || {
        let c = handles::comm(CALL, comm)?;
        let (at, part) = rooted(CALL, root, c)?;
        if part == Part::Idle {
            at.broadcast_into(&mut nothing_mut()?);
            return Ok(());
        }
        let dt = handles::datatype(CALL, datatype)?;
        // SAFETY: the standard's contract: `count` elements of `datatype` at `buffer`.
        let mut v = unsafe { view_mut(CALL, buffer, count, dt)? };
        at.broadcast_into(&mut v);
        Ok(())
    })
}
export!(Bcast, bcast::<c_int>);
export!(Bcast_c, bcast::<i64>);

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
unsafe fn reduce_everyone<C: CCount>(
    call: &'static str,
    kind: Everyone,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: C,
    datatype: *mut c_void,
    op: *mut c_void,
    comm: *mut c_void,
) -> c_int {
    guard(call, comm, || {
        let c = handles::comm(call, comm)?;
        let dt = handles::datatype(call, datatype)?;
        let op = operation(call, op, datatype)?;
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
        pub unsafe extern "C" fn $fn<C: CCount>(
            sendbuf: *const c_void,
            recvbuf: *mut c_void,
            count: C,
            datatype: *mut c_void,
            op: *mut c_void,
            comm: *mut c_void,
        ) -> c_int {
            // SAFETY: the standard's contract, passed on.
            unsafe {
                reduce_everyone(C::pick(concat!("MPI_", stringify!($name)), concat!("MPI_", stringify!($name), "_c")), Everyone::$kind, sendbuf, recvbuf, count, datatype, op, comm)
            }
        }
    )*};
}

everyone! {
    Allreduce, allreduce, Allreduce;
    Scan, scan, Scan;
    Exscan, exscan, Exscan;
}
export!(Allreduce, allreduce::<c_int>);
export!(Allreduce_c, allreduce::<i64>);
export!(Scan, scan::<c_int>);
export!(Scan_c, scan::<i64>);
export!(Exscan, exscan::<c_int>);
export!(Exscan_c, exscan::<i64>);

#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn reduce<C: CCount>(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: C,
    datatype: *mut c_void,
    op: *mut c_void,
    root: c_int,
    comm: *mut c_void,
) -> c_int {
    #[allow(non_snake_case)]
    let CALL = C::pick("MPI_Reduce", "MPI_Reduce_c");
    guard(CALL, comm, || {
        let c = handles::comm(CALL, comm)?;
        let (at, part) = rooted(CALL, root, c)?;
        if part == Part::Idle {
            at.reduce_into(&nothing()?, SystemOperation::sum());
            return Ok(());
        }
        let dt = handles::datatype(CALL, datatype)?;
        let op = operation(CALL, op, datatype)?;
        if part == Part::Member {
            // SAFETY: the standard's contract: `count` elements at `sendbuf`.
            let input = unsafe { view(CALL, sendbuf, count, dt)? };
            at.reduce_into(&input, op);
            return Ok(());
        }
        // SAFETY: the standard's contract: room for `count` elements at the root's `recvbuf`.
        let mut out = unsafe { view_mut(CALL, recvbuf, count, dt)? };
        if c.comm.test_inter() {
            // The root of an intercommunicator's reduction only receives.
            at.reduce_into_root(&nothing()?, &mut out, op);
        } else if in_place(sendbuf) {
            at.reduce_into_root_in_place(&mut out, op);
        } else {
            // SAFETY: as above.
            let input = unsafe { view(CALL, sendbuf, count, dt)? };
            at.reduce_into_root(&input, &mut out, op);
        }
        Ok(())
    })
}
export!(Reduce, reduce::<c_int>);
export!(Reduce_c, reduce::<i64>);

#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn gather<C: CCount>(
    sendbuf: *const c_void,
    sendcount: C,
    sendtype: *mut c_void,
    recvbuf: *mut c_void,
    recvcount: C,
    recvtype: *mut c_void,
    root: c_int,
    comm: *mut c_void,
) -> c_int {
    #[allow(non_snake_case)]
    let CALL = C::pick("MPI_Gather", "MPI_Gather_c");
    guard(CALL, comm, || {
        let c = handles::comm(CALL, comm)?;
        let (at, part) = rooted(CALL, root, c)?;
        if part == Part::Idle {
            at.gather_into(&nothing()?);
            return Ok(());
        }
        if part == Part::Member {
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
        if c.comm.test_inter() {
            // The root of an intercommunicator's gather only receives.
            at.gather_into_root(&nothing()?, &mut out);
        } else if in_place(sendbuf) {
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
export!(Gather, gather::<c_int>);
export!(Gather_c, gather::<i64>);

#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn scatter<C: CCount>(
    sendbuf: *const c_void,
    sendcount: C,
    sendtype: *mut c_void,
    recvbuf: *mut c_void,
    recvcount: C,
    recvtype: *mut c_void,
    root: c_int,
    comm: *mut c_void,
) -> c_int {
    #[allow(non_snake_case)]
    let CALL = C::pick("MPI_Scatter", "MPI_Scatter_c");
    guard(CALL, comm, || {
        let c = handles::comm(CALL, comm)?;
        let (at, part) = rooted(CALL, root, c)?;
        if part == Part::Idle {
            at.scatter_into(&mut nothing_mut()?);
            return Ok(());
        }
        if part == Part::Member {
            let rdt = handles::datatype(CALL, recvtype)?;
            // SAFETY: the standard's contract: room for `recvcount` elements at `recvbuf`.
            let mut out = unsafe { view_mut(CALL, recvbuf, recvcount, rdt)? };
            at.scatter_into(&mut out);
            return Ok(());
        }
        let sdt = handles::datatype(CALL, sendtype)?;
        let total = per_member(CALL, sendcount, c)?;
        if c.comm.test_inter() {
            // SAFETY: the standard's contract: a block for every member of the other group.
            let input = unsafe { view(CALL, sendbuf, total, sdt)? };
            // The root of an intercommunicator's scatter only sends.
            at.scatter_into_root(&input, &mut nothing_mut()?);
        } else if in_place(recvbuf) {
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
export!(Scatter, scatter::<c_int>);
export!(Scatter_c, scatter::<i64>);

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
unsafe fn exchange<C: CCount>(
    call: &'static str,
    kind: Exchange,
    sendbuf: *const c_void,
    sendcount: C,
    sendtype: *mut c_void,
    recvbuf: *mut c_void,
    recvcount: C,
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
            Exchange::Allgather => sendcount.wide(),
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
        pub unsafe extern "C" fn $fn<C: CCount>(
            sendbuf: *const c_void,
            sendcount: C,
            sendtype: *mut c_void,
            recvbuf: *mut c_void,
            recvcount: C,
            recvtype: *mut c_void,
            comm: *mut c_void,
        ) -> c_int {
            // SAFETY: the standard's contract, passed on.
            unsafe {
                exchange(C::pick(concat!("MPI_", stringify!($name)), concat!("MPI_", stringify!($name), "_c")), Exchange::$kind, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm)
            }
        }
    )*};
}

exchanges! {
    Allgather, allgather, Allgather;
    Alltoall, alltoall, Alltoall;
}
export!(Allgather, allgather::<c_int>);
export!(Allgather_c, allgather::<i64>);
export!(Alltoall, alltoall::<c_int>);
export!(Alltoall_c, alltoall::<i64>);

pub unsafe extern "C" fn reduce_scatter_block<C: CCount>(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    recvcount: C,
    datatype: *mut c_void,
    op: *mut c_void,
    comm: *mut c_void,
) -> c_int {
    #[allow(non_snake_case)]
    let CALL = C::pick("MPI_Reduce_scatter_block", "MPI_Reduce_scatter_block_c");
    guard(CALL, comm, || {
        let c = handles::comm(CALL, comm)?;
        let dt = handles::datatype(CALL, datatype)?;
        let op = operation(CALL, op, datatype)?;
        // The input is a block per member of this group (on an intercommunicator too, where
        // it holds the other group's blocks: the same number of elements).
        let total = recvcount
            .wide()
            .checked_mul(c.comm.size().into())
            .ok_or_else(|| {
                CError::new(
                    MPI_ERR_COUNT,
                    CALL,
                    format!("{recvcount} elements for each member overflow an MPI_Count"),
                )
            })?;
        handles::count(CALL, recvcount)?;
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
export!(Reduce_scatter_block, reduce_scatter_block::<c_int>);
export!(Reduce_scatter_block_c, reduce_scatter_block::<i64>);
