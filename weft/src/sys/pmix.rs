//! A hand-written binding to the few libpmix calls bootstrap needs (OpenPMIx 4.x, Debian's
//! libpmix-dev; `pmix.h`, `pmix_common.h`), and safe wrappers over them. Built only with the
//! `pmix` cargo feature; `build.rs` links `-lpmix` (found with pkg-config).
//!
//! Layouts (checked against OpenPMIx 4.2.2 with `sizeof`/`offsetof` on x86_64, and part of
//! its stable ABI): `pmix_proc_t` is `char nspace[256]; uint32_t rank` (260 bytes);
//! `pmix_value_t` is `uint16_t type` then an 8-aligned union at offset 8 (32 bytes in all);
//! `pmix_info_t` is `char key[512]; uint32_t flags; pmix_value_t value` (552 bytes).

use std::ffi::{c_char, c_int, CStr, CString};
use std::ptr;

/// `pmix_status_t`.
pub type Status = c_int;
/// `PMIX_SUCCESS`.
pub const SUCCESS: Status = 0;
/// `PMIX_ERR_NOT_FOUND`.
pub const ERR_NOT_FOUND: Status = -46;
/// `PMIX_RANK_UNDEF`: "any rank" for keys whose owner the caller does not know.
pub const RANK_UNDEF: u32 = u32::MAX;
/// `PMIX_RANK_WILDCARD`: the job as a whole (job-level keys such as its size).
pub const RANK_WILDCARD: u32 = u32::MAX - 1;

const NSPACE_LEN: usize = 256;
const KEY_LEN: usize = 512;

// Data types (`pmix_data_type_t`, a uint16_t).
const T_BOOL: u16 = 1;
const T_STRING: u16 = 3;
const T_SIZE: u16 = 4;
const T_INT: u16 = 6;
const T_UINT16: u16 = 13;
const T_UINT32: u16 = 14;
const T_UINT64: u16 = 15;
const T_PROC_RANK: u16 = 40;

/// `PMIX_GLOBAL` (`pmix_scope_t`, a uint8_t): share with every process of the job.
const SCOPE_GLOBAL: u8 = 3;

/// `pmix_proc_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Proc {
    nspace: [c_char; NSPACE_LEN],
    rank: u32,
}

/// `pmix_value_t`: the type tag and the data union (only pointer- and integer-sized members
/// are read or written here; the padding keeps the size the library expects).
#[repr(C)]
struct Value {
    kind: u16,
    data: ValueData,
}

#[repr(C)]
#[derive(Clone, Copy)]
union ValueData {
    flag: bool,
    string: *mut c_char,
    uint16: u16,
    uint32: u32,
    uint64: u64,
    integer: c_int,
    size: usize,
    _pad: [u64; 3],
}

/// `pmix_info_t`.
#[repr(C)]
struct Info {
    key: [c_char; KEY_LEN],
    flags: u32,
    value: Value,
}

const _: () = assert!(std::mem::size_of::<Proc>() == 260);
const _: () = assert!(std::mem::size_of::<Value>() == 32);
const _: () = assert!(std::mem::size_of::<Info>() == 552);

extern "C" {
    fn PMIx_Init(proc_: *mut Proc, info: *mut Info, ninfo: usize) -> Status;
    fn PMIx_Finalize(info: *const Info, ninfo: usize) -> Status;
    fn PMIx_Abort(status: c_int, msg: *const c_char, procs: *mut Proc, nprocs: usize) -> Status;
    fn PMIx_Put(scope: u8, key: *const c_char, val: *mut Value) -> Status;
    fn PMIx_Commit() -> Status;
    fn PMIx_Fence(procs: *const Proc, nprocs: usize, info: *const Info, ninfo: usize) -> Status;
    fn PMIx_Get(
        proc_: *const Proc,
        key: *const c_char,
        info: *const Info,
        ninfo: usize,
        val: *mut *mut Value,
    ) -> Status;
    fn PMIx_Value_destruct(val: *mut Value);
    fn PMIx_Error_string(status: Status) -> *const c_char;
}

/// The library's name for `status`, e.g. `PMIX_ERR_NOT_FOUND`.
pub fn error_string(status: Status) -> String {
    // SAFETY: PMIx_Error_string accepts any status and returns a pointer to a static,
    // NUL-terminated string (or NULL, handled).
    let p = unsafe { PMIx_Error_string(status) };
    if p.is_null() {
        return format!("PMIx status {status}");
    }
    // SAFETY: non-null, NUL-terminated and static (see above).
    let s = unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned();
    format!("{s} ({status})")
}

impl Proc {
    /// The process `rank` of namespace `nspace` (truncated to the library's 255 bytes).
    pub fn new(nspace: &str, rank: u32) -> Proc {
        let mut p = Proc {
            nspace: [0; NSPACE_LEN],
            rank,
        };
        for (d, s) in p.nspace.iter_mut().zip(nspace.bytes().take(NSPACE_LEN - 1)) {
            *d = s as c_char;
        }
        p
    }

