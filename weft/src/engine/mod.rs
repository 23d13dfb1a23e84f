//! The progress engine: requests, matching, protocols and the wait policy.
//!
//! [`core::Core`] is the sans-IO protocol machine; [`Engine`] couples it to a [`Fabric`]:
//! every call into the engine progresses every outstanding operation (Sun MPI's model), and
//! a blocking call that has nothing to do spins, then yields, then sleeps on the fabric's
//! futex until a peer's packet wakes it.

mod active;
pub mod buffer;
pub mod comm_buffers;
#[allow(missing_docs)]
pub mod core;
#[allow(missing_docs)]
pub mod matching;
#[allow(missing_docs)]
pub mod request;
pub mod schedule;
#[cfg(test)]
pub(crate) mod testing;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod active_tests;
mod wait;

use self::buffer::{RawBuf, RawBufMut};
use self::comm_buffers::Owner;
use self::core::{Core, PeerLimits, PendingPull, PendingPush};
use self::matching::Pattern;
use self::request::{Handle, MsgStatus, SendOp, SendPhase};
use crate::error::{Error, ErrorClass, Result};
use crate::fabric::Fabric;
use crate::tunables::Tunables;
use std::time::Duration;

/// Per-rank communication statistics (MP_Lite prints these at the end of a run).
#[derive(Clone, Debug, Default)]
pub struct Stats {
    /// Messages sent (all protocols, including to self).
    pub sent_msgs: u64,
    /// Bytes sent.
    pub sent_bytes: u64,
    /// Messages received.
    pub recv_msgs: u64,
    /// Bytes received.
    pub recv_bytes: u64,
    /// Messages that went by rendezvous.
    pub rendezvous: u64,
    /// Rendezvous messages the receiver pulled in a single copy.
    pub single_copy: u64,
    /// Rendezvous messages copied by both sides at once (a part pulled, a part pushed).
    pub split_copies: u64,
    /// Rendezvous messages pushed through packets because single copy was not possible.
    pub pushed_rendezvous: u64,
    /// Messages that arrived before their receive was posted.
    pub unexpected_msgs: u64,
    /// Times a waiting rank yielded the CPU.
    pub yields: u64,
    /// Times a waiting rank slept on its futex.
    pub sleeps: u64,
    /// Bytes of the attached buffered-send buffer in use.
    pub bsend_in_use: usize,
}

/// The send modes of MPI.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendMode {
    /// May complete before the receive is posted.
    Standard,
    /// Completes only once the receive has matched.
    Synchronous,
    /// The receive is known to be posted (treated as standard).
    Ready,
}

/// The wait-policy and protocol settings the engine uses.
#[derive(Clone, Debug)]
pub struct Config {
    /// Largest message sent eagerly.
    pub eager_limit: usize,
    /// Idle polls before yielding.
    pub spin_count: u32,
    /// Yields before sleeping.
    pub yield_count: u32,
    /// A yield that keeps the CPU away this long shows a neighbour that runs whole slices:
    /// the rank sleeps instead (zero: never).
    pub yield_slice: Duration,
    /// How long a rank skips yielding after such yields.
    pub yield_pause: Duration,
    /// How many such yields among its last 8 make it stop yielding.
    pub yield_streak: u32,
    /// Longest sleep before re-checking.
    pub sleep_timeout: Duration,
    /// Smallest rendezvous message copied by both sides at once (0: never).
    pub split_copy_min: usize,
}

impl Config {
    /// The settings from `t`, for a node where `local_ranks` share `cpus` processors.
    /// When oversubscribed, a waiting rank spins only briefly (the peer it waits for may
    /// need this very CPU) and yields many times before it sleeps.
    pub fn from_tunables(t: &Tunables, local_ranks: usize, cpus: usize) -> Self {
        let oversubscribed = local_ranks > cpus;
        Config {
            eager_limit: t.eager_limit,
            spin_count: t.spin_count.or(if oversubscribed { 10 } else { 4000 }),
            yield_count: t.yield_count.or(if oversubscribed { 2000 } else { 20 }),
            yield_slice: Duration::from_micros(t.yield_slice_us),
            yield_pause: Duration::from_millis(t.yield_pause_ms),
            yield_streak: t.yield_streak,
            sleep_timeout: Duration::from_millis(t.sleep_timeout_ms.max(1)),
            split_copy_min: t.split_copy_min,
        }
    }
}

