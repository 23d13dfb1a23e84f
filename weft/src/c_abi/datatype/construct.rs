//! The type constructors (MPI 4.1 §5.1.2-5.1.7, 5.1.13): contiguous, vector, hvector,
//! indexed, hindexed, indexed_block, hindexed_block, struct, resized, dup, subarray, darray,
//! the Fortran 90 parameterized types,
//! and their large-count `_c` forms. Each checks its arguments, builds the new [`Shape`] from
//! pieces of the old ones, and records its envelope.

use super::shape::{Piece, Shape};
use super::{decode, hand_out, Envelope, Type};
use crate::c_abi::abi::*;
use crate::c_abi::errors::{guard, CError};
use std::ffi::{c_int, c_void};

type Out = *mut *mut c_void;

/// `n` values at `ptr` (an array argument named `what`). Only the constructors' C entry
/// points call it, with the array arguments the program passed them.
fn array<'a, T: Copy>(
    call: &'static str,
    what: &str,
    ptr: *const T,
    n: usize,
) -> Result<&'a [T], CError> {
    // SAFETY: the standard's contract for the constructors' array arguments: `n` entries.
    unsafe { crate::c_abi::coll_v::array(call, what, ptr, n) }
}

/// A count argument, checked not negative.
fn nonneg(call: &'static str, what: &str, v: i64) -> Result<usize, CError> {
    usize::try_from(v).map_err(|_| {
        CError::new(
            MPI_ERR_COUNT,
            call,
            format!("{what} is {v}; it must not be negative"),
        )
    })
}

/// The old type, with its extent (constructors that step by it).
fn old(call: &'static str, handle: *mut c_void) -> Result<Type, CError> {
    decode(call, handle)
}

/// The envelope of a constructor: `ints`, `addrs` and `types` as the standard lists them,
/// or, for a `_c` form (`large`), every count and address among the large counts.
fn envelope(
    combiner: c_int,
    large: bool,
    ints: Vec<i64>,
    addrs: Vec<isize>,
    types: &[Type],
) -> Envelope {
    let types = types.iter().map(|t| t.retain()).collect();
    if large {
        let counts = ints
            .into_iter()
            .chain(addrs.into_iter().map(|a| a as i64))
            .collect();
        Envelope {
            combiner,
            counts,
            types,
            ..Envelope::default()
        }
    } else {
        Envelope {
            combiner,
            ints: ints.into_iter().map(|i| i as c_int).collect(),
            addrs,
            types,
            ..Envelope::default()
        }
    }
}

/// The most blocks (and runs of basic elements) a type may have: its type map is
/// flattened, 16 bytes a block.
const MAX_BLOCKS: usize = 1 << 26;

/// The type made of `pieces`, unless its flattened map would be too large.
fn compose(call: &'static str, pieces: &[Piece<'_>], pad: bool) -> Result<Shape, CError> {
    let n = Shape::estimate(pieces);
    if n > MAX_BLOCKS {
        return Err(too_large(call, n));
    }
    Ok(Shape::compose(pieces, pad))
}

#[cold]
fn too_large(call: &'static str, n: usize) -> CError {
    CError::new(
        MPI_ERR_TYPE,
        call,
        format!(
            "the new type would have about {n} separate blocks: Weft flattens type maps, and \
             supports up to {MAX_BLOCKS}"
        ),
    )
}

/// Blocks of `(displacement in bytes, block length)` of `old`.
fn blocks(call: &'static str, shape: &Shape, list: &[(isize, i64)]) -> Result<Shape, CError> {
    let mut pieces = Vec::with_capacity(list.len());
    for &(disp, bl) in list {
        let count = nonneg(call, "a block length", bl)?;
        pieces.push(Piece {
            disp,
            count,
            old: shape,
        });
    }
    compose(call, &pieces, false)
}

fn contiguous(
    call: &'static str,
    count: i64,
    oldtype: *mut c_void,
    out: Out,
    large: bool,
) -> c_int {
    guard(call, std::ptr::null_mut(), || {
        let n = nonneg(call, "count", count)?;
        let o = old(call, oldtype)?;
        let shape = compose(
            call,
            &[Piece {
                disp: 0,
                count: n,
                old: o.shape(),
            }],
            false,
        )?;
        let env = envelope(MPI_COMBINER_CONTIGUOUS, large, vec![count], vec![], &[o]);
        hand_out(call, out, shape, env)
    })
}

