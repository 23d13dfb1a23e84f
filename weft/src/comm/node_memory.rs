//! Node-shared memory for the layers above the fabric: a segment mapped by every member of a
//! group of ranks on one node (a communicator's members on this node), for shared-memory
//! collectives now and RMA windows and the OpenSHMEM heap later.
//!
//! The same rules as the transport's segments (`sys::segment`): mode 0600, no name ever (an
//! unnamed file opened by peers through the creator's descriptor), zero-filled and reserved
//! at creation. The creator closes its descriptor as soon as every member has mapped it, so
//! from then on nobody can open it, and it disappears with the last member's mapping, however
//! the members end (nothing for the launcher to sweep).

use crate::engine::matching::Pattern;
use crate::engine::{Engine, SendMode};
use crate::error::{Error, ErrorClass, Result};
use crate::fabric::Fabric;
use crate::sys::segment::Segment;

/// Longest segment handle sent to members (`<pid>.<fd>.<dev>.<inode>`).
const HANDLE_MAX: usize = 128;

/// What [`NodeSegment::allocate`] gave every member alike.
#[derive(Debug)]
pub enum Allocated {
    /// The segment, mapped here.
    Made(NodeSegment),
    /// No segment: the first member could not create it (why, at that member).
    Unmade(Option<String>),
}

/// A segment shared by a group of ranks on one node.
#[derive(Debug)]
pub struct NodeSegment {
    seg: Segment,
}

impl NodeSegment {
    /// Collective over `members` (world ranks, every one on this node; this rank is
    /// `members[me]`): `members[0]` creates a zeroed segment of `len` bytes and the others map
    /// it. Messages travel on context `ctx` with tag `tag` (the caller's, unused by anything
    /// else in flight among these members).
    ///
    /// `Ok(None)` at every member when `members[0]` could not create it (a full /dev/shm,
    /// say): it tells the others so, and returns why in `unmade` (the others get `None`
    /// there), so that all go on without it alike.
    pub fn allocate<F: Fabric>(
        eng: &mut Engine<F>,
        ctx: u32,
        tag: i32,
        members: &[u32],
        me: usize,
        len: usize,
    ) -> Result<Allocated> {
        const CALL: &str = "node-shared memory";
        let pattern = |from: u32| Pattern {
            context: ctx,
            source: Some(from),
            tag: Some(tag),
        };
        let seg = if me == 0 {
            let mut seg = match Segment::create(len) {
                Ok(seg) => seg,
                Err(e) => {
                    // An empty handle: "none", to every member.
                    for &m in &members[1..] {
                        eng.send(m, ctx, tag, &[], SendMode::Standard)?;
                    }
                    return Ok(Allocated::Unmade(Some(format!(
                        "cannot create a {len}-byte segment for {} ranks: {e}",
                        members.len()
                    ))));
                }
            };
            let handle = seg.handle().as_bytes().to_vec();
            for &m in &members[1..] {
                eng.send(m, ctx, tag, &handle, SendMode::Standard)?;
            }
            // Every member has mapped it when each says so: then close the descriptor.
            for &m in &members[1..] {
                eng.recv(pattern(m), &mut [])?;
            }
            seg.close_descriptor();
            seg
        } else {
            let mut buf = [0u8; HANDLE_MAX];
            let st = eng.recv(pattern(members[0]), &mut buf)?;
            if st.len == 0 {
                return Ok(Allocated::Unmade(None));
            }
            let handle = std::str::from_utf8(&buf[..st.len]).map_err(|_| {
                Error::new(ErrorClass::Internal, CALL, "a segment handle that is not text")
            })?;
            let seg = Segment::open(handle).map_err(|e| {
                Error::new(
                    ErrorClass::Os,
                    CALL,
                    format!("cannot map the segment of rank {} ({handle}): {e}", members[0]),
                )
            })?;
            if seg.len() != len {
                return Err(Error::new(
                    ErrorClass::Internal,
                    CALL,
                    format!("the segment has {} bytes where {len} were asked", seg.len()),
                ));
            }
            eng.send(members[0], ctx, tag, &[], SendMode::Standard)?;
            seg
        };
        Ok(Allocated::Made(NodeSegment { seg }))
    }

    /// The base of the mapping (page-aligned). Other processes read and write it: access it
    /// only through raw pointers and atomics, with the synchronisation its user defines.
    pub fn as_ptr(&self) -> *mut u8 {
        self.seg.as_ptr()
    }

    /// Its length in bytes.
    pub fn len(&self) -> usize {
        self.seg.len()
    }

    /// Whether it is empty (never: segments have at least one byte).
    pub fn is_empty(&self) -> bool {
        self.seg.is_empty()
    }
}
