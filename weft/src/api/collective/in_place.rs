//! The in-place forms (`MPI_IN_PLACE`), Weft extensions (rsmpi has none): the data a member
//! contributes is already in its result buffer, which the collective overwrites. Each has an
//! `immediate_` form. How they run: `in_place_plans.rs`.
//!
//! Where MPI lets only the root be in place (reduce, gather, scatter), [`InPlaceRoot`] has
//! the root's side and the other members call the ordinary forms of [`Root`].

use super::alltoallw::{self, PartMut};
use super::in_place_plans as plan;
use super::start::Started;
use super::{counts_displs, PartitionedBufferMut, Reduce};
use super::{BufferMut, Communicator, Operation, Request, Root, Scope};
use crate::error::{fatal, Result};

/// Waits for a blocking in-place form.
#[track_caller]
fn wait(started: Result<Started>, call: &'static str) {
    fatal(started.and_then(|x| x.wait(call)))
}

/// In-place collectives on a whole communicator.
pub trait InPlaceCollectives: Communicator {
    /// [`all_reduce_into`](super::CommunicatorCollectives::all_reduce_into) with every
    /// member's contribution in `buf`, which gets the result.
    #[track_caller]
    fn all_reduce_in_place<B: ?Sized + BufferMut, O: Operation>(&self, buf: &mut B, op: O) {
        let c = self.comm_data();
        let r = buf.layout_mut();
        // SAFETY: the buffer (and the operation, if any) are borrowed for this blocking call.
        let started = unsafe { plan::reduction(c, Reduce::All, &r, &op, true) };
        wait(started, "all_reduce_in_place");
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
        // SAFETY: the buffer (and the operation, if any) are borrowed for 'a, which the
        // request (settled by its scope) does not outlive.
        let started = unsafe { plan::reduction(c, Reduce::All, &r, &op, false) };
        fatal(started).into_request("immediate_all_reduce_in_place", c, buf, scope)
    }

    /// [`scan_into`](super::CommunicatorCollectives::scan_into) in place.
    #[track_caller]
    fn scan_in_place<B: ?Sized + BufferMut, O: Operation>(&self, buf: &mut B, op: O) {
        let c = self.comm_data();
        let r = buf.layout_mut();
        // SAFETY: the buffer (and the operation, if any) are borrowed for this blocking call.
        let started = unsafe { plan::reduction(c, Reduce::Scan, &r, &op, true) };
        wait(started, "scan_in_place");
    }

