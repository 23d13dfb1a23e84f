//! A window whose members are all on this node, over one node-shared segment (the flavour of
//! `MPI_Win_allocate` and `MPI_Win_allocate_shared`): every origin reaches every target's part
//! with plain loads and stores and the CPU's atomics, and takes passive-target locks in the
//! target's lock word, with no help from the target (issue 12, items 1, 4, 5 and 6).
//!
//! The segment starts with a header of one [`Entry`] per member: its lock word alone on a
//! pair of cache lines, then its part's offset, size and displacement unit (written once by
//! the member at creation, read by everyone after). The parts follow, contiguous in rank
//! order (as `MPI_Win_allocate_shared` lays them out by default). What a process keeps is the
//! segment and the window's own communicator: nothing per target (004's first goal); what
//! every member must know of the others is in the node's one header.
//!
//! Synchronization follows MPICH's design for shared-memory windows (reference document 004,
//! "RMA + shared memory"): a full barrier (`MEM_SYNC`) before and after the barrier of a fence,
//! after a lock is granted and before it is released, and in a flush.

use super::atomic;
use super::lock::{LockKind, LockWord};
use crate::coll::op::{Basic, SysOp};
use crate::comm::context::ContextMask;
use crate::comm::node_memory::{Allocated, NodeSegment};
use crate::comm::{self, CommData};
use crate::engine::Engine;
use crate::error::{Error, ErrorClass, Result};
use crate::fabric::Fabric;
use std::sync::atomic::{fence, Ordering::SeqCst};

/// Tags on the window's own collective context, for its creation.
const TAG_SIZES: i32 = -64;
const TAG_SEGMENT: i32 = -65;

/// A member's entry in the header.
#[repr(C, align(128))]
struct Entry {
    /// The member's passive-target lock.
    lock: LockWord,
    /// Where its part starts, from the segment's start.
    offset: u64,
    /// Its part's bytes.
    size: u64,
    /// Its displacement unit, in bytes.
    disp_unit: u64,
}

/// Where the first part starts within a page: half a page in. The program's large buffers
/// come from `malloc`'s mapped chunks, 16 bytes past a page boundary; a copy into one from a
/// page-aligned part (a get) has its later loads 16 bytes past its earlier stores modulo 4 KiB,
/// which the CPU takes for a dependence and stalls on ("4K aliasing": 4 KiB gets ran at half
/// the speed of puts). Half a page apart, neither direction aliases.
const PART_SKEW: usize = 2048;

/// The header's bytes for `n` members: whole pages, then [`PART_SKEW`].
fn header_len(n: usize) -> usize {
    (n * std::mem::size_of::<Entry>()).next_multiple_of(4096) + PART_SKEW
}

/// One member's view of a same-node window.
#[derive(Debug)]
pub struct WindowData {
    /// The window's own communicator (a duplicate of the one it was made over): its fences'
    /// barriers and its creation's messages travel on its contexts.
    comm: CommData,
    seg: NodeSegment,
}

/// Where one target's part is.
#[derive(Clone, Copy, Debug)]
pub struct Part {
    /// Its first byte.
    pub base: *mut u8,
    /// Its bytes.
    pub size: usize,
    /// Its displacement unit.
    pub disp_unit: usize,
}

impl WindowData {
    /// `MPI_Win_allocate(size, disp_unit)` over `comm`, collective: this member's part is
    /// `size` zeroed bytes. `node_of[w]` is world rank `w`'s node; every member must be on this
    /// one (windows across nodes come later: an Unsupported error, at every member alike).
    pub fn allocate<F: Fabric>(
        eng: &mut Engine<F>,
        mask: &mut ContextMask,
        comm: &CommData,
        node_of: &[u32],
        size: usize,
        disp_unit: usize,
    ) -> Result<WindowData> {
        const CALL: &str = "Win_allocate";
        if comm.remote.is_some() {
            return Err(Error::new(
                ErrorClass::Comm,
                CALL,
                "windows are made over intracommunicators, and this is an intercommunicator",
            ));
        }
        if disp_unit == 0 {
            return Err(Error::new(
                ErrorClass::Arg,
                CALL,
                "the displacement unit is 0; it must be positive",
            ));
        }
        let topo = comm.node_topology(node_of);
        if !topo.single_node() {
            return Err(Error::unsupported(
                CALL,
                format!(
                    "this communicator's members are on {} nodes; windows over members on \
                     several nodes are not built yet (same-node windows only: issue 12)",
                    topo.leaders.len()
                ),
            ));
        }
        let own = comm::dup(eng, mask, comm)?;
        match Self::lay_out(eng, &own, size, disp_unit) {
            Ok(seg) => Ok(WindowData { comm: own, seg }),
            Err(e) => {
                mask.release(own.pair);
                Err(e)
            }
        }
    }