pub unsafe extern "C" fn type_contiguous(count: c_int, oldtype: *mut c_void, out: Out) -> c_int {
    contiguous("MPI_Type_contiguous", count.into(), oldtype, out, false)
}
export!(Type_contiguous, type_contiguous);

pub unsafe extern "C" fn type_contiguous_c(count: i64, oldtype: *mut c_void, out: Out) -> c_int {
    contiguous("MPI_Type_contiguous_c", count, oldtype, out, true)
}
export!(Type_contiguous_c, type_contiguous_c);

/// Vector (`stride` in elements of the old type) and hvector (`bytes`: in bytes).
#[allow(clippy::too_many_arguments)]
fn vector(
    call: &'static str,
    count: i64,
    bl: i64,
    stride: i64,
    bytes: bool,
    oldtype: *mut c_void,
    out: Out,
    large: bool,
) -> c_int {
    guard(call, std::ptr::null_mut(), || {
        let n = nonneg(call, "count", count)?;
        nonneg(call, "blocklength", bl)?;
        let o = old(call, oldtype)?;
        if n > MAX_BLOCKS && bl > 0 {
            // A block per copy at least: refused before listing them.
            return Err(too_large(call, n));
        }
        let step = if bytes {
            stride as isize
        } else {
            stride as isize * o.shape().extent()
        };
        let list: Vec<(isize, i64)> = (0..n as isize).map(|i| (i * step, bl)).collect();
        let shape = blocks(call, o.shape(), &list)?;
        let env = if bytes {
            envelope(
                MPI_COMBINER_HVECTOR,
                large,
                vec![count, bl],
                vec![stride as isize],
                &[o],
            )
        } else {
            envelope(
                MPI_COMBINER_VECTOR,
                large,
                vec![count, bl, stride],
                vec![],
                &[o],
            )
        };
        hand_out(call, out, shape, env)
    })
}

pub unsafe extern "C" fn type_vector(
    count: c_int,
    bl: c_int,
    stride: c_int,
    oldtype: *mut c_void,
    out: Out,
) -> c_int {
    vector(
        "MPI_Type_vector",
        count.into(),
        bl.into(),
        stride.into(),
        false,
        oldtype,
        out,
        false,
    )
}
export!(Type_vector, type_vector);

pub unsafe extern "C" fn type_vector_c(
    count: i64,
    bl: i64,
    stride: i64,
    oldtype: *mut c_void,
    out: Out,
) -> c_int {
    vector(
        "MPI_Type_vector_c",
        count,
        bl,
        stride,
        false,
        oldtype,
        out,
        true,
    )
}
export!(Type_vector_c, type_vector_c);

pub unsafe extern "C" fn type_create_hvector(
    count: c_int,
    bl: c_int,
    stride: isize,
    oldtype: *mut c_void,
    out: Out,
) -> c_int {
    let call = "MPI_Type_create_hvector";
    vector(
        call,
        count.into(),
        bl.into(),
        stride as i64,
        true,
        oldtype,
        out,
        false,
    )
}
export!(Type_create_hvector, type_create_hvector);

pub unsafe extern "C" fn type_create_hvector_c(
    count: i64,
    bl: i64,
    stride: i64,
    oldtype: *mut c_void,
    out: Out,
) -> c_int {
    vector(
        "MPI_Type_create_hvector_c",
        count,
        bl,
        stride,
        true,
        oldtype,
        out,
        true,
    )
}
export!(Type_create_hvector_c, type_create_hvector_c);

/// Indexed and hindexed, blocked or not: `bls` (one per block, or one for all) and `disps`
/// (in elements of the old type, or in bytes when `bytes`).
#[allow(clippy::too_many_arguments)]
fn indexed(
    call: &'static str,
    combiner: c_int,
    count: i64,
    bls: &dyn Fn(usize) -> Result<Vec<i64>, CError>,
    disps: &dyn Fn(usize) -> Result<Vec<i64>, CError>,
    bytes: bool,
    oldtype: *mut c_void,
    out: Out,
    large: bool,
) -> c_int {
    guard(call, std::ptr::null_mut(), || {
        let n = nonneg(call, "count", count)?;
        let bl = bls(n)?;
        let d = disps(n)?;
        let o = old(call, oldtype)?;
        let ext = o.shape().extent();
        let list: Vec<(isize, i64)> = (0..n)
            .map(|i| {
                let b = if bl.len() == 1 { bl[0] } else { bl[i] };
                let at = if bytes {
                    d[i] as isize
                } else {
                    d[i] as isize * ext
                };
                (at, b)
            })
            .collect();
        let shape = blocks(call, o.shape(), &list)?;
        let mut ints = vec![count];
        ints.extend(&bl);
        let env = if bytes || large {
            envelope(
                combiner,
                large,
                ints,
                d.iter().map(|&x| x as isize).collect(),
                &[o],
            )
        } else {
            ints.extend(&d);
            envelope(combiner, large, ints, vec![], &[o])
        };
        hand_out(call, out, shape, env)
    })
}

