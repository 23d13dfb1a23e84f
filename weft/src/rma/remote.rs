//! The remote path (issue 12, items 7 and 8): operations on a target that the origin does
//! not reach directly go as internal active messages to the window's handler at the target,
//! which does them on its own memory with the same code the direct path uses (so the
//! elements' atomicity is the same whichever way an origin came). On one node the path is
//! forced by `WEFT_RMA_MESSAGES=1`, which is how it is tested without several hosts.
//!
//! Each window registers a handler (numbered by its context pair, which every member shares)
//! when it is made, and removes it when it is freed. An operation is one message per span of
//! the target's layout, its argument saying what to do ([`Arg`]); the payload is the origin's
//! data in parts of whole elements, and the answers carry what a get or a fetch returns.
//!
//! The origin keeps what it started in its operation table (`table`): the lock goes lazily
//! with an epoch's first operation (in the same message when that is one message: `Bracketed`),
//! puts and accumulates that fetch nothing return once started, waited for by the epoch's end,
//! and the latest small one of a lock epoch stays unsent until the window sends anything else,
//! so that the unlock goes with it (004's single-operation optimization and piggybacked done
//! flag: lock, put, unlock is one message). The target does what one origin sends in order,
//! and holds (copied) what follows a lock request it cannot grant yet, until it grants it.

use super::lock::LockKind;
use super::table::{self, before, ByRank, InFlight, Lock, Unsent, BRACKET, COPIED};
use super::access::{check_one_element, length_mismatch, CombineFn, Combiner, Located, Reach, Spans};
use super::window::{Flavor, WindowData};
use crate::coll::op::{self, Basic, Elements, SysOp};
use crate::engine::buffer::{RawBuf, RawBufMut};
use crate::engine::core::active::{AmHandler, AmPart, Answer, ReplyTo};
use crate::engine::request::Handle;
use crate::engine::Engine;
use crate::error::{Error, ErrorClass, Result};
use crate::fabric::Fabric;
use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::atomic::Ordering::Release;

/// What one message asks of the target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Put = 1,
    /// The payload is the length (8 bytes), the answer the bytes.
    Get = 2,
    Accumulate = 3,
    /// An accumulate answered with the elements' values before.
    GetAccumulate = 4,
    /// The payload is compare then swap (one element each), the answer the value before.
    CompareAndSwap = 5,
    /// An accumulate whose elements straddle the target layout's blocks (a pair type with a
    /// gap): one part, the spans first (a count, then offset and length each, 8 bytes apiece),
    /// then the data; done under the element locks of every span at once.
    AccumulateSpans = 6,
    /// The same, answered with the elements' values before.
    GetAccumulateSpans = 7,
    /// The target's lock word, for the origin (the offset is the kind: 0 shared, 1
    /// exclusive), answered when granted; what the origin sends after it waits until then.
    Lock = 8,
    /// The release of a lock the origin took (the offset is its kind).
    Unlock = 9,
    /// `MPI_Win_post` to this member as an origin: one more post in its entry.
    Post = 10,
    /// `MPI_Win_complete` to this member as a target: one more completion in its entry.
    Complete = 11,
    /// A put to several small spans in one message: their list (as `AccumulateSpans`), then
    /// the data.
    PutSpans = 12,
    /// A get of several small spans in one message: their list; the answer their bytes.
    GetSpans = 13,
    /// Another message (one part) with its epoch's lock request before it, its release after
    /// it, or both: the payload is that message's argument, a word of [`Bracket`] flags, then
    /// its payload; the answer is its answer.
    Bracketed = 14,
}

/// What brackets a `Bracketed` message: the lock taken before it (bits 0-1) and the lock
/// released after it (bits 2-3), each 0 for none, 1 shared, 2 exclusive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Bracket {
    lock: Option<LockKind>,
    unlock: Option<LockKind>,
}

impl Bracket {
    fn encode(self) -> u64 {
        let code = |k: Option<LockKind>| k.map_or(0, |k| lock_code(k) + 1);
        code(self.lock) | code(self.unlock) << 2
    }

    fn decode(flags: u64) -> Option<Bracket> {
        let kind = |code: u64| match code {
            0 => Some(None),
            c => lock_kind(c - 1).ok().map(Some),
        };
        (flags >> 4 == 0).then_some(())?;
        Some(Bracket { lock: kind(flags & 3)?, unlock: kind(flags >> 2 & 3)? })
    }
}

/// Which count of its entry a member reached by messages moves for another's epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Count {
    /// A post (by a target, to this origin).
    Post,
    /// A completion (by an origin, to this target).
    Completion,
}

/// A message's argument: what to do, on which elements, where. Bits 0-3 the kind, 4-7 the
/// operation, 8-11 the element type (15: a foreign combiner), 12-15 a pair's index type + 1
/// (0: not a pair; the foreign combiner's code), 16-63 the offset in the target's part (a
/// dynamic window's: the address).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Arg {
    kind: Kind,
    op: SysOp,
    elements: Option<Elements>,
    /// A [`foreign`](super::foreign) combiner's code (`elements` is then `None`).
    foreign: Option<u8>,
    offset: u64,
}

/// The element type field's value naming a foreign combiner.
const FOREIGN: u64 = 15;

/// Offsets (and addresses) a message can name: 48 bits, all of a 64-bit Linux process's
/// user space.
const OFFSET_LIMIT: u64 = 1 << 48;

impl Arg {
    fn encode(self) -> u64 {
        let (value, index) = match (self.elements, self.foreign) {
            (None, Some(code)) => (FOREIGN, u64::from(code)),
            (None, None) => (0, 0),
            (Some(Elements::Basic(b)), _) => (b as u64, 0),
            (Some(Elements::Pair(v, i)), _) => (v as u64, i as u64 + 1),
        };
        debug_assert!(self.offset < OFFSET_LIMIT);
        self.kind as u64 | (self.op as u64) << 4 | value << 8 | index << 12 | self.offset << 16
    }

    fn decode(arg: u64) -> Option<Arg> {
        let kind = match arg & 0xf {
            1 => Kind::Put,
            2 => Kind::Get,
            3 => Kind::Accumulate,
            4 => Kind::GetAccumulate,
            5 => Kind::CompareAndSwap,
            6 => Kind::AccumulateSpans,
            7 => Kind::GetAccumulateSpans,
            8 => Kind::Lock,
            9 => Kind::Unlock,
            10 => Kind::Post,
            11 => Kind::Complete,
            12 => Kind::PutSpans,
            13 => Kind::GetSpans,
            14 => Kind::Bracketed,
            _ => return None,
        };
        let (value, index) = (arg >> 8 & 0xf, arg >> 12 & 0xf);
        let (elements, foreign) = match (kind, value, index) {
            (
                Kind::Put
                | Kind::Get
                | Kind::Lock
                | Kind::Unlock
                | Kind::Post
                | Kind::Complete
                | Kind::PutSpans
                | Kind::GetSpans
                | Kind::Bracketed,
                ..,
            ) => (None, None),
            (_, FOREIGN, 0) => return None,
            (_, FOREIGN, code) => (None, Some(code as u8)),
            (_, v, 0) => (Some(Elements::Basic(Basic::from_index(v as u8)?)), None),
            (_, v, i) => (Some(Elements::Pair(Basic::from_index(v as u8)?, Basic::from_index(i as u8 - 1)?)), None),
        };
        Some(Arg {
            kind,
            op: SysOp::from_index((arg >> 4 & 0xf) as u8)?,
            elements,
            foreign,
            offset: arg >> 16,
        })
    }
}

