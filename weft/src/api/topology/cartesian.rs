//! Cartesian communicators in rsmpi's shape: [`CartesianCommunicator`] (a full communicator
//! with a grid), [`CartesianLayout`], and [`dims_create`] (MPI_Dims_create, which rsmpi does
//! not offer). The grid arithmetic is `comm::process_topology`'s; this module checks
//! arguments, makes the communicators (through split, so they get their own contexts) and
//! answers the queries.
//!
//! Ranks are never reordered (MPI allows either): `cartesian_map` keeps every rank inside the
//! grid where it is.

use super::Rank;
use super::{AsCommunicator, Communicator, SimpleCommunicator};
use crate::api::datatype::Count;
use crate::comm::process_topology::{self, Cartesian, ProcessTopology};
use crate::comm::{self, CommData};
use crate::error::{fatal, Error, ErrorClass, Result};
use crate::runtime;
use std::rc::Rc;

/// A Cartesian communicator's shape and this process's place in it (MPI_Cart_get).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CartesianLayout {
    /// Extent of each dimension.
    pub dims: Vec<Count>,
    /// Whether each dimension wraps around.
    pub periods: Vec<bool>,
    /// This process's coordinates.
    pub coords: Vec<Count>,
}

/// A communicator whose processes form a grid (MPI_Cart_create). It is a full communicator:
/// point-to-point through `process_at_rank`, every collective, and the neighbourhood
/// collectives over the grid.
#[derive(Debug)]
#[repr(transparent)]
pub struct CartesianCommunicator(pub(super) SimpleCommunicator);

impl SimpleCommunicator {
    /// This communicator as a Cartesian one, when it has a grid (for a front end that holds
    /// every communicator as a `SimpleCommunicator`, as the C ABI does).
    pub fn as_cartesian(&self) -> Option<&CartesianCommunicator> {
        match self.comm_data().process_topology.as_deref() {
            // SAFETY: `CartesianCommunicator` is `repr(transparent)` over
            // `SimpleCommunicator`; its invariant (a grid) holds here.
            Some(ProcessTopology::Cartesian(_)) => Some(unsafe { self.view_as() }),
            _ => None,
        }
    }
}

impl From<CartesianCommunicator> for SimpleCommunicator {
    fn from(c: CartesianCommunicator) -> SimpleCommunicator {
        c.0
    }
}

/// MPI_Dims_create: fills the zero entries of `dims` with factors of `nnodes` as close to each
/// other as possible (largest first), keeping the non-zero entries, so that the product of
/// `dims` is `nnodes`. Errors (naming the values) when that is impossible or an entry is
/// negative.
pub fn dims_create(nnodes: Count, dims: &mut [Count]) -> Result<()> {
    process_topology::dims_create("dims_create", nnodes, dims)
}

/// MPI_Cart_create on `parent`: the first `dims`-product ranks form the grid, in order.
pub(super) fn create(
    parent: &CommData,
    dims: &[Count],
    periods: &[bool],
) -> Result<Option<CartesianCommunicator>> {
    const CALL: &str = "create_cartesian_communicator";
    let grid = Cartesian::new(CALL, dims, periods, parent.size())?;
    let color = (parent.rank < grid.size()).then_some(0);
    let made = runtime::with_call(CALL, |rt| {
        comm::split(
            &mut rt.engine,
            &mut rt.contexts,
            parent,
            color,
            parent.rank as i32,
        )
    })?;
    Ok(made.map(|d| with_grid(d, grid)))
}

/// MPI_Cart_map: this rank's rank in the grid, if it is in it.
pub(super) fn map(parent: &CommData, dims: &[Count], periods: &[bool]) -> Result<Option<Rank>> {
    let grid = Cartesian::new("cartesian_map", dims, periods, parent.size())?;
    Ok((parent.rank < grid.size()).then_some(parent.rank as Rank))
}

fn with_grid(d: CommData, grid: Cartesian) -> CartesianCommunicator {
    let t = Rc::new(ProcessTopology::Cartesian(grid));
    CartesianCommunicator(SimpleCommunicator::user(d.with_process_topology(Some(t))))
}

fn length_error(call: &'static str, detail: String) -> Error {
    Error::new(ErrorClass::Arg, call, detail)
}

impl CartesianCommunicator {
    /// The grid (every CartesianCommunicator has one).
    fn grid(&self) -> &Cartesian {
        match self.comm_data().process_topology.as_deref() {
            Some(ProcessTopology::Cartesian(g)) => g,
            other => unreachable!("a CartesianCommunicator with topology {other:?}"),
        }
    }

    /// Number of dimensions (MPI_Cartdim_get).
    pub fn num_dimensions(&self) -> Count {
        self.grid().ndims() as Count
    }

    /// Dimensions, periods and this process's coordinates into the three slices, each
    /// `num_dimensions()` long; panics otherwise.
    #[track_caller]
    pub fn get_layout_into(&self, dims: &mut [Count], periods: &mut [bool], coords: &mut [Count]) {
        let n = self.grid().ndims();
        if dims.len() != n || periods.len() != n || coords.len() != n {
            fatal::<()>(Err(length_error(
                "get_layout_into",
                format!(
                    "dims, periods and coords have {}, {} and {} entries for {n} dimensions",
                    dims.len(),
                    periods.len(),
                    coords.len()
                ),
            )));
        }
        // SAFETY: the lengths are checked above (and the unchecked form needs nothing more).
        unsafe { self.get_layout_into_unchecked(dims, periods, coords) }
    }

