//! `weft proxy` (hidden): the part of a multi-host `weft run` on each remote host.
//!
//! Started by the head through the remote-start command (`ssh HOST weft proxy ...`), it reads
//! the per-job proxy secret and the job secret from its stdin (so neither appears in a process
//! list, a file or the job's sockets; it serves the job secret to its ranks itself),
//! connects back to the head over TCP and proves it knows the secret, receives the job, then
//! starts its ranks and serves them PMI-1 exactly as the all-local launcher does (a socket
//! pair per rank), with barriers completed through the head. It reports every rank event
//! (start, init, finalize, abort, exit status) to the head, which alone decides how the job
//! ends, and signals its ranks when the head says so. The ranks' output goes to the proxy's
//! own stdout/stderr, which the remote-start command carries back to the head. A PMI spawn
//! request is refused (`rc=-1`: spawn is not supported in multi-host jobs yet).
//!
//! When the head goes away (its connection closes, fails or stays silent for the heartbeat
//! timeout, stdin reaches end of file, or the proxy gets SIGTERM/SIGHUP/SIGINT) the proxy
//! kills its ranks, removes the job's shared-memory segments on this host and exits 1. Its
//! ranks also die with it (PR_SET_PDEATHSIG).

use crate::launch::{self, Event};
use crate::pmi_server::{self, Job};
use crate::sys;
use crate::wire::{JobSpec, Receiver, Sender, ToHead, ToProxy};
use anyhow::{bail, Context};
use std::collections::HashMap;
use std::io::BufRead;
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// How long to wait for the head's connection and its job description.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
/// After the head is lost and the ranks are sent SIGKILL, how long to wait for them.
const KILL_WAIT: Duration = Duration::from_secs(3);

/// The proxy's command line.
#[derive(clap::Args, Debug)]
pub struct ProxyArgs {
    /// The head's address, HOST:PORT.
    #[arg(long)]
    pub head: String,
    /// This host's index in the job's host list.
    #[arg(long)]
    pub index: usize,
    /// This host's name (for messages).
    #[arg(long)]
    pub name: String,
    /// Seconds to wait for the job once connected (the head sends it when every proxy has
    /// connected, which may take up to its start-up timeout).
    #[arg(long, default_value_t = 70)]
    pub wait: u64,
}

/// The proxy's side of the proof exchange (see [`crate::wire`]): the head must prove it
/// holds the secret before the proxy proves it in turn and takes a job from it.
fn prove_head(
    out: &Sender,
    input: &mut Receiver,
    secret: &str,
    host: usize,
    addr: SocketAddr,
) -> anyhow::Result<Box<JobSpec>> {
    let secret = crate::wire::bytes_from_hex("the proxy secret on stdin", secret)?;
    let nonce = crate::wire::fresh_nonce()?;
    out.send(
        &ToHead::Hello {
            host,
            nonce: nonce.clone(),
        }
        .to_value(),
    )
    .with_context(|| format!("sending hello to the head at {addr}"))?;
    let mut next = |what: &str| match input.recv() {
        Ok(Some(v)) => Ok(ToProxy::from_value(&v)?),
        Ok(None) => {
            bail!("the head at {addr} closed the connection (it refused this proxy's proof?)")
        }
        Err(e) => bail!("waiting for {what} from the head at {addr}: {e}"),
    };
    let (nonce_head, mac) = match next("its proof")? {
        ToProxy::Challenge { nonce, mac } => (nonce, mac),
        other => bail!("the head at {addr} sent {other:?} instead of its proof"),
    };
    let ex = crate::wire::Exchange {
        secret,
        host,
        nonce_proxy: crate::wire::bytes_from_hex("the proxy's nonce", &nonce)?,
        nonce_head: crate::wire::bytes_from_hex("the head's nonce", &nonce_head)?,
    };
    if !ex.verify(weft::launcher::auth::Role::Acceptor, &mac) {
        bail!(
            "the head at {addr} did not prove that it holds the job's proxy secret: \
             not taking a job from it"
        );
    }
    out.send(
        &ToHead::Proof {
            mac: ex.proxy_mac(),
        }
        .to_value(),
    )
    .with_context(|| format!("sending the proof to the head at {addr}"))?;
    match next("the job")? {
        ToProxy::Job(j) => Ok(j),
        other => bail!("the head at {addr} sent {other:?} instead of the job"),
    }
}

