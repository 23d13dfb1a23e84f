//! The operations on a target's memory, done by the origin alone (issue 12, items 3 and 4):
//! put and get copy (directly in a node-shared part, by cross-memory copy into another
//! process's `create` or dynamic part); accumulates are the CPU's atomics on lock-free
//! elements of a node-shared part, and otherwise a read-modify-write under the target's
//! element locks.
//!
//! Element locks are fine-grained: each target has [`STRIPES`] lock words, one per 4 KiB page
//! of its part (modulo their number), so accumulates on different pages of one target run at
//! once (not one mutex per window, as MPICH does, nor one spinlock per target, as Open MPI's
//! osc/sm does). An accumulate takes the locks of every page it touches, in index order (no
//! two origins wait for each other in a cycle), so every element, whatever its size or
//! alignment, is updated under the same locks by every origin. Which elements go through the
//! locks depends only on the window's flavour, the element's type and its address, so all
//! origins agree on it.

use super::atomic;
use super::gate;
use super::lock::LockKind;
use super::window::{Mapped, WindowData, STRIPES};
use crate::coll::op::{self, Basic, Elements, SysOp};
use crate::error::{Error, ErrorClass, Result};
use crate::sys::cma::{self, CmaError};

thread_local! {
    /// The target's bytes of a locked accumulate read into this process.
    static SCRATCH: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

/// Bytes of a part one element lock covers.
const STRIPE_BYTES: u64 = 4096;

/// Elements an accumulate on lock-free elements of a node-shared part updates with the CPU's
/// atomics, one by one, at most; more go together under the element locks, combined with
/// plain (vectorised) loads and stores: the [`gate`](super::gate) keeps the two apart.
/// Measured (`bench/src/bin/rma.rs`, doubles): eight elements by compare-and-swap loops took
/// 0.25-0.4 µs, 64 under the locks 0.09-0.15 µs.
const ATOMIC_ELEMENTS_MAX: usize = 1;

/// The element locks of every page `spans` (address, length) touch in the part starting at
/// `base`, as a mask (bit `i`: lock `i`).
pub(super) fn stripe_mask(base: u64, spans: impl Iterator<Item = (u64, usize)>) -> u32 {
    let mut mask = 0u32;
    for (addr, len) in spans {
        let first = (addr - base) / STRIPE_BYTES;
        let last = (addr - base + len.max(1) as u64 - 1) / STRIPE_BYTES;
        for page in first..=last.min(first + STRIPES as u64 - 1) {
            mask |= 1 << (page as usize % STRIPES);
        }
    }
    mask
}

/// The indices of a mask's set bits, lowest first.
#[derive(Clone, Copy)]
struct BitIndices(u32);

impl Iterator for BitIndices {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        (self.0 != 0).then(|| {
            let i = self.0.trailing_zeros() as usize;
            self.0 &= self.0 - 1;
            i
        })
    }
}

/// How an origin reaches a target's memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reach {
    /// Mapped here: the segment's parts, or this member's own memory.
    Direct,
    /// In process `pid`, by cross-memory copy.
    Cma(u32),
    /// By active messages to world rank `peer`, which does the operation on its memory
    /// (`remote`): spans are then offsets in the target's part.
    Messages(u32),
}

/// The bytes an operation touches at one target: spans of (address, length), the address in
/// this process (`Direct`) or in the target's (`Cma`), each checked to lie within the part.
#[derive(Debug)]
pub struct Located {
    pub(super) reach: Reach,
    pub(super) target: usize,
    /// The part's first byte (0 for a dynamic window): element locks hash offsets from it.
    pub(super) base: u64,
    /// Whether lock-free elements are updated with the CPU's atomics (node-shared parts,
    /// which every origin maps), rather than under the element locks.
    pub(super) direct_atomics: bool,
    pub(super) spans: Spans,
}

/// A [`Located`]'s spans: most operations have one, which needs no allocation.
#[derive(Debug)]
pub(super) enum Spans {
    One([(u64, usize); 1]),
    Many(Vec<(u64, usize)>),
}

