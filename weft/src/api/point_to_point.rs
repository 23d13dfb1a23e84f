//! Point-to-point communication in rsmpi's shape: [`Destination`] (send modes, blocking and
//! immediate), [`Source`] (receive, probe, matched probe), [`Status`], [`Message`], and the
//! combined send-receive functions.

use super::datatype::{Buffer, BufferMut, Datatype, Equivalence, Layout};
use super::request::{Request, Scope, StaticScope};
use super::topology::{AnyProcess, AsCommunicator, Process, Rank};
use crate::comm::group::GroupData;
use crate::comm::CommData;
use crate::engine::buffer::{RawBuf, RawBufMut};
use crate::engine::matching::Pattern;
use crate::engine::request::MsgStatus;
use crate::engine::SendMode;
use crate::error::{Error, ErrorClass, Result};
use crate::runtime;
use std::rc::Rc;

/// A message tag.
pub type Tag = i32;
/// Matches any tag in a receive (MPI_ANY_TAG).
pub const ANY_TAG: Tag = -1;
/// The largest valid tag (MPI_TAG_UB).
pub const TAG_UB: Tag = i32::MAX;

/// What a completed receive got.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Status {
    source: Rank,
    tag: Tag,
    bytes: usize,
    cancelled: bool,
}

impl Status {
    /// Rank of the sender in the communicator.
    pub fn source_rank(&self) -> Rank {
        self.source
    }
    /// The message's tag.
    pub fn tag(&self) -> Tag {
        self.tag
    }
    /// Number of elements of `d` in the message.
    pub fn count<D: Datatype>(&self, d: D) -> super::datatype::Count {
        self.bytes
            .checked_div(d.type_map().size())
            .map_or(0, |c| c as super::datatype::Count)
    }
    /// Bytes in the message.
    pub fn byte_count(&self) -> usize {
        self.bytes
    }
    /// Whether the request was cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.cancelled
    }
}

impl std::fmt::Debug for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Status")
            .field("source_rank", &self.source)
            .field("tag", &self.tag)
            .field("bytes", &self.bytes)
            .finish()
    }
}

#[inline]
pub(crate) fn to_status(st: &MsgStatus, group: Option<&GroupData>) -> Status {
    let source = match group {
        Some(g) => g.rank_of(st.source).map_or(-1, |r| r as Rank),
        None => st.source as Rank,
    };
    Status {
        source,
        tag: st.tag,
        bytes: st.len,
        cancelled: st.cancelled,
    }
}

fn fatal<T>(r: Result<T>) -> T {
    r.unwrap_or_else(|e| panic!("{e}"))
}

#[inline]
fn check_send_tag(call: &'static str, tag: Tag) -> Result<()> {
    if !(0..=TAG_UB).contains(&tag) {
        return Err(Error::new(
            ErrorClass::Tag,
            call,
            format!("tag {tag} is out of range 0..={TAG_UB}"),
        ));
    }
    Ok(())
}

#[inline]
fn recv_tag(call: &'static str, tag: Tag) -> Result<Option<Tag>> {
    match tag {
        ANY_TAG => Ok(None),
        t if (0..=TAG_UB).contains(&t) => Ok(Some(t)),
        t => Err(Error::new(
            ErrorClass::Tag,
            call,
            format!("tag {t} is out of range 0..={TAG_UB} (or ANY_TAG)"),
        )),
    }
}

/// The group used to translate world ranks back to communicator ranks (None for the world).
#[inline]
fn group_of(c: &CommData) -> Option<Rc<GroupData>> {
    (c.pair != crate::comm::context::WORLD_PAIR).then(|| c.group.clone())
}

#[inline]
fn blocking_send(
    comm: &CommData,
    dest: Rank,
    l: Layout<'_>,
    tag: Tag,
    mode: SendMode,
    call: &'static str,
) -> Result<()> {
    check_send_tag(call, tag)?;
    let peer = comm.world_rank(comm.check_rank(call, dest)?);
    let ctx = comm.p2p_context();
    match l.contiguous_bytes() {
        Some(bytes) => runtime::with(|rt| rt.engine.send(peer, ctx, tag, bytes, mode)),
        None => {
            let packed = l.pack();
            runtime::with(|rt| rt.engine.send(peer, ctx, tag, &packed, mode))
        }
    }
}

