//! The nonblocking collectives (`MPI_Ibarrier` ... `MPI_Iexscan`) and the persistent ones
//! (`MPI_Barrier_init` ... `MPI_Exscan_init`), on intra- and intercommunicators.
//!
//! Each collective has one `start` function here that decodes its arguments and starts Weft's
//! immediate collective, its buffers pinned in the request (`requests::Pinned`) until it
//! completes. The nonblocking form calls it once; the persistent form takes the
//! communicator's next collective sequence number at initialization, keeps the arguments,
//! and calls it at each `MPI_Start` under that number (`ReservedSequence`), so starts match
//! by initialization order, as MPI 4.1 §6.13 asks, whatever order members start them in.

use crate::c_abi::abi::*;
use crate::c_abi::coll::{in_place, nothing, nothing_mut, rooted, Part};
use crate::c_abi::coll_v::array;
use crate::c_abi::errors::{guard, CError};
use crate::c_abi::handles::{self, ints, view, view_mut, CCount};
use crate::c_abi::inter::partners;
use crate::c_abi::op::operation;
use crate::c_abi::requests::{check_out, hand_out, CRequest, Pinned};
use crate::collective::{Part as WPart, PartMut as WPartMut};
use crate::datatype::{Partition, PartitionMut};
use crate::request::{Request, StaticScope};
use crate::traits::*;
use std::ffi::{c_int, c_void};

pub(crate) type Started = Result<CRequest, CError>;

/// Pins `keep` and starts `start` on it: the request and what it borrows, as one C request.
pub(crate) fn hold<K: 'static, D: ?Sized + 'static>(
    keep: K,
    start: impl FnOnce(&'static mut K) -> Request<'static, D, StaticScope>,
) -> CRequest {
    let k = Pinned::new(keep);
    // SAFETY: lent to the request, which goes into the same C request as `k` and is dropped
    // before it; nothing else borrows `k`.
    let r = start(unsafe { k.lend() });
    CRequest::collective(r, k)
}

/// `count` elements times the members a block goes to or comes from.
fn blocks(call: &'static str, count: impl CCount, n: c_int) -> Result<i64, CError> {
    handles::count(call, count)?;
    count.wide().checked_mul(n.into()).ok_or_else(|| {
        CError::new(
            MPI_ERR_COUNT,
            call,
            format!("{count} elements for each of {n} members overflow an MPI_Count"),
        )
    })
}

/// Elements from a buffer's start to the end of its farthest part; every count checked.
pub(crate) fn span(
    call: &'static str,
    counts: &[c_int],
    displs: &[c_int],
) -> Result<c_int, CError> {
    let mut end: i64 = 0;
    for (i, (&c, &d)) in counts.iter().zip(displs).enumerate() {
        if c < 0 {
            return Err(CError::new(
                MPI_ERR_COUNT,
                call,
                format!("the count for member {i} is {c}; it must not be negative"),
            ));
        }
        if c > 0 {
            end = end.max(i64::from(d) + i64::from(c));
        }
    }
    c_int::try_from(end).map_err(|_| {
        CError::new(
            MPI_ERR_COUNT,
            call,
            format!("the parts reach element {end}, past what an int counts"),
        )
    })
}

/// The displacements of parts laid back to back.
fn packed_displs(counts: &[c_int]) -> Vec<c_int> {
    counts
        .iter()
        .scan(0, |at, &c| Some(std::mem::replace(at, *at + c)))
        .collect()
}

unsafe fn barrier(call: &'static str, comm: *mut c_void) -> Started {
    let c = handles::comm(call, comm)?;
    Ok(CRequest::collective(c.comm.immediate_barrier(), ()))
}

unsafe fn bcast<C: CCount>(
    call: &'static str,
    buffer: *mut c_void,
    count: C,
    datatype: *mut c_void,
    root: c_int,
    comm: *mut c_void,
) -> Started {
    let c = handles::comm(call, comm)?;
    let (at, part) = rooted(call, root, c)?;
    if part == Part::Idle {
        return Ok(hold(nothing_mut()?, |b| {
            at.immediate_broadcast_into(StaticScope, b)
        }));
    }
    let dt = handles::datatype(call, datatype)?;
    // SAFETY: the standard's contract: `count` elements at `buffer` until completion.
    let v = unsafe { view_mut(call, buffer, count, dt)? };
    Ok(hold(v, |b| at.immediate_broadcast_into(StaticScope, b)))
}

/// The reductions with a send and a receive buffer of `count` elements on every member.
#[derive(Clone, Copy)]
enum Everyone {
    Allreduce,
    Scan,
    Exscan,
}

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
) -> Started {
    let c = &handles::comm(call, comm)?.comm;
    let dt = handles::datatype(call, datatype)?;
    let o = operation(call, op, datatype)?;
    // SAFETY: the standard's contract: room for `count` elements until completion.
    let out = unsafe { view_mut(call, recvbuf, count, dt)? };
    if in_place(sendbuf) {
        return Ok(hold(out, |b| match kind {
            Everyone::Allreduce => c.immediate_all_reduce_in_place(StaticScope, b, o),
            Everyone::Scan => c.immediate_scan_in_place(StaticScope, b, o),
            Everyone::Exscan => c.immediate_exclusive_scan_in_place(StaticScope, b, o),
        }));
    }
    // SAFETY: the standard's contract: `count` elements at `sendbuf` until completion.
    let input = unsafe { view(call, sendbuf, count, dt)? };
    Ok(hold((input, out), |(s, r)| match kind {
        Everyone::Allreduce => c.immediate_all_reduce_into(StaticScope, &*s, r, o),
        Everyone::Scan => c.immediate_scan_into(StaticScope, &*s, r, o),
        Everyone::Exscan => c.immediate_exclusive_scan_into(StaticScope, &*s, r, o),
    }))
}

unsafe fn allreduce<C: CCount>(
    call: &'static str,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: C,
    datatype: *mut c_void,
    op: *mut c_void,
    comm: *mut c_void,
) -> Started {
    let k = Everyone::Allreduce;
    // SAFETY: passed on.
    unsafe { reduce_everyone(call, k, sendbuf, recvbuf, count, datatype, op, comm) }
}

