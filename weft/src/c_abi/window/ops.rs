//! The one-sided operations: put, get, accumulate, get_accumulate, fetch_and_op,
//! compare_and_swap, and the request-based rput, rget, raccumulate, rget_accumulate, each with
//! its large-count form where the standard has one. Derived datatypes on both sides: the
//! origin's data is packed (or borrowed where it is contiguous), the target's layout becomes
//! the spans `rma::window::WindowData::locate` checks. Every operation is complete at the
//! origin when it returns (done by the origin, or by messages with its data copied or its
//! answers in), so a request-based one hands out a completed request (MPI's local completion;
//! the flushes and the epoch's end complete it at the target).

use super::{fast, sync, win, CWin};
use crate::c_abi::abi::*;
use crate::c_abi::errors::{guard, CError};
use crate::c_abi::handles::{self, CCount, Dt};
use crate::c_abi::op;
use crate::c_abi::p2p::Status;
use crate::c_abi::requests::{self, CRequest};
use crate::coll::op::{Basic, Elements, SysOp};
use crate::rma::access::{Combiner, Located};
use crate::rma::window::WindowData;
use crate::runtime;
use std::borrow::Cow;
use std::ffi::{c_int, c_void};

/// One side of an operation: `count` elements of a datatype at an address.
struct Side {
    buf: *mut c_void,
    count: usize,
    dt: Dt,
}

impl Side {
    fn new(
        call: &'static str,
        buf: *const c_void,
        count: impl CCount,
        dt: *mut c_void,
    ) -> Result<Side, CError> {
        let dt = handles::datatype(call, dt)?;
        let count = handles::count(call, count)?;
        if !dt.stride_ok(count) {
            return Err(handles::negative_extent(call, count, dt));
        }
        Ok(Side {
            buf: buf.cast_mut(),
            count,
            dt,
        })
    }

    /// Its bytes of data.
    fn len(&self) -> usize {
        self.dt.size() * self.count
    }

    /// Its data, packed (borrowed where it lies contiguous).
    ///
    /// # Safety
    /// `buf` holds `count` readable elements of `dt`.
    unsafe fn packed(&self) -> Cow<'_, [u8]> {
        let map = self.dt.type_map();
        if map.is_contiguous() {
            // SAFETY: the caller's promise: `len()` contiguous bytes at `buf`.
            return Cow::Borrowed(unsafe { handles::bytes(self.buf, self.len()) });
        }
        let mut out = Vec::new();
        // SAFETY: the caller's promise.
        unsafe { map.pack(self.buf.cast(), self.count, &mut out) };
        Cow::Owned(out)
    }

    /// Writes `data` (packed) into its elements.
    ///
    /// # Safety
    /// `buf` has room for `count` writable elements of `dt`.
    unsafe fn unpack(&self, data: &[u8]) {
        let map = self.dt.type_map();
        if map.is_contiguous() {
            // SAFETY: the caller's promise: `len()` contiguous writable bytes at `buf`.
            unsafe { handles::bytes_mut(self.buf, self.len()) }
                .copy_from_slice(&data[..self.len()]);
            return;
        }
        // SAFETY: the caller's promise.
        unsafe { map.unpack(data, self.buf.cast(), self.count) };
    }

    /// Its layout as blocks (offset from its address, length), for the target side.
    fn blocks(&self) -> Vec<(isize, usize)> {
        self.dt.type_map().blocks_of(self.count)
    }
}

/// The window, and the target's spans for `count` elements of `dt` at displacement `disp`,
/// once an epoch is checked to cover the target. `None` for `MPI_PROC_NULL`.
fn target(
    call: &'static str,
    win: *mut c_void,
    rank: c_int,
    disp: isize,
    side: &Side,
) -> Result<Option<(&'static CWin, Located)>, CError> {
    let w = self::win(call, win)?;
    if rank == MPI_PROC_NULL {
        return Ok(None);
    }
    let t = w
        .with(|d| d.check_target(call, rank))
        .map_err(CError::from_weft)?;
    sync::covers(call, w, t)?;
    if side.len() == 0 {
        // Nothing moves: whatever the datatypes (MPI allows zero-size ones of any kind).
        return Ok(None);
    }
    let at = w
        .with(|d| d.locate(call, rank, disp, &side.blocks()))
        .map_err(CError::from_weft)?;
    Ok(Some((w, at)))
}

