//! Datatypes, in rsmpi's shape: [`Equivalence`] maps a Rust type to a datatype; user
//! datatypes (contiguous, vector, indexed, structured) describe layouts; [`View`] and
//! [`MutView`] pair a buffer with a count and a datatype; [`Buffer`] and [`BufferMut`] are
//! what the communication calls accept.
//!
//! A datatype here is its *type map* flattened to byte blocks `(offset, length)` plus an
//! extent. All ranks run on one architecture, so no conversion is needed: sending packs the
//! blocks in order (or sends the bytes directly when the layout is contiguous).

use crate::coll::op::{Basic, Elements};
use crate::error::{Error, ErrorClass, Result};
use std::any::TypeId;
use std::borrow::Cow;
use std::collections::HashMap;

/// Byte displacements (MPI_Aint).
pub type Address = isize;
/// Element counts (MPI's `int` counts).
pub type Count = i32;

/// A value whose bytes are not all valid: a receive checks it before writing it to memory
/// of the type (bool: 0 or 1; char: a Unicode scalar value, not a surrogate nor above
/// U+10FFFF).
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Restricted {
    /// One byte, 0 or 1.
    Bool,
    /// Four bytes (native order) holding a `char`.
    Char,
}

impl Restricted {
    fn len(self) -> usize {
        match self {
            Restricted::Bool => 1,
            Restricted::Char => 4,
        }
    }
    fn name(self) -> &'static str {
        match self {
            Restricted::Bool => "bool",
            Restricted::Char => "char",
        }
    }
    /// The value at the start of `b` when it is not valid.
    fn invalid(self, b: &[u8]) -> Option<u32> {
        match self {
            Restricted::Bool => (b[0] > 1).then_some(u32::from(b[0])),
            Restricted::Char => {
                let v = u32::from_ne_bytes([b[0], b[1], b[2], b[3]]);
                char::from_u32(v).is_none().then_some(v)
            }
        }
    }
}

/// A datatype's layout: byte blocks in type-map order, the extent of one element, and
/// where in one element's packed data the restricted values (bool, char) are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TypeMap {
    blocks: Cow<'static, [(isize, usize)]>,
    size: usize,
    extent: usize,
    restricted: Cow<'static, [(usize, Restricted)]>,
    /// The one predefined type the data is made of, if it is (for reductions).
    basic: Option<Basic>,
    /// The (value, index) pair the data is made of, if it is (for minloc and maxloc).
    pair: Option<(Basic, Basic)>,
    /// Whether `count` elements occupy exactly `count * size` consecutive bytes (kept, not
    /// computed: every call asks).
    contiguous: bool,
}

impl TypeMap {
    /// A primitive of `size` bytes.
    pub const fn primitive(size: usize, blocks: &'static [(isize, usize)]) -> TypeMap {
        Self::primitive_restricted(size, blocks, &[])
    }

    /// The primitive `basic`, restricted as `restricted` says.
    const fn basic(basic: Basic, restricted: &'static [(usize, Restricted)]) -> TypeMap {
        let mut m = Self::primitive_restricted(basic.size(), basic.blocks(), restricted);
        m.basic = Some(basic);
        m
    }

    /// A primitive of `size` bytes whose values are restricted as `restricted` says (packed
    /// byte offset, kind).
    #[doc(hidden)]
    pub const fn primitive_restricted(
        size: usize,
        blocks: &'static [(isize, usize)],
        restricted: &'static [(usize, Restricted)],
    ) -> TypeMap {
        TypeMap {
            blocks: Cow::Borrowed(blocks),
            size,
            extent: size,
            restricted: Cow::Borrowed(restricted),
            basic: None,
            pair: None,
            contiguous: Self::lies_contiguous(blocks, size, size),
        }
    }

    /// Whether elements of these blocks, `size` bytes of data each `extent` apart, lie
    /// back to back.
    const fn lies_contiguous(blocks: &[(isize, usize)], size: usize, extent: usize) -> bool {
        size == extent && (size == 0 || (blocks.len() == 1 && blocks[0].0 == 0))
    }

    /// What the data is made of, for the predefined reductions (`pairs`: read it as (value,
    /// index) pairs, for minloc and maxloc).
    pub(crate) fn elements(&self, pairs: bool) -> Option<Elements> {
        if pairs {
            self.pair.map(|(v, i)| Elements::Pair(v, i))
        } else {
            self.basic.map(Elements::Basic)
        }
    }

    /// Whether some bytes of an element are restricted values (bool, char), so a receive
    /// must check them before writing them to the buffer.
    #[inline]
    pub fn is_restricted(&self) -> bool {
        !self.restricted.is_empty()
    }

