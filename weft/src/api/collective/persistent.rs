//! Persistent collectives (MPI-4's `MPI_Barrier_init`, `MPI_Bcast_init`, …; a Weft
//! extension: rsmpi has none): a collective set up once and started many times, each start
//! completed by `wait` or `test` before the next.
//!
//! A [`PersistentRequest`] owns its buffers (values, arrays, `Vec`s: `'static` types, no
//! borrows), in a box the operation reads and writes while it runs; between runs
//! [`buffers_mut`](PersistentRequest::buffers_mut) gives them back to refill or read. So the
//! borrow checker needs no scope: the buffers cannot be touched while a start runs, dropping
//! the request waits for it, and a request leaked with `mem::forget` leaks its buffers with
//! it, so nothing the operation writes is ever freed under it.
//!
//! Every member initializes a communicator's persistent collectives in the same order as
//! its other collectives, and takes the collective's sequence number then; each start runs
//! the collective anew (the algorithm the model picks, by messages) under that number, so
//! starts need not be ordered against other collectives. `init_root` forms are the root's
//! (`ROOT` on an intercommunicator), the others a member's that is not the root.

use super::alltoallw::{plan_all_to_all_w, Part, PartMut};
use super::reduce_scatter::plan_reduce_scatter_varcount;
use super::rooted::{plan_broadcast, plan_reduce, plan_rooted, Rooted};
use super::start::Started;
use super::Reduce;
use super::{parts, plan_all_gather, plan_all_gather_varcount, plan_all_to_all, plan_barrier};
use super::{plan_reduction, Buffer, BufferMut, CommData, Communicator, Operation, Process};
use crate::api::datatype::Count;
use crate::error::{fatal, Error, ErrorClass, Result};
use crate::runtime;

/// How a persistent collective starts: plans the collective over its boxed buffers.
type Plan<B> = Box<dyn Fn(&CommData, &mut B) -> Result<Started>>;

/// A partitioned buffer's counts and displacements (in elements), one of each per member.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Parts {
    /// Elements of each member's part.
    pub counts: Vec<Count>,
    /// Where each member's part starts.
    pub displs: Vec<Count>,
}

impl Parts {
    /// Parts of `counts` elements at `displs`.
    pub fn new(counts: Vec<Count>, displs: Vec<Count>) -> Self {
        Parts { counts, displs }
    }

    /// Parts of `counts` elements, each right after the one before.
    pub fn packed(counts: Vec<Count>) -> Self {
        let displs = counts
            .iter()
            .scan(0, |at, &c| Some(std::mem::replace(at, *at + c)))
            .collect();
        Parts { counts, displs }
    }
}

/// A persistent collective: set up by an `*_init` call, run by [`start`](Self::start), and
/// completed by [`wait`](Self::wait) or [`test`](Self::test), as often as needed.
pub struct PersistentRequest<'c, B: 'static> {
    call: &'static str,
    comm: &'c CommData,
    tag: i32,
    /// Boxed, so moving the request moves no buffer a start writes; `None` only once
    /// `into_buffers` took them.
    buffers: Option<Box<B>>,
    plan: Plan<B>,
    /// The running start, if any.
    active: Option<Started>,
}

impl<B: 'static> std::fmt::Debug for PersistentRequest<'_, B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PersistentRequest")
            .field("call", &self.call)
            .field("tag", &self.tag)
            .field("active", &self.active.is_some())
            .finish_non_exhaustive()
    }
}