/// `n` values at `p`, widened.
fn wide<T: Copy + Into<i64>>(
    call: &'static str,
    what: &'static str,
    p: *const T,
) -> impl Fn(usize) -> Result<Vec<i64>, CError> {
    move |n| Ok(array(call, what, p, n)?.iter().map(|&x| x.into()).collect())
}

fn addrs(
    call: &'static str,
    what: &'static str,
    p: *const isize,
) -> impl Fn(usize) -> Result<Vec<i64>, CError> {
    move |n| Ok(array(call, what, p, n)?.iter().map(|&x| x as i64).collect())
}

fn same<T: Copy + Into<i64>>(v: T) -> impl Fn(usize) -> Result<Vec<i64>, CError> {
    move |_| Ok(vec![v.into()])
}

pub unsafe extern "C" fn type_indexed(
    count: c_int,
    bls: *const c_int,
    disps: *const c_int,
    oldtype: *mut c_void,
    out: Out,
) -> c_int {
    const CALL: &str = "MPI_Type_indexed";
    let (b, d) = (
        wide(CALL, "array_of_blocklengths", bls),
        wide(CALL, "array_of_displacements", disps),
    );
    indexed(
        CALL,
        MPI_COMBINER_INDEXED,
        count.into(),
        &b,
        &d,
        false,
        oldtype,
        out,
        false,
    )
}
export!(Type_indexed, type_indexed);

pub unsafe extern "C" fn type_indexed_c(
    count: i64,
    bls: *const i64,
    disps: *const i64,
    oldtype: *mut c_void,
    out: Out,
) -> c_int {
    const CALL: &str = "MPI_Type_indexed_c";
    let (b, d) = (
        wide(CALL, "array_of_blocklengths", bls),
        wide(CALL, "array_of_displacements", disps),
    );
    indexed(
        CALL,
        MPI_COMBINER_INDEXED,
        count,
        &b,
        &d,
        false,
        oldtype,
        out,
        true,
    )
}
export!(Type_indexed_c, type_indexed_c);

pub unsafe extern "C" fn type_create_hindexed(
    count: c_int,
    bls: *const c_int,
    disps: *const isize,
    oldtype: *mut c_void,
    out: Out,
) -> c_int {
    const CALL: &str = "MPI_Type_create_hindexed";
    let (b, d) = (
        wide(CALL, "array_of_blocklengths", bls),
        addrs(CALL, "array_of_displacements", disps),
    );
    indexed(
        CALL,
        MPI_COMBINER_HINDEXED,
        count.into(),
        &b,
        &d,
        true,
        oldtype,
        out,
        false,
    )
}
export!(Type_create_hindexed, type_create_hindexed);

pub unsafe extern "C" fn type_create_hindexed_c(
    count: i64,
    bls: *const i64,
    disps: *const i64,
    oldtype: *mut c_void,
    out: Out,
) -> c_int {
    const CALL: &str = "MPI_Type_create_hindexed_c";
    let (b, d) = (
        wide(CALL, "array_of_blocklengths", bls),
        wide(CALL, "array_of_displacements", disps),
    );
    indexed(
        CALL,
        MPI_COMBINER_HINDEXED,
        count,
        &b,
        &d,
        true,
        oldtype,
        out,
        true,
    )
}
export!(Type_create_hindexed_c, type_create_hindexed_c);

