//! Process topologies and the neighbourhood collectives, checked against references each
//! member computes itself from the topology's arguments (row-major grid coordinates worked
//! out here, the edge lists of the graphs).

use weft::datatype::{MutView, Partition, PartitionMut, UserDatatype, View};
use weft::topology::{
    dims_create, CartesianCommunicator, IntoTopology, SimpleCommunicator, Topology,
};
use weft::traits::*;
use weft::{Count, Rank};

/// Each member's neighbours as the collectives order them; `None`: no neighbour.
struct Hood {
    sources: Vec<Option<Rank>>,
    destinations: Vec<Option<Rank>>,
}

/// What lands in receive block `k` of member `me`: (sender, the sender's send block), from
/// MPI's rules: on a grid, what a member sends towards −1 arrives as from +1 and vice versa;
/// on a graph, the j-th listing of `from` among my sources pairs with the j-th listing of
/// me among `from`'s destinations.
fn origin(hoods: &[Hood], cartesian: bool, me: usize, k: usize) -> Option<(usize, usize)> {
    let from = hoods[me].sources[k]? as usize;
    if cartesian {
        return Some((from, k ^ 1));
    }
    let j = hoods[me].sources[..k]
        .iter()
        .filter(|&&s| s == Some(from as Rank))
        .count();
    let send = hoods[from]
        .destinations
        .iter()
        .enumerate()
        .filter(|(_, &d)| d == Some(me as Rank))
        .nth(j)
        .expect("every in-edge has its out-edge")
        .0;
    Some((from, send))
}

/// What receive buffers hold where nothing may be written.
const SENTINEL: u64 = u64::MAX;

/// The value of element `i` of member `from`'s send block `k`.
fn val(from: usize, k: usize, i: usize) -> u64 {
    (from * 1_000_000 + k * 1000 + i) as u64
}

