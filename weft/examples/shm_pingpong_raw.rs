//! One-way latency through the shared-memory rings alone (no engine): two threads, each a
//! "rank" with its own ShmTransport, pinned to CPUs 0 and 1, ping-pong packets of 0, 64, ...
//! bytes. Also measures the floor on this machine in the same run: a ping-pong of one
//! cache line. Run: `cargo run -p weft --release --example shm_pingpong_raw [iters]`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::Instant;
use weft::boot::{Boot, Pmi};
use weft::fabric::shm::ShmTransport;
use weft::fabric::Header;
use weft::tunables::Tunables;

struct ThreadPmi(Arc<(Mutex<HashMap<String, String>>, Barrier)>);

impl Pmi for ThreadPmi {
    fn put(&mut self, key: &str, value: &str) -> weft::Result<()> {
        self.0 .0.lock().unwrap().insert(key.into(), value.into());
        Ok(())
    }
    fn fence(&mut self) -> weft::Result<()> {
        self.0 .1.wait();
        Ok(())
    }
    fn get(&mut self, key: &str) -> weft::Result<String> {
        Ok(self.0 .0.lock().unwrap()[key].clone())
    }
    fn abort(&mut self, code: i32, msg: &str) -> ! {
        panic!("abort {code}: {msg}")
    }
    fn finalize(&mut self) -> weft::Result<()> {
        Ok(())
    }
    fn protocol(&self) -> &'static str {
        "threads"
    }
}

const SIZES: [usize; 5] = [0, 8, 64, 1024, 4096];

fn rank_main(rank: u32, kvs: Arc<(Mutex<HashMap<String, String>>, Barrier)>, iters: u64) {
    let _ = weft::sys::pin_to_cpu(rank as usize);
    let mut boot = Boot {
        rank,
        size: 2,
        node_of: vec![0, 0],
        job_id: format!("bench{}", std::process::id()),
        pmi: Box::new(ThreadPmi(kvs)),
        universe_base: 0,
        secret: None,
    };
    let mut t = ShmTransport::new(&mut boot, &Tunables::from_env().unwrap(), false)
        .unwrap()
        .unwrap();
    let peer = 1 - rank;
    let buf = vec![7u8; 4096];
    for &size in &SIZES {
        let hdr = Header {
            kind: 1,
            src: rank,
            len: size as u64,
            ..Header::default()
        };
        // Batches of `iters / 20` round trips; the machine is shared, so report the best
        // batch (what the rings cost when nothing else interferes) and the median one.
        let batch = (iters / 20).max(1);
        let mut per = Vec::new();
        for b in 0..21 {
            boot.pmi.fence().unwrap();
            let start = Instant::now();
            for _ in 0..batch {
                if rank == 0 {
                    while !t.try_send(peer, &hdr, &buf[..size]) {}
                    while t.poll(&mut |_, _| {}) == 0 {}
                } else {
                    while t.poll(&mut |_, _| {}) == 0 {}
                    while !t.try_send(peer, &hdr, &buf[..size]) {}
                }
            }
            if b > 0 {
                per.push(start.elapsed().as_secs_f64() * 1e6 / (2 * batch) as f64);
            }
        }
        if rank == 0 {
            per.sort_by(f64::total_cmp);
            println!(
                "shm ring one-way latency {size:>5} B: best {:.3} us, median {:.3} us",
                per[0],
                per[per.len() / 2]
            );
        }
    }
}

fn floor(iters: u64) {
    #[repr(align(128))]
    struct Line(AtomicU64);
    let lines = Arc::new([Line(AtomicU64::new(0)), Line(AtomicU64::new(0))]);
    let l2 = lines.clone();
    let t = std::thread::spawn(move || {
        let _ = weft::sys::pin_to_cpu(1);
        for i in 1..=(iters / 20).max(1) * 20 {
            while l2[0].0.load(Ordering::Acquire) != i {}
            l2[1].0.store(i, Ordering::Release);
        }
    });
    let _ = weft::sys::pin_to_cpu(0);
    let batch = (iters / 20).max(1);
    let mut per = Vec::new();
    let mut i = 0;
    for _ in 0..20 {
        let start = Instant::now();
        for _ in 0..batch {
            i += 1;
            lines[0].0.store(i, Ordering::Release);
            while lines[1].0.load(Ordering::Acquire) != i {}
        }
        per.push(start.elapsed().as_secs_f64() * 1e6 / (2 * batch) as f64);
    }
    t.join().unwrap();
    per.sort_by(f64::total_cmp);
    println!(
        "floor: cache-line ping-pong one-way: best {:.3} us, median {:.3} us",
        per[0],
        per[per.len() / 2]
    );
}

fn main() {
    let iters: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(200_000);
    floor(iters);
    let kvs = Arc::new((Mutex::new(HashMap::new()), Barrier::new(2)));
    let k2 = kvs.clone();
    let h = std::thread::spawn(move || rank_main(1, k2, iters));
    rank_main(0, kvs, iters);
    h.join().unwrap();
    floor(iters);
}