impl Arg {
    /// The same, of another kind.
    fn with(self, kind: Kind) -> Arg {
        Arg { kind, ..self }
    }
}

/// Blocks of a target layout this small (each, at most) go several to a message: one message
/// each would cost a message per element of a strided type (MPICH's `transpose1`: a million).
const BATCHED: usize = 1024;

/// Whether the spans of `at` go several to a message.
fn batched(at: &Located) -> bool {
    let spans = at.spans();
    spans.len() > 1 && spans.iter().all(|s| s.1 <= BATCHED)
}

/// Cuts `spans` into runs of one message each: the spans, and the offset and length of their
/// data. A message (a count, 16 bytes a span, and with `data` their bytes) takes at most
/// `most` bytes, unless one element's spans alone take more; runs end only where the data so
/// far is whole `unit`s.
fn batches(spans: &[(u64, usize)], unit: usize, most: usize, data: bool) -> Vec<(std::ops::Range<usize>, usize, usize)> {
    let mut runs = Vec::new();
    let (mut start, mut from, mut len, mut size) = (0, 0, 0, 8);
    for (i, &(_, n)) in spans.iter().enumerate() {
        let cost = 16 + if data { n } else { 0 };
        if i > start && size + cost > most && (from + len) % unit == 0 {
            runs.push((start..i, from, len));
            (start, from, len, size) = (i, from + len, 0, 8);
        }
        size += cost;
        len += n;
    }
    if start < spans.len() {
        runs.push((start..spans.len(), from, len));
    }
    runs
}

fn unit_of(e: Elements) -> usize {
    match e {
        Elements::Basic(b) => b.size(),
        Elements::Pair(v, i) => v.size() + i.size(),
    }
}

/// The window's handler at its target: the window, the lock requests waiting for this
/// member's lock word, first come first granted (004: the target queues lock requests and
/// grants them as the lock frees; here at every progress, since origins on this node release
/// the word without telling anyone), and what each origin with a request waiting sent since.
struct Served {
    data: Rc<WindowData>,
    /// By origin (world rank), the lock requests waiting, and where to answer each (none for
    /// a `Bracketed` message's: the message it brackets answers).
    locks: VecDeque<(u32, Option<ReplyTo>, LockKind)>,
    /// By origin (world rank): the parts that came after its waiting lock request, in order.
    held: ByRank<VecDeque<Held>>,
}

/// A part held until its origin's lock is granted (its payload copied).
struct Held {
    arg: u64,
    offset: u64,
    payload: Vec<u8>,
    reply: ReplyTo,
}

/// Installs `data`'s handler in `eng`, so origins reach this member's part by messages.
pub fn serve<F: Fabric>(eng: &mut Engine<F>, data: &Rc<WindowData>) {
    let served = Served {
        data: data.clone(),
        locks: VecDeque::new(),
        held: ByRank::default(),
    };
    eng.am_register(data.comm_pair(), Box::new(served));
}

/// Removes it (a window dropped without `free`).
pub fn unserve<F: Fabric>(eng: &mut Engine<F>, data: &WindowData) {
    eng.am_unregister(data.comm_pair());
}

const SERVE: &str = "a window's target";

impl Served {
    /// Acts on one part of `src`'s that nothing holds: a lock request is granted, or waits
    /// (and holds what `src` sends next); the rest is done now.
    fn take(&mut self, part: &AmPart<'_>, reply: ReplyTo) -> Answer {
        match Arg::decode(part.arg).map(|a| (a.kind, a.offset)) {
            Some((Kind::Lock, code)) => match lock_kind(code) {
                Ok(kind) if self.granted(part.src, Some(reply), kind) => Answer::ack(),
                Ok(_) => Answer::Polled,
                Err(e) => Answer::Failed(e),
            },
            Some((Kind::Bracketed, _)) => self.bracketed(part, reply),
            _ => self.data.serve(part).unwrap_or_else(Answer::Failed),
        }
    }

    /// Takes the lock word for `src` now, or queues its request (answered at `reply`, if
    /// any, when granted) and holds what `src` sends next: whether it was granted.
    fn granted(&mut self, src: u32, reply: Option<ReplyTo>, kind: LockKind) -> bool {
        // Acquire (in the word): partner of the last holder's Release; the origin's
        // operations, done here after this, come after the previous holders'. Behind earlier
        // requests, or while the word is taken, it is granted when it frees (`poll`).
        if self.locks.is_empty() && self.data.entry(self.data.rank()).lock.attempt(kind) {
            return true;
        }
        self.locks.push_back((src, reply, kind));
        self.held.insert(src as usize, VecDeque::new());
        false
    }

    /// A `Bracketed` message: takes the lock it asks for (or holds the rest until granted),
    /// does the message it carries, then releases the lock it says (even if that failed: the
    /// origin's epoch is over).
    fn bracketed(&mut self, part: &AmPart<'_>, reply: ReplyTo) -> Answer {
        let word = |b: &[u8]| u64::from_ne_bytes(b.try_into().expect("8 bytes"));
        let (Some(head), Some(payload)) = (part.payload.get(..BRACKET), part.payload.get(BRACKET..)) else {
            return Answer::Failed(bad_payload(part.payload.len()));
        };
        let Some(bracket) = Bracket::decode(word(&head[8..])) else {
            return Answer::Failed(bad_payload(part.payload.len()));
        };
        if let Some(kind) = bracket.lock {
            if !self.granted(part.src, None, kind) {
                // The rest waits for the grant: the message and its release.
                let mut rest = part.payload.to_vec();
                rest[8..BRACKET].copy_from_slice(&Bracket { lock: None, ..bracket }.encode().to_ne_bytes());
                let held = Held { arg: part.arg, offset: 0, payload: rest, reply };
                self.held.get_mut(&(part.src as usize)).expect("held by `granted`").push_back(held);
                return Answer::Polled;
            }
        }
        let inner = AmPart { src: part.src, arg: word(&head[..8]), offset: 0, payload, placed: 0 };
        let answer = self.data.serve(&inner).unwrap_or_else(Answer::Failed);
        if let Some(kind) = bracket.unlock {
            // Release (in the word): partner of the next holder's Acquire, after the
            // message's operation.
            self.data.entry(self.data.rank()).lock.unlock(kind);
        }
        answer
    }

    /// Does what `src` sent after its lock request, now granted, in order (until another lock
    /// request of its own must wait: the rest stays held behind that).
    fn release_held(&mut self, src: u32, answers: &mut Vec<(ReplyTo, Answer)>) {
        let Some(parts) = self.held.remove(&(src as usize)) else {
            return;
        };
        for h in parts {
            if let Some(again) = self.held.get_mut(&(src as usize)) {
                again.push_back(h);
                continue;
            }
            let part = AmPart { src, arg: h.arg, offset: h.offset, payload: &h.payload, placed: 0 };
            match self.take(&part, h.reply) {
                Answer::Polled => {}
                answer => answers.push((h.reply, answer)),
            }
        }
    }
}

