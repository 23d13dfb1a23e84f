//! Internal active messages: a handler table for what is not MPI matching (DESIGN.md's
//! engine; issue 12, item 7): one-sided operations on targets reached by packets, and their
//! acknowledgements.
//!
//! An active message asks handler `id` at a peer to act on an argument (`arg`, 8 bytes) and a
//! payload. The origin's request cuts the payload into parts of whole `unit`s that each fit in
//! one packet (`Am`: `context` the handler, `cookie` the request, `aux` the argument, `len`
//! the part's offset in the payload) and hands them to the fabric in order, behind earlier
//! active messages. The handler answers every part exactly once, at once or later (a lock not
//! free yet): with bytes for the origin's reply buffer at an offset it names (`AmReply`
//! packets: `cookie` the request, `aux` the offset, `FLAG_LAST` on the part's last), or with
//! an error (`tag` the class + 1, the payload its text). The request completes when every part
//! went out and was answered: then the target has done what was asked.
//!
//! Large payloads go straight where they belong: a byte-stream transport offers each part to
//! [`AmHandler::place`] (window memory, at the target) and replies to the origin's reply
//! buffer, so neither is copied twice. Packets from one origin arrive in order, so parts (and
//! whole messages) reach a handler in the order they were started.

use super::Core;
use crate::engine::buffer::{RawBuf, RawBufMut};
use crate::engine::request::{Handle, MsgStatus, Op, Req};
use crate::error::{Error, ErrorClass};
use crate::fabric::{Header, PacketKind};

/// A handler's number in the table ([`Core::am_register`]).
pub type AmId = u32;

/// `AmReply` flag: the last reply packet of its part.
pub const FLAG_LAST: u8 = 2;

/// One part of an active message, as its handler sees it.
#[derive(Debug)]
pub struct AmPart<'a> {
    /// The origin's world rank.
    pub src: u32,
    /// The message's argument.
    pub arg: u64,
    /// Where this part starts in the message's payload.
    pub offset: u64,
    /// The part's bytes, or empty when the transport wrote them where [`AmHandler::place`]
    /// said (then `placed` says how many).
    pub payload: &'a [u8],
    /// Bytes written in place (0: none; the payload is in `payload`).
    pub placed: usize,
}

/// Where the answer to one part goes: kept by a handler that answers later.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplyTo {
    /// The origin's world rank.
    pub peer: u32,
    token: u64,
}

/// A handler's answer to one part.
#[derive(Debug)]
pub enum Answer {
    /// Done: `data` goes to the origin's reply buffer from offset `at` (empty: a bare
    /// acknowledgement).
    Done {
        /// Bytes for the origin.
        data: Vec<u8>,
        /// Where in its reply buffer.
        at: u64,
    },
    /// Refused: the origin's request fails with this error.
    Failed(Error),
    /// The handler answers later, with [`Core::am_answer`] (exactly once).
    Later,
    /// The handler answers later, from [`AmHandler::poll`], which every progress calls until
    /// the handler says it waits for nothing more (a lock granted when it is released).
    Polled,
}

impl Answer {
    /// A bare acknowledgement.
    pub fn ack() -> Answer {
        Answer::Done {
            data: Vec::new(),
            at: 0,
        }
    }
}

