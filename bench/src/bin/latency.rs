//! Ping-pong latency (OSU style): Weft's side of `bench/c/latency.c`, same sizes, counts and
//! method. Rank 0 sends `size` bytes to rank 1, which sends them back; one-way latency is half
//! the round trip. Per size: warm-up round trips, then BATCHES timed batches of `iters` round
//! trips; the median batch is reported as `RESULT latency <size_bytes> <one-way µs> us`.

use weft::traits::*;
use weft_bench::{median, quick, require_two_ranks, result};

const BATCHES: usize = 5;
const SIZES: [usize; 13] = [
    0,
    1,
    8,
    64,
    256,
    1 << 10,
    4 << 10,
    16 << 10,
    32 << 10,
    64 << 10,
    256 << 10,
    1 << 20,
    4 << 20,
];
const QUICK_SIZES: [usize; 6] = [0, 64, 4 << 10, 64 << 10, 1 << 20, 4 << 20];
const TAG: weft::Tag = 1;

/// Round trips per timed batch for a message of `size` bytes.
fn iters_for(size: usize, quick: bool) -> usize {
    let n = if size <= 8 << 10 {
        10000
    } else if size <= 64 << 10 {
        2000
    } else if size <= 1 << 20 {
        200
    } else {
        50
    };
    if quick {
        (n / 10).max(5)
    } else {
        n
    }
}

fn main() {
    let universe = weft::initialize().expect("weft initialize");
    let world = universe.world();
    let (rank, nranks) = (world.rank(), world.size());
    require_two_ranks("latency", nranks);
    let quick = quick();
    let sizes: &[usize] = if quick { &QUICK_SIZES } else { &SIZES };
    let max = *sizes.last().unwrap();
    let mut buf = vec![rank as u8 + 1; max.max(1)];
    let peer = world.process_at_rank(1 - rank);

    // Untimed warm-up of the whole path (the same in every implementation), so the first
    // size measured does not pay for cold caches and clock ramp-up.
    for _ in 0..if quick { 2000 } else { 20000 } {
        if rank == 0 {
            peer.send_with_tag(&buf[..0], TAG);
            peer.receive_into_with_tag(&mut buf[..0], TAG);
        } else {
            peer.receive_into_with_tag(&mut buf[..0], TAG);
            peer.send_with_tag(&buf[..0], TAG);
        }
    }

    for &n in sizes {
        let iters = iters_for(n, quick);
        let warmup = (iters / 10).max(2);
        let mut batch_us = [0.0; BATCHES];
        world.barrier();
        for b in -1..BATCHES as isize {
            let count = if b < 0 { warmup } else { iters };
            let msg = &mut buf[..n];
            let t0 = weft::time();
            for _ in 0..count {
                if rank == 0 {
                    peer.send_with_tag(&msg[..], TAG);
                    peer.receive_into_with_tag(&mut msg[..], TAG);
                } else {
                    peer.receive_into_with_tag(&mut msg[..], TAG);
                    peer.send_with_tag(&msg[..], TAG);
                }
            }
            let t = weft::time() - t0;
            if b >= 0 {
                batch_us[b as usize] = t * 1e6 / (2.0 * count as f64);
            }
        }
        if rank == 0 {
            result("latency", n, median(&mut batch_us), "us", 3);
        }
    }
}