/// The engine of one rank over fabric `F`.
pub struct Engine<F: Fabric> {
    /// The transports. Not public: a packet put into them by anyone but the engine could name
    /// an address for the engine to copy from or to (see [`Engine::fabric`]).
    pub(crate) fabric: F,
    core: Core,
    cfg: Config,
    bsend_capacity: usize,
    bsend_overhead: usize,
    /// Communicators' own buffered-send buffers (MPI 5).
    comm_buffers: comm_buffers::CommBuffers,
    /// Whether yields help now (see [`wait`]).
    yield_gate: wait::YieldGate,
    /// Collective schedules in progress.
    /// Boxed: every progress pass takes each out and puts it back, which moves a pointer,
    /// not the whole schedule (a memcpy that showed in profiles of large collectives).
    #[allow(clippy::vec_box)] // deliberately: see above
    schedules: Vec<Box<schedule::Running>>,
    /// Scratch vectors of finished schedules, for the next ones.
    scratch_pool: schedule::ScratchPool,
}

impl<F: Fabric> Engine<F> {
    /// The transports, to look at (their addresses, connection counts).
    pub fn fabric(&self) -> &F {
        &self.fabric
    }

    /// An engine over `fabric`.
    pub fn new(fabric: F, cfg: Config) -> Self {
        let yield_gate = wait::YieldGate::new(cfg.yield_slice, cfg.yield_pause, cfg.yield_streak);
        // The way to each peer is asked once: its limits do not change during a job.
        let limits = (0..fabric.size())
            .map(|p| PeerLimits {
                eager_limit: fabric.eager_limit(p).unwrap_or(cfg.eager_limit),
                max_payload: fabric.max_payload(p),
            })
            .collect();
        let core = Core::new(fabric.rank(), fabric.size(), limits, cfg.split_copy_min);
        Engine {
            fabric,
            core,
            cfg,
            bsend_capacity: 0,
            bsend_overhead: 64,
            comm_buffers: Default::default(),
            yield_gate,
            schedules: Vec::new(),
            scratch_pool: Default::default(),
        }
    }

    /// This rank.
    pub fn rank(&self) -> u32 {
        self.core.rank()
    }

    /// Number of ranks.
    pub fn size(&self) -> u32 {
        self.fabric.size()
    }

    /// The statistics so far.
    pub fn stats(&self) -> &Stats {
        self.core.stats()
    }

    /// Long yields the wait policy counted against yielding, and long ones it put down to a
    /// sibling rank (see `engine/wait.rs`).
    pub fn long_yields(&self) -> (u64, u64) {
        (self.yield_gate.long_yields, self.yield_gate.sibling_yields)
    }

    fn check_peer(&self, call: &'static str, peer: u32) -> Result<()> {
        if peer >= self.core.peer_count() {
            return Err(Error::new(
                ErrorClass::Rank,
                call,
                format!(
                    "rank {peer} is out of range for a world of {} ranks{}",
                    self.size(),
                    match self.core.peer_count() - self.size() {
                        0 => String::new(),
                        n => format!(" and {n} processes of other jobs"),
                    }
                ),
            ));
        }
        Ok(())
    }

    /// The transports, to change (a process of another job joins them).
    pub fn fabric_mut(&mut self) -> &mut F {
        &mut self.fabric
    }

    /// Number of peers: the world, then the processes of other jobs added since.
    pub fn peer_count(&self) -> u32 {
        self.core.peer_count()
    }

    /// Makes `peer`, which the fabric reaches now (a process of another job, just added to
    /// it as its next peer number), reachable by the protocols too.
    pub fn add_peer(&mut self, peer: u32) {
        assert_eq!(
            peer,
            self.core.peer_count(),
            "Engine::add_peer: peers are added in order"
        );
        let limits = PeerLimits {
            eager_limit: self.fabric.eager_limit(peer).unwrap_or(self.cfg.eager_limit),
            max_payload: self.fabric.max_payload(peer),
        };
        self.core.add_peer(limits);
    }

    // ----- progress -------------------------------------------------------------------------