fn signature_mismatch(call: &'static str, what: &str, have: usize, want: usize) -> CError {
    CError::new(
        MPI_ERR_TYPE,
        call,
        format!("the {what} holds {have} bytes of data and the target's datatype and count {want}"),
    )
}

/// `MPI_Put`'s body.
#[allow(clippy::too_many_arguments)]
unsafe fn put<C: CCount>(
    call: &'static str,
    origin: *const c_void,
    ocount: C,
    odt: *mut c_void,
    rank: c_int,
    disp: isize,
    tcount: C,
    tdt: *mut c_void,
    win: *mut c_void,
) -> Result<(), CError> {
    let o = Side::new(call, origin, ocount, odt)?;
    let t = Side::new(call, std::ptr::null(), tcount, tdt)?;
    let Some((w, at)) = target(call, win, rank, disp, &t)? else {
        return Ok(());
    };
    if o.len() != at.len() {
        return Err(signature_mismatch(call, "origin", o.len(), at.len()));
    }
    // SAFETY: the standard's contract: the origin buffer holds its elements.
    let data = unsafe { o.packed() };
    w.with(|d| match d.by_messages() {
        true => runtime::with_call(call, |rt| d.put(&mut rt.engine, call, &at, &data)),
        // Every member reached directly: no runtime to enter (the Rust API's fast path).
        false => d.put_here(call, &at, &data),
    })
    .map_err(CError::from_weft)
}

/// `MPI_Get`'s body.
#[allow(clippy::too_many_arguments)]
unsafe fn get<C: CCount>(
    call: &'static str,
    origin: *mut c_void,
    ocount: C,
    odt: *mut c_void,
    rank: c_int,
    disp: isize,
    tcount: C,
    tdt: *mut c_void,
    win: *mut c_void,
) -> Result<(), CError> {
    let o = Side::new(call, origin, ocount, odt)?;
    let t = Side::new(call, std::ptr::null(), tcount, tdt)?;
    let Some((w, at)) = target(call, win, rank, disp, &t)? else {
        return Ok(());
    };
    if o.len() != at.len() {
        return Err(signature_mismatch(call, "origin", o.len(), at.len()));
    }
    if o.dt.type_map().is_contiguous() {
        // SAFETY: the standard's contract: the origin buffer has room for its elements, which
        // lie contiguous.
        let out = unsafe { handles::bytes_mut(o.buf, o.len()) };
        return w
            .with(|d| get_into(call, d, &at, out))
            .map_err(CError::from_weft);
    }
    let mut data = vec![0u8; at.len()];
    w.with(|d| get_into(call, d, &at, &mut data))
        .map_err(CError::from_weft)?;
    // SAFETY: the standard's contract: the origin buffer has room for its elements.
    unsafe { o.unpack(&data) };
    Ok(())
}

/// A get of the bytes `at` names into `out`, by whichever path reaches the target (no runtime
/// to enter when every member is reached directly).
fn get_into(
    call: &'static str,
    d: &WindowData,
    at: &Located,
    out: &mut [u8],
) -> crate::error::Result<()> {
    match d.by_messages() {
        true => runtime::with_call(call, |rt| d.get(&mut rt.engine, call, at, out)),
        false => d.get_here(call, at, out),
    }
}

/// An accumulate operation's handle as Weft's operation: the predefined ones, `MPI_REPLACE`
/// and `MPI_NO_OP` (the program's own are not allowed in one-sided accumulates).
fn acc_op(call: &'static str, handle: *mut c_void) -> Result<SysOp, CError> {
    match handle as usize {
        MPI_REPLACE => Ok(SysOp::Replace),
        MPI_NO_OP => Ok(SysOp::NoOp),
        v => match op::predefined(v) {
            Some(o) => Ok(o.sys_op()),
            None => Err(CError::new(
                MPI_ERR_OP,
                call,
                format!("{v:#x} is not a predefined operation, MPI_REPLACE or MPI_NO_OP (the only ones one-sided accumulates take)"),
            )),
        },
    }
}

