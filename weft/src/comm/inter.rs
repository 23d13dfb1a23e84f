//! Intercommunicators: two disjoint groups joined so that each member names the other group's
//! members by their rank there (MPI 4.1 §7.6). One context pair serves both groups, agreed
//! the way an intracommunicator's is (an AND of free masks), over the union: each group ANDs
//! its members' masks, the two leaders trade the results, and each leader tells its group
//! the lowest pair free in both. So creating one costs O(log n) rounds per group plus one
//! exchange between the leaders, and no member ever holds more than the two member lists.
//!
//! Messages of an intercommunicator's collectives travel on its collective context: between
//! members of one group (a local phase) or between the groups. The groups are disjoint, so a
//! message's source alone tells the phases apart.

use super::agreement;
use super::context::{Claim, ContextMask, OFFER_LEN};
use super::group::GroupData;
use super::{allgather_among, color_key, sendrecv, with_color, CommData};
use crate::engine::matching::Pattern;
use crate::engine::{Engine, SendMode};
use crate::error::{Error, ErrorClass, Result};
use crate::fabric::Fabric;
use std::rc::Rc;

/// Internal tags on the creating communicators' collective contexts and on the
/// intercommunicator's own (user tags are never negative; see `comm` for the others).
const TAG_INTER_AND: i32 = -40;
const TAG_INTER_BCAST: i32 = -41;
const TAG_INTER_LEADERS: i32 = -42;
const TAG_INTER_SPLIT: i32 = -43;

/// Binomial broadcast of `buf` (the same length at every member) from member `root`.
pub(super) fn bcast_among<F: Fabric>(
    eng: &mut Engine<F>,
    (ctx, tag): (u32, i32),
    members: &[u32],
    me: usize,
    root: usize,
    buf: &mut [u8],
) -> Result<()> {
    let n = members.len();
    let vr = (me + n - root) % n;
    let at = |v: usize| members[(v + root) % n];
    if vr != 0 {
        let parent = vr - (vr & vr.wrapping_neg());
        let from = Pattern {
            context: ctx,
            source: Some(at(parent)),
            tag: Some(tag),
        };
        eng.recv(from, buf)?;
    }
    // Children: vr + 2^k below vr's lowest set bit (any k at the root).
    let top = if vr == 0 {
        n.next_power_of_two()
    } else {
        vr & vr.wrapping_neg()
    };
    let mut k = top >> 1;
    while k >= 1 {
        if vr + k < n {
            eng.send(at(vr + k), ctx, tag, buf, SendMode::Standard)?;
        }
        k >>= 1;
    }
    Ok(())
}

/// One group's side of an agreement with the other group.
pub(super) struct Side<'a> {
    /// Context and members for the group's own traffic; this rank is `members[me]`.
    pub ctx: u32,
    pub members: &'a [u32],
    pub me: usize,
    /// The member that talks to the other group.
    pub leader: usize,
    /// At the leader: the context, tag and world rank to reach the other group's leader by.
    pub other_leader: (u32, i32, u32),
}

/// Agrees on a context pair free at every member of both groups, and trades `mine` (what this
/// group's leader tells the other) for the other leader's `theirs_len` bytes, which every
/// member of this group gets. `check(theirs)` runs at the leader before the pair is chosen;
/// its error reaches every member of this group (the other leader finds the same). Rounds in
/// which some member could not offer its mask (`ContextMask::offer`) are repeated.
pub(super) fn agree_across<F: Fabric>(
    eng: &mut Engine<F>,
    mask: &mut ContextMask,
    side: &Side<'_>,
    mine: &[u8],
    theirs_len: usize,
    check: impl Fn(&[u8]) -> Result<()>,
) -> Result<(u32, Vec<u8>)> {
    let claim = Claim {
        context: side.ctx,
        tag: TAG_INTER_AND,
    };
    let got = loop {
        match agreement_round(eng, mask, claim, side, (mine, theirs_len), &check) {
            Ok(None) => continue,
            Ok(Some(got)) => break Ok(got),
            Err(e) => break Err(e),
        }
    };
    mask.leave(claim);
    got
}

