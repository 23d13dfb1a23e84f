//! Runs the real `weft` binary: boot_probe at several sizes, output tagging, environment,
//! exit codes, failure handling (signal death, abort, missing finalize, time limit, Ctrl-C),
//! and external clients (an MPICH program under `weft run`, boot_probe under Hydra).
//!
//! No test asserts a duration; every child runs under a watchdog that turns a hang into a
//! failure.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

mod common;
use common::*;

/// The boot_probe example, built once for all tests.
fn boot_probe() -> PathBuf {
    build_example("weft", "boot_probe", false)
}

fn probe_job(n: u32, extra: &[&str]) -> Out {
    let mut c = weft();
    c.args(["run", "-n", &n.to_string()])
        .arg(boot_probe())
        .args(extra);
    run(c, &format!("weft run -n {n} boot_probe {extra:?}"))
}

fn check_probe_success(out: &Out, n: usize) {
    check_probe_protocol(out, n, "pmi-1");
}

/// Like [`check_probe_success`], with the PMI protocol every rank must report.
fn check_probe_protocol(out: &Out, n: usize, protocol: &str) {
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(out.stdout.matches("ring ok").count(), n, "{out:?}");
    assert_eq!(out.stdout.matches(" finalized").count(), n, "{out:?}");
    let nodes = format!("nodes {:?}", vec![0; n]);
    let mut jobs: Vec<&str> = Vec::new();
    for r in 0..n {
        let line = out
            .stdout
            .lines()
            .find(|l| l.starts_with(&format!("boot_probe: rank {r} of {n}, protocol {protocol}")))
            .unwrap_or_else(|| panic!("no start line for rank {r}: {out:?}"));
        assert!(line.contains(&nodes), "{line}");
        let job = line
            .split("job ")
            .nth(1)
            .unwrap()
            .split(',')
            .next()
            .unwrap();
        jobs.push(job);
    }
    jobs.dedup();
    assert_eq!(jobs.len(), 1, "every rank sees the same job id: {jobs:?}");
}

#[test]
fn boot_probe_at_1_2_4_8_ranks() {
    for n in [1, 2, 4, 8] {
        let out = probe_job(n, &[]);
        check_probe_success(&out, n as usize);
    }
}

#[test]
fn example_flag_builds_with_cargo_and_runs() {
    let mut c = weft();
    c.args(["run", "-n", "4", "--example", "boot_probe", "-p", "weft"]);
    let child = c
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = finish(child, BUILD_WATCHDOG, "weft run --example boot_probe");
    check_probe_success(&out, 4);
}

#[test]
fn tag_output_prefixes_every_line_with_the_rank() {
    let mut c = weft();
    c.args(["run", "-n", "3", "--tag-output", "sh", "-c"])
        .arg("echo out-$PMI_RANK; echo second-$PMI_RANK; echo err-$PMI_RANK >&2");
    let out = run(c, "weft run --tag-output");
    assert_eq!(out.code, Some(0), "{out:?}");
    for r in 0..3 {
        assert!(out.stdout.contains(&format!("[{r}] out-{r}\n")), "{out:?}");
        assert!(
            out.stdout.contains(&format!("[{r}] second-{r}\n")),
            "{out:?}"
        );
        assert!(out.stderr.contains(&format!("[{r}] err-{r}\n")), "{out:?}");
    }
    assert!(out.stdout.lines().all(|l| l.starts_with('[')), "{out:?}");

    let mut c = weft();
    c.args(["run", "-n", "2", "sh", "-c", "echo plain-$PMI_RANK"]);
    let out = run(c, "weft run without tags");
    assert!(out.stdout.contains("plain-0\n") && out.stdout.contains("plain-1\n"));
    assert!(!out.stdout.contains('['), "{out:?}");
}

