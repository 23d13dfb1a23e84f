//! `weft`: the launcher (`weft run`) and information tool (`weft info`).
//!
//! Exit codes of `weft run`: 0 when every rank exits 0 (and every rank that called PMI init
//! also called PMI finalize; the processes of jobs spawned through PMI count as ranks);
//! otherwise the first failure decides: a rank's exit code, 128 +
//! the signal number for a rank killed by a signal, the code a rank passed to PMI abort (0
//! becomes 1), 1 for a rank that exited 0 after PMI init without PMI finalize, 124 when the
//! time limit passed, 128 + the signal number when the launcher itself was interrupted, 127
//! when the program could not be started (or, with `--hosts`, a host's proxy could not be
//! started or a remote rank could not be started), 1 when a host was lost mid-job (its proxy's
//! connection closed, failed or went silent), 2 for a command-line error, 1 for any other
//! error of the launcher (such as a failed cargo build).

#![deny(clippy::undocumented_unsafe_blocks)]

/// Writes a line to stderr, ignoring a closed stderr (eprintln! would panic).
macro_rules! note {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

mod cargo_target;
mod event;
mod head;
mod head_accept;
mod hosts;
mod info;
mod info_model;
mod install;
mod launch;
mod mpiexec;
mod pmi_server;
mod pmi_spawn;
mod proxy;
mod spawn;
mod sys;
mod wire;

use anyhow::{bail, Context};
use clap::{Args, Parser, Subcommand};
use std::process::ExitCode;
use std::time::Duration;

#[derive(Parser, Debug)]
#[command(
    name = "weft",
    version,
    about = "Run and inspect weft message-passing programs"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Start N ranks of a program on this host (or on --hosts) and serve them PMI-1.
    Run(Box<RunArgs>),
    /// Print the version, the transports available here, every tunable and the collectives'
    /// cost model (with --coll: what it picks for a communicator shape and size).
    Info(info_model::Query),
    /// Lay out bin/ (weft, mpiexec, mpirun, mpicc, mpicxx), lib/ (libmpi_abi.so.1) and
    /// include/ (mpi.h) under a prefix, for C programs.
    Install(install::InstallArgs),
    /// The per-host helper of a multi-host `weft run` (started by it, not by hand).
    #[command(hide = true)]
    Proxy(proxy::ProxyArgs),
}

