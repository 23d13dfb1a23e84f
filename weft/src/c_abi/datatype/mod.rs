//! Datatypes in the C ABI: predefined handles decode to a table ([`predefined`]); a derived
//! type's handle is a pointer to a boxed [`CType`]: its layout ([`Shape`]), how it was made
//! (the envelope and contents MPI_Type_get_contents returns), whether it is committed, its
//! name; attributes are kept by handle (`attrs`).
//!
//! A derived type is counted: the program's handle is one reference, and every derived type
//! whose contents name it is another (MPI_Type_get_contents hands out new ones), so freeing
//! an input type leaves the types made from it whole. A nonblocking operation shares the type
//! map itself (`handles::CView`), so freeing a type while one is pending is sound.

pub(crate) mod attrs;
pub(crate) mod construct;
pub(crate) mod pack;
pub(crate) mod predefined;
pub(crate) mod query;
pub(crate) mod shape;

use crate::c_abi::abi::*;
use crate::c_abi::errors::{guard, CError};
use crate::c_abi::handles;
use std::cell::{Cell, RefCell};
use std::ffi::{c_int, c_void};

pub(crate) use shape::Shape;

/// A derived datatype as C holds it.
pub(crate) struct CType {
    /// [`TYPE_MAGIC`] while some reference to the type lives.
    magic: Cell<u64>,
    /// References: the program's handle, and each derived type whose contents name it.
    refs: Cell<usize>,
    pub(crate) shape: Shape,
    pub(crate) envelope: Envelope,
    committed: Cell<bool>,
    pub(crate) name: RefCell<String>,
}

const TYPE_MAGIC: u64 = 0x5745_4654_5459_5045; // "WEFTTYPE"

impl handles::Marked for CType {
    const MARK: u64 = TYPE_MAGIC;
    fn mark(&self) -> u64 {
        self.magic.get()
    }
}

/// How a derived type was made: MPI_Type_get_envelope's combiner and counts, and the
/// arrays MPI_Type_get_contents fills.
#[derive(Default)]
pub(crate) struct Envelope {
    pub(crate) combiner: c_int,
    pub(crate) ints: Vec<c_int>,
    pub(crate) addrs: Vec<isize>,
    /// The large counts of a `_c` constructor.
    pub(crate) counts: Vec<i64>,
    /// Handles: predefined ones as they are, derived ones each holding a reference.
    pub(crate) types: Vec<usize>,
}

impl Drop for CType {
    fn drop(&mut self) {
        for &t in &self.envelope.types {
            release(t);
        }
    }
}

