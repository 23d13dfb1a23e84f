//! PMI-2 wire-protocol client: what MPICH's Hydra and Slurm's `srun --mpi=pmi2` serve on the
//! same inherited socket as PMI-1 (`PMI_FD`, or `PMI_PORT` after the initack exchange).
//!
//! The conversation starts with the PMI-1 line `cmd=init pmi_version=2 pmi_subversion=0`; a
//! server that agrees answers `cmd=response_to_init pmi_version=2 ... rc=0` (still a PMI-1
//! line). From then on every message is framed: 6 ASCII characters holding the body length
//! (Hydra right-aligns the number, Slurm left-aligns it: both are trimmed), then the body
//! `cmd=NAME;key=value;...;` — every pair ends with `;`, nothing is escaped, so values must
//! not contain `;`. Replies carry `rc` (0 for success) and on failure `errmsg`.
//! See `shared/notes/launchers.md` and MPICH's `src/pmi/maint/pmi-2.0.txt`.

use super::pmi1::{self, check_word, truncate, Line, Stream, RESERVED_PREFIX};
use super::{Boot, NameCall, Pmi, SpawnCommand};
use crate::error::{Error, ErrorClass, Result};
use std::collections::HashMap;

/// Width of the length prefix.
pub const LEN_WIDTH: usize = 6;
/// Longest key (PMI-2 `PMI2_MAX_KEYLEN`).
pub const MAX_KEY: usize = 64;
/// Longest value (PMI-2 `PMI2_MAX_VALLEN`).
pub const MAX_VALUE: usize = 1024;
/// The key [`Pmi::fence`] reads to wait for the fence to complete. Nobody puts it; if someone
/// did, the read would still only wait.
const FENCE_KEY: &str = "weft-fence-barrier";
/// Longest message body this client sends or accepts (well above what a key and a value
/// need; the 6-digit prefix could describe up to 999,999 bytes).
pub const MAX_BODY: usize = 64 * 1024;

/// One PMI-2 message: `cmd=NAME` and its other `key=value` pairs, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Msg {
    /// The value of `cmd`.
    pub cmd: String,
    /// Every other pair, in the order sent.
    pub pairs: Vec<(String, String)>,
}