/// Every neighbourhood collective on `c`, blocking and immediate, with equal and uneven
/// counts, checked against `hoods` (every member's neighbours).
fn neighbourhood_collectives<C: Communicator>(c: &C, hoods: &[Hood], cartesian: bool) {
    let me = c.rank() as usize;
    let (ins, outs) = (hoods[me].sources.len(), hoods[me].destinations.len());
    for len in [0usize, 1, 5, 2000] {
        // Allgather: my block is (me, 0).
        let mine: Vec<u64> = (0..len).map(|i| val(me, 0, i)).collect();
        let want: Vec<u64> = (0..ins)
            .flat_map(|k| {
                let o = origin(hoods, cartesian, me, k);
                (0..len).map(move |i| o.map_or(SENTINEL, |(f, _)| val(f, 0, i)))
            })
            .collect();
        let mut got = vec![SENTINEL; ins * len];
        c.neighbor_all_gather_into(&mine[..], &mut got[..]);
        assert_eq!(got, want, "neighbor_all_gather_into len={len}");
        let mut got = vec![SENTINEL; ins * len];
        weft::request::scope(|s| {
            c.immediate_neighbor_all_gather_into(s, &mine[..], &mut got[..])
                .wait();
        });
        assert_eq!(got, want, "immediate_neighbor_all_gather_into len={len}");

        // All-to-all: block k goes to destination k.
        let send: Vec<u64> = (0..outs)
            .flat_map(|k| (0..len).map(move |i| val(me, k, i)))
            .collect();
        let want: Vec<u64> = (0..ins)
            .flat_map(|k| {
                let o = origin(hoods, cartesian, me, k);
                (0..len).map(move |i| o.map_or(SENTINEL, |(f, sk)| val(f, sk, i)))
            })
            .collect();
        let mut got = vec![SENTINEL; ins * len];
        c.neighbor_all_to_all_into(&send[..], &mut got[..]);
        assert_eq!(got, want, "neighbor_all_to_all_into len={len}");
        let mut got = vec![SENTINEL; ins * len];
        weft::request::scope(|s| {
            c.immediate_neighbor_all_to_all_into(s, &send[..], &mut got[..])
                .wait();
        });
        assert_eq!(got, want, "immediate_neighbor_all_to_all_into len={len}");
    }

    // Uneven counts: member f's send block k holds (f + 2k) % 4 values, and the receive
    // buffer leaves a one-element gap after each block.
    let count = |f: usize, k: usize| ((f + 2 * k) % 4) as Count;
    let sc: Vec<Count> = (0..outs).map(|k| count(me, k)).collect();
    let sd = displs(&sc, 0);
    let rc: Vec<Count> = (0..ins)
        .map(|k| origin(hoods, cartesian, me, k).map_or(0, |(f, sk)| count(f, sk)))
        .collect();
    let rd = displs(&rc, 1);
    let total = rd.last().map_or(0, |&d| d + rc[ins - 1] + 1) as usize;
    let send: Vec<u64> = (0..outs)
        .flat_map(|k| (0..count(me, k) as usize).map(move |i| val(me, k, i)))
        .collect();
    let mut want = vec![SENTINEL; total];
    for k in 0..ins {
        if let Some((f, sk)) = origin(hoods, cartesian, me, k) {
            for i in 0..rc[k] as usize {
                want[rd[k] as usize + i] = val(f, sk, i);
            }
        }
    }
    let mut got = vec![SENTINEL; total];
    {
        let s = Partition::new(&send[..], &sc[..], &sd[..]);
        let mut r = PartitionMut::new(&mut got[..], &rc[..], &rd[..]);
        c.neighbor_all_to_all_varcount_into(&s, &mut r);
    }
    assert_eq!(got, want, "neighbor_all_to_all_varcount_into");
    let mut got = vec![SENTINEL; total];
    {
        let s = Partition::new(&send[..], &sc[..], &sd[..]);
        let mut r = PartitionMut::new(&mut got[..], &rc[..], &rd[..]);
        weft::request::scope(|scope| {
            c.immediate_neighbor_all_to_all_varcount_into(scope, &s, &mut r)
                .wait();
        });
    }
    assert_eq!(got, want, "immediate_neighbor_all_to_all_varcount_into");

    all_to_all_w(c, hoods, cartesian);

    // Allgather with a count per source: member f sends f % 3 values.
    let mine: Vec<u64> = (0..me % 3).map(|i| val(me, 0, i)).collect();
    let rc: Vec<Count> = (0..ins)
        .map(|k| origin(hoods, cartesian, me, k).map_or(0, |(f, _)| (f % 3) as Count))
        .collect();
    let rd = displs(&rc, 1);
    let total = rd.last().map_or(0, |&d| d + rc[ins - 1] + 1) as usize;
    let mut want = vec![SENTINEL; total];
    for k in 0..ins {
        if let Some((f, _)) = origin(hoods, cartesian, me, k) {
            for i in 0..rc[k] as usize {
                want[rd[k] as usize + i] = val(f, 0, i);
            }
        }
    }
    let mut got = vec![SENTINEL; total];
    {
        let mut r = PartitionMut::new(&mut got[..], &rc[..], &rd[..]);
        c.neighbor_all_gather_varcount_into(&mine[..], &mut r);
    }
    assert_eq!(got, want, "neighbor_all_gather_varcount_into");
    let mut got = vec![SENTINEL; total];
    {
        let mut r = PartitionMut::new(&mut got[..], &rc[..], &rd[..]);
        weft::request::scope(|scope| {
            c.immediate_neighbor_all_gather_varcount_into(scope, &mine[..], &mut r)
                .wait();
        });
    }
    assert_eq!(got, want, "immediate_neighbor_all_gather_varcount_into");
}

