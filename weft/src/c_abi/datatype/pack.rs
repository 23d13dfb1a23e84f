//! MPI_Pack, MPI_Unpack and MPI_Pack_size (the native representation: the type map's
//! blocks back to back), and their "external32" forms: every basic value big-endian, C's
//! `long` in 4 bytes as the standard's table says. `long double` keeps the x87 format (16
//! bytes, byte-swapped) where the standard says IEEE quad.

use super::shape::Shape;
use crate::c_abi::abi::*;
use crate::c_abi::errors::{guard, CError};
use crate::c_abi::handles;
use std::ffi::{c_char, c_int, c_void};

/// Checks a count argument.
fn count(call: &'static str, what: &str, n: i64) -> Result<usize, CError> {
    usize::try_from(n).map_err(|_| {
        CError::new(
            MPI_ERR_COUNT,
            call,
            format!("{what} is {n}; it must not be negative"),
        )
    })
}

/// Reads the position at `p`.
fn position(call: &'static str, p: *const i64) -> Result<usize, CError> {
    if p.is_null() {
        return Err(CError::new(MPI_ERR_ARG, call, "position is a null pointer"));
    }
    // SAFETY: checked non-null; the standard's contract.
    let v = unsafe { *p };
    usize::try_from(v)
        .map_err(|_| CError::new(MPI_ERR_ARG, call, format!("the position {v} is negative")))
}

/// `native` (whole elements of `shape`, packed) in external32: every basic value big-endian,
/// C's `long` narrowed to 4 bytes.
fn to_external(shape: &Shape, native: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(native.len());
    let mut at = 0;
    while at < native.len() && !shape.runs.is_empty() {
        for r in &shape.runs {
            for _ in 0..r.count {
                let value = &native[at..at + r.size];
                if r.external < r.size {
                    // Little-endian hosts: the low bytes come first.
                    out.extend(value[..r.external].iter().rev());
                } else {
                    for v in value.chunks(r.unit.max(1)) {
                        out.extend(v.iter().rev());
                    }
                }
                at += r.size;
            }
        }
    }
    out
}

/// `n` elements of `shape` in external32 at the start of `ext`, in the native packed form.
fn from_external(shape: &Shape, ext: &[u8], n: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(n * shape.size());
    let mut at = 0;
    for _ in 0..n {
        for r in &shape.runs {
            for _ in 0..r.count {
                let value = &ext[at..at + r.external];
                if r.external < r.size {
                    let negative = r.signed && value[0] & 0x80 != 0;
                    out.extend(value.iter().rev());
                    out.extend(std::iter::repeat_n(
                        if negative { 0xff } else { 0 },
                        r.size - r.external,
                    ));
                } else {
                    for v in value.chunks(r.unit.max(1)) {
                        out.extend(v.iter().rev());
                    }
                }
                at += r.external;
            }
        }
    }
    out
}

/// Packs `n` elements of `dt` at `inbuf` into `outbuf` (room `outsize`) at `*pos`.
///
/// # Safety
/// The standard's contract for the buffers.
#[allow(clippy::too_many_arguments)]
unsafe fn pack_into(
    call: &'static str,
    inbuf: *const c_void,
    n: i64,
    dt: &Shape,
    outbuf: *mut c_void,
    outsize: i64,
    pos: *mut i64,
    external: bool,
) -> Result<(), CError> {
    let n = count(call, "incount", n)?;
    if !dt.stride_ok(n) {
        return Err(handles::negative_extent(call, n, dt));
    }
    let outsize = count(call, "outsize", outsize)?;
    let at = position(call, pos)?;
    let mut data = vec![];
    // SAFETY: the caller's promise: `n` readable elements of `dt` at `inbuf`.
    unsafe { dt.type_map().pack(inbuf.cast(), n, &mut data) };
    if external {
        data = to_external(dt, &data);
    }
    if at + data.len() > outsize {
        return Err(CError::new(
            MPI_ERR_TRUNCATE,
            call,
            format!(
                "{} bytes at position {at} do not fit in outsize {outsize}",
                data.len()
            ),
        ));
    }
    if !data.is_empty() {
        if outbuf.is_null() {
            return Err(CError::new(
                MPI_ERR_BUFFER,
                call,
                "outbuf is a null pointer",
            ));
        }
        // SAFETY: the caller's promise: `outsize` writable bytes at `outbuf`; checked above.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), outbuf.cast::<u8>().add(at), data.len())
        };
    }
    // SAFETY: checked non-null by `position`.
    unsafe { *pos = (at + data.len()) as i64 };
    Ok(())
}