/// How an accumulate of `op` combines elements of the target's datatype `t` (its handle
/// `handle`): the collectives' functions on predefined types and (value, index) pairs, the C
/// compiler's for `long double` (with its code for targets reached by messages), a copy for
/// `MPI_REPLACE` on anything.
type Combine = Box<dyn Fn(&[u8], &mut [u8])>;

/// What [`combiner`] finds: the predefined type (for the CPU's atomics), the bytes of one
/// element, what the elements are, the foreign combiner's code, the function.
type Found = (Option<Basic>, usize, Option<Elements>, Option<u8>, Combine);

fn combiner(
    call: &'static str,
    op: SysOp,
    op_handle: *mut c_void,
    t: Dt,
    handle: *mut c_void,
) -> Result<Found, CError> {
    let map = t.type_map();
    let unit = |e: Elements| match e {
        Elements::Basic(b) => b.size(),
        Elements::Pair(v, i) => v.size() + i.size(),
    };
    // A pair type's unit of atomicity is the pair (MPI_2INT is two ints, but one element).
    if matches!(op, SysOp::Replace | SysOp::NoOp) {
        let (basic, n, elements) = match (map.elements(true), map.elements(false)) {
            (Some(p), _) => (None, unit(p), Some(p)),
            (None, Some(e @ Elements::Basic(b))) => (Some(b), b.size(), Some(e)),
            // `long double` (x87: 16 bytes) stands as a 16-byte integer: a copy, or nothing,
            // whole (its pair with an int one element too), wherever it is done.
            _ => match predefined_of(handle) {
                Some(MPI_LONG_DOUBLE) => (None, 16, Some(Elements::Basic(Basic::U128))),
                Some(MPI_LONG_DOUBLE_INT) => {
                    (None, 20, Some(Elements::Pair(Basic::U128, Basic::I32)))
                }
                _ => (None, 1, Some(Elements::Basic(Basic::U8))),
            },
        };
        let combine: Combine = match op {
            SysOp::Replace => Box::new(|i: &[u8], o: &mut [u8]| o.copy_from_slice(i)),
            _ => Box::new(|_: &[u8], _: &mut [u8]| {}),
        };
        return Ok((basic, n, elements, None, combine));
    }
    for e in [map.elements(true), map.elements(false)]
        .into_iter()
        .flatten()
    {
        if let Some(f) = crate::coll::op::combine(op, e) {
            let basic = match e {
                Elements::Basic(b) => Some(b),
                Elements::Pair(..) => None,
            };
            return Ok((
                basic,
                unit(e),
                Some(e),
                None,
                Box::new(move |i: &[u8], o: &mut [u8]| f(i, o)),
            ));
        }
    }
    let predefined = predefined_of(handle);
    let function = predefined.and_then(|p| op::long_double_function(op_handle as usize, p));
    if let (Some(p), Some(f)) = (predefined, function) {
        let n = match op::element_bytes(p) {
            0 => t.size(),
            n => n,
        };
        let code = op::long_double_code(op_handle as usize, p);
        let combine = move |i: &[u8], o: &mut [u8]| op::apply_long_double(f, p, n, i, o);
        return Ok((None, n, None, code, Box::new(combine)));
    }
    Err(CError::new(
        MPI_ERR_OP,
        call,
        format!("{} is not defined on the target's datatype (accumulates need one predefined type throughout)", op.name()),
    ))
}

/// The one predefined datatype `handle` is made of, if it is (itself, for a predefined one).
fn predefined_of(handle: *mut c_void) -> Option<usize> {
    use crate::c_abi::datatype::{decode, Type};
    match decode("", handle).ok()? {
        Type::Predefined(h, _) => Some(h),
        Type::Derived(t) => {
            let mut found = None;
            for &inner in &t.envelope.types {
                let p = predefined_of(inner as *mut c_void)?;
                if found.is_some_and(|f| f != p) {
                    return None;
                }
                found = Some(p);
            }
            found
        }
    }
}

