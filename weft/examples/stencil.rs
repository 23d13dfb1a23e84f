//! Demo: a 2-D Jacobi heat stencil with halo exchange. The grid is split into row blocks,
//! one per rank; every iteration each rank swaps its edge rows with its neighbours. At the
//! end rank 0 gathers the grid, recomputes it serially and checks the two agree bit for bit,
//! then prints the result and the communication figures.
//!
//! Run: `cargo run --release --bin weft -- run -n 4 --release --example stencil`

use weft::point_to_point as p2p;
use weft::traits::*;

const NX: usize = 128; // columns
const NY: usize = 128; // rows
const ITERS: usize = 2000;

/// One Jacobi sweep over `rows` interior rows of `cur` (which has a ghost row above and
/// below), writing `next`. Column 0 and NX-1 are fixed boundaries.
fn sweep(cur: &[f64], next: &mut [f64], rows: usize) {
    for y in 1..=rows {
        for x in 1..NX - 1 {
            let i = y * NX + x;
            next[i] = 0.25 * (cur[i - 1] + cur[i + 1] + cur[i - NX] + cur[i + NX]);
        }
    }
}

/// Initial value of global cell (row gy, column x): a hot top edge, warm sides, cold inside.
fn initial(gy: usize, x: usize) -> f64 {
    if gy == 0 {
        100.0
    } else if x == 0 || x == NX - 1 {
        10.0
    } else {
        0.0
    }
}

fn main() {
    let universe = weft::initialize().expect("weft initialize");
    let world = universe.world();
    let (rank, size) = (world.rank() as usize, world.size() as usize);
    assert!(size <= NY - 2, "too many ranks for {NY} rows");

    // Interior rows 1..NY-1 are divided into blocks; global rows 0 and NY-1 are fixed.
    let inner = NY - 2;
    let first = 1 + rank * inner / size;
    let last = 1 + (rank + 1) * inner / size; // exclusive
    let rows = last - first;
    let mut cur = vec![0.0f64; (rows + 2) * NX];
    for y in 0..rows + 2 {
        for x in 0..NX {
            cur[y * NX + x] = initial(first + y - 1, x);
        }
    }
    let mut next = cur.clone();

    world.barrier();
    let t0 = weft::time();
    let mut comm_time = 0.0;
    for _ in 0..ITERS {
        let tc = weft::time();
        let (top, rest) = cur.split_at_mut(NX);
        let (body, bottom) = rest.split_at_mut(rows * NX);
        if rank > 0 {
            let up = world.process_at_rank(rank as i32 - 1);
            p2p::send_receive_into(&body[..NX], &up, top, &up);
        }
        if rank + 1 < size {
            let down = world.process_at_rank(rank as i32 + 1);
            p2p::send_receive_into(&body[(rows - 1) * NX..], &down, bottom, &down);
        }
        comm_time += weft::time() - tc;
        sweep(&cur, &mut next, rows);
        std::mem::swap(&mut cur, &mut next);
    }
    let elapsed = weft::time() - t0;

    // Gather the interior rows on rank 0 and check against a serial computation.
    if rank == 0 {
        let mut grid: Vec<f64> = (0..NY * NX).map(|i| initial(i / NX, i % NX)).collect();
        grid[first * NX..last * NX].copy_from_slice(&cur[NX..(rows + 1) * NX]);
        for r in 1..size {
            let f = 1 + r * inner / size;
            let l = 1 + (r + 1) * inner / size;
            world
                .process_at_rank(r as i32)
                .receive_into(&mut grid[f * NX..l * NX]);
        }
        let mut a: Vec<f64> = (0..NY * NX).map(|i| initial(i / NX, i % NX)).collect();
        let mut b = a.clone();
        for _ in 0..ITERS {
            sweep(&a, &mut b, NY - 2);
            std::mem::swap(&mut a, &mut b);
        }
        let mismatches = a
            .iter()
            .zip(&grid)
            .filter(|(x, y)| x.to_bits() != y.to_bits())
            .count();
        let total: f64 = grid.iter().sum();
        let centre = grid[(NY / 2) * NX + NX / 2];
        println!("stencil: {NX}x{NY} grid, {ITERS} Jacobi iterations on {size} ranks");
        println!("  heat total {total:.6}, centre cell {centre:.6}");
        println!(
            "  check against a serial run: {}",
            if mismatches == 0 {
                "identical (OK)".to_string()
            } else {
                format!("{mismatches} cells differ (FAILED)")
            }
        );
        let s = universe.stats();
        println!(
            "  rank 0: {:.3} ms in all, {:.3} ms in halo exchange ({:.2} us per iteration)",
            elapsed * 1e3,
            comm_time * 1e3,
            comm_time * 1e6 / ITERS as f64,
        );
        println!(
            "  rank 0 traffic: {} messages / {} bytes sent, {} messages / {} bytes received, {} unexpected, {} waits slept",
            s.sent_msgs, s.sent_bytes, s.recv_msgs, s.recv_bytes, s.unexpected_msgs, s.sleeps
        );
        if mismatches != 0 {
            world.abort(1);
        }
    } else {
        world.process_at_rank(0).send(&cur[NX..(rows + 1) * NX]);
    }
}
