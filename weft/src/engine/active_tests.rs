//! Internal active messages over the fake fabric: parts in order under backpressure, replies
//! of any size, payloads placed straight into a handler's memory, answers given later, and
//! every error reaching the origin.

use super::buffer::{RawBuf, RawBufMut};
use super::core::active::{AmHandler, AmPart, Answer, ReplyTo};
use super::testing::*;
use super::Engine;
use crate::error::{Error, ErrorClass};
use std::cell::RefCell;
use std::rc::Rc;

/// What a test handler saw and holds: its memory, the parts it was given (origin, argument,
/// offset, bytes, bytes placed) and the answers it owes.
#[derive(Default)]
struct Seen {
    memory: Vec<u8>,
    parts: Vec<(u32, u64, u64, usize, usize)>,
    owed: Vec<ReplyTo>,
}

/// Writes each part into its memory at `arg + offset` (placed there when the transport
/// offers), answers with the part's bytes reversed at the same offset, or later when `arg`
/// is `LATER`, or refuses parts outside its memory.
struct Store(Rc<RefCell<Seen>>);

const LATER: u64 = u64::MAX;

impl AmHandler for Store {
    fn place(&mut self, _src: u32, arg: u64, offset: u64, len: usize) -> Option<RawBufMut> {
        let mut seen = self.0.borrow_mut();
        let at = (arg.checked_add(offset)? as usize)..(arg + offset) as usize + len;
        let dst = seen.memory.get_mut(at)?;
        // SAFETY: the memory vector is never resized while the test runs, and nothing else
        // touches these bytes until the part is handled.
        Some(unsafe { RawBufMut::new(dst) })
    }

    fn handle(&mut self, part: &AmPart<'_>, reply: ReplyTo) -> Answer {
        let mut seen = self.0.borrow_mut();
        let len = part.payload.len().max(part.placed);
        seen.parts.push((part.src, part.arg, part.offset, part.payload.len(), part.placed));
        if part.arg == LATER {
            seen.owed.push(reply);
            return Answer::Later;
        }
        let at = (part.arg + part.offset) as usize;
        let Some(mem) = seen.memory.get_mut(at..at + len) else {
            return Answer::Failed(Error::new(
                ErrorClass::Disp,
                "store",
                format!("{len} bytes at {at} fall outside the memory"),
            ));
        };
        if part.placed == 0 {
            mem.copy_from_slice(part.payload);
        }
        let mut back = mem.to_vec();
        back.reverse();
        Answer::Done {
            data: back,
            at: part.offset,
        }
    }
}

fn store_at(es: &mut [Engine<FakeFabric>], rank: usize, id: u32, size: usize) -> Rc<RefCell<Seen>> {
    let seen = Rc::new(RefCell::new(Seen {
        memory: vec![0; size],
        ..Seen::default()
    }));
    es[rank].am_register(id, Box::new(Store(seen.clone())));
    seen
}

