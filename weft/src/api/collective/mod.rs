//! Collective operations in rsmpi's shape: [`CommunicatorCollectives`] on every communicator,
//! [`Root`] on a process (the root of a rooted collective), each with its `immediate_*`
//! form, and the reduction operations of [`operation`].
//!
//! Every call runs a schedule that `coll` builds (see `start`): the blocking forms wait for
//! it, the immediate forms return a [`Request`] the engine progresses like any other. Calls
//! panic on error with a message naming the call and the values (MPI_ERRORS_ARE_FATAL), as
//! the point-to-point calls do. Sizes are checked where one member can see them; a member
//! whose size disagrees with the others' gets an error from the collective itself.

mod alltoallw;
mod checks;
mod hierarchy;
mod in_place;
mod in_place_plans;
mod inter;
mod neighbor;
pub mod operation;
mod persistent;
mod reduce_scatter;
mod rooted;
mod start;

use self::start::{blocking_shm, check_call, elem_of, start, Buffers, Called, ShmOp, Started};
use super::datatype::{Buffer, BufferMut, Layout, PartitionedBuffer, PartitionedBufferMut};
use super::request::{Request, Scope, StaticScope};
use super::topology::{Communicator, Process, Rank};
use crate::coll::algorithm;
use crate::coll::{Area, Span};
use crate::comm::CommData;
use crate::error::{fatal, Result};
pub use alltoallw::{Part, PartMut};
pub use in_place::{InPlaceCollectives, InPlaceRoot};
pub use neighbor::NeighborCollectives;
pub use operation::{
    reduce_local_into, DynBuffer, DynBufferMut, Operation, Reduction, SystemOperation,
    UnsafeUserFunction, UnsafeUserFunctionLarge, UnsafeUserOperation, UserOperation,
};
pub use persistent::{
    Parts, PersistentCollectives, PersistentNeighborCollectives, PersistentRequest,
    ReservedSequence,
};
pub use rooted::Root;

use checks::{check_len, check_own_part, count_error, counts_displs, parts};

fn input(len: usize) -> Span {
    Span::new(Area::Input, 0, len)
}
fn output(len: usize) -> Span {
    Span::new(Area::Output, 0, len)
}

/// Whether `len` bytes are whole `elem`-byte elements (without a division for the usual
/// power-of-two sizes: this is on every reduction's path).
fn whole_elements(len: usize, elem: usize) -> bool {
    match elem {
        0 => true,
        e if e.is_power_of_two() => len & (e - 1) == 0,
        e => len.is_multiple_of(e),
    }
}

/// Runs a blocking collective through the node-shared area when it applies (see
/// `start::blocking_shm`); `None`: send messages instead.
#[inline]
fn through_shm<'c>(
    blocking: bool,
    call: &'static str,
    c: &CommData,
    bufs: Buffers<'_>,
    writes: usize,
    op: impl Fn() -> ShmOp<'c>,
) -> Option<Result<Started>> {
    if !blocking {
        return None;
    }
    // SAFETY: `bufs` holds the layouts of the blocking call's buffers (its plan function's
    // caller promised they stay borrowed, the output exclusively, until it returns).
    let ran = unsafe { start::in_area_directly(call, c, bufs, writes, &op) }
        .or_else(|| blocking_shm(call, c, bufs, writes, op()));
    ran.map(|r| r.map(|()| Started::done()))
}

// ----- the collectives on a whole communicator -------------------------------------------

fn plan_barrier(c: &CommData, blocking: bool) -> Result<Started> {
    if c.is_inter() {
        return inter::plan_barrier(c);
    }
    check_call(
        c,
        Called {
            call: "barrier",
            root: None,
            unit: Some(0),
            op: None,
            elem: None,
        },
    )?;
    let bufs = Buffers::of(None, None);
    if let Some(r) = through_shm(blocking, "barrier", c, bufs, 0, || ShmOp::Barrier) {
        return r;
    }
    // SAFETY: no buffers.
    unsafe { start("barrier", c, bufs, None, |s, m, _| algorithm::barrier(s, m)) }
}

