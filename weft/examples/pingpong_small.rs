//! A small-message ping-pong between ranks 0 and 1 for profiling the fast path
//! (`perf record` one rank): `weft run -n 2 pingpong_small [BYTES] [SECONDS]`.

use weft::traits::*;

fn main() {
    let bytes: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(0);
    let secs: f64 = std::env::args()
        .nth(2)
        .and_then(|a| a.parse().ok())
        .unwrap_or(2.0);
    let universe = weft::initialize().expect("initialize");
    let world = universe.world();
    let rank = world.rank();
    let mut buf = vec![0u8; bytes];
    let peer = world.process_at_rank(1 - rank);
    let t0 = weft::time();
    let mut n = 0u64;
    loop {
        // Check the clock every 4096 round trips; rank 0 decides when to stop.
        let stop = if n.is_multiple_of(4096) {
            let mut s = [(rank == 0 && weft::time() - t0 > secs) as u8];
            if rank == 0 {
                peer.send(&s[..]);
            } else {
                peer.receive_into(&mut s[..]);
            }
            s[0] == 1
        } else {
            false
        };
        if stop {
            break;
        }
        if rank == 0 {
            peer.send(&buf[..]);
            peer.receive_into(&mut buf[..]);
        } else {
            peer.receive_into(&mut buf[..]);
            peer.send(&buf[..]);
        }
        n += 1;
    }
    if rank == 0 {
        let dt = weft::time() - t0;
        println!(
            "{bytes} B: {n} round trips, {:.3} us one-way",
            dt * 1e6 / n as f64 / 2.0
        );
    }
}
