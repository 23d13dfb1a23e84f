//! Spawns copies of itself and talks to them: `spawn_probe [N]` on every rank of a job
//! spawns N children (default 2) with rank 0 as the root, each child sends its rank to the
//! parents' rank 0, and both sides merge the intercommunicator and sum over it.
//! `spawn_probe N panic` makes child rank 1 panic instead (the whole job must end).
//! Run with `weft run -n 2 --example spawn_probe`.

use std::process::Command;
use weft::collective::SystemOperation;
use weft::topology::MergeOrder;
use weft::traits::*;

fn main() {
    let universe = weft::initialize().unwrap();
    let world = universe.world();
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(parent) = world.parent() {
        // A child: `child N MODE`.
        if args.get(2).map(String::as_str) == Some("panic") && world.rank() == 1 {
            panic!("child rank 1 panics on purpose");
        }
        parent.process_at_rank(0).send(&world.rank());
        let merged = parent.merge(MergeOrder::High);
        let mut sum = 0;
        merged.all_reduce_into(&100, &mut sum, SystemOperation::sum());
        let expect = parent.remote_size() + 100 * world.size();
        assert_eq!(sum, expect, "child sum");
        println!(
            "spawn_probe: child rank {} of {} ok",
            world.rank(),
            world.size()
        );
        return;
    }
    let n: i32 = args.first().map_or(2, |a| a.parse().expect("N"));
    let mode = args.get(1).cloned().unwrap_or_else(|| "ok".into());
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["child", &n.to_string(), &mode]);
    let kids = world.process_at_rank(0).spawn(&cmd, n).expect("spawn");
    assert_eq!(kids.remote_size(), n);
    if world.rank() == 0 {
        let mut seen = vec![false; n as usize];
        for _ in 0..n {
            let (r, _) = kids.any_process().receive::<i32>();
            seen[r as usize] = true;
        }
        assert!(seen.iter().all(|&s| s), "heard from every child");
    }
    let merged = kids.merge(MergeOrder::Low);
    let mut sum = 0;
    merged.all_reduce_into(&1, &mut sum, SystemOperation::sum());
    assert_eq!(sum, world.size() + 100 * n, "parent sum");
    println!(
        "spawn_probe: parent rank {} of {} ok",
        world.rank(),
        world.size()
    );
}
