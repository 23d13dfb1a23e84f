//! Context ids: every communicator has a pair (point-to-point, collective) that no other
//! communicator sharing a member uses. Each rank keeps a bit mask of free pair numbers; the
//! members of a new communicator AND their masks together and take the lowest common free
//! pair (MPICH's algorithm), so ids never collide and no rank needs a global view.

use crate::error::{Error, ErrorClass, Result};
use std::cell::RefCell;
use std::collections::BTreeSet;
use std::rc::Rc;

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

/// An agreement in progress: the context its rounds travel on and their tag. No two in
/// progress at one rank share both (nonblocking ones take their tag from the communicator's
/// collective sequence), and every member names an agreement alike, so claims order the
/// agreements the same way everywhere.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Claim {
    /// The context the agreement's messages travel on.
    pub context: u32,
    /// Their tag.
    pub tag: i32,
}

/// Bytes of an offer: the mask, then a word that is all ones when the offer is the whole
/// mask an agreement may take from.
pub const OFFER_LEN: usize = WORDS * 8 + 8;

/// Words of the mask (64 pairs each) kept for agreements' first rounds.
const EAGER_WORDS: usize = 1;

/// This rank's free-pair mask and the agreements using it, shared by every agreement in
/// flight here (a nonblocking one's schedule holds a [`share`](ContextMask::share)).
///
/// Several agreements may run at once on overlapping communicators (`MPI_Comm_idup`s started
/// in different orders at different members, a blocking constructor while some are in
/// flight). Two must never take a pair from the same part of the mask at once, so a round
/// offers a part only while no other round here holds it, and offers nothing otherwise; a
/// round in which any member offered nothing takes no pair and is repeated. MPICH's scheme:
/// an agreement's first round offers the small eager part, so a round waiting for members
/// that have not started it yet holds nothing else; an agreement whose first round failed
/// (so every member has started it) is listed, and only the lowest listed claim offers the
/// rest of the mask. Its members all list it, so it gets every member's mask and completes.
#[derive(Debug, Default)]
pub struct ContextMask {
    state: Rc<RefCell<Masks>>,
}

#[derive(Debug)]
struct Masks {
    free: [u64; WORDS],
    /// The round in flight that offered the eager part.
    eager_holder: Option<Claim>,
    /// The round in flight that offered the rest.
    holder: Option<Claim>,
    /// Agreements past their first round.
    listed: BTreeSet<Claim>,
}

impl Default for Masks {
    fn default() -> Self {
        let mut free = [u64::MAX; WORDS];
        free[0] &= !0b11; // world and self
        Masks {
            free,
            eager_holder: None,
            holder: None,
            listed: BTreeSet::new(),
        }
    }
}

impl ContextMask {
    /// Another handle on the same mask (for a nonblocking agreement's schedule).
    pub fn share(&self) -> ContextMask {
        ContextMask {
            state: Rc::clone(&self.state),
        }
    }

    /// Marks `pair` used.
    pub fn take(&mut self, pair: u32) {
        self.state.borrow_mut().take(pair);
    }

    /// Marks `pair` free again.
    pub fn release(&mut self, pair: u32) {
        if pair > SELF_PAIR {
            self.state.borrow_mut().free[pair as usize / 64] |= 1 << (pair % 64);
        }
    }

    /// What `claim` offers in its next round ([`OFFER_LEN`] bytes): the part of the mask
    /// its round may take from, if no other round here holds it, else nothing.
    pub fn offer(&self, claim: Claim) -> [u8; OFFER_LEN] {
        let mut m = self.state.borrow_mut();
        let mut out = [0u8; OFFER_LEN];
        let words = if !m.listed.contains(&claim) {
            if m.eager_holder.is_some() {
                return out;
            }
            m.eager_holder = Some(claim);
            0..EAGER_WORDS
        } else {
            if m.holder.is_some() || m.listed.first() != Some(&claim) {
                return out;
            }
            m.holder = Some(claim);
            out[WORDS * 8..].fill(0xff);
            EAGER_WORDS..WORDS
        };
        for i in words {
            out[i * 8..i * 8 + 8].copy_from_slice(&m.free[i].to_le_bytes());
        }
        out
    }

