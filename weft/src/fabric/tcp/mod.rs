//! TCP transport between ranks on different hosts (or any two ranks, with
//! `WEFT_TRANSPORTS=tcp`).
//!
//! Each rank listens on one address (see [`addr`]) and publishes it through PMI (a peer
//! reads it when it first dials this rank, so start-up makes no gets per peer), with the
//! per-job secret (rank 0 takes it from the process manager's key-value space, where `weft
//! run` puts one, or makes one). Connections are made on first contact (`WEFT_CONNECT=lazy`,
//! Sun MPI's default) or with every peer during initialize (`full`), and every connection is
//! authenticated both ways ([`auth`]) before a byte of traffic is read from it.
//!
//! Intruders: anyone who can reach the listener can connect, so a connection dialled in costs
//! little until it proves itself: it has `WEFT_TCP_HANDSHAKE_TIMEOUT_MS`, one address holds
//! at most 32 (or the job size) waiting connections and all at most 1,024, the oldest making
//! room for a new one, and drops are logged at a bounded rate.
//!
//! Simultaneous connects: when two ranks dial each other at once, the connection dialled by
//! the lower rank is kept. An acceptor decides only after the dialer proved itself: it keeps
//! the new connection unless it already has one, or it is dialling that peer itself and its
//! own rank is the lower. Packets queued meanwhile wait in the per-peer queue, which
//! outlives connection attempts.
//!
//! Failures: a connection that ends without the peer's `Bye`, a socket error, or a peer not
//! reachable for `WEFT_TCP_TIMEOUT` (unacknowledged data or failed keepalives, or no
//! connection made) is fatal for the job: [`TcpTransport::take_fatal`] reports which peer,
//! where, and why.
//!
//! Waiting: `poll(2)` is level-triggered, so sleeping in it after a last check cannot miss
//! an arrival (no handshake as for shared memory is needed).

pub mod addr;
pub mod auth;
pub mod conn;
pub mod handshake;
#[cfg(test)]
mod tests;

use self::auth::SECRET_LEN;
use self::conn::{packet_head, write_parts, Discard, ReadOutcome, RxBuf, TxQueue};
use self::handshake::{Handshake, Outcome};
use super::{Header, Sink};
use crate::boot::{Boot, SharedPmi};
use crate::error::{Error, ErrorClass, Result};
use crate::sys::net::{self, PollFd, POLLIN, POLLOUT};
use crate::sys::log_limit::LogLimit;
use crate::tunables::Tunables;
use std::io::Write as _;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// Initial receive buffer of a connection (grown when a frame that is not placed directly
/// needs more).
const RX_BUFFER: usize = 128 << 10;

/// With a single quiet connection, every this many progress calls still go through
/// `poll(2)` over everything (the listener for peers dialling in, and writability); the
/// others read the connection directly.
const FULL_POLL_EVERY: u32 = 16;

/// Connections dialled in that have not proved themselves yet, at most: beyond, the oldest is
/// dropped for the new one (real peers prove themselves within a round trip, so they are never
/// the oldest for long; idle intruders are).
const MAX_PENDING_IN: usize = 1024;

/// Connections from one address that have not proved themselves yet, at most (or the job
/// size, when larger: every peer may dial from one host at once); beyond, that address's
/// oldest is dropped.
const PER_SOURCE_MIN: usize = 32;

/// Dropped intruders logged per [`DROP_LOG_WINDOW`], at most; the rest are counted and the
/// count reported with the next line.
const DROP_LOG_BURST: u32 = 10;
const DROP_LOG_WINDOW: Duration = Duration::from_secs(10);

/// Key under which the per-job secret travels in the process manager's key-value space.
pub const SECRET_KEY: &str = "weft-job-secret";

/// At rank 0 (elsewhere nothing): finds the job secret in the key-value space (`weft run`
/// puts one there, a spawning job's parents preput theirs), or makes one and puts it there,
/// and keeps a copy in `boot.secret`. The other ranks can read it after the next fence.
pub fn ensure_job_secret(boot: &mut Boot) -> Result<()> {
    if boot.rank != 0 || boot.secret.is_some() {
        return Ok(());
    }
    let found = match crate::boot::spawned() {
        true => boot.pmi.get_preput(SECRET_KEY),
        false => boot.pmi.get(SECRET_KEY),
    };
    let found = found.ok().and_then(|v| auth::secret_from_hex(&v));
    let secret = match found {
        Some(s) => s,
        None => {
            let mut s = [0u8; SECRET_LEN];
            crate::sys::random_bytes(&mut s).map_err(|e| Error::os("initialize", "getrandom", e))?;
            boot.pmi.put(SECRET_KEY, &auth::secret_to_hex(&s))?;
            s
        }
    };
    boot.secret = Some(secret);
    Ok(())
}

/// The job secret: rank 0's copy, or the key-value space's (after the fence that follows
/// [`ensure_job_secret`]).
pub fn job_secret(boot: &mut Boot) -> Result<[u8; SECRET_LEN]> {
    if let Some(s) = boot.secret {
        return Ok(s);
    }
    let v = boot.pmi.get(SECRET_KEY)?;
    let s = auth::secret_from_hex(&v).ok_or_else(|| {
        boot_err(format!("the job secret in the key-value space ({SECRET_KEY}) is not 64 hex digits"))
    })?;
    boot.secret = Some(s);
    Ok(s)
}

fn addr_key(rank: u32) -> String {
    format!("weft-tcp-{rank}")
}

