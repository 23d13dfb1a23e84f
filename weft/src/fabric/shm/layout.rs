//! What one rank's segment holds, and where. Everything is `repr(C)`, holds offsets rather
//! than pointers, and is zero-valid (a fresh segment reads as zeros).
//!
//! ```text
//! offset 0       Control
//!   0              info: magic, pid, nlocal, ring geometry,    (immutable after init)
//!                  wake-up descriptor and how many peers hold it (counted during init),
//!                  whether the owner registered for heavy barriers
//!   128            doorbell.seq: futex word                    (written by senders)
//!   256            doorbell.sleeping                           (written by the owner)
//!   384            activity: whether the owner waits, its CPU  (written by the owner)
//!   512            probe: the start-up probe of the cores      (written by the owner)
//!   640            active: [AtomicU64; ceil(nlocal/64)]        (senders fetch_or their bit)
//! rings_offset   ring 0 .. ring nlocal-1, `ring_stride` bytes apart: the owner's outgoing
//!                ring to each local index (its own index is never touched). Each ring:
//!   +0             head (consumer-owned line)
//!   +128           producer-owned line (reserved)
//!   +256           ring_size bytes of records (see `ring.rs`)
//! ```
//!
//! Every page is reserved when the segment is created (a ring nobody sends on costs its
//! size too), so a full /dev/shm fails at start-up instead of at a first touch.

use super::doorbell::Doorbell;
use crate::sync::{AtomicU32, AtomicU64, CachePadded, Ordering};

/// "weftshm5": set last by the owner once `Info` is written.
pub const MAGIC: u64 = u64::from_le_bytes(*b"weftshm5");

/// Immutable facts about a segment, written by its owner before it publishes the name.
#[repr(C)]
#[derive(Debug)]
pub struct Info {
    /// [`MAGIC`] once the rest is valid.
    pub magic: AtomicU64,
    /// Owner's process id (for single-copy reads).
    pub pid: u32,
    /// Number of ranks on the node (rings in this segment).
    pub nlocal: u32,
    /// Bytes of record space per ring (a power of two).
    pub ring_size: u64,
    /// Distance between consecutive rings.
    pub ring_stride: u64,
    /// Offset of ring 0 from the segment base.
    pub rings_offset: u64,
    /// The owner's wake-up eventfd (in its own descriptor table), or -1 when it never sleeps
    /// in `poll(2)` (no sockets to watch).
    pub wake_fd: i32,
    /// How many local peers took a duplicate of `wake_fd` (each adds one during start-up).
    pub wakers: AtomicU32,
    /// 1 when the owner registered for heavy barriers (`sys::membarrier::register`): the
    /// node's ranks use [`super::doorbell::Fences::Asymmetric`] when all did.
    pub registered: u32,
}

/// The head of a segment.
#[repr(C)]
#[derive(Debug)]
pub struct Control {
    /// Offset 0.
    pub info: CachePadded<Info>,
    /// Offsets 128 and 256.
    pub bell: Doorbell,
    /// Offset 384: an [`Activity`] word, advisory (read by the node's other ranks' wait
    /// policy, never for correctness).
    pub activity: CachePadded<AtomicU64>,
    /// Offset 512: the start-up probe of the node's cores (`super::probe`): written by the
    /// owner alone, read by the other end of the probe.
    pub probe: CachePadded<AtomicU64>,
}

/// What a rank's activity word says: whether it has given up its CPU (in a yield or a sleep),
/// the CPU it ran on when it last said so, and its latest stretch of holding a CPU (or
/// wanting one): from when it came back from a yield or a sleep, and, once it gave the CPU
/// up again, for how long.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Activity {
    /// In a yield or a sleep.
    pub waiting: bool,
    /// The CPU it ran on at its last change (`None`: unknown; CPUs up to 4,094).
    pub cpu: Option<u32>,
    /// When its latest stretch began: µs of `CLOCK_MONOTONIC` (one clock for the node),
    /// modulo 2^32.
    pub since_us: u32,
    /// How long that stretch lasted, µs (up to 524,287), once it is waiting again.
    pub len_us: u32,
}

