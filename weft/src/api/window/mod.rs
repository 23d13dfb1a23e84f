//! One-sided communication: MPI-3 windows (issue 12, first part). rsmpi has none ("not
//! supported (yet)" in its own list), so this API is Weft's: a typed [`Window`] whose epochs
//! are guards, and whose operations are the epochs' methods ([`Access`]), so that an operation
//! outside an epoch does not compile; an operation an epoch does not cover (another target
//! than a lock's) is an `RmaSync` error naming the call and the target, and a displacement
//! outside the target's part a `Disp` error naming the displacement.
//!
//! ```no_run
//! use weft::traits::*;
//! use weft::window::{Access, LockKind, Window};
//! let universe = weft::initialize().unwrap();
//! let world = universe.world();
//! let counter = Window::<u64>::allocate(&world, 1);
//! {
//!     let epoch = counter.lock(0, LockKind::Exclusive).unwrap();
//!     let before = epoch.fetch_and_op(0, 0, 1, &weft::collective::SystemOperation::sum());
//!     println!("the counter was {}", before.unwrap());
//! } // unlocked here
//! counter.free().unwrap();
//! ```
//!
//! What works now: `allocate` and `allocate_shared` (Weft's memory, node-shared), `create`
//! over the program's own `Vec` (given back by [`Window::into_vec`]), dynamic windows
//! (`create_dynamic`, `attach`, `detach`: [`Region`]); fence epochs (with the
//! [`Assert`]ions), lock/unlock (shared, exclusive), lock_all, post-start-complete-wait, flush
//! and sync; put, get, accumulate, get_accumulate, fetch_and_op and compare_and_swap. Targets
//! on this node are reached by the origin alone (loads, stores and the CPU's atomics on
//! node-shared memory, cross-memory copies otherwise), targets on other nodes by messages
//! their handler serves. Elements must be plain data (no padding, no bool or char).
//! Datatypes on both sides: the `_typed` operations ([`Target`]); request-based operations
//! in passive-target epochs ([`RequestAccess`]); the attributes and info (`flavor`, `model`,
//! `disp_unit`, `base`, `info`).

use super::collective::SystemOperation;
use super::datatype::{Buffer, BufferMut, Datatype, Equivalence};
use super::topology::{AsCommunicator, Rank};
use crate::coll::op::{Basic, Elements};
use crate::error::{fatal, Error, ErrorClass, Result};
use crate::rma::access::{Combiner, Located};
use crate::rma::atomic;
use crate::rma::lazy;
use crate::rma::remote;
use crate::rma::window::WindowData;
use crate::runtime;
use std::cell::{Cell, RefCell};
use std::marker::PhantomData;
use std::rc::Rc;

pub use crate::rma::assert::Assert;
pub use crate::rma::lock::LockKind;
pub use crate::rma::window::Flavor;
pub use attributes::MemoryModel;
pub use dynamic::Region;
pub use pscw::{AccessEpoch, ExposureEpoch};
pub use requests::RequestAccess;
pub use typed::Target;

mod attributes;
mod create;
mod dynamic;
mod pscw;
mod requests;
mod shared;
mod typed;

/// A window of elements of `T` at every member of a communicator (`MPI_Win`).
#[derive(Debug)]
pub struct Window<T> {
    data: Option<Rc<WindowData>>,
    /// `T` as one predefined type, for the atomic operations (`None`: a layout of several).
    basic: Option<Basic>,
    /// What this process has open on the window now.
    epoch: Cell<Open>,
    /// The targets this process holds a lock on (MPI allows several): the first in `held`
    /// ([`NO_TARGET`]: none, and then none in `more`), any others in `more`.
    held: Cell<Rank>,
    more: RefCell<Vec<Rank>>,
    /// Whether an exposure epoch (`post`) is open.
    exposed: Cell<bool>,
    /// The program's memory the window is over (a `create` window's, a dynamic window's
    /// regions, detached ones too), given back by `free` (leaked when the window is dropped
    /// unfreed: the others may still reach it).
    lent: RefCell<Vec<create::Lent<T>>>,
    /// Windows are used from the thread that owns the runtime (not `Send`, not `Sync`).
    _t: PhantomData<*mut T>,
}

/// No target (`Window::held`'s "no lock held").
const NO_TARGET: Rank = -1;

/// Which kind of epoch is open at this process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Open {
    None,
    Fence,
    Locks,
    LockAll,
    /// A post-start-complete-wait access epoch (`start`).
    Access,
}

impl<T: Equivalence + Copy> Window<T> {
    /// `MPI_Win_allocate`: `len` zeroed elements of `T` at this member, a window over all of
    /// `comm`'s members. Collective. Panics on error (see [`Self::try_allocate`]).
    #[track_caller]
    pub fn allocate<C: AsCommunicator + ?Sized>(comm: &C, len: usize) -> Window<T> {
        fatal(Self::try_allocate(comm, len))
    }

