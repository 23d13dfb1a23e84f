//! The head's listener for proxies: one thread that accepts connections and runs the proof
//! exchange of [`crate::wire`] on all of them at once with `poll(2)`, so a connection that
//! has not proved it is a proxy of this job costs a few hundred bytes and a poll entry, not a
//! thread: anyone who can reach the head's port can connect. Before the proof, a connection
//! has [`PROOF_DEADLINE`] and lines of at most [`MAX_LINE_UNPROVED`] bytes; one address holds
//! at most [`PER_SOURCE_MIN`] (or the number of hosts) waiting connections and all at most
//! [`MAX_PENDING`], the oldest making room for a new one. Every drop is logged, at most
//! [`LOG_BURST`] lines per [`LOG_WINDOW`].

use crate::launch::Event;
use crate::wire::{self, ToHead, ToProxy};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};
use weft::launcher::auth::{Role, SECRET_LEN};
use weft::launcher::host::LogLimit;

/// How long a connection has to prove it is a proxy of this job.
pub const PROOF_DEADLINE: Duration = Duration::from_secs(10);
/// Longest line before the proof (a hello or a proof is about 100 bytes).
pub const MAX_LINE_UNPROVED: usize = 4096;
/// Connections waiting to prove themselves, at most.
pub const MAX_PENDING: usize = 256;
/// Waiting connections from one address, at most (or the number of hosts, when larger).
pub const PER_SOURCE_MIN: usize = 8;
/// Log lines about dropped connections per window, at most (the rest are counted).
const LOG_BURST: u32 = 10;
const LOG_WINDOW: Duration = Duration::from_secs(10);

/// Where a connection stands in the proof exchange.
enum Step {
    /// Nothing read yet.
    Hello,
    /// Our challenge is out; its proof must match this exchange.
    Proof(wire::Exchange),
}

/// A connection that has not proved itself yet.
struct Pending {
    stream: TcpStream,
    addr: SocketAddr,
    started: Instant,
    /// Bytes read and not yet a whole line.
    buf: Vec<u8>,
    step: Step,
}

/// Log lines about dropped connections, rate-limited.
struct DropLog(LogLimit);

impl DropLog {
    fn note(&mut self, from: SocketAddr, why: &str) {
        if let Some(more) = self.0.admit() {
            let more = LogLimit::more_note(more);
            note!("weft run: dropped a connection from {from}: {why}{more}");
        }
    }
}

/// Accepts proxy connections in a thread of its own; reports those that prove the secret
/// as [`Event::ProxyConnected`] (their sockets blocking again).
pub fn start(
    listener: TcpListener,
    secret: [u8; SECRET_LEN],
    hosts: usize,
    tx: mpsc::Sender<Event>,
) -> anyhow::Result<()> {
    listener.set_nonblocking(true)?;
    thread::Builder::new()
        .name("acceptor".into())
        .spawn(move || serve(&listener, secret, hosts, &tx))?;
    Ok(())
}

