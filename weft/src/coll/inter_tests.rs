//! The intercommunicator collectives on simulated ranks: members 0..k form group A, the rest
//! group B, for every split of 2 to 7 members, against a sequential reference. Reductions
//! use the non-commutative operation of `tests`, so a group combined out of rank order shows.

use super::inter::{self, Role};
use super::tests::{affine, data, fold, run, Bufs};
use super::{Members, Schedule, Span};
use crate::engine::schedule::Area;
use crate::engine::testing::{run_until_done, world};
use crate::tunables::Tunables;

/// Runs `build(schedule, my group, the other group's world ranks, member)` on `n` simulated
/// ranks, members `0..k` in one group and the rest in the other.
fn run_split(
    n: usize,
    k: usize,
    bufs: Vec<Bufs>,
    combine: Option<crate::engine::schedule::Combine>,
    build: impl Fn(&mut Schedule, &Members, &[u32], usize),
) -> Vec<Vec<u8>> {
    run(n, bufs, combine, |s, m, me| {
        let (a, b) = m.world.split_at(k);
        let (mine, other, local_me) = if me < k { (a, b, me) } else { (b, a, me - k) };
        let local = Members {
            world: mine,
            me: local_me,
            nodes: 1,
            node_of: &[],
        };
        build(s, &local, other, me)
    })
}

fn span(area: Area, len: usize) -> Span {
    Span::new(area, 0, len)
}

/// Every split of 2 to 7 members: (n, k).
fn splits() -> impl Iterator<Item = (usize, usize)> {
    (2..=7).flat_map(|n| (1..n).map(move |k| (n, k)))
}

/// The members of the group `me` is not in, in their group's order.
fn others(n: usize, k: usize, me: usize) -> std::ops::Range<usize> {
    if me < k {
        k..n
    } else {
        0..k
    }
}

/// Roles of a rooted collective whose root is member `root` (in A when `root < k`).
fn role(k: usize, root: usize, me: usize) -> Role {
    let same = (me < k) == (root < k);
    match (same, me == root) {
        (_, true) => Role::Root,
        (true, false) => Role::RootsGroup,
        (false, false) => Role::OtherGroup {
            root: if root < k { root } else { root - k },
        },
    }
}

/// Roots to try for a split: each group's first and last member.
fn roots(n: usize, k: usize) -> Vec<usize> {
    let mut r = vec![0, k - 1, k, n - 1];
    r.dedup();
    r
}

const SIZES: &[usize] = &[0, 8, 200];

#[test]
fn an_inter_broadcast_reaches_the_other_group_only() {
    let t = Tunables::defaults();
    for (n, k) in splits() {
        for root in roots(n, k) {
            for &len in SIZES {
                let want = data(root, len, 3);
                let bufs = (0..n)
                    .map(|r| Bufs {
                        input: vec![],
                        output: if r == root { want.clone() } else { vec![0xee; len] },
                    })
                    .collect();
                let out = run_split(n, k, bufs, None, |s, m, remote, me| {
                    inter::bcast(s, m, remote, &t, role(k, root, me), span(Area::Output, len))
                });
                for (r, o) in out.iter().enumerate() {
                    let got_it = r == root || (r < k) != (root < k);
                    let expect = if got_it { want.clone() } else { vec![0xee; len] };
                    assert_eq!(o, &expect, "n={n} k={k} root={root} len={len} member {r}");
                }
            }
        }
    }
}

