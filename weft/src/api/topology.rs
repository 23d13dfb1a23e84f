//! Communicators, groups and processes, in rsmpi's shape; process topologies (Cartesian
//! grids as rsmpi has them, graphs and distributed graphs as a Weft extension) in the
//! submodules, re-exported here.

mod attribute;
mod cartesian;
mod comm_buffer;
mod duplicate;
mod dynamic;
mod graph;
mod inter;

pub use self::attribute::{AnyCommunicator, Attributes, CommAttribute};
pub use self::cartesian::{dims_create, CartesianCommunicator, CartesianLayout};
pub use self::duplicate::DuplicateRequest;
pub use self::dynamic::{lookup_name, publish_name, unpublish_name, Port, SpawnCommand};
pub use self::graph::{DistributedGraphCommunicator, DistributedGraphNeighbors, GraphCommunicator};
pub use self::inter::{InterCommunicator, MergeOrder, PROC_NULL, ROOT};
use super::datatype::{Buffer, BufferMut, Count};
use super::point_to_point::Tag;
use crate::comm::context::{SELF_PAIR, WORLD_PAIR};
use crate::comm::group::{GroupData, Relation};
use crate::comm::process_topology::ProcessTopology;
use crate::comm::{self, CommData};
use crate::error::{fatal, Error, ErrorClass, Result};
use crate::runtime;
use std::rc::Rc;

/// A rank in a communicator or group.
pub type Rank = i32;
/// The key that orders ranks in `split_by_color_with_key`.
pub type Key = i32;

/// How two communicators relate (MPI_Comm_compare).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CommunicatorRelation {
    /// The same communicator.
    Identical,
    /// Same members in the same order, different contexts.
    Congruent,
    /// Same members, different order.
    Similar,
    /// Different members.
    Unequal,
}

/// How two groups relate (MPI_Group_compare).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupRelation {
    /// Same members in the same order.
    Identical,
    /// Same members, different order.
    Similar,
    /// Different members.
    Unequal,
}

impl From<Relation> for GroupRelation {
    fn from(r: Relation) -> Self {
        match r {
            Relation::Identical => GroupRelation::Identical,
            Relation::Similar => GroupRelation::Similar,
            Relation::Unequal => GroupRelation::Unequal,
        }
    }
}

/// The color of `split_by_color`: a non-negative value, or undefined (no new communicator).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Color(Option<i32>);

impl Color {
    /// A defined color. Panics with a clear message on a negative value.
    pub fn with_value(value: i32) -> Color {
        if value < 0 {
            panic!(
                "{}",
                Error::new(
                    ErrorClass::Arg,
                    "Color::with_value",
                    format!("color {value} is negative")
                )
            );
        }
        Color(Some(value))
    }
    /// MPI_UNDEFINED: the caller gets no communicator.
    pub fn undefined() -> Color {
        Color(None)
    }
}

/// The kind of process topology a communicator has (MPI_Topo_test).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Topology {
    /// A graph every member knows.
    Graph,
    /// A Cartesian grid.
    Cartesian,
    /// A distributed graph.
    DistributedGraph,
    /// None (MPI_UNDEFINED).
    Undefined,
}

/// A communicator as its precise type, by its topology.
#[derive(Debug)]
pub enum IntoTopology {
    /// A graph.
    Graph(GraphCommunicator),
    /// A Cartesian grid.
    Cartesian(CartesianCommunicator),
    /// A distributed graph.
    DistributedGraph(DistributedGraphCommunicator),
    /// No topology.
    Undefined(SimpleCommunicator),
}

/// A communicator handle. Dropping a communicator created by dup/split frees its contexts.
#[derive(Debug)]
pub struct SimpleCommunicator {
    data: Rc<CommData>,
    owned: bool,
    /// This handle's attributes (`AnyCommunicator`).
    attributes: Attributes,
}

/// rsmpi's name for communicators made from others.
pub type UserCommunicator = SimpleCommunicator;