impl Msg {
    /// A message `cmd` with `pairs`.
    pub fn new(cmd: &str, pairs: &[(&str, &str)]) -> Msg {
        Msg {
            cmd: cmd.to_owned(),
            pairs: pairs
                .iter()
                .map(|&(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
        }
    }

    /// Parses a body `cmd=NAME;k=v;...;` (the final `;` may be missing). `None` when there is
    /// no `cmd` or a field has no `=`.
    pub fn parse(body: &str) -> Option<Msg> {
        let mut cmd = None;
        let mut pairs = Vec::new();
        for field in body.trim_end_matches(['\n', '\r']).split(';') {
            if field.is_empty() {
                continue;
            }
            match field.split_once('=')? {
                ("cmd", v) if cmd.is_none() => cmd = Some(v.to_owned()),
                (k, v) => pairs.push((k.to_owned(), v.to_owned())),
            }
        }
        Some(Msg { cmd: cmd?, pairs })
    }

    /// The body `cmd=NAME;k=v;...;`.
    pub fn body(&self) -> String {
        let mut s = format!("cmd={};", self.cmd);
        for (k, v) in &self.pairs {
            s.push_str(k);
            s.push('=');
            s.push_str(v);
            s.push(';');
        }
        s
    }

    /// The framed message: the body length left-aligned in 6 characters, then the body.
    pub fn frame(&self) -> String {
        let body = self.body();
        format!("{:<width$}{body}", body.len(), width = LEN_WIDTH)
    }

    /// The value of `key`, looked up by name.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// `found=TRUE` (PMI-2 booleans are `TRUE`/`FALSE`; accept any case).
    fn found(&self) -> bool {
        self.get("found")
            .is_some_and(|f| f.eq_ignore_ascii_case("true"))
    }
}

/// Parses the 6-character length prefix, left- or right-aligned.
pub fn parse_len(prefix: &[u8]) -> Option<usize> {
    std::str::from_utf8(prefix).ok()?.trim().parse().ok()
}

/// The outcome of offering PMI-2 to a process manager.
pub enum Init {
    /// The server speaks PMI-2; the client is ready (after `fullinit` and `job-getid`).
    Accepted(Pmi2),
    /// The server answered the PMI-2 `init` with an error or another version. The connection
    /// is handed back, with nothing pending on it, for a PMI-1 `init`; the string says what
    /// the server answered.
    Refused(Box<dyn Stream>, String),
}

/// A PMI-2 client connection.
pub struct Pmi2 {
    conn: Box<dyn Stream>,
    /// Bytes read past the end of the last message.
    buf: Vec<u8>,
    rank: u32,
    size: u32,
    appnum: i32,
    jobid: String,
    debug: bool,
    finalized: bool,
    /// Whether this process has completed a `kvs-fence` yet.
    fenced: bool,
    /// This process's puts before its first fence (see [`Pmi2::try_get`]).
    unfenced_puts: HashMap<String, String>,
}

fn boot_err(call: &'static str, detail: impl Into<String>) -> Error {
    Error::new(ErrorClass::Boot, call, detail)
}

fn num<T: std::str::FromStr>(call: &'static str, m: &Msg, key: &str) -> Result<T> {
    let v = m.get(key).ok_or_else(|| {
        boot_err(
            call,
            format!("reply {:?} has no `{key}`", truncate(&m.body())),
        )
    })?;
    v.trim().parse().map_err(|_| {
        boot_err(
            call,
            format!(
                "reply {:?} has {key}={v:?}, not a number",
                truncate(&m.body())
            ),
        )
    })
}

impl Pmi2 {
    fn new(conn: Box<dyn Stream>, rank: u32) -> Pmi2 {
        Pmi2 {
            conn,
            buf: Vec::new(),
            rank,
            size: 0,
            appnum: 0,
            jobid: String::new(),
            debug: pmi1::debug_from_env(),
            finalized: false,
            fenced: false,
            unfenced_puts: HashMap::new(),
        }
    }

    /// Offers PMI-2 on `conn` (`init pmi_version=2`); when the server agrees, runs `fullinit`
    /// (as rank `rank`) and `job-getid`.
    pub fn init(conn: Box<dyn Stream>, rank: u32) -> Result<Init> {
        let mut pmi = Pmi2::new(conn, rank);
        let hello = "cmd=init pmi_version=2 pmi_subversion=0\n";
        pmi.write("PMI-2 init", hello)?;
        let text = pmi.read_line("PMI-2 init")?;
        let reply = Line::parse(&text)
            .filter(|l| l.cmd == "response_to_init")
            .ok_or_else(|| {
                boot_err(
                    "PMI-2 init",
                    format!(
                        "expected cmd=response_to_init in reply to {:?}, got {:?}",
                        hello.trim_end(),
                        truncate(text.trim_end())
                    ),
                )
            })?;
        let rc = reply.get("rc").unwrap_or("0").trim();
        let version = reply.get("pmi_version").unwrap_or("").trim();
        if rc != "0" || version != "2" {
            if !pmi.buf.is_empty() {
                return Err(boot_err(
                    "PMI-2 init",
                    format!(
                        "the process manager refused PMI-2 with {:?} and then sent {:?} \
                         unasked; cannot fall back to PMI-1 on this connection",
                        text.trim_end(),
                        truncate(&String::from_utf8_lossy(&pmi.buf))
                    ),
                ));
            }
            let why = format!("{:?}", text.trim_end());
            return Ok(Init::Refused(pmi.conn, why));
        }
        pmi.fullinit()?;
        Ok(Init::Accepted(pmi))
    }

    fn fullinit(&mut self) -> Result<()> {
        let rank = self.rank.to_string();
        let jobid = std::env::var("PMI_JOBID").ok();
        let mut pairs: Vec<(&str, &str)> = Vec::new();
        // Slurm identifies the rank by all three; Hydra by pmirank (or pmiid with PMI_PORT).
        if let Some(j) = jobid.as_deref().filter(|j| !j.is_empty()) {
            pairs.push(("pmijobid", j));
        }
        pairs.push(("pmirank", &rank));
        pairs.push(("threaded", "FALSE"));
        let r = self.transact(
            "PMI-2 fullinit",
            Msg::new("fullinit", &pairs),
            "fullinit-response",
        )?;
        let got: u32 = num("PMI-2 fullinit", &r, "rank")?;
        self.size = num("PMI-2 fullinit", &r, "size")?;
        self.appnum = r
            .get("appnum")
            .map_or(Ok(0), |_| num("PMI-2 fullinit", &r, "appnum"))?;
        if got != self.rank || got >= self.size {
            return Err(boot_err(
                "PMI-2 fullinit",
                format!(
                    "the process manager says rank {got} of {}, but this process is rank {} \
                     (PMI_RANK)",
                    self.size, self.rank
                ),
            ));
        }
        let r = self.transact(
            "PMI-2 job-getid",
            Msg::new("job-getid", &[]),
            "job-getid-response",
        )?;
        self.jobid = r
            .get("jobid")
            .filter(|j| !j.is_empty())
            .ok_or_else(|| {
                boot_err(
                    "PMI-2 job-getid",
                    format!("reply {:?} has no jobid", r.body()),
                )
            })?
            .to_owned();
        Ok(())
    }

    /// The job size the server reported in `fullinit`.
    pub fn size(&self) -> u32 {
        self.size
    }

    /// This process's application number (for MPMD launches; 0 otherwise).
    pub fn appnum(&self) -> i32 {
        self.appnum
    }

    /// The job id the server reported (`job-getid`).
    pub fn jobid(&self) -> &str {
        &self.jobid
    }

    /// A job attribute (`info-getjobattr`), e.g. `PMI_process_mapping`; `Ok(None)` when the
    /// server has none.
    pub fn job_attr(&mut self, key: &str) -> Result<Option<String>> {
        check_word("PMI-2 info-getjobattr", "key", key, MAX_KEY)?;
        let r = self.transact(
            "PMI-2 info-getjobattr",
            Msg::new("info-getjobattr", &[("key", key)]),
            "info-getjobattr-response",
        )?;
        Ok(r.found().then(|| r.get("value").unwrap_or("").to_owned()))
    }

    /// Reads `key` from the job's key-value space; `Ok(None)` when it does not exist.
    ///
    /// Before this process's first fence the answer comes from its own puts, without asking
    /// the server: Hydra 4.0.2's server fails an assertion on a `kvs-get` from a process that
    /// has not fenced yet, and ends the job; and before a fence no other rank's put is
    /// visible anyway.
    pub fn try_get(&mut self, key: &str) -> Result<Option<String>> {
        check_word("PMI-2 kvs-get", "key", key, MAX_KEY)?;
        if !self.fenced {
            return Ok(self.unfenced_puts.get(key).cloned());
        }
        self.server_get(key)
    }

    /// `kvs-get` of `key` from the server; `Ok(None)` when it has none.
    fn server_get(&mut self, key: &str) -> Result<Option<String>> {
        let r = self.transact(
            "PMI-2 kvs-get",
            Msg::new("kvs-get", &[("srcid", "-1"), ("key", key)]),
            "kvs-get-response",
        )?;
        Ok(r.found().then(|| r.get("value").unwrap_or("").to_owned()))
    }

    /// Sends `msg`, reads the reply, checks it is `expect` with `rc=0`.
    fn transact(&mut self, call: &'static str, msg: Msg, expect: &str) -> Result<Msg> {
        let body = msg.body();
        let reply = self.exchange(call, msg, expect)?;
        let rc = reply.get("rc").unwrap_or("0").trim();
        if rc != "0" {
            let why = reply
                .get("errmsg")
                .or(reply.get("msg"))
                .unwrap_or("(no message)");
            return Err(boot_err(
                call,
                format!(
                    "the process manager answered rc={rc} ({why}) to {:?}",
                    truncate(&body)
                ),
            ));
        }
        Ok(reply)
    }

    /// Sends `msg`, reads the reply, checks it is `expect` (whatever its `rc`).
    fn exchange(&mut self, call: &'static str, msg: Msg, expect: &str) -> Result<Msg> {
        if self.finalized {
            return Err(boot_err(call, "called after PMI finalize"));
        }
        let framed = msg.frame();
        if framed.len() > LEN_WIDTH + MAX_BODY {
            return Err(Error::new(
                ErrorClass::Arg,
                call,
                format!(
                    "the message is {} bytes, longer than this client's limit of {MAX_BODY}",
                    framed.len() - LEN_WIDTH
                ),
            ));
        }
        self.write(call, &framed)?;
        let body = self.read_msg(call)?;
        let reply = Msg::parse(&body).ok_or_else(|| {
            boot_err(
                call,
                format!(
                    "malformed reply {:?} to {:?} from the process manager",
                    truncate(&body),
                    truncate(&msg.body())
                ),
            )
        })?;
        if reply.cmd != expect {
            return Err(boot_err(
                call,
                format!(
                    "expected cmd={expect} in reply to {:?}, got {:?}",
                    truncate(&msg.body()),
                    truncate(&body)
                ),
            ));
        }
        Ok(reply)
    }

    fn write(&mut self, call: &'static str, text: &str) -> Result<()> {
        if self.debug {
            eprintln!("weft[{}] pmi2> {}", self.rank, text.trim_end());
        }
        // One write per message: servers read a message per read.
        self.conn
            .write_all(text.as_bytes())
            .and_then(|()| self.conn.flush())
            .map_err(|e| Error::os(call, "writing to the process manager (PMI socket)", e))
    }

    /// Reads until `self.buf` holds at least `n` bytes.
    fn fill(&mut self, call: &'static str, n: usize) -> Result<()> {
        while self.buf.len() < n {
            super::read_chunk(&mut self.conn, &mut self.buf, call)?;
        }
        Ok(())
    }

    /// Reads one PMI-1 line (the reply to `init`).
    fn read_line(&mut self, call: &'static str) -> Result<String> {
        loop {
            if let Some(text) = super::take_line(&mut self.buf) {
                if self.debug {
                    eprintln!("weft[{}] pmi2< {}", self.rank, text.trim_end());
                }
                return Ok(text);
            }
            if self.buf.len() > pmi1::MAX_LINE {
                return Err(boot_err(
                    call,
                    format!(
                        "the process manager sent {} bytes without a newline: {:?}",
                        self.buf.len(),
                        truncate(&String::from_utf8_lossy(&self.buf))
                    ),
                ));
            }
            let have = self.buf.len();
            self.fill(call, have + 1)?;
        }
    }

    /// Reads one framed message and returns its body.
    fn read_msg(&mut self, call: &'static str) -> Result<String> {
        self.fill(call, LEN_WIDTH)?;
        let len = parse_len(&self.buf[..LEN_WIDTH])
            .filter(|&n| n <= MAX_BODY)
            .ok_or_else(|| {
                boot_err(
                    call,
                    format!(
                        "bad PMI-2 length prefix {:?} (expected up to 6 digits, at most \
                         {MAX_BODY}); is the server speaking PMI-1?",
                        String::from_utf8_lossy(&self.buf[..LEN_WIDTH])
                    ),
                )
            })?;
        self.fill(call, LEN_WIDTH + len)?;
        let rest = self.buf.split_off(LEN_WIDTH + len);
        let msg = std::mem::replace(&mut self.buf, rest);
        let body = String::from_utf8_lossy(&msg[LEN_WIDTH..]).into_owned();
        if self.debug {
            eprintln!("weft[{}] pmi2< {body}", self.rank);
        }
        Ok(body)
    }
}

/// Refuses keys the process manager reserves, and keys or values PMI-2 cannot carry.
fn check_put(call: &'static str, key: &str, value: &str) -> Result<()> {
    check_word(call, "key", key, MAX_KEY)?;
    if key.starts_with(RESERVED_PREFIX) || key.contains('=') {
        return Err(Error::new(
            ErrorClass::Arg,
            call,
            format!(
                "key {key:?} is not allowed: keys must not start with {RESERVED_PREFIX:?} \
                 (reserved for the process manager) or contain `=`"
            ),
        ));
    }
    check_word(call, "value", value, MAX_VALUE)
}

impl Pmi for Pmi2 {
    fn put(&mut self, key: &str, value: &str) -> Result<()> {
        check_put("PMI-2 kvs-put", key, value)?;
        self.transact(
            "PMI-2 kvs-put",
            Msg::new("kvs-put", &[("key", key), ("value", value)]),
            "kvs-put-response",
        )?;
        if !self.fenced {
            self.unfenced_puts.insert(key.to_owned(), value.to_owned());
        }
        Ok(())
    }

    /// `kvs-fence`, then a `kvs-get`, which makes the fence a barrier everywhere: Hydra
    /// (4.0.2) answers `kvs-fence` at once and holds the next `kvs-get` until every rank has
    /// fenced; Slurm answers the fence only when all have entered it, and the get then costs
    /// one round trip. Callers (the shared-memory set-up) rely on the barrier.
    fn fence(&mut self) -> Result<()> {
        self.transact(
            "PMI-2 kvs-fence",
            Msg::new("kvs-fence", &[]),
            "kvs-fence-response",
        )?;
        // The key is never put (and found or not, rc or not, only the reply's arrival counts).
        self.exchange(
            "PMI-2 kvs-fence",
            Msg::new("kvs-get", &[("srcid", "-1"), ("key", FENCE_KEY)]),
            "kvs-get-response",
        )?;
        self.fenced = true;
        self.unfenced_puts = HashMap::new();
        Ok(())
    }

    fn get(&mut self, key: &str) -> Result<String> {
        self.try_get(key)?.ok_or_else(|| {
            boot_err(
                "PMI-2 kvs-get",
                format!(
                    "key {key:?} is not in job {:?}'s key-value space (was it put before the \
                     last fence?)",
                    self.jobid
                ),
            )
        })
    }

    fn abort(&mut self, code: i32, msg: &str) -> ! {
        eprintln!(
            "weft: rank {} aborting the job with code {code}: {msg}",
            self.rank
        );
        // PMI-2 abort carries no exit code in Hydra's and Slurm's servers; `;` would end the
        // field and an empty value is not allowed.
        let text: String = msg
            .chars()
            .map(|c| if c == ';' || c.is_control() { ',' } else { c })
            .take(MAX_VALUE)
            .collect();
        let text = if text.is_empty() {
            "abort".into()
        } else {
            text
        };
        let code_s = code.to_string();
        let m = Msg::new(
            "abort",
            &[("isworld", "TRUE"), ("exitcode", &code_s), ("msg", &text)],
        );
        // No reply comes: the launcher ends the job. Exit ourselves in case it does not.
        let _ = self.write("PMI-2 abort", &m.frame());
        std::process::exit(if code == 0 { 1 } else { code })
    }

    fn finalize(&mut self) -> Result<()> {
        if self.finalized {
            return Ok(());
        }
        self.transact(
            "PMI-2 finalize",
            Msg::new("finalize", &[]),
            "finalize-response",
        )?;
        self.finalized = true;
        Ok(())
    }

    fn protocol(&self) -> &'static str {
        "pmi-2"
    }

    /// Asks the server even before the first fence: a preput key exists, so Hydra finds it
    /// without the check that fails for a process that has not fenced (see [`Pmi2::try_get`]).
    fn get_preput(&mut self, key: &str) -> Result<String> {
        check_word("PMI-2 kvs-get", "key", key, MAX_KEY)?;
        self.server_get(key)?.ok_or_else(|| {
            boot_err(
                "PMI-2 kvs-get",
                format!("key {key:?} was not put in job {:?}'s key-value space by its spawner", self.jobid),
            )
        })
    }

    fn spawn(&mut self, cmds: &[SpawnCommand], preput: &[(String, String)]) -> Result<()> {
        let msg = dynamic::spawn_msg(cmds, preput)?;
        let reply = self.exchange("PMI-2 spawn", msg, "spawn-response")?;
        refusal(&reply, "spawn", ErrorClass::Spawn).map_or(Ok(()), Err)
    }

    fn name_service(&mut self, call: NameCall<'_>) -> Result<Option<String>> {
        let (msg, expect, name, class) = dynamic::name_msg(call)?;
        let reply = self.exchange(name, msg, expect)?;
        if let Some(e) = refusal(&reply, name, class) {
            return Err(e);
        }
        Ok(reply.get("port").map(str::to_owned))
    }
}

/// The error of a reply with a nonzero `rc` (a lookup that found nothing has `found=FALSE`).
fn refusal(reply: &Msg, call: &'static str, class: ErrorClass) -> Option<Error> {
    let rc = reply.get("rc").unwrap_or("0").trim();
    let not_found = reply.get("found").is_some_and(|f| f.eq_ignore_ascii_case("false"));
    (rc != "0" || not_found).then(|| {
        let why = reply.get("errmsg").unwrap_or("no reason given").replace('_', " ");
        Error::new(class, call, format!("the process manager refused (rc={rc}): {why}"))
    })
}

/// Completes bootstrap on an initialized client: checks the size against `PMI_SIZE` (when
/// the launcher set one), then job id and node map.
pub fn finish(mut pmi: Pmi2, env_size: u32) -> Result<Boot> {
    let (rank, size) = (pmi.rank, pmi.size);
    if size != env_size {
        return Err(boot_err(
            "PMI-2 fullinit",
            format!("the process manager says the job has {size} ranks, but PMI_SIZE={env_size}"),
        ));
    }
    let job_id = super::job_id_from(pmi.jobid());
    let mapping = pmi.job_attr("PMI_process_mapping")?.unwrap_or_default();
    let node_of = super::node_map(&mut pmi, &mapping, rank, size)?;
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

mod dynamic;
#[cfg(test)]
mod tests;
