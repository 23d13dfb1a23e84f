//! `coll_suite persistent`: every persistent collective (MPI-4's `*_init`), started several
//! times with new data between starts, on the world, on a split with members in reverse
//! order and on an intercommunicator; completed by `wait` and by `test`; with blocking and
//! immediate collectives between starts; and the misuse paths (a second start while one
//! runs, the buffers while a start runs) failing with an error naming the call.

use super::{fold_sums, values};
use weft::collective::{Parts, PersistentRequest, SystemOperation};
use weft::topology::{Color, SimpleCommunicator};
use weft::traits::*;

pub fn run(world: &SimpleCommunicator) {
    every_persistent(world);
    let rev = world
        .split_by_color_with_key(Color::with_value(0), -world.rank())
        .expect("in the split");
    every_persistent(&rev);
    if world.size() >= 2 {
        on_an_intercommunicator(world);
    }
    neighbours(world);
    misuse(world);
}

/// The persistent neighbourhood collectives on a periodic ring of every member: sources and
/// destinations are (left, right).
fn neighbours(world: &SimpleCommunicator) {
    let (me, n) = (world.rank(), world.size());
    let ring = world
        .create_cartesian_communicator(&[n], &[true], false)
        .expect("every member is in the ring");
    let (left, right) = ((me + n - 1) % n, (me + 1) % n);
    let mut ag = ring.neighbor_all_gather_init(vec![0u64; 5], vec![0u64; 10]);
    let mut a2a = ring.neighbor_all_to_all_init(vec![0u64; 10], vec![0u64; 10]);
    let lens = |q: i32| q as usize % 3 + 1;
    let mut agv = ring.neighbor_all_gather_varcount_init(
        vec![0u64; lens(me)],
        vec![0u64; lens(left) + lens(right)],
        Parts::packed(vec![lens(left) as i32, lens(right) as i32]),
    );
    // One element to the left, two to the right: two from the left, one from the right.
    let mut a2av = ring.neighbor_all_to_all_varcount_init(
        vec![0u64; 3],
        Parts::packed(vec![1, 2]),
        vec![0u64; 3],
        Parts::packed(vec![2, 1]),
    );
    // As the varcount form, a buffer per neighbour each way.
    let mut a2aw = ring.neighbor_all_to_all_w_init(
        vec![vec![0u64; 1], vec![0u64; 2]],
        vec![vec![0u64; 2], vec![0u64; 1]],
    );
    for round in 0..3u64 {
        ag.buffers_mut().0 = values(me, 5, round);
        a2aw.buffers_mut().0 = vec![values(me, 1, round + 60), values(me, 2, round + 70)];
        a2a.buffers_mut().0 = [values(me, 5, round + 10), values(me, 5, round + 20)].concat();
        agv.buffers_mut().0 = values(me, lens(me), round + 30);
        a2av.buffers_mut().0 = [values(me, 1, round + 40), values(me, 2, round + 50)].concat();
        for r in [&mut ag, &mut a2a, &mut agv, &mut a2av] {
            r.start();
        }
        a2aw.start();
        for r in [&mut ag, &mut a2a, &mut agv, &mut a2av] {
            complete(r, round);
        }
        complete(&mut a2aw, round + 1);
        let label = format!("round {round} on {n}");
        let want = [values(left, 5, round), values(right, 5, round)].concat();
        assert_eq!(ag.buffers().1, want, "neighbour allgather {label}");
        let want = [values(left, 5, round + 20), values(right, 5, round + 10)].concat();
        assert_eq!(a2a.buffers().1, want, "neighbour alltoall {label}");
        let want = [
            values(left, lens(left), round + 30),
            values(right, lens(right), round + 30),
        ]
        .concat();
        assert_eq!(agv.buffers().1, want, "neighbour allgatherv {label}");
        let want = [values(left, 2, round + 50), values(right, 1, round + 40)].concat();
        assert_eq!(a2av.buffers().1, want, "neighbour alltoallv {label}");
        let want = vec![values(left, 2, round + 70), values(right, 1, round + 60)];
        assert_eq!(a2aw.buffers().1, want, "neighbour alltoallw {label}");
    }
}

/// Completes a start by `test`, or by `wait` (alternately, by `round`).
fn complete<B>(req: &mut PersistentRequest<'_, B>, round: u64) {
    if round.is_multiple_of(2) {
        req.wait();
    } else {
        while !req.test() {}
    }
    assert!(!req.is_active());
}

