//! The API on a singleton (no launcher: one rank that sends to itself), for the receive
//! paths that can be driven in one process: non-contiguous receives that must not write past
//! the message, values that are not valid `bool`/`char`, the length checks of `receive_vec`,
//! a request left pending by a caught panic, panic locations, and use after finalize.
//!
//! One test function: a process initializes weft once, and the test harness runs test
//! functions on threads of one process. Each check records its failure and the test reports
//! them all at the end, so one broken behaviour does not hide another.

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Mutex;
use weft::datatype::{MutView, UserDatatype};
use weft::topology::Process;
use weft::traits::*;

/// Where the last panic happened (file, line), recorded by the panic hook.
static LAST_PANIC: Mutex<Option<(String, u32)>> = Mutex::new(None);

fn message(e: &(dyn Any + Send)) -> String {
    e.downcast_ref::<String>()
        .cloned()
        .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

/// Runs `f`, expecting a panic whose message contains every one of `parts`.
fn expect_panic<R>(fails: &mut Vec<String>, what: &str, parts: &[&str], f: impl FnOnce() -> R) {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(_) => fails.push(format!("{what}: did not panic")),
        Err(e) => {
            let m = message(&*e);
            if !parts.iter().all(|p| m.contains(p)) {
                fails.push(format!(
                    "{what}: panic message {m:?} lacks one of {parts:?}"
                ));
            }
        }
    }
}

fn check(fails: &mut Vec<String>, ok: bool, what: String) {
    if !ok {
        fails.push(what);
    }
}

#[test]
fn the_api_on_a_singleton() {
    for v in [
        "PMI_FD",
        "PMI_PORT",
        "PMIX_RANK",
        "PMIX_NAMESPACE",
        "SLURM_STEP_NUM_TASKS",
    ] {
        std::env::remove_var(v);
    }
    std::panic::set_hook(Box::new(|info| {
        let loc = info.location().map(|l| (l.file().to_string(), l.line()));
        *LAST_PANIC.lock().unwrap_or_else(|e| e.into_inner()) = loc;
    }));
    let universe = weft::initialize().expect("initialize a singleton");
    let world = universe.world();
    let me = world.process_at_rank(0);
    let mut fails = vec![];

    non_contiguous_receives_leave_the_elements_past_the_message_alone(&me, &mut fails);
    values_that_are_not_a_bool_or_a_char_are_errors_naming_the_call(&me, &mut fails);
    receive_vec_of_a_message_that_is_not_whole_elements(&me, &mut fails);
    a_receive_pending_in_a_panicking_scope_is_cancelled(&me, &mut fails);
    panics_point_at_the_callers_line(&me, &mut fails);
    extension_collectives_on_one_member(&world, &mut fails);

    drop(universe);
    expect_panic(
        &mut fails,
        "send after finalize",
        &["weft: send:", "finalized"],
        || me.send(&1u8),
    );
    expect_panic(
        &mut fails,
        "receive after finalize",
        &["weft: receive:", "finalized"],
        || me.receive::<u8>(),
    );
    let _ = std::panic::take_hook();
    assert!(fails.is_empty(), "\n{}", fails.join("\n"));
}

/// A vector type with a hole in each element: blocks (0, 4) and (8, 4), extent 12. Two
/// elements occupy `[i32; 6]`: element 0 at indices 0 and 2, element 1 at 3 and 5.
fn holey() -> UserDatatype {
    UserDatatype::vector(2, 1, 2, &i32::equivalent_datatype())
}

