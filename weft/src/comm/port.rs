//! Ports (MPI 4.1 §11.2): where the leader of one group waits for the leader of another, so
//! that two jobs (a job and the one it spawned, or two halves of one job) can join into an
//! intercommunicator. A port is a TCP listener of its own; its name is `weft-port:<address>`.
//!
//! The two leaders meet on one connection from the port, prove to each other that they hold
//! the universe's secret (the job secret `weft run` gives every job it starts, spawned ones
//! included), trade their groups' tables and hang up:
//!
//! ```text
//! connector                                   acceptor (owns the port)
//!   MAGIC, nonce_c                    -->
//!                                     <--     nonce_a, mac(Acceptor)
//!   mac(Connector), table_c           -->
//!                                     <--     table_a
//! ```
//!
//! The MACs are the TCP transport's ([`crate::fabric::tcp::auth`]) over [`PORT_RANK`] as
//! both ranks, which no process has, so a port exchange cannot be replayed as a transport
//! handshake nor the other way round. Everything after is ordinary traffic between the two
//! groups (see [`super::dynamic`]).

use crate::error::{Error, ErrorClass, Result};
use crate::fabric::tcp::auth::{self, Role, MAC_LEN, NONCE_LEN, SECRET_LEN};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

/// First bytes a connector sends: protocol and version.
const MAGIC: [u8; 8] = *b"WEFTPRT1";
/// The rank both MACs of a port exchange name.
const PORT_RANK: u32 = u32::MAX;
/// Prefix of every port name.
const PREFIX: &str = "weft-port:";
/// Largest table a leader accepts (bytes): 16 Mi entries' worth would be absurd.
const MAX_TABLE: usize = 64 << 20;

/// An open port.
#[derive(Debug)]
pub struct Port {
    listener: TcpListener,
    name: String,
}

impl Port {
    /// Opens a port where the TCP transport would listen (`one_node`: the loopback address
    /// will do).
    pub fn open(t: &crate::tunables::Tunables, one_node: bool) -> Result<Port> {
        let (listener, addr) = crate::fabric::tcp::listen(t, one_node)
            .map_err(|e| Error::new(ErrorClass::Os, "open_port", e))?;
        Ok(Port {
            listener,
            name: format!("{PREFIX}{addr}"),
        })
    }

    /// Its name, for `MPI_Open_port`'s caller to hand to a connector.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Waits for a connector (until `wait` is over, when given), proves the secret both ways
    /// and trades `mine` for the connector's table; errors name `call`. `progress` runs
    /// while no one has come yet (this rank's own traffic must go on: the other members of
    /// its group wait for it, and so may others).
    pub fn accept(
        &self,
        call: &'static str,
        secret: &[u8; SECRET_LEN],
        mine: &[u8],
        (io_timeout, wait): (Duration, Option<Duration>),
        mut progress: impl FnMut(),
    ) -> Result<Vec<u8>> {
        let deadline = wait.map(|w| Instant::now() + w);
        let stream = loop {
            match self.listener.accept() {
                Ok((s, _)) => break s,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if let (Some(d), Some(w)) = (deadline, wait) {
                        if Instant::now() > d {
                            return Err(Error::new(
                                ErrorClass::Spawn,
                                call,
                                format!(
                                    "no process connected to port {} within {} s \
                                     (WEFT_SPAWN_TIMEOUT): did the spawned program call MPI_Init?",
                                    self.name,
                                    w.as_secs()
                                ),
                            ));
                        }
                    }
                    progress();
                    let fd = std::os::fd::AsRawFd::as_raw_fd(&self.listener);
                    let mut fds = [crate::sys::net::poll_entry(fd, crate::sys::net::POLLIN)];
                    let _ = crate::sys::net::poll(&mut fds, Duration::from_millis(2));
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Error::os(call, "accepting on the port", e)),
            }
        };
        let mut s = Leg::new(call, stream, io_timeout)?;
        let mut magic = [0u8; 8];
        let mut nonce_c = [0u8; NONCE_LEN];
        s.read(&mut magic)?;
        if magic != MAGIC {
            return Err(s.refused("the connector does not speak weft's port protocol"));
        }
        s.read(&mut nonce_c)?;
        let nonce_a = fresh_nonce(call)?;
        let mac_a = auth::mac(secret, Role::Acceptor, PORT_RANK, PORT_RANK, &nonce_c, &nonce_a);
        s.write(&[&nonce_a[..], &mac_a[..]].concat())?;
        let mut proof = [0u8; MAC_LEN];
        s.read(&mut proof)?;
        let nonces = (&nonce_c, &nonce_a);
        if !auth::verify(secret, Role::Connector, PORT_RANK, PORT_RANK, nonces, &proof) {
            return Err(s.refused(
                "the connector does not hold this universe's secret (only jobs of one universe \
                 can join: started by one weft run or mpiexec, or spawned by one another)",
            ));
        }
        let theirs = s.read_table()?;
        s.write_table(mine)?;
        Ok(theirs)
    }
}

