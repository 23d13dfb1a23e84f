//! The neighbourhood collectives on simulated ranks, for grids (periodic dimensions of size
//! 1 and 2 among them, where both neighbours are one member), symmetric graphs with repeated
//! edges and self-loops, and distributed graphs with repeated and self edges, against a
//! sequential reference built from the topology alone.

use super::super::tests::{data, run, Bufs};
use super::*;
use crate::comm::process_topology::{dims_create, Cartesian, DistGraph, Graph, ProcessTopology};
use crate::engine::schedule::Area;

/// Every message of a neighbourhood collective: member `from`'s send block `send_idx` lands
/// in member `to`'s receive block `recv_idx`.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
struct Edge {
    from: usize,
    send_idx: usize,
    to: usize,
    recv_idx: usize,
}

/// The reference: what MPI says each block pairs with, for a member-indexed topology
/// (`ts[r]` is member r's). A grid's message towards −1 arrives as the one from +1 and vice
/// versa; otherwise the k-th listing of b among a's destinations pairs with the k-th listing
/// of a among b's sources.
fn reference(ts: &[ProcessTopology]) -> Vec<Edge> {
    let n = ts.len();
    let mut out = Vec::new();
    if let ProcessTopology::Cartesian(g) = &ts[0] {
        for to in 0..n {
            for d in 0..g.ndims() {
                let (below, above) = g.shift("test", to as u32, d as i32, 1).unwrap();
                if let Some(from) = below {
                    out.push(Edge { from: from as usize, send_idx: 2 * d + 1, to, recv_idx: 2 * d });
                }
                if let Some(from) = above {
                    out.push(Edge { from: from as usize, send_idx: 2 * d, to, recv_idx: 2 * d + 1 });
                }
            }
        }
        return out;
    }
    let nbs: Vec<Neighbors> = (0..n).map(|r| ts[r].neighbors(r as u32)).collect();
    for from in 0..n {
        for (send_idx, to) in nbs[from].destinations.iter().enumerate() {
            let to = to.expect("graphs have no missing neighbours") as usize;
            let k = nbs[from].destinations[..send_idx]
                .iter()
                .filter(|&&x| x == Some(to as u32))
                .count();
            let recv_idx = nbs[to]
                .sources
                .iter()
                .enumerate()
                .filter(|(_, &x)| x == Some(from as u32))
                .nth(k)
                .expect("every out-edge has its in-edge")
                .0;
            out.push(Edge { from, send_idx, to, recv_idx });
        }
    }
    out
}

/// Topologies over `n` members.
fn topologies(n: usize) -> Vec<ProcessTopology> {
    let mut ts = Vec::new();
    let grid = |dims: &[i32], periods: &[bool]| {
        ProcessTopology::Cartesian(Cartesian::new("test", dims, periods, n as u32).unwrap())
    };
    for periods in [[true, false], [false, true], [true, true]] {
        let mut d = [0, 0];
        dims_create("test", n as i32, &mut d).unwrap();
        ts.push(grid(&d, &periods));
    }
    let mut d3 = [0, 0, 0];
    dims_create("test", n as i32, &mut d3).unwrap();
    ts.push(grid(&d3, &[true, true, false]));
    ts.push(grid(&[n as i32], &[true]));
    ts.push(grid(&[n as i32], &[false]));
    // A ring with chords, a doubled edge 0–(n−1) and a self-loop at n/2.
    let mut adj: Vec<Vec<i32>> = vec![Vec::new(); n];
    let mut link = |a: usize, b: usize| {
        adj[a].push(b as i32);
        if a != b {
            adj[b].push(a as i32);
        }
    };
    for i in 0..n {
        link(i, (i + 1) % n);
        link(i, (i + 2) % n);
    }
    link(0, n - 1);
    link(n / 2, n / 2);
    let index: Vec<i32> = adj
        .iter()
        .scan(0, |a, v| {
            *a += v.len() as i32;
            Some(*a)
        })
        .collect();
    let g = Graph::new("test", &index, &adj.concat(), n as u32).unwrap();
    assert_eq!(g.asymmetry(), None);
    ts.push(ProcessTopology::Graph(g));
    // Directed edges, some repeated, some to self, in one global order.
    let es: Vec<(usize, usize)> = (0..3 * n)
        .map(|i| ((i * 7 + 3) % n, (i * i + 1) % n))
        .chain([(0, n - 1), (0, n - 1), (n - 1, n - 1)])
        .collect();
    for me in 0..n {
        let sources: Vec<i32> = es.iter().filter(|e| e.1 == me).map(|e| e.0 as i32).collect();
        let dests: Vec<i32> = es.iter().filter(|e| e.0 == me).map(|e| e.1 as i32).collect();
        let d = DistGraph::adjacent("test", (&sources, None), (&dests, None), n as u32).unwrap();
        // A distributed graph differs member by member: keep each one's part.
        ts.push(ProcessTopology::DistGraph(d));
    }
    ts
}

