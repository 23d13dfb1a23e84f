//! All-to-all: member i's block j goes to member j's block i. `send[j]` and `recv[j]` are
//! (byte offset, length) of the blocks in `src` and `dst`; equal blocks are the special case.

use super::{Members, Schedule, Span};

/// Receive buffers of at least this many bytes take the member's own block by non-temporal
/// stores ([`Schedule::copy_streaming`]).
pub const STREAM_OWN_FROM: usize = 4 << 20;

/// Pairwise exchange: in step i every member sends to the one i places after it and
/// receives from the one i places before, one pair at a time (n−1 steps); nothing floods a
/// member.
pub fn pairwise(
    s: &mut Schedule,
    m: &Members,
    src: Span,
    send: &[(usize, usize)],
    dst: Span,
    recv: &[(usize, usize)],
) {
    let (n, me) = own_block(s, m, src, send, dst, recv);
    for i in 1..n {
        let to = (me + i) % n;
        let from = (me + n - i) % n;
        s.send(m.at(to), src.sub(send[to].0, send[to].1));
        s.recv(m.at(from), dst.sub(recv[from].0, recv[from].1));
        s.fence();
    }
}

/// Every send and receive started at once (in the pairwise order, so the first partners
/// differ from member to member); one round. For small blocks.
pub fn scattered(
    s: &mut Schedule,
    m: &Members,
    src: Span,
    send: &[(usize, usize)],
    dst: Span,
    recv: &[(usize, usize)],
) {
    let (n, me) = own_block(s, m, src, send, dst, recv);
    for i in 1..n {
        let from = (me + n - i) % n;
        s.recv(m.at(from), dst.sub(recv[from].0, recv[from].1));
    }
    for i in 1..n {
        let to = (me + i) % n;
        s.send(m.at(to), src.sub(send[to].0, send[to].1));
    }
}

/// Copies this member's block to itself; returns (member count, my position).
fn own_block(
    s: &mut Schedule,
    m: &Members,
    src: Span,
    send: &[(usize, usize)],
    dst: Span,
    recv: &[(usize, usize)],
) -> (usize, usize) {
    let me = m.me;
    let (from, to) = (src.sub(send[me].0, send[me].1), dst.sub(recv[me].0, recv[me].1));
    if dst.len >= STREAM_OWN_FROM {
        s.copy_streaming(from, to);
    } else {
        s.copy(from, to);
    }
    (m.n(), me)
}
