//! `coll_suite inter`: intercommunicators between two groups of the world (its first third
//! and the rest, then its even and odd ranks): point-to-point between the groups, every
//! collective with data going from one group to the other (each root in turn, both ways,
//! several sizes, a non-commutative operation), nonblocking ones in flight together, merge
//! and duplicate, and the calls MPI does not define there (a scan) failing with an error.

use super::coverage::{affine, compose, fold_affine_of};
use super::{fold_sums, panic_message, values};
use weft::collective::{Part, PartMut, SystemOperation};
use weft::datatype::{Partition, PartitionMut};
use weft::topology::{Color, InterCommunicator, MergeOrder, SimpleCommunicator};
use weft::traits::*;
use weft::Count;

/// An intercommunicator between the world ranks `in_a` picks and the others: it, whether
/// this rank is in A, and both groups' world ranks (mine, then the other's).
struct Groups {
    inter: InterCommunicator,
    in_a: bool,
    mine: Vec<i32>,
    other: Vec<i32>,
}

fn groups(world: &SimpleCommunicator, in_a: impl Fn(i32) -> bool) -> Groups {
    let me = world.rank();
    let a: Vec<i32> = (0..world.size()).filter(|&r| in_a(r)).collect();
    let b: Vec<i32> = (0..world.size()).filter(|&r| !in_a(r)).collect();
    let mine_a = in_a(me);
    let local = world
        .split_by_color_with_key(Color::with_value(mine_a as i32), me)
        .expect("in a group");
    let (mine, other) = if mine_a { (a, b) } else { (b, a) };
    // The other group's leader, named by its world rank (the peer communicator is the world).
    let inter = local.create_intercommunicator(0, world, other[0], 17);
    assert!(inter.test_inter() && !local.test_inter());
    assert_eq!(
        (inter.size(), inter.remote_size()),
        (mine.len() as i32, other.len() as i32)
    );
    assert_eq!(inter.remote_group().size(), other.len() as i32);
    Groups {
        inter,
        in_a: mine_a,
        mine,
        other,
    }
}

pub fn run(world: &SimpleCommunicator) {
    let n = world.size();
    assert!(n >= 2, "coll_suite inter needs two ranks or more");
    let third = (n / 3).max(1);
    for g in [groups(world, |r| r < third), groups(world, |r| r % 2 == 0)] {
        point_to_point(&g);
        for len in [0, 1, 300, 9000] {
            rooted(&g, len);
            all(&g, len);
        }
        varcount(&g);
        immediate(&g);
        merge_and_dup(&g, world);
        split(&g);
        subgroups(&g);
        undefined(&g);
    }
}

/// Sends between the groups name the other group's ranks; receives from any source report
/// the sender's rank in its group.
fn point_to_point(g: &Groups) {
    let (c, me) = (&g.inter, g.inter.rank());
    for j in 0..c.remote_size() {
        c.process_at_rank(j)
            .send_with_tag(&(1000 * g.mine[me as usize] + j), 5);
    }
    for i in 0..c.remote_size() {
        let (v, st) = c.process_at_rank(i).receive_with_tag::<i32>(5);
        assert_eq!((v, st.source_rank()), (1000 * g.other[i as usize] + me, i));
    }
    // Everyone sends the other group's rank 0 one more; it takes them in any order.
    c.process_at_rank(0).send_with_tag(&g.mine[me as usize], 6);
    if me == 0 {
        for _ in 0..c.remote_size() {
            let (v, st) = c.any_process().receive_with_tag::<i32>(6);
            assert_eq!(v, g.other[st.source_rank() as usize], "any source");
        }
    }
    c.barrier();
}

/// The roots to try: rank 0 and the last rank of each group, as (in A, rank).
fn roots(g: &Groups) -> Vec<(bool, i32)> {
    let (a, b) = if g.in_a {
        (g.mine.len(), g.other.len())
    } else {
        (g.other.len(), g.mine.len())
    };
    let mut r = vec![
        (true, 0),
        (true, a as i32 - 1),
        (false, 0),
        (false, b as i32 - 1),
    ];
    r.dedup();
    r
}

