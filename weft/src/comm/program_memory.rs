//! Memory for the program (`MPI_Alloc_mem`), node-shared: each block is a segment of its own
//! (`sys::segment`: mode 0600, unnamed, reserved at creation) that this process keeps open
//! while the block lives, so that a window later created over it (`MPI_Win_create`) is
//! reached by the other members on this node directly, with plain loads, stores and the
//! CPU's atomics, as `MPI_Win_allocate`'s memory is: they map the block on first contact.
//!
//! A block the system will not make a segment of (no room in `/dev/shm`, no descriptor
//! left) comes from the heap instead, as it would without this: it still works, reached by
//! cross-memory copy. Every block is recorded, so freeing one not handed out is an error.

use crate::sys::segment::Segment;
use std::alloc::Layout;
use std::collections::BTreeMap;
use std::sync::Mutex;

/// Alignment of heap blocks (segments are page-aligned).
const ALIGN: usize = 64;

enum Block {
    Shared(Segment),
    Heap(Layout),
}

/// Blocks handed out and not freed: address → block.
static BLOCKS: Mutex<BTreeMap<usize, Block>> = Mutex::new(BTreeMap::new());

fn blocks() -> std::sync::MutexGuard<'static, BTreeMap<usize, Block>> {
    BLOCKS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Where a node-shared block lies, for a process of this node to map it: the segment's
/// descriptor in the owner, device and inode (with the owner's pid, its handle), and the
/// offset of the asked bytes in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SharedPlace {
    /// The segment's descriptor in its owner.
    pub fd: u64,
    /// Its device.
    pub dev: u64,
    /// Its inode.
    pub ino: u64,
    /// Where the bytes asked for start in it.
    pub offset: u64,
}

impl SharedPlace {
    /// The segment's handle, for [`Segment::open`], given its owner's `pid`.
    pub fn handle(&self, pid: u64) -> String {
        format!("{pid}.{}.{:x}.{:x}", self.fd, self.dev, self.ino)
    }
}

/// A block of `size` bytes (at least one), node-shared when the system allows. `None` when
/// the heap is out of memory too.
pub fn allocate(size: usize) -> Option<*mut u8> {
    let size = size.max(1);
    if let Ok(seg) = Segment::create(size) {
        let p = seg.as_ptr();
        blocks().insert(p as usize, Block::Shared(seg));
        return Some(p);
    }
    let layout = Layout::from_size_align(size, ALIGN).ok()?;
    // SAFETY: the layout's size is not zero.
    let p = unsafe { std::alloc::alloc(layout) };
    if p.is_null() {
        return None;
    }
    blocks().insert(p as usize, Block::Heap(layout));
    Some(p)
}

/// Frees the block `allocate` handed out at `p`; false if it did not (or it was freed).
///
/// # Safety
/// Nothing in this process uses the block after this (other processes' mappings of a
/// node-shared block keep it for them).
pub unsafe fn free(p: *mut u8) -> bool {
    match blocks().remove(&(p as usize)) {
        // Unmapped here by the drop; the other processes' mappings keep it until theirs go.
        Some(Block::Shared(_)) => true,
        Some(Block::Heap(layout)) => {
            // SAFETY: allocated by `allocate` with this layout, not freed since (recorded), and
            // unused from now on (the caller's promise).
            unsafe { std::alloc::dealloc(p, layout) };
            true
        }
        None => false,
    }
}

/// Where the `len` bytes at `p` lie, when a node-shared block holds them all.
pub fn shared_place(p: *const u8, len: usize) -> Option<SharedPlace> {
    let addr = p as usize;
    let blocks = blocks();
    let (&start, block) = blocks.range(..=addr).next_back()?;
    let Block::Shared(seg) = block else {
        return None;
    };
    let end = addr.checked_add(len)?;
    if end > start + seg.len() {
        return None;
    }
    let mut parts = seg.handle().split('.').skip(1);
    let mut next = |radix| parts.next().and_then(|s| u64::from_str_radix(s, radix).ok());
    Some(SharedPlace {
        fd: next(10)?,
        dev: next(16)?,
        ino: next(16)?,
        offset: (addr - start) as u64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_node_shared_and_found_by_any_address_inside() {
        let p = allocate(10_000).expect("memory");
        let place = shared_place(p, 10_000).expect("a segment");
        assert_eq!(place.offset, 0);
        // SAFETY: 10,000 bytes at `p` were just allocated.
        let inner = unsafe { p.add(100) };
        assert_eq!(shared_place(inner, 50).map(|s| s.offset), Some(100));
        assert!(shared_place(inner, 20_000).is_none(), "past the block's end");
        let mapped = Segment::open(&place.handle(u64::from(std::process::id()))).expect("opens");
        // SAFETY: both map the same 10,000 bytes (at least) of one file.
        unsafe {
            *p.add(7) = 42;
            assert_eq!(*mapped.as_ptr().add(7), 42, "one memory");
        }
        drop(mapped);
        // SAFETY: nothing uses the block after this.
        unsafe {
            assert!(free(p));
            assert!(!free(p), "freed once");
        }
        assert!(shared_place(p, 1).is_none());
    }

    #[test]
    fn heap_memory_is_not_shared() {
        let v = [0u8; 16];
        assert!(shared_place(v.as_ptr(), 16).is_none());
        // SAFETY: refused: `v` is not a block.
        assert!(!unsafe { free(v.as_ptr() as *mut u8) });
    }
}