/// Something messages can be sent to (rsmpi's `Destination`).
pub trait Destination: AsCommunicator {
    /// The destination's rank.
    fn destination_rank(&self) -> Rank;

    /// Blocking standard-mode send with `tag`.
    fn send_with_tag<Buf: ?Sized + Buffer>(&self, buf: &Buf, tag: Tag) {
        fatal(self.try_send_with_tag(buf, tag))
    }
    /// Blocking standard-mode send with tag 0.
    fn send<Buf: ?Sized + Buffer>(&self, buf: &Buf) {
        self.send_with_tag(buf, 0)
    }
    /// Blocking send returning errors (bad tag, rank out of range) instead of panicking.
    fn try_send_with_tag<Buf: ?Sized + Buffer>(&self, buf: &Buf, tag: Tag) -> Result<()> {
        blocking_send(
            self.comm_data(),
            self.destination_rank(),
            buf.layout(),
            tag,
            SendMode::Standard,
            "send",
        )
    }
    /// Blocking synchronous send: returns once the receive has matched.
    fn synchronous_send_with_tag<Buf: ?Sized + Buffer>(&self, buf: &Buf, tag: Tag) {
        let r = blocking_send(
            self.comm_data(),
            self.destination_rank(),
            buf.layout(),
            tag,
            SendMode::Synchronous,
            "synchronous_send",
        );
        fatal(r)
    }
    /// Blocking synchronous send with tag 0.
    fn synchronous_send<Buf: ?Sized + Buffer>(&self, buf: &Buf) {
        self.synchronous_send_with_tag(buf, 0)
    }
    /// Blocking ready-mode send.
    ///
    /// # Safety
    /// The matching receive must already be posted (MPI's rule; weft tolerates it not being).
    unsafe fn ready_send_with_tag<Buf: ?Sized + Buffer>(&self, buf: &Buf, tag: Tag) {
        fatal(blocking_send(
            self.comm_data(),
            self.destination_rank(),
            buf.layout(),
            tag,
            SendMode::Ready,
            "ready_send",
        ))
    }
    /// Blocking ready-mode send with tag 0.
    ///
    /// # Safety
    /// See [`Destination::ready_send_with_tag`].
    unsafe fn ready_send<Buf: ?Sized + Buffer>(&self, buf: &Buf) {
        // SAFETY: same contract as the caller's.
        unsafe { self.ready_send_with_tag(buf, 0) }
    }
    /// Buffered send: copies into the attached buffer and returns.
    fn buffered_send_with_tag<Buf: ?Sized + Buffer>(&self, buf: &Buf, tag: Tag) {
        fatal(self.try_buffered_send_with_tag(buf, tag))
    }
    /// Buffered send with tag 0.
    fn buffered_send<Buf: ?Sized + Buffer>(&self, buf: &Buf) {
        self.buffered_send_with_tag(buf, 0)
    }
    /// Buffered send returning errors (e.g. the attached buffer is too small).
    fn try_buffered_send_with_tag<Buf: ?Sized + Buffer>(&self, buf: &Buf, tag: Tag) -> Result<()> {
        check_send_tag("buffered_send", tag)?;
        let c = self.comm_data();
        let peer = c.world_rank(c.check_rank("buffered_send", self.destination_rank())?);
        let l = buf.layout();
        let packed;
        let bytes = match l.contiguous_bytes() {
            Some(b) => b,
            None => {
                packed = l.pack();
                &packed
            }
        };
        runtime::with(|rt| {
            let h = rt.engine.bsend(peer, c.p2p_context(), tag, bytes)?;
            rt.engine.detach(h);
            Ok(())
        })
    }

