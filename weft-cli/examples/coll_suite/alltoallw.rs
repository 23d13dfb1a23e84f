//! All-to-all-w (`MPI_Alltoallw`) against a sequential reference: every pair has its own
//! count (zero for some) and datatype (contiguous `u64`s, a strided vector of `u32`s received
//! as contiguous `u32`s, a padded struct), blocking and immediate.

use weft::collective::{Part, PartMut};
use weft::datatype::{MutView, UserDatatype, View};
use weft::topology::SimpleCommunicator;
use weft::traits::*;

/// How many elements member `i` sends to member `j` (0 for some pairs).
fn count(i: i32, j: i32) -> usize {
    ((3 * i + j) % 4) as usize
}

/// The value of element `k` that member `i` sends to member `j`.
fn value(i: i32, j: i32, k: usize) -> u64 {
    (i as u64) * 1_000_000 + (j as u64) * 1_000 + k as u64 + 1
}

/// One pair's data as the sender holds it and as the receiver gets it.
enum Send {
    Longs(Vec<u64>),
    /// Element k's two values at 4k and 4k + 3 of the buffer (a vector type).
    Strided(Vec<u32>),
    Pairs(Vec<(u8, u64)>),
}

enum Recv {
    Longs(Vec<u64>),
    Ints(Vec<u32>),
    Pairs(Vec<(u8, u64)>),
}

fn kind(i: i32, j: i32) -> i32 {
    (i + j) % 3
}

fn send_part(i: i32, j: i32) -> Send {
    let n = count(i, j);
    match kind(i, j) {
        0 => Send::Longs((0..n).map(|k| value(i, j, k)).collect()),
        1 => {
            let mut b = vec![u32::MAX; 4 * n];
            for k in 0..n {
                b[4 * k] = value(i, j, k) as u32;
                b[4 * k + 3] = !(value(i, j, k) as u32);
            }
            Send::Strided(b)
        }
        _ => Send::Pairs((0..n).map(|k| (k as u8 ^ 0x5a, value(i, j, k))).collect()),
    }
}

fn recv_part(i: i32, j: i32) -> Recv {
    let n = count(i, j);
    match kind(i, j) {
        0 => Recv::Longs(vec![0; n]),
        1 => Recv::Ints(vec![0; 2 * n]),
        _ => Recv::Pairs(vec![(0, 0); n]),
    }
}

/// What member `j` must hold from member `i`.
fn check(i: i32, j: i32, got: &Recv, form: &str) {
    let n = count(i, j);
    match got {
        Recv::Longs(v) => {
            let want: Vec<u64> = (0..n).map(|k| value(i, j, k)).collect();
            assert_eq!(*v, want, "{form} alltoallw longs {i}->{j}");
        }
        Recv::Ints(v) => {
            let want: Vec<u32> = (0..n)
                .flat_map(|k| [value(i, j, k) as u32, !(value(i, j, k) as u32)])
                .collect();
            assert_eq!(*v, want, "{form} alltoallw strided {i}->{j}");
        }
        Recv::Pairs(v) => {
            let want: Vec<(u8, u64)> = (0..n).map(|k| (k as u8 ^ 0x5a, value(i, j, k))).collect();
            assert_eq!(*v, want, "{form} alltoallw pairs {i}->{j}");
        }
    }
}

