//! Requests: a C `MPI_Request` is a pointer to a boxed [`CRequest`], which owns a Rust request
//! of the weft API (in the static scope: C promises the buffer outlives the operation) and
//! the view of the user's buffer that request points into. Wait and test in every form,
//! free, cancel, and the status of a request not yet completed.

use crate::c_abi::abi::*;
use crate::c_abi::errors::{guard, CError};
use crate::c_abi::grequest::callback_error;
use crate::c_abi::p2p::Status;
use crate::request::{Request, StaticScope};
use std::ffi::{c_int, c_void};

type SendView = crate::c_abi::handles::CView;
type RecvView = crate::c_abi::handles::CViewMut;

/// A request C holds.
pub(crate) struct CRequest(Kind);

enum Kind {
    Send(Pending<SendView>),
    Recv(Pending<RecvView>),
    /// A send or receive of contiguous bytes in the program's buffer (the fast path's).
    Bytes(Pending<[u8]>),
    /// Complete: its status (an operation on MPI_PROC_NULL, or one a status query completed).
    Done(Status),
    /// A persistent request (MPI_Send_init and the others): it starts an operation each
    /// time MPI_Start is called on it, and stays (inactive) when that operation completes.
    Persistent(Persistent),
    /// A nonblocking collective, and the buffers it uses.
    Collective(Box<dyn Ongoing>),
    /// A generalized request (MPI_Grequest_start): the program completes it.
    Generalized(Box<crate::c_abi::grequest::Generalized>),
    /// A send and a receive completed together (MPI_Isendrecv), with the packed copy the
    /// send reads when the two share a buffer (MPI_Isendrecv_replace); the receive's status.
    Pair(Box<Pair>),
}

/// The parts of [`Kind::Pair`], dropped in this order (the send before its staged data).
struct Pair {
    send: CRequest,
    recv: CRequest,
    _staged: Option<Vec<u8>>,
}

/// A started operation whose buffers the request keeps: a nonblocking collective.
pub(crate) trait Ongoing {
    fn wait(&mut self);
    /// Whether it completed.
    fn test(&mut self) -> bool;
}

/// A value boxed at an address that does not move, lent as `'static` borrows to a weft
/// request that the [`CRequest`] holding both drops first.
pub(crate) struct Pinned<T>(*mut T);

impl<T> Pinned<T> {
    pub(crate) fn new(value: T) -> Self {
        Pinned(Box::into_raw(Box::new(value)))
    }

    /// The value, borrowed for as long as the request it is lent to.
    ///
    /// # Safety
    /// The borrow is used only by a request that ends before this `Pinned` drops (the
    /// request and this value go into one [`CRequest::collective`]), and no other borrow of
    /// the value is used meanwhile.
    pub(crate) unsafe fn lend(&self) -> &'static mut T {
        // SAFETY: the caller's promise; the pointer is from `Box::into_raw`.
        unsafe { &mut *self.0 }
    }
}

impl<T> Drop for Pinned<T> {
    fn drop(&mut self) {
        // SAFETY: from `Box::into_raw`; whatever borrowed it is gone (see `lend`).
        drop(unsafe { Box::from_raw(self.0) });
    }
}

/// A weft request and what it borrows (pinned buffers, the partitions over them), dropped
/// in that order: the request (settling its operation) first.
struct Holding<D: ?Sized + 'static, K> {
    request: Option<Request<'static, D, StaticScope>>,
    keep: Option<K>,
}

impl<D: ?Sized + 'static, K> Ongoing for Holding<D, K> {
    fn wait(&mut self) {
        if let Some(r) = self.request.take() {
            r.wait();
        }
    }
    fn test(&mut self) -> bool {
        match self.request.take().map(Request::test) {
            None | Some(Ok(_)) => true,
            Some(Err(r)) => {
                self.request = Some(r);
                false
            }
        }
    }
}

impl<D: ?Sized + 'static, K> Drop for Holding<D, K> {
    fn drop(&mut self) {
        drop(self.request.take());
        drop(self.keep.take());
    }
}

/// What a persistent request starts, and the operation it started last, while active.
pub(crate) struct Persistent {
    start: Box<dyn FnMut() -> Result<CRequest, CError>>,
    active: Option<Box<CRequest>>,
}

/// A weft request and the boxed view its operation reads or writes through.
struct Pending<V: ?Sized + 'static> {
    /// `None` only while being completed.
    request: Option<Request<'static, V, StaticScope>>,
    /// The boxed view the request reads or writes, freed in `drop` after the request; `None`
    /// when it works on the program's bytes directly (the fast path's `MPI_Isend`/`MPI_Irecv`).
    view: Option<*mut V>,
}

impl<V: 'static> Pending<V> {
    /// Boxes `view` and starts the operation on it.
    fn start(view: V, start: impl FnOnce(*mut V) -> Request<'static, V, StaticScope>) -> Self {
        let view = Box::into_raw(Box::new(view));
        Pending {
            request: Some(start(view)),
            view: Some(view),
        }
    }
}

