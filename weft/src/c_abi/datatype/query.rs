//! Queries: size, extent, true extent (and their `_x`/`_c` forms), names, the envelope and
//! contents, MPI_Type_match_size, MPI_Type_get_value_index, MPI_Get_address (MPI_Aint_add and MPI_Aint_diff are in `env`).

use super::{decode, predefined, Type};
use crate::c_abi::abi::*;
use crate::c_abi::env::put_int;
use crate::c_abi::errors::{guard, CError};
use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void};
use std::sync::Mutex;

/// Writes `value` through `out`, failing on a null pointer.
fn put<T>(call: &'static str, what: &str, out: *mut T, value: T) -> Result<(), CError> {
    if out.is_null() {
        return Err(CError::new(
            MPI_ERR_ARG,
            call,
            format!("{what} is a null pointer"),
        ));
    }
    // SAFETY: checked non-null; the standard's contract: a pointer to one value.
    unsafe { *out = value };
    Ok(())
}

pub unsafe extern "C" fn type_size(datatype: *mut c_void, size: *mut c_int) -> c_int {
    const CALL: &str = "MPI_Type_size";
    guard(CALL, std::ptr::null_mut(), || {
        let s = decode(CALL, datatype)?.shape().size();
        put(
            CALL,
            "size",
            size,
            c_int::try_from(s).unwrap_or(MPI_UNDEFINED),
        )
    })
}
export!(Type_size, type_size);

fn size_large(call: &'static str, datatype: *mut c_void, size: *mut i64) -> c_int {
    guard(call, std::ptr::null_mut(), || {
        let s = decode(call, datatype)?.shape().size();
        put(call, "size", size, s as i64)
    })
}

pub unsafe extern "C" fn type_size_x(datatype: *mut c_void, size: *mut i64) -> c_int {
    size_large("MPI_Type_size_x", datatype, size)
}
export!(Type_size_x, type_size_x);

pub unsafe extern "C" fn type_size_c(datatype: *mut c_void, size: *mut i64) -> c_int {
    size_large("MPI_Type_size_c", datatype, size)
}
export!(Type_size_c, type_size_c);

/// The (true, when `true_bounds`) lower bound and extent of `datatype`, written as `T`.
fn extent<T: TryFrom<isize>>(
    call: &'static str,
    datatype: *mut c_void,
    lb: *mut T,
    extent: *mut T,
    true_bounds: bool,
) -> c_int {
    guard(call, std::ptr::null_mut(), || {
        let s = decode(call, datatype)?.shape();
        let (l, u) = if true_bounds {
            (s.true_lb, s.true_ub)
        } else {
            (s.lb, s.ub)
        };
        let conv = |v: isize| {
            T::try_from(v).map_err(|_| {
                CError::new(MPI_ERR_TYPE, call, format!("{v} does not fit the output"))
            })
        };
        put(call, "lb", lb, conv(l)?)?;
        put(call, "extent", extent, conv(u - l)?)
    })
}

pub unsafe extern "C" fn type_get_extent(
    datatype: *mut c_void,
    lb: *mut isize,
    ext: *mut isize,
) -> c_int {
    extent("MPI_Type_get_extent", datatype, lb, ext, false)
}
export!(Type_get_extent, type_get_extent);

pub unsafe extern "C" fn type_get_extent_x(
    datatype: *mut c_void,
    lb: *mut i64,
    ext: *mut i64,
) -> c_int {
    extent("MPI_Type_get_extent_x", datatype, lb, ext, false)
}
export!(Type_get_extent_x, type_get_extent_x);

pub unsafe extern "C" fn type_get_extent_c(
    datatype: *mut c_void,
    lb: *mut i64,
    ext: *mut i64,
) -> c_int {
    extent("MPI_Type_get_extent_c", datatype, lb, ext, false)
}
export!(Type_get_extent_c, type_get_extent_c);

pub unsafe extern "C" fn type_get_true_extent(
    datatype: *mut c_void,
    lb: *mut isize,
    ext: *mut isize,
) -> c_int {
    extent("MPI_Type_get_true_extent", datatype, lb, ext, true)
}
export!(Type_get_true_extent, type_get_true_extent);