    /// Starts a standard-mode send with `tag`.
    fn immediate_send_with_tag<'a, Sc: Scope<'a>, Buf: ?Sized + Buffer>(
        &self,
        scope: Sc,
        buf: &'a Buf,
        tag: Tag,
    ) -> Request<'a, Buf, Sc> {
        fatal(immediate_send(
            self.comm_data(),
            self.destination_rank(),
            scope,
            buf,
            tag,
            SendMode::Standard,
        ))
    }
    /// Starts a standard-mode send with tag 0.
    fn immediate_send<'a, Sc: Scope<'a>, Buf: ?Sized + Buffer>(
        &self,
        scope: Sc,
        buf: &'a Buf,
    ) -> Request<'a, Buf, Sc> {
        self.immediate_send_with_tag(scope, buf, 0)
    }
    /// Starts a synchronous send with `tag`.
    fn immediate_synchronous_send_with_tag<'a, Sc: Scope<'a>, Buf: ?Sized + Buffer>(
        &self,
        scope: Sc,
        buf: &'a Buf,
        tag: Tag,
    ) -> Request<'a, Buf, Sc> {
        fatal(immediate_send(
            self.comm_data(),
            self.destination_rank(),
            scope,
            buf,
            tag,
            SendMode::Synchronous,
        ))
    }
    /// Starts a synchronous send with tag 0.
    fn immediate_synchronous_send<'a, Sc: Scope<'a>, Buf: ?Sized + Buffer>(
        &self,
        scope: Sc,
        buf: &'a Buf,
    ) -> Request<'a, Buf, Sc> {
        self.immediate_synchronous_send_with_tag(scope, buf, 0)
    }
    /// Starts a ready-mode send with `tag`.
    ///
    /// # Safety
    /// See [`Destination::ready_send_with_tag`].
    unsafe fn immediate_ready_send_with_tag<'a, Sc: Scope<'a>, Buf: ?Sized + Buffer>(
        &self,
        scope: Sc,
        buf: &'a Buf,
        tag: Tag,
    ) -> Request<'a, Buf, Sc> {
        fatal(immediate_send(
            self.comm_data(),
            self.destination_rank(),
            scope,
            buf,
            tag,
            SendMode::Ready,
        ))
    }
    /// Starts a ready-mode send with tag 0.
    ///
    /// # Safety
    /// See [`Destination::ready_send_with_tag`].
    unsafe fn immediate_ready_send<'a, Sc: Scope<'a>, Buf: ?Sized + Buffer>(
        &self,
        scope: Sc,
        buf: &'a Buf,
    ) -> Request<'a, Buf, Sc> {
        // SAFETY: same contract as the caller's.
        unsafe { self.immediate_ready_send_with_tag(scope, buf, 0) }
    }
    /// Starts a buffered send with `tag` (completes at once: the data is copied).
    fn immediate_buffered_send_with_tag<'a, Sc: Scope<'a>, Buf: ?Sized + Buffer>(
        &self,
        scope: Sc,
        buf: &'a Buf,
        tag: Tag,
    ) -> Request<'a, Buf, Sc> {
        check_send_tag("immediate_buffered_send", tag).unwrap_or_else(|e| panic!("{e}"));
        let c = self.comm_data();
        let peer = c.world_rank(fatal(
            c.check_rank("immediate_buffered_send", self.destination_rank()),
        ));
        let l = buf.layout();
        let bytes = l
            .contiguous_bytes()
            .map(<[u8]>::to_vec)
            .unwrap_or_else(|| l.pack());
        let h = fatal(runtime::with(|rt| {
            rt.engine.bsend(peer, c.p2p_context(), tag, &bytes)
        }));
        Request::new(h, buf as *const Buf, None, scope)
    }
    /// Starts a buffered send with tag 0.
    fn immediate_buffered_send<'a, Sc: Scope<'a>, Buf: ?Sized + Buffer>(
        &self,
        scope: Sc,
        buf: &'a Buf,
    ) -> Request<'a, Buf, Sc> {
        self.immediate_buffered_send_with_tag(scope, buf, 0)
    }
}

