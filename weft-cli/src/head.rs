//! Multi-host `weft run` (`--hosts`/`--hostfile`): the head.
//!
//! Hydra's shape. The head places the ranks on the hosts, listens on a TCP address the hosts
//! can reach, and starts one proxy per host that has ranks: `RSH HOST WEFT proxy --head
//! ADDR:PORT ...` (a host named `localhost` or this host's own name is started directly). It
//! writes a per-job proxy secret and the job secret to each remote-start command's stdin; the
//! head and a proxy prove to each other that they hold the first (without sending it,
//! [`wire`]) before either trusts anything on the connection, and the proxy serves the second
//! to its ranks (it never crosses the job's sockets in clear text). Each proxy then serves PMI-1 to its
//! ranks and reports their events; the head runs the same event loop as an all-local job
//! ([`launch::drive`]), so remote ranks fail, abort and exit exactly as local ones do, and
//! completes barriers by merging every host's puts.
//!
//! A host whose proxy connection closes, fails, or carries nothing (not even the heartbeat)
//! for the heartbeat timeout, or whose remote-start command exits while it still has ranks,
//! is lost: the job ends (exit code 1) with a message naming the host.

use crate::hosts::Host;
use crate::launch::{self, Control, Event, Hooks, Options, Rank};
use crate::sys;
use crate::wire::{self, JobSpec, ToHead, ToProxy};
use anyhow::Context;
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs, UdpSocket};
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// Exit code of a job whose host was lost.
pub const EXIT_HOST_LOST: i32 = 1;

/// Multi-host settings.
#[derive(Clone, Debug)]
pub struct HostOptions {
    /// The hosts (with slots), in the order the user gave them.
    pub hosts: Vec<Host>,
    /// The host index of every rank.
    pub host_of: Vec<usize>,
    /// The remote-start command and its own arguments (the host and command follow).
    pub rsh: Vec<String>,
    /// The address (or interface name) to listen on for proxies, as given.
    pub head_addr: Option<String>,
    /// A proxy that stays silent this long is lost.
    pub heartbeat: Duration,
    /// How long proxies have to connect.
    pub start_timeout: Duration,
}

/// Whether `name` is this host (started without the remote-start command).
fn is_local(name: &str) -> bool {
    name == "localhost" || name == "127.0.0.1" || name == weft::launcher::host::hostname()
}

/// The address to listen on: as given (an address or an interface name), else 127.0.0.1 when
/// every host is local, else the address this host would use to reach the first remote host,
/// else the first non-loopback IPv4 address that is up. Never the wildcard unless asked.
fn listen_addr(given: Option<&str>, hosts: &[&str]) -> anyhow::Result<IpAddr> {
    if let Some(text) = given {
        let text = text.trim();
        if let Ok(ip) = text.parse::<IpAddr>() {
            return Ok(ip);
        }
        let ifs = sys::ipv4_interfaces().context("listing network interfaces (getifaddrs)")?;
        return ifs
            .iter()
            .find(|(name, _, _)| name == text)
            .map(|(_, ip, _)| IpAddr::V4(*ip))
            .with_context(|| {
                format!(
                    "--head-addr/WEFT_HEAD_ADDR {text:?} is neither an IP address nor an \
                     interface that is up with an IPv4 address"
                )
            });
    }
    let remote: Vec<&&str> = hosts.iter().filter(|h| !is_local(h)).collect();
    let Some(first) = remote.first() else {
        return Ok(IpAddr::V4(Ipv4Addr::LOCALHOST));
    };
    // The source address of the route to the host (a UDP connect sends nothing).
    let routed = (|| {
        let to = (**first, 9)
            .to_socket_addrs()
            .ok()?
            .find(SocketAddr::is_ipv4)?;
        let s = UdpSocket::bind("0.0.0.0:0").ok()?;
        s.connect(to).ok()?;
        Some(s.local_addr().ok()?.ip()).filter(|ip| !ip.is_loopback() && !ip.is_unspecified())
    })();
    if let Some(ip) = routed {
        return Ok(ip);
    }
    let ifs = sys::ipv4_interfaces().context("listing network interfaces (getifaddrs)")?;
    ifs.iter()
        .find(|(_, _, loopback)| !loopback)
        .map(|(_, ip, _)| IpAddr::V4(*ip))
        .with_context(|| {
            format!(
                "no address to listen on for the proxies: host {first:?} does not resolve and \
                 no interface other than loopback is up; name one with --head-addr"
            )
        })
}

