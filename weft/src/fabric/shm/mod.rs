//! Shared-memory transport between ranks of one node.
//!
//! Each local rank creates one segment (see [`layout`]): a control block (its doorbell, its
//! pid, an "active senders" bitmap) and one outgoing SPSC ring per local peer (see [`ring`]).
//! A packet to a peer is one record appended to my ring for it; the peer polls the rings
//! whose senders set their bit in its bitmap. Segments have no names and their space is
//! reserved when they are created (see [`crate::sys::segment`]): nothing is left in /dev/shm
//! whoever dies when, and a /dev/shm too small for the node's rings is an error at start-up
//! rather than SIGBUS mid-run. Waking a sleeping receiver is the handshake in [`doorbell`].
//!
//! Contract with `fabric::node`:
//! - `ShmTransport::new(boot, tunables, in_poll)` is collective over the world (it uses PMI put/fence/get)
//!   and returns `Ok(None)` when this rank has no other rank on its node.
//! - `try_send` / `poll` / `pull` / `prepare_sleep` / `sleep` / `cancel_sleep` behave as the
//!   methods of the same name on [`super::Fabric`], for peers on this node (world ranks).
//!
//! Guarantees: packets from one sender to one receiver are delivered in the order they were
//! sent. One `poll` may deliver packets from several senders; it visits senders round-robin,
//! starting one further each call, and takes at most one ring's worth of bytes from each.

pub mod doorbell;
pub mod layout;
pub mod probe;
pub mod ring;
#[cfg(all(test, not(loom)))]
mod tests;

use super::{Header, PullError};
use crate::boot::Boot;
use crate::error::{Error, ErrorClass, Result};
use crate::sync::{AtomicU64, Ordering};
use crate::sys::segment::{self, Segment};
use crate::tunables::Tunables;
use doorbell::{Fences, Futex, Park, IN_POLL, ON_FUTEX};
use layout::{Activity, Geometry, SegView, MAGIC};
use ring::{Consumer, Producer};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::time::Duration;

const NOT_LOCAL: u32 = u32::MAX;

/// One local peer: its mapped segment, my ring to it, its ring to me.
struct Peer {
    /// Keeps the mapping alive; `view`, `tx`'s and `rx`'s pointers point into it (tx into
    /// my own segment, which `ShmTransport::own` keeps alive).
    _seg: Segment,
    view: SegView,
    pid: u32,
    /// Whether I already set my bit in its active bitmap.
    contacted: bool,
    /// My duplicate of its wake-up descriptor, when it sleeps in `poll(2)` and I could take
    /// one.
    waker: Option<OwnedFd>,
    tx: Producer,
    rx: Consumer,
}

/// The shared-memory transport of one rank.
pub struct ShmTransport {
    rank: u32,
    my_local: usize,
    /// World rank -> local index, or NOT_LOCAL.
    local_of: Vec<u32>,
    /// By local index; `None` at my own index.
    peers: Vec<Option<Peer>>,
    /// My own segment (rings I send on, my control block). Dropped after `peers`.
    own_view: SegView,
    _own: Segment,
    /// Local indices of the senders that contacted me, in the order I learned of them.
    active: Vec<u32>,
    /// The bitmap words already folded into `active`.
    known: Vec<u64>,
    /// Where the next poll starts in `active` (round-robin fairness).
    next: usize,
    max_payload: usize,
    single_copy: bool,
    ticket: u32,
    /// My wake-up descriptor, when I sleep in `poll(2)` (I have sockets too), and whether
    /// every local peer holds a duplicate (so a long sleep cannot miss a packet).
    wake: Option<(OwnedFd, bool)>,
    /// What my activity word says (I am its only writer).
    activity: Activity,
    /// The start-up probe's round trip (ns), when it ran.
    probed: Option<u32>,
    /// How the doorbells' handshake fences on this node (agreed at start-up).
    fences: Fences,
}

/// A local peer's segment as attached during start-up, with my duplicate of its wake-up
/// descriptor.
type Attached = (Segment, SegView, Option<OwnedFd>);

/// How a sender wakes a peer: its wake-up descriptor when it sleeps in `poll(2)`, else the
/// futex in its control block.
struct WakePeer<'a>(Option<&'a OwnedFd>);