/// The address a port name names.
pub fn parse_name(call: &'static str, name: &str) -> Result<SocketAddr> {
    name.trim_end_matches('\0')
        .trim()
        .strip_prefix(PREFIX)
        .and_then(|a| a.parse().ok())
        .ok_or_else(|| {
            Error::new(
                ErrorClass::Port,
                call,
                format!("{name:?} is not a port name (weft's look like \"{PREFIX}127.0.0.1:4000\")"),
            )
        })
}

/// Dials the port at `addr`, proves the secret both ways and trades `mine` for the
/// acceptor's table.
pub fn connect(
    secret: &[u8; SECRET_LEN],
    addr: SocketAddr,
    mine: &[u8],
    io_timeout: Duration,
) -> Result<Vec<u8>> {
    const CALL: &str = "connect";
    let stream = TcpStream::connect_timeout(&addr, io_timeout).map_err(|e| {
        Error::new(
            ErrorClass::Port,
            CALL,
            format!("no port is open at {addr}: {e} (was it closed?)"),
        )
    })?;
    let mut s = Leg::new(CALL, stream, io_timeout)?;
    let nonce_c = fresh_nonce(CALL)?;
    s.write(&[&MAGIC[..], &nonce_c[..]].concat())?;
    let mut nonce_a = [0u8; NONCE_LEN];
    let mut mac_a = [0u8; MAC_LEN];
    s.read(&mut nonce_a)?;
    s.read(&mut mac_a)?;
    let nonces = (&nonce_c, &nonce_a);
    if !auth::verify(secret, Role::Acceptor, PORT_RANK, PORT_RANK, nonces, &mac_a) {
        return Err(s.refused(
            "the process behind the port does not hold this universe's secret (only jobs of \
             one universe can join: started by one weft run or mpiexec, or spawned by one \
             another)",
        ));
    }
    let proof = auth::mac(secret, Role::Connector, PORT_RANK, PORT_RANK, &nonce_c, &nonce_a);
    s.write(&proof)?;
    s.write_table(mine)?;
    s.read_table()
}

fn fresh_nonce(call: &'static str) -> Result<[u8; NONCE_LEN]> {
    let mut n = [0u8; NONCE_LEN];
    crate::sys::random_bytes(&mut n).map_err(|e| Error::os(call, "getrandom", e))?;
    Ok(n)
}

/// The leaders' connection, blocking, every read and write bounded by a deadline.
struct Leg {
    call: &'static str,
    stream: TcpStream,
    peer: String,
    deadline: Instant,
}

impl Leg {
    fn new(call: &'static str, stream: TcpStream, timeout: Duration) -> Result<Leg> {
        let setup = (|| {
            stream.set_nonblocking(false)?;
            stream.set_nodelay(true)?;
            stream.set_read_timeout(Some(timeout))?;
            stream.set_write_timeout(Some(timeout))
        })();
        setup.map_err(|e| Error::os(call, "setting up the port connection", e))?;
        let peer = stream
            .peer_addr()
            .map_or_else(|_| "?".to_owned(), |a| a.to_string());
        Ok(Leg {
            call,
            stream,
            peer,
            deadline: Instant::now() + timeout,
        })
    }

    fn broken(&self, what: &str, e: std::io::Error) -> Error {
        let late = Instant::now() > self.deadline;
        Error::new(
            ErrorClass::Port,
            self.call,
            format!(
                "{what} the other group's leader at {} failed: {e}{}",
                self.peer,
                if late { " (it took too long: WEFT_TCP_TIMEOUT)" } else { "" }
            ),
        )
    }

    fn refused(&self, why: &str) -> Error {
        Error::new(ErrorClass::Port, self.call, format!("refused the leader at {}: {why}", self.peer))
    }

    fn read(&mut self, buf: &mut [u8]) -> Result<()> {
        self.stream
            .read_exact(buf)
            .map_err(|e| self.broken("reading from", e))
    }

