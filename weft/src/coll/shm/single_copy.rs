//! All-to-alls, allgathers, gathers and scatters of large blocks, and large reductions on 2
//! members, by single copies: every member says in the area where its buffers lie and copies
//! what it needs straight from the others' buffers into its own (`process_vm_readv`), so each
//! block is copied once, where through the area's buffers it would be copied twice (in by its
//! writer, out by its reader). In an all-to-all, an allgather or a gather either member of a
//! pair may copy the block between them (into its own buffer, or out of it with
//! `process_vm_writev`): whichever claims it
//! first in the area, so that the members that have a CPU do the copies of those that wait
//! for one. The area carries only the addresses, the claims and the flags; whether the members
//! may copy from each other's memory at all (a seccomp filter, Yama's ptrace scope or
//! `WEFT_SHM_SINGLE_COPY=0` may forbid it) they find out by trying when the area is made
//! ([`NodeArea::agree_on_single_copy`]).
//!
//! Measured on the Intel VM (`bench/ab.py`, µs, through the area's buffers → by single
//! copies; Open MPI 5 beside): 4 ranks on 2 CPUs, 64 KiB blocks 78 → 54 (58), 256 KiB 349 →
//! 285 (295); 8 ranks, 64 KiB 359 → 329 (386); 2 ranks, 4 MiB 1,004 → 912 (984, by messages
//! before). Below the eager limit the system call costs more than the second copy: 2 ranks,
//! 32 KiB blocks 8.0 through the area against 11.9. Claimed copies against each member making
//! its own and a barrier (interleaved, CPUs together, µs; Open MPI 4.1 beside): 4 ranks 256
//! KiB 302 against 343 (345), 1 MiB 1,232 against 1,341 (1,258), 4 MiB 7,826 against 8,760
//! (8,021); 8 ranks 64 KiB 332 against 378 (388), 256 KiB 1,087 against 1,267 (1,224); 2
//! ranks 64 KiB 8.0 against 10.5 (10.2), 4 MiB 952 against 1,078 (1,007).

use super::{AreaError, NodeArea, SizeMismatch, Waiter};
use crate::engine::schedule::Combine;
use std::sync::atomic::{AtomicU64, Ordering};

/// The most members an all-to-all by single copies may have: each member's slot holds its
/// three sets of marks (a bit per member each) after its first line.
const MOST_MARKED: usize = 64 * ((super::SLOT_BYTES - 64) / (3 * 8));

/// The sets of bits a member's slot holds in a collective by claims
/// ([`NodeArea::alltoall_by_copies`]), a bit per member whose block comes into its buffer.
#[derive(Clone, Copy)]
enum Mark {
    /// A member has taken on the copy.
    Claimed,
    /// The copy is over.
    Done,
    /// The copy failed (set before `Done`).
    Failed,
}

/// What a member's probe word holds (with its member rank folded in), for the next member to
/// copy and check in [`NodeArea::agree_on_single_copy`].
const PROBE_WORD: u64 = 0x5eed_c0de_0000_0000;

/// The most words a member says where its buffers lie ([`NodeArea::say`]): addresses and a
/// length.
const MOST_WORDS: usize = 3;

/// Allreduces of at least this many bytes per member on 2 members with a commutative
/// operation go by single copies ([`NodeArea::allreduce_by_copies`]). On the Intel VM
/// (CPUs together, interleaved): 256 KiB 46 µs against 54 through the area, 1 MiB 222 against
/// 270; but 64 KiB 20.9 against 13.1, 192 KiB 35.5 against 34.0.
pub const ALLREDUCE_COPIES_FROM: usize = 256 << 10;

/// Allgathers of 3 or more members with blocks of at least this many bytes go by single
/// copies ([`NodeArea::allgather_by_copies`]) rather than through the area; 2 members' from
/// the eager limit, as all-to-alls ([`allgather_by_copies_fits`]). On the Intel VM
/// (`bench/ab.py`, interleaved; µs through the area against by copies, pushes first; "every
/// line": the send data all written before each call, as programs write it; else one word per
/// 4 KiB, the benchmark's way above 64 KiB): 2 ranks, every line 64 KiB 11.8 against 7.9, 256
/// KiB 54.5 against 25.7, 512 KiB 103 against 54; one word per 4 KiB 256 KiB 35.4 against 20.2
/// (Open MPI 4.1 23-25). 4 ranks, every line 64 KiB 39-48 against 57, 256 KiB 203 against 211,
/// 512 KiB 430 against 411; one word per 4 KiB 64 KiB 36 against 56, 512 KiB 420 against 343,
/// 1 MiB 855 against 650 (pulls first), 4 MiB 3,720 against 2,887 (pulls first).
pub const ALLGATHER_COPIES_FROM: usize = 512 << 10;