fn immediate_send<'a, Sc: Scope<'a>, Buf: ?Sized + Buffer>(
    c: &CommData,
    dest: Rank,
    scope: Sc,
    buf: &'a Buf,
    tag: Tag,
    mode: SendMode,
) -> Result<Request<'a, Buf, Sc>> {
    check_send_tag("immediate_send", tag)?;
    let peer = c.world_rank(c.check_rank("immediate_send", dest)?);
    let l = buf.layout();
    let ctx = c.p2p_context();
    match l.contiguous_bytes() {
        Some(bytes) => {
            // SAFETY: `buf` stays borrowed for 'a, which the request (bound to its scope, which
            // completes it before the borrow ends) does not outlive.
            let raw = unsafe { RawBuf::new(bytes) };
            let h = runtime::with(|rt| rt.engine.isend(peer, ctx, tag, raw, mode))?;
            Ok(Request::new(h, buf as *const Buf, None, scope))
        }
        None => {
            // Pack once; the packed copy lives in the request until it completes.
            let packed: Box<[u8]> = l.pack().into_boxed_slice();
            // SAFETY: the request owns `packed` (its finish closure) and completes before
            // dropping it; a boxed slice's heap block does not move with the box.
            let raw = unsafe { RawBuf::new(&packed) };
            let h = runtime::with(|rt| rt.engine.isend(peer, ctx, tag, raw, mode))?;
            Ok(Request::new(h, buf as *const Buf, None, scope)
                .with_finish(Box::new(move || drop(packed))))
        }
    }
}

impl Destination for Process<'_> {
    fn destination_rank(&self) -> Rank {
        self.rank
    }
}

#[inline]
fn source_pattern(
    c: &CommData,
    source: Option<Rank>,
    tag: Tag,
    call: &'static str,
) -> Result<Pattern> {
    let source = match source {
        Some(r) => Some(c.world_rank(c.check_rank(call, r)?)),
        None => None,
    };
    Ok(Pattern {
        context: c.p2p_context(),
        source,
        tag: recv_tag(call, tag)?,
    })
}

#[inline]
fn blocking_recv(c: &CommData, pattern: Pattern, l: Layout<'_>) -> Result<Status> {
    let group = group_of(c);
    let st = if l.map.is_contiguous() {
        let n = l.data_len();
        // SAFETY: BufferMut promises `count` writable contiguous elements at `ptr`, and the
        // caller holds the `&mut` borrow for this whole blocking call.
        let bytes = unsafe { std::slice::from_raw_parts_mut(l.ptr as *mut u8, n) };
        runtime::with(|rt| rt.engine.recv(pattern, bytes))?
    } else {
        let mut tmp = vec![0u8; l.data_len()];
        let st = runtime::with(|rt| rt.engine.recv(pattern, &mut tmp))?;
        // SAFETY: BufferMut promises `count` writable elements of the layout at `ptr`.
        unsafe {
            l.map
                .unpack(&tmp[..st.len.min(tmp.len())], l.ptr as *mut u8, l.count)
        };
        st
    };
    Ok(to_status(&st, group.as_deref()))
}

fn immediate_recv<'a, Sc: Scope<'a>, Buf: ?Sized + BufferMut>(
    c: &CommData,
    pattern: Pattern,
    scope: Sc,
    buf: &'a mut Buf,
) -> Result<Request<'a, Buf, Sc>> {
    let group = group_of(c);
    let l = buf.layout_mut();
    if !l.map.is_contiguous() {
        return Err(Error::unsupported(
            "immediate_receive_into",
            "nonblocking receives into non-contiguous datatypes are not supported yet; use a \
             blocking receive or a contiguous buffer",
        ));
    }
    let n = l.data_len();
    // SAFETY: BufferMut promises `n` writable contiguous bytes at `ptr`; `buf` stays
    // mutably borrowed for 'a, which the request (bound to its scope) does not outlive.
    let raw = unsafe { RawBufMut::new(std::slice::from_raw_parts_mut(l.ptr as *mut u8, n)) };
    let h = runtime::with(|rt| rt.engine.irecv(pattern, raw))?;
    Ok(Request::new(h, buf as *const Buf, group, scope))
}

