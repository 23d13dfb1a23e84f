//! `weft run`: start N ranks on this host, serve them PMI-1, forward their output, and end
//! the whole job on the first failure.
//!
//! Threads: one starter per job (it starts the job's ranks one by one and then stays:
//! PR_SET_PDEATHSIG fires when the thread that started a child ends), one PMI server per
//! rank, two output forwarders per rank, one reaper (`waitpid(-1)`; shared by every starter,
//! [`Children`]), one signal taker (`sigwait`). They report [`Event`]s to the main thread,
//! which alone decides how the job ends, from the first instant: the time limit, a signal or
//! a failed rank stop the start of the others too. A rank count the host's limits could
//! never run is refused before anything starts ([`check_rank_count`]).
//!
//! Environment each rank gets (on top of the launcher's own, minus `PMI_PORT`/`PMI_ID`, plus
//! every `-x`): `PMI_FD` (its end of a socket pair; PMI-1 is served on the other end),
//! `PMI_RANK`, `PMI_SIZE`, `PMI_JOBID` (= the kvsname, `weft_<job id>`), `MPI_LOCALNRANKS`
//! (= size: one host), `MPI_LOCALRANKID` (= rank), and `WEFT_JOB_ID` (`<launcher pid>_<8 hex
//! digits>`, unique on the host). `PMI_process_mapping` is `(vector,(0,1,N))`, and the
//! key-value space starts with `weft-job-secret` (lowercase hex of 32 random bytes, for the
//! TCP transport). Stdin is /dev/null. All ranks share one new process group (a new one is
//! started if every rank of it ended before the next was started); each has
//! PR_SET_PDEATHSIG(SIGKILL).
//!
//! PMI spawn ([`crate::spawn`]): a rank's spawn request reaches this loop as
//! [`Event::Spawn`]; the new job gets a starter of its own, and its processes join the
//! launcher's rank table ([`Control::ranks`], after those it had: the universe), so the
//! launcher waits for them, any failure among them ends the whole universe, the time limit
//! and signals cover them, and their output is forwarded (`--tag-output`: `[J.R] ` for rank
//! R of spawned job J, `[R] ` in the first job). Messages name them "rank R of spawned job
//! J". The shared-memory segments of every job id are removed at the end.
//!
//! Multi-host jobs (`--hosts`, in [`crate::head`]) reuse the rank start-up ([`Starter`], in
//! each host's proxy, which listens to the head from the first instant as this loop does)
//! and this event loop ([`drive`], in the head, with [`Hooks`] for what only they have:
//! remote starts, barriers across hosts, lost hosts). They refuse spawn.

pub use crate::event::Event;
use crate::pmi_server::{self, Job};
use crate::spawn::Spawner;
use crate::sys::{self, Status};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// Exit code of a job that ran past its time limit (as timeout(1)).
pub const EXIT_TIMEOUT: i32 = 124;
/// Exit code when the program could not be started (as shells).
pub const EXIT_CANNOT_START: i32 = 127;
/// Exit code of a job whose rank exited 0 without PMI finalize after PMI init.
pub const EXIT_NO_FINALIZE: i32 = 1;

/// SIGTERM first; SIGKILL whatever is left after this long.
const TERM_GRACE: Duration = Duration::from_millis(300);
/// After a rank exits, how long to wait for its PMI socket to close (so an `abort` or
/// `finalize` it sent just before is seen first).
const PMI_DRAIN: Duration = Duration::from_millis(200);
/// After SIGKILL, how long to wait for ranks to be reaped before giving up.
const KILL_WAIT: Duration = Duration::from_secs(3);

/// What to run and how.
#[derive(Clone, Debug)]
pub struct Options {
    /// Number of ranks.
    pub np: u32,
    /// The program and its arguments.
    pub program: String,
    /// Arguments to the program.
    pub args: Vec<String>,
    /// Prefix each output line with `[rank] `.
    pub tag_output: bool,
    /// Extra environment for the ranks.
    pub env: Vec<(String, String)>,
    /// End the job after this long.
    pub timeout: Option<Duration>,
    /// Log PMI traffic to stderr.
    pub pmi_debug: bool,
    /// Serve this `PMI_process_mapping` instead of "all on one node" (for tests).
    pub process_mapping: Option<String>,
    /// Bind each rank to one CPU.
    pub bind: BindTo,
}

/// Where ranks may run (`--bind-to`, as MPICH's and Open MPI's launchers).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum BindTo {
    /// Anywhere the launcher may run (no binding).
    #[default]
    None,
    /// Local rank k on the k-th CPU the launcher may run on (wrapping around when a host has
    /// more ranks than CPUs).
    Core,
}

impl BindTo {
    /// The CPUs to bind local ranks to, in order (empty: no binding).
    pub fn cpus(self) -> std::io::Result<Vec<usize>> {
        match self {
            BindTo::None => Ok(Vec::new()),
            BindTo::Core => sys::allowed_cpus(),
        }
    }
}

/// What the event loop knows of a rank.
pub struct Rank {
    /// Its pid (on its host; 0 while a remote rank's start is not yet reported).
    pub pid: libc::pid_t,
    /// The host it runs on, for remote ranks.
    pub host: Option<String>,
    inited: bool,
    finalized: bool,
    pmi_open: bool,
    /// Reaped, waiting for the PMI socket to drain until the instant.
    pending: Option<(Status, Instant)>,
    done: bool,
    /// For a process of a job started by PMI spawn: that job's number (1 for the first
    /// spawned) and its rank there.
    spawned: Option<(u32, u32)>,
}

