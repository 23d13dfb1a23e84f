//! Sans-IO tests of the engine, over the fake fabric of [`super::testing`].

use super::buffer::{RawBuf, RawBufMut};
use super::comm_buffers::Owner;
use super::matching::Pattern;
use super::testing::*;
use super::{Engine, SendMode};
use crate::error::ErrorClass;
use crate::fabric::Header;
use std::time::Duration;
fn pat(source: Option<u32>, tag: Option<i32>) -> Pattern {
    Pattern {
        context: 0,
        source,
        tag,
    }
}

fn pattern_bytes(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// Ranks 0 and 1 send each other `len` bytes at once (receives posted after the sends, so
/// the offers arrive unexpected) and check the data.
fn exchange(es: &mut [Engine<FakeFabric>], len: usize, seed: u8) {
    let a = pattern_bytes(len, seed);
    let b = pattern_bytes(len, seed.wrapping_add(100));
    let (mut out_a, mut out_b) = (vec![0u8; len], vec![0u8; len]);
    let s0 = es[0]
        // SAFETY: the buffer outlives every progress call of this test.
        .isend(1, 0, 1, unsafe { RawBuf::new(&a) }, SendMode::Standard)
        .unwrap();
    let s1 = es[1]
        // SAFETY: the buffer outlives every progress call of this test.
        .isend(0, 0, 1, unsafe { RawBuf::new(&b) }, SendMode::Standard)
        .unwrap();
    let r1 = es[1]
        // SAFETY: the buffer outlives every progress call of this test.
        .irecv(pat(Some(0), None), unsafe { RawBufMut::new(&mut out_a) })
        .unwrap();
    let r0 = es[0]
        // SAFETY: the buffer outlives every progress call of this test.
        .irecv(pat(Some(1), None), unsafe { RawBufMut::new(&mut out_b) })
        .unwrap();
    let all = [(0, s0), (1, s1), (0, r0), (1, r1)];
    run_until_done(es, &all, 10_000);
    for (r, h) in all {
        es[r].wait(h).unwrap();
    }
    assert!(
        out_a == a && out_b == b,
        "exchange of {len} bytes (seed {seed})"
    );
}

/// Sends `len` bytes 0 -> 1 with the given receive-first order and checks the data.
fn transfer(len: usize, recv_first: bool, single_copy: bool, mode: SendMode, place: bool) {
    let mut es = world_placing(2, 4, 100, 250, single_copy, place);
    let data = pattern_bytes(len, 7);
    let mut out = vec![0u8; len];
    let (s, r);
    if recv_first {
        r = es[1]
            // SAFETY: the buffer outlives every progress call of this test.
            .irecv(pat(Some(0), Some(3)), unsafe { RawBufMut::new(&mut out) })
            .unwrap();
        // SAFETY: the buffer outlives every progress call of this test.
        s = es[0].isend(1, 0, 3, unsafe { RawBuf::new(&data) }, mode).unwrap();
    } else {
        // SAFETY: the buffer outlives every progress call of this test.
        s = es[0].isend(1, 0, 3, unsafe { RawBuf::new(&data) }, mode).unwrap();
        for _ in 0..3 {
            es[1].progress();
        }
        r = es[1]
            // SAFETY: the buffer outlives every progress call of this test.
            .irecv(pat(Some(0), Some(3)), unsafe { RawBufMut::new(&mut out) })
            .unwrap();
    }
    run_until_done(&mut es, &[(0, s), (1, r)], 10_000);
    let st = es[1].wait(r).unwrap();
    es[0].wait(s).unwrap();
    assert_eq!((st.source, st.tag, st.len), (0, 3, len));
    assert!(out == data, "data differs for len {len}");
    assert_eq!(es[0].live_requests() + es[1].live_requests(), 0);
}

#[test]
fn every_size_and_order_and_protocol() {
    for len in [0, 1, 7, 99, 100, 101, 249, 250, 251, 999, 5000] {
        for recv_first in [true, false] {
            for single_copy in [true, false] {
                for mode in [SendMode::Standard, SendMode::Synchronous] {
                    for place in [false, true] {
                        transfer(len, recv_first, single_copy, mode, place);
                    }
                }
            }
        }
    }
}

#[test]
fn non_overtaking_with_wildcards_under_backpressure() {
    // Three senders each send 50 messages of mixed sizes (eager, fragmented, rendezvous)
    // to rank 3 through queues of 2 packets; rank 3 receives with ANY_SOURCE / ANY_TAG and
    // checks that each sender's messages arrive in order. With eager payloads placed over
    // two polls, a message claims its receive at its header, before later arrivals from the
    // other senders.
    for place in [false, true] {
        non_overtaking(place);
    }
}

fn non_overtaking(place: bool) {
    let mut es = world_placing(4, 2, 64, 200, true, place);
    let msgs: Vec<Vec<Vec<u8>>> = (0..3)
        .map(|s| {
            (0..50)
                .map(|i| pattern_bytes([0, 5, 64, 65, 300][i % 5], (s * 50 + i) as u8))
                .collect()
        })
        .collect();
    let mut sends = vec![];
    for (s, list) in msgs.iter().enumerate() {
        for (i, m) in list.iter().enumerate() {
            let h = es[s]
                // SAFETY: the buffer outlives every progress call of this test.
                .isend(3, 0, i as i32, unsafe { RawBuf::new(m) }, SendMode::Standard)
                .unwrap();
            sends.push((s, h));
        }
    }
    let mut next = [0usize; 3];
    let mut buf = vec![0u8; 300];
    for _ in 0..150 {
        let r = es[3]
            // SAFETY: the buffer outlives every progress call of this test.
            .irecv(pat(None, None), unsafe { RawBufMut::new(&mut buf) })
            .unwrap();
        run_until_done(&mut es, &[(3, r)], 10_000);
        let st = es[3].wait(r).unwrap();
        let s = st.source as usize;
        assert_eq!(
            st.tag as usize, next[s],
            "messages from rank {s} overtook each other"
        );
        assert_eq!(&buf[..st.len], &msgs[s][next[s]][..]);
        next[s] += 1;
    }
    run_until_done(&mut es, &sends, 10_000);
    assert_eq!(next, [50, 50, 50]);
    // A send the full queue refused at first (its born-complete request dropped, a queued
    // one made) leaves no request behind once every send is waited.
    for (s, h) in sends {
        es[s].wait(h).unwrap();
    }
    for (s, e) in es.iter().enumerate() {
        assert_eq!(e.live_requests(), 0, "rank {s} kept a request");
    }
}

#[test]
fn truncation_is_an_error_naming_both_sizes() {
    for len in [10, 150, 400] {
        let mut es = world(2, 8, 100, 200, len != 400);
        let data = pattern_bytes(len, 1);
        let mut small = vec![0u8; 8];
        let s = es[0]
            // SAFETY: the buffer outlives every progress call of this test.
            .isend(1, 0, 0, unsafe { RawBuf::new(&data) }, SendMode::Standard)
            .unwrap();
        let r = es[1]
            // SAFETY: the buffer outlives every progress call of this test.
            .irecv(pat(Some(0), None), unsafe { RawBufMut::new(&mut small) })
            .unwrap();
        run_until_done(&mut es, &[(0, s), (1, r)], 1000);
        let err = es[1].wait(r).unwrap_err();
        assert_eq!(err.class, ErrorClass::Truncate);
        let msg = err.to_string();
        assert!(
            msg.contains(&format!("{len} bytes")) && msg.contains("8-byte"),
            "{msg}"
        );
        assert_eq!(small, data[..8]);
        es[0].wait(s).unwrap();
    }
}

#[test]
fn synchronous_send_completes_only_after_match() {
    let mut es = world(2, 8, 100, 200, true);
    let data = [1u8; 16];
    let s = es[0]
        // SAFETY: the buffer outlives every progress call of this test.
        .isend(1, 0, 0, unsafe { RawBuf::new(&data) }, SendMode::Synchronous)
        .unwrap();
    for _ in 0..50 {
        es[0].progress();
        es[1].progress();
    }
    assert!(
        !es[0].is_done(s),
        "synchronous send completed before any receive was posted"
    );
    let mut out = [0u8; 16];
    let r = es[1]
        // SAFETY: the buffer outlives every progress call of this test.
        .irecv(pat(None, None), unsafe { RawBufMut::new(&mut out) })
        .unwrap();
    run_until_done(&mut es, &[(0, s), (1, r)], 100);
    // A standard send of the same size completes with nobody receiving.
    let s2 = es[0]
        // SAFETY: the buffer outlives every progress call of this test.
        .isend(1, 0, 0, unsafe { RawBuf::new(&data) }, SendMode::Standard)
        .unwrap();
    es[0].progress();
    assert!(es[0].is_done(s2));
}

#[test]
fn probe_matched_probe_and_cancel() {
    let mut es = world(2, 8, 100, 200, true);
    assert!(es[1].iprobe(&pat(None, None)).is_none());
    let a = pattern_bytes(30, 2);
    let b = pattern_bytes(500, 3);
    let sa = es[0]
        // SAFETY: the buffer outlives every progress call of this test.
        .isend(1, 0, 5, unsafe { RawBuf::new(&a) }, SendMode::Standard)
        .unwrap();
    let sb = es[0]
        // SAFETY: the buffer outlives every progress call of this test.
        .isend(1, 0, 6, unsafe { RawBuf::new(&b) }, SendMode::Standard)
        .unwrap();
    for _ in 0..5 {
        es[0].progress();
        es[1].progress();
    }
    let st = es[1]
        .iprobe(&pat(None, Some(6)))
        .expect("message with tag 6 arrived");
    assert_eq!((st.source, st.tag, st.len), (0, 6, 500));
    let (id, st) = es[1].improbe(&pat(Some(0), None)).unwrap();
    assert_eq!((st.tag, st.len), (5, 30));
    // The claimed message no longer matches ordinary receives or probes.
    assert_eq!(es[1].iprobe(&pat(None, None)).unwrap().tag, 6);
    let mut out = vec![0u8; 30];
    // SAFETY: the buffer outlives every progress call of this test.
    let r = es[1].mrecv(id, unsafe { RawBufMut::new(&mut out) }).unwrap();
    assert!(
        // SAFETY: the buffer outlives every progress call of this test.
        es[1].mrecv(id, unsafe { RawBufMut::new(&mut out) }).is_err(),
        "second mrecv of one message"
    );
    run_until_done(&mut es, &[(1, r)], 100);
    es[1].wait(r).unwrap();
    assert_eq!(out, a);
    let mut out_b = vec![0u8; 500];
    let rb = es[1]
        // SAFETY: the buffer outlives every progress call of this test.
        .irecv(pat(None, Some(6)), unsafe { RawBufMut::new(&mut out_b) })
        .unwrap();
    run_until_done(&mut es, &[(0, sa), (0, sb), (1, rb)], 100);
    assert_eq!(out_b, b);
    // Cancel a receive nobody sends to; a cancelled request reports it.
    let mut never = [0u8; 4];
    let c = es[1]
        // SAFETY: the buffer outlives every progress call of this test.
        .irecv(pat(Some(0), Some(99)), unsafe { RawBufMut::new(&mut never) })
        .unwrap();
    assert!(es[1].cancel(c));
    assert!(es[1].wait(c).unwrap().cancelled);
    // Using the freed request again is a typed error.
    assert_eq!(es[1].wait(c).unwrap_err().class, ErrorClass::Handle);
}

/// Starts a send of `data` from rank 0 to rank 1 with `tag`.
fn send_from_0(es: &mut [Engine<FakeFabric>], data: &[u8], tag: i32, mode: SendMode) -> super::request::Handle {
    // SAFETY: every caller's buffer outlives the progress calls of its test.
    es[0].isend(1, 0, tag, unsafe { RawBuf::new(data) }, mode).unwrap()
}

#[test]
fn sends_cancelled_unmatched_are_dropped_at_the_receiver_and_matched_ones_are_not() {
    let mut es = world(2, 8, 100, 200, true);
    let (small, two, large) = (pattern_bytes(30, 1), pattern_bytes(150, 2), pattern_bytes(500, 3));
    let delivered = send_from_0(&mut es, &small, 1, SendMode::Standard);
    // One packet (sent with no request queued), two packets, a rendezvous offer, synchronous.
    let sends = [
        send_from_0(&mut es, &small, 2, SendMode::Standard),
        send_from_0(&mut es, &two, 3, SendMode::Standard),
        send_from_0(&mut es, &large, 4, SendMode::Standard),
        send_from_0(&mut es, &small, 5, SendMode::Synchronous),
    ];
    let mut out = [0u8; 30];
    // SAFETY: the buffer outlives every progress call of this test.
    let r = es[1].irecv(pat(Some(0), Some(1)), unsafe { RawBufMut::new(&mut out) }).unwrap();
    run_until_done(&mut es, &[(1, r), (0, delivered)], 100);
    for &s in sends.iter().chain([&delivered]) {
        assert!(es[0].cancel(s), "cancel of {s:?} starts");
        assert!(!es[0].cancel(s), "a second cancel of {s:?} does nothing");
    }
    let all: Vec<_> = sends.iter().chain([&delivered]).map(|&s| (0, s)).collect();
    run_until_done(&mut es, &all, 100);
    for s in sends {
        assert!(es[0].wait(s).unwrap().cancelled, "{s:?} was unmatched: cancelled");
    }
    assert!(!es[0].wait(delivered).unwrap().cancelled, "a delivered send is not cancelled");
    // Nothing of the cancelled sends is left at the receiver: the next message it gets from
    // rank 0 is a new one.
    let marker = send_from_0(&mut es, &small, 9, SendMode::Standard);
    let mut any = vec![0u8; 500];
    // SAFETY: the buffer outlives every progress call of this test.
    let r = es[1].irecv(pat(Some(0), None), unsafe { RawBufMut::new(&mut any) }).unwrap();
    run_until_done(&mut es, &[(1, r), (0, marker)], 100);
    assert_eq!(es[1].wait(r).unwrap().tag, 9);
    assert_eq!(es[1].iprobe(&pat(None, None)), None, "nothing else arrived");
}

#[test]
fn buffered_send_respects_attached_capacity() {
    let mut es = world(2, 1, 100, 200, true);
    let data = pattern_bytes(100, 4);
    assert_eq!(
        es[0].bsend(1, 0, 0, &data).unwrap_err().class,
        ErrorClass::Resource
    );
    es[0].set_bsend_capacity(300, 64);
    let h1 = es[0].bsend(1, 0, 0, &data).unwrap();
    es[0].detach(h1);
    let err = es[0]
        .bsend(1, 0, 0, &data)
        .and_then(|_| es[0].bsend(1, 0, 0, &data))
        .unwrap_err();
    assert!(err.to_string().contains("set_buffer_size"), "{err}");
    let mut out = vec![0u8; 100];
    let r = es[1]
        // SAFETY: the buffer outlives every progress call of this test.
        .irecv(pat(None, None), unsafe { RawBufMut::new(&mut out) })
        .unwrap();
    run_until_done(&mut es, &[(1, r)], 100);
    assert_eq!(out, data);
}

#[test]
fn a_communicators_own_buffer_takes_its_buffered_sends_and_only_those() {
    let mut es = world(2, 1, 100, 200, true);
    let data = pattern_bytes(100, 5);
    assert!(es[0].attach_buffer(Owner::Comm(2), 300));
    assert!(!es[0].attach_buffer(Owner::Comm(2), 300), "attached twice");
    let h1 = es[0].bsend(1, 2, 0, &data).unwrap();
    es[0].detach(h1);
    let err = es[0]
        .bsend(1, 2, 0, &data)
        .and_then(|_| es[0].bsend(1, 2, 0, &data))
        .unwrap_err();
    assert!(err.to_string().contains("communicator's attached buffer"), "{err}");
    // The process has no buffer: context 0 is refused whatever context 2 has.
    let err = es[0].bsend(1, 0, 0, &data).unwrap_err();
    assert!(err.to_string().contains("set_buffer_size"), "{err}");
    let mut out = vec![0u8; 100];
    for _ in 0..2 {
        let r = es[1]
            // SAFETY: the buffer outlives every progress call of this test.
            .irecv(Pattern { context: 2, ..pat(None, None) }, unsafe { RawBufMut::new(&mut out) })
            .unwrap();
        run_until_done(&mut es, &[(1, r)], 100);
        assert_eq!(out, data);
    }
    assert!(es[0].buffer_done(Owner::Comm(2)));
    assert_eq!(es[0].detach_buffer(Owner::Comm(2)), Some(300));
    assert_eq!(es[0].detach_buffer(Owner::Comm(2)), None);
    assert!(es[0].bsend(1, 2, 0, &data).is_err(), "detached: the process's (none) again");
}

#[test]
fn a_sessions_buffer_takes_the_buffered_sends_of_its_communicators_without_their_own() {
    let mut es = world(2, 1, 100, 200, true);
    let data = pattern_bytes(100, 6);
    // Contexts 2 and 4 belong to session 7; context 4 also has a buffer of its own.
    es[0].link_to_session(2, 7);
    es[0].link_to_session(4, 7);
    let err = es[0].bsend(1, 2, 0, &data).unwrap_err();
    assert!(err.to_string().contains("set_buffer_size"), "no session buffer yet: {err}");
    assert!(es[0].attach_buffer(Owner::Session(7), 300));
    assert!(es[0].attach_buffer(Owner::Comm(4), 1000));
    let h = es[0].bsend(1, 2, 0, &data).unwrap();
    es[0].detach(h);
    let err = es[0]
        .bsend(1, 2, 0, &data)
        .and_then(|_| es[0].bsend(1, 2, 0, &data))
        .unwrap_err();
    assert!(err.to_string().contains("session's attached buffer"), "{err}");
    // Context 4's own buffer takes its sends, whatever the session's holds.
    for _ in 0..2 {
        let h = es[0].bsend(1, 4, 0, &data).unwrap();
        es[0].detach(h);
    }
    let mut out = vec![0u8; 100];
    for context in [2, 2, 4, 4] {
        let r = es[1]
            // SAFETY: the buffer outlives every progress call of this test.
            .irecv(Pattern { context, ..pat(None, None) }, unsafe { RawBufMut::new(&mut out) })
            .unwrap();
        run_until_done(&mut es, &[(1, r)], 100);
        assert_eq!(out, data);
    }
    assert!(es[0].buffer_done(Owner::Session(7)));
    assert_eq!(es[0].detach_buffer(Owner::Session(7)), Some(300));
    // A freed communicator leaves its session.
    es[0].forget_comm_buffer(4);
    assert!(es[0].attach_buffer(Owner::Session(7), 1000));
    assert!(es[0].bsend(1, 4, 0, &data).is_err(), "context 4 no longer in session 7");
}

#[test]
fn send_to_self_every_protocol() {
    for len in [0, 50, 150, 1000] {
        let mut es = world(1, 4, 100, 120, true);
        let data = pattern_bytes(len, 9);
        let s = es[0]
            // SAFETY: the buffer outlives every progress call of this test.
            .isend(0, 0, 1, unsafe { RawBuf::new(&data) }, SendMode::Standard)
            .unwrap();
        let mut out = vec![0u8; len];
        let r = es[0]
            // SAFETY: the buffer outlives every progress call of this test.
            .irecv(pat(Some(0), Some(1)), unsafe { RawBufMut::new(&mut out) })
            .unwrap();
        run_until_done(&mut es, &[(0, s), (0, r)], 1000);
        assert_eq!(out, data);
    }
}

#[test]
fn bad_ranks_are_typed_errors() {
    let mut es = world(2, 4, 100, 200, true);
    let e = es[0].send(5, 0, 0, &[1], SendMode::Standard).unwrap_err();
    assert_eq!(e.class, ErrorClass::Rank);
    assert!(
        e.to_string().contains("rank 5") && e.to_string().contains("2 ranks"),
        "{e}"
    );
    let mut b = [0u8; 1];
    assert_eq!(
        es[0]
            // SAFETY: the buffer outlives every progress call of this test.
            .irecv(pat(Some(9), None), unsafe { RawBufMut::new(&mut b) })
            .unwrap_err()
            .class,
        ErrorClass::Rank
    );
}

#[test]
fn split_copy_after_a_first_pull_moves_every_byte() {
    // Rendezvous above 250 bytes; splits from 1000 bytes once a pull has worked.
    let mut es = world(2, 4, 100, 250, true);
    for (i, len) in [5000usize, 5000, 1001, 4096, 70_001]
        .into_iter()
        .enumerate()
    {
        exchange(&mut es, len, i as u8);
    }
    assert!(
        es[0].stats().split_copies >= 3,
        "splits used: {:?}",
        es[0].stats()
    );
    // A truncated receive is never split: the sender must not push past the buffer.
    let data = pattern_bytes(3000, 9);
    let mut small = vec![0u8; 2000];
    let s = es[0]
        // SAFETY: the buffer outlives every progress call of this test.
        .isend(1, 0, 2, unsafe { RawBuf::new(&data) }, SendMode::Standard)
        .unwrap();
    let r = es[1]
        // SAFETY: the buffer outlives every progress call of this test.
        .irecv(pat(Some(0), Some(2)), unsafe { RawBufMut::new(&mut small) })
        .unwrap();
    run_until_done(&mut es, &[(0, s), (1, r)], 1000);
    assert_eq!(es[1].wait(r).unwrap_err().class, ErrorClass::Truncate);
    assert_eq!(small, data[..2000]);
}

#[test]
fn short_circuit_receive_keeps_order_and_reports_truncation() {
    for place in [false, true] {
        short_circuit(place);
    }
}

fn short_circuit(place: bool) {
    let mut es = world_placing(2, 16, 100, 200, true, place);
    // A rendezvous message, then a small one: a wildcard blocking receive must get the
    // rendezvous one first (it spoils the short-circuit and falls back).
    let big = pattern_bytes(500, 1);
    let small = pattern_bytes(10, 2);
    let s1 = es[0]
        // SAFETY: the buffer outlives every progress call of this test.
        .isend(1, 0, 7, unsafe { RawBuf::new(&big) }, SendMode::Standard)
        .unwrap();
    es[0].send(1, 0, 8, &small, SendMode::Standard).unwrap();
    let mut out = vec![0u8; 500];
    let st = es[1].recv(pat(None, None), &mut out).unwrap();
    assert_eq!((st.tag, st.len), (7, 500));
    assert_eq!(out, big);
    let st = es[1].recv(pat(None, None), &mut out).unwrap();
    assert_eq!((st.tag, st.len), (8, 10));
    assert_eq!(out[..10], small[..]);
    run_until_done(&mut es, &[(0, s1)], 100);
    // The short-circuit itself: one eager packet straight into the buffer, no request.
    es[0].send(1, 0, 9, &small, SendMode::Standard).unwrap();
    let before = es[1].live_requests();
    let st = es[1].recv(pat(Some(0), Some(9)), &mut out).unwrap();
    assert_eq!((st.source, st.len), (0, 10));
    assert_eq!(es[1].live_requests(), before);
    // Truncation through the short-circuit is the same typed error.
    es[0].send(1, 0, 3, &small, SendMode::Standard).unwrap();
    let err = es[1].recv(pat(None, None), &mut out[..4]).unwrap_err();
    assert_eq!(err.class, ErrorClass::Truncate);
    assert!(
        err.to_string().contains("10 bytes") && err.to_string().contains("4-byte"),
        "{err}"
    );
}

#[test]
fn self_pull_does_not_enable_split_copies_with_peers_that_refuse_single_copy() {
    // Single copy refused between ranks, but a rank's pull from itself works: a large
    // message to self must not make the engine ask another rank for a split copy.
    let mut es = world(2, 8, 100, 250, false);
    let big = pattern_bytes(5000, 3);
    let mut out = vec![0u8; 5000];
    let s = es[0]
        // SAFETY: the buffer outlives every progress call of this test.
        .isend(0, 0, 1, unsafe { RawBuf::new(&big) }, SendMode::Standard)
        .unwrap();
    let r = es[0]
        // SAFETY: the buffer outlives every progress call of this test.
        .irecv(pat(Some(0), None), unsafe { RawBufMut::new(&mut out) })
        .unwrap();
    run_until_done(&mut es, &[(0, s), (0, r)], 1000);
    assert_eq!(out, big);
    for i in 0..3u8 {
        exchange(&mut es, 5000, 10 + i);
    }
    assert_eq!(es[0].stats().split_copies, 0);
    assert!(
        es[0].stats().pushed_rendezvous > 0,
        "data went by the pipelined fallback"
    );
}

#[test]
fn an_eager_payload_placed_over_two_polls_claims_its_receive_at_the_header() {
    // Rank 0's message is placed half now, half at the next poll; rank 2's arrives in
    // between. Rank 0's came first, so it owns the first wildcard receive (and the
    // short-circuit receive) although rank 2's is complete sooner.
    let mut es = world_placing(3, 8, 100, 200, true, true);
    let (a, b) = (pattern_bytes(40, 1), pattern_bytes(30, 2));
    let (mut out1, mut out2) = (vec![0u8; 50], vec![0u8; 50]);
    let r1 = es[1]
        // SAFETY: the buffer outlives every progress call of this test.
        .irecv(pat(None, None), unsafe { RawBufMut::new(&mut out1) })
        .unwrap();
    let r2 = es[1]
        // SAFETY: the buffer outlives every progress call of this test.
        .irecv(pat(None, None), unsafe { RawBufMut::new(&mut out2) })
        .unwrap();
    es[0].send(1, 0, 1, &a, SendMode::Standard).unwrap();
    es[2].send(1, 0, 2, &b, SendMode::Standard).unwrap();
    run_until_done(&mut es, &[(1, r1), (1, r2)], 100);
    let (st1, st2) = (es[1].wait(r1).unwrap(), es[1].wait(r2).unwrap());
    assert_eq!((st1.source, st1.tag, st1.len), (0, 1, 40));
    assert_eq!((st2.source, st2.tag, st2.len), (2, 2, 30));
    assert_eq!((&out1[..40], &out2[..30]), (&a[..], &b[..]));

    // The same through the short-circuit of a blocking receive.
    es[0].send(1, 0, 3, &a, SendMode::Standard).unwrap();
    es[2].send(1, 0, 4, &b, SendMode::Standard).unwrap();
    let st = es[1].recv(pat(None, None), &mut out1).unwrap();
    assert_eq!((st.source, st.tag, st.len), (0, 3, 40));
    assert_eq!(out1[..40], a[..]);
    let st = es[1].recv(pat(None, None), &mut out2).unwrap();
    assert_eq!((st.source, st.tag, st.len), (2, 4, 30));
    assert_eq!(out2[..30], b[..]);
    assert!(es[1].stats().recv_msgs >= 4);
}

/// Issue 9, item 16: beside a process that never blocks, every yield hands it a whole time
/// slice, and a wait that goes on yielding makes the job crawl (a stencil 60x slower). A wait
/// that sees its yields lose the CPU for a slice must sleep on its futex instead. Here the
/// neighbour is a thread spinning on this thread's CPU and the yield budget is one that would
/// take hours to spend: the wait has to sleep long before the watchdog.
#[test]
fn a_wait_beside_a_busy_neighbour_sleeps_instead_of_yielding_on() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::Instant;
    // SAFETY: sched_getcpu takes no arguments and only reads the calling thread's CPU.
    let cpu = usize::try_from(unsafe { libc::sched_getcpu() }).expect("sched_getcpu");
    crate::sys::pin_to_cpu(cpu).expect("pinning the test thread");
    let stop = Arc::new(AtomicBool::new(false));
    let spinner = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            crate::sys::pin_to_cpu(cpu).expect("pinning the spinner");
            // SYNC: Relaxed is enough: the flag carries no data, only "stop".
            while !stop.load(Ordering::Relaxed) {
                std::hint::spin_loop();
            }
        })
    };
    let mut es = world(2, 4, 64, 64, true);
    es[0].cfg.spin_count = 10;
    es[0].cfg.yield_count = u32::MAX;
    let start = Instant::now();
    let watchdog = Duration::from_secs(5);
    es[0].wait_until(|e| e.core.stats.sleeps > 0 || start.elapsed() > watchdog);
    stop.store(true, Ordering::Relaxed);
    spinner.join().expect("spinner");
    let s = &es[0].core.stats;
    assert!(
        s.sleeps > 0,
        "wait_until beside a thread spinning on CPU {cpu}: {} yields in {:?} and never slept",
        s.yields,
        start.elapsed()
    );
}

