//! Node-aware collectives by messages, for communicators on several nodes (Sun's network
//! awareness, reference document 001): one leader per node (the root leads its own node;
//! elsewhere the lowest member does) carries its node's data across, so inter-node data
//! crosses to or from each node once, whatever the placement and the root; within a node
//! and among the leaders the model picks the flat algorithms (`coll/algorithm.rs`). The
//! blocking forms of data within a slot go through the node areas instead
//! (`api/collective/hierarchy.rs`).

use super::algorithm::{self, Order};
use super::gather as flat;
use super::{alltoall, blocks, reduce as flat_reduce, scan as flat_scan, Members, Schedule, Span};
use crate::tunables::Tunables;

/// Whether node-aware forms apply to `m`: members on several nodes, whose nodes are known,
/// and some node with two members or more (else the nodes' leaders are all the members).
pub(super) fn node_aware(m: &Members) -> bool {
    m.nodes > 1 && m.node_of.len() == m.n() && m.nodes < m.n()
}

/// The node-aware broadcast: the root sends to one leader per other node (the root leads its
/// own node; elsewhere the lowest member does), then each leader broadcasts within its node.
/// Inter-node data crosses to each node once, whatever the placement and the root.
pub(super) fn bcast(s: &mut Schedule, m: &Members, t: &Tunables, root: usize, data: Span) {
    let n = Nodes::of(m, root);
    if n.leads() {
        algorithm::bcast(s, &n.among(), t, n.root_node, data);
        if m.me != root {
            // Forward within the node only what has arrived.
            s.fence();
        }
    }
    algorithm::bcast(s, &n.within(), t, n.my_leader_pos(), data);
}


/// A node-aware collective's view of the members: one leader per node (the root leads its
/// own node; elsewhere the lowest member does), and this member's node.
struct Nodes<'m> {
    m: &'m Members<'m>,
    root_node: usize,
    /// World ranks of the leaders, by node.
    leaders: Vec<u32>,
    /// Member ranks of this member's node, in rank order.
    local: Vec<usize>,
    /// World ranks of `local`.
    local_world: Vec<u32>,
    my_leader: usize,
}

impl<'m> Nodes<'m> {
    fn of(m: &'m Members<'m>, root: usize) -> Self {
        let node_of = |j: usize| m.node_of[j] as usize;
        let root_node = node_of(root);
        let leader_of = |node: usize| {
            if node == root_node {
                root
            } else {
                (0..m.n()).find(|&j| node_of(j) == node).expect("every node has a member")
            }
        };
        let my_node = node_of(m.me);
        let local: Vec<usize> = (0..m.n()).filter(|&j| node_of(j) == my_node).collect();
        Nodes {
            m,
            root_node,
            leaders: (0..m.nodes).map(|k| m.at(leader_of(k))).collect(),
            local_world: local.iter().map(|&j| m.at(j)).collect(),
            local,
            my_leader: leader_of(my_node),
        }
    }

    fn leads(&self) -> bool {
        self.my_leader == self.m.me
    }

    fn pos(&self, j: usize) -> usize {
        self.local.iter().position(|&l| l == j).expect("a member of this node")
    }

    fn my_leader_pos(&self) -> usize {
        self.pos(self.my_leader)
    }

    /// The leaders, one per node (this member is one of them).
    fn among(&self) -> Members<'_> {
        Members {
            world: &self.leaders,
            me: self.m.node_of[self.m.me] as usize,
            nodes: self.m.nodes,
            node_of: &[],
        }
    }

    /// The members of this member's node.
    fn within(&self) -> Members<'_> {
        Members {
            world: &self.local_world,
            me: self.pos(self.m.me),
            nodes: 1,
            node_of: &[],
        }
    }

    /// At a leader, scratch for its node's `len`-byte blocks; elsewhere `otherwise`.
    fn node_scratch(&self, s: &mut Schedule, len: usize, otherwise: Span) -> Span {
        if self.leads() {
            let mine = self.local.len() * len;
            Span::new(s.scratch(mine), 0, mine)
        } else {
            otherwise
        }
    }

    fn my_node(&self) -> usize {
        self.m.node_of[self.m.me] as usize
    }

    /// Each node's part of a buffer of every member's `len`-byte block in node order (node 0's
    /// members in rank order, then node 1's, …), as (offset, length), and the whole length.
    fn node_parts(&self, len: usize) -> (Vec<(usize, usize)>, usize) {
        let mut count = vec![0usize; self.m.nodes];
        for &k in self.m.node_of {
            count[k as usize] += 1;
        }
        let mut off = 0;
        let parts = count
            .iter()
            .map(|&c| {
                let p = (off, c * len);
                off += c * len;
                p
            })
            .collect();
        (parts, off)
    }

    /// Copies every member's block between `node_order` (as [`Nodes::node_parts`] lays it out)
    /// and `member_order` (member j's at j·len): from the first to the second when `gathered`.
    fn reorder(&self, s: &mut Schedule, node_order: Span, member_order: Span, len: usize, gathered: bool) {
        let (parts, _) = self.node_parts(len);
        let mut next: Vec<usize> = parts.iter().map(|p| p.0).collect();
        for j in 0..self.m.n() {
            let k = self.m.node_of[j] as usize;
            let at = node_order.sub(next[k], len);
            next[k] += len;
            let place = blocks(member_order, j, 1, len);
            if gathered {
                s.copy(at, place);
            } else {
                s.copy(place, at);
            }
        }
    }
}