impl<V: ?Sized + 'static> Pending<V> {
    fn wait(&mut self) -> Status {
        let request = self.request.take().expect("a pending request");
        Status::from_weft(&request.wait())
    }

    fn test(&mut self) -> Option<Status> {
        match self.request.take().expect("a pending request").test() {
            Ok(st) => Some(Status::from_weft(&st)),
            Err(r) => {
                self.request = Some(r);
                None
            }
        }
    }

    fn cancel(&self) {
        if let Some(r) = &self.request {
            r.cancel();
        }
    }
}

impl<V: ?Sized + 'static> Drop for Pending<V> {
    fn drop(&mut self) {
        // The request first: dropping an incomplete one settles its operation, which must end
        // before the view (which it points into) goes.
        drop(self.request.take());
        if let Some(view) = self.view {
            // SAFETY: `view` came from `Box::into_raw` in `start` and nothing uses it any more.
            drop(unsafe { Box::from_raw(view) });
        }
    }
}

impl CRequest {
    pub(crate) fn done(st: Status) -> CRequest {
        CRequest(Kind::Done(st))
    }

    /// A send of `view`, started by `start` on the boxed view.
    pub(crate) fn send(
        view: SendView,
        start: impl FnOnce(&'static SendView) -> Request<'static, SendView, StaticScope>,
    ) -> CRequest {
        CRequest(Kind::Send(Pending::start(view, |v| {
            // SAFETY: the box lives until the request is gone (`Pending`'s drop), and nothing
            // else uses it meanwhile.
            start(unsafe { &*v })
        })))
    }

    /// A send or receive of contiguous bytes in the program's buffer, started (the fast
    /// path's `MPI_Isend`/`MPI_Irecv`): no view to keep.
    pub(crate) fn bytes(request: Request<'static, [u8], StaticScope>) -> CRequest {
        CRequest(Kind::Bytes(Pending {
            request: Some(request),
            view: None,
        }))
    }

    /// A receive into `view`, started by `start` on the boxed view.
    pub(crate) fn receive(
        view: RecvView,
        start: impl FnOnce(&'static mut RecvView) -> Request<'static, RecvView, StaticScope>,
    ) -> CRequest {
        CRequest(Kind::Recv(Pending::start(view, |v| {
            // SAFETY: as in `send`; the request is the only user of the view.
            start(unsafe { &mut *v })
        })))
    }

    /// A nonblocking collective: its request and the pinned buffers it borrows (lent by
    /// [`Pinned::lend`]), which live until the request is gone.
    pub(crate) fn collective<D: ?Sized + 'static, K: 'static>(
        request: Request<'static, D, StaticScope>,
        keep: K,
    ) -> CRequest {
        CRequest(Kind::Collective(Box::new(Holding {
            request: Some(request),
            keep: Some(keep),
        })))
    }

    /// Another operation that completes in the background (MPI_Comm_idup).
    pub(crate) fn ongoing(o: impl Ongoing + 'static) -> CRequest {
        CRequest(Kind::Collective(Box::new(o)))
    }

    /// A generalized request.
    pub(crate) fn generalized(g: crate::c_abi::grequest::Generalized) -> CRequest {
        CRequest(Kind::Generalized(Box::new(g)))
    }

    /// The generalized request this is, if it is one.
    pub(crate) fn as_generalized(&self) -> Option<&crate::c_abi::grequest::Generalized> {
        match &self.0 {
            Kind::Generalized(g) => Some(g),
            _ => None,
        }
    }

    /// A send and a receive that complete as one request, the receive's status its own;
    /// `staged` is the data the send reads, kept until it completes.
    pub(crate) fn pair(send: CRequest, recv: CRequest, staged: Option<Vec<u8>>) -> CRequest {
        CRequest(Kind::Pair(Box::new(Pair {
            send,
            recv,
            _staged: staged,
        })))
    }

    /// Waits for the operation (a blocking call made of a nonblocking one).
    pub(crate) fn finish(self) {
        self.finish_with_status();
    }

    /// Waits for the operation; its status.
    pub(crate) fn finish_with_status(mut self) -> Status {
        self.wait()
    }

    /// A persistent request that runs `start` at each MPI_Start.
    pub(crate) fn persistent(
        start: impl FnMut() -> Result<CRequest, CError> + 'static,
    ) -> CRequest {
        CRequest(Kind::Persistent(Persistent {
            start: Box::new(start),
            active: None,
        }))
    }

    fn wait(&mut self) -> Status {
        match &mut self.0 {
            Kind::Send(p) => p.wait(),
            Kind::Recv(p) => p.wait(),
            Kind::Bytes(p) => p.wait(),
            Kind::Done(st) => *st,
            Kind::Persistent(p) => p.active.take().map_or_else(Status::empty, |mut r| r.wait()),
            Kind::Collective(c) => {
                c.wait();
                Status::empty()
            }
            Kind::Pair(p) => {
                p.send.wait();
                p.recv.wait()
            }
            Kind::Generalized(g) => g.wait(),
        }
    }

    fn test(&mut self) -> Option<Status> {
        let st = match &mut self.0 {
            Kind::Send(p) => p.test(),
            Kind::Recv(p) => p.test(),
            Kind::Bytes(p) => p.test(),
            Kind::Done(st) => Some(*st),
            Kind::Collective(c) => c.test().then(Status::empty),
            Kind::Pair(p) => {
                let sent = p.send.test().is_some();
                let received = p.recv.test();
                received.filter(|_| sent)
            }
            // Stays generalized when complete: the free callback runs when it is freed.
            Kind::Generalized(g) => return g.test(),
            Kind::Persistent(p) => {
                return match &mut p.active {
                    None => Some(Status::empty()),
                    Some(r) => {
                        let st = r.test()?;
                        p.active = None;
                        Some(st)
                    }
                };
            }
        }?;
        self.0 = Kind::Done(st);
        Some(st)
    }

    /// Asks for the operation to be cancelled; the error code a generalized request's cancel
    /// callback returned, MPI_SUCCESS otherwise.
    fn cancel(&self) -> c_int {
        match &self.0 {
            Kind::Generalized(g) => return g.cancel(),
            Kind::Send(p) => p.cancel(),
            Kind::Recv(p) => p.cancel(),
            Kind::Bytes(p) => p.cancel(),
            // A collective cannot be cancelled (MPI 4.1 §6.12).
            Kind::Done(_) | Kind::Collective(_) => {}
            Kind::Pair(p) => {
                p.send.cancel();
                p.recv.cancel();
            }
            Kind::Persistent(p) => {
                if let Some(r) = &p.active {
                    return r.cancel();
                }
            }
        }
        MPI_SUCCESS
    }

    /// Runs a generalized request's free callback; the first error code its callbacks
    /// returned, MPI_SUCCESS otherwise (and for every other kind).
    fn free_callbacks(&mut self) -> c_int {
        match &mut self.0 {
            Kind::Generalized(g) => g.free_now(),
            _ => MPI_SUCCESS,
        }
    }

    /// Whether this is a persistent request (which completion leaves in place).
    fn is_persistent(&self) -> bool {
        matches!(self.0, Kind::Persistent(_))
    }

    /// Whether waiting on it means anything: not an inactive persistent request, which the
    /// wait and test families treat as a null one.
    fn is_active(&self) -> bool {
        match &self.0 {
            Kind::Persistent(p) => p.active.is_some(),
            _ => true,
        }
    }

    /// MPI_Start: starts the persistent request's operation.
    fn start(&mut self, call: &'static str) -> Result<(), CError> {
        match &mut self.0 {
            Kind::Persistent(p) if p.active.is_none() => {
                p.active = Some(Box::new((p.start)()?));
                Ok(())
            }
            Kind::Persistent(_) => Err(CError::new(
                MPI_ERR_REQUEST,
                call,
                "the request is active already",
            )),
            _ => Err(CError::new(
                MPI_ERR_REQUEST,
                call,
                "the request is not a persistent one",
            )),
        }
    }
}

/// Checks the place a new request's handle goes.
pub(crate) fn check_out(call: &'static str, request: *mut *mut c_void) -> Result<(), CError> {
    if request.is_null() {
        return Err(CError::new(MPI_ERR_ARG, call, "request is a null pointer"));
    }
    Ok(())
}

/// Boxes `r` and stores its handle at `out`.
///
/// # Safety
/// `out` is writable (checked non-null by [`check_out`]).
pub(crate) unsafe fn hand_out(out: *mut *mut c_void, r: CRequest) {
    // SAFETY: the caller's promise.
    unsafe { *out = Box::into_raw(Box::new(r)).cast() };
}

/// The request a handle stands for, if it is active; `None` for MPI_REQUEST_NULL and for
/// an inactive persistent request (the wait and test families treat both alike).
///
/// # Safety
/// `handle` is MPI_REQUEST_NULL or a handle [`hand_out`] made and not yet freed.
unsafe fn request<'a>(handle: *mut c_void) -> Option<&'a mut CRequest> {
    // SAFETY: the caller's promise.
    unsafe { any_request(handle) }.filter(|r| r.is_active())
}

/// The request a handle stands for, active or not; `None` for MPI_REQUEST_NULL.
///
/// # Safety
/// As for [`request`].
unsafe fn any_request<'a>(handle: *mut c_void) -> Option<&'a mut CRequest> {
    if handle as usize == MPI_REQUEST_NULL {
        return None;
    }
    // SAFETY: the caller's promise: a live boxed request.
    Some(unsafe { &mut *handle.cast::<CRequest>() })
}

/// After the request at `slot` completed: frees it and sets the slot to MPI_REQUEST_NULL,
/// unless it is persistent (then it stays, inactive, for the next MPI_Start).
///
/// # Safety
/// `*slot` is a live handle from [`hand_out`].
unsafe fn release(slot: *mut *mut c_void) -> c_int {
    // SAFETY: the caller's promise.
    unsafe {
        let r = &mut *(*slot).cast::<CRequest>();
        if r.is_persistent() {
            return MPI_SUCCESS;
        }
        let code = r.free_callbacks();
        destroy(slot);
        code
    }
}

/// Frees the request at `slot` and sets it to MPI_REQUEST_NULL.
///
/// # Safety
/// `*slot` is a live handle from [`hand_out`].
unsafe fn destroy(slot: *mut *mut c_void) {
    // SAFETY: the caller's promise.
    unsafe {
        drop(Box::from_raw((*slot).cast::<CRequest>()));
        *slot = MPI_REQUEST_NULL as *mut c_void;
    }
}

/// The requests of a C array, checked: `count` not negative, the array not null when count
/// is positive.
///
/// # Safety
/// `array` holds `count` request handles, used by nothing else for `'a`.
unsafe fn slots<'a>(
    call: &'static str,
    count: c_int,
    array: *mut *mut c_void,
) -> Result<&'a mut [*mut c_void], CError> {
    let n = crate::c_abi::handles::count(call, count)?;
    if n == 0 {
        return Ok(&mut []);
    }
    if array.is_null() {
        return Err(CError::new(
            MPI_ERR_ARG,
            call,
            "the array of requests is a null pointer",
        ));
    }
    // SAFETY: the caller's promise.
    Ok(unsafe { std::slice::from_raw_parts_mut(array, n) })
}

