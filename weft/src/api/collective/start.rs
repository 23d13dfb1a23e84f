//! How every collective call runs: its buffers become the schedule's input and output
//! (contiguous plain data in place; other layouts packed, or staged and scattered at
//! completion), `coll` builds the steps, the engine runs them; a blocking form waits, an
//! immediate form returns a request.

use crate::api::datatype::Layout;
use crate::api::point_to_point::{group_of, Staged};
use crate::api::request::{Request, Scope};
use crate::coll::{Members, Schedule};
use crate::comm::CommData;
use crate::engine::buffer::{RawBuf, RawBufMut};
use crate::engine::request::Handle;
use crate::engine::schedule::Combine;
use crate::error::Result;
use crate::runtime;
use crate::tunables::Tunables;

/// A collective started in the engine.
pub(crate) struct Started {
    handle: Handle,
    /// Where a non-contiguous output lands; scattered into the buffer at completion.
    staged: Option<Staged>,
}

/// What a collective reads and writes.
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
    Ok(Started { handle, staged })
}

impl Started {
    /// Waits for completion and lands a staged output.
    pub(crate) fn wait(self, call: &'static str) -> Result<()> {
        let h = self.handle;
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
        let r = Request::new(self.handle, data as *const D, group_of(comm), scope);
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