    /// Checks that `packed`, the packed data of elements 0, 1, ... (the last may be partial),
    /// holds valid values wherever the type has a bool or a char.
    pub fn check_values(&self, call: &'static str, packed: &[u8]) -> Result<()> {
        if self.restricted.is_empty() || self.size == 0 {
            return Ok(());
        }
        for (i, element) in packed.chunks(self.size).enumerate() {
            for &(at, kind) in self.restricted.iter() {
                let Some(bytes) = element.get(at..at + kind.len()) else {
                    continue;
                };
                if let Some(v) = kind.invalid(bytes) {
                    return Err(Error::new(
                        ErrorClass::Arg,
                        call,
                        format!(
                            "the message holds {v:#x} where element {i} has a {} (packed byte \
                             {at} of the element), which is not a valid {}; the sender sent \
                             another type. Nothing was written to the receive buffer",
                            kind.name(),
                            kind.name()
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// The map of a type made of copies of other types' elements: `parts` lists, in
    /// type-map order, each copy's byte displacement and map.
    fn compose<'m>(parts: impl IntoIterator<Item = (isize, &'m TypeMap)>, extent: usize) -> Self {
        let mut blocks = vec![];
        let mut restricted = vec![];
        let mut packed = 0;
        // Element kinds: one basic type throughout, one pair type throughout, or a pair of
        // two basic parts.
        let (mut basic, mut pair, mut kinds) = (None, None, vec![]);
        let mut first = true;
        for (base, m) in parts {
            blocks.extend(m.blocks.iter().map(|&(o, l)| (base + o, l)));
            restricted.extend(m.restricted.iter().map(|&(at, k)| (packed + at, k)));
            packed += m.size;
            if m.size == 0 {
                continue;
            }
            if first {
                (basic, pair) = (m.basic, m.pair);
                first = false;
            } else {
                basic = basic.filter(|&b| m.basic == Some(b));
                pair = pair.filter(|&p| m.pair == Some(p));
            }
            if kinds.len() < 3 {
                kinds.push(m.basic);
            }
        }
        if let [Some(v), Some(i)] = kinds[..] {
            pair = pair.or(Some((v, i)));
        }
        let mut map = Self::from_blocks(blocks, extent);
        map.restricted = Cow::Owned(restricted);
        map.basic = basic;
        map.pair = pair;
        map
    }

    /// The map of a type made of copies of other types' elements (`parts`: each copy's byte
    /// displacement and map, in type-map order) with `extent` bytes from one element to the
    /// next (the C ABI's derived datatypes; element `i` starts `i * extent` bytes after the
    /// buffer's address, so a lower bound is the caller's business).
    #[doc(hidden)]
    pub fn from_parts<'m>(
        parts: impl IntoIterator<Item = (isize, &'m TypeMap)>,
        extent: usize,
    ) -> Self {
        Self::compose(parts, extent)
    }

    /// The map of `count` elements of this one back to back, when they lie contiguous and
    /// hold no restricted values: one block, however large `count` is (a C program's
    /// `MPI_Type_contiguous` of 2^31 bytes stays one block).
    #[doc(hidden)]
    pub fn repeated(&self, count: usize) -> Option<TypeMap> {
        if !self.contiguous || self.is_restricted() {
            return None;
        }
        let len = self.size.checked_mul(count)?;
        let mut map = Self::from_blocks(vec![(0, len)], len);
        map.basic = self.basic;
        map.pair = self.pair;
        Some(map)
    }

    /// The byte blocks of `count` elements back to back (offsets from the first's address):
    /// one block when they lie contiguous.
    #[doc(hidden)]
    pub fn blocks_of(&self, count: usize) -> Vec<(isize, usize)> {
        if let Some(one) = self.repeated(count) {
            return one.blocks().to_vec();
        }
        let extent = self.extent as isize;
        (0..count as isize)
            .flat_map(|i| {
                self.blocks
                    .iter()
                    .map(move |&(off, len)| (i * extent + off, len))
            })
            .collect()
    }

    /// The map of a complex number of two `f32` (`double`: of two `f64`), reducible as one.
    #[doc(hidden)]
    pub const fn complex(double: bool) -> TypeMap {
        Self::basic(if double { Basic::C64 } else { Basic::C32 }, &[])
    }

    fn from_blocks(mut raw: Vec<(isize, usize)>, extent: usize) -> TypeMap {
        raw.retain(|b| b.1 > 0);
        // Merge adjacent blocks, so contiguous layouts are recognised.
        let mut blocks: Vec<(isize, usize)> = Vec::with_capacity(raw.len());
        for (off, len) in raw {
            match blocks.last_mut() {
                Some(last) if last.0 + last.1 as isize == off => last.1 += len,
                _ => blocks.push((off, len)),
            }
        }
        let size = blocks.iter().map(|b| b.1).sum();
        let contiguous = Self::lies_contiguous(&blocks, size, extent);
        TypeMap {
            blocks: Cow::Owned(blocks),
            size,
            extent,
            restricted: Cow::Borrowed(&[]),
            basic: None,
            pair: None,
            contiguous,
        }
    }

    /// Bytes of data in one element.
    pub fn size(&self) -> usize {
        self.size
    }
    /// Bytes from one element to the next.
    pub fn extent(&self) -> usize {
        self.extent
    }
    /// The byte blocks of one element.
    pub fn blocks(&self) -> &[(isize, usize)] {
        &self.blocks
    }
    /// Whether `count` elements occupy exactly `count * size` consecutive bytes.
    #[inline]
    pub fn is_contiguous(&self) -> bool {
        self.contiguous
    }

    /// Appends the data of `count` elements at `base` to `out`.
    ///
    /// # Safety
    /// `base` must point to `count` elements laid out as this map says, all readable.
    pub unsafe fn pack(&self, base: *const u8, count: usize, out: &mut Vec<u8>) {
        out.reserve(self.size * count);
        for i in 0..count {
            for &(off, len) in self.blocks.iter() {
                // SAFETY: the caller promises element `i`'s block at `off` is readable;
                // `i * extent + off` stays inside the described buffer.
                let src = unsafe { base.offset((i * self.extent) as isize + off) };
                // SAFETY: as above, `len` bytes at `src` are readable.
                out.extend_from_slice(unsafe { std::slice::from_raw_parts(src, len) });
            }
        }
    }

    /// Scatters packed `data` into `count` elements at `base`; returns bytes consumed.
    ///
    /// # Safety
    /// `base` must point to `count` writable elements laid out as this map says.
    pub unsafe fn unpack(&self, data: &[u8], base: *mut u8, count: usize) -> usize {
        let mut pos = 0;
        'outer: for i in 0..count {
            for &(off, len) in self.blocks.iter() {
                let n = len.min(data.len() - pos);
                if n == 0 {
                    break 'outer;
                }
                // SAFETY: the caller promises element `i`'s block is writable; `n <= len`
                // and `data[pos..pos+n]` is in bounds by construction of `n`.
                unsafe {
                    let dst = base.offset((i * self.extent) as isize + off);
                    std::ptr::copy_nonoverlapping(data.as_ptr().add(pos), dst, n);
                }
                pos += n;
            }
        }
        pos
    }
}

/// Something that describes a layout (rsmpi's `Datatype`).
pub trait Datatype {
    /// The layout.
    #[doc(hidden)]
    fn type_map(&self) -> &TypeMap;
    /// A datatype of its own with the same layout (MPI_Type_dup).
    fn dup(&self) -> UserDatatype {
        UserDatatype {
            map: self.type_map().clone(),
        }
    }
}

/// Datatypes that can be used to build other datatypes (rsmpi's `UncommittedDatatype`).
pub trait UncommittedDatatype: Datatype {}
impl<T: Datatype + ?Sized> UncommittedDatatype for T {}

/// A borrowed datatype.
#[derive(Clone, Copy, Debug)]
pub struct DatatypeRef<'a> {
    map: &'a TypeMap,
}

impl<'a> DatatypeRef<'a> {
    /// Wraps a type map that lives long enough.
    pub fn from_map(map: &'a TypeMap) -> Self {
        DatatypeRef { map }
    }
    /// The map, for as long as it lives.
    #[doc(hidden)]
    pub fn into_map(self) -> &'a TypeMap {
        self.map
    }
}

impl Datatype for DatatypeRef<'_> {
    fn type_map(&self) -> &TypeMap {
        self.map
    }
}

/// The datatypes of the primitive types.
pub type SystemDatatype = DatatypeRef<'static>;

/// A datatype built at run time.
#[derive(Clone, Debug)]
pub struct UserDatatype {
    map: TypeMap,
}

/// rsmpi's name for a datatype not yet committed; the same thing here.
pub type UncommittedUserDatatype = UserDatatype;

impl Datatype for UserDatatype {
    fn type_map(&self) -> &TypeMap {
        &self.map
    }
}

fn check_count(call: &'static str, what: &str, n: Count) -> usize {
    if n < 0 {
        panic!(
            "{}",
            Error::new(
                ErrorClass::Count,
                call,
                format!("{what} is {n}; it must not be negative")
            )
        );
    }
    n as usize
}

impl UserDatatype {
    /// `count` consecutive copies of `oldtype`.
    pub fn contiguous<D: UncommittedDatatype + ?Sized>(count: Count, oldtype: &D) -> UserDatatype {
        let n = check_count("UserDatatype::contiguous", "count", count);
        Self::vector(n as Count, 1, 1, oldtype)
    }

