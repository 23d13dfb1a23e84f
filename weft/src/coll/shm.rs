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
use crate::comm::node_memory::NodeSegment;
use crate::engine::schedule::Combine;
use crate::engine::Engine;
use crate::fabric::Fabric;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Small-data slots per member: a member may run this many collectives less one ahead of the
/// slowest reader of its small data (a root broadcasting in a loop does not wait for every
/// reader every time; oversubscribed, the readers catch up in batches when they get a CPU).
const DEPTH: usize = 64;
/// Bytes of one slot: its first line holds the sequence number, the size and the start of
/// the data (data of up to 48 bytes travels in the same line as its flag), the next lines
/// the rest. Small collectives (up to `INLINE` bytes a member writes) use the slots, so a
/// member runs up to `DEPTH - 1` of them ahead of its slowest reader; larger ones the ring
/// over the two large buffers, as far ahead as it holds them.
const SLOT_BYTES: usize = 1088;
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

/// How a member waits for the others and wakes them: the progress engine in production
/// (other traffic progresses meanwhile, and the wait policy spins, yields, then sleeps),
/// threads in tests.
pub trait Waiter {
    /// Returns once `ready()` holds.
    fn wait_until(&mut self, ready: &mut dyn FnMut() -> bool);
    /// Wakes the members with world ranks `world` (this one may be among them) that sleep.
    fn wake_all(&mut self, world: &[u32]);
}