/// Stores `st` as the `i`-th of `statuses` (unless MPI_STATUSES_IGNORE).
///
/// # Safety
/// `statuses` is null or holds at least `i + 1` statuses.
unsafe fn store_at(statuses: *mut Status, i: usize, st: Status) {
    if !statuses.is_null() {
        // SAFETY: the caller's promise.
        unsafe { *statuses.add(i) = st };
    }
}

pub unsafe extern "C" fn wait(request: *mut *mut c_void, status: *mut Status) -> c_int {
    const CALL: &str = "MPI_Wait";
    guard(CALL, std::ptr::null_mut(), || {
        check_out(CALL, request)?;
        // SAFETY: the standard's contract: a live request or MPI_REQUEST_NULL.
        let (st, code) = match unsafe { self::request(*request) } {
            None => (Status::empty(), MPI_SUCCESS),
            Some(r) => {
                let st = r.wait();
                // SAFETY: a live handle, complete now.
                (st, unsafe { release(request) })
            }
        };
        // SAFETY: the standard's contract for `status`.
        unsafe { st.store(status) };
        callback_error(CALL, code)
    })
}
export!(Wait, wait);

pub unsafe extern "C" fn test(
    request: *mut *mut c_void,
    flag: *mut c_int,
    status: *mut Status,
) -> c_int {
    const CALL: &str = "MPI_Test";
    guard(CALL, std::ptr::null_mut(), || {
        check_out(CALL, request)?;
        let mut code = MPI_SUCCESS;
        // SAFETY: the standard's contract: a live request or MPI_REQUEST_NULL.
        let st = match unsafe { self::request(*request) } {
            None => Some(Status::empty()),
            Some(r) => {
                let st = r.test();
                if st.is_some() {
                    // SAFETY: a live handle, complete now.
                    code = unsafe { release(request) };
                }
                st
            }
        };
        crate::c_abi::env::put_int(CALL, "flag", flag, st.is_some().into())?;
        if let Some(st) = st {
            // SAFETY: the standard's contract for `status`.
            unsafe { st.store(status) };
        }
        callback_error(CALL, code)
    })
}
export!(Test, test);

