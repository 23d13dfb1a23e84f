//! Start-up and shut-down, the threading level, the clock, the library's names, and the
//! communicator queries every program makes first (rank and size).

use crate::c_abi::abi::*;
use crate::c_abi::errors::{guard, write_string, CError};
use crate::c_abi::state::{self, Comm, Phase, Running};
use crate::traits::*;
use std::ffi::{c_char, c_int, c_void};

fn init(call: &'static str, required: c_int) -> Result<c_int, CError> {
    if state::world_model() != Phase::Before {
        return Err(CError::new(
            MPI_ERR_OTHER,
            call,
            "MPI was already initialized",
        ));
    }
    if let Some(r) = state::running() {
        // Sessions started the runtime: the world model joins it.
        state::set_world_model(Phase::Running);
        return Ok(r.thread_level.min(required.max(MPI_THREAD_SINGLE)));
    }
    let provided = start_runtime(call, required)?;
    state::set_world_model(Phase::Running);
    Ok(provided)
}

/// Starts weft and installs the C layer's state (for MPI_Init or a first MPI_Session_init);
/// the threading level provided.
pub(crate) fn start_runtime(call: &'static str, required: c_int) -> Result<c_int, CError> {
    if state::phase() != Phase::Before {
        return Err(CError::new(
            MPI_ERR_OTHER,
            call,
            "MPI was finalized: Weft cannot start it again in this process",
        ));
    }
    let provided = match required {
        MPI_THREAD_SINGLE | MPI_THREAD_FUNNELED | MPI_THREAD_SERIALIZED => required,
        MPI_THREAD_MULTIPLE => MPI_THREAD_SERIALIZED,
        other => {
            return Err(CError::new(
                MPI_ERR_ARG,
                call,
                format!("{other} is not a threading level (MPI_THREAD_SINGLE ... MULTIPLE)"),
            ))
        }
    };
    crate::c_abi::errors::quiet_panics_inside_calls();
    let universe = crate::try_initialize().map_err(CError::from_weft)?;
    install_state(universe, provided, false);
    Ok(provided)
}

/// Installs the C layer's state over `universe`, with `provided` as the threading level;
/// `joined_rust` when the Rust API started the runtime ([`join_rust_runtime`]).
fn install_state(universe: crate::environment::Universe, provided: c_int, joined_rust: bool) {
    // Before any window exists: targets reached by messages combine `long double` with it.
    crate::c_abi::op::register_long_double();
    let world = Comm::new(universe.world(), MPI_ERRORS_ARE_FATAL);
    let self_comm = Comm::new(
        crate::topology::SimpleCommunicator::self_comm(),
        MPI_ERRORS_ARE_FATAL,
    );
    let size = world.comm.size();
    let predefined_attrs = state::PredefinedAttrs {
        tag_ub: crate::point_to_point::TAG_UB,
        host: MPI_PROC_NULL,
        io: MPI_ANY_SOURCE,
        wtime_is_global: 0,
        universe_size: world.comm.size(),
        appnum: universe.appnum().unwrap_or(0),
        lastusedcode: std::cell::Cell::new(crate::c_abi::errhandler::last_used_code()),
    };
    state::install(Running {
        universe: std::cell::RefCell::new(universe),
        world,
        self_comm,
        thread_level: provided,
        joined_rust,
        main_thread: std::thread::current().id(),
        detached: Default::default(),
        keyvals: Default::default(),
        predefined_attrs,
        bsend_buffer: Default::default(),
        parent: Default::default(),
        ports: Default::default(),
        info_env: crate::c_abi::info::CInfo::env(size, provided),
        group_empty: crate::c_abi::group::CGroup::new(
            crate::topology::SystemGroup::empty().include(&[]),
        ),
    });
}

/// The C layer joins a runtime the Rust API started (`weft::initialize`): the first C call
/// after it installs the C layer's state over a view of that runtime, so C calls see MPI
/// initialized (`MPI_Init` then fails as a second one would, and `MPI_Finalize` leaves the
/// finalizing to the Rust API's `Universe`).
#[cold]
pub(crate) fn join_rust_runtime() {
    if state::phase() != Phase::Before || !crate::runtime::is_running() {
        return;
    }
    crate::c_abi::errors::quiet_panics_inside_calls();
    let threading = match crate::environment::threading_support() {
        crate::environment::Threading::Single => MPI_THREAD_SINGLE,
        _ => MPI_THREAD_FUNNELED,
    };
    install_state(crate::environment::Universe::view(), threading, true);
    crate::environment::before_finalize(state::detach_from_rust);
    state::set_world_model(Phase::Running);
}

pub unsafe extern "C" fn mpi_init(_argc: *mut c_int, _argv: *mut *mut *mut c_char) -> c_int {
    guard("MPI_Init", std::ptr::null_mut(), || {
        init("MPI_Init", MPI_THREAD_SINGLE).map(drop)
    })
}
export!(Init, mpi_init);

