//! Multi-process window tests (issue 12): the `rma_suite` example through `weft run` at 1 to
//! 8 ranks (beyond 2 oversubscribes this machine on purpose, the case the lock's idle
//! progress and yield are for). Every case checks its results itself and prints a line when
//! all ranks agree; nothing may be left behind.

mod common;
use common::*;
use std::sync::Mutex;

static SERIAL: Mutex<()> = Mutex::new(());

fn passes(n: u32, case: &str) {
    passes_with(n, case, &[]);
}

/// [`passes`], with `env` set for every rank.
fn passes_with(n: u32, case: &str, env: &[(&str, &str)]) {
    let exe = build_example("weft-cli", "rma_suite", true);
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let before = weft_segments();
    let mut c = weft();
    c.envs(env.iter().copied());
    c.args(["run", "-n", &n.to_string()]).arg(&exe).arg(case);
    let out = run(c, &format!("weft run -n {n} rma_suite {case}"));
    assert_eq!(out.code, Some(0), "{case} on {n} ranks ({env:?}): {out:?}");
    assert!(
        out.stdout
            .contains(&format!("rma_suite {case}: ok on {n} ranks")),
        "{out:?}"
    );
    let leaked: Vec<String> = weft_segments()
        .into_iter()
        .filter(|s| !before.contains(s))
        .collect();
    assert!(leaked.is_empty(), "{case}: left segments {leaked:?}");
    wait_none_left("rma_suite ranks", || pids_of(&exe));
}

#[test]
fn exclusive_lock_epochs_give_an_exact_counter() {
    for n in [1, 2, 3, 8] {
        passes(n, "counter");
    }
}

#[test]
fn concurrent_atomics_on_one_location_are_exact() {
    for n in [1, 2, 4, 8] {
        passes(n, "atomics");
    }
}

#[test]
fn large_accumulates_and_one_element_atomics_on_the_same_elements_are_exact() {
    for n in [2, 4] {
        passes(n, "mixed");
    }
}

#[test]
fn lock_epochs_on_other_members_take_the_word_at_their_first_operation() {
    for n in [2, 3, 5] {
        passes(n, "lazy");
    }
}

#[test]
fn a_compare_and_swap_spin_lock_guards_a_counter() {
    for n in [2, 5] {
        passes(n, "cas");
    }
}

#[test]
fn post_start_complete_wait_with_overlapping_groups() {
    for n in [1, 2, 3, 6] {
        passes(n, "pscw");
    }
}

#[test]
fn allocate_shared_parts_are_reached_by_pointer() {
    for n in [1, 4] {
        passes(n, "shared");
    }
}

#[test]
fn puts_between_fences_land_in_a_ring() {
    for n in [1, 2, 3, 6] {
        passes(n, "fence");
    }
}

#[test]
fn a_target_asleep_outside_the_library_delays_no_one() {
    passes(3, "asleep");
}

#[test]
fn bad_displacements_targets_and_epochs_are_typed_errors() {
    for n in [1, 3] {
        passes(n, "errors");
    }
}

#[test]
fn many_operations_in_one_epoch_land_in_order() {
    for n in [1, 3] {
        passes(n, "stream");
    }
}

#[test]
fn a_window_over_the_programs_own_memory_gives_it_back_with_every_write() {
    for n in [1, 2, 4] {
        passes(n, "created");
    }
}

#[test]
fn fences_asserted_empty_do_not_synchronize_and_bad_assertions_are_errors() {
    for n in [1, 2, 3] {
        passes(n, "assertions");
    }
}

#[test]
fn dynamic_windows_reach_attached_regions_only() {
    for n in [1, 2, 3] {
        passes(n, "dynamic");
    }
}

#[test]
fn datatypes_on_both_sides_request_based_operations_and_attributes() {
    for n in [1, 2, 3] {
        passes(n, "typed");
    }
}

/// The remote path (each operation an active message that the target's handler does on its own
/// memory), forced on one node, over shared memory and over TCP: every case but `asleep` (a
/// target computing outside the library delays remote operations until it calls in); with one
/// operation in flight at a time (`WEFT_RMA_OPS=1`, `WEFT_RMA_OPS_GLOBAL=0`: each waits for the
/// one before) and lock_all's state kept for one target (`WEFT_RMA_TARGETS=1`: a second falls
/// back to window-wide state) too.
#[test]
fn the_remote_path_forced_on_one_node_over_shared_memory_and_tcp() {
    let shm: &[(&str, u32)] = &[
        ("counter", 3),
        ("atomics", 4),
        ("mixed", 3),
        ("cas", 3),
        ("fence", 3),
        ("pscw", 3),
        ("errors", 3),
        ("shared", 2),
        ("stream", 3),
        ("created", 3),
        ("assertions", 2),
        ("dynamic", 3),
        ("typed", 3),
        ("lazy", 3),
    ];
    let tcp: &[(&str, u32)] = &[
        ("counter", 3),
        ("atomics", 3),
        ("fence", 2),
        ("stream", 2),
        ("created", 2),
        ("dynamic", 2),
        ("typed", 2),
    ];
    let tiny: &[(&str, u32)] = &[
        ("counter", 3),
        ("pscw", 3),
        ("stream", 3),
        ("atomics", 4),
        ("dynamic", 3),
        ("typed", 2),
        ("lazy", 3),
    ];
    for (transports, (ops, global, targets), cases) in [
        ("shm,tcp", ("256", "1024", "256"), shm),
        ("tcp", ("256", "1024", "256"), tcp),
        ("shm,tcp", ("1", "0", "1"), tiny),
    ] {
        for &(case, n) in cases {
            let env = [
                ("WEFT_RMA_MESSAGES", "1"),
                ("WEFT_TRANSPORTS", transports),
                ("WEFT_RMA_OPS", ops),
                ("WEFT_RMA_OPS_GLOBAL", global),
                ("WEFT_RMA_TARGETS", targets),
            ];
            passes_with(n, case, &env);
        }
    }
}
