//! The Fortran ABI details (MPI 5.0 §20.3): Weft's library has no Fortran bindings, so it
//! knows nothing of a Fortran compiler's types until a program tells it.
//! `MPI_Abi_get_fortran_info` answers MPI_INFO_NULL until `MPI_Abi_set_fortran_info` has
//! stored a copy of the program's; the literal values of a Fortran LOGICAL's true and false,
//! per size, likewise (`MPI_Abi_set/get_fortran_booleans`). Each may be set once; callable
//! before MPI_Init, as the ABI queries are.

use crate::c_abi::abi::*;
use crate::c_abi::env::put_int;
use crate::c_abi::errors::{guard, CError};
use crate::c_abi::info::{hand_out, info, CInfo};
use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::sync::Mutex;

/// What MPI_Abi_set_fortran_info stored.
static INFO: Mutex<Option<Vec<(String, String)>>> = Mutex::new(None);
/// A LOGICAL's literal true and false, as bytes.
type Literals = (Vec<u8>, Vec<u8>);
/// The literals of each LOGICAL size (in bytes) the program has set.
static BOOLEANS: Mutex<Option<HashMap<c_int, Literals>>> = Mutex::new(None);

fn already(call: &'static str, what: String) -> CError {
    CError::new(
        MPI_ERR_ABI,
        call,
        format!("{what} was set already; it is set once"),
    )
}

pub unsafe extern "C" fn abi_get_fortran_info(out: *mut *mut c_void) -> c_int {
    const CALL: &str = "MPI_Abi_get_fortran_info";
    guard(CALL, std::ptr::null_mut(), || {
        let stored = INFO.lock().unwrap_or_else(|e| e.into_inner()).clone();
        match stored {
            Some(entries) => hand_out(CALL, out, CInfo::new(entries)),
            None if out.is_null() => Err(CError::new(MPI_ERR_ARG, CALL, "info is a null pointer")),
            None => {
                // SAFETY: checked non-null; a handle slot.
                unsafe { *out = MPI_INFO_NULL as *mut c_void };
                Ok(())
            }
        }
    })
}
export!(Abi_get_fortran_info, abi_get_fortran_info);

pub unsafe extern "C" fn abi_set_fortran_info(handle: *mut c_void) -> c_int {
    const CALL: &str = "MPI_Abi_set_fortran_info";
    guard(CALL, std::ptr::null_mut(), || {
        let entries = info(CALL, handle)?.entries.borrow().clone();
        let mut stored = INFO.lock().unwrap_or_else(|e| e.into_inner());
        if stored.is_some() {
            return Err(already(CALL, "the Fortran ABI info".into()));
        }
        *stored = Some(entries);
        Ok(())
    })
}
export!(Abi_set_fortran_info, abi_set_fortran_info);

/// A LOGICAL's size: a power of two up to 16 bytes.
fn logical_size(call: &'static str, size: c_int) -> Result<usize, CError> {
    match size {
        1 | 2 | 4 | 8 | 16 => Ok(size as usize),
        _ => Err(CError::new(
            MPI_ERR_ARG,
            call,
            format!("logical_size {size} is not a power of two from 1 to 16"),
        )),
    }
}

/// Checks the addresses of a LOGICAL's true and false values.
fn both_given(call: &'static str, t: *const c_void, f: *const c_void) -> Result<(), CError> {
    if t.is_null() || f.is_null() {
        return Err(CError::new(
            MPI_ERR_ARG,
            call,
            "logical_true or logical_false is a null pointer",
        ));
    }
    Ok(())
}

pub unsafe extern "C" fn abi_set_fortran_booleans(
    size: c_int,
    logical_true: *const c_void,
    logical_false: *const c_void,
) -> c_int {
    const CALL: &str = "MPI_Abi_set_fortran_booleans";
    guard(CALL, std::ptr::null_mut(), || {
        let n = logical_size(CALL, size)?;
        both_given(CALL, logical_true, logical_false)?;
        // SAFETY: the standard's contract: a LOGICAL of `size` bytes at each.
        let (t, f) = unsafe {
            (
                std::slice::from_raw_parts(logical_true.cast::<u8>(), n).to_vec(),
                std::slice::from_raw_parts(logical_false.cast::<u8>(), n).to_vec(),
            )
        };
        let mut all = BOOLEANS.lock().unwrap_or_else(|e| e.into_inner());
        let all = all.get_or_insert_with(HashMap::new);
        if all.contains_key(&size) {
            return Err(already(
                CALL,
                format!("the booleans of logical_size {size}"),
            ));
        }
        all.insert(size, (t, f));
        Ok(())
    })
}
export!(Abi_set_fortran_booleans, abi_set_fortran_booleans);

pub unsafe extern "C" fn abi_get_fortran_booleans(
    size: c_int,
    logical_true: *mut c_void,
    logical_false: *mut c_void,
    is_set: *mut c_int,
) -> c_int {
    const CALL: &str = "MPI_Abi_get_fortran_booleans";
    guard(CALL, std::ptr::null_mut(), || {
        let n = logical_size(CALL, size)?;
        let all = BOOLEANS.lock().unwrap_or_else(|e| e.into_inner());
        let Some((t, f)) = all.as_ref().and_then(|a| a.get(&size)) else {
            return put_int(CALL, "is_set", is_set, 0);
        };
        both_given(CALL, logical_true, logical_false)?;
        // SAFETY: the standard's contract: room for a LOGICAL of `size` bytes at each.
        unsafe {
            std::ptr::copy_nonoverlapping(t.as_ptr(), logical_true.cast::<u8>(), n);
            std::ptr::copy_nonoverlapping(f.as_ptr(), logical_false.cast::<u8>(), n);
        }
        put_int(CALL, "is_set", is_set, 1)
    })
}
export!(Abi_get_fortran_booleans, abi_get_fortran_booleans);
