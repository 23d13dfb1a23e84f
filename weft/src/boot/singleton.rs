//! A rank started without a process manager: size 1, rank 0, a local key-value table.

use super::{Boot, Pmi};
use crate::error::{Error, ErrorClass, Result};
use std::collections::HashMap;

/// The singleton "process manager": a table in this process.
#[derive(Default)]
pub struct Singleton {
    kvs: HashMap<String, String>,
}

impl Pmi for Singleton {
    fn put(&mut self, key: &str, value: &str) -> Result<()> {
        self.kvs.insert(key.to_owned(), value.to_owned());
        Ok(())
    }
    fn fence(&mut self) -> Result<()> {
        Ok(())
    }
    fn get(&mut self, key: &str) -> Result<String> {
        self.kvs.get(key).cloned().ok_or_else(|| {
            Error::new(
                ErrorClass::Boot,
                "PMI get",
                format!("key {key:?} was never put (singleton)"),
            )
        })
    }
    fn abort(&mut self, code: i32, msg: &str) -> ! {
        eprintln!("weft: rank 0 (singleton) aborted with code {code}: {msg}");
        std::process::exit(if code == 0 { 1 } else { code })
    }
    fn finalize(&mut self) -> Result<()> {
        Ok(())
    }
    fn protocol(&self) -> &'static str {
        "singleton"
    }
}

/// Starts a singleton, refusing when the environment says a launcher we do not speak started us.
pub fn start() -> Result<Boot> {
    if std::env::var_os("PMIX_RANK").is_some() || std::env::var_os("PMIX_NAMESPACE").is_some() {
        return Err(Error::unsupported(
            "initialize",
            "started by a PMIx launcher (PMIX_RANK/PMIX_NAMESPACE set), which this build does not \
             speak; build weft with the `pmix` feature, or use `weft run`, `mpiexec.hydra` or \
             `srun --mpi=pmi2`",
        ));
    }
    if let Ok(n) = std::env::var("SLURM_STEP_NUM_TASKS") {
        if n.trim().parse::<u32>().is_ok_and(|n| n > 1) {
            return Err(Error::new(
                ErrorClass::Boot,
                "initialize",
                format!(
                    "SLURM_STEP_NUM_TASKS={n} but no PMI was offered; run with `srun --mpi=pmi2`"
                ),
            ));
        }
    }
    let job_id = format!("s{}", std::process::id());
    Ok(Boot {
        rank: 0,
        size: 1,
        node_of: vec![0],
        job_id,
        pmi: Box::new(Singleton::default()),
        universe_base: 0,
        secret: None,
    })
}