    /// Progresses everything once: delivers arrivals, runs pulls, sends what fits.
    /// Returns whether anything happened.
    pub fn progress(&mut self) -> bool {
        let core = &mut self.core;
        let mut did = self.fabric.poll(core) > 0;
        if self.core.has_pushes() {
            self.run_pushes();
            did = true;
        }
        if self.core.has_pulls() {
            self.run_pulls();
            did = true;
        }
        if self.core.has_control() {
            did |= self.flush_outbox();
        }
        if self.core.has_polled() {
            did |= self.core.am_poll();
        }
        if self.core.has_active_out() {
            did |= self.flush_active();
        }
        if self.core.active_len() > 0 {
            did |= self.push_all_sends();
        }
        if !self.schedules.is_empty() {
            did |= self.advance_schedules();
        }
        if self.core.has_detached() {
            self.core.reap_detached();
        }
        did
    }

    fn run_pulls(&mut self) {
        for p in self.core.take_pulls() {
            self.run_pull(p);
            // Its FIN or CTS goes out now, before the next (maybe long) pull.
            self.flush_outbox();
        }
    }

    fn run_pull(&mut self, p: PendingPull) {
        let Some(mut plan) = self.core.plan_pull(&p) else {
            return;
        };
        if plan.shared {
            // The sender pushes its part while we pull ours: ask it first.
            self.flush_outbox();
        }
        // SAFETY: `p.addr` is the address the peer named in its rendezvous announcement for
        // its send buffer, which its send request keeps lent until our FIN; `plan.buf` is this
        // in-flight receive's own view.
        let result = unsafe {
            self.fabric
                .pull(p.peer, p.addr, plan.buf.slice_mut(0, plan.own))
        };
        self.core.handle_pull(&p, plan.own, result);
    }

    fn run_pushes(&mut self) {
        for p in self.core.take_pushes() {
            self.run_push(p);
        }
    }

    /// The sender's half of a split rendezvous.
    fn run_push(&mut self, p: PendingPush) {
        let Some(src) = self.core.push_source(&p) else {
            return;
        };
        // SAFETY: `p.remote` is the address inside its receive buffer that the receiving peer
        // named in its Share packet; its receive request keeps it lent until our Pushed.
        let result = unsafe { self.fabric.push(p.peer, p.remote, src) };
        self.core.handle_push(&p, result);
    }

    fn flush_outbox(&mut self) -> bool {
        let mut did = false;
        while let Some((peer, hdr)) = self.core.poll_control() {
            if !self.fabric.try_send(peer, &hdr, &[]) {
                break;
            }
            self.core.handle_control_sent();
            did = true;
        }
        did
    }

    fn push_all_sends(&mut self) -> bool {
        let mut did = false;
        let mut i = 0;
        while i < self.core.active_len() {
            let peer = self.core.active_peer(i);
            did |= self.push_sends(peer);
            if !self.core.retire_if_idle(i) {
                i += 1;
            }
        }
        did
    }

    /// Hands queued sends for `peer` to the fabric, packet by packet as the core cuts them,
    /// until it is full. Returns whether any packet went out.
    fn push_sends(&mut self, peer: u32) -> bool {
        let mut did = false;
        while let Some(t) = self.core.poll_transmit(peer) {
            if !self.fabric.try_send(peer, &t.hdr, t.payload) {
                break;
            }
            self.core.handle_sent(peer);
            did = true;
        }
        did
    }

    // ----- waiting --------------------------------------------------------------------------

