//! Whole-transport tests: several ranks' TCP transports in threads of one process, over an
//! in-memory key-value space.

use super::*;
use crate::boot::Pmi;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Arc, Barrier, Mutex};

thread_local! {
    /// Keys this thread's rank read from the key-value space.
    static GETS: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
}

/// The peers' addresses this thread's rank read so far.
fn address_reads() -> Vec<String> {
    GETS.with(|g| {
        g.borrow()
            .iter()
            .filter(|k| *k != SECRET_KEY)
            .cloned()
            .collect()
    })
}

/// A key-value space shared by the threads of one test job.
struct MemPmi {
    kvs: Arc<Mutex<HashMap<String, String>>>,
    fence: Arc<Barrier>,
}

impl Pmi for MemPmi {
    fn put(&mut self, key: &str, value: &str) -> Result<()> {
        self.kvs.lock().unwrap().insert(key.into(), value.into());
        Ok(())
    }
    fn fence(&mut self) -> Result<()> {
        self.fence.wait();
        Ok(())
    }
    fn get(&mut self, key: &str) -> Result<String> {
        GETS.with(|g| g.borrow_mut().push(key.to_owned()));
        self.kvs
            .lock()
            .unwrap()
            .get(key)
            .cloned()
            .ok_or_else(|| Error::new(ErrorClass::Boot, "get", format!("no key {key}")))
    }
    fn abort(&mut self, code: i32, msg: &str) -> ! {
        panic!("abort {code}: {msg}")
    }
    fn finalize(&mut self) -> Result<()> {
        Ok(())
    }
    fn protocol(&self) -> &'static str {
        "memory"
    }
}

/// Runs `body(rank, transport)` on `n` ranks in threads; every rank is a TCP peer of every
/// other, on loopback, with `settings` as the environment.
fn job<R: Send + 'static>(
    n: u32,
    settings: &'static [(&'static str, &'static str)],
    body: impl Fn(u32, TcpTransport) -> R + Send + Sync + 'static,
) -> Vec<R> {
    let kvs = Arc::new(Mutex::new(HashMap::new()));
    let fence = Arc::new(Barrier::new(n as usize));
    let body = Arc::new(body);
    let threads: Vec<_> = (0..n)
        .map(|rank| {
            let (kvs, fence, body) = (kvs.clone(), fence.clone(), body.clone());
            std::thread::spawn(move || {
                let mut boot = Boot {
                    rank,
                    size: n,
                    node_of: (0..n).collect(),
                    job_id: "test".into(),
                    pmi: Box::new(MemPmi { kvs, fence }),
                };
                // Ranks are on "different nodes" here, so name loopback.
                let t = Tunables::from_lookup(|k| {
                    settings
                        .iter()
                        .find(|(name, _)| *name == k)
                        .map(|(_, v)| v.to_string())
                        .or_else(|| (k == "WEFT_TCP_ADDR").then(|| "127.0.0.1".into()))
                })
                .unwrap();
                let tcp = TcpTransport::new(&mut boot, &t, &vec![true; n as usize]).unwrap();
                body(rank, tcp)
            })
        })
        .collect();
    threads.into_iter().map(|t| t.join().unwrap()).collect()
}

fn packet(src: u32, tag: i32) -> Header {
    Header {
        kind: crate::fabric::PacketKind::Eager as u8,
        src,
        tag,
        ..Header::default()
    }
}

/// Polls until `want` packets arrived (sending what `out` still holds meanwhile).
fn exchange(
    t: &mut TcpTransport,
    out: &mut Vec<(u32, Header, Vec<u8>)>,
    want: usize,
) -> Vec<(u32, i32, Vec<u8>)> {
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while got.len() < want || !out.is_empty() {
        assert!(Instant::now() < deadline, "exchange timed out: got {got:?}");
        out.retain(|(peer, h, p)| !t.try_send(*peer, h, p));
        t.poll(&mut |h: &Header, p: &[u8]| got.push((h.src, h.tag, p.to_vec())));
        assert!(t.fatal.is_none(), "{:?}", t.fatal);
        t.sleep(Duration::from_millis(1));
    }
    got
}

