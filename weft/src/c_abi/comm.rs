//! Communicators made by the program (dup, split, free), their comparisons and names, and
//! attributes: keyvals with copy and delete callbacks, and the predefined attributes
//! (MPI_TAG_UB and the others).

use crate::c_abi::abi::*;
use crate::c_abi::env::put_int;
use crate::c_abi::errors::{guard, CError};
use crate::c_abi::handles;
use crate::c_abi::state::{self, Comm, Keyval, FIRST_KEYVAL};
use crate::topology::{Color, CommunicatorRelation};
use crate::traits::*;
use std::ffi::{c_char, c_int, c_void};

/// Boxes `c` and stores its handle at `out` (MPI_COMM_NULL for `None`).
///
/// # Safety
/// `out` is a writable handle slot.
unsafe fn hand_out(out: *mut *mut c_void, c: Option<Comm>) {
    let handle = match c {
        Some(c) => Box::into_raw(Box::new(c)).cast(),
        None => MPI_COMM_NULL as *mut c_void,
    };
    // SAFETY: the caller's promise.
    unsafe { *out = handle };
}

fn check_slot(call: &'static str, what: &str, out: *mut *mut c_void) -> Result<(), CError> {
    if out.is_null() {
        return Err(CError::new(
            MPI_ERR_ARG,
            call,
            format!("{what} is a null pointer"),
        ));
    }
    Ok(())
}

/// The copy callback of a communicator attribute (MPI_Comm_copy_attr_function).
type CopyFn = unsafe extern "C" fn(
    *mut c_void,
    c_int,
    *mut c_void,
    *mut c_void,
    *mut c_void,
    *mut c_int,
) -> c_int;
/// The delete callback (MPI_Comm_delete_attr_function).
type DeleteFn = unsafe extern "C" fn(*mut c_void, c_int, *mut c_void, *mut c_void) -> c_int;

pub(crate) fn keyval(call: &'static str, key: c_int) -> Result<Keyval, CError> {
    let r = state::running().ok_or_else(|| CError::not_initialized(call))?;
    r.keyvals.borrow().get(&key).copied().ok_or_else(|| {
        CError::new(
            MPI_ERR_KEYVAL,
            call,
            format!("{key} is not an attribute key (or it was freed)"),
        )
    })
}

/// The attributes `old` passes to a duplicate, through their keys' copy callbacks.
fn copy_attributes(
    call: &'static str,
    old: &Comm,
    old_handle: *mut c_void,
) -> Result<Vec<(i32, *mut c_void)>, CError> {
    let mut copied = Vec::new();
    let attrs = old.attrs.borrow().clone();
    for (key, value) in attrs {
        let k = keyval(call, key)?;
        match k.copy {
            0 => {}
            1 => copied.push((key, value)),
            f => {
                // SAFETY: the program registered `f` as an MPI_Comm_copy_attr_function.
                let f: CopyFn = unsafe { std::mem::transmute::<usize, CopyFn>(f) };
                let mut out: *mut c_void = std::ptr::null_mut();
                let mut flag: c_int = 0;
                // SAFETY: the callback's contract: the arguments the standard gives it.
                let rc = unsafe {
                    f(
                        old_handle,
                        key,
                        k.extra_state,
                        value,
                        (&mut out as *mut *mut c_void).cast(),
                        &mut flag,
                    )
                };
                if rc != MPI_SUCCESS {
                    return Err(CError::new(
                        rc,
                        call,
                        format!("the copy callback of attribute key {key} returned {rc}"),
                    ));
                }
                if flag != 0 {
                    copied.push((key, out));
                }
            }
        }
    }
    Ok(copied)
}

/// Runs the delete callback of `key` for `value` on the communicator `handle`.
pub(crate) fn delete_one(
    call: &'static str,
    handle: *mut c_void,
    key: c_int,
    value: *mut c_void,
) -> Result<(), CError> {
    let k = keyval(call, key)?;
    if k.delete != 0 {
        // SAFETY: the program registered it as an MPI_Comm_delete_attr_function.
        let f: DeleteFn = unsafe { std::mem::transmute::<usize, DeleteFn>(k.delete) };
        // SAFETY: the callback's contract.
        let rc = unsafe { f(handle, key, value, k.extra_state) };
        if rc != MPI_SUCCESS {
            return Err(CError::new(
                rc,
                call,
                format!("the delete callback of attribute key {key} returned {rc}"),
            ));
        }
    }
    Ok(())
}

