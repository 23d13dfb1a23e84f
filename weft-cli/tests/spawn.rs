//! PMI-1 spawn under the real `weft` binary: fake ranks written in Python speak PMI-1 over
//! their `PMI_FD` (init, the `mcmd=spawn` blocks, `cmd=spawn_result`, finalize) and the
//! processes they spawn print what they were given.
//!
//! No test asserts a duration; every child runs under a watchdog that turns a hang into a
//! failure. Each test is skipped (saying so) without python3.

use std::path::{Path, PathBuf};

mod common;
use common::*;

/// The PMI-1 client the fake ranks share: `cmd(line)` sends a line and parses the answer;
/// `spawn([(program, args, nprocs, info pairs)], preput pairs)` sends one block per command
/// and returns the `cmd=spawn_result` line.
const PMI_PY: &str = r#"
import os, socket, sys
_s = socket.socket(fileno=int(os.environ["PMI_FD"]))
_f = _s.makefile("rw")
def send(text):
    _f.write(text); _f.flush()
def cmd(line):
    send(line + "\n")
    return dict(kv.split("=", 1) for kv in _f.readline().split() if "=" in kv)
def spawn(commands, preput):
    for i, (prog, args, n, info) in enumerate(commands):
        lines = ["mcmd=spawn", "nprocs=%d" % n, "execname=" + prog,
                 "totspawns=%d" % len(commands), "spawnssofar=%d" % (i + 1),
                 "argcnt=%d" % len(args)]
        lines += ["arg%d=%s" % (j + 1, a) for j, a in enumerate(args)]
        lines += ["preput_num=%d" % len(preput)]
        for j, (k, v) in enumerate(preput):
            lines += ["preput_key_%d=%s" % (j, k), "preput_val_%d=%s" % (j, v)]
        lines += ["info_num=%d" % len(info)]
        for j, (k, v) in enumerate(info):
            lines += ["info_key_%d=%s" % (j, k), "info_val_%d=%s" % (j, v)]
        send("".join(l + "\n" for l in lines + ["endcmd"]))
    return _f.readline().strip()
cmd("cmd=init pmi_version=1 pmi_subversion=1")
"#;

/// A spawned process: prints its environment, its appnum and kvsname as PMI answers them,
/// and the preput key `PARENT_KEY` from its own key-value space.
const CHILD_PY: &str = r#"
e = os.environ
kvs = cmd("cmd=get_my_kvsname")["kvsname"]
got = cmd("cmd=get kvsname=%s key=PARENT_KEY" % kvs).get("value", "none")
app = cmd("cmd=get_appnum")["appnum"]
print("child rank=%s size=%s spawned=%s base=%s appnum=%s pmi-appnum=%s kvsname=%s jobid=%s "
      "args=%s cwd=%s preput=%s" % (
      e["PMI_RANK"], e["PMI_SIZE"], e.get("PMI_SPAWNED"), e.get("WEFT_UNIVERSE_BASE"),
      e.get("PMI_APPNUM"), app, kvs, e["PMI_JOBID"], "|".join(sys.argv[1:]), os.getcwd(), got))
cmd("cmd=finalize")
"#;

/// A directory of its own for test `name`, emptied.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("weft-spawn-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Writes an executable Python script `name` into `dir` running `body` after the PMI
/// client; returns its path.
fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/usr/bin/env python3\n{PMI_PY}{body}")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// `weft run -n 1 [extra] python3 -c <PMI client + parent>`; None (skipped) without python3.
fn run_parent(extra: &[&str], parent: &str, what: &str) -> Option<Out> {
    if !installed("python3") {
        println!("skipped: python3 is not available");
        return None;
    }
    let mut c = weft();
    c.args(["run", "-n", "1"])
        .args(extra)
        .args(["python3", "-c"])
        .arg(format!("{PMI_PY}{parent}"));
    Some(run(c, what))
}

/// The `key=value` words of the line of `out`'s stdout that starts with `prefix` and has
/// `rank=R`.
fn child_line<'a>(out: &'a Out, prefix: &str, rank: u32) -> Vec<(&'a str, &'a str)> {
    let line = out
        .stdout
        .lines()
        .find(|l| l.starts_with(prefix) && l.contains(&format!(" rank={rank} ")))
        .unwrap_or_else(|| panic!("no {prefix:?} line for rank {rank}: {out:?}"));
    line.split(' ').filter_map(|w| w.split_once('=')).collect()
}