/// The topologies of `topologies(n)`, with the distributed graph's parts gathered: the
/// member-indexed topology of each.
fn each_member(n: usize) -> Vec<Vec<ProcessTopology>> {
    let all = topologies(n);
    let shared = all.len() - n;
    let mut out: Vec<Vec<ProcessTopology>> = all[..shared].iter().map(|t| vec![t.clone(); n]).collect();
    out.push(all[shared..].to_vec());
    out
}

/// Where each block lies in a buffer of consecutive blocks of `lens`.
fn offsets(lens: &[usize]) -> Vec<(usize, usize)> {
    let mut at = 0;
    lens.iter()
        .map(|&l| {
            at += l;
            (at - l, l)
        })
        .collect()
}

const UNTOUCHED: u8 = 0xEE;

#[test]
fn allgather_follows_every_topology() {
    for n in 1..=9 {
        for ts in each_member(n) {
            let refs = reference(&ts);
            for len in [0usize, 5, 100] {
                let nbs: Vec<Neighbors> = (0..n).map(|r| ts[r].neighbors(r as u32)).collect();
                let bufs = (0..n)
                    .map(|r| Bufs {
                        input: data(r, len, 1),
                        output: vec![UNTOUCHED; nbs[r].sources.len() * len],
                    })
                    .collect();
                let out = run(n, bufs, None, |s, m, me| {
                    let nb = &nbs[me];
                    let blocks = offsets(&vec![len; nb.sources.len()]);
                    let dst = Span::new(Area::Output, 0, blocks.len() * len);
                    allgather(s, m, nb, Span::new(Area::Input, 0, len), dst, &blocks);
                });
                let mut want: Vec<Vec<u8>> =
                    (0..n).map(|r| vec![UNTOUCHED; nbs[r].sources.len() * len]).collect();
                for e in &refs {
                    want[e.to][e.recv_idx * len..(e.recv_idx + 1) * len]
                        .copy_from_slice(&data(e.from, len, 1));
                }
                assert_eq!(out, want, "n={n} len={len} {:?}", ts[0]);
            }
        }
    }
}

#[test]
fn alltoall_sends_each_block_to_its_neighbour() {
    for n in 1..=9 {
        for ts in each_member(n) {
            let refs = reference(&ts);
            let nbs: Vec<Neighbors> = (0..n).map(|r| ts[r].neighbors(r as u32)).collect();
            // Uneven blocks: edge (from, send_idx) carries this many bytes (0 to 150).
            let len = |from: usize, k: usize| (from * 37 + k * 53) % 151;
            let send_lens: Vec<Vec<usize>> = (0..n)
                .map(|r| (0..nbs[r].destinations.len()).map(|k| len(r, k)).collect())
                .collect();
            let mut recv_lens: Vec<Vec<usize>> =
                (0..n).map(|r| vec![0; nbs[r].sources.len()]).collect();
            for e in &refs {
                recv_lens[e.to][e.recv_idx] = len(e.from, e.send_idx);
            }
            let bufs = (0..n)
                .map(|r| Bufs {
                    input: data(r, send_lens[r].iter().sum(), 2),
                    output: vec![UNTOUCHED; recv_lens[r].iter().sum()],
                })
                .collect();
            let out = run(n, bufs, None, |s, m, me| {
                let (sb, rb) = (offsets(&send_lens[me]), offsets(&recv_lens[me]));
                let src = Span::new(Area::Input, 0, send_lens[me].iter().sum());
                let dst = Span::new(Area::Output, 0, recv_lens[me].iter().sum());
                alltoall(s, m, &nbs[me], src, &sb, dst, &rb);
            });
            let mut want: Vec<Vec<u8>> =
                (0..n).map(|r| vec![UNTOUCHED; recv_lens[r].iter().sum()]).collect();
            for e in &refs {
                let (so, sl) = offsets(&send_lens[e.from])[e.send_idx];
                let (ro, _) = offsets(&recv_lens[e.to])[e.recv_idx];
                let theirs = data(e.from, send_lens[e.from].iter().sum(), 2);
                want[e.to][ro..ro + sl].copy_from_slice(&theirs[so..so + sl]);
            }
            assert_eq!(out, want, "n={n} {:?}", ts[0]);
        }
    }
}

#[test]
fn a_periodic_pair_of_two_delivers_each_direction_to_its_own_block() {
    // Two members on a periodic ring: each is the other's −1 and +1 neighbour. What member 0
    // sends towards −1 (block 0) is what member 1 receives from +1 (block 1).
    let g = ProcessTopology::Cartesian(Cartesian::new("test", &[2], &[true], 2).unwrap());
    let nbs: Vec<Neighbors> = (0..2).map(|r| g.neighbors(r)).collect();
    let bufs = (0..2)
        .map(|r| Bufs {
            input: vec![10 * r as u8, 10 * r as u8 + 1],
            output: vec![0; 2],
        })
        .collect();
    let out = run(2, bufs, None, |s, m, me| {
        let b = offsets(&[1, 1]);
        let (src, dst) = (Span::new(Area::Input, 0, 2), Span::new(Area::Output, 0, 2));
        alltoall(s, m, &nbs[me], src, &b, dst, &b);
    });
    assert_eq!(out, [vec![11, 10], vec![1, 0]]);
}