/// What a handler does with the parts that reach it.
pub trait AmHandler {
    /// Where `len` bytes of the part at `offset` of a message with `arg` from `src` may be
    /// written as they arrive (a byte-stream transport reads them there, then the part comes
    /// to [`AmHandler::handle`] with `placed` set). `None` (the default): deliver it whole.
    fn place(&mut self, _src: u32, _arg: u64, _offset: u64, _len: usize) -> Option<RawBufMut> {
        None
    }
    /// Acts on one part; answers now or says it will ([`Answer::Later`], [`Answer::Polled`]).
    fn handle(&mut self, part: &AmPart<'_>, reply: ReplyTo) -> Answer;
    /// Called on every progress after [`AmHandler::handle`] said [`Answer::Polled`]: the
    /// answers it can give now go into `answers`; whether it still has parts to answer.
    fn poll(&mut self, _answers: &mut Vec<(ReplyTo, Answer)>) -> bool {
        false
    }
}

/// An active message in progress at its origin.
#[derive(Debug)]
pub struct AmOp {
    peer: u32,
    id: AmId,
    arg: u64,
    payload: RawBuf,
    /// Bytes of one part (a whole number of units, at most the packet's payload).
    part: usize,
    /// Bytes of the payload handed to the fabric.
    sent: usize,
    /// Parts handed to the fabric, and answered.
    parts_sent: u32,
    answered: u32,
    reply: Option<RawBufMut>,
}

impl AmOp {
    fn parts(&self) -> u32 {
        self.payload.len().div_ceil(self.part).max(1) as u32
    }
}

/// The active-message state of one rank.
#[derive(Default)]
pub(in crate::engine) struct Active {
    handlers: Vec<Option<Box<dyn AmHandler>>>,
    /// Requests with parts not handed to the fabric yet, in the order they started.
    queue: std::collections::VecDeque<Handle>,
    /// Reply packets waiting for room, in order.
    replies: std::collections::VecDeque<(u32, Header, Vec<u8>)>,
    /// Handlers that answer from [`AmHandler::poll`] (each once).
    polled: Vec<AmId>,
}

impl std::fmt::Debug for Active {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Active")
            .field("handlers", &self.handlers.iter().filter(|h| h.is_some()).count())
            .field("queued", &self.queue.len())
            .field("replies", &self.replies.len())
            .finish()
    }
}

impl Core {
    /// Installs `handler` as number `id` (replacing any there).
    pub fn am_register(&mut self, id: AmId, handler: Box<dyn AmHandler>) {
        let t = &mut self.am.handlers;
        if t.len() <= id as usize {
            t.resize_with(id as usize + 1, || None);
        }
        t[id as usize] = Some(handler);
    }

    /// Removes handler `id` (parts for it are refused from now on).
    pub fn am_unregister(&mut self, id: AmId) -> Option<Box<dyn AmHandler>> {
        self.am.handlers.get_mut(id as usize)?.take()
    }

    /// Starts an active message to `peer`'s handler `id`: `payload` in parts of whole `unit`s,
    /// the answers' bytes into `reply`. The request completes when the target answered every
    /// part (its error, if it refused one).
    ///
    /// # Safety
    /// `payload` and `reply` are views under [`RawBuf`]'s and [`RawBufMut`]'s contracts: they
    /// stay valid until the returned request completes or is freed.
    pub unsafe fn am_start(
        &mut self,
        (peer, id): (u32, AmId),
        arg: u64,
        payload: RawBuf,
        unit: usize,
        reply: Option<RawBufMut>,
    ) -> Handle {
        let max = self.limits(peer).max_payload;
        let unit = unit.clamp(1, max);
        let op = AmOp {
            peer,
            id,
            arg,
            payload,
            part: max / unit * unit,
            sent: 0,
            parts_sent: 0,
            answered: 0,
            reply,
        };
        let h = self.reqs.insert(Req {
            sent: None,
            done: false,
            status: MsgStatus::default(),
            error: None,
            op: Op::Active(op),
        });
        self.am.queue.push_back(h);
        h
    }

