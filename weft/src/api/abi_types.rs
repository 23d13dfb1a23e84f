//! The MPI 5.0 standard ABI's types, constants and predefined handles, as `weft::ffi` gives
//! them (see there); here, below the front ends, because the Rust API's user operations take
//! a datatype handle.

#![allow(non_camel_case_types, non_upper_case_globals, non_snake_case)]

pub use std::ffi::{c_char, c_int, c_void};

/// An address or a displacement (`MPI_Aint`).
pub type MPI_Aint = isize;
/// A file offset (`MPI_Offset`).
pub type MPI_Offset = i64;
/// A large count (`MPI_Count`).
pub type MPI_Count = MPI_Offset;
/// A Fortran integer (`MPI_Fint`).
pub type MPI_Fint = c_int;

/// A receive's status (`MPI_Status`): three public fields and five words of the library's.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MPI_Status {
    /// The sender's rank.
    pub MPI_SOURCE: c_int,
    /// The message's tag.
    pub MPI_TAG: c_int,
    /// The error code, for calls that complete several requests.
    pub MPI_ERROR: c_int,
    /// The library's own words (the count, the cancelled flag).
    pub MPI_internal: [c_int; 5],
}

/// Fortran 2008's status seen from C: the same eight integers (`MPI_F08_status`).
pub type MPI_F08_status = MPI_Status;

macro_rules! handles {
    ($($handle:ident, $opaque:ident;)*) => {$(
        #[doc = concat!("The opaque struct a `", stringify!($handle), "` points to.")]
        #[repr(C)]
        pub struct $opaque {
            _private: [u8; 0],
        }
        #[doc = concat!("A handle (`", stringify!($handle), "`).")]
        pub type $handle = *mut $opaque;
    )*};
}

handles! {
    MPI_Comm, MPI_ABI_Comm;
    MPI_Datatype, MPI_ABI_Datatype;
    MPI_Errhandler, MPI_ABI_Errhandler;
    MPI_File, MPI_ABI_File;
    MPI_Group, MPI_ABI_Group;
    MPI_Info, MPI_ABI_Info;
    MPI_Message, MPI_ABI_Message;
    MPI_Op, MPI_ABI_Op;
    MPI_Request, MPI_ABI_Request;
    MPI_Session, MPI_ABI_Session;
    MPI_Win, MPI_ABI_Win;
}

/// Copies a communicator's attribute (`MPI_Comm_copy_attr_function`).
pub type MPI_Comm_copy_attr_function = unsafe extern "C" fn(
    MPI_Comm,
    c_int,
    *mut c_void,
    *mut c_void,
    *mut c_void,
    *mut c_int,
) -> c_int;
/// Deletes a communicator's attribute (`MPI_Comm_delete_attr_function`).
pub type MPI_Comm_delete_attr_function =
    unsafe extern "C" fn(MPI_Comm, c_int, *mut c_void, *mut c_void) -> c_int;
/// MPI-1's name of [`MPI_Comm_copy_attr_function`] (`MPI_Copy_function`).
pub type MPI_Copy_function = MPI_Comm_copy_attr_function;
/// MPI-1's name of [`MPI_Comm_delete_attr_function`] (`MPI_Delete_function`).
pub type MPI_Delete_function = MPI_Comm_delete_attr_function;
/// Copies a datatype's attribute (`MPI_Type_copy_attr_function`).
pub type MPI_Type_copy_attr_function = unsafe extern "C" fn(
    MPI_Datatype,
    c_int,
    *mut c_void,
    *mut c_void,
    *mut c_void,
    *mut c_int,
) -> c_int;
/// Deletes a datatype's attribute (`MPI_Type_delete_attr_function`).
pub type MPI_Type_delete_attr_function =
    unsafe extern "C" fn(MPI_Datatype, c_int, *mut c_void, *mut c_void) -> c_int;
/// Copies a window's attribute (`MPI_Win_copy_attr_function`).
pub type MPI_Win_copy_attr_function = unsafe extern "C" fn(
    MPI_Win,
    c_int,
    *mut c_void,
    *mut c_void,
    *mut c_void,
    *mut c_int,
) -> c_int;
/// Deletes a window's attribute (`MPI_Win_delete_attr_function`).
pub type MPI_Win_delete_attr_function =
    unsafe extern "C" fn(MPI_Win, c_int, *mut c_void, *mut c_void) -> c_int;
/// A user reduction (`MPI_User_function`).
pub type MPI_User_function =
    unsafe extern "C" fn(*mut c_void, *mut c_void, *mut c_int, *mut MPI_Datatype);
/// A user reduction with a large count (`MPI_User_function_c`).
pub type MPI_User_function_c =
    unsafe extern "C" fn(*mut c_void, *mut c_void, *mut MPI_Count, *mut MPI_Datatype);
/// A communicator's error handler (`MPI_Comm_errhandler_function`).
pub type MPI_Comm_errhandler_function = unsafe extern "C" fn(*mut MPI_Comm, *mut c_int, ...);
/// A window's error handler (`MPI_Win_errhandler_function`).
pub type MPI_Win_errhandler_function = unsafe extern "C" fn(*mut MPI_Win, *mut c_int, ...);
/// A file's error handler (`MPI_File_errhandler_function`).
pub type MPI_File_errhandler_function = unsafe extern "C" fn(*mut MPI_File, *mut c_int, ...);
/// A session's error handler (`MPI_Session_errhandler_function`).
pub type MPI_Session_errhandler_function = unsafe extern "C" fn(*mut MPI_Session, *mut c_int, ...);
/// A generalized request's query (`MPI_Grequest_query_function`).
pub type MPI_Grequest_query_function = unsafe extern "C" fn(*mut c_void, *mut MPI_Status) -> c_int;
/// A generalized request's free (`MPI_Grequest_free_function`).
pub type MPI_Grequest_free_function = unsafe extern "C" fn(*mut c_void) -> c_int;
/// A generalized request's cancel (`MPI_Grequest_cancel_function`).
pub type MPI_Grequest_cancel_function = unsafe extern "C" fn(*mut c_void, c_int) -> c_int;
/// A data representation's conversion (`MPI_Datarep_conversion_function`).
pub type MPI_Datarep_conversion_function = unsafe extern "C" fn(
    *mut c_void,
    MPI_Datatype,
    c_int,
    *mut c_void,
    MPI_Offset,
    *mut c_void,
) -> c_int;
/// A data representation's conversion with a large count
/// (`MPI_Datarep_conversion_function_c`).
pub type MPI_Datarep_conversion_function_c = unsafe extern "C" fn(
    *mut c_void,
    MPI_Datatype,
    MPI_Count,
    *mut c_void,
    MPI_Offset,
    *mut c_void,
) -> c_int;
/// A data representation's extent (`MPI_Datarep_extent_function`).
pub type MPI_Datarep_extent_function =
    unsafe extern "C" fn(MPI_Datatype, *mut MPI_Aint, *mut c_void) -> c_int;

/// The constants and predefined handles, generated from the ABI's table
/// (`weft/abi/constants.tsv`).
mod constants {
    // The table's values, written as the C header writes them (`((MPI_Status*)0)`).
    #![allow(
        clippy::zero_ptr,
        clippy::manual_dangling_ptr,
        clippy::unreadable_literal
    )]
    use super::*;
    include!(concat!(env!("OUT_DIR"), "/ffi_constants.rs"));
}
pub use constants::*;
