//! Handles to objects: predefined ones are the standard's small integers and decode to Weft's
//! objects directly (a compare, or an index into the predefined datatypes); user handles are
//! pointers to boxed objects (later: communicators made by dup/split, derived datatypes).

use crate::c_abi::abi::*;
use crate::c_abi::datatype::Shape;
use crate::c_abi::errors::CError;
use crate::c_abi::state::{running, Comm};
use crate::datatype::{Buffer, BufferMut, Layout, TypeMap};
use std::ffi::{c_int, c_void};
use std::sync::Arc;

/// Handles below this are predefined (the standard keeps them all under it).
pub(crate) const PREDEFINED_LIMIT: usize = 0x1000;

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

/// A datatype as the C layer holds it during a call: its [`Shape`] (a predefined type's lives
/// for the program, a user type's until it is freed, which the call outlives).
pub(crate) type Dt = &'static Shape;

/// The committed datatype of `handle`, for communication (an uncommitted one is refused).
#[inline]
pub(crate) fn datatype(call: &'static str, handle: *mut c_void) -> Result<Dt, CError> {
    crate::c_abi::datatype::committed(call, handle)
}

/// A count as C passes it: an `int`, or an `MPI_Count` in the large-count (`_c`) forms,
/// which are the same functions instantiated with the wider type.
pub(crate) trait CCount: Copy + std::fmt::Display + 'static {
    /// Whether this is the large-count form's type.
    const LARGE: bool;
    /// The value, widened.
    fn wide(self) -> i64;
    /// `v` as this type, if it fits.
    fn narrow(v: i64) -> Option<Self>;
    /// The call's name: `classic`, or `large` for the large-count form.
    /// The value as a C `int` when this is the classic form's type (`None` for the others).
    fn classic(self) -> Option<c_int> {
        None
    }
    fn pick(classic: &'static str, large: &'static str) -> &'static str {
        if Self::LARGE {
            large
        } else {
            classic
        }
    }
}
impl CCount for i32 {
    const LARGE: bool = false;
    fn classic(self) -> Option<c_int> {
        Some(self)
    }
    fn wide(self) -> i64 {
        self.into()
    }
    fn narrow(v: i64) -> Option<Self> {
        v.try_into().ok()
    }
}
impl CCount for i64 {
    const LARGE: bool = true;
    fn wide(self) -> i64 {
        self
    }
    fn narrow(v: i64) -> Option<Self> {
        Some(v)
    }
}
/// A displacement (`MPI_Aint`), in the large-count forms.
impl CCount for isize {
    const LARGE: bool = true;
    fn wide(self) -> i64 {
        self as i64
    }
    fn narrow(v: i64) -> Option<Self> {
        v.try_into().ok()
    }
}

/// `n` counts or displacements at `p` as the `int`s Weft's partitions hold: an error naming
/// the value when one does not fit (a large-count form's part beyond 2^31 - 1 elements).
///
/// # Safety
/// `p` holds `n` values when `n > 0`.
pub(crate) unsafe fn ints<T: CCount>(
    call: &'static str,
    what: &str,
    p: *const T,
    n: usize,
) -> Result<Vec<i32>, CError> {
    // SAFETY: the caller's promise.
    let values = unsafe { crate::c_abi::coll_v::array(call, what, p, n)? };
    values
        .iter()
        .map(|&v| {
            i32::try_from(v.wide()).map_err(|_| {
                CError::new(
                    MPI_ERR_COUNT,
                    call,
                    format!(
                        "{what} holds {v}: Weft's parts of a vector collective count up to \
                         2^31 - 1 elements"
                    ),
                )
            })
        })
        .collect()
}

/// Checks `count` (not negative).
#[inline]
pub(crate) fn count(call: &'static str, count: impl CCount) -> Result<usize, CError> {
    usize::try_from(count.wide()).map_err(|_| {
        CError::new(
            MPI_ERR_COUNT,
            call,
            format!("the count {count} is negative"),
        )
    })
}

/// A type map a buffer view holds: a predefined type's, borrowed for the program, or a user
/// type's, shared, so that freeing the type while a nonblocking operation still uses the
/// view leaves the map alive until the operation ends.
pub(crate) enum MapRef {
    Static(&'static TypeMap),
    Shared(Arc<TypeMap>),
}

impl MapRef {
    fn of(dt: Dt) -> MapRef {
        match dt.shared() {
            Some(map) => MapRef::Shared(map.clone()),
            None => MapRef::Static(dt.type_map()),
        }
    }
    fn map(&self) -> &TypeMap {
        match self {
            MapRef::Static(m) => m,
            MapRef::Shared(m) => m,
        }
    }
}

/// `count` elements of a datatype at a C buffer's address, to send (the C program promises
/// the memory stays valid until the operation using it ends).
pub(crate) struct CView {
    ptr: *const u8,
    count: usize,
    map: MapRef,
}

/// `count` elements of a datatype at a C buffer's address, to receive into.
pub(crate) struct CViewMut {
    ptr: *mut u8,
    count: usize,
    map: MapRef,
}

// SAFETY: made only by `view`, whose caller promised `count` readable elements of the map at
// `ptr` (for as long as the view is used); the map is owned or static.
unsafe impl Buffer for CView {
    fn layout(&self) -> Layout<'_> {
        // SAFETY: `view`'s caller's promise (see the impl).
        unsafe { Layout::borrowing(self.ptr, self.count, self.map.map()) }
    }
}

// SAFETY: made only by `view_mut`, whose caller promised `count` writable elements of the map
// at `ptr`, used by nothing else while the view is.
unsafe impl BufferMut for CViewMut {
    fn layout_mut(&mut self) -> Layout<'_> {
        // SAFETY: `view_mut`'s caller's promise (see the impl).
        unsafe { Layout::borrowing(self.ptr, self.count, self.map.map()) }
    }
}

/// Checks `count` (not negative) elements of `dt` can be laid out: more than one of a type
/// of negative extent cannot (Weft's type maps step forward).
fn strided(call: &'static str, count: impl CCount, dt: Dt) -> Result<usize, CError> {
    let n = self::count(call, count)?;
    if !dt.stride_ok(n) {
        return Err(negative_extent(call, n, dt));
    }
    Ok(n)
}

#[cold]
pub(crate) fn negative_extent(call: &'static str, n: usize, dt: &Shape) -> CError {
    CError::new(
        MPI_ERR_TYPE,
        call,
        format!(
            "{n} elements of a datatype of negative extent ({}): Weft moves such a type one \
             element at a time only",
            dt.extent()
        ),
    )
}

/// `count` elements of `dt` at `buf`, to read.
///
/// # Safety
/// `buf` must hold `count` elements of `dt` (each at `buf + i * extent` plus the type map's
/// displacements), readable while the view is used.
pub(crate) unsafe fn view(
    call: &'static str,
    buf: *const c_void,
    count: impl CCount,
    dt: Dt,
) -> Result<CView, CError> {
    Ok(CView {
        ptr: buf.cast(),
        count: strided(call, count, dt)?,
        map: MapRef::of(dt),
    })
}

/// `count` elements of `dt` at `buf`, to write.
///
/// # Safety
/// `buf` must have room for `count` elements of `dt`, writable and used by nothing else
/// while the view is used.
pub(crate) unsafe fn view_mut(
    call: &'static str,
    buf: *mut c_void,
    count: impl CCount,
    dt: Dt,
) -> Result<CViewMut, CError> {
    Ok(CViewMut {
        ptr: buf.cast(),
        count: strided(call, count, dt)?,
        map: MapRef::of(dt),
    })
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
