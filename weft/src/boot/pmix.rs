//! PMIx client (cargo feature `pmix`): for launchers that speak only PMIx, such as
//! `srun --mpi=pmix` and Open MPI's `mpirun`. Chosen when `PMIX_NAMESPACE`/`PMIX_RANK` are set
//! and no PMI-1/PMI-2 socket is offered. The calls go through libpmix ([`crate::sys::pmix`]).
//!
//! Mapping to [`Pmi`]: `put` is `PMIx_Put` (global scope); `fence` is `PMIx_Commit` +
//! `PMIx_Fence` collecting the data; `get` is `PMIx_Get` from the rank the key ends with
//! (Weft's per-rank keys name their owner; job-wide ones are rank 0's), else from
//! `PMIX_RANK_UNDEF` (any rank). Node ids from `PMIX_HOSTNAME` per rank.

use super::{Boot, Pmi};
use crate::error::{Error, ErrorClass, Result};
use crate::sys::pmix::{self as ffi, Got, Proc};

/// A PMIx client; one per process (the library is process-global).
pub struct Pmix {
    me: Proc,
    nspace: String,
    finalized: bool,
}

fn boot_err(call: &'static str, detail: impl Into<String>) -> Error {
    Error::new(ErrorClass::Boot, call, detail)
}

impl Pmix {
    /// Job-level or per-rank number `key`; `Ok(None)` when the server does not have it.
    fn number(&self, rank: u32, key: &str) -> Result<Option<u64>> {
        match ffi::get(&Proc::new(&self.nspace, rank), key, false)
            .map_err(|e| boot_err("PMIx_Get", format!("{key} of rank {rank}: {e}")))?
        {
            None => Ok(None),
            Some(Got::Number(n)) => Ok(Some(n)),
            Some(other) => Err(boot_err(
                "PMIx_Get",
                format!("{key} of rank {rank} is {other:?}, expected a number"),
            )),
        }
    }
}

impl Pmi for Pmix {
    fn put(&mut self, key: &str, value: &str) -> Result<()> {
        ffi::put_string(key, value).map_err(|e| {
            Error::new(
                ErrorClass::Boot,
                "PMIx_Put",
                format!("key {key:?} ({} bytes): {e}", value.len()),
            )
        })
    }

    fn fence(&mut self) -> Result<()> {
        ffi::commit_and_fence().map_err(|e| boot_err("PMIx fence", e))
    }

    fn get(&mut self, key: &str) -> Result<String> {
        // Ask the owner the key names (rank 0, which puts Weft's job-wide keys such as the
        // TCP secret, when it names none), then PMIX_RANK_UNDEF ("any rank"), which Open
        // MPI 4's server cannot answer. All in the local store only, where the collecting
        // fence put everything (a miss would otherwise wait for the server's timeout).
        let owner = owner_of(key).unwrap_or(0);
        let mut found = ffi::get(&Proc::new(&self.nspace, owner), key, true)
            .ok()
            .flatten();
        if found.is_none() {
            let any = Proc::new(&self.nspace, ffi::RANK_UNDEF);
            found = ffi::get(&any, key, true)
                .map_err(|e| boot_err("PMIx_Get", format!("key {key:?}: {e}")))?;
        }
        match found {
            Some(Got::Text(v)) => Ok(v),
            Some(other) => Err(boot_err(
                "PMIx_Get",
                format!("key {key:?} holds {other:?}, not a string"),
            )),
            None => Err(boot_err(
                "PMIx_Get",
                format!(
                    "key {key:?} is not in namespace {:?} (was it put before the last fence?)",
                    self.nspace
                ),
            )),
        }
    }

    fn abort(&mut self, code: i32, msg: &str) -> ! {
        eprintln!(
            "weft: rank {} aborting the job with code {code}: {msg}",
            self.me.rank()
        );
        let _ = ffi::abort(code, msg);
        std::process::exit(if code == 0 { 1 } else { code })
    }

    fn finalize(&mut self) -> Result<()> {
        if self.finalized {
            return Ok(());
        }
        let rc = ffi::finalize();
        if rc != ffi::SUCCESS {
            return Err(boot_err("PMIx_Finalize", ffi::error_string(rc)));
        }
        self.finalized = true;
        Ok(())
    }

    fn protocol(&self) -> &'static str {
        "pmix"
    }
}

/// The rank a key names as its owner: PMIx stores data per rank and PMI's key space has no
/// owner, so Weft's per-rank keys end with the putting rank (`shm-3`, `weft.host.3`), as
/// legacy PMI keys did (`pmix_common.h` on `PMIX_RANK_UNDEF`); job-wide keys are rank 0's.
fn owner_of(key: &str) -> Option<u32> {
    let (_, tail) = key.rsplit_once(['.', '-', '_'])?;
    tail.parse().ok()
}

/// Initializes PMIx from the environment the launcher set and completes bootstrap.
pub fn connect_from_env() -> Result<Boot> {
    let me = ffi::init().map_err(|rc| {
        boot_err(
            "PMIx_Init",
            format!(
                "{} (PMIX_NAMESPACE={:?}, PMIX_RANK={:?})",
                ffi::error_string(rc),
                std::env::var("PMIX_NAMESPACE").unwrap_or_default(),
                std::env::var("PMIX_RANK").unwrap_or_default()
            ),
        )
    })?;
    let mut pmi = Pmix {
        nspace: me.nspace(),
        me,
        finalized: false,
    };
    let rank = me.rank();
    let size = pmi
        .number(ffi::RANK_WILDCARD, "pmix.job.size")?
        .and_then(|n| u32::try_from(n).ok())
        .filter(|&n| n > rank)
        .ok_or_else(|| {
            boot_err(
                "PMIx_Get",
                format!(
                    "pmix.job.size is missing or not above this rank ({rank}) in namespace {:?}",
                    pmi.nspace
                ),
            )
        })?;
    let job_id = super::job_id_from(&pmi.nspace);
    let node_of = node_ids(&mut pmi, rank, size)?;
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

/// Which node each rank is on: `PMIX_HOSTNAME` of every rank (Slurm answers with its node
/// names, so two slurmd "nodes" on one host stay apart), else `PMIX_NODEID` (Slurm has it
/// only for local ranks), else an exchange of host names. Servers answer alike for every
/// rank, so all ranks take the same branch.
fn node_ids(pmi: &mut Pmix, rank: u32, size: u32) -> Result<Vec<u32>> {
    let mut hosts = Vec::with_capacity(size as usize);
    for r in 0..size {
        match ffi::get(&Proc::new(&pmi.nspace, r), "pmix.hname", false) {
            Ok(Some(Got::Text(h))) if !h.is_empty() => hosts.push(h),
            _ => break,
        }
    }
    if hosts.len() == size as usize {
        return Ok(super::mapping::nodes_from_hostnames(&hosts));
    }
    let mut ids = Vec::with_capacity(size as usize);
    for r in 0..size {
        match pmi.number(r, "pmix.nodeid")? {
            Some(id) => ids.push(u32::try_from(id).unwrap_or(u32::MAX)),
            None => return super::node_map(pmi, "", rank, size),
        }
    }
    Ok(ids)
}

#[cfg(test)]
mod tests {
    #[test]
    fn owner_from_the_key_suffix() {
        assert_eq!(super::owner_of("shm-3"), Some(3));
        assert_eq!(super::owner_of("weft.host.12"), Some(12));
        assert_eq!(super::owner_of("ring_0"), Some(0));
        assert_eq!(super::owner_of("weft.secret"), None);
        assert_eq!(super::owner_of("plain"), None);
    }
}