    /// Starts [`scan_in_place`](Self::scan_in_place).
    #[track_caller]
    fn immediate_scan_in_place<'a, B: ?Sized + 'a + BufferMut, O: 'a + Operation, Sc: Scope<'a>>(
        &self,
        scope: Sc,
        buf: &'a mut B,
        op: O,
    ) -> Request<'a, B, Sc> {
        let c = self.comm_data();
        let r = buf.layout_mut();
        // SAFETY: the buffer (and the operation, if any) are borrowed for 'a, which the
        // request (settled by its scope) does not outlive.
        let started = unsafe { plan::reduction(c, Reduce::Scan, &r, &op, false) };
        fatal(started).into_request("immediate_scan_in_place", c, buf, scope)
    }

    /// [`exclusive_scan_into`](super::CommunicatorCollectives::exclusive_scan_into) in
    /// place: member 0's `buf` is left as it was.
    #[track_caller]
    fn exclusive_scan_in_place<B: ?Sized + BufferMut, O: Operation>(&self, buf: &mut B, op: O) {
        let c = self.comm_data();
        let r = buf.layout_mut();
        // SAFETY: the buffer (and the operation, if any) are borrowed for this blocking call.
        let started = unsafe { plan::reduction(c, Reduce::ExclusiveScan, &r, &op, true) };
        wait(started, "exclusive_scan_in_place");
    }

    /// Starts [`exclusive_scan_in_place`](Self::exclusive_scan_in_place).
    #[track_caller]
    fn immediate_exclusive_scan_in_place<
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
        // SAFETY: the buffer (and the operation, if any) are borrowed for 'a, which the
        // request (settled by its scope) does not outlive.
        let started = unsafe { plan::reduction(c, Reduce::ExclusiveScan, &r, &op, false) };
        fatal(started).into_request("immediate_exclusive_scan_in_place", c, buf, scope)
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
        let c = self.comm_data();
        let r = buf.layout_mut();
        // SAFETY: the buffer (and the operation, if any) are borrowed for this blocking call.
        let started = unsafe { plan::reduce_scatter_block(c, &r, &op, true) };
        wait(started, "reduce_scatter_block_in_place");
    }

    /// Starts [`reduce_scatter_block_in_place`](Self::reduce_scatter_block_in_place).
    #[track_caller]
    fn immediate_reduce_scatter_block_in_place<
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
        // SAFETY: the buffer (and the operation, if any) are borrowed for 'a, which the
        // request (settled by its scope) does not outlive.
        let started = unsafe { plan::reduce_scatter_block(c, &r, &op, false) };
        fatal(started).into_request("immediate_reduce_scatter_block_in_place", c, buf, scope)
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
        let c = self.comm_data();
        let cd = counts_displs(&*buf);
        let r = buf.layout_mut();
        // SAFETY: the buffer (and the operation, if any) are borrowed for this blocking call.
        let started = unsafe { plan::reduce_scatter_varcount(c, &cd, &r, &op) };
        wait(started, "reduce_scatter_varcount_in_place");
    }

    /// Starts [`reduce_scatter_varcount_in_place`](Self::reduce_scatter_varcount_in_place).
    #[track_caller]
    fn immediate_reduce_scatter_varcount_in_place<
        'a,
        B: ?Sized + 'a + PartitionedBufferMut,
        O: 'a + Operation,
        Sc: Scope<'a>,
    >(
        &self,
        scope: Sc,
        buf: &'a mut B,
        op: O,
    ) -> Request<'a, B, Sc> {
        let c = self.comm_data();
        let cd = counts_displs(&*buf);
        let r = buf.layout_mut();
        // SAFETY: the buffer (and the operation, if any) are borrowed for 'a, which the
        // request (settled by its scope) does not outlive.
        let started = unsafe { plan::reduce_scatter_varcount(c, &cd, &r, &op) };
        fatal(started).into_request("immediate_reduce_scatter_varcount_in_place", c, buf, scope)
    }

    /// [`all_gather_into`](super::CommunicatorCollectives::all_gather_into) with this
    /// member's contribution already in its block of `buf` (block `rank`).
    #[track_caller]
    fn all_gather_in_place<B: ?Sized + BufferMut>(&self, buf: &mut B) {
        let c = self.comm_data();
        let r = buf.layout_mut();
        // SAFETY: the buffer (and the operation, if any) are borrowed for this blocking call.
        let started = unsafe { plan::all_gather(c, &r, true) };
        wait(started, "all_gather_in_place");
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
        // SAFETY: the buffer (and the operation, if any) are borrowed for 'a, which the
        // request (settled by its scope) does not outlive.
        let started = unsafe { plan::all_gather(c, &r, false) };
        fatal(started).into_request("immediate_all_gather_in_place", c, buf, scope)
    }

    /// [`all_gather_varcount_into`](super::CommunicatorCollectives::all_gather_varcount_into)
    /// with this member's contribution already in its part of `buf`.
    #[track_caller]
    fn all_gather_varcount_in_place<B: ?Sized + PartitionedBufferMut>(&self, buf: &mut B) {
        let c = self.comm_data();
        let cd = counts_displs(&*buf);
        let r = buf.layout_mut();
        // SAFETY: the buffer (and the operation, if any) are borrowed for this blocking call.
        let started = unsafe { plan::all_gather_varcount(c, cd, &r) };
        wait(started, "all_gather_varcount_in_place");
    }

    /// Starts [`all_gather_varcount_in_place`](Self::all_gather_varcount_in_place).
    #[track_caller]
    fn immediate_all_gather_varcount_in_place<
        'a,
        B: ?Sized + 'a + PartitionedBufferMut,
        Sc: Scope<'a>,
    >(
        &self,
        scope: Sc,
        buf: &'a mut B,
    ) -> Request<'a, B, Sc> {
        let c = self.comm_data();
        let cd = counts_displs(&*buf);
        let r = buf.layout_mut();
        // SAFETY: the buffer (and the operation, if any) are borrowed for 'a, which the
        // request (settled by its scope) does not outlive.
        let started = unsafe { plan::all_gather_varcount(c, cd, &r) };
        fatal(started).into_request("immediate_all_gather_varcount_in_place", c, buf, scope)
    }

    /// [`all_to_all_into`](super::CommunicatorCollectives::all_to_all_into) in place: block
    /// j of `buf` goes to member j and is replaced by member j's block for this member.
    #[track_caller]
    fn all_to_all_in_place<B: ?Sized + BufferMut>(&self, buf: &mut B) {
        let c = self.comm_data();
        let r = buf.layout_mut();
        // SAFETY: the buffer (and the operation, if any) are borrowed for this blocking call.
        let started = unsafe { plan::all_to_all(c, None, &r, true) };
        wait(started, "all_to_all_in_place");
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
        // SAFETY: the buffer (and the operation, if any) are borrowed for 'a, which the
        // request (settled by its scope) does not outlive.
        let started = unsafe { plan::all_to_all(c, None, &r, false) };
        fatal(started).into_request("immediate_all_to_all_in_place", c, buf, scope)
    }

    /// [`all_to_all_varcount_into`](super::CommunicatorCollectives::all_to_all_varcount_into)
    /// in place: part j of `buf` goes to member j and is replaced by member j's part for this
    /// member (a pair's counts the same both ways).
    #[track_caller]
    fn all_to_all_varcount_in_place<B: ?Sized + PartitionedBufferMut>(&self, buf: &mut B) {
        let c = self.comm_data();
        let cd = counts_displs(&*buf);
        let r = buf.layout_mut();
        // SAFETY: the buffer (and the operation, if any) are borrowed for this blocking call.
        let started = unsafe { plan::all_to_all(c, Some(&cd), &r, true) };
        wait(started, "all_to_all_varcount_in_place");
    }

    /// Starts [`all_to_all_varcount_in_place`](Self::all_to_all_varcount_in_place).
    #[track_caller]
    fn immediate_all_to_all_varcount_in_place<
        'a,
        B: ?Sized + 'a + PartitionedBufferMut,
        Sc: Scope<'a>,
    >(
        &self,
        scope: Sc,
        buf: &'a mut B,
    ) -> Request<'a, B, Sc> {
        let c = self.comm_data();
        let cd = counts_displs(&*buf);
        let r = buf.layout_mut();
        // SAFETY: the buffer (and the operation, if any) are borrowed for 'a, which the
        // request (settled by its scope) does not outlive.
        let started = unsafe { plan::all_to_all(c, Some(&cd), &r, false) };
        fatal(started).into_request("immediate_all_to_all_varcount_in_place", c, buf, scope)
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
        fatal(planned.and_then(|started| started.wait(done)))
    }

    /// Starts [`all_to_all_w_in_place`](Self::all_to_all_w_in_place).
    #[track_caller]
    fn immediate_all_to_all_w_in_place<'a, 'b: 'a, Sc: Scope<'a>>(
        &self,
        scope: Sc,
        parts: &'a mut [PartMut<'b>],
    ) -> Request<'a, [PartMut<'b>], Sc> {
        const CALL: &str = "immediate_all_to_all_w_into";
        let c = self.comm_data();
        let sends = alltoallw::parts_of(parts);
        // SAFETY: the parts are borrowed for 'a, which the request (settled by its scope)
        // does not outlive; its finish lands them.
        let started = fatal(unsafe { alltoallw::plan_all_to_all_w(c, CALL, &sends, parts) });
        started.into_request(CALL, c, &*parts, scope)
    }
}

