//! Communicators: a group of ranks plus a context-id pair, and the collective operations
//! that create them (dup, split, create from a group). Also the simple internal collectives
//! these need (barrier, all-gather), which travel on the communicator's collective context
//! so they never match user messages.

pub mod context;
pub mod group;
pub mod node_memory;
pub mod sequence;

use self::context::{coll_context, p2p_context, ContextMask};
use self::group::GroupData;
use crate::engine::matching::Pattern;
use crate::engine::{Engine, SendMode};
use crate::error::{Error, ErrorClass, Result};
use crate::fabric::Fabric;
use std::rc::Rc;

/// Internal tags on collective contexts (user tags are never negative).
const TAG_BARRIER: i32 = -16;
const TAG_GATHER: i32 = -32;
const TAG_BCAST: i32 = -33;
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
}

impl CommData {
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

/// Every member contributes `mine` (same length everywhere); all get every contribution in
/// member order. Linear through `members[0]`: used only to create communicators.
fn allgather_among<F: Fabric>(
    eng: &mut Engine<F>,
    ctx: u32,
    tag: i32,
    members: &[u32],
    me: usize,
    mine: &[u8],
) -> Result<Vec<Vec<u8>>> {
    let n = members.len();
    let len = mine.len();
    let mut all = vec![0u8; len * n];
    if me == 0 {
        all[..len].copy_from_slice(mine);
        for (i, &w) in members.iter().enumerate().skip(1) {
            let st = eng.recv(
                Pattern {
                    context: ctx,
                    source: Some(w),
                    tag: Some(tag - TAG_GATHER),
                },
                &mut all[i * len..(i + 1) * len],
            )?;
            debug_assert_eq!(st.len, len, "all-gather contributions differ in length");
        }
        for &w in &members[1..] {
            eng.send(w, ctx, tag - TAG_BCAST, &all, SendMode::Standard)?;
        }
    } else {
        eng.send(members[0], ctx, tag - TAG_GATHER, mine, SendMode::Standard)?;
        eng.recv(
            Pattern {
                context: ctx,
                source: Some(members[0]),
                tag: Some(tag - TAG_BCAST),
            },
            &mut all,
        )?;
    }
    Ok(all.chunks(len.max(1)).take(n).map(|c| c.to_vec()).collect())
}

/// Agrees on a free context pair among `members` and takes it.
fn agree_pair<F: Fabric>(
    eng: &mut Engine<F>,
    mask: &mut ContextMask,
    ctx: u32,
    tag: i32,
    members: &[u32],
    me: usize,
) -> Result<u32> {
    let all = allgather_among(eng, ctx, tag, members, me, &mask.to_bytes())?;
    let pair = mask.lowest_common(&all)?;
    mask.take(pair);
    Ok(pair)
}

/// `MPI_Comm_dup`: same group, new contexts. Collective over `comm`.
pub fn dup<F: Fabric>(
    eng: &mut Engine<F>,
    mask: &mut ContextMask,
    comm: &CommData,
) -> Result<CommData> {
    let pair = agree_pair(
        eng,
        mask,
        comm.coll_context(),
        0,
        comm.group.members(),
        comm.rank as usize,
    )?;
    Ok(CommData {
        pair,
        group: comm.group.clone(),
        rank: comm.rank,
    })
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
    // Everyone contributes (color, key, mask); every new communicator takes the lowest pair
    // free at all of its members. Distinct colors may take the same pair: they share no member.
    let mut mine = Vec::with_capacity(9 + context::MAX_PAIRS / 8);
    mine.push(color.is_some() as u8);
    mine.extend_from_slice(&color.unwrap_or(0).to_le_bytes());
    mine.extend_from_slice(&key.to_le_bytes());
    mine.extend_from_slice(&mask.to_bytes());
    let all = allgather_among(
        eng,
        comm.coll_context(),
        0,
        comm.group.members(),
        comm.rank as usize,
        &mine,
    )?;
    let Some(color) = color else { return Ok(None) };
    let mut same: Vec<(i32, usize)> = all
        .iter()
        .enumerate()
        .filter(|(_, c)| {
            c[0] == 1 && i32::from_le_bytes(c[1..5].try_into().expect("4 bytes")) == color
        })
        .map(|(r, c)| (i32::from_le_bytes(c[5..9].try_into().expect("4 bytes")), r))
        .collect();
    same.sort();
    let masks: Vec<Vec<u8>> = same.iter().map(|&(_, r)| all[r][9..].to_vec()).collect();
    let pair = mask.lowest_common(&masks)?;
    mask.take(pair);
    let group = GroupData::new(
        same.iter()
            .map(|&(_, r)| comm.world_rank(r as u32))
            .collect(),
    );
    let rank = group
        .rank_of(comm.world_rank(comm.rank))
        .expect("I am in my color's group") as u32;
    Ok(Some(CommData {
        pair,
        group: Rc::new(group),
        rank,
    }))
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
    Ok(Some(CommData {
        pair,
        group: Rc::new(group.clone()),
        rank: me as u32,
    }))
}

#[cfg(test)]
mod tests;