impl AmHandler for Served {
    fn place(&mut self, src: u32, arg: u64, offset: u64, len: usize) -> Option<RawBufMut> {
        if !self.held.is_empty() && self.held.contains_key(&(src as usize)) {
            return None; // held, so copied
        }
        let a = Arg::decode(arg).filter(|a| a.kind == Kind::Put)?;
        let at = self.data.own_span(SERVE, a.offset.checked_add(offset)?, len).ok()?;
        let &[(addr, n)] = at.spans() else {
            return None;
        };
        // SAFETY: `n` bytes of this member's part, mapped here (checked by `own_span`); MPI
        // forbids any other access to them that conflicts with the put during its epoch.
        Some(unsafe { RawBufMut::new(std::slice::from_raw_parts_mut(addr as *mut u8, n)) })
    }

    fn handle(&mut self, part: &AmPart<'_>, reply: ReplyTo) -> Answer {
        // Nothing held (the usual case): no lookup.
        if let Some(parts) = (!self.held.is_empty()).then(|| self.held.get_mut(&(part.src as usize))).flatten() {
            let (arg, offset, payload) = (part.arg, part.offset, part.payload.to_vec());
            parts.push_back(Held { arg, offset, payload, reply });
            return Answer::Polled;
        }
        self.take(part, reply)
    }

    fn poll(&mut self, answers: &mut Vec<(ReplyTo, Answer)>) -> bool {
        while let Some(&(src, to, kind)) = self.locks.front() {
            // Acquire (in the word): as in `granted`.
            if !self.data.entry(self.data.rank()).lock.attempt(kind) {
                break;
            }
            self.locks.pop_front();
            if let Some(to) = to {
                answers.push((to, Answer::ack()));
            }
            self.release_held(src, answers);
        }
        !self.locks.is_empty()
    }
}

impl WindowData {
    /// This member's part's `len` bytes at `offset` (a dynamic window's: at that address),
    /// checked, as a direct span.
    fn own_span(&self, call: &'static str, offset: u64, len: usize) -> Result<Located> {
        let me = self.rank() as i32;
        let part = self.part(call, me)?;
        let (ok, base) = match self.flavor() {
            Flavor::Dynamic => (self.attached(self.rank(), offset, len), 0),
            _ => (
                offset.checked_add(len as u64).is_some_and(|end| end <= part.size as u64),
                part.base as u64,
            ),
        };
        if !ok {
            return Err(Error::new(
                ErrorClass::Disp,
                call,
                format!(
                    "{len} bytes at offset {offset} fall outside rank {me}'s part of the window"
                ),
            ));
        }
        Ok(Located {
            reach: Reach::Direct,
            target: self.rank(),
            base,
            direct_atomics: self.atomics_direct(self.rank()),
            spans: Spans::One([(base + offset, len)]),
        })
    }