pub unsafe extern "C" fn type_create_indexed_block(
    count: c_int,
    bl: c_int,
    disps: *const c_int,
    oldtype: *mut c_void,
    out: Out,
) -> c_int {
    const CALL: &str = "MPI_Type_create_indexed_block";
    let d = wide(CALL, "array_of_displacements", disps);
    indexed(
        CALL,
        MPI_COMBINER_INDEXED_BLOCK,
        count.into(),
        &same(bl),
        &d,
        false,
        oldtype,
        out,
        false,
    )
}
export!(Type_create_indexed_block, type_create_indexed_block);

pub unsafe extern "C" fn type_create_indexed_block_c(
    count: i64,
    bl: i64,
    disps: *const i64,
    oldtype: *mut c_void,
    out: Out,
) -> c_int {
    const CALL: &str = "MPI_Type_create_indexed_block_c";
    let d = wide(CALL, "array_of_displacements", disps);
    indexed(
        CALL,
        MPI_COMBINER_INDEXED_BLOCK,
        count,
        &same(bl),
        &d,
        false,
        oldtype,
        out,
        true,
    )
}
export!(Type_create_indexed_block_c, type_create_indexed_block_c);

pub unsafe extern "C" fn type_create_hindexed_block(
    count: c_int,
    bl: c_int,
    disps: *const isize,
    oldtype: *mut c_void,
    out: Out,
) -> c_int {
    const CALL: &str = "MPI_Type_create_hindexed_block";
    let d = addrs(CALL, "array_of_displacements", disps);
    indexed(
        CALL,
        MPI_COMBINER_HINDEXED_BLOCK,
        count.into(),
        &same(bl),
        &d,
        true,
        oldtype,
        out,
        false,
    )
}
export!(Type_create_hindexed_block, type_create_hindexed_block);

pub unsafe extern "C" fn type_create_hindexed_block_c(
    count: i64,
    bl: i64,
    disps: *const i64,
    oldtype: *mut c_void,
    out: Out,
) -> c_int {
    const CALL: &str = "MPI_Type_create_hindexed_block_c";
    let d = wide(CALL, "array_of_displacements", disps);
    indexed(
        CALL,
        MPI_COMBINER_HINDEXED_BLOCK,
        count,
        &same(bl),
        &d,
        true,
        oldtype,
        out,
        true,
    )
}
export!(Type_create_hindexed_block_c, type_create_hindexed_block_c);

fn create_struct(
    call: &'static str,
    count: i64,
    bls: &dyn Fn(usize) -> Result<Vec<i64>, CError>,
    disps: &dyn Fn(usize) -> Result<Vec<i64>, CError>,
    types: *const *mut c_void,
    out: Out,
    large: bool,
) -> c_int {
    guard(call, std::ptr::null_mut(), || {
        let n = nonneg(call, "count", count)?;
        let bl = bls(n)?;
        let d = disps(n)?;
        let handles = array(call, "array_of_types", types, n)?;
        let olds = handles
            .iter()
            .map(|&h| decode(call, h))
            .collect::<Result<Vec<_>, _>>()?;
        let mut pieces = Vec::with_capacity(n);
        for i in 0..n {
            let count = nonneg(call, "a block length", bl[i])?;
            pieces.push(Piece {
                disp: d[i] as isize,
                count,
                old: olds[i].shape(),
            });
        }
        let shape = compose(call, &pieces, true)?;
        let mut ints = vec![count];
        ints.extend(&bl);
        let env = envelope(
            MPI_COMBINER_STRUCT,
            large,
            ints,
            d.iter().map(|&x| x as isize).collect(),
            &olds,
        );
        hand_out(call, out, shape, env)
    })
}

pub unsafe extern "C" fn type_create_struct(
    count: c_int,
    bls: *const c_int,
    disps: *const isize,
    types: *const *mut c_void,
    out: Out,
) -> c_int {
    const CALL: &str = "MPI_Type_create_struct";
    let (b, d) = (
        wide(CALL, "array_of_blocklengths", bls),
        addrs(CALL, "array_of_displacements", disps),
    );
    create_struct(CALL, count.into(), &b, &d, types, out, false)
}
export!(Type_create_struct, type_create_struct);

pub unsafe extern "C" fn type_create_struct_c(
    count: i64,
    bls: *const i64,
    disps: *const i64,
    types: *const *mut c_void,
    out: Out,
) -> c_int {
    const CALL: &str = "MPI_Type_create_struct_c";
    let (b, d) = (
        wide(CALL, "array_of_blocklengths", bls),
        wide(CALL, "array_of_displacements", disps),
    );
    create_struct(CALL, count, &b, &d, types, out, true)
}
export!(Type_create_struct_c, type_create_struct_c);