    /// Progresses until `done(self)` holds, spinning, then yielding (while yields are seen
    /// to help: see `engine/wait.rs`), then sleeping.
    pub fn wait_until(&mut self, mut done: impl FnMut(&mut Self) -> bool) {
        let spin = self.cfg.spin_count;
        let yields = spin.saturating_add(self.cfg.yield_count);
        let mut idle = 0u32;
        let mut yielding = true;
        loop {
            if done(self) {
                return;
            }
            if self.progress() {
                idle = 0;
                continue;
            }
            idle = idle.saturating_add(1);
            if idle <= spin {
                crate::sync::spin_hint();
            } else if idle <= yields && yielding {
                if idle == spin + 1 && !self.yield_gate.open(std::time::Instant::now()) {
                    yielding = false; // yields did not help lately: sleep at the next idle poll
                    continue;
                }
                self.core.stats.yields += 1;
                // A slice went to a neighbour, not a sibling: sleep at the next idle poll.
                let start = crate::sys::monotonic_us();
                self.fabric.note_waiting(true, start);
                let fabric = &self.fabric;
                yielding = self.yield_gate.yield_now(|| {
                    // Siblings held this CPU for a good part of the yield (a quarter):
                    // the job's own work, not a neighbour's.
                    let end = crate::sys::monotonic_us();
                    let took = end.wrapping_sub(start);
                    fabric
                        .sibling_time_here(start, end)
                        .is_some_and(|t| t >= took / 4)
                });
                self.fabric.note_waiting(false, crate::sys::monotonic_us());
            } else {
                self.fabric.prepare_sleep();
                if self.progress() || done(self) {
                    self.fabric.cancel_sleep();
                    idle = 0;
                    continue;
                }
                // Output blocked on a full peer: nobody will wake us when it drains. A handler
                // waiting to answer (a lock request, granted when another process on this node
                // releases the word) is not woken either: it looks again soon.
                let timeout = if self.core.has_blocked_output() || self.core.has_polled() {
                    Duration::from_micros(200)
                } else {
                    self.cfg.sleep_timeout
                };
                self.core.stats.sleeps += 1;
                self.fabric.note_waiting(true, crate::sys::monotonic_us());
                self.fabric.sleep(timeout);
                self.fabric.note_waiting(false, crate::sys::monotonic_us());
                idle = 0;
            }
        }
    }

    /// Whether request `h` is complete (or stale).
    pub fn is_done(&self, h: Handle) -> bool {
        self.core.is_done(h)
    }

    /// A request that is complete already: for work done before the call that hands it out
    /// returns (the one-sided request-based operations, complete at the origin when made).
    pub fn completed_request(&mut self) -> Handle {
        let h = self.core.start_local();
        self.core.complete_local(h, None);
        h
    }

    /// Waits for `h` and frees it, returning its status or error.
    pub fn wait(&mut self, h: Handle) -> Result<MsgStatus> {
        if !self.core.is_live(h) {
            return Err(stale("wait", h));
        }
        self.wait_until(|e| e.is_done(h));
        self.take(h, "wait")
    }

    /// Progresses once; if `h` is complete, frees it and returns its result.
    pub fn test(&mut self, h: Handle) -> Result<Option<MsgStatus>> {
        if !self.core.is_live(h) {
            return Err(stale("test", h));
        }
        if !self.is_done(h) {
            self.progress();
        }
        if self.is_done(h) {
            self.take(h, "test").map(Some)
        } else {
            Ok(None)
        }
    }

    fn take(&mut self, h: Handle, call: &'static str) -> Result<MsgStatus> {
        let req = self.core.take_request(h).ok_or_else(|| stale(call, h))?;
        debug_assert!(req.done, "taking an incomplete request");
        match req.error {
            Some(e) => Err(e),
            None => Ok(req.status),
        }
    }

    /// Gives up on `h` without waiting: it completes in the background and is then freed.
    pub fn detach(&mut self, h: Handle) {
        self.core.detach(h);
    }

    // ----- point to point -------------------------------------------------------------------

    /// Blocking send. A small standard send to an idle peer goes straight into the fabric:
    /// no request, no allocation, no system call.
    pub fn send(
        &mut self,
        peer: u32,
        context: u32,
        tag: i32,
        data: &[u8],
        mode: SendMode,
    ) -> Result<()> {
        self.check_peer("send", peer)?;
        if mode != SendMode::Synchronous && self.try_send_now(peer, context, tag, data, 0) {
            self.core.count_sent(data.len());
            return Ok(());
        }
        // SAFETY: `data` is borrowed for this whole call, and `wait` returns only once the
        // request is complete and freed, so nothing holds the view after we return.
        let buf = unsafe { RawBuf::new(data) };
        let h = self.isend_raw(
            peer,
            context,
            tag,
            buf,
            mode == SendMode::Synchronous,
            None,
            0,
        );
        self.wait(h).map(drop)
    }

    /// Sends `data` as one eager packet right away when it fits one packet and nothing is
    /// queued ahead of it for `peer`. Returns whether it went out (no request, no allocation).
    #[inline]
    fn try_send_now(&mut self, peer: u32, context: u32, tag: i32, data: &[u8], id: u64) -> bool {
        match self.core.eager_now(peer, context, tag, data.len(), id) {
            Some(hdr) => self.fabric.try_send(peer, &hdr, data),
            None => false,
        }
    }

