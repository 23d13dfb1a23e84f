//! A single-producer single-consumer byte ring of variable-length records, in shared memory.
//!
//! The design of MP_Lite's header queues and Sun MPI's postboxes with the small-message data
//! inline, made self-describing per record so that the consumer polls one word: the stamp of
//! the record at its head (as in FastForward-style queues and ring buffers that carry a
//! sequence number per slot, e.g. the Disruptor and crossbeam's `ArrayQueue`).
//!
//! Positions are absolute byte counts (u64, never wrap in practice); the offset in the ring
//! is `pos & (size - 1)`. Records start at multiples of [`REC_ALIGN`] (64 bytes, one cache
//! line, so a 0-byte packet is one line):
//!
//! ```text
//! +0   stamp  u64   pos | 1 for a record, pos | 3 for a wrap marker (skip to the ring's start)
//! +8   len    u32   payload bytes
//! +12  zero   u32
//! +16  Header (40 bytes)
//! +56  payload, then padding up to a multiple of 64
//! ```
//!
//! Invariant (what makes the stamp trustworthy without zeroing consumed memory): the stamp
//! word at the consumer's head is always either 0 or the valid stamp for that position. The
//! producer keeps one line of slack and makes sure the stamp word just after each record is
//! zero before publishing the record; the consumer reaches that word only after acquiring
//! the record's stamp, so it cannot see stale bytes (an old payload) there. The stamp still
//! encodes the position, which catches corruption in debug builds. To keep the zeroing off
//! the latency path, the producer zeroes the stamp words of free space a little ahead of its
//! tail ([`ZERO_AHEAD`]) *after* publishing, and only zeroes synchronously when a record
//! would end beyond that window.
//!
//! Producer: `tail` and a cached copy of `head` are private; the shared head is re-read
//! (Acquire) only when the cached view says the ring is full. Consumer: `head` is private and
//! published (Release) after a batch, and every quarter ring during long batches.

use super::layout::{RingHeader, RING_HEADER};
use crate::fabric::{Header, HEADER_SIZE};
use crate::sync::{AtomicU64, Ordering};

/// Alignment and granularity of records.
pub const REC_ALIGN: usize = 64;
/// Bytes before the payload in a record.
pub const REC_OVERHEAD: usize = 16 + HEADER_SIZE;
/// How far ahead of the tail the producer keeps the stamp words of free space zeroed.
pub const ZERO_AHEAD: u64 = 1024;
/// How far ahead of the zeroed words the producer asks for free space's lines in a writable
/// state (`prefetchw`): the consumer's CPU read them a lap ago, and a store to a line it
/// still holds waits for its answer, holding up every later store and any load that must
/// wait for them (a copy of a value just written, say).
pub const PREFETCH_AHEAD: u64 = 2048;
const VALID: u64 = 1;
const WRAP: u64 = 3;

/// Bytes a record with `len` payload bytes occupies.
#[inline]
pub const fn record_size(len: usize) -> usize {
    (REC_OVERHEAD + len).next_multiple_of(REC_ALIGN)
}

/// Largest payload a ring of `ring_size` bytes accepts (records are at most a quarter ring,
/// so a full lap always holds several and a wrap never starves a sender).
pub const fn max_payload(ring_size: usize) -> usize {
    ring_size / 4 - REC_OVERHEAD
}

/// Raw location of one ring. Copyable; the owner of the mapping keeps it alive.
#[derive(Clone, Copy, Debug)]
struct RingRef {
    hdr: *const RingHeader,
    data: *mut u8,
    size: u64,
}

impl RingRef {
    /// # Safety
    /// `base` points to `RING_HEADER + size` bytes of zero-initialised or ring-formatted
    /// memory, 128-aligned, that stays mapped while the ring is used; `size` is a power of
    /// two >= 4096. At most one Producer and one Consumer use it.
    unsafe fn new(base: *mut u8, size: usize) -> RingRef {
        assert!(size.is_power_of_two() && size >= 4096, "ring size {size}");
        debug_assert_eq!(base as usize % 128, 0);
        RingRef {
            hdr: base as *const RingHeader,
            // SAFETY: within the region described by the caller.
            data: unsafe { base.add(RING_HEADER) },
            size: size as u64,
        }
    }

