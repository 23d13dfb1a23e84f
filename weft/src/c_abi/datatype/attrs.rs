//! Datatype attributes: keyvals with copy callbacks (run by MPI_Type_dup) and delete
//! callbacks (run by MPI_Type_delete_attr, MPI_Type_free and when a value is replaced), on
//! derived and predefined types alike. Datatype keys are numbered apart from communicator
//! keys (from [`FIRST_TYPE_KEYVAL`]). A freed key lives on, unusable for new attributes,
//! while attributes still use it (their delete callbacks need it), as MPI says.
//!
//! No lock is held while a callback runs: callbacks may call MPI (free a key, say).

use super::decode;
use crate::c_abi::abi::*;
use crate::c_abi::env::put_int;
use crate::c_abi::errors::{guard, CError};
use std::collections::BTreeMap;
use std::ffi::{c_int, c_void};
use std::sync::{Mutex, MutexGuard};

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
/// extra state, as addresses; how many attributes use it; whether the program freed it.
#[derive(Clone, Copy)]
struct Keyval {
    copy: usize,
    delete: usize,
    extra: usize,
    uses: usize,
    freed: bool,
}

static KEYVALS: Mutex<BTreeMap<c_int, Keyval>> = Mutex::new(BTreeMap::new());

/// Attribute values, (key, value address) in the order they were set, by datatype handle.
static ATTRS: Mutex<BTreeMap<usize, Vec<(c_int, usize)>>> = Mutex::new(BTreeMap::new());

fn keyvals() -> MutexGuard<'static, BTreeMap<c_int, Keyval>> {
    KEYVALS.lock().unwrap_or_else(|e| e.into_inner())
}

fn attrs() -> MutexGuard<'static, BTreeMap<usize, Vec<(c_int, usize)>>> {
    ATTRS.lock().unwrap_or_else(|e| e.into_inner())
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

/// Counts one more (`up`) or one less attribute using `key`; a freed key none uses goes.
fn use_key(key: c_int, up: bool) {
    let mut k = keyvals();
    if let Some(v) = k.get_mut(&key) {
        if up {
            v.uses += 1;
        } else {
            v.uses = v.uses.saturating_sub(1);
            if v.freed && v.uses == 0 {
                k.remove(&key);
            }
        }
    }
}

/// The attributes the type `old` (its handle) passes to its duplicate `new`, through the
/// copy callbacks.
pub(crate) fn copy_all(
    call: &'static str,
    old: *mut c_void,
    new: *mut c_void,
) -> Result<(), CError> {
    let list = attrs().get(&(old as usize)).cloned().unwrap_or_default();
    let mut out = vec![];
    for (key, value) in list {
        let k = keyval(call, key)?;
        match k.copy {
            0 => {}
            1 => out.push((key, value)),
            f => {
                // SAFETY: the program registered `f` as an MPI_Type_copy_attr_function.
                let f: CopyFn = unsafe { std::mem::transmute::<usize, CopyFn>(f) };
                let mut copied: *mut c_void = std::ptr::null_mut();
                let mut flag: c_int = 0;
                // SAFETY: the callback's contract: the arguments MPI passes.
                let rc = unsafe {
                    f(
                        old,
                        key,
                        k.extra as *mut c_void,
                        value as *mut c_void,
                        std::ptr::from_mut(&mut copied).cast(),
                        &mut flag,
                    )
                };
                if rc != MPI_SUCCESS {
                    return Err(CError::new(
                        MPI_ERR_OTHER,
                        call,
                        format!("the copy callback of datatype attribute key {key} returned {rc}"),
                    ));
                }
                if flag != 0 {
                    out.push((key, copied as usize));
                }
            }
        }
    }
    for &(key, _) in &out {
        use_key(key, true);
    }
    if !out.is_empty() {
        attrs().insert(new as usize, out);
    }
    Ok(())
}

/// Runs `key`'s delete callback on `value`.
fn run_delete(
    call: &'static str,
    handle: *mut c_void,
    key: c_int,
    value: usize,
) -> Result<(), CError> {
    let k = keyval(call, key)?;
    if k.delete != 0 {
        // SAFETY: the program registered it as an MPI_Type_delete_attr_function.
        let f: DeleteFn = unsafe { std::mem::transmute::<usize, DeleteFn>(k.delete) };
        // SAFETY: the callback's contract.
        let rc = unsafe { f(handle, key, value as *mut c_void, k.extra as *mut c_void) };
        if rc != MPI_SUCCESS {
            return Err(CError::new(
                MPI_ERR_OTHER,
                call,
                format!("the delete callback of datatype attribute key {key} returned {rc}"),
            ));
        }
    }
    use_key(key, false);
    Ok(())
}

