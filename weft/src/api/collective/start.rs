//! How every collective call runs: its buffers become the schedule's input and output
//! (contiguous plain data in place; other layouts packed, or staged and scattered at
//! completion), `coll` builds the steps, the engine runs them; a blocking form waits, an
//! immediate form returns a request.

use super::hierarchy::{Hierarchy, NodeEngine};
use crate::api::datatype::Layout;
use crate::api::point_to_point::{group_of, Staged};
use crate::api::request::{Request, Scope};
use crate::coll::shm::{
    allgather_by_copies_fits, AreaError, NodeArea, SizeMismatch, REDUCE_SCATTER_COPIES_FROM,
};
use crate::coll::{model, Members, Schedule};
use crate::comm::node_memory::{Allocated, NodeSegment};
use crate::comm::CommData;
use crate::engine::buffer::{RawBuf, RawBufMut};
use crate::engine::request::Handle;
use crate::engine::schedule::Combine;
use crate::error::{Error, ErrorClass, Result};
use crate::runtime;
use crate::tunables::Tunables;

/// A collective started in the engine, or already done (through the node-shared area).
pub(crate) struct Started {
    /// `None`: done already.
    handle: Option<Handle>,
    /// Where a non-contiguous output lands; scattered into the buffer at completion.
    staged: Option<Staged>,
    /// What lands the output of a collective with parts of their own layouts (all-to-all-w)
    /// at completion, after `staged`.
    then: Option<Then>,
}

/// Lands a collective's output in the caller's buffers at completion (given the call's name
/// for its errors).
pub(crate) type Then = Box<dyn FnOnce(&'static str) -> Result<()>>;

/// What a collective reads and writes.
#[derive(Clone, Copy)]
pub(crate) struct Buffers<'l> {
    /// The data this member contributes (`None`: nothing, or it is in `output`).
    pub input: Option<&'l Layout<'l>>,
    /// Where the result goes.
    pub output: Option<&'l Layout<'l>>,
    /// Whether the operation reads `output` too (a broadcast's root, in-place forms).
    pub prefill: bool,
}

impl<'l> Buffers<'l> {
    /// `input` and `output`, the output not read before it is written.
    pub(super) fn of(input: Option<&'l Layout<'l>>, output: Option<&'l Layout<'l>>) -> Self {
        Buffers {
            input,
            output,
            prefill: false,
        }
    }

    /// Whether the input lies in the output (an in-place form: the input is a view of the
    /// output buffer, or of one member's block of it). Then the input is copied when the
    /// collective starts, so no algorithm reads what it has already overwritten.
    pub(super) fn in_place(&self) -> bool {
        match (self.input, self.output) {
            (Some(i), Some(o)) => overlap(i, o),
            _ => false,
        }
    }
}

/// Whether two layouts' data share addresses.
#[inline]
fn overlap(a: &Layout<'_>, b: &Layout<'_>) -> bool {
    matches!((reach(a), reach(b)), (Some(a), Some(b)) if a.0 < b.1 && b.0 < a.1)
}

/// The addresses `[first, end)` a layout's data lies within (`None`: no data).
fn reach(l: &Layout<'_>) -> Option<(usize, usize)> {
    let len = l.data_len();
    if len == 0 {
        return None;
    }
    if l.map.is_contiguous() {
        // The common case, on every call's path: no walk over the blocks.
        let base = l.ptr as usize;
        return Some((base, base + len));
    }
    let blocks = l.map.blocks();
    let lo = blocks.iter().map(|b| b.0).min().unwrap_or(0);
    let hi = blocks.iter().map(|b| b.0 + b.1 as isize).max().unwrap_or(0);
    let base = l.ptr as usize as isize;
    let last = ((l.count - 1) * l.map.extent()) as isize;
    Some(((base + lo) as usize, (base + last + hi) as usize))
}

