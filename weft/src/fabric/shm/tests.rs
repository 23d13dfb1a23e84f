//! Unit tests of the ring (on heap memory) and of the doorbell with real futexes and with a
//! real wake-up eventfd.

use super::doorbell::{self, Doorbell, Fences, Futex};
use super::layout::RING_HEADER;
use super::ring::{self, Consumer, Producer, REC_ALIGN};
use super::WakePeer;
use crate::fabric::Header;
use crate::sys::net::{self, POLLIN};
use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Zeroed, page-aligned memory standing in for a ring inside a segment.
struct Mem {
    ptr: *mut u8,
    layout: Layout,
}
// SAFETY: plain owned memory.
unsafe impl Send for Mem {}
// SAFETY: shared use goes through the ring's atomics, as in a segment.
unsafe impl Sync for Mem {}

impl Mem {
    fn ring(size: usize) -> Arc<Mem> {
        let layout = Layout::from_size_align(RING_HEADER + size, 4096).unwrap();
        // SAFETY: non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        assert!(!ptr.is_null());
        Arc::new(Mem { ptr, layout })
    }
    fn pair(self: &Arc<Mem>, size: usize) -> (Producer, Consumer) {
        // SAFETY: the memory is RING_HEADER + size zeroed bytes, 4096-aligned; the tests keep
        // the Arc alive as long as the ends; one producer and one consumer.
        unsafe { (Producer::new(self.ptr, size), Consumer::new(self.ptr, size)) }
    }
}
impl Drop for Mem {
    fn drop(&mut self) {
        // SAFETY: allocated above with this layout.
        unsafe { dealloc(self.ptr, self.layout) }
    }
}

fn hdr(seq: u64, len: usize) -> Header {
    Header {
        kind: 1,
        src: 7,
        tag: seq as i32,
        len: len as u64,
        cookie: seq,
        aux: !seq,
        ..Header::default()
    }
}

fn payload(seq: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (seq as usize * 31 + i * 7) as u8)
        .collect()
}

/// Collects delivered packets, checking content and sequence.
fn check_sink(next: &mut u64) -> impl FnMut(&Header, &[u8]) + '_ {
    move |h: &Header, p: &[u8]| {
        assert_eq!(h.cookie, *next, "out of order");
        assert_eq!(h.aux, !*next);
        assert_eq!(h.len as usize, p.len());
        assert_eq!(p, &payload(*next, p.len())[..], "payload of {}", *next);
        *next += 1;
    }
}

#[test]
fn record_sizes() {
    assert_eq!(ring::record_size(0), 64);
    assert_eq!(ring::record_size(8), 64);
    assert_eq!(ring::record_size(9), 128);
    assert_eq!(ring::record_size(64), 128);
    assert_eq!(ring::max_payload(4096), 1024 - 56);
    assert_eq!(ring::record_size(ring::max_payload(4096)), 1024);
}

#[test]
fn zero_and_small_records_round_trip() {
    let m = Mem::ring(4096);
    let (mut p, mut c) = m.pair(4096);
    let mut next = 0;
    assert_eq!(c.drain(&mut check_sink(&mut next)), 0);
    for (i, len) in [0usize, 1, 7, 8, 9, 63, 64, 100].into_iter().enumerate() {
        assert!(p.try_push(&hdr(i as u64, len), &payload(i as u64, len)));
    }
    assert_eq!(c.drain(&mut check_sink(&mut next)), 8);
    assert_eq!(next, 8);
    assert_eq!(c.drain(&mut check_sink(&mut next)), 0);
}

