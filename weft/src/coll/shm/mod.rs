//! Shared-memory collectives for a communicator whose members are all on one node: every
//! member writes its data once into its own part of a node-shared area and the others read
//! it there, in place.
//!
//! # The area
//!
//! Per member: a progress line (its `ready` counter), `DEPTH` slots of `SLOT_BYTES` (each:
//! the number of the collective whose data it holds and the data's size in its first line,
//! then up to `INLINE` bytes of data, starting in that same line), then two large buffers of
//! `slot` bytes (or more: `piece`), over which a ring places data larger than a slot line
//! one after another ([`LargeRing`]). Each member writes only its own lines and buffers; the
//! others only read them. No line is written by two members.
//!
//! # The protocol
//!
//! The members number their collectives on the area 1, 2, …, in the order MPI makes them
//! call them. In collective k a member that has data writes it into slot `k % DEPTH`
//! (or, when larger, where the ring over its large buffers places it, with its size and
//! place in that slot; from
//! `STREAM_FROM` bytes by non-temporal stores, fenced, so that readers take the data from
//! memory rather than line by line from the writer's cache, unless the members found
//! ordinary stores cheaper when they made the area: `NodeArea::calibrate_stores`), stores the
//! slot's number `k` (Release), then its progress `ready = k` (Release), and rings every other
//! member's doorbell (the same Dekker handshake as a packet's delivery, so a member asleep on
//! its futex is never missed; one fence serves all the doorbells); a member without data only
//! stores `ready = k` and rings.
//! Readers wait for the slots they need to say `k` (Acquire) and read in place. Before
//! writing a slot again a member waits until every member has `ready ≥ k − DEPTH + 1`
//! (has finished k − DEPTH, the last collective that used the line), and before writing
//! large data until every member has finished the collectives whose data lay where it goes
//! (at most k − 2's, so never one a member may still be waiting in): a root broadcasting
//! small data runs up to `DEPTH − 1` collectives ahead of its slowest reader, one
//! broadcasting 4 KiB as many as its ring holds (2 ranks, Intel VM: 4 KiB broadcast 0.43 µs
//! against 0.93 one collective ahead), and in steady state nobody waits.
//!
//! Results are computed the same way everywhere: a reduction folds the members' data in rank
//! order (member 0's on the left), so every member gets bit-identical results and
//! operations that are not commutative work.

use super::large_ring::LargeRing;
use stores::{PROBE_EVERY, PROBE_FROM, STREAM_FROM};
use crate::comm::node_memory::NodeSegment;
use crate::engine::schedule::Combine;
use crate::engine::Engine;
use crate::fabric::{Fabric, PullError};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

mod single_copy;
pub use single_copy::{allgather_by_copies_fits, REDUCE_SCATTER_COPIES_FROM};
mod stores;

/// Small-data slots per member: a member may run this many collectives less one ahead of the
/// slowest reader of its small data (a root broadcasting in a loop does not wait for every
/// reader every time; oversubscribed, the readers catch up in batches when they get a CPU).
const DEPTH: usize = 64;
/// Bytes of one slot: its first line holds the sequence number, the size and the start of
/// the data (data of up to 48 bytes travels in the same line as its flag), the next lines
/// the rest. Small collectives (up to `INLINE` bytes a member writes) use the slots, so a
/// member runs up to `DEPTH - 1` of them ahead of its slowest reader; larger ones the ring
/// over the two large buffers, as far ahead as it holds them.
pub(super) const SLOT_BYTES: usize = 1088;
/// Bytes of a member's header: its progress line, then `DEPTH` slots, rounded up to a
/// multiple of 128 (so that the next member's progress line is not the adjacent-line
/// prefetcher's pair of one of these).
const HEADER: usize = (64 + DEPTH * SLOT_BYTES).div_ceil(128) * 128;
/// Inline payload bytes per slot (after its sequence number and size).
pub const INLINE: usize = SLOT_BYTES - 16;
/// Allreduces of at least this many bytes in all (a member's data times the members), on 3
/// members or more, go by slices (each member folds a slice of everyone's data, then every
/// member copies the slices); the rest by every reader folding everything, in one collective
/// of the area instead of two. Measured on 2 CPUs (`bench/ab.py`, CPUs together, µs, all
/// members folding → slices): 8 members 16 KiB 31.9 → 27.5, 64 KiB 90 → 57, but 4 KiB 13.9
/// → 19.2; 4 members 64 KiB 33.9 → 29.0, but 16 KiB 10.9 → 11.9; 2 members 64 KiB 13.3 →
/// 14.6 and at most 5% better below. A reduce to one root stays with the root folding
/// everything: its other members need not wait for each other then (4 KiB at 2 members 0.48
/// against 0.77 µs by slices).
pub const SLICED_FROM: usize = 128 << 10;

/// Members called a collective with different sizes (seen by a member that reads another's
/// data): `member` wrote `theirs` bytes where this one expected `mine`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SizeMismatch {
    /// The member whose size differs (member rank).
    pub member: usize,
    /// The bytes it wrote (or would have expected).
    pub theirs: usize,
    /// The bytes this member expected.
    pub mine: usize,
}

