//! The sans-IO protocol core: reacts to arriving packets, tracks requests and the messages
//! in flight, and says what to send. It never touches a transport; [`super::Engine`] feeds it
//! packets from the fabric and hands its output to the fabric.
//!
//! Protocols (see `fabric::PacketKind`):
//! - eager: `Eager` (header + first chunk), then `Frag`s; synchronous mode asks for a
//!   `SyncAck` when the message is matched;
//! - rendezvous: `Rts` (sender's buffer address); the receiver, once matched, pulls the data
//!   in a single copy and answers `Fin`, or, when it cannot, answers `Cts` and the sender
//!   pushes `Data` packets (the pipelined fallback).

pub mod active;
mod cancel;
mod outgoing;

use super::buffer::RawBufMut;
use super::matching::{Matcher, Pattern, Unexpected, UnexpectedBody};
use super::request::{Handle, MsgStatus, Op, Req, Requests, SendPhase};
use super::Stats;
use crate::error::{Error, ErrorClass};
use crate::fabric::{Header, PacketKind, FLAG_SYNC};
use std::collections::VecDeque;

/// Where fragments from a source go while its eager message is still arriving.
#[derive(Clone, Copy, Debug)]
enum Stream {
    Req(Handle),
    Unexpected(u64),
    /// A one-packet eager message being read straight into this posted receive's buffer.
    Placing(Handle),
    /// The same, into the short-circuit receive's buffer.
    PlacingFast,
}

/// A rendezvous receive waiting for its single-copy pull.
#[derive(Clone, Copy, Debug)]
pub struct PendingPull {
    pub req: Handle,
    pub peer: u32,
    pub cookie: u64,
    pub addr: u64,
    pub len: usize,
}

/// A split rendezvous's sender-side push, waiting to run.
#[derive(Clone, Copy, Debug)]
pub struct PendingPush {
    pub req: Handle,
    pub peer: u32,
    /// Receiver's address for the pushed part.
    pub remote: u64,
    /// Where in the send buffer the pushed part starts.
    pub offset: usize,
    /// The receiver's request.
    pub recv_cookie: u64,
}

/// A blocking receive posted when nothing else was pending (LAM's short-circuit): a
/// one-packet eager message that matches is copied straight into the buffer, with no request
/// and no queue. Any other matching packet "spoils" it (it goes the general way, so MPI's
/// ordering holds) and the receive falls back to a normal posted receive.
#[derive(Debug)]
pub struct FastRecv {
    pub pattern: Pattern,
    pub buf: RawBufMut,
    pub result: Option<MsgStatus>,
    pub spoiled: bool,
    /// A matching message is being read straight into `buf` (see [`Core::eager_slot`]):
    /// later arrivals no longer match this receive.
    pub filling: bool,
}

/// What the protocols need to know about the way to one peer, asked of the fabric once when
/// the engine starts (the limits of a transport do not change during a job).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerLimits {
    /// Largest message sent eagerly to this peer.
    pub eager_limit: usize,
    /// Largest payload one packet to this peer carries (at least 1).
    pub max_payload: usize,
}

/// The next packet a send wants out (see [`Core::poll_transmit`]): a header and the part of
/// the send buffer it carries.
#[derive(Debug)]
pub struct Transmit<'a> {
    pub hdr: Header,
    pub payload: &'a [u8],
}

/// How a matched rendezvous receive is to be pulled (see [`Core::plan_pull`]).
#[derive(Debug)]
pub struct PullPlan {
    /// The receive's buffer.
    pub buf: RawBufMut,
    /// How many bytes, from the start, this rank pulls itself (the sender pushes the rest).
    pub own: usize,
    /// Whether a Share packet asking the sender for the rest was queued: it should go out
    /// before the pull, so both copies run at once.
    pub shared: bool,
}