fn log_prefix(name: &str) -> String {
    format!("weft proxy on {name}")
}

/// Runs the proxy; returns its exit code.
pub fn run(a: &ProxyArgs) -> anyhow::Result<u8> {
    let me = log_prefix(&a.name);
    let mut stdin = std::io::stdin().lock();
    let mut line = String::new();
    stdin
        .read_line(&mut line)
        .context("reading the secrets from stdin")?;
    let (secret, job_secret) = match line.split_whitespace().collect::<Vec<_>>()[..] {
        [proxy, job] => (proxy.to_owned(), job.to_owned()),
        _ => bail!("no proxy and job secrets on stdin (weft proxy is started by weft run --hosts)"),
    };
    crate::wire::bytes_from_hex("the job secret on stdin", &job_secret)?;
    let addr: SocketAddr = a
        .head
        .to_socket_addrs()
        .with_context(|| format!("resolving the head's address {:?}", a.head))?
        .next()
        .with_context(|| format!("the head's address {:?} resolves to nothing", a.head))?;
    let stream = TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT)
        .with_context(|| format!("connecting to the head at {addr}"))?;
    let _ = stream.set_nodelay(true);
    let out = Sender::new(stream.try_clone()?, CONNECT_TIMEOUT)?;
    let mut input = Receiver::new(stream.try_clone()?, Duration::from_secs(a.wait.max(1)))?;
    let job = prove_head(&out, &mut input, &secret, a.index, addr)?;
    stream.set_read_timeout(Some(job.heartbeat))?;
    stream.set_write_timeout(Some(job.heartbeat))?;

    let (tx, rx) = mpsc::channel::<Event>();
    launch::start_signal_thread(&tx)?;

    // Barriers: the last local rank in sends this host's puts and waits for everyone's.
    let (fence_tx, fence_rx) = mpsc::channel::<Result<Vec<(String, String)>, String>>();
    let fence_rx = Mutex::new(fence_rx);
    let fence_out = out.clone();
    let fence: pmi_server::Fence = Box::new(move |mut puts| {
        // The job secret stays on this host whoever puts it.
        puts.retain(|(k, _)| k != pmi_server::SECRET_KEY);
        fence_out
            .send(&ToHead::Fence(puts).to_value())
            .map_err(|e| format!("sending the fence to the head: {e}"))?;
        let rx = fence_rx.lock().unwrap_or_else(|e| e.into_inner());
        rx.recv()
            .map_err(|_| "the proxy is ending".to_owned())
            .and_then(|r| r)
    });
    let pmi = Job::part(
        job.size,
        job.ranks.len() as u32,
        job.kvsname.clone(),
        job.mapping.clone(),
        job.pmi_debug,
        job.kvs
            .iter()
            .filter(|(k, _)| k != pmi_server::SECRET_KEY)
            .cloned()
            .chain([(pmi_server::SECRET_KEY.to_owned(), job_secret)])
            .collect(),
        Some(fence),
    );

    // The head's messages.
    {
        let tx = tx.clone();
        let fence_tx = fence_tx.clone();
        let hb = job.heartbeat.as_secs_f64();
        thread::Builder::new()
            .name("head-reader".into())
            .spawn(move || {
                let why = loop {
                    match input.recv() {
                        Ok(None) => break "the head closed the connection".to_owned(),
                        Err(e)
                            if matches!(
                                e.kind(),
                                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                            ) =>
                        {
                            break format!("heard nothing from the head for {hb:.1} s")
                        }
                        Err(e) => break format!("the connection to the head failed: {e}"),
                        Ok(Some(v)) => match ToProxy::from_value(&v) {
                            Ok(ToProxy::Ping) => {}
                            Ok(ToProxy::FenceDone(p)) => {
                                let _ = fence_tx.send(Ok(p));
                            }
                            Ok(m) => {
                                if tx.send(Event::FromHead(m)).is_err() {
                                    return;
                                }
                            }
                            Err(e) => break e.to_string(),
                        },
                    }
                };
                let _ = fence_tx.send(Err(why.clone()));
                let _ = tx.send(Event::HeadLost(why));
            })?;
    }
    // Stdin closes when the remote-start command ends (the head or its ssh is gone).
    {
        let tx = tx.clone();
        thread::Builder::new().name("stdin".into()).spawn(move || {
            let mut sink = Vec::new();
            let mut stdin = std::io::stdin().lock();
            loop {
                sink.clear();
                match stdin.read_until(b'\n', &mut sink) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
            }
            let _ = tx.send(Event::HeadLost(
                "the remote-start channel to the head (stdin) closed".into(),
            ));
        })?;
    }
    drop(stdin);
    // Heartbeat.
    {
        let out = out.clone();
        let every = job.heartbeat / 3;
        thread::Builder::new()
            .name("ping".into())
            .spawn(move || loop {
                thread::sleep(every);
                if out.send(&ToHead::Ping.to_value()).is_err() {
                    break;
                }
            })?;
    }

    let outcome = serve_ranks(&job, &pmi, &out, tx, &rx, &me);
    let removed = launch::remove_segments(&job.job_id);
    if removed > 0 {
        note!(
            "{me}: removed {removed} shared-memory segment(s) /dev/shm/weft-{}-* left by the job",
            job.job_id
        );
    }
    out.shutdown();
    Ok(outcome)
}

