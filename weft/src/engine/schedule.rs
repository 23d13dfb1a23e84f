//! Nonblocking schedules: a collective operation as a list of steps (send, receive, copy,
//! local reduction, fence) that the progress engine advances together with point-to-point
//! traffic. A blocking collective is start + wait; a nonblocking one is a request like any
//! other (test, wait, wait-any, detach).
//!
//! Steps run in order. Sends and receives are started as they are reached and do not block
//! the steps after them; a [`Step::Fence`] waits until every one started so far has
//! completed. Copies and reductions run when reached, so a schedule puts a fence before any
//! that reads what a receive writes (or writes what a send reads). The algorithms in `coll`
//! build schedules; this module only runs them and knows nothing of ranks' roles.
//!
//! A schedule's buffers are the user's input and output (raw views, lent for the life of the
//! request exactly as a nonblocking send or receive lends its buffer) and scratch vectors it
//! owns. Spans name a buffer by [`Area`], so a schedule is plain data: it can be built, checked
//! and printed without an engine.

use super::buffer::{RawBuf, RawBufMut};
use super::matching::Pattern;
use super::request::Handle;
use super::{Engine, SendMode};
use crate::error::Error;
use crate::fabric::Fabric;
use std::fmt;
use std::rc::Rc;

/// A local reduction on packed elements: `inout[i] = input[i] ∘ inout[i]` for every element
/// (the argument order of MPI's user functions). Both slices hold whole elements.
pub type Combine = Rc<dyn Fn(&[u8], &mut [u8])>;

/// A decision between steps ([`Step::Decide`]): it reads and writes the schedule's scratch
/// vectors (by [`Area::Scratch`] number; each at least as long as asked) and says where the
/// schedule goes on. A schedule with one repeats rounds until the members agree (context-id
/// agreement), as one request.
pub type Decide = Box<dyn FnMut(&mut [Vec<u8>]) -> Flow>;

/// Where a schedule goes after a [`Decide`].
pub enum Flow {
    /// On to the next step.
    Next,
    /// Back to step `n` (before the decision): another round.
    Back(usize),
    /// The schedule ends now, with this error.
    Fail(Error),
}

/// Which buffer a span lies in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Area {
    /// The caller's input (read only).
    Input,
    /// The caller's output.
    Output,
    /// Scratch vector `n` of the schedule.
    Scratch(u16),
}

/// Bytes `off..off + len` of an area.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    /// The buffer.
    pub area: Area,
    /// First byte.
    pub off: usize,
    /// Length in bytes.
    pub len: usize,
}

impl Span {
    /// Bytes `off..off + len` of `area`.
    pub fn new(area: Area, off: usize, len: usize) -> Self {
        Span { area, off, len }
    }
    /// Bytes `off..off + len` of this span.
    pub fn sub(self, off: usize, len: usize) -> Self {
        debug_assert!(off + len <= self.len, "sub-span out of range");
        Span {
            area: self.area,
            off: self.off + off,
            len,
        }
    }
    fn end(self) -> usize {
        self.off + self.len
    }
    fn overlaps(self, other: Span) -> bool {
        self.area == other.area
            && self.len > 0
            && other.len > 0
            && self.off < other.end()
            && other.off < self.end()
    }
}

/// Smallest message a collective's receive lets its sender copy half of (even a sender with
/// nothing else to do costs a handshake): at 64 KiB, on 2 CPUs with 4-8 ranks, splitting made
/// all-to-all, reduce-scatter and scatter 10-70% slower; at 1 MiB it made gathers and reduces
/// 20-40% faster, where a member that has sent its data has nothing else to do, and linear
/// broadcasts and scatters 25-30% slower at 8 ranks, whose root would push half of every
/// member's copy (docs/collectives.md).
pub const SHARE_MIN: usize = 256 << 10;