/// Protocol state of one rank.
///
/// Inputs: [`Core::on_packet`] and the [`crate::fabric::Sink`] methods (arrivals), the
/// `start_*`/`cancel_*` commands, and the `handle_*` calls that report what the engine did
/// with an output. Outputs: [`Core::poll_transmit`] (data packets, per peer),
/// [`Core::poll_control`] (control packets), [`Core::poll_pull`]/[`Core::plan_pull`] and
/// [`Core::poll_push`] (single-copy work). The engine polls control packets first, then
/// pushes, pulls and queued sends.
pub struct Core {
    rank: u32,
    reqs: Requests,
    matcher: Matcher,
    streams: Vec<Option<Stream>>,
    /// Per destination, the limits of the way there.
    limits: Vec<PeerLimits>,
    /// Smallest rendezvous message copied by both sides at once (0: never).
    split_copy_min: usize,
    /// Peers a single-copy pull has succeeded from: split copies (which also push) are only
    /// used with those, since a refused pull after a split was asked for cannot be undone.
    /// (Per peer: a pull from oneself is a plain copy and proves nothing about the others.)
    single_copy_peers: Vec<bool>,
    /// Per destination, the sends not fully handed to the fabric yet, in order.
    sendq: Vec<VecDeque<Handle>>,
    /// Destinations whose `sendq` is not empty.
    active: Vec<u32>,
    /// Control packets (acks, FIN, CTS, Share, Pushed) waiting for room.
    outbox: VecDeque<(u32, Header)>,
    /// Matched rendezvous receives to pull.
    pulls: Vec<PendingPull>,
    /// Split-rendezvous parts this rank must push.
    pushes: Vec<PendingPush>,
    /// The short-circuit receive in progress, if any.
    fast: Option<FastRecv>,
    /// Requests nobody waits for (buffered sends, freed requests): reaped when done.
    detached: Vec<Handle>,
    /// Sends whose cancellation was asked of their receiver: (peer, message cookie, request).
    cancelling: Vec<(u32, u64, Handle)>,
    /// Cookies given to eager messages sent with no request queued (`eager_now`).
    message_ids: u64,
    /// Internal active messages: handlers, and packets waiting to go out.
    pub(super) am: active::Active,
    /// Counters only: the engine's wait loop counts its yields and sleeps here too.
    pub(super) stats: Stats,
}

impl Core {
    /// A core for `rank` of `size`, reaching each peer `p` with `limits[p]`, splitting
    /// rendezvous copies from `split_copy_min` bytes (0: never).
    pub fn new(rank: u32, size: u32, limits: Vec<PeerLimits>, split_copy_min: usize) -> Self {
        assert_eq!(
            limits.len(),
            size as usize,
            "Core::new: {} peer limits for a world of {size} ranks",
            limits.len()
        );
        Core {
            rank,
            reqs: Requests::default(),
            matcher: Matcher::default(),
            streams: (0..size).map(|_| None).collect(),
            limits: limits
                .into_iter()
                .map(|l| PeerLimits {
                    max_payload: l.max_payload.max(1),
                    ..l
                })
                .collect(),
            split_copy_min,
            single_copy_peers: vec![false; size as usize],
            sendq: (0..size).map(|_| VecDeque::new()).collect(),
            active: Vec::new(),
            outbox: VecDeque::new(),
            cancelling: Vec::new(),
            message_ids: 0,
            am: active::Active::default(),
            pulls: Vec::new(),
            pushes: Vec::new(),
            fast: None,
            detached: Vec::new(),
            stats: Stats::default(),
        }
    }

    /// This rank.
    pub fn rank(&self) -> u32 {
        self.rank
    }

    /// The statistics so far.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// The limits of the way to `peer`.
    #[inline]
    pub fn limits(&self, peer: u32) -> PeerLimits {
        self.limits[peer as usize]
    }

    /// Number of peers this core can reach: the world, then the processes of other jobs
    /// added by [`Core::add_peer`].
    pub fn peer_count(&self) -> u32 {
        self.limits.len() as u32
    }