unsafe fn scan<C: CCount>(
    call: &'static str,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: C,
    datatype: *mut c_void,
    op: *mut c_void,
    comm: *mut c_void,
) -> Started {
    let k = Everyone::Scan;
    // SAFETY: passed on.
    unsafe { reduce_everyone(call, k, sendbuf, recvbuf, count, datatype, op, comm) }
}

unsafe fn exscan<C: CCount>(
    call: &'static str,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: C,
    datatype: *mut c_void,
    op: *mut c_void,
    comm: *mut c_void,
) -> Started {
    let k = Everyone::Exscan;
    // SAFETY: passed on.
    unsafe { reduce_everyone(call, k, sendbuf, recvbuf, count, datatype, op, comm) }
}

#[allow(clippy::too_many_arguments)]
unsafe fn reduce<C: CCount>(
    call: &'static str,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: C,
    datatype: *mut c_void,
    op: *mut c_void,
    root: c_int,
    comm: *mut c_void,
) -> Started {
    let c = handles::comm(call, comm)?;
    let (at, part) = rooted(call, root, c)?;
    if part == Part::Idle {
        let o = crate::collective::SystemOperation::sum();
        return Ok(hold(nothing()?, |s| {
            at.immediate_reduce_into(StaticScope, &*s, o)
        }));
    }
    let dt = handles::datatype(call, datatype)?;
    let o = operation(call, op, datatype)?;
    if part == Part::Member {
        // SAFETY: the standard's contract: `count` elements at `sendbuf` until completion.
        let input = unsafe { view(call, sendbuf, count, dt)? };
        return Ok(hold(input, |s| {
            at.immediate_reduce_into(StaticScope, &*s, o)
        }));
    }
    // SAFETY: the standard's contract: room for `count` elements at the root's `recvbuf`.
    let out = unsafe { view_mut(call, recvbuf, count, dt)? };
    if c.comm.test_inter() {
        return Ok(hold((nothing()?, out), |(s, r)| {
            at.immediate_reduce_into_root(StaticScope, &*s, r, o)
        }));
    }
    if in_place(sendbuf) {
        return Ok(hold(out, |r| {
            at.immediate_reduce_into_root_in_place(StaticScope, r, o)
        }));
    }
    // SAFETY: as above, for the root's input.
    let input = unsafe { view(call, sendbuf, count, dt)? };
    Ok(hold((input, out), |(s, r)| {
        at.immediate_reduce_into_root(StaticScope, &*s, r, o)
    }))
}

#[allow(clippy::too_many_arguments)]
unsafe fn gather<C: CCount>(
    call: &'static str,
    sendbuf: *const c_void,
    sendcount: C,
    sendtype: *mut c_void,
    recvbuf: *mut c_void,
    recvcount: C,
    recvtype: *mut c_void,
    root: c_int,
    comm: *mut c_void,
) -> Started {
    let c = handles::comm(call, comm)?;
    let (at, part) = rooted(call, root, c)?;
    match part {
        Part::Idle => {
            return Ok(hold(nothing()?, |s| {
                at.immediate_gather_into(StaticScope, &*s)
            }));
        }
        Part::Member => {
            let sdt = handles::datatype(call, sendtype)?;
            // SAFETY: the standard's contract: `sendcount` elements until completion.
            let input = unsafe { view(call, sendbuf, sendcount, sdt)? };
            return Ok(hold(input, |s| at.immediate_gather_into(StaticScope, &*s)));
        }
        Part::Root => {}
    }
    let rdt = handles::datatype(call, recvtype)?;
    let total = blocks(call, recvcount, partners(c))?;
    // SAFETY: the standard's contract: room for a block from every member at the root.
    let out = unsafe { view_mut(call, recvbuf, total, rdt)? };
    if c.comm.test_inter() {
        return Ok(hold((nothing()?, out), |(s, r)| {
            at.immediate_gather_into_root(StaticScope, &*s, r)
        }));
    }
    if in_place(sendbuf) {
        return Ok(hold(out, |r| {
            at.immediate_gather_into_root_in_place(StaticScope, r)
        }));
    }
    let sdt = handles::datatype(call, sendtype)?;
    // SAFETY: as above, the root's own block.
    let input = unsafe { view(call, sendbuf, sendcount, sdt)? };
    Ok(hold((input, out), |(s, r)| {
        at.immediate_gather_into_root(StaticScope, &*s, r)
    }))
}

#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn gatherv<C: CCount, D: CCount>(
    call: &'static str,
    sendbuf: *const c_void,
    sendcount: C,
    sendtype: *mut c_void,
    recvbuf: *mut c_void,
    recvcounts: *const C,
    displs: *const D,
    recvtype: *mut c_void,
    root: c_int,
    comm: *mut c_void,
) -> Started {
    let c = handles::comm(call, comm)?;
    let (at, part) = rooted(call, root, c)?;
    match part {
        Part::Idle => {
            return Ok(hold(nothing()?, |s| {
                at.immediate_gather_varcount_into(StaticScope, &*s)
            }));
        }
        Part::Member => {
            let sdt = handles::datatype(call, sendtype)?;
            // SAFETY: the standard's contract: `sendcount` elements until completion.
            let input = unsafe { view(call, sendbuf, sendcount, sdt)? };
            return Ok(hold(input, |s| {
                at.immediate_gather_varcount_into(StaticScope, &*s)
            }));
        }
        Part::Root => {}
    }
    let n = partners(c) as usize;
    // SAFETY: the standard's contract: a count and a displacement per member.
    let counts = unsafe { ints(call, "recvcounts", recvcounts, n)? };
    // SAFETY: as above.
    let displs = unsafe { ints(call, "displs", displs, n)? };
    let rdt = handles::datatype(call, recvtype)?;
    // SAFETY: the standard's contract: every part fits the root's `recvbuf`.
    let out = Pinned::new(unsafe { view_mut(call, recvbuf, span(call, &counts, &displs)?, rdt)? });
    // SAFETY: lent to the request, which the C request drops before `out` (held with it).
    let parts = PartitionMut::new(unsafe { out.lend() }, counts, displs);
    if c.comm.test_inter() {
        return Ok(hold((parts, nothing()?, out), |(p, s, _)| {
            at.immediate_gather_varcount_into_root(StaticScope, &*s, p)
        }));
    }
    if in_place(sendbuf) {
        return Ok(hold((parts, out), |(p, _)| {
            at.immediate_gather_varcount_into_root_in_place(StaticScope, p)
        }));
    }
    let sdt = handles::datatype(call, sendtype)?;
    // SAFETY: the standard's contract: the root's own block until completion.
    let input = unsafe { view(call, sendbuf, sendcount, sdt)? };
    Ok(hold((parts, input, out), |(p, s, _)| {
        at.immediate_gather_varcount_into_root(StaticScope, &*s, p)
    }))
}

