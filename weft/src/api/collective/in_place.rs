//! The in-place forms (`MPI_IN_PLACE`), Weft extensions (rsmpi has none): the data a member
//! contributes is already in its result buffer, which the collective overwrites.
//!
//! Each form runs its ordinary collective with the input a view of the output (all of it, or
//! this member's block). `start` sees the input lying in the output and copies it when the
//! collective starts, so every algorithm may write its result wherever it likes.

use super::alltoallw::{self, PartMut};
use super::rooted::{plan_reduce, plan_rooted, Rooted};
use super::start::Started;
use super::{count_error, counts_displs, parts, plan_all_gather, plan_all_gather_varcount};
use super::{plan_all_to_all, plan_reduction, PartitionedBufferMut, Reduce};
use super::{BufferMut, CommData, Communicator, Layout, Operation, Request, Root, Scope};
use crate::api::datatype::Count;
use crate::error::{fatal, Result};

/// Elements `first..first + count` of `l` (one member's block).
fn block<'a>(l: &Layout<'a>, first: usize, count: usize) -> Layout<'a> {
    debug_assert!(first + count <= l.count);
    // SAFETY: a sub-range of `l`'s elements, which `l`'s borrow covers (`wrapping_add`: the
    // address is only read through the layout, inside the buffer).
    unsafe { Layout::new(l.ptr.wrapping_add(first * l.map.extent()), count, &l.map) }
}

/// This member's block of `l`, which holds one block of whole elements per member.
fn own_block<'a>(
    call: &'static str,
    c: &CommData,
    l: &Layout<'a>,
    me: usize,
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
    Ok(block(l, me * k, k))
}

/// Part `j` of a partitioned buffer of layout `l` (its counts and displacements checked for
/// every member), and the byte (offset, length) of every part.
fn part<'a>(
    call: &'static str,
    c: &CommData,
    l: &Layout<'a>,
    (counts, displs): &(Vec<Count>, Vec<Count>),
    j: usize,
) -> Result<(Layout<'a>, Vec<(usize, usize)>)> {
    let blocks = parts(call, "buffer", c.size() as usize, l, counts, displs)?;
    Ok((block(l, displs[j] as usize, counts[j] as usize), blocks))
}

/// # Safety
/// `r` is the layout of a buffer borrowed (mutably) until the collective completes.
unsafe fn plan_all_gather_in_place(
    c: &CommData,
    r: &Layout<'_>,
    blocking: bool,
) -> Result<Started> {
    let s = own_block("all_gather_into", c, r, c.rank as usize)?;
    // SAFETY: the caller's promise; the input is a view of the output.
    unsafe { plan_all_gather(c, &s, r, blocking) }
}

/// In-place collectives on a whole communicator.
pub trait InPlaceCollectives: Communicator {
    /// [`all_reduce_into`](super::CommunicatorCollectives::all_reduce_into) with every
    /// member's contribution in `buf`, which gets the result (`MPI_IN_PLACE`).
    #[track_caller]
    fn all_reduce_in_place<B: ?Sized + BufferMut, O: Operation>(&self, buf: &mut B, op: O) {
        let r = buf.layout_mut();
        // SAFETY: the buffer and the operation are borrowed for this blocking call.
        let started =
            unsafe { plan_reduction(self.comm_data(), Reduce::All, &r.clone(), &r, &op, true) };
        fatal(started.and_then(|x| x.wait("all_reduce_in_place")))
    }

    /// [`scan_into`](super::CommunicatorCollectives::scan_into) in place.
    #[track_caller]
    fn scan_in_place<B: ?Sized + BufferMut, O: Operation>(&self, buf: &mut B, op: O) {
        let r = buf.layout_mut();
        // SAFETY: as in `all_reduce_in_place`.
        let started =
            unsafe { plan_reduction(self.comm_data(), Reduce::Scan, &r.clone(), &r, &op, true) };
        fatal(started.and_then(|x| x.wait("scan_in_place")))
    }

    /// [`exclusive_scan_into`](super::CommunicatorCollectives::exclusive_scan_into) in
    /// place: member 0's `buf` is left as it was.
    #[track_caller]
    fn exclusive_scan_in_place<B: ?Sized + BufferMut, O: Operation>(&self, buf: &mut B, op: O) {
        let r = buf.layout_mut();
        let c = self.comm_data();
        // SAFETY: as in `all_reduce_in_place`.
        let started =
            unsafe { plan_reduction(c, Reduce::ExclusiveScan, &r.clone(), &r, &op, true) };
        fatal(started.and_then(|x| x.wait("exclusive_scan_in_place")))
    }

