//! The front end: the Rust API in rsmpi's shape. Each submodule is re-exported at the crate
//! root under rsmpi's module name, so `use mpi::traits::*` code works after renaming the
//! dependency.

pub mod collective;
pub mod datatype;
mod dyn_buffer;
pub mod environment;
pub mod ffi;
#[doc(hidden)]
pub mod front_end;
mod partition;
pub mod point_to_point;
pub mod request;
mod status;
pub mod topology;