    /// `count` blocks of `blocklength` elements, `stride` elements apart.
    pub fn vector<D: UncommittedDatatype + ?Sized>(
        count: Count,
        blocklength: Count,
        stride: Count,
        oldtype: &D,
    ) -> UserDatatype {
        let n = check_count("UserDatatype::vector", "count", count);
        let bl = check_count("UserDatatype::vector", "blocklength", blocklength);
        let old = oldtype.type_map();
        let ext = old.extent as isize;
        let parts = (0..n).flat_map(|i| {
            (0..bl).map(move |j| ((i as isize * stride as isize + j as isize) * ext, old))
        });
        let extent = if n == 0 {
            0
        } else {
            (((n - 1) as isize * stride as isize + bl as isize) * ext).max(0) as usize
        };
        UserDatatype {
            map: TypeMap::compose(parts, extent),
        }
    }

    /// Blocks of `blocklengths[i]` elements at element displacements `displacements[i]`.
    pub fn indexed<D: UncommittedDatatype + ?Sized>(
        blocklengths: &[Count],
        displacements: &[Count],
        oldtype: &D,
    ) -> UserDatatype {
        assert_eq!(
            blocklengths.len(),
            displacements.len(),
            "indexed: one displacement per block"
        );
        let old = oldtype.type_map();
        let ext = old.extent as isize;
        let mut parts = vec![];
        let mut hi = 0isize;
        for (&bl, &d) in blocklengths.iter().zip(displacements) {
            let bl = check_count("UserDatatype::indexed", "a block length", bl);
            for j in 0..bl as isize {
                parts.push(((d as isize + j) * ext, old));
            }
            hi = hi.max((d as isize + bl as isize) * ext);
        }
        UserDatatype {
            map: TypeMap::compose(parts, hi.max(0) as usize),
        }
    }

