//! Setting and reading a status's fields (MPI 4.1 §3.2.5, §13.3): what a generalized
//! request's query function and the program's own layers use.

use crate::c_abi::abi::*;
use crate::c_abi::env::put_int;
use crate::c_abi::errors::{guard, CError};
use crate::c_abi::p2p::Status;
use std::ffi::{c_int, c_void};

/// The status at `status`, checked non-null.
///
/// # Safety
/// `status` is null or points to an `MPI_Status` used by nothing else during the call.
unsafe fn status_mut<'a>(
    call: &'static str,
    status: *mut Status,
) -> Result<&'a mut Status, CError> {
    if status.is_null() {
        return Err(CError::new(MPI_ERR_ARG, call, "status is a null pointer"));
    }
    // SAFETY: the caller's promise.
    Ok(unsafe { &mut *status })
}

pub unsafe extern "C" fn status_set_cancelled(status: *mut Status, flag: c_int) -> c_int {
    const CALL: &str = "MPI_Status_set_cancelled";
    guard(CALL, std::ptr::null_mut(), || {
        // SAFETY: the standard's contract: a status.
        unsafe { status_mut(CALL, status)? }.set_cancelled(flag != 0);
        Ok(())
    })
}
export!(Status_set_cancelled, status_set_cancelled);

/// Sets `status` to hold `count` basic elements of `datatype`.
///
/// # Safety
/// As for [`status_mut`].
unsafe fn set_elements(
    call: &'static str,
    status: *mut Status,
    datatype: *mut c_void,
    count: i64,
) -> Result<(), CError> {
    let n = usize::try_from(count).map_err(|_| {
        CError::new(
            MPI_ERR_COUNT,
            call,
            format!("the count {count} is negative"),
        )
    })?;
    let bytes = crate::c_abi::datatype::decode(call, datatype)?
        .shape()
        .bytes_of(n);
    // SAFETY: the caller's promise.
    unsafe { status_mut(call, status)? }.set_bytes(bytes as u64);
    Ok(())
}

pub unsafe extern "C" fn status_set_elements(
    status: *mut Status,
    datatype: *mut c_void,
    count: c_int,
) -> c_int {
    const CALL: &str = "MPI_Status_set_elements";
    // SAFETY: the standard's contract: a status.
    guard(CALL, std::ptr::null_mut(), || unsafe {
        set_elements(CALL, status, datatype, count.into())
    })
}
export!(Status_set_elements, status_set_elements);

pub unsafe extern "C" fn status_set_elements_x(
    status: *mut Status,
    datatype: *mut c_void,
    count: i64,
) -> c_int {
    const CALL: &str = "MPI_Status_set_elements_x";
    // SAFETY: the standard's contract: a status.
    guard(CALL, std::ptr::null_mut(), || unsafe {
        set_elements(CALL, status, datatype, count)
    })
}
export!(Status_set_elements_x, status_set_elements_x);

pub unsafe extern "C" fn status_set_elements_c(
    status: *mut Status,
    datatype: *mut c_void,
    count: i64,
) -> c_int {
    const CALL: &str = "MPI_Status_set_elements_c";
    // SAFETY: the standard's contract: a status.
    guard(CALL, std::ptr::null_mut(), || unsafe {
        set_elements(CALL, status, datatype, count)
    })
}
export!(Status_set_elements_c, status_set_elements_c);

/// The setters and getters of the public fields.
macro_rules! fields {
    ($($set:ident, $set_fn:ident, $get:ident, $get_fn:ident, $field:ident;)*) => {$(
        pub unsafe extern "C" fn $set_fn(status: *mut Status, value: c_int) -> c_int {
            const CALL: &str = concat!("MPI_", stringify!($set));
            guard(CALL, std::ptr::null_mut(), || {
                // SAFETY: the standard's contract: a status.
                unsafe { status_mut(CALL, status)? }.$field = value;
                Ok(())
            })
        }

        pub unsafe extern "C" fn $get_fn(status: *const Status, value: *mut c_int) -> c_int {
            const CALL: &str = concat!("MPI_", stringify!($get));
            guard(CALL, std::ptr::null_mut(), || {
                // SAFETY: the standard's contract: a status, only read.
                let st = unsafe { status_mut(CALL, status.cast_mut())? };
                put_int(CALL, stringify!($field), value, st.$field)
            })
        }
    )*};
}

fields! {
    Status_set_source, status_set_source, Status_get_source, status_get_source, source;
    Status_set_tag, status_set_tag, Status_get_tag, status_get_tag, tag;
    Status_set_error, status_set_error, Status_get_error, status_get_error, error;
}
export!(Status_set_source, status_set_source);
export!(Status_get_source, status_get_source);
export!(Status_set_tag, status_set_tag);
export!(Status_get_tag, status_get_tag);
export!(Status_set_error, status_set_error);
export!(Status_get_error, status_get_error);
