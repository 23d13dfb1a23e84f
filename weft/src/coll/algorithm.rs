//! Which algorithm runs each collective: the one a `WEFT_COLL_*` tunable forces, or the one
//! the cost model ([`super::model`]) predicts cheapest for the member and node counts, the
//! size and the operation. Each entry point here builds the chosen algorithm's steps into a
//! schedule.
//!
//! The choice is between latency-bound algorithms (trees, recursive doubling, Bruck: few
//! rounds, whole vectors) and bandwidth-bound ones (rings, scatter-allgather, Rabenseifner,
//! pipelines: more rounds, each byte sent about once). Every member must choose the same: the
//! sizes passed to the model are the ones every member agrees on (see the model's doc).

use super::model::{Collective, Model, Shape};
use super::node_aware::{self, node_aware};
use super::{alltoall, barrier, bcast, gather, reduce, scan, Members, Schedule, Span};
use crate::tunables::{Algorithm, Tunables};

/// The algorithm `forced` names, or the model's pick for `c` at `shape`.
fn choose(t: &Tunables, forced: Algorithm, c: Collective, shape: Shape) -> &'static str {
    forced
        .0
        .unwrap_or_else(|| Model::from_tunables(t).pick(c, &shape))
}

/// As [`choose`], where a node-aware form exists: it runs on several nodes (see
/// [`node_aware`]) unless a tunable forces a flat algorithm; forcing it where it does not
/// apply runs the model's pick.
fn choose_aware(m: &Members, t: &Tunables, forced: Algorithm, c: Collective, shape: Shape) -> &'static str {
    match forced.0 {
        Some("hierarchical") | None if node_aware(m) => "hierarchical",
        Some("hierarchical") => choose(t, Algorithm(None), c, shape),
        other => choose(t, Algorithm(other), c, shape),
    }
}

/// The shape of a call on `m` of `bytes` agreed bytes (see [`Shape::bytes`]).
fn shape(m: &Members, bytes: Option<usize>) -> Shape {
    Shape::new(m.n(), m.nodes, bytes)
}

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
    match bcast_algorithm(m, t, root, data) {
        "hierarchical" => node_aware::bcast(s, m, t, root, data),
        "chain" => bcast::chain(s, m, root, data, t.coll_segment),
        "scatter_allgather" => bcast::scatter_allgather(s, m, root, data),
        "linear" => bcast::linear(s, m, root, data),
        _ => bcast::binomial(s, m, root, data),
    }
}

/// The broadcast's algorithm (a member's view: the same at every member). On several nodes,
/// when some node holds two members or more, the node-aware form runs (each node receives
/// the data once; the model picks the algorithms of its parts), unless a tunable forces
/// another; forcing it elsewhere runs the model's pick.
pub fn bcast_algorithm(m: &Members, t: &Tunables, root: usize, data: Span) -> &'static str {
    let shape = Shape {
        root,
        ..shape(m, Some(data.len))
    };
    choose_aware(m, t, t.coll_bcast, Collective::Bcast, shape)
}

/// Reduce of `src` into `dst` at `root`: binomial, node-aware on several nodes for an
/// operation that commutes (see [`bcast_algorithm`]) unless `WEFT_COLL_REDUCE` forces the flat
/// tree.
pub fn reduce(
    s: &mut Schedule,
    m: &Members,
    t: &Tunables,
    root: usize,
    src: Span,
    dst: Span,
    order: Order,
) {
    if order.commutative() && node_aware(m) && t.coll_reduce.0.is_none() {
        return node_aware::reduce(s, m, root, src, dst);
    }
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
    let name = allreduce_algorithm(m, t, src, elem, order);
    match name {
        "hierarchical" => node_aware::allreduce(s, m, t, src, dst, elem),
        "rabenseifner" => reduce::reduce_scatter_allgather(s, m, src, dst, elem),
        "ring" => reduce::ring(s, m, src, dst, elem),
        _ => reduce::recursive_doubling(s, m, src, dst),
    }
}