/// # Safety
/// `s` and `r` are layouts of buffers borrowed until the returned collective completes.
unsafe fn plan_all_gather(
    c: &CommData,
    s: &Layout<'_>,
    r: &Layout<'_>,
    blocking: bool,
) -> Result<Started> {
    const CALL: &str = "all_gather_into";
    if c.is_inter() {
        // SAFETY: the caller's promise.
        return unsafe { inter::plan_all_gather(c, CALL, s, r, None) };
    }
    let n = c.size() as usize;
    let (sl, rl) = (s.data_len(), r.data_len());
    check_len(
        CALL,
        "receive buffer",
        rl,
        n * sl,
        "one send buffer per member",
    )?;
    check_call(
        c,
        Called {
            call: CALL,
            root: None,
            unit: Some(sl),
            op: None,
            elem: elem_of(s),
        },
    )?;
    let bufs = Buffers::of(Some(s), Some(r));
    if let Some(r) = through_shm(blocking, CALL, c, bufs, sl, || ShmOp::Gather { root: None }) {
        return r;
    }
    // SAFETY: the caller's promise.
    unsafe {
        start(CALL, c, bufs, None, |sc, m, t| {
            algorithm::allgather(sc, m, t, input(sl), output(rl))
        })
    }
}

/// # Safety
/// As for [`plan_all_gather`].
unsafe fn plan_all_gather_varcount(
    c: &CommData,
    s: &Layout<'_>,
    (counts, displs): (
        Vec<crate::api::datatype::Count>,
        Vec<crate::api::datatype::Count>,
    ),
    r: &Layout<'_>,
) -> Result<Started> {
    const CALL: &str = "all_gather_varcount_into";
    let n = c.peers().size();
    let blocks = parts(CALL, "receive buffer", n, r, &counts, &displs)?;
    if c.is_inter() {
        // SAFETY: the caller's promise.
        return unsafe { inter::plan_all_gather(c, CALL, s, r, Some(blocks)) };
    }
    let sl = s.data_len();
    check_len(
        CALL,
        "send buffer",
        sl,
        blocks[c.rank as usize].1,
        "this member's count",
    )?;
    let rl = r.data_len();
    check_call(
        c,
        Called {
            call: CALL,
            root: None,
            unit: None,
            op: None,
            elem: elem_of(s),
        },
    )?;
    let bufs = Buffers::of(Some(s), Some(r));
    // SAFETY: the caller's promise.
    unsafe {
        start(CALL, c, bufs, None, |sc, m, _| {
            crate::coll::gather::allgatherv_ring(sc, m, input(sl), output(rl), &blocks)
        })
    }
}

/// # Safety
/// As for [`plan_all_gather`].
unsafe fn plan_all_to_all(
    c: &CommData,
    s: &Layout<'_>,
    send: Option<(
        &[crate::api::datatype::Count],
        &[crate::api::datatype::Count],
    )>,
    r: &Layout<'_>,
    recv: Option<(
        &[crate::api::datatype::Count],
        &[crate::api::datatype::Count],
    )>,
    blocking: bool,
) -> Result<Started> {
    let call = if send.is_some() {
        "all_to_all_varcount_into"
    } else {
        "all_to_all_into"
    };
    if c.is_inter() {
        let n = c.peers().size();
        let blocks = match (send, recv) {
            (Some((sc, sd)), Some((rc, rd))) => Some((
                parts(call, "send buffer", n, s, sc, sd)?,
                parts(call, "receive buffer", n, r, rc, rd)?,
            )),
            _ => None,
        };
        // SAFETY: the caller's promise.
        return unsafe { inter::plan_all_to_all(c, call, s, r, blocks) };
    }
    let n = c.size() as usize;
    let (sl, rl) = (s.data_len(), r.data_len());
    let (sb, rb) = match (send, recv) {
        (Some((sc, sd)), Some((rc, rd))) => (
            parts(call, "send buffer", n, s, sc, sd)?,
            parts(call, "receive buffer", n, r, rc, rd)?,
        ),
        _ => {
            if sl % n != 0 || sl != rl {
                return Err(count_error(
                    call,
                    format!(
                        "the send buffer has {sl} bytes of data and the receive buffer {rl}: \
                         both must hold one equal block for each of the {n} members"
                    ),
                ));
            }
            let b = sl / n;
            (
                crate::coll::reduce::equal_blocks(n, b),
                crate::coll::reduce::equal_blocks(n, b),
            )
        }
    };
    check_own_part(
        call,
        c.rank as usize,
        sb[c.rank as usize].1,
        rb[c.rank as usize].1,
    )?;
    let unit = send.is_none().then(|| sl / n.max(1));
    check_call(
        c,
        Called {
            call,
            root: None,
            unit,
            op: None,
            elem: elem_of(s),
        },
    )?;
    let bufs = Buffers::of(Some(s), Some(r));
    if send.is_none() {
        if let Some(r) = through_shm(blocking, call, c, bufs, sl, || ShmOp::Alltoall) {
            return r;
        }
    }
    // SAFETY: the caller's promise.
    unsafe {
        start(call, c, bufs, None, |sc, m, t| {
            algorithm::alltoall(sc, m, t, input(sl), &sb, output(rl), &rb, unit)
        })
    }
}