/// The all-to-all-w form: member f's block k holds (f + k) % 3 + 1 values (or none toward
/// every third neighbour); odd blocks are sent from and received into every other element
/// of a buffer (a vector datatype), even ones are plain slices.
fn all_to_all_w<C: Communicator>(c: &C, hoods: &[Hood], cartesian: bool) {
    let me = c.rank() as usize;
    let (ins, outs) = (hoods[me].sources.len(), hoods[me].destinations.len());
    let count = |f: usize, k: usize| if (f + k) % 3 == 2 { 0 } else { (f + k) % 3 + 1 };
    let strided = |n: usize| UserDatatype::vector(n as Count, 1, 2, &u64::equivalent_datatype());
    // Send side: block k's values at every other place of a buffer when k is odd.
    let plain: Vec<Vec<u64>> = (0..outs)
        .map(|k| (0..count(me, k)).map(|i| val(me, k, i)).collect())
        .collect();
    let spread: Vec<Vec<u64>> = plain
        .iter()
        .map(|v| v.iter().flat_map(|&x| [x, 7]).collect())
        .collect();
    let types: Vec<UserDatatype> = plain.iter().map(|v| strided(v.len())).collect();
    let views: Vec<View<'_, '_, UserDatatype, [u64]>> = (0..outs)
        .map(|k| {
            // SAFETY: one vector element of n values spans 2n − 1 u64s, inside the 2n.
            unsafe {
                View::with_count_and_datatype(
                    &spread[k][..],
                    (count(me, k) > 0) as Count,
                    &types[k],
                )
            }
        })
        .collect();
    let send: Vec<&dyn Buffer> = (0..outs)
        .map(|k| {
            if k % 2 == 1 {
                &views[k] as &dyn Buffer
            } else {
                &plain[k] as &dyn Buffer
            }
        })
        .collect();
    // Receive side: what should arrive in block k, as (values, strided?).
    let want: Vec<Vec<u64>> = (0..ins)
        .map(|k| match origin(hoods, cartesian, me, k) {
            Some((f, sk)) => (0..count(f, sk)).map(|i| val(f, sk, i)).collect(),
            None => Vec::new(),
        })
        .collect();
    let rtypes: Vec<UserDatatype> = want.iter().map(|v| strided(v.len())).collect();
    for immediate in [false, true] {
        let mut flat: Vec<Vec<u64>> = want.iter().map(|v| vec![SENTINEL; v.len()]).collect();
        let mut gappy: Vec<Vec<u64>> = want.iter().map(|v| vec![SENTINEL; 2 * v.len()]).collect();
        {
            // Odd blocks into every other element (a vector datatype), even ones plain.
            let mut views: Vec<Option<MutView<'_, '_, UserDatatype, [u64]>>> = gappy
                .iter_mut()
                .enumerate()
                .map(|(k, g)| {
                    let n = !want[k].is_empty() as Count;
                    // SAFETY: as on the send side.
                    (k % 2 == 1).then(|| unsafe {
                        MutView::with_count_and_datatype(&mut g[..], n, &rtypes[k])
                    })
                })
                .collect();
            let mut recv: Vec<&mut dyn BufferMut> = flat
                .iter_mut()
                .zip(views.iter_mut())
                .map(|(f, v)| match v {
                    Some(v) => v as &mut dyn BufferMut,
                    None => f as &mut dyn BufferMut,
                })
                .collect();
            if immediate {
                weft::request::scope(|scope| {
                    c.immediate_neighbor_all_to_all_w_into(scope, &send, &mut recv[..])
                        .wait();
                });
            } else {
                c.neighbor_all_to_all_w_into(&send, &mut recv[..]);
            }
        }
        for k in 0..ins {
            let got: Vec<u64> = if k % 2 == 1 {
                gappy[k].iter().step_by(2).copied().collect()
            } else {
                flat[k].clone()
            };
            let w = if origin(hoods, cartesian, me, k).is_some() {
                want[k].clone()
            } else {
                vec![SENTINEL; want[k].len()]
            };
            assert_eq!(
                got, w,
                "neighbor_all_to_all_w_into block {k} (immediate: {immediate})"
            );
            if k % 2 == 1 {
                assert!(
                    gappy[k].iter().skip(1).step_by(2).all(|&x| x == SENTINEL),
                    "all_to_all_w wrote between the strided elements"
                );
            }
        }
    }
}

/// Displacements of consecutive parts of `counts` with `gap` elements after each.
fn displs(counts: &[Count], gap: Count) -> Vec<Count> {
    counts
        .iter()
        .scan(0, |at, &c| {
            let d = *at;
            *at += c + gap;
            Some(d)
        })
        .collect()
}