/// The allreduce's algorithm (a member's view: the same at every member).
pub fn allreduce_algorithm(
    m: &Members,
    t: &Tunables,
    src: Span,
    elem: usize,
    order: Order,
) -> &'static str {
    let n = m.n();
    let count = src.len / elem.max(1);
    // The bandwidth algorithms cut the vector in a block per member: they need as many
    // elements, and a commutative operation (the model knows it too).
    let can_split = order.commutative() && count >= n && n > 1;
    let shape = Shape {
        elem,
        commutative: order.commutative(),
        ..shape(m, Some(src.len))
    };
    match t.coll_allreduce.0 {
        Some(f) if f != "hierarchical" && !can_split => "recursive_doubling",
        // The node-aware form combines in node order: the operation must commute.
        _ if order.commutative() => choose_aware(m, t, t.coll_allreduce, Collective::Allreduce, shape),
        Some("hierarchical") | None => choose(t, Algorithm(None), Collective::Allreduce, shape),
        forced => choose(t, Algorithm(forced), Collective::Allreduce, shape),
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
    let name = reduce_scatter_algorithm(m, t, src, order);
    match name {
        "hierarchical" => node_aware::reduce_scatter(s, m, t, src, block, dst),
        "pairwise" => reduce::reduce_scatter_pairwise(s, m, src, block, dst),
        _ => reduce::reduce_scatter_by_reduce(s, m, src, block, dst, order.commutative()),
    }
}

/// The reduce-scatter's algorithm (the same at every member): node-aware on several nodes for
/// an operation that commutes (see [`bcast_algorithm`]). `src` holds every member's block:
/// its length, unlike a block's, is the same at every member, so the model weighs the mean
/// block (each member's, in the block form).
pub fn reduce_scatter_algorithm(m: &Members, t: &Tunables, src: Span, order: Order) -> &'static str {
    let shape = Shape {
        commutative: order.commutative(),
        ..shape(m, Some(src.len / m.n().max(1)))
    };
    match t.coll_reduce_scatter.0 {
        Some("pairwise") if !order.commutative() => "by_reduce",
        // The node-aware form combines in node order: the operation must commute.
        _ if order.commutative() => choose_aware(m, t, t.coll_reduce_scatter, Collective::ReduceScatter, shape),
        Some("hierarchical") => choose(t, Algorithm(None), Collective::ReduceScatter, shape),
        forced => choose(t, Algorithm(forced), Collective::ReduceScatter, shape),
    }
}

/// Inclusive (or exclusive) prefix reduction: node-aware on several nodes that each hold
/// consecutive ranks (some node two or more), else recursive doubling.
pub fn scan(s: &mut Schedule, m: &Members, t: &Tunables, src: Span, dst: Span, exclusive: bool) {
    if scan_algorithm(m) == "hierarchical" {
        return node_aware::scan(s, m, t, src, dst, exclusive);
    }
    scan::recursive_doubling(s, m, src, dst, exclusive);
}

/// The scan's algorithm (the same at every member).
pub fn scan_algorithm(m: &Members) -> &'static str {
    if node_aware(m) && node_aware::nodes_in_rank_order(m) {
        "hierarchical"
    } else {
        "recursive_doubling"
    }
}

/// Gather of `len`-byte blocks (every member's `src`) into `dst` at `root`.
pub fn gather(s: &mut Schedule, m: &Members, t: &Tunables, root: usize, src: Span, dst: Span) {
    let len = src.len;
    match gather_algorithm(m, t, root, src, dst) {
        "hierarchical" => node_aware::gather(s, m, t, root, src, dst),
        "binomial" => gather::gather_binomial(s, m, root, src, dst),
        _ => gather::gatherv_linear(s, m, root, src, dst, &reduce::equal_blocks(m.n(), len)),
    }
}

/// The gather's algorithm (a member's view: the same at every member; `dst` is empty at
/// all but the root, so only `src` may count).
pub fn gather_algorithm(m: &Members, t: &Tunables, root: usize, src: Span, _dst: Span) -> &'static str {
    let shape = Shape {
        root,
        ..shape(m, Some(src.len))
    };
    rooted_choice(m, t, t.coll_gather, Collective::Gather, shape, src.len)
}

/// Scatter of `len`-byte blocks of `src` at `root` into every member's `dst`.
pub fn scatter(s: &mut Schedule, m: &Members, t: &Tunables, root: usize, src: Span, dst: Span) {
    let len = dst.len;
    match scatter_algorithm(m, t, root, src, dst) {
        "hierarchical" => node_aware::scatter(s, m, t, root, src, dst),
        "binomial" => gather::scatter_binomial(s, m, root, src, dst),
        _ => gather::scatterv_linear(s, m, root, src, &reduce::equal_blocks(m.n(), len), dst),
    }
}

/// The scatter's algorithm (a member's view: the same at every member; `src` is empty at
/// all but the root, so only `dst` may count).
pub fn scatter_algorithm(m: &Members, t: &Tunables, root: usize, _src: Span, dst: Span) -> &'static str {
    let shape = Shape {
        root,
        ..shape(m, Some(dst.len))
    };
    rooted_choice(m, t, t.coll_scatter, Collective::Scatter, shape, dst.len)
}

