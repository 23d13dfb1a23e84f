//! The topology arithmetic against hand-worked cases and brute force.

use super::*;

fn dims(nnodes: i32, mut d: Vec<i32>) -> Result<Vec<i32>> {
    dims_create("dims_create", nnodes, &mut d).map(|()| d)
}

#[test]
fn dims_create_balances_and_sorts_the_free_entries() {
    assert_eq!(dims(6, vec![0, 0]).unwrap(), [3, 2]);
    assert_eq!(dims(7, vec![0, 0]).unwrap(), [7, 1]);
    assert_eq!(dims(6, vec![0, 3, 0]).unwrap(), [2, 3, 1]);
    assert_eq!(dims(16, vec![0, 0, 0]).unwrap(), [4, 2, 2]);
    assert_eq!(dims(36, vec![0, 0]).unwrap(), [6, 6]);
    assert_eq!(dims(64, vec![0, 0, 0]).unwrap(), [4, 4, 4]);
    // A greedy "largest prime to the smallest entry" gives 6 2 2 here; 4 3 2 is closer.
    assert_eq!(dims(24, vec![0, 0, 0]).unwrap(), [4, 3, 2]);
    assert_eq!(dims(1, vec![0, 0, 0]).unwrap(), [1, 1, 1]);
    assert_eq!(dims(5, vec![]).unwrap_err().class, ErrorClass::Dims);
    assert_eq!(dims(4, vec![2, 2]).unwrap(), [2, 2], "nothing free, exact");
    assert_eq!(dims(1 << 30, vec![0, 0]).unwrap(), [1 << 15, 1 << 15], "large counts");
}

#[test]
fn dims_create_refuses_impossible_inputs_naming_them() {
    let e = dims(7, vec![2, 0]).unwrap_err();
    assert_eq!(e.class, ErrorClass::Dims);
    assert!(e.detail.contains("[2, 0]") && e.detail.contains('7'), "{e}");
    let e = dims(4, vec![2, 3]).unwrap_err();
    assert!(e.detail.contains("exactly"), "{e}");
    let e = dims(4, vec![-1, 0]).unwrap_err();
    assert!(e.detail.contains("dims[0] is -1"), "{e}");
    let e = dims(0, vec![0]).unwrap_err();
    assert!(e.detail.contains("nnodes is 0"), "{e}");
}

/// Every factorisation of n into k non-increasing factors, for the brute-force check.
fn all_factorisations(n: u32, k: usize, max: u32) -> Vec<Vec<u32>> {
    if k == 0 {
        return if n == 1 { vec![vec![]] } else { vec![] };
    }
    let mut out = Vec::new();
    for d in (1..=max.min(n)).filter(|d| n.is_multiple_of(*d)) {
        for mut rest in all_factorisations(n / d, k - 1, d) {
            rest.insert(0, d);
            out.push(rest);
        }
    }
    out
}

#[test]
fn dims_create_finds_the_smallest_spread() {
    for n in 1..=120 {
        for k in 1..=4 {
            let got = dims(n as i32, vec![0; k]).unwrap();
            assert!(got.windows(2).all(|w| w[0] >= w[1]), "{n} {k}: {got:?}");
            assert_eq!(got.iter().product::<i32>(), n as i32);
            let best = all_factorisations(n, k, n)
                .iter()
                .map(|f| f[0] - f[k - 1])
                .min()
                .unwrap();
            assert_eq!((got[0] - got[k - 1]) as u32, best, "{n} into {k}: {got:?}");
        }
    }
}

#[test]
fn dims_create_breaks_spread_ties_towards_the_more_even_factorisation() {
    // 13 x 12 x 6 x 6 has the same spread; MPICH's topo/dims5 expects this one.
    assert_eq!(dims(5616, vec![0; 4]).unwrap(), [13, 9, 8, 6]);
    // Many dimensions: no overflow in the search's bounds.
    assert_eq!(dims(1 << 20, vec![0; 20]).unwrap(), [2; 20]);
}

