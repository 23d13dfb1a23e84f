//! Datatype attributes: keyvals with copy callbacks (run by MPI_Type_dup) and delete
//! callbacks (run by MPI_Type_delete_attr, MPI_Type_free and when a value is replaced).
//! Datatype keys are numbered apart from communicator keys (from [`FIRST_TYPE_KEYVAL`]).

use super::{decode, CType, Type};
use crate::abi::*;
use crate::env::put_int;
use crate::errors::{guard, CError};
use std::collections::BTreeMap;
use std::ffi::{c_int, c_void};
use std::sync::Mutex;

/// The first number MPI_Type_create_keyval hands out.
const FIRST_TYPE_KEYVAL: c_int = 0x4000;

/// MPI_Type_copy_attr_function.
type CopyFn = unsafe extern "C" fn(
    *mut c_void,
    c_int,
    *mut c_void,
    *mut c_void,
    *mut c_void,
    *mut c_int,
) -> c_int;
/// MPI_Type_delete_attr_function.
type DeleteFn = unsafe extern "C" fn(*mut c_void, c_int, *mut c_void, *mut c_void) -> c_int;

/// A datatype keyval: the callbacks (0: the null ones; copy 1: MPI_TYPE_DUP_FN) and the
/// extra state, as addresses.
#[derive(Clone, Copy)]
struct Keyval {
    copy: usize,
    delete: usize,
    extra: usize,
}

static KEYVALS: Mutex<BTreeMap<c_int, Keyval>> = Mutex::new(BTreeMap::new());

fn keyvals() -> std::sync::MutexGuard<'static, BTreeMap<c_int, Keyval>> {
    KEYVALS.lock().unwrap_or_else(|e| e.into_inner())
}

fn keyval(call: &'static str, key: c_int) -> Result<Keyval, CError> {
    keyvals().get(&key).copied().ok_or_else(|| {
        CError::new(
            MPI_ERR_KEYVAL,
            call,
            format!("{key} is not a datatype attribute key (or it was freed)"),
        )
    })
}

