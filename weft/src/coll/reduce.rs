//! Reductions: reduce, allreduce, reduce-scatter. `Step::Reduce` combines element-wise with
//! the schedule's operation; for an operation that is not commutative, every algorithm here
//! combines in rank order (a lower rank's data is always the left operand).

use super::{binomial_parent, binomial_subtree, pof2_floor, Members, Schedule, Span};

/// Binomial-tree reduce of `src` (every member) into `dst` (only read at `root`: pass any
/// span of the same length elsewhere, it is not touched). For an operation that is not
/// commutative the tree is rooted at member 0 (so that subtrees are rank ranges) and the
/// result then moves to `root`.
pub fn binomial(
    s: &mut Schedule,
    m: &Members,
    root: usize,
    src: Span,
    dst: Span,
    commutative: bool,
) {
    let n = m.n();
    let len = src.len;
    let tree_root = if commutative { root } else { 0 };
    let vr = m.vrank(tree_root);
    if vr != 0 && binomial_subtree(vr, n) == 1 && m.me != root {
        // A leaf (no member below it) sends its data as it is: half the members, with no
        // copy and no scratch.
        s.send(m.rel(tree_root, binomial_parent(vr)), src);
        return;
    }
    // The accumulator: the result's own place at the root, scratch elsewhere.
    let acc = if m.me == root && m.me == tree_root {
        dst
    } else {
        Span::new(s.scratch(len), 0, len)
    };
    let mut mask = 1;
    if vr.is_multiple_of(2) && vr + 1 < n && acc.area != src.area {
        // The first child's data straight into the accumulator, then mine folded in front
        // of it (src ∘ acc: the lower ranks first): no copy of src, no scratch this round.
        s.recv_shared(m.rel(tree_root, vr + 1), acc);
        s.fence();
        s.reduce(src, acc, true);
        mask = 2;
    } else {
        s.copy(src, acc);
    }
    let mut tmp = None;
    while mask < n {
        if vr & mask == 0 {
            if vr | mask < n {
                let tmp = *tmp.get_or_insert_with(|| Span::new(s.scratch(len), 0, len));
                s.recv_shared(m.rel(tree_root, vr | mask), tmp);
                s.fence();
                // `tmp` holds higher ranks' data: acc ∘ tmp.
                s.reduce(tmp, acc, commutative);
            }
        } else {
            s.send(m.rel(tree_root, vr - mask), acc);
            break;
        }
        mask <<= 1;
    }
    if tree_root != root {
        if m.me == tree_root {
            s.fence();
            s.send(m.at(root), acc);
        } else if m.me == root {
            s.recv_shared(m.at(tree_root), dst);
        }
    }
}

/// Recursive doubling allreduce of `src` into `dst` (both on every member; may be the same
/// span): log2 n exchanges of the whole vector. Members beyond the largest power of two
/// first fold their data into a neighbour and get the result back at the end. Every member
/// combines the same operands in the same order, so all get bit-identical results.
pub fn recursive_doubling(s: &mut Schedule, m: &Members, src: Span, dst: Span) {
    let n = m.n();
    let me = m.me;
    let len = src.len;
    if n > 1 && n.is_power_of_two() && src.area != dst.area {
        // The first exchange straight from the inputs: the partner's lands in `dst` and mine
        // folds in on my side of the operator. No copy of src, and the partner reads data
        // that no other CPU has just written (on a node whose cores share no cache, reading
        // freshly written lines runs at a fraction of the copy rate).
        let partner = me ^ 1;
        s.send(m.at(partner), src);
        s.recv(m.at(partner), dst);
        s.fence();
        s.reduce(src, dst, me < partner);
        if n > 2 {
            let tmp = Span::new(s.scratch(len), 0, len);
            exchange_doubling(s, m, me, 0, 2, dst, tmp);
        }
        return;
    }
    s.copy(src, dst);
    if n == 1 {
        return;
    }
    let tmp = Span::new(s.scratch(len), 0, len);
    let Some(nr) = fold_in(s, m, dst, tmp) else {
        unfold(s, m, dst);
        return;
    };
    exchange_doubling(s, m, nr, n - pof2_floor(n), 1, dst, tmp);
    unfold(s, m, dst);
}

