//! Process-management bootstrap: who am I, how many are we, who shares my node, and a
//! key-value space with a fence, through the PMI-2 or PMI-1 wire protocol (what `weft run`,
//! MPICH's Hydra and Slurm's pmi2 plugin serve), or a singleton when started alone.
//!
//! Which protocol: `WEFT_PMI` (`auto` by default) — see [`select`].

pub mod mapping;
pub mod pmi1;
pub mod pmi2;
#[cfg(feature = "pmix")]
pub mod pmix;
pub mod select;
pub mod singleton;

use crate::error::Result;
use crate::sys::hostname;
use std::cell::RefCell;
use std::rc::Rc;

/// A client of a process manager.
pub trait Pmi {
    /// Publishes `key = value` (visible to others after the next [`Pmi::fence`]).
    fn put(&mut self, key: &str, value: &str) -> Result<()>;
    /// Collective: every rank's puts become visible to every rank.
    fn fence(&mut self) -> Result<()>;
    /// Reads a key another rank put before the last fence.
    fn get(&mut self, key: &str) -> Result<String>;
    /// Reads a key the spawner of this job put in its key-value space before starting it
    /// (a spawn's preput pairs), which may be read before this process's first fence.
    fn get_preput(&mut self, key: &str) -> Result<String> {
        self.get(key)
    }
    /// Asks the process manager to end the whole job with `code`. Does not return.
    fn abort(&mut self, code: i32, msg: &str) -> !;
    /// Tells the process manager this rank finished cleanly.
    fn finalize(&mut self) -> Result<()>;
    /// Name of the protocol, for diagnostics (`"pmi-1"`, `"pmi-2"`, `"singleton"`).
    fn protocol(&self) -> &'static str;
    /// Runs a call of the name service; `Ok(Some(port))` for a lookup.
    fn name_service(&mut self, call: NameCall<'_>) -> Result<Option<String>> {
        Err(crate::Error::unsupported(
            match call {
                NameCall::Publish { .. } => "publish_name",
                NameCall::Unpublish { .. } => "unpublish_name",
                NameCall::Lookup { .. } => "lookup_name",
            },
            format!(
                "the process manager ({}) offers no name service to weft: start the job with \
                 weft run",
                self.protocol()
            ),
        ))
    }
    /// Asks the process manager to start a new job running `cmds` (their processes are its
    /// world, command by command) whose key-value space starts with `preput`. Returns once
    /// the process manager has started it (or refused, with its reason).
    fn spawn(&mut self, _cmds: &[SpawnCommand], _preput: &[(String, String)]) -> Result<()> {
        Err(crate::Error::unsupported(
            "spawn",
            format!(
                "the process manager ({}) offers no spawn to weft: start the job with weft run",
                self.protocol()
            ),
        ))
    }
}

/// MPI's name service through the process manager (`weft run` keeps one table for the
/// universe): `publish` a service's port, `lookup` it, `unpublish` it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)] // the fields are the variants' documented arguments
pub enum NameCall<'a> {
    /// Publishes `service` at `port`.
    Publish { service: &'a str, port: &'a str },
    /// Withdraws `service`.
    Unpublish { service: &'a str },
    /// Finds the port of `service`.
    Lookup { service: &'a str },
}

/// One command of a spawn: `maxprocs` processes of `program` with `args`, placed as `info`
/// says (the process manager's keys: `wdir`, `path`, `host`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SpawnCommand {
    /// The program: a path, or a name searched in `PATH`.
    pub program: String,
    /// Its arguments (not its name).
    pub args: Vec<String>,
    /// How many processes run it.
    pub maxprocs: u32,
    /// Where and how, as the process manager's info keys say.
    pub info: Vec<(String, String)>,
}

/// Everything bootstrap learned, and the client for later key-value traffic.
pub struct Boot {
    /// This process's world rank.
    pub rank: u32,
    /// Number of ranks in the job.
    pub size: u32,
    /// Node id of every rank (index = world rank). Ranks with equal ids share a node.
    pub node_of: Vec<u32>,
    /// A string unique to this job (used to name shared-memory segments).
    pub job_id: String,
    /// The process-manager client.
    pub pmi: Box<dyn Pmi>,
    /// This job's first universe rank ([`universe_base`]), set by [`Boot::from_env`].
    pub universe_base: u32,
    /// Rank 0's copy of the job secret it found or put in the key-value space at start-up
    /// (`fabric::tcp::ensure_job_secret`); other ranks read it from there when they need it.
    pub secret: Option<[u8; 32]>,
}