    /// Adds a peer reached with `limits` (a process of another job, after a connect or a
    /// spawn) and returns its peer number: the next after the world's and earlier additions.
    pub fn add_peer(&mut self, limits: PeerLimits) -> u32 {
        let id = self.limits.len() as u32;
        self.limits.push(PeerLimits {
            max_payload: limits.max_payload.max(1),
            ..limits
        });
        self.streams.push(None);
        self.single_copy_peers.push(false);
        self.sendq.push(VecDeque::new());
        id
    }

    // ----- requests ---------------------------------------------------------------------

    /// Whether request `h` is complete (or stale).
    #[inline]
    pub fn is_done(&self, h: Handle) -> bool {
        self.reqs.get(h).is_none_or(|r| r.done)
    }

    /// Whether `h` names a live request.
    pub fn is_live(&self, h: Handle) -> bool {
        self.reqs.get(h).is_some()
    }

    /// Frees request `h`, returning it (`None`: stale).
    pub fn take_request(&mut self, h: Handle) -> Option<Req> {
        self.reqs.remove(h)
    }

    /// Number of requests not yet freed.
    pub fn live_requests(&self) -> usize {
        self.reqs.live()
    }

    /// A request for work the engine does outside the core (a schedule): it completes when
    /// [`Core::complete_local`] says so.
    pub fn start_local(&mut self) -> Handle {
        self.reqs.insert(Req {
            sent: None,
            done: false,
            status: MsgStatus::default(),
            error: None,
            op: Op::Idle,
        })
    }

    /// Completes request `h` from [`Core::start_local`], with `error` if it failed.
    pub fn complete_local(&mut self, h: Handle, error: Option<Error>) {
        if let Some(req) = self.reqs.get_mut(h) {
            req.done = true;
            req.error = error;
        }
    }

    /// Lets `h` complete in the background, then be freed.
    pub fn detach(&mut self, h: Handle) {
        if self.reqs.get(h).is_some() {
            self.detached.push(h);
        }
    }

    /// Whether detached requests are still to be reaped.
    #[inline]
    pub fn has_detached(&self) -> bool {
        !self.detached.is_empty()
    }

    // ----- receiving: probes and the short-circuit receive -------------------------------

    /// Whether a blocking receive may short-circuit: nothing posted, nothing unexpected.
    #[inline]
    pub fn receives_idle(&self) -> bool {
        self.matcher.posted_is_empty() && self.matcher.unexpected_len() == 0
    }

    /// Starts the short-circuit receive `f`.
    pub fn begin_fast_recv(&mut self, f: FastRecv) {
        debug_assert!(self.fast.is_none(), "a short-circuit receive is in progress");
        self.fast = Some(f);
    }

    /// Whether the short-circuit receive has its message or was spoiled.
    #[inline]
    pub fn fast_recv_settled(&self) -> bool {
        self.fast
            .as_ref()
            .is_some_and(|f| f.result.is_some() || f.spoiled)
    }

    /// Ends the short-circuit receive, returning it.
    pub fn end_fast_recv(&mut self) -> Option<FastRecv> {
        self.fast.take()
    }

    /// The status of the oldest arrived message matching `pattern`.
    pub fn peek(&self, pattern: &Pattern) -> Option<MsgStatus> {
        self.matcher
            .peek_unexpected(pattern)
            .map(|(_, m)| MsgStatus {
                source: m.source,
                tag: m.tag,
                len: m.len,
                cancelled: false,
            })
    }

    /// Claims the oldest arrived message matching `pattern` for a matched receive.
    pub fn claim(&mut self, pattern: &Pattern) -> Option<u64> {
        self.matcher.claim_unexpected(pattern)
    }

    /// Starts receiving claimed message `id` into `buf`; `None` when it was received already.
    pub fn start_matched_recv(&mut self, id: u64, buf: RawBufMut) -> Option<Handle> {
        self.matcher.get_mut(id)?;
        let h = self.reqs.insert(recv_req(buf, true));
        self.consume_unexpected(id, h);
        Some(h)
    }