fn bytes(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

/// Starts an active message from `from` to `to`'s handler 1.
fn start(
    es: &mut [Engine<FakeFabric>],
    (from, to): (usize, u32),
    arg: u64,
    payload: &[u8],
    unit: usize,
    reply: &mut [u8],
) -> super::request::Handle {
    // SAFETY: the tests keep both buffers alive and untouched until the request completes.
    unsafe {
        es[from]
            .am_start((to, 1), arg, RawBuf::new(payload), unit, Some(RawBufMut::new(reply)))
            .expect("am_start")
    }
}

/// Progresses every rank until origin 0's request `h` completes; its result.
fn finish(es: &mut [Engine<FakeFabric>], h: super::request::Handle) -> crate::error::Result<super::request::MsgStatus> {
    run_until_done(es, &[(0, h)], 10_000);
    es[0].wait(h)
}

fn reversed_parts(data: &[u8], part: usize) -> Vec<u8> {
    data.chunks(part).flat_map(|c| c.iter().rev().copied()).collect()
}

#[test]
fn parts_arrive_in_order_and_every_one_is_answered_under_backpressure() {
    for place in [false, true] {
        // Packets of 16 bytes, one in flight per queue: a 100-byte payload of 6-byte units
        // goes as parts of 12 bytes, and replies queue behind each other.
        let mut es = world_placing(3, 1, 16, 64, false, place);
        let seen = store_at(&mut es, 2, 1, 256);
        let (a, b) = (bytes(96, 1), bytes(48, 2));
        let (mut ra, mut rb) = (vec![0u8; 96], vec![0u8; 48]);
        let ha = start(&mut es, (0, 2), 0, &a, 6, &mut ra);
        let hb = start(&mut es, (1, 2), 128, &b, 8, &mut rb);
        run_until_done(&mut es, &[(0, ha), (1, hb)], 10_000);
        es[0].wait(ha).expect("origin 0's message");
        es[1].wait(hb).expect("origin 1's message");
        let s = seen.borrow();
        assert_eq!(&s.memory[..96], &a[..], "place {place}");
        assert_eq!(&s.memory[128..176], &b[..]);
        assert_eq!(ra, reversed_parts(&a, 12), "each part's answer at its offset");
        assert_eq!(rb, reversed_parts(&b, 16));
        for origin in [0u32, 1] {
            let offsets: Vec<u64> = s.parts.iter().filter(|p| p.0 == origin).map(|p| p.2).collect();
            let step = if origin == 0 { 12 } else { 16 };
            let want: Vec<u64> = (0..offsets.len() as u64).map(|k| k * step).collect();
            assert_eq!(offsets, want, "origin {origin}'s parts in order");
        }
        if place {
            assert!(s.parts.iter().all(|p| p.3 == 0 && p.4 > 0), "every part placed: {:?}", s.parts);
        } else {
            assert!(s.parts.iter().all(|p| p.4 == 0));
        }
        assert_eq!(es[2].live_requests(), 0, "the target keeps no request");
    }
}

#[test]
fn a_reply_larger_than_a_packet_fills_the_reply_buffer_and_an_empty_payload_is_one_part() {
    for place in [false, true] {
        let mut es = world_placing(2, 2, 32, 64, false, place);
        let seen = store_at(&mut es, 1, 1, 1000);
        seen.borrow_mut().memory = bytes(1000, 7);
        // A handler answering 1000 bytes to an empty part: what a get looks like.
        struct Get(Rc<RefCell<Seen>>);
        impl AmHandler for Get {
            fn handle(&mut self, part: &AmPart<'_>, _: ReplyTo) -> Answer {
                assert_eq!((part.offset, part.payload.len(), part.placed), (0, 0, 0));
                let mut data = self.0.borrow().memory[part.arg as usize..].to_vec();
                data.truncate(700);
                Answer::Done { data, at: 0 }
            }
        }
        es[1].am_register(2, Box::new(Get(seen.clone())));
        let mut out = vec![0u8; 700];
        // SAFETY: `out` outlives the request, untouched meanwhile.
        let h = unsafe {
            es[0]
                .am_start((1, 2), 300, RawBuf::new(&[]), 1, Some(RawBufMut::new(&mut out)))
                .expect("am_start")
        };
        finish(&mut es, h).expect("the get");
        assert_eq!(out, bytes(1000, 7)[300..].to_vec(), "place {place}");
    }
}

#[test]
fn an_answer_given_later_completes_the_request_only_then() {
    let mut es = world(2, 4, 64, 64, false);
    let seen = store_at(&mut es, 1, 1, 16);
    let mut out = [0u8; 4];
    let h = start(&mut es, (0, 1), LATER, &[], 1, &mut out);
    for _ in 0..100 {
        es[0].progress();
        es[1].progress();
    }
    assert!(!es[0].is_done(h), "not answered yet");
    let owed = seen.borrow_mut().owed.pop().expect("the handler owes an answer");
    assert_eq!(owed.peer, 0);
    es[1].am_answer(owed, Answer::Done { data: vec![1, 2, 3, 4], at: 0 });
    finish(&mut es, h).expect("answered");
    assert_eq!(out, [1, 2, 3, 4]);
}

#[test]
fn a_polled_handler_answers_from_progress_when_it_can_in_order() {
    // A lock-like handler: each part waits until `free` says a grant is possible, then the
    // oldest waiting part is answered with its origin's rank.
    struct Gate(Rc<RefCell<(u32, std::collections::VecDeque<ReplyTo>)>>);
    impl AmHandler for Gate {
        fn handle(&mut self, _: &AmPart<'_>, reply: ReplyTo) -> Answer {
            self.0.borrow_mut().1.push_back(reply);
            Answer::Polled
        }
        fn poll(&mut self, answers: &mut Vec<(ReplyTo, Answer)>) -> bool {
            let mut g = self.0.borrow_mut();
            while g.0 > 0 {
                let Some(to) = g.1.pop_front() else { break };
                g.0 -= 1;
                answers.push((to, Answer::Done { data: vec![to.peer as u8], at: 0 }));
            }
            !g.1.is_empty()
        }
    }
    let mut es = world(3, 4, 64, 64, false);
    let gate = Rc::new(RefCell::new((0u32, std::collections::VecDeque::new())));
    es[2].am_register(1, Box::new(Gate(gate.clone())));
    let (mut a, mut b) = ([9u8], [9u8]);
    let ha = start(&mut es, (0, 2), 0, &[], 1, &mut a);
    for _ in 0..50 {
        es[0].progress();
        es[2].progress();
    }
    let hb = start(&mut es, (1, 2), 0, &[], 1, &mut b);
    for _ in 0..100 {
        for e in es.iter_mut() {
            e.progress();
        }
    }
    assert!(!es[0].is_done(ha) && !es[1].is_done(hb), "nothing granted yet");
    gate.borrow_mut().0 = 1;
    run_until_done(&mut es, &[(0, ha)], 10_000);
    assert!(!es[1].is_done(hb), "one grant: the first come only");
    gate.borrow_mut().0 = 1;
    run_until_done(&mut es, &[(1, hb)], 10_000);
    es[0].wait(ha).expect("first");
    es[1].wait(hb).expect("second");
    assert_eq!((a, b), ([0], [1]));
    assert!(gate.borrow().1.is_empty(), "nothing left waiting");
}

#[test]
fn refusals_missing_handlers_and_overflowing_replies_fail_the_origin_with_the_reason() {
    let mut es = world(2, 4, 64, 64, false);
    store_at(&mut es, 1, 1, 16);
    let mut out = [0u8; 32];
    // Outside the handler's memory: its error, with its text.
    let h = start(&mut es, (0, 1), 8, &bytes(16, 0), 1, &mut out);
    let e = finish(&mut es, h).expect_err("refused");
    assert_eq!(e.class, ErrorClass::Disp);
    assert!(e.detail.contains("rank 1") && e.detail.contains("fall outside"), "{e}");
    // No handler 5 at rank 1.
    // SAFETY: as in `start`.
    let h = unsafe { es[0].am_start((1, 5), 0, RawBuf::new(&[]), 1, None).expect("am_start") };
    let e = finish(&mut es, h).expect_err("no handler");
    assert!(e.detail.contains("no handler 5"), "{e}");
    // An answer longer than the reply buffer.
    let mut small = [0u8; 4];
    let h = start(&mut es, (0, 1), 0, &bytes(8, 0), 1, &mut small);
    let e = finish(&mut es, h).expect_err("overflow");
    assert_eq!(e.class, ErrorClass::Truncate, "{e}");
    // Bad arguments, caught at the start.
    // SAFETY: as in `start`.
    let bad = unsafe { es[0].am_start((1, 1), 0, RawBuf::new(&[0; 7]), 2, None) };
    assert_eq!(bad.expect_err("7 bytes of 2-byte units").class, ErrorClass::Arg);
    // SAFETY: as in `start`.
    let bad = unsafe { es[0].am_start((9, 1), 0, RawBuf::new(&[]), 1, None) };
    assert_eq!(bad.expect_err("no rank 9").class, ErrorClass::Rank);
    // The failures left the target working.
    let h = start(&mut es, (0, 1), 0, &bytes(4, 3), 1, &mut small);
    finish(&mut es, h).expect("still answers");
    assert_eq!(es[1].live_requests(), 0);
}