impl SimpleCommunicator {
    /// This communicator seen as one of its typed wrappers (`InterCommunicator`,
    /// `CartesianCommunicator`, ...), for the `as_*` views a front end uses.
    ///
    /// # Safety
    /// `T` is `repr(transparent)` over `SimpleCommunicator`, and this communicator meets
    /// `T`'s invariant (a remote group, a grid, a graph).
    unsafe fn view_as<T>(&self) -> &T {
        let this: *const SimpleCommunicator = self;
        // SAFETY: the caller's promise: same layout, invariant checked; borrowed as `self`.
        unsafe { &*this.cast::<T>() }
    }

    pub(crate) fn world() -> SimpleCommunicator {
        let (rank, size) = runtime::with_call("world", |rt| (rt.boot.rank, rt.boot.size));
        let group = Rc::new(GroupData::new((0..size).collect()));
        SimpleCommunicator {
            data: Rc::new(CommData::new(WORLD_PAIR, group, rank)),
            owned: false,
            attributes: Attributes::default(),
        }
    }

    /// The `self` communicator: just this rank.
    pub fn self_comm() -> SimpleCommunicator {
        let rank = runtime::with_call("self_comm", |rt| rt.boot.rank);
        let group = Rc::new(GroupData::new(vec![rank]));
        SimpleCommunicator {
            data: Rc::new(CommData::new(SELF_PAIR, group, 0)),
            owned: false,
            attributes: Attributes::default(),
        }
    }

    /// A handle on a communicator the runtime keeps (the parent intercommunicator):
    /// dropping it frees nothing.
    fn borrowed(data: Rc<CommData>) -> SimpleCommunicator {
        SimpleCommunicator {
            data,
            owned: false,
            attributes: Attributes::default(),
        }
    }

    fn user(data: CommData) -> SimpleCommunicator {
        SimpleCommunicator {
            data: Rc::new(data),
            owned: true,
            attributes: Attributes::default(),
        }
    }

    /// This communicator as the type of its topology (a duplicate of a Cartesian
    /// communicator, say, becomes a [`CartesianCommunicator`]).
    pub fn into_topology(self) -> IntoTopology {
        match self.topology() {
            Topology::Graph => IntoTopology::Graph(GraphCommunicator(self)),
            Topology::Cartesian => IntoTopology::Cartesian(CartesianCommunicator(self)),
            Topology::DistributedGraph => {
                IntoTopology::DistributedGraph(DistributedGraphCommunicator(self))
            }
            Topology::Undefined => IntoTopology::Undefined(self),
        }
    }
}

impl Drop for SimpleCommunicator {
    fn drop(&mut self) {
        if self.owned && runtime::is_running() {
            let pair = self.data.pair;
            runtime::with_call("drop of a communicator", |rt| {
                rt.engine
                    .forget_comm_buffer(comm::context::p2p_context(pair));
                rt.contexts.release(pair);
                rt.sequences.reset(pair);
                rt.node_areas.remove(pair);
                rt.names.remove(&pair);
            });
        }
    }
}

/// Gives access to the communicator behind a handle.
pub trait AsCommunicator {
    /// The communicator.
    #[doc(hidden)]
    fn comm_data(&self) -> &CommData;
}

impl AsCommunicator for SimpleCommunicator {
    fn comm_data(&self) -> &CommData {
        &self.data
    }
}