/// Whether an allgather of `members` with `len`-byte blocks goes by single copies, where the
/// members may copy from each other's memory and blocks over `over` bytes do (the eager
/// limit, as for all-to-alls): on at most [`ALLGATHER_COPIES_MEMBERS`] members, from
/// [`ALLGATHER_COPIES_FROM`] on 3 or more. The one rule, for the router
/// (`ShmOp::by_copies_maybe`) and the area ([`NodeArea::allgather_by_copies_applies`]).
pub fn allgather_by_copies_fits(members: usize, len: usize, over: usize) -> bool {
    let from = if members <= 2 { 0 } else { ALLGATHER_COPIES_FROM };
    (2..=ALLGATHER_COPIES_MEMBERS).contains(&members) && len >= from && len > over
}

/// Allgathers go by single copies on at most this many members: from 8 on 2 CPUs the area's
/// one write per block for seven readers kept up (1 MiB 3,313 µs against 3,381 by copies, 4
/// MiB 19,581 against 20,809, every line written; 2,948 against 2,719 and 19,356 against
/// 18,717 with the benchmark's one word per 4 KiB; pulls first).
pub const ALLGATHER_COPIES_MEMBERS: usize = 4;

/// Reduce-scatters with blocks of at least this many bytes on 2 members with a commutative
/// operation go by single copies ([`NodeArea::reduce_scatter_by_copies`]). On the Intel VM:
/// 64 KiB blocks 11.1 µs against 14.4 through the area, 1 MiB 246 against 330 (by messages);
/// but 32 KiB 13.4 against 9.1.
pub const REDUCE_SCATTER_COPIES_FROM: usize = 64 << 10;

impl NodeArea {
    /// Whether an all-to-all writing `writes` bytes per member goes by single copies
    /// ([`NodeArea::alltoall_by_copies`]): when the members can copy from each other's memory
    /// and its blocks are larger than the bound the area was made with (the eager limit:
    /// where a message would go by a single copy too).
    #[inline]
    pub fn alltoall_by_copies_applies(&self, writes: usize) -> bool {
        self.n() <= MOST_MARKED && self.copies_over.is_some_and(|over| writes / self.n() > over)
    }

    /// Finds out, with the other members, whether every member can copy from the next one's
    /// memory, and if so lets all-to-alls and scatters of blocks larger than `over` bytes, and
    /// the large reductions of 2 members, go by single copies. Every member tries a copy of a
    /// word of the next member's memory, then all gather what they found: two collectives of
    /// the area, once per area. Nothing when `allowed` is false (the same at every member: a
    /// tunable).
    pub fn agree_on_single_copy(&mut self, w: &mut impl Waiter, allowed: bool, over: usize) {
        if !allowed || self.n() < 2 {
            return;
        }
        let n = self.n();
        // Lent to the previous member until every member has said what it found (the gather
        // below, which it joins only after its copy): kept alive and in memory until then.
        let word = Box::new(PROBE_WORD ^ self.me as u64);
        let k = self.put(w, &(&*word as *const u64 as u64).to_ne_bytes());
        let next = (self.me + 1) % n;
        self.wait_data(w, k, next..next + 1);
        let mut found = false;
        if self.check(k, next..next + 1, 8).is_ok() {
            let at = u64::from_ne_bytes(self.read(next, k, 8).try_into().expect("8 bytes"));
            let mut got = [0u8; 8];
            // SAFETY: the next member lent this word (its `word` above) until it has seen
            // every member's answer, this one's among them.
            let copied = unsafe { w.pull(self.world_of(next), at, &mut got) };
            found = copied.is_ok() && u64::from_ne_bytes(got) == PROBE_WORD ^ next as u64;
        }
        let mut all = vec![0u8; n];
        let agreed = self.gather(w, None, &[u8::from(found)], &mut all).is_ok()
            && all.iter().all(|&b| b == 1);
        std::hint::black_box(&word);
        self.copies_over = agreed.then_some(over);
    }

    /// Lets the receivers copy every block of the all-to-alls by single copies whose send and
    /// receive buffers take at most `bytes` in all (2 × members² × block): no pushes, each
    /// member pulls the blocks meant for it ([`NodeArea::exchange_by_copies`]). For members
    /// that outnumber the CPUs, so that the lines a member writes stay in the cache of the CPU
    /// it runs on, where claims had whichever member got to a block first write it from the
    /// other CPU, a call's lines moving between the caches from call to call. On the Intel
    /// VM (`bench/ab.py`, interleaved, CPUs apart, µs, claims against receivers; Open MPI 5
    /// beside): 4 ranks, 64 KiB blocks (2 MiB in all) 51.9 against 38.4 (49.5), 128 KiB 109
    /// against 88 (122); but 256 KiB (8 MiB, beyond the two 2 MiB caches) 206 against 221,
    /// 1 MiB 840 against 884; 3 ranks 256 KiB (4.5 MiB) 122 against 141, 64 KiB 26.1
    /// against 26.5; 8 ranks 64 KiB (8 MiB) 258 against 274. With a CPU per member claims
    /// win at every size (2 ranks, 64 KiB 6.7 against 7.7, 1 MiB 158 against 167): the
    /// caller pushes from its own cache. Every member must be given the same `bytes` (the
    /// copies stay right if not: whoever claims a block copies it).
    pub fn let_receivers_copy(&mut self, bytes: usize) {
        self.receivers_copy_up_to = bytes;
    }

