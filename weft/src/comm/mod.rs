//! Communicators: a group of ranks plus a context-id pair, and the collective operations
//! that create them (dup, split, create from a group). Also the simple internal collectives
//! these need (barrier, all-gather), which travel on the communicator's collective context
//! so they never match user messages.

pub mod agreement;
pub mod context;
pub mod dynamic;
pub mod group;
pub mod inter;
pub mod node_memory;
pub mod node_topology;
pub mod port;
pub mod process_topology;
pub mod program_memory;
pub mod sequence;

use self::context::{coll_context, p2p_context, ContextMask};
use self::group::GroupData;
use crate::engine::buffer::RawBuf;
use crate::engine::matching::Pattern;
use crate::engine::{Engine, SendMode};
use crate::error::{Error, ErrorClass, Result};
use crate::fabric::Fabric;
use std::rc::Rc;

/// Internal tags on collective contexts (user tags are never negative).
const TAG_BARRIER: i32 = -16;
const TAG_GATHER: i32 = -32;
const TAG_AGREE: i32 = -33;
/// Tag of the checking mode's exchange of collective calls (`WEFT_COLL_CHECK`).
pub const TAG_CHECK: i32 = -48;
/// Base of the tags `create_from_group` uses (the user's tag is folded in).
const TAG_CREATE_GROUP: i32 = i32::MIN;

/// One communicator as seen by this rank.
#[derive(Debug)]
pub struct CommData {
    /// Context-id pair number.
    pub pair: u32,
    /// Members (world ranks) in communicator-rank order.
    pub group: Rc<GroupData>,
    /// This rank's position in `group`.
    pub rank: u32,
    /// Where the members are, node by node (computed on first use).
    topology: std::cell::OnceCell<node_topology::NodeTopology>,
    /// The grid or graph the communicator was made with (`None`: MPI_UNDEFINED).
    pub process_topology: Option<Rc<process_topology::ProcessTopology>>,
    /// An intercommunicator's other group (world ranks, in its rank order): the ranks
    /// point-to-point calls and rooted collectives name; `None` for an intracommunicator.
    pub remote: Option<Rc<GroupData>>,
}

impl CommData {
    /// Member `rank` of a communicator over `group` with context pair `pair`.
    pub fn new(pair: u32, group: Rc<GroupData>, rank: u32) -> Self {
        CommData {
            pair,
            group,
            rank,
            topology: std::cell::OnceCell::new(),
            process_topology: None,
            remote: None,
        }
    }

    /// The same communicator as an intercommunicator whose other group is `remote`.
    pub fn with_remote(mut self, remote: Rc<GroupData>) -> Self {
        self.remote = Some(remote);
        self
    }

    /// Whether this is an intercommunicator.
    #[inline]
    pub fn is_inter(&self) -> bool {
        self.remote.is_some()
    }

    /// The group point-to-point ranks refer to: the remote group of an intercommunicator,
    /// else the communicator's own.
    #[inline]
    pub fn peers(&self) -> &GroupData {
        self.remote.as_deref().unwrap_or(&self.group)
    }

    /// The world rank of the peer a point-to-point call names as `r`, checked against the
    /// size of [`peers`](Self::peers).
    #[inline]
    pub fn peer_world_rank(&self, call: &'static str, r: i32) -> Result<u32> {
        let peers = self.peers();
        if r < 0 || r as usize >= peers.size() {
            return Err(self.rank_out_of_range(call, r));
        }
        Ok(peers.members()[r as usize])
    }

    /// [`Self::peer_world_rank`]'s error: out of line, so that the check inlines small.
    #[cold]
    #[inline(never)]
    fn rank_out_of_range(&self, call: &'static str, r: i32) -> Error {
        let size = self.peers().size();
        let detail = match self.remote {
            Some(_) => format!(
                "rank {r} is out of range for an intercommunicator whose remote group has {size} members"
            ),
            None => format!("rank {r} is out of range for a communicator of size {size}"),
        };
        Error::new(ErrorClass::Rank, call, detail)
    }

