//! The cases MPICH's collective tests cover that the rest of the suite does not (see
//! `docs/mpich-coll-coverage.md`): in-place forms (`in_place.rs`), every predefined operation on every type
//! it applies to, a padded struct and a vector datatype in every collective, non-commutative
//! operations in reduce and reduce-scatter at roots that are not 0, large vectors, and every
//! immediate form in flight at once. Each result is checked against a sequential reference.

use weft::collective::{SystemOperation, UserOperation};
use weft::datatype::{MutView, Partition, PartitionMut, UserDatatype, View};
use weft::topology::SimpleCommunicator;
use weft::traits::*;
use weft::Count;

/// A struct with padding (not contiguous): a derived datatype of three kinds of field.
#[derive(Equivalence, Clone, Copy, Debug, Default, PartialEq)]
struct Particle {
    kind: u8,
    pos: [f64; 2],
    id: i32,
}

fn particle(r: i32, k: usize) -> Particle {
    Particle {
        kind: (r as u8).wrapping_mul(3) ^ k as u8,
        pos: [r as f64 + 0.5, k as f64 * 0.25],
        id: r * 1000 + k as i32,
    }
}

/// Member `r`'s `len` values for test `salt`.
pub fn values(r: i32, len: usize, salt: u64) -> Vec<u64> {
    (0..len as u64)
        .map(|i| {
            (i.wrapping_mul(0x9E37_79B9) ^ (r as u64).wrapping_mul(0x85EB_CA6B) ^ salt) % 1_000_003
        })
        .collect()
}

/// `y = x ∘ y`, element-wise, for affine maps x ↦ a·x + b as (a, b).
pub fn compose_into(x: &[[u64; 2]], y: &mut [[u64; 2]]) {
    for (a, b) in x.iter().zip(y.iter_mut()) {
        *b = [
            a[0].wrapping_mul(b[0]),
            a[0].wrapping_mul(b[1]).wrapping_add(a[1]),
        ];
    }
}

/// Affine maps x ↦ a·x + b as (a, b), composed in rank order: not commutative.
pub fn compose() -> UserOperation<'static> {
    UserOperation::associative(|x, y| {
        compose_into(
            x.downcast().expect("pairs of u64"),
            y.downcast().expect("pairs of u64"),
        )
    })
}

pub fn affine(r: i32, len: usize, salt: u64) -> Vec<[u64; 2]> {
    values(r, len, salt)
        .iter()
        .map(|&v| [v | 1, v / 3])
        .collect()
}

/// `of(lo) ∘ of(lo + 1) ∘ … ∘ of(hi - 1)`.
pub fn fold_affine(lo: i32, hi: i32, len: usize, salt: u64) -> Vec<[u64; 2]> {
    fold_affine_of(&(lo..hi).collect::<Vec<_>>(), len, salt)
}

/// `of(ranks[0]) ∘ of(ranks[1]) ∘ …` (`ranks` not empty).
pub fn fold_affine_of(ranks: &[i32], len: usize, salt: u64) -> Vec<[u64; 2]> {
    let (last, rest) = ranks.split_last().expect("at least one rank");
    let mut acc = affine(*last, len, salt);
    for &q in rest.iter().rev() {
        compose_into(&affine(q, len, salt), &mut acc);
    }
    acc
}

/// Everything in this file, on communicator `c`.
pub fn coverage(c: &SimpleCommunicator) {
    crate::in_place::in_place(c);
    local_and_zero_size(c);
    every_operation_on_every_type(c);
    derived_types_in_every_collective(c);
    non_commutative_at_every_root(c);
    reduce_scatter_varcount(c);
    every_immediate_form_at_once(c);
}

