//! Multi-process point-to-point tests: the `p2p_suite` example through `weft run` at 1, 2,
//! 4 and 8 ranks (8 oversubscribes this machine's cores on purpose), and the failure paths:
//! a rank that panics, aborts, or is killed mid-transfer ends the job promptly with a message
//! naming it, a non-zero exit code, and no process or /dev/shm segment left behind.
//!
//! Jobs run one at a time (a global lock), so the leak checks see only their own job.
//!
//! `scripts/test.sh` runs this file twice: as is (shared memory on one node), and with
//! `WEFT_TRANSPORTS=tcp` in the environment, so every case also runs over TCP. The
//! TCP-specific tests at the end set their transports themselves and run in the first pass.

mod common;
use common::*;
use std::sync::Mutex;

static SERIAL: Mutex<()> = Mutex::new(());

fn suite() -> std::path::PathBuf {
    build_example("weft-cli", "p2p_suite", true)
}

fn suite_pids() -> Vec<u32> {
    pids_of(&suite())
}

/// Runs `p2p_suite CASE` on `n` ranks and checks nothing is left behind afterwards.
fn job(n: u32, case: &str) -> Out {
    job_with(n, case, &[])
}

/// Like [`job`], passing `-x NAME=VALUE` settings to the ranks.
fn job_with(n: u32, case: &str, env: &[&str]) -> Out {
    job_args(n, case, &[], env)
}

/// Like [`job_with`], with extra `weft run` arguments.
fn job_args(n: u32, case: &str, run_args: &[&str], env: &[&str]) -> Out {
    let exe = suite();
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let before = weft_segments();
    let mut c = weft();
    c.args(["run", "-n", &n.to_string()]);
    c.args(run_args);
    for kv in env {
        c.args(["-x", kv]);
    }
    c.arg(&exe).arg(case);
    let out = run(
        c,
        &format!("weft run -n {n} {run_args:?} {env:?} p2p_suite {case}"),
    );
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
fn a_caught_panic_with_requests_pending_cancels_or_completes_them() {
    // Shared memory (or TCP, in the WEFT_TRANSPORTS=tcp pass) and TCP explicitly: the
    // pending receive is cancelled, the pending send completed, before their buffers go.
    for env in [&[][..], &["WEFT_TRANSPORTS=tcp"][..]] {
        for n in [2, 3] {
            let out = job_with(n, "caughtpanic", env);
            assert_eq!(out.code, Some(0), "{n} ranks with {env:?}: {out:?}");
            assert!(
                out.stdout
                    .contains(&format!("p2p_suite caughtpanic: ok on {n} ranks")),
                "{out:?}"
            );
        }
    }
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
            "WEFT_SHM_RING_SIZE=\"5000\" is not a power of two",
        ),
        (
            "WEFT_EAGER_LIMIT=lots",
            "WEFT_EAGER_LIMIT=\"lots\" is not a size",
        ),
        ("WEFT_SPIN_COUNT=-1", "WEFT_SPIN_COUNT=\"-1\""),
    ] {
        if setting.starts_with("WEFT_SHM") && tcp_only() {
            continue; // no shared memory in this pass: its settings are not read
        }
        let out = job_with(2, "ring", &[setting]);
        assert_ne!(out.code, Some(0), "{setting}: {out:?}");
        assert!(out.stderr.contains(expect), "{setting}: {out:?}");
    }
}

// ----- TCP ------------------------------------------------------------------------------

const CASES: [&str; 9] = [
    "ring", "allpairs", "storm", "truncate", "probe", "cancel", "sync", "badinput", "comms",
];

/// Whether this pass runs without shared memory (`WEFT_TRANSPORTS=tcp`).
fn tcp_only() -> bool {
    std::env::var("WEFT_TRANSPORTS").is_ok_and(|t| !t.contains("shm"))
}

/// TCP-specific tests set their own transports; the whole-file TCP pass skips them.
fn tcp_pass() -> bool {
    if std::env::var_os("WEFT_TRANSPORTS").is_some() {
        println!("skipped: WEFT_TRANSPORTS is set (this runs in the default pass)");
        return true;
    }
    false
}

#[test]
fn two_fake_nodes_mix_shared_memory_and_tcp_in_one_job() {
    if tcp_pass() {
        return;
    }
    // Ranks 0,1 on node 0 and 2,3 on node 1: same-node pairs use shm, the others TCP.
    for case in CASES {
        let out = job_args(
            4,
            case,
            &["--process-mapping", "(vector,(0,2,2))"],
            &["P2P_RANKS_PER_NODE=2", "WEFT_STATS=1"],
        );
        assert_eq!(out.code, Some(0), "{case}: {out:?}");
    }
    // Round-robin placement: every neighbour in the ring is on the other node.
    let out = job_args(
        4,
        "allpairs",
        &["--process-mapping", "(vector,(0,2,1))"],
        &["P2P_RANKS_PER_NODE=2"],
    );
    assert_eq!(out.code, Some(0), "{out:?}");
}

