//! Handles to objects: predefined ones are the standard's small integers and decode to Weft's
//! objects directly (a compare, or an index into the predefined datatypes); user handles are
//! pointers to boxed objects (later: communicators made by dup/split, derived datatypes).

use crate::abi::*;
use crate::errors::CError;
use crate::state::{running, Comm};
use std::ffi::c_void;
use std::sync::OnceLock;
use weft::datatype::{DatatypeRef, MutView, TypeMap, View};
use weft::traits::*;

/// Handles below this are predefined (the standard keeps them all under it).
const PREDEFINED_LIMIT: usize = 0x1000;

/// The communicator of `handle`.
#[inline]
pub(crate) fn comm(call: &'static str, handle: *mut c_void) -> Result<&'static Comm, CError> {
    let value = handle as usize;
    let running = running().ok_or_else(|| CError::not_initialized(call))?;
    match value {
        MPI_COMM_WORLD => Ok(&running.world),
        MPI_COMM_SELF => Ok(&running.self_comm),
        v => user_object::<Comm>(v).ok_or_else(|| not_a_comm(call, value)),
    }
}

#[cold]
fn not_a_comm(call: &'static str, value: usize) -> CError {
    if value == MPI_COMM_NULL {
        return CError::new(MPI_ERR_COMM, call, "the communicator is MPI_COMM_NULL");
    }
    CError::new(
        MPI_ERR_COMM,
        call,
        format!("{value:#x} is not a communicator (freed, or never made)"),
    )
}

/// An object C holds by a pointer to it, boxed, with a mark that says it is live.
pub(crate) trait Marked {
    /// The value of the mark while the object is live.
    const MARK: u64;
    /// The object's mark now (cleared when it is freed).
    fn mark(&self) -> u64;
}

/// The live object of type `T` a user handle points to, if `value` is one (not a predefined
/// handle's small integer, aligned, and marked live).
pub(crate) fn user_object<T: Marked>(value: usize) -> Option<&'static T> {
    if value < PREDEFINED_LIMIT || !value.is_multiple_of(std::mem::align_of::<T>()) {
        return None;
    }
    // SAFETY: a user handle is a pointer to a boxed `T` (made by its `hand_out`), live until
    // its free call clears the mark checked here; the standard makes any other value the
    // program's error, and a freed handle whose memory is not reused yet is caught.
    let object = unsafe { &*(value as *const T) };
    (object.mark() == T::MARK).then_some(object)
}

/// The predefined datatypes' type maps, by handle value minus `MPI_DATATYPE_NULL`.
fn predefined_maps() -> &'static [Option<TypeMap>] {
    static MAPS: OnceLock<Vec<Option<TypeMap>>> = OnceLock::new();
    MAPS.get_or_init(|| {
        use weft::datatype::map_of;
        let mut maps = vec![None; 0x100];
        let mut put = |handle: usize, map: TypeMap| maps[handle - MPI_DATATYPE_NULL] = Some(map);
        put(MPI_AINT, map_of::<isize>());
        put(MPI_COUNT, map_of::<i64>());
        put(MPI_OFFSET, map_of::<i64>());
        put(MPI_PACKED, map_of::<u8>());
        put(MPI_BYTE, map_of::<u8>());
        put(MPI_CHAR, map_of::<i8>());
        put(MPI_SIGNED_CHAR, map_of::<i8>());
        put(MPI_UNSIGNED_CHAR, map_of::<u8>());
        put(MPI_SHORT, map_of::<i16>());
        put(MPI_UNSIGNED_SHORT, map_of::<u16>());
        put(MPI_INT, map_of::<i32>());
        put(MPI_UNSIGNED, map_of::<u32>());
        put(MPI_LONG, map_of::<std::ffi::c_long>());
        put(MPI_UNSIGNED_LONG, map_of::<std::ffi::c_ulong>());
        put(MPI_LONG_LONG, map_of::<i64>());
        put(MPI_UNSIGNED_LONG_LONG, map_of::<u64>());
        put(MPI_FLOAT, map_of::<f32>());
        put(MPI_DOUBLE, map_of::<f64>());
        put(MPI_C_BOOL, map_of::<bool>());
        put(MPI_INT8_T, map_of::<i8>());
        put(MPI_UINT8_T, map_of::<u8>());
        put(MPI_INT16_T, map_of::<i16>());
        put(MPI_UINT16_T, map_of::<u16>());
        put(MPI_INT32_T, map_of::<i32>());
        put(MPI_UINT32_T, map_of::<u32>());
        put(MPI_INT64_T, map_of::<i64>());
        put(MPI_UINT64_T, map_of::<u64>());
        maps
    })
}

