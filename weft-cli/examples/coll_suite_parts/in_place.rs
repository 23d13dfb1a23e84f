//! Every in-place form (`MPI_IN_PLACE`) against a sequential reference: contiguous and
//! through a vector type, the count-per-member forms with zero counts, roots that are not 0,
//! and the immediate in-place forms.

use crate::coverage::{affine, compose, fold_affine, values};
use weft::collective::SystemOperation;
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