/// Row-major coordinates of `r` in `dims` (worked out here, not by the library).
fn coords_of(dims: &[i32], mut r: i32) -> Vec<i32> {
    let mut c = vec![0; dims.len()];
    for i in (0..dims.len()).rev() {
        c[i] = r % dims[i];
        r /= dims[i];
    }
    c
}

fn rank_of(dims: &[i32], c: &[i32]) -> i32 {
    c.iter().zip(dims).fold(0, |r, (&x, &d)| r * d + x)
}

/// The grid's neighbours of every member: per dimension −1 then +1.
fn grid_hoods(dims: &[i32], periods: &[bool]) -> Vec<Hood> {
    let n: i32 = dims.iter().product();
    (0..n)
        .map(|r| {
            let c = coords_of(dims, r);
            let mut v = Vec::new();
            for d in 0..dims.len() {
                for step in [-1, 1] {
                    let mut x = c.clone();
                    x[d] += step;
                    let wrapped = if periods[d] {
                        x[d] = x[d].rem_euclid(dims[d]);
                        true
                    } else {
                        (0..dims[d]).contains(&x[d])
                    };
                    v.push(wrapped.then(|| rank_of(dims, &x)));
                }
            }
            Hood {
                sources: v.clone(),
                destinations: v,
            }
        })
        .collect()
}

/// Cartesian communicators: layout, coordinates, shifts, sub-grids, point-to-point and
/// collectives on them, duplicates, and the neighbourhood collectives.
fn cartesian(world: &SimpleCommunicator) {
    let n = world.size();
    for (free, periods) in [
        (vec![0, 0], vec![true, false]),
        (vec![0, 0, 0], vec![false, true, true]),
        (vec![0], vec![true]),
        (vec![0], vec![false]),
    ] {
        let mut dims = free.clone();
        dims_create(n, &mut dims).expect("dims_create");
        assert_eq!(dims.iter().product::<i32>(), n);
        let cart = world
            .create_cartesian_communicator(&dims, &periods, true)
            .expect("every member is in a full grid");
        assert_eq!(cart.topology(), Topology::Cartesian);
        assert_eq!(cart.num_dimensions(), dims.len() as i32);
        let me = cart.rank();
        let layout = cart.get_layout();
        assert_eq!(layout.dims, dims);
        assert_eq!(layout.periods, periods);
        assert_eq!(layout.coords, coords_of(&dims, me));
        for r in 0..n {
            assert_eq!(cart.rank_to_coordinates(r), coords_of(&dims, r));
            assert_eq!(cart.coordinates_to_rank(&coords_of(&dims, r)), r);
        }
        let hoods = grid_hoods(&dims, &periods);
        for d in 0..dims.len() {
            let (src, dst) = cart.shift(d as i32, 1);
            assert_eq!(
                (src, dst),
                (
                    hoods[me as usize].sources[2 * d],
                    hoods[me as usize].sources[2 * d + 1]
                ),
                "shift along {d}"
            );
            // Point-to-point on the grid: pass my rank towards +1.
            weft::request::scope(|s| {
                let sent = dst.map(|t| cart.process_at_rank(t).immediate_send(s, &me));
                if let Some(f) = src {
                    let (got, _) = cart.process_at_rank(f).receive::<Rank>();
                    assert_eq!(got, f, "a message along dimension {d}");
                }
                if let Some(r) = sent {
                    r.wait();
                }
            });
            // The sub-grid along d.
            let mut retain = vec![false; dims.len()];
            retain[d] = true;
            let sub = cart.subgroup(&retain);
            assert_eq!(sub.size(), dims[d]);
            assert_eq!(sub.rank(), layout.coords[d]);
            assert_eq!(sub.get_layout().periods, [periods[d]]);
            let mut sum = 0;
            sub.all_reduce_into(&me, &mut sum, weft::collective::SystemOperation::sum());
            let want: i32 = (0..dims[d])
                .map(|x| {
                    let mut c = layout.coords.clone();
                    c[d] = x;
                    rank_of(&dims, &c)
                })
                .sum();
            assert_eq!(sum, want, "a sum along sub-grid {d}");
        }
        let mut sum = 0;
        cart.all_reduce_into(&me, &mut sum, weft::collective::SystemOperation::sum());
        assert_eq!(sum, n * (n - 1) / 2);
        neighbourhood_collectives(&cart, &hoods, true);
        // A duplicate keeps the grid.
        match cart.duplicate().into_topology() {
            IntoTopology::Cartesian(c) => {
                assert_eq!(c.get_layout(), layout);
                neighbourhood_collectives(&c, &hoods, true);
            }
            other => panic!("a duplicate of a grid is {other:?}"),
        }
    }
    // A grid smaller than the communicator leaves the last member out.
    if n > 1 {
        let dims = [n - 1];
        let inside = world.rank() < n - 1;
        assert_eq!(
            world.cartesian_map(&dims, &[false]),
            inside.then(|| world.rank())
        );
        let c: Option<CartesianCommunicator> =
            world.create_cartesian_communicator(&dims, &[false], false);
        assert_eq!(c.is_some(), inside);
    }
    // Bad arguments are refused at every member alike, naming the values.
    let e = world
        .try_create_cartesian_communicator(&[n + 1], &[false], false)
        .unwrap_err();
    assert!(e.to_string().contains(&format!("{} members", n + 1)), "{e}");
    assert!(world.topology() == Topology::Undefined);
}

