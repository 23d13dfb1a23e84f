//! Multi-process point-to-point checks, run by `weft-cli/tests/p2p.rs` through `weft run`.
//! `p2p_suite CASE`: each case checks its results and panics (failing the job) on a mismatch.
//! `endless` exchanges 1 MiB messages in a ring until the job is ended from outside.

use weft::point_to_point as p2p;
use weft::traits::*;
use weft::ErrorClass;

fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn main() {
    let case = std::env::args().nth(1).expect("usage: p2p_suite CASE");
    let universe = weft::initialize().expect("initialize");
    let world = universe.world();
    let (rank, size) = (world.rank(), world.size());
    match case.as_str() {
        "ring" => ring(&world),
        "allpairs" => allpairs(&world),
        "storm" => storm(&world),
        "ctlstorm" => ctl_storm(&world),
        "truncate" => truncate(&world),
        "probe" => probe(&world),
        "cancel" => cancel(&world),
        "sync" => sync(&world),
        "badinput" => badinput(&world),
        "comms" => comms(&world),
        "intruder" => intruder(&world),
        "caughtpanic" => caught_panic(&world),
        "idlers" => idlers(&world),
        "barriers" => {
            barriers(&world);
        }
        "panic" => {
            world.barrier();
            if rank == size - 1 {
                panic!("rank {rank} panics on purpose");
            }
            // Everyone else waits for a message that never comes.
            let _: (u64, _) = world.any_process().receive();
        }
        "abort" => {
            world.barrier();
            if rank == size - 1 {
                world.abort(7);
            }
            let _: (u64, _) = world.any_process().receive();
        }
        "kill" => {
            // Large transfers in flight when the last rank kills itself.
            let big = pattern(8 << 20, rank as u64);
            let mut inbuf = vec![0u8; 8 << 20];
            let next = (rank + 1) % size;
            let prev = (rank + size - 1) % size;
            for i in 0.. {
                if rank == size - 1 && i == 3 {
                    // SAFETY: raise(SIGKILL) on our own process has no memory-safety effects.
                    unsafe { libc::raise(libc::SIGKILL) };
                }
                p2p::send_receive_into(
                    &big[..],
                    &world.process_at_rank(next),
                    &mut inbuf[..],
                    &world.process_at_rank(prev),
                );
            }
        }
        "endless" => {
            // Traffic until the job is ended from outside (tests that cut a host off).
            let data = pattern(1 << 20, rank as u64);
            let mut inbuf = vec![0u8; 1 << 20];
            let next = (rank + 1) % size;
            let prev = (rank + size - 1) % size;
            for i in 0u64.. {
                p2p::send_receive_into(
                    &data[..],
                    &world.process_at_rank(next),
                    &mut inbuf[..],
                    &world.process_at_rank(prev),
                );
                if i == 2 {
                    println!("p2p_suite endless: rank {rank} traffic flowing");
                }
            }
        }
        other => panic!("unknown case {other}"),
    }
    if rank == 0 {
        println!("p2p_suite {case}: ok on {size} ranks");
    }
}