fn zeroed<T: Equivalence>() -> T {
    // SAFETY: `Equivalence` types are plain data for which all-zero bytes are a valid value
    // (numbers, bool, char, arrays/tuples/derived structs of those).
    unsafe { std::mem::zeroed() }
}

/// Something messages can be received from (rsmpi's `Source`).
pub trait Source: AsCommunicator {
    /// The source's rank, or `None` for any source.
    #[doc(hidden)]
    fn source_selector(&self) -> Option<Rank>;
    /// The source's rank (-1 for any process).
    fn source_rank(&self) -> Rank {
        self.source_selector().unwrap_or(-1)
    }

    /// Blocking receive into `buf` of a message with `tag` (or [`ANY_TAG`]).
    fn receive_into_with_tag<Buf: ?Sized + BufferMut>(&self, buf: &mut Buf, tag: Tag) -> Status {
        fatal(self.try_receive_into_with_tag(buf, tag))
    }
    /// Blocking receive into `buf`, any tag.
    fn receive_into<Buf: ?Sized + BufferMut>(&self, buf: &mut Buf) -> Status {
        self.receive_into_with_tag(buf, ANY_TAG)
    }
    /// Blocking receive returning errors (truncation, bad tag) instead of panicking.
    fn try_receive_into_with_tag<Buf: ?Sized + BufferMut>(
        &self,
        buf: &mut Buf,
        tag: Tag,
    ) -> Result<Status> {
        let c = self.comm_data();
        let p = source_pattern(c, self.source_selector(), tag, "receive")?;
        blocking_recv(c, p, buf.layout_mut())
    }
    /// Blocking receive of one value with `tag`.
    fn receive_with_tag<Msg: Equivalence>(&self, tag: Tag) -> (Msg, Status) {
        let mut v = zeroed::<Msg>();
        let st = self.receive_into_with_tag(&mut v, tag);
        (v, st)
    }
    /// Blocking receive of one value, any tag.
    fn receive<Msg: Equivalence>(&self) -> (Msg, Status) {
        self.receive_with_tag(ANY_TAG)
    }
    /// Blocking receive of a message of any length into a new vector.
    fn receive_vec_with_tag<Msg: Equivalence>(&self, tag: Tag) -> (Vec<Msg>, Status) {
        self.matched_probe_with_tag(tag).matched_receive_vec()
    }
    /// [`Source::receive_vec_with_tag`] with any tag.
    fn receive_vec<Msg: Equivalence>(&self) -> (Vec<Msg>, Status) {
        self.receive_vec_with_tag(ANY_TAG)
    }
    /// Starts a receive into `buf` with `tag`.
    fn immediate_receive_into_with_tag<'a, Sc: Scope<'a>, Buf: ?Sized + BufferMut>(
        &self,
        scope: Sc,
        buf: &'a mut Buf,
        tag: Tag,
    ) -> Request<'a, Buf, Sc> {
        let c = self.comm_data();
        let p = fatal(source_pattern(
            c,
            self.source_selector(),
            tag,
            "immediate_receive_into",
        ));
        fatal(immediate_recv(c, p, scope, buf))
    }
    /// Starts a receive into `buf`, any tag.
    fn immediate_receive_into<'a, Sc: Scope<'a>, Buf: ?Sized + BufferMut>(
        &self,
        scope: Sc,
        buf: &'a mut Buf,
    ) -> Request<'a, Buf, Sc> {
        self.immediate_receive_into_with_tag(scope, buf, ANY_TAG)
    }
    /// Starts a receive of one value with `tag`.
    fn immediate_receive_with_tag<Msg: Equivalence + 'static>(
        &self,
        tag: Tag,
    ) -> ReceiveFuture<Msg> {
        let mut val = Box::new(zeroed::<Msg>());
        let ptr: *mut Msg = &mut *val;
        // SAFETY: the box's heap slot does not move while the future (which owns the box)
        // lives, and the future completes the request before handing the value out.
        let req = self.immediate_receive_into_with_tag(StaticScope, unsafe { &mut *ptr }, tag);
        ReceiveFuture {
            val: Some(val),
            req: Some(req),
        }
    }
    /// Starts a receive of one value, any tag.
    fn immediate_receive<Msg: Equivalence + 'static>(&self) -> ReceiveFuture<Msg> {
        self.immediate_receive_with_tag(ANY_TAG)
    }
    /// Waits for a message with `tag` to arrive and returns its status without receiving it.
    fn probe_with_tag(&self, tag: Tag) -> Status {
        let c = self.comm_data();
        let p = fatal(source_pattern(c, self.source_selector(), tag, "probe"));
        let st = runtime::with(|rt| rt.engine.probe(&p));
        to_status(&st, group_of(c).as_deref())
    }
    /// [`Source::probe_with_tag`] with any tag.
    fn probe(&self) -> Status {
        self.probe_with_tag(ANY_TAG)
    }
    /// Whether a message with `tag` has arrived.
    fn immediate_probe_with_tag(&self, tag: Tag) -> Option<Status> {
        let c = self.comm_data();
        let p = fatal(source_pattern(
            c,
            self.source_selector(),
            tag,
            "immediate_probe",
        ));
        let st = runtime::with(|rt| rt.engine.iprobe(&p))?;
        Some(to_status(&st, group_of(c).as_deref()))
    }
    /// [`Source::immediate_probe_with_tag`] with any tag.
    fn immediate_probe(&self) -> Option<Status> {
        self.immediate_probe_with_tag(ANY_TAG)
    }
    /// Waits for a message with `tag` and claims it for a matched receive.
    fn matched_probe_with_tag(&self, tag: Tag) -> (Message, Status) {
        let c = self.comm_data();
        let p = fatal(source_pattern(
            c,
            self.source_selector(),
            tag,
            "matched_probe",
        ));
        let (id, st) = runtime::with(|rt| rt.engine.mprobe(&p));
        let group = group_of(c);
        let status = to_status(&st, group.as_deref());
        (
            Message {
                id: Some(id),
                group,
            },
            status,
        )
    }
    /// [`Source::matched_probe_with_tag`] with any tag.
    fn matched_probe(&self) -> (Message, Status) {
        self.matched_probe_with_tag(ANY_TAG)
    }
    /// Claims a message with `tag` if one has arrived.
    fn immediate_matched_probe_with_tag(&self, tag: Tag) -> Option<(Message, Status)> {
        let c = self.comm_data();
        let p = fatal(source_pattern(
            c,
            self.source_selector(),
            tag,
            "immediate_matched_probe",
        ));
        let (id, st) = runtime::with(|rt| rt.engine.improbe(&p))?;
        let group = group_of(c);
        let status = to_status(&st, group.as_deref());
        Some((
            Message {
                id: Some(id),
                group,
            },
            status,
        ))
    }
    /// [`Source::immediate_matched_probe_with_tag`] with any tag.
    fn immediate_matched_probe(&self) -> Option<(Message, Status)> {
        self.immediate_matched_probe_with_tag(ANY_TAG)
    }
}

