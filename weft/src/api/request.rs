//! Nonblocking requests in rsmpi's shape: a request borrows its buffer for `'a` and belongs
//! to a scope that outlives it; [`scope`] checks at its end that every request was
//! completed. Dropping an incomplete request is a bug and panics (as in rsmpi); use
//! [`WaitGuard`] or [`CancelGuard`] to complete on drop.
//!
//! Whatever happens, an operation never outlives its buffer: a request dropped before it
//! completed (a bug, or a panic unwinding through its scope, perhaps caught later), and any
//! request a scope still holds when it ends (one that was `mem::forget`-ten), is settled
//! first: a receive that has not matched is cancelled, and anything else in flight is waited
//! for. Only then is the bug reported (when not already unwinding).

use super::status::{to_status, Status};
use crate::comm::group::GroupData;
use crate::engine::request::{Handle, MsgStatus};
use crate::error::fatal;
use crate::runtime;
use std::cell::{Cell, RefCell};
use std::marker::PhantomData;
use std::rc::Rc;

/// An operation registered with a scope (opaque).
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PendingOp(Handle);

/// A scope that requests are registered with (rsmpi's `Scope`).
///
/// # Safety
/// An implementation must not end before every operation registered with it is complete
/// (or settled: see the module comment).
pub unsafe trait Scope<'a> {
    /// Registers a new operation.
    #[doc(hidden)]
    fn register(&self, op: PendingOp);
    /// Unregisters an operation that is complete.
    ///
    /// # Safety
    /// Only for an operation that was registered and is now complete.
    #[doc(hidden)]
    unsafe fn unregister(&self, op: PendingOp);
}

/// The scope of requests whose buffers live forever.
#[derive(Clone, Copy, Debug)]
pub struct StaticScope;

// SAFETY: 'static buffers outlive any request.
unsafe impl Scope<'static> for StaticScope {
    fn register(&self, _: PendingOp) {}
    unsafe fn unregister(&self, _: PendingOp) {}
}

/// A scope made by [`scope`]: it keeps the operations registered with it and settles any
/// still in flight when it ends, so none outlives the buffers borrowed for the scope.
#[derive(Debug)]
pub struct LocalScope<'a> {
    ops: RefCell<Vec<Handle>>,
    /// Length of `ops` at which completed operations are next swept out.
    sweep_at: Cell<usize>,
    _borrow: PhantomData<Cell<&'a ()>>,
}

const FIRST_SWEEP: usize = 64;

// SAFETY: `scope()` keeps the LocalScope alive for its whole closure, and its Drop settles
// every registered operation that is not complete (cancel or wait) before the borrows of 'a
// end, unwinding or not; registrations are dropped only for operations that are complete.
unsafe impl<'a> Scope<'a> for &LocalScope<'a> {
    fn register(&self, op: PendingOp) {
        let mut ops = self.ops.borrow_mut();
        if ops.len() >= self.sweep_at.get() {
            // Completed operations not yet unregistered (see `unregister`; and those completed
            // through a collection): forget the ones the engine says are complete or freed,
            // so a long scope stays small. Amortized O(1) per request.
            runtime::try_with(|rt| ops.retain(|&h| !rt.engine.is_done(h)));
            self.sweep_at.set((ops.len() * 2).max(FIRST_SWEEP));
        }
        ops.push(op.0);
    }
    unsafe fn unregister(&self, op: PendingOp) {
        // The newest is the common case; any other completed operation stays until the
        // next sweep (a search here would make many requests completed in order quadratic).
        let mut ops = self.ops.borrow_mut();
        if ops.last() == Some(&op.0) {
            ops.pop();
        }
    }
}

impl Drop for LocalScope<'_> {
    fn drop(&mut self) {
        let ops = std::mem::take(self.ops.get_mut());
        // Most are complete and freed already (completed through a collection).
        let unfinished = settle(&ops, false);
        if unfinished != 0 && !std::thread::panicking() {
            panic!(
                "weft: request scope: {unfinished} request(s) were not completed before the \
                 scope ended (wait on them, or wrap them in WaitGuard); they were cancelled \
                 (receives not yet matched) or waited for"
            );
        }
    }
}