// ----- the protocol decisions, on one sans-IO core ------------------------------------------

use super::core::{Core, PeerLimits, PendingPull};
use super::request::{SendOp, SendPhase};
use crate::fabric::PacketKind;

/// A core for rank `rank` of 2, reaching both ranks with the given limits.
fn core(rank: u32, eager_limit: usize, max_payload: usize, split_copy_min: usize) -> Core {
    let l = PeerLimits {
        eager_limit,
        max_payload,
    };
    Core::new(rank, 2, vec![l; 2], split_copy_min)
}

fn send_op(peer: u32, buf: RawBuf, sync: bool) -> SendOp {
    SendOp {
        peer,
        context: 0,
        tag: 3,
        buf,
        sent: 0,
        sync,
        acked: false,
        phase: SendPhase::Queued,
        owned: None,
        bsend_charge: 0,
        push_busy: false,
        fin_seen: false,
    }
}

/// Takes every packet the core wants out to `peer` (the fabric always has room): each
/// packet's header and payload length.
fn transmit_all(c: &mut Core, peer: u32) -> Vec<(Header, usize)> {
    let mut out = Vec::new();
    while let Some(t) = c.poll_transmit(peer) {
        out.push((t.hdr, t.payload.len()));
        c.handle_sent(peer);
        assert!(out.len() < 10_000, "the core never stops transmitting");
    }
    out
}