    /// The error for `call`, which an intercommunicator does not support.
    pub fn intra_only(&self, call: &'static str) -> Result<()> {
        match self.remote {
            None => Ok(()),
            Some(_) => Err(Error::new(
                ErrorClass::Comm,
                call,
                "is defined on intracommunicators only, and this is an intercommunicator",
            )),
        }
    }

    /// The same communicator with process topology `t` attached.
    pub fn with_process_topology(
        mut self,
        t: Option<Rc<process_topology::ProcessTopology>>,
    ) -> Self {
        self.process_topology = t;
        self
    }

    /// Where the members are, node by node, given the job's node map (`node_of[w]`: world
    /// rank `w`'s node).
    pub fn node_topology(&self, node_of: &[u32]) -> &node_topology::NodeTopology {
        self.topology
            .get_or_init(|| node_topology::NodeTopology::of(self.group.members(), self.rank, node_of))
    }

    /// Context for user point-to-point traffic.
    #[inline]
    pub fn p2p_context(&self) -> u32 {
        p2p_context(self.pair)
    }
    /// Context for collective traffic.
    pub fn coll_context(&self) -> u32 {
        coll_context(self.pair)
    }
    /// Number of members.
    pub fn size(&self) -> u32 {
        self.group.size() as u32
    }
    /// World rank of communicator rank `r` (caller validated `r`).
    #[inline]
    pub fn world_rank(&self, r: u32) -> u32 {
        self.group.members()[r as usize]
    }
    /// Communicator rank of world rank `w`.
    pub fn comm_rank(&self, w: u32) -> Option<u32> {
        self.group.rank_of(w).map(|r| r as u32)
    }
    /// Validates a destination or source rank for `call`.
    #[inline]
    pub fn check_rank(&self, call: &'static str, r: i32) -> Result<u32> {
        if r < 0 || r as u32 >= self.size() {
            return Err(Error::new(
                ErrorClass::Rank,
                call,
                format!(
                    "rank {r} is out of range for a communicator of size {}",
                    self.size()
                ),
            ));
        }
        Ok(r as u32)
    }
}

/// Dissemination barrier over `members` (world ranks; this rank is `members[me]`).
fn barrier_among<F: Fabric>(
    eng: &mut Engine<F>,
    ctx: u32,
    tag: i32,
    members: &[u32],
    me: usize,
) -> Result<()> {
    let n = members.len();
    let mut k = 1;
    let mut round = 0;
    while k < n {
        let to = members[(me + k) % n];
        let from = members[(me + n - k) % n];
        let t = tag - round;
        eng.send(to, ctx, t, &[], SendMode::Standard)?;
        eng.recv(
            Pattern {
                context: ctx,
                source: Some(from),
                tag: Some(t),
            },
            &mut [],
        )?;
        k *= 2;
        round += 1;
    }
    Ok(())
}

/// Barrier over a communicator.
pub fn barrier<F: Fabric>(eng: &mut Engine<F>, comm: &CommData) -> Result<()> {
    barrier_among(
        eng,
        comm.coll_context(),
        TAG_BARRIER,
        comm.group.members(),
        comm.rank as usize,
    )
}

/// Sends `out` to `to` and receives `inn.len()` bytes from `from` at once (neither waits for
/// the other, whatever the protocol: a blocking send of a rendezvous message would).
fn sendrecv<F: Fabric>(
    eng: &mut Engine<F>,
    ctx: u32,
    tag: i32,
    (to, out): (u32, &[u8]),
    (from, inn): (u32, &mut [u8]),
) -> Result<()> {
    // SAFETY: `out` is borrowed for this whole call, and the send is waited for before the
    // call returns (also when the receive fails: `wait` below runs first).
    let h = eng.isend(to, ctx, tag, unsafe { RawBuf::new(out) }, SendMode::Standard)?;
    let got = eng.recv(
        Pattern {
            context: ctx,
            source: Some(from),
            tag: Some(tag),
        },
        inn,
    );
    eng.wait(h)?;
    got.map(drop)
}