/// Ends the operations `ops` whose requests are going away before they completed: a receive
/// that has not matched is cancelled, anything else in flight (a matched receive, a send) is
/// waited for, since its buffer is about to be freed. With `free_done`, also frees those
/// that are complete but not yet freed (a dropped request's own operation). Returns how many
/// were unfinished. Aborts the process when it cannot be done (called from inside weft).
pub(crate) fn settle(ops: &[Handle], free_done: bool) -> usize {
    if ops.is_empty() {
        return 0;
    }
    let settled = runtime::try_with(|rt| {
        let mut unfinished = 0;
        for &h in ops {
            if rt.engine.is_done(h) {
                // Complete, or freed already: nothing in flight.
                if free_done {
                    let _ = rt.engine.wait(h);
                }
                continue;
            }
            unfinished += 1;
            rt.engine.cancel_receive(h);
            if !rt.engine.is_done(h) && std::thread::panicking() {
                // If its peer never comes, this is where the rank hangs: say so.
                eprintln!(
                    "weft: rank {}: unwinding from a panic with a send or a matched receive \
                     in flight; waiting for it to end before its buffer is freed",
                    rt.boot.rank
                );
            }
            // The result does not matter: the request goes away; what counts is that the
            // engine no longer touches its buffer.
            let _ = rt.engine.wait(h);
        }
        unfinished
    });
    match settled {
        Some(unfinished) => unfinished,
        // No runtime: finalized (or never started), so no engine will touch the buffer.
        None if !runtime::is_running() => 0,
        None => {
            eprintln!(
                "weft: a request was dropped while the runtime was in use (from inside a weft \
                 call), so its operation cannot be ended before its buffer is freed; aborting"
            );
            std::process::abort()
        }
    }
}