    #[inline]
    fn head(&self) -> &AtomicU64 {
        // SAFETY: hdr points to a live, aligned, zero-valid RingHeader (constructor contract).
        unsafe { &(*self.hdr).head }
    }

    /// The stamp word at ring offset `off` (a multiple of 64 below size).
    #[inline]
    fn stamp(&self, off: u64) -> &AtomicU64 {
        debug_assert!(off < self.size && off.is_multiple_of(REC_ALIGN as u64));
        // SAFETY: off < size, so the word is inside the record space, and 8-aligned because
        // data is 64-aligned and off a multiple of 64. Stamps are only accessed atomically.
        unsafe { &*(self.data.add(off as usize) as *const AtomicU64) }
    }
}

/// The sending end of a ring.
#[derive(Debug)]
pub struct Producer {
    ring: RingRef,
    tail: u64,
    cached_head: u64,
    /// Every stamp word at a line position in [tail, zeroed) reads 0 and was zeroed in free
    /// space (nothing is written there again before the next record).
    zeroed: u64,
    /// The lines of free space before this position were asked for in a writable state.
    prefetched: u64,
}

// SAFETY: the producer is the sole writer of the ring's record space; it may move between
// threads with its owner (the mapping outlives it by the constructor's contract).
unsafe impl Send for Producer {}

impl Producer {
    /// # Safety
    /// As for the ring memory: `base` points to `RING_HEADER + size` bytes, 128-aligned,
    /// zero-filled before first use, mapped while this Producer lives, with no other Producer.
    pub unsafe fn new(base: *mut u8, size: usize) -> Producer {
        Producer {
            // SAFETY: forwarded contract.
            ring: unsafe { RingRef::new(base, size) },
            tail: 0,
            cached_head: 0,
            // Fresh ring memory is all zeros; the first lap is free space.
            zeroed: size as u64,
            prefetched: 0,
        }
    }

    /// Largest payload [`Producer::try_push`] accepts.
    pub fn max_payload(&self) -> usize {
        max_payload(self.ring.size as usize)
    }

    /// Appends one record. Returns `false` (writing nothing) when the ring is full.
    /// Panics if `payload` is longer than [`Producer::max_payload`].
    #[inline]
    pub fn try_push(&mut self, hdr: &Header, payload: &[u8]) -> bool {
        assert!(
            payload.len() <= self.max_payload(),
            "shm packet payload {} > max {}",
            payload.len(),
            self.max_payload()
        );
        let size = self.ring.size;
        let mask = size - 1;
        let n = record_size(payload.len()) as u64;
        let off = self.tail & mask;
        let pad = if off + n > size { size - off } else { 0 };
        // One line of slack beyond the record: the stamp word we zero after it.
        let need = pad + n + REC_ALIGN as u64;
        if size - (self.tail - self.cached_head) < need {
            // SYNC: pairs with the Release store of head in Consumer::drain: the consumer
            // is done reading everything before it, so we may overwrite it.
            self.cached_head = self.ring.head().load(Ordering::Acquire);
            if size - (self.tail - self.cached_head) < need {
                return false;
            }
        }
        let pos = self.tail + pad;
        let roff = pos & mask;
        // Keep the invariant: the word after this record must read 0 (it is free space: the
        // check above reserved it). Usually an earlier push zeroed it already.
        if self.zeroed < pos + n + REC_ALIGN as u64 {
            self.ring
                .stamp((pos + n) & mask)
                .store(0, Ordering::Relaxed);
            self.zeroed = pos + n + REC_ALIGN as u64;
        }
        // SAFETY: [roff, roff + n) lies in the record space (roff + n <= size by the wrap
        // rule) and in the free region [tail, cached_head + size), which the consumer does
        // not read until we publish the stamp; the source buffers are valid for their
        // lengths and cannot overlap the ring's private free space.
        unsafe {
            let rec = self.ring.data.add(roff as usize);
            (rec.add(8) as *mut u32).write(payload.len() as u32);
            (rec.add(12) as *mut u32).write(0);
            (rec.add(16) as *mut Header).write(*hdr);
            crate::sys::copy_bytes(payload.as_ptr(), rec.add(REC_OVERHEAD), payload.len());
        }
        // SYNC: pairs with the Acquire load of the stamp in Consumer::drain: the record's
        // bytes and the zeroed next stamp are visible once the stamp is.
        self.ring.stamp(roff).store(pos | VALID, Ordering::Release);
        if pad != 0 {
            // The marker goes last, so a consumer that follows it finds the record published.
            // SYNC: pairs with the Acquire load of the stamp in Consumer::drain.
            self.ring
                .stamp(off)
                .store(self.tail | WRAP, Ordering::Release);
        }
        self.tail = pos + n;
        // Zero ahead, after publishing, so the stores stay off this packet's latency path.
        let limit = (self.tail + ZERO_AHEAD).min(self.cached_head + size);
        while self.zeroed < limit {
            self.ring
                .stamp(self.zeroed & mask)
                .store(0, Ordering::Relaxed);
            self.zeroed += REC_ALIGN as u64;
        }
        let limit = (self.tail + ZERO_AHEAD + PREFETCH_AHEAD).min(self.cached_head + size);
        self.prefetched = self.prefetched.max(self.tail);
        while self.prefetched < limit {
            crate::sys::cpu::prefetch_write(self.ring.stamp(self.prefetched & mask));
            self.prefetched += REC_ALIGN as u64;
        }
        true
    }
}

