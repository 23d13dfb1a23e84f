//! How every collective call runs: its buffers become the schedule's input and output
//! (contiguous plain data in place; other layouts packed, or staged and scattered at
//! completion), `coll` builds the steps, the engine runs them; a blocking form waits, an
//! immediate form returns a request.

use crate::api::datatype::Layout;
use crate::api::point_to_point::{group_of, Staged};
use crate::api::request::{Request, Scope};
use crate::coll::shm::NodeArea;
use crate::coll::{Members, Schedule};
use crate::comm::node_memory::NodeSegment;
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
}

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
    let input = bufs.input.map(|l| match l.contiguous_bytes() {
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
        let members = Members {
            world: comm.group.members(),
            me: comm.rank as usize,
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
    })
}

impl Started {
    /// A collective that has completed already.
    pub(crate) fn done() -> Self {
        Started {
            handle: None,
            staged: None,
        }
    }

    /// Waits for completion and lands a staged output.
    pub(crate) fn wait(self, call: &'static str) -> Result<()> {
        let Some(h) = self.handle else {
            return Ok(());
        };
        let r = runtime::with_call(call, |rt| rt.engine.wait(h));
        r?;
        if let Some(s) = &self.staged {
            // SAFETY: the output buffer is still borrowed by the blocking call.
            unsafe { s.land(call, s.tmp.len())? };
        }
        Ok(())
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
        match self.staged {
            None => r,
            Some(s) => r.with_finish(Box::new(move |_| {
                // SAFETY: the finish runs when the request completes, while the output is
                // still borrowed for 'a (the request cannot outlive it).
                unsafe { s.land(call, s.tmp.len()) }
            })),
        }
    }
}

/// A collective the node-shared area runs (`coll::shm`).
pub(crate) enum ShmOp {
    Barrier,
    Bcast {
        root: usize,
    },
    /// Reduce to `root`, or allreduce (`None`).
    Reduce {
        root: Option<usize>,
        combine: Combine,
    },
    Scan {
        combine: Combine,
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
        combine: Combine,
    },
}

/// Runs blocking collective `call` through the node-shared area of `comm` when its members
/// all share this node and each writes at most a slot (`writes` bytes): `None` when that
/// does not apply, and the collective must go by messages. Every member decides alike: the
/// decision depends only on the communicator, the sizes and the tunables.
pub(crate) fn blocking_shm(
    call: &'static str,
    comm: &CommData,
    bufs: Buffers<'_>,
    writes: usize,
    op: ShmOp,
) -> Option<Result<()>> {
    runtime::with_call(call, |rt| {
        if !rt.tunables.coll_shm || writes > rt.tunables.coll_shm_slot || comm.size() < 2 {
            return None;
        }
        if !rt.node_areas.contains_key(&comm.pair) {
            let area = match new_area(rt, comm) {
                Ok(a) => a,
                Err(e) => return Some(Err(e)),
            };
            rt.node_areas.insert(comm.pair, area);
        }
        let runtime::Runtime {
            engine, node_areas, ..
        } = rt;
        let area = node_areas.get_mut(&comm.pair)?.as_mut()?;
        Some(run_shm(call, area, engine, bufs, op))
    })
}

/// The area of `comm`, made now (collectively) if its members all share this node.
fn new_area(rt: &mut runtime::Runtime, comm: &CommData) -> Result<Option<NodeArea>> {
    let members = comm.group.members();
    if !comm.node_topology(&rt.boot.node_of).single_node() {
        return Ok(None);
    }
    let slot = rt.tunables.coll_shm_slot;
    let len = NodeArea::size_for(members.len(), slot);
    let tag = rt.sequences.next_tag(comm.pair);
    let me = comm.rank as usize;
    let seg = NodeSegment::allocate(&mut rt.engine, comm.coll_context(), tag, members, me, len)?;
    Ok(Some(NodeArea::new(seg, members.to_vec(), me, slot)))
}

fn run_shm(
    call: &'static str,
    area: &mut NodeArea,
    engine: &mut crate::engine::Engine<crate::fabric::node::NodeFabric>,
    bufs: Buffers<'_>,
    op: ShmOp,
) -> Result<()> {
    let packed;
    let src: &[u8] = match bufs.input {
        None => &[],
        Some(l) => match l.contiguous_bytes() {
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
    let result = match op {
        ShmOp::Barrier => {
            area.barrier(engine);
            Ok(())
        }
        ShmOp::Bcast { root } => area.bcast(engine, root, dst),
        ShmOp::Reduce { root, combine } => area.reduce(engine, root, src, dst, &combine),
        ShmOp::Scan { combine, exclusive } => area.scan(engine, src, dst, &combine, exclusive),
        ShmOp::Gather { root } => area.gather(engine, root, src, dst),
        ShmOp::Scatter { root } => area.scatter(engine, root, src, dst),
        ShmOp::Alltoall => area.alltoall(engine, src, dst),
        ShmOp::ReduceScatterBlock { combine } => {
            area.reduce_scatter_block(engine, src, dst, &combine)
        }
    };
    result.map_err(|m| {
        Error::new(
            ErrorClass::Count,
            call,
            format!(
                "member {} gave {} bytes where this member gave {}: the members called {call} \
                 with different sizes",
                m.member, m.theirs, m.mine
            ),
        )
    })?;
    if let Some(s) = &staged {
        // SAFETY: the output buffer is still borrowed by the blocking call.
        unsafe { s.land(call, s.tmp.len())? };
    }
    Ok(())
}