/// Unpacks `n` elements of `dt` into `outbuf` from `inbuf` (size `insize`) at `*pos`.
///
/// # Safety
/// The standard's contract for the buffers.
#[allow(clippy::too_many_arguments)]
unsafe fn unpack_from(
    call: &'static str,
    inbuf: *const c_void,
    insize: i64,
    pos: *mut i64,
    outbuf: *mut c_void,
    n: i64,
    dt: &Shape,
    external: bool,
) -> Result<(), CError> {
    let n = count(call, "outcount", n)?;
    if !dt.stride_ok(n) {
        return Err(handles::negative_extent(call, n, dt));
    }
    let insize = count(call, "insize", insize)?;
    let at = position(call, pos)?;
    let need = n * if external {
        dt.external_size()
    } else {
        dt.size()
    };
    if at + need > insize {
        return Err(CError::new(
            MPI_ERR_TRUNCATE,
            call,
            format!("{need} bytes at position {at} are more than insize {insize}"),
        ));
    }
    if need > 0 {
        // SAFETY: the caller's promise: `insize` readable bytes at `inbuf`; checked above.
        let src = unsafe { handles::bytes(inbuf.cast::<u8>().add(at).cast(), need) };
        let data = if external {
            from_external(dt, src, n)
        } else {
            src.to_vec()
        };
        // SAFETY: the caller's promise: room for `n` elements of `dt` at `outbuf`.
        unsafe { dt.type_map().unpack(&data, outbuf.cast(), n) };
    }
    // SAFETY: checked non-null by `position`.
    unsafe { *pos = (at + need) as i64 };
    Ok(())
}

/// An `int` position as a large one, written back after `f`.
fn with_int_position(
    pos: *mut c_int,
    f: impl FnOnce(*mut i64) -> Result<(), CError>,
) -> Result<(), CError> {
    if pos.is_null() {
        return f(std::ptr::null_mut());
    }
    // SAFETY: checked non-null.
    let mut p = i64::from(unsafe { *pos });
    f(&mut p)?;
    // SAFETY: checked non-null.
    unsafe { *pos = p as c_int };
    Ok(())
}

pub unsafe extern "C" fn pack(
    inbuf: *const c_void,
    n: c_int,
    datatype: *mut c_void,
    outbuf: *mut c_void,
    outsize: c_int,
    pos: *mut c_int,
    comm: *mut c_void,
) -> c_int {
    const CALL: &str = "MPI_Pack";
    guard(CALL, comm, || {
        handles::comm(CALL, comm)?;
        let dt = handles::datatype(CALL, datatype)?;
        // SAFETY: the standard's contract, passed on.
        with_int_position(pos, |p| unsafe {
            pack_into(CALL, inbuf, n.into(), dt, outbuf, outsize.into(), p, false)
        })
    })
}
export!(Pack, pack);

pub unsafe extern "C" fn pack_c(
    inbuf: *const c_void,
    n: i64,
    datatype: *mut c_void,
    outbuf: *mut c_void,
    outsize: i64,
    pos: *mut i64,
    comm: *mut c_void,
) -> c_int {
    const CALL: &str = "MPI_Pack_c";
    guard(CALL, comm, || {
        handles::comm(CALL, comm)?;
        let dt = handles::datatype(CALL, datatype)?;
        // SAFETY: the standard's contract, passed on.
        unsafe { pack_into(CALL, inbuf, n, dt, outbuf, outsize, pos, false) }
    })
}
export!(Pack_c, pack_c);

pub unsafe extern "C" fn unpack(
    inbuf: *const c_void,
    insize: c_int,
    pos: *mut c_int,
    outbuf: *mut c_void,
    n: c_int,
    datatype: *mut c_void,
    comm: *mut c_void,
) -> c_int {
    const CALL: &str = "MPI_Unpack";
    guard(CALL, comm, || {
        handles::comm(CALL, comm)?;
        let dt = handles::datatype(CALL, datatype)?;
        // SAFETY: the standard's contract, passed on.
        with_int_position(pos, |p| unsafe {
            unpack_from(CALL, inbuf, insize.into(), p, outbuf, n.into(), dt, false)
        })
    })
}
export!(Unpack, unpack);