fn resized(
    call: &'static str,
    oldtype: *mut c_void,
    lb: isize,
    extent: isize,
    out: Out,
    large: bool,
) -> c_int {
    guard(call, std::ptr::null_mut(), || {
        let o = old(call, oldtype)?;
        let shape = o.shape().resized(lb, extent);
        let env = envelope(MPI_COMBINER_RESIZED, large, vec![], vec![lb, extent], &[o]);
        hand_out(call, out, shape, env)
    })
}

pub unsafe extern "C" fn type_create_resized(
    oldtype: *mut c_void,
    lb: isize,
    extent: isize,
    out: Out,
) -> c_int {
    resized("MPI_Type_create_resized", oldtype, lb, extent, out, false)
}
export!(Type_create_resized, type_create_resized);

pub unsafe extern "C" fn type_create_resized_c(
    oldtype: *mut c_void,
    lb: i64,
    extent: i64,
    out: Out,
) -> c_int {
    resized(
        "MPI_Type_create_resized_c",
        oldtype,
        lb as isize,
        extent as isize,
        out,
        true,
    )
}
export!(Type_create_resized_c, type_create_resized_c);

pub unsafe extern "C" fn type_dup(oldtype: *mut c_void, out: Out) -> c_int {
    const CALL: &str = "MPI_Type_dup";
    guard(CALL, std::ptr::null_mut(), || {
        let o = old(CALL, oldtype)?;
        let shape = o.shape().to_user();
        let env = envelope(MPI_COMBINER_DUP, false, vec![], vec![], &[o]);
        hand_out(CALL, out, shape, env)?;
        // SAFETY: `hand_out` wrote a live handle there.
        let new = unsafe { *out };
        if let Ok(Type::Derived(t)) = decode(CALL, new) {
            let committed = match o {
                Type::Derived(old) => old.committed.get(),
                Type::Predefined(..) => true,
            };
            t.committed.set(committed);
        }
        super::attrs::copy_all(CALL, oldtype, new)
    })
}
export!(Type_dup, type_dup);

/// The global indices one process holds along one dimension, as (first, how many) runs.
type Runs = Vec<(i64, i64)>;

/// Builds a type over an `ndims`-dimensional array of `old` of global `sizes` (C order:
/// the last dimension varies fastest) holding the indices `held[d]` along each dimension;
/// its bounds are those of the whole array.
fn array_type(
    call: &'static str,
    sizes: &[i64],
    held: &[Runs],
    old: &Shape,
) -> Result<Shape, CError> {
    let ext = old.extent();
    let nd = sizes.len();
    // The stride of each dimension, in bytes.
    let mut strides = vec![ext; nd];
    for d in (0..nd.saturating_sub(1)).rev() {
        strides[d] = strides[d + 1] * sizes[d + 1] as isize;
    }
    let mut inner: Shape = old.clone();
    for d in (0..nd).rev() {
        let mut pieces = vec![];
        for &(first, n) in &held[d] {
            if d == nd - 1 {
                pieces.push(Piece {
                    disp: first as isize * ext,
                    count: n as usize,
                    old: &inner,
                });
            } else {
                for i in first..first + n {
                    pieces.push(Piece {
                        disp: i as isize * strides[d],
                        count: 1,
                        old: &inner,
                    });
                }
            }
        }
        inner = compose(call, &pieces, false)?;
    }
    let total: isize = sizes.iter().map(|&s| s as isize).product::<isize>() * ext;
    let lb = old.lb;
    let whole = compose(
        call,
        &[Piece {
            disp: 0,
            count: 1,
            old: &inner,
        }],
        false,
    )?;
    Ok(whole.resized(lb, total))
}

fn check_order(call: &'static str, order: c_int) -> Result<bool, CError> {
    match order {
        MPI_ORDER_C => Ok(false),
        MPI_ORDER_FORTRAN => Ok(true),
        _ => Err(CError::new(
            MPI_ERR_ARG,
            call,
            format!("order {order} is neither MPI_ORDER_C nor MPI_ORDER_FORTRAN"),
        )),
    }
}

