//! MPI 5's buffered-send buffers of communicators: a communicator with its own buffer
//! charges its buffered sends there, not to the process's ([`crate::environment::Universe`]'s
//! `set_buffer_size`). Weft copies buffered messages into memory of its own, so a buffer
//! is a size (or unbounded: MPI_BUFFER_AUTOMATIC).

use super::{AsCommunicator, SimpleCommunicator};
use crate::engine::comm_buffers::Owner;
use crate::error::{Error, ErrorClass, Result};
use crate::runtime;

impl SimpleCommunicator {
    /// Attaches a buffer of `size` bytes (`None`: as much as needed, MPI_BUFFER_AUTOMATIC)
    /// for this communicator's buffered sends (MPI_Comm_attach_buffer). An error when it has
    /// one already.
    pub fn attach_buffer(&self, size: Option<usize>) -> Result<()> {
        let ctx = self.comm_data().p2p_context();
        let bytes = size.unwrap_or(crate::engine::comm_buffers::AUTOMATIC);
        let attached = runtime::with_call("attach_buffer", |rt| {
            rt.engine.attach_buffer(Owner::Comm(ctx), bytes)
        });
        match attached {
            true => Ok(()),
            false => Err(Error::new(
                ErrorClass::Resource,
                "attach_buffer",
                "the communicator has a buffer attached already (detach it first)",
            )),
        }
    }

    /// Waits until this communicator's buffered sends have gone, then detaches its buffer
    /// (MPI_Comm_detach_buffer): `Some(size)` (`None` inside for an automatic one), or `None`
    /// when it had none.
    pub fn detach_buffer(&self) -> Option<Option<usize>> {
        let ctx = self.comm_data().p2p_context();
        let size = runtime::with_call("detach_buffer", |rt| {
            rt.engine.detach_buffer(Owner::Comm(ctx))
        })?;
        Some((size != crate::engine::comm_buffers::AUTOMATIC).then_some(size))
    }

    /// Waits until this communicator's buffered sends have gone (MPI_Comm_flush_buffer).
    pub fn flush_buffer(&self) {
        let ctx = self.comm_data().p2p_context();
        runtime::with_call("flush_buffer", |rt| {
            rt.engine.flush_buffer_of(Owner::Comm(ctx))
        });
    }

    /// Whether this communicator's buffered sends have all gone, after a pass of progress
    /// (MPI_Comm_iflush_buffer's test).
    pub fn buffer_flushed(&self) -> bool {
        let ctx = self.comm_data().p2p_context();
        runtime::with_call("buffer_flushed", |rt| {
            rt.engine.buffer_done(Owner::Comm(ctx))
        })
    }
}
