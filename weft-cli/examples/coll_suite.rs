//! Multi-process collective checks, run by `weft-cli/tests/coll.rs` through `weft run`.
//! `coll_suite CASE`: every member computes every other member's contribution itself, so
//! each result is checked against a sequential reference; a mismatch panics (failing the job).
//!
//! Cases: `large` (MiB vectors), `subset` (every collective once at two sizes, for 16 members), `all` (every collective on the world and on communicators from odd splits, several
//! roots and sizes, predefined and user operations, non-contiguous datatypes), `immediate`
//! (many nonblocking collectives in flight at once on different communicators, overlapped
//! with point-to-point traffic), `mismatch` (members disagree on a size: the job must end
//! with an error naming the call), `wmismatch` (the same for an all-to-all-w part), `wrongop`,
//! `wrongroot` and `wrongtype` (under `WEFT_COLL_CHECK=1`, members that disagree on the
//! operation, the root, or the type of the same bytes), `die` (a member exits while the
//! others wait in a collective: the job must end promptly), `topology` (Cartesian, graph and
//! distributed-graph communicators and the neighbourhood collectives on them, in
//! `coll_suite/topology.rs`), `notopology` (a neighbourhood collective on a communicator
//! without a topology, `asymmetric` one on a graph that is not symmetric: the job must end
//! with an error naming the call), `inter` (intercommunicators between two groups of the
//! world and every collective on them, in `coll_suite/inter.rs`), `persistent` (every
//! persistent collective, in `coll_suite/persistent.rs`).

#[path = "coll_suite/topology.rs"]
mod topology;

#[path = "coll_suite/alltoallw.rs"]
mod alltoallw;
#[path = "coll_suite/coverage.rs"]
mod coverage;
#[path = "coll_suite/in_place.rs"]
mod in_place;
#[path = "coll_suite/inter.rs"]
mod inter;
#[path = "coll_suite/persistent.rs"]
mod persistent;
#[path = "coll_suite/reused.rs"]
mod reused;

use weft::collective::SystemOperation;
use weft::datatype::{Partition, PartitionMut, UserDatatype};
use weft::topology::{Color, SimpleCommunicator};
use weft::traits::*;
use weft::Count;

/// Member `r`'s `len` values for test `salt`.
fn values(r: i32, len: usize, salt: u64) -> Vec<u64> {
    (0..len as u64)
        .map(|i| {
            (i.wrapping_mul(0x9E37_79B9) ^ (r as u64).wrapping_mul(0x85EB_CA6B) ^ salt) % 1_000_003
        })
        .collect()
}

/// Elements a member (u64): none, a few, a slot line's worth and more, 6,000 (48 KB: within a
/// 64 KiB slot, so an allreduce on 3 members or more goes by slices in the node area), and
/// 9,000 (beyond the slot: by messages).
const SIZES: &[usize] = &[0, 1, 7, 300, 6000, 9000];

/// The message of the panic `f` must raise (an error the API reports by panicking), with the
/// panic hook silenced meanwhile: the test checks the message rather than printing it.
fn panic_message(what: &str, f: impl FnOnce()) -> String {
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    std::panic::set_hook(hook);
    let payload = caught.expect_err(what);
    payload
        .downcast_ref::<String>()
        .cloned()
        .unwrap_or_default()
}

/// Element-wise wrapping sums of `vs`.
fn fold_sums(vs: impl Iterator<Item = Vec<u64>>, len: usize) -> Vec<u64> {
    vs.fold(vec![0u64; len], |mut acc, v| {
        for (a, x) in acc.iter_mut().zip(v) {
            *a = a.wrapping_add(x);
        }
        acc
    })
}

