//! What a completed receive got: [`Status`]. Its own module, below both point-to-point and
//! requests, so that neither depends on the other for it.

use super::datatype::{Count, Datatype};
use super::topology::Rank;
use crate::comm::group::GroupData;
use crate::engine::request::MsgStatus;

/// MPI_UNDEFINED: the count of a message that is not a whole number of elements, or whose
/// count does not fit in a [`Count`] (same value as MPICH's and Open MPI's).
pub const UNDEFINED: Count = -32766;

/// What a completed receive got.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Status {
    source: Rank,
    tag: i32,
    bytes: usize,
    cancelled: bool,
}

impl Status {
    /// Rank of the sender in the communicator.
    pub fn source_rank(&self) -> Rank {
        self.source
    }
    /// The message's tag.
    pub fn tag(&self) -> i32 {
        self.tag
    }
    /// Number of elements of `d` in the message (MPI_Get_count): [`UNDEFINED`] when the
    /// message is not a whole number of elements or the count does not fit in a [`Count`]
    /// (above 2^31 - 1 elements; use [`Status::count_c`] then).
    pub fn count<D: Datatype>(&self, d: D) -> Count {
        Count::try_from(self.count_c(d)).unwrap_or(UNDEFINED)
    }
    /// Number of elements of `d` in the message, large-count form (MPI-4's
    /// MPI_Get_count_c): [`UNDEFINED`] when the message is not a whole number of elements.
    pub fn count_c<D: Datatype>(&self, d: D) -> i64 {
        match d.type_map().size() {
            0 => 0,
            size if self.bytes.is_multiple_of(size) => (self.bytes / size) as i64,
            _ => UNDEFINED.into(),
        }
    }
    /// Bytes in the message.
    pub fn byte_count(&self) -> usize {
        self.bytes
    }
    /// Whether the request was cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.cancelled
    }
}

impl std::fmt::Debug for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Status")
            .field("source_rank", &self.source)
            .field("tag", &self.tag)
            .field("bytes", &self.bytes)
            .finish()
    }
}

#[inline]
pub(crate) fn to_status(st: &MsgStatus, group: Option<&GroupData>) -> Status {
    let source = match group {
        Some(g) => g.rank_of(st.source).map_or(-1, |r| r as Rank),
        None => st.source as Rank,
    };
    Status {
        source,
        tag: st.tag,
        bytes: st.len,
        cancelled: st.cancelled,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datatype::Equivalence;

    fn of(bytes: usize) -> Status {
        to_status(
            &MsgStatus {
                len: bytes,
                ..MsgStatus::default()
            },
            None,
        )
    }

    #[test]
    fn counts_that_do_not_fit_or_are_not_whole_are_undefined() {
        let big = of(3 << 30); // 3 GiB
        assert_eq!(big.count(u8::equivalent_datatype()), UNDEFINED);
        assert_eq!(big.count_c(u8::equivalent_datatype()), 3 << 30);
        assert_eq!(big.count(u16::equivalent_datatype()), 3 << 29);
        assert_eq!(of(10).count(u64::equivalent_datatype()), UNDEFINED);
        assert_eq!(of(10).count_c(u64::equivalent_datatype()), -32766);
        assert_eq!(of(16).count(u64::equivalent_datatype()), 2);
        assert_eq!(of(0).count(u64::equivalent_datatype()), 0);
        assert_eq!(
            of(i32::MAX as usize).count(u8::equivalent_datatype()),
            i32::MAX
        );
        assert_eq!(of(1 << 31).count(u8::equivalent_datatype()), UNDEFINED);
    }
}