    /// Starts a nonblocking send of `buf`, which must stay valid until the request completes.
    pub fn isend(
        &mut self,
        peer: u32,
        context: u32,
        tag: i32,
        buf: RawBuf,
        mode: SendMode,
    ) -> Result<Handle> {
        self.check_peer("immediate send", peer)?;
        Ok(self.isend_raw(
            peer,
            context,
            tag,
            buf,
            mode == SendMode::Synchronous,
            None,
            0,
        ))
    }

    #[allow(clippy::too_many_arguments)]
    fn isend_raw(
        &mut self,
        peer: u32,
        context: u32,
        tag: i32,
        buf: RawBuf,
        sync: bool,
        owned: Option<Vec<u8>>,
        bsend_charge: usize,
    ) -> Handle {
        self.core.count_sent(buf.len());
        if !sync && owned.is_none() {
            let id = self.core.message_id();
            if let Some(hdr) = self.core.eager_now(peer, context, tag, buf.len(), id) {
                // The request first, born complete, then the packet: stores to the fabric's
                // shared memory wait for lines another CPU holds, and a copy of the request
                // made after them (its slot written from a fresh copy on the stack) would
                // wait behind them too.
                let h = self.core.sent_request(peer, id);
                if self.fabric.try_send(peer, &hdr, buf.slice(0..buf.len())) {
                    return h;
                }
                self.core.forget_sent_request(h);
            }
        }
        let (h, first) = self.core.start_send(SendOp {
            peer,
            context,
            tag,
            buf,
            sent: 0,
            sync,
            acked: false,
            phase: SendPhase::Queued,
            owned,
            bsend_charge,
            push_busy: false,
            fin_seen: false,
        });
        if first {
            self.push_sends(peer);
            self.core.unlist_if_idle(peer);
        }
        h
    }

    /// Buffered send: copies `data` into space charged to the attached buffer and returns at
    /// once; the copy is sent in the background.
    pub fn bsend(&mut self, peer: u32, context: u32, tag: i32, data: &[u8]) -> Result<Handle> {
        self.bsend_from(peer, context, tag, data.len(), || data.to_vec())
    }

    /// [`Engine::bsend`] of `len` bytes that `copy` makes (packing a non-contiguous
    /// layout, say): the data is copied once, whatever its layout, and only when it fits.
    pub fn bsend_from(
        &mut self,
        peer: u32,
        context: u32,
        tag: i32,
        len: usize,
        copy: impl FnOnce() -> Vec<u8>,
    ) -> Result<Handle> {
        self.check_peer("buffered send", peer)?;
        let charge = len + self.bsend_overhead;
        // The communicator's own buffer or its session's if either has one (MPI 5), else
        // the process's.
        let core = &self.core;
        let owner = self.comm_buffers.owner_for(context);
        let attached = owner.and_then(|o| self.comm_buffers.usage(o, |h| core.is_done(h)));
        let (in_use, capacity, whose) = match (owner, attached) {
            (Some(Owner::Comm(_)), Some((used, cap))) => {
                (used, cap, "the communicator's attached buffer (attach_buffer)")
            }
            (Some(Owner::Session(_)), Some((used, cap))) => {
                (used, cap, "the session's attached buffer (MPI_Session_attach_buffer)")
            }
            _ => (
                core.stats().bsend_in_use,
                self.bsend_capacity,
                "attached buffer (attach a larger buffer with set_buffer_size)",
            ),
        };
        if charge > capacity.saturating_sub(in_use) {
            return Err(Error::new(
                ErrorClass::Resource,
                "buffered send",
                format!(
                    "a {len}-byte message needs {charge} bytes of {whose} but only {} of {} are \
                     free",
                    capacity - in_use,
                    capacity
                ),
            ));
        }
        let owned = copy();
        debug_assert_eq!(
            owned.len(),
            len,
            "bsend_from: the copy is not the length given"
        );
        // SAFETY: the Vec moves into the request with the view (`owned`) and is freed with it;
        // moving a Vec does not move its heap block, and nothing writes it meanwhile.
        let buf = unsafe { RawBuf::new(&owned) };
        if let Some(owner) = owner {
            // Charged to the communicator's or session's buffer: the process's count does
            // not see it.
            let h = self.isend_raw(peer, context, tag, buf, false, Some(owned), 0);
            self.comm_buffers.charge(owner, h, charge);
            return Ok(h);
        }
        self.core.charge_bsend(charge);
        let h = self.isend_raw(peer, context, tag, buf, false, Some(owned), charge);
        Ok(h)
    }