/// Deletes every attribute of `c` (its handle `handle`), newest first.
pub(crate) fn delete_attributes(
    call: &'static str,
    c: &Comm,
    handle: *mut c_void,
) -> Result<(), CError> {
    while let Some((key, value)) = c.attrs.borrow_mut().pop() {
        delete_one(call, handle, key, value)?;
    }
    Ok(())
}

pub unsafe extern "C" fn comm_dup(comm: *mut c_void, newcomm: *mut *mut c_void) -> c_int {
    const CALL: &str = "MPI_Comm_dup";
    guard(CALL, comm, || {
        let c = handles::comm(CALL, comm)?;
        check_slot(CALL, "newcomm", newcomm)?;
        let dup = c.comm.try_duplicate().map_err(CError::from_weft)?;
        let new = Comm::new(dup, c.errhandler.get());
        match copy_attributes(CALL, c, comm) {
            Ok(attrs) => *new.attrs.borrow_mut() = attrs,
            Err(e) => {
                // A failing copy callback fails the duplicate: no communicator.
                // SAFETY: checked non-null.
                unsafe { hand_out(newcomm, None) };
                return Err(e);
            }
        }
        // SAFETY: checked non-null.
        unsafe { hand_out(newcomm, Some(new)) };
        Ok(())
    })
}
export!(Comm_dup, comm_dup);

pub unsafe extern "C" fn comm_dup_with_info(
    comm: *mut c_void,
    info: *mut c_void,
    newcomm: *mut *mut c_void,
) -> c_int {
    let rc = guard("MPI_Comm_dup_with_info", comm, || {
        if info as usize != MPI_INFO_NULL {
            crate::c_abi::info::info("MPI_Comm_dup_with_info", info)?;
        }
        Ok(())
    });
    if rc != MPI_SUCCESS {
        return rc;
    }
    // Hints may be ignored (the standard's rule): the rest is MPI_Comm_dup.
    // SAFETY: passed on.
    unsafe { comm_dup(comm, newcomm) }
}
export!(Comm_dup_with_info, comm_dup_with_info);

/// A duplicate being made (MPI_Comm_idup): handed to the program's `newcomm` when it
/// completes, with the error handler and the attributes copied when the call was made.
struct Duplicating {
    request: Option<crate::topology::DuplicateRequest>,
    newcomm: *mut *mut c_void,
    /// Retained until handed on.
    errhandler: usize,
    attrs: Vec<(i32, *mut c_void)>,
}

impl Duplicating {
    fn hand(&mut self, dup: crate::topology::SimpleCommunicator) {
        let new = Comm::new(dup, self.errhandler);
        *new.attrs.borrow_mut() = std::mem::take(&mut self.attrs);
        // SAFETY: checked non-null when the call was made; the standard makes the program
        // keep it valid until the request completes.
        unsafe { hand_out(self.newcomm, Some(new)) };
    }
}

impl crate::c_abi::requests::Ongoing for Duplicating {
    fn wait(&mut self) {
        if let Some(r) = self.request.take() {
            self.hand(r.wait());
        }
    }
    fn test(&mut self) -> bool {
        match self
            .request
            .take()
            .map(crate::topology::DuplicateRequest::test)
        {
            None => true,
            Some(Ok(dup)) => {
                self.hand(dup);
                true
            }
            Some(Err(r)) => {
                self.request = Some(r);
                false
            }
        }
    }
}

impl Drop for Duplicating {
    fn drop(&mut self) {
        crate::c_abi::errhandler::release(self.errhandler);
    }
}

pub unsafe extern "C" fn comm_idup(
    comm: *mut c_void,
    newcomm: *mut *mut c_void,
    request: *mut *mut c_void,
) -> c_int {
    const CALL: &str = "MPI_Comm_idup";
    guard(CALL, comm, || {
        let c = handles::comm(CALL, comm)?;
        check_slot(CALL, "newcomm", newcomm)?;
        crate::c_abi::requests::check_out(CALL, request)?;
        let attrs = copy_attributes(CALL, c, comm)?;
        let errhandler = c.errhandler.get();
        crate::c_abi::errhandler::retain(errhandler);
        let d = Duplicating {
            request: Some(c.comm.immediate_duplicate()),
            newcomm,
            errhandler,
            attrs,
        };
        // SAFETY: checked non-null.
        unsafe {
            crate::c_abi::requests::hand_out(request, crate::c_abi::requests::CRequest::ongoing(d))
        };
        Ok(())
    })
}
export!(Comm_idup, comm_idup);

