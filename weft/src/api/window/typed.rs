//! The operations with datatypes on both sides, MPI's general form: the origin any
//! [`Buffer`] (a slice, or a [`View`](crate::datatype::View) of a derived datatype), the
//! target's layout `count` elements of a datatype from an element's displacement ([`Target`]),
//! its blocks in bytes from there as MPI's target datatype's are. Both sides must hold the
//! same bytes of data; an accumulate's sides must be made of the window's predefined type.

use super::{basic_of, Window};
use crate::api::datatype::{Datatype, Equivalence, Layout, TypeMap};
use crate::api::topology::Rank;
use crate::coll::op::{Elements, SysOp};
use crate::error::{Error, ErrorClass, Result};
use crate::rma::access::{Combiner, Located};
use crate::rma::window::WindowData;
use crate::runtime;
use std::borrow::Cow;

/// Where an operation with datatypes reaches its target: `count` elements of `datatype`,
/// laid out from element `disp` of member `rank`'s part (MPI's target rank, displacement,
/// count and datatype).
#[derive(Debug)]
pub struct Target<'d, D: ?Sized> {
    /// The member.
    pub rank: Rank,
    /// Where the layout starts, in elements of the window.
    pub disp: usize,
    /// How many elements of `datatype`.
    pub count: usize,
    /// The layout of one element, its blocks in bytes from where the previous one ends.
    pub datatype: &'d D,
}

// By hand: a derive would ask `D: Copy`, and the datatype is only borrowed.
impl<D: ?Sized> Clone for Target<'_, D> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<D: ?Sized> Copy for Target<'_, D> {}

impl<'d, D: Datatype + ?Sized> Target<'d, D> {
    /// `count` elements of `datatype` from element `disp` of member `rank`'s part.
    pub fn new(rank: Rank, disp: usize, count: usize, datatype: &'d D) -> Self {
        Target {
            rank,
            disp,
            count,
            datatype,
        }
    }
}

/// The bytes `to` names at its target, checked to lie within its part; `None` when no byte
/// moves (a datatype or count of no data, which MPI allows of any kind).
fn locate<D: Datatype + ?Sized>(
    w: &WindowData,
    call: &'static str,
    to: &Target<'_, D>,
) -> Result<Option<Located>> {
    let map = to.datatype.type_map();
    if map.size().checked_mul(to.count) == Some(0) {
        return Ok(None);
    }
    let disp = isize::try_from(to.disp).map_err(|_| {
        Error::new(
            ErrorClass::Disp,
            call,
            format!("displacement {} is too large", to.disp),
        )
    })?;
    w.locate(call, to.rank, disp, &map.blocks_of(to.count))
        .map(Some)
}

/// A `Type` error unless the `what` side holds as many bytes of data as the target (`at`;
/// none when it names no byte).
fn same_len(call: &'static str, what: &str, have: usize, at: Option<&Located>) -> Result<()> {
    let want = at.map_or(0, Located::len);
    if have == want {
        return Ok(());
    }
    Err(Error::new(
        ErrorClass::Type,
        call,
        format!("the {what} holds {have} bytes of data and the target's count and datatype {want}"),
    ))
}

/// A layout's data, packed (borrowed where it lies contiguous).
fn packed<'a>(l: &'a Layout<'_>) -> Cow<'a, [u8]> {
    match l.contiguous_bytes() {
        Some(b) => Cow::Borrowed(b),
        None => Cow::Owned(l.pack()),
    }
}

/// Writes `data` (packed) into a writable layout, its bool and char values checked first.
///
/// # Safety
/// `out` comes from a [`BufferMut`](crate::datatype::BufferMut) borrowed mutably meanwhile.
unsafe fn unpack(call: &'static str, out: &Layout<'_>, data: &[u8]) -> Result<()> {
    out.map.check_values(call, data)?;
    // SAFETY: the caller's promise: `count` writable elements of the map at `ptr`.
    unsafe { out.map.unpack(data, out.ptr.cast_mut(), out.count) };
    Ok(())
}

/// `MPI_Put`'s general form: `origin`'s data into the layout `to` names.
pub(super) fn put<T: Equivalence + Copy, D: Datatype + ?Sized>(
    win: &Window<T>,
    origin: &Layout<'_>,
    to: &Target<'_, D>,
) -> Result<()> {
    const CALL: &str = "Put";
    let w = win.data();
    let at = locate(w, CALL, to)?;
    same_len(CALL, "origin", origin.data_len(), at.as_ref())?;
    let Some(at) = at else {
        return Ok(());
    };
    let data = packed(origin);
    match w.by_messages() {
        true => runtime::with_call(CALL, |rt| w.put(&mut rt.engine, CALL, &at, &data)),
        false => w.put_here(CALL, &at, &data),
    }
}

