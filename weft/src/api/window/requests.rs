//! The request-based operations (`MPI_Rput`, `MPI_Rget`, `MPI_Raccumulate`,
//! `MPI_Rget_accumulate`), which MPI allows in passive-target epochs only: methods of
//! [`LockEpoch`] and [`LockAllEpoch`] ([`RequestAccess`]), so one outside such an epoch does
//! not compile. Each has a slice form and one with datatypes on both sides (`_typed`, as
//! [`Access::put_typed`] and the others).
//!
//! Every operation here is complete at the origin when it returns (done by the origin itself,
//! or by messages with its data copied out or its answer in), so the request it hands out is
//! complete already: MPI's local completion, the origin's buffer free to reuse (or holding
//! what a get brought). A flush or the epoch's end completes the operation at the target.

use super::{Access, LockAllEpoch, LockEpoch, Target};
use crate::api::collective::SystemOperation;
use crate::api::datatype::{Buffer, BufferMut, Datatype, Equivalence};
use crate::api::request::{Request, Scope};
use crate::api::topology::Rank;
use crate::error::{Error, Result};
use crate::runtime;

/// The request-based operations of a passive-target epoch. Each does what the operation of
/// [`Access`] with the name without its `r` does, and hands out a request for it (complete
/// already: see the module's comment), registered with `scope` and borrowing the buffer.
pub trait RequestAccess<T: Equivalence + Copy>: Access<T> {
    /// `MPI_Rput`: [`Access::put`], as a request.
    fn rput<'a, S: Scope<'a>>(
        &self,
        scope: S,
        target: Rank,
        disp: usize,
        data: &'a [T],
    ) -> Result<Request<'a, [T], S>> {
        const CALL: &str = "Rput";
        as_request(CALL, self.put(target, disp, data), scope, data)
    }

    /// `MPI_Rget`: [`Access::get`], as a request ([`Request::wait_for_data`] gives `out`
    /// back).
    fn rget<'a, S: Scope<'a>>(
        &self,
        scope: S,
        target: Rank,
        disp: usize,
        out: &'a mut [T],
    ) -> Result<Request<'a, [T], S>> {
        const CALL: &str = "Rget";
        as_request(CALL, self.get(target, disp, out), scope, out)
    }

    /// `MPI_Raccumulate`: [`Access::accumulate`], as a request.
    fn raccumulate<'a, S: Scope<'a>>(
        &self,
        scope: S,
        target: Rank,
        disp: usize,
        data: &'a [T],
        op: &SystemOperation,
    ) -> Result<Request<'a, [T], S>> {
        const CALL: &str = "Raccumulate";
        as_request(CALL, self.accumulate(target, disp, data, op), scope, data)
    }

    /// `MPI_Rget_accumulate`: [`Access::get_accumulate`], as a request whose data is `old`.
    fn rget_accumulate<'a, S: Scope<'a>>(
        &self,
        scope: S,
        target: Rank,
        disp: usize,
        data: &[T],
        old: &'a mut [T],
        op: &SystemOperation,
    ) -> Result<Request<'a, [T], S>> {
        const CALL: &str = "Rget_accumulate";
        as_request(
            CALL,
            self.get_accumulate(target, disp, data, old, op),
            scope,
            old,
        )
    }

    /// `MPI_Rput` with datatypes on both sides: [`Access::put_typed`], as a request.
    fn rput_typed<'a, S, B, D>(
        &self,
        scope: S,
        origin: &'a B,
        to: Target<'_, D>,
    ) -> Result<Request<'a, B, S>>
    where
        S: Scope<'a>,
        B: Buffer + ?Sized,
        D: Datatype + ?Sized,
    {
        const CALL: &str = "Rput";
        as_request(CALL, self.put_typed(origin, to), scope, origin)
    }

    /// `MPI_Rget` with datatypes on both sides: [`Access::get_typed`], as a request
    /// ([`Request::wait_for_data`] gives `out` back).
    fn rget_typed<'a, S, B, D>(
        &self,
        scope: S,
        out: &'a mut B,
        from: Target<'_, D>,
    ) -> Result<Request<'a, B, S>>
    where
        S: Scope<'a>,
        B: BufferMut + ?Sized,
        D: Datatype + ?Sized,
    {
        const CALL: &str = "Rget";
        as_request(CALL, self.get_typed(out, from), scope, out)
    }

    /// `MPI_Raccumulate` with datatypes on both sides: [`Access::accumulate_typed`], as a
    /// request.
    fn raccumulate_typed<'a, S, B, D>(
        &self,
        scope: S,
        origin: &'a B,
        to: Target<'_, D>,
        op: &SystemOperation,
    ) -> Result<Request<'a, B, S>>
    where
        S: Scope<'a>,
        B: Buffer + ?Sized,
        D: Datatype + ?Sized,
    {
        const CALL: &str = "Raccumulate";
        as_request(CALL, self.accumulate_typed(origin, to, op), scope, origin)
    }

    /// `MPI_Rget_accumulate` with datatypes on every side: [`Access::get_accumulate_typed`],
    /// as a request whose data is `result`.
    fn rget_accumulate_typed<'a, S, B, R, D>(
        &self,
        scope: S,
        origin: &B,
        result: &'a mut R,
        to: Target<'_, D>,
        op: &SystemOperation,
    ) -> Result<Request<'a, R, S>>
    where
        S: Scope<'a>,
        B: Buffer + ?Sized,
        R: BufferMut + ?Sized,
        D: Datatype + ?Sized,
    {
        const CALL: &str = "Rget_accumulate";
        as_request(
            CALL,
            self.get_accumulate_typed(origin, result, to, op),
            scope,
            result,
        )
    }
}

impl<T: Equivalence + Copy> RequestAccess<T> for LockEpoch<'_, T> {}
impl<T: Equivalence + Copy> RequestAccess<T> for LockAllEpoch<'_, T> {}

/// The request for an operation `done` on `data`: complete, registered with `scope`; or the
/// operation's error, naming the request-based call.
fn as_request<'a, D: ?Sized, S: Scope<'a>>(
    call: &'static str,
    done: Result<()>,
    scope: S,
    data: &'a D,
) -> Result<Request<'a, D, S>> {
    done.map_err(|e| Error::new(e.class, call, e.detail))?;
    let h = runtime::with_call(call, |rt| Ok(rt.engine.completed_request()))?;
    Ok(Request::new(h, data, None, scope))
}