/// One host with ranks, as the head sees it.
struct Proxy {
    name: String,
    /// World ranks on it.
    ranks: Vec<u32>,
    /// The remote-start command (or the local proxy) process.
    pid: libc::pid_t,
    /// Its stdin, held open: the proxy takes end of file as the head going away.
    stdin: Option<ChildStdin>,
    exited: bool,
    lost: bool,
    /// In the current barrier.
    fenced: bool,
}

/// The start-up phase's failure: the code, and what to say.
struct StartFailure(i32, String);

/// Runs a multi-host job; returns the exit code for the launcher.
pub fn run(opts: &Options, h: &HostOptions) -> anyhow::Result<u8> {
    let n = opts.np;
    debug_assert_eq!(h.host_of.len(), n as usize, "one host per rank");
    let job_id = launch::new_job_id();
    let kvsname = format!("weft_{job_id}");
    let job_secret =
        weft::launcher::host::random_hex(32).context("making the job secret (getrandom)")?;
    let proxy_secret =
        weft::launcher::host::random_hex(32).context("making the proxy secret (getrandom)")?;
    let node_of: Vec<u32> = h.host_of.iter().map(|&i| i as u32).collect();
    let mapping = opts
        .process_mapping
        .clone()
        .unwrap_or_else(|| weft::launcher::mapping::encode(&node_of));
    if mapping.len() > 900 {
        note!(
            "weft run: warning: the process mapping is {} bytes, too long for PMI; ranks will \
             exchange host names instead",
            mapping.len()
        );
    }
    let mapping = if mapping.len() > 900 {
        String::new()
    } else {
        mapping
    };

    // Hosts that get ranks, in list order.
    let mut proxies: Vec<Proxy> = Vec::new();
    let mut index_of_host = vec![usize::MAX; h.hosts.len()];
    for (rank, &hi) in h.host_of.iter().enumerate() {
        if index_of_host[hi] == usize::MAX {
            index_of_host[hi] = proxies.len();
            proxies.push(Proxy {
                name: h.hosts[hi].name.clone(),
                ranks: Vec::new(),
                pid: 0,
                stdin: None,
                exited: false,
                lost: false,
                fenced: false,
            });
        }
        proxies[index_of_host[hi]].ranks.push(rank as u32);
    }
    let names: Vec<&str> = proxies.iter().map(|p| p.name.as_str()).collect();
    let ip = listen_addr(h.head_addr.as_deref(), &names)?;
    let listener = TcpListener::bind((ip, 0))
        .with_context(|| format!("listening for the proxies on {ip} (bind)"))?;
    let mut head = listener.local_addr()?;
    if ip.is_unspecified() {
        // Listening on every interface (asked for): tell the proxies an address they can use.
        head.set_ip(listen_addr(None, &names)?);
    }

    let (tx, rx) = mpsc::channel::<Event>();
    launch::start_signal_thread(&tx)?;
    let secret = wire::bytes_from_hex("the proxy secret", &proxy_secret)?;
    crate::head_accept::start(listener, secret, proxies.len(), tx.clone())?;

    let exe = std::env::var("WEFT_PROXY_EXE")
        .ok()
        .filter(|s| !s.is_empty())
        .map(Ok)
        .unwrap_or_else(|| std::env::current_exe().map(|p| p.to_string_lossy().into_owned()))
        .context("finding this program's path (for the proxies)")?;
    let launcher = std::process::id() as libc::pid_t;
    let mut outputs = Vec::new();
    let mut children: Vec<Option<Child>> = Vec::new();
    let mut failure: Option<StartFailure> = None;
    for (i, p) in proxies.iter_mut().enumerate() {
        let mut argv: Vec<String> = if is_local(&p.name) {
            Vec::new()
        } else {
            let mut v = h.rsh.clone();
            v.push(p.name.clone());
            v
        };
        argv.extend([
            exe.clone(),
            "proxy".into(),
            "--head".into(),
            head.to_string(),
            "--index".into(),
            i.to_string(),
            "--name".into(),
            p.name.clone(),
            "--wait".into(),
            (h.start_timeout.as_secs() + 10).to_string(),
        ]);
        let mut cmd = Command::new(&argv[0]);
        cmd.args(&argv[1..])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // Its own group: a Ctrl-C at the terminal reaches the head, which ends the job.
            .process_group(0);
        // SAFETY: the hook runs in the forked child before exec and only makes
        // async-signal-safe calls (prctl, getppid, sigprocmask).
        unsafe {
            cmd.pre_exec(move || sys::rsh_child_setup(launcher));
        }
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                failure = Some(StartFailure(
                    launch::EXIT_CANNOT_START,
                    format!(
                        "cannot start the proxy for host {}: {:?}: {e} (remote-start command: \
                         --rsh or WEFT_RSH)",
                        p.name, argv[0]
                    ),
                ));
                break;
            }
        };
        p.pid = child.id() as libc::pid_t;
        let mut stdin = child.stdin.take().expect("stdin is piped");
        // A proxy that died at once shows up below as an early exit.
        // Both secrets go through the remote-start channel only (ssh encrypts it): the job
        // secret, which TCP peers prove, is never sent over the job's own sockets.
        let _ = stdin.write_all(format!("{proxy_secret} {job_secret}\n").as_bytes());
        let _ = stdin.flush();
        p.stdin = Some(stdin);
        if let Some(o) = child.stdout.take() {
            outputs.push(thread::spawn(move || launch::forward("", o, false, false)));
        }
        if let Some(e) = child.stderr.take() {
            outputs.push(thread::spawn(move || launch::forward("", e, true, false)));
        }
        children.push(Some(child));
    }

    // Wait for every proxy to connect.
    let mut conns: Vec<Option<TcpStream>> = (0..proxies.len()).map(|_| None).collect();
    let deadline = Instant::now() + h.start_timeout;
    while failure.is_none() && conns.iter().any(Option::is_none) {
        match rx.recv_timeout(Duration::from_millis(50)) {
            Ok(Event::ProxyConnected { host, stream }) => {
                if conns[host].is_none() {
                    conns[host] = Some(stream);
                }
            }
            Ok(Event::Signal(sig)) => {
                failure = Some(StartFailure(
                    128 + sig,
                    format!(
                        "received {} while starting the proxies",
                        sys::signal_name(sig)
                    ),
                ));
            }
            Ok(_) | Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => {
                failure = Some(StartFailure(1, "internal: event channel closed".into()));
            }
        }
        for (i, c) in children.iter_mut().enumerate() {
            let Some(child) = c else { continue };
            if conns[i].is_some() {
                continue;
            }
            if let Ok(Some(st)) = child.try_wait() {
                proxies[i].exited = true;
                *c = None;
                let how = match (
                    st.code(),
                    std::os::unix::process::ExitStatusExt::signal(&st),
                ) {
                    (Some(code), _) => format!("exited with code {code}"),
                    (_, Some(s)) => format!("was killed by {}", sys::signal_name(s)),
                    _ => "ended".into(),
                };
                failure.get_or_insert(StartFailure(
                    launch::EXIT_CANNOT_START,
                    format!(
                        "cannot start the proxy on host {}: the remote-start command {:?} {how} \
                         before the proxy connected (its messages are above)",
                        proxies[i].name,
                        rsh_text(&h.rsh, &proxies[i].name)
                    ),
                ));
            }
        }
        if failure.is_none() && Instant::now() >= deadline {
            let missing: Vec<&str> = (0..proxies.len())
                .filter(|&i| conns[i].is_none())
                .map(|i| proxies[i].name.as_str())
                .collect();
            failure = Some(StartFailure(
                launch::EXIT_CANNOT_START,
                format!(
                    "the proxies on {} did not connect to {head} within {:.0} s (can they \
                     reach that address? name another with --head-addr or WEFT_HEAD_ADDR)",
                    missing.join(", "),
                    h.start_timeout.as_secs_f64()
                ),
            ));
        }
    }
    if let Some(StartFailure(code, why)) = failure {
        note!("weft run: {why}");
        stop_children(&mut proxies, children);
        launch::finish_output(outputs);
        return Ok(launch::exit_byte(code));
    }
    // From here on the reaper thread waits for the children.
    drop(children);

    let env = rank_env(std::env::vars(), &opts.env);
    let cwd = std::env::current_dir()
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default();
    let senders: Arc<Mutex<Vec<Option<wire::Sender>>>> = Arc::new(Mutex::new(Vec::new()));
    for (i, conn) in conns.into_iter().enumerate() {
        let stream = conn.expect("every proxy connected");
        let _ = stream.set_nodelay(true);
        let sender = wire::Sender::new(stream.try_clone()?, h.heartbeat)?;
        let receiver = wire::Receiver::new(stream, h.heartbeat)?;
        let spec = JobSpec {
            job_id: job_id.clone(),
            kvsname: kvsname.clone(),
            size: n,
            ranks: proxies[i].ranks.clone(),
            program: opts.program.clone(),
            args: opts.args.clone(),
            env: env.clone(),
            mapping: mapping.clone(),
            // Not the job secret: each proxy has it from its stdin and serves it itself.
            kvs: Vec::new(),
            tag_output: opts.tag_output,
            pmi_debug: opts.pmi_debug,
            cwd: cwd.clone(),
            bind_core: opts.bind == launch::BindTo::Core,
            heartbeat: h.heartbeat,
        };
        // A failed send shows up as a lost host through the reader.
        let _ = sender.send(&ToProxy::Job(Box::new(spec)).to_value());
        start_reader(
            i,
            proxies[i].ranks.clone(),
            receiver,
            h.heartbeat,
            tx.clone(),
        )?;
        start_pinger(sender.clone(), h.heartbeat);
        senders
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Some(sender));
    }
    launch::start_reaper_thread(&tx)?;
    drop(tx);

    let ranks = (0..n as usize)
        .map(|r| Rank::new(0, Some(h.hosts[h.host_of[r]].name.clone())))
        .collect();
    let mut ctl = Control::new(ranks, 0);
    {
        let senders = senders.clone();
        ctl.signal_remote = Some(Box::new(move |sig| {
            for s in senders
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
                .flatten()
            {
                let _ = s.send(&ToProxy::Signal(sig).to_value());
            }
        }));
    }
    let mut hooks = HeadHooks {
        proxies,
        senders: senders.clone(),
        puts: Vec::new(),
        rank_host: h.host_of.iter().map(|&hi| index_of_host[hi]).collect(),
    };
    launch::drive(&mut ctl, &rx, opts.timeout, &mut hooks);

    // The job is over: let the proxies go and wait (bounded) for them.
    for s in senders
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .flatten()
    {
        let _ = s.send(&ToProxy::Exit.to_value());
    }
    let mut proxies = hooks.proxies;
    let until = Instant::now() + Duration::from_secs(5);
    while proxies.iter().any(|p| !p.exited) {
        match rx.recv_timeout(until.saturating_duration_since(Instant::now())) {
            Ok(Event::Exited { pid, .. }) => {
                for p in proxies.iter_mut().filter(|p| p.pid == pid) {
                    p.exited = true;
                }
            }
            Ok(_) => {}
            Err(_) => break,
        }
    }
    for p in proxies.iter_mut().filter(|p| !p.exited) {
        note!(
            "weft run: the proxy for host {} (pid {}) did not exit; killing it",
            p.name,
            p.pid
        );
        sys::kill(p.pid, libc::SIGKILL);
    }
    for p in &mut proxies {
        p.stdin = None;
    }
    for s in senders
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .flatten()
    {
        s.shutdown();
    }
    let removed = launch::remove_segments(&job_id);
    if removed > 0 {
        note!("weft run: removed {removed} shared-memory segment(s) /dev/shm/weft-{job_id}-* left by the job");
    }
    launch::finish_output(outputs);
    Ok(ctl.outcome.map_or(0, launch::exit_byte))
}

