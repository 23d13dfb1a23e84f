//! A window (issue 12, items 1, 2, 5, 6 and 8), in its four flavours, as its members on this
//! node share it; members on other nodes have a header of their own on theirs and are reached
//! by messages (`remote`), as every other member is when `WEFT_RMA_MESSAGES` forces it:
//!
//! - `allocate` and `allocate_shared`: the parts are Weft's memory, in one node-shared segment
//!   after the header, contiguous in rank order (as `MPI_Win_allocate_shared` lays them out);
//!   every origin on the node reaches every part there with plain loads, stores and the CPU's
//!   atomics (`allocate_shared` needs every member on one node);
//! - `create`: the parts are the program's memory, in each member's own address space; the
//!   segment holds only the header, and origins reach other members' parts by cross-memory
//!   copy (`process_vm_readv`/`writev`), with no help from the target; a part in memory from
//!   `MPI_Alloc_mem` (node-shared: `comm::program_memory`) is mapped by each origin on the
//!   node on first contact, and put and get there are plain copies (accumulates stay under
//!   the element locks, as on every `create` part);
//! - `dynamic`: as `create`, with no part at creation: members attach and detach regions, which
//!   origins name by address, and find in the target's region table in the header.
//!
//! The header holds one [`Entry`] per member: its passive-target lock word alone on a pair of
//! cache lines with its part's place (offset or address, size, displacement unit, process id),
//! then its element locks (for accumulates the CPU cannot do atomically on that memory: see
//! `access`). What a process keeps is the segment and the window's own communicator: nothing
//! per target (004's first goal); what every member must know of the others is in the node's
//! one header.
//!
//! Synchronization follows MPICH's design for shared-memory windows (reference document 004,
//! "RMA + shared memory"): a full barrier (`MEM_SYNC`) before and after the barrier of a fence,
//! after a lock is granted and before it is released, in a flush, and around the counts of
//! post-start-complete-wait (each member's entry counts the posts made to it as an origin and
//! the completions made to it as a target: no message, no help from the other side).

use super::access::{stripe_mask, Located, Reach, Spans};
use super::assert::Assert;
use super::gate;
use super::lock::{LockKind, LockWord};
use super::remote::Count;
use super::table::{ByRank, Limits, OpTable};
use crate::comm::context::ContextMask;
use crate::comm::node_memory::{Allocated, NodeSegment};
use crate::comm::program_memory;
use crate::comm::{self, CommData};
use crate::engine::request::Handle;
use crate::engine::Engine;
use crate::error::{Error, ErrorClass, Result};
use crate::fabric::Fabric;
use crate::tunables::Tunables;
use crate::sys::segment::Segment;
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::{fence, Ordering::Acquire, Ordering::Relaxed, Ordering::Release, Ordering::SeqCst};

/// Tags on the window's own collective context.
const TAG_SIZES: i32 = -64;
const TAG_SEGMENT: i32 = -65;

/// Element locks per member (accumulates hash their elements' pages over them).
pub(super) const STRIPES: usize = 16;

/// Regions a member of a dynamic window may have attached at once.
pub const MAX_REGIONS: usize = 1024;

/// Weft's values of the standard's window info keys (`MPI_Win_get_info`): every member may
/// lock, accumulates are ordered and may mix operations, sizes and units may differ, and
/// `allocate_shared`'s parts are contiguous.
pub const INFO: [(&str, &str); 6] = [
    ("no_locks", "false"),
    ("accumulate_ordering", "rar,raw,war,waw"),
    ("accumulate_ops", "same_op_no_op"),
    ("same_size", "false"),
    ("same_disp_unit", "false"),
    ("alloc_shared_noncontig", "false"),
];

/// How a window's memory was made (`MPI_WIN_CREATE_FLAVOR`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavor {
    /// `MPI_Win_create`: over the program's memory.
    Create,
    /// `MPI_Win_allocate`: Weft's memory.
    Allocate,
    /// `MPI_Win_allocate_shared`: Weft's memory, the neighbours' parts reachable by pointer.
    Shared,
    /// `MPI_Win_create_dynamic`: regions attached later.
    Dynamic,
}

impl Flavor {
    /// Whether the parts are in the window's node-shared segment.
    fn in_segment(self) -> bool {
        matches!(self, Flavor::Allocate | Flavor::Shared)
    }
}

/// A member's entry in the header.
#[repr(C, align(128))]
pub(super) struct Entry {
    /// The member's passive-target lock.
    pub(super) lock: LockWord,
    /// Where its part starts: from the segment's start (`allocate` flavours), or its address
    /// in the member's own process (`create`).
    offset: u64,
    /// Its part's bytes.
    size: u64,
    /// Its displacement unit, in bytes.
    disp_unit: u64,
    /// Its process id (for cross-memory copies).
    pid: u64,
    /// 1 when the member is on another node: of its entry, only `size` and `disp_unit` are
    /// known here (written by this node's first member), and everything else of it (its lock,
    /// its counts, its regions) is in its own node's header, reached by messages.
    off_node: u64,
    /// A dynamic window's region slots in use, at most (a high-water mark).
    regions_used: AtomicU64,
    /// Posts made to this member as an origin (`MPI_Win_post` by its targets), ever.
    pub(super) posts: AtomicU64,
    /// Completions made to this member as a target (`MPI_Win_complete` by its origins), ever.
    pub(super) completions: AtomicU64,
    /// When its part (a `create` window's) lies in node-shared memory (`MPI_Alloc_mem`'s):
    /// the segment's descriptor in its process + 1 (0: not node-shared), the segment's device
    /// and inode, and the part's offset in it. Origins on the node then map it.
    shared: [u64; 4],
    /// 1 while this member does the CPU's atomics on node-shared parts as an origin (see
    /// `gate`): written only by the member, read by lockers of element locks.
    atomics: AtomicU64,
    _pad: [u64; 2],
    /// Its element locks, for accumulates done under a lock (see `access`).
    stripes: [LockWord; STRIPES],
}