#[test]
fn eager_up_to_the_limit_and_rendezvous_above_it() {
    let mut c = core(0, 100, 1000, 0);
    // The request-free path: exactly at the limit yes, one byte over no.
    let hdr = c.eager_now(1, 7, 3, 100, 0).expect("100 bytes go eagerly");
    assert_eq!(
        (hdr.kind, hdr.len, hdr.context, hdr.tag),
        (PacketKind::Eager as u8, 100, 7, 3)
    );
    assert!(c.eager_now(1, 7, 3, 101, 0).is_none());
    // Within the eager limit but over one packet: a request streams it.
    let small = core(0, 100, 64, 0);
    assert!(small.eager_now(1, 0, 0, 64, 0).is_some());
    assert!(small.eager_now(1, 0, 0, 65, 0).is_none());

    let at = vec![1u8; 100];
    let over = vec![2u8; 101];
    // SAFETY: both buffers outlive the core's use of them (the end of this test).
    let (at_buf, over_buf) = unsafe { (RawBuf::new(&at), RawBuf::new(&over)) };
    let (h_at, first) = c.start_send(send_op(1, at_buf, false));
    assert!(first);
    // Something queued to the peer: a later message may not overtake it.
    assert!(c.eager_now(1, 0, 0, 1, 0).is_none());
    let pkts = transmit_all(&mut c, 1);
    assert_eq!(pkts.len(), 1);
    assert_eq!((pkts[0].0.kind, pkts[0].1), (PacketKind::Eager as u8, 100));
    assert!(c.is_done(h_at), "an eager send completes once out");

    let (h_over, _) = c.start_send(send_op(1, over_buf, false));
    let pkts = transmit_all(&mut c, 1);
    assert_eq!(pkts.len(), 1, "a rendezvous starts with the RTS alone");
    let (rts, n) = pkts[0];
    assert_eq!((rts.kind, n, rts.len), (PacketKind::Rts as u8, 0, 101));
    assert_eq!(rts.aux, over_buf.addr(), "the RTS names the send buffer");
    assert_eq!(rts.cookie, h_over.to_cookie());
    assert!(!c.is_done(h_over), "a rendezvous send waits for the receiver");
    assert_eq!(c.stats().rendezvous, 1);
    // The receiver pulled it: its FIN completes the send.
    let fin = Header {
        kind: PacketKind::Fin as u8,
        src: 1,
        cookie: h_over.to_cookie(),
        ..Header::default()
    };
    c.on_packet(&fin, &[]);
    assert!(c.is_done(h_over));
}

