//! Weft programs under a real Slurm: `scripts/slurm-local.sh` starts a slurmctld and two
//! slurmd "nodes" (n1, n2) on this host, and the tests run `srun --mpi=pmi2` jobs on them:
//! boot_probe across both nodes (PMI-2 by default, PMI-1 through the same plugin when asked,
//! PMIx with `--mpi=pmix` when libpmix is installed), and the point-to-point suite on one
//! node and across both.
//!
//! Needs root and Debian's slurm-wlm (`scripts/install-slurm.sh`); without them every test
//! prints why it is skipped and passes, unless `WEFT_REQUIRE_SLURM=1` (scripts/test.sh sets it
//! when it could install Slurm as root), which turns a skip into a failure. The daemons are
//! stopped by a guard's `Drop`, so also when a test fails; each test checks that no rank
//! process, slurmstepd or /dev/shm segment of its own is left behind.

mod common;
use common::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

/// One local Slurm at a time: the daemons listen on fixed ports.
static SERIAL: Mutex<()> = Mutex::new(());

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/slurm-local.sh")
}

/// Skips the test with `why`, or fails it when `WEFT_REQUIRE_SLURM=1`.
fn skip(why: &str) {
    if std::env::var("WEFT_REQUIRE_SLURM").is_ok_and(|v| v == "1") {
        panic!("WEFT_REQUIRE_SLURM=1 but the Slurm tests cannot run: {why}");
    }
    eprintln!("skipped: {why}");
}

/// Process ids whose command name (`/proc/PID/comm`) is `name`.
fn pids_named(name: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok()?.file_name().into_string().ok()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == name)
        })
        .filter(|&pid| is_running(pid))
        .collect()
}

/// Shared-memory segments of Slurm jobs: Weft names them `weft-JOB-...`, where JOB is the
/// step id (`7_0` under PMI-2/PMI-1, `slurm_pmix_7_0` under PMIx). Other launchers' jobs
/// (other tests running meanwhile) are not counted.
fn weft_segments() -> Vec<String> {
    let slurm_job = |n: &str| {
        let Some(rest) = n.strip_prefix("weft-") else {
            return false;
        };
        let rest = rest.strip_prefix("slurm_pmix_").unwrap_or(rest);
        let job = rest.split('-').next().unwrap_or("");
        job.split_once('_').is_some_and(|(a, b)| {
            !a.is_empty()
                && !b.is_empty()
                && a.bytes().all(|c| c.is_ascii_digit())
                && b.bytes().all(|c| c.is_ascii_digit())
        })
    };
    std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter(|n| slurm_job(n))
                .collect()
        })
        .unwrap_or_default()
}

/// Polls (no duration is asserted; the watchdog bounds the wait) until `pids` are gone.
fn wait_gone(pids: &[u32], what: &str) {
    let start = Instant::now();
    while pids.iter().any(|&p| is_running(p)) {
        assert!(
            start.elapsed() < WATCHDOG,
            "{what} still running: {:?}",
            pids.iter().filter(|&&p| is_running(p)).collect::<Vec<_>>()
        );
        thread::sleep(Duration::from_millis(50));
    }
}

/// A running local Slurm; stopping it (by the daemons' PIDs) on drop.
struct Slurm {
    dir: PathBuf,
    conf: PathBuf,
    daemons: Vec<u32>,
    stepds_before: Vec<u32>,
    segments_before: Vec<String>,
    _serial: std::sync::MutexGuard<'static, ()>,
}

