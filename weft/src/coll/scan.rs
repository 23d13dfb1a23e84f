//! Prefix reductions: member i gets the reduction of members 0..=i (scan) or 0..i (exclusive
//! scan; member 0's result is left as it was).

use super::{Members, Schedule, Span};

/// Recursive doubling: in step k each member exchanges its partial reduction with the member
/// 2^k away (by XOR) and folds in what came from below. log2 n steps; operands combined in
/// rank order, so operations that are not commutative work.
pub fn recursive_doubling(s: &mut Schedule, m: &Members, src: Span, dst: Span, exclusive: bool) {
    let n = m.n();
    let me = m.me;
    let len = src.len;
    // `partial`: the reduction of the members this one has heard from, itself included.
    let partial = Span::new(s.scratch(len), 0, len);
    s.copy(src, partial);
    if !exclusive {
        s.copy(src, dst);
    }
    let tmp = Span::new(s.scratch(len), 0, len);
    let mut have_lower = false;
    let mut mask = 1;
    while mask < n {
        let partner = me ^ mask;
        if partner < n {
            s.send(m.at(partner), partial);
            s.recv(m.at(partner), tmp);
            s.fence();
            if partner < me {
                // From below: it goes on the left, in the result too.
                s.reduce(tmp, partial, true);
                if exclusive && !have_lower {
                    s.copy(tmp, dst);
                } else {
                    s.reduce(tmp, dst, true);
                }
                have_lower = true;
            } else {
                s.reduce(tmp, partial, false);
            }
        }
        mask <<= 1;
    }
}
