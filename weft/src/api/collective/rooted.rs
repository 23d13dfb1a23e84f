//! The rooted collectives (broadcast, reduce, gather, scatter and their varcount forms),
//! called on the root process: rsmpi's `Root`.

use super::start::{elem_of, start, Buffers, Called, ShmOp, Started};
use super::{check_call, check_len, counts_displs, input, output, parts, through_shm};
use super::{Buffer, BufferMut, CommData, Layout, Operation, PartitionedBuffer};
use super::{PartitionedBufferMut, Process, Rank, Request, Scope};
use crate::api::topology::AsCommunicator;
use crate::coll::algorithm;
use crate::error::{fatal, Error, ErrorClass, Result};

/// A root's position and whether this member is it.
fn root_of(c: &CommData, call: &'static str, root: Rank) -> Result<(usize, bool)> {
    if root < 0 || root as u32 >= c.size() {
        return Err(Error::new(
            ErrorClass::Root,
            call,
            format!(
                "root {root} is out of range for a communicator of size {}",
                c.size()
            ),
        ));
    }
    Ok((root as usize, root as u32 == c.rank))
}

/// The root's position, checked.
pub(super) fn root_index(c: &CommData, call: &'static str, root: Rank) -> Result<usize> {
    root_of(c, call, root).map(|r| r.0)
}

/// # Safety
/// `buf` is the layout of a buffer borrowed until the collective completes.
pub(super) unsafe fn plan_broadcast(
    c: &CommData,
    root: Rank,
    buf: &Layout<'_>,
    blocking: bool,
) -> Result<Started> {
    const CALL: &str = "broadcast_into";
    if c.is_inter() {
        // SAFETY: the caller's promise.
        return unsafe { super::inter::plan_broadcast(c, root, buf) };
    }
    let (root, am_root) = root_of(c, CALL, root)?;
    let len = buf.data_len();
    check_call(
        c,
        Called {
            call: CALL,
            root: Some(root),
            unit: Some(len),
            op: None,
            elem: elem_of(buf),
        },
    )?;
    let bufs = Buffers {
        input: None,
        output: Some(buf),
        prefill: am_root,
    };
    if let Some(r) = through_shm(blocking, CALL, c, bufs, len, || ShmOp::Bcast { root }) {
        return r;
    }
    // SAFETY: the caller's promise.
    unsafe {
        start(CALL, c, bufs, None, |s, m, t| {
            algorithm::bcast(s, m, t, root, output(len))
        })
    }
}

/// Which way a rooted gather or scatter goes, with its per-member parts when it has counts.
pub(super) enum Rooted {
    Gather(Option<Vec<(usize, usize)>>),
    Scatter(Option<Vec<(usize, usize)>>),
}

