//! Point-to-point communication in rsmpi's shape: [`Destination`] (send modes, blocking and
//! immediate), [`Source`] (receive, probe, matched probe), [`Status`], [`Message`], and the
//! combined send-receive functions.

use super::datatype::TypeMap;
use super::datatype::{Buffer, BufferMut, Datatype, Equivalence, Layout};
use super::request::{Request, Scope, StaticScope};
use super::status::to_status;
pub use super::status::{Status, UNDEFINED};
use super::topology::{AnyProcess, AsCommunicator, Process, Rank};
use crate::comm::group::GroupData;
use crate::comm::CommData;
use crate::engine::buffer::{RawBuf, RawBufMut};
use crate::engine::matching::Pattern;
use crate::engine::request::MsgStatus;
use crate::engine::SendMode;
use crate::error::{fatal, Error, ErrorClass, Result};
use crate::runtime;
use std::rc::Rc;

/// A message tag.
pub type Tag = i32;
/// Matches any tag in a receive (MPI_ANY_TAG).
pub const ANY_TAG: Tag = -1;
/// The largest valid tag (MPI_TAG_UB).
pub const TAG_UB: Tag = i32::MAX;

#[inline]
pub(crate) fn check_send_tag(call: &'static str, tag: Tag) -> Result<()> {
    if !(0..=TAG_UB).contains(&tag) {
        return Err(send_tag_out_of_range(call, tag));
    }
    Ok(())
}