    /// Blocks of `blocklengths[i]` elements of `types[i]` at byte displacements
    /// `displacements[i]` (MPI_Type_create_struct). The extent is the end of the last byte,
    /// rounded up to the largest block alignment, as Rust lays out structs.
    pub fn structured<D: UncommittedDatatype>(
        blocklengths: &[Count],
        displacements: &[Address],
        types: &[D],
    ) -> UserDatatype {
        Self::structured_with_extent(blocklengths, displacements, types, None)
    }

    /// Like [`UserDatatype::structured`] with an explicit extent (the derive passes
    /// `size_of::<T>()`).
    pub fn structured_with_extent<D: UncommittedDatatype>(
        blocklengths: &[Count],
        displacements: &[Address],
        types: &[D],
        extent: Option<usize>,
    ) -> UserDatatype {
        assert!(
            blocklengths.len() == displacements.len() && displacements.len() == types.len(),
            "structured: blocklengths, displacements and types must have the same length"
        );
        let mut parts = vec![];
        let mut hi = 0isize;
        for ((&bl, &d), t) in blocklengths.iter().zip(displacements).zip(types) {
            let bl = check_count("UserDatatype::structured", "a block length", bl);
            let m = t.type_map();
            for j in 0..bl as isize {
                parts.push((d + j * m.extent as isize, m));
            }
            hi = hi.max(d + (bl * m.extent) as isize);
        }
        let extent = extent.unwrap_or(hi.max(0) as usize);
        UserDatatype {
            map: TypeMap::compose(parts, extent),
        }
    }

    /// A borrowed view of this datatype.
    pub fn as_ref(&self) -> DatatypeRef<'_> {
        DatatypeRef { map: &self.map }
    }

    /// Wraps an existing type map (used by `#[derive(Equivalence)]`).
    #[doc(hidden)]
    pub fn from_type_map(map: TypeMap) -> Self {
        UserDatatype { map }
    }
}

/// A Rust type with an equivalent datatype (rsmpi's `Equivalence`).
///
/// # Safety
/// `equivalent_datatype()` must describe exactly the bytes of the type that carry data, and
/// any bytes a receive writes there must form a valid value: every bit pattern of those
/// bytes is valid (numbers), or the datatype marks them restricted (`bool`, `char`: every
/// receive checks them before writing them to the buffer), or they are arrays, tuples and
/// `#[derive(Equivalence)]` structs of those, whose datatypes carry their fields' marks.
pub unsafe trait Equivalence {
    /// The datatype type.
    type Out: Datatype;
    /// The datatype describing `Self`.
    fn equivalent_datatype() -> Self::Out;
    /// The datatype's map when it lives as long as the program (every impl of this crate and
    /// of its derive): buffers of `Self` then borrow it instead of copying it on every call.
    #[doc(hidden)]
    fn static_type_map() -> Option<&'static TypeMap> {
        None
    }
}

macro_rules! primitive {
    ($($t:ty => $map:expr),* ; $restricted:expr) => {$(
        // SAFETY: one contiguous block covering the whole primitive. Every bit pattern is a
        // valid number; for bool and char (called with their restriction) receives check
        // the value before writing it (`TypeMap::check_values`, called by every receive path
        // in point_to_point through its staging buffer), so no invalid value is written.
        unsafe impl Equivalence for $t {
            type Out = SystemDatatype;
            #[inline]
            fn equivalent_datatype() -> Self::Out {
                DatatypeRef { map: Self::static_type_map().expect("a static map") }
            }
            #[inline]
            fn static_type_map() -> Option<&'static TypeMap> {
                static MAP: TypeMap = $map;
                Some(&MAP)
            }
        }
    )*};
}
/// The map of the primitive `basic`.
const fn basic_map(basic: Basic) -> TypeMap {
    TypeMap::basic(basic, &[])
}
/// The predefined type with the size of a pointer.
const fn pointer_sized(signed: bool) -> Basic {
    match (std::mem::size_of::<usize>(), signed) {
        (4, true) => Basic::I32,
        (4, false) => Basic::U32,
        (_, true) => Basic::I64,
        (_, false) => Basic::U64,
    }
}
primitive!(
    u8 => basic_map(Basic::U8), i8 => basic_map(Basic::I8),
    u16 => basic_map(Basic::U16), i16 => basic_map(Basic::I16),
    u32 => basic_map(Basic::U32), i32 => basic_map(Basic::I32),
    u64 => basic_map(Basic::U64), i64 => basic_map(Basic::I64),
    u128 => basic_map(Basic::U128), i128 => basic_map(Basic::I128),
    usize => basic_map(pointer_sized(false)), isize => basic_map(pointer_sized(true)),
    f32 => basic_map(Basic::F32), f64 => basic_map(Basic::F64); &[]
);
#[cfg(feature = "complex")]
primitive!(
    num_complex::Complex32 => basic_map(Basic::C32),
    num_complex::Complex64 => basic_map(Basic::C64); &[]
);
primitive!(bool => TypeMap::basic(Basic::Bool, &[(0, Restricted::Bool)]); &[]);
primitive!(char => TypeMap::primitive_restricted(4, &[(0, 4)], &[(0, Restricted::Char)]); &[]);

