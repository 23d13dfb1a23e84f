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
    /// A port name that names no open port, or a failed meeting at one (MPI_ERR_PORT).
    Port,
    /// Processes could not be spawned (MPI_ERR_SPAWN).
    Spawn,
    /// A service name that is not published (MPI_ERR_NAME).
    Name,
    /// A service that cannot be published or unpublished (MPI_ERR_SERVICE).
    Service,
    /// A window displacement outside the target's part (MPI_ERR_DISP).
    Disp,
    /// A one-sided call outside the epoch it needs, or an epoch call out of order
    /// (MPI_ERR_RMA_SYNC).
    RmaSync,
    /// An assertion a synchronization call does not take (MPI_ERR_ASSERT).
    Assert,
    /// A datatype that does not fit the call: sides of different sizes, elements of another
    /// type than the call needs (MPI_ERR_TYPE).
    Type,
    /// An internal invariant failed: a bug in weft.
    Internal,
}

impl ErrorClass {
    /// Every class, in declaration order (`class as u8` indexes it).
    const ALL: [ErrorClass; 24] = [
        Self::Rank,
        Self::Tag,
        Self::Count,
        Self::Truncate,
        Self::Op,
        Self::Root,
        Self::Handle,
        Self::Unsupported,
        Self::Boot,
        Self::Os,
        Self::Resource,
        Self::Topology,
        Self::Dims,
        Self::Comm,
        Self::Arg,
        Self::Port,
        Self::Spawn,
        Self::Name,
        Self::Service,
        Self::Disp,
        Self::RmaSync,
        Self::Assert,
        Self::Type,
        Self::Internal,
    ];

    /// The class numbered `n` (`class as u8`), for errors that travel between ranks;
    /// `Internal` for a number no class has.
    pub(crate) fn from_index(n: u8) -> ErrorClass {
        Self::ALL.get(n as usize).copied().unwrap_or(Self::Internal)
    }
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

/// rsmpi's error type for the calls that return one (spawning): a spawn that started fewer
/// processes than asked, a string with an interior NUL, or any of Weft's errors.
#[derive(Debug, thiserror::Error)]
pub enum MpiError {
    /// Failed to spawn some processes: how many, of how many.
    #[error("Failed to spawn {0} of {1} processes")]
    Spawn(i32, i32),
    /// A string with an interior 0 byte.
    #[error("An interior 0 byte was found in string")]
    StringNul(#[from] std::ffi::NulError),
    /// Any other error.
    #[error(transparent)]
    Weft(#[from] Error),
}

#[cfg(test)]
mod tests {
    use super::ErrorClass;

    #[test]
    fn every_class_travels_by_its_number() {
        for c in ErrorClass::ALL {
            assert_eq!(ErrorClass::from_index(c as u8), c);
        }
        assert_eq!(ErrorClass::from_index(200), ErrorClass::Internal);
    }
}