    /// Queues a payload-less control packet (FIN, CTS, sync acknowledgement) for `peer`,
    /// behind any already waiting: the engine flushes the queue in order.
    fn control(&mut self, peer: u32, kind: PacketKind, cookie: u64, aux: u64) {
        let hdr = Header {
            kind: kind as u8,
            src: self.rank,
            cookie,
            aux,
            ..Header::default()
        };
        self.outbox.push_back((peer, hdr));
    }

    /// Queues a send for its destination (the engine pushes it out).
    fn enqueue_send(&mut self, peer: u32, h: Handle) {
        let q = &mut self.sendq[peer as usize];
        q.push_back(h);
        if q.len() == 1 {
            self.active.push(peer);
        }
    }

    /// Handles one arriving packet.
    #[inline]
    pub fn on_packet(&mut self, hdr: &Header, payload: &[u8]) {
        if let Some(f) = &mut self.fast {
            if f.result.is_none()
                && !f.spoiled
                && !f.filling
                && is_new_message(hdr.kind)
                && f.pattern.matches(hdr.context, hdr.src, hdr.tag)
            {
                if hdr.kind == PacketKind::Eager as u8
                    && hdr.flags == 0
                    && hdr.len as usize == payload.len()
                {
                    f.buf.write_at(0, payload);
                    f.result = Some(MsgStatus {
                        source: hdr.src,
                        tag: hdr.tag,
                        len: payload.len(),
                        cancelled: false,
                    });
                    self.stats.recv_msgs += 1;
                    self.stats.recv_bytes += payload.len() as u64;
                    return;
                }
                f.spoiled = true;
            }
        }
        match PacketKind::from_u8(hdr.kind) {
            Some(PacketKind::Eager) => self.on_eager(hdr, payload),
            Some(PacketKind::Frag) => self.on_frag(hdr, payload),
            Some(PacketKind::Rts) => self.on_rts(hdr),
            Some(PacketKind::Fin) => self.on_fin(Handle::from_cookie(hdr.cookie)),
            Some(PacketKind::Share) => self.on_share(hdr),
            Some(PacketKind::Pushed) => self.on_pushed(hdr),
            Some(PacketKind::SyncAck) => self.on_sync_ack(Handle::from_cookie(hdr.cookie)),
            Some(PacketKind::Cts) => self.on_cts(hdr),
            Some(PacketKind::Data) => self.on_data(hdr, payload),
            Some(PacketKind::CancelSend) => self.on_cancel_send(hdr),
            Some(PacketKind::CancelAck) => self.on_cancel_ack(hdr),
            Some(PacketKind::Am) => self.on_am(hdr, payload, 0),
            Some(PacketKind::AmReply) => self.on_am_reply(hdr, payload, false),
            None => {
                debug_assert!(
                    false,
                    "unexpected packet kind {} from rank {}",
                    hdr.kind, hdr.src
                )
            }
        }
    }

    fn on_eager(&mut self, hdr: &Header, payload: &[u8]) {
        let (src, total) = (hdr.src, hdr.len as usize);
        self.stats.recv_msgs += 1;
        self.stats.recv_bytes += total as u64;
        if let Some(h) = self
            .matcher
            .take_posted(hdr.context, src, hdr.tag, |_| true)
        {
            let r = self.matched_eager(h, hdr);
            r.got = payload.len();
            r.buf.write_at(0, payload);
            if payload.len() == total {
                self.finish_recv(h);
            } else {
                self.streams[src as usize] = Some(Stream::Req(h));
            }
            return;
        }
        self.stats.unexpected_msgs += 1;
        let mut data = self.matcher.data_buffer(total);
        data.extend_from_slice(payload);
        let id = self.matcher.add_unexpected(Unexpected {
            context: hdr.context,
            source: src,
            tag: hdr.tag,
            len: total,
            sync_cookie: (hdr.flags & FLAG_SYNC != 0).then_some(hdr.cookie),
            message: hdr.cookie,
            body: UnexpectedBody::Eager { data },
        });
        if payload.len() < total {
            self.streams[src as usize] = Some(Stream::Unexpected(id));
        }
    }