/// [`check_send_tag`]'s error: out of line, so that the check inlines small.
#[cold]
#[inline(never)]
fn send_tag_out_of_range(call: &'static str, tag: Tag) -> Error {
    Error::new(
        ErrorClass::Tag,
        call,
        format!("tag {tag} is out of range 0..={TAG_UB}"),
    )
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
pub(crate) fn group_of(c: &CommData) -> Option<Rc<GroupData>> {
    translation_group(c).cloned()
}

/// [`group_of`], borrowed.
#[inline]
pub(crate) fn translation_group(c: &CommData) -> Option<&Rc<GroupData>> {
    match &c.remote {
        Some(remote) => Some(remote),
        None => (c.pair != crate::comm::context::WORLD_PAIR).then_some(&c.group),
    }
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
    let peer = comm.peer_world_rank(call, dest)?;
    let ctx = comm.p2p_context();
    match l.contiguous_bytes() {
        Some(bytes) => runtime::with_call(call, |rt| rt.engine.send(peer, ctx, tag, bytes, mode)),
        None => {
            let packed = l.pack();
            runtime::with_call(call, |rt| rt.engine.send(peer, ctx, tag, &packed, mode))
        }
    }
}

/// Starts a buffered send of `l`: its data is copied once, into the attached buffer (packed
/// there when the layout is not contiguous).
fn buffered_copy(
    rt: &mut runtime::Runtime,
    peer: u32,
    context: u32,
    tag: Tag,
    l: &Layout<'_>,
) -> Result<crate::engine::request::Handle> {
    rt.engine.bsend_from(peer, context, tag, l.data_len(), || {
        l.contiguous_bytes()
            .map_or_else(|| l.pack(), <[u8]>::to_vec)
    })
}

/// Something messages can be sent to (rsmpi's `Destination`).
pub trait Destination: AsCommunicator {
    /// The destination's rank.
    fn destination_rank(&self) -> Rank;

    /// Blocking standard-mode send with `tag`.
    #[track_caller]
    fn send_with_tag<Buf: ?Sized + Buffer>(&self, buf: &Buf, tag: Tag) {
        fatal(self.try_send_with_tag(buf, tag))
    }
    /// Blocking standard-mode send with tag 0.
    #[track_caller]
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
    #[track_caller]
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
    #[track_caller]
    fn synchronous_send<Buf: ?Sized + Buffer>(&self, buf: &Buf) {
        self.synchronous_send_with_tag(buf, 0)
    }
    /// Blocking ready-mode send.
    ///
    /// # Safety
    /// The matching receive must already be posted (MPI's rule; weft tolerates it not being).
    #[track_caller]
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
    #[track_caller]
    unsafe fn ready_send<Buf: ?Sized + Buffer>(&self, buf: &Buf) {
        // SAFETY: same contract as the caller's.
        unsafe { self.ready_send_with_tag(buf, 0) }
    }
    /// Buffered send: copies into the attached buffer and returns.
    #[track_caller]
    fn buffered_send_with_tag<Buf: ?Sized + Buffer>(&self, buf: &Buf, tag: Tag) {
        fatal(self.try_buffered_send_with_tag(buf, tag))
    }
    /// Buffered send with tag 0.
    #[track_caller]
    fn buffered_send<Buf: ?Sized + Buffer>(&self, buf: &Buf) {
        self.buffered_send_with_tag(buf, 0)
    }
    /// Buffered send returning errors (e.g. the attached buffer is too small).
    fn try_buffered_send_with_tag<Buf: ?Sized + Buffer>(&self, buf: &Buf, tag: Tag) -> Result<()> {
        check_send_tag("buffered_send", tag)?;
        let c = self.comm_data();
        let peer = c.peer_world_rank("buffered_send", self.destination_rank())?;
        let l = buf.layout();
        runtime::with_call("buffered_send", |rt| {
            let h = buffered_copy(rt, peer, c.p2p_context(), tag, &l)?;
            rt.engine.detach(h);
            Ok(())
        })
    }

    /// Starts a standard-mode send with `tag`.
    #[track_caller]
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
    #[track_caller]
    fn immediate_send<'a, Sc: Scope<'a>, Buf: ?Sized + Buffer>(
        &self,
        scope: Sc,
        buf: &'a Buf,
    ) -> Request<'a, Buf, Sc> {
        self.immediate_send_with_tag(scope, buf, 0)
    }
    /// Starts a synchronous send with `tag`.
    #[track_caller]
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
    #[track_caller]
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
    #[track_caller]
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
    #[track_caller]
    unsafe fn immediate_ready_send<'a, Sc: Scope<'a>, Buf: ?Sized + Buffer>(
        &self,
        scope: Sc,
        buf: &'a Buf,
    ) -> Request<'a, Buf, Sc> {
        // SAFETY: same contract as the caller's.
        unsafe { self.immediate_ready_send_with_tag(scope, buf, 0) }
    }
    /// Starts a buffered send with `tag` (completes at once: the data is copied).
    #[track_caller]
    fn immediate_buffered_send_with_tag<'a, Sc: Scope<'a>, Buf: ?Sized + Buffer>(
        &self,
        scope: Sc,
        buf: &'a Buf,
        tag: Tag,
    ) -> Request<'a, Buf, Sc> {
        const CALL: &str = "immediate_buffered_send";
        fatal(check_send_tag(CALL, tag));
        let c = self.comm_data();
        let peer = fatal(c.peer_world_rank(CALL, self.destination_rank()));
        let l = buf.layout();
        let h = fatal(runtime::with_call(CALL, |rt| {
            buffered_copy(rt, peer, c.p2p_context(), tag, &l)
        }));
        Request::new(h, buf as *const Buf, None, scope)
    }
    /// Starts a buffered send with tag 0.
    #[track_caller]
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
    let peer = c.peer_world_rank("immediate_send", dest)?;
    let l = buf.layout();
    let ctx = c.p2p_context();
    match l.contiguous_bytes() {
        Some(bytes) => {
            // SAFETY: `buf` stays borrowed for 'a, which the request (bound to its scope, which
            // settles it before the borrow ends) does not outlive.
            let raw = unsafe { RawBuf::new(bytes) };
            let h = runtime::with_call("immediate_send", |rt| {
                rt.engine.isend(peer, ctx, tag, raw, mode)
            })?;
            Ok(Request::new(h, buf as *const Buf, None, scope))
        }
        None => {
            // Pack once; the packed copy lives in the request until it completes.
            let packed: Box<[u8]> = l.pack().into_boxed_slice();
            // SAFETY: the request owns `packed` (its finish closure) and completes before
            // dropping it; a boxed slice's heap block does not move with the box.
            let raw = unsafe { RawBuf::new(&packed) };
            let h = runtime::with_call("immediate_send", |rt| {
                rt.engine.isend(peer, ctx, tag, raw, mode)
            })?;
            Ok(
                Request::new(h, buf as *const Buf, None, scope).with_finish(Box::new(
                    move |_: &MsgStatus| {
                        drop(packed);
                        Ok(())
                    },
                )),
            )
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
        Some(r) => Some(c.peer_world_rank(call, r)?),
        None => None,
    };
    Ok(Pattern {
        context: c.p2p_context(),
        source,
        tag: recv_tag(call, tag)?,
    })
}