/// Why a collective of the area failed at this member.
#[derive(Debug)]
pub enum AreaError {
    /// The members called it with different sizes.
    Sizes(SizeMismatch),
    /// A copy from another member's memory failed.
    Copy(crate::Error),
}

impl From<SizeMismatch> for AreaError {
    fn from(m: SizeMismatch) -> Self {
        AreaError::Sizes(m)
    }
}

/// How a member waits for the others and wakes them: the progress engine in production
/// (other traffic progresses meanwhile, and the wait policy spins, yields, then sleeps),
/// threads in tests.
pub trait Waiter {
    /// Returns once `ready()` holds.
    fn wait_until(&mut self, ready: &mut dyn FnMut() -> bool);
    /// Wakes the members with world ranks `world` (this one may be among them) that sleep.
    fn wake_all(&mut self, world: &[u32]);
    /// Copies `dst.len()` bytes from address `remote` in the memory of the member with world
    /// rank `peer`, in one copy (`process_vm_readv`).
    ///
    /// # Safety
    /// As for [`Fabric::pull`]: `peer` lent that buffer for this copy.
    unsafe fn pull(&mut self, peer: u32, remote: u64, dst: &mut [u8]) -> Result<(), PullError>;
    /// Copies `src` to address `remote` in the memory of the member with world rank `peer`,
    /// in one copy (`process_vm_writev`).
    ///
    /// # Safety
    /// As for [`Fabric::push`]: `peer` lent that buffer for this copy, and nothing else reads
    /// or writes it meanwhile.
    unsafe fn push(&mut self, peer: u32, remote: u64, src: &[u8]) -> Result<(), PullError>;
}

impl<F: Fabric> Waiter for Engine<F> {
    fn wait_until(&mut self, ready: &mut dyn FnMut() -> bool) {
        Engine::wait_until(self, |_| ready());
    }
    fn wake_all(&mut self, world: &[u32]) {
        Engine::wake_all(self, world);
    }
    unsafe fn pull(&mut self, peer: u32, remote: u64, dst: &mut [u8]) -> Result<(), PullError> {
        // SAFETY: the caller's promise.
        unsafe { self.fabric.pull(peer, remote, dst) }
    }
    unsafe fn push(&mut self, peer: u32, remote: u64, src: &[u8]) -> Result<(), PullError> {
        // SAFETY: the caller's promise.
        unsafe { self.fabric.push(peer, remote, src) }
    }
}