/// Settings of the transport.
#[derive(Clone, Debug)]
pub struct TcpConfig {
    /// Largest payload of one frame.
    pub max_payload: usize,
    /// Largest message sent eagerly.
    pub eager_limit: usize,
    /// Socket buffer size (0: kernel autotuning).
    pub buffer: usize,
    /// How long a peer may be unreachable.
    pub timeout: Duration,
    /// How long a connection dialled in has to prove it belongs to the job.
    pub handshake_timeout: Duration,
    /// Congestion-control algorithm of every connection (`None`: the kernel's default).
    pub congestion: Option<String>,
    /// Most unsent data a connection queues in the kernel (`TCP_NOTSENT_LOWAT`; 0: the
    /// system's).
    pub notsent_lowat: usize,
}

impl TcpConfig {
    /// The settings from the tunables.
    pub fn from_tunables(t: &Tunables) -> Self {
        TcpConfig {
            max_payload: t.tcp_max_packet.clamp(1024, 16 << 20),
            eager_limit: t.tcp_eager_limit,
            buffer: t.tcp_buffer,
            timeout: Duration::from_secs(t.tcp_timeout_s.max(1)),
            handshake_timeout: Duration::from_millis(t.tcp_handshake_timeout_ms.max(10)),
            congestion: match t.tcp_congestion.as_str() {
                "" | "system" => None,
                name => Some(name.to_string()),
            },
            notsent_lowat: t.tcp_notsent_lowat,
        }
    }
}

/// An established connection.
struct Conn {
    stream: TcpStream,
    rx: RxBuf,
    /// The peer said goodbye and closed its side.
    peer_done: bool,
    /// We said goodbye.
    bye_sent: bool,
}

/// What offering a packet to a socket came to.
enum Written {
    /// It is all out.
    All,
    /// It is taken, but the socket took only part of it: the rest waits in the per-peer
    /// queue (the socket is full for now).
    Queued,
    /// The socket took part of a zero-copy frame: it must be offered again (it is full for
    /// now).
    Short,
    /// Another packet is half out; this one waits (nothing was written).
    Busy,
}

/// A rendezvous data frame the socket took in part, whose payload is not copied (see
/// [`TcpTransport::try_send`]).
struct Partial {
    /// Its frame head: the packet offered again must have this head (a data frame's header
    /// names the receiver's request and the offset, which no other frame in flight to this
    /// peer shares), and this payload address and length.
    head: [u8; conn::FRAME_HEAD],
    payload_at: usize,
    len: usize,
    /// Bytes of head and payload written so far.
    done: usize,
}

/// Whether the rest of a half-written frame stays in the caller's buffer rather than being
/// copied: only rendezvous data, which is large and whose header is unique while it is in
/// flight. Every other frame is small (at most the eager limit) and the engine may offer
/// other packets before it offers a refused one again, so its rest is copied.
fn zero_copy(hdr: &Header) -> bool {
    hdr.kind == super::PacketKind::Data as u8
}

/// Per-peer state.
#[derive(Default)]
struct Slot {
    conn: Option<Conn>,
    /// A copy of the packet queued before the connection was made (outlives connection
    /// attempts; the new connection flushes it).
    tx: TxQueue,
    /// A packet partly written.
    partial: Option<Partial>,
    /// The socket took less than offered: wait until poll(2) says it is writable.
    full: bool,
    /// An outgoing handshake with this peer is in progress.
    dialing: bool,
    /// When contact was first wanted while not connected (the connect timeout runs from it).
    wanted: Option<Instant>,
    /// When to dial again after a failed attempt.
    retry_at: Option<Instant>,
    /// Why the last attempt failed.
    last_error: Option<String>,
}

/// Log lines about dropped connections, rate-limited: anyone who can connect can make them.
struct DropLog(LogLimit);

impl DropLog {
    fn new() -> Self {
        DropLog(LogLimit::new(DROP_LOG_BURST, DROP_LOG_WINDOW))
    }

    fn note(&mut self, rank: u32, from: SocketAddr, why: &str) {
        if let Some(more) = self.0.admit() {
            let more = LogLimit::more_note(more);
            eprintln!("weft: rank {rank}: dropped a TCP connection from {from}: {why}{more}");
        }
    }

    /// Reports the drops not logged yet.
    fn flush(&mut self, rank: u32) {
        let more = self.0.take_suppressed();
        if more > 0 {
            eprintln!(
                "weft: rank {rank}: dropped {more} more TCP connections that did not prove they \
                 belong to the job (not logged one by one)"
            );
        }
    }
}

/// A process of another job this rank talks to (see [`TcpTransport::add_remote`]).
#[derive(Clone, Copy, Debug)]
struct Remote {
    /// Its universe rank.
    uni: u32,
    /// Its world rank in its own job: the source its packets carry.
    wire: u32,
    /// Its job's key (`comm::dynamic`), to tell two jobs that got overlapping universe ranks.
    job: u64,
}

/// The TCP transport of one rank.
pub struct TcpTransport {
    rank: u32,
    size: u32,
    /// This job's first universe rank (see [`crate::boot::universe_base`]): connections
    /// name both ends by universe rank, so that processes of jobs started by one launcher
    /// (spawned jobs) tell each other apart.
    base: u32,
    /// Peers from number `size` on: processes of other jobs, in the order they were added.
    remotes: Vec<Remote>,
    /// Universe rank → peer number, for `remotes`.
    remote_ids: std::collections::HashMap<u32, u32>,
    listener: TcpListener,
    local: SocketAddr,
    /// Peers' listening addresses, read from the key-value space on first need.
    addrs: Vec<PeerAddr>,
    /// For reading world peers' addresses (`None`: no world peer is reached by TCP).
    pmi: Option<SharedPmi>,
    secret: [u8; SECRET_LEN],
    cfg: TcpConfig,
    slots: Vec<Slot>,
    /// Connections being set up, both directions.
    handshakes: Vec<Handshake>,
    /// Peers with an established connection, in poll order.
    up: Vec<u32>,
    /// Peers wanted but not connected yet (timers run for them).
    waiting: Vec<u32>,
    fds: Vec<PollFd>,
    fatal: Option<String>,
    /// Progress calls so far (every [`FULL_POLL_EVERY`]th one polls everything).
    polls: u32,
    dropped: DropLog,
    /// Whether the refusal of `WEFT_TCP_CONGESTION` was reported already.
    congestion_warned: bool,
}