#[allow(clippy::too_many_arguments)]
unsafe fn scatter<C: CCount>(
    call: &'static str,
    sendbuf: *const c_void,
    sendcount: C,
    sendtype: *mut c_void,
    recvbuf: *mut c_void,
    recvcount: C,
    recvtype: *mut c_void,
    root: c_int,
    comm: *mut c_void,
) -> Started {
    let c = handles::comm(call, comm)?;
    let (at, part) = rooted(call, root, c)?;
    match part {
        Part::Idle => {
            return Ok(hold(nothing_mut()?, |r| {
                at.immediate_scatter_into(StaticScope, r)
            }));
        }
        Part::Member => {
            let rdt = handles::datatype(call, recvtype)?;
            // SAFETY: the standard's contract: room for `recvcount` elements.
            let out = unsafe { view_mut(call, recvbuf, recvcount, rdt)? };
            return Ok(hold(out, |r| at.immediate_scatter_into(StaticScope, r)));
        }
        Part::Root => {}
    }
    let sdt = handles::datatype(call, sendtype)?;
    let total = blocks(call, sendcount, partners(c))?;
    if in_place(recvbuf) && !c.comm.test_inter() {
        // SAFETY: the standard's contract: a block for every member at `sendbuf`.
        let all = unsafe { view_mut(call, sendbuf.cast_mut(), total, sdt)? };
        return Ok(hold(all, |b| {
            at.immediate_scatter_into_root_in_place(StaticScope, b)
        }));
    }
    // SAFETY: as above.
    let input = unsafe { view(call, sendbuf, total, sdt)? };
    if c.comm.test_inter() {
        return Ok(hold((input, nothing_mut()?), |(s, r)| {
            at.immediate_scatter_into_root(StaticScope, &*s, r)
        }));
    }
    let rdt = handles::datatype(call, recvtype)?;
    // SAFETY: the standard's contract: room for `recvcount` elements.
    let out = unsafe { view_mut(call, recvbuf, recvcount, rdt)? };
    Ok(hold((input, out), |(s, r)| {
        at.immediate_scatter_into_root(StaticScope, &*s, r)
    }))
}

#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn scatterv<C: CCount, D: CCount>(
    call: &'static str,
    sendbuf: *const c_void,
    sendcounts: *const C,
    displs: *const D,
    sendtype: *mut c_void,
    recvbuf: *mut c_void,
    recvcount: C,
    recvtype: *mut c_void,
    root: c_int,
    comm: *mut c_void,
) -> Started {
    let c = handles::comm(call, comm)?;
    let (at, part) = rooted(call, root, c)?;
    match part {
        Part::Idle => {
            return Ok(hold(nothing_mut()?, |r| {
                at.immediate_scatter_varcount_into(StaticScope, r)
            }));
        }
        Part::Member => {
            let rdt = handles::datatype(call, recvtype)?;
            // SAFETY: the standard's contract: room for `recvcount` elements.
            let out = unsafe { view_mut(call, recvbuf, recvcount, rdt)? };
            return Ok(hold(out, |r| {
                at.immediate_scatter_varcount_into(StaticScope, r)
            }));
        }
        Part::Root => {}
    }
    let n = partners(c) as usize;
    // SAFETY: the standard's contract: a count and a displacement per member.
    let counts = unsafe { ints(call, "sendcounts", sendcounts, n)? };
    // SAFETY: as above.
    let displs = unsafe { ints(call, "displs", displs, n)? };
    let sdt = handles::datatype(call, sendtype)?;
    let len = span(call, &counts, &displs)?;
    if in_place(recvbuf) && !c.comm.test_inter() {
        // SAFETY: the standard's contract: every part lies in `sendbuf`.
        let all = Pinned::new(unsafe { view_mut(call, sendbuf.cast_mut(), len, sdt)? });
        // SAFETY: lent to the request, dropped before `all` (held with it).
        let parts = PartitionMut::new(unsafe { all.lend() }, counts, displs);
        return Ok(hold((parts, all), |(p, _)| {
            at.immediate_scatter_varcount_into_root_in_place(StaticScope, p)
        }));
    }
    // SAFETY: the standard's contract: every part lies in `sendbuf`.
    let input = Pinned::new(unsafe { view(call, sendbuf, len, sdt)? });
    // SAFETY: lent to the request, dropped before `input` (held with it).
    let parts = Partition::new(&*unsafe { input.lend() }, counts, displs);
    if c.comm.test_inter() {
        return Ok(hold((parts, nothing_mut()?, input), |(p, r, _)| {
            at.immediate_scatter_varcount_into_root(StaticScope, &*p, r)
        }));
    }
    let rdt = handles::datatype(call, recvtype)?;
    // SAFETY: the standard's contract: room for `recvcount` elements.
    let out = unsafe { view_mut(call, recvbuf, recvcount, rdt)? };
    Ok(hold((parts, out, input), |(p, r, _)| {
        at.immediate_scatter_varcount_into_root(StaticScope, &*p, r)
    }))
}