/// Starts collective `call` on `comm`: `build` adds the steps for the member counts and
/// sizes it knows, over the schedule's input (bytes of the packed input) and output.
///
/// # Safety
/// The layouts come from buffers that stay borrowed (the input shared, the output
/// exclusively) until the returned collective has completed.
pub(crate) unsafe fn start(
    call: &'static str,
    comm: &CommData,
    bufs: Buffers<'_>,
    combine: Option<Combine>,
    build: impl FnOnce(&mut Schedule, &Members, &Tunables),
) -> Result<Started> {
    let mut packed = None;
    let in_place = bufs.in_place();
    let input = bufs
        .input
        .map(|l| match l.contiguous_bytes().filter(|_| !in_place) {
            // SAFETY: the input layout's bytes stay borrowed until completion (the caller's
            // promise).
            Some(bytes) => unsafe { RawBuf::new(bytes) },
            _ => {
                let v = l.pack();
                // SAFETY: the packed copy moves into the schedule (`keep` below), which lives
                // until the collective completes; moving a Vec does not move its heap block.
                let view = unsafe { RawBuf::new(&v) };
                packed = Some(v);
                view
            }
        });
    let mut staged = None;
    let output = bufs.output.map(|l| {
        if l.map.is_contiguous() && !l.map.is_restricted() {
            // SAFETY: a BufferMut's layout: `data_len` writable contiguous bytes, borrowed
            // exclusively until completion (the caller's promise).
            unsafe {
                RawBufMut::new(std::slice::from_raw_parts_mut(
                    l.ptr as *mut u8,
                    l.data_len(),
                ))
            }
        } else {
            let mut s = if bufs.prefill || l.map.is_restricted() {
                Staged::with_contents(l)
            } else {
                Staged::with_zeros(l)
            };
            // SAFETY: the staging vector is kept in `Started` until the collective completes;
            // moving it does not move its heap block.
            let view = unsafe { RawBufMut::new(&mut s.tmp) };
            staged = Some(s);
            view
        }
    });
    let handle = runtime::with_call(call, |rt| {
        let tag = rt.sequences.next_tag(comm.pair);
        let mut s = Schedule::new(call, comm.coll_context(), tag);
        if let Some(i) = input {
            s = s.with_input(i);
        }
        if let Some(o) = output {
            s = s.with_output(o);
        }
        if let Some(c) = combine {
            s = s.with_combine(c);
        }
        if let Some(v) = packed {
            s.keep(v);
        }
        let topo = comm.node_topology(&rt.boot.node_of);
        let members = Members {
            world: comm.group.members(),
            me: comm.rank as usize,
            nodes: topo.leaders.len(),
            node_of: &topo.node_of_member,
        };
        build(&mut s, &members, &rt.tunables);
        // SAFETY: the input and output views are the caller's buffers (borrowed until
        // completion, its promise), the packed copy the schedule keeps, and the staging
        // vector `Started` keeps until completion.
        unsafe { rt.engine.start_schedule(s) }
    });
    Ok(Started {
        handle: Some(handle),
        staged,
        then: None,
    })
}

impl Started {
    /// A collective that has completed already.
    pub(crate) fn done() -> Self {
        Started {
            handle: None,
            staged: None,
            then: None,
        }
    }

    /// The collective, with `land` to run when it completes (in `wait`, `test`, or the
    /// finish of its request).
    ///
    /// # Safety
    /// Whatever `land` writes stays borrowed (mutably) until the collective completes.
    pub(crate) unsafe fn then(mut self, land: Then) -> Self {
        debug_assert!(self.then.is_none());
        self.then = Some(land);
        self
    }

    /// Waits for completion and lands a staged output.
    #[inline]
    pub(crate) fn wait(self, call: &'static str) -> Result<()> {
        match self.handle {
            // Done already (the node-shared area's path): nothing to move or drop here, but
            // for what lands the output of a collective with parts.
            None => self.then.map_or(Ok(()), |land| land(call)),
            Some(h) => self.wait_for(h, call),
        }
    }

    /// Whether the collective has completed (progressing it once); when it has, a staged
    /// output has landed, and the collective is over (drop it: do not wait for it).
    ///
    /// # Safety
    /// The output buffer is still borrowed as the collective's start required.
    pub(crate) unsafe fn test(&mut self, call: &'static str) -> Result<bool> {
        if let Some(h) = self.handle {
            if runtime::with_call(call, |rt| rt.engine.test(h))?.is_none() {
                return Ok(false);
            }
            self.handle = None;
        }
        // SAFETY: the caller's promise.
        unsafe { self.land(call)? };
        Ok(true)
    }

    fn wait_for(mut self, h: Handle, call: &'static str) -> Result<()> {
        let r = runtime::with_call(call, |rt| rt.engine.wait(h));
        r?;
        // SAFETY: the output buffer is still borrowed by the blocking call.
        unsafe { self.land(call) }
    }

    /// Lands what the completed collective staged (once: what landed is gone).
    ///
    /// # Safety
    /// The output buffers are still borrowed as the collective's start required.
    unsafe fn land(&mut self, call: &'static str) -> Result<()> {
        if let Some(s) = self.staged.take() {
            // SAFETY: the caller's promise.
            unsafe { s.land(call, s.tmp.len())? };
        }
        match self.then.take() {
            Some(land) => land(call),
            None => Ok(()),
        }
    }