/// 200 barriers back to back; in every 25th one rank enters last and checks that nobody
/// left it early. Every other rank tells that rank when it is about to enter and again when
/// it has left; the late rank waits for every "about to enter", then holds back a while,
/// probing for a "left". Only a barrier nobody can leave before the late rank entered makes
/// finding one impossible, so a rank that leaves early fails the job (a barrier that does
/// nothing fails at once).
fn barriers(world: &impl Communicator) {
    use std::time::{Duration, Instant};
    const HOLD_BACK: Duration = Duration::from_millis(100);
    const TAG_LEFT: i32 = 1000;
    const TAG_ENTERING: i32 = 2000;
    let (rank, size) = (world.rank(), world.size());
    for k in 0..200 {
        let checked = k % 25 == 0 && size > 1;
        let late = (k / 25) % size;
        if checked && rank == late {
            for _ in 1..size {
                let (entering, _) = world
                    .any_process()
                    .receive_with_tag::<i32>(TAG_ENTERING + k);
                assert_eq!(entering, k, "note of barrier {k}");
            }
            let t0 = Instant::now();
            while t0.elapsed() < HOLD_BACK {
                if let Some(st) = world.any_process().immediate_probe_with_tag(TAG_LEFT + k) {
                    panic!(
                        "rank {} left barrier {k} before rank {late} entered it",
                        st.source_rank()
                    );
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        } else if checked {
            world
                .process_at_rank(late)
                .send_with_tag(&k, TAG_ENTERING + k);
        }
        world.barrier();
        if checked && rank == late {
            for _ in 1..size {
                let (left, _) = world.any_process().receive_with_tag::<i32>(TAG_LEFT + k);
                assert_eq!(left, k, "note of barrier {k}");
            }
        } else if checked {
            world.process_at_rank(late).send_with_tag(&k, TAG_LEFT + k);
        }
    }
}

fn ring(world: &impl Communicator) {
    let (rank, size) = (world.rank(), world.size());
    let next = world.process_at_rank((rank + 1) % size);
    let prev = world.process_at_rank((rank + size - 1) % size);
    for round in 0..500u64 {
        let token = [rank as u64, round];
        let mut got = [0u64; 2];
        p2p::send_receive_into(&token, &next, &mut got, &prev);
        assert_eq!(
            got,
            [((rank + size - 1) % size) as u64, round],
            "ring round {round}"
        );
    }
}

fn allpairs(world: &impl Communicator) {
    let (rank, size) = (world.rank(), world.size());
    let mut sizes = vec![
        0usize,
        1,
        7,
        8,
        9,
        31,
        63,
        64,
        65,
        1000,
        4095,
        4097,
        16383,
        16384,
        16385,
        32769,
        65537,
        262_143,
        1 << 20,
        (1 << 20) + 3,
    ];
    sizes.extend([(4 << 20) - 1, 16 << 20]);
    let verbose = std::env::var_os("P2P_VERBOSE").is_some();
    for &len in &sizes {
        if verbose {
            eprintln!("rank {rank}: allpairs {len} bytes");
        }
        for d in 0..size {
            let to = (rank + d) % size;
            let from = (rank + size - d) % size;
            let out = pattern(len, (rank * 1000 + to) as u64 ^ len as u64);
            let mut inbuf = vec![0u8; len];
            let st = p2p::send_receive_into_with_tags(
                &out[..],
                &world.process_at_rank(to),
                5,
                &mut inbuf[..],
                &world.process_at_rank(from),
                5,
            );
            assert_eq!(
                (st.source_rank(), st.tag(), st.byte_count()),
                (from, 5, len)
            );
            assert!(
                inbuf == pattern(len, (from * 1000 + rank) as u64 ^ len as u64),
                "data from {from} of {len} bytes differs"
            );
        }
    }
}

/// Every pair, both ways at once: bursts of zero-byte standard and synchronous messages and
/// rendezvous messages (with a small `WEFT_TCP_EAGER_LIMIT`), so that header-only packets
/// (requests to send, clear-to-send replies, synchronous acknowledgements) cross many times
/// on full sockets. Each message is checked.
fn ctl_storm(world: &impl Communicator) {
    let (rank, size) = (world.rank(), world.size());
    const ROUNDS: i32 = 60;
    const BURST: i32 = 8;
    const BIG: usize = 6000;
    let peers: Vec<i32> = (0..size).filter(|&p| p != rank).collect();
    let empty: [u8; 0] = [];
    for round in 0..ROUNDS {
        let out: Vec<Vec<u8>> = peers
            .iter()
            .flat_map(|&p| (0..BURST).map(move |k| (p, k)))
            .map(|(p, k)| pattern(BIG, ((rank * 1000 + p) * 10_000 + round * BURST + k) as u64))
            .collect();
        let mut inbox = vec![vec![0u8; BIG]; peers.len() * BURST as usize];
        let mut zero = vec![[0u8; 0]; 2 * peers.len() * BURST as usize];
        weft::request::scope(|scope| {
            let mut recvs = Vec::new();
            let mut zeros = Vec::new();
            let mut bufs = inbox.iter_mut();
            let mut zbufs = zero.iter_mut();
            for &p in &peers {
                let from = world.process_at_rank(p);
                for k in 0..BURST {
                    let t = 3 * k;
                    zeros.push(from.immediate_receive_into_with_tag(
                        scope,
                        zbufs.next().unwrap(),
                        t,
                    ));
                    zeros.push(from.immediate_receive_into_with_tag(
                        scope,
                        zbufs.next().unwrap(),
                        t + 1,
                    ));
                    recvs.push(from.immediate_receive_into_with_tag(
                        scope,
                        &mut bufs.next().unwrap()[..],
                        t + 2,
                    ));
                }
            }
            let mut sends = Vec::new();
            let mut zsends = Vec::new();
            let mut data = out.iter();
            for &p in &peers {
                let to = world.process_at_rank(p);
                for k in 0..BURST {
                    let t = 3 * k;
                    zsends.push(to.immediate_send_with_tag(scope, &empty, t));
                    zsends.push(to.immediate_synchronous_send_with_tag(scope, &empty, t + 1));
                    sends.push(to.immediate_send_with_tag(scope, &data.next().unwrap()[..], t + 2));
                }
            }
            for r in zeros.into_iter().chain(zsends) {
                let st = r.wait();
                assert_eq!(st.byte_count(), 0);
            }
            for r in recvs.into_iter().chain(sends) {
                r.wait();
            }
        });
        let mut got = inbox.iter();
        for &p in &peers {
            for k in 0..BURST {
                let expect = pattern(BIG, ((p * 1000 + rank) * 10_000 + round * BURST + k) as u64);
                assert!(
                    *got.next().unwrap() == expect,
                    "rank {rank}: message {k} of round {round} from rank {p} differs"
                );
            }
        }
    }
}

fn storm(world: &impl Communicator) {
    let (rank, size) = (world.rank(), world.size());
    const PER_SENDER: i32 = 300;
    if rank != 0 {
        weft::request::multiple_scope(PER_SENDER as usize, |scope, coll| {
            let msgs: Vec<Vec<u8>> = (0..PER_SENDER)
                .map(|i| {
                    pattern(
                        [0, 3, 40, 200, 5000, 70_000][i as usize % 6],
                        (rank * 10_000 + i) as u64,
                    )
                })
                .collect();
            let msgs: &'static [Vec<u8>] = Box::leak(msgs.into_boxed_slice());
            for (i, m) in msgs.iter().enumerate() {
                coll.add(
                    world
                        .process_at_rank(0)
                        .immediate_send_with_tag(scope, &m[..], i as i32),
                );
            }
            let mut out = vec![];
            coll.wait_all(&mut out);
        });
    } else {
        let mut next = vec![0i32; size as usize];
        let mut buf = vec![0u8; 70_000];
        for _ in 0..PER_SENDER * (size - 1) {
            let st = world.any_process().receive_into(&mut buf[..]);
            let s = st.source_rank() as usize;
            assert_eq!(
                st.tag(),
                next[s],
                "messages from rank {s} overtook each other"
            );
            let expect = pattern(
                [0, 3, 40, 200, 5000, 70_000][st.tag() as usize % 6],
                (s as i32 * 10_000 + st.tag()) as u64,
            );
            assert!(
                buf[..st.byte_count()] == expect[..],
                "data of message {} from {s}",
                st.tag()
            );
            next[s] += 1;
        }
        assert!(next[1..].iter().all(|&n| n == PER_SENDER));
    }
}

fn truncate(world: &impl Communicator) {
    if world.size() < 2 || world.rank() > 1 {
        return;
    }
    if world.rank() == 0 {
        world.process_at_rank(1).send(&pattern(100, 1)[..]);
        world.process_at_rank(1).send(&pattern(1 << 20, 2)[..]);
    } else {
        for len in [100usize, 1 << 20] {
            let mut small = [0u8; 10];
            let err = world
                .process_at_rank(0)
                .try_receive_into_with_tag(&mut small[..], weft::point_to_point::ANY_TAG)
                .unwrap_err();
            assert_eq!(err.class, ErrorClass::Truncate);
            let msg = err.to_string();
            assert!(
                msg.contains(&format!("{len} bytes")) && msg.contains("10-byte"),
                "{msg}"
            );
        }
    }
}

fn probe(world: &impl Communicator) {
    let (rank, size) = (world.rank(), world.size());
    if size < 2 || rank > 1 {
        return;
    }
    if rank == 0 {
        assert!(world.any_process().immediate_probe_with_tag(77).is_none());
        let v: Vec<u32> = (0..1234).collect();
        world.process_at_rank(1).send_with_tag(&v[..], 9);
        world
            .process_at_rank(1)
            .send_with_tag(&pattern(100_000, 3)[..], 10);
    } else {
        let st = world.any_process().probe_with_tag(9);
        assert_eq!(
            (
                st.source_rank(),
                st.tag(),
                st.count(u32::equivalent_datatype())
            ),
            (0, 9, 1234)
        );
        let (v, _) = world.process_at_rank(0).receive_vec_with_tag::<u32>(9);
        assert_eq!(v, (0..1234).collect::<Vec<u32>>());
        let (msg, st) = world.any_process().matched_probe();
        assert_eq!(st.byte_count(), 100_000);
        let mut b = vec![0u8; 100_000];
        msg.matched_receive_into(&mut b[..]);
        assert_eq!(b, pattern(100_000, 3));
    }
}

fn cancel(world: &impl Communicator) {
    let mut x = 0u64;
    weft::request::scope(|scope| {
        let r = world
            .any_process()
            .immediate_receive_into_with_tag(scope, &mut x, 4242);
        r.cancel();
        let st = r.wait();
        assert!(st.is_cancelled(), "cancelled receive reports cancellation");
    });
    world.barrier();
}

fn sync(world: &impl Communicator) {
    let (rank, size) = (world.rank(), world.size());
    if size < 2 || rank > 1 {
        return;
    }
    let data = [7u8; 64];
    if rank == 0 {
        weft::request::scope(|scope| {
            let mut s = world
                .process_at_rank(1)
                .immediate_synchronous_send_with_tag(scope, &data, 1);
            for _ in 0..2000 {
                s = match s.test() {
                    Ok(_) => panic!("synchronous send completed before its receive was posted"),
                    Err(s) => s,
                };
            }
            world.process_at_rank(1).send_with_tag(&1u8, 2);
            s.wait();
            // A standard send of the same size completes with the receive not yet posted.
            let t = world
                .process_at_rank(1)
                .immediate_send_with_tag(scope, &data, 3);
            t.wait();
            world.process_at_rank(1).send_with_tag(&1u8, 4);
        });
    } else {
        let _: (u8, _) = world.process_at_rank(0).receive_with_tag(2);
        let (d, _) = world.process_at_rank(0).receive_with_tag::<[u8; 64]>(1);
        assert_eq!(d, data);
        let _: (u8, _) = world.process_at_rank(0).receive_with_tag(4);
        let (d, _) = world.process_at_rank(0).receive_with_tag::<[u8; 64]>(3);
        assert_eq!(d, data);
    }
}

fn badinput(world: &impl Communicator) {
    let size = world.size();
    let e = world.try_process_at_rank(size).unwrap_err();
    assert_eq!(e.class, ErrorClass::Rank);
    assert!(
        e.to_string().contains(&format!("rank {size}"))
            && e.to_string().contains("process_at_rank"),
        "{e}"
    );
    let e = world.try_process_at_rank(-3).unwrap_err();
    assert!(e.to_string().contains("rank -3"), "{e}");
    let e = world
        .this_process()
        .try_send_with_tag(&1u8, -5)
        .unwrap_err();
    assert_eq!(e.class, ErrorClass::Tag);
    assert!(
        e.to_string().contains("tag -5") && e.to_string().contains("send"),
        "{e}"
    );
    let mut x = 0u8;
    let e = world
        .this_process()
        .try_receive_into_with_tag(&mut x, -7)
        .unwrap_err();
    assert_eq!(e.class, ErrorClass::Tag);
    // A negative count is rejected where counts are given.
    let r = std::panic::catch_unwind(|| {
        let buf = [0i32; 4];
        let dt = i32::equivalent_datatype();
        // SAFETY: never constructed: the negative count is rejected first.
        let _ = unsafe { weft::datatype::View::with_count_and_datatype(&buf[..], -2, &dt) };
    });
    let msg = r
        .unwrap_err()
        .downcast::<String>()
        .map(|s| *s)
        .unwrap_or_default();
    assert!(msg.contains("count is -2"), "{msg}");
    // A nonblocking receive into a non-contiguous datatype lands only what came: one
    // element's blocks (ints 0 and 3), from a message shorter than the two elements given.
    let mut buf = [-1i32; 10];
    let dt = weft::datatype::UserDatatype::vector(2, 1, 3, &i32::equivalent_datatype());
    world.this_process().send_with_tag(&[5i32, 6][..], 3);
    {
        // SAFETY: two elements of the vector type (extent 4 ints, blocks at ints 0 and 3)
        // fit in 10 ints.
        let mut v =
            unsafe { weft::datatype::MutView::with_count_and_datatype(&mut buf[..], 2, &dt) };
        weft::request::scope(|scope| {
            let st = world
                .this_process()
                .immediate_receive_into_with_tag(scope, &mut v, 3)
                .wait();
            assert_eq!(st.count(i32::equivalent_datatype()), 2);
        });
    }
    assert_eq!(buf, [5, -1, -1, 6, -1, -1, -1, -1, -1, -1]);
    // Buffered send without an attached buffer.
    let e = world
        .this_process()
        .try_buffered_send_with_tag(&[0u8; 100][..], 0)
        .unwrap_err();
    assert_eq!(e.class, ErrorClass::Resource);
}

fn comms(world: &impl Communicator) {
    let (rank, size) = (world.rank(), world.size());
    let dup = world.duplicate();
    let half = world
        .split_by_color_with_key(weft::topology::Color::with_value(rank % 2), -rank)
        .unwrap();
    let shared = world.split_shared(rank);
    // The test tells how many ranks share a node (all, unless it placed them otherwise).
    let per_node = std::env::var("P2P_RANKS_PER_NODE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(size);
    assert_eq!(
        shared.size(),
        per_node,
        "split_shared keeps the ranks of this node"
    );
    // Traffic on the duplicate and on the world with the same tag does not mix.
    let next = (rank + 1) % size;
    let prev = (rank + size - 1) % size;
    weft::request::scope(|scope| {
        let a = world
            .process_at_rank(next)
            .immediate_send_with_tag(scope, &1u32, 3);
        let b = dup
            .process_at_rank(next)
            .immediate_send_with_tag(scope, &2u32, 3);
        let (y, _) = dup.process_at_rank(prev).receive_with_tag::<u32>(3);
        let (x, _) = world.process_at_rank(prev).receive_with_tag::<u32>(3);
        assert_eq!((x, y), (1, 2));
        a.wait();
        b.wait();
    });
    // The split communicator is ordered by key (descending world rank here).
    let members: Vec<i32> = (0..size).filter(|r| r % 2 == rank % 2).rev().collect();
    assert_eq!(half.size() as usize, members.len());
    assert_eq!(members[half.rank() as usize], rank);
    let sum = {
        let next = half.process_at_rank((half.rank() + 1) % half.size());
        let prev = half.process_at_rank((half.rank() + half.size() - 1) % half.size());
        let (got, st): (i32, _) = p2p::send_receive(&rank, &next, &prev);
        assert_eq!(members[st.source_rank() as usize], got);
        got
    };
    assert_eq!(sum % 2, rank % 2);
    // Many communicators created and freed: context ids are recycled, never exhausted.
    for _ in 0..3000 {
        let c = dup.duplicate();
        c.barrier();
    }
    nonblocking_duplicates(world, &dup);
    half.barrier();
    shared.barrier();
    // The self communicator: just this rank, talking to itself.
    let me = weft::topology::SimpleCommunicator::self_comm();
    assert_eq!((me.size(), me.rank()), (1, 0));
    assert_eq!(me.get_name(), "MPI_COMM_SELF");
    let (v, st): (i32, _) = p2p::send_receive(&(rank * 3), &me.this_process(), &me.this_process());
    assert_eq!((v, st.source_rank()), (rank * 3, 0));
}

/// `immediate_duplicate` (MPI_Comm_idup) of two communicators over the same ranks, started in
/// opposite orders by even and odd ranks, with a blocking split while they are in flight and
/// then 100 more in flight at once (more than the first rounds' part of the context mask):
/// all complete, and traffic on each stays on it.
fn nonblocking_duplicates(world: &impl Communicator, dup: &weft::topology::SimpleCommunicator) {
    let (rank, size) = (world.rank(), world.size());
    let even = rank % 2 == 0;
    let first = if even {
        world.immediate_duplicate()
    } else {
        dup.immediate_duplicate()
    };
    let second = if even {
        dup.immediate_duplicate()
    } else {
        world.immediate_duplicate()
    };
    let mid = world
        .split_by_color(weft::topology::Color::with_value(0))
        .unwrap();
    let many: Vec<_> = (0..100).map(|_| dup.immediate_duplicate()).collect();
    let (second, first) = (second.wait(), first.wait());
    let (of_world, of_dup) = if even {
        (first, second)
    } else {
        (second, first)
    };
    let mut comms: Vec<weft::topology::SimpleCommunicator> =
        many.into_iter().rev().map(|r| r.wait()).collect();
    comms.reverse();
    comms.extend([of_world, of_dup, mid]);
    // The same tag on every communicator, received in the opposite order: each value comes
    // on its own communicator.
    let (next, prev) = ((rank + 1) % size, (rank + size - 1) % size);
    let values: Vec<i32> = (0..comms.len() as i32).map(|i| rank * 1000 + i).collect();
    weft::request::scope(|scope| {
        let sends: Vec<_> = comms
            .iter()
            .zip(&values)
            .map(|(c, v)| c.process_at_rank(next).immediate_send_with_tag(scope, v, 9))
            .collect();
        for (i, c) in comms.iter().enumerate().rev() {
            let (v, _) = c.process_at_rank(prev).receive_with_tag::<i32>(9);
            assert_eq!(
                v,
                prev * 1000 + i as i32,
                "communicator {i} got another's message"
            );
        }
        sends.into_iter().for_each(|s| s.wait_without_status());
    });
}

/// Over TCP: rank 1 connects to rank 0's listener as an outsider would (garbage, then a
/// hello without the job's secret); rank 0 must drop both, log them, and go on.
fn intruder(world: &impl Communicator) {
    use std::io::{Read, Write};
    use weft::launcher::auth;
    let rank = world.rank();
    let addr = weft::runtime::inspect(|rt| rt.engine.fabric().tcp().map(|t| t.local_addr()));
    if rank == 0 {
        let a = addr.expect("run the intruder case over TCP").to_string();
        world.process_at_rank(1).send(a.as_bytes());
        let (done, _) = world.process_at_rank(1).receive_vec::<u8>();
        assert_eq!(done, b"done");
    } else if rank == 1 {
        let (a, _) = world.process_at_rank(0).receive_vec::<u8>();
        let a: std::net::SocketAddr = String::from_utf8(a).unwrap().parse().unwrap();
        let mut junk = std::net::TcpStream::connect(a).unwrap();
        junk.write_all(&[b'x'; auth::HELLO_LEN]).unwrap();
        let mut rest = Vec::new();
        let _ = junk.read_to_end(&mut rest);
        assert!(rest.is_empty(), "rank 0 answered garbage with {rest:?}");
        let mut liar = std::net::TcpStream::connect(a).unwrap();
        let hello = auth::Hello {
            from: 1,
            to: 0,
            nonce: [7; auth::NONCE_LEN],
        };
        liar.write_all(&hello.encode()).unwrap();
        let mut challenge = [0u8; auth::CHALLENGE_LEN];
        liar.read_exact(&mut challenge).unwrap();
        liar.write_all(&[0u8; auth::PROOF_LEN]).unwrap();
        let mut rest = Vec::new();
        let _ = liar.read_to_end(&mut rest);
        assert!(
            rest.is_empty(),
            "rank 0 welcomed a peer without the secret: {rest:?}"
        );
        world.process_at_rank(0).send(&b"done"[..]);
    }
    world.barrier();
    ring(world);
}

/// A rank panics inside a request scope with a receive and a send pending, catches the panic
/// and goes on: the receive must have been cancelled (a later message must not land in its
/// freed buffer, now reused) and the send completed before its buffer was freed.
fn caught_panic(world: &impl Communicator) {
    let (rank, size) = (world.rank(), world.size());
    if size < 2 || rank > 1 {
        world.barrier();
        return;
    }
    let peer = world.process_at_rank(1 - rank);
    for len in [4096usize, 1 << 20] {
        if rank == 0 {
            let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let mut inbuf = vec![0u8; len];
                let out = pattern(len, 7);
                weft::request::scope(|scope| {
                    let _r = peer.immediate_receive_into_with_tag(scope, &mut inbuf[..], 5);
                    let _s = peer.immediate_send_with_tag(scope, &out[..], 7);
                    panic!("rank 0 panics on purpose with a receive and a send pending");
                });
            }));
            assert!(caught.is_err());
            // Likely the freed buffers' memory.
            let other = vec![0u8; len];
            let other2 = vec![0u8; len];
            peer.send_with_tag(&1u8, 9);
            let _: (u8, _) = peer.receive_with_tag(6);
            let hit = other.iter().chain(&other2).filter(|&&b| b != 0).count();
            assert_eq!(
                hit, 0,
                "{hit} of {len} bytes overwritten after the caught panic"
            );
            let mut fresh = vec![0u8; len];
            peer.receive_into_with_tag(&mut fresh[..], 5);
            assert!(fresh.iter().all(|&b| b == 0xAB), "the message was damaged");
        } else {
            let mut got = vec![0u8; len];
            peer.receive_into_with_tag(&mut got[..], 7);
            assert!(
                got == pattern(len, 7),
                "the send pending at the panic sent damaged data"
            );
            let _: (u8, _) = peer.receive_with_tag(9);
            // Nonblocking: rank 0 receives tag 6 before tag 5 (whose rendezvous, by then
            // announced, would find the receive that the panic left behind).
            let data = vec![0xABu8; len];
            weft::request::scope(|scope| {
                let r = peer.immediate_send_with_tag(scope, &data[..], 5);
                peer.send_with_tag(&1u8, 6);
                r.wait();
            });
        }
    }
    world.barrier();
}