/// [`fast::accumulate`] when every side is the target's count and datatype (the origin's
/// aside for `MPI_NO_OP`, which ignores it).
///
/// # Safety
/// As for [`fast::accumulate`].
#[inline(always)]
unsafe fn fast_accumulate<C: CCount>(
    call: &'static str,
    origin: (*const c_void, C, *mut c_void),
    result: Option<(*mut c_void, C, *mut c_void)>,
    at: (c_int, isize),
    (tcount, tdt): (C, *mut c_void),
    op: *mut c_void,
    win: *mut c_void,
) -> Option<c_int> {
    let alike = |c: C, d: *mut c_void| d == tdt && c.wide() == tcount.wide();
    let origin_alike = op as usize == MPI_NO_OP || alike(origin.1, origin.2);
    if !origin_alike || !result.is_none_or(|(_, c, d)| alike(c, d)) {
        return None;
    }
    let bufs = (origin.0, result.map_or(std::ptr::null_mut(), |r| r.0));
    // SAFETY: passed on: every side holds (has room for) the target's count and datatype.
    unsafe { fast::accumulate(call, bufs, at, (tcount.wide(), tdt), op, win) }
}

/// `MPI_Get_accumulate`'s body (`MPI_Accumulate`'s when `result` is `None`).
#[allow(clippy::too_many_arguments)]
unsafe fn get_accumulate<C: CCount>(
    call: &'static str,
    origin: (*const c_void, C, *mut c_void),
    result: Option<(*mut c_void, C, *mut c_void)>,
    rank: c_int,
    disp: isize,
    (tcount, tdt): (C, *mut c_void),
    op: *mut c_void,
    win: *mut c_void,
) -> Result<(), CError> {
    let sys = acc_op(call, op)?;
    // MPI_NO_OP ignores the origin buffer (its count and datatype may be anything).
    let o = match sys {
        SysOp::NoOp => None,
        _ => Some(Side::new(call, origin.0, origin.1, origin.2)?),
    };
    let r = result
        .map(|(b, c, d)| Side::new(call, b, c, d))
        .transpose()?;
    let t = Side::new(call, std::ptr::null(), tcount, tdt)?;
    let Some((w, at)) = target(call, win, rank, disp, &t)? else {
        return Ok(());
    };
    if let Some(o) = &o {
        if o.len() != at.len() {
            return Err(signature_mismatch(call, "origin", o.len(), at.len()));
        }
    }
    if let Some(r) = &r {
        if r.len() != at.len() {
            return Err(signature_mismatch(call, "result buffer", r.len(), at.len()));
        }
    }
    let (basic, unit, elements, foreign, combine) = combiner(call, sys, op, t.dt, tdt)?;
    let how = Combiner {
        op: sys,
        basic,
        unit,
        elements,
        foreign,
        combine: Some(&*combine),
    };
    // SAFETY: the standard's contract: the origin buffer holds its elements.
    let data = o.as_ref().map(|o| unsafe { o.packed() });
    let data: &[u8] = data.as_deref().unwrap_or(&[]);
    let mut old = r.as_ref().map(|_| vec![0u8; at.len()]);
    w.with(|d| match d.by_messages() {
        true => runtime::with_call(call, |rt| {
            d.accumulate(&mut rt.engine, call, &at, &how, data, old.as_deref_mut())
        }),
        false => d.accumulate_here(call, &at, &how, data, old.as_deref_mut()),
    })
    .map_err(CError::from_weft)?;
    if let (Some(r), Some(old)) = (r, old) {
        // SAFETY: the standard's contract: the result buffer has room for its elements.
        unsafe { r.unpack(&old) };
    }
    Ok(())
}