/// The exchanges of recursive doubling from `mask` on, for the member whose rank among the
/// 2^k remaining is `nr` (`r` members sat out): each swaps `dst` with its partner and folds
/// the partner's copy (in `tmp`) in, the lower rank's operand first.
fn exchange_doubling(
    s: &mut Schedule,
    m: &Members,
    nr: usize,
    r: usize,
    mut mask: usize,
    dst: Span,
    tmp: Span,
) {
    let me = m.me;
    let pof2 = pof2_floor(m.n());
    while mask < pof2 {
        let partner = real_rank(nr ^ mask, r);
        s.send(m.at(partner), dst);
        s.recv(m.at(partner), tmp);
        s.fence();
        s.reduce(tmp, dst, partner < me);
        mask <<= 1;
    }
}

/// The first step of the power-of-two algorithms: of the first 2r members (r = n − 2^⌊log2 n⌋)
/// each even one sends its data to the odd one after it and sits out. Returns the rank among
/// the 2^k that remain, or `None` for a member that sits out.
fn fold_in(s: &mut Schedule, m: &Members, acc: Span, tmp: Span) -> Option<usize> {
    let n = m.n();
    let r = n - pof2_floor(n);
    let me = m.me;
    if me < 2 * r {
        if me.is_multiple_of(2) {
            s.send(m.at(me + 1), acc);
            s.fence();
            None
        } else {
            s.recv(m.at(me - 1), tmp);
            s.fence();
            s.reduce(tmp, acc, true);
            Some(me / 2)
        }
    } else {
        Some(me - r)
    }
}

/// The last step of the power-of-two algorithms: the members that sat out get the result.
fn unfold(s: &mut Schedule, m: &Members, acc: Span) {
    let r = m.n() - pof2_floor(m.n());
    let me = m.me;
    if me < 2 * r {
        s.fence();
        if me.is_multiple_of(2) {
            s.recv(m.at(me + 1), acc);
        } else {
            s.send(m.at(me - 1), acc);
        }
    }
}

/// The member rank of rank `nr` among the 2^k that remain after [`fold_in`].
fn real_rank(nr: usize, r: usize) -> usize {
    if nr < r {
        nr * 2 + 1
    } else {
        nr + r
    }
}

/// `count` elements cut into `parts` blocks as even as whole elements allow: the first
/// `count % parts` blocks get one more. Returns the byte offset and length of each.
pub fn even_blocks(count: usize, elem: usize, parts: usize) -> Vec<(usize, usize)> {
    let (q, extra) = (count / parts, count % parts);
    let mut off = 0;
    (0..parts)
        .map(|i| {
            let len = (q + usize::from(i < extra)) * elem;
            let b = (off, len);
            off += len;
            b
        })
        .collect()
}

/// Rabenseifner's allreduce for a commutative operation: a reduce-scatter by recursive
/// halving, then an allgather by recursive doubling, so each member sends about 2·len bytes
/// in all instead of len·log2 n; for large vectors. `elem` is the element size: blocks are
/// cut at element boundaries.
pub fn reduce_scatter_allgather(s: &mut Schedule, m: &Members, src: Span, dst: Span, elem: usize) {
    let n = m.n();
    let len = src.len;
    // On a power of two the first halving goes straight from the input (as in
    // `recursive_doubling`): the partner's half lands in `dst`, and nothing copies src.
    let direct = n > 1 && n.is_power_of_two() && src.area != dst.area;
    if !direct {
        s.copy(src, dst);
        if n == 1 {
            return;
        }
    }
    // Scratch for the halvings after a direct first one (none at 2 members) or for all.
    let tmp = (!direct || n > 2).then(|| Span::new(s.scratch(len), 0, len));
    let nr = match tmp {
        Some(tmp) if !direct => fold_in(s, m, dst, tmp),
        _ => Some(m.me), // a power of two: nobody folds in
    };
    let Some(nr) = nr else {
        unfold(s, m, dst);
        return;
    };
    let (pof2, r) = (pof2_floor(n), n - pof2_floor(n));
    let parts = even_blocks(len / elem.max(1), elem.max(1), pof2);
    let span_of = |base: Span, from: usize, to: usize| {
        let a = parts[from].0;
        let b = if to == pof2 { len } else { parts[to].0 };
        base.sub(a, b - a)
    };
    // Reduce-scatter: each step halves the range of blocks this member is responsible for.
    let (mut lo, mut hi) = (0, pof2);
    let mut mask = pof2 / 2;
    let mut path = Vec::new();
    while mask > 0 {
        let partner = real_rank(nr ^ mask, r);
        let mid = lo + (hi - lo) / 2;
        let (keep, give) = if nr & mask == 0 {
            ((lo, mid), (mid, hi))
        } else {
            ((mid, hi), (lo, mid))
        };
        let keep_s = span_of(dst, keep.0, keep.1);
        if direct && path.is_empty() {
            s.send(m.at(partner), span_of(src, give.0, give.1));
            s.recv(m.at(partner), keep_s);
            s.fence();
            s.reduce(span_of(src, keep.0, keep.1), keep_s, true);
        } else {
            s.send(m.at(partner), span_of(dst, give.0, give.1));
            let into = span_of(tmp.expect("scratch for every halving but a direct first"), keep.0, keep.1);
            s.recv(m.at(partner), into);
            s.fence();
            s.reduce(into, keep_s, true);
        }
        path.push((partner, keep, give));
        (lo, hi) = keep;
        mask /= 2;
    }
    // Allgather: retrace the steps, each exchanging the halves back.
    for (partner, keep, give) in path.into_iter().rev() {
        s.send(m.at(partner), span_of(dst, keep.0, keep.1));
        s.recv(m.at(partner), span_of(dst, give.0, give.1));
        s.fence();
    }
    unfold(s, m, dst);
}