/// MPI_Type_create_subarray and its `_c` form (`large`: the sizes, subsizes and starts go
/// among the envelope's large counts).
#[allow(clippy::too_many_arguments)]
fn subarray<T: Copy + Into<i64>>(
    call: &'static str,
    ndims: c_int,
    sizes: *const T,
    subsizes: *const T,
    starts: *const T,
    order: c_int,
    oldtype: *mut c_void,
    out: Out,
    large: bool,
) -> c_int {
    guard(call, std::ptr::null_mut(), || {
        let nd = nonneg(call, "ndims", ndims.into())?;
        if nd == 0 {
            return Err(CError::new(
                MPI_ERR_ARG,
                call,
                "ndims is 0; it must be positive",
            ));
        }
        let fortran = check_order(call, order)?;
        let wide = |a: &[T]| a.iter().map(|&x| x.into()).collect::<Vec<i64>>();
        let sz = wide(array(call, "array_of_sizes", sizes, nd)?);
        let sub = wide(array(call, "array_of_subsizes", subsizes, nd)?);
        let st = wide(array(call, "array_of_starts", starts, nd)?);
        for d in 0..nd {
            if sz[d] <= 0 || sub[d] <= 0 || sub[d] > sz[d] || st[d] < 0 || st[d] > sz[d] - sub[d] {
                return Err(CError::new(
                    MPI_ERR_ARG,
                    call,
                    format!(
                        "dimension {d}: size {}, subsize {}, start {} (need 0 < subsize <= size, \
                         0 <= start <= size - subsize)",
                        sz[d], sub[d], st[d]
                    ),
                ));
            }
        }
        let o = old(call, oldtype)?;
        let mut dims: Vec<(i64, Runs)> = (0..nd).map(|d| (sz[d], vec![(st[d], sub[d])])).collect();
        if fortran {
            dims.reverse();
        }
        let (gs, held): (Vec<i64>, Vec<Runs>) = dims.into_iter().unzip();
        let shape = array_type(call, &gs, &held, o.shape())?;
        let arrays = [sz, sub, st].concat();
        let env = if large {
            let mut e = envelope(MPI_COMBINER_SUBARRAY, true, arrays, vec![], &[o]);
            e.ints = vec![ndims, order];
            e
        } else {
            let mut ints: Vec<i64> = vec![ndims.into()];
            ints.extend(arrays);
            ints.push(order.into());
            envelope(MPI_COMBINER_SUBARRAY, false, ints, vec![], &[o])
        };
        hand_out(call, out, shape, env)
    })
}

pub unsafe extern "C" fn type_create_subarray(
    ndims: c_int,
    sizes: *const c_int,
    subsizes: *const c_int,
    starts: *const c_int,
    order: c_int,
    oldtype: *mut c_void,
    out: Out,
) -> c_int {
    let call = "MPI_Type_create_subarray";
    subarray(
        call, ndims, sizes, subsizes, starts, order, oldtype, out, false,
    )
}
export!(Type_create_subarray, type_create_subarray);

pub unsafe extern "C" fn type_create_subarray_c(
    ndims: c_int,
    sizes: *const i64,
    subsizes: *const i64,
    starts: *const i64,
    order: c_int,
    oldtype: *mut c_void,
    out: Out,
) -> c_int {
    let call = "MPI_Type_create_subarray_c";
    subarray(
        call, ndims, sizes, subsizes, starts, order, oldtype, out, true,
    )
}
export!(Type_create_subarray_c, type_create_subarray_c);

/// The indices process coordinate `r` of `p` holds of a dimension of `g` elements
/// distributed as `distrib` with argument `darg` (MPI 4.1 §5.1.13).
fn distribute(
    call: &'static str,
    g: i64,
    distrib: c_int,
    darg: c_int,
    p: i64,
    r: i64,
) -> Result<Runs, CError> {
    let dflt = darg == MPI_DISTRIBUTE_DFLT_DARG;
    match distrib {
        MPI_DISTRIBUTE_NONE => Ok(vec![(0, g)]),
        MPI_DISTRIBUTE_BLOCK => {
            let b = if dflt {
                (g + p - 1) / p
            } else {
                i64::from(darg)
            };
            if b <= 0 || b * p < g {
                return Err(CError::new(
                    MPI_ERR_ARG,
                    call,
                    format!("block size {b} over {p} processes does not cover {g} elements"),
                ));
            }
            let first = r * b;
            let n = (g - first).clamp(0, b);
            Ok(if n > 0 { vec![(first, n)] } else { vec![] })
        }
        MPI_DISTRIBUTE_CYCLIC => {
            let b = if dflt { 1 } else { i64::from(darg) };
            if b <= 0 {
                return Err(CError::new(
                    MPI_ERR_ARG,
                    call,
                    format!("cyclic block size {b} is not positive"),
                ));
            }
            let mut runs = vec![];
            let mut first = r * b;
            while first < g {
                runs.push((first, b.min(g - first)));
                first += p * b;
            }
            Ok(runs)
        }
        _ => Err(CError::new(
            MPI_ERR_ARG,
            call,
            format!("distribution {distrib} is not one of MPI_DISTRIBUTE_*"),
        )),
    }
}

