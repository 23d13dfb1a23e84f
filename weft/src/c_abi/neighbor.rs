//! The neighbourhood collectives (MPI 4.1 §8.6) on communicators with a topology: allgather,
//! allgatherv, alltoall, alltoallv and alltoallw, each blocking, nonblocking (`MPI_I...`) and
//! persistent (`..._init`). One `start` function per collective (as in `icoll`); the
//! blocking form starts it and waits.
//!
//! A member receives one block per in-neighbour and sends one per out-neighbour (a
//! Cartesian grid: two per dimension each way; a graph: its neighbours; a distributed graph:
//! its sources and destinations).

use crate::c_abi::abi::*;
use crate::c_abi::coll_v::array;
use crate::c_abi::errors::{guard, CError};
use crate::c_abi::handles::{self, ints, view, view_mut, CCount};
use crate::c_abi::icoll::{hold, nonblocking, span, Started};
use crate::c_abi::requests::{check_out, hand_out, CRequest, Pinned};
use crate::c_abi::state::Comm;
use crate::datatype::{Buffer, BufferMut, Partition, PartitionMut};
use crate::request::StaticScope;
use crate::topology::Topology;
use crate::traits::*;
use std::ffi::{c_int, c_void};

/// This member's in- and out-degree in the communicator's topology.
fn degrees(call: &'static str, c: &Comm) -> Result<(usize, usize), CError> {
    let comm = &c.comm;
    match comm.topology() {
        Topology::Cartesian => {
            let n = 2 * comm.as_cartesian().map_or(0, |g| g.num_dimensions()) as usize;
            Ok((n, n))
        }
        Topology::Graph => {
            let n = comm
                .as_graph()
                .map_or(0, |g| g.neighbors(comm.rank()).len());
            Ok((n, n))
        }
        Topology::DistributedGraph => {
            let (i, o, _) = comm
                .as_distributed_graph()
                .map_or((0, 0, false), |g| g.neighbors_count());
            Ok((i as usize, o as usize))
        }
        Topology::Undefined => Err(CError::new(
            MPI_ERR_TOPOLOGY,
            call,
            "the communicator has no topology (a Cartesian grid or a graph)",
        )),
    }
}

