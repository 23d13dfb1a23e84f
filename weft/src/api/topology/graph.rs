//! Graph and distributed-graph communicators: a Weft extension in rsmpi's style (rsmpi has
//! neither). [`GraphCommunicator`] carries a graph every member knows (MPI_Graph_create);
//! [`DistributedGraphCommunicator`] carries each member's own in- and out-edges
//! (MPI_Dist_graph_create_adjacent, or MPI_Dist_graph_create where any member may name any
//! edge and an exchange tells each member its own). Both are full communicators, and the
//! neighbourhood collectives follow their edges.
//!
//! Ranks are never reordered (MPI allows either).

use super::{AsCommunicator, Communicator, Rank, SimpleCommunicator};
use crate::api::collective::CommunicatorCollectives;
use crate::api::datatype::{Count, Partition, PartitionMut};
use crate::comm::process_topology::{DistGraph, Graph, ProcessTopology};
use crate::comm::{self, CommData};
use crate::error::{fatal, Error, ErrorClass, Result};
use crate::runtime;
use std::rc::Rc;

/// A communicator with a graph every member knows (MPI_Graph_create).
#[derive(Debug)]
#[repr(transparent)]
pub struct GraphCommunicator(pub(super) SimpleCommunicator);

/// A communicator with a distributed graph: each member knows its own edges.
#[derive(Debug)]
#[repr(transparent)]
pub struct DistributedGraphCommunicator(pub(super) SimpleCommunicator);

impl SimpleCommunicator {
    /// This communicator as a graph one, when it has a graph (for a front end that holds
    /// every communicator as a `SimpleCommunicator`, as the C ABI does).
    pub fn as_graph(&self) -> Option<&GraphCommunicator> {
        match self.comm_data().process_topology.as_deref() {
            // SAFETY: `GraphCommunicator` is `repr(transparent)` over `SimpleCommunicator`;
            // its invariant (a graph) holds here.
            Some(ProcessTopology::Graph(_)) => Some(unsafe { self.view_as() }),
            _ => None,
        }
    }

    /// This communicator as a distributed-graph one, when it has such a graph.
    pub fn as_distributed_graph(&self) -> Option<&DistributedGraphCommunicator> {
        match self.comm_data().process_topology.as_deref() {
            // SAFETY: as in `as_graph`, for `DistributedGraphCommunicator`.
            Some(ProcessTopology::DistGraph(_)) => Some(unsafe { self.view_as() }),
            _ => None,
        }
    }
}

impl From<GraphCommunicator> for SimpleCommunicator {
    fn from(c: GraphCommunicator) -> SimpleCommunicator {
        c.0
    }
}

impl From<DistributedGraphCommunicator> for SimpleCommunicator {
    fn from(c: DistributedGraphCommunicator) -> SimpleCommunicator {
        c.0
    }
}

/// A member's edges in a distributed graph (MPI_Dist_graph_neighbors).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DistributedGraphNeighbors {
    /// Ranks with an edge to this one, in the order the neighbourhood collectives receive.
    pub sources: Vec<Rank>,
    /// The weight of each in-edge (`None`: the graph has no weights).
    pub source_weights: Option<Vec<Count>>,
    /// Ranks this one has an edge to, in the order the neighbourhood collectives send.
    pub destinations: Vec<Rank>,
    /// The weight of each out-edge.
    pub destination_weights: Option<Vec<Count>>,
}

fn attach(d: CommData, t: ProcessTopology) -> SimpleCommunicator {
    SimpleCommunicator::user(d.with_process_topology(Some(Rc::new(t))))
}

/// MPI_Graph_create on `parent`: the first `index.len()` ranks form the graph, in order.
pub(super) fn create_graph(
    parent: &CommData,
    index: &[Count],
    edges: &[Rank],
) -> Result<Option<GraphCommunicator>> {
    const CALL: &str = "create_graph_communicator";
    let graph = Graph::new(CALL, index, edges, parent.size())?;
    let color = ((parent.rank as usize) < graph.nnodes()).then_some(0);
    let made = runtime::with_call(CALL, |rt| {
        comm::split(
            &mut rt.engine,
            &mut rt.contexts,
            parent,
            color,
            parent.rank as i32,
        )
    })?;
    Ok(made.map(|d| GraphCommunicator(attach(d, ProcessTopology::Graph(graph)))))
}

