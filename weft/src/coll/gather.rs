//! Gather, scatter and allgather, with equal blocks (`len` bytes from each member) or with a
//! block per member (`block[j]` = (byte offset, length) of member j's part of the root's or
//! every member's buffer).

use super::{binomial_parent, binomial_subtree, blocks, lowest_bit, Members, Schedule, Span};

/// Linear gather: every member sends its block straight to the root. One round; the root
/// takes n−1 messages. For few members or large blocks.
pub fn gatherv_linear(
    s: &mut Schedule,
    m: &Members,
    root: usize,
    src: Span,
    dst: Span,
    block: &[(usize, usize)],
) {
    if m.me == root {
        for (j, &(off, len)) in block.iter().enumerate() {
            let into = dst.sub(off, len);
            if j == root {
                s.copy(src, into);
            } else {
                s.recv_shared(m.at(j), into);
            }
        }
    } else {
        s.send(m.at(root), src);
    }
}

/// Binomial-tree gather of `len`-byte blocks: each member forwards its whole subtree's blocks
/// at once, so the root takes ⌈log2 n⌉ messages. For small blocks.
pub fn gather_binomial(s: &mut Schedule, m: &Members, root: usize, src: Span, dst: Span) {
    let n = m.n();
    let len = src.len;
    let vr = m.vrank(root);
    // Blocks of relative ranks vr, vr+1, … of my subtree, in that order.
    let subtree = binomial_subtree(vr, n);
    if vr != 0 && subtree == 1 {
        // A leaf sends its own block as it is (half the members: no copy, no scratch).
        s.send(m.rel(root, binomial_parent(vr)), src);
        return;
    }
    let buf = if vr == 0 && root == 0 {
        dst
    } else {
        Span::new(s.scratch(subtree * len), 0, subtree * len)
    };
    s.copy(src, blocks(buf, 0, 1, len));
    let mut mask = 1;
    while mask < n {
        if vr & mask != 0 {
            s.fence();
            s.send(m.rel(root, vr - mask), blocks(buf, 0, subtree, len));
            return;
        }
        if vr + mask < n {
            let count = mask.min(n - vr - mask);
            s.recv_shared(m.rel(root, vr + mask), blocks(buf, mask, count, len));
        }
        mask <<= 1;
    }
    // The root: relative block j is member (j + root) % n's.
    s.fence();
    if root != 0 {
        s.copy(blocks(buf, 0, n - root, len), blocks(dst, root, n - root, len));
        s.copy(blocks(buf, n - root, root, len), blocks(dst, 0, root, len));
    }
}

/// Linear scatter: the root sends each member its block. One round.
pub fn scatterv_linear(
    s: &mut Schedule,
    m: &Members,
    root: usize,
    src: Span,
    block: &[(usize, usize)],
    dst: Span,
) {
    if m.me == root {
        for (j, &(off, len)) in block.iter().enumerate() {
            let from = src.sub(off, len);
            if j == root {
                s.copy(from, dst);
            } else {
                s.send(m.at(j), from);
            }
        }
    } else {
        s.recv(m.at(root), dst);
    }
}

/// Binomial-tree scatter of `len`-byte blocks: the root sends each subtree its blocks at
/// once; ⌈log2 n⌉ rounds.
pub fn scatter_binomial(s: &mut Schedule, m: &Members, root: usize, src: Span, dst: Span) {
    let n = m.n();
    let len = dst.len;
    let vr = m.vrank(root);
    let subtree = binomial_subtree(vr, n);
    let buf = if vr == 0 {
        if root == 0 {
            src
        } else {
            // Relative order: member (j + root) % n's block at j.
            let b = Span::new(s.scratch(n * len), 0, n * len);
            s.copy(blocks(src, root, n - root, len), blocks(b, 0, n - root, len));
            s.copy(blocks(src, 0, root, len), blocks(b, n - root, root, len));
            b
        }
    } else if subtree == 1 {
        // A leaf takes its block straight into its buffer.
        s.recv(m.rel(root, binomial_parent(vr)), dst);
        return;
    } else {
        let b = Span::new(s.scratch(subtree * len), 0, subtree * len);
        s.recv(m.rel(root, binomial_parent(vr)), b);
        s.fence();
        b
    };
    let mut mask = if vr == 0 {
        n.next_power_of_two() / 2
    } else {
        lowest_bit(vr) / 2
    };
    while mask > 0 {
        if vr + mask < n {
            let count = mask.min(n - vr - mask);
            s.send(m.rel(root, vr + mask), blocks(buf, mask, count, len));
        }
        mask /= 2;
    }
    s.copy(blocks(buf, 0, 1, len), dst);
}