/// `count` times `n`, as an element count.
fn times(call: &'static str, count: impl CCount, n: usize) -> Result<i64, CError> {
    handles::count(call, count)?;
    i64::try_from(n)
        .ok()
        .and_then(|n| count.wide().checked_mul(n))
        .ok_or_else(|| {
            CError::new(
                MPI_ERR_COUNT,
                call,
                format!("{count} elements for each of {n} neighbours overflow an MPI_Count"),
            )
        })
}

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
    let (ins, outs) = degrees(call, c)?;
    let (sdt, rdt) = (
        handles::datatype(call, sendtype)?,
        handles::datatype(call, recvtype)?,
    );
    let sent = match kind {
        Exchange::Allgather => sendcount.wide(),
        Exchange::Alltoall => times(call, sendcount, outs)?,
    };
    // SAFETY: the standard's contract: the blocks to send at `sendbuf`, room for a block
    // from each in-neighbour at `recvbuf`, until completion.
    let (input, out) = unsafe {
        (
            view(call, sendbuf, sent, sdt)?,
            view_mut(call, recvbuf, times(call, recvcount, ins)?, rdt)?,
        )
    };
    let c = &c.comm;
    Ok(hold((input, out), |(s, r)| match kind {
        Exchange::Allgather => c.immediate_neighbor_all_gather_into(StaticScope, &*s, r),
        Exchange::Alltoall => c.immediate_neighbor_all_to_all_into(StaticScope, &*s, r),
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
unsafe fn allgatherv<C: CCount, D: CCount>(
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
    let (ins, _) = degrees(call, c)?;
    // SAFETY: the standard's contract: a count and a displacement per in-neighbour.
    let counts = unsafe { ints(call, "recvcounts", recvcounts, ins)? };
    // SAFETY: as above.
    let displs = unsafe { ints(call, "displs", displs, ins)? };
    let (sdt, rdt) = (
        handles::datatype(call, sendtype)?,
        handles::datatype(call, recvtype)?,
    );
    // SAFETY: the standard's contract: every part fits `recvbuf`, until completion.
    let out = Pinned::new(unsafe { view_mut(call, recvbuf, span(call, &counts, &displs)?, rdt)? });
    // SAFETY: lent to the request, dropped before `out` (held with it).
    let parts = PartitionMut::new(unsafe { out.lend() }, counts, displs);
    // SAFETY: the standard's contract: `sendcount` elements at `sendbuf`.
    let input = unsafe { view(call, sendbuf, sendcount, sdt)? };
    let c = &c.comm;
    Ok(hold((parts, input, out), |(p, s, _)| {
        c.immediate_neighbor_all_gather_varcount_into(StaticScope, &*s, p)
    }))
}

#[allow(clippy::too_many_arguments)]
unsafe fn alltoallv<C: CCount, D: CCount>(
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
    let (ins, outs) = degrees(call, c)?;
    // SAFETY: the standard's contract: a count and a displacement per neighbour each way.
    let (scounts, sdispls, rcounts, rdispls) = unsafe {
        (
            ints(call, "sendcounts", sendcounts, outs)?,
            ints(call, "sdispls", sdispls, outs)?,
            ints(call, "recvcounts", recvcounts, ins)?,
            ints(call, "rdispls", rdispls, ins)?,
        )
    };
    let (sdt, rdt) = (
        handles::datatype(call, sendtype)?,
        handles::datatype(call, recvtype)?,
    );
    // SAFETY: the standard's contract: every part lies in its buffer, until completion.
    let (input, out) = unsafe {
        (
            Pinned::new(view(call, sendbuf, span(call, &scounts, &sdispls)?, sdt)?),
            Pinned::new(view_mut(
                call,
                recvbuf,
                span(call, &rcounts, &rdispls)?,
                rdt,
            )?),
        )
    };
    // SAFETY: lent to the request, dropped before `input` and `out` (held with it).
    let (sparts, rparts) = unsafe {
        (
            Partition::new(&*input.lend(), scounts, sdispls),
            PartitionMut::new(out.lend(), rcounts, rdispls),
        )
    };
    let c = &c.comm;
    Ok(hold((rparts, sparts, out, input), |(r, s, _, _)| {
        c.immediate_neighbor_all_to_all_varcount_into(StaticScope, &*s, r)
    }))
}

#[allow(clippy::too_many_arguments)]
unsafe fn alltoallw<C: CCount, D: CCount>(
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
    let (ins, outs) = degrees(call, c)?;
    // SAFETY: the standard's contract: a count, a byte displacement and a datatype per
    // neighbour each way.
    let (scounts, sd, st, rcounts, rd, rt) = unsafe {
        (
            array(call, "sendcounts", sendcounts, outs)?,
            array(call, "sdispls", sdispls, outs)?,
            array(call, "sendtypes", sendtypes, outs)?,
            array(call, "recvcounts", recvcounts, ins)?,
            array(call, "rdispls", rdispls, ins)?,
            array(call, "recvtypes", recvtypes, ins)?,
        )
    };
    let mut ins_views = Vec::with_capacity(outs);
    for i in 0..outs {
        let dt = handles::datatype(call, st[i])?;
        // SAFETY: the standard's contract: block i at its byte displacement.
        let at = unsafe { sendbuf.cast::<u8>().offset(sd[i].wide() as isize) };
        // SAFETY: as above: `scounts[i]` elements there.
        ins_views.push(unsafe { view(call, at.cast(), scounts[i], dt)? });
    }
    let mut outs_views = Vec::with_capacity(ins);
    for i in 0..ins {
        let dt = handles::datatype(call, rt[i])?;
        // SAFETY: the standard's contract: block i at its byte displacement.
        let at = unsafe { recvbuf.cast::<u8>().offset(rd[i].wide() as isize) };
        // SAFETY: as above: room for `rcounts[i]` elements there, until completion.
        outs_views.push(unsafe { view_mut(call, at.cast(), rcounts[i], dt)? });
    }
    let outs_views = Pinned::new(outs_views);
    // SAFETY: lent to the request, dropped before `outs_views` (held with it).
    let targets: Vec<&'static mut dyn BufferMut> = unsafe { outs_views.lend() }
        .iter_mut()
        .map(|v| v as &mut dyn BufferMut)
        .collect();
    let sends: Vec<&dyn Buffer> = ins_views.iter().map(|v| v as &dyn Buffer).collect();
    let c = &c.comm;
    Ok(hold((targets, outs_views), |(t, _)| {
        c.immediate_neighbor_all_to_all_w_into(StaticScope, &sends, &mut t[..])
    }))
}

/// The length of the arrays of the neighbours a member receives from (persistent forms).
fn indegree(call: &'static str, comm: *mut c_void) -> Result<usize, CError> {
    Ok(degrees(call, handles::comm(call, comm)?)?.0)
}

/// The length of the arrays of the neighbours a member sends to (persistent forms).
fn outdegree(call: &'static str, comm: *mut c_void) -> Result<usize, CError> {
    Ok(degrees(call, handles::comm(call, comm)?)?.1)
}

/// The blocking forms: start, then wait.
macro_rules! blocking {
    ($($name:ident, $start:ident, $comm:ident, ($($arg:ident: $ty:ty),*);)*) => {$(
        #[allow(non_snake_case)]
        pub(crate) mod $name {
            use super::*;

            #[allow(clippy::too_many_arguments)]
            pub unsafe extern "C" fn now($($arg: $ty),*) -> c_int {
                const CALL: &str = concat!("MPI_", stringify!($name));
                guard(CALL, $comm, || {
                    // SAFETY: the standard's contract for the arguments, passed on.
                    unsafe { $start(CALL, $($arg),*)? }.finish();
                    Ok(())
                })
            }
        }
    )*};
}

/// Each collective's arguments, for the three macros.
macro_rules! every_form {
    ($m:ident) => {
        $m! {
            Neighbor_allgather, Ineighbor_allgather, Neighbor_allgather_init, allgather, comm, {},
                (sendbuf: *const c_void, sendcount: c_int, sendtype: *mut c_void,
                 recvbuf: *mut c_void, recvcount: c_int, recvtype: *mut c_void,
                 comm: *mut c_void);
            Neighbor_alltoall, Ineighbor_alltoall, Neighbor_alltoall_init, alltoall, comm, {},
                (sendbuf: *const c_void, sendcount: c_int, sendtype: *mut c_void,
                 recvbuf: *mut c_void, recvcount: c_int, recvtype: *mut c_void,
                 comm: *mut c_void);
            Neighbor_allgatherv, Ineighbor_allgatherv, Neighbor_allgatherv_init, allgatherv, comm, { recvcounts: indegree(CALL, comm), displs: indegree(CALL, comm) },
                (sendbuf: *const c_void, sendcount: c_int, sendtype: *mut c_void,
                 recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int,
                 recvtype: *mut c_void, comm: *mut c_void);
            Neighbor_alltoallv, Ineighbor_alltoallv, Neighbor_alltoallv_init, alltoallv, comm, { sendcounts: outdegree(CALL, comm), sdispls: outdegree(CALL, comm), recvcounts: indegree(CALL, comm), rdispls: indegree(CALL, comm) },
                (sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int,
                 sendtype: *mut c_void, recvbuf: *mut c_void, recvcounts: *const c_int,
                 rdispls: *const c_int, recvtype: *mut c_void, comm: *mut c_void);
            Neighbor_alltoallw, Ineighbor_alltoallw, Neighbor_alltoallw_init, alltoallw, comm, { sendcounts: outdegree(CALL, comm), sdispls: outdegree(CALL, comm), sendtypes: outdegree(CALL, comm), recvcounts: indegree(CALL, comm), rdispls: indegree(CALL, comm), recvtypes: indegree(CALL, comm) },
                (sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const isize,
                 sendtypes: *const *mut c_void, recvbuf: *mut c_void, recvcounts: *const c_int,
                 rdispls: *const isize, recvtypes: *const *mut c_void, comm: *mut c_void);
        }
    };
}

macro_rules! blocking_of_every {
    ($($b:ident, $i:ident, $p:ident, $start:ident, $comm:ident, $kept:tt, $args:tt;)*) => {
        blocking! { $($b, $start, $comm, $args;)* }
    };
}
macro_rules! nonblocking_of_every {
    ($($b:ident, $i:ident, $p:ident, $start:ident, $comm:ident, $kept:tt, $args:tt;)*) => {
        nonblocking! { $($i, $p, $start, $comm, $kept, $args;)* }
    };
}

every_form!(blocking_of_every);
every_form!(nonblocking_of_every);

/// The large-count forms (counts MPI_Count, displacements MPI_Aint).
macro_rules! large_count_forms {
    ($m:ident) => {
        $m! {
            Neighbor_allgather_c, Ineighbor_allgather_c, Neighbor_allgather_init_c, allgather,
                comm, {},
                (sendbuf: *const c_void, sendcount: i64, sendtype: *mut c_void,
                 recvbuf: *mut c_void, recvcount: i64, recvtype: *mut c_void,
                 comm: *mut c_void);
            Neighbor_alltoall_c, Ineighbor_alltoall_c, Neighbor_alltoall_init_c, alltoall, comm, {},
                (sendbuf: *const c_void, sendcount: i64, sendtype: *mut c_void,
                 recvbuf: *mut c_void, recvcount: i64, recvtype: *mut c_void,
                 comm: *mut c_void);
            Neighbor_allgatherv_c, Ineighbor_allgatherv_c, Neighbor_allgatherv_init_c, allgatherv, comm, { recvcounts: indegree(CALL, comm), displs: indegree(CALL, comm) },
                (sendbuf: *const c_void, sendcount: i64, sendtype: *mut c_void,
                 recvbuf: *mut c_void, recvcounts: *const i64, displs: *const isize,
                 recvtype: *mut c_void, comm: *mut c_void);
            Neighbor_alltoallv_c, Ineighbor_alltoallv_c, Neighbor_alltoallv_init_c, alltoallv,
                comm, { sendcounts: outdegree(CALL, comm), sdispls: outdegree(CALL, comm), recvcounts: indegree(CALL, comm), rdispls: indegree(CALL, comm) },
                (sendbuf: *const c_void, sendcounts: *const i64, sdispls: *const isize,
                 sendtype: *mut c_void, recvbuf: *mut c_void, recvcounts: *const i64,
                 rdispls: *const isize, recvtype: *mut c_void, comm: *mut c_void);
            Neighbor_alltoallw_c, Ineighbor_alltoallw_c, Neighbor_alltoallw_init_c, alltoallw,
                comm, { sendcounts: outdegree(CALL, comm), sdispls: outdegree(CALL, comm), sendtypes: outdegree(CALL, comm), recvcounts: indegree(CALL, comm), rdispls: indegree(CALL, comm), recvtypes: indegree(CALL, comm) },
                (sendbuf: *const c_void, sendcounts: *const i64, sdispls: *const isize,
                 sendtypes: *const *mut c_void, recvbuf: *mut c_void, recvcounts: *const i64,
                 rdispls: *const isize, recvtypes: *const *mut c_void, comm: *mut c_void);
        }
    };
}

large_count_forms!(blocking_of_every);
large_count_forms!(nonblocking_of_every);

export!(Neighbor_allgather, Neighbor_allgather::now);
export!(Ineighbor_allgather, Ineighbor_allgather::now);
export!(Neighbor_allgather_init, Ineighbor_allgather::init);
export!(Neighbor_alltoall, Neighbor_alltoall::now);
export!(Ineighbor_alltoall, Ineighbor_alltoall::now);
export!(Neighbor_alltoall_init, Ineighbor_alltoall::init);
export!(Neighbor_allgatherv, Neighbor_allgatherv::now);
export!(Ineighbor_allgatherv, Ineighbor_allgatherv::now);
export!(Neighbor_allgatherv_init, Ineighbor_allgatherv::init);
export!(Neighbor_alltoallv, Neighbor_alltoallv::now);
export!(Ineighbor_alltoallv, Ineighbor_alltoallv::now);
export!(Neighbor_alltoallv_init, Ineighbor_alltoallv::init);
export!(Neighbor_alltoallw, Neighbor_alltoallw::now);
export!(Ineighbor_alltoallw, Ineighbor_alltoallw::now);
export!(Neighbor_alltoallw_init, Ineighbor_alltoallw::init);
export!(Neighbor_allgather_c, Neighbor_allgather_c::now);
export!(Ineighbor_allgather_c, Ineighbor_allgather_c::now);
export!(Neighbor_allgather_init_c, Ineighbor_allgather_c::init);
export!(Neighbor_alltoall_c, Neighbor_alltoall_c::now);
export!(Ineighbor_alltoall_c, Ineighbor_alltoall_c::now);
export!(Neighbor_alltoall_init_c, Ineighbor_alltoall_c::init);
export!(Neighbor_allgatherv_c, Neighbor_allgatherv_c::now);
export!(Ineighbor_allgatherv_c, Ineighbor_allgatherv_c::now);
export!(Neighbor_allgatherv_init_c, Ineighbor_allgatherv_c::init);
export!(Neighbor_alltoallv_c, Neighbor_alltoallv_c::now);
export!(Ineighbor_alltoallv_c, Ineighbor_alltoallv_c::now);
export!(Neighbor_alltoallv_init_c, Ineighbor_alltoallv_c::init);
export!(Neighbor_alltoallw_c, Neighbor_alltoallw_c::now);
export!(Ineighbor_alltoallw_c, Ineighbor_alltoallw_c::now);
export!(Neighbor_alltoallw_init_c, Ineighbor_alltoallw_c::init);