/// Operations on communicators (rsmpi's `Communicator`). Methods panic on error with a
/// message naming the call and values (MPI_ERRORS_ARE_FATAL); the `try_` forms return it.
pub trait Communicator: AsCommunicator {
    /// This handle's attributes (set and read through [`AnyCommunicator`]).
    #[doc(hidden)]
    fn attributes(&self) -> &Attributes;
    /// This handle's attributes, to change.
    #[doc(hidden)]
    fn attributes_mut(&mut self) -> &mut Attributes;
    /// Number of ranks.
    fn size(&self) -> Rank {
        self.comm_data().size() as Rank
    }
    /// This process's rank.
    fn rank(&self) -> Rank {
        self.comm_data().rank as Rank
    }
    /// The process with rank `r`; panics when `r` is out of range.
    #[track_caller]
    fn process_at_rank(&self, r: Rank) -> Process<'_> {
        fatal(self.try_process_at_rank(r))
    }
    /// The process with rank `r`, or an error naming `r` and the size.
    fn try_process_at_rank(&self, r: Rank) -> Result<Process<'_>> {
        self.comm_data().peer_world_rank("process_at_rank", r)?;
        Ok(Process {
            comm: self.comm_data(),
            rank: r,
        })
    }
    /// A source matching any process (MPI_ANY_SOURCE).
    fn any_process(&self) -> AnyProcess<'_> {
        AnyProcess {
            comm: self.comm_data(),
        }
    }
    /// This process.
    fn this_process(&self) -> Process<'_> {
        Process {
            comm: self.comm_data(),
            rank: self.rank(),
        }
    }
    /// MPI_Comm_compare.
    fn compare(&self, other: &dyn Communicator) -> CommunicatorRelation {
        let (a, b) = (self.comm_data(), other.comm_data());
        if a.pair == b.pair && a.group == b.group {
            return CommunicatorRelation::Identical;
        }
        match a.group.compare(&b.group) {
            Relation::Identical => CommunicatorRelation::Congruent,
            Relation::Similar => CommunicatorRelation::Similar,
            Relation::Unequal => CommunicatorRelation::Unequal,
        }
    }
    /// MPI_Comm_dup. Collective.
    #[track_caller]
    fn duplicate(&self) -> SimpleCommunicator {
        fatal(self.try_duplicate())
    }
    /// MPI_Comm_idup: starts making a duplicate without blocking; the request completes with
    /// it. Collective (both groups of an intercommunicator), in order with the other
    /// collectives on this communicator.
    fn immediate_duplicate(&self) -> DuplicateRequest {
        duplicate::start(self)
    }
    /// MPI_Comm_dup, returning errors.
    fn try_duplicate(&self) -> Result<SimpleCommunicator> {
        let d = self.comm_data();
        let data = runtime::with_call("duplicate", |rt| {
            comm::dup(&mut rt.engine, &mut rt.contexts, d)
        })?;
        let mut dup = SimpleCommunicator::user(data);
        dup.attributes = self.attributes().for_duplicate();
        Ok(dup)
    }
    /// MPI_Comm_split with key 0. Collective.
    fn split_by_color(&self, color: Color) -> Option<SimpleCommunicator> {
        self.split_by_color_with_key(color, 0)
    }
    /// MPI_Comm_split. Collective.
    #[track_caller]
    fn split_by_color_with_key(&self, color: Color, key: Key) -> Option<SimpleCommunicator> {
        fatal(self.try_split_by_color_with_key(color, key))
    }
    /// MPI_Comm_split, returning errors.
    fn try_split_by_color_with_key(
        &self,
        color: Color,
        key: Key,
    ) -> Result<Option<SimpleCommunicator>> {
        let d = self.comm_data();
        let data = runtime::with_call("split_by_color", |rt| {
            comm::split(&mut rt.engine, &mut rt.contexts, d, color.0, key)
        })?;
        Ok(data.map(SimpleCommunicator::user))
    }
    /// MPI_Comm_split_type(MPI_COMM_TYPE_SHARED): the ranks sharing this node. Collective.
    fn split_shared(&self, key: Key) -> SimpleCommunicator {
        let me = self.comm_data().world_rank(self.comm_data().rank);
        let node = runtime::with_call("split_shared", |rt| rt.boot.node_of[me as usize]);
        self.split_by_color_with_key(Color::with_value(node as i32), key)
            .expect("a defined color gives a communicator")
    }
    /// MPI_Comm_create: collective over this communicator; each rank passes a group (groups
    /// passed by different ranks must be equal or disjoint), members of a group get the
    /// communicator of that group, others `None`. On an intercommunicator each group's
    /// members pass one subgroup of their own group, and the members of the two subgroups
    /// get an intercommunicator between them (`None` everywhere when either is empty):
    /// [`InterCommunicator::split_by_subgroup_collective`].
    #[track_caller]
    fn split_by_subgroup_collective(&self, group: &dyn Group) -> Option<SimpleCommunicator> {
        let d = self.comm_data();
        let g = group.group_data();
        let me = d.world_rank(d.rank);
        if let Some(&w) = g.members().iter().find(|w| d.comm_rank(**w).is_none()) {
            panic!(
                "{}",
                Error::new(
                    ErrorClass::Arg,
                    "split_by_subgroup_collective",
                    format!("the group contains world rank {w}, which is not in this communicator"),
                )
            );
        }
        // Disjoint groups have distinct smallest members: that is the split color. On an
        // intercommunicator each group passes one subgroup (MPI): one color for both groups.
        let color = match g.rank_of(me) {
            None => Color::undefined(),
            Some(_) if d.is_inter() => Color::with_value(0),
            Some(_) => Color::with_value(*g.members().iter().min().expect("non-empty") as i32),
        };
        let key = g.rank_of(me).map_or(0, |r| r as i32);
        let c = self.split_by_color_with_key(color, key)?;
        if c.comm_data().group.members() != g.members() {
            panic!(
                "{}",
                Error::new(
                    ErrorClass::Arg,
                    "split_by_subgroup_collective",
                    "ranks passed overlapping but different groups (they must be equal or disjoint)",
                )
            );
        }
        Some(c)
    }
    /// MPI_Comm_create_group with tag 0: only members of `group` call it.
    fn split_by_subgroup(&self, group: &dyn Group) -> Option<SimpleCommunicator> {
        self.split_by_subgroup_with_tag(group, 0)
    }
    /// MPI_Comm_create_group: only members of `group` call it; collective over the group.
    #[track_caller]
    fn split_by_subgroup_with_tag(
        &self,
        group: &dyn Group,
        tag: i32,
    ) -> Option<SimpleCommunicator> {
        let d = self.comm_data();
        let g = group.group_data();
        fatal(runtime::with_call("split_by_subgroup", |rt| {
            comm::create_from_group(&mut rt.engine, &mut rt.contexts, d, g, tag)
        }))
        .map(SimpleCommunicator::user)
    }
    /// The communicator's group (an intercommunicator's: this rank's group).
    fn group(&self) -> UserGroup {
        UserGroup {
            data: self.comm_data().group.clone(),
        }
    }
    /// Whether this is an intercommunicator (MPI_Comm_test_inter).
    fn test_inter(&self) -> bool {
        self.comm_data().is_inter()
    }
    /// MPI_Intercomm_create (a Weft extension; rsmpi has none): joins this communicator's
    /// group with another, disjoint one. Every member names the same `local_leader`; at that
    /// leader, `peer` is a communicator holding both leaders, `remote_leader` the other
    /// group's leader's rank in it, and the leaders talk on `peer` with `tag`. Collective
    /// over both groups.
    #[track_caller]
    fn create_intercommunicator(
        &self,
        local_leader: Rank,
        peer: &dyn Communicator,
        remote_leader: Rank,
        tag: Tag,
    ) -> InterCommunicator {
        fatal(self.try_create_intercommunicator(local_leader, peer, remote_leader, tag))
    }
    /// [`create_intercommunicator`](Self::create_intercommunicator), returning errors.
    fn try_create_intercommunicator(
        &self,
        local_leader: Rank,
        peer: &dyn Communicator,
        remote_leader: Rank,
        tag: Tag,
    ) -> Result<InterCommunicator> {
        inter::create(
            self.comm_data(),
            local_leader,
            peer.comm_data(),
            remote_leader,
            tag,
        )
    }
    /// Ends the whole job with `errorcode` (MPI_Abort).
    fn abort(&self, errorcode: i32) -> ! {
        runtime::with_call("abort", |rt| {
            let r = rt.boot.rank;
            rt.boot
                .pmi
                .abort(errorcode, &format!("rank {r} called abort({errorcode})"))
        })
    }
    /// Sets the communicator's name.
    fn set_name(&self, name: &str) {
        let pair = self.comm_data().pair;
        runtime::with_call("set_name", |rt| rt.names.insert(pair, name.to_owned()));
    }
    /// The communicator's name ("MPI_COMM_WORLD" and "MPI_COMM_SELF" by default).
    fn get_name(&self) -> String {
        let pair = self.comm_data().pair;
        runtime::with_call("get_name", |rt| rt.names.get(&pair).cloned()).unwrap_or_else(|| {
            match pair {
                WORLD_PAIR => "MPI_COMM_WORLD".into(),
                SELF_PAIR => "MPI_COMM_SELF".into(),
                _ => String::new(),
            }
        })
    }
    /// The kind of process topology this communicator has (MPI_Topo_test).
    fn topology(&self) -> Topology {
        match self.comm_data().process_topology.as_deref() {
            None => Topology::Undefined,
            Some(ProcessTopology::Cartesian(_)) => Topology::Cartesian,
            Some(ProcessTopology::Graph(_)) => Topology::Graph,
            Some(ProcessTopology::DistGraph(_)) => Topology::DistributedGraph,
        }
    }
    /// MPI_Cart_create: the first `dims`-product ranks form a grid with `dims` and
    /// `periods`, in rank order (Weft never reorders, so `reorder` changes nothing); others
    /// get `None`. Panics on bad dimensions (more members than the communicator has, a
    /// dimension below 1, `periods` of another length). Collective.
    #[track_caller]
    fn create_cartesian_communicator(
        &self,
        dims: &[Count],
        periods: &[bool],
        reorder: bool,
    ) -> Option<CartesianCommunicator> {
        fatal(self.try_create_cartesian_communicator(dims, periods, reorder))
    }
    /// [`create_cartesian_communicator`](Self::create_cartesian_communicator), returning
    /// errors.
    fn try_create_cartesian_communicator(
        &self,
        dims: &[Count],
        periods: &[bool],
        _reorder: bool,
    ) -> Result<Option<CartesianCommunicator>> {
        self.comm_data()
            .intra_only("create_cartesian_communicator")?;
        cartesian::create(self.comm_data(), dims, periods)
    }
    /// MPI_Cart_map: this rank's rank in the grid `create_cartesian_communicator` would
    /// make, or `None` outside it. Panics on bad dimensions. Not collective.
    #[track_caller]
    fn cartesian_map(&self, dims: &[Count], periods: &[bool]) -> Option<Rank> {
        fatal(self.comm_data().intra_only("cartesian_map"));
        fatal(cartesian::map(self.comm_data(), dims, periods))
    }
    /// MPI_Graph_create (a Weft extension): the first `index.len()` ranks form a graph where
    /// rank i's neighbours are `edges[index[i-1]..index[i]]`; others get `None`. Weft never
    /// reorders. Panics on a bad graph. Collective.
    #[track_caller]
    fn create_graph_communicator(
        &self,
        index: &[Count],
        edges: &[Rank],
        _reorder: bool,
    ) -> Option<GraphCommunicator> {
        fatal(self.comm_data().intra_only("create_graph_communicator"));
        fatal(graph::create_graph(self.comm_data(), index, edges))
    }
    /// MPI_Graph_map (a Weft extension): this rank's rank in the graph
    /// `create_graph_communicator` would make, or `None` outside it. Not collective.
    #[track_caller]
    fn graph_map(&self, index: &[Count], edges: &[Rank]) -> Option<Rank> {
        fatal(self.comm_data().intra_only("graph_map"));
        fatal(graph::map(self.comm_data(), index, edges))
    }
    /// MPI_Dist_graph_create_adjacent (a Weft extension): this rank's in-edges from
    /// `sources` and out-edges to `destinations`, with weights or none (MPI_UNWEIGHTED; all
    /// ranks alike). Every rank must list each edge at both of its ends. Collective.
    #[track_caller]
    fn create_distributed_graph_communicator_adjacent(
        &self,
        sources: &[Rank],
        source_weights: Option<&[Count]>,
        destinations: &[Rank],
        destination_weights: Option<&[Count]>,
        _reorder: bool,
    ) -> DistributedGraphCommunicator {
        fatal(
            self.comm_data()
                .intra_only("create_distributed_graph_communicator_adjacent"),
        );
        fatal(graph::create_adjacent(
            self.comm_data(),
            (sources, source_weights),
            (destinations, destination_weights),
        ))
    }
    /// MPI_Dist_graph_create (a Weft extension): each rank names any edges: for each
    /// `sources[i]`, `degrees[i]` edges to the next entries of `destinations` (with the
    /// next `weights`). The ranks exchange them, so each learns the edges into and out of
    /// it. Collective.
    #[track_caller]
    fn create_distributed_graph_communicator(
        &self,
        sources: &[Rank],
        degrees: &[Count],
        destinations: &[Rank],
        weights: Option<&[Count]>,
        _reorder: bool,
    ) -> DistributedGraphCommunicator {
        fatal(
            self.comm_data()
                .intra_only("create_distributed_graph_communicator"),
        );
        fatal(graph::create_general(
            self,
            sources,
            degrees,
            destinations,
            weights,
        ))
    }
    /// Packs `inbuf` into bytes (MPI_Pack).
    fn pack<Buf: ?Sized + Buffer>(&self, inbuf: &Buf) -> Vec<u8>
    where
        Self: Sized,
    {
        inbuf.layout().pack()
    }
    /// Bytes `pack` would produce for `incount` elements of `datatype`.
    fn pack_size<Dt: super::datatype::Datatype>(&self, incount: i32, datatype: &Dt) -> i32
    where
        Self: Sized,
    {
        incount.max(0) * datatype.type_map().size() as i32
    }
    /// Unpacks `inbuf` from byte `position` into `outbuf`; returns the new position.
    ///
    /// # Safety
    /// `inbuf[position..]` must hold data packed from the same layout as `outbuf`'s.
    unsafe fn unpack_into<Buf: ?Sized + BufferMut>(
        &self,
        inbuf: &[u8],
        outbuf: &mut Buf,
        position: i32,
    ) -> i32
    where
        Self: Sized,
    {
        let l = outbuf.layout_mut();
        let pos = position.max(0) as usize;
        // SAFETY: BufferMut promises `count` writable elements of the layout at `ptr`.
        let n = unsafe { l.map.unpack(&inbuf[pos..], l.ptr as *mut u8, l.count) };
        (pos + n) as i32
    }
}

