//! PMI-1 ("simple") wire-protocol client: the protocol `weft run`, MPICH's Hydra
//! (`mpiexec.hydra`) and Slurm's pmi2 plugin serve on an inherited socket.
//!
//! Every command is one line `cmd=NAME key=val ...\n`, sent in one write; the client waits for
//! the reply before sending the next. Reply keys are looked up by name (servers order them
//! differently), and a reply with `rc` other than 0 becomes an [`Error`] naming the call.
//! See `shared/notes/launchers.md` and MPICH's `src/pmi/maint/pmi-1.1.txt`.

use super::{Boot, NameCall, Pmi, SpawnCommand};
use crate::error::{Error, ErrorClass, Result};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, Ordering};

/// Longest line either side may send (PMI-1 `PMIU_MAXLINE`).
pub const MAX_LINE: usize = 1024;

/// Key prefix reserved for the process manager (`PMI_process_mapping`, ...).
pub const RESERVED_PREFIX: &str = "PMI_";

/// A byte stream to the process manager.
pub trait Stream: Read + Write + Send {}
impl<T: Read + Write + Send> Stream for T {}

/// The limits the server announced with `cmd=maxes`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Maxes {
    /// Longest key-value-space name.
    pub kvsname_max: usize,
    /// Longest key.
    pub keylen_max: usize,
    /// Longest value.
    pub vallen_max: usize,
}

/// One parsed line: `cmd=NAME` and its other `key=value` pairs, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Line {
    /// The value of `cmd`.
    pub cmd: String,
    /// Every other pair, in the order sent.
    pub pairs: Vec<(String, String)>,
}

impl Line {
    /// Parses `cmd=NAME k=v ...`. A word without `=` continues the previous value (some
    /// servers put spaces in `msg=`).
    pub fn parse(text: &str) -> Option<Line> {
        let text = text.trim_end_matches(['\n', '\r']);
        let mut cmd = None;
        let mut pairs: Vec<(String, String)> = Vec::new();
        for word in text.split(' ').filter(|w| !w.is_empty()) {
            match word.split_once('=') {
                Some(("cmd", v)) if cmd.is_none() => cmd = Some(v.to_owned()),
                Some((k, v)) => pairs.push((k.to_owned(), v.to_owned())),
                None => match pairs.last_mut() {
                    Some((_, v)) => {
                        v.push(' ');
                        v.push_str(word);
                    }
                    None => return None,
                },
            }
        }
        Some(Line { cmd: cmd?, pairs })
    }

    /// The value of `key`, looked up by name.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// A PMI-1 client connection.
pub struct Pmi1 {
    conn: Box<dyn Stream>,
    /// Bytes read past the end of the last line.
    buf: Vec<u8>,
    kvsname: String,
    maxes: Maxes,
    appnum: i32,
    rank: u32,
    debug: bool,
    finalized: bool,
}

/// Checks that `text` can travel as one word of a PMI line.
pub(super) fn check_word(call: &'static str, what: &str, text: &str, max: usize) -> Result<()> {
    if text.is_empty() {
        return Err(Error::new(
            ErrorClass::Arg,
            call,
            format!("the {what} is empty; PMI cannot carry an empty {what}"),
        ));
    }
    if text.len() > max {
        return Err(Error::new(
            ErrorClass::Arg,
            call,
            format!(
                "the {what} {:?} is {} bytes, longer than the process manager's limit of {max}",
                truncate(text),
                text.len()
            ),
        ));
    }
    if let Some(c) = text
        .chars()
        .find(|c| matches!(c, ' ' | '\n' | '\r' | '\t' | ';' | '\\') || c.is_control())
    {
        return Err(Error::new(
            ErrorClass::Arg,
            call,
            format!(
                "the {what} {:?} contains {c:?}; PMI values must not contain spaces, newlines, \
                 `;` or `\\` (encode them, e.g. as hex or base64)",
                truncate(text)
            ),
        ));
    }
    Ok(())
}

pub(super) fn truncate(text: &str) -> String {
    if text.len() <= 80 {
        text.to_owned()
    } else {
        let mut end = 80;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}...", &text[..end])
    }
}

fn parse_num<T: std::str::FromStr>(call: &'static str, line: &Line, key: &str) -> Result<T> {
    let v = line.get(key).ok_or_else(|| {
        Error::new(
            ErrorClass::Boot,
            call,
            format!("reply cmd={} has no `{key}`", line.cmd),
        )
    })?;
    v.parse().map_err(|_| {
        Error::new(
            ErrorClass::Boot,
            call,
            format!("reply cmd={} has {key}={v:?}, not a number", line.cmd),
        )
    })
}