/// Where a peer listens, as far as this rank knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PeerAddr {
    /// Reached another way (itself, or shared memory).
    NotTcp,
    /// A TCP peer whose address was not needed yet.
    Unknown,
    /// Not read either, but the peer dialled from this host (for messages).
    Seen(std::net::IpAddr),
    Known(SocketAddr),
}

fn boot_err(detail: String) -> Error {
    Error::new(ErrorClass::Os, "initialize TCP", detail)
}

/// Opens a nonblocking listener where `WEFT_TCP_ADDR`/`WEFT_TCP_IF` say (the loopback
/// address when the whole job is on one node); returns it and the address to publish.
pub fn listen(t: &Tunables, one_node: bool) -> std::result::Result<(TcpListener, SocketAddr), String> {
    addr::choose(&t.tcp_addr, &t.tcp_if, one_node).and_then(|c| {
        let l =
            TcpListener::bind((c.bind, 0)).map_err(|e| format!("cannot listen on {}: {e}", c.bind))?;
        l.set_nonblocking(true)
            .map_err(|e| format!("cannot make the listener nonblocking: {e}"))?;
        net::widen_listen_backlog(&l).map_err(|e| format!("cannot widen the listen backlog: {e}"))?;
        // Accepted connections inherit the listener's buffer sizes, in time for the
        // handshake that fixes the receive window's scale.
        if t.tcp_buffer > 0 {
            net::set_buffer_sizes(&l, t.tcp_buffer)
                .map_err(|e| format!("cannot set the socket buffer sizes: {e}"))?;
        }
        let port = l.local_addr().map_err(|e| e.to_string())?.port();
        Ok((l, SocketAddr::new(c.publish, port)))
    })
}

impl TcpTransport {
    /// Opens the listener and publishes its address (collective over the world: every rank
    /// calls it when any pair of ranks uses TCP). Peers' addresses are read on first dial,
    /// through the process-manager client this shares with `boot`. `tcp_peer[r]`: rank
    /// `r` is reached through this transport.
    pub fn new(boot: &mut Boot, t: &Tunables, tcp_peer: &[bool]) -> Result<Self> {
        let one_node = boot.node_of.iter().all(|&n| n == boot.node_of[0]);
        let bound = listen(t, one_node);
        let key = addr_key(boot.rank);
        match &bound {
            Ok((_, a)) => boot.pmi.put(&key, &a.to_string())?,
            Err(_) => boot.pmi.put(&key, "!failed")?,
        }
        ensure_job_secret(boot)?;
        boot.pmi.fence()?;
        let (listener, local) = bound.map_err(boot_err)?;
        let secret = job_secret(boot)?;
        // Addresses are read on first contact (a dial), not here: a job in which each rank
        // talks to a few peers makes a few gets per rank instead of N.
        let addrs = (0..boot.size)
            .map(|r| match tcp_peer.get(r as usize) {
                Some(true) if r != boot.rank => PeerAddr::Unknown,
                _ => PeerAddr::NotTcp,
            })
            .collect();
        let pmi = Some(boot.share_pmi());
        Ok(Self::assemble(boot, (listener, local), addrs, pmi, secret, t))
    }

    /// A transport for processes of other jobs only, made when the first of them is added
    /// (no world peer is reached through it, so nothing is published): not collective.
    /// `secret` is the universe's (what `weft run` serves every job it starts).
    pub fn for_other_jobs(boot: &Boot, t: &Tunables, secret: [u8; SECRET_LEN]) -> Result<Self> {
        let one_node = boot.node_of.iter().all(|&n| n == boot.node_of[0]);
        let bound = listen(t, one_node).map_err(boot_err)?;
        let addrs = vec![PeerAddr::NotTcp; boot.size as usize];
        Ok(Self::assemble(boot, bound, addrs, None, secret, t))
    }

    fn assemble(
        boot: &Boot,
        (listener, local): (TcpListener, SocketAddr),
        addrs: Vec<PeerAddr>,
        pmi: Option<SharedPmi>,
        secret: [u8; SECRET_LEN],
        t: &Tunables,
    ) -> Self {
        let mut slots = Vec::with_capacity(boot.size as usize);
        slots.resize_with(boot.size as usize, Slot::default);
        TcpTransport {
            rank: boot.rank,
            size: boot.size,
            base: boot.universe_base,
            remotes: Vec::new(),
            remote_ids: Default::default(),
            listener,
            local,
            addrs,
            pmi,
            secret,
            cfg: TcpConfig::from_tunables(t),
            slots,
            handshakes: Vec::new(),
            up: Vec::new(),
            waiting: Vec::new(),
            fds: Vec::new(),
            fatal: None,
            polls: 0,
            dropped: DropLog::new(),
            congestion_warned: false,
        }
    }