#[allow(clippy::too_many_arguments)]
fn darray<G: Copy + Into<i64>>(
    call: &'static str,
    size: c_int,
    rank: c_int,
    ndims: c_int,
    gsizes: *const G,
    distribs: *const c_int,
    dargs: *const c_int,
    psizes: *const c_int,
    order: c_int,
    oldtype: *mut c_void,
    out: Out,
    large: bool,
) -> c_int {
    guard(call, std::ptr::null_mut(), || {
        let nd = nonneg(call, "ndims", ndims.into())?;
        let fortran = check_order(call, order)?;
        if size <= 0 || rank < 0 || rank >= size {
            return Err(CError::new(
                MPI_ERR_ARG,
                call,
                format!("rank {rank} is not in a group of size {size}"),
            ));
        }
        let gs: Vec<i64> = array(call, "array_of_gsizes", gsizes, nd)?
            .iter()
            .map(|&g| g.into())
            .collect();
        let ds = array(call, "array_of_distribs", distribs, nd)?;
        let da = array(call, "array_of_dargs", dargs, nd)?;
        let ps = array(call, "array_of_psizes", psizes, nd)?;
        if ps.iter().map(|&p| i64::from(p)).product::<i64>() != i64::from(size)
            || ps.iter().any(|&p| p <= 0)
        {
            return Err(CError::new(
                MPI_ERR_ARG,
                call,
                format!("the process grid {ps:?} does not hold {size} processes"),
            ));
        }
        // The process's coordinates: row-major over the grid, whatever the order.
        let mut coords = vec![0i64; nd];
        let mut rest = i64::from(rank);
        for d in (0..nd).rev() {
            coords[d] = rest % i64::from(ps[d]);
            rest /= i64::from(ps[d]);
        }
        let o = old(call, oldtype)?;
        let mut dims = Vec::with_capacity(nd);
        for d in 0..nd {
            let held = distribute(call, gs[d], ds[d], da[d], ps[d].into(), coords[d])?;
            dims.push((gs[d], held));
        }
        if fortran {
            dims.reverse();
        }
        let (g, held): (Vec<i64>, Vec<Runs>) = dims.into_iter().unzip();
        let shape = array_type(call, &g, &held, o.shape())?;
        let mut ints: Vec<i64> = vec![size.into(), rank.into(), ndims.into()];
        if !large {
            ints.extend(&gs);
        }
        for a in [ds, da, ps] {
            ints.extend(a.iter().map(|&x| i64::from(x)));
        }
        ints.push(order.into());
        let mut env = envelope(MPI_COMBINER_DARRAY, false, ints, vec![], &[o]);
        if large {
            env.counts = gs;
        }
        hand_out(call, out, shape, env)
    })
}
pub unsafe extern "C" fn type_create_darray(
    size: c_int,
    rank: c_int,
    ndims: c_int,
    gsizes: *const c_int,
    distribs: *const c_int,
    dargs: *const c_int,
    psizes: *const c_int,
    order: c_int,
    oldtype: *mut c_void,
    out: Out,
) -> c_int {
    let call = "MPI_Type_create_darray";
    darray(
        call, size, rank, ndims, gsizes, distribs, dargs, psizes, order, oldtype, out, false,
    )
}
export!(Type_create_darray, type_create_darray);

pub unsafe extern "C" fn type_create_darray_c(
    size: c_int,
    rank: c_int,
    ndims: c_int,
    gsizes: *const i64,
    distribs: *const c_int,
    dargs: *const c_int,
    psizes: *const c_int,
    order: c_int,
    oldtype: *mut c_void,
    out: Out,
) -> c_int {
    let call = "MPI_Type_create_darray_c";
    darray(
        call, size, rank, ndims, gsizes, distribs, dargs, psizes, order, oldtype, out, true,
    )
}
export!(Type_create_darray_c, type_create_darray_c);