impl Communicator for SimpleCommunicator {
    fn attributes(&self) -> &Attributes {
        &self.attributes
    }
    fn attributes_mut(&mut self) -> &mut Attributes {
        &mut self.attributes
    }
}

/// A process of a communicator: a destination or a source.
#[derive(Clone, Copy, Debug)]
pub struct Process<'a> {
    pub(crate) comm: &'a CommData,
    pub(crate) rank: Rank,
}

impl<'a> Process<'a> {
    /// The process's rank in its communicator.
    pub fn rank(&self) -> Rank {
        self.rank
    }
    /// Whether this is the calling process (never, on an intercommunicator: its ranks are
    /// the other group's).
    pub fn is_self(&self) -> bool {
        !self.comm.is_inter() && self.rank as u32 == self.comm.rank
    }
}

impl AsCommunicator for Process<'_> {
    fn comm_data(&self) -> &CommData {
        self.comm
    }
}

/// Any process of a communicator (MPI_ANY_SOURCE).
#[derive(Clone, Copy, Debug)]
pub struct AnyProcess<'a> {
    pub(crate) comm: &'a CommData,
}

impl AsCommunicator for AnyProcess<'_> {
    fn comm_data(&self) -> &CommData {
        self.comm
    }
}

/// Operations on groups (rsmpi's `Group`).
pub trait Group {
    /// The members.
    #[doc(hidden)]
    fn group_data(&self) -> &GroupData;
    /// Members of self, then those of `other` not in self.
    fn union<G: Group>(&self, other: &G) -> UserGroup
    where
        Self: Sized,
    {
        UserGroup::new(self.group_data().union(other.group_data()))
    }
    /// Members of self also in `other`.
    fn intersection<G: Group>(&self, other: &G) -> UserGroup
    where
        Self: Sized,
    {
        UserGroup::new(self.group_data().intersection(other.group_data()))
    }
    /// Members of self not in `other`.
    fn difference<G: Group>(&self, other: &G) -> UserGroup
    where
        Self: Sized,
    {
        UserGroup::new(self.group_data().difference(other.group_data()))
    }
    /// The members at `ranks`, in that order. Panics on a bad or repeated rank.
    #[track_caller]
    fn include(&self, ranks: &[Rank]) -> UserGroup
    where
        Self: Sized,
    {
        let r = fatal(check_ranks("Group::include", self.group_data(), ranks));
        UserGroup::new(self.group_data().include(&r))
    }
    /// The members not at `ranks`. Panics on a bad or repeated rank.
    #[track_caller]
    fn exclude(&self, ranks: &[Rank]) -> UserGroup
    where
        Self: Sized,
    {
        let r = fatal(check_ranks("Group::exclude", self.group_data(), ranks));
        UserGroup::new(self.group_data().exclude(&r))
    }
    /// Number of members.
    fn size(&self) -> Rank {
        self.group_data().size() as Rank
    }
    /// This process's rank in the group, if a member.
    fn rank(&self) -> Option<Rank> {
        let me = runtime::with_call("rank", |rt| rt.boot.rank);
        self.group_data().rank_of(me).map(|r| r as Rank)
    }
    /// The rank in `other` of the member at `rank` here.
    fn translate_rank<G: Group>(&self, rank: Rank, other: &G) -> Option<Rank>
    where
        Self: Sized,
    {
        if rank < 0 {
            return None;
        }
        self.group_data()
            .translate(rank as usize, other.group_data())
            .map(|r| r as Rank)
    }
    /// [`Group::translate_rank`] for several ranks.
    fn translate_ranks<G: Group>(&self, ranks: &[Rank], other: &G) -> Vec<Option<Rank>>
    where
        Self: Sized,
    {
        ranks
            .iter()
            .map(|&r| self.translate_rank(r, other))
            .collect()
    }
    /// MPI_Group_compare.
    fn compare<G: Group>(&self, other: &G) -> GroupRelation
    where
        Self: Sized,
    {
        self.group_data().compare(other.group_data()).into()
    }
}

