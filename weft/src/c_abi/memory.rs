//! MPI_Alloc_mem and MPI_Free_mem: memory for the program, node-shared when the system allows
//! (`comm::program_memory`), so that a window created over it is reached directly by the
//! members on its node; freeing a block MPI did not hand out is an error, not undefined
//! behaviour.

use crate::c_abi::abi::*;
use crate::c_abi::errors::{guard, CError};
use crate::comm::program_memory;
use std::ffi::{c_int, c_void};

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
        let p = program_memory::allocate(size).ok_or_else(|| {
            CError::new(
                MPI_ERR_NO_MEM,
                CALL,
                format!("out of memory allocating {size} bytes"),
            )
        })?;
        // SAFETY: checked non-null; the standard's contract: `baseptr` points to a pointer.
        unsafe { *baseptr.cast::<*mut u8>() = p };
        Ok(())
    })
}
export!(Alloc_mem, alloc_mem);

pub unsafe extern "C" fn free_mem(base: *mut c_void) -> c_int {
    const CALL: &str = "MPI_Free_mem";
    guard(CALL, std::ptr::null_mut(), || {
        // SAFETY: the standard's contract: the program uses the block no more.
        if !unsafe { program_memory::free(base.cast()) } {
            return Err(CError::new(
                MPI_ERR_BASE,
                CALL,
                format!("{base:p} is not memory MPI_Alloc_mem handed out (or it was freed)"),
            ));
        }
        Ok(())
    })
}
export!(Free_mem, free_mem);