    /// Lets the buffers this member lends for single copies move onto huge pages
    /// ([`crate::sys::huge::lend`]: a buffer the second time it is lent, if it holds a whole
    /// 2 MiB page), where the kernel pins them for the others' copies a huge page at a time
    /// instead of 4 KiB at a time. Every member decides alone (the copies are right on any
    /// pages).
    pub fn lend_on_huge_pages(&mut self, yes: bool) {
        self.huge_pages = yes;
    }

    /// Says that `bufs` are lent for this collective's single copies
    /// ([`NodeArea::lend_on_huge_pages`]).
    fn lend(&self, bufs: &[&[u8]]) {
        if self.huge_pages {
            for b in bufs {
                crate::sys::huge::lend(b);
            }
        }
    }

    /// Starts a collective by single copies: says where this member's buffers lie (`words`:
    /// addresses and lengths) and waits until every member has said where theirs lie.
    /// Returns the collective's number and whether every member gave as many words.
    fn say_where(&mut self, w: &mut impl Waiter, words: &[u64]) -> (u64, Result<(), SizeMismatch>) {
        let k = self.say(w, words);
        self.wait_data(w, k, 0..self.n());
        (k, self.check(k, 0..self.n(), 8 * words.len()))
    }

    /// Says where this member's buffers lie (`words`) in a new collective of the area, without
    /// waiting for the others, with this member's sets of [`Mark`]s for it cleared; returns the
    /// collective's number.
    fn say(&mut self, w: &mut impl Waiter, words: &[u64]) -> u64 {
        debug_assert!(words.len() <= MOST_WORDS);
        let mut said = [0u8; 8 * MOST_WORDS];
        for (into, x) in said.chunks_exact_mut(8).zip(words) {
            into.copy_from_slice(&x.to_ne_bytes());
        }
        let k = self.begin(w, Some(8 * words.len()));
        let marks = if self.n() <= MOST_MARKED { 3 * self.n().div_ceil(64) } else { 0 };
        for i in 0..marks {
            // Relaxed: published by the Release in `publish`, before any other member claims.
            self.mark_word(self.me, k, i).store(0, Ordering::Relaxed);
        }
        self.write(k, &said[..8 * words.len()]);
        self.publish(w, k, Some(8 * words.len()));
        k
    }

    /// Word `i` of what member j said in collective k ([`NodeArea::say_where`]).
    fn said(&self, j: usize, k: u64, i: usize) -> u64 {
        let at = 8 * i;
        u64::from_ne_bytes(self.read(j, k, at + 8)[at..].try_into().expect("8 bytes"))
    }

    /// Copies `into.len()` bytes from address `from` in member j's memory, reporting a failure
    /// as the error of this member's collective.
    ///
    /// # Safety
    /// As for [`Waiter::pull`]: member j lent that buffer for this copy.
    unsafe fn copy_from(
        &self,
        w: &mut impl Waiter,
        j: usize,
        from: u64,
        into: &mut [u8],
    ) -> Result<(), AreaError> {
        // SAFETY: the caller's promise.
        unsafe { w.pull(self.world_of(j), from, into) }
            .map_err(|e| AreaError::Copy(copy_failed(e, j, into.len())))
    }

    /// All-to-all with equal blocks by single copies, each block copied once by whichever of
    /// its two members gets to it first ([`NodeArea::exchange_by_copies`]): `src` holds a
    /// block for each member, `dst` gets member j's block for me as its block j.
    pub fn alltoall_by_copies(
        &mut self,
        w: &mut impl Waiter,
        src: &[u8],
        dst: &mut [u8],
    ) -> Result<(), AreaError> {
        let len = src.len() / self.n();
        self.exchange_by_copies(w, src, dst, len, len)
    }

    /// Whether an allgather of `len`-byte blocks goes by single copies
    /// ([`NodeArea::allgather_by_copies`]): [`allgather_by_copies_fits`], with the bound the
    /// area agreed on ([`NodeArea::agree_on_single_copy`]).
    #[inline]
    pub fn allgather_by_copies_applies(&self, len: usize) -> bool {
        self.copies_over
            .is_some_and(|over| allgather_by_copies_fits(self.n(), len, over))
    }