impl Pmi1 {
    /// A client over `conn`, before any handshake: the PMI-1 default limits until the server
    /// reports its own with `get_maxes`.
    fn new(conn: Box<dyn Stream>, rank: u32) -> Pmi1 {
        Pmi1 {
            conn,
            buf: Vec::new(),
            kvsname: String::new(),
            maxes: Maxes {
                kvsname_max: 256,
                keylen_max: 64,
                vallen_max: 1024,
            },
            appnum: 0,
            rank,
            debug: debug_from_env(),
            finalized: false,
        }
    }

    /// Runs the PMI-1 handshake (`init`, `get_maxes`, `get_my_kvsname`, `get_appnum`) on an
    /// established connection. `rank` is this process's rank, for messages.
    pub fn handshake(conn: Box<dyn Stream>, rank: u32) -> Result<Pmi1> {
        let mut pmi = Pmi1::new(conn, rank);
        let r = pmi.transact(
            "PMI init",
            "cmd=init pmi_version=1 pmi_subversion=1\n",
            "response_to_init",
        )?;
        let version: u32 = parse_num("PMI init", &r, "pmi_version")?;
        let sub: u32 = r
            .get("pmi_subversion")
            .map_or(Ok(1), |_| parse_num("PMI init", &r, "pmi_subversion"))?;
        if version != 1 || sub < 1 {
            return Err(Error::new(
                ErrorClass::Boot,
                "PMI init",
                format!(
                    "the process manager speaks PMI {version}.{sub}; this client needs 1.1 or later 1.x"
                ),
            ));
        }
        let r = pmi.transact("PMI get_maxes", "cmd=get_maxes\n", "maxes")?;
        pmi.maxes = Maxes {
            kvsname_max: parse_num("PMI get_maxes", &r, "kvsname_max")?,
            keylen_max: parse_num("PMI get_maxes", &r, "keylen_max")?,
            vallen_max: parse_num("PMI get_maxes", &r, "vallen_max")?,
        };
        let r = pmi.transact("PMI get_my_kvsname", "cmd=get_my_kvsname\n", "my_kvsname")?;
        pmi.kvsname = r
            .get("kvsname")
            .filter(|k| !k.is_empty())
            .ok_or_else(|| {
                Error::new(
                    ErrorClass::Boot,
                    "PMI get_my_kvsname",
                    format!("reply has no kvsname: {r:?}"),
                )
            })?
            .to_owned();
        let r = pmi.transact("PMI get_appnum", "cmd=get_appnum\n", "appnum")?;
        pmi.appnum = parse_num("PMI get_appnum", &r, "appnum")?;
        Ok(pmi)
    }

    /// The key-value-space name the server gave this job.
    pub fn kvsname(&self) -> &str {
        &self.kvsname
    }

    /// The limits the server announced.
    pub fn maxes(&self) -> Maxes {
        self.maxes
    }

    /// This process's application number (for MPMD launches; 0 otherwise).
    pub fn appnum(&self) -> i32 {
        self.appnum
    }

    /// `cmd=get_universe_size`.
    pub fn universe_size(&mut self) -> Result<u32> {
        let r = self.transact(
            "PMI get_universe_size",
            "cmd=get_universe_size\n",
            "universe_size",
        )?;
        parse_num("PMI get_universe_size", &r, "size")
    }

    /// Reads `key` from the job's key-value space, including the server's own keys
    /// (`PMI_process_mapping`). `Ok(None)` when the key does not exist.
    pub fn try_get(&mut self, key: &str) -> Result<Option<String>> {
        check_word("PMI get", "key", key, self.maxes.keylen_max)?;
        let line = format!("cmd=get kvsname={} key={key}\n", self.kvsname);
        let r = self.send_and_read("PMI get", &line, "get_result")?;
        if rc_of(&r) != 0 {
            return Ok(None);
        }
        Ok(Some(r.get("value").unwrap_or("").to_owned()))
    }

    fn send_and_read(&mut self, call: &'static str, line: &str, expect: &str) -> Result<Line> {
        if self.finalized {
            return Err(Error::new(
                ErrorClass::Boot,
                call,
                "called after PMI finalize",
            ));
        }
        self.send(call, line)?;
        let text = self.read_line(call)?;
        let reply = Line::parse(&text).ok_or_else(|| {
            Error::new(
                ErrorClass::Boot,
                call,
                format!(
                    "malformed reply {:?} from the process manager",
                    truncate(&text)
                ),
            )
        })?;
        if reply.cmd != expect {
            return Err(Error::new(
                ErrorClass::Boot,
                call,
                format!(
                    "expected cmd={expect} in reply to {:?}, got {:?}",
                    line.trim_end(),
                    truncate(&text)
                ),
            ));
        }
        Ok(reply)
    }

