//! Raw views of user buffers held by in-flight requests.
//!
//! A nonblocking operation keeps the user's buffer borrowed until it completes; the front end
//! enforces that with request scopes (a request cannot outlive the borrow it was made from,
//! and dropping an incomplete request waits or aborts). The engine therefore stores plain
//! pointers, and these two types are the only places it dereferences them.
//!
//! Making a view is `unsafe` (the caller promises the buffer outlives the request that holds
//! the view), and only the engine can read or write through one: a view is `Copy`, so a copy
//! kept past the request must be inert.

/// A read-only buffer (send side).
#[derive(Clone, Copy, Debug)]
pub struct RawBuf {
    ptr: *const u8,
    len: usize,
}

/// A writable buffer (receive side).
#[derive(Clone, Copy, Debug)]
pub struct RawBufMut {
    ptr: *mut u8,
    len: usize,
}

impl RawBuf {
    /// Views `s`, for a send that reads it later.
    ///
    /// # Safety
    /// Until every request started with this view (or a copy of it) has completed, been
    /// cancelled or been freed by the engine: `s` stays allocated, does not move, and is not
    /// written (it stays borrowed shared for that long).
    pub unsafe fn new(s: &[u8]) -> Self {
        RawBuf {
            ptr: s.as_ptr(),
            len: s.len(),
        }
    }
    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The address, for single-copy pulls by a peer.
    pub fn addr(&self) -> u64 {
        self.ptr as u64
    }
    /// The view of bytes `off..off + len` (a part of this view, under the same contract).
    pub(crate) fn sub(&self, off: usize, len: usize) -> RawBuf {
        assert!(
            off.checked_add(len).is_some_and(|end| end <= self.len),
            "RawBuf sub-view {off}+{len} out of a {}-byte view",
            self.len
        );
        RawBuf {
            // `wrapping_add` keeps this safe code: the pointer is only dereferenced in `slice`.
            ptr: self.ptr.wrapping_add(off),
            len,
        }
    }
    /// Bytes `range` of the buffer.
    pub(crate) fn slice(&self, range: std::ops::Range<usize>) -> &[u8] {
        assert!(
            range.start <= range.end && range.end <= self.len,
            "RawBuf slice out of range"
        );
        if range.is_empty() {
            return &[];
        }
        // SAFETY: (1) `ptr..ptr+len` was a live `&[u8]` when the view was made, and the front
        // end keeps it borrowed and unmoved until the owning request completes (module
        // comment); the engine only calls this while the request is in flight. (2) The range
        // is inside `0..len` (asserted above). (3) Nobody writes it meanwhile: it is borrowed
        // shared by the request.
        unsafe { std::slice::from_raw_parts(self.ptr.add(range.start), range.len()) }
    }
}

impl RawBufMut {
    /// Views `s`, for a receive that writes it later.
    ///
    /// # Safety
    /// Until every request started with this view (or a copy of it) has completed, been
    /// cancelled or been freed by the engine: `s` stays allocated, does not move, and is
    /// neither read nor written through any other path (it stays borrowed exclusively).
    pub unsafe fn new(s: &mut [u8]) -> Self {
        RawBufMut {
            ptr: s.as_mut_ptr(),
            len: s.len(),
        }
    }
    /// Capacity in bytes.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The address, for a peer's single-copy push.
    pub fn addr(&self) -> u64 {
        self.ptr as u64
    }
    /// The view of bytes `off..off + len` (a part of this view, under the same contract).
    pub(crate) fn sub(&self, off: usize, len: usize) -> RawBufMut {
        assert!(
            off.checked_add(len).is_some_and(|end| end <= self.len),
            "RawBufMut sub-view {off}+{len} out of a {}-byte view",
            self.len
        );
        RawBufMut {
            ptr: self.ptr.wrapping_add(off),
            len,
        }
    }
    /// The same bytes as a read-only view, for a send of data this request wrote (the caller
    /// keeps writes to these bytes from overlapping the send).
    pub(crate) fn as_readonly(&self) -> RawBuf {
        RawBuf {
            ptr: self.ptr,
            len: self.len,
        }
    }
    /// Copies as much of `data` as fits at `offset`; returns the number of bytes copied.
    pub(crate) fn write_at(&mut self, offset: usize, data: &[u8]) -> usize {
        if offset >= self.len {
            return 0;
        }
        let n = data.len().min(self.len - offset);
        // SAFETY: (1) the buffer is live, unmoved and exclusively borrowed by the request
        // until it completes (module comment); (2) `offset + n <= len` by construction of `n`;
        // (3) `data` is a different allocation (a packet payload or an engine-owned vector),
        // so the regions do not overlap.
        unsafe { crate::sys::copy_bytes(data.as_ptr(), self.ptr.add(offset), n) };
        n
    }
    /// The writable bytes `offset..offset+n`, clamped to the buffer, for a single-copy pull.
    pub(crate) fn slice_mut(&mut self, offset: usize, n: usize) -> &mut [u8] {
        let start = offset.min(self.len);
        let n = n.min(self.len - start);
        if n == 0 {
            return &mut [];
        }
        // SAFETY: as in `write_at`: live, exclusively borrowed by the in-flight request, and
        // `start + n <= len`.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(start), n) }
    }
}