/// The exchanges where every member sends and receives a block per member.
#[derive(Clone, Copy)]
enum Exchange {
    Allgather,
    Alltoall,
}

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
) -> Started {
    let c = handles::comm(call, comm)?;
    let n = partners(c);
    let rdt = handles::datatype(call, recvtype)?;
    // SAFETY: the standard's contract: room for a block from every member.
    let out = unsafe { view_mut(call, recvbuf, blocks(call, recvcount, n)?, rdt)? };
    let c = &c.comm;
    if in_place(sendbuf) {
        return Ok(hold(out, |b| match kind {
            Exchange::Allgather => c.immediate_all_gather_in_place(StaticScope, b),
            Exchange::Alltoall => c.immediate_all_to_all_in_place(StaticScope, b),
        }));
    }
    let sdt = handles::datatype(call, sendtype)?;
    let sent = match kind {
        Exchange::Allgather => sendcount.wide(),
        Exchange::Alltoall => blocks(call, sendcount, n)?,
    };
    // SAFETY: the standard's contract: the blocks to send at `sendbuf` until completion.
    let input = unsafe { view(call, sendbuf, sent, sdt)? };
    Ok(hold((input, out), |(s, r)| match kind {
        Exchange::Allgather => c.immediate_all_gather_into(StaticScope, &*s, r),
        Exchange::Alltoall => c.immediate_all_to_all_into(StaticScope, &*s, r),
    }))
}

#[allow(clippy::too_many_arguments)]
unsafe fn allgather<C: CCount>(
    call: &'static str,
    sendbuf: *const c_void,
    sendcount: C,
    sendtype: *mut c_void,
    recvbuf: *mut c_void,
    recvcount: C,
    recvtype: *mut c_void,
    comm: *mut c_void,
) -> Started {
    let (k, s, sc, st) = (Exchange::Allgather, sendbuf, sendcount, sendtype);
    // SAFETY: passed on.
    unsafe { exchange(call, k, s, sc, st, recvbuf, recvcount, recvtype, comm) }
}

#[allow(clippy::too_many_arguments)]
unsafe fn alltoall<C: CCount>(
    call: &'static str,
    sendbuf: *const c_void,
    sendcount: C,
    sendtype: *mut c_void,
    recvbuf: *mut c_void,
    recvcount: C,
    recvtype: *mut c_void,
    comm: *mut c_void,
) -> Started {
    let (k, s, sc, st) = (Exchange::Alltoall, sendbuf, sendcount, sendtype);
    // SAFETY: passed on.
    unsafe { exchange(call, k, s, sc, st, recvbuf, recvcount, recvtype, comm) }
}

#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn allgatherv<C: CCount, D: CCount>(
    call: &'static str,
    sendbuf: *const c_void,
    sendcount: C,
    sendtype: *mut c_void,
    recvbuf: *mut c_void,
    recvcounts: *const C,
    displs: *const D,
    recvtype: *mut c_void,
    comm: *mut c_void,
) -> Started {
    let c = handles::comm(call, comm)?;
    let n = partners(c) as usize;
    // SAFETY: the standard's contract: a count and a displacement per member.
    let counts = unsafe { ints(call, "recvcounts", recvcounts, n)? };
    // SAFETY: as above.
    let displs = unsafe { ints(call, "displs", displs, n)? };
    let rdt = handles::datatype(call, recvtype)?;
    // SAFETY: the standard's contract: every part fits `recvbuf`.
    let out = Pinned::new(unsafe { view_mut(call, recvbuf, span(call, &counts, &displs)?, rdt)? });
    // SAFETY: lent to the request, dropped before `out` (held with it).
    let parts = PartitionMut::new(unsafe { out.lend() }, counts, displs);
    let c = &c.comm;
    if in_place(sendbuf) {
        return Ok(hold((parts, out), |(p, _)| {
            c.immediate_all_gather_varcount_in_place(StaticScope, p)
        }));
    }
    let sdt = handles::datatype(call, sendtype)?;
    // SAFETY: the standard's contract: `sendcount` elements until completion.
    let input = unsafe { view(call, sendbuf, sendcount, sdt)? };
    Ok(hold((parts, input, out), |(p, s, _)| {
        c.immediate_all_gather_varcount_into(StaticScope, &*s, p)
    }))
}

#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn alltoallv<C: CCount, D: CCount>(
    call: &'static str,
    sendbuf: *const c_void,
    sendcounts: *const C,
    sdispls: *const D,
    sendtype: *mut c_void,
    recvbuf: *mut c_void,
    recvcounts: *const C,
    rdispls: *const D,
    recvtype: *mut c_void,
    comm: *mut c_void,
) -> Started {
    let c = handles::comm(call, comm)?;
    let n = partners(c) as usize;
    // SAFETY: the standard's contract: a count and a displacement per member.
    let rcounts = unsafe { ints(call, "recvcounts", recvcounts, n)? };
    // SAFETY: as above.
    let rdispls = unsafe { ints(call, "rdispls", rdispls, n)? };
    let rdt = handles::datatype(call, recvtype)?;
    // SAFETY: the standard's contract: every part fits `recvbuf`.
    let out =
        Pinned::new(unsafe { view_mut(call, recvbuf, span(call, &rcounts, &rdispls)?, rdt)? });
    // SAFETY: lent to the request, dropped before `out` (held with it).
    let rparts = PartitionMut::new(unsafe { out.lend() }, rcounts, rdispls);
    let c = &c.comm;
    if in_place(sendbuf) {
        return Ok(hold((rparts, out), |(p, _)| {
            c.immediate_all_to_all_varcount_in_place(StaticScope, p)
        }));
    }
    // SAFETY: as above, for the send side.
    let scounts = unsafe { ints(call, "sendcounts", sendcounts, n)? };
    // SAFETY: as above.
    let sdispls = unsafe { ints(call, "sdispls", sdispls, n)? };
    let sdt = handles::datatype(call, sendtype)?;
    // SAFETY: the standard's contract: every part lies in `sendbuf`.
    let input = Pinned::new(unsafe { view(call, sendbuf, span(call, &scounts, &sdispls)?, sdt)? });
    // SAFETY: lent to the request, dropped before `input` (held with it).
    let sparts = Partition::new(&*unsafe { input.lend() }, scounts, sdispls);
    Ok(hold((rparts, sparts, out, input), |(r, s, _, _)| {
        c.immediate_all_to_all_varcount_into(StaticScope, &*s, r)
    }))
}

