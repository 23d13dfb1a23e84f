//! Barrier.

use super::{Members, Schedule, Span};
use crate::engine::schedule::Area;

const EMPTY: Span = Span {
    area: Area::Output,
    off: 0,
    len: 0,
};

/// Dissemination barrier: in round k every member signals the one 2^k places after it and
/// waits for the one 2^k places before it; ⌈log2 n⌉ rounds, no member does more than the rest.
pub fn dissemination(s: &mut Schedule, m: &Members) {
    let n = m.n();
    let mut k = 1;
    while k < n {
        s.send(m.at((m.me + k) % n), EMPTY);
        s.recv(m.at((m.me + n - k) % n), EMPTY);
        s.fence();
        k *= 2;
    }
}
