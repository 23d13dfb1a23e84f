//! Every in-place form (`MPI_IN_PLACE`) against a sequential reference: contiguous and
//! through a vector type, the count-per-member forms with zero counts, roots that are not 0,
//! and the immediate in-place forms.

use crate::coverage::{affine, compose, fold_affine, values};
use weft::collective::{PartMut, SystemOperation};
use weft::datatype::{MutView, PartitionMut, UserDatatype};
use weft::topology::SimpleCommunicator;
use weft::traits::*;
use weft::Count;

/// Every in-place form (`MPI_IN_PLACE`), contiguous and with a vector type, roots not 0.
pub fn in_place(c: &SimpleCommunicator) {
    let (me, n) = (c.rank(), c.size());
    let nu = n as usize;
    for len in [0usize, 1, 7, 300] {
        let sum_of = |salt| {
            let mut want = vec![0u64; len];
            for q in 0..n {
                for (w, x) in want.iter_mut().zip(values(q, len, salt)) {
                    *w = w.wrapping_add(x);
                }
            }
            want
        };
        // Allreduce, scan, exclusive scan.
        let mut b = values(me, len, 20);
        c.all_reduce_in_place(&mut b[..], SystemOperation::sum());
        assert_eq!(b, sum_of(20), "allreduce in place len={len}");
        let mut p = affine(me, len, 21);
        c.all_reduce_in_place(&mut p[..], compose());
        assert_eq!(
            p,
            fold_affine(0, n, len, 21),
            "non-commutative allreduce in place len={len}"
        );
        let mut p = affine(me, len, 22);
        c.scan_in_place(&mut p[..], compose());
        assert_eq!(
            p,
            fold_affine(0, me + 1, len, 22),
            "scan in place len={len}"
        );
        let mut p = affine(me, len, 23);
        c.exclusive_scan_in_place(&mut p[..], compose());
        if me == 0 {
            assert_eq!(
                p,
                affine(0, len, 23),
                "exclusive scan in place leaves member 0's"
            );
        } else {
            assert_eq!(
                p,
                fold_affine(0, me, len, 23),
                "exclusive scan in place len={len}"
            );
        }
        // Allgather: this member's block already in place.
        let mut g = vec![u64::MAX; len * nu];
        g[me as usize * len..(me as usize + 1) * len].copy_from_slice(&values(me, len, 24));
        c.all_gather_in_place(&mut g[..]);
        let all: Vec<u64> = (0..n).flat_map(|q| values(q, len, 24)).collect();
        assert_eq!(g, all, "allgather in place len={len}");
        // All-to-all.
        let mut a = values(me, len * nu, 25);
        c.all_to_all_in_place(&mut a[..]);
        for q in 0..nu {
            let m = me as usize;
            assert_eq!(
                a[q * len..(q + 1) * len],
                values(q as i32, len * nu, 25)[m * len..(m + 1) * len],
                "alltoall in place len={len} from {q}"
            );
        }
        // Rooted, at roots that are not 0.
        for root in [n - 1, n / 2] {
            let rp = c.process_at_rank(root);
            let mine = values(me, len, 26);
            if me == root {
                let mut r = mine.clone();
                rp.reduce_into_root_in_place(&mut r[..], SystemOperation::sum());
                assert_eq!(r, sum_of(26), "reduce in place root={root} len={len}");
            } else {
                rp.reduce_into(&mine[..], SystemOperation::sum());
            }
            let mine = values(me, len, 27);
            let all: Vec<u64> = (0..n).flat_map(|q| values(q, len, 27)).collect();
            if me == root {
                let mut g = vec![u64::MAX; len * nu];
                g[root as usize * len..(root as usize + 1) * len].copy_from_slice(&mine);
                rp.gather_into_root_in_place(&mut g[..]);
                assert_eq!(g, all, "gather in place root={root} len={len}");
                let mut s = all.clone();
                rp.scatter_into_root_in_place(&mut s[..]);
                assert_eq!(s, all, "scatter in place leaves the root's buffer");
            } else {
                rp.gather_into(&mine[..]);
                let mut s = vec![0u64; len];
                rp.scatter_into(&mut s[..]);
                assert_eq!(s, mine, "scatter (root in place) root={root} len={len}");
            }
        }
    }
    in_place_varcount(c);
    // Reduce-scatter-block in place: the first block gets the result, the rest stays.
    let k = 3;
    let mut b = values(me, k * nu, 32);
    c.reduce_scatter_block_in_place(&mut b[..], SystemOperation::sum());
    let mut want = vec![0u64; k];
    for q in 0..n {
        let m = me as usize;
        for (w, x) in want
            .iter_mut()
            .zip(&values(q, k * nu, 32)[m * k..(m + 1) * k])
        {
            *w = w.wrapping_add(*x);
        }
    }
    assert_eq!(b[..k], want[..], "reduce_scatter_block in place");
    assert_eq!(
        b[k..],
        values(me, k * nu, 32)[k..],
        "reduce_scatter_block in place: the rest"
    );
    // A vector type in place: every other u64 of 2·(n + 1) elements, the gaps untouched.
    let k = nu + 1;
    let every_other = UserDatatype::vector(k as Count, 1, 2, &u64::equivalent_datatype());
    let mut b = vec![7u64; 2 * k];
    for (i, x) in values(me, k, 28).into_iter().enumerate() {
        b[2 * i] = x;
    }
    {
        // SAFETY: one element of the vector type spans 2k − 1 u64s, inside the 2k.
        let mut v = unsafe { MutView::with_count_and_datatype(&mut b[..], 1, &every_other) };
        c.all_reduce_in_place(&mut v, SystemOperation::max());
    }
    let each: Vec<Vec<u64>> = (0..n).map(|q| values(q, k, 28)).collect();
    for i in 0..k {
        assert_eq!(
            b[2 * i],
            each.iter().map(|v| v[i]).max().unwrap(),
            "vector allreduce in place"
        );
        assert_eq!(b[2 * i + 1], 7, "vector allreduce in place wrote a gap");
    }
    // Immediate in-place forms.
    let len = 50;
    let mut s = values(me, len, 29);
    let mut g = vec![0u64; len * nu];
    g[me as usize * len..(me as usize + 1) * len].copy_from_slice(&values(me, len, 30));
    let mut a = values(me, len * nu, 31);
    weft::request::scope(|scope| {
        let r1 = c.immediate_all_reduce_in_place(scope, &mut s[..], SystemOperation::sum());
        let r2 = c.immediate_all_gather_in_place(scope, &mut g[..]);
        let r3 = c.immediate_all_to_all_in_place(scope, &mut a[..]);
        r3.wait();
        r1.wait();
        r2.wait();
    });
    let mut want = vec![0u64; len];
    for q in 0..n {
        for (w, x) in want.iter_mut().zip(values(q, len, 29)) {
            *w = w.wrapping_add(x);
        }
    }
    assert_eq!(s, want, "immediate allreduce in place");
    let all: Vec<u64> = (0..n).flat_map(|q| values(q, len, 30)).collect();
    assert_eq!(g, all, "immediate allgather in place");
    for q in 0..nu {
        let m = me as usize;
        assert_eq!(
            a[q * len..(q + 1) * len],
            values(q as i32, len * nu, 31)[m * len..(m + 1) * len],
            "immediate alltoall in place"
        );
    }
    immediate_in_place(c);
}

