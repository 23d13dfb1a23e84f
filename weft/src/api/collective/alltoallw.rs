//! All-to-all with a datatype, count and place per pair (`MPI_Alltoallw`), a Weft
//! extension (rsmpi has no such call).
//!
//! MPI gives one buffer and, per member, a byte displacement, a count and a datatype. In
//! Rust each part is its own typed view instead: a [`Part`] (what this member sends to one
//! member) or a [`PartMut`] (where one member's data lands), made safely from anything that
//! is a [`Buffer`]/[`BufferMut`] — a slice, a chunk from `split_at_mut` or `chunks_mut`, a
//! value of a derived type, a `View` of a vector type. Parts made from disjoint borrows
//! cannot overlap, so no displacement needs checking and no `unsafe` is asked of the caller.
//!
//! The schedule is the pairwise (or scattered) all-to-all of `coll::alltoall` with a block
//! size per pair: the send parts are packed into one contiguous input when the call starts
//! (so the send buffers are free again at once), the receive parts land from one contiguous
//! staging vector when the call completes, each unpacked by its own datatype.

use super::start::{check_call, start, Buffers, Called, Started};
use super::{count_error, input, output};
use crate::api::datatype::{Buffer, BufferMut, Datatype, Equivalence, Layout, TypeMap};
use crate::coll::algorithm;
use crate::comm::CommData;
use crate::error::Result;

/// What this member sends to one member in [`all_to_all_w_into`]: a buffer of any datatype
/// and count.
///
/// [`all_to_all_w_into`]: super::CommunicatorCollectives::all_to_all_w_into
pub struct Part<'b> {
    layout: Layout<'b>,
}

impl<'b> Part<'b> {
    /// The whole of `buffer`, with its own datatype and count.
    pub fn new<B: ?Sized + Buffer>(buffer: &'b B) -> Self {
        Part {
            layout: buffer.layout(),
        }
    }
    /// Bytes of data in the part (packed).
    pub fn data_len(&self) -> usize {
        self.layout.data_len()
    }
}

impl std::fmt::Debug for Part<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Part")
            .field("bytes", &self.data_len())
            .finish_non_exhaustive()
    }
}

/// Where one member's data lands in [`all_to_all_w_into`]: a buffer of any datatype and
/// count, borrowed mutably.
///
/// [`all_to_all_w_into`]: super::CommunicatorCollectives::all_to_all_w_into
pub struct PartMut<'b> {
    layout: Layout<'b>,
    _exclusive: std::marker::PhantomData<&'b mut ()>,
}

impl<'b> PartMut<'b> {
    /// The whole of `buffer`, with its own datatype and count.
    pub fn new<B: ?Sized + BufferMut>(buffer: &'b mut B) -> Self {
        PartMut {
            layout: buffer.layout_mut(),
            _exclusive: std::marker::PhantomData,
        }
    }
    /// Bytes of data the part takes (packed).
    pub fn data_len(&self) -> usize {
        self.layout.data_len()
    }
}

impl std::fmt::Debug for PartMut<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PartMut")
            .field("bytes", &self.data_len())
            .finish_non_exhaustive()
    }
}

/// The parts of an in-place all-to-all-w seen as send parts (read when the call starts).
pub(super) fn parts_of<'b>(parts: &[PartMut<'b>]) -> Vec<Part<'b>> {
    parts
        .iter()
        .map(|p| Part {
            layout: p.layout.clone(),
        })
        .collect()
}

/// The receive parts' staging: one contiguous vector the schedule writes, and where each
/// part's bytes go when the collective completes.
pub(super) struct Landing {
    tmp: Vec<u8>,
    /// Per member: (offset in `tmp`, the part's pointer, count and datatype).
    parts: Vec<(usize, *mut u8, usize, TypeMap)>,
}

impl Landing {
    /// Checks each part's bytes (bools, chars) and scatters them into its buffer.
    ///
    /// # Safety
    /// The receive parts the landing was made from are still borrowed mutably.
    pub(super) unsafe fn land(&self, call: &'static str) -> Result<()> {
        for (at, ptr, count, map) in &self.parts {
            let bytes = &self.tmp[*at..*at + count * map.size()];
            map.check_values(call, bytes)?;
            // SAFETY: a PartMut's layout: `count` writable elements of `map` at `ptr`,
            // borrowed mutably (the caller's promise).
            unsafe { map.unpack(bytes, *ptr, *count) };
        }
        Ok(())
    }
}

/// (offset, length) of consecutive blocks of `lens` bytes.
fn consecutive(lens: impl Iterator<Item = usize>) -> Vec<(usize, usize)> {
    let mut off = 0;
    lens.map(|l| {
        let b = (off, l);
        off += l;
        b
    })
    .collect()
}