pub unsafe extern "C" fn unpack_c(
    inbuf: *const c_void,
    insize: i64,
    pos: *mut i64,
    outbuf: *mut c_void,
    n: i64,
    datatype: *mut c_void,
    comm: *mut c_void,
) -> c_int {
    const CALL: &str = "MPI_Unpack_c";
    guard(CALL, comm, || {
        handles::comm(CALL, comm)?;
        let dt = handles::datatype(CALL, datatype)?;
        // SAFETY: the standard's contract, passed on.
        unsafe { unpack_from(CALL, inbuf, insize, pos, outbuf, n, dt, false) }
    })
}
export!(Unpack_c, unpack_c);

pub unsafe extern "C" fn pack_size(
    n: c_int,
    datatype: *mut c_void,
    comm: *mut c_void,
    size: *mut c_int,
) -> c_int {
    const CALL: &str = "MPI_Pack_size";
    guard(CALL, comm, || {
        handles::comm(CALL, comm)?;
        let dt = handles::datatype(CALL, datatype)?;
        let total = count(CALL, "incount", n.into())? * dt.size();
        crate::c_abi::env::put_int(
            CALL,
            "size",
            size,
            c_int::try_from(total).unwrap_or(MPI_UNDEFINED),
        )
    })
}
export!(Pack_size, pack_size);

pub unsafe extern "C" fn pack_size_c(
    n: i64,
    datatype: *mut c_void,
    comm: *mut c_void,
    size: *mut i64,
) -> c_int {
    const CALL: &str = "MPI_Pack_size_c";
    guard(CALL, comm, || {
        handles::comm(CALL, comm)?;
        let dt = handles::datatype(CALL, datatype)?;
        let total = count(CALL, "incount", n)? * dt.size();
        if size.is_null() {
            return Err(CError::new(MPI_ERR_ARG, CALL, "size is a null pointer"));
        }
        // SAFETY: checked non-null.
        unsafe { *size = total as i64 };
        Ok(())
    })
}
export!(Pack_size_c, pack_size_c);

/// Checks the data representation is "external32".
fn datarep(call: &'static str, rep: *const c_char) -> Result<(), CError> {
    if rep.is_null() {
        return Err(CError::new(MPI_ERR_ARG, call, "datarep is a null pointer"));
    }
    // SAFETY: checked non-null; the standard's contract: a NUL-terminated string.
    let s = unsafe { std::ffi::CStr::from_ptr(rep) }.to_string_lossy();
    if s != "external32" {
        return Err(CError::new(
            MPI_ERR_ARG,
            call,
            format!("the data representation \"{s}\" is not \"external32\""),
        ));
    }
    Ok(())
}

pub unsafe extern "C" fn pack_external(
    rep: *const c_char,
    inbuf: *const c_void,
    n: c_int,
    datatype: *mut c_void,
    outbuf: *mut c_void,
    outsize: isize,
    pos: *mut isize,
) -> c_int {
    const CALL: &str = "MPI_Pack_external";
    guard(CALL, std::ptr::null_mut(), || {
        datarep(CALL, rep)?;
        let dt = handles::datatype(CALL, datatype)?;
        // SAFETY: the standard's contract, passed on (MPI_Aint is an i64 here).
        unsafe {
            pack_into(
                CALL,
                inbuf,
                n.into(),
                dt,
                outbuf,
                outsize as i64,
                pos.cast(),
                true,
            )
        }
    })
}
export!(Pack_external, pack_external);

pub unsafe extern "C" fn pack_external_c(
    rep: *const c_char,
    inbuf: *const c_void,
    n: i64,
    datatype: *mut c_void,
    outbuf: *mut c_void,
    outsize: i64,
    pos: *mut i64,
) -> c_int {
    const CALL: &str = "MPI_Pack_external_c";
    guard(CALL, std::ptr::null_mut(), || {
        datarep(CALL, rep)?;
        let dt = handles::datatype(CALL, datatype)?;
        // SAFETY: the standard's contract, passed on.
        unsafe { pack_into(CALL, inbuf, n, dt, outbuf, outsize, pos, true) }
    })
}
export!(Pack_external_c, pack_external_c);