/// Every member's `mine` (the same length everywhere), in member order, at every member:
/// Bruck's algorithm, ⌈log2 n⌉ rounds, O(n · len) bytes per member.
pub fn allgather_among<F: Fabric>(
    eng: &mut Engine<F>,
    ctx: u32,
    tag: i32,
    members: &[u32],
    me: usize,
    mine: &[u8],
) -> Result<Vec<u8>> {
    let n = members.len();
    let len = mine.len();
    // Block j of `tmp` is member (me + j) % n's.
    let mut tmp = vec![0u8; n * len];
    tmp[..len].copy_from_slice(mine);
    let mut k = 1;
    while k < n {
        let count = k.min(n - k);
        let (have, rest) = tmp.split_at_mut(k * len);
        sendrecv(
            eng,
            ctx,
            tag,
            (members[(me + n - k) % n], &have[..count * len]),
            (members[(me + k) % n], &mut rest[..count * len]),
        )?;
        k *= 2;
    }
    let mut all = vec![0u8; n * len];
    for j in 0..n {
        let m = (me + j) % n;
        all[m * len..(m + 1) * len].copy_from_slice(&tmp[j * len..(j + 1) * len]);
    }
    Ok(all)
}

/// Agrees on a context pair free at every member (an AND of the masks) and takes it.
fn agree_pair<F: Fabric>(
    eng: &mut Engine<F>,
    mask: &mut ContextMask,
    ctx: u32,
    tag: i32,
    members: &[u32],
    me: usize,
) -> Result<u32> {
    agreement::agree(eng, mask, ("communicator creation", ctx, tag), members, me)
}

/// Who agrees on a duplicate's pair and this rank's place among them: the members of an
/// intracommunicator, or of both groups of an intercommunicator in universe-rank order
/// (which every member computes alike, in whichever job it is).
fn dup_members<F: Fabric>(eng: &Engine<F>, comm: &CommData) -> (Vec<u32>, usize) {
    let me = comm.world_rank(comm.rank);
    let mut all = comm.group.members().to_vec();
    let Some(remote) = &comm.remote else {
        return (all, comm.rank as usize);
    };
    all.extend_from_slice(remote.members());
    let fabric = eng.fabric();
    all.sort_unstable_by_key(|&w| fabric.universe_rank(w));
    let at = all.iter().position(|&w| w == me).expect("a member of its own group");
    (all, at)
}

/// The duplicate of `comm` with context pair `pair`: the same groups and process topology
/// (MPI_Comm_dup's rule).
fn duplicate_with(comm: &CommData, pair: u32) -> CommData {
    let mut d = CommData::new(pair, comm.group.clone(), comm.rank)
        .with_process_topology(comm.process_topology.clone());
    d.remote = comm.remote.clone();
    d
}

/// `MPI_Comm_dup`: same groups, new contexts. Collective over `comm` (both groups of an
/// intercommunicator).
pub fn dup<F: Fabric>(
    eng: &mut Engine<F>,
    mask: &mut ContextMask,
    comm: &CommData,
) -> Result<CommData> {
    let (members, me) = dup_members(eng, comm);
    let pair = agree_pair(eng, mask, comm.coll_context(), TAG_AGREE, &members, me)?;
    Ok(duplicate_with(comm, pair))
}

/// A duplicate being made (`MPI_Comm_idup`): its agreement's request, the cell the pair lands
/// in, and the communicator it duplicates.
pub struct PendingDup {
    /// Completes when the members have agreed on the pair.
    pub handle: crate::engine::request::Handle,
    agreed: agreement::Agreed,
    claim: context::Claim,
    groups: CommData,
}

/// `MPI_Comm_idup`: starts duplicating `comm` as its collective numbered `tag` (a tag from the
/// pair's sequence, which every member takes alike). The engine runs the agreement with the
/// other schedules; [`PendingDup::finish`] makes the communicator once it completed.
pub fn start_dup<F: Fabric>(
    eng: &mut Engine<F>,
    mask: &ContextMask,
    comm: &CommData,
    tag: i32,
) -> PendingDup {
    let claim = context::Claim {
        context: comm.coll_context(),
        tag,
    };
    let (members, me) = dup_members(eng, comm);
    let at = ("MPI_Comm_idup", claim.context, tag);
    let (handle, agreed) = agreement::start(eng, mask, at, &members, me);
    PendingDup {
        handle,
        agreed,
        claim,
        groups: duplicate_with(comm, context::WORLD_PAIR),
    }
}

