//! Every algorithm on simulated ranks (the engine's fake fabric), for member counts 1 to 9,
//! sizes from empty to many packets, eager and rendezvous, against a sequential reference.
//! Reductions use a non-commutative operation (composition of affine maps) wherever the
//! algorithm allows one, so that an operand out of rank order shows.

use super::algorithm::{self, Order};
use super::{Members, Schedule, Span};
use crate::engine::buffer::{RawBuf, RawBufMut};
use crate::engine::schedule::{Area, Combine};
use crate::engine::testing::{run_until_done, world, FakeFabric};
use crate::engine::Engine;
use crate::tunables::{Algorithm, Tunables};
use std::rc::Rc;

/// One rank's buffers.
pub(super) struct Bufs {
    pub(super) input: Vec<u8>,
    pub(super) output: Vec<u8>,
}

/// Runs one collective on `n` simulated ranks: `build(schedule, members, rank)` adds each
/// rank's steps. Members are world ranks in a shuffled order, so member and world ranks
/// differ. Returns each member's output (indexed by member rank).
pub(super) fn run(
    n: usize,
    bufs: Vec<Bufs>,
    combine: Option<Combine>,
    build: impl Fn(&mut Schedule, &Members, usize),
) -> Vec<Vec<u8>> {
    // Rendezvous above 64 bytes, by single copy; then everything eager in 256-byte packets.
    let a = run_on(n, bufs_clone(&bufs), combine.clone(), &build, 64, true);
    let b = run_on(n, bufs, combine, &build, 1 << 20, false);
    assert_eq!(a, b, "the result depends on the protocol");
    a
}

fn run_on(
    n: usize,
    mut bufs: Vec<Bufs>,
    combine: Option<Combine>,
    build: &impl Fn(&mut Schedule, &Members, usize),
    eager: usize,
    single_copy: bool,
) -> Vec<Vec<u8>> {
    // Reversed and rotated by one: member and world ranks differ.
    let world_ranks: Vec<u32> = (0..n).map(|i| ((2 * n - i) % n) as u32).collect();
    let mut es: Vec<Engine<FakeFabric>> = world(n as u32, 4, 256, eager, single_copy);
    // Scratch comes from a pool: make a step that reads it before writing it show.
    es.iter_mut().for_each(|e| e.poison_scratch_pool());
    let mut hs = Vec::new();
    for (me, b) in bufs.iter_mut().enumerate() {
        let m = Members {
            world: &world_ranks,
            me,
            nodes: 1,
            node_of: &[],
        };
        // SAFETY: the buffers live in `bufs` until after `run_until_done` below, and are not
        // touched until every schedule has completed.
        let (input, output) = unsafe { (RawBuf::new(&b.input), RawBufMut::new(&mut b.output)) };
        let mut s = Schedule::new("test", 1, -(1 << 16))
            .with_input(input)
            .with_output(output);
        if let Some(c) = &combine {
            s = s.with_combine(c.clone());
        }
        build(&mut s, &m, me);
        let w = world_ranks[me] as usize;
        // SAFETY: as above.
        let h = unsafe { es[w].start_schedule(s) };
        hs.push((w, h));
    }
    run_until_done(&mut es, &hs, 200_000);
    for &(w, h) in &hs {
        es[w].wait(h).expect("the schedule succeeds");
        assert_eq!(es[w].live_requests(), 0, "rank {w} leaks requests");
        assert_eq!(es[w].running_schedules(), 0);
    }
    bufs.into_iter().map(|b| b.output).collect()
}

pub(super) fn data(rank: usize, len: usize, salt: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(7) ^ (rank as u8).wrapping_mul(41) ^ salt)
        .collect()
}

/// Affine maps x ↦ a·x + b on u32 (wrapping), 8 bytes each; composition is associative and
/// not commutative: `inout = input ∘ inout`.
pub(super) fn affine() -> Combine {
    Rc::new(|input: &[u8], inout: &mut [u8]| {
        for (i, o) in input.chunks_exact(8).zip(inout.chunks_exact_mut(8)) {
            let (a1, b1) = pair(i);
            let (a2, b2) = pair(o);
            let a = a1.wrapping_mul(a2);
            let b = a1.wrapping_mul(b2).wrapping_add(b1);
            o[..4].copy_from_slice(&a.to_ne_bytes());
            o[4..].copy_from_slice(&b.to_ne_bytes());
        }
    })
}

fn pair(b: &[u8]) -> (u32, u32) {
    (
        u32::from_ne_bytes(b[..4].try_into().unwrap()),
        u32::from_ne_bytes(b[4..8].try_into().unwrap()),
    )
}

/// Wrapping u32 sum.
fn sum() -> Combine {
    Rc::new(|input: &[u8], inout: &mut [u8]| {
        for (i, o) in input.chunks_exact(4).zip(inout.chunks_exact_mut(4)) {
            let v = u32::from_ne_bytes(i.try_into().unwrap())
                .wrapping_add(u32::from_ne_bytes((&*o).try_into().unwrap()));
            o.copy_from_slice(&v.to_ne_bytes());
        }
    })
}

/// `inputs[0] ∘ inputs[1] ∘ …` of the members `range`.
pub(super) fn fold(c: &Combine, inputs: &[Vec<u8>]) -> Vec<u8> {
    let mut acc = inputs.last().unwrap().clone();
    for x in inputs[..inputs.len() - 1].iter().rev() {
        c(x, &mut acc);
    }
    acc
}

fn forced(set: impl Fn(&mut Tunables)) -> Tunables {
    let mut t = Tunables::defaults();
    set(&mut t);
    t
}