    /// Sends `line`, reads the reply `cmd=expect`, and turns `rc != 0` into an error.
    fn transact(&mut self, call: &'static str, line: &str, expect: &str) -> Result<Line> {
        let reply = self.send_and_read(call, line, expect)?;
        let rc = rc_of(&reply);
        if rc != 0 {
            let msg = reply.get("msg").unwrap_or("(no message)");
            return Err(Error::new(
                ErrorClass::Boot,
                call,
                format!(
                    "the process manager answered rc={rc} ({msg}) to {:?}",
                    line.trim_end()
                ),
            ));
        }
        Ok(reply)
    }

    fn send(&mut self, call: &'static str, line: &str) -> Result<()> {
        debug_assert!(line.ends_with('\n'), "PMI lines end with a newline");
        if line.len() > MAX_LINE {
            return Err(Error::new(
                ErrorClass::Arg,
                call,
                format!(
                    "the command is {} bytes, longer than PMI's line limit of {MAX_LINE}",
                    line.len()
                ),
            ));
        }
        if self.debug {
            eprintln!("weft[{}] pmi> {}", self.rank, line.trim_end());
        }
        // One write per command: servers read a command per read.
        self.conn
            .write_all(line.as_bytes())
            .and_then(|()| self.conn.flush())
            .map_err(|e| Error::os(call, "writing to the process manager (PMI socket)", e))
    }

    fn read_line(&mut self, call: &'static str) -> Result<String> {
        loop {
            if let Some(text) = super::take_line(&mut self.buf) {
                if self.debug {
                    eprintln!("weft[{}] pmi< {}", self.rank, text.trim_end());
                }
                return Ok(text);
            }
            if self.buf.len() > 64 * MAX_LINE {
                return Err(Error::new(
                    ErrorClass::Boot,
                    call,
                    format!(
                        "the process manager sent {} bytes without a newline",
                        self.buf.len()
                    ),
                ));
            }
            super::read_chunk(&mut self.conn, &mut self.buf, call)?;
        }
    }
}

fn rc_of(line: &Line) -> i64 {
    match line.get("rc") {
        None => 0,
        Some(v) => v.trim().parse().unwrap_or(-1),
    }
}

pub(super) fn debug_from_env() -> bool {
    std::env::var("WEFT_PMI_DEBUG").is_ok_and(|v| !v.is_empty() && v != "0")
}

impl Pmi for Pmi1 {
    fn put(&mut self, key: &str, value: &str) -> Result<()> {
        check_word("PMI put", "key", key, self.maxes.keylen_max)?;
        if key.starts_with(RESERVED_PREFIX) || key.contains('=') {
            return Err(Error::new(
                ErrorClass::Arg,
                "PMI put",
                format!(
                    "key {key:?} is not allowed: keys must not start with {RESERVED_PREFIX:?} \
                     (reserved for the process manager) or contain `=`"
                ),
            ));
        }
        check_word("PMI put", "value", value, self.maxes.vallen_max)?;
        let line = format!("cmd=put kvsname={} key={key} value={value}\n", self.kvsname);
        self.transact("PMI put", &line, "put_result").map(drop)
    }

    fn fence(&mut self) -> Result<()> {
        self.transact("PMI barrier", "cmd=barrier_in\n", "barrier_out")
            .map(drop)
    }

    fn get(&mut self, key: &str) -> Result<String> {
        self.try_get(key)?.ok_or_else(|| {
            Error::new(
                ErrorClass::Boot,
                "PMI get",
                format!(
                    "key {key:?} is not in key-value space {:?} (was it put before the last \
                     fence?)",
                    self.kvsname
                ),
            )
        })
    }

    fn abort(&mut self, code: i32, msg: &str) -> ! {
        eprintln!(
            "weft: rank {} aborting the job with code {code}: {msg}",
            self.rank
        );
        // No reply comes: the launcher ends the job. Exit ourselves in case it does not.
        let _ = self.send("PMI abort", &format!("cmd=abort exitcode={code}\n"));
        std::process::exit(if code == 0 { 1 } else { code })
    }

    fn finalize(&mut self) -> Result<()> {
        if self.finalized {
            return Ok(());
        }
        self.transact("PMI finalize", "cmd=finalize\n", "finalize_ack")?;
        self.finalized = true;
        Ok(())
    }

