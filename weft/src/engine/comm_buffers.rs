//! MPI 5's buffers of communicators (`MPI_Comm_attach_buffer`): a buffered send on a
//! communicator that has one charges that buffer's space, not the process's. Weft copies
//! buffered messages into memory of its own, so a buffer here is a capacity and the sends
//! charged to it (their requests; a send's space is free again once its request is done).

use super::request::Handle;
use std::collections::HashMap;

/// The space left when a buffer was attached as `MPI_BUFFER_AUTOMATIC`: as much as needed.
pub const AUTOMATIC: usize = usize::MAX;

/// One communicator's buffer.
#[derive(Debug, Default)]
struct Pool {
    capacity: usize,
    /// The buffered sends charged to it: request and bytes.
    sends: Vec<(Handle, usize)>,
}

/// The attached buffers, by the communicators' point-to-point contexts.
#[derive(Debug, Default)]
pub struct CommBuffers {
    by_context: HashMap<u32, Pool>,
}

impl CommBuffers {
    /// Whether a buffer is attached for `context`.
    pub fn has(&self, context: u32) -> bool {
        self.by_context.contains_key(&context)
    }

    /// Attaches a buffer of `capacity` bytes ([`AUTOMATIC`]: unbounded) for `context`;
    /// `false` when one is attached already.
    pub fn attach(&mut self, context: u32, capacity: usize) -> bool {
        if self.has(context) {
            return false;
        }
        self.by_context.insert(
            context,
            Pool {
                capacity,
                sends: Vec::new(),
            },
        );
        true
    }

    /// Removes `context`'s buffer, returning its capacity (the caller waited for its sends).
    pub fn detach(&mut self, context: u32) -> Option<usize> {
        self.by_context.remove(&context).map(|p| p.capacity)
    }

    /// The bytes in use and the capacity of `context`'s buffer (`None`: it has none), after
    /// forgetting the sends that are done (`done(h)`).
    pub fn usage(&mut self, context: u32, done: impl Fn(Handle) -> bool) -> Option<(usize, usize)> {
        let p = self.by_context.get_mut(&context)?;
        p.sends.retain(|&(h, _)| !done(h));
        Some((p.sends.iter().map(|&(_, n)| n).sum(), p.capacity))
    }

    /// Charges send `h` of `bytes` to `context`'s buffer.
    pub fn charge(&mut self, context: u32, h: Handle, bytes: usize) {
        if let Some(p) = self.by_context.get_mut(&context) {
            p.sends.push((h, bytes));
        }
    }
}