fn every_persistent(c: &SimpleCommunicator) {
    let (me, n) = (c.rank(), c.size());
    let nu = n as usize;
    let len = 300;
    let mut barrier = c.barrier_init();
    let mut allreduce = c.all_reduce_init(vec![0u64; len], vec![0u64; len], SystemOperation::sum());
    let mut allgather = c.all_gather_init(vec![0u64; len], vec![0u64; len * nu]);
    let mut alltoall = c.all_to_all_init(vec![0u64; len * nu], vec![0u64; len * nu]);
    let mut rsb = c.reduce_scatter_block_init(
        vec![0u64; len * nu],
        vec![0u64; len],
        SystemOperation::sum(),
    );
    let mut scan = c.scan_init(vec![0u64; len], vec![0u64; len], SystemOperation::sum());
    let mut exscan =
        c.exclusive_scan_init(vec![0u64; len], vec![0u64; len], SystemOperation::sum());
    // Member j has j + 1 elements in the forms with counts.
    let counts: Vec<i32> = (1..=n).collect();
    let total = counts.iter().sum::<i32>() as usize;
    let mine_len = me as usize + 1;
    let mut allgatherv = c.all_gather_varcount_init(
        vec![0u64; mine_len],
        vec![0u64; total],
        Parts::packed(counts.clone()),
    );
    let mut rsv = c.reduce_scatter_varcount_init(
        vec![0u64; total],
        Parts::packed(counts.clone()),
        vec![0u64; mine_len],
        SystemOperation::sum(),
    );
    // To member j, j + 1 elements; from each member, me + 1.
    let mut alltoallv = c.all_to_all_varcount_init(
        vec![0u64; total],
        Parts::packed(counts.clone()),
        vec![0u64; mine_len * nu],
        Parts::packed(vec![mine_len as i32; nu]),
    );
    // A buffer per member each way: j elements to member j (none to member 0), me from each.
    let mut alltoallw = c.all_to_all_w_init(
        (0..nu).map(|j| vec![0u64; j]).collect(),
        vec![vec![0u64; me as usize]; nu],
    );
    let root = n - 1;
    let at_root = me == root;
    let p = c.process_at_rank(root);
    let mut bcast = p.broadcast_init(vec![0u64; len]);
    let mut reduce = if at_root {
        Either::Root(p.reduce_init_root(vec![0u64; len], vec![0u64; len], SystemOperation::sum()))
    } else {
        Either::Member(p.reduce_init(vec![0u64; len], SystemOperation::sum()))
    };
    for round in 0..4u64 {
        let salt = 1000 * round;
        allreduce.buffers_mut().0 = values(me, len, salt + 1);
        allgather.buffers_mut().0 = values(me, len, salt + 2);
        alltoall.buffers_mut().0 = (0..nu)
            .flat_map(|j| values(me, len, salt + 10 + j as u64))
            .collect();
        rsb.buffers_mut().0 = values(me, len * nu, salt + 3);
        scan.buffers_mut().0 = values(me, len, salt + 4);
        exscan.buffers_mut().0 = values(me, len, salt + 5);
        allgatherv.buffers_mut().0 = values(me, mine_len, salt + 6);
        rsv.buffers_mut().0 = values(me, total, salt + 7);
        alltoallv.buffers_mut().0 = (0..nu)
            .flat_map(|j| values(me, j + 1, salt + 20 + j as u64))
            .collect();
        for (j, part) in alltoallw.buffers_mut().0.iter_mut().enumerate() {
            *part = values(me, j, salt + 30 + j as u64);
        }
        if at_root {
            *bcast.buffers_mut() = values(root, len, salt + 8);
        }
        reduce.set_send(values(me, len, salt + 9));
        // Start them all, with a blocking and an immediate collective in between.
        barrier.start();
        allreduce.start();
        allgather.start();
        let mut x = 0u64;
        c.all_reduce_into(&1u64, &mut x, SystemOperation::sum());
        assert_eq!(x, n as u64);
        alltoall.start();
        rsb.start();
        scan.start();
        exscan.start();
        allgatherv.start();
        rsv.start();
        alltoallv.start();
        alltoallw.start();
        bcast.start();
        reduce.start();
        complete(&mut barrier, round);
        complete(&mut allreduce, round);
        complete(&mut allgather, round + 1);
        complete(&mut alltoall, round);
        complete(&mut rsb, round + 1);
        complete(&mut scan, round);
        complete(&mut exscan, round + 1);
        complete(&mut allgatherv, round);
        complete(&mut rsv, round + 1);
        complete(&mut alltoallv, round);
        complete(&mut alltoallw, round + 1);
        complete(&mut bcast, round + 1);
        reduce.complete(round);
        let sum_of = |s: u64, l: usize, upto: i32| fold_sums((0..upto).map(|q| values(q, l, s)), l);
        let label = format!("round {round} on {n} members");
        assert_eq!(
            allreduce.buffers().1,
            sum_of(salt + 1, len, n),
            "allreduce {label}"
        );
        let all: Vec<u64> = (0..n).flat_map(|q| values(q, len, salt + 2)).collect();
        assert_eq!(allgather.buffers().1, all, "allgather {label}");
        let want: Vec<u64> = (0..n)
            .flat_map(|q| values(q, len, salt + 10 + me as u64))
            .collect();
        assert_eq!(alltoall.buffers().1, want, "alltoall {label}");
        let whole = sum_of(salt + 3, len * nu, n);
        let at = me as usize * len;
        assert_eq!(
            rsb.buffers().1,
            whole[at..at + len],
            "reduce_scatter_block {label}"
        );
        assert_eq!(
            scan.buffers().1,
            sum_of(salt + 4, len, me + 1),
            "scan {label}"
        );
        if me > 0 {
            assert_eq!(
                exscan.buffers().1,
                sum_of(salt + 5, len, me),
                "exscan {label}"
            );
        }
        let all: Vec<u64> = (0..n)
            .flat_map(|q| values(q, q as usize + 1, salt + 6))
            .collect();
        assert_eq!(allgatherv.buffers().1, all, "allgatherv {label}");
        let whole = sum_of(salt + 7, total, n);
        let at = (me * (me + 1) / 2) as usize;
        assert_eq!(
            rsv.buffers().1,
            whole[at..at + mine_len],
            "reduce_scatter_varcount {label}"
        );
        let want: Vec<u64> = (0..n)
            .flat_map(|q| values(q, mine_len, salt + 20 + me as u64))
            .collect();
        assert_eq!(alltoallv.buffers().1, want, "alltoallv {label}");
        let want: Vec<Vec<u64>> = (0..n)
            .map(|q| values(q, me as usize, salt + 30 + me as u64))
            .collect();
        assert_eq!(alltoallw.buffers().1, want, "alltoallw {label}");
        assert_eq!(
            bcast.buffers(),
            &values(root, len, salt + 8),
            "broadcast {label}"
        );
        if let Some(r) = reduce.result() {
            assert_eq!(r, &sum_of(salt + 9, len, n), "reduce {label}");
        }
    }
    gather_and_scatter(c);
}