fn check_ranks(call: &'static str, g: &GroupData, ranks: &[Rank]) -> Result<Vec<usize>> {
    let mut out = Vec::with_capacity(ranks.len());
    for &r in ranks {
        if r < 0 || r as usize >= g.size() {
            return Err(Error::new(
                ErrorClass::Rank,
                call,
                format!("rank {r} is out of range for a group of size {}", g.size()),
            ));
        }
        if out.contains(&(r as usize)) {
            return Err(Error::new(
                ErrorClass::Rank,
                call,
                format!("rank {r} appears twice"),
            ));
        }
        out.push(r as usize);
    }
    Ok(out)
}

/// A group made by a group operation or taken from a communicator.
#[derive(Clone, Debug)]
pub struct UserGroup {
    data: Rc<GroupData>,
}

impl UserGroup {
    fn new(g: GroupData) -> Self {
        UserGroup { data: Rc::new(g) }
    }
}

impl Group for UserGroup {
    fn group_data(&self) -> &GroupData {
        &self.data
    }
}

/// Predefined groups.
#[derive(Clone, Debug)]
pub struct SystemGroup {
    data: Rc<GroupData>,
}

impl SystemGroup {
    /// MPI_GROUP_EMPTY.
    pub fn empty() -> SystemGroup {
        SystemGroup {
            data: Rc::new(GroupData::default()),
        }
    }
}

impl Group for SystemGroup {
    fn group_data(&self) -> &GroupData {
        &self.data
    }
}

/// Traits to glob-import.
pub mod traits {
    pub use super::{AnyCommunicator, AsCommunicator, CommAttribute, Communicator, Group};
}
