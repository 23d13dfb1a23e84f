//! Ring step and barrier time for many ranks (run oversubscribed: 4 or 8 ranks on 2 cores):
//! Weft's side of `bench/c/ring_barrier.c`, same counts and method.
//!
//! Ring step: every rank posts a receive of 8 bytes from rank-1, sends 8 bytes to rank+1 and
//! waits for its receive. Barrier: one `barrier()`. The count per batch is calibrated (a step
//! costs microseconds to tens of milliseconds depending on how an implementation waits): after
//! WARMUP operations rank 0 times CALIBRATE operations, picks count = clamp(target / per_op,
//! MIN_COUNT, MAX_COUNT) and sends it to every rank. Then BATCHES timed batches, each after a
//! barrier; rank 0's median batch per operation is reported as `RESULT ring 8 <µs> us` and
//! `RESULT barrier 0 <µs> us`.

use weft::traits::*;
use weft_bench::{median, quick, result};

const BATCHES: usize = 5;
const WARMUP: usize = 10;
const CALIBRATE: usize = 10;
const MIN_COUNT: u64 = 10;
const MAX_COUNT: u64 = 100_000;
const RING_BYTES: usize = 8;
const RING_TAG: weft::Tag = 5;
const COUNT_TAG: weft::Tag = 9;

/// Runs `op` as described at the top; returns rank 0's median µs per operation.
fn measure<C: Communicator>(world: &C, op: &mut dyn FnMut(), target_s: f64) -> f64 {
    for _ in 0..WARMUP {
        op();
    }
    world.barrier();
    let t0 = weft::time();
    for _ in 0..CALIBRATE {
        op();
    }
    let per_op = (weft::time() - t0) / CALIBRATE as f64;
    let mut count: u64 = 0;
    if world.rank() == 0 {
        let c = if per_op > 0.0 {
            target_s / per_op
        } else {
            MAX_COUNT as f64
        };
        count = if c < MIN_COUNT as f64 {
            MIN_COUNT
        } else if c > MAX_COUNT as f64 {
            MAX_COUNT
        } else {
            c as u64
        };
        for r in 1..world.size() {
            world.process_at_rank(r).send_with_tag(&count, COUNT_TAG);
        }
    } else {
        world
            .process_at_rank(0)
            .receive_into_with_tag(&mut count, COUNT_TAG);
    }
    let mut batch_us = [0.0; BATCHES];
    for slot in batch_us.iter_mut() {
        world.barrier();
        let t0 = weft::time();
        for _ in 0..count {
            op();
        }
        *slot = (weft::time() - t0) * 1e6 / count as f64;
    }
    median(&mut batch_us)
}

fn main() {
    let universe = weft::initialize().expect("weft initialize");
    let world = universe.world();
    let (rank, nranks) = (world.rank(), world.size());
    let target_s = if quick() { 0.05 } else { 0.2 }; // per batch
    let sbuf = [rank as u8 + 1; RING_BYTES];
    let mut rbuf = [0u8; RING_BYTES];
    let next = world.process_at_rank((rank + 1) % nranks);
    let prev = world.process_at_rank((rank + nranks - 1) % nranks);

    let mut ring_step = || {
        weft::request::scope(|scope| {
            let r = prev.immediate_receive_into_with_tag(scope, &mut rbuf[..], RING_TAG);
            next.send_with_tag(&sbuf[..], RING_TAG);
            r.wait();
        });
    };
    let ring = measure(&world, &mut ring_step, target_s);
    if rank == 0 {
        result("ring", RING_BYTES, ring, "us", 3);
    }
    let barrier = measure(&world, &mut || world.barrier(), target_s);
    if rank == 0 {
        result("barrier", 0, barrier, "us", 3);
    }
}
