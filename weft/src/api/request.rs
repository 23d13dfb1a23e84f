//! Nonblocking requests in rsmpi's shape: a request borrows its buffer for `'a` and belongs
//! to a scope that outlives it; [`scope`] checks at its end that every request was
//! completed. Dropping an incomplete request is a bug and panics (as in rsmpi); use
//! [`WaitGuard`] or [`CancelGuard`] to complete on drop.

use super::point_to_point::{to_status, Status};
use crate::comm::group::GroupData;
use crate::engine::request::Handle;
use crate::runtime;
use std::cell::Cell;
use std::marker::PhantomData;
use std::rc::Rc;

/// A scope that requests are registered with (rsmpi's `Scope`).
///
/// # Safety
/// An implementation must not end before every request registered with it is completed.
pub unsafe trait Scope<'a> {
    /// Registers a new request.
    fn register(&self);
    /// Unregisters a completed request.
    ///
    /// # Safety
    /// Only for a request that was registered and is now complete.
    unsafe fn unregister(&self);
}

/// The scope of requests whose buffers live forever.
#[derive(Clone, Copy, Debug)]
pub struct StaticScope;

// SAFETY: 'static buffers outlive any request.
unsafe impl Scope<'static> for StaticScope {
    fn register(&self) {}
    unsafe fn unregister(&self) {}
}

/// A scope made by [`scope`]; checks that its requests complete before it ends.
#[derive(Debug)]
pub struct LocalScope<'a> {
    outstanding: Cell<usize>,
    _borrow: PhantomData<Cell<&'a ()>>,
}

// SAFETY: `scope()` keeps the LocalScope alive for its whole closure, and its Drop panics
// (aborting the job) if requests are still outstanding, so no request outlives its buffers
// unnoticed.
unsafe impl<'a> Scope<'a> for &LocalScope<'a> {
    fn register(&self) {
        self.outstanding.set(self.outstanding.get() + 1);
    }
    unsafe fn unregister(&self) {
        let n = self.outstanding.get();
        debug_assert!(n > 0, "unregistering from an empty scope");
        self.outstanding.set(n.saturating_sub(1));
    }
}

impl Drop for LocalScope<'_> {
    fn drop(&mut self) {
        if self.outstanding.get() != 0 && !std::thread::panicking() {
            panic!(
                "weft: request scope: {} request(s) were not completed before the scope ended \
                 (wait on them, or wrap them in WaitGuard)",
                self.outstanding.get()
            );
        }
    }
}

