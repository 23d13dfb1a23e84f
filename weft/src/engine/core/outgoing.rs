//! The core's outputs toward the fabric: the eager/rendezvous choice and packetization of
//! queued sends ([`Core::poll_transmit`]/[`Core::handle_sent`]), control packets, and the
//! single-copy work with its split-copy choice ([`Core::plan_pull`]/[`Core::handle_pull`],
//! [`Core::push_source`]/[`Core::handle_push`]).

use super::{Core, PendingPull, PendingPush, PullPlan, Transmit};
use crate::engine::request::{Handle, MsgStatus, Op, Req, SendOp, SendPhase};
use crate::fabric::{Header, PacketKind, PullError, FLAG_SYNC};

impl Core {
    // ----- sending: the eager/rendezvous choice and packetization ----------------------

    /// The header of a `len`-byte standard message to `peer` that may go out now as one
    /// eager packet, with no request: it is within the eager limit and one packet, and
    /// nothing is queued ahead of it for `peer`. `None`: start a request instead.
    #[inline]
    pub fn eager_now(&self, peer: u32, context: u32, tag: i32, len: usize, id: u64) -> Option<Header> {
        let l = self.limits[peer as usize];
        if len > l.eager_limit || len > l.max_payload || !self.sendq[peer as usize].is_empty() {
            return None;
        }
        Some(Header {
            kind: PacketKind::Eager as u8,
            src: self.rank,
            context,
            tag,
            len: len as u64,
            cookie: id,
            ..Header::default()
        })
    }

    /// A cookie for an eager message sent with no request queued, which a request may yet
    /// cancel ([`Core::sent_request`]): never one a request handle makes (top bit set).
    #[inline]
    pub fn message_id(&mut self) -> u64 {
        self.message_ids += 1;
        (1 << 63) | self.message_ids
    }

    /// Charges `bytes` of a buffered send to the attached buffer (released when it is sent).
    pub fn charge_bsend(&mut self, bytes: usize) {
        self.stats.bsend_in_use += bytes;
    }

    /// Counts a message sent with no request (see [`Core::eager_now`]).
    #[inline]
    pub fn count_sent(&mut self, len: usize) {
        self.stats.sent_msgs += 1;
        self.stats.sent_bytes += len as u64;
    }

    /// Frees a request [`Core::sent_request`] made for a message that did not go out after
    /// all (the fabric had no room).
    pub fn forget_sent_request(&mut self, h: Handle) {
        self.reqs.remove(h);
    }

    /// A request for a send that went out whole already, to `peer` with cookie `id`.
    pub fn sent_request(&mut self, peer: u32, id: u64) -> Handle {
        self.reqs.insert(Req {
            sent: Some((peer, id)),
            done: true,
            status: MsgStatus::default(),
            error: None,
            op: Op::Idle,
        })
    }

    /// Starts send `op` (counted already): queues it behind the others to its peer. Returns
    /// its handle and whether it is first in its queue (then the engine pushes it at once).
    pub fn start_send(&mut self, op: SendOp) -> (Handle, bool) {
        let peer = op.peer;
        let h = self.reqs.insert(Req {
            sent: None,
            done: false,
            status: MsgStatus::default(),
            error: None,
            op: Op::Send(op),
        });
        self.enqueue_send(peer, h);
        (h, self.sendq[peer as usize].len() == 1)
    }

    /// Unlists `peer` from the active destinations when its queue emptied right after
    /// [`Core::start_send`] listed it (it all went out at once).
    pub fn unlist_if_idle(&mut self, peer: u32) {
        if self.sendq[peer as usize].is_empty() && self.active.last() == Some(&peer) {
            self.active.pop();
        }
    }

    /// Destinations with queued sends, by index (for the engine to push in turn).
    pub fn active_len(&self) -> usize {
        self.active.len()
    }

    /// The `i`th destination with queued sends.
    pub fn active_peer(&self, i: usize) -> u32 {
        self.active[i]
    }

    /// Drops the `i`th active destination if its queue is empty; returns whether it did.
    pub fn retire_if_idle(&mut self, i: usize) -> bool {
        if self.sendq[self.active[i] as usize].is_empty() {
            self.active.swap_remove(i);
            true
        } else {
            false
        }
    }

