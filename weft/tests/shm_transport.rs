//! ShmTransport between threads of one process, each thread a "rank" with its own Boot and an
//! in-process PMI (put/fence/get over a shared map and a barrier).

use std::collections::HashMap;
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};
use weft::boot::{Boot, Pmi};
use weft::fabric::shm::ShmTransport;
use weft::fabric::{Header, PullError};
use weft::tunables::Tunables;

/// State shared by the ranks of one test job.
struct Kvs {
    map: Mutex<HashMap<String, String>>,
    barrier: Barrier,
    /// Modes of the segment files seen at the first fence, by rank.
    modes: Mutex<Vec<(u32, u32)>>,
}

struct ThreadPmi {
    rank: u32,
    kvs: Arc<Kvs>,
    fences: u32,
    mine: Option<String>,
}

impl Pmi for ThreadPmi {
    fn put(&mut self, key: &str, value: &str) -> weft::Result<()> {
        self.mine = Some(value.to_owned());
        self.kvs
            .map
            .lock()
            .unwrap()
            .insert(key.into(), value.into());
        Ok(())
    }
    fn fence(&mut self) -> weft::Result<()> {
        self.kvs.barrier.wait();
        self.fences += 1;
        if self.fences == 1 {
            // Between the fences peers open the segment by its handle (`pid.fd.dev.inode`,
            // no name in /dev/shm): check the mode of what they open.
            if let Some(handle) = &self.mine {
                use std::os::unix::fs::PermissionsExt;
                let mut parts = handle.split('.');
                let (pid, fd) = (parts.next().unwrap(), parts.next().unwrap());
                let m = std::fs::metadata(format!("/proc/{pid}/fd/{fd}")).unwrap();
                let mode = m.permissions().mode() & 0o777;
                self.kvs.modes.lock().unwrap().push((self.rank, mode));
            }
        }
        Ok(())
    }
    fn get(&mut self, key: &str) -> weft::Result<String> {
        Ok(self.kvs.map.lock().unwrap()[key].clone())
    }
    fn abort(&mut self, code: i32, msg: &str) -> ! {
        panic!("abort({code}): {msg}")
    }
    fn finalize(&mut self) -> weft::Result<()> {
        Ok(())
    }
    fn protocol(&self) -> &'static str {
        "test-threads"
    }
}

fn job_id(test: &str) -> String {
    format!("t{}-{test}", std::process::id())
}

fn segments_of(job: &str) -> Vec<String> {
    std::fs::read_dir("/dev/shm")
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&format!("weft-{job}-")))
        .collect()
}

/// Runs `f(rank, transport, barrier)` on one thread per rank; `node_of` places the ranks.
fn run<F>(test: &str, node_of: Vec<u32>, tun: Tunables, f: F) -> Arc<Kvs>
where
    F: Fn(u32, Option<ShmTransport>, &Barrier) + Send + Sync + 'static,
{
    run_with(test, node_of, tun, false, f)
}