    /// Records that eager message `hdr` matched posted receive `h` (acknowledging a
    /// synchronous send); returns the receive, for its data.
    fn matched_eager(&mut self, h: Handle, hdr: &Header) -> &mut super::request::RecvOp {
        if hdr.flags & FLAG_SYNC != 0 {
            self.control(hdr.src, PacketKind::SyncAck, hdr.cookie, 0);
        }
        let req = self.reqs.get_mut(h).expect("posted receive is live");
        req.status = MsgStatus {
            source: hdr.src,
            tag: hdr.tag,
            len: hdr.len as usize,
            cancelled: false,
        };
        let Op::Recv(r) = &mut req.op else {
            unreachable!("posted requests are receives")
        };
        r.expect = hdr.len as usize;
        r
    }

    /// Where a one-packet eager message of `len` bytes can be read straight into, saving
    /// the copy out of the transport's buffer: the buffer of the receive it matches, which
    /// it claims now (matching on the header, exactly as [`Core::on_packet`] would), or,
    /// for the calls that follow while the payload arrives, the receive it claimed. `None`
    /// when no receive matches or the one that does is too small (the packet then goes the
    /// general way, which stores it or reports the truncation).
    fn eager_slot(&mut self, hdr: &Header, len: usize) -> Option<&mut [u8]> {
        let src = hdr.src as usize;
        match self.streams[src] {
            Some(Stream::Placing(h)) => return self.recv_slice(h, 0, len),
            Some(Stream::PlacingFast) => {
                return self.fast.as_mut().map(|f| f.buf.slice_mut(0, len))
            }
            Some(_) => return None,
            None => {}
        }
        let fast_match = self.fast.as_ref().map(|f| {
            f.result.is_none()
                && !f.spoiled
                && !f.filling
                && f.pattern.matches(hdr.context, hdr.src, hdr.tag)
        });
        if fast_match == Some(true) {
            let f = self.fast.as_mut().expect("checked just above");
            if hdr.flags != 0 || len > f.buf.len() {
                return None;
            }
            f.filling = true;
            self.streams[src] = Some(Stream::PlacingFast);
            return Some(f.buf.slice_mut(0, len));
        }
        let reqs = &self.reqs;
        let h = self.matcher.take_posted(
            hdr.context,
            hdr.src,
            hdr.tag,
            |h| matches!(reqs.get(h), Some(Req { op: Op::Recv(r), .. }) if r.buf.len() >= len),
        )?;
        self.stats.recv_msgs += 1;
        self.stats.recv_bytes += len as u64;
        self.matched_eager(h, hdr);
        self.streams[src] = Some(Stream::Placing(h));
        self.recv_slice(h, 0, len)
    }

    /// The eager payload [`Core::eager_slot`] gave a place to is all there.
    fn eager_placed(&mut self, hdr: &Header, len: usize) {
        let src = hdr.src as usize;
        match self.streams[src].take() {
            Some(Stream::Placing(h)) => self.data_arrived(h, len),
            Some(Stream::PlacingFast) => {
                let f = self
                    .fast
                    .as_mut()
                    .expect("the short-circuit receive is waiting");
                f.filling = false;
                f.result = Some(MsgStatus {
                    source: hdr.src,
                    tag: hdr.tag,
                    len,
                    cancelled: false,
                });
                self.stats.recv_msgs += 1;
                self.stats.recv_bytes += len as u64;
            }
            other => {
                self.streams[src] = other;
                debug_assert!(false, "placed eager data from rank {src} nobody claimed");
            }
        }
    }

    /// `n` bytes at `off` of receive `h`'s buffer, when it is a live receive that holds them.
    fn recv_slice(&mut self, h: Handle, off: usize, n: usize) -> Option<&mut [u8]> {
        let Some(Req {
            op: Op::Recv(r), ..
        }) = self.reqs.get_mut(h)
        else {
            return None;
        };
        if off.checked_add(n)? > r.buf.len() {
            return None;
        }
        Some(r.buf.slice_mut(off, n))
    }