fn main() {
    let case = std::env::args().nth(1).expect("usage: coll_suite CASE");
    let universe = weft::initialize().expect("initialize");
    let world = universe.world();
    match case.as_str() {
        "all" => {
            every_collective(&world);
            // Odd splits: members in reverse order, and a communicator that skips members.
            let rev = world
                .split_by_color_with_key(Color::with_value(0), -world.rank())
                .expect("in the split");
            every_collective(&rev);
            let odd = world.split_by_color(if world.rank() % 3 == 1 {
                Color::undefined()
            } else {
                Color::with_value(world.rank() % 2)
            });
            if let Some(c) = odd {
                every_collective(&c);
            }
        }
        "immediate" => immediate(&world),
        "large" => coverage::large(&world),
        "reused" => reused::run(&world),
        // A representative subset for large member counts: every collective once, small and
        // one larger size, on the world and on a split with an odd placement.
        "subset" => {
            every_collective_at(&world, &[1, 20_000]);
            let odd = world.split_by_color(if world.rank() % 3 == 1 {
                Color::undefined()
            } else {
                Color::with_value(world.rank() % 2)
            });
            if let Some(c) = odd {
                every_collective_at(&c, &[3]);
            }
            immediate_rounds(&world, 3);
        }
        "topology" => topology::run(&world),
        "inter" => inter::run(&world),
        "persistent" => persistent::run(&world),
        "asymmetric" => topology::asymmetric(&world),
        "notopology" => {
            let mut out = [0u64; 4];
            world.neighbor_all_gather_into(&1u64, &mut out[..]);
        }
        "mismatch" | "mismatch_later" => {
            if case == "mismatch_later" {
                // A first allreduce that agrees: the area exists when the second one starts,
                // which then takes the area's lean path.
                let mut x = 0u64;
                world.all_reduce_into(&1u64, &mut x, SystemOperation::sum());
                assert_eq!(x, u64::from(world.size() as u32));
            }
            let mut out = vec![0u64; world.size() as usize * 2];
            let mine = vec![1u64; if world.rank() == 1 { 3 } else { 2 }];
            let mut r = vec![0u64; mine.len()];
            // Member 1 sends 3 values where the others send 2.
            world.all_reduce_into(&mine[..], &mut r[..], SystemOperation::sum());
            world.all_gather_into(&mine[..], &mut out[..]);
        }
        "bcast_mismatch" => {
            // The barrier makes the area; member 1 then expects 3 values where the root
            // broadcasts 2 (the area's lean path sees it).
            world.barrier();
            let mut data = vec![7u64; if world.rank() == 1 { 3 } else { 2 }];
            world.process_at_rank(0).broadcast_into(&mut data[..]);
            world.barrier();
        }
        "wmismatch" => alltoallw::mismatch(&world),
        "wrongop" => {
            // Run with WEFT_COLL_CHECK=1: the last member reduces with another operation.
            let op = if world.rank() == world.size() - 1 {
                SystemOperation::max()
            } else {
                SystemOperation::sum()
            };
            let mut x = 0u64;
            world.all_reduce_into(&1u64, &mut x, op);
        }
        "wrongroot" => {
            // Run with WEFT_COLL_CHECK=1: the last member names another root.
            let root = if world.rank() == world.size() - 1 {
                1
            } else {
                0
            };
            let mut x = [0u64; 4];
            world.process_at_rank(root).broadcast_into(&mut x[..]);
        }
        "wrongtype" => {
            // Run with WEFT_COLL_CHECK=1: the last member broadcasts as many bytes, as f64.
            if world.rank() == world.size() - 1 {
                let mut x = [0f64; 4];
                world.process_at_rank(0).broadcast_into(&mut x[..]);
            } else {
                let mut x = [0u64; 4];
                world.process_at_rank(0).broadcast_into(&mut x[..]);
            }
        }
        "die" => {
            world.barrier();
            if world.rank() == world.size() - 1 {
                std::process::exit(3);
            }
            let mut x = 0u64;
            world.all_reduce_into(&1u64, &mut x, SystemOperation::sum());
        }
        other => panic!("unknown case {other}"),
    }
    // A last barrier on the world: everyone got here.
    world.barrier();
    if world.rank() == 0 {
        println!("coll_suite {case}: ok on {} ranks", world.size());
    }
}

fn every_collective(c: &SimpleCommunicator) {
    every_collective_at(c, SIZES)
}

