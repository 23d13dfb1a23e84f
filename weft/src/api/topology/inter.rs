//! Intercommunicators (MPI 4.1 §7.6), in rsmpi's shape: [`InterCommunicator`] with
//! `remote_size`, `remote_group` and `merge`. rsmpi makes them only by spawning processes;
//! Weft makes them as MPI_Intercomm_create does, with
//! [`Communicator::create_intercommunicator`].
//!
//! An intercommunicator is a full communicator: `size` and `rank` are this rank's group's,
//! the ranks that point-to-point calls name are the other group's, and the collectives move
//! data between the groups (MPI's intercommunicator collectives). A rooted collective names
//! its root three ways: the root's group calls it on [`InterCommunicator::root`] at the root
//! (MPI_ROOT) and on [`InterCommunicator::proc_null`] elsewhere (MPI_PROC_NULL); the other
//! group calls it on `process_at_rank(r)`, `r` being the root's rank in the root's group.

use super::{
    AsCommunicator, Color, Communicator, Group, Key, Process, Rank, SimpleCommunicator, UserGroup,
};
use crate::comm::{self, CommData};
use crate::error::{fatal, Result};
use crate::runtime;

/// The rank a rooted collective's root passes on an intercommunicator (MPI_ROOT).
pub const ROOT: Rank = -3;
/// The rank the rest of the root's group passes (MPI_PROC_NULL).
pub const PROC_NULL: Rank = -1;

/// Which group comes first when an intercommunicator is merged (rsmpi's `MergeOrder`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MergeOrder {
    /// This group takes the low ranks (`high = false`).
    Low,
    /// This group takes the high ranks (`high = true`).
    High,
}

/// A communicator between two disjoint groups. Dropping it frees its contexts.
#[derive(Debug)]
#[repr(transparent)]
pub struct InterCommunicator(pub(super) SimpleCommunicator);

impl SimpleCommunicator {
    /// This communicator as an intercommunicator, when it is one (a front end that holds
    /// every communicator as a `SimpleCommunicator`, as the C ABI does, reaches
    /// [`InterCommunicator`]'s calls through this).
    pub fn as_inter(&self) -> Option<&InterCommunicator> {
        self.comm_data().remote.as_ref()?;
        // SAFETY: `InterCommunicator` is `repr(transparent)` over `SimpleCommunicator`; its
        // invariant (a remote group) was checked above.
        Some(unsafe { self.view_as() })
    }
}

impl From<InterCommunicator> for SimpleCommunicator {
    /// The intercommunicator as a plain communicator handle ([`SimpleCommunicator::as_inter`]
    /// gives it back).
    fn from(inter: InterCommunicator) -> SimpleCommunicator {
        inter.0
    }
}

impl InterCommunicator {
    /// Number of processes in the other group (MPI_Comm_remote_size).
    pub fn remote_size(&self) -> Rank {
        self.comm_data().peers().size() as Rank
    }

    /// The other group (MPI_Comm_remote_group).
    pub fn remote_group(&self) -> UserGroup {
        UserGroup {
            data: self
                .comm_data()
                .remote
                .clone()
                .expect("an intercommunicator has a remote group"),
        }
    }

    /// An intracommunicator of both groups (MPI_Intercomm_merge): the group that passes
    /// [`MergeOrder::Low`] first; if both pass the same, the group whose rank 0 has the
    /// lower world rank. Every member of a group passes the same order. Collective over
    /// both groups.
    #[track_caller]
    pub fn merge(&self, order: MergeOrder) -> SimpleCommunicator {
        fatal(self.try_merge(order))
    }

    /// [`merge`](Self::merge), returning errors.
    pub fn try_merge(&self, order: MergeOrder) -> Result<SimpleCommunicator> {
        let d = self.comm_data();
        let data = runtime::with_call("merge", |rt| {
            comm::inter::merge(
                &mut rt.engine,
                &mut rt.contexts,
                d,
                order == MergeOrder::High,
            )
        })?;
        Ok(SimpleCommunicator::user(data))
    }