    /// Allgather by single copies: every member's `src` (one block) into every member's
    /// `dst` at its rank's block, each copy claimed and made as in
    /// [`NodeArea::alltoall_by_copies`] (the same block for every member instead of one per
    /// member). Through the area each block was written once and read by every other member;
    /// so, each is copied once per reader, by the reader or by its writer (measured at
    /// [`ALLGATHER_COPIES_FROM`]).
    pub fn allgather_by_copies(
        &mut self,
        w: &mut impl Waiter,
        src: &[u8],
        dst: &mut [u8],
    ) -> Result<(), AreaError> {
        self.exchange_by_copies(w, src, dst, src.len(), 0)
    }

    /// [`NodeArea::alltoall_by_copies`] and [`NodeArea::allgather_by_copies`]: `dst` gets a
    /// `len`-byte block from each member, member j's from j's `src` at `me × stride` (its
    /// block for me: `stride` is `len` in an all-to-all, 0 in an allgather, where every
    /// member gets the same block). Every member says where its `src` and `dst` lie; then it
    /// copies its blocks for the others into their `dst` (pushes; none in an all-to-all that
    /// [`NodeArea::let_receivers_copy`] names), its own block, and the
    /// blocks meant for it from the others' `src` (pulls), each copy claimed first in the
    /// destination's [`Mark::Claimed`] set, so that a member with a CPU does the copies of
    /// members that wait for one (ranks outnumbering cores). A member leaves once every copy
    /// into its `dst` and out of its `src` is done: no barrier.
    ///
    /// Pushes first: a program has usually just written its `src`, whose lines are then in
    /// its own CPU's cache, where a pull must take them from another CPU's one by one. On the
    /// Intel VM (`bench/ab.py`, interleaved, every line of the send data written before each
    /// call; µs, pulls first against pushes first): 2 ranks, all-to-all of 64 KiB blocks 17.9
    /// against 9.7, 1 MiB 272 against 248, allgather of 1 MiB 247 against 173; 4 ranks,
    /// all-to-all of 64 KiB 66.6 against 55.8, 256 KiB 296 against 267-300. With one word
    /// per 4 KiB written (the benchmark's way above 64 KiB) the order made no difference
    /// beyond the noise.
    ///
    /// Sizes that differ are seen alike by every member (each reads every member's sizes
    /// before any copy): then none copies, and each reports the first member whose size
    /// differs from its own. A failed copy is reported by the member that made it and by the
    /// member whose block it was to fill; everything else still completes.
    fn exchange_by_copies(
        &mut self,
        w: &mut impl Waiter,
        src: &[u8],
        dst: &mut [u8],
        len: usize,
        stride: usize,
    ) -> Result<(), AreaError> {
        let (n, me) = (self.n(), self.me);
        // The others write my `dst` as far as their blocks for me, as long as mine, reach: a
        // `dst` of another length than n blocks is said as a size no member has, so that
        // nobody copies.
        let src_len = if stride == 0 { len } else { n * len };
        let fits = dst.len() == n * len && src.len() == src_len;
        let said_len = if fits { src.len() as u64 } else { u64::MAX };
        self.lend(&[src, dst]);
        let words = [src.as_ptr() as u64, said_len, dst.as_mut_ptr() as u64];
        let (k, sizes) = self.say_where(w, &words);
        sizes.map_err(AreaError::Sizes)?;
        if !fits {
            return Err(AreaError::Sizes(SizeMismatch {
                member: me,
                theirs: dst.len(),
                mine: n * len,
            }));
        }
        for j in (0..n).filter(|&j| j != me) {
            same_size(j, self.said(j, k, 1) as usize, src.len())?;
        }
        let block = |m: usize| m * stride..m * stride + len;
        let mut failed = None;
        let whole = (n * n).saturating_mul(len).saturating_mul(2);
        let pushes = if stride != 0 && whole <= self.receivers_copy_up_to { 1 } else { n };
        for step in 1..pushes {
            let m = (me + step) % n;
            let into = self.said(m, k, 2) + (me * len) as u64;
            // SAFETY: member m lent its `dst` (n blocks as long as mine, so my block's place
            // lies inside it) until every copy into it is marked done, this one among them.
            let r = unsafe { self.push_claimed(w, m, k, into, &src[block(m)]) };
            failed = failed.or(r);
        }
        copy_own_block(&src[block(me)], dst, me * len);
        for step in 1..n {
            let j = (me + step) % n;
            let from = self.said(j, k, 0) + (me * stride) as u64;
            // SAFETY: member j lent its `src` (as long as mine, so its block for me lies
            // inside it) until every copy out of it is marked done, this one among them.
            let r = unsafe { self.pull_claimed(w, j, k, from, &mut dst[j * len..(j + 1) * len]) };
            failed = failed.or(r);
        }
        let all_done = |a: &NodeArea| {
            (0..n).all(|j| j == me || a.is_marked(Mark::Done, j, me, k) && a.is_marked(Mark::Done, me, j, k))
        };
        if !all_done(self) {
            w.wait_until(&mut || all_done(self));
        }
        if failed.is_none() {
            if let Some(j) = (0..n).find(|&j| j != me && self.is_marked(Mark::Failed, j, me, k)) {
                failed = Some(self.not_copied(j, len));
            }
        }
        failed.map_or(Ok(()), Err)
    }