/// Node-aware reduce (an operation that commutes): within each node to its leader (the
/// root's own result lands in `dst`), then among the leaders to the root.
pub(super) fn reduce(s: &mut Schedule, m: &Members, root: usize, src: Span, dst: Span) {
    let n = Nodes::of(m, root);
    let part = if m.me == root {
        dst
    } else if n.leads() {
        Span::new(s.scratch(src.len), 0, src.len)
    } else {
        src // not touched: only a tree's root writes its `dst`
    };
    flat_reduce::binomial(s, &n.within(), n.my_leader_pos(), src, part, true);
    if n.leads() {
        s.fence();
        flat_reduce::binomial(s, &n.among(), n.root_node, part, part, true);
    }
}

/// Node-aware allreduce (an operation that commutes): within each node to its leader, into
/// `dst`; the leaders' allreduce in place; then each leader's broadcast within its node.
pub(super) fn allreduce(s: &mut Schedule, m: &Members, t: &Tunables, src: Span, dst: Span, elem: usize) {
    let n = Nodes::of(m, 0);
    flat_reduce::binomial(s, &n.within(), n.my_leader_pos(), src, dst, true);
    if n.leads() {
        s.fence();
        algorithm::allreduce(s, &n.among(), t, dst, dst, elem, Order::Commutative);
        s.fence();
    }
    algorithm::bcast(s, &n.within(), t, n.my_leader_pos(), dst);
}

/// Node-aware reduce-scatter (an operation that commutes): `src` holds every member's block
/// (`block[j]` is member j's byte range), `dst` gets mine reduced over all members. Each node
/// reduces the whole vector to its leader; each leader puts the blocks in node order (each
/// node's members' blocks together, as [`Nodes::node_parts`] lays them out) and the leaders
/// reduce-scatter that among themselves, a node's part each; then each leader scatters its
/// part within its node. So each node sends across the other nodes' parts once, where a flat
/// reduce-scatter sends them once per member.
pub(super) fn reduce_scatter(
    s: &mut Schedule,
    m: &Members,
    t: &Tunables,
    src: Span,
    block: &[(usize, usize)],
    dst: Span,
) {
    let n = Nodes::of(m, 0);
    // Each member's place in node order, and each node's part there.
    let mut at = vec![0usize; m.n()];
    let mut parts = vec![(0usize, 0usize); m.nodes];
    let mut off = 0;
    for (k, part) in parts.iter_mut().enumerate() {
        let start = off;
        for j in (0..m.n()).filter(|&j| m.node_of[j] as usize == k) {
            at[j] = off;
            off += block[j].1;
        }
        *part = (start, off - start);
    }
    // My node's members' blocks within its part, in rank order.
    let local: Vec<(usize, usize)> = n.local.iter().map(|&j| (at[j] - parts[n.my_node()].0, block[j].1)).collect();
    if !n.leads() {
        // Nothing of `src` is written: only a tree's root writes its `dst`, and only a
        // scatter's root reads its `src`.
        flat_reduce::binomial(s, &n.within(), n.my_leader_pos(), src, src, true);
        flat::scatterv_linear(s, &n.within(), n.my_leader_pos(), dst, &local, dst);
        return;
    }
    let whole = Span::new(s.scratch(src.len), 0, src.len);
    flat_reduce::binomial(s, &n.within(), n.my_leader_pos(), src, whole, true);
    s.fence();
    // Nodes holding runs of members in rank order (a block placement) need no reordering.
    let in_order = block.iter().zip(&at).all(|(b, &a)| b.0 == a);
    let ordered = if in_order {
        whole
    } else {
        let ordered = Span::new(s.scratch(off), 0, off);
        for (j, &(from, len)) in block.iter().enumerate() {
            s.copy(whole.sub(from, len), ordered.sub(at[j], len));
        }
        s.fence();
        ordered
    };
    let mine = parts[n.my_node()].1;
    let node_part = Span::new(s.scratch(mine), 0, mine);
    algorithm::reduce_scatter(s, &n.among(), t, ordered, &parts, node_part, Order::Commutative);
    s.fence();
    flat::scatterv_linear(s, &n.within(), n.my_leader_pos(), node_part, &local, dst);
}

