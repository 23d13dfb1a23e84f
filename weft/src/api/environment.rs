//! Start-up, shut-down and the clock, in rsmpi's shape: [`initialize`] returns the
//! [`Universe`]; dropping it finalizes.

use super::topology::SimpleCommunicator;
use crate::engine::Stats;
use crate::error::Result;
use crate::runtime;

/// Threading levels (MPI_THREAD_*). Weft is funneled: one thread makes the calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Threading {
    /// One thread only.
    Single,
    /// Many threads, only the initializing one calls weft.
    Funneled,
    /// Many threads calling one at a time (not supported: reported as Funneled).
    Serialized,
    /// Any thread at any time (not supported: reported as Funneled).
    Multiple,
}

/// The initialized runtime. Dropping it finalizes (collective over the world).
///
/// Not `Send`: the runtime belongs to the thread that initialized it, and finalizing from
/// another thread would not find it.
pub struct Universe {
    buffer_size: usize,
    /// Whether dropping this finalizes: false for the C ABI's view of a runtime the Rust API
    /// started ([`Universe::view`]).
    owner: bool,
    _thread_bound: std::marker::PhantomData<std::rc::Rc<()>>,
}

impl Universe {
    /// The world communicator.
    pub fn world(&self) -> SimpleCommunicator {
        SimpleCommunicator::world()
    }
    /// How many processes the job can have (MPI_UNIVERSE_SIZE): Weft's launchers start the
    /// job's ranks and no spare slots, so the world's size.
    pub fn size(&self) -> Option<usize> {
        Some(runtime::with_call("size", |rt| rt.boot.size) as usize)
    }
    /// The number of this process's command in the job (MPI_APPNUM): 0, or in a job
    /// started by `spawn_multiple` the position of the command that started it
    /// (`PMI_APPNUM`, which `weft run` sets).
    pub fn appnum(&self) -> Option<i32> {
        let given = std::env::var("PMI_APPNUM").ok();
        Some(given.and_then(|v| v.trim().parse().ok()).unwrap_or(0))
    }
    /// Size of the attached buffered-send buffer.
    pub fn buffer_size(&self) -> usize {
        self.buffer_size
    }
    /// Attaches a buffered-send buffer of `size` bytes (replacing any attached one, after
    /// the buffered sends using it have gone).
    pub fn set_buffer_size(&mut self, size: usize) {
        let overhead = runtime::with_call("set_buffer_size", |rt| rt.tunables.bsend_overhead);
        runtime::with_call("set_buffer_size", |rt| {
            rt.engine.set_bsend_capacity(size, overhead)
        });
        self.buffer_size = size;
    }
    /// Detaches the buffered-send buffer, waiting for buffered sends in flight.
    pub fn detach_buffer(&mut self) {
        self.set_buffer_size(0);
    }
    /// Waits until every buffered send has gone, the buffer staying attached
    /// (MPI_Buffer_flush).
    pub fn flush_buffer(&self) {
        runtime::with_call("flush_buffer", |rt| rt.engine.flush_buffered());
    }
    /// Whether every buffered send has gone (MPI_Buffer_iflush's test), after a pass of
    /// progress.
    pub fn buffer_flushed(&self) -> bool {
        runtime::with_call("buffer_flushed", |rt| rt.engine.buffered_done())
    }
    /// The threading level in force.
    pub fn threading_support(&self) -> Threading {
        threading_support()
    }
    /// One pass of the progress engine, without waiting: moves messages on and serves what
    /// other processes asked of this one (their one-sided operations on windows it reaches by
    /// messages, and on `create` windows' memory). A process computing outside the library
    /// for long calls it now and then so others are not delayed. Whether anything moved.
    pub fn progress(&self) -> bool {
        runtime::with_call("progress", |rt| rt.engine.progress())
    }
    /// Communication statistics of this rank so far.
    pub fn stats(&self) -> Stats {
        runtime::with_call("stats", |rt| rt.engine.stats().clone())
    }
}

