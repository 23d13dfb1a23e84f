//! The cost model's choices: latency algorithms for small sizes and bandwidth ones for large,
//! eligibility rules kept, tunables that force an algorithm obeyed, and, above all, every
//! member of a communicator choosing the same algorithm from its own view of the call.

use super::algorithm::{self, Order};
use super::model::{Collective, Model, Shape};
use super::reduce::equal_blocks;
use super::{Area, Members, Span};
use crate::tunables::Tunables;

/// The model of a node of 2 CPUs with the tunables `vars` on top.
fn two_cpus(vars: &[(&str, &str)]) -> Model {
    let mut all = vec![("WEFT_COLL_MODEL_CPUS", "2")];
    all.extend_from_slice(vars);
    Model::from_tunables(&tunables(&all))
}

fn tunables(vars: &[(&str, &str)]) -> Tunables {
    Tunables::from_lookup(|k| vars.iter().find(|v| v.0 == k).map(|v| v.1.to_string()))
        .expect("test tunables parse")
}

const SIZES: &[usize] = &[
    0,
    1,
    8,
    100,
    1 << 10,
    4 << 10,
    16 << 10,
    64 << 10,
    256 << 10,
    1 << 20,
    4 << 20,
    16 << 20,
];

#[test]
fn small_sizes_pick_latency_algorithms_and_large_ones_bandwidth_algorithms() {
    use Collective::*;
    let cpus = ("WEFT_COLL_MODEL_CPUS", "2");
    for t in [tunables(&[cpus]), tunables(&[cpus, ("WEFT_TRANSPORTS", "tcp")])] {
        let model = Model::from_tunables(&t);
        for nodes in [1, 2] {
            for n in [4, 6, 8, 12, 16] {
                let at = |c: Collective, bytes: usize| model.pick(c, &Shape::new(n, nodes, Some(bytes)));
                let case = format!("{n} members on {nodes} nodes, {}", t.transports);
                assert_eq!(at(Bcast, 8), "binomial", "{case}");
                assert_ne!(at(Bcast, 16 << 20), "binomial", "{case}");
                assert_eq!(at(Allreduce, 64), "recursive_doubling", "{case}");
                assert_ne!(at(Allreduce, 16 << 20), "recursive_doubling", "{case}");
                let small_allgather = if n.is_power_of_two() { "recursive_doubling" } else { "bruck" };
                assert_eq!(at(Allgather, 8), small_allgather, "{case}");
                // Over TCP a flood of rendezvous messages is not allowed; on shared memory
                // it costs only their announcements, and one round beats n−1.
                let tcp = nodes > 1 || !t.transports.shm;
                // (On an oversubscribed node Bruck's fewer rounds win in the model; see
                // `an_oversubscribed_node_prefers_few_rounds_and_spread_copies`.)
                if !n.is_power_of_two() && tcp {
                    assert_eq!(at(Allgather, 1 << 20), "ring", "{case}");
                }
                assert_eq!(at(Alltoall, 8), "scattered", "{case}");
                let large_alltoall = if tcp { "pairwise" } else { "scattered" };
                assert_eq!(at(Alltoall, 1 << 20), large_alltoall, "{case}");
                assert_eq!(at(Gather, 8), "binomial", "{case}");
                assert_eq!(at(ReduceScatter, 8), "pairwise", "{case}");
            }
        }
    }
}

