//! The internal collectives over real engines, one thread per rank, on an in-memory fabric.

use super::barrier_among;
use crate::engine::{Config, Engine};
use crate::fabric::{Fabric, Header, PullError, Sink};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Packets in flight to each rank, shared by threads.
type Queues = Arc<Mutex<Vec<VecDeque<(Header, Vec<u8>)>>>>;

/// One rank's end of the in-memory network: unbounded queues, no single copy.
struct ThreadFabric {
    rank: u32,
    net: Queues,
}

impl Fabric for ThreadFabric {
    fn rank(&self) -> u32 {
        self.rank
    }
    fn size(&self) -> u32 {
        self.net.lock().unwrap().len() as u32
    }
    fn max_payload(&self, _peer: u32) -> usize {
        1024
    }
    fn try_send(&mut self, peer: u32, hdr: &Header, payload: &[u8]) -> bool {
        self.net.lock().unwrap()[peer as usize].push_back((*hdr, payload.to_vec()));
        true
    }
    fn poll<S: Sink>(&mut self, sink: &mut S) -> usize {
        let batch: Vec<_> = self.net.lock().unwrap()[self.rank as usize]
            .drain(..)
            .collect();
        for (h, p) in &batch {
            sink.packet(h, p);
        }
        batch.len()
    }
    unsafe fn pull(&mut self, _peer: u32, _remote: u64, _dst: &mut [u8]) -> Result<(), PullError> {
        Err(PullError::Unsupported)
    }
    unsafe fn push(&mut self, _peer: u32, _remote: u64, _src: &[u8]) -> Result<(), PullError> {
        Err(PullError::Unsupported)
    }
    fn prepare_sleep(&mut self) {}
    fn sleep(&mut self, timeout: Duration) {
        std::thread::sleep(timeout.min(Duration::from_micros(100)));
    }
    fn cancel_sleep(&mut self) {}
}

fn engine(rank: u32, net: Queues) -> Engine<ThreadFabric> {
    Engine::new(
        ThreadFabric { rank, net },
        Config {
            eager_limit: 1024,
            spin_count: 10,
            yield_count: 10,
            sleep_timeout: Duration::from_millis(1),
            split_copy_min: 0,
            ..Config::from_tunables(&crate::tunables::Tunables::defaults(), 1, 1)
        },
    )
}

/// How long the late rank of a round holds back, waiting to see whether anyone leaves
/// without it. A correct barrier makes it wait all of it, so this is its cost per round.
const HOLD_BACK: Duration = Duration::from_millis(100);

/// `n` ranks go through `n` barriers (among world ranks `members`); in barrier `k` rank
/// `k % n` enters last: it holds back until some rank has left barrier `k` or
/// [`HOLD_BACK`] has passed. Every rank counts itself in before entering and checks, on
/// leaving, that all `n` had entered: what only a real barrier guarantees. Returns every
/// violation seen.
fn early_leavers(n: usize) -> Vec<String> {
    let net: Queues = Arc::new(Mutex::new((0..n).map(|_| VecDeque::new()).collect()));
    let entered: Arc<Vec<AtomicU32>> = Arc::new((0..n).map(|_| AtomicU32::new(0)).collect());
    let left: Arc<Vec<AtomicBool>> = Arc::new((0..n).map(|_| AtomicBool::new(false)).collect());
    // Communicator ranks differ from world ranks: the barrier must use `members`.
    let members: Vec<u32> = (0..n as u32).rev().collect();
    let (tx, rx) = std::sync::mpsc::channel();
    for me in 0..n {
        let (net, entered, left, members, tx) = (
            net.clone(),
            entered.clone(),
            left.clone(),
            members.clone(),
            tx.clone(),
        );
        std::thread::spawn(move || {
            let mut eng = engine(members[me], net);
            let mut seen = Vec::new();
            for k in 0..n {
                if me == k % n {
                    let t0 = Instant::now();
                    while !left[k].load(Ordering::SeqCst) && t0.elapsed() < HOLD_BACK {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                }
                entered[k].fetch_add(1, Ordering::SeqCst);
                barrier_among(&mut eng, 7, -16, &members, me).expect("barrier_among");
                let inside = entered[k].load(Ordering::SeqCst);
                if inside as usize != n {
                    seen.push(format!(
                        "rank {me} of {n} left barrier {k} when {inside} had entered it"
                    ));
                }
                left[k].store(true, Ordering::SeqCst);
            }
            let _ = tx.send(seen);
        });
    }
    drop(tx);
    let mut all = Vec::new();
    for _ in 0..n {
        // A watchdog: a deadlocked barrier becomes a failure.
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(seen) => all.extend(seen),
            Err(e) => panic!("barrier_among among {n}: a rank did not finish in 60 s ({e})"),
        }
    }
    all
}

#[test]
fn barrier_among_lets_no_rank_leave_before_every_rank_entered() {
    for n in [2, 3, 5, 8] {
        let bad = early_leavers(n);
        assert!(bad.is_empty(), "{n} ranks: {bad:#?}");
    }
}

#[test]
fn barrier_among_one_rank_returns() {
    let net: Queues = Arc::new(Mutex::new(vec![VecDeque::new()]));
    let mut eng = engine(0, net);
    barrier_among(&mut eng, 7, -16, &[0], 0).expect("barrier of one");
}
