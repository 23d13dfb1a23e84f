//! The `pmix` feature under Open MPI's launcher (`mpirun.openmpi`, which serves only PMIx):
//! boot_probe and part of the point-to-point suite on 4 ranks, and a build without the
//! feature refusing clearly. Skips with a message when Open MPI or libpmix is missing
//! (`scripts/install-mpi-peers.sh` installs both). srun --mpi=pmix is tested in slurm.rs.

mod common;
use common::*;
use std::process::{Command, Stdio};

fn available() -> bool {
    let mpirun = Command::new("sh")
        .args(["-c", "command -v mpirun.openmpi"])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    let pmix = Command::new("pkg-config")
        .args(["--exists", "pmix"])
        .status()
        .is_ok_and(|s| s.success());
    if !(mpirun && pmix) {
        eprintln!(
            "skipped: needs mpirun.openmpi and libpmix (scripts/install-mpi-peers.sh installs them)"
        );
    }
    mpirun && pmix
}

fn mpirun(n: u32, exe: &std::path::Path, args: &[&str]) -> Out {
    mpirun_with(n, &[], exe, args)
}

/// `mpirun.openmpi -x NAME=VALUE... -n N EXE ARGS`.
fn mpirun_with(n: u32, env: &[&str], exe: &std::path::Path, args: &[&str]) -> Out {
    let mut c = Command::new("mpirun.openmpi");
    c.env_remove("WEFT_JOB_ID")
        .env_remove("WEFT_PMI")
        .env_remove("WEFT_TRANSPORTS")
        .env("RUST_BACKTRACE", "0")
        .args([
            "--allow-run-as-root",
            "--oversubscribe",
            "-n",
            &n.to_string(),
        ]);
    for kv in env {
        c.args(["-x", kv]);
    }
    c.arg(exe).args(args);
    let what = format!("mpirun.openmpi {env:?} -n {n} {} {args:?}", exe.display());
    run(c, &what)
}

#[test]
fn boot_probe_and_p2p_under_open_mpi_mpirun() {
    if !available() {
        return;
    }
    let probe = build_example_with_features("weft", "boot_probe", false, "pmix");
    let out = mpirun(4, &probe, &[]);
    assert_eq!(out.code, Some(0), "{out:?}");
    for r in 0..4 {
        let line = out
            .stdout
            .lines()
            .find(|l| l.starts_with(&format!("boot_probe: rank {r} of 4, protocol pmix, job ")))
            .unwrap_or_else(|| panic!("no start line for rank {r}: {out:?}"));
        assert!(
            line.ends_with("nodes [0, 0, 0, 0], local ranks [0, 1, 2, 3]"),
            "{line}"
        );
        assert!(
            out.stdout
                .contains(&format!("boot_probe: rank {r} finalized")),
            "{out:?}"
        );
    }

    let suite = build_example_with_features("weft-cli", "p2p_suite", true, "pmix");
    // Shared memory, then TCP for every pair (the TCP set-up reads rank 0's job secret, a
    // key that names no owner: the PMIx client's rank-0 rule).
    for env in [&[][..], &["WEFT_TRANSPORTS=tcp"][..]] {
        for case in ["ring", "allpairs", "comms"] {
            let out = mpirun_with(4, env, &suite, &[case]);
            assert_eq!(out.code, Some(0), "{case} {env:?}: {out:?}");
            assert!(
                out.stdout
                    .contains(&format!("p2p_suite {case}: ok on 4 ranks")),
                "{out:?}"
            );
        }
    }
}

#[test]
fn without_the_feature_a_pmix_launch_is_refused_clearly() {
    if !available() {
        return;
    }
    let plain = build_example("weft", "boot_probe", false);
    let out = mpirun(2, &plain, &[]);
    assert_ne!(out.code, Some(0), "{out:?}");
    assert!(
        out.stderr.contains("PMIX_RANK/PMIX_NAMESPACE set")
            && out.stderr.contains("the `pmix` feature"),
        "{out:?}"
    );
}
