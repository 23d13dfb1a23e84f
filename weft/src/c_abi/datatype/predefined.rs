//! The predefined datatypes: each handle's layout ([`Shape`]) and standard name. C types of
//! the x86_64 and aarch64 Linux ABIs (`long` and `wchar_t` are 8 and 4 bytes, `long double`
//! 16); the Fortran types as the sizes gfortran gives them; the pair types of
//! MPI_MINLOC/MPI_MAXLOC laid out as the C structs `{ value; int; }` are.

use super::shape::{Run, Shape};
use crate::c_abi::abi::*;
use crate::coll::op::{Basic, Elements};
use crate::datatype::{map_of, TypeMap};
use std::sync::atomic::{AtomicU8, Ordering::Relaxed};
use std::sync::OnceLock;

/// Handles from `MPI_DATATYPE_NULL` up to this hold the predefined types.
const SPAN: usize = 0x100;

struct Table {
    shapes: Vec<Option<Shape>>,
    names: Vec<Option<&'static str>>,
}

fn table() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE.get_or_init(build)
}

/// Each predefined type's element size where its data is plain bytes (contiguous, no bool or
/// char values to check: what `c_abi::fast_path` takes), else 0; filled as the table is built.
/// Relaxed, with no partner: an entry is only ever 0 or its final size, and a reader that
/// sees 0 takes the general path, which builds the table.
static PLAIN: [AtomicU8; SPAN] = [const { AtomicU8::new(0) }; SPAN];

/// Each predefined type of plain bytes that is one basic element: its [`Basic`]'s index plus
/// one, else 0; filled as the table is built. Relaxed, as [`PLAIN`].
static BASIC: [AtomicU8; SPAN] = [const { AtomicU8::new(0) }; SPAN];

/// The element size of predefined type `handle` if its data is plain bytes: one load, for the
/// fast paths. `None` for any other handle, and until the table is built (by the first call
/// that asks the table for a predefined type).
#[inline(always)]
pub(crate) fn plain_size(handle: usize) -> Option<usize> {
    let size = PLAIN
        .get(handle.wrapping_sub(MPI_DATATYPE_NULL))?
        .load(Relaxed);
    (size != 0).then_some(size as usize)
}

/// The one basic element predefined type `handle` is, if its data is plain bytes (as for
/// [`plain_size`]): one load, for the one-sided fast paths' atomics.
#[inline(always)]
pub(crate) fn element(handle: usize) -> Option<Basic> {
    let n = BASIC
        .get(handle.wrapping_sub(MPI_DATATYPE_NULL))?
        .load(Relaxed);
    Basic::from_index(n.checked_sub(1)?)
}

/// The predefined type `handle`, if it is one.
pub(crate) fn shape(handle: usize) -> Option<&'static Shape> {
    let i = handle.checked_sub(MPI_DATATYPE_NULL)?;
    table().shapes.get(i)?.as_ref()
}

/// The standard's name of the predefined type `handle`.
pub(crate) fn name(handle: usize) -> Option<&'static str> {
    let i = handle.checked_sub(MPI_DATATYPE_NULL)?;
    *table().names.get(i)?
}

/// One basic element of `size` bytes, aligned to `size` (up to 16).
fn basic(map: TypeMap) -> Shape {
    let size = map.size();
    Shape::predefined(map, size.clamp(1, 16), one(size, size))
}

fn one(size: usize, unit: usize) -> Vec<Run> {
    vec![Run {
        size,
        unit,
        count: 1,
        external: size,
        signed: false,
    }]
}

/// C's `long` (`signed`) or `unsigned long`: 8 bytes here, 4 in external32.
fn long(map: TypeMap, signed: bool) -> Shape {
    let size = map.size();
    let run = Run {
        size,
        unit: size,
        count: 1,
        external: 4,
        signed,
    };
    Shape::predefined(map, size, vec![run])
}

/// Raw data of `size` bytes, aligned to `align` (no reductions: no Rust twin).
fn raw(size: usize, align: usize, unit: usize) -> Shape {
    let blocks: &'static [(isize, usize)] = Box::leak(Box::new([(0, size)]));
    Shape::predefined(TypeMap::primitive(size, blocks), align, one(size, unit))
}

/// A complex number of two `f32` (or `f64`): reducible.
fn complex(double: bool) -> Shape {
    let half = if double { 8 } else { 4 };
    Shape::predefined(TypeMap::complex(double), half, one(2 * half, half))
}

/// The C struct `{ value; index; }` of MPI_MINLOC/MPI_MAXLOC.
fn pair(value: &Shape, index: &Shape) -> Shape {
    use super::shape::Piece;
    let at = index.align as isize;
    let vsize = value.size() as isize;
    let index_at = (vsize + at - 1) / at * at;
    let pieces = [
        Piece {
            disp: 0,
            count: 1,
            old: value,
        },
        Piece {
            disp: index_at,
            count: 1,
            old: index,
        },
    ];
    let mut s = Shape::compose(&pieces, true);
    s = Shape::predefined(s.type_map().clone(), s.align, s.runs.clone());
    s
}

macro_rules! put {
    ($t:ident, $($handle:ident => $shape:expr),* $(,)?) => {
        $( $t.put($handle, stringify!($handle), $shape); )*
    };
}

