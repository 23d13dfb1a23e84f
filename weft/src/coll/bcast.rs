//! Broadcast: `data` (the same span on every member) goes from `root` to all.

use super::{binomial_subtree, Members, Schedule, Span};

/// Binomial tree: ⌈log2 n⌉ rounds, each member receives once and sends to its children,
/// the farthest first.
pub fn binomial(s: &mut Schedule, m: &Members, root: usize, data: Span) {
    let n = m.n();
    let vr = m.vrank(root);
    let mut mask = 1;
    while mask < n {
        if vr & mask != 0 {
            let parent = vr - mask;
            // The parent's only child: it has nothing else to do meanwhile, so it may copy
            // half (a large message).
            let only_child = binomial_subtree(parent, n) == 2;
            if only_child {
                s.recv_shared(m.rel(root, parent), data);
            } else {
                s.recv(m.rel(root, parent), data);
            }
            s.fence();
            break;
        }
        mask <<= 1;
    }
    mask >>= 1;
    while mask > 0 {
        if vr + mask < n {
            s.send(m.rel(root, vr + mask), data);
        }
        mask >>= 1;
    }
}

/// Pipelined chain: the data is cut in segments of `segment` bytes that flow down the chain
/// root → root+1 → …, so every link is busy at once; for large data.
pub fn chain(s: &mut Schedule, m: &Members, root: usize, data: Span, segment: usize) {
    let n = m.n();
    let vr = m.vrank(root);
    if n == 1 || data.len == 0 {
        return;
    }
    let segment = segment.max(1);
    let segs = data.len.div_ceil(segment);
    let seg = |i: usize| data.sub(i * segment, segment.min(data.len - i * segment));
    let next = (vr + 1 < n).then(|| m.rel(root, vr + 1));
    if vr == 0 {
        for i in 0..segs {
            s.send(next.expect("n > 1"), seg(i));
        }
        return;
    }
    let prev = m.rel(root, vr - 1);
    s.recv(prev, seg(0));
    for i in 0..segs {
        s.fence();
        if let Some(to) = next {
            s.send(to, seg(i));
        }
        if i + 1 < segs {
            s.recv(prev, seg(i + 1));
        }
    }
}

/// Scatter then allgather (van de Geijn): the root scatters n pieces down a binomial tree,
/// then the members pass them around a ring; for large data on many members, since the
/// root sends each byte about once instead of log2 n times.
pub fn scatter_allgather(s: &mut Schedule, m: &Members, root: usize, data: Span) {
    let n = m.n();
    if n == 1 || data.len == 0 {
        return;
    }
    let vr = m.vrank(root);
    let piece = data.len.div_ceil(n);
    // Relative rank v owns bytes piece*v .. piece*(v+1) (clamped; the last may be short or
    // empty).
    let range = |from: usize, to: usize| {
        let a = (from * piece).min(data.len);
        let b = (to * piece).min(data.len);
        data.sub(a, b - a)
    };
    // Binomial scatter of the pieces of my subtree.
    let mut mask = 1;
    while mask < n {
        if vr & mask != 0 {
            let span = range(vr, (vr + mask).min(n));
            if span.len > 0 {
                s.recv(m.rel(root, vr - mask), span);
            }
            s.fence();
            break;
        }
        mask <<= 1;
    }
    mask >>= 1;
    while mask > 0 {
        if vr + mask < n {
            let span = range(vr + mask, (vr + 2 * mask).min(n));
            if span.len > 0 {
                s.send(m.rel(root, vr + mask), span);
            }
        }
        mask >>= 1;
    }
    s.fence();
    // Ring allgather of the pieces, in relative ranks.
    let right = m.rel(root, (vr + 1) % n);
    let left = m.rel(root, (vr + n - 1) % n);
    for i in 0..n - 1 {
        let out = range((vr + n - i) % n, (vr + n - i) % n + 1);
        let inn = range((vr + n - i - 1) % n, (vr + n - i - 1) % n + 1);
        if out.len > 0 {
            s.send(right, out);
        }
        if inn.len > 0 {
            s.recv(left, inn);
        }
        s.fence();
    }
}

/// Linear: the root sends the whole vector to every other member at once. Over shared memory
/// each receiver pulls it from the root's buffer in a single copy, so the copies run in
/// parallel and nobody waits for a forwarder: for large data on a node whose members
/// outnumber its CPUs.
pub fn linear(s: &mut Schedule, m: &Members, root: usize, data: Span) {
    let n = m.n();
    let vr = m.vrank(root);
    if n == 1 || data.len == 0 {
        return;
    }
    if vr != 0 {
        if n == 2 {
            // The root's only receiver may leave half the copy to it.
            s.recv_shared(m.at(root), data);
        } else {
            s.recv(m.at(root), data);
        }
        return;
    }
    for v in 1..n {
        s.send(m.rel(root, v), data);
    }
}