impl Rank {
    /// A rank not yet started (pid 0) on `host` (None: this host).
    pub fn new(pid: libc::pid_t, host: Option<String>) -> Rank {
        Rank {
            pid,
            host,
            inited: false,
            finalized: false,
            pmi_open: true,
            pending: None,
            done: false,
            spawned: None,
        }
    }

    /// Rank `rank` of spawned job `job` (on this host, not yet started).
    pub fn spawned(job: u32, rank: u32) -> Rank {
        Rank {
            spawned: Some((job, rank)),
            ..Rank::new(0, None)
        }
    }
}

/// A job id unique on this host: launcher pid and 32 random bits, `[0-9a-f_]`.
pub fn new_job_id() -> String {
    // getrandom(2) does not fail for 4 bytes on Linux 3.17 and later; the time still varies.
    let bits = weft::launcher::host::random_hex(4).unwrap_or_else(|_| {
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
        format!("{:08x}", t.map_or(0, |d| d.subsec_nanos()))
    });
    format!("{}_{bits}", std::process::id())
}

/// Copies a rank's output line by line to the launcher's stdout (or stderr), each line
/// prefixed with `[label] ` when `tag`.
pub fn forward(label: &str, src: impl Read, to_stderr: bool, tag: bool) {
    let mut reader = BufReader::new(src);
    let mut line = Vec::new();
    let prefix = format!("[{label}] ");
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let mut out = Vec::with_capacity(line.len() + prefix.len() + 1);
        if tag {
            out.extend_from_slice(prefix.as_bytes());
        }
        out.extend_from_slice(&line);
        if tag && !line.ends_with(b"\n") {
            out.push(b'\n');
        }
        // A closed launcher stdout must not stop the job: drop the output.
        if to_stderr {
            let mut e = std::io::stderr().lock();
            let _ = e.write_all(&out);
        } else {
            let mut o = std::io::stdout().lock();
            let _ = o.write_all(&out).and_then(|()| o.flush());
        }
    }
}

/// Removes `/dev/shm/weft-<job_id>-*`; returns how many it removed. (Weft's own segments
/// have no names, see `weft::sys::segment`; this sweeps what the job's programs left under
/// the job's prefix, and segments of older weft versions.)
pub fn remove_segments(job_id: &str) -> usize {
    let prefix = format!("weft-{job_id}-");
    let Ok(dir) = std::fs::read_dir("/dev/shm") else {
        return 0;
    };
    dir.flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .filter(|e| std::fs::remove_file(e.path()).is_ok())
        .count()
}

pub fn exit_byte(code: i32) -> u8 {
    match (code & 0xff) as u8 {
        0 if code != 0 => 1,
        b => b,
    }
}

/// What one rank costs the launcher's host: the rank's process, and in the launcher three
/// threads (its PMI server, two output forwarders) and four descriptors (its PMI socket, a
/// duplicate for writing, the ends of its stdout and stderr pipes).
const TASKS_PER_RANK: u64 = 4;
const FDS_PER_RANK: u64 = 4;
/// Descriptors the launcher needs besides its ranks'.
const FDS_RESERVED: u64 = 64;
/// The most processes one Linux host can have (PID_MAX_LIMIT on 64-bit kernels).
const PID_MAX_LIMIT: u64 = 1 << 22;

/// Refuses `-n np` when this host's limits could not run that many ranks, naming each limit
/// and what it allows (before anything is allocated for the ranks). Raises the launcher's
/// soft descriptor limit to its hard limit on the way (it needs a few per rank).
pub fn check_rank_count(np: u32) -> anyhow::Result<()> {
    check_ranks_here(np, &format!("-n {np}"))
}

/// [`check_rank_count`] for `np` ranks on this host, named `what` in the message.
pub fn check_ranks_here(np: u32, what: &str) -> anyhow::Result<()> {
    let read =
        |path: &str| -> Option<u64> { std::fs::read_to_string(path).ok()?.trim().parse().ok() };
    let nofile = sys::raise_nofile().ok().flatten();
    let nproc = sys::rlimit(libc::RLIMIT_NPROC)
        .ok()
        .and_then(|(soft, _)| soft);
    let pid_max = read("/proc/sys/kernel/pid_max");
    let threads_max = read("/proc/sys/kernel/threads-max");
    let mut limits = Vec::new();
    let mut most = u64::MAX;
    let mut limit = |what: String, allows: Option<u64>| {
        if let Some(a) = allows {
            most = most.min(a);
            limits.push(format!("{what} allows {a}"));
        }
    };
    let fmt = |v: Option<u64>| v.map_or("unlimited".to_owned(), |v| v.to_string());
    limit(
        format!("RLIMIT_NOFILE ({})", fmt(nofile)),
        nofile.map(|v| v.saturating_sub(FDS_RESERVED) / FDS_PER_RANK),
    );
    if !sys::is_root() {
        limit(
            format!("RLIMIT_NPROC ({})", fmt(nproc)),
            nproc.map(|v| v / TASKS_PER_RANK),
        );
    }
    limit(
        format!("kernel.pid_max ({})", fmt(pid_max)),
        Some(pid_max.unwrap_or(PID_MAX_LIMIT) / TASKS_PER_RANK),
    );
    limit(
        format!("kernel.threads-max ({})", fmt(threads_max)),
        threads_max.map(|v| v / TASKS_PER_RANK),
    );
    if u64::from(np) > most {
        anyhow::bail!(
            "{what}: this host cannot run that many ranks: each is a process, with {} threads \
             and {FDS_PER_RANK} file descriptors in the launcher; {}: at most {most} ranks here",
            TASKS_PER_RANK - 1,
            limits.join(", ")
        );
    }
    Ok(())
}