fn get<'a>(words: &[(&'a str, &'a str)], key: &str) -> &'a str {
    words
        .iter()
        .find(|(k, _)| *k == key)
        .map(|(_, v)| *v)
        .unwrap_or_else(|| panic!("no {key} in {words:?}"))
}

#[test]
fn spawn_starts_two_processes_with_their_environment_and_the_preput_pairs() {
    let dir = scratch("two");
    let child = script(&dir, "child.py", CHILD_PY);
    let parent = format!(
        r#"
print("parent: " + spawn([({child:?}, ["a b", "c=d"], 2, [])], [("PARENT_KEY", "tag#0$x=y$")]))
print("parent: universe " + cmd("cmd=get_universe_size")["size"])
print("parent: kvsname " + cmd("cmd=get_my_kvsname")["kvsname"])
cmd("cmd=finalize")
"#
    );
    let Some(out) = run_parent(&["--tag-output"], &parent, "weft run (spawn 2)") else {
        return;
    };
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(
        out.stdout.contains("[0] parent: cmd=spawn_result rc=0\n"),
        "{out:?}"
    );
    assert!(out.stdout.contains("[0] parent: universe 3\n"), "{out:?}");
    let parent_kvs = out
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("[0] parent: kvsname "))
        .unwrap_or_else(|| panic!("{out:?}"));
    for r in 0..2 {
        let w = child_line(&out, &format!("[1.{r}] child"), r);
        assert_eq!(get(&w, "size"), "2", "{out:?}");
        assert_eq!(get(&w, "spawned"), "1", "{out:?}");
        assert_eq!(get(&w, "base"), "1", "{out:?}");
        assert_eq!(get(&w, "appnum"), "0", "{out:?}");
        assert_eq!(get(&w, "pmi-appnum"), "0", "{out:?}");
        assert_eq!(get(&w, "preput"), "tag#0$x=y$", "{out:?}");
        assert_eq!(get(&w, "kvsname"), get(&w, "jobid"), "{out:?}");
        assert_ne!(get(&w, "kvsname"), parent_kvs, "a job of its own: {out:?}");
        assert!(get(&w, "kvsname").starts_with("weft_"), "{out:?}");
    }
    assert!(out.stdout.contains(" args=a b|c=d "), "{out:?}");
}

#[test]
fn spawn_multiple_runs_each_command_with_its_appnum_wdir_and_path() {
    let dir = scratch("multiple");
    let bin = dir.join("bin");
    let work = dir.join("work");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::create_dir_all(&work).unwrap();
    script(&bin, "weft-spawn-child", CHILD_PY);
    let (bin, work) = (bin.display(), work.display());
    // Command 0: a bare name found through the `path` info; command 1: another program, in
    // its own working directory.
    let parent = format!(
        r#"
print("parent: " + spawn([
    ("weft-spawn-child", ["x"], 2, [("path", "/nonexistent:{bin}"), ("host", "localhost")]),
    ("sh", ["-c", "echo second rank=$PMI_RANK size=$PMI_SIZE base=$WEFT_UNIVERSE_BASE appnum=$PMI_APPNUM cwd=$(pwd)"],
     1, [("wdir", "{work}"), ("ignored-key", "whatever")]),
], [("PARENT_KEY", "multi")]))
cmd("cmd=finalize")
"#
    );
    let Some(out) = run_parent(&[], &parent, "weft run (spawn_multiple)") else {
        return;
    };
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(
        out.stdout.contains("parent: cmd=spawn_result rc=0\n"),
        "{out:?}"
    );
    for r in 0..2 {
        let w = child_line(&out, "child", r);
        assert_eq!(get(&w, "size"), "3", "{out:?}");
        assert_eq!(get(&w, "appnum"), "0", "{out:?}");
        assert_eq!(get(&w, "pmi-appnum"), "0", "{out:?}");
        assert_eq!(get(&w, "preput"), "multi", "{out:?}");
        assert_eq!(get(&w, "args"), "x", "{out:?}");
    }
    let w = child_line(&out, "second", 2);
    assert_eq!(get(&w, "size"), "3", "{out:?}");
    assert_eq!(get(&w, "base"), "1", "{out:?}");
    assert_eq!(get(&w, "appnum"), "1", "{out:?}");
    assert_eq!(get(&w, "cwd"), work.to_string(), "{out:?}");
}

