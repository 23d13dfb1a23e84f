//! Collectives on an intercommunicator (MPI 4.1 §6.2.2): data goes from one group to the
//! other. The algorithms are MPICH's: what crosses between the groups crosses once, between
//! the groups' rank-0 members (the leaders), and each group's own part runs as the
//! intracommunicator algorithm over that group (`m`: this rank's group; `remote`: the other
//! group's world ranks, in its rank order). A rooted collective's root is alone in its group
//! to send or receive: the rest of its group take no part (MPI_PROC_NULL).
//!
//! Both groups' schedules travel on the intercommunicator's collective context with the same
//! tag; the groups are disjoint, so a message's source tells whose phase it belongs to.

use super::algorithm::{self, Order};
use super::{Members, Schedule, Span};
use crate::engine::schedule::Area;
use crate::tunables::Tunables;

/// A member's part in a rooted collective on an intercommunicator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// The root (MPI_ROOT): it sends to, or receives from, the whole other group.
    Root,
    /// Another member of the root's group (MPI_PROC_NULL): no part.
    RootsGroup,
    /// A member of the other group; `root` is the root's rank in the root's group.
    OtherGroup {
        /// The root's rank in its group.
        root: usize,
    },
}

const EMPTY_IN: Span = Span {
    area: Area::Input,
    off: 0,
    len: 0,
};
const EMPTY_OUT: Span = Span {
    area: Area::Output,
    off: 0,
    len: 0,
};

/// A scratch span of `len` bytes at the leader (`None` elsewhere).
fn at_leader(s: &mut Schedule, m: &Members, len: usize) -> Option<Span> {
    (m.me == 0).then(|| Span::new(s.scratch(len), 0, len))
}

/// Barrier: each group meets, the leaders trade a message, each leader releases its group;
/// so no member leaves before every member of the other group has come in.
pub fn barrier(s: &mut Schedule, m: &Members, remote: &[u32]) {
    algorithm::barrier(s, m);
    s.fence();
    if m.me == 0 {
        s.send(remote[0], EMPTY_OUT);
        s.recv(remote[0], EMPTY_OUT);
        s.fence();
    }
    super::bcast::binomial(s, m, 0, EMPTY_OUT);
}

/// Broadcast of `data` from the root to every member of the other group (through its
/// leader).
pub fn bcast(s: &mut Schedule, m: &Members, remote: &[u32], t: &Tunables, role: Role, data: Span) {
    match role {
        Role::Root => s.send(remote[0], data),
        Role::RootsGroup => {}
        Role::OtherGroup { root } => {
            if m.me == 0 {
                s.recv(remote[root], data);
                s.fence();
            }
            algorithm::bcast(s, m, t, 0, data);
        }
    }
}

/// Gather of every member's `src` (equal blocks) of the other group into `dst` at the root:
/// that group gathers at its leader, which sends the whole to the root.
pub fn gather(s: &mut Schedule, m: &Members, remote: &[u32], t: &Tunables, role: Role, src: Span, dst: Span) {
    match role {
        Role::Root => s.recv(remote[0], dst),
        Role::RootsGroup => {}
        Role::OtherGroup { root } => {
            let whole = at_leader(s, m, m.n() * src.len);
            algorithm::gather(s, m, t, 0, src, whole.unwrap_or(EMPTY_OUT));
            if let Some(whole) = whole {
                s.fence();
                s.send(remote[root], whole);
            }
        }
    }
}

/// Scatter of the root's `src` (equal blocks) to the other group's `dst`s: the root sends the
/// whole to that group's leader, which scatters it.
pub fn scatter(s: &mut Schedule, m: &Members, remote: &[u32], t: &Tunables, role: Role, src: Span, dst: Span) {
    match role {
        Role::Root => s.send(remote[0], src),
        Role::RootsGroup => {}
        Role::OtherGroup { root } => {
            let whole = at_leader(s, m, m.n() * dst.len);
            if let Some(whole) = whole {
                s.recv(remote[root], whole);
                s.fence();
            }
            algorithm::scatter(s, m, t, 0, whole.unwrap_or(EMPTY_IN), dst);
        }
    }
}

/// Gather with a block per member of the other group (`block[j]`: member j's part of the
/// root's `dst`): each sends straight to the root.
pub fn gatherv(s: &mut Schedule, remote: &[u32], role: Role, src: Span, dst: Span, block: &[(usize, usize)]) {
    match role {
        Role::Root => {
            for (j, &(off, len)) in block.iter().enumerate() {
                s.recv_shared(remote[j], dst.sub(off, len));
            }
        }
        Role::RootsGroup => {}
        Role::OtherGroup { root } => s.send(remote[root], src),
    }
}