impl<'c, B: 'static> PersistentRequest<'c, B> {
    fn new(call: &'static str, comm: &'c CommData, buffers: B, plan: Plan<B>) -> Self {
        let pair = comm.pair;
        let tag = runtime::with_call(call, |rt| rt.sequences.next_tag(pair));
        PersistentRequest {
            call,
            comm,
            tag,
            buffers: Some(Box::new(buffers)),
            plan,
            active: None,
        }
    }

    /// Starts the collective (MPI_Start). Panics when the previous start has not been
    /// completed, or on bad arguments (naming the call and the values).
    #[track_caller]
    pub fn start(&mut self) {
        fatal(self.try_start())
    }

    /// [`start`](Self::start), returning errors.
    pub fn try_start(&mut self) -> Result<()> {
        if self.active.is_some() {
            return Err(Error::new(
                ErrorClass::Arg,
                self.call,
                "started while its previous start runs (wait for it or test it first)",
            ));
        }
        let (pair, tag) = (self.comm.pair, self.tag);
        runtime::with_call(self.call, |rt| rt.sequences.replay(Some((pair, tag))));
        // The replay ends with the planning, whatever happens in it (an error before the
        // collective starts, or a panic): the next collective must take its own number.
        let _forget = ForgetReplay;
        let buffers = self.buffers.as_mut().expect("the buffers");
        let started = (self.plan)(self.comm, buffers);
        self.active = Some(started?);
        Ok(())
    }

    /// Waits for the running start to complete (nothing when none runs).
    #[track_caller]
    pub fn wait(&mut self) {
        fatal(self.try_wait())
    }

    /// [`wait`](Self::wait), returning errors.
    pub fn try_wait(&mut self) -> Result<()> {
        match self.active.take() {
            None => Ok(()),
            Some(s) => s.wait(self.call),
        }
    }

    /// Whether the running start has completed (completing it if so; `true` when none runs).
    #[track_caller]
    pub fn test(&mut self) -> bool {
        let Some(s) = &mut self.active else {
            return true;
        };
        // SAFETY: the buffers the start writes are boxed and out of reach while it runs.
        let done = fatal(unsafe { s.test(self.call) });
        if done {
            self.active = None;
        }
        done
    }

    /// Whether a start runs.
    pub fn is_active(&self) -> bool {
        self.active.is_some()
    }

    /// The buffers, between starts. Panics while a start runs.
    #[track_caller]
    pub fn buffers(&self) -> &B {
        self.check_inactive("buffers");
        self.buffers.as_ref().expect("the buffers")
    }

    /// The buffers, to read results and write the next start's data. Panics while a start
    /// runs.
    #[track_caller]
    pub fn buffers_mut(&mut self) -> &mut B {
        self.check_inactive("buffers_mut");
        self.buffers.as_mut().expect("the buffers")
    }

    /// The buffers, after waiting for a running start.
    #[track_caller]
    pub fn into_buffers(mut self) -> B {
        self.wait();
        *self
            .buffers
            .take()
            .expect("the buffers are there until now")
    }

    #[track_caller]
    fn check_inactive(&self, what: &str) {
        if self.active.is_some() {
            panic!(
                "weft: {}: {what} while a start runs (wait for it or test it first)",
                self.call
            );
        }
    }
}

/// A collective sequence number taken when a persistent collective is initialized, for a
/// front end that runs each start through the immediate calls (the C ABI's
/// `MPI_Bcast_init` and the others): [`replay`](Self::replay) runs one start under it, so
/// starts match by initialization order, whatever order the members start them in.
#[doc(hidden)]
#[derive(Clone, Copy, Debug)]
pub struct ReservedSequence {
    pair: u32,
    tag: i32,
}

impl ReservedSequence {
    /// Takes the next sequence number of `comm`'s collectives (collective over `comm`, in
    /// the order of its other collectives, like any initialization).
    pub fn take<C: Communicator + ?Sized>(call: &'static str, comm: &C) -> Self {
        let pair = comm.comm_data().pair;
        let tag = runtime::with_call(call, |rt| rt.sequences.next_tag(pair));
        ReservedSequence { pair, tag }
    }

    /// Runs `start` (which starts one collective on the communicator) under the number.
    pub fn replay<T>(&self, call: &'static str, start: impl FnOnce() -> T) -> T {
        let (pair, tag) = (self.pair, self.tag);
        runtime::with_call(call, |rt| rt.sequences.replay(Some((pair, tag))));
        let _forget = ForgetReplay;
        start()
    }
}

/// Clears a replayed sequence number when dropped.
struct ForgetReplay;

impl Drop for ForgetReplay {
    fn drop(&mut self) {
        runtime::try_with(|rt| rt.sequences.replay(None));
    }
}

impl<B: 'static> Drop for PersistentRequest<'_, B> {
    fn drop(&mut self) {
        // A start still running writes the boxed buffers: wait for it before they go.
        if let Some(s) = self.active.take() {
            let r = s.wait(self.call);
            if let Err(e) = r {
                if !std::thread::panicking() {
                    panic!("{e}");
                }
            }
        }
    }
}