impl Activity {
    const CPU_BITS: u32 = 12;
    const LEN_BITS: u32 = 19;
    const LEN_MAX: u32 = (1 << Self::LEN_BITS) - 1;

    /// The word's encoding: CPU + 1 (0: unknown) in bits 0-11, the flag in bit 12, the
    /// stretch's length in bits 13-31, its start in bits 32-63.
    pub fn encode(self) -> u64 {
        let cpu = self
            .cpu
            .map(|c| c + 1)
            .filter(|&c| c < 1 << Self::CPU_BITS)
            .map_or(0, u64::from);
        let waiting = u64::from(self.waiting) << Self::CPU_BITS;
        let len = u64::from(self.len_us.min(Self::LEN_MAX)) << (Self::CPU_BITS + 1);
        cpu | waiting | len | u64::from(self.since_us) << 32
    }

    /// The inverse of [`Activity::encode`].
    pub fn decode(word: u64) -> Activity {
        let cpu = (word & ((1 << Self::CPU_BITS) - 1)) as u32;
        Activity {
            waiting: word >> Self::CPU_BITS & 1 != 0,
            cpu: cpu.checked_sub(1),
            len_us: (word >> (Self::CPU_BITS + 1)) as u32 & Self::LEN_MAX,
            since_us: (word >> 32) as u32,
        }
    }

    /// How many µs of the span from `from_us` to `to_us` this rank's latest stretch on CPU
    /// `here` covers (0 on another CPU).
    pub fn overlap_on(self, here: u32, from_us: u32, to_us: u32) -> u32 {
        if self.cpu != Some(here) {
            return 0;
        }
        // Positions relative to `from_us`, wrapping (the span is far shorter than 2^31 µs).
        let span = to_us.wrapping_sub(from_us) as i64;
        let start = self.since_us.wrapping_sub(from_us) as i32 as i64;
        let end = if self.waiting {
            start + i64::from(self.len_us)
        } else {
            span
        };
        (end.min(span) - start.max(0)).clamp(0, span) as u32
    }
}

/// Offset of the active-senders bitmap.
pub const ACTIVE_OFFSET: usize = 640;
/// Bytes before a ring's record space (head line, producer line).
pub const RING_HEADER: usize = 256;

#[cfg(not(loom))]
const _: () = {
    assert!(std::mem::size_of::<Control>() == ACTIVE_OFFSET);
    assert!(std::mem::offset_of!(Control, bell) == 128);
    assert!(std::mem::offset_of!(Control, activity) == 384);
    assert!(std::mem::offset_of!(Control, probe) == 512);
    assert!(std::mem::size_of::<RingHeader>() == RING_HEADER);
};

/// The shared words of one ring.
#[repr(C)]
#[derive(Debug)]
pub struct RingHeader {
    /// Absolute byte position the consumer has read up to (written by the consumer only).
    pub head: CachePadded<AtomicU64>,
    /// Producer-owned line, reserved (keeps the head line's neighbour free of producer writes).
    pub producer: CachePadded<AtomicU64>,
}

/// Where things are in a segment for `nlocal` ranks and rings of `ring_size` bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    /// Ranks on the node.
    pub nlocal: usize,
    /// Record bytes per ring.
    pub ring_size: usize,
    /// Offset of ring 0.
    pub rings_offset: usize,
    /// Distance between rings.
    pub ring_stride: usize,
    /// Whole segment size.
    pub total: usize,
}

impl Geometry {
    /// Computes the layout. `ring_size` must be a power of two of at least 4 KiB.
    pub const fn new(nlocal: usize, ring_size: usize) -> Geometry {
        let words = nlocal.div_ceil(64);
        let rings_offset = (ACTIVE_OFFSET + 8 * words).next_multiple_of(4096);
        let ring_stride = RING_HEADER + ring_size;
        Geometry {
            nlocal,
            ring_size,
            rings_offset,
            ring_stride,
            total: rings_offset + nlocal * ring_stride,
        }
    }

    /// Number of words in the active bitmap.
    pub const fn active_words(&self) -> usize {
        self.nlocal.div_ceil(64)
    }
}