/// Completes every request of `slots` in order (waiting as needed), storing their statuses
/// (the empty one for null and inactive requests) and freeing the non-persistent ones.
///
/// # Safety
/// `slots` holds live handles or MPI_REQUEST_NULL; `statuses` is null or holds as many
/// statuses.
unsafe fn wait_each(
    call: &'static str,
    slots: &mut [*mut c_void],
    statuses: *mut Status,
) -> Result<(), CError> {
    let mut errors = InStatus::default();
    for (i, slot) in slots.iter_mut().enumerate() {
        // SAFETY: the caller's promise.
        let (st, code) = match unsafe { request(*slot) } {
            None => (Status::empty(), MPI_SUCCESS),
            Some(r) => {
                let st = r.wait();
                // SAFETY: a live handle, complete now.
                (st, unsafe { release(slot) })
            }
        };
        // SAFETY: the caller's promise.
        unsafe { store_at(statuses, i, st) };
        errors.note(i, code);
    }
    // SAFETY: the caller's promise.
    unsafe { errors.report(call, statuses, slots.len()) }
}

/// The error codes of the requests a multiple-completion call completed (only generalized
/// requests' callbacks return any yet): reported as MPI_ERR_IN_STATUS, each status's
/// MPI_ERROR field set (MPI 4.1 §3.7.5).
#[derive(Default)]
struct InStatus {
    codes: Vec<(usize, c_int)>,
}

impl InStatus {
    fn note(&mut self, i: usize, code: c_int) {
        if code != MPI_SUCCESS {
            self.codes.push((i, code));
        }
    }

    /// Sets the MPI_ERROR fields of the first `n` statuses (MPI_SUCCESS where there was no
    /// error) and hands out MPI_ERR_IN_STATUS; with MPI_STATUSES_IGNORE, the first error.
    ///
    /// # Safety
    /// `statuses` is null or holds at least `n` statuses.
    unsafe fn report(
        self,
        call: &'static str,
        statuses: *mut Status,
        n: usize,
    ) -> Result<(), CError> {
        let Some(&(first, code)) = self.codes.first() else {
            return Ok(());
        };
        if statuses.is_null() {
            return callback_error(call, code);
        }
        for i in 0..n {
            let code = self
                .codes
                .iter()
                .find(|(j, _)| *j == i)
                .map_or(MPI_SUCCESS, |c| c.1);
            // SAFETY: the caller's promise.
            unsafe { (*statuses.add(i)).error = code };
        }
        Err(CError::new(
            MPI_ERR_IN_STATUS,
            call,
            format!(
                "{} of the requests failed (the first, status {first}, with error code {code})",
                self.codes.len()
            ),
        ))
    }
}