/// `MPI_Put` and `MPI_Get` in either count form: the fast path, else the general one under
/// `guard`.
///
/// # Safety
/// The standard's contract for the origin buffer.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn put_or_get_entry<C: CCount>(
    call: &'static str,
    get: bool,
    (origin, ocount, odt): (*mut c_void, C, *mut c_void),
    (rank, disp): (c_int, isize),
    (tcount, tdt): (C, *mut c_void),
    win: *mut c_void,
) -> c_int {
    let (o, t) = (
        (origin.cast_const(), ocount.wide(), odt),
        (tcount.wide(), tdt),
    );
    // SAFETY: passed on.
    if let Some(rc) = unsafe { fast::put_or_get(call, get, o, (rank, disp), t, win) } {
        return rc;
    }
    // SAFETY: passed on.
    guard(call, win, || unsafe {
        match get {
            true => self::get(call, origin, ocount, odt, rank, disp, tcount, tdt, win),
            false => put(call, origin, ocount, odt, rank, disp, tcount, tdt, win),
        }
    })
}

/// `MPI_Accumulate` (`result` none) and `MPI_Get_accumulate` in either count form: the fast
/// path, else the general one under `guard`.
///
/// # Safety
/// The standard's contract for the origin and result buffers.
#[inline(always)]
unsafe fn get_accumulate_entry<C: CCount>(
    call: &'static str,
    origin: (*const c_void, C, *mut c_void),
    result: Option<(*mut c_void, C, *mut c_void)>,
    at: (c_int, isize),
    target: (C, *mut c_void),
    op: *mut c_void,
    win: *mut c_void,
) -> c_int {
    // SAFETY: passed on.
    if let Some(rc) = unsafe { fast_accumulate(call, origin, result, at, target, op, win) } {
        return rc;
    }
    // SAFETY: passed on.
    guard(call, win, || unsafe {
        get_accumulate(call, origin, result, at.0, at.1, target, op, win)
    })
}

/// `MPI_Put` and `MPI_Get`, in both count forms.
macro_rules! put_get {
    ($($name:ident, $fn:ident, $count:ty, $get:expr;)*) => {$(
        pub unsafe extern "C" fn $fn(
            origin: *mut c_void,
            ocount: $count,
            odt: *mut c_void,
            rank: c_int,
            disp: isize,
            tcount: $count,
            tdt: *mut c_void,
            win: *mut c_void,
        ) -> c_int {
            const CALL: &str = concat!("MPI_", stringify!($name));
            let (o, t) = ((origin, ocount, odt), (tcount, tdt));
            // SAFETY: passed on.
            unsafe { put_or_get_entry(CALL, $get, o, (rank, disp), t, win) }
        }
    )*};
}

put_get! {
    Put, put_, c_int, false;
    Put_c, put_c, i64, false;
    Get, get_, c_int, true;
    Get_c, get_c, i64, true;
}
export!(Put, put_);
export!(Put_c, put_c);
export!(Get, get_);
export!(Get_c, get_c);

/// `MPI_Accumulate` and `MPI_Get_accumulate` (with a result buffer), in both count forms.
macro_rules! accumulates {
    ($($name:ident, $fn:ident, $count:ty $(, $result:ident, $rcount:ident, $rdt:ident)?;)*) => {$(
        pub unsafe extern "C" fn $fn(
            origin: *const c_void,
            ocount: $count,
            odt: *mut c_void,
            $($result: *mut c_void, $rcount: $count, $rdt: *mut c_void,)?
            rank: c_int,
            disp: isize,
            tcount: $count,
            tdt: *mut c_void,
            op: *mut c_void,
            win: *mut c_void,
        ) -> c_int {
            const CALL: &str = concat!("MPI_", stringify!($name));
            let result = None $(.or(Some(($result, $rcount, $rdt))))?;
            let (o, t) = ((origin, ocount, odt), (tcount, tdt));
            // SAFETY: passed on.
            unsafe { get_accumulate_entry(CALL, o, result, (rank, disp), t, op, win) }
        }
    )*};
}

accumulates! {
    Accumulate, accumulate, c_int;
    Accumulate_c, accumulate_c, i64;
    Get_accumulate, get_accumulate_, c_int, result, rcount, rdt;
    Get_accumulate_c, get_accumulate_c, i64, result, rcount, rdt;
}
export!(Accumulate, accumulate);
export!(Accumulate_c, accumulate_c);
export!(Get_accumulate, get_accumulate_);
export!(Get_accumulate_c, get_accumulate_c);