fn non_contiguous_receives_leave_the_elements_past_the_message_alone(
    me: &Process<'_>,
    fails: &mut Vec<String>,
) {
    let dt = holey();
    // One element's worth (8 bytes) into room for two: element 1 must stay untouched.
    let expect = [7, -1, 8, -1, -1, -1];
    for path in [
        "receive_into",
        "matched_receive_into",
        "immediate_receive_into",
    ] {
        me.send_with_tag(&[7i32, 8][..], 20);
        let mut buf = [-1i32; 6];
        {
            // SAFETY: two elements of extent 12 bytes fit in 24 bytes.
            let mut v = unsafe { MutView::with_count_and_datatype(&mut buf[..], 2, &dt) };
            match path {
                "receive_into" => {
                    me.receive_into_with_tag(&mut v, 20);
                }
                "matched_receive_into" => {
                    let (msg, _) = me.matched_probe_with_tag(20);
                    msg.matched_receive_into(&mut v);
                }
                _ => {
                    let r = catch_unwind(AssertUnwindSafe(|| {
                        weft::request::scope(|s| {
                            me.immediate_receive_into_with_tag(s, &mut v, 20).wait();
                        })
                    }));
                    if let Err(e) = r {
                        fails.push(format!("{path}: {}", message(&*e)));
                        let _ = me.receive_vec_with_tag::<i32>(20);
                        continue;
                    }
                }
            }
        }
        check(
            fails,
            buf == expect,
            format!("{path} into a non-contiguous view: got {buf:?}, expected {expect:?}"),
        );
    }
    // The same for a matched, nonblocking receive.
    me.send_with_tag(&[7i32, 8][..], 21);
    let mut buf = [-1i32; 6];
    let r = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: as above.
        let mut v = unsafe { MutView::with_count_and_datatype(&mut buf[..], 2, &dt) };
        let (msg, _) = me.matched_probe_with_tag(21);
        weft::request::scope(|s| {
            msg.immediate_matched_receive_into(s, &mut v).wait();
        })
    }));
    match r {
        Err(e) => fails.push(format!("immediate_matched_receive_into: {}", message(&*e))),
        Ok(()) => check(
            fails,
            buf == expect,
            format!("immediate_matched_receive_into: got {buf:?}, expected {expect:?}"),
        ),
    }
}

fn values_that_are_not_a_bool_or_a_char_are_errors_naming_the_call(
    me: &Process<'_>,
    fails: &mut Vec<String>,
) {
    // The returning form: an error naming the call, nothing invalid written.
    me.send_with_tag(&2u8, 10);
    let mut b = [false];
    match me.try_receive_into_with_tag(&mut b[..], 10) {
        Ok(_) => fails.push("try_receive_into of u8 2 as bool: no error".into()),
        Err(e) => check(
            fails,
            e.call == "receive" && e.to_string().contains("bool"),
            format!("try_receive_into of u8 2 as bool: {e}"),
        ),
    }
    me.send_with_tag(&0xD800u32, 11);
    let mut c = 'x';
    match me.try_receive_into_with_tag(&mut c, 11) {
        Ok(_) => fails.push("try_receive_into of u32 0xD800 as char: no error".into()),
        Err(e) => check(
            fails,
            e.call == "receive" && e.to_string().contains("char") && c == 'x',
            format!("try_receive_into of 0xD800 as char: {e} (value now {c:?})"),
        ),
    }
    // The panicking forms: a panic naming the call.
    me.send_with_tag(&0x11_0000u32, 12);
    expect_panic(
        fails,
        "receive::<char> of 0x110000",
        &["receive", "char"],
        || me.receive_with_tag::<char>(12).1,
    );
    me.send_with_tag(&2u8, 13);
    expect_panic(
        fails,
        "matched_receive::<bool> of 2",
        &["matched_receive", "bool"],
        || me.matched_probe_with_tag(13).0.matched_receive::<bool>().1,
    );
    me.send_with_tag(&[1u8, 0, 2][..], 14);
    expect_panic(
        fails,
        "receive_vec::<bool> of [1, 0, 2]",
        &["receive_vec", "bool"],
        || me.receive_vec_with_tag::<bool>(14).1,
    );
    me.send_with_tag(&3u8, 15);
    expect_panic(
        fails,
        "immediate_receive::<bool> of 3",
        &["immediate_receive", "bool"],
        || me.immediate_receive_with_tag::<bool>(15).get().1,
    );
    me.send_with_tag(&[1u8, 0, 2][..], 16);
    let mut bs = [true; 3];
    expect_panic(
        fails,
        "immediate_receive_into [bool; 3] of [1, 0, 2]",
        &["immediate_receive_into", "bool"],
        || {
            weft::request::scope(|s| {
                me.immediate_receive_into_with_tag(s, &mut bs, 16).wait();
            })
        },
    );
    // A bool inside a struct (a non-contiguous type): (u32, bool) has a hole after the bool.
    me.send_with_tag(&(5u32, 9u8), 17);
    let mut t = (0u32, false);
    match me.try_receive_into_with_tag(&mut t, 17) {
        Ok(_) => fails.push("try_receive_into (u32, bool) of (5, 9): no error".into()),
        Err(e) => check(
            fails,
            e.call == "receive" && e.to_string().contains("bool") && t == (0, false),
            format!("try_receive_into (u32, bool) of (5, 9): {e}, value now {t:?}"),
        ),
    }
    // Valid values still arrive.
    me.send_with_tag(&[true, false][..], 18);
    me.send_with_tag(&['é', '\u{10FFFF}'][..], 19);
    let (b, _) = me.receive_vec_with_tag::<bool>(18);
    let (c, _) = me.receive_vec_with_tag::<char>(19);
    check(
        fails,
        b == [true, false] && c == ['é', '\u{10FFFF}'],
        format!("valid bool/char: got {b:?} {c:?}"),
    );
}