/// Refuses `-n np` over `hosts` hosts when no Linux host could run its share (the launcher
/// cannot see the other hosts' limits; their proxies report what they cannot start).
pub fn check_rank_count_on_hosts(np: u32, hosts: usize) -> anyhow::Result<()> {
    let most = PID_MAX_LIMIT / TASKS_PER_RANK * hosts as u64;
    if u64::from(np) > most {
        anyhow::bail!(
            "-n {np}: {hosts} host(s) cannot run that many ranks: a Linux host has at most \
             {PID_MAX_LIMIT} processes and threads (its kernel.pid_max can be no higher), \
             which is {} ranks: at most {most} ranks on these hosts",
            PID_MAX_LIMIT / TASKS_PER_RANK
        );
    }
    Ok(())
}

/// How far one starter got, shared by the thread that starts its ranks and the event loop
/// (which stops it as soon as the job's end is decided).
#[derive(Default)]
pub struct Starting {
    /// Ranks it starts.
    total: u32,
    /// What they are, for messages: "ranks", or "processes of spawned job J".
    what: String,
    /// Ranks started so far (they are started in order).
    started: AtomicU32,
    /// The event loop decided the job's end: start no more.
    stop: AtomicBool,
    /// Every rank is started, or starting stopped.
    done: AtomicBool,
    /// What every starter of the launcher shares with the reaper.
    children: Arc<Children>,
}

impl Starting {
    /// Asks the starter to start no more ranks; returns "(k of n ranks started)" when it
    /// was still starting them (not when the last one is started and only its `done` is yet
    /// to be stored: that job was whole).
    pub fn stop(&self) -> Option<String> {
        // SYNC: pairs with the Acquire load in the starter's loop (and its Release of done).
        self.stop.store(true, Ordering::Release);
        let started = self.started.load(Ordering::Relaxed);
        (!self.done.load(Ordering::Acquire) && started < self.total)
            .then(|| format!("({started} of {} {} started)", self.total, self.what))
    }
}

/// What every starter of one launcher shares with its one reaper (`waitpid(-1)` would race a
/// second): no child is reaped while a starter is starting one ([`reap_beside_spawn`]), and
/// the reaper runs as long as children may be left or be started.
#[derive(Default)]
pub struct Children {
    /// Held by a starter while it starts a child.
    spawn: Mutex<()>,
    state: Mutex<Reaping>,
}

#[derive(Default)]
struct Reaping {
    /// Starters still starting.
    starting: u32,
    /// Starters ever registered (tells the reaper whether one came while it waited).
    registered: u64,
    /// The reaper thread runs.
    reaper: bool,
}

impl Children {
    fn state(&self) -> std::sync::MutexGuard<'_, Reaping> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers a starter about to start children, and starts the reaper unless it runs
    /// (the first time, or again when it ended for want of children before a spawn was
    /// handled: a rank may send its request and exit without waiting for the answer).
    fn register(self: &Arc<Self>, tx: &mpsc::Sender<Event>) -> anyhow::Result<()> {
        let mut st = self.state();
        if !st.reaper {
            start_reaper(tx, Some(self.clone()))?;
            st.reaper = true;
        }
        st.starting += 1;
        st.registered += 1;
        Ok(())
    }

    /// A starter started its last child (or stopped).
    fn unregister(&self) {
        let mut st = self.state();
        st.starting = st.starting.saturating_sub(1);
    }

    /// The reaper's look before it waits: the registrations so far when no starter is
    /// starting (None: one is).
    fn idle(&self) -> Option<u64> {
        let st = self.state();
        (st.starting == 0).then_some(st.registered)
    }

    /// The reaper found no child left, after [`idle`](Children::idle) said `seen`: whether
    /// that is the end (no starter came since, so none can come without restarting it).
    fn reaper_may_end(&self, seen: Option<u64>) -> bool {
        let mut st = self.state();
        let end = st.starting == 0 && seen == Some(st.registered);
        if end {
            st.reaper = false;
        }
        end
    }
}

/// Runs the job; returns the exit code for the launcher.
///
/// The event loop runs from the first instant: ranks are started by a thread of their own,
/// so the time limit counts from the start and a signal, a rank's failure or a rank that
/// cannot be started ends the job while the others are still being started.
pub fn run(opts: &Options) -> anyhow::Result<u8> {
    let n = opts.np;
    let job_id = new_job_id();
    let kvsname = format!("weft_{job_id}");
    let secret = weft::launcher::host::random_hex(32)
        .map_err(|e| anyhow::anyhow!("making the job secret: getrandom: {e}"))?;
    let job = Job::new(
        n,
        kvsname.clone(),
        opts.process_mapping.clone(),
        opts.pmi_debug,
        secret.clone(),
    );
    let universe = job.place.universe.clone();
    let names = job.place.names.clone();
    let (tx, rx) = mpsc::channel::<Event>();

    // Signals that end the job are taken by one thread; block them first so every thread
    // started afterwards inherits the mask (children get an empty mask back).
    start_signal_thread(&tx)?;

    let cpus = opts
        .bind
        .cpus()
        .map_err(|e| anyhow::anyhow!("--bind-to core: reading the launcher's CPUs: {e}"))?;
    let children = Arc::new(Children::default());
    let outputs = Outputs::default();
    let starting = Starter {
        apps: vec![App {
            program: opts.program.clone(),
            args: opts.args.clone(),
            cwd: None,
            count: n,
        }],
        env: opts.env.clone(),
        size: n,
        job_id: job_id.clone(),
        kvsname,
        cpus: cpus.clone(),
        ranks: (0..n).collect(),
        tag_output: opts.tag_output,
        pmi: job,
        // Checked in main before anything started.
        check_limits: false,
    }
    .start(&tx, &children, &outputs)?;

    let ranks = (0..n).map(|_| Rank::new(0, None)).collect();
    let mut ctl = Control::new(ranks, 0);
    ctl.starting.push(starting);
    let mut hooks = LocalStart {
        early: Vec::new(),
        spawner: Spawner {
            tx,
            children,
            outputs: outputs.clone(),
            env: opts.env.clone(),
            tag_output: opts.tag_output,
            pmi_debug: opts.pmi_debug,
            secret,
            cpus,
            universe,
            names,
            job_ids: vec![job_id],
        },
    };
    drive(&mut ctl, &rx, opts.timeout, &mut hooks);

    for job_id in &hooks.spawner.job_ids {
        let removed = remove_segments(job_id);
        if removed > 0 {
            note!("weft run: removed {removed} shared-memory segment(s) /dev/shm/weft-{job_id}-* left by the job");
        }
    }
    let outputs = std::mem::take(&mut *outputs.lock().unwrap_or_else(|e| e.into_inner()));
    finish_output(outputs);
    Ok(ctl.outcome.map_or(0, exit_byte))
}