/// The derived type of `handle` (attributes on predefined types are not kept).
fn derived(call: &'static str, handle: *mut c_void) -> Result<&'static CType, CError> {
    match decode(call, handle)? {
        Type::Derived(t) => Ok(t),
        Type::Predefined(..) => Err(CError::new(
            MPI_ERR_TYPE,
            call,
            format!(
                "{:#x} is a predefined datatype: Weft keeps no attributes on those",
                handle as usize
            ),
        )),
    }
}

/// The attributes `old` (handle `handle`) passes to a duplicate, through the copy callbacks.
pub(crate) fn copy_all(
    call: &'static str,
    old: &CType,
    handle: *mut c_void,
) -> Result<Vec<(c_int, *mut c_void)>, CError> {
    let mut out = vec![];
    let attrs = old.attrs.borrow().clone();
    for (key, value) in attrs {
        let k = keyval(call, key)?;
        match k.copy {
            0 => {}
            1 => out.push((key, value)),
            f => {
                // SAFETY: the program registered `f` as an MPI_Type_copy_attr_function.
                let f: CopyFn = unsafe { std::mem::transmute::<usize, CopyFn>(f) };
                let mut new: *mut c_void = std::ptr::null_mut();
                let mut flag: c_int = 0;
                // SAFETY: the callback's contract: the arguments MPI passes.
                let rc = unsafe {
                    f(
                        handle,
                        key,
                        k.extra as *mut c_void,
                        value,
                        std::ptr::from_mut(&mut new).cast(),
                        &mut flag,
                    )
                };
                if rc != MPI_SUCCESS {
                    return Err(CError::new(
                        rc,
                        call,
                        format!("the copy callback of datatype attribute key {key} returned {rc}"),
                    ));
                }
                if flag != 0 {
                    out.push((key, new));
                }
            }
        }
    }
    Ok(out)
}

/// Runs `key`'s delete callback on `value`.
fn run_delete(
    call: &'static str,
    handle: *mut c_void,
    key: c_int,
    value: *mut c_void,
) -> Result<(), CError> {
    let k = keyval(call, key)?;
    if k.delete != 0 {
        // SAFETY: the program registered it as an MPI_Type_delete_attr_function.
        let f: DeleteFn = unsafe { std::mem::transmute::<usize, DeleteFn>(k.delete) };
        // SAFETY: the callback's contract.
        let rc = unsafe { f(handle, key, value, k.extra as *mut c_void) };
        if rc != MPI_SUCCESS {
            return Err(CError::new(
                rc,
                call,
                format!("the delete callback of datatype attribute key {key} returned {rc}"),
            ));
        }
    }
    Ok(())
}

/// Deletes every attribute of `t` (handle `handle`), newest first.
pub(crate) fn delete_all(call: &'static str, t: &CType, handle: *mut c_void) -> Result<(), CError> {
    loop {
        let Some((key, value)) = t.attrs.borrow_mut().pop() else {
            return Ok(());
        };
        run_delete(call, handle, key, value)?;
    }
}

unsafe extern "C" fn type_create_keyval(
    copy: Option<CopyFn>,
    delete: Option<DeleteFn>,
    key: *mut c_int,
    extra: *mut c_void,
) -> c_int {
    const CALL: &str = "MPI_Type_create_keyval";
    guard(CALL, std::ptr::null_mut(), || {
        let mut k = keyvals();
        let next = k.keys().next_back().map_or(FIRST_TYPE_KEYVAL, |k| k + 1);
        put_int(CALL, "type_keyval", key, next)?;
        k.insert(
            next,
            Keyval {
                copy: copy.map_or(0, |f| f as usize),
                delete: delete.map_or(0, |f| f as usize),
                extra: extra as usize,
            },
        );
        Ok(())
    })
}
export!(Type_create_keyval, type_create_keyval);

unsafe extern "C" fn type_free_keyval(key: *mut c_int) -> c_int {
    const CALL: &str = "MPI_Type_free_keyval";
    guard(CALL, std::ptr::null_mut(), || {
        if key.is_null() {
            return Err(CError::new(
                MPI_ERR_ARG,
                CALL,
                "type_keyval is a null pointer",
            ));
        }
        // SAFETY: checked non-null.
        let k = unsafe { *key };
        keyval(CALL, k)?;
        keyvals().remove(&k);
        // SAFETY: checked non-null.
        unsafe { *key = MPI_KEYVAL_INVALID };
        Ok(())
    })
}
export!(Type_free_keyval, type_free_keyval);

unsafe extern "C" fn type_set_attr(datatype: *mut c_void, key: c_int, value: *mut c_void) -> c_int {
    const CALL: &str = "MPI_Type_set_attr";
    guard(CALL, std::ptr::null_mut(), || {
        let t = derived(CALL, datatype)?;
        keyval(CALL, key)?;
        let old = {
            let mut attrs = t.attrs.borrow_mut();
            match attrs.iter_mut().find(|(k, _)| *k == key) {
                Some(slot) => Some(std::mem::replace(&mut slot.1, value)),
                None => {
                    attrs.push((key, value));
                    None
                }
            }
        };
        if let Some(old) = old {
            run_delete(CALL, datatype, key, old)?;
        }
        Ok(())
    })
}
export!(Type_set_attr, type_set_attr);

unsafe extern "C" fn type_get_attr(
    datatype: *mut c_void,
    key: c_int,
    value: *mut c_void,
    flag: *mut c_int,
) -> c_int {
    const CALL: &str = "MPI_Type_get_attr";
    guard(CALL, std::ptr::null_mut(), || {
        keyval(CALL, key)?;
        if value.is_null() {
            return Err(CError::new(
                MPI_ERR_ARG,
                CALL,
                "attribute_val is a null pointer",
            ));
        }
        let found = match decode(CALL, datatype)? {
            Type::Derived(t) => t
                .attrs
                .borrow()
                .iter()
                .find(|(k, _)| *k == key)
                .map(|a| a.1),
            Type::Predefined(..) => None,
        };
        put_int(CALL, "flag", flag, found.is_some().into())?;
        if let Some(v) = found {
            // SAFETY: checked non-null; the standard's contract: the address of a pointer.
            unsafe { *value.cast::<*mut c_void>() = v };
        }
        Ok(())
    })
}
export!(Type_get_attr, type_get_attr);

unsafe extern "C" fn type_delete_attr(datatype: *mut c_void, key: c_int) -> c_int {
    const CALL: &str = "MPI_Type_delete_attr";
    guard(CALL, std::ptr::null_mut(), || {
        let t = derived(CALL, datatype)?;
        keyval(CALL, key)?;
        let found = {
            let mut attrs = t.attrs.borrow_mut();
            let i = attrs.iter().position(|(k, _)| *k == key);
            i.map(|i| attrs.remove(i))
        };
        let Some((_, value)) = found else {
            return Err(CError::new(
                MPI_ERR_KEYVAL,
                CALL,
                format!("the datatype has no attribute for key {key}"),
            ));
        };
        run_delete(CALL, datatype, key, value)
    })
}
export!(Type_delete_attr, type_delete_attr);