/// Reduce-scatter with a count per member (q % 3 + q / 3 elements for member q, none for
/// member 0): commutative, non-commutative, immediate and in place.
fn reduce_scatter_varcount(c: &SimpleCommunicator) {
    let (me, n) = (c.rank(), c.size());
    let m = me as usize;
    let counts: Vec<Count> = (0..n).map(|q| q % 3 + q / 3).collect();
    let displs: Vec<Count> = counts
        .iter()
        .scan(0, |a, &x| {
            let d = *a;
            *a += x;
            Some(d)
        })
        .collect();
    let total = counts.iter().sum::<Count>() as usize;
    let (d, k) = (displs[m] as usize, counts[m] as usize);
    let mut want = vec![0u64; total];
    for q in 0..n {
        for (w, x) in want.iter_mut().zip(values(q, total, 36)) {
            *w = w.wrapping_add(x);
        }
    }
    let send = values(me, total, 36);
    let mut r = vec![0u64; k];
    c.reduce_scatter_varcount_into(
        &Partition::new(&send[..], &counts[..], &displs[..]),
        &mut r[..],
        SystemOperation::sum(),
    );
    assert_eq!(r[..], want[d..d + k], "reduce_scatter (counts) sum");
    let pairs = affine(me, total, 37);
    let mut rp = vec![[0u64; 2]; k];
    c.reduce_scatter_varcount_into(
        &Partition::new(&pairs[..], &counts[..], &displs[..]),
        &mut rp[..],
        compose(),
    );
    assert_eq!(
        rp[..],
        fold_affine(0, n, total, 37)[d..d + k],
        "reduce_scatter (counts) non-commutative"
    );
    let mut ri = vec![0u64; k];
    let p = Partition::new(&send[..], &counts[..], &displs[..]);
    weft::request::scope(|scope| {
        c.immediate_reduce_scatter_varcount_into(scope, &p, &mut ri[..], SystemOperation::sum())
            .wait();
    });
    assert_eq!(ri[..], want[d..d + k], "immediate reduce_scatter (counts)");
    let mut b = send.clone();
    c.reduce_scatter_varcount_in_place(
        &mut PartitionMut::new(&mut b[..], &counts[..], &displs[..]),
        SystemOperation::sum(),
    );
    assert_eq!(b[..k], want[d..d + k], "reduce_scatter (counts) in place");
    assert_eq!(
        b[k..],
        send[k..],
        "reduce_scatter (counts) in place: the rest"
    );
}

/// Large vectors (MiB per member), for the `large` case.
pub fn large(c: &SimpleCommunicator) {
    let (me, n) = (c.rank(), c.size());
    let len = (1 << 20) / 8 * 3; // 3 MiB of u64
    let root = n - 1;
    let mut b = if me == root {
        values(root, len, 60)
    } else {
        vec![0; len]
    };
    c.process_at_rank(root).broadcast_into(&mut b[..]);
    assert!(b == values(root, len, 60), "3 MiB broadcast");
    let mine = values(me, len, 61);
    let mut s = vec![0u64; len];
    c.all_reduce_into(&mine[..], &mut s[..], SystemOperation::sum());
    let mut want = vec![0u64; len];
    for q in 0..n {
        for (w, x) in want.iter_mut().zip(values(q, len, 61)) {
            *w = w.wrapping_add(x);
        }
    }
    assert!(s == want, "3 MiB allreduce");
    // Beyond the slot from 3 members: the area a slot at a time (rank order kept: the
    // operation does not commute, its elements are 16 bytes).
    let pairs = len / 2;
    let mut r = vec![[0u64; 2]; if me == 0 { pairs } else { 0 }];
    let mine = affine(me, pairs, 64);
    if me == 0 {
        c.process_at_rank(0)
            .reduce_into_root(&mine[..], &mut r[..], compose());
        assert!(
            r == fold_affine(0, n, pairs, 64),
            "3 MiB non-commutative reduce"
        );
    } else {
        c.process_at_rank(0).reduce_into(&mine[..], compose());
    }
    let per = (1 << 20) / 8; // 1 MiB a member
    for (each, salt) in [(len, 65), (per, 62)] {
        let mut g = vec![0u64; each * n as usize];
        c.all_gather_into(&values(me, each, salt)[..], &mut g[..]);
        for q in 0..n as usize {
            assert!(
                g[q * each..(q + 1) * each] == values(q as i32, each, salt)[..],
                "allgather of {each} u64 from {q}"
            );
        }
    }
    let send = values(me, per * n as usize, 63);
    let mut recv = vec![0u64; per * n as usize];
    c.all_to_all_into(&send[..], &mut recv[..]);
    for q in 0..n as usize {
        let theirs = values(q as i32, per * n as usize, 63);
        let m = me as usize;
        assert!(
            recv[q * per..(q + 1) * per] == theirs[m * per..(m + 1) * per],
            "1 MiB alltoall from {q}"
        );
    }
    // A scatter of 1 MiB blocks from the last member (by single copies where the members may
    // copy from each other's memory).
    let mut mine = vec![0u64; per];
    let rp = c.process_at_rank(root);
    if me == root {
        rp.scatter_into_root(&send[..], &mut mine[..]);
    } else {
        rp.scatter_into(&mut mine[..]);
    }
    let m = me as usize;
    assert!(
        mine[..] == values(root, per * n as usize, 63)[m * per..(m + 1) * per],
        "1 MiB scatter from {root}"
    );
    // And a gather of the same blocks back to that member (by single copies as well).
    let mut back = vec![0u64; if me == root { per * n as usize } else { 0 }];
    if me == root {
        rp.gather_into_root(&mine[..], &mut back[..]);
        assert!(
            back == values(root, per * n as usize, 63),
            "1 MiB gather to {root}"
        );
    } else {
        rp.gather_into(&mine[..]);
    }
    // Reduce-scatters of 1 MiB blocks: on 2 members by single copies with the commutative
    // sum, through the area or by messages with the operation that does not commute.
    let mut block = vec![0u64; per];
    c.reduce_scatter_block_into(&send[..], &mut block[..], SystemOperation::sum());
    let mut want = vec![0u64; per];
    for q in 0..n {
        let theirs = values(q, per * n as usize, 63);
        for (w, x) in want.iter_mut().zip(&theirs[m * per..(m + 1) * per]) {
            *w = w.wrapping_add(*x);
        }
    }
    assert!(block == want, "1 MiB reduce_scatter_block");
    let pairs = per / 2;
    let mut mine = vec![[0u64; 2]; pairs];
    let all = affine(me, pairs * n as usize, 66);
    c.reduce_scatter_block_into(&all[..], &mut mine[..], compose());
    let whole = fold_affine(0, n, pairs * n as usize, 66);
    assert!(
        mine[..] == whole[m * pairs..(m + 1) * pairs],
        "1 MiB non-commutative reduce_scatter_block"
    );
}

