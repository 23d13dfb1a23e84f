//! Weft: a message-passing runtime for parallel Rust programs.
//!
//! Start N processes with `weft run -n N prog` (or MPICH's `mpiexec.hydra`), then use the
//! rsmpi-shaped API: [`initialize`], `universe.world()`, `process_at_rank(r).send(..)`,
//! `receive_into(..)`, nonblocking requests in [`request::scope`], communicators and groups.
//!
//! Layers, bottom to top (see DESIGN.md): [`sys`], [`boot`], [`fabric`], [`engine`],
//! [`comm`], and the front end (the rsmpi-shaped modules re-exported here).
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

pub mod boot;
pub mod comm;
pub mod engine;
pub mod error;
pub mod fabric;
pub mod runtime;
pub mod sync;
pub mod sys;
pub mod tunables;

pub use error::{Error, ErrorClass, Result};

mod api;
pub use api::{collective, datatype, environment, point_to_point, request, topology};
pub use environment::{
    initialize, initialize_with_threading, is_finalized, is_initialized, time, time_resolution,
    try_initialize, Threading,
};
pub use topology::Rank;

/// Element counts.
pub type Count = i32;
/// Message tags.
pub type Tag = i32;
/// Byte displacements.
pub type Address = isize;

/// Everything to glob-import: `use weft::traits::*;`.
pub mod traits {
    pub use crate::collective::traits::*;
    pub use crate::datatype::traits::*;
    pub use crate::point_to_point::traits::*;
    pub use crate::topology::traits::*;
    #[cfg(feature = "derive")]
    pub use weft_derive::Equivalence;
}
