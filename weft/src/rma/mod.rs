//! One-sided communication (MPI-3 windows; issue 12), built in pieces from the bottom:
//!
//! - [`lock`]: the passive-target lock word a window keeps per rank in node-shared memory,
//!   taken and released by origins alone;
//! - [`atomic`]: MPI's accumulate operations on one element of a same-node target's memory as
//!   the CPU's atomic instructions (a compare-and-swap loop where there is no instruction);
//! - [`gate`]: what keeps those atomics and the element locks' plain updates of large
//!   accumulates apart, with no shared word written on the atomics' path;
//! - `window`: windows (each node's members sharing a header), in the four flavours (`allocate`
//!   and `allocate_shared` over one node-shared segment, `create` and dynamic over the
//!   program's memory), with fence, lock/unlock, lock_all, flush and post-start-complete-wait;
//! - `access`: put, get and the accumulates, done by the origin alone: copies (cross-memory
//!   ones into other processes), the CPU's atomics, or element locks per page of a part;
//! - `remote`: the same operations, the lock, post and complete as internal active messages
//!   to the window's handler at the target, which does them on its own memory: for members
//!   on other nodes (and all others when `WEFT_RMA_MESSAGES` forces it on one node);
//! - `lazy`: lock epochs on targets reached directly, their word taken at the first
//!   operation (an empty epoch never touches it), in the order the locks were asked for;
//! - `table`: the origin's operation table for targets reached by messages: lazy locks, puts
//!   and accumulates left in flight until the epoch's end, the latest kept unsent for the
//!   unlock to go with (004);
//! - [`foreign`]: combiners a front end registers (the C compiler's `long double`), which
//!   targets reached by messages use.
//!
//! - [`assert`]: what a program asserts to a synchronization call (`MPI_MODE_*`).

pub mod assert;
pub mod atomic;
pub mod foreign;
pub mod gate;
pub mod lock;
// Its lock words live in shared memory, which loom's atomics cannot.
#[cfg(not(loom))]
pub mod access;
#[cfg(not(loom))]
pub mod lazy;
#[cfg(not(loom))]
pub mod remote;
#[cfg(not(loom))]
pub mod table;
#[cfg(not(loom))]
pub mod window;