const SIZES: &[usize] = &[0, 8, 24, 200, 1000];

fn span(area: Area, len: usize) -> Span {
    Span::new(area, 0, len)
}

#[test]
fn barrier_completes_for_every_member_count() {
    for n in 1..=9 {
        let bufs = (0..n)
            .map(|_| Bufs {
                input: vec![],
                output: vec![],
            })
            .collect();
        run(n, bufs, None, |s, m, _| algorithm::barrier(s, m));
    }
}

#[test]
fn barrier_waits_for_the_last_member() {
    // Rank 2 starts late: nobody's barrier may complete before it has started.
    let n = 5;
    let world_ranks: Vec<u32> = (0..n).collect();
    let mut es = world(n, 4, 256, 64, true);
    let mut hs = Vec::new();
    for (me, e) in es.iter_mut().enumerate() {
        if me == 2 {
            continue;
        }
        let mut s = Schedule::new("barrier", 1, -(1 << 16));
        algorithm::barrier(
            &mut s,
            &Members {
                world: &world_ranks,
                me,
                nodes: 1,
                node_of: &[],
            },
        );
        // SAFETY: no buffers.
        hs.push((me, unsafe { e.start_schedule(s) }));
    }
    for _ in 0..1000 {
        for e in es.iter_mut() {
            e.progress();
        }
    }
    for &(r, h) in &hs {
        assert!(!es[r].is_done(h), "rank {r} left the barrier before rank 2 came");
    }
    let mut s = Schedule::new("barrier", 1, -(1 << 16));
    algorithm::barrier(
        &mut s,
        &Members {
            world: &world_ranks,
            me: 2,
            nodes: 1,
            node_of: &[],
        },
    );
    // SAFETY: no buffers.
    hs.push((2, unsafe { es[2].start_schedule(s) }));
    run_until_done(&mut es, &hs, 10_000);
}

#[test]
fn broadcast_every_algorithm_root_and_size() {
    for name in ["binomial", "chain", "scatter_allgather", "linear"] {
        let t = forced(|t| {
            t.coll_bcast = Algorithm(Some(name));
            t.coll_segment = 96;
        });
        for n in 1..=9 {
            for root in [0, n / 2, n - 1] {
                for &len in SIZES {
                    broadcast_checked(name, n, root, len, |s, m| {
                        algorithm::bcast(s, m, &t, root, span(Area::Output, len))
                    });
                }
            }
        }
    }
}

/// Each member's buffers for a scatter of `whole` (at `root`) in `len`-byte blocks.
fn scatter_bufs(whole: &[u8], n: usize, root: usize, len: usize) -> Vec<Bufs> {
    (0..n)
        .map(|r| Bufs {
            input: if r == root { whole.to_vec() } else { vec![] },
            output: vec![0; len],
        })
        .collect()
}

/// Each member's buffers for a reduction of `inputs` (in place: the data in the output), and
/// the area its input is read from.
fn reduction_bufs(inputs: &[Vec<u8>], in_place: bool) -> (Vec<Bufs>, Area) {
    let bufs = inputs
        .iter()
        .map(|i| Bufs {
            input: if in_place { vec![] } else { i.clone() },
            output: if in_place { i.clone() } else { vec![0; i.len()] },
        })
        .collect();
    (bufs, if in_place { Area::Output } else { Area::Input })
}

/// `m` as if its members were on `nodes` nodes, member j on `node_of[j]`.
fn placed<'a>(m: &Members<'a>, nodes: usize, node_of: &'a [u32]) -> Members<'a> {
    Members {
        nodes,
        node_of,
        ..*m
    }
}

/// Broadcasts `len` bytes from `root` on `n` simulated ranks with `build` and checks that
/// every rank got them.
fn broadcast_checked(label: &str, n: usize, root: usize, len: usize, build: impl Fn(&mut Schedule, &Members)) {
    let want = data(root, len, 1);
    let bufs = (0..n)
        .map(|r| Bufs {
            input: vec![],
            output: if r == root { want.clone() } else { vec![0; len] },
        })
        .collect();
    let out = run(n, bufs, None, |s, m, _| build(s, m));
    for (r, o) in out.iter().enumerate() {
        assert_eq!(o, &want, "{label}: n={n} root={root} len={len} rank {r}");
    }
}

/// Node placements of `n` members: blocks of three, round robin over two nodes, and one
/// node of a single member among larger ones. Each as (nodes, node of each member).
fn placements(n: usize) -> Vec<(usize, Vec<u32>)> {
    let mut out = vec![
        (n.div_ceil(3), (0..n).map(|j| (j / 3) as u32).collect()),
        (2.min(n), (0..n).map(|j| (j % 2) as u32).collect()),
    ];
    if n >= 3 {
        // Member n/2 alone on node 1; the others split around it on nodes 0 and 2.
        let node = |j: usize| match j.cmp(&(n / 2)) {
            std::cmp::Ordering::Less => 0,
            std::cmp::Ordering::Equal => 1,
            std::cmp::Ordering::Greater => 2,
        };
        let nodes = if n / 2 + 1 < n { 3 } else { 2 };
        out.push((nodes, (0..n).map(node).collect()));
    }
    out
}