pub unsafe extern "C" fn type_get_true_extent_x(
    datatype: *mut c_void,
    lb: *mut i64,
    ext: *mut i64,
) -> c_int {
    extent("MPI_Type_get_true_extent_x", datatype, lb, ext, true)
}
export!(Type_get_true_extent_x, type_get_true_extent_x);

pub unsafe extern "C" fn type_get_true_extent_c(
    datatype: *mut c_void,
    lb: *mut i64,
    ext: *mut i64,
) -> c_int {
    extent("MPI_Type_get_true_extent_c", datatype, lb, ext, true)
}
export!(Type_get_true_extent_c, type_get_true_extent_c);

pub unsafe extern "C" fn get_address(location: *const c_void, address: *mut isize) -> c_int {
    const CALL: &str = "MPI_Get_address";
    guard(CALL, std::ptr::null_mut(), || {
        put(CALL, "address", address, location as isize)
    })
}
export!(Get_address, get_address);

/// Names given to predefined types (MPI_Type_set_name on one), by handle.
static RENAMED: Mutex<Option<HashMap<usize, String>>> = Mutex::new(None);

pub unsafe extern "C" fn type_set_name(datatype: *mut c_void, name: *const c_char) -> c_int {
    const CALL: &str = "MPI_Type_set_name";
    guard(CALL, std::ptr::null_mut(), || {
        let t = decode(CALL, datatype)?;
        if name.is_null() {
            return Err(CError::new(
                MPI_ERR_ARG,
                CALL,
                "type_name is a null pointer",
            ));
        }
        // SAFETY: checked non-null; the standard's contract: a NUL-terminated string.
        let s = unsafe { std::ffi::CStr::from_ptr(name) }.to_string_lossy();
        let s: String = s.chars().take(MPI_MAX_OBJECT_NAME as usize - 1).collect();
        match t {
            Type::Derived(t) => *t.name.borrow_mut() = s,
            Type::Predefined(h, _) => {
                let mut r = RENAMED.lock().unwrap_or_else(|e| e.into_inner());
                r.get_or_insert_with(HashMap::new).insert(h, s);
            }
        }
        Ok(())
    })
}
export!(Type_set_name, type_set_name);

pub unsafe extern "C" fn type_get_name(
    datatype: *mut c_void,
    name: *mut c_char,
    len: *mut c_int,
) -> c_int {
    const CALL: &str = "MPI_Type_get_name";
    guard(CALL, std::ptr::null_mut(), || {
        let s = match decode(CALL, datatype) {
            // MPI_DATATYPE_NULL has its name too (as MPI_COMM_NULL has; MPICH answers so).
            Err(_) if datatype as usize == MPI_DATATYPE_NULL => "MPI_DATATYPE_NULL".to_string(),
            Err(e) => return Err(e),
            Ok(Type::Derived(t)) => t.name.borrow().clone(),
            Ok(Type::Predefined(h, _)) => {
                let r = RENAMED.lock().unwrap_or_else(|e| e.into_inner());
                match r.as_ref().and_then(|m| m.get(&h)) {
                    Some(s) => s.clone(),
                    None => predefined::name(h).unwrap_or("").to_string(),
                }
            }
        };
        if name.is_null() {
            return Err(CError::new(
                MPI_ERR_ARG,
                CALL,
                "type_name is a null pointer",
            ));
        }
        let bytes = s.as_bytes();
        // SAFETY: checked non-null; the standard's contract: room for MPI_MAX_OBJECT_NAME
        // characters (the name is shorter, and NUL-terminated here).
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), name.cast::<u8>(), bytes.len());
            *name.add(bytes.len()) = 0;
        }
        put_int(CALL, "resultlen", len, bytes.len() as c_int)
    })
}
export!(Type_get_name, type_get_name);

/// The envelope's four numbers: integers, addresses, large counts, datatypes; the combiner.
fn envelope_of(t: Type) -> ([usize; 4], c_int) {
    match t {
        Type::Predefined(..) => ([0; 4], MPI_COMBINER_NAMED),
        Type::Derived(t) => {
            let e = &t.envelope;
            (
                [e.ints.len(), e.addrs.len(), e.counts.len(), e.types.len()],
                e.combiner,
            )
        }
    }
}