#[test]
fn packets_are_cut_at_the_max_payload() {
    for (len, sizes) in [
        (0usize, vec![0usize]),
        (1, vec![1]),
        (63, vec![63]),
        (64, vec![64]),
        (65, vec![64, 1]),
        (128, vec![64, 64]),
        (129, vec![64, 64, 1]),
    ] {
        let mut c = core(0, 1000, 64, 0);
        let data = pattern_bytes(len, 1);
        // SAFETY: `data` outlives the core's use of it (this iteration).
        let (h, _) = c.start_send(send_op(1, unsafe { RawBuf::new(&data) }, false));
        let pkts = transmit_all(&mut c, 1);
        let got: Vec<usize> = pkts.iter().map(|p| p.1).collect();
        assert_eq!(got, sizes, "packets of a {len}-byte eager message");
        for (i, (hdr, _)) in pkts.iter().enumerate() {
            let want = if i == 0 {
                PacketKind::Eager
            } else {
                PacketKind::Frag
            };
            assert_eq!(hdr.kind, want as u8, "packet {i} of {len} bytes");
            assert_eq!(hdr.len, len as u64, "every packet carries the message length");
        }
        assert!(c.is_done(h));
    }

    // A synchronous send is out after its last packet but done only at its acknowledgement.
    let mut c = core(0, 1000, 64, 0);
    let data = pattern_bytes(100, 2);
    // SAFETY: `data` outlives the core's use of it (this test).
    let (h, _) = c.start_send(send_op(1, unsafe { RawBuf::new(&data) }, true));
    let pkts = transmit_all(&mut c, 1);
    assert_eq!(pkts.len(), 2);
    assert_eq!(pkts[0].0.flags, crate::fabric::FLAG_SYNC);
    assert_eq!(pkts[1].0.flags, 0);
    assert!(!c.is_done(h));
    let ack = Header {
        kind: PacketKind::SyncAck as u8,
        src: 1,
        cookie: h.to_cookie(),
        ..Header::default()
    };
    c.on_packet(&ack, &[]);
    assert!(c.is_done(h));

    // A rendezvous the receiver cannot pull is pushed as Data packets at their offsets.
    let mut c = core(0, 100, 64, 0);
    let data = pattern_bytes(200, 3);
    // SAFETY: `data` outlives the core's use of it (this test).
    let (h, _) = c.start_send(send_op(1, unsafe { RawBuf::new(&data) }, false));
    assert_eq!(transmit_all(&mut c, 1)[0].0.kind, PacketKind::Rts as u8);
    let cts = Header {
        kind: PacketKind::Cts as u8,
        src: 1,
        cookie: h.to_cookie(),
        aux: 77,
        ..Header::default()
    };
    c.on_packet(&cts, &[]);
    let pkts = transmit_all(&mut c, 1);
    let got: Vec<(u8, u64, usize, u64)> = pkts
        .iter()
        .map(|(hdr, n)| (hdr.kind, hdr.cookie, *n, hdr.aux))
        .collect();
    let d = PacketKind::Data as u8;
    assert_eq!(
        got,
        [(d, 0, 64, 77), (d, 64, 64, 77), (d, 128, 64, 77), (d, 192, 8, 77)]
    );
    assert!(c.is_done(h));
}