#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn alltoallw<C: CCount, D: CCount>(
    call: &'static str,
    sendbuf: *const c_void,
    sendcounts: *const C,
    sdispls: *const D,
    sendtypes: *const *mut c_void,
    recvbuf: *mut c_void,
    recvcounts: *const C,
    rdispls: *const D,
    recvtypes: *const *mut c_void,
    comm: *mut c_void,
) -> Started {
    let c = handles::comm(call, comm)?;
    let n = partners(c) as usize;
    // SAFETY: the standard's contract: a count, a byte displacement and a datatype per
    // member, for each side.
    let (rcounts, rdispls, rtypes) = unsafe {
        (
            array(call, "recvcounts", recvcounts, n)?,
            array(call, "rdispls", rdispls, n)?,
            array(call, "recvtypes", recvtypes, n)?,
        )
    };
    let mut outs = Vec::with_capacity(n);
    for i in 0..n {
        let dt = handles::datatype(call, rtypes[i])?;
        // SAFETY: the standard's contract: part i lies at its byte displacement, with room
        // for `rcounts[i]` elements, until completion.
        outs.push(unsafe {
            view_mut(
                call,
                recvbuf.byte_offset(rdispls[i].wide() as isize),
                rcounts[i],
                dt,
            )?
        });
    }
    let outs = Pinned::new(outs);
    // SAFETY: lent to the request, dropped before `outs` (held with it).
    let rparts: Vec<WPartMut<'static>> = unsafe { outs.lend() }
        .iter_mut()
        .map(WPartMut::new)
        .collect();
    let c = &c.comm;
    if in_place(sendbuf) {
        return Ok(hold((rparts, outs), |(r, _)| {
            c.immediate_all_to_all_w_in_place(StaticScope, &mut r[..])
        }));
    }
    // SAFETY: as above, for the send side (packed when the call starts).
    let (scounts, sdispls, stypes) = unsafe {
        (
            array(call, "sendcounts", sendcounts, n)?,
            array(call, "sdispls", sdispls, n)?,
            array(call, "sendtypes", sendtypes, n)?,
        )
    };
    let mut ins = Vec::with_capacity(n);
    for i in 0..n {
        let dt = handles::datatype(call, stypes[i])?;
        // SAFETY: the standard's contract: part i lies at its byte displacement.
        ins.push(unsafe {
            view(
                call,
                sendbuf.byte_offset(sdispls[i].wide() as isize),
                scounts[i],
                dt,
            )?
        });
    }
    let sparts: Vec<WPart<'_>> = ins.iter().map(WPart::new).collect();
    Ok(hold((rparts, outs), |(r, _)| {
        c.immediate_all_to_all_w_into(StaticScope, &sparts, &mut r[..])
    }))
}

unsafe fn reduce_scatter_block<C: CCount>(
    call: &'static str,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    recvcount: C,
    datatype: *mut c_void,
    op: *mut c_void,
    comm: *mut c_void,
) -> Started {
    let c = &handles::comm(call, comm)?.comm;
    let dt = handles::datatype(call, datatype)?;
    let o = operation(call, op, datatype)?;
    // A block per member of this group (see the blocking form).
    let total = blocks(call, recvcount, c.size())?;
    if in_place(sendbuf) {
        // SAFETY: the standard's contract: the input at `recvbuf` until completion.
        let all = unsafe { view_mut(call, recvbuf, total, dt)? };
        return Ok(hold(all, |b| {
            c.immediate_reduce_scatter_block_in_place(StaticScope, b, o)
        }));
    }
    // SAFETY: the standard's contract for both buffers.
    let input = unsafe { view(call, sendbuf, total, dt)? };
    // SAFETY: as above.
    let out = unsafe { view_mut(call, recvbuf, recvcount, dt)? };
    Ok(hold((input, out), |(s, r)| {
        c.immediate_reduce_scatter_block_into(StaticScope, &*s, r, o)
    }))
}

pub(crate) unsafe fn reduce_scatter<C: CCount>(
    call: &'static str,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    recvcounts: *const C,
    datatype: *mut c_void,
    op: *mut c_void,
    comm: *mut c_void,
) -> Started {
    let c = handles::comm(call, comm)?;
    let dt = handles::datatype(call, datatype)?;
    let o = operation(call, op, datatype)?;
    let n = c.comm.size() as usize;
    // SAFETY: the standard's contract: a count per member.
    let counts = unsafe { ints(call, "recvcounts", recvcounts, n)? };
    let mine = counts[c.comm.rank() as usize];
    let counts = if c.comm.test_inter() {
        // The input is cut by the other group's counts (see the blocking form).
        let mut theirs = vec![0; partners(c) as usize];
        c.comm.all_gather_into(&mine, &mut theirs[..]);
        theirs
    } else {
        counts
    };
    let displs = packed_displs(&counts);
    let total = span(call, &counts, &displs)?;
    let c = &c.comm;
    if in_place(sendbuf) {
        // SAFETY: the standard's contract: the input at `recvbuf` until completion.
        let all = Pinned::new(unsafe { view_mut(call, recvbuf, total, dt)? });
        // SAFETY: lent to the request, dropped before `all` (held with it).
        let parts = PartitionMut::new(unsafe { all.lend() }, counts, displs);
        return Ok(hold((parts, all), |(p, _)| {
            c.immediate_reduce_scatter_varcount_in_place(StaticScope, p, o)
        }));
    }
    // SAFETY: the standard's contract: the input at `sendbuf` until completion.
    let input = Pinned::new(unsafe { view(call, sendbuf, total, dt)? });
    // SAFETY: lent to the request, dropped before `input` (held with it).
    let parts = Partition::new(&*unsafe { input.lend() }, counts, displs);
    // SAFETY: the standard's contract: room for this member's part at `recvbuf`.
    let out = unsafe { view_mut(call, recvbuf, mine, dt)? };
    Ok(hold((parts, out, input), |(p, r, _)| {
        c.immediate_reduce_scatter_varcount_into(StaticScope, &*p, r, o)
    }))
}