thread_local! {
    static DERIVED: std::cell::RefCell<HashMap<TypeId, &'static TypeMap>> = std::cell::RefCell::new(HashMap::new());
}

/// The datatype of a composite type, computed once per type and kept for the process.
///
/// # Safety
/// `build` describes `T`'s memory: every block lies inside one `T` (or, for an extent larger
/// than `T`, inside an array of them), and every byte pattern a block can receive is a valid
/// value there. Every later send or receive of `T` trusts the cached map, so the first caller
/// for a `T` must be `T`'s own [`Equivalence`] impl.
#[doc(hidden)]
pub unsafe fn cached_datatype<T: 'static>(
    build: impl FnOnce() -> UserDatatype,
) -> DatatypeRef<'static> {
    let id = TypeId::of::<T>();
    if let Some(map) = DERIVED.with(|d| d.borrow().get(&id).copied()) {
        return DatatypeRef { map };
    }
    // Leak the blocks too, so clones of this map (one per send) do not allocate.
    let built = build().map;
    let blocks: &'static [(isize, usize)] = Box::leak(built.blocks.into_owned().into_boxed_slice());
    let restricted: &'static [(usize, Restricted)] =
        Box::leak(built.restricted.into_owned().into_boxed_slice());
    let map: &'static TypeMap = Box::leak(Box::new(TypeMap {
        blocks: Cow::Borrowed(blocks),
        size: built.size,
        extent: built.extent,
        restricted: Cow::Borrowed(restricted),
        basic: built.basic,
        pair: built.pair,
        contiguous: built.contiguous,
    }));
    DERIVED.with(|d| d.borrow_mut().insert(id, map));
    DatatypeRef { map }
}

// SAFETY: an array is `N` consecutive elements of `T`, described by a contiguous datatype of
// `T`'s datatype with the array's extent.
unsafe impl<T: Equivalence + 'static, const N: usize> Equivalence for [T; N] {
    type Out = DatatypeRef<'static>;
    fn static_type_map() -> Option<&'static TypeMap> {
        Some(Self::equivalent_datatype().map)
    }
    fn equivalent_datatype() -> Self::Out {
        // SAFETY: `N` elements of `T`'s own datatype, contiguous: exactly the array.
        unsafe {
            cached_datatype::<Self>(|| {
                UserDatatype::contiguous(N as Count, &T::equivalent_datatype())
            })
        }
    }
}

macro_rules! tuple {
    ($($name:ident . $idx:tt),+) => {
        // SAFETY: each field is described at its own offset (offset_of!) by its own
        // datatype, and the extent is the tuple's size.
        unsafe impl<$($name: Equivalence + 'static),+> Equivalence for ($($name,)+) {
            type Out = DatatypeRef<'static>;
            fn static_type_map() -> Option<&'static TypeMap> {
                Some(Self::equivalent_datatype().map)
            }
            fn equivalent_datatype() -> Self::Out {
                // SAFETY: each field at its own offset with its own datatype, and the
                // tuple's size as the extent: exactly the tuple.
                unsafe { cached_datatype::<Self>(|| {
                    let types = [$($name::equivalent_datatype().type_map().clone()),+];
                    let refs: Vec<DatatypeRef<'_>> = types.iter().map(DatatypeRef::from_map).collect();
                    UserDatatype::structured_with_extent(
                        &[$({ let _ = $idx; 1 }),+],
                        &[$(std::mem::offset_of!(Self, $idx) as Address),+],
                        &refs,
                        Some(std::mem::size_of::<Self>()),
                    )
                }) }
            }
        }
    };
}
tuple!(A.0);
tuple!(A.0, B.1);
tuple!(A.0, B.1, C.2);
tuple!(A.0, B.1, C.2, D.3);
tuple!(A.0, B.1, C.2, D.3, E.4);
tuple!(A.0, B.1, C.2, D.3, E.4, F.5);
tuple!(A.0, B.1, C.2, D.3, E.4, F.5, G.6);
tuple!(A.0, B.1, C.2, D.3, E.4, F.5, G.6, H.7);