/// What remote ranks get on top of their proxy's environment: the head's `WEFT_*` tunables
/// (so a setting applies to the whole job, as for local ranks), then every `-x`. Not the
/// launcher's own settings, nor the job id, nor a `WEFT_TCP_ADDR` that is one address of the
/// head's host (a subnet such as 10.1.0.0/16, or 0.0.0.0, holds for every host and is passed).
fn rank_env(
    head_env: impl Iterator<Item = (String, String)>,
    exported: &[(String, String)],
) -> Vec<(String, String)> {
    const NOT_PASSED: &[&str] = &[
        "WEFT_JOB_ID",
        "WEFT_RSH",
        "WEFT_HEAD_ADDR",
        "WEFT_HOST_TIMEOUT",
        "WEFT_HOST_START_TIMEOUT",
        "WEFT_PROXY_EXE",
    ];
    let mut env: Vec<(String, String)> = head_env
        .filter(|(k, _)| k.starts_with("WEFT_") && !NOT_PASSED.contains(&k.as_str()))
        .filter(|(k, v)| {
            k != "WEFT_TCP_ADDR"
                || v.contains('/')
                || v.trim()
                    .parse::<IpAddr>()
                    .is_ok_and(|ip| ip.is_unspecified())
        })
        .collect();
    env.sort();
    env.extend(exported.iter().cloned());
    env
}