fn grid(d: &[i32], p: &[bool]) -> Cartesian {
    Cartesian::new("create_cartesian_communicator", d, p, 1000).unwrap()
}

#[test]
fn coordinates_are_row_major_and_round_trip() {
    let g = grid(&[2, 3, 4], &[false, true, false]);
    assert_eq!(g.size(), 24);
    assert_eq!(g.coords(0), [0, 0, 0]);
    assert_eq!(g.coords(1), [0, 0, 1]);
    assert_eq!(g.coords(4), [0, 1, 0]);
    assert_eq!(g.coords(23), [1, 2, 3]);
    for r in 0..24 {
        assert_eq!(g.rank("rank", &g.coords(r)).unwrap(), r);
    }
    // The periodic dimension wraps; the others refuse.
    assert_eq!(g.rank("rank", &[1, -1, 3]).unwrap(), 23);
    assert_eq!(g.rank("rank", &[0, 5, 0]).unwrap(), 8);
    let e = g.rank("coordinates_to_rank", &[2, 0, 0]).unwrap_err();
    assert!(e.detail.contains("coordinate 2 of dimension 0 is outside 0..2"), "{e}");
    assert!(g.rank("rank", &[0, 0, -1]).is_err());
    assert!(g.rank("rank", &[0, 0]).unwrap_err().detail.contains("2 coordinates"));
}

#[test]
fn shifts_wrap_on_periodic_dimensions_and_stop_at_edges() {
    let g = grid(&[3, 2], &[false, true]);
    // Rank 2 is (1, 0).
    assert_eq!(g.shift("shift", 2, 0, 1).unwrap(), (Some(0), Some(4)));
    assert_eq!(g.shift("shift", 0, 0, 1).unwrap(), (None, Some(2)));
    assert_eq!(g.shift("shift", 4, 0, 1).unwrap(), (Some(2), None));
    assert_eq!(g.shift("shift", 0, 0, 2).unwrap(), (None, Some(4)));
    assert_eq!(g.shift("shift", 0, 0, -1).unwrap(), (Some(2), None));
    assert_eq!(g.shift("shift", 0, 0, 3).unwrap(), (None, None));
    assert_eq!(g.shift("shift", 2, 1, 1).unwrap(), (Some(3), Some(3)));
    assert_eq!(g.shift("shift", 2, 1, 2).unwrap(), (Some(2), Some(2)));
    assert_eq!(g.shift("shift", 3, 1, -3).unwrap(), (Some(2), Some(2)));
    assert_eq!(g.shift("shift", 2, 0, 0).unwrap(), (Some(2), Some(2)));
    let e = g.shift("shift", 0, 2, 1).unwrap_err();
    assert!(e.detail.contains("dimension 2 does not exist"), "{e}");
    assert!(g.shift("shift", 0, -1, 1).is_err());
    assert_eq!(
        g.neighbors(0),
        [None, Some(2), Some(1), Some(1)],
        "−1 then +1, dimension by dimension"
    );
}

#[test]
fn sub_grids_split_by_the_dropped_coordinates() {
    let g = grid(&[2, 3, 2], &[true, false, true]);
    for r in 0..12 {
        let c = g.coords(r);
        let s = g.sub("subgroup", r, &[false, true, false]).unwrap();
        assert_eq!(s.grid.dims, [3]);
        assert_eq!(s.grid.periods, [false]);
        assert_eq!(s.key, c[1]);
        assert_eq!(s.color, c[0] * 2 + c[2]);
        let s = g.sub("subgroup", r, &[true, false, true]).unwrap();
        assert_eq!((s.color, s.key), (c[1], c[0] * 2 + c[2]));
        let s = g.sub("subgroup", r, &[false; 3]).unwrap();
        assert_eq!((s.grid.size(), s.key), (1, 0));
    }
    assert!(g.sub("subgroup", 0, &[true]).is_err());
}