/// A gather's or scatter's algorithm. Node-aware, each block still crosses between nodes
/// once, as in the linear forms: what it saves is messages between nodes (the root takes one
/// per node, not one per member), at the price of a hop through each leader and the root's
/// reordering. So it runs (unforced) only while the start-ups saved, (n − nodes) TCP α,
/// outweigh copying all n blocks twice more on shared memory: on 2 hosts of 2 ranks, 1 MiB
/// blocks went 1.1-1.5x slower node-aware than linear (docs/collectives.md).
fn rooted_choice(
    m: &Members,
    t: &Tunables,
    forced: Algorithm,
    c: Collective,
    shape: Shape,
    len: usize,
) -> &'static str {
    if forced.0.is_none()
        && node_aware(m)
        && !Model::from_tunables(t).rooted_node_aware_pays(m.n(), m.nodes, len)
    {
        return choose(t, Algorithm(None), c, shape);
    }
    choose_aware(m, t, forced, c, shape)
}

/// Allgather of every member's `len`-byte `src` into `dst`.
pub fn allgather(s: &mut Schedule, m: &Members, t: &Tunables, src: Span, dst: Span) {
    let n = m.n();
    let len = src.len;
    match allgather_algorithm(m, t, src) {
        "hierarchical" => node_aware::allgather(s, m, t, src, dst),
        "recursive_doubling" => gather::allgather_recursive_doubling(s, m, src, dst),
        "bruck" => gather::allgather_bruck(s, m, src, dst),
        "scattered" => gather::allgatherv_scattered(s, m, src, dst, &reduce::equal_blocks(n, len)),
        _ => gather::allgatherv_ring(s, m, src, dst, &reduce::equal_blocks(n, len)),
    }
}

/// The allgather's algorithm (a member's view: the same at every member).
pub fn allgather_algorithm(m: &Members, t: &Tunables, src: Span) -> &'static str {
    choose_aware(m, t, t.coll_allgather, Collective::Allgather, shape(m, Some(src.len)))
}

/// All-to-all with a block per pair. `agreed_block` is the block size when every member's
/// blocks are equal (all-to-all); `None` for the `v` form, whose block sizes differ between
/// members and so may not steer the choice (members must agree on it).
#[allow(clippy::too_many_arguments)]
pub fn alltoall(
    s: &mut Schedule,
    m: &Members,
    t: &Tunables,
    src: Span,
    send: &[(usize, usize)],
    dst: Span,
    recv: &[(usize, usize)],
    agreed_block: Option<usize>,
) {
    match alltoall_algorithm(m, t, send, recv, agreed_block) {
        "hierarchical" => {
            let len = agreed_block.expect("the node-aware all-to-all needs equal blocks");
            node_aware::alltoall(s, m, t, src, dst, len)
        }
        "scattered" => alltoall::scattered(s, m, src, send, dst, recv),
        _ => alltoall::pairwise(s, m, src, send, dst, recv),
    }
}

/// The all-to-all's algorithm (a member's view: the same at every member). `send` and `recv`
/// are this member's blocks, which may differ from another's: only `agreed_block` counts.
/// The node-aware form needs equal blocks (`agreed_block`) laid out one after another (the
/// all-to-all's own buffers, which every member has alike); forced where it does not apply,
/// the model picks.
pub fn alltoall_algorithm(
    m: &Members,
    t: &Tunables,
    send: &[(usize, usize)],
    recv: &[(usize, usize)],
    agreed_block: Option<usize>,
) -> &'static str {
    let shape = shape(m, agreed_block);
    let packed = |b: usize, blocks: &[(usize, usize)]| {
        blocks.iter().enumerate().all(|(j, &x)| x == (j * b, b))
    };
    let applies = node_aware(m)
        && agreed_block.is_some_and(|b| b > 0 && packed(b, send) && packed(b, recv));
    match t.coll_alltoall.0 {
        Some("hierarchical") if applies => "hierarchical",
        Some("hierarchical") => choose(t, Algorithm(None), Collective::Alltoall, shape),
        None if applies && alltoall_pays(m, t, agreed_block.unwrap_or(0)) => "hierarchical",
        forced => choose(t, Algorithm(forced), Collective::Alltoall, shape),
    }
}

/// Whether the node-aware all-to-all of `len`-byte blocks beats a flat one on `m`
/// ([`Model::alltoall_node_aware_pays`]; every member computes it from what all know alike).
fn alltoall_pays(m: &Members, t: &Tunables, len: usize) -> bool {
    let largest = (0..m.nodes)
        .map(|k| m.node_of.iter().filter(|&&x| x as usize == k).count())
        .max()
        .unwrap_or(1);
    Model::from_tunables(t).alltoall_node_aware_pays(m.n(), m.nodes, largest, len)
}