/// Broadcast, reduce, gather and scatter from each root to the other group.
fn rooted(g: &Groups, len: usize) {
    let (c, me) = (&g.inter, g.inter.rank());
    let untouched = vec![7u64; len];
    for (root_in_a, root) in roots(g) {
        let label = format!(
            "len={len} root {root} in {}",
            if root_in_a { "A" } else { "B" }
        );
        let mine_w = g.mine[me as usize];
        if root_in_a == g.in_a {
            // The root's group.
            let root_w = g.mine[root as usize];
            let senders = &g.other;
            let gathered: Vec<u64> = senders.iter().flat_map(|&w| values(w, len, 3)).collect();
            let sum = fold_sums(senders.iter().map(|&w| values(w, len, 2)), len);
            let whole: Vec<u64> = senders.iter().flat_map(|&w| values(w, len, 4)).collect();
            if me == root {
                let mut b = values(root_w, len, 1);
                c.root().broadcast_into(&mut b[..]);
                let mut r = vec![0u64; len];
                c.root()
                    .reduce_into_root(&[0u64; 0][..], &mut r[..], SystemOperation::sum());
                assert_eq!(r, sum, "reduce {label}");
                let mut all = vec![0u64; len * senders.len()];
                c.root().gather_into_root(&[0u64; 0][..], &mut all[..]);
                assert_eq!(all, gathered, "gather {label}");
                c.root().scatter_into_root(&whole[..], &mut [0u64; 0][..]);
            } else {
                let mut b = untouched.clone();
                c.proc_null().broadcast_into(&mut b[..]);
                assert_eq!(
                    b, untouched,
                    "broadcast leaves the root's group alone {label}"
                );
                c.proc_null()
                    .reduce_into(&untouched[..], SystemOperation::sum());
                c.proc_null().gather_into(&untouched[..]);
                let mut s = untouched.clone();
                c.proc_null().scatter_into(&mut s[..]);
                assert_eq!(
                    s, untouched,
                    "scatter leaves the root's group alone {label}"
                );
            }
        } else {
            // The other group: root is the root's rank in its group.
            let root_w = g.other[root as usize];
            let p = c.process_at_rank(root);
            let mut b = vec![0u64; len];
            p.broadcast_into(&mut b[..]);
            assert_eq!(b, values(root_w, len, 1), "broadcast {label}");
            p.reduce_into(&values(mine_w, len, 2)[..], SystemOperation::sum());
            p.gather_into(&values(mine_w, len, 3)[..]);
            let mut s = vec![0u64; len];
            p.scatter_into(&mut s[..]);
            assert_eq!(s, values(mine_w, len, 4), "scatter {label}");
        }
    }
}

/// The collectives where every member gets the other group's data.
fn all(g: &Groups, len: usize) {
    let (c, me) = (&g.inter, g.inter.rank() as usize);
    let w = g.mine[me];
    let r = g.other.len();
    c.barrier();
    // Allreduce, sum and a non-commutative operation (affine maps in rank order).
    let mut sum = vec![0u64; len];
    c.all_reduce_into(&values(w, len, 5)[..], &mut sum[..], SystemOperation::sum());
    assert_eq!(
        sum,
        fold_sums(g.other.iter().map(|&q| values(q, len, 5)), len),
        "allreduce len={len}"
    );
    let mut got = vec![[0u64; 2]; len];
    c.all_reduce_into(&affine(w, len, 6)[..], &mut got[..], compose());
    let want = fold_affine_of(&g.other, len, 6);
    assert_eq!(got, want, "allreduce in rank order len={len}");
    // Allgather and all-to-all.
    let mut all = vec![0u64; len * r];
    c.all_gather_into(&values(w, len, 7)[..], &mut all[..]);
    let want: Vec<u64> = g.other.iter().flat_map(|&q| values(q, len, 7)).collect();
    assert_eq!(all, want, "allgather len={len}");
    let send: Vec<u64> = (0..r)
        .flat_map(|j| values(w, len, 100 + j as u64))
        .collect();
    let mut recv = vec![0u64; len * r];
    c.all_to_all_into(&send[..], &mut recv[..]);
    let want: Vec<u64> = g
        .other
        .iter()
        .flat_map(|&q| values(q, len, 100 + me as u64))
        .collect();
    assert_eq!(recv, want, "alltoall len={len}");
    // Reduce-scatter: my group's vectors, one block per member of the other group, reduced
    // over my group; I get my block of the other group's reduction.
    let vec_of = |q: i32, blocks: usize| values(q, len * blocks, 8);
    let mut mine = vec![0u64; len];
    c.reduce_scatter_block_into(&vec_of(w, r)[..], &mut mine[..], SystemOperation::sum());
    let whole = fold_sums(
        g.other.iter().map(|&q| vec_of(q, g.mine.len())),
        len * g.mine.len(),
    );
    assert_eq!(
        mine,
        whole[me * len..(me + 1) * len],
        "reduce_scatter_block len={len}"
    );
}