#[test]
fn an_oversubscribed_node_prefers_few_rounds_and_spread_copies() {
    use Collective::*;
    let on = |cpus: &str| Model::from_tunables(&tunables(&[("WEFT_COLL_MODEL_CPUS", cpus)]));
    let (crowded, roomy) = (on("2"), on("64"));
    let at = |model: &Model, c, n, bytes| model.pick(c, &Shape::new(n, 1, Some(bytes)));
    for n in [4, 8, 16] {
        // Measured at 4 and 8 ranks on 2 CPUs (docs/collectives.md): the root taking every
        // block at once beats a tree that forwards them, 1.3-3x from 64 KiB.
        for bytes in [64 << 10, 1 << 20, 4 << 20] {
            assert_eq!(at(&crowded, Gather, n, bytes), "linear", "{n} {bytes}");
            assert_eq!(at(&crowded, Scatter, n, bytes), "linear", "{n} {bytes}");
        }
        // Whole-vector exchanges lose to halving and doubling (64 KiB, 8 ranks: 270 µs
        // against 119).
        assert_ne!(at(&crowded, Allreduce, n, 64 << 10), "recursive_doubling", "{n}");
        // Reduce-then-scatter only while all blocks go eagerly (8 ranks, 64 KiB blocks:
        // 549 µs pairwise against 857-1104).
        assert_eq!(at(&crowded, ReduceScatter, n, 64 << 10), "pairwise", "{n}");
        let why = crowded
            .estimates(ReduceScatter, &Shape::new(n, 1, Some(64 << 10)))
            .into_iter()
            .find(|e| e.algorithm == "by_reduce")
            .and_then(|e| e.ineligible)
            .expect("reduce-then-scatter is not eligible");
        assert!(why.to_string().contains("all blocks together"), "{why}");
    }
    // With a CPU each, what the crowded node avoids costs only its own copies: the
    // contention terms vanish, so the tree's fewer start-ups win a small gather.
    let e = |model: &Model| model.estimates(Gather, &Shape::new(8, 1, Some(1 << 20)));
    let cost = |es: Vec<super::model::Estimate>, name| es.iter().find(|e| e.algorithm == name).unwrap().cost_ns;
    assert!(cost(e(&crowded), "binomial") > cost(e(&roomy), "binomial"));
    assert_eq!(at(&roomy, Gather, 8, 4 << 10), "binomial");
}

#[test]
fn the_pick_is_always_eligible_and_the_rules_hold() {
    let model = Model::from_tunables(&Tunables::defaults());
    for c in Collective::ALL {
        for n in 1..=17 {
            for &bytes in SIZES {
                for commutative in [true, false] {
                    let s = Shape {
                        commutative,
                        elem: 8,
                        root: n / 2,
                        ..Shape::new(n, 1, Some(bytes))
                    };
                    let pick = model.pick(c, &s);
                    let e = model.estimates(c, &s);
                    let chosen = e.iter().find(|e| e.algorithm == pick).expect("listed");
                    assert_eq!(chosen.ineligible, None, "{c:?} {s:?}: {pick}");
                    // Nothing eligible is cheaper.
                    for other in e.iter().filter(|e| e.ineligible.is_none()) {
                        assert!(chosen.cost_ns <= other.cost_ns, "{c:?} {s:?}: {e:?}");
                    }
                    if !commutative {
                        assert_eq!(
                            model.pick(Collective::Allreduce, &s),
                            "recursive_doubling"
                        );
                        assert_eq!(model.pick(Collective::ReduceScatter, &s), "by_reduce");
                    }
                    if !n.is_power_of_two() {
                        assert_ne!(model.pick(Collective::Allgather, &s), "recursive_doubling");
                    }
                }
            }
        }
    }
    // Fewer elements than members: no block per member for the bandwidth allreduces.
    let few = Shape {
        elem: 8,
        ..Shape::new(8, 1, Some(7 * 8))
    };
    let e = model.estimates(Collective::Allreduce, &few);
    assert!(
        e[1].ineligible.as_ref().unwrap().to_string().contains("8 elements"),
        "{e:?}"
    );
    assert_eq!(model.pick(Collective::Allreduce, &few), "recursive_doubling");
    // A v form's sizes are not agreed: no flood.
    let v = Shape::new(8, 1, None);
    assert_eq!(model.pick(Collective::Alltoall, &v), "pairwise");
}

