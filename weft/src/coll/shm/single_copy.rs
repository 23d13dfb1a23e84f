//! All-to-alls of large blocks by single copies: every member says in the area where its
//! input lies and copies its blocks straight from the others' inputs into its output
//! (`process_vm_readv`), so each block is copied once, where through the area's buffers it
//! would be copied twice (in by its writer, out by its reader). The area carries only the
//! addresses and the flags; whether the members may copy from each other's memory at all (a
//! seccomp filter, Yama's ptrace scope or `WEFT_SHM_SINGLE_COPY=0` may forbid it) they find
//! out by trying when the area is made ([`NodeArea::agree_on_single_copy`]).
//!
//! Measured on the Intel VM (`bench/ab.py`, µs, through the area's buffers → by single
//! copies; Open MPI 5 beside): 4 ranks on 2 CPUs, 64 KiB blocks 78 → 54 (58), 256 KiB 349 →
//! 285 (295); 8 ranks, 64 KiB 359 → 329 (386); 2 ranks, 4 MiB 1,004 → 912 (984, by messages
//! before). Below the eager limit the system call costs more than the second copy: 2 ranks,
//! 32 KiB blocks 8.0 through the area against 11.9.

use super::{AreaError, NodeArea, SizeMismatch, Waiter};

/// What a member's probe word holds (with its member rank folded in), for the next member to
/// copy and check in [`NodeArea::agree_on_single_copy`].
const PROBE_WORD: u64 = 0x5eed_c0de_0000_0000;

/// The bytes a member writes into its slot for an all-to-all by single copies: where its input
/// lies, and how long it is.
const SAID: usize = 16;

impl NodeArea {
    /// Whether an all-to-all writing `writes` bytes per member goes by single copies
    /// ([`NodeArea::alltoall_by_copies`]): when the members can copy from each other's memory
    /// and its blocks are larger than the bound the area was made with (the eager limit:
    /// where a message would go by a single copy too).
    #[inline]
    pub fn alltoall_by_copies_applies(&self, writes: usize) -> bool {
        self.copies_over.is_some_and(|over| writes / self.n() > over)
    }

    /// Finds out, with the other members, whether every member can copy from the next one's
    /// memory, and if so lets all-to-alls of blocks larger than `over` bytes go by single
    /// copies. Every member tries a copy of a word of the next member's memory, then all
    /// gather what they found: two collectives of the area, once per area. Nothing when
    /// `allowed` is false (the same at every member: a tunable).
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

    /// All-to-all with equal blocks by single copies: `src` holds a block for each member;
    /// `dst` gets member j's block for me at block j, copied straight from j's `src`. Every
    /// member publishes where its `src` lies, copies its block from every other member's (the
    /// next member's first, so that not all copy from one at once), then waits until every
    /// member has copied from its own (a barrier: a second collective of the area). A member
    /// that finds an error (sizes that differ, a failed copy) still joins the barrier, so
    /// that the others neither wait forever nor lose count, and reports it after.
    pub fn alltoall_by_copies(
        &mut self,
        w: &mut impl Waiter,
        src: &[u8],
        dst: &mut [u8],
    ) -> Result<(), AreaError> {
        let n = self.n();
        let len = src.len() / n;
        let mut said = [0u8; SAID];
        said[..8].copy_from_slice(&(src.as_ptr() as u64).to_ne_bytes());
        said[8..].copy_from_slice(&(src.len() as u64).to_ne_bytes());
        let k = self.put(w, &said);
        self.wait_data(w, k, 0..n);
        let mut failed = self.check(k, 0..n, SAID).err().map(AreaError::Sizes);
        for step in 1..n {
            if failed.is_some() {
                break;
            }
            let j = (self.me + step) % n;
            let theirs = self.read(j, k, SAID);
            let at = u64::from_ne_bytes(theirs[..8].try_into().expect("8 bytes"));
            let whole = u64::from_ne_bytes(theirs[8..].try_into().expect("8 bytes")) as usize;
            if whole != src.len() {
                failed = Some(AreaError::Sizes(SizeMismatch {
                    member: j,
                    theirs: whole,
                    mine: src.len(),
                }));
                break;
            }
            let into = &mut dst[j * len..(j + 1) * len];
            let from = at + (self.me * len) as u64;
            // SAFETY: member j lent its `src` (`whole` bytes at `at`, as long as mine, so my
            // block lies inside it) until every member has joined the barrier below, which
            // this one does only after its copies.
            if let Err(e) = unsafe { w.pull(self.world_of(j), from, into) } {
                failed = Some(AreaError::Copy(copy_failed(e, j, len)));
            }
        }
        if failed.is_none() {
            let mine = self.me * len..(self.me + 1) * len;
            dst[mine.clone()].copy_from_slice(&src[mine]);
        }
        self.barrier(w);
        failed.map_or(Ok(()), Err)
    }
}

/// The error of a single copy of `len` bytes from member `j` that failed.
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
