//! ShmTransport across real processes: the test binary re-runs itself as two ranks (the
//! `rank_process` test, which does nothing unless WEFT_TEST_SHM_RANK is set). They share a
//! file-based PMI in a temporary directory, ping-pong with futex sleeps (cross-process
//! wake-ups), or with sleeps in poll(2) on their wake-up eventfds (which each signals through
//! a duplicate taken with pidfd_getfd), and pull from each other with process_vm_readv.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};
use weft::boot::{Boot, Pmi};
use weft::fabric::shm::ShmTransport;
use weft::fabric::{Header, PullError};
use weft::tunables::Tunables;

const RANKS: u32 = 2;

struct FilePmi {
    dir: PathBuf,
    rank: u32,
    fences: u32,
}

impl Pmi for FilePmi {
    fn put(&mut self, key: &str, value: &str) -> weft::Result<()> {
        let tmp = self.dir.join(format!(".{key}.tmp"));
        std::fs::write(&tmp, value).unwrap();
        std::fs::rename(&tmp, self.dir.join(key)).unwrap();
        Ok(())
    }
    fn fence(&mut self) -> weft::Result<()> {
        self.fences += 1;
        let mark = |r: u32| self.dir.join(format!("fence-{}-{r}", self.fences));
        std::fs::write(mark(self.rank), "").unwrap();
        let start = Instant::now();
        while !(0..RANKS).all(|r| mark(r).exists()) {
            assert!(start.elapsed() < Duration::from_secs(60), "fence watchdog");
            std::thread::sleep(Duration::from_millis(1));
        }
        Ok(())
    }
    fn get(&mut self, key: &str) -> weft::Result<String> {
        Ok(std::fs::read_to_string(self.dir.join(key)).unwrap())
    }
    fn abort(&mut self, code: i32, msg: &str) -> ! {
        panic!("abort({code}): {msg}")
    }
    fn finalize(&mut self) -> weft::Result<()> {
        Ok(())
    }
    fn protocol(&self) -> &'static str {
        "test-files"
    }
}

fn hdr(src: u32, seq: u64) -> Header {
    Header {
        kind: 1,
        src,
        cookie: seq,
        ..Header::default()
    }
}

/// Waits for one packet the way the engine will: poll, announce, re-poll, sleep.
fn wait_one(t: &mut ShmTransport, sleeps: &mut u32) -> Header {
    let mut got = None;
    let start = Instant::now();
    loop {
        if t.poll(&mut |h, _| got = Some(*h)) > 0 {
            return got.unwrap();
        }
        t.prepare_sleep();
        if t.poll(&mut |h, _| got = Some(*h)) > 0 {
            t.cancel_sleep();
            return got.unwrap();
        }
        t.sleep(Duration::from_secs(20));
        *sleeps += 1;
        assert!(start.elapsed() < Duration::from_secs(15), "lost wake-up");
    }
}

