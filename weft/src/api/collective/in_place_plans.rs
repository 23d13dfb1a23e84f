//! How each in-place form (`in_place.rs`) runs: its ordinary collective, with the input a
//! view of the output (all of it, this member's block, or its part). `start` sees the input
//! lying in the output and copies it when the collective starts, so every algorithm may
//! write its result wherever it likes. Each planner checks what the view needs (blocks that
//! divide the buffer, parts inside it) and returns an error naming the call otherwise.
//!
//! Every planner here is `unsafe` with one contract: the layouts come from a buffer borrowed
//! mutably (and the operation, if any, borrowed) until the returned collective completes.

use super::rooted::{plan_reduce, plan_rooted, root_index, Rooted};
use super::start::Started;
use super::{count_error, parts, plan_all_gather, plan_all_gather_varcount};
use super::{plan_all_to_all, plan_reduction, CommData, Layout, Operation, Reduce};
use crate::api::datatype::Count;
use crate::api::topology::Rank;
use crate::error::Result;

/// A partitioned buffer's counts and displacements.
pub(super) type CountsDispls = (Vec<Count>, Vec<Count>);

/// Elements `first..first + count` of `l` (one member's block or part; in range).
pub(super) fn block<'a>(l: &Layout<'a>, first: usize, count: usize) -> Layout<'a> {
    debug_assert!(first + count <= l.count);
    // SAFETY: a sub-range of `l`'s elements, which `l`'s borrow covers (`wrapping_add`: the
    // address is only read through the layout, inside the buffer).
    unsafe { Layout::new(l.ptr.wrapping_add(first * l.map.extent()), count, &l.map) }
}

/// Block `j` of `l`, which holds one block of whole elements per member.
fn equal_block<'a>(
    call: &'static str,
    c: &CommData,
    l: &Layout<'a>,
    j: usize,
) -> Result<Layout<'a>> {
    let n = c.size() as usize;
    if !l.count.is_multiple_of(n) {
        return Err(count_error(
            call,
            format!(
                "the buffer has {} elements: not one equal block for each of the {n} members",
                l.count
            ),
        ));
    }
    let k = l.count / n;
    Ok(block(l, j * k, k))
}

/// Part `j` of a partitioned buffer of layout `l` (its counts and displacements checked for
/// every member), and the byte (offset, length) of every part.
fn part<'a>(
    call: &'static str,
    c: &CommData,
    l: &Layout<'a>,
    (counts, displs): &CountsDispls,
    j: usize,
) -> Result<(Layout<'a>, Vec<(usize, usize)>)> {
    let blocks = parts(call, "buffer", c.size() as usize, l, counts, displs)?;
    Ok((block(l, displs[j] as usize, counts[j] as usize), blocks))
}

/// Allreduce, scan or exclusive scan of `r` into itself.
pub(super) unsafe fn reduction<O: Operation>(
    c: &CommData,
    kind: Reduce,
    r: &Layout<'_>,
    op: &O,
    blocking: bool,
) -> Result<Started> {
    c.intra_only("an in-place collective")?;
    // SAFETY: the module's contract; the input is the output.
    unsafe { plan_reduction(c, kind, &r.clone(), r, op, blocking) }
}

/// Reduce-scatter-block of `s` (a block per member) into its first block.
pub(super) unsafe fn reduce_scatter_block<O: Operation>(
    c: &CommData,
    s: &Layout<'_>,
    op: &O,
    blocking: bool,
) -> Result<Started> {
    c.intra_only("an in-place collective")?;
    let r = equal_block("reduce_scatter_block_into", c, s, 0)?;
    // SAFETY: the module's contract; the output is the input's first block.
    unsafe { plan_reduction(c, Reduce::ScatterBlock, s, &r, op, blocking) }
}

/// Reduce-scatter with counts of `s` into its first `counts[rank]` elements.
pub(super) unsafe fn reduce_scatter_varcount<O: Operation>(
    c: &CommData,
    (counts, displs): &CountsDispls,
    s: &Layout<'_>,
    op: &O,
) -> Result<Started> {
    c.intra_only("an in-place collective")?;
    const CALL: &str = "reduce_scatter_varcount_into";
    let mine = counts.get(c.rank as usize).copied().unwrap_or(0).max(0) as usize;
    if mine > s.count {
        return Err(count_error(
            CALL,
            format!(
                "this member's count {mine} is more than the buffer's {} elements",
                s.count
            ),
        ));
    }
    let r = block(s, 0, mine);
    // SAFETY: the module's contract; the output is the input's first elements.
    unsafe { super::reduce_scatter::plan_reduce_scatter_varcount(c, s, (counts, displs), &r, op) }
}