    /// The spans a message lists (a count, then offset and length each, 8 bytes apiece),
    /// checked against this member's part, and the bytes after the list.
    fn spans_of<'d>(&self, data: &'d [u8]) -> Result<(Located, &'d [u8])> {
        let word = |b: &[u8]| u64::from_ne_bytes(b.try_into().expect("8 bytes"));
        let n = data.get(..8).map(|b| word(b) as usize).ok_or_else(|| bad_payload(data.len()))?;
        let head = n.checked_mul(16).and_then(|h| h.checked_add(8)).filter(|&h| h <= data.len());
        let head = head.ok_or_else(|| bad_payload(data.len()))?;
        let mut spans = Vec::with_capacity(n);
        let mut first = None;
        for pair in data[8..head].chunks_exact(16) {
            let one = self.own_span(SERVE, word(&pair[..8]), word(&pair[8..]) as usize)?;
            spans.extend_from_slice(one.spans());
            first.get_or_insert(one);
        }
        let first = first.ok_or_else(|| bad_payload(data.len()))?;
        Ok((Located { spans: Spans::Many(spans), ..first }, &data[head..]))
    }

    /// Does what one part asks, on this member's memory.
    fn serve(&self, part: &AmPart<'_>) -> Result<Answer> {
        let a = Arg::decode(part.arg).ok_or_else(|| {
            Error::new(ErrorClass::Internal, SERVE, format!("a message no window sends ({:#x})", part.arg))
        })?;
        let data = part.payload;
        let offset = a.offset + part.offset;
        match a.kind {
            Kind::Put => {
                if part.placed == 0 {
                    self.put_here(SERVE, &self.own_span(SERVE, offset, data.len())?, data)?;
                }
                Ok(Answer::ack())
            }
            Kind::Get => {
                let len = u64::from_ne_bytes(data.try_into().map_err(|_| bad_payload(data.len()))?);
                let at = self.own_span(SERVE, a.offset, len as usize)?;
                let mut out = vec![0u8; len as usize];
                self.get_here(SERVE, &at, &mut out)?;
                Ok(Answer::Done { data: out, at: 0 })
            }
            Kind::Accumulate | Kind::GetAccumulate => {
                let (f, unit) = combine_function(&a)?;
                let how = combiner(&a, unit, &*f);
                let at = self.own_span(SERVE, offset, data.len())?;
                let mut old = (a.kind == Kind::GetAccumulate).then(|| vec![0u8; data.len()]);
                self.accumulate_here(SERVE, &at, &how, data, old.as_deref_mut())?;
                Ok(Answer::Done {
                    data: old.unwrap_or_default(),
                    at: part.offset,
                })
            }
            Kind::AccumulateSpans | Kind::GetAccumulateSpans => {
                let (at, data) = self.spans_of(data)?;
                let (f, unit) = combine_function(&a)?;
                let how = combiner(&a, unit, &*f);
                let mut old = (a.kind == Kind::GetAccumulateSpans).then(|| vec![0u8; data.len()]);
                self.accumulate_here(SERVE, &at, &how, data, old.as_deref_mut())?;
                Ok(Answer::Done { data: old.unwrap_or_default(), at: 0 })
            }
            Kind::PutSpans => {
                let (at, data) = self.spans_of(data)?;
                self.put_here(SERVE, &at, data)?;
                Ok(Answer::ack())
            }
            Kind::GetSpans => {
                let (at, _) = self.spans_of(data)?;
                let mut out = vec![0u8; at.len()];
                self.get_here(SERVE, &at, &mut out)?;
                Ok(Answer::Done { data: out, at: 0 })
            }
            // Lock requests are the handler's (they may wait), and so are brackets.
            Kind::Lock | Kind::Bracketed => Err(bad_payload(data.len())),
            Kind::Unlock => {
                // Release (in the word): partner of the next holder's Acquire; every operation
                // of the origin's epoch was done here before this message. Requests waiting
                // for the word are granted at the next progress.
                self.entry(self.rank()).lock.unlock(lock_kind(a.offset)?);
                Ok(Answer::ack())
            }
            Kind::Post | Kind::Complete => {
                let me = self.entry(self.rank());
                let count = if a.kind == Kind::Post { &me.posts } else { &me.completions };
                // Release: pairs with `start`'s, `wait`'s and `test`'s Acquire loads here.
                count.fetch_add(1, Release);
                Ok(Answer::ack())
            }
            Kind::CompareAndSwap => {
                let n = data.len() / 2;
                let basic = match a.elements {
                    Some(Elements::Basic(b)) => Some(b),
                    _ => None,
                };
                let at = self.own_span(SERVE, a.offset, n)?;
                let mut old = vec![0u8; n];
                self.compare_and_swap_here(SERVE, &at, basic, &data[..n], &data[n..], &mut old)?;
                Ok(Answer::Done { data: old, at: 0 })
            }
        }
    }

    /// An operation done here on a window others reach by messages: progress too, so that a
    /// member busy on its own part (spinning on a compare-and-swap) serves the others (MPI's
    /// progress rule: every call progresses).
    #[inline]
    fn progress_if_served<F: Fabric>(&self, eng: &mut Engine<F>) {
        if self.by_messages() {
            eng.progress();
        }
    }

    /// Starts a message of `kind` with no payload (`offset` its argument) to member `t`,
    /// answered with an acknowledgement.
    fn start_plain<F: Fabric>(&self, eng: &mut Engine<F>, call: &'static str, t: usize, kind: Kind, offset: u64) -> Result<Handle> {
        let peer = self.comm().group.members()[t];
        let arg = Arg { kind, op: SysOp::NoOp, elements: None, foreign: None, offset }.encode();
        // SAFETY: the empty payload is static; no reply buffer.
        let h = unsafe { eng.am_start((peer, self.comm_pair()), arg, RawBuf::new(&[]), 1, None) };
        h.map_err(|e| Error::new(e.class, call, e.detail))
    }

    /// `MPI_Win_lock` on member `t` reached by messages: nothing is sent until the epoch's
    /// first operation ([`WindowData::contact`]); its handler then takes its lock word for
    /// this origin, or queues the request (an exclusive one marks the word waiting, so shared
    /// lockers on the node stay out meanwhile) and holds what follows it.
    /// With `nocheck` (`MPI_MODE_NOCHECK`: no other process locks it meanwhile) nothing is
    /// sent for the lock at all.
    pub(super) fn lock_by_message(&self, t: usize, kind: LockKind, nocheck: bool) -> Result<()> {
        self.table.lock(t, kind, nocheck);
        if !nocheck && !self.loads_and_stores() {
            // The program's next lock call settles it first (`lazy`: locks in the order asked).
            super::lazy::defer(self, t as i32, kind);
        }
        Ok(())
    }

    /// A lock on member `t` reached by messages that the table defers is settled: requested
    /// now if nothing went yet, and its grant waited for (with everything in flight to `t`),
    /// so that the program's next lock is taken after it (`lazy`'s order). Nothing is sent for
    /// a lock already released, or taken with `MPI_MODE_NOCHECK`.
    pub(super) fn settle_lock_by_message<F: Fabric>(&self, eng: &mut Engine<F>, call: &'static str, t: usize) -> Result<()> {
        // As an operation's first contact would: the lock request goes if it has not.
        self.contact(eng, call, t, false)?;
        self.table.complete_only(eng, call, Some(t))
    }

    /// `MPI_Win_unlock` of member `t` reached by messages: its handler releases the word after
    /// the epoch's operations (nothing is sent if the epoch had none); waits for every answer.
    pub(super) fn unlock_by_message<F: Fabric>(&self, eng: &mut Engine<F>, call: &'static str, t: usize, kind: LockKind) -> Result<()> {
        // Released: no later lock call settles it.
        super::lazy::cancel_if(self, t as i32);
        let unsent = self.table.take_unsent();
        let lock = self.table.unlock(t);
        let mut first = None;
        if let Lock::Sent(sent) = lock {
            debug_assert_eq!(sent, kind);
        }
        // The release goes with the message kept unsent when that is t's.
        let mut release = match lock {
            Lock::Sent(sent) => Some(sent),
            _ => None,
        };
        if let Some(u) = unsent {
            let with = release.filter(|_| u.t == t);
            release = release.filter(|_| u.t != t);
            if let Err(e) = self.send_unsent(eng, u, with) {
                first = Some(e);
            }
        }
        if let Some(kind) = release {
            match self.start_plain(eng, call, t, Kind::Unlock, lock_code(kind)) {
                Ok(handle) => self.table.keep(t, InFlight { handle, call, data: None }),
                Err(e) => {
                    first.get_or_insert(e);
                }
            }
        }
        // t's requests alone: t does what this origin sends in order, the release last.
        let done = self.table.complete_only(eng, call, Some(t));
        first.map_or(done, Err)
    }

    /// Sends the message kept unsent (if any), with the release of `unlock` after it.
    fn send_unsent<F: Fabric>(&self, eng: &mut Engine<F>, u: Unsent, unlock: Option<LockKind>) -> Result<()> {
        let t = u.t;
        let flight = self.start_unsent(eng, u, unlock, None)?;
        self.table.keep(t, flight);
        Ok(())
    }

    /// Starts `u` (one part), bracketed by its lock request and the release of `unlock` when
    /// either is some; the answer's bytes into `reply`. Its request, keeping its data.
    fn start_unsent<F: Fabric>(&self, eng: &mut Engine<F>, mut u: Unsent, unlock: Option<LockKind>, reply: Option<RawBufMut>) -> Result<InFlight> {
        let bracket = Bracket { lock: u.lock, unlock };
        let (arg, from, unit) = if bracket.lock.is_some() || bracket.unlock.is_some() {
            u.data[..8].copy_from_slice(&u.arg.to_ne_bytes());
            u.data[8..BRACKET].copy_from_slice(&bracket.encode().to_ne_bytes());
            let what = Arg { kind: Kind::Bracketed, op: SysOp::NoOp, elements: None, foreign: None, offset: 0 };
            (what.encode(), 0, u.data.len())
        } else {
            (u.arg, BRACKET, u.unit)
        };
        // SAFETY: the box's heap bytes stay where they are when it moves into the returned
        // request, which keeps them until it is answered (or leaks them: `OpTable`'s drop);
        // `reply` is the caller's, under the same contract.
        let h = unsafe { eng.am_start(u.to, arg, RawBuf::new(&u.data[from..]), unit, reply) };
        let handle = h.map_err(|e| Error::new(e.class, u.call, e.detail))?;
        Ok(InFlight { handle, call: u.call, data: Some(u.data) })
    }

    /// Sends the message kept unsent, if any: before anything else this window sends.
    fn send_any_unsent<F: Fabric>(&self, eng: &mut Engine<F>, call: &'static str) -> Result<()> {
        match self.table.take_unsent() {
            Some(u) => self.send_unsent(eng, u, None).map_err(|e| before(call, e)),
            None => Ok(()),
        }
    }

    /// Waits for everything this window started by messages (the message kept unsent sent
    /// first): a flush, fence, complete or free. The first error, as `call`'s.
    pub(super) fn complete_by_message<F: Fabric>(&self, eng: &mut Engine<F>, call: &'static str) -> Result<()> {
        self.complete_by_message_only(eng, call, None)
    }

    /// [`WindowData::complete_by_message`], of what went to member `t` alone when it is some
    /// (the message kept unsent goes first, whichever its target): `MPI_Win_flush(t)`.
    pub(super) fn complete_by_message_only<F: Fabric>(&self, eng: &mut Engine<F>, call: &'static str, t: Option<usize>) -> Result<()> {
        let sent = self.send_any_unsent(eng, call);
        let done = self.table.complete_only(eng, call, t);
        sent.and(done)
    }

    /// One message of argument `arg` with `payload` (`unit` bytes an element) to member `t`,
    /// after the lock request `lock` if any, not sent yet.
    fn unsent(&self, call: &'static str, t: usize, (arg, unit): (Arg, usize), payload: &[u8], lock: Option<LockKind>) -> Unsent {
        let to = (self.comm().group.members()[t], self.comm_pair());
        Unsent { to, t, arg: arg.encode(), unit, lock, data: with_room(payload), call }
    }

    /// Keeps `data` to send to member `t` as one message of argument `arg` (after the lock
    /// request `lock`, if any) when its epoch allows (then `unsent`), or starts it now.
    fn keep_or_start<F: Fabric>(
        &self,
        eng: &mut Engine<F>,
        call: &'static str,
        t: usize,
        (arg, unit): (Arg, usize),
        data: &[u8],
        lock: Option<LockKind>,
    ) -> Result<()> {
        let u = self.unsent(call, t, (arg, unit), data, lock);
        if self.table.defers(t) {
            self.table.defer(u);
            return Ok(());
        }
        self.send_unsent(eng, u, None)
    }

    /// Starts `payload` to member `t` as one message of argument `arg` bracketed by the lock
    /// request `lock`, with its answer into `reply`, and waits for it.
    fn start_bracketed<F: Fabric>(
        &self,
        eng: &mut Engine<F>,
        call: &'static str,
        t: usize,
        (arg, unit): (Arg, usize),
        payload: &[u8],
        (lock, reply): (LockKind, Option<&mut [u8]>),
    ) -> Result<()> {
        let u = self.unsent(call, t, (arg, unit), payload, Some(lock));
        // SAFETY: the caller's buffer, borrowed for this whole call, which waits for the answer.
        let out = reply.map(|r| unsafe { RawBufMut::new(r) });
        let flight = self.start_unsent(eng, u, None, out)?;
        table::wait(eng, call, flight)
    }

    /// The offset of `at`'s one span when an operation on it with `len` bytes of payload
    /// goes as one message that can be bracketed (`Bracketed`).
    fn one_span<F: Fabric>(&self, eng: &Engine<F>, at: &Located, len: usize) -> Option<u64> {
        let &[(offset, n)] = at.spans() else {
            return None;
        };
        let fits = len + BRACKET <= eng.am_max_part(self.comm().group.members()[at.target]);
        (n > 0 && offset < OFFSET_LIMIT && fits).then_some(offset)
    }

    /// The members this one reaches by messages (window ranks).
    fn remote_members(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.size()).filter(|&t| self.remote(t))
    }

    /// A lock_all epoch that reached as many targets as it keeps state for falls back to
    /// window-wide state: every member reached by messages not sent its shared lock yet is
    /// sent it now (each request taking a slot as an operation's does), and the per-target
    /// state goes.
    fn lock_every_member<F: Fabric>(&self, eng: &mut Engine<F>, call: &'static str) -> Result<()> {
        let sent = self.table.go_wide();
        for t in self.remote_members().filter(|t| !sent.contains(t)) {
            if let (_, Some(oldest)) = self.table.contact(t) {
                table::wait(eng, call, oldest)?;
            }
            let handle = self.start_plain(eng, call, t, Kind::Lock, lock_code(LockKind::Shared))?;
            self.table.keep(t, InFlight { handle, call, data: None });
        }
        Ok(())
    }

    /// `MPI_Win_unlock_all` for the members reached by messages: unlocks those whose shared
    /// lock went with an operation, and waits for everything in flight.
    pub(super) fn unlock_all_by_message<F: Fabric>(&self, eng: &mut Engine<F>, call: &'static str) -> Result<()> {
        let mut first = None;
        let unsent = self.table.take_unsent();
        // Fallen back to window-wide state: every member reached by messages holds its lock.
        let mut locked = self.table.unlock_all().unwrap_or_else(|| self.remote_members().collect());
        if let Some(u) = unsent {
            // Its target's release goes with it.
            let with = locked.iter().position(|&t| t == u.t).map(|i| locked.swap_remove(i));
            if let Err(e) = self.send_unsent(eng, u, with.map(|_| LockKind::Shared)) {
                first = Some(e);
            }
        }
        for t in locked {
            match self.start_plain(eng, call, t, Kind::Unlock, lock_code(LockKind::Shared)) {
                Ok(handle) => self.table.keep(t, InFlight { handle, call, data: None }),
                Err(e) => {
                    first.get_or_insert(e);
                }
            }
        }
        let done = self.table.complete(eng, call);
        first.map_or(done, Err)
    }

    /// An operation on member `t` reached by messages is about to start: sends the message
    /// kept unsent, and the epoch's lock request first if this is its first contact (unless
    /// the operation is `one` message, which then takes it: the lock returned), and waits for
    /// the oldest request in flight if the table is full. The target's world rank.
    fn contact<F: Fabric>(&self, eng: &mut Engine<F>, call: &'static str, t: usize, one: bool) -> Result<(u32, Option<LockKind>)> {
        self.send_any_unsent(eng, call)?;
        if self.table.outgrown(t) {
            self.lock_every_member(eng, call)?;
        }
        let (mut lock, oldest) = self.table.contact(t);
        let waited = oldest.map_or(Ok(()), |oldest| table::wait(eng, call, oldest));
        // The lock counts as sent from here: it goes now unless the operation takes it (which
        // an error in the wait stops).
        if let Some(kind) = lock.filter(|_| !one || waited.is_err()) {
            let handle = self.start_plain(eng, call, t, Kind::Lock, lock_code(kind))?;
            self.table.keep(t, InFlight { handle, call, data: None });
            lock = None;
        }
        waited?;
        Ok((self.comm().group.members()[t], lock))
    }

    /// Moves `count` at each of `members` (reached by messages), waiting for every answer.
    pub(super) fn count_by_message<F: Fabric>(
        &self,
        eng: &mut Engine<F>,
        call: &'static str,
        members: impl Iterator<Item = usize>,
        count: Count,
    ) -> Result<()> {
        self.send_any_unsent(eng, call)?;
        // Empty (every member reached directly): no allocation.
        let started: Vec<Handle> = members.map(|m| self.start_count(eng, call, m, count)).collect::<Result<_>>()?;
        started
            .into_iter()
            .try_for_each(|h| eng.wait(h).map(|_| ()).map_err(|e| Error::new(e.class, call, e.detail)))
    }

    /// Starts moving `count` at member `m` (reached by messages): the request, answered when
    /// it moved.
    pub(super) fn start_count<F: Fabric>(&self, eng: &mut Engine<F>, call: &'static str, m: usize, count: Count) -> Result<Handle> {
        let kind = match count {
            Count::Post => Kind::Post,
            Count::Completion => Kind::Complete,
        };
        self.start_plain(eng, call, m, kind, 0)
    }

    /// Starts one message per span of `at`: `payload(span, its offset in the packed data,
    /// its length)` is the bytes to send (in parts of `unit`), and the answers go into `reply`
    /// at the span's offset. On an error, waits for those started before returning it.
    ///
    /// # Safety
    /// The payloads' views and `reply` stay valid and untouched until every returned request
    /// is answered ([`Engine::am_start`]).
    #[allow(clippy::too_many_arguments)]
    unsafe fn start_spans<F: Fabric>(
        &self,
        eng: &mut Engine<F>,
        call: &'static str,
        at: &Located,
        peer: u32,
        arg: impl Fn(u64) -> Arg,
        payload: impl Fn(usize, usize, usize) -> (RawBuf, usize),
        mut reply: Option<&mut [u8]>,
    ) -> Result<Vec<Handle>> {
        let mut from = 0;
        let mut started = Vec::with_capacity(at.spans().len());
        for (i, &(offset, len)) in at.spans().iter().enumerate() {
            let (data, unit) = payload(i, from, len);
            let out = reply.as_deref_mut().map(|r| {
                let (start, end) = (from.min(r.len()), (from + len).min(r.len()));
                // SAFETY: a view of the caller's result buffer, valid until the requests are
                // answered (this function's contract).
                unsafe { RawBufMut::new(&mut r[start..end]) }
            });
            let h = match offset < OFFSET_LIMIT {
                // SAFETY: `data` and `out` under this function's contract.
                true => unsafe { eng.am_start((peer, self.comm_pair()), arg(offset).encode(), data, unit, out) },
                false => Err(Error::new(ErrorClass::Disp, call, format!("offset {offset} is too large to send"))),
            };
            match h {
                Ok(h) => started.push(h),
                Err(e) => {
                    for h in started {
                        let _ = eng.wait(h);
                    }
                    return Err(Error::new(e.class, call, e.detail));
                }
            }
            from += len;
        }
        Ok(started)
    }

    /// Waits for `started` (all of them); the first error, as `call`'s.
    fn wait_started<F: Fabric>(eng: &mut Engine<F>, call: &'static str, started: Vec<Handle>) -> Result<()> {
        let mut first = None;
        for handle in started {
            if let Err(e) = eng.wait(handle) {
                first.get_or_insert(Error::new(e.class, call, e.detail));
            }
        }
        first.map_or(Ok(()), Err)
    }

    /// Starts the messages of a put or an accumulate that fetches nothing, whose payload is
    /// `kept`'s bytes: left in flight in the table with `kept`, which lives until they are
    /// answered.
    fn start_kept<F: Fabric>(
        &self,
        eng: &mut Engine<F>,
        call: &'static str,
        at: &Located,
        peer: u32,
        (arg, unit): (impl Fn(u64) -> Arg, usize),
        kept: Box<[u8]>,
    ) -> Result<()> {
        let bytes: &[u8] = &kept;
        // SAFETY: `kept`'s heap bytes stay where they are when the box moves into the table,
        // which keeps them until the requests are answered (or leaks them: `OpTable`'s drop).
        let view = |_: usize, from: usize, len: usize| (unsafe { RawBuf::new(&bytes[from..from + len]) }, unit);
        // SAFETY: as `view`; no reply buffer.
        let started = unsafe { self.start_spans(eng, call, at, peer, arg, view, None)? };
        let last = started.len().saturating_sub(1);
        let mut kept = Some(kept);
        for (i, handle) in started.into_iter().enumerate() {
            // The data goes with the last request: the table waits for its requests in order.
            let data = if i == last { kept.take() } else { None };
            self.table.keep(at.target, InFlight { handle, call, data });
        }
        Ok(())
    }

    /// `MPI_Put` of `data` (packed) into the bytes `at` names.
    pub fn put<F: Fabric>(&self, eng: &mut Engine<F>, call: &'static str, at: &Located, data: &[u8]) -> Result<()> {
        let Reach::Messages(_) = at.reach else {
            self.progress_if_served(eng);
            return self.put_here(call, at, data);
        };
        if data.len() != at.len() {
            return Err(length_mismatch(call, "origin's data", data.len(), at.len()));
        }
        let t = at.target;
        let one = self.one_span(eng, at, data.len()).filter(|_| data.len() <= COPIED);
        let (peer, lock) = self.contact(eng, call, t, one.is_some())?;
        let arg = |offset| Arg { kind: Kind::Put, op: SysOp::Replace, elements: None, foreign: None, offset };
        if let Some(offset) = one {
            return self.keep_or_start(eng, call, t, (arg(offset), 1), data, lock);
        }
        if batched(at) {
            return self.send_batches(eng, call, at, (peer, arg(0).with(Kind::PutSpans), 1), Some(data), None);
        }
        if data.len() <= COPIED {
            return self.start_kept(eng, call, at, peer, (arg, 1), data.into());
        }
        // SAFETY: `data` is borrowed for this whole call, which waits for the messages.
        let view = |_: usize, from: usize, len: usize| (unsafe { RawBuf::new(&data[from..from + len]) }, 1);
        // SAFETY: as `view`; no reply buffer.
        let started = unsafe { self.start_spans(eng, call, at, peer, arg, view, None)? };
        Self::wait_started(eng, call, started)
    }

    /// `MPI_Get` of the bytes `at` names into `out` (packed).
    pub fn get<F: Fabric>(&self, eng: &mut Engine<F>, call: &'static str, at: &Located, out: &mut [u8]) -> Result<()> {
        let Reach::Messages(_) = at.reach else {
            self.progress_if_served(eng);
            return self.get_here(call, at, out);
        };
        if out.len() != at.len() {
            return Err(length_mismatch(call, "origin's buffer", out.len(), at.len()));
        }
        let one = self.one_span(eng, at, 8);
        let (peer, lock) = self.contact(eng, call, at.target, one.is_some())?;
        if let (Some(offset), Some(lock)) = (one, lock) {
            let what = Arg { kind: Kind::Get, op: SysOp::NoOp, elements: None, foreign: None, offset };
            let len = (out.len() as u64).to_ne_bytes();
            return self.start_bracketed(eng, call, at.target, (what, 8), &len, (lock, Some(out)));
        }
        if batched(at) {
            let what = Arg { kind: Kind::GetSpans, op: SysOp::NoOp, elements: None, foreign: None, offset: 0 };
            return self.send_batches(eng, call, at, (peer, what, 1), None, Some(out));
        }
        let lens: Vec<[u8; 8]> = at.spans().iter().map(|s| (s.1 as u64).to_ne_bytes()).collect();
        let arg = |offset| Arg { kind: Kind::Get, op: SysOp::NoOp, elements: None, foreign: None, offset };
        // SAFETY: `lens` lives until this call returns, after the messages are answered.
        let view = |i: usize, _: usize, _: usize| (unsafe { RawBuf::new(&lens[i]) }, 8);
        // SAFETY: as `view`; `out` is borrowed for this whole call.
        let started = unsafe { self.start_spans(eng, call, at, peer, arg, view, Some(out))? };
        Self::wait_started(eng, call, started)
    }

    /// `MPI_Get_accumulate` (see [`WindowData::accumulate_here`]) by whichever path reaches
    /// the target. By messages, an accumulate that fetches nothing returns once started (its
    /// data copied) when it is small.
    pub fn accumulate<F: Fabric>(
        &self,
        eng: &mut Engine<F>,
        call: &'static str,
        at: &Located,
        how: &Combiner<'_>,
        data: &[u8],
        old: Option<&mut [u8]>,
    ) -> Result<()> {
        let Reach::Messages(_) = at.reach else {
            self.progress_if_served(eng);
            return self.accumulate_here(call, at, how, data, old);
        };
        if how.elements.is_none() && how.foreign.is_none() {
            return Err(Error::unsupported(
                call,
                "this accumulate's elements are combined only where the origin is (a front end's \
                 function no target knows), not at a target reached by messages",
            ));
        }
        let total = at.len();
        if let Some(o) = old.as_deref() {
            if o.len() != total {
                return Err(length_mismatch(call, "result buffer", o.len(), total));
            }
        }
        // MPI_NO_OP sends no data: zeros stand in, which the target ignores.
        let zeros;
        let data = match how.op {
            SysOp::NoOp => {
                zeros = vec![0u8; total];
                &zeros[..]
            }
            _ if data.len() != total => return Err(length_mismatch(call, "origin's data", data.len(), total)),
            _ => data,
        };
        let unit = how.unit;
        let one = self.one_span(eng, at, total).filter(|_| total.is_multiple_of(unit));
        let (peer, lock) = self.contact(eng, call, at.target, one.is_some())?;
        let what = Arg { kind: Kind::Accumulate, op: how.op, elements: how.elements, foreign: how.foreign, offset: 0 };
        if let Some(offset) = one {
            if old.is_none() && total <= COPIED {
                return self.keep_or_start(eng, call, at.target, (Arg { offset, ..what }, unit), data, lock);
            }
            if let Some(lock) = lock {
                let kind = if old.is_some() { Kind::GetAccumulate } else { Kind::Accumulate };
                let what = Arg { kind, offset, ..what };
                return self.start_bracketed(eng, call, at.target, (what, unit), data, (lock, old));
            }
        }
        // Elements straddling the layout's blocks go whole with their blocks' list (done under
        // every block's element locks at once), and small blocks several to a message.
        if batched(at) || at.spans().iter().any(|s| !s.1.is_multiple_of(unit)) {
            let kind = if old.is_some() { Kind::GetAccumulateSpans } else { Kind::AccumulateSpans };
            return self.send_batches(eng, call, at, (peer, what.with(kind), unit), Some(data), old);
        }
        let kind = if old.is_some() { Kind::GetAccumulate } else { Kind::Accumulate };
        let arg = |offset| Arg { kind, offset, ..what };
        if old.is_none() && data.len() <= COPIED {
            return self.start_kept(eng, call, at, peer, (arg, unit), data.into());
        }
        // SAFETY: `data` is borrowed for this whole call, which waits for the messages.
        let view = |_: usize, from: usize, len: usize| (unsafe { RawBuf::new(&data[from..from + len]) }, unit);
        // SAFETY: as `view`; `old` is borrowed for this whole call too.
        let started = unsafe { self.start_spans(eng, call, at, peer, arg, view, old)? };
        Self::wait_started(eng, call, started)
    }

    /// Sends the spans of `at` several to a message (`what`'s kind: `PutSpans`, `GetSpans` or
    /// the accumulates' `*Spans`), each message their list and, with `data`, their bytes, cut
    /// where the data so far is whole `unit`s (see [`batches`]). With `reply`, the answers'
    /// bytes go there at each batch's offset and this waits for them; without, the messages
    /// own their payloads and stay in flight in the table.
    #[allow(clippy::too_many_arguments)]
    fn send_batches<F: Fabric>(
        &self,
        eng: &mut Engine<F>,
        call: &'static str,
        at: &Located,
        (peer, what, unit): (u32, Arg, usize),
        data: Option<&[u8]>,
        mut reply: Option<&mut [u8]>,
    ) -> Result<()> {
        let most = eng.am_max_part(peer);
        let mut waiting: Vec<(Handle, Box<[u8]>)> = Vec::new();
        let mut failed = None;
        for (range, from, len) in batches(at.spans(), unit, most.min(COPIED), data.is_some()) {
            let spans = &at.spans()[range];
            let mut payload = Vec::with_capacity(8 + 16 * spans.len() + data.map_or(0, |_| len));
            payload.extend_from_slice(&(spans.len() as u64).to_ne_bytes());
            for &(offset, n) in spans {
                payload.extend_from_slice(&offset.to_ne_bytes());
                payload.extend_from_slice(&(n as u64).to_ne_bytes());
            }
            if let Some(d) = data {
                payload.extend_from_slice(&d[from..from + len]);
            }
            if payload.len() > most {
                failed = Some(Error::unsupported(
                    call,
                    format!(
                        "an element whose blocks at the target, listed with its data, take {} bytes \
                         goes whole in one message by the remote path: at most {most}",
                        payload.len()
                    ),
                ));
                break;
            }
            if reply.is_none() {
                if let Err(e) = self.contact(eng, call, at.target, false) {
                    failed = Some(e); // room in the table, waiting for the oldest
                    break;
                }
            }
            let kept = payload.into_boxed_slice();
            // SAFETY: a view of the caller's result buffer, borrowed for this whole call,
            // which waits for these requests.
            let out = reply.as_deref_mut().map(|r| unsafe { RawBufMut::new(&mut r[from..from + len]) });
            let with_reply = out.is_some();
            // SAFETY: `kept`'s heap bytes stay where they are when the box moves (into
            // `waiting` or the table), which keeps them until the request is answered; `out`
            // as above.
            let h = unsafe { eng.am_start((peer, self.comm_pair()), what.encode(), RawBuf::new(&kept), kept.len(), out) };
            match h {
                Ok(handle) if with_reply => waiting.push((handle, kept)),
                Ok(handle) => self.table.keep(at.target, InFlight { handle, call, data: Some(kept) }),
                Err(e) => {
                    failed = Some(Error::new(e.class, call, e.detail));
                    break;
                }
            }
        }
        let mut first = failed;
        for (h, _kept) in waiting {
            if let Err(e) = eng.wait(h) {
                first.get_or_insert(Error::new(e.class, call, e.detail));
            }
        }
        first.map_or(Ok(()), Err)
    }

    /// `MPI_Compare_and_swap` (see [`WindowData::compare_and_swap_here`]) by whichever path
    /// reaches the target.
    #[allow(clippy::too_many_arguments)]
    pub fn compare_and_swap<F: Fabric>(
        &self,
        eng: &mut Engine<F>,
        call: &'static str,
        at: &Located,
        basic: Option<Basic>,
        compare: &[u8],
        swap: &[u8],
        old: &mut [u8],
    ) -> Result<()> {
        let Reach::Messages(_) = at.reach else {
            self.progress_if_served(eng);
            return self.compare_and_swap_here(call, at, basic, compare, swap, old);
        };
        check_one_element(call, at, [compare.len(), swap.len(), old.len()])?;
        let both = [compare, swap].concat();
        let one = self.one_span(eng, at, both.len());
        let (peer, lock) = self.contact(eng, call, at.target, one.is_some())?;
        let elements = basic.map(Elements::Basic);
        let arg = |offset| Arg { kind: Kind::CompareAndSwap, op: SysOp::Replace, elements, foreign: None, offset };
        if let (Some(offset), Some(lock)) = (one, lock) {
            return self.start_bracketed(eng, call, at.target, (arg(offset), both.len()), &both, (lock, Some(old)));
        }
        // SAFETY: `both` lives until this call returns, after the message is answered.
        let view = |_: usize, _: usize, _: usize| (unsafe { RawBuf::new(&both) }, both.len());
        // SAFETY: as `view`; `old` is borrowed for this whole call.
        let started = unsafe { self.start_spans(eng, call, at, peer, arg, view, Some(old))? };
        Self::wait_started(eng, call, started)
    }
}