impl Slurm {
    /// Starts Slurm for test `name`, or returns `None` after printing why it cannot.
    fn start(name: &str) -> Option<Slurm> {
        let serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: geteuid has no preconditions and cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            skip("the Slurm tests need root (slurmd starts jobs as any user)");
            return None;
        }
        let missing: Vec<&str> = ["srun", "sinfo", "slurmctld", "slurmd"]
            .into_iter()
            .filter(|p| !installed(p))
            .collect();
        if !missing.is_empty() {
            skip(&format!(
                "{missing:?} not installed (scripts/install-slurm.sh installs slurm-wlm)"
            ));
            return None;
        }
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("slurm-{name}"));
        // A previous run that was killed outright may have left its daemons: stop them.
        if dir.exists() {
            let _ = Command::new("bash")
                .arg(script())
                .arg("stop")
                .arg(&dir)
                .output();
            let _ = std::fs::remove_dir_all(&dir);
        }
        let stepds_before = pids_named("slurmstepd");
        let segments_before = weft_segments();
        let mut c = Command::new("bash");
        c.arg(script()).arg("start").arg(&dir);
        let out = run(c, "scripts/slurm-local.sh start");
        let read_pid = |f: &str| -> Option<u32> {
            std::fs::read_to_string(dir.join(f))
                .ok()?
                .trim()
                .parse()
                .ok()
        };
        let daemons: Vec<u32> = ["ctld.pid", "slurmd-n1.pid.ours", "slurmd-n2.pid.ours"]
            .iter()
            .filter_map(|f| read_pid(f))
            .collect();
        let slurm = Slurm {
            conf: dir.join("slurm.conf"),
            dir,
            daemons,
            stepds_before,
            segments_before,
            _serial: serial,
        };
        if out.code != Some(0) {
            let why = format!("a local Slurm could not be started: {out:?}");
            drop(slurm);
            skip(&why);
            return None;
        }
        Some(slurm)
    }

    /// `srun ARGS EXE EXE_ARGS` against this Slurm, under the watchdog, with `env` added
    /// (srun passes the environment on to the tasks). `WEFT_PMI` is unset unless in `env`.
    fn srun(&self, args: &[&str], exe: &Path, exe_args: &[&str], env: &[(&str, &str)]) -> Out {
        let mut c = Command::new("srun");
        c.env("SLURM_CONF", &self.conf)
            .env_remove("WEFT_PMI")
            .env_remove("WEFT_JOB_ID")
            .env_remove("WEFT_PMI_DEBUG")
            .envs(env.iter().copied())
            .args(args)
            .arg(exe)
            .args(exe_args);
        let what = format!("{env:?} srun {args:?} {} {exe_args:?}", exe.display());
        run(c, &what)
    }
}

impl Drop for Slurm {
    fn drop(&mut self) {
        let out = Command::new("bash")
            .arg(script())
            .arg("stop")
            .arg(&self.dir)
            .stdin(Stdio::null())
            .output();
        if !out.as_ref().is_ok_and(|o| o.status.success()) {
            eprintln!("scripts/slurm-local.sh stop failed: {out:?}");
        }
        if thread::panicking() {
            // Report, but do not panic again while unwinding.
            let left: Vec<u32> = self
                .daemons
                .iter()
                .copied()
                .filter(|&p| is_running(p))
                .collect();
            if !left.is_empty() {
                eprintln!("slurm daemons {left:?} still running after stop");
            }
            return;
        }
        wait_gone(&self.daemons, "slurm daemons");
        let stepds: Vec<u32> = pids_named("slurmstepd")
            .into_iter()
            .filter(|p| !self.stepds_before.contains(p))
            .collect();
        wait_gone(&stepds, "slurmstepd processes");
        let leaked: Vec<String> = weft_segments()
            .into_iter()
            .filter(|s| !self.segments_before.contains(s))
            .collect();
        assert!(leaked.is_empty(), "shared-memory segments left: {leaked:?}");
    }
}

/// Checks boot_probe's output for 4 ranks on 2 nodes, 2 per node, using `protocol`.
fn check_two_nodes(out: &Out, protocol: &str) {
    assert_eq!(out.code, Some(0), "{out:?}");
    for r in 0..4 {
        let local = if r < 2 { "[0, 1]" } else { "[2, 3]" };
        let want = format!("boot_probe: rank {r} of 4, protocol {protocol}, job ");
        let line = out
            .stdout
            .lines()
            .find(|l| l.starts_with(&want))
            .unwrap_or_else(|| panic!("no start line for rank {r}: {out:?}"));
        assert!(
            line.ends_with(&format!("nodes [0, 0, 1, 1], local ranks {local}")),
            "{line}"
        );
        assert!(
            out.stdout
                .contains(&format!("boot_probe: rank {r} ring ok")),
            "{out:?}"
        );
        assert!(
            out.stdout
                .contains(&format!("boot_probe: rank {r} finalized")),
            "{out:?}"
        );
    }
}

#[test]
fn boot_probe_across_two_slurm_nodes() {
    let Some(slurm) = Slurm::start("probe") else {
        return;
    };
    let probe = build_example("weft", "boot_probe", false);
    let two_nodes = ["-N", "2", "-n", "4", "--mpi=pmi2"];
    // The job really spans both slurmd nodes, two tasks on each.
    let mut c = Command::new("srun");
    c.env("SLURM_CONF", &slurm.conf).args(two_nodes).args([
        "sh",
        "-c",
        "echo \"task $SLURM_PROCID on $SLURMD_NODENAME\"",
    ]);
    let out = run(c, "srun -N 2 -n 4 sh -c 'echo ...'");
    assert_eq!(out.code, Some(0), "{out:?}");
    for (r, node) in [(0, "n1"), (1, "n1"), (2, "n2"), (3, "n2")] {
        assert!(
            out.stdout.contains(&format!("task {r} on {node}\n")),
            "{out:?}"
        );
    }

    // PMI-2 by default; PMI-1 through the same plugin when asked (or when falling back).
    let out = slurm.srun(&two_nodes, &probe, &[], &[]);
    check_two_nodes(&out, "pmi-2");
    let out = slurm.srun(&two_nodes, &probe, &[], &[("WEFT_PMI", "1")]);
    check_two_nodes(&out, "pmi-1");

    // PMI-2 abort: Slurm cancels the step; the aborting task's code is reported.
    let out = slurm.srun(&two_nodes, &probe, &["--abort", "1:7"], &[]);
    assert_ne!(out.code, Some(0), "{out:?}");
    assert!(
        out.stderr.contains("rank 1 aborting the job with code 7")
            && out.stderr.contains("task 1: Exited with exit code 7"),
        "{out:?}"
    );
    assert!(!out.stderr.contains("second fence returned"), "{out:?}");
    drop(slurm);
}