/// Persistent collectives on a whole communicator.
pub trait PersistentCollectives: Communicator {
    /// A persistent [`barrier`](super::CommunicatorCollectives::barrier).
    fn barrier_init(&self) -> PersistentRequest<'_, ()> {
        let plan: Plan<()> = Box::new(|c, _| plan_barrier(c, false));
        PersistentRequest::new("barrier_init", self.comm_data(), (), plan)
    }

    /// A persistent [`all_gather_into`](super::CommunicatorCollectives::all_gather_into)
    /// from `send` into `recv`.
    fn all_gather_init<S: Buffer + 'static, R: BufferMut + 'static>(
        &self,
        send: S,
        recv: R,
    ) -> PersistentRequest<'_, (S, R)> {
        let plan: Plan<(S, R)> = Box::new(|c, (s, r)| {
            let (s, r) = (s.layout(), r.layout_mut());
            // SAFETY: the boxed buffers stay put and out of reach while a start runs (the
            // module's doc).
            unsafe { plan_all_gather(c, &s, &r, false) }
        });
        PersistentRequest::new("all_gather_init", self.comm_data(), (send, recv), plan)
    }

    /// A persistent all-gather with a part of `recv` per member.
    fn all_gather_varcount_init<S: Buffer + 'static, R: BufferMut + 'static>(
        &self,
        send: S,
        recv: R,
        recv_parts: Parts,
    ) -> PersistentRequest<'_, (S, R)> {
        let plan: Plan<(S, R)> = Box::new(move |c, (s, r)| {
            let (s, r) = (s.layout(), r.layout_mut());
            let p = (recv_parts.counts.clone(), recv_parts.displs.clone());
            // SAFETY: as in `all_gather_init`.
            unsafe { plan_all_gather_varcount(c, &s, p, &r) }
        });
        PersistentRequest::new(
            "all_gather_varcount_init",
            self.comm_data(),
            (send, recv),
            plan,
        )
    }

    /// A persistent [`all_to_all_into`](super::CommunicatorCollectives::all_to_all_into).
    fn all_to_all_init<S: Buffer + 'static, R: BufferMut + 'static>(
        &self,
        send: S,
        recv: R,
    ) -> PersistentRequest<'_, (S, R)> {
        let plan: Plan<(S, R)> = Box::new(|c, (s, r)| {
            let (s, r) = (s.layout(), r.layout_mut());
            // SAFETY: as in `all_gather_init`.
            unsafe { plan_all_to_all(c, &s, None, &r, None, false) }
        });
        PersistentRequest::new("all_to_all_init", self.comm_data(), (send, recv), plan)
    }

    /// A persistent all-to-all with a part per member each way.
    fn all_to_all_varcount_init<S: Buffer + 'static, R: BufferMut + 'static>(
        &self,
        send: S,
        send_parts: Parts,
        recv: R,
        recv_parts: Parts,
    ) -> PersistentRequest<'_, (S, R)> {
        let plan: Plan<(S, R)> = Box::new(move |c, (s, r)| {
            let (s, r) = (s.layout(), r.layout_mut());
            let sp = (&send_parts.counts[..], &send_parts.displs[..]);
            let rp = (&recv_parts.counts[..], &recv_parts.displs[..]);
            // SAFETY: as in `all_gather_init`.
            unsafe { plan_all_to_all(c, &s, Some(sp), &r, Some(rp), false) }
        });
        PersistentRequest::new(
            "all_to_all_varcount_init",
            self.comm_data(),
            (send, recv),
            plan,
        )
    }

    /// A persistent [`all_to_all_w_into`](super::CommunicatorCollectives::all_to_all_w_into)
    /// (MPI_Alltoallw_init): `sends[j]` goes to member j, member i's part lands in `recvs[i]`,
    /// one buffer per member each way, each with its own count. The parts share one buffer
    /// type each way; for a datatype per part, make that type an enum whose `Buffer` impl
    /// gives each variant's layout.
    fn all_to_all_w_init<S: Buffer + 'static, R: BufferMut + 'static>(
        &self,
        sends: Vec<S>,
        recvs: Vec<R>,
    ) -> PersistentRequest<'_, (Vec<S>, Vec<R>)> {
        const CALL: &str = "all_to_all_w_init";
        let plan: Plan<(Vec<S>, Vec<R>)> = Box::new(|c, (s, r)| {
            let sends: Vec<Part<'_>> = s.iter().map(|b| Part::new(b)).collect();
            let mut recvs: Vec<PartMut<'_>> = r.iter_mut().map(|b| PartMut::new(b)).collect();
            // SAFETY: as in `all_gather_init` (the boxed buffers are also out of reach when
            // the start's completion lands the receive parts).
            unsafe { plan_all_to_all_w(c, CALL, &sends, &mut recvs) }
        });
        PersistentRequest::new(CALL, self.comm_data(), (sends, recvs), plan)
    }

    /// A persistent [`all_reduce_into`](super::CommunicatorCollectives::all_reduce_into).
    fn all_reduce_init<S, R, O>(&self, send: S, recv: R, op: O) -> PersistentRequest<'_, (S, R)>
    where
        S: Buffer + 'static,
        R: BufferMut + 'static,
        O: Operation + 'static,
    {
        reduction_init(
            self.comm_data(),
            "all_reduce_init",
            Reduce::All,
            send,
            recv,
            op,
        )
    }

    /// A persistent
    /// [`reduce_scatter_block_into`](super::CommunicatorCollectives::reduce_scatter_block_into).
    fn reduce_scatter_block_init<S, R, O>(
        &self,
        send: S,
        recv: R,
        op: O,
    ) -> PersistentRequest<'_, (S, R)>
    where
        S: Buffer + 'static,
        R: BufferMut + 'static,
        O: Operation + 'static,
    {
        let kind = Reduce::ScatterBlock;
        reduction_init(
            self.comm_data(),
            "reduce_scatter_block_init",
            kind,
            send,
            recv,
            op,
        )
    }

    /// A persistent reduce-scatter with a part of `send` per member.
    fn reduce_scatter_varcount_init<S, R, O>(
        &self,
        send: S,
        send_parts: Parts,
        recv: R,
        op: O,
    ) -> PersistentRequest<'_, (S, R)>
    where
        S: Buffer + 'static,
        R: BufferMut + 'static,
        O: Operation + 'static,
    {
        let plan: Plan<(S, R)> = Box::new(move |c, (s, r)| {
            let (s, r) = (s.layout(), r.layout_mut());
            let p = (&send_parts.counts[..], &send_parts.displs[..]);
            // SAFETY: as in `all_gather_init`; the operation lives in the plan, as long as
            // the request.
            unsafe { plan_reduce_scatter_varcount(c, &s, p, &r, &op) }
        });
        let call = "reduce_scatter_varcount_init";
        PersistentRequest::new(call, self.comm_data(), (send, recv), plan)
    }

    /// A persistent [`scan_into`](super::CommunicatorCollectives::scan_into).
    fn scan_init<S, R, O>(&self, send: S, recv: R, op: O) -> PersistentRequest<'_, (S, R)>
    where
        S: Buffer + 'static,
        R: BufferMut + 'static,
        O: Operation + 'static,
    {
        reduction_init(self.comm_data(), "scan_init", Reduce::Scan, send, recv, op)
    }

    /// A persistent
    /// [`exclusive_scan_into`](super::CommunicatorCollectives::exclusive_scan_into).
    fn exclusive_scan_init<S, R, O>(&self, send: S, recv: R, op: O) -> PersistentRequest<'_, (S, R)>
    where
        S: Buffer + 'static,
        R: BufferMut + 'static,
        O: Operation + 'static,
    {
        let kind = Reduce::ExclusiveScan;
        reduction_init(
            self.comm_data(),
            "exclusive_scan_init",
            kind,
            send,
            recv,
            op,
        )
    }
}