pub unsafe extern "C" fn waitall(
    count: c_int,
    requests: *mut *mut c_void,
    statuses: *mut Status,
) -> c_int {
    const CALL: &str = "MPI_Waitall";
    guard(CALL, std::ptr::null_mut(), || {
        // SAFETY: the standard's contract: `count` request handles at `requests`, and `count`
        // statuses or MPI_STATUSES_IGNORE.
        unsafe { wait_each(CALL, slots(CALL, count, requests)?, statuses) }
    })
}
export!(Waitall, waitall);

pub unsafe extern "C" fn testall(
    count: c_int,
    requests: *mut *mut c_void,
    flag: *mut c_int,
    statuses: *mut Status,
) -> c_int {
    const CALL: &str = "MPI_Testall";
    guard(CALL, std::ptr::null_mut(), || {
        // SAFETY: the standard's contract: `count` request handles at `requests`.
        let slots = unsafe { slots(CALL, count, requests)? };
        // Complete each one that can be (so progress is made), but hand them back only if
        // all are: the standard's "all or none".
        let mut all = true;
        for slot in slots.iter_mut() {
            // SAFETY: the standard's contract.
            if let Some(r) = unsafe { request(*slot) } {
                all &= r.test().is_some();
            }
        }
        crate::c_abi::env::put_int(CALL, "flag", flag, all.into())?;
        if all {
            // SAFETY: the standard's contract for the statuses; every request is complete.
            unsafe { wait_each(CALL, slots, statuses) }?;
        }
        Ok(())
    })
}
export!(Testall, testall);

/// Tests the active requests of `slots` in turn: the index, status and callback error code
/// of the first complete one (freed), `Ok(None)` if none is, or `Err(())` if none is active.
fn first_complete(slots: &mut [*mut c_void]) -> Result<Option<(usize, Status, c_int)>, ()> {
    let mut active = false;
    for (i, slot) in slots.iter_mut().enumerate() {
        // SAFETY: the standard's contract: each a live request or MPI_REQUEST_NULL.
        if let Some(r) = unsafe { request(*slot) } {
            active = true;
            if let Some(st) = r.test() {
                // SAFETY: a live handle, complete now.
                let code = unsafe { release(slot) };
                return Ok(Some((i, st, code)));
            }
        }
    }
    if active {
        Ok(None)
    } else {
        Err(())
    }
}

pub unsafe extern "C" fn waitany(
    count: c_int,
    requests: *mut *mut c_void,
    index: *mut c_int,
    status: *mut Status,
) -> c_int {
    const CALL: &str = "MPI_Waitany";
    guard(CALL, std::ptr::null_mut(), || {
        // SAFETY: the standard's contract: `count` request handles at `requests`.
        let slots = unsafe { slots(CALL, count, requests)? };
        let (i, st, code) = loop {
            match first_complete(slots) {
                Ok(Some((i, st, code))) => break (i as c_int, st, code),
                Ok(None) => std::thread::yield_now(),
                Err(()) => break (MPI_UNDEFINED, Status::empty(), MPI_SUCCESS),
            }
        };
        crate::c_abi::env::put_int(CALL, "index", index, i)?;
        // SAFETY: the standard's contract for `status`.
        unsafe { st.store(status) };
        callback_error(CALL, code)
    })
}
export!(Waitany, waitany);

pub unsafe extern "C" fn testany(
    count: c_int,
    requests: *mut *mut c_void,
    index: *mut c_int,
    flag: *mut c_int,
    status: *mut Status,
) -> c_int {
    const CALL: &str = "MPI_Testany";
    guard(CALL, std::ptr::null_mut(), || {
        // SAFETY: the standard's contract: `count` request handles at `requests`.
        let slots = unsafe { slots(CALL, count, requests)? };
        let (i, done, st, code) = match first_complete(slots) {
            Ok(Some((i, st, code))) => (i as c_int, true, Some(st), code),
            Ok(None) => (MPI_UNDEFINED, false, None, MPI_SUCCESS),
            Err(()) => (MPI_UNDEFINED, true, Some(Status::empty()), MPI_SUCCESS),
        };
        crate::c_abi::env::put_int(CALL, "index", index, i)?;
        crate::c_abi::env::put_int(CALL, "flag", flag, done.into())?;
        if let Some(st) = st {
            // SAFETY: the standard's contract for `status`.
            unsafe { st.store(status) };
        }
        callback_error(CALL, code)
    })
}
export!(Testany, testany);