/// The other immediate in-place forms, all in flight at once (the root's rooted ones
/// beside the other members' ordinary immediate forms), completed out of order.
fn immediate_in_place(c: &SimpleCommunicator) {
    let (me, n) = (c.rank(), c.size());
    let (m, nu) = (me as usize, n as usize);
    let len = 6;
    let sum = |salt, range: std::ops::Range<usize>| {
        let mut w = vec![0u64; range.len()];
        for q in 0..n {
            for (x, y) in w.iter_mut().zip(&values(q, nu * len, salt)[range.clone()]) {
                *x = x.wrapping_add(*y);
            }
        }
        w
    };
    let mut scan = affine(me, len, 80);
    let mut exscan = affine(me, len, 81);
    let mut rsb = values(me, nu * len, 82);
    // Parts of member q: q % 2 + 1 elements, back to back.
    let counts: Vec<Count> = (0..n).map(|q| q % 2 + 1).collect();
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
    let mut rsv = values(me, total, 83);
    let mut agv = vec![u64::MAX; total];
    agv[d..d + k].copy_from_slice(&values(me, k, 84));
    let mut w_in: Vec<Vec<u64>> = (0..n).map(|j| vec![(me * 100 + j) as u64; 2]).collect();
    let root = n / 2;
    let rp = c.process_at_rank(root);
    let mut red = values(me, len, 85);
    let mut gat = vec![u64::MAX; nu * len];
    gat[m * len..(m + 1) * len].copy_from_slice(&values(me, len, 86));
    let mut sca = if me == root {
        (0..n).flat_map(|q| values(q, len, 87)).collect()
    } else {
        vec![0u64; len]
    };
    {
        let mut w_parts: Vec<PartMut<'_>> =
            w_in.iter_mut().map(|b| PartMut::new(&mut b[..])).collect();
        let mut rsv_p = PartitionMut::new(&mut rsv[..], &counts[..], &displs[..]);
        let mut agv_p = PartitionMut::new(&mut agv[..], &counts[..], &displs[..]);
        weft::request::scope(|scope| {
            let mut rs = Vec::new();
            let r1 = c.immediate_scan_in_place(scope, &mut scan[..], compose());
            let r2 = c.immediate_exclusive_scan_in_place(scope, &mut exscan[..], compose());
            let r3 = c.immediate_reduce_scatter_block_in_place(
                scope,
                &mut rsb[..],
                SystemOperation::sum(),
            );
            let r4 = c.immediate_reduce_scatter_varcount_in_place(
                scope,
                &mut rsv_p,
                SystemOperation::sum(),
            );
            let r5 = c.immediate_all_gather_varcount_in_place(scope, &mut agv_p);
            let r6 = c.immediate_all_to_all_w_in_place(scope, &mut w_parts);
            if me == root {
                rs.push(rp.immediate_reduce_into_root_in_place(
                    scope,
                    &mut red[..],
                    SystemOperation::sum(),
                ));
                rs.push(rp.immediate_gather_into_root_in_place(scope, &mut gat[..]));
                rs.push(rp.immediate_scatter_into_root_in_place(scope, &mut sca[..]));
            } else {
                // The others' ordinary forms, each completed before the next starts.
                rp.immediate_reduce_into(scope, &red[..], SystemOperation::sum())
                    .wait();
                rp.immediate_gather_into(scope, &gat[m * len..(m + 1) * len])
                    .wait();
                rp.immediate_scatter_into(scope, &mut sca[..]).wait();
            }
            for r in rs {
                r.wait();
            }
            r6.wait();
            r4.wait();
            r5.wait();
            r3.wait();
            r1.wait();
            r2.wait();
        });
    }
    assert_eq!(
        scan,
        fold_affine(0, me + 1, len, 80),
        "immediate scan in place"
    );
    if me > 0 {
        assert_eq!(
            exscan,
            fold_affine(0, me, len, 81),
            "immediate exscan in place"
        );
    } else {
        assert_eq!(
            exscan,
            affine(0, len, 81),
            "immediate exscan in place at member 0"
        );
    }
    assert_eq!(
        rsb[..len],
        sum(82, m * len..(m + 1) * len)[..],
        "immediate reduce_scatter_block in place"
    );
    let mut want = vec![0u64; k];
    for q in 0..n {
        for (x, y) in want.iter_mut().zip(&values(q, total, 83)[d..d + k]) {
            *x = x.wrapping_add(*y);
        }
    }
    assert_eq!(
        rsv[..k],
        want[..],
        "immediate reduce_scatter (counts) in place"
    );
    let all_v: Vec<u64> = (0..n)
        .flat_map(|q| values(q, counts[q as usize] as usize, 84))
        .collect();
    assert_eq!(agv, all_v, "immediate allgatherv in place");
    for (j, b) in w_in.iter().enumerate() {
        assert_eq!(
            *b,
            vec![(j as i32 * 100 + me) as u64; 2],
            "immediate alltoallw in place from {j}"
        );
    }
    if me == root {
        let mut want = vec![0u64; len];
        for q in 0..n {
            for (x, y) in want.iter_mut().zip(values(q, len, 85)) {
                *x = x.wrapping_add(y);
            }
        }
        assert_eq!(red, want, "immediate reduce in place at the root");
        let all: Vec<u64> = (0..n).flat_map(|q| values(q, len, 86)).collect();
        assert_eq!(gat, all, "immediate gather in place at the root");
        let all: Vec<u64> = (0..n).flat_map(|q| values(q, len, 87)).collect();
        assert_eq!(
            sca, all,
            "immediate scatter in place leaves the root's buffer"
        );
    } else {
        assert_eq!(
            sca,
            values(me, len, 87),
            "immediate scatter (root in place)"
        );
    }
}