#[test]
fn environment_contract_and_x_passing() {
    let mut c = weft();
    c.env("WEFT_TEST_FROM_LAUNCHER", "launcher-value")
        .env("WEFT_TEST_INHERITED", "inherited")
        .args([
            "run",
            "-n",
            "2",
            "-x",
            "WEFT_TEST_SET=given=with=equals",
            "-x",
            "WEFT_TEST_FROM_LAUNCHER",
            "sh",
            "-c",
        ])
        .arg(
            "echo \"r=$PMI_RANK s=$PMI_SIZE lr=$MPI_LOCALRANKID ln=$MPI_LOCALNRANKS \
             fd=$PMI_FD job=$WEFT_JOB_ID kvs=$PMI_JOBID set=$WEFT_TEST_SET \
             from=$WEFT_TEST_FROM_LAUNCHER inh=$WEFT_TEST_INHERITED\"",
        );
    let out = run(c, "weft run -x");
    assert_eq!(out.code, Some(0), "{out:?}");
    let mut jobs = Vec::new();
    for r in 0..2 {
        let line = out
            .stdout
            .lines()
            .find(|l| l.starts_with(&format!("r={r} ")))
            .unwrap_or_else(|| panic!("{out:?}"));
        assert!(line.contains(&format!("s=2 lr={r} ln=2 fd=")), "{line}");
        assert!(line.contains("set=given=with=equals"), "{line}");
        assert!(line.contains("from=launcher-value"), "{line}");
        assert!(line.contains("inh=inherited"), "{line}");
        let job = line
            .split("job=")
            .nth(1)
            .unwrap()
            .split(' ')
            .next()
            .unwrap();
        assert!(
            !job.is_empty() && job.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
            "{line}"
        );
        assert!(line.contains(&format!("kvs=weft_{job} ")), "{line}");
        jobs.push(job.to_owned());
    }
    assert_eq!(jobs[0], jobs[1]);

    let mut c = weft();
    c.env_remove("WEFT_TEST_SURELY_UNSET").args([
        "run",
        "-n",
        "1",
        "-x",
        "WEFT_TEST_SURELY_UNSET",
        "true",
    ]);
    let out = run(c, "weft run -x UNSET");
    assert_ne!(out.code, Some(0), "{out:?}");
    assert!(
        out.stderr.contains("WEFT_TEST_SURELY_UNSET is not set"),
        "{out:?}"
    );
}

/// The CPUs in a `Cpus_allowed_list` value such as `0-3,6`.
fn cpu_list(text: &str) -> Vec<usize> {
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => cpus.extend(a.parse::<usize>().unwrap()..=b.parse::<usize>().unwrap()),
            None => cpus.push(part.parse().unwrap()),
        }
    }
    cpus
}

/// Each rank's allowed CPUs, by rank, from a job printing `RANK LIST` lines.
fn rank_cpus(c: Command, what: &str, n: usize) -> Vec<Vec<usize>> {
    let out = run(c, what);
    assert_eq!(out.code, Some(0), "{out:?}");
    let mut by_rank = vec![Vec::new(); n];
    for line in out.stdout.lines() {
        let (r, list) = line.split_once(' ').unwrap();
        by_rank[r.parse::<usize>().unwrap()] = cpu_list(list);
    }
    by_rank
}

#[test]
fn bind_to_core_puts_each_local_rank_on_its_own_cpu_in_turn() {
    let print = "echo $PMI_RANK $(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status)";
    let mine = std::fs::read_to_string("/proc/self/status").unwrap();
    let mine = cpu_list(
        mine.lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .unwrap(),
    );
    let n = mine.len() + 1; // one more rank than CPUs: the last wraps around
    let mut c = weft();
    c.args([
        "run",
        "-n",
        &n.to_string(),
        "--bind-to",
        "core",
        "sh",
        "-c",
        print,
    ]);
    // Rank r alone on the launcher's (r mod count)-th CPU.
    let in_turn =
        |k: usize| -> Vec<Vec<usize>> { (0..k).map(|r| vec![mine[r % mine.len()]]).collect() };
    assert_eq!(rank_cpus(c, "weft run --bind-to core", n), in_turn(n));
    // The environment names the policy too; without one, ranks may run anywhere the
    // launcher may.
    let mut c = weft();
    c.env("WEFT_BIND_TO", "core")
        .args(["run", "-n", "1", "sh", "-c", print]);
    assert_eq!(rank_cpus(c, "WEFT_BIND_TO=core", 1), [vec![mine[0]]]);
    let mut c = weft();
    c.env_remove("WEFT_BIND_TO")
        .args(["run", "-n", "2", "sh", "-c", print]);
    assert_eq!(rank_cpus(c, "no binding", 2), [mine.clone(), mine.clone()]);
    // Through a proxy (--hosts): the same placement per host.
    let mut c = weft();
    c.args([
        "run",
        "-n",
        "2",
        "--hosts",
        "localhost:2",
        "--bind-to",
        "core",
        "sh",
        "-c",
        print,
    ]);
    assert_eq!(
        rank_cpus(c, "weft run --hosts localhost --bind-to core", 2),
        in_turn(2)
    );
    // A policy that does not exist is an error naming it.
    let mut c = weft();
    c.env("WEFT_BIND_TO", "socket")
        .args(["run", "-n", "1", "true"]);
    let out = run(c, "WEFT_BIND_TO=socket");
    assert_ne!(out.code, Some(0), "{out:?}");
    assert!(
        out.stderr
            .contains("WEFT_BIND_TO=\"socket\" is not a binding"),
        "{out:?}"
    );
}

#[test]
fn first_failing_exit_code_is_passed_on() {
    let mut c = weft();
    c.args(["run", "-n", "4", "sh", "-c"])
        .arg("if [ \"$PMI_RANK\" = 2 ]; then exit 3; fi; exec sleep 30");
    let out = run(c, "weft run exit 3");
    assert_eq!(out.code, Some(3), "{out:?}");
    assert!(
        out.stderr.contains("rank 2 (pid ") && out.stderr.contains("exited with code 3"),
        "{out:?}"
    );
    assert!(out.stderr.contains("ending the job"), "{out:?}");

    let mut c = weft();
    c.args(["run", "-n", "3", "true"]);
    assert_eq!(run(c, "weft run true").code, Some(0));
}

