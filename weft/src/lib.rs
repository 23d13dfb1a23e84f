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
pub mod engine;
pub mod error;
pub mod fabric;
pub mod sync;
pub mod sys;
pub mod tunables;

pub use error::{Error, ErrorClass, Result};