#[test]
fn the_paths_constants_come_from_the_tunables() {
    let t = tunables(&[
        ("WEFT_COLL_MODEL_SHM", "1000,1000"),
        ("WEFT_COLL_MODEL_TCP", "9000,2000,20000,1000"),
        ("WEFT_COLL_MODEL_LOCAL", "0,0"),
    ]);
    let model = Model::from_tunables(&t);
    let cost = |nodes, bytes| {
        model.estimates(Collective::Bcast, &Shape::new(2, nodes, Some(bytes)))[0].cost_ns
    };
    // One binomial round: one message.
    assert_eq!(cost(1, 1000), 1000.0 + 1000.0);
    assert_eq!(cost(2, 1000), 9000.0 + 2000.0);
    // Above the TCP eager limit (64 KiB) the rendezvous pair applies.
    assert_eq!(cost(2, 1 << 20), 20000.0 + (1 << 20) as f64);
    // Without shm every message goes over TCP, even on one node.
    let tcp = Model::from_tunables(&tunables(&[("WEFT_TRANSPORTS", "tcp")]));
    assert_eq!(tcp.path(1), super::model::Path::Tcp);
    assert!(Tunables::from_lookup(|k| (k == "WEFT_COLL_MODEL_SHM").then(|| "1,2,3".into())).is_err());
    assert!(Tunables::from_lookup(|k| (k == "WEFT_COLL_MODEL_LOCAL").then(|| "-1,2".into())).is_err());
}

/// Every member's view of one call, as the API hands it to `algorithm`: what it passes
/// differs from member to member (a root's buffers, a v form's blocks), what decides must not.
fn picks_of_every_member(t: &Tunables, n: usize, nodes: usize, len: usize, root: usize) -> Vec<Vec<&'static str>> {
    let world: Vec<u32> = (0..n as u32).rev().collect();
    let span = |area, len| Span::new(area, 0, len);
    // A v form's blocks: member i sends (i + j) % 3 · len bytes to member j.
    let v_blocks = |i: usize| -> Vec<(usize, usize)> {
        let mut off = 0;
        (0..n)
            .map(|j| {
                let l = (i + j) % 3 * len;
                off += l;
                (off - l, l)
            })
            .collect()
    };
    (0..n)
        .map(|me| {
            let m = Members {
                world: &world,
                me,
                nodes,
                node_of: &[],
            };
            let at_root = |whole: usize| if me == root { whole } else { 0 };
            let len8 = len / 8 * 8;
            let mut p = vec![
                algorithm::bcast_algorithm(&m, t, root, span(Area::Output, len)),
                algorithm::gather_algorithm(
                    &m,
                    t,
                    root,
                    span(Area::Input, len),
                    span(Area::Output, at_root(n * len)),
                ),
                algorithm::scatter_algorithm(
                    &m,
                    t,
                    root,
                    span(Area::Input, at_root(n * len)),
                    span(Area::Output, len),
                ),
                algorithm::allgather_algorithm(&m, t, span(Area::Input, len)),
                algorithm::alltoall_algorithm(
                    &m,
                    t,
                    &equal_blocks(n, len),
                    &equal_blocks(n, len),
                    Some(len),
                ),
                algorithm::alltoall_algorithm(&m, t, &v_blocks(me), &v_blocks(me), None),
            ];
            for order in [Order::Commutative, Order::RankOrder] {
                p.push(algorithm::allreduce_algorithm(&m, t, span(Area::Input, len8), 8, order));
                p.push(algorithm::reduce_scatter_algorithm(&m, t, span(Area::Input, n * len), order));
            }
            p
        })
        .collect()
}