    /// The request of an immediate form over `data`.
    pub(crate) fn into_request<'a, D: ?Sized, Sc: Scope<'a>>(
        self,
        call: &'static str,
        comm: &CommData,
        data: &'a D,
        scope: Sc,
    ) -> Request<'a, D, Sc> {
        let h = self
            .handle
            .expect("immediate forms never take the shared-area path");
        let r = Request::new(h, data as *const D, group_of(comm), scope);
        if self.staged.is_none() && self.then.is_none() {
            return r;
        }
        let mut rest = Started {
            handle: None,
            ..self
        };
        // SAFETY: the finish runs when the request completes, while the output is still
        // borrowed for 'a (the request cannot outlive it).
        r.with_finish(Box::new(move |_| unsafe { rest.land(call) }))
    }
}

/// A collective the node-shared area runs (`coll::shm`); it borrows the reduction's combine
/// function (made once per call: no count to raise and drop on the area's path).
#[derive(Clone, Copy)]
pub(crate) enum ShmOp<'c> {
    Barrier,
    Bcast {
        root: usize,
    },
    /// Reduce to `root`, or allreduce (`None`).
    Reduce {
        root: Option<usize>,
        combine: &'c Combine,
        /// Whether the operation commutes (the hierarchical form needs it).
        commutative: bool,
        /// Bytes of one element (the area cuts the vector at these).
        elem: usize,
    },
    Scan {
        combine: &'c Combine,
        elem: usize,
        exclusive: bool,
    },
    /// Gather to `root`, or allgather (`None`).
    Gather {
        root: Option<usize>,
    },
    Scatter {
        root: usize,
    },
    Alltoall,
    ReduceScatterBlock {
        combine: &'c Combine,
        /// Whether the operation commutes (2 members then go by single copies).
        commutative: bool,
        elem: usize,
    },
}

/// Runs blocking collective `call` through the node-shared areas of `comm` when that applies,
/// and returns `None` when the collective must go by messages instead:
/// - members all on this node: every member writes at most a slot (`writes` bytes): the
///   whole collective in the area;
/// - members on several nodes: barrier, broadcast, reduce and allreduce with a commutative
///   operation, gather, scatter and allgather (within a slot) run hierarchically (see
///   `hierarchy`): each node's members through their node's area, the node leaders by
///   messages among themselves (each node receives the inter-node data once).
///
/// Every member decides alike: the decision depends only on the communicator, the sizes and
/// the tunables.
pub(crate) fn blocking_shm(
    call: &'static str,
    comm: &CommData,
    bufs: Buffers<'_>,
    writes: usize,
    op: ShmOp,
) -> Option<Result<()>> {
    runtime::with_call(call, |rt| {
        // The area is shared memory: not when the job keeps ranks off it (WEFT_TRANSPORTS
        // without shm), where nothing would wake a member asleep in its sockets' poll.
        let t = &rt.tunables;
        let slot = t.coll_slot(comm.size());
        if !t.coll_shm
            || !t.transports.shm
            || !op.fits(writes, slot, comm.size() as usize, t)
            || comm.size() < 2
        {
            return None;
        }
        // Borrowed from the communicator (cached there): no copy on this fast path.
        let topo = comm.node_topology(&rt.boot.node_of);
        let hierarchical = !topo.single_node();
        if hierarchical
            && (writes > slot || !Hierarchy::applies(&op, writes, comm.size() as usize, slot))
        {
            return None;
        }
        if !rt.node_areas.contains(comm.pair) {
            let area = match new_area(rt, comm, topo) {
                Ok(a) => a,
                Err(e) => return Some(Err(e)),
            };
            rt.node_areas.insert(comm.pair, area);
        }
        if !hierarchical {
            let runtime::Runtime {
                engine,
                node_areas,
                tunables,
                ..
            } = rt;
            let area = node_areas.get_mut(comm.pair)?.as_mut()?;
            if op.by_messages_on(area, writes, tunables.eager_limit) {
                return None;
            }
            return Some(with_bytes(call, bufs, |src, dst| {
                run_shm(area, engine, op, src, dst)
            }));
        }
        // The leaders' exchange uses a collective tag: every member takes it, leader or not,
        // so that all keep counting alike.
        let tag = rt.sequences.next_tag(comm.pair);
        let leaders: Vec<u32> = topo.leaders.iter().map(|&r| comm.world_rank(r)).collect();
        let runtime::Runtime {
            engine,
            node_areas,
            tunables,
            ..
        } = rt;
        let area = node_areas.get_mut(comm.pair).and_then(|a| a.as_mut());
        let h = Hierarchy {
            comm,
            topo,
            leaders: &leaders,
            tag,
            tunables,
        };
        Some(with_bytes(call, bufs, |src, dst| {
            h.run(call, area, engine, op, src, dst)
                .map_err(AreaError::from)
        }))
    })
}