/// # Safety
/// The layouts are of buffers borrowed until the collective completes.
pub(super) unsafe fn plan_rooted(
    c: &CommData,
    call: &'static str,
    root: Rank,
    how: Rooted,
    send: Option<&Layout<'_>>,
    recv: Option<&Layout<'_>>,
    blocking: bool,
) -> Result<Started> {
    if c.is_inter() {
        // SAFETY: the caller's promise.
        return unsafe { super::inter::plan_rooted(c, call, root, how, send, recv) };
    }
    let (root, am_root) = root_of(c, call, root)?;
    let n = c.size() as usize;
    let sl = send.map_or(0, |l| l.data_len());
    let rl = recv.map_or(0, |l| l.data_len());
    let unit = match &how {
        Rooted::Gather(None) => Some(sl),
        Rooted::Scatter(None) => Some(rl),
        _ => None,
    };
    check_call(
        c,
        Called {
            call,
            root: Some(root),
            unit,
            op: None,
            elem: send.or(recv).and_then(elem_of),
        },
    )?;
    let bufs = Buffers::of(send, recv);
    match how {
        Rooted::Gather(None) => {
            if am_root {
                check_len(
                    call,
                    "receive buffer",
                    rl,
                    n * sl,
                    "one send buffer per member",
                )?;
            }
            let shm = || ShmOp::Gather { root: Some(root) };
            if let Some(r) = through_shm(blocking, call, c, bufs, sl, shm) {
                return r;
            }
            // SAFETY: the caller's promise.
            unsafe {
                start(call, c, bufs, None, |s, m, t| {
                    algorithm::gather(
                        s,
                        m,
                        t,
                        root,
                        input(sl),
                        output(if am_root { rl } else { 0 }),
                    )
                })
            }
        }
        Rooted::Gather(Some(blocks)) => {
            if am_root {
                check_len(call, "send buffer", sl, blocks[root].1, "the root's count")?;
            }
            // SAFETY: the caller's promise.
            unsafe {
                start(call, c, bufs, None, |s, m, _| {
                    crate::coll::gather::gatherv_linear(s, m, root, input(sl), output(rl), &blocks)
                })
            }
        }
        Rooted::Scatter(None) => {
            if am_root {
                check_len(
                    call,
                    "send buffer",
                    sl,
                    n * rl,
                    "one receive buffer per member",
                )?;
            }
            // The root writes every member's block; the others know the size from theirs.
            let shm = || ShmOp::Scatter { root };
            if let Some(r) = through_shm(blocking, call, c, bufs, rl * n, shm) {
                return r;
            }
            // SAFETY: the caller's promise.
            unsafe {
                start(call, c, bufs, None, |s, m, t| {
                    algorithm::scatter(
                        s,
                        m,
                        t,
                        root,
                        input(if am_root { sl } else { 0 }),
                        output(rl),
                    )
                })
            }
        }
        Rooted::Scatter(Some(blocks)) => {
            if am_root {
                check_len(
                    call,
                    "receive buffer",
                    rl,
                    blocks[root].1,
                    "the root's count",
                )?;
            }
            // SAFETY: the caller's promise.
            unsafe {
                start(call, c, bufs, None, |s, m, _| {
                    crate::coll::gather::scatterv_linear(s, m, root, input(sl), &blocks, output(rl))
                })
            }
        }
    }
}

/// # Safety
/// As for [`plan_rooted`]; the operation lives until the collective completes.
pub(super) unsafe fn plan_reduce<O: Operation>(
    c: &CommData,
    call: &'static str,
    root: Rank,
    send: &Layout<'_>,
    recv: Option<&Layout<'_>>,
    op: &O,
    blocking: bool,
) -> Result<Started> {
    if c.is_inter() {
        // SAFETY: the caller's promise.
        return unsafe { super::inter::plan_reduce(c, call, root, send, recv, op) };
    }
    let (root, am_root) = root_of(c, call, root)?;
    let sl = send.data_len();
    if let Some(r) = recv {
        check_len(
            call,
            "receive buffer",
            r.data_len(),
            sl,
            "the send buffer's",
        )?;
    }
    let red = op.reduction(call, &send.map)?;
    let order = red.order;
    check_call(
        c,
        Called {
            call,
            root: Some(root),
            unit: Some(sl),
            op: Some(red.name),
            elem: elem_of(send),
        },
    )?;
    let bufs = Buffers::of(Some(send), recv);
    let shm = || ShmOp::Reduce {
        root: Some(root),
        combine: &red.combine,
        commutative: red.order == crate::coll::algorithm::Order::Commutative,
        elem: red.elem,
    };
    if let Some(r) = through_shm(blocking, call, c, bufs, sl, shm) {
        return r;
    }
    // SAFETY: the caller's promise.
    unsafe {
        start(call, c, bufs, Some(red.combine), |s, m, t| {
            let dst = if am_root { output(sl) } else { input(sl) };
            algorithm::reduce(s, m, t, root, input(sl), dst, order)
        })
    }
}

fn parts_of<P: ?Sized + crate::api::datatype::Partitioned>(
    call: &'static str,
    what: &str,
    c: &CommData,
    l: &Layout<'_>,
    p: &P,
) -> Result<Vec<(usize, usize)>> {
    parts(call, what, c.peers().size(), l, p.counts(), p.displs())
}

/// The rooted collectives, called on the root process (rsmpi's `Root`).
pub trait Root: AsCommunicator {
    /// The root's rank.
    fn root_rank(&self) -> Rank;

    /// The root's `buffer` into every member's.
    #[track_caller]
    fn broadcast_into<Buf: ?Sized + BufferMut>(&self, buffer: &mut Buf) {
        let l = buffer.layout_mut();
        // SAFETY: the buffer is borrowed for this blocking call.
        fatal(
            unsafe { plan_broadcast(self.comm_data(), self.root_rank(), &l, true) }
                .and_then(|x| x.wait("broadcast_into")),
        )
    }