impl Park for WakePeer<'_> {
    fn wait(&self, word: &crate::sync::AtomicU32, expected: u32, timeout: Option<Duration>) {
        Futex.wait(word, expected, timeout);
    }
    #[inline]
    fn wake(&self, word: &crate::sync::AtomicU32, how: u32) {
        match self.0 {
            Some(fd) if how == IN_POLL => crate::sys::wake::signal(fd),
            _ => Futex.wake(word, how),
        }
    }
}

// SAFETY: all raw pointers point into segments this value owns (or maps), and the shared
// words are accessed atomically following the ring protocol; nothing is tied to a thread.
unsafe impl Send for ShmTransport {}

fn boot_err(detail: String) -> Error {
    Error::new(ErrorClass::Os, "initialize shared memory", detail)
}

/// Does any node host two or more ranks? (Then every rank takes part in the PMI fences,
/// even one alone on its node, so the collective calls match.)
fn any_node_shared(node_of: &[u32]) -> bool {
    let mut v = node_of.to_vec();
    v.sort_unstable();
    v.windows(2).any(|w| w[0] == w[1])
}

/// Runs the start-up probe of the node's cores ([`probe`]) when it applies: the job on one
/// node, no more local ranks than CPUs, `WEFT_COLL_MODEL_SHARED=auto`. Every local rank
/// calls it after attaching every peer; all get the same result.
fn probe_cores(
    boot: &Boot,
    tunables: &Tunables,
    my_local: usize,
    own: &SegView,
    attached: &[Option<Attached>],
) -> Option<u32> {
    let one_node = boot.node_of.iter().all(|&n| n == boot.node_of[0]);
    let nlocal = attached.len();
    if tunables.coll_model_shared.0.is_some()
        || !one_node
        || nlocal < 2
        || nlocal > crate::sys::online_cpus()
    {
        return None;
    }
    let word = |local: usize| -> &AtomicU64 {
        match &attached[local] {
            Some((_, view, _)) => &view.control().probe,
            None => &own.control().probe,
        }
    };
    match my_local {
        0 => probe::lead(word(0), word(1)),
        1 => probe::follow(word(0), word(1)),
        _ => probe::result(word(0)),
    }
}

fn create_own(geo: Geometry, wake_fd: RawFd, registered: bool) -> Result<Segment> {
    let seg = Segment::create(geo.total).map_err(|e| no_room(geo, e))?;
    // SAFETY: the mapping is geo.total bytes, page-aligned, and lives as long as `seg`.
    let view = unsafe { SegView::new(seg.as_ptr(), geo) };
    let ctl = seg.as_ptr() as *mut layout::Control;
    // SAFETY: nobody else knows the handle yet, so we are the only user of the fresh, zeroed
    // control block at offset 0 of the mapping (which covers it); the pointer comes from the
    // mapping itself, not from a shared reference. The plain fields are written before the
    // magic is published (Release).
    unsafe {
        let info = std::ptr::addr_of_mut!((*ctl).info.0);
        (*info).pid = crate::sys::pid();
        (*info).nlocal = geo.nlocal as u32;
        (*info).ring_size = geo.ring_size as u64;
        (*info).ring_stride = geo.ring_stride as u64;
        (*info).rings_offset = geo.rings_offset as u64;
        (*info).wake_fd = wake_fd;
        (*info).registered = registered as u32;
    }
    // SYNC: pairs with the Acquire load of magic in `attach`.
    view.control().info.magic.store(MAGIC, Ordering::Release);
    Ok(seg)
}

/// The error for a segment that could not be created: when /dev/shm is too small, how much
/// the node's ranks need and how much there is.
fn no_room(geo: Geometry, e: segment::CreateError) -> Error {
    let dir = segment::DIR;
    let mut why = format!(
        "cannot create this rank's shared-memory segment of {} bytes in {dir}: {e}",
        geo.total
    );
    if e.error.raw_os_error() == Some(libc::ENOSPC) {
        let n = geo.nlocal;
        let there = match segment::space() {
            Ok((free, total)) => format!("it has {free} bytes free of {total} bytes"),
            Err(e) => format!("statvfs {dir}: {e}"),
        };
        why += &format!(
            "; the {n} ranks on this node need {n} x {} = {} bytes of {dir} (each has one \
             ring of WEFT_SHM_RING_SIZE={} bytes to every rank of the node), and {there}; make \
             {dir} larger (docker run --shm-size), WEFT_SHM_RING_SIZE smaller, or put fewer \
             ranks on a node",
            geo.total,
            n * geo.total,
            geo.ring_size
        );
    }
    boot_err(why)
}