/// What runs when the [`Universe`] finalizes, before the runtime ends (see
/// [`before_finalize`]).
static BEFORE_FINALIZE: std::sync::OnceLock<fn()> = std::sync::OnceLock::new();

/// Sets what runs when the [`Universe`] finalizes, before the runtime ends: a front end above
/// this one that joined the runtime the Rust API started (the C ABI's state, which holds
/// communicators of the world, goes first).
#[cfg(feature = "c-abi")]
pub(crate) fn before_finalize(hook: fn()) {
    let _ = BEFORE_FINALIZE.set(hook);
}

impl Universe {
    /// Another handle on the running runtime that does not finalize when dropped: the C
    /// ABI's, when the Rust API started the runtime.
    #[cfg(feature = "c-abi")]
    pub(crate) fn view() -> Universe {
        Universe {
            buffer_size: 0,
            owner: false,
            _thread_bound: std::marker::PhantomData,
        }
    }
}

impl Drop for Universe {
    fn drop(&mut self) {
        if self.owner {
            if let Some(hook) = BEFORE_FINALIZE.get() {
                hook();
            }
            runtime::finalize();
        }
    }
}

/// Initializes weft. `None` if it was already initialized; panics with the reason when the
/// process manager or a transport fails (use [`try_initialize`] to handle that).
pub fn initialize() -> Option<Universe> {
    initialize_with_threading(Threading::Single).map(|(u, _)| u)
}

/// Initializes asking for a threading level; returns the level provided.
pub fn initialize_with_threading(threading: Threading) -> Option<(Universe, Threading)> {
    if runtime::is_running() || runtime::is_finalized() {
        return None;
    }
    let u = try_initialize().unwrap_or_else(|e| panic!("{e}"));
    Some((u, threading.min(threading_support())))
}

/// Initializes weft, returning why it could not.
pub fn try_initialize() -> Result<Universe> {
    runtime::init()?;
    Ok(Universe {
        buffer_size: 0,
        owner: true,
        _thread_bound: std::marker::PhantomData,
    })
}

/// Whether weft is initialized (and not finalized) in this process, from any thread.
pub fn is_initialized() -> bool {
    runtime::is_running()
}

/// Whether weft was finalized.
pub fn is_finalized() -> bool {
    runtime::is_finalized()
}

/// Seconds since an arbitrary point (MPI_Wtime), monotonic.
pub fn time() -> f64 {
    runtime::time()
}

/// Resolution of [`time`] in seconds.
pub fn time_resolution() -> f64 {
    1e-9
}

/// The threading level weft provides (Funneled), as rsmpi's `threading_support()`.
pub fn threading_support() -> Threading {
    Threading::Funneled
}

/// The MPI standard version whose semantics the API follows (major, minor).
pub fn version() -> (i32, i32) {
    (3, 1)
}

/// A description of this library and what it implements.
pub fn library_version() -> std::result::Result<String, std::string::FromUtf8Error> {
    Ok(format!(
        "Weft {} (MPI-3.1 point-to-point, communicators and barrier; transports: {}; other \
         collectives and one-sided are not built yet)",
        env!("CARGO_PKG_VERSION"),
        crate::tunables::Transports::ALL.join(", ")
    ))
}

/// The name of the machine this rank runs on.
pub fn processor_name() -> std::result::Result<String, std::string::FromUtf8Error> {
    Ok(crate::sys::hostname())
}

#[cfg(test)]
mod tests {
    #[test]
    fn library_version_names_every_transport() {
        let v = super::library_version().unwrap();
        assert!(
            v.starts_with(&format!("Weft {} (", env!("CARGO_PKG_VERSION"))),
            "{v}"
        );
        for t in crate::tunables::Transports::ALL {
            assert!(v.contains(t), "{t} missing: {v}");
        }
    }
}
