//! Handles to objects: predefined ones are the standard's small integers and decode to Weft's
//! objects directly (a compare, or an index into the predefined datatypes); user handles are
//! pointers to boxed objects (later: communicators made by dup/split, derived datatypes).

use crate::abi::*;
use crate::errors::CError;
use crate::state::{running, Comm};
use std::ffi::c_void;
use std::sync::OnceLock;
use weft::datatype::TypeMap;

/// Handles below this are predefined (the standard keeps them all under it).
const PREDEFINED_LIMIT: usize = 0x1000;

/// The communicator of `handle`.
pub(crate) fn comm(call: &'static str, handle: *mut c_void) -> Result<&'static Comm, CError> {
    let value = handle as usize;
    let running = running().ok_or_else(|| CError::not_initialized(call))?;
    match value {
        MPI_COMM_WORLD => Ok(&running.world),
        MPI_COMM_SELF => Ok(&running.self_comm),
        MPI_COMM_NULL => Err(CError::new(
            MPI_ERR_COMM,
            call,
            "the communicator is MPI_COMM_NULL",
        )),
        _ => Err(CError::new(
            MPI_ERR_COMM,
            call,
            format!("{value:#x} is not a communicator (user communicators are not supported yet)"),
        )),
    }
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

/// The type map of datatype `handle`.
pub(crate) fn datatype(
    call: &'static str,
    handle: *mut c_void,
) -> Result<&'static TypeMap, CError> {
    let value = handle as usize;
    if value == MPI_DATATYPE_NULL {
        return Err(CError::new(
            MPI_ERR_TYPE,
            call,
            "the datatype is MPI_DATATYPE_NULL",
        ));
    }
    if value < PREDEFINED_LIMIT {
        if let Some(Some(map)) = value
            .checked_sub(MPI_DATATYPE_NULL)
            .and_then(|i| predefined_maps().get(i))
        {
            return Ok(map);
        }
    }
    Err(CError::new(
        MPI_ERR_TYPE,
        call,
        format!("{value:#x} is not a datatype Weft's C ABI supports yet"),
    ))
}

/// Bytes spanned by `count` elements of `map` (from the first element's start).
pub(crate) fn span(call: &'static str, map: &TypeMap, count: i32) -> Result<usize, CError> {
    let count = usize::try_from(count).map_err(|_| {
        CError::new(
            MPI_ERR_COUNT,
            call,
            format!("the count {count} is negative"),
        )
    })?;
    Ok(map.extent() * count)
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
