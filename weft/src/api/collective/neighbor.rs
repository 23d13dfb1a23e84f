//! Neighbourhood collectives (MPI_Neighbor_allgather(v), MPI_Neighbor_alltoall(v)) and their
//! immediate forms, on any communicator with a process topology: a Cartesian grid, a graph
//! or a distributed graph. A Weft extension in rsmpi's style (rsmpi has none).
//!
//! Neighbour order is MPI's. Cartesian: for each dimension, the neighbour at −1, then the one
//! at +1 (a missing neighbour at a non-periodic edge takes part as an empty exchange: nothing
//! sent, its receive block untouched). Graph: [`GraphCommunicator::neighbors`]' order (the
//! graph must be symmetric). Distributed graph: receive blocks in the order of the sources,
//! send blocks in the order of the destinations.
//!
//! [`GraphCommunicator::neighbors`]: crate::topology::GraphCommunicator::neighbors

use super::start::{check_call, start, Buffers, Called, Started};
use super::{check_len, count_error, counts_displs, input, output, parts};
use crate::api::datatype::{
    Buffer, BufferMut, Count, Layout, PartitionedBuffer, PartitionedBufferMut,
};
use crate::api::request::{Request, Scope};
use crate::api::topology::Communicator;
use crate::coll::neighbor;
use crate::comm::process_topology::{Neighbors, ProcessTopology};
use crate::comm::CommData;
use crate::error::{fatal, Error, ErrorClass, Result};

/// This member's neighbours, or an error naming `call` when the communicator has no topology
/// or a graph that is not symmetric.
fn neighbors_of(call: &'static str, c: &CommData) -> Result<Neighbors> {
    let t = c.process_topology.as_deref().ok_or_else(|| {
        Error::new(
            ErrorClass::Topology,
            call,
            "the communicator has no process topology (make one with \
             create_cartesian_communicator, create_graph_communicator or \
             create_distributed_graph_communicator)",
        )
    })?;
    if let ProcessTopology::Graph(g) = t {
        if let Some(a) = g.asymmetry() {
            return Err(Error::new(
                ErrorClass::Topology,
                call,
                format!(
                    "the graph is not symmetric ({a}): a graph's neighbourhood collectives send \
                     to and receive from the same neighbours"
                ),
            ));
        }
    }
    Ok(t.neighbors(c.rank))
}

fn register(c: &CommData, call: &'static str) -> Result<()> {
    check_call(
        c,
        Called {
            call,
            root: None,
            // Counts may differ from member to member (only neighbours must agree).
            unit: None,
            op: None,
        },
    )
}

fn equal(n: usize, len: usize) -> Vec<(usize, usize)> {
    (0..n).map(|k| (k * len, len)).collect()
}

/// # Safety
/// `s` and `r` are layouts of buffers borrowed until the returned collective completes.
unsafe fn plan_all_gather(
    c: &CommData,
    call: &'static str,
    s: &Layout<'_>,
    r: &Layout<'_>,
    recv: Option<(Vec<Count>, Vec<Count>)>,
) -> Result<Started> {
    let nb = neighbors_of(call, c)?;
    let (sl, rl) = (s.data_len(), r.data_len());
    let blocks = match recv {
        None => {
            let k = nb.sources.len();
            check_len(
                call,
                "receive buffer",
                rl,
                k * sl,
                &format!("one send buffer from each of {k} sources"),
            )?;
            equal(k, sl)
        }
        Some((counts, displs)) => parts(
            call,
            "receive buffer",
            nb.sources.len(),
            r,
            &counts,
            &displs,
        )?,
    };
    register(c, call)?;
    let bufs = Buffers {
        input: Some(s),
        output: Some(r),
        prefill: true,
    };
    // SAFETY: the caller's promise.
    unsafe {
        start(call, c, bufs, None, |sc, m, _| {
            neighbor::allgather(sc, m, &nb, input(sl), output(rl), &blocks)
        })
    }
}

/// Counts and displacements of a partitioned send and receive buffer.
type Varcounts = ((Vec<Count>, Vec<Count>), (Vec<Count>, Vec<Count>));