/// Starts the ranks, relays their events and the head's orders until the ranks are gone
/// and the head said so (0) or was lost (1). The ranks start on a thread of their own
/// ([`launch::Starter`], as in an all-local job), so an order from the head, its loss or a
/// signal stops their start and ends them from the first instant.
fn serve_ranks(
    job: &JobSpec,
    pmi: &Arc<Job>,
    out: &Sender,
    tx: mpsc::Sender<Event>,
    rx: &mpsc::Receiver<Event>,
    me: &str,
) -> u8 {
    let send = |m: ToHead| {
        // A failed send shows up as a lost head on the reader's side.
        let _ = out.send(&m.to_value());
    };
    let cwd = std::path::Path::new(&job.cwd);
    let bind = if job.bind_core {
        launch::BindTo::Core
    } else {
        launch::BindTo::None
    };
    let cpus = bind.cpus().unwrap_or_else(|e| {
        note!("{me}: --bind-to core: cannot read this host's CPUs ({e}); the ranks run unbound");
        Vec::new()
    });
    let children = Arc::new(launch::Children::default());
    let outputs = launch::Outputs::default();
    let started = launch::Starter {
        apps: vec![launch::App {
            program: job.program.clone(),
            args: job.args.clone(),
            cwd: cwd.is_dir().then(|| cwd.to_path_buf()),
            count: job.ranks.len() as u32,
        }],
        env: job.env.clone(),
        size: job.size,
        job_id: job.job_id.clone(),
        kvsname: job.kvsname.clone(),
        cpus,
        ranks: job.ranks.clone(),
        tag_output: job.tag_output,
        pmi: pmi.clone(),
        // The head cannot see this host's limits.
        check_limits: true,
    }
    .start(&tx, &children, &outputs);
    drop(tx);
    let starting = match started {
        Ok(s) => s,
        Err(e) => {
            for &rank in &job.ranks {
                send(ToHead::StartFailed {
                    rank,
                    why: format!("on its host's proxy: {e:#}"),
                });
            }
            return 1;
        }
    };

    let local_of: HashMap<u32, usize> =
        job.ranks.iter().enumerate().map(|(i, &r)| (r, i)).collect();
    // By local rank: 0 until started, and again once reaped (its pid may then be reused).
    let mut pids: Vec<libc::pid_t> = vec![0; job.ranks.len()];
    let mut pgids: Vec<libc::pid_t> = Vec::new();
    // Children reaped before their start was reported (the reaper can be first).
    let mut early: Vec<(libc::pid_t, sys::Status)> = Vec::new();
    let mut start_ended = false;
    let mut failed: Option<u32> = None;
    // Ranks started and not yet reaped.
    let mut left = 0usize;
    // The job is ending (the head sent a signal, or is lost): a rank started from now on is
    // killed at once.
    let mut ending = false;
    let mut exit_asked = false;
    let mut lost: Option<Instant> = None;
    let stop_starting = |why: &str| {
        if let Some(progress) = starting.stop() {
            note!("{me}: {why}: stopped starting ranks {progress}");
        }
    };
    while !start_ended || left > 0 || !(exit_asked || lost.is_some()) {
        let ev = match lost {
            Some(t) => {
                match rx.recv_timeout((t + KILL_WAIT).saturating_duration_since(Instant::now())) {
                    Ok(ev) => ev,
                    Err(RecvTimeoutError::Timeout) => {
                        note!("{me}: {left} rank(s) did not exit after SIGKILL; giving up on them");
                        break;
                    }
                    Err(RecvTimeoutError::Disconnected) => break,
                }
            }
            None => match rx.recv() {
                Ok(ev) => ev,
                Err(_) => break,
            },
        };
        match ev {
            Event::RankStarted { rank, pid } => {
                send(ToHead::Started { rank, pid });
                if let Some(k) = early.iter().position(|&(p, _)| p == pid) {
                    let (_, status) = early.swap_remove(k);
                    send(ToHead::Exited { rank, status });
                } else {
                    pids[local_of[&rank]] = pid;
                    left += 1;
                    if ending {
                        sys::kill(pid, libc::SIGKILL);
                    }
                }
            }
            Event::GroupStarted { pgid } => {
                pgids.push(pgid);
                if ending {
                    sys::kill(-pgid, libc::SIGKILL);
                }
            }
            Event::RankStartFailed { rank, why } => {
                failed.get_or_insert(rank);
                send(ToHead::StartFailed { rank, why });
            }
            Event::StartEnded { unstarted } => {
                start_ended = true;
                // The head accounts for every rank: the ones never started too.
                for rank in unstarted {
                    if failed == Some(rank) {
                        continue;
                    }
                    let why = match failed {
                        Some(f) => format!("not started: rank {f} could not be started"),
                        None => "not started: the job was ending".to_owned(),
                    };
                    send(ToHead::StartFailed { rank, why });
                }
            }
            Event::PmiInit { rank } => send(ToHead::Init { rank }),
            Event::PmiFinalize { rank } => send(ToHead::Finalize { rank }),
            Event::PmiAbort { rank, code } => send(ToHead::Abort { rank, code }),
            Event::PmiClosed { rank } => send(ToHead::Closed { rank }),
            Event::Spawn { reply, .. } => {
                // The rank's PMI thread answers rc=-1 with this (and notes it).
                let _ = reply.send(Err("spawn is not supported in multi-host jobs yet".into()));
            }
            Event::Exited { pid, status } => {
                if let Some(i) = pids.iter().position(|&p| p == pid) {
                    // Reaped: its pid may be reused, so never signal it again.
                    pids[i] = 0;
                    left -= 1;
                    send(ToHead::Exited {
                        rank: job.ranks[i],
                        status,
                    });
                } else if !start_ended {
                    early.push((pid, status));
                }
            }
            Event::ReaperError(e) => {
                note!("{me}: waiting for the ranks failed: {e}; killing them");
                stop_starting("the reaper failed");
                kill_all(&pgids, &pids, libc::SIGKILL);
                break;
            }
            Event::FromHead(ToProxy::Signal(sig)) => {
                // The head signals the ranks only to end the job.
                ending = true;
                stop_starting("the head ends the job");
                kill_all(&pgids, &pids, sig);
            }
            Event::FromHead(ToProxy::Exit) => {
                stop_starting("the head ended the job");
                exit_asked = true;
            }
            Event::FromHead(other) => note!("{me}: unexpected message from the head: {other:?}"),
            Event::HeadLost(why) if !exit_asked && lost.is_none() => {
                ending = true;
                stop_starting(&why);
                if left > 0 {
                    note!("{me}: {why}; killing its {left} rank(s)");
                }
                kill_all(&pgids, &pids, libc::SIGKILL);
                lost = Some(Instant::now());
            }
            Event::Signal(sig) if lost.is_none() => {
                ending = true;
                let why = format!("received {}", sys::signal_name(sig));
                stop_starting(&why);
                note!("{me}: {why}; killing its {left} rank(s)");
                kill_all(&pgids, &pids, libc::SIGKILL);
                lost = Some(Instant::now());
            }
            _ => {}
        }
    }
    let outputs = std::mem::take(&mut *outputs.lock().unwrap_or_else(|e| e.into_inner()));
    launch::finish_output(outputs);
    u8::from(lost.is_some() && !exit_asked)
}

fn kill_all(pgids: &[libc::pid_t], pids: &[libc::pid_t], sig: i32) {
    for &g in pgids {
        sys::kill(-g, sig);
    }
    for &p in pids.iter().filter(|&&p| p > 0) {
        sys::kill(p, sig);
    }
}
