//! Where a member of a node-shared area ([`super::shm::NodeArea`]) puts data larger than a
//! slot line: one after another around a ring over its two large buffers, so that a member
//! writing medium-sized data (a 4 KiB broadcast, an 8 KiB scatter) runs as many collectives
//! ahead of its slowest reader as the ring holds, not one. Sans-IO: it only says where the
//! data goes and which earlier collective every member must have finished first.

use std::collections::VecDeque;

/// Data of one collective placed in the ring, which members may still be reading.
#[derive(Clone, Copy, Debug)]
struct Placed {
    /// The collective.
    k: u64,
    /// Where its data starts, counted in bytes placed since the ring began (laps included).
    start: u64,
}

/// A member's ring of bytes for its large data.
#[derive(Debug)]
pub struct LargeRing {
    /// Bytes in the ring.
    bytes: u64,
    /// Where the next placement may start (counted as `Placed::start`).
    next: u64,
    /// Placements that may still be read, oldest first.
    placed: VecDeque<Placed>,
}

impl LargeRing {
    /// A ring of `bytes` bytes (a multiple of 128: two halves of whole lines).
    pub fn new(bytes: usize) -> Self {
        debug_assert!(bytes.is_multiple_of(128));
        LargeRing {
            bytes: bytes as u64,
            next: 0,
            placed: VecDeque::new(),
        }
    }

    /// Places `len` bytes (at most half the ring: a large buffer) of collective k, at a
    /// 64-byte boundary, never across the end of either half (so that data placed next never
    /// lies over this, and a member needs no more than that the others have started the
    /// collective before it). Returns the offset in the ring and the progress every member
    /// must have reached before the bytes are written (`ready ≥` it: each member has started
    /// the collective after the last one whose data lay there; at most k − 1), 0 when none
    /// did.
    pub fn place(&mut self, k: u64, len: usize) -> (usize, u64) {
        let size = len.div_ceil(64) as u64 * 64;
        let half = self.bytes / 2;
        assert!(size <= half, "{len} bytes placed in a ring of {}", self.bytes);
        let mut start = self.next;
        if start % half + size > half {
            start = start.next_multiple_of(half);
        }
        let end = start + size;
        self.next = end;
        // Placements that start within the last lap before `end` lie elsewhere in the ring;
        // the older ones may lie where this one goes (and those before them are older still).
        let mut need = 0;
        while let Some(p) = self.placed.front() {
            if p.start + self.bytes >= end {
                break;
            }
            need = need.max(p.k + 1);
            self.placed.pop_front();
        }
        self.placed.push_back(Placed { k, start });
        ((start % self.bytes) as usize, need)
    }

    /// Forgets the placements of the collectives every member has finished (`all_ready`:
    /// the lowest progress among them), which no one reads any more.
    pub fn forget_finished(&mut self, all_ready: u64) {
        while self.placed.front().is_some_and(|p| p.k < all_ready) {
            self.placed.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn halves_alternate_and_wait_for_the_collective_before_last() {
        let mut ring = LargeRing::new(2048);
        assert_eq!(ring.place(1, 1024), (0, 0));
        assert_eq!(ring.place(2, 1000), (1024, 0));
        assert_eq!(ring.place(3, 1024), (0, 2));
        assert_eq!(ring.place(4, 1024), (1024, 3));
        assert_eq!(ring.place(5, 1), (0, 4));
    }

    #[test]
    fn small_placements_run_a_lap_ahead_and_skip_the_end() {
        let mut ring = LargeRing::new(4096);
        for k in 1..=4 {
            assert_eq!(ring.place(k, 1000), ((k as usize - 1) * 1024, 0));
        }
        // The ring is full: the next lap starts over collective 1's data (and, from 1,024,
        // collective 2's).
        assert_eq!(ring.place(5, 1500), (0, 3));
        ring.forget_finished(4);
        assert_eq!(ring.place(6, 64), (1536, 0));
        // Does not fit before the end of the first half: starts the second.
        assert_eq!(ring.place(7, 1000), (2048, 0));
        // Nor before the ring's end: goes over everything placed since collective 4.
        assert_eq!(ring.place(8, 2000), (0, 7));
    }

    /// Random sizes and a reader that lags: no placement overlaps one whose collective the
    /// returned progress does not cover.
    #[test]
    fn no_placement_covers_data_still_read() {
        let bytes = 64 * 100;
        let mut ring = LargeRing::new(bytes);
        let mut live: Vec<(u64, usize, usize)> = Vec::new(); // (k, offset, end)
        let mut x: u64 = 12345;
        let mut ready = 0u64;
        for k in 1..5000u64 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let len = 1 + (x >> 33) as usize % (bytes / 2);
            let (at, need) = ring.place(k, len);
            assert!(at + len <= bytes && need < k);
            assert!(at / (bytes / 2) == (at + len - 1) / (bytes / 2), "across a half's end");
            ready = ready.max(need);
            for &(j, lo, hi) in &live {
                if j >= ready {
                    assert!(hi <= at || at + len <= lo, "collective {k} over {j}'s data");
                }
            }
            live.retain(|&(j, _, _)| j >= ready);
            live.push((k, at, at + len));
            if x.is_multiple_of(7) {
                ready = ready.max(k.saturating_sub(3));
                ring.forget_finished(ready);
            }
        }
    }
}