/// Ring allreduce for a commutative operation: n−1 steps of reduce-scatter around the ring,
/// then n−1 steps of allgather; each member sends 2·len·(n−1)/n bytes, to its neighbour only.
pub fn ring(s: &mut Schedule, m: &Members, src: Span, dst: Span, elem: usize) {
    let n = m.n();
    let len = src.len;
    s.copy(src, dst);
    if n == 1 {
        return;
    }
    let parts = even_blocks(len / elem.max(1), elem.max(1), n);
    let part = |base: Span, i: usize| base.sub(parts[i].0, parts[i].1);
    let tmp = Span::new(s.scratch(len), 0, len);
    let (me, right, left) = (m.me, m.at((m.me + 1) % n), m.at((m.me + n - 1) % n));
    for step in 0..n - 1 {
        let out = (me + n - step) % n;
        let inn = (me + n - step - 1) % n;
        s.send(right, part(dst, out));
        s.recv(left, part(tmp, inn));
        s.fence();
        s.reduce(part(tmp, inn), part(dst, inn), true);
    }
    // Member i now holds block (i + 1) % n complete.
    for step in 0..n - 1 {
        let out = (me + 1 + n - step) % n;
        let inn = (me + n - step) % n;
        s.send(right, part(dst, out));
        s.recv(left, part(dst, inn));
        s.fence();
    }
}

/// Reduce-scatter by pairwise exchange for a commutative operation: in step i each member
/// sends the block of the member i places after it and reduces the block it receives from
/// the one i places before into its own. `src` holds every member's block (`blocks[j]` is
/// member j's byte range within it); `dst` receives mine.
pub fn reduce_scatter_pairwise(
    s: &mut Schedule,
    m: &Members,
    src: Span,
    block: &[(usize, usize)],
    dst: Span,
) {
    let n = m.n();
    let me = m.me;
    let mine = src.sub(block[me].0, block[me].1);
    s.copy(mine, dst);
    let tmp = Span::new(s.scratch(dst.len), 0, dst.len);
    for i in 1..n {
        let to = (me + i) % n;
        let from = (me + n - i) % n;
        s.send(m.at(to), src.sub(block[to].0, block[to].1));
        s.recv(m.at(from), tmp);
        s.fence();
        s.reduce(tmp, dst, true);
    }
}

/// Reduce-scatter for any operation: a binomial reduce of the whole vector to member 0 (in
/// rank order), then a scatter of the blocks from there.
pub fn reduce_scatter_by_reduce(
    s: &mut Schedule,
    m: &Members,
    src: Span,
    block: &[(usize, usize)],
    dst: Span,
    commutative: bool,
) {
    // Only member 0 holds the whole result; elsewhere `src` stands in (never written).
    let whole = if m.me == 0 {
        Span::new(s.scratch(src.len), 0, src.len)
    } else {
        src
    };
    binomial(s, m, 0, src, whole, commutative);
    s.fence();
    super::gather::scatterv_linear(s, m, 0, whole, block, dst);
}

/// `count` blocks of `len` bytes each, back to back.
pub fn equal_blocks(count: usize, len: usize) -> Vec<(usize, usize)> {
    (0..count).map(|i| (i * len, len)).collect()
}
