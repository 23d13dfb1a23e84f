//! Streams windows of 64 nonblocking sends of BYTES from rank 0 to rank 1 (the bandwidth
//! benchmark's pattern) for profiling: `weft run -n 2 stream_small [BYTES] [SECONDS]`.

use weft::traits::*;

const WINDOW: usize = 64;

fn main() {
    let bytes: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1024);
    let secs: f64 = std::env::args()
        .nth(2)
        .and_then(|a| a.parse().ok())
        .unwrap_or(2.0);
    let universe = weft::initialize().expect("initialize");
    let world = universe.world();
    let rank = world.rank();
    let peer = world.process_at_rank(1 - rank);
    let mut bufs = vec![0u8; bytes * WINDOW];
    let t0 = weft::time();
    let mut windows = 0u64;
    loop {
        let mut go = [(rank == 0 && weft::time() - t0 < secs) as u8];
        if rank == 0 {
            peer.send_with_tag(&go[..], 9);
        } else {
            peer.receive_into_with_tag(&mut go[..], 9);
        }
        if go[0] == 0 {
            break;
        }
        weft::request::multiple_scope(WINDOW, |scope, coll| {
            if rank == 0 {
                for _ in 0..WINDOW {
                    coll.add(peer.immediate_send_with_tag(scope, &bufs[..bytes], 2));
                }
            } else {
                for chunk in bufs.chunks_mut(bytes) {
                    coll.add(peer.immediate_receive_into_with_tag(scope, chunk, 2));
                }
            }
            let mut out = Vec::with_capacity(WINDOW);
            coll.wait_all(&mut out);
        });
        windows += 1;
    }
    if rank == 0 {
        let dt = weft::time() - t0;
        let mbs = (windows as f64 * (WINDOW * bytes) as f64) / dt / 1e6;
        println!(
            "{bytes} B x {WINDOW}: {windows} windows, {mbs:.0} MB/s, {:.3} us per message",
            dt * 1e6 / (windows as f64 * WINDOW as f64)
        );
    }
}