impl Located {
    /// The spans: (address, length).
    pub(super) fn spans(&self) -> &[(u64, usize)] {
        match &self.spans {
            Spans::One(one) => one,
            Spans::Many(many) => many,
        }
    }

    /// The bytes located.
    pub fn len(&self) -> usize {
        self.spans().iter().map(|s| s.1).sum()
    }

    /// Whether no byte is.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A function combining elements: `inout = input ∘ inout`.
pub type CombineFn = dyn Fn(&[u8], &mut [u8]);

/// How an accumulate combines one element of the origin's data into the target's.
pub struct Combiner<'a> {
    /// The operation (for the CPU's atomics, and `MPI_NO_OP`'s shortcut).
    pub op: SysOp,
    /// The predefined type the elements are, when there is one (the CPU's atomics need it).
    pub basic: Option<Basic>,
    /// Bytes of one element.
    pub unit: usize,
    /// What the elements are, for a target that combines them itself (reached by messages);
    /// `None`: a [`foreign`](super::foreign) combiner, or only this process can.
    pub elements: Option<Elements>,
    /// The code of the registered [`foreign`](super::foreign) combiner doing `combine`, when
    /// `elements` is `None` (the C compiler's `long double`), for targets reached by messages.
    pub foreign: Option<u8>,
    /// `inout = input ∘ inout` element by element, on any number of whole elements (MPI's
    /// order for accumulate); `None`: the collectives' function for `op` on `basic`, looked up
    /// when an element needs it (CPU atomics need none).
    pub combine: Option<&'a CombineFn>,
}

fn cma_error(call: &'static str, e: CmaError) -> Error {
    match e {
        CmaError::Unsupported(e) => Error::unsupported(
            call,
            format!(
                "a window over the program's memory reaches other processes by cross-memory \
                 copy, which this system refuses ({e}); use MPI_Win_allocate"
            ),
        ),
        CmaError::Failed(e) => Error::new(
            ErrorClass::Internal,
            call,
            format!("a cross-memory copy to or from the target failed: {e}"),
        ),
    }
}

/// Copies `src` to `addr` as `reach` says.
fn write(call: &'static str, reach: Reach, addr: u64, src: &[u8]) -> Result<()> {
    match reach {
        // SAFETY: `addr` heads `src.len()` bytes of a part mapped here (checked by `locate`),
        // which no Rust reference covers (window memory is reached through raw pointers, and
        // MPI forbids the program to touch it in conflict with an access epoch).
        Reach::Direct => unsafe {
            std::ptr::copy_nonoverlapping(src.as_ptr(), addr as *mut u8, src.len());
            Ok(())
        },
        // SAFETY: `addr` heads `src.len()` bytes of the target's part (checked by `locate`),
        // which the target lent to the window until it frees it.
        Reach::Cma(pid) => unsafe { cma::write_to(pid, addr, src) }.map_err(|e| cma_error(call, e)),
        Reach::Messages(_) => Err(by_messages(call)),
    }
}

/// Copies the bytes at `addr` into `dst` as `reach` says.
fn read(call: &'static str, reach: Reach, addr: u64, dst: &mut [u8]) -> Result<()> {
    match reach {
        // SAFETY: as in `write`, the other way.
        Reach::Direct => unsafe {
            std::ptr::copy_nonoverlapping(addr as *const u8, dst.as_mut_ptr(), dst.len());
            Ok(())
        },
        // SAFETY: as in `write`.
        Reach::Cma(pid) => unsafe { cma::read_from(pid, addr, dst) }.map_err(|e| cma_error(call, e)),
        Reach::Messages(_) => Err(by_messages(call)),
    }
}

/// Checks that `at` is one span and each buffer of a compare-and-swap holds as many bytes;
/// the element's size.
pub(super) fn check_one_element(call: &'static str, at: &Located, lens: [usize; 3]) -> Result<usize> {
    let unit = at.len();
    if lens.iter().any(|&l| l != unit) || at.spans().len() != 1 {
        return Err(length_mismatch(call, "compare, swap or result buffer", lens[0], unit));
    }
    Ok(unit)
}

#[cold]
fn by_messages(call: &'static str) -> Error {
    Error::new(ErrorClass::Internal, call, "an operation by messages came to the direct path")
}