/// Which reduction over a whole communicator.
#[derive(Clone, Copy)]
enum Reduce {
    All,
    ScatterBlock,
    Scan,
    ExclusiveScan,
}

/// # Safety
/// As for [`plan_all_gather`].
unsafe fn plan_reduction<O: Operation>(
    c: &CommData,
    kind: Reduce,
    s: &Layout<'_>,
    r: &Layout<'_>,
    op: &O,
    blocking: bool,
) -> Result<Started> {
    let call = match kind {
        Reduce::All => "all_reduce_into",
        Reduce::ScatterBlock => "reduce_scatter_block_into",
        Reduce::Scan => "scan_into",
        Reduce::ExclusiveScan => "exclusive_scan_into",
    };
    if c.is_inter() {
        // SAFETY: the caller's promise.
        return unsafe { inter::plan_reduction(c, call, kind, s, r, None, op) };
    }
    let n = c.size() as usize;
    let (sl, rl) = (s.data_len(), r.data_len());
    match kind {
        Reduce::ScatterBlock => check_len(
            call,
            "send buffer",
            sl,
            n * rl,
            "a receive buffer's worth per member",
        )?,
        _ => check_len(call, "receive buffer", rl, sl, "the send buffer's")?,
    }
    let red = op.reduction(call, &s.map)?;
    if !whole_elements(sl, red.elem) {
        return Err(count_error(
            call,
            format!("{sl} bytes are not whole {}-byte elements", red.elem),
        ));
    }
    let unit = if matches!(kind, Reduce::ScatterBlock) {
        rl
    } else {
        sl
    };
    check_call(
        c,
        Called {
            call,
            root: None,
            unit: Some(unit),
            op: Some(red.name),
            elem: elem_of(s),
        },
    )?;
    if blocking && matches!(kind, Reduce::All) {
        // The allreduce straight to the area, before the general preamble below (the 2-rank
        // 8 B allreduce, a target cell, takes 0.125 µs so, 0.133 through `through_shm`'s lean
        // case: interleaved, CPUs together).
        // SAFETY: the caller's promise (the buffers are borrowed for this blocking call).
        if let Some((src, dst)) = unsafe { start::direct(Some(s), Some(r)) } {
            let (combine, elem) = (&red.combine, red.elem);
            let commutative = red.order == crate::coll::algorithm::Order::Commutative;
            let shape = ShmOp::Reduce {
                root: None,
                combine,
                commutative,
                elem,
            };
            let ran = start::in_area(call, c, sl, &shape, |area, engine| {
                start::reduce_in_area(area, engine, None, src, dst, combine, commutative, elem)
            });
            if let Some(done) = ran {
                return done.map(|()| Started::done());
            }
        }
    }
    let bufs = Buffers::of(Some(s), Some(r));
    let (elem, order) = (red.elem, red.order);
    let shm = || match kind {
        Reduce::All => ShmOp::Reduce {
            root: None,
            combine: &red.combine,
            commutative: red.order == crate::coll::algorithm::Order::Commutative,
            elem: red.elem,
        },
        Reduce::ScatterBlock => ShmOp::ReduceScatterBlock {
            combine: &red.combine,
            commutative: red.order == crate::coll::algorithm::Order::Commutative,
            elem: red.elem,
        },
        Reduce::Scan | Reduce::ExclusiveScan => ShmOp::Scan {
            combine: &red.combine,
            elem: red.elem,
            exclusive: matches!(kind, Reduce::ExclusiveScan),
        },
    };
    // An exclusive scan leaves member 0's output as it was.
    let shm_bufs = Buffers {
        prefill: matches!(kind, Reduce::ExclusiveScan),
        ..bufs
    };
    if let Some(r) = through_shm(blocking, call, c, shm_bufs, sl, shm) {
        return r;
    }
    // SAFETY: the caller's promise.
    unsafe {
        start(call, c, bufs, Some(red.combine), |sc, m, t| match kind {
            Reduce::All => algorithm::allreduce(sc, m, t, input(sl), output(rl), elem, order),
            Reduce::ScatterBlock => {
                let blocks = crate::coll::reduce::equal_blocks(n, rl);
                algorithm::reduce_scatter(sc, m, t, input(sl), &blocks, output(rl), order)
            }
            Reduce::Scan => algorithm::scan(sc, m, t, input(sl), output(rl), false),
            Reduce::ExclusiveScan => algorithm::scan(sc, m, t, input(sl), output(rl), true),
        })
    }
}

