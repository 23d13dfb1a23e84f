//! What the C ABI keeps between calls: the universe, the predefined communicators, the
//! threading level granted, and the thread that initialized.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicU8, Ordering::Relaxed};
use weft::topology::SimpleCommunicator;

/// A communicator as C holds it: Weft's communicator and the error handler attached.
pub(crate) struct Comm {
    pub(crate) comm: SimpleCommunicator,
    /// The error handler's handle value (`MPI_ERRORS_ARE_FATAL` until set).
    pub(crate) errhandler: std::cell::Cell<usize>,
}

impl Comm {
    pub(crate) fn new(comm: SimpleCommunicator) -> Comm {
        Comm {
            comm,
            errhandler: std::cell::Cell::new(crate::abi::MPI_ERRORS_ARE_FATAL),
        }
    }
}

/// Everything initialize made.
pub(crate) struct Running {
    pub(crate) world: Comm,
    pub(crate) self_comm: Comm,
    pub(crate) thread_level: i32,
    pub(crate) main_thread: std::thread::ThreadId,
    /// Requests the program freed before they completed (MPI_Request_free).
    pub(crate) detached: std::cell::RefCell<Vec<crate::requests::CRequest>>,
    /// Last, so it drops last: dropping it finalizes weft, after the communicators above.
    pub(crate) _universe: weft::environment::Universe,
}

/// Where [`Running`] lives: a process-wide cell.
struct Cell(UnsafeCell<Option<Running>>);

// SAFETY: the cell is written by MPI_Init/MPI_Finalize and read by other calls, all made one
// at a time (MPI's rule for MPI_Init and MPI_Finalize, and the serialized threading level for
// the rest: each call adopts weft's runtime first, which refuses a call that overlaps another
// it can see). The objects inside are only touched inside those calls.
unsafe impl Sync for Cell {}

static RUNNING: Cell = Cell(UnsafeCell::new(None));

/// Where the process is in its life: see [`Phase`].
static PHASE: AtomicU8 = AtomicU8::new(Phase::Before as u8);

/// Before MPI_Init, between it and MPI_Finalize, after.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u8)]
pub(crate) enum Phase {
    Before = 0,
    Running = 1,
    After = 2,
}

pub(crate) fn phase() -> Phase {
    match PHASE.load(Relaxed) {
        0 => Phase::Before,
        1 => Phase::Running,
        _ => Phase::After,
    }
}

/// Installs what MPI_Init made.
pub(crate) fn install(running: Running) {
    // SAFETY: MPI_Init runs once, before any other call that reads the cell (see `Cell`).
    unsafe { *RUNNING.0.get() = Some(running) };
    PHASE.store(Phase::Running as u8, Relaxed);
}

/// Takes what MPI_Init made, for MPI_Finalize.
pub(crate) fn take() -> Option<Running> {
    PHASE.store(Phase::After as u8, Relaxed);
    // SAFETY: MPI_Finalize's call holds the runtime (see `Cell`); nothing borrowed from the
    // cell outlives the call that borrowed it.
    unsafe { (*RUNNING.0.get()).take() }
}

/// What MPI_Init made, while running.
pub(crate) fn running() -> Option<&'static Running> {
    // SAFETY: see `Cell`: this call holds the runtime, and the reference is used within it
    // (callers do not keep it past their return; MPI_Finalize is the only writer).
    unsafe { (*RUNNING.0.get()).as_ref() }
}
