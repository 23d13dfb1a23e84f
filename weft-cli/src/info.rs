//! `weft info`: version, transports usable here, every tunable with its default, the value
//! in force and its environment variable, and the collectives' cost model (`info_model`).

use std::fmt::Write as _;
use std::net::{IpAddr, TcpListener};
use weft::launcher::host;
use weft::tunables::{Transports, Tunables, ALL};

use crate::info_model::{self, Query};

/// `WEFT_*` variables that are not tunables but are still ours.
const OTHER_VARS: &[&str] = &["WEFT_JOB_ID", "WEFT_PMI_DEBUG"];

/// Settings of `weft run` (read by the launcher, not by the ranks).
const LAUNCHER_VARS: &[(&str, &str, &str)] = &[
    (
        "WEFT_BIND_TO",
        "none",
        "rank binding: none, or core (the k-th rank of a host on its k-th CPU; as --bind-to)",
    ),
    (
        "WEFT_RSH",
        "ssh",
        "remote-start command for --hosts (as --rsh)",
    ),
    (
        "WEFT_HEAD_ADDR",
        "route to the first host",
        "address or interface the head listens on for proxies (as --head-addr)",
    ),
    (
        "WEFT_HOST_TIMEOUT",
        "10",
        "seconds of silence after which a host (or the head, for a proxy) is lost",
    ),
    (
        "WEFT_HOST_START_TIMEOUT",
        "60",
        "seconds the proxies have to connect to the head",
    ),
    (
        "WEFT_PROXY_EXE",
        "this weft's path",
        "path of weft on the remote hosts",
    ),
];

fn single_copy() -> String {
    let scope = std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope")
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok());
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    match (host::single_copy_works(), scope) {
        (Err(e), _) => format!("single-copy (process_vm_readv) not permitted here: {e}"),
        (Ok(()), None | Some(0)) => "single-copy (process_vm_readv) permitted".into(),
        (Ok(()), Some(1)) if root => {
            "single-copy (process_vm_readv) permitted (root; Yama ptrace_scope=1)".into()
        }
        (Ok(()), Some(1)) => "single-copy (process_vm_readv) limited: Yama ptrace_scope=1 \
            allows it only toward processes that opted in (PR_SET_PTRACER)"
            .into(),
        (Ok(()), Some(s)) => format!(
            "single-copy (process_vm_readv) not permitted: Yama ptrace_scope={s}; the \
             pipelined copy is used"
        ),
    }
}

fn shm() -> String {
    let probe = format!("/dev/shm/weft-info-{}", std::process::id());
    match std::fs::File::create(&probe) {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            format!("available (/dev/shm writable); {}", single_copy())
        }
        Err(e) => format!("NOT available: cannot create files in /dev/shm: {e}"),
    }
}

/// Whether a rank could listen for TCP peers, in a one-node job and in one spanning hosts,
/// on the address `WEFT_TCP_ADDR`/`WEFT_TCP_IF` choose (the transport's own choice).
fn tcp(t: &Tunables) -> String {
    let listen = |one_node: bool| -> Result<IpAddr, String> {
        let c = host::tcp_listen_addr(&t.tcp_addr, &t.tcp_if, one_node)?;
        TcpListener::bind((c.bind, 0)).map_err(|e| format!("cannot listen on {}: {e}", c.bind))?;
        Ok(c.publish)
    };
    match (listen(true), listen(false)) {
        (Ok(here), Ok(hosts)) => format!(
            "available (listens on {here} in one-node jobs, on {hosts} in jobs spanning hosts)"
        ),
        (Ok(here), Err(e)) => {
            format!("available on this host only (listens on {here}); between hosts: {e}")
        }
        (Err(e), _) => format!("NOT available: {e}"),
    }
}