pub unsafe extern "C" fn fetch_and_op(
    origin: *const c_void,
    result: *mut c_void,
    dt: *mut c_void,
    rank: c_int,
    disp: isize,
    op: *mut c_void,
    win: *mut c_void,
) -> c_int {
    const CALL: &str = "MPI_Fetch_and_op";
    let (bufs, target) = ((origin, result), (1, dt));
    // SAFETY: passed on: one element of `dt` at each buffer.
    if let Some(rc) = unsafe { fast::accumulate(CALL, bufs, (rank, disp), target, op, win) } {
        return rc;
    }
    guard(CALL, win, || {
        let r = Some((result, 1, dt));
        // SAFETY: passed on: one element of `dt` at each buffer.
        unsafe { get_accumulate(CALL, (origin, 1, dt), r, rank, disp, (1, dt), op, win) }
    })
}
export!(Fetch_and_op, fetch_and_op);

pub unsafe extern "C" fn compare_and_swap(
    origin: *const c_void,
    compare: *const c_void,
    result: *mut c_void,
    dt: *mut c_void,
    rank: c_int,
    disp: isize,
    win: *mut c_void,
) -> c_int {
    const CALL: &str = "MPI_Compare_and_swap";
    let bufs = (origin, compare, result);
    // SAFETY: passed on: one element of `dt` at each buffer.
    if let Some(rc) = unsafe { fast::compare_and_swap(CALL, bufs, (rank, disp), dt, win) } {
        return rc;
    }
    guard(CALL, win, || {
        let s = Side::new(CALL, origin, 1, dt)?;
        if !s.dt.type_map().is_contiguous() || s.dt.runs.len() != 1 || s.dt.runs[0].count != 1 {
            return Err(CError::new(
                MPI_ERR_TYPE,
                CALL,
                "compare-and-swap takes one element of a predefined type",
            ));
        }
        let Some((w, at)) = target(CALL, win, rank, disp, &s)? else {
            return Ok(());
        };
        let n = s.len();
        let basic = match s.dt.type_map().elements(false) {
            Some(Elements::Basic(b)) => Some(b),
            _ => None,
        };
        // SAFETY: the standard's contract: one element of `dt` at each buffer.
        let (swap, cmp, out) = unsafe {
            (
                handles::bytes(origin, n),
                handles::bytes(compare, n),
                handles::bytes_mut(result, n),
            )
        };
        w.with(|d| match d.by_messages() {
            true => runtime::with_call(CALL, |rt| {
                d.compare_and_swap(&mut rt.engine, CALL, &at, basic, cmp, swap, out)
            }),
            false => d.compare_and_swap_here(CALL, &at, basic, cmp, swap, out),
        })
        .map_err(CError::from_weft)
    })
}
export!(Compare_and_swap, compare_and_swap);

/// Hands out a completed request at `request` (the operation is done when it returns).
fn completed(call: &'static str, request: *mut *mut c_void) -> Result<(), CError> {
    requests::check_out(call, request)?;
    // SAFETY: checked by `check_out`: a handle slot.
    unsafe { requests::hand_out(request, CRequest::done(Status::empty())) };
    Ok(())
}

/// The request-based operations, in both count forms: the operation, then a completed
/// request.
macro_rules! request_based {
    ($($name:ident, $fn:ident, $count:ty;)*) => {$(
        pub unsafe extern "C" fn $fn(
            origin: *const c_void,
            ocount: $count,
            odt: *mut c_void,
            rank: c_int,
            disp: isize,
            tcount: $count,
            tdt: *mut c_void,
            win: *mut c_void,
            request: *mut *mut c_void,
        ) -> c_int {
            const CALL: &str = concat!("MPI_", stringify!($name));
            guard(CALL, win, || {
                requests::check_out(CALL, request)?;
                request_epoch(CALL, win, rank)?;
                let origin = origin.cast_mut();
                // SAFETY: passed on.
                unsafe { request_based!(@op $name, origin, ocount, odt, rank, disp, tcount, tdt, win) }?;
                completed(CALL, request)
            })
        }
    )*};
    (@op Rput, $($a:expr),*) => { put(CALL, $($a),*) };
    (@op Rput_c, $($a:expr),*) => { put(CALL, $($a),*) };
    (@op Rget, $($a:expr),*) => { get(CALL, $($a),*) };
    (@op Rget_c, $($a:expr),*) => { get(CALL, $($a),*) };
}

