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
    settings: &[(&str, &str)],
    body: impl Fn(u32, TcpTransport) -> R + Send + Sync + 'static,
) -> Vec<R> {
    let settings: Arc<Vec<(String, String)>> = Arc::new(
        settings.iter().map(|&(k, v)| (k.to_string(), v.to_string())).collect(),
    );
    let kvs = Arc::new(Mutex::new(HashMap::new()));
    let fence = Arc::new(Barrier::new(n as usize));
    let body = Arc::new(body);
    let threads: Vec<_> = (0..n)
        .map(|rank| {
            let (kvs, fence, body) = (kvs.clone(), fence.clone(), body.clone());
            let settings = settings.clone();
            std::thread::spawn(move || {
                let mut boot = Boot {
                    rank,
                    size: n,
                    node_of: (0..n).collect(),
                    job_id: "test".into(),
                    pmi: Box::new(MemPmi { kvs, fence }),
                    universe_base: 0,
                    secret: None,
                };
                // Ranks are on "different nodes" here, so name loopback.
                let t = Tunables::from_lookup(|k| {
                    settings
                        .iter()
                        .find(|(name, _)| name == k)
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

/// Each rank's `TCP_NOTSENT_LOWAT` on its connection to every other, once the connections
/// stand (made at start-up).
fn unsent_bounds(settings: &[(&str, &str)]) -> Vec<Vec<usize>> {
    let mut full = vec![("WEFT_CONNECT", "full")];
    full.extend_from_slice(settings);
    job(3, &full, |_, mut t| {
        t.connect_all().unwrap();
        let bounds = t
            .slots
            .iter()
            .filter_map(|s| s.conn.as_ref())
            .map(|c| net::notsent_lowat(&c.stream).unwrap())
            .collect();
        t.close();
        bounds
    })
}

#[test]
fn every_connection_bounds_its_unsent_queue_as_the_tunable_says() {
    // Both the dialled and the accepted ends; 256 KiB unless told.
    assert_eq!(unsent_bounds(&[]), vec![vec![256 << 10; 2]; 3]);
    assert_eq!(
        unsent_bounds(&[("WEFT_TCP_NOTSENT_LOWAT", "64k")]),
        vec![vec![64 << 10; 2]; 3]
    );
    // 0 leaves the socket's own setting alone (it reads 0: the system's bound applies).
    assert_eq!(unsent_bounds(&[("WEFT_TCP_NOTSENT_LOWAT", "0")]), vec![vec![0; 2]; 3]);
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
        // Two rounds over the same connection (a fast partner's second packet may come in
        // with its first).
        let mut got = Vec::new();
        for (round, tag) in [7, 8].into_iter().enumerate() {
            let mut out = vec![(partner, packet(rank, tag), vec![rank as u8; 10])];
            let more = (round + 1).saturating_sub(got.len());
            got.extend(exchange(&mut t, &mut out, more));
        }
        assert_eq!(
            got,
            [7, 8].map(|tag| (partner, tag, vec![partner as u8; 10]))
        );
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
        t.pmi.as_ref().unwrap().borrow_mut().put(&addr_key(1), "!failed").unwrap();
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

/// What one rank received in [`storm`]: header-only packets (kind, cookie) and data frames
/// (offset, whether the bytes were right), in arrival order.
#[derive(Debug, Default, PartialEq)]
struct Stormed {
    control: Vec<(u8, u64)>,
    data: Vec<(u64, bool)>,
    /// A fatal error, or what was still unsent at the deadline.
    failed: Option<String>,
}

/// Both ranks send each other a storm of header-only packets from two queues (as the engine
/// does: rendezvous requests from the send queue, replies from its outbox) and large data
/// frames, offering each queue's first packet again until taken, through tiny socket buffers.
fn storm(rank: u32, mut t: TcpTransport, n: u64, frames: u64) -> Stormed {
    use crate::fabric::PacketKind::{Cts, Data, Rts};
    use std::collections::VecDeque;
    let peer = 1 - rank;
    let frame_len = 40usize << 10;
    let fill = |off: u64| (off as usize / frame_len) as u8 ^ 0x5a;
    let ctl = |kind: crate::fabric::PacketKind, cookie: u64| Header {
        kind: kind as u8,
        src: rank,
        cookie,
        ..Header::default()
    };
    let mut rts: VecDeque<Header> = (0..n).map(|i| ctl(Rts, i)).collect();
    let mut cts: VecDeque<Header> = (0..n).map(|i| ctl(Cts, n + i)).collect();
    let bufs: Vec<Vec<u8>> = (0..frames)
        .map(|i| vec![fill(i * frame_len as u64); frame_len])
        .collect();
    let mut data: VecDeque<u64> = (0..frames).collect();
    let mut got = Stormed::default();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let received = got.control.len() as u64 == 2 * n && got.data.len() as u64 == frames;
        let sent = rts.is_empty() && cts.is_empty() && data.is_empty() && !t.busy();
        if received && sent {
            break;
        }
        if let Some(f) = t.take_fatal() {
            got.failed = Some(f);
            return got;
        }
        if Instant::now() > deadline {
            got.failed = Some(format!(
                "timed out: unsent {} requests, {} replies, {} frames; busy {}",
                rts.len(),
                cts.len(),
                data.len(),
                t.busy()
            ));
            return got;
        }
        while let Some(h) = rts.front() {
            if !t.try_send(peer, h, &[]) {
                break;
            }
            rts.pop_front();
            // Interleave the queues so a refused packet of one is followed by the other's.
            if let Some(h) = cts.front() {
                if !t.try_send(peer, h, &[]) {
                    break;
                }
                cts.pop_front();
            }
        }
        if let Some(&i) = data.front() {
            let h = Header {
                kind: Data as u8,
                src: rank,
                aux: 77,
                len: frames * frame_len as u64,
                cookie: i * frame_len as u64,
                ..Header::default()
            };
            if t.try_send(peer, &h, &bufs[i as usize]) {
                data.pop_front();
            }
        }
        if let Some(h) = cts.front() {
            if t.try_send(peer, h, &[]) {
                cts.pop_front();
            }
        }
        t.poll(&mut |h: &Header, p: &[u8]| {
            if h.kind == Data as u8 {
                got.data.push((
                    h.cookie,
                    p.len() == frame_len && p.iter().all(|&b| b == fill(h.cookie)),
                ));
            } else {
                got.control.push((h.kind, h.cookie));
            }
        });
    }
    t.close();
    got
}

#[test]
fn a_half_written_frame_is_finished_before_any_other_whatever_its_payload() {
    const N: u64 = 4000;
    const FRAMES: u64 = 60;
    let got = job(
        2,
        &[("WEFT_TCP_BUFFER", "4k"), ("WEFT_TCP_TIMEOUT", "5")],
        |rank, t| storm(rank, t, N, FRAMES),
    );
    // Every packet arrives once (in whatever interleaving of the two queues).
    for g in &got {
        assert_eq!(g.failed, None);
        let mut control = g.control.clone();
        control.sort_by_key(|&(_, c)| c);
        let expect: Vec<(u8, u64)> = (0..2 * N)
            .map(|c| {
                use crate::fabric::PacketKind::{Cts, Rts};
                let kind = if c < N { Rts } else { Cts };
                (kind as u8, c)
            })
            .collect();
        let lost = expect
            .iter()
            .filter(|e| control.binary_search_by_key(&e.1, |c| c.1).is_err())
            .count();
        let doubled = control.windows(2).filter(|w| w[0] == w[1]).count();
        assert!(
            control == expect,
            "{} header-only packets arrived, {lost} lost, {doubled} twice",
            g.control.len()
        );
        let data: Vec<(u64, bool)> = (0..FRAMES).map(|i| (i * (40 << 10), true)).collect();
        assert_eq!(g.data, data);
    }
}

#[test]
fn a_universe_rank_that_two_jobs_claim_is_refused_naming_both() {
    let boot = Boot {
        rank: 0,
        size: 2,
        node_of: vec![0, 1],
        job_id: "test".into(),
        pmi: Box::new(MemPmi {
            kvs: Default::default(),
            fence: Arc::new(Barrier::new(1)),
        }),
        universe_base: 0,
        secret: None,
    };
    let t = Tunables::from_lookup(|k| (k == "WEFT_TCP_ADDR").then(|| "127.0.0.1".into())).unwrap();
    let mut tcp = TcpTransport::for_other_jobs(&boot, &t, [7; SECRET_LEN]).unwrap();
    let at: SocketAddr = "127.0.0.1:9".parse().unwrap();
    // World ranks are peers 0 and 1; the first process of another job is peer 2, and the
    // same process added again keeps its number.
    assert_eq!(tcp.add_remote(100, 3, 0xaa, at).unwrap(), 2);
    assert_eq!(tcp.add_remote(100, 3, 0xaa, at).unwrap(), 2);
    assert_eq!(tcp.uni_of(2), 100);
    let e = tcp.add_remote(100, 5, 0xbb, at).unwrap_err();
    assert_eq!(e.class, ErrorClass::Spawn);
    assert!(
        e.detail
            .contains("universe rank 100 names two processes (rank 3 of one job, rank 5 of another)"),
        "{e}"
    );
}