    fn on_frag(&mut self, hdr: &Header, payload: &[u8]) {
        let src = hdr.src as usize;
        match self.streams[src] {
            Some(Stream::Req(h)) => {
                let req = self.reqs.get_mut(h).expect("streaming receive is live");
                let Op::Recv(r) = &mut req.op else {
                    unreachable!("stream target is a receive")
                };
                r.buf.write_at(r.got, payload);
                r.got += payload.len();
                if r.got >= r.expect {
                    self.streams[src] = None;
                    self.finish_recv(h);
                }
            }
            Some(Stream::Unexpected(id)) => {
                let m = self
                    .matcher
                    .get_mut(id)
                    .expect("streaming unexpected message is stored");
                if let UnexpectedBody::Eager { data } = &mut m.body {
                    data.extend_from_slice(payload);
                }
                if m.is_complete() {
                    self.streams[src] = None;
                }
            }
            Some(Stream::Placing(_) | Stream::PlacingFast) | None => debug_assert!(
                false,
                "fragment from rank {src} with no message in progress"
            ),
        }
    }

    fn on_rts(&mut self, hdr: &Header) {
        let (src, len) = (hdr.src, hdr.len as usize);
        self.stats.recv_msgs += 1;
        self.stats.recv_bytes += len as u64;
        if let Some(h) = self
            .matcher
            .take_posted(hdr.context, src, hdr.tag, |_| true)
        {
            let req = self.reqs.get_mut(h).expect("posted receive is live");
            req.status = MsgStatus {
                source: src,
                tag: hdr.tag,
                len,
                cancelled: false,
            };
            if let Op::Recv(r) = &mut req.op {
                r.expect = len;
            }
            self.pulls.push(PendingPull {
                req: h,
                peer: src,
                cookie: hdr.cookie,
                addr: hdr.aux,
                len,
            });
        } else {
            self.stats.unexpected_msgs += 1;
            self.matcher.add_unexpected(Unexpected {
                context: hdr.context,
                source: src,
                tag: hdr.tag,
                len,
                sync_cookie: None,
                message: hdr.cookie,
                body: UnexpectedBody::Rts {
                    cookie: hdr.cookie,
                    addr: hdr.aux,
                },
            });
        }
    }

    fn on_cts(&mut self, hdr: &Header) {
        let h = Handle::from_cookie(hdr.cookie);
        let Some(req) = self.reqs.get_mut(h) else {
            debug_assert!(false, "CTS for unknown send {h:?}");
            return;
        };
        let Op::Send(s) = &mut req.op else { return };
        s.phase = SendPhase::PushData { recv_req: hdr.aux };
        s.sent = 0;
        let peer = s.peer;
        self.stats.pushed_rendezvous += 1;
        self.enqueue_send(peer, h);
    }

    fn on_data(&mut self, hdr: &Header, payload: &[u8]) {
        let h = Handle::from_cookie(hdr.aux);
        let Some(req) = self.reqs.get_mut(h) else {
            debug_assert!(false, "data for unknown receive {h:?}");
            return;
        };
        let Op::Recv(r) = &mut req.op else { return };
        r.buf.write_at(hdr.cookie as usize, payload);
        self.data_arrived(h, payload.len());
    }

    /// Counts `n` bytes of rendezvous data in for receive `h`; completes it when all are.
    fn data_arrived(&mut self, h: Handle, n: usize) {
        let Some(Req {
            op: Op::Recv(r), ..
        }) = self.reqs.get_mut(h)
        else {
            return;
        };
        r.got += n;
        if r.got >= r.expect {
            self.finish_recv(h);
        }
    }

    fn on_fin(&mut self, h: Handle) {
        if let Some(Req {
            op: Op::Send(s), ..
        }) = self.reqs.get_mut(h)
        {
            if s.push_busy {
                s.fin_seen = true;
                return;
            }
        }
        self.complete_send(h);
    }