/// Maps a peer's segment and checks its control block.
fn attach(name: &str, nlocal: usize) -> Result<(Segment, SegView)> {
    let seg = Segment::open(name)
        .map_err(|e| boot_err(format!("cannot open peer segment {name}: {e}")))?;
    if seg.len() < 4096 {
        return Err(boot_err(format!("peer segment {name} is too small")));
    }
    // SAFETY: the control block lies in the first page, which is mapped.
    let ctl = unsafe { &*(seg.as_ptr() as *const layout::Control) };
    // SYNC: pairs with the Release store of magic in `create_own`.
    if ctl.info.magic.load(Ordering::Acquire) != MAGIC {
        return Err(boot_err(format!("peer segment {name} is not initialised")));
    }
    let ring_size = ctl.info.ring_size as usize;
    let geo = Geometry::new(nlocal, ring_size);
    if ctl.info.nlocal as usize != nlocal
        || !ring_size.is_power_of_two()
        || ring_size < 4096
        || geo.total > seg.len()
        || geo.rings_offset as u64 != ctl.info.rings_offset
    {
        return Err(boot_err(format!(
            "peer segment {name} has a different layout (nlocal {}, ring size {ring_size})",
            ctl.info.nlocal
        )));
    }
    // SAFETY: checked above that the mapping covers geo.total bytes; it lives with `seg`.
    let view = unsafe { SegView::new(seg.as_ptr(), geo) };
    Ok((seg, view))
}

/// A duplicate of a peer's wake-up descriptor, if it has one and the OS lets us take it
/// (pidfd_getfd needs Linux 5.6 and ptrace permission, as single copy does). Counted in the
/// peer's control block, so it knows whether everyone can wake it.
fn take_waker(view: &SegView) -> Option<OwnedFd> {
    let info = &view.control().info;
    if info.wake_fd < 0 {
        return None;
    }
    let fd = crate::sys::wake::take_from(info.pid, info.wake_fd).ok()?;
    // SYNC: pairs with the owner's Acquire load after the start-up fence.
    info.wakers.fetch_add(1, Ordering::Release);
    Some(fd)
}