pub unsafe extern "C" fn type_get_envelope(
    datatype: *mut c_void,
    ni: *mut c_int,
    na: *mut c_int,
    nd: *mut c_int,
    combiner: *mut c_int,
) -> c_int {
    const CALL: &str = "MPI_Type_get_envelope";
    guard(CALL, std::ptr::null_mut(), || {
        let ([i, a, c, d], comb) = envelope_of(decode(CALL, datatype)?);
        if c > 0 {
            return Err(CError::new(
                MPI_ERR_TYPE,
                CALL,
                "the datatype was made by a large-count constructor: use MPI_Type_get_envelope_c",
            ));
        }
        put_int(CALL, "num_integers", ni, i as c_int)?;
        put_int(CALL, "num_addresses", na, a as c_int)?;
        put_int(CALL, "num_datatypes", nd, d as c_int)?;
        put_int(CALL, "combiner", combiner, comb)
    })
}
export!(Type_get_envelope, type_get_envelope);

pub unsafe extern "C" fn type_get_envelope_c(
    datatype: *mut c_void,
    ni: *mut i64,
    na: *mut i64,
    nc: *mut i64,
    nd: *mut i64,
    combiner: *mut c_int,
) -> c_int {
    const CALL: &str = "MPI_Type_get_envelope_c";
    guard(CALL, std::ptr::null_mut(), || {
        let ([i, a, c, d], comb) = envelope_of(decode(CALL, datatype)?);
        put(CALL, "num_integers", ni, i as i64)?;
        put(CALL, "num_addresses", na, a as i64)?;
        put(CALL, "num_large_counts", nc, c as i64)?;
        put(CALL, "num_datatypes", nd, d as i64)?;
        put_int(CALL, "combiner", combiner, comb)
    })
}
export!(Type_get_envelope_c, type_get_envelope_c);

/// Copies `from` to the array `to` of room `max` (named `what`).
fn fill<T: Copy>(
    call: &'static str,
    what: &str,
    to: *mut T,
    max: i64,
    from: &[T],
) -> Result<(), CError> {
    if from.is_empty() {
        return Ok(());
    }
    if max < from.len() as i64 {
        return Err(CError::new(
            MPI_ERR_ARG,
            call,
            format!(
                "{what} has room for {max} entries; the datatype has {}",
                from.len()
            ),
        ));
    }
    if to.is_null() {
        return Err(CError::new(
            MPI_ERR_ARG,
            call,
            format!("{what} is a null pointer"),
        ));
    }
    // SAFETY: checked non-null; the standard's contract: room for `max` >= len entries.
    unsafe { std::ptr::copy_nonoverlapping(from.as_ptr(), to, from.len()) };
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn contents(
    call: &'static str,
    datatype: *mut c_void,
    max: [i64; 4],
    ints: *mut c_int,
    addrs: *mut isize,
    counts: *mut i64,
    types: *mut *mut c_void,
) -> c_int {
    guard(call, std::ptr::null_mut(), || {
        let Type::Derived(t) = decode(call, datatype)? else {
            return Err(CError::new(
                MPI_ERR_TYPE,
                call,
                "a predefined datatype has no contents (MPI_COMBINER_NAMED)",
            ));
        };
        let e = &t.envelope;
        fill(call, "array_of_integers", ints, max[0], &e.ints)?;
        fill(call, "array_of_addresses", addrs, max[1], &e.addrs)?;
        fill(call, "array_of_large_counts", counts, max[2], &e.counts)?;
        let handed: Vec<*mut c_void> = e.types.iter().map(|&h| h as *mut c_void).collect();
        fill(call, "array_of_datatypes", types, max[3], &handed)?;
        // Each derived type handed out is a new reference the program frees.
        for &h in &handed {
            if let Type::Derived(_) = decode(call, h)? {
                decode(call, h)?.retain();
            }
        }
        Ok(())
    })
}

pub unsafe extern "C" fn type_get_contents(
    datatype: *mut c_void,
    mi: c_int,
    ma: c_int,
    md: c_int,
    ints: *mut c_int,
    addrs: *mut isize,
    types: *mut *mut c_void,
) -> c_int {
    let max = [mi.into(), ma.into(), 0, md.into()];
    contents(
        "MPI_Type_get_contents",
        datatype,
        max,
        ints,
        addrs,
        std::ptr::null_mut(),
        types,
    )
}
export!(Type_get_contents, type_get_contents);

#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn type_get_contents_c(
    datatype: *mut c_void,
    mi: i64,
    ma: i64,
    mc: i64,
    md: i64,
    ints: *mut c_int,
    addrs: *mut isize,
    counts: *mut i64,
    types: *mut *mut c_void,
) -> c_int {
    contents(
        "MPI_Type_get_contents_c",
        datatype,
        [mi, ma, mc, md],
        ints,
        addrs,
        counts,
        types,
    )
}
export!(Type_get_contents_c, type_get_contents_c);