    /// Agrees on the parts' sizes, makes the segment and writes this member's entry.
    fn lay_out<F: Fabric>(
        eng: &mut Engine<F>,
        own: &CommData,
        size: usize,
        disp_unit: usize,
    ) -> Result<NodeSegment> {
        const CALL: &str = "Win_allocate";
        let members = own.group.members();
        let (n, me) = (members.len(), own.rank as usize);
        let ctx = own.coll_context();
        let mine = (size as u64).to_ne_bytes();
        let sizes = comm::allgather_among(eng, ctx, TAG_SIZES, members, me, &mine)?;
        let size_of = |r: usize| {
            u64::from_ne_bytes(sizes[r * 8..r * 8 + 8].try_into().expect("8 bytes")) as usize
        };
        let offset = header_len(n) + (0..me).map(size_of).sum::<usize>();
        let total = header_len(n) + (0..n).map(size_of).sum::<usize>();
        let seg = match NodeSegment::allocate(eng, ctx, TAG_SEGMENT, members, me, total)? {
            Allocated::Made(seg) => seg,
            Allocated::Unmade(why) => {
                return Err(Error::new(
                    ErrorClass::Resource,
                    CALL,
                    why.unwrap_or_else(|| {
                        format!("rank 0 could not make the window's memory ({total} bytes)")
                    }),
                ))
            }
        };
        // SAFETY: the header holds `n` entries (`header_len`), the segment is page-aligned,
        // and only this member writes its own entry's plain fields, before the barrier below;
        // everyone reads them only after it.
        unsafe {
            let entry = (seg.as_ptr() as *mut Entry).add(me);
            std::ptr::addr_of_mut!((*entry).offset).write(offset as u64);
            std::ptr::addr_of_mut!((*entry).size).write(size as u64);
            std::ptr::addr_of_mut!((*entry).disp_unit).write(disp_unit as u64);
        }
        comm::barrier(eng, own)?;
        Ok(seg)
    }

    /// The number of members.
    pub fn size(&self) -> usize {
        self.comm.group.members().len()
    }

    /// The context pair of the window's own communicator (given back when it goes).
    pub fn comm_pair(&self) -> u32 {
        self.comm.pair
    }

    /// This member's rank in the window's group.
    pub fn rank(&self) -> usize {
        self.comm.rank as usize
    }

    fn entry(&self, target: usize) -> &Entry {
        debug_assert!(target < self.size());
        // SAFETY: `target` is a member (checked by every caller), so its entry lies in the
        // header; its plain fields were written before creation's barrier and never change,
        // and its lock word is only touched atomically.
        unsafe { &*(self.seg.as_ptr() as *const Entry).add(target) }
    }

    /// Checks that `target` is a member.
    fn check_target(&self, call: &'static str, target: i32) -> Result<usize> {
        match usize::try_from(target) {
            Ok(t) if t < self.size() => Ok(t),
            _ => Err(Error::new(
                ErrorClass::Rank,
                call,
                format!(
                    "target rank {target} is outside the window's group (size {})",
                    self.size()
                ),
            )),
        }
    }

    /// Where target `target`'s part is.
    pub fn part(&self, call: &'static str, target: i32) -> Result<Part> {
        let e = self.entry(self.check_target(call, target)?);
        Ok(Part {
            // SAFETY: the offset was laid out within the segment at creation.
            base: unsafe { self.seg.as_ptr().add(e.offset as usize) },
            size: e.size as usize,
            disp_unit: e.disp_unit as usize,
        })
    }

    /// The address of `len` bytes at displacement `disp` of target `target`'s part, checked
    /// to lie within it.
    pub fn span(&self, call: &'static str, target: i32, disp: isize, len: usize) -> Result<*mut u8> {
        let p = self.part(call, target)?;
        let start = usize::try_from(disp)
            .ok()
            .and_then(|d| d.checked_mul(p.disp_unit));
        match start {
            Some(s) if s.checked_add(len).is_some_and(|end| end <= p.size) => {
                // SAFETY: within the target's part (checked just above).
                Ok(unsafe { p.base.add(s) })
            }
            _ => Err(Error::new(
                ErrorClass::Disp,
                call,
                format!(
                    "displacement {disp} (unit {} bytes) and {len} bytes fall outside target \
                     {target}'s part of the window ({} bytes)",
                    p.disp_unit, p.size
                ),
            )),
        }
    }

