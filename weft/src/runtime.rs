//! The per-process runtime behind the front ends: the engine over the node fabric, the
//! bootstrap client, the context-id mask and communicator names.
//!
//! It is one process-wide object, not a thread-local: the C ABI's `MPI_THREAD_SERIALIZED`
//! lets any thread call, one at a time. One thread at a time owns it (the one that
//! initialized, until the C ABI [`adopt`]s it for another) and only the owner gets in, so the
//! fast path is a thread-id compare and a flag, with no locked instruction: a thread that is
//! not the owner gets the same clear error as before, and the hand-over between threads is the
//! C caller's promise of serialized calls (the standard's), made in `unsafe` code.

use crate::boot::Boot;
use crate::comm::context::ContextMask;
use crate::engine::{Config, Engine};
use crate::error::{Error, ErrorClass, Result};
use crate::fabric::node::NodeFabric;
use crate::fabric::shm::doorbell::Fences;
use crate::tunables::Tunables;
use std::cell::UnsafeCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering::Relaxed};
use std::time::Instant;

/// Everything one initialized process holds.
pub struct Runtime {
    /// The progress engine over this node's transports.
    pub engine: Engine<NodeFabric>,
    /// The process-manager client and what it told us.
    pub boot: Boot,
    /// Free context-id pairs.
    pub contexts: ContextMask,
    /// The next collective number of each context pair.
    pub sequences: crate::comm::sequence::Sequences,
    /// Each context pair's node-shared collective area, once a collective has asked for it
    /// (`None`: its members are not all on this node, or it has one member).
    pub node_areas: crate::comm::context::PairTable<Option<crate::coll::shm::NodeArea>>,
    /// Whether the node-shared areas' large data goes by ordinary stores only, as this
    /// process last found by timing (`NodeArea::calibrate_stores`); `None` before it did.
    pub coll_stores: Option<bool>,
    /// Communicator names by context pair.
    pub names: HashMap<u32, String>,
    /// The tunables in force.
    pub tunables: Tunables,
    /// The intercommunicator with the job that spawned this one (MPI_Comm_get_parent), made
    /// during initialize; `None` when this job was not spawned.
    pub parent: Option<std::rc::Rc<crate::comm::CommData>>,
    /// The node each node of another job got in `boot.node_of` (see `comm::dynamic`).
    pub other_nodes: HashMap<(u32, u32), u32>,
}

impl Runtime {
    /// The pieces a join with another job works on.
    pub fn joining(&mut self) -> crate::comm::dynamic::Joining<'_> {
        crate::comm::dynamic::Joining {
            eng: &mut self.engine,
            boot: &mut self.boot,
            tunables: &self.tunables,
            mask: &mut self.contexts,
            other_nodes: &mut self.other_nodes,
        }
    }

    /// The world communicator's data.
    pub fn world(&self) -> crate::comm::CommData {
        crate::comm::CommData::new(
            crate::comm::context::WORLD_PAIR,
            std::rc::Rc::new(crate::comm::group::GroupData::new((0..self.boot.size).collect())),
            self.boot.rank,
        )
    }

    /// In a spawned job (`PMI_SPAWNED=1`), joins the parents at the port their key-value
    /// space entry names. Collective over the world.
    fn connect_parent(&mut self) -> Result<()> {
        if !crate::boot::spawned() {
            return Ok(());
        }
        const CALL: &str = "initialize";
        let key = crate::comm::dynamic::PARENT_PORT_KEY;
        let port = self.boot.pmi.get_preput(key).map_err(|e| {
            Error::new(
                ErrorClass::Spawn,
                CALL,
                format!("this job was spawned (PMI_SPAWNED=1) but its parents' port is not in its key-value space: {}", e.detail),
            )
        })?;
        let world = self.world();
        let meet = (self.boot.rank == 0).then_some(crate::comm::dynamic::Meet::Connect(&port));
        let parent = crate::comm::dynamic::join(CALL, self.joining(), &world, 0, meet)?;
        self.parent = Some(std::rc::Rc::new(parent));
        Ok(())
    }
}