/// Starts an all-to-all-w: `send[j]` to member j, member i's part into `recv[i]`.
///
/// # Safety
/// The receive parts stay borrowed (mutably) until the returned collective completes and
/// its [`Landing`] has landed.
pub(super) unsafe fn plan_all_to_all_w(
    c: &CommData,
    call: &'static str,
    send: &[Part<'_>],
    recv: &mut [PartMut<'_>],
) -> Result<(Started, Landing)> {
    let n = c.size() as usize;
    if send.len() != n || recv.len() != n {
        return Err(count_error(
            call,
            format!(
                "{} send parts and {} receive parts for {n} members: one of each per member",
                send.len(),
                recv.len()
            ),
        ));
    }
    check_call(
        c,
        Called {
            call,
            root: None,
            unit: None,
            op: None,
        },
    )?;
    let sb = consecutive(send.iter().map(Part::data_len));
    let rb = consecutive(recv.iter().map(PartMut::data_len));
    super::check_own_part(
        call,
        c.rank as usize,
        sb[c.rank as usize].1,
        rb[c.rank as usize].1,
    )?;
    let (sl, rl) = (
        sb.last().map_or(0, |b| b.0 + b.1),
        rb.last().map_or(0, |b| b.0 + b.1),
    );
    let mut packed = Vec::with_capacity(sl);
    for p in send {
        // SAFETY: a Part's layout: `count` readable elements of its map, borrowed for this
        // call (the parts are packed here, before the call returns).
        unsafe { p.layout.map.pack(p.layout.ptr, p.layout.count, &mut packed) };
    }
    let mut landing = Landing {
        tmp: vec![0u8; rl],
        parts: recv
            .iter()
            .zip(&rb)
            .map(|(p, b)| {
                (
                    b.0,
                    p.layout.ptr as *mut u8,
                    p.layout.count,
                    p.layout.map.clone(),
                )
            })
            .collect(),
    };
    let u8_type = u8::equivalent_datatype();
    let bytes = u8_type.type_map();
    // SAFETY: `packed` is moved into the schedule below (moving a Vec keeps its heap block),
    // which keeps it until the collective completes.
    let s = unsafe { Layout::new(packed.as_ptr(), sl, bytes) };
    // SAFETY: the landing's vector is kept by the caller until the collective completes (its
    // promise); moving the landing does not move the vector's heap block.
    let r = unsafe { Layout::new(landing.tmp.as_mut_ptr(), rl, bytes) };
    let bufs = Buffers {
        input: Some(&s),
        output: Some(&r),
        prefill: false,
    };
    let members: Vec<u32> = c.group.members().to_vec();
    let me = c.rank as usize;
    // SAFETY: the input is `packed`, kept by the schedule; the output the landing's vector,
    // kept by the caller until completion.
    let started = unsafe {
        start(call, c, bufs, None, |sc, m, t| {
            sc.keep(packed);
            sc.name_members(&members, me);
            algorithm::alltoall(sc, m, t, input(sl), &sb, output(rl), &rb)
        })
    }?;
    Ok((started, landing))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::datatype::{UserDatatype, View};

    #[test]
    fn parts_pack_and_land_by_their_own_datatypes() {
        // A vector type (every other u32 of 5), a struct type, plain bytes, and an empty part.
        let every_other = UserDatatype::vector(3, 1, 2, &u32::equivalent_datatype());
        let src = [1u32, 0, 2, 0, 3];
        let pair = (7u8, 9u32);
        let raw = [5u8, 6];
        // SAFETY: one element of the vector type spans 5 u32s.
        let view = unsafe { View::with_count_and_datatype(&src[..], 1, &every_other) };
        let sends = [
            Part::new(&view),
            Part::new(&pair),
            Part::new(&raw[..]),
            Part::new(&[0u64; 0][..]),
        ];
        let lens: Vec<usize> = sends.iter().map(Part::data_len).collect();
        assert_eq!(lens, [12, 5, 2, 0]);
        let mut packed = Vec::new();
        for p in &sends {
            // SAFETY: as in `plan_all_to_all_w`.
            unsafe { p.layout.map.pack(p.layout.ptr, p.layout.count, &mut packed) };
        }
        let mut dst = [0xffu32; 5];
        let mut got_pair = (0u8, 0u32);
        let mut got_raw = [0u8; 2];
        {
            // SAFETY: as above.
            let mut mv = unsafe {
                crate::api::datatype::MutView::with_count_and_datatype(
                    &mut dst[..],
                    1,
                    &every_other,
                )
            };
            let recvs = [
                PartMut::new(&mut mv),
                PartMut::new(&mut got_pair),
                PartMut::new(&mut got_raw[..]),
            ];
            let rb = consecutive(recvs.iter().map(PartMut::data_len));
            let landing = Landing {
                tmp: packed[..19].to_vec(),
                parts: recvs
                    .iter()
                    .zip(&rb)
                    .map(|(p, b)| {
                        (
                            b.0,
                            p.layout.ptr as *mut u8,
                            p.layout.count,
                            p.layout.map.clone(),
                        )
                    })
                    .collect(),
            };
            // SAFETY: the receive parts are borrowed in this block.
            unsafe { landing.land("test").unwrap() };
        }
        assert_eq!(dst, [1, 0xff, 2, 0xff, 3], "gaps untouched");
        assert_eq!(got_pair, pair);
        assert_eq!(got_raw, raw);
    }
}
