//! Collective sequence numbers: every collective on a communicator gets the next number of
//! its context pair, and its messages carry a tag made from it, so that several nonblocking
//! collectives in flight on one communicator never match each other's messages. MPI makes
//! every member call a communicator's collectives in the same order, so the members agree
//! on each number without talking. The counter belongs to the pair, not to a communicator
//! handle (a program may hold several handles of the world).

use super::context::MAX_PAIRS;

/// Tags of collective messages lie in `COLL_TAG_TOP - SEQUENCES + 1 ..= COLL_TAG_TOP`: below
/// the internal tags of communicator creation (-1 to -65535) and above those of
/// `create_from_group` (below -2^30).
const COLL_TAG_TOP: i32 = -(1 << 16);
/// Numbers a pair goes through before reusing one (far more than can be in flight).
const SEQUENCES: u32 = 1 << 28;

/// The next collective number of every context pair.
#[derive(Clone, Debug)]
pub struct Sequences {
    next: Vec<u32>,
}

impl Default for Sequences {
    fn default() -> Self {
        Sequences {
            next: vec![0; MAX_PAIRS],
        }
    }
}

impl Sequences {
    /// The tag of the next collective on `pair`.
    pub fn next_tag(&mut self, pair: u32) -> i32 {
        let n = &mut self.next[pair as usize];
        let seq = *n % SEQUENCES;
        *n = n.wrapping_add(1);
        COLL_TAG_TOP - seq as i32
    }

    /// Starts `pair` over (it was freed; the members that reuse it all start from zero).
    pub fn reset(&mut self, pair: u32) {
        self.next[pair as usize] = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_follow_each_pair_and_stay_in_their_range() {
        let mut s = Sequences::default();
        assert_eq!(s.next_tag(0), COLL_TAG_TOP);
        assert_eq!(s.next_tag(0), COLL_TAG_TOP - 1);
        assert_eq!(s.next_tag(5), COLL_TAG_TOP, "pairs count apart");
        s.reset(0);
        assert_eq!(s.next_tag(0), COLL_TAG_TOP);
        s.next[3] = SEQUENCES - 1;
        let low = s.next_tag(3);
        assert!(low > -(1 << 30), "stays above create_from_group's tags");
        assert_eq!(s.next_tag(3), COLL_TAG_TOP, "wraps");
    }
}