/// Where a receive puts the message: straight into the buffer when its layout is contiguous
/// plain data, else into a staging buffer that [`Staged::land`] checks and scatters.
pub(crate) enum Landing<'b> {
    Direct(&'b mut [u8]),
    Staged(Staged),
}

impl<'b> Landing<'b> {
    /// The landing for a receive into `l`.
    ///
    /// # Safety
    /// `l` must come from a `BufferMut` borrowed mutably for `'b`.
    pub(crate) unsafe fn new(l: &Layout<'b>) -> Self {
        if l.map.is_contiguous() && !l.map.is_restricted() {
            // SAFETY: BufferMut promises `data_len` writable contiguous bytes at `ptr`,
            // borrowed mutably for 'b (the caller's promise).
            Landing::Direct(unsafe {
                std::slice::from_raw_parts_mut(l.ptr as *mut u8, l.data_len())
            })
        } else {
            Landing::Staged(Staged::new(l))
        }
    }

    fn bytes(&mut self) -> &mut [u8] {
        match self {
            Landing::Direct(b) => b,
            Landing::Staged(s) => &mut s.tmp,
        }
    }
}

/// A receive's staging buffer: for a non-contiguous layout, or one holding values (bool,
/// char) that must be checked before they are written to the user's memory.
pub(crate) struct Staged {
    pub(crate) tmp: Vec<u8>,
    ptr: *mut u8,
    count: usize,
    map: TypeMap,
}

impl Staged {
    /// A staging buffer that starts with the buffer's contents (for data the operation
    /// reads from the buffer too: a broadcast's root, an in-place reduction).
    pub(crate) fn with_contents(l: &Layout<'_>) -> Self {
        Staged {
            tmp: l.pack(),
            ptr: l.ptr as *mut u8,
            count: l.count,
            map: l.map.as_ref().clone(),
        }
    }

    /// A zeroed staging buffer for `l`.
    pub(crate) fn with_zeros(l: &Layout<'_>) -> Self {
        Staged {
            tmp: vec![0u8; l.data_len()],
            ptr: l.ptr as *mut u8,
            count: l.count,
            map: l.map.as_ref().clone(),
        }
    }

    fn new(l: &Layout<'_>) -> Self {
        // With restricted values, start from the buffer's own (valid) contents: a last
        // element the message fills only in part is then checked whole, as it will be in
        // the buffer.
        let tmp = if l.map.is_restricted() {
            l.pack()
        } else {
            vec![0u8; l.data_len()]
        };
        Staged {
            tmp,
            ptr: l.ptr as *mut u8,
            count: l.count,
            map: l.map.as_ref().clone(),
        }
    }

    /// Checks the `len` received bytes and scatters them into the buffer; the elements past
    /// the message are left as they were (MPI).
    ///
    /// # Safety
    /// The buffer the staging was made for must still be borrowed mutably by the caller.
    pub(crate) unsafe fn land(&self, call: &'static str, len: usize) -> Result<()> {
        let n = len.min(self.tmp.len());
        let size = self.map.size();
        let whole = if size == 0 {
            0
        } else {
            (n.div_ceil(size) * size).min(self.tmp.len())
        };
        self.map.check_values(call, &self.tmp[..whole])?;
        // SAFETY: BufferMut promises `count` writable elements of the layout at `ptr`, still
        // borrowed (the caller's promise); `n` bytes fill at most `count` elements.
        unsafe { self.map.unpack(&self.tmp[..n], self.ptr, self.count) };
        Ok(())
    }
}

#[inline]
fn blocking_recv(
    c: &CommData,
    pattern: Pattern,
    l: Layout<'_>,
    call: &'static str,
) -> Result<Status> {
    let group = group_of(c);
    // SAFETY: `l` comes from the caller's `&mut` BufferMut, held for this blocking call.
    let mut landing = unsafe { Landing::new(&l) };
    let st = runtime::with_call(call, |rt| rt.engine.recv(pattern, landing.bytes()))?;
    if let Landing::Staged(s) = &landing {
        // SAFETY: the buffer is still borrowed by the caller.
        unsafe { s.land(call, st.len)? };
    }
    Ok(to_status(&st, group.as_deref()))
}