#[test]
fn refused_spawns_answer_rc_minus_1_and_the_job_ends_with_the_parent_s_code() {
    let parent = r#"
print("missing: " + spawn([("weft-no-such-program", [], 1, [])], []))
print("host: " + spawn([("sh", [], 1, [("host", "elsewhere.invalid")])], []))
send("mcmd=spawn\nnprocs=two\nexecname=sh\ntotspawns=1\nspawnssofar=1\nargcnt=0\n"
     "preput_num=0\ninfo_num=0\nendcmd\n")
print("bad: " + _f.readline().strip())
print("still served: universe " + cmd("cmd=get_universe_size")["size"])
cmd("cmd=finalize")
sys.exit(5)
"#;
    let Some(out) = run_parent(&[], parent, "weft run (refused spawns)") else {
        return;
    };
    assert_eq!(out.code, Some(5), "{out:?}");
    assert!(
        out.stdout.contains(
            "missing: cmd=spawn_result rc=-1 msg=cannot_find_program_weft-no-such-program_(searched_"
        ),
        "{out:?}"
    );
    assert!(
        out.stdout.contains(
            "host: cmd=spawn_result rc=-1 msg=spawn:_host_elsewhere.invalid_is_not_this_host;\
             _weft_run_spawns_on_its_own_host_only\n"
        ),
        "{out:?}"
    );
    assert!(
        out.stdout
            .contains("bad: cmd=spawn_result rc=-1 msg=block_1:_nprocs=\"two\"_is_not_a_number\n"),
        "{out:?}"
    );
    assert!(out.stdout.contains("still served: universe 1\n"), "{out:?}");
    assert!(
        out.stderr.contains(
            "weft run: rank 0 asked to spawn processes (PMI mcmd=spawn): refused: cannot find \
             program weft-no-such-program (searched "
        ),
        "{out:?}"
    );
    assert!(
        out.stderr.contains("weft run: rank 0 (pid ") && out.stderr.contains("exited with code 5"),
        "{out:?}"
    );
    assert!(!out.stderr.contains("spawned job"), "{out:?}");
}

#[test]
fn a_spawned_process_exiting_3_ends_the_universe_with_3_and_is_named() {
    // The child exits only once the parent has printed the spawn's result (a marker file),
    // so the launcher has that line before it ends the universe.
    let dir = scratch("exit3");
    let marker = dir.join("printed");
    let parent = format!(
        r#"
import time
child = ["-c", 'while [ ! -e "$0" ]; do sleep 0.05; done; exit 3', {marker:?}]
print("parent: " + spawn([("sh", child, 1, [])], []), flush=True)
open({marker:?}, "w").close()
time.sleep(60)
print("parent: not killed")
cmd("cmd=finalize")
"#
    );
    let out = run_parent(&[], &parent, "weft run (a spawned process fails)");
    let _ = std::fs::remove_dir_all(&dir);
    let Some(out) = out else {
        return;
    };
    assert_eq!(out.code, Some(3), "{out:?}");
    assert!(
        out.stdout.contains("parent: cmd=spawn_result rc=0\n"),
        "{out:?}"
    );
    assert!(!out.stdout.contains("not killed"), "{out:?}");
    assert!(
        out.stderr
            .contains("weft run: rank 0 of spawned job 1 (pid ")
            && out.stderr.contains(") exited with code 3; ending the job"),
        "{out:?}"
    );
}

#[test]
fn the_launcher_waits_for_the_spawned_processes() {
    // The parent finalizes and exits at once; its children finish a second later (killed
    // with the launcher if it did not wait: PR_SET_PDEATHSIG).
    let parent = r#"
print("parent: " + spawn([("sh", ["-c", "sleep 1; echo child-finished-$PMI_RANK"], 2, [])], []))
cmd("cmd=finalize")
"#;
    let Some(out) = run_parent(&[], parent, "weft run (waits for spawned)") else {
        return;
    };
    assert_eq!(out.code, Some(0), "{out:?}");
    for r in 0..2 {
        assert!(
            out.stdout.contains(&format!("child-finished-{r}\n")),
            "{out:?}"
        );
    }
}