    /// [`Self::allocate`], returning errors: an element type that is not plain data, a
    /// communicator whose members span several nodes (not built yet), no room for the memory.
    pub fn try_allocate<C: AsCommunicator + ?Sized>(comm: &C, len: usize) -> Result<Window<T>> {
        Self::make(
            comm,
            (std::ptr::null_mut(), len),
            Flavor::Allocate,
            "Win_allocate",
        )
    }

    /// A window of `flavor` with `len` elements at this member: zeroed ones of Weft's memory
    /// (`base` null), or the program's at `base` (`create`).
    fn make<C: AsCommunicator + ?Sized>(
        comm: &C,
        (base, len): (*mut T, usize),
        flavor: Flavor,
        call: &'static str,
    ) -> Result<Window<T>> {
        let dt = T::equivalent_datatype();
        let map = dt.type_map();
        let elem = std::mem::size_of::<T>();
        if !map.is_contiguous() || map.size() != elem || map.is_restricted() {
            return Err(Error::unsupported(
                call,
                format!(
                    "windows hold plain data for now: this element type ({} bytes of data in {} \
                     bytes{}) has padding, gaps or bool/char values",
                    map.size(),
                    elem,
                    if map.is_restricted() {
                        ", restricted values"
                    } else {
                        ""
                    }
                ),
            ));
        }
        let basic = match map.elements(false) {
            Some(Elements::Basic(b)) => Some(b),
            _ => None,
        };
        let size = len.checked_mul(elem).ok_or_else(|| {
            Error::new(
                ErrorClass::Count,
                call,
                format!("{len} elements of {elem} bytes overflow"),
            )
        })?;
        let c = comm.comm_data();
        let data = runtime::with_call(call, |rt| {
            WindowData::new(
                &mut rt.engine,
                &mut rt.contexts,
                c,
                &rt.boot.node_of,
                flavor,
                (base.cast::<u8>(), size),
                elem.max(1),
                (&rt.tunables, call),
            )
        })?;
        Ok(Window {
            data: Some(data),
            basic,
            epoch: Cell::new(Open::None),
            held: Cell::new(NO_TARGET),
            more: RefCell::new(Vec::new()),
            exposed: Cell::new(false),
            lent: RefCell::new(Vec::new()),
            _t: PhantomData,
        })
    }

    #[inline(always)]
    fn data(&self) -> &WindowData {
        self.data
            .as_ref()
            .expect("a window is freed only by `free`, which takes it")
    }

    /// The number of members.
    pub fn size(&self) -> Rank {
        self.data().size() as Rank
    }

    /// This member's rank in the window's group.
    pub fn rank(&self) -> Rank {
        self.data().rank() as Rank
    }

    /// Opens an epoch of `kind`, if none of another kind is open.
    #[inline(always)]
    fn open(&self, call: &'static str, kind: Open) -> Result<()> {
        match self.epoch.get() {
            Open::None => {
                self.epoch.set(kind);
                Ok(())
            }
            Open::Locks if kind == Open::Locks => Ok(()),
            open => Err(Error::new(
                ErrorClass::RmaSync,
                call,
                format!("a {open:?} epoch is open on this window; close it first"),
            )),
        }
    }