pub unsafe extern "C" fn comm_idup_with_info(
    comm: *mut c_void,
    info: *mut c_void,
    newcomm: *mut *mut c_void,
    request: *mut *mut c_void,
) -> c_int {
    let rc = guard("MPI_Comm_idup_with_info", comm, || {
        if info as usize != MPI_INFO_NULL {
            crate::c_abi::info::info("MPI_Comm_idup_with_info", info)?;
        }
        Ok(())
    });
    if rc != MPI_SUCCESS {
        return rc;
    }
    // Hints may be ignored: the rest is MPI_Comm_idup.
    // SAFETY: passed on.
    unsafe { comm_idup(comm, newcomm, request) }
}
export!(Comm_idup_with_info, comm_idup_with_info);

pub unsafe extern "C" fn comm_split(
    comm: *mut c_void,
    color: c_int,
    key: c_int,
    newcomm: *mut *mut c_void,
) -> c_int {
    const CALL: &str = "MPI_Comm_split";
    guard(CALL, comm, || {
        let c = handles::comm(CALL, comm)?;
        check_slot(CALL, "newcomm", newcomm)?;
        let color = match color {
            MPI_UNDEFINED => Color::undefined(),
            c if c >= 0 => Color::with_value(c),
            c => {
                return Err(CError::new(
                    MPI_ERR_ARG,
                    CALL,
                    format!("the color {c} is negative (and not MPI_UNDEFINED)"),
                ))
            }
        };
        let split = c
            .comm
            .try_split_by_color_with_key(color, key)
            .map_err(CError::from_weft)?;
        // SAFETY: checked non-null.
        unsafe { hand_out(newcomm, split.map(|s| Comm::new(s, c.errhandler.get()))) };
        Ok(())
    })
}
export!(Comm_split, comm_split);

pub unsafe extern "C" fn comm_split_type(
    comm: *mut c_void,
    split_type: c_int,
    key: c_int,
    info: *mut c_void,
    newcomm: *mut *mut c_void,
) -> c_int {
    const CALL: &str = "MPI_Comm_split_type";
    guard(CALL, comm, || {
        let c = handles::comm(CALL, comm)?;
        check_slot(CALL, "newcomm", newcomm)?;
        let hinted = if info as usize == MPI_INFO_NULL {
            None
        } else {
            crate::c_abi::info::info(CALL, info)?.get("mpi_hw_resource_type")
        };
        // One kind of shared resource is known: the node (its shared memory). The guided
        // kinds name it by the standard's "mpi_shared_memory"; the unguided kind asks for a
        // strictly smaller resource than the communicator's, which Weft does not know of, so
        // it gets MPI_COMM_NULL (as the standard allows).
        let by_node = match split_type {
            MPI_COMM_TYPE_SHARED => true,
            MPI_COMM_TYPE_HW_GUIDED | MPI_COMM_TYPE_RESOURCE_GUIDED => {
                hinted.as_deref() == Some("mpi_shared_memory")
            }
            MPI_UNDEFINED | MPI_COMM_TYPE_HW_UNGUIDED => false,
            other => {
                return Err(CError::new(
                    MPI_ERR_ARG,
                    CALL,
                    format!("{other} is not a split type"),
                ))
            }
        };
        let split = if by_node {
            Some(c.comm.split_shared(key))
        } else {
            c.comm
                .try_split_by_color_with_key(Color::undefined(), key)
                .map_err(CError::from_weft)?
        };
        // SAFETY: checked non-null.
        unsafe { hand_out(newcomm, split.map(|s| Comm::new(s, c.errhandler.get()))) };
        Ok(())
    })
}
export!(Comm_split_type, comm_split_type);