    fn name_service(&mut self, call: NameCall<'_>) -> Result<Option<String>> {
        let (name, line, expect, class) = match call {
            NameCall::Publish { service, port } => (
                "publish_name",
                format!("cmd=publish_name service={service} port={port}\n"),
                "publish_result",
                ErrorClass::Service,
            ),
            NameCall::Unpublish { service } => (
                "unpublish_name",
                format!("cmd=unpublish_name service={service}\n"),
                "unpublish_result",
                ErrorClass::Service,
            ),
            NameCall::Lookup { service } => (
                "lookup_name",
                format!("cmd=lookup_name service={service}\n"),
                "lookup_result",
                ErrorClass::Name,
            ),
        };
        let service = match call {
            NameCall::Publish { service, .. }
            | NameCall::Unpublish { service }
            | NameCall::Lookup { service } => service,
        };
        check_word(name, "the service name", service, self.maxes.vallen_max)?;
        if let NameCall::Publish { port, .. } = call {
            check_word(name, "the port name", port, self.maxes.vallen_max)?;
        }
        let reply = self.send_and_read(name, &line, expect)?;
        if rc_of(&reply) != 0 {
            let why = reply.get("msg").unwrap_or("refused").replace('_', " ");
            return Err(Error::new(class, name, why));
        }
        Ok(reply.get("port").map(str::to_owned))
    }

    fn spawn(&mut self, cmds: &[SpawnCommand], preput: &[(String, String)]) -> Result<()> {
        const CALL: &str = "PMI spawn";
        for (i, c) in cmds.iter().enumerate() {
            for line in spawn_block(c, (i + 1, cmds.len()), preput) {
                if line[..line.len() - 1].contains('\n') {
                    return Err(Error::new(
                        ErrorClass::Arg,
                        "spawn",
                        format!(
                            "a newline in {:?}: PMI-1 cannot carry it",
                            truncate(line.trim_end())
                        ),
                    ));
                }
                self.send(CALL, &line)?;
            }
        }
        let text = self.read_line(CALL)?;
        let reply = Line::parse(&text).filter(|l| l.cmd == "spawn_result");
        let Some(reply) = reply else {
            return Err(Error::new(
                ErrorClass::Boot,
                CALL,
                format!("expected cmd=spawn_result, got {:?}", truncate(&text)),
            ));
        };
        match rc_of(&reply) {
            0 => Ok(()),
            rc => Err(Error::new(
                ErrorClass::Spawn,
                "spawn",
                format!(
                    "the process manager refused (rc={rc}): {}",
                    reply.get("msg").unwrap_or("no reason given").replace('_', " ")
                ),
            )),
        }
    }

    fn protocol(&self) -> &'static str {
        "pmi-1"
    }
}

/// Set once `PMI_FD` has been wrapped, so a second [`connect_from_env`] cannot own it twice.
static FD_TAKEN: AtomicBool = AtomicBool::new(false);

/// The lines of command `c`, number `i` of `n` (from 1), of a PMI-1 spawn (`mcmd=spawn`
/// ... `endcmd`, one key per line, as MPICH's simple PMI and Hydra read them).
fn spawn_block(c: &SpawnCommand, (i, n): (usize, usize), preput: &[(String, String)]) -> Vec<String> {
    let mut lines = vec![
        "mcmd=spawn\n".to_owned(),
        format!("nprocs={}\n", c.maxprocs),
        format!("execname={}\n", c.program),
        format!("totspawns={n}\n"),
        format!("spawnssofar={i}\n"),
        format!("argcnt={}\n", c.args.len()),
    ];
    lines.extend(c.args.iter().enumerate().map(|(k, a)| format!("arg{}={a}\n", k + 1)));
    lines.push(format!("preput_num={}\n", preput.len()));
    for (k, (key, val)) in preput.iter().enumerate() {
        lines.push(format!("preput_key_{k}={key}\n"));
        lines.push(format!("preput_val_{k}={val}\n"));
    }
    lines.push(format!("info_num={}\n", c.info.len()));
    for (k, (key, val)) in c.info.iter().enumerate() {
        lines.push(format!("info_key_{k}={key}\n"));
        lines.push(format!("info_val_{k}={val}\n"));
    }
    lines.push("endcmd\n".to_owned());
    lines
}

fn env_num(name: &'static str) -> Result<Option<u32>> {
    match std::env::var(name) {
        Err(_) => Ok(None),
        Ok(v) => v.trim().parse().map(Some).map_err(|_| {
            Error::new(
                ErrorClass::Boot,
                "initialize",
                format!("{name}={v:?} is not a non-negative whole number"),
            )
        }),
    }
}