pub fn all_to_all_w(c: &SimpleCommunicator) {
    let (me, n) = (c.rank(), c.size());
    // Two u32s, 12 bytes apart: element k of the strided sends.
    let strided = UserDatatype::vector(2, 1, 3, &u32::equivalent_datatype());
    for immediate in [false, true] {
        let sends: Vec<Send> = (0..n).map(|j| send_part(me, j)).collect();
        let mut recvs: Vec<Recv> = (0..n).map(|i| recv_part(i, me)).collect();
        let views: Vec<Option<View<'_, '_, UserDatatype, [u32]>>> = sends
            .iter()
            .enumerate()
            .map(|(j, s)| match s {
                // SAFETY: `count` elements of the vector type (extent 16 bytes, 4 u32s) fit
                // in the 4 × count u32s.
                Send::Strided(b) => Some(unsafe {
                    View::with_count_and_datatype(&b[..], count(me, j as i32) as i32, &strided)
                }),
                _ => None,
            })
            .collect();
        let send_parts: Vec<Part<'_>> = sends
            .iter()
            .zip(&views)
            .map(|(s, v)| match (s, v) {
                (_, Some(v)) => Part::new(v),
                (Send::Longs(b), _) => Part::new(&b[..]),
                (Send::Pairs(b), _) => Part::new(&b[..]),
                (Send::Strided(_), None) => unreachable!(),
            })
            .collect();
        let mut recv_parts: Vec<PartMut<'_>> = recvs
            .iter_mut()
            .map(|r| match r {
                Recv::Longs(b) => PartMut::new(&mut b[..]),
                Recv::Ints(b) => PartMut::new(&mut b[..]),
                Recv::Pairs(b) => PartMut::new(&mut b[..]),
            })
            .collect();
        if immediate {
            weft::request::scope(|scope| {
                let r = c.immediate_all_to_all_w_into(scope, &send_parts, &mut recv_parts);
                // The send parts were copied at the start: they may change now.
                drop(send_parts);
                r.wait();
            });
        } else {
            c.all_to_all_w_into(&send_parts, &mut recv_parts);
        }
        drop(recv_parts);
        let form = if immediate { "immediate" } else { "blocking" };
        for (i, r) in recvs.iter().enumerate() {
            check(i as i32, me, r, form);
        }
    }
    // A receive part of a vector type: every other u64 of a buffer, the gaps untouched.
    let every_other = UserDatatype::vector(3, 1, 2, &u64::equivalent_datatype());
    let sends: Vec<[u64; 3]> = (0..n).map(|j| [0, 1, 2].map(|k| value(me, j, k))).collect();
    let send_parts: Vec<Part<'_>> = sends.iter().map(Part::new).collect();
    let mut bufs = vec![[7u64; 5]; n as usize];
    {
        let mut views: Vec<MutView<'_, '_, UserDatatype, [u64]>> = bufs
            .iter_mut()
            // SAFETY: one element of the vector type spans 5 u64s.
            .map(|b| unsafe { MutView::with_count_and_datatype(&mut b[..], 1, &every_other) })
            .collect();
        let mut recv_parts: Vec<PartMut<'_>> = views.iter_mut().map(PartMut::new).collect();
        c.all_to_all_w_into(&send_parts, &mut recv_parts);
    }
    for (i, b) in bufs.iter().enumerate() {
        let v = |k| value(i as i32, me, k);
        assert_eq!(
            *b,
            [v(0), 7, v(1), 7, v(2)],
            "alltoallw into a vector type from {i}"
        );
    }
    in_place(c);
}

/// All-to-all-w in place: part j goes to member j and is replaced by member j's part for
/// this member (a pair's parts the same size both ways; zero for some pairs).
pub fn in_place(c: &SimpleCommunicator) {
    let (me, n) = (c.rank(), c.size());
    let size = |i: i32, j: i32| ((i + j) % 4) as usize;
    let mut longs: Vec<Vec<u64>> = (0..n)
        .map(|j| (0..size(me, j)).map(|k| value(me, j, k)).collect())
        .collect();
    {
        let mut parts: Vec<PartMut<'_>> =
            longs.iter_mut().map(|b| PartMut::new(&mut b[..])).collect();
        c.all_to_all_w_in_place(&mut parts);
    }
    for (j, b) in longs.iter().enumerate() {
        let want: Vec<u64> = (0..size(me, j as i32))
            .map(|k| value(j as i32, me, k))
            .collect();
        assert_eq!(*b, want, "alltoallw in place from {j}");
    }
}

/// Member 1 sends member 2 one value more than member 2 expects (run on 3 members): the
/// job must end with an error naming the call, both members and both sizes.
pub fn mismatch(c: &SimpleCommunicator) {
    let (me, n) = (c.rank(), c.size());
    let sends: Vec<Vec<u64>> = (0..n)
        .map(|j| vec![1; if (me, j) == (1, 2) { 2 } else { 1 }])
        .collect();
    let mut recvs = vec![vec![0u64; 1]; n as usize];
    let send_parts: Vec<Part<'_>> = sends.iter().map(|s| Part::new(&s[..])).collect();
    let mut recv_parts: Vec<PartMut<'_>> =
        recvs.iter_mut().map(|r| PartMut::new(&mut r[..])).collect();
    c.all_to_all_w_into(&send_parts, &mut recv_parts);
}