request_based! {
    Rput, rput, c_int;
    Rput_c, rput_c, i64;
    Rget, rget, c_int;
    Rget_c, rget_c, i64;
}
export!(Rput, rput);
export!(Rput_c, rput_c);
export!(Rget, rget);
export!(Rget_c, rget_c);

/// `MPI_Raccumulate` and `MPI_Rget_accumulate` (with `result`), in both count forms.
#[allow(clippy::too_many_arguments)]
unsafe fn raccumulate_any<C: CCount>(
    call: &'static str,
    origin: (*const c_void, C, *mut c_void),
    result: Option<(*mut c_void, C, *mut c_void)>,
    rank: c_int,
    disp: isize,
    target: (C, *mut c_void),
    op: *mut c_void,
    win: *mut c_void,
    request: *mut *mut c_void,
) -> c_int {
    guard(call, win, || {
        requests::check_out(call, request)?;
        request_epoch(call, win, rank)?;
        // SAFETY: passed on.
        unsafe { get_accumulate(call, origin, result, rank, disp, target, op, win) }?;
        completed(call, request)
    })
}

macro_rules! raccumulate {
    ($($name:ident, $fn:ident, $count:ty;)*) => {$(
        #[allow(clippy::too_many_arguments)]
        pub unsafe extern "C" fn $fn(
            origin: *const c_void,
            ocount: $count,
            odt: *mut c_void,
            rank: c_int,
            disp: isize,
            tcount: $count,
            tdt: *mut c_void,
            op: *mut c_void,
            win: *mut c_void,
            request: *mut *mut c_void,
        ) -> c_int {
            const CALL: &str = concat!("MPI_", stringify!($name));
            // SAFETY: passed on.
            unsafe {
                raccumulate_any(CALL, (origin, ocount, odt), None, rank, disp, (tcount, tdt), op, win, request)
            }
        }
    )*};
}

raccumulate! {
    Raccumulate, raccumulate, c_int;
    Raccumulate_c, raccumulate_c, i64;
}
export!(Raccumulate, raccumulate);
export!(Raccumulate_c, raccumulate_c);

macro_rules! rget_accumulate {
    ($($name:ident, $fn:ident, $count:ty;)*) => {$(
        #[allow(clippy::too_many_arguments)]
        pub unsafe extern "C" fn $fn(
            origin: *const c_void,
            ocount: $count,
            odt: *mut c_void,
            result: *mut c_void,
            rcount: $count,
            rdt: *mut c_void,
            rank: c_int,
            disp: isize,
            tcount: $count,
            tdt: *mut c_void,
            op: *mut c_void,
            win: *mut c_void,
            request: *mut *mut c_void,
        ) -> c_int {
            const CALL: &str = concat!("MPI_", stringify!($name));
            let r = Some((result, rcount, rdt));
            // SAFETY: passed on.
            unsafe {
                raccumulate_any(CALL, (origin, ocount, odt), r, rank, disp, (tcount, tdt), op, win, request)
            }
        }
    )*};
}

rget_accumulate! {
    Rget_accumulate, rget_accumulate, c_int;
    Rget_accumulate_c, rget_accumulate_c, i64;
}
export!(Rget_accumulate, rget_accumulate);
export!(Rget_accumulate_c, rget_accumulate_c);

/// Request-based operations belong to passive-target epochs only (MPI 4.1, 12.3.5).
fn request_epoch(call: &'static str, win: *mut c_void, rank: c_int) -> Result<(), CError> {
    let w = self::win(call, win)?;
    let e = w.epochs.borrow();
    if rank == MPI_PROC_NULL {
        return Ok(());
    }
    if e.lock_all || !e.locks.is_empty() {
        return Ok(());
    }
    Err(CError::new(
        MPI_ERR_RMA_SYNC,
        call,
        "request-based operations are allowed in passive-target epochs (lock, lock_all) only",
    ))
}