/// One step of a schedule. Peers are world ranks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Starts sending `from` to `to`.
    Send {
        /// Destination world rank.
        to: u32,
        /// The data.
        from: Span,
    },
    /// Starts receiving from `from` into `into` (the message must have exactly its length).
    Recv {
        /// Source world rank.
        from: u32,
        /// Where the data goes.
        into: Span,
        /// Whether a large rendezvous message may be copied half by the sender
        /// (`WEFT_SPLIT_COPY_MIN`): only where the sender has nothing else to do meanwhile
        /// (a member of a gather that has sent its block); where every member is busy
        /// copying (an all-to-all) the handshake costs more than the help.
        share: bool,
    },
    /// Copies `from` to `to` (same length, not overlapping).
    Copy {
        /// Source bytes.
        from: Span,
        /// Destination bytes.
        to: Span,
        /// Whether the copy writes by non-temporal stores, which send the lines to memory
        /// without reading them first (for data this rank does not read again in the
        /// collective, in a call larger than the caches: see [`Schedule::copy_streaming`]).
        stream: bool,
    },
    /// `into = from ∘ into` (`from_first`) or `into = into ∘ from`, element-wise.
    Reduce {
        /// The other operand.
        from: Span,
        /// Operand and result.
        into: Span,
        /// Whether `from` is the left operand.
        from_first: bool,
    },
    /// Waits for every send and receive started so far.
    Fence,
    /// Waits like a fence, then runs the schedule's decision number `n` (added by
    /// [`Schedule::decide`]), which may send the schedule back to an earlier step.
    Decide(u16),
}

/// A collective operation's steps and buffers.
pub struct Schedule {
    /// Name of the operation, for errors ("allreduce").
    pub call: &'static str,
    context: u32,
    tag: i32,
    steps: Vec<Step>,
    input: Option<RawBuf>,
    output: Option<RawBufMut>,
    /// Lengths of the scratch vectors the steps name; the vectors themselves come from the
    /// engine's pool when the schedule starts (`scratch`).
    scratch_lens: Vec<usize>,
    scratch: Vec<Vec<u8>>,
    combine: Option<Combine>,
    /// What the [`Step::Decide`] steps run.
    decides: Vec<Decide>,
    /// Kept alive until the schedule ends (a staging copy whose view is `input`, say).
    keep: Vec<Vec<u8>>,
    /// The members' world ranks and this rank's position, when the collective's size errors
    /// should name members rather than world ranks (`name_members`).
    members: Option<(Box<[u32]>, usize)>,
}

impl fmt::Debug for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Schedule")
            .field("call", &self.call)
            .field("context", &self.context)
            .field("tag", &self.tag)
            .field("steps", &self.steps)
            .finish_non_exhaustive()
    }
}

impl Schedule {
    /// An empty schedule for `call`, whose messages travel on `context` with `tag`.
    pub fn new(call: &'static str, context: u32, tag: i32) -> Self {
        Schedule {
            call,
            context,
            tag,
            steps: Vec::new(),
            input: None,
            output: None,
            scratch_lens: Vec::new(),
            scratch: Vec::new(),
            combine: None,
            decides: Vec::new(),
            keep: Vec::new(),
            members: None,
        }
    }

    /// Makes a size error name the sender and this rank by their position in `world` (the
    /// communicator's members) instead of by world rank: for collectives whose parts have a
    /// size per pair, where "member 2 sent 8 bytes to member 0, which expects 16" says which
    /// call's arguments disagree.
    pub fn name_members(&mut self, world: &[u32], me: usize) {
        self.members = Some((world.into(), me));
    }

    /// How an error names the sender `source` (a world rank) and this rank.
    fn sender_and_me(&self, source: u32) -> (String, String) {
        match &self.members {
            Some((world, me)) => match world.iter().position(|&w| w == source) {
                Some(j) => (format!("member {j}"), format!("member {me}")),
                None => (format!("rank {source}"), format!("member {me}")),
            },
            None => (format!("rank {source}"), "this rank".to_string()),
        }
    }

    /// Sets the input buffer.
    pub fn with_input(mut self, input: RawBuf) -> Self {
        self.input = Some(input);
        self
    }

    /// Sets the output buffer.
    pub fn with_output(mut self, output: RawBufMut) -> Self {
        self.output = Some(output);
        self
    }

    /// Sets the reduction.
    pub fn with_combine(mut self, combine: Combine) -> Self {
        self.combine = Some(combine);
        self
    }

    /// Keeps `v` alive until the schedule ends (for a staging copy a view points into).
    pub fn keep(&mut self, v: Vec<u8>) {
        self.keep.push(v);
    }

    /// A scratch vector of `len` bytes; returns its area. Its contents are unspecified (it
    /// may be reused from an earlier schedule): steps write it before they read it.
    pub fn scratch(&mut self, len: usize) -> Area {
        let n = u16::try_from(self.scratch_lens.len()).expect("at most 65536 scratch vectors");
        self.scratch_lens.push(len);
        Area::Scratch(n)
    }