pub unsafe extern "C" fn unpack_external(
    rep: *const c_char,
    inbuf: *const c_void,
    insize: isize,
    pos: *mut isize,
    outbuf: *mut c_void,
    n: c_int,
    datatype: *mut c_void,
) -> c_int {
    const CALL: &str = "MPI_Unpack_external";
    guard(CALL, std::ptr::null_mut(), || {
        datarep(CALL, rep)?;
        let dt = handles::datatype(CALL, datatype)?;
        // SAFETY: the standard's contract, passed on (MPI_Aint is an i64 here).
        unsafe {
            unpack_from(
                CALL,
                inbuf,
                insize as i64,
                pos.cast(),
                outbuf,
                n.into(),
                dt,
                true,
            )
        }
    })
}
export!(Unpack_external, unpack_external);

pub unsafe extern "C" fn unpack_external_c(
    rep: *const c_char,
    inbuf: *const c_void,
    insize: i64,
    pos: *mut i64,
    outbuf: *mut c_void,
    n: i64,
    datatype: *mut c_void,
) -> c_int {
    const CALL: &str = "MPI_Unpack_external_c";
    guard(CALL, std::ptr::null_mut(), || {
        datarep(CALL, rep)?;
        let dt = handles::datatype(CALL, datatype)?;
        // SAFETY: the standard's contract, passed on.
        unsafe { unpack_from(CALL, inbuf, insize, pos, outbuf, n, dt, true) }
    })
}
export!(Unpack_external_c, unpack_external_c);

fn external_size(
    call: &'static str,
    rep: *const c_char,
    n: i64,
    datatype: *mut c_void,
    size: *mut i64,
) -> c_int {
    guard(call, std::ptr::null_mut(), || {
        datarep(call, rep)?;
        let dt = handles::datatype(call, datatype)?;
        let total = count(call, "incount", n)? * dt.external_size();
        if size.is_null() {
            return Err(CError::new(MPI_ERR_ARG, call, "size is a null pointer"));
        }
        // SAFETY: checked non-null.
        unsafe { *size = total as i64 };
        Ok(())
    })
}

pub unsafe extern "C" fn pack_external_size(
    rep: *const c_char,
    n: c_int,
    datatype: *mut c_void,
    size: *mut isize,
) -> c_int {
    external_size(
        "MPI_Pack_external_size",
        rep,
        n.into(),
        datatype,
        size.cast(),
    )
}
export!(Pack_external_size, pack_external_size);

pub unsafe extern "C" fn pack_external_size_c(
    rep: *const c_char,
    n: i64,
    datatype: *mut c_void,
    size: *mut i64,
) -> c_int {
    external_size("MPI_Pack_external_size_c", rep, n, datatype, size)
}
export!(Pack_external_size_c, pack_external_size_c);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::c_abi::datatype::shape::Run;
    use crate::datatype::map_of;

    #[test]
    fn external32_is_big_endian_with_a_four_byte_long() {
        let long = Run {
            size: 8,
            unit: 8,
            count: 1,
            external: 4,
            signed: true,
        };
        let int = Run {
            size: 4,
            unit: 4,
            count: 1,
            external: 4,
            signed: true,
        };
        let pair = Shape::compose(
            &[
                crate::c_abi::datatype::shape::Piece {
                    disp: 0,
                    count: 1,
                    old: &Shape::predefined(map_of::<i64>(), 8, vec![long]),
                },
                crate::c_abi::datatype::shape::Piece {
                    disp: 8,
                    count: 1,
                    old: &Shape::predefined(map_of::<i32>(), 4, vec![int]),
                },
            ],
            true,
        );
        assert_eq!(pair.external_size(), 8);
        let mut native = vec![];
        native.extend((-2i64).to_ne_bytes());
        native.extend(7i32.to_ne_bytes());
        let ext = to_external(&pair, &native);
        assert_eq!(ext, [0xff, 0xff, 0xff, 0xfe, 0, 0, 0, 7]);
        assert_eq!(from_external(&pair, &ext, 1), native);
    }
}
