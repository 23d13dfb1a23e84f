//! Measures the constants of the collectives' cost model (`weft::coll_model`, documented in
//! docs/collectives.md) on this machine and prints the `WEFT_COLL_MODEL_*` lines to set:
//!
//! ```text
//! weft run -n 2 --release -p weft-cli --example coll_calibrate                 # shm path
//! weft run -n 2 -x WEFT_TRANSPORTS=tcp --release -p weft-cli --example coll_calibrate
//! ```
//!
//! (add `quick` after the example's name for fewer repetitions). Two ranks play ping-pong, by
//! broadcasts from either rank in turn, at sizes from 8 bytes to 4 MiB. For eager messages
//! (up to the path's eager limit) alpha is the one-way time of the smallest messages and beta
//! the slope fitted to the one-way times from 2 KiB less alpha; for rendezvous messages both
//! come from a line fitted to the larger sizes. Fits are least squares in relative error, so
//! mid sizes count as much as large ones. Rank 0 then times the library's own f64 sum (gamma)
//! and a plain copy over 1 MiB vectors. Each time is the median of several runs of its loop
//! (9; 3 when quick): the machine may be shared, and collectives run with whatever load it
//! has. This is a measurement tool: nothing checks a time.

use std::time::Instant;
use weft::coll::op::{combine, Basic, Elements, SysOp};
use weft::traits::*;

const SIZES: &[usize] = &[
    8,
    64,
    512,
    2 << 10,
    8 << 10,
    32 << 10,
    128 << 10,
    512 << 10,
    2 << 20,
    4 << 20,
];

/// The median of several timings: what a collective meets on this machine, loaded or not
/// (the least would be the quiet machine's best case).
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The line `t = a + b·m` (a in ns, b in ps per byte) through `points` (m, t), least squares
/// in relative error; an intercept below `floor` (noise) is raised to it and the slope refitted.
fn weighted_line(points: &[(f64, f64)], floor: f64) -> (f64, f64) {
    let w = |t: f64| 1.0 / (t * t);
    let sw: f64 = points.iter().map(|&(_, t)| w(t)).sum();
    let sm: f64 = points.iter().map(|&(m, t)| w(t) * m).sum();
    let st: f64 = points.iter().map(|&(_, t)| w(t) * t).sum();
    let smm: f64 = points.iter().map(|&(m, t)| w(t) * m * m).sum();
    let smt: f64 = points.iter().map(|&(m, t)| w(t) * m * t).sum();
    let det = sw * smm - sm * sm;
    let (mut a, mut b) = if det > 0.0 {
        ((st * smm - sm * smt) / det, (sw * smt - sm * st) / det)
    } else {
        (floor, 0.0)
    };
    if a < floor {
        a = floor;
        b = (smt - a * sm) / smm.max(f64::MIN_POSITIVE);
    }
    (a, (b * 1000.0).max(0.0))
}

/// Iterations of the ping-pong at `len` bytes: about `budget` bytes moved, at least 4.
fn iterations(len: usize, budget: usize) -> usize {
    (budget / len.max(64)).clamp(4, 2000)
}

fn main() {
    let quick = std::env::args().nth(1).as_deref() == Some("quick");
    let universe = weft::initialize().expect("initialize");
    let world = universe.world();
    if world.size() != 2 {
        if world.rank() == 0 {
            eprintln!("coll_calibrate: run it on 2 ranks (weft run -n 2 ...)");
        }
        std::process::exit(2);
    }
    let me = world.rank();
    let (runs, budget) = if quick { (3, 8 << 20) } else { (9, 32 << 20) };
    let mut one_way = Vec::new();
    for &len in SIZES {
        let mut buf = vec![me as u8; len];
        let iters = iterations(len, budget);
        // Broadcasts from either rank in turn, each waiting for the last: a ping-pong through
        // the collectives' own machinery (immediate forms always run as schedules of
        // messages, never through the node-shared area). The first run warms up.
        let mut samples = Vec::new();
        for run in 0..=runs {
            world.barrier();
            let t0 = Instant::now();
            for i in 0..2 * iters {
                buf[0] = i as u8;
                weft::request::scope(|scope| {
                    world
                        .process_at_rank((i % 2) as i32)
                        .immediate_broadcast_into(scope, &mut buf[..])
                        .wait();
                });
            }
            if run > 0 {
                samples.push(t0.elapsed().as_secs_f64() * 1e9 / (2 * iters) as f64);
            }
        }
        one_way.push((len as f64, median(samples)));
    }
    world.barrier();
    if me != 0 {
        return;
    }
    let tunables = weft::tunables::Tunables::from_env().expect("WEFT_* values parse");
    let (path, eager) = if tunables.transports.shm {
        ("SHM", tunables.eager_limit as f64)
    } else {
        ("TCP", tunables.tcp_eager_limit as f64)
    };
    // The smallest messages are all latency (the least of them: noise only adds).
    let alpha = one_way[..2]
        .iter()
        .map(|p| p.1)
        .fold(f64::INFINITY, f64::min);
    // Eager messages from 2 KiB: relative-error least squares of (t − alpha) ≈ beta·m.
    let (mut num, mut den) = (0.0, 0.0);
    for &(m, t) in one_way.iter().filter(|(m, _)| *m >= 2048.0 && *m <= eager) {
        num += m * (t - alpha) / (t * t);
        den += m * m / (t * t);
    }
    let beta_ps = if den > 0.0 {
        (num / den * 1000.0).max(0.0)
    } else {
        0.0
    };
    // Rendezvous messages: a line t ≈ a + b·m fitted in relative error (weights 1/t²).
    let big: Vec<(f64, f64)> = one_way
        .iter()
        .copied()
        .filter(|(m, _)| *m > eager)
        .collect();
    let (rdv_alpha, rdv_beta_ps) = weighted_line(&big, alpha);

    // Local work over 1 MiB vectors, in ps per byte.
    let len = 1 << 20;
    let input: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
    let mut inout = vec![0u8; len];
    let sum = combine(SysOp::Sum, Elements::Basic(Basic::F64)).expect("f64 sum exists");
    let reps = if quick { 20 } else { 100 };
    let per_byte = |f: &mut dyn FnMut()| {
        let samples = (0..runs)
            .map(|_| {
                let t0 = Instant::now();
                for _ in 0..reps {
                    f();
                }
                t0.elapsed().as_secs_f64() * 1e12 / (reps * len) as f64
            })
            .collect();
        median(samples)
    };
    let gamma_ps = per_byte(&mut || sum(&input, &mut inout));
    let copy_ps = per_byte(&mut || inout.copy_from_slice(&input));
    std::hint::black_box(&inout);

    println!("one-way times (median of {runs} runs):");
    for (m, t) in &one_way {
        println!("  {:>8} bytes  {:>12.0} ns", m, t);
    }
    println!(
        "# set these (path: WEFT_TRANSPORTS={}):",
        tunables.transports
    );
    println!("WEFT_COLL_MODEL_{path}={alpha:.0},{beta_ps:.0},{rdv_alpha:.0},{rdv_beta_ps:.0}");
    println!("WEFT_COLL_MODEL_LOCAL={gamma_ps:.0},{copy_ps:.0}");
}