/// Runs `f` with a scope for nonblocking requests that borrow local buffers.
pub fn scope<'a, F, R>(f: F) -> R
where
    F: FnOnce(&LocalScope<'a>) -> R,
{
    scope_with_capacity(0, f)
}

/// [`scope`] with room for `capacity` requests registered at once.
fn scope_with_capacity<'a, F, R>(capacity: usize, f: F) -> R
where
    F: FnOnce(&LocalScope<'a>) -> R,
{
    let s = LocalScope {
        ops: RefCell::new(Vec::with_capacity(capacity)),
        sweep_at: Cell::new(capacity.max(FIRST_SWEEP)),
        _borrow: PhantomData,
    };
    f(&s)
}

/// What runs when a request completes: drops a nonblocking send's packed copy, or checks a
/// staged receive's data and scatters it into the buffer.
pub(crate) type Finish = Box<dyn FnOnce(&MsgStatus) -> crate::Result<()>>;

/// A request taken apart: handle, data pointer, group for status translation, completion hook.
type Parts<D> = (Handle, *const D, Option<Rc<GroupData>>, Option<Finish>);

/// A nonblocking operation in flight.
#[must_use = "a request must be completed (wait, test, or a guard)"]
pub struct Request<'a, D: ?Sized, S: Scope<'a> = StaticScope> {
    handle: Handle,
    data: *const D,
    group: Option<Rc<GroupData>>,
    scope: S,
    /// A packed copy for nonblocking sends of non-contiguous data, or a datatype receive's
    /// staging buffer with the check and unpack to run at completion.
    finish: Option<Finish>,
    _data: PhantomData<&'a D>,
}

impl<'a, D: ?Sized, S: Scope<'a>> Request<'a, D, S> {
    pub(crate) fn new(
        handle: Handle,
        data: *const D,
        group: Option<Rc<GroupData>>,
        scope: S,
    ) -> Self {
        scope.register(PendingOp(handle));
        Request {
            handle,
            data,
            group,
            scope,
            finish: None,
            _data: PhantomData,
        }
    }

    pub(crate) fn with_finish(mut self, f: Finish) -> Self {
        self.finish = Some(f);
        self
    }

    /// Ends the request once the engine has freed its operation (with `st`).
    #[track_caller]
    fn complete(mut self, st: crate::Result<MsgStatus>) -> Status {
        let finish = self.finish.take();
        let group = self.group.take();
        // SAFETY: the request was registered with this scope in `new` and is now complete.
        unsafe { self.scope.unregister(PendingOp(self.handle)) };
        std::mem::forget(self);
        let st = fatal(st);
        if let Some(f) = finish {
            fatal(f(&st));
        }
        to_status(&st, group.as_deref())
    }

    /// Waits for completion.
    #[track_caller]
    pub fn wait(self) -> Status {
        let h = self.handle;
        let st = runtime::with_call("wait", |rt| rt.engine.wait(h));
        self.complete(st)
    }

    /// Waits, discarding the status.
    #[track_caller]
    pub fn wait_without_status(self) {
        self.wait();
    }

    /// Waits and returns the buffer, now holding the received data.
    #[track_caller]
    pub fn wait_for_data(self) -> &'a D {
        let data = self.data;
        self.wait();
        // SAFETY: `data` came from a `&'a D` (or `&'a mut D`) borrowed for the request's
        // lifetime; the operation is complete, so nothing writes it any more.
        unsafe { &*data }
    }

    /// Completes if done: `Ok(status)`, or gives the request back.
    #[track_caller]
    pub fn test(self) -> Result<Status, Self> {
        let h = self.handle;
        match runtime::with_call("test", |rt| rt.engine.test(h)) {
            Ok(Some(st)) => Ok(self.complete(Ok(st))),
            Ok(None) => Err(self),
            Err(e) => Ok(self.complete(Err(e))),
        }
    }

    /// Asks to cancel: a pending receive is cancelled; a send is cancelled if its receiver
    /// has not matched it yet (a message still in the receiver's unexpected queue is dropped
    /// there). The status says whether it was. Complete the request afterwards.
    #[track_caller]
    pub fn cancel(&self) {
        let h = self.handle;
        runtime::with_call("cancel", |rt| rt.engine.cancel(h));
    }

    /// Whether the operation has completed, without completing the request.
    #[track_caller]
    pub fn is_complete(&self) -> bool {
        let h = self.handle;
        runtime::with_call("is_complete", |rt| {
            rt.engine.progress();
            rt.engine.is_done(h)
        })
    }

    /// Hands the request to a collection. It stays registered with its scope, which thus
    /// still settles it if the collection is forgotten.
    pub(crate) fn into_parts(self) -> Parts<D> {
        let mut me = std::mem::ManuallyDrop::new(self);
        (me.handle, me.data, me.group.take(), me.finish.take())
    }
}

impl<'a, D: ?Sized, S: Scope<'a>> std::fmt::Debug for Request<'a, D, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Request")
            .field("handle", &self.handle)
            .finish_non_exhaustive()
    }
}

impl<'a, D: ?Sized, S: Scope<'a>> Drop for Request<'a, D, S> {
    fn drop(&mut self) {
        // Settle before the fields (a staging buffer, a packed copy) go.
        settle(&[self.handle], true);
        // SAFETY: settled: the operation is over.
        unsafe { self.scope.unregister(PendingOp(self.handle)) };
        if !std::thread::panicking() {
            panic!(
                "weft: a request was dropped before it completed (wait on it, or use \
                 WaitGuard); it was cancelled (a receive not yet matched) or waited for"
            );
        }
    }
}

/// Waits for the request when dropped.
pub struct WaitGuard<'a, D: ?Sized, S: Scope<'a> = StaticScope>(Option<Request<'a, D, S>>);

impl<'a, D: ?Sized, S: Scope<'a>> From<Request<'a, D, S>> for WaitGuard<'a, D, S> {
    fn from(r: Request<'a, D, S>) -> Self {
        WaitGuard(Some(r))
    }
}

impl<'a, D: ?Sized, S: Scope<'a>> Drop for WaitGuard<'a, D, S> {
    fn drop(&mut self) {
        if let Some(r) = self.0.take() {
            if std::thread::panicking() {
                // Unwinding: a receive may never be matched now; dropping settles it.
                drop(r);
            } else {
                r.wait();
            }
        }
    }
}