#[test]
fn ranks_asleep_in_poll_are_woken_by_their_shared_memory_peers() {
    if tcp_pass() {
        return;
    }
    // Two fake nodes, so every rank has sockets and sleeps in poll(2), where its
    // shared-memory peers wake it through its wake-up descriptor. Ranks sleep at once (no
    // spinning or yielding) with a ten-minute safety net: a lost wake-up would stall the job
    // until the watchdog ends it.
    for case in ["barriers", "ring", "storm"] {
        let out = job_args(
            4,
            case,
            &["--process-mapping", "(vector,(0,2,2))"],
            &[
                "P2P_RANKS_PER_NODE=2",
                "WEFT_SPIN_COUNT=0",
                "WEFT_YIELD_COUNT=0",
                "WEFT_SLEEP_TIMEOUT_MS=600000",
                "WEFT_STATS=1",
            ],
        );
        assert_eq!(out.code, Some(0), "{case}: {out:?}");
        assert!(
            sleeps(&out) > 0,
            "{case}: no rank slept, so nothing was tested: {out:?}"
        );
    }
}

/// How many times the ranks slept, from their `WEFT_STATS=1` lines.
fn sleeps(out: &Out) -> u64 {
    out.stderr
        .lines()
        .filter_map(|l| {
            l.split("sleeps: ")
                .nth(1)?
                .split(',')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum()
}

/// Whether this kernel lets a process register for membarrier's global expedited barriers
/// (`MEMBARRIER_CMD_QUERY` lists the command).
fn membarrier_available() -> bool {
    // SAFETY: membarrier(2) with MEMBARRIER_CMD_QUERY (0) touches no memory.
    let cmds = unsafe { libc::syscall(libc::SYS_membarrier, 0, 0, 0) };
    cmds > 0 && cmds & (1 << 1) != 0
}

#[test]
fn ranks_asleep_on_their_futex_are_woken_whichever_side_fences() {
    if tcp_pass() {
        return;
    }
    // Ranks sleep at once, as above, on one node: with a rank per CPU the senders leave their
    // fence to the sleepers' membarrier (asymmetric), unless told not to or oversubscribed.
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
    let over = (cpus + 1) as u32;
    let mut runs = vec![(2, "1", membarrier_available()), (2, "0", false)];
    if over <= 8 {
        runs.push((over, "1", false));
    }
    for (n, setting, asymmetric) in runs {
        for case in ["barriers", "ring", "storm"] {
            let membarrier = format!("WEFT_SHM_MEMBARRIER={setting}");
            let out = job_with(
                n,
                case,
                &[
                    "WEFT_SPIN_COUNT=0",
                    "WEFT_YIELD_COUNT=0",
                    "WEFT_SLEEP_TIMEOUT_MS=600000",
                    "WEFT_STATS=1",
                    &membarrier,
                ],
            );
            let what = format!("{n} ranks, {membarrier}, {case}");
            assert_eq!(out.code, Some(0), "{what}: {out:?}");
            assert!(sleeps(&out) > 0, "{what}: no rank slept: {out:?}");
            let want = if asymmetric {
                "asymmetric"
            } else {
                "symmetric"
            };
            let said = out
                .stderr
                .matches(&format!("wake-up fences: {want}\n"))
                .count();
            assert_eq!(
                said, n as usize,
                "{what}: want {want} fences on every rank: {out:?}"
            );
        }
    }
}

#[test]
fn tcp_full_connect_small_frames_and_both_protocol_crossovers() {
    if tcp_pass() {
        return;
    }
    for env in [
        &["WEFT_TRANSPORTS=tcp", "WEFT_CONNECT=full"][..],
        &[
            "WEFT_TRANSPORTS=tcp",
            "WEFT_TCP_MAX_PACKET=1k",
            "WEFT_TCP_EAGER_LIMIT=0",
        ][..],
        &[
            "WEFT_TRANSPORTS=tcp",
            "WEFT_TCP_EAGER_LIMIT=1m",
            "WEFT_TCP_BUFFER=8k",
        ][..],
    ] {
        for case in ["allpairs", "storm"] {
            let out = job_with(4, case, env);
            assert_eq!(out.code, Some(0), "{case} with {env:?}: {out:?}");
        }
    }
}

#[test]
fn a_congestion_control_the_kernel_refuses_is_one_warning_per_rank_not_a_failure() {
    if tcp_pass() {
        return;
    }
    let out = job_with(
        3,
        "allpairs",
        &[
            "WEFT_TRANSPORTS=tcp",
            "WEFT_TCP_CONGESTION=no-such-algorithm",
        ],
    );
    assert_eq!(out.code, Some(0), "{out:?}");
    let warnings = out
        .stderr
        .lines()
        .filter(|l| l.contains("WEFT_TCP_CONGESTION=\"no-such-algorithm\" refused"))
        .count();
    assert_eq!(warnings, 3, "one warning per rank: {out:?}");
    // The kernel's own default, and the default (reno), work without a word.
    for cc in ["system", "reno"] {
        let env = [
            "WEFT_TRANSPORTS=tcp".to_string(),
            format!("WEFT_TCP_CONGESTION={cc}"),
        ];
        let env: Vec<&str> = env.iter().map(String::as_str).collect();
        let out = job_with(3, "allpairs", &env);
        assert_eq!(out.code, Some(0), "{cc}: {out:?}");
        assert!(!out.stderr.contains("refused"), "{cc}: {out:?}");
    }
}

#[test]
fn tcp_header_only_packets_crossing_on_full_sockets_are_each_sent_once() {
    if tcp_pass() {
        return;
    }
    let env = [
        "WEFT_TRANSPORTS=tcp",
        "WEFT_TCP_BUFFER=4k",
        "WEFT_TCP_EAGER_LIMIT=1k",
        "WEFT_TCP_TIMEOUT=10",
    ];
    // A lost packet hangs the job: the timeout turns that into a failure.
    let out = job_args(4, "ctlstorm", &["--timeout", "50"], &env);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(
        out.stdout.contains("p2p_suite ctlstorm: ok on 4 ranks"),
        "{out:?}"
    );
}

#[test]
fn a_tcp_peer_without_the_job_secret_is_dropped_and_logged_and_the_job_goes_on() {
    if tcp_pass() {
        return;
    }
    let out = job_with(3, "intruder", &["WEFT_TRANSPORTS=tcp"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(
        out.stderr.contains("rank 0: dropped a TCP connection from")
            && out.stderr.contains("bad magic")
            && out.stderr.contains("does not hold the job's secret"),
        "{out:?}"
    );
}

#[test]
fn idle_intruders_on_a_rank_s_listener_are_dropped_and_logged_and_the_job_goes_on() {
    if tcp_pass() {
        return;
    }
    // 1,100 crowd the connections waiting to prove themselves (the oldest go as new ones
    // come); 20 wait there until their deadline (the job goes on meanwhile).
    for (idlers, wait, why) in [
        (
            "1100",
            "0",
            "connections from that address were waiting to prove they belong to the job",
        ),
        (
            "20",
            "1500",
            "did not prove it belongs to the job within 500 ms",
        ),
    ] {
        let env = [
            "WEFT_TRANSPORTS=tcp",
            "WEFT_TCP_HANDSHAKE_TIMEOUT_MS=500",
            &format!("P2P_IDLERS={idlers}"),
            &format!("P2P_IDLE_WAIT_MS={wait}"),
        ];
        let out = job_args(4, "idlers", &["--timeout", "50"], &env);
        assert_eq!(out.code, Some(0), "{idlers}: {out:?}");
        assert!(
            out.stdout.contains("p2p_suite idlers: ok on 4 ranks"),
            "{out:?}"
        );
        let dropped = out
            .stderr
            .lines()
            .filter(|l| l.contains("rank 0: dropped a TCP connection from 127.0.0.1:"))
            .count();
        // Logged, but not once per intruder.
        assert!(out.stderr.contains(why), "{idlers}: {out:?}");
        assert!(dropped <= 20, "{idlers}: {dropped} lines: {out:?}");
    }
}

#[test]
fn bad_tcp_settings_fail_start_up_with_a_message_naming_them() {
    if tcp_pass() {
        return;
    }
    for (env, expect) in [
        (
            &["WEFT_TRANSPORTS=tcp", "WEFT_TCP_IF=nosuchif0"][..],
            "WEFT_TCP_IF=\"nosuchif0\": no such interface",
        ),
        (
            &["WEFT_TRANSPORTS=tcp", "WEFT_TCP_ADDR=10.255.255.0/24"][..],
            "no interface of this host that is up has an address in that subnet",
        ),
        (
            &["WEFT_TRANSPORTS=tcp", "WEFT_TCP_ADDR=192.0.2.1"][..],
            "cannot listen on 192.0.2.1",
        ),
        (&["WEFT_TRANSPORTS=udp"][..], "WEFT_TRANSPORTS=\"udp\""),
        (&["WEFT_CONNECT=eager"][..], "WEFT_CONNECT=\"eager\""),
    ] {
        let out = job_with(2, "ring", env);
        assert_ne!(out.code, Some(0), "{env:?}: {out:?}");
        assert!(out.stderr.contains(expect), "{env:?}: {out:?}");
    }
    // Two nodes but TCP excluded: no transport reaches the other node.
    let out = job_args(
        2,
        "ring",
        &["--process-mapping", "(vector,(0,2,1))"],
        &["WEFT_TRANSPORTS=shm"],
    );
    assert_ne!(out.code, Some(0), "{out:?}");
    assert!(
        out.stderr
            .contains("is on another node, but WEFT_TRANSPORTS=shm has no transport"),
        "{out:?}"
    );
}
