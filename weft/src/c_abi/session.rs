//! The sessions model (MPI 4.1 chapter 11.3): `MPI_Session_init` starts Weft if the world
//! model has not (and the runtime then lasts until the last session and the world model have
//! ended), two process sets (`mpi://WORLD`, `mpi://SELF`), groups from them, communicators
//! from groups (`MPI_Comm_create_from_group`, `MPI_Intercomm_create_from_groups`: collective
//! over the groups only, agreed over the world's contexts with a tag made from the string
//! tag), and error handlers on sessions. Weft cannot start again once it has ended: a session
//! initialized after that is an error.

use crate::c_abi::abi::*;
use crate::c_abi::env::put_int;
use crate::c_abi::errors::{guard, CError};
use crate::c_abi::group::{self, group};
use crate::c_abi::handles::{self, Marked};
use crate::c_abi::state::{self, Comm, Phase};
use crate::traits::*;
use std::cell::Cell;
use std::ffi::{c_char, c_int, c_void, CStr};

/// A session the program made.
pub(crate) struct Session {
    magic: Cell<u64>,
    /// The error handler's handle value.
    pub(crate) errhandler: Cell<usize>,
    /// The number the engine knows it by (its buffer, its communicators).
    pub(crate) id: u32,
    /// The buffer the program attached (MPI_Session_attach_buffer), for the detach.
    pub(crate) buffer: crate::c_abi::comm_buffer::Remembered,
}

/// The number the next session gets.
static NEXT_ID: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);

const SESSION_MAGIC: u64 = 0x5745_4654_5345_5353; // "WEFTSESS"

impl Marked for Session {
    const MARK: u64 = SESSION_MAGIC;
    fn mark(&self) -> u64 {
        self.magic.get()
    }
}

/// The live session of `handle`, if it is one.
pub(crate) fn session_object(handle: *mut c_void) -> Option<&'static Session> {
    handles::user_object::<Session>(handle as usize)
}