/// Builds the report (with the cost model's answer to `query`), and the errors: invalid
/// `WEFT_*` values, or a bad query.
pub fn report(lookup: &dyn Fn(&str) -> Option<String>, query: &Query) -> (String, Vec<String>) {
    let mut out = String::new();
    let mut errors = Vec::new();
    let _ = writeln!(out, "weft {}", env!("CARGO_PKG_VERSION"));
    let _ = writeln!(out);
    // Transport settings as the ranks would read them (the defaults where a value is bad:
    // the tunables table below reports it).
    let t = Tunables::from_lookup(lookup).unwrap_or_else(|_| Tunables::defaults());
    let _ = writeln!(out, "Transports:");
    for name in Transports::ALL {
        let mut status = match name {
            "self" => "available".to_string(),
            "shm" => shm(),
            "tcp" => tcp(&t),
            _ => "built in".to_string(),
        };
        if !t.transports.allows(name) {
            let _ = write!(status, "; not used: WEFT_TRANSPORTS={}", t.transports);
        }
        let _ = writeln!(out, "  {name:4}  {status}");
    }
    let _ = writeln!(out);

    let defaults = Tunables::defaults().current();
    let mut rows = vec![[
        "VARIABLE".to_string(),
        "DEFAULT".into(),
        "CURRENT".into(),
        "DESCRIPTION".into(),
    ]];
    for t in ALL {
        // Parse each variable on its own, so one bad value does not hide the others.
        let one = Tunables::from_lookup(|k| if k == t.env { lookup(k) } else { None });
        let current = match one {
            Ok(v) => {
                let cur = v
                    .current()
                    .into_iter()
                    .find(|(e, _)| *e == t.env)
                    .map(|(_, c)| c)
                    .unwrap_or_default();
                let def = defaults.iter().find(|(e, _)| *e == t.env).map(|(_, d)| d);
                if lookup(t.env).is_some() && Some(&cur) != def {
                    format!("{cur} (set)")
                } else {
                    cur
                }
            }
            Err(e) => {
                errors.push(e.to_string());
                "INVALID".into()
            }
        };
        rows.push([t.env.into(), t.default.into(), current, t.help.into()]);
    }
    let width = |c: usize| rows.iter().map(|r| r[c].len()).max().unwrap_or(0);
    let (w0, w1, w2) = (width(0), width(1), width(2));
    let _ = writeln!(out, "Tunables (set the environment variable to override):");
    for r in &rows {
        let _ = writeln!(out, "  {:w0$}  {:w1$}  {:w2$}  {}", r[0], r[1], r[2], r[3]);
    }
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "Launcher settings (weft run; all but WEFT_BIND_TO only with --hosts/--hostfile):"
    );
    let w0 = LAUNCHER_VARS.iter().map(|v| v.0.len()).max().unwrap_or(0);
    let w1 = LAUNCHER_VARS.iter().map(|v| v.1.len()).max().unwrap_or(0);
    for (name, default, help) in LAUNCHER_VARS {
        let cur = lookup(name)
            .map(|v| format!(" (set: {v})"))
            .unwrap_or_default();
        let _ = writeln!(out, "  {name:w0$}  {default:w1$}  {help}{cur}");
    }
    let mut model = String::new();
    info_model::constants(&mut model, &t);
    if let Err(e) = info_model::answer(&mut model, &t, query) {
        errors.push(e);
    }
    // A question to the model gets its section alone.
    if query.coll.is_some() {
        return (model, errors);
    }
    let _ = writeln!(out);
    out.push_str(&model);
    (out, errors)
}

/// Prints the report; returns the exit code (1 when a `WEFT_*` value or the query is invalid).
pub fn run(query: &Query) -> u8 {
    if query.abi {
        print!("{}", abi_report());
        return 0;
    }
    let (out, errors) = report(&|k| std::env::var(k).ok(), query);
    print!("{out}");
    let mut unknown: Vec<String> = std::env::vars()
        .map(|(k, _)| k)
        .filter(|k| k.starts_with("WEFT_"))
        .filter(|k| !ALL.iter().any(|t| t.env == k) && !OTHER_VARS.contains(&k.as_str()))
        .filter(|k| !LAUNCHER_VARS.iter().any(|v| v.0 == k))
        .collect();
    unknown.sort();
    for k in unknown {
        note!("weft info: warning: {k} is set but is not a weft tunable (misspelt?)");
    }
    for e in &errors {
        note!("weft info: error: {e}");
    }
    u8::from(!errors.is_empty())
}

/// Every function of the standard, `+` or `-` (implemented or not), from weft-cli's build.
const ABI_FUNCTIONS: &str = include_str!(concat!(env!("OUT_DIR"), "/abi_functions.txt"));

/// `weft info --abi`: how much of the standard the C ABI implements, and what it does not.
fn abi_report() -> String {
    let missing: Vec<&str> = ABI_FUNCTIONS
        .lines()
        .filter_map(|l| l.strip_prefix("- "))
        .collect();
    let total = ABI_FUNCTIONS.lines().count();
    let mut out = format!(
        "C ABI (the MPI 5.0 standard ABI: mpi.h, libmpi_abi.so.1): {} of {total} functions \
         implemented.\nNot supported yet ({}; each exists and raises \
         MPI_ERR_UNSUPPORTED_OPERATION through the error handler):\n",
        total - missing.len(),
        missing.len()
    );
    for name in missing {
        out.push_str("  ");
        out.push_str(name);
        out.push('\n');
    }
    out
}