/// The area of `comm` over its members on this node (made now, collectively among them), or
/// `None` when this member is alone on its node, or when the node has no room for it and
/// `comm` is on this node only (its collectives then send messages, at every member alike).
/// Every member of `comm` takes a collective tag for it, so that all keep counting alike.
fn new_area(
    rt: &mut runtime::Runtime,
    comm: &CommData,
    topo: &crate::comm::node_topology::NodeTopology,
) -> Result<Option<NodeArea>> {
    let tag = rt.sequences.next_tag(comm.pair);
    if topo.local.len() < 2 {
        return Ok(None);
    }
    let local: Vec<u32> = topo.local.iter().map(|&r| comm.world_rank(r)).collect();
    let slot = rt.tunables.coll_slot(comm.size());
    let piece = rt.tunables.coll_piece(comm.size());
    let len = NodeArea::size_for(local.len(), piece);
    let me = topo.local_rank;
    let ctx = comm.coll_context();
    match NodeSegment::allocate(&mut rt.engine, ctx, tag, &local, me, len)? {
        Allocated::Made(seg) => {
            let mut area = NodeArea::new(seg, local, me, slot, piece);
            let ordinary = rt.tunables.coll_shm_stream.0.map(|v| v == 0);
            area.calibrate_stores(&mut rt.engine, ordinary, &mut rt.coll_stores);
            let t = &rt.tunables;
            area.agree_on_single_copy(&mut rt.engine, t.shm_single_copy, t.eager_limit);
            if area.n() > model::node_cpus(t) {
                area.let_receivers_copy(model::alltoall_pulls(t));
            }
            area.lend_on_huge_pages(t.huge_pages);
            Ok(Some(area))
        }
        // On several nodes the other nodes' members, who cannot know, go through their
        // areas: this node's must too.
        Allocated::Unmade(why) if !topo.single_node() => Err(Error::new(
            ErrorClass::Resource,
            "node-shared memory",
            why.unwrap_or_else(|| {
                format!(
                    "local rank 0 of this node could not make the collectives' area ({len} bytes)"
                )
            }),
        )),
        Allocated::Unmade(why) => {
            // Slower, not wrong: say so once per process, at the member that knows why.
            static SAID: std::sync::Once = std::sync::Once::new();
            if let Some(why) = why {
                SAID.call_once(|| {
                    eprintln!(
                        "weft: rank {}: no node-shared area for collectives ({why}); the \
                         collectives of such communicators send messages instead (a larger \
                         /dev/shm, or a smaller WEFT_COLL_SHM_SLOT, gives them one)",
                        rt.boot.rank
                    )
                });
            }
            Ok(None)
        }
    }
}

/// Runs `f` over the collective's data as bytes: the input (packed when its layout is not
/// contiguous) and the output (in place, or staged and scattered into the buffer afterwards).
fn with_bytes(
    call: &'static str,
    bufs: Buffers<'_>,
    f: impl FnOnce(&[u8], &mut [u8]) -> std::result::Result<(), AreaError>,
) -> Result<()> {
    let packed;
    let in_place = bufs.in_place();
    let src: &[u8] = match bufs.input {
        None => &[],
        Some(l) => match l.contiguous_bytes().filter(|_| !in_place) {
            Some(b) => b,
            None => {
                packed = l.pack();
                &packed
            }
        },
    };
    let mut staged = None;
    let mut direct: &mut [u8] = &mut [];
    if let Some(l) = bufs.output {
        if l.map.is_contiguous() && !l.map.is_restricted() {
            // SAFETY: a BufferMut's layout: `data_len` writable contiguous bytes, borrowed
            // exclusively by the blocking call that runs this.
            direct = unsafe { std::slice::from_raw_parts_mut(l.ptr as *mut u8, l.data_len()) };
        } else if bufs.prefill || l.map.is_restricted() {
            staged = Some(Staged::with_contents(l));
        } else {
            staged = Some(Staged::with_zeros(l));
        }
    }
    let dst: &mut [u8] = match &mut staged {
        Some(s) => &mut s.tmp,
        None => direct,
    };
    f(src, dst).map_err(|e| area_error(call, e))?;
    if let Some(s) = &staged {
        // SAFETY: the output buffer is still borrowed by the blocking call.
        unsafe { s.land(call, s.tmp.len())? };
    }
    Ok(())
}

/// The error of a collective `call` of the area that failed at this member.
fn area_error(call: &'static str, e: AreaError) -> Error {
    match e {
        AreaError::Sizes(m) => sizes_differ(call, m),
        AreaError::Copy(e) => Error::new(e.class, call, format!("{}: {}", e.call, e.detail)),
    }
}

/// The error of members that called `call` with different sizes.
fn sizes_differ(call: &'static str, m: SizeMismatch) -> Error {
    Error::new(
        ErrorClass::Count,
        call,
        format!(
            "member {} gave {} bytes where this member gave {}: the members called {call} with \
             different sizes",
            m.member, m.theirs, m.mine
        ),
    )
}