/// Every collective at each of `sizes` (elements a member), then the count-per-member
/// forms, the datatypes and all-to-all-w.
fn every_collective_at(c: &SimpleCommunicator, sizes: &[usize]) {
    let (me, n) = (c.rank(), c.size());
    let nu = n as usize;
    c.barrier();
    for &len in sizes {
        for root in [0, n / 2, n - 1] {
            // Broadcast.
            let want = values(root, len, 1);
            let mut b = if me == root {
                want.clone()
            } else {
                vec![0; len]
            };
            c.process_at_rank(root).broadcast_into(&mut b[..]);
            assert_eq!(b, want, "broadcast len={len} root={root}");

            // Reduce (sum, wrapping) to the root.
            let mine = values(me, len, 2);
            let sum = fold_sums((0..n).map(|r| values(r, len, 2)), len);
            if me == root {
                let mut r = vec![0u64; len];
                c.process_at_rank(root).reduce_into_root(
                    &mine[..],
                    &mut r[..],
                    SystemOperation::sum(),
                );
                assert_eq!(r, sum, "reduce len={len} root={root}");
            } else {
                c.process_at_rank(root)
                    .reduce_into(&mine[..], SystemOperation::sum());
            }

            // Gather and scatter.
            let all: Vec<u64> = (0..n).flat_map(|r| values(r, len, 3)).collect();
            let mine = values(me, len, 3);
            if me == root {
                let mut g = vec![0u64; len * nu];
                c.process_at_rank(root)
                    .gather_into_root(&mine[..], &mut g[..]);
                assert_eq!(g, all, "gather len={len} root={root}");
                let mut s = vec![0u64; len];
                c.process_at_rank(root)
                    .scatter_into_root(&all[..], &mut s[..]);
                assert_eq!(s, mine, "scatter len={len} root={root}");
            } else {
                c.process_at_rank(root).gather_into(&mine[..]);
                let mut s = vec![0u64; len];
                c.process_at_rank(root).scatter_into(&mut s[..]);
                assert_eq!(s, mine, "scatter len={len} root={root}");
            }
        }
        // Allreduce: sum, max, and a non-commutative user operation.
        let mine = values(me, len, 4);
        let mut r = vec![0u64; len];
        c.all_reduce_into(&mine[..], &mut r[..], SystemOperation::max());
        let each: Vec<Vec<u64>> = (0..n).map(|q| values(q, len, 4)).collect();
        let want: Vec<u64> = (0..len)
            .map(|i| each.iter().map(|v| v[i]).max().unwrap())
            .collect();
        assert_eq!(r, want, "allreduce max len={len}");
        // Affine maps x -> a*x + b as (a, b) pairs: composition in rank order.
        let (pairs, compose) = (coverage::affine(me, len, 4), coverage::compose());
        let mut got = vec![[0u64; 2]; len];
        c.all_reduce_into(&pairs[..], &mut got[..], &compose);
        let mut scan = vec![[0u64; 2]; len];
        c.scan_into(&pairs[..], &mut scan[..], &compose);
        let fold = |upto: i32| coverage::fold_affine(0, upto, len, 4);
        assert_eq!(
            got,
            fold(n),
            "allreduce of a non-commutative user operation len={len}"
        );
        assert_eq!(scan, fold(me + 1), "scan len={len}");
        let mut ex = vec![[7u64; 2]; len];
        c.exclusive_scan_into(&pairs[..], &mut ex[..], &compose);
        if me == 0 {
            assert!(
                ex.iter().all(|p| *p == [7, 7]),
                "exscan at rank 0 must not write"
            );
        } else {
            assert_eq!(ex, fold(me), "exclusive scan len={len}");
        }

        // Allgather, all-to-all, reduce-scatter.
        let mine = values(me, len, 5);
        let mut g = vec![0u64; len * nu];
        c.all_gather_into(&mine[..], &mut g[..]);
        let all: Vec<u64> = (0..n).flat_map(|r| values(r, len, 5)).collect();
        assert_eq!(g, all, "allgather len={len}");
        let send = values(me, nu * len, 6);
        let mut recv = vec![0u64; nu * len];
        c.all_to_all_into(&send[..], &mut recv[..]);
        for src in 0..nu {
            let theirs = values(src as i32, nu * len, 6);
            assert_eq!(
                recv[src * len..(src + 1) * len],
                theirs[me as usize * len..(me as usize + 1) * len],
                "alltoall len={len} from {src}"
            );
        }
        let block = values(me, nu * len, 7);
        let mut mine_rs = vec![0u64; len];
        c.reduce_scatter_block_into(&block[..], &mut mine_rs[..], SystemOperation::sum());
        let mine_block = me as usize * len..(me as usize + 1) * len;
        let want = fold_sums(
            (0..n).map(|q| values(q, nu * len, 7)[mine_block.clone()].to_vec()),
            len,
        );
        assert_eq!(mine_rs, want, "reduce_scatter_block len={len}");
    }
    varcounts(c);
    datatypes(c);
    alltoallw::all_to_all_w(c);
    coverage::coverage(c);
}