    /// Adds the process of another job with universe rank `uni`, world rank `wire` in its
    /// job, listening at `addr`, as the next peer number (or returns the number it has
    /// already). Connections to it are made on first contact, as with any peer.
    pub fn add_remote(&mut self, uni: u32, wire: u32, job: u64, addr: SocketAddr) -> Result<u32> {
        if let Some(&id) = self.remote_ids.get(&uni) {
            let known = &self.remotes[(id - self.size) as usize];
            if known.job != job || known.wire != wire {
                return Err(Error::new(
                    ErrorClass::Spawn,
                    "join another job",
                    format!(
                        "universe rank {uni} names two processes (rank {} of one job, rank \
                         {wire} of another): two jobs spawned under a process manager other \
                         than weft run got overlapping universe ranks; start the job with weft \
                         run",
                        known.wire
                    ),
                ));
            }
            return Ok(id);
        }
        let id = self.size + self.remotes.len() as u32;
        self.remotes.push(Remote { uni, wire, job });
        self.remote_ids.insert(uni, id);
        self.addrs.push(PeerAddr::Known(addr));
        self.slots.push(Slot::default());
        Ok(id)
    }

    /// This rank's universe rank.
    pub fn universe_rank(&self) -> u32 {
        self.base + self.rank
    }

    /// The universe rank of peer number `peer`.
    pub fn uni_of(&self, peer: u32) -> u32 {
        match peer.checked_sub(self.size) {
            None => self.base + peer,
            Some(k) => self.remotes[k as usize].uni,
        }
    }

    /// The source packets from peer number `peer` carry (its world rank in its job).
    fn wire_of(&self, peer: u32) -> u32 {
        match peer.checked_sub(self.size) {
            None => peer,
            Some(k) => self.remotes[k as usize].wire,
        }
    }

    /// The address this rank listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Largest payload one packet carries.
    pub fn max_payload(&self) -> usize {
        self.cfg.max_payload
    }

    /// Largest message sent eagerly.
    pub fn eager_limit(&self) -> usize {
        self.cfg.eager_limit
    }

    /// Number of established connections.
    pub fn connections(&self) -> usize {
        self.up.len()
    }

    /// A fatal failure, once: which peer, where, why.
    pub fn take_fatal(&mut self) -> Option<String> {
        self.fatal.take()
    }

    /// Whether anything is in flight that needs frequent attention (handshakes, timers,
    /// queued output).
    pub fn busy(&self) -> bool {
        !self.handshakes.is_empty()
            || !self.waiting.is_empty()
            || self.up.iter().any(|&p| {
                let s = &self.slots[p as usize];
                !s.tx.is_empty() || s.partial.is_some()
            })
    }

    fn where_is(&self, peer: u32) -> String {
        let who = match peer.checked_sub(self.size) {
            None => format!("rank {peer}"),
            Some(k) => {
                let r = self.remotes[k as usize];
                format!("rank {} of another job (universe rank {})", r.wire, r.uni)
            }
        };
        match self.addrs.get(peer as usize) {
            Some(PeerAddr::Known(a)) => format!("{who} at {a}"),
            Some(PeerAddr::Seen(ip)) => format!("{who} at {ip}"),
            _ => who,
        }
    }

    /// Where `peer` listens: known, or read from the key-value space now (once).
    fn address_of(&mut self, peer: u32) -> std::result::Result<SocketAddr, String> {
        match self.addrs.get(peer as usize) {
            Some(PeerAddr::Known(a)) => return Ok(*a),
            Some(PeerAddr::Unknown | PeerAddr::Seen(_)) => {}
            _ => return Err("it is not a TCP peer (internal routing error)".into()),
        }
        let Some(pmi) = &self.pmi else {
            return Err("its address is unknown (internal routing error)".into());
        };
        let v = pmi
            .borrow_mut()
            .get(&addr_key(peer))
            .map_err(|e| format!("its address is not in the key-value space: {e}"))?;
        if v == "!failed" {
            return Err("it could not open its TCP listener (it reports why)".into());
        }
        let a = v
            .parse()
            .map_err(|_| format!("it published a bad TCP address {v:?}"))?;
        self.addrs[peer as usize] = PeerAddr::Known(a);
        Ok(a)
    }

    fn fail(&mut self, peer: u32, what: &str, why: impl std::fmt::Display) {
        if self.fatal.is_none() {
            self.fatal = Some(format!(
                "weft: rank {}: {what} {}: {why}",
                self.rank,
                self.where_is(peer)
            ));
        }
    }

    /// Sends one packet to `peer`, or refuses it (`false`) when the connection has no room.
    ///
    /// A frame half out is always finished before any other frame to that peer. The rest of
    /// a small frame the socket takes only in part is copied into the per-peer queue and the
    /// packet counts as sent (the engine may offer other packets before it offers a refused
    /// one again, so nothing else could tell the rest of a header-only packet from another).
    /// A rendezvous data frame is not copied: its head is kept, the call returns `false`,
    /// and the engine offers the same frame again (the front of its send queue, named by
    /// the frame's header), whose payload is then written from where the socket stopped;
    /// until then other packets to that peer are refused. The first packet to a peer not
    /// yet connected is copied too, into the queue that the new connection flushes.
    pub fn try_send(&mut self, peer: u32, hdr: &Header, payload: &[u8]) -> bool {
        let slot = &mut self.slots[peer as usize];
        let Some(c) = slot.conn.as_mut() else {
            if !slot.tx.is_empty() {
                return false;
            }
            let head = packet_head(hdr, payload.len());
            slot.tx.push_from(&[&head, payload], 0);
            self.want(peer);
            return true;
        };
        if c.peer_done {
            self.fail(peer, "cannot send to", "it has already finalized");
            return false;
        }
        if slot.full {
            // Wait for poll(2) to report room: writing each sliver the socket frees would
            // send many small segments.
            return false;
        }
        let result = if !slot.tx.is_empty() {
            match slot.tx.flush(&mut c.stream) {
                Ok(true) => Self::write_packet(c, &mut slot.tx, &mut slot.partial, hdr, payload),
                Ok(false) => Ok(Written::Short),
                Err(e) => Err(e),
            }
        } else {
            Self::write_packet(c, &mut slot.tx, &mut slot.partial, hdr, payload)
        };
        match result {
            Ok(Written::All) => true,
            Ok(Written::Queued) => {
                slot.full = true;
                true
            }
            Ok(Written::Short) => {
                slot.full = true;
                false
            }
            Ok(Written::Busy) => false,
            Err(e) => {
                self.fail(peer, "lost its connection to", e);
                false
            }
        }
    }