/// `reduce_local_into` with a non-commutative operation (`inout = in ∘ inout`), the
/// commutativity flag, and a broadcast of elements of a zero-size type.
fn local_and_zero_size(c: &SimpleCommunicator) {
    let me = c.rank();
    let x = affine(me, 6, 34);
    let mut y = affine(me + 1, 6, 34);
    weft::collective::reduce_local_into(&x[..], &mut y[..], compose());
    assert_eq!(
        y,
        fold_affine(me, me + 2, 6, 34),
        "reduce_local: in ∘ inout"
    );
    let mut s = values(me, 6, 35);
    weft::collective::reduce_local_into(
        &values(me + 1, 6, 35)[..],
        &mut s[..],
        SystemOperation::bitwise_xor(),
    );
    let want: Vec<u64> = values(me, 6, 35)
        .iter()
        .zip(values(me + 1, 6, 35))
        .map(|(a, b)| a ^ b)
        .collect();
    assert_eq!(s, want, "reduce_local with a predefined operation");
    assert!(!compose().is_commutative() && SystemOperation::sum().is_commutative());
    // Five elements of a type with no data: nothing moves, nothing fails.
    let mut z = [[0u64; 0]; 5];
    c.process_at_rank(c.size() - 1).broadcast_into(&mut z[..]);
    let mut g = vec![[0u64; 0]; 5 * c.size() as usize];
    c.all_gather_into(&z[..], &mut g[..]);
}

