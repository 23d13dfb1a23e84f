//! The Rust API and `weft::ffi` (MPI's C functions) in one program, on one runtime:
//! `weft run -n N ffi_mixed`. The Rust API initializes; C calls then see MPI running, on the
//! same world (messages cross between the two); `MPI_Init`/`MPI_Finalize` from C are refused
//! with an error (the Rust `Universe` owns the runtime); after the `Universe` drops, C sees
//! MPI finalized. Prints `ffi_mixed: rank R of N ok` when every check holds.

use std::ptr::null_mut;
use weft::ffi;
use weft::traits::*;

/// Fails the program with the call's name unless `rc` is MPI_SUCCESS.
fn ok(call: &str, rc: ffi::c_int) {
    assert_eq!(rc, ffi::MPI_SUCCESS, "{call} returned {rc}");
}

fn main() {
    let universe = weft::initialize().expect("initialize");
    let world = universe.world();
    let (rank, size) = (world.rank(), world.size());

    let (mut flag, mut c_rank, mut c_size) = (0, -1, -1);
    // SAFETY (every ffi call below): live handles (predefined ones, or ones the calls made)
    // and valid places for the results, as the standard asks.
    unsafe {
        ok("MPI_Initialized", ffi::MPI_Initialized(&mut flag));
        ok(
            "MPI_Comm_rank",
            ffi::MPI_Comm_rank(ffi::MPI_COMM_WORLD, &mut c_rank),
        );
        ok(
            "MPI_Comm_size",
            ffi::MPI_Comm_size(ffi::MPI_COMM_WORLD, &mut c_size),
        );
    }
    assert_eq!(
        (flag, c_rank, c_size),
        (1, rank, size),
        "C sees another world"
    );

    // A collective through C over the world the Rust API uses.
    let mut sum = 0i32;
    unsafe {
        ok(
            "MPI_Allreduce",
            ffi::MPI_Allreduce(
                (&rank as *const i32).cast(),
                (&mut sum as *mut i32).cast(),
                1,
                ffi::MPI_INT,
                ffi::MPI_SUM,
                ffi::MPI_COMM_WORLD,
            ),
        );
    }
    assert_eq!(sum, size * (size - 1) / 2, "MPI_Allreduce's sum");

    // A ring: each rank sends its rank with MPI_Send, and receives its left neighbour's
    // through the Rust API; then back the other way, Rust sending and C receiving.
    let (right, left) = ((rank + 1) % size, (rank + size - 1) % size);
    if size > 1 {
        let value = rank * 10;
        let send = || unsafe {
            ok(
                "MPI_Send",
                ffi::MPI_Send(
                    (&value as *const i32).cast(),
                    1,
                    ffi::MPI_INT,
                    right,
                    7,
                    ffi::MPI_COMM_WORLD,
                ),
            )
        };
        let receive = || world.process_at_rank(left).receive_with_tag::<i32>(7);
        let (got, status) = if rank % 2 == 0 {
            send();
            receive()
        } else {
            let r = receive();
            send();
            r
        };
        assert_eq!((got, status.source_rank()), (left * 10, left), "C to Rust");

        let mut back = -1i32;
        let mut status = ffi::MPI_Status::default();
        let c_receive = |back: &mut i32, status: &mut ffi::MPI_Status| unsafe {
            ok(
                "MPI_Recv",
                ffi::MPI_Recv(
                    (back as *mut i32).cast(),
                    1,
                    ffi::MPI_INT,
                    ffi::MPI_ANY_SOURCE,
                    ffi::MPI_ANY_TAG,
                    ffi::MPI_COMM_WORLD,
                    status,
                ),
            )
        };
        if rank % 2 == 0 {
            world.process_at_rank(left).send_with_tag(&(rank + 100), 8);
            c_receive(&mut back, &mut status);
        } else {
            c_receive(&mut back, &mut status);
            world.process_at_rank(left).send_with_tag(&(rank + 100), 8);
        }
        assert_eq!(
            (back, status.MPI_SOURCE, status.MPI_TAG),
            (right + 100, right, 8),
            "Rust to C"
        );
    }

    // The Rust API owns the runtime: C's MPI_Init and MPI_Finalize are refused, with an error
    // returned once the handlers say so.
    unsafe {
        for comm in [ffi::MPI_COMM_WORLD, ffi::MPI_COMM_SELF] {
            ok(
                "MPI_Comm_set_errhandler",
                ffi::MPI_Comm_set_errhandler(comm, ffi::MPI_ERRORS_RETURN),
            );
        }
        let mut class = 0;
        let rc = ffi::MPI_Init(null_mut(), null_mut());
        ok("MPI_Error_class", ffi::MPI_Error_class(rc, &mut class));
        assert_eq!(
            class,
            ffi::MPI_ERR_OTHER,
            "MPI_Init while the Rust API runs"
        );
        let rc = ffi::MPI_Finalize();
        ok("MPI_Error_class", ffi::MPI_Error_class(rc, &mut class));
        assert_eq!(
            class,
            ffi::MPI_ERR_OTHER,
            "MPI_Finalize while the Rust API runs"
        );
        ok("MPI_Barrier", ffi::MPI_Barrier(ffi::MPI_COMM_WORLD));
    }

    drop(world);
    drop(universe);
    unsafe { ok("MPI_Finalized", ffi::MPI_Finalized(&mut flag)) };
    assert_eq!(flag, 1, "C sees MPI finalized after the Universe drops");
    println!("ffi_mixed: rank {rank} of {size} ok");
}