/// A reduce's request: the root's or a member's (they own different buffers).
enum Either<'c> {
    Root(PersistentRequest<'c, (Vec<u64>, Vec<u64>)>),
    Member(PersistentRequest<'c, Vec<u64>>),
}

impl Either<'_> {
    fn set_send(&mut self, v: Vec<u64>) {
        match self {
            Either::Root(r) => r.buffers_mut().0 = v,
            Either::Member(r) => *r.buffers_mut() = v,
        }
    }
    fn start(&mut self) {
        match self {
            Either::Root(r) => r.start(),
            Either::Member(r) => r.start(),
        }
    }
    fn complete(&mut self, round: u64) {
        match self {
            Either::Root(r) => complete(r, round),
            Either::Member(r) => complete(r, round),
        }
    }
    fn result(&self) -> Option<&Vec<u64>> {
        match self {
            Either::Root(r) => Some(&r.buffers().1),
            Either::Member(_) => None,
        }
    }
}

/// Gather and scatter, with equal blocks and with counts, from member 0, twice each.
fn gather_and_scatter(c: &SimpleCommunicator) {
    let (me, n) = (c.rank(), c.size());
    let len = 50;
    let p = c.process_at_rank(0);
    let counts: Vec<i32> = (1..=n).collect();
    let total = counts.iter().sum::<i32>() as usize;
    for round in 0..2u64 {
        let mine = values(me, len, round);
        let minev = values(me, me as usize + 1, round + 7);
        if me == 0 {
            let all: Vec<u64> = (0..n).flat_map(|q| values(q, len, round)).collect();
            let allv: Vec<u64> = (0..n)
                .flat_map(|q| values(q, q as usize + 1, round + 7))
                .collect();
            let mut g = p.gather_init_root(mine.clone(), vec![0u64; len * n as usize]);
            g.start();
            g.wait();
            assert_eq!(g.buffers().1, all, "gather round {round}");
            let mut gv = p.gather_varcount_init_root(
                minev.clone(),
                vec![0u64; total],
                Parts::packed(counts.clone()),
            );
            gv.start();
            gv.wait();
            assert_eq!(gv.buffers().1, allv, "gatherv round {round}");
            let mut s = p.scatter_init_root(all, vec![0u64; len]);
            s.start();
            s.wait();
            assert_eq!(s.buffers().1, mine, "scatter round {round}");
            let mut sv =
                p.scatter_varcount_init_root(allv, Parts::packed(counts.clone()), vec![0u64; 1]);
            sv.start();
            sv.wait();
            assert_eq!(sv.into_buffers().1, minev, "scatterv round {round}");
        } else {
            let mut g = p.gather_init(mine.clone());
            g.start();
            g.wait();
            let mut gv = p.gather_varcount_init(minev.clone());
            gv.start();
            gv.wait();
            let mut s = p.scatter_init(vec![0u64; len]);
            s.start();
            s.wait();
            assert_eq!(s.buffers(), &mine, "scatter round {round}");
            let mut sv = p.scatter_varcount_init(vec![0u64; me as usize + 1]);
            sv.start();
            sv.wait();
            assert_eq!(sv.into_buffers(), minev, "scatterv round {round}");
        }
    }
}