/// [`run`], with ranks that sleep in poll(2) (`in_poll`) or on the futex.
fn run_with<F>(test: &str, node_of: Vec<u32>, tun: Tunables, in_poll: bool, f: F) -> Arc<Kvs>
where
    F: Fn(u32, Option<ShmTransport>, &Barrier) + Send + Sync + 'static,
{
    let n = node_of.len();
    let kvs = Arc::new(Kvs {
        map: Mutex::new(HashMap::new()),
        barrier: Barrier::new(n),
        modes: Mutex::new(Vec::new()),
    });
    let after = Arc::new(Barrier::new(n));
    let f = Arc::new(f);
    let job = job_id(test);
    let handles: Vec<_> = (0..n as u32)
        .map(|rank| {
            let (kvs, f, tun, node_of, job, after) = (
                kvs.clone(),
                f.clone(),
                tun.clone(),
                node_of.clone(),
                job.clone(),
                after.clone(),
            );
            std::thread::spawn(move || {
                let mut boot = Boot {
                    rank,
                    size: n as u32,
                    node_of,
                    job_id: job,
                    pmi: Box::new(ThreadPmi {
                        rank,
                        kvs,
                        fences: 0,
                        mine: None,
                    }),
                    universe_base: 0,
                    secret: None,
                };
                let t = ShmTransport::new(&mut boot, &tun, in_poll).unwrap();
                f(rank, t, &after);
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert!(segments_of(&job).is_empty(), "segments left behind");
    kvs
}

fn hdr(src: u32, seq: u64, len: usize) -> Header {
    Header {
        kind: 1,
        src,
        len: len as u64,
        cookie: seq,
        ..Header::default()
    }
}

fn data(src: u32, seq: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (seq as usize + i + src as usize) as u8)
        .collect()
}

/// Polls until `want` packets arrived, with a watchdog.
fn poll_n<S: FnMut(&Header, &[u8])>(t: &mut ShmTransport, want: usize, sink: &mut S) {
    let start = Instant::now();
    let mut got = 0;
    while got < want {
        got += t.poll(sink);
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "watchdog: {got}/{want}"
        );
        std::hint::spin_loop();
    }
}

#[test]
fn segments_are_private_and_gone_after_new() {
    let job = job_id("gone");
    let kvs = run("gone", vec![0; 3], Tunables::defaults(), move |_r, t, b| {
        assert!(t.is_some());
        b.wait();
        assert!(segments_of(&job).is_empty());
    });
    let modes = kvs.modes.lock().unwrap();
    assert_eq!(modes.len(), 3);
    assert!(modes.iter().all(|&(_, m)| m == 0o600), "{modes:?}");
}

#[test]
fn alone_on_a_node_means_no_transport_and_matching_fences() {
    // Ranks 0 and 1 share node 0, rank 2 is alone on node 1: all three fence together.
    run("alone", vec![0, 0, 1], Tunables::defaults(), |r, t, _| {
        assert_eq!(t.is_some(), r < 2);
        if let Some(mut t) = t {
            // The two ranks of node 0 reach each other.
            assert!(t.try_send(1 - r, &hdr(r, 0, 0), &[]));
            poll_n(&mut t, 1, &mut |h, _| assert_eq!(h.src, 1 - r));
        }
    });
    run("solo", vec![0, 1], Tunables::defaults(), |_, t, _| {
        assert!(t.is_none())
    });
}

#[test]
fn ping_pong_all_sizes_in_order() {
    let mut tun = Tunables::defaults();
    tun.shm_ring_size = 16 << 10;
    run("pingpong", vec![0, 0], tun, |r, t, _| {
        let mut t = t.unwrap();
        let max = t.max_payload();
        assert_eq!(max, 4096 - 56);
        let peer = 1 - r;
        let lens: Vec<usize> = (0..2000).map(|i| (i * 131) % (max + 1)).collect();
        for (i, &len) in lens.iter().enumerate() {
            let seq = i as u64;
            if (i as u32 % 2) == r {
                let d = data(r, seq, len);
                while !t.try_send(peer, &hdr(r, seq, len), &d) {
                    t.poll(&mut |_, _| panic!("unexpected"));
                }
            } else {
                poll_n(&mut t, 1, &mut |h, p| {
                    assert_eq!((h.src, h.cookie, h.len as usize), (peer, seq, len));
                    assert_eq!(p, &data(peer, seq, len)[..]);
                });
            }
        }
    });
}

#[test]
fn full_ring_backpressure_and_streaming() {
    let mut tun = Tunables::defaults();
    tun.shm_ring_size = 4096;
    run("stream", vec![0, 0], tun, |r, t, b| {
        let mut t = t.unwrap();
        if r == 0 {
            let mut n = 0u64;
            while t.try_send(1, &hdr(0, n, 0), &[]) {
                n += 1;
            }
            assert!(n > 0);
            b.wait(); // 1 drains now
            b.wait();
            // Then a long stream with backpressure.
            for seq in n..n + 50_000 {
                let len = (seq % 300) as usize;
                let d = data(0, seq, len);
                while !t.try_send(1, &hdr(0, seq, len), &d) {
                    std::thread::yield_now();
                }
            }
            t.try_send(1, &hdr(0, u64::MAX, 0), &[]);
        } else {
            b.wait();
            let mut next = 0u64;
            let got = t.poll(&mut |h, _| {
                assert_eq!(h.cookie, next);
                next += 1;
            });
            assert_eq!(got as u64, next);
            b.wait();
            let start = Instant::now();
            let mut done = false;
            while !done {
                t.poll(&mut |h, p| {
                    if h.cookie == u64::MAX {
                        done = true;
                        return;
                    }
                    assert_eq!(h.cookie, next);
                    assert_eq!(p, &data(0, next, (next % 300) as usize)[..]);
                    next += 1;
                });
                assert!(start.elapsed() < Duration::from_secs(120), "watchdog");
                std::thread::yield_now();
            }
        }
    });
}

#[test]
fn poll_serves_every_sender_fairly() {
    run("fair", vec![0; 4], Tunables::defaults(), |r, t, b| {
        let mut t = t.unwrap();
        let per = 100u64;
        if r != 0 {
            for seq in 0..per {
                assert!(t.try_send(0, &hdr(r, seq, 16), &data(r, seq, 16)));
            }
            b.wait();
        } else {
            b.wait();
            let mut next = [0u64; 4];
            let mut firsts = Vec::new();
            for _ in 0..3 {
                let mut first = None;
                t.poll(&mut |h, p| {
                    let s = h.src as usize;
                    first.get_or_insert(s);
                    assert_eq!(h.cookie, next[s], "per-sender order");
                    assert_eq!(p, &data(h.src, h.cookie, 16)[..]);
                    next[s] += 1;
                });
                firsts.extend(first);
            }
            // The first poll delivered everything, from every sender; the others nothing.
            assert_eq!(next, [0, per, per, per]);
            assert_eq!(firsts.len(), 1);
        }
        b.wait();
    });
}

#[test]
fn poll_rotates_its_starting_sender() {
    run("rotate", vec![0; 3], Tunables::defaults(), |r, t, b| {
        let mut t = t.unwrap();
        let rounds = 6;
        for round in 0..rounds {
            if r != 0 {
                assert!(t.try_send(0, &hdr(r, round, 0), &[]));
            }
            b.wait();
            if r == 0 {
                let mut first = None;
                poll_n(&mut t, 2, &mut |h, _| {
                    first.get_or_insert(h.src);
                });
                // Both senders are known from round 0 on; the start alternates.
                if round > 0 {
                    assert_eq!(first, Some(1 + (round as u32 % 2)), "round {round}");
                }
            }
            b.wait();
        }
    });
}

#[test]
fn sleeping_receivers_are_woken() {
    sleepers("sleep", false);
}

#[test]
fn receivers_asleep_in_poll_are_woken_through_their_descriptor() {
    sleepers("sleep-poll", true);
}

/// Both ranks sleep whenever idle (on the futex, or in poll(2) on their wake-up descriptor
/// as ranks with sockets too do); a lost wake-up shows as a sleep of the whole timeout.
fn sleepers(test: &str, in_poll: bool) {
    run_with(
        test,
        vec![0, 0],
        Tunables::defaults(),
        in_poll,
        move |r, t, _| {
            let mut t = t.unwrap();
            let wake = t.wake_fd();
            if in_poll {
                assert_eq!(
                    wake.map(|w| w.1),
                    Some(true),
                    "the peer holds my descriptor"
                );
            } else {
                assert_eq!(wake, None);
            }
            let peer = 1 - r;
            let mut sleeps = 0;
            for i in 0..3000u64 {
                if (i % 2) as u32 == r {
                    if i % 100 == 0 {
                        std::thread::sleep(Duration::from_micros(200));
                    }
                    assert!(t.try_send(peer, &hdr(r, i, 0), &[]));
                } else {
                    let mut got = 0;
                    while got == 0 {
                        got = t.poll(&mut |h, _| assert_eq!(h.cookie, i));
                        if got > 0 {
                            break;
                        }
                        t.prepare_sleep();
                        got = t.poll(&mut |h, _| assert_eq!(h.cookie, i));
                        if got > 0 {
                            t.cancel_sleep();
                            break;
                        }
                        let s = Instant::now();
                        t.sleep(Duration::from_secs(20));
                        sleeps += 1;
                        assert!(s.elapsed() < Duration::from_secs(15), "lost wake-up at {i}");
                    }
                }
            }
            assert!(sleeps > 0);
        },
    );
}

#[test]
fn pull_copies_from_the_peer_or_says_unsupported() {
    for single_copy in [true, false] {
        let mut tun = Tunables::defaults();
        tun.shm_single_copy = single_copy;
        run("pull", vec![0, 0], tun, move |r, t, _| {
            let mut t = t.unwrap();
            if r == 0 {
                let buf: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
                let mut h = hdr(0, 1, buf.len());
                h.aux = buf.as_ptr() as u64;
                assert!(t.try_send(1, &h, &[]));
                poll_n(&mut t, 1, &mut |_, _| {}); // the Fin
                drop(buf);
            } else {
                let mut rts = None;
                poll_n(&mut t, 1, &mut |h, _| rts = Some(*h));
                let rts = rts.unwrap();
                let mut dst = vec![0u8; rts.len as usize];
                // SAFETY: rank 0 named its buffer in the RTS and keeps it until our FIN.
                match unsafe { t.pull(0, rts.aux, &mut dst) } {
                    Ok(()) => {
                        assert!(single_copy);
                        assert!(dst.iter().enumerate().all(|(i, &b)| b == (i % 251) as u8));
                    }
                    Err(PullError::Unsupported) => assert!(!single_copy),
                    Err(PullError::Failed(e)) => panic!("{e}"),
                }
                assert!(t.try_send(0, &hdr(1, 2, 0), &[]));
            }
        });
    }
}