impl Source for Process<'_> {
    fn source_selector(&self) -> Option<Rank> {
        Some(self.rank)
    }
}

impl Source for AnyProcess<'_> {
    fn source_selector(&self) -> Option<Rank> {
        None
    }
}

/// A message claimed by a matched probe; it must be received with one of its methods.
#[must_use = "a matched message must be received"]
pub struct Message {
    id: Option<u64>,
    group: Option<Rc<GroupData>>,
}

impl Message {
    fn take(&mut self) -> u64 {
        self.id.take().expect("message not yet received")
    }
    /// Receives the message into `buf`.
    pub fn matched_receive_into<Buf: ?Sized + BufferMut>(mut self, buf: &mut Buf) -> Status {
        let id = self.take();
        let l = buf.layout_mut();
        let group = self.group.clone();
        let st = if l.map.is_contiguous() {
            // SAFETY: BufferMut promises `data_len` writable contiguous bytes at `ptr`,
            // borrowed mutably for this blocking call.
            let bytes = unsafe { std::slice::from_raw_parts_mut(l.ptr as *mut u8, l.data_len()) };
            runtime::with(|rt| {
                // SAFETY: `bytes` is borrowed for this call; `wait` returns once it is done.
                let raw = unsafe { RawBufMut::new(bytes) };
                rt.engine.mrecv(id, raw).and_then(|h| rt.engine.wait(h))
            })
        } else {
            let mut tmp = vec![0u8; l.data_len()];
            let st = runtime::with(|rt| {
                // SAFETY: `tmp` outlives this call; `wait` returns once it is done.
                let raw = unsafe { RawBufMut::new(&mut tmp) };
                rt.engine.mrecv(id, raw).and_then(|h| rt.engine.wait(h))
            });
            // SAFETY: BufferMut promises `count` writable elements of the layout at `ptr`.
            unsafe { l.map.unpack(&tmp, l.ptr as *mut u8, l.count) };
            st
        };
        to_status(&fatal(st), group.as_deref())
    }
    /// Receives the message as one value.
    pub fn matched_receive<Msg: Equivalence>(self) -> (Msg, Status) {
        let mut v = zeroed::<Msg>();
        let st = self.matched_receive_into(&mut v);
        (v, st)
    }
    /// Starts receiving the message into `buf`.
    pub fn immediate_matched_receive_into<'a, Sc: Scope<'a>, Buf: ?Sized + BufferMut>(
        mut self,
        scope: Sc,
        buf: &'a mut Buf,
    ) -> Request<'a, Buf, Sc> {
        let id = self.take();
        let l = buf.layout_mut();
        if !l.map.is_contiguous() {
            panic!(
                "{}",
                Error::unsupported(
                    "immediate_matched_receive_into",
                    "non-contiguous datatypes are not supported yet"
                )
            );
        }
        // SAFETY: as in `immediate_receive_into`: writable, borrowed for 'a.
        let raw = unsafe {
            RawBufMut::new(std::slice::from_raw_parts_mut(
                l.ptr as *mut u8,
                l.data_len(),
            ))
        };
        let h = fatal(runtime::with(|rt| rt.engine.mrecv(id, raw)));
        Request::new(h, buf as *const Buf, self.group.clone(), scope)
    }
}

