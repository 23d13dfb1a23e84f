//! One connection being set up, on a nonblocking socket: the connector's or the acceptor's
//! side of the exchange in [`super::auth`]. Each step reads exactly the bytes it expects,
//! so frames the peer sends right after the Welcome stay in the socket for the connection.

use super::auth::{self, Hello, Role, CHALLENGE_LEN, HELLO_LEN, NONCE_LEN, PROOF_LEN, SECRET_LEN};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Instant;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    /// Connector: the TCP connect is in progress.
    Connecting,
    /// Connector: Hello sent.
    AwaitChallenge,
    /// Connector: Proof sent.
    AwaitWelcome,
    /// Acceptor: nothing received yet.
    AwaitHello,
    /// Acceptor: Challenge sent.
    AwaitProof,
    /// Acceptor: the proof checked out; waiting for the keep/drop decision.
    Authenticated,
}

/// What a step of the handshake came to.
#[derive(Debug)]
pub enum Outcome {
    /// Nothing more can happen until the socket is ready again.
    Pending,
    /// Acceptor: the peer proved it belongs to the job; call [`Handshake::welcome`].
    Authenticated,
    /// Connector: the acceptor kept (true) or dropped (false) this connection.
    Welcomed(bool),
    /// The connection failed (network error, or the peer went away mid-handshake).
    Failed(String),
    /// Acceptor: the peer failed to prove it belongs to the job (drop it and log).
    Refused(String),
}

/// One connection being set up.
pub struct Handshake {
    /// The socket.
    pub stream: TcpStream,
    /// The peer's address.
    pub addr: SocketAddr,
    /// The peer's number here: known from the start when we connect, from the Hello when
    /// we accept.
    pub peer: Option<u32>,
    /// The peer's rank in the universe (its job's base plus its world rank), which the
    /// Hello and the MACs carry; equal to `peer` within a job whose base is 0.
    peer_uni: u32,
    /// When it started.
    pub started: Instant,
    /// Our dial lost to the peer's (simultaneous connect): to be dropped.
    pub abandoned: bool,
    step: Step,
    inbuf: [u8; CHALLENGE_LEN],
    have: usize,
    nonce_mine: [u8; NONCE_LEN],
    nonce_theirs: [u8; NONCE_LEN],
}

fn nonce() -> io::Result<[u8; NONCE_LEN]> {
    let mut n = [0u8; NONCE_LEN];
    crate::sys::random_bytes(&mut n)?;
    Ok(n)
}

impl Handshake {
    /// Starts connecting to peer number `peer`, universe rank `peer_uni`, at `addr`.
    /// `buffer` > 0: socket buffer sizes, set before connecting.
    pub fn connect(
        addr: SocketAddr,
        (peer, peer_uni): (u32, u32),
        buffer: usize,
    ) -> io::Result<Handshake> {
        let stream = crate::sys::net::connect_nonblocking(addr, buffer)?;
        Ok(Handshake {
            stream,
            addr,
            peer: Some(peer),
            peer_uni,
            started: Instant::now(),
            abandoned: false,
            step: Step::Connecting,
            inbuf: [0; CHALLENGE_LEN],
            have: 0,
            nonce_mine: nonce()?,
            nonce_theirs: [0; NONCE_LEN],
        })
    }

    /// Takes over a connection just accepted.
    pub fn accepted(stream: TcpStream, addr: SocketAddr) -> io::Result<Handshake> {
        stream.set_nonblocking(true)?;
        Ok(Handshake {
            stream,
            addr,
            peer: None,
            peer_uni: 0,
            started: Instant::now(),
            abandoned: false,
            step: Step::AwaitHello,
            inbuf: [0; CHALLENGE_LEN],
            have: 0,
            nonce_mine: nonce()?,
            nonce_theirs: [0; NONCE_LEN],
        })
    }

    /// Whether the next step waits for the socket to become writable (connect in progress).
    pub fn wants_write(&self) -> bool {
        self.step == Step::Connecting
    }

    /// Whether this side initiated the connection.
    pub fn is_outgoing(&self) -> bool {
        matches!(
            self.step,
            Step::Connecting | Step::AwaitChallenge | Step::AwaitWelcome
        )
    }