    /// [`get_layout_into`](Self::get_layout_into) without the length check: fills as many
    /// entries as the slices and the grid both have.
    ///
    /// # Safety
    /// None in Weft (nothing is written past a slice); `unsafe` only to keep rsmpi's
    /// signature.
    pub unsafe fn get_layout_into_unchecked(
        &self,
        dims: &mut [Count],
        periods: &mut [bool],
        coords: &mut [Count],
    ) {
        let g = self.grid();
        let mine = g.coords(self.comm_data().rank);
        for (d, x) in dims.iter_mut().zip(&g.dims) {
            *d = *x;
        }
        for (p, x) in periods.iter_mut().zip(&g.periods) {
            *p = *x;
        }
        for (c, x) in coords.iter_mut().zip(&mine) {
            *c = *x;
        }
    }

    /// Dimensions, periods and this process's coordinates (MPI_Cart_get).
    pub fn get_layout(&self) -> CartesianLayout {
        let g = self.grid();
        CartesianLayout {
            dims: g.dims.clone(),
            periods: g.periods.clone(),
            coords: g.coords(self.comm_data().rank),
        }
    }

    /// The rank at `coords` (MPI_Cart_rank): periodic dimensions wrap; panics on a
    /// coordinate outside a non-periodic dimension or a wrong number of coordinates.
    #[track_caller]
    pub fn coordinates_to_rank(&self, coords: &[Count]) -> Rank {
        fatal(self.try_coordinates_to_rank(coords))
    }

    /// [`coordinates_to_rank`](Self::coordinates_to_rank), returning the error.
    pub fn try_coordinates_to_rank(&self, coords: &[Count]) -> Result<Rank> {
        Ok(self.grid().rank("coordinates_to_rank", coords)? as Rank)
    }

    /// [`coordinates_to_rank`](Self::coordinates_to_rank) (it checks anyway).
    ///
    /// # Safety
    /// None in Weft; `unsafe` only to keep rsmpi's signature.
    #[track_caller]
    pub unsafe fn coordinates_to_rank_unchecked(&self, coords: &[Count]) -> Rank {
        self.coordinates_to_rank(coords)
    }

    /// The coordinates of `rank` (MPI_Cart_coords); panics on a rank outside the grid.
    #[track_caller]
    pub fn rank_to_coordinates(&self, rank: Rank) -> Vec<Count> {
        let mut c = vec![0; self.grid().ndims()];
        self.rank_to_coordinates_into(rank, &mut c);
        c
    }

    /// The coordinates of `rank` into `coords` (`num_dimensions()` long).
    #[track_caller]
    pub fn rank_to_coordinates_into(&self, rank: Rank, coords: &mut [Count]) {
        const CALL: &str = "rank_to_coordinates";
        let r = fatal(self.comm_data().check_rank(CALL, rank));
        let n = self.grid().ndims();
        if coords.len() != n {
            fatal::<()>(Err(length_error(
                CALL,
                format!("coords has {} entries for {n} dimensions", coords.len()),
            )));
        }
        coords.copy_from_slice(&self.grid().coords(r));
    }

    /// [`rank_to_coordinates_into`](Self::rank_to_coordinates_into) (it checks anyway).
    ///
    /// # Safety
    /// None in Weft; `unsafe` only to keep rsmpi's signature.
    #[track_caller]
    pub unsafe fn rank_to_coordinates_into_unchecked(&self, rank: Rank, coords: &mut [Count]) {
        self.rank_to_coordinates_into(rank, coords)
    }

    /// MPI_Cart_shift: the ranks `displacement` places before (the source) and after (the
    /// destination) this process along `dimension`; `None` past a non-periodic edge.
    #[track_caller]
    pub fn shift(&self, dimension: Count, displacement: Count) -> (Option<Rank>, Option<Rank>) {
        let (s, d) =
            fatal(
                self.grid()
                    .shift("shift", self.comm_data().rank, dimension, displacement),
            );
        (s.map(|r| r as Rank), d.map(|r| r as Rank))
    }

    /// [`shift`](Self::shift) (it checks anyway).
    ///
    /// # Safety
    /// None in Weft; `unsafe` only to keep rsmpi's signature.
    #[track_caller]
    pub unsafe fn shift_unchecked(
        &self,
        dimension: Count,
        displacement: Count,
    ) -> (Option<Rank>, Option<Rank>) {
        self.shift(dimension, displacement)
    }

    /// MPI_Cart_sub: the grid of the dimensions where `retain` is true, through this
    /// process. Collective.
    #[track_caller]
    pub fn subgroup(&self, retain: &[bool]) -> CartesianCommunicator {
        fatal(self.try_subgroup(retain))
    }

    /// [`subgroup`](Self::subgroup), returning the error.
    pub fn try_subgroup(&self, retain: &[bool]) -> Result<CartesianCommunicator> {
        const CALL: &str = "subgroup";
        let d = self.comm_data();
        let sub = self.grid().sub(CALL, d.rank, retain)?;
        let made = runtime::with_call(CALL, |rt| {
            comm::split(
                &mut rt.engine,
                &mut rt.contexts,
                d,
                Some(sub.color),
                sub.key,
            )
        })?;
        Ok(with_grid(
            made.expect("a defined color gives a communicator"),
            sub.grid,
        ))
    }

    /// [`subgroup`](Self::subgroup) (it checks anyway).
    ///
    /// # Safety
    /// None in Weft; `unsafe` only to keep rsmpi's signature.
    #[track_caller]
    pub unsafe fn subgroup_unchecked(&self, retain: &[bool]) -> CartesianCommunicator {
        self.subgroup(retain)
    }
}

impl AsCommunicator for CartesianCommunicator {
    fn comm_data(&self) -> &CommData {
        self.0.comm_data()
    }
}

impl Communicator for CartesianCommunicator {
    fn attributes(&self) -> &super::Attributes {
        self.0.attributes()
    }
    fn attributes_mut(&mut self) -> &mut super::Attributes {
        self.0.attributes_mut()
    }
}