    /// Attaches a buffered-send buffer of `bytes` ([`comm_buffers::AUTOMATIC`]: unbounded)
    /// to `owner`, a communicator (MPI_Comm_attach_buffer) or a session
    /// (MPI_Session_attach_buffer); `false` when it has one already.
    pub fn attach_buffer(&mut self, owner: Owner, bytes: usize) -> bool {
        self.comm_buffers.attach(owner, bytes)
    }

    /// Waits until the buffered sends charged to `owner`'s buffer have gone, then detaches
    /// it and returns its size (`None`: none was attached).
    pub fn detach_buffer(&mut self, owner: Owner) -> Option<usize> {
        self.flush_buffer_of(owner);
        self.comm_buffers.detach(owner)
    }

    /// Forgets a freed communicator's buffer and session without waiting (its sends go on).
    pub fn forget_comm_buffer(&mut self, context: u32) {
        self.comm_buffers.forget_comm(context);
    }

    /// Forgets a finalized session's buffer without waiting (its sends go on).
    pub fn forget_session_buffer(&mut self, session: u32) {
        self.comm_buffers.detach(Owner::Session(session));
    }

    /// Records that the communicator of point-to-point context `context` was made from
    /// session `session`'s groups: its buffered sends use the session's buffer, if it has
    /// one and the communicator has none.
    pub fn link_to_session(&mut self, context: u32, session: u32) {
        self.comm_buffers.link(context, session);
    }

    /// Waits until the buffered sends charged to `owner`'s buffer have gone.
    pub fn flush_buffer_of(&mut self, owner: Owner) {
        self.wait_until(|e| e.buffer_idle(owner));
    }

    /// Whether `owner`'s buffer has no buffered send in flight, after a progress pass.
    pub fn buffer_done(&mut self, owner: Owner) -> bool {
        self.progress();
        self.buffer_idle(owner)
    }

    fn buffer_idle(&mut self, owner: Owner) -> bool {
        let core = &self.core;
        self.comm_buffers
            .usage(owner, |h| core.is_done(h))
            .is_none_or(|(used, _)| used == 0)
    }

    /// Attaches a buffered-send buffer of `bytes` (0 detaches), after waiting for buffered
    /// sends in flight to finish.
    pub fn set_bsend_capacity(&mut self, bytes: usize, overhead: usize) {
        self.flush_buffered();
        self.bsend_capacity = bytes;
        self.bsend_overhead = overhead;
    }

    /// Waits until every buffered send has gone (their space is free again).
    pub fn flush_buffered(&mut self) {
        self.wait_until(|e| e.core.stats().bsend_in_use == 0);
    }

    /// Whether every buffered send has gone, after a progress pass.
    pub fn buffered_done(&mut self) -> bool {
        self.progress();
        self.core.stats().bsend_in_use == 0
    }

    /// The attached buffered-send buffer size.
    pub fn bsend_capacity(&self) -> usize {
        self.bsend_capacity
    }

    /// Starts a nonblocking receive into `buf`.
    pub fn irecv(&mut self, pattern: Pattern, buf: RawBufMut) -> Result<Handle> {
        self.irecv_with(pattern, buf, true)
    }

    /// [`Engine::irecv`]; `share` says whether a large rendezvous message may be copied half
    /// by its sender (`WEFT_SPLIT_COPY_MIN`), else the receiver copies it whole.
    pub(crate) fn irecv_with(
        &mut self,
        pattern: Pattern,
        buf: RawBufMut,
        share: bool,
    ) -> Result<Handle> {
        if let Some(s) = pattern.source {
            self.check_peer("receive", s)?;
        }
        let h = self.core.start_recv(pattern, buf, share);
        if self.core.has_pulls() {
            self.run_pulls();
        }
        Ok(h)
    }