    /// Appends a step.
    pub fn push(&mut self, step: Step) {
        self.steps.push(step);
    }

    /// Appends a decision: it runs once every send and receive started before it has
    /// completed. A [`Flow::Back`] must name an earlier step.
    pub fn decide(&mut self, f: Decide) {
        let n = u16::try_from(self.decides.len()).expect("at most 65536 decisions");
        self.decides.push(f);
        self.push(Step::Decide(n));
    }

    /// Appends a send.
    pub fn send(&mut self, to: u32, from: Span) {
        self.push(Step::Send { to, from });
    }

    /// Appends a receive that copies the whole message itself.
    pub fn recv(&mut self, from: u32, into: Span) {
        self.push(Step::Recv {
            from,
            into,
            share: false,
        });
    }

    /// Appends a receive of a message whose sender is otherwise idle (a gather's or reduce's
    /// member that has sent its data; not a root sending to many): from [`SHARE_MIN`] bytes it
    /// may copy half (see [`Step::Recv`]).
    pub fn recv_shared(&mut self, from: u32, into: Span) {
        self.push(Step::Recv {
            from,
            into,
            share: into.len >= SHARE_MIN,
        });
    }

    /// Appends a copy (nothing when `from == to`).
    pub fn copy(&mut self, from: Span, to: Span) {
        self.copy_by(from, to, false);
    }

    /// Appends a copy by non-temporal stores: for data that nothing reads again in the
    /// collective, when the call's data do not fit in the caches, where a copy is bound by
    /// memory's bandwidth and ordinary stores cost a read of every destination line first
    /// (the AMD VM, 4 ranks on 2 CPUs, all-to-all of 1 MiB blocks: 865-945 µs a call with the
    /// own block so copied against 1,015-1,110; the Intel VM, 2 ranks, 4 MiB: 686 against
    /// 728; `docs/performance.md`, 2026-11-26, third session).
    pub fn copy_streaming(&mut self, from: Span, to: Span) {
        self.copy_by(from, to, true);
    }

    fn copy_by(&mut self, from: Span, to: Span, stream: bool) {
        if from != to {
            self.push(Step::Copy { from, to, stream });
        }
    }

    /// Appends a reduction.
    pub fn reduce(&mut self, from: Span, into: Span, from_first: bool) {
        self.push(Step::Reduce {
            from,
            into,
            from_first,
        });
    }

    /// Appends a fence (none right after another, or first).
    pub fn fence(&mut self) {
        if !matches!(self.steps.last(), None | Some(Step::Fence)) {
            self.push(Step::Fence);
        }
    }

    /// The steps.
    pub fn steps(&self) -> &[Step] {
        &self.steps
    }

    /// The length of `area`.
    fn area_len(&self, area: Area) -> usize {
        match area {
            Area::Input => self.input.map_or(0, |b| b.len()),
            Area::Output => self.output.map_or(0, |b| b.len()),
            Area::Scratch(n) => self.scratch_lens.get(n as usize).copied().unwrap_or(0),
        }
    }

    /// Checks every span against its buffer and that copies and reductions have what they
    /// need: a schedule that passes cannot make the runner read or write out of bounds.
    pub fn validate(&self) -> Result<(), String> {
        let check = |s: Span| -> Result<(), String> {
            if s.area == Area::Input && self.input.is_none() && s.len > 0 {
                return Err(format!("{s:?} names an input the schedule does not have"));
            }
            if s.area == Area::Output && self.output.is_none() && s.len > 0 {
                return Err(format!("{s:?} names an output the schedule does not have"));
            }
            if s.end() > self.area_len(s.area) && s.len > 0 {
                return Err(format!(
                    "{s:?} ends past its buffer of {} bytes",
                    self.area_len(s.area)
                ));
            }
            Ok(())
        };
        for (i, st) in self.steps.iter().enumerate() {
            let at = |e: String| format!("step {i} ({st:?}): {e}");
            match *st {
                Step::Send { from, .. } => check(from).map_err(at)?,
                Step::Recv { into, .. } => {
                    check(into).map_err(at)?;
                    if into.area == Area::Input && into.len > 0 {
                        return Err(at("receives into the input".into()));
                    }
                }
                Step::Copy { from, to, .. } | Step::Reduce { from, into: to, .. } => {
                    check(from).map_err(at)?;
                    check(to).map_err(at)?;
                    if from.len != to.len {
                        return Err(at("operands differ in length".into()));
                    }
                    if to.area == Area::Input && to.len > 0 {
                        return Err(at("writes the input".into()));
                    }
                    if from.overlaps(to) {
                        return Err(at("operands overlap".into()));
                    }
                    if matches!(st, Step::Reduce { .. }) && self.combine.is_none() {
                        return Err(at("a reduction without an operation".into()));
                    }
                }
                Step::Fence => {}
                Step::Decide(n) => {
                    if n as usize >= self.decides.len() {
                        return Err(at("names a decision the schedule does not have".into()));
                    }
                }
            }
        }
        Ok(())
    }
}