impl PendingDup {
    /// The duplicate, given how the request completed (`done`).
    pub fn finish(self, mask: &ContextMask, done: Result<()>) -> Result<CommData> {
        mask.leave(self.claim);
        done?;
        let pair = self.agreed.get().expect("a completed agreement has its pair");
        let mut d = self.groups;
        d.pair = pair;
        Ok(d)
    }
}

/// One member's (color, key) in a split, as the members exchange it: 9 bytes (whether the
/// color is defined, the color, the key).
fn color_key(color: Option<i32>, key: i32) -> [u8; 9] {
    let mut b = [0u8; 9];
    b[0] = color.is_some() as u8;
    b[1..5].copy_from_slice(&color.unwrap_or(0).to_le_bytes());
    b[5..9].copy_from_slice(&key.to_le_bytes());
    b
}

/// The world ranks of those `members` whose (color, key) in `all` (one [`color_key`] each,
/// in member order) has `color`, ordered by key, then by member rank.
fn with_color(members: &[u32], all: &[u8], color: i32) -> Vec<u32> {
    let field = |c: &[u8], at: usize| i32::from_le_bytes(c[at..at + 4].try_into().expect("4 bytes"));
    let mut same: Vec<(i32, usize)> = all
        .chunks_exact(9)
        .enumerate()
        .filter(|(_, c)| c[0] == 1 && field(c, 1) == color)
        .map(|(r, c)| (field(c, 5), r))
        .collect();
    same.sort();
    same.into_iter().map(|(_, r)| members[r]).collect()
}

/// `MPI_Comm_split`: members with the same `color` form a communicator ordered by `key`,
/// then by old rank; `None` (MPI_UNDEFINED) gets no communicator. Collective over `comm`.
pub fn split<F: Fabric>(
    eng: &mut Engine<F>,
    mask: &mut ContextMask,
    comm: &CommData,
    color: Option<i32>,
    key: i32,
) -> Result<Option<CommData>> {
    if comm.is_inter() {
        return inter::split(eng, mask, comm, color, key);
    }
    // Everyone contributes (color, key): 9 bytes, gathered by all in O(log n) rounds. Then
    // one context pair for every new communicator, agreed over the whole parent (MPICH's
    // way): communicators of different colors share no member, so they may share the pair.
    let (members, me) = (comm.group.members(), comm.rank as usize);
    let mine = color_key(color, key);
    let all = allgather_among(eng, comm.coll_context(), TAG_GATHER, members, me, &mine)?;
    let pair = agree_pair(eng, mask, comm.coll_context(), TAG_AGREE, members, me)?;
    let Some(color) = color else {
        mask.release(pair);
        return Ok(None);
    };
    let group = GroupData::new(with_color(members, &all, color));
    let rank = group
        .rank_of(comm.world_rank(comm.rank))
        .expect("I am in my color's group") as u32;
    Ok(Some(CommData::new(pair, Rc::new(group), rank)))
}

/// `MPI_Comm_create_group`: only members of `group` call it; collective over `group`.
/// Returns `None` when this rank is not in `group`.
pub fn create_from_group<F: Fabric>(
    eng: &mut Engine<F>,
    mask: &mut ContextMask,
    comm: &CommData,
    group: &GroupData,
    tag: i32,
) -> Result<Option<CommData>> {
    comm.intra_only("split_by_subgroup")?;
    let me_world = comm.world_rank(comm.rank);
    let Some(me) = group.rank_of(me_world) else {
        return Ok(None);
    };
    if let Some(&w) = group
        .members()
        .iter()
        .find(|w| comm.comm_rank(**w).is_none())
    {
        return Err(Error::new(
            ErrorClass::Arg,
            "split_by_subgroup",
            format!("the group contains world rank {w}, which is not in the communicator"),
        ));
    }
    let t = TAG_CREATE_GROUP + 64 + (tag & 0x00ff_ffff) * 64;
    let pair = agree_pair(eng, mask, comm.coll_context(), t, group.members(), me)?;
    Ok(Some(CommData::new(pair, Rc::new(group.clone()), me as u32)))
}

#[cfg(test)]
mod tests;