fn rsh_text(rsh: &[String], host: &str) -> String {
    if is_local(host) {
        "(local proxy)".into()
    } else {
        format!("{} {host} ...", rsh.join(" "))
    }
}

/// Ends the remote-start commands after a failed start-up: SIGTERM, then SIGKILL.
fn stop_children(proxies: &mut [Proxy], mut children: Vec<Option<Child>>) {
    for p in proxies.iter_mut() {
        p.stdin = None;
    }
    for c in children.iter_mut().flatten() {
        sys::kill(c.id() as libc::pid_t, libc::SIGTERM);
    }
    let until = Instant::now() + Duration::from_secs(1);
    for c in children.iter_mut() {
        let Some(child) = c else { continue };
        while Instant::now() < until {
            if let Ok(Some(_)) = child.try_wait() {
                *c = None;
                break;
            }
            thread::sleep(Duration::from_millis(10));
        }
    }
    for child in children.iter_mut().flatten() {
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// Turns a proxy's messages into events; reports the host lost when the connection ends.
fn start_reader(
    host: usize,
    ranks: Vec<u32>,
    mut r: wire::Receiver,
    heartbeat: Duration,
    tx: mpsc::Sender<Event>,
) -> anyhow::Result<()> {
    thread::Builder::new()
        .name(format!("proxy-{host}"))
        .spawn(move || {
            let why = loop {
                let ev = match r.recv() {
                    Ok(None) => break "its proxy closed the connection".to_owned(),
                    Err(e)
                        if matches!(
                            e.kind(),
                            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                        ) =>
                    {
                        break format!(
                            "heard nothing from its proxy for {:.1} s (host down or unreachable? \
                         the timeout is WEFT_HOST_TIMEOUT)",
                            heartbeat.as_secs_f64()
                        )
                    }
                    Err(e) => break format!("the connection to its proxy failed: {e}"),
                    Ok(Some(v)) => match ToHead::from_value(&v) {
                        Ok(m) if m.rank().is_some_and(|r| !ranks.contains(&r)) => {
                            break format!("its proxy sent {m:?}, about a rank it does not serve")
                        }
                        Ok(ToHead::Ping | ToHead::Hello { .. } | ToHead::Proof { .. }) => continue,
                        Ok(ToHead::Started { rank, pid }) => Event::RankStarted { rank, pid },
                        Ok(ToHead::StartFailed { rank, why }) => {
                            Event::RankStartFailed { rank, why }
                        }
                        Ok(ToHead::Init { rank }) => Event::PmiInit { rank },
                        Ok(ToHead::Finalize { rank }) => Event::PmiFinalize { rank },
                        Ok(ToHead::Abort { rank, code }) => Event::PmiAbort { rank, code },
                        Ok(ToHead::Closed { rank }) => Event::PmiClosed { rank },
                        Ok(ToHead::Exited { rank, status }) => Event::RankExited { rank, status },
                        Ok(ToHead::Fence(puts)) => Event::Fence { host, puts },
                        Err(e) => break format!("its proxy sent something unreadable: {e}"),
                    },
                };
                if tx.send(ev).is_err() {
                    return;
                }
            };
            let _ = tx.send(Event::HostLost { host, why });
        })?;
    Ok(())
}

fn start_pinger(s: wire::Sender, heartbeat: Duration) {
    let every = heartbeat / 3;
    let _ = thread::Builder::new()
        .name("ping".into())
        .spawn(move || loop {
            thread::sleep(every);
            if s.send(&ToProxy::Ping.to_value()).is_err() {
                break;
            }
        });
}

struct HeadHooks {
    proxies: Vec<Proxy>,
    senders: Arc<Mutex<Vec<Option<wire::Sender>>>>,
    /// Puts of the current barrier, from every host that entered it.
    puts: Vec<(String, String)>,
    /// The proxy index of every rank.
    rank_host: Vec<usize>,
}

impl HeadHooks {
    fn send(&self, i: usize, m: &ToProxy) {
        if let Some(s) = &self.senders.lock().unwrap_or_else(|e| e.into_inner())[i] {
            let _ = s.send(&m.to_value());
        }
    }

    /// Proxy `i` is gone: fail the job if it still had ranks, and give up on them.
    fn lose(&mut self, ctl: &mut Control, i: usize, why: String) {
        let p = &mut self.proxies[i];
        if p.lost {
            return;
        }
        p.lost = true;
        if let Some(s) = self.senders.lock().unwrap_or_else(|e| e.into_inner())[i].take() {
            s.shutdown();
        }
        let live: Vec<u32> = p
            .ranks
            .iter()
            .copied()
            .filter(|&r| !ctl.is_done(r as usize))
            .collect();
        if live.is_empty() {
            return;
        }
        let list: Vec<String> = live.iter().map(u32::to_string).collect();
        ctl.fail(
            EXIT_HOST_LOST,
            format!("lost host {} (ranks {}): {why}", p.name, list.join(", ")),
        );
        for r in live {
            ctl.abandon(r as usize);
        }
        if !p.exited {
            // A proxy that gets SIGTERM kills its ranks and removes the job's segments on its
            // host (through ssh: when sshd hangs up, or when the proxy hears nothing from the
            // head); the head sends SIGKILL after a grace period when the job ends.
            sys::kill(p.pid, libc::SIGTERM);
        }
        p.stdin = None;
        self.complete_fence();
    }

    /// Releases a barrier once every host still in the job has entered it.
    fn complete_fence(&mut self) {
        let waiting = self.proxies.iter().filter(|p| !p.lost && !p.fenced).count();
        let entered = self.proxies.iter().filter(|p| p.fenced).count();
        if waiting > 0 || entered == 0 {
            return;
        }
        let puts = std::mem::take(&mut self.puts);
        for i in 0..self.proxies.len() {
            if self.proxies[i].fenced {
                self.proxies[i].fenced = false;
                self.send(i, &ToProxy::FenceDone(puts.clone()));
            }
        }
    }
}

impl Hooks for HeadHooks {
    fn unreported(&mut self, ctl: &mut Control, ranks: &[usize]) {
        for i in 0..self.proxies.len() {
            let silent: Vec<String> = ranks
                .iter()
                .filter(|&&r| self.rank_host[r] == i)
                .map(|r| r.to_string())
                .collect();
            if silent.is_empty() {
                continue;
            }
            let p = &mut self.proxies[i];
            note!(
                "weft run: no word from host {} about ranks {} since SIGKILL was sent (cut \
                 off?); giving up on them and stopping its proxy",
                p.name,
                silent.join(", ")
            );
            if !p.exited {
                // It kills its ranks and removes the job's segments there.
                sys::kill(p.pid, libc::SIGTERM);
            }
            p.stdin = None;
        }
        for &r in ranks {
            ctl.abandon(r);
        }
    }

    fn event(&mut self, ctl: &mut Control, ev: Event) {
        match ev {
            Event::RankStarted { rank, pid } => {
                if let Some(r) = ctl.ranks.get_mut(rank as usize) {
                    r.pid = pid;
                }
            }
            Event::RankStartFailed { rank, why } => {
                let host = &self.proxies[self.rank_host[rank as usize]].name;
                ctl.fail(
                    launch::EXIT_CANNOT_START,
                    format!("cannot start rank {rank} on host {host}: {why}"),
                );
                ctl.abandon(rank as usize);
            }
            Event::Fence { host, puts } => {
                self.puts.extend(puts);
                self.proxies[host].fenced = true;
                self.complete_fence();
            }
            Event::HostLost { host, why } => self.lose(ctl, host, why),
            Event::Exited { pid, status } => {
                let Some(i) = self.proxies.iter().position(|p| p.pid == pid) else {
                    return;
                };
                self.proxies[i].exited = true;
                let how = match status {
                    sys::Status::Exited(c) => format!("exited with code {c}"),
                    sys::Status::Signaled(s) => format!("was killed by {}", sys::signal_name(s)),
                };
                self.lose(
                    ctl,
                    i,
                    format!("its proxy (remote-start command pid {pid}) {how}"),
                );
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remote_ranks_get_weft_tunables_and_exports() {
        let head = [
            ("WEFT_EAGER_LIMIT", "4k"),
            ("WEFT_TCP_ADDR", "10.0.0.1"),
            ("WEFT_RSH", "ssh"),
            ("HOME", "/root"),
            ("WEFT_JOB_ID", "1_2"),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned()));
        let x = [("WEFT_EAGER_LIMIT".to_owned(), "8k".to_owned())];
        let subnet = [("WEFT_TCP_ADDR".to_owned(), "10.1.0.0/16".to_owned())];
        assert_eq!(rank_env(subnet.clone().into_iter(), &[]), subnet);
        assert_eq!(
            rank_env(head.into_iter(), &x),
            [("WEFT_EAGER_LIMIT", "4k"), ("WEFT_EAGER_LIMIT", "8k")]
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
        );
    }
}