    /// Ends `claim`'s round whose AND over the members is `and`: `Some` pair (now taken here)
    /// or error when the agreement is over, `None` when the round must be repeated.
    pub fn settle(&self, claim: Claim, and: &[u8]) -> Option<Result<u32>> {
        let mut m = self.state.borrow_mut();
        m.let_go(claim);
        let common: Vec<u64> = and[..WORDS * 8]
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect();
        let got = lowest_free(&common);
        let whole_mask = and[WORDS * 8..OFFER_LEN].iter().all(|&b| b == 0xff);
        if got.is_err() && !whole_mask {
            m.listed.insert(claim);
            return None;
        }
        if let Ok(p) = got {
            m.take(p);
        }
        m.listed.remove(&claim);
        Some(got)
    }

    /// Forgets `claim` (done, or failed part-way): gives back what its round held.
    pub fn leave(&self, claim: Claim) {
        let mut m = self.state.borrow_mut();
        m.let_go(claim);
        m.listed.remove(&claim);
    }
}

impl Masks {
    fn take(&mut self, pair: u32) {
        self.free[pair as usize / 64] &= !(1 << (pair % 64));
    }

    /// Gives back the parts `claim`'s round held.
    fn let_go(&mut self, claim: Claim) {
        if self.eager_holder == Some(claim) {
            self.eager_holder = None;
        }
        if self.holder == Some(claim) {
            self.holder = None;
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

    /// The AND of `offers`, as the members' round computes it.
    fn and_of(offers: &[[u8; OFFER_LEN]]) -> Vec<u8> {
        (0..OFFER_LEN)
            .map(|i| offers.iter().fold(0xff, |a, o| a & o[i]))
            .collect()
    }

    const A: Claim = Claim { context: 3, tag: -1 };
    const B: Claim = Claim { context: 5, tag: -1 };

    #[test]
    fn agreement_takes_lowest_common_free_pair() {
        let mut a = ContextMask::default();
        let mut b = ContextMask::default();
        a.take(2);
        b.take(3);
        let round = |a: &ContextMask, b: &ContextMask| {
            let and = and_of(&[a.offer(A), b.offer(A)]);
            (a.settle(A, &and), b.settle(A, &and))
        };
        assert_eq!(round(&a, &b), (Some(Ok(4)), Some(Ok(4))));
        a.release(2);
        b.release(4);
        assert_eq!(round(&a, &b), (Some(Ok(2)), Some(Ok(2))), "2 is free at both again");
        for p in 0..64 {
            a.take(p);
        }
        assert_eq!(round(&a, &b), (None, None), "none in the eager part: again");
        assert_eq!(round(&a, &b), (Some(Ok(64)), Some(Ok(64))), "from the rest of the mask");
        for p in 0..MAX_PAIRS as u32 {
            a.take(p);
        }
        assert_eq!(round(&a, &b), (None, None));
        let (ea, eb) = round(&a, &b);
        assert_eq!(ea.unwrap().unwrap_err().class, ErrorClass::Resource);
        assert_eq!(eb.unwrap().unwrap_err().class, ErrorClass::Resource);
    }

    #[test]
    fn one_round_at_a_time_offers_each_part_and_the_lowest_listed_claim_goes_first() {
        let m = ContextMask::default();
        let real = |o: [u8; OFFER_LEN]| o.iter().any(|&b| b != 0);
        assert!(real(m.offer(B)), "B's first round offers the eager part");
        assert!(!real(m.offer(A)), "the eager part is held by B's round");
        assert!(m.settle(A, &[0; OFFER_LEN]).is_none(), "A's first round failed: listed");
        assert!(m.settle(B, &[0; OFFER_LEN]).is_none(), "so did B's: listed");
        assert!(!real(m.offer(B)), "A is the lowest listed claim");
        let a = m.offer(A);
        assert_eq!((a[0], a[OFFER_LEN - 1]), (0, 0xff), "the rest of the mask, whole");
        assert!(!real(m.offer(B)));
        assert_eq!(m.settle(A, &a), Some(Ok(64)));
        let b = m.offer(B);
        assert!(real(b), "B's turn at last");
        assert_eq!(m.settle(B, &b), Some(Ok(65)));
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
