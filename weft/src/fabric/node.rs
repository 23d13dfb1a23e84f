//! The production fabric: routes each peer to the self transport, shared memory (same node)
//! or TCP (other nodes, or every pair with `WEFT_TRANSPORTS=tcp`).

use super::{
    selfloop::SelfLoop, shm::ShmTransport, tcp::TcpTransport, Fabric, Header, PullError, Sink,
};
use crate::boot::Boot;
use crate::error::{Error, ErrorClass, Result};
use crate::tunables::{ConnectMode, Tunables};
use std::time::Duration;

/// How a peer is reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// This rank itself.
    SelfLoop,
    /// Shared memory (same node).
    Shm,
    /// TCP.
    Tcp,
}

/// Longest sleep in `poll(2)` when shared-memory peers exist too but some cannot signal this
/// rank's wake-up descriptor (the OS refused them a duplicate): they wake the futex, which
/// `poll(2)` does not see, so a sleeping rank looks at the rings this often.
const MIXED_NAP: Duration = Duration::from_millis(1);

/// Idle polls after which TCP is checked only every [`TCP_IDLE_STRIDE`] polls while shared
/// memory is busy (each check is a system call).
const TCP_IDLE_POLLS: u32 = 256;
const TCP_IDLE_STRIDE: u32 = 16;

/// Every transport this rank uses, and the route to each peer.
pub struct NodeFabric {
    rank: u32,
    size: u32,
    /// This job's first universe rank.
    base: u32,
    routes: Vec<Route>,
    selfloop: SelfLoop,
    shm: Option<ShmTransport>,
    tcp: Option<TcpTransport>,
    /// Polls since TCP last delivered something.
    tcp_idle: u32,
}

/// The route to every rank, from the node map and `WEFT_TRANSPORTS`.
pub fn routes(boot: &Boot, t: &Tunables) -> Result<Vec<Route>> {
    let me = boot.node_of[boot.rank as usize];
    (0..boot.size)
        .map(|p| {
            let same_node = boot.node_of[p as usize] == me;
            if p == boot.rank {
                Ok(Route::SelfLoop)
            } else if same_node && t.transports.shm {
                Ok(Route::Shm)
            } else if t.transports.tcp {
                Ok(Route::Tcp)
            } else {
                Err(Error::new(
                    ErrorClass::Arg,
                    "initialize",
                    format!(
                        "rank {p} is on another node, but WEFT_TRANSPORTS={} has no transport \
                         that reaches it (add tcp)",
                        t.transports
                    ),
                ))
            }
        })
        .collect()
}

/// Whether any two ranks of the job talk over TCP (the same answer on every rank).
fn job_uses_tcp(boot: &Boot, t: &Tunables) -> bool {
    if boot.size < 2 || !t.transports.tcp {
        return false;
    }
    !t.transports.shm || boot.node_of.iter().any(|&n| n != boot.node_of[0])
}

impl NodeFabric {
    /// Sets up the transports. Collective over the world.
    pub(crate) fn new(boot: &mut Boot, tunables: &Tunables) -> Result<Self> {
        // Under a PMI process manager, rank 0 makes sure the job has a secret before the
        // transports' fences, so that another job (spawned, or met at a port) can be joined
        // later (`comm::dynamic`); a job of several ranks always fences below.
        if matches!(boot.pmi.protocol(), "pmi-1" | "pmi-2") {
            crate::fabric::tcp::ensure_job_secret(boot)?;
        }
        let routes = routes(boot, tunables)?;
        let uses_tcp = job_uses_tcp(boot, tunables);
        let shm = if tunables.transports.shm {
            // With TCP too, this rank sleeps in poll(2) over its sockets and a wake-up
            // descriptor its shared-memory peers signal.
            ShmTransport::new(boot, tunables, uses_tcp)?
        } else {
            None
        };
        let tcp = if uses_tcp {
            let tcp_peer: Vec<bool> = routes.iter().map(|&r| r == Route::Tcp).collect();
            let mut t = TcpTransport::new(boot, tunables, &tcp_peer)?;
            if tunables.connect == ConnectMode::Full {
                t.connect_all()?;
            }
            Some(t)
        } else {
            None
        };
        Ok(NodeFabric {
            rank: boot.rank,
            size: boot.size,
            base: boot.universe_base,
            routes,
            selfloop: SelfLoop::default(),
            shm,
            tcp,
            tcp_idle: 0,
        })
    }

    /// The TCP transport, when the job uses one.
    pub fn tcp(&self) -> Option<&TcpTransport> {
        self.tcp.as_ref()
    }

    /// Whether two of this node's CPUs share a core, as the start-up probe found (`None`:
    /// it did not run; see `shm::probe`).
    pub fn cores_shared(&self) -> Option<bool> {
        let ns = self.shm.as_ref()?.probed_round_trip_ns()?;
        Some(ns < super::shm::probe::SHARED_BELOW_NS)
    }

    /// How this node's wake-ups fence (`None`: no shared-memory transport).
    pub fn wake_fences(&self) -> Option<super::shm::doorbell::Fences> {
        self.shm.as_ref().map(|s| s.fences())
    }