fn serve(listener: &TcpListener, secret: [u8; SECRET_LEN], hosts: usize, tx: &mpsc::Sender<Event>) {
    let mut pending: Vec<Pending> = Vec::new();
    let mut log = DropLog(LogLimit::new(LOG_BURST, LOG_WINDOW));
    let mut fds: Vec<libc::pollfd> = Vec::new();
    loop {
        fds.clear();
        let entry = |fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        fds.push(entry(listener.as_raw_fd()));
        fds.extend(pending.iter().map(|p| entry(p.stream.as_raw_fd())));
        // SAFETY: `fds` is a valid, exclusively borrowed array of pollfd of the given length.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 200) };
        if n < 0 && io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            note!(
                "weft run: the proxy listener failed: poll: {}",
                io::Error::last_os_error()
            );
            return;
        }
        // Last first: swap_remove moves an entry already handled into the hole.
        for k in (0..pending.len()).rev() {
            let verdict = if n > 0 && fds[1 + k].revents != 0 {
                advance(&mut pending[k], &secret, hosts)
            } else if pending[k].started.elapsed() > PROOF_DEADLINE {
                Err(format!(
                    "it did not prove it is a proxy of this job within {} s",
                    PROOF_DEADLINE.as_secs()
                ))
            } else {
                Ok(None)
            };
            match verdict {
                Ok(None) => {}
                Ok(Some(host)) => {
                    let p = pending.swap_remove(k);
                    if p.stream.set_nonblocking(false).is_ok() {
                        let ev = Event::ProxyConnected {
                            host,
                            stream: p.stream,
                        };
                        if tx.send(ev).is_err() {
                            return;
                        }
                    }
                }
                Err(why) => {
                    let p = pending.swap_remove(k);
                    log.note(p.addr, &why);
                }
            }
        }
        if n > 0 && fds[0].revents != 0 {
            loop {
                match listener.accept() {
                    Ok((stream, addr)) => {
                        make_room(&mut pending, addr, hosts, &mut log);
                        if stream.set_nonblocking(true).is_ok() {
                            pending.push(Pending {
                                stream,
                                addr,
                                started: Instant::now(),
                                buf: Vec::new(),
                                step: Step::Hello,
                            });
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    // WouldBlock, or transient (EMFILE...): again on the next round.
                    Err(_) => break,
                }
            }
        }
    }
}

/// Before a connection from `from` joins: drops the oldest waiting one from that address
/// when it has too many, else the oldest of all when there are too many in all.
fn make_room(pending: &mut Vec<Pending>, from: SocketAddr, hosts: usize, log: &mut DropLog) {
    let same: Vec<usize> = (0..pending.len())
        .filter(|&i| pending[i].addr.ip() == from.ip())
        .collect();
    let oldest = |among: &mut dyn Iterator<Item = usize>| among.min_by_key(|&i| pending[i].started);
    let (victim, why) = if same.len() >= PER_SOURCE_MIN.max(hosts) {
        (
            oldest(&mut same.iter().copied()),
            format!(
                "{} connections from that address were waiting to prove they are proxies of \
                 this job; the oldest goes",
                same.len()
            ),
        )
    } else if pending.len() >= MAX_PENDING {
        (
            oldest(&mut (0..pending.len())),
            format!(
                "{} connections were waiting to prove they are proxies of this job; the \
                 oldest goes",
                pending.len()
            ),
        )
    } else {
        return;
    };
    if let Some(i) = victim {
        let p = pending.swap_remove(i);
        log.note(p.addr, &why);
    }
}

/// Reads what a waiting connection sent and takes the proof exchange a step further.
/// Returns the proxy's host index once it proved itself, `Err(why)` to drop it.
fn advance(
    p: &mut Pending,
    secret: &[u8; SECRET_LEN],
    hosts: usize,
) -> Result<Option<usize>, String> {
    let mut chunk = [0u8; 1024];
    while p.buf.len() <= MAX_LINE_UNPROVED {
        match p.stream.read(&mut chunk) {
            Ok(0) => return Err("it closed the connection".into()),
            Ok(n) => p.buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.to_string()),
        }
    }
    while let Some(nl) = p.buf.iter().position(|&b| b == b'\n') {
        let line: Vec<u8> = p.buf.drain(..=nl).collect();
        let msg = serde_json::from_slice(&line)
            .map_err(io::Error::from)
            .and_then(|v| ToHead::from_value(&v))
            .map_err(|e| format!("it sent something unreadable: {e}"))?;
        match (&p.step, msg) {
            (Step::Hello, ToHead::Hello { host, nonce }) if host < hosts => {
                let io = |e: io::Error| e.to_string();
                let nonce_head = wire::fresh_nonce().map_err(io)?;
                let ex = wire::Exchange {
                    secret: *secret,
                    host,
                    nonce_proxy: wire::bytes_from_hex("its nonce", &nonce).map_err(io)?,
                    nonce_head: wire::bytes_from_hex("the head's nonce", &nonce_head)
                        .map_err(io)?,
                };
                let challenge = ToProxy::Challenge {
                    nonce: nonce_head,
                    mac: ex.head_mac(),
                };
                let mut text = challenge.to_value().to_string();
                text.push('\n');
                // A fresh socket's buffer takes a line this small whole.
                match p.stream.write(text.as_bytes()) {
                    Ok(n) if n == text.len() => {}
                    Ok(n) => return Err(format!("its socket took {n} of {} bytes", text.len())),
                    Err(e) => return Err(e.to_string()),
                }
                p.step = Step::Proof(ex);
            }
            (Step::Hello, ToHead::Hello { host, .. }) => {
                return Err(format!("it claimed host {host} of {hosts}"))
            }
            (Step::Hello, other) => {
                return Err(format!("it opened with {other:?} instead of hello"))
            }
            (Step::Proof(ex), ToHead::Proof { mac }) if ex.verify(Role::Connector, &mac) => {
                return Ok(Some(ex.host));
            }
            (Step::Proof(ex), _) => {
                return Err(format!(
                    "it claimed to be the proxy of host {} but did not prove the job's proxy \
                     secret",
                    ex.host
                ))
            }
        }
    }
    if p.buf.len() > MAX_LINE_UNPROVED {
        return Err(format!(
            "it sent a line longer than {MAX_LINE_UNPROVED} bytes before proving it is a proxy \
             of this job"
        ));
    }
    Ok(None)
}