pub(super) fn length_mismatch(call: &'static str, what: &str, have: usize, want: usize) -> Error {
    Error::new(
        ErrorClass::Count,
        call,
        format!("the {what} holds {have} bytes, and the target's layout {want}"),
    )
}

impl WindowData {
    /// `MPI_Put` of `data` (packed) into the bytes `at` names, reached directly (not by
    /// messages: see [`WindowData::put`]).
    pub fn put_here(&self, call: &'static str, at: &Located, data: &[u8]) -> Result<()> {
        if data.len() != at.len() {
            return Err(length_mismatch(call, "origin's data", data.len(), at.len()));
        }
        let mut from = 0;
        for &(addr, len) in at.spans() {
            write(call, at.reach, addr, &data[from..from + len])?;
            from += len;
        }
        Ok(())
    }

    /// `MPI_Get` of the bytes `at` names into `out` (packed), reached directly (not by
    /// messages: see [`WindowData::get`]).
    pub fn get_here(&self, call: &'static str, at: &Located, out: &mut [u8]) -> Result<()> {
        if out.len() != at.len() {
            return Err(length_mismatch(call, "origin's buffer", out.len(), at.len()));
        }
        let mut to = 0;
        for &(addr, len) in at.spans() {
            read(call, at.reach, addr, &mut out[to..to + len])?;
            to += len;
        }
        Ok(())
    }

    /// `MPI_Get_accumulate` (`MPI_Accumulate` when `old` is `None`; `MPI_Fetch_and_op` on one
    /// element): each element of the bytes `at` names combined with `data`'s (packed; ignored
    /// for `MPI_NO_OP`) atomically, its value before written to `old`.
    ///
    /// A few lock-free elements of a node-shared part go one by one through the CPU's atomics
    /// (through the [`gate`](super::gate)); everything else together under the element locks
    /// of every page it touches (taken in order, so two origins never wait for each other in a
    /// cycle), combined in place with plain loads and stores.
    pub fn accumulate_here(
        &self,
        call: &'static str,
        at: &Located,
        how: &Combiner<'_>,
        data: &[u8],
        old: Option<&mut [u8]>,
    ) -> Result<()> {
        let total = at.len();
        let no_op = how.op == SysOp::NoOp;
        if !no_op && data.len() != total {
            return Err(length_mismatch(call, "origin's data", data.len(), total));
        }
        if let Some(o) = old.as_deref() {
            if o.len() != total {
                return Err(length_mismatch(call, "result buffer", o.len(), total));
            }
        }
        let unit = how.unit.max(1);
        if !total.is_multiple_of(unit) {
            return Err(Error::new(
                ErrorClass::Arg,
                call,
                format!("the target's layout holds {total} bytes, not whole elements of {unit} bytes"),
            ));
        }
        let lock_free = how.basic.filter(|b| {
            at.direct_atomics
                && b.size() == unit
                && total / unit <= ATOMIC_ELEMENTS_MAX
                && at.spans().iter().all(|&(addr, len)| {
                    len.is_multiple_of(unit) && atomic::is_lock_free_at(*b, addr as *const u8)
                })
        });
        if let Some(b) = lock_free {
            let mask = stripe_mask(at.base, at.spans().iter().copied());
            return gate::through(self.atomics_flag(), self.stripes(at.target), mask, || {
                self.atomics_one_by_one(call, at, b, how.op, data, old)
            });
        }
        let input: &[u8] = if no_op { &[] } else { data };
        match (how.combine, how.basic) {
            (Some(_), _) => {}
            (None, Some(b)) if op::applies(how.op, Elements::Basic(b)) => {}
            (None, Some(b)) => {
                return Err(Error::new(ErrorClass::Op, call, format!("{} is not defined on {b:?}", how.op.name())))
            }
            (None, None) => {
                return Err(Error::new(ErrorClass::Op, call, "no function to combine the elements with"))
            }
        }
        self.under_element_locks(call, at, |current| {
            if let Some(o) = old {
                o.copy_from_slice(current);
            }
            if no_op {
                return false;
            }
            match (how.combine, how.basic) {
                (Some(f), _) => f(input, current),
                (None, Some(b)) => op::apply_basic(how.op, b, input, current),
                (None, None) => unreachable!("refused above"),
            }
            true
        })
    }