    /// Writes a packet, or the rest of the data frame the socket took in part.
    fn write_packet(
        c: &mut Conn,
        tx: &mut TxQueue,
        partial: &mut Option<Partial>,
        hdr: &Header,
        payload: &[u8],
    ) -> std::io::Result<Written> {
        let total = conn::FRAME_HEAD + payload.len();
        if let Some(mut p) = partial.take() {
            let same = p.payload_at == payload.as_ptr() as usize
                && p.len == payload.len()
                && p.head == packet_head(hdr, payload.len());
            if !same {
                // Another packet while a data frame is half out: it waits its turn.
                *partial = Some(p);
                return Ok(Written::Busy);
            }
            let n = if p.done < conn::FRAME_HEAD {
                write_parts(&mut c.stream, &[&p.head[p.done..], payload])?
            } else {
                write_parts(&mut c.stream, &[&payload[p.done - conn::FRAME_HEAD..]])?
            };
            p.done += n;
            if p.done == total {
                return Ok(Written::All);
            }
            *partial = Some(p);
            return Ok(Written::Short);
        }
        let head = packet_head(hdr, payload.len());
        let n = write_parts(&mut c.stream, &[&head, payload])?;
        if n == total {
            return Ok(Written::All);
        }
        if zero_copy(hdr) {
            *partial = Some(Partial {
                head,
                payload_at: payload.as_ptr() as usize,
                len: payload.len(),
                done: n,
            });
            return Ok(Written::Short);
        }
        // The queue's buffer is reused, so this allocates only until it has grown to the
        // largest small frame.
        tx.push_from(&[&head, payload], n);
        Ok(Written::Queued)
    }

    /// Notes that `peer` is wanted and dials it if nothing is under way.
    fn want(&mut self, peer: u32) {
        let slot = &mut self.slots[peer as usize];
        if slot.conn.is_some() || slot.dialing {
            return;
        }
        if slot.wanted.is_none() {
            slot.wanted = Some(Instant::now());
            self.waiting.push(peer);
        }
        self.dial(peer);
    }

    fn dial(&mut self, peer: u32) {
        let addr = match self.address_of(peer) {
            Ok(a) => a,
            Err(why) => {
                self.fail(peer, "cannot dial", why);
                return;
            }
        };
        let uni = self.uni_of(peer);
        let slot = &mut self.slots[peer as usize];
        slot.retry_at = None;
        match Handshake::connect(addr, (peer, uni), self.cfg.buffer) {
            Ok(h) => {
                slot.dialing = true;
                self.handshakes.push(h);
            }
            Err(e) => {
                slot.last_error = Some(e.to_string());
                slot.retry_at = Some(Instant::now() + Duration::from_millis(100));
            }
        }
    }

    /// Fills `self.fds`: the listener, then every handshake, then every connection.
    fn build_fds(&mut self) {
        self.fds.clear();
        self.fds
            .push(net::poll_entry(self.listener.as_raw_fd(), POLLIN));
        for h in &self.handshakes {
            let ev = if h.wants_write() { POLLOUT } else { POLLIN };
            self.fds.push(net::poll_entry(h.stream.as_raw_fd(), ev));
        }
        for &p in &self.up {
            let s = &self.slots[p as usize];
            let c = s.conn.as_ref().expect("up peers have a connection");
            let mut ev = if c.peer_done { 0 } else { POLLIN };
            if !s.tx.is_empty() || s.partial.is_some() || s.full {
                ev |= POLLOUT;
            }
            self.fds.push(net::poll_entry(c.stream.as_raw_fd(), ev));
        }
    }

    /// Delivers every packet that has arrived to `sink`, writes queued output, and moves
    /// connection set-up along. Returns how many packets were delivered.
    ///
    /// With one connection and nothing else under way (the common case of two ranks, one per
    /// host), most calls look at that connection alone: `poll(2)` on its socket, then a read
    /// only when data is there. Not a read straight away: a read takes the socket's lock, and
    /// a segment arriving meanwhile waits in the socket's backlog until the lock is released,
    /// after the read has already answered "nothing yet", so a rank spinning on reads sees
    /// each arrival one spin late; `poll(2)` looks without the lock (measured between network
    /// namespaces: 4 KiB one way 7.8-8.2 µs against 9.1-10.9 spinning on reads).
    pub fn poll<S: Sink>(&mut self, sink: &mut S) -> usize {
        self.polls = self.polls.wrapping_add(1);
        if !self.polls.is_multiple_of(FULL_POLL_EVERY) {
            if let Some(peer) = self.sole_quiet_connection() {
                return self.read_if_readable(peer, sink);
            }
        }
        self.build_fds();
        match net::poll(&mut self.fds, Duration::ZERO) {
            Ok(0) if self.waiting.is_empty() && self.handshakes.is_empty() => return 0,
            Ok(_) => {}
            Err(e) => {
                self.fatal
                    .get_or_insert_with(|| format!("weft: rank {}: poll failed: {e}", self.rank));
                return 0;
            }
        }
        self.service(Some(sink))
    }