#[test]
fn every_pair_dialling_at_once_ends_with_one_connection_per_pair() {
    // Every rank sends to every other at the same moment: each pair dials both ways.
    let conns = job(4, &[], |rank, mut t| {
        let mut out: Vec<_> = (0..4)
            .filter(|&p| p != rank)
            .map(|p| (p, packet(rank, p as i32), vec![rank as u8; 100]))
            .collect();
        let mut got = exchange(&mut t, &mut out, 3);
        // A second round reuses the connections (a fast peer's second-round packet may
        // already have come in with the first).
        let mut out: Vec<_> = (0..4)
            .filter(|&p| p != rank)
            .map(|p| (p, packet(rank, 100 + p as i32), vec![]))
            .collect();
        let more = 6 - got.len();
        got.extend(exchange(&mut t, &mut out, more));
        got.sort();
        let mut want: Vec<(u32, i32, Vec<u8>)> = (0..4)
            .filter(|&p| p != rank)
            .flat_map(|p| {
                [
                    (p, rank as i32, vec![p as u8; 100]),
                    (p, 100 + rank as i32, vec![]),
                ]
            })
            .collect();
        want.sort();
        assert_eq!(got, want);
        let n = t.connections();
        t.close();
        n
    });
    assert_eq!(conns, vec![3, 3, 3, 3]);
}

#[test]
fn full_connect_makes_every_connection_during_start_up() {
    let conns = job(3, &[("WEFT_CONNECT", "full")], |_, mut t| {
        t.connect_all().unwrap();
        let n = t.connections();
        t.close();
        n
    });
    assert_eq!(conns, vec![2, 2, 2]);
}

#[test]
fn a_peer_that_went_away_without_goodbye_is_a_fatal_error_naming_it() {
    let msgs = job(2, &[], |rank, mut t| {
        let mut out = vec![(1 - rank, packet(rank, 0), vec![1u8; 10])];
        exchange(&mut t, &mut out, 1);
        if rank == 1 {
            // Vanish: drop the transport without the goodbye exchange.
            drop(t);
            return String::new();
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            assert!(Instant::now() < deadline, "the loss was not noticed");
            t.poll(&mut |_: &Header, _: &[u8]| {});
            if let Some(f) = t.take_fatal() {
                return f;
            }
            t.sleep(Duration::from_millis(10));
        }
    });
    assert!(
        msgs[0].contains("rank 0: lost its connection to rank 1 at 127.0.0.1:")
            && msgs[0].contains("without a goodbye"),
        "{msgs:?}"
    );
}

#[test]
fn a_peer_that_cannot_be_reached_fails_the_job_after_the_timeout_naming_it() {
    let msgs = job(2, &[("WEFT_TCP_TIMEOUT", "1")], |rank, mut t| {
        if rank == 1 {
            // Gone before anyone dials: its listener is closed, connects are refused.
            drop(t);
            return String::new();
        }
        std::thread::sleep(Duration::from_millis(200));
        assert!(
            t.try_send(1, &packet(0, 0), b"hello"),
            "queued while connecting"
        );
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            assert!(
                Instant::now() < deadline,
                "the unreachable peer was not reported"
            );
            t.poll(&mut |_: &Header, _: &[u8]| {});
            if let Some(f) = t.take_fatal() {
                return f;
            }
            t.sleep(Duration::from_millis(10));
        }
    });
    assert!(
        msgs[0].contains("rank 0: could not connect to rank 1 at 127.0.0.1:")
            && msgs[0].contains("gave up after 1 s"),
        "{msgs:?}"
    );
}

