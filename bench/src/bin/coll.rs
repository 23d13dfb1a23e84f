//! Collective latency, OSU style: Weft's side of `bench/c/coll.c` (same operations, sizes,
//! counts and method; see that file's header). Rooted operations at rank 0; reductions are
//! MPI_SUM on f64; before every call each rank writes one word per cache line (up to 64 KiB,
//! then one per 4 KiB) of its send data. A batch takes as long as its slowest rank (each times
//! its own; the maximum is taken outside the timing); rank 0 reports the median batch per call
//! as `RESULT <op> <size> <µs> us`. Barriers run untimed for a moment before the first
//! measurement (see `main`).

use weft::collective::SystemOperation;
use weft::topology::SimpleCommunicator;
use weft::traits::*;
use weft_bench::{median, quick, result};

const BATCHES: usize = 3;
const WARMUP: usize = 3;
const CALIBRATE: usize = 3;
const MIN_COUNT: u64 = 2;
const MAX_COUNT: u64 = 100_000;
const COUNT_TAG: weft::Tag = 9;

/// The buffers and the size being measured.
struct State {
    world: SimpleCommunicator,
    send: Vec<f64>,
    recv: Vec<f64>,
    /// Bytes of the current size.
    cur: usize,
    stamp: u64,
}

impl State {
    /// Changes the first `bytes` of the send data (see the module comment).
    fn touch(&mut self, bytes: usize) {
        let stride = if bytes <= 65536 { 64 } else { 4096 };
        self.stamp += 1;
        let mut off = 0;
        while off + 8 <= bytes {
            self.send[off / 8] = (self.stamp + off as u64) as f64;
            off += stride;
        }
    }
    fn doubles(&self) -> usize {
        self.cur / 8
    }
    fn bytes_of(v: &[f64]) -> &[u8] {
        // SAFETY: f64s are plain bytes; the slice covers exactly their memory.
        unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, std::mem::size_of_val(v)) }
    }
    fn bytes_of_mut(v: &mut [f64]) -> &mut [u8] {
        // SAFETY: as above; any bytes written form valid f64s.
        unsafe {
            std::slice::from_raw_parts_mut(v.as_mut_ptr() as *mut u8, std::mem::size_of_val(v))
        }
    }
}

type Op = fn(&mut State);

fn barrier(s: &mut State) {
    s.world.barrier();
}
fn bcast(s: &mut State) {
    if s.world.rank() == 0 {
        s.touch(s.cur);
    }
    let n = s.doubles();
    s.world.process_at_rank(0).broadcast_into(&mut s.send[..n]);
}
fn reduce(s: &mut State) {
    s.touch(s.cur);
    let n = s.doubles();
    let root = s.world.process_at_rank(0);
    if s.world.rank() == 0 {
        root.reduce_into_root(&s.send[..n], &mut s.recv[..n], SystemOperation::sum());
    } else {
        root.reduce_into(&s.send[..n], SystemOperation::sum());
    }
}
fn allreduce(s: &mut State) {
    s.touch(s.cur);
    let n = s.doubles();
    s.world
        .all_reduce_into(&s.send[..n], &mut s.recv[..n], SystemOperation::sum());
}
fn allgather(s: &mut State) {
    s.touch(s.cur);
    let (b, p) = (s.cur, s.world.size() as usize);
    let send = State::bytes_of(&s.send);
    let recv = State::bytes_of_mut(&mut s.recv);
    s.world.all_gather_into(&send[..b], &mut recv[..b * p]);
}
fn gather(s: &mut State) {
    s.touch(s.cur);
    let (b, p) = (s.cur, s.world.size() as usize);
    let root = s.world.process_at_rank(0);
    let send = State::bytes_of(&s.send);
    if s.world.rank() == 0 {
        let recv = State::bytes_of_mut(&mut s.recv);
        root.gather_into_root(&send[..b], &mut recv[..b * p]);
    } else {
        root.gather_into(&send[..b]);
    }
}
fn scatter(s: &mut State) {
    let (b, p) = (s.cur, s.world.size() as usize);
    if s.world.rank() == 0 {
        s.touch(b * p);
    }
    let root = s.world.process_at_rank(0);
    let send = State::bytes_of(&s.send);
    let recv = State::bytes_of_mut(&mut s.recv);
    if s.world.rank() == 0 {
        root.scatter_into_root(&send[..b * p], &mut recv[..b]);
    } else {
        root.scatter_into(&mut recv[..b]);
    }
}
fn alltoall(s: &mut State) {
    let (b, p) = (s.cur, s.world.size() as usize);
    s.touch(b * p);
    let send = State::bytes_of(&s.send);
    let recv = State::bytes_of_mut(&mut s.recv);
    s.world.all_to_all_into(&send[..b * p], &mut recv[..b * p]);
}
fn reduce_scatter(s: &mut State) {
    let p = s.world.size() as usize;
    s.touch(s.cur * p);
    let n = s.doubles();
    s.world
        .reduce_scatter_block_into(&s.send[..n * p], &mut s.recv[..n], SystemOperation::sum());
}