/// `len` bytes of payload after [`BRACKET`] bytes of room.
fn with_room(payload: &[u8]) -> Box<[u8]> {
    let mut data = vec![0u8; BRACKET + payload.len()];
    data[BRACKET..].copy_from_slice(payload);
    data.into_boxed_slice()
}

/// The function combining the elements `a` names with its operation at the target, and the
/// bytes of one element.
fn combine_function(a: &Arg) -> Result<(crate::engine::schedule::Combine, usize)> {
    let op = a.op;
    let e = match (a.elements, a.foreign) {
        (Some(e), _) => e,
        (None, Some(code)) => {
            let f = super::foreign::get(code).ok_or_else(|| {
                Error::unsupported(
                    SERVE,
                    format!(
                        "an accumulate with the front end's combiner {code} (long double), which \
                         this process's front end did not register (a program not using the C ABI)"
                    ),
                )
            })?;
            return Ok((Rc::new(f.combine), f.unit));
        }
        (None, None) => return Err(bad_payload(0)),
    };
    // The pairs' function leaves MPI_REPLACE and MPI_NO_OP to its callers: on pairs those
    // are the bytes' (a copy, or nothing).
    let on = match (op, e) {
        (SysOp::Replace | SysOp::NoOp, Elements::Pair(..)) => Elements::Basic(Basic::U8),
        _ => e,
    };
    let f = op::combine(op, on)
        .ok_or_else(|| Error::new(ErrorClass::Op, SERVE, format!("{} is not defined on {e:?}", op.name())))?;
    Ok((f, unit_of(e)))
}

