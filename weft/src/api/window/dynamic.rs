//! `MPI_Win_create_dynamic` in Rust: a window with no memory at first, to which each member
//! attaches regions of its own (`Vec`s it lends) and detaches them. An origin reaches a region
//! at the displacement its owner tells it ([`Region::disp`], sent in a message: what
//! `MPI_Get_address` is for in C), plus the element's index in it.
//!
//! Displacements count elements of `T` from address 0, so a region must start at a multiple
//! of the element's size (every `Vec` of a primitive type does). A detached region stays with
//! the window until it is freed ([`Window::into_regions`] gives it back): another member may
//! still reach it, and the memory must not be reused meanwhile.

use super::create::Lent;
use super::Window;
use crate::api::datatype::Equivalence;
use crate::api::topology::AsCommunicator;
use crate::error::{fatal, Error, ErrorClass, Result};
use crate::rma::window::Flavor;

/// A region attached to a dynamic window: where origins reach it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Region {
    disp: usize,
    len: usize,
}

impl Region {
    /// The displacement of the region's first element (its address over the element's
    /// size): element `i` is at `disp() + i` for every origin.
    pub fn disp(&self) -> usize {
        self.disp
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it has no elements (never: empty regions are refused).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl<T: Equivalence + Copy> Window<T> {
    /// `MPI_Win_create_dynamic`: a window over all of `comm`'s members with no memory yet
    /// (see [`Self::attach`]). Collective. Panics on error (see [`Self::try_create_dynamic`]).
    #[track_caller]
    pub fn create_dynamic<C: AsCommunicator + ?Sized>(comm: &C) -> Window<T> {
        fatal(Self::try_create_dynamic(comm))
    }

    /// [`Self::create_dynamic`], returning errors (as [`Window::try_allocate`]).
    pub fn try_create_dynamic<C: AsCommunicator + ?Sized>(comm: &C) -> Result<Window<T>> {
        let none = (std::ptr::null_mut(), 0);
        Self::make(comm, none, Flavor::Dynamic, "Win_create_dynamic")
    }

    /// `MPI_Win_attach`: lends `memory` to this dynamic window, reachable by every member
    /// from now on at the returned [`Region`] (not collective). Errors: a window of another
    /// flavour, an empty `memory`, one that does not start at a multiple of the element's size,
    /// too many regions at once (1,024).
    pub fn attach(&self, memory: Vec<T>) -> Result<Region> {
        const CALL: &str = "Win_attach";
        let elem = std::mem::size_of::<T>();
        let addr = memory.as_ptr() as usize;
        if memory.is_empty() || elem == 0 {
            return Err(Error::new(
                ErrorClass::Arg,
                CALL,
                "the memory to attach holds no bytes",
            ));
        }
        if !addr.is_multiple_of(elem) {
            return Err(Error::new(
                ErrorClass::Arg,
                CALL,
                format!(
                    "the memory to attach starts at {addr:#x}, not a multiple of the element's \
                     {elem} bytes, which displacements count"
                ),
            ));
        }
        let lent = Lent::new(memory);
        let attached = self.data().attach(CALL, lent.ptr.cast(), lent.len * elem);
        let region = Region {
            disp: addr / elem,
            len: lent.len,
        };
        match attached {
            Ok(()) => {
                self.lent.borrow_mut().push(lent);
                Ok(region)
            }
            Err(e) => {
                // Never attached: no one reaches it.
                // SAFETY: taken apart above, given back once.
                drop(unsafe { lent.give_back() });
                Err(e)
            }
        }
    }

    /// `MPI_Win_detach`: `region` (attached here) leaves the window; origins reaching it
    /// afterwards get a `Disp` error. Its memory stays with the window until it is freed.
    pub fn detach(&self, region: Region) -> Result<()> {
        let at = (region.disp * std::mem::size_of::<T>()) as *const u8;
        self.data().detach("Win_detach", at)
    }
}