/// A schedule being run.
pub(super) struct Running {
    pub(super) sched: Schedule,
    /// Index of the next step to run.
    next: usize,
    /// Sends and receives started and not yet complete, with the length each receive
    /// expects (`None` for sends).
    pending: Vec<(Handle, Option<usize>)>,
    /// The first error seen (the schedule still runs to its end, so that peers do not hang).
    error: Option<Error>,
    /// The request that completes with the schedule.
    pub(super) request: Handle,
}

impl Running {
    pub(super) fn new(sched: Schedule, request: Handle) -> Self {
        Running {
            sched,
            next: 0,
            pending: Vec::new(),
            error: None,
            request,
        }
    }
}

/// The bytes of span `s` as a view that a send may hold.
fn read_view(sched: &Schedule, s: Span) -> RawBuf {
    if s.len == 0 {
        // SAFETY: an empty static slice is valid forever and never written.
        return unsafe { RawBuf::new(&[]) };
    }
    match s.area {
        Area::Input => sched.input.expect("validated: has an input").sub(s.off, s.len),
        Area::Output => sched
            .output
            .expect("validated: has an output")
            .sub(s.off, s.len)
            .as_readonly(),
        Area::Scratch(n) => {
            let v = &sched.scratch[n as usize][s.off..s.off + s.len];
            // SAFETY: the scratch vector belongs to the schedule, which lives (and never
            // resizes its vectors) until every request it started has completed: the runner
            // ends a schedule only when `pending` is empty. The schedule's fences keep writes
            // to these bytes from overlapping the send.
            unsafe { RawBuf::new(v) }
        }
    }
}

/// The bytes of span `s` as a view that a receive may hold.
fn write_view(sched: &mut Schedule, s: Span) -> RawBufMut {
    if s.len == 0 {
        // SAFETY: an empty slice has no bytes to read or write; its view is never used to
        // touch memory.
        return unsafe { RawBufMut::new(&mut []) };
    }
    match s.area {
        Area::Input => unreachable!("validated: nothing is received into the input"),
        Area::Output => sched
            .output
            .expect("validated: has an output")
            .sub(s.off, s.len),
        Area::Scratch(n) => {
            let v = &mut sched.scratch[n as usize][s.off..s.off + s.len];
            // SAFETY: as in `read_view`: the vector outlives the receive and is not resized;
            // the schedule's fences keep other steps off these bytes until it completes.
            unsafe { RawBufMut::new(v) }
        }
    }
}

/// What a local step does: a copy (by non-temporal stores or not), or a reduction.
#[derive(Clone, Copy)]
enum Local {
    Copy { stream: bool },
    Reduce { from_first: bool },
}

/// Copies or reduces between two spans of `sched`'s buffers.
fn local_step(sched: &mut Schedule, from: Span, into: Span, what: Local) {
    if from.len == 0 {
        return;
    }
    let src = read_view(sched, from);
    let mut dst = write_view(sched, into);
    let src = src.slice(0..from.len);
    let dst = dst.slice_mut(0, into.len);
    match what {
        Local::Copy { stream: false } => dst.copy_from_slice(src),
        // SAFETY: `src` and `dst` are views of the schedule's buffers, `from.len` bytes each
        // (`validate` checked: same length, not overlapping).
        Local::Copy { stream: true } => unsafe {
            crate::sys::cpu::copy_streaming(src.as_ptr(), dst.as_mut_ptr(), src.len())
        },
        Local::Reduce { from_first } => {
            let f = sched.combine.as_ref().expect("validated: has a combine");
            if from_first {
                f(src, dst);
            } else {
                // into ∘ from, in place in `into`: the operation writes its right operand.
                let mut right = src.to_vec();
                f(dst, &mut right);
                dst.copy_from_slice(&right);
            }
        }
    }
}