/// How the target combines the elements `a` names (`unit` bytes each) by `f`.
fn combiner<'a>(a: &Arg, unit: usize, f: &'a CombineFn) -> Combiner<'a> {
    Combiner {
        op: a.op,
        basic: match a.elements {
            Some(Elements::Basic(b)) => Some(b),
            _ => None,
        },
        unit,
        elements: a.elements,
        foreign: a.foreign,
        combine: Some(f),
    }
}

fn lock_code(kind: LockKind) -> u64 {
    match kind {
        LockKind::Shared => 0,
        LockKind::Exclusive => 1,
    }
}

fn lock_kind(code: u64) -> Result<LockKind> {
    match code {
        0 => Ok(LockKind::Shared),
        1 => Ok(LockKind::Exclusive),
        _ => Err(Error::new(ErrorClass::Internal, SERVE, format!("a lock message of kind {code}"))),
    }
}

#[cold]
fn bad_payload(len: usize) -> Error {
    Error::new(ErrorClass::Internal, SERVE, format!("a message's payload of {len} bytes does not fit what it asks"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_survive_the_trip() {
        let cases = [
            Arg { kind: Kind::Put, op: SysOp::Replace, elements: None, foreign: None, offset: 0 },
            Arg { kind: Kind::Get, op: SysOp::NoOp, elements: None, foreign: None, offset: OFFSET_LIMIT - 1 },
            Arg {
                kind: Kind::GetAccumulate,
                op: SysOp::MaxLoc,
                elements: Some(Elements::Pair(Basic::F64, Basic::I32)),
                foreign: None,
                offset: 4096,
            },
            Arg {
                kind: Kind::Accumulate,
                op: SysOp::BitwiseXor,
                elements: Some(Elements::Basic(Basic::C64)),
                foreign: None,
                offset: 12,
            },
            Arg {
                kind: Kind::CompareAndSwap,
                op: SysOp::Replace,
                elements: Some(Elements::Basic(Basic::I8)),
                foreign: None,
                offset: 1,
            },
            Arg {
                kind: Kind::GetAccumulateSpans,
                op: SysOp::Sum,
                elements: None,
                foreign: Some(7),
                offset: 20,
            },
            Arg { kind: Kind::Lock, op: SysOp::NoOp, elements: None, foreign: None, offset: 1 },
            Arg { kind: Kind::Complete, op: SysOp::NoOp, elements: None, foreign: None, offset: 0 },
            Arg { kind: Kind::PutSpans, op: SysOp::Replace, elements: None, foreign: None, offset: 0 },
            Arg { kind: Kind::GetSpans, op: SysOp::NoOp, elements: None, foreign: None, offset: 0 },
            Arg { kind: Kind::Bracketed, op: SysOp::NoOp, elements: None, foreign: None, offset: 0 },
        ];
        for a in cases {
            assert_eq!(Arg::decode(a.encode()), Some(a));
        }
        assert_eq!(Arg::decode(0), None, "no kind 0");
        assert_eq!(Arg::decode(0xf), None, "no kind 15");
        assert_eq!(Arg::decode(3 | FOREIGN << 8), None, "a foreign combiner has a code");
    }

    #[test]
    fn brackets_survive_the_trip() {
        let kinds = [None, Some(LockKind::Shared), Some(LockKind::Exclusive)];
        for lock in kinds {
            for unlock in kinds {
                let b = Bracket { lock, unlock };
                assert_eq!(Bracket::decode(b.encode()), Some(b));
            }
        }
        assert_eq!(Bracket::decode(3), None, "no lock kind 3");
        assert_eq!(Bracket::decode(1 << 4), None, "no flag past bit 3");
    }

    #[test]
    fn small_spans_go_in_batches_cut_at_whole_elements() {
        // 10 spans of 4 bytes, 20 bytes each in a message with data: 3 fit in 8 + 60 = 68.
        let spans: Vec<(u64, usize)> = (0..10).map(|i| (i * 8, 4)).collect();
        let runs = batches(&spans, 4, 70, true);
        assert_eq!(runs.iter().map(|r| r.0.len()).collect::<Vec<_>>(), [3, 3, 3, 1]);
        assert_eq!((runs[1].1, runs[1].2), (12, 12), "the data's offset and length");
        // Without data (a get), 16 bytes a span: 3 in 56, 4 in 72.
        assert_eq!(batches(&spans, 4, 70, false).len(), 4);
        // An 8-byte element straddling pairs of spans: runs end on whole elements only.
        let runs = batches(&spans, 8, 70, true);
        assert!(runs.iter().all(|r| r.2 % 8 == 0), "{runs:?}");
        assert_eq!(runs.iter().map(|r| r.0.len()).sum::<usize>(), 10);
        // One span larger than a message still goes (the caller refuses it).
        assert_eq!(batches(&[(0, 100)], 1, 70, true), [(0..1, 0, 100)]);
    }
}