#[test]
fn bad_grids_are_refused_naming_the_values() {
    let e = Cartesian::new("create_cartesian_communicator", &[2, 3], &[false, false], 4)
        .unwrap_err();
    assert_eq!(e.class, ErrorClass::Dims);
    assert!(e.detail.contains("6 members") && e.detail.contains("communicator's 4"), "{e}");
    let e = Cartesian::new("c", &[2, -1], &[false, false], 4).unwrap_err();
    assert!(e.detail.contains("dims[1] is -1"), "{e}");
    let e = Cartesian::new("c", &[2, 0], &[false, false], 4).unwrap_err();
    assert!(e.detail.contains("dims[1] is 0"), "{e}");
    let e = Cartesian::new("c", &[2], &[false, false], 4).unwrap_err();
    assert!(e.detail.contains("periods 2"), "{e}");
    let e = Cartesian::new("c", &[1 << 16, 1 << 16], &[false, false], 4).unwrap_err();
    assert!(e.detail.contains("too many"), "{e}");
    assert_eq!(Cartesian::new("c", &[], &[], 1).unwrap().size(), 1);
}

#[test]
fn graphs_check_their_arguments_and_list_neighbours() {
    // 0-1, 0-2, 1-2 and a self-loop at 3.
    let g = Graph::new("create_graph_communicator", &[2, 4, 6, 7], &[1, 2, 0, 2, 0, 1, 3], 5)
        .unwrap();
    assert_eq!(g.neighbors(0), [1, 2]);
    assert_eq!(g.neighbors(2), [0, 1]);
    assert_eq!(g.neighbors(3), [3]);
    assert_eq!(g.asymmetry(), None);
    let one_way = Graph::new("g", &[1, 1], &[1], 2).unwrap();
    assert_eq!(
        one_way.asymmetry(),
        Some("node 0 lists node 1 1 time(s) but node 1 lists node 0 0 time(s)")
    );
    // A doubled edge listed once the other way.
    let doubled = Graph::new("g", &[2, 3, 3], &[1, 1, 0], 3).unwrap();
    assert_eq!(
        doubled.asymmetry(),
        Some("node 0 lists node 1 2 time(s) but node 1 lists node 0 1 time(s)")
    );
    let balanced = Graph::new("g", &[2, 4, 4], &[1, 1, 0, 0], 3).unwrap();
    assert_eq!(balanced.asymmetry(), None);
    let e = Graph::new("g", &[1, 1, 1], &[1], 2).unwrap_err();
    assert!(e.detail.contains("3 nodes"), "{e}");
    let e = Graph::new("g", &[2, 1], &[1, 0], 2).unwrap_err();
    assert!(e.detail.contains("index[1] is 1"), "{e}");
    let e = Graph::new("g", &[1, 2], &[1], 2).unwrap_err();
    assert!(e.detail.contains("edges has 1"), "{e}");
    let e = Graph::new("g", &[1, 2], &[1, 2], 3).unwrap_err();
    assert!(e.detail.contains("edges[1] is 2"), "{e}");
}

#[test]
fn distributed_graphs_check_ranks_and_weights() {
    let d = DistGraph::adjacent("c", (&[1, 2], Some(&[5, 6])), (&[0], None), 3).unwrap();
    assert_eq!(d.sources, [1, 2]);
    assert_eq!(d.destination_weights, None);
    let t = ProcessTopology::DistGraph(d);
    assert_eq!(t.neighbors(0).sources, [Some(1), Some(2)]);
    let e = DistGraph::adjacent("c", (&[3], None), (&[], None), 3).unwrap_err();
    assert_eq!(e.class, ErrorClass::Rank);
    assert!(e.detail.contains("sources[0] is 3"), "{e}");
    let e = DistGraph::adjacent("c", (&[1], Some(&[])), (&[], None), 3).unwrap_err();
    assert!(e.detail.contains("source_weights has 0 entries for 1"), "{e}");
    let e = DistGraph::adjacent("c", (&[], None), (&[1], Some(&[-2])), 3).unwrap_err();
    assert!(e.detail.contains("destination_weights[0] is -2"), "{e}");
}