/// One round of [`agree_across`]: `None` when it must be repeated.
fn agreement_round<F: Fabric>(
    eng: &mut Engine<F>,
    mask: &ContextMask,
    claim: Claim,
    side: &Side<'_>,
    (mine, theirs_len): (&[u8], usize),
    check: &impl Fn(&[u8]) -> Result<()>,
) -> Result<Option<(u32, Vec<u8>)>> {
    let mut offer = mask.offer(claim);
    agreement::and_among(eng, (side.ctx, TAG_INTER_AND), side.members, side.me, &mut offer)?;
    // What the leader tells its group: whether the groups may be joined, the AND over
    // both, and the other leader's bytes.
    let mut told = vec![0u8; 1 + OFFER_LEN + theirs_len];
    let mut failure = None;
    if side.me == side.leader {
        let mut out = offer.to_vec();
        out.extend_from_slice(mine);
        let mut inn = vec![0u8; OFFER_LEN + theirs_len];
        let (ctx, tag, peer) = side.other_leader;
        sendrecv(eng, ctx, tag, (peer, &out), (peer, &mut inn))?;
        let (their_offer, theirs) = inn.split_at(OFFER_LEN);
        for (o, t) in offer.iter_mut().zip(their_offer) {
            *o &= t;
        }
        if let Err(e) = check(theirs) {
            failure = Some(e);
            told[0] = 1;
        }
        told[1..1 + OFFER_LEN].copy_from_slice(&offer);
        told[1 + OFFER_LEN..].copy_from_slice(theirs);
    }
    let at = (side.ctx, TAG_INTER_BCAST);
    bcast_among(eng, at, side.members, side.me, side.leader, &mut told)?;
    if told[0] != 0 {
        return Err(failure.unwrap_or_else(|| {
            Error::new(
                ErrorClass::Arg,
                "intercommunicator creation",
                "the group's leader could not agree with the other group (see its error)",
            )
        }));
    }
    Ok(match mask.settle(claim, &told[1..1 + OFFER_LEN]) {
        None => None,
        Some(pair) => Some((pair?, told.split_off(1 + OFFER_LEN))),
    })
}

fn world_ranks_bytes(ranks: &[u32]) -> Vec<u8> {
    ranks.iter().flat_map(|r| r.to_le_bytes()).collect()
}

fn world_ranks_of(bytes: &[u8]) -> Vec<u32> {
    bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")))
        .collect()
}

/// `MPI_Intercomm_create`: joins `local`'s group with the group whose leader is
/// `remote_leader` in `peer` (meaningful at `local_leader` only). The leaders talk on
/// `peer`'s point-to-point context with `tag`, as MPI says. Collective over both groups.
pub fn create<F: Fabric>(
    eng: &mut Engine<F>,
    mask: &mut ContextMask,
    local: &CommData,
    local_leader: u32,
    peer: Option<(&CommData, u32)>,
    tag: i32,
) -> Result<CommData> {
    const CALL: &str = "create_intercommunicator";
    local.intra_only(CALL)?;
    let (members, me) = (local.group.members(), local.rank as usize);
    let leader = local_leader as usize;
    let other_leader = match peer {
        Some((p, r)) if local.rank == local_leader => {
            let w = p.peer_world_rank(CALL, r as i32)?;
            (p.p2p_context(), tag, w)
        }
        _ => (0, 0, 0),
    };
    let side = Side {
        ctx: local.coll_context(),
        members,
        me,
        leader,
        other_leader,
    };
    // First the sizes, so that each side knows how many member ranks the other sends.
    let mut size = (members.len() as u32).to_le_bytes();
    if me == leader {
        let (ctx, tag, w) = other_leader;
        let mine = size;
        sendrecv(eng, ctx, tag, (w, &mine), (w, &mut size))?;
    }
    bcast_among(eng, (side.ctx, TAG_INTER_BCAST), members, me, leader, &mut size)?;
    let remote_size = u32::from_le_bytes(size) as usize;
    let overlap = |theirs: &[u8]| match world_ranks_of(theirs).iter().find(|w| members.contains(w)) {
        Some(w) => Err(Error::new(
            ErrorClass::Arg,
            CALL,
            format!("world rank {w} is in both groups (an intercommunicator's groups must be disjoint)"),
        )),
        None => Ok(()),
    };
    let mine = world_ranks_bytes(members);
    let (pair, theirs) = agree_across(eng, mask, &side, &mine, 4 * remote_size, overlap)?;
    let remote = GroupData::new(world_ranks_of(&theirs));
    Ok(CommData::new(pair, local.group.clone(), local.rank).with_remote(Rc::new(remote)))
}