fn take_pmi_fd(text: &str) -> Result<Box<dyn Stream>> {
    let fd: RawFd = text
        .trim()
        .parse()
        .ok()
        .filter(|&fd| fd >= 0)
        .ok_or_else(|| {
            Error::new(
                ErrorClass::Boot,
                "initialize",
                format!("PMI_FD={text:?} is not a file descriptor number"),
            )
        })?;
    if FD_TAKEN.swap(true, Ordering::AcqRel) {
        return Err(Error::new(
            ErrorClass::Boot,
            "initialize",
            format!("PMI_FD={fd} was already taken by an earlier initialization in this process"),
        ));
    }
    // SAFETY: PMI_FD names the socket the launcher handed this process, which nothing else in
    // it uses; FD_TAKEN guarantees this process adopts the descriptor at most once.
    let stream = unsafe { crate::sys::adopt_inherited_socket(fd) }.map_err(|e| {
        Error::os(
            "initialize",
            format!("PMI_FD={fd} (inherited PMI socket)"),
            e,
        )
    })?;
    Ok(Box::new(stream))
}

/// A connection and the rank and size the server told us during `initack`, if it did.
type Connected = (Box<dyn Stream>, Option<u32>, Option<u32>);

/// `PMI_PORT=host:port` + `PMI_ID`: connect, send `initack`, read `size`, `rank`, `debug`.
fn connect_port(port: &str) -> Result<Connected> {
    let mut stream = TcpStream::connect(port.trim())
        .map_err(|e| Error::os("initialize", format!("connecting to PMI_PORT={port}"), e))?;
    let _ = stream.set_nodelay(true);
    let id = std::env::var("PMI_ID").map_err(|_| {
        Error::new(
            ErrorClass::Boot,
            "initialize",
            format!("PMI_PORT={port} is set but PMI_ID is not"),
        )
    })?;
    let hello = format!("cmd=initack pmiid={}\n", id.trim());
    stream
        .write_all(hello.as_bytes())
        .map_err(|e| Error::os("PMI initack", format!("writing to PMI_PORT={port}"), e))?;
    // Read the initack block with a throwaway Pmi1 reader (it owns buffering).
    let mut pmi = Pmi1::new(Box::new(stream), 0);
    let (mut size, mut rank) = (None, None);
    let first = pmi.read_line("PMI initack")?;
    if Line::parse(&first).map(|l| l.cmd) != Some("initack".into()) {
        return Err(Error::new(
            ErrorClass::Boot,
            "PMI initack",
            format!("expected cmd=initack, got {:?}", truncate(&first)),
        ));
    }
    loop {
        let text = pmi.read_line("PMI initack")?;
        let l = Line::parse(&text)
            .filter(|l| l.cmd == "set")
            .ok_or_else(|| {
                Error::new(
                    ErrorClass::Boot,
                    "PMI initack",
                    format!("expected cmd=set ..., got {:?}", truncate(&text)),
                )
            })?;
        if l.get("size").is_some() {
            size = Some(parse_num("PMI initack", &l, "size")?);
        }
        if l.get("rank").is_some() {
            rank = Some(parse_num("PMI initack", &l, "rank")?);
        }
        if l.get("debug").is_some() {
            break;
        }
    }
    debug_assert!(pmi.buf.is_empty(), "no reply can be pending after initack");
    Ok((pmi.conn, rank, size))
}