    /// [`all_gather_into`](super::CommunicatorCollectives::all_gather_into) with this
    /// member's contribution already in its block of `buf` (block `rank`).
    #[track_caller]
    fn all_gather_in_place<B: ?Sized + BufferMut>(&self, buf: &mut B) {
        let r = buf.layout_mut();
        // SAFETY: the buffer is borrowed for this blocking call.
        let started = unsafe { plan_all_gather_in_place(self.comm_data(), &r, true) };
        fatal(started.and_then(|x| x.wait("all_gather_in_place")))
    }

    /// [`all_to_all_into`](super::CommunicatorCollectives::all_to_all_into) in place: block
    /// j of `buf` goes to member j and is replaced by member j's block for this member.
    #[track_caller]
    fn all_to_all_in_place<B: ?Sized + BufferMut>(&self, buf: &mut B) {
        let r = buf.layout_mut();
        // SAFETY: the buffer is borrowed for this blocking call.
        let started =
            unsafe { plan_all_to_all(self.comm_data(), &r.clone(), None, &r, None, true) };
        fatal(started.and_then(|x| x.wait("all_to_all_in_place")))
    }

    /// [`all_gather_varcount_into`](super::CommunicatorCollectives::all_gather_varcount_into)
    /// with this member's contribution already in its part of `buf`.
    #[track_caller]
    fn all_gather_varcount_in_place<B: ?Sized + PartitionedBufferMut>(&self, buf: &mut B) {
        const CALL: &str = "all_gather_varcount_into";
        let c = self.comm_data();
        let cd = counts_displs(&*buf);
        let r = buf.layout_mut();
        let started = part(CALL, c, &r, &cd, c.rank as usize).and_then(|(s, _)| {
            // SAFETY: the buffer is borrowed for this blocking call; the input is its part.
            unsafe { plan_all_gather_varcount(c, &s, cd, &r) }
        });
        fatal(started.and_then(|x| x.wait("all_gather_varcount_in_place")))
    }

    /// [`all_to_all_varcount_into`](super::CommunicatorCollectives::all_to_all_varcount_into)
    /// in place: part j of `buf` goes to member j and is replaced by member j's part for this
    /// member (a pair's counts the same both ways).
    #[track_caller]
    fn all_to_all_varcount_in_place<B: ?Sized + PartitionedBufferMut>(&self, buf: &mut B) {
        let (counts, displs) = counts_displs(&*buf);
        let r = buf.layout_mut();
        let cd = Some((&counts[..], &displs[..]));
        // SAFETY: the buffer is borrowed for this blocking call.
        let started = unsafe { plan_all_to_all(self.comm_data(), &r.clone(), cd, &r, cd, true) };
        fatal(started.and_then(|x| x.wait("all_to_all_varcount_in_place")))
    }

    /// [`reduce_scatter_block_into`](super::CommunicatorCollectives::reduce_scatter_block_into)
    /// in place: `buf` holds a block per member, and its first block gets this member's
    /// result (the rest is left as it was).
    #[track_caller]
    fn reduce_scatter_block_in_place<B: ?Sized + BufferMut, O: Operation>(
        &self,
        buf: &mut B,
        op: O,
    ) {
        const CALL: &str = "reduce_scatter_block_into";
        let c = self.comm_data();
        let s = buf.layout_mut();
        let started = own_block(CALL, c, &s, 0).and_then(|r| {
            // SAFETY: the buffer and the operation are borrowed for this blocking call; the
            // output is its first block.
            unsafe { plan_reduction(c, Reduce::ScatterBlock, &s, &r, &op, true) }
        });
        fatal(started.and_then(|x| x.wait("reduce_scatter_block_in_place")))
    }

    /// [`reduce_scatter_varcount_into`](super::CommunicatorCollectives::reduce_scatter_varcount_into)
    /// in place: `buf`'s parts are the input, and its first `counts[rank]` elements get this
    /// member's result (the rest is left as it was).
    #[track_caller]
    fn reduce_scatter_varcount_in_place<B: ?Sized + PartitionedBufferMut, O: Operation>(
        &self,
        buf: &mut B,
        op: O,
    ) {
        const CALL: &str = "reduce_scatter_varcount_into";
        let c = self.comm_data();
        let (counts, displs) = counts_displs(&*buf);
        let s = buf.layout_mut();
        let mine = counts.get(c.rank as usize).copied().unwrap_or(0).max(0) as usize;
        let started = if mine > s.count {
            Err(count_error(
                CALL,
                format!(
                    "this member's count {mine} is more than the buffer's {} elements",
                    s.count
                ),
            ))
        } else {
            let r = block(&s, 0, mine);
            // SAFETY: the buffer and the operation are borrowed for this blocking call; the
            // output is its first elements.
            unsafe {
                super::reduce_scatter::plan_reduce_scatter_varcount(
                    c,
                    &s,
                    (&counts, &displs),
                    &r,
                    &op,
                )
            }
        };
        fatal(started.and_then(|x| x.wait("reduce_scatter_varcount_in_place")))
    }