/// One program of a job and the consecutive ranks that run it (a job has one, unless it was
/// started by a PMI spawn of several commands).
#[derive(Clone, Debug)]
pub struct App {
    pub program: String,
    /// Its arguments (not the program itself).
    pub args: Vec<String>,
    /// Where its ranks start (None: the launcher's directory).
    pub cwd: Option<std::path::PathBuf>,
    /// How many of the starter's ranks run it (the apps' counts add up to the ranks).
    pub count: u32,
}

/// The start of this host's ranks of one job, shared by the local launcher (for the first
/// job and every job spawned) and each proxy: what every rank here shares, and which ranks
/// to start.
pub struct Starter {
    /// The programs, in rank order.
    pub apps: Vec<App>,
    pub env: Vec<(String, String)>,
    /// Ranks in the job.
    pub size: u32,
    pub job_id: String,
    pub kvsname: String,
    /// Local rank k runs only on `cpus[k % len]` (empty: anywhere).
    pub cpus: Vec<usize>,
    /// The world ranks to start on this host, by local rank (ranks of the job: its place in
    /// the universe, `pmi.place`, turns them into the launcher's indices in events).
    pub ranks: Vec<u32>,
    /// Prefix each output line with `[rank] ` (`[job.rank] ` in a spawned job).
    pub tag_output: bool,
    /// The PMI-1 service of this host's ranks.
    pub pmi: Arc<Job>,
    /// Check this host's limits first ([`check_rank_count`]; the local launcher does before
    /// anything starts, a proxy here): when they cannot run the ranks, start none and report
    /// the first as failed, naming the limits.
    pub check_limits: bool,
}

/// The output forwarders of the started ranks (to let them finish, [`finish_output`]).
pub type Outputs = Arc<Mutex<Vec<thread::JoinHandle<()>>>>;

impl Starter {
    /// Starts the thread that starts the ranks (and the reaper of `children`, unless it
    /// runs), and returns at once: the caller's event loop runs while the ranks start, and
    /// stops their start through the returned [`Starting`]. The output forwarders go into
    /// `outputs`. Events: [`Event::RankStarted`], [`Event::RankStartFailed`],
    /// [`Event::GroupStarted`], then [`Event::StartEnded`]; [`Event::Exited`] from the reaper
    /// (possibly before the start of that child is reported).
    pub fn start(
        self,
        tx: &mpsc::Sender<Event>,
        children: &Arc<Children>,
        outputs: &Outputs,
    ) -> anyhow::Result<Arc<Starting>> {
        let what = match self.pmi.place.number {
            0 => "ranks".to_owned(),
            j => format!("processes of spawned job {j}"),
        };
        let starting = Arc::new(Starting {
            total: self.ranks.len() as u32,
            what,
            children: children.clone(),
            ..Starting::default()
        });
        children.register(tx)?;
        let (tx, st, out) = (tx.clone(), starting.clone(), outputs.clone());
        let started = thread::Builder::new()
            .name("starter".into())
            .spawn(move || {
                start_ranks(&self, &st, &out, tx);
                // PR_SET_PDEATHSIG fires when the thread that started a child ends, not the
                // process: this thread must live as long as the launcher.
                loop {
                    thread::park();
                }
            });
        if let Err(e) = started {
            children.unregister();
            anyhow::bail!("starting the thread that starts the ranks: {e}");
        }
        Ok(starting)
    }
}