impl<C: Communicator + ?Sized> InPlaceCollectives for C {}

/// In-place forms of the rooted collectives, called at the root.
pub trait InPlaceRoot: Root {
    /// [`reduce_into_root`](Root::reduce_into_root) with the root's contribution in `buf`,
    /// which gets the result. The other members call [`reduce_into`](Root::reduce_into).
    #[track_caller]
    fn reduce_into_root_in_place<B: ?Sized + BufferMut, O: Operation>(&self, buf: &mut B, op: O) {
        let c = self.comm_data();
        let r = buf.layout_mut();
        // SAFETY: the buffer (and the operation, if any) are borrowed for this blocking call.
        let started = unsafe { plan::reduce_root(c, self.root_rank(), &r, &op, true) };
        wait(started, "reduce_into_root_in_place");
    }

    /// Starts [`reduce_into_root_in_place`](Self::reduce_into_root_in_place).
    #[track_caller]
    fn immediate_reduce_into_root_in_place<
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
        // SAFETY: the buffer (and the operation, if any) are borrowed for 'a, which the
        // request (settled by its scope) does not outlive.
        let started = unsafe { plan::reduce_root(c, self.root_rank(), &r, &op, false) };
        fatal(started).into_request("immediate_reduce_into_root_in_place", c, buf, scope)
    }

    /// [`gather_into_root`](Root::gather_into_root) with the root's contribution already in
    /// its block of `buf`. The other members call [`gather_into`](Root::gather_into).
    #[track_caller]
    fn gather_into_root_in_place<B: ?Sized + BufferMut>(&self, buf: &mut B) {
        let c = self.comm_data();
        let r = buf.layout_mut();
        // SAFETY: the buffer (and the operation, if any) are borrowed for this blocking call.
        let started = unsafe { plan::gather_root(c, self.root_rank(), None, &r, true) };
        wait(started, "gather_into_root_in_place");
    }

    /// Starts [`gather_into_root_in_place`](Self::gather_into_root_in_place).
    #[track_caller]
    fn immediate_gather_into_root_in_place<'a, B: ?Sized + 'a + BufferMut, Sc: Scope<'a>>(
        &self,
        scope: Sc,
        buf: &'a mut B,
    ) -> Request<'a, B, Sc> {
        let c = self.comm_data();
        let r = buf.layout_mut();
        // SAFETY: the buffer (and the operation, if any) are borrowed for 'a, which the
        // request (settled by its scope) does not outlive.
        let started = unsafe { plan::gather_root(c, self.root_rank(), None, &r, false) };
        fatal(started).into_request("immediate_gather_into_root_in_place", c, buf, scope)
    }

    /// [`gather_varcount_into_root`](Root::gather_varcount_into_root) with the root's
    /// contribution already in its part of `buf`.
    #[track_caller]
    fn gather_varcount_into_root_in_place<B: ?Sized + PartitionedBufferMut>(&self, buf: &mut B) {
        let c = self.comm_data();
        let cd = counts_displs(&*buf);
        let r = buf.layout_mut();
        // SAFETY: the buffer (and the operation, if any) are borrowed for this blocking call.
        let started = unsafe { plan::gather_root(c, self.root_rank(), Some(&cd), &r, true) };
        wait(started, "gather_varcount_into_root_in_place");
    }

    /// Starts [`gather_varcount_into_root_in_place`](Self::gather_varcount_into_root_in_place).
    #[track_caller]
    fn immediate_gather_varcount_into_root_in_place<
        'a,
        B: ?Sized + 'a + PartitionedBufferMut,
        Sc: Scope<'a>,
    >(
        &self,
        scope: Sc,
        buf: &'a mut B,
    ) -> Request<'a, B, Sc> {
        let c = self.comm_data();
        let cd = counts_displs(&*buf);
        let r = buf.layout_mut();
        // SAFETY: the buffer (and the operation, if any) are borrowed for 'a, which the
        // request (settled by its scope) does not outlive.
        let started = unsafe { plan::gather_root(c, self.root_rank(), Some(&cd), &r, false) };
        fatal(started).into_request(
            "immediate_gather_varcount_into_root_in_place",
            c,
            buf,
            scope,
        )
    }

    /// [`scatter_into_root`](Root::scatter_into_root) where the root keeps its own block
    /// where it is in `buf` (it receives nothing). The other members call
    /// [`scatter_into`](Root::scatter_into).
    #[track_caller]
    fn scatter_into_root_in_place<B: ?Sized + BufferMut>(&self, buf: &mut B) {
        let c = self.comm_data();
        let r = buf.layout_mut();
        // SAFETY: the buffer (and the operation, if any) are borrowed for this blocking call.
        let started = unsafe { plan::scatter_root(c, self.root_rank(), None, &r, true) };
        wait(started, "scatter_into_root_in_place");
    }

    /// Starts [`scatter_into_root_in_place`](Self::scatter_into_root_in_place).
    #[track_caller]
    fn immediate_scatter_into_root_in_place<'a, B: ?Sized + 'a + BufferMut, Sc: Scope<'a>>(
        &self,
        scope: Sc,
        buf: &'a mut B,
    ) -> Request<'a, B, Sc> {
        let c = self.comm_data();
        let r = buf.layout_mut();
        // SAFETY: the buffer (and the operation, if any) are borrowed for 'a, which the
        // request (settled by its scope) does not outlive.
        let started = unsafe { plan::scatter_root(c, self.root_rank(), None, &r, false) };
        fatal(started).into_request("immediate_scatter_into_root_in_place", c, buf, scope)
    }

    /// [`scatter_varcount_into_root`](Root::scatter_varcount_into_root) where the root keeps
    /// its own part where it is in `buf`.
    #[track_caller]
    fn scatter_varcount_into_root_in_place<B: ?Sized + PartitionedBufferMut>(&self, buf: &mut B) {
        let c = self.comm_data();
        let cd = counts_displs(&*buf);
        let r = buf.layout_mut();
        // SAFETY: the buffer (and the operation, if any) are borrowed for this blocking call.
        let started = unsafe { plan::scatter_root(c, self.root_rank(), Some(&cd), &r, true) };
        wait(started, "scatter_varcount_into_root_in_place");
    }

    /// Starts [`scatter_varcount_into_root_in_place`](Self::scatter_varcount_into_root_in_place).
    #[track_caller]
    fn immediate_scatter_varcount_into_root_in_place<
        'a,
        B: ?Sized + 'a + PartitionedBufferMut,
        Sc: Scope<'a>,
    >(
        &self,
        scope: Sc,
        buf: &'a mut B,
    ) -> Request<'a, B, Sc> {
        let c = self.comm_data();
        let cd = counts_displs(&*buf);
        let r = buf.layout_mut();
        // SAFETY: the buffer (and the operation, if any) are borrowed for 'a, which the
        // request (settled by its scope) does not outlive.
        let started = unsafe { plan::scatter_root(c, self.root_rank(), Some(&cd), &r, false) };
        fatal(started).into_request(
            "immediate_scatter_varcount_into_root_in_place",
            c,
            buf,
            scope,
        )
    }
}

impl<R: Root + ?Sized> InPlaceRoot for R {}

#[cfg(test)]
mod tests {
    use super::super::in_place_plans::block;
    use super::super::start::Buffers;
    use super::super::Layout;
    use crate::api::datatype::{Buffer, BufferMut};

    fn both<'l>(input: &'l Layout<'l>, output: &'l Layout<'l>) -> bool {
        Buffers::of(Some(input), Some(output)).in_place()
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