/// A persistent allreduce and broadcast on an intercommunicator between the world's first
/// rank and the rest.
fn on_an_intercommunicator(world: &SimpleCommunicator) {
    let me = world.rank();
    let in_a = me == 0;
    let local = world
        .split_by_color_with_key(Color::with_value(in_a as i32), me)
        .expect("in a group");
    let inter = local.create_intercommunicator(0, world, if in_a { 1 } else { 0 }, 3);
    let others: Vec<i32> = if in_a {
        (1..world.size()).collect()
    } else {
        vec![0]
    };
    let mut sum = inter.all_reduce_init(0u64, 0u64, SystemOperation::sum());
    let mut b = match (in_a, inter.rank()) {
        (true, _) => inter.root().broadcast_init(vec![0u64; 10]),
        (false, _) => inter.process_at_rank(0).broadcast_init(vec![0u64; 10]),
    };
    for round in 0..3u64 {
        sum.buffers_mut().0 = me as u64 + round;
        if in_a {
            *b.buffers_mut() = values(0, 10, round);
        }
        sum.start();
        b.start();
        b.wait();
        sum.wait();
        let want: u64 = others.iter().map(|&q| q as u64 + round).sum();
        assert_eq!(sum.buffers().1, want, "inter allreduce round {round}");
        assert_eq!(
            b.buffers(),
            &values(0, 10, round),
            "inter broadcast round {round}"
        );
    }
}

/// A second start while one runs, and the buffers while a start runs: errors naming the
/// call. (A start that cannot complete until the others start: a barrier, when n > 1.)
fn misuse(world: &SimpleCommunicator) {
    let mut b = world.barrier_init();
    b.start();
    let e = b.try_start().unwrap_err();
    assert!(
        e.to_string().contains("barrier_init") && e.to_string().contains("previous start runs"),
        "{e}"
    );
    b.wait();
    let mut a = world.all_reduce_init(1u64, 0u64, SystemOperation::sum());
    a.start();
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| a.buffers_mut().0 = 5));
    std::panic::set_hook(hook);
    let msg = caught.expect_err("buffers while a start runs");
    let msg = msg.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(
        msg.contains("all_reduce_init") && msg.contains("while a start runs"),
        "{msg}"
    );
    // Dropped while it runs: it waits first.
    drop(a);
    // A start whose arguments are wrong (a receive buffer one element too long) fails at
    // every member, and the collectives after it take their own numbers.
    let n = world.size() as usize;
    let mut bad = world.all_gather_init(1u64, vec![0u64; n + 1]);
    let e = bad.try_start().unwrap_err();
    assert!(e.to_string().contains("receive buffer"), "{e}");
    assert!(!bad.is_active());
    // An all-to-all-w with one send part too few, likewise.
    let mut bad_w = world.all_to_all_w_init(vec![vec![0u64; 1]; n - 1], vec![vec![0u64; 1]; n]);
    let e = bad_w.try_start().unwrap_err().to_string();
    assert!(
        e.contains("all_to_all_w_init") && e.contains(&format!("{} send parts", n - 1)),
        "{e}"
    );
    assert!(!bad_w.is_active());
    let mut x = 0u64;
    world.all_reduce_into(&1u64, &mut x, SystemOperation::sum());
    assert_eq!(x, n as u64, "an allreduce after a failed start");
    world.barrier();
}
