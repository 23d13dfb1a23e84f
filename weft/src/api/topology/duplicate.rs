//! `MPI_Comm_idup`: a duplicate made without blocking. The members agree on the new context
//! pair in rounds the progress engine runs with everything else (`comm::agreement`), so
//! duplicates of overlapping communicators, started in different orders, all complete.

use super::{Attributes, Communicator, SimpleCommunicator};
use crate::comm::PendingDup;
use crate::error::{fatal, Result};
use crate::runtime;

/// A duplicate being made: complete it with [`wait`](Self::wait) or [`test`](Self::test).
/// Dropping it waits for it (the other members need this rank's part) and frees the
/// duplicate.
#[must_use = "a duplicate being made must be waited for"]
pub struct DuplicateRequest {
    pending: Option<Box<PendingDup>>,
    /// The attributes the duplicate gets (copied when it was started, as MPI_Comm_idup does).
    attributes: Option<Attributes>,
}

impl std::fmt::Debug for DuplicateRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DuplicateRequest").finish_non_exhaustive()
    }
}

impl DuplicateRequest {
    /// Waits for the duplicate.
    #[track_caller]
    pub fn wait(self) -> SimpleCommunicator {
        fatal(self.try_wait())
    }

    /// [`wait`](Self::wait), returning errors.
    pub fn try_wait(mut self) -> Result<SimpleCommunicator> {
        let mut dup = wait_for(self.pending.take().expect("not yet completed"))?;
        dup.attributes = self.attributes.take().unwrap_or_default();
        Ok(dup)
    }

    /// The duplicate if the members have agreed, else the request back.
    #[track_caller]
    pub fn test(mut self) -> std::result::Result<SimpleCommunicator, Self> {
        match self.try_test() {
            Ok(Some(c)) => Ok(c),
            Ok(None) => Err(self),
            Err(e) => fatal(Err(e)),
        }
    }

    /// [`test`](Self::test), returning errors: `Ok(None)` while not complete (the request
    /// stays usable).
    pub fn try_test(&mut self) -> Result<Option<SimpleCommunicator>> {
        let h = self.pending.as_ref().expect("not yet completed").handle;
        let done = runtime::with_call("test", |rt| rt.engine.test(h));
        let done = match done {
            Ok(None) => return Ok(None),
            Ok(Some(_)) => Ok(()),
            Err(e) => Err(e),
        };
        let p = self.pending.take().expect("not yet completed");
        let data = runtime::with_call("test", |rt| p.finish(&rt.contexts, done))?;
        let mut dup = SimpleCommunicator::user(data);
        dup.attributes = self.attributes.take().unwrap_or_default();
        Ok(Some(dup))
    }
}

impl Drop for DuplicateRequest {
    fn drop(&mut self) {
        let Some(p) = self.pending.take() else {
            return;
        };
        if runtime::is_running() {
            // The duplicate, if made, is dropped (and its pair freed) at once.
            let made = wait_for(p);
            if !std::thread::panicking() {
                fatal(made.map(drop));
            }
        }
    }
}

/// Waits for `p`'s agreement and makes the duplicate.
fn wait_for(p: Box<PendingDup>) -> Result<SimpleCommunicator> {
    let data = runtime::with_call("wait", |rt| {
        let done = rt.engine.wait(p.handle).map(drop);
        p.finish(&rt.contexts, done)
    })?;
    Ok(SimpleCommunicator::user(data))
}

/// Starts `MPI_Comm_idup` of `comm`.
pub(super) fn start<C: Communicator + ?Sized>(comm: &C) -> DuplicateRequest {
    let d = comm.comm_data();
    let pending = runtime::with_call("immediate_duplicate", |rt| {
        let tag = rt.sequences.next_tag(d.pair);
        crate::comm::start_dup(&mut rt.engine, &rt.contexts, d, tag)
    });
    DuplicateRequest {
        pending: Some(Box::new(pending)),
        attributes: Some(comm.attributes().for_duplicate()),
    }
}
