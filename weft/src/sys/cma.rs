//! Cross-memory attach: copying from another process's address space in one copy
//! (`process_vm_readv`), as MPICH and Open MPI do for large same-node messages.

use std::io;

/// Why a cross-memory read did not complete.
#[derive(Debug)]
pub enum CmaError {
    /// The kernel or its policy (Yama ptrace scope, seccomp, a container) refuses it:
    /// the caller should fall back to copying through shared memory.
    Unsupported(io::Error),
    /// The read was attempted and failed (the process is gone, the address is bad).
    Failed(io::Error),
}

/// Copies `dst.len()` bytes from address `remote` in process `pid` into `dst`.
pub fn read_from(pid: u32, remote: u64, dst: &mut [u8]) -> Result<(), CmaError> {
    let mut done = 0usize;
    while done < dst.len() {
        let rest = &mut dst[done..];
        let local = libc::iovec {
            iov_base: rest.as_mut_ptr().cast(),
            iov_len: rest.len(),
        };
        let remote_iov = libc::iovec {
            iov_base: (remote as usize).wrapping_add(done) as *mut libc::c_void,
            iov_len: rest.len(),
        };
        // SAFETY: `local` describes `rest`, a live, exclusively borrowed buffer the kernel
        // writes at most `rest.len()` bytes into. The remote iovec is only interpreted in the
        // other process's address space (a bad address there yields EFAULT, not UB here).
        let n = unsafe { libc::process_vm_readv(pid as libc::pid_t, &local, 1, &remote_iov, 1, 0) };
        if n < 0 {
            let e = io::Error::last_os_error();
            return Err(match e.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::EPERM | libc::ENOSYS | libc::EACCES) => CmaError::Unsupported(e),
                _ => CmaError::Failed(e),
            });
        }
        if n == 0 {
            return Err(CmaError::Failed(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "process_vm_readv copied nothing",
            )));
        }
        done += n as usize;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_own_memory() {
        let src: Vec<u8> = (0..10_000u32).map(|i| (i * 7) as u8).collect();
        let mut dst = vec![0u8; src.len()];
        match read_from(std::process::id(), src.as_ptr() as u64, &mut dst) {
            Ok(()) => assert_eq!(src, dst),
            Err(CmaError::Unsupported(_)) => {} // a locked-down sandbox: the fallback case
            Err(CmaError::Failed(e)) => panic!("{e}"),
        }
        let bad = read_from(std::process::id(), 8, &mut dst[..16]);
        assert!(bad.is_err());
    }
}
