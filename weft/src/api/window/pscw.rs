//! Post-start-complete-wait (general active-target synchronization) as guards: `post` opens
//! an exposure epoch to a group of origins (its guard waits for their completions when it
//! drops, or `wait`/`test`), `start` an access epoch to a group of targets (its guard is an
//! [`Access`] epoch covering just them, and completes when it drops, or `complete`).

use super::{Access, Open, Window};
use crate::api::datatype::Equivalence;
use crate::api::topology::{Group, Rank};
use crate::error::{fatal, Error, ErrorClass, Result};
use crate::rma::window::{Exposure, WindowData};
use crate::runtime;

/// The window ranks of `group`'s members, each checked to be one.
fn window_ranks<G: Group + ?Sized>(
    w: &WindowData,
    call: &'static str,
    group: &G,
) -> Result<Vec<usize>> {
    group
        .group_data()
        .members()
        .iter()
        .map(|&world| {
            w.comm().group.rank_of(world).ok_or_else(|| {
                Error::new(
                    ErrorClass::Arg,
                    call,
                    format!(
                        "the group names world rank {world}, which is not in the window's group"
                    ),
                )
            })
        })
        .collect()
}

impl<T: Equivalence + Copy> Window<T> {
    /// `MPI_Win_post`: exposes this member's part to `origins` until the guard's
    /// [`ExposureEpoch::wait`] (or its drop) sees each complete.
    pub fn post<G: Group + ?Sized>(&self, origins: &G) -> Result<ExposureEpoch<'_, T>> {
        const CALL: &str = "Win_post";
        if self.exposed.get() || self.epoch.get() == Open::Fence {
            return Err(Error::new(
                ErrorClass::RmaSync,
                CALL,
                "an exposure or fence epoch is open on this window already",
            ));
        }
        let ranks = window_ranks(self.data(), CALL, origins)?;
        let exposure = runtime::with_call(CALL, |rt| self.data().post(&mut rt.engine, &ranks))?;
        self.exposed.set(true);
        Ok(ExposureEpoch {
            win: self,
            exposure: Some(exposure),
        })
    }

    /// `MPI_Win_start`: an access epoch to `targets`, once each has posted; the guard's
    /// operations reach them (and no one else) until [`AccessEpoch::complete`] or its drop.
    pub fn start<G: Group + ?Sized>(&self, targets: &G) -> Result<AccessEpoch<'_, T>> {
        const CALL: &str = "Win_start";
        let ranks = window_ranks(self.data(), CALL, targets)?;
        self.open(CALL, Open::Access)?;
        runtime::with_call(CALL, |rt| self.data().start(&mut rt.engine, &ranks))
            .inspect_err(|_| self.epoch.set(Open::None))?;
        Ok(AccessEpoch {
            win: self,
            targets: ranks,
            completed: false,
        })
    }
}

/// An exposure epoch (`MPI_Win_post` .. `MPI_Win_wait`).
#[derive(Debug)]
pub struct ExposureEpoch<'w, T: Equivalence + Copy> {
    win: &'w Window<T>,
    exposure: Option<Exposure>,
}

impl<T: Equivalence + Copy> ExposureEpoch<'_, T> {
    /// `MPI_Win_test`: whether every origin completed (the epoch is then over).
    pub fn test(&mut self) -> Result<bool> {
        let Some(e) = self.exposure.as_mut() else {
            return Ok(true);
        };
        let done = runtime::with_call("Win_test", |rt| self.win.data().test(&mut rt.engine, e))?;
        if done {
            self.exposure = None;
            self.win.exposed.set(false);
        }
        Ok(done)
    }

    /// `MPI_Win_wait`: waits until every origin completed.
    pub fn wait(mut self) -> Result<()> {
        self.finish()
    }

    fn finish(&mut self) -> Result<()> {
        let Some(e) = self.exposure.take() else {
            return Ok(());
        };
        self.win.exposed.set(false);
        runtime::with_call("Win_wait", |rt| self.win.data().wait(&mut rt.engine, e))
    }
}

impl<T: Equivalence + Copy> Drop for ExposureEpoch<'_, T> {
    /// Waits for the origins (unless the thread is panicking: the job is ending then).
    fn drop(&mut self) {
        if !std::thread::panicking() {
            fatal(self.finish());
        }
    }
}

/// An access epoch (`MPI_Win_start` .. `MPI_Win_complete`) on the targets of its group.
#[derive(Debug)]
pub struct AccessEpoch<'w, T: Equivalence + Copy> {
    win: &'w Window<T>,
    targets: Vec<usize>,
    completed: bool,
}

impl<T: Equivalence + Copy> AccessEpoch<'_, T> {
    /// `MPI_Win_complete`: ends the epoch; the targets' `wait` returns once every origin did.
    pub fn complete(mut self) -> Result<()> {
        self.finish()
    }

    fn finish(&mut self) -> Result<()> {
        if std::mem::replace(&mut self.completed, true) {
            return Ok(());
        }
        self.win.epoch.set(Open::None);
        runtime::with_call("Win_complete", |rt| {
            self.win.data().complete(&mut rt.engine, &self.targets)
        })
    }
}

impl<T: Equivalence + Copy> Access<T> for AccessEpoch<'_, T> {
    fn window(&self) -> &Window<T> {
        self.win
    }
    fn covers(&self, call: &'static str, target: Rank) -> Result<()> {
        if usize::try_from(target).is_ok_and(|t| self.targets.contains(&t)) {
            return Ok(());
        }
        Err(Error::new(
            ErrorClass::RmaSync,
            call,
            format!(
                "target {target} is outside this access epoch's group {:?}",
                self.targets
            ),
        ))
    }
}

impl<T: Equivalence + Copy> Drop for AccessEpoch<'_, T> {
    /// Completes the epoch (unless the thread is panicking).
    fn drop(&mut self) {
        if !std::thread::panicking() {
            fatal(self.finish());
        }
    }
}
