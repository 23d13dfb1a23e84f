//! Info objects: ordered (key, value) strings, and MPI_INFO_ENV (how the process was
//! started). A handle is a pointer to a boxed [`CInfo`]; MPI_INFO_ENV decodes to one kept
//! in the running state.

use crate::c_abi::abi::*;
use crate::c_abi::env::put_int;
use crate::c_abi::errors::{guard, write_string, CError};
use crate::c_abi::state;
use std::cell::{Cell, RefCell};
use std::ffi::{c_char, c_int, c_void, CStr};

/// An info object as C holds it.
pub(crate) struct CInfo {
    magic: Cell<u64>,
    pub(crate) entries: RefCell<Vec<(String, String)>>,
}

const INFO_MAGIC: u64 = 0x5745_4654_494e_464f; // "WEFTINFO"

impl crate::c_abi::handles::Marked for CInfo {
    const MARK: u64 = INFO_MAGIC;
    fn mark(&self) -> u64 {
        self.magic.get()
    }
}

impl CInfo {
    pub(crate) fn new(entries: Vec<(String, String)>) -> CInfo {
        CInfo {
            magic: Cell::new(INFO_MAGIC),
            entries: RefCell::new(entries),
        }
    }

    /// The value of `key`, if set.
    pub(crate) fn get(&self, key: &str) -> Option<String> {
        let entries = self.entries.borrow();
        entries
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
    }

    /// MPI_INFO_ENV's entries: the command, its arguments, the process count, the host, the
    /// working directory and the threading level.
    pub(crate) fn env(size: c_int, thread_level: c_int) -> CInfo {
        let mut args = std::env::args();
        let mut e = vec![("command".to_string(), args.next().unwrap_or_default())];
        let rest: Vec<String> = args.collect();
        if !rest.is_empty() {
            e.push(("argv".into(), rest.join(" ")));
        }
        e.push(("maxprocs".into(), size.to_string()));
        e.push(("soft".into(), size.to_string()));
        if let Ok(host) = crate::environment::processor_name() {
            e.push(("host".into(), host));
        }
        if let Ok(dir) = std::env::current_dir() {
            e.push(("wdir".into(), dir.display().to_string()));
        }
        let level = match thread_level {
            MPI_THREAD_SINGLE => "MPI_THREAD_SINGLE",
            MPI_THREAD_FUNNELED => "MPI_THREAD_FUNNELED",
            _ => "MPI_THREAD_SERIALIZED",
        };
        e.push(("thread_level".into(), level.into()));
        CInfo::new(e)
    }
}