/// Runs `op` as described at the top of `coll.c`; returns rank 0's median µs per call.
fn measure(s: &mut State, op: Op, target_s: f64) -> f64 {
    for _ in 0..WARMUP {
        op(s);
    }
    s.world.barrier();
    let t0 = weft::time();
    for _ in 0..CALIBRATE {
        op(s);
    }
    let per_op = (weft::time() - t0) / CALIBRATE as f64;
    let mut count: u64 = 0;
    if s.world.rank() == 0 {
        let c = if per_op > 0.0 {
            target_s / per_op
        } else {
            MAX_COUNT as f64
        };
        count = (c as u64).clamp(MIN_COUNT, MAX_COUNT);
        for r in 1..s.world.size() {
            s.world.process_at_rank(r).send_with_tag(&count, COUNT_TAG);
        }
    } else {
        s.world
            .process_at_rank(0)
            .receive_into_with_tag(&mut count, COUNT_TAG);
    }
    let mut batch_us = [0.0; BATCHES];
    for slot in batch_us.iter_mut() {
        s.world.barrier();
        let t0 = weft::time();
        for _ in 0..count {
            op(s);
        }
        let mine = (weft::time() - t0) * 1e6 / count as f64;
        s.world.all_reduce_into(&mine, slot, SystemOperation::max());
    }
    median(&mut batch_us)
}

fn main() {
    let universe = weft::initialize().expect("initialize");
    let world = universe.world();
    let quick = quick();
    let target_s = if quick { 0.02 } else { 0.1 };
    let mut sizes: Vec<usize> = if quick {
        vec![8, 65536, 1 << 20]
    } else {
        vec![8, 64, 512, 4096, 65536, 1 << 20, 4 << 20]
    };
    // For quick A/B runs by hand: BENCH_SIZES=8,64 BENCH_OPS=bcast,gather (barrier always).
    let listed = |var: &str| {
        std::env::var(var)
            .ok()
            .map(|v| v.split(',').map(str::to_owned).collect::<Vec<_>>())
    };
    if let Some(list) = listed("BENCH_SIZES") {
        sizes = list
            .iter()
            .map(|x| x.parse().expect("BENCH_SIZES: byte counts"))
            .collect();
    }
    let only_ops = listed("BENCH_OPS");
    let most =
        sizes.iter().max().copied().unwrap_or(8).max(4 << 20) * world.size() as usize / 8 + 1;
    let mut s = State {
        world,
        send: vec![0.0; most],
        recv: vec![0.0; most],
        cur: 0,
        stamp: 0,
    };
    // First, barriers for as long as a measurement takes, untimed: just after start-up the
    // scheduler has not yet spread oversubscribed ranks over the CPUs, and the barrier, timed
    // first, paid for that alone (4 ranks on 2 CPUs, 8 runs each: Weft's barrier 2.4-3.8 µs
    // timed at once, 1.8-2.8 timed again after; Open MPI 4.1's 4.0-5.8 against 3.2-4.1).
    measure(&mut s, barrier, target_s);
    let us = measure(&mut s, barrier, target_s);
    if s.world.rank() == 0 {
        result("barrier", 0, us, "us", 3);
    }
    let ops: [(&str, Op); 8] = [
        ("bcast", bcast),
        ("reduce", reduce),
        ("allreduce", allreduce),
        ("allgather", allgather),
        ("gather", gather),
        ("scatter", scatter),
        ("alltoall", alltoall),
        ("reduce_scatter", reduce_scatter),
    ];
    for (name, op) in ops {
        if only_ops
            .as_ref()
            .is_some_and(|o| !o.iter().any(|x| x == name))
        {
            continue;
        }
        for &size in &sizes {
            s.cur = size;
            let us = measure(&mut s, op, target_s);
            if s.world.rank() == 0 {
                result(name, size, us, "us", 3);
            }
        }
    }
}