impl<C: Communicator + ?Sized> PersistentCollectives for C {}

fn reduction_init<'c, S, R, O>(
    comm: &'c CommData,
    call: &'static str,
    kind: Reduce,
    send: S,
    recv: R,
    op: O,
) -> PersistentRequest<'c, (S, R)>
where
    S: Buffer + 'static,
    R: BufferMut + 'static,
    O: Operation + 'static,
{
    let plan: Plan<(S, R)> = Box::new(move |c, (s, r)| {
        let (s, r) = (s.layout(), r.layout_mut());
        // SAFETY: as in `all_gather_init`; the operation lives in the plan, as long as the
        // request.
        unsafe { plan_reduction(c, kind, &s, &r, &op, false) }
    });
    PersistentRequest::new(call, comm, (send, recv), plan)
}

/// The rooted persistent collectives, on the root process (as rsmpi's `Root`): the `_root`
/// forms at the root, the others elsewhere.
impl<'c> Process<'c> {
    /// A persistent [`broadcast_into`](super::Root::broadcast_into) of `buf`.
    pub fn broadcast_init<B: BufferMut + 'static>(self, buf: B) -> PersistentRequest<'c, B> {
        let root = self.rank;
        let plan: Plan<B> = Box::new(move |c, b| {
            let l = b.layout_mut();
            // SAFETY: as in `all_gather_init`.
            unsafe { plan_broadcast(c, root, &l, false) }
        });
        PersistentRequest::new("broadcast_init", self.comm, buf, plan)
    }

