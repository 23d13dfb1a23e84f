//! Matching: the posted-receive queue and the unexpected-message queue, with MPI's rules.
//!
//! A receive names (context, source or any, tag or any). Messages from one source on one
//! context match receives in the order they were sent (non-overtaking): arrivals are matched
//! against posted receives in posting order, new receives against unexpected messages in
//! arrival order.

use super::request::Handle;
use std::collections::VecDeque;

/// Source and tag selectors; `None` is the wildcard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pattern {
    pub context: u32,
    pub source: Option<u32>,
    pub tag: Option<i32>,
}

impl Pattern {
    /// Whether a message (context, source, tag) matches.
    #[inline]
    pub fn matches(&self, context: u32, source: u32, tag: i32) -> bool {
        self.context == context
            && self.source.is_none_or(|s| s == source)
            && self.tag.is_none_or(|t| t == tag)
    }
}

/// A posted receive waiting for a message.
#[derive(Clone, Copy, Debug)]
pub struct Posted {
    pub req: Handle,
    pub pattern: Pattern,
}

/// The body of a message that arrived before its receive.
#[derive(Debug)]
pub enum UnexpectedBody {
    /// Eager data; `data.len()` bytes of the message are here so far.
    Eager { data: Vec<u8> },
    /// A rendezvous offer: the data is still at the sender.
    Rts { cookie: u64, addr: u64 },
}

/// A message that arrived with no matching receive posted.
#[derive(Debug)]
pub struct Unexpected {
    pub context: u32,
    pub source: u32,
    pub tag: i32,
    /// Whole message length.
    pub len: usize,
    /// Sender request to acknowledge when matched (synchronous mode).
    pub sync_cookie: Option<u64>,
    /// The cookie the message came with, which names it in a [`PacketKind::CancelSend`].
    ///
    /// [`PacketKind::CancelSend`]: crate::fabric::PacketKind::CancelSend
    pub message: u64,
    pub body: UnexpectedBody,
}

impl Unexpected {
    /// Whether all of the message's data is here (always false for a rendezvous offer).
    pub fn is_complete(&self) -> bool {
        matches!(&self.body, UnexpectedBody::Eager { data } if data.len() == self.len)
    }
}

/// Posted and unexpected queues.
///
/// Unexpected messages live in a slab addressed by generation-checked ids (no hashing on
/// the arrival path), and their data vectors are recycled, so a steady stream of messages
/// that arrive before their receives does not allocate.
#[derive(Default)]
pub struct Matcher {
    posted: VecDeque<Posted>,
    slots: Vec<UnexpectedSlot>,
    free: Vec<u32>,
    /// Ids of the unexpected messages not yet claimed, oldest first.
    order: VecDeque<u64>,
    /// Data vectors of received messages, kept for reuse.
    spare: Vec<Vec<u8>>,
}

#[derive(Default)]
struct UnexpectedSlot {
    gen: u32,
    msg: Option<Unexpected>,
}

/// Spare data vectors kept at most, and the largest kept (bigger ones are freed).
const SPARE_MAX: usize = 128;
const SPARE_LARGEST: usize = 256 << 10;

impl Matcher {
    fn slot(&self, id: u64) -> Option<&Unexpected> {
        let s = self.slots.get(id as u32 as usize)?;
        (s.gen == (id >> 32) as u32)
            .then_some(s.msg.as_ref())
            .flatten()
    }

    /// A data vector with room for `len` bytes, recycled when one is spare.
    pub fn data_buffer(&mut self, len: usize) -> Vec<u8> {
        match self.spare.pop() {
            Some(mut v) => {
                v.clear();
                v.reserve(len);
                v
            }
            None => Vec::with_capacity(len),
        }
    }

    /// Returns a data vector for reuse.
    pub fn recycle(&mut self, v: Vec<u8>) {
        if self.spare.len() < SPARE_MAX && v.capacity() <= SPARE_LARGEST {
            self.spare.push(v);
        }
    }

    /// Takes the first posted receive matching an arriving message if `accept` takes it
    /// (`|_| true` takes any); otherwise leaves it posted and takes nothing, since a later one
    /// must not overtake it.
    #[inline]
    pub fn take_posted(
        &mut self,
        context: u32,
        source: u32,
        tag: i32,
        accept: impl FnOnce(Handle) -> bool,
    ) -> Option<Handle> {
        let i = self
            .posted
            .iter()
            .position(|p| p.pattern.matches(context, source, tag))?;
        if !accept(self.posted[i].req) {
            return None;
        }
        self.posted.remove(i).map(|p| p.req)
    }

    /// Appends a receive to the posted queue.
    pub fn post(&mut self, req: Handle, pattern: Pattern) {
        self.posted.push_back(Posted { req, pattern });
    }

    /// Removes a posted receive (cancel). Returns whether it was still posted.
    pub fn unpost(&mut self, req: Handle) -> bool {
        match self.posted.iter().position(|p| p.req == req) {
            Some(i) => {
                self.posted.remove(i);
                true
            }
            None => false,
        }
    }

