//! What one rank's segment holds, and where. Everything is `repr(C)`, holds offsets rather
//! than pointers, and is zero-valid (a fresh segment reads as zeros).
//!
//! ```text
//! offset 0       Control
//!   0              info: magic, pid, nlocal, ring geometry,    (immutable after init)
//!                  wake-up descriptor and how many peers hold it (counted during init)
//!   128            doorbell.seq: futex word                    (written by senders)
//!   256            doorbell.sleeping                           (written by the owner)
//!   384            active: [AtomicU64; ceil(nlocal/64)]        (senders fetch_or their bit)
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

/// "weftshm2": set last by the owner once `Info` is written.
pub const MAGIC: u64 = u64::from_le_bytes(*b"weftshm2");

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
}

/// The head of a segment.
#[repr(C)]
#[derive(Debug)]
pub struct Control {
    /// Offset 0.
    pub info: CachePadded<Info>,
    /// Offsets 128 and 256.
    pub bell: Doorbell,
}

/// Offset of the active-senders bitmap.
pub const ACTIVE_OFFSET: usize = 384;
/// Bytes before a ring's record space (head line, producer line).
pub const RING_HEADER: usize = 256;

#[cfg(not(loom))]
const _: () = {
    assert!(std::mem::size_of::<Control>() == ACTIVE_OFFSET);
    assert!(std::mem::offset_of!(Control, bell) == 128);
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
