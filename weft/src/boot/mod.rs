//! Process-management bootstrap: who am I, how many are we, who shares my node, and a
//! key-value space with a fence, through the PMI-1 wire protocol (what `weft run`, MPICH's
//! Hydra and Slurm's pmi2 plugin serve), or a singleton when started alone.

pub mod mapping;
pub mod pmi1;
pub mod singleton;

use crate::error::Result;

/// A client of a process manager.
pub trait Pmi {
    /// Publishes `key = value` (visible to others after the next [`Pmi::fence`]).
    fn put(&mut self, key: &str, value: &str) -> Result<()>;
    /// Collective: every rank's puts become visible to every rank.
    fn fence(&mut self) -> Result<()>;
    /// Reads a key another rank put before the last fence.
    fn get(&mut self, key: &str) -> Result<String>;
    /// Asks the process manager to end the whole job with `code`. Does not return.
    fn abort(&mut self, code: i32, msg: &str) -> !;
    /// Tells the process manager this rank finished cleanly.
    fn finalize(&mut self) -> Result<()>;
    /// Name of the protocol, for diagnostics (`"pmi-1"`, `"singleton"`).
    fn protocol(&self) -> &'static str;
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

impl Boot {
    /// Connects to the process manager named by the environment (PMI-1 through `PMI_FD` or
    /// `PMI_PORT`), or starts a singleton when there is none.
    pub fn from_env() -> Result<Boot> {
        if std::env::var_os("PMI_FD").is_some() || std::env::var_os("PMI_PORT").is_some() {
            pmi1::connect_from_env()
        } else {
            singleton::start()
        }
    }

    /// World ranks on this rank's node, in increasing order.
    pub fn local_ranks(&self) -> Vec<u32> {
        let me = self.node_of[self.rank as usize];
        (0..self.size)
            .filter(|&r| self.node_of[r as usize] == me)
            .collect()
    }
}
