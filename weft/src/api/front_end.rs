//! The shortest way from a front end built on this crate (the C ABI) to the engine, for the
//! commonest calls: a blocking standard-mode send and a blocking receive of contiguous
//! bytes. The Rust API's generic layers are inlined into a Rust program's own loop; a front
//! end calls them from many places, so they stay out of line there, and their large results
//! cross each call through memory. These functions are inlined into their one caller each,
//! which checks what the front end must (its handles, counts, datatypes); they check what
//! the Rust API checks (the rank's range, the tag's).

use super::point_to_point::{check_send_tag, translation_group, Status, Tag};
use super::status::to_status;
use super::topology::{AsCommunicator, Rank};
use crate::engine::matching::Pattern;
use crate::engine::SendMode;
use crate::error::Result;
use crate::runtime;

/// A blocking standard-mode send of `bytes` to rank `dest` of `comm` with `tag`
/// (`MPI_Send` of contiguous data), as `call`.
#[doc(hidden)]
#[inline(always)]
pub fn send_bytes<C: AsCommunicator + ?Sized>(
    call: &'static str,
    comm: &C,
    dest: Rank,
    tag: Tag,
    bytes: &[u8],
) -> Result<()> {
    let c = comm.comm_data();
    check_send_tag(call, tag)?;
    let peer = c.peer_world_rank(call, dest)?;
    let context = c.p2p_context();
    runtime::with_call_inlined(call, |rt| {
        rt.engine
            .send(peer, context, tag, bytes, SendMode::Standard)
    })
}

/// A blocking receive into `bytes` from rank `source` of `comm` with `tag` (`None`: any
/// source, any tag), as `call`: the message's status, its source a rank of `comm`.
#[doc(hidden)]
#[inline(always)]
pub fn receive_bytes<C: AsCommunicator + ?Sized>(
    call: &'static str,
    comm: &C,
    source: Option<Rank>,
    tag: Option<Tag>,
    bytes: &mut [u8],
) -> Result<Status> {
    let c = comm.comm_data();
    // Built here, not by `point_to_point::source_pattern`: that one stays out of line in the
    // shared library, its `Result<Pattern>` through memory (55 more instructions per
    // send+receive pair under callgrind).
    let pattern = Pattern {
        context: c.p2p_context(),
        source: match source {
            Some(r) => Some(c.peer_world_rank(call, r)?),
            None => None,
        },
        tag: match tag {
            Some(t) => Some(check_send_tag(call, t).map(|()| t)?),
            None => None,
        },
    };
    let st = runtime::with_call_inlined(call, |rt| rt.engine.recv(pattern, bytes))?;
    Ok(to_status(&st, translation_group(c).map(|g| &**g)))
}
