//! The front end: the Rust API in rsmpi's shape. Each submodule is re-exported at the crate
//! root under rsmpi's module name, so `use mpi::traits::*` code works after renaming the
//! dependency.

pub(crate) mod abi_types;
pub mod collective;
pub mod datatype;
mod dyn_buffer;
pub mod environment;
#[doc(hidden)]
pub mod front_end;
mod partition;
pub mod point_to_point;
pub mod request;
mod status;
pub mod topology;
// Windows live in shared memory, which loom's model tests cannot have.
#[cfg(not(loom))]
pub mod window;