/// Allreduce and reduce (to the last member) of every predefined operation on every type
/// it applies to, against a fold computed here.
fn every_operation_on_every_type(c: &SimpleCommunicator) {
    let (me, n) = (c.rank(), c.size());
    let root = c.process_at_rank(n - 1);
    macro_rules! check {
        ($t:ty, $op:expr, $name:expr, $val:expr, $fold:expr) => {{
            let val: fn(i32, usize) -> $t = $val;
            let fold: fn($t, $t) -> $t = $fold;
            let len = 100;
            let mine: Vec<$t> = (0..len).map(|k| val(me, k)).collect();
            let want: Vec<$t> = (0..len)
                .map(|k| (1..n).fold(val(0, k), |acc, q| fold(acc, val(q, k))))
                .collect();
            let mut got = vec![val(0, 0); len];
            c.all_reduce_into(&mine[..], &mut got[..], $op);
            assert!(
                got == want,
                "allreduce {} on {}: {:?} != {:?}",
                $name,
                stringify!($t),
                got,
                want
            );
            if me == n - 1 {
                let mut r = vec![val(0, 0); len];
                root.reduce_into_root(&mine[..], &mut r[..], $op);
                assert!(r == want, "reduce {} on {}", $name, stringify!($t));
            } else {
                root.reduce_into(&mine[..], $op);
            }
        }};
    }
    macro_rules! integers {
        ($($t:ty),*) => {$(
            // Values that overflow a product and mix signs.
            let v: fn(i32, usize) -> $t = |r, k| (((r as i64) * 37 + k as i64 * 11 - 40) as $t) | 1;
            check!($t, SystemOperation::sum(), "sum", v, |a, b| a.wrapping_add(b));
            check!($t, SystemOperation::product(), "prod", v, |a, b| a.wrapping_mul(b));
            check!($t, SystemOperation::max(), "max", v, |a, b| a.max(b));
            check!($t, SystemOperation::min(), "min", v, |a, b| a.min(b));
            check!($t, SystemOperation::bitwise_and(), "band", v, |a, b| a & b);
            check!($t, SystemOperation::bitwise_or(), "bor", v, |a, b| a | b);
            check!($t, SystemOperation::bitwise_xor(), "bxor", v, |a, b| a ^ b);
            let z: fn(i32, usize) -> $t = |r, k| ((r as usize + k) % 3 / 2) as $t * 5;
            check!($t, SystemOperation::logical_and(), "land", z, |a, b| (a != 0 && b != 0) as $t);
            check!($t, SystemOperation::logical_or(), "lor", z, |a, b| (a != 0 || b != 0) as $t);
            check!($t, SystemOperation::logical_xor(), "lxor", z, |a, b| ((a != 0) != (b != 0)) as $t);
        )*};
    }
    integers!(i8, u8, i16, u16, i32, u32, i64, u64, i128, u128);
    macro_rules! floats {
        ($($t:ty),*) => {$(
            // Small integers in floating point: every order of the sum gives the same bits.
            let v: fn(i32, usize) -> $t = |r, k| ((r * 7 + k as i32 * 3) % 11 - 5) as $t;
            check!($t, SystemOperation::sum(), "sum", v, |a, b| a + b);
            check!($t, SystemOperation::max(), "max", v, |a, b| a.max(b));
            check!($t, SystemOperation::min(), "min", v, |a, b| a.min(b));
            let p: fn(i32, usize) -> $t = |r, k| if (r as usize + k) % 2 == 0 { 2.0 } else { -0.5 };
            check!($t, SystemOperation::product(), "prod", p, |a, b| a * b);
        )*};
    }
    floats!(f32, f64);
    let b: fn(i32, usize) -> bool = |r, k| !(r as usize + k).is_multiple_of(3);
    check!(bool, SystemOperation::logical_and(), "land", b, |a, b| a
        && b);
    check!(bool, SystemOperation::logical_or(), "lor", b, |a, b| a || b);
    check!(bool, SystemOperation::logical_xor(), "lxor", b, |a, b| a
        != b);
    check!(bool, SystemOperation::bitwise_and(), "band", b, |a, b| a
        & b);
    check!(bool, SystemOperation::bitwise_or(), "bor", b, |a, b| a | b);
    check!(bool, SystemOperation::bitwise_xor(), "bxor", b, |a, b| a
        ^ b);
    // Minloc and maxloc on (value, index) pairs of several types, with ties.
    macro_rules! locs {
        ($($v:ty, $i:ty);*) => {$(
            let v: fn(i32, usize) -> ($v, $i) = |r, k| ((((r as usize + k) % 3) as u8) as $v, r as $i);
            check!(($v, $i), SystemOperation::min_loc(), "minloc", v, |a, b| if b.0 < a.0 || (b.0 == a.0 && b.1 < a.1) { b } else { a });
            check!(($v, $i), SystemOperation::max_loc(), "maxloc", v, |a, b| if b.0 > a.0 || (b.0 == a.0 && b.1 < a.1) { b } else { a });
        )*};
    }
    locs!(f32, i32; f64, i32; i32, i32; i64, i32; i16, i32; u64, i64);
}