const _: () = assert!(std::mem::size_of::<Entry>() == 256);

/// One attached region of a dynamic window: its address and length (0: a free slot).
#[repr(C)]
struct Region {
    addr: AtomicU64,
    len: AtomicU64,
}

/// Where the first part starts within a page: half a page in. The program's large buffers
/// come from `malloc`'s mapped chunks, 16 bytes past a page boundary; a copy into one from a
/// page-aligned part (a get) has its later loads 16 bytes past its earlier stores modulo 4 KiB,
/// which the CPU takes for a dependence and stalls on ("4K aliasing": 4 KiB gets ran at half
/// the speed of puts). Half a page apart, neither direction aliases.
const PART_SKEW: usize = 2048;

/// The header's bytes for `n` members: entries, region tables for a dynamic window, whole
/// pages, then [`PART_SKEW`] when parts follow.
fn header_len(n: usize, flavor: Flavor) -> usize {
    let regions = if flavor == Flavor::Dynamic {
        n * MAX_REGIONS * std::mem::size_of::<Region>()
    } else {
        0
    };
    let skew = if flavor.in_segment() { PART_SKEW } else { 0 };
    (n * std::mem::size_of::<Entry>() + regions).next_multiple_of(4096) + skew
}

/// One member's view of a window.
#[derive(Debug)]
pub struct WindowData {
    /// The window's own communicator (a duplicate of the one it was made over): its fences'
    /// barriers, its creation's and post-start-complete-wait's messages travel on its
    /// contexts.
    comm: CommData,
    /// Its members (the communicator's size, kept here: every operation checks its target).
    members: usize,
    seg: NodeSegment,
    flavor: Flavor,
    /// Whether this member reaches every other member by active messages (the remote path,
    /// forced by `WEFT_RMA_MESSAGES` on one node), rather than those on its node directly.
    forced: bool,
    /// Whether some members are on other nodes (reached by messages whatever `forced` says).
    spans_nodes: bool,
    /// Of this member's entry's `posts` and `completions`, how many its epochs consumed.
    posts_seen: Cell<u64>,
    completions_seen: Cell<u64>,
    /// Whether this member did anything but the CPU's atomics on the window since its last
    /// memory barrier: a flush owes one then (see [`WindowData::flush_memory`]).
    fence_owed: Cell<bool>,
    /// Whether the program was handed pointers to other members' parts (`shared_query`):
    /// their loads and stores are protected by lock epochs then, so no lock is deferred.
    raw_access: Cell<bool>,
    /// What this member has in flight by messages, per target contacted.
    pub(super) table: OpTable,
    /// The node-shared parts of other members of a `create` window, mapped on first contact.
    mapped: RefCell<ByRank<Segment>>,
}

/// Where one target's part is, for `MPI_Win_shared_query` and the window attributes.
#[derive(Clone, Copy, Debug)]
pub struct Part {
    /// Its first byte (in this process for segment flavours; in the member's for `create`).
    pub base: *mut u8,
    /// Its bytes.
    pub size: usize,
    /// Its displacement unit.
    pub disp_unit: usize,
}

/// Bytes of a node-shared part mapped here ([`WindowData::shared_span`]): one element for the
/// CPU's atomics, or a block an accumulate combines in place.
#[derive(Clone, Copy, Debug)]
pub struct Mapped {
    /// Their address here.
    pub at: *mut u8,
    /// How many.
    pub len: usize,
    /// Their target.
    pub(super) target: usize,
    /// The element locks of the pages they touch, as a [`gate`] mask.
    pub(super) mask: u32,
}

/// An exposure epoch this member opened (`MPI_Win_post`): the completions it awaits, and the
/// posts to origins reached by messages not yet answered (`MPI_Win_post` does not block).
#[derive(Debug, Default)]
pub struct Exposure {
    expected: u64,
    posted: Vec<Handle>,
}

impl Drop for WindowData {
    fn drop(&mut self) {
        // A lock deferred on this window by an epoch the program forgot names it no more.
        super::lazy::forget_window(self);
    }
}

