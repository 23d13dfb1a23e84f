//! The MPI 5.0 standard ABI seen from Rust (rsmpi's `ffi` module): its types, constants and
//! predefined handles, and — with the `c-abi` feature — its C functions, for Rust code that
//! calls MPI's C interface directly, in the same process as the Rust API.
//!
//! The items follow the standard ABI, which Weft's C library (`libmpi_abi.so.1`) implements:
//! handles are pointers to opaque structs, predefined handles are the standard's small
//! integers (`MPI_COMM_WORLD` is the world the Rust API's `Universe::world` returns), the
//! status is eight integers. Each function is the body the C library exports under the same
//! name, with the standard's checks and error handlers; the functions Weft does not implement
//! yet are not here (`weft info --abi` lists them). Function pointers are `Option`s of Rust
//! function types; of the ABI's predefined callbacks only the null ones are here (the others,
//! such as `MPI_COMM_DUP_FN`, are small integers a Rust function pointer cannot hold).
//!
//! The C interface and the Rust API share one runtime: whichever initializes it (`MPI_Init` or
//! [`crate::initialize`]), the other sees it running. Handles made through one are not
//! objects of the other.
//!
//! ```no_run
//! # #[cfg(feature = "c-abi")] {
//! use weft::ffi;
//! let universe = weft::initialize().unwrap();
//! let mut rank = -1;
//! // SAFETY: a live communicator and a valid place for the rank.
//! let rc = unsafe { ffi::MPI_Comm_rank(ffi::MPI_COMM_WORLD, &mut rank) };
//! assert_eq!(rc, ffi::MPI_SUCCESS);
//! # drop(universe); }
//! ```

#![allow(non_camel_case_types, non_snake_case)]

pub use crate::api::abi_types::*;

#[cfg(feature = "c-abi")]
mod functions {
    #![allow(
        clippy::useless_transmute,
        clippy::missing_transmute_annotations,
        clippy::transmutes_expressible_as_ptr_casts,
        clippy::unnecessary_cast,
        clippy::too_many_arguments,
        unused_unsafe
    )]
    use super::*;
    include!(concat!(env!("OUT_DIR"), "/ffi_functions.rs"));
}
#[cfg(feature = "c-abi")]
pub use functions::*;

/// What weft-abi's stubs for the functions Weft does not implement yet call.
#[cfg(feature = "c-abi")]
#[doc(hidden)]
pub use crate::c_abi::unsupported;