/// Allgather into `r`, this member's block already in place.
pub(super) unsafe fn all_gather(c: &CommData, r: &Layout<'_>, blocking: bool) -> Result<Started> {
    c.intra_only("an in-place collective")?;
    let s = equal_block("all_gather_into", c, r, c.rank as usize)?;
    // SAFETY: the module's contract; the input is a block of the output.
    unsafe { plan_all_gather(c, &s, r, blocking) }
}

/// Allgather with counts into `r`, this member's part already in place.
pub(super) unsafe fn all_gather_varcount(
    c: &CommData,
    cd: CountsDispls,
    r: &Layout<'_>,
) -> Result<Started> {
    c.intra_only("an in-place collective")?;
    let (s, _) = part("all_gather_varcount_into", c, r, &cd, c.rank as usize)?;
    // SAFETY: the module's contract; the input is a part of the output.
    unsafe { plan_all_gather_varcount(c, &s, cd, r) }
}

/// All-to-all (with counts when `cd` is given) of `r` into itself.
pub(super) unsafe fn all_to_all(
    c: &CommData,
    cd: Option<&CountsDispls>,
    r: &Layout<'_>,
    blocking: bool,
) -> Result<Started> {
    c.intra_only("an in-place collective")?;
    let cd = cd.map(|(counts, displs)| (&counts[..], &displs[..]));
    // SAFETY: the module's contract; the input is the output.
    unsafe { plan_all_to_all(c, &r.clone(), cd, r, cd, blocking) }
}

/// Reduce at the root of `r` into itself.
pub(super) unsafe fn reduce_root<O: Operation>(
    c: &CommData,
    root: Rank,
    r: &Layout<'_>,
    op: &O,
    blocking: bool,
) -> Result<Started> {
    c.intra_only("an in-place collective")?;
    // SAFETY: the module's contract; the input is the output.
    unsafe {
        plan_reduce(
            c,
            "reduce_into_root",
            root,
            &r.clone(),
            Some(r),
            op,
            blocking,
        )
    }
}

/// Gather (with counts when `cd` is given) at the root into `r`, the root's block or part
/// already in place.
pub(super) unsafe fn gather_root(
    c: &CommData,
    root: Rank,
    cd: Option<&CountsDispls>,
    r: &Layout<'_>,
    blocking: bool,
) -> Result<Started> {
    c.intra_only("an in-place collective")?;
    let (call, s, how) = match cd {
        None => {
            const CALL: &str = "gather_into_root";
            let s = equal_block(CALL, c, r, root_index(c, CALL, root)?)?;
            (CALL, s, Rooted::Gather(None))
        }
        Some(cd) => {
            const CALL: &str = "gather_varcount_into_root";
            let (s, blocks) = part(CALL, c, r, cd, root_index(c, CALL, root)?)?;
            (CALL, s, Rooted::Gather(Some(blocks)))
        }
    };
    // SAFETY: the module's contract; the input is a block or part of the output.
    unsafe { plan_rooted(c, call, root, how, Some(&s), Some(r), blocking) }
}

/// Scatter (with counts when `cd` is given) from the root's `s`, the root keeping its own
/// block or part where it is: that block is the root's output, and gets its own bytes back
/// (copied when the collective starts).
pub(super) unsafe fn scatter_root(
    c: &CommData,
    root: Rank,
    cd: Option<&CountsDispls>,
    s: &Layout<'_>,
    blocking: bool,
) -> Result<Started> {
    c.intra_only("an in-place collective")?;
    let (call, r, how) = match cd {
        None => {
            const CALL: &str = "scatter_into_root";
            let r = equal_block(CALL, c, s, root_index(c, CALL, root)?)?;
            (CALL, r, Rooted::Scatter(None))
        }
        Some(cd) => {
            const CALL: &str = "scatter_varcount_into_root";
            let (r, blocks) = part(CALL, c, s, cd, root_index(c, CALL, root)?)?;
            (CALL, r, Rooted::Scatter(Some(blocks)))
        }
    };
    // SAFETY: the module's contract; the output is a block or part of the input.
    unsafe { plan_rooted(c, call, root, how, Some(s), Some(&r), blocking) }
}