impl ShmTransport {
    /// Creates this rank's segment, publishes it, attaches every local peer's. Collective.
    /// `in_poll`: this rank will sleep in `poll(2)` (it has sockets to watch too), so it
    /// makes a wake-up descriptor that its local peers signal instead of the futex.
    pub fn new(
        boot: &mut Boot,
        tunables: &Tunables,
        in_poll: bool,
    ) -> Result<Option<ShmTransport>> {
        let local = boot.local_ranks();
        if !any_node_shared(&boot.node_of) {
            return Ok(None);
        }
        if local.len() <= 1 {
            boot.pmi.fence()?;
            boot.pmi.fence()?;
            return Ok(None);
        }
        let ring_size = tunables.shm_ring_size;
        let geo = Geometry::new(local.len(), ring_size);
        // Without one (no eventfd), a sleep in poll(2) stays a short nap.
        let wake_fd = in_poll.then(crate::sys::wake::eventfd).and_then(|r| r.ok());
        let raw_wake = wake_fd.as_ref().map_or(-1, |f| f.as_raw_fd());
        // Heavy barriers only while each rank has a CPU: oversubscribed, ranks sleep often,
        // and each sleep's barrier would interrupt the CPUs that run the others.
        let registered = tunables.shm_membarrier
            && local.len() <= crate::sys::online_cpus()
            && crate::sys::membarrier::register().is_ok();
        let created = if !ring_size.is_power_of_two() || ring_size < 4096 {
            Err(Error::new(
                ErrorClass::Arg,
                "initialize shared memory",
                format!("WEFT_SHM_RING_SIZE={ring_size} is not a power of two >= 4096"),
            ))
        } else {
            create_own(geo, raw_wake, registered)
        };
        // Publish the handle, or a failure marker so peers fail instead of hanging. (PMI values
        // cannot carry the message's spaces; the failing rank reports its own error.)
        let value = match &created {
            Ok(seg) => seg.handle().to_owned(),
            Err(_) => "!failed".to_owned(),
        };
        let key = format!("shm-{}", boot.rank);
        boot.pmi.put(&key, &value)?;
        boot.pmi.fence()?;
        let attached = (|| -> Result<Vec<Option<Attached>>> {
            let mut v = Vec::with_capacity(local.len());
            for &r in &local {
                if r == boot.rank {
                    v.push(None);
                    continue;
                }
                let name = boot.pmi.get(&format!("shm-{r}"))?;
                if name.starts_with('!') {
                    return Err(boot_err(format!(
                        "rank {r} could not create its shared-memory segment (it reports why)"
                    )));
                }
                let (seg, view) = attach(&name, local.len())?;
                let waker = take_waker(&view);
                v.push(Some((seg, view, waker)));
            }
            Ok(v)
        })();
        // Everyone has opened (or failed to open) everything, and counted itself among my
        // wakers. (The segments have no names, so nothing is left to clean up, whoever dies.)
        let fenced = boot.pmi.fence();
        let own = created?;
        let attached = attached?;
        fenced?;
        // SAFETY: our own mapping is geo.total bytes and lives in `own`.
        let own_view = unsafe { SegView::new(own.as_ptr(), geo) };
        // SYNC: pairs with the peers' Release increments, made before the fence above.
        let wakers = own_view.control().info.wakers.load(Ordering::Acquire) as usize;
        let wake = wake_fd.map(|fd| (fd, wakers + 1 == local.len()));

        let my_local = local.iter().position(|&r| r == boot.rank).unwrap();
        let mut local_of = vec![NOT_LOCAL; boot.size as usize];
        for (i, &r) in local.iter().enumerate() {
            local_of[r as usize] = i as u32;
        }
        // Every rank reads the same flags (written before the first fence), so all agree.
        let everyone_registered = registered
            && attached
                .iter()
                .flatten()
                .all(|(_, view, _)| view.control().info.registered == 1);
        let fences = if everyone_registered {
            Fences::Asymmetric
        } else {
            Fences::Symmetric
        };
        let probed = probe_cores(boot, tunables, my_local, &own_view, &attached);
        let peers = attached
            .into_iter()
            .enumerate()
            .map(|(k, a)| {
                a.map(|(seg, view, waker)| {
                    let pid = view.control().info.pid;
                    let peer_ring = view.geometry().ring_size;
                    Peer {
                        // SAFETY: ring k of my segment is mine to produce into (only I write
                        // records there; peer k only consumes), and my segment outlives
                        // the Peer (field order of ShmTransport).
                        tx: unsafe { Producer::new(own_view.ring_base(k), ring_size) },
                        // SAFETY: ring `my_local` of peer k's segment is the one it produces
                        // for me; I am its only consumer; `seg` keeps it mapped.
                        rx: unsafe { Consumer::new(view.ring_base(my_local), peer_ring) },
                        _seg: seg,
                        view,
                        pid,
                        contacted: false,
                        waker,
                    }
                })
            })
            .collect();
        Ok(Some(ShmTransport {
            rank: boot.rank,
            my_local,
            local_of,
            peers,
            own_view,
            _own: own,
            active: Vec::new(),
            known: vec![0; geo.active_words()],
            next: 0,
            max_payload: ring::max_payload(ring_size).min(tunables.shm_max_packet),
            single_copy: tunables.shm_single_copy,
            ticket: 0,
            wake,
            activity: Activity::default(),
            probed,
            fences,
        }))
    }

    /// The round trip (ns) local ranks 0 and 1 measured at start-up between two lines
    /// written one side each ([`probe`]); `None`: not measured.
    pub fn probed_round_trip_ns(&self) -> Option<u32> {
        self.probed
    }

    /// How this node's wake-ups fence, as its ranks agreed at start-up.
    pub fn fences(&self) -> Fences {
        self.fences
    }

    /// Largest payload of one packet.
    pub fn max_payload(&self) -> usize {
        self.max_payload
    }

    #[inline]
    fn peer_mut(&mut self, peer: u32) -> &mut Peer {
        let l = self
            .local_of
            .get(peer as usize)
            .copied()
            .unwrap_or(NOT_LOCAL);
        match self.peers.get_mut(l as usize) {
            Some(Some(p)) => p,
            _ => panic!(
                "weft shm: rank {peer} is not a shared-memory peer of rank {}",
                self.rank
            ),
        }
    }