/// A view of a mapped segment: typed accessors over its base address.
#[derive(Clone, Copy, Debug)]
pub struct SegView {
    base: *mut u8,
    geo: Geometry,
}

impl SegView {
    /// # Safety
    /// `base` is the base of a live mapping of at least `geo.total` bytes, page-aligned, that
    /// stays mapped while this view (or anything derived from it) is used.
    pub unsafe fn new(base: *mut u8, geo: Geometry) -> SegView {
        SegView { base, geo }
    }

    /// The layout.
    pub fn geometry(&self) -> Geometry {
        self.geo
    }

    /// The control block.
    pub fn control(&self) -> &Control {
        // SAFETY: offset 0 of a page-aligned mapping of at least ACTIVE_OFFSET bytes (by the
        // constructor's contract); Control is zero-valid and only holds atomics and fields
        // that are immutable after init.
        unsafe { &*(self.base as *const Control) }
    }

    /// Word `i` of the active-senders bitmap.
    pub fn active(&self, i: usize) -> &AtomicU64 {
        assert!(i < self.geo.active_words());
        // SAFETY: inside the bitmap (checked above), 8-aligned, zero-valid atomic.
        unsafe { &*(self.base.add(ACTIVE_OFFSET + 8 * i) as *const AtomicU64) }
    }

    /// Base address of ring `k` (its header; records start RING_HEADER bytes later).
    pub fn ring_base(&self, k: usize) -> *mut u8 {
        assert!(k < self.geo.nlocal);
        // SAFETY: inside the mapping: rings_offset + k * stride + stride <= total.
        unsafe {
            self.base
                .add(self.geo.rings_offset + k * self.geo.ring_stride)
        }
    }

    /// Marks `bit` (a sender's local index) in the active bitmap.
    pub fn mark_active(&self, bit: usize) {
        // Relaxed: the receiver learns the bit at its next poll; a sleeping receiver learns it
        // through the doorbell handshake, whose SeqCst fences order this store too.
        self.active(bit / 64)
            .fetch_or(1 << (bit % 64), Ordering::Relaxed);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::Activity;

    #[test]
    fn an_activity_word_round_trips() {
        for a in [
            Activity::default(),
            Activity {
                waiting: true,
                cpu: Some(0),
                since_us: u32::MAX,
                len_us: 524_287,
            },
            Activity {
                waiting: false,
                cpu: Some(4094),
                since_us: 7,
                len_us: 0,
            },
        ] {
            assert_eq!(Activity::decode(a.encode()), a);
        }
        // Out of range: a CPU it cannot name is unknown; a longer stretch saturates.
        let big = Activity {
            cpu: Some(5000),
            len_us: 1 << 30,
            ..Activity::default()
        };
        let back = Activity::decode(big.encode());
        assert_eq!((back.cpu, back.len_us), (None, 524_287));
    }

    #[test]
    fn a_siblings_time_on_this_cpu_during_a_span_is_its_stretchs_overlap() {
        let at = |waiting, since_us, len_us| Activity {
            waiting,
            cpu: Some(1),
            since_us,
            len_us,
        };
        // Running since before the span: all of it; since its middle: the rest.
        assert_eq!(at(false, 50, 0).overlap_on(1, 100, 400), 300);
        assert_eq!(at(false, 250, 0).overlap_on(1, 100, 400), 150);
        // A finished stretch: the part inside the span.
        assert_eq!(at(true, 50, 100).overlap_on(1, 100, 400), 50);
        assert_eq!(at(true, 200, 100).overlap_on(1, 100, 400), 100);
        assert_eq!(at(true, 350, 100).overlap_on(1, 100, 400), 50);
        assert_eq!(at(true, 10, 20).overlap_on(1, 100, 400), 0, "before the span");
        // Another CPU counts for nothing; the clock may wrap inside the span.
        assert_eq!(at(false, 50, 0).overlap_on(0, 100, 400), 0);
        let from = u32::MAX - 99;
        assert_eq!(at(false, u32::MAX - 49, 0).overlap_on(1, from, 200), 250);
    }
}
