//! What the C ABI keeps between calls: the universe, the predefined communicators, the
//! threading level granted, and the thread that initialized.

use crate::topology::SimpleCommunicator;
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicU8, Ordering::Relaxed};

/// A communicator as C holds it: Weft's communicator, the error handler attached, its
/// attributes. A user communicator's handle is a pointer to one, boxed.
pub(crate) struct Comm {
    /// [`COMM_MAGIC`] while the handle is live; cleared when it is freed, so a freed handle
    /// used again is caught while its memory has not been reused.
    pub(crate) magic: std::cell::Cell<u64>,
    pub(crate) comm: SimpleCommunicator,
    /// The error handler's handle value (`MPI_ERRORS_ARE_FATAL` until set).
    pub(crate) errhandler: std::cell::Cell<usize>,
    /// Attribute values by keyval, in the order they were set.
    pub(crate) attrs: std::cell::RefCell<Vec<(i32, *mut std::ffi::c_void)>>,
    /// The buffer the program attached (MPI_Comm_attach_buffer): address and size, for the
    /// detach to hand back.
    pub(crate) buffer: std::cell::Cell<Option<(usize, i64)>>,
}

/// The mark of a live [`Comm`].
pub(crate) const COMM_MAGIC: u64 = 0x5745_4654_434f_4d4d; // "WEFTCOMM"

impl crate::c_abi::handles::Marked for Comm {
    const MARK: u64 = COMM_MAGIC;
    fn mark(&self) -> u64 {
        self.magic.get()
    }
}

impl Comm {
    pub(crate) fn new(comm: SimpleCommunicator, errhandler: usize) -> Comm {
        crate::c_abi::errhandler::retain(errhandler);
        Comm {
            magic: std::cell::Cell::new(COMM_MAGIC),
            comm,
            errhandler: std::cell::Cell::new(errhandler),
            attrs: Default::default(),
            buffer: Default::default(),
        }
    }
}

impl Drop for Comm {
    fn drop(&mut self) {
        crate::c_abi::errhandler::release(self.errhandler.get());
    }
}

/// An attribute key made by MPI_Comm_create_keyval: its callbacks and extra state.
#[derive(Clone, Copy)]
pub(crate) struct Keyval {
    /// The copy callback, or MPI_COMM_NULL_COPY_FN (0) / MPI_COMM_DUP_FN (1).
    pub(crate) copy: usize,
    /// The delete callback, or MPI_COMM_NULL_DELETE_FN (0).
    pub(crate) delete: usize,
    pub(crate) extra_state: *mut std::ffi::c_void,
}

/// Everything initialize made.
pub(crate) struct Running {
    pub(crate) world: Comm,
    pub(crate) self_comm: Comm,
    pub(crate) thread_level: i32,
    /// Whether the Rust API started the runtime and the C layer joined it
    /// (`env::join_rust_runtime`): its `Universe` finalizes, not MPI_Finalize.
    pub(crate) joined_rust: bool,
    pub(crate) main_thread: std::thread::ThreadId,
    /// Requests the program freed before they completed (MPI_Request_free).
    pub(crate) detached: std::cell::RefCell<Vec<crate::c_abi::requests::CRequest>>,
    /// Attribute keys by number (from [`FIRST_KEYVAL`] up; freed ones removed).
    pub(crate) keyvals: std::cell::RefCell<std::collections::BTreeMap<i32, Keyval>>,
    /// The values of the predefined attributes, where `MPI_Comm_get_attr` points.
    pub(crate) predefined_attrs: PredefinedAttrs,
    /// What MPI_INFO_ENV stands for.
    pub(crate) info_env: crate::c_abi::info::CInfo,
    /// What MPI_GROUP_EMPTY stands for.
    pub(crate) group_empty: crate::c_abi::group::CGroup,
    /// The buffered-send buffer attached (address and size), if any.
    pub(crate) bsend_buffer: std::cell::Cell<Option<(usize, i64)>>,
    /// The handle MPI_Comm_get_parent hands out, once asked (MPI_COMM_NULL: none, or freed).
    pub(crate) parent: std::cell::Cell<Option<*mut std::ffi::c_void>>,
    /// The ports this process opened (MPI_Open_port) and has not closed.
    pub(crate) ports: std::cell::RefCell<Vec<crate::topology::Port>>,
    /// Last, so it drops last: dropping it finalizes weft, after the communicators above.
    pub(crate) universe: std::cell::RefCell<crate::environment::Universe>,
}

/// The first number MPI_Comm_create_keyval hands out (the predefined keys are below).
pub(crate) const FIRST_KEYVAL: i32 = 1000;

/// The predefined attributes' values (MPI_TAG_UB and the others): `MPI_Comm_get_attr` hands
/// out pointers to these, which stay valid while MPI runs.
pub(crate) struct PredefinedAttrs {
    pub(crate) tag_ub: std::ffi::c_int,
    pub(crate) host: std::ffi::c_int,
    pub(crate) io: std::ffi::c_int,
    pub(crate) wtime_is_global: std::ffi::c_int,
    pub(crate) universe_size: std::ffi::c_int,
    pub(crate) appnum: std::ffi::c_int,
    /// Written by MPI_Add_error_class and the others (`errhandler`).
    pub(crate) lastusedcode: std::cell::Cell<std::ffi::c_int>,
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

/// The world model's [`Phase`] (MPI_Init .. MPI_Finalize): the runtime may also run for
/// sessions only (MPI_Session_init), and outlive MPI_Finalize while sessions remain.
static WORLD_MODEL: AtomicU8 = AtomicU8::new(Phase::Before as u8);

/// Sessions initialized and not finalized.
static SESSIONS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// The world model's phase.
pub(crate) fn world_model() -> Phase {
    match WORLD_MODEL.load(Relaxed) {
        0 => Phase::Before,
        1 => Phase::Running,
        _ => Phase::After,
    }
}

/// Sets the world model's phase.
pub(crate) fn set_world_model(p: Phase) {
    WORLD_MODEL.store(p as u8, Relaxed);
}

/// Counts a session in (`+1`) or out (`-1`); the sessions left.
pub(crate) fn count_session(delta: isize) -> usize {
    let n = (SESSIONS.load(Relaxed) as isize + delta) as usize;
    SESSIONS.store(n, Relaxed);
    n
}

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

/// Whether the phase is `Phase::Running`: one load and compare, for every call's way in.
#[inline(always)]
pub(crate) fn phase_is_running() -> bool {
    PHASE.load(Relaxed) == Phase::Running as u8
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

/// The Rust API's `Universe` is finalizing: the C layer's state, if it joined that runtime,
/// goes first (its communicators belong to the runtime), and C calls from now on see MPI
/// finalized.
pub(crate) fn detach_from_rust() {
    if running().is_some_and(|r| r.joined_rust) {
        crate::c_abi::requests::sweep_detached(true);
        drop(take());
        set_world_model(Phase::After);
    }
}
