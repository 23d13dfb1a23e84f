//! The test harness shared by the integration tests: runs the real `weft` binary and the
//! example programs under a watchdog that turns a hang into a failure (never a timing
//! assertion), and builds examples once per test process.
#![allow(dead_code)]

use std::collections::HashMap;
use std::io::Read;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

pub const WATCHDOG: Duration = Duration::from_secs(60);
/// Cargo builds (the `--example` path) get longer on a loaded 2-core machine.
pub const BUILD_WATCHDOG: Duration = Duration::from_secs(300);

pub struct Out {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl std::fmt::Debug for Out {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit code {:?}\n--- stdout ---\n{}--- stderr ---\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

pub fn weft() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_weft"));
    // A developer's own setting must not change what the tests see.
    c.env_remove("MPIEXEC_TIMEOUT")
        .env_remove("WEFT_PMI_DEBUG")
        .env_remove("WEFT_PMI");
    c
}

/// Whether `prog` is on the PATH.
pub fn installed(prog: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {prog}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Whether this test runs as root (it may mount a small tmpfs in a private namespace).
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .find(|l| l.starts_with("Uid:"))
            .and_then(|l| l.split_whitespace().nth(2))
            == Some("0")
    })
}

/// `weft run` (its arguments to follow) in a private mount namespace whose /dev/shm is a
/// tmpfs of `size`; `None` (the caller skips, saying so) without root or unshare(1).
pub fn weft_run_with_small_dev_shm(size: &str) -> Option<Command> {
    if !is_root() || !installed("unshare") {
        eprintln!("skipped: needs root and unshare(1) to mount a small tmpfs over /dev/shm");
        return None;
    }
    let mut c = Command::new("unshare");
    c.args(["-m", "sh", "-c"])
        .arg(format!(
            "mount -t tmpfs -o size={size} weft-test /dev/shm && exec \"$@\""
        ))
        .arg("sh")
        .arg(env!("CARGO_BIN_EXE_weft"))
        .arg("run")
        .env_remove("MPIEXEC_TIMEOUT");
    Some(c)
}

pub fn drain(mut r: impl Read + Send + 'static) -> thread::JoinHandle<String> {
    thread::spawn(move || {
        let mut s = String::new();
        let _ = r.read_to_string(&mut s);
        s
    })
}

/// Waits for `child` under a watchdog; on expiry kills it and fails the test.
pub fn finish(mut child: Child, limit: Duration, what: &str) -> Out {
    let out = child.stdout.take().map(drain);
    let err = drain(child.stderr.take().expect("stderr piped"));
    let start = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().expect("try_wait") {
            break st;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "watchdog: {what} still running after {limit:?}; killed it\nstderr so far: {}",
                err.join().unwrap_or_default()
            );
        }
        thread::sleep(Duration::from_millis(10));
    };
    Out {
        code: status.code(),
        stdout: out.map(|o| o.join().unwrap()).unwrap_or_default(),
        stderr: err.join().unwrap(),
    }
}

pub fn run(mut cmd: Command, what: &str) -> Out {
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {what}: {e}"));
    finish(child, WATCHDOG, what)
}

/// Builds example `name` of `package` (once per test process) and returns its path.
pub fn build_example(package: &str, name: &str, release: bool) -> PathBuf {
    static BUILT: Mutex<Option<HashMap<String, PathBuf>>> = Mutex::new(None);
    let key = format!("{package}/{name}/{release}");
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(p) = built.get_or_insert_with(HashMap::new).get(&key) {
        return p.clone();
    }
    let mut cmd = Command::new(env!("CARGO"));
    cmd.args([
        "build",
        "--example",
        name,
        "-p",
        package,
        "--message-format=json-render-diagnostics",
    ]);
    if release {
        cmd.arg("--release");
    }
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting cargo build");
    let out = finish(
        child,
        BUILD_WATCHDOG,
        &format!("cargo build --example {name}"),
    );
    assert_eq!(out.code, Some(0), "{out:?}");
    let exe = out
        .stdout
        .lines()
        .filter(|l| l.contains("\"compiler-artifact\"") && l.contains(&format!("\"{name}\"")))
        .filter_map(|l| {
            let key = "\"executable\":\"";
            let at = l.find(key)? + key.len();
            let end = l[at..].find('"')? + at;
            Some(PathBuf::from(&l[at..end]))
        })
        .next_back()
        .unwrap_or_else(|| panic!("cargo reported no executable for example {name}"));
    built
        .as_mut()
        .expect("initialized")
        .insert(key, exe.clone());
    exe
}