/// `MPI_Get`'s general form: the layout `from` names into `out`.
///
/// # Safety
/// `out` comes from a [`BufferMut`](crate::datatype::BufferMut) borrowed mutably meanwhile.
pub(super) unsafe fn get<T: Equivalence + Copy, D: Datatype + ?Sized>(
    win: &Window<T>,
    out: &Layout<'_>,
    from: &Target<'_, D>,
) -> Result<()> {
    const CALL: &str = "Get";
    let w = win.data();
    let at = locate(w, CALL, from)?;
    same_len(CALL, "origin", out.data_len(), at.as_ref())?;
    let Some(at) = at else {
        return Ok(());
    };
    if out.map.is_contiguous() && !out.map.is_restricted() {
        // SAFETY: the caller's promise: the buffer's `data_len` bytes, contiguous, writable.
        let bytes = unsafe { std::slice::from_raw_parts_mut(out.ptr.cast_mut(), out.data_len()) };
        return get_into(w, CALL, &at, bytes);
    }
    let mut data = vec![0u8; at.len()];
    get_into(w, CALL, &at, &mut data)?;
    // SAFETY: the caller's promise.
    unsafe { unpack(CALL, out, &data) }
}

fn get_into(w: &WindowData, call: &'static str, at: &Located, out: &mut [u8]) -> Result<()> {
    match w.by_messages() {
        true => runtime::with_call(call, |rt| w.get(&mut rt.engine, call, at, out)),
        false => w.get_here(call, at, out),
    }
}

/// `MPI_Accumulate`'s general form (`MPI_Get_accumulate`'s with `result`): `origin`'s
/// elements combined by `op` into the layout `to` names, element-wise atomic, the values
/// before into `result`.
///
/// # Safety
/// `result` comes from a [`BufferMut`](crate::datatype::BufferMut) borrowed mutably
/// meanwhile.
pub(super) unsafe fn get_accumulate<T: Equivalence + Copy, D: Datatype + ?Sized>(
    win: &Window<T>,
    call: &'static str,
    (origin, result): (&Layout<'_>, Option<&Layout<'_>>),
    to: &Target<'_, D>,
    op: SysOp,
) -> Result<()> {
    let basic = basic_of(call, win)?;
    let of_basic = |what: &str, map: &TypeMap| {
        match map.size() == 0
        || map.elements(false) == Some(Elements::Basic(basic))
    {
        true => Ok(()),
        false => Err(Error::new(
            ErrorClass::Type,
            call,
            format!("the {what}'s datatype is not made of the window's elements ({basic:?}), as accumulates need"),
        )),
    }
    };
    of_basic("target", to.datatype.type_map())?;
    // MPI_NO_OP ignores the origin's data.
    let origin = (op != SysOp::NoOp).then_some(origin);
    if let Some(o) = origin {
        of_basic("origin", &o.map)?;
    }
    if let Some(r) = result {
        of_basic("result buffer", &r.map)?;
    }
    if !crate::coll::op::applies(op, Elements::Basic(basic)) {
        return Err(Error::new(
            ErrorClass::Op,
            call,
            format!("{} is not defined on {basic:?}", op.name()),
        ));
    }
    let w = win.data();
    let at = locate(w, call, to)?;
    if let Some(o) = origin {
        same_len(call, "origin", o.data_len(), at.as_ref())?;
    }
    if let Some(r) = result {
        same_len(call, "result buffer", r.data_len(), at.as_ref())?;
    }
    let Some(at) = at else {
        return Ok(());
    };
    let how = Combiner {
        op,
        basic: Some(basic),
        unit: basic.size(),
        elements: Some(Elements::Basic(basic)),
        foreign: None,
        combine: None,
    };
    let data = origin.map(packed);
    let data: &[u8] = data.as_deref().unwrap_or(&[]);
    let mut old = result.map(|_| vec![0u8; at.len()]);
    match w.by_messages() {
        true => runtime::with_call(call, |rt| {
            w.accumulate(&mut rt.engine, call, &at, &how, data, old.as_deref_mut())
        }),
        false => w.accumulate_here(call, &at, &how, data, old.as_deref_mut()),
    }?;
    match (result, old) {
        // SAFETY: the caller's promise.
        (Some(r), Some(old)) => unsafe { unpack(call, r, &old) },
        _ => Ok(()),
    }
}