/// An array argument of a persistent collective, copied at initialization (or kept as it
/// was passed when this member does not read it).
pub(crate) struct Kept<T> {
    copy: Option<Box<[T]>>,
    passed: *const T,
}

impl<T: Copy> Kept<T> {
    /// # Safety
    /// `p` is null or holds `n` elements.
    pub(crate) unsafe fn copy(p: *const T, n: usize) -> Kept<T> {
        let copy = (!p.is_null() && n > 0)
            // SAFETY: the caller's promise.
            .then(|| unsafe { std::slice::from_raw_parts(p, n) }.into());
        Kept { copy, passed: p }
    }

    /// The array to pass on: the copy, or the pointer as passed.
    pub(crate) fn ptr(&self) -> *const T {
        self.copy.as_ref().map_or(self.passed, |c| c.as_ptr())
    }
}

/// How many members a collective on `comm` exchanges with (the length of its arrays).
fn members(call: &'static str, comm: *mut c_void) -> Result<usize, CError> {
    Ok(partners(handles::comm(call, comm)?) as usize)
}

/// The members of `comm`'s own group (MPI_Reduce_scatter's `recvcounts`).
fn local_members(call: &'static str, comm: *mut c_void) -> Result<usize, CError> {
    Ok(handles::comm(call, comm)?.comm.size() as usize)
}

/// The length of an array only the root reads: the members at the root, 0 elsewhere.
fn at_root(call: &'static str, comm: *mut c_void, root: c_int) -> Result<usize, CError> {
    let c = handles::comm(call, comm)?;
    Ok(match rooted(call, root, c)?.1 {
        Part::Root => partners(c) as usize,
        Part::Member | Part::Idle => 0,
    })
}

/// The nonblocking form (`$name::now`) and the persistent form (`$name::init`) of the
/// collective whose `start` function is `$start`, with the standard's arguments `$arg: $ty`
/// (`$comm` names the communicator among them). The persistent form copies the arrays named
/// in braces (`$kept: $len`, their lengths as this member reads them) at initialization:
/// MPICH and Open MPI do, and programs (mpi4py among them) free them after the init call.
/// Exported below, one `export!` line each (the build script reads those lines).
macro_rules! nonblocking {
    ($($name:ident, $init:ident, $start:ident, $comm:ident,
       { $($kept:ident: $len:expr),* }, ($($arg:ident: $ty:ty),*);)*) => {$(
        #[allow(non_snake_case)]
        pub(crate) mod $name {
            use super::*;

            #[allow(clippy::too_many_arguments)]
            pub unsafe extern "C" fn now($($arg: $ty,)* request: *mut *mut c_void) -> c_int {
                const CALL: &str = concat!("MPI_", stringify!($name));
                guard(CALL, $comm, || {
                    check_out(CALL, request)?;
                    // SAFETY: the standard's contract for the arguments, passed on.
                    let r = unsafe { $start(CALL, $($arg),*)? };
                    // SAFETY: checked non-null.
                    unsafe { hand_out(request, r) };
                    Ok(())
                })
            }

            #[allow(clippy::too_many_arguments)]
            pub unsafe extern "C" fn init(
                $($arg: $ty,)*
                info: *mut c_void,
                request: *mut *mut c_void,
            ) -> c_int {
                const CALL: &str = concat!("MPI_", stringify!($init));
                guard(CALL, $comm, || {
                    check_out(CALL, request)?;
                    if info as usize != MPI_INFO_NULL {
                        crate::c_abi::info::info(CALL, info)?;
                    }
                    // Starts match by initialization order: each runs under the sequence
                    // number taken now.
                    let c = handles::comm(CALL, $comm)?;
                    // SAFETY: the standard's contract: each array holds what this member
                    // reads of it (`$len` elements) during the call.
                    $(let $kept = unsafe { $crate::c_abi::icoll::Kept::copy($kept, $len?) };)*
                    let seq = crate::collective::ReservedSequence::take(CALL, &c.comm);
                    let r = CRequest::persistent(move || {
                        $(let $kept = $kept.ptr();)*
                        seq.replay(CALL, || {
                            // SAFETY: the standard's contract: the buffers (and handles) stay
                            // valid while the request lives; the arrays are our copies.
                            unsafe { $start(CALL, $($arg),*) }
                        })
                    });
                    // SAFETY: checked non-null.
                    unsafe { hand_out(request, r) };
                    Ok(())
                })
            }
        }
    )*};
}

pub(crate) use nonblocking;

