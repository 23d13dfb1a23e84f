//! One-sided communication (MPI-3 windows): Weft's side of `bench/c/rma.c` (same operations,
//! sizes, counts and method; see that file's header). With 2 ranks, rank 0 puts, gets,
//! accumulates (doubles), fetches-and-adds, compares-and-swaps and locks at rank 1 (which waits in a barrier); with
//! any number, every rank fetches-and-adds on one counter at rank 0 (`rma:contended`, millions
//! of operations per second in total, the rank count in RESULT's size field). Also at 2 ranks,
//! the cost of a fence and of a post-start-complete-wait epoch (`rma:fence`, `rma:pscw`), and
//! of a lock epoch carrying one put (`rma:lock_put`).

use weft::collective::SystemOperation;
use weft::topology::SimpleCommunicator;
use weft::traits::*;
use weft::window::{Access, LockKind, Window};
use weft_bench::{median, quick, result};

const BATCHES: usize = 5;
const SIZES: [usize; 7] = [8, 64, 512, 4096, 32768, 262144, 1 << 20];

fn iters_for(size: usize, quick: bool) -> usize {
    let n = if size <= 4096 {
        2000
    } else if size <= 65536 {
        500
    } else {
        50
    };
    if quick {
        n / 10 + 2
    } else {
        n
    }
}

/// Median µs per `op` over the batches, at rank 0; the others wait in a barrier.
fn time_at_origin(
    world: &SimpleCommunicator,
    name: &str,
    size: usize,
    iters: usize,
    mut op: impl FnMut(),
) {
    if world.rank() == 0 {
        for _ in 0..iters / 10 + 1 {
            op();
        }
        let mut t = [0.0; BATCHES];
        for b in &mut t {
            let t0 = weft::time();
            for _ in 0..iters {
                op();
            }
            *b = (weft::time() - t0) * 1e6 / iters as f64;
        }
        result(name, size, median(&mut t), "us", 3);
    }
    world.barrier();
}

fn latencies(world: &SimpleCommunicator, quick: bool) {
    let max = 1 << 20;
    let local = vec![1u8; max];
    let mut into = vec![0u8; max];
    let addends = vec![0.5f64; max / 8];
    let bytes = Window::<u8>::allocate(world, max);
    let doubles = Window::<f64>::allocate(world, max / 8);
    let longs = Window::<i64>::allocate(world, 2);
    let sum = SystemOperation::sum();
    {
        let all = bytes.lock_all().expect("lock_all");
        let dall = doubles.lock_all().expect("lock_all");
        for size in SIZES {
            let iters = iters_for(size, quick);
            time_at_origin(world, "rma:put", size, iters, || {
                all.put(1, 0, &local[..size]).expect("put");
                all.flush().expect("flush");
            });
            time_at_origin(world, "rma:get", size, iters, || {
                all.get(1, 0, &mut into[..size]).expect("get");
                all.flush().expect("flush");
                // The data must land (as it does inside a C library's MPI_Get): without this
                // the compiler may drop a copy into a buffer nothing reads.
                std::hint::black_box(&mut into);
            });
            time_at_origin(world, "rma:accumulate", size, iters, || {
                dall.accumulate(1, 0, &addends[..size / 8], &sum)
                    .expect("accumulate");
                dall.flush().expect("flush");
            });
        }
    }
    doubles.free().expect("free");
    let iters = iters_for(8, quick);
    {
        let all = longs.lock_all().expect("lock_all");
        time_at_origin(world, "rma:fetch_and_op", 8, iters, || {
            all.fetch_and_op(1, 0, 1, &sum).expect("fetch_and_op");
            all.flush().expect("flush");
        });
        time_at_origin(world, "rma:compare_and_swap", 8, iters, || {
            all.compare_and_swap(1, 1, 0, 1).expect("compare_and_swap");
            all.flush().expect("flush");
        });
    }
    time_at_origin(world, "rma:lock", 0, iters, || {
        drop(longs.lock(1, LockKind::Exclusive).expect("lock"));
    });
    time_at_origin(world, "rma:lock_put", 8, iters, || {
        let epoch = longs.lock(1, LockKind::Exclusive).expect("lock");
        epoch.put(1, 0, &[1]).expect("put");
        epoch.unlock().expect("unlock");
    });
    bytes.free().expect("free");
    longs.free().expect("free");
}

/// Median µs per iteration of `op` at every rank (after a warm-up batch), reported by rank 0.
fn time_at_all(world: &SimpleCommunicator, name: &str, iters: usize, mut op: impl FnMut()) {
    let mut t = [0.0; BATCHES];
    for b in -1..BATCHES as i32 {
        world.barrier();
        let t0 = weft::time();
        for _ in 0..iters {
            op();
        }
        if b >= 0 {
            t[b as usize] = (weft::time() - t0) * 1e6 / iters as f64;
        }
    }
    if world.rank() == 0 {
        result(name, 0, median(&mut t), "us", 3);
    }
}

/// Epoch costs at 2 ranks: a fence, and one post-start-complete-wait epoch carrying one put.
fn epochs(world: &SimpleCommunicator, quick: bool) {
    let win = Window::<i64>::allocate(world, 1);
    let iters = if quick { 200 } else { 2000 };
    {
        let mut f = win.fence().expect("fence");
        time_at_all(world, "rma:fence", iters, || f.fence().expect("fence"));
        f.end().expect("fence");
    }
    let me = world.rank();
    let other = world.group().include(&[1 - me]);
    time_at_all(world, "rma:pscw", iters, || {
        if me == 0 {
            let access = win.start(&other).expect("start");
            access.put(1, 0, &[1]).expect("put");
            access.complete().expect("complete");
        } else {
            win.post(&other).expect("post").wait().expect("wait");
        }
    });
    win.free().expect("free");
}

fn contended(world: &SimpleCommunicator, quick: bool) {
    let n = world.size();
    let win = Window::<i64>::allocate(world, 1);
    let iters = if quick { 200 } else { 2000 };
    let sum = SystemOperation::sum();
    let mut t = [0.0; BATCHES];
    {
        let all = win.lock_all().expect("lock_all");
        for b in -1..BATCHES as i32 {
            world.barrier();
            let t0 = weft::time();
            for _ in 0..iters {
                all.fetch_and_op(0, 0, 1, &sum).expect("fetch_and_op");
                all.flush().expect("flush");
            }
            let mine = weft::time() - t0;
            let mut slowest = 0.0;
            world.all_reduce_into(&mine, &mut slowest, SystemOperation::max());
            if b >= 0 {
                t[b as usize] = (iters * n as usize) as f64 / slowest / 1e6;
            }
        }
    }
    if world.rank() == 0 {
        result("rma:contended", n as usize, median(&mut t), "Mops/s", 3);
    }
    win.free().expect("free");
}

fn main() {
    let universe = weft::initialize().expect("weft initialize");
    let world = universe.world();
    let quick = quick();
    if world.size() == 2 {
        latencies(&world, quick);
        epochs(&world, quick);
    }
    contended(&world, quick);
}