/// Posts a receive whose data lands through `l` (already started by `post` into the raw
/// buffer it is given) and wraps it in a request that lands the data at completion.
fn receive_request<'a, Sc: Scope<'a>, Buf: ?Sized + BufferMut>(
    call: &'static str,
    scope: Sc,
    buf: &'a mut Buf,
    group: Option<Rc<GroupData>>,
    post: impl FnOnce(&mut runtime::Runtime, RawBufMut) -> Result<crate::engine::request::Handle>,
) -> Result<Request<'a, Buf, Sc>> {
    let l = buf.layout_mut();
    // SAFETY: `l` comes from `buf`, borrowed mutably for 'a, which the request (bound to
    // its scope, which settles it before 'a ends) does not outlive.
    match unsafe { Landing::new(&l) } {
        Landing::Direct(bytes) => {
            // SAFETY: `bytes` is `buf`'s memory, borrowed mutably for 'a, which the request
            // (bound to its scope, which settles it before 'a ends) does not outlive.
            let raw = unsafe { RawBufMut::new(bytes) };
            let h = runtime::with_call(call, |rt| post(rt, raw))?;
            Ok(Request::new(h, buf as *const Buf, group, scope))
        }
        Landing::Staged(mut s) => {
            // The staging vector moves into the request; its heap block does not move.
            // SAFETY: the staging vector moves into the request's finish closure, which is
            // dropped only once the request is settled; moving it does not move its heap block.
            let raw = unsafe { RawBufMut::new(&mut s.tmp) };
            let h = runtime::with_call(call, |rt| post(rt, raw))?;
            Ok(
                Request::new(h, buf as *const Buf, group, scope).with_finish(Box::new(
                    // SAFETY: the finish runs only when the request completes, while `buf` is
                    // still borrowed for 'a.
                    move |st: &MsgStatus| unsafe { s.land(call, st.len) },
                )),
            )
        }
    }
}

