//! The per-process runtime behind the front end: the engine over the node fabric, the
//! bootstrap client, the context-id mask and communicator names. It lives in a thread-local
//! slot of the thread that initialized (weft is single-threaded: MPI_THREAD_FUNNELED).

use crate::boot::Boot;
use crate::comm::context::ContextMask;
use crate::engine::{Config, Engine};
use crate::error::{Error, ErrorClass, Result};
use crate::fabric::node::NodeFabric;
use crate::fabric::shm::doorbell::Fences;
use crate::tunables::Tunables;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
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
}

thread_local! {
    static RUNTIME: RefCell<Option<Runtime>> = const { RefCell::new(None) };
    static STATE: Cell<State> = const { Cell::new(State::Uninitialized) };
    /// `tunables.coll_check` of the running runtime: every collective call asks, so it is
    /// kept where reading it costs a load, not a borrow of the runtime.
    static COLL_CHECK: Cell<bool> = const { Cell::new(false) };
}

static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
static EVER_INITIALIZED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Uninitialized,
    Running,
    Finalized,
}

/// Boots and installs the runtime on this thread. Errors if it already ran in this process.
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
    let rt = Runtime {
        engine,
        boot,
        contexts: ContextMask::default(),
        sequences: Default::default(),
        node_areas: Default::default(),
        coll_stores: None,
        names: HashMap::new(),
        tunables,
    };
    COLL_CHECK.with(|c| c.set(rt.tunables.coll_check));
    RUNTIME.with(|r| *r.borrow_mut() = Some(rt));
    STATE.with(|s| s.set(State::Running));
    Ok(())
}

/// Runs `f` with the runtime. Panics with a clear message when called before initialize,
/// after finalize, or from another thread.
///
/// Crate-private: requests of the front end hold views of user buffers in the engine, so code
/// outside could strand them (replace the engine, drop it). Outside code may [`inspect`].
#[inline]
pub(crate) fn with<R>(f: impl FnOnce(&mut Runtime) -> R) -> R {
    RUNTIME.with(|r| {
        let mut guard = r.borrow_mut();
        match guard.as_mut() {
            Some(rt) => f(rt),
            None => panic!("{}", not_running()),
        }
    })
}

/// Whether the collectives' checking mode (`WEFT_COLL_CHECK`) is on in this thread's runtime.
#[inline]
pub(crate) fn coll_check() -> bool {
    COLL_CHECK.with(|c| c.get())
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
    // The closure below cannot carry the caller's location, so it only hands back whether
    // the runtime was there; the panic is raised out here.
    let mut f = Some(f);
    let out = RUNTIME.with(|r| {
        let mut guard = r.borrow_mut();
        let rt = guard.as_mut()?;
        let f = f.take()?;
        Some(f(rt))
    });
    match out {
        Some(v) => v,
        None => panic!("{}", not_running_for(call)),
    }
}

/// Runs `f` with the runtime if this thread has one and is not already inside it; `None`
/// otherwise. For drops, which must not panic.
pub(crate) fn try_with<R>(f: impl FnOnce(&mut Runtime) -> R) -> Option<R> {
    RUNTIME.with(|r| r.try_borrow_mut().ok()?.as_mut().map(f))
}

fn not_running() -> Error {
    not_running_for("weft call")
}

fn not_running_for(call: &'static str) -> Error {
    let msg = match STATE.with(|s| s.get()) {
        State::Finalized => "weft was already finalized (the Universe was dropped)",
        _ if EVER_INITIALIZED.load(std::sync::atomic::Ordering::SeqCst) => {
            "weft is initialized on another thread; call it only from the thread that \
             called initialize (threading level Funneled)"
        }
        _ => "weft is not initialized: call weft::initialize() first",
    };
    Error::new(ErrorClass::Arg, call, msg)
}

/// Whether the runtime is running on this thread.
pub fn is_running() -> bool {
    STATE.with(|s| s.get()) == State::Running
}

/// Whether finalize ran.
pub fn is_finalized() -> bool {
    STATE.with(|s| s.get()) == State::Finalized
}

/// Ends the runtime: completes outstanding sends, synchronizes with every rank, tells the
/// process manager. When the thread is panicking, aborts the whole job instead (the other
/// ranks would otherwise wait for this one forever).
pub fn finalize() {
    let Some(mut rt) = RUNTIME.with(|r| r.borrow_mut().take()) else {
        return;
    };
    STATE.with(|s| s.set(State::Finalized));
    COLL_CHECK.with(|c| c.set(false));
    if std::thread::panicking() {
        let rank = rt.boot.rank;
        rt.boot.pmi.abort(101, &format!("rank {rank} panicked"));
    }
    rt.engine.drain();
    let world = crate::comm::CommData::new(
        crate::comm::context::WORLD_PAIR,
        std::rc::Rc::new(crate::comm::group::GroupData::new(
            (0..rt.boot.size).collect(),
        )),
        rt.boot.rank,
    );
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