/// The forms with a count per member: member j of a group contributes j + 1 elements.
fn varcount(g: &Groups) {
    let (c, me) = (&g.inter, g.inter.rank() as usize);
    let w = g.mine[me];
    let r = g.other.len();
    let counts: Vec<Count> = (0..r as Count).map(|j| j + 1).collect();
    let displs: Vec<Count> = counts
        .iter()
        .scan(0, |o, &k| Some(std::mem::replace(o, *o + k)))
        .collect();
    let total = counts.iter().sum::<Count>() as usize;
    let mine = values(w, me + 1, 9);
    let want: Vec<u64> = g
        .other
        .iter()
        .enumerate()
        .flat_map(|(j, &q)| values(q, j + 1, 9))
        .collect();
    let mut all = vec![0u64; total];
    c.all_gather_varcount_into(
        &mine[..],
        &mut PartitionMut::new(&mut all[..], &counts[..], &displs[..]),
    );
    assert_eq!(all, want, "allgatherv");
    // All-to-all-v: to member j of the other group, j + 1 elements; from it, me + 1.
    let send: Vec<u64> = (0..r)
        .flat_map(|j| values(w, j + 1, 10 + j as u64))
        .collect();
    let rcounts: Vec<Count> = vec![me as Count + 1; r];
    let rdispls: Vec<Count> = (0..r as Count).map(|j| j * (me as Count + 1)).collect();
    let mut recv = vec![0u64; r * (me + 1)];
    c.all_to_all_varcount_into(
        &Partition::new(&send[..], &counts[..], &displs[..]),
        &mut PartitionMut::new(&mut recv[..], &rcounts[..], &rdispls[..]),
    );
    let want: Vec<u64> = g
        .other
        .iter()
        .flat_map(|&q| values(q, me + 1, 10 + me as u64))
        .collect();
    assert_eq!(recv, want, "alltoallv");
    // Reduce-scatter with counts: my group's vectors in parts for the other group's members.
    let vec_of = |q: i32, t: usize| values(q, t, 11);
    let mut got = vec![0u64; me + 1];
    let contribution = vec_of(w, total);
    let part = Partition::new(&contribution[..], &counts[..], &displs[..]);
    c.reduce_scatter_varcount_into(&part, &mut got[..], SystemOperation::sum());
    let their_total = g.mine.len() * (g.mine.len() + 1) / 2;
    let whole = fold_sums(g.other.iter().map(|&q| vec_of(q, their_total)), their_total);
    let off = me * (me + 1) / 2;
    assert_eq!(got, whole[off..off + me + 1], "reduce_scatter_varcount");
    // All-to-all-w: to member j of the other group, j + 1 elements, u32s from group A and
    // u64s from group B (each pair agrees on the type); from member i, me + 1 of them.
    let wide = |q: i32, k: usize, salt: u64| values(q, k, salt);
    let narrow = |q: i32, k: usize, salt: u64| -> Vec<u32> {
        values(q, k, salt).iter().map(|&v| v as u32).collect()
    };
    let (to32, to64): (Vec<Vec<u32>>, Vec<Vec<u64>>) = if g.in_a {
        (
            (0..r).map(|j| narrow(w, j + 1, 20 + j as u64)).collect(),
            vec![],
        )
    } else {
        (
            vec![],
            (0..r).map(|j| wide(w, j + 1, 20 + j as u64)).collect(),
        )
    };
    let sends: Vec<Part<'_>> = if g.in_a {
        to32.iter().map(|v| Part::new(&v[..])).collect()
    } else {
        to64.iter().map(|v| Part::new(&v[..])).collect()
    };
    let mut from64: Vec<Vec<u64>> = if g.in_a {
        vec![vec![0; me + 1]; r]
    } else {
        vec![]
    };
    let mut from32: Vec<Vec<u32>> = if g.in_a {
        vec![]
    } else {
        vec![vec![0; me + 1]; r]
    };
    let mut recvs: Vec<PartMut<'_>> = if g.in_a {
        from64
            .iter_mut()
            .map(|v| PartMut::new(&mut v[..]))
            .collect()
    } else {
        from32
            .iter_mut()
            .map(|v| PartMut::new(&mut v[..]))
            .collect()
    };
    c.all_to_all_w_into(&sends, &mut recvs);
    drop(recvs);
    for i in 0..r {
        let salt = 20 + me as u64;
        if g.in_a {
            assert_eq!(
                from64[i],
                wide(g.other[i], me + 1, salt),
                "alltoallw from member {i}"
            );
        } else {
            assert_eq!(
                from32[i],
                narrow(g.other[i], me + 1, salt),
                "alltoallw from member {i}"
            );
        }
    }
    // Gather-v and scatter-v with group A's rank 0 as root.
    let root_here = g.in_a && me == 0;
    if g.in_a {
        if root_here {
            let mut all = vec![0u64; total];
            c.root().gather_varcount_into_root(
                &[0u64; 0][..],
                &mut PartitionMut::new(&mut all[..], &counts[..], &displs[..]),
            );
            assert_eq!(all, want_gatherv(g), "gatherv");
            c.root().scatter_varcount_into_root(
                &Partition::new(&all[..], &counts[..], &displs[..]),
                &mut [0u64; 0][..],
            );
        } else {
            c.proc_null().gather_varcount_into(&mine[..]);
            c.proc_null().scatter_varcount_into(&mut [0u64; 0][..]);
        }
    } else {
        c.process_at_rank(0).gather_varcount_into(&mine[..]);
        let mut back = vec![0u64; me + 1];
        c.process_at_rank(0).scatter_varcount_into(&mut back[..]);
        assert_eq!(back, mine, "scatterv sends back what gatherv took");
    }
}