impl<F: Fabric> Waiter for Engine<F> {
    fn wait_until(&mut self, ready: &mut dyn FnMut() -> bool) {
        Engine::wait_until(self, |_| ready());
    }
    fn wake_all(&mut self, world: &[u32]) {
        Engine::wake_all(self, world);
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
        }
    }

    /// The most one member may write per collective: the slot the area was made with
    /// (`Tunables::coll_slot` of its communicator), so that a member with the area at hand
    /// decides as one without it does.
    #[inline]
    pub fn slot(&self) -> usize {
        self.slot
    }

    fn n(&self) -> usize {
        self.n
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
        let k = self.begin(w, Some(src.len()));
        self.write(k, src);
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

    /// Whether the two members of a 2-member area run on CPUs that share a core (and its
    /// caches) now: [`PROBE_TRIPS`] round trips of a line between them, each under
    /// [`SHARED_TRIP_NS`]. Both members call it at the start of the same calls (counted
    /// alike); one that finds the other gone on to the call's collectives without it (their
    /// sizes differ, which the collective then reports) answers no, as does one that does not
    /// see the other's next trip within [`PROBE_WAIT`] (its CPU was taken: it gives up and
    /// tells the other so). No is the default: non-temporal stores.
    ///
    /// Why: a host may move the two vCPUs of a VM between one core and two every few
    /// seconds, and large data is best written for the reader in different ways: through the
    /// shared caches with ordinary stores on one core, to memory with non-temporal ones
    /// across two (`bench/c/exchange.c`: 1 MiB exchange 78-80 µs against 142-172 on one
    /// core, 414-509 against 129-131 on two).
    fn cores_shared_now(&mut self, w: &mut impl Waiter) -> bool {
        debug_assert_eq!(self.n, 2);
        let other = 1 - self.me;
        let (mine, theirs) = (self.probe(self.me), self.probe(other));
        // Values above every earlier call's (the area's collectives are numbered alike at
        // both members): this call's, its trips', and a mark that a member gave up. The
        // probe words carry no data, only their own values: Relaxed.
        let (seq, base) = (self.seq, (self.seq + 1) << 5);
        let gave_up = base | 31;
        // Both here: each says so and wakes the other (which may sleep in the wait policy).
        mine.store(base, Ordering::Relaxed);
        w.wake_all(&self.others);
        // Acquire: pairs with the Release store of `ready` in `publish`.
        let went_on = |a: &NodeArea| a.ready(other).load(Ordering::Acquire) > seq;
        w.wait_until(&mut || theirs.load(Ordering::Relaxed) >= base || went_on(self));
        if theirs.load(Ordering::Relaxed) < base {
            return false;
        }
        // The trips: member 0 stores, member 1 echoes; both spin (the other is here).
        let trip = |v: u64| -> bool {
            let start = std::time::Instant::now();
            let mut spins = 0u32;
            loop {
                let t = theirs.load(Ordering::Relaxed);
                if t >= v {
                    return t != gave_up;
                }
                spins += 1;
                if spins.is_multiple_of(256) && start.elapsed() > PROBE_WAIT {
                    mine.store(gave_up, Ordering::Relaxed);
                    return false;
                }
            }
        };
        let pinger = self.me == 0;
        let start = std::time::Instant::now();
        for i in 1..=PROBE_TRIPS {
            if pinger {
                mine.store(base | i, Ordering::Relaxed);
            }
            if !trip(base | i) {
                return false;
            }
            if !pinger {
                mine.store(base | i, Ordering::Relaxed);
            }
        }
        start.elapsed() < SHARED_TRIP_NS * PROBE_TRIPS as u32
    }

    /// Decides how this member writes its large data from now on: with `ordinary` (the
    /// `WEFT_COLL_SHM_STREAM` tunable: 0 `Some(true)`, 1 `Some(false)`) as said; with `None`,
    /// collectively with every member, by timing exchanges of [`CALIBRATION_BYTES`] through
    /// the large buffers, written alternately by each kind of store. Each member keeps its
    /// cheapest exchange by each kind (its write and its read of the next member's data, not
    /// its waits); then all share their figures, and all keep to ordinary stores when the
    /// non-temporal exchanges took over [`ORDINARY_WHEN`] times as long in sum. Made for
    /// machines that differ: on the AMD EPYC VM the built-in rules come from, non-temporal
    /// stores were up to 4 times as fast with the two vCPUs on two cores and as fast or
    /// faster on one; on an Intel Xeon VM (a 300 MiB L3 that both cores share) they took
    /// half as long again (`bench/c/exchange.c`, 64 KiB: 15.2-16.0 µs against 10.5).
    /// Costs 8 exchanges of 64 KiB when the area is made: on 2 CPUs 0.2 ms at 2 members,
    /// 0.3-0.4 at 4, 0.7-1.0 at 8, 1.1 at 16, but about 30 at 32 and 100 at 64 (each member
    /// must get a CPU for each exchange). So a process keeps what it found (`kept`: ordinary
    /// stores or not), and the members of a new area first share what they kept, in one
    /// collective of a byte each: when every one of them found the same, they keep to it and
    /// time nothing.
    pub fn calibrate_stores(
        &mut self,
        w: &mut impl Waiter,
        ordinary: Option<bool>,
        kept: &mut Option<bool>,
    ) {
        if let Some(ordinary) = ordinary {
            self.ordinary_only = ordinary;
            return;
        }
        // Every member alike: the same piece size, agreed when the area was made.
        if self.piece < CALIBRATION_BYTES {
            return;
        }
        let said = [kept.map_or(0, |o| 1 + u8::from(o))];
        let mut all = vec![0u8; self.n()];
        if self.gather(w, None, &said, &mut all).is_ok()
            && said[0] != 0
            && all.iter().all(|&b| b == said[0])
        {
            self.ordinary_only = said[0] == 2;
            return;
        }
        let len = CALIBRATION_BYTES;
        let mine = vec![self.me as u8 ^ 0x5a; len];
        let mut into = vec![0u8; len];
        let mut best = [std::time::Duration::MAX; 2];
        for round in 0..=CALIBRATION_ROUNDS {
            for (kind, stream) in [false, true].into_iter().enumerate() {
                let k = self.begin(w, Some(len));
                let start = std::time::Instant::now();
                self.write_by(k, &mine, 0..0, stream);
                let mut spent = start.elapsed();
                self.publish(w, k, Some(len));
                // The next member's data only: the calibration's copies grow with the members,
                // not with their square.
                let next = (self.me + 1) % self.n();
                self.wait_data(w, k, next..next + 1);
                let start = std::time::Instant::now();
                into.copy_from_slice(self.read(next, k, len));
                // Kept: a copy into memory nothing reads could be left out.
                std::hint::black_box(&mut into);
                spent += start.elapsed();
                // Round 0 warms the buffers (their pages' first touch) and is not counted.
                if round > 0 {
                    best[kind] = best[kind].min(spent);
                }
            }
        }
        // Every member decides alike, from the sums of every member's figures: one member's
        // alone, oversubscribed, depends on which of the others shared its CPU.
        let mine: Vec<u8> = best.iter().flat_map(|d| (d.as_nanos() as u64).to_ne_bytes()).collect();
        let mut all = vec![0u8; mine.len() * self.n()];
        if self.gather(w, None, &mine, &mut all).is_err() {
            return; // not reached: every member writes 16 bytes
        }
        let mut sums = [0f64; 2];
        for (i, figure) in all.chunks_exact(8).enumerate() {
            sums[i % 2] += u64::from_ne_bytes(figure.try_into().expect("8 bytes")) as f64;
        }
        self.ordinary_only = sums[1] > sums[0] * ORDINARY_WHEN;
        *kept = Some(self.ordinary_only);
    }

    /// Whether data larger than a slot that every member only copies (a broadcast, an
    /// allgather) moves faster by messages, each byte copied once from the writer's buffer,
    /// than through this area a piece at a time, each byte written and read: at 2 members
    /// where ordinary stores won the calibration (or were set), since a reader there takes
    /// lines another core has just written faster than memory gives them. On the Intel VM, 2 ranks,
    /// 1 MiB broadcast 31 µs by messages against 65-75 through the area, 1 MiB allgather 168
    /// against 237; on the AMD VM (non-temporal stores kept) the area won (38-44 against
    /// 44-57, 78-88 against 106-136). Every member decides alike: the calibration's figures
    /// are shared.
    pub fn single_copies_win(&self) -> bool {
        self.ordinary_only && self.n == 2
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
            let elements = len / elem;
            (elements * j / n * elem, elements * (j + 1) / n * elem)
        };
        let (lo, hi) = slice(self.me);
        // My own slice I fold from `src`: no one reads it from the area.
        let k = self.begin(w, Some(len));
        self.write_except(k, src, lo..hi);
        self.publish(w, k, Some(len));
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
        let k = self.begin(w, Some(src.len()));
        // My own block goes from `src` to `dst` below: no one reads it from the area.
        self.write_except(k, src, self.me * len..(self.me + 1) * len);
        self.publish(w, k, Some(src.len()));
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

/// From this size a member's data goes into its large buffer by non-temporal stores
/// ([`crate::sys::cpu::copy_streaming`]): straight to memory, where the readers find it
/// without taking each line from the writer's cache. Interleaved at 2 ranks
/// (`docs/performance.md`, 2026-11-26): with the CPUs apart a 64 KiB broadcast took 4.1 µs
/// against 34.6 with ordinary stores, an allgather 9.3 against 40.3; together 4.2 against
/// 10.1 and 9.6 against 13.3; at 8 KiB, together, ordinary stores were faster (broadcast 0.71
/// against 1.02 µs).
const STREAM_FROM: usize = 16 * 1024;

/// Bytes each member writes per exchange of [`NodeArea::calibrate_stores`]: a size where the
/// kinds of store differ most (64 KiB: `bench/c/exchange.c`).
const CALIBRATION_BYTES: usize = 64 * 1024;
/// Exchanges timed per kind of store by [`NodeArea::calibrate_stores`] (after one that is not).
const CALIBRATION_ROUNDS: usize = 3;
/// The members keep to ordinary stores when their exchanges by non-temporal ones took over
/// this many times as long in sum as by ordinary ones. On the Intel VM: 1.55 at 2 members,
/// 1.56-1.59 at 4, 2.1 at 8, 1.5 at 16 (oversubscribed from 3), and ordinary stores won at
/// every count measured (8 ranks, 64 KiB allreduce 51 µs against 75). On the AMD VM, where
/// the built-in rules stay, non-temporal ones were never slower from 16 KiB (2 ranks, one
/// core, 64 KiB allgather 9.6 µs against 13.3).
const ORDINARY_WHEN: f64 = 1.1;

/// From this size a call on a 2-member area writes with ordinary stores when the members'
/// CPUs share a core ([`NodeArea::cores_shared_now`]), with non-temporal ones otherwise: at 2
/// ranks through 1 MiB buffers, with the vCPUs on one core, a 1 MiB allreduce took 77 µs with
/// ordinary stores against 101 with non-temporal ones, a 256 KiB one 30 against 39, a 1 MiB
/// allgather 74 against 109; on two cores ordinary stores took 4-5 times as long (1 MiB
/// allreduce 513 against 97; `docs/performance.md`, 2026-11-26, second session). Below it
/// the probe would cost more than it saves.
const PROBE_FROM: usize = 256 * 1024;
/// A 2-member area probes its CPUs at the first of every this many calls of [`PROBE_FROM`]
/// bytes or more (the host moves them every few seconds; a probe costs up to ~2 µs).
const PROBE_EVERY: u64 = 8;
/// Round trips a probe times.
const PROBE_TRIPS: u64 = 8;
/// A round trip of a line between CPUs that share a core takes about 65 ns here, between two
/// cores 300-340 (`bench/out/build/floor` prints half of it); a probe's 8 trips, started cold,
/// took 115-125 ns each on one core.
const SHARED_TRIP_NS: std::time::Duration = std::time::Duration::from_nanos(180);
/// How long a member waits for the other at a probe before it gives up.
const PROBE_WAIT: std::time::Duration = std::time::Duration::from_micros(20);

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
mod tests {
    use super::*;
    use std::rc::Rc;
    use std::sync::Arc;

    /// Threads as members, spinning on the flags.
    struct Spin;
    impl Waiter for Spin {
        fn wait_until(&mut self, ready: &mut dyn FnMut() -> bool) {
            let (start, mut spins) = (std::time::Instant::now(), 0u64);
            while !ready() {
                spins += 1;
                assert!(
                    start.elapsed() < std::time::Duration::from_secs(60),
                    "a member waited a minute: the protocol lost a step"
                );
                std::hint::spin_loop();
                if spins % 1024 == 0 {
                    std::thread::yield_now();
                }
            }
        }
        fn wake_all(&mut self, _world: &[u32]) {}
    }

    fn area_in(mem: &Arc<Vec<AtomicU64>>, n: usize, me: usize, slot: usize, piece: usize) -> NodeArea {
        let world: Vec<u32> = (0..n as u32).collect();
        NodeArea {
            base: mem.as_ptr() as *mut u8,
            _memory: Memory::Test(mem.clone()),
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
        }
    }

    /// Runs `body(area, member)` on `n` threads sharing one area.
    fn members<F>(n: usize, slot: usize, body: F)
    where
        F: Fn(&mut NodeArea, usize) + Send + Sync + 'static,
    {
        members_with(n, slot, slot, body)
    }

    /// [`members`] with large buffers of `piece` bytes.
    fn members_with<F>(n: usize, slot: usize, piece: usize, body: F)
    where
        F: Fn(&mut NodeArea, usize) + Send + Sync + 'static,
    {
        let words = NodeArea::size_for(n, piece).div_ceil(8);
        let mem: Arc<Vec<AtomicU64>> = Arc::new((0..words).map(|_| AtomicU64::new(0)).collect());
        let body = Arc::new(body);
        let hs: Vec<_> = (0..n)
            .map(|me| {
                let (mem, body) = (mem.clone(), body.clone());
                std::thread::spawn(move || {
                    let mut a = area_in(&mem, n, me, slot, piece);
                    body(&mut a, me);
                })
            })
            .collect();
        for h in hs {
            h.join().expect("a member panicked");
        }
    }

    fn affine() -> Combine {
        Rc::new(|input: &[u8], inout: &mut [u8]| {
            for (i, o) in input.chunks_exact(8).zip(inout.chunks_exact_mut(8)) {
                let a1 = u32::from_ne_bytes(i[..4].try_into().unwrap());
                let b1 = u32::from_ne_bytes(i[4..].try_into().unwrap());
                let a2 = u32::from_ne_bytes(o[..4].try_into().unwrap());
                let b2 = u32::from_ne_bytes(o[4..].try_into().unwrap());
                o[..4].copy_from_slice(&a1.wrapping_mul(a2).to_ne_bytes());
                o[4..].copy_from_slice(&a1.wrapping_mul(b2).wrapping_add(b1).to_ne_bytes());
            }
        })
    }

    fn data(member: usize, round: usize, len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 7 + member * 31 + round * 13) as u8 | 1).collect()
    }

    #[test]
    fn back_to_back_collectives_of_every_kind_reuse_the_buffers_safely() {
        for n in [1, 2, 3, 5] {
            // Up to a slot line, through the slots; then the large buffers; allreduces of
            // SLICED_FROM in all by slices (3 and 5 members; 46,000 bytes: 5,750 elements,
            // slices of unequal sizes).
            for len in [0, 8, 24, 40, 200, INLINE, INLINE + 8, 1024, 46_000, 65_536] {
                members(n, 65_536, move |a, me| {
                    let c = affine();
                    for round in 0..300 {
                        a.barrier(&mut Spin);
                        // Broadcast from a changing root.
                        let root = round % n;
                        let mut b = if me == root { data(root, round, len) } else { vec![0; len] };
                        a.bcast(&mut Spin, root, &mut b).unwrap();
                        assert_eq!(b, data(root, round, len), "bcast n={n} len={len} round {round}");
                        // Allreduce in rank order.
                        let mut r = vec![0; len];
                        a.reduce(&mut Spin, None, &data(me, round, len), &mut r, &c, 8).unwrap();
                        let mut want = data(n - 1, round, len);
                        for j in (0..n - 1).rev() {
                            c(&data(j, round, len), &mut want);
                        }
                        assert_eq!(r, want, "allreduce n={n} len={len} round {round}");
                        // Reduce to a changing root: the others' outputs stay untouched.
                        let mut r = vec![0xee; len];
                        a.reduce(&mut Spin, Some(root), &data(me, round, len), &mut r, &c, 8)
                            .unwrap();
                        if me == root {
                            assert_eq!(r, want, "reduce n={n} len={len} round {round}");
                        } else {
                            assert!(r.iter().all(|&b| b == 0xee), "reduce n={n} len={len}");
                        }
                        // Allgather.
                        let mut g = vec![0; len * n];
                        a.gather(&mut Spin, None, &data(me, round, len), &mut g).unwrap();
                        let all: Vec<u8> = (0..n).flat_map(|j| data(j, round, len)).collect();
                        assert_eq!(g, all, "allgather n={n} len={len} round {round}");
                    }
                });
            }
        }
    }

    #[test]
    fn calls_larger_than_a_slot_go_a_slot_at_a_time() {
        // A 4 KiB slot: lengths of one piece more than a slot, of pieces that are not whole
        // lines, of many pieces. With a 64 KiB slot, 200,000 bytes go in pieces of 50,000,
        // which 3 members allreduce by slices (SLICED_FROM) piece after piece.
        for (n, slot) in [(1, 4096), (2, 4096), (3, 4096), (5, 4096), (3, 65_536)] {
            for len in [4104, 10_000, 3 * 4096 + 8, 200_000] {
                members(n, slot, move |a, me| {
                    let c = affine();
                    for round in 0..4 {
                        let root = (round + 1) % n;
                        let mut b = if me == root { data(root, round, len) } else { vec![0; len] };
                        a.bcast(&mut Spin, root, &mut b).unwrap();
                        assert_eq!(b, data(root, round, len), "bcast n={n} len={len}");
                        let mut want = data(n - 1, round, len);
                        for j in (0..n - 1).rev() {
                            c(&data(j, round, len), &mut want);
                        }
                        let mut r = vec![0; len];
                        a.reduce(&mut Spin, None, &data(me, round, len), &mut r, &c, 8).unwrap();
                        assert_eq!(r, want, "allreduce n={n} len={len}");
                        // The others give no output buffer.
                        let mut r = vec![0; if me == root { len } else { 0 }];
                        a.reduce(&mut Spin, Some(root), &data(me, round, len), &mut r, &c, 8)
                            .unwrap();
                        if me == root {
                            assert_eq!(r, want, "reduce n={n} len={len}");
                        }
                        for to in [None, Some(root)] {
                            let mut g = vec![0; if to.is_none_or(|r| r == me) { len * n } else { 0 }];
                            a.gather(&mut Spin, to, &data(me, round, len), &mut g).unwrap();
                            if to.is_none_or(|r| r == me) {
                                let all: Vec<u8> = (0..n).flat_map(|j| data(j, round, len)).collect();
                                assert_eq!(g, all, "gather to {to:?} n={n} len={len}");
                            }
                        }
                    }
                });
            }
        }
    }

    #[test]
    fn a_writer_of_medium_data_runs_ahead_of_a_late_reader_without_overwriting_it() {
        // A 16 KiB slot: two 16 KiB buffers, a ring of 32 KiB. Member 0 broadcasts (and
        // scatters) data of sizes from just over a slot line to a slot; member 2 starts late.
        // The root must get several collectives ahead of it (the ring holds eight of 4 KiB;
        // before, one), and every reader must read every collective's data intact.
        const ROUNDS: usize = 300;
        let started: Arc<Vec<AtomicU64>> = Arc::new((0..3).map(|_| AtomicU64::new(0)).collect());
        let root_ahead = Arc::new(AtomicU64::new(0));
        let (s, ahead) = (started.clone(), root_ahead.clone());
        members(3, 16_384, move |a, me| {
            if me == 2 {
                std::thread::sleep(std::time::Duration::from_millis(50));
                ahead.store(s[0].load(Ordering::SeqCst), Ordering::SeqCst);
            }
            for round in 0..ROUNDS {
                s[me].store(round as u64 + 1, Ordering::SeqCst);
                let len = INLINE + 1 + (round * 977) % (16_384 - INLINE);
                let len = if round < 20 { 4096 } else { len };
                let mut b = if me == 0 { data(0, round, len) } else { vec![0; len] };
                a.bcast(&mut Spin, 0, &mut b).unwrap();
                assert_eq!(b, data(0, round, len), "bcast round {round} of {len} bytes");
                let block = len / 3;
                let src = if me == 0 { data(0, round, 3 * block) } else { Vec::new() };
                let mut got = vec![0; block];
                a.scatter(&mut Spin, 0, &src, &mut got).unwrap();
                let want = data(0, round, 3 * block);
                assert_eq!(got, want[me * block..(me + 1) * block], "scatter round {round}");
            }
        });
        let ahead = root_ahead.load(Ordering::SeqCst);
        assert!(ahead >= 3, "the root got to round {ahead} only while a reader was late");
    }

    #[test]
    fn two_members_probe_their_cpus_and_get_the_same_data_either_way() {
        // A 4 KiB slot with 1 MiB large buffers, as 2 members have: calls from PROBE_FROM
        // bytes probe the CPUs (every PROBE_EVERY-th) and write by ordinary or non-temporal
        // stores as the probe says, in one piece or several.
        for len in [PROBE_FROM, 1 << 20, 2_500_000] {
            members_with(2, 4096, 1 << 20, move |a, me| {
                let c = affine();
                for round in 0..PROBE_EVERY as usize + 2 {
                    let root = round % 2;
                    let mut b = if me == root { data(root, round, len) } else { vec![0; len] };
                    a.bcast(&mut Spin, root, &mut b).unwrap();
                    assert_eq!(b, data(root, round, len), "bcast len={len}");
                    let mut want = data(1, round, len);
                    c(&data(0, round, len), &mut want);
                    let mut r = vec![0; len];
                    a.reduce(&mut Spin, None, &data(me, round, len), &mut r, &c, 8).unwrap();
                    assert_eq!(r, want, "allreduce len={len}");
                    let mut g = vec![0; 2 * len];
                    a.gather(&mut Spin, None, &data(me, round, len), &mut g).unwrap();
                    assert_eq!(g, [data(0, round, len), data(1, round, len)].concat());
                }
            });
        }
    }

    #[test]
    fn the_members_agree_on_their_stores_and_go_on_as_before() {
        // Timed by threads that may share CPUs: either kind may win, but every member must
        // take the same one, and the area's later collectives must find their data (the
        // calibration's own collectives were counted alike everywhere).
        for n in [2, 3, 5] {
            let (tx, rx) = std::sync::mpsc::channel();
            let tx = std::sync::Mutex::new(tx);
            members_with(n, 4096, CALIBRATION_BYTES, move |a, me| {
                let mut kept = None;
                a.calibrate_stores(&mut Spin, None, &mut kept);
                assert_eq!(kept, Some(a.ordinary_only), "what it found is kept");
                tx.lock().unwrap().send(a.ordinary_only).unwrap();
                assert_eq!(a.single_copies_win(), a.ordinary_only && n == 2);
                // All kept the same: one collective (they share it), nothing timed.
                let (found, seq) = (a.ordinary_only, a.seq);
                a.calibrate_stores(&mut Spin, None, &mut kept);
                assert_eq!((a.ordinary_only, a.seq), (found, seq + 1));
                // One member kept nothing, or the other kind: every member times again.
                for odd in [None, Some(!found)] {
                    let seq = a.seq;
                    let mut mine = if me == n - 1 { odd } else { kept };
                    a.calibrate_stores(&mut Spin, None, &mut mine);
                    assert!(a.seq > seq + 1 && mine == Some(a.ordinary_only));
                }
                for (round, len) in [100, 5000, CALIBRATION_BYTES].into_iter().enumerate() {
                    let mut g = vec![0; n * len];
                    a.gather(&mut Spin, None, &data(me, round, len), &mut g).unwrap();
                    let want: Vec<u8> = (0..n).flat_map(|j| data(j, round, len)).collect();
                    assert_eq!(g, want, "allgather of {len} after the calibration");
                }
            });
            let took: Vec<bool> = rx.iter().collect();
            assert_eq!(took.len(), n);
            assert!(took.iter().all(|&t| t == took[0]), "{n} members disagree: {took:?}");
        }
        // Set, not measured: nothing runs on the area.
        members_with(2, 4096, CALIBRATION_BYTES, |a, _| {
            let mut kept = Some(false);
            a.calibrate_stores(&mut Spin, Some(true), &mut kept);
            assert!(a.ordinary_only && a.single_copies_win() && a.seq == 0);
            a.calibrate_stores(&mut Spin, Some(false), &mut kept);
            assert!(!a.ordinary_only && !a.single_copies_win() && a.seq == 0);
            assert_eq!(kept, Some(false), "a setting is not a finding");
        });
        // Too small an area for the exchange: nothing runs, the built-in rules stay.
        members_with(2, 4096, 4096, |a, _| {
            let mut kept = Some(true);
            a.calibrate_stores(&mut Spin, None, &mut kept);
            assert!(!a.ordinary_only && a.seq == 0);
        });
    }

    #[test]
    fn a_member_alone_at_a_probe_goes_on_when_the_other_did() {
        // Member 0 allreduces PROBE_FROM bytes (and probes), member 1 8 bytes (no probe):
        // member 0 sees member 1 go on, gives up the probe, and both report the sizes.
        members_with(2, 4096, 1 << 20, move |a, me| {
            let c = affine();
            let len = if me == 0 { PROBE_FROM } else { 8 };
            let mut r = vec![0; len];
            let e = a.reduce(&mut Spin, None, &data(me, 0, len), &mut r, &c, 8);
            let (member, theirs, mine) = if me == 0 { (1, 8, PROBE_FROM) } else { (0, PROBE_FROM, 8) };
            assert_eq!(e, Err(SizeMismatch { member, theirs, mine }));
        });
    }

    #[test]
    fn members_whose_calls_differ_in_size_but_not_in_a_piece_are_reported() {
        // A 4 KiB slot: 8 KiB go in two pieces of 4 KiB, 12 KiB in three; 4 KiB in one
        // collective. The first pieces have the same size; their whole calls do not.
        an_odd_member_is_reported(4096, 8192, 4096);
        an_odd_member_is_reported(4096, 8192, 12_288);
    }

    #[test]
    fn folding_in_blocks_gives_the_whole_vectors_fold_for_any_element_size() {
        // A non-commutative operation on 12-byte elements (blocks of 4,092 bytes) and on
        // 8-byte ones, over lengths around and across the block size.
        let first_of_three: Combine = Rc::new(|input: &[u8], inout: &mut [u8]| {
            for (i, o) in input.chunks_exact(12).zip(inout.chunks_exact_mut(12)) {
                o[..4].copy_from_slice(&i[..4]);
                o[4..].iter_mut().zip(&i[4..]).for_each(|(o, i)| *o = o.wrapping_mul(3) ^ i);
            }
        });
        for (elem, c) in [(12, first_of_three), (8, affine())] {
            for len in [0, elem, 4092, 4096 / elem * elem * 3 + elem * 5, 100_008 / elem * elem] {
                for members in [0..1, 0..3, 1..4] {
                    let parts: Vec<Vec<u8>> = (0..4).map(|j| data(j, elem, len)).collect();
                    let mut want = parts[members.end - 1].clone();
                    for j in members.clone().rev().skip(1) {
                        c(&parts[j], &mut want);
                    }
                    let mut got = vec![0xee; len];
                    fold_blocks(&mut got, elem, members.clone(), |j| &parts[j], &c);
                    assert_eq!(got, want, "elem {elem}, len {len}, members {members:?}");
                }
            }
        }
    }

    #[test]
    fn scan_scatter_alltoall_and_reduce_scatter() {
        for n in [1, 2, 4, 7] {
            members(n, 8192, move |a, me| {
                let c = affine();
                let len = 16;
                for round in 0..50 {
                    for exclusive in [false, true] {
                        let mut r = vec![0xee; len];
                        a.scan(&mut Spin, &data(me, round, len), &mut r, &c, 8, exclusive)
                            .unwrap();
                        let upto = if exclusive { me } else { me + 1 };
                        if upto == 0 {
                            assert_eq!(r, vec![0xee; len]);
                        } else {
                            let mut want = data(upto - 1, round, len);
                            for j in (0..upto - 1).rev() {
                                c(&data(j, round, len), &mut want);
                            }
                            assert_eq!(r, want, "scan n={n} excl={exclusive}");
                        }
                    }
                    let root = (round + 1) % n;
                    let all: Vec<u8> = (0..n).flat_map(|j| data(j, round, len)).collect();
                    let mut s = vec![0; len];
                    a.scatter(&mut Spin, root, if me == root { &all } else { &[] }, &mut s).unwrap();
                    assert_eq!(s, data(me, round, len), "scatter");
                    let src = data(me, round, len * n);
                    let mut d = vec![0; len * n];
                    a.alltoall(&mut Spin, &src, &mut d).unwrap();
                    for j in 0..n {
                        assert_eq!(d[j * len..(j + 1) * len], data(j, round, len * n)[me * len..(me + 1) * len]);
                    }
                    let mut rs = vec![0; len];
                    a.reduce_scatter_block(&mut Spin, &src, &mut rs, &c, 8).unwrap();
                    let block = |j: usize| data(j, round, len * n)[me * len..(me + 1) * len].to_vec();
                    let mut want = block(n - 1);
                    for j in (0..n - 1).rev() {
                        c(&block(j), &mut want);
                    }
                    assert_eq!(rs, want, "reduce_scatter_block");
                }
            });
        }
    }

    /// Member 1 of 3 reduces `odd` bytes where the others reduce `most` (slots of `slot`
    /// bytes): every member reports the other size it sees, none reads past it.
    fn an_odd_member_is_reported(slot: usize, most: usize, odd: usize) {
        members(3, slot, move |a, me| {
            let c = affine();
            let len = if me == 1 { odd } else { most };
            let mut r = vec![0; len];
            let e = a.reduce(&mut Spin, None, &data(me, 0, len), &mut r, &c, 8);
            let want = if me == 1 { (0, most, odd) } else { (1, odd, most) };
            assert_eq!(
                e,
                Err(SizeMismatch {
                    member: want.0,
                    theirs: want.1,
                    mine: want.2
                })
            );
        });
    }

    #[test]
    fn a_member_with_another_size_is_reported_before_slices_are_folded() {
        // 3 members of 64 KiB each: the allreduce goes by slices, and the sizes are
        // compared before any member folds another's data.
        an_odd_member_is_reported(65_536, 65_536, 65_536 - 8);
    }

    #[test]
    fn a_member_with_another_size_is_reported_not_read() {
        an_odd_member_is_reported(4096, 8, 16);
    }
}