impl<F: Fabric> Engine<F> {
    /// Starts running `sched`; the returned request completes when its last step has.
    ///
    /// # Safety
    /// The input and output views of `sched` must satisfy [`RawBuf::new`] and
    /// [`RawBufMut::new`]: their buffers stay valid (and, for the output, unread and unwritten
    /// by anyone else) until the request completes.
    pub unsafe fn start_schedule(&mut self, sched: Schedule) -> Handle {
        if let Err(e) = sched.validate() {
            panic!("weft: invalid schedule for {}: {e}\n{sched:?}", sched.call);
        }
        let mut sched = sched;
        sched.scratch = std::mem::take(&mut sched.scratch_lens)
            .iter()
            .map(|&len| self.scratch_pool.take(len))
            .collect();
        let h = self.core.start_local();
        self.schedules.push(Box::new(Running::new(sched, h)));
        // Start what can start now: the first sends go out before we return.
        self.advance_schedules();
        h
    }

    /// Advances every running schedule as far as it can go. Returns whether any moved.
    pub(super) fn advance_schedules(&mut self) -> bool {
        let mut did = false;
        let mut i = 0;
        while i < self.schedules.len() {
            let mut run = self.schedules.swap_remove(i);
            did |= self.advance(&mut run);
            if run.next == run.sched.steps.len() && run.pending.is_empty() {
                let error = run.error.take();
                self.core.complete_local(run.request, error);
                for v in std::mem::take(&mut run.sched.scratch) {
                    self.scratch_pool.give(v);
                }
                did = true;
                // `swap_remove` moved the last one to `i`: look at it next.
            } else {
                self.schedules.push(run);
                let last = self.schedules.len() - 1;
                self.schedules.swap(i, last);
                i += 1;
            }
        }
        did
    }

    /// Runs `run`'s steps until a fence that must wait, or the end.
    fn advance(&mut self, run: &mut Running) -> bool {
        let mut did = self.reap(run);
        while run.next < run.sched.steps.len() {
            let step = run.sched.steps[run.next];
            match step {
                Step::Fence => {
                    if !run.pending.is_empty() {
                        break;
                    }
                }
                Step::Decide(n) => {
                    if !run.pending.is_empty() {
                        break;
                    }
                    let sched = &mut run.sched;
                    match (sched.decides[n as usize])(&mut sched.scratch) {
                        Flow::Next => {}
                        Flow::Back(to) => {
                            assert!(to < run.next, "a schedule goes back to an earlier step");
                            // Another round, from the next call on: the other schedules, and
                            // whatever this round waits for, move meanwhile.
                            run.next = to;
                            return true;
                        }
                        Flow::Fail(e) => {
                            run.error.get_or_insert(e);
                            run.next = sched.steps.len();
                            return true;
                        }
                    }
                }
                Step::Send { to, from } => {
                    let buf = read_view(&run.sched, from);
                    let (ctx, tag) = (run.sched.context, run.sched.tag);
                    match self.isend(to, ctx, tag, buf, SendMode::Standard) {
                        Ok(h) => run.pending.push((h, None)),
                        Err(e) => {
                            run.error.get_or_insert(e);
                        }
                    }
                }
                Step::Recv { from, into, share } => {
                    let buf = write_view(&mut run.sched, into);
                    let pattern = Pattern {
                        context: run.sched.context,
                        source: Some(from),
                        tag: Some(run.sched.tag),
                    };
                    match self.irecv_with(pattern, buf, share) {
                        Ok(h) => run.pending.push((h, Some(into.len))),
                        Err(e) => {
                            run.error.get_or_insert(e);
                        }
                    }
                }
                Step::Copy { from, to, stream } => {
                    local_step(&mut run.sched, from, to, Local::Copy { stream })
                }
                Step::Reduce {
                    from,
                    into,
                    from_first,
                } => local_step(&mut run.sched, from, into, Local::Reduce { from_first }),
            }
            run.next += 1;
            did = true;
        }
        did |= self.reap(run);
        did
    }