    /// A persistent [`reduce_into`](super::Root::reduce_into): `send` to the root.
    pub fn reduce_init<S, O>(self, send: S, op: O) -> PersistentRequest<'c, S>
    where
        S: Buffer + 'static,
        O: Operation + 'static,
    {
        let root = self.rank;
        let plan: Plan<S> = Box::new(move |c, s| {
            let s = s.layout();
            // SAFETY: as in `all_gather_init`; the operation lives in the plan.
            unsafe { plan_reduce(c, "reduce_init", root, &s, None, &op, false) }
        });
        PersistentRequest::new("reduce_init", self.comm, send, plan)
    }

    /// A persistent [`reduce_into_root`](super::Root::reduce_into_root): the reduction in
    /// `recv`.
    pub fn reduce_init_root<S, R, O>(self, send: S, recv: R, op: O) -> PersistentRequest<'c, (S, R)>
    where
        S: Buffer + 'static,
        R: BufferMut + 'static,
        O: Operation + 'static,
    {
        let root = self.rank;
        let plan: Plan<(S, R)> = Box::new(move |c, (s, r)| {
            let (s, r) = (s.layout(), r.layout_mut());
            // SAFETY: as in `all_gather_init`; the operation lives in the plan.
            unsafe { plan_reduce(c, "reduce_init_root", root, &s, Some(&r), &op, false) }
        });
        PersistentRequest::new("reduce_init_root", self.comm, (send, recv), plan)
    }

    /// A persistent [`gather_into`](super::Root::gather_into): `send` to the root.
    pub fn gather_init<S: Buffer + 'static>(self, send: S) -> PersistentRequest<'c, S> {
        self.rooted_send("gather_init", None, send)
    }

    /// A persistent gather with a count per member: `send` to the root.
    pub fn gather_varcount_init<S: Buffer + 'static>(self, send: S) -> PersistentRequest<'c, S> {
        let n = self.comm.peers().size();
        self.rooted_send("gather_varcount_init", Some(n), send)
    }

    /// A persistent [`gather_into_root`](super::Root::gather_into_root) into `recv`.
    pub fn gather_init_root<S, R>(self, send: S, recv: R) -> PersistentRequest<'c, (S, R)>
    where
        S: Buffer + 'static,
        R: BufferMut + 'static,
    {
        self.rooted_both("gather_init_root", true, None, send, recv)
    }

    /// A persistent gather with a part of `recv` per member, at the root.
    pub fn gather_varcount_init_root<S, R>(
        self,
        send: S,
        recv: R,
        recv_parts: Parts,
    ) -> PersistentRequest<'c, (S, R)>
    where
        S: Buffer + 'static,
        R: BufferMut + 'static,
    {
        self.rooted_both(
            "gather_varcount_init_root",
            true,
            Some(recv_parts),
            send,
            recv,
        )
    }

    /// A persistent [`scatter_into`](super::Root::scatter_into): this member's block into
    /// `recv`.
    pub fn scatter_init<R: BufferMut + 'static>(self, recv: R) -> PersistentRequest<'c, R> {
        self.rooted_recv("scatter_init", None, recv)
    }