/// The receiving end of a ring.
#[derive(Debug)]
pub struct Consumer {
    ring: RingRef,
    head: u64,
}

// SAFETY: as for Producer: the consumer is the sole reader of records and writer of head.
unsafe impl Send for Consumer {}

impl Consumer {
    /// Absolute position read up to.
    #[inline]
    pub fn head(&self) -> u64 {
        self.head
    }

    /// Bytes in the ring.
    #[inline]
    pub fn size(&self) -> u64 {
        self.ring.size
    }

    /// # Safety
    /// As for [`Producer::new`], with no other Consumer.
    pub unsafe fn new(base: *mut u8, size: usize) -> Consumer {
        // SAFETY: forwarded contract.
        let ring = unsafe { RingRef::new(base, size) };
        Consumer {
            head: ring.head().load(Ordering::Relaxed),
            ring,
        }
    }

    /// Whether a record (or wrap marker) is waiting at the head.
    #[inline]
    pub fn ready(&self) -> bool {
        let off = self.head & (self.ring.size - 1);
        self.ring.stamp(off).load(Ordering::Relaxed) != 0
    }

    /// Delivers the available records, in order, at most one ring's worth of bytes (so a
    /// sender that keeps writing cannot hold the caller here). The payload slice borrows the
    /// ring and is valid only during the call. Returns the number of records delivered.
    #[inline]
    pub fn drain<S: FnMut(&Header, &[u8])>(&mut self, sink: &mut S) -> usize {
        let size = self.ring.size;
        let mask = size - 1;
        let start = self.head;
        let mut published = start;
        let mut count = 0;
        while self.head - start < size {
            let off = self.head & mask;
            // SYNC: pairs with the Release stores of stamps in Producer::try_push.
            let s = self.ring.stamp(off).load(Ordering::Acquire);
            if s == self.head | VALID {
                // SAFETY: the stamp was published after the record's bytes (Acquire above),
                // and the producer does not write them again before we publish a head past
                // them. The length is checked before forming the payload slice, so the slice
                // stays inside the record space even if the peer is buggy.
                let (hdr, payload) = unsafe {
                    let rec = self.ring.data.add(off as usize);
                    let len = (rec.add(8) as *const u32).read() as usize;
                    assert!(
                        len <= max_payload(size as usize) && off + record_size(len) as u64 <= size,
                        "corrupt shm record: len {len} at offset {off}"
                    );
                    let hdr = (rec.add(16) as *const Header).read();
                    let p = std::slice::from_raw_parts(rec.add(REC_OVERHEAD), len);
                    (hdr, p)
                };
                sink(&hdr, payload);
                self.head += record_size(payload.len()) as u64;
                count += 1;
            } else if s == self.head | WRAP {
                self.head += size - off;
            } else {
                debug_assert_eq!(s, 0, "stale or corrupt stamp at head {}", self.head);
                break;
            }
            if self.head - published >= size / 4 {
                // SYNC: pairs with the Acquire load of head in Producer::try_push.
                self.ring.head().store(self.head, Ordering::Release);
                published = self.head;
            }
        }
        if self.head != published {
            // SYNC: pairs with the Acquire load of head in Producer::try_push.
            self.ring.head().store(self.head, Ordering::Release);
        }
        count
    }
}
