//! C types that Rust code passes to and from C-style callbacks (rsmpi's `ffi` items that
//! programs name). They follow the MPI 5.0 standard ABI, which Weft's C library implements:
//! handles are pointers to opaque structs.

#![allow(non_camel_case_types)]

/// The opaque struct a datatype handle points to (`struct MPI_ABI_Datatype`).
#[repr(C)]
pub struct MPI_ABI_Datatype {
    _private: [u8; 0],
}

/// A datatype handle (`MPI_Datatype`).
pub type MPI_Datatype = *mut MPI_ABI_Datatype;