/// The collectives with a count per member: member r contributes r % 4 values.
fn varcounts(c: &SimpleCommunicator) {
    let (me, n) = (c.rank(), c.size());
    let counts: Vec<Count> = (0..n).map(|r| r % 4).collect();
    let displs: Vec<Count> = counts
        .iter()
        .scan(0, |acc, &x| {
            let d = *acc;
            *acc += x + 1; // a gap after each part, which must stay untouched
            Some(d)
        })
        .collect();
    let total = (displs[n as usize - 1] + counts[n as usize - 1] + 1) as usize;
    let mine = values(me, (me % 4) as usize, 8);
    let mut buf = vec![u64::MAX; total];
    {
        let mut p = PartitionMut::new(&mut buf[..], &counts[..], &displs[..]);
        c.all_gather_varcount_into(&mine[..], &mut p);
    }
    for r in 0..n as usize {
        let d = displs[r] as usize;
        assert_eq!(
            buf[d..d + counts[r] as usize],
            values(r as i32, counts[r] as usize, 8)[..]
        );
        assert_eq!(
            buf[d + counts[r] as usize],
            u64::MAX,
            "allgatherv wrote into a gap"
        );
    }
    let root = n - 1;
    if me == root {
        let mut g = vec![u64::MAX; total];
        {
            let mut p = PartitionMut::new(&mut g[..], &counts[..], &displs[..]);
            c.process_at_rank(root)
                .gather_varcount_into_root(&mine[..], &mut p);
        }
        assert_eq!(g, buf, "gatherv");
        let mut s = vec![0u64; counts[me as usize] as usize];
        let p = Partition::new(&g[..], &counts[..], &displs[..]);
        c.process_at_rank(root)
            .scatter_varcount_into_root(&p, &mut s[..]);
        assert_eq!(s, mine, "scatterv at the root");
    } else {
        c.process_at_rank(root).gather_varcount_into(&mine[..]);
        let mut s = vec![0u64; counts[me as usize] as usize];
        c.process_at_rank(root).scatter_varcount_into(&mut s[..]);
        assert_eq!(s, mine, "scatterv");
    }
    // All-to-all with a count per pair: member i sends (i + j) % 3 values to member j.
    let cnt = |i: i32, j: i32| (i + j) % 3;
    let sc: Vec<Count> = (0..n).map(|j| cnt(me, j)).collect();
    let sd: Vec<Count> = sc
        .iter()
        .scan(0, |a, &x| {
            let d = *a;
            *a += x;
            Some(d)
        })
        .collect();
    let rc: Vec<Count> = (0..n).map(|i| cnt(i, me)).collect();
    let rd: Vec<Count> = rc
        .iter()
        .scan(0, |a, &x| {
            let d = *a;
            *a += x;
            Some(d)
        })
        .collect();
    let send = values(me, sc.iter().sum::<i32>() as usize, 9);
    let mut recv = vec![0u64; rc.iter().sum::<i32>() as usize];
    {
        let s = Partition::new(&send[..], &sc[..], &sd[..]);
        let mut r = PartitionMut::new(&mut recv[..], &rc[..], &rd[..]);
        c.all_to_all_varcount_into(&s, &mut r);
    }
    for i in 0..n {
        let theirs = values(i, (0..n).map(|j| cnt(i, j)).sum::<i32>() as usize, 9);
        let off: i32 = (0..me).map(|j| cnt(i, j)).sum();
        let got = &recv[rd[i as usize] as usize..(rd[i as usize] + rc[i as usize]) as usize];
        assert_eq!(
            got,
            &theirs[off as usize..(off + cnt(i, me)) as usize],
            "alltoallv from {i}"
        );
    }
}