    /// Whether a gather with blocks of `len` bytes goes by single copies
    /// ([`NodeArea::gather_by_copies`]): as for a scatter ([`NodeArea::scatter_by_copies_applies`]).
    #[inline]
    pub fn gather_by_copies_applies(&self, len: usize) -> bool {
        self.n() <= MOST_MARKED && self.scatter_by_copies_applies(len)
    }

    /// Gather of equal blocks to `root` by claimed single copies: the root says where its
    /// `dst` lies, every other member where its `src` lies; each block is copied once, by the
    /// root (a pull) or by its member (a push), whichever claims it first
    /// ([`NodeArea::alltoall_by_copies`]'s marks). A member leaves once its block is marked
    /// done, the root once every block is. A member whose size differs from the root's is
    /// seen by both, and neither copies its block; a failed copy is reported by the member
    /// that made it, and by the root when its block did not arrive.
    pub fn gather_by_copies(
        &mut self,
        w: &mut impl Waiter,
        root: usize,
        src: &[u8],
        dst: &mut [u8],
    ) -> Result<(), AreaError> {
        let (n, me, len) = (self.n(), self.me, src.len());
        if me != root {
            self.lend(&[src]);
            let k = self.say(w, &[src.as_ptr() as u64, src.len() as u64]);
            self.wait_data(w, k, root..root + 1);
            self.check(k, root..root + 1, 16)?;
            same_size(root, self.said(root, k, 1) as usize, n * len)?;
            let into = self.said(root, k, 0) + (me * len) as u64;
            // SAFETY: the root lent its `dst` (`n * len` bytes, so my block's place lies inside
            // it) until every block is marked done, this one among them.
            let failed = unsafe { self.push_claimed(w, root, k, into, src) };
            if !self.is_marked(Mark::Done, me, root, k) {
                w.wait_until(&mut || self.is_marked(Mark::Done, me, root, k));
            }
            return failed.map_or(Ok(()), Err);
        }
        self.lend(&[dst]);
        let k = self.say(w, &[dst.as_mut_ptr() as u64, dst.len() as u64]);
        dst[root * len..(root + 1) * len].copy_from_slice(src);
        self.wait_data(w, k, 0..n);
        let mut failed = None;
        let mut coming = vec![false; n];
        for step in 1..n {
            let j = (root + step) % n;
            let fits = self.check(k, j..j + 1, 16).map_err(AreaError::Sizes);
            if let Err(e) = fits.and_then(|()| same_size(j, self.said(j, k, 1) as usize, len)) {
                failed = failed.or(Some(e));
                continue;
            }
            coming[j] = true;
            let from = self.said(j, k, 0);
            // SAFETY: member j lent its `src` (`len` bytes, checked) until its block is marked
            // done.
            let r = unsafe { self.pull_claimed(w, j, k, from, &mut dst[j * len..(j + 1) * len]) };
            failed = failed.or(r);
        }
        let all_done = |a: &NodeArea| (0..n).all(|j| !coming[j] || a.is_marked(Mark::Done, j, root, k));
        if !all_done(self) {
            w.wait_until(&mut || all_done(self));
        }
        if failed.is_none() {
            if let Some(j) = (0..n).find(|&j| coming[j] && self.is_marked(Mark::Failed, j, root, k)) {
                failed = Some(self.not_copied(j, len));
            }
        }
        failed.map_or(Ok(()), Err)
    }

    /// The error of a member whose block from member j did not arrive (`len` bytes): member j
    /// failed to copy it.
    fn not_copied(&self, j: usize, len: usize) -> AreaError {
        AreaError::Copy(crate::Error::new(
            crate::ErrorClass::Internal,
            "single-copy transfer",
            format!(
                "member {j} of the node-shared area could not copy its block of {len} bytes \
                 into this member's buffer"
            ),
        ))
    }

    /// Copies member j's block at address `from` into `into` (in this member's buffer) in
    /// collective k if this member claims that copy first, and marks it done; returns the
    /// copy's error.
    ///
    /// # Safety
    /// As for [`Waiter::pull`]: member j lent that block until the copy is marked done.
    unsafe fn pull_claimed(
        &self,
        w: &mut impl Waiter,
        j: usize,
        k: u64,
        from: u64,
        into: &mut [u8],
    ) -> Option<AreaError> {
        if !self.claim(j, self.me, k) {
            return None;
        }
        // SAFETY: the caller's promise.
        let r = unsafe { self.copy_from(w, j, from, into) };
        self.done(w, j, self.me, k, r.is_err());
        r.err()
    }