fn rank_main(rank: u32, dir: &Path, job: String, in_poll: bool) {
    let mut boot = Boot {
        rank,
        size: RANKS,
        node_of: vec![0; RANKS as usize],
        job_id: job,
        pmi: Box::new(FilePmi {
            dir: dir.to_owned(),
            rank,
            fences: 0,
        }),
        universe_base: 0,
        secret: None,
    };
    let mut t = ShmTransport::new(&mut boot, &Tunables::defaults(), in_poll)
        .unwrap()
        .unwrap();
    // With a descriptor, the peer holds a duplicate of it (so a long sleep is safe).
    assert_eq!(t.wake_fd().map(|w| w.1), in_poll.then_some(true));
    let peer = 1 - rank;
    let mut sleeps = 0;
    for i in 0..2000u64 {
        if (i % 2) as u32 == rank {
            if i % 50 == 0 {
                std::thread::sleep(Duration::from_micros(300));
            }
            assert!(t.try_send(peer, &hdr(rank, i), &i.to_le_bytes()));
        } else {
            let h = wait_one(&mut t, &mut sleeps);
            assert_eq!((h.src, h.cookie), (peer, i));
        }
    }
    assert!(
        sleeps > 0,
        "never slept: the wake-up path was not exercised"
    );
    // Rendezvous-style pull: rank 0 offers a buffer, rank 1 reads it from rank 0's memory.
    if rank == 0 {
        let buf: Vec<u8> = (0..1_000_000u32).map(|i| (i % 253) as u8).collect();
        let mut h = hdr(0, 9999);
        h.len = buf.len() as u64;
        h.aux = buf.as_ptr() as u64;
        assert!(t.try_send(1, &h, &[]));
        let fin = wait_one(&mut t, &mut sleeps);
        assert_eq!(fin.cookie, 10000);
        drop(buf);
    } else {
        let rts = wait_one(&mut t, &mut sleeps);
        let mut dst = vec![0u8; rts.len as usize];
        // SAFETY: rank 0 named its buffer in the RTS and keeps it until our FIN.
        match unsafe { t.pull(0, rts.aux, &mut dst) } {
            Ok(()) => assert!(dst.iter().enumerate().all(|(i, &b)| b == (i % 253) as u8)),
            Err(PullError::Unsupported) => eprintln!("single copy unsupported here"),
            Err(PullError::Failed(e)) => panic!("{e}"),
        }
        assert!(t.try_send(0, &hdr(1, 10000), &[]));
    }
    boot.pmi.fence().unwrap();
}

#[test]
fn rank_process() {
    let Ok(rank) = std::env::var("WEFT_TEST_SHM_RANK") else {
        return; // only meaningful when started by the test below
    };
    let dir = PathBuf::from(std::env::var("WEFT_TEST_SHM_DIR").unwrap());
    let job = std::env::var("WEFT_TEST_SHM_JOB").unwrap();
    let in_poll = std::env::var_os("WEFT_TEST_SHM_IN_POLL").is_some();
    rank_main(rank.parse().unwrap(), &dir, job, in_poll);
}

#[test]
fn two_processes_ping_pong_sleep_and_pull() {
    two_processes(false);
}

#[test]
fn two_processes_asleep_in_poll_wake_each_other_through_their_descriptors() {
    two_processes(true);
}

fn two_processes(in_poll: bool) {
    let job = format!("p{}{}", std::process::id(), if in_poll { "p" } else { "" });
    let dir = std::env::temp_dir().join(format!("weft-shm-test-{job}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut kids: Vec<Child> = (0..RANKS)
        .map(|r| {
            Command::new(&exe)
                .args(["--exact", "rank_process", "--nocapture", "--test-threads=1"])
                .env("WEFT_TEST_SHM_RANK", r.to_string())
                .env("WEFT_TEST_SHM_DIR", &dir)
                .env("WEFT_TEST_SHM_JOB", &job)
                .envs(in_poll.then_some(("WEFT_TEST_SHM_IN_POLL", "1")))
                .spawn()
                .unwrap()
        })
        .collect();
    let start = Instant::now();
    let mut ok = vec![None; kids.len()];
    while ok.iter().any(|s| s.is_none()) {
        for (k, s) in kids.iter_mut().zip(ok.iter_mut()) {
            if s.is_none() {
                *s = k.try_wait().unwrap().map(|st| st.success());
            }
        }
        if start.elapsed() > Duration::from_secs(120) {
            for k in &mut kids {
                let _ = k.kill();
            }
            panic!("watchdog: rank processes hung");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = std::fs::remove_dir_all(&dir);
    let left: Vec<_> = std::fs::read_dir("/dev/shm")
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(&format!("weft-{job}-"))
        })
        .collect();
    assert!(left.is_empty(), "segments left behind");
    assert_eq!(ok, vec![Some(true); RANKS as usize], "a rank failed");
}