    /// Makes the TCP transport, for processes of other jobs (a spawn or a connect), when
    /// the job has none ([`NodeFabric::tcp`] is `None`), with the universe's `secret`.
    pub fn start_tcp_for_other_jobs(
        &mut self,
        boot: &Boot,
        tunables: &Tunables,
        secret: [u8; super::tcp::auth::SECRET_LEN],
    ) -> Result<()> {
        if self.tcp.is_none() {
            self.tcp = Some(TcpTransport::for_other_jobs(boot, tunables, secret)?);
        }
        Ok(())
    }

    /// Adds the process of another job with universe rank `uni` (world rank `wire` of its
    /// job, listening at `addr`) as a TCP peer, after [`NodeFabric::start_tcp_for_other_jobs`].
    /// Returns its peer number and whether it is new (a process added before keeps its
    /// number; one of this very job is its world rank).
    /// `job` is its job's key: a process of another job whose universe rank is taken (by this
    /// job, or a process of a third job added before) is an error.
    pub fn add_remote(
        &mut self,
        uni: u32,
        wire: u32,
        (job, own_job): (u64, u64),
        addr: std::net::SocketAddr,
    ) -> Result<(u32, bool)> {
        let tcp = self.tcp.as_mut().expect("start_tcp_for_other_jobs came first");
        if let Some(r) = uni.checked_sub(self.base).filter(|&r| r < self.size) {
            if job != own_job || wire != r {
                return Err(Error::new(
                    ErrorClass::Spawn,
                    "join another job",
                    format!(
                        "universe rank {uni} is this job's rank {r} and also rank {wire} of \
                         another job: two jobs spawned under a process manager other than weft \
                         run got overlapping universe ranks; start the job with weft run"
                    ),
                ));
            }
            return Ok((r, false));
        }
        let id = tcp.add_remote(uni, wire, job, addr)?;
        let new = id as usize == self.routes.len();
        if new {
            self.routes.push(Route::Tcp);
        }
        Ok((id, new))
    }

    /// Ends connections in order (after the final barrier of finalize).
    pub fn close(&mut self) {
        if let Some(t) = self.tcp.as_mut() {
            t.close();
        }
    }

    fn shm_for(&mut self, peer: u32) -> &mut ShmTransport {
        // Routes name shm only when the transport exists for this node.
        self.shm
            .as_mut()
            .unwrap_or_else(|| panic!("weft: no shared-memory transport reaches rank {peer}"))
    }

    fn tcp_for(&mut self, peer: u32) -> &mut TcpTransport {
        self.tcp
            .as_mut()
            .unwrap_or_else(|| panic!("weft: no TCP transport reaches rank {peer}"))
    }

    /// A TCP failure is fatal for the job: the message names the peer, where and why; the
    /// panic makes finalize abort the job through the process manager.
    #[cold]
    fn tcp_failed(msg: String) -> ! {
        panic!("{msg}");
    }
}