    fn on_share(&mut self, hdr: &Header) {
        let h = Handle::from_cookie(hdr.cookie);
        let Some(Req {
            op: Op::Send(s), ..
        }) = self.reqs.get_mut(h)
        else {
            debug_assert!(false, "share for unknown send {h:?}");
            return;
        };
        s.push_busy = true;
        let offset = s.buf.len() - hdr.len as usize;
        let recv_cookie = u64::from(hdr.context) | (u64::from(hdr.tag as u32) << 32);
        self.pushes.push(PendingPush {
            req: h,
            peer: hdr.src,
            remote: hdr.aux,
            offset,
            recv_cookie,
        });
    }

    fn on_pushed(&mut self, hdr: &Header) {
        let h = Handle::from_cookie(hdr.aux);
        let Some(Req {
            op: Op::Recv(r), ..
        }) = self.reqs.get_mut(h)
        else {
            debug_assert!(false, "pushed part for unknown receive {h:?}");
            return;
        };
        r.got += hdr.len as usize;
        if r.got >= r.expect {
            self.finish_recv(h);
        }
    }

    /// The sender's part of a split rendezvous is done (pushed or sent as data).
    fn push_done(&mut self, h: Handle) {
        if let Some(Req {
            op: Op::Send(s), ..
        }) = self.reqs.get_mut(h)
        {
            s.push_busy = false;
            if s.fin_seen {
                self.complete_send(h);
            }
        }
    }

    fn on_sync_ack(&mut self, h: Handle) {
        let Some(req) = self.reqs.get_mut(h) else {
            debug_assert!(false, "sync ack for unknown send {h:?}");
            return;
        };
        if let Op::Send(s) = &mut req.op {
            s.acked = true;
            if s.sent == s.buf.len() && matches!(s.phase, SendPhase::Streaming) {
                self.complete_send(h);
            }
        }
    }

    /// Marks a send done and releases what it held.
    fn complete_send(&mut self, h: Handle) {
        if let Some(req) = self.reqs.get_mut(h) {
            req.done = true;
            if let Op::Send(s) = std::mem::replace(&mut req.op, Op::Idle) {
                req.sent = Some((s.peer, h.to_cookie()));
                self.stats.bsend_in_use -= s.bsend_charge;
            }
        }
    }

    /// Marks a receive done, recording a truncation error if the message did not fit.
    fn finish_recv(&mut self, h: Handle) {
        let Some(req) = self.reqs.get_mut(h) else {
            return;
        };
        req.done = true;
        if let Op::Recv(r) = std::mem::replace(&mut req.op, Op::Idle) {
            if r.expect > r.buf.len() {
                req.error = Some(truncation(
                    r.expect,
                    req.status.source,
                    req.status.tag,
                    r.buf.len(),
                ));
            }
        }
    }

    /// Starts a receive: matches the oldest fitting unexpected message, or posts it.
    pub fn start_recv(&mut self, pattern: Pattern, buf: RawBufMut, share: bool) -> Handle {
        let h = self.reqs.insert(recv_req(buf, share));
        match self.matcher.claim_unexpected(&pattern) {
            Some(id) => self.consume_unexpected(id, h),
            None => self.matcher.post(h, pattern),
        }
        h
    }

    /// Receives a claimed unexpected message `id` into request `h`.
    fn consume_unexpected(&mut self, id: u64, h: Handle) {
        let m = self
            .matcher
            .get_mut(id)
            .expect("claimed unexpected message is stored");
        let (src, len, tag) = (m.source, m.len, m.tag);
        let sync_cookie = m.sync_cookie.take();
        let complete = m.is_complete();
        if let Some(c) = sync_cookie {
            self.control(src, PacketKind::SyncAck, c, 0);
        }
        let m = self.matcher.remove(id).expect("stored");
        let req = self.reqs.get_mut(h).expect("new receive is live");
        req.status = MsgStatus {
            source: src,
            tag,
            len,
            cancelled: false,
        };
        let Op::Recv(r) = &mut req.op else {
            unreachable!("consume into a receive")
        };
        r.expect = len;
        match m.body {
            UnexpectedBody::Eager { data } => {
                r.buf.write_at(0, &data);
                r.got = data.len();
                self.matcher.recycle(data);
                if complete {
                    self.finish_recv(h);
                } else {
                    self.streams[src as usize] = Some(Stream::Req(h));
                }
            }
            UnexpectedBody::Rts { cookie, addr } => {
                self.pulls.push(PendingPull {
                    req: h,
                    peer: src,
                    cookie,
                    addr,
                    len,
                });
            }
        }
    }