/// A buffer's raw layout: where, how many elements, and their datatype.
///
/// Made only by [`Layout::new`], which is `unsafe`: the safe methods read through `ptr`.
#[doc(hidden)]
#[derive(Clone, Debug)]
pub struct Layout<'a> {
    pub(crate) ptr: *const u8,
    pub(crate) count: usize,
    /// The element layout: borrowed from the datatype when that lives long enough (the
    /// common case, on every call's path), else a copy.
    pub(crate) map: Cow<'a, TypeMap>,
    _buf: std::marker::PhantomData<&'a ()>,
}

impl<'a> Layout<'a> {
    /// `count` elements of `map` at `ptr`.
    ///
    /// # Safety
    /// `count` elements of `map` at `ptr` are memory of a buffer borrowed for `'a`: readable
    /// for `'a` (and writable, when the layout comes from [`BufferMut::layout_mut`]).
    #[inline]
    pub unsafe fn new(ptr: *const u8, count: usize, map: &TypeMap) -> Self {
        Layout {
            ptr,
            count,
            map: Cow::Owned(map.clone()),
            _buf: std::marker::PhantomData,
        }
    }

    /// As [`Layout::new`] with a map that outlives the layout (borrowed, not copied).
    ///
    /// # Safety
    /// As for [`Layout::new`].
    #[inline]
    pub unsafe fn borrowing(ptr: *const u8, count: usize, map: &'a TypeMap) -> Self {
        Layout {
            ptr,
            count,
            map: Cow::Borrowed(map),
            _buf: std::marker::PhantomData,
        }
    }

    /// `count` elements of `T` at `ptr`: the datatype's map borrowed when it is static.
    ///
    /// # Safety
    /// As for [`Layout::new`].
    #[inline]
    unsafe fn of<T: Equivalence>(ptr: *const u8, count: usize) -> Self {
        match T::static_type_map() {
            // SAFETY: the caller's promise.
            Some(map) => unsafe { Self::borrowing(ptr, count, map) },
            // SAFETY: the caller's promise.
            None => unsafe { Self::new(ptr, count, T::equivalent_datatype().type_map()) },
        }
    }

    /// Bytes of data this buffer holds (packed).
    #[inline]
    pub fn data_len(&self) -> usize {
        self.count * self.map.size()
    }
    /// The bytes themselves when the layout is contiguous.
    #[inline]
    pub fn contiguous_bytes(&self) -> Option<&[u8]> {
        if !self.map.is_contiguous() {
            return None;
        }
        let n = self.data_len();
        if n == 0 {
            return Some(&[]);
        }
        // SAFETY: a Buffer reports a pointer to `count` elements of its datatype, which is
        // contiguous, so `n` bytes are readable while the buffer is borrowed (as it is for
        // the lifetime of this layout's use by the caller).
        Some(unsafe { std::slice::from_raw_parts(self.ptr, n) })
    }
    /// The packed data (a copy).
    pub fn pack(&self) -> Vec<u8> {
        let mut out = Vec::new();
        // SAFETY: the Buffer contract: `count` readable elements of the datatype at `ptr`.
        unsafe { self.map.pack(self.ptr, self.count, &mut out) };
        out
    }
}

/// Something that can be sent (rsmpi's `Buffer`).
///
/// # Safety
/// `layout()` must describe memory owned or borrowed by `self`, valid while `self` is.
pub unsafe trait Buffer {
    /// Where the data is and how it is laid out.
    #[doc(hidden)]
    fn layout(&self) -> Layout<'_>;
}

/// Something that can be received into (rsmpi's `BufferMut`).
///
/// # Safety
/// As for [`Buffer`], and the memory must be writable through `self`.
pub unsafe trait BufferMut {
    /// Where the data goes and how it is laid out.
    #[doc(hidden)]
    fn layout_mut(&mut self) -> Layout<'_>;
}