/// Whether each node's members are consecutive in rank order (a block placement), as a
/// node-aware scan needs: then the nodes' prefixes chain in rank order.
pub(super) fn nodes_in_rank_order(m: &Members) -> bool {
    let mut seen = vec![false; m.nodes];
    let mut last = None;
    for &k in m.node_of {
        if last != Some(k) {
            if std::mem::replace(&mut seen[k as usize], true) {
                return false;
            }
            last = Some(k);
        }
    }
    true
}

/// Node-aware scan (inclusive, or `exclusive`) for members whose nodes hold consecutive
/// ranks ([`nodes_in_rank_order`]), for any operation: each node scans within itself; the
/// last member of each node, which then holds its node's reduction, takes part in an
/// exclusive scan of those among the nodes' last members; each of them broadcasts what came
/// from the nodes before within its node, and every member there folds it in on the left.
/// Operands stay in rank order throughout. Inter-node messages: one scan among the nodes,
/// where a flat scan has every member exchange across nodes.
pub(super) fn scan(s: &mut Schedule, m: &Members, t: &Tunables, src: Span, dst: Span, exclusive: bool) {
    let n = Nodes::of(m, 0);
    let (within, local) = (n.within(), &n.local);
    let pos = n.pos(m.me);
    // The nodes' last members, nodes in rank order, and my node's place among them.
    let mut lasts: Vec<u32> = Vec::new();
    for j in 0..m.n() {
        if j + 1 == m.n() || m.node_of[j + 1] != m.node_of[j] {
            lasts.push(m.at(j));
        }
    }
    let node_pos = lasts.iter().position(|&w| w == m.at(*local.last().expect("a member"))).expect("a node");
    flat_scan::recursive_doubling(s, &within, src, dst, exclusive);
    s.fence();
    let len = src.len;
    let last = pos + 1 == local.len();
    let before = Span::new(s.scratch(len), 0, len);
    if last {
        // My node's reduction: my inclusive result (the exclusive one with my own on the right).
        let total = if !exclusive {
            dst
        } else if pos == 0 {
            src
        } else {
            let total = Span::new(s.scratch(len), 0, len);
            s.copy(src, total);
            s.reduce(dst, total, true);
            s.fence();
            total
        };
        let among = Members {
            world: &lasts,
            me: node_pos,
            nodes: lasts.len(),
            node_of: &[],
        };
        flat_scan::recursive_doubling(s, &among, total, before, true);
        s.fence();
    }
    if node_pos == 0 {
        // The first node: nothing comes before it.
        return;
    }
    algorithm::bcast(s, &within, t, local.len() - 1, before);
    s.fence();
    if exclusive && pos == 0 {
        s.copy(before, dst);
    } else {
        s.reduce(before, dst, true);
    }
}

/// Node-aware gather of `len`-byte blocks: each node gathers to its leader, the leaders send
/// their nodes' blocks to the root, which puts every block in its member's place.
pub(super) fn gather(s: &mut Schedule, m: &Members, t: &Tunables, root: usize, src: Span, dst: Span) {
    let n = Nodes::of(m, root);
    let len = src.len;
    // Elsewhere `src`, not touched: only the gather's root writes its `dst`.
    let node_buf = n.node_scratch(s, len, src);
    algorithm::gather(s, &n.within(), t, n.my_leader_pos(), src, node_buf);
    if !n.leads() {
        return;
    }
    s.fence();
    let (parts, total) = n.node_parts(len);
    let all = if m.me == root {
        Span::new(s.scratch(total), 0, total)
    } else {
        node_buf
    };
    flat::gatherv_linear(s, &n.among(), n.root_node, node_buf, all, &parts);
    if m.me == root {
        s.fence();
        n.reorder(s, all, dst, len, true);
    }
}