fn want_gatherv(g: &Groups) -> Vec<u64> {
    g.other
        .iter()
        .enumerate()
        .flat_map(|(j, &q)| values(q, j + 1, 9))
        .collect()
}

/// Nonblocking collectives on the intercommunicator and a duplicate, in flight together.
fn immediate(g: &Groups) {
    let (c, me) = (&g.inter, g.inter.rank() as usize);
    let dup = c.duplicate();
    let w = g.mine[me];
    let len = 100;
    let mut sum = vec![0u64; len];
    let mut gathered = vec![0u64; len * g.other.len()];
    let mut bc = if g.in_a && me == 0 {
        values(w, len, 12)
    } else {
        vec![0; len]
    };
    let (a, b) = (values(w, len, 13), values(w, len, 14));
    weft::request::scope(|scope| {
        let r1 = c.immediate_all_reduce_into(scope, &a[..], &mut sum[..], SystemOperation::sum());
        let r2 = dup.immediate_all_gather_into(scope, &b[..], &mut gathered[..]);
        let r3 = match (g.in_a, me) {
            (true, 0) => dup.root().immediate_broadcast_into(scope, &mut bc[..]),
            (true, _) => dup.proc_null().immediate_broadcast_into(scope, &mut bc[..]),
            (false, _) => dup
                .process_at_rank(0)
                .immediate_broadcast_into(scope, &mut bc[..]),
        };
        let r4 = c.immediate_barrier();
        r4.wait();
        r3.wait();
        r2.wait();
        r1.wait();
    });
    assert_eq!(
        sum,
        fold_sums(g.other.iter().map(|&q| values(q, len, 13)), len),
        "immediate allreduce"
    );
    let want: Vec<u64> = g.other.iter().flat_map(|&q| values(q, len, 14)).collect();
    assert_eq!(gathered, want, "immediate allgather");
    let a0 = if g.in_a { g.mine[0] } else { g.other[0] };
    let expect = if g.in_a && me != 0 {
        vec![0; len]
    } else {
        values(a0, len, 12)
    };
    assert_eq!(bc, expect, "immediate broadcast");
}

/// Merging puts group A first (it asks for the low ranks); the result is a working
/// intracommunicator, and so is a duplicate of the intercommunicator.
fn merge_and_dup(g: &Groups, world: &SimpleCommunicator) {
    let c = &g.inter;
    let order = if g.in_a {
        MergeOrder::Low
    } else {
        MergeOrder::High
    };
    let merged = c.merge(order);
    assert!(!merged.test_inter());
    assert_eq!(merged.size(), world.size());
    let (a_len, me) = (
        if g.in_a { g.mine.len() } else { g.other.len() },
        c.rank() as usize,
    );
    let want_rank = if g.in_a { me } else { a_len + me };
    assert_eq!(merged.rank() as usize, want_rank, "merged rank");
    let mut total = 0i64;
    merged.all_reduce_into(&(world.rank() as i64), &mut total, SystemOperation::sum());
    let n = world.size() as i64;
    assert_eq!(
        total,
        n * (n - 1) / 2,
        "allreduce on the merged communicator"
    );
    let dup = c.duplicate();
    assert!(dup.test_inter());
    let mut x = 0i64;
    dup.all_reduce_into(&1i64, &mut x, SystemOperation::sum());
    assert_eq!(x, g.other.len() as i64, "allreduce on the duplicate");
}

