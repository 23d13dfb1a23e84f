//! Typed errors. Every error names the call that failed and the values involved.

use std::fmt;

/// The class of an error, in the spirit of MPI's error classes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorClass {
    /// A rank outside the communicator.
    Rank,
    /// A tag outside `0..=TAG_UB` (or `ANY_TAG` where it is not allowed).
    Tag,
    /// A negative or otherwise invalid element count.
    Count,
    /// A message longer than the receive buffer.
    Truncate,
    /// A reduction operation that does not apply to the datatype (MPI_ERR_OP).
    Op,
    /// A root outside the communicator (MPI_ERR_ROOT).
    Root,
    /// A communicator, group or request that was freed or never existed.
    Handle,
    /// Something this build or this machine does not support.
    Unsupported,
    /// The process manager (PMI) failed or answered something unexpected.
    Boot,
    /// An operating-system call failed.
    Os,
    /// A resource (buffer space, context ids) is exhausted.
    Resource,
    /// A communicator without the process topology a call needs (MPI_ERR_TOPOLOGY).
    Topology,
    /// Invalid Cartesian dimensions (MPI_ERR_DIMS).
    Dims,
    /// A communicator of the wrong kind for the call: an intercommunicator where only an
    /// intracommunicator will do, or the reverse (MPI_ERR_COMM).
    Comm,
    /// Any other invalid argument.
    Arg,
    /// An internal invariant failed: a bug in weft.
    Internal,
}

/// An error from a weft call.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct Error {
    /// What kind of failure this is.
    pub class: ErrorClass,
    /// The call that failed, e.g. `"send"` or `"PMI get"`.
    pub call: &'static str,
    /// A sentence naming the values involved.
    pub detail: String,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "weft: {}: {}", self.call, self.detail)
    }
}

impl Error {
    /// Builds an error of `class` for `call` with a message naming the values.
    pub fn new(class: ErrorClass, call: &'static str, detail: impl Into<String>) -> Self {
        Error {
            class,
            call,
            detail: detail.into(),
        }
    }

    /// An operating-system error, keeping the OS message.
    pub fn os(call: &'static str, what: impl fmt::Display, err: std::io::Error) -> Self {
        Error::new(ErrorClass::Os, call, format!("{what}: {err}"))
    }

    /// A feature that is not built yet or not available here.
    pub fn unsupported(call: &'static str, what: impl Into<String>) -> Self {
        Error::new(ErrorClass::Unsupported, call, what)
    }
}

/// Result alias used throughout weft.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The API's panicking forms' error path: panics with the error, reported at the caller's
/// line (the panicking calls of the API are `#[track_caller]` down to here).
#[track_caller]
pub(crate) fn fatal<T>(r: Result<T>) -> T {
    match r {
        Ok(v) => v,
        Err(e) => panic!("{e}"),
    }
}