/// Deletes every attribute of the type `handle` (being freed), newest first.
pub(crate) fn delete_all(call: &'static str, handle: *mut c_void) -> Result<(), CError> {
    loop {
        let next = {
            let mut a = attrs();
            let list = a.get_mut(&(handle as usize));
            let next = list.and_then(|l| l.pop());
            if next.is_none() {
                a.remove(&(handle as usize));
            }
            next
        };
        let Some((key, value)) = next else {
            return Ok(());
        };
        run_delete(call, handle, key, value)?;
    }
}

pub unsafe extern "C" fn type_create_keyval(
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
                uses: 0,
                freed: false,
            },
        );
        Ok(())
    })
}
export!(Type_create_keyval, type_create_keyval);

pub unsafe extern "C" fn type_free_keyval(key: *mut c_int) -> c_int {
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
        {
            let mut all = keyvals();
            let Some(v) = all.get_mut(&k) else {
                return Err(CError::new(
                    MPI_ERR_KEYVAL,
                    CALL,
                    format!("{k} is not a datatype attribute key (or it was freed)"),
                ));
            };
            // Freeing a key again while attributes keep it is harmless.
            v.freed = true;
            if v.uses == 0 {
                all.remove(&k);
            }
        }
        // SAFETY: checked non-null.
        unsafe { *key = MPI_KEYVAL_INVALID };
        Ok(())
    })
}
export!(Type_free_keyval, type_free_keyval);

pub unsafe extern "C" fn type_set_attr(
    datatype: *mut c_void,
    key: c_int,
    value: *mut c_void,
) -> c_int {
    const CALL: &str = "MPI_Type_set_attr";
    guard(CALL, std::ptr::null_mut(), || {
        decode(CALL, datatype)?;
        if keyval(CALL, key)?.freed {
            return Err(CError::new(
                MPI_ERR_KEYVAL,
                CALL,
                format!("the datatype attribute key {key} was freed"),
            ));
        }
        // The old value's delete callback first (no borrow held: it may call MPI): if it
        // fails, the old value stays. It gives back the key's use the new value takes.
        let old = attrs()
            .get(&(datatype as usize))
            .and_then(|l| l.iter().find(|(k, _)| *k == key).map(|a| a.1));
        if let Some(old) = old {
            run_delete(CALL, datatype, key, old)?;
        }
        let mut a = attrs();
        let list = a.entry(datatype as usize).or_default();
        match list.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = value as usize,
            None => list.push((key, value as usize)),
        }
        use_key(key, true);
        Ok(())
    })
}
export!(Type_set_attr, type_set_attr);

pub unsafe extern "C" fn type_get_attr(
    datatype: *mut c_void,
    key: c_int,
    value: *mut c_void,
    flag: *mut c_int,
) -> c_int {
    const CALL: &str = "MPI_Type_get_attr";
    guard(CALL, std::ptr::null_mut(), || {
        decode(CALL, datatype)?;
        keyval(CALL, key)?;
        if value.is_null() {
            return Err(CError::new(
                MPI_ERR_ARG,
                CALL,
                "attribute_val is a null pointer",
            ));
        }
        let found = attrs()
            .get(&(datatype as usize))
            .and_then(|l| l.iter().find(|(k, _)| *k == key).map(|a| a.1));
        put_int(CALL, "flag", flag, found.is_some().into())?;
        if let Some(v) = found {
            // SAFETY: checked non-null; the standard's contract: the address of a pointer.
            unsafe { *value.cast::<*mut c_void>() = v as *mut c_void };
        }
        Ok(())
    })
}
export!(Type_get_attr, type_get_attr);

pub unsafe extern "C" fn type_delete_attr(datatype: *mut c_void, key: c_int) -> c_int {
    const CALL: &str = "MPI_Type_delete_attr";
    guard(CALL, std::ptr::null_mut(), || {
        decode(CALL, datatype)?;
        keyval(CALL, key)?;
        let found = attrs()
            .get(&(datatype as usize))
            .and_then(|l| l.iter().find(|(k, _)| *k == key).map(|a| a.1));
        let Some(value) = found else {
            return Err(CError::new(
                MPI_ERR_KEYVAL,
                CALL,
                format!("the datatype has no attribute for key {key}"),
            ));
        };
        // Removed only once its delete callback succeeds (a failing one keeps it).
        run_delete(CALL, datatype, key, value)?;
        if let Some(l) = attrs().get_mut(&(datatype as usize)) {
            l.retain(|(k, _)| *k != key);
        }
        Ok(())
    })
}
export!(Type_delete_attr, type_delete_attr);