    /// Copies `src` (this member's block for member m) to address `into` in m's buffer in
    /// collective k if this member claims that copy first, and marks it done; returns the
    /// copy's error.
    ///
    /// # Safety
    /// As for [`Waiter::push`]: member m lent that place until the copy is marked done (no
    /// other member writes it: only the claimant copies).
    unsafe fn push_claimed(
        &self,
        w: &mut impl Waiter,
        m: usize,
        k: u64,
        into: u64,
        src: &[u8],
    ) -> Option<AreaError> {
        if !self.claim(self.me, m, k) {
            return None;
        }
        // SAFETY: the caller's promise; the claim makes this the one copy into that place.
        let r = unsafe { self.copy_to(w, m, into, src) };
        self.done(w, self.me, m, k, r.is_err());
        r.err()
    }

    /// Claims the copy of member `from`'s block into member `to`'s buffer in collective k
    /// (by collectives by claims: [`NodeArea::alltoall_by_copies`]): true for the one member
    /// that claims it first.
    fn claim(&self, from: usize, to: usize, k: u64) -> bool {
        let (word, bit) = self.mark(Mark::Claimed, from, to, k);
        // Relaxed: the claim orders nothing, it only elects one member; the copy's data is
        // published by the Release in `done`.
        word.fetch_or(bit, Ordering::Relaxed) & bit == 0
    }

    /// Marks the copy of member `from`'s block into member `to`'s buffer in collective k done
    /// (and `failed` or not), and wakes the other member of the two.
    fn done(&self, w: &mut impl Waiter, from: usize, to: usize, k: u64, failed: bool) {
        if failed {
            let (word, bit) = self.mark(Mark::Failed, from, to, k);
            // Relaxed: published by the Release below.
            word.fetch_or(bit, Ordering::Relaxed);
        }
        let (word, bit) = self.mark(Mark::Done, from, to, k);
        // Release: pairs with the Acquire load in `is_marked`, so `to` sees its block (written
        // before, by this member's system call) and `from` may reuse its buffer.
        word.fetch_or(bit, Ordering::Release);
        let other = if from == self.me { to } else { from };
        w.wake_all(&[self.world_of(other)]);
    }

    /// Whether the copy of member `from`'s block into member `to`'s buffer in collective k is
    /// marked `mark`.
    fn is_marked(&self, mark: Mark, from: usize, to: usize, k: u64) -> bool {
        let (word, bit) = self.mark(mark, from, to, k);
        // Acquire: pairs with the Release in `done`.
        word.load(Ordering::Acquire) & bit != 0
    }

    /// The word and bit of set `mark` for the copy of member `from`'s block into member
    /// `to`'s buffer in collective k: in `to`'s slot for k, after its first line (which holds
    /// what it said), a set of `n` bits per mark.
    fn mark(&self, mark: Mark, from: usize, to: usize, k: u64) -> (&AtomicU64, u64) {
        let words = self.n().div_ceil(64);
        (self.mark_word(to, k, mark as usize * words + from / 64), 1 << (from % 64))
    }

    /// Word i of the sets of marks in member `to`'s slot for collective k.
    fn mark_word(&self, to: usize, k: u64, i: usize) -> &AtomicU64 {
        let at = 64 + 8 * i;
        debug_assert!(at + 8 <= super::SLOT_BYTES);
        // SAFETY: an 8-aligned word of member `to`'s slot for k (64-aligned, `SLOT_BYTES`
        // long), inside the mapping, which lives as long as `self`; accessed only atomically.
        // `to` clears it when it says where its buffers lie (`say`), before the Release of
        // its slot's sequence number that every other member sees before it marks or reads it.
        unsafe { &*(self.slot_line(to, k).wrapping_add(at) as *const AtomicU64) }
    }

    /// Copies `src` to address `into` in member m's memory, reporting a failure as the error
    /// of this member's collective.
    ///
    /// # Safety
    /// As for [`Waiter::push`]: member m lent that buffer for this copy.
    unsafe fn copy_to(
        &self,
        w: &mut impl Waiter,
        m: usize,
        into: u64,
        src: &[u8],
    ) -> Result<(), AreaError> {
        // SAFETY: the caller's promise.
        unsafe { w.push(self.world_of(m), into, src) }
            .map_err(|e| AreaError::Copy(copy_failed(e, m, src.len())))
    }

    /// Whether a scatter with blocks of `len` bytes goes by single copies
    /// ([`NodeArea::scatter_by_copies`]): when the members can copy from each other's memory
    /// and the blocks are larger than the bound the area was made with (the eager limit).
    #[inline]
    pub fn scatter_by_copies_applies(&self, len: usize) -> bool {
        self.copies_over.is_some_and(|over| len > over)
    }