fn immediate_recv<'a, Sc: Scope<'a>, Buf: ?Sized + BufferMut>(
    c: &CommData,
    pattern: Pattern,
    scope: Sc,
    buf: &'a mut Buf,
    call: &'static str,
) -> Result<Request<'a, Buf, Sc>> {
    receive_request(call, scope, buf, group_of(c), |rt, raw| {
        rt.engine.irecv(pattern, raw)
    })
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
    #[track_caller]
    fn receive_into_with_tag<Buf: ?Sized + BufferMut>(&self, buf: &mut Buf, tag: Tag) -> Status {
        fatal(self.try_receive_into_with_tag(buf, tag))
    }
    /// Blocking receive into `buf`, any tag.
    #[track_caller]
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
        blocking_recv(c, p, buf.layout_mut(), "receive")
    }
    /// Blocking receive of one value with `tag`.
    #[track_caller]
    fn receive_with_tag<Msg: Equivalence>(&self, tag: Tag) -> (Msg, Status) {
        let mut v = zeroed::<Msg>();
        let c = self.comm_data();
        let p = fatal(source_pattern(c, self.source_selector(), tag, "receive"));
        let st = fatal(blocking_recv(c, p, v.layout_mut(), "receive"));
        (v, st)
    }
    /// Blocking receive of one value, any tag.
    #[track_caller]
    fn receive<Msg: Equivalence>(&self) -> (Msg, Status) {
        self.receive_with_tag(ANY_TAG)
    }
    /// Blocking receive of a message of any length into a new vector.
    #[track_caller]
    fn receive_vec_with_tag<Msg: Equivalence>(&self, tag: Tag) -> (Vec<Msg>, Status) {
        let (msg, st) = self.matched_probe_with_tag(tag);
        fatal(msg.receive_vec_for("receive_vec", &st))
    }
    /// [`Source::receive_vec_with_tag`] with any tag.
    #[track_caller]
    fn receive_vec<Msg: Equivalence>(&self) -> (Vec<Msg>, Status) {
        self.receive_vec_with_tag(ANY_TAG)
    }
    /// Starts a receive into `buf` with `tag`.
    #[track_caller]
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
        fatal(immediate_recv(c, p, scope, buf, "immediate_receive_into"))
    }
    /// Starts a receive into `buf`, any tag.
    #[track_caller]
    fn immediate_receive_into<'a, Sc: Scope<'a>, Buf: ?Sized + BufferMut>(
        &self,
        scope: Sc,
        buf: &'a mut Buf,
    ) -> Request<'a, Buf, Sc> {
        self.immediate_receive_into_with_tag(scope, buf, ANY_TAG)
    }
    /// Starts a receive of one value with `tag`.
    #[track_caller]
    fn immediate_receive_with_tag<Msg: Equivalence + 'static>(
        &self,
        tag: Tag,
    ) -> ReceiveFuture<Msg> {
        let mut val = Box::new(zeroed::<Msg>());
        let ptr: *mut Msg = &mut *val;
        let c = self.comm_data();
        let p = fatal(source_pattern(
            c,
            self.source_selector(),
            tag,
            "immediate_receive",
        ));
        // SAFETY: the box's heap slot does not move while the future (which owns the box)
        // lives, and the future completes or settles the request before the box goes.
        let buf = unsafe { &mut *ptr };
        let req = fatal(immediate_recv(c, p, StaticScope, buf, "immediate_receive"));
        ReceiveFuture {
            val: Some(val),
            req: Some(req),
        }
    }
    /// Starts a receive of one value, any tag.
    #[track_caller]
    fn immediate_receive<Msg: Equivalence + 'static>(&self) -> ReceiveFuture<Msg> {
        self.immediate_receive_with_tag(ANY_TAG)
    }
    /// Waits for a message with `tag` to arrive and returns its status without receiving it.
    #[track_caller]
    fn probe_with_tag(&self, tag: Tag) -> Status {
        let c = self.comm_data();
        let p = fatal(source_pattern(c, self.source_selector(), tag, "probe"));
        let st = runtime::with_call("probe", |rt| rt.engine.probe(&p));
        to_status(&st, group_of(c).as_deref())
    }
    /// [`Source::probe_with_tag`] with any tag.
    #[track_caller]
    fn probe(&self) -> Status {
        self.probe_with_tag(ANY_TAG)
    }
    /// Whether a message with `tag` has arrived.
    #[track_caller]
    fn immediate_probe_with_tag(&self, tag: Tag) -> Option<Status> {
        let c = self.comm_data();
        let p = fatal(source_pattern(
            c,
            self.source_selector(),
            tag,
            "immediate_probe",
        ));
        let st = runtime::with_call("immediate_probe", |rt| rt.engine.iprobe(&p))?;
        Some(to_status(&st, group_of(c).as_deref()))
    }
    /// [`Source::immediate_probe_with_tag`] with any tag.
    #[track_caller]
    fn immediate_probe(&self) -> Option<Status> {
        self.immediate_probe_with_tag(ANY_TAG)
    }
    /// Waits for a message with `tag` and claims it for a matched receive.
    #[track_caller]
    fn matched_probe_with_tag(&self, tag: Tag) -> (Message, Status) {
        let c = self.comm_data();
        let p = fatal(source_pattern(
            c,
            self.source_selector(),
            tag,
            "matched_probe",
        ));
        let (id, st) = runtime::with_call("matched_probe", |rt| rt.engine.mprobe(&p));
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
    #[track_caller]
    fn matched_probe(&self) -> (Message, Status) {
        self.matched_probe_with_tag(ANY_TAG)
    }
    /// Claims a message with `tag` if one has arrived.
    #[track_caller]
    fn immediate_matched_probe_with_tag(&self, tag: Tag) -> Option<(Message, Status)> {
        let c = self.comm_data();
        let p = fatal(source_pattern(
            c,
            self.source_selector(),
            tag,
            "immediate_matched_probe",
        ));
        let (id, st) = runtime::with_call("immediate_matched_probe", |rt| rt.engine.improbe(&p))?;
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
    #[track_caller]
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
    #[track_caller]
    pub fn matched_receive_into<Buf: ?Sized + BufferMut>(self, buf: &mut Buf) -> Status {
        fatal(self.receive_into_for("matched_receive_into", buf))
    }

    fn receive_into_for<Buf: ?Sized + BufferMut>(
        mut self,
        call: &'static str,
        buf: &mut Buf,
    ) -> Result<Status> {
        let id = self.take();
        let l = buf.layout_mut();
        // SAFETY: `l` comes from `buf`, borrowed mutably for this blocking call.
        let mut landing = unsafe { Landing::new(&l) };
        let st = runtime::with_call(call, |rt| {
            // SAFETY: the landing bytes (`buf`'s, or the staging vector's) outlive this
            // blocking call, and `wait` returns only once the receive is done.
            let raw = unsafe { RawBufMut::new(landing.bytes()) };
            let h = rt.engine.mrecv(id, raw)?;
            rt.engine.wait(h)
        })?;
        if let Landing::Staged(s) = &landing {
            // SAFETY: `buf` is still borrowed.
            unsafe { s.land(call, st.len)? };
        }
        Ok(to_status(&st, self.group.as_deref()))
    }

    /// Receives the message as one value.
    #[track_caller]
    pub fn matched_receive<Msg: Equivalence>(self) -> (Msg, Status) {
        let mut v = zeroed::<Msg>();
        let st = fatal(self.receive_into_for("matched_receive", &mut v));
        (v, st)
    }

    /// Receives the message into a new vector; `call` names the API call for errors.
    fn receive_vec_for<Msg: Equivalence>(
        self,
        call: &'static str,
        st: &Status,
    ) -> Result<(Vec<Msg>, Status)> {
        let size = Msg::equivalent_datatype().type_map().size();
        let bytes = st.byte_count();
        if !bytes.is_multiple_of(size) {
            // Receive it anyway (the message is claimed), then report.
            let mut sink = vec![0u8; bytes];
            self.receive_into_for(call, &mut sink[..])?;
            return Err(Error::new(
                ErrorClass::Count,
                call,
                format!(
                    "the message from rank {} (tag {}) has {bytes} bytes, which is not a whole \
                     number of {size}-byte elements of {}",
                    st.source_rank(),
                    st.tag(),
                    std::any::type_name::<Msg>()
                ),
            ));
        }
        let n = bytes.checked_div(size).unwrap_or(0);
        let mut v: Vec<Msg> = (0..n).map(|_| zeroed::<Msg>()).collect();
        let st = self.receive_into_for(call, &mut v[..])?;
        Ok((v, st))
    }

    /// Starts receiving the message into `buf`.
    #[track_caller]
    pub fn immediate_matched_receive_into<'a, Sc: Scope<'a>, Buf: ?Sized + BufferMut>(
        mut self,
        scope: Sc,
        buf: &'a mut Buf,
    ) -> Request<'a, Buf, Sc> {
        let id = self.take();
        let group = self.group.clone();
        fatal(receive_request(
            "immediate_matched_receive_into",
            scope,
            buf,
            group,
            |rt, raw| rt.engine.mrecv(id, raw),
        ))
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
    /// Receives into a new vector sized from the status. Panics when the message is not a
    /// whole number of elements.
    #[track_caller]
    fn matched_receive_vec<Msg: Equivalence>(self) -> (Vec<Msg>, Status);
}

impl MatchedReceiveVec for (Message, Status) {
    #[track_caller]
    fn matched_receive_vec<Msg: Equivalence>(self) -> (Vec<Msg>, Status) {
        let (msg, st) = self;
        fatal(msg.receive_vec_for("matched_receive_vec", &st))
    }
}

/// A receive of one value in flight.
pub struct ReceiveFuture<T: 'static> {
    val: Option<Box<T>>,
    req: Option<Request<'static, T>>,
}