/// The process's runtime and who may use it.
struct Slot {
    /// The runtime, while it runs. Touched only by the owner thread, inside [`enter`].
    runtime: UnsafeCell<Option<Runtime>>,
    /// Who may come in: the id ([`this_thread`], even) of the thread allowed in (0 before
    /// initialize), plus [`INSIDE`] while a call of it is inside (a reentrant call, or a drop
    /// during one, must not get a second `&mut`). One word, so the way in is one compare.
    entry: AtomicUsize,
    /// A [`State`] as its `u8`.
    state: AtomicU8,
    /// `tunables.coll_check` of the running runtime: every collective call asks, so it is
    /// kept where reading it costs a load, not an entry into the runtime.
    coll_check: AtomicBool,
}

// SAFETY: the runtime inside (which holds `Rc`s and raw buffer views, so is neither `Send`
// nor `Sync`) is only touched by the thread whose id is in `entry`, and its `INSIDE` bit keeps
// that thread's calls from overlapping. The owner changes from one thread to another only in
// [`adopt`], whose caller promises that no other thread is using weft and that its own
// synchronization orders the old owner's last call before the new owner's first (MPI's
// serialized level): then no two threads ever touch the runtime at the same time. (A thread
// id is the thread's control block's address, so a thread started after the owner ended may
// get the same id and find itself the owner: its first call comes after the old owner's
// exit, since the C library reuses a control block only once the thread that had it has
// ended and been joined or, detached, released it under the library's lock.)
unsafe impl Sync for Slot {}

static SLOT: Slot = Slot {
    runtime: UnsafeCell::new(None),
    entry: AtomicUsize::new(0),
    state: AtomicU8::new(State::Uninitialized as u8),
    coll_check: AtomicBool::new(false),
};

/// The bit of [`Slot::entry`] set while the owner is inside a call (thread ids are even).
const INSIDE: usize = 1;

/// The calling thread's id (`sys::thread::current`: a register read, no thread-local access,
/// which in the C ABI's shared library would be a call).
#[inline(always)]
pub fn this_thread() -> usize {
    crate::sys::thread::current()
}

/// Clears the `INSIDE` bit of [`Slot::entry`] when a call ends, also by a panic.
struct Leave(usize);

impl Drop for Leave {
    fn drop(&mut self) {
        SLOT.entry.store(self.0, Relaxed);
    }
}

/// Runs `f` with the runtime when the calling thread owns it and is not already inside;
/// `None` otherwise.
#[inline]
fn enter<R>(f: impl FnOnce(&mut Runtime) -> R) -> Option<R> {
    enter_slot(|slot| slot.as_mut().map(f)).flatten()
}

/// [`enter`] with the slot itself, to install or take the runtime.
#[inline]
fn enter_slot<R>(f: impl FnOnce(&mut Option<Runtime>) -> R) -> Option<R> {
    // Relaxed throughout: `entry` names this thread only if this thread wrote it (initialize,
    // `adopt`, the lines below), and what another thread did before an adoption is ordered by
    // the caller of `adopt` (see `Slot`'s Sync).
    let idle = this_thread();
    if SLOT.entry.load(Relaxed) != idle {
        return None;
    }
    SLOT.entry.store(idle | INSIDE, Relaxed);
    let _leave = Leave(idle);
    // SAFETY: this thread owns the runtime and no call of it is inside (checked above, and
    // the `INSIDE` bit now keeps any nested call out), so this is the only reference (see
    // `Slot`).
    let slot = unsafe { &mut *SLOT.runtime.get() };
    Some(f(slot))
}

/// Makes the calling thread the one allowed into the runtime (the C ABI calls it when a call
/// comes from a thread other than the last one). Errors if the runtime is in a call now: the
/// program broke the serialized threading level, and a caught overlap is better than none.
///
/// # Safety
///
/// No other thread may be using weft now or until the calling thread's call returns (this
/// includes dropping weft objects), and the program's own synchronization must order the
/// previous owner's last use before this call: the promise of `MPI_THREAD_SERIALIZED`.
#[inline]
pub unsafe fn adopt(call: &'static str) -> Result<()> {
    let me = this_thread();
    let entry = SLOT.entry.load(Relaxed);
    if entry & !INSIDE == me {
        return Ok(());
    }
    // SAFETY: the caller's promise, passed on.
    unsafe { adopt_other(call, entry, me) }
}

