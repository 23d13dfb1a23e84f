//! Collectives of a communicator on several nodes (Sun MPI's network awareness): within each
//! node through the node's shared area, between nodes by messages among the node leaders
//! (each node's lowest rank), so that each node sends and receives the inter-node data once,
//! whatever the placement of the ranks and whatever the root.
//!
//! Every member of a node runs the same sequence of area operations (a member that reads
//! nothing still takes part), so the area's numbering stays in step; the leaders' messages
//! travel on one collective tag taken by every member. A root that does not lead its node
//! trades its data with its leader by one message on that tag (it receives nothing else on
//! it: only leaders exchange there).

use super::start::ShmOp;
use crate::coll::shm::{NodeArea, SizeMismatch};
use crate::coll::{gather, reduce, Area, Members, Schedule, Span};
use crate::comm::node_topology::NodeTopology;
use crate::comm::CommData;
use crate::engine::buffer::{RawBuf, RawBufMut};
use crate::engine::schedule::Combine;

pub(super) type NodeEngine = crate::engine::Engine<crate::fabric::node::NodeFabric>;

/// One hierarchical collective's setting: who leads which node, and the leaders' tag.
pub(super) struct Hierarchy<'a> {
    pub comm: &'a CommData,
    pub topo: &'a NodeTopology,
    /// World ranks of the node leaders, in leader order.
    pub leaders: &'a [u32],
    /// The tag of the leaders' messages.
    pub tag: i32,
    pub tunables: &'a crate::tunables::Tunables,
}

/// The data of one exchange by messages: what a member sends (`input`) and the buffer it
/// receives into or works in (`output`).
struct Exchange<'a> {
    input: &'a [u8],
    output: &'a mut [u8],
    combine: Option<Combine>,
}

