//! The runtime is process-wide and owned by one thread at a time (MPI_THREAD_SERIALIZED for
//! the C ABI): the initializing thread owns it; another thread is refused with a message
//! naming the threading level until it adopts the runtime; an adoption while a call is
//! inside is refused; and ownership can come back to finalize.
//!
//! One test function: a process initializes weft once (a singleton, no launcher).

use std::panic::catch_unwind;
use weft::runtime;
use weft::traits::*;

fn message(e: &(dyn std::any::Any + Send)) -> String {
    e.downcast_ref::<String>()
        .cloned()
        .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

#[test]
fn one_thread_at_a_time_owns_the_runtime() {
    let universe = weft::initialize().expect("initialize");
    let world = universe.world();
    assert!(runtime::is_owner());
    let rank = runtime::inspect(|rt| rt.boot.rank);

    // Another thread sees a running runtime but may not use it without adopting it.
    let refused = std::thread::spawn(|| {
        assert!(runtime::is_running());
        assert!(!runtime::is_owner());
        let e = catch_unwind(|| runtime::inspect(|rt| rt.boot.rank)).expect_err("not refused");
        message(&*e)
    })
    .join()
    .unwrap();
    assert!(
        refused.contains("initialized on another thread"),
        "{refused}"
    );

    // Adopting while this thread is inside a call is refused (the serialized level broken).
    let overlap = runtime::inspect(|_| {
        std::thread::spawn(|| {
            // SAFETY: the test breaks the promise on purpose; `adopt` must refuse before it
            // changes anything, and this thread touches nothing of the runtime after.
            unsafe { runtime::adopt("test adopt") }
        })
        .join()
        .unwrap()
    });
    let e = overlap.expect_err("an overlapping adoption was allowed");
    assert!(e.to_string().contains("another thread is inside"), "{e}");
    assert!(runtime::is_owner(), "a refused adoption changed the owner");

    // A serialized hand-over: the other thread adopts, uses, and this thread takes it back.
    let seen = std::thread::spawn(|| {
        // SAFETY: the main thread is blocked in `join` and uses nothing of weft meanwhile;
        // spawn and join order its calls before and after this thread's.
        unsafe { runtime::adopt("test adopt") }.expect("adopt");
        assert!(runtime::is_owner());
        runtime::inspect(|rt| rt.boot.rank)
    })
    .join()
    .unwrap();
    assert_eq!(seen, rank);
    assert!(!runtime::is_owner());
    let e = catch_unwind(|| runtime::inspect(|rt| rt.boot.rank)).expect_err("not refused");
    assert!(message(&*e).contains("another thread"), "{}", message(&*e));
    // SAFETY: the other thread has ended (joined above).
    unsafe { runtime::adopt("test adopt") }.expect("adopt back");
    assert_eq!(runtime::inspect(|rt| rt.boot.rank), rank);
    world.barrier();

    // A nested call is refused with its own message, not a deadlock or a second `&mut`.
    let nested = runtime::inspect(|_| catch_unwind(|| runtime::inspect(|_| ())));
    let e = nested.expect_err("a nested call got in");
    assert!(
        message(&*e).contains("already inside a call"),
        "{}",
        message(&*e)
    );

    drop(world);
    drop(universe);
    assert!(runtime::is_finalized());
}