#[test]
fn full_ring_refuses_then_recovers() {
    let size = 4096;
    let m = Mem::ring(size);
    let (mut p, mut c) = m.pair(size);
    let mut sent = 0u64;
    while p.try_push(&hdr(sent, 0), &[]) {
        sent += 1;
    }
    // One line of slack: size/64 - 1 records of one line fit.
    assert_eq!(sent as usize, size / REC_ALIGN - 1);
    assert!(!p.try_push(&hdr(sent, 0), &[]), "still full");
    let mut next = 0;
    assert_eq!(c.drain(&mut check_sink(&mut next)) as u64, sent);
    for _ in 0..10 {
        assert!(p.try_push(&hdr(sent, 0), &[]));
        sent += 1;
    }
    assert_eq!(c.drain(&mut check_sink(&mut next)), 10);
    assert_eq!(next, sent);
}

#[test]
fn odd_sizes_wrap_for_many_laps() {
    let size = 4096;
    let m = Mem::ring(size);
    let (mut p, mut c) = m.pair(size);
    let max = p.max_payload();
    let mut seq = 0u64;
    let mut next = 0u64;
    let mut x = 12345u64;
    // Interleave bursts of pushes with drains; lengths from a small LCG, incl. 0 and max.
    for round in 0..5000 {
        let burst = 1 + round % 7;
        for _ in 0..burst {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let len = match x >> 60 {
                0 => 0,
                1 => max,
                _ => (x >> 33) as usize % (max + 1),
            };
            if !p.try_push(&hdr(seq, len), &payload(seq, len)) {
                break;
            }
            seq += 1;
        }
        c.drain(&mut check_sink(&mut next));
        assert_eq!(next, seq);
    }
    assert!(seq > 10_000, "{seq} records");
}

#[test]
fn payload_that_looks_like_a_stamp_is_never_mistaken() {
    // Phase 1 of each round fills the ring with big records whose payload holds, at every
    // line start, exactly the stamp a consumer would expect there one lap later. Phase 2
    // then sends 0-byte records one at a time, so the consumer's head stops on each of
    // those lines while it still holds the forged payload of the previous lap.
    let size = 4096u64;
    let m = Mem::ring(size as usize);
    let (mut p, mut c) = m.pair(size as usize);
    let max = p.max_payload();
    let mut tail = 0u64; // the producer's position, tracked by the test
    let mut seq = 0u64;
    let mut next = 0u64;
    for _round in 0..40 {
        for _ in 0..3 {
            let n = ring::record_size(max) as u64;
            if tail % size + n > size {
                tail += size - tail % size;
            }
            let mut forged = payload(seq, max);
            for j in (1..max / 8).step_by(8) {
                let line = tail + ring::REC_OVERHEAD as u64 + 8 * j as u64;
                debug_assert_eq!(line % 64, 0);
                forged[8 * j..8 * j + 8].copy_from_slice(&((line + size) | 1).to_le_bytes());
            }
            let mut h = hdr(seq, max);
            h.len = max as u64;
            assert!(p.try_push(&h, &forged));
            seq += 1;
            tail += n;
            let mut got = 0;
            c.drain(&mut |h: &Header, _p: &[u8]| {
                assert_eq!(h.cookie, next);
                next += 1;
                got += 1;
            });
            assert_eq!(got, 1);
        }
        for _ in 0..(size / 64) {
            assert!(p.try_push(&hdr(seq, 0), &[]));
            seq += 1;
            tail += 64;
            assert_eq!(c.drain(&mut check_sink(&mut next)), 1, "phantom record");
        }
    }
    assert_eq!(next, seq);
}

#[test]
fn one_drain_takes_at_most_one_lap() {
    let size = 4096;
    let m = Mem::ring(size);
    let (mut p, mut c) = m.pair(size);
    let mut n = 0;
    while p.try_push(&hdr(n, 0), &[]) {
        n += 1;
    }
    let mut next = 0;
    let got = c.drain(&mut check_sink(&mut next));
    assert_eq!(got as u64, n);
    assert!(got <= size / REC_ALIGN);
}