    /// Cancels a receive that is still posted. Returns whether it was.
    pub fn cancel_recv(&mut self, h: Handle) -> bool {
        if !self.matcher.unpost(h) {
            return false;
        }
        if let Some(req) = self.reqs.get_mut(h) {
            req.done = true;
            req.status.cancelled = true;
            req.op = Op::Idle;
        }
        true
    }

    /// Frees detached requests that are done.
    pub fn reap_detached(&mut self) {
        let reqs = &mut self.reqs;
        self.detached.retain(|&h| match reqs.get(h) {
            Some(r) if r.done => {
                reqs.remove(h);
                false
            }
            Some(_) => true,
            None => false,
        });
    }

    /// Whether output is waiting for room at a peer (then a sleeping rank must wake up on
    /// its own to retry, since nobody will send it a packet).
    pub fn has_blocked_output(&self) -> bool {
        !self.active.is_empty() || !self.outbox.is_empty() || self.has_active_out()
    }
}

/// The error of a receive whose `len`-byte message from `source` did not fit `cap` bytes.
pub fn truncation(len: usize, source: u32, tag: i32, cap: usize) -> Error {
    Error::new(
        ErrorClass::Truncate,
        "receive",
        format!("message of {len} bytes from rank {source} (tag {tag}) is longer than the {cap}-byte receive buffer"),
    )
}

/// Whether a packet of this kind starts a new message (and so takes part in matching).
#[inline]
fn is_new_message(kind: u8) -> bool {
    kind == PacketKind::Eager as u8 || kind == PacketKind::Rts as u8
}

/// A fresh receive request for `buf`.
fn recv_req(buf: RawBufMut, share: bool) -> Req {
    Req {
        sent: None,
        done: false,
        status: MsgStatus::default(),
        error: None,
        op: Op::Recv(super::request::RecvOp {
            buf,
            expect: 0,
            got: 0,
            share,
        }),
    }
}

impl crate::fabric::Sink for Core {
    #[inline]
    fn packet(&mut self, hdr: &Header, payload: &[u8]) {
        self.on_packet(hdr, payload);
    }

    /// Rendezvous data goes straight into the receive buffer at its offset, when it fits
    /// whole (a truncated tail is delivered as a packet, which drops what does not fit); a
    /// one-packet eager message into the buffer of the receive it matches, when there is one
    /// and it fits.
    fn place(&mut self, hdr: &Header, len: usize) -> Option<&mut [u8]> {
        match PacketKind::from_u8(hdr.kind)? {
            PacketKind::Data => {
                self.recv_slice(Handle::from_cookie(hdr.aux), hdr.cookie as usize, len)
            }
            PacketKind::Eager if hdr.len as usize == len => self.eager_slot(hdr, len),
            PacketKind::Am | PacketKind::AmReply => self.am_place(hdr, len),
            _ => None,
        }
    }

    fn placed(&mut self, hdr: &Header, len: usize) {
        if hdr.kind == PacketKind::Data as u8 {
            self.data_arrived(Handle::from_cookie(hdr.aux), len);
        } else if matches!(PacketKind::from_u8(hdr.kind), Some(PacketKind::Am | PacketKind::AmReply)) {
            self.am_placed(hdr, len);
        } else {
            self.eager_placed(hdr, len);
        }
    }
}