    /// See [`super::Fabric::try_send`]. Never blocks, allocates or makes a system call,
    /// except the futex wake when the receiver sleeps. Panics if `payload` is longer than
    /// [`ShmTransport::max_payload`] or `peer` is not reachable.
    #[inline]
    pub fn try_send(&mut self, peer: u32, hdr: &Header, payload: &[u8]) -> bool {
        assert!(payload.len() <= self.max_payload, "shm payload too long");
        let (me, fences) = (self.my_local, self.fences);
        let p = self.peer_mut(peer);
        if !p.contacted {
            p.view.mark_active(me);
            p.contacted = true;
        }
        if !p.tx.try_push(hdr, payload) {
            return false;
        }
        p.view.control().bell.ring(&WakePeer(p.waker.as_ref()), fences);
        true
    }

    /// Wakes those of `peers` that sleep: see [`super::Fabric::wake_all`]. One fence
    /// serves them all.
    #[inline]
    pub fn wake_all(&mut self, peers: impl Iterator<Item = u32>) {
        doorbell::ring_fence(self.fences);
        for peer in peers {
            let p = self.peer_mut(peer);
            p.view.control().bell.ring_fenced(&WakePeer(p.waker.as_ref()));
        }
    }

    /// Folds newly set bits of my active bitmap into the poll list.
    #[inline]
    fn refresh_active(&mut self) {
        for w in 0..self.known.len() {
            let now = self.own_view.active(w).load(Ordering::Relaxed);
            let new = now & !self.known[w];
            if new != 0 {
                self.known[w] = now;
                let mut bits = new;
                while bits != 0 {
                    let b = bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    let l = w * 64 + b;
                    if l < self.peers.len() && self.peers[l].is_some() {
                        self.active.push(l as u32);
                    }
                }
            }
        }
    }

    /// See [`super::Fabric::poll`].
    #[inline]
    pub fn poll<S: FnMut(&Header, &[u8])>(&mut self, sink: &mut S) -> usize {
        self.refresh_active();
        let n = self.active.len();
        if n == 0 {
            return 0;
        }
        let start = if self.next >= n { 0 } else { self.next };
        self.next = start + 1;
        let mut delivered = 0;
        for i in 0..n {
            let mut k = start + i;
            if k >= n {
                k -= n;
            }
            let l = self.active[k] as usize;
            if let Some(p) = self.peers[l].as_mut() {
                let before = p.rx.head();
                delivered += p.rx.drain(sink);
                // A sender blocked on this ring being full may be asleep: after freeing a
                // quarter ring or more, ring its doorbell. (Blocked means at least three
                // quarters of a ring were waiting, and one drain takes all that is there, so
                // the check cannot miss it; one-record drains stay fence-free.) The ring's
                // fence pairs with the fence in the sender's `prepare` (Dekker, as for data).
                if p.rx.head() - before >= p.rx.size() / 4 {
                    p.view.control().bell.ring(&WakePeer(p.waker.as_ref()), self.fences);
                }
            }
        }
        delivered
    }

    /// See [`super::Fabric::pull`]: `process_vm_readv` from the peer. `Unsupported` when
    /// `WEFT_SHM_SINGLE_COPY=0` or when the OS refuses (remembered: later pulls do not try).
    ///
    /// # Safety
    /// As for [`super::Fabric::pull`].
    pub unsafe fn pull(&mut self, peer: u32, remote: u64, dst: &mut [u8]) -> Result<(), PullError> {
        let len = dst.len();
        self.cross_copy(peer, remote, len, "process_vm_readv", |pid| {
            // SAFETY: `pid` is `peer`'s process; the caller's contract covers `remote`.
            unsafe { crate::sys::cma::read_from(pid, remote, dst) }
        })
    }

    /// See [`super::Fabric::push`].
    ///
    /// # Safety
    /// As for [`super::Fabric::push`].
    pub unsafe fn push(&mut self, peer: u32, remote: u64, src: &[u8]) -> Result<(), PullError> {
        self.cross_copy(peer, remote, src.len(), "process_vm_writev", |pid| {
            // SAFETY: `pid` is `peer`'s process; the caller's contract covers `remote`.
            unsafe { crate::sys::cma::write_to(pid, remote, src) }
        })
    }