/// Completes every request of `slots` that is complete now; their indices and statuses go to
/// `indices`/`statuses`. `None` if none is active.
///
/// # Safety
/// `indices` holds `slots.len()` ints; `statuses` is null or holds as many statuses.
unsafe fn some(
    slots: &mut [*mut c_void],
    indices: *mut c_int,
    statuses: *mut Status,
    errors: &mut InStatus,
) -> Option<c_int> {
    let mut active = false;
    let mut n = 0;
    for (i, slot) in slots.iter_mut().enumerate() {
        // SAFETY: the standard's contract.
        if let Some(r) = unsafe { request(*slot) } {
            active = true;
            if let Some(st) = r.test() {
                // SAFETY: a live handle, complete now; the caller's promise for the arrays.
                unsafe {
                    errors.note(n, release(slot));
                    *indices.add(n) = i as c_int;
                    store_at(statuses, n, st);
                }
                n += 1;
            }
        }
    }
    active.then_some(n as c_int)
}

pub unsafe extern "C" fn waitsome(
    incount: c_int,
    requests: *mut *mut c_void,
    outcount: *mut c_int,
    indices: *mut c_int,
    statuses: *mut Status,
) -> c_int {
    const CALL: &str = "MPI_Waitsome";
    guard(CALL, std::ptr::null_mut(), || {
        // SAFETY: the standard's contract: `count` request handles at `requests`.
        let slots = unsafe { slots(CALL, incount, requests)? };
        if indices.is_null() && !slots.is_empty() {
            return Err(CError::new(MPI_ERR_ARG, CALL, "indices is a null pointer"));
        }
        let mut errors = InStatus::default();
        let n = loop {
            // SAFETY: the standard's contract for the arrays.
            match unsafe { some(slots, indices, statuses, &mut errors) } {
                Some(0) => std::thread::yield_now(),
                Some(n) => break n,
                None => break MPI_UNDEFINED,
            }
        };
        crate::c_abi::env::put_int(CALL, "outcount", outcount, n)?;
        // SAFETY: the standard's contract for the statuses.
        unsafe { errors.report(CALL, statuses, n.max(0) as usize) }
    })
}
export!(Waitsome, waitsome);

pub unsafe extern "C" fn testsome(
    incount: c_int,
    requests: *mut *mut c_void,
    outcount: *mut c_int,
    indices: *mut c_int,
    statuses: *mut Status,
) -> c_int {
    const CALL: &str = "MPI_Testsome";
    guard(CALL, std::ptr::null_mut(), || {
        // SAFETY: the standard's contract: `count` request handles at `requests`.
        let slots = unsafe { slots(CALL, incount, requests)? };
        if indices.is_null() && !slots.is_empty() {
            return Err(CError::new(MPI_ERR_ARG, CALL, "indices is a null pointer"));
        }
        // SAFETY: the standard's contract for the arrays.
        let mut errors = InStatus::default();
        // SAFETY: the standard's contract for the arrays.
        let n = unsafe { some(slots, indices, statuses, &mut errors) }.unwrap_or(MPI_UNDEFINED);
        crate::c_abi::env::put_int(CALL, "outcount", outcount, n)?;
        // SAFETY: the standard's contract for the statuses.
        unsafe { errors.report(CALL, statuses, n.max(0) as usize) }
    })
}
export!(Testsome, testsome);

pub unsafe extern "C" fn request_free(request: *mut *mut c_void) -> c_int {
    const CALL: &str = "MPI_Request_free";
    guard(CALL, std::ptr::null_mut(), || {
        check_out(CALL, request)?;
        // SAFETY: the standard's contract: a live request or MPI_REQUEST_NULL.
        let Some(r) = (unsafe { any_request(*request) }) else {
            return Err(CError::new(
                MPI_ERR_REQUEST,
                CALL,
                "the request is MPI_REQUEST_NULL",
            ));
        };
        if r.is_active() && r.test().is_none() {
            // Still in flight: it completes on its own; keep it until it has (swept by
            // later calls, waited for by MPI_Finalize).
            // SAFETY: a live handle; ownership moves to the detached list.
            let r = unsafe { Box::from_raw((*request).cast::<CRequest>()) };
            detached().push(*r);
            // SAFETY: the caller's slot.
            unsafe { *request = MPI_REQUEST_NULL as *mut c_void };
        } else {
            let code = r.free_callbacks();
            // SAFETY: a live handle, complete.
            unsafe { destroy(request) };
            sweep_detached(false);
            return callback_error(CALL, code);
        }
        sweep_detached(false);
        Ok(())
    })
}
export!(Request_free, request_free);

/// Requests the program freed before they completed (kept in the running state, so a later
/// call on any thread sweeps them).
fn detached() -> std::cell::RefMut<'static, Vec<CRequest>> {
    match crate::c_abi::state::running() {
        Some(r) => r.detached.borrow_mut(),
        None => unreachable!("requests exist only while MPI runs"),
    }
}

/// Drops the freed requests that have completed (all of them, waiting, with `wait`).
pub(crate) fn sweep_detached(wait: bool) {
    let mut list = std::mem::take(&mut *detached());
    list.retain_mut(|r| {
        if wait {
            r.wait();
            false
        } else {
            r.test().is_none()
        }
    });
    detached().append(&mut list);
}