    /// The peer of the only connection, when nothing else needs `poll(2)`: no connection
    /// being made or wanted, no output waiting for room, and the peer still sending.
    fn sole_quiet_connection(&self) -> Option<u32> {
        let [peer] = self.up[..] else { return None };
        if !self.handshakes.is_empty() || !self.waiting.is_empty() {
            return None;
        }
        let s = &self.slots[peer as usize];
        let c = s.conn.as_ref()?;
        let quiet = s.tx.is_empty() && s.partial.is_none() && !s.full && !c.peer_done;
        quiet.then_some(peer)
    }

    /// [`TcpTransport::read_conn`] when `poll(2)` says the connection to `peer` has data (or
    /// an error or hang-up to report).
    fn read_if_readable<S: Sink>(&mut self, peer: u32, sink: &mut S) -> usize {
        let c = self.slots[peer as usize]
            .conn
            .as_ref()
            .expect("up peers have a connection");
        let mut one = [net::poll_entry(c.stream.as_raw_fd(), POLLIN)];
        match net::poll(&mut one, Duration::ZERO) {
            Ok(0) => 0,
            // Readable, hung up or failed: the read says which.
            _ => self.read_conn(peer, sink),
        }
    }

    /// Reads what the connection to `peer` has and delivers it; a failure is recorded as
    /// fatal. Returns how many packets were delivered.
    fn read_conn<S: Sink>(&mut self, peer: u32, sink: &mut S) -> usize {
        let wire = self.wire_of(peer);
        let c = self.slots[peer as usize]
            .conn
            .as_mut()
            .expect("up peers have a connection");
        match c.rx.read_from(&mut c.stream, wire, sink) {
            Ok((n, ReadOutcome::Drained)) => n,
            Ok((n, ReadOutcome::Closed)) => {
                c.peer_done = true;
                self.answer_goodbye(peer);
                n
            }
            Err(e) => {
                self.fail(peer, "lost its connection to", e);
                0
            }
        }
    }

    /// `peer` said goodbye (it finalized: it sends nothing more and takes nothing more), so
    /// say ours now, as [`TcpTransport::close`] would at finalize, once what is queued for it
    /// is out: its own close then ends without waiting for this rank's finalize (a process of
    /// another job, say, that finalized long before this one).
    fn answer_goodbye(&mut self, peer: u32) {
        let slot = &mut self.slots[peer as usize];
        let Some(c) = slot.conn.as_mut() else { return };
        if c.bye_sent || slot.partial.is_some() {
            return;
        }
        if let Ok(true) = slot.tx.flush(&mut c.stream) {
            let _ = c.stream.write_all(&conn::bye_frame());
            let _ = c.stream.shutdown(Shutdown::Write);
            c.bye_sent = true;
        }
    }

    /// Handles what the last `poll(2)` reported (in `self.fds`), and timers. With no sink,
    /// established connections are not read (while connecting everyone at start-up).
    fn service<S: Sink>(&mut self, mut sink: Option<&mut S>) -> usize {
        let nh = self.handshakes.len();
        let mut delivered = 0;
        // Established connections.
        let mut i = 0;
        while i < self.up.len() {
            let re = self.fds[1 + nh + i].revents;
            let p = self.up[i];
            i += 1;
            if re == 0 {
                continue;
            }
            let slot = &mut self.slots[p as usize];
            let c = slot.conn.as_mut().expect("up peers have a connection");
            if re & POLLOUT != 0 {
                slot.full = false;
                if let Err(e) = slot.tx.flush(&mut c.stream) {
                    self.fail(p, "lost its connection to", e);
                    continue;
                }
            }
            let Some(sink) = sink.as_deref_mut() else {
                continue;
            };
            if c.peer_done || re & !POLLOUT == 0 {
                continue;
            }
            delivered += self.read_conn(p, sink);
        }
        // Connections being set up, last first so removals do not disturb the rest.
        for k in (0..nh).rev() {
            let re = self.fds[1 + k].revents;
            let outgoing = self.handshakes[k].is_outgoing();
            // A connection dialled in has a short time to prove itself: until then it is
            // anyone's, and must cost this rank almost nothing.
            let limit = if outgoing {
                self.cfg.timeout
            } else {
                self.cfg.handshake_timeout
            };
            let timed_out = self.handshakes[k].started.elapsed() > limit;
            if (re == 0 && !timed_out) || self.handshakes[k].abandoned {
                continue;
            }
            let (me, base, size, remote_ids) =
                (self.base + self.rank, self.base, self.size, &self.remote_ids);
            let known = |u: u32| match u.checked_sub(base).filter(|&r| r < size) {
                Some(r) => Some(r),
                None => remote_ids.get(&u).copied(),
            };
            let h = &mut self.handshakes[k];
            let outcome = if re == 0 && outgoing {
                Outcome::Failed(format!("no answer within {} s", self.cfg.timeout.as_secs()))
            } else if re == 0 {
                Outcome::Refused(format!(
                    "it did not prove it belongs to the job within {} ms \
                     (WEFT_TCP_HANDSHAKE_TIMEOUT_MS)",
                    limit.as_millis()
                ))
            } else {
                h.advance(me, &known, &self.secret, re & POLLOUT != 0)
            };
            self.on_handshake(k, outcome);
        }
        self.handshakes.retain(|h| !h.abandoned);
        // New connections.
        if self.fds[0].revents != 0 {
            self.accept_all();
        }
        if !self.waiting.is_empty() {
            self.run_timers();
        }
        delivered
    }