/// Where the area's memory comes from.
enum Memory {
    Segment(#[allow(dead_code)] NodeSegment),
    #[cfg(test)]
    Test(#[allow(dead_code)] std::sync::Arc<Vec<AtomicU64>>),
}

/// The members of `world` other than member `me`.
fn others_of(world: &[u32], me: usize) -> Vec<u32> {
    world.iter().enumerate().filter(|&(j, _)| j != me).map(|(_, &r)| r).collect()
}

/// One member's view of a communicator's node-shared area.
pub struct NodeArea {
    base: *mut u8,
    _memory: Memory,
    /// Members.
    n: usize,
    /// World ranks of the other members, in member order: the ones a publish wakes.
    others: Vec<u32>,
    me: usize,
    /// Bytes of each large buffer (`piece` rounded up to whole lines).
    buffer: usize,
    /// The slot the members agreed on: the most one member may write in a call that is not
    /// cut in pieces (`Tunables::coll_slot`).
    slot: usize,
    /// The most one member writes in one collective of the area (`Tunables::coll_piece`: the
    /// slot, or more at 2 members): the size of a call's pieces.
    piece: usize,
    /// Collectives run on the area so far.
    seq: u64,
    /// Where my data larger than a slot line goes: a ring over my two large buffers.
    large: LargeRing,
    /// The lowest progress (`ready`) seen among the members lately: a writer checks the
    /// lines again only when this is too low.
    progress_seen: u64,
    /// Whether this member writes data of [`PROBE_FROM`] bytes or more by non-temporal
    /// stores: yes, unless the last probe of a 2-member area found both members on CPUs that
    /// share a core ([`NodeArea::cores_shared_now`]).
    stream_large: bool,
    /// Whether this member writes its large data by ordinary stores only: set when
    /// [`NodeArea::calibrate_stores`] found non-temporal ones clearly dearer here (or by
    /// `WEFT_COLL_SHM_STREAM=0`); otherwise the rules of [`STREAM_FROM`] and [`PROBE_FROM`].
    ordinary_only: bool,
    /// Calls of [`PROBE_FROM`] bytes or more on a 2-member area so far: every
    /// [`PROBE_EVERY`]-th of them probes the CPUs again (both members count alike).
    large_calls: u64,
    /// While a call larger than a slot runs a piece at a time ([`NodeArea::in_pieces`]): the
    /// bytes the whole call writes per member, which every large piece carries so that
    /// members whose calls differ in size but not in the piece being read still find out.
    whole: Option<usize>,
    /// All-to-alls whose blocks are larger than this go by single copies, from member to
    /// member ([`NodeArea::alltoall_by_copies`]); `None` when the members cannot copy from
    /// each other's memory ([`NodeArea::agree_on_single_copy`]).
    copies_over: Option<usize>,
    /// All-to-alls by single copies whose send and receive buffers take at most this many
    /// bytes in all are copied by each block's receiver ([`NodeArea::let_receivers_copy`]).
    receivers_copy_up_to: usize,
    /// Whether buffers lent for single copies move onto huge pages
    /// ([`NodeArea::lend_on_huge_pages`]).
    huge_pages: bool,
}

impl NodeArea {
    /// Bytes of an area for `n` members with `piece`-byte large buffers.
    pub fn size_for(n: usize, piece: usize) -> usize {
        n * (HEADER + 2 * round_up(piece))
    }

    /// This member's view of `seg` (of [`NodeArea::size_for`] bytes, zeroed), shared by the
    /// members `world` (world ranks in member order; this one is `world[me]`), for calls of
    /// up to `slot` bytes a member, in collectives of up to `piece` (at least `slot`).
    pub fn new(seg: NodeSegment, world: Vec<u32>, me: usize, slot: usize, piece: usize) -> Self {
        assert!(piece >= slot && seg.len() >= Self::size_for(world.len(), piece));
        NodeArea {
            base: seg.as_ptr(),
            _memory: Memory::Segment(seg),
            n: world.len(),
            others: others_of(&world, me),
            me,
            buffer: round_up(piece),
            slot,
            piece,
            seq: 0,
            large: LargeRing::new(2 * round_up(piece)),
            progress_seen: 0,
            stream_large: true,
            ordinary_only: false,
            large_calls: 0,
            whole: None,
            copies_over: None,
            receivers_copy_up_to: 0,
            huge_pages: false,
        }
    }

    /// The most one member may write per collective: the slot the area was made with
    /// (`Tunables::coll_slot` of its communicator), so that a member with the area at hand
    /// decides as one without it does.
    #[inline]
    pub fn slot(&self) -> usize {
        self.slot
    }

    /// How many members the area has.
    #[inline]
    pub(crate) fn n(&self) -> usize {
        self.n
    }

    /// The world rank of member j (not this member).
    fn world_of(&self, j: usize) -> u32 {
        debug_assert!(j != self.me);
        self.others[if j < self.me { j } else { j - 1 }]
    }

    fn header(&self, j: usize) -> *mut u8 {
        debug_assert!(j < self.n());
        self.base.wrapping_add(j * (HEADER + 2 * self.buffer))
    }

    /// Member j's slot for collective k: its sequence number, the size of its data,
    /// and the data itself when it fits.
    fn slot_line(&self, j: usize, k: u64) -> *mut u8 {
        self.header(j)
            .wrapping_add(64 + (k % DEPTH as u64) as usize * SLOT_BYTES)
    }

    /// The collective whose data member j's slot for k holds now.
    fn slot_seq(&self, j: usize, k: u64) -> &AtomicU64 {
        // SAFETY: a 64-aligned word inside member j's header in the mapping, which lives as
        // long as `self`; accessed only atomically.
        unsafe { &*(self.slot_line(j, k) as *const AtomicU64) }
    }

    /// The size of the data member j wrote for collective k.
    fn size(&self, j: usize, k: u64) -> &AtomicU32 {
        // SAFETY: as in `slot_seq`: the 4-aligned word after it, accessed only atomically.
        unsafe { &*(self.slot_line(j, k).wrapping_add(8) as *const AtomicU32) }
    }

    /// The bytes of the whole call whose data member j wrote for collective k into its large
    /// buffer (in the slot line, where the data would be if it were small).
    fn whole_of(&self, j: usize, k: u64) -> &AtomicU64 {
        // SAFETY: as in `slot_seq`: the 8-aligned word 16 bytes after it, which only data of
        // at most `INLINE` bytes uses otherwise; accessed only atomically.
        unsafe { &*(self.slot_line(j, k).wrapping_add(16) as *const AtomicU64) }
    }

    /// Where in its large buffers member j wrote its data of collective k, when larger than a
    /// slot line ([`LargeRing`]: bytes from the first buffer's start).
    fn large_at(&self, j: usize, k: u64) -> &AtomicU64 {
        // SAFETY: as in `slot_seq`: the 8-aligned word 24 bytes after it, which only data of
        // at most `INLINE` bytes uses otherwise; accessed only atomically.
        unsafe { &*(self.slot_line(j, k).wrapping_add(24) as *const AtomicU64) }
    }

    /// Member j's probe word, in its progress line after `ready` ([`NodeArea::cores_shared_now`]).
    fn probe(&self, j: usize) -> &AtomicU64 {
        // SAFETY: as in `ready`: the 8-aligned word after it in member j's progress line,
        // accessed only atomically.
        unsafe { &*(self.header(j).wrapping_add(8) as *const AtomicU64) }
    }

    fn ready(&self, j: usize) -> &AtomicU64 {
        // SAFETY: the header of member j starts 64-byte aligned (the area is page-aligned and
        // every part is a multiple of 64 bytes) inside the mapping, which lives as long as
        // `self`; the counter is only ever accessed atomically, by every member.
        unsafe { &*(self.header(j) as *const AtomicU64) }
    }

    /// Member j's buffer for collective k: in its slot when `len` fits there, else where its
    /// large buffers' ring placed it (said in the slot: [`NodeArea::large_at`], stored by
    /// `begin` before anything is written there).
    fn buf(&self, j: usize, k: u64, len: usize) -> *mut u8 {
        if len <= INLINE {
            self.slot_line(j, k).wrapping_add(16)
        } else {
            debug_assert!(len <= self.buffer);
            // Relaxed: the writer stored it before its Release store of the slot's sequence
            // number, which a reader saw (Acquire) before it asks; the writer asks itself.
            let at = self.large_at(j, k).load(Ordering::Relaxed) as usize;
            debug_assert!(at + len <= 2 * self.buffer);
            self.header(j).wrapping_add(HEADER + at)
        }
    }

    /// Member j's data of collective k, once its slot's sequence number `≥ k` was seen.
    fn read(&self, j: usize, k: u64, len: usize) -> &[u8] {
        if len == 0 {
            return &[];
        }
        // SAFETY: `len` bytes of member j's buffer for k lie in the mapping; j wrote them
        // before its Release store of the slot's sequence number `k`, which the caller saw
        // with an Acquire load, and j writes that buffer again only after this member has
        // started a later collective (the protocol in the module comment), so nothing writes
        // it while the slice lives.
        unsafe { std::slice::from_raw_parts(self.buf(j, k, len), len) }
    }

    /// Member j's data of collective k, which is `mine` (as long) for this member: read from
    /// where it is still in this CPU's cache, not from the area, where a large buffer's copy
    /// went to memory (`write`).
    fn data<'a>(&'a self, j: usize, k: u64, mine: &'a [u8]) -> &'a [u8] {
        if j == self.me {
            mine
        } else {
            self.read(j, k, mine.len())
        }
    }

    /// The lines of member j's slot for collective k that data of `len` bytes occupies (the
    /// first alone, with the sequence number and size, when the data goes to a large buffer).
    /// Returns the first line and how many lines there are.
    fn slot_lines(&self, j: usize, k: u64, len: usize) -> (*const u8, usize) {
        let first = self.slot_line(j, k) as *const u8;
        let lines = if len <= INLINE { (16 + len).div_ceil(64) } else { 1 };
        (first, lines)
    }

    /// Starts collective k. A member that writes `len` bytes first waits until the place it
    /// will write is free: every member has started the collective after the last one that
    /// used it (slot `k % DEPTH`: k − DEPTH; data larger than a slot line: the collectives
    /// whose data lay where [`LargeRing::place`] puts it).
    fn begin(&mut self, w: &mut impl Waiter, writes: Option<usize>) -> u64 {
        self.seq += 1;
        let k = self.seq;
        let Some(len) = writes else {
            return k;
        };
        let back = DEPTH as u64 - 1;
        let slot_free = if k > back + 1 { k - back } else { 0 };
        let (large_free, at) = if len > INLINE {
            let (at, free) = self.large.place(k, len);
            (free, Some(at))
        } else {
            (0, None)
        };
        let need = slot_free.max(large_free);
        if self.progress_seen < need {
            // A member this far ahead of a slower one waits for it to catch up by half the
            // slots, not by one: otherwise, in a loop where this member is the faster, it
            // would read the slower one's progress line on every call, just after that
            // member wrote it (a line crossing between the CPUs per call).
            let wait_for = if slot_free >= large_free { slot_free + back / 2 } else { need };
            self.wait_all(w, wait_for, 0..self.n());
            // Acquire: pairs with the Release stores of `ready` in `publish`.
            self.progress_seen = (0..self.n())
                .map(|j| self.ready(j).load(Ordering::Acquire))
                .min()
                .unwrap_or(k);
            self.large.forget_finished(self.progress_seen);
        }
        if let Some(at) = at {
            // Relaxed: published with the slot's sequence number (`publish`).
            self.large_at(self.me, k).store(at as u64, Ordering::Relaxed);
        }
        k
    }

    /// Starts collective k with `src` as my data: written, published, the others woken.
    fn put(&mut self, w: &mut impl Waiter, src: &[u8]) -> u64 {
        self.put_except(w, src, 0..0)
    }

    /// [`NodeArea::put`] but for the bytes of `src` in `skip`, which no other member reads
    /// (my own block or slice, which I take from `src`).
    #[inline]
    fn put_except(&mut self, w: &mut impl Waiter, src: &[u8], skip: std::ops::Range<usize>) -> u64 {
        let k = self.begin(w, Some(src.len()));
        self.write_except(k, src, skip);
        self.publish(w, k, Some(src.len()));
        k
    }

    /// Starts collective k with data no other member reads (a root's own part of a gather or
    /// reduce to it): none written, only `ready = k` published and the others woken.
    fn put_nothing(&mut self, w: &mut impl Waiter) -> u64 {
        let k = self.begin(w, None);
        self.publish(w, k, None);
        k
    }

    /// Writes `data` into my buffer for collective k: from [`STREAM_FROM`] bytes by
    /// non-temporal stores, which `copy_streaming` fences so that `publish`'s Release store
    /// orders after them as after ordinary ones.
    fn write(&self, k: u64, data: &[u8]) {
        self.write_except(k, data, 0..0);
    }

    /// [`NodeArea::write`] but for the bytes of `data` in `skip` (a part of `data` no other
    /// member reads: my own block of an all-to-all), which my buffer leaves as they were.
    fn write_except(&self, k: u64, data: &[u8], skip: std::ops::Range<usize>) {
        if data.is_empty() {
            return;
        }
        let len = data.len();
        let stream =
            len >= STREAM_FROM && !self.ordinary_only && (len < PROBE_FROM || self.stream_large);
        self.write_by(k, data, skip, stream);
    }

    /// [`NodeArea::write_except`] by non-temporal stores (`stream`) or ordinary ones.
    fn write_by(&self, k: u64, data: &[u8], skip: std::ops::Range<usize>, stream: bool) {
        let (dst, len) = (self.buf(self.me, k, data.len()), data.len());
        for part in [0..skip.start.min(len), skip.end.min(len)..len] {
            if part.is_empty() {
                continue;
            }
            // SAFETY: my own buffer for k (its slot, or the `len` bytes the ring placed inside
            // my large buffers), inside the mapping, which no member reads until my `ready =
            // k` (and none reads for the collectives whose data lay there any more: `begin`
            // waited for that); `part` lies inside `data`, and so inside those `len` bytes.
            unsafe {
                let (from, to) = (data.as_ptr().add(part.start), dst.add(part.start));
                if stream {
                    crate::sys::cpu::copy_streaming(from, to, part.len())
                } else {
                    std::ptr::copy_nonoverlapping(from, to, part.len())
                }
            };
        }
    }

    /// Publishes that this member has started collective k (`ready = k`) and, when it wrote
    /// data (`size`), that its slot for k holds it; then wakes the others.
    fn publish(&self, w: &mut impl Waiter, k: u64, size: Option<usize>) {
        if let Some(size) = size {
            self.size(self.me, k).store(size as u32, Ordering::Relaxed);
            if size > INLINE {
                let whole = self.whole.unwrap_or(size) as u64;
                self.whole_of(self.me, k).store(whole, Ordering::Relaxed);
            }
            // Release: pairs with the Acquire loads in `wait_data`, so readers see the data
            // and the size written before it.
            self.slot_seq(self.me, k).store(k, Ordering::Release);
        }
        // Release: pairs with the Acquire loads in `wait_all` and `begin`.
        self.ready(self.me).store(k, Ordering::Release);
        w.wake_all(&self.others);
        if let Some(size) = size {
            // The next collective's slot lines (as many as this one's data took): taken over
            // now, while the caller goes on, the stores there (and the fence in the doorbell
            // after them) need not wait for the readers' copies to be invalidated.
            let (first, lines) = self.slot_lines(self.me, k + 1, size);
            for i in 0..lines {
                crate::sys::cpu::prefetch_write(first.wrapping_add(i * 64));
            }
        }
    }

    /// Waits until every member in `who` has `ready ≥ k`.
    fn wait_all(&self, w: &mut impl Waiter, k: u64, who: std::ops::Range<usize>) {
        // Acquire: pairs with the Release store in `publish`.
        let all = |a: &NodeArea| who.clone().all(|j| a.ready(j).load(Ordering::Acquire) >= k);
        if !all(self) {
            w.wait_until(&mut || all(self));
        }
    }

    /// Waits until every member in `who` has published its data of collective k. (This
    /// member's own data, written already, is neither waited for, checked nor fetched.)
    #[inline]
    fn wait_data(&self, w: &mut impl Waiter, k: u64, who: std::ops::Range<usize>) {
        let me = self.me;
        // Acquire: pairs with the Release store of the slot's sequence number in `publish`.
        let all = |a: &NodeArea| {
            who.clone()
                .all(|j| j == me || a.slot_seq(j, k).load(Ordering::Acquire) >= k)
        };
        let at_once = all(self);
        if !at_once {
            w.wait_until(&mut || all(self));
        }
        // These members' slot lines of two collectives on, asked for now: when they run ahead
        // of this one (as a root broadcasting in a loop does), they have written them by the
        // time this member gets there, and the lines are here already. The first line (the
        // sequence number) always: measured, asking for it only when the data was there at
        // once was slower (2 ranks, 8 B broadcast 0.064 µs against 0.057). The rest of the
        // data's lines only then: a member that had to wait would take lines their writer
        // has yet to write, and make it take them back (2 ranks, 512 B allreduce 0.35 µs
        // against 0.33).
        for j in who {
            if j == me {
                continue;
            }
            // Relaxed: the size was published with the sequence number seen above.
            let size = self.size(j, k).load(Ordering::Relaxed) as usize;
            let more = if at_once { usize::MAX } else { 1 };
            let (first, lines) = self.slot_lines(j, k + 2, size);
            for i in 0..lines.min(more) {
                crate::sys::cpu::prefetch_read(first.wrapping_add(i * 64));
            }
        }
    }

    /// Checks that the members `who` (whose data of k was seen) wrote `want` bytes.
    fn check(&self, k: u64, who: std::ops::Range<usize>, want: usize) -> Result<(), SizeMismatch> {
        for j in who {
            if j == self.me {
                continue;
            }
            let theirs = self.size(j, k).load(Ordering::Relaxed) as usize;
            if theirs != want {
                return Err(SizeMismatch {
                    member: j,
                    theirs,
                    mine: want,
                });
            }
            if want > INLINE {
                // Relaxed, as the size: published with the sequence number.
                let theirs = self.whole_of(j, k).load(Ordering::Relaxed) as usize;
                let mine = self.whole.unwrap_or(want);
                if theirs != mine {
                    return Err(SizeMismatch {
                        member: j,
                        theirs,
                        mine,
                    });
                }
            }
        }
        Ok(())
    }

    /// Runs a call that writes `whole` bytes per member (`elem`-byte elements): in one
    /// collective of the area, `piece(self, w, 0..whole)`, when they fit in a large buffer
    /// (`piece` bytes: the slot, or more at 2 members); otherwise a piece of at most that
    /// (whole elements, the pieces as equal as they can be) at a time, `piece(self, w,
    /// range)` per piece in order, each its own collective of the area. Pieces alternate
    /// between the two large buffers (the ring places no data across a buffer's end), so a
    /// member writes the next piece while the others still read this one. A 2-member area
    /// probes its CPUs first at every [`PROBE_EVERY`]-th call of [`PROBE_FROM`] bytes or more.
    #[inline]
    fn in_pieces<W: Waiter>(
        &mut self,
        w: &mut W,
        whole: usize,
        elem: usize,
        mut piece: impl FnMut(&mut Self, &mut W, std::ops::Range<usize>) -> Result<(), SizeMismatch>,
    ) -> Result<(), SizeMismatch> {
        if self.n == 2 && whole >= PROBE_FROM && !self.ordinary_only {
            self.large_calls += 1;
            if self.large_calls % PROBE_EVERY == 1 {
                self.stream_large = !self.cores_shared_now(w);
            }
        }
        if whole <= self.piece {
            return piece(self, w, 0..whole);
        }
        let elem = elem.max(1);
        let elements = whole / elem;
        let pieces = whole.div_ceil(self.piece / elem * elem);
        self.whole = Some(whole);
        let mut ran = Ok(());
        for i in 0..pieces {
            let range = elements * i / pieces * elem..elements * (i + 1) / pieces * elem;
            ran = piece(self, w, range);
            if ran.is_err() {
                break;
            }
        }
        self.whole = None;
        ran
    }

    /// Barrier.
    pub fn barrier(&mut self, w: &mut impl Waiter) {
        let k = self.put_nothing(w);
        self.wait_all(w, k, 0..self.n());
    }

    /// Broadcast of `data` from member `root` (a slot at a time when larger).
    pub fn bcast(
        &mut self,
        w: &mut impl Waiter,
        root: usize,
        data: &mut [u8],
    ) -> Result<(), SizeMismatch> {
        if data.len() <= self.slot {
            // The common case, without the pieces' closure (small broadcasts are target cells).
            return self.bcast_piece(w, root, data);
        }
        self.bcast_in_pieces(w, root, data)
    }

    /// [`NodeArea::bcast`] of more than a slot (out of line: the small case stays lean).
    #[inline(never)]
    fn bcast_in_pieces(
        &mut self,
        w: &mut impl Waiter,
        root: usize,
        data: &mut [u8],
    ) -> Result<(), SizeMismatch> {
        self.in_pieces(w, data.len(), 1, |a, w, r| a.bcast_piece(w, root, &mut data[r]))
    }

    #[inline]
    fn bcast_piece(
        &mut self,
        w: &mut impl Waiter,
        root: usize,
        data: &mut [u8],
    ) -> Result<(), SizeMismatch> {
        let k = self.begin(w, (self.me == root).then_some(data.len()));
        if self.me == root {
            self.write(k, data);
            self.publish(w, k, Some(data.len()));
        } else {
            self.publish(w, k, None);
            self.wait_data(w, k, root..root + 1);
            self.check(k, root..root + 1, data.len())?;
            data.copy_from_slice(self.read(root, k, data.len()));
        }
        Ok(())
    }

    /// Every member's `src` (`elem`-byte elements; a slot at a time when larger) folded in
    /// rank order into `dst` at `root` (`None`: at every member; `dst` may be empty at the
    /// others). A large allreduce goes by slices (see [`SLICED_FROM`] and
    /// [`NodeArea::allreduce_by_slices`]); otherwise every reader folds it all.
    pub fn reduce(
        &mut self,
        w: &mut impl Waiter,
        root: Option<usize>,
        src: &[u8],
        dst: &mut [u8],
        combine: &Combine,
        elem: usize,
    ) -> Result<(), SizeMismatch> {
        if src.len() <= self.slot {
            // The common case, without the pieces' closure (small allreduces are target cells).
            return self.reduce_piece(w, root, src, dst, combine, elem);
        }
        self.reduce_in_pieces(w, root, src, dst, combine, elem)
    }

    /// [`NodeArea::reduce`] of more than a slot (out of line: the small case stays lean).
    #[inline(never)]
    fn reduce_in_pieces(
        &mut self,
        w: &mut impl Waiter,
        root: Option<usize>,
        src: &[u8],
        dst: &mut [u8],
        combine: &Combine,
        elem: usize,
    ) -> Result<(), SizeMismatch> {
        self.in_pieces(w, src.len(), elem, |a, w, r| {
            let out = if dst.is_empty() { &mut [][..] } else { &mut dst[r.clone()] };
            a.reduce_piece(w, root, &src[r], out, combine, elem)
        })
    }

    // Always: the small allreduce's path is this function inside `reduce` (a call more cost
    // 5% of a 2-rank 8 B allreduce, 0.124 against 0.117 µs).
    #[inline(always)]
    fn reduce_piece(
        &mut self,
        w: &mut impl Waiter,
        root: Option<usize>,
        src: &[u8],
        dst: &mut [u8],
        combine: &Combine,
        elem: usize,
    ) -> Result<(), SizeMismatch> {
        if root.is_none() && self.n() >= 3 && src.len() * self.n() >= SLICED_FROM && elem > 0 {
            return self.allreduce_by_slices(w, src, dst, combine, elem);
        }
        // A root folds its own data from `src`: no one reads it from the area.
        let k = if root == Some(self.me) {
            self.put_nothing(w)
        } else {
            self.put(w, src)
        };
        if root.is_none_or(|r| r == self.me) {
            self.wait_data(w, k, 0..self.n());
            self.check(k, 0..self.n(), src.len())?;
            self.fold(k, 0..self.n(), src, dst, combine, elem);
        }
        Ok(())
    }

    /// An allreduce ([`NodeArea::reduce`] at every member) in two collectives of the area:
    /// k, where every member writes its data; k + 1, where member j folds slice j of
    /// everyone's data (a whole number of elements, in rank order) straight into its own
    /// buffer, and the readers copy the slices out. Each member reads the data once and
    /// folds `1/n` of it, where folding it all would read it `n` times (issue 10's "each rank
    /// reduces a slice, then all read the result"); every reader gets the same bytes, and the
    /// same algorithm at the same member count gives the same result from run to run.
    fn allreduce_by_slices(
        &mut self,
        w: &mut impl Waiter,
        src: &[u8],
        dst: &mut [u8],
        combine: &Combine,
        elem: usize,
    ) -> Result<(), SizeMismatch> {
        let (n, len) = (self.n(), src.len());
        let slice = |j: usize| {
            let r = slice_of(len, elem, n, j);
            (r.start, r.end)
        };
        let (lo, hi) = slice(self.me);
        // My own slice I fold from `src`: no one reads it from the area.
        let k = self.put_except(w, src, lo..hi);
        self.wait_data(w, k, 0..n);
        self.check(k, 0..n, len)?;
        let k2 = self.begin(w, Some(hi - lo));
        {
            // SAFETY: my own buffer for k2, inside the mapping: nobody reads it before I
            // publish k2, and `begin` waited until nobody reads what was there before.
            let mine =
                unsafe { std::slice::from_raw_parts_mut(self.buf(self.me, k2, hi - lo), hi - lo) };
            fold_blocks(mine, elem, 0..n, |j| &self.data(j, k, src)[lo..hi], combine);
        }
        self.publish(w, k2, Some(hi - lo));
        self.wait_data(w, k2, 0..n);
        for j in 0..n {
            let (lo, hi) = slice(j);
            self.check(k2, j..j + 1, hi - lo)?;
            dst[lo..hi].copy_from_slice(self.read(j, k2, hi - lo));
        }
        Ok(())
    }

    /// `dst = data(first) ∘ … ∘ data(last)` of collective k (`elem`-byte elements), where
    /// this member's data is `mine`.
    fn fold(
        &self,
        k: u64,
        members: std::ops::Range<usize>,
        mine: &[u8],
        dst: &mut [u8],
        combine: &Combine,
        elem: usize,
    ) {
        fold_blocks(dst, elem, members, |j| self.data(j, k, mine), combine);
    }

    /// Inclusive (or exclusive) prefix reduction: member i folds members 0..=i (0..i) into
    /// `dst`; an exclusive scan leaves member 0's `dst` as it was.
    pub fn scan(
        &mut self,
        w: &mut impl Waiter,
        src: &[u8],
        dst: &mut [u8],
        combine: &Combine,
        elem: usize,
        exclusive: bool,
    ) -> Result<(), SizeMismatch> {
        let k = self.put(w, src);
        let upto = if exclusive { self.me } else { self.me + 1 };
        self.wait_data(w, k, 0..upto);
        self.check(k, 0..upto, src.len())?;
        self.fold(k, 0..upto, src, dst, combine, elem);
        Ok(())
    }

    /// Gather of every member's `src` (equal lengths; a slot at a time when larger) into
    /// `dst` at `root` (`None`: at every member: allgather).
    pub fn gather(
        &mut self,
        w: &mut impl Waiter,
        root: Option<usize>,
        src: &[u8],
        dst: &mut [u8],
    ) -> Result<(), SizeMismatch> {
        let whole = src.len();
        self.in_pieces(w, whole, 1, |a, w, r| a.gather_piece(w, root, src, r, dst))
    }

    /// Bytes `part` of every member's `src` into the same bytes of its block of `dst` (blocks
    /// of `src.len()` bytes).
    fn gather_piece(
        &mut self,
        w: &mut impl Waiter,
        root: Option<usize>,
        src: &[u8],
        part: std::ops::Range<usize>,
        dst: &mut [u8],
    ) -> Result<(), SizeMismatch> {
        let (whole, len) = (src.len(), part.len());
        let mine = &src[part.clone()];
        // A root copies its own block from `src`: no one reads it from the area.
        let k = if root == Some(self.me) {
            self.put_nothing(w)
        } else {
            self.put(w, mine)
        };
        if root.is_none_or(|r| r == self.me) {
            self.wait_data(w, k, 0..self.n());
            self.check(k, 0..self.n(), len)?;
            if len > 0 {
                for j in 0..self.n() {
                    let at = j * whole + part.start;
                    dst[at..at + len].copy_from_slice(self.data(j, k, mine));
                }
            }
        }
        Ok(())
    }

    /// Scatter of `src`'s blocks (at the root; at most a slot in all) into every member's
    /// `dst`.
    pub fn scatter(
        &mut self,
        w: &mut impl Waiter,
        root: usize,
        src: &[u8],
        dst: &mut [u8],
    ) -> Result<(), SizeMismatch> {
        let k = self.begin(w, (self.me == root).then_some(src.len()));
        let len = dst.len();
        if self.me == root {
            // My own block goes from `src` to `dst` below: no one reads it from the area.
            self.write_except(k, src, root * len..(root + 1) * len);
            self.publish(w, k, Some(src.len()));
            dst.copy_from_slice(&src[root * len..(root + 1) * len]);
        } else {
            self.publish(w, k, None);
            self.wait_data(w, k, root..root + 1);
            self.check(k, root..root + 1, len * self.n())?;
            let all = self.read(root, k, len * self.n());
            dst.copy_from_slice(&all[self.me * len..(self.me + 1) * len]);
        }
        Ok(())
    }

    /// All-to-all with equal blocks: `src` holds a block for each member (at most a slot in
    /// all); `dst` gets member j's block for me at block j.
    pub fn alltoall(
        &mut self,
        w: &mut impl Waiter,
        src: &[u8],
        dst: &mut [u8],
    ) -> Result<(), SizeMismatch> {
        let n = self.n();
        let len = src.len() / n;
        // My own block goes from `src` to `dst` below: no one reads it from the area.
        let k = self.put_except(w, src, self.me * len..(self.me + 1) * len);
        self.wait_data(w, k, 0..n);
        self.check(k, 0..n, src.len())?;
        for j in 0..n {
            let theirs = self.data(j, k, src);
            dst[j * len..(j + 1) * len].copy_from_slice(&theirs[self.me * len..(self.me + 1) * len]);
        }
        Ok(())
    }

    /// Reduce-scatter with equal blocks: `src` holds a block for each member; `dst` gets my
    /// block folded over all members in rank order.
    pub fn reduce_scatter_block(
        &mut self,
        w: &mut impl Waiter,
        src: &[u8],
        dst: &mut [u8],
        combine: &Combine,
        elem: usize,
    ) -> Result<(), SizeMismatch> {
        let k = self.put(w, src);
        let n = self.n();
        let len = dst.len();
        self.wait_data(w, k, 0..n);
        self.check(k, 0..n, src.len())?;
        let block = |j: usize| &self.data(j, k, src)[self.me * len..(self.me + 1) * len];
        fold_blocks(dst, elem, 0..n, block, combine);
        Ok(())
    }
}

/// Bytes of the result [`fold_blocks`] makes at a time: small enough that the block stays in
/// the first-level cache while every member's part of it is folded in.
const FOLD_BLOCK: usize = 4096;

/// `dst = part(first) ∘ … ∘ part(last)` over `members` in rank order, each part `dst.len()`
/// bytes of `elem`-byte elements, one block of whole elements at a time: the result's block
/// is written once (copied from the last part) and then folded in the first-level cache,
/// where folding the whole vector member by member would read and write it from memory once
/// per member.
fn fold_blocks<'a>(
    dst: &mut [u8],
    elem: usize,
    members: std::ops::Range<usize>,
    part: impl Fn(usize) -> &'a [u8],
    combine: &Combine,
) {
    let Some(last) = members.clone().next_back() else {
        return;
    };
    let len = dst.len();
    let block = if elem == 0 || elem > FOLD_BLOCK {
        len.max(1)
    } else {
        FOLD_BLOCK / elem * elem
    };
    for (b, out) in dst.chunks_mut(block).enumerate() {
        let lo = b * block;
        let hi = lo + out.len();
        out.copy_from_slice(&part(last)[lo..hi]);
        for j in members.clone().rev().skip(1) {
            combine(&part(j)[lo..hi], out);
        }
    }
}

fn round_up(x: usize) -> usize {
    x.div_ceil(64) * 64
}

#[cfg(test)]
mod tests;

/// Member j's slice of `len` bytes of `elem`-byte elements cut among `n` members: whole
/// elements, the slices differing by one element at most.
fn slice_of(len: usize, elem: usize, n: usize, j: usize) -> std::ops::Range<usize> {
    let elements = len / elem.max(1);
    elements * j / n * elem..elements * (j + 1) / n * elem
}