/// The lean path of a blocking collective on a communicator on this node whose area exists
/// already, writing at most a slot (`writes` bytes): `run` straight in the area, with none of
/// the general path's staging, shared-operation or closure layers (on the path of every small
/// collective, where they cost about as much as the collective itself: 2 ranks, 8 B
/// allreduce 0.18 against 0.126 µs with the CPUs together). `None`: take the general path
/// ([`blocking_shm`], which also makes the area on first use and runs the hierarchical
/// form).
#[inline]
pub(crate) fn in_area(
    call: &'static str,
    comm: &CommData,
    writes: usize,
    op: &ShmOp<'_>,
    run: impl FnOnce(&mut NodeArea, &mut NodeEngine) -> std::result::Result<(), AreaError>,
) -> Option<Result<()>> {
    runtime::with_call(call, |rt| {
        let t = &rt.tunables;
        if !t.coll_shm || !t.transports.shm {
            return None;
        }
        if !comm.node_topology(&rt.boot.node_of).single_node() {
            return None;
        }
        let runtime::Runtime {
            engine,
            node_areas,
            tunables,
            ..
        } = rt;
        let area = node_areas.get_mut(comm.pair)?.as_mut()?;
        // The area keeps the slot it was made with: no need to work it out again per call.
        if !op.fits(writes, area.slot(), comm.size() as usize, tunables)
            || op.by_messages_on(area, writes, tunables.eager_limit)
        {
            return None;
        }
        Some(run(area, engine).map_err(|e| area_error(call, e)))
    })
}

/// [`blocking_shm`]'s lean case: the collective `op` makes, in the area, over the buffers'
/// bytes as they lie ([`direct`]), through [`in_area`]. `None`: the general path must run it.
///
/// # Safety
/// As for [`direct`]: `bufs` holds the layouts of the blocking call's buffers, borrowed (the
/// output exclusively) until it returns.
#[inline]
pub(crate) unsafe fn in_area_directly<'c>(
    call: &'static str,
    comm: &CommData,
    bufs: Buffers<'_>,
    writes: usize,
    op: &impl Fn() -> ShmOp<'c>,
) -> Option<Result<()>> {
    // SAFETY: the caller's promise.
    let (src, dst) = unsafe { direct(bufs.input, bufs.output) }?;
    let op = op();
    in_area(call, comm, writes, &op, |area, engine| {
        run_shm(area, engine, op, src, dst)
    })
}

/// A blocking collective's data as they lie, for [`in_area`]: the input's bytes (none for
/// `None`) and the output's (none for `None`), when both are contiguous, the output holds no
/// restricted values and they do not overlap; `None` when the general path must pack, stage
/// or copy.
///
/// # Safety
/// `output` is the layout of a buffer borrowed exclusively by the blocking call that uses the
/// bytes, as `input` is the layout of a borrowed one.
#[inline]
pub(crate) unsafe fn direct<'b>(
    input: Option<&'b Layout<'b>>,
    output: Option<&'b Layout<'b>>,
) -> Option<(&'b [u8], &'b mut [u8])> {
    let src = match input {
        Some(l) => l.contiguous_bytes()?,
        None => &[],
    };
    let Some(out) = output else {
        return Some((src, &mut []));
    };
    if !out.map.is_contiguous() || out.map.is_restricted() {
        return None;
    }
    if input.is_some_and(|i| overlap(i, out)) {
        return None; // in place: the general path copies the input first
    }
    let len = out.data_len();
    if len == 0 {
        return Some((src, &mut []));
    }
    // SAFETY: a BufferMut's layout, contiguous (checked above): `len` writable bytes,
    // borrowed exclusively by the caller's blocking call (its promise), apart from `src`.
    Some((src, unsafe {
        std::slice::from_raw_parts_mut(out.ptr as *mut u8, len)
    }))
}

