//! The C ABI, a front end over the Rust API and the layers below: the MPI 5.0 standard ABI's
//! functions, which weft-abi exports from `libmpi_abi.so.1` (`mpi.h`) and `weft::ffi` gives
//! to Rust code.
//!
//! Each function Weft implements is a Rust body here with an `export!(Name, body)` line; the
//! build writes `weft::ffi::MPI_Name` from those lines (typed from the standard's prototype,
//! it passes its arguments to the body), and weft-abi exports a strong `PMPI_Name` jumping to
//! it and a weak alias `MPI_Name` (so profiling tools can interpose `MPI_Name`); the others
//! are stubs there, which raise `MPI_ERR_UNSUPPORTED_OPERATION` through the error handler
//! (`weft info --abi` lists them).
//!
//! Handles are the standard's: predefined ones are small integers that decode straight to
//! Weft's objects (`handles`); user ones are pointers to boxed objects. Calls may come from
//! any thread, one at a time (`MPI_THREAD_SERIALIZED`): each entry adopts the runtime for its
//! thread (`crate::runtime::adopt`, one compare when the thread already owns it). No panic
//! crosses the boundary: each body runs under `errors::guard`, which turns one into the
//! error handler's action.
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

/// Marks `$imp` as the body of the standard's function `MPI_<name>`. Nothing at compile time:
/// the builds read these lines (`weft/build/exports.rs`), weft's to write
/// `weft::ffi::MPI_<name>`, weft-abi's to export the `PMPI_<name>` and `MPI_<name>` symbols.
macro_rules! export {
    ($name:ident, $imp:path) => {};
}

/// The standard ABI's constants and predefined handles (from `abi/constants.tsv`).
#[allow(dead_code, clippy::unreadable_literal)]
pub(crate) mod abi {
    include!(concat!(env!("OUT_DIR"), "/constants.rs"));
}

pub(crate) mod coll;
pub(crate) mod coll_v;
pub(crate) mod comm;
pub(crate) mod comm_buffer;
pub(crate) mod convert;
pub(crate) mod datatype;
pub(crate) mod dynamic;
pub(crate) mod env;
pub(crate) mod errhandler;
pub(crate) mod errors;
pub(crate) mod exchange;
pub(crate) mod fast_path;
pub(crate) mod fortran;
pub(crate) mod grequest;
pub(crate) mod group;
pub(crate) mod handles;
pub(crate) mod icoll;
pub(crate) mod info;
pub(crate) mod inter;
pub(crate) mod matched;
pub(crate) mod memory;
pub(crate) mod neighbor;
pub(crate) mod op;
pub(crate) mod p2p;
pub(crate) mod requests;
pub(crate) mod session;
pub(crate) mod state;
pub(crate) mod status;
pub(crate) mod topo;
// Its memory is shared with other processes, which loom's atomics cannot be (as `rma::window`).
#[cfg(not(loom))]
pub(crate) mod window;

/// What a function of the standard Weft does not implement yet does (weft-abi's stubs call
/// it): raise MPI_ERR_UNSUPPORTED_OPERATION on MPI_COMM_SELF's error handler.
#[doc(hidden)]
pub fn unsupported(name: &'static str) -> std::ffi::c_int {
    errors::unsupported(name)
}