    /// Scatter of equal blocks by single copies: the root says where its `src` lies and every
    /// other member copies its block straight from there into `dst`; then every member says
    /// it is done and the root waits for all (a second collective of the area), so that it
    /// keeps `src` lent until no member copies from it. The others need not wait for each
    /// other. A member that finds an error (sizes that differ, a failed copy) still says it
    /// is done, and reports it after.
    pub fn scatter_by_copies(
        &mut self,
        w: &mut impl Waiter,
        root: usize,
        src: &[u8],
        dst: &mut [u8],
    ) -> Result<(), AreaError> {
        let (n, len) = (self.n(), dst.len());
        let mut failed = None;
        if self.me == root {
            self.lend(&[src]);
            self.say(w, &[src.as_ptr() as u64, src.len() as u64]);
            dst.copy_from_slice(&src[root * len..(root + 1) * len]);
        } else {
            let k = self.put_nothing(w);
            self.wait_data(w, k, root..root + 1);
            failed = self.check(k, root..root + 1, 16).err().map(AreaError::Sizes);
            if failed.is_none() {
                failed = same_size(root, self.said(root, k, 1) as usize, len * n).err();
            }
            if failed.is_none() {
                let from = self.said(root, k, 0) + (self.me * len) as u64;
                // SAFETY: the root lent its `src` (`len * n` bytes, so my block lies inside
                // it) until every member has said it is done below, which this one does only
                // after its copy.
                failed = unsafe { self.copy_from(w, root, from, dst) }.err();
            }
        }
        let k = self.put_nothing(w);
        if self.me == root {
            self.wait_all(w, k, 0..n);
        }
        failed.map_or(Ok(()), Err)
    }

    /// Whether an allreduce of `len` bytes per member with an operation that is `commutative`
    /// or not goes by single copies ([`ALLREDUCE_COPIES_FROM`]).
    #[inline]
    pub fn allreduce_by_copies_applies(&self, len: usize, commutative: bool) -> bool {
        len >= ALLREDUCE_COPIES_FROM && self.two_can_fold_by_copies(commutative)
    }

    /// Whether a reduce-scatter with blocks of `len` bytes and an operation that is
    /// `commutative` or not goes by single copies ([`REDUCE_SCATTER_COPIES_FROM`]).
    #[inline]
    pub fn reduce_scatter_by_copies_applies(&self, len: usize, commutative: bool) -> bool {
        len >= REDUCE_SCATTER_COPIES_FROM && self.two_can_fold_by_copies(commutative)
    }

    /// Whether a reduction may go by single copies at all: on 2 members that can copy from
    /// each other's memory, with a commutative operation (each member folds its own data into
    /// the other's, on the left at one member and on the right at the other).
    fn two_can_fold_by_copies(&self, commutative: bool) -> bool {
        commutative && self.n() == 2 && self.copies_over.is_some()
    }

    /// Allreduce on 2 members by single copies, with a commutative operation: each member
    /// copies the other's half of its slice (member 0 the first half of the elements, member
    /// 1 the rest) from the other's `src` into its `dst` and folds its own into it; once both
    /// have (the second collective of the area, which says whether they could), each copies
    /// the other's slice of the result from the other's `dst`; a barrier last, so that
    /// neither leaves while the other still copies from it. Each slice is folded once, by
    /// one member, so both get bit-identical results.
    pub fn allreduce_by_copies(
        &mut self,
        w: &mut impl Waiter,
        src: &[u8],
        dst: &mut [u8],
        combine: &Combine,
        elem: usize,
    ) -> Result<(), AreaError> {
        debug_assert_eq!(self.n(), 2);
        let other = 1 - self.me;
        self.lend(&[src, dst]);
        let words = [src.as_ptr() as u64, dst.as_ptr() as u64, src.len() as u64];
        let (k, sizes) = self.say_where(w, &words);
        let mut failed = sizes.err().map(AreaError::Sizes);
        let (at_src, at_dst) = (self.said(other, k, 0), self.said(other, k, 1));
        if failed.is_none() {
            failed = same_size(other, self.said(other, k, 2) as usize, src.len()).err();
        }
        let slices = [0, 1].map(|j| super::slice_of(src.len(), elem, 2, j));
        let (mine, theirs) = (slices[self.me].clone(), slices[other].clone());
        if failed.is_none() {
            let into = &mut dst[mine.clone()];
            // SAFETY: the other member lent its `src` (as long as mine) until it has seen this
            // member's answer below, which comes after the copy.
            failed = unsafe { self.copy_from(w, other, at_src + mine.start as u64, into) }.err();
            if failed.is_none() {
                combine(&src[mine], &mut dst[slices[self.me].clone()]);
            }
        }
        let mut folded = [0u8; 2];
        if self.gather(w, None, &[u8::from(failed.is_none())], &mut folded).is_ok()
            && folded[other] == 0
            && failed.is_none()
        {
            failed = Some(AreaError::Copy(crate::Error::new(
                crate::ErrorClass::Internal,
                "single-copy transfer",
                format!("member {other} of the node-shared area failed to fold its slice"),
            )));
        }
        if failed.is_none() {
            let from = at_dst + theirs.start as u64;
            // SAFETY: the other member lent its `dst`, which holds its slice of the result now
            // (it said so above), until it has seen this member at the barrier below.
            failed = unsafe { self.copy_from(w, other, from, &mut dst[theirs]) }.err();
        }
        self.barrier(w);
        failed.map_or(Ok(()), Err)
    }