    /// The namespace, as text.
    pub fn nspace(&self) -> String {
        let bytes: Vec<u8> = self
            .nspace
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// The rank.
    pub fn rank(&self) -> u32 {
        self.rank
    }
}

fn c_text(what: &str, text: &str) -> Result<CString, String> {
    CString::new(text).map_err(|_| format!("the {what} {text:?} contains a NUL byte"))
}

/// `PMIx_Init`: connects to the local PMIx server named by the environment; returns this
/// process's namespace and rank.
pub fn init() -> Result<Proc, Status> {
    let mut p = Proc::new("", 0);
    // SAFETY: `p` is a valid, writable pmix_proc_t; no info array (NULL, 0) is allowed.
    let rc = unsafe { PMIx_Init(&mut p, ptr::null_mut(), 0) };
    if rc == SUCCESS {
        Ok(p)
    } else {
        Err(rc)
    }
}

/// `PMIx_Finalize`.
pub fn finalize() -> Status {
    // SAFETY: no info array (NULL, 0) is allowed; called after a successful init.
    unsafe { PMIx_Finalize(ptr::null(), 0) }
}

/// `PMIx_Abort` for the whole job (no process list).
pub fn abort(code: i32, msg: &str) -> Status {
    let msg = CString::new(msg.replace('\0', " ")).unwrap_or_default();
    // SAFETY: `msg` is a NUL-terminated string that outlives the call; NULL, 0 means every
    // process of the caller's namespace.
    unsafe { PMIx_Abort(code, msg.as_ptr(), ptr::null_mut(), 0) }
}

/// `PMIx_Put(PMIX_GLOBAL, key, string value)`. The library copies the value.
pub fn put_string(key: &str, value: &str) -> Result<(), String> {
    let k = c_text("key", key)?;
    let v = c_text("value", value)?;
    let mut val = Value {
        kind: T_STRING,
        data: ValueData {
            string: v.as_ptr().cast_mut(),
        },
    };
    // SAFETY: `k` and `v` are NUL-terminated and outlive the call; `val` is a valid
    // pmix_value_t of type PMIX_STRING whose string the library copies, never writes.
    let rc = unsafe { PMIx_Put(SCOPE_GLOBAL, k.as_ptr(), &mut val) };
    if rc == SUCCESS {
        Ok(())
    } else {
        Err(error_string(rc))
    }
}

/// `PMIx_Commit` then `PMIx_Fence` over the whole namespace, collecting the data (so later
/// gets are answered locally).
pub fn commit_and_fence() -> Result<(), String> {
    // SAFETY: no arguments; called after a successful init.
    let rc = unsafe { PMIx_Commit() };
    if rc != SUCCESS {
        return Err(format!("PMIx_Commit: {}", error_string(rc)));
    }
    let info = Info::flag(b"pmix.collect");
    // SAFETY: NULL, 0 procs means every process of the caller's namespace; `info` is one
    // valid pmix_info_t (NUL-terminated key, bool value) that outlives the call.
    let rc = unsafe { PMIx_Fence(ptr::null(), 0, &info, 1) };
    if rc == SUCCESS {
        Ok(())
    } else {
        Err(format!("PMIx_Fence: {}", error_string(rc)))
    }
}

/// A value `PMIx_Get` returned, converted to Rust.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Got {
    /// A string.
    Text(String),
    /// Any unsigned or non-negative integer type.
    Number(u64),
    /// Another type (its `pmix_data_type_t`).
    Other(u16),
}

impl Info {
    /// A `pmix_info_t` holding boolean `true` under `key` (a directive such as
    /// `pmix.collect`).
    fn flag(key: &[u8]) -> Info {
        debug_assert!(
            key.len() < KEY_LEN,
            "PMIx info keys are shorter than 512 bytes"
        );
        let mut info = Info {
            key: [0; KEY_LEN],
            flags: 0,
            value: Value {
                kind: T_BOOL,
                data: ValueData { flag: true },
            },
        };
        for (d, s) in info.key.iter_mut().zip(key) {
            *d = *s as c_char;
        }
        info
    }
}

/// `PMIx_Get(proc, key)`; `Ok(None)` when the key is not found. With `local_only`
/// (`PMIX_OPTIONAL`), only this process's store is searched: after a fence that collected
/// the data, everything put before it is there, and a miss does not become a request to the
/// server (which Open MPI 4's answers only by timing out for `PMIX_RANK_UNDEF`).
pub fn get(proc_: &Proc, key: &str, local_only: bool) -> Result<Option<Got>, String> {
    let k = c_text("key", key)?;
    let mut val: *mut Value = ptr::null_mut();
    let optional = Info::flag(b"pmix.optional");
    let (info, ninfo) = if local_only {
        (&optional as *const Info, 1)
    } else {
        (ptr::null(), 0)
    };
    // SAFETY: `proc_` and `k` are valid for the call; `info` is NULL with 0 or points to one
    // valid pmix_info_t that outlives the call; on success the library stores a pointer to a
    // value it allocated in `val`.
    let rc = unsafe { PMIx_Get(proc_, k.as_ptr(), info, ninfo, &mut val) };
    if rc == ERR_NOT_FOUND {
        return Ok(None);
    }
    if rc != SUCCESS {
        return Err(error_string(rc));
    }
    if val.is_null() {
        return Ok(None);
    }
    // SAFETY: on success `val` points to an initialized pmix_value_t; the union member read
    // is the one its type tag names.
    let got = unsafe {
        let v = &*val;
        match v.kind {
            T_STRING if v.data.string.is_null() => Got::Text(String::new()),
            T_STRING => Got::Text(CStr::from_ptr(v.data.string).to_string_lossy().into_owned()),
            T_UINT32 | T_PROC_RANK => Got::Number(u64::from(v.data.uint32)),
            T_UINT16 => Got::Number(u64::from(v.data.uint16)),
            T_UINT64 => Got::Number(v.data.uint64),
            T_SIZE => Got::Number(v.data.size as u64),
            T_INT if v.data.integer >= 0 => Got::Number(v.data.integer as u64),
            other => Got::Other(other),
        }
    };
    // SAFETY: `val` was allocated by the library with malloc (PMIX_VALUE_RELEASE: destruct,
    // then free) and is not used afterwards.
    unsafe {
        PMIx_Value_destruct(val);
        libc::free(val.cast());
    }
    Ok(Some(got))
}