fn receive_vec_of_a_message_that_is_not_whole_elements(me: &Process<'_>, fails: &mut Vec<String>) {
    me.send_with_tag(&[0u8; 10][..], 30);
    expect_panic(
        fails,
        "receive_vec::<u64> of 10 bytes",
        &["receive_vec", "10", "8-byte", "whole number"],
        || me.receive_vec_with_tag::<u64>(30).1,
    );
    // The message was consumed: nothing is left to match.
    check(
        fails,
        me.immediate_probe_with_tag(30).is_none(),
        "receive_vec::<u64> of 10 bytes left the message queued".into(),
    );
}

fn a_receive_pending_in_a_panicking_scope_is_cancelled(me: &Process<'_>, fails: &mut Vec<String>) {
    for how in ["a panic caught by catch_unwind", "a forgotten request"] {
        let r = catch_unwind(AssertUnwindSafe(|| {
            let mut buf = vec![0u8; 4096];
            weft::request::scope(|s| {
                let r = me.immediate_receive_into_with_tag(s, &mut buf[..], 40);
                if how.starts_with("a panic") {
                    panic!("on purpose, with a receive pending");
                }
                std::mem::forget(r);
            });
        }));
        check(
            fails,
            r.is_err(),
            format!("{how}: the scope ended without a panic"),
        );
        // Likely the freed buffer's memory.
        let other = vec![0u8; 4096];
        me.send_with_tag(&[0xABu8; 4096][..], 40);
        let overwritten = other.iter().filter(|&&b| b != 0).count();
        check(
            fails,
            overwritten == 0,
            format!("{how}: {overwritten} of 4096 bytes of a new vector overwritten"),
        );
        // The receive was cancelled, so the message waits to be received.
        if me.immediate_probe_with_tag(40).is_some() {
            let (v, _) = me.receive_vec_with_tag::<u8>(40);
            check(fails, v == [0xAB; 4096], format!("{how}: message damaged"));
        } else {
            fails.push(format!(
                "{how}: the message went into the dropped receive's buffer"
            ));
        }
    }
}

fn panics_point_at_the_callers_line(me: &Process<'_>, fails: &mut Vec<String>) {
    let here = file!();
    let mut at = |what: &str, line: u32, f: &dyn Fn()| {
        *LAST_PANIC.lock().unwrap() = None;
        let r = catch_unwind(AssertUnwindSafe(f));
        let loc = LAST_PANIC.lock().unwrap().clone();
        if r.is_ok() {
            fails.push(format!("{what}: did not panic"));
        } else if !loc
            .as_ref()
            .is_some_and(|(f, l)| f == here && (line..=line + 3).contains(l))
        {
            fails.push(format!(
                "{what}: panic located at {loc:?}, not {here}:{line}"
            ));
        }
    };
    at("send_with_tag, bad tag", line!(), &|| {
        me.send_with_tag(&1u8, -5)
    });
    at("send, bad buffer size", line!(), &|| {
        me.buffered_send(&[0u8; 1 << 20][..])
    });
    me.send_with_tag(&[0u8; 9][..], 50);
    at("receive_into, truncation", line!(), &|| {
        me.receive_into_with_tag(&mut [0u8; 4][..], 50);
    });
    me.send_with_tag(&[0u8; 9][..], 51);
    at("receive_vec, not whole", line!(), &|| {
        me.receive_vec_with_tag::<u32>(51);
    });
    me.send_with_tag(&[0u8; 9][..], 52);
    at("matched_receive_into, truncation", line!(), &|| {
        let (m, _) = me.matched_probe_with_tag(52);
        m.matched_receive_into(&mut [0u8; 4][..]);
    });
    at("immediate_send_with_tag, bad tag", line!(), &|| {
        weft::request::scope(|s| me.immediate_send_with_tag(s, &1u8, -3).wait());
    });
}

