//! Matching: the posted-receive queue and the unexpected-message queue, with MPI's rules.
//!
//! A receive names (context, source or any, tag or any). Messages from one source on one
//! context match receives in the order they were sent (non-overtaking): arrivals are matched
//! against posted receives in posting order, new receives against unexpected messages in
//! arrival order.

use super::request::Handle;
use std::collections::{HashMap, VecDeque};

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
            && self.source.map_or(true, |s| s == source)
            && self.tag.map_or(true, |t| t == tag)
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
    pub body: UnexpectedBody,
}

impl Unexpected {
    /// Whether all of the message's data is here (always false for a rendezvous offer).
    pub fn is_complete(&self) -> bool {
        matches!(&self.body, UnexpectedBody::Eager { data } if data.len() == self.len)
    }
}

/// Posted and unexpected queues.
#[derive(Default)]
pub struct Matcher {
    posted: VecDeque<Posted>,
    /// Unexpected messages by id; `order` lists the ones not yet claimed, oldest first.
    unexpected: HashMap<u64, Unexpected>,
    order: VecDeque<u64>,
    next_id: u64,
}

impl Matcher {
    /// Takes the first posted receive matching an arriving message.
    #[inline]
    pub fn take_posted(&mut self, context: u32, source: u32, tag: i32) -> Option<Handle> {
        let i = self
            .posted
            .iter()
            .position(|p| p.pattern.matches(context, source, tag))?;
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
        let id = self.next_id;
        self.next_id += 1;
        self.unexpected.insert(id, msg);
        self.order.push_back(id);
        id
    }

    /// The oldest unclaimed unexpected message matching `pattern`, without taking it.
    pub fn peek_unexpected(&self, pattern: &Pattern) -> Option<(u64, &Unexpected)> {
        self.order.iter().find_map(|id| {
            let m = &self.unexpected[id];
            pattern
                .matches(m.context, m.source, m.tag)
                .then_some((*id, m))
        })
    }

    /// Claims the oldest matching unexpected message: it no longer matches other receives,
    /// but stays stored (it may still be receiving fragments) until [`Matcher::remove`].
    pub fn claim_unexpected(&mut self, pattern: &Pattern) -> Option<u64> {
        let i = self.order.iter().position(|id| {
            let m = &self.unexpected[id];
            pattern.matches(m.context, m.source, m.tag)
        })?;
        self.order.remove(i)
    }

    /// The stored message `id`.
    pub fn get_mut(&mut self, id: u64) -> Option<&mut Unexpected> {
        self.unexpected.get_mut(&id)
    }

    /// Drops the stored message `id` (after it was claimed).
    pub fn remove(&mut self, id: u64) -> Option<Unexpected> {
        debug_assert!(
            !self.order.contains(&id),
            "removing unexpected message {id} before claiming it"
        );
        self.unexpected.remove(&id)
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