    /// Answers part `to` of a handler that said [`Answer::Later`].
    pub fn am_answer(&mut self, to: ReplyTo, answer: Answer) {
        let max = self.limits(to.peer).max_payload;
        let hdr = Header {
            kind: PacketKind::AmReply as u8,
            src: self.rank,
            cookie: to.token,
            ..Header::default()
        };
        let replies = &mut self.am.replies;
        match answer {
            Answer::Later | Answer::Polled => {}
            Answer::Done { data, at } if data.len() <= max => replies.push_back((
                to.peer,
                Header {
                    aux: at,
                    flags: FLAG_LAST,
                    ..hdr
                },
                data,
            )),
            Answer::Done { data, at } => {
                let n = data.len().div_ceil(max);
                for (k, piece) in data.chunks(max).enumerate() {
                    let flags = if k + 1 == n { FLAG_LAST } else { 0 };
                    let aux = at + (k * max) as u64;
                    replies.push_back((to.peer, Header { aux, flags, ..hdr }, piece.to_vec()));
                }
            }
            Answer::Failed(e) => {
                let mut text = e.detail.into_bytes();
                text.truncate(max);
                let tag = i32::from(e.class as u8) + 1;
                replies.push_back((to.peer, Header { tag, flags: FLAG_LAST, ..hdr }, text));
            }
        }
    }

    /// Whether active-message packets wait to go out.
    #[inline]
    pub fn has_active_out(&self) -> bool {
        !self.am.queue.is_empty() || !self.am.replies.is_empty()
    }

    /// The next active-message packet to go out (replies first: they complete others'
    /// requests), and its destination; [`Core::am_sent`] when the fabric took it.
    pub fn poll_am(&self) -> Option<(u32, Header, &[u8])> {
        if let Some((peer, hdr, data)) = self.am.replies.front() {
            return Some((*peer, *hdr, data));
        }
        let h = *self.am.queue.front()?;
        let Some(Req {
            op: Op::Active(a), ..
        }) = self.reqs.get(h)
        else {
            unreachable!("a queued active message is live until its parts are out")
        };
        let len = (a.payload.len() - a.sent).min(a.part);
        let hdr = Header {
            kind: PacketKind::Am as u8,
            src: self.rank,
            context: a.id,
            len: a.sent as u64,
            cookie: h.to_cookie(),
            aux: a.arg,
            ..Header::default()
        };
        Some((a.peer, hdr, a.payload.slice(a.sent..a.sent + len)))
    }

    /// The packet [`Core::poll_am`] gave went out.
    pub fn am_sent(&mut self) {
        if self.am.replies.pop_front().is_some() {
            return;
        }
        let Some(&h) = self.am.queue.front() else {
            return;
        };
        let Some(Req {
            op: Op::Active(a), ..
        }) = self.reqs.get_mut(h)
        else {
            unreachable!("a queued active message is live until its parts are out")
        };
        a.sent += (a.payload.len() - a.sent).min(a.part);
        a.parts_sent += 1;
        if a.parts_sent == a.parts() {
            self.am.queue.pop_front();
            self.finish_am_if_answered(h);
        }
    }

    fn finish_am_if_answered(&mut self, h: Handle) {
        let Some(req) = self.reqs.get_mut(h) else {
            return;
        };
        if let Op::Active(a) = &req.op {
            if a.parts_sent == a.parts() && a.answered == a.parts_sent {
                req.op = Op::Idle;
                req.done = true;
            }
        }
    }

    /// An `Am` part arrived: its handler acts on it (or refuses it when there is none).
    pub(super) fn on_am(&mut self, hdr: &Header, payload: &[u8], placed: usize) {
        let to = ReplyTo {
            peer: hdr.src,
            token: hdr.cookie,
        };
        let part = AmPart {
            src: hdr.src,
            arg: hdr.aux,
            offset: hdr.len,
            payload,
            placed,
        };
        let answer = match self.am.handlers.get_mut(hdr.context as usize) {
            Some(Some(handler)) => handler.handle(&part, to),
            _ => Answer::Failed(Error::new(
                ErrorClass::Internal,
                "active message",
                format!("rank {} has no handler {} for active messages", self.rank, hdr.context),
            )),
        };
        if matches!(answer, Answer::Polled) && !self.am.polled.contains(&hdr.context) {
            self.am.polled.push(hdr.context);
        }
        self.am_answer(to, answer);
    }

    /// Whether some handler answers from [`AmHandler::poll`].
    #[inline]
    pub fn has_polled(&self) -> bool {
        !self.am.polled.is_empty()
    }

