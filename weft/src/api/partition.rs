//! Buffers cut into one part per member, for the collectives with a count per member
//! (gatherv, scatterv, allgatherv, alltoallv): rsmpi's `Partition` and `PartitionMut`.
//! Counts and displacements are in elements of the buffer's datatype.

use super::datatype::{Buffer, BufferMut, Count, Layout};
use std::borrow::Borrow;

/// A buffer with a count and a displacement per member (rsmpi's `Partitioned`).
pub trait Partitioned {
    /// Elements in each part.
    fn counts(&self) -> &[Count];
    /// Where each part starts, in elements from the buffer's start.
    fn displs(&self) -> &[Count];
}

/// A partitioned buffer to send from (rsmpi's `PartitionedBuffer`).
pub trait PartitionedBuffer: Partitioned + Buffer {}

/// A partitioned buffer to receive into (rsmpi's `PartitionedBufferMut`).
pub trait PartitionedBufferMut: Partitioned + BufferMut {}

/// `buf` cut into parts (rsmpi's `Partition`).
pub struct Partition<'b, B: ?Sized, C, D> {
    buf: &'b B,
    counts: C,
    displs: D,
}

impl<'b, B: ?Sized + Buffer, C: Borrow<[Count]>, D: Borrow<[Count]>> Partition<'b, B, C, D> {
    /// Parts of `counts[i]` elements at `displs[i]`.
    pub fn new(buf: &'b B, counts: C, displs: D) -> Self {
        Partition {
            buf,
            counts,
            displs,
        }
    }
}

// SAFETY: the layout is the wrapped buffer's own.
unsafe impl<B: ?Sized + Buffer, C, D> Buffer for Partition<'_, B, C, D> {
    fn layout(&self) -> Layout<'_> {
        self.buf.layout()
    }
}

impl<B: ?Sized, C: Borrow<[Count]>, D: Borrow<[Count]>> Partitioned for Partition<'_, B, C, D> {
    fn counts(&self) -> &[Count] {
        self.counts.borrow()
    }
    fn displs(&self) -> &[Count] {
        self.displs.borrow()
    }
}

impl<B: ?Sized + Buffer, C: Borrow<[Count]>, D: Borrow<[Count]>> PartitionedBuffer
    for Partition<'_, B, C, D>
{
}

/// `buf` cut into parts, to receive into (rsmpi's `PartitionMut`).
pub struct PartitionMut<'b, B: ?Sized, C, D> {
    buf: &'b mut B,
    counts: C,
    displs: D,
}

impl<'b, B: ?Sized + BufferMut, C: Borrow<[Count]>, D: Borrow<[Count]>> PartitionMut<'b, B, C, D> {
    /// Parts of `counts[i]` elements at `displs[i]`.
    pub fn new(buf: &'b mut B, counts: C, displs: D) -> Self {
        PartitionMut {
            buf,
            counts,
            displs,
        }
    }
}

// SAFETY: the layout is the wrapped buffer's own, borrowed mutably.
unsafe impl<B: ?Sized + BufferMut, C, D> BufferMut for PartitionMut<'_, B, C, D> {
    fn layout_mut(&mut self) -> Layout<'_> {
        self.buf.layout_mut()
    }
}

impl<B: ?Sized, C: Borrow<[Count]>, D: Borrow<[Count]>> Partitioned for PartitionMut<'_, B, C, D> {
    fn counts(&self) -> &[Count] {
        self.counts.borrow()
    }
    fn displs(&self) -> &[Count] {
        self.displs.borrow()
    }
}

impl<B: ?Sized + BufferMut, C: Borrow<[Count]>, D: Borrow<[Count]>> PartitionedBufferMut
    for PartitionMut<'_, B, C, D>
{
}