impl std::fmt::Debug for Boot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Boot")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .field("node_of", &self.node_of)
            .field("job_id", &self.job_id)
            .field("pmi", &self.pmi.protocol())
            .finish()
    }
}

/// A process-manager client with several users: the runtime (through [`Boot::pmi`], which
/// forwards to it) and the TCP transport, which reads a peer's address on first contact.
pub type SharedPmi = Rc<RefCell<Box<dyn Pmi>>>;

/// The client left in [`Boot::pmi`] once it is shared: forwards every call.
struct Forward(SharedPmi);

impl Pmi for Forward {
    fn put(&mut self, key: &str, value: &str) -> Result<()> {
        self.0.borrow_mut().put(key, value)
    }
    fn fence(&mut self) -> Result<()> {
        self.0.borrow_mut().fence()
    }
    fn get(&mut self, key: &str) -> Result<String> {
        self.0.borrow_mut().get(key)
    }
    fn get_preput(&mut self, key: &str) -> Result<String> {
        self.0.borrow_mut().get_preput(key)
    }
    fn abort(&mut self, code: i32, msg: &str) -> ! {
        match self.0.try_borrow_mut() {
            Ok(mut pmi) => pmi.abort(code, msg),
            // A panic in the middle of a call to the process manager: its connection is in
            // an unknown state, so end this process; the launcher reports the rank's death.
            Err(_) => {
                eprintln!("weft: {msg} (exit code {code})");
                std::process::abort()
            }
        }
    }
    fn finalize(&mut self) -> Result<()> {
        self.0.borrow_mut().finalize()
    }
    fn protocol(&self) -> &'static str {
        self.0.borrow().protocol()
    }
    fn spawn(&mut self, cmds: &[SpawnCommand], preput: &[(String, String)]) -> Result<()> {
        self.0.borrow_mut().spawn(cmds, preput)
    }
    fn name_service(&mut self, call: NameCall<'_>) -> Result<Option<String>> {
        self.0.borrow_mut().name_service(call)
    }
}

impl Boot {
    /// Shares the process-manager client; `self.pmi` goes on working (it forwards to it).
    pub fn share_pmi(&mut self) -> SharedPmi {
        // A placeholder for the moment the client is moved (an empty table, no I/O).
        let own = std::mem::replace(&mut self.pmi, Box::new(singleton::Singleton::default()));
        let shared = Rc::new(RefCell::new(own));
        self.pmi = Box::new(Forward(shared.clone()));
        shared
    }

    /// Connects to the process manager named by the environment (`PMI_FD` or `PMI_PORT`;
    /// PMI-2 or PMI-1 as [`select`] decides; else PMIx through `PMIX_NAMESPACE`/`PMIX_RANK`
    /// when built with the `pmix` feature), or starts a singleton when there is none.
    pub fn from_env() -> Result<Boot> {
        let mut boot = Self::connect()?;
        boot.universe_base = universe_base(&mut *boot.pmi);
        Ok(boot)
    }

    fn connect() -> Result<Boot> {
        if std::env::var_os("PMI_FD").is_some() || std::env::var_os("PMI_PORT").is_some() {
            return select::connect_from_env();
        }
        #[cfg(feature = "pmix")]
        if std::env::var_os("PMIX_NAMESPACE").is_some() || std::env::var_os("PMIX_RANK").is_some() {
            return pmix::connect_from_env();
        }
        singleton::start()
    }

    /// World ranks on this rank's node, in increasing order.
    pub fn local_ranks(&self) -> Vec<u32> {
        let me = self.node_of[self.rank as usize];
        (0..self.size)
            .filter(|&r| self.node_of[r as usize] == me)
            .collect()
    }
}

/// Whether the process manager started this job for another's spawn (`PMI_SPAWNED=1`, which
/// Hydra and `weft run` set).
pub fn spawned() -> bool {
    std::env::var("PMI_SPAWNED").is_ok_and(|v| v.trim() == "1")
}