    /// A persistent scatter with a count per member: this member's part into `recv`.
    pub fn scatter_varcount_init<R: BufferMut + 'static>(
        self,
        recv: R,
    ) -> PersistentRequest<'c, R> {
        let n = self.comm.peers().size();
        self.rooted_recv("scatter_varcount_init", Some(n), recv)
    }

    /// A persistent [`scatter_into_root`](super::Root::scatter_into_root) of `send`.
    pub fn scatter_init_root<S, R>(self, send: S, recv: R) -> PersistentRequest<'c, (S, R)>
    where
        S: Buffer + 'static,
        R: BufferMut + 'static,
    {
        self.rooted_both("scatter_init_root", false, None, send, recv)
    }

    /// A persistent scatter with a part of `send` per member, at the root.
    pub fn scatter_varcount_init_root<S, R>(
        self,
        send: S,
        send_parts: Parts,
        recv: R,
    ) -> PersistentRequest<'c, (S, R)>
    where
        S: Buffer + 'static,
        R: BufferMut + 'static,
    {
        self.rooted_both(
            "scatter_varcount_init_root",
            false,
            Some(send_parts),
            send,
            recv,
        )
    }

    /// A member's side of a gather (`None`: equal blocks; `Some(n)`: counts only the root
    /// knows, over `n` members).
    fn rooted_send<S: Buffer + 'static>(
        self,
        call: &'static str,
        varcount: Option<usize>,
        send: S,
    ) -> PersistentRequest<'c, S> {
        let root = self.rank;
        let plan: Plan<S> = Box::new(move |c, s| {
            let s = s.layout();
            let how = Rooted::Gather(varcount.map(|n| vec![(0, 0); n]));
            // SAFETY: as in `all_gather_init`.
            unsafe { plan_rooted(c, call, root, how, Some(&s), None, false) }
        });
        PersistentRequest::new(call, self.comm, send, plan)
    }

    /// A member's side of a scatter (as `rooted_send`).
    fn rooted_recv<R: BufferMut + 'static>(
        self,
        call: &'static str,
        varcount: Option<usize>,
        recv: R,
    ) -> PersistentRequest<'c, R> {
        let root = self.rank;
        let plan: Plan<R> = Box::new(move |c, r| {
            let r = r.layout_mut();
            let how = Rooted::Scatter(varcount.map(|n| vec![(0, 0); n]));
            // SAFETY: as in `all_gather_init`.
            unsafe { plan_rooted(c, call, root, how, None, Some(&r), false) }
        });
        PersistentRequest::new(call, self.comm, recv, plan)
    }

    /// The root's side of a gather (`gathers`) or scatter, with its parts or equal blocks.
    fn rooted_both<S: Buffer + 'static, R: BufferMut + 'static>(
        self,
        call: &'static str,
        gathers: bool,
        parts_of_root: Option<Parts>,
        send: S,
        recv: R,
    ) -> PersistentRequest<'c, (S, R)> {
        let root = self.rank;
        let plan: Plan<(S, R)> = Box::new(move |c, (s, r)| {
            let (s, r) = (s.layout(), r.layout_mut());
            let n = c.peers().size();
            let blocks = match &parts_of_root {
                None => None,
                Some(p) if gathers => {
                    Some(parts(call, "receive buffer", n, &r, &p.counts, &p.displs)?)
                }
                Some(p) => Some(parts(call, "send buffer", n, &s, &p.counts, &p.displs)?),
            };
            let how = if gathers {
                Rooted::Gather(blocks)
            } else {
                Rooted::Scatter(blocks)
            };
            // SAFETY: as in `all_gather_init`.
            unsafe { plan_rooted(c, call, root, how, Some(&s), Some(&r), false) }
        });
        PersistentRequest::new(call, self.comm, (send, recv), plan)
    }
}

