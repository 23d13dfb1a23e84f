//! MPI 5's buffers of communicators and sessions (`MPI_Comm_attach_buffer`,
//! `MPI_Session_attach_buffer`): a buffered send on a communicator that has one charges that
//! buffer's space; else, on a communicator made from a session's group, the session's buffer
//! if it has one; else the process's. Weft copies buffered messages into memory of its own,
//! so a buffer here is a capacity and the sends charged to it (their requests; a send's space
//! is free again once its request is done).

use super::request::Handle;
use std::collections::HashMap;

/// The space left when a buffer was attached as `MPI_BUFFER_AUTOMATIC`: as much as needed.
pub const AUTOMATIC: usize = usize::MAX;

/// What a buffer is attached to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Owner {
    /// A communicator, by its point-to-point context.
    Comm(u32),
    /// A session, by the number its front end gave it.
    Session(u32),
}

/// One buffer.
#[derive(Debug, Default)]
struct Pool {
    capacity: usize,
    /// The buffered sends charged to it: request and bytes.
    sends: Vec<(Handle, usize)>,
}

/// The attached buffers, and which communicators belong to which session.
#[derive(Debug, Default)]
pub struct CommBuffers {
    pools: HashMap<Owner, Pool>,
    /// Point-to-point context → the session its communicator was made from.
    sessions: HashMap<u32, u32>,
}

impl CommBuffers {
    /// Whether `owner` has a buffer attached.
    pub fn has(&self, owner: Owner) -> bool {
        self.pools.contains_key(&owner)
    }

    /// The buffer a buffered send on `context` charges, if not the process's: the
    /// communicator's, else its session's.
    pub fn owner_for(&self, context: u32) -> Option<Owner> {
        let own = Owner::Comm(context);
        if self.has(own) {
            return Some(own);
        }
        let session = Owner::Session(*self.sessions.get(&context)?);
        self.has(session).then_some(session)
    }

    /// Records that `context`'s communicator was made from session `session`'s groups.
    pub fn link(&mut self, context: u32, session: u32) {
        self.sessions.insert(context, session);
    }

    /// Attaches a buffer of `capacity` bytes ([`AUTOMATIC`]: unbounded) to `owner`; `false`
    /// when one is attached already.
    pub fn attach(&mut self, owner: Owner, capacity: usize) -> bool {
        if self.has(owner) {
            return false;
        }
        self.pools.insert(
            owner,
            Pool {
                capacity,
                sends: Vec::new(),
            },
        );
        true
    }

    /// Removes `owner`'s buffer, returning its capacity (the caller waited for its sends).
    pub fn detach(&mut self, owner: Owner) -> Option<usize> {
        self.pools.remove(&owner).map(|p| p.capacity)
    }

    /// Forgets a freed communicator: its buffer and its session.
    pub fn forget_comm(&mut self, context: u32) {
        self.detach(Owner::Comm(context));
        self.sessions.remove(&context);
    }

    /// The bytes in use and the capacity of `owner`'s buffer (`None`: it has none), after
    /// forgetting the sends that are done (`done(h)`).
    pub fn usage(&mut self, owner: Owner, done: impl Fn(Handle) -> bool) -> Option<(usize, usize)> {
        let p = self.pools.get_mut(&owner)?;
        p.sends.retain(|&(h, _)| !done(h));
        Some((p.sends.iter().map(|&(_, n)| n).sum(), p.capacity))
    }

    /// Charges send `h` of `bytes` to `owner`'s buffer.
    pub fn charge(&mut self, owner: Owner, h: Handle, bytes: usize) {
        if let Some(p) = self.pools.get_mut(&owner) {
            p.sends.push((h, bytes));
        }
    }
}