// SAFETY: one value of T, at its own address.
unsafe impl<T: Equivalence> Buffer for T {
    #[inline]
    fn layout(&self) -> Layout<'_> {
        // SAFETY: the memory of `self`, borrowed for the layout's lifetime (the
        // impl's SAFETY comment says why it is `count` elements of the map).
        unsafe { Layout::of::<T>(self as *const T as *const u8, 1) }
    }
}
// SAFETY: one value of T, at its own address, writable through &mut.
unsafe impl<T: Equivalence> BufferMut for T {
    #[inline]
    fn layout_mut(&mut self) -> Layout<'_> {
        // SAFETY: the memory of `self`, borrowed for the layout's lifetime (the
        // impl's SAFETY comment says why it is `count` elements of the map).
        unsafe { Layout::of::<T>(self as *mut T as *const u8, 1) }
    }
}
// SAFETY: `len` consecutive values of T.
unsafe impl<T: Equivalence> Buffer for [T] {
    #[inline]
    fn layout(&self) -> Layout<'_> {
        // SAFETY: the memory of `self`, borrowed for the layout's lifetime (the
        // impl's SAFETY comment says why it is `count` elements of the map).
        unsafe { Layout::of::<T>(self.as_ptr() as *const u8, self.len()) }
    }
}
// SAFETY: `len` consecutive writable values of T.
unsafe impl<T: Equivalence> BufferMut for [T] {
    #[inline]
    fn layout_mut(&mut self) -> Layout<'_> {
        // SAFETY: the memory of `self`, borrowed for the layout's lifetime (the
        // impl's SAFETY comment says why it is `count` elements of the map).
        unsafe { Layout::of::<T>(self.as_mut_ptr() as *const u8, self.len()) }
    }
}
// SAFETY: the Vec's elements, as for slices.
unsafe impl<T: Equivalence> Buffer for Vec<T> {
    fn layout(&self) -> Layout<'_> {
        self[..].layout()
    }
}
// SAFETY: the Vec's elements, as for slices.
unsafe impl<T: Equivalence> BufferMut for Vec<T> {
    fn layout_mut(&mut self) -> Layout<'_> {
        self[..].layout_mut()
    }
}

/// A buffer seen as `count` elements of a datatype (rsmpi's `View`).
pub struct View<'d, 'b, D: ?Sized + Datatype, T: ?Sized> {
    ptr: *const u8,
    count: usize,
    datatype: &'d D,
    _buf: std::marker::PhantomData<&'b T>,
}

impl<'d, 'b, D: Datatype, T: ?Sized> View<'d, 'b, D, T> {
    /// Views `buffer` as `count` elements of `datatype`.
    ///
    /// # Safety
    /// `count` elements of `datatype` must fit in `buffer`.
    pub unsafe fn with_count_and_datatype(buffer: &'b T, count: Count, datatype: &'d D) -> Self
    where
        T: Buffer,
    {
        let count = check_count("View::with_count_and_datatype", "count", count);
        View {
            ptr: buffer.layout().ptr,
            count,
            datatype,
            _buf: std::marker::PhantomData,
        }
    }
}

// SAFETY: the constructor's caller promised `count` elements of `datatype` fit the buffer.
unsafe impl<D: Datatype, T: ?Sized> Buffer for View<'_, '_, D, T> {
    fn layout(&self) -> Layout<'_> {
        // SAFETY: the constructor's caller promised `count` elements of the datatype fit the
        // buffer, which this view keeps borrowed.
        unsafe { Layout::borrowing(self.ptr, self.count, self.datatype.type_map()) }
    }
}

/// A mutable buffer seen as `count` elements of a datatype (rsmpi's `MutView`).
pub struct MutView<'d, 'b, D: ?Sized + Datatype, T: ?Sized> {
    ptr: *mut u8,
    count: usize,
    datatype: &'d D,
    _buf: std::marker::PhantomData<&'b mut T>,
}

impl<'d, 'b, D: Datatype, T: ?Sized> MutView<'d, 'b, D, T> {
    /// Views `buffer` as `count` writable elements of `datatype`.
    ///
    /// # Safety
    /// `count` elements of `datatype` must fit in `buffer`.
    pub unsafe fn with_count_and_datatype(buffer: &'b mut T, count: Count, datatype: &'d D) -> Self
    where
        T: BufferMut,
    {
        let count = check_count("MutView::with_count_and_datatype", "count", count);
        MutView {
            ptr: buffer.layout_mut().ptr as *mut u8,
            count,
            datatype,
            _buf: std::marker::PhantomData,
        }
    }
}

// SAFETY: as for View; the memory was borrowed mutably.
unsafe impl<D: Datatype, T: ?Sized> BufferMut for MutView<'_, '_, D, T> {
    fn layout_mut(&mut self) -> Layout<'_> {
        // SAFETY: the constructor's caller promised `count` elements of the datatype fit the
        // buffer, which this view keeps borrowed.
        unsafe { Layout::borrowing(self.ptr, self.count, self.datatype.type_map()) }
    }
}

pub use super::dyn_buffer::{Collection, DynBuffer, DynBufferMut};
pub use super::partition::{
    Partition, PartitionMut, Partitioned, PartitionedBuffer, PartitionedBufferMut,
};

/// Traits to glob-import.
pub mod traits {
    pub use super::{
        Buffer, BufferMut, Collection, Datatype, Equivalence, Partitioned, PartitionedBuffer,
        PartitionedBufferMut, UncommittedDatatype,
    };
}

/// The type map of `F`'s datatype (used by `#[derive(Equivalence)]`).
#[doc(hidden)]
pub fn map_of<F: Equivalence>() -> TypeMap {
    F::equivalent_datatype().type_map().clone()
}