/// The predefined datatypes as Weft datatypes, by handle value minus `MPI_DATATYPE_NULL`.
fn predefined() -> &'static [Option<DatatypeRef<'static>>] {
    static REFS: OnceLock<Vec<Option<DatatypeRef<'static>>>> = OnceLock::new();
    REFS.get_or_init(|| {
        predefined_maps()
            .iter()
            .map(|m| m.as_ref().map(DatatypeRef::from_map))
            .collect()
    })
}

/// A datatype as the C layer holds it.
pub(crate) type Dt = &'static DatatypeRef<'static>;

/// The datatype of `handle`.
#[inline]
pub(crate) fn datatype(
    call: &'static str,
    handle: *mut c_void,
) -> Result<&'static DatatypeRef<'static>, CError> {
    let value = handle as usize;
    if value < PREDEFINED_LIMIT {
        if let Some(Some(dt)) = predefined().get(value.wrapping_sub(MPI_DATATYPE_NULL)) {
            return Ok(dt);
        }
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
        format!("{value:#x} is not a datatype Weft's C ABI supports yet"),
    )
}

/// Checks `count` (not negative).
pub(crate) fn count(call: &'static str, count: i32) -> Result<usize, CError> {
    usize::try_from(count).map_err(|_| {
        CError::new(
            MPI_ERR_COUNT,
            call,
            format!("the count {count} is negative"),
        )
    })
}

/// `count` elements of `dt` at `buf`, to read.
///
/// # Safety
/// `buf` must hold `count` elements of `dt`, readable while the view is used.
pub(crate) unsafe fn view(
    call: &'static str,
    buf: *const c_void,
    count: i32,
    dt: &'static DatatypeRef<'static>,
) -> Result<View<'static, 'static, DatatypeRef<'static>, [u8]>, CError> {
    let len = dt.type_map().extent() * self::count(call, count)?;
    // SAFETY: the caller's promise: `len` bytes (count elements) at `buf`.
    let data = unsafe { bytes(buf, len) };
    // SAFETY: `data` spans exactly `count` elements of the datatype.
    Ok(unsafe { View::with_count_and_datatype(data, count, dt) })
}

/// `count` elements of `dt` at `buf`, to write.
///
/// # Safety
/// `buf` must have room for `count` elements of `dt`, writable and used by nothing else
/// while the view is used.
pub(crate) unsafe fn view_mut(
    call: &'static str,
    buf: *mut c_void,
    count: i32,
    dt: &'static DatatypeRef<'static>,
) -> Result<MutView<'static, 'static, DatatypeRef<'static>, [u8]>, CError> {
    let len = dt.type_map().extent() * self::count(call, count)?;
    // SAFETY: the caller's promise.
    let data = unsafe { bytes_mut(buf, len) };
    // SAFETY: `data` spans exactly `count` elements of the datatype.
    Ok(unsafe { MutView::with_count_and_datatype(data, count, dt) })
}

/// `len` bytes at `buf` as a slice (empty when `len` is 0, whatever `buf` is).
///
/// # Safety
/// When `len > 0`, `buf` must point to `len` bytes readable for `'a`.
pub(crate) unsafe fn bytes<'a>(buf: *const c_void, len: usize) -> &'a [u8] {
    if len == 0 {
        return &[];
    }
    // SAFETY: the caller's promise.
    unsafe { std::slice::from_raw_parts(buf.cast(), len) }
}

/// `len` bytes at `buf` as a mutable slice (empty when `len` is 0).
///
/// # Safety
/// When `len > 0`, `buf` must point to `len` bytes writable for `'a`, used by nothing else.
pub(crate) unsafe fn bytes_mut<'a>(buf: *mut c_void, len: usize) -> &'a mut [u8] {
    if len == 0 {
        return &mut [];
    }
    // SAFETY: the caller's promise.
    unsafe { std::slice::from_raw_parts_mut(buf.cast(), len) }
}