    /// A copy with contexts of its own (MPI_Comm_dup). Collective over both groups.
    #[track_caller]
    pub fn duplicate(&self) -> InterCommunicator {
        fatal(self.try_duplicate())
    }

    /// [`duplicate`](Self::duplicate), returning errors.
    pub fn try_duplicate(&self) -> Result<InterCommunicator> {
        Ok(InterCommunicator(Communicator::try_duplicate(self)?))
    }

    /// MPI_Comm_split of an intercommunicator: the members of each group with the same
    /// `color` (ordered by `key`, then rank) and the other group's members of that color form
    /// an intercommunicator; `None` for an undefined color, or when the other group has no
    /// member of this one's. Collective over both groups.
    #[track_caller]
    pub fn split_by_color_with_key(&self, color: Color, key: Key) -> Option<InterCommunicator> {
        fatal(self.try_split_by_color_with_key(color, key))
    }

    /// [`split_by_color_with_key`](Self::split_by_color_with_key) with key 0.
    #[track_caller]
    pub fn split_by_color(&self, color: Color) -> Option<InterCommunicator> {
        self.split_by_color_with_key(color, 0)
    }

    /// [`split_by_color_with_key`](Self::split_by_color_with_key), returning errors.
    pub fn try_split_by_color_with_key(
        &self,
        color: Color,
        key: Key,
    ) -> Result<Option<InterCommunicator>> {
        Ok(Communicator::try_split_by_color_with_key(self, color, key)?.map(InterCommunicator))
    }

    /// MPI_Comm_create on an intercommunicator: every member of this group passes the same
    /// subgroup of it (as the other group does of its own); the members of both subgroups
    /// get an intercommunicator between them, ranked in the subgroups' order, the others
    /// `None` (everyone, when either subgroup is empty). Collective over both groups.
    #[track_caller]
    pub fn split_by_subgroup_collective(&self, group: &dyn Group) -> Option<InterCommunicator> {
        Communicator::split_by_subgroup_collective(self, group).map(InterCommunicator)
    }

    /// The root of a rooted collective, called at the root (MPI_ROOT): the other group
    /// receives what it sends, or sends what it receives.
    pub fn root(&self) -> Process<'_> {
        Process {
            comm: self.comm_data(),
            rank: ROOT,
        }
    }

    /// What the rest of the root's group calls a rooted collective on (MPI_PROC_NULL): they
    /// take no part, and their buffers are not touched.
    pub fn proc_null(&self) -> Process<'_> {
        Process {
            comm: self.comm_data(),
            rank: PROC_NULL,
        }
    }
}

impl AsCommunicator for InterCommunicator {
    fn comm_data(&self) -> &CommData {
        self.0.comm_data()
    }
}

impl Communicator for InterCommunicator {
    fn attributes(&self) -> &super::Attributes {
        self.0.attributes()
    }
    fn attributes_mut(&mut self) -> &mut super::Attributes {
        self.0.attributes_mut()
    }
}

/// `MPI_Intercomm_create` for [`Communicator::create_intercommunicator`].
pub(super) fn create(
    local: &CommData,
    local_leader: Rank,
    peer: &CommData,
    remote_leader: Rank,
    tag: i32,
) -> Result<InterCommunicator> {
    const CALL: &str = "create_intercommunicator";
    let leader = local.check_rank(CALL, local_leader)?;
    crate::api::point_to_point::check_send_tag(CALL, tag)?;
    let at_leader = (leader == local.rank).then_some(peer);
    let remote_leader = match at_leader {
        Some(p) => {
            p.intra_only(CALL)?;
            Some((p, p.check_rank(CALL, remote_leader)?))
        }
        None => None,
    };
    let data = runtime::with_call(CALL, |rt| {
        comm::inter::create(
            &mut rt.engine,
            &mut rt.contexts,
            local,
            leader,
            remote_leader,
            tag,
        )
    })?;
    Ok(InterCommunicator(SimpleCommunicator::user(data)))
}