    fn accept_all(&mut self) {
        loop {
            match self.listener.accept() {
                Ok((s, a)) => {
                    self.make_room_for(a);
                    match Handshake::accepted(s, a) {
                        Ok(h) => self.handshakes.push(h),
                        Err(e) => self.dropped.note(self.rank, a, &e.to_string()),
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    // Transient (EMFILE, ECONNABORTED...): try again on the next poll.
                    eprintln!("weft: rank {}: accept failed: {e}", self.rank);
                    return;
                }
            }
        }
    }

    /// Before a connection from `from` joins the handshakes: drops the oldest connection
    /// dialled in that has not proved itself yet, from that address when it has too many,
    /// else from anywhere when there are too many in all. (Not during the handshake loop.)
    fn make_room_for(&mut self, from: SocketAddr) {
        let per_source = PER_SOURCE_MIN.max(self.size as usize);
        let (mut all, mut same) = (0, 0);
        let (mut oldest_all, mut oldest_same) = (None::<usize>, None::<usize>);
        for (i, h) in self.handshakes.iter().enumerate() {
            if h.is_outgoing() || h.abandoned {
                continue;
            }
            all += 1;
            if oldest_all.is_none_or(|o| h.started < self.handshakes[o].started) {
                oldest_all = Some(i);
            }
            if h.addr.ip() == from.ip() {
                same += 1;
                if oldest_same.is_none_or(|o| h.started < self.handshakes[o].started) {
                    oldest_same = Some(i);
                }
            }
        }
        let (victim, why) = if same >= per_source {
            (
                oldest_same,
                format!(
                    "{same} connections from that address were waiting to prove they belong \
                     to the job; the oldest goes"
                ),
            )
        } else if all >= MAX_PENDING_IN {
            (
                oldest_all,
                format!(
                    "{all} connections were waiting to prove they belong to the job; the \
                     oldest goes"
                ),
            )
        } else {
            return;
        };
        if let Some(i) = victim {
            let h = self.handshakes.swap_remove(i);
            self.dropped.note(self.rank, h.addr, &why);
        }
    }

    fn on_handshake(&mut self, k: usize, outcome: Outcome) {
        match outcome {
            Outcome::Pending => {}
            Outcome::Authenticated => {
                let h = self.handshakes.swap_remove(k);
                let p = h.peer.expect("authenticated peers are named");
                let slot = &self.slots[p as usize];
                let keep = match (&slot.conn, slot.dialing) {
                    (Some(_), _) => false,
                    // Both dialled: the lower (universe) rank's dial wins.
                    (None, true) => self.uni_of(p) < self.base + self.rank,
                    (None, false) => true,
                };
                if keep && slot.dialing {
                    self.abandon_dial(p);
                }
                if let Some(stream) = h.welcome(keep) {
                    self.install(p, stream);
                }
            }
            Outcome::Welcomed(kept) => {
                let h = self.handshakes.swap_remove(k);
                let p = h.peer.expect("dialled peers are named");
                self.slots[p as usize].dialing = false;
                if kept {
                    self.install(p, h.stream);
                } else {
                    // The peer's own dial will arrive; dial again later only if it does not.
                    self.slots[p as usize].retry_at = Some(Instant::now() + Duration::from_secs(1));
                }
            }
            Outcome::Failed(why) => {
                let h = self.handshakes.swap_remove(k);
                if let (true, Some(p)) = (h.is_outgoing(), h.peer) {
                    let slot = &mut self.slots[p as usize];
                    slot.dialing = false;
                    slot.last_error = Some(why);
                    slot.retry_at = Some(Instant::now() + Duration::from_millis(100));
                }
                // A failed incoming attempt is dropped quietly: it is usually the losing
                // half of a simultaneous connect, closed by its dialer.
            }
            Outcome::Refused(why) => {
                let h = self.handshakes.swap_remove(k);
                match (h.is_outgoing(), h.peer) {
                    (true, Some(p)) => {
                        self.slots[p as usize].dialing = false;
                        self.fail(p, "cannot connect to", why);
                    }
                    _ => self.dropped.note(self.rank, h.addr, &why),
                }
            }
        }
    }

    /// Drops our own dial to `peer` (marked here, removed after the handshake loop, whose
    /// indices must not shift).
    fn abandon_dial(&mut self, peer: u32) {
        for h in &mut self.handshakes {
            if h.is_outgoing() && h.peer == Some(peer) {
                h.abandoned = true;
            }
        }
        self.slots[peer as usize].dialing = false;
    }

    /// Sets the connection's congestion control; a refusal is one warning per rank, and the
    /// kernel's default stays.
    fn set_congestion(&mut self, stream: &TcpStream) {
        let Some(name) = &self.cfg.congestion else {
            return;
        };
        if let Err(e) = net::set_congestion_control(stream, name) {
            if !self.congestion_warned {
                self.congestion_warned = true;
                eprintln!(
                    "weft: rank {}: WEFT_TCP_CONGESTION={name:?} refused by the kernel ({e}); \
                     TCP connections keep the system's congestion control (see \
                     net.ipv4.tcp_allowed_congestion_control)",
                    self.rank
                );
            }
        }
    }

    fn install(&mut self, peer: u32, stream: TcpStream) {
        let setup = (|| {
            stream.set_nonblocking(true)?;
            stream.set_nodelay(true)?;
            net::set_dead_peer_timeout(&stream, self.cfg.timeout)?;
            if self.cfg.notsent_lowat > 0 {
                net::set_notsent_lowat(&stream, self.cfg.notsent_lowat)?;
            }
            Ok::<_, std::io::Error>(())
        })();
        self.set_congestion(&stream);
        if let Err(e) = setup {
            self.fail(peer, "cannot set up the connection to", e);
            return;
        }
        if self.addrs[peer as usize] == PeerAddr::Unknown {
            if let Ok(a) = stream.peer_addr() {
                self.addrs[peer as usize] = PeerAddr::Seen(a.ip());
            }
        }
        let rx = match peer >= self.size {
            true => RxBuf::new(RX_BUFFER).delivering_as(peer),
            false => RxBuf::new(RX_BUFFER),
        };
        let slot = &mut self.slots[peer as usize];
        slot.conn = Some(Conn {
            stream,
            rx,
            peer_done: false,
            bye_sent: false,
        });
        slot.wanted = None;
        slot.retry_at = None;
        self.waiting.retain(|&w| w != peer);
        self.up.push(peer);
    }

    fn run_timers(&mut self) {
        let now = Instant::now();
        let mut k = 0;
        while k < self.waiting.len() {
            let p = self.waiting[k];
            k += 1;
            let slot = &self.slots[p as usize];
            if slot.conn.is_some() || slot.dialing {
                continue;
            }
            if slot.wanted.is_some_and(|w| now - w > self.cfg.timeout) {
                let why = slot
                    .last_error
                    .clone()
                    .unwrap_or_else(|| "no connection was made".into());
                let secs = self.cfg.timeout.as_secs();
                self.fail(
                    p,
                    "could not connect to",
                    format!("{why} (gave up after {secs} s)"),
                );
                self.waiting.retain(|&w| w != p);
                return;
            }
            if slot.retry_at.is_some_and(|t| now >= t) {
                self.dial(p);
            }
        }
    }

    /// Dials every TCP peer below this rank and waits until a connection with every TCP
    /// peer is up (`WEFT_CONNECT=full`). Traffic is not read meanwhile.
    pub fn connect_all(&mut self) -> Result<()> {
        let peers: Vec<u32> = (0..self.size)
            .filter(|&p| self.addrs[p as usize] != PeerAddr::NotTcp)
            .collect();
        let me = self.rank;
        for &p in peers.iter().filter(|&&p| p < me) {
            self.want(p);
        }
        let deadline = Instant::now() + self.cfg.timeout;
        while peers.iter().any(|&p| self.slots[p as usize].conn.is_none()) {
            if let Some(f) = self.fatal.take() {
                return Err(boot_err(f));
            }
            if Instant::now() > deadline {
                let missing: Vec<String> = peers
                    .iter()
                    .filter(|&&p| self.slots[p as usize].conn.is_none())
                    .map(|&p| self.where_is(p))
                    .collect();
                return Err(boot_err(format!(
                    "no connection within {} s with {}",
                    self.cfg.timeout.as_secs(),
                    missing.join(", ")
                )));
            }
            self.build_fds();
            net::poll(&mut self.fds, Duration::from_millis(50))
                .map_err(|e| Error::os("initialize TCP", "poll", e))?;
            self.service::<Discard>(None);
        }
        Ok(())
    }

    /// Sleeps until a socket is ready or `timeout` passes.
    pub fn sleep(&mut self, timeout: Duration) {
        self.sleep_watching(None, timeout);
    }

    /// Sleeps until a socket or `also` (another descriptor, such as a wake-up eventfd) is
    /// readable, or `timeout` passes.
    pub fn sleep_watching(&mut self, also: Option<std::os::fd::RawFd>, timeout: Duration) {
        self.build_fds();
        if let Some(fd) = also {
            self.fds.push(net::poll_entry(fd, POLLIN));
        }
        let t = if !self.waiting.is_empty() {
            timeout.min(Duration::from_millis(50))
        } else if !self.handshakes.is_empty() {
            // Connections dialled in must be dropped soon after their deadline.
            timeout.min(self.cfg.handshake_timeout / 4)
        } else {
            timeout
        };
        let _ = net::poll(&mut self.fds, t);
    }

    /// Ends every connection in order: finishes connections that still have queued
    /// output, writes it, says goodbye, and waits (up to the timeout) for each peer's
    /// goodbye, so no data is cut off by a reset. (After finalize's barrier no peer needs to
    /// send this rank anything more.)
    pub fn close(&mut self) {
        let deadline = Instant::now() + self.cfg.timeout;
        let (size, remotes) = (self.size, self.remotes.clone());
        let wire_of = |p: u32| match p.checked_sub(size) {
            None => p,
            Some(k) => remotes[k as usize].wire,
        };
        loop {
            let mut pending = self.handshakes.iter().any(|h| h.is_outgoing())
                || self
                    .waiting
                    .iter()
                    .any(|&p| !self.slots[p as usize].tx.is_empty());
            for &p in &self.up {
                let slot = &mut self.slots[p as usize];
                let c = slot.conn.as_mut().expect("up peers have a connection");
                if !c.bye_sent && slot.partial.is_some() {
                    // (Cannot happen after the engine drained: its packets are all out.)
                    pending = true;
                } else if !c.bye_sent {
                    match slot.tx.flush(&mut c.stream) {
                        Ok(true) => {
                            let _ = c.stream.write_all(&conn::bye_frame());
                            let _ = c.stream.shutdown(Shutdown::Write);
                            c.bye_sent = true;
                        }
                        Ok(false) => pending = true,
                        Err(_) => c.bye_sent = true,
                    }
                }
                if !c.peer_done {
                    match c.rx.read_from(&mut c.stream, wire_of(p), &mut Discard) {
                        Ok((_, ReadOutcome::Closed)) | Err(_) => c.peer_done = true,
                        Ok((_, ReadOutcome::Drained)) => pending = true,
                    }
                }
            }
            if let Some(f) = self.fatal.take() {
                eprintln!("{f}");
                break;
            }
            if !pending || Instant::now() > deadline {
                break;
            }
            self.build_fds();
            let _ = net::poll(&mut self.fds, Duration::from_millis(10));
            self.service::<Discard>(None);
        }
        self.handshakes.clear();
        self.dropped.flush(self.rank);
        for &p in &self.up {
            self.slots[p as usize].conn = None;
        }
        self.up.clear();
    }
}