/// MPI_Graph_map: this rank's rank in the graph, if it is a node.
pub(super) fn map(parent: &CommData, index: &[Count], edges: &[Rank]) -> Result<Option<Rank>> {
    let graph = Graph::new("graph_map", index, edges, parent.size())?;
    Ok(((parent.rank as usize) < graph.nnodes()).then_some(parent.rank as Rank))
}

/// MPI_Dist_graph_create_adjacent on `parent`.
pub(super) fn create_adjacent(
    parent: &CommData,
    sources: (&[Rank], Option<&[Count]>),
    destinations: (&[Rank], Option<&[Count]>),
) -> Result<DistributedGraphCommunicator> {
    const CALL: &str = "create_distributed_graph_communicator_adjacent";
    let g = DistGraph::adjacent(CALL, sources, destinations, parent.size())?;
    dup_with(CALL, parent, g)
}

fn dup_with(
    call: &'static str,
    parent: &CommData,
    g: DistGraph,
) -> Result<DistributedGraphCommunicator> {
    let d = runtime::with_call(call, |rt| {
        comm::dup(&mut rt.engine, &mut rt.contexts, parent)
    })?;
    Ok(DistributedGraphCommunicator(attach(
        d,
        ProcessTopology::DistGraph(g),
    )))
}

/// MPI_Dist_graph_create on `parent` (a communicator handle, for the exchange): this member
/// names, for each `sources[i]`, `degrees[i]` edges to the next entries of `destinations`.
/// An all-to-all of counts, then one of edges, gives each member the edges into and out of it:
/// for an edge s → d, s learns (d, weight) and d learns (s, weight), in the order of the
/// members that named them, then the order each named them in.
pub(super) fn create_general<C: Communicator + ?Sized>(
    parent: &C,
    sources: &[Rank],
    degrees: &[Count],
    destinations: &[Rank],
    weights: Option<&[Count]>,
) -> Result<DistributedGraphCommunicator> {
    const CALL: &str = "create_distributed_graph_communicator";
    let n = parent.size();
    let err = |class, detail: String| Error::new(class, CALL, detail);
    if sources.len() != degrees.len() {
        return Err(err(
            ErrorClass::Arg,
            format!(
                "sources has {} entries and degrees {}: one degree per source",
                sources.len(),
                degrees.len()
            ),
        ));
    }
    if let Some((i, d)) = degrees.iter().enumerate().find(|(_, &d)| d < 0) {
        return Err(err(
            ErrorClass::Arg,
            format!("degrees[{i}] is {d}: degrees must not be negative"),
        ));
    }
    let total: i64 = degrees.iter().map(|&d| d as i64).sum();
    if total != destinations.len() as i64 {
        return Err(err(
            ErrorClass::Arg,
            format!(
                "degrees add up to {total} edges but destinations has {} entries",
                destinations.len()
            ),
        ));
    }
    if let Some(w) = weights {
        if w.len() != destinations.len() {
            return Err(err(
                ErrorClass::Arg,
                format!(
                    "weights has {} entries for {} edges",
                    w.len(),
                    destinations.len()
                ),
            ));
        }
        if let Some((i, x)) = w.iter().enumerate().find(|(_, &x)| x < 0) {
            return Err(err(
                ErrorClass::Arg,
                format!("weights[{i}] is {x}: weights must not be negative"),
            ));
        }
    }
    let in_range = |what: &str, v: &[Rank]| -> Result<()> {
        match v.iter().enumerate().find(|(_, &r)| r < 0 || r >= n) {
            Some((i, r)) => Err(err(
                ErrorClass::Rank,
                format!("{what}[{i}] is {r}, outside a communicator of {n} members"),
            )),
            None => Ok(()),
        }
    };
    in_range("sources", sources)?;
    in_range("destinations", destinations)?;

    // Records of three words: (1 = out-edge of the receiver, 0 = in-edge), peer, weight.
    let mut outgoing: Vec<Vec<Count>> = vec![Vec::new(); n as usize];
    let mut e = 0;
    for (&s, &deg) in sources.iter().zip(degrees) {
        for _ in 0..deg {
            let d = destinations[e];
            let w = weights.map_or(1, |w| w[e]);
            outgoing[s as usize].extend([1, d, w]);
            outgoing[d as usize].extend([0, s, w]);
            e += 1;
        }
    }
    let counts: Vec<Count> = outgoing.iter().map(|v| v.len() as Count).collect();
    let mut theirs = vec![0 as Count; n as usize];
    parent.all_to_all_into(&counts[..], &mut theirs[..]);
    let displs = |c: &[Count]| -> Vec<Count> {
        c.iter()
            .scan(0, |at, &x| {
                let d = *at;
                *at += x;
                Some(d)
            })
            .collect()
    };
    let flat: Vec<Count> = outgoing.concat();
    let mut got = vec![0 as Count; theirs.iter().map(|&c| c as usize).sum()];
    {
        let send = Partition::new(&flat[..], &counts[..], displs(&counts));
        let (tc, td) = (theirs.clone(), displs(&theirs));
        let mut recv = PartitionMut::new(&mut got[..], tc, td);
        parent.all_to_all_varcount_into(&send, &mut recv);
    }
    let mut g = DistGraph {
        sources: Vec::new(),
        source_weights: weights.map(|_| Vec::new()),
        destinations: Vec::new(),
        destination_weights: weights.map(|_| Vec::new()),
    };
    for rec in got.chunks_exact(3) {
        let (list, w) = if rec[0] == 1 {
            (&mut g.destinations, &mut g.destination_weights)
        } else {
            (&mut g.sources, &mut g.source_weights)
        };
        list.push(rec[1] as u32);
        if let Some(w) = w {
            w.push(rec[2]);
        }
    }
    dup_with(CALL, parent.comm_data(), g)
}