    fn write(&mut self, buf: &[u8]) -> Result<()> {
        self.stream
            .write_all(buf)
            .map_err(|e| self.broken("writing to", e))
    }

    fn write_table(&mut self, table: &[u8]) -> Result<()> {
        let len = u32::try_from(table.len()).expect("tables are small");
        self.write(&[&len.to_le_bytes()[..], table].concat())
    }

    fn read_table(&mut self) -> Result<Vec<u8>> {
        let mut len = [0u8; 4];
        self.read(&mut len)?;
        let len = u32::from_le_bytes(len) as usize;
        if len > MAX_TABLE {
            return Err(self.refused(&format!("it announced a table of {len} bytes")));
        }
        let mut t = vec![0u8; len];
        self.read(&mut t)?;
        Ok(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn port() -> Port {
        let t = crate::tunables::Tunables::from_env().unwrap();
        Port::open(&t, true).unwrap()
    }

    #[test]
    fn leaders_with_the_secret_trade_tables() {
        let p = port();
        let addr = parse_name("connect", p.name()).unwrap();
        let dialer = std::thread::spawn(move || {
            connect(&[7; SECRET_LEN], addr, b"from the connector", Duration::from_secs(10))
        });
        let got = p
            .accept("accept", &[7; SECRET_LEN], b"from the acceptor", (Duration::from_secs(10), None), || {})
            .unwrap();
        assert_eq!(got, b"from the connector");
        assert_eq!(dialer.join().unwrap().unwrap(), b"from the acceptor");
    }

    #[test]
    fn a_leader_without_the_secret_is_refused_both_ways() {
        let p = port();
        let addr = parse_name("connect", p.name()).unwrap();
        let dialer = std::thread::spawn(move || {
            connect(&[1; SECRET_LEN], addr, b"x", Duration::from_secs(10))
        });
        let acc = p.accept("accept", &[2; SECRET_LEN], b"y", (Duration::from_secs(10), None), || {});
        let con = dialer.join().unwrap();
        // The connector checks the acceptor's MAC first and hangs up.
        let e = con.unwrap_err().to_string();
        assert!(e.contains("does not hold this universe's secret"), "{e}");
        assert!(acc.is_err());
    }

    #[test]
    fn an_accept_with_a_time_limit_ends_when_nobody_comes() {
        let p = port();
        let limit = (Duration::from_secs(1), Some(Duration::from_millis(50)));
        let e = p.accept("spawn", &[0; SECRET_LEN], b"", limit, || {}).unwrap_err();
        assert_eq!(e.class, ErrorClass::Spawn);
        assert!(e.detail.contains("did the spawned program call MPI_Init?"), "{e}");
    }

    #[test]
    fn a_connector_that_does_not_speak_the_protocol_or_stays_silent_fails_the_accept() {
        let p = port();
        let addr = parse_name("connect", p.name()).unwrap();
        let stray = std::thread::spawn(move || {
            let mut s = TcpStream::connect(addr).unwrap();
            s.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
            s
        });
        let limits = (Duration::from_secs(10), None);
        let e = p.accept("accept", &[3; SECRET_LEN], b"", limits, || {}).unwrap_err();
        assert_eq!(e.class, ErrorClass::Port);
        assert!(e.detail.contains("does not speak weft's port protocol"), "{e}");
        drop(stray.join().unwrap());
        // One that connects and says nothing: the accept ends after the I/O time limit.
        let silent = std::thread::spawn(move || TcpStream::connect(addr).unwrap());
        let limits = (Duration::from_millis(300), None);
        let e = p.accept("accept", &[3; SECRET_LEN], b"", limits, || {}).unwrap_err();
        assert_eq!(e.class, ErrorClass::Port);
        assert!(e.detail.contains("reading from the other group's leader"), "{e}");
        drop(silent.join().unwrap());
    }

    #[test]
    fn bad_port_names_are_refused_and_a_closed_port_is_reported() {
        let e = parse_name("connect", "tcp://somewhere").unwrap_err().to_string();
        assert!(e.contains("is not a port name"), "{e}");
        let addr = {
            let p = port();
            parse_name("connect", p.name()).unwrap()
        };
        let e = connect(&[0; SECRET_LEN], addr, b"", Duration::from_secs(2))
            .unwrap_err()
            .to_string();
        assert!(e.contains("no port is open at"), "{e}");
    }
}
