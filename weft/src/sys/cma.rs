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

/// Which way a cross-memory copy goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Direction {
    /// From the other process into ours (`process_vm_readv`).
    Read,
    /// From ours into the other process (`process_vm_writev`).
    Write,
}

/// Copies `dst.len()` bytes from address `remote` in process `pid` into `dst`.
///
/// # Safety
/// `remote..remote + dst.len()` in `pid` is a buffer its owner has lent for this copy:
/// allocated, unmoved and not written until it returns. (When `pid` is this process, that is
/// the aliasing rule for a shared borrow; the kernel turns an unmapped address into an error,
/// but not a freed or reused one.)
pub unsafe fn read_from(pid: u32, remote: u64, dst: &mut [u8]) -> Result<(), CmaError> {
    copy(pid, remote, dst.as_mut_ptr(), dst.len(), Direction::Read)
}

/// Copies `src` to address `remote` in process `pid`.
///
/// # Safety
/// `remote..remote + src.len()` in `pid` is a buffer its owner has lent for this copy:
/// allocated, unmoved, and neither read nor written by anyone else until it returns. (When
/// `pid` is this process, that is the aliasing rule for an exclusive borrow.)
pub unsafe fn write_to(pid: u32, remote: u64, src: &[u8]) -> Result<(), CmaError> {
    // `copy` only reads through the pointer in the Write direction.
    copy(
        pid,
        remote,
        src.as_ptr() as *mut u8,
        src.len(),
        Direction::Write,
    )
}

/// Whether cross-memory copies work here at all (a seccomp filter or a container may forbid
/// `process_vm_readv`), tried on this process's own memory. (Whether the Yama policy lets
/// one process read another is a separate question: a process may always read itself.)
pub fn works_here() -> io::Result<()> {
    let src = [7u8; 64];
    let mut dst = [0u8; 64];
    // `src` is a live local of this very process, unwritten during the copy; `dst` is
    // exclusively borrowed and 64 bytes long.
    let r = copy(
        std::process::id(),
        src.as_ptr() as u64,
        dst.as_mut_ptr(),
        dst.len(),
        Direction::Read,
    );
    match r {
        Ok(()) if dst == src => Ok(()),
        Ok(()) => Err(io::Error::other(
            "process_vm_readv copied other bytes than asked",
        )),
        Err(CmaError::Unsupported(e) | CmaError::Failed(e)) => Err(e),
    }
}

/// The copy loop: repeats until all `len` bytes moved (the kernel may copy less per call).
/// `local` must be valid for `len` bytes: writable for `Read`, readable for `Write`.
fn copy(pid: u32, remote: u64, local: *mut u8, len: usize, dir: Direction) -> Result<(), CmaError> {
    let mut done = 0usize;
    while done < len {
        let local_iov = libc::iovec {
            iov_base: local.wrapping_add(done).cast(),
            iov_len: len - done,
        };
        let remote_iov = libc::iovec {
            iov_base: (remote as usize).wrapping_add(done) as *mut libc::c_void,
            iov_len: len - done,
        };
        // SAFETY: `local_iov` describes `len - done` bytes of the caller's buffer, which is
        // live and (for Read) exclusively borrowed, so the kernel may write it; for Write the
        // kernel only reads it. The remote iovec is interpreted in the other process's
        // address space only (a bad address there gives EFAULT, not undefined behaviour here).
        let n = unsafe {
            match dir {
                Direction::Read => {
                    libc::process_vm_readv(pid as libc::pid_t, &local_iov, 1, &remote_iov, 1, 0)
                }
                Direction::Write => {
                    libc::process_vm_writev(pid as libc::pid_t, &local_iov, 1, &remote_iov, 1, 0)
                }
            }
        };
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
                format!("{dir:?} by cross-memory copy moved nothing"),
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
    fn works_here_unless_the_sandbox_refuses() {
        if let Err(e) = works_here() {
            let refused = matches!(
                e.raw_os_error(),
                Some(libc::EPERM | libc::ENOSYS | libc::EACCES)
            );
            assert!(refused, "process_vm_readv on our own memory: {e}");
        }
    }

    #[test]
    fn reads_own_memory() {
        let src: Vec<u8> = (0..10_000u32).map(|i| (i * 7) as u8).collect();
        let mut dst = vec![0u8; src.len()];
        // SAFETY: `src` is live and unwritten during the copy.
        match unsafe { read_from(std::process::id(), src.as_ptr() as u64, &mut dst) } {
            Ok(()) => assert_eq!(src, dst),
            Err(CmaError::Unsupported(_)) => {} // a locked-down sandbox: the fallback case
            Err(CmaError::Failed(e)) => panic!("{e}"),
        }
        // SAFETY: address 8 is in page zero, which Linux never maps (vm.mmap_min_addr), so the
        // kernel reports EFAULT and reads nothing.
        let bad = unsafe { read_from(std::process::id(), 8, &mut dst[..16]) };
        assert!(bad.is_err());
        let mut target = vec![0u8; 1000];
        // SAFETY: `target` is live, and nothing else reads or writes it during the copy.
        match unsafe { write_to(std::process::id(), target.as_mut_ptr() as u64, &src[..1000]) } {
            Ok(()) => assert_eq!(target, src[..1000]),
            Err(CmaError::Unsupported(_)) => {}
            Err(CmaError::Failed(e)) => panic!("{e}"),
        }
    }
}