/// The starter thread's work: starts the ranks in order until all are started or the
/// event loop says stop, reporting each ([`Event::RankStarted`],
/// [`Event::RankStartFailed`]) and then the end ([`Event::StartEnded`]). Events name ranks by
/// the launcher's index (`pmi.index`).
fn start_ranks(
    st: &Starter,
    starting: &Starting,
    outputs: &Mutex<Vec<thread::JoinHandle<()>>>,
    tx: mpsc::Sender<Event>,
) {
    let n = st.ranks.len() as u32;
    let launcher = std::process::id() as libc::pid_t;
    let place = &st.pmi.place;
    let hows: Vec<Spawn> = st
        .apps
        .iter()
        .enumerate()
        .map(|(appnum, app)| Spawn {
            program: &app.program,
            args: &app.args,
            env: &st.env,
            size: st.size,
            job_id: &st.job_id,
            kvsname: &st.kvsname,
            cwd: app.cwd.as_deref(),
            cpus: &st.cpus,
            spawned: (place.number > 0).then_some((place.base, appnum as u32)),
        })
        .collect();
    // The app of each local rank, in order.
    let app_of: Vec<usize> = st
        .apps
        .iter()
        .enumerate()
        .flat_map(|(i, app)| std::iter::repeat_n(i, app.count as usize))
        .collect();
    debug_assert_eq!(
        app_of.len(),
        st.ranks.len(),
        "the apps' counts add up to the ranks"
    );
    let mut pgid: libc::pid_t = 0;
    let mut started = 0;
    let refused = st
        .check_limits
        .then(|| check_ranks_here(n, &format!("{n} ranks")).err())
        .flatten();
    if let (Some(e), Some(&rank)) = (&refused, st.ranks.first()) {
        let _ = tx.send(Event::RankStartFailed {
            rank: st.pmi.index(rank),
            why: format!("{e:#}"),
        });
    }
    // SYNC: pairs with the Release store in `Starting::stop`.
    while refused.is_none() && started < n && !starting.stop.load(Ordering::Acquire) {
        let (local, rank) = (started, st.ranks[started as usize]);
        let index = st.pmi.index(rank);
        let app = app_of.get(local as usize).copied();
        let Some(how) = app.or(hows.len().checked_sub(1)).and_then(|a| hows.get(a)) else {
            let _ = tx.send(Event::RankStartFailed {
                rank: index,
                why: "the launcher has no program for it".into(),
            });
            break;
        };
        let spawned = {
            let _spawning = starting
                .children
                .spawn
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            match how.spawn(rank, local, n, pgid, launcher) {
                // The group is gone: every rank in it ended (and was reaped) before this one
                // started. Start a new one, led by this rank.
                // (EPERM from setpgid; the error is wrapped, so only its kind is left. An
                // exec refused with EACCES is retried once in vain and then reported.)
                Err(e) if pgid != 0 && e.kind() == std::io::ErrorKind::PermissionDenied => {
                    pgid = 0;
                    how.spawn(rank, local, n, 0, launcher)
                }
                other => other,
            }
        };
        let (mut child, parent_end) = match spawned {
            Ok(x) => x,
            Err(e) => {
                let _ = tx.send(Event::RankStartFailed {
                    rank: index,
                    why: e.to_string(),
                });
                break;
            }
        };
        let pid = child.id() as libc::pid_t;
        if pgid == 0 {
            pgid = pid;
            let _ = tx.send(Event::GroupStarted { pgid });
        }
        started += 1;
        starting.started.store(started, Ordering::Relaxed);
        let _ = tx.send(Event::RankStarted { rank: index, pid });
        // The child is reaped by the reaper thread through waitpid(-1), not through `child`.
        let (out, err) = (child.stdout.take(), child.stderr.take());
        drop(child);
        let (tag, label) = (st.tag_output, st.pmi.tag(rank));
        let err_label = label.clone();
        let (job, rtx) = (st.pmi.clone(), tx.clone());
        let threads = [
            out.map(|o| {
                (
                    "stdout",
                    Box::new(move || forward(&label, o, false, tag)) as Box<dyn FnOnce() + Send>,
                )
            }),
            err.map(|e| {
                (
                    "stderr",
                    Box::new(move || forward(&err_label, e, true, tag)) as Box<dyn FnOnce() + Send>,
                )
            }),
            Some((
                "PMI",
                Box::new(move || pmi_server::serve(job, rank, parent_end, rtx))
                    as Box<dyn FnOnce() + Send>,
            )),
        ];
        for (what, f) in threads.into_iter().flatten() {
            match thread::Builder::new().spawn(f) {
                Ok(h) if what != "PMI" => outputs.lock().unwrap_or_else(|e| e.into_inner()).push(h),
                Ok(_) => {}
                Err(e) => {
                    let _ = tx.send(Event::RankStartFailed {
                        rank: index,
                        why: format!("cannot start the launcher's {what} thread for it: {e}"),
                    });
                    starting.stop.store(true, Ordering::Relaxed);
                }
            }
        }
    }
    // SYNC: pairs with the Acquire loads of done in `Starting::stop`.
    starting.done.store(true, Ordering::Release);
    starting.children.unregister();
    let unstarted = st.ranks[started as usize..]
        .iter()
        .map(|&r| st.pmi.index(r))
        .collect();
    let _ = tx.send(Event::StartEnded { unstarted });
}

/// The event loop's part in a local job's start-up: it learns each rank's pid as it is
/// started, gives up on the ranks that never will be, and starts the jobs ranks spawn.
struct LocalStart {
    /// Children reaped before their start was reported (the reaper can be first).
    early: Vec<(libc::pid_t, Status)>,
    spawner: Spawner,
}

impl Hooks for LocalStart {
    fn event(&mut self, ctl: &mut Control, ev: Event) {
        match ev {
            Event::RankStarted { rank, pid } => {
                let i = rank as usize;
                ctl.ranks[i].pid = pid;
                if let Some(k) = self.early.iter().position(|&(p, _)| p == pid) {
                    let (_, status) = self.early.swap_remove(k);
                    ctl.exited(i, status);
                } else if ctl.outcome.is_some() {
                    // Started after the end was decided (and signalled): no grace for it.
                    sys::kill(pid, libc::SIGKILL);
                }
            }
            Event::RankStartFailed { rank, why } => {
                let name = ctl.name(rank as usize);
                ctl.fail(EXIT_CANNOT_START, format!("cannot start {name}: {why}"));
            }
            Event::GroupStarted { pgid } => {
                ctl.pgids.push(pgid);
                if ctl.outcome.is_some() {
                    sys::kill(-pgid, libc::SIGKILL);
                }
            }
            Event::StartEnded { unstarted } => {
                for i in unstarted {
                    ctl.abandon(i as usize);
                }
            }
            Event::Exited { pid, status } => self.early.push((pid, status)),
            Event::Spawn {
                rank,
                request,
                reply,
            } => {
                let result = if ctl.outcome.is_some() {
                    Err("the job is ending".to_owned())
                } else {
                    self.spawner.spawn(ctl, rank as usize, request)
                };
                // A rank that hung up meanwhile just misses the answer.
                let _ = reply.send(result);
            }
            _ => {}
        }
    }
}