    /// `MPI_Win_lock(kind, target)`: a passive-target epoch on `target`, until the guard
    /// drops (`MPI_Win_unlock`). Waits while the lock is taken, progressing the runtime.
    #[inline(always)]
    pub fn lock(&self, target: Rank, kind: LockKind) -> Result<LockEpoch<'_, T>> {
        self.lock_with(target, kind, Assert::NONE)
    }

    /// [`Self::lock`] with assertions: [`Assert::NO_CHECK`] (no other process holds or asks
    /// for a conflicting lock meanwhile) lets a target reached by messages be reached without
    /// a lock request. Other assertions are an `Assert` error.
    #[inline(always)]
    pub fn lock_with(
        &self,
        target: Rank,
        kind: LockKind,
        assert: Assert,
    ) -> Result<LockEpoch<'_, T>> {
        const CALL: &str = "Win_lock";
        only_asserts(CALL, assert, Assert::NO_CHECK)?;
        if self.holds(target) {
            return Err(Error::new(
                ErrorClass::RmaSync,
                CALL,
                format!("this process already holds a lock on target {target} of this window"),
            ));
        }
        self.data().check_target(CALL, target)?;
        self.open(CALL, Open::Locks)?;
        let opened = || {
            // No lock taken: the epoch `open` began is not open unless others are.
            if self.held.get() == NO_TARGET {
                self.epoch.set(Open::None);
            }
        };
        // Locks are taken in the order asked for: a deferred one first.
        lazy::take_deferred(&wait_lock(CALL)).inspect_err(|_| opened())?;
        let deferred = lazy::may_defer(self.data(), target);
        if deferred {
            lazy::defer(self.data(), target, kind);
        } else if !self.data().try_lock_here(target, kind) {
            // A free word is taken with no runtime; otherwise wait (or ask by message) in it.
            let how = (kind, assert.contains(Assert::NO_CHECK));
            runtime::with_call(CALL, |rt| {
                self.data().lock(&mut rt.engine, CALL, target, how)
            })
            .inspect_err(|_| opened())?;
        }
        match self.held.get() {
            NO_TARGET => self.held.set(target),
            _ => self.more.borrow_mut().push(target),
        }
        Ok(LockEpoch {
            win: self,
            target,
            kind,
            deferred: Cell::new(deferred),
        })
    }

    /// Whether this process holds a lock on `target`.
    #[inline(always)]
    fn holds(&self, target: Rank) -> bool {
        match self.held.get() {
            NO_TARGET => false,
            first => first == target || self.more.borrow().contains(&target),
        }
    }

    /// `MPI_Win_lock_all`: a shared passive-target epoch on every member, until the guard
    /// drops (`MPI_Win_unlock_all`).
    pub fn lock_all(&self) -> Result<LockAllEpoch<'_, T>> {
        self.lock_all_with(Assert::NONE)
    }

    /// [`Self::lock_all`] with assertions ([`Assert::NO_CHECK`] only, as [`Self::lock_with`]).
    pub fn lock_all_with(&self, assert: Assert) -> Result<LockAllEpoch<'_, T>> {
        const CALL: &str = "Win_lock_all";
        only_asserts(CALL, assert, Assert::NO_CHECK)?;
        self.open(CALL, Open::LockAll)?;
        // Locks are taken in the order asked for: a deferred one (on another window) first.
        lazy::take_deferred(&wait_lock(CALL)).inspect_err(|_| self.epoch.set(Open::None))?;
        let nocheck = assert.contains(Assert::NO_CHECK);
        runtime::with_call(CALL, |rt| {
            self.data().lock_all(&mut rt.engine, CALL, nocheck)
        })
        .inspect_err(|_| self.epoch.set(Open::None))?;
        Ok(LockAllEpoch { win: self })
    }

    /// `MPI_Win_fence` opening a fence epoch, collective; the guard's [`FenceEpoch::fence`]
    /// separates epochs and [`FenceEpoch::end`] (or its drop) ends the last one.
    pub fn fence(&self) -> Result<FenceEpoch<'_, T>> {
        self.fence_with(Assert::NONE)
    }

    /// [`Self::fence`] with assertions (`NO_STORE`, `NO_PUT`, `NO_PRECEDE`, `NO_SUCCEED`; see
    /// [`FenceEpoch::fence_with`]).
    pub fn fence_with(&self, assert: Assert) -> Result<FenceEpoch<'_, T>> {
        const CALL: &str = "Win_fence";
        only_asserts(CALL, assert, FENCE_ASSERTS)?;
        if self.exposed.get() {
            return Err(Error::new(
                ErrorClass::RmaSync,
                CALL,
                "an exposure epoch (post) is open on this window; wait for it first",
            ));
        }
        self.open(CALL, Open::Fence)?;
        runtime::with_call(CALL, |rt| self.data().fence(&mut rt.engine, assert))
            .inspect_err(|_| self.epoch.set(Open::None))?;
        Ok(FenceEpoch {
            win: self,
            ended: false,
        })
    }

    /// `MPI_Win_free`, collective: waits until every member frees it. The program's memory
    /// the window is over is dropped then (see [`Self::into_vec`] to keep it).
    pub fn free(self) -> Result<()> {
        self.into_regions().map(drop)
    }

    /// `MPI_Win_free`, giving back the program's memory the window is over, in the order it
    /// was lent (none for Weft's own memory; one `Vec` for [`Self::create`]'s; every region
    /// attached to a dynamic window, detached ones too), or leaking it on error (another
    /// member may still reach it).
    pub fn into_regions(mut self) -> Result<Vec<Vec<T>>> {
        let data = self.data.take().expect("not freed yet");
        runtime::with_call("Win_free", |rt| {
            WindowData::free(data, &mut rt.engine, &mut rt.contexts)
        })?;
        let lent = std::mem::take(self.lent.get_mut());
        // SAFETY: every member has freed the window (the barrier in `free`), so no one
        // reaches the memory any more; each is given back once (taken from `self`).
        Ok(lent.into_iter().map(|m| unsafe { m.give_back() }).collect())
    }
}