/// # Safety
/// As for [`plan_all_gather`].
unsafe fn plan_all_to_all(
    c: &CommData,
    call: &'static str,
    s: &Layout<'_>,
    r: &Layout<'_>,
    varcounts: Option<Varcounts>,
) -> Result<Started> {
    let nb = neighbors_of(call, c)?;
    let (sl, rl) = (s.data_len(), r.data_len());
    let (ins, outs) = (nb.sources.len(), nb.destinations.len());
    let (sb, rb) = match varcounts {
        Some(((sc, sd), (rc, rd))) => (
            parts(call, "send buffer", outs, s, &sc, &sd)?,
            parts(call, "receive buffer", ins, r, &rc, &rd)?,
        ),
        None => {
            // One block size for both: from the send buffer, or the receive buffer when
            // this member sends to nobody.
            let block = sl.checked_div(outs).unwrap_or(rl / ins.max(1));
            if sl != outs * block || rl != ins * block {
                return Err(count_error(
                    call,
                    format!(
                        "the send buffer has {sl} bytes of data for {outs} destinations and the \
                         receive buffer {rl} for {ins} sources: both must hold one equal block \
                         per neighbour"
                    ),
                ));
            }
            (equal(outs, block), equal(ins, block))
        }
    };
    register(c, call)?;
    let bufs = Buffers {
        input: Some(s),
        output: Some(r),
        prefill: true,
    };
    // SAFETY: the caller's promise.
    unsafe {
        start(call, c, bufs, None, |sc, m, _| {
            neighbor::alltoall(sc, m, &nb, input(sl), &sb, output(rl), &rb)
        })
    }
}

/// Neighbourhood collectives on a communicator with a process topology. Calls panic on error
/// (a communicator without a topology, buffers of the wrong size) with a message naming the
/// call and the values.
pub trait NeighborCollectives: Communicator {
    /// This member's `sendbuf` to every destination; source k's into block k of `recvbuf`
    /// (MPI_Neighbor_allgather).
    #[track_caller]
    fn neighbor_all_gather_into<S: ?Sized + Buffer, R: ?Sized + BufferMut>(
        &self,
        sendbuf: &S,
        recvbuf: &mut R,
    ) {
        const CALL: &str = "neighbor_all_gather_into";
        let (s, r) = (sendbuf.layout(), recvbuf.layout_mut());
        // SAFETY: both buffers are borrowed for this blocking call.
        fatal(
            unsafe { plan_all_gather(self.comm_data(), CALL, &s, &r, None) }
                .and_then(|x| x.wait(CALL)),
        )
    }

    /// As [`neighbor_all_gather_into`](Self::neighbor_all_gather_into) with a count and
    /// displacement per source (MPI_Neighbor_allgatherv).
    #[track_caller]
    fn neighbor_all_gather_varcount_into<S: ?Sized + Buffer, R: ?Sized + PartitionedBufferMut>(
        &self,
        sendbuf: &S,
        recvbuf: &mut R,
    ) {
        const CALL: &str = "neighbor_all_gather_varcount_into";
        let s = sendbuf.layout();
        let cd = counts_displs(&*recvbuf);
        let r = recvbuf.layout_mut();
        // SAFETY: both buffers are borrowed for this blocking call.
        fatal(
            unsafe { plan_all_gather(self.comm_data(), CALL, &s, &r, Some(cd)) }
                .and_then(|x| x.wait(CALL)),
        )
    }

    /// Block k of `sendbuf` to destination k; source k's into block k of `recvbuf`
    /// (MPI_Neighbor_alltoall).
    #[track_caller]
    fn neighbor_all_to_all_into<S: ?Sized + Buffer, R: ?Sized + BufferMut>(
        &self,
        sendbuf: &S,
        recvbuf: &mut R,
    ) {
        const CALL: &str = "neighbor_all_to_all_into";
        let (s, r) = (sendbuf.layout(), recvbuf.layout_mut());
        // SAFETY: both buffers are borrowed for this blocking call.
        fatal(
            unsafe { plan_all_to_all(self.comm_data(), CALL, &s, &r, None) }
                .and_then(|x| x.wait(CALL)),
        )
    }

    /// As [`neighbor_all_to_all_into`](Self::neighbor_all_to_all_into) with a count and
    /// displacement per neighbour (MPI_Neighbor_alltoallv).
    #[track_caller]
    fn neighbor_all_to_all_varcount_into<
        S: ?Sized + PartitionedBuffer,
        R: ?Sized + PartitionedBufferMut,
    >(
        &self,
        sendbuf: &S,
        recvbuf: &mut R,
    ) {
        const CALL: &str = "neighbor_all_to_all_varcount_into";
        let s = sendbuf.layout();
        let v = (counts_displs(sendbuf), counts_displs(&*recvbuf));
        let r = recvbuf.layout_mut();
        // SAFETY: both buffers are borrowed for this blocking call.
        fatal(
            unsafe { plan_all_to_all(self.comm_data(), CALL, &s, &r, Some(v)) }
                .and_then(|x| x.wait(CALL)),
        )
    }

