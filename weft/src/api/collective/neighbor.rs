//! Neighbourhood collectives (MPI_Neighbor_allgather(v), MPI_Neighbor_alltoall(v,w)) and
//! their immediate forms, on any communicator with a process topology: a Cartesian grid, a
//! graph or a distributed graph. A Weft extension in rsmpi's style (rsmpi has none). Every
//! member of the communicator calls them, in the same order as its other collectives (their
//! messages carry the communicator's collective sequence numbers).
//!
//! Neighbour order is MPI's. Cartesian: for each dimension, the neighbour at −1, then the one
//! at +1 (a missing neighbour at a non-periodic edge takes part as an empty exchange: nothing
//! sent, its receive block untouched). Graph: [`GraphCommunicator::neighbors`]' order (the
//! graph must be symmetric). Distributed graph: receive blocks in the order of the sources,
//! send blocks in the order of the destinations.
//!
//! [`GraphCommunicator::neighbors`]: crate::topology::GraphCommunicator::neighbors

use super::start::{check_call, start, Buffers, Called, Started, Then};
use super::{check_len, count_error, counts_displs, input, output, parts};
use crate::api::datatype::{
    Buffer, BufferMut, Count, Layout, PartitionedBuffer, PartitionedBufferMut,
};
use crate::api::point_to_point::Staged;
use crate::api::request::{Request, Scope};
use crate::api::topology::Communicator;
use crate::coll::neighbor;
use crate::coll::{Area, Span};
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
            elem: None,
        },
    )
}

fn equal(n: usize, len: usize) -> Vec<(usize, usize)> {
    (0..n).map(|k| (k * len, len)).collect()
}

/// # Safety
/// `s` and `r` are layouts of buffers borrowed until the returned collective completes.
pub(super) unsafe fn plan_all_gather(
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
pub(super) type Varcounts = ((Vec<Count>, Vec<Count>), (Vec<Count>, Vec<Count>));

/// # Safety
/// As for [`plan_all_gather`].
pub(super) unsafe fn plan_all_to_all(
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

/// A neighbour all-to-all-w's received blocks: the bytes the schedule sends from and
/// receives into (the packed send blocks, then the receive blocks), and where each received
/// block goes.
struct LandingW {
    /// Owned here until the collective completes: the schedule's output view points into it.
    bytes: Vec<u8>,
    /// Per receive block with a source: its place in `bytes` and its buffer's staging.
    landings: Vec<(usize, Staged)>,
}

impl LandingW {
    /// Scatters each received block into its buffer.
    ///
    /// # Safety
    /// The collective has completed, and the receive buffers are still borrowed mutably.
    unsafe fn land(mut self, call: &'static str) -> Result<()> {
        for (off, st) in &mut self.landings {
            let len = st.tmp.len();
            st.tmp.copy_from_slice(&self.bytes[*off..*off + len]);
            // SAFETY: the caller's promise.
            unsafe { st.land(call, len)? };
        }
        Ok(())
    }
}

/// Plans a neighbour all-to-all-w: send block k is `send[k]` (any layout), receive block k
/// lands in `recv[k]`.
///
/// # Safety
/// The receive buffers stay borrowed mutably until the returned collective has completed,
/// which lands them (the send blocks are packed here, so they are free at return).
pub(super) unsafe fn plan_all_to_all_w(
    c: &CommData,
    call: &'static str,
    send: &[&dyn Buffer],
    recv: &mut [&mut dyn BufferMut],
) -> Result<Started> {
    let nb = neighbors_of(call, c)?;
    if send.len() != nb.destinations.len() || recv.len() != nb.sources.len() {
        return Err(count_error(
            call,
            format!(
                "{} send and {} receive buffers for {} destinations and {} sources: one buffer \
                 per neighbour",
                send.len(),
                recv.len(),
                nb.destinations.len(),
                nb.sources.len()
            ),
        ));
    }
    let mut bytes = Vec::new();
    let mut sb = Vec::with_capacity(send.len());
    for b in send {
        let l = b.layout();
        let at = bytes.len();
        match l.contiguous_bytes() {
            Some(x) => bytes.extend_from_slice(x),
            None => bytes.extend_from_slice(&l.pack()),
        }
        sb.push((at, bytes.len() - at));
    }
    let sl = bytes.len();
    let mut rb = Vec::with_capacity(recv.len());
    let mut landings = Vec::new();
    for (k, b) in recv.iter_mut().enumerate() {
        let l = b.layout_mut();
        let (at, len) = (bytes.len() - sl, l.data_len());
        rb.push((at, len));
        if nb.sources[k].is_some() {
            landings.push((bytes.len(), Staged::with_zeros(&l)));
        }
        bytes.resize(bytes.len() + len, 0);
    }
    let rl = bytes.len() - sl;
    register(c, call)?;
    let whole = bytes[..].layout_mut();
    let bufs = Buffers {
        input: None,
        output: Some(&whole),
        prefill: true,
    };
    let (from, into) = (output(sl), Span::new(Area::Output, sl, rl));
    // SAFETY: `bytes` is moved into the returned value, which the caller keeps until the
    // collective completes; moving a Vec does not move its heap block.
    let started = unsafe {
        start(call, c, bufs, None, |sc, m, _| {
            neighbor::alltoall(sc, m, &nb, from, &sb, into, &rb)
        })
    }?;
    let rest = LandingW { bytes, landings };
    // SAFETY: `then` runs the landing only once the collective has completed, while the
    // receive buffers are still borrowed (the caller's promise).
    let land: Then = Box::new(move |call| unsafe { rest.land(call) });
    // SAFETY: the receive buffers, which the landing writes, stay borrowed until completion (the
    // caller's promise).
    Ok(unsafe { started.then(land) })
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

    /// Block k of the send side is `sendbufs[k]`, for destination k; source k's block lands
    /// in `recvbufs[k]`: each block with its own datatype and count, as long as each pair's
    /// type signatures match (MPI_Neighbor_alltoallw, with a buffer per block in place of
    /// byte displacements into one buffer).
    #[track_caller]
    fn neighbor_all_to_all_w_into(
        &self,
        sendbufs: &[&dyn Buffer],
        recvbufs: &mut [&mut dyn BufferMut],
    ) {
        const CALL: &str = "neighbor_all_to_all_w_into";
        // SAFETY: the receive buffers are borrowed for this blocking call, which lands them.
        fatal(
            unsafe { plan_all_to_all_w(self.comm_data(), CALL, sendbufs, recvbufs) }
                .and_then(|started| started.wait(CALL)),
        )
    }

    /// Starts [`neighbor_all_to_all_w_into`](Self::neighbor_all_to_all_w_into); the
    /// received blocks land in their buffers when the request completes.
    #[track_caller]
    fn immediate_neighbor_all_to_all_w_into<'a, Sc: Scope<'a>>(
        &self,
        scope: Sc,
        sendbufs: &[&dyn Buffer],
        recvbufs: &'a mut [&'a mut dyn BufferMut],
    ) -> Request<'a, [&'a mut dyn BufferMut], Sc> {
        const CALL: &str = "immediate_neighbor_all_to_all_w_into";
        let c = self.comm_data();
        // SAFETY: the receive buffers are borrowed for 'a, which the request (settled by its
        // scope) does not outlive; its finish lands them.
        let started = fatal(unsafe { plan_all_to_all_w(c, CALL, sendbufs, recvbufs) });
        started.into_request(CALL, c, &*recvbufs, scope)
    }
}

impl<C: Communicator + ?Sized> NeighborCollectives for C {}