impl<T> Drop for Window<T> {
    /// Dropped without [`Window::free`]: gives back the window's contexts, without waiting for
    /// the others (Weft's memory stays mapped until the last member lets it go, and a `create`
    /// window's is leaked, so no one loses what it reaches).
    fn drop(&mut self) {
        if let Some(data) = self.data.take() {
            runtime::try_with(|rt| {
                remote::unserve(&mut rt.engine, &data);
                rt.contexts.release(data.comm_pair())
            });
        }
    }
}

/// The operations of an epoch: each checks that the epoch covers `target`, then reaches the
/// target's memory directly. Displacements count elements of `T`.
pub trait Access<T: Equivalence + Copy> {
    /// The window.
    #[doc(hidden)]
    fn window(&self) -> &Window<T>;
    /// Whether this epoch covers `target` (an `RmaSync` error naming `call` if not): every
    /// member, but in a lock epoch.
    #[doc(hidden)]
    fn covers(&self, _call: &'static str, _target: Rank) -> Result<()> {
        Ok(())
    }

    /// `MPI_Put`: `data` into `target`'s part at element `disp`.
    fn put(&self, target: Rank, disp: usize, data: &[T]) -> Result<()> {
        const CALL: &str = "Put";
        self.covers(CALL, target)?;
        let data = bytes(data);
        let w = self.window().data();
        // A node-shared part: a copy, no `Located`.
        if let Some(at) = isize::try_from(disp)
            .ok()
            .and_then(|d| w.shared_span(target, d, data.len()))
        {
            w.put_in_place(&at, data);
            return Ok(());
        }
        let at = span(w, CALL, target, disp, data.len())?;
        if !w.by_messages() {
            return w.put_here(CALL, &at, data); // no runtime needed
        }
        runtime::with_call(CALL, |rt| w.put(&mut rt.engine, CALL, &at, data))
    }

    /// `MPI_Get`: `out.len()` elements of `target`'s part at element `disp` into `out`.
    fn get(&self, target: Rank, disp: usize, out: &mut [T]) -> Result<()> {
        const CALL: &str = "Get";
        self.covers(CALL, target)?;
        // SAFETY: `T` is plain data (checked at allocation): any bytes are a valid `T`.
        let out = unsafe { bytes_mut(out) };
        let w = self.window().data();
        // A node-shared part: a copy, no `Located`.
        if let Some(at) = isize::try_from(disp)
            .ok()
            .and_then(|d| w.shared_span(target, d, out.len()))
        {
            w.get_in_place(&at, out);
            return Ok(());
        }
        let at = span(w, CALL, target, disp, out.len())?;
        if !w.by_messages() {
            return w.get_here(CALL, &at, out); // no runtime needed
        }
        runtime::with_call(CALL, |rt| w.get(&mut rt.engine, CALL, &at, out))
    }

    /// `MPI_Accumulate`: `target[disp + i] = data[i] op target[disp + i]`, element-wise atomic.
    #[inline(always)]
    fn accumulate(
        &self,
        target: Rank,
        disp: usize,
        data: &[T],
        op: &SystemOperation,
    ) -> Result<()> {
        const CALL: &str = "Accumulate";
        self.covers(CALL, target)?;
        accumulate_at(self.window(), CALL, (target, disp), bytes(data), None, op)
    }

    /// `MPI_Get_accumulate`: as [`Access::accumulate`], the elements' values before into `old`
    /// (as long as `data`).
    #[inline(always)]
    fn get_accumulate(
        &self,
        target: Rank,
        disp: usize,
        data: &[T],
        old: &mut [T],
        op: &SystemOperation,
    ) -> Result<()> {
        const CALL: &str = "Get_accumulate";
        self.covers(CALL, target)?;
        if old.len() != data.len() {
            return Err(Error::new(
                ErrorClass::Count,
                CALL,
                format!(
                    "{} elements to combine and room for {} old ones",
                    data.len(),
                    old.len()
                ),
            ));
        }
        // SAFETY: `T` is plain data (checked at allocation).
        let old = unsafe { bytes_mut(old) };
        accumulate_at(
            self.window(),
            CALL,
            (target, disp),
            bytes(data),
            Some(old),
            op,
        )
    }

    /// `MPI_Fetch_and_op`: one element, atomically; its value before.
    #[inline(always)]
    fn fetch_and_op(&self, target: Rank, disp: usize, value: T, op: &SystemOperation) -> Result<T> {
        let mut old = [value];
        self.get_accumulate(target, disp, &[value], &mut old, op)
            .map_err(|e| Error::new(e.class, "Fetch_and_op", e.detail))?;
        Ok(old[0])
    }