/// Runs `f` with a scope for nonblocking requests that borrow local buffers.
pub fn scope<'a, F, R>(f: F) -> R
where
    F: FnOnce(&LocalScope<'a>) -> R,
{
    let s = LocalScope {
        outstanding: Cell::new(0),
        _borrow: PhantomData,
    };
    f(&s)
}

/// A request taken apart: handle, data pointer, group for status translation, completion hook.
type Parts<D> = (
    Handle,
    *const D,
    Option<Rc<GroupData>>,
    Option<Box<dyn FnOnce()>>,
);

/// A nonblocking operation in flight.
#[must_use = "a request must be completed (wait, test, or a guard)"]
pub struct Request<'a, D: ?Sized, S: Scope<'a> = StaticScope> {
    handle: Handle,
    data: *const D,
    group: Option<Rc<GroupData>>,
    scope: S,
    /// A packed copy for nonblocking sends of non-contiguous data, or a datatype receive's
    /// staging buffer with the unpack to run at completion.
    finish: Option<Box<dyn FnOnce()>>,
    _data: PhantomData<&'a D>,
}

impl<'a, D: ?Sized, S: Scope<'a>> Request<'a, D, S> {
    pub(crate) fn new(
        handle: Handle,
        data: *const D,
        group: Option<Rc<GroupData>>,
        scope: S,
    ) -> Self {
        scope.register();
        Request {
            handle,
            data,
            group,
            scope,
            finish: None,
            _data: PhantomData,
        }
    }

    pub(crate) fn with_finish(mut self, f: Box<dyn FnOnce()>) -> Self {
        self.finish = Some(f);
        self
    }

    fn complete(mut self, st: crate::Result<crate::engine::request::MsgStatus>) -> Status {
        let st = st.unwrap_or_else(|e| panic!("{e}"));
        if let Some(f) = self.finish.take() {
            f();
        }
        let status = to_status(&st, self.group.as_deref());
        // SAFETY: the request was registered with this scope in `new` and is now complete.
        unsafe { self.scope.unregister() };
        std::mem::forget(self);
        status
    }

    /// Waits for completion.
    pub fn wait(self) -> Status {
        let h = self.handle;
        let st = runtime::with(|rt| rt.engine.wait(h));
        self.complete(st)
    }

    /// Waits, discarding the status.
    pub fn wait_without_status(self) {
        self.wait();
    }

    /// Waits and returns the buffer, now holding the received data.
    pub fn wait_for_data(self) -> &'a D {
        let data = self.data;
        self.wait();
        // SAFETY: `data` came from a `&'a D` (or `&'a mut D`) borrowed for the request's
        // lifetime; the operation is complete, so nothing writes it any more.
        unsafe { &*data }
    }

    /// Completes if done: `Ok(status)`, or gives the request back.
    pub fn test(self) -> Result<Status, Self> {
        let h = self.handle;
        match runtime::with(|rt| rt.engine.test(h)) {
            Ok(Some(st)) => Ok(self.complete(Ok(st))),
            Ok(None) => Err(self),
            Err(e) => Ok(self.complete(Err(e))),
        }
    }

    /// Asks to cancel: a pending receive is cancelled (its status says so); a send is not
    /// (MPI allows that), it still completes normally. Complete the request afterwards.
    pub fn cancel(&self) {
        let h = self.handle;
        runtime::with(|rt| rt.engine.cancel(h));
    }

    /// Whether the operation has completed, without completing the request.
    pub fn is_complete(&self) -> bool {
        let h = self.handle;
        runtime::with(|rt| {
            rt.engine.progress();
            rt.engine.is_done(h)
        })
    }

    pub(crate) fn into_parts(self) -> Parts<D> {
        let mut me = std::mem::ManuallyDrop::new(self);
        // SAFETY: unregistering hands the completion duty to the caller (a collection that
        // itself checks completion before its scope ends).
        unsafe { me.scope.unregister() };
        (me.handle, me.data, me.group.take(), me.finish.take())
    }
}

impl<'a, D: ?Sized, S: Scope<'a>> Drop for Request<'a, D, S> {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            panic!(
                "weft: a request was dropped before it completed (wait on it, or use WaitGuard)"
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
            r.wait();
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
            r.cancel();
            r.wait();
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
    runtime::with(|rt| {
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
    finish: Option<Box<dyn FnOnce()>>,
}

/// Runs `f` with a scope and a collection of up to `capacity` requests (a hint).
pub fn multiple_scope<'a, F, R, D: ?Sized>(capacity: usize, f: F) -> R
where
    F: FnOnce(&LocalScope<'a>, &mut RequestCollection<'a, D>) -> R,
{
    scope(|s| {
        let mut coll = RequestCollection {
            slots: Vec::with_capacity(capacity),
            incomplete: 0,
            _data: PhantomData,
        };
        f(s, &mut coll)
    })
}

impl<'a, D: ?Sized> RequestCollection<'a, D> {
    /// An empty collection.
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
        let st = rt
            .engine
            .wait(slot.handle)
            .unwrap_or_else(|e| panic!("{e}"));
        if let Some(f) = slot.finish {
            f();
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
        runtime::with(|rt| {
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
        runtime::with(|rt| {
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
        runtime::with(|rt| {
            rt.engine.progress();
            self.done_index(rt).map(|i| self.take(i, rt))
        })
    }

    fn test_some_into(&mut self, out: &mut Vec<(usize, Status, &'a D)>) {
        runtime::with(|rt| {
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
        let all = runtime::with(|rt| {
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
        if self.incomplete != 0 && !std::thread::panicking() {
            panic!(
                "weft: a request collection was dropped with {} incomplete request(s)",
                self.incomplete
            );
        }
    }
}