    /// Runs a single-copy transfer with `peer`, remembering an OS refusal (later calls then
    /// return `Unsupported` without trying).
    fn cross_copy(
        &mut self,
        peer: u32,
        remote: u64,
        len: usize,
        what: &str,
        op: impl FnOnce(u32) -> Result<(), crate::sys::cma::CmaError>,
    ) -> Result<(), PullError> {
        if !self.single_copy {
            return Err(PullError::Unsupported);
        }
        let pid = self.peer_mut(peer).pid;
        match op(pid) {
            Ok(()) => Ok(()),
            Err(crate::sys::cma::CmaError::Unsupported(_)) => {
                self.single_copy = false;
                Err(PullError::Unsupported)
            }
            Err(crate::sys::cma::CmaError::Failed(e)) => Err(PullError::Failed(Error::os(
                "single-copy transfer",
                format_args!("{what} of {len} bytes at {remote:#x} with rank {peer} (pid {pid})"),
                e,
            ))),
        }
    }

    /// See [`super::Fabric::prepare_sleep`].
    #[inline]
    pub fn prepare_sleep(&mut self) {
        let how = if self.wake.is_some() {
            IN_POLL
        } else {
            ON_FUTEX
        };
        self.ticket = self.own_view.control().bell.prepare(how, self.fences);
    }

    /// The wake-up descriptor to watch while sleeping in `poll(2)` after
    /// [`ShmTransport::prepare_sleep`], and whether every local peer signals it (otherwise
    /// the sleep must stay short: some senders only know the futex).
    pub fn wake_fd(&self) -> Option<(RawFd, bool)> {
        self.wake.as_ref().map(|(fd, all)| (fd.as_raw_fd(), *all))
    }

    /// Ends a sleep in `poll(2)`: resets the wake-up descriptor, if there is one, and
    /// withdraws the announcement.
    pub fn end_polled_sleep(&mut self) {
        if let Some((fd, _)) = &self.wake {
            crate::sys::wake::drain(fd);
        }
        self.own_view.control().bell.cancel();
    }

    /// See [`super::Fabric::sleep`]: on the futex, or, for a rank that sleeps in `poll(2)`,
    /// on its wake-up descriptor alone (a rank with sockets watches them too, through
    /// [`ShmTransport::wake_fd`] and [`ShmTransport::end_polled_sleep`]).
    pub fn sleep(&mut self, timeout: Duration) {
        match &self.wake {
            Some((fd, _)) => {
                let mut fds = [crate::sys::net::poll_entry(
                    fd.as_raw_fd(),
                    crate::sys::net::POLLIN,
                )];
                let _ = crate::sys::net::poll(&mut fds, timeout);
                self.end_polled_sleep();
            }
            None => self
                .own_view
                .control()
                .bell
                .sleep(self.ticket, &Futex, Some(timeout)),
        }
    }

    /// See [`super::Fabric::cancel_sleep`].
    #[inline]
    pub fn cancel_sleep(&mut self) {
        self.own_view.control().bell.cancel();
    }

    /// See [`super::Fabric::note_waiting`]: publishes whether this rank gives up its CPU,
    /// the CPU it is on, and its stretch on it.
    pub fn note_waiting(&mut self, waiting: bool, now_us: u32) {
        let a = &mut self.activity;
        if waiting {
            a.len_us = now_us.wrapping_sub(a.since_us);
        } else {
            a.since_us = now_us;
            a.len_us = 0;
        }
        a.waiting = waiting;
        a.cpu = crate::sys::current_cpu();
        self.publish_activity();
    }

    fn publish_activity(&self) {
        // Relaxed: advisory, read by the other ranks' wait policy only; nothing else is
        // published with it (no Acquire pairs with it).
        self.own_view
            .control()
            .activity
            .store(self.activity.encode(), Ordering::Relaxed);
    }

    /// See [`super::Fabric::sibling_time_here`].
    pub fn sibling_time_here(&self, from_us: u32, to_us: u32) -> Option<u32> {
        let here = crate::sys::current_cpu()?;
        Some(
            self.peers
                .iter()
                .flatten()
                .map(|p| {
                    // Relaxed: an advisory word (see `publish_activity`).
                    let a = Activity::decode(p.view.control().activity.load(Ordering::Relaxed));
                    a.overlap_on(here, from_us, to_us)
                })
                .fold(0u32, u32::saturating_add),
        )
    }
}