/// The key under which a spawning job tells the new job its first universe rank, for
/// process managers other than `weft run` (which sets `WEFT_UNIVERSE_BASE` instead).
pub const UNIVERSE_BASE_KEY: &str = "weft-universe-base";

/// This job's first universe rank: 0 for a job a process manager started, else what its
/// spawner chose: `WEFT_UNIVERSE_BASE` for a job `weft run` started for an `MPI_Comm_spawn`
/// (the number of processes it had started before), or, under another process manager
/// (Hydra), the value of [`UNIVERSE_BASE_KEY`] the parents put in the new job's key-value
/// space ([`spawn_universe_base`]). Processes of different jobs name each other by universe
/// rank (job base + world rank).
pub fn universe_base(pmi: &mut dyn Pmi) -> u32 {
    let from_env = std::env::var("WEFT_UNIVERSE_BASE").ok();
    let value = match from_env {
        Some(v) => Some(v),
        None if spawned() => pmi.get_preput(UNIVERSE_BASE_KEY).ok(),
        None => None,
    };
    value.and_then(|v| v.trim().parse().ok()).unwrap_or(0)
}

/// The first universe rank a job spawned under a process manager other than `weft run`
/// gets: a random multiple of 256 in [2^24, 2^31), so that jobs spawned by different parents,
/// which cannot coordinate, rarely overlap; when two do, the processes that meet both find
/// out and fail the join with a clear error (`comm::dynamic`). (`weft run` gives each job the
/// next free range instead.)
pub fn spawn_universe_base() -> Result<u32> {
    let mut b = [0u8; 4];
    crate::sys::random_bytes(&mut b).map_err(|e| crate::Error::os("spawn", "getrandom", e))?;
    let r = u32::from_le_bytes(b) % ((1 << 31) - (1 << 24));
    Ok(((1 << 24) + r) & !0xff)
}

/// The job id for shared-memory names: `WEFT_JOB_ID` when the launcher set it, else what the
/// process manager calls the job (kvsname or jobid), sanitized.
pub(crate) fn job_id_from(pm_name: &str) -> String {
    match std::env::var("WEFT_JOB_ID") {
        Ok(id) if !id.trim().is_empty() => pmi1::sanitize_job_id(id.trim()),
        _ => pmi1::sanitize_job_id(pm_name),
    }
}

/// Which node each rank is on, from the server's `PMI_process_mapping` (`mapping`, empty when
/// it has none), else by an exchange of host names through `pmi` (collective: every rank
/// takes the same branch, since all see the same mapping).
pub fn node_map(pmi: &mut dyn Pmi, mapping: &str, rank: u32, size: u32) -> Result<Vec<u32>> {
    if let Some(nodes) = mapping::parse(mapping, size)? {
        return Ok(nodes);
    }
    pmi.put(&format!("weft.host.{rank}"), &hex(hostname().as_bytes()))?;
    pmi.fence()?;
    let mut hosts = Vec::with_capacity(size as usize);
    for r in 0..size {
        hosts.push(pmi.get(&format!("weft.host.{r}"))?);
    }
    Ok(mapping::nodes_from_hostnames(&hosts))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Reads one chunk from the process manager's socket into `buf`, with the errors both PMI
/// clients report (`call` names the PMI operation under way).
pub(crate) fn read_chunk(
    conn: &mut impl std::io::Read,
    buf: &mut Vec<u8>,
    call: &'static str,
) -> Result<()> {
    let mut chunk = [0u8; 4096];
    loop {
        match conn.read(&mut chunk) {
            Ok(0) => {
                return Err(crate::Error::new(
                    crate::ErrorClass::Boot,
                    call,
                    "the process manager closed the PMI connection (did the launcher end \
                     the job?)",
                ))
            }
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                return Ok(());
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                return Err(crate::Error::os(
                    call,
                    "reading from the process manager (PMI socket)",
                    e,
                ))
            }
        }
    }
}

/// Takes the first newline-terminated line (newline included) out of `buf`, if one is there.
pub(crate) fn take_line(buf: &mut Vec<u8>) -> Option<String> {
    let pos = buf.iter().position(|&b| b == b'\n')?;
    let rest = buf.split_off(pos + 1);
    let line = std::mem::replace(buf, rest);
    Some(String::from_utf8_lossy(&line).into_owned())
}