nonblocking! {
    Ibarrier, Barrier_init, barrier, comm, {}, (comm: *mut c_void);
    Ibcast, Bcast_init, bcast, comm, {},
        (buffer: *mut c_void, count: c_int, datatype: *mut c_void, root: c_int, comm: *mut c_void);
    Iallreduce, Allreduce_init, allreduce, comm, {},
        (sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: *mut c_void,
         op: *mut c_void, comm: *mut c_void);
    Iscan, Scan_init, scan, comm, {},
        (sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: *mut c_void,
         op: *mut c_void, comm: *mut c_void);
    Iexscan, Exscan_init, exscan, comm, {},
        (sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: *mut c_void,
         op: *mut c_void, comm: *mut c_void);
    Ireduce, Reduce_init, reduce, comm, {},
        (sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: *mut c_void,
         op: *mut c_void, root: c_int, comm: *mut c_void);
    Igather, Gather_init, gather, comm, {},
        (sendbuf: *const c_void, sendcount: c_int, sendtype: *mut c_void, recvbuf: *mut c_void,
         recvcount: c_int, recvtype: *mut c_void, root: c_int, comm: *mut c_void);
    Igatherv, Gatherv_init, gatherv, comm, { recvcounts: at_root(CALL, comm, root), displs: at_root(CALL, comm, root) },
        (sendbuf: *const c_void, sendcount: c_int, sendtype: *mut c_void, recvbuf: *mut c_void,
         recvcounts: *const c_int, displs: *const c_int, recvtype: *mut c_void, root: c_int,
         comm: *mut c_void);
    Iscatter, Scatter_init, scatter, comm, {},
        (sendbuf: *const c_void, sendcount: c_int, sendtype: *mut c_void, recvbuf: *mut c_void,
         recvcount: c_int, recvtype: *mut c_void, root: c_int, comm: *mut c_void);
    Iscatterv, Scatterv_init, scatterv, comm, { sendcounts: at_root(CALL, comm, root), displs: at_root(CALL, comm, root) },
        (sendbuf: *const c_void, sendcounts: *const c_int, displs: *const c_int,
         sendtype: *mut c_void, recvbuf: *mut c_void, recvcount: c_int, recvtype: *mut c_void,
         root: c_int, comm: *mut c_void);
    Iallgather, Allgather_init, allgather, comm, {},
        (sendbuf: *const c_void, sendcount: c_int, sendtype: *mut c_void, recvbuf: *mut c_void,
         recvcount: c_int, recvtype: *mut c_void, comm: *mut c_void);
    Ialltoall, Alltoall_init, alltoall, comm, {},
        (sendbuf: *const c_void, sendcount: c_int, sendtype: *mut c_void, recvbuf: *mut c_void,
         recvcount: c_int, recvtype: *mut c_void, comm: *mut c_void);
    Iallgatherv, Allgatherv_init, allgatherv, comm, { recvcounts: members(CALL, comm), displs: members(CALL, comm) },
        (sendbuf: *const c_void, sendcount: c_int, sendtype: *mut c_void, recvbuf: *mut c_void,
         recvcounts: *const c_int, displs: *const c_int, recvtype: *mut c_void,
         comm: *mut c_void);
    Ialltoallv, Alltoallv_init, alltoallv, comm, { sendcounts: members(CALL, comm), sdispls: members(CALL, comm), recvcounts: members(CALL, comm), rdispls: members(CALL, comm) },
        (sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int,
         sendtype: *mut c_void, recvbuf: *mut c_void, recvcounts: *const c_int,
         rdispls: *const c_int, recvtype: *mut c_void, comm: *mut c_void);
    Ialltoallw, Alltoallw_init, alltoallw, comm, { sendcounts: members(CALL, comm), sdispls: members(CALL, comm), sendtypes: members(CALL, comm), recvcounts: members(CALL, comm), rdispls: members(CALL, comm), recvtypes: members(CALL, comm) },
        (sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int,
         sendtypes: *const *mut c_void, recvbuf: *mut c_void, recvcounts: *const c_int,
         rdispls: *const c_int, recvtypes: *const *mut c_void, comm: *mut c_void);
    Ireduce_scatter_block, Reduce_scatter_block_init, reduce_scatter_block, comm, {},
        (sendbuf: *const c_void, recvbuf: *mut c_void, recvcount: c_int, datatype: *mut c_void,
         op: *mut c_void, comm: *mut c_void);
    Ireduce_scatter, Reduce_scatter_init, reduce_scatter, comm, { recvcounts: local_members(CALL, comm) },
        (sendbuf: *const c_void, recvbuf: *mut c_void, recvcounts: *const c_int,
         datatype: *mut c_void, op: *mut c_void, comm: *mut c_void);
}

// The large-count forms of those with scalar counts: the same start functions, with counts of
// type MPI_Count.
nonblocking! {
    Ibcast_c, Bcast_init_c, bcast, comm, {},
        (buffer: *mut c_void, count: i64, datatype: *mut c_void, root: c_int, comm: *mut c_void);
    Iallreduce_c, Allreduce_init_c, allreduce, comm, {},
        (sendbuf: *const c_void, recvbuf: *mut c_void, count: i64, datatype: *mut c_void,
         op: *mut c_void, comm: *mut c_void);
    Iscan_c, Scan_init_c, scan, comm, {},
        (sendbuf: *const c_void, recvbuf: *mut c_void, count: i64, datatype: *mut c_void,
         op: *mut c_void, comm: *mut c_void);
    Iexscan_c, Exscan_init_c, exscan, comm, {},
        (sendbuf: *const c_void, recvbuf: *mut c_void, count: i64, datatype: *mut c_void,
         op: *mut c_void, comm: *mut c_void);
    Ireduce_c, Reduce_init_c, reduce, comm, {},
        (sendbuf: *const c_void, recvbuf: *mut c_void, count: i64, datatype: *mut c_void,
         op: *mut c_void, root: c_int, comm: *mut c_void);
    Igather_c, Gather_init_c, gather, comm, {},
        (sendbuf: *const c_void, sendcount: i64, sendtype: *mut c_void, recvbuf: *mut c_void,
         recvcount: i64, recvtype: *mut c_void, root: c_int, comm: *mut c_void);
    Iscatter_c, Scatter_init_c, scatter, comm, {},
        (sendbuf: *const c_void, sendcount: i64, sendtype: *mut c_void, recvbuf: *mut c_void,
         recvcount: i64, recvtype: *mut c_void, root: c_int, comm: *mut c_void);
    Iallgather_c, Allgather_init_c, allgather, comm, {},
        (sendbuf: *const c_void, sendcount: i64, sendtype: *mut c_void, recvbuf: *mut c_void,
         recvcount: i64, recvtype: *mut c_void, comm: *mut c_void);
    Ialltoall_c, Alltoall_init_c, alltoall, comm, {},
        (sendbuf: *const c_void, sendcount: i64, sendtype: *mut c_void, recvbuf: *mut c_void,
         recvcount: i64, recvtype: *mut c_void, comm: *mut c_void);
    Ireduce_scatter_block_c, Reduce_scatter_block_init_c, reduce_scatter_block, comm, {},
        (sendbuf: *const c_void, recvbuf: *mut c_void, recvcount: i64, datatype: *mut c_void,
         op: *mut c_void, comm: *mut c_void);
    Igatherv_c, Gatherv_init_c, gatherv, comm, { recvcounts: at_root(CALL, comm, root), displs: at_root(CALL, comm, root) },
        (sendbuf: *const c_void, sendcount: i64, sendtype: *mut c_void, recvbuf: *mut c_void,
         recvcounts: *const i64, displs: *const isize, recvtype: *mut c_void, root: c_int,
         comm: *mut c_void);
    Iscatterv_c, Scatterv_init_c, scatterv, comm, { sendcounts: at_root(CALL, comm, root), displs: at_root(CALL, comm, root) },
        (sendbuf: *const c_void, sendcounts: *const i64, displs: *const isize,
         sendtype: *mut c_void, recvbuf: *mut c_void, recvcount: i64, recvtype: *mut c_void,
         root: c_int, comm: *mut c_void);
    Iallgatherv_c, Allgatherv_init_c, allgatherv, comm, { recvcounts: members(CALL, comm), displs: members(CALL, comm) },
        (sendbuf: *const c_void, sendcount: i64, sendtype: *mut c_void, recvbuf: *mut c_void,
         recvcounts: *const i64, displs: *const isize, recvtype: *mut c_void,
         comm: *mut c_void);
    Ialltoallv_c, Alltoallv_init_c, alltoallv, comm, { sendcounts: members(CALL, comm), sdispls: members(CALL, comm), recvcounts: members(CALL, comm), rdispls: members(CALL, comm) },
        (sendbuf: *const c_void, sendcounts: *const i64, sdispls: *const isize,
         sendtype: *mut c_void, recvbuf: *mut c_void, recvcounts: *const i64,
         rdispls: *const isize, recvtype: *mut c_void, comm: *mut c_void);
    Ialltoallw_c, Alltoallw_init_c, alltoallw, comm, { sendcounts: members(CALL, comm), sdispls: members(CALL, comm), sendtypes: members(CALL, comm), recvcounts: members(CALL, comm), rdispls: members(CALL, comm), recvtypes: members(CALL, comm) },
        (sendbuf: *const c_void, sendcounts: *const i64, sdispls: *const isize,
         sendtypes: *const *mut c_void, recvbuf: *mut c_void, recvcounts: *const i64,
         rdispls: *const isize, recvtypes: *const *mut c_void, comm: *mut c_void);
    Ireduce_scatter_c, Reduce_scatter_init_c, reduce_scatter, comm, { recvcounts: local_members(CALL, comm) },
        (sendbuf: *const c_void, recvbuf: *mut c_void, recvcounts: *const i64,
         datatype: *mut c_void, op: *mut c_void, comm: *mut c_void);
}

