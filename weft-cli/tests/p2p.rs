//! Multi-process point-to-point tests: the `p2p_suite` example through `weft run` at 1, 2,
//! 4 and 8 ranks (8 oversubscribes this machine's cores on purpose), and the failure paths:
//! a rank that panics, aborts, or is killed mid-transfer ends the job promptly with a message
//! naming it, a non-zero exit code, and no process or /dev/shm segment left behind.
//!
//! Jobs run one at a time (a global lock), so the leak checks see only their own job.

mod common;
use common::*;
use std::sync::Mutex;

static SERIAL: Mutex<()> = Mutex::new(());

fn suite() -> std::path::PathBuf {
    build_example("weft-cli", "p2p_suite", true)
}

fn weft_segments() -> Vec<String> {
    std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter(|n| n.starts_with("weft-"))
                .collect()
        })
        .unwrap_or_default()
}

fn suite_pids() -> Vec<u32> {
    let exe = suite();
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok()?.file_name().into_string().ok()?.parse::<u32>().ok())
        .filter(|pid| std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|p| p == exe))
        .filter(|&pid| is_running(pid))
        .collect()
}

/// Runs `p2p_suite CASE` on `n` ranks and checks nothing is left behind afterwards.
fn job(n: u32, case: &str) -> Out {
    job_with(n, case, &[])
}

/// Like [`job`], passing `-x NAME=VALUE` settings to the ranks.
fn job_with(n: u32, case: &str, env: &[&str]) -> Out {
    let exe = suite();
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let before = weft_segments();
    let mut c = weft();
    c.args(["run", "-n", &n.to_string()]);
    for kv in env {
        c.args(["-x", kv]);
    }
    c.arg(&exe).arg(case);
    let out = run(c, &format!("weft run -n {n} {env:?} p2p_suite {case}"));
    let leaked: Vec<String> = weft_segments()
        .into_iter()
        .filter(|s| !before.contains(s))
        .collect();
    assert!(
        leaked.is_empty(),
        "{case} on {n} ranks left shared-memory segments {leaked:?}\n{out:?}"
    );
    let left = suite_pids();
    assert!(
        left.is_empty(),
        "{case} on {n} ranks left processes {left:?}\n{out:?}"
    );
    out
}

fn passes_at_every_size(case: &str) {
    for n in [1, 2, 4, 8] {
        let out = job(n, case);
        assert_eq!(out.code, Some(0), "{case} on {n} ranks: {out:?}");
        assert!(
            out.stdout
                .contains(&format!("p2p_suite {case}: ok on {n} ranks")),
            "{out:?}"
        );
    }
}

#[test]
fn ring() {
    passes_at_every_size("ring");
}

#[test]
fn all_pairs_every_size_0_to_16_mib_data_checked() {
    passes_at_every_size("allpairs");
}

#[test]
fn all_pairs_through_the_pipelined_fallback_and_a_tiny_ring() {
    // No single copy: rendezvous data is pushed through the ring (Sun's cyclic copy).
    // A 4 KiB ring: every message is fragmented and senders constantly hit a full ring.
    for env in [
        &["WEFT_SHM_SINGLE_COPY=0"][..],
        &[
            "WEFT_SHM_RING_SIZE=4k",
            "WEFT_EAGER_LIMIT=2k",
            "WEFT_SPLIT_COPY_MIN=0",
        ][..],
        &["WEFT_EAGER_LIMIT=0", "WEFT_SPLIT_COPY_MIN=1"][..],
    ] {
        for n in [2, 4] {
            let out = job_with(n, "allpairs", env);
            assert_eq!(
                out.code,
                Some(0),
                "allpairs on {n} ranks with {env:?}: {out:?}"
            );
        }
        let out = job_with(4, "storm", env);
        assert_eq!(out.code, Some(0), "storm with {env:?}: {out:?}");
    }
}

#[test]
fn any_source_any_tag_storm_keeps_per_sender_order() {
    passes_at_every_size("storm");
}

#[test]
fn truncation_is_a_typed_error_naming_both_sizes() {
    passes_at_every_size("truncate");
}

#[test]
fn probe_and_matched_probe() {
    passes_at_every_size("probe");
}

#[test]
fn cancel_of_a_pending_receive() {
    passes_at_every_size("cancel");
}

#[test]
fn synchronous_send_completes_only_when_matched() {
    passes_at_every_size("sync");
}

#[test]
fn bad_input_gets_typed_errors_naming_call_and_values() {
    passes_at_every_size("badinput");
}

#[test]
fn communicators_dup_split_shared_and_context_recycling() {
    passes_at_every_size("comms");
}

#[test]
fn barrier_heavy_job_on_oversubscribed_cores() {
    passes_at_every_size("barriers");
}

#[test]
fn a_panicking_rank_ends_the_job_with_a_message() {
    for n in [2, 8] {
        let out = job(n, "panic");
        assert_eq!(out.code, Some(101), "{out:?}");
        let last = n - 1;
        assert!(
            out.stderr.contains(&format!("rank {last} panicked")),
            "{out:?}"
        );
        assert!(
            out.stderr.contains(&format!("weft run: rank {last}")),
            "{out:?}"
        );
    }
}

#[test]
fn an_aborting_rank_ends_the_job_with_its_code() {
    for n in [2, 8] {
        let out = job(n, "abort");
        assert_eq!(out.code, Some(7), "{out:?}");
        assert!(
            out.stderr
                .contains(&format!("rank {} called abort(7)", n - 1)),
            "{out:?}"
        );
    }
}

#[test]
fn a_rank_killed_mid_transfer_ends_the_job() {
    for n in [2, 4, 8] {
        let out = job(n, "kill");
        assert_eq!(out.code, Some(128 + 9), "{out:?}");
        assert!(
            out.stderr.contains(&format!("rank {} (pid", n - 1)) && out.stderr.contains("SIGKILL"),
            "{out:?}"
        );
    }
}

#[test]
fn weft_programs_run_under_mpich_hydra() {
    if std::process::Command::new("mpiexec.hydra")
        .arg("--version")
        .output()
        .is_err()
    {
        println!("skipped: mpiexec.hydra (Debian mpich) is not installed");
        return;
    }
    let exe = suite();
    for case in ["ring", "storm", "allpairs", "comms"] {
        let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let mut c = std::process::Command::new("mpiexec.hydra");
        c.args(["-n", "4"]).arg(&exe).arg(case);
        let out = run(c, &format!("mpiexec.hydra -n 4 p2p_suite {case}"));
        assert_eq!(out.code, Some(0), "{case} under Hydra: {out:?}");
        assert!(
            out.stdout
                .contains(&format!("p2p_suite {case}: ok on 4 ranks")),
            "{out:?}"
        );
    }
}

#[test]
fn bad_tunables_fail_start_up_with_a_message_naming_them() {
    for (setting, expect) in [
        (
            "WEFT_SHM_RING_SIZE=5000",
            "WEFT_SHM_RING_SIZE=5000 is not a power of two",
        ),
        (
            "WEFT_EAGER_LIMIT=lots",
            "WEFT_EAGER_LIMIT=\"lots\" is not a size",
        ),
        ("WEFT_SPIN_COUNT=-1", "WEFT_SPIN_COUNT=\"-1\""),
    ] {
        let out = job_with(2, "ring", &[setting]);
        assert_ne!(out.code, Some(0), "{setting}: {out:?}");
        assert!(out.stderr.contains(expect), "{setting}: {out:?}");
    }
}