/// Cancels, then waits for, the request when dropped.
pub struct CancelGuard<'a, D: ?Sized, S: Scope<'a> = StaticScope>(Option<Request<'a, D, S>>);

impl<'a, D: ?Sized, S: Scope<'a>> From<Request<'a, D, S>> for CancelGuard<'a, D, S> {
    fn from(r: Request<'a, D, S>) -> Self {
        CancelGuard(Some(r))
    }
}

impl<'a, D: ?Sized, S: Scope<'a>> Drop for CancelGuard<'a, D, S> {
    fn drop(&mut self) {
        if let Some(r) = self.0.take() {
            if std::thread::panicking() {
                // Dropping settles it: cancelled, or waited for, without a second panic.
                drop(r);
            } else {
                r.cancel();
                r.wait();
            }
        }
    }
}

/// Waits for any request of `requests`; removes it and returns its index and status, or
/// `None` when the vector is empty.
pub fn wait_any<'a, D: ?Sized, S: Scope<'a>>(
    requests: &mut Vec<Request<'a, D, S>>,
) -> Option<(usize, Status)> {
    if requests.is_empty() {
        return None;
    }
    let handles: Vec<Handle> = requests.iter().map(|r| r.handle).collect();
    let mut found = 0;
    runtime::with_call("wait_any", |rt| {
        rt.engine
            .wait_until(|e| match handles.iter().position(|&h| e.is_done(h)) {
                Some(i) => {
                    found = i;
                    true
                }
                None => false,
            })
    });
    let r = requests.remove(found);
    Some((found, r.wait()))
}

/// Requests managed together (rsmpi's `RequestCollection`).
pub struct RequestCollection<'a, D: ?Sized> {
    slots: Vec<Option<Slot<D>>>,
    incomplete: usize,
    _data: PhantomData<(&'a (), *const D)>,
}

struct Slot<D: ?Sized> {
    handle: Handle,
    data: *const D,
    group: Option<Rc<GroupData>>,
    finish: Option<Finish>,
}

/// Runs `f` with a scope and a collection of up to `capacity` requests (a hint).
pub fn multiple_scope<'a, F, R, D: ?Sized>(capacity: usize, f: F) -> R
where
    F: FnOnce(&LocalScope<'a>, &mut RequestCollection<'a, D>) -> R,
{
    scope_with_capacity(capacity, |s| {
        let mut coll = RequestCollection {
            slots: Vec::with_capacity(capacity),
            incomplete: 0,
            _data: PhantomData,
        };
        f(s, &mut coll)
    })
}

impl<'a, D: ?Sized> RequestCollection<'a, D> {
    /// An empty collection. Its requests stay registered with their scopes: a collection
    /// must be completed before their scope ends, which otherwise cancels (receives not yet
    /// matched) or waits for them, so their buffers are never freed in use.
    pub fn new() -> Self {
        RequestCollection {
            slots: Vec::new(),
            incomplete: 0,
            _data: PhantomData,
        }
    }