impl GraphCommunicator {
    fn graph(&self) -> &Graph {
        match self.comm_data().process_topology.as_deref() {
            Some(ProcessTopology::Graph(g)) => g,
            other => unreachable!("a GraphCommunicator with topology {other:?}"),
        }
    }

    /// Number of nodes and of edges (MPI_Graphdims_get).
    pub fn graph_dims(&self) -> (Count, Count) {
        let g = self.graph();
        (g.nnodes() as Count, g.edges.len() as Count)
    }

    /// The graph as it was created: cumulative neighbour counts and the edges (MPI_Graph_get).
    pub fn graph_layout(&self) -> (Vec<Count>, Vec<Rank>) {
        let g = self.graph();
        (
            g.index.clone(),
            g.edges.iter().map(|&e| e as Rank).collect(),
        )
    }

    /// Number of neighbours of `rank` (MPI_Graph_neighbors_count); panics on a bad rank.
    #[track_caller]
    pub fn neighbors_count(&self, rank: Rank) -> Count {
        self.neighbors(rank).len() as Count
    }

    /// The neighbours of `rank` in order (MPI_Graph_neighbors); panics on a bad rank.
    #[track_caller]
    pub fn neighbors(&self, rank: Rank) -> Vec<Rank> {
        let r = fatal(self.comm_data().check_rank("neighbors", rank));
        self.graph()
            .neighbors(r)
            .iter()
            .map(|&e| e as Rank)
            .collect()
    }
}

impl DistributedGraphCommunicator {
    fn graph(&self) -> &DistGraph {
        match self.comm_data().process_topology.as_deref() {
            Some(ProcessTopology::DistGraph(g)) => g,
            other => unreachable!("a DistributedGraphCommunicator with topology {other:?}"),
        }
    }

    /// In-degree, out-degree, and whether the graph has weights
    /// (MPI_Dist_graph_neighbors_count).
    pub fn neighbors_count(&self) -> (Count, Count, bool) {
        let g = self.graph();
        (
            g.sources.len() as Count,
            g.destinations.len() as Count,
            g.source_weights.is_some(),
        )
    }

    /// This member's edges (MPI_Dist_graph_neighbors).
    pub fn neighbors(&self) -> DistributedGraphNeighbors {
        let g = self.graph();
        let ranks = |v: &[u32]| v.iter().map(|&r| r as Rank).collect();
        DistributedGraphNeighbors {
            sources: ranks(&g.sources),
            source_weights: g.source_weights.clone(),
            destinations: ranks(&g.destinations),
            destination_weights: g.destination_weights.clone(),
        }
    }
}

impl AsCommunicator for GraphCommunicator {
    fn comm_data(&self) -> &CommData {
        self.0.comm_data()
    }
}
impl Communicator for GraphCommunicator {
    fn attributes(&self) -> &super::Attributes {
        self.0.attributes()
    }
    fn attributes_mut(&mut self) -> &mut super::Attributes {
        self.0.attributes_mut()
    }
}

impl AsCommunicator for DistributedGraphCommunicator {
    fn comm_data(&self) -> &CommData {
        self.0.comm_data()
    }
}
impl Communicator for DistributedGraphCommunicator {
    fn attributes(&self) -> &super::Attributes {
        self.0.attributes()
    }
    fn attributes_mut(&mut self) -> &mut super::Attributes {
        self.0.attributes_mut()
    }
}