    /// `MPI_Put` of `data` into the bytes of `at` (as many), a node-shared part mapped here:
    /// the fast path of contiguous puts, with no [`Located`].
    pub fn put_in_place(&self, at: &Mapped, data: &[u8]) {
        assert_eq!(data.len(), at.len, "put_in_place: the span holds the data");
        self.owe_fence();
        // SAFETY: `at.len` bytes of a part mapped here (checked by `shared_span`), which no
        // Rust reference covers (as in `write`).
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), at.at, data.len()) }
    }

    /// `MPI_Get` of the bytes of `at` into `out` (as many), a node-shared part mapped here:
    /// the fast path of contiguous gets, with no [`Located`].
    pub fn get_in_place(&self, at: &Mapped, out: &mut [u8]) {
        assert_eq!(out.len(), at.len, "get_in_place: the span fills the buffer");
        self.owe_fence();
        // SAFETY: as in `put_in_place`, the other way.
        unsafe { std::ptr::copy_nonoverlapping(at.at, out.as_mut_ptr(), out.len()) }
    }

    /// `MPI_Accumulate` or `MPI_Get_accumulate` of whole elements of `basic` on the bytes of
    /// `at` (`data`: as many; the old values into `old`, as many, when given), `op` defined
    /// on `basic` (the caller checked both): combined in place under the element locks of
    /// the pages they touch, with no [`Located`] (the fast path of contiguous accumulates on
    /// node-shared parts, which every origin maps and where the CPU's atomics may run: the
    /// [`gate`](super::gate) is drained).
    pub fn accumulate_in_place(&self, at: &Mapped, op: SysOp, basic: Basic, data: &[u8], old: Option<&mut [u8]>) {
        debug_assert!(op::applies(op, Elements::Basic(basic)) && (op == SysOp::NoOp || data.len() == at.len));
        self.owe_fence();
        self.with_element_locks(at.target, at.mask, true, || {
            // SAFETY: `at.len` bytes of a part mapped here (checked by `shared_span`); under
            // the element locks, with the gate drained, no other accumulate or atomic touches
            // them, and MPI forbids puts and the target's own stores to them during the epoch.
            let current = unsafe { std::slice::from_raw_parts_mut(at.at, at.len) };
            if let Some(o) = old {
                o.copy_from_slice(current);
            }
            op::apply_basic(op, basic, data, current);
        })
    }

    /// Runs `f` holding the element locks `mask` names of `target`'s part, taken in index
    /// order (so no two origins wait for each other in a cycle); with `drain_gate`, once the
    /// CPU's atomics in progress on the node are done too (the [`gate`](super::gate)).
    fn with_element_locks<R>(&self, target: usize, mask: u32, drain_gate: bool, f: impl FnOnce() -> R) -> R {
        let stripes = self.stripes(target);
        let taken = || BitIndices(mask);
        // No progress while waiting: holders only copy, and wait only for the atomics in
        // progress (the gate's drain below, each one instruction long), never for a lock.
        for i in taken() {
            stripes[i].lock(LockKind::Exclusive, std::thread::yield_now);
        }
        if drain_gate {
            gate::drain(self.node_atomics_flags());
        }
        let result = f();
        for i in taken() {
            stripes[i].unlock(LockKind::Exclusive);
        }
        result
    }

    /// The CPU's atomics on each element `at` names, lock-free elements of `basic` of a part
    /// mapped here, inside the gate (the caller's).
    fn atomics_one_by_one(
        &self,
        call: &'static str,
        at: &Located,
        basic: Basic,
        op: SysOp,
        data: &[u8],
        mut old: Option<&mut [u8]>,
    ) -> Result<()> {
        let unit = basic.size();
        let zeros = [0u8; 16];
        let mut scratch = [0u8; 16];
        let mut from = 0;
        for &(addr, len) in at.spans() {
            for k in (0..len).step_by(unit) {
                let input = if op == SysOp::NoOp { &zeros[..unit] } else { &data[from + k..from + k + unit] };
                let out = match old.as_deref_mut() {
                    Some(o) => &mut o[from + k..from + k + unit],
                    None => &mut scratch[..unit],
                };
                // SAFETY: the element lies within the part, mapped here (`Direct`: node-shared
                // parts), which origins touch only atomically in accumulate epochs, and the
                // gate keeps lockers' plain updates away meanwhile.
                unsafe { atomic::fetch_and_op(basic, op, (addr + k as u64) as *mut u8, input, out) }
                    .map_err(|e| Error::new(e.class, call, e.detail))?;
            }
            from += len;
        }
        Ok(())
    }

    /// Reads the bytes `at` names into one packed buffer (the part's own bytes when they are
    /// one span mapped here) under the element locks of every page they touch, lets `update`
    /// change it (it says whether it did), and writes it back. On a part where origins also
    /// use the CPU's atomics, waits for those in progress once the locks are taken (the
    /// [`gate`](super::gate)).
    fn under_element_locks(
        &self,
        call: &'static str,
        at: &Located,
        update: impl FnOnce(&mut [u8]) -> bool,
    ) -> Result<()> {
        let mask = stripe_mask(at.base, at.spans().iter().copied());
        self.with_element_locks(at.target, mask, at.direct_atomics, || self.update_in_locks(call, at, update))
    }

    /// [`WindowData::under_element_locks`]' work, the locks held.
    fn update_in_locks(&self, call: &'static str, at: &Located, update: impl FnOnce(&mut [u8]) -> bool) -> Result<()> {
        let copy = |current: &mut [u8], write_back: bool| -> Result<()> {
            let mut pos = 0;
            for &(addr, len) in at.spans() {
                let part = &mut current[pos..pos + len];
                match write_back {
                    true => write(call, at.reach, addr, part)?,
                    false => read(call, at.reach, addr, part)?,
                }
                pos += len;
            }
            Ok(())
        };
        match (at.reach, at.spans()) {
            (Reach::Direct, &[(addr, len)]) => {
                // SAFETY: `len` bytes of a part mapped here (checked by `locate`); under the
                // element locks no other accumulate touches them (the gate keeps the CPU's
                // atomics out too), and MPI forbids puts and the target's own stores to them
                // during the epoch, so this is their only user until the locks go.
                update(unsafe { std::slice::from_raw_parts_mut(addr as *mut u8, len) });
                Ok(())
            }
            _ => SCRATCH.with(|s| {
                // One buffer kept per thread: a large accumulate does not map fresh pages.
                let mut current = s.take();
                current.clear();
                current.resize(at.len(), 0);
                let done = copy(&mut current, false).and_then(|()| match update(&mut current) {
                    true => copy(&mut current, true),
                    false => Ok(()),
                });
                s.replace(current);
                done
            }),
        }
    }

    /// `MPI_Compare_and_swap` of the one element `at` names (of `unit` bytes, of type `basic`
    /// when predefined): replaced by `swap` if it equals `compare` bit for bit; its value
    /// before written to `old`.
    #[allow(clippy::too_many_arguments)]
    pub fn compare_and_swap_here(
        &self,
        call: &'static str,
        at: &Located,
        basic: Option<Basic>,
        compare: &[u8],
        swap: &[u8],
        old: &mut [u8],
    ) -> Result<()> {
        let unit = check_one_element(call, at, [compare.len(), swap.len(), old.len()])?;
        let a = at.spans()[0].0;
        if let Some(b) = basic.filter(|b| {
            at.direct_atomics && b.size() == unit && atomic::is_lock_free_at(*b, a as *const u8)
        }) {
            let mask = stripe_mask(at.base, at.spans().iter().copied());
            return gate::through(self.atomics_flag(), self.stripes(at.target), mask, || {
                // SAFETY: as in `atomics_one_by_one`.
                unsafe { atomic::compare_and_swap(b, a as *mut u8, compare, swap, old) }
            })
            .map_err(|e| Error::new(e.class, call, e.detail));
        }
        self.under_element_locks(call, at, |current| {
            old.copy_from_slice(current);
            let equal = current == compare;
            if equal {
                current.copy_from_slice(swap);
            }
            equal
        })
    }
}