    /// Adds a request; returns its index.
    pub fn add<S: Scope<'a>>(&mut self, request: Request<'a, D, S>) -> usize {
        let (handle, data, group, finish) = request.into_parts();
        self.slots.push(Some(Slot {
            handle,
            data,
            group,
            finish,
        }));
        self.incomplete += 1;
        self.slots.len() - 1
    }

    /// Number of requests not yet completed.
    pub fn incomplete(&self) -> usize {
        self.incomplete
    }

    /// Number of requests ever added.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Whether no request was added.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    fn done_index(&self, rt: &mut runtime::Runtime) -> Option<usize> {
        self.slots
            .iter()
            .position(|s| s.as_ref().is_some_and(|s| rt.engine.is_done(s.handle)))
    }

    fn take(&mut self, i: usize, rt: &mut runtime::Runtime) -> (usize, Status, &'a D) {
        let slot = self.slots[i].take().expect("slot is live");
        self.incomplete -= 1;
        let st = fatal(rt.engine.wait(slot.handle));
        if let Some(f) = slot.finish {
            fatal(f(&st));
        }
        // SAFETY: `data` was borrowed for 'a when the request was made; it is complete.
        (i, to_status(&st, slot.group.as_deref()), unsafe {
            &*slot.data
        })
    }

    /// Waits for one request; `None` when all are complete.
    pub fn wait_any(&mut self) -> Option<(usize, Status, &'a D)> {
        if self.incomplete == 0 {
            return None;
        }
        runtime::with_call("wait_any", |rt| {
            let mut found = None;
            let me = &*self;
            rt.engine.wait_until(|e| {
                found = me
                    .slots
                    .iter()
                    .position(|s| s.as_ref().is_some_and(|s| e.is_done(s.handle)));
                found.is_some()
            });
            Some(self.take(found.expect("found"), rt))
        })
    }

    /// Waits for at least one request and returns every completed one in `out`.
    pub fn wait_some(&mut self, out: &mut Vec<(usize, Status, &'a D)>) {
        out.clear();
        if let Some(first) = self.wait_any() {
            out.push(first);
            self.test_some_into(out);
        }
    }

    /// Waits for all requests; returns them in `out` in index order.
    pub fn wait_all(&mut self, out: &mut Vec<(usize, Status, &'a D)>) {
        out.clear();
        runtime::with_call("wait_all", |rt| {
            let me = &*self;
            rt.engine
                .wait_until(|e| me.slots.iter().flatten().all(|s| e.is_done(s.handle)));
            for i in 0..self.slots.len() {
                if self.slots[i].is_some() {
                    out.push(self.take(i, rt));
                }
            }
        });
    }

    /// Completes one request if any is done.
    pub fn test_any(&mut self) -> Option<(usize, Status, &'a D)> {
        runtime::with_call("test_any", |rt| {
            rt.engine.progress();
            self.done_index(rt).map(|i| self.take(i, rt))
        })
    }

    fn test_some_into(&mut self, out: &mut Vec<(usize, Status, &'a D)>) {
        runtime::with_call("test_some", |rt| {
            rt.engine.progress();
            for i in 0..self.slots.len() {
                if self.slots[i]
                    .as_ref()
                    .is_some_and(|s| rt.engine.is_done(s.handle))
                {
                    out.push(self.take(i, rt));
                }
            }
        });
    }

    /// Returns every request that is done in `out` (possibly none).
    pub fn test_some(&mut self, out: &mut Vec<(usize, Status, &'a D)>) {
        out.clear();
        self.test_some_into(out);
    }

    /// If every request is done, returns them all in `out` and `true`; else `false`.
    pub fn test_all(&mut self, out: &mut Vec<(usize, Status, &'a D)>) -> bool {
        let all = runtime::with_call("test_all", |rt| {
            rt.engine.progress();
            self.slots
                .iter()
                .flatten()
                .all(|s| rt.engine.is_done(s.handle))
        });
        if all {
            self.wait_all(out);
        }
        all
    }
}

impl<D: ?Sized> Default for RequestCollection<'_, D> {
    fn default() -> Self {
        Self::new()
    }
}

impl<D: ?Sized> Drop for RequestCollection<'_, D> {
    fn drop(&mut self) {
        // Settle what is still in flight before the slots (staging buffers) go.
        let live: Vec<Handle> = self.slots.iter().flatten().map(|s| s.handle).collect();
        settle(&live, true);
        if self.incomplete != 0 && !std::thread::panicking() {
            panic!(
                "weft: a request collection was dropped with {} incomplete request(s)",
                self.incomplete
            );
        }
    }
}
