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
    /// A tag the next collective on a pair takes instead of a new number: a persistent
    /// collective's, taken when it was initialized and used by each of its starts
    /// ([`Sequences::replay`]).
    replay: Option<(u32, i32)>,
}

impl Default for Sequences {
    fn default() -> Self {
        Sequences {
            next: vec![0; MAX_PAIRS],
            replay: None,
        }
    }
}

impl Sequences {
    /// The tag of the next collective on `pair` (the replayed one, if set for `pair`).
    pub fn next_tag(&mut self, pair: u32) -> i32 {
        if let Some((p, tag)) = self.replay.take() {
            if p == pair {
                return tag;
            }
        }
        let n = &mut self.next[pair as usize];
        let seq = *n % SEQUENCES;
        *n = n.wrapping_add(1);
        COLL_TAG_TOP - seq as i32
    }

    /// Makes the next collective on `pair` take `tag` (a number `next_tag` gave earlier),
    /// or, with `None`, forgets a replay not taken. A persistent collective's members take
    /// its number when they initialize it, in the order of their other collectives, so they
    /// agree on it; each start runs with it. Starts of one persistent collective never
    /// overlap (MPI: its request must be inactive), and messages between two members keep
    /// their order, so one start's messages never match another's receives.
    pub fn replay(&mut self, replay: Option<(u32, i32)>) {
        self.replay = replay;
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
        s.replay(Some((3, low)));
        assert_eq!(s.next_tag(5), COLL_TAG_TOP - 1, "a replay is for its pair only");
        s.replay(Some((3, low)));
        assert_eq!(s.next_tag(3), low, "the replayed number");
        assert_eq!(s.next_tag(3), COLL_TAG_TOP - 1, "once; then the sequence goes on");
    }
}