pub unsafe extern "C" fn init_thread(
    _argc: *mut c_int,
    _argv: *mut *mut *mut c_char,
    required: c_int,
    provided: *mut c_int,
) -> c_int {
    guard("MPI_Init_thread", std::ptr::null_mut(), || {
        if provided.is_null() {
            return Err(CError::new(
                MPI_ERR_ARG,
                "MPI_Init_thread",
                "provided is a null pointer",
            ));
        }
        let level = init("MPI_Init_thread", required)?;
        // SAFETY: checked non-null; the caller's int.
        unsafe { *provided = level };
        Ok(())
    })
}
export!(Init_thread, init_thread);

pub unsafe extern "C" fn finalize() -> c_int {
    guard("MPI_Finalize", std::ptr::null_mut(), || {
        if state::world_model() != Phase::Running {
            return Err(CError::not_initialized("MPI_Finalize"));
        }
        if state::running().is_some_and(|r| r.joined_rust) {
            return Err(CError::new(
                MPI_ERR_OTHER,
                "MPI_Finalize",
                "the Rust API started Weft (weft::initialize): dropping its Universe finalizes",
            ));
        }
        // MPI_COMM_SELF's attributes are deleted first (their delete callbacks run while MPI
        // still works: the standard's hook for libraries' clean-up), then the requests the
        // program freed before they completed end.
        if let Some(r) = state::running() {
            crate::c_abi::comm::delete_attributes(
                "MPI_Finalize",
                &r.self_comm,
                MPI_COMM_SELF as *mut c_void,
            )?;
        }
        state::set_world_model(Phase::After);
        if state::count_session(0) == 0 {
            stop_runtime("MPI_Finalize")?;
        }
        Ok(())
    })
}
export!(Finalize, finalize);

/// Ends weft (when neither the world model nor a session uses it any more).
pub(crate) fn stop_runtime(call: &'static str) -> Result<(), CError> {
    crate::c_abi::requests::sweep_detached(true);
    let running = state::take().ok_or_else(|| CError::not_initialized(call))?;
    // Dropping the universe finalizes weft (a barrier over the world, then the PMI's).
    drop(running);
    Ok(())
}

/// Writes `value` through `flag`, failing on a null pointer.
pub(crate) fn put_int(
    call: &'static str,
    what: &str,
    out: *mut c_int,
    value: c_int,
) -> Result<(), CError> {
    if out.is_null() {
        return Err(CError::new(
            MPI_ERR_ARG,
            call,
            format!("{what} is a null pointer"),
        ));
    }
    // SAFETY: checked non-null; the standard's contract: a pointer to an int.
    unsafe { *out = value };
    Ok(())
}

pub unsafe extern "C" fn initialized(flag: *mut c_int) -> c_int {
    guard("MPI_Initialized", std::ptr::null_mut(), || {
        let on = state::world_model() != Phase::Before;
        put_int("MPI_Initialized", "flag", flag, on.into())
    })
}
export!(Initialized, initialized);

pub unsafe extern "C" fn finalized(flag: *mut c_int) -> c_int {
    guard("MPI_Finalized", std::ptr::null_mut(), || {
        let done = state::world_model() == Phase::After;
        put_int("MPI_Finalized", "flag", flag, done.into())
    })
}
export!(Finalized, finalized);

