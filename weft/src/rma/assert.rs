//! What a program asserts to a synchronization call (`MPI_MODE_*`), so the call can do less:
//! a set of [`Assert`] flags. Zero ([`Assert::NONE`]) is always correct.

use std::fmt;
use std::ops::{BitOr, BitOrAssign};

/// Assertions to a window's synchronization call (MPI 4.1, 12.5.5). Combine them with `|`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Assert(u8);

impl Assert {
    /// No assertion: always correct.
    pub const NONE: Assert = Assert(0);
    /// `MPI_MODE_NOCHECK` (lock, lock_all, start, post): no conflicting lock is held or
    /// requested, or the matching post has already happened; nothing need be checked.
    pub const NO_CHECK: Assert = Assert(1);
    /// `MPI_MODE_NOSTORE` (fence, post): this process did not store into its part since the
    /// last synchronization.
    pub const NO_STORE: Assert = Assert(2);
    /// `MPI_MODE_NOPUT` (fence, post): no put or accumulate will update this process's part
    /// until the next synchronization.
    pub const NO_PUT: Assert = Assert(4);
    /// `MPI_MODE_NOPRECEDE` (fence): the fence completes no operation of this process. Given
    /// by every member or by none.
    pub const NO_PRECEDE: Assert = Assert(8);
    /// `MPI_MODE_NOSUCCEED` (fence): no operation of this process follows the fence (before
    /// the next). Given by every member or by none.
    pub const NO_SUCCEED: Assert = Assert(16);

    /// The flags of both (`|`, in constant expressions).
    pub const fn union(self, other: Assert) -> Assert {
        Assert(self.0 | other.0)
    }

    /// Whether every flag of `other` is in `self`.
    pub const fn contains(self, other: Assert) -> bool {
        self.0 & other.0 == other.0
    }

    /// A fence asserted so by every member separates no operations: it need not synchronize
    /// at all (no barrier).
    pub const fn fence_is_empty(self) -> bool {
        self.contains(Self::NO_PRECEDE.union(Self::NO_SUCCEED))
    }
}

impl BitOr for Assert {
    type Output = Assert;
    fn bitor(self, other: Assert) -> Assert {
        self.union(other)
    }
}

impl BitOrAssign for Assert {
    fn bitor_assign(&mut self, other: Assert) {
        self.0 |= other.0;
    }
}

impl fmt::Debug for Assert {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const NAMES: [(Assert, &str); 5] = [
            (Assert::NO_CHECK, "NO_CHECK"),
            (Assert::NO_STORE, "NO_STORE"),
            (Assert::NO_PUT, "NO_PUT"),
            (Assert::NO_PRECEDE, "NO_PRECEDE"),
            (Assert::NO_SUCCEED, "NO_SUCCEED"),
        ];
        let set: Vec<&str> = NAMES
            .iter()
            .filter(|(a, _)| self.contains(*a))
            .map(|&(_, n)| n)
            .collect();
        match set.is_empty() {
            true => f.write_str("Assert(NONE)"),
            false => write!(f, "Assert({})", set.join(" | ")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Assert;

    #[test]
    fn flags_combine_and_name_themselves() {
        let a = Assert::NO_PRECEDE | Assert::NO_STORE;
        assert!(a.contains(Assert::NO_PRECEDE) && a.contains(Assert::NO_STORE));
        assert!(!a.contains(Assert::NO_SUCCEED));
        assert!(!a.fence_is_empty());
        let mut b = a;
        b |= Assert::NO_SUCCEED;
        assert!(b.fence_is_empty());
        assert!(Assert::NONE.contains(Assert::NONE));
        assert_eq!(format!("{a:?}"), "Assert(NO_STORE | NO_PRECEDE)");
        assert_eq!(format!("{:?}", Assert::NONE), "Assert(NONE)");
    }
}
