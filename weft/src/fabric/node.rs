//! The production fabric: routes each peer to the self transport or shared memory.

use super::{selfloop::SelfLoop, shm::ShmTransport, Fabric, Header, PullError};
use crate::boot::Boot;
use crate::error::{Error, Result};
use crate::tunables::Tunables;
use std::time::Duration;

/// Every transport this rank uses, and the route to each peer.
pub struct NodeFabric {
    rank: u32,
    size: u32,
    selfloop: SelfLoop,
    shm: Option<ShmTransport>,
}

impl NodeFabric {
    /// Sets up the transports. Collective over the world.
    pub fn new(boot: &mut Boot, tunables: &Tunables) -> Result<Self> {
        let shm = ShmTransport::new(boot, tunables)?;
        let local = boot.local_ranks().len();
        if local != boot.size as usize {
            return Err(Error::unsupported(
                "initialize",
                format!(
                    "the job spans several nodes ({} of {} ranks are on this one); the TCP \
                     transport that reaches other nodes is not built yet",
                    local, boot.size
                ),
            ));
        }
        Ok(NodeFabric {
            rank: boot.rank,
            size: boot.size,
            selfloop: SelfLoop::default(),
            shm,
        })
    }

    /// Names of the transports in use, for diagnostics.
    pub fn transports(&self) -> Vec<&'static str> {
        let mut v = vec!["self"];
        if self.shm.is_some() {
            v.push("shm");
        }
        v
    }

    fn shm_for(&mut self, peer: u32) -> &mut ShmTransport {
        // The constructor refused jobs where a peer other than self is not on this node, so
        // every other peer is reachable through shared memory.
        self.shm
            .as_mut()
            .unwrap_or_else(|| panic!("weft: no transport reaches rank {peer}"))
    }
}

impl Fabric for NodeFabric {
    fn rank(&self) -> u32 {
        self.rank
    }
    fn size(&self) -> u32 {
        self.size
    }
    fn max_payload(&self, peer: u32) -> usize {
        if peer == self.rank {
            SelfLoop::MAX_PAYLOAD
        } else {
            self.shm.as_ref().map_or(0, |s| s.max_payload())
        }
    }
    #[inline]
    fn try_send(&mut self, peer: u32, hdr: &Header, payload: &[u8]) -> bool {
        if peer == self.rank {
            self.selfloop.send(hdr, payload);
            true
        } else {
            self.shm_for(peer).try_send(peer, hdr, payload)
        }
    }
    #[inline]
    fn poll<S: FnMut(&Header, &[u8])>(&mut self, sink: &mut S) -> usize {
        let mut n = 0;
        if !self.selfloop.is_empty() {
            n += self.selfloop.poll(sink);
        }
        if let Some(shm) = self.shm.as_mut() {
            n += shm.poll(sink);
        }
        n
    }
    fn pull(&mut self, peer: u32, remote: u64, dst: &mut [u8]) -> Result<(), PullError> {
        if peer == self.rank {
            // SAFETY: `remote` is the address of a send buffer of this very process that the
            // matching send request keeps borrowed (and unmoved) until it completes, which is
            // after this pull returns; `dst` is a distinct, exclusively borrowed buffer.
            unsafe {
                std::ptr::copy_nonoverlapping(remote as *const u8, dst.as_mut_ptr(), dst.len());
            }
            return Ok(());
        }
        self.shm_for(peer).pull(peer, remote, dst)
    }
    fn push(&mut self, peer: u32, remote: u64, src: &[u8]) -> Result<(), PullError> {
        if peer == self.rank {
            // SAFETY: `remote` is the address of a receive buffer of this very process that
            // the matching receive keeps exclusively borrowed until it completes, after this
            // push; `src` is the distinct send buffer.
            unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), remote as *mut u8, src.len()) };
            return Ok(());
        }
        self.shm_for(peer).push(peer, remote, src)
    }
    fn prepare_sleep(&mut self) {
        if let Some(s) = self.shm.as_mut() {
            s.prepare_sleep();
        }
    }
    fn sleep(&mut self, timeout: Duration) {
        match self.shm.as_mut() {
            Some(s) => s.sleep(timeout),
            // Alone: nothing can arrive from outside, and the self queue is polled by the
            // caller; a short nap keeps a buggy wait from spinning a core.
            None => std::thread::sleep(timeout.min(Duration::from_millis(1))),
        }
    }
    fn cancel_sleep(&mut self) {
        if let Some(s) = self.shm.as_mut() {
            s.cancel_sleep();
        }
    }
}