/// Lets the forwarders print what the ranks wrote last, but does not wait on descendants
/// that keep a pipe open.
pub fn finish_output(outputs: Vec<thread::JoinHandle<()>>) {
    let until = Instant::now() + Duration::from_secs(1);
    for h in outputs {
        while !h.is_finished() && Instant::now() < until {
            thread::sleep(Duration::from_millis(5));
        }
    }
}

/// Blocks SIGINT/SIGTERM/SIGHUP in this thread (and the threads it starts afterwards, so
/// call it first) and starts the one thread that takes them, reporting [`Event::Signal`].
pub fn start_signal_thread(tx: &mpsc::Sender<Event>) -> anyhow::Result<()> {
    sys::block_job_signals().map_err(|e| anyhow::anyhow!("blocking SIGINT/SIGTERM: {e}"))?;
    let tx = tx.clone();
    thread::Builder::new()
        .name("signals".into())
        .spawn(move || loop {
            if tx.send(Event::Signal(sys::wait_signal())).is_err() {
                break;
            }
        })?;
    Ok(())
}

/// Starts the thread that reaps every child (`waitpid(-1)`), reporting [`Event::Exited`].
pub fn start_reaper_thread(tx: &mpsc::Sender<Event>) -> anyhow::Result<()> {
    start_reaper(tx, None)
}

/// Like [`start_reaper_thread`], while the starters sharing `children` may still start
/// children: then having none is not the end.
fn start_reaper(tx: &mpsc::Sender<Event>, children: Option<Arc<Children>>) -> anyhow::Result<()> {
    let tx = tx.clone();
    thread::Builder::new()
        .name("reaper".into())
        .spawn(move || loop {
            // Look before waiting: if no starter was starting then, and none came since,
            // "no child" really is the end.
            let idle = children.as_ref().map(|c| c.idle());
            let reaped = match &children {
                None => sys::wait_any(),
                Some(c) => reap_beside_spawn(c),
            };
            match reaped {
                Ok(Some((pid, status))) => {
                    if tx.send(Event::Exited { pid, status }).is_err() {
                        break;
                    }
                }
                Ok(None) => match (&children, idle) {
                    (None, _) => break,
                    (Some(c), Some(seen)) if c.reaper_may_end(seen) => break,
                    _ => thread::sleep(Duration::from_millis(2)),
                },
                Err(e) => {
                    let _ = tx.send(Event::ReaperError(e.to_string()));
                    break;
                }
            }
        })?;
    Ok(())
}

/// Reaps one child while others may be being started. `Command::spawn` reaps a child itself
/// when its exec fails (and panics if someone else reaped it first), so the reaper only
/// looks (`WNOWAIT`) until no spawn is under way, then reaps exactly the child it saw, if
/// spawn has not taken it. `Ok(None)`: no child now, or nothing of ours to report yet.
fn reap_beside_spawn(children: &Children) -> std::io::Result<Option<(libc::pid_t, Status)>> {
    let Some(pid) = sys::wait_exited_peek()? else {
        return Ok(None);
    };
    let _no_spawn = children.spawn.lock().unwrap_or_else(|e| e.into_inner());
    sys::reap(pid).map(|st| st.map(|st| (pid, st)))
}

/// What a multi-host job adds to the event loop.
pub trait Hooks {
    /// An event the common loop does not handle (remote starts, fences, lost hosts, the exit
    /// of a child that is not a rank).
    fn event(&mut self, ctl: &mut Control, ev: Event);

    /// Remote ranks whose end was never reported, well after SIGKILL was sent: the hook
    /// gives up on them ([`Control::abandon`]) and stops what may still run them.
    fn unreported(&mut self, _ctl: &mut Control, _ranks: &[usize]) {}
}

