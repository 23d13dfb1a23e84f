//! Collective operations. This release has the barrier; the collective algorithms proper
//! (broadcast, reduce, gather, ...) are a later piece of work.

use super::topology::{AsCommunicator, Communicator};
use crate::runtime;

/// Collective operations on a communicator (rsmpi's `CommunicatorCollectives`).
pub trait CommunicatorCollectives: AsCommunicator {
    /// Blocks until every rank of the communicator has called it.
    #[track_caller]
    fn barrier(&self) {
        let c = self.comm_data();
        crate::error::fatal(runtime::with_call("barrier", |rt| {
            crate::comm::barrier(&mut rt.engine, c)
        }))
    }
}

impl<C: Communicator + ?Sized> CommunicatorCollectives for C {}

/// Traits to glob-import.
pub mod traits {
    pub use super::CommunicatorCollectives;
}