    /// [`all_to_all_w_into`](super::CommunicatorCollectives::all_to_all_w_into) in place:
    /// `parts[j]` goes to member j and is replaced by member j's part for this member (so a
    /// pair's parts must be the same size both ways).
    #[track_caller]
    fn all_to_all_w_in_place(&self, parts: &mut [PartMut<'_>]) {
        // The ordinary call's name: the checking mode compares it with the other members'.
        const CALL: &str = "all_to_all_w_into";
        let sends = alltoallw::parts_of(parts);
        // SAFETY: the parts are borrowed for this blocking call, which lands them; the sends
        // are packed when it starts, before anything is written.
        let planned =
            unsafe { alltoallw::plan_all_to_all_w(self.comm_data(), CALL, &sends, parts) };
        let done = "all_to_all_w_in_place";
        fatal(planned.and_then(|(started, landing)| {
            started.wait(done)?;
            // SAFETY: as above.
            unsafe { landing.land(done) }
        }))
    }

    /// Starts [`all_reduce_in_place`](Self::all_reduce_in_place).
    #[track_caller]
    fn immediate_all_reduce_in_place<
        'a,
        B: ?Sized + 'a + BufferMut,
        O: 'a + Operation,
        Sc: Scope<'a>,
    >(
        &self,
        scope: Sc,
        buf: &'a mut B,
        op: O,
    ) -> Request<'a, B, Sc> {
        let c = self.comm_data();
        let r = buf.layout_mut();
        // SAFETY: the buffer and the operation are borrowed for 'a, which the request (settled
        // by its scope) does not outlive.
        let started = fatal(unsafe { plan_reduction(c, Reduce::All, &r.clone(), &r, &op, false) });
        started.into_request("immediate_all_reduce_in_place", c, buf, scope)
    }

    /// Starts [`all_gather_in_place`](Self::all_gather_in_place).
    #[track_caller]
    fn immediate_all_gather_in_place<'a, B: ?Sized + 'a + BufferMut, Sc: Scope<'a>>(
        &self,
        scope: Sc,
        buf: &'a mut B,
    ) -> Request<'a, B, Sc> {
        let c = self.comm_data();
        let r = buf.layout_mut();
        // SAFETY: as in `immediate_all_reduce_in_place`.
        let started = fatal(unsafe { plan_all_gather_in_place(c, &r, false) });
        started.into_request("immediate_all_gather_in_place", c, buf, scope)
    }

    /// Starts [`all_to_all_in_place`](Self::all_to_all_in_place).
    #[track_caller]
    fn immediate_all_to_all_in_place<'a, B: ?Sized + 'a + BufferMut, Sc: Scope<'a>>(
        &self,
        scope: Sc,
        buf: &'a mut B,
    ) -> Request<'a, B, Sc> {
        let c = self.comm_data();
        let r = buf.layout_mut();
        // SAFETY: as in `immediate_all_reduce_in_place`.
        let started = fatal(unsafe { plan_all_to_all(c, &r.clone(), None, &r, None, false) });
        started.into_request("immediate_all_to_all_in_place", c, buf, scope)
    }
}

impl<C: Communicator + ?Sized> InPlaceCollectives for C {}

/// In-place forms of the rooted collectives, called at the root.
pub trait InPlaceRoot: Root {
    /// [`reduce_into_root`](Root::reduce_into_root) with the root's contribution in `buf`,
    /// which gets the result. The other members call [`reduce_into`](Root::reduce_into).
    #[track_caller]
    fn reduce_into_root_in_place<B: ?Sized + BufferMut, O: Operation>(&self, buf: &mut B, op: O) {
        let r = buf.layout_mut();
        let c = self.comm_data();
        // SAFETY: the buffer and the operation are borrowed for this blocking call.
        let started = unsafe {
            plan_reduce(
                c,
                "reduce_into_root",
                self.root_rank(),
                &r.clone(),
                Some(&r),
                &op,
                true,
            )
        };
        fatal(started.and_then(|x| x.wait("reduce_into_root_in_place")))
    }

    /// [`gather_into_root`](Root::gather_into_root) with the root's contribution already in
    /// its block of `buf`. The other members call [`gather_into`](Root::gather_into).
    #[track_caller]
    fn gather_into_root_in_place<B: ?Sized + BufferMut>(&self, buf: &mut B) {
        let r = buf.layout_mut();
        let c = self.comm_data();
        let root = self.root_rank();
        let started = super::rooted::root_index(c, "gather_into_root", root)
            .and_then(|j| own_block("gather_into_root", c, &r, j))
            .and_then(|s| {
                // SAFETY: the buffer is borrowed for this blocking call; the input is its block.
                unsafe {
                    plan_rooted(
                        c,
                        "gather_into_root",
                        root,
                        Rooted::Gather(None),
                        Some(&s),
                        Some(&r),
                        true,
                    )
                }
            });
        fatal(started.and_then(|x| x.wait("gather_into_root_in_place")))
    }