#[test]
fn threaded_stress_keeps_order_and_content() {
    let size = 8192;
    let m = Mem::ring(size);
    let (mut p, mut c) = m.pair(size);
    let total = 200_000u64;
    let max = p.max_payload();
    let prod = std::thread::spawn(move || {
        let mut seq = 0;
        while seq < total {
            let len = (seq as usize * 37) % (max + 1);
            let len = if seq % 3 == 0 { len % 64 } else { len };
            let data = payload(seq, len);
            while !p.try_push(&hdr(seq, len), &data) {
                std::thread::yield_now();
            }
            seq += 1;
        }
    });
    let mut next = 0;
    let start = Instant::now();
    while next < total {
        if c.drain(&mut check_sink(&mut next)) == 0 {
            std::thread::yield_now();
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "watchdog: stuck at {next}"
        );
    }
    prod.join().unwrap();
    drop(m);
}

/// The doorbell with real futexes: the receiver sleeps whenever its ring is empty; the
/// sender sometimes pauses so the receiver really sleeps. A lost wake-up would show as a
/// sleep that lasts the whole (long) timeout: the watchdog fails the test then.
#[test]
fn doorbell_stress_with_futexes() {
    doorbell_stress(false, Fences::Symmetric);
}

/// The same with the receiver asleep in poll(2) on its wake-up eventfd, which the sender
/// signals through a duplicate taken with pidfd_getfd, as a rank with sockets too sleeps.
#[test]
fn doorbell_stress_with_a_wake_up_descriptor() {
    doorbell_stress(true, Fences::Symmetric);
}

/// Both, with the sender's fence left to the sleeper's heavy barrier (membarrier).
#[test]
fn doorbell_stress_with_asymmetric_fences() {
    if let Err(e) = crate::sys::membarrier::register() {
        eprintln!("membarrier unavailable here ({e}): nothing to test");
        return;
    }
    doorbell_stress(false, Fences::Asymmetric);
    doorbell_stress(true, Fences::Asymmetric);
}

fn doorbell_stress(in_poll: bool, fences: Fences) {
    let size = 4096;
    let m = Mem::ring(size);
    let (mut p, mut c) = m.pair(size);
    let bell = Arc::new(Doorbell::default());
    let done = Arc::new(AtomicBool::new(false));
    let total = 20_000u64;
    let own = crate::sys::wake::eventfd().unwrap();
    let dup = crate::sys::wake::take_from(crate::sys::pid(), own.as_raw_fd()).unwrap();
    let (b2, d2) = (bell.clone(), done.clone());
    let prod = std::thread::spawn(move || {
        for seq in 0..total {
            while !p.try_push(&hdr(seq, 8), &payload(seq, 8)) {
                std::thread::yield_now();
            }
            b2.ring(&WakePeer(Some(&dup)), fences);
            if seq % 64 == 0 {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
        d2.store(true, Ordering::Release);
    });
    let mut next = 0;
    let mut sleeps = 0;
    while next < total {
        if c.drain(&mut check_sink(&mut next)) > 0 {
            continue;
        }
        let how = if in_poll {
            doorbell::IN_POLL
        } else {
            doorbell::ON_FUTEX
        };
        let t = bell.prepare(how, fences);
        if c.ready() {
            bell.cancel();
            continue;
        }
        let slept = Instant::now();
        if in_poll {
            let mut fds = [net::poll_entry(own.as_raw_fd(), POLLIN)];
            net::poll(&mut fds, Duration::from_secs(20)).unwrap();
            crate::sys::wake::drain(&own);
            bell.cancel();
        } else {
            bell.sleep(t, &Futex, Some(Duration::from_secs(20)));
        }
        sleeps += 1;
        assert!(
            slept.elapsed() < Duration::from_secs(15),
            "lost wake-up: slept the whole timeout at record {next}"
        );
    }
    prod.join().unwrap();
    assert!(done.load(Ordering::Acquire));
    assert!(
        sleeps > 0,
        "the receiver never slept; the test did not test"
    );
}