/// [`adopt`] when the runtime's entry names another thread (or none): out of line, so that
/// the common case inlines into every C call.
///
/// # Safety
/// As for [`adopt`].
#[cold]
#[inline(never)]
unsafe fn adopt_other(call: &'static str, entry: usize, me: usize) -> Result<()> {
    if entry & INSIDE != 0 {
        return Err(Error::new(
            ErrorClass::Arg,
            call,
            "another thread is inside a weft call now: the threading level is serialized \
             (one call at a time, from any thread)",
        ));
    }
    SLOT.entry.store(me, Relaxed);
    Ok(())
}

fn state() -> State {
    match SLOT.state.load(Relaxed) {
        0 => State::Uninitialized,
        1 => State::Running,
        _ => State::Finalized,
    }
}

fn set_state(state: State) {
    SLOT.state.store(state as u8, Relaxed);
}

static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
static EVER_INITIALIZED: AtomicBool = AtomicBool::new(false);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
enum State {
    Uninitialized = 0,
    Running = 1,
    Finalized = 2,
}

/// Boots the runtime and makes the calling thread its owner. Errors if it already ran in this
/// process.
pub fn init() -> Result<()> {
    START.get_or_init(Instant::now);
    if EVER_INITIALIZED.swap(true, std::sync::atomic::Ordering::SeqCst) {
        return Err(Error::new(
            ErrorClass::Arg,
            "initialize",
            "weft was already initialized in this process (it can be initialized once)",
        ));
    }
    let mut tunables = Tunables::from_env()?;
    let mut boot = Boot::from_env()?;
    let fabric = NodeFabric::new(&mut boot, &tunables)?;
    if tunables.coll_model_shared.0.is_none() {
        // `auto`: what the start-up probe found, the same on every rank of the node.
        let shared = fabric.cores_shared().unwrap_or(false);
        tunables.coll_model_shared = crate::tunables::Auto(Some(u32::from(shared)));
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let config = Config::from_tunables(&tunables, boot.local_ranks().len(), cpus);
    let mut engine = Engine::new(fabric, config);
    engine.set_bsend_capacity(0, tunables.bsend_overhead);
    let mut rt = Runtime {
        engine,
        boot,
        contexts: ContextMask::default(),
        sequences: Default::default(),
        node_areas: Default::default(),
        coll_stores: None,
        names: HashMap::new(),
        tunables,
        parent: None,
        other_nodes: HashMap::new(),
    };
    rt.connect_parent()?;
    SLOT.coll_check.store(rt.tunables.coll_check, Relaxed);
    // No thread owns the slot yet (`entry` is 0 until here, and `EVER_INITIALIZED` let only
    // this call through), so this thread may take it and put the runtime in.
    SLOT.entry.store(this_thread(), Relaxed);
    enter_slot(|slot| *slot = Some(rt));
    set_state(State::Running);
    Ok(())
}

/// Runs `f` with the runtime. Panics with a clear message when called before initialize,
/// after finalize, or from another thread.
///
/// Crate-private: requests of the front end hold views of user buffers in the engine, so code
/// outside could strand them (replace the engine, drop it). Outside code may [`inspect`].
#[inline]
pub(crate) fn with<R>(f: impl FnOnce(&mut Runtime) -> R) -> R {
    match enter(f) {
        Some(v) => v,
        None => panic!("{}", not_running()),
    }
}

/// Whether the collectives' checking mode (`WEFT_COLL_CHECK`) is on in the running runtime.
#[inline]
pub(crate) fn coll_check() -> bool {
    SLOT.coll_check.load(Relaxed)
}

/// Runs `f` with a shared view of the runtime (to read statistics, addresses, the bootstrap's
/// answers). Panics before initialize, after finalize, or on another thread.
pub fn inspect<R>(f: impl FnOnce(&Runtime) -> R) -> R {
    with(|rt| f(rt))
}

/// Runs `f` with the runtime, naming `call` when there is none (before initialize, after
/// finalize, on another thread). The panic points at the API's caller.
#[inline]
#[track_caller]
pub(crate) fn with_call<R>(call: &'static str, f: impl FnOnce(&mut Runtime) -> R) -> R {
    with_call_inlined(call, f)
}

/// [`with_call`], always inlined: for the front ends' fast paths (`crate::front_end`), each
/// with one caller.
#[inline(always)]
#[track_caller]
pub(crate) fn with_call_inlined<R>(call: &'static str, f: impl FnOnce(&mut Runtime) -> R) -> R {
    // [`enter`]'s work without its `Option`: `f`'s result comes back as it is (a large
    // `Result` wrapped in an `Option` is copied from one stack slot to the next on the way
    // out), and the way in is one compare and one load, the miss a cold call that panics.
    let me = this_thread();
    // SAFETY: read only when `entry` names this thread with no call inside (the first
    // operand): then this thread owns the runtime and nothing holds a reference to it.
    if SLOT.entry.load(Relaxed) != me || unsafe { (*SLOT.runtime.get()).is_none() } {
        not_running_panic(call)
    }
    SLOT.entry.store(me | INSIDE, Relaxed);
    let _leave = Leave(me);
    // SAFETY: as in `enter_slot`: this thread owns the runtime, no call of it was inside
    // (checked above), and the `INSIDE` bit keeps nested calls out.
    let rt = unsafe { (*SLOT.runtime.get()).as_mut() };
    // SAFETY: checked `Some` above, and nothing could take it since (no call was inside).
    f(unsafe { rt.unwrap_unchecked() })
}

/// The panic of a call with no runtime to use, at the API caller's location.
#[cold]
#[inline(never)]
#[track_caller]
fn not_running_panic(call: &'static str) -> ! {
    panic!("{}", not_running_for(call))
}

/// Runs `f` with the runtime if this thread owns it and is not already inside it; `None`
/// otherwise. For drops, which must not panic.
pub(crate) fn try_with<R>(f: impl FnOnce(&mut Runtime) -> R) -> Option<R> {
    enter(f)
}

fn not_running() -> Error {
    not_running_for("weft call")
}

fn not_running_for(call: &'static str) -> Error {
    let msg = match state() {
        State::Finalized => "weft was already finalized (the Universe was dropped)",
        State::Running if is_owner() => {
            "weft is already inside a call on this thread (a callback or a drop during a weft \
             call may not call weft)"
        }
        _ if EVER_INITIALIZED.load(std::sync::atomic::Ordering::SeqCst) => {
            "weft is initialized on another thread; call it only from the thread that \
             called initialize (threading level Funneled)"
        }
        _ => "weft is not initialized: call weft::initialize() first",
    };
    Error::new(ErrorClass::Arg, call, msg)
}

/// Whether the runtime is running (initialized, not finalized), on whichever thread.
pub fn is_running() -> bool {
    state() == State::Running
}

/// Whether finalize ran.
pub fn is_finalized() -> bool {
    state() == State::Finalized
}

/// Whether the calling thread is the one that owns the runtime now (the one that initialized
/// it, unless the C ABI adopted it for another since).
pub fn is_owner() -> bool {
    SLOT.entry.load(Relaxed) & !INSIDE == this_thread()
}

/// Ends the runtime: completes outstanding sends, synchronizes with every rank, tells the
/// process manager. When the thread is panicking, aborts the whole job instead (the other
/// ranks would otherwise wait for this one forever).
pub fn finalize() {
    let Some(mut rt) = enter_slot(Option::take).flatten() else {
        return;
    };
    set_state(State::Finalized);
    SLOT.coll_check.store(false, Relaxed);
    if std::thread::panicking() {
        let rank = rt.boot.rank;
        rt.boot.pmi.abort(101, &format!("rank {rank} panicked"));
    }
    rt.engine.drain();
    let world = rt.world();
    if let Err(e) = crate::comm::barrier(&mut rt.engine, &world) {
        eprintln!("{e}");
    }
    // The barrier's own last packets may still be queued (a connection being made).
    rt.engine.drain();
    rt.engine.fabric.close();
    if let Err(e) = rt.boot.pmi.finalize() {
        eprintln!("{e}");
    }
    if std::env::var_os("WEFT_STATS").is_some() {
        let (long, sibling) = rt.engine.long_yields();
        let fences = match rt.engine.fabric.wake_fences() {
            Some(Fences::Asymmetric) => "asymmetric",
            Some(Fences::Symmetric) => "symmetric",
            None => "none",
        };
        eprintln!(
            "weft: rank {} statistics: {:?}, long yields {long} (to a sibling: {sibling}), \
             cores shared (WEFT_COLL_MODEL_SHARED): {}, wake-up fences: {fences}",
            rt.boot.rank,
            rt.engine.stats(),
            rt.tunables.coll_model_shared
        );
    }
}

/// Seconds since the process first initialized (monotonic).
pub fn time() -> f64 {
    START.get_or_init(Instant::now).elapsed().as_secs_f64()
}
