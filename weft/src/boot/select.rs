//! Which PMI wire protocol to speak on the connection the launcher gave us.
//!
//! `WEFT_PMI=auto` (the default) offers PMI-2 first (`cmd=init pmi_version=2`): Hydra and
//! Slurm's pmi2 plugin accept it; a server that answers with an error or another version
//! (`weft run` serves PMI-1 only and answers `pmi_version=1 rc=-1`) gets a PMI-1 `init` on
//! the same connection. `WEFT_PMI=1` skips the offer; `WEFT_PMI=2` fails when the server
//! refuses it. A spawned job (`PMI_SPAWNED=1`) skips it too unless `WEFT_PMI=2` (see
//! [`connect_from_env`]).

use super::pmi1::{self, Pmi1, Stream};
use super::pmi2::{self, Init, Pmi2};
use super::Boot;
use crate::error::{Error, Result};
use crate::tunables::PmiChoice;

/// Connects through `PMI_FD` or `PMI_PORT` and speaks the protocol `WEFT_PMI` asks for.
pub fn connect_from_env() -> Result<Boot> {
    let mut choice = PmiChoice::from_env()?;
    // A spawned job speaks PMI-1 unless told otherwise: Hydra's PMI-2 server (4.0.2, and
    // MPICH's since) counts `kvs-fence`s in one counter for every job of the mpiexec and
    // releases a job's pending gets only when that count is a multiple of the job's size, so
    // a spawned job's fences (which end in such a get) can wait forever; its PMI-1 barrier
    // is per job.
    if choice == PmiChoice::Auto && super::spawned() {
        choice = PmiChoice::V1;
    }
    let (conn, rank, size) = pmi1::connect_env()?;
    start(conn, rank, size, choice)
}

/// The client on `conn` for rank `rank` of `size`, by `choice`, and bootstrap completed.
pub fn start(conn: Box<dyn Stream>, rank: u32, size: u32, choice: PmiChoice) -> Result<Boot> {
    match negotiate(conn, rank, choice)? {
        Either::V1(pmi) => pmi1::finish(pmi, rank, size),
        Either::V2(pmi) => pmi2::finish(pmi, size),
    }
}

/// A handshaken client of either protocol.
pub enum Either {
    /// PMI-1.
    V1(Pmi1),
    /// PMI-2.
    V2(Pmi2),
}

/// Runs the handshake `choice` asks for on `conn`.
pub fn negotiate(conn: Box<dyn Stream>, rank: u32, choice: PmiChoice) -> Result<Either> {
    if choice == PmiChoice::V1 {
        return Ok(Either::V1(Pmi1::handshake(conn, rank)?));
    }
    match Pmi2::init(conn, rank)? {
        Init::Accepted(pmi) => Ok(Either::V2(pmi)),
        Init::Refused(conn, _) if choice == PmiChoice::Auto => {
            Ok(Either::V1(Pmi1::handshake(conn, rank)?))
        }
        Init::Refused(_, reply) => Err(Error::unsupported(
            "PMI-2 init",
            format!(
                "WEFT_PMI=2, but the process manager refused PMI-2: it answered {reply} \
                 (unset WEFT_PMI or set it to auto or 1 to use PMI-1)"
            ),
        )),
    }
}