    /// `MPI_Compare_and_swap`: `target[disp] = swap` if it equals `compare`, atomically; its
    /// value before.
    fn compare_and_swap(&self, target: Rank, disp: usize, compare: T, swap: T) -> Result<T> {
        const CALL: &str = "Compare_and_swap";
        self.covers(CALL, target)?;
        let basic = basic_of(CALL, self.window())?;
        let mut old = [compare];
        // SAFETY: `T` is plain data (checked at allocation).
        let out = unsafe { bytes_mut(&mut old) };
        let w = self.window().data();
        let lone = isize::try_from(disp)
            .ok()
            .and_then(|d| w.shared_span(target, d, out.len()));
        if let Some(lone) = lone.filter(|l| atomic::is_lock_free_at(basic, l.at)) {
            w.lone_atomic(&lone, |at| {
                // SAFETY: as in `lone_atomic`: one element of `basic` of a part mapped here.
                unsafe {
                    atomic::compare_and_swap(basic, at, bytes(&[compare]), bytes(&[swap]), out)
                }
            })
            .map_err(|e| Error::new(e.class, CALL, e.detail))?;
            return Ok(old[0]);
        }
        let at = span(w, CALL, target, disp, out.len())?;
        let (compare, swap) = ([compare], [swap]);
        let (c, s) = (bytes(&compare), bytes(&swap));
        runtime::with_call(CALL, |rt| {
            w.compare_and_swap(&mut rt.engine, CALL, &at, Some(basic), c, s, out)
        })?;
        Ok(old[0])
    }

