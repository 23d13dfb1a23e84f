//! The engine's face of internal active messages ([`core::active`]): handlers installed by
//! the layers above (one-sided windows), messages started and progressed like any request.

use super::buffer::{RawBuf, RawBufMut};
use super::core::active::{AmHandler, AmId, Answer, ReplyTo};
use super::request::Handle;
use super::Engine;
use crate::error::{Error, ErrorClass, Result};
use crate::fabric::Fabric;

impl<F: Fabric> Engine<F> {
    /// Installs `handler` as active-message handler `id` (replacing any there). Every rank
    /// that may receive messages for `id` installs one before any is sent to it (a part for a
    /// missing handler is refused with an error to its origin).
    pub fn am_register(&mut self, id: AmId, handler: Box<dyn AmHandler>) {
        self.core.am_register(id, handler);
    }

    /// Removes handler `id`.
    pub fn am_unregister(&mut self, id: AmId) -> Option<Box<dyn AmHandler>> {
        self.core.am_unregister(id)
    }

    /// Starts an active message to handler `id` at `peer` with argument `arg` and `payload`,
    /// cut into parts of whole `unit`s; the target's answers go into `reply`. The request
    /// ([`Engine::is_done`], [`Engine::wait`]) completes when the target answered every part.
    ///
    /// # Safety
    /// `payload` and `reply` keep [`RawBuf`]'s and [`RawBufMut`]'s contracts until the
    /// request completes or is freed.
    pub unsafe fn am_start(
        &mut self,
        (peer, id): (u32, AmId),
        arg: u64,
        payload: RawBuf,
        unit: usize,
        reply: Option<RawBufMut>,
    ) -> Result<Handle> {
        self.check_peer("active message", peer)?;
        if unit == 0 || !payload.len().is_multiple_of(unit) {
            return Err(Error::new(
                ErrorClass::Arg,
                "active message",
                format!("a payload of {} bytes is not whole units of {unit} bytes", payload.len()),
            ));
        }
        // SAFETY: the caller's promise, passed on.
        let h = unsafe { self.core.am_start((peer, id), arg, payload, unit, reply) };
        self.flush_active();
        Ok(h)
    }

    /// Answers part `to` of a handler that answered [`Answer::Later`].
    pub fn am_answer(&mut self, to: ReplyTo, answer: Answer) {
        self.core.am_answer(to, answer);
        self.flush_active();
    }

    /// Hands active-message packets to the fabric until it is full; whether any went.
    pub(super) fn flush_active(&mut self) -> bool {
        let mut did = false;
        while let Some((peer, hdr, payload)) = self.core.poll_am() {
            if !self.fabric.try_send(peer, &hdr, payload) {
                break;
            }
            self.core.am_sent();
            did = true;
        }
        did
    }
}

impl<F: Fabric> Engine<F> {
    /// The largest part of an active message to `peer`: one packet's payload.
    pub fn am_max_part(&self, peer: u32) -> usize {
        self.core.limits(peer).max_payload
    }
}