    /// Reads exactly up to `need` bytes into the input buffer; true once all are there.
    fn fill(&mut self, need: usize) -> Result<bool, String> {
        while self.have < need {
            match self.stream.read(&mut self.inbuf[self.have..need]) {
                Ok(0) => return Err("the peer closed the connection during the handshake".into()),
                Ok(n) => self.have += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e.to_string()),
            }
        }
        self.have = 0;
        Ok(true)
    }

    /// Sends a handshake message (small: a fresh socket always takes it whole).
    fn send(&mut self, bytes: &[u8]) -> Result<(), String> {
        match self.stream.write(bytes) {
            Ok(n) if n == bytes.len() => Ok(()),
            Ok(n) => Err(format!(
                "the socket took {n} of {} handshake bytes",
                bytes.len()
            )),
            Err(e) => Err(e.to_string()),
        }
    }

    /// Runs the handshake as far as the socket allows. `me` is this rank's universe rank;
    /// `known(u)` is the peer number of universe rank `u`, for a process this rank may talk
    /// to (`None`: a stranger, refused). `writable`: poll said the socket is writable (only
    /// matters while connecting).
    pub fn advance(
        &mut self,
        me: u32,
        known: &dyn Fn(u32) -> Option<u32>,
        secret: &[u8; SECRET_LEN],
        writable: bool,
    ) -> Outcome {
        match self.step_once(me, known, secret, writable) {
            Ok(o) => o,
            Err(o) => o,
        }
    }

    fn step_once(
        &mut self,
        me: u32,
        known: &dyn Fn(u32) -> Option<u32>,
        secret: &[u8; SECRET_LEN],
        writable: bool,
    ) -> Result<Outcome, Outcome> {
        let failed = Outcome::Failed;
        loop {
            match self.step {
                Step::Connecting => {
                    if !writable {
                        return Ok(Outcome::Pending);
                    }
                    match crate::sys::net::take_socket_error(&self.stream) {
                        Ok(None) => {}
                        Ok(Some(e)) | Err(e) => return Err(failed(e.to_string())),
                    }
                    let hello = Hello {
                        from: me,
                        to: self.peer_uni,
                        nonce: self.nonce_mine,
                    };
                    self.send(&hello.encode()).map_err(failed)?;
                    self.step = Step::AwaitChallenge;
                }
                Step::AwaitChallenge => {
                    if !self.fill(CHALLENGE_LEN).map_err(failed)? {
                        return Ok(Outcome::Pending);
                    }
                    let peer = self.peer_uni;
                    let (nonce_a, mac_a) = auth::decode_challenge(&self.inbuf).map_err(failed)?;
                    self.nonce_theirs = nonce_a;
                    if !auth::verify(
                        secret,
                        Role::Acceptor,
                        me,
                        peer,
                        (&self.nonce_mine, &nonce_a),
                        &mac_a,
                    ) {
                        return Err(failed(format!(
                            "the process listening at {} did not prove it belongs to this \
                             job (wrong secret): it is not rank {peer}",
                            self.addr
                        )));
                    }
                    let proof = auth::mac(
                        secret,
                        Role::Connector,
                        me,
                        peer,
                        &self.nonce_mine,
                        &nonce_a,
                    );
                    self.send(&proof).map_err(failed)?;
                    self.step = Step::AwaitWelcome;
                }
                Step::AwaitWelcome => {
                    if !self.fill(1).map_err(failed)? {
                        return Ok(Outcome::Pending);
                    }
                    return Ok(Outcome::Welcomed(self.inbuf[0] == 1));
                }
                Step::AwaitHello => {
                    if !self.fill(HELLO_LEN).map_err(failed)? {
                        return Ok(Outcome::Pending);
                    }
                    let bytes: &[u8; HELLO_LEN] = self.inbuf[..HELLO_LEN].try_into().unwrap();
                    let hello = Hello::decode(bytes).map_err(Outcome::Refused)?;
                    let peer = known(hello.from).filter(|_| hello.to == me && hello.from != me);
                    let Some(peer) = peer else {
                        return Err(Outcome::Refused(format!(
                            "it says it is rank {} looking for rank {} (this is rank {me}, \
                             which does not know rank {})",
                            hello.from, hello.to, hello.from
                        )));
                    };
                    self.peer = Some(peer);
                    self.peer_uni = hello.from;
                    self.nonce_theirs = hello.nonce;
                    let mac_a = auth::mac(
                        secret,
                        Role::Acceptor,
                        hello.from,
                        me,
                        &hello.nonce,
                        &self.nonce_mine,
                    );
                    self.send(&auth::encode_challenge(&self.nonce_mine, &mac_a))
                        .map_err(failed)?;
                    self.step = Step::AwaitProof;
                }
                Step::AwaitProof => {
                    if !self.fill(PROOF_LEN).map_err(failed)? {
                        return Ok(Outcome::Pending);
                    }
                    let peer = self.peer_uni;
                    if !auth::verify(
                        secret,
                        Role::Connector,
                        peer,
                        me,
                        (&self.nonce_theirs, &self.nonce_mine),
                        &self.inbuf[..PROOF_LEN],
                    ) {
                        return Err(Outcome::Refused(format!(
                            "it claimed to be rank {peer} but does not hold the job's secret"
                        )));
                    }
                    self.step = Step::Authenticated;
                    return Ok(Outcome::Authenticated);
                }
                Step::Authenticated => return Ok(Outcome::Authenticated),
            }
        }
    }

    /// Acceptor: tells the connector whether this connection is kept, and hands back the
    /// socket when it is.
    pub fn welcome(mut self, keep: bool) -> Option<TcpStream> {
        debug_assert_eq!(self.step, Step::Authenticated);
        let ok = self.send(&[keep as u8]).is_ok();
        (keep && ok).then_some(self.stream)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;
    use std::time::Duration;

    /// Drives a connector (rank `c`) against an acceptor (rank `a`) until both finish.
    fn run(
        c: u32,
        a: u32,
        secret_c: [u8; SECRET_LEN],
        secret_a: [u8; SECRET_LEN],
    ) -> (Outcome, Outcome) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut hc = Some(Handshake::connect(l.local_addr().unwrap(), (a, a), 0).unwrap());
        let (s, addr) = l.accept().unwrap();
        let mut ha = Some(Handshake::accepted(s, addr).unwrap());
        let deadline = Instant::now() + Duration::from_secs(10);
        let (mut oc, mut oa) = (None, None);
        while oc.is_none() || oa.is_none() {
            assert!(Instant::now() < deadline, "handshake hung");
            if let Some(h) = ha.as_mut() {
                match h.advance(a, &|r| (r < 8).then_some(r), &secret_a, false) {
                    Outcome::Pending => {}
                    Outcome::Authenticated => {
                        assert!(ha.take().unwrap().welcome(true).is_some());
                        oa = Some(Outcome::Authenticated);
                    }
                    other => {
                        ha = None;
                        oa = Some(other);
                    }
                }
            }
            if let Some(h) = hc.as_mut() {
                match h.advance(c, &|r| (r < 8).then_some(r), &secret_c, true) {
                    Outcome::Pending => {}
                    other => {
                        hc = None;
                        oc = Some(other);
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        (oc.unwrap(), oa.unwrap())
    }

    #[test]
    fn peers_with_the_secret_connect() {
        let (c, a) = run(1, 2, [7; SECRET_LEN], [7; SECRET_LEN]);
        assert!(matches!(c, Outcome::Welcomed(true)), "{c:?}");
        assert!(matches!(a, Outcome::Authenticated), "{a:?}");
    }

    #[test]
    fn a_connector_without_the_secret_is_refused_and_an_impostor_acceptor_is_detected() {
        let (c, a) = run(1, 2, [7; SECRET_LEN], [8; SECRET_LEN]);
        // The acceptor's MAC fails first, at the connector, which stops before proving.
        assert!(
            matches!(&c, Outcome::Failed(m) if m.contains("did not prove")),
            "{c:?}"
        );
        assert!(matches!(a, Outcome::Failed(_)), "{a:?}");
    }

    #[test]
    fn a_hello_for_another_rank_or_garbage_is_refused() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut raw = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, addr) = l.accept().unwrap();
        let mut ha = Handshake::accepted(s, addr).unwrap();
        let hello = Hello {
            from: 1,
            to: 5,
            nonce: [0; NONCE_LEN],
        };
        raw.write_all(&hello.encode()).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        let o = loop {
            assert!(Instant::now() < deadline);
            match ha.advance(2, &|r| (r < 8).then_some(r), &[0; SECRET_LEN], false) {
                Outcome::Pending => std::thread::sleep(Duration::from_millis(1)),
                o => break o,
            }
        };
        assert!(
            matches!(&o, Outcome::Refused(m) if m.contains("looking for rank 5")),
            "{o:?}"
        );

        let mut raw = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, addr) = l.accept().unwrap();
        let mut ha = Handshake::accepted(s, addr).unwrap();
        raw.write_all(b"GET / HTTP/1.1\r\nHost: example.org\r\nAccept: text/html, */*\r\n\r\n")
            .unwrap();
        let o = loop {
            assert!(Instant::now() < deadline);
            match ha.advance(2, &|r| (r < 8).then_some(r), &[0; SECRET_LEN], false) {
                Outcome::Pending => std::thread::sleep(Duration::from_millis(1)),
                o => break o,
            }
        };
        assert!(
            matches!(&o, Outcome::Refused(m) if m.contains("magic")),
            "{o:?}"
        );
    }
}
