//! Weft: a message-passing runtime for parallel Rust programs.
//!
//! Start N processes with `weft run -n N prog` (or MPICH's `mpiexec.hydra`), then use the
//! rsmpi-shaped API: [`initialize`], `universe.world()`, `process_at_rank(r).send(..)`,
//! `receive_into(..)`, nonblocking requests in [`request::scope`], communicators and groups.
//!
//! The public surface is that API, plus documented extension points: [`launcher`] (what a
//! process manager such as `weft run` needs: the PMI wire format, the node mapping, the TCP
//! challenge-response, random bytes and the host's names), [`tunables`] (the `WEFT_*`
//! settings) and [`coll_model`] (the collectives' cost model, which `weft info` shows). All
//! are sound: nothing in them takes an address.
//!
//! The layers below the API, bottom to top (see DESIGN.md): `sys`, `boot`, `fabric`, `engine`,
//! `comm`, `coll`, `rma` and `runtime`. They are private. The non-default cargo feature `internals` makes them
//! public for Weft's own tests, examples and benchmarks; that surface is **unstable** (it
//! changes with any release) and still sound: whatever in it can break memory safety (views of
//! user buffers, copies by address, adopting a descriptor) is an `unsafe fn` with its contract.
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]
#![warn(missing_docs)]

/// Declares the internal layers: `pub` with the `internals` feature, crate-private without.
// (Their docs are their own `//!` text: an outer doc here would make rustdoc resolve the
// modules' intra-doc links from the crate root.)
macro_rules! internal_modules {
    ($($name:ident;)*) => {$(
        #[cfg(feature = "internals")]
        pub mod $name;
        // Items only Weft's own tests and examples use (through `internals`) are dead here.
        #[cfg(not(feature = "internals"))]
        #[allow(dead_code)]
        pub(crate) mod $name;
    )*};
}

internal_modules! {
    boot;
    coll;
    comm;
    engine;
    fabric;
    rma;
    runtime;
    sync;
    sys;
}

pub mod error;
pub mod launcher;
pub mod tunables;

pub use error::{Error, ErrorClass, MpiError, Result};

/// The collectives' cost model: which algorithm runs a collective of a given shape, and each
/// algorithm's predicted cost (pure functions of the tunables; `weft info --coll` prints them).
pub use coll::model as coll_model;

mod api;
#[cfg(feature = "c-abi")]
mod c_abi;
pub mod ffi;
#[cfg(doctest)]
mod soundness;
#[cfg(not(loom))]
pub use api::window;
pub use api::{collective, datatype, environment, front_end, point_to_point, request, topology};
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
