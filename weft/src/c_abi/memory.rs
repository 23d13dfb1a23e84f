//! MPI_Alloc_mem and MPI_Free_mem: memory for the program, 64-byte aligned, from Rust's
//! allocator; each block is recorded, so freeing one MPI did not hand out is an error, not
//! undefined behaviour. (With one-sided windows, the RMA issue places it in node-shared
//! memory.)

use crate::c_abi::abi::*;
use crate::c_abi::errors::{guard, CError};
use std::alloc::Layout;
use std::collections::BTreeMap;
use std::ffi::{c_int, c_void};
use std::sync::Mutex;

/// Blocks handed out and not freed: address → layout.
static BLOCKS: Mutex<BTreeMap<usize, Layout>> = Mutex::new(BTreeMap::new());

const ALIGN: usize = 64;

pub unsafe extern "C" fn alloc_mem(size: isize, info: *mut c_void, baseptr: *mut c_void) -> c_int {
    const CALL: &str = "MPI_Alloc_mem";
    guard(CALL, std::ptr::null_mut(), || {
        let size = usize::try_from(size)
            .map_err(|_| CError::new(MPI_ERR_SIZE, CALL, format!("the size {size} is negative")))?;
        if info as usize != MPI_INFO_NULL {
            crate::c_abi::info::info(CALL, info)?;
        }
        if baseptr.is_null() {
            return Err(CError::new(MPI_ERR_ARG, CALL, "baseptr is a null pointer"));
        }
        let layout = Layout::from_size_align(size.max(1), ALIGN).map_err(|_| {
            CError::new(
                MPI_ERR_NO_MEM,
                CALL,
                format!("{size} bytes cannot be allocated"),
            )
        })?;
        // SAFETY: the layout's size is not zero.
        let p = unsafe { std::alloc::alloc(layout) };
        if p.is_null() {
            return Err(CError::new(
                MPI_ERR_NO_MEM,
                CALL,
                format!("out of memory allocating {size} bytes"),
            ));
        }
        BLOCKS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(p as usize, layout);
        // SAFETY: checked non-null; the standard's contract: `baseptr` points to a pointer.
        unsafe { *baseptr.cast::<*mut u8>() = p };
        Ok(())
    })
}
export!(Alloc_mem, alloc_mem);

pub unsafe extern "C" fn free_mem(base: *mut c_void) -> c_int {
    const CALL: &str = "MPI_Free_mem";
    guard(CALL, std::ptr::null_mut(), || {
        let layout = BLOCKS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&(base as usize))
            .ok_or_else(|| {
                CError::new(
                    MPI_ERR_BASE,
                    CALL,
                    format!("{base:p} is not memory MPI_Alloc_mem handed out (or it was freed)"),
                )
            })?;
        // SAFETY: allocated above with this layout, and not freed since (it was recorded).
        unsafe { std::alloc::dealloc(base.cast(), layout) };
        Ok(())
    })
}
export!(Free_mem, free_mem);