pub(crate) fn running(call: &'static str) -> Result<&'static Running, CError> {
    state::running().ok_or_else(|| CError::not_initialized(call))
}

pub unsafe extern "C" fn query_thread(provided: *mut c_int) -> c_int {
    guard("MPI_Query_thread", std::ptr::null_mut(), || {
        let level = running("MPI_Query_thread")?.thread_level;
        put_int("MPI_Query_thread", "provided", provided, level)
    })
}
export!(Query_thread, query_thread);

pub unsafe extern "C" fn is_thread_main(flag: *mut c_int) -> c_int {
    guard("MPI_Is_thread_main", std::ptr::null_mut(), || {
        let main = running("MPI_Is_thread_main")?.main_thread == std::thread::current().id();
        put_int("MPI_Is_thread_main", "flag", flag, main.into())
    })
}
export!(Is_thread_main, is_thread_main);

pub unsafe extern "C" fn abort(comm: *mut c_void, errorcode: c_int) -> c_int {
    guard("MPI_Abort", comm, || {
        let c = crate::c_abi::handles::comm("MPI_Abort", comm)?;
        eprintln!("weft: MPI_Abort({errorcode}) called");
        c.comm.abort(errorcode)
    })
}
export!(Abort, abort);

pub extern "C" fn wtime() -> f64 {
    crate::time()
}
export!(Wtime, wtime);

pub extern "C" fn wtick() -> f64 {
    crate::time_resolution()
}
export!(Wtick, wtick);

pub unsafe extern "C" fn get_processor_name(name: *mut c_char, resultlen: *mut c_int) -> c_int {
    guard("MPI_Get_processor_name", std::ptr::null_mut(), || {
        if name.is_null() || resultlen.is_null() {
            return Err(CError::new(
                MPI_ERR_ARG,
                "MPI_Get_processor_name",
                "a null output pointer",
            ));
        }
        let host = crate::environment::processor_name().unwrap_or_default();
        // SAFETY: the standard's contract: MPI_MAX_PROCESSOR_NAME bytes at `name`.
        unsafe { write_string(&host, name, MPI_MAX_PROCESSOR_NAME as usize, resultlen) };
        Ok(())
    })
}
export!(Get_processor_name, get_processor_name);

pub unsafe extern "C" fn get_version(version: *mut c_int, subversion: *mut c_int) -> c_int {
    guard("MPI_Get_version", std::ptr::null_mut(), || {
        put_int("MPI_Get_version", "version", version, MPI_VERSION)?;
        put_int("MPI_Get_version", "subversion", subversion, MPI_SUBVERSION)
    })
}
export!(Get_version, get_version);

pub unsafe extern "C" fn abi_get_version(version: *mut c_int, subversion: *mut c_int) -> c_int {
    guard("MPI_Abi_get_version", std::ptr::null_mut(), || {
        put_int("MPI_Abi_get_version", "abi_major", version, MPI_ABI_VERSION)?;
        put_int(
            "MPI_Abi_get_version",
            "abi_minor",
            subversion,
            MPI_ABI_SUBVERSION,
        )
    })
}
export!(Abi_get_version, abi_get_version);

/// MPI_Abi_get_info: a new info object with the sizes of the ABI's integer types
/// (`mpi_aint_size`, `mpi_count_size`, `mpi_offset_size`, in bytes). Callable any time.
pub unsafe extern "C" fn abi_get_info(info: *mut *mut c_void) -> c_int {
    const CALL: &str = "MPI_Abi_get_info";
    guard(CALL, std::ptr::null_mut(), || {
        let entry = |k: &str, n: usize| (k.to_string(), n.to_string());
        let sizes = vec![
            entry("mpi_aint_size", std::mem::size_of::<isize>()),
            entry("mpi_count_size", std::mem::size_of::<i64>()),
            entry("mpi_offset_size", std::mem::size_of::<i64>()),
        ];
        crate::c_abi::info::hand_out(CALL, info, crate::c_abi::info::CInfo::new(sizes))
    })
}
export!(Abi_get_info, abi_get_info);

/// MPI_Get_hw_resource_info (MPI 4.1): a new info object describing the hardware the
/// process runs on. The standard defines no key an implementation must set; Weft sets none
/// yet, as Open MPI 5 does not (a program reads an empty info object, not an error).
pub unsafe extern "C" fn get_hw_resource_info(info: *mut *mut c_void) -> c_int {
    const CALL: &str = "MPI_Get_hw_resource_info";
    guard(CALL, std::ptr::null_mut(), || {
        running(CALL)?;
        crate::c_abi::info::hand_out(CALL, info, crate::c_abi::info::CInfo::new(Vec::new()))
    })
}
export!(Get_hw_resource_info, get_hw_resource_info);

pub unsafe extern "C" fn get_library_version(version: *mut c_char, resultlen: *mut c_int) -> c_int {
    guard("MPI_Get_library_version", std::ptr::null_mut(), || {
        if version.is_null() || resultlen.is_null() {
            return Err(CError::new(
                MPI_ERR_ARG,
                "MPI_Get_library_version",
                "a null output pointer",
            ));
        }
        let text = crate::environment::library_version().unwrap_or_default();
        let text = format!("{text} (C ABI: MPI {MPI_VERSION}.{MPI_SUBVERSION} standard ABI {MPI_ABI_VERSION}.{MPI_ABI_SUBVERSION})");
        let capacity = MPI_MAX_LIBRARY_VERSION_STRING as usize;
        // SAFETY: the standard's contract: MPI_MAX_LIBRARY_VERSION_STRING bytes at `version`.
        unsafe { write_string(&text, version, capacity, resultlen) };
        Ok(())
    })
}
export!(Get_library_version, get_library_version);

pub unsafe extern "C" fn comm_rank(comm: *mut c_void, rank: *mut c_int) -> c_int {
    guard("MPI_Comm_rank", comm, || {
        let c = crate::c_abi::handles::comm("MPI_Comm_rank", comm)?;
        put_int("MPI_Comm_rank", "rank", rank, c.comm.rank())
    })
}
export!(Comm_rank, comm_rank);

pub unsafe extern "C" fn comm_size(comm: *mut c_void, size: *mut c_int) -> c_int {
    guard("MPI_Comm_size", comm, || {
        let c = crate::c_abi::handles::comm("MPI_Comm_size", comm)?;
        put_int("MPI_Comm_size", "size", size, c.comm.size())
    })
}
export!(Comm_size, comm_size);

pub extern "C" fn aint_add(base: isize, disp: isize) -> isize {
    base.wrapping_add(disp)
}
export!(Aint_add, aint_add);

pub extern "C" fn aint_diff(addr1: isize, addr2: isize) -> isize {
    addr1.wrapping_sub(addr2)
}
export!(Aint_diff, aint_diff);