    /// [`scatter_into_root`](Root::scatter_into_root) where the root keeps its own block
    /// where it is in `sendbuf` (it receives nothing). The other members call
    /// [`scatter_into`](Root::scatter_into).
    #[track_caller]
    fn scatter_into_root_in_place<B: ?Sized + BufferMut>(&self, sendbuf: &mut B) {
        let s = sendbuf.layout_mut();
        let c = self.comm_data();
        let root = self.root_rank();
        let started = super::rooted::root_index(c, "scatter_into_root", root)
            .and_then(|j| own_block("scatter_into_root", c, &s, j))
            .and_then(|r| {
                // SAFETY: the buffer is borrowed mutably for this blocking call; the root's
                // block is the output, which gets back its own bytes (copied at the start).
                unsafe {
                    plan_rooted(
                        c,
                        "scatter_into_root",
                        root,
                        Rooted::Scatter(None),
                        Some(&s),
                        Some(&r),
                        true,
                    )
                }
            });
        fatal(started.and_then(|x| x.wait("scatter_into_root_in_place")))
    }

    /// [`gather_varcount_into_root`](Root::gather_varcount_into_root) with the root's
    /// contribution already in its part of `buf`.
    #[track_caller]
    fn gather_varcount_into_root_in_place<B: ?Sized + PartitionedBufferMut>(&self, buf: &mut B) {
        const CALL: &str = "gather_varcount_into_root";
        let c = self.comm_data();
        let root = self.root_rank();
        let cd = counts_displs(&*buf);
        let r = buf.layout_mut();
        let started = super::rooted::root_index(c, CALL, root)
            .and_then(|j| part(CALL, c, &r, &cd, j))
            .and_then(|(s, blocks)| {
                // SAFETY: the buffer is borrowed for this blocking call; the input is its part.
                unsafe {
                    plan_rooted(
                        c,
                        CALL,
                        root,
                        Rooted::Gather(Some(blocks)),
                        Some(&s),
                        Some(&r),
                        true,
                    )
                }
            });
        fatal(started.and_then(|x| x.wait("gather_varcount_into_root_in_place")))
    }

    /// [`scatter_varcount_into_root`](Root::scatter_varcount_into_root) where the root keeps
    /// its own part where it is in `sendbuf`.
    #[track_caller]
    fn scatter_varcount_into_root_in_place<B: ?Sized + PartitionedBufferMut>(
        &self,
        sendbuf: &mut B,
    ) {
        const CALL: &str = "scatter_varcount_into_root";
        let c = self.comm_data();
        let root = self.root_rank();
        let cd = counts_displs(&*sendbuf);
        let s = sendbuf.layout_mut();
        let started = super::rooted::root_index(c, CALL, root)
            .and_then(|j| part(CALL, c, &s, &cd, j))
            .and_then(|(r, blocks)| {
                // SAFETY: the buffer is borrowed mutably for this blocking call; the root's
                // part is the output, which gets back its own bytes (copied at the start).
                unsafe {
                    plan_rooted(
                        c,
                        CALL,
                        root,
                        Rooted::Scatter(Some(blocks)),
                        Some(&s),
                        Some(&r),
                        true,
                    )
                }
            });
        fatal(started.and_then(|x| x.wait("scatter_varcount_into_root_in_place")))
    }
}

impl<R: Root + ?Sized> InPlaceRoot for R {}

#[cfg(test)]
mod tests {
    use super::super::start::Buffers;
    use super::*;
    use crate::api::datatype::{Buffer, BufferMut};

    fn both<'l>(input: &'l Layout<'l>, output: &'l Layout<'l>) -> bool {
        Buffers {
            input: Some(input),
            output: Some(output),
            prefill: false,
        }
        .in_place()
    }

    #[test]
    fn an_input_inside_the_output_is_seen_as_in_place() {
        let mut whole = vec![0u64; 12];
        let other = vec![0u64; 12];
        let empty: Vec<u64> = Vec::new();
        let r = whole.layout_mut();
        // Member 2 of 3: elements 8..12.
        let mine = block(&r, 8, 4);
        assert_eq!(mine.ptr as usize, r.ptr as usize + 64);
        assert!(both(&mine, &r), "a member's block of the output");
        assert!(both(&r.clone(), &r), "the output itself");
        assert!(!both(&other.layout(), &r), "another buffer");
        assert!(!both(&empty.layout(), &r), "no data");
        assert!(!both(&block(&r, 8, 0), &r), "an empty block");
    }
}
