//! One-sided communication (MPI-3 windows; issue 12), built in pieces from the bottom:
//!
//! - [`lock`]: the passive-target lock word a window keeps per rank in node-shared memory,
//!   taken and released by origins alone;
//! - [`atomic`]: MPI's accumulate operations on one element of a same-node target's memory as
//!   the CPU's atomic instructions (a compare-and-swap loop where there is no instruction);
//! - `window`: windows whose members are all on one node, in the four flavours (`allocate`
//!   and `allocate_shared` over one node-shared segment, `create` and dynamic over the
//!   program's memory), with fence, lock/unlock, lock_all, flush and post-start-complete-wait;
//! - `access`: put, get and the accumulates, done by the origin alone: copies (cross-memory
//!   ones into other processes), the CPU's atomics, or element locks per page of a part;
//! - `remote`: the same operations as internal active messages to the window's handler at
//!   the target, which does them on its own memory (forced by `WEFT_RMA_MESSAGES` on one node).
//!
//! To come (see issue 12): the fence assertions as optimizations, the operation table, the
//! lock by message, and windows over several nodes.

pub mod atomic;
pub mod lock;
// Its lock words live in shared memory, which loom's atomics cannot.
#[cfg(not(loom))]
pub mod access;
#[cfg(not(loom))]
pub mod remote;
#[cfg(not(loom))]
pub mod window;