pub unsafe extern "C" fn comm_free(comm: *mut *mut c_void) -> c_int {
    const CALL: &str = "MPI_Comm_free";
    guard(CALL, std::ptr::null_mut(), || {
        check_slot(CALL, "comm", comm)?;
        // SAFETY: checked non-null; the caller's handle.
        let handle = unsafe { *comm };
        let value = handle as usize;
        if value == MPI_COMM_WORLD || value == MPI_COMM_SELF {
            return Err(CError::new(
                MPI_ERR_COMM,
                CALL,
                "a predefined communicator cannot be freed",
            ));
        }
        let c = handles::comm(CALL, handle)?;
        delete_attributes(CALL, c, handle)?;
        if let Some(running) = crate::c_abi::state::running() {
            crate::c_abi::dynamic::forget_parent(running, handle);
        }
        c.magic.set(0);
        // SAFETY: a live user handle (checked by `handles::comm`), boxed by `hand_out`.
        drop(unsafe { Box::from_raw(handle.cast::<Comm>()) });
        // SAFETY: checked non-null.
        unsafe { *comm = MPI_COMM_NULL as *mut c_void };
        Ok(())
    })
}
export!(Comm_free, comm_free);

/// MPI_Comm_disconnect: a collective free that returns once the communicator's pending
/// communication is done. Weft's requests keep what they use, so a barrier (every member
/// has arrived, so none still sends on it) and a free do it.
pub unsafe extern "C" fn comm_disconnect(comm: *mut *mut c_void) -> c_int {
    const CALL: &str = "MPI_Comm_disconnect";
    let rc = guard(CALL, std::ptr::null_mut(), || {
        check_slot(CALL, "comm", comm)?;
        // SAFETY: checked non-null; the caller's handle.
        let c = handles::comm(CALL, unsafe { *comm })?;
        c.comm.barrier();
        Ok(())
    });
    if rc != MPI_SUCCESS {
        return rc;
    }
    // SAFETY: passed on.
    unsafe { comm_free(comm) }
}
export!(Comm_disconnect, comm_disconnect);

pub unsafe extern "C" fn comm_compare(
    comm1: *mut c_void,
    comm2: *mut c_void,
    result: *mut c_int,
) -> c_int {
    const CALL: &str = "MPI_Comm_compare";
    guard(CALL, comm1, || {
        let a = handles::comm(CALL, comm1)?;
        let b = handles::comm(CALL, comm2)?;
        let r = if std::ptr::eq(a, b) {
            MPI_IDENT
        } else {
            match a.comm.compare(&b.comm) {
                CommunicatorRelation::Identical => MPI_IDENT,
                CommunicatorRelation::Congruent => MPI_CONGRUENT,
                CommunicatorRelation::Similar => MPI_SIMILAR,
                CommunicatorRelation::Unequal => MPI_UNEQUAL,
            }
        };
        put_int(CALL, "result", result, r)
    })
}
export!(Comm_compare, comm_compare);

pub unsafe extern "C" fn comm_test_inter(comm: *mut c_void, flag: *mut c_int) -> c_int {
    const CALL: &str = "MPI_Comm_test_inter";
    guard(CALL, comm, || {
        let c = handles::comm(CALL, comm)?;
        put_int(CALL, "flag", flag, c.comm.test_inter().into())
    })
}
export!(Comm_test_inter, comm_test_inter);

pub unsafe extern "C" fn comm_set_name(comm: *mut c_void, name: *const c_char) -> c_int {
    const CALL: &str = "MPI_Comm_set_name";
    guard(CALL, comm, || {
        let c = handles::comm(CALL, comm)?;
        if name.is_null() {
            return Err(CError::new(
                MPI_ERR_ARG,
                CALL,
                "comm_name is a null pointer",
            ));
        }
        // SAFETY: the standard's contract: a NUL-terminated string.
        let text = unsafe { std::ffi::CStr::from_ptr(name) }.to_string_lossy();
        let max = MPI_MAX_OBJECT_NAME as usize - 1;
        let text: String = text.chars().take(max).collect();
        c.comm.set_name(&text);
        Ok(())
    })
}
export!(Comm_set_name, comm_set_name);

pub unsafe extern "C" fn comm_get_name(
    comm: *mut c_void,
    name: *mut c_char,
    resultlen: *mut c_int,
) -> c_int {
    const CALL: &str = "MPI_Comm_get_name";
    guard(CALL, comm, || {
        if name.is_null() || resultlen.is_null() {
            return Err(CError::new(MPI_ERR_ARG, CALL, "a null output pointer"));
        }
        // MPI_COMM_NULL has its name too (as MPICH and Open MPI answer).
        let text = match comm as usize {
            MPI_COMM_NULL => "MPI_COMM_NULL".to_string(),
            _ => handles::comm(CALL, comm)?.comm.get_name(),
        };
        // SAFETY: the standard's contract: MPI_MAX_OBJECT_NAME bytes at `name`.
        unsafe {
            crate::c_abi::errors::write_string(&text, name, MPI_MAX_OBJECT_NAME as usize, resultlen)
        };
        Ok(())
    })
}
export!(Comm_get_name, comm_get_name);