    /// Sends `sendbuf` to the root (a member that is not the root).
    #[track_caller]
    fn gather_into<S: ?Sized + Buffer>(&self, sendbuf: &S) {
        let s = sendbuf.layout();
        // SAFETY: the buffer is borrowed for this blocking call.
        fatal(
            unsafe {
                plan_rooted(
                    self.comm_data(),
                    "gather_into",
                    self.root_rank(),
                    Rooted::Gather(None),
                    Some(&s),
                    None,
                    true,
                )
            }
            .and_then(|x| x.wait("gather_into")),
        )
    }

    /// The root gathers every member's `sendbuf` into `recvbuf`, in rank order.
    #[track_caller]
    fn gather_into_root<S: ?Sized + Buffer, R: ?Sized + BufferMut>(
        &self,
        sendbuf: &S,
        recvbuf: &mut R,
    ) {
        let (s, r) = (sendbuf.layout(), recvbuf.layout_mut());
        // SAFETY: both buffers are borrowed for this blocking call.
        fatal(
            unsafe {
                plan_rooted(
                    self.comm_data(),
                    "gather_into_root",
                    self.root_rank(),
                    Rooted::Gather(None),
                    Some(&s),
                    Some(&r),
                    true,
                )
            }
            .and_then(|x| x.wait("gather_into_root")),
        )
    }

    /// Sends `sendbuf` to the root of a gather with a count per member.
    #[track_caller]
    fn gather_varcount_into<S: ?Sized + Buffer>(&self, sendbuf: &S) {
        let s = sendbuf.layout();
        let n = self.comm_data().peers().size();
        // Only the root's counts matter; a member sends its whole buffer.
        let blocks = vec![(0, 0); n];
        // SAFETY: the buffer is borrowed for this blocking call.
        fatal(
            unsafe {
                plan_rooted(
                    self.comm_data(),
                    "gather_varcount_into",
                    self.root_rank(),
                    Rooted::Gather(Some(blocks)),
                    Some(&s),
                    None,
                    true,
                )
            }
            .and_then(|x| x.wait("gather_varcount_into")),
        )
    }

    /// The root gathers every member's `sendbuf` into its part of `recvbuf`.
    #[track_caller]
    fn gather_varcount_into_root<S: ?Sized + Buffer, R: ?Sized + PartitionedBufferMut>(
        &self,
        sendbuf: &S,
        recvbuf: &mut R,
    ) {
        const CALL: &str = "gather_varcount_into_root";
        let s = sendbuf.layout();
        let c = self.comm_data();
        let cd = counts_displs(&*recvbuf);
        let r = recvbuf.layout_mut();
        let blocks = fatal(parts(
            CALL,
            "receive buffer",
            c.peers().size(),
            &r,
            &cd.0,
            &cd.1,
        ));
        // SAFETY: both buffers are borrowed for this blocking call.
        fatal(
            unsafe {
                plan_rooted(
                    c,
                    CALL,
                    self.root_rank(),
                    Rooted::Gather(Some(blocks)),
                    Some(&s),
                    Some(&r),
                    true,
                )
            }
            .and_then(|x| x.wait(CALL)),
        )
    }

    /// Receives this member's block from the root (a member that is not the root).
    #[track_caller]
    fn scatter_into<R: ?Sized + BufferMut>(&self, recvbuf: &mut R) {
        let r = recvbuf.layout_mut();
        // SAFETY: the buffer is borrowed for this blocking call.
        fatal(
            unsafe {
                plan_rooted(
                    self.comm_data(),
                    "scatter_into",
                    self.root_rank(),
                    Rooted::Scatter(None),
                    None,
                    Some(&r),
                    true,
                )
            }
            .and_then(|x| x.wait("scatter_into")),
        )
    }

    /// The root sends block j of `sendbuf` to member j.
    #[track_caller]
    fn scatter_into_root<S: ?Sized + Buffer, R: ?Sized + BufferMut>(
        &self,
        sendbuf: &S,
        recvbuf: &mut R,
    ) {
        let (s, r) = (sendbuf.layout(), recvbuf.layout_mut());
        // SAFETY: both buffers are borrowed for this blocking call.
        fatal(
            unsafe {
                plan_rooted(
                    self.comm_data(),
                    "scatter_into_root",
                    self.root_rank(),
                    Rooted::Scatter(None),
                    Some(&s),
                    Some(&r),
                    true,
                )
            }
            .and_then(|x| x.wait("scatter_into_root")),
        )
    }