/// A datatype handle, decoded.
#[derive(Clone, Copy)]
pub(crate) enum Type {
    Predefined(usize, &'static Shape),
    Derived(&'static CType),
}

impl Type {
    pub(crate) fn shape(self) -> &'static Shape {
        match self {
            Type::Predefined(_, s) => s,
            Type::Derived(t) => &t.shape,
        }
    }
    /// The handle, as the contents of a type made from this one hold it (a new reference for
    /// a derived type).
    pub(crate) fn retain(self) -> usize {
        match self {
            Type::Predefined(h, _) => h,
            Type::Derived(t) => {
                t.refs.set(t.refs.get() + 1);
                std::ptr::from_ref(t) as usize
            }
        }
    }
}

/// The datatype of `handle`, committed or not (constructors and queries accept both).
pub(crate) fn decode(call: &'static str, handle: *mut c_void) -> Result<Type, CError> {
    let value = handle as usize;
    if value < handles::PREDEFINED_LIMIT {
        if let Some(s) = predefined::shape(value) {
            return Ok(Type::Predefined(value, s));
        }
    } else if let Some(t) = handles::user_object::<CType>(value) {
        return Ok(Type::Derived(t));
    }
    Err(not_a_datatype(call, value))
}

/// The committed datatype of `handle`, for communication.
#[inline]
pub(crate) fn committed(call: &'static str, handle: *mut c_void) -> Result<&'static Shape, CError> {
    let value = handle as usize;
    if value < handles::PREDEFINED_LIMIT {
        if let Some(s) = predefined::shape(value) {
            return Ok(s);
        }
    } else if let Some(t) = handles::user_object::<CType>(value) {
        if t.committed.get() {
            return Ok(&t.shape);
        }
        return Err(CError::new(
            MPI_ERR_TYPE,
            call,
            format!("the datatype {value:#x} is not committed (MPI_Type_commit)"),
        ));
    }
    Err(not_a_datatype(call, value))
}

#[cold]
fn not_a_datatype(call: &'static str, value: usize) -> CError {
    if value == MPI_DATATYPE_NULL {
        return CError::new(MPI_ERR_TYPE, call, "the datatype is MPI_DATATYPE_NULL");
    }
    CError::new(
        MPI_ERR_TYPE,
        call,
        format!("{value:#x} is not a datatype (freed, or never made)"),
    )
}

/// Drops one reference to the type `handle` (nothing for a predefined one).
fn release(handle: usize) {
    if let Some(t) = handles::user_object::<CType>(handle) {
        let left = t.refs.get() - 1;
        t.refs.set(left);
        if left == 0 {
            // Its attributes go with the last reference (MPI_Type_free deleted them when it
            // held that one, reporting a callback's failure; here there is no one to tell).
            let _ = attrs::delete_all("MPI_Type_free", handle as *mut c_void);
            t.magic.set(0);
            // SAFETY: a live user type, boxed by `hand_out`; its last reference is gone, so
            // nothing uses it any more (pending operations share only its map).
            drop(unsafe { Box::from_raw(handle as *mut CType) });
        }
    }
}

/// A reference to a datatype held by something that decodes its handle later (a persistent
/// request decodes it at each MPI_Start, and the program may free the type after the init
/// call): dropping it releases the reference.
pub(crate) struct Hold(usize);

/// Holds the datatype `handle` (a derived one gets a reference; anything else is held as it
/// is, and decoding it later reports it).
pub(crate) fn hold(handle: *mut c_void) -> Hold {
    if let Some(t) = handles::user_object::<CType>(handle as usize) {
        t.refs.set(t.refs.get() + 1);
        return Hold(handle as usize);
    }
    Hold(0)
}

impl Drop for Hold {
    fn drop(&mut self) {
        if self.0 != 0 {
            release(self.0);
        }
    }
}

/// Boxes a new type made of `shape` by `envelope` and writes its handle to `out`.
pub(crate) fn hand_out(
    call: &'static str,
    out: *mut *mut c_void,
    shape: Shape,
    envelope: Envelope,
) -> Result<(), CError> {
    if out.is_null() {
        for &t in &envelope.types {
            release(t);
        }
        return Err(CError::new(MPI_ERR_ARG, call, "newtype is a null pointer"));
    }
    let t = CType {
        magic: Cell::new(TYPE_MAGIC),
        refs: Cell::new(1),
        shape,
        envelope,
        committed: Cell::new(false),
        name: RefCell::new(String::new()),
    };
    // SAFETY: checked non-null; the standard's contract: a handle slot.
    unsafe { *out = Box::into_raw(Box::new(t)).cast() };
    Ok(())
}

/// Reads the handle at `slot` (a `MPI_Datatype *` argument).
fn read_slot(call: &'static str, slot: *mut *mut c_void) -> Result<*mut c_void, CError> {
    if slot.is_null() {
        return Err(CError::new(MPI_ERR_ARG, call, "datatype is a null pointer"));
    }
    // SAFETY: checked non-null; the standard's contract: a handle slot.
    Ok(unsafe { *slot })
}

pub unsafe extern "C" fn type_commit(datatype: *mut *mut c_void) -> c_int {
    const CALL: &str = "MPI_Type_commit";
    guard(CALL, std::ptr::null_mut(), || {
        let handle = read_slot(CALL, datatype)?;
        if let Type::Derived(t) = decode(CALL, handle)? {
            t.committed.set(true);
        }
        Ok(())
    })
}
export!(Type_commit, type_commit);

pub unsafe extern "C" fn type_free(datatype: *mut *mut c_void) -> c_int {
    const CALL: &str = "MPI_Type_free";
    guard(CALL, std::ptr::null_mut(), || {
        let handle = read_slot(CALL, datatype)?;
        match decode(CALL, handle)? {
            Type::Predefined(..) => {
                return Err(CError::new(
                    MPI_ERR_TYPE,
                    CALL,
                    format!(
                        "{:#x} is a predefined datatype: it cannot be freed",
                        handle as usize
                    ),
                ))
            }
            Type::Derived(t) => {
                // The last reference: the attributes go now, a callback's failure reported.
                if t.refs.get() == 1 {
                    attrs::delete_all(CALL, handle)?;
                }
                release(handle as usize);
            }
        }
        // SAFETY: checked non-null by `read_slot`.
        unsafe { *datatype = MPI_DATATYPE_NULL as *mut c_void };
        Ok(())
    })
}
export!(Type_free, type_free);