impl Table {
    fn put(&mut self, handle: usize, name: &'static str, shape: Shape) {
        let map = shape.type_map();
        if map.is_contiguous() && !map.is_restricted() {
            let size = u8::try_from(map.size()).expect("a predefined type's size fits a byte");
            PLAIN[handle - MPI_DATATYPE_NULL].store(size, Relaxed);
            if let Some(Elements::Basic(b)) = map.elements(false).filter(|_| size > 0) {
                if b.size() == usize::from(size) {
                    BASIC[handle - MPI_DATATYPE_NULL].store(b as u8 + 1, Relaxed);
                }
            }
        }
        self.shapes[handle - MPI_DATATYPE_NULL] = Some(shape);
        self.names[handle - MPI_DATATYPE_NULL] = Some(name);
    }
}

fn build() -> Table {
    let mut t = Table {
        shapes: vec![None; SPAN],
        names: vec![None; SPAN],
    };
    let int = basic(map_of::<i32>());
    let long_double = raw(16, 16, 16);
    put!(t,
        MPI_AINT => basic(map_of::<isize>()),
        MPI_COUNT => basic(map_of::<i64>()),
        MPI_OFFSET => basic(map_of::<i64>()),
        MPI_PACKED => basic(map_of::<u8>()),
        MPI_BYTE => basic(map_of::<u8>()),
        MPI_CHAR => basic(map_of::<i8>()),
        MPI_SIGNED_CHAR => basic(map_of::<i8>()),
        MPI_UNSIGNED_CHAR => basic(map_of::<u8>()),
        MPI_WCHAR => basic(map_of::<i32>()),
        MPI_SHORT => basic(map_of::<i16>()),
        MPI_UNSIGNED_SHORT => basic(map_of::<u16>()),
        MPI_INT => int.clone(),
        MPI_UNSIGNED => basic(map_of::<u32>()),
        MPI_LONG => long(map_of::<std::ffi::c_long>(), true),
        MPI_UNSIGNED_LONG => long(map_of::<std::ffi::c_ulong>(), false),
        MPI_LONG_LONG => basic(map_of::<i64>()),
        MPI_UNSIGNED_LONG_LONG => basic(map_of::<u64>()),
        MPI_FLOAT => basic(map_of::<f32>()),
        MPI_DOUBLE => basic(map_of::<f64>()),
        MPI_LONG_DOUBLE => long_double.clone(),
        MPI_C_BOOL => basic(map_of::<bool>()),
        MPI_CXX_BOOL => basic(map_of::<bool>()),
        MPI_INT8_T => basic(map_of::<i8>()),
        MPI_UINT8_T => basic(map_of::<u8>()),
        MPI_INT16_T => basic(map_of::<i16>()),
        MPI_UINT16_T => basic(map_of::<u16>()),
        MPI_INT32_T => basic(map_of::<i32>()),
        MPI_UINT32_T => basic(map_of::<u32>()),
        MPI_INT64_T => basic(map_of::<i64>()),
        MPI_UINT64_T => basic(map_of::<u64>()),
        MPI_C_FLOAT_COMPLEX => complex(false),
        MPI_CXX_FLOAT_COMPLEX => complex(false),
        MPI_C_DOUBLE_COMPLEX => complex(true),
        MPI_CXX_DOUBLE_COMPLEX => complex(true),
        MPI_C_LONG_DOUBLE_COMPLEX => raw(32, 16, 16),
        MPI_CXX_LONG_DOUBLE_COMPLEX => raw(32, 16, 16),
        MPI_FLOAT_INT => pair(&basic(map_of::<f32>()), &int),
        MPI_DOUBLE_INT => pair(&basic(map_of::<f64>()), &int),
        MPI_LONG_INT => pair(&long(map_of::<std::ffi::c_long>(), true), &int),
        MPI_2INT => pair(&int, &int),
        MPI_SHORT_INT => pair(&basic(map_of::<i16>()), &int),
        MPI_LONG_DOUBLE_INT => pair(&long_double, &int),
        // Fortran.
        MPI_INTEGER => basic(map_of::<i32>()),
        MPI_LOGICAL => basic(map_of::<i32>()),
        MPI_REAL => basic(map_of::<f32>()),
        MPI_DOUBLE_PRECISION => basic(map_of::<f64>()),
        MPI_COMPLEX => complex(false),
        MPI_DOUBLE_COMPLEX => complex(true),
        MPI_CHARACTER => basic(map_of::<u8>()),
        MPI_2INTEGER => pair(&int, &int),
        MPI_2REAL => pair(&basic(map_of::<f32>()), &basic(map_of::<f32>())),
        MPI_2DOUBLE_PRECISION => pair(&basic(map_of::<f64>()), &basic(map_of::<f64>())),
        MPI_LOGICAL1 => basic(map_of::<i8>()),
        MPI_LOGICAL2 => basic(map_of::<i16>()),
        MPI_LOGICAL4 => basic(map_of::<i32>()),
        MPI_LOGICAL8 => basic(map_of::<i64>()),
        MPI_LOGICAL16 => basic(map_of::<i128>()),
        MPI_INTEGER1 => basic(map_of::<i8>()),
        MPI_INTEGER2 => basic(map_of::<i16>()),
        MPI_INTEGER4 => basic(map_of::<i32>()),
        MPI_INTEGER8 => basic(map_of::<i64>()),
        MPI_INTEGER16 => basic(map_of::<i128>()),
        MPI_REAL2 => raw(2, 2, 2),
        MPI_REAL4 => basic(map_of::<f32>()),
        MPI_REAL8 => basic(map_of::<f64>()),
        MPI_REAL16 => raw(16, 16, 16),
        MPI_COMPLEX4 => raw(4, 2, 2),
        MPI_COMPLEX8 => complex(false),
        MPI_COMPLEX16 => complex(true),
        MPI_COMPLEX32 => raw(32, 16, 16),
    );
    t
}