    /// The next packet the first queued send to `peer` wants out, if any: an RTS for a
    /// message above the peer's eager limit, else the message cut into packets of at most
    /// the peer's largest payload (`Eager` then `Frag`s, or `Data` when pushing a
    /// rendezvous). Nothing changes until [`Core::handle_sent`] says it went out.
    #[inline]
    pub fn poll_transmit(&self, peer: u32) -> Option<Transmit<'_>> {
        let h = *self.sendq[peer as usize].front()?;
        let req = self.reqs.get(h).expect("queued send is live");
        let Op::Send(s) = &req.op else {
            unreachable!("send queue holds sends")
        };
        let l = self.limits[peer as usize];
        let len = s.buf.len();
        let mut hdr = Header {
            src: self.rank,
            context: s.context,
            tag: s.tag,
            len: len as u64,
            cookie: h.to_cookie(),
            ..Header::default()
        };
        let n = (len - s.sent).min(l.max_payload);
        let payload = s.buf.slice(s.sent..s.sent + n);
        match s.phase {
            SendPhase::Queued if len > l.eager_limit => {
                hdr.kind = PacketKind::Rts as u8;
                hdr.aux = s.buf.addr();
                return Some(Transmit { hdr, payload: &[] });
            }
            SendPhase::Queued => {
                hdr.kind = PacketKind::Eager as u8;
                hdr.flags = if s.sync { FLAG_SYNC } else { 0 };
            }
            SendPhase::Streaming => hdr.kind = PacketKind::Frag as u8,
            SendPhase::PushData { recv_req } => {
                hdr.kind = PacketKind::Data as u8;
                hdr.aux = recv_req;
                hdr.cookie = s.sent as u64;
            }
            SendPhase::AwaitReply => unreachable!("a send awaiting FIN/CTS is not queued"),
        }
        Some(Transmit { hdr, payload })
    }

    /// The packet [`Core::poll_transmit`] gave for `peer` went out: advances its send, and
    /// when the send has nothing more to put out, unqueues it (and completes it when no
    /// reply is awaited).
    pub fn handle_sent(&mut self, peer: u32) {
        let l = self.limits[peer as usize];
        let Some(&h) = self.sendq[peer as usize].front() else {
            debug_assert!(false, "handle_sent for rank {peer} with nothing queued");
            return;
        };
        let req = self.reqs.get_mut(h).expect("queued send is live");
        let Op::Send(s) = &mut req.op else {
            unreachable!("send queue holds sends")
        };
        let len = s.buf.len();
        let n = (len - s.sent).min(l.max_payload);
        enum Then {
            More,
            Wait,
            Complete,
            PushDone,
        }
        let then = match s.phase {
            SendPhase::Queued if len > l.eager_limit => {
                self.stats.rendezvous += 1;
                s.phase = SendPhase::AwaitReply;
                Then::Wait
            }
            SendPhase::Queued | SendPhase::Streaming => {
                s.sent += n;
                s.phase = SendPhase::Streaming;
                match (s.sent == len, !s.sync || s.acked) {
                    (false, _) => Then::More,
                    (true, true) => Then::Complete,
                    (true, false) => Then::Wait,
                }
            }
            SendPhase::PushData { .. } => {
                s.sent += n;
                match (s.sent == len, s.push_busy) {
                    (false, _) => Then::More,
                    // The second half of a split rendezvous: done once the receiver's FIN
                    // for its own half is in too.
                    (true, true) => Then::PushDone,
                    (true, false) => Then::Complete,
                }
            }
            SendPhase::AwaitReply => unreachable!("a send awaiting FIN/CTS is not queued"),
        };
        if matches!(then, Then::More) {
            return;
        }
        self.sendq[peer as usize].pop_front();
        match then {
            Then::Complete => self.complete_send(h),
            Then::PushDone => self.push_done(h),
            Then::More | Then::Wait => {}
        }
    }

    // ----- control packets --------------------------------------------------------------

    /// The oldest control packet waiting to go out, and its destination.
    #[inline]
    pub fn poll_control(&self) -> Option<(u32, Header)> {
        self.outbox.front().copied()
    }

    /// The packet [`Core::poll_control`] gave went out.
    pub fn handle_control_sent(&mut self) {
        self.outbox.pop_front();
    }

    /// Whether control packets are waiting.
    #[inline]
    pub fn has_control(&self) -> bool {
        !self.outbox.is_empty()
    }

    // ----- single copy: pulls, split copies and pushes -----------------------------------

    /// Whether matched rendezvous receives wait for their pull.
    #[inline]
    pub fn has_pulls(&self) -> bool {
        !self.pulls.is_empty()
    }

    /// Takes every pull waiting to run, oldest first.
    pub fn take_pulls(&mut self) -> Vec<PendingPull> {
        std::mem::take(&mut self.pulls)
    }

    /// How to pull matched rendezvous `p` (`None`: its receive is gone). A split copy
    /// (this rank pulls the first part while the sender pushes the rest, so both processes
    /// copy at once) is chosen for a message of at least `split_copy_min` bytes that fits
    /// the receive whole, from another peer a single-copy pull has already worked with;
    /// then the Share packet for the sender is queued.
    pub fn plan_pull(&mut self, p: &PendingPull) -> Option<PullPlan> {
        let (buf, share) = match self.reqs.get(p.req) {
            Some(Req {
                op: Op::Recv(r), ..
            }) => (r.buf, r.share),
            _ => return None,
        };
        let split = share
            && self.single_copy_peers[p.peer as usize]
            && self.split_copy_min > 0
            && p.len >= self.split_copy_min
            && buf.len() >= p.len
            && p.peer != self.rank;
        if !split {
            return Some(PullPlan {
                buf,
                own: p.len,
                shared: false,
            });
        }
        let own = (p.len / 2) & !63;
        let cookie = p.req.to_cookie();
        let hdr = Header {
            kind: PacketKind::Share as u8,
            src: self.rank,
            context: cookie as u32,
            tag: (cookie >> 32) as u32 as i32,
            len: (p.len - own) as u64,
            cookie: p.cookie,
            aux: buf.addr() + own as u64,
            ..Header::default()
        };
        self.outbox.push_back((p.peer, hdr));
        self.stats.split_copies += 1;
        Some(PullPlan {
            buf,
            own,
            shared: true,
        })
    }

    /// The engine pulled `own` bytes of rendezvous `p` (as [`Core::plan_pull`] said), with
    /// `result`: acknowledges it (FIN), or asks the sender to push the data (CTS) when the
    /// transport cannot pull.
    pub fn handle_pull(&mut self, p: &PendingPull, own: usize, result: Result<(), PullError>) {
        let Some(req) = self.reqs.get_mut(p.req) else {
            return;
        };
        let Op::Recv(r) = &mut req.op else { return };
        match result {
            Ok(()) => {
                r.got += own;
                let done = r.got >= r.expect;
                self.single_copy_peers[p.peer as usize] = true;
                self.stats.single_copy += 1;
                self.control(p.peer, PacketKind::Fin, p.cookie, 0);
                if done {
                    self.finish_recv(p.req);
                }
            }
            Err(PullError::Unsupported) => {
                // (Never after a split was asked for: splits with a peer start only once a
                // pull from that peer worked, and the transport does not change its mind.)
                self.control(p.peer, PacketKind::Cts, p.cookie, p.req.to_cookie());
            }
            Err(PullError::Failed(e)) => {
                req.error = Some(e);
                self.control(p.peer, PacketKind::Fin, p.cookie, 0);
                self.finish_recv(p.req);
            }
        }
    }

    /// Whether split-rendezvous parts wait to be pushed.
    #[inline]
    pub fn has_pushes(&self) -> bool {
        !self.pushes.is_empty()
    }

    /// Takes every push waiting to run, oldest first.
    pub fn take_pushes(&mut self) -> Vec<PendingPush> {
        std::mem::take(&mut self.pushes)
    }

    /// The part of its send buffer push `p` copies to the receiver (`None`: the send is
    /// gone).
    pub fn push_source(&self, p: &PendingPush) -> Option<&[u8]> {
        match self.reqs.get(p.req) {
            Some(Req {
                op: Op::Send(s), ..
            }) => Some(s.buf.slice(p.offset..s.buf.len())),
            _ => None,
        }
    }

    /// The engine ran push `p` with `result`: tells the receiver (Pushed), or sends the part
    /// as data packets when the transport cannot push.
    pub fn handle_push(&mut self, p: &PendingPush, result: Result<(), PullError>) {
        let Some(req) = self.reqs.get_mut(p.req) else {
            return;
        };
        let Op::Send(s) = &mut req.op else { return };
        let len = s.buf.len();
        match result {
            Ok(()) => {
                let hdr = Header {
                    kind: PacketKind::Pushed as u8,
                    src: self.rank,
                    len: (len - p.offset) as u64,
                    aux: p.recv_cookie,
                    ..Header::default()
                };
                self.outbox.push_back((p.peer, hdr));
                self.push_done(p.req);
            }
            Err(PullError::Unsupported) => {
                // Send the part as data packets instead; `push_done` runs when they are out.
                s.phase = SendPhase::PushData {
                    recv_req: p.recv_cookie,
                };
                s.sent = p.offset;
                self.enqueue_send(p.peer, p.req);
            }
            Err(PullError::Failed(e)) => {
                req.error = Some(e);
                self.push_done(p.req);
            }
        }
    }
}