impl Hierarchy<'_> {
    /// Whether `op` has a hierarchical form for members that each give `writes` bytes (the
    /// node areas must hold what a leader writes into them).
    pub fn applies(op: &ShmOp, writes: usize, members: usize, slot: usize) -> bool {
        match op {
            ShmOp::Barrier | ShmOp::Bcast { .. } => true,
            // Leaders combine in node order: the operation must commute.
            ShmOp::Reduce { commutative, .. } => *commutative,
            // Gather and scatter: a leader gives or takes its whole node's blocks in the area.
            // Allgather: a leader hands out every member's block in the area.
            ShmOp::Gather { root: Some(_) } | ShmOp::Scatter { .. } => true,
            ShmOp::Gather { root: None } => writes.saturating_mul(members) <= slot,
            _ => false,
        }
    }

    /// The node (leader index) of communicator rank `r`.
    fn node_of(&self, r: usize) -> usize {
        self.topo.node_of_member[r] as usize
    }

    /// Whether communicator rank `r` leads its node.
    fn leads(&self, r: usize) -> bool {
        self.leaders[self.node_of(r)] == self.comm.world_rank(r as u32)
    }

    /// Each node's blocks of `len` bytes, node after node, as (offset, length) per node.
    fn node_blocks(&self, len: usize) -> Vec<(usize, usize)> {
        let mut count = vec![0usize; self.leaders.len()];
        for &node in &self.topo.node_of_member {
            count[node as usize] += 1;
        }
        let mut off = 0;
        count
            .iter()
            .map(|&c| {
                let b = (off, c * len);
                off += c * len;
                b
            })
            .collect()
    }

    /// For each communicator rank, where its block lies in node order (nodes one after
    /// another, each node's members in rank order).
    fn node_order_offsets(&self, len: usize) -> Vec<usize> {
        let mut next: Vec<usize> = self.node_blocks(len).iter().map(|b| b.0).collect();
        (0..self.topo.node_of_member.len())
            .map(|r| {
                let node = self.node_of(r);
                let off = next[node];
                next[node] += len;
                off
            })
            .collect()
    }

    /// Blocks in node order into rank order.
    fn to_rank_order(&self, by_node: &[u8], out: &mut [u8], len: usize) {
        for (r, off) in self.node_order_offsets(len).into_iter().enumerate() {
            out[r * len..(r + 1) * len].copy_from_slice(&by_node[off..off + len]);
        }
    }

    /// Blocks in rank order into node order.
    fn to_node_order(&self, by_rank: &[u8], out: &mut [u8], len: usize) {
        for (r, off) in self.node_order_offsets(len).into_iter().enumerate() {
            out[off..off + len].copy_from_slice(&by_rank[r * len..(r + 1) * len]);
        }
    }

    pub fn run(
        &self,
        call: &'static str,
        mut area: Option<&mut NodeArea>,
        engine: &mut NodeEngine,
        op: ShmOp,
        src: &[u8],
        dst: &mut [u8],
    ) -> Result<(), SizeMismatch> {
        let leader = self.topo.is_leader();
        let me_node = self.topo.node_index;
        match op {
            ShmOp::Barrier => {
                if let Some(a) = area.as_deref_mut() {
                    a.barrier(engine);
                }
                if leader {
                    self.among_leaders(call, engine, Exchange::on(dst), |s, m, _| {
                        crate::coll::algorithm::barrier(s, m)
                    });
                }
                if let Some(a) = area {
                    a.barrier(engine);
                }
            }
            ShmOp::Bcast { root } => {
                let root_node = self.node_of(root);
                if root_node == me_node {
                    if let Some(a) = area.as_deref_mut() {
                        a.bcast(engine, self.local_index(root), dst)?;
                    }
                }
                if leader {
                    let len = dst.len();
                    self.among_leaders(call, engine, Exchange::on(dst), |s, m, t| {
                        crate::coll::algorithm::bcast(s, m, t, root_node, output(len))
                    });
                }
                if root_node != me_node {
                    if let Some(a) = area {
                        a.bcast(engine, 0, dst)?;
                    }
                }
            }
            ShmOp::Reduce {
                root: None,
                combine,
                elem,
                ..
            } => {
                // Each node reduces to its leader, the leaders allreduce, each leader
                // broadcasts to its node: every member gets the leaders' identical result.
                match area.as_deref_mut() {
                    Some(a) => a.reduce(engine, Some(0), src, dst, combine, elem)?,
                    None => dst.copy_from_slice(src),
                }
                if leader {
                    let len = dst.len();
                    let x = Exchange::on(dst).combining(combine.clone());
                    self.among_leaders(call, engine, x, |s, m, _| {
                        reduce::recursive_doubling(s, m, output(len), output(len))
                    });
                }
                if let Some(a) = area {
                    a.bcast(engine, 0, dst)?;
                }
            }
            ShmOp::Reduce {
                root: Some(root),
                combine,
                elem,
                ..
            } => {
                // Each node reduces to its leader, the leaders reduce to the root's leader,
                // which hands the result to the root.
                let len = src.len();
                let mut acc = vec![0u8; if leader { len } else { 0 }];
                match area {
                    Some(a) => a.reduce(engine, Some(0), src, &mut acc, combine, elem)?,
                    None => acc.copy_from_slice(src),
                }
                let root_node = self.node_of(root);
                if leader {
                    let x = Exchange::on(&mut acc).combining(combine.clone());
                    self.among_leaders(call, engine, x, |s, m, _| {
                        reduce::binomial(s, m, root_node, output(len), output(len), true)
                    });
                }
                self.leader_to_root(call, engine, root, &mut acc, dst);
            }
            ShmOp::Gather { root } => {
                // Each node gathers to its leader; the leaders gather (to the root's leader)
                // or allgather the nodes' blocks; the result goes to the root, or out to
                // every member through each node's area.
                let (len, n) = (src.len(), self.topo.node_of_member.len());
                let mut node_data = vec![
                    0u8;
                    if leader {
                        self.topo.local.len() * len
                    } else {
                        0
                    }
                ];
                match area.as_deref_mut() {
                    Some(a) => a.gather(engine, Some(0), src, &mut node_data)?,
                    None => node_data.copy_from_slice(src),
                }
                let blocks = self.node_blocks(len);
                let root_node = root.map(|r| self.node_of(r));
                // The leaders' exchange lands the nodes' blocks here (at the root's leader, or
                // at every leader for an allgather).
                let lands = leader && root_node.is_none_or(|rn| rn == me_node);
                let mut by_node = vec![0u8; if lands { n * len } else { 0 }];
                if leader {
                    let x = Exchange {
                        input: &node_data,
                        output: &mut by_node,
                        combine: None,
                    };
                    let mine = blocks[me_node];
                    self.among_leaders(call, engine, x, |s, m, _| match root_node {
                        Some(rn) => gather::gatherv_linear(
                            s,
                            m,
                            rn,
                            input(mine.1),
                            output(n * len),
                            &blocks,
                        ),
                        None => {
                            gather::allgatherv_ring(s, m, input(mine.1), output(n * len), &blocks)
                        }
                    });
                }
                match root {
                    Some(root) => {
                        // At the root's leader when it is not the root: the result on its way.
                        let relay = lands && !self.leads(root);
                        let mut result = vec![0u8; if relay { n * len } else { 0 }];
                        if lands {
                            let out: &mut [u8] = if self.leads(root) {
                                &mut *dst
                            } else {
                                &mut result
                            };
                            self.to_rank_order(&by_node, out, len);
                        }
                        self.leader_to_root(call, engine, root, &mut result, dst);
                    }
                    None => {
                        if leader {
                            self.to_rank_order(&by_node, dst, len);
                        }
                        if let Some(a) = area {
                            a.bcast(engine, 0, dst)?;
                        }
                    }
                }
            }
            ShmOp::Scatter { root } => {
                // The root hands its blocks to its leader, the leaders scatter the nodes'
                // blocks, each leader scatters its node's through the area.
                let (len, n) = (dst.len(), self.topo.node_of_member.len());
                let root_node = self.node_of(root);
                let me = self.topo.local[self.topo.local_rank] as usize;
                // At the root's leader when it is not the root: the root's blocks.
                let relay = leader && root_node == me_node && !self.leads(root);
                let mut all = vec![0u8; if relay { n * len } else { 0 }];
                self.root_to_leader(call, engine, root, src, &mut all);
                let mut node_data = vec![
                    0u8;
                    if leader {
                        self.topo.local.len() * len
                    } else {
                        0
                    }
                ];
                if leader {
                    let mut by_node = vec![0u8; if root_node == me_node { n * len } else { 0 }];
                    if root_node == me_node {
                        let from: &[u8] = if me == root { src } else { &all };
                        self.to_node_order(from, &mut by_node, len);
                    }
                    let blocks = self.node_blocks(len);
                    let mine = blocks[me_node].1;
                    let x = Exchange {
                        input: &by_node,
                        output: &mut node_data,
                        combine: None,
                    };
                    self.among_leaders(call, engine, x, |s, m, _| {
                        gather::scatterv_linear(
                            s,
                            m,
                            root_node,
                            input(n * len),
                            &blocks,
                            output(mine),
                        )
                    });
                }
                match area {
                    Some(a) => a.scatter(engine, 0, &node_data, dst)?,
                    None => dst.copy_from_slice(&node_data),
                }
            }
            _ => unreachable!("only collectives with a hierarchical form come here"),
        }
        Ok(())
    }

    /// The position of communicator rank `r` among this node's members.
    fn local_index(&self, r: usize) -> usize {
        self.topo
            .local
            .iter()
            .position(|&x| x as usize == r)
            .expect("the rank is on this node")
    }

    /// A rooted result the root's leader holds (`held`) reaches the root's `dst`: copied
    /// when the root leads its node, else sent by one message.
    fn leader_to_root(
        &self,
        call: &'static str,
        engine: &mut NodeEngine,
        root: usize,
        held: &mut [u8],
        dst: &mut [u8],
    ) {
        if self.node_of(root) != self.topo.node_index {
            return;
        }
        if self.leads(root) {
            if self.topo.is_leader() && !held.is_empty() {
                dst.copy_from_slice(held);
            }
            return;
        }
        let me = self.topo.local[self.topo.local_rank] as usize;
        if self.topo.is_leader() {
            self.pair(call, engine, root, Exchange::on(held), true);
        } else if me == root {
            self.pair(call, engine, root, Exchange::on(dst), false);
        }
    }

    /// The root's data (`src`, at the root) reaches its leader's `into`: one message when
    /// the root does not lead its node (a leader that is the root reads `src` itself).
    fn root_to_leader(
        &self,
        call: &'static str,
        engine: &mut NodeEngine,
        root: usize,
        src: &[u8],
        into: &mut [u8],
    ) {
        if self.node_of(root) != self.topo.node_index || self.leads(root) {
            return;
        }
        let me = self.topo.local[self.topo.local_rank] as usize;
        if self.topo.is_leader() {
            self.pair(call, engine, root, Exchange::on(into), false);
        } else if me == root {
            let x = Exchange {
                input: src,
                output: &mut [],
                combine: None,
            };
            self.pair(call, engine, root, x, true);
        }
    }

    /// One message between this node's leader and `root` (a member of this node that does
    /// not lead it): `send` says whether this member is the sender. The sender sends its
    /// input when it has one, else its output.
    fn pair(
        &self,
        call: &'static str,
        engine: &mut NodeEngine,
        root: usize,
        x: Exchange,
        send: bool,
    ) {
        let leader_world = self.leaders[self.topo.node_index];
        let root_world = self.comm.world_rank(root as u32);
        let (me, other) = if self.topo.is_leader() {
            (leader_world, root_world)
        } else {
            (root_world, leader_world)
        };
        let len = if send && !x.input.is_empty() {
            x.input.len()
        } else {
            x.output.len()
        };
        let from = if !x.input.is_empty() {
            input(len)
        } else {
            output(len)
        };
        let pair = [me, other];
        self.exchange(call, engine, &pair, 0, x, |s, _, _| {
            if send {
                s.send(other, from);
            } else {
                s.recv(other, output(len));
            }
        });
    }

    /// Runs a schedule among the node leaders and waits for it.
    fn among_leaders(
        &self,
        call: &'static str,
        engine: &mut NodeEngine,
        x: Exchange,
        build: impl FnOnce(&mut Schedule, &Members, &crate::tunables::Tunables),
    ) {
        self.exchange(call, engine, self.leaders, self.topo.node_index, x, build);
    }

    /// Runs a schedule among `members` (world ranks; this one is `members[me]`) over `x`,
    /// on the collective's tag, and waits for it.
    fn exchange(
        &self,
        call: &'static str,
        engine: &mut NodeEngine,
        members: &[u32],
        me: usize,
        x: Exchange,
        build: impl FnOnce(&mut Schedule, &Members, &crate::tunables::Tunables),
    ) {
        // SAFETY: `x.input` and `x.output` are borrowed for this call, which waits for the
        // schedule to end; they are distinct (one shared, one exclusive borrow).
        let (inp, out) = unsafe { (RawBuf::new(x.input), RawBufMut::new(x.output)) };
        let mut s = Schedule::new(call, self.comm.coll_context(), self.tag)
            .with_input(inp)
            .with_output(out);
        if let Some(c) = x.combine {
            s = s.with_combine(c);
        }
        // Leaders are one per node; a leader and a root of its node share one.
        let nodes = if members == self.leaders {
            members.len()
        } else {
            1
        };
        let m = Members {
            world: members,
            me,
            nodes,
            node_of: &[],
        };
        build(&mut s, &m, self.tunables);
        // SAFETY: the views are of `x`'s buffers, borrowed until the wait below returns.
        let h = unsafe { engine.start_schedule(s) };
        if let Err(e) = engine.wait(h) {
            // An exchange failing ends the job like any collective error.
            panic!("{e}");
        }
    }
}

impl<'a> Exchange<'a> {
    /// Works in `data` (in place), sending nothing else.
    fn on(data: &'a mut [u8]) -> Self {
        Exchange {
            input: &[],
            output: data,
            combine: None,
        }
    }
    fn combining(mut self, c: Combine) -> Self {
        self.combine = Some(c);
        self
    }
}

fn input(len: usize) -> Span {
    Span::new(Area::Input, 0, len)
}
fn output(len: usize) -> Span {
    Span::new(Area::Output, 0, len)
}
