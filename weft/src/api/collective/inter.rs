//! The collectives on an intercommunicator (`coll::inter` builds their schedules): each
//! planner of `mod.rs`, `rooted.rs` and `reduce_scatter.rs` hands an intercommunicator to
//! its counterpart here. A rooted collective's root is `ROOT` at the root, `PROC_NULL` in the
//! rest of its group and the root's rank in its group in the other (see
//! `topology::InterCommunicator`). The in-place forms and the scans are not defined on
//! intercommunicators (MPI 4.1 §6.2.2) and return an error naming the call.
//!
//! Every planner here is `unsafe` with one contract: the layouts are of buffers borrowed
//! (the output mutably, and the operation, if any) until the returned collective completes.

use super::rooted::Rooted;
use super::start::{start, Buffers, Started};
use super::{check_len, count_error, input, output, Layout, Operation, Reduce};
use crate::api::topology::{Rank, PROC_NULL, ROOT};
use crate::coll::inter::{self, Role};
use crate::coll::reduce::equal_blocks;
use crate::comm::CommData;
use crate::error::{Error, ErrorClass, Result};

/// `(byte offset, byte length)` of each member's part of a buffer.
type Blocks = Vec<(usize, usize)>;

/// This member's part in a rooted collective whose root is `root`.
fn role(c: &CommData, call: &'static str, root: Rank) -> Result<Role> {
    let r = c.peers().size();
    match root {
        ROOT => Ok(Role::Root),
        PROC_NULL => Ok(Role::RootsGroup),
        x if x >= 0 && (x as usize) < r => Ok(Role::OtherGroup { root: x as usize }),
        x => Err(Error::new(
            ErrorClass::Root,
            call,
            format!(
                "root {x} on an intercommunicator is neither a rank of the other group (of {r} \
                 members), ROOT ({ROOT}) nor PROC_NULL ({PROC_NULL})"
            ),
        )),
    }
}

/// The other group's world ranks.
fn remote(c: &CommData) -> &[u32] {
    c.peers().members()
}

/// `len` bytes in blocks of one per member of the other group, or the error saying not.
fn per_remote(call: &'static str, what: &str, c: &CommData, len: usize) -> Result<usize> {
    let r = c.peers().size();
    if !len.is_multiple_of(r) {
        return Err(count_error(
            call,
            format!("the {what} has {len} bytes: not one equal block for each of the other group's {r} members"),
        ));
    }
    Ok(len / r)
}

pub(super) fn plan_barrier(c: &CommData) -> Result<Started> {
    let bufs = Buffers::of(None, None);
    // SAFETY: no buffers.
    unsafe {
        start("barrier", c, bufs, None, |s, m, _| {
            inter::barrier(s, m, remote(c))
        })
    }
}

/// # Safety
/// See the module's doc.
pub(super) unsafe fn plan_broadcast(c: &CommData, root: Rank, buf: &Layout<'_>) -> Result<Started> {
    const CALL: &str = "broadcast_into";
    let role = role(c, CALL, root)?;
    let len = buf.data_len();
    let bufs = Buffers {
        input: None,
        output: (role != Role::RootsGroup).then_some(buf),
        prefill: role == Role::Root,
    };
    // SAFETY: the caller's promise.
    unsafe {
        start(CALL, c, bufs, None, |s, m, t| {
            inter::bcast(s, m, remote(c), t, role, output(len))
        })
    }
}

/// # Safety
/// See the module's doc.
pub(super) unsafe fn plan_rooted(
    c: &CommData,
    call: &'static str,
    root: Rank,
    how: Rooted,
    send: Option<&Layout<'_>>,
    recv: Option<&Layout<'_>>,
) -> Result<Started> {
    let role = role(c, call, root)?;
    let gathers = matches!(how, Rooted::Gather(_));
    // The root only receives (a gather) or sends (a scatter); the other group the reverse.
    let (send, recv) = match (role, gathers) {
        (Role::RootsGroup, _) => (None, None),
        (Role::Root, true) | (Role::OtherGroup { .. }, false) => (None, recv),
        (Role::Root, false) | (Role::OtherGroup { .. }, true) => (send, None),
    };
    let (sl, rl) = (
        send.map_or(0, |l| l.data_len()),
        recv.map_or(0, |l| l.data_len()),
    );
    if role == Role::Root {
        match &how {
            Rooted::Gather(None) => _ = per_remote(call, "receive buffer", c, rl)?,
            Rooted::Scatter(None) => _ = per_remote(call, "send buffer", c, sl)?,
            _ => {}
        }
    }
    let bufs = Buffers::of(send, recv);
    let r = remote(c);
    // SAFETY: the caller's promise.
    unsafe {
        start(call, c, bufs, None, |s, m, t| match how {
            Rooted::Gather(None) => inter::gather(s, m, r, t, role, input(sl), output(rl)),
            Rooted::Gather(Some(b)) => inter::gatherv(s, r, role, input(sl), output(rl), &b),
            Rooted::Scatter(None) => inter::scatter(s, m, r, t, role, input(sl), output(rl)),
            Rooted::Scatter(Some(b)) => inter::scatterv(s, r, role, input(sl), &b, output(rl)),
        })
    }
}