#[test]
fn a_broadcast_across_nodes_goes_through_one_leader_per_node() {
    for forced in [None, Some("hierarchical")] {
        let t = forced_or_auto(forced);
        for n in 2..=9 {
            for (nodes, node_of) in placements(n) {
                for root in [0, n / 2, n - 1] {
                    for &len in SIZES {
                        let label = format!("{forced:?} on {node_of:?}");
                        broadcast_checked(&label, n, root, len, |s, m| {
                            let placed = placed(m, nodes, &node_of);
                            if nodes > 1 && nodes < n {
                                let span = span(Area::Output, len);
                                assert_eq!(
                                    algorithm::bcast_algorithm(&placed, &t, root, span),
                                    "hierarchical"
                                );
                            }
                            algorithm::bcast(s, &placed, &t, root, span(Area::Output, len))
                        });
                    }
                }
            }
        }
    }
}

#[test]
fn reduce_and_allreduce_across_nodes_combine_each_node_at_its_leader() {
    let t = Tunables::defaults();
    let c = sum();
    for n in 2..=9 {
        for (nodes, node_of) in placements(n) {
            for count in [0, 1, 5, 301] {
                let len = count * 4;
                let inputs: Vec<Vec<u8>> = (0..n).map(|r| data(r, len, 6)).collect();
                let want = fold(&c, &inputs);
                let aware = nodes > 1 && nodes < n;
                for root in [0, n / 2, n - 1] {
                    let bufs = reduction_bufs(&inputs, false).0;
                    let out = run(n, bufs, Some(c.clone()), |s, m, _| {
                        let m = placed(m, nodes, &node_of);
                        let dst = if m.me == root { Area::Output } else { Area::Input };
                        algorithm::reduce(
                            s,
                            &m,
                            &t,
                            root,
                            span(Area::Input, len),
                            span(dst, len),
                            Order::Commutative,
                        )
                    });
                    assert_eq!(out[root], want, "reduce n={n} {node_of:?} root={root} count={count}");
                }
                for in_place in [false, true] {
                    let (bufs, src) = reduction_bufs(&inputs, in_place);
                    let out = run(n, bufs, Some(c.clone()), |s, m, _| {
                        let m = placed(m, nodes, &node_of);
                        let name = algorithm::allreduce_algorithm(
                            &m,
                            &t,
                            span(src, len),
                            4,
                            Order::Commutative,
                        );
                        assert_eq!(name == "hierarchical", aware, "{node_of:?}");
                        algorithm::allreduce(
                            s,
                            &m,
                            &t,
                            span(src, len),
                            span(Area::Output, len),
                            4,
                            Order::Commutative,
                        )
                    });
                    for (r, o) in out.iter().enumerate() {
                        assert_eq!(o, &want, "allreduce n={n} {node_of:?} count={count} rank {r}");
                    }
                }
            }
        }
    }
}

#[test]
fn a_reduce_scatter_across_nodes_combines_each_node_at_its_leader() {
    let t = Tunables::defaults();
    for n in 2..=9 {
        for (nodes, node_of) in placements(n) {
            let aware = nodes > 1 && nodes < n;
            // Equal blocks (the block form), and member j's of j % 3 elements.
            for lens in [vec![20; n], (0..n).map(|j| 4 * (j % 3)).collect()] {
                let label = format!("n={n} {node_of:?}");
                reduce_scatter_checked(&label, &lens, &sum(), |s, m, src, block, dst| {
                    let m = placed(m, nodes, &node_of);
                    let name = algorithm::reduce_scatter_algorithm(&m, &t, src, Order::Commutative);
                    assert_eq!(name == "hierarchical", aware, "{node_of:?}");
                    algorithm::reduce_scatter(s, &m, &t, src, block, dst, Order::Commutative)
                });
            }
        }
    }
}

