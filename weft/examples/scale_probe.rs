//! What one rank costs: time to initialize, resident memory and open sockets after talking
//! to `ring` (2 neighbours) or `all` (every rank) peers. Prints one line per rank:
//! `SCALE <rank> <size> <init_ms> <rss_kib> <sockets> <tcp_connections>`.
//! Used by `bench/scale.py`.

use weft::traits::*;

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

fn sockets() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .map(|d| {
            d.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
                .filter(|l| l.to_string_lossy().starts_with("socket:"))
                .count()
        })
        .unwrap_or(0)
}

fn main() {
    let pattern = std::env::args().nth(1).unwrap_or_else(|| "ring".into());
    let t0 = std::time::Instant::now();
    let universe = weft::initialize().expect("initialize");
    let init_ms = t0.elapsed().as_secs_f64() * 1e3;
    let world = universe.world();
    let (rank, size) = (world.rank(), world.size());
    let peers: Vec<i32> = match pattern.as_str() {
        "all" => (0..size).filter(|&p| p != rank).collect(),
        _ if size > 1 => vec![(rank + 1) % size, (rank + size - 1) % size],
        _ => vec![],
    };
    // Each rank sends 1 KiB to each of its peers and receives from them.
    let msg = vec![rank as u8; 1024];
    for round in 0..2 {
        weft::request::scope(|scope| {
            let sends: Vec<_> = peers
                .iter()
                .map(|&p| {
                    world
                        .process_at_rank(p)
                        .immediate_send_with_tag(scope, &msg[..], round)
                })
                .collect();
            for &p in &peers {
                let (got, _) = world.process_at_rank(p).receive_vec_with_tag::<u8>(round);
                assert_eq!(got, vec![p as u8; 1024]);
            }
            for s in sends {
                s.wait();
            }
        });
    }
    world.barrier();
    let conns =
        weft::runtime::inspect(|rt| rt.engine.fabric().tcp().map_or(0, |t| t.connections()));
    println!(
        "SCALE {rank} {size} {init_ms:.2} {} {} {conns}",
        rss_kib(),
        sockets()
    );
}