impl ShmOp<'_> {
    /// Whether the node-shared area of a communicator of `members` runs this collective when
    /// a member writes `writes` bytes into it, with `slot`-byte slots: within a slot, always.
    /// Larger, a piece of at most `Tunables::coll_piece` at a time (`NodeArea::in_pieces`),
    /// when `WEFT_COLL_SHM_PIECES` allows, for the collectives where that was measured faster
    /// than messages (`docs/performance.md`, 2026-11-26, second session): broadcasts,
    /// allreduces and allgathers, from 3 members reduces to one root too (an element within a
    /// piece), at 2 members broadcasts of a large buffer or more. At 4 and 8 ranks on 2 CPUs
    /// a 4 MiB broadcast took 374-491 µs and 958 through the area against 780-1,353 and 1,736
    /// by messages, an allreduce 1,693-2,365 and 4,146 against 1,852-3,604 and 5,800, an
    /// allgather 3,931-4,590 and 14,426 against 4,487-6,375 and 23,071; at 2 ranks (writing
    /// as the CPUs' probe says, `NodeArea::cores_shared_now`) a 1 MiB allreduce 81-91 against
    /// 119-183, an allgather 78-88 against 106-136, a broadcast 38-44 against 44-57. A gather
    /// to one root stays with messages, where the root copies each block once (4 ranks:
    /// 1,408-1,454 µs against 1,588-1,827), and so do a 2-member reduce to one root and a
    /// 2-member broadcast below a large buffer (256 KiB with both vCPUs on one core: 12 µs
    /// by messages, 16-31 through the area). Communicators on several nodes take the
    /// hierarchical form within a slot only. Where the area's members found ordinary stores
    /// cheaper, 2-member broadcasts and allgathers beyond the slot go by messages after all
    /// ([`ShmOp::by_messages_on`]). All-to-alls of blocks over the eager limit go by single
    /// copies from member to member, whatever their size, where the members can copy from
    /// each other's memory (`NodeArea::alltoall_by_copies`; by messages where they cannot,
    /// when larger than a slot); so do the allgathers `allgather_by_copies_fits` names.
    #[inline]
    pub(crate) fn fits(&self, writes: usize, slot: usize, members: usize, t: &Tunables) -> bool {
        writes <= slot
            || self.fits_in_pieces(writes, members, t)
            || self.by_copies_maybe(writes, members, t)
    }

    /// Whether the area may run this collective of more than a slot by single copies, from
    /// member to member (if its members can copy from each other's memory: `by_messages_on`
    /// says when they cannot): an all-to-all, a scatter or a gather to one root of blocks
    /// over the eager limit; an allgather as `allgather_by_copies_fits` says; a reduce-scatter
    /// on 2 members with a commutative operation from `REDUCE_SCATTER_COPIES_FROM` bytes a
    /// block.
    fn by_copies_maybe(&self, writes: usize, members: usize, t: &Tunables) -> bool {
        if !t.shm_single_copy || members < 2 {
            return false;
        }
        match self {
            ShmOp::Alltoall | ShmOp::Scatter { .. } => writes / members > t.eager_limit,
            ShmOp::Gather { root: Some(_) } => writes > t.eager_limit,
            ShmOp::Gather { root: None } => {
                allgather_by_copies_fits(members, writes, t.eager_limit)
            }
            ShmOp::ReduceScatterBlock {
                commutative: true, ..
            } => members == 2 && writes / 2 >= REDUCE_SCATTER_COPIES_FROM,
            _ => false,
        }
    }

    /// Whether a collective that [`ShmOp::fits`] goes by messages after all on `area`: an
    /// all-to-all, scatter, gather to a root or reduce-scatter larger than a slot whose members cannot copy
    /// from each other's memory (`NodeArea::*_by_copies_applies`); and where single copies
    /// win ([`NodeArea::single_copies_win`]: 2 members), a broadcast or an allgather beyond
    /// the slot (but for an allgather the area runs by single copies), and a scatter whose
    /// blocks are sent by rendezvous (over `eager_limit`) when the members cannot copy from each other's memory in the area's own way, each block
    /// copied once from the sender's buffer to the receiver's. On the Intel VM, 2 ranks, 64
    /// KiB blocks: scatter 5.8 µs by messages against 6.3 through the area; 32 KiB (sent
    /// eagerly, copied twice): 7.2 against 5.1.
    #[inline]
    fn by_messages_on(&self, area: &NodeArea, writes: usize, eager_limit: usize) -> bool {
        match self {
            ShmOp::Gather { root: None } if area.allgather_by_copies_applies(writes) => false,
            ShmOp::Bcast { .. } | ShmOp::Gather { root: None } => {
                writes > area.slot() && area.single_copies_win()
            }
            ShmOp::Scatter { .. } if area.scatter_by_copies_applies(writes / area.n()) => false,
            ShmOp::Scatter { .. } => {
                writes > area.slot() || writes / 2 > eager_limit && area.single_copies_win()
            }
            ShmOp::Alltoall => writes > area.slot() && !area.alltoall_by_copies_applies(writes),
            ShmOp::Gather { root: Some(_) } => {
                writes > area.slot() && !area.gather_by_copies_applies(writes)
            }
            ShmOp::ReduceScatterBlock { commutative, .. } => {
                writes > area.slot()
                    && !area.reduce_scatter_by_copies_applies(writes / 2, *commutative)
            }
            _ => false,
        }
    }

    /// [`ShmOp::fits`] beyond the slot (out of line: small collectives never get here).
    #[inline(never)]
    fn fits_in_pieces(&self, writes: usize, members: usize, t: &Tunables) -> bool {
        if !t.coll_shm_pieces || members < 2 {
            return false;
        }
        let piece = t.coll_piece(members as u32);
        match self {
            ShmOp::Bcast { .. } => members >= 3 || writes >= piece,
            ShmOp::Gather { root: None } => true,
            ShmOp::Reduce {
                root: None, elem, ..
            } => *elem <= piece,
            ShmOp::Reduce { elem, .. } => members >= 3 && *elem <= piece,
            _ => false,
        }
    }
}