    /// Frees the schedule's completed sends and receives, keeping the first error.
    fn reap(&mut self, run: &mut Running) -> bool {
        let before = run.pending.len();
        let mut i = 0;
        while i < run.pending.len() {
            let (h, expect) = run.pending[i];
            if !self.core.is_done(h) {
                i += 1;
                continue;
            }
            run.pending.swap_remove(i);
            let Some(req) = self.core.take_request(h) else {
                continue;
            };
            if let Some(e) = req.error {
                // A receive's own error names "receive": say which collective, and why.
                let e = if e.class == crate::error::ErrorClass::Truncate {
                    let detail = match &run.sched.members {
                        Some(_) => {
                            let (from, me) = run.sched.sender_and_me(req.status.source);
                            format!(
                                "{from} sent {me} more than the {} bytes {me} expects from it \
                                 ({}); the members called {} with different sizes",
                                expect.unwrap_or(0),
                                e.detail,
                                run.sched.call
                            )
                        }
                        None => format!(
                            "{}; the ranks called {} with different sizes",
                            e.detail, run.sched.call
                        ),
                    };
                    Error::new(e.class, run.sched.call, detail)
                } else {
                    e
                };
                run.error.get_or_insert(e);
            } else if let Some(want) = expect.filter(|&w| w != req.status.len) {
                let (from, me) = run.sched.sender_and_me(req.status.source);
                run.error.get_or_insert(Error::new(
                    crate::error::ErrorClass::Truncate,
                    run.sched.call,
                    format!(
                        "{from} sent a {}-byte message where {me} expects {want} bytes from it: \
                         the members called {} with different sizes",
                        req.status.len, run.sched.call
                    ),
                ));
            }
        }
        run.pending.len() != before
    }

    /// Number of schedules running.
    pub fn running_schedules(&self) -> usize {
        self.schedules.len()
    }

    /// Fills the scratch pool with vectors of garbage, so that tests see a step that reads
    /// scratch before writing it.
    #[cfg(test)]
    pub(crate) fn poison_scratch_pool(&mut self) {
        for len in [16, 256, 4096, 65536] {
            self.scratch_pool.give(vec![0xa5; len]);
        }
    }
}

/// Scratch vectors of finished schedules, kept for the next ones: a large collective then
/// neither allocates nor touches fresh pages (zeroed by the kernel, faulted in one by one)
/// every time. Bounded in count and bytes; the largest are kept.
#[derive(Debug, Default)]
pub(super) struct ScratchPool {
    free: Vec<Vec<u8>>,
}

impl ScratchPool {
    const MAX_VECTORS: usize = 16;
    const MAX_BYTES: usize = 64 << 20;

    /// A vector of at least `len` bytes (contents unspecified: a schedule reaches it only
    /// through spans of its own lengths). A kept vector keeps its length, so taking sizes that
    /// alternate does not zero the difference every time.
    fn take(&mut self, len: usize) -> Vec<u8> {
        // The smallest kept vector that is large enough.
        let best = self
            .free
            .iter()
            .enumerate()
            .filter(|(_, v)| v.capacity() >= len)
            .min_by_key(|(_, v)| v.capacity())
            .map(|(i, _)| i);
        let mut v = match best {
            Some(i) => self.free.swap_remove(i),
            None => Vec::new(),
        };
        if v.len() < len {
            v.resize(len, 0);
        }
        v
    }

    /// Keeps `v` for later, within the bounds.
    fn give(&mut self, v: Vec<u8>) {
        if v.capacity() == 0 || v.capacity() > Self::MAX_BYTES {
            return;
        }
        self.free.push(v);
        self.free.sort_by_key(|v| std::cmp::Reverse(v.capacity()));
        let mut total = 0;
        let keep = self
            .free
            .iter()
            .take_while(|v| {
                total += v.capacity();
                total <= Self::MAX_BYTES
            })
            .count()
            .min(Self::MAX_VECTORS);
        self.free.truncate(keep);
    }
}

#[cfg(test)]
mod scratch_pool_tests {
    use super::ScratchPool;

    #[test]
    fn a_kept_vector_is_handed_back_whole_and_the_smallest_that_fits() {
        let mut pool = ScratchPool::default();
        let mut big = pool.take(4096);
        assert_eq!(big.len(), 4096);
        big[4000] = 7;
        pool.give(big);
        pool.give(vec![1; 100]);
        // The smallest kept vector that fits, with its bytes as they were (no truncation and
        // re-zeroing when sizes alternate).
        let small = pool.take(50);
        assert!(small.len() >= 50 && small.capacity() < 4096, "{}", small.capacity());
        let again = pool.take(1000);
        assert_eq!((again.len(), again[4000]), (4096, 7));
    }
}
