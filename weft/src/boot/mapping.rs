//! `PMI_process_mapping` parsing: which node each rank lives on.

use crate::error::{Error, ErrorClass, Result};

/// Parses `(vector,(start,nnodes,ppn),...)` into the node id of each of `size` ranks.
/// Returns `Ok(None)` for an empty mapping (unknown: exchange hostnames instead).
pub fn parse(mapping: &str, size: u32) -> Result<Option<Vec<u32>>> {
    let _ = size;
    if mapping.trim().is_empty() {
        return Ok(None);
    }
    Err(Error::new(
        ErrorClass::Boot,
        "PMI_process_mapping",
        "parser not built yet",
    ))
}