/// A collective of a single-node communicator, in its area.
#[inline]
fn run_shm(
    area: &mut NodeArea,
    engine: &mut NodeEngine,
    op: ShmOp,
    src: &[u8],
    dst: &mut [u8],
) -> std::result::Result<(), AreaError> {
    match op {
        ShmOp::Barrier => area.barrier(engine),
        ShmOp::Bcast { root } => area.bcast(engine, root, dst)?,
        ShmOp::Reduce {
            root,
            combine,
            commutative,
            elem,
        } => reduce_in_area(area, engine, root, src, dst, combine, commutative, elem)?,
        ShmOp::Scan {
            combine,
            elem,
            exclusive,
        } => area.scan(engine, src, dst, combine, elem, exclusive)?,
        ShmOp::Gather { root: Some(root) } if area.gather_by_copies_applies(src.len()) => {
            area.gather_by_copies(engine, root, src, dst)?
        }
        ShmOp::Gather { root: None } if area.allgather_by_copies_applies(src.len()) => {
            area.allgather_by_copies(engine, src, dst)?
        }
        ShmOp::Gather { root } => area.gather(engine, root, src, dst)?,
        ShmOp::Scatter { root } if area.scatter_by_copies_applies(dst.len()) => {
            area.scatter_by_copies(engine, root, src, dst)?
        }
        ShmOp::Scatter { root } => area.scatter(engine, root, src, dst)?,
        ShmOp::Alltoall if area.alltoall_by_copies_applies(src.len()) => {
            area.alltoall_by_copies(engine, src, dst)?
        }
        ShmOp::Alltoall => area.alltoall(engine, src, dst)?,
        ShmOp::ReduceScatterBlock {
            combine,
            commutative,
            elem,
        } => {
            if area.reduce_scatter_by_copies_applies(dst.len(), commutative) {
                area.reduce_scatter_by_copies(engine, src, dst, combine)?
            } else {
                area.reduce_scatter_block(engine, src, dst, combine, elem)?
            }
        }
    }
    Ok(())
}

/// A reduce to `root` or an allreduce (`None`) of a single-node communicator, in its area: by
/// single copies where that applies (`NodeArea::allreduce_by_copies_applies`).
#[inline]
#[allow(clippy::too_many_arguments)]
pub(crate) fn reduce_in_area(
    area: &mut NodeArea,
    engine: &mut NodeEngine,
    root: Option<usize>,
    src: &[u8],
    dst: &mut [u8],
    combine: &Combine,
    commutative: bool,
    elem: usize,
) -> std::result::Result<(), AreaError> {
    if root.is_none() && area.allreduce_by_copies_applies(src.len(), commutative) {
        return area.allreduce_by_copies(engine, src, dst, combine, elem);
    }
    Ok(area.reduce(engine, root, src, dst, combine, elem)?)
}

/// What a member called, as the checking mode (`WEFT_COLL_CHECK`) compares it.
pub(crate) struct Called {
    /// The call, without `immediate_` (a blocking and an immediate form may match).
    pub call: &'static str,
    pub root: Option<usize>,
    /// Bytes that must be equal at every member (`None`: counts that may differ).
    pub unit: Option<usize>,
    pub op: Option<&'static str>,
    /// The one predefined type the member's data is made of, when it is (`None`: a derived
    /// type, or no data): members whose data are of two different predefined types called
    /// with different type signatures, even when the sizes agree.
    pub elem: Option<crate::coll::op::Basic>,
}

/// The one predefined type `l`'s data is made of, if it is.
pub(crate) fn elem_of(l: &Layout<'_>) -> Option<crate::coll::op::Basic> {
    match l.map.elements(false) {
        Some(crate::coll::op::Elements::Basic(b)) => Some(b),
        _ => None,
    }
}

/// The predefined types a descriptor can name (it carries an index).
const BASICS: &[crate::coll::op::Basic] = {
    use crate::coll::op::Basic::*;
    &[
        I8, U8, I16, U16, I32, U32, I64, U64, I128, U128, F32, F64, Bool, C32, C64,
    ]
};

