//! Intercommunicators (MPI 4.1 §7.6): MPI_Intercomm_create and MPI_Intercomm_merge, the
//! remote group's size and group (MPI_Comm_get_parent is in `dynamic`). C holds an intercommunicator as
//! any other communicator (`Comm` over a `SimpleCommunicator` whose data has a remote
//! group); the calls that only an intercommunicator has reach Weft's `InterCommunicator`
//! through `as_inter`.

use crate::c_abi::abi::*;
use crate::c_abi::env::put_int;
use crate::c_abi::errors::{guard, CError};
use crate::c_abi::group::{hand_out, hand_out_comm};
use crate::c_abi::handles;
use crate::c_abi::state::Comm;
use crate::topology::{InterCommunicator, MergeOrder};
use crate::traits::*;
use std::ffi::{c_int, c_void};

/// The intercommunicator of `handle`, or MPI_ERR_COMM naming the call.
pub(crate) fn inter(
    call: &'static str,
    handle: *mut c_void,
) -> Result<(&'static Comm, &'static InterCommunicator), CError> {
    let c = handles::comm(call, handle)?;
    match c.comm.as_inter() {
        Some(i) => Ok((c, i)),
        None => Err(CError::new(
            MPI_ERR_COMM,
            call,
            "the communicator is an intracommunicator; this call needs an intercommunicator",
        )),
    }
}

pub unsafe extern "C" fn intercomm_create(
    local_comm: *mut c_void,
    local_leader: c_int,
    peer_comm: *mut c_void,
    remote_leader: c_int,
    tag: c_int,
    newintercomm: *mut *mut c_void,
) -> c_int {
    const CALL: &str = "MPI_Intercomm_create";
    guard(CALL, local_comm, || {
        let c = handles::comm(CALL, local_comm)?;
        if c.comm.test_inter() {
            return Err(CError::new(
                MPI_ERR_COMM,
                CALL,
                "local_comm is an intercommunicator; it must be an intracommunicator",
            ));
        }
        // The peer communicator and the remote leader matter at the local leader only (the
        // others may pass anything, MPI_COMM_NULL included).
        let peer = if c.comm.rank() == local_leader {
            &handles::comm(CALL, peer_comm)?.comm
        } else {
            &c.comm
        };
        let made = c
            .comm
            .try_create_intercommunicator(local_leader, peer, remote_leader, tag)
            .map_err(CError::from_weft)?;
        hand_out_comm(CALL, newintercomm, Some(made.into()), c)
    })
}
export!(Intercomm_create, intercomm_create);

pub unsafe extern "C" fn intercomm_merge(
    intercomm: *mut c_void,
    high: c_int,
    newintracomm: *mut *mut c_void,
) -> c_int {
    const CALL: &str = "MPI_Intercomm_merge";
    guard(CALL, intercomm, || {
        let (c, i) = inter(CALL, intercomm)?;
        let order = if high != 0 {
            MergeOrder::High
        } else {
            MergeOrder::Low
        };
        let merged = i.try_merge(order).map_err(CError::from_weft)?;
        hand_out_comm(CALL, newintracomm, Some(merged), c)
    })
}
export!(Intercomm_merge, intercomm_merge);

pub unsafe extern "C" fn comm_remote_size(comm: *mut c_void, size: *mut c_int) -> c_int {
    const CALL: &str = "MPI_Comm_remote_size";
    guard(CALL, comm, || {
        let (_, i) = inter(CALL, comm)?;
        put_int(CALL, "size", size, i.remote_size())
    })
}
export!(Comm_remote_size, comm_remote_size);

pub unsafe extern "C" fn comm_remote_group(comm: *mut c_void, group: *mut *mut c_void) -> c_int {
    const CALL: &str = "MPI_Comm_remote_group";
    guard(CALL, comm, || {
        let (_, i) = inter(CALL, comm)?;
        hand_out(CALL, group, i.remote_group())
    })
}
export!(Comm_remote_group, comm_remote_group);

/// The number of members a collective exchanges a block with: the communicator's size, or
/// an intercommunicator's remote size.
pub(crate) fn partners(c: &Comm) -> c_int {
    c.comm
        .as_inter()
        .map_or_else(|| c.comm.size(), |i| i.remote_size())
}