#[test]
fn a_peer_dialling_in_is_accepted_while_the_only_connection_is_read_directly() {
    // Rank 0's only connection (to rank 1) is quiet, so most of its polls read it directly;
    // rank 2 dials in meanwhile and must still be accepted and heard.
    let phase = Arc::new(Barrier::new(3));
    let got = job(3, &[], move |rank, mut t| {
        let mut got = Vec::new();
        if rank < 2 {
            let mut out = vec![(1 - rank, packet(rank, 1), vec![rank as u8; 10])];
            got = exchange(&mut t, &mut out, 1);
        }
        phase.wait();
        match rank {
            0 => {
                assert_eq!(t.sole_quiet_connection(), Some(1));
                let deadline = Instant::now() + Duration::from_secs(20);
                // Poll without sleeping in between, as a spinning rank does.
                while got.len() < 2 {
                    assert!(Instant::now() < deadline, "rank 2 was not heard: {got:?}");
                    t.poll(&mut |h: &Header, p: &[u8]| got.push((h.src, h.tag, p.to_vec())));
                    assert!(t.fatal.is_none(), "{:?}", t.fatal);
                }
                assert_eq!(t.connections(), 2);
            }
            2 => {
                assert!(t.try_send(0, &packet(2, 2), &[2u8; 10]), "queued");
                // Dial, prove itself, and write the packet out.
                let deadline = Instant::now() + Duration::from_secs(20);
                while t.busy() || t.connections() == 0 {
                    assert!(Instant::now() < deadline, "rank 2 could not send");
                    t.poll(&mut |_: &Header, _: &[u8]| {});
                    assert!(t.fatal.is_none(), "{:?}", t.fatal);
                    t.sleep(Duration::from_millis(1));
                }
            }
            _ => {}
        }
        // Rank 1 stays connected (and quiet) until rank 0 heard rank 2.
        phase.wait();
        t.close();
        got
    });
    assert_eq!(
        got[0],
        vec![(1, 1, vec![1u8; 10]), (2, 2, vec![2u8; 10])],
        "{got:?}"
    );
}

#[test]
fn a_peer_address_is_read_on_first_dial_only() {
    // Pairs (0,1) and (2,3) talk; nobody reads an address at start-up, and each rank reads
    // at most its partner's, when it dials it.
    let reads = job(4, &[], |rank, mut t| {
        assert_eq!(address_reads(), Vec::<String>::new(), "read at start-up");
        let partner = rank ^ 1;
        for tag in [7, 8] {
            let mut out = vec![(partner, packet(rank, tag), vec![rank as u8; 10])];
            let got = exchange(&mut t, &mut out, 1);
            assert_eq!(got, vec![(partner, tag, vec![partner as u8; 10])]);
        }
        let reads = address_reads();
        t.close();
        reads
    });
    for (rank, r) in reads.iter().enumerate() {
        let partner = addr_key(rank as u32 ^ 1);
        assert!(
            r.len() <= 1 && r.iter().all(|k| *k == partner),
            "rank {rank} read {r:?}"
        );
    }
    assert!(
        reads[0].len() + reads[1].len() >= 1,
        "somebody dialled: {reads:?}"
    );
}

#[test]
fn a_peer_whose_listener_failed_is_a_fatal_error_at_first_dial_naming_it() {
    let msgs = job(2, &[], |rank, mut t| {
        if rank == 1 {
            return String::new();
        }
        // As if rank 1 could not open its listener (it ends the job itself, reporting why).
        t.pmi.borrow_mut().put(&addr_key(1), "!failed").unwrap();
        assert!(
            t.try_send(1, &packet(0, 0), b"hello"),
            "queued while connecting"
        );
        t.poll(&mut |_: &Header, _: &[u8]| {});
        t.take_fatal().expect("a fatal error")
    });
    assert_eq!(
        msgs[0],
        "weft: rank 0: cannot dial rank 1: it could not open its TCP listener (it reports why)"
    );
}

#[test]
fn a_burst_of_dials_beyond_the_default_backlog_is_queued_not_refused() {
    const BURST: usize = 300;
    let somaxconn: usize = std::fs::read_to_string("/proc/sys/net/core/somaxconn")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    if somaxconn < BURST {
        println!("skipped: net.core.somaxconn is {somaxconn}, below the {BURST} dials tried");
        return;
    }
    job(1, &[], |_, t| {
        // Nobody accepts meanwhile: every dial must complete into the listen queue (with the
        // standard library's backlog of 128, the rest would wait on dropped SYNs).
        let addr = t.local_addr();
        let dials: Vec<TcpStream> = (0..BURST)
            .map(|k| {
                TcpStream::connect_timeout(&addr, Duration::from_millis(900))
                    .unwrap_or_else(|e| panic!("dial {k} to {addr}: {e}"))
            })
            .collect();
        assert_eq!(dials.len(), BURST);
    });
}