/// Splitting by the parity of the rank in each group pairs the even members of one group
/// with the other's even ones (and odd with odd); a group without odd members leaves the
/// other's odd ones without an intercommunicator.
fn split(g: &Groups) {
    let me = g.inter.rank() as usize;
    let same =
        |ranks: &[i32]| -> Vec<i32> { ranks.iter().copied().skip(me % 2).step_by(2).collect() };
    let (mine, other) = (same(&g.mine), same(&g.other));
    match g.inter.split_by_color(Color::with_value((me % 2) as i32)) {
        None => assert!(
            other.is_empty(),
            "no intercommunicator although the other group has {other:?}"
        ),
        Some(s) => {
            assert_eq!(
                (s.size() as usize, s.remote_size() as usize),
                (mine.len(), other.len())
            );
            assert_eq!(s.rank() as usize, me / 2);
            let mut total = 0i64;
            s.all_reduce_into(&(g.mine[me] as i64), &mut total, SystemOperation::sum());
            assert_eq!(
                total,
                other.iter().map(|&w| w as i64).sum::<i64>(),
                "allreduce after split"
            );
        }
    }
}

/// MPI_Comm_create on the intercommunicator: each group passes its members but its first,
/// reversed; the intercommunicator that comes of it joins those, in that order (none when
/// a group has one member only).
fn subgroups(g: &Groups) {
    let me = g.inter.rank();
    let local = g.inter.group();
    let ranks: Vec<i32> = (1..local.size()).rev().collect();
    let sub = local.include(&ranks);
    let others = g.other.len() - 1;
    match g.inter.split_by_subgroup_collective(&sub) {
        None => assert!(
            me == 0 || others == 0,
            "member {me} left out (the other subgroup has {others})"
        ),
        Some(s) => {
            assert_ne!(me, 0, "the first member is in no subgroup");
            assert_eq!(
                (s.size(), s.remote_size(), s.rank()),
                (ranks.len() as i32, others as i32, local.size() - 1 - me)
            );
            // The other subgroup's members, by their world ranks, in its order.
            let mut total = 0i64;
            s.all_reduce_into(
                &(g.mine[me as usize] as i64),
                &mut total,
                SystemOperation::sum(),
            );
            let want: i64 = g.other[1..].iter().map(|&w| w as i64).sum();
            assert_eq!(total, want, "allreduce over the subgroups");
            // Rank k of each subgroup trades world ranks with rank k of the other.
            let k = s.rank();
            if k < s.remote_size() {
                let peer = s.process_at_rank(k);
                peer.send_with_tag(&g.mine[me as usize], 5);
                let (theirs, _) = peer.receive_with_tag::<i32>(5);
                assert_eq!(
                    theirs,
                    g.other[g.other.len() - 1 - k as usize],
                    "subgroup order"
                );
            }
        }
    }
}

/// A scan and a Cartesian grid are not defined on an intercommunicator: an error naming the
/// call (the collective never starts, so the job goes on).
fn undefined(g: &Groups) {
    let c = &g.inter;
    let msg = panic_message("a scan on an intercommunicator fails", || {
        let mut out = 0u64;
        c.scan_into(&1u64, &mut out, SystemOperation::sum());
    });
    assert!(
        msg.contains("scan_into") && msg.contains("intracommunicators only"),
        "{msg}"
    );
    let msg = panic_message(
        "an in-place allreduce on an intercommunicator fails",
        || {
            let mut x = 1u64;
            c.all_reduce_in_place(&mut x, SystemOperation::sum());
        },
    );
    assert!(
        msg.contains("in-place") && msg.contains("intracommunicators only"),
        "{msg}"
    );
    // A receive buffer that is not one equal block per member of the other group (2r + 1
    // bytes for r ≥ 2 members): an error before anything is sent, at every member alike.
    if g.other.len() >= 2 {
        let msg = panic_message("an allgather into a buffer of the wrong size fails", || {
            let mut all = vec![0u8; g.other.len() * 2 + 1];
            c.all_gather_into(&[1u8, 2][..], &mut all[..]);
        });
        assert!(
            msg.contains("all_gather_into") && msg.contains("other group's"),
            "{msg}"
        );
    }
    let e = c
        .try_create_cartesian_communicator(&[1], &[false], false)
        .unwrap_err();
    assert_eq!(e.class, weft::ErrorClass::Comm, "{e}");
    c.barrier();
}