pub unsafe extern "C" fn type_match_size(
    class: c_int,
    size: c_int,
    datatype: *mut *mut c_void,
) -> c_int {
    const CALL: &str = "MPI_Type_match_size";
    guard(CALL, std::ptr::null_mut(), || {
        let found = match (class, size) {
            (MPI_TYPECLASS_INTEGER, 1) => Some(MPI_INTEGER1),
            (MPI_TYPECLASS_INTEGER, 2) => Some(MPI_INTEGER2),
            (MPI_TYPECLASS_INTEGER, 4) => Some(MPI_INTEGER4),
            (MPI_TYPECLASS_INTEGER, 8) => Some(MPI_INTEGER8),
            (MPI_TYPECLASS_INTEGER, 16) => Some(MPI_INTEGER16),
            (MPI_TYPECLASS_REAL, 2) => Some(MPI_REAL2),
            (MPI_TYPECLASS_REAL, 4) => Some(MPI_REAL4),
            (MPI_TYPECLASS_REAL, 8) => Some(MPI_REAL8),
            (MPI_TYPECLASS_REAL, 16) => Some(MPI_REAL16),
            (MPI_TYPECLASS_COMPLEX, 4) => Some(MPI_COMPLEX4),
            (MPI_TYPECLASS_COMPLEX, 8) => Some(MPI_COMPLEX8),
            (MPI_TYPECLASS_COMPLEX, 16) => Some(MPI_COMPLEX16),
            (MPI_TYPECLASS_COMPLEX, 32) => Some(MPI_COMPLEX32),
            _ => None,
        };
        let Some(h) = found else {
            return Err(CError::new(
                MPI_ERR_ARG,
                CALL,
                format!("no predefined type of class {class} has {size} bytes"),
            ));
        };
        put(CALL, "datatype", datatype, h as *mut c_void)
    })
}
export!(Type_match_size, type_match_size);

pub unsafe extern "C" fn type_get_value_index(
    value: *mut c_void,
    index: *mut c_void,
    pair: *mut *mut c_void,
) -> c_int {
    const CALL: &str = "MPI_Type_get_value_index";
    guard(CALL, std::ptr::null_mut(), || {
        decode(CALL, value)?;
        decode(CALL, index)?;
        let found = match (value as usize, index as usize) {
            (MPI_FLOAT, MPI_INT) => MPI_FLOAT_INT,
            (MPI_DOUBLE, MPI_INT) => MPI_DOUBLE_INT,
            (MPI_LONG, MPI_INT) => MPI_LONG_INT,
            (MPI_INT, MPI_INT) => MPI_2INT,
            (MPI_SHORT, MPI_INT) => MPI_SHORT_INT,
            (MPI_LONG_DOUBLE, MPI_INT) => MPI_LONG_DOUBLE_INT,
            (MPI_REAL, MPI_REAL) => MPI_2REAL,
            (MPI_DOUBLE_PRECISION, MPI_DOUBLE_PRECISION) => MPI_2DOUBLE_PRECISION,
            (MPI_INTEGER, MPI_INTEGER) => MPI_2INTEGER,
            _ => MPI_DATATYPE_NULL,
        };
        put(CALL, "pair_type", pair, found as *mut c_void)
    })
}
export!(Type_get_value_index, type_get_value_index);
