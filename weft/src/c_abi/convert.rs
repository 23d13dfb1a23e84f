//! Handles as integers: `MPI_X_toint`/`MPI_X_fromint` (MPI 5.0) and the Fortran forms
//! `MPI_X_c2f`/`MPI_X_f2c` (the same mapping here: the ABI's `MPI_Fint` is a C `int`).
//!
//! A predefined handle's integer is its value (the standard fixes both, under 0x1000, so C,
//! Fortran and tools agree). A user handle (a pointer) gets the next integer from 0x1000 up
//! the first time it is asked for, and keeps it; `fromint` of an integer never handed out is
//! the type's null handle.

use std::ffi::{c_int, c_void};
use std::sync::Mutex;

/// Integers at and above this stand for user handles.
const FIRST_USER: usize = 0x1000;

/// The user handles given integers, in order (integer = FIRST_USER + index).
static NUMBERED: Mutex<Vec<usize>> = Mutex::new(Vec::new());

pub(crate) fn to_int(handle: *mut c_void) -> c_int {
    let value = handle as usize;
    if value < FIRST_USER {
        return value as c_int;
    }
    let mut numbered = NUMBERED.lock().unwrap_or_else(|e| e.into_inner());
    let index = match numbered.iter().position(|&h| h == value) {
        Some(i) => i,
        None => {
            numbered.push(value);
            numbered.len() - 1
        }
    };
    c_int::try_from(FIRST_USER + index).unwrap_or(0)
}

pub(crate) fn from_int(value: c_int, null: usize) -> *mut c_void {
    let Ok(value) = usize::try_from(value) else {
        return null as *mut c_void;
    };
    if value < FIRST_USER {
        return value as *mut c_void;
    }
    let numbered = NUMBERED.lock().unwrap_or_else(|e| e.into_inner());
    numbered.get(value - FIRST_USER).map_or(null, |&h| h) as *mut c_void
}

pub extern "C" fn toint(handle: *mut c_void) -> c_int {
    to_int(handle)
}

/// `fromint` of one handle type (whose null handle an unknown integer gives).
macro_rules! fromint {
    ($($name:ident: $null:ident;)*) => {$(
        pub extern "C" fn $name(value: c_int) -> *mut c_void {
            from_int(value, crate::c_abi::abi::$null)
        }
    )*};
}

fromint! {
    comm_fromint: MPI_COMM_NULL;
    errhandler_fromint: MPI_ERRHANDLER_NULL;
    file_fromint: MPI_FILE_NULL;
    group_fromint: MPI_GROUP_NULL;
    info_fromint: MPI_INFO_NULL;
    message_fromint: MPI_MESSAGE_NULL;
    op_fromint: MPI_OP_NULL;
    request_fromint: MPI_REQUEST_NULL;
    session_fromint: MPI_SESSION_NULL;
    type_fromint: MPI_DATATYPE_NULL;
    win_fromint: MPI_WIN_NULL;
}

// The C forms and the Fortran forms of each handle type.
export!(Comm_toint, toint);
export!(Comm_fromint, comm_fromint);
export!(Comm_c2f, toint);
export!(Comm_f2c, comm_fromint);
export!(Errhandler_toint, toint);
export!(Errhandler_fromint, errhandler_fromint);
export!(Errhandler_c2f, toint);
export!(Errhandler_f2c, errhandler_fromint);
export!(File_toint, toint);
export!(File_fromint, file_fromint);
export!(File_c2f, toint);
export!(File_f2c, file_fromint);
export!(Group_toint, toint);
export!(Group_fromint, group_fromint);
export!(Group_c2f, toint);
export!(Group_f2c, group_fromint);
export!(Info_toint, toint);
export!(Info_fromint, info_fromint);
export!(Info_c2f, toint);
export!(Info_f2c, info_fromint);
export!(Message_toint, toint);
export!(Message_fromint, message_fromint);
export!(Message_c2f, toint);
export!(Message_f2c, message_fromint);
export!(Op_toint, toint);
export!(Op_fromint, op_fromint);
export!(Op_c2f, toint);
export!(Op_f2c, op_fromint);
export!(Request_toint, toint);
export!(Request_fromint, request_fromint);
export!(Request_c2f, toint);
export!(Request_f2c, request_fromint);
export!(Session_toint, toint);
export!(Session_fromint, session_fromint);
export!(Session_c2f, toint);
export!(Session_f2c, session_fromint);
export!(Type_toint, toint);
export!(Type_fromint, type_fromint);
export!(Type_c2f, toint);
export!(Type_f2c, type_fromint);
export!(Win_toint, toint);
export!(Win_fromint, win_fromint);
export!(Win_c2f, toint);
export!(Win_f2c, win_fromint);

/// The status conversions between C, Fortran (`MPI_Fint[MPI_F_STATUS_SIZE]`) and Fortran
/// 2008 (`MPI_F08_status`): the standard ABI lays all three out alike (source, tag and
/// error at `MPI_F_SOURCE`, `MPI_F_TAG`, `MPI_F_ERROR`, then the hidden fields), so each is
/// a copy of the eight ints.
macro_rules! status_copies {
    ($($name:ident, $fn:ident;)*) => {$(
        pub unsafe extern "C" fn $fn(from: *const c_int, to: *mut c_int) -> c_int {
            const CALL: &str = concat!("MPI_", stringify!($name));
            crate::c_abi::errors::guard(CALL, std::ptr::null_mut(), || {
                if from.is_null() || to.is_null() {
                    return Err(crate::c_abi::errors::CError::new(
                        crate::c_abi::abi::MPI_ERR_ARG,
                        CALL,
                        "a status is a null pointer (MPI_STATUS_IGNORE cannot be converted)",
                    ));
                }
                // SAFETY: the standard's contract: two statuses of MPI_F_STATUS_SIZE ints
                // (the C and Fortran 2008 ones have that size and layout in the ABI).
                unsafe { std::ptr::copy(from, to, crate::c_abi::abi::MPI_F_STATUS_SIZE as usize) };
                Ok(())
            })
        }
    )*};
}

status_copies! {
    Status_c2f, status_c2f;
    Status_f2c, status_f2c;
    Status_c2f08, status_c2f08;
    Status_f082c, status_f082c;
    Status_f082f, status_f082f;
    Status_f2f08, status_f2f08;
}
export!(Status_c2f, status_c2f);
export!(Status_f2c, status_f2c);
export!(Status_c2f08, status_c2f08);
export!(Status_f082c, status_f082c);
export!(Status_f082f, status_f082f);
export!(Status_f2f08, status_f2f08);

const _: () = assert!(
    std::mem::size_of::<crate::c_abi::p2p::Status>()
        == 4 * crate::c_abi::abi::MPI_F_STATUS_SIZE as usize
);

/// MPI_Pcontrol: a hook for profiling layers (which interpose it); Weft itself profiles
/// nothing, so it does nothing, as the standard says of a library without profiling.
pub extern "C" fn pcontrol(_level: c_int) -> c_int {
    crate::c_abi::abi::MPI_SUCCESS
}
export!(Pcontrol, pcontrol);