impl<T: 'static> ReceiveFuture<T> {
    /// Waits and returns the value.
    #[track_caller]
    pub fn get(mut self) -> (T, Status) {
        let st = self.req.take().expect("pending").wait();
        (*self.val.take().expect("value"), st)
    }
    /// The value if it arrived, or the future back.
    #[track_caller]
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
            if std::thread::panicking() {
                // Unwinding: the value may never come now; dropping the request settles it
                // (a receive not yet matched is cancelled) before the box goes.
                drop(r);
            } else {
                r.wait();
            }
        }
    }
}

/// Sends `msg` to `destination` with `sendtag` and receives a value from `source` with
/// `receivetag`, without deadlocking when both sides do it at once.
#[track_caller]
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
#[track_caller]
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
#[track_caller]
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
#[track_caller]
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
#[track_caller]
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
        let peer = fatal(c.peer_world_rank("send_receive_replace", destination.destination_rank()));
        fatal(check_send_tag("send_receive_replace", sendtag));
        let h = fatal(runtime::with_call("send_receive_replace", |rt| {
            rt.engine.isend(
                peer,
                c.p2p_context(),
                sendtag,
                // SAFETY: `copy` outlives the scope, which settles this send before it ends.
                unsafe { RawBuf::new(&copy) },
                SendMode::Standard,
            )
        }));
        let sreq: Request<'_, [u8], _> = Request::new(h, &copy[..] as *const [u8], None, scope);
        let st = source.receive_into_with_tag(buf, receivetag);
        sreq.wait();
        st
    });
    st
}

/// [`send_receive_replace_into_with_tags`] with tags 0 / any.
#[track_caller]
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