#[test]
fn every_member_of_a_communicator_picks_the_same_algorithm() {
    let settings = [
        tunables(&[]),
        tunables(&[("WEFT_TRANSPORTS", "tcp")]),
        tunables(&[("WEFT_COLL_MODEL_SHM", "100,10000"), ("WEFT_COLL_SEGMENT", "1k")]),
    ];
    for t in &settings {
        for n in 1..=9 {
            for nodes in [1, 2, n] {
                for &len in SIZES {
                    for root in [0, n / 2, n - 1] {
                        let picks = picks_of_every_member(t, n, nodes, len, root);
                        for (me, p) in picks.iter().enumerate() {
                            assert_eq!(
                                p, &picks[0],
                                "member {me} of {n} on {nodes} nodes, {len} bytes, root {root}"
                            );
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn forcing_tunables_override_the_model() {
    let world: Vec<u32> = (0..8).collect();
    let m = Members {
        world: &world,
        me: 3,
        nodes: 1,
        node_of: &[],
    };
    let tiny = Span::new(Area::Output, 0, 8);
    let t = tunables(&[("WEFT_COLL_BCAST", "chain")]);
    assert_eq!(algorithm::bcast_algorithm(&m, &t, 0, tiny), "chain");
    let t = tunables(&[("WEFT_COLL_ALLTOALL", "scattered")]);
    assert_eq!(
        algorithm::alltoall_algorithm(&m, &t, &[], &[], Some(16 << 20)),
        "scattered"
    );
    // Forced, but not eligible: the fallbacks of before.
    let t = tunables(&[("WEFT_COLL_ALLREDUCE", "ring")]);
    let big = Span::new(Area::Input, 0, 1 << 20);
    assert_eq!(algorithm::allreduce_algorithm(&m, &t, big, 8, Order::Commutative), "ring");
    assert_eq!(
        algorithm::allreduce_algorithm(&m, &t, big, 8, Order::RankOrder),
        "recursive_doubling"
    );
    let t = tunables(&[("WEFT_COLL_REDUCE_SCATTER", "pairwise")]);
    assert_eq!(
        algorithm::reduce_scatter_algorithm(&m, &t, big, Order::RankOrder),
        "by_reduce"
    );
}

#[test]
fn fresh_data_costs_more_than_the_callers_input() {
    use Collective::*;
    let with = |fresh: &str| two_cpus(&[("WEFT_COLL_MODEL_FRESH", fresh)]);
    let (plain, fresh) = (with("0"), with("200"));
    let at = |model: &Model, c, n, bytes| model.pick(c, &Shape::new(n, 1, Some(bytes)));
    // 2 members, 1 MiB: recursive doubling's one exchange reads only the inputs, where
    // Rabenseifner's allgather half reads the halves just reduced (measured with the CPUs on
    // two cores: 234 against 455 µs; on one core 168 against 127).
    assert_eq!(at(&plain, Allreduce, 2, 1 << 20), "rabenseifner");
    assert_eq!(at(&fresh, Allreduce, 2, 1 << 20), "recursive_doubling");
    // Large blocks: every member sends its own input to all rather than forward blocks.
    for n in [4, 8] {
        assert_eq!(at(&fresh, Allgather, n, 1 << 20), "scattered", "{n}");
    }
    // Only rendezvous messages read the sender's buffer: small sizes are unchanged.
    for c in [Bcast, Reduce, Allreduce, Allgather, Gather] {
        for n in [2, 4, 8] {
            assert_eq!(at(&plain, c, n, 4 << 10), at(&fresh, c, n, 4 << 10), "{c:?} {n}");
        }
    }
    // Over TCP the term does not apply.
    let tcp = |model: &Model| model.estimates(Allreduce, &Shape::new(4, 2, Some(1 << 20)));
    assert_eq!(tcp(&plain), tcp(&fresh));
}

#[test]
fn cpus_that_share_cores_read_fresh_data_for_free_and_share_the_work() {
    use Collective::*;
    let with = |shared: &str| {
        two_cpus(&[
            ("WEFT_COLL_MODEL_SHARED", shared),
            ("WEFT_COLL_MODEL_FRESH", "200"),
        ])
    };
    let (apart, together) = (with("0"), with("1"));
    let at = |model: &Model, c, n, bytes| model.pick(c, &Shape::new(n, 1, Some(bytes)));
    // 2 members, 1 and 4 MiB: on two cores recursive doubling (no fresh data read); on one
    // core Rabenseifner, whose halves halve the reduction the two CPUs of the core share
    // (measured with the CPUs together, 4 MiB: 433-451 µs against 870-1,357).
    for bytes in [1 << 20, 4 << 20] {
        assert_eq!(at(&apart, Allreduce, 2, bytes), "recursive_doubling");
        assert_eq!(at(&together, Allreduce, 2, bytes), "rabenseifner");
    }
    // Together, fresh data costs nothing: the same estimates as with no fresh term at all.
    let no_fresh = two_cpus(&[
        ("WEFT_COLL_MODEL_SHARED", "1"),
        ("WEFT_COLL_MODEL_FRESH", "0"),
    ]);
    let est = |m: &Model| m.estimates(Allgather, &Shape::new(2, 1, Some(4 << 20)));
    assert_eq!(est(&together), est(&no_fresh));
    // Over TCP the setting changes nothing.
    let tcp = |model: &Model| model.estimates(Allreduce, &Shape::new(4, 2, Some(1 << 20)));
    assert_eq!(tcp(&apart), tcp(&together));
}