    /// Receives this member's part from the root of a scatter with a count per member.
    #[track_caller]
    fn scatter_varcount_into<R: ?Sized + BufferMut>(&self, recvbuf: &mut R) {
        let r = recvbuf.layout_mut();
        let n = self.comm_data().peers().size();
        let blocks = vec![(0, 0); n];
        // SAFETY: the buffer is borrowed for this blocking call.
        fatal(
            unsafe {
                plan_rooted(
                    self.comm_data(),
                    "scatter_varcount_into",
                    self.root_rank(),
                    Rooted::Scatter(Some(blocks)),
                    None,
                    Some(&r),
                    true,
                )
            }
            .and_then(|x| x.wait("scatter_varcount_into")),
        )
    }

    /// The root sends part j of `sendbuf` to member j.
    #[track_caller]
    fn scatter_varcount_into_root<S: ?Sized + PartitionedBuffer, R: ?Sized + BufferMut>(
        &self,
        sendbuf: &S,
        recvbuf: &mut R,
    ) {
        const CALL: &str = "scatter_varcount_into_root";
        let s = sendbuf.layout();
        let c = self.comm_data();
        let blocks = fatal(parts_of(CALL, "send buffer", c, &s, sendbuf));
        let r = recvbuf.layout_mut();
        // SAFETY: both buffers are borrowed for this blocking call.
        fatal(
            unsafe {
                plan_rooted(
                    c,
                    CALL,
                    self.root_rank(),
                    Rooted::Scatter(Some(blocks)),
                    Some(&s),
                    Some(&r),
                    true,
                )
            }
            .and_then(|x| x.wait(CALL)),
        )
    }

    /// Contributes `sendbuf` to a reduction at the root (a member that is not the root).
    #[track_caller]
    fn reduce_into<S: ?Sized + Buffer, O: Operation>(&self, sendbuf: &S, op: O) {
        let s = sendbuf.layout();
        // SAFETY: the buffer and the operation are borrowed for this blocking call.
        fatal(
            unsafe {
                plan_reduce(
                    self.comm_data(),
                    "reduce_into",
                    self.root_rank(),
                    &s,
                    None,
                    &op,
                    true,
                )
            }
            .and_then(|x| x.wait("reduce_into")),
        )
    }

    /// The root gets the reduction of every member's `sendbuf` in `recvbuf`.
    #[track_caller]
    fn reduce_into_root<S: ?Sized + Buffer, R: ?Sized + BufferMut, O: Operation>(
        &self,
        sendbuf: &S,
        recvbuf: &mut R,
        op: O,
    ) {
        let (s, r) = (sendbuf.layout(), recvbuf.layout_mut());
        // SAFETY: both buffers and the operation are borrowed for this blocking call.
        fatal(
            unsafe {
                plan_reduce(
                    self.comm_data(),
                    "reduce_into_root",
                    self.root_rank(),
                    &s,
                    Some(&r),
                    &op,
                    true,
                )
            }
            .and_then(|x| x.wait("reduce_into_root")),
        )
    }