/// A padded struct (derived datatype) through broadcast, gather, scatter, allgather,
/// all-to-all and their count-per-member forms, and a user reduction on it.
fn derived_types_in_every_collective(c: &SimpleCommunicator) {
    let (me, n) = (c.rank(), c.size());
    let nu = n as usize;
    let len = 3;
    let mine: Vec<Particle> = (0..len).map(|k| particle(me, k)).collect();
    let all: Vec<Particle> = (0..n)
        .flat_map(|q| (0..len).map(move |k| particle(q, k)))
        .collect();
    let root = n / 2;
    let rp = c.process_at_rank(root);
    let mut b = if me == root {
        mine.clone()
    } else {
        vec![Particle::default(); len]
    };
    rp.broadcast_into(&mut b[..]);
    assert_eq!(
        b,
        (0..len).map(|k| particle(root, k)).collect::<Vec<_>>(),
        "struct broadcast"
    );
    if me == root {
        let mut g = vec![Particle::default(); len * nu];
        rp.gather_into_root(&mine[..], &mut g[..]);
        assert_eq!(g, all, "struct gather");
        let mut s = vec![Particle::default(); len];
        rp.scatter_into_root(&all[..], &mut s[..]);
        assert_eq!(s, mine, "struct scatter");
    } else {
        rp.gather_into(&mine[..]);
        let mut s = vec![Particle::default(); len];
        rp.scatter_into(&mut s[..]);
        assert_eq!(s, mine, "struct scatter");
    }
    let mut g = vec![Particle::default(); len * nu];
    c.all_gather_into(&mine[..], &mut g[..]);
    assert_eq!(g, all, "struct allgather");
    let send: Vec<Particle> = (0..nu * len).map(|k| particle(me, k)).collect();
    let mut recv = vec![Particle::default(); nu * len];
    c.all_to_all_into(&send[..], &mut recv[..]);
    for q in 0..nu {
        let want: Vec<Particle> = (0..len)
            .map(|k| particle(q as i32, me as usize * len + k))
            .collect();
        assert_eq!(
            recv[q * len..(q + 1) * len],
            want[..],
            "struct alltoall from {q}"
        );
    }
    // Count per member, zero for some: member q contributes q % 3 particles.
    let counts: Vec<Count> = (0..n).map(|q| q % 3).collect();
    let displs: Vec<Count> = counts
        .iter()
        .scan(0, |a, &x| {
            let d = *a;
            *a += x;
            Some(d)
        })
        .collect();
    let total = counts.iter().sum::<Count>() as usize;
    let mine_v: Vec<Particle> = (0..(me % 3) as usize).map(|k| particle(me, k)).collect();
    let all_v: Vec<Particle> = (0..n)
        .flat_map(|q| (0..(q % 3) as usize).map(move |k| particle(q, k)))
        .collect();
    let mut g = vec![Particle::default(); total];
    c.all_gather_varcount_into(
        &mine_v[..],
        &mut PartitionMut::new(&mut g[..], &counts[..], &displs[..]),
    );
    assert_eq!(g, all_v, "struct allgatherv");
    // A user reduction on the struct: the largest id, kind xor'd, positions summed.
    let op = UserOperation::commutative(|x, y| {
        let x: &[Particle] = x.downcast().expect("particles");
        let y: &mut [Particle] = y.downcast().expect("particles");
        for (a, b) in x.iter().zip(y.iter_mut()) {
            b.kind ^= a.kind;
            b.pos = [a.pos[0] + b.pos[0], a.pos[1] + b.pos[1]];
            b.id = b.id.max(a.id);
        }
    });
    let mut r = vec![Particle::default(); len];
    c.all_reduce_into(&mine[..], &mut r[..], &op);
    for (k, p) in r.iter().enumerate() {
        let each: Vec<Particle> = (0..n).map(|q| particle(q, k)).collect();
        assert_eq!(
            p.kind,
            each.iter().fold(0, |a, q| a ^ q.kind),
            "struct reduction kind"
        );
        assert_eq!(
            p.pos[0],
            each.iter().map(|q| q.pos[0]).sum::<f64>(),
            "struct reduction pos"
        );
        assert_eq!(
            p.id,
            each.iter().map(|q| q.id).max().unwrap(),
            "struct reduction id"
        );
    }
    // A vector type (every third i32) as the send side of a gather and a scatter's receive.
    let stride3 = UserDatatype::vector(2, 1, 3, &i32::equivalent_datatype());
    let src: Vec<i32> = (0..4).map(|k| me * 10 + k).collect();
    // SAFETY: one element of the vector type spans 4 i32s.
    let v = unsafe { View::with_count_and_datatype(&src[..], 1, &stride3) };
    let want: Vec<i32> = (0..n).flat_map(|q| [q * 10, q * 10 + 3]).collect();
    if me == root {
        let mut g = vec![0i32; 2 * nu];
        rp.gather_into_root(&v, &mut g[..]);
        assert_eq!(g, want, "vector-type gather");
        let mut back = vec![-1i32; 4];
        {
            // SAFETY: as above.
            let mut mv = unsafe { MutView::with_count_and_datatype(&mut back[..], 1, &stride3) };
            rp.scatter_into_root(&want[..], &mut mv);
        }
        assert_eq!(back, [me * 10, -1, -1, me * 10 + 3], "vector-type scatter");
        let p = Partition::new(
            &want[..],
            vec![2; nu],
            (0..n).map(|q| 2 * q).collect::<Vec<Count>>(),
        );
        let mut s = vec![0i32; 2];
        rp.scatter_varcount_into_root(&p, &mut s[..]);
        assert_eq!(s, [me * 10, me * 10 + 3], "scatterv");
    } else {
        rp.gather_into(&v);
        let mut back = vec![-1i32; 4];
        {
            // SAFETY: as above.
            let mut mv = unsafe { MutView::with_count_and_datatype(&mut back[..], 1, &stride3) };
            rp.scatter_into(&mut mv);
        }
        assert_eq!(back, [me * 10, -1, -1, me * 10 + 3], "vector-type scatter");
        let mut s = vec![0i32; 2];
        rp.scatter_varcount_into(&mut s[..]);
        assert_eq!(s, [me * 10, me * 10 + 3], "scatterv");
    }
}