/// The Rts of a `len`-byte message from rank 0 (request cookie `cookie`) to rank 1.
fn rts(len: usize, cookie: u64) -> Header {
    Header {
        kind: PacketKind::Rts as u8,
        src: 0,
        tag: 3,
        len: len as u64,
        cookie,
        aux: 0x1000,
        ..Header::default()
    }
}

/// Posts a receive of `buf` on rank-1 core `c`, matches it with an RTS of `len` bytes and
/// returns the pull it waits for.
fn matched_pull(c: &mut Core, buf: &mut [u8], len: usize) -> PendingPull {
    // SAFETY: every caller keeps `buf` alive and untouched until the end of its test, and the
    // tests never run the pull.
    c.start_recv(pat(Some(0), Some(3)), unsafe { RawBufMut::new(buf) }, true);
    c.on_packet(&rts(len, 9), &[]);
    let mut pulls = c.take_pulls();
    assert_eq!(pulls.len(), 1);
    pulls.pop().unwrap()
}

#[test]
fn split_copy_from_its_threshold_once_a_pull_has_worked() {
    let mut c = core(1, 100, 64, 1000);
    let mut bufs = vec![vec![0u8; 4096]; 5];
    let mut bufs = bufs.iter_mut();

    // No pull from rank 0 has worked yet: the whole message is pulled, nothing is shared.
    let p = matched_pull(&mut c, bufs.next().unwrap(), 2000);
    let plan = c.plan_pull(&p).unwrap();
    assert_eq!((plan.own, plan.shared), (2000, false));
    c.handle_pull(&p, plan.own, Ok(()));
    let (to, fin) = c.poll_control().expect("the FIN for the pulled message");
    assert_eq!((to, fin.kind), (0, PacketKind::Fin as u8));
    c.handle_control_sent();
    assert!(c.poll_control().is_none());

    // One byte under the threshold: still a plain pull.
    let p = matched_pull(&mut c, bufs.next().unwrap(), 999);
    let plan = c.plan_pull(&p).unwrap();
    assert_eq!((plan.own, plan.shared), (999, false));
    assert!(c.poll_control().is_none());
    c.handle_pull(&p, plan.own, Ok(()));
    c.handle_control_sent();

    // At the threshold: this rank pulls the first part (a multiple of 64 bytes) and asks
    // the sender to push the rest, at its place in the receive buffer.
    let buf = bufs.next().unwrap();
    let base = buf.as_ptr() as u64;
    let p = matched_pull(&mut c, buf, 1000);
    let plan = c.plan_pull(&p).unwrap();
    assert_eq!((plan.own, plan.shared), (448, true));
    let (to, share) = c.poll_control().expect("the Share packet");
    assert_eq!((to, share.kind), (0, PacketKind::Share as u8));
    assert_eq!(share.len, 1000 - 448);
    assert_eq!(share.aux, base + 448);
    assert_eq!(share.cookie, 9, "the Share names the sender's request");
    assert_eq!(c.stats().split_copies, 1);
    c.handle_control_sent();

    // A message longer than its receive buffer is never split (the push would overrun it).
    let mut short = vec![0u8; 1500];
    let p = matched_pull(&mut c, &mut short, 2000);
    let plan = c.plan_pull(&p).unwrap();
    assert!(!plan.shared);
    assert!(c.poll_control().is_none());
}