/// The datatype of a struct whose fields are at `fields()` = (byte offset, field map), in
/// declaration order (used by `#[derive(Equivalence)]`).
///
/// # Safety
/// As for [`cached_datatype`]: `fields()` lists `T`'s own fields (offset and the field type's
/// datatype), and the caller is `T`'s own `Equivalence` impl.
#[doc(hidden)]
pub unsafe fn derived<T: 'static>(
    fields: impl FnOnce() -> Vec<(Address, TypeMap)>,
) -> DatatypeRef<'static> {
    // SAFETY: the caller's contract; the extent is `T`'s size.
    unsafe {
        cached_datatype::<T>(|| {
            let fields = fields();
            let refs: Vec<DatatypeRef<'_>> = fields
                .iter()
                .map(|(_, m)| DatatypeRef::from_map(m))
                .collect();
            let displs: Vec<Address> = fields.iter().map(|(d, _)| *d).collect();
            let ones = vec![1; fields.len()];
            UserDatatype::structured_with_extent(
                &ones,
                &displs,
                &refs,
                Some(std::mem::size_of::<T>()),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts() {
        assert!(u64::equivalent_datatype().type_map().is_contiguous());
        let a = <[i32; 4]>::equivalent_datatype();
        assert!(a.type_map().is_contiguous());
        assert_eq!(a.type_map().size(), 16);
        let t = <(u8, u32)>::equivalent_datatype();
        assert_eq!(t.type_map().size(), 5);
        assert_eq!(t.type_map().extent(), 8);
        assert!(!t.type_map().is_contiguous());
        let v = UserDatatype::vector(2, 1, 3, &i32::equivalent_datatype());
        assert_eq!(v.type_map().blocks(), &[(0, 4), (12, 4)]);
        let x = [1i32, 2, 3, 4, 5, 6];
        let mut out = vec![];
        // SAFETY: two elements of the vector type (extent 16) fit in 6 i32s... the second
        // element's last block ends at 16 + 12 + 4 = 32 > 24, so pack just one.
        unsafe { v.type_map().pack(x.as_ptr() as *const u8, 1, &mut out) };
        assert_eq!(out.len(), 8);
        let mut y = [0i32; 4];
        // SAFETY: one element of the vector type fits in 4 i32s.
        unsafe { v.type_map().unpack(&out, y.as_mut_ptr() as *mut u8, 1) };
        assert_eq!(y, [1, 0, 0, 4]);
    }

    #[test]
    fn maps_from_parts_and_repeated_copies() {
        let int = i32::equivalent_datatype();
        let m = int.type_map();
        // Negative displacements and an extent of one's choosing (the C ABI's lower bounds).
        let p = TypeMap::from_parts([(-4, m), (8, m)], 16);
        assert_eq!(p.blocks(), &[(-4, 4), (8, 4)]);
        assert_eq!((p.size(), p.extent()), (8, 16));
        assert!(!p.is_contiguous() && p.elements(false).is_some());
        assert!(p.repeated(2).is_none());
        // Copies of a contiguous map stay one block, whatever their number.
        let r = m.repeated(1 << 40).expect("contiguous");
        assert_eq!(r.blocks(), &[(0, 4 << 40)]);
        assert!(r.is_contiguous() && r.elements(false).is_some());
        let c = TypeMap::complex(true);
        assert_eq!(c.size(), 16);
        assert!(c.elements(false).is_some());
    }

    #[test]
    fn bools_and_chars_are_checked_wherever_a_type_holds_them() {
        let t = <(u32, bool, char)>::equivalent_datatype();
        let m = t.type_map();
        assert!(m.is_restricted() && !u32::equivalent_datatype().type_map().is_restricted());
        // Packed: u32 at 0, bool at 4, char at 5 (repr(Rust) may reorder fields, but the
        // packed data follows the tuple's field order).
        let mut good = vec![];
        good.extend(7u32.to_ne_bytes());
        good.push(1);
        good.extend(('é' as u32).to_ne_bytes());
        assert!(m.check_values("receive", &good).is_ok());
        let mut bad = good.clone();
        bad[4] = 2;
        let e = m.check_values("receive", &bad).unwrap_err();
        assert!(e.call == "receive" && e.detail.contains("bool"), "{e}");
        let mut bad = good.clone();
        bad[5..9].copy_from_slice(&0xD800u32.to_ne_bytes());
        let e = m.check_values("receive", &bad).unwrap_err();
        assert!(
            e.detail.contains("0xd800") && e.detail.contains("char"),
            "{e}"
        );
        // Through a vector of arrays: the marks follow every copy, element after element.
        let v = UserDatatype::vector(2, 1, 2, &<[bool; 3]>::equivalent_datatype());
        let vm = v.type_map();
        assert!(vm.check_values("x", &[0, 1, 0, 1, 1, 1]).is_ok());
        assert!(vm
            .check_values("x", &[0, 1, 0, 1, 1, 1, 0, 0, 0, 0, 1, 3])
            .is_err());
        // A partial last element is checked as far as it goes.
        assert!(vm.check_values("x", &[0, 1, 0, 1, 1, 1, 0, 7][..7]).is_ok());
        assert!(vm.check_values("x", &[0, 1, 0, 1, 1, 1, 0, 7]).is_err());
    }
}