/// A graph every member knows, and distributed graphs in both forms.
fn graphs(world: &SimpleCommunicator) {
    let n = world.size() as usize;
    let me = world.rank() as usize;
    // Ring with chords, a doubled edge 0–(n−1) and a self-loop at n/2 (symmetric).
    let mut adj: Vec<Vec<Rank>> = vec![Vec::new(); n];
    let mut link = |a: usize, b: usize| {
        adj[a].push(b as Rank);
        if a != b {
            adj[b].push(a as Rank);
        }
    };
    for i in 0..n {
        link(i, (i + 1) % n);
        link(i, (i + 3) % n);
    }
    link(0, n - 1);
    link(n / 2, n / 2);
    let index = displs(&adj.iter().map(|v| v.len() as Count).collect::<Vec<_>>(), 0)
        .iter()
        .zip(&adj)
        .map(|(d, v)| d + v.len() as Count)
        .collect::<Vec<_>>();
    assert_eq!(world.graph_map(&index, &adj.concat()), Some(me as Rank));
    let g = world
        .create_graph_communicator(&index, &adj.concat(), false)
        .expect("every member is a node");
    assert_eq!(g.topology(), Topology::Graph);
    assert_eq!(g.graph_dims(), (n as Count, adj.concat().len() as Count));
    for (r, a) in adj.iter().enumerate() {
        assert_eq!(&g.neighbors(r as Rank), a);
        assert_eq!(g.neighbors_count(r as Rank), a.len() as Count);
    }
    let hoods: Vec<Hood> = adj
        .iter()
        .map(|v| Hood {
            sources: v.iter().map(|&r| Some(r)).collect(),
            destinations: v.iter().map(|&r| Some(r)).collect(),
        })
        .collect();
    neighbourhood_collectives(&g, &hoods, false);

    // Directed edges, some repeated and some to self, in one global order, with weights.
    let edges: Vec<(usize, usize)> = (0..3 * n)
        .map(|i| ((i * 7 + 3) % n, (i * i + 1) % n))
        .chain([(0, n - 1), (0, n - 1), (n - 1, n - 1)])
        .collect();
    let weight = |i: usize| (i * 11 % 7) as Count;
    let ins: Vec<usize> = (0..edges.len()).filter(|&i| edges[i].1 == me).collect();
    let outs: Vec<usize> = (0..edges.len()).filter(|&i| edges[i].0 == me).collect();
    let sources: Vec<Rank> = ins.iter().map(|&i| edges[i].0 as Rank).collect();
    let dests: Vec<Rank> = outs.iter().map(|&i| edges[i].1 as Rank).collect();
    let sw: Vec<Count> = ins.iter().map(|&i| weight(i)).collect();
    let dw: Vec<Count> = outs.iter().map(|&i| weight(i)).collect();
    let d = world.create_distributed_graph_communicator_adjacent(
        &sources,
        Some(&sw),
        &dests,
        Some(&dw),
        false,
    );
    assert_eq!(d.topology(), Topology::DistributedGraph);
    assert_eq!(
        d.neighbors_count(),
        (sources.len() as Count, dests.len() as Count, true)
    );
    let nb = d.neighbors();
    assert_eq!((nb.sources, nb.destinations), (sources, dests.clone()));
    assert_eq!(nb.source_weights, Some(sw));
    let hoods: Vec<Hood> = (0..n)
        .map(|r| Hood {
            sources: edges
                .iter()
                .filter(|e| e.1 == r)
                .map(|e| Some(e.0 as Rank))
                .collect(),
            destinations: edges
                .iter()
                .filter(|e| e.0 == r)
                .map(|e| Some(e.1 as Rank))
                .collect(),
        })
        .collect();
    neighbourhood_collectives(&d, &hoods, false);

    // The general form: member r names the edges i with i % n == r, grouped by source.
    // Each member then learns its edges ordered by the member that named them, then by i.
    let mine: Vec<usize> = (0..edges.len()).filter(|i| i % n == me).collect();
    let mut srcs: Vec<Rank> = Vec::new();
    let mut degrees: Vec<Count> = Vec::new();
    let mut targets: Vec<Rank> = Vec::new();
    for &i in &mine {
        srcs.push(edges[i].0 as Rank);
        degrees.push(1);
        targets.push(edges[i].1 as Rank);
    }
    let ws: Vec<Count> = mine.iter().map(|&i| weight(i)).collect();
    let d2 =
        world.create_distributed_graph_communicator(&srcs, &degrees, &targets, Some(&ws), false);
    let order: Vec<usize> = (0..n)
        .flat_map(|namer| (0..edges.len()).filter(move |i| i % n == namer))
        .collect();
    let hoods: Vec<Hood> = (0..n)
        .map(|r| Hood {
            sources: order
                .iter()
                .filter(|&&i| edges[i].1 == r)
                .map(|&i| Some(edges[i].0 as Rank))
                .collect(),
            destinations: order
                .iter()
                .filter(|&&i| edges[i].0 == r)
                .map(|&i| Some(edges[i].1 as Rank))
                .collect(),
        })
        .collect();
    let nb = d2.neighbors();
    let expect = |v: &[Option<Rank>]| v.iter().map(|r| r.unwrap()).collect::<Vec<_>>();
    assert_eq!(nb.sources, expect(&hoods[me].sources));
    assert_eq!(nb.destinations, expect(&hoods[me].destinations));
    let weights_of = |v: Vec<usize>| Some(v.into_iter().map(weight).collect::<Vec<_>>());
    assert_eq!(
        nb.source_weights,
        weights_of(
            order
                .iter()
                .copied()
                .filter(|&i| edges[i].1 == me)
                .collect()
        )
    );
    assert_eq!(
        nb.destination_weights,
        weights_of(
            order
                .iter()
                .copied()
                .filter(|&i| edges[i].0 == me)
                .collect()
        )
    );
    neighbourhood_collectives(&d2, &hoods, false);
}

/// The `asymmetric` case: a graph where member 0 lists member 1 but not the reverse; its
/// neighbourhood collectives must fail naming the call and the missing edge.
pub fn asymmetric(world: &SimpleCommunicator) {
    let n = world.size();
    // Node 0's neighbour is 1; the others have none.
    let index: Vec<Count> = (0..n).map(|_| 1).collect();
    let g = world
        .create_graph_communicator(&index, &[1], false)
        .expect("every member is a node");
    let mut out = [0u64; 1];
    g.neighbor_all_gather_into(&1u64, &mut out[..g.neighbors_count(g.rank()) as usize]);
}

/// The `topology` case.
pub fn run(world: &SimpleCommunicator) {
    cartesian(world);
    graphs(world);
}