/// MPI_Comm_create_keyval and the deprecated MPI_Keyval_create.
pub(crate) unsafe fn create_keyval(
    call: &'static str,
    copy: usize,
    delete: usize,
    key: *mut c_int,
    extra: *mut c_void,
) -> c_int {
    guard(call, std::ptr::null_mut(), || {
        let r = state::running().ok_or_else(|| CError::not_initialized(call))?;
        let mut keyvals = r.keyvals.borrow_mut();
        let next = keyvals.keys().next_back().map_or(FIRST_KEYVAL, |k| k + 1);
        put_int(call, "comm_keyval", key, next)?;
        keyvals.insert(
            next,
            Keyval {
                copy,
                delete,
                extra_state: extra,
            },
        );
        Ok(())
    })
}

pub unsafe extern "C" fn comm_create_keyval(
    copy: usize,
    delete: usize,
    key: *mut c_int,
    extra: *mut c_void,
) -> c_int {
    // SAFETY: passed on.
    unsafe { create_keyval("MPI_Comm_create_keyval", copy, delete, key, extra) }
}
export!(Comm_create_keyval, comm_create_keyval);

pub unsafe extern "C" fn keyval_create(
    copy: usize,
    delete: usize,
    key: *mut c_int,
    extra: *mut c_void,
) -> c_int {
    // SAFETY: passed on.
    unsafe { create_keyval("MPI_Keyval_create", copy, delete, key, extra) }
}
export!(Keyval_create, keyval_create);

pub(crate) unsafe fn free_keyval(call: &'static str, key: *mut c_int) -> c_int {
    guard(call, std::ptr::null_mut(), || {
        if key.is_null() {
            return Err(CError::new(
                MPI_ERR_ARG,
                call,
                "comm_keyval is a null pointer",
            ));
        }
        // SAFETY: checked non-null.
        let k = unsafe { *key };
        keyval(call, k)?;
        // Attributes still set with it keep their callbacks until they are deleted, as the
        // standard requires, so the key stays in the table; numbers are never reused.
        // SAFETY: checked non-null.
        unsafe { *key = MPI_KEYVAL_INVALID };
        Ok(())
    })
}

pub unsafe extern "C" fn comm_free_keyval(key: *mut c_int) -> c_int {
    // SAFETY: passed on.
    unsafe { free_keyval("MPI_Comm_free_keyval", key) }
}
export!(Comm_free_keyval, comm_free_keyval);

pub unsafe extern "C" fn keyval_free(key: *mut c_int) -> c_int {
    // SAFETY: passed on.
    unsafe { free_keyval("MPI_Keyval_free", key) }
}
export!(Keyval_free, keyval_free);

/// The value of a predefined attribute (a pointer to its int), or `None` if `key` is not one.
fn predefined(key: c_int) -> Option<*mut c_void> {
    let a = &state::running()?.predefined_attrs;
    let value = match key {
        MPI_TAG_UB => &a.tag_ub,
        MPI_HOST => &a.host,
        MPI_IO => &a.io,
        MPI_WTIME_IS_GLOBAL => &a.wtime_is_global,
        MPI_UNIVERSE_SIZE => &a.universe_size,
        MPI_APPNUM => &a.appnum,
        MPI_LASTUSEDCODE => return Some(a.lastusedcode.as_ptr().cast()),
        _ => return None,
    };
    Some((value as *const c_int).cast_mut().cast())
}

unsafe fn get_attr(
    call: &'static str,
    comm: *mut c_void,
    key: c_int,
    value: *mut c_void,
    flag: *mut c_int,
) -> c_int {
    guard(call, comm, || {
        let c = handles::comm(call, comm)?;
        if value.is_null() {
            return Err(CError::new(
                MPI_ERR_ARG,
                call,
                "attribute_val is a null pointer",
            ));
        }
        let found = match predefined(key) {
            Some(v) => Some(v),
            None => {
                keyval(call, key)?;
                c.attrs
                    .borrow()
                    .iter()
                    .find(|(k, _)| *k == key)
                    .map(|(_, v)| *v)
            }
        };
        put_int(call, "flag", flag, found.is_some().into())?;
        if let Some(v) = found {
            // SAFETY: the standard's contract: `attribute_val` is the address of a pointer.
            unsafe { *value.cast::<*mut c_void>() = v };
        }
        Ok(())
    })
}