impl WindowData {
    /// Makes a window of `flavor` over `comm`, collective: this member's part is `size` bytes
    /// (zeroed, for the segment flavours) or, for `create`, the program's `base`. `node_of[w]`
    /// is world rank `w`'s node: each node's members share a header (and the segment
    /// flavours' parts), and reach the members of other nodes by messages. `allocate_shared`
    /// needs every member on one node (an error at every member alike otherwise).
    #[allow(clippy::too_many_arguments)]
    pub fn new<F: Fabric>(
        eng: &mut Engine<F>,
        mask: &mut ContextMask,
        comm: &CommData,
        node_of: &[u32],
        flavor: Flavor,
        (base, size): (*mut u8, usize),
        disp_unit: usize,
        (tunables, call): (&Tunables, &'static str),
    ) -> Result<Rc<WindowData>> {
        if comm.remote.is_some() {
            return Err(Error::new(
                ErrorClass::Comm,
                call,
                "windows are made over intracommunicators, and this is an intercommunicator",
            ));
        }
        if disp_unit == 0 {
            return Err(Error::new(
                ErrorClass::Arg,
                call,
                "the displacement unit is 0; it must be positive",
            ));
        }
        let nodes = comm.node_topology(node_of).leaders.len();
        if flavor == Flavor::Shared && nodes > 1 {
            return Err(Error::new(
                ErrorClass::Comm,
                call,
                format!(
                    "this communicator's members are on {nodes} nodes; MPI_Win_allocate_shared \
                     needs them all on one, whose memory they share"
                ),
            ));
        }
        let own = comm::dup(eng, mask, comm)?;
        let pair = own.pair;
        let seg = Self::lay_out(eng, &own, node_of, flavor, (base, size), disp_unit, call)
            .inspect_err(|_| mask.release(pair))?;
        let data = Rc::new(WindowData {
            members: own.group.members().len(),
            comm: own,
            seg,
            flavor,
            forced: tunables.rma_messages,
            spans_nodes: nodes > 1,
            posts_seen: Cell::new(0),
            completions_seen: Cell::new(0),
            fence_owed: Cell::new(true),
            raw_access: Cell::new(false),
            table: OpTable::new(Limits {
                own: tunables.rma_ops,
                shared: tunables.rma_ops_global,
                targets: tunables.rma_targets,
            }),
            mapped: RefCell::default(),
        });
        super::remote::serve(eng, &data);
        // Every member's entry is written and its handler installed before any goes on (and
        // reaches the others' memory, or sends them messages).
        comm::barrier(eng, &data.comm).inspect_err(|_| {
            super::remote::unserve(eng, &data);
            mask.release(pair);
        })?;
        Ok(data)
    }

    /// `MPI_Win_allocate(size, disp_unit)`: [`Self::new`] of flavour `Allocate`.
    pub fn allocate<F: Fabric>(
        eng: &mut Engine<F>,
        mask: &mut ContextMask,
        comm: &CommData,
        node_of: &[u32],
        size: usize,
        disp_unit: usize,
    ) -> Result<Rc<WindowData>> {
        let none = (std::ptr::null_mut(), size);
        let defaults = Tunables::defaults();
        let how = (&defaults, "Win_allocate");
        Self::new(eng, mask, comm, node_of, Flavor::Allocate, none, disp_unit, how)
    }

    /// Agrees on the parts' sizes and units, makes this node's segment (among this node's
    /// members) and writes this member's entry, and the first member of the node the entries
    /// of the members elsewhere (which the others read after the barrier that ends
    /// [`WindowData::new`]).
    fn lay_out<F: Fabric>(
        eng: &mut Engine<F>,
        own: &CommData,
        node_of: &[u32],
        flavor: Flavor,
        (base, size): (*mut u8, usize),
        disp_unit: usize,
        call: &'static str,
    ) -> Result<NodeSegment> {
        let members = own.group.members();
        let (n, me) = (members.len(), own.rank as usize);
        let ctx = own.coll_context();
        let mine = [(size as u64).to_ne_bytes(), (disp_unit as u64).to_ne_bytes()].concat();
        let both = comm::allgather_among(eng, ctx, TAG_SIZES, members, me, &mine)?;
        let word = |r: usize, k: usize| {
            let at = r * 16 + k * 8;
            u64::from_ne_bytes(both[at..at + 8].try_into().expect("8 bytes"))
        };
        let size_of = |r: &u32| word(*r as usize, 0) as usize;
        let topo = own.node_topology(node_of);
        let here: Vec<u32> = topo.local.iter().map(|&r| members[r as usize]).collect();
        let header = header_len(n, flavor);
        let (offset, total) = if flavor.in_segment() {
            let before: usize = topo.local[..topo.local_rank].iter().map(size_of).sum();
            (header + before, header + topo.local.iter().map(size_of).sum::<usize>())
        } else {
            (base as usize, header)
        };
        let at = topo.local_rank;
        let seg = match NodeSegment::allocate(eng, ctx, TAG_SEGMENT, &here, at, total)? {
            Allocated::Made(seg) => seg,
            Allocated::Unmade(why) => {
                return Err(Error::new(
                    ErrorClass::Resource,
                    call,
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
            std::ptr::addr_of_mut!((*entry).pid).write(u64::from(std::process::id()));
        }
        let shared = (flavor == Flavor::Create && size > 0).then(|| program_memory::shared_place(base, size)).flatten();
        if let Some(place) = shared {
            // SAFETY: as above.
            unsafe {
                let entry = (seg.as_ptr() as *mut Entry).add(me);
                std::ptr::addr_of_mut!((*entry).shared).write([place.fd + 1, place.dev, place.ino, place.offset]);
            }
        }
        if topo.is_leader() {
            let node = topo.node_of_member[me];
            let elsewhere = (0..n).filter(|&r| topo.node_of_member[r] != node);
            for r in elsewhere {
                // SAFETY: as above: entry `r` is of a member on another node, which no one here
                // writes but this node's first member, before the barrier.
                unsafe {
                    let entry = (seg.as_ptr() as *mut Entry).add(r);
                    std::ptr::addr_of_mut!((*entry).size).write(word(r, 0));
                    std::ptr::addr_of_mut!((*entry).disp_unit).write(word(r, 1));
                    std::ptr::addr_of_mut!((*entry).off_node).write(1);
                }
            }
        }
        Ok(seg)
    }

    /// The number of members.
    #[inline(always)]
    pub fn size(&self) -> usize {
        self.members
    }

    /// The window's flavour.
    pub fn flavor(&self) -> Flavor {
        self.flavor
    }

    /// The window's own communicator (its group is the window's).
    pub fn comm(&self) -> &CommData {
        &self.comm
    }

    /// The context pair of the window's own communicator (given back when it goes).
    pub fn comm_pair(&self) -> u32 {
        self.comm.pair
    }

    /// This member's rank in the window's group.
    pub fn rank(&self) -> usize {
        self.comm.rank as usize
    }

    pub(super) fn entry(&self, target: usize) -> &Entry {
        debug_assert!(target < self.size());
        // SAFETY: `target` is a member (checked by every caller), so its entry lies in the
        // header; its plain fields were written before creation's barrier and never change,
        // and its lock words are only touched atomically.
        unsafe { &*(self.seg.as_ptr() as *const Entry).add(target) }
    }

    /// Target `target`'s element locks.
    pub(super) fn stripes(&self, target: usize) -> &[LockWord; STRIPES] {
        &self.entry(target).stripes
    }

    /// A dynamic window's region table of `target`.
    fn regions(&self, target: usize) -> &[Region] {
        debug_assert!(self.flavor == Flavor::Dynamic && target < self.size());
        let entries = self.size() * std::mem::size_of::<Entry>();
        // SAFETY: a dynamic window's header holds `MAX_REGIONS` regions per member after the
        // entries (`header_len`), zeroed at creation, touched only atomically.
        unsafe {
            let first = self.seg.as_ptr().add(entries) as *const Region;
            std::slice::from_raw_parts(first.add(target * MAX_REGIONS), MAX_REGIONS)
        }
    }

    /// Checks that `target` is a member.
    #[inline(always)]
    pub fn check_target(&self, call: &'static str, target: i32) -> Result<usize> {
        match usize::try_from(target) {
            Ok(t) if t < self.size() => Ok(t),
            _ => Err(outside_group(call, target, self.size())),
        }
    }

    /// Whether this member reaches member `t` by messages: a member on another node, or every
    /// other member when the remote path is forced.
    #[inline]
    pub(super) fn remote(&self, t: usize) -> bool {
        t != self.rank() && (self.forced || self.entry(t).off_node != 0)
    }

    /// Where target `target`'s part is (`base` null for a dynamic window, and for a member on
    /// another node).
    pub fn part(&self, call: &'static str, target: i32) -> Result<Part> {
        let e = self.entry(self.check_target(call, target)?);
        let base = match self.flavor {
            _ if e.off_node != 0 => std::ptr::null_mut(),
            // SAFETY: the offset was laid out within the segment at creation.
            Flavor::Allocate | Flavor::Shared => unsafe { self.seg.as_ptr().add(e.offset as usize) },
            Flavor::Create => e.offset as usize as *mut u8,
            Flavor::Dynamic => std::ptr::null_mut(),
        };
        Ok(Part {
            base,
            size: e.size as usize,
            disp_unit: e.disp_unit as usize,
        })
    }

    /// The `len` bytes at displacement `disp` of `target`'s part, when that part is
    /// node-shared (mapped here: an `allocate` part, or a `create` part over `MPI_Alloc_mem`'s
    /// memory already mapped) and holds them: the fast path of one-element atomics
    /// (`MPI_Fetch_and_op`: [`WindowData::lone_atomic`]) and of contiguous accumulates
    /// ([`WindowData::accumulate_in_place`]), which need no [`Located`]. `None` otherwise,
    /// and for every error: the general way ([`WindowData::locate`]) then decides and reports.
    #[inline(always)]
    pub fn shared_span(&self, target: i32, disp: isize, len: usize) -> Option<Mapped> {
        // A window some reach by messages takes the general way, which progresses: a member
        // spinning on its own element must serve the others meanwhile (MPI's progress rule).
        if self.by_messages() {
            return None;
        }
        let t = usize::try_from(target).ok().filter(|&t| t < self.size())?;
        let e = self.entry(t);
        let at = usize::try_from(disp.checked_mul(e.disp_unit as isize)?).ok()?;
        if at.checked_add(len)? > e.size as usize {
            return None;
        }
        let base = match self.flavor {
            // SAFETY: the part lies within the segment (laid out at creation).
            Flavor::Allocate | Flavor::Shared => unsafe { self.seg.as_ptr().add(e.offset as usize) },
            Flavor::Create if e.shared[0] != 0 && t == self.rank() => e.offset as usize as *mut u8,
            Flavor::Create if e.shared[0] != 0 => {
                let mapped = self.mapped.borrow();
                // SAFETY: the part lies within the segment (checked when it was mapped).
                unsafe { mapped.get(&t)?.as_ptr().add(e.shared[3] as usize) }
            }
            _ => return None,
        };
        Some(Mapped {
            // SAFETY: the part holds `at + len` bytes (checked above).
            at: unsafe { base.add(at) },
            len,
            target: t,
            mask: stripe_mask(0, std::iter::once((at as u64, len))),
        })
    }

    /// Runs `atomic` (the CPU's atomic instructions on `lone`'s element) through the gate
    /// that keeps it apart from accumulates under the element locks.
    #[inline(always)]
    pub fn lone_atomic<R>(&self, lone: &Mapped, atomic: impl FnOnce(*mut u8) -> R) -> R {
        gate::through(self.atomics_flag(), self.stripes(lone.target), lone.mask, || atomic(lone.at))
    }

    /// Whether accumulates on lock-free elements of target `t`'s part use the CPU's atomics
    /// (through the [`gate`]) rather than only the element locks: when its part is in
    /// node-shared memory, which every origin on the node maps. Every origin decides alike.
    pub(super) fn atomics_direct(&self, t: usize) -> bool {
        self.flavor.in_segment() || (self.flavor == Flavor::Create && self.entry(t).shared[0] != 0)
    }

    /// This member's flag of atomics in progress (see [`gate`]).
    pub(super) fn atomics_flag(&self) -> &AtomicU64 {
        &self.entry(self.rank()).atomics
    }

    /// Every member on this node's flag of atomics in progress (see [`gate`]).
    pub(super) fn node_atomics_flags(&self) -> impl Iterator<Item = &AtomicU64> {
        (0..self.size()).map(|m| self.entry(m)).filter(|e| e.off_node == 0).map(|e| &e.atomics)
    }

    /// How this member reaches target `t`'s memory, and where its part starts when that is
    /// direct (null for a dynamic window).
    fn reach(&self, call: &'static str, t: usize, part: &Part) -> Result<(Reach, *mut u8)> {
        Ok(if self.remote(t) {
            (Reach::Messages(self.comm.group.members()[t]), part.base)
        } else if t == self.rank() || self.flavor.in_segment() {
            (Reach::Direct, part.base)
        } else if self.entry(t).shared[0] != 0 {
            (Reach::Direct, self.map_part(call, t)?)
        } else {
            (Reach::Cma(self.entry(t).pid as u32), part.base)
        })
    }

    /// Where member `t`'s node-shared `create` part starts here: its segment, mapped on first
    /// contact (and kept until the window goes).
    fn map_part(&self, call: &'static str, t: usize) -> Result<*mut u8> {
        let e = self.entry(t);
        let [fd, dev, ino, offset] = e.shared;
        let mut mapped = self.mapped.borrow_mut();
        let seg = match mapped.entry(t) {
            std::collections::hash_map::Entry::Occupied(o) => o.into_mut(),
            std::collections::hash_map::Entry::Vacant(v) => {
                let place = program_memory::SharedPlace { fd: fd - 1, dev, ino, offset };
                let seg = Segment::open(&place.handle(e.pid)).map_err(|err| {
                    Error::new(
                        ErrorClass::Os,
                        call,
                        format!("cannot map target {t}'s part, which MPI_Alloc_mem placed in node-shared memory: {err}"),
                    )
                })?;
                if (seg.len() as u64) < offset.saturating_add(e.size) {
                    return Err(Error::new(
                        ErrorClass::Internal,
                        call,
                        format!("target {t}'s node-shared memory has {} bytes, not the {} its part needs", seg.len(), offset + e.size),
                    ));
                }
                v.insert(seg)
            }
        };
        // SAFETY: the part lies within the segment (checked when it was mapped).
        Ok(unsafe { seg.as_ptr().add(offset as usize) })
    }

    /// The bytes `blocks` name (offsets from displacement `disp`, lengths) at target `target`,
    /// each checked to lie within its part (a dynamic window's: within a region it attached).
    pub fn locate(
        &self,
        call: &'static str,
        target: i32,
        disp: isize,
        blocks: &[(isize, usize)],
    ) -> Result<Located> {
        let t = self.check_target(call, target)?;
        let part = self.part(call, target)?;
        let (reach, start_here) = self.reach(call, t, &part)?;
        self.owe_fence();
        // By messages, spans are offsets in the part (addresses in a dynamic one), which
        // the target turns into addresses of its own.
        let base = match reach {
            Reach::Messages(_) => 0,
            _ => start_here as u64,
        };
        let start = disp.checked_mul(part.disp_unit as isize);
        let span = |&(off, len): &(isize, usize)| {
            let at = start.and_then(|s| s.checked_add(off));
            let ok = match (self.flavor, at) {
                // A member on another node checks against its own regions, not known here.
                (Flavor::Dynamic, Some(a)) if a >= 0 => {
                    self.entry(t).off_node != 0 || self.attached(t, a as u64, len)
                }
                (_, Some(a)) if a >= 0 => (a as usize)
                    .checked_add(len)
                    .is_some_and(|end| end <= part.size),
                _ => false,
            };
            match (ok, at) {
                (true, Some(a)) => Ok(((a as u64).wrapping_add(base), len)),
                _ => Err(self.outside(call, target, disp, (off, len), part)),
            }
        };
        let spans = match blocks {
            [one] => Spans::One([span(one)?]),
            _ => Spans::Many(blocks.iter().map(span).collect::<Result<_>>()?),
        };
        Ok(Located {
            reach,
            target: t,
            base: start_here as u64,
            direct_atomics: self.atomics_direct(t),
            spans,
        })
    }

    #[cold]
    fn outside(&self, call: &'static str, target: i32, disp: isize, (off, len): (isize, usize), part: Part) -> Error {
        let whose = if self.flavor == Flavor::Dynamic {
            format!("the regions target {target} attached to this dynamic window")
        } else {
            format!("target {target}'s part of the window ({} bytes)", part.size)
        };
        Error::new(
            ErrorClass::Disp,
            call,
            format!(
                "displacement {disp} (unit {} bytes) + {off} and {len} bytes fall outside {whose}",
                part.disp_unit
            ),
        )
    }

    /// Whether `len` bytes at `addr` lie within regions target `t` attached (one, or several
    /// back to back).
    pub(super) fn attached(&self, t: usize, addr: u64, len: usize) -> bool {
        let Some(end) = addr.checked_add(len as u64) else {
            return false;
        };
        let regions = &self.regions(t)[..self.entry(t).regions_used.load(Acquire) as usize];
        let mut at = addr;
        loop {
            // Acquire: pairs with `attach`'s Release store of the length, so the address read
            // is the one attached with it.
            let covering = regions.iter().find_map(|r| {
                let n = r.len.load(Acquire);
                let a = r.addr.load(Relaxed);
                (n > 0 && a <= at && at < a + n).then_some(a + n)
            });
            match covering {
                Some(next) if next >= end => return true,
                Some(next) => at = next,
                // An empty access at a region's end is inside it too.
                None => return len == 0 && regions.iter().any(|r| r.len.load(Acquire) > 0 && r.addr.load(Relaxed) + r.len.load(Relaxed) == addr),
            }
        }
    }

    /// `MPI_Win_attach`: `len` bytes at `addr` of this member join its dynamic window.
    pub fn attach(&self, call: &'static str, addr: *mut u8, len: usize) -> Result<()> {
        if self.flavor != Flavor::Dynamic {
            return Err(Error::new(
                ErrorClass::Arg,
                call,
                format!("this window's flavour is {:?}: only dynamic windows attach memory", self.flavor),
            ));
        }
        let slots = self.regions(self.rank());
        let at = slots.iter().position(|r| r.len.load(Relaxed) == 0).ok_or_else(|| {
            Error::new(
                ErrorClass::Resource,
                call,
                format!("this member has {MAX_REGIONS} regions attached already, the most a dynamic window holds"),
            )
        })?;
        slots[at].addr.store(addr as u64, Relaxed);
        // Release: pairs with `attached`'s Acquire loads of the length and of the slots used.
        slots[at].len.store(len.max(1) as u64, Release);
        self.entry(self.rank())
            .regions_used
            .fetch_max(at as u64 + 1, Release);
        Ok(())
    }

    /// `MPI_Win_detach`: the region attached at `addr` leaves the window.
    pub fn detach(&self, call: &'static str, addr: *const u8) -> Result<()> {
        if self.flavor != Flavor::Dynamic {
            return Err(Error::new(
                ErrorClass::Arg,
                call,
                format!("this window's flavour is {:?}: only dynamic windows detach memory", self.flavor),
            ));
        }
        let slot = self
            .regions(self.rank())
            .iter()
            .find(|r| r.len.load(Relaxed) > 0 && r.addr.load(Relaxed) == addr as u64)
            .ok_or_else(|| {
                Error::new(
                    ErrorClass::Arg,
                    call,
                    format!("{addr:p} is not the start of a region attached to this window"),
                )
            })?;
        slot.len.store(0, Release);
        Ok(())
    }

    /// `MPI_Win_lock(kind, target)`: waits until the target's lock word is ours, progressing
    /// the runtime and yielding while it is taken. A member reached by messages takes its word
    /// itself, for this origin, when the epoch's first operation asks
    /// ([`WindowData::lock_by_message`]); with `nocheck` (`MPI_MODE_NOCHECK`: the program
    /// promises no other process locks the target meanwhile) not at all. (The word of a
    /// member reached directly is taken anyway; the front ends defer it to the epoch's first
    /// operation where that is sound: `lazy`.)
    pub fn lock<F: Fabric>(
        &self,
        eng: &mut Engine<F>,
        call: &'static str,
        target: i32,
        (kind, nocheck): (LockKind, bool),
    ) -> Result<()> {
        let t = self.check_target(call, target)?;
        if self.remote(t) {
            self.lock_by_message(t, kind, nocheck)?;
            if !nocheck && self.loads_and_stores() {
                // The program's loads and stores need the lock held now: not deferred.
                self.settle_lock_by_message(eng, call, t)?;
            }
            return Ok(());
        }
        if self.by_messages() {
            // Requests by message waiting for this word are granted first, in their order.
            eng.progress();
        }
        // 004's MEM_SYNC after the lock is granted is the word's Acquire (partner of the
        // Release in `unlock`): the previous holders' accesses happen before ours. (A fence
        // here too cost a third of the round trip and ordered nothing more.)
        self.entry(t).lock.lock(kind, || {
            eng.progress();
            std::thread::yield_now();
        });
        Ok(())
    }

    /// `MPI_Win_shared_query` handed out a pointer to a part: from now on lock epochs protect
    /// loads and stores too, and take their lock when they begin.
    pub fn note_raw_access(&self) {
        self.raw_access.set(true);
    }

    /// Whether lock epochs protect the program's loads and stores through pointers to other
    /// members' parts (an `allocate_shared` window's, or any once `shared_query` gave them
    /// out), so their lock is taken when they begin, never deferred (`lazy`).
    #[inline(always)]
    pub fn loads_and_stores(&self) -> bool {
        self.raw_access.get() || self.flavor == Flavor::Shared
    }

    /// Takes the lock `lazy` deferred on target `target` (before the program's next lock call,
    /// or at the epoch's first operation): its word, waiting while it is held; for a member
    /// reached by messages, the request and its grant ([`WindowData::settle_lock_by_message`]).
    pub fn take_deferred_lock<F: Fabric>(
        &self,
        eng: &mut Engine<F>,
        call: &'static str,
        target: i32,
        kind: LockKind,
    ) -> Result<()> {
        let t = self.check_target(call, target)?;
        if self.remote(t) {
            return self.settle_lock_by_message(eng, call, t);
        }
        self.lock(eng, call, target, (kind, false))
    }

    /// [`WindowData::lock`]'s first look, with no runtime: takes target `target`'s word if
    /// every member is reached directly and the word is free for `kind` now; whether it did
    /// (if not, [`WindowData::lock`] waits, progressing the runtime, or sends the request).
    #[inline]
    pub fn try_lock_here(&self, target: i32, kind: LockKind) -> bool {
        let t = match usize::try_from(target) {
            Ok(t) if t < self.size() && !self.by_messages() => t,
            _ => return false,
        };
        // The word's Acquire is 004's MEM_SYNC after the grant, as in `lock`.
        self.entry(t).lock.try_lock(kind)
    }

    /// `MPI_Win_unlock`: every access made directly is complete (they are all done when they
    /// return), so this releases the word; a member reached by messages releases it when the
    /// epoch's operations sent before are done there, and this waits for its answers.
    pub fn unlock<F: Fabric>(&self, eng: &mut Engine<F>, call: &'static str, target: i32, kind: LockKind) -> Result<()> {
        let t = self.check_target(call, target)?;
        if self.remote(t) {
            return self.unlock_by_message(eng, call, t, kind);
        }
        self.unlock_here(call, target, kind)
    }

    /// [`WindowData::unlock`] of a target reached directly (always so when
    /// [`WindowData::by_messages`] is false), with no runtime.
    pub fn unlock_here(&self, call: &'static str, target: i32, kind: LockKind) -> Result<()> {
        if self.try_unlock_here(target, kind) {
            return Ok(());
        }
        self.check_target(call, target)?;
        Err(Error::new(
            ErrorClass::Internal,
            call,
            format!("target {target} is reached by messages, and this unlock has no runtime"),
        ))
    }

    /// Releases target `target`'s word of `kind` when it is reached directly (true); false,
    /// and nothing done, for a target reached by messages or outside the group. Builds no
    /// error: the unlock of the Rust API's lock epoch and of the C ABI's fast path.
    #[inline(always)]
    pub fn try_unlock_here(&self, target: i32, kind: LockKind) -> bool {
        let t = match usize::try_from(target) {
            Ok(t) if t < self.size() && !self.remote(t) => t,
            _ => return false,
        };
        // 004's MEM_SYNC before the lock is released is the word's Release (partner of the
        // Acquire in `lock`): our accesses happen before the next holder's.
        self.entry(t).lock.unlock(kind);
        true
    }

    /// `MPI_Win_lock_all`: every member's lock word, shared, taken now for members reached
    /// directly (released again if one fails), on first contact for those reached by messages
    /// (never with `nocheck`, `MPI_MODE_NOCHECK`).
    pub fn lock_all<F: Fabric>(&self, eng: &mut Engine<F>, call: &'static str, nocheck: bool) -> Result<()> {
        let n = self.size();
        for t in (0..n).filter(|&t| !self.remote(t)) {
            if let Err(e) = self.lock(eng, call, t as i32, (LockKind::Shared, false)) {
                for u in (0..t).filter(|&u| !self.remote(u)) {
                    let _ = self.unlock_here(call, u as i32, LockKind::Shared);
                }
                return Err(e);
            }
        }
        if !nocheck {
            self.table.lock_all();
        }
        Ok(())
    }

    /// `MPI_Win_unlock_all`: releases every member's shared lock (by message those taken so),
    /// waiting for what is in flight; the first error.
    pub fn unlock_all<F: Fabric>(&self, eng: &mut Engine<F>, call: &'static str) -> Result<()> {
        let mut first = None;
        for t in (0..self.size()).filter(|&t| !self.remote(t)) {
            if let Err(e) = self.unlock_here(call, t as i32, LockKind::Shared) {
                first.get_or_insert(e);
            }
        }
        if let Err(e) = self.unlock_all_by_message(eng, call) {
            first.get_or_insert(e);
        }
        first.map_or(Ok(()), Err)
    }

    /// `MPI_Win_flush` (and `flush_local`, `flush_all`, `MPI_Win_sync`): operations made
    /// directly complete as they are made, so this is the memory barrier that makes them
    /// visible before whatever this process does next; those in flight by messages are waited
    /// for (the first error one met).
    ///
    /// By messages, it progresses too: a member waiting in a loop of flushes or syncs for
    /// what others write serves their messages meanwhile.
    pub fn flush<F: Fabric>(&self, eng: &mut Engine<F>, call: &'static str) -> Result<()> {
        self.complete_then(eng, call, None, Self::flush_memory)
    }

    /// `MPI_Win_sync`: [`WindowData::flush`] with the memory barrier always (it orders the
    /// program's own loads and stores on the window too).
    pub fn sync<F: Fabric>(&self, eng: &mut Engine<F>, call: &'static str) -> Result<()> {
        self.complete_then(eng, call, None, Self::sync_memory)
    }

    /// [`WindowData::flush`] of the operations on member `target` alone (`MPI_Win_flush` and
    /// `MPI_Win_flush_local` of one target): those by messages to others stay in flight.
    pub fn flush_target<F: Fabric>(&self, eng: &mut Engine<F>, call: &'static str, target: i32) -> Result<()> {
        let t = self.check_target(call, target)?;
        self.complete_then(eng, call, Some(t), Self::flush_memory)
    }

    /// Waits for what went by messages (to `only`, when some), then `barrier`.
    fn complete_then<F: Fabric>(&self, eng: &mut Engine<F>, call: &'static str, only: Option<usize>, barrier: fn(&Self)) -> Result<()> {
        let done = self.complete_by_message_only(eng, call, only);
        barrier(self);
        if self.by_messages() {
            eng.progress();
        }
        done
    }

    /// [`WindowData::flush`] of a window reached directly ([`WindowData::by_messages`] false):
    /// the memory barrier alone, with no runtime to progress.
    ///
    /// Skipped on x86-64 when this member did nothing but the CPU's atomics (the one-element
    /// fast path, [`WindowData::lone_atomic`]) on the window since its last barrier: each is a
    /// `lock`-prefixed instruction, itself a full barrier there, and complete at the target
    /// once done. `MPI_Win_sync` ([`WindowData::sync_memory`]), which orders the program's own
    /// loads and stores, always has it.
    #[inline]
    pub fn flush_memory(&self) {
        if !cfg!(target_arch = "x86_64") || self.fence_owed.get() {
            self.sync_memory();
        }
    }

    /// `MPI_Win_sync` of a window reached directly: a memory barrier, always.
    #[inline]
    pub fn sync_memory(&self) {
        self.fence_owed.set(false);
        fence(SeqCst);
    }

    /// Notes that this member touched the window's memory other than by the CPU's atomics
    /// (or made an operation by messages): the next flush owes a memory barrier.
    #[inline]
    pub(super) fn owe_fence(&self) {
        self.fence_owed.set(true);
    }

    /// Whether this member reaches some others by messages (then operations, locks and
    /// flushes need the engine).
    #[inline]
    pub fn by_messages(&self) -> bool {
        self.forced || self.spans_nodes
    }

    /// `MPI_Win_fence`, collective: every member's operations of the epoch that ends are
    /// complete and visible everywhere when it returns.
    ///
    /// What this member has in flight by messages is done at its targets first; an error
    /// there is returned after the barrier (the others are in it).
    ///
    /// Asserted `NO_PRECEDE` and `NO_SUCCEED` (by every member, as MPI requires), the fence
    /// separates no operations and does not synchronize: no barrier, only this process's
    /// memory barrier (MPICH's ch3 does the same). Anything else synchronizes in full: the
    /// operations are done as soon as they are made, so a fence opening an epoch
    /// (`NO_PRECEDE`) still orders the targets' stores before it with the accesses after it,
    /// and one ending it (`NO_SUCCEED`) the accesses before it with the loads after it.
    pub fn fence<F: Fabric>(&self, eng: &mut Engine<F>, assert: Assert) -> Result<()> {
        // Also under `NO_PRECEDE`: a program that asserts it wrongly gets its operations done.
        let done = self.complete_by_message(eng, "Win_fence");
        fence(SeqCst);
        if assert.fence_is_empty() {
            return done;
        }
        comm::barrier(eng, &self.comm)?;
        fence(SeqCst);
        done
    }

    /// Waits until `counter` has moved `want` past what this member consumed of it (`seen`),
    /// progressing the runtime and yielding between looks; then consumes them.
    fn await_count<F: Fabric>(eng: &mut Engine<F>, counter: &AtomicU64, seen: &Cell<u64>, want: u64) {
        let mut spins = 0u32;
        // Acquire: pairs with the Release increments of `post` and `complete`, so what the
        // other side did before them is visible after this.
        while counter.load(Acquire).wrapping_sub(seen.get()) < want {
            spins += 1;
            if spins < 64 {
                std::hint::spin_loop();
            } else {
                eng.progress();
                std::thread::yield_now();
            }
        }
        seen.set(seen.get() + want);
    }

    /// `MPI_Win_post`: opens an exposure epoch to `origins` (window ranks), telling each by a
    /// count in its header entry (no message: an origin waiting in `start` sees it directly),
    /// or by a message to an origin reached so, whose handler counts it.
    pub fn post<F: Fabric>(&self, eng: &mut Engine<F>, origins: &[usize]) -> Result<Exposure> {
        // MEM_SYNC: what this member wrote before the post is visible to the origins' accesses
        // (also ordered by the Release below).
        fence(SeqCst);
        for &o in origins.iter().filter(|&&o| !self.remote(o)) {
            // Release: pairs with `start`'s Acquire load at the origin.
            self.entry(o).posts.fetch_add(1, Release);
        }
        // Not waited for here: `MPI_Win_post` does not block (an origin computing outside the
        // library would hold it). `wait` and `test` reap the answers.
        let far = origins.iter().filter(|&&o| self.remote(o));
        let posted = far.map(|&o| self.start_count(eng, "Win_post", o, Count::Post)).collect::<Result<_>>()?;
        Ok(Exposure {
            expected: origins.len() as u64,
            posted,
        })
    }

    /// `MPI_Win_start`: opens an access epoch to `targets`, waiting until each has posted.
    /// Counting suffices: in a correct program the targets posting to this member are those
    /// of its start group, and a target's next post waits for this epoch's completion.
    pub fn start<F: Fabric>(&self, eng: &mut Engine<F>, targets: &[usize]) -> Result<()> {
        let me = self.entry(self.rank());
        Self::await_count(eng, &me.posts, &self.posts_seen, targets.len() as u64);
        fence(SeqCst);
        Ok(())
    }

    /// `MPI_Win_complete`: ends the access epoch, counting one completion at each target.
    pub fn complete<F: Fabric>(&self, eng: &mut Engine<F>, targets: &[usize]) -> Result<()> {
        fence(SeqCst);
        for &t in targets.iter().filter(|&&t| !self.remote(t)) {
            // Release: pairs with `wait`'s and `test`'s Acquire load at the target, so this
            // epoch's accesses are visible there.
            self.entry(t).completions.fetch_add(1, Release);
        }
        // A completion by message follows the epoch's operations to its target, which does
        // them in order; this waits for them all.
        let far = targets.iter().copied().filter(|&t| self.remote(t));
        let counted = self.count_by_message(eng, "Win_complete", far, Count::Completion);
        self.complete_by_message(eng, "Win_complete").and(counted)
    }

    /// `MPI_Win_test`: whether every origin of `exposure` completed (then the epoch is over).
    pub fn test<F: Fabric>(&self, eng: &mut Engine<F>, exposure: &mut Exposure) -> Result<bool> {
        while let Some(&h) = exposure.posted.last() {
            if eng.test(h).map_err(|e| Error::new(e.class, "Win_test", e.detail))?.is_none() {
                return Ok(false);
            }
            exposure.posted.pop();
        }
        let me = self.entry(self.rank());
        // Acquire: pairs with `complete`'s Release increments.
        let arrived = me.completions.load(Acquire).wrapping_sub(self.completions_seen.get());
        if arrived < exposure.expected {
            // A target testing in a loop serves the origins' messages meanwhile.
            eng.progress();
            return Ok(false);
        }
        self.completions_seen.set(self.completions_seen.get() + exposure.expected);
        exposure.expected = 0;
        fence(SeqCst);
        Ok(true)
    }

    /// `MPI_Win_wait`: waits until every origin of `exposure` completed.
    pub fn wait<F: Fabric>(&self, eng: &mut Engine<F>, exposure: Exposure) -> Result<()> {
        for h in exposure.posted {
            eng.wait(h).map_err(|e| Error::new(e.class, "Win_wait", e.detail))?;
        }
        let me = self.entry(self.rank());
        Self::await_count(eng, &me.completions, &self.completions_seen, exposure.expected);
        fence(SeqCst);
        Ok(())
    }

    /// `MPI_Win_free`, collective: waits for every member (so no one frees memory another
    /// still reaches), then gives back the window's contexts. The segment goes with the last
    /// member's mapping.
    ///
    /// Every member waits for what it has in flight before the barrier, so after it no active
    /// message comes for this window: its handler goes.
    pub fn free<F: Fabric>(self: Rc<Self>, eng: &mut Engine<F>, mask: &mut ContextMask) -> Result<()> {
        let flown = self.complete_by_message(eng, "Win_free");
        fence(SeqCst);
        let done = comm::barrier(eng, &self.comm).and(flown);
        eng.am_unregister(self.comm.pair);
        mask.release(self.comm.pair);
        done
    }
}

/// [`WindowData::check_target`]'s error.
#[cold]
fn outside_group(call: &'static str, target: i32, size: usize) -> Error {
    Error::new(
        ErrorClass::Rank,
        call,
        format!("target rank {target} is outside the window's group (size {size})"),
    )
}