/// The count-per-member forms in place, member q's part holding q % 3 elements (none for
/// some) with a gap after each part that must stay untouched.
fn in_place_varcount(c: &SimpleCommunicator) {
    let (me, n) = (c.rank(), c.size());
    let m = me as usize;
    let counts: Vec<Count> = (0..n).map(|q| q % 3).collect();
    let displs: Vec<Count> = counts
        .iter()
        .scan(0, |a, &x| {
            let d = *a;
            *a += x + 1;
            Some(d)
        })
        .collect();
    let total = (displs[n as usize - 1] + counts[n as usize - 1] + 1) as usize;
    let fill = |b: &mut [u64], q: i32, salt: u64| {
        let d = displs[q as usize] as usize;
        b[d..d + counts[q as usize] as usize].copy_from_slice(&values(
            q,
            counts[q as usize] as usize,
            salt,
        ));
    };
    let mut whole = vec![u64::MAX; total];
    for q in 0..n {
        fill(&mut whole[..], q, 33);
    }
    // Allgatherv.
    let mut b = vec![u64::MAX; total];
    fill(&mut b[..], me, 33);
    c.all_gather_varcount_in_place(&mut PartitionMut::new(&mut b[..], &counts[..], &displs[..]));
    assert_eq!(b, whole, "allgatherv in place");
    // Gatherv and scatterv at a root that is not 0.
    let root = n - 1;
    let rp = c.process_at_rank(root);
    let mine = values(me, counts[m] as usize, 33);
    if me == root {
        let mut g = vec![u64::MAX; total];
        fill(&mut g[..], me, 33);
        rp.gather_varcount_into_root_in_place(&mut PartitionMut::new(
            &mut g[..],
            &counts[..],
            &displs[..],
        ));
        assert_eq!(g, whole, "gatherv in place");
        let mut s = whole.clone();
        rp.scatter_varcount_into_root_in_place(&mut PartitionMut::new(
            &mut s[..],
            &counts[..],
            &displs[..],
        ));
        assert_eq!(s, whole, "scatterv in place leaves the root's buffer");
    } else {
        rp.gather_varcount_into(&mine[..]);
        let mut s = vec![0u64; counts[m] as usize];
        rp.scatter_varcount_into(&mut s[..]);
        assert_eq!(s, mine, "scatterv (root in place)");
    }
    // Alltoallv in place: (i + j) % 3 elements between members i and j, both ways.
    let cnt = |i: i32, j: i32| (i + j) % 3;
    let pc: Vec<Count> = (0..n).map(|j| cnt(me, j)).collect();
    let pd: Vec<Count> = pc
        .iter()
        .scan(0, |a, &x| {
            let d = *a;
            *a += x + 1;
            Some(d)
        })
        .collect();
    let len = (pd[n as usize - 1] + pc[n as usize - 1] + 1) as usize;
    let mut a = vec![u64::MAX; len];
    for j in 0..n {
        let d = pd[j as usize] as usize;
        for k in 0..cnt(me, j) as usize {
            a[d + k] = (me * 100 + j) as u64 * 1000 + k as u64;
        }
    }
    c.all_to_all_varcount_in_place(&mut PartitionMut::new(&mut a[..], &pc[..], &pd[..]));
    for j in 0..n {
        let d = pd[j as usize] as usize;
        for k in 0..cnt(me, j) as usize {
            assert_eq!(
                a[d + k],
                (j * 100 + me) as u64 * 1000 + k as u64,
                "alltoallv in place from {j}"
            );
        }
        assert_eq!(
            a[d + cnt(me, j) as usize],
            u64::MAX,
            "alltoallv in place wrote a gap"
        );
    }
}