pub unsafe extern "C" fn comm_get_attr(
    comm: *mut c_void,
    key: c_int,
    value: *mut c_void,
    flag: *mut c_int,
) -> c_int {
    // SAFETY: passed on.
    unsafe { get_attr("MPI_Comm_get_attr", comm, key, value, flag) }
}
export!(Comm_get_attr, comm_get_attr);

pub unsafe extern "C" fn attr_get(
    comm: *mut c_void,
    key: c_int,
    value: *mut c_void,
    flag: *mut c_int,
) -> c_int {
    // SAFETY: passed on.
    unsafe { get_attr("MPI_Attr_get", comm, key, value, flag) }
}
export!(Attr_get, attr_get);

fn set_attr(call: &'static str, comm: *mut c_void, key: c_int, value: *mut c_void) -> c_int {
    guard(call, comm, || {
        let c = handles::comm(call, comm)?;
        if predefined(key).is_some() {
            return Err(CError::new(
                MPI_ERR_KEYVAL,
                call,
                format!("{key} is a predefined attribute: it cannot be set"),
            ));
        }
        set_keyed(call, &c.attrs, comm, key, value)
    })
}

/// An object's keyed attributes (a communicator's, a window's), in the order they were set.
pub(crate) type Attrs = std::cell::RefCell<Vec<(i32, *mut c_void)>>;

/// Sets `key` to `value` among `attrs` (of the object `handle`): the old value's delete
/// callback first, and if it fails the old value stays.
pub(crate) fn set_keyed(
    call: &'static str,
    attrs: &Attrs,
    handle: *mut c_void,
    key: c_int,
    value: *mut c_void,
) -> Result<(), CError> {
    keyval(call, key)?;
    let old = attrs
        .borrow()
        .iter()
        .find(|(k, _)| *k == key)
        .map(|&(_, v)| v);
    if let Some(v) = old {
        delete_one(call, handle, key, v)?;
    }
    let mut attrs = attrs.borrow_mut();
    attrs.retain(|(k, _)| *k != key);
    attrs.push((key, value));
    Ok(())
}

/// Deletes `key` from `attrs` (of the object `handle`, a `what`), once its delete callback
/// succeeds (a failing one keeps it).
pub(crate) fn delete_keyed(
    call: &'static str,
    attrs: &Attrs,
    handle: *mut c_void,
    key: c_int,
    what: &str,
) -> Result<(), CError> {
    keyval(call, key)?;
    let value = attrs
        .borrow()
        .iter()
        .find(|(k, _)| *k == key)
        .map(|&(_, v)| v);
    let Some(v) = value else {
        return Err(CError::new(
            MPI_ERR_KEYVAL,
            call,
            format!("attribute key {key} is not set on this {what}"),
        ));
    };
    delete_one(call, handle, key, v)?;
    attrs.borrow_mut().retain(|(k, _)| *k != key);
    Ok(())
}

pub extern "C" fn comm_set_attr(comm: *mut c_void, key: c_int, value: *mut c_void) -> c_int {
    set_attr("MPI_Comm_set_attr", comm, key, value)
}
export!(Comm_set_attr, comm_set_attr);

pub extern "C" fn attr_put(comm: *mut c_void, key: c_int, value: *mut c_void) -> c_int {
    set_attr("MPI_Attr_put", comm, key, value)
}
export!(Attr_put, attr_put);

fn delete_attr(call: &'static str, comm: *mut c_void, key: c_int) -> c_int {
    guard(call, comm, || {
        let c = handles::comm(call, comm)?;
        delete_keyed(call, &c.attrs, comm, key, "communicator")
    })
}

pub extern "C" fn comm_delete_attr(comm: *mut c_void, key: c_int) -> c_int {
    delete_attr("MPI_Comm_delete_attr", comm, key)
}
export!(Comm_delete_attr, comm_delete_attr);

pub extern "C" fn attr_delete(comm: *mut c_void, key: c_int) -> c_int {
    delete_attr("MPI_Attr_delete", comm, key)
}
export!(Attr_delete, attr_delete);