pub unsafe extern "C" fn cancel(request: *mut *mut c_void) -> c_int {
    const CALL: &str = "MPI_Cancel";
    guard(CALL, std::ptr::null_mut(), || {
        check_out(CALL, request)?;
        // SAFETY: the standard's contract.
        match unsafe { self::request(*request) } {
            Some(r) => callback_error(CALL, r.cancel()),
            None => Err(CError::new(
                MPI_ERR_REQUEST,
                CALL,
                "the request is MPI_REQUEST_NULL",
            )),
        }
    })
}
export!(Cancel, cancel);

pub unsafe extern "C" fn request_get_status(
    request: *mut c_void,
    flag: *mut c_int,
    status: *mut Status,
) -> c_int {
    const CALL: &str = "MPI_Request_get_status";
    guard(CALL, std::ptr::null_mut(), || {
        // SAFETY: the standard's contract. A completed request stays, holding its status,
        // until the program waits on it or frees it.
        let st = match unsafe { self::request(request) } {
            None => Some(Status::empty()),
            Some(r) => r.test(),
        };
        crate::c_abi::env::put_int(CALL, "flag", flag, st.is_some().into())?;
        if let Some(st) = st {
            // SAFETY: the standard's contract for `status`.
            unsafe { st.store(status) };
        }
        Ok(())
    })
}
export!(Request_get_status, request_get_status);

/// The statuses of the requests at `requests` that are complete (`None` for the others),
/// each tested once, none freed (the MPI_Request_get_status family).
///
/// # Safety
/// `requests` holds `count` live request handles or MPI_REQUEST_NULL.
unsafe fn statuses_now(
    call: &'static str,
    count: c_int,
    requests: *const *mut c_void,
) -> Result<Vec<Option<Status>>, CError> {
    // SAFETY: the caller's promise (the slots are only read).
    let slots = unsafe { slots(call, count, requests.cast_mut())? };
    Ok(slots
        .iter()
        // SAFETY: the caller's promise.
        .map(|&h| match unsafe { self::request(h) } {
            None => Some(Status::empty()),
            Some(r) => r.test(),
        })
        .collect())
}

pub unsafe extern "C" fn request_get_status_all(
    count: c_int,
    requests: *const *mut c_void,
    flag: *mut c_int,
    statuses: *mut Status,
) -> c_int {
    const CALL: &str = "MPI_Request_get_status_all";
    guard(CALL, std::ptr::null_mut(), || {
        // SAFETY: the standard's contract: `count` handles.
        let got = unsafe { statuses_now(CALL, count, requests)? };
        let all = got.iter().all(Option::is_some);
        crate::c_abi::env::put_int(CALL, "flag", flag, all.into())?;
        if all {
            for (i, st) in got.into_iter().flatten().enumerate() {
                // SAFETY: the standard's contract: `count` statuses or MPI_STATUSES_IGNORE.
                unsafe { store_at(statuses, i, st) };
            }
        }
        Ok(())
    })
}
export!(Request_get_status_all, request_get_status_all);

pub unsafe extern "C" fn request_get_status_any(
    count: c_int,
    requests: *const *mut c_void,
    index: *mut c_int,
    flag: *mut c_int,
    status: *mut Status,
) -> c_int {
    const CALL: &str = "MPI_Request_get_status_any";
    guard(CALL, std::ptr::null_mut(), || {
        // SAFETY: the standard's contract: `count` handles.
        let slots = unsafe { slots(CALL, count, requests.cast_mut())? };
        let mut active = false;
        for (i, &h) in slots.iter().enumerate() {
            // SAFETY: the standard's contract.
            if let Some(r) = unsafe { self::request(h) } {
                active = true;
                if let Some(st) = r.test() {
                    crate::c_abi::env::put_int(CALL, "flag", flag, 1)?;
                    crate::c_abi::env::put_int(CALL, "index", index, i as c_int)?;
                    // SAFETY: the standard's contract for `status`.
                    unsafe { st.store(status) };
                    return Ok(());
                }
            }
        }
        // None active: flag true, index MPI_UNDEFINED, the empty status.
        crate::c_abi::env::put_int(CALL, "flag", flag, (!active).into())?;
        crate::c_abi::env::put_int(CALL, "index", index, MPI_UNDEFINED)?;
        if !active {
            // SAFETY: as above.
            unsafe { Status::empty().store(status) };
        }
        Ok(())
    })
}
export!(Request_get_status_any, request_get_status_any);

pub unsafe extern "C" fn request_get_status_some(
    incount: c_int,
    requests: *const *mut c_void,
    outcount: *mut c_int,
    indices: *mut c_int,
    statuses: *mut Status,
) -> c_int {
    const CALL: &str = "MPI_Request_get_status_some";
    guard(CALL, std::ptr::null_mut(), || {
        // SAFETY: the standard's contract: `incount` handles.
        let slots = unsafe { slots(CALL, incount, requests.cast_mut())? };
        let (mut done, mut active) = (0usize, false);
        for (i, &h) in slots.iter().enumerate() {
            // SAFETY: the standard's contract.
            if let Some(r) = unsafe { self::request(h) } {
                active = true;
                if let Some(st) = r.test() {
                    // SAFETY: the standard's contract: room for `incount` indices and
                    // statuses.
                    unsafe {
                        *indices.add(done) = i as c_int;
                        store_at(statuses, done, st);
                    }
                    done += 1;
                }
            }
        }
        let n = if active { done as c_int } else { MPI_UNDEFINED };
        crate::c_abi::env::put_int(CALL, "outcount", outcount, n)
    })
}
export!(Request_get_status_some, request_get_status_some);