/// Reduce and reduce-scatter with an operation that does not commute, at every root.
fn non_commutative_at_every_root(c: &SimpleCommunicator) {
    let (me, n) = (c.rank(), c.size());
    let nu = n as usize;
    let len = 4;
    for root in 0..n {
        let mine = affine(me, len, 40 + root as u64);
        let rp = c.process_at_rank(root);
        if me == root {
            let mut r = vec![[0u64; 2]; len];
            rp.reduce_into_root(&mine[..], &mut r[..], compose());
            assert_eq!(
                r,
                fold_affine(0, n, len, 40 + root as u64),
                "non-commutative reduce root={root}"
            );
        } else {
            rp.reduce_into(&mine[..], compose());
        }
    }
    let block = affine(me, len * nu, 50);
    let mut mine = vec![[0u64; 2]; len];
    c.reduce_scatter_block_into(&block[..], &mut mine[..], compose());
    let whole = fold_affine(0, n, len * nu, 50);
    let m = me as usize;
    assert_eq!(
        mine[..],
        whole[m * len..(m + 1) * len],
        "non-commutative reduce_scatter_block"
    );
}

/// One of every immediate collective in flight at once on one communicator, completed in
/// an order unlike the start order.
fn every_immediate_form_at_once(c: &SimpleCommunicator) {
    let (me, n) = (c.rank(), c.size());
    let nu = n as usize;
    let len = 10;
    let root = n - 1;
    let rp = c.process_at_rank(root);
    let a = values(me, len, 70);
    let blocks = values(me, len * nu, 71);
    let mut bc = if me == root {
        values(root, len, 72)
    } else {
        vec![0; len]
    };
    let (mut ar, mut sc, mut ex, mut ag, mut aa, mut rs) = (
        vec![0u64; len],
        vec![0u64; len],
        vec![9u64; len],
        vec![0u64; len * nu],
        vec![0u64; len * nu],
        vec![0u64; len],
    );
    let mut red = vec![0u64; len];
    let mut gat = vec![0u64; len * nu];
    let mut sca = vec![0u64; len];
    let scatter_src: Vec<u64> = (0..n).flat_map(|q| values(q, len, 73)).collect();
    let counts: Vec<Count> = (0..n).map(|q| q % 2).collect();
    let displs: Vec<Count> = counts
        .iter()
        .scan(0, |a, &x| {
            let d = *a;
            *a += x;
            Some(d)
        })
        .collect();
    let mine_v = vec![me as u64; (me % 2) as usize];
    let mut agv = vec![0u64; counts.iter().sum::<Count>() as usize];
    let mut pv = PartitionMut::new(&mut agv[..], &counts[..], &displs[..]);
    weft::request::scope(|scope| {
        let mut rs_ = Vec::new();
        let r_bar = c.immediate_barrier();
        let r_bc = rp.immediate_broadcast_into(scope, &mut bc[..]);
        let r_ar = c.immediate_all_reduce_into(scope, &a[..], &mut ar[..], SystemOperation::sum());
        let r_sc = c.immediate_scan_into(scope, &a[..], &mut sc[..], SystemOperation::sum());
        let r_ex =
            c.immediate_exclusive_scan_into(scope, &a[..], &mut ex[..], SystemOperation::sum());
        let r_ag = c.immediate_all_gather_into(scope, &a[..], &mut ag[..]);
        let r_aa = c.immediate_all_to_all_into(scope, &blocks[..], &mut aa[..]);
        let r_rs = c.immediate_reduce_scatter_block_into(
            scope,
            &blocks[..],
            &mut rs[..],
            SystemOperation::sum(),
        );
        let r_agv = c.immediate_all_gather_varcount_into(scope, &mine_v[..], &mut pv);
        if me == root {
            rs_.push(rp.immediate_reduce_into_root(
                scope,
                &a[..],
                &mut red[..],
                SystemOperation::sum(),
            ));
            rs_.push(rp.immediate_gather_into_root(scope, &a[..], &mut gat[..]));
            rs_.push(rp.immediate_scatter_into_root(scope, &scatter_src[..], &mut sca[..]));
        } else {
            rp.immediate_reduce_into(scope, &a[..], SystemOperation::sum())
                .wait();
            rp.immediate_gather_into(scope, &a[..]).wait();
            rp.immediate_scatter_into(scope, &mut sca[..]).wait();
        }
        r_agv.wait();
        r_rs.wait();
        r_aa.wait();
        r_ag.wait();
        r_ex.wait();
        r_sc.wait();
        r_ar.wait();
        r_bc.wait();
        r_bar.wait();
        for r in rs_ {
            r.wait();
        }
    });
    let fold = |upto: i32, salt| {
        let mut w = vec![0u64; len];
        for q in 0..upto {
            for (x, y) in w.iter_mut().zip(values(q, len, salt)) {
                *x = x.wrapping_add(y);
            }
        }
        w
    };
    assert_eq!(bc, values(root, len, 72), "immediate broadcast");
    assert_eq!(ar, fold(n, 70), "immediate allreduce");
    assert_eq!(sc, fold(me + 1, 70), "immediate scan");
    if me > 0 {
        assert_eq!(ex, fold(me, 70), "immediate exscan");
    } else {
        assert_eq!(ex, vec![9u64; len], "immediate exscan at member 0");
    }
    let all: Vec<u64> = (0..n).flat_map(|q| values(q, len, 70)).collect();
    assert_eq!(ag, all, "immediate allgather");
    for q in 0..nu {
        let m = me as usize;
        assert_eq!(
            aa[q * len..(q + 1) * len],
            values(q as i32, len * nu, 71)[m * len..(m + 1) * len],
            "immediate alltoall"
        );
    }
    let mut want = vec![0u64; len];
    for q in 0..n {
        let m = me as usize;
        for (x, y) in want
            .iter_mut()
            .zip(&values(q, len * nu, 71)[m * len..(m + 1) * len])
        {
            *x = x.wrapping_add(*y);
        }
    }
    assert_eq!(rs, want, "immediate reduce_scatter_block");
    let want_v: Vec<u64> = (0..n).filter(|q| q % 2 == 1).map(|q| q as u64).collect();
    assert_eq!(agv, want_v, "immediate allgatherv");
    assert_eq!(sca, values(me, len, 73), "immediate scatter");
    if me == root {
        assert_eq!(red, fold(n, 70), "immediate reduce");
        assert_eq!(gat, all, "immediate gather");
    }
}
