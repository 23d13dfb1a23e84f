//! `MPI_Win_allocate_shared` in Rust: every member's part is in memory this process maps, so
//! besides the epochs' operations a member reads and writes its own part with loads and stores
//! (safe, element by element), and may reach its neighbours' parts through the raw pointers
//! `shared_query` gives (`MPI_Win_shared_query`: dereferencing them is the program's own
//! `unsafe` business, synchronized as MPI's unified model says).

use super::Window;
use crate::api::datatype::Equivalence;
use crate::api::topology::{AsCommunicator, Rank};
use crate::error::{fatal, Error, ErrorClass, Result};
use crate::rma::window::Flavor;
use crate::runtime;

impl<T: Equivalence + Copy> Window<T> {
    /// `MPI_Win_allocate_shared`: `len` zeroed elements of `T` at this member, in memory every
    /// member maps, a window over all of `comm`'s members (all on this node). Collective.
    /// Panics on error (see [`Self::try_allocate_shared`]).
    #[track_caller]
    pub fn allocate_shared<C: AsCommunicator + ?Sized>(comm: &C, len: usize) -> Window<T> {
        fatal(Self::try_allocate_shared(comm, len))
    }

    /// [`Self::allocate_shared`], returning errors (as [`Window::try_allocate`]).
    pub fn try_allocate_shared<C: AsCommunicator + ?Sized>(
        comm: &C,
        len: usize,
    ) -> Result<Window<T>> {
        let weft_memory = (std::ptr::null_mut(), len);
        Self::make(comm, weft_memory, Flavor::Shared, "Win_allocate_shared")
    }

    /// The number of elements in this member's part.
    pub fn local_len(&self) -> usize {
        let d = self.data();
        let part = d
            .part("Win_shared_query", d.rank() as Rank)
            .expect("own rank");
        part.size / std::mem::size_of::<T>().max(1)
    }

    /// Where element `i` of this member's part is, checked.
    fn local_at(&self, call: &'static str, i: usize) -> Result<*mut T> {
        let len = self.local_len();
        if i >= len {
            return Err(Error::new(
                ErrorClass::Disp,
                call,
                format!("element {i} is outside this member's part ({len} elements)"),
            ));
        }
        let d = self.data();
        let base = d.part(call, d.rank() as Rank)?.base as *mut T;
        // SAFETY: `i` is within the part (checked above), which is mapped for the window's life.
        Ok(unsafe { base.add(i) })
    }

    /// Element `i` of this member's own part: a load (volatile, as other members may write it
    /// through their epochs; order it with an epoch or [`Window::sync`]).
    pub fn read_local(&self, i: usize) -> Result<T> {
        let at = self.local_at("read_local", i)?;
        // SAFETY: `at` points to element `i` of the part, mapped for the window's life, read
        // without assuming alignment; `T` is plain data, so any bytes there are a valid `T`.
        Ok(unsafe { at.read_unaligned() })
    }

    /// Stores `value` into element `i` of this member's own part (volatile, as
    /// [`Self::read_local`]).
    pub fn write_local(&self, i: usize, value: T) -> Result<()> {
        let at = self.local_at("write_local", i)?;
        // SAFETY: as in `read_local`; the window's memory is reached only through raw pointers,
        // so no Rust reference to it is invalidated.
        unsafe { at.write_unaligned(value) };
        Ok(())
    }

    /// `MPI_Win_shared_query`: member `rank`'s part in this process, as a pointer and a
    /// length in elements, for a window whose parts are all in memory this process maps
    /// (`allocate_shared`, `allocate`). Reading or writing through the pointer is `unsafe`:
    /// the program keeps MPI's rules (synchronize with an epoch, `sync` and a barrier).
    pub fn shared_query(&self, rank: Rank) -> Result<(*mut T, usize)> {
        const CALL: &str = "Win_shared_query";
        let d = self.data();
        if !matches!(d.flavor(), Flavor::Allocate | Flavor::Shared) {
            return Err(Error::new(
                ErrorClass::Arg,
                CALL,
                format!(
                    "this window's flavour ({:?}) keeps parts in their members' processes",
                    d.flavor()
                ),
            ));
        }
        let p = d.part(CALL, rank)?;
        // Loads and stores through the pointer are protected by lock epochs: none deferred
        // from now on, and one deferred now is taken.
        d.note_raw_access();
        crate::rma::lazy::take_deferred(&super::wait_lock(CALL))?;
        Ok((p.base as *mut T, p.size / std::mem::size_of::<T>().max(1)))
    }

    /// `MPI_Win_sync`: a memory barrier ordering this process's loads and stores on the window
    /// (its own part's, or through `shared_query`'s pointers) with its operations.
    pub fn sync(&self) -> Result<()> {
        runtime::with_call("Win_sync", |rt| {
            self.data().sync(&mut rt.engine, "Win_sync")
        })
    }
}