/// Non-contiguous layouts, bools and (value, index) pairs.
fn datatypes(c: &SimpleCommunicator) {
    let (me, n) = (c.rank(), c.size());
    // Every other element of a 10-element buffer.
    let every_other = UserDatatype::vector(5, 1, 2, &u64::equivalent_datatype());
    let root = n - 1;
    let src: Vec<u64> = (0..10).map(|i| i * 100 + 7).collect();
    let mut b: Vec<u64> = if me == root { src.clone() } else { vec![1; 10] };
    {
        // SAFETY: one element of the vector type spans 9 u64s, inside the 10.
        let mut v = unsafe {
            weft::datatype::MutView::with_count_and_datatype(&mut b[..], 1, &every_other)
        };
        c.process_at_rank(root).broadcast_into(&mut v);
    }
    for (i, x) in b.iter().enumerate() {
        let want = if i % 2 == 0 || me == root { src[i] } else { 1 };
        assert_eq!(*x, want, "broadcast of a vector type, element {i}");
    }
    // Logical and over bools.
    let mut all = false;
    c.all_reduce_into(&(me >= 0), &mut all, SystemOperation::logical_and());
    assert!(all);
    let mut any = true;
    c.all_reduce_into(&(me == n), &mut any, SystemOperation::logical_or());
    assert!(!any);
    // Minloc and maxloc over (value, index) pairs; ties go to the smaller index.
    let mine = ((me % 2) as f64, me);
    let mut lo = (0.0f64, 0i32);
    c.all_reduce_into(&mine, &mut lo, SystemOperation::min_loc());
    assert_eq!(lo, (0.0, 0), "minloc");
    let mut hi = (0.0f64, 0i32);
    c.all_reduce_into(&mine, &mut hi, SystemOperation::max_loc());
    assert_eq!(
        hi,
        (if n > 1 { 1.0 } else { 0.0 }, if n > 1 { 1 } else { 0 }),
        "maxloc"
    );
    // Floats: every member gets the same bits.
    let x: Vec<f64> = (0..100)
        .map(|i| 1.0 / (i as f64 + me as f64 + 1.0))
        .collect();
    let mut s = vec![0f64; 100];
    c.all_reduce_into(&x[..], &mut s[..], SystemOperation::sum());
    let mut gathered = vec![0f64; 100 * n as usize];
    c.all_gather_into(&s[..], &mut gathered[..]);
    for r in 0..n as usize {
        assert!(
            gathered[r * 100..(r + 1) * 100]
                .iter()
                .zip(&s)
                .all(|(a, b)| a.to_bits() == b.to_bits()),
            "allreduce results differ between members"
        );
    }
}

/// Many nonblocking collectives at once on three communicators, with point-to-point traffic
/// in between.
fn immediate(world: &SimpleCommunicator) {
    immediate_rounds(world, 20)
}

fn immediate_rounds(world: &SimpleCommunicator, rounds: u64) {
    let (me, n) = (world.rank(), world.size());
    let dup = world.duplicate();
    let rev = world
        .split_by_color_with_key(Color::with_value(0), -me)
        .expect("in the split");
    for round in 0..rounds {
        let len = [1usize, 100, 5000][round as usize % 3];
        let a = values(me, len, round);
        let mut sum = vec![0u64; len];
        let mut gathered = vec![0u64; len * n as usize];
        let mut bc = if rev.rank() == 0 {
            values(99, len, round)
        } else {
            vec![0; len]
        };
        let mut msg = 0u64;
        weft::request::scope(|scope| {
            let r1 =
                dup.immediate_all_reduce_into(scope, &a[..], &mut sum[..], SystemOperation::sum());
            let r2 = world.immediate_all_gather_into(scope, &a[..], &mut gathered[..]);
            let r3 = rev
                .process_at_rank(0)
                .immediate_broadcast_into(scope, &mut bc[..]);
            let r4 = world.immediate_barrier();
            // A ring message while the collectives are in flight.
            let next = world.process_at_rank((me + 1) % n);
            let prev = world.process_at_rank((me + n - 1) % n);
            let s = next.immediate_send(scope, &round);
            let (m, _) = prev.receive::<u64>();
            msg = m;
            s.wait();
            r4.wait();
            r3.wait();
            r2.wait();
            r1.wait();
        });
        assert_eq!(msg, round);
        let want = fold_sums((0..n).map(|q| values(q, len, round)), len);
        assert_eq!(sum, want, "immediate allreduce round {round}");
        let all: Vec<u64> = (0..n).flat_map(|q| values(q, len, round)).collect();
        assert_eq!(gathered, all, "immediate allgather round {round}");
        assert_eq!(
            bc,
            values(99, len, round),
            "immediate broadcast round {round}"
        );
    }
}