export!(Ibcast_c, Ibcast_c::now);
export!(Bcast_init_c, Ibcast_c::init);
export!(Iallreduce_c, Iallreduce_c::now);
export!(Allreduce_init_c, Iallreduce_c::init);
export!(Iscan_c, Iscan_c::now);
export!(Scan_init_c, Iscan_c::init);
export!(Iexscan_c, Iexscan_c::now);
export!(Exscan_init_c, Iexscan_c::init);
export!(Ireduce_c, Ireduce_c::now);
export!(Reduce_init_c, Ireduce_c::init);
export!(Igather_c, Igather_c::now);
export!(Gather_init_c, Igather_c::init);
export!(Iscatter_c, Iscatter_c::now);
export!(Scatter_init_c, Iscatter_c::init);
export!(Iallgather_c, Iallgather_c::now);
export!(Allgather_init_c, Iallgather_c::init);
export!(Ialltoall_c, Ialltoall_c::now);
export!(Alltoall_init_c, Ialltoall_c::init);
export!(Ireduce_scatter_block_c, Ireduce_scatter_block_c::now);
export!(Reduce_scatter_block_init_c, Ireduce_scatter_block_c::init);
export!(Igatherv_c, Igatherv_c::now);
export!(Gatherv_init_c, Igatherv_c::init);
export!(Iscatterv_c, Iscatterv_c::now);
export!(Scatterv_init_c, Iscatterv_c::init);
export!(Iallgatherv_c, Iallgatherv_c::now);
export!(Allgatherv_init_c, Iallgatherv_c::init);
export!(Ialltoallv_c, Ialltoallv_c::now);
export!(Alltoallv_init_c, Ialltoallv_c::init);
export!(Ialltoallw_c, Ialltoallw_c::now);
export!(Alltoallw_init_c, Ialltoallw_c::init);
export!(Ireduce_scatter_c, Ireduce_scatter_c::now);
export!(Reduce_scatter_init_c, Ireduce_scatter_c::init);

export!(Ibarrier, Ibarrier::now);
export!(Barrier_init, Ibarrier::init);
export!(Ibcast, Ibcast::now);
export!(Bcast_init, Ibcast::init);
export!(Iallreduce, Iallreduce::now);
export!(Allreduce_init, Iallreduce::init);
export!(Iscan, Iscan::now);
export!(Scan_init, Iscan::init);
export!(Iexscan, Iexscan::now);
export!(Exscan_init, Iexscan::init);
export!(Ireduce, Ireduce::now);
export!(Reduce_init, Ireduce::init);
export!(Igather, Igather::now);
export!(Gather_init, Igather::init);
export!(Igatherv, Igatherv::now);
export!(Gatherv_init, Igatherv::init);
export!(Iscatter, Iscatter::now);
export!(Scatter_init, Iscatter::init);
export!(Iscatterv, Iscatterv::now);
export!(Scatterv_init, Iscatterv::init);
export!(Iallgather, Iallgather::now);
export!(Allgather_init, Iallgather::init);
export!(Ialltoall, Ialltoall::now);
export!(Alltoall_init, Ialltoall::init);
export!(Iallgatherv, Iallgatherv::now);
export!(Allgatherv_init, Iallgatherv::init);
export!(Ialltoallv, Ialltoallv::now);
export!(Alltoallv_init, Ialltoallv::init);
export!(Ialltoallw, Ialltoallw::now);
export!(Alltoallw_init, Ialltoallw::init);
export!(Ireduce_scatter_block, Ireduce_scatter_block::now);
export!(Reduce_scatter_block_init, Ireduce_scatter_block::init);
export!(Ireduce_scatter, Ireduce_scatter::now);
export!(Reduce_scatter_init, Ireduce_scatter::init);
