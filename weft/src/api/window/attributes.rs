//! A window's attributes (`MPI_WIN_BASE`, `MPI_WIN_SIZE`, `MPI_WIN_DISP_UNIT`,
//! `MPI_WIN_CREATE_FLAVOR`, `MPI_WIN_MODEL`) and info (`MPI_Win_get_info`).

use super::{Flavor, Window};
use crate::api::datatype::Equivalence;

/// How a window's public and private copies relate (`MPI_WIN_MODEL`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum MemoryModel {
    /// `MPI_WIN_UNIFIED`: one copy. A member's stores are seen by the others' accesses after
    /// a synchronization, and their puts by its loads likewise: every Weft window is so.
    Unified,
}

impl<T: Equivalence + Copy> Window<T> {
    /// How the window's memory was made (`MPI_WIN_CREATE_FLAVOR`).
    pub fn flavor(&self) -> Flavor {
        self.data().flavor()
    }

    /// `MPI_WIN_MODEL`: [`MemoryModel::Unified`].
    pub fn model(&self) -> MemoryModel {
        MemoryModel::Unified
    }

    /// `MPI_WIN_DISP_UNIT`: the bytes of one element (displacements count elements of `T`).
    pub fn disp_unit(&self) -> usize {
        std::mem::size_of::<T>().max(1)
    }

    /// `MPI_WIN_BASE`: this member's first element (null for a dynamic window, whose memory
    /// is the regions it attaches); [`Window::local_len`] elements from there
    /// (`MPI_WIN_SIZE` over the unit). Reading or writing through the pointer is the program's
    /// `unsafe` business: the other members may write there in their epochs.
    pub fn base(&self) -> *mut T {
        let d = self.data();
        if d.flavor() == Flavor::Dynamic {
            return std::ptr::null_mut();
        }
        let part = d
            .part("Win_get_attr", d.rank() as i32)
            .expect("a member's own part is always there");
        part.base.cast()
    }

    /// `MPI_Win_get_info`: Weft's values of the standard's info keys (as `(key, value)`).
    pub fn info(&self) -> Vec<(String, String)> {
        crate::rma::window::INFO
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }
}