/// The info object of `handle`.
pub(crate) fn info(call: &'static str, handle: *mut c_void) -> Result<&'static CInfo, CError> {
    let value = handle as usize;
    // Info objects live outside MPI_Init..MPI_Finalize too (MPI 4.1 §11.2.1); only
    // MPI_INFO_ENV needs MPI running.
    if let Some(i) = crate::c_abi::handles::user_object::<CInfo>(value) {
        return Ok(i);
    }
    if value == MPI_INFO_ENV {
        let running = state::running().ok_or_else(|| CError::not_initialized(call))?;
        return Ok(&running.info_env);
    }
    let what = if value == MPI_INFO_NULL {
        "MPI_INFO_NULL".to_string()
    } else {
        format!("{value:#x}")
    };
    Err(CError::new(
        MPI_ERR_INFO,
        call,
        format!("{what} is not an info object"),
    ))
}

pub(crate) fn hand_out(call: &'static str, out: *mut *mut c_void, i: CInfo) -> Result<(), CError> {
    if out.is_null() {
        return Err(CError::new(MPI_ERR_ARG, call, "info is a null pointer"));
    }
    // SAFETY: checked non-null; a handle slot.
    unsafe { *out = Box::into_raw(Box::new(i)).cast() };
    Ok(())
}

/// A key argument: a C string of at most MPI_MAX_INFO_KEY - 1 bytes, not empty.
fn key(call: &'static str, key: *const c_char) -> Result<String, CError> {
    if key.is_null() {
        return Err(CError::new(MPI_ERR_INFO_KEY, call, "key is a null pointer"));
    }
    // SAFETY: the standard's contract: a NUL-terminated string.
    let k = unsafe { CStr::from_ptr(key) }
        .to_string_lossy()
        .into_owned();
    if k.is_empty() || k.len() >= MPI_MAX_INFO_KEY as usize {
        return Err(CError::new(
            MPI_ERR_INFO_KEY,
            call,
            format!(
                "the key {k:?} is empty or longer than {} bytes",
                MPI_MAX_INFO_KEY - 1
            ),
        ));
    }
    Ok(k)
}

pub unsafe extern "C" fn info_create(out: *mut *mut c_void) -> c_int {
    const CALL: &str = "MPI_Info_create";
    guard(CALL, std::ptr::null_mut(), || {
        hand_out(CALL, out, CInfo::new(Vec::new()))
    })
}
export!(Info_create, info_create);

pub unsafe extern "C" fn info_create_env(
    _argc: c_int,
    _argv: *mut *mut c_char,
    out: *mut *mut c_void,
) -> c_int {
    const CALL: &str = "MPI_Info_create_env";
    guard(CALL, std::ptr::null_mut(), || {
        let (size, level) = match state::running() {
            Some(r) => (
                crate::traits::Communicator::size(&r.world.comm),
                r.thread_level,
            ),
            None => (1, MPI_THREAD_SINGLE),
        };
        hand_out(CALL, out, CInfo::env(size, level))
    })
}
export!(Info_create_env, info_create_env);

pub unsafe extern "C" fn info_set(h: *mut c_void, k: *const c_char, v: *const c_char) -> c_int {
    const CALL: &str = "MPI_Info_set";
    guard(CALL, std::ptr::null_mut(), || {
        let i = info(CALL, h)?;
        let k = key(CALL, k)?;
        if v.is_null() {
            return Err(CError::new(
                MPI_ERR_INFO_VALUE,
                CALL,
                "value is a null pointer",
            ));
        }
        // SAFETY: the standard's contract: a NUL-terminated string.
        let v = unsafe { CStr::from_ptr(v) }.to_string_lossy().into_owned();
        if v.len() >= MPI_MAX_INFO_VAL as usize {
            return Err(CError::new(
                MPI_ERR_INFO_VALUE,
                CALL,
                format!(
                    "the value for {k:?} is longer than {} bytes",
                    MPI_MAX_INFO_VAL - 1
                ),
            ));
        }
        let mut e = i.entries.borrow_mut();
        match e.iter_mut().find(|(ek, _)| *ek == k) {
            Some(entry) => entry.1 = v,
            None => e.push((k, v)),
        }
        Ok(())
    })
}
export!(Info_set, info_set);

pub unsafe extern "C" fn info_delete(h: *mut c_void, k: *const c_char) -> c_int {
    const CALL: &str = "MPI_Info_delete";
    guard(CALL, std::ptr::null_mut(), || {
        let i = info(CALL, h)?;
        let k = key(CALL, k)?;
        let mut e = i.entries.borrow_mut();
        match e.iter().position(|(ek, _)| *ek == k) {
            Some(at) => {
                e.remove(at);
                Ok(())
            }
            None => Err(CError::new(
                MPI_ERR_INFO_NOKEY,
                CALL,
                format!("no key {k:?}"),
            )),
        }
    })
}
export!(Info_delete, info_delete);

/// The value of `k` in `h`, if set.
fn lookup(call: &'static str, h: *mut c_void, k: *const c_char) -> Result<Option<String>, CError> {
    let i = info(call, h)?;
    let k = key(call, k)?;
    Ok(i.entries
        .borrow()
        .iter()
        .find(|(ek, _)| *ek == k)
        .map(|(_, v)| v.clone()))
}

pub unsafe extern "C" fn info_get(
    h: *mut c_void,
    k: *const c_char,
    valuelen: c_int,
    value: *mut c_char,
    flag: *mut c_int,
) -> c_int {
    const CALL: &str = "MPI_Info_get";
    guard(CALL, std::ptr::null_mut(), || {
        let found = lookup(CALL, h, k)?;
        put_int(CALL, "flag", flag, found.is_some().into())?;
        if let Some(v) = found {
            if value.is_null() {
                return Err(CError::new(MPI_ERR_ARG, CALL, "value is a null pointer"));
            }
            let room = handles_len(CALL, valuelen)? + 1;
            let mut len = 0;
            // SAFETY: the standard's contract: `valuelen + 1` bytes at `value`.
            unsafe { write_string(&v, value, room, &mut len) };
        }
        Ok(())
    })
}
export!(Info_get, info_get);

fn handles_len(call: &'static str, n: c_int) -> Result<usize, CError> {
    usize::try_from(n)
        .map_err(|_| CError::new(MPI_ERR_ARG, call, format!("the length {n} is negative")))
}

pub unsafe extern "C" fn info_get_string(
    h: *mut c_void,
    k: *const c_char,
    buflen: *mut c_int,
    value: *mut c_char,
    flag: *mut c_int,
) -> c_int {
    const CALL: &str = "MPI_Info_get_string";
    guard(CALL, std::ptr::null_mut(), || {
        if buflen.is_null() {
            return Err(CError::new(MPI_ERR_ARG, CALL, "buflen is a null pointer"));
        }
        let found = lookup(CALL, h, k)?;
        put_int(CALL, "flag", flag, found.is_some().into())?;
        if let Some(v) = found {
            // SAFETY: checked non-null.
            let room = handles_len(CALL, unsafe { *buflen })?;
            if room > 0 && !value.is_null() {
                let mut len = 0;
                // SAFETY: the standard's contract: `*buflen` bytes at `value`.
                unsafe { write_string(&v, value, room, &mut len) };
            }
            // SAFETY: checked non-null: the length the whole value needs, with its NUL.
            unsafe { *buflen = v.len() as c_int + 1 };
        }
        Ok(())
    })
}
export!(Info_get_string, info_get_string);

pub unsafe extern "C" fn info_get_valuelen(
    h: *mut c_void,
    k: *const c_char,
    valuelen: *mut c_int,
    flag: *mut c_int,
) -> c_int {
    const CALL: &str = "MPI_Info_get_valuelen";
    guard(CALL, std::ptr::null_mut(), || {
        let found = lookup(CALL, h, k)?;
        put_int(CALL, "flag", flag, found.is_some().into())?;
        if let Some(v) = found {
            put_int(CALL, "valuelen", valuelen, v.len() as c_int)?;
        }
        Ok(())
    })
}
export!(Info_get_valuelen, info_get_valuelen);

pub unsafe extern "C" fn info_get_nkeys(h: *mut c_void, nkeys: *mut c_int) -> c_int {
    const CALL: &str = "MPI_Info_get_nkeys";
    guard(CALL, std::ptr::null_mut(), || {
        let n = info(CALL, h)?.entries.borrow().len();
        put_int(CALL, "nkeys", nkeys, n as c_int)
    })
}
export!(Info_get_nkeys, info_get_nkeys);

pub unsafe extern "C" fn info_get_nthkey(h: *mut c_void, n: c_int, k: *mut c_char) -> c_int {
    const CALL: &str = "MPI_Info_get_nthkey";
    guard(CALL, std::ptr::null_mut(), || {
        let i = info(CALL, h)?;
        let e = i.entries.borrow();
        let Some((key, _)) = usize::try_from(n).ok().and_then(|n| e.get(n)) else {
            return Err(CError::new(
                MPI_ERR_ARG,
                CALL,
                format!("n = {n}: the info object has {} keys", e.len()),
            ));
        };
        if k.is_null() {
            return Err(CError::new(MPI_ERR_ARG, CALL, "key is a null pointer"));
        }
        let mut len = 0;
        // SAFETY: the standard's contract: MPI_MAX_INFO_KEY bytes at `k`.
        unsafe { write_string(key, k, MPI_MAX_INFO_KEY as usize, &mut len) };
        Ok(())
    })
}
export!(Info_get_nthkey, info_get_nthkey);

pub unsafe extern "C" fn info_dup(h: *mut c_void, out: *mut *mut c_void) -> c_int {
    const CALL: &str = "MPI_Info_dup";
    guard(CALL, std::ptr::null_mut(), || {
        let entries = info(CALL, h)?.entries.borrow().clone();
        hand_out(CALL, out, CInfo::new(entries))
    })
}
export!(Info_dup, info_dup);

pub unsafe extern "C" fn info_free(h: *mut *mut c_void) -> c_int {
    const CALL: &str = "MPI_Info_free";
    guard(CALL, std::ptr::null_mut(), || {
        if h.is_null() {
            return Err(CError::new(MPI_ERR_ARG, CALL, "info is a null pointer"));
        }
        // SAFETY: checked non-null.
        let handle = unsafe { *h };
        let i = info(CALL, handle)?;
        if handle as usize == MPI_INFO_ENV {
            return Err(CError::new(
                MPI_ERR_INFO,
                CALL,
                "MPI_INFO_ENV cannot be freed",
            ));
        }
        i.magic.set(0);
        // SAFETY: a live handle, boxed by `hand_out`.
        drop(unsafe { Box::from_raw(handle.cast::<CInfo>()) });
        // SAFETY: checked non-null.
        unsafe { *h = MPI_INFO_NULL as *mut c_void };
        Ok(())
    })
}
export!(Info_free, info_free);

pub unsafe extern "C" fn comm_get_info(comm: *mut c_void, out: *mut *mut c_void) -> c_int {
    const CALL: &str = "MPI_Comm_get_info";
    guard(CALL, comm, || {
        crate::c_abi::handles::comm(CALL, comm)?;
        // Weft takes no hints on communicators yet, so none are in force.
        hand_out(CALL, out, CInfo::new(Vec::new()))
    })
}
export!(Comm_get_info, comm_get_info);

pub unsafe extern "C" fn comm_set_info(comm: *mut c_void, h: *mut c_void) -> c_int {
    const CALL: &str = "MPI_Comm_set_info";
    guard(CALL, comm, || {
        crate::c_abi::handles::comm(CALL, comm)?;
        info(CALL, h)?;
        // Hints may be ignored (the standard's rule); MPI_Comm_get_info says none hold.
        Ok(())
    })
}
export!(Comm_set_info, comm_set_info);