    /// Reduce-scatter with equal blocks on 2 members by single copies, with a commutative
    /// operation: each member copies its block of the other's `src` into its `dst` and folds
    /// its own block into it; then a barrier, so that neither leaves while the other still
    /// copies from it.
    pub fn reduce_scatter_by_copies(
        &mut self,
        w: &mut impl Waiter,
        src: &[u8],
        dst: &mut [u8],
        combine: &Combine,
    ) -> Result<(), AreaError> {
        debug_assert_eq!(self.n(), 2);
        let other = 1 - self.me;
        self.lend(&[src]);
        let (k, sizes) = self.say_where(w, &[src.as_ptr() as u64, src.len() as u64]);
        let mut failed = sizes.err().map(AreaError::Sizes);
        if failed.is_none() {
            failed = same_size(other, self.said(other, k, 1) as usize, src.len()).err();
        }
        let len = dst.len();
        let mine = self.me * len..(self.me + 1) * len;
        if failed.is_none() {
            let from = self.said(other, k, 0) + mine.start as u64;
            // SAFETY: the other member lent its `src` (as long as mine) until it has seen this
            // member at the barrier below.
            failed = unsafe { self.copy_from(w, other, from, dst) }.err();
            if failed.is_none() {
                combine(&src[mine], dst);
            }
        }
        self.barrier(w);
        failed.map_or(Ok(()), Err)
    }
}

/// `Err` when member j's input (`theirs` bytes) is not as long as this member's (`mine`).
fn same_size(j: usize, theirs: usize, mine: usize) -> Result<(), AreaError> {
    if theirs == mine {
        return Ok(());
    }
    Err(AreaError::Sizes(SizeMismatch {
        member: j,
        theirs,
        mine,
    }))
}

/// The error of a single copy of `len` bytes from member `j` that failed.
/// Outputs of at least this many bytes take the member's own block by non-temporal stores in
/// the collectives by copies ([`copy_own_block`]): such data does not stay in the caches, and
/// ordinary stores would read every line of the output first. Lower than the schedules' own
/// block copy's bound ([`crate::coll::alltoall::STREAM_OWN_FROM`]), measured here: on the
/// Intel VM (`bench/ab.py -n 2`, interleaved, µs, ordinary stores against non-temporal), an
/// all-to-all of 1 MiB blocks (2 MiB outputs) 175 against 154, an allgather 133 against 115;
/// of 2 MiB blocks 371 against 342, of 4 MiB 755 against 696. With 1 MiB outputs (512 KiB
/// blocks) the non-temporal stores lost (all-to-all 56.5 against 63.6); at 4 ranks 512 KiB
/// blocks (2 MiB outputs) they made no difference beyond the noise.
pub const STREAM_OWN_FROM: usize = 2 << 20;

/// Copies this member's own block `from` into `dst` at `at`: by non-temporal stores when
/// `dst` holds [`STREAM_OWN_FROM`] bytes or more.
fn copy_own_block(from: &[u8], dst: &mut [u8], at: usize) {
    let stream = dst.len() >= STREAM_OWN_FROM;
    let to = &mut dst[at..at + from.len()];
    if stream {
        // SAFETY: `from` and `to` are `from.len()` bytes each, and do not overlap (one is
        // borrowed shared, the other mutably).
        unsafe { crate::sys::cpu::copy_streaming(from.as_ptr(), to.as_mut_ptr(), from.len()) }
    } else {
        to.copy_from_slice(from);
    }
}

fn copy_failed(e: crate::fabric::PullError, j: usize, len: usize) -> crate::Error {
    match e {
        crate::fabric::PullError::Failed(e) => e,
        // Not expected: the members agreed that copies work when the area was made.
        crate::fabric::PullError::Unsupported => crate::Error::new(
            crate::ErrorClass::Internal,
            "single-copy transfer",
            format!(
                "a single copy of {len} bytes from member {j} of the node-shared area was \
                 refused, though such copies worked when the area was made"
            ),
        ),
    }
}