/// Collective operations on a communicator (rsmpi's `CommunicatorCollectives`).
pub trait CommunicatorCollectives: Communicator {
    /// Blocks until every member has called it.
    #[track_caller]
    fn barrier(&self) {
        fatal(plan_barrier(self.comm_data(), true).and_then(|s| s.wait("barrier")))
    }

    /// Every member's `sendbuf`, concatenated in rank order into every member's `recvbuf`.
    #[track_caller]
    fn all_gather_into<S: ?Sized + Buffer, R: ?Sized + BufferMut>(
        &self,
        sendbuf: &S,
        recvbuf: &mut R,
    ) {
        let (s, r) = (sendbuf.layout(), recvbuf.layout_mut());
        // SAFETY: both buffers are borrowed for this blocking call.
        fatal(
            unsafe { plan_all_gather(self.comm_data(), &s, &r, true) }
                .and_then(|x| x.wait("all_gather_into")),
        )
    }

    /// As [`all_gather_into`](Self::all_gather_into) with a count per member.
    #[track_caller]
    fn all_gather_varcount_into<S: ?Sized + Buffer, R: ?Sized + PartitionedBufferMut>(
        &self,
        sendbuf: &S,
        recvbuf: &mut R,
    ) {
        let s = sendbuf.layout();
        let cd = counts_displs(&*recvbuf);
        let r = recvbuf.layout_mut();
        // SAFETY: both buffers are borrowed for this blocking call.
        let started = unsafe { plan_all_gather_varcount(self.comm_data(), &s, cd, &r) };
        fatal(started.and_then(|x| x.wait("all_gather_varcount_into")))
    }

    /// Block j of every member's `sendbuf` goes to member j, into block i of its `recvbuf`
    /// for sender i.
    #[track_caller]
    fn all_to_all_into<S: ?Sized + Buffer, R: ?Sized + BufferMut>(
        &self,
        sendbuf: &S,
        recvbuf: &mut R,
    ) {
        let (s, r) = (sendbuf.layout(), recvbuf.layout_mut());
        // SAFETY: both buffers are borrowed for this blocking call.
        fatal(
            unsafe { plan_all_to_all(self.comm_data(), &s, None, &r, None, true) }
                .and_then(|x| x.wait("all_to_all_into")),
        )
    }

    /// As [`all_to_all_into`](Self::all_to_all_into) with a count per pair.
    #[track_caller]
    fn all_to_all_varcount_into<S: ?Sized + PartitionedBuffer, R: ?Sized + PartitionedBufferMut>(
        &self,
        sendbuf: &S,
        recvbuf: &mut R,
    ) {
        let s = sendbuf.layout();
        let (rc, rd) = (recvbuf.counts().to_vec(), recvbuf.displs().to_vec());
        let r = recvbuf.layout_mut();
        // SAFETY: both buffers are borrowed for this blocking call.
        let started = unsafe {
            plan_all_to_all(
                self.comm_data(),
                &s,
                Some((sendbuf.counts(), sendbuf.displs())),
                &r,
                Some((&rc, &rd)),
                true,
            )
        };
        fatal(started.and_then(|x| x.wait("all_to_all_varcount_into")))
    }