/// The last rank opens `P2P_IDLERS` (default 1100) connections to rank 0's TCP listener that
/// never say a word and keeps them open (for `P2P_IDLE_WAIT_MS` first) while the ranks
/// between dial rank 0 and talk to it.
fn idlers(world: &impl Communicator) {
    let (rank, size) = (world.rank(), world.size());
    assert!(size >= 3, "idlers needs 3 ranks or more");
    let idle: usize = std::env::var("P2P_IDLERS").map_or(1100, |v| v.parse().unwrap());
    let last = size - 1;
    let addr = weft::runtime::inspect(|rt| rt.engine.fabric().tcp().map(|t| t.local_addr()));
    if rank == 0 {
        let a = addr.expect("run the idlers case over TCP").to_string();
        world.process_at_rank(last).send(a.as_bytes());
        let (ready, _) = world.process_at_rank(last).receive_vec::<u8>();
        assert_eq!(ready, b"idle");
        for r in 1..last {
            let (got, _) = world.process_at_rank(r).receive_vec::<u8>();
            assert!(got == pattern(1000, r as u64), "rank {r}'s message differs");
            world
                .process_at_rank(r)
                .send(&pattern(1000, 100 + r as u64)[..]);
        }
        world.process_at_rank(last).send(&b"done"[..]);
    } else if rank == last {
        let (a, _) = world.process_at_rank(0).receive_vec::<u8>();
        let a: std::net::SocketAddr = String::from_utf8(a).unwrap().parse().unwrap();
        let quiet: Vec<std::net::TcpStream> = (0..idle)
            .map(|k| {
                std::net::TcpStream::connect(a)
                    .unwrap_or_else(|e| panic!("idle connection {k}: {e}"))
            })
            .collect();
        world.process_at_rank(0).send(&b"idle"[..]);
        // Long enough for rank 0 to drop them at their deadline, when asked.
        let wait: u64 = std::env::var("P2P_IDLE_WAIT_MS").map_or(0, |v| v.parse().unwrap());
        std::thread::sleep(std::time::Duration::from_millis(wait));
        // Only now do the others dial rank 0.
        for r in 1..last {
            world.process_at_rank(r).send(&b"go"[..]);
        }
        let (done, _) = world.process_at_rank(0).receive_vec::<u8>();
        assert_eq!(done, b"done");
        // Open during the ring too.
        world.barrier();
        let t = std::time::Instant::now();
        ring(world);
        report_ring(world, t, idle);
        drop(quiet);
        return;
    } else {
        let (go, _) = world.process_at_rank(last).receive_vec::<u8>();
        assert_eq!(go, b"go");
        world
            .process_at_rank(0)
            .send(&pattern(1000, rank as u64)[..]);
        let (got, _) = world.process_at_rank(0).receive_vec::<u8>();
        assert!(
            got == pattern(1000, 100 + rank as u64),
            "rank 0's answer differs"
        );
    }
    world.barrier();
    let t = std::time::Instant::now();
    ring(world);
    report_ring(world, t, idle);
}

/// Rank 0 prints how long the ring took (for measurements, not checked).
fn report_ring(world: &impl Communicator, t: std::time::Instant, idle: usize) {
    world.barrier();
    if world.rank() == 0 {
        println!(
            "p2p_suite idlers: 500 ring steps took {:.1} ms with {idle} idle connections open",
            t.elapsed().as_secs_f64() * 1e3
        );
    }
}
