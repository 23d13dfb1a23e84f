//! Streaming bandwidth (OSU osu_bw style): Weft's side of `bench/c/bandwidth.c`, same sizes,
//! counts and method. One window: rank 0 posts WINDOW immediate sends of `size` bytes (all from
//! one buffer) and waits for them; rank 1 posts WINDOW immediate receives into WINDOW distinct
//! buffers, waits for them, then sends a 4-byte ack. Per size: warm-up windows, then BATCHES
//! timed batches; MB/s = size * WINDOW * windows / time / 10^6; the median batch is reported as
//! `RESULT bandwidth <size_bytes> <MB/s> MB/s`.

use weft::traits::*;
use weft_bench::{median, quick, require_two_ranks, result};

const BATCHES: usize = 5;
const WINDOW: usize = 64;
const SIZES: [usize; 7] = [
    1 << 10,
    4 << 10,
    16 << 10,
    64 << 10,
    256 << 10,
    1 << 20,
    4 << 20,
];
const QUICK_SIZES: [usize; 3] = [1 << 10, 64 << 10, 4 << 20];
const DATA_TAG: weft::Tag = 2;
const ACK_TAG: weft::Tag = 3;

/// Windows per timed batch for a message of `size` bytes.
fn windows_for(size: usize, quick: bool) -> usize {
    let n = if size <= 64 << 10 {
        100
    } else if size <= 256 << 10 {
        30
    } else if size <= 1 << 20 {
        10
    } else {
        4
    };
    if quick {
        (n / 4).max(2)
    } else {
        n
    }
}

fn main() {
    let universe = weft::initialize().expect("weft initialize");
    let world = universe.world();
    let (rank, nranks) = (world.rank(), world.size());
    require_two_ranks("bandwidth", nranks);
    let quick = quick();
    let sizes: &[usize] = if quick { &QUICK_SIZES } else { &SIZES };
    let max = *sizes.last().unwrap();
    // Sender: one buffer sent WINDOW times. Receiver: WINDOW distinct buffers.
    let mut buf = vec![rank as u8 + 1; if rank == 0 { max } else { max * WINDOW }];
    let mut ack = [0i32; 1];
    let sender = world.process_at_rank(0);
    let receiver = world.process_at_rank(1);

    for &n in sizes {
        let windows = windows_for(n, quick);
        let warmup = (windows / 10).max(2);
        let mut batch_mbs = [0.0; BATCHES];
        world.barrier();
        for b in -1..BATCHES as isize {
            let count = if b < 0 { warmup } else { windows };
            let t0 = weft::time();
            for _ in 0..count {
                if rank == 0 {
                    let msg = &buf[..n];
                    weft::request::multiple_scope(WINDOW, |scope, coll| {
                        for _ in 0..WINDOW {
                            coll.add(receiver.immediate_send_with_tag(scope, msg, DATA_TAG));
                        }
                        let mut out = Vec::with_capacity(WINDOW);
                        coll.wait_all(&mut out);
                    });
                    receiver.receive_into_with_tag(&mut ack[..], ACK_TAG);
                } else {
                    weft::request::multiple_scope(WINDOW, |scope, coll| {
                        for chunk in buf[..n * WINDOW].chunks_mut(n) {
                            coll.add(
                                sender.immediate_receive_into_with_tag(scope, chunk, DATA_TAG),
                            );
                        }
                        let mut out = Vec::with_capacity(WINDOW);
                        coll.wait_all(&mut out);
                    });
                    sender.send_with_tag(&ack[..], ACK_TAG);
                }
            }
            let t = weft::time() - t0;
            if b >= 0 {
                batch_mbs[b as usize] = (n * WINDOW * count) as f64 / t / 1e6;
            }
        }
        if rank == 0 {
            result("bandwidth", n, median(&mut batch_mbs), "MB/s", 1);
        }
    }
}
