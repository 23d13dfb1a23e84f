//! Which algorithm runs each collective: the one a `WEFT_COLL_*` tunable forces, or the one
//! the selection rules pick for the member count, the size and the operation. Each entry
//! point here builds the chosen algorithm's steps into a schedule.
//!
//! The rules are cut-overs between latency-bound algorithms (trees, recursive doubling,
//! Bruck: few rounds, whole vectors) and bandwidth-bound ones (rings, scatter-allgather,
//! Rabenseifner, pipelines: more rounds, each byte sent about once).

use super::{alltoall, barrier, bcast, gather, reduce, scan, Members, Schedule, Span};
use crate::tunables::Tunables;

/// Whether an operation may be reordered (MPI's `commute` flag).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// Any order of operands gives the same result.
    Commutative,
    /// Operands must be combined in rank order.
    RankOrder,
}

impl Order {
    fn commutative(self) -> bool {
        self == Order::Commutative
    }
}

/// Barrier.
pub fn barrier(s: &mut Schedule, m: &Members) {
    barrier::dissemination(s, m);
}

/// Broadcast of `data` from `root`.
pub fn bcast(s: &mut Schedule, m: &Members, t: &Tunables, root: usize, data: Span) {
    let n = m.n();
    let name = t.coll_bcast.0.unwrap_or(if data.len < 64 << 10 || n <= 2 {
        "binomial"
    } else if n < 8 {
        "scatter_allgather"
    } else {
        "chain"
    });
    match name {
        "chain" => bcast::chain(s, m, root, data, t.coll_segment),
        "scatter_allgather" => bcast::scatter_allgather(s, m, root, data),
        _ => bcast::binomial(s, m, root, data),
    }
}

/// Reduce of `src` into `dst` at `root`.
pub fn reduce(
    s: &mut Schedule,
    m: &Members,
    _t: &Tunables,
    root: usize,
    src: Span,
    dst: Span,
    order: Order,
) {
    reduce::binomial(s, m, root, src, dst, order.commutative());
}

/// Allreduce of `src` into `dst` of `elem`-byte elements.
pub fn allreduce(
    s: &mut Schedule,
    m: &Members,
    t: &Tunables,
    src: Span,
    dst: Span,
    elem: usize,
    order: Order,
) {
    let n = m.n();
    let count = src.len / elem.max(1);
    // The bandwidth algorithms cut the vector in a block per member: they need as many
    // elements, and a commutative operation.
    let can_split = order.commutative() && count >= n && n > 1;
    let name = match t.coll_allreduce.0 {
        Some(forced) if can_split => forced,
        Some(_) => "recursive_doubling",
        None if can_split && src.len >= 16 << 10 => "rabenseifner",
        None => "recursive_doubling",
    };
    match name {
        "rabenseifner" => reduce::reduce_scatter_allgather(s, m, src, dst, elem),
        "ring" => reduce::ring(s, m, src, dst, elem),
        _ => reduce::recursive_doubling(s, m, src, dst),
    }
}

/// Reduce-scatter: `src` holds a block for every member (`block[j]` in it); `dst` gets mine,
/// reduced over all members.
pub fn reduce_scatter(
    s: &mut Schedule,
    m: &Members,
    t: &Tunables,
    src: Span,
    block: &[(usize, usize)],
    dst: Span,
    order: Order,
) {
    let name = match t.coll_reduce_scatter.0 {
        Some("pairwise") | None if order.commutative() => "pairwise",
        _ => "by_reduce",
    };
    match name {
        "pairwise" => reduce::reduce_scatter_pairwise(s, m, src, block, dst),
        _ => reduce::reduce_scatter_by_reduce(s, m, src, block, dst, order.commutative()),
    }
}

/// Inclusive (or exclusive) prefix reduction.
pub fn scan(s: &mut Schedule, m: &Members, src: Span, dst: Span, exclusive: bool) {
    scan::recursive_doubling(s, m, src, dst, exclusive);
}

/// Gather of `len`-byte blocks (every member's `src`) into `dst` at `root`.
pub fn gather(s: &mut Schedule, m: &Members, t: &Tunables, root: usize, src: Span, dst: Span) {
    let len = src.len;
    let name = t
        .coll_gather
        .0
        .unwrap_or(if len <= 4 << 10 { "binomial" } else { "linear" });
    match name {
        "binomial" => gather::gather_binomial(s, m, root, src, dst),
        _ => gather::gatherv_linear(s, m, root, src, dst, &reduce::equal_blocks(m.n(), len)),
    }
}

/// Scatter of `len`-byte blocks of `src` at `root` into every member's `dst`.
pub fn scatter(s: &mut Schedule, m: &Members, t: &Tunables, root: usize, src: Span, dst: Span) {
    let len = dst.len;
    let name = t
        .coll_scatter
        .0
        .unwrap_or(if len <= 4 << 10 { "binomial" } else { "linear" });
    match name {
        "binomial" => gather::scatter_binomial(s, m, root, src, dst),
        _ => gather::scatterv_linear(s, m, root, src, &reduce::equal_blocks(m.n(), len), dst),
    }
}

/// Allgather of every member's `len`-byte `src` into `dst`.
pub fn allgather(s: &mut Schedule, m: &Members, t: &Tunables, src: Span, dst: Span) {
    let n = m.n();
    let len = src.len;
    let name = t.coll_allgather.0.unwrap_or(if len * n <= 32 << 10 {
        if n.is_power_of_two() {
            "recursive_doubling"
        } else {
            "bruck"
        }
    } else {
        "ring"
    });
    match name {
        "recursive_doubling" => gather::allgather_recursive_doubling(s, m, src, dst),
        "bruck" => gather::allgather_bruck(s, m, src, dst),
        _ => gather::allgatherv_ring(s, m, src, dst, &reduce::equal_blocks(n, len)),
    }
}

/// All-to-all with a block per pair.
pub fn alltoall(
    s: &mut Schedule,
    m: &Members,
    t: &Tunables,
    src: Span,
    send: &[(usize, usize)],
    dst: Span,
    recv: &[(usize, usize)],
) {
    let largest = send.iter().map(|b| b.1).max().unwrap_or(0);
    let name = t
        .coll_alltoall
        .0
        .unwrap_or(if largest <= 1 << 10 { "scattered" } else { "pairwise" });
    match name {
        "scattered" => alltoall::scattered(s, m, src, send, dst, recv),
        _ => alltoall::pairwise(s, m, src, send, dst, recv),
    }
}