/// The collective calls the checking mode can name (a descriptor carries an index).
const CALLS: &[&str] = &[
    "barrier",
    "broadcast_into",
    "reduce_into",
    "all_reduce_into",
    "reduce_scatter_block_into",
    "scan_into",
    "exclusive_scan_into",
    "gather_into",
    "gather_varcount_into",
    "scatter_into",
    "scatter_varcount_into",
    "all_gather_into",
    "all_gather_varcount_into",
    "all_to_all_into",
    "all_to_all_varcount_into",
    "neighbor_all_gather_into",
    "neighbor_all_gather_varcount_into",
    "neighbor_all_to_all_into",
    "neighbor_all_to_all_varcount_into",
    "neighbor_all_to_all_w_into",
    "all_to_all_w_into",
    "reduce_scatter_varcount_into",
];
const OPS: &[&str] = &[
    "MPI_MAX",
    "MPI_MIN",
    "MPI_SUM",
    "MPI_PROD",
    "MPI_LAND",
    "MPI_BAND",
    "MPI_LOR",
    "MPI_BOR",
    "MPI_LXOR",
    "MPI_BXOR",
    "MPI_MINLOC",
    "MPI_MAXLOC",
    "MPI_REPLACE",
    "MPI_NO_OP",
    "a user operation",
    "a C user operation",
];

impl Called {
    /// The form every member compares: `_root` and `immediate_` dropped.
    fn base(call: &str) -> &str {
        let c = call.strip_prefix("immediate_").unwrap_or(call);
        c.strip_suffix("_root")
            .map_or(c, |b| if b.ends_with("_into") { b } else { c })
    }
    fn encode(&self) -> [u8; 24] {
        let idx = |list: &[&str], s: &str| {
            list.iter()
                .position(|x| *x == s)
                .map_or(u32::MAX, |i| i as u32)
        };
        let mut b = [0u8; 24];
        b[0..4].copy_from_slice(&idx(CALLS, Self::base(self.call)).to_le_bytes());
        b[4..8].copy_from_slice(&self.root.map_or(u32::MAX, |r| r as u32).to_le_bytes());
        b[8..16].copy_from_slice(&self.unit.map_or(u64::MAX, |u| u as u64).to_le_bytes());
        b[16..20].copy_from_slice(&self.op.map_or(u32::MAX, |o| idx(OPS, o)).to_le_bytes());
        let elem = self.elem.map_or(u32::MAX, |e| {
            BASICS
                .iter()
                .position(|x| *x == e)
                .map_or(u32::MAX, |i| i as u32)
        });
        b[20..24].copy_from_slice(&elem.to_le_bytes());
        b
    }

    /// Whether two members' descriptors agree: every field equal, but a predefined type
    /// that one of them does not know (a derived type) matches any.
    fn agree(a: &[u8], b: &[u8]) -> bool {
        let elem = |x: &[u8]| u32::from_le_bytes(x[20..24].try_into().expect("4 bytes"));
        a[..20] == b[..20] && (elem(a) == elem(b) || elem(a) == u32::MAX || elem(b) == u32::MAX)
    }
    fn describe(b: &[u8]) -> String {
        let word =
            |r: std::ops::Range<usize>| u32::from_le_bytes(b[r].try_into().expect("4 bytes"));
        let name = |list: &[&'static str], i: u32| list.get(i as usize).copied().unwrap_or("?");
        let mut d = name(CALLS, word(0..4)).to_string();
        if word(4..8) != u32::MAX {
            d += &format!(" with root {}", word(4..8));
        }
        let unit = u64::from_le_bytes(b[8..16].try_into().expect("8 bytes"));
        if unit != u64::MAX {
            d += &format!(" of {unit} bytes a member");
        }
        if word(16..20) != u32::MAX {
            d += &format!(" with {}", name(OPS, word(16..20)));
        }
        if let Some(e) = BASICS.get(word(20..24) as usize) {
            d += &format!(" of {e:?} elements");
        }
        d
    }
}

/// The checking mode: every member of `comm` sends what it called to every other (an
/// allgather), and each compares; a difference is an error naming both members and what
/// each called. Nothing when `WEFT_COLL_CHECK` is off.
#[inline]
pub(crate) fn check_call(comm: &CommData, called: Called) -> Result<()> {
    if !runtime::coll_check() {
        return Ok(());
    }
    compare_calls(comm, called)
}

fn compare_calls(comm: &CommData, called: Called) -> Result<()> {
    runtime::with_call(called.call, |rt| {
        let mine = called.encode();
        let members = comm.group.members();
        let me = comm.rank as usize;
        let all = crate::comm::allgather_among(
            &mut rt.engine,
            comm.coll_context(),
            crate::comm::TAG_CHECK,
            members,
            me,
            &mine,
        )?;
        for (j, theirs) in all.chunks_exact(mine.len()).enumerate() {
            if !Called::agree(theirs, &mine) {
                return Err(Error::new(
                    ErrorClass::Arg,
                    called.call,
                    format!(
                        "collective calls do not match (WEFT_COLL_CHECK): member {j} called {} \
                         where member {me} called {}",
                        Called::describe(theirs),
                        Called::describe(&mine)
                    ),
                ));
            }
        }
        Ok(())
    })
}