/// Whether process `pid` exists and is not a zombie.
pub fn is_running(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => false,
        Ok(stat) => {
            // The state follows the parenthesized command name.
            let state = stat.rsplit(')').next().unwrap_or("").trim_start();
            !(state.starts_with('Z') || state.starts_with('X'))
        }
    }
}

/// Builds example `name` of `package` with cargo `features` into its own target directory
/// (`target/features-<features>`, so the default build's artifacts are neither overwritten
/// nor rebuilt), once per test process, and returns its path.
pub fn build_example_with_features(
    package: &str,
    name: &str,
    release: bool,
    features: &str,
) -> PathBuf {
    static BUILT: Mutex<Option<HashMap<String, PathBuf>>> = Mutex::new(None);
    let key = format!("{package}/{name}/{release}/{features}");
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(p) = built.get_or_insert_with(HashMap::new).get(&key) {
        return p.clone();
    }
    let target = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../target")
        .join(format!(
            "features-{}",
            features.replace([',', ' ', '/'], "_")
        ));
    let mut cmd = Command::new(env!("CARGO"));
    cmd.env("CARGO_TARGET_DIR", &target).args([
        "build",
        "--example",
        name,
        "-p",
        package,
        "--features",
        features,
    ]);
    if release {
        cmd.arg("--release");
    }
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting cargo build");
    let what = format!("cargo build --example {name} --features {features}");
    let out = finish(child, BUILD_WATCHDOG, &what);
    assert_eq!(out.code, Some(0), "{what}: {out:?}");
    let exe = target
        .join(if release { "release" } else { "debug" })
        .join("examples")
        .join(name);
    assert!(exe.exists(), "{what} made no {}", exe.display());
    built
        .as_mut()
        .expect("initialized")
        .insert(key, exe.clone());
    exe
}

/// Waits (under the watchdog) until `left` lists nothing: the processes of a job that ended.
/// Panics naming `what` and those still there when the watchdog runs out.
pub fn wait_none_left<T: std::fmt::Debug>(what: &str, mut left: impl FnMut() -> Vec<T>) {
    let start = Instant::now();
    loop {
        let still = left();
        if still.is_empty() {
            return;
        }
        assert!(start.elapsed() < WATCHDOG, "{what}: {still:?}");
        thread::sleep(Duration::from_millis(20));
    }
}

/// The live processes on this machine (pids from /proc).
pub fn live_pids() -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&p| is_running(p))
        .collect()
}

/// Whether process `pid` is a rank of a job of launcher (or head) `launcher`: its
/// `WEFT_JOB_ID` starts with the launcher's pid.
pub fn in_job_of(pid: u32, launcher: u32) -> bool {
    let mark = format!("WEFT_JOB_ID={launcher}_");
    std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|env| {
        env.split(|&b| b == 0)
            .any(|kv| kv.starts_with(mark.as_bytes()))
    })
}

/// The `/dev/shm` entries of weft jobs (named segments; the runtime's own have no names).
pub fn weft_segments() -> Vec<String> {
    std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter(|n| n.starts_with("weft-"))
                .collect()
        })
        .unwrap_or_default()
}

/// Running processes whose executable is `exe`.
pub fn pids_of(exe: &std::path::Path) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok()?.file_name().into_string().ok()?.parse::<u32>().ok())
        .filter(|pid| std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|p| p == exe))
        .filter(|&pid| is_running(pid))
        .collect()
}