#[test]
fn inter_gathers_and_scatters_move_the_other_groups_blocks_in_its_rank_order() {
    let t = Tunables::defaults();
    for (n, k) in splits() {
        for root in roots(n, k) {
            for &len in SIZES {
                let senders = others(n, k, root);
                let whole: Vec<u8> = senders.clone().flat_map(|r| data(r, len, 5)).collect();
                // Gather, equal blocks and a block per member (in reverse order, so the parts
                // are not in rank order in the root's buffer).
                let parts: Vec<(usize, usize)> = (0..senders.len())
                    .map(|j| ((senders.len() - 1 - j) * len, len))
                    .collect();
                let reversed: Vec<u8> = senders.clone().rev().flat_map(|r| data(r, len, 5)).collect();
                for varcount in [false, true] {
                    let bufs = (0..n)
                        .map(|r| Bufs {
                            input: data(r, len, 5),
                            output: vec![0; if r == root { whole.len() } else { 0 }],
                        })
                        .collect();
                    let out = run_split(n, k, bufs, None, |s, m, remote, me| {
                        let rl = if me == root { whole.len() } else { 0 };
                        let (src, dst) = (span(Area::Input, len), span(Area::Output, rl));
                        let role = role(k, root, me);
                        if varcount {
                            inter::gatherv(s, remote, role, src, dst, &parts)
                        } else {
                            inter::gather(s, m, remote, &t, role, src, dst)
                        }
                    });
                    let want = if varcount { &reversed } else { &whole };
                    assert_eq!(&out[root], want, "gather n={n} k={k} root={root} len={len} v={varcount}");
                }
                // Scatter: the root's blocks go to the other group's members.
                for varcount in [false, true] {
                    let src_bytes = if varcount { reversed.clone() } else { whole.clone() };
                    let bufs = (0..n)
                        .map(|r| Bufs {
                            input: if r == root { src_bytes.clone() } else { vec![] },
                            output: vec![0xee; len],
                        })
                        .collect();
                    let out = run_split(n, k, bufs, None, |s, m, remote, me| {
                        let sl = if me == root { src_bytes.len() } else { 0 };
                        let (src, dst) = (span(Area::Input, sl), span(Area::Output, len));
                        let role = role(k, root, me);
                        if varcount {
                            inter::scatterv(s, remote, role, src, &parts, dst)
                        } else {
                            inter::scatter(s, m, remote, &t, role, src, dst)
                        }
                    });
                    for (r, o) in out.iter().enumerate() {
                        let want = if senders.contains(&r) { data(r, len, 5) } else { vec![0xee; len] };
                        assert_eq!(o, &want, "scatter n={n} k={k} root={root} len={len} v={varcount} member {r}");
                    }
                }
            }
        }
    }
}

#[test]
fn inter_reductions_combine_the_other_group_in_its_rank_order() {
    let t = Tunables::defaults();
    let order = super::algorithm::Order::RankOrder;
    for (n, k) in splits() {
        for &len in &[0, 8, 96] {
            let inputs: Vec<Vec<u8>> = (0..n).map(|r| data(r, len, 9)).collect();
            let of = |range: std::ops::Range<usize>| fold(&affine(), &inputs[range]);
            // Allreduce: each group gets the other's reduction.
            let bufs = (0..n)
                .map(|r| Bufs {
                    input: inputs[r].clone(),
                    output: vec![0; len],
                })
                .collect();
            let out = run_split(n, k, bufs, Some(affine()), |s, m, remote, _| {
                let (src, dst) = (span(Area::Input, len), span(Area::Output, len));
                inter::allreduce(s, m, remote, &t, src, dst, order)
            });
            for (r, o) in out.iter().enumerate() {
                assert_eq!(o, &of(others(n, k, r)), "allreduce n={n} k={k} len={len} member {r}");
            }
            // Reduce to each root.
            for root in roots(n, k) {
                let bufs = (0..n)
                    .map(|r| Bufs {
                        input: inputs[r].clone(),
                        output: vec![0; if r == root { len } else { 0 }],
                    })
                    .collect();
                let out = run_split(n, k, bufs, Some(affine()), |s, m, remote, me| {
                    let src = span(Area::Input, len);
                    let dst = if me == root { span(Area::Output, len) } else { src };
                    inter::reduce(s, m, remote, &t, role(k, root, me), src, dst, order)
                });
                assert_eq!(out[root], of(others(n, k, root)), "reduce n={n} k={k} root={root} len={len}");
            }
        }
        // Reduce-scatter: group A's vectors have a part (of 8 bytes times j + 1) per member j
        // of B, and the reverse.
        let part_of = |groupsize: usize| -> Vec<(usize, usize)> {
            let mut off = 0;
            (0..groupsize)
                .map(|j| {
                    let p = (off, 8 * (j + 1));
                    off += p.1;
                    p
                })
                .collect()
        };
        let (pa, pb) = (part_of(n - k), part_of(k));
        let total = |p: &[(usize, usize)]| p.iter().map(|x| x.1).sum::<usize>();
        let inputs: Vec<Vec<u8>> = (0..n)
            .map(|r| data(r, if r < k { total(&pa) } else { total(&pb) }, 11))
            .collect();
        let mine = |r: usize| if r < k { pb[r] } else { pa[r - k] };
        let bufs = (0..n)
            .map(|r| Bufs {
                input: inputs[r].clone(),
                output: vec![0; mine(r).1],
            })
            .collect();
        let out = run_split(n, k, bufs, Some(affine()), |s, m, remote, me| {
            let part = if me < k { &pa } else { &pb };
            let src = span(Area::Input, total(part));
            inter::reduce_scatter(s, m, remote, &t, src, part, span(Area::Output, mine(me).1), order)
        });
        for (r, o) in out.iter().enumerate() {
            let whole = fold(&affine(), &inputs[others(n, k, r)]);
            let (off, len) = mine(r);
            assert_eq!(o, &whole[off..off + len], "reduce_scatter n={n} k={k} member {r}");
        }
    }
}

