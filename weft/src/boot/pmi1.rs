//! PMI-1 ("simple") wire-protocol client. (Being written: see the boot work item.)

use super::Boot;
use crate::error::{Error, Result};

/// Connects through `PMI_FD` (or `PMI_PORT` + `PMI_ID`) and runs the PMI-1 handshake.
pub fn connect_from_env() -> Result<Boot> {
    Err(Error::unsupported(
        "initialize",
        "PMI-1 client not built yet",
    ))
}