/// The point-to-point cases that pass at any size (the failure cases are covered by p2p.rs).
const P2P_CASES: &[&str] = &[
    "ring", "allpairs", "storm", "truncate", "probe", "cancel", "sync", "badinput", "comms",
    "barriers",
];

/// Runs [`P2P_CASES`] on 4 ranks, `per_node` of them on each node.
fn p2p_cases(slurm: &Slurm, srun_args: &[&str], per_node: u32) {
    let suite = build_example("weft-cli", "p2p_suite", true);
    let per_node = per_node.to_string();
    let env = [("P2P_RANKS_PER_NODE", per_node.as_str())];
    for case in P2P_CASES {
        let out = slurm.srun(srun_args, &suite, &[case], &env);
        assert_eq!(
            out.code,
            Some(0),
            "{case} under srun {srun_args:?}: {out:?}"
        );
        assert!(
            out.stdout
                .contains(&format!("p2p_suite {case}: ok on 4 ranks")),
            "{out:?}"
        );
    }
    wait_gone(&pids_of(&suite), "p2p_suite ranks");
}

fn pids_of(exe: &Path) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok()?.file_name().into_string().ok()?.parse::<u32>().ok())
        .filter(|pid| std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|p| p == exe))
        .filter(|&pid| is_running(pid))
        .collect()
}

#[test]
fn p2p_suite_under_slurm_on_one_node() {
    let Some(slurm) = Slurm::start("p2p1") else {
        return;
    };
    p2p_cases(
        &slurm,
        &["-N", "1", "-n", "4", "--mpi=pmi2", "--overcommit"],
        4,
    );
    drop(slurm);
}

#[test]
/// Shared memory between the two ranks of each node, TCP between the nodes.
fn p2p_suite_across_two_slurm_nodes() {
    let Some(slurm) = Slurm::start("p2p2") else {
        return;
    };
    p2p_cases(&slurm, &["-N", "2", "-n", "4", "--mpi=pmi2"], 2);
    drop(slurm);
}

fn pmix_available() -> bool {
    Command::new("pkg-config")
        .args(["--exists", "pmix"])
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn pmix_feature_under_srun_mpi_pmix() {
    if !pmix_available() {
        // Not a Slurm problem: WEFT_REQUIRE_SLURM does not apply.
        eprintln!(
            "skipped: libpmix not installed (pkg-config pmix; scripts/install-mpi-peers.sh \
             installs it)"
        );
        return;
    }
    let Some(slurm) = Slurm::start("pmix") else {
        return;
    };
    let probe = build_example_with_features("weft", "boot_probe", false, "pmix");
    let suite = build_example_with_features("weft-cli", "p2p_suite", true, "pmix");
    let out = slurm.srun(&["-N", "2", "-n", "4", "--mpi=pmix"], &probe, &[], &[]);
    check_two_nodes(&out, "pmix");
    // Across both nodes: PMIx bootstrap, shared memory within a node, TCP between them.
    for case in ["ring", "allpairs", "comms"] {
        let args = ["-N", "2", "-n", "4", "--mpi=pmix"];
        let out = slurm.srun(&args, &suite, &[case], &[("P2P_RANKS_PER_NODE", "2")]);
        assert_eq!(out.code, Some(0), "{case} under srun --mpi=pmix: {out:?}");
        assert!(
            out.stdout
                .contains(&format!("p2p_suite {case}: ok on 4 ranks")),
            "{out:?}"
        );
    }
    // A build without the feature refuses clearly instead of starting as 4 singletons.
    let plain = build_example("weft", "boot_probe", false);
    let out = slurm.srun(&["-N", "1", "-n", "2", "--mpi=pmix"], &plain, &[], &[]);
    assert_ne!(out.code, Some(0), "{out:?}");
    assert!(out.stderr.contains("the `pmix` feature"), "{out:?}");
    drop(slurm);
}
