//! Buffers whose element type is known at run time only (rsmpi's `DynBuffer` and
//! `DynBufferMut`): the arguments of a user reduction, and buffers a program builds from a
//! pointer, a count and a datatype (`from_raw`) to pass to any call that takes a buffer.
//! Also rsmpi's `Collection`: how many elements a buffer holds.

use super::datatype::TypeMap;
use super::datatype::{Buffer, BufferMut, Count, Datatype, DatatypeRef, Equivalence, Layout};

/// Elements of a datatype, read-only (rsmpi's `DynBuffer`).
#[derive(Clone, Copy, Debug)]
pub struct DynBuffer<'b> {
    pub(crate) ptr: *const u8,
    pub(crate) count: usize,
    pub(crate) map: &'b TypeMap,
}

/// Elements of a datatype, writable (rsmpi's `DynBufferMut`).
#[derive(Debug)]
pub struct DynBufferMut<'b> {
    pub(crate) ptr: *mut u8,
    pub(crate) count: usize,
    pub(crate) map: &'b TypeMap,
}

/// Whether `ptr` can be read as `T`s of `map`'s layout.
fn holds<T: Equivalence>(ptr: *const u8, map: &TypeMap) -> bool {
    T::equivalent_datatype().type_map() == map && ptr.align_offset(std::mem::align_of::<T>()) == 0
}

fn count_of(call: &'static str, len: Count) -> usize {
    usize::try_from(len).unwrap_or_else(|_| {
        panic!(
            "{}",
            crate::error::Error::new(
                crate::error::ErrorClass::Count,
                call,
                format!("the count is {len}; it must not be negative"),
            )
        )
    })
}

/// What both kinds answer alike.
macro_rules! queries {
    ($($t:ident),*) => {$(
        impl<'b> $t<'b> {
            /// Whether the elements are `T`s (same datatype, aligned for `T`).
            pub fn is<T: Equivalence>(&self) -> bool {
                holds::<T>(self.ptr, self.map)
            }
            /// Number of elements.
            pub fn len(&self) -> usize {
                self.count
            }
            /// Whether there are none.
            pub fn is_empty(&self) -> bool {
                self.count == 0
            }
            /// The elements' datatype.
            pub fn as_datatype(&self) -> DatatypeRef<'b> {
                DatatypeRef::from_map(self.map)
            }
        }

        impl Collection for $t<'_> {
            fn count(&self) -> Count {
                self.count as Count
            }
        }
    )*};
}
queries!(DynBuffer, DynBufferMut);

impl<'b> DynBuffer<'b> {
    /// The elements of `buf`.
    pub fn new<T: Equivalence>(buf: &'b [T]) -> Self {
        // SAFETY: `buf.len()` elements of `T`'s datatype, borrowed for 'b.
        unsafe { Self::from_raw(buf.as_ptr(), buf.len() as Count, datatype_of::<T>()) }
    }
    /// `len` elements of `datatype` at `ptr`.
    ///
    /// # Safety
    /// `ptr` holds `len` elements laid out as `datatype` says, readable for 'b and not written
    /// meanwhile.
    pub unsafe fn from_raw<T>(ptr: *const T, len: Count, datatype: DatatypeRef<'b>) -> Self {
        DynBuffer {
            ptr: ptr.cast(),
            count: count_of("DynBuffer::from_raw", len),
            map: datatype.into_map(),
        }
    }
    /// The elements as `T`s, when they are.
    pub fn downcast<T: Equivalence>(self) -> Option<&'b [T]> {
        if !self.is::<T>() {
            return None;
        }
        // SAFETY: `count` elements in `T`'s own layout (the maps are equal) at an address
        // aligned for `T`, valid data of the type (the constructors' contracts), for 'b.
        Some(unsafe { std::slice::from_raw_parts(self.ptr as *const T, self.count) })
    }
}