    /// Blocking receive. With nothing else pending it short-circuits: see [`core::FastRecv`].
    pub fn recv(&mut self, pattern: Pattern, buf: &mut [u8]) -> Result<MsgStatus> {
        if let Some(s) = pattern.source {
            self.check_peer("receive", s)?;
        }
        if self.core.receives_idle() {
            let cap = buf.len();
            self.core.begin_fast_recv(core::FastRecv {
                pattern,
                // SAFETY: `buf` is borrowed exclusively for this whole call, and the view
                // leaves the engine (`end_fast_recv` below) before we return or go on.
                buf: unsafe { RawBufMut::new(buf) },
                result: None,
                spoiled: false,
                filling: false,
            });
            self.wait_until(|e| e.core.fast_recv_settled());
            let f = self.core.end_fast_recv().expect("fast receive in place");
            if let Some(st) = f.result {
                if st.len > cap {
                    return Err(core::truncation(st.len, st.source, st.tag, cap));
                }
                return Ok(st);
            }
        }
        // SAFETY: `buf` is borrowed exclusively for this whole call, and `wait` returns only
        // once the request is complete and freed.
        let h = self.irecv(pattern, unsafe { RawBufMut::new(buf) })?;
        self.wait(h)
    }

    /// Cancels a pending receive, or a send: one that has not gone out is dropped here, and
    /// the receiver of one that has is asked to drop it if still unmatched (the request
    /// completes when it answers, its status saying whether it was cancelled). Returns false
    /// when there is nothing to cancel (a receive already matched, a send already asked).
    pub fn cancel(&mut self, h: Handle) -> bool {
        self.core.cancel_recv(h) || self.core.cancel_send(h)
    }

    /// Cancels `h` if it is a receive not yet matched; returns whether it did.
    pub fn cancel_receive(&mut self, h: Handle) -> bool {
        self.core.cancel_recv(h)
    }

    /// Nonblocking probe: the status of the oldest matching message that has arrived.
    pub fn iprobe(&mut self, pattern: &Pattern) -> Option<MsgStatus> {
        self.progress();
        self.peek(pattern)
    }

    fn peek(&self, pattern: &Pattern) -> Option<MsgStatus> {
        self.core.peek(pattern)
    }

    /// Blocking probe.
    pub fn probe(&mut self, pattern: &Pattern) -> MsgStatus {
        let mut found = None;
        self.wait_until(|e| {
            found = e.peek(pattern);
            found.is_some()
        });
        found.expect("probe found a message")
    }

    /// Nonblocking matched probe: claims the oldest matching message so that only
    /// [`Engine::mrecv`] with the returned id can receive it.
    pub fn improbe(&mut self, pattern: &Pattern) -> Option<(u64, MsgStatus)> {
        self.progress();
        let status = self.peek(pattern)?;
        let id = self
            .core
            .claim(pattern)
            .expect("peeked message is claimable");
        Some((id, status))
    }

    /// Blocking matched probe.
    pub fn mprobe(&mut self, pattern: &Pattern) -> (u64, MsgStatus) {
        let mut found = None;
        self.wait_until(|e| {
            found = e.peek(pattern).map(|s| {
                (
                    e.core
                        .claim(pattern)
                        .expect("peeked message is claimable"),
                    s,
                )
            });
            found.is_some()
        });
        found.expect("mprobe found a message")
    }

    /// Starts receiving the message claimed by a matched probe.
    pub fn mrecv(&mut self, id: u64, buf: RawBufMut) -> Result<Handle> {
        let Some(h) = self.core.start_matched_recv(id, buf) else {
            return Err(Error::new(
                ErrorClass::Handle,
                "matched receive",
                format!("message {id} was already received"),
            ));
        };
        if self.core.has_pulls() {
            self.run_pulls();
        }
        Ok(h)
    }

    /// Wakes those of the world ranks `peers` that sleep: a flag they may wait on in
    /// node-shared memory changed (see [`Fabric::wake_all`]). Collectives use it without
    /// knowing the transports.
    #[inline]
    pub fn wake_all(&mut self, peers: &[u32]) {
        self.fabric.wake_all(peers);
    }

    /// Number of requests not yet freed (for leak checks in tests and finalize).
    pub fn live_requests(&self) -> usize {
        self.core.live_requests()
    }

    /// Progresses until everything this rank started has left it (detached sends included).
    pub fn drain(&mut self) {
        self.wait_until(|e| !e.core.has_detached() && !e.core.has_blocked_output());
    }
}

fn stale(call: &'static str, h: Handle) -> Error {
    Error::new(
        ErrorClass::Handle,
        call,
        format!("request {h:?} was already completed and freed (use after free)"),
    )
}
