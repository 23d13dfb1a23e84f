//! Dynamic processes from Rust through `weft run`: two halves of a job joining at a port
//! (the `connect_accept` example) over shared memory and TCP, a job spawning copies of
//! itself (`spawn_probe`), and a spawned process that panics ending the whole universe with
//! a message naming it and nothing left behind. (The C side: `c_abi.rs`; the launcher's
//! side with fake ranks: `spawn.rs`.)

mod common;
use common::*;
use std::sync::Mutex;

/// Jobs run one at a time, so the leak checks see only their own.
static SERIAL: Mutex<()> = Mutex::new(());

fn job(example: &str, n: u32, args: &[&str], env: &[(&str, &str)]) -> Out {
    let exe = build_example("weft", example, true);
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut c = weft();
    c.args(["run", "-n", &n.to_string(), "--timeout", "120"])
        .arg(&exe)
        .args(args)
        .envs(env.iter().copied());
    let out = run(c, &format!("weft run -n {n} {example} {args:?}"));
    wait_none_left(&format!("{example}'s processes"), || pids_of(&exe));
    wait_none_left("weft's /dev/shm segments", weft_segments);
    out
}

#[test]
fn two_halves_of_a_job_join_at_a_port_over_shared_memory_and_tcp() {
    for (n, env) in [
        (2, &[][..]),
        (3, &[][..]),
        (3, &[("WEFT_TRANSPORTS", "tcp")][..]),
    ] {
        let out = job("connect_accept", n, &[], env);
        assert_eq!(out.code, Some(0), "{out:?}");
        for r in 0..n {
            let line = format!("rank {r}: merged rank {r} of {n}, sum {}", n * (n - 1) / 2);
            assert!(out.stdout.contains(&line), "no {line:?} in {out:?}");
        }
    }
}

#[test]
fn a_job_spawns_copies_of_itself_and_they_talk_and_merge() {
    // 3 parents and 3 children on 2 CPUs: oversubscribed on purpose.
    let out = job("spawn_probe", 3, &["3"], &[]);
    assert_eq!(out.code, Some(0), "{out:?}");
    for r in 0..3 {
        for who in ["parent", "child"] {
            let line = format!("spawn_probe: {who} rank {r} of 3 ok");
            assert!(out.stdout.contains(&line), "no {line:?} in {out:?}");
        }
    }
}

#[test]
fn a_spawned_process_that_panics_ends_the_whole_universe_naming_it() {
    let out = job("spawn_probe", 2, &["2", "panic"], &[]);
    assert_ne!(out.code, Some(0), "{out:?}");
    assert!(
        out.stderr.contains("child rank 1 panics on purpose"),
        "{out:?}"
    );
    assert!(out.stderr.contains("of spawned job 1"), "{out:?}");
}
