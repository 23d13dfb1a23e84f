//! `MPI_Win_create` in Rust: a window over the program's memory. The window owns the memory
//! while it lives (other members write it, so no Rust reference to it may exist meanwhile) and
//! gives it back when freed ([`Window::into_vec`]); a window dropped unfreed leaks it, as
//! another member may still reach it.
//!
//! Such memory is the program's heap, not node-shared: same-node members reach it by
//! cross-memory copies (puts, gets, and accumulates combined under the element locks), with no
//! help from its owner; members on other nodes by messages, which its owner serves whenever
//! it calls into the library (any call, or
//! [`Universe::progress`](crate::environment::Universe::progress)). [`Window::allocate`]
//! places memory that same-node members reach with loads, stores and the CPU's atomics.

use super::Window;
use crate::api::datatype::Equivalence;
use crate::api::topology::AsCommunicator;
use crate::error::{fatal, Result};
use crate::rma::window::Flavor;
use std::mem::ManuallyDrop;

/// The program's memory lent to a window: a `Vec`'s parts, its elements reached only through
/// raw pointers while the window lives. Dropping it leaks the memory (on purpose).
#[derive(Debug)]
pub(super) struct Lent<T> {
    pub(super) ptr: *mut T,
    pub(super) len: usize,
    capacity: usize,
}

impl<T> Lent<T> {
    /// Takes `memory` apart, never to be dropped but by [`Lent::give_back`].
    pub(super) fn new(memory: Vec<T>) -> Lent<T> {
        let mut memory = ManuallyDrop::new(memory);
        Lent {
            ptr: memory.as_mut_ptr(),
            len: memory.len(),
            capacity: memory.capacity(),
        }
    }

    /// The `Vec` again.
    ///
    /// # Safety
    /// No other process reaches the memory any more (the window is freed), and this is the
    /// only time it is given back.
    pub(super) unsafe fn give_back(self) -> Vec<T> {
        // SAFETY: the parts of a `Vec` taken apart in `try_create` (never touched since but
        // through raw pointers, with elements of `T`, plain data, written), given back once
        // (the caller's promise).
        unsafe { Vec::from_raw_parts(self.ptr, self.len, self.capacity) }
    }
}

impl<T: Equivalence + Copy> Window<T> {
    /// `MPI_Win_create`: a window over all of `comm`'s members, this member's part being
    /// `memory` (its elements as they are). Collective. Panics on error (see
    /// [`Self::try_create`]).
    #[track_caller]
    pub fn create<C: AsCommunicator + ?Sized>(comm: &C, memory: Vec<T>) -> Window<T> {
        fatal(Self::try_create(comm, memory))
    }

    /// [`Self::create`], returning errors (as [`Window::try_allocate`]; the memory is dropped
    /// then).
    pub fn try_create<C: AsCommunicator + ?Sized>(comm: &C, memory: Vec<T>) -> Result<Window<T>> {
        let lent = Lent::new(memory);
        match Self::make(comm, (lent.ptr, lent.len), Flavor::Create, "Win_create") {
            Ok(w) => {
                w.lent.borrow_mut().push(lent);
                Ok(w)
            }
            Err(e) => {
                // No member goes on with a window that failed to be made: nobody reaches it.
                // SAFETY: taken apart above, given back once.
                drop(unsafe { lent.give_back() });
                Err(e)
            }
        }
    }

    /// `MPI_Win_free`, collective, giving back the memory of a window made by
    /// [`Self::create`] with what the members wrote into it (an empty `Vec` for Weft's own
    /// memory: read it with [`Window::read_local`] before; a dynamic window's regions one
    /// after the other, see [`Window::into_regions`]). On error the memory is leaked, as
    /// another member may still reach it.
    pub fn into_vec(self) -> Result<Vec<T>> {
        self.into_regions().map(|r| r.concat())
    }
}