pub(crate) fn session(call: &'static str, handle: *mut c_void) -> Result<&'static Session, CError> {
    session_object(handle).ok_or_else(|| {
        CError::new(
            MPI_ERR_SESSION,
            call,
            format!(
                "{:#x} is not a session (finalized, or never made)",
                handle as usize
            ),
        )
    })
}

/// The process sets every session has.
const PSETS: [&str; 2] = ["mpi://WORLD", "mpi://SELF"];

/// The C string `s` (checked non-null).
pub(crate) fn string(call: &'static str, what: &str, s: *const c_char) -> Result<String, CError> {
    if s.is_null() {
        return Err(CError::new(
            MPI_ERR_ARG,
            call,
            format!("{what} is a null pointer"),
        ));
    }
    // SAFETY: the standard's contract: a NUL-terminated string.
    Ok(unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned())
}

/// Which of [`PSETS`] `name` is (case-insensitive, as MPI's names are).
fn pset(call: &'static str, name: &str) -> Result<usize, CError> {
    PSETS
        .iter()
        .position(|p| p.eq_ignore_ascii_case(name))
        .ok_or_else(|| {
            CError::new(
                MPI_ERR_ARG,
                call,
                format!("\"{name}\" is not a process set (Weft has mpi://WORLD and mpi://SELF)"),
            )
        })
}

pub unsafe extern "C" fn session_init(
    info: *mut c_void,
    errhandler: *mut c_void,
    out: *mut *mut c_void,
) -> c_int {
    const CALL: &str = "MPI_Session_init";
    guard(CALL, std::ptr::null_mut(), || {
        if info as usize != MPI_INFO_NULL {
            crate::c_abi::info::info(CALL, info)?;
        }
        let eh = crate::c_abi::errhandler::checked(CALL, errhandler)?;
        if out.is_null() {
            return Err(CError::new(MPI_ERR_ARG, CALL, "session is a null pointer"));
        }
        if state::running().is_none() {
            crate::c_abi::env::start_runtime(CALL, MPI_THREAD_SERIALIZED)?;
        }
        crate::c_abi::errhandler::retain(eh);
        state::count_session(1);
        let s = Box::new(Session {
            magic: Cell::new(SESSION_MAGIC),
            errhandler: Cell::new(eh),
            // Relaxed: only a unique number is asked for (calls are serialized anyway).
            id: NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            buffer: Default::default(),
        });
        // SAFETY: checked non-null; the standard's contract: a handle slot.
        unsafe { *out = Box::into_raw(s).cast() };
        Ok(())
    })
}
export!(Session_init, session_init);

pub unsafe extern "C" fn session_finalize(handle: *mut *mut c_void) -> c_int {
    const CALL: &str = "MPI_Session_finalize";
    if handle.is_null() {
        return guard(CALL, std::ptr::null_mut(), || {
            Err(CError::new(MPI_ERR_ARG, CALL, "session is a null pointer"))
        });
    }
    // SAFETY: checked non-null; the program's handle slot.
    let h = unsafe { *handle };
    guard(CALL, h, || {
        let s = session(CALL, h)?;
        s.magic.set(0);
        // Its buffered sends go on; its buffer is no longer anyone's.
        crate::runtime::with_call(CALL, |rt| rt.engine.forget_session_buffer(s.id));
        crate::c_abi::errhandler::release(s.errhandler.get());
        // SAFETY: a live session (checked), boxed by MPI_Session_init; nothing else holds it.
        drop(unsafe { Box::from_raw(h.cast::<Session>()) });
        // SAFETY: checked non-null.
        unsafe { *handle = MPI_SESSION_NULL as *mut c_void };
        if state::count_session(-1) == 0 && state::world_model() != Phase::Running {
            crate::c_abi::env::stop_runtime(CALL)?;
        }
        Ok(())
    })
}
export!(Session_finalize, session_finalize);

pub unsafe extern "C" fn session_get_num_psets(
    handle: *mut c_void,
    _info: *mut c_void,
    n: *mut c_int,
) -> c_int {
    const CALL: &str = "MPI_Session_get_num_psets";
    guard(CALL, handle, || {
        session(CALL, handle)?;
        put_int(CALL, "npset_names", n, PSETS.len() as c_int)
    })
}
export!(Session_get_num_psets, session_get_num_psets);

pub unsafe extern "C" fn session_get_nth_pset(
    handle: *mut c_void,
    _info: *mut c_void,
    n: c_int,
    len: *mut c_int,
    name: *mut c_char,
) -> c_int {
    const CALL: &str = "MPI_Session_get_nth_pset";
    guard(CALL, handle, || {
        session(CALL, handle)?;
        let Some(p) = usize::try_from(n).ok().and_then(|n| PSETS.get(n)) else {
            return Err(CError::new(
                MPI_ERR_ARG,
                CALL,
                format!("there is no process set {n} (there are {})", PSETS.len()),
            ));
        };
        if len.is_null() {
            return Err(CError::new(MPI_ERR_ARG, CALL, "pset_len is a null pointer"));
        }
        // SAFETY: checked non-null; the program's int.
        let room = unsafe { *len };
        if room > 0 {
            if name.is_null() {
                return Err(CError::new(
                    MPI_ERR_ARG,
                    CALL,
                    "pset_name is a null pointer",
                ));
            }
            // At most `room` bytes, the terminating NUL included.
            let n = p.len().min(room as usize - 1);
            // SAFETY: the standard's contract: `room` bytes at `name`.
            unsafe {
                std::ptr::copy_nonoverlapping(p.as_ptr().cast(), name, n);
                *name.add(n) = 0;
            }
        }
        // SAFETY: checked non-null.
        unsafe { *len = p.len() as c_int + 1 };
        Ok(())
    })
}
export!(Session_get_nth_pset, session_get_nth_pset);

/// The group of process set `which` (an index into [`PSETS`]).
fn pset_group(call: &'static str, which: usize) -> Result<crate::topology::UserGroup, CError> {
    let r = state::running().ok_or_else(|| CError::not_initialized(call))?;
    let world = r.world.comm.group();
    Ok(match which {
        0 => world,
        _ => world.include(&[r.world.comm.rank()]),
    })
}

pub unsafe extern "C" fn session_get_pset_info(
    handle: *mut c_void,
    name: *const c_char,
    info: *mut *mut c_void,
) -> c_int {
    const CALL: &str = "MPI_Session_get_pset_info";
    guard(CALL, handle, || {
        session(CALL, handle)?;
        let which = pset(CALL, &string(CALL, "pset_name", name)?)?;
        let size = pset_group(CALL, which)?.size();
        let entries = vec![("mpi_size".to_string(), size.to_string())];
        crate::c_abi::info::hand_out(CALL, info, crate::c_abi::info::CInfo::new(entries))
    })
}
export!(Session_get_pset_info, session_get_pset_info);

pub unsafe extern "C" fn session_get_info(handle: *mut c_void, info: *mut *mut c_void) -> c_int {
    const CALL: &str = "MPI_Session_get_info";
    guard(CALL, handle, || {
        session(CALL, handle)?;
        let level = state::running().map_or(MPI_THREAD_SERIALIZED, |r| r.thread_level);
        let name = match level {
            MPI_THREAD_SINGLE => "MPI_THREAD_SINGLE",
            MPI_THREAD_FUNNELED => "MPI_THREAD_FUNNELED",
            _ => "MPI_THREAD_SERIALIZED",
        };
        let entries = vec![("thread_level".to_string(), name.to_string())];
        crate::c_abi::info::hand_out(CALL, info, crate::c_abi::info::CInfo::new(entries))
    })
}
export!(Session_get_info, session_get_info);

pub unsafe extern "C" fn group_from_session_pset(
    handle: *mut c_void,
    name: *const c_char,
    out: *mut *mut c_void,
) -> c_int {
    const CALL: &str = "MPI_Group_from_session_pset";
    guard(CALL, handle, || {
        let s = session(CALL, handle)?;
        let which = pset(CALL, &string(CALL, "pset_name", name)?)?;
        group::hand_out_of_session(CALL, out, pset_group(CALL, which)?, Some(s.id))
    })
}
export!(Group_from_session_pset, group_from_session_pset);

/// The tag a string tag stands for: an FNV-1a hash, every member computing the same.
fn tag_of(stringtag: &str) -> i32 {
    let h = stringtag.bytes().fold(0x811c_9dc5_u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    (h & 0x00ff_ffff) as i32
}

/// A new communicator's handle at `out`, with error handler `errhandler`; made from the
/// groups of session `session` (if any), whose buffer its buffered sends then use.
fn hand_out_new(
    call: &'static str,
    out: *mut *mut c_void,
    made: crate::topology::SimpleCommunicator,
    errhandler: usize,
    session: Option<u32>,
) -> Result<(), CError> {
    if let Some(s) = session {
        let context = made.comm_data().p2p_context();
        crate::runtime::with_call(call, |rt| rt.engine.link_to_session(context, s));
    }
    let c = Box::new(Comm::new(made, errhandler));
    // SAFETY: checked non-null by the caller; the standard's contract: a handle slot.
    unsafe { *out = Box::into_raw(c).cast() };
    Ok(())
}

/// The communicator over `g` (this rank a member), made over the world's contexts with the
/// string tag's number.
fn from_group(
    call: &'static str,
    g: &crate::topology::UserGroup,
    stringtag: &str,
) -> Result<crate::topology::SimpleCommunicator, CError> {
    let r = state::running().ok_or_else(|| CError::not_initialized(call))?;
    // `None`: this process is not in the group (it takes no part, and gets no communicator).
    r.world
        .comm
        .split_by_subgroup_with_tag(g, tag_of(stringtag))
        .ok_or_else(|| {
            CError::new(
                MPI_ERR_GROUP,
                call,
                "this process is not a member of the group",
            )
        })
}

/// The arguments both constructors from groups take, checked: the string tag and the error
/// handler.
fn common_arguments(
    call: &'static str,
    stringtag: *const c_char,
    info: *mut c_void,
    errhandler: *mut c_void,
    out: *mut *mut c_void,
) -> Result<(String, usize), CError> {
    let tag = string(call, "stringtag", stringtag)?;
    if info as usize != MPI_INFO_NULL {
        crate::c_abi::info::info(call, info)?;
    }
    let eh = crate::c_abi::errhandler::checked(call, errhandler)?;
    if out.is_null() {
        return Err(CError::new(
            MPI_ERR_ARG,
            call,
            "the new communicator's slot is a null pointer",
        ));
    }
    Ok((tag, eh))
}

pub unsafe extern "C" fn comm_create_from_group(
    g: *mut c_void,
    stringtag: *const c_char,
    info: *mut c_void,
    errhandler: *mut c_void,
    out: *mut *mut c_void,
) -> c_int {
    const CALL: &str = "MPI_Comm_create_from_group";
    guard(CALL, std::ptr::null_mut(), || {
        let g = group(CALL, g)?;
        let (tag, eh) = common_arguments(CALL, stringtag, info, errhandler, out)?;
        let made = from_group(CALL, &g.group, &tag)?;
        hand_out_new(CALL, out, made, eh, g.session)
    })
}
export!(Comm_create_from_group, comm_create_from_group);

#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn intercomm_create_from_groups(
    local_group: *mut c_void,
    local_leader: c_int,
    remote_group: *mut c_void,
    remote_leader: c_int,
    stringtag: *const c_char,
    info: *mut c_void,
    errhandler: *mut c_void,
    out: *mut *mut c_void,
) -> c_int {
    const CALL: &str = "MPI_Intercomm_create_from_groups";
    guard(CALL, std::ptr::null_mut(), || {
        let local_cgroup = group(CALL, local_group)?;
        let local = &local_cgroup.group;
        let remote = &group(CALL, remote_group)?.group;
        let (tag, eh) = common_arguments(CALL, stringtag, info, errhandler, out)?;
        let r = state::running().ok_or_else(|| CError::not_initialized(CALL))?;
        if !(0..remote.size()).contains(&remote_leader) {
            return Err(CError::new(
                MPI_ERR_RANK,
                CALL,
                format!(
                    "remote_leader {remote_leader} is outside the remote group (size {})",
                    remote.size()
                ),
            ));
        }
        // The remote leader's rank in the world, where the two leaders talk.
        let world_group = r.world.comm.group();
        let leader_in_world = remote
            .translate_rank(remote_leader, &world_group)
            .expect("every process is in the world");
        let mine = from_group(CALL, local, &tag)?;
        let made = mine
            .try_create_intercommunicator(
                local_leader,
                &r.world.comm,
                leader_in_world,
                tag_of(&tag),
            )
            .map_err(CError::from_weft)?;
        hand_out_new(CALL, out, made.into(), eh, local_cgroup.session)
    })
}
export!(Intercomm_create_from_groups, intercomm_create_from_groups);

pub unsafe extern "C" fn session_create_errhandler(
    function: Option<crate::c_abi::errhandler::CommErrhandlerFn>,
    errhandler: *mut *mut c_void,
) -> c_int {
    // The same objects as communicators' handlers: a session handler's function also takes
    // the object's handle and the code by pointer.
    // SAFETY: passed on.
    unsafe {
        crate::c_abi::errhandler::create("MPI_Session_create_errhandler", function, errhandler)
    }
}
export!(Session_create_errhandler, session_create_errhandler);

pub unsafe extern "C" fn session_set_errhandler(
    handle: *mut c_void,
    errhandler: *mut c_void,
) -> c_int {
    const CALL: &str = "MPI_Session_set_errhandler";
    guard(CALL, handle, || {
        let s = session(CALL, handle)?;
        let eh = crate::c_abi::errhandler::checked(CALL, errhandler)?;
        crate::c_abi::errhandler::retain(eh);
        crate::c_abi::errhandler::release(s.errhandler.replace(eh));
        Ok(())
    })
}
export!(Session_set_errhandler, session_set_errhandler);

pub unsafe extern "C" fn session_get_errhandler(
    handle: *mut c_void,
    out: *mut *mut c_void,
) -> c_int {
    const CALL: &str = "MPI_Session_get_errhandler";
    guard(CALL, handle, || {
        let s = session(CALL, handle)?;
        if out.is_null() {
            return Err(CError::new(
                MPI_ERR_ARG,
                CALL,
                "errhandler is a null pointer",
            ));
        }
        let eh = s.errhandler.get();
        // The program gets a reference of its own (it frees it with MPI_Errhandler_free).
        crate::c_abi::errhandler::retain(eh);
        // SAFETY: checked non-null.
        unsafe { *out = eh as *mut c_void };
        Ok(())
    })
}
export!(Session_get_errhandler, session_get_errhandler);

pub unsafe extern "C" fn session_call_errhandler(handle: *mut c_void, errorcode: c_int) -> c_int {
    const CALL: &str = "MPI_Session_call_errhandler";
    let Some(s) = session_object(handle) else {
        return guard(CALL, handle, || session(CALL, handle).map(drop));
    };
    match s.errhandler.get() {
        MPI_ERRORS_RETURN => MPI_SUCCESS,
        MPI_ERRORS_ARE_FATAL | MPI_ERRORS_ABORT => crate::c_abi::errors::fatal(
            &format!("{CALL}: error code {errorcode} raised on the session"),
            errorcode,
        ),
        h => {
            crate::c_abi::errhandler::call_user(h, handle, errorcode);
            MPI_SUCCESS
        }
    }
}
export!(Session_call_errhandler, session_call_errhandler);