/// # Safety
/// See the module's doc.
pub(super) unsafe fn plan_reduce<O: Operation>(
    c: &CommData,
    call: &'static str,
    root: Rank,
    send: &Layout<'_>,
    recv: Option<&Layout<'_>>,
    op: &O,
) -> Result<Started> {
    let role = role(c, call, root)?;
    let (send, recv) = match role {
        Role::Root => (None, recv),
        Role::RootsGroup => (None, None),
        Role::OtherGroup { .. } => (Some(send), None),
    };
    let typed = send.or(recv).map(|l| &l.map);
    let red = match typed {
        Some(map) => Some(op.reduction(call, map)?),
        None => None,
    };
    let (sl, rl) = (
        send.map_or(0, |l| l.data_len()),
        recv.map_or(0, |l| l.data_len()),
    );
    let bufs = Buffers::of(send, recv);
    let order = red
        .as_ref()
        .map_or(crate::coll::algorithm::Order::Commutative, |r| r.order);
    let combine = red.filter(|_| send.is_some()).map(|r| r.combine);
    // SAFETY: the caller's promise.
    unsafe {
        start(call, c, bufs, combine, |s, m, t| {
            let dst = if role == Role::Root {
                output(rl)
            } else {
                input(sl)
            };
            inter::reduce(s, m, remote(c), t, role, input(sl), dst, order)
        })
    }
}

/// All-gather, with a block per member of the other group (`blocks`) or equal ones.
///
/// # Safety
/// See the module's doc.
pub(super) unsafe fn plan_all_gather(
    c: &CommData,
    call: &'static str,
    s: &Layout<'_>,
    r: &Layout<'_>,
    blocks: Option<Vec<(usize, usize)>>,
) -> Result<Started> {
    let (sl, rl) = (s.data_len(), r.data_len());
    if blocks.is_none() {
        per_remote(call, "receive buffer", c, rl)?;
    }
    let bufs = Buffers::of(Some(s), Some(r));
    // SAFETY: the caller's promise.
    unsafe {
        start(call, c, bufs, None, |sc, m, t| match &blocks {
            None => inter::allgather(sc, m, remote(c), t, input(sl), output(rl)),
            Some(b) => inter::allgatherv(sc, m, remote(c), input(sl), output(rl), b),
        })
    }
}

/// All-to-all with a block per member of the other group each way (`None`: equal blocks).
///
/// # Safety
/// See the module's doc.
pub(super) unsafe fn plan_all_to_all(
    c: &CommData,
    call: &'static str,
    s: &Layout<'_>,
    r: &Layout<'_>,
    blocks: Option<(Blocks, Blocks)>,
) -> Result<Started> {
    let (sl, rl) = (s.data_len(), r.data_len());
    let n = c.peers().size();
    let (sb, rb) = match blocks {
        Some(b) => b,
        None => (
            equal_blocks(n, per_remote(call, "send buffer", c, sl)?),
            equal_blocks(n, per_remote(call, "receive buffer", c, rl)?),
        ),
    };
    let bufs = Buffers::of(Some(s), Some(r));
    // SAFETY: the caller's promise.
    unsafe {
        start(call, c, bufs, None, |sc, m, _| {
            inter::alltoall(sc, m, remote(c), input(sl), &sb, output(rl), &rb)
        })
    }
}

/// All-reduce and the reduce-scatters (`parts`: the send buffer's part for each member of
/// the other group; `None`: equal ones). The scans are not defined here.
///
/// # Safety
/// See the module's doc.
pub(super) unsafe fn plan_reduction<O: Operation>(
    c: &CommData,
    call: &'static str,
    kind: Reduce,
    s: &Layout<'_>,
    r: &Layout<'_>,
    parts: Option<Vec<(usize, usize)>>,
    op: &O,
) -> Result<Started> {
    let (sl, rl) = (s.data_len(), r.data_len());
    let red = op.reduction(call, &s.map)?;
    let parts = match kind {
        Reduce::All => {
            check_len(call, "receive buffer", rl, sl, "the send buffer's")?;
            None
        }
        Reduce::ScatterBlock => Some(match parts {
            Some(p) => p,
            None => equal_blocks(c.peers().size(), per_remote(call, "send buffer", c, sl)?),
        }),
        Reduce::Scan | Reduce::ExclusiveScan => return Err(c.intra_only(call).unwrap_err()),
    };
    let bufs = Buffers::of(Some(s), Some(r));
    let order = red.order;
    // SAFETY: the caller's promise.
    unsafe {
        start(call, c, bufs, Some(red.combine), |sc, m, t| match &parts {
            None => inter::allreduce(sc, m, remote(c), t, input(sl), output(rl), order),
            Some(p) => inter::reduce_scatter(sc, m, remote(c), t, input(sl), p, output(rl), order),
        })
    }
}