#[derive(Args, Debug)]
struct RunArgs {
    /// Number of ranks to start.
    #[arg(short = 'n', long = "np", value_name = "N")]
    np: u32,
    /// Prefix every line of output with `[rank] ` (`[job.rank] ` for a process of the
    /// job-th job spawned through PMI).
    #[arg(short = 'l', long = "tag-output")]
    tag_output: bool,
    /// Pass NAME=VALUE to the ranks (NAME alone: the launcher's value). Repeatable.
    #[arg(short = 'x', value_name = "NAME[=VALUE]")]
    export: Vec<String>,
    /// End the job after SECS seconds (exit code 124). Default: $MPIEXEC_TIMEOUT, else none.
    #[arg(long, value_name = "SECS")]
    timeout: Option<f64>,
    /// Build this cargo example and run it (arguments after it go to the program).
    #[arg(long, value_name = "NAME", conflicts_with = "bin")]
    example: Option<String>,
    /// Build this cargo binary and run it.
    #[arg(long, value_name = "NAME")]
    bin: Option<String>,
    /// Build the example or binary with the release profile.
    #[arg(long)]
    release: bool,
    /// The package of the example or binary.
    #[arg(short = 'p', long, value_name = "PACKAGE")]
    package: Option<String>,
    /// Log every PMI line the launcher receives and sends to stderr.
    #[arg(long)]
    pmi_debug: bool,
    /// Run on these hosts: `HOST[:SLOTS],...` (a host without a count has one slot).
    /// Without --hosts or --hostfile every rank runs on this host.
    // (A value starting with '-' is taken, so that the host check names what is wrong.)
    #[arg(
        long = "hosts",
        alias = "host",
        value_name = "HOST[:SLOTS],...",
        allow_hyphen_values = true
    )]
    hosts: Option<String>,
    /// Run on the hosts listed in FILE: one `HOST [slots=N]` (or `HOST:N`) per line, `#`
    /// comments.
    #[arg(
        long,
        alias = "machinefile",
        value_name = "FILE",
        conflicts_with = "hosts"
    )]
    hostfile: Option<String>,
    /// How ranks are placed: block (fill each host's slots in turn) or round-robin (one rank
    /// per host in turn).
    #[arg(long, value_enum, default_value = "block", value_name = "POLICY")]
    map_by: hosts::MapBy,
    /// Allow more ranks than the hosts have slots (else that is an error).
    #[arg(long)]
    oversubscribe: bool,
    /// Bind ranks: none (default), or core (each host's k-th rank on the k-th CPU the
    /// launcher may use there, wrapping around when there are more ranks than CPUs).
    /// Default: $WEFT_BIND_TO, else none.
    #[arg(long, value_enum, value_name = "POLICY")]
    bind_to: Option<launch::BindTo>,
    /// The remote-start command: `CMD HOST weft proxy ...` starts a host's proxy.
    /// Default: $WEFT_RSH, else ssh. Split at spaces (`--rsh "ssh -p 2222"`).
    #[arg(long, value_name = "CMD")]
    rsh: Option<String>,
    /// The address (or interface name) the head listens on for the hosts' proxies.
    /// Default: $WEFT_HEAD_ADDR, else the address of the route to the first host, else the
    /// first non-loopback IPv4 address.
    #[arg(long, value_name = "ADDR")]
    head_addr: Option<String>,
    /// Serve this PMI_process_mapping ("" for none) instead of all ranks on one node.
    /// For testing how ranks find their nodes.
    #[arg(long, hide = true, value_name = "MAPPING")]
    process_mapping: Option<String>,
    /// The program and its arguments (with --example/--bin: the arguments only; put `--`
    /// before arguments that start with `-`). Everything after the program is its own,
    /// flags included; an unknown flag before it is an error, not a program name.
    #[arg(trailing_var_arg = true, value_name = "PROGRAM [ARGS]")]
    command: Vec<String>,
}

fn parse_secs(what: &str, text: &str) -> anyhow::Result<Duration> {
    let secs: f64 = text
        .trim()
        .parse()
        .ok()
        .filter(|s: &f64| s.is_finite() && *s > 0.0)
        .with_context(|| format!("{what}={text:?} is not a positive number of seconds"))?;
    Ok(Duration::from_secs_f64(secs))
}