#[test]
fn scan_and_exclusive_scan_in_rank_order_on_one_node_and_across_nodes() {
    // An operation that does not commute: an operand (or a node's reduction) out of rank
    // order would show.
    let t = Tunables::defaults();
    let c = affine();
    for n in 1..=9 {
        // One node; the usual placements; and blocks of three numbered from the last (node
        // numbers need not follow ranks).
        let mut cases = vec![(1, Vec::new())];
        cases.extend(placements(n));
        let last_node = (n - 1) / 3;
        cases.push((n.div_ceil(3), (0..n).map(|j| (last_node - j / 3) as u32).collect()));
        for (nodes, node_of) in cases {
            let runs = node_of.windows(2).filter(|w| w[0] != w[1]).count() + 1;
            let aware = nodes > 1 && nodes < n && runs == nodes;
            for count in [0, 1, 7] {
                let len = count * 8;
                let inputs: Vec<Vec<u8>> = (0..n).map(|r| data(r, len, 11)).collect();
                for exclusive in [false, true] {
                    let bufs = inputs
                        .iter()
                        .map(|i| Bufs {
                            input: i.clone(),
                            output: vec![0x55; len],
                        })
                        .collect();
                    let out = run(n, bufs, Some(c.clone()), |s, m, _| {
                        let m = placed(m, nodes, &node_of);
                        assert_eq!(algorithm::scan_algorithm(&m) == "hierarchical", aware, "{node_of:?}");
                        algorithm::scan(s, &m, &t, span(Area::Input, len), span(Area::Output, len), exclusive)
                    });
                    for (r, o) in out.iter().enumerate() {
                        let upto = if exclusive { r } else { r + 1 };
                        let what = format!("n={n} {node_of:?} count={count} excl={exclusive} rank {r}");
                        if upto == 0 {
                            assert!(o.iter().all(|&b| b == 0x55), "{what}: exscan rank 0 output touched");
                        } else {
                            assert_eq!(o, &fold(&c, &inputs[..upto]), "{what}");
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn gather_scatter_and_allgather_across_nodes_go_through_the_leaders() {
    let t = Tunables::defaults();
    for n in 2..=9 {
        for (nodes, node_of) in placements(n) {
            let aware = nodes > 1 && nodes < n;
            for &len in &[0, 1, 24, 200] {
                let blocks: Vec<Vec<u8>> = (0..n).map(|r| data(r, len, 7)).collect();
                let whole: Vec<u8> = blocks.concat();
                for root in [0, n / 2, n - 1] {
                    // Gather.
                    let bufs = (0..n)
                        .map(|r| Bufs {
                            input: blocks[r].clone(),
                            output: vec![0; if r == root { n * len } else { 0 }],
                        })
                        .collect();
                    let out = run(n, bufs, None, |s, m, _| {
                        let m = placed(m, nodes, &node_of);
                        let src = span(Area::Input, len);
                        let dst = span(Area::Output, if m.me == root { n * len } else { 0 });
                        let name = algorithm::gather_algorithm(&m, &t, root, src, dst);
                        assert_eq!(name == "hierarchical", aware);
                        algorithm::gather(s, &m, &t, root, src, dst)
                    });
                    assert_eq!(out[root], whole, "gather n={n} {node_of:?} root={root} len={len}");
                    // Scatter.
                    let bufs = scatter_bufs(&whole, n, root, len);
                    let out = run(n, bufs, None, |s, m, _| {
                        let m = placed(m, nodes, &node_of);
                        let src = span(Area::Input, if m.me == root { n * len } else { 0 });
                        let dst = span(Area::Output, len);
                        assert_eq!(
                            algorithm::scatter_algorithm(&m, &t, root, src, dst) == "hierarchical",
                            aware
                        );
                        algorithm::scatter(s, &m, &t, root, src, dst)
                    });
                    for (r, o) in out.iter().enumerate() {
                        assert_eq!(o, &blocks[r], "scatter n={n} {node_of:?} root={root} len={len} rank {r}");
                    }
                }
                // Allgather.
                let bufs = (0..n)
                    .map(|r| Bufs {
                        input: blocks[r].clone(),
                        output: vec![0; n * len],
                    })
                    .collect();
                let out = run(n, bufs, None, |s, m, _| {
                    let m = placed(m, nodes, &node_of);
                    let src = span(Area::Input, len);
                    assert_eq!(algorithm::allgather_algorithm(&m, &t, src) == "hierarchical", aware);
                    algorithm::allgather(s, &m, &t, src, span(Area::Output, n * len))
                });
                for (r, o) in out.iter().enumerate() {
                    assert_eq!(o, &whole, "allgather n={n} {node_of:?} len={len} rank {r}");
                }
            }
        }
    }
}

#[test]
fn large_gathers_and_scatters_across_nodes_go_straight_to_the_root() {
    // Node-aware, each block would still cross once, plus a hop and a reordering copy.
    let t = Tunables::defaults();
    let world: Vec<u32> = (0..4).collect();
    let node_of = [0, 0, 1, 1];
    for me in 0..4 {
        let m = Members {
            world: &world,
            me,
            nodes: 2,
            node_of: &node_of,
        };
        for (len, aware) in [(1024, true), (1 << 20, false)] {
            let block = span(Area::Input, len);
            let all = span(Area::Output, 4 * len);
            let g = algorithm::gather_algorithm(&m, &t, 0, block, all);
            let sc = algorithm::scatter_algorithm(&m, &t, 0, all, block);
            assert_eq!((g == "hierarchical", sc == "hierarchical"), (aware, aware), "{len}");
        }
        // A forced node-aware form still runs at any size.
        let forced = forced(|t| t.coll_gather = Algorithm(Some("hierarchical")));
        let big = span(Area::Input, 1 << 20);
        assert_eq!(
            algorithm::gather_algorithm(&m, &forced, 0, big, big),
            "hierarchical"
        );
    }
}

/// Default tunables, or with the broadcast forced to `name`.
fn forced_or_auto(name: Option<&'static str>) -> Tunables {
    match name {
        Some(name) => forced(|t| t.coll_bcast = Algorithm(Some(name))),
        None => Tunables::defaults(),
    }
}

#[test]
fn reduce_in_rank_order_to_every_root() {
    let c = affine();
    for n in 1..=9 {
        for root in [0, n / 2, n - 1] {
            for count in [0, 1, 3, 40] {
                let len = count * 8;
                let inputs: Vec<Vec<u8>> = (0..n).map(|r| data(r, len, 2)).collect();
                let want = fold(&c, &inputs);
                let bufs: Vec<Bufs> = inputs
                    .iter()
                    .map(|i| Bufs {
                        input: i.clone(),
                        output: vec![0xee; len],
                    })
                    .collect();
                for order in [Order::RankOrder] {
                    let out = run(n, bufs_clone(&bufs), Some(c.clone()), |s, m, _| {
                        algorithm::reduce(
                            s,
                            m,
                            &Tunables::defaults(),
                            root,
                            span(Area::Input, len),
                            span(Area::Output, len),
                            order,
                        )
                    });
                    assert_eq!(out[root], want, "n={n} root={root} count={count}");
                    for (r, o) in out.iter().enumerate() {
                        if r != root {
                            assert!(o.iter().all(|&b| b == 0xee), "rank {r} output touched");
                        }
                    }
                }
            }
        }
    }
}

fn bufs_clone(b: &[Bufs]) -> Vec<Bufs> {
    b.iter()
        .map(|b| Bufs {
            input: b.input.clone(),
            output: b.output.clone(),
        })
        .collect()
}

#[test]
fn commutative_reduce_to_every_root() {
    let c = sum();
    for n in 1..=9 {
        for root in 0..n {
            let len = 4 * 30;
            let inputs: Vec<Vec<u8>> = (0..n).map(|r| data(r, len, 3)).collect();
            let want = fold(&c, &inputs);
            let bufs = reduction_bufs(&inputs, false).0;
            let out = run(n, bufs, Some(c.clone()), |s, m, _| {
                algorithm::reduce(
                    s,
                    m,
                    &Tunables::defaults(),
                    root,
                    span(Area::Input, len),
                    span(Area::Output, len),
                    Order::Commutative,
                )
            });
            assert_eq!(out[root], want, "n={n} root={root}");
        }
    }
}

#[test]
fn allreduce_every_algorithm() {
    for (name, order) in [
        ("recursive_doubling", Order::RankOrder),
        ("rabenseifner", Order::Commutative),
        ("ring", Order::Commutative),
    ] {
        let t = forced(|t| t.coll_allreduce = Algorithm(Some(name)));
        let (c, elem) = if order == Order::RankOrder {
            (affine(), 8)
        } else {
            (sum(), 4)
        };
        for n in 1..=9 {
            for count in [0, 1, 5, 9, 64, 301] {
                let len = count * elem;
                let inputs: Vec<Vec<u8>> = (0..n).map(|r| data(r, len, 4)).collect();
                let want = fold(&c, &inputs);
                for in_place in [false, true] {
                    let (bufs, src) = reduction_bufs(&inputs, in_place);
                    let out = run(n, bufs, Some(c.clone()), |s, m, _| {
                        algorithm::allreduce(
                            s,
                            m,
                            &t,
                            span(src, len),
                            span(Area::Output, len),
                            elem,
                            order,
                        )
                    });
                    for (r, o) in out.iter().enumerate() {
                        assert_eq!(o, &want, "{name} n={n} count={count} rank {r}");
                    }
                }
            }
        }
    }
}

#[test]
fn allreduce_of_floats_is_bit_identical_everywhere() {
    let c: Combine = Rc::new(|input: &[u8], inout: &mut [u8]| {
        for (i, o) in input.chunks_exact(8).zip(inout.chunks_exact_mut(8)) {
            let v = f64::from_ne_bytes(i.try_into().unwrap())
                + f64::from_ne_bytes((&*o).try_into().unwrap());
            o.copy_from_slice(&v.to_ne_bytes());
        }
    });
    for name in ["recursive_doubling", "rabenseifner", "ring"] {
        let t = forced(|t| t.coll_allreduce = Algorithm(Some(name)));
        for n in [3, 6, 7] {
            let count = 50;
            let bufs = (0..n)
                .map(|r| Bufs {
                    input: (0..count)
                        .flat_map(|i| (1.0 / (r * 7 + i + 1) as f64 * 1e10f64.powi(r as i32 % 3)).to_ne_bytes())
                        .collect(),
                    output: vec![0; count * 8],
                })
                .collect();
            let out = run(n, bufs, Some(c.clone()), |s, m, _| {
                algorithm::allreduce(
                    s,
                    m,
                    &t,
                    span(Area::Input, count * 8),
                    span(Area::Output, count * 8),
                    8,
                    Order::Commutative,
                )
            });
            for o in &out {
                assert_eq!(o, &out[0], "{name} n={n}: ranks differ");
            }
        }
    }
}

#[test]
fn gather_and_scatter_every_algorithm_and_root() {
    for name in ["binomial", "linear"] {
        let t = forced(|t| {
            t.coll_gather = Algorithm(Some(name));
            t.coll_scatter = Algorithm(Some(name));
        });
        for n in 1..=9 {
            for root in [0, 1 % n, n - 1] {
                for &len in SIZES {
                    let inputs: Vec<Vec<u8>> = (0..n).map(|r| data(r, len, 5)).collect();
                    let all: Vec<u8> = inputs.concat();
                    let bufs = inputs
                        .iter()
                        .map(|i| Bufs {
                            input: i.clone(),
                            output: vec![0; n * len],
                        })
                        .collect();
                    let out = run(n, bufs, None, |s, m, _| {
                        algorithm::gather(
                            s,
                            m,
                            &t,
                            root,
                            span(Area::Input, len),
                            span(Area::Output, n * len),
                        )
                    });
                    assert_eq!(out[root], all, "gather {name} n={n} root={root} len={len}");
                    let bufs = scatter_bufs(&all, n, root, len);
                    let out = run(n, bufs, None, |s, m, me| {
                        let src = if me == root { n * len } else { 0 };
                        algorithm::scatter(
                            s,
                            m,
                            &t,
                            root,
                            span(Area::Input, src),
                            span(Area::Output, len),
                        )
                    });
                    for (r, o) in out.iter().enumerate() {
                        assert_eq!(o, &inputs[r], "scatter {name} n={n} root={root} rank {r}");
                    }
                }
            }
        }
    }
}

#[test]
fn allgather_every_algorithm() {
    for &name in super::model::Collective::Allgather.algorithms() {
        let t = forced(|t| t.coll_allgather = Algorithm(Some(name)));
        for n in 1..=9 {
            for &len in SIZES {
                let inputs: Vec<Vec<u8>> = (0..n).map(|r| data(r, len, 6)).collect();
                let all: Vec<u8> = inputs.concat();
                let bufs = inputs
                    .iter()
                    .map(|i| Bufs {
                        input: i.clone(),
                        output: vec![0; n * len],
                    })
                    .collect();
                let out = run(n, bufs, None, |s, m, _| {
                    algorithm::allgather(s, m, &t, span(Area::Input, len), span(Area::Output, n * len))
                });
                for (r, o) in out.iter().enumerate() {
                    assert_eq!(o, &all, "{name} n={n} len={len} rank {r}");
                }
            }
        }
    }
}

#[test]
fn alltoall_with_uneven_blocks_every_algorithm() {
    for name in ["pairwise", "scattered"] {
        let t = forced(|t| t.coll_alltoall = Algorithm(Some(name)));
        for n in 1..=9 {
            // Member i sends (i + j) % 4 * 10 bytes to member j.
            let size = |i: usize, j: usize| (i + j) % 4 * 10;
            let layout = |sizes: Vec<usize>| {
                let mut off = 0;
                sizes
                    .into_iter()
                    .map(|l| {
                        let b = (off, l);
                        off += l + 3; // gaps, which must stay untouched
                        b
                    })
                    .collect::<Vec<_>>()
            };
            let sends: Vec<Vec<(usize, usize)>> =
                (0..n).map(|i| layout((0..n).map(|j| size(i, j)).collect())).collect();
            let recvs: Vec<Vec<(usize, usize)>> =
                (0..n).map(|j| layout((0..n).map(|i| size(i, j)).collect())).collect();
            let total = |b: &[(usize, usize)]| b.last().map_or(0, |l| l.0 + l.1);
            let bufs = (0..n)
                .map(|i| Bufs {
                    input: data(i, total(&sends[i]), 7),
                    output: vec![0xaa; total(&recvs[i])],
                })
                .collect::<Vec<_>>();
            let inputs: Vec<Vec<u8>> = bufs.iter().map(|b| b.input.clone()).collect();
            let out = run(n, bufs, None, |s, m, me| {
                algorithm::alltoall(
                    s,
                    m,
                    &t,
                    span(Area::Input, total(&sends[me])),
                    &sends[me],
                    span(Area::Output, total(&recvs[me])),
                    &recvs[me],
                    None,
                )
            });
            for j in 0..n {
                for i in 0..n {
                    let (so, sl) = sends[i][j];
                    let (ro, rl) = recvs[j][i];
                    assert_eq!(&out[j][ro..ro + rl], &inputs[i][so..so + sl], "{name} n={n} {i}->{j}");
                    if i + 1 < n {
                        assert_eq!(&out[j][ro + rl..ro + rl + 3], &[0xaa; 3], "{name} gap touched");
                    }
                }
            }
        }
    }
}

#[test]
fn an_all_to_all_across_nodes_goes_through_the_leaders_while_it_pays() {
    for forced_name in [None, Some("hierarchical")] {
        let t = forced(|t| t.coll_alltoall = Algorithm(forced_name));
        for n in 2..=9 {
            for (nodes, node_of) in placements(n) {
                let aware = nodes > 1 && nodes < n;
                for &len in &[0, 1, 24, 200] {
                    let blocks: Vec<(usize, usize)> = (0..n).map(|j| (j * len, len)).collect();
                    let bufs = (0..n)
                        .map(|i| Bufs {
                            input: data(i, n * len, 11),
                            output: vec![0xaa; n * len],
                        })
                        .collect::<Vec<_>>();
                    let inputs: Vec<Vec<u8>> = bufs.iter().map(|b| b.input.clone()).collect();
                    let out = run(n, bufs, None, |s, m, _| {
                        let m = placed(m, nodes, &node_of);
                        let (src, dst) = (span(Area::Input, n * len), span(Area::Output, n * len));
                        let name = algorithm::alltoall_algorithm(&m, &t, &blocks, &blocks, Some(len));
                        assert_eq!(name == "hierarchical", aware && len > 0, "n={n} {node_of:?} len={len}");
                        algorithm::alltoall(s, &m, &t, src, &blocks, dst, &blocks, Some(len))
                    });
                    for (j, got) in out.iter().enumerate() {
                        for (i, input) in inputs.iter().enumerate() {
                            let (to, from) = (i * len, j * len);
                            assert_eq!(
                                got[to..to + len],
                                input[from..from + len],
                                "{forced_name:?} n={n} {node_of:?} len={len}: {i} -> {j}"
                            );
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn large_or_uneven_all_to_alls_across_nodes_stay_flat() {
    let t = Tunables::defaults();
    let world: Vec<u32> = (0..4).collect();
    let node_of = [0, 0, 1, 1];
    let m = Members {
        world: &world,
        me: 1,
        nodes: 2,
        node_of: &node_of,
    };
    let equal = |len: usize| (0..4).map(|j| (j * len, len)).collect::<Vec<_>>();
    let small = equal(64);
    assert_eq!(algorithm::alltoall_algorithm(&m, &t, &small, &small, Some(64)), "hierarchical");
    let big = equal(1 << 20);
    assert_ne!(algorithm::alltoall_algorithm(&m, &t, &big, &big, Some(1 << 20)), "hierarchical");
    // Forced, it still needs equal blocks one after another.
    let forced = forced(|t| t.coll_alltoall = Algorithm(Some("hierarchical")));
    assert_eq!(algorithm::alltoall_algorithm(&m, &forced, &big, &big, Some(1 << 20)), "hierarchical");
    assert_ne!(algorithm::alltoall_algorithm(&m, &forced, &small, &small, None), "hierarchical");
    let gaps: Vec<(usize, usize)> = (0..4).map(|j| (j * 70, 64)).collect();
    assert_ne!(algorithm::alltoall_algorithm(&m, &forced, &gaps, &small, Some(64)), "hierarchical");
}

#[test]
fn a_streaming_copy_moves_the_same_bytes_as_a_plain_one_at_any_offset() {
    let len = 10_000;
    for (from, to) in [(0, 0), (1, 3), (17, 64), (63, 5)] {
        let bufs = vec![Bufs {
            input: data(0, len + 64, 3),
            output: vec![0xaa; len + 64],
        }];
        let input = bufs[0].input.clone();
        let out = run(1, bufs, None, |s, _, _| {
            s.copy_streaming(span(Area::Input, len + 64).sub(from, len), span(Area::Output, len + 64).sub(to, len))
        });
        assert_eq!(&out[0][to..to + len], &input[from..from + len], "from {from} to {to}");
        assert!(out[0][..to].iter().chain(&out[0][to + len..]).all(|&b| b == 0xaa), "outside touched");
    }
}

#[test]
fn an_all_to_all_into_a_buffer_that_streams_its_own_block_moves_every_block() {
    let block = super::alltoall::STREAM_OWN_FROM / 2 + 8;
    for name in ["pairwise", "scattered"] {
        let t = forced(|t| t.coll_alltoall = Algorithm(Some(name)));
        let blocks = vec![(0, block), (block, block)];
        let bufs = (0..2)
            .map(|i| Bufs {
                input: data(i, 2 * block, 9),
                output: vec![0; 2 * block],
            })
            .collect::<Vec<_>>();
        let inputs: Vec<Vec<u8>> = bufs.iter().map(|b| b.input.clone()).collect();
        let out = run(2, bufs, None, |s, m, _| {
            let whole = |a| span(a, 2 * block);
            algorithm::alltoall(s, m, &t, whole(Area::Input), &blocks, whole(Area::Output), &blocks, None)
        });
        for (j, got) in out.iter().enumerate() {
            for (i, input) in inputs.iter().enumerate() {
                // Block i of member j's output is block j of member i's input.
                let (to, from) = (i * block, j * block);
                assert!(got[to..to + block] == input[from..from + block], "{name} {i}->{j}");
            }
        }
    }
}

/// Runs a reduce-scatter of blocks of `lens` bytes (member j's block `lens[j]` long, back to
/// back in every member's input) on `lens.len()` simulated ranks with `build(schedule,
/// members, src, blocks, dst)`, and checks every member's block against `c`'s fold.
fn reduce_scatter_checked(
    label: &str,
    lens: &[usize],
    c: &Combine,
    build: impl Fn(&mut Schedule, &Members, Span, &[(usize, usize)], Span),
) {
    let n = lens.len();
    let mut block = Vec::new();
    let mut off = 0;
    for &len in lens {
        block.push((off, len));
        off += len;
    }
    let inputs: Vec<Vec<u8>> = (0..n).map(|r| data(r, off, 8)).collect();
    let want = fold(c, &inputs);
    let bufs = (0..n)
        .map(|r| Bufs {
            input: inputs[r].clone(),
            output: vec![0; lens[r]],
        })
        .collect();
    let out = run(n, bufs, Some(c.clone()), |s, m, me| {
        build(s, m, span(Area::Input, off), &block, span(Area::Output, lens[me]))
    });
    for (r, o) in out.iter().enumerate() {
        let (at, len) = block[r];
        assert_eq!(o[..], want[at..at + len], "{label} lens={lens:?} rank {r}");
    }
}

#[test]
fn reduce_scatter_every_algorithm() {
    for (name, order) in [("pairwise", Order::Commutative), ("by_reduce", Order::RankOrder)] {
        let t = forced(|t| t.coll_reduce_scatter = Algorithm(Some(name)));
        let (c, elem) = if order == Order::RankOrder {
            (affine(), 8)
        } else {
            (sum(), 4)
        };
        for n in 1..=9 {
            // Member j's block holds j % 3 elements.
            let lens: Vec<usize> = (0..n).map(|j| j % 3 * elem).collect();
            reduce_scatter_checked(name, &lens, &c, |s, m, src, block, dst| {
                algorithm::reduce_scatter(s, m, &t, src, block, dst, order)
            });
        }
    }
}

#[test]
fn a_reduce_scatter_with_counts_that_differ_runs_one_algorithm_at_every_member() {
    // Blocks on both sides of what the model weighs (a few bytes, and 40 KB: the sizes of
    // the reductions it prices), with the model choosing: every member must choose alike.
    let t = Tunables::defaults();
    for lens in [[0, 4, 40_000, 8], [40_000, 0, 4, 40_000]] {
        reduce_scatter_checked("auto", &lens, &sum(), |s, m, src, block, dst| {
            algorithm::reduce_scatter(s, m, &t, src, block, dst, Order::Commutative)
        });
    }
}

#[test]
fn a_size_mismatch_is_an_error_not_a_hang() {
    // Member 1 expects 16 bytes where the root broadcasts 8.
    let n = 2;
    let world_ranks: Vec<u32> = vec![0, 1];
    let mut es = world(n, 4, 256, 64, true);
    let mut root_buf = vec![1u8; 8];
    let mut other = vec![0u8; 16];
    let mut hs = Vec::new();
    for (me, buf) in [(0usize, &mut root_buf), (1, &mut other)] {
        let len = buf.len();
        // SAFETY: both buffers outlive the run below.
        let out = unsafe { RawBufMut::new(buf) };
        let mut s = Schedule::new("broadcast", 1, -(1 << 16)).with_output(out);
        algorithm::bcast(
            &mut s,
            &Members {
                world: &world_ranks,
                me,
                nodes: 1,
                node_of: &[],
            },
            &Tunables::defaults(),
            0,
            span(Area::Output, len),
        );
        // SAFETY: as above.
        hs.push((me, unsafe { es[me].start_schedule(s) }));
    }
    run_until_done(&mut es, &hs, 10_000);
    es[0].wait(hs[0].1).expect("the root's part succeeds");
    let e = es[1].wait(hs[1].1).expect_err("a short message is an error");
    let text = e.to_string();
    assert!(text.contains("broadcast") && text.contains("8-byte") && text.contains("16"), "{text}");
}


#[test]
fn an_all_to_all_part_size_mismatch_names_both_members_and_sizes() {
    // All-to-all-w on 3 members: member 1 sends 12 bytes to member 2, which expects 8 from
    // it (a larger message), and member 0 sends 4 bytes to member 1, which expects 6 from it
    // (a shorter one). World ranks differ from member ranks.
    let world_ranks: Vec<u32> = vec![2, 0, 1];
    let n = 3;
    let mut es = world(n as u32, 4, 256, 64, true);
    let send = |i: usize, j: usize| match (i, j) {
        (1, 2) => 12,
        (0, 1) => 4,
        _ => 8,
    };
    let recv = |i: usize, j: usize| match (i, j) {
        (0, 1) => 6,
        _ => 8,
    };
    let blocks = |lens: Vec<usize>| {
        let mut off = 0;
        lens.into_iter()
            .map(|l| {
                off += l;
                (off - l, l)
            })
            .collect::<Vec<_>>()
    };
    let mut bufs: Vec<Bufs> = (0..n)
        .map(|me| Bufs {
            input: vec![1; (0..n).map(|j| send(me, j)).sum()],
            output: vec![0; (0..n).map(|i| recv(i, me)).sum()],
        })
        .collect();
    let mut hs = Vec::new();
    for (me, b) in bufs.iter_mut().enumerate() {
        let (il, ol) = (b.input.len(), b.output.len());
        // SAFETY: the buffers outlive the run below.
        let (i, o) = unsafe { (RawBuf::new(&b.input), RawBufMut::new(&mut b.output)) };
        let mut s = Schedule::new("all_to_all_w_into", 1, -(1 << 16))
            .with_input(i)
            .with_output(o);
        s.name_members(&world_ranks, me);
        let m = Members {
            world: &world_ranks,
            me,
            nodes: 1,
            node_of: &[],
        };
        algorithm::alltoall(
            &mut s,
            &m,
            &Tunables::defaults(),
            span(Area::Input, il),
            &blocks((0..n).map(|j| send(me, j)).collect()),
            span(Area::Output, ol),
            &blocks((0..n).map(|i| recv(i, me)).collect()),
            None,
        );
        let w = world_ranks[me] as usize;
        // SAFETY: as above.
        hs.push((w, unsafe { es[w].start_schedule(s) }));
    }
    run_until_done(&mut es, &hs, 10_000);
    let mut err = |me: usize| {
        let (w, h) = hs[me];
        es[w].wait(h).expect_err("a part of the wrong size").to_string()
    };
    let at2 = err(2);
    assert!(
        at2.contains("all_to_all_w_into")
            && at2.contains("member 1 sent member 2")
            && at2.contains("12 bytes")
            && at2.contains("8 bytes"),
        "{at2}"
    );
    let at1 = err(1);
    assert!(
        at1.contains("all_to_all_w_into")
            && at1.contains("member 0 sent a 4-byte message where member 1 expects 6 bytes"),
        "{at1}"
    );
    es[hs[0].0].wait(hs[0].1).expect("member 0 got what it expected");
}

#[test]
fn binomial_leaves_send_and_receive_in_place() {
    // A member with no one below it in the tree sends its own block (or data) as it is and
    // takes its block straight into its buffer: no copy, no scratch (half the members).
    use crate::engine::schedule::Step;
    let len = 16;
    for n in 2..=9usize {
        let world: Vec<u32> = (0..n as u32).collect();
        for root in 0..n {
            for me in (0..n).filter(|&me| me != root) {
                let m = Members {
                    world: &world,
                    me,
                    nodes: 1,
                    node_of: &[],
                };
                let vr = m.vrank(root);
                if vr.is_multiple_of(2) && vr + 1 < n {
                    continue; // has a child
                }
                let mut g = Schedule::new("test", 0, 0);
                super::gather::gather_binomial(&mut g, &m, root, span(Area::Input, len), span(Area::Output, n * len));
                let mut sc = Schedule::new("test", 0, 0);
                super::gather::scatter_binomial(&mut sc, &m, root, span(Area::Input, n * len), span(Area::Output, len));
                let mut r = Schedule::new("test", 0, 0);
                super::reduce::binomial(&mut r, &m, root, span(Area::Input, len), span(Area::Output, len), true);
                let what = format!("n={n} root={root} member {me}");
                assert!(
                    matches!(g.steps(), [Step::Send { from, .. }] if *from == span(Area::Input, len)),
                    "gather leaf {what}: {:?}",
                    g.steps()
                );
                assert!(
                    matches!(sc.steps(), [Step::Recv { into, .. }] if *into == span(Area::Output, len)),
                    "scatter leaf {what}: {:?}",
                    sc.steps()
                );
                assert!(
                    matches!(r.steps(), [Step::Send { from, .. }] if *from == span(Area::Input, len)),
                    "reduce leaf {what}: {:?}",
                    r.steps()
                );
            }
        }
    }
}