    /// `sendparts[j]` goes to member j, into its `recvparts[i]` for sender i: a datatype
    /// and count per part, one part per member each way (`MPI_Alltoallw`; not in rsmpi).
    /// A part's data must be as many bytes as its partner's part (an error naming both
    /// members and sizes otherwise); zero-size parts send nothing.
    #[track_caller]
    fn all_to_all_w_into(&self, sendparts: &[Part<'_>], recvparts: &mut [PartMut<'_>]) {
        const CALL: &str = "all_to_all_w_into";
        // SAFETY: the receive parts are borrowed for this blocking call, which lands them.
        let planned =
            unsafe { alltoallw::plan_all_to_all_w(self.comm_data(), CALL, sendparts, recvparts) };
        fatal(planned.and_then(|started| started.wait(CALL)))
    }

    /// The reduction of every member's `sendbuf` by `op`, into every member's `recvbuf`.
    #[track_caller]
    fn all_reduce_into<S: ?Sized + Buffer, R: ?Sized + BufferMut, O: Operation>(
        &self,
        sendbuf: &S,
        recvbuf: &mut R,
        op: O,
    ) {
        let (s, r) = (sendbuf.layout(), recvbuf.layout_mut());
        // SAFETY: both buffers and the operation are borrowed for this blocking call.
        fatal(
            unsafe { plan_reduction(self.comm_data(), Reduce::All, &s, &r, &op, true) }
                .and_then(|x| x.wait("all_reduce_into")),
        )
    }

    /// The reduction of every member's `sendbuf` (a block per member), block j of it into
    /// member j's `recvbuf`.
    #[track_caller]
    fn reduce_scatter_block_into<S: ?Sized + Buffer, R: ?Sized + BufferMut, O: Operation>(
        &self,
        sendbuf: &S,
        recvbuf: &mut R,
        op: O,
    ) {
        let (s, r) = (sendbuf.layout(), recvbuf.layout_mut());
        // SAFETY: both buffers and the operation are borrowed for this blocking call.
        fatal(
            unsafe { plan_reduction(self.comm_data(), Reduce::ScatterBlock, &s, &r, &op, true) }
                .and_then(|x| x.wait("reduce_scatter_block_into")),
        )
    }

    /// Part j of every member's `sendbuf`, reduced by `op` over all members, into member j's
    /// `recvbuf` (`MPI_Reduce_scatter`, a count per member; not in rsmpi). Every member gives
    /// the same counts.
    #[track_caller]
    fn reduce_scatter_varcount_into<
        S: ?Sized + PartitionedBuffer,
        R: ?Sized + BufferMut,
        O: Operation,
    >(
        &self,
        sendbuf: &S,
        recvbuf: &mut R,
        op: O,
    ) {
        let s = sendbuf.layout();
        let cd = (sendbuf.counts(), sendbuf.displs());
        let r = recvbuf.layout_mut();
        // SAFETY: both buffers and the operation are borrowed for this blocking call.
        let started = unsafe {
            reduce_scatter::plan_reduce_scatter_varcount(self.comm_data(), &s, cd, &r, &op)
        };
        fatal(started.and_then(|x| x.wait("reduce_scatter_varcount_into")))
    }

    /// Member i gets the reduction of members 0..=i's `sendbuf`.
    #[track_caller]
    fn scan_into<S: ?Sized + Buffer, R: ?Sized + BufferMut, O: Operation>(
        &self,
        sendbuf: &S,
        recvbuf: &mut R,
        op: O,
    ) {
        let (s, r) = (sendbuf.layout(), recvbuf.layout_mut());
        // SAFETY: both buffers and the operation are borrowed for this blocking call.
        fatal(
            unsafe { plan_reduction(self.comm_data(), Reduce::Scan, &s, &r, &op, true) }
                .and_then(|x| x.wait("scan_into")),
        )
    }

    /// Member i gets the reduction of members 0..i's `sendbuf`; member 0's `recvbuf` is left
    /// as it was.
    #[track_caller]
    fn exclusive_scan_into<S: ?Sized + Buffer, R: ?Sized + BufferMut, O: Operation>(
        &self,
        sendbuf: &S,
        recvbuf: &mut R,
        op: O,
    ) {
        let (s, r) = (sendbuf.layout(), recvbuf.layout_mut());
        // SAFETY: both buffers and the operation are borrowed for this blocking call.
        fatal(
            unsafe { plan_reduction(self.comm_data(), Reduce::ExclusiveScan, &s, &r, &op, true) }
                .and_then(|x| x.wait("exclusive_scan_into")),
        )
    }