/// The Fortran 90 parameterized types (MPI 4.1 §19.1.9): the sized predefined type that
/// holds the precision and range asked for, as a committed type whose envelope is
/// `MPI_COMBINER_F90_*` with the arguments. One per (kind, arguments), made at the first
/// call and kept for the program (the standard forbids freeing them).
fn f90(call: &'static str, combiner: c_int, args: Vec<c_int>, out: Out) -> c_int {
    use std::collections::BTreeMap;
    use std::sync::Mutex;
    /// The types made, by (combiner, arguments).
    type Made = BTreeMap<(c_int, Vec<c_int>), usize>;
    static MADE: Mutex<Made> = Mutex::new(BTreeMap::new());
    guard(call, std::ptr::null_mut(), || {
        let undefined = |v: c_int| v == MPI_UNDEFINED;
        let within = |v: c_int, max: c_int| undefined(v) || v <= max;
        let basic = match (combiner, &args[..]) {
            (MPI_COMBINER_F90_INTEGER, &[r]) => [
                (2, MPI_INTEGER1),
                (4, MPI_INTEGER2),
                (9, MPI_INTEGER4),
                (18, MPI_INTEGER8),
                (38, MPI_INTEGER16),
            ]
            .iter()
            .find(|&&(max, _)| within(r, max))
            .map(|&(_, t)| t),
            (_, &[p, r]) => {
                let complex = combiner == MPI_COMBINER_F90_COMPLEX;
                [
                    (6, 37, MPI_REAL4, MPI_COMPLEX8),
                    (15, 307, MPI_REAL8, MPI_COMPLEX16),
                    (33, 4931, MPI_REAL16, MPI_COMPLEX32),
                ]
                .iter()
                .find(|&&(pm, rm, _, _)| within(p, pm) && within(r, rm))
                .map(|&(_, _, real, cx)| if complex { cx } else { real })
            }
            _ => None,
        };
        let Some(basic) = basic else {
            return Err(CError::new(
                MPI_ERR_ARG,
                call,
                format!("no predefined type has the precision and range {args:?}"),
            ));
        };
        if out.is_null() {
            return Err(CError::new(MPI_ERR_ARG, call, "newtype is a null pointer"));
        }
        let mut made = MADE.lock().unwrap_or_else(|e| e.into_inner());
        let key = (combiner, args.clone());
        if let Some(&h) = made.get(&key) {
            if matches!(decode(call, h as *mut c_void), Ok(Type::Derived(_))) {
                // SAFETY: checked non-null; the standard's contract: a handle slot.
                unsafe { *out = h as *mut c_void };
                return Ok(());
            }
        }
        let shape = decode(call, basic as *mut c_void)?.shape().to_user();
        let env = Envelope {
            combiner,
            ints: args,
            ..Envelope::default()
        };
        hand_out(call, out, shape, env)?;
        // SAFETY: `hand_out` wrote a live handle there.
        let h = unsafe { *out };
        if let Ok(Type::Derived(t)) = decode(call, h) {
            t.committed.set(true);
            // Kept for the program: a reference the program never releases.
            Type::Derived(t).retain();
        }
        made.insert(key, h as usize);
        Ok(())
    })
}

pub unsafe extern "C" fn type_create_f90_real(p: c_int, r: c_int, out: Out) -> c_int {
    f90(
        "MPI_Type_create_f90_real",
        MPI_COMBINER_F90_REAL,
        vec![p, r],
        out,
    )
}
export!(Type_create_f90_real, type_create_f90_real);

pub unsafe extern "C" fn type_create_f90_complex(p: c_int, r: c_int, out: Out) -> c_int {
    f90(
        "MPI_Type_create_f90_complex",
        MPI_COMBINER_F90_COMPLEX,
        vec![p, r],
        out,
    )
}
export!(Type_create_f90_complex, type_create_f90_complex);

pub unsafe extern "C" fn type_create_f90_integer(r: c_int, out: Out) -> c_int {
    f90(
        "MPI_Type_create_f90_integer",
        MPI_COMBINER_F90_INTEGER,
        vec![r],
        out,
    )
}
export!(Type_create_f90_integer, type_create_f90_integer);