/// Node-aware scatter of `len`-byte blocks: the root puts the blocks in node order and sends
/// each other node's to its leader, which scatters them within its node.
pub(super) fn scatter(s: &mut Schedule, m: &Members, t: &Tunables, root: usize, src: Span, dst: Span) {
    let n = Nodes::of(m, root);
    let len = dst.len;
    // Elsewhere `dst`, not read: only the scatter's root reads its `src`.
    let node_buf = n.node_scratch(s, len, dst);
    if n.leads() {
        let (parts, total) = n.node_parts(len);
        let all = if m.me == root {
            let all = Span::new(s.scratch(total), 0, total);
            n.reorder(s, all, src, len, false);
            s.fence();
            all
        } else {
            node_buf
        };
        flat::scatterv_linear(s, &n.among(), n.root_node, all, &parts, node_buf);
        s.fence();
    }
    algorithm::scatter(s, &n.within(), t, n.my_leader_pos(), node_buf, dst);
}

/// Node-aware allgather of `len`-byte blocks: each node gathers to its leader, the leaders
/// exchange their nodes' blocks, each leader puts every block in its place in `dst` and
/// broadcasts it within its node.
pub(super) fn allgather(s: &mut Schedule, m: &Members, t: &Tunables, src: Span, dst: Span) {
    let n = Nodes::of(m, 0);
    let len = src.len;
    let mine = n.local.len() * len;
    let (parts, total) = n.node_parts(len);
    let all = if n.leads() {
        Span::new(s.scratch(total), 0, total)
    } else {
        src // not touched: only the gather's root writes its `dst`
    };
    let node_buf = if n.leads() {
        all.sub(parts[n.my_node()].0, mine)
    } else {
        src
    };
    algorithm::gather(s, &n.within(), t, n.my_leader_pos(), src, node_buf);
    if n.leads() {
        s.fence();
        flat::allgatherv_ring(s, &n.among(), node_buf, all, &parts);
        s.fence();
        n.reorder(s, all, dst, len, true);
        s.fence();
    }
    algorithm::bcast(s, &n.within(), t, n.my_leader_pos(), dst);
}

/// Node-aware all-to-all of `len`-byte blocks (every member's `src` and `dst` hold a block
/// per member): each node gathers its members' whole send buffers to its leader; the leaders
/// exchange, one message per pair of nodes, every block one node's members send another's
/// (pairwise); each leader puts the blocks for each of its members in member order and
/// scatters them within its node. A flat all-to-all sends n − 1 messages per member, most
/// of them between nodes; this sends nodes − 1 between nodes per node, at the price of
/// three more copies of the data on shared memory (gather, reordering, scatter), so it pays
/// for small blocks only ([`alltoall_pays`](super::algorithm)).
pub(super) fn alltoall(s: &mut Schedule, m: &Members, t: &Tunables, src: Span, dst: Span, len: usize) {
    let n = Nodes::of(m, 0);
    let whole = m.n() * len;
    let c = n.local.len();
    // At the leader, every local member's send buffer, by position in the node; later each
    // local member's receive buffer, the same way. Elsewhere `src`, not touched (only a
    // gather's root writes its `dst`, only a scatter's root reads its `src`).
    let by_member = n.node_scratch(s, whole, src);
    algorithm::gather(s, &n.within(), t, n.my_leader_pos(), src, by_member);
    if n.leads() {
        s.fence();
        // Node k's members, in rank order, and the part of the leaders' exchange each node
        // takes: this node's members' blocks for node k's, both ways (c · |k| blocks).
        let members: Vec<Vec<usize>> = (0..m.nodes)
            .map(|k| (0..m.n()).filter(|&j| m.node_of[j] as usize == k).collect())
            .collect();
        let mut parts = Vec::with_capacity(m.nodes);
        let mut off = 0;
        for node in &members {
            parts.push((off, c * node.len() * len));
            off += c * node.len() * len;
        }
        let out = Span::new(s.scratch(off), 0, off);
        let into = Span::new(s.scratch(off), 0, off);
        // Out to node k: local member i's block for each of k's members j, i-major.
        for (k, node) in members.iter().enumerate() {
            for i in 0..c {
                for (jj, &j) in node.iter().enumerate() {
                    let at = parts[k].0 + (i * node.len() + jj) * len;
                    s.copy(by_member.sub(i * whole + j * len, len), out.sub(at, len));
                }
            }
        }
        s.fence();
        alltoall::pairwise(s, &n.among(), out, &parts, into, &parts);
        s.fence();
        // From node k: each of k's members j's block for each local member i, j-major; into
        // local member i's receive buffer as block j.
        for (k, node) in members.iter().enumerate() {
            for (jj, &j) in node.iter().enumerate() {
                for i in 0..c {
                    let at = parts[k].0 + (jj * c + i) * len;
                    s.copy(into.sub(at, len), by_member.sub(i * whole + j * len, len));
                }
            }
        }
        s.fence();
    }
    algorithm::scatter(s, &n.within(), t, n.my_leader_pos(), by_member, dst);
}