impl Drop for Message {
    fn drop(&mut self) {
        if self.id.is_some() && !std::thread::panicking() {
            panic!("weft: a message claimed by a matched probe was dropped without being received");
        }
    }
}

/// Receiving a matched message of any length into a vector.
pub trait MatchedReceiveVec {
    /// Receives into a new vector sized from the status.
    fn matched_receive_vec<Msg: Equivalence>(self) -> (Vec<Msg>, Status);
}

impl MatchedReceiveVec for (Message, Status) {
    fn matched_receive_vec<Msg: Equivalence>(self) -> (Vec<Msg>, Status) {
        let (msg, st) = self;
        let n = st.count(Msg::equivalent_datatype()).max(0) as usize;
        let mut v: Vec<Msg> = (0..n).map(|_| zeroed::<Msg>()).collect();
        let st = msg.matched_receive_into(&mut v[..]);
        (v, st)
    }
}

/// A receive of one value in flight.
pub struct ReceiveFuture<T: 'static> {
    val: Option<Box<T>>,
    req: Option<Request<'static, T>>,
}

impl<T: 'static> ReceiveFuture<T> {
    /// Waits and returns the value.
    pub fn get(mut self) -> (T, Status) {
        let st = self.req.take().expect("pending").wait();
        (*self.val.take().expect("value"), st)
    }
    /// The value if it arrived, or the future back.
    pub fn r#try(mut self) -> std::result::Result<(T, Status), Self> {
        match self.req.take().expect("pending").test() {
            Ok(st) => Ok((*self.val.take().expect("value"), st)),
            Err(r) => {
                self.req = Some(r);
                Err(self)
            }
        }
    }
}