    /// `MPI_Put` with datatypes on both sides: `origin`'s data (a slice, or a
    /// [`View`](crate::datatype::View) of a derived datatype) into the layout `to` names at
    /// its target. Both sides must hold the same bytes of data (a `Type` error otherwise).
    fn put_typed<B, D>(&self, origin: &B, to: Target<'_, D>) -> Result<()>
    where
        B: Buffer + ?Sized,
        D: Datatype + ?Sized,
    {
        self.covers("Put", to.rank)?;
        typed::put(self.window(), &origin.layout(), &to)
    }

    /// `MPI_Get` with datatypes on both sides: the layout `from` names at its target into
    /// `out` (a slice, or a [`MutView`](crate::datatype::MutView) of a derived datatype).
    fn get_typed<B, D>(&self, out: &mut B, from: Target<'_, D>) -> Result<()>
    where
        B: BufferMut + ?Sized,
        D: Datatype + ?Sized,
    {
        self.covers("Get", from.rank)?;
        // SAFETY: the layout of `out`, borrowed mutably for the call.
        unsafe { typed::get(self.window(), &out.layout_mut(), &from) }
    }

    /// `MPI_Accumulate` with datatypes on both sides: `origin`'s elements combined by `op`
    /// into the layout `to` names, element-wise atomic. Both sides' datatypes must be made
    /// of the window's element type (`T` as one predefined type).
    fn accumulate_typed<B, D>(
        &self,
        origin: &B,
        to: Target<'_, D>,
        op: &SystemOperation,
    ) -> Result<()>
    where
        B: Buffer + ?Sized,
        D: Datatype + ?Sized,
    {
        const CALL: &str = "Accumulate";
        self.covers(CALL, to.rank)?;
        let sides = (&origin.layout(), None);
        // SAFETY: no result buffer.
        unsafe { typed::get_accumulate(self.window(), CALL, sides, &to, op.sys_op()) }
    }

    /// `MPI_Get_accumulate` with datatypes on every side: as [`Access::accumulate_typed`],
    /// the values before into `result` (laid out as its own datatype says).
    fn get_accumulate_typed<B, R, D>(
        &self,
        origin: &B,
        result: &mut R,
        to: Target<'_, D>,
        op: &SystemOperation,
    ) -> Result<()>
    where
        B: Buffer + ?Sized,
        R: BufferMut + ?Sized,
        D: Datatype + ?Sized,
    {
        const CALL: &str = "Get_accumulate";
        self.covers(CALL, to.rank)?;
        let sides = (&origin.layout(), Some(&result.layout_mut()));
        // SAFETY: the result's layout, borrowed mutably for the call.
        unsafe { typed::get_accumulate(self.window(), CALL, sides, &to, op.sys_op()) }
    }

    /// `MPI_Win_flush` (and `flush_local`): the epoch's operations so far are complete and
    /// visible to whatever this process does next. An error is one an earlier operation by
    /// message met at its target (puts and accumulates by message return once started). To
    /// order the program's own loads and stores on the window, [`Window::sync`]
    /// (`MPI_Win_sync`).
    fn flush(&self) -> Result<()> {
        let w = self.window().data();
        match w.by_messages() {
            true => runtime::with_call("Win_flush", |rt| w.flush(&mut rt.engine, "Win_flush")),
            false => {
                w.flush_memory();
                Ok(())
            }
        }
    }
}

/// The bytes of `len` at element `disp` of `target`'s part, checked to lie within it.
fn span(
    w: &WindowData,
    call: &'static str,
    target: Rank,
    disp: usize,
    len: usize,
) -> Result<Located> {
    let disp = isize::try_from(disp).map_err(|_| {
        Error::new(
            ErrorClass::Disp,
            call,
            format!("displacement {disp} is too large"),
        )
    })?;
    w.locate(call, target, disp, &[(0, len)])
}

/// An accumulate of `data` (elements of `T`, as bytes) at element `disp` of `target`'s part,
/// the old values into `old` when given.
#[inline(always)]
fn accumulate_at<T: Equivalence + Copy>(
    win: &Window<T>,
    call: &'static str,
    (target, disp): (Rank, usize),
    data: &[u8],
    mut old: Option<&mut [u8]>,
    op: &SystemOperation,
) -> Result<()> {
    let w = win.data();
    let basic = basic_of(call, win)?;
    if let Some(done) = lone_atomic(w, call, (target, disp), basic, data, old.as_deref_mut(), op) {
        return done;
    }
    if !crate::coll::op::applies(op.sys_op(), Elements::Basic(basic)) {
        return Err(Error::new(
            ErrorClass::Op,
            call,
            format!("{} is not defined on {basic:?}", op.sys_op().name()),
        ));
    }
    // Contiguous elements of a node-shared part: combined in place, no `Located`.
    let lengths_match = old.as_deref().is_none_or(|o| o.len() == data.len());
    let mapped = isize::try_from(disp)
        .ok()
        .filter(|_| lengths_match)
        .and_then(|d| w.shared_span(target, d, data.len()));
    if let Some(at) = mapped {
        w.accumulate_in_place(&at, op.sys_op(), basic, data, old);
        return Ok(());
    }
    let at = span(w, call, target, disp, data.len())?;
    // The function is looked up only if an element needs it (the CPU's atomics do not).
    let how = Combiner {
        op: op.sys_op(),
        basic: Some(basic),
        unit: std::mem::size_of::<T>(),
        elements: Some(Elements::Basic(basic)),
        foreign: None,
        combine: None,
    };
    runtime::with_call(call, |rt| {
        w.accumulate(&mut rt.engine, call, &at, &how, data, old)
    })
}

/// One element of a node-shared part the CPU updates atomically in place: the accumulate
/// done with no [`Located`] (`MPI_Fetch_and_op`'s fast path). `None`: not such an element
/// (or a bad target or displacement): the general way decides and reports.
#[inline(always)]
fn lone_atomic(
    w: &WindowData,
    call: &'static str,
    (target, disp): (Rank, usize),
    basic: Basic,
    data: &[u8],
    old: Option<&mut [u8]>,
    op: &SystemOperation,
) -> Option<Result<()>> {
    if data.len() != basic.size() {
        return None;
    }
    let lone = w.shared_span(target, isize::try_from(disp).ok()?, data.len())?;
    if !atomic::is_lock_free_at(basic, lone.at) {
        return None;
    }
    let mut scratch = [0u8; 16];
    let old = match old {
        Some(o) => o,
        None => &mut scratch[..data.len()],
    };
    let done = w.lone_atomic(&lone, |at| {
        // SAFETY: `at` heads one element of `basic` within the part, mapped here, which
        // origins touch only atomically in accumulate epochs (MPI forbids conflicting puts
        // and stores), and the gate keeps lockers' plain updates away meanwhile.
        unsafe { atomic::fetch_and_op(basic, op.sys_op(), at, data, old) }
    });
    Some(done.map_err(|e| Error::new(e.class, call, e.detail)))
}

/// `T` as one predefined type, for the atomic operations.
fn basic_of<T>(call: &'static str, w: &Window<T>) -> Result<Basic> {
    w.basic.ok_or_else(|| {
        Error::new(
            ErrorClass::Op,
            call,
            "the window's elements are not one predefined type, which MPI's operations need",
        )
    })
}

fn bytes<T: Copy>(data: &[T]) -> &[u8] {
    // SAFETY: `T` has no padding (checked at allocation: its data fills its size), so all of
    // its bytes are initialized.
    unsafe { std::slice::from_raw_parts(data.as_ptr() as *const u8, std::mem::size_of_val(data)) }
}

/// # Safety
/// Any bytes written must be a valid `T`: `T` is plain data (every bit pattern valid).
unsafe fn bytes_mut<T: Copy>(data: &mut [T]) -> &mut [u8] {
    // SAFETY: as in `bytes`; the caller's promise for what is written.
    unsafe {
        std::slice::from_raw_parts_mut(data.as_mut_ptr() as *mut u8, std::mem::size_of_val(data))
    }
}

/// A passive-target epoch on one target (`MPI_Win_lock` .. `MPI_Win_unlock`, at drop or by
/// [`LockEpoch::unlock`]).
#[derive(Debug)]
pub struct LockEpoch<'w, T: Equivalence + Copy> {
    win: &'w Window<T>,
    target: Rank,
    kind: LockKind,
    /// Whether the lock was deferred and the epoch has made no operation yet (`lazy`): the
    /// lock word is taken by the first, or by this process's next lock call.
    deferred: Cell<bool>,
}

impl<T: Equivalence + Copy> Access<T> for LockEpoch<'_, T> {
    fn window(&self) -> &Window<T> {
        self.win
    }
    fn covers(&self, call: &'static str, target: Rank) -> Result<()> {
        if target != self.target {
            return Err(Error::new(
                ErrorClass::RmaSync,
                call,
                format!(
                    "target {target} is outside this lock epoch (on target {})",
                    self.target
                ),
            ));
        }
        if self.deferred.get() {
            lazy::take_if(self.win.data(), target, &wait_lock(call))?;
            self.deferred.set(false);
        }
        Ok(())
    }