    /// Polls the handlers that answer so, and sends their answers; whether any answered.
    pub fn am_poll(&mut self) -> bool {
        let mut answers = Vec::new();
        let mut ids = std::mem::take(&mut self.am.polled);
        ids.retain(|&id| match self.am.handlers.get_mut(id as usize) {
            Some(Some(handler)) => handler.poll(&mut answers),
            _ => false,
        });
        self.am.polled = ids;
        let did = !answers.is_empty();
        for (to, answer) in answers {
            self.am_answer(to, answer);
        }
        did
    }

    /// An `AmReply` arrived: its bytes into the request's reply buffer (unless a transport
    /// placed them there), and the part answered if it is the last.
    pub(super) fn on_am_reply(&mut self, hdr: &Header, payload: &[u8], placed: bool) {
        let h = Handle::from_cookie(hdr.cookie);
        let Some(req) = self.reqs.get_mut(h) else {
            return; // freed meanwhile: nobody waits for the answer
        };
        let Op::Active(a) = &mut req.op else {
            return;
        };
        if hdr.tag != 0 {
            if req.error.is_none() {
                req.error = Some(Error::new(
                    ErrorClass::from_index((hdr.tag - 1) as u8),
                    "active message",
                    format!(
                        "rank {}: {}",
                        hdr.src,
                        String::from_utf8_lossy(payload)
                    ),
                ));
            }
        } else if !placed && !payload.is_empty() {
            let fits = a.reply.as_mut().map(|r| r.write_at(hdr.aux as usize, payload));
            if fits != Some(payload.len()) && req.error.is_none() {
                req.error = Some(reply_overflow(hdr, payload.len(), a.reply.map_or(0, |r| r.len())));
            }
        }
        if hdr.flags & FLAG_LAST != 0 {
            a.answered += 1;
            self.finish_am_if_answered(h);
        }
    }

    /// Where a transport may write the payload of an `Am` or `AmReply` packet.
    pub(super) fn am_place(&mut self, hdr: &Header, len: usize) -> Option<&mut [u8]> {
        if hdr.kind == PacketKind::AmReply as u8 {
            if hdr.tag != 0 {
                return None;
            }
            let Op::Active(a) = &mut self.reqs.get_mut(Handle::from_cookie(hdr.cookie))?.op else {
                return None;
            };
            let r = a.reply.as_mut()?;
            let at = hdr.aux as usize;
            if at.checked_add(len)? > r.len() {
                return None; // delivered as a packet, to fail the request
            }
            return Some(r.slice_mut(at, len));
        }
        let handler = self.am.handlers.get_mut(hdr.context as usize)?.as_mut()?;
        let mut dst = handler.place(hdr.src, hdr.aux, hdr.len, len)?;
        if dst.len() < len {
            return None;
        }
        let at = dst.slice_mut(0, len).as_mut_ptr();
        // SAFETY: `at` heads the handler's view of `len` writable bytes (checked above), which
        // stays valid and unaliased until the part is handled (`RawBufMut::new`'s contract,
        // the handler's promise); the transport's write through this slice ends before
        // `am_placed` hands the part to the handler.
        Some(unsafe { std::slice::from_raw_parts_mut(at, len) })
    }

    /// The payload [`Core::am_place`] offered is in.
    pub(super) fn am_placed(&mut self, hdr: &Header, len: usize) {
        if hdr.kind == PacketKind::AmReply as u8 {
            return self.on_am_reply(hdr, &[], true);
        }
        self.on_am(hdr, &[], len);
    }
}

#[cold]
fn reply_overflow(hdr: &Header, len: usize, room: usize) -> Error {
    Error::new(
        ErrorClass::Truncate,
        "active message",
        format!(
            "rank {} answered {len} bytes at offset {} of a {room}-byte reply buffer",
            hdr.src, hdr.aux
        ),
    )
}