fn run_cmd(a: RunArgs) -> anyhow::Result<u8> {
    if a.np == 0 {
        bail!("-n 0: a job needs at least one rank");
    }
    let host_list = match (&a.hosts, &a.hostfile) {
        (Some(list), _) => Some(hosts::parse_list(list)?),
        (None, Some(file)) => Some(hosts::parse_file(file)?),
        (None, None) => None,
    };
    // Before anything is built or allocated for the ranks: a count this host (or these
    // hosts) could never run is refused with the limits that forbid it.
    match &host_list {
        None => launch::check_rank_count(a.np)?,
        Some(h) => launch::check_rank_count_on_hosts(a.np, h.len())?,
    }
    let mut env = Vec::new();
    for x in &a.export {
        match x.split_once('=') {
            Some((k, v)) if !k.is_empty() => env.push((k.to_owned(), v.to_owned())),
            Some(_) => bail!("-x {x:?}: the variable name is empty"),
            None => {
                let v = std::env::var(x).with_context(|| {
                    format!("-x {x}: {x} is not set in the launcher's environment")
                })?;
                env.push((x.clone(), v));
            }
        }
    }
    check_tunables(&env)?;
    let timeout = match (a.timeout, std::env::var("MPIEXEC_TIMEOUT")) {
        (Some(t), _) => Some(parse_secs("--timeout", &t.to_string())?),
        (None, Ok(t)) if !t.trim().is_empty() => Some(parse_secs("MPIEXEC_TIMEOUT", &t)?),
        _ => None,
    };
    let target = match (&a.example, &a.bin) {
        (Some(n), _) => Some((cargo_target::Kind::Example, n)),
        (None, Some(n)) => Some((cargo_target::Kind::Bin, n)),
        (None, None) => None,
    };
    let (program, args) = match target {
        Some((kind, name)) => {
            let exe = cargo_target::build(kind, name, a.package.as_deref(), a.release)?;
            (exe.to_string_lossy().into_owned(), a.command.clone())
        }
        None => {
            if a.release || a.package.is_some() {
                bail!("--release and -p only apply with --example or --bin");
            }
            let Some((p, rest)) = a.command.split_first() else {
                bail!("no program given: weft run -n N PROGRAM [ARGS], or --example/--bin NAME");
            };
            (p.clone(), rest.to_vec())
        }
    };
    let bind = match (a.bind_to, env_setting("WEFT_BIND_TO")) {
        (Some(b), _) => b,
        (None, Some(text)) => <launch::BindTo as clap::ValueEnum>::from_str(text.trim(), true)
            .map_err(|_| {
                anyhow::anyhow!("WEFT_BIND_TO={text:?} is not a binding (none or core)")
            })?,
        (None, None) => launch::BindTo::None,
    };
    let opts = launch::Options {
        np: a.np,
        program,
        args,
        tag_output: a.tag_output,
        env,
        timeout,
        pmi_debug: a.pmi_debug,
        process_mapping: a.process_mapping.clone(),
        bind,
    };
    let Some(host_list) = host_list else {
        if a.rsh.is_some() || a.head_addr.is_some() || a.oversubscribe {
            bail!("--rsh, --head-addr and --oversubscribe only apply with --hosts or --hostfile");
        }
        return launch::run(&opts);
    };
    let host_of = hosts::place(&host_list, a.np, a.map_by, a.oversubscribe)?;
    let rsh_text = match &a.rsh {
        Some(r) => r.clone(),
        None => env_setting("WEFT_RSH").unwrap_or_else(|| "ssh".into()),
    };
    let rsh: Vec<String> = rsh_text.split_whitespace().map(str::to_owned).collect();
    if rsh.is_empty() {
        bail!("--rsh/WEFT_RSH {rsh_text:?} names no command");
    }
    let secs = |name: &str, default: f64| -> anyhow::Result<Duration> {
        match env_setting(name) {
            Some(t) => parse_secs(name, &t),
            None => Ok(Duration::from_secs_f64(default)),
        }
    };
    head::run(
        &opts,
        &head::HostOptions {
            hosts: host_list,
            host_of,
            rsh,
            head_addr: a
                .head_addr
                .clone()
                .or_else(|| env_setting("WEFT_HEAD_ADDR")),
            heartbeat: secs("WEFT_HOST_TIMEOUT", 10.0)?,
            start_timeout: secs("WEFT_HOST_START_TIMEOUT", 60.0)?,
        },
    )
}

/// Refuses a `WEFT_*` tunable that the ranks would refuse (each of them, at initialize):
/// the ranks see the launcher's environment with the `-x` settings on top.
fn check_tunables(exports: &[(String, String)]) -> anyhow::Result<()> {
    let lookup = |name: &str| match exports.iter().rev().find(|(k, _)| k == name) {
        Some((_, v)) => Some(v.clone()),
        None => std::env::var(name).ok(),
    };
    weft::tunables::Tunables::from_lookup(lookup)
        .map(drop)
        .map_err(|e| {
            let e = e.to_string();
            let e = e.strip_prefix("weft: ").unwrap_or(&e);
            anyhow::anyhow!("{e} (set by -x or in the launcher's environment)")
        })
}

/// A launcher setting from the environment; unset or blank is None.
fn env_setting(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

fn run() -> anyhow::Result<ExitCode> {
    let cli = Cli::parse_from(mpiexec::arguments(std::env::args_os().collect()));
    let code = match cli.cmd {
        Cmd::Run(a) => run_cmd(*a).context("weft run")?,
        Cmd::Info(q) => info::run(&q),
        Cmd::Install(a) => install::run(&a).context("weft install")?,
        Cmd::Proxy(a) => proxy::run(&a).context("weft proxy")?,
    };
    Ok(ExitCode::from(code))
}

fn main() -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(e) => {
            note!("weft: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