    /// `MPI_Put` of contiguous bytes.
    pub fn put(&self, call: &'static str, target: i32, disp: isize, data: &[u8]) -> Result<()> {
        let at = self.span(call, target, disp, data.len())?;
        // SAFETY: `at` holds `data.len()` bytes of the mapped segment (checked by `span`), which
        // no Rust reference covers (`data` cannot point into it: the segment is only ever
        // reached through raw pointers).
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), at, data.len()) };
        Ok(())
    }

    /// `MPI_Get` into contiguous bytes.
    pub fn get(&self, call: &'static str, target: i32, disp: isize, out: &mut [u8]) -> Result<()> {
        let at = self.span(call, target, disp, out.len())?;
        // SAFETY: as in `put`, the other way.
        unsafe { std::ptr::copy_nonoverlapping(at, out.as_mut_ptr(), out.len()) };
        Ok(())
    }

    /// `MPI_Get_accumulate` of elements of `basic` (`MPI_Accumulate` when `old` is `None`):
    /// each element atomically, as the CPU's atomics do it.
    #[allow(clippy::too_many_arguments)]
    pub fn get_accumulate(
        &self,
        call: &'static str,
        target: i32,
        disp: isize,
        basic: Basic,
        op: SysOp,
        data: &[u8],
        mut old: Option<&mut [u8]>,
    ) -> Result<()> {
        let size = basic.size();
        let at = self.span(call, target, disp, data.len())?;
        let mut scratch = [0u8; 16];
        for (i, x) in data.chunks_exact(size).enumerate() {
            let out = match old.as_deref_mut() {
                Some(o) => &mut o[i * size..(i + 1) * size],
                None => &mut scratch[..size],
            };
            // SAFETY: element `i` lies within the span checked above, in the mapped segment,
            // which the window's members touch only atomically during accumulate epochs
            // (MPI's rule for concurrent accumulates).
            unsafe { atomic::fetch_and_op(basic, op, at.add(i * size), x, out) }
                .map_err(|e| Error::new(e.class, call, e.detail))?;
        }
        Ok(())
    }

    /// `MPI_Compare_and_swap` of one element of `basic`.
    #[allow(clippy::too_many_arguments)]
    pub fn compare_and_swap(
        &self,
        call: &'static str,
        target: i32,
        disp: isize,
        basic: Basic,
        compare: &[u8],
        swap: &[u8],
        old: &mut [u8],
    ) -> Result<()> {
        let at = self.span(call, target, disp, basic.size())?;
        // SAFETY: as in `get_accumulate`.
        unsafe { atomic::compare_and_swap(basic, at, compare, swap, old) }
            .map_err(|e| Error::new(e.class, call, e.detail))
    }

    /// `MPI_Win_lock(kind, target)`: waits until the target's lock word is ours, calling `idle`
    /// (progress, yield) while it is taken.
    pub fn lock(&self, call: &'static str, target: i32, kind: LockKind, idle: impl FnMut()) -> Result<()> {
        let t = self.check_target(call, target)?;
        self.entry(t).lock.lock(kind, idle);
        // MEM_SYNC after the lock is granted (004): our accesses come after the previous
        // holders' and after whatever the target did before its last synchronization.
        fence(SeqCst);
        Ok(())
    }

    /// `MPI_Win_unlock`: every access made is complete (they are all direct), so this
    /// releases the word.
    pub fn unlock(&self, call: &'static str, target: i32, kind: LockKind) -> Result<()> {
        let t = self.check_target(call, target)?;
        // MEM_SYNC before the lock is released (004).
        fence(SeqCst);
        self.entry(t).lock.unlock(kind);
        Ok(())
    }

    /// `MPI_Win_flush` (and `flush_local`, `flush_all`, `MPI_Win_sync`): operations on a
    /// same-node window complete as they are made, so this is the memory barrier that makes
    /// them visible before whatever this process does next.
    pub fn flush(&self) {
        fence(SeqCst);
    }

    /// `MPI_Win_fence`, collective: every member's operations of the epoch that ends are
    /// complete and visible everywhere when it returns.
    pub fn fence<F: Fabric>(&self, eng: &mut Engine<F>) -> Result<()> {
        fence(SeqCst);
        comm::barrier(eng, &self.comm)?;
        fence(SeqCst);
        Ok(())
    }

    /// `MPI_Win_free`, collective: waits for every member (so no one frees memory another
    /// still reaches), then gives back the window's contexts. The segment goes with the last
    /// member's mapping.
    pub fn free<F: Fabric>(self, eng: &mut Engine<F>, mask: &mut ContextMask) -> Result<()> {
        fence(SeqCst);
        let done = comm::barrier(eng, &self.comm);
        mask.release(self.comm.pair);
        done
    }
}