/// The event loop: runs until every rank is accounted for (or the channel closes, or ranks
/// ignore SIGKILL); the outcome is left in `ctl.outcome`.
pub fn drive(
    ctl: &mut Control,
    rx: &mpsc::Receiver<Event>,
    timeout: Option<Duration>,
    hooks: &mut dyn Hooks,
) {
    let deadline = timeout.map(|t| Instant::now() + t);
    while ctl.alive > 0 {
        let now = Instant::now();
        let mut wake: Option<Instant> = None;
        let mut consider = |t: Option<Instant>| {
            if let Some(t) = t {
                wake = Some(wake.map_or(t, |w| w.min(t)));
            }
        };
        if ctl.outcome.is_none() {
            consider(deadline);
        }
        consider(ctl.kill_at);
        consider(ctl.give_up_at);
        for r in &ctl.ranks {
            consider(r.pending.map(|(_, t)| t));
        }
        let ev = match wake {
            Some(t) => rx.recv_timeout(t.saturating_duration_since(now)),
            None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
        };
        match ev {
            Ok(Event::Exited { pid, status }) => {
                // (A rank reaped already, waiting for its PMI socket, is not this child.)
                let local =
                    |r: &Rank| r.pid == pid && r.host.is_none() && !r.done && r.pending.is_none();
                match ctl.ranks.iter().position(local) {
                    Some(i) => ctl.exited(i, status),
                    None => hooks.event(ctl, Event::Exited { pid, status }),
                }
            }
            Ok(Event::RankExited { rank, status }) => {
                if !ctl.ranks[rank as usize].done {
                    ctl.exited(rank as usize, status);
                }
            }
            Ok(Event::ReaperError(e)) => {
                ctl.fail(1, format!("waiting for the ranks failed: {e}"));
                break;
            }
            Ok(Event::PmiInit { rank }) => ctl.ranks[rank as usize].inited = true,
            Ok(Event::PmiFinalize { rank }) => ctl.ranks[rank as usize].finalized = true,
            Ok(Event::PmiAbort { rank, code }) => {
                let who = ctl.who(rank as usize);
                ctl.fail(
                    if code == 0 { 1 } else { code },
                    format!("{who} called PMI abort with exit code {code}"),
                );
            }
            Ok(Event::PmiClosed { rank }) => {
                let r = &mut ctl.ranks[rank as usize];
                r.pmi_open = false;
                if r.pending.is_some() {
                    ctl.finish_exit(rank as usize);
                }
            }
            Ok(Event::Signal(sig)) => {
                if ctl.outcome.is_some() {
                    // A second interrupt: no more grace.
                    ctl.kill_now(libc::SIGKILL);
                } else {
                    ctl.fail(128 + sig, format!("received {}", sys::signal_name(sig)));
                }
            }
            Ok(ev) => hooks.event(ctl, ev),
            Err(RecvTimeoutError::Timeout) => {
                let now = Instant::now();
                if ctl.outcome.is_none() && deadline.is_some_and(|d| now >= d) {
                    let secs = timeout.unwrap_or_default().as_secs_f64();
                    ctl.fail(
                        EXIT_TIMEOUT,
                        format!(
                            "the job ran longer than its time limit of {secs} s (--timeout or \
                             MPIEXEC_TIMEOUT)"
                        ),
                    );
                }
                for i in 0..ctl.ranks.len() {
                    if ctl.ranks[i].pending.is_some_and(|(_, t)| now >= t) {
                        ctl.finish_exit(i);
                    }
                }
                if ctl.kill_at.is_some_and(|t| now >= t) {
                    ctl.kill_now(libc::SIGKILL);
                }
                if ctl.give_up_at.is_some_and(|t| now >= t) {
                    let remote: Vec<usize> = (0..ctl.ranks.len())
                        .filter(|&i| !ctl.ranks[i].done && ctl.ranks[i].host.is_some())
                        .collect();
                    if !remote.is_empty() {
                        hooks.unreported(ctl, &remote);
                    }
                    let left: Vec<String> = (0..ctl.ranks.len())
                        .filter(|&i| !ctl.ranks[i].done)
                        .map(|i| ctl.who(i))
                        .collect();
                    if !left.is_empty() {
                        note!(
                            "weft run: {} did not exit after SIGKILL; giving up on them",
                            left.join(", ")
                        );
                    }
                    break;
                }
            }
            Err(RecvTimeoutError::Disconnected) => break,
        }
    }
}

/// How to start a rank: what every rank of the job (on this host) shares.
pub struct Spawn<'a> {
    pub program: &'a str,
    pub args: &'a [String],
    pub env: &'a [(String, String)],
    /// Ranks in the job.
    pub size: u32,
    pub job_id: &'a str,
    pub kvsname: &'a str,
    /// Where the ranks start (None: the launcher's directory).
    pub cwd: Option<&'a std::path::Path>,
    /// Local rank k runs only on `cpus[k % len]` (empty: anywhere).
    pub cpus: &'a [usize],
    /// For a job started by PMI spawn: the launcher's index of its rank 0 and the command
    /// these ranks run (`WEFT_UNIVERSE_BASE`, `PMI_APPNUM`, with `PMI_SPAWNED=1`).
    pub spawned: Option<(u32, u32)>,
}

impl Spawn<'_> {
    /// Starts world rank `rank`, number `local_rank` of the `local_size` ranks on this host,
    /// in process group `pgid` (0: a new one), dying with process `parent`. Returns the child
    /// (stdout and stderr piped) and the launcher's end of its PMI socket.
    pub fn spawn(
        &self,
        rank: u32,
        local_rank: u32,
        local_size: u32,
        pgid: libc::pid_t,
        parent: libc::pid_t,
    ) -> std::io::Result<(std::process::Child, std::os::unix::net::UnixStream)> {
        let (parent_end, child_end) = sys::pmi_socketpair()?;
        let fd = child_end.as_raw_fd();
        let mut cmd = Command::new(self.program);
        cmd.args(self.args)
            .env_remove("PMI_PORT")
            .env_remove("PMI_ID")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .env("PMI_FD", fd.to_string())
            .env("PMI_RANK", rank.to_string())
            .env("PMI_SIZE", self.size.to_string())
            .env("PMI_JOBID", self.kvsname)
            .env("MPI_LOCALNRANKS", local_size.to_string())
            .env("MPI_LOCALRANKID", local_rank.to_string())
            .env("WEFT_JOB_ID", self.job_id)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(pgid);
        if let Some((base, appnum)) = self.spawned {
            cmd.env("PMI_SPAWNED", "1")
                .env("WEFT_UNIVERSE_BASE", base.to_string())
                .env("PMI_APPNUM", appnum.to_string());
        }
        if let Some(dir) = self.cwd {
            cmd.current_dir(dir);
        }
        let cpu = (!self.cpus.is_empty()).then(|| self.cpus[local_rank as usize % self.cpus.len()]);
        // SAFETY: the hook runs in the forked child before exec and calls only
        // async-signal-safe functions (fcntl, prctl, getppid, sigprocmask,
        // sched_setaffinity); `fd` is the child end of the socket pair, open in the child
        // because the parent still holds `child_end`.
        unsafe {
            cmd.pre_exec(move || sys::child_setup(fd, parent, cpu));
        }
        let child = cmd.spawn().map_err(|e| {
            std::io::Error::new(e.kind(), format!("program {:?}: {e}", self.program))
        })?;
        drop(child_end);
        Ok((child, parent_end))
    }
}

