//! Reduce-scatter with a count per member (`MPI_Reduce_scatter`; rsmpi has only the block
//! form): part j of every member's send buffer, reduced over all members, goes to member j.
//! The same algorithms as the block form (`coll::reduce`), with a size per block.

use super::start::{check_call, elem_of, start, Buffers, Called, Started};
use super::{check_len, input, output, parts, Layout, Operation};
use crate::api::datatype::Count;
use crate::coll::algorithm;
use crate::comm::CommData;
use crate::error::Result;

/// # Safety
/// `s` and `r` are layouts of buffers borrowed (`r` mutably) until the returned collective
/// completes; the operation lives as long.
pub(super) unsafe fn plan_reduce_scatter_varcount<O: Operation>(
    c: &CommData,
    s: &Layout<'_>,
    (counts, displs): (&[Count], &[Count]),
    r: &Layout<'_>,
    op: &O,
) -> Result<Started> {
    const CALL: &str = "reduce_scatter_varcount_into";
    let n = c.peers().size();
    let blocks = parts(CALL, "send buffer", n, s, counts, displs)?;
    if c.is_inter() {
        let kind = super::Reduce::ScatterBlock;
        // SAFETY: the caller's promise.
        return unsafe { super::inter::plan_reduction(c, CALL, kind, s, r, Some(blocks), op) };
    }
    let (sl, rl) = (s.data_len(), r.data_len());
    check_len(
        CALL,
        "receive buffer",
        rl,
        blocks[c.rank as usize].1,
        "this member's count",
    )?;
    let red = op.reduction(CALL, &s.map)?;
    check_call(
        c,
        Called {
            call: CALL,
            root: None,
            unit: None,
            op: Some(red.name),
            elem: elem_of(s),
        },
    )?;
    let bufs = Buffers::of(Some(s), Some(r));
    let order = red.order;
    // SAFETY: the caller's promise.
    unsafe {
        start(CALL, c, bufs, Some(red.combine), |sc, m, t| {
            algorithm::reduce_scatter(sc, m, t, input(sl), &blocks, output(rl), order)
        })
    }
}