/// Scatter with a block per member of the other group: the root sends each its block.
pub fn scatterv(s: &mut Schedule, remote: &[u32], role: Role, src: Span, block: &[(usize, usize)], dst: Span) {
    match role {
        Role::Root => {
            for (j, &(off, len)) in block.iter().enumerate() {
                s.send(remote[j], src.sub(off, len));
            }
        }
        Role::RootsGroup => {}
        Role::OtherGroup { root } => s.recv(remote[root], dst),
    }
}

/// This group's reduction of `src` at its leader (`None` elsewhere), in rank order when the
/// operation does not commute.
fn reduce_at_leader(s: &mut Schedule, m: &Members, t: &Tunables, src: Span, order: Order) -> Option<Span> {
    let at = at_leader(s, m, src.len);
    algorithm::reduce(s, m, t, 0, src, at.unwrap_or(src), order);
    s.fence();
    at
}

/// Reduce of the other group's `src`s into `dst` at the root: that group reduces at its
/// leader, which sends the result to the root.
#[allow(clippy::too_many_arguments)]
pub fn reduce(
    s: &mut Schedule,
    m: &Members,
    remote: &[u32],
    t: &Tunables,
    role: Role,
    src: Span,
    dst: Span,
    order: Order,
) {
    match role {
        Role::Root => s.recv(remote[0], dst),
        Role::RootsGroup => {}
        Role::OtherGroup { root } => {
            if let Some(at) = reduce_at_leader(s, m, t, src, order) {
                s.send(remote[root], at);
            }
        }
    }
}

/// Allreduce: every member gets the reduction of the other group's `src`s. Each group
/// reduces at its leader, the leaders trade results, each broadcasts within its group.
pub fn allreduce(s: &mut Schedule, m: &Members, remote: &[u32], t: &Tunables, src: Span, dst: Span, order: Order) {
    if let Some(at) = reduce_at_leader(s, m, t, src, order) {
        s.send(remote[0], at);
        s.recv(remote[0], dst);
        s.fence();
    }
    algorithm::bcast(s, m, t, 0, dst);
}

/// Allgather: every member gets the other group's `src`s in its rank order (`dst`). Each
/// group gathers at its leader, the leaders trade, each broadcasts within its group.
pub fn allgather(s: &mut Schedule, m: &Members, remote: &[u32], t: &Tunables, src: Span, dst: Span) {
    let whole = at_leader(s, m, m.n() * src.len);
    algorithm::gather(s, m, t, 0, src, whole.unwrap_or(EMPTY_OUT));
    if let Some(whole) = whole {
        s.fence();
        s.send(remote[0], whole);
        s.recv(remote[0], dst);
        s.fence();
    }
    algorithm::bcast(s, m, t, 0, dst);
}

/// Allgather with a block per member of the other group (`block[j]`: member j's part of
/// `dst`): every member sends its `src` to each member of the other group.
pub fn allgatherv(s: &mut Schedule, m: &Members, remote: &[u32], src: Span, dst: Span, block: &[(usize, usize)]) {
    let r = remote.len();
    for k in 0..r {
        let j = (m.me + k) % r;
        s.send(remote[j], src);
        s.recv(remote[j], dst.sub(block[j].0, block[j].1));
    }
}

/// All-to-all: block `send[j]` of `src` goes to member j of the other group, whose block for
/// this member arrives in `recv[j]` of `dst`. One round, each member starting at a different
/// partner.
pub fn alltoall(
    s: &mut Schedule,
    m: &Members,
    remote: &[u32],
    src: Span,
    send: &[(usize, usize)],
    dst: Span,
    recv: &[(usize, usize)],
) {
    let r = remote.len();
    for k in 0..r {
        let j = (m.me + k) % r;
        s.recv(remote[j], dst.sub(recv[j].0, recv[j].1));
        s.send(remote[j], src.sub(send[j].0, send[j].1));
    }
}

/// Reduce-scatter: part j of this group's `src`s (`part[j]`), reduced over this group, goes
/// to member j of the other group; this member's part of the other group's reduction
/// arrives in `dst`. Each group reduces at its leader, which sends each member of the other
/// group its part.
#[allow(clippy::too_many_arguments)]
pub fn reduce_scatter(
    s: &mut Schedule,
    m: &Members,
    remote: &[u32],
    t: &Tunables,
    src: Span,
    part: &[(usize, usize)],
    dst: Span,
    order: Order,
) {
    if let Some(at) = reduce_at_leader(s, m, t, src, order) {
        for (j, &(off, len)) in part.iter().enumerate() {
            s.send(remote[j], at.sub(off, len));
        }
    }
    s.recv(remote[0], dst);
}