pub unsafe extern "C" fn start(request: *mut *mut c_void) -> c_int {
    const CALL: &str = "MPI_Start";
    guard(CALL, std::ptr::null_mut(), || {
        check_out(CALL, request)?;
        // SAFETY: the standard's contract: a persistent request.
        match unsafe { any_request(*request) } {
            Some(r) => r.start(CALL),
            None => Err(CError::new(
                MPI_ERR_REQUEST,
                CALL,
                "the request is MPI_REQUEST_NULL",
            )),
        }
    })
}
export!(Start, start);

pub unsafe extern "C" fn startall(count: c_int, requests: *mut *mut c_void) -> c_int {
    const CALL: &str = "MPI_Startall";
    guard(CALL, std::ptr::null_mut(), || {
        // SAFETY: the standard's contract: `count` request handles at `requests`.
        for slot in unsafe { slots(CALL, count, requests)? }.iter() {
            // SAFETY: the standard's contract: each a persistent request.
            match unsafe { any_request(*slot) } {
                Some(r) => r.start(CALL)?,
                None => {
                    return Err(CError::new(
                        MPI_ERR_REQUEST,
                        CALL,
                        "a request is MPI_REQUEST_NULL",
                    ))
                }
            }
        }
        Ok(())
    })
}
export!(Startall, startall);

/// The persistent forms of the sends (MPI_Send_init and its modes) and of the receive.
pub(crate) mod persistent {
    use super::*;
    use crate::c_abi::handles::CCount;
    use crate::c_abi::p2p::{start_recv, start_send, Mode};

    /// # Safety
    /// The standard's contract for the arguments (valid while the request is used).
    #[allow(clippy::too_many_arguments)]
    unsafe fn send_init<C: CCount>(
        call: &'static str,
        mode: Mode,
        buf: *const c_void,
        count: C,
        datatype: *mut c_void,
        dest: c_int,
        tag: c_int,
        comm: *mut c_void,
        request: *mut *mut c_void,
    ) -> c_int {
        guard(call, comm, || {
            check_out(call, request)?;
            // Checked now, so a bad argument is reported by the init call.
            crate::c_abi::p2p::check_send(call, datatype, dest, tag, comm)?;
            // The datatype may be freed after this call: the request holds a reference.
            let hold = crate::c_abi::datatype::hold(datatype);
            // SAFETY: the standard's contract: the arguments stay valid while the request
            // is used (MPI_Start .. completion); the datatype is held.
            let r = CRequest::persistent(move || unsafe {
                let _held = &hold;
                start_send(call, mode, buf, count, datatype, dest, tag, comm)
            });
            // SAFETY: checked above.
            unsafe { hand_out(request, r) };
            Ok(())
        })
    }

    crate::c_abi::p2p::send_modes! { send_init, [request: *mut *mut c_void], c_int;
        Send_init, send_init_standard, Standard;
        Ssend_init, ssend_init, Synchronous;
        Rsend_init, rsend_init, Ready;
        Bsend_init, bsend_init, Buffered;
    }
    crate::c_abi::p2p::send_modes! { send_init, [request: *mut *mut c_void], i64;
        Send_init_c, send_init_standard_c, Standard;
        Ssend_init_c, ssend_init_c, Synchronous;
        Rsend_init_c, rsend_init_c, Ready;
        Bsend_init_c, bsend_init_c, Buffered;
    }

    pub unsafe extern "C" fn recv_init<C: CCount>(
        buf: *mut c_void,
        count: C,
        datatype: *mut c_void,
        source: c_int,
        tag: c_int,
        comm: *mut c_void,
        request: *mut *mut c_void,
    ) -> c_int {
        #[allow(non_snake_case)]
        let CALL = C::pick("MPI_Recv_init", "MPI_Recv_init_c");
        guard(CALL, comm, || {
            check_out(CALL, request)?;
            crate::c_abi::p2p::check_receive(CALL, datatype, source, tag, comm)?;
            let hold = crate::c_abi::datatype::hold(datatype);
            // SAFETY: as in `send_init`.
            let r = CRequest::persistent(move || unsafe {
                let _held = &hold;
                start_recv(CALL, buf, count, datatype, source, tag, comm)
            });
            // SAFETY: checked above.
            unsafe { hand_out(request, r) };
            Ok(())
        })
    }
}
export!(Send_init, persistent::send_init_standard);
export!(Ssend_init, persistent::ssend_init);
export!(Rsend_init, persistent::rsend_init);
export!(Bsend_init, persistent::bsend_init);
export!(Send_init_c, persistent::send_init_standard_c);
export!(Ssend_init_c, persistent::ssend_init_c);
export!(Rsend_init_c, persistent::rsend_init_c);
export!(Bsend_init_c, persistent::bsend_init_c);
export!(Recv_init, persistent::recv_init::<c_int>);
export!(Recv_init_c, persistent::recv_init::<i64>);
