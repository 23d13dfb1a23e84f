//! Shared-memory transport between ranks of one node. (Being written: see the shm work item.)
//!
//! Contract with `fabric::node`:
//! - `ShmTransport::new(boot, tunables)` is collective over the world (it uses PMI put/fence/get)
//!   and returns `Ok(None)` when this rank has no other rank on its node.
//! - `try_send` / `poll` / `pull` / `prepare_sleep` / `sleep` / `cancel_sleep` behave as the
//!   methods of the same name on [`super::Fabric`], for peers on this node (world ranks).

use super::{Header, PullError};
use crate::boot::Boot;
use crate::error::{Error, Result};
use crate::tunables::Tunables;
use std::time::Duration;

/// The shared-memory transport of one rank.
pub struct ShmTransport {
    _private: (),
}

impl ShmTransport {
    /// Creates this rank's segment, publishes it, attaches every local peer's. Collective.
    pub fn new(boot: &mut Boot, tunables: &Tunables) -> Result<Option<ShmTransport>> {
        let _ = tunables;
        if boot.local_ranks().len() <= 1 {
            return Ok(None);
        }
        Err(Error::unsupported(
            "initialize",
            "shared-memory transport not built yet",
        ))
    }
    /// Whether `peer` (world rank) is reachable through shared memory.
    pub fn reaches(&self, _peer: u32) -> bool {
        false
    }
    /// Largest payload of one packet.
    pub fn max_payload(&self) -> usize {
        0
    }
    /// See [`super::Fabric::try_send`].
    pub fn try_send(&mut self, _peer: u32, _hdr: &Header, _payload: &[u8]) -> bool {
        false
    }
    /// See [`super::Fabric::poll`].
    pub fn poll(&mut self, _sink: &mut dyn FnMut(&Header, &[u8])) -> usize {
        0
    }
    /// See [`super::Fabric::pull`].
    pub fn pull(&mut self, _peer: u32, _remote: u64, _dst: &mut [u8]) -> Result<(), PullError> {
        Err(PullError::Unsupported)
    }
    /// See [`super::Fabric::prepare_sleep`].
    pub fn prepare_sleep(&mut self) {}
    /// See [`super::Fabric::sleep`].
    pub fn sleep(&mut self, timeout: Duration) {
        std::thread::sleep(timeout.min(Duration::from_millis(1)));
    }
    /// See [`super::Fabric::cancel_sleep`].
    pub fn cancel_sleep(&mut self) {}
}