/// All-to-all-w, reduce-scatter with counts and the in-place forms on one member: their
/// results, and their bad-input errors naming the call and the values.
fn extension_collectives_on_one_member(
    world: &weft::topology::SimpleCommunicator,
    fails: &mut Vec<String>,
) {
    use weft::collective::{Part, PartMut, SystemOperation};
    use weft::datatype::{Partition, PartitionMut};
    let pair = (3u8, 7u64);
    let mut got = (0u8, 0u64);
    world.all_to_all_w_into(&[Part::new(&pair)], &mut [PartMut::new(&mut got)]);
    check(
        fails,
        got == pair,
        format!("alltoallw to itself gave {got:?}"),
    );
    expect_panic(
        fails,
        "alltoallw with two send parts",
        &[
            "all_to_all_w_into",
            "2 send parts and 1 receive parts for 1 members",
        ],
        || {
            world.all_to_all_w_into(
                &[Part::new(&pair), Part::new(&pair)],
                &mut [PartMut::new(&mut got)],
            )
        },
    );
    expect_panic(
        fails,
        "alltoallw with parts of different sizes",
        &[
            "all_to_all_w_into",
            "member 0 sends itself 8 bytes where its receive part for itself holds 9 bytes",
        ],
        || world.all_to_all_w_into(&[Part::new(&5u64)], &mut [PartMut::new(&mut got)]),
    );
    let mut b = [1u32, 2, 3];
    world.all_reduce_in_place(&mut b[..], SystemOperation::sum());
    check(
        fails,
        b == [1, 2, 3],
        format!("allreduce in place on one member gave {b:?}"),
    );
    let mut r = [0u32; 2];
    world.reduce_scatter_varcount_into(
        &Partition::new(&b[..], vec![2], vec![1]),
        &mut r[..],
        SystemOperation::max(),
    );
    check(
        fails,
        r == [2, 3],
        format!("reduce_scatter with counts gave {r:?}"),
    );
    expect_panic(
        fails,
        "reduce_scatter with a part outside the buffer",
        &["reduce_scatter_varcount_into", "part 0", "3 elements at 1"],
        || {
            world.reduce_scatter_varcount_into(
                &Partition::new(&b[..], vec![3], vec![1]),
                &mut r[..],
                SystemOperation::max(),
            )
        },
    );
    let mut v = [4u32, 9, 9];
    let mut a = [1u16, 2];
    expect_panic(
        fails,
        "alltoallv with its own parts of different sizes",
        &[
            "all_to_all_varcount_into",
            "member 0 sends itself 4 bytes",
            "holds 2 bytes",
        ],
        || {
            let s = Partition::new(&b[..], vec![1], vec![0]);
            world.all_to_all_varcount_into(&s, &mut PartitionMut::new(&mut a[..], vec![1], vec![0]))
        },
    );
    // An empty part touches no memory: any displacement will do (mpi4py passes them).
    let (nothing, mut none): ([u16; 0], [u16; 0]) = ([], []);
    world.all_to_all_varcount_into(
        &Partition::new(&nothing[..], vec![0], vec![7]),
        &mut PartitionMut::new(&mut none[..], vec![0], vec![3]),
    );
    world.reduce_scatter_varcount_in_place(
        &mut PartitionMut::new(&mut v[..], vec![1], vec![0]),
        SystemOperation::sum(),
    );
    check(
        fails,
        v == [4, 9, 9],
        format!("reduce_scatter in place gave {v:?}"),
    );
}