#[test]
fn a_spawned_process_can_spawn_too() {
    let dir = scratch("nested");
    let middle = script(
        &dir,
        "middle.py",
        r#"
print("middle %s: %s" % (os.environ["PMI_RANK"], spawn([("sh", ["-c", "echo leaf base=$WEFT_UNIVERSE_BASE size=$PMI_SIZE"], 1, [])], [])))
cmd("cmd=finalize")
"#,
    );
    let parent = format!(
        r#"
print("parent: " + spawn([({middle:?}, [], 2, [])], []))
cmd("cmd=finalize")
"#
    );
    let Some(out) = run_parent(&[], &parent, "weft run (nested spawn)") else {
        return;
    };
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(out.code, Some(0), "{out:?}");
    for r in 0..2 {
        assert!(
            out.stdout
                .contains(&format!("middle {r}: cmd=spawn_result rc=0\n")),
            "{out:?}"
        );
    }
    // The leaves come after the parent (0) and the middles (1, 2), in either order.
    let mut bases: Vec<&str> = out
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("leaf base="))
        .collect();
    bases.sort();
    assert_eq!(bases, ["3 size=1", "4 size=1"], "{out:?}");
}

#[test]
fn a_multi_host_job_refuses_spawn() {
    let parent = r#"
print("parent: " + spawn([("sh", ["-c", "true"], 1, [])], []))
cmd("cmd=finalize")
"#;
    let Some(out) = run_parent(
        &["--hosts", "localhost"],
        parent,
        "weft run --hosts (spawn)",
    ) else {
        return;
    };
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(
        out.stdout.contains(
            "parent: cmd=spawn_result rc=-1 msg=spawn_is_not_supported_in_multi-host_jobs_yet\n"
        ),
        "{out:?}"
    );
}

#[test]
fn a_spawn_after_the_last_child_was_reaped_is_still_started_and_reaped() {
    // The rank exits at once (without PMI init) and leaves a grandchild holding its PMI
    // socket, which asks for the spawn while the launcher waits for that socket to close:
    // by then the reaper found no child left and ended, so the spawn must start another.
    if !installed("python3") {
        println!("skipped: python3 is not available");
        return;
    }
    let rank = r#"
import os, socket, time
if os.fork() != 0:
    os._exit(0)
s = socket.socket(fileno=int(os.environ["PMI_FD"]))
time.sleep(0.02)
s.sendall(b"mcmd=spawn\nnprocs=1\nexecname=sh\ntotspawns=1\nspawnssofar=1\nargcnt=2\n"
          b"arg1=-c\narg2=sleep 0.3; echo late-spawn-ran\npreput_num=0\ninfo_num=0\nendcmd\n")
print("grandchild: " + s.makefile("r").readline().strip(), flush=True)
"#;
    let mut c = weft();
    c.args(["run", "-n", "1", "python3", "-c", rank]);
    let out = run(c, "weft run (a spawn after the last child was reaped)");
    assert_eq!(out.code, Some(0), "{out:?}");
    if out.stdout.contains("grandchild: cmd=spawn_result rc=0") {
        assert!(out.stdout.contains("late-spawn-ran\n"), "{out:?}");
    } else {
        // The launcher ended (its only rank gone) before the request came: nothing to see.
        println!("the request came after the launcher's end: {out:?}");
    }
}

#[test]
fn the_time_limit_ends_spawned_processes_too_and_leaves_none() {
    if !installed("python3") {
        println!("skipped: python3 is not available");
        return;
    }
    let parent = r#"
print("parent: " + spawn([("sleep", ["300"], 2, [])], []), flush=True)
cmd("cmd=finalize")
"#;
    let mut c = weft();
    c.args(["run", "-n", "1", "--timeout", "2", "python3", "-c"])
        .arg(format!("{PMI_PY}{parent}"))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = c.spawn().unwrap();
    let launcher = child.id();
    let out = finish(child, WATCHDOG, "weft run --timeout (spawned sleepers)");
    assert_eq!(out.code, Some(124), "{out:?}");
    assert!(
        out.stdout.contains("parent: cmd=spawn_result rc=0\n"),
        "{out:?}"
    );
    wait_none_left("processes of the job left after the time limit", || {
        live_pids()
            .into_iter()
            .filter(|&p| in_job_of(p, launcher))
            .collect()
    });
}