    /// `MPI_Win_flush(target)`: the epoch's operations are complete; those of other lock
    /// epochs of this process on the window, by messages, may stay in flight.
    fn flush(&self) -> Result<()> {
        flush_target(self.win.data(), self.target)
    }
}

/// `MPI_Win_flush` (and `flush_local`) of one target: its operations so far are complete.
fn flush_target(w: &WindowData, target: Rank) -> Result<()> {
    const CALL: &str = "Win_flush";
    match w.by_messages() {
        true => runtime::with_call(CALL, |rt| w.flush_target(&mut rt.engine, CALL, target)),
        false => {
            w.check_target(CALL, target)?;
            w.flush_memory();
            Ok(())
        }
    }
}

impl<T: Equivalence + Copy> LockEpoch<'_, T> {
    /// `MPI_Win_unlock`, as the drop does, returning what the drop cannot: an error one of
    /// the epoch's operations met at a target reached by messages (puts and accumulates by
    /// message return once started, and complete here).
    #[inline(always)]
    pub fn unlock(self) -> Result<()> {
        let done = self.release();
        // Its fields are a reference and plain values: nothing to drop but the unlock, done.
        std::mem::forget(self);
        done
    }

    #[inline(always)]
    fn release(&self) -> Result<()> {
        let w = self.win;
        // A deferred lock still deferred: no word to release.
        let held = !(self.deferred.get() && lazy::cancel_if(w.data(), self.target));
        // The target was checked when the lock was taken.
        let done = match held {
            true => unlock(w.data(), "Win_unlock", self.target, self.kind),
            false => Ok(()),
        };
        if w.held.get() == self.target {
            // Another held lock, if any, moves up.
            w.held.set(w.more.borrow_mut().pop().unwrap_or(NO_TARGET));
        } else {
            w.more.borrow_mut().retain(|&t| t != self.target);
        }
        if w.held.get() == NO_TARGET {
            w.epoch.set(Open::None);
        }
        done
    }
}

impl<T: Equivalence + Copy> Drop for LockEpoch<'_, T> {
    #[inline(always)]
    fn drop(&mut self) {
        let _ = self.release();
    }
}

/// Waits for a lock word someone else holds, progressing the runtime (a deferred lock taken).
fn wait_lock(call: &'static str) -> impl Fn(&WindowData, Rank, LockKind) -> Result<()> {
    move |w, t, kind| {
        runtime::with_call(call, |rt| {
            w.take_deferred_lock(&mut rt.engine, call, t, kind)
        })
    }
}

/// Releases `target`'s lock of `kind`: by itself when the window reaches every member
/// directly, otherwise in the runtime (a message to a target reached so).
#[inline(always)]
fn unlock(data: &WindowData, call: &'static str, target: Rank, kind: LockKind) -> Result<()> {
    if data.try_unlock_here(target, kind) {
        return Ok(()); // reached directly: no runtime, no error to build
    }
    unlock_by_messages(data, call, target, kind)
}

/// [`unlock`] of a target reached by messages (or an error).
fn unlock_by_messages(
    data: &WindowData,
    call: &'static str,
    target: Rank,
    kind: LockKind,
) -> Result<()> {
    if data.by_messages() {
        runtime::with_call(call, |rt| data.unlock(&mut rt.engine, call, target, kind))
    } else {
        data.unlock_here(call, target, kind)
    }
}

/// A shared passive-target epoch on every member (`MPI_Win_lock_all` .. `unlock_all`, at drop
/// or by [`LockAllEpoch::unlock_all`]).
#[derive(Debug)]
pub struct LockAllEpoch<'w, T: Equivalence + Copy> {
    win: &'w Window<T>,
}