#[test]
fn inter_allgathers_and_all_to_alls_bring_every_block_of_the_other_group() {
    let t = Tunables::defaults();
    for (n, k) in splits() {
        for &len in SIZES {
            // Allgather: each member gets the other group's blocks in its rank order.
            let outlen = |r: usize| others(n, k, r).len() * len;
            let gather_bufs = || {
                (0..n)
                    .map(|r| Bufs {
                        input: data(r, len, 13),
                        output: vec![0; outlen(r)],
                    })
                    .collect()
            };
            let out = run_split(n, k, gather_bufs(), None, |s, m, remote, me| {
                let (src, dst) = (span(Area::Input, len), span(Area::Output, outlen(me)));
                inter::allgather(s, m, remote, &t, src, dst)
            });
            for (r, o) in out.iter().enumerate() {
                let want: Vec<u8> = others(n, k, r).flat_map(|j| data(j, len, 13)).collect();
                assert_eq!(o, &want, "allgather n={n} k={k} len={len} member {r}");
            }
            // Allgather with blocks in reverse order, and all-to-all: member i's block for
            // member j of the other group is data(i, len, j).
            let rev = |r: usize| -> Vec<(usize, usize)> {
                let c = others(n, k, r).len();
                (0..c).map(|j| ((c - 1 - j) * len, len)).collect()
            };
            let out = run_split(n, k, gather_bufs(), None, |s, m, remote, me| {
                let (src, dst) = (span(Area::Input, len), span(Area::Output, outlen(me)));
                inter::allgatherv(s, m, remote, src, dst, &rev(me))
            });
            for (r, o) in out.iter().enumerate() {
                let want: Vec<u8> = others(n, k, r).rev().flat_map(|j| data(j, len, 13)).collect();
                assert_eq!(o, &want, "allgatherv n={n} k={k} len={len} member {r}");
            }
            let local = |r: usize| if r < k { r } else { r - k };
            let bufs = (0..n)
                .map(|r| Bufs {
                    input: (0..others(n, k, r).len()).flat_map(|j| data(r, len, j as u8)).collect(),
                    output: vec![0; outlen(r)],
                })
                .collect();
            let out = run_split(n, k, bufs, None, |s, m, remote, me| {
                let blocks = super::reduce::equal_blocks(remote.len(), len);
                let (src, dst) = (span(Area::Input, outlen(me)), span(Area::Output, outlen(me)));
                inter::alltoall(s, m, remote, src, &blocks, dst, &blocks)
            });
            for (r, o) in out.iter().enumerate() {
                let want: Vec<u8> = others(n, k, r).flat_map(|i| data(i, len, local(r) as u8)).collect();
                assert_eq!(o, &want, "alltoall n={n} k={k} len={len} member {r}");
            }
        }
    }
}

#[test]
fn an_inter_barrier_holds_one_group_until_the_other_comes() {
    // Members 0..2 form A, 2..5 B; B's member 3 starts late: nobody may leave before it.
    let (n, k) = (5usize, 2usize);
    let world_ranks: Vec<u32> = (0..n as u32).collect();
    let mut es = world(n as u32, 4, 256, 64, true);
    let start = |es: &mut Vec<_>, me: usize| {
        let (a, b) = world_ranks.split_at(k);
        let (mine, other, local_me) = if me < k { (a, b, me) } else { (b, a, me - k) };
        let m = Members {
            world: mine,
            me: local_me,
            nodes: 1,
            node_of: &[],
        };
        let mut s = Schedule::new("barrier", 1, -(1 << 16));
        inter::barrier(&mut s, &m, other);
        let e: &mut crate::engine::Engine<_> = &mut es[me];
        // SAFETY: no buffers.
        (me, unsafe { e.start_schedule(s) })
    };
    let mut hs: Vec<_> = (0..n).filter(|&me| me != 3).map(|me| start(&mut es, me)).collect();
    for _ in 0..1000 {
        for e in es.iter_mut() {
            e.progress();
        }
    }
    for &(r, h) in &hs {
        assert!(!es[r].is_done(h), "member {r} left the barrier before member 3 came");
    }
    hs.push(start(&mut es, 3));
    run_until_done(&mut es, &hs, 10_000);
}