    /// Stores an unexpected message; returns its id.
    pub fn add_unexpected(&mut self, msg: Unexpected) -> u64 {
        let idx = match self.free.pop() {
            Some(i) => i,
            None => {
                self.slots.push(UnexpectedSlot { gen: 1, msg: None });
                (self.slots.len() - 1) as u32
            }
        };
        let slot = &mut self.slots[idx as usize];
        debug_assert!(slot.msg.is_none(), "free list names an occupied slot {idx}");
        slot.msg = Some(msg);
        let id = (u64::from(slot.gen) << 32) | u64::from(idx);
        self.order.push_back(id);
        id
    }

    /// The oldest unclaimed unexpected message matching `pattern`, without taking it.
    pub fn peek_unexpected(&self, pattern: &Pattern) -> Option<(u64, &Unexpected)> {
        self.order.iter().find_map(|&id| {
            let m = self.slot(id).expect("listed message is stored");
            pattern
                .matches(m.context, m.source, m.tag)
                .then_some((id, m))
        })
    }

    /// Claims the oldest matching unexpected message: it no longer matches other receives,
    /// but stays stored (it may still be receiving fragments) until [`Matcher::remove`].
    pub fn claim_unexpected(&mut self, pattern: &Pattern) -> Option<u64> {
        let i = self.order.iter().position(|&id| {
            let m = self.slot(id).expect("listed message is stored");
            pattern.matches(m.context, m.source, m.tag)
        })?;
        self.order.remove(i)
    }

    /// The stored message `id`.
    pub fn get_mut(&mut self, id: u64) -> Option<&mut Unexpected> {
        let s = self.slots.get_mut(id as u32 as usize)?;
        if s.gen != (id >> 32) as u32 {
            return None;
        }
        s.msg.as_mut()
    }

    /// Drops the stored message `id` (after it was claimed).
    pub fn remove(&mut self, id: u64) -> Option<Unexpected> {
        debug_assert!(
            !self.order.contains(&id),
            "removing unexpected message {id} before claiming it"
        );
        let idx = id as u32;
        let s = self.slots.get_mut(idx as usize)?;
        if s.gen != (id >> 32) as u32 {
            return None;
        }
        let msg = s.msg.take()?;
        s.gen = s.gen.wrapping_add(1).max(1);
        self.free.push(idx);
        Some(msg)
    }

    /// Removes the unclaimed message from `source` with cookie `message` if all of it is
    /// here (or it is a rendezvous offer): a cancelled send. Returns it.
    pub fn cancel_unexpected(&mut self, source: u32, message: u64) -> Option<Unexpected> {
        let i = self.order.iter().position(|&id| {
            let m = self.slot(id).expect("listed message is stored");
            m.source == source
                && m.message == message
                && (m.is_complete() || matches!(m.body, UnexpectedBody::Rts { .. }))
        })?;
        let id = self.order.remove(i).expect("found above");
        self.remove(id)
    }

    /// Whether nothing is posted.
    pub fn posted_is_empty(&self) -> bool {
        self.posted.is_empty()
    }

    /// Number of unclaimed unexpected messages.
    pub fn unexpected_len(&self) -> usize {
        self.order.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(context: u32, source: u32, tag: i32) -> Unexpected {
        Unexpected {
            context,
            source,
            tag,
            len: 0,
            sync_cookie: None,
            message: 0,
            body: UnexpectedBody::Eager { data: vec![] },
        }
    }

    fn pat(context: u32, source: Option<u32>, tag: Option<i32>) -> Pattern {
        Pattern {
            context,
            source,
            tag,
        }
    }

    #[test]
    fn wildcards_and_context_separate() {
        let p = pat(4, None, None);
        assert!(p.matches(4, 9, 123));
        assert!(!p.matches(6, 9, 123));
        assert!(pat(4, Some(1), None).matches(4, 1, 7));
        assert!(!pat(4, Some(1), None).matches(4, 2, 7));
        assert!(!pat(4, Some(1), Some(3)).matches(4, 1, 7));
    }

    #[test]
    fn unexpected_matches_oldest_first() {
        let mut m = Matcher::default();
        let a = m.add_unexpected(msg(0, 1, 5));
        let b = m.add_unexpected(msg(0, 2, 5));
        let c = m.add_unexpected(msg(0, 1, 6));
        assert_eq!(m.claim_unexpected(&pat(0, Some(1), None)), Some(a));
        assert_eq!(m.claim_unexpected(&pat(0, None, Some(5))), Some(b));
        assert_eq!(m.claim_unexpected(&pat(0, None, Some(5))), None);
        assert_eq!(m.peek_unexpected(&pat(0, None, None)).map(|x| x.0), Some(c));
        assert_eq!(m.unexpected_len(), 1);
        m.remove(a).unwrap();
    }
}