/// Persistent neighbourhood collectives (MPI-4's `MPI_Neighbor_*_init`), on a communicator
/// with a process topology (see [`NeighborCollectives`](super::NeighborCollectives)).
pub trait PersistentNeighborCollectives: Communicator {
    /// A persistent
    /// [`neighbor_all_gather_into`](super::NeighborCollectives::neighbor_all_gather_into).
    fn neighbor_all_gather_init<S: Buffer + 'static, R: BufferMut + 'static>(
        &self,
        send: S,
        recv: R,
    ) -> PersistentRequest<'_, (S, R)> {
        neighbor_all_gather(
            self.comm_data(),
            "neighbor_all_gather_init",
            send,
            recv,
            None,
        )
    }

    /// A persistent neighbour all-gather with a part of `recv` per source.
    fn neighbor_all_gather_varcount_init<S: Buffer + 'static, R: BufferMut + 'static>(
        &self,
        send: S,
        recv: R,
        recv_parts: Parts,
    ) -> PersistentRequest<'_, (S, R)> {
        let call = "neighbor_all_gather_varcount_init";
        neighbor_all_gather(self.comm_data(), call, send, recv, Some(recv_parts))
    }

    /// A persistent
    /// [`neighbor_all_to_all_into`](super::NeighborCollectives::neighbor_all_to_all_into).
    fn neighbor_all_to_all_init<S: Buffer + 'static, R: BufferMut + 'static>(
        &self,
        send: S,
        recv: R,
    ) -> PersistentRequest<'_, (S, R)> {
        neighbor_all_to_all(
            self.comm_data(),
            "neighbor_all_to_all_init",
            send,
            recv,
            None,
        )
    }

    /// A persistent neighbour all-to-all with a part per neighbour each way.
    fn neighbor_all_to_all_varcount_init<S: Buffer + 'static, R: BufferMut + 'static>(
        &self,
        send: S,
        send_parts: Parts,
        recv: R,
        recv_parts: Parts,
    ) -> PersistentRequest<'_, (S, R)> {
        let call = "neighbor_all_to_all_varcount_init";
        let v = (
            (send_parts.counts, send_parts.displs),
            (recv_parts.counts, recv_parts.displs),
        );
        neighbor_all_to_all(self.comm_data(), call, send, recv, Some(v))
    }

    /// A persistent
    /// [`neighbor_all_to_all_w_into`](super::NeighborCollectives::neighbor_all_to_all_w_into)
    /// (MPI_Neighbor_alltoallw_init): `sends[k]` to destination k, source k's block into
    /// `recvs[k]` (one buffer type each way, as for
    /// [`all_to_all_w_init`](PersistentCollectives::all_to_all_w_init)).
    fn neighbor_all_to_all_w_init<S: Buffer + 'static, R: BufferMut + 'static>(
        &self,
        sends: Vec<S>,
        recvs: Vec<R>,
    ) -> PersistentRequest<'_, (Vec<S>, Vec<R>)> {
        const CALL: &str = "neighbor_all_to_all_w_init";
        let plan: Plan<(Vec<S>, Vec<R>)> = Box::new(|c, (s, r)| {
            let sends: Vec<&dyn Buffer> = s.iter().map(|b| b as &dyn Buffer).collect();
            let mut recvs: Vec<&mut dyn BufferMut> =
                r.iter_mut().map(|b| b as &mut dyn BufferMut).collect();
            // SAFETY: as in `all_to_all_w_init`.
            unsafe { super::neighbor::plan_all_to_all_w(c, CALL, &sends, &mut recvs) }
        });
        PersistentRequest::new(CALL, self.comm_data(), (sends, recvs), plan)
    }
}

impl<C: Communicator + ?Sized> PersistentNeighborCollectives for C {}

fn neighbor_all_gather<'c, S: Buffer + 'static, R: BufferMut + 'static>(
    comm: &'c CommData,
    call: &'static str,
    send: S,
    recv: R,
    parts: Option<Parts>,
) -> PersistentRequest<'c, (S, R)> {
    let plan: Plan<(S, R)> = Box::new(move |c, (s, r)| {
        let (s, r) = (s.layout(), r.layout_mut());
        let p = parts.as_ref().map(|p| (p.counts.clone(), p.displs.clone()));
        // SAFETY: as in `all_gather_init`.
        unsafe { super::neighbor::plan_all_gather(c, call, &s, &r, p) }
    });
    PersistentRequest::new(call, comm, (send, recv), plan)
}

fn neighbor_all_to_all<'c, S: Buffer + 'static, R: BufferMut + 'static>(
    comm: &'c CommData,
    call: &'static str,
    send: S,
    recv: R,
    varcounts: Option<super::neighbor::Varcounts>,
) -> PersistentRequest<'c, (S, R)> {
    let plan: Plan<(S, R)> = Box::new(move |c, (s, r)| {
        let (s, r) = (s.layout(), r.layout_mut());
        // SAFETY: as in `all_gather_init`.
        unsafe { super::neighbor::plan_all_to_all(c, call, &s, &r, varcounts.clone()) }
    });
    PersistentRequest::new(call, comm, (send, recv), plan)
}