#[test]
fn rank_killed_by_sigkill_ends_the_job_and_leaves_nothing_running() {
    let mut c = weft();
    c.args(["run", "-n", "4", "sh", "-c"]).arg(
        "sleep 30 & echo \"pids $$ $!\"; \
         if [ \"$PMI_RANK\" = 1 ]; then sleep 0.3; echo \"victim $$\"; kill -9 $$; fi; wait",
    );
    let out = run(c, "weft run with a SIGKILLed rank");
    assert_eq!(out.code, Some(128 + 9), "{out:?}");
    let victim: u32 = out
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("victim "))
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or_else(|| panic!("{out:?}"));
    assert!(
        out.stderr.contains(&format!(
            "rank 1 (pid {victim}) killed by signal 9 (SIGKILL); ending the job"
        )),
        "{out:?}"
    );
    let pids: Vec<u32> = out
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("pids "))
        .flat_map(|l| {
            l.split(' ')
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(!pids.is_empty(), "{out:?}");
    // Killed processes can take a moment to be torn down by the kernel; poll, without
    // asserting any duration, until the watchdog.
    let start = Instant::now();
    while pids.iter().any(|&p| is_running(p)) {
        assert!(
            start.elapsed() < WATCHDOG,
            "still running after the job ended: {:?}",
            pids.iter().filter(|&&p| is_running(p)).collect::<Vec<_>>()
        );
        thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn pmi_abort_ends_the_job_with_its_code() {
    let out = probe_job(4, &["--abort", "1:7"]);
    assert_eq!(out.code, Some(7), "{out:?}");
    assert!(
        out.stderr.contains("rank 1 (pid ")
            && out.stderr.contains("called PMI abort with exit code 7"),
        "{out:?}"
    );
}

#[test]
fn exit_zero_without_finalize_ends_the_job() {
    let out = probe_job(4, &["--skip-finalize", "2"]);
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(
        out.stderr.contains("rank 2 (pid ")
            && out
                .stderr
                .contains("exited with code 0 without calling PMI finalize"),
        "{out:?}"
    );
    assert!(!out.stderr.contains("second fence returned"), "{out:?}");
}

#[test]
fn timeout_ends_the_job_with_124() {
    let mut c = weft();
    c.args(["run", "-n", "2", "--timeout", "1", "sleep", "30"]);
    let out = run(c, "weft run --timeout 1");
    assert_eq!(out.code, Some(124), "{out:?}");
    assert!(out.stderr.contains("time limit of 1 s"), "{out:?}");

    let mut c = weft();
    c.env("MPIEXEC_TIMEOUT", "1")
        .args(["run", "-n", "2", "sleep", "30"]);
    let out = run(c, "weft run with MPIEXEC_TIMEOUT=1");
    assert_eq!(out.code, Some(124), "{out:?}");

    let mut c = weft();
    c.env("MPIEXEC_TIMEOUT", "soon")
        .args(["run", "-n", "1", "true"]);
    let out = run(c, "weft run with MPIEXEC_TIMEOUT=soon");
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(out.stderr.contains("MPIEXEC_TIMEOUT=\"soon\""), "{out:?}");
}

#[test]
fn sigint_to_the_launcher_ends_the_job() {
    let mut child = weft()
        .args(["run", "-n", "2", "sh", "-c", "echo started; exec sleep 30"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    for _ in 0..2 {
        assert_eq!(lines.next().unwrap().unwrap(), "started");
    }
    // SAFETY: kill(2) on the pid of our own child, which has not been reaped yet.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let rest = thread::spawn(move || lines.map_while(Result::ok).collect::<Vec<_>>());
    let out = finish(child, WATCHDOG, "weft run interrupted");
    let _ = rest.join();
    assert_eq!(out.code, Some(130), "{out:?}");
    assert!(
        out.stderr.contains("received SIGINT; ending the job"),
        "{out:?}"
    );
}

#[test]
fn a_program_that_cannot_start_gives_127() {
    let mut c = weft();
    c.args(["run", "-n", "2", "/nonexistent/weft-test-program"]);
    let out = run(c, "weft run /nonexistent");
    assert_eq!(out.code, Some(127), "{out:?}");
    assert!(out.stderr.contains("cannot start rank 0"), "{out:?}");
}

#[test]
fn mpich_program_runs_under_weft_run() {
    if !installed("mpicc.mpich") {
        eprintln!("skipped: mpicc.mpich not installed (scripts/install-mpi-peers.sh installs it)");
        return;
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/mpich_ring.c");
    let exe = Path::new(env!("CARGO_TARGET_TMPDIR")).join("mpich_ring");
    let mut cc = Command::new("mpicc.mpich");
    cc.arg("-o").arg(&exe).arg(&src);
    let out = run(cc, "mpicc.mpich mpich_ring.c");
    assert_eq!(out.code, Some(0), "{out:?}");
    for n in [1u32, 4] {
        let mut c = weft();
        c.args(["run", "-n", &n.to_string()]).arg(&exe);
        let out = run(c, &format!("weft run -n {n} mpich_ring"));
        assert_eq!(out.code, Some(0), "{out:?}");
        for r in 0..n {
            assert!(
                out.stdout
                    .contains(&format!("mpich_ring: rank {r} of {n} ok")),
                "{out:?}"
            );
        }
    }
}

#[test]
fn boot_probe_runs_under_hydra() {
    if !installed("mpiexec.hydra") {
        eprintln!(
            "skipped: mpiexec.hydra not installed (scripts/install-mpi-peers.sh installs it)"
        );
        return;
    }
    // PMI_FD (the default) and the PMI_PORT + PMI_ID initack variant; PMI-2 chosen by
    // default (Hydra accepts the offer), PMI-1 when asked for.
    for extra in [&[][..], &["-pmi-port"][..]] {
        for (setting, protocol) in [(None, "pmi-2"), (Some("1"), "pmi-1"), (Some("2"), "pmi-2")] {
            let mut c = Command::new("mpiexec.hydra");
            c.env_remove("WEFT_JOB_ID").env_remove("WEFT_PMI");
            if let Some(v) = setting {
                c.env("WEFT_PMI", v);
            }
            c.args(extra).args(["-n", "4"]).arg(boot_probe());
            let out = run(
                c,
                &format!("WEFT_PMI={setting:?} mpiexec.hydra {extra:?} -n 4 boot_probe"),
            );
            check_probe_protocol(&out, 4, protocol);
        }
    }
}

#[test]
fn pmi2_abort_under_hydra_ends_the_job() {
    if !installed("mpiexec.hydra") {
        eprintln!(
            "skipped: mpiexec.hydra not installed (scripts/install-mpi-peers.sh installs it)"
        );
        return;
    }
    // Hydra 4.0.2 does not implement PMI-2 `abort` ("Unrecognized PMI command: abort"; MPICH's
    // own PMI2_Abort meets the same), but it ends the whole job with a failure anyway: that is
    // what this checks. (Its exit code is Hydra's 255, not 7, and the other ranks' pending
    // fence may even complete before Hydra tears the job down.)
    let mut c = Command::new("mpiexec.hydra");
    c.env_remove("WEFT_JOB_ID")
        .env("WEFT_PMI", "2")
        .args(["-n", "4"])
        .arg(boot_probe())
        .args(["--abort", "1:7"]);
    let out = run(c, "mpiexec.hydra -n 4 boot_probe --abort 1:7");
    assert_ne!(out.code, Some(0), "{out:?}");
    assert!(!out.stdout.contains("rank 1 finalized"), "{out:?}");
}

#[test]
fn weft_pmi_setting_under_weft_run() {
    // weft run serves PMI-1: auto falls back to it, 1 uses it, 2 fails clearly.
    for setting in ["auto", "1"] {
        let out = probe_job_with(&["-x", &format!("WEFT_PMI={setting}")], 2, &[]);
        check_probe_success(&out, 2);
    }
    let out = probe_job_with(&["-x", "WEFT_PMI=2"], 2, &[]);
    assert_ne!(out.code, Some(0), "{out:?}");
    assert!(
        out.stderr
            .contains("WEFT_PMI=2, but the process manager refused PMI-2"),
        "{out:?}"
    );
    let out = probe_job_with(&["-x", "WEFT_PMI=3"], 1, &[]);
    assert_ne!(out.code, Some(0), "{out:?}");
    assert!(
        out.stderr.contains("WEFT_PMI=\"3\" is not 1, 2 or auto"),
        "{out:?}"
    );
}

#[test]
fn info_lists_transports_and_every_tunable() {
    let mut c = weft();
    c.arg("info");
    let out = run(c, "weft info");
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.stdout.starts_with("weft "), "{out:?}");
    // Every transport Weft has is listed, in order, and works on this machine (other tests
    // run jobs over each).
    let transports = |out: &Out| -> Vec<(String, String)> {
        out.stdout
            .lines()
            .skip_while(|l| *l != "Transports:")
            .skip(1)
            .take_while(|l| !l.is_empty())
            .map(|l| {
                let (name, status) = l.trim().split_once(' ').unwrap_or((l.trim(), ""));
                (name.to_string(), status.trim().to_string())
            })
            .collect()
    };
    let listed = transports(&out);
    let names: Vec<&str> = listed.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, weft::tunables::Transports::ALL, "{out:?}");
    for (name, status) in &listed {
        assert!(status.starts_with("available"), "{name}: {status}");
    }
    // A transport WEFT_TRANSPORTS leaves out is said to be unused.
    let mut c = weft();
    c.env("WEFT_TRANSPORTS", "shm").arg("info");
    let only_shm = run(c, "weft info with WEFT_TRANSPORTS=shm");
    assert_eq!(only_shm.code, Some(0), "{only_shm:?}");
    for (name, status) in transports(&only_shm) {
        assert_eq!(
            status.contains("not used"),
            name == "tcp",
            "{name}: {status}"
        );
    }
    for t in weft::tunables::ALL {
        let line = out
            .stdout
            .lines()
            .find(|l| l.trim_start().starts_with(t.env))
            .unwrap_or_else(|| panic!("{} missing: {out:?}", t.env));
        assert!(line.contains(t.default) && line.contains(t.help), "{line}");
    }

    let mut c = weft();
    c.env("WEFT_SPIN_COUNT", "lots")
        .env("WEFT_EAGER_LIMIT", "64k")
        .arg("info");
    let out = run(c, "weft info with a bad value");
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(
        out.stderr.contains("WEFT_SPIN_COUNT") && out.stderr.contains("lots"),
        "{out:?}"
    );
    let eager = out
        .stdout
        .lines()
        .find(|l| l.contains("WEFT_EAGER_LIMIT"))
        .unwrap();
    assert!(eager.contains("65536 (set)"), "{eager}");

    // The cost model's section says the bound in force where the tunables table says "auto".
    let mut c = weft();
    c.env("WEFT_COLL_ALLTOALL_PULLS", "3m").arg("info");
    let out = run(c, "weft info with WEFT_COLL_ALLTOALL_PULLS=3m");
    assert!(
        out.stdout
            .contains("buffers take up to 3145728 bytes are copied by their receivers"),
        "{out:?}"
    );
}

#[test]
fn node_map_from_mapping_or_hostname_exchange() {
    // No mapping: ranks exchange host names through put/fence/get; all are on this host.
    let out = probe_job_with(&["--process-mapping", ""], 4, &[]);
    check_probe_success(&out, 4);

    // A two-node mapping with wrap-around is passed through to every rank.
    let out = probe_job_with(&["--process-mapping", "(vector,(0,2,1))"], 4, &[]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(
        out.stdout.matches("nodes [0, 1, 0, 1]").count(),
        4,
        "{out:?}"
    );
    assert!(
        out.stdout.contains("rank 1 of 4, protocol pmi-1")
            && out.stdout.contains("local ranks [1, 3]"),
        "{out:?}"
    );
}

fn probe_job_with(launcher: &[&str], n: u32, extra: &[&str]) -> Out {
    let mut c = weft();
    c.args(["run", "-n", &n.to_string()])
        .args(launcher)
        .arg(boot_probe())
        .args(extra);
    run(
        c,
        &format!("weft run {launcher:?} -n {n} boot_probe {extra:?}"),
    )
}

#[test]
fn segments_left_by_dead_ranks_are_removed() {
    let mut c = weft();
    c.args(["run", "-n", "2", "sh", "-c"]).arg(
        "f=/dev/shm/weft-$WEFT_JOB_ID-test-$PMI_RANK; : > $f && echo \"made $f\"; \
         if [ \"$PMI_RANK\" = 0 ]; then kill -9 $$; fi; exec sleep 30",
    );
    let out = run(c, "weft run leaving segments");
    assert_eq!(out.code, Some(137), "{out:?}");
    let made: Vec<&str> = out
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("made "))
        .collect();
    assert!(!made.is_empty(), "{out:?}");
    for f in made {
        assert!(!Path::new(f).exists(), "{f} was left behind: {out:?}");
    }
    assert!(out.stderr.contains("shared-memory segment(s)"), "{out:?}");
}

#[test]
fn ranks_do_not_outlive_a_killed_launcher() {
    let mut child = weft()
        .args([
            "run",
            "-n",
            "2",
            "sh",
            "-c",
            "echo started $$; exec sleep 30",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let pids: Vec<u32> = (0..2)
        .map(|_| {
            let l = lines.next().unwrap().unwrap();
            l.strip_prefix("started ").unwrap().parse().unwrap()
        })
        .collect();
    child.kill().unwrap(); // SIGKILL: the launcher gets no chance to clean up.
    let out = finish(child, WATCHDOG, "killed launcher");
    assert_eq!(out.code, None, "{out:?}");
    let start = Instant::now();
    while pids.iter().any(|&p| is_running(p)) {
        assert!(
            start.elapsed() < WATCHDOG,
            "ranks {pids:?} outlived their launcher"
        );
        thread::sleep(Duration::from_millis(20));
    }
}

// ---- start-up: limits, signals and time limits from the first instant, nothing left ----

/// The p2p_suite example (ranks that initialize the whole runtime, shared memory included).
fn p2p_suite() -> PathBuf {
    build_example("weft-cli", "p2p_suite", false)
}

/// Processes of the job started by launcher `pid` (their `WEFT_JOB_ID` starts with it).
fn job_processes(launcher: u32) -> Vec<u32> {
    live_pids()
        .into_iter()
        .filter(|&p| in_job_of(p, launcher))
        .collect()
}

/// Waits (under the watchdog) until no process of launcher `pid`'s job is left.
fn wait_job_gone(launcher: u32) {
    wait_none_left(
        &format!("processes of the job of launcher {launcher} still running"),
        || job_processes(launcher),
    );
}

/// Names in /dev/shm that belong to the job of launcher `pid` (job ids start with its pid).
fn job_segments(launcher: u32) -> Vec<String> {
    let prefix = format!("weft-{launcher}_");
    std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(&prefix))
                .collect()
        })
        .unwrap_or_default()
}

/// Sends `sig` to `pid` with kill(1) (the tests do not link libc).
fn send_signal(pid: u32, sig: &str) {
    let st = Command::new("kill")
        .args([&format!("-{sig}"), &pid.to_string()])
        .status()
        .unwrap();
    assert!(st.success(), "kill -{sig} {pid}");
}

/// "k of n ranks started" from the launcher's note when it ended the job during start-up.
fn ranks_started(stderr: &str, n: u32) -> Option<u32> {
    let tail = format!(" of {n} ranks started");
    let at = stderr.find(&tail)?;
    stderr[..at]
        .rsplit(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

#[test]
fn an_absurd_rank_count_is_refused_up_front() {
    for n in ["4294967295", "100000000"] {
        let mut c = weft();
        c.args(["run", "-n", n, "true"]);
        let out = run(c, &format!("weft run -n {n} true"));
        assert_eq!(out.code, Some(1), "{out:?}");
        assert!(
            out.stderr.contains(&format!("-n {n}"))
                && out.stderr.contains("RLIMIT_NOFILE")
                && out.stderr.contains("pid_max"),
            "{out:?}"
        );
        assert!(!out.stderr.contains("memory allocation"), "{out:?}");
    }
}

/// Starts `weft run -n N sh -c 'echo started; exec sleep 60'` with `extra` launcher options;
/// returns the child once the first rank has printed, with the rest of stdout drained.
fn start_many_sleepers(n: u32, extra: &[&str]) -> (std::process::Child, thread::JoinHandle<()>) {
    let mut child = weft()
        .args(["run", "-n", &n.to_string()])
        .args(extra)
        .args(["sh", "-c", "echo started; exec sleep 60"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    match lines.next() {
        Some(Ok(l)) => assert_eq!(l, "started"),
        other => panic!("no rank started: {other:?}"),
    }
    let rest = thread::spawn(move || for _ in lines {});
    (child, rest)
}

#[test]
fn sigterm_while_starting_ranks_ends_the_job_and_leaves_nothing() {
    let n = 3000;
    let (child, rest) = start_many_sleepers(n, &[]);
    let pid = child.id();
    send_signal(pid, "TERM");
    let out = finish(child, WATCHDOG, "weft run -n 3000 sleepers, SIGTERM");
    let _ = rest.join();
    assert_eq!(out.code, Some(128 + 15), "{out:?}");
    let started = ranks_started(&out.stderr, n)
        .unwrap_or_else(|| panic!("the launcher did not stop starting ranks: {out:?}"));
    assert!(started < n, "{out:?}");
    wait_job_gone(pid);
    assert_eq!(job_segments(pid), Vec::<String>::new());
}

#[test]
fn timeout_counts_from_the_start() {
    let n = 3000;
    let (child, rest) = start_many_sleepers(n, &["--timeout", "0.2"]);
    let pid = child.id();
    let out = finish(child, WATCHDOG, "weft run -n 3000 sleepers, --timeout 0.2");
    let _ = rest.join();
    assert_eq!(out.code, Some(124), "{out:?}");
    assert!(out.stderr.contains("time limit"), "{out:?}");
    let started = ranks_started(&out.stderr, n)
        .unwrap_or_else(|| panic!("the time limit did not stop the start-up: {out:?}"));
    assert!(started < n, "{out:?}");
    wait_job_gone(pid);
}

#[test]
fn a_launcher_killed_during_start_up_leaves_no_segment() {
    let exe = p2p_suite();
    let mut left = Vec::new();
    for delay_ms in [2u64, 5, 10, 15, 20, 30, 40, 60, 80, 120, 160, 200, 300, 400] {
        let mut child = weft()
            .args(["run", "-n", "8"])
            .arg(&exe)
            .arg("ring")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let pid = child.id();
        thread::sleep(Duration::from_millis(delay_ms));
        child.kill().unwrap(); // SIGKILL: the launcher cannot clean up.
        let _ = child.wait();
        wait_job_gone(pid);
        for name in job_segments(pid) {
            let _ = std::fs::remove_file(format!("/dev/shm/{name}"));
            left.push(format!("{name} (killed after {delay_ms} ms)"));
        }
    }
    assert!(left.is_empty(), "segments outlived their job: {left:#?}");
}

/// `weft run ARGS` (over shared memory) in a private mount namespace whose /dev/shm is a
/// tmpfs of `size`; `None` where that cannot be done.
fn run_with_small_dev_shm(size: &str, args: &[&std::ffi::OsStr]) -> Option<Out> {
    let mut c = weft_run_with_small_dev_shm(size)?;
    // The rings are the point: not `WEFT_TRANSPORTS=tcp` from the suite's TCP pass.
    c.args(args).env("WEFT_TRANSPORTS", "shm");
    Some(run(c, &format!("weft run {args:?} with a {size} /dev/shm")))
}

#[test]
fn a_small_dev_shm_fails_at_start_up_with_the_sizes() {
    let exe = p2p_suite();
    // 4 ranks with 256 KiB rings need about 4 MiB; traffic through every ring (pipelined
    // copies, not single copy) touches 3 MiB of them.
    let Some(out) = run_with_small_dev_shm(
        "2m",
        &[
            "-n".as_ref(),
            "4".as_ref(),
            "-x".as_ref(),
            "WEFT_SHM_SINGLE_COPY=0".as_ref(),
            exe.as_os_str(),
            "allpairs".as_ref(),
        ],
    ) else {
        return;
    };
    assert_ne!(out.code, Some(0), "{out:?}");
    assert!(!out.stderr.contains("SIGBUS"), "{out:?}");
    assert!(
        out.stderr.contains("/dev/shm")
            && out.stderr.contains("2097152 bytes")
            && out.stderr.contains("WEFT_SHM_RING_SIZE"),
        "{out:?}"
    );
    assert!(!out.stdout.contains("ok on"), "{out:?}");
    // Smaller rings fit: the same /dev/shm then carries the job.
    let out = run_with_small_dev_shm(
        "2m",
        &[
            "-n".as_ref(),
            "4".as_ref(),
            "-x".as_ref(),
            "WEFT_SHM_RING_SIZE=64k".as_ref(),
            exe.as_os_str(),
            "ring".as_ref(),
        ],
    )
    .expect("made above");
    assert_eq!(out.code, Some(0), "{out:?}");
}

#[test]
fn a_bad_tunable_is_reported_once_by_the_launcher() {
    let exe = p2p_suite();
    let mut c = weft();
    c.args(["run", "-n", "3", "-x", "WEFT_EAGER_LIMIT=lots"])
        .arg(&exe)
        .arg("ring");
    let out = run(c, "weft run -x WEFT_EAGER_LIMIT=lots");
    assert_eq!(out.code, Some(1), "{out:?}");
    assert_eq!(out.stderr.matches("WEFT_EAGER_LIMIT").count(), 1, "{out:?}");
    assert!(!out.stderr.contains("panicked"), "{out:?}");

    let mut c = weft();
    c.env("WEFT_SPIN_COUNT", "lots")
        .args(["run", "-n", "3"])
        .arg(&exe)
        .arg("ring");
    let out = run(c, "WEFT_SPIN_COUNT=lots weft run");
    assert_eq!(out.code, Some(1), "{out:?}");
    assert_eq!(out.stderr.matches("WEFT_SPIN_COUNT").count(), 1, "{out:?}");
    assert!(!out.stderr.contains("panicked"), "{out:?}");
}

#[test]
fn a_zero_shm_packet_size_is_a_tunable_error() {
    let mut c = weft();
    c.args(["run", "-n", "2", "-x", "WEFT_SHM_MAX_PACKET=0"])
        .arg(p2p_suite())
        .arg("ring");
    let out = run(c, "weft run -x WEFT_SHM_MAX_PACKET=0");
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(out.stderr.contains("WEFT_SHM_MAX_PACKET=\"0\""), "{out:?}");
    assert!(!out.stderr.contains("panicked"), "{out:?}");
}

#[test]
fn an_unknown_flag_before_the_program_is_an_error() {
    let mut c = weft();
    c.args(["run", "-n", "1", "--bogus", "true"]);
    let out = run(c, "weft run --bogus true");
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(out.stderr.contains("'--bogus'"), "{out:?}");
    // After the program, everything is the program's, flags included.
    let mut c = weft();
    c.args(["run", "-n", "1", "sh", "-c", "printf '%s|' \"$@\"", "sh"])
        .args(["-x", "--bogus", "-n", "5", "--", "--timeout"]);
    let out = run(c, "weft run sh with flag-like arguments");
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(out.stdout, "-x|--bogus|-n|5|--|--timeout|", "{out:?}");
}

#[test]
fn info_shows_the_cost_model_and_what_it_picks() {
    let ask = |args: &[&str], env: &[(&str, &str)]| -> Out {
        let mut c = weft();
        // What CI or a developer set must not change what the test sees.
        for var in [
            "WEFT_TRANSPORTS",
            "WEFT_EAGER_LIMIT",
            "WEFT_COLL_ALLREDUCE",
            "WEFT_COLL_MODEL_SHM",
            "WEFT_COLL_MODEL_TCP",
            "WEFT_COLL_MODEL_LOCAL",
            "WEFT_COLL_MODEL_CPUS",
            "WEFT_COLL_MODEL_OVERSUB",
            "WEFT_COLL_MODEL_FRESH",
        ] {
            c.env_remove(var);
        }
        c.arg("info").args(args);
        for (k, v) in env {
            c.env(k, v);
        }
        run(c, &format!("weft info {args:?} {env:?}"))
    };
    let pick = |out: &Out| -> String {
        assert_eq!(out.code, Some(0), "{out:?}");
        let line = out.stdout.lines().find_map(|l| l.strip_prefix("pick: "));
        let line = line.unwrap_or_else(|| panic!("no pick: {out:?}"));
        line.split_whitespace().next().unwrap_or("").to_string()
    };
    // The constants in force.
    let out = ask(&[], &[]);
    let d = weft::tunables::Tunables::defaults();
    assert!(out.stdout.contains("Collective cost model"), "{out:?}");
    let shm = format!("alpha {} ns", d.coll_model_shm.alpha_ns);
    assert!(out.stdout.contains(&shm), "{shm}: {out:?}");
    assert!(!out.stdout.contains("pick:"), "{out:?}");

    // Across the cut-over between a latency and a bandwidth algorithm.
    let allreduce = ["--coll", "allreduce", "--members", "8", "--size"];
    let small = pick(&ask(&[&allreduce[..], &["8"]].concat(), &[]));
    let large = pick(&ask(&[&allreduce[..], &["4m"]].concat(), &[]));
    assert_eq!(small, "recursive_doubling");
    // On several nodes with members sharing them, the node-aware form is named.
    let across = ask(&[&allreduce[..], &["1m", "--nodes", "2"]].concat(), &[]);
    assert!(across.stdout.contains("runs node-aware"), "{across:?}");
    let flat = ask(&[&allreduce[..], &["1m", "--nodes", "8"]].concat(), &[]);
    assert!(
        !flat.stdout.contains("runs node-aware"),
        "one member a node: {flat:?}"
    );
    // A gather goes node-aware only while the start-ups it saves outweigh its extra copies.
    let gather = [
        "--coll",
        "gather",
        "--members",
        "8",
        "--nodes",
        "2",
        "--size",
    ];
    let few = ask(&[&gather[..], &["8"]].concat(), &[]);
    assert!(few.stdout.contains("runs node-aware"), "{few:?}");
    let many = ask(&[&gather[..], &["1m"]].concat(), &[]);
    assert!(!many.stdout.contains("runs node-aware"), "{many:?}");
    assert!(
        ["rabenseifner", "ring"].contains(&large.as_str()),
        "{large}"
    );
    // Each algorithm is listed with a predicted time.
    let out = ask(&[&allreduce[..], &["4m"]].concat(), &[]);
    for name in ["recursive_doubling", "rabenseifner", "ring"] {
        let line = out
            .stdout
            .lines()
            .find(|l| l.trim_start().starts_with(name));
        assert!(
            line.is_some_and(|l| l.contains(" ms") || l.contains(" µs")),
            "{out:?}"
        );
    }
    // Eligibility: an operation that does not commute.
    let out = ask(
        &[&allreduce[..], &["4m", "--op", "noncommutative"]].concat(),
        &[],
    );
    assert_eq!(pick(&out), "recursive_doubling");
    assert!(
        out.stdout
            .contains("not eligible: needs a commutative operation"),
        "{out:?}"
    );
    // The constants come from the environment: with messages all latency, the fewest rounds.
    let slow = [("WEFT_COLL_MODEL_SHM", "1000000000,0")];
    assert_eq!(
        pick(&ask(&[&allreduce[..], &["4m"]].concat(), &slow)),
        "recursive_doubling"
    );
    // Two nodes use the TCP constants.
    let out = ask(&[&allreduce[..], &["4m", "--nodes", "2"]].concat(), &[]);
    assert!(out.stdout.contains("(tcp constants"), "{out:?}");
    // A forcing tunable wins, and the model's own pick is still shown.
    let out = ask(
        &[&allreduce[..], &["8"]].concat(),
        &[("WEFT_COLL_ALLREDUCE", "ring")],
    );
    assert_eq!(pick(&out), "ring");
    assert!(
        out.stdout.contains("the model's pick: recursive_doubling"),
        "{out:?}"
    );
    // Bad questions are errors naming the value.
    for (args, what) in [
        (&["--coll", "nosuch"][..], "nosuch"),
        (
            &["--coll", "bcast", "--members", "4", "--nodes", "5"][..],
            "--nodes 5",
        ),
        (&["--coll", "bcast", "--size", "lots"][..], "lots"),
    ] {
        let out = ask(args, &[]);
        assert_eq!(out.code, Some(1), "{out:?}");
        assert!(out.stderr.contains(what), "{what}: {out:?}");
    }
}
