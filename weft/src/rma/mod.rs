//! One-sided communication (MPI-3 windows; issue 12), built in pieces from the bottom:
//!
//! - [`lock`]: the passive-target lock word a window keeps per rank in node-shared memory,
//!   taken and released by origins alone;
//! - [`atomic`]: MPI's accumulate operations on one element of a same-node target's memory as
//!   the CPU's atomic instructions (a compare-and-swap loop where there is no instruction);
//! - `window`: windows whose members are all on one node, over one node-shared segment, with
//!   fence, lock/unlock, lock_all and flush, and every operation done by the origin directly.
//!
//! To come (see issue 12): windows over the program's memory (`create`) and dynamic ones,
//! `allocate_shared`'s direct pointers, post-start-complete-wait, the fence assertions, element
//! locks for what the CPU cannot update atomically, the operation table and active messages
//! for targets on other nodes, and the C functions (the C ABI's `MPI_Win_*` return
//! `MPI_ERR_UNSUPPORTED_OPERATION` until then).

pub mod atomic;
pub mod lock;
// Its lock words live in shared memory, which loom's atomics cannot.
#[cfg(not(loom))]
pub mod window;
