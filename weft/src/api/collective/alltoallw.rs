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

use super::start::{check_call, start, Buffers, Called, Started, Then};
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
    /// A zeroed staging vector for the receive parts one after another, and each one's
    /// (offset, length) in it.
    fn for_parts(recv: &[PartMut<'_>]) -> (Self, Vec<(usize, usize)>) {
        let blocks = consecutive(recv.iter().map(PartMut::data_len));
        let landing = Landing {
            tmp: vec![0u8; blocks.last().map_or(0, |b| b.0 + b.1)],
            parts: recv
                .iter()
                .zip(&blocks)
                .map(|(p, b)| {
                    (
                        b.0,
                        p.layout.ptr as *mut u8,
                        p.layout.count,
                        p.layout.map.as_ref().clone(),
                    )
                })
                .collect(),
        };
        (landing, blocks)
    }

    /// Checks each part's bytes (bools, chars) and scatters them into its buffer.
    ///
    /// # Safety
    /// The receive parts the landing was made from are still borrowed mutably.
    unsafe fn land(&self, call: &'static str) -> Result<()> {
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

/// The send parts packed one after another, and each one's (offset, length) in bytes.
fn pack_sends(send: &[Part<'_>]) -> (Vec<u8>, Vec<(usize, usize)>) {
    let blocks = consecutive(send.iter().map(Part::data_len));
    let mut packed = Vec::with_capacity(blocks.last().map_or(0, |b| b.0 + b.1));
    for p in send {
        // SAFETY: a Part's layout: `count` readable elements of its map, borrowed for as long
        // as the part (the parts are packed here, while borrowed).
        unsafe { p.layout.map.pack(p.layout.ptr, p.layout.count, &mut packed) };
    }
    (packed, blocks)
}

/// Starts an all-to-all-w: `send[j]` to member j, member i's part into `recv[i]` (each
/// landing there when the collective completes).
///
/// # Safety
/// The receive parts stay borrowed (mutably) until the returned collective completes.
pub(super) unsafe fn plan_all_to_all_w(
    c: &CommData,
    call: &'static str,
    send: &[Part<'_>],
    recv: &mut [PartMut<'_>],
) -> Result<Started> {
    // An intercommunicator's parts are one per member of the other group.
    let n = c.peers().size();
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
            elem: None,
        },
    )?;
    let (packed, sb) = pack_sends(send);
    let (mut landing, rb) = Landing::for_parts(recv);
    if !c.is_inter() {
        super::check_own_part(
            call,
            c.rank as usize,
            sb[c.rank as usize].1,
            rb[c.rank as usize].1,
        )?;
    }
    let (sl, rl) = (packed.len(), landing.tmp.len());
    let u8_type = u8::equivalent_datatype();
    let bytes = u8_type.type_map();
    // SAFETY: `packed` is moved into the schedule below (moving a Vec keeps its heap block),
    // which keeps it until the collective completes.
    let s = unsafe { Layout::new(packed.as_ptr(), sl, bytes) };
    // SAFETY: the landing's vector is kept by the caller until the collective completes (its
    // promise); moving the landing does not move the vector's heap block.
    let r = unsafe { Layout::new(landing.tmp.as_mut_ptr(), rl, bytes) };
    let bufs = Buffers::of(Some(&s), Some(&r));
    let members: Vec<u32> = c.group.members().to_vec();
    let me = c.rank as usize;
    // SAFETY: the input is `packed`, kept by the schedule; the output the landing's vector,
    // kept by the caller until completion.
    let started = unsafe {
        start(call, c, bufs, None, |sc, m, t| {
            sc.keep(packed);
            sc.name_members(&members, me);
            match c.remote.as_deref() {
                Some(r) => crate::coll::inter::alltoall(
                    sc,
                    m,
                    r.members(),
                    input(sl),
                    &sb,
                    output(rl),
                    &rb,
                ),
                None => algorithm::alltoall(sc, m, t, input(sl), &sb, output(rl), &rb, None),
            }
        })
    }?;
    // SAFETY: `then` runs the landing only once the collective has completed, while the
    // receive parts are still borrowed (the caller's promise).
    let land: Then = Box::new(move |call| unsafe { landing.land(call) });
    // SAFETY: the receive parts, which the landing writes, stay borrowed until completion (the
    // caller's promise).
    Ok(unsafe { started.then(land) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::datatype::{MutView, UserDatatype, View};
    use crate::coll::{Area, Members, Schedule, Span};
    use crate::engine::buffer::{RawBuf, RawBufMut};
    use crate::engine::testing::{run_until_done, world};
    use crate::tunables::{Algorithm, Tunables};

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
        let (packed, blocks) = pack_sends(&sends);
        assert_eq!(blocks, [(0, 12), (12, 5), (17, 2), (19, 0)]);
        let mut dst = [0xffu32; 5];
        let mut got_pair = (0u8, 0u32);
        let mut got_raw = [0u8; 2];
        {
            // SAFETY: as above.
            let mut mv = unsafe { MutView::with_count_and_datatype(&mut dst[..], 1, &every_other) };
            let recvs = [
                PartMut::new(&mut mv),
                PartMut::new(&mut got_pair),
                PartMut::new(&mut got_raw[..]),
            ];
            let (mut landing, _) = Landing::for_parts(&recvs);
            landing.tmp.copy_from_slice(&packed);
            // SAFETY: the receive parts are borrowed in this block.
            unsafe { landing.land("test").unwrap() };
        }
        assert_eq!(dst, [1, 0xff, 2, 0xff, 3], "gaps untouched");
        assert_eq!(got_pair, pair);
        assert_eq!(got_raw, raw);
    }

    /// What member `i` sends member `j`, as the sender holds it.
    enum Sent {
        Longs(Vec<u64>),
        /// Element k's two values at 4k and 4k + 3 (read through a vector type).
        Strided(Vec<u32>),
        Pairs(Vec<(u8, u64)>),
    }

    fn count(i: usize, j: usize) -> usize {
        (2 * i + j) % 4
    }

    fn value(i: usize, j: usize, k: usize) -> u64 {
        (i * 10_000 + j * 100 + k + 1) as u64
    }

    fn sent(i: usize, j: usize) -> Sent {
        let c = count(i, j);
        match (i + j) % 3 {
            0 => Sent::Longs((0..c).map(|k| value(i, j, k)).collect()),
            1 => {
                let mut b = vec![u32::MAX; 4 * c];
                for k in 0..c {
                    b[4 * k] = value(i, j, k) as u32;
                    b[4 * k + 3] = !(value(i, j, k) as u32);
                }
                Sent::Strided(b)
            }
            _ => Sent::Pairs((0..c).map(|k| (k as u8, value(i, j, k))).collect()),
        }
    }

    /// Member `j`'s receive part for member `i`, and what it must hold afterwards (the
    /// strided sends land as contiguous u32s).
    fn expected(i: usize, j: usize) -> Sent {
        match sent(i, j) {
            Sent::Strided(b) => Sent::Strided(b.chunks(4).flat_map(|e| [e[0], e[3]]).collect()),
            other => other,
        }
    }

    fn zeroed(e: &Sent) -> Sent {
        match e {
            Sent::Longs(v) => Sent::Longs(vec![0; v.len()]),
            Sent::Strided(v) => Sent::Strided(vec![0; v.len()]),
            Sent::Pairs(v) => Sent::Pairs(vec![(0, 0); v.len()]),
        }
    }

    fn same(a: &Sent, b: &Sent) -> bool {
        match (a, b) {
            (Sent::Longs(x), Sent::Longs(y)) => x == y,
            (Sent::Strided(x), Sent::Strided(y)) => x == y,
            (Sent::Pairs(x), Sent::Pairs(y)) => x == y,
            _ => false,
        }
    }

    #[test]
    fn all_to_all_w_on_simulated_ranks_matches_a_sequential_reference() {
        // Two u32s 12 bytes apart, extent 16: element k of a strided send.
        let strided = UserDatatype::vector(2, 1, 3, &u32::equivalent_datatype());
        for name in ["pairwise", "scattered"] {
            let mut t = Tunables::defaults();
            t.coll_alltoall = Algorithm(Some(name));
            for n in [1usize, 2, 3, 5, 7] {
                let sends: Vec<Vec<Sent>> = (0..n)
                    .map(|i| (0..n).map(|j| sent(i, j)).collect())
                    .collect();
                let mut recvs: Vec<Vec<Sent>> = (0..n)
                    .map(|j| (0..n).map(|i| zeroed(&expected(i, j))).collect())
                    .collect();
                // Members are world ranks in reverse order.
                let world_ranks: Vec<u32> = (0..n as u32).rev().collect();
                let mut es = world(n as u32, 4, 256, 64, true);
                let mut staged = Vec::new();
                for (me, (mine, into)) in sends.iter().zip(recvs.iter_mut()).enumerate() {
                    let views: Vec<Option<View<'_, '_, UserDatatype, [u32]>>> = mine
                        .iter()
                        .map(|s| match s {
                            // SAFETY: `len / 4` elements of the vector type (4 u32s apart) fit.
                            Sent::Strided(b) => Some(unsafe {
                                View::with_count_and_datatype(
                                    &b[..],
                                    (b.len() / 4) as i32,
                                    &strided,
                                )
                            }),
                            _ => None,
                        })
                        .collect();
                    let parts: Vec<Part<'_>> = mine
                        .iter()
                        .zip(&views)
                        .map(|(s, v)| match (s, v) {
                            (_, Some(v)) => Part::new(v),
                            (Sent::Longs(b), _) => Part::new(&b[..]),
                            (Sent::Pairs(b), _) => Part::new(&b[..]),
                            (Sent::Strided(_), None) => unreachable!(),
                        })
                        .collect();
                    let recv_parts: Vec<PartMut<'_>> = into
                        .iter_mut()
                        .map(|r| match r {
                            Sent::Longs(b) => PartMut::new(&mut b[..]),
                            Sent::Strided(b) => PartMut::new(&mut b[..]),
                            Sent::Pairs(b) => PartMut::new(&mut b[..]),
                        })
                        .collect();
                    let (packed, sb) = pack_sends(&parts);
                    let (landing, rb) = Landing::for_parts(&recv_parts);
                    staged.push((me, packed, sb, landing, rb));
                }
                let mut hs = Vec::new();
                for (me, packed, sb, landing, rb) in staged.iter_mut() {
                    let (sl, rl) = (packed.len(), landing.tmp.len());
                    // SAFETY: `packed` and the landing's vector live in `staged` until after
                    // the run below, untouched until every schedule has completed.
                    let (i, o) = unsafe { (RawBuf::new(packed), RawBufMut::new(&mut landing.tmp)) };
                    let mut s = Schedule::new("all_to_all_w_into", 1, -(1 << 16))
                        .with_input(i)
                        .with_output(o);
                    let m = Members {
                        world: &world_ranks,
                        me: *me,
                        nodes: 1,
                        node_of: &[],
                    };
                    crate::coll::algorithm::alltoall(
                        &mut s,
                        &m,
                        &t,
                        Span::new(Area::Input, 0, sl),
                        sb,
                        Span::new(Area::Output, 0, rl),
                        rb,
                        None,
                    );
                    let w = world_ranks[*me] as usize;
                    // SAFETY: as above.
                    hs.push((w, unsafe { es[w].start_schedule(s) }));
                }
                run_until_done(&mut es, &hs, 200_000);
                for &(w, h) in &hs {
                    es[w].wait(h).expect("the schedule succeeds");
                }
                for (_, _, _, landing, _) in &staged {
                    // SAFETY: the receive parts' buffers (`recvs`) are untouched until now.
                    unsafe { landing.land("test").unwrap() };
                }
                drop(staged);
                for (j, row) in recvs.iter().enumerate() {
                    for (i, got) in row.iter().enumerate() {
                        assert!(same(got, &expected(i, j)), "{name} n={n}: {i} -> {j}");
                    }
                }
            }
        }
    }
}