impl Fabric for NodeFabric {
    fn rank(&self) -> u32 {
        self.rank
    }
    fn size(&self) -> u32 {
        self.size
    }
    fn universe_rank(&self, peer: u32) -> u32 {
        match (peer < self.size, &self.tcp) {
            (true, _) | (false, None) => self.base + peer,
            (false, Some(t)) => t.uni_of(peer),
        }
    }
    fn max_payload(&self, peer: u32) -> usize {
        match self.routes[peer as usize] {
            Route::SelfLoop => SelfLoop::MAX_PAYLOAD,
            Route::Shm => self.shm.as_ref().map_or(0, |s| s.max_payload()),
            Route::Tcp => self.tcp.as_ref().map_or(0, |t| t.max_payload()),
        }
    }
    #[inline]
    fn eager_limit(&self, peer: u32) -> Option<usize> {
        match self.routes[peer as usize] {
            Route::Tcp => self.tcp.as_ref().map(|t| t.eager_limit()),
            _ => None,
        }
    }
    #[inline]
    fn try_send(&mut self, peer: u32, hdr: &Header, payload: &[u8]) -> bool {
        match self.routes[peer as usize] {
            Route::SelfLoop => {
                self.selfloop.send(hdr, payload);
                true
            }
            Route::Shm => self.shm_for(peer).try_send(peer, hdr, payload),
            Route::Tcp => {
                self.tcp_idle = 0;
                self.tcp_for(peer).try_send(peer, hdr, payload)
            }
        }
    }
    #[inline]
    fn poll<S: Sink>(&mut self, sink: &mut S) -> usize {
        let mut n = 0;
        if !self.selfloop.is_empty() {
            n += self.selfloop.poll(&mut |h, p| sink.packet(h, p));
        }
        if let Some(shm) = self.shm.as_mut() {
            n += shm.poll(&mut |h, p| sink.packet(h, p));
        }
        if let Some(tcp) = self.tcp.as_mut() {
            // With shared-memory peers busy, an idle TCP side is checked only now and then.
            self.tcp_idle = self.tcp_idle.saturating_add(1);
            let due = self.shm.is_none()
                || self.tcp_idle <= TCP_IDLE_POLLS
                || self.tcp_idle.is_multiple_of(TCP_IDLE_STRIDE)
                || tcp.busy();
            if due {
                let k = tcp.poll(sink);
                if k > 0 {
                    self.tcp_idle = 0;
                }
                n += k;
                if let Some(msg) = tcp.take_fatal() {
                    Self::tcp_failed(msg);
                }
            }
        }
        n
    }
    unsafe fn pull(&mut self, peer: u32, remote: u64, dst: &mut [u8]) -> Result<(), PullError> {
        match self.routes[peer as usize] {
            Route::SelfLoop => {
                // SAFETY: by the caller's contract `remote` is the address of a send buffer of
                // this very process, lent (unmoved, unwritten) until this pull returns; `dst`
                // is a distinct, exclusively borrowed buffer.
                unsafe {
                    std::ptr::copy_nonoverlapping(remote as *const u8, dst.as_mut_ptr(), dst.len());
                }
                Ok(())
            }
            // SAFETY: the caller's contract, passed on unchanged.
            Route::Shm => unsafe { self.shm_for(peer).pull(peer, remote, dst) },
            // The sender streams the data as packets instead.
            Route::Tcp => Err(PullError::Unsupported),
        }
    }
    unsafe fn push(&mut self, peer: u32, remote: u64, src: &[u8]) -> Result<(), PullError> {
        match self.routes[peer as usize] {
            Route::SelfLoop => {
                // SAFETY: by the caller's contract `remote` is the address of a receive buffer
                // of this very process, lent exclusively until this push returns; `src` is the
                // distinct send buffer.
                unsafe {
                    std::ptr::copy_nonoverlapping(src.as_ptr(), remote as *mut u8, src.len())
                };
                Ok(())
            }
            // SAFETY: the caller's contract, passed on unchanged.
            Route::Shm => unsafe { self.shm_for(peer).push(peer, remote, src) },
            Route::Tcp => Err(PullError::Unsupported),
        }
    }
    fn prepare_sleep(&mut self) {
        if let Some(s) = self.shm.as_mut() {
            s.prepare_sleep();
        }
    }
    fn sleep(&mut self, timeout: Duration) {
        match (self.shm.as_mut(), self.tcp.as_mut()) {
            (Some(s), None) => s.sleep(timeout),
            (None, Some(t)) => t.sleep(timeout),
            (Some(s), Some(t)) => {
                let (fd, every_peer_signals) = s.wake_fd().unzip();
                let nap = if every_peer_signals == Some(true) {
                    timeout
                } else {
                    timeout.min(MIXED_NAP)
                };
                t.sleep_watching(fd, nap);
                s.end_polled_sleep();
            }
            // Alone: nothing can arrive from outside, and the self queue is polled by the
            // caller; a short nap keeps a buggy wait from spinning a core.
            (None, None) => std::thread::sleep(timeout.min(Duration::from_millis(1))),
        }
        self.tcp_idle = 0;
    }
    #[inline]
    fn wake_all(&mut self, peers: &[u32]) {
        let routes = &self.routes;
        if let Some(shm) = self.shm.as_mut() {
            shm.wake_all(
                peers
                    .iter()
                    .copied()
                    .filter(|&p| routes[p as usize] == Route::Shm),
            );
        }
    }

    fn cancel_sleep(&mut self) {
        if let Some(s) = self.shm.as_mut() {
            s.cancel_sleep();
        }
    }

    fn note_waiting(&mut self, waiting: bool, now_us: u32) {
        if let Some(s) = self.shm.as_mut() {
            s.note_waiting(waiting, now_us);
        }
    }

    fn sibling_time_here(&self, from_us: u32, to_us: u32) -> Option<u32> {
        self.shm.as_ref()?.sibling_time_here(from_us, to_us)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn another_job_claiming_a_universe_rank_of_this_job_is_refused() {
        let mut boot = Boot {
            rank: 0,
            size: 1,
            node_of: vec![0],
            job_id: "mine".into(),
            pmi: Box::new(crate::boot::singleton::Singleton::default()),
            universe_base: 40,
            secret: None,
        };
        let t = Tunables::from_lookup(|k| (k == "WEFT_TCP_ADDR").then(|| "127.0.0.1".into()))
            .unwrap();
        let mut f = NodeFabric::new(&mut boot, &t).unwrap();
        f.start_tcp_for_other_jobs(&boot, &t, [5; super::super::tcp::auth::SECRET_LEN])
            .unwrap();
        let at: std::net::SocketAddr = "127.0.0.1:9".parse().unwrap();
        // This job's own rank 0 (universe rank 40) is its world rank, not a new peer.
        assert_eq!(f.add_remote(40, 0, (7, 7), at).unwrap(), (0, false));
        // Another job's process with universe rank 40 is refused, naming both.
        let e = f.add_remote(40, 3, (8, 7), at).unwrap_err();
        assert_eq!(e.class, ErrorClass::Spawn);
        let both = "universe rank 40 is this job's rank 0 and also rank 3 of another job";
        assert!(e.detail.contains(both), "{e}");
        // Past this job's range: a new peer.
        assert_eq!(f.add_remote(41, 0, (8, 7), at).unwrap(), (1, true));
    }
}