/// Ring allgather: n−1 steps, each passing one block to the right neighbour. `dst` holds
/// every member's block at `block[j]`; `src` is mine (may be my own block of `dst`).
pub fn allgatherv_ring(s: &mut Schedule, m: &Members, src: Span, dst: Span, block: &[(usize, usize)]) {
    let n = m.n();
    let me = m.me;
    let part = |j: usize| dst.sub(block[j].0, block[j].1);
    s.copy(src, part(me));
    let (right, left) = (m.at((me + 1) % n), m.at((me + n - 1) % n));
    for step in 0..n.saturating_sub(1) {
        // My own block leaves from `src`: lines no other CPU has just written (see
        // `coll::model`, fresh data).
        let out = if step == 0 { src } else { part((me + n - step) % n) };
        s.send(right, out);
        s.recv(left, part((me + n - step - 1) % n));
        s.fence();
    }
}

/// Scattered allgather: my block to every other member and theirs from each, all at once
/// (no rounds to wait between: on an oversubscribed node any member that holds a CPU has a
/// transfer to make). `dst` and `src` as for [`allgatherv_ring`].
pub fn allgatherv_scattered(s: &mut Schedule, m: &Members, src: Span, dst: Span, block: &[(usize, usize)]) {
    let n = m.n();
    let me = m.me;
    let part = |j: usize| dst.sub(block[j].0, block[j].1);
    s.copy(src, part(me));
    for i in 1..n {
        let from = (me + n - i) % n;
        s.recv(m.at(from), part(from));
    }
    for i in 1..n {
        s.send(m.at((me + i) % n), src);
    }
}

/// Recursive-doubling allgather for a power-of-two member count: log2 n exchanges, each
/// doubling the run of blocks held. Falls back to the ring for other counts.
pub fn allgather_recursive_doubling(s: &mut Schedule, m: &Members, src: Span, dst: Span) {
    let n = m.n();
    let len = src.len;
    if !n.is_power_of_two() {
        return allgatherv_ring(s, m, src, dst, &super::reduce::equal_blocks(n, len));
    }
    let me = m.me;
    s.copy(src, blocks(dst, me, 1, len));
    let mut mask = 1;
    while mask < n {
        let partner = me ^ mask;
        let mine = me & !(mask - 1);
        let theirs = partner & !(mask - 1);
        let out = if mask == 1 { src } else { blocks(dst, mine, mask, len) };
        s.send(m.at(partner), out);
        s.recv(m.at(partner), blocks(dst, theirs, mask, len));
        s.fence();
        mask <<= 1;
    }
}

/// Bruck's allgather: ⌈log2 n⌉ steps for any n, each sending the blocks gathered so far to
/// the member 2^k places before; then one local rotation. For small blocks.
pub fn allgather_bruck(s: &mut Schedule, m: &Members, src: Span, dst: Span) {
    let n = m.n();
    let len = src.len;
    let me = m.me;
    // Block j of tmp is member (me + j) % n's.
    let tmp = Span::new(s.scratch(n * len), 0, n * len);
    s.copy(src, blocks(tmp, 0, 1, len));
    let mut k = 1;
    while k < n {
        let count = k.min(n - k);
        s.send(m.at((me + n - k) % n), blocks(tmp, 0, count, len));
        s.recv(m.at((me + k) % n), blocks(tmp, k, count, len));
        s.fence();
        k *= 2;
    }
    s.copy(blocks(tmp, 0, n - me, len), blocks(dst, me, n - me, len));
    s.copy(blocks(tmp, n - me, me, len), blocks(dst, 0, me, len));
}