/// Keeps `[A-Za-z0-9_]`, replaces anything else by `_`, at most 64 characters.
pub fn sanitize_job_id(text: &str) -> String {
    text.chars()
        .take(64)
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Which node each rank is on: `PMI_process_mapping` when the server has one, else an
/// exchange of host names (collective: every rank takes the same branch, since all see the
/// same mapping).
pub fn node_map(pmi: &mut Pmi1, rank: u32, size: u32) -> Result<Vec<u32>> {
    let mapping = pmi.try_get("PMI_process_mapping")?.unwrap_or_default();
    super::node_map(pmi, &mapping, rank, size)
}

/// Connects through `PMI_FD` (or `PMI_PORT` + `PMI_ID`) and runs the PMI-1 handshake.
pub fn connect_from_env() -> Result<Boot> {
    let (conn, rank, size) = connect_env()?;
    finish(Pmi1::handshake(conn, rank)?, rank, size)
}

/// Takes the connection the environment names (`PMI_FD`, or `PMI_PORT` + `PMI_ID` with the
/// initack exchange) and this rank's number and the job size, before any `init`: the point
/// where PMI-1 and PMI-2 part ways.
pub fn connect_env() -> Result<(Box<dyn Stream>, u32, u32)> {
    let (conn, ack_rank, ack_size) = match std::env::var("PMI_FD") {
        Ok(fd) => (take_pmi_fd(&fd)?, None, None),
        Err(_) => match std::env::var("PMI_PORT") {
            Ok(port) => connect_port(&port)?,
            Err(_) => {
                return Err(Error::new(
                    ErrorClass::Boot,
                    "initialize",
                    "neither PMI_FD nor PMI_PORT is set",
                ))
            }
        },
    };
    let rank = ack_rank.or(env_num("PMI_RANK")?).ok_or_else(|| {
        Error::new(
            ErrorClass::Boot,
            "initialize",
            "PMI_RANK is not set (the launcher must give each rank its number)",
        )
    })?;
    let size = ack_size.or(env_num("PMI_SIZE")?).ok_or_else(|| {
        Error::new(
            ErrorClass::Boot,
            "initialize",
            "PMI_SIZE is not set (the launcher must give each rank the job size)",
        )
    })?;
    if size == 0 || rank >= size {
        return Err(Error::new(
            ErrorClass::Boot,
            "initialize",
            format!("PMI_RANK={rank} is not below PMI_SIZE={size}"),
        ));
    }
    Ok((conn, rank, size))
}

/// Completes bootstrap on a handshaken client: job id and node map.
pub fn finish(mut pmi: Pmi1, rank: u32, size: u32) -> Result<Boot> {
    let job_id = super::job_id_from(pmi.kvsname());
    let node_of = node_map(&mut pmi, rank, size)?;
    Ok(Boot {
        rank,
        size,
        node_of,
        job_id,
        pmi: Box::new(pmi),
        universe_base: 0,
        secret: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::io::{BufRead, BufReader};
    use std::os::unix::net::UnixStream;
    use std::thread;

    /// A fake server: answers each line with `handler`'s reply (None: no reply, e.g. abort).
    /// Returns every line it received when the client hangs up.
    fn fake_server(
        mut handler: impl FnMut(&Line) -> Option<String> + Send + 'static,
    ) -> (Box<dyn Stream>, thread::JoinHandle<Vec<String>>) {
        let (client, server) = UnixStream::pair().unwrap();
        let t = thread::spawn(move || {
            let mut seen = Vec::new();
            let mut w = server.try_clone().unwrap();
            let mut r = BufReader::new(server);
            let mut text = String::new();
            while r.read_line(&mut text).unwrap() > 0 {
                let line = Line::parse(&text).expect("client sent a parsable line");
                seen.push(text.trim_end().to_owned());
                if let Some(reply) = handler(&line) {
                    w.write_all(reply.as_bytes()).unwrap();
                }
                text.clear();
            }
            seen
        });
        (Box::new(client), t)
    }

    /// A well-behaved server for one rank, with a key-value table and optional mapping.
    fn standard(mapping: Option<&'static str>) -> impl FnMut(&Line) -> Option<String> + Send {
        let mut kvs: HashMap<String, String> = HashMap::new();
        move |l| {
            Some(match l.cmd.as_str() {
                // Keys in an unusual order, to check lookup by name.
                "init" => "cmd=response_to_init rc=0 pmi_subversion=1 pmi_version=1\n".into(),
                "get_maxes" => "cmd=maxes vallen_max=1024 keylen_max=64 kvsname_max=256\n".into(),
                "get_my_kvsname" => "cmd=my_kvsname kvsname=kvs_77_0\n".into(),
                "get_appnum" => "cmd=appnum appnum=0\n".into(),
                "get_universe_size" => "cmd=universe_size size=4\n".into(),
                "put" => {
                    kvs.insert(l.get("key")?.into(), l.get("value")?.into());
                    "cmd=put_result rc=0 msg=success\n".into()
                }
                "barrier_in" => "cmd=barrier_out\n".into(),
                "get" => {
                    let key = l.get("key")?;
                    let v = if key == "PMI_process_mapping" {
                        mapping.map(str::to_owned)
                    } else {
                        kvs.get(key).cloned()
                    };
                    match v {
                        Some(v) => format!("cmd=get_result rc=0 msg=success value={v}\n"),
                        None => format!("cmd=get_result rc=-1 msg=key_{key}_not_found\n"),
                    }
                }
                "finalize" => "cmd=finalize_ack\n".into(),
                "abort" => return None,
                other => panic!("unexpected command {other}"),
            })
        }
    }

    #[test]
    fn line_parsing_by_name() {
        let l = Line::parse("cmd=get_result rc=0 msg=success value=a=b\n").unwrap();
        assert_eq!(l.cmd, "get_result");
        assert_eq!(l.get("value"), Some("a=b"));
        assert_eq!(l.get("rc"), Some("0"));
        let l = Line::parse("rc=-1 cmd=x msg=key not found").unwrap();
        assert_eq!(l.cmd, "x");
        assert_eq!(l.get("msg"), Some("key not found"));
        assert!(Line::parse("hello").is_none());
        assert!(Line::parse("a=b").is_none());
    }

    #[test]
    fn handshake_put_fence_get_finalize() {
        let (conn, server) = fake_server(standard(Some("(vector,(0,1,1))")));
        let mut pmi = Pmi1::handshake(conn, 0).unwrap();
        assert_eq!(pmi.kvsname(), "kvs_77_0");
        assert_eq!(pmi.maxes().keylen_max, 64);
        assert_eq!(pmi.universe_size().unwrap(), 4);
        pmi.put("k1", "dGVzdA==").unwrap();
        pmi.fence().unwrap();
        assert_eq!(pmi.get("k1").unwrap(), "dGVzdA==");
        let e = pmi.get("nope").unwrap_err();
        assert!(e.to_string().contains("nope"), "{e}");
        assert_eq!(pmi.try_get("nope").unwrap(), None);
        let nodes = node_map(&mut pmi, 0, 4).unwrap();
        assert_eq!(nodes, vec![0; 4]);
        pmi.finalize().unwrap();
        pmi.finalize().unwrap(); // idempotent
        assert!(pmi.put("k", "v").is_err(), "no traffic after finalize");
        drop(pmi);
        let seen = server.join().unwrap();
        assert_eq!(seen[0], "cmd=init pmi_version=1 pmi_subversion=1");
        assert!(seen.contains(&"cmd=put kvsname=kvs_77_0 key=k1 value=dGVzdA==".to_string()));
        assert!(seen.contains(&"cmd=get kvsname=kvs_77_0 key=PMI_process_mapping".to_string()));
        assert_eq!(seen.last().unwrap(), "cmd=finalize");
    }

    #[test]
    fn later_subversion_accepted_version_2_refused() {
        let (conn, _s) = fake_server(|l| match l.cmd.as_str() {
            "init" => Some("cmd=response_to_init pmi_version=1 pmi_subversion=2 rc=0\n".into()),
            "get_maxes" => Some("cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=1024\n".into()),
            "get_my_kvsname" => Some("cmd=my_kvsname kvsname=k\n".into()),
            "get_appnum" => Some("cmd=appnum appnum=3\n".into()),
            _ => None,
        });
        assert_eq!(Pmi1::handshake(conn, 0).unwrap().appnum(), 3);

        let (conn, _s) = fake_server(|_| {
            Some("cmd=response_to_init pmi_version=2 pmi_subversion=0 rc=0\n".into())
        });
        let e = Pmi1::handshake(conn, 0).err().unwrap();
        assert!(e.to_string().contains("PMI 2.0"), "{e}");
    }

    #[test]
    fn nonzero_rc_is_an_error_naming_the_call() {
        let (conn, _s) =
            fake_server(|_| Some("cmd=response_to_init rc=-1 msg=bad_version\n".into()));
        let e = Pmi1::handshake(conn, 0).err().unwrap();
        assert_eq!(e.call, "PMI init");
        assert!(
            e.detail.contains("rc=-1") && e.detail.contains("bad_version"),
            "{e}"
        );

        let mut std = standard(None);
        let (conn, _s) = fake_server(move |l| {
            if l.cmd == "put" {
                Some("cmd=put_result rc=1 msg=duplicate\n".into())
            } else {
                std(l)
            }
        });
        let mut pmi = Pmi1::handshake(conn, 0).unwrap();
        let e = pmi.put("k", "v").unwrap_err();
        assert_eq!(e.call, "PMI put");
        assert!(
            e.detail.contains("duplicate") && e.detail.contains("key=k"),
            "{e}"
        );
    }

    #[test]
    fn unexpected_reply_and_hangup_are_errors() {
        let (conn, _s) = fake_server(|_| Some("cmd=something_else rc=0\n".into()));
        let e = Pmi1::handshake(conn, 0).err().unwrap();
        assert!(e.detail.contains("response_to_init") && e.detail.contains("something_else"));

        let (client, server) = UnixStream::pair().unwrap();
        drop(server);
        let e = Pmi1::handshake(Box::new(client), 0).err().unwrap();
        assert_eq!(e.class, ErrorClass::Os, "{e}"); // EPIPE on write, or:
        let (client, server) = UnixStream::pair().unwrap();
        let t = thread::spawn(move || {
            let mut b = [0u8; 64];
            let _ = (&server).read(&mut b);
        });
        let e = Pmi1::handshake(Box::new(client), 0).err().unwrap();
        t.join().unwrap();
        assert!(e.detail.contains("closed"), "{e}");
    }

    #[test]
    fn replies_split_across_reads_and_joined_in_one() {
        // The server writes two replies in one write, and one reply in two writes.
        let (client, server) = UnixStream::pair().unwrap();
        let t = thread::spawn(move || {
            let mut w = server.try_clone().unwrap();
            let mut r = BufReader::new(server);
            let mut s = String::new();
            r.read_line(&mut s).unwrap(); // init
            w.write_all(b"cmd=response_to_init pmi_version=1 pmi_sub")
                .unwrap();
            thread::sleep(std::time::Duration::from_millis(20));
            w.write_all(b"version=1 rc=0\n").unwrap();
            s.clear();
            r.read_line(&mut s).unwrap(); // get_maxes
            w.write_all(b"cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=1024\ncmd=my_kvsname kvsname=kk\n")
                .unwrap();
            s.clear();
            r.read_line(&mut s).unwrap(); // get_my_kvsname, already answered
            s.clear();
            r.read_line(&mut s).unwrap(); // get_appnum
            w.write_all(b"cmd=appnum appnum=0\n").unwrap();
        });
        let pmi = Pmi1::handshake(Box::new(client), 0).unwrap();
        assert_eq!(pmi.kvsname(), "kk");
        t.join().unwrap();
    }

    #[test]
    fn bad_keys_and_values_are_refused_before_sending() {
        let (conn, server) = fake_server(standard(None));
        let mut pmi = Pmi1::handshake(conn, 0).unwrap();
        for (k, v, want) in [
            ("a b", "v", "contains ' '"),
            ("k", "has space", "contains ' '"),
            ("k", "semi;colon", "contains ';'"),
            ("k", "back\\slash", "contains '\\\\'"),
            ("k", "new\nline", "contains '\\n'"),
            ("k", "", "empty"),
            ("", "v", "empty"),
            ("PMI_mine", "v", "PMI_"),
            ("a=b", "v", "`=`"),
        ] {
            let e = pmi.put(k, v).unwrap_err();
            assert_eq!(
                (e.call, e.class),
                ("PMI put", ErrorClass::Arg),
                "{k:?} {v:?}"
            );
            assert!(e.detail.contains(want), "{k:?} {v:?}: {e}");
        }
        let long_key = "k".repeat(65);
        let e = pmi.put(&long_key, "v").unwrap_err();
        assert!(
            e.detail.contains("65 bytes") && e.detail.contains("64"),
            "{e}"
        );
        let long_val = "v".repeat(1025);
        assert!(pmi
            .put("k", &long_val)
            .unwrap_err()
            .detail
            .contains("1025 bytes"));
        // A value at the limit still makes the line exceed 1024 bytes.
        let e = pmi.put("k", &"v".repeat(1024)).unwrap_err();
        assert!(e.detail.contains("line limit"), "{e}");
        pmi.put("k", &"v".repeat(900)).unwrap();
        drop(pmi);
        let seen = server.join().unwrap();
        assert_eq!(seen.iter().filter(|l| l.starts_with("cmd=put")).count(), 1);
    }

    #[test]
    fn hostname_exchange_when_mapping_is_empty() {
        let (conn, server) = fake_server(standard(Some("")));
        let mut pmi = Pmi1::handshake(conn, 0).unwrap();
        // One rank: it sees only its own host name.
        assert_eq!(node_map(&mut pmi, 0, 1).unwrap(), vec![0]);
        drop(pmi);
        let seen = server.join().unwrap();
        assert!(seen
            .iter()
            .any(|l| l.starts_with("cmd=put kvsname=kvs_77_0 key=weft.host.0 value=")));
        assert!(seen.contains(&"cmd=barrier_in".to_string()));

        // Absent mapping (rc != 0) takes the same path.
        let (conn, _s) = fake_server(standard(None));
        let mut pmi = Pmi1::handshake(conn, 0).unwrap();
        assert_eq!(node_map(&mut pmi, 0, 1).unwrap(), vec![0]);
    }

    #[test]
    fn job_id_sanitized() {
        assert_eq!(sanitize_job_id("kvs_1234_0"), "kvs_1234_0");
        assert_eq!(sanitize_job_id("1234.0-a/b"), "1234_0_a_b");
        assert_eq!(sanitize_job_id(&"x".repeat(100)).len(), 64);
    }
}
