//! Cancelling a send (MPI_Cancel): a send that has not gone out is dropped here; for one that
//! has, the receiver is asked to drop the message if it is still unmatched in its unexpected
//! queue (an eager message all here, or a rendezvous offer), and the request completes when it
//! answers, cancelled or not. A message being received, or matched already, is delivered: the
//! standard lets a cancel fail.

use super::Core;
use crate::engine::matching::UnexpectedBody;
use crate::engine::request::{Handle, Op, SendPhase};
use crate::fabric::{Header, PacketKind};

impl Core {
    /// Starts cancelling send `h`; returns false when `h` is no send that can still be
    /// cancelled (a receive, a send whose cancellation was asked already).
    pub fn cancel_send(&mut self, h: Handle) -> bool {
        if self.cancelling.iter().any(|&(_, _, c)| c == h) {
            return false;
        }
        let Some(req) = self.reqs.get_mut(h) else {
            return false;
        };
        let (peer, message) = match &req.op {
            Op::Send(s) if matches!(s.phase, SendPhase::Queued) => {
                // Nothing of it went out (`handle_sent` moves a send on from `Queued` as
                // soon as its first packet has): take it off its queue.
                let peer = s.peer;
                let Op::Send(s) = std::mem::replace(&mut req.op, Op::Idle) else {
                    unreachable!("matched above")
                };
                req.done = true;
                req.status.cancelled = true;
                self.stats.bsend_in_use -= s.bsend_charge;
                self.sendq[peer as usize].retain(|&q| q != h);
                if self.sendq[peer as usize].is_empty() {
                    self.active.retain(|&p| p != peer);
                }
                return true;
            }
            Op::Send(s) => (s.peer, h.to_cookie()),
            Op::Idle => match req.sent {
                // Out whole and complete here: it completes again once the receiver answers.
                Some(sent) if req.done && !req.status.cancelled => {
                    req.done = false;
                    sent
                }
                _ => return false,
            },
            Op::Recv(_) | Op::Active(_) => return false,
        };
        self.cancelling.push((peer, message, h));
        self.control(peer, PacketKind::CancelSend, message, 0);
        true
    }

    /// A sender asks to cancel its message `hdr.cookie`: drops it if still unmatched (a
    /// synchronous sender then waits for no acknowledgement: the answer completes it), and
    /// answers.
    pub(super) fn on_cancel_send(&mut self, hdr: &Header) {
        let dropped = self.matcher.cancel_unexpected(hdr.src, hdr.cookie);
        let cancelled = dropped.is_some();
        if let Some(UnexpectedBody::Eager { data }) = dropped.map(|m| m.body) {
            self.matcher.recycle(data);
        }
        self.control(hdr.src, PacketKind::CancelAck, hdr.cookie, u64::from(cancelled));
    }

    /// The receiver answered a cancellation: the send completes, cancelled or delivered (a
    /// rendezvous it did not drop completes as usual, when its data has gone).
    pub(super) fn on_cancel_ack(&mut self, hdr: &Header) {
        let Some(i) = self
            .cancelling
            .iter()
            .position(|&(p, m, _)| p == hdr.src && m == hdr.cookie)
        else {
            debug_assert!(false, "cancel answer from rank {} for no cancel", hdr.src);
            return;
        };
        let (_, _, h) = self.cancelling.swap_remove(i);
        let Some(req) = self.reqs.get_mut(h) else {
            return;
        };
        if hdr.aux == 1 {
            req.done = true;
            req.status.cancelled = true;
            if let Op::Send(s) = std::mem::replace(&mut req.op, Op::Idle) {
                self.stats.bsend_in_use -= s.bsend_charge;
            }
        } else if matches!(req.op, Op::Idle) {
            req.done = true;
        }
    }
}
