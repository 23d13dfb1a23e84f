//! The argument checks the collectives share: counts and displacements of partitioned
//! buffers, and sizes that must agree. Each error names the call and the values.

use super::Layout;
use crate::error::{Error, ErrorClass, Result};

/// A partitioned buffer's counts and displacements, copied (before the buffer is borrowed
/// mutably for its layout).
pub(super) fn counts_displs<P: ?Sized + crate::api::datatype::Partitioned>(
    p: &P,
) -> (
    Vec<crate::api::datatype::Count>,
    Vec<crate::api::datatype::Count>,
) {
    (p.counts().to_vec(), p.displs().to_vec())
}

pub(super) fn count_error(call: &'static str, detail: String) -> Error {
    Error::new(ErrorClass::Count, call, detail)
}

/// `(byte offset, byte length)` of each member's part of a partitioned buffer whose layout
/// is `l`, checked against the member count and the buffer.
pub(super) fn parts(
    call: &'static str,
    what: &str,
    n: usize,
    l: &Layout<'_>,
    counts: &[crate::api::datatype::Count],
    displs: &[crate::api::datatype::Count],
) -> Result<Vec<(usize, usize)>> {
    if counts.len() != n || displs.len() != n {
        return Err(count_error(
            call,
            format!(
                "the {what} has {} counts and {} displacements for {n} members",
                counts.len(),
                displs.len()
            ),
        ));
    }
    let size = l.map.size();
    counts
        .iter()
        .zip(displs)
        .enumerate()
        .map(|(j, (&c, &d))| {
            if c == 0 {
                // An empty part touches no memory, wherever it is said to start.
                return Ok((0, 0));
            }
            if c < 0 || d < 0 || (c as usize + d as usize) > l.count {
                return Err(count_error(
                    call,
                    format!(
                        "part {j} of the {what} ({c} elements at {d}) is not inside its {} \
                         elements",
                        l.count
                    ),
                ));
            }
            Ok((d as usize * size, c as usize * size))
        })
        .collect()
}

/// Checks that what member `me` sends itself fits what it receives from itself (a
/// member's own part never travels, so no receive would catch the difference).
pub(super) fn check_own_part(
    call: &'static str,
    me: usize,
    sent: usize,
    expected: usize,
) -> Result<()> {
    if sent != expected {
        return Err(count_error(
            call,
            format!(
                "member {me} sends itself {sent} bytes where its receive part for itself holds \
                 {expected} bytes"
            ),
        ));
    }
    Ok(())
}

/// Checks that `got` bytes are what `want` bytes should be.
pub(super) fn check_len(
    call: &'static str,
    what: &str,
    got: usize,
    want: usize,
    why: &str,
) -> Result<()> {
    if got != want {
        return Err(count_error(
            call,
            format!("the {what} has {got} bytes of data where {want} are needed ({why})"),
        ));
    }
    Ok(())
}