    /// Starts [`neighbor_all_gather_into`](Self::neighbor_all_gather_into).
    #[track_caller]
    fn immediate_neighbor_all_gather_into<
        'a,
        S: ?Sized + 'a + Buffer,
        R: ?Sized + 'a + BufferMut,
        Sc: Scope<'a>,
    >(
        &self,
        scope: Sc,
        sendbuf: &'a S,
        recvbuf: &'a mut R,
    ) -> Request<'a, R, Sc> {
        const CALL: &str = "immediate_neighbor_all_gather_into";
        let c = self.comm_data();
        let (s, r) = (sendbuf.layout(), recvbuf.layout_mut());
        // SAFETY: both buffers are borrowed for 'a, which the request (settled by its scope)
        // does not outlive.
        let started = fatal(unsafe { plan_all_gather(c, CALL, &s, &r, None) });
        started.into_request(CALL, c, recvbuf, scope)
    }

    /// Starts [`neighbor_all_gather_varcount_into`](Self::neighbor_all_gather_varcount_into).
    #[track_caller]
    fn immediate_neighbor_all_gather_varcount_into<
        'a,
        S: ?Sized + 'a + Buffer,
        R: ?Sized + 'a + PartitionedBufferMut,
        Sc: Scope<'a>,
    >(
        &self,
        scope: Sc,
        sendbuf: &'a S,
        recvbuf: &'a mut R,
    ) -> Request<'a, R, Sc> {
        const CALL: &str = "immediate_neighbor_all_gather_varcount_into";
        let c = self.comm_data();
        let s = sendbuf.layout();
        let cd = counts_displs(&*recvbuf);
        let r = recvbuf.layout_mut();
        // SAFETY: as in `immediate_neighbor_all_gather_into`.
        let started = fatal(unsafe { plan_all_gather(c, CALL, &s, &r, Some(cd)) });
        started.into_request(CALL, c, recvbuf, scope)
    }

    /// Starts [`neighbor_all_to_all_into`](Self::neighbor_all_to_all_into).
    #[track_caller]
    fn immediate_neighbor_all_to_all_into<
        'a,
        S: ?Sized + 'a + Buffer,
        R: ?Sized + 'a + BufferMut,
        Sc: Scope<'a>,
    >(
        &self,
        scope: Sc,
        sendbuf: &'a S,
        recvbuf: &'a mut R,
    ) -> Request<'a, R, Sc> {
        const CALL: &str = "immediate_neighbor_all_to_all_into";
        let c = self.comm_data();
        let (s, r) = (sendbuf.layout(), recvbuf.layout_mut());
        // SAFETY: as in `immediate_neighbor_all_gather_into`.
        let started = fatal(unsafe { plan_all_to_all(c, CALL, &s, &r, None) });
        started.into_request(CALL, c, recvbuf, scope)
    }

    /// Starts [`neighbor_all_to_all_varcount_into`](Self::neighbor_all_to_all_varcount_into).
    #[track_caller]
    fn immediate_neighbor_all_to_all_varcount_into<
        'a,
        S: ?Sized + 'a + PartitionedBuffer,
        R: ?Sized + 'a + PartitionedBufferMut,
        Sc: Scope<'a>,
    >(
        &self,
        scope: Sc,
        sendbuf: &'a S,
        recvbuf: &'a mut R,
    ) -> Request<'a, R, Sc> {
        const CALL: &str = "immediate_neighbor_all_to_all_varcount_into";
        let c = self.comm_data();
        let s = sendbuf.layout();
        let v = (counts_displs(sendbuf), counts_displs(&*recvbuf));
        let r = recvbuf.layout_mut();
        // SAFETY: as in `immediate_neighbor_all_gather_into`.
        let started = fatal(unsafe { plan_all_to_all(c, CALL, &s, &r, Some(v)) });
        started.into_request(CALL, c, recvbuf, scope)
    }
}

impl<C: Communicator + ?Sized> NeighborCollectives for C {}