    /// Starts a barrier.
    #[track_caller]
    fn immediate_barrier(&self) -> Request<'static, ()> {
        let c = self.comm_data();
        fatal(plan_barrier(c, false)).into_request("immediate_barrier", c, &(), StaticScope)
    }

    /// Starts [`all_gather_into`](Self::all_gather_into).
    #[track_caller]
    fn immediate_all_gather_into<
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
        let c = self.comm_data();
        let (s, r) = (sendbuf.layout(), recvbuf.layout_mut());
        // SAFETY: both buffers are borrowed for 'a, which the request (settled by its scope)
        // does not outlive.
        let started = fatal(unsafe { plan_all_gather(c, &s, &r, false) });
        started.into_request("immediate_all_gather_into", c, recvbuf, scope)
    }

    /// Starts [`all_gather_varcount_into`](Self::all_gather_varcount_into).
    #[track_caller]
    fn immediate_all_gather_varcount_into<
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
        let c = self.comm_data();
        let s = sendbuf.layout();
        let cd = counts_displs(&*recvbuf);
        let r = recvbuf.layout_mut();
        // SAFETY: as in `immediate_all_gather_into`.
        let started = fatal(unsafe { plan_all_gather_varcount(c, &s, cd, &r) });
        started.into_request("immediate_all_gather_varcount_into", c, recvbuf, scope)
    }

    /// Starts [`all_to_all_into`](Self::all_to_all_into).
    #[track_caller]
    fn immediate_all_to_all_into<
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
        let c = self.comm_data();
        let (s, r) = (sendbuf.layout(), recvbuf.layout_mut());
        // SAFETY: as in `immediate_all_gather_into`.
        let started = fatal(unsafe { plan_all_to_all(c, &s, None, &r, None, false) });
        started.into_request("immediate_all_to_all_into", c, recvbuf, scope)
    }

    /// Starts [`all_to_all_varcount_into`](Self::all_to_all_varcount_into).
    #[track_caller]
    fn immediate_all_to_all_varcount_into<
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
        let c = self.comm_data();
        let s = sendbuf.layout();
        let (rc, rd) = (recvbuf.counts().to_vec(), recvbuf.displs().to_vec());
        let r = recvbuf.layout_mut();
        // SAFETY: as in `immediate_all_gather_into`.
        let started = fatal(unsafe {
            plan_all_to_all(
                c,
                &s,
                Some((sendbuf.counts(), sendbuf.displs())),
                &r,
                Some((&rc, &rd)),
                false,
            )
        });
        started.into_request("immediate_all_to_all_varcount_into", c, recvbuf, scope)
    }

    /// Starts [`all_to_all_w_into`](Self::all_to_all_w_into). The send parts are copied
    /// when it starts (they are free again on return); the receive parts are borrowed until
    /// the request completes.
    #[track_caller]
    fn immediate_all_to_all_w_into<'a, 'b: 'a, Sc: Scope<'a>>(
        &self,
        scope: Sc,
        sendparts: &[Part<'_>],
        recvparts: &'a mut [PartMut<'b>],
    ) -> Request<'a, [PartMut<'b>], Sc> {
        const CALL: &str = "immediate_all_to_all_w_into";
        let c = self.comm_data();
        // SAFETY: the receive parts are borrowed for 'a, which the request (settled by its
        // scope) does not outlive; its finish lands them.
        let started = fatal(unsafe { alltoallw::plan_all_to_all_w(c, CALL, sendparts, recvparts) });
        started.into_request(CALL, c, &*recvparts, scope)
    }

    /// Starts [`all_reduce_into`](Self::all_reduce_into).
    #[track_caller]
    fn immediate_all_reduce_into<
        'a,
        S: ?Sized + 'a + Buffer,
        R: ?Sized + 'a + BufferMut,
        O: 'a + Operation,
        Sc: Scope<'a>,
    >(
        &self,
        scope: Sc,
        sendbuf: &'a S,
        recvbuf: &'a mut R,
        op: O,
    ) -> Request<'a, R, Sc> {
        let c = self.comm_data();
        let (s, r) = (sendbuf.layout(), recvbuf.layout_mut());
        // SAFETY: as in `immediate_all_gather_into`; the operation lives for 'a too.
        let started = fatal(unsafe { plan_reduction(c, Reduce::All, &s, &r, &op, false) });
        started.into_request("immediate_all_reduce_into", c, recvbuf, scope)
    }

    /// Starts [`reduce_scatter_block_into`](Self::reduce_scatter_block_into).
    #[track_caller]
    fn immediate_reduce_scatter_block_into<
        'a,
        S: ?Sized + 'a + Buffer,
        R: ?Sized + 'a + BufferMut,
        O: 'a + Operation,
        Sc: Scope<'a>,
    >(
        &self,
        scope: Sc,
        sendbuf: &'a S,
        recvbuf: &'a mut R,
        op: O,
    ) -> Request<'a, R, Sc> {
        let c = self.comm_data();
        let (s, r) = (sendbuf.layout(), recvbuf.layout_mut());
        // SAFETY: as in `immediate_all_reduce_into`.
        let started = fatal(unsafe { plan_reduction(c, Reduce::ScatterBlock, &s, &r, &op, false) });
        started.into_request("immediate_reduce_scatter_block_into", c, recvbuf, scope)
    }

    /// Starts [`reduce_scatter_varcount_into`](Self::reduce_scatter_varcount_into).
    #[track_caller]
    fn immediate_reduce_scatter_varcount_into<
        'a,
        S: ?Sized + 'a + PartitionedBuffer,
        R: ?Sized + 'a + BufferMut,
        O: 'a + Operation,
        Sc: Scope<'a>,
    >(
        &self,
        scope: Sc,
        sendbuf: &'a S,
        recvbuf: &'a mut R,
        op: O,
    ) -> Request<'a, R, Sc> {
        let c = self.comm_data();
        let s = sendbuf.layout();
        let cd = (sendbuf.counts(), sendbuf.displs());
        let r = recvbuf.layout_mut();
        // SAFETY: as in `immediate_all_reduce_into`.
        let started =
            fatal(unsafe { reduce_scatter::plan_reduce_scatter_varcount(c, &s, cd, &r, &op) });
        started.into_request("immediate_reduce_scatter_varcount_into", c, recvbuf, scope)
    }

    /// Starts [`scan_into`](Self::scan_into).
    #[track_caller]
    fn immediate_scan_into<
        'a,
        S: ?Sized + 'a + Buffer,
        R: ?Sized + 'a + BufferMut,
        O: 'a + Operation,
        Sc: Scope<'a>,
    >(
        &self,
        scope: Sc,
        sendbuf: &'a S,
        recvbuf: &'a mut R,
        op: O,
    ) -> Request<'a, R, Sc> {
        let c = self.comm_data();
        let (s, r) = (sendbuf.layout(), recvbuf.layout_mut());
        // SAFETY: as in `immediate_all_reduce_into`.
        let started = fatal(unsafe { plan_reduction(c, Reduce::Scan, &s, &r, &op, false) });
        started.into_request("immediate_scan_into", c, recvbuf, scope)
    }

    /// Starts [`exclusive_scan_into`](Self::exclusive_scan_into).
    #[track_caller]
    fn immediate_exclusive_scan_into<
        'a,
        S: ?Sized + 'a + Buffer,
        R: ?Sized + 'a + BufferMut,
        O: 'a + Operation,
        Sc: Scope<'a>,
    >(
        &self,
        scope: Sc,
        sendbuf: &'a S,
        recvbuf: &'a mut R,
        op: O,
    ) -> Request<'a, R, Sc> {
        let c = self.comm_data();
        let (s, r) = (sendbuf.layout(), recvbuf.layout_mut());
        // SAFETY: as in `immediate_all_reduce_into`.
        let started =
            fatal(unsafe { plan_reduction(c, Reduce::ExclusiveScan, &s, &r, &op, false) });
        started.into_request("immediate_exclusive_scan_into", c, recvbuf, scope)
    }
}

impl<C: Communicator + ?Sized> CommunicatorCollectives for C {}

/// Traits to glob-import.
pub mod traits {
    pub use super::{
        CommunicatorCollectives, InPlaceCollectives, InPlaceRoot, NeighborCollectives, Operation,
        PersistentCollectives, PersistentNeighborCollectives, Root,
    };
}