impl<T: 'static> Drop for ReceiveFuture<T> {
    fn drop(&mut self) {
        if let Some(r) = self.req.take() {
            r.wait();
        }
    }
}

/// Sends `msg` to `destination` with `sendtag` and receives a value from `source` with
/// `receivetag`, without deadlocking when both sides do it at once.
pub fn send_receive_with_tags<M, D, R, S>(
    msg: &M,
    destination: &D,
    sendtag: Tag,
    source: &S,
    receivetag: Tag,
) -> (R, Status)
where
    M: Equivalence,
    D: Destination,
    R: Equivalence,
    S: Source,
{
    let mut r = zeroed::<R>();
    let st = send_receive_into_with_tags(msg, destination, sendtag, &mut r, source, receivetag);
    (r, st)
}

/// [`send_receive_with_tags`] with tags 0 / any.
pub fn send_receive<R, M, D, S>(msg: &M, destination: &D, source: &S) -> (R, Status)
where
    M: Equivalence,
    D: Destination,
    R: Equivalence,
    S: Source,
{
    send_receive_with_tags(msg, destination, 0, source, ANY_TAG)
}

/// Sends `msg` and receives into `buf` at once.
pub fn send_receive_into_with_tags<M, D, B, S>(
    msg: &M,
    destination: &D,
    sendtag: Tag,
    buf: &mut B,
    source: &S,
    receivetag: Tag,
) -> Status
where
    M: ?Sized + Buffer,
    D: Destination,
    B: ?Sized + BufferMut,
    S: Source,
{
    super::request::scope(|scope| {
        let sreq = destination.immediate_send_with_tag(scope, msg, sendtag);
        let st = source.receive_into_with_tag(buf, receivetag);
        sreq.wait();
        st
    })
}

/// [`send_receive_into_with_tags`] with tags 0 / any.
pub fn send_receive_into<M, D, B, S>(msg: &M, destination: &D, buf: &mut B, source: &S) -> Status
where
    M: ?Sized + Buffer,
    D: Destination,
    B: ?Sized + BufferMut,
    S: Source,
{
    send_receive_into_with_tags(msg, destination, 0, buf, source, ANY_TAG)
}

/// Sends the contents of `buf` and replaces them with the received message.
pub fn send_receive_replace_into_with_tags<B, D, S>(
    buf: &mut B,
    destination: &D,
    sendtag: Tag,
    source: &S,
    receivetag: Tag,
) -> Status
where
    B: ?Sized + Buffer + BufferMut,
    D: Destination,
    S: Source,
{
    let copy = buf.layout().pack();
    let c = destination.comm_data();
    let st = super::request::scope(|scope| {
        let peer = c.world_rank(fatal(
            c.check_rank("send_receive_replace", destination.destination_rank()),
        ));
        fatal(check_send_tag("send_receive_replace", sendtag));
        // SAFETY: `copy` outlives the scope, which completes the send request before ending.
        let raw = unsafe { RawBuf::new(&copy) };
        let h = fatal(runtime::with(|rt| {
            rt.engine
                .isend(peer, c.p2p_context(), sendtag, raw, SendMode::Standard)
        }));
        let sreq: Request<'_, [u8], _> = Request::new(h, &copy[..] as *const [u8], None, scope);
        let st = source.receive_into_with_tag(buf, receivetag);
        sreq.wait();
        st
    });
    st
}

/// [`send_receive_replace_into_with_tags`] with tags 0 / any.
pub fn send_receive_replace_into<B, D, S>(buf: &mut B, destination: &D, source: &S) -> Status
where
    B: ?Sized + Buffer + BufferMut,
    D: Destination,
    S: Source,
{
    send_receive_replace_into_with_tags(buf, destination, 0, source, ANY_TAG)
}

/// Traits to glob-import.
pub mod traits {
    pub use super::{Destination, MatchedReceiveVec, Source};
}
