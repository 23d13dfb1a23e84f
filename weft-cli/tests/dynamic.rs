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
    for (n, args, env) in [
        (2, &[][..], &[][..]),
        (3, &[][..], &[][..]),
        (3, &["names"][..], &[][..]),
        (3, &[][..], &[("WEFT_TRANSPORTS", "tcp")][..]),
    ] {
        let out = job("connect_accept", n, args, env);
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

#[test]
fn under_hydra_jobs_spawn_and_publish_names_through_its_pmi_2_and_pmi_1_servers() {
    // Hydra (MPICH's mpiexec) serves spawn over both protocols; the parents speak PMI-2 by
    // default, PMI-1 when asked, and the children PMI-1 (see `boot::select`). No weft run:
    // the job's secret and the children's universe ranks travel in the spawn's preput pairs.
    if !installed("mpiexec.hydra") {
        println!("skipped: mpiexec.hydra not installed (scripts/install-mpi-peers.sh installs it)");
        return;
    }
    let exe = build_example("weft", "spawn_probe", true);
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    for (pmi, parents, children) in [("auto", 2, 3), ("1", 1, 2), ("2", 3, 1)] {
        let (what, out) = hydra(pmi, parents, &exe, &children.to_string());
        assert_eq!(out.code, Some(0), "{what}: {out:?}");
        for (who, n) in [("parent", parents), ("child", children)] {
            for r in 0..n {
                let line = format!("spawn_probe: {who} rank {r} of {n} ok");
                assert!(out.stdout.contains(&line), "{what}: no {line:?} in {out:?}");
            }
        }
        wait_none_left("spawn_probe's processes", || pids_of(&exe));
        wait_none_left("weft's /dev/shm segments", weft_segments);
    }
    // Hydra's name service, through PMI-2 and PMI-1: the port's name is published and
    // looked up, then withdrawn (a lookup after that fails).
    let exe = build_example("weft", "connect_accept", true);
    for pmi in ["auto", "1"] {
        let (what, out) = hydra(pmi, 3, &exe, "names");
        assert_eq!(out.code, Some(0), "{what}: {out:?}");
        for r in 0..3 {
            let line = format!("rank {r}: merged rank {r} of 3, sum 3");
            assert!(out.stdout.contains(&line), "{what}: no {line:?} in {out:?}");
        }
    }
}

/// `mpiexec.hydra -n N exe arg` with `WEFT_PMI=pmi`: the command's description and its output.
fn hydra(pmi: &str, n: u32, exe: &std::path::Path, arg: &str) -> (String, Out) {
    let mut c = std::process::Command::new("mpiexec.hydra");
    c.env_remove("WEFT_JOB_ID")
        .env("WEFT_PMI", pmi)
        .env("WEFT_SPAWN_TIMEOUT", "60")
        .args(["-n", &n.to_string()])
        .arg(exe)
        .arg(arg);
    let name = exe.file_name().unwrap_or_default().to_string_lossy();
    let what = format!("WEFT_PMI={pmi} mpiexec.hydra -n {n} {name} {arg}");
    let out = run(c, &what);
    (what, out)
}
