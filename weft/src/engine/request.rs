//! Requests: a slab of slots addressed by generation-checked handles, so a stale handle (a
//! request used after it was freed) is detected instead of touching someone else's request.

use super::buffer::{RawBuf, RawBufMut};
use crate::error::Error;

/// A request handle: slot index plus the slot's generation when it was handed out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Handle {
    idx: u32,
    gen: u32,
}

impl Handle {
    /// Encodes the handle in a packet cookie.
    pub fn to_cookie(self) -> u64 {
        (u64::from(self.gen) << 32) | u64::from(self.idx)
    }
    /// Decodes a cookie made by [`Handle::to_cookie`].
    pub fn from_cookie(c: u64) -> Handle {
        Handle {
            idx: c as u32,
            gen: (c >> 32) as u32,
        }
    }
}

/// Where and what a completed receive got (world rank of the source).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MsgStatus {
    /// Source's world rank.
    pub source: u32,
    /// Tag of the message.
    pub tag: i32,
    /// Bytes of the message (for a truncated receive: the message's full length).
    pub len: usize,
    /// The request was cancelled before it matched.
    pub cancelled: bool,
}

/// Sender-side progress of one message.
#[derive(Debug)]
pub enum SendPhase {
    /// Not started (queued behind other messages to the same peer, or not tried yet).
    Queued,
    /// Eager: `sent` bytes are in packets so far.
    Streaming,
    /// Rendezvous: RTS sent, waiting for the receiver's FIN or CTS.
    AwaitReply,
    /// Rendezvous fallback: pushing `Data` packets to receiver request `recv_req`.
    PushData {
        /// Receiver's request cookie.
        recv_req: u64,
    },
}

/// A send in progress.
#[derive(Debug)]
pub struct SendOp {
    pub peer: u32,
    pub context: u32,
    pub tag: i32,
    pub buf: RawBuf,
    pub sent: usize,
    pub sync: bool,
    pub acked: bool,
    pub phase: SendPhase,
    /// Buffered sends own a copy of the data; `buf` points into it.
    pub owned: Option<Vec<u8>>,
    /// Bytes of the attached bsend buffer this send holds (returned on completion).
    pub bsend_charge: usize,
    /// Split rendezvous: this side is still pushing its part (the send must not complete,
    /// even if the receiver's FIN arrived, until the push is done).
    pub push_busy: bool,
    /// The receiver's FIN arrived while the push was busy.
    pub fin_seen: bool,
}

/// A receive in progress (posted, or matched and receiving data).
#[derive(Debug)]
pub struct RecvOp {
    pub buf: RawBufMut,
    /// Message length once matched.
    pub expect: usize,
    /// Bytes of the message received so far (including any that did not fit).
    pub got: usize,
    /// Whether the sender may copy half of a large rendezvous message (see
    /// [`super::Engine::irecv_with`]).
    pub share: bool,
}

/// What a request does.
#[derive(Debug)]
pub enum Op {
    Send(SendOp),
    Recv(RecvOp),
    /// An internal active message (`super::core::active`).
    Active(super::core::active::AmOp),
    /// Nothing left to do (completed, or never had work: e.g. a receive from PROC_NULL).
    Idle,
}

/// One request.
#[derive(Debug)]
pub struct Req {
    /// Where a send's message went and the cookie it carried (set once it is out, while the
    /// request lives): what MPI_Cancel asks the receiver to remove.
    pub sent: Option<(u32, u64)>,
    pub done: bool,
    pub status: MsgStatus,
    pub error: Option<Error>,
    pub op: Op,
}

struct Slot {
    gen: u32,
    req: Option<Req>,
}

/// The slab of requests. Freed slots are reused, so steady traffic does not allocate.
#[derive(Default)]
pub struct Requests {
    slots: Vec<Slot>,
    free: Vec<u32>,
    live: usize,
}

impl Requests {
    /// Stores `req` and returns its handle.
    pub fn insert(&mut self, req: Req) -> Handle {
        self.live += 1;
        if let Some(idx) = self.free.pop() {
            let slot = &mut self.slots[idx as usize];
            debug_assert!(slot.req.is_none(), "free list names an occupied slot {idx}");
            slot.req = Some(req);
            Handle { idx, gen: slot.gen }
        } else {
            let idx = self.slots.len() as u32;
            self.slots.push(Slot {
                gen: 1,
                req: Some(req),
            });
            Handle { idx, gen: 1 }
        }
    }

    /// The request behind `h`, or `None` if it was freed (or never existed).
    #[inline]
    pub fn get(&self, h: Handle) -> Option<&Req> {
        match self.slots.get(h.idx as usize) {
            Some(s) if s.gen == h.gen => s.req.as_ref(),
            _ => None,
        }
    }

    /// Mutable access to the request behind `h`.
    #[inline]
    pub fn get_mut(&mut self, h: Handle) -> Option<&mut Req> {
        match self.slots.get_mut(h.idx as usize) {
            Some(s) if s.gen == h.gen => s.req.as_mut(),
            _ => None,
        }
    }

    /// Frees the slot; the handle (and copies of it) become stale.
    pub fn remove(&mut self, h: Handle) -> Option<Req> {
        let slot = self.slots.get_mut(h.idx as usize)?;
        if slot.gen != h.gen {
            return None;
        }
        let req = slot.req.take()?;
        slot.gen = slot.gen.wrapping_add(1).max(1);
        self.free.push(h.idx);
        self.live -= 1;
        Some(req)
    }

    /// Number of requests not yet freed.
    pub fn live(&self) -> usize {
        self.live
    }
}