    /// Starts [`broadcast_into`](Self::broadcast_into).
    #[track_caller]
    fn immediate_broadcast_into<'a, Buf: ?Sized + 'a + BufferMut, Sc: Scope<'a>>(
        &self,
        scope: Sc,
        buf: &'a mut Buf,
    ) -> Request<'a, Buf, Sc> {
        let c = self.comm_data();
        let l = buf.layout_mut();
        // SAFETY: the buffer is borrowed for 'a, which the request (settled by its scope)
        // does not outlive.
        let started = fatal(unsafe { plan_broadcast(c, self.root_rank(), &l, false) });
        started.into_request("immediate_broadcast_into", c, buf, scope)
    }

    /// Starts [`gather_into`](Self::gather_into).
    #[track_caller]
    fn immediate_gather_into<'a, S: ?Sized + 'a + Buffer, Sc: Scope<'a>>(
        &self,
        scope: Sc,
        sendbuf: &'a S,
    ) -> Request<'a, S, Sc> {
        let c = self.comm_data();
        let s = sendbuf.layout();
        // SAFETY: as in `immediate_broadcast_into`.
        let started = fatal(unsafe {
            plan_rooted(
                c,
                "immediate_gather_into",
                self.root_rank(),
                Rooted::Gather(None),
                Some(&s),
                None,
                false,
            )
        });
        started.into_request("immediate_gather_into", c, sendbuf, scope)
    }

    /// Starts [`gather_into_root`](Self::gather_into_root).
    #[track_caller]
    fn immediate_gather_into_root<
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
        // SAFETY: as in `immediate_broadcast_into`.
        let started = fatal(unsafe {
            plan_rooted(
                c,
                "immediate_gather_into_root",
                self.root_rank(),
                Rooted::Gather(None),
                Some(&s),
                Some(&r),
                false,
            )
        });
        started.into_request("immediate_gather_into_root", c, recvbuf, scope)
    }

    /// Starts [`gather_varcount_into`](Self::gather_varcount_into).
    #[track_caller]
    fn immediate_gather_varcount_into<'a, Sc: Scope<'a>, S: ?Sized + 'a + Buffer>(
        &self,
        scope: Sc,
        sendbuf: &'a S,
    ) -> Request<'a, S, Sc> {
        let c = self.comm_data();
        let s = sendbuf.layout();
        let blocks = vec![(0, 0); c.peers().size()];
        // SAFETY: as in `immediate_broadcast_into`.
        let started = fatal(unsafe {
            plan_rooted(
                c,
                "immediate_gather_varcount_into",
                self.root_rank(),
                Rooted::Gather(Some(blocks)),
                Some(&s),
                None,
                false,
            )
        });
        started.into_request("immediate_gather_varcount_into", c, sendbuf, scope)
    }

    /// Starts [`gather_varcount_into_root`](Self::gather_varcount_into_root).
    #[track_caller]
    fn immediate_gather_varcount_into_root<
        'a,
        Sc: Scope<'a>,
        S: ?Sized + 'a + Buffer,
        R: ?Sized + 'a + PartitionedBufferMut,
    >(
        &self,
        scope: Sc,
        sendbuf: &'a S,
        recvbuf: &'a mut R,
    ) -> Request<'a, R, Sc> {
        const CALL: &str = "immediate_gather_varcount_into_root";
        let c = self.comm_data();
        let s = sendbuf.layout();
        let cd = counts_displs(&*recvbuf);
        let r = recvbuf.layout_mut();
        let blocks = fatal(parts(
            CALL,
            "receive buffer",
            c.peers().size(),
            &r,
            &cd.0,
            &cd.1,
        ));
        // SAFETY: as in `immediate_broadcast_into`.
        let started = fatal(unsafe {
            plan_rooted(
                c,
                CALL,
                self.root_rank(),
                Rooted::Gather(Some(blocks)),
                Some(&s),
                Some(&r),
                false,
            )
        });
        started.into_request(CALL, c, recvbuf, scope)
    }

    /// Starts [`scatter_into`](Self::scatter_into).
    #[track_caller]
    fn immediate_scatter_into<'a, Sc: Scope<'a>, R: ?Sized + 'a + BufferMut>(
        &self,
        scope: Sc,
        recvbuf: &'a mut R,
    ) -> Request<'a, R, Sc> {
        let c = self.comm_data();
        let r = recvbuf.layout_mut();
        // SAFETY: as in `immediate_broadcast_into`.
        let started = fatal(unsafe {
            plan_rooted(
                c,
                "immediate_scatter_into",
                self.root_rank(),
                Rooted::Scatter(None),
                None,
                Some(&r),
                false,
            )
        });
        started.into_request("immediate_scatter_into", c, recvbuf, scope)
    }

    /// Starts [`scatter_into_root`](Self::scatter_into_root).
    #[track_caller]
    fn immediate_scatter_into_root<
        'a,
        Sc: Scope<'a>,
        S: ?Sized + 'a + Buffer,
        R: ?Sized + 'a + BufferMut,
    >(
        &self,
        scope: Sc,
        sendbuf: &'a S,
        recvbuf: &'a mut R,
    ) -> Request<'a, R, Sc> {
        let c = self.comm_data();
        let (s, r) = (sendbuf.layout(), recvbuf.layout_mut());
        // SAFETY: as in `immediate_broadcast_into`.
        let started = fatal(unsafe {
            plan_rooted(
                c,
                "immediate_scatter_into_root",
                self.root_rank(),
                Rooted::Scatter(None),
                Some(&s),
                Some(&r),
                false,
            )
        });
        started.into_request("immediate_scatter_into_root", c, recvbuf, scope)
    }

    /// Starts [`scatter_varcount_into`](Self::scatter_varcount_into).
    #[track_caller]
    fn immediate_scatter_varcount_into<'a, Sc: Scope<'a>, R: ?Sized + 'a + BufferMut>(
        &self,
        scope: Sc,
        recvbuf: &'a mut R,
    ) -> Request<'a, R, Sc> {
        let c = self.comm_data();
        let r = recvbuf.layout_mut();
        let blocks = vec![(0, 0); c.peers().size()];
        // SAFETY: as in `immediate_broadcast_into`.
        let started = fatal(unsafe {
            plan_rooted(
                c,
                "immediate_scatter_varcount_into",
                self.root_rank(),
                Rooted::Scatter(Some(blocks)),
                None,
                Some(&r),
                false,
            )
        });
        started.into_request("immediate_scatter_varcount_into", c, recvbuf, scope)
    }

    /// Starts [`scatter_varcount_into_root`](Self::scatter_varcount_into_root).
    #[track_caller]
    fn immediate_scatter_varcount_into_root<
        'a,
        Sc: Scope<'a>,
        S: ?Sized + 'a + PartitionedBuffer,
        R: ?Sized + 'a + BufferMut,
    >(
        &self,
        scope: Sc,
        sendbuf: &'a S,
        recvbuf: &'a mut R,
    ) -> Request<'a, R, Sc> {
        const CALL: &str = "immediate_scatter_varcount_into_root";
        let c = self.comm_data();
        let s = sendbuf.layout();
        let blocks = fatal(parts_of(CALL, "send buffer", c, &s, sendbuf));
        let r = recvbuf.layout_mut();
        // SAFETY: as in `immediate_broadcast_into`.
        let started = fatal(unsafe {
            plan_rooted(
                c,
                CALL,
                self.root_rank(),
                Rooted::Scatter(Some(blocks)),
                Some(&s),
                Some(&r),
                false,
            )
        });
        started.into_request(CALL, c, recvbuf, scope)
    }

    /// Starts [`reduce_into`](Self::reduce_into).
    #[track_caller]
    fn immediate_reduce_into<'a, Sc: Scope<'a>, S: ?Sized + 'a + Buffer, O: 'a + Operation>(
        &self,
        scope: Sc,
        sendbuf: &'a S,
        op: O,
    ) -> Request<'a, S, Sc> {
        let c = self.comm_data();
        let s = sendbuf.layout();
        // SAFETY: as in `immediate_broadcast_into`; the operation lives for 'a too.
        let started = fatal(unsafe {
            plan_reduce(
                c,
                "immediate_reduce_into",
                self.root_rank(),
                &s,
                None,
                &op,
                false,
            )
        });
        started.into_request("immediate_reduce_into", c, sendbuf, scope)
    }

    /// Starts [`reduce_into_root`](Self::reduce_into_root).
    #[track_caller]
    fn immediate_reduce_into_root<
        'a,
        Sc: Scope<'a>,
        S: ?Sized + 'a + Buffer,
        R: ?Sized + 'a + BufferMut,
        O: 'a + Operation,
    >(
        &self,
        scope: Sc,
        sendbuf: &'a S,
        recvbuf: &'a mut R,
        op: O,
    ) -> Request<'a, R, Sc> {
        let c = self.comm_data();
        let (s, r) = (sendbuf.layout(), recvbuf.layout_mut());
        // SAFETY: as in `immediate_reduce_into`.
        let started = fatal(unsafe {
            plan_reduce(
                c,
                "immediate_reduce_into_root",
                self.root_rank(),
                &s,
                Some(&r),
                &op,
                false,
            )
        });
        started.into_request("immediate_reduce_into_root", c, recvbuf, scope)
    }
}

impl Root for Process<'_> {
    fn root_rank(&self) -> Rank {
        self.rank()
    }
}
