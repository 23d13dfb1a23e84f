//! Context ids: every communicator has a pair (point-to-point, collective) that no other
//! communicator sharing a member uses. Each rank keeps a bit mask of free pair numbers; the
//! members of a new communicator AND their masks together and take the lowest common free
//! pair (MPICH's algorithm), so ids never collide and no rank needs a global view.

use crate::error::{Error, ErrorClass, Result};

/// Pair numbers available per rank.
pub const MAX_PAIRS: usize = 2048;
const WORDS: usize = MAX_PAIRS / 64;

/// Pair 0 is the world, pair 1 is `self`; both are never freed.
pub const WORLD_PAIR: u32 = 0;
/// The pair of the `self` communicator.
pub const SELF_PAIR: u32 = 1;

/// The point-to-point context of pair `p`.
pub fn p2p_context(pair: u32) -> u32 {
    pair * 2
}
/// The collective context of pair `p`.
pub fn coll_context(pair: u32) -> u32 {
    pair * 2 + 1
}

/// A value per context pair, found by indexing (no hashing: collectives look theirs up on
/// every call).
#[derive(Debug)]
pub struct PairTable<T> {
    slots: Vec<Option<T>>,
}

impl<T> Default for PairTable<T> {
    fn default() -> Self {
        PairTable { slots: Vec::new() }
    }
}

impl<T> PairTable<T> {
    /// Pair `pair`'s value, if it has one.
    #[inline]
    pub fn get_mut(&mut self, pair: u32) -> Option<&mut T> {
        self.slots.get_mut(pair as usize)?.as_mut()
    }

    /// Whether pair `pair` has a value.
    #[inline]
    pub fn contains(&self, pair: u32) -> bool {
        self.slots.get(pair as usize).is_some_and(Option::is_some)
    }

    /// Gives pair `pair` the value `v` (replacing any).
    pub fn insert(&mut self, pair: u32, v: T) {
        let i = pair as usize;
        if self.slots.len() <= i {
            self.slots.resize_with(i + 1, || None);
        }
        self.slots[i] = Some(v);
    }

    /// Takes pair `pair`'s value away.
    pub fn remove(&mut self, pair: u32) -> Option<T> {
        self.slots.get_mut(pair as usize)?.take()
    }
}

/// This rank's free-pair mask.
#[derive(Clone, Debug)]
pub struct ContextMask {
    free: [u64; WORDS],
}

impl Default for ContextMask {
    fn default() -> Self {
        let mut free = [u64::MAX; WORDS];
        free[0] &= !0b11; // world and self
        ContextMask { free }
    }
}

impl ContextMask {
    /// The mask as words (bit `p % 64` of word `p / 64` set: pair `p` free), to AND with the
    /// other members' masks.
    pub fn words(&self) -> [u64; WORDS] {
        self.free
    }

    /// The lowest pair free in this mask and in every mask of `others` (as bytes).
    pub fn lowest_common(&self, others: &[Vec<u8>]) -> Result<u32> {
        let mut common = self.free;
        for o in others {
            for (i, c) in common.iter_mut().enumerate() {
                *c &= u64::from_le_bytes(o[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
            }
        }
        lowest_free(&common)
    }

    /// The mask as bytes, for exchange with the other members.
    pub fn to_bytes(&self) -> Vec<u8> {
        self.free.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    /// Marks `pair` used.
    pub fn take(&mut self, pair: u32) {
        self.free[pair as usize / 64] &= !(1 << (pair % 64));
    }

    /// Marks `pair` free again.
    pub fn release(&mut self, pair: u32) {
        if pair > SELF_PAIR {
            self.free[pair as usize / 64] |= 1 << (pair % 64);
        }
    }
}

/// The lowest pair set in `common` (the AND of members' masks), or the error that they have
/// none in common.
pub fn lowest_free(common: &[u64]) -> Result<u32> {
    for (i, w) in common.iter().enumerate() {
        if *w != 0 {
            return Ok((i * 64 + w.trailing_zeros() as usize) as u32);
        }
    }
    Err(Error::new(
        ErrorClass::Resource,
        "communicator creation",
        format!("all {MAX_PAIRS} context ids are in use; free communicators you no longer need"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agreement_takes_lowest_common_free_pair() {
        let mut a = ContextMask::default();
        let mut b = ContextMask::default();
        a.take(2);
        b.take(3);
        assert_eq!(a.lowest_common(&[b.to_bytes()]).unwrap(), 4);
        a.release(2);
        assert_eq!(a.lowest_common(&[b.to_bytes()]).unwrap(), 2);
        a.release(WORLD_PAIR);
        assert_eq!(
            a.lowest_common(&[]).unwrap(),
            2,
            "world pair is never freed"
        );
        for p in 0..MAX_PAIRS as u32 {
            a.take(p);
        }
        assert_eq!(
            a.lowest_common(&[]).unwrap_err().class,
            ErrorClass::Resource
        );
    }

    #[test]
    fn a_pair_table_holds_one_value_per_pair() {
        let mut t = PairTable::default();
        assert!(!t.contains(5) && t.get_mut(5).is_none());
        t.insert(5, "five");
        t.insert(2, "two");
        assert!(t.contains(5) && t.contains(2) && !t.contains(3) && !t.contains(9));
        assert_eq!(t.get_mut(5), Some(&mut "five"));
        t.insert(5, "again");
        assert_eq!(t.remove(5), Some("again"));
        assert!(!t.contains(5) && t.remove(5).is_none());
        assert_eq!(t.get_mut(2), Some(&mut "two"));
    }
}