impl<'b> DynBufferMut<'b> {
    /// The elements of `buf`.
    pub fn new<T: Equivalence>(buf: &'b mut [T]) -> Self {
        // SAFETY: `buf.len()` elements of `T`'s datatype, borrowed exclusively for 'b.
        unsafe { Self::from_raw(buf.as_mut_ptr(), buf.len() as Count, datatype_of::<T>()) }
    }
    /// `len` elements of `datatype` at `ptr`, to write.
    ///
    /// # Safety
    /// `ptr` holds `len` elements laid out as `datatype` says, readable and writable for 'b,
    /// and nothing else uses that memory meanwhile; every value of the type its elements are
    /// has every bit pattern a message of `datatype` can bring valid, as for `BufferMut`.
    pub unsafe fn from_raw<T>(ptr: *mut T, len: Count, datatype: DatatypeRef<'b>) -> Self {
        DynBufferMut {
            ptr: ptr.cast(),
            count: count_of("DynBufferMut::from_raw", len),
            map: datatype.into_map(),
        }
    }
    /// The elements as `T`s, when they are.
    pub fn downcast<T: Equivalence>(self) -> Option<&'b mut [T]> {
        if !self.is::<T>() {
            return None;
        }
        // SAFETY: as for `DynBuffer::downcast`, and borrowed exclusively for 'b.
        Some(unsafe { std::slice::from_raw_parts_mut(self.ptr as *mut T, self.count) })
    }
}

/// `T`'s datatype, borrowed for as long as any buffer needs it.
fn datatype_of<'b, T: Equivalence>() -> DatatypeRef<'b> {
    match T::static_type_map() {
        Some(map) => DatatypeRef::from_map(map),
        // Maps of this crate's types and of its derive are static; a hand-written
        // `Equivalence` whose map is not lives as long as the program here.
        None => DatatypeRef::from_map(Box::leak(Box::new(
            T::equivalent_datatype().type_map().clone(),
        ))),
    }
}

// SAFETY: `count` elements of `map` at `ptr`, readable for 'b (the constructors' contracts).
unsafe impl Buffer for DynBuffer<'_> {
    fn layout(&self) -> Layout<'_> {
        // SAFETY: the constructors' contracts, for as long as this buffer is borrowed.
        unsafe { Layout::borrowing(self.ptr, self.count, self.map) }
    }
}

// SAFETY: as for `DynBuffer`.
unsafe impl Buffer for DynBufferMut<'_> {
    fn layout(&self) -> Layout<'_> {
        // SAFETY: the constructors' contracts, for as long as this buffer is borrowed.
        unsafe { Layout::borrowing(self.ptr, self.count, self.map) }
    }
}

// SAFETY: `count` writable elements of `map` at `ptr`, used by nothing else for 'b.
unsafe impl BufferMut for DynBufferMut<'_> {
    fn layout_mut(&mut self) -> Layout<'_> {
        // SAFETY: the constructors' contracts, for as long as this buffer is borrowed mutably.
        unsafe { Layout::borrowing(self.ptr, self.count, self.map) }
    }
}

/// How many elements a buffer holds (rsmpi's `Collection`).
pub trait Collection {
    /// The number of elements.
    fn count(&self) -> Count;
}

impl<T: Equivalence> Collection for [T] {
    fn count(&self) -> Count {
        self.len() as Count
    }
}

impl<T: Equivalence> Collection for Vec<T> {
    fn count(&self) -> Count {
        self.len() as Count
    }
}

impl<T: Equivalence, const N: usize> Collection for [T; N] {
    fn count(&self) -> Count {
        N as Count
    }
}

macro_rules! one {
    ($($t:ty),*) => {$(
        impl Collection for $t {
            fn count(&self) -> Count {
                1
            }
        }
    )*};
}
one!(bool, char, i8, i16, i32, i64, isize, u8, u16, u32, u64, usize, f32, f64);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dyn_buffers_downcast_to_their_own_type_only_and_count_what_they_hold() {
        let mut v = [1i32, 2, 3];
        assert_eq!(v.count(), 3);
        assert_eq!(v[..].count(), 3);
        assert_eq!(7u8.count(), 1);
        let b = DynBufferMut::new(&mut v[..]);
        assert_eq!((b.len(), b.count()), (3, 3));
        assert!(b.is::<i32>() && !b.is::<u32>() && !b.is::<i64>());
        b.downcast::<i32>().expect("i32s")[0] = 9;
        assert_eq!(v[0], 9);
        let r = DynBuffer::new(&v[1..]);
        assert_eq!(r.downcast::<i32>(), Some(&[2, 3][..]));
        let words = [0u32; 3];
        // One byte into 4-aligned memory: never aligned for an i32.
        let at = (words.as_ptr() as *const u8).wrapping_add(1);
        // SAFETY: eight readable bytes at `at` (inside `words`), as two i32s.
        let odd = unsafe { DynBuffer::from_raw(at, 2, i32::equivalent_datatype()) };
        assert!(
            odd.downcast::<i32>().is_none(),
            "an unaligned pointer is not lent as i32s"
        );
    }
}