/// This group's side of an agreement over an existing intercommunicator (its leaders are
/// the groups' rank 0; they talk on its collective context).
fn side_of(inter: &CommData) -> Side<'_> {
    let remote = inter.remote.as_deref().expect("an intercommunicator");
    Side {
        ctx: inter.coll_context(),
        members: inter.group.members(),
        me: inter.rank as usize,
        leader: 0,
        other_leader: (inter.coll_context(), TAG_INTER_LEADERS, remote.members()[0]),
    }
}

/// `MPI_Intercomm_merge`: an intracommunicator of both groups, the group that passed
/// `high = false` first; when both passed the same, the group whose rank 0 has the lower
/// universe rank first. Every member of a group must pass the same `high`. Collective over
/// both groups.
pub fn merge<F: Fabric>(
    eng: &mut Engine<F>,
    mask: &mut ContextMask,
    inter: &CommData,
    high: bool,
) -> Result<CommData> {
    let remote = inter.remote.as_deref().expect("an intercommunicator");
    let (pair, theirs) = agree_across(eng, mask, &side_of(inter), &[high as u8], 1, |_| Ok(()))?;
    let their_high = theirs[0] != 0;
    let (mine, others) = (inter.group.members(), remote.members());
    let mine_first = if high != their_high {
        !high
    } else {
        eng.fabric().universe_rank(mine[0]) < eng.fabric().universe_rank(others[0])
    };
    let (first, second) = if mine_first {
        (mine, others)
    } else {
        (others, mine)
    };
    let all: Vec<u32> = first.iter().chain(second).copied().collect();
    let rank = if mine_first {
        inter.rank
    } else {
        (others.len() + inter.rank as usize) as u32
    };
    Ok(CommData::new(pair, Rc::new(GroupData::new(all)), rank))
}

/// `MPI_Comm_split` of an intercommunicator: the members of each group with the same
/// `color` (ordered by `key`, then rank) form an intercommunicator with the members of the
/// other group that passed that color; `None` for `color = None` (MPI_UNDEFINED) or when the
/// other group has no member of the color. One pair serves every new intercommunicator (they
/// share no member). Collective over both groups.
pub fn split<F: Fabric>(
    eng: &mut Engine<F>,
    mask: &mut ContextMask,
    inter: &CommData,
    color: Option<i32>,
    key: i32,
) -> Result<Option<CommData>> {
    let remote = inter.remote.as_deref().expect("an intercommunicator");
    let (members, me) = (inter.group.members(), inter.rank as usize);
    let at = (inter.coll_context(), TAG_INTER_SPLIT);
    let mine = allgather_among(eng, at.0, at.1, members, me, &color_key(color, key))?;
    let theirs_len = 9 * remote.size();
    let (pair, theirs) = agree_across(eng, mask, &side_of(inter), &mine, theirs_len, |_| Ok(()))?;
    let Some(color) = color else {
        mask.release(pair);
        return Ok(None);
    };
    let (local, others) = (with_color(members, &mine, color), with_color(remote.members(), &theirs, color));
    if others.is_empty() {
        mask.release(pair);
        return Ok(None);
    }
    let rank = local.iter().position(|&w| w == members[me]).expect("I have my color") as u32;
    let group = Rc::new(GroupData::new(local));
    Ok(Some(CommData::new(pair, group, rank).with_remote(Rc::new(GroupData::new(others)))))
}