/// The event loop's state: which ranks are left and how the job ends.
pub struct Control {
    /// Every rank of the job, by world rank.
    pub ranks: Vec<Rank>,
    /// The local ranks' process groups (usually one; a new one is started when every rank
    /// of the last one ended before the next rank was started).
    pgids: Vec<libc::pid_t>,
    /// Ranks not yet accounted for.
    pub alive: u32,
    /// The job's exit code, once decided (the first failure wins).
    pub outcome: Option<i32>,
    kill_at: Option<Instant>,
    give_up_at: Option<Instant>,
    /// Signals the remote ranks (multi-host jobs: through their proxies).
    pub signal_remote: Option<Box<dyn FnMut(i32)>>,
    /// The starts of local ranks (the first job's, and every spawned job's), while they may
    /// still go on (stopped when the job's end is decided).
    pub starting: Vec<Arc<Starting>>,
}

impl Control {
    /// `ranks` all alive; local ranks are in process group `pgid` (0: there are none).
    pub fn new(ranks: Vec<Rank>, pgid: libc::pid_t) -> Control {
        Control {
            alive: ranks.len() as u32,
            ranks,
            pgids: (pgid > 0).then_some(pgid).into_iter().collect(),
            outcome: None,
            kill_at: None,
            give_up_at: None,
            signal_remote: None,
            starting: Vec::new(),
        }
    }

    /// "rank R", or "rank R of spawned job J" for a process a PMI spawn started.
    pub fn name(&self, i: usize) -> String {
        match self.ranks.get(i).and_then(|r| r.spawned) {
            Some((job, rank)) => format!("rank {rank} of spawned job {job}"),
            None => format!("rank {i}"),
        }
    }

    /// "rank R (pid P)" (see [`name`](Control::name)), with " on host H" for a remote rank.
    pub fn who(&self, i: usize) -> String {
        let r = &self.ranks[i];
        let name = self.name(i);
        match (&r.host, r.pid) {
            (None, pid) => format!("{name} (pid {pid})"),
            (Some(h), 0) => format!("{name} (on host {h})"),
            (Some(h), pid) => format!("{name} (pid {pid} on host {h})"),
        }
    }

    /// Rank `i` ended with `status`: decide once its PMI socket has drained.
    fn exited(&mut self, i: usize, status: Status) {
        let r = &mut self.ranks[i];
        r.pending = Some((status, Instant::now() + PMI_DRAIN));
        if !r.pmi_open {
            self.finish_exit(i);
        }
    }

    /// Gives up on rank `i` without an exit status (its host is lost).
    pub fn abandon(&mut self, i: usize) {
        let r = &mut self.ranks[i];
        if !r.done {
            r.done = true;
            r.pending = None;
            self.alive -= 1;
        }
    }

    /// Whether rank `i` is accounted for.
    pub fn is_done(&self, i: usize) -> bool {
        self.ranks[i].done
    }

    fn finish_exit(&mut self, i: usize) {
        let r = &mut self.ranks[i];
        let Some((status, _)) = r.pending.take() else {
            return;
        };
        r.done = true;
        self.alive -= 1;
        let (inited, finalized) = (r.inited, r.finalized);
        let who = self.who(i);
        match status {
            Status::Signaled(s) => self.fail(
                status.shell_code(),
                format!("{who} killed by signal {s} ({})", sys::signal_name(s)),
            ),
            Status::Exited(c) if c != 0 => self.fail(c, format!("{who} exited with code {c}")),
            Status::Exited(_) if inited && !finalized => self.fail(
                EXIT_NO_FINALIZE,
                format!("{who} exited with code 0 without calling PMI finalize"),
            ),
            Status::Exited(_) => {}
        }
    }

    /// Records the job's outcome (the first failure wins) and starts ending the job.
    pub fn fail(&mut self, code: i32, why: String) {
        if self.outcome.is_some() {
            return;
        }
        self.outcome = Some(code);
        let progress: Vec<String> = self.starting.iter().filter_map(|s| s.stop()).collect();
        let why = match progress.is_empty() {
            true => why,
            false => format!("{why} {}", progress.join(" ")),
        };
        if self.alive > 0 {
            note!("weft run: {why}; ending the job");
            self.kill_now(libc::SIGTERM);
            self.kill_at = Some(Instant::now() + TERM_GRACE);
        } else {
            note!("weft run: {why}");
        }
    }

    fn kill_now(&mut self, sig: i32) {
        for &g in &self.pgids {
            sys::kill(-g, sig);
        }
        for r in self.ranks.iter() {
            if !r.done && r.pending.is_none() && r.host.is_none() && r.pid > 0 {
                sys::kill(r.pid, sig);
            }
        }
        if let Some(f) = &mut self.signal_remote {
            f(sig);
        }
        if sig == libc::SIGKILL {
            self.kill_at = None;
            self.give_up_at.get_or_insert(Instant::now() + KILL_WAIT);
        }
    }
}