impl<T: Equivalence + Copy> Access<T> for LockAllEpoch<'_, T> {
    fn window(&self) -> &Window<T> {
        self.win
    }
}

impl<T: Equivalence + Copy> LockAllEpoch<'_, T> {
    /// `MPI_Win_flush(target)` (and `MPI_Win_flush_local(target)`): the epoch's operations
    /// on `target` are complete and visible to whatever this process does next; those by
    /// messages to other targets may stay in flight ([`Access::flush`] completes them all).
    pub fn flush_target(&self, target: Rank) -> Result<()> {
        flush_target(self.win.data(), target)
    }

    /// `MPI_Win_unlock_all`, as the drop does, returning what the drop cannot (see
    /// [`LockEpoch::unlock`]).
    pub fn unlock_all(self) -> Result<()> {
        let done = self.release();
        // Its field is a reference: nothing to drop but the unlock, done.
        std::mem::forget(self);
        done
    }

    fn release(&self) -> Result<()> {
        const CALL: &str = "Win_unlock_all";
        let data = self.win.data();
        let done = match data.by_messages() {
            true => runtime::with_call(CALL, |rt| data.unlock_all(&mut rt.engine, CALL)),
            false => (0..self.win.size())
                .try_for_each(|t| data.unlock_here(CALL, t as Rank, LockKind::Shared)),
        };
        self.win.epoch.set(Open::None);
        done
    }
}

impl<T: Equivalence + Copy> Drop for LockAllEpoch<'_, T> {
    fn drop(&mut self) {
        let _ = self.release();
    }
}

/// Fence epochs (`MPI_Win_fence` .. `MPI_Win_fence`): every member's operations between two
/// fences are complete at every member after the second.
#[derive(Debug)]
pub struct FenceEpoch<'w, T: Equivalence + Copy> {
    win: &'w Window<T>,
    ended: bool,
}

impl<T: Equivalence + Copy> FenceEpoch<'_, T> {
    /// `MPI_Win_fence` between two epochs, collective.
    pub fn fence(&mut self) -> Result<()> {
        self.fence_with(Assert::NONE)
    }

    /// [`Self::fence`] with assertions: `NO_STORE`, `NO_PUT`, and `NO_PRECEDE` and
    /// `NO_SUCCEED`, which every member gives or none. A fence asserted both `NO_PRECEDE` and
    /// `NO_SUCCEED` (an epoch with no operations) does not synchronize the members; the
    /// others are hints.
    pub fn fence_with(&mut self, assert: Assert) -> Result<()> {
        const CALL: &str = "Win_fence";
        only_asserts(CALL, assert, FENCE_ASSERTS)?;
        runtime::with_call(CALL, |rt| self.win.data().fence(&mut rt.engine, assert))
    }

    /// The last `MPI_Win_fence`, collective: ends the epochs.
    pub fn end(self) -> Result<()> {
        self.end_with(Assert::NONE)
    }

    /// [`Self::end`] with assertions (as [`Self::fence_with`]; `NO_SUCCEED` is what an end
    /// means, but is the program's to assert, as every member must).
    pub fn end_with(mut self, assert: Assert) -> Result<()> {
        const CALL: &str = "Win_fence";
        only_asserts(CALL, assert, FENCE_ASSERTS)?;
        self.ended = true;
        self.win.epoch.set(Open::None);
        runtime::with_call(CALL, |rt| self.win.data().fence(&mut rt.engine, assert))
    }
}

/// The assertions a fence takes.
const FENCE_ASSERTS: Assert = Assert::NO_STORE
    .union(Assert::NO_PUT)
    .union(Assert::NO_PRECEDE)
    .union(Assert::NO_SUCCEED);

/// An `Assert` error naming `call` when `assert` has flags beyond `allowed`.
fn only_asserts(call: &'static str, assert: Assert, allowed: Assert) -> Result<()> {
    if allowed.contains(assert) {
        return Ok(());
    }
    Err(Error::new(
        ErrorClass::Assert,
        call,
        format!("{assert:?} asserts what this call does not take (it takes {allowed:?})"),
    ))
}

impl<T: Equivalence + Copy> Access<T> for FenceEpoch<'_, T> {
    fn window(&self) -> &Window<T> {
        self.win
    }
}

impl<T: Equivalence + Copy> Drop for FenceEpoch<'_, T> {
    /// Ends the epochs with the last fence (collective: every member drops its guard at the
    /// same point), unless [`FenceEpoch::end`] did, or the thread is panicking (the job is
    /// ending then, and the others may not come).
    fn drop(&mut self) {
        if self.ended || std::thread::panicking() {
            return;
        }
        self.win.epoch.set(Open::None);
        fatal(runtime::with_call("Win_fence", |rt| {
            self.win.data().fence(&mut rt.engine, Assert::NONE)
        }));
    }
}
