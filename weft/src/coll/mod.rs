//! Collective algorithms: each builds the steps of one collective operation into an engine
//! [`Schedule`], for one member of a communicator; the engine then runs the schedule with
//! its other traffic. The algorithms are plain functions of (members, my position, sizes),
//! so the same code serves the blocking and the nonblocking forms, and the tests run them
//! on simulated ranks.
//!
//! Sizes are in bytes of packed data; reductions combine whole elements of `elem` bytes.
//! Where an operation has an input and an output, the caller passes both as spans, so that
//! in-place forms (input and output the same bytes) and compositions (a reduce into scratch,
//! then a scatter) need no special paths.

pub mod algorithm;
pub mod alltoall;
pub mod barrier;
pub mod bcast;
pub mod gather;
pub mod inter;
mod large_ring;
pub mod model;
pub mod neighbor;
mod node_aware;
pub mod op;
pub mod reduce;
pub mod scan;
pub mod shm;
#[cfg(test)]
mod inter_tests;
#[cfg(test)]
mod model_tests;
#[cfg(test)]
mod tests;

pub use crate::engine::schedule::{Area, Schedule, Span};

/// The members of a communicator as a collective sees them.
#[derive(Clone, Copy, Debug)]
pub struct Members<'a> {
    /// World rank of each member, in communicator-rank order.
    pub world: &'a [u32],
    /// This rank's position in `world`.
    pub me: usize,
    /// How many nodes the members are on (every member agrees; the cost model reads it).
    pub nodes: usize,
    /// The node (`0..nodes`) of each member, by member rank; empty when not known, and then
    /// no node-aware algorithm runs.
    pub node_of: &'a [u32],
}

impl Members<'_> {
    /// Number of members.
    pub fn n(&self) -> usize {
        self.world.len()
    }
    /// World rank of member `i`.
    pub fn at(&self, i: usize) -> u32 {
        self.world[i]
    }
    /// World rank of the member `v` places after `root` (relative rank `v`).
    pub fn rel(&self, root: usize, v: usize) -> u32 {
        self.world[(v + root) % self.n()]
    }
    /// My rank relative to `root`.
    pub fn vrank(&self, root: usize) -> usize {
        (self.me + self.n() - root) % self.n()
    }
}

/// The largest power of two not above `n` (`n` ≥ 1).
pub fn pof2_floor(n: usize) -> usize {
    debug_assert!(n >= 1);
    1 << (usize::BITS - 1 - n.leading_zeros())
}

/// `v`'s lowest set bit (0 for 0).
pub fn lowest_bit(v: usize) -> usize {
    v & v.wrapping_neg()
}

/// In a binomial tree over `n` members rooted at relative rank 0: how many members the
/// subtree of relative rank `vr` holds (itself included; 1: a leaf).
pub fn binomial_subtree(vr: usize, n: usize) -> usize {
    if vr == 0 {
        n
    } else {
        lowest_bit(vr).min(n - vr)
    }
}

/// The parent of relative rank `vr` (≥ 1) in that tree.
pub fn binomial_parent(vr: usize) -> usize {
    vr - lowest_bit(vr)
}

/// A span of `blocks` blocks of `len` bytes starting at block `first` of `base`.
pub fn blocks(base: Span, first: usize, count: usize, len: usize) -> Span {
    base.sub(first * len, count * len)
}
